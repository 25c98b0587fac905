//! The typed ids of the IR's entities and the sentinels placement columns
//! hold until an allocator places the entity.

use crate::entity_id;
use crate::ir::column::EntityRef;

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

/// An entity an error or a verifier finding blames, by id: what a driver
/// maps to the place its input wrote it (the core keeps no source
/// positions). Ids of entities a pass created lie past the input's.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Entity {
    /// An instruction.
    Inst(Inst),
    /// A memory location.
    Mem(MemLoc),
    /// A register.
    Reg(Reg),
}

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
