//! What the CFG colorer hands back: a location per operand and per block
//! parameter, and the edits (moves, spills, reloads) at their program
//! points, in program order.
//!
//! Edit points: before an instruction (reloads, copies for tied uses),
//! after it (stores of its defs), or on an edge (the parallel copy into the
//! successor's parameters, already sequenced). An edge's edits run after
//! the predecessor's last instruction (and its after-edits) and before the
//! successor's first; since there are no critical edges the client emits
//! them at the start of the successor when it has one predecessor, else at
//! the end of the predecessor (before its jump, which has one successor).
//!
//! Locations count lanes: a register is a lane `0..K` (a pair is its even
//! first lane); a slot location is a lane of the spill area, a 2-lane
//! value's slot being two consecutive slot lanes.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use alloc::vec::Vec;
use core::fmt;

use super::function::{Block, CfgInst};

/// A register lane or a spill-slot lane.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location(u32);

const SLOT_BIT: u32 = 1 << 31;

impl Location {
    /// Register lane `r`.
    #[inline]
    pub const fn reg(r: u32) -> Self {
        Location(r)
    }
    /// Slot lane `s`.
    #[inline]
    pub const fn slot(s: u32) -> Self {
        Location(s | SLOT_BIT)
    }
    /// The register lane, if a register.
    #[inline]
    pub const fn as_reg(self) -> Option<u32> {
        if self.0 & SLOT_BIT == 0 {
            Some(self.0)
        } else {
            None
        }
    }
    /// The slot lane, if a slot.
    #[inline]
    pub const fn as_slot(self) -> Option<u32> {
        if self.0 & SLOT_BIT != 0 {
            Some(self.0 & !SLOT_BIT)
        } else {
            None
        }
    }
    /// True for a register.
    #[inline]
    pub const fn is_reg(self) -> bool {
        self.0 & SLOT_BIT == 0
    }
    /// This location `l` lanes further (the same kind).
    #[inline]
    pub const fn plus(self, l: u32) -> Self {
        Location(self.0 + l)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.as_reg(), self.as_slot()) {
            (Some(r), _) => write!(f, "r{r}"),
            (_, Some(s)) => write!(f, "slot{s}"),
            _ => Ok(()),
        }
    }
}

/// Where an edit runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EditPoint {
    /// Before the instruction (after the previous one's after-edits).
    Before(CfgInst),
    /// After the instruction.
    After(CfgInst),
    /// On the edge from the block to its `succ`-th successor.
    Edge {
        /// The predecessor.
        from: Block,
        /// Index into its successors.
        succ: u32,
    },
}

/// One move between locations.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    /// Where it runs.
    pub point: EditPoint,
    /// Source.
    pub from: Location,
    /// Destination.
    pub to: Location,
    /// Lanes moved (consecutive from both ends).
    pub lanes: u8,
}

/// What kind of edit this is, by its ends.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EditKind {
    /// Register to slot.
    Spill,
    /// Slot to register.
    Reload,
    /// Register to register.
    Move,
    /// Slot to slot (never emitted; a checker accepts it).
    SlotMove,
}

impl Edit {
    /// The kind by the two ends.
    pub fn kind(&self) -> EditKind {
        match (self.from.is_reg(), self.to.is_reg()) {
            (true, false) => EditKind::Spill,
            (false, true) => EditKind::Reload,
            (true, true) => EditKind::Move,
            (false, false) => EditKind::SlotMove,
        }
    }
}

/// Figures of one allocation.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct CfgStats {
    /// Instructions of the function.
    pub instructions: u32,
    /// Largest lane-weighted number of values live at one point (tied
    /// copies included): no spill is needed when it is at most K.
    pub max_live: u32,
    /// Coloring rounds (1 without spills).
    pub rounds: u32,
    /// Stores inserted (register to slot).
    pub spills: u32,
    /// Reloads inserted (slot to register).
    pub reloads: u32,
    /// Register moves inserted (edge copies, tied copies, cycle breaks).
    pub moves_inserted: u32,
    /// The function's own moves whose two sides got different registers.
    pub moves_kept: u32,
    /// Σ over inserted edits and kept moves of 10^depth of their block.
    pub weighted_cost: f64,
    /// Classes spilled to slots.
    pub spilled: u32,
    /// Slot lanes used.
    pub slot_lanes: u32,
    /// Copies and edge arguments coalesced in the last round.
    pub coalesced: u32,
}

/// The assignment and the edits (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct CfgAllocation {
    /// Registers available.
    pub k: u16,
    pub(crate) op_start: Vec<u32>,
    pub(crate) n_use: Vec<u16>,
    pub(crate) op_locs: Vec<Location>,
    pub(crate) param_start: Vec<u32>,
    pub(crate) param_locs: Vec<Location>,
    pub(crate) edits: Vec<Edit>,
    /// Slot lanes the edits use.
    pub slot_lanes: u32,
    /// Figures.
    pub stats: CfgStats,
}

impl CfgAllocation {
    /// Location of use `j` of instruction `i`.
    pub fn use_location(&self, i: CfgInst, j: usize) -> Option<Location> {
        let s = *self.op_start.get(i.index())? as usize;
        let n = *self.n_use.get(i.index())? as usize;
        if j >= n {
            return None;
        }
        self.op_locs.get(s + j).copied()
    }

    /// Location of def `j` of instruction `i`.
    pub fn def_location(&self, i: CfgInst, j: usize) -> Option<Location> {
        let s = *self.op_start.get(i.index())? as usize;
        let e = *self.op_start.get(i.index() + 1)? as usize;
        let n = *self.n_use.get(i.index())? as usize;
        if s + n + j >= e {
            return None;
        }
        self.op_locs.get(s + n + j).copied()
    }

    /// Operand locations of instruction `i`: uses, then defs.
    pub fn operand_locations(&self, i: CfgInst) -> &[Location] {
        match (
            self.op_start.get(i.index()),
            self.op_start.get(i.index() + 1),
        ) {
            (Some(&s), Some(&e)) => self.op_locs.get(s as usize..e as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Location of parameter `j` of block `b`.
    pub fn param_location(&self, b: Block, j: usize) -> Option<Location> {
        let s = *self.param_start.get(b.index())? as usize;
        let e = *self.param_start.get(b.index() + 1)? as usize;
        if s + j >= e {
            return None;
        }
        self.param_locs.get(s + j).copied()
    }

    /// The edits in program order.
    pub fn edits(&self) -> &[Edit] {
        &self.edits
    }

    /// Mutable access for tests that plant corruptions.
    #[cfg(test)]
    pub(crate) fn parts_mut(&mut self) -> (&mut Vec<Location>, &mut Vec<Location>, &mut Vec<Edit>) {
        (&mut self.op_locs, &mut self.param_locs, &mut self.edits)
    }
}
