//! The intermediate representation: typed ids, struct-of-arrays columns,
//! access patterns and a builder.

pub mod ap;
#[allow(clippy::indexing_slicing)] // column indexing by typed ids (see the crate docs)
pub(crate) mod builder;
#[allow(clippy::indexing_slicing)] // column indexing by typed ids (see the crate docs)
pub(crate) mod column;
pub(crate) mod entity;
pub(crate) mod imm;
#[allow(clippy::indexing_slicing)] // column indexing by typed ids (see the crate docs)
pub(crate) mod module;
#[allow(clippy::indexing_slicing)] // column indexing by typed ids (see the crate docs)
pub mod names;
pub mod pattern;
#[allow(clippy::indexing_slicing)] // column indexing by typed ids (see the crate docs)
pub mod shape;
pub mod types;

pub use ap::{Dim, MAX_DIMS};
pub use builder::{full_ap, slice_ap, Builder};
pub use column::{Column, EntityRef};
pub use imm::ImmTable;
pub(crate) use module::{display_named, WriteNamed};
pub use module::{
    Address, Ap, ApSpec, Block, BlockInsts, Capacity, DisplayNamed, Entity, Func, InModule, Inst,
    InstDescription, InstSpec, IrError, Limits, Loop, MemDescription, MemLoc, MemSpec, Module,
    ModuleId, Operands, Reg, RegDescription, StorageBytes, MAX_AP_PARTITIONS, NO_BANK, NO_EXT,
    NO_LANE, NO_PARTITION, UNKNOWN_TRIP, UNPLACED,
};
pub use names::{Name, NamePool};
pub use pattern::{ApExt, Extent, IvTerm, PatternError, RegTerm, Slots, MAX_IV_TERMS};
pub use types::{DType, Engine, InstFlags, MemFlags, Opcode, RegFlags, Space, SubOp};
