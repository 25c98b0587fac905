//! The entity tables: one struct of columns per kind of entity, every
//! column of a table indexed by the same id and always of the same length.
//!
//! Each table's columns are declared once, in [`tables!`]: the struct and
//! every method that must touch all of its columns (reserving, shrinking,
//! counting reserved bytes) are generated from that one list, so a column
//! added there cannot be forgotten by any of them.

use arrayvec::ArrayVec;

use super::{Block, Capacity, Func, Inst, Loop, MemLoc, Module, Reg};
#[allow(unused_imports)] // doc links
use super::{MAX_AP_PARTITIONS, NO_BANK, NO_LANE, NO_PARTITION, UNKNOWN_TRIP, UNPLACED};
use crate::ir::ap::Dim;
use crate::ir::column::Column;
use crate::ir::imm::ImmTable;
use crate::ir::names::Name;
use crate::ir::pattern::ApExt;
use crate::ir::types::{DType, Engine, InstFlags, MemFlags, Opcode, RegFlags, Space, SubOp};

/// Declares the tables. Each table names the id that indexes it, the
/// [`Capacity`] field that counts its entities (which is also its field in
/// [`Module`]), the column whose length is the table's, and the module's
/// count of it. A column is written with its element type and becomes a
/// [`Column`] indexed by the table's id; a field reserved by another count
/// says so after `=>` and is a structure of its own, written with its whole
/// type (the sparse immediates). Generates the struct, its
/// `reserve_exact`, `shrink_to_fit`, `reserved_bytes`, `len` and
/// `capacity`, and the module's counts (`num_*`), `reserve_tables`,
/// `count_tables` and `capacity_tables`.
macro_rules! tables {
    (@count $extra:ident, $table:ident) => { $extra.$table };
    (@count $extra:ident, $table:ident, $column:ident) => { $extra.$column };
    (@type $id:ident, $ty:ty) => { Column<$id, $ty> };
    (@type $id:ident, $ty:ty, $column:ident) => { $ty };
    ($(
        $(#[$tm:meta])*
        pub struct $name:ident of $id:ident in $table:ident, length of $key:ident,
            counted by $num:ident: $num_doc:literal {
            $(
                $(#[$fm:meta])*
                $fv:vis $field:ident : $ty:ty $(=> $count:ident)?
            ),* $(,)?
        }
    )*) => {
        $(
            $(#[$tm])*
            #[derive(Clone, Debug, Default)]
            pub struct $name {
                $( $(#[$fm])* $fv $field: tables!(@type $id, $ty $(, $count)?), )*
            }

            impl $name {
                /// Reserves room for `extra` more entities in every column.
                pub(super) fn reserve_exact(&mut self, extra: &Capacity) {
                    $( self.$field.reserve_exact(tables!(@count extra, $table $(, $count)?)); )*
                }

                /// Drops the reserved room of every column beyond what it holds.
                #[allow(dead_code)] // the module shrinks only its instruction side
                pub(super) fn shrink_to_fit(&mut self) {
                    $( self.$field.shrink_to_fit(); )*
                }

                /// Makes every column equal to `src`'s, reserving at least
                /// its room ([`super::copy`]).
                pub(super) fn copy_from(&mut self, src: &Self) {
                    $( super::copy::CopyInto::copy_from(&mut self.$field, &src.$field); )*
                }

                /// Heap bytes reserved by every column.
                pub(super) fn reserved_bytes(&self) -> usize {
                    0 $( + self.$field.reserved_bytes() )*
                }

                /// Number of entities.
                pub(super) fn len(&self) -> usize {
                    self.$key.len()
                }

                /// Entities there is room for.
                pub(super) fn capacity(&self) -> usize {
                    self.$key.capacity()
                }
            }
        )*

        impl Module {
            /// Reserves room for `extra` more entities in every table.
            pub(super) fn reserve_tables(&mut self, extra: &Capacity) {
                $( self.$table.reserve_exact(extra); )*
            }

            $(
                $(#[$tm])*
                ///
                /// Read only: changes go through the module's mutators, which
                /// keep the invariants of the module doc.
                #[inline]
                pub fn $table(&self) -> &$name {
                    &self.$table
                }

                #[doc = $num_doc]
                pub fn $num(&self) -> usize {
                    self.$table.len()
                }
            )*

            /// Writes the entity count of every table into `c`.
            pub(super) fn count_tables(&self, c: &mut Capacity) {
                $( c.$table = self.$table.len(); )*
            }

            /// Writes the room of every table into `c`.
            pub(super) fn capacity_tables(&self, c: &mut Capacity) {
                $( c.$table = self.$table.capacity(); )*
            }
        }
    };
}

tables! {
    /// Memory-location columns.
    pub struct Mems of MemLoc in mems, length of space,
        counted by num_mems: "Number of memory locations." {
        /// The space the location lives in.
        pub space: Space,
        /// Partitions (rows) the location spans.
        pub partitions: u16,
        /// Bytes per partition.
        pub bytes: u32,
        /// Byte alignment of the offset.
        pub align: u32,
        /// Element type (its size is the element size).
        pub dtype: DType,
        /// Interned name (without the `%`).
        pub name: Name,
        /// Flags.
        pub flags: MemFlags,
        /// First partition once placed (on-chip; DRAM: 0), else [`NO_PARTITION`].
        pub base_partition: u16,
        /// Byte offset once placed, else [`UNPLACED`]. SB: offset inside every
        /// partition; PSUM: offset inside a partition, bank × bank bytes + offset
        /// in bank; DRAM: byte address in the flat space.
        pub offset: u64,
        /// PSUM bank once placed, else [`NO_BANK`].
        pub bank: u8,
    }

    /// Register columns.
    pub struct Regs of Reg in regs, length of lanes,
        counted by num_regs: "Number of registers." {
        /// 1 (32-bit) or 2 (64-bit, an aligned lane pair).
        pub lanes: u8,
        /// Interned name (without the `$`).
        pub name: Name,
        /// Flags.
        pub flags: RegFlags,
        /// First physical lane once colored, else [`NO_LANE`].
        pub lane: u16,
    }

    /// Access-pattern columns (19 bytes per pattern).
    pub struct Aps of Ap in aps, length of loc,
        counted by num_aps: "Number of access patterns." {
        /// The location accessed.
        pub loc: MemLoc,
        /// First partition, relative to the location's first partition
        /// (`u8`: locations have at most [`MAX_AP_PARTITIONS`] partitions).
        pub part_start: u8,
        /// Partitions accessed.
        pub part_count: u8,
        /// Byte offset inside each partition, relative to the location.
        pub offset: u32,
        /// Element size in bytes.
        pub elem_size: u8,
        /// The dims, read through [`Module::ap_dims`]: a single-dimension
        /// pattern's dim itself (count ≥ 1); for 2 or more dims, a marker
        /// with count 0 whose stride bits are `pool start << 3 | ndims`.
        /// Nearly every pattern has one dim, so this saves the pool index
        /// and the dim count per pattern.
        pub(super) dim: Dim,
        /// The pattern's extension ([`ApExt`]: loop terms, register term,
        /// partition step) as an index into the module's extension pool, or
        /// [`NO_EXT`] for a plain pattern (nearly all of them). Read it with
        /// [`Module::ap_ext`].
        pub(super) ext: u32,
    }

    /// Instruction columns.
    pub struct Insts of Inst in insts, length of opcode,
        counted by num_insts: "Number of instructions ever created (including removed ones)." {
        /// What the instruction does.
        pub opcode: Opcode,
        /// Sub-operation (ALU op, activation function).
        pub subop: SubOp,
        /// Engine.
        pub engine: Engine,
        /// DMA queue (DMA instructions; sync waits: the queue waited on).
        pub queue: u8,
        /// Flags.
        pub flags: InstFlags,
        /// Immediates (scalar `imm`, `memset` value), sparse: read them with
        /// [`Module::imm`].
        pub imms: ImmTable => imms,
        /// Operand handle.
        pub operands: Operands,
        /// Containing block, [`Block::INVALID`] when removed or not yet placed.
        pub block: Block,
        /// Previous instruction in the block.
        pub prev: Inst,
        /// Next instruction in the block.
        pub next: Inst,
    }

    /// Block columns.
    pub struct Blocks of Block in blocks, length of name,
        counted by num_blocks: "Number of blocks." {
        /// Label.
        pub name: Name,
        /// Owning function.
        pub func: Func,
        /// Innermost loop containing the block, or [`Loop::INVALID`].
        pub loop_: Loop,
        /// First instruction.
        pub first: Inst,
        /// Last instruction.
        pub last: Inst,
    }

    /// Loop columns.
    pub struct Loops of Loop in loops, length of trip,
        counted by num_loops: "Number of loops." {
        /// Name of the induction variable (what loop terms of access patterns
        /// print), or [`Name::INVALID`] for an unnamed loop.
        pub name: Name,
        /// Enclosing loop or [`Loop::INVALID`].
        pub parent: Loop,
        /// Trip count or [`UNKNOWN_TRIP`].
        pub trip: u32,
        /// Nesting depth (1 for an outermost loop).
        pub depth: u16,
        /// First block.
        pub first_block: Block,
        /// One past the last block.
        pub end_block: Block,
    }

    /// Function columns.
    pub struct Funcs of Func in funcs, length of name,
        counted by num_funcs: "Number of functions." {
        /// Name (without the `@`).
        pub name: Name,
        /// First block.
        pub first_block: Block,
        /// One past the last block.
        pub end_block: Block,
    }
}

use super::Ap;

/// The `ext` of a plain access pattern.
pub const NO_EXT: u32 = u32::MAX;

/// The extension of every plain pattern.
pub(super) static PLAIN: ApExt = ApExt {
    pstep: None,
    terms: ArrayVec::new_const(),
    reg: None,
};

/// The slot of a multi-dimension pattern: its dims are `pool[start..start + n]`.
#[inline]
pub(super) fn pool_slot(start: usize, n: usize) -> Dim {
    Dim::new(((start as u32) << 3 | n as u32) as i32, 0)
}

/// The pool range `(start, n)` of a multi-dimension pattern's slot, or
/// `None` for a slot that holds its single dim inline.
#[inline]
pub(super) fn pooled(slot: &Dim) -> Option<(usize, usize)> {
    (slot.count == 0).then(|| {
        let bits = slot.stride as u32;
        ((bits >> 3) as usize, (bits & 7) as usize)
    })
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
