//! Descriptions of locations, access patterns and instructions to create:
//! what the mutators take, checked when the entity is made.

use arrayvec::ArrayVec;

use super::{MemLoc, Reg};
use crate::ir::ap::{Dim, MAX_DIMS};
use crate::ir::pattern::{ApExt, PlainFields};
use crate::ir::types::{DType, Engine, InstFlags, MemFlags, Opcode, Space, SubOp};

/// A description of a memory location to create whole: its shape, element
/// type, alignment and flags at once, so that a failed check leaves no
/// half-made location behind ([`Module::try_add_mem`](super::Module::try_add_mem)).
#[derive(Copy, Clone, Debug)]
pub struct MemSpec<'a> {
    /// Its name, new in the module.
    pub name: &'a str,
    /// The space it lives in.
    pub space: Space,
    /// Partitions.
    pub partitions: u16,
    /// Bytes per partition.
    pub bytes: u32,
    /// Element type.
    pub dtype: DType,
    /// The alignment (a power of two), or 0 for the default: the space's
    /// minimum alignment raised to the element size.
    pub align: u32,
    /// Flags.
    pub flags: MemFlags,
}

impl<'a> MemSpec<'a> {
    /// An untyped, default-aligned, unflagged location of `partitions ×
    /// bytes` in `space`.
    pub fn new(name: &'a str, space: Space, partitions: u16, bytes: u32) -> MemSpec<'a> {
        MemSpec {
            name,
            space,
            partitions,
            bytes,
            dtype: DType::Raw(1),
            align: 0,
            flags: MemFlags::empty(),
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

impl ApSpec {
    /// The described pattern's plain fields as [`crate::ir::pattern`] takes them.
    pub fn plain(&self) -> PlainFields<'_> {
        PlainFields {
            loc: self.loc,
            part_start: self.part_start,
            part_count: self.part_count,
            offset: self.offset,
            elem_size: self.elem_size,
            dims: &self.dims,
        }
    }
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
