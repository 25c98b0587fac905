//! Storage: how much room the module reserves ([`Capacity`]), growing and
//! shrinking it, the read-only copy, and what the storage costs. Passes
//! reserve their headroom here before they run and then never grow it.

use super::*;

/// Declares [`Capacity`] from one list of its fields, with the field-wise
/// operations over all of them.
macro_rules! capacity {
    ($(#[$m:meta])* pub struct Capacity { $( $(#[$fm:meta])* pub $f:ident, )* }) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
        pub struct Capacity {
            $( $(#[$fm])* pub $f: usize, )*
        }

        impl Capacity {
            /// Field-wise sum (saturating): the headroom of several passes that run
            /// one after the other, each adding entities the next must not run out of.
            pub fn plus(self, o: Capacity) -> Capacity {
                Capacity {
                    $( $f: self.$f.saturating_add(o.$f), )*
                }
            }
        }
    };
}

capacity! {
    /// How many of each entity to reserve room for.
    pub struct Capacity {
        /// Instructions.
        pub insts,
        /// Access patterns.
        pub aps,
        /// Dims in the dim pool (only patterns of two or more dims use it).
        pub dims,
        /// Instructions with a non-zero immediate.
        pub imms,
        /// Access patterns with an extension ([`ApExt`]).
        pub ap_exts,
        /// Register operands in the register pool.
        pub reg_operands,
        /// Memory locations.
        pub mems,
        /// Registers.
        pub regs,
        /// Blocks.
        pub blocks,
        /// Loops.
        pub loops,
        /// Functions.
        pub funcs,
        /// Names.
        pub names,
        /// Bytes of name text.
        pub name_bytes,
    }
}

impl Module {
    /// Reserves room for `extra` more of each entity. Passes that create
    /// entities (spills, merges) ask for their headroom here, before they run.
    pub fn reserve(&mut self, extra: Capacity) {
        self.reserve_tables(&extra);
        self.dims.reserve_exact(extra.dims);
        self.ap_ext.reserve_exact(extra.ap_exts);
        self.reg_pool.reserve_exact(extra.reg_operands);
        self.names.reserve(extra.names, extra.name_bytes);
        self.mem_by_name.reserve_exact(extra.names);
        self.reg_by_name.reserve_exact(extra.names);
        self.func_by_name.reserve_exact(extra.names);
    }

    /// Drops the reserved room of the instruction-side storage beyond what
    /// it holds (a reader that reserved from an estimate of the input size
    /// calls it when done; passes reserve their own headroom after).
    pub fn shrink_to_fit(&mut self) {
        self.insts.shrink_to_fit();
        self.aps.shrink_to_fit();
        self.dims.shrink_to_fit();
        self.ap_ext.shrink_to_fit();
        self.reg_pool.shrink_to_fit();
    }

    /// A copy that is only read (the input the dataflow check compares the
    /// result with): everything but the name index — the intern table and
    /// the by-name columns. Names still print; `mem_by_name`, `reg_by_name` and
    /// `func_by_name` find nothing in the copy until a name is interned into
    /// it, which rebuilds the index.
    pub fn read_only_copy(&self) -> Module {
        // Field by field: cloning the index only to free it would leave
        // the allocator's heap fragmented.
        Module {
            target: self.target.clone(),
            limits: self.limits,
            names: self.names.clone_without_index(),
            funcs: self.funcs.clone(),
            blocks: self.blocks.clone(),
            loops: self.loops.clone(),
            insts: self.insts.clone(),
            aps: self.aps.clone(),
            mems: self.mems.clone(),
            regs: self.regs.clone(),
            dims: self.dims.clone(),
            ap_ext: self.ap_ext.clone(),
            reg_pool: self.reg_pool.clone(),
            mem_by_name: Column::new(),
            reg_by_name: Column::new(),
            func_by_name: Column::new(),
            live_insts: self.live_insts,
        }
    }

    /// Frees the name index (the names' lookup table and the by-name
    /// columns) of a module that is only read and printed from here on,
    /// as [`Module::read_only_copy`] leaves its copy: names stay for
    /// printing and messages, but lookups by name find nothing until the
    /// module is extended, which rebuilds the index. The driver drops it
    /// after the passes, where the checks' storage peaks beside it.
    pub fn drop_name_index(&mut self) {
        self.names.drop_index();
        self.mem_by_name = Column::new();
        self.reg_by_name = Column::new();
        self.func_by_name = Column::new();
    }

    /// Bytes of the name index (the names' lookup table and the by-name
    /// columns): what [`Module::drop_name_index`] frees, and what a
    /// [`Module::read_only_copy`] does not hold.
    pub fn name_index_bytes(&self) -> u64 {
        (self.names.index_bytes()
            + self.mem_by_name.reserved_bytes()
            + self.reg_by_name.reserved_bytes()
            + self.func_by_name.reserved_bytes()) as u64
    }

    /// Rebuilds the by-name columns dropped by [`Module::read_only_copy`].
    pub(super) fn rebuild_name_index(&mut self) {
        let len = self.names.len();
        self.mem_by_name = Column::new();
        self.reg_by_name = Column::new();
        self.func_by_name = Column::new();
        self.mem_by_name.resize(len, MemLoc::INVALID);
        self.reg_by_name.resize(len, Reg::INVALID);
        self.func_by_name.resize(len, Func::INVALID);
        for v in self.mems.name.keys() {
            if let Some(slot) = self.mem_by_name.get_mut(self.mems.name[v]) {
                *slot = v;
            }
        }
        for r in self.regs.name.keys() {
            if let Some(slot) = self.reg_by_name.get_mut(self.regs.name[r]) {
                *slot = r;
            }
        }
        for f in self.funcs.name.keys() {
            if let Some(slot) = self.func_by_name.get_mut(self.funcs.name[f]) {
                *slot = f;
            }
        }
    }

    /// The counts of every entity, as a [`Capacity`] (to size side tables).
    pub fn counts(&self) -> Capacity {
        let mut c = Capacity {
            dims: self.dims.len(),
            imms: self.insts.imms.len(),
            ap_exts: self.ap_ext.len(),
            reg_operands: self.reg_pool.len(),
            names: self.names.len(),
            name_bytes: 0,
            ..Capacity::default()
        };
        self.count_tables(&mut c);
        c
    }

    /// The reserved room of every entity, as totals (counts plus spare).
    /// Passes add entities only within it (`insert_*`, `try_add_*` fail
    /// instead of growing), so it bounds the module for as long as the
    /// passes run: analyses reserved to it never grow while they run.
    pub fn capacity(&self) -> Capacity {
        let mut c = Capacity {
            dims: self.dims.capacity(),
            imms: self.insts.imms.capacity(),
            ap_exts: self.ap_ext.capacity(),
            reg_operands: self.reg_pool.capacity(),
            names: self.names.len().max(self.mem_by_name.capacity()),
            name_bytes: 0,
            ..Capacity::default()
        };
        self.capacity_tables(&mut c);
        c
    }

    /// Heap bytes reserved in all (the sum of [`Module::storage_parts`]).
    pub fn reserved_bytes(&self) -> u64 {
        let mut r = crate::storage::StorageReport::new(crate::storage::StorageBudget::UNLIMITED);
        self.storage_parts(&mut r);
        r.total()
    }

    /// Bytes reserved by the instruction, access-pattern, dim and register
    /// operand storage (the per-instruction cost of the columns).
    pub fn instruction_storage_bytes(&self) -> usize {
        self.insts.reserved_bytes()
            + self.aps.reserved_bytes()
            + self.ap_ext.capacity() * core::mem::size_of::<ApExt>()
            + self.dims.capacity() * core::mem::size_of::<Dim>()
            + self.reg_pool.capacity() * core::mem::size_of::<Reg>()
    }

    /// Reserved heap bytes per column group, into `report` (instructions
    /// with their access patterns and operand pools; locations; registers;
    /// blocks, loops and functions; names with the by-name index).
    pub fn storage_parts(&self, report: &mut crate::storage::StorageReport) {
        report.add(
            "module: instructions and access patterns",
            self.instruction_storage_bytes() as u64,
        );
        report.add("module: locations", self.mems.reserved_bytes() as u64);
        report.add("module: registers", self.regs.reserved_bytes() as u64);
        let control = self.blocks.reserved_bytes()
            + self.loops.reserved_bytes()
            + self.funcs.reserved_bytes();
        report.add("module: blocks, loops, functions", control as u64);
        let names = self.names.reserved_bytes()
            + self.mem_by_name.reserved_bytes()
            + self.reg_by_name.reserved_bytes()
            + self.func_by_name.reserved_bytes();
        report.add("module: names", names as u64);
    }

    /// Bytes of the instruction-side storage in use (lengths, not
    /// capacities), split per column group: what a module of this size
    /// costs before any pass headroom.
    pub fn instruction_bytes_in_use(&self) -> StorageBytes {
        use core::mem::size_of;
        let (ni, na) = (self.num_insts(), self.num_aps());
        StorageBytes {
            inst_kind: ni * 5,
            imms: self.insts.imms.used_bytes(),
            operands: ni * size_of::<Operands>(),
            links: ni * (size_of::<Block>() + 2 * size_of::<Inst>()),
            aps: na * (size_of::<MemLoc>() + 2 + size_of::<u32>() + 1 + size_of::<Dim>()),
            dim_pool: self.dims.len() * size_of::<Dim>(),
            reg_operands: self.reg_pool.len() * size_of::<Reg>(),
        }
    }
}

/// Bytes of the instruction-side storage in use, per column group (see
/// [`Module::instruction_bytes_in_use`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageBytes {
    /// Opcode, sub-operation, engine, queue and flags (1 B each).
    pub inst_kind: usize,
    /// The sparse immediate table.
    pub imms: usize,
    /// Operand handles.
    pub operands: usize,
    /// Block, previous and next links.
    pub links: usize,
    /// Access-pattern columns (location, partition range, offset, element
    /// size, inline dim slot).
    pub aps: usize,
    /// The pool of multi-dimension dims.
    pub dim_pool: usize,
    /// The register operand pool.
    pub reg_operands: usize,
}

impl StorageBytes {
    /// All groups together.
    pub fn total(&self) -> usize {
        self.inst_kind
            + self.imms
            + self.operands
            + self.links
            + self.aps
            + self.dim_pool
            + self.reg_operands
    }
}

impl crate::storage::HeapBytes for Module {
    fn heap_bytes(&self) -> u64 {
        self.reserved_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_copy_prints_names_and_rebuilds_its_index_when_extended() {
        let mut m = Module::new(Target::default());
        let t = m.add_mem("t", Space::Sb, 128, 4096).unwrap();
        m.add_func("f").unwrap();
        let mut c = m.read_only_copy();
        assert_eq!(c.mem_name(t), "t");
        assert_eq!(c.mem_by_name("t"), None);
        // Extending the copy rebuilds the index: duplicates are still refused.
        assert!(matches!(
            c.add_mem("t", Space::Sb, 1, 64),
            Err(IrError::Duplicate { .. })
        ));
        assert_eq!(c.mem_by_name("t"), Some(t));
        assert!(c.add_func("f").is_err());
        let u = c.add_mem("u", Space::Sb, 1, 64).unwrap();
        assert_eq!(c.mem_by_name("u"), Some(u));
    }

    #[test]
    fn a_dropped_name_index_keeps_names_and_comes_back_when_extended() {
        let mut m = Module::new(Target::default());
        let t = m.add_mem("t", Space::Sb, 128, 4096).unwrap();
        let r = m.add_reg("k", 1).unwrap();
        m.add_func("f").unwrap();
        let before = m.reserved_bytes();
        m.drop_name_index();
        assert!(m.reserved_bytes() < before);
        assert_eq!((m.mem_name(t), m.reg_name(r)), ("t", "k"));
        assert_eq!(m.mem_by_name("t"), None);
        // Extending rebuilds it: duplicates are still refused.
        assert!(matches!(
            m.add_mem("t", Space::Sb, 1, 64),
            Err(IrError::Duplicate { .. })
        ));
        assert_eq!(m.mem_by_name("t"), Some(t));
        assert_eq!(m.reg_by_name("k"), Some(r));
        assert!(m.add_func("f").is_err());
    }
}
