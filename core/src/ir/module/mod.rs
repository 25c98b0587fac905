//! The module: struct-of-arrays columns for every entity.
//!
//! Invariants (checked by [`Module::check_structure`], kept by every mutator):
//! - block index order is layout order; a function owns a contiguous block
//!   range, a loop owns a contiguous block range nested in its parent's;
//! - a block's instructions form a doubly linked list `first ..= last` through
//!   the `prev` / `next` columns; a removed instruction has `block == INVALID`;
//! - an instruction's access patterns are the contiguous ids
//!   `ap_start .. ap_start + n_in + n_out` (inputs first), each owned by it;
//!   its registers are `reg_pool[reg_start .. reg_start + n_use + n_def]`;
//! - a single-dimension access pattern keeps its dim inline (the `Aps` dim
//!   slot); one of 2..=5 dims keeps them in the `dims` pool, and its slot
//!   says where (see [`Module::ap_dims`]); every dim count is at least 1;
//! - an access pattern's partition range fits a `u8` (locations have at
//!   most [`MAX_AP_PARTITIONS`] partitions);
//! - immediates live in a sparse side table ([`ImmTable`](crate::ir::ImmTable)):
//!   0 unless set;
//! - placement columns hold their sentinel until an allocator places the entity.
//!
//! The tables of columns are declared once, in `columns.rs`; reading the
//! module is in `query.rs`, creating entities in `create.rs`, changing them
//! in `mutate.rs`, its storage in `capacity.rs` (a copy into reserved
//! storage in `copy.rs`), its spelling in messages in
//! `display.rs`.

mod capacity;
mod check;
mod columns;
mod copy;
mod create;
mod display;
mod error;
mod ids;
mod limits;
mod mutate;
mod query;
mod spec;

pub use capacity::{Capacity, StorageBytes};
pub use columns::{Aps, Blocks, Funcs, Insts, Loops, Mems, Operands, Regs, NO_EXT};
pub(crate) use display::{display_named, WriteNamed};
pub use display::{
    Address, DisplayNamed, InModule, InstDescription, MemDescription, RegDescription,
};
pub use error::IrError;
pub use ids::{Ap, Block, Entity, Func, Inst, Loop, MemLoc, ModuleId, Reg};
pub use ids::{NO_BANK, NO_LANE, NO_PARTITION, UNKNOWN_TRIP, UNPLACED};
pub use limits::{Limits, MAX_AP_PARTITIONS};
pub use query::BlockInsts;
pub use spec::{ApSpec, InstSpec, MemSpec};

use alloc::vec::Vec;

use crate::ir::ap::{self, Dim, MAX_DIMS};
use crate::ir::column::Column;
use crate::ir::names::{Name, NamePool};
use crate::ir::pattern::{self, ApExt, RegTerm};
use crate::ir::types::{DType, MemFlags, Opcode, RegFlags, Space};
use crate::target::Target;
use columns::{pool_slot, pooled, PLAIN};
use limits::MAX_DIM_POOL;

/// A program: target, names, functions, blocks, loops, instructions,
/// access patterns, memory locations and registers, as columns.
#[derive(Clone, Debug)]
pub struct Module {
    /// The hardware the module is allocated for.
    pub target: Target,
    /// Hostile-input limits.
    pub limits: Limits,
    /// Interned names.
    names: NamePool,
    /// Functions.
    funcs: Funcs,
    /// Blocks (index order = layout order).
    blocks: Blocks,
    /// Loops.
    loops: Loops,
    /// Instructions.
    insts: Insts,
    /// Access patterns.
    aps: Aps,
    /// Memory locations.
    mems: Mems,
    /// Registers.
    regs: Regs,
    /// Dims of the access patterns with two or more (single dims are
    /// inline in the `Aps` columns).
    dims: Vec<Dim>,
    /// Extensions of the access patterns that have one (`Aps::ext`).
    ap_ext: Vec<ApExt>,
    /// Register operands of all instructions.
    reg_pool: Vec<Reg>,
    /// Location by name index ([`MemLoc::INVALID`] where none).
    mem_by_name: Column<Name, MemLoc>,
    /// Register by name index.
    reg_by_name: Column<Name, Reg>,
    /// Function by name index.
    func_by_name: Column<Name, Func>,
    /// Number of instructions currently linked into blocks.
    live_insts: usize,
}

impl Module {
    /// An empty module for a target.
    pub fn new(target: Target) -> Module {
        Module {
            target,
            limits: Limits::default(),
            names: NamePool::new(),
            funcs: Funcs::default(),
            blocks: Blocks::default(),
            loops: Loops::default(),
            insts: Insts::default(),
            aps: Aps::default(),
            mems: Mems::default(),
            regs: Regs::default(),
            dims: Vec::new(),
            ap_ext: Vec::new(),
            reg_pool: Vec::new(),
            mem_by_name: Column::new(),
            reg_by_name: Column::new(),
            func_by_name: Column::new(),
            live_insts: 0,
        }
    }

    /// The interned names (read only: names are interned by the mutators
    /// that declare entities, and by [`Module::intern_name`]).
    #[inline]
    pub fn names(&self) -> &NamePool {
        &self.names
    }

    /// The pool of the dims of access patterns with two or more (read
    /// them per pattern with [`Module::ap_dims`]).
    #[inline]
    pub fn dim_pool(&self) -> &[Dim] {
        &self.dims
    }

    /// The register operands of all instructions (read them per
    /// instruction with [`Module::uses`] and [`Module::defs`]).
    #[inline]
    pub fn reg_pool(&self) -> &[Reg] {
        &self.reg_pool
    }

    /// The columns writable, for unit tests only: they build the broken
    /// modules (a pattern moved off its location, a lane clash, a relinked
    /// block) that no mutator allows, to show that the checkers refuse them.
    #[cfg(test)]
    pub(crate) fn columns_mut(&mut self) -> ColumnsMut<'_> {
        ColumnsMut {
            loops: &mut self.loops,
            insts: &mut self.insts,
            aps: &mut self.aps,
            mems: &mut self.mems,
            regs: &mut self.regs,
        }
    }

    /// An empty module with every column reserved for `cap`.
    pub fn with_capacity(target: Target, cap: Capacity) -> Module {
        let mut m = Module::new(target);
        m.reserve(cap);
        m
    }
}

/// See [`Module::columns_mut`].
#[cfg(test)]
pub(crate) struct ColumnsMut<'m> {
    pub loops: &'m mut Loops,
    pub insts: &'m mut Insts,
    pub aps: &'m mut Aps,
    pub mems: &'m mut Mems,
    pub regs: &'m mut Regs,
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn ap_spec(loc: MemLoc, parts: u16, dims: &[Dim]) -> ApSpec {
        ApSpec {
            loc,
            part_start: 0,
            part_count: parts,
            offset: 0,
            elem_size: 1,
            dims: dims.iter().copied().collect(),
            ext: Default::default(),
        }
    }

    pub(super) fn one_block(m: &mut Module) -> Block {
        m.add_func("f").unwrap();
        m.add_block("b", Loop::INVALID).unwrap()
    }
}
