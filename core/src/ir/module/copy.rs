//! Copying a module into another one's storage: the restart point of a
//! pass that must undo what it did (the linear scan's restart after an
//! access split, [`crate::mem::lsa`]).
//!
//! Invariant: [`Module::copy_from`] reserves in every vector of the
//! destination at least the source's reserved room, never less, and then
//! copies the elements. A copy made once when storage is reserved therefore
//! has the source's capacity, and copying back and forth between the two
//! afterwards (within what they reserved) touches no heap.

use alloc::vec::Vec;

use super::Module;
use crate::ir::column::Column;
use crate::ir::column::EntityRef;
use crate::ir::imm::ImmTable;
use crate::ir::names::NamePool;

/// A value copied into another one's storage (see the module doc).
pub(super) trait CopyInto {
    /// Makes `self` equal to `src`, reserving at least `src`'s room.
    fn copy_from(&mut self, src: &Self);
}

impl<T: Clone> CopyInto for Vec<T> {
    fn copy_from(&mut self, src: &Self) {
        crate::storage::copy_into(self, src);
    }
}

impl<K: EntityRef, V: Clone> CopyInto for Column<K, V> {
    fn copy_from(&mut self, src: &Self) {
        self.copy_from_column(src);
    }
}

impl CopyInto for ImmTable {
    fn copy_from(&mut self, src: &Self) {
        self.copy_from_table(src);
    }
}

impl CopyInto for NamePool {
    fn copy_from(&mut self, src: &Self) {
        self.copy_from_pool(src);
    }
}

impl Module {
    /// Makes `self` a copy of `src` (every column, pool and name index),
    /// reusing `self`'s storage: allocation-free when `self` already holds
    /// at least `src`'s reserved room in every column (a module that was
    /// itself copied from `src`, or from a module of the same capacity).
    pub fn copy_from(&mut self, src: &Module) {
        self.target.clone_from(&src.target);
        self.limits = src.limits;
        self.names.copy_from(&src.names);
        self.funcs.copy_from(&src.funcs);
        self.blocks.copy_from(&src.blocks);
        self.loops.copy_from(&src.loops);
        self.insts.copy_from(&src.insts);
        self.aps.copy_from(&src.aps);
        self.mems.copy_from(&src.mems);
        self.regs.copy_from(&src.regs);
        self.dims.copy_from(&src.dims);
        self.ap_ext.copy_from(&src.ap_ext);
        self.reg_pool.copy_from(&src.reg_pool);
        self.mem_by_name.copy_from(&src.mem_by_name);
        self.reg_by_name.copy_from(&src.reg_by_name);
        self.func_by_name.copy_from(&src.func_by_name);
        self.live_insts = src.live_insts;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Capacity;
    use alloc::format;

    /// A copy is the module (every column, by its debug text) with at
    /// least its room, and copying back after the original changed
    /// restores it.
    #[test]
    fn a_copy_is_equal_and_restores_the_original() {
        let (mut m, _) = crate::testing::counter_loop();
        m.reserve(Capacity {
            insts: 16,
            names: 4,
            name_bytes: 64,
            ..Capacity::default()
        });
        let mut copy = Module::new(m.target.clone());
        copy.copy_from(&m);
        assert_eq!(format!("{copy:?}"), format!("{m:?}"));
        assert_eq!(copy.capacity(), m.capacity());
        let before = format!("{m:?}");
        m.intern_name("changed").unwrap();
        assert_ne!(format!("{m:?}"), before);
        m.copy_from(&copy);
        assert_eq!(format!("{m:?}"), before);
    }
}
