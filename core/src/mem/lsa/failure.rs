//! The scan's failure report: [`LsaError`], and for the one that matters
//! most, out of room after spilling, the [`AllocationFailure`] with its
//! data (the tensor, what it needed, the largest free rectangle, what the
//! instruction accesses, what is live) and its text in the user's names.
//!
//! Invariant: the failure carries its names inline (fixed-capacity strings)
//! so that building it allocates nothing; names longer than their buffer
//! are cut at a character boundary.

// See the module doc of `super`: the failure is carried inline.
#![allow(clippy::result_large_err)]

use core::fmt;

use crate::ir::DisplayNamed;

use super::{LsaWorkspace, SPILL_FRACTION, SPILL_SLACK, SPILL_SMALL_CAP};
use crate::ir::{Ap, Inst, IrError, MemLoc, Module, Space};
use crate::mem::best_fit::{ManagerError, Rect};

/// Most live tensors listed in an [`AllocationFailure`].
pub const LIVE_LISTED: usize = 8;

/// A tensor that could not be placed even after spilling everything
/// spillable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocationFailure {
    /// The space.
    pub space: Space,
    /// The tensor.
    pub tensor: MemLoc,
    /// Its name.
    pub tensor_name: heapless::String<96>,
    /// The instruction that defines it (or reads it first).
    pub instruction: Inst,
    /// Its position in program order.
    pub position: u32,
    /// The rectangle it needs.
    pub needed: Rect,
    /// The largest free rectangle of its partition count.
    pub largest_free: Rect,
    /// Bytes per partition the instruction accesses in this space.
    pub accessed_bytes: u64,
    /// Usable bytes per partition of the space.
    pub capacity: u64,
    /// Tensors live at that instruction.
    pub live_count: u32,
    /// Their bytes per partition, summed.
    pub live_bytes: u64,
    /// The first few, by name and size.
    pub live_at: heapless::Vec<(heapless::String<48>, Rect), LIVE_LISTED>,
    /// Why nothing could be spilled.
    pub reason: &'static str,
}

impl fmt::Display for AllocationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, None)
    }
}

impl AllocationFailure {
    /// The failure as text; with `m`, the instruction by its text and
    /// block (the module the scan failed on), else by its position.
    fn write(&self, f: &mut fmt::Formatter<'_>, m: Option<&Module>) -> fmt::Result {
        let sp = self.space.upper();
        match m {
            Some(m) if self.instruction.is_valid() => {
                write!(f, "Instruction {}", m.describe_inst(self.instruction))?
            }
            _ => write!(f, "The instruction at position {}", self.position)?,
        }
        write!(
            f,
            " couldn't be allocated in {sp}: %{} needs {} but the largest free rectangle is {}. \
             Total Accessed Bytes per partition by instruction: {} / Total {sp} Partition Size: {}. ",
            self.tensor_name,
            self.needed,
            self.largest_free,
            self.accessed_bytes,
            self.capacity
        )?;
        write!(
            f,
            "{} tensors are live there ({} bytes per partition)",
            self.live_count, self.live_bytes
        )?;
        for (i, (name, r)) in self.live_at.iter().enumerate() {
            write!(f, "{}%{name} {r}", if i == 0 { ": " } else { ", " })?;
        }
        if self.live_count as usize > self.live_at.len() {
            write!(f, ", …")?;
        }
        write!(f, ". Nothing can be spilled: {}. ", self.reason)?;
        if self.accessed_bytes > self.capacity {
            write!(
                f,
                "The tensors this instruction accesses take more than the space holds as whole tensors: split them into smaller tiles."
            )
        } else {
            write!(
                f,
                "Use smaller tiles for %{}, split the instruction, or give the allocator more {sp} (target override {}).",
                self.tensor_name,
                if self.space == Space::Psum { "psum-banks" } else { "sb-bytes" }
            )
        }
    }
}

/// Why the scan stopped. (`AllocationFailed` carries its full story inline:
/// boxing it would allocate on the failure path of a no_std pass.)
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub enum LsaError {
    /// `--vnc-count` above 1: the LSA is single-core.
    MultiCore {
        /// The count given.
        vnc_count: u32,
    },
    /// [`run`](super::run) on a module with loops.
    LoopsNeedLoopAwareScan {
        /// Loops in the module.
        loops: usize,
    },
    /// A pinned location without an address.
    PinnedUnplaced {
        /// It.
        tensor: MemLoc,
    },
    /// Two fixed locations overlap while both are live.
    FixedOverlap {
        /// The one being placed.
        tensor: MemLoc,
        /// A fixed location it overlaps ([`MemLoc::INVALID`] if none was
        /// found on the error path).
        other: MemLoc,
    },
    /// A tensor that no free space could ever hold, or another manager error.
    Manager {
        /// The tensor.
        tensor: MemLoc,
        /// The manager's reason.
        error: ManagerError,
    },
    /// Out of room even after spilling.
    AllocationFailed(AllocationFailure),
    /// More spills than the reserved headroom.
    SpillHeadroom {
        /// The headroom.
        max_spills: u32,
    },
    /// The module refused an insertion.
    Ir(IrError),
}

impl fmt::Display for LsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LsaError::MultiCore { vnc_count } => write!(
                f,
                "the linear-scan allocator is single-core: --vnc-count {vnc_count} needs the coloring allocator (--allocator coloring, optlevel 1/2/3/6/7)"
            ),
            LsaError::LoopsNeedLoopAwareScan { loops } => write!(
                f,
                "the straight-line linear scan cannot allocate a module with {loops} loop(s): use the loop-aware scan (run_with_loops)"
            ),
            LsaError::PinnedUnplaced { tensor } => {
                write!(f, "pinned location {tensor} has no address")
            }
            LsaError::FixedOverlap { tensor, other } => write!(
                f,
                "fixed location {tensor} overlaps fixed location {other} while both are live"
            ),
            LsaError::Manager { tensor, error } => write!(f, "cannot place {tensor}: {error}"),
            LsaError::AllocationFailed(a) => a.fmt(f),
            LsaError::SpillHeadroom { max_spills } => write!(
                f,
                "the linear scan needs more than its limit of {max_spills} spills (by default one per {SPILL_FRACTION} on-chip locations plus {SPILL_SLACK}, at least one per on-chip access up to {SPILL_SMALL_CAP}; raise LsaOptions::max_spills, in a pipeline Options::lsa_max_spills)"
            ),
            LsaError::Ir(e) => write!(f, "inserting spill code: {e}"),
        }
    }
}

crate::ir::display_named!(LsaErrorDisplay for LsaError);

/// Names the tensors as `m` does (`%name@SB<p,b>`).
impl DisplayNamed for LsaError {
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |v: MemLoc| m.describe_mem(v);
        match self {
            LsaError::PinnedUnplaced { tensor } => {
                write!(f, "pinned location {} has no address", name(*tensor))
            }
            LsaError::FixedOverlap { tensor, other } if other.is_valid() => write!(
                f,
                "fixed location {} overlaps fixed location {} while both are live",
                name(*tensor),
                name(*other)
            ),
            LsaError::FixedOverlap { tensor, .. } => write!(
                f,
                "fixed location {} overlaps another fixed location while both are live",
                name(*tensor)
            ),
            LsaError::Manager { tensor, error } if tensor.is_valid() => {
                write!(f, "cannot place {}: {error}", name(*tensor))
            }
            LsaError::AllocationFailed(a) => a.write(f, Some(m)),
            e => fmt::Display::fmt(e, f),
        }
    }
}

impl From<IrError> for LsaError {
    fn from(e: IrError) -> Self {
        LsaError::Ir(e)
    }
}

/// The report of `v` failing at position `p` (instruction `inst`) with no
/// victim left.
pub(super) fn failure(
    m: &Module,
    ws: &LsaWorkspace,
    space: Space,
    v: MemLoc,
    p: u32,
    inst: Inst,
) -> AllocationFailure {
    let mut name = heapless::String::new();
    for ch in m.mem_name(v).chars() {
        if name.push(ch).is_err() {
            break;
        }
    }
    // Each holder in `space` once, however many of the instruction's
    // patterns reach it: a pattern counts only when no earlier one has the
    // same holder. Quadratic in the patterns of one instruction (at most a
    // `u8` of them), on the failure path only, and exact at any count.
    let holder_of = |a: Ap| ws.holder[m.aps().loc[a].index()];
    let mut accessed = 0u64;
    for (k, a) in m.all_aps(inst).enumerate() {
        let l = holder_of(a);
        if l.is_valid()
            && m.mems().space[l] == space
            && !m.all_aps(inst).take(k).any(|b| holder_of(b) == l)
        {
            accessed += m.mems().bytes[l] as u64;
        }
    }
    let mut live_at = heapless::Vec::new();
    let mut live_bytes = 0u64;
    for &c in ws.lrm.active() {
        live_bytes += m.mems().bytes[c] as u64;
        let mut cn: heapless::String<48> = heapless::String::new();
        for ch in m.mem_name(c).chars() {
            if cn.push(ch).is_err() {
                break;
            }
        }
        let _ = live_at.push((
            cn,
            Rect {
                partitions: m.mems().partitions[c],
                bytes: m.mems().bytes[c] as u64,
            },
        ));
    }
    let reason = if ws.lrm.active().is_empty() {
        "no other tensor is live"
    } else {
        "every live tensor is pinned, used by this instruction, not used again, or accessed earlier in the enclosing loop"
    };
    AllocationFailure {
        space,
        tensor: v,
        tensor_name: name,
        instruction: inst,
        position: p,
        needed: Rect {
            partitions: m.mems().partitions[v],
            bytes: m.mems().bytes[v] as u64,
        },
        largest_free: ws.manager.largest_free(m.mems().partitions[v]),
        accessed_bytes: accessed,
        capacity: match space {
            Space::Psum => m.target.psum_usable_bytes() as u64,
            _ => m.target.sb_usable_bytes as u64,
        },
        live_count: ws.lrm.active().len() as u32,
        live_bytes,
        live_at,
        reason,
    }
}
