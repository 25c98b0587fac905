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
//! - immediates live in a sparse side table ([`ImmTable`]): 0 unless set;
//! - placement columns hold their sentinel until an allocator places the entity.

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use core::fmt;

use super::ap::{self, Dim, MAX_DIMS};
use super::column::{Column, EntityRef};
use super::imm::ImmTable;
use super::names::{Name, NamePool};
use super::pattern::{self, ApExt, PatternError, RegTerm};
use super::types::{DType, Engine, InstFlags, MemFlags, Opcode, RegFlags, Space, SubOp};
use crate::entity_id;
use crate::target::Target;

macro_rules! entity_ref {
    ($($t:ident),*) => {$(
        impl EntityRef for $t {
            #[inline]
            fn new(i: usize) -> Self { $t::new(i) }
            #[inline]
            fn index(self) -> usize { $t::index(self) }
        }
    )*};
}

entity_id!(
    /// A module (one per file; the id exists for multi-module hosts).
    ModuleId,
    "module"
);
entity_id!(
    /// A function.
    Func,
    "func"
);
entity_id!(
    /// A basic block; index order is layout order.
    Block,
    "block"
);
entity_id!(
    /// An instruction.
    Inst,
    "inst"
);
entity_id!(
    /// A memory location (a tensor, a spill slot, a DRAM buffer).
    MemLoc,
    "mem"
);
entity_id!(
    /// A scalar register (virtual until colored).
    Reg,
    "reg"
);
entity_id!(
    /// An access pattern (one operand of one instruction).
    Ap,
    "ap"
);
entity_id!(
    /// A structured loop.
    Loop,
    "loop"
);
entity_ref!(ModuleId, Func, Block, Inst, MemLoc, Reg, Ap, Loop);

/// Trip count of a loop whose count is not known.
pub const UNKNOWN_TRIP: u32 = u32::MAX;
/// `base_partition` of an unplaced location.
pub const NO_PARTITION: u16 = u16::MAX;
/// `offset` of an unplaced location.
pub const UNPLACED: u64 = u64::MAX;
/// `bank` of a location that has none.
pub const NO_BANK: u8 = u8::MAX;
/// `lane` of an uncolored register.
pub const NO_LANE: u16 = u16::MAX;

/// Most partitions of any location, so that an access pattern's partition
/// range fits the `u8` columns (on-chip spaces have 128; DRAM tensors are
/// shaped like the on-chip tiles they feed).
pub const MAX_AP_PARTITIONS: u16 = u8::MAX as u16;

/// Most entries of the multi-dimension dim pool: a multi-dimension access
/// pattern's slot packs `start << 3 | ndims` into 32 bits.
const MAX_DIM_POOL: usize = (u32::MAX >> 3) as usize;

/// Limits the module enforces on any input (hostile-input guards).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Limits {
    /// Most instructions in one module.
    pub instructions: u32,
    /// Most memory locations.
    pub locations: u32,
    /// Most registers.
    pub registers: u32,
    /// Deepest loop nesting.
    pub loop_depth: u16,
    /// Most inputs + outputs of one instruction.
    pub aps_per_inst: u8,
    /// Most uses + defs of one instruction.
    pub regs_per_inst: u8,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            instructions: 16_000_000,
            locations: 8_000_000,
            registers: 4_000_000,
            loop_depth: 64,
            aps_per_inst: 16,
            regs_per_inst: 16,
        }
    }
}

/// Something the IR refused to build.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IrError {
    /// A limit of [`Limits`] or the reserved workspace was exceeded.
    Full {
        /// What ran out.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// A name was declared twice.
    Duplicate {
        /// What kind of entity.
        what: &'static str,
    },
    /// A name is longer than the name limit.
    NameTooLong,
    /// A shape field is out of range.
    BadShape {
        /// Which field.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The largest legal value.
        max: u64,
    },
    /// An operand refers to something that does not exist or fits badly.
    BadOperand {
        /// Why.
        what: &'static str,
    },
    /// `end_loop` without `begin_loop`, or a loop left open.
    Unbalanced,
    /// An access pattern's loop terms, register term or partition step
    /// break the rules of [`pattern`].
    BadPattern {
        /// The operand (inputs, then outputs).
        operand: u8,
        /// What is wrong.
        error: PatternError,
    },
}

impl fmt::Display for IrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrError::Full { what, limit } => write!(f, "too many {what}: the limit is {limit}"),
            IrError::Duplicate { what } => write!(f, "{what} declared twice"),
            IrError::NameTooLong => {
                write!(f, "name longer than {} bytes", super::names::MAX_NAME_LEN)
            }
            IrError::BadShape { what, value, max } => {
                write!(f, "{what} {value} is out of range (must be 1..={max})")
            }
            IrError::BadOperand { what } => write!(f, "bad operand: {what}"),
            IrError::Unbalanced => f.write_str("unbalanced loop nesting"),
            IrError::BadPattern { operand, error } => {
                write!(f, "access pattern {} {error}", operand + 1)
            }
        }
    }
}

impl core::error::Error for IrError {}

/// Memory-location columns.
#[derive(Clone, Debug, Default)]
pub struct Mems {
    /// The space the location lives in.
    pub space: Column<MemLoc, Space>,
    /// Partitions (rows) the location spans.
    pub partitions: Column<MemLoc, u16>,
    /// Bytes per partition.
    pub bytes: Column<MemLoc, u32>,
    /// Byte alignment of the offset.
    pub align: Column<MemLoc, u32>,
    /// Element type (its size is the element size).
    pub dtype: Column<MemLoc, DType>,
    /// Interned name (without the `%`).
    pub name: Column<MemLoc, Name>,
    /// Flags.
    pub flags: Column<MemLoc, MemFlags>,
    /// First partition once placed (on-chip; DRAM: 0), else [`NO_PARTITION`].
    pub base_partition: Column<MemLoc, u16>,
    /// Byte offset once placed, else [`UNPLACED`]. SB: offset inside every
    /// partition; PSUM: offset inside a partition, bank × bank bytes + offset
    /// in bank; DRAM: byte address in the flat space.
    pub offset: Column<MemLoc, u64>,
    /// PSUM bank once placed, else [`NO_BANK`].
    pub bank: Column<MemLoc, u8>,
}

/// Register columns.
#[derive(Clone, Debug, Default)]
pub struct Regs {
    /// 1 (32-bit) or 2 (64-bit, an aligned lane pair).
    pub lanes: Column<Reg, u8>,
    /// Interned name (without the `$`).
    pub name: Column<Reg, Name>,
    /// Flags.
    pub flags: Column<Reg, RegFlags>,
    /// First physical lane once colored, else [`NO_LANE`].
    pub lane: Column<Reg, u16>,
}

/// Access-pattern columns (19 bytes per pattern).
#[derive(Clone, Debug, Default)]
pub struct Aps {
    /// The location accessed.
    pub loc: Column<Ap, MemLoc>,
    /// First partition, relative to the location's first partition
    /// (`u8`: locations have at most [`MAX_AP_PARTITIONS`] partitions).
    pub part_start: Column<Ap, u8>,
    /// Partitions accessed.
    pub part_count: Column<Ap, u8>,
    /// Byte offset inside each partition, relative to the location.
    pub offset: Column<Ap, u32>,
    /// Element size in bytes.
    pub elem_size: Column<Ap, u8>,
    /// The dims, read through [`Module::ap_dims`]: a single-dimension
    /// pattern's dim itself (count ≥ 1); for 2..=5 dims, a marker with
    /// count 0 whose stride bits are `pool start << 3 | ndims`. Nearly every
    /// pattern has one dim, so this saves the pool index and the dim count
    /// per pattern.
    dim: Column<Ap, Dim>,
    /// The pattern's extension ([`ApExt`]: loop terms, register term,
    /// partition step) as an index into the module's extension pool, or
    /// [`NO_EXT`] for a plain pattern (nearly all of them). Read it with
    /// [`Module::ap_ext`].
    ext: Column<Ap, u32>,
}

/// The `ext` of a plain access pattern.
pub const NO_EXT: u32 = u32::MAX;

/// The extension of every plain pattern.
static PLAIN: ApExt = ApExt {
    pstep: None,
    terms: ArrayVec::new_const(),
    reg: None,
};

/// The slot of a multi-dimension pattern: its dims are `pool[start..start + n]`.
#[inline]
fn pool_slot(start: usize, n: usize) -> Dim {
    Dim::new(((start as u32) << 3 | n as u32) as i32, 0)
}

/// The operand handle of an instruction: ranges into the AP ids and the
/// register pool.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Operands {
    /// First AP id (inputs, then outputs).
    pub ap_start: u32,
    /// First index in the register pool (uses, then defs).
    pub reg_start: u32,
    /// Number of input APs.
    pub n_in: u8,
    /// Number of output APs.
    pub n_out: u8,
    /// Number of used registers.
    pub n_use: u8,
    /// Number of defined registers.
    pub n_def: u8,
}

/// Instruction columns.
#[derive(Clone, Debug, Default)]
pub struct Insts {
    /// What the instruction does.
    pub opcode: Column<Inst, Opcode>,
    /// Sub-operation (ALU op, activation function).
    pub subop: Column<Inst, SubOp>,
    /// Engine.
    pub engine: Column<Inst, Engine>,
    /// DMA queue (DMA instructions; sync waits: the queue waited on).
    pub queue: Column<Inst, u8>,
    /// Flags.
    pub flags: Column<Inst, InstFlags>,
    /// Immediates (scalar `imm`, `memset` value), sparse: read them with
    /// [`Module::imm`].
    pub imms: ImmTable,
    /// Operand handle.
    pub operands: Column<Inst, Operands>,
    /// Containing block, [`Block::INVALID`] when removed or not yet placed.
    pub block: Column<Inst, Block>,
    /// Previous instruction in the block.
    pub prev: Column<Inst, Inst>,
    /// Next instruction in the block.
    pub next: Column<Inst, Inst>,
}

/// Block columns.
#[derive(Clone, Debug, Default)]
pub struct Blocks {
    /// Label.
    pub name: Column<Block, Name>,
    /// Owning function.
    pub func: Column<Block, Func>,
    /// Innermost loop containing the block, or [`Loop::INVALID`].
    pub loop_: Column<Block, Loop>,
    /// First instruction.
    pub first: Column<Block, Inst>,
    /// Last instruction.
    pub last: Column<Block, Inst>,
}

/// Loop columns.
#[derive(Clone, Debug, Default)]
pub struct Loops {
    /// Name of the induction variable (what loop terms of access patterns
    /// print), or [`Name::INVALID`] for an unnamed loop.
    pub name: Column<Loop, Name>,
    /// Enclosing loop or [`Loop::INVALID`].
    pub parent: Column<Loop, Loop>,
    /// Trip count or [`UNKNOWN_TRIP`].
    pub trip: Column<Loop, u32>,
    /// Nesting depth (1 for an outermost loop).
    pub depth: Column<Loop, u16>,
    /// First block.
    pub first_block: Column<Loop, Block>,
    /// One past the last block.
    pub end_block: Column<Loop, Block>,
}

/// Function columns.
#[derive(Clone, Debug, Default)]
pub struct Funcs {
    /// Name (without the `@`).
    pub name: Column<Func, Name>,
    /// First block.
    pub first_block: Column<Func, Block>,
    /// One past the last block.
    pub end_block: Column<Func, Block>,
}

/// How many of each entity to reserve room for.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Capacity {
    /// Instructions.
    pub insts: usize,
    /// Access patterns.
    pub aps: usize,
    /// Dims in the dim pool (only patterns of two or more dims use it).
    pub dims: usize,
    /// Instructions with a non-zero immediate.
    pub imms: usize,
    /// Access patterns with an extension ([`ApExt`]).
    pub ap_exts: usize,
    /// Register operands in the register pool.
    pub reg_operands: usize,
    /// Memory locations.
    pub mems: usize,
    /// Registers.
    pub regs: usize,
    /// Blocks.
    pub blocks: usize,
    /// Loops.
    pub loops: usize,
    /// Functions.
    pub funcs: usize,
    /// Names.
    pub names: usize,
    /// Bytes of name text.
    pub name_bytes: usize,
}

impl Capacity {
    /// Field-wise sum (saturating): the headroom of several passes that run
    /// one after the other, each adding entities the next must not run out of.
    pub fn plus(self, o: Capacity) -> Capacity {
        Capacity {
            insts: self.insts.saturating_add(o.insts),
            aps: self.aps.saturating_add(o.aps),
            dims: self.dims.saturating_add(o.dims),
            imms: self.imms.saturating_add(o.imms),
            ap_exts: self.ap_exts.saturating_add(o.ap_exts),
            reg_operands: self.reg_operands.saturating_add(o.reg_operands),
            mems: self.mems.saturating_add(o.mems),
            regs: self.regs.saturating_add(o.regs),
            blocks: self.blocks.saturating_add(o.blocks),
            loops: self.loops.saturating_add(o.loops),
            funcs: self.funcs.saturating_add(o.funcs),
            names: self.names.saturating_add(o.names),
            name_bytes: self.name_bytes.saturating_add(o.name_bytes),
        }
    }
}

/// A description of an access pattern to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApSpec {
    /// Location accessed.
    pub loc: MemLoc,
    /// First partition relative to the location.
    pub part_start: u16,
    /// Partitions accessed.
    pub part_count: u16,
    /// Byte offset inside each partition.
    pub offset: u32,
    /// Element size in bytes.
    pub elem_size: u8,
    /// Dims, outermost first, strides in elements.
    pub dims: ArrayVec<Dim, MAX_DIMS>,
    /// Loop terms, register term, partition step (default: none).
    pub ext: ApExt,
}

/// A description of an instruction to create.
#[derive(Clone, Debug)]
pub struct InstSpec<'a> {
    /// What it does.
    pub opcode: Opcode,
    /// Sub-operation.
    pub subop: SubOp,
    /// Engine.
    pub engine: Engine,
    /// DMA queue.
    pub queue: u8,
    /// Flags.
    pub flags: InstFlags,
    /// Immediate.
    pub imm: i64,
    /// Read operands.
    pub inputs: &'a [ApSpec],
    /// Written operands.
    pub outputs: &'a [ApSpec],
    /// Read registers.
    pub uses: &'a [Reg],
    /// Written registers.
    pub defs: &'a [Reg],
}

impl<'a> InstSpec<'a> {
    /// A spec with the opcode's default engine and no operands.
    pub fn new(opcode: Opcode) -> Self {
        InstSpec {
            opcode,
            subop: SubOp::None,
            engine: opcode.default_engine(),
            queue: 0,
            flags: InstFlags::empty(),
            imm: 0,
            inputs: &[],
            outputs: &[],
            uses: &[],
            defs: &[],
        }
    }
}

/// A program: target, names, functions, blocks, loops, instructions,
/// access patterns, memory locations and registers, as columns.
#[derive(Clone, Debug)]
pub struct Module {
    /// The hardware the module is allocated for.
    pub target: Target,
    /// Hostile-input limits.
    pub limits: Limits,
    /// Interned names.
    pub names: NamePool,
    /// Functions.
    pub funcs: Funcs,
    /// Blocks (index order = layout order).
    pub blocks: Blocks,
    /// Loops.
    pub loops: Loops,
    /// Instructions.
    pub insts: Insts,
    /// Access patterns.
    pub aps: Aps,
    /// Memory locations.
    pub mems: Mems,
    /// Registers.
    pub regs: Regs,
    /// Dims of the access patterns with two or more (single dims are
    /// inline in the `Aps` columns).
    pub dims: Vec<Dim>,
    /// Extensions of the access patterns that have one (`Aps::ext`).
    ap_ext: Vec<ApExt>,
    /// Register operands of all instructions.
    pub reg_pool: Vec<Reg>,
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

    /// An empty module with every column reserved for `cap`.
    pub fn with_capacity(target: Target, cap: Capacity) -> Module {
        let mut m = Module::new(target);
        m.reserve(cap);
        m
    }

    /// Reserves room for `extra` more of each entity. Passes that create
    /// entities (spills, merges) ask for their headroom here, before they run.
    pub fn reserve(&mut self, extra: Capacity) {
        macro_rules! res {
            ($n:expr; $($c:expr),*) => {$( $c.reserve_exact($n); )*};
        }
        res!(extra.insts; self.insts.opcode, self.insts.subop, self.insts.engine, self.insts.queue,
            self.insts.flags, self.insts.operands, self.insts.block,
            self.insts.prev, self.insts.next);
        self.insts.imms.reserve_exact(extra.imms);
        res!(extra.aps; self.aps.loc, self.aps.part_start, self.aps.part_count, self.aps.offset,
            self.aps.elem_size, self.aps.dim, self.aps.ext);
        self.dims.reserve_exact(extra.dims);
        self.ap_ext.reserve_exact(extra.ap_exts);
        self.reg_pool.reserve_exact(extra.reg_operands);
        res!(extra.mems; self.mems.space, self.mems.partitions, self.mems.bytes, self.mems.align,
            self.mems.dtype, self.mems.name, self.mems.flags, self.mems.base_partition,
            self.mems.offset, self.mems.bank);
        res!(extra.regs; self.regs.lanes, self.regs.name, self.regs.flags, self.regs.lane);
        res!(extra.blocks; self.blocks.name, self.blocks.func, self.blocks.loop_,
            self.blocks.first, self.blocks.last);
        res!(extra.loops; self.loops.name, self.loops.parent, self.loops.trip, self.loops.depth,
            self.loops.first_block, self.loops.end_block);
        res!(extra.funcs; self.funcs.name, self.funcs.first_block, self.funcs.end_block);
        self.names.reserve(extra.names, extra.name_bytes);
        res!(extra.names; self.mem_by_name, self.reg_by_name, self.func_by_name);
    }

    /// Drops the reserved room of the instruction-side storage beyond what
    /// it holds (a reader that reserved from an estimate of the input size
    /// calls it when done; passes reserve their own headroom after).
    pub fn shrink_to_fit(&mut self) {
        macro_rules! shrink {
            ($($c:expr),*) => {$( $c.shrink_to_fit(); )*};
        }
        shrink!(
            self.insts.opcode,
            self.insts.subop,
            self.insts.engine,
            self.insts.queue,
            self.insts.flags,
            self.insts.imms,
            self.insts.operands,
            self.insts.block,
            self.insts.prev,
            self.insts.next
        );
        shrink!(
            self.aps.loc,
            self.aps.part_start,
            self.aps.part_count,
            self.aps.offset,
            self.aps.elem_size,
            self.aps.dim,
            self.aps.ext
        );
        self.dims.shrink_to_fit();
        self.ap_ext.shrink_to_fit();
        self.reg_pool.shrink_to_fit();
    }

    /// A copy that is only read (the input the dataflow check compares the
    /// result with): everything but the name index — the intern table and
    /// the by-name columns, ~17 of the ~117 bytes per instruction a full
    /// clone costs. Names still print; `mem_by_name`, `reg_by_name` and
    /// `func_by_name` find nothing in the copy until a name is interned into
    /// it, which rebuilds the index.
    pub fn read_only_copy(&self) -> Module {
        // Field by field: cloning the index only to free it would leave
        // the allocator's heap fragmented (measured: +31 MB peak at 1M).
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

    /// Rebuilds the by-name columns dropped by [`Module::read_only_copy`].
    fn rebuild_name_index(&mut self) {
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
        Capacity {
            insts: self.insts.opcode.len(),
            aps: self.aps.loc.len(),
            dims: self.dims.len(),
            imms: self.insts.imms.len(),
            ap_exts: self.ap_ext.len(),
            reg_operands: self.reg_pool.len(),
            mems: self.mems.space.len(),
            regs: self.regs.lanes.len(),
            blocks: self.blocks.name.len(),
            loops: self.loops.trip.len(),
            funcs: self.funcs.name.len(),
            names: self.names.len(),
            name_bytes: 0,
        }
    }

    /// The reserved room of every entity, as totals (counts plus spare).
    /// Passes add entities only within it (`insert_*`, `try_add_*` fail
    /// instead of growing), so it bounds the module for as long as the
    /// passes run: analyses reserved to it never grow while they run.
    pub fn capacity(&self) -> Capacity {
        Capacity {
            insts: self.insts.opcode.capacity(),
            aps: self.aps.loc.capacity(),
            dims: self.dims.capacity(),
            imms: self.insts.imms.capacity(),
            ap_exts: self.ap_ext.capacity(),
            reg_operands: self.reg_pool.capacity(),
            mems: self.mems.space.capacity(),
            regs: self.regs.lanes.capacity(),
            blocks: self.blocks.name.capacity(),
            loops: self.loops.trip.capacity(),
            funcs: self.funcs.name.capacity(),
            names: self.names.len().max(self.mem_by_name.capacity()),
            name_bytes: 0,
        }
    }

    /// Bytes reserved by the instruction, access-pattern, dim and register
    /// operand storage (the per-instruction cost of the columns).
    pub fn instruction_storage_bytes(&self) -> usize {
        let i = &self.insts;
        let a = &self.aps;
        i.opcode.reserved_bytes()
            + i.subop.reserved_bytes()
            + i.engine.reserved_bytes()
            + i.queue.reserved_bytes()
            + i.flags.reserved_bytes()
            + i.imms.reserved_bytes()
            + i.operands.reserved_bytes()
            + i.block.reserved_bytes()
            + i.prev.reserved_bytes()
            + i.next.reserved_bytes()
            + a.loc.reserved_bytes()
            + a.part_start.reserved_bytes()
            + a.part_count.reserved_bytes()
            + a.offset.reserved_bytes()
            + a.elem_size.reserved_bytes()
            + a.dim.reserved_bytes()
            + a.ext.reserved_bytes()
            + self.ap_ext.capacity() * core::mem::size_of::<ApExt>()
            + self.dims.capacity() * core::mem::size_of::<Dim>()
            + self.reg_pool.capacity() * core::mem::size_of::<Reg>()
    }

    /// Reserved heap bytes per column group, into `report` (instructions
    /// with their access patterns and operand pools; locations; registers;
    /// blocks, loops and functions; names with the by-name index).
    pub fn storage_parts(&self, report: &mut crate::storage::StorageReport) {
        let m = &self.mems;
        let r = &self.regs;
        let (b, l, f) = (&self.blocks, &self.loops, &self.funcs);
        let sum = |xs: &[usize]| xs.iter().fold(0u64, |n, &x| n.saturating_add(x as u64));
        report.add(
            "module: instructions and access patterns",
            self.instruction_storage_bytes() as u64,
        );
        report.add(
            "module: locations",
            sum(&[
                m.space.reserved_bytes(),
                m.partitions.reserved_bytes(),
                m.bytes.reserved_bytes(),
                m.align.reserved_bytes(),
                m.dtype.reserved_bytes(),
                m.name.reserved_bytes(),
                m.flags.reserved_bytes(),
                m.base_partition.reserved_bytes(),
                m.offset.reserved_bytes(),
                m.bank.reserved_bytes(),
            ]),
        );
        report.add(
            "module: registers",
            sum(&[
                r.lanes.reserved_bytes(),
                r.name.reserved_bytes(),
                r.flags.reserved_bytes(),
                r.lane.reserved_bytes(),
            ]),
        );
        report.add(
            "module: blocks, loops, functions",
            sum(&[
                b.name.reserved_bytes(),
                b.func.reserved_bytes(),
                b.loop_.reserved_bytes(),
                b.first.reserved_bytes(),
                b.last.reserved_bytes(),
                l.name.reserved_bytes(),
                l.parent.reserved_bytes(),
                l.trip.reserved_bytes(),
                l.depth.reserved_bytes(),
                l.first_block.reserved_bytes(),
                l.end_block.reserved_bytes(),
                f.name.reserved_bytes(),
                f.first_block.reserved_bytes(),
                f.end_block.reserved_bytes(),
            ]),
        );
        report.add(
            "module: names",
            sum(&[
                self.names.reserved_bytes(),
                self.mem_by_name.reserved_bytes(),
                self.reg_by_name.reserved_bytes(),
                self.func_by_name.reserved_bytes(),
            ]),
        );
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

    // ----------------------------------------------------------------------
    // Counts and lookups

    /// Number of instructions ever created (including removed ones).
    pub fn num_insts(&self) -> usize {
        self.insts.opcode.len()
    }

    /// Number of instructions linked into blocks.
    pub fn num_live_insts(&self) -> usize {
        self.live_insts
    }

    /// Number of memory locations.
    pub fn num_mems(&self) -> usize {
        self.mems.space.len()
    }

    /// Number of registers.
    pub fn num_regs(&self) -> usize {
        self.regs.lanes.len()
    }

    /// Number of access patterns.
    pub fn num_aps(&self) -> usize {
        self.aps.loc.len()
    }

    /// Number of blocks.
    pub fn num_blocks(&self) -> usize {
        self.blocks.name.len()
    }

    /// Number of loops.
    pub fn num_loops(&self) -> usize {
        self.loops.trip.len()
    }

    /// Number of functions.
    pub fn num_funcs(&self) -> usize {
        self.funcs.name.len()
    }

    /// The location named `name` (without `%`).
    pub fn mem_by_name(&self, name: &str) -> Option<MemLoc> {
        let n = self.names.lookup(name)?;
        self.mem_by_name.get(n).copied().filter(|m| m.is_valid())
    }

    /// The register named `name` (without `$`).
    pub fn reg_by_name(&self, name: &str) -> Option<Reg> {
        let n = self.names.lookup(name)?;
        self.reg_by_name.get(n).copied().filter(|r| r.is_valid())
    }

    /// The function named `name` (without `@`).
    pub fn func_by_name(&self, name: &str) -> Option<Func> {
        let n = self.names.lookup(name)?;
        self.func_by_name.get(n).copied().filter(|f| f.is_valid())
    }

    /// The name of a location.
    pub fn mem_name(&self, m: MemLoc) -> &str {
        self.mems.name.get(m).map_or("", |&n| self.names.get(n))
    }

    /// The name of a register.
    pub fn reg_name(&self, r: Reg) -> &str {
        self.regs.name.get(r).map_or("", |&n| self.names.get(n))
    }

    /// The label of a block.
    pub fn block_name(&self, b: Block) -> &str {
        self.blocks.name.get(b).map_or("", |&n| self.names.get(n))
    }

    /// The name of a function.
    pub fn func_name(&self, f: Func) -> &str {
        self.funcs.name.get(f).map_or("", |&n| self.names.get(n))
    }

    // ----------------------------------------------------------------------
    // Operands

    /// The operand handle of an instruction.
    #[inline]
    pub fn operands(&self, i: Inst) -> Operands {
        self.insts.operands[i]
    }

    /// Input access patterns of an instruction.
    pub fn inputs(&self, i: Inst) -> impl ExactSizeIterator<Item = Ap> + Clone {
        let o = self.insts.operands[i];
        (o.ap_start..o.ap_start + o.n_in as u32).map(Ap::from_u32)
    }

    /// Output access patterns of an instruction.
    pub fn outputs(&self, i: Inst) -> impl ExactSizeIterator<Item = Ap> + Clone {
        let o = self.insts.operands[i];
        let s = o.ap_start + o.n_in as u32;
        (s..s + o.n_out as u32).map(Ap::from_u32)
    }

    /// All access patterns of an instruction (inputs, then outputs).
    pub fn all_aps(&self, i: Inst) -> impl ExactSizeIterator<Item = Ap> + Clone {
        let o = self.insts.operands[i];
        (o.ap_start..o.ap_start + o.n_in as u32 + o.n_out as u32).map(Ap::from_u32)
    }

    /// Registers an instruction reads.
    pub fn uses(&self, i: Inst) -> &[Reg] {
        let o = self.insts.operands[i];
        let s = o.reg_start as usize;
        self.reg_pool.get(s..s + o.n_use as usize).unwrap_or(&[])
    }

    /// Registers an instruction writes.
    pub fn defs(&self, i: Inst) -> &[Reg] {
        let o = self.insts.operands[i];
        let s = o.reg_start as usize + o.n_use as usize;
        self.reg_pool.get(s..s + o.n_def as usize).unwrap_or(&[])
    }

    /// Mutable registers of an instruction (uses then defs), for renaming.
    pub fn regs_mut(&mut self, i: Inst) -> &mut [Reg] {
        let o = self.insts.operands[i];
        let s = o.reg_start as usize;
        let e = s + o.n_use as usize + o.n_def as usize;
        self.reg_pool.get_mut(s..e).unwrap_or(&mut [])
    }

    /// The immediate of an instruction (0 when it has none).
    #[inline]
    pub fn imm(&self, i: Inst) -> i64 {
        self.insts.imms.get(i)
    }

    /// The dims of an access pattern.
    #[inline]
    pub fn ap_dims(&self, a: Ap) -> &[Dim] {
        let slot = &self.aps.dim[a];
        if slot.count != 0 {
            return core::slice::from_ref(slot);
        }
        let bits = slot.stride as u32;
        let (s, n) = ((bits >> 3) as usize, (bits & 7) as usize);
        self.dims.get(s..s + n).unwrap_or(&[])
    }

    /// The extension of an access pattern (loop terms, register term,
    /// partition step): the plain one for nearly every pattern.
    #[inline]
    pub fn ap_ext(&self, a: Ap) -> &ApExt {
        match self.aps.ext[a] {
            NO_EXT => &PLAIN,
            k => self.ap_ext.get(k as usize).unwrap_or(&PLAIN),
        }
    }

    /// True when an access pattern is plain (no extension).
    #[inline]
    pub fn ap_is_plain(&self, a: Ap) -> bool {
        self.aps.ext[a] == NO_EXT
    }

    /// The cells an access pattern may touch over all iterations (and its
    /// register window), relative to its location ([`pattern::Extent`]).
    pub fn ap_extent(&self, a: Ap) -> pattern::Extent {
        pattern::extent(
            self,
            self.aps.loc[a],
            self.aps.part_start[a] as u16,
            self.aps.part_count[a] as u16,
            self.aps.offset[a],
            self.aps.elem_size[a],
            self.ap_dims(a),
            self.ap_ext(a),
        )
    }

    /// The plain description of an access pattern (to copy or re-create it).
    pub fn ap_spec(&self, a: Ap) -> ApSpec {
        ApSpec {
            loc: self.aps.loc[a],
            part_start: self.aps.part_start[a] as u16,
            part_count: self.aps.part_count[a] as u16,
            offset: self.aps.offset[a],
            elem_size: self.aps.elem_size[a],
            dims: self.ap_dims(a).iter().copied().collect(),
            ext: self.ap_ext(a).clone(),
        }
    }

    /// Re-points an access pattern to `to`, its cells moved by `dpart`
    /// partitions and `dbyte` bytes (negative: onto a copy that holds the
    /// location from some partition and byte on; positive: into a larger
    /// location that holds it at that place): the static part and the
    /// register window move, the loop terms stay (they are relative). The
    /// caller guarantees that every iteration's cells lie inside `to`
    /// (the pattern's extent, moved).
    pub fn shift_ap(&mut self, a: Ap, to: MemLoc, dpart: i32, dbyte: i64) {
        let shift = |x: i64, d: i64, max: i64| x.saturating_add(d).clamp(0, max);
        self.aps.loc[a] = to;
        self.aps.part_start[a] =
            shift(self.aps.part_start[a] as i64, dpart as i64, u8::MAX as i64) as u8;
        self.aps.offset[a] = shift(self.aps.offset[a] as i64, dbyte, u32::MAX as i64) as u32;
        let k = self.aps.ext[a];
        if k != NO_EXT {
            if let Some(r) = self.ap_ext.get_mut(k as usize).and_then(|e| e.reg.as_mut()) {
                r.window_lo = shift(r.window_lo as i64, dbyte, u32::MAX as i64) as u32;
                r.window_hi = shift(r.window_hi as i64, dbyte, u32::MAX as i64) as u32;
            }
        }
    }

    /// Replaces the extension of input-then-output operand `k` of
    /// instruction `i` (a rewrite that changes how a pattern moves), with
    /// the checks of [`pattern::check`]. Fails without changing anything
    /// when the pattern would break them or when the pool has no room for
    /// a pattern that had no extension (never grows: pass use).
    pub fn set_ap_ext(&mut self, i: Inst, k: usize, ext: ApExt) -> Result<(), IrError> {
        let Some(a) = self.all_aps(i).nth(k) else {
            return Err(IrError::BadOperand {
                what: "an operand index past the instruction's patterns",
            });
        };
        let inner = self
            .blocks
            .loop_
            .get(self.insts.block[i])
            .copied()
            .unwrap_or(Loop::INVALID);
        let read = k < self.operands(i).n_in as usize;
        pattern::check(
            self,
            inner,
            self.uses(i).len(),
            read,
            self.aps.loc[a],
            self.aps.part_start[a] as u16,
            self.aps.part_count[a] as u16,
            self.aps.offset[a],
            self.aps.elem_size[a],
            self.ap_dims(a),
            &ext,
        )
        .map_err(|error| IrError::BadPattern {
            operand: k as u8,
            error,
        })?;
        match (self.aps.ext[a], ext.is_plain()) {
            (NO_EXT, true) => {}
            (NO_EXT, false) => {
                if self.ap_ext.len() == self.ap_ext.capacity() {
                    return Err(IrError::Full {
                        what: "access-pattern extensions in the reserved workspace",
                        limit: self.ap_ext.capacity() as u64,
                    });
                }
                self.ap_ext.push(ext);
                self.aps.ext[a] = (self.ap_ext.len() - 1) as u32;
            }
            (x, true) => {
                // The pool slot stays (unreferenced): ids are never reused.
                let _ = x;
                self.aps.ext[a] = NO_EXT;
            }
            (x, false) => {
                if let Some(slot) = self.ap_ext.get_mut(x as usize) {
                    *slot = ext;
                }
            }
        }
        Ok(())
    }

    /// Names a loop's induction variable (what the text prints in loop
    /// terms). The name is interned.
    pub fn set_loop_name(&mut self, l: Loop, name: &str) -> Result<(), IrError> {
        let n = self.intern(name)?;
        self.loops.name[l] = n;
        Ok(())
    }

    /// The name of a loop's induction variable (`None` when unnamed).
    pub fn loop_name(&self, l: Loop) -> Option<&str> {
        let n = *self.loops.name.get(l)?;
        n.is_valid().then(|| self.names.get(n))
    }

    /// Replaces dim `k` of an access pattern in place (a rewrite that
    /// reshapes a pattern without adding one). A count of 0 is refused, as
    /// when the pattern was added: the inline slot of a one-dim pattern uses
    /// count 0 as its "dims are pooled" marker.
    pub fn set_ap_dim(&mut self, a: Ap, k: usize, dim: Dim) -> Result<(), IrError> {
        if dim.count == 0 {
            return Err(IrError::BadShape {
                what: "dimension count",
                value: 0,
                max: u32::MAX as u64,
            });
        }
        let slot = &mut self.aps.dim[a];
        let target = if slot.count != 0 {
            (k == 0).then_some(slot)
        } else {
            let bits = slot.stride as u32;
            let (s, n) = ((bits >> 3) as usize, (bits & 7) as usize);
            if k < n {
                self.dims.get_mut(s + k)
            } else {
                None
            }
        };
        match target {
            Some(d) => {
                *d = dim;
                Ok(())
            }
            None => Err(IrError::BadShape {
                what: "dimension index",
                value: k as u64,
                max: self.ap_ndims(a).saturating_sub(1) as u64,
            }),
        }
    }

    /// Number of dims of an access pattern (1..=5).
    #[inline]
    pub fn ap_ndims(&self, a: Ap) -> usize {
        self.ap_dims(a).len()
    }

    /// Bytes per partition an access pattern moves.
    pub fn ap_bytes_per_partition(&self, a: Ap) -> u64 {
        ap::elements(self.ap_dims(a)) * self.aps.elem_size[a] as u64
    }

    /// Total bytes an access pattern moves.
    pub fn ap_bytes(&self, a: Ap) -> u64 {
        self.ap_bytes_per_partition(a) * self.aps.part_count[a] as u64
    }

    /// The byte range `[lo, hi)` an access pattern may touch inside each
    /// partition, relative to its location (`None` for an empty or
    /// negative-reaching pattern): for a pattern that moves, the hull over
    /// every iteration and its register window; for a DRAM pattern with an
    /// explicit partition step, the whole row. An over-approximation for
    /// patterns that move: use it to test overlap, never coverage.
    pub fn ap_byte_span(&self, a: Ap) -> Option<(u64, u64)> {
        if !self.ap_is_plain(a) {
            let e = self.ap_extent(a);
            if e.flat {
                return Some((0, self.mems.bytes[self.aps.loc[a]] as u64));
            }
            return (e.byte_lo >= 0 && e.byte_lo < e.byte_hi)
                .then_some((e.byte_lo as u64, e.byte_hi as u64));
        }
        let (lo, hi) = ap::element_span(self.ap_dims(a))?;
        let es = self.aps.elem_size[a] as i64;
        let base = self.aps.offset[a] as i64;
        let lo = base + lo * es;
        let hi = base + hi * es;
        (lo >= 0).then_some((lo as u64, hi as u64))
    }

    /// The partitions `[lo, hi)` of its location an access pattern may
    /// touch (the hull over every iteration for one that moves; every
    /// partition for a DRAM pattern with an explicit partition step).
    pub fn ap_rows(&self, a: Ap) -> (u16, u16) {
        let ps = self.aps.part_start[a] as u16;
        if self.ap_is_plain(a) {
            return (ps, ps + self.aps.part_count[a] as u16);
        }
        let e = self.ap_extent(a);
        if e.flat {
            return (0, self.mems.partitions[self.aps.loc[a]]);
        }
        let clamp = |x: i64| x.clamp(0, u16::MAX as i64) as u16;
        (clamp(e.part_lo), clamp(e.part_hi))
    }

    /// The rectangle of its location an access pattern names over every
    /// iteration: partitions `[r0, r1)` and bytes `[lo, hi)` per partition,
    /// both hulls ([`Module::ap_rows`], [`Module::ap_byte_span`], the whole
    /// row when the span is unknown). A partition broadcast touches one
    /// partition but names `part_count` of them, and a copy it reads from
    /// must hold them all, so the rows extend over them. Clamped to the
    /// location.
    pub fn ap_hull(&self, a: Ap) -> (u16, u16, u64, u64) {
        let l = self.aps.loc[a];
        let bytes = self.mems.bytes[l] as u64;
        let (lo, hi) = self.ap_byte_span(a).unwrap_or((0, bytes));
        let (r0, mut r1) = self.ap_rows(a);
        if self.ap_ext(a).is_broadcast(self.mems.space[l]) {
            r1 = r1.saturating_add((self.aps.part_count[a] as u16).saturating_sub(1));
        }
        (r0, r1, lo.min(bytes), hi.min(bytes))
    }

    /// `isFullAccess`: the access pattern covers its whole location — every
    /// partition and every byte, densely.
    pub fn is_full_access(&self, a: Ap) -> bool {
        let m = self.aps.loc[a];
        self.ap_is_plain(a)
            && self.aps.part_start[a] == 0
            && u16::from(self.aps.part_count[a]) == self.mems.partitions[m]
            && self.aps.offset[a] == 0
            && ap::is_contiguous(self.ap_dims(a))
            && self.ap_bytes_per_partition(a) == self.mems.bytes[m] as u64
    }

    /// `IsContiguous`: the bytes touched in each partition form one dense
    /// ascending run.
    pub fn is_contiguous(&self, a: Ap) -> bool {
        ap::is_contiguous(self.ap_dims(a))
    }

    // ----------------------------------------------------------------------
    // Placement

    /// True when an allocator (or the input) has placed the location.
    #[inline]
    pub fn is_placed(&self, m: MemLoc) -> bool {
        self.mems.offset[m] != UNPLACED
    }

    /// Bytes the location occupies in its space: per partition on chip,
    /// partitions × bytes in DRAM.
    pub fn mem_footprint(&self, m: MemLoc) -> u64 {
        match self.mems.space[m] {
            Space::Dram => self.mems.partitions[m] as u64 * self.mems.bytes[m] as u64,
            _ => self.mems.bytes[m] as u64,
        }
    }

    /// Places a location (no checks: the verifier judges placements).
    pub fn place(&mut self, m: MemLoc, base_partition: u16, offset: u64) {
        self.mems.base_partition[m] = base_partition;
        self.mems.offset[m] = offset;
        self.mems.bank[m] = match self.mems.space[m] {
            Space::Psum if self.target.psum_bank_bytes > 0 => {
                (offset / self.target.psum_bank_bytes as u64).min(NO_BANK as u64 - 1) as u8
            }
            _ => NO_BANK,
        };
    }

    /// Forgets a placement.
    pub fn unplace(&mut self, m: MemLoc) {
        self.mems.base_partition[m] = NO_PARTITION;
        self.mems.offset[m] = UNPLACED;
        self.mems.bank[m] = NO_BANK;
    }

    /// The reference's address spelling: `SB<p,b>`, `PSUM<p,bank k>`,
    /// `DRAM<a>`, or `SB<?>` when unplaced.
    pub fn address(&self, m: MemLoc) -> Address {
        Address {
            space: self.mems.space[m],
            base_partition: self.mems.base_partition[m],
            offset: self.mems.offset[m],
            bank: self.mems.bank[m],
            bank_bytes: self.target.psum_bank_bytes,
        }
    }

    /// How messages name an instruction: its text with location and
    /// register names (patterns abbreviated to their location), and where
    /// it stands — `` `%e = activation exp %s, %nmx` (block qtile, 4th) ``.
    pub fn describe_inst(&self, i: Inst) -> InstDescription<'_> {
        InstDescription {
            module: self,
            inst: i,
        }
    }

    /// The `name@SB<p,b>(P x B)` spelling used in messages.
    pub fn describe_mem(&self, m: MemLoc) -> MemDescription<'_> {
        MemDescription {
            module: self,
            mem: m,
        }
    }

    // ----------------------------------------------------------------------
    // Creation

    fn check_count(&self, n: usize, limit: u32, what: &'static str) -> Result<(), IrError> {
        if n >= limit as usize {
            return Err(IrError::Full {
                what,
                limit: limit as u64,
            });
        }
        Ok(())
    }

    fn intern(&mut self, name: &str) -> Result<Name, IrError> {
        if self.mem_by_name.len() < self.names.len() {
            self.rebuild_name_index();
        }
        let n = self.names.intern(name).ok_or(IrError::NameTooLong)?;
        let len = self.names.len();
        if self.mem_by_name.len() < len {
            self.mem_by_name.resize(len, MemLoc::INVALID);
            self.reg_by_name.resize(len, Reg::INVALID);
            self.func_by_name.resize(len, Func::INVALID);
        }
        Ok(n)
    }

    /// Interns a name for a block label or a diagnostic.
    pub fn intern_name(&mut self, name: &str) -> Result<Name, IrError> {
        self.intern(name)
    }

    /// Declares a memory location. Alignment defaults to the element size
    /// (at least the space's minimum alignment).
    pub fn add_mem(
        &mut self,
        name: &str,
        space: Space,
        partitions: u16,
        bytes: u32,
    ) -> Result<MemLoc, IrError> {
        self.check_count(self.num_mems(), self.limits.locations, "memory locations")?;
        let max_parts = match space {
            Space::Sb => self.target.sb_partitions,
            Space::Psum => self.target.psum_partitions,
            Space::Dram => MAX_AP_PARTITIONS,
        }
        .min(MAX_AP_PARTITIONS);
        if partitions == 0 || partitions > max_parts {
            return Err(IrError::BadShape {
                what: "partition count",
                value: partitions as u64,
                max: max_parts as u64,
            });
        }
        if bytes == 0 || bytes == u32::MAX {
            return Err(IrError::BadShape {
                what: "bytes per partition",
                value: bytes as u64,
                max: u32::MAX as u64 - 1,
            });
        }
        let n = self.intern(name)?;
        if self.mem_by_name[n].is_valid() {
            return Err(IrError::Duplicate {
                what: "memory location",
            });
        }
        let min_align = match space {
            Space::Sb => self.target.sb_min_align,
            Space::Psum => self.target.psum_min_align,
            Space::Dram => self.target.dram_min_align,
        };
        let m = self.mems.space.push(space);
        self.mems.partitions.push(partitions);
        self.mems.bytes.push(bytes);
        self.mems.align.push(min_align.max(1));
        self.mems.dtype.push(DType::Raw(1));
        self.mems.name.push(n);
        self.mems.flags.push(MemFlags::empty());
        self.mems.base_partition.push(NO_PARTITION);
        self.mems.offset.push(UNPLACED);
        self.mems.bank.push(NO_BANK);
        self.mem_by_name[n] = m;
        Ok(m)
    }

    /// Sets an untyped element size ([`DType::Raw`], the `elem N`
    /// spelling) and raises the alignment to it when smaller.
    pub fn set_elem_size(&mut self, m: MemLoc, elem: u8) -> Result<(), IrError> {
        self.set_dtype(m, DType::Raw(elem))
    }

    /// Sets the element type and raises the alignment to its size when
    /// smaller. The bytes per partition must be a multiple of the size
    /// (checked by the readers, which know where the declaration is).
    pub fn set_dtype(&mut self, m: MemLoc, t: DType) -> Result<(), IrError> {
        let elem = t.size();
        if elem == 0 || !elem.is_power_of_two() || elem > 16 {
            return Err(IrError::BadShape {
                what: "element size",
                value: elem as u64,
                max: 16,
            });
        }
        self.mems.dtype[m] = t;
        if self.mems.align[m] < elem as u32 {
            self.mems.align[m] = elem as u32;
        }
        Ok(())
    }

    /// Element size of a location in bytes.
    #[inline]
    pub fn elem_size(&self, m: MemLoc) -> u8 {
        self.mems.dtype[m].size()
    }

    /// Sets the alignment (a power of two).
    pub fn set_align(&mut self, m: MemLoc, align: u32) -> Result<(), IrError> {
        if align == 0 || !align.is_power_of_two() || align > 1 << 20 {
            return Err(IrError::BadShape {
                what: "alignment",
                value: align as u64,
                max: 1 << 20,
            });
        }
        self.mems.align[m] = align;
        Ok(())
    }

    /// Declares a scalar register of 1 or 2 lanes.
    pub fn add_reg(&mut self, name: &str, lanes: u8) -> Result<Reg, IrError> {
        self.check_count(self.num_regs(), self.limits.registers, "registers")?;
        if lanes == 0 || lanes > 2 {
            return Err(IrError::BadShape {
                what: "register lanes",
                value: lanes as u64,
                max: 2,
            });
        }
        let n = self.intern(name)?;
        if self.reg_by_name[n].is_valid() {
            return Err(IrError::Duplicate { what: "register" });
        }
        let r = self.regs.lanes.push(lanes);
        self.regs.name.push(n);
        self.regs.flags.push(RegFlags::empty());
        self.regs.lane.push(NO_LANE);
        self.reg_by_name[n] = r;
        Ok(r)
    }

    /// Declares a function; its blocks are the ones added after it.
    pub fn add_func(&mut self, name: &str) -> Result<Func, IrError> {
        let n = self.intern(name)?;
        if self.func_by_name[n].is_valid() {
            return Err(IrError::Duplicate { what: "function" });
        }
        let b = Block::new(self.num_blocks());
        let f = self.funcs.name.push(n);
        self.funcs.first_block.push(b);
        self.funcs.end_block.push(b);
        self.func_by_name[n] = f;
        Ok(f)
    }

    /// Appends a block to the last function, inside `loop_` (innermost).
    pub fn add_block(&mut self, label: &str, loop_: Loop) -> Result<Block, IrError> {
        let f = match self.funcs.name.keys().last() {
            Some(f) => f,
            None => {
                return Err(IrError::BadOperand {
                    what: "a block outside any function",
                })
            }
        };
        self.check_count(self.num_blocks(), self.limits.instructions, "blocks")?;
        let n = self.intern(label)?;
        let b = self.blocks.name.push(n);
        self.blocks.func.push(f);
        self.blocks.loop_.push(loop_);
        self.blocks.first.push(Inst::INVALID);
        self.blocks.last.push(Inst::INVALID);
        self.funcs.end_block[f] = Block::new(b.index() + 1);
        // Every enclosing loop now extends to this block.
        let mut l = loop_;
        while l.is_valid() {
            self.loops.end_block[l] = Block::new(b.index() + 1);
            l = self.loops.parent[l];
        }
        Ok(b)
    }

    /// Opens a loop nested in `parent`; blocks added until it is closed
    /// belong to it.
    pub fn add_loop(&mut self, parent: Loop, trip: u32) -> Result<Loop, IrError> {
        let depth = if parent.is_valid() {
            self.loops.depth[parent] + 1
        } else {
            1
        };
        if depth > self.limits.loop_depth {
            return Err(IrError::Full {
                what: "nested loops",
                limit: self.limits.loop_depth as u64,
            });
        }
        let b = Block::new(self.num_blocks());
        let l = self.loops.parent.push(parent);
        self.loops.name.push(Name::INVALID);
        self.loops.trip.push(trip);
        self.loops.depth.push(depth);
        self.loops.first_block.push(b);
        self.loops.end_block.push(b);
        Ok(l)
    }

    /// Creates an instruction (not yet in any block). Fails without
    /// allocating when `grow` is false and the reserved room is used up.
    fn create_inst(
        &mut self,
        spec: &InstSpec<'_>,
        grow: bool,
        inner: Loop,
    ) -> Result<Inst, IrError> {
        self.check_count(self.num_insts(), self.limits.instructions, "instructions")?;
        let n_aps = spec.inputs.len() + spec.outputs.len();
        if n_aps > self.limits.aps_per_inst as usize {
            return Err(IrError::Full {
                what: "access patterns in one instruction",
                limit: self.limits.aps_per_inst as u64,
            });
        }
        let n_regs = spec.uses.len() + spec.defs.len();
        if n_regs > self.limits.regs_per_inst as usize {
            return Err(IrError::Full {
                what: "registers in one instruction",
                limit: self.limits.regs_per_inst as u64,
            });
        }
        let legacy = legacy_offset_operand(self, spec);
        for (k, s) in spec.inputs.iter().chain(spec.outputs).enumerate() {
            self.check_ap_spec(s)?;
            let read = k < spec.inputs.len();
            let lx;
            let ext = if legacy == Some(k) {
                lx = legacy_ext(self, s);
                &lx
            } else {
                &s.ext
            };
            pattern::check(
                self,
                inner,
                spec.uses.len(),
                read,
                s.loc,
                s.part_start,
                s.part_count,
                s.offset,
                s.elem_size,
                &s.dims,
                ext,
            )
            .map_err(|error| IrError::BadPattern {
                operand: k as u8,
                error,
            })?;
        }
        let n_ext = spec
            .inputs
            .iter()
            .chain(spec.outputs)
            .enumerate()
            .filter(|(k, s)| !s.ext.is_plain() || legacy == Some(*k))
            .count();
        for &r in spec.uses.iter().chain(spec.defs) {
            if r.index() >= self.num_regs() {
                return Err(IrError::BadOperand {
                    what: "an undeclared register",
                });
            }
        }
        let pooled: usize = spec
            .inputs
            .iter()
            .chain(spec.outputs)
            .map(|s| if s.dims.len() > 1 { s.dims.len() } else { 0 })
            .sum();
        if self.dims.len() + pooled > MAX_DIM_POOL {
            return Err(IrError::Full {
                what: "dims of multi-dimension access patterns",
                limit: MAX_DIM_POOL as u64,
            });
        }
        if !grow {
            let full = self.insts.opcode.len() == self.insts.opcode.capacity()
                || self.aps.loc.len() + n_aps > self.aps.loc.capacity()
                || self.dims.len() + pooled > self.dims.capacity()
                || self.ap_ext.len() + n_ext > self.ap_ext.capacity()
                || self.reg_pool.len() + n_regs > self.reg_pool.capacity()
                || (spec.imm != 0 && !self.insts.imms.has_room());
            if full {
                return Err(IrError::Full {
                    what: "instructions in the reserved workspace",
                    limit: self.insts.opcode.capacity() as u64,
                });
            }
        }
        let ap_start = self.aps.loc.len() as u32;
        for (k, s) in spec.inputs.iter().chain(spec.outputs).enumerate() {
            if legacy == Some(k) {
                let ext = legacy_ext(self, s);
                self.push_ap(s, Some(ext));
            } else {
                self.push_ap(s, None);
            }
        }
        let reg_start = self.reg_pool.len() as u32;
        self.reg_pool.extend_from_slice(spec.uses);
        self.reg_pool.extend_from_slice(spec.defs);
        let i = self.insts.opcode.push(spec.opcode);
        self.insts.subop.push(spec.subop);
        self.insts.engine.push(spec.engine);
        self.insts.queue.push(spec.queue);
        self.insts.flags.push(spec.flags);
        self.insts.imms.push(i, spec.imm);
        self.insts.operands.push(Operands {
            ap_start,
            reg_start,
            n_in: spec.inputs.len() as u8,
            n_out: spec.outputs.len() as u8,
            n_use: spec.uses.len() as u8,
            n_def: spec.defs.len() as u8,
        });
        self.insts.block.push(Block::INVALID);
        self.insts.prev.push(Inst::INVALID);
        self.insts.next.push(Inst::INVALID);
        Ok(i)
    }

    fn check_ap_spec(&self, s: &ApSpec) -> Result<(), IrError> {
        if s.loc.index() >= self.num_mems() {
            return Err(IrError::BadOperand {
                what: "an undeclared memory location",
            });
        }
        if s.dims.is_empty() {
            return Err(IrError::BadOperand {
                what: "an access pattern without dimensions",
            });
        }
        if s.dims.iter().any(|d| d.count == 0) {
            return Err(IrError::BadShape {
                what: "dimension count",
                value: 0,
                max: u32::MAX as u64,
            });
        }
        if s.elem_size == 0 {
            return Err(IrError::BadShape {
                what: "element size",
                value: 0,
                max: 16,
            });
        }
        let parts = self.mems.partitions[s.loc];
        // A DRAM pattern with a partition step is checked by its flat
        // extent ([`pattern::check`]).
        let pitched = s.ext.pstep.is_some() && self.mems.space[s.loc] == Space::Dram;
        let max_end = if pitched {
            MAX_AP_PARTITIONS as u32
        } else {
            parts as u32
        };
        if s.part_count == 0 || s.part_start as u32 + s.part_count as u32 > max_end {
            return Err(IrError::BadOperand {
                what: "a partition range outside its location",
            });
        }
        // Locations have at most MAX_AP_PARTITIONS partitions, so this only
        // fails for a location made before that limit (never): checked
        // anyway, as the columns are u8.
        if u8::try_from(s.part_start).is_err() || u8::try_from(s.part_count).is_err() {
            return Err(IrError::BadShape {
                what: "access-pattern partition range end",
                value: s.part_start as u64 + s.part_count as u64,
                max: MAX_AP_PARTITIONS as u64,
            });
        }
        Ok(())
    }

    /// Appends a pattern [`Self::check_ap_spec`] accepted (partitions fit
    /// `u8`, counts ≥ 1) and whose pool room `create_inst` checked; `ext`
    /// replaces the spec's extension when given.
    fn push_ap(&mut self, s: &ApSpec, ext: Option<ApExt>) {
        let ext = ext.unwrap_or_else(|| s.ext.clone());
        let slot_ext = if ext.is_plain() {
            NO_EXT
        } else {
            self.ap_ext.push(ext);
            (self.ap_ext.len() - 1) as u32
        };
        let slot = match s.dims.as_slice() {
            [one] => *one,
            many => {
                let start = self.dims.len();
                self.dims.extend_from_slice(many);
                pool_slot(start, many.len())
            }
        };
        self.aps.loc.push(s.loc);
        self.aps
            .part_start
            .push(s.part_start.min(u8::MAX as u16) as u8);
        self.aps
            .part_count
            .push(s.part_count.min(u8::MAX as u16) as u8);
        self.aps.offset.push(s.offset);
        self.aps.elem_size.push(s.elem_size);
        self.aps.dim.push(slot);
        self.aps.ext.push(slot_ext);
    }

    /// Builds an instruction at the end of `block` (builder and parser use;
    /// may grow storage).
    pub fn append_inst(&mut self, block: Block, spec: &InstSpec<'_>) -> Result<Inst, IrError> {
        if block.index() >= self.num_blocks() {
            return Err(IrError::BadOperand {
                what: "an undeclared block",
            });
        }
        let inner = self
            .blocks
            .loop_
            .get(block)
            .copied()
            .unwrap_or(Loop::INVALID);
        let i = self.create_inst(spec, true, inner)?;
        self.link_at_end(block, i);
        Ok(i)
    }

    /// Creates an instruction inside the reserved workspace and links it
    /// before `at` (pass use: never allocates; fails when the reserve is
    /// used up).
    pub fn insert_before(&mut self, at: Inst, spec: &InstSpec<'_>) -> Result<Inst, IrError> {
        let b = self.insts.block[at];
        if !b.is_valid() {
            return Err(IrError::BadOperand {
                what: "insertion point was removed",
            });
        }
        let i = self.create_inst(spec, false, self.blocks.loop_[b])?;
        let p = self.insts.prev[at];
        self.insts.prev[i] = p;
        self.insts.next[i] = at;
        self.insts.prev[at] = i;
        if p.is_valid() {
            self.insts.next[p] = i;
        } else {
            self.blocks.first[b] = i;
        }
        self.insts.block[i] = b;
        self.live_insts += 1;
        Ok(i)
    }

    /// Creates an instruction inside the reserved workspace and links it
    /// after `at` (pass use: never allocates).
    pub fn insert_after(&mut self, at: Inst, spec: &InstSpec<'_>) -> Result<Inst, IrError> {
        let b = self.insts.block[at];
        if !b.is_valid() {
            return Err(IrError::BadOperand {
                what: "insertion point was removed",
            });
        }
        let i = self.create_inst(spec, false, self.blocks.loop_[b])?;
        let n = self.insts.next[at];
        self.insts.next[i] = n;
        self.insts.prev[i] = at;
        self.insts.next[at] = i;
        if n.is_valid() {
            self.insts.prev[n] = i;
        } else {
            self.blocks.last[b] = i;
        }
        self.insts.block[i] = b;
        self.live_insts += 1;
        Ok(i)
    }

    fn link_at_end(&mut self, b: Block, i: Inst) {
        let last = self.blocks.last[b];
        self.insts.prev[i] = last;
        self.insts.next[i] = Inst::INVALID;
        if last.is_valid() {
            self.insts.next[last] = i;
        } else {
            self.blocks.first[b] = i;
        }
        self.blocks.last[b] = i;
        self.insts.block[i] = b;
        self.live_insts += 1;
    }

    /// Unlinks an instruction from its block. Its operands stay readable.
    pub fn remove_inst(&mut self, i: Inst) {
        let b = self.insts.block[i];
        if !b.is_valid() {
            return;
        }
        let p = self.insts.prev[i];
        let n = self.insts.next[i];
        if p.is_valid() {
            self.insts.next[p] = n;
        } else {
            self.blocks.first[b] = n;
        }
        if n.is_valid() {
            self.insts.prev[n] = p;
        } else {
            self.blocks.last[b] = p;
        }
        self.insts.block[i] = Block::INVALID;
        self.insts.prev[i] = Inst::INVALID;
        self.insts.next[i] = Inst::INVALID;
        self.live_insts -= 1;
    }

    /// Creates a memory location inside the reserved workspace (pass use:
    /// fails instead of growing). The name must be new.
    pub fn try_add_mem(
        &mut self,
        name: &str,
        space: Space,
        partitions: u16,
        bytes: u32,
    ) -> Result<MemLoc, IrError> {
        if self.mems.space.len() == self.mems.space.capacity()
            || self.names.len() >= self.mem_by_name.capacity()
        {
            return Err(IrError::Full {
                what: "memory locations in the reserved workspace",
                limit: self.mems.space.capacity() as u64,
            });
        }
        self.add_mem(name, space, partitions, bytes)
    }

    /// Creates a register inside the reserved workspace (pass use).
    pub fn try_add_reg(&mut self, name: &str, lanes: u8) -> Result<Reg, IrError> {
        if self.regs.lanes.len() == self.regs.lanes.capacity()
            || self.names.len() >= self.reg_by_name.capacity()
        {
            return Err(IrError::Full {
                what: "registers in the reserved workspace",
                limit: self.regs.lanes.capacity() as u64,
            });
        }
        self.add_reg(name, lanes)
    }

    // ----------------------------------------------------------------------
    // Walking

    /// Instructions of a block in order.
    pub fn block_insts(&self, b: Block) -> BlockInsts<'_> {
        BlockInsts {
            module: self,
            next: self.blocks.first[b],
        }
    }

    /// Blocks of a function in layout order.
    pub fn func_blocks(&self, f: Func) -> impl Iterator<Item = Block> {
        (self.funcs.first_block[f].index()..self.funcs.end_block[f].index()).map(Block::new)
    }

    /// Every linked instruction of the module in program order (functions,
    /// then blocks in layout order, then block order).
    pub fn program_order(&self) -> impl Iterator<Item = Inst> + '_ {
        self.blocks
            .name
            .keys()
            .flat_map(move |b| self.block_insts(b))
    }

    /// The innermost loop containing an instruction, or [`Loop::INVALID`].
    pub fn inst_loop(&self, i: Inst) -> Loop {
        let b = self.insts.block[i];
        if b.is_valid() {
            self.blocks.loop_[b]
        } else {
            Loop::INVALID
        }
    }

    /// Loop depth of an instruction (0 outside loops).
    pub fn inst_loop_depth(&self, i: Inst) -> u16 {
        let l = self.inst_loop(i);
        if l.is_valid() {
            self.loops.depth[l]
        } else {
            0
        }
    }

    /// Checks the structural invariants listed in the module doc.
    pub fn check_structure(&self) -> Result<(), &'static str> {
        let mut count = 0usize;
        for b in self.blocks.name.keys() {
            let mut prev = Inst::INVALID;
            let mut i = self.blocks.first[b];
            while i.is_valid() {
                if self.insts.block[i] != b {
                    return Err("an instruction's block column disagrees with its list");
                }
                if self.insts.prev[i] != prev {
                    return Err("broken prev link");
                }
                prev = i;
                i = self.insts.next[i];
                count += 1;
                if count > self.num_insts() {
                    return Err("cycle in an instruction list");
                }
            }
            if self.blocks.last[b] != prev {
                return Err("a block's last instruction disagrees with its list");
            }
        }
        if count != self.live_insts {
            return Err("linked instruction count disagrees");
        }
        for l in self.loops.trip.keys() {
            let p = self.loops.parent[l];
            if p.is_valid()
                && (self.loops.first_block[l] < self.loops.first_block[p]
                    || self.loops.end_block[l] > self.loops.end_block[p])
            {
                return Err("a loop is not nested in its parent");
            }
        }
        Ok(())
    }
}

/// Iterator over a block's instructions.
#[derive(Debug, Clone)]
pub struct BlockInsts<'m> {
    module: &'m Module,
    next: Inst,
}

impl Iterator for BlockInsts<'_> {
    type Item = Inst;
    fn next(&mut self) -> Option<Inst> {
        if !self.next.is_valid() {
            return None;
        }
        let i = self.next;
        self.next = self.module.insts.next[i];
        Some(i)
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

/// A placed address, printed in the reference's spelling.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// Space.
    pub space: Space,
    /// First partition.
    pub base_partition: u16,
    /// Byte offset.
    pub offset: u64,
    /// PSUM bank.
    pub bank: u8,
    /// PSUM bank size, to print the offset inside the bank.
    pub bank_bytes: u32,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.offset == UNPLACED {
            return write!(f, "{}<?>", self.space.upper());
        }
        match self.space {
            Space::Sb => write!(f, "SB<{},{}>", self.base_partition, self.offset),
            Space::Psum => {
                let in_bank = self.offset % self.bank_bytes.max(1) as u64;
                if in_bank == 0 {
                    write!(f, "PSUM<{},bank {}>", self.base_partition, self.bank)
                } else {
                    write!(
                        f,
                        "PSUM<{},bank {}+{}>",
                        self.base_partition, self.bank, in_bank
                    )
                }
            }
            Space::Dram => write!(f, "DRAM<{}>", self.offset),
        }
    }
}

/// The operand index (inputs, then outputs) of a DMA's DRAM-side pattern
/// that the legacy spelling moves: a DMA with exactly one used register and
/// no register term anywhere reads that register as the dynamic offset of
/// its DRAM side (the load's source, the save's destination, a copy's
/// DRAM operand, the source when both are). `None` otherwise.
fn legacy_offset_operand(m: &Module, spec: &InstSpec<'_>) -> Option<usize> {
    if !spec.opcode.is_dma() || spec.uses.len() != 1 {
        return None;
    }
    let any_term = spec
        .inputs
        .iter()
        .chain(spec.outputs)
        .any(|s| s.ext.reg.is_some());
    if any_term {
        return None;
    }
    let dram = |s: &ApSpec| m.mems.space.get(s.loc).copied() == Some(Space::Dram);
    let input = spec.inputs.first().filter(|s| dram(s)).map(|_| 0);
    let output = spec
        .outputs
        .first()
        .filter(|s| dram(s))
        .map(|_| spec.inputs.len());
    match spec.opcode {
        Opcode::Save => output.or(input),
        _ => input.or(output),
    }
}

/// The legacy register term of `s` (see [`legacy_offset_operand`]): the
/// first use, scale 1, anywhere in the location's row.
fn legacy_ext(m: &Module, s: &ApSpec) -> ApExt {
    let mut e = s.ext.clone();
    e.reg = Some(RegTerm {
        use_index: 0,
        scale: 1,
        window_lo: 0,
        window_hi: m.mems.bytes.get(s.loc).copied().unwrap_or(0),
    });
    e
}

/// See [`Module::describe_inst`].
#[derive(Copy, Clone, Debug)]
pub struct InstDescription<'m> {
    module: &'m Module,
    inst: Inst,
}

impl fmt::Display for InstDescription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, i) = (self.module, self.inst);
        let Some(&op) = m.insts.opcode.get(i) else {
            return write!(f, "{i}");
        };
        let loc = |a: Ap| {
            m.mems
                .name
                .get(m.aps.loc[a])
                .map_or("?", |&n| m.names.get(n))
        };
        let reg = |r: Reg| m.regs.name.get(r).map_or("?", |&n| m.names.get(n));
        f.write_str("`")?;
        let mut first = true;
        for a in m.outputs(i) {
            write!(f, "{}%{}", if first { "" } else { ", " }, loc(a))?;
            first = false;
        }
        for &r in m.defs(i) {
            write!(f, "{}${}", if first { "" } else { ", " }, reg(r))?;
            first = false;
        }
        if !first {
            f.write_str(" = ")?;
        }
        f.write_str(op.mnemonic())?;
        let sub = m.insts.subop[i];
        if sub != SubOp::None {
            write!(f, " {}", sub.keyword())?;
        }
        let mut first = true;
        for a in m.inputs(i) {
            write!(f, "{}%{}", if first { " " } else { ", " }, loc(a))?;
            first = false;
        }
        for &r in m.uses(i) {
            write!(f, "{}${}", if first { " " } else { ", " }, reg(r))?;
            first = false;
        }
        f.write_str("`")?;
        let b = m.insts.block[i];
        if b.is_valid() {
            let nth = m.block_insts(b).position(|x| x == i).map_or(0, |k| k + 1);
            let suffix = match (nth % 10, nth % 100) {
                (1, r) if r != 11 => "st",
                (2, r) if r != 12 => "nd",
                (3, r) if r != 13 => "rd",
                _ => "th",
            };
            write!(f, " (block {}, {nth}{suffix})", m.block_name(b))?;
        } else {
            f.write_str(" (removed)")?;
        }
        Ok(())
    }
}

/// `name@SB<p,b>(P x B)`.
#[derive(Copy, Clone, Debug)]
pub struct MemDescription<'m> {
    module: &'m Module,
    mem: MemLoc,
}

impl fmt::Display for MemDescription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.module;
        write!(
            f,
            "%{}@{}({} x {})",
            m.mem_name(self.mem),
            m.address(self.mem),
            m.mems.partitions[self.mem],
            m.mems.bytes[self.mem]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ap_spec(loc: MemLoc, parts: u16, dims: &[Dim]) -> ApSpec {
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

    fn one_block(m: &mut Module) -> Block {
        m.add_func("f").unwrap();
        m.add_block("b", Loop::INVALID).unwrap()
    }

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
    fn set_ap_dim_rewrites_inline_and_pooled_dims_and_refuses_bad_ones() {
        let mut m = Module::new(Target::default());
        let t = m.add_mem("t", Space::Sb, 128, 4096).unwrap();
        let b = one_block(&mut m);
        let one = [Dim::new(1, 64)];
        let two = [Dim::new(64, 4), Dim::new(1, 8)];
        let ins = [ap_spec(t, 128, &one)];
        let outs = [ap_spec(t, 128, &two)];
        let mut s = InstSpec::new(Opcode::TensorCopy);
        s.inputs = &ins;
        s.outputs = &outs;
        let i = m.append_inst(b, &s).unwrap();
        let (a, o) = (m.inputs(i).next().unwrap(), m.outputs(i).next().unwrap());
        m.set_ap_dim(a, 0, Dim::new(2, 16)).unwrap();
        assert_eq!(m.ap_dims(a), &[Dim::new(2, 16)]);
        m.set_ap_dim(o, 1, Dim::new(1, 4)).unwrap();
        assert_eq!(m.ap_dims(o), &[Dim::new(64, 4), Dim::new(1, 4)]);
        assert!(matches!(
            m.set_ap_dim(a, 0, Dim::new(1, 0)),
            Err(IrError::BadShape {
                what: "dimension count",
                ..
            })
        ));
        assert!(matches!(
            m.set_ap_dim(o, 2, Dim::new(1, 1)),
            Err(IrError::BadShape {
                what: "dimension index",
                value: 2,
                max: 1
            })
        ));
        assert_eq!(m.ap_dims(a), &[Dim::new(2, 16)]);
    }

    #[test]
    fn single_dims_are_inline_and_multi_dims_are_pooled() {
        let mut m = Module::new(Target::default());
        let t = m.add_mem("t", Space::Sb, 128, 4096).unwrap();
        let b = one_block(&mut m);
        let one = [Dim::new(-2, 7)];
        let three = [Dim::new(512, 2), Dim::new(8, 4), Dim::new(1, 8)];
        let ins = [ap_spec(t, 128, &one), ap_spec(t, 64, &three)];
        let outs = [ap_spec(t, 1, &three[1..])];
        let mut s = InstSpec::new(Opcode::TensorCopy);
        s.inputs = &ins;
        s.outputs = &outs;
        let i = m.append_inst(b, &s).unwrap();
        let aps: alloc::vec::Vec<Ap> = m.all_aps(i).collect();
        assert_eq!(m.ap_dims(aps[0]), &one);
        assert_eq!(m.ap_dims(aps[1]), &three);
        assert_eq!(m.ap_dims(aps[2]), &three[1..]);
        assert_eq!(m.ap_ndims(aps[1]), 3);
        // Only the two multi-dimension patterns use the pool.
        assert_eq!(m.dims.len(), 5);
        assert_eq!(m.aps.part_count[aps[0]], 128);
        assert_eq!(m.imm(i), 0);
        assert!(m.insts.imms.is_empty());
    }

    #[test]
    fn zero_counts_and_wide_partition_ranges_are_refused() {
        let mut m = Module::new(Target::default());
        let d = m.add_mem("d", Space::Dram, 255, 64).unwrap();
        assert_eq!(
            m.add_mem("e", Space::Dram, 256, 64),
            Err(IrError::BadShape {
                what: "partition count",
                value: 256,
                max: MAX_AP_PARTITIONS as u64,
            })
        );
        let b = one_block(&mut m);
        let outs = [ap_spec(d, 255, &[Dim::new(1, 0)])];
        let mut s = InstSpec::new(Opcode::Memset);
        s.outputs = &outs;
        assert!(matches!(
            m.append_inst(b, &s),
            Err(IrError::BadShape {
                what: "dimension count",
                ..
            })
        ));
        let outs = [ap_spec(d, 255, &[Dim::new(1, 64)])];
        s.outputs = &outs;
        let i = m.append_inst(b, &s).unwrap();
        assert_eq!(m.aps.part_count[m.outputs(i).next().unwrap()], 255);
    }

    #[test]
    fn immediates_are_sparse_and_pass_inserts_need_reserved_room() {
        let mut m = Module::new(Target::default());
        let r = m.add_reg("r", 1).unwrap();
        let b = one_block(&mut m);
        let defs = [r];
        let mut s = InstSpec::new(Opcode::ScalarImm);
        s.defs = &defs;
        let zero = m.append_inst(b, &s).unwrap();
        s.imm = -5;
        let five = m.append_inst(b, &s).unwrap();
        assert_eq!((m.imm(zero), m.imm(five)), (0, -5));
        assert_eq!(m.insts.imms.len(), 1);
        // Room for instructions but not for another immediate: refused.
        m.reserve(Capacity {
            insts: 4,
            reg_operands: 4,
            ..Capacity::default()
        });
        m.insts.imms.shrink_to_fit();
        assert!(matches!(
            m.insert_after(five, &s),
            Err(IrError::Full { .. })
        ));
        s.imm = 0;
        assert!(m.insert_after(five, &s).is_ok());
        m.reserve(Capacity {
            imms: 1,
            ..Capacity::default()
        });
        s.imm = 9;
        let nine = m.insert_after(five, &s).unwrap();
        assert_eq!(m.imm(nine), 9);
        m.check_structure().unwrap();
    }
}
