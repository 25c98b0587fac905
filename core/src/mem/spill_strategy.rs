//! The spill strategy: in which order the SB allocators try their splits
//! where a program needs more SB than there is (`--spill-strategy`), and
//! the copies of the module [`SpillStrategy::Best`] keeps to try both.

use crate::ir::Module;
use crate::storage::HeapBytes;

/// `--spill-strategy {best,ranges,access}`: the order in which the SB
/// allocators try their splits where the input needs more SB than there
/// is. Neither order reaches every placement above the floor alone, so
/// where an allocator keeps two copies of the module, the other order
/// runs from the same module where the preferred one fails. They differ
/// in the traffic: a tensor live across a long stretch but accessed by a
/// few instructions near the peak leaves for good at a copy per access,
/// where live-range splits move it out and back around every point that
/// runs over; a tensor accessed all along the stretch is cheaper split
/// around the peak.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SpillStrategy {
    /// Both orders from the same module; the result whose spills cost
    /// fewer cycles (then bytes) is kept. The linear scan tries a third:
    /// a restart at its first failure for want of a victim with the
    /// coloring allocator's live-range round there. Costs the time of the
    /// other allocations and up to three copies of the module, kept only
    /// where the input's SB lower bound exceeds the capacity.
    #[default]
    Best,
    /// Live-range splits (plain, loop-invariant, per-iteration slice)
    /// first, the split at every access last: the coloring allocator when
    /// no live-range split frees room, the linear scan when it finds no
    /// tensor to spill (it then restarts). The access order from the start
    /// only where this one fails.
    Ranges,
    /// The split at every access first, live-range splits where it frees
    /// nothing; the live-range order from the start only where this one
    /// fails.
    Access,
}

impl SpillStrategy {
    /// Parses the option's value (`best`, `ranges`, `access`).
    pub fn from_name(s: &str) -> Option<SpillStrategy> {
        match s {
            "best" => Some(SpillStrategy::Best),
            "ranges" => Some(SpillStrategy::Ranges),
            "access" => Some(SpillStrategy::Access),
            _ => None,
        }
    }
}

/// The two copies of the module an allocator keeps to try both orders
/// ([`SpillStrategy::Best`]): the module before its pass, and the first
/// order's result. Each has the module's whole reserved capacity
/// ([`Module::copy_from`]), so saving and restoring never allocate.
#[derive(Debug)]
pub struct StrategyCopies {
    /// The module before the pass.
    pub before: Module,
    /// The first order's result.
    pub first: Module,
}

impl StrategyCopies {
    /// Makes `kept` hold two copies of `m`; call it after every
    /// reservation of `m`. Returns their heap bytes.
    pub fn reserve(kept: &mut Option<StrategyCopies>, m: &Module) -> u64 {
        let k = kept.get_or_insert_with(|| StrategyCopies {
            before: Module::new(m.target.clone()),
            first: Module::new(m.target.clone()),
        });
        k.before.copy_from(m);
        k.first.copy_from(m);
        k.heap_bytes()
    }
}

impl HeapBytes for StrategyCopies {
    fn heap_bytes(&self) -> u64 {
        self.before
            .reserved_bytes()
            .saturating_add(self.first.reserved_bytes())
    }
}
