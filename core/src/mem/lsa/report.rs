//! The scan's figures per space (docs/REPORT.md): placed tensors, peak,
//! lower bound, capacity, spills and their DMA traffic, fragmentation.

use crate::analysis;
use crate::ir::Space;
use crate::mem::quantile::FragmentationSummary;
use crate::mem::spill::SpillLog;

/// Report of one space.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceReport {
    /// Tensors placed by the scan (not counting fixed ones).
    pub placed: u64,
    /// Highest byte used in any partition (PSUM: end of the highest bank).
    pub peak: u64,
    /// Lower bound of the original program (analysis::Bounds).
    pub lower_bound: u64,
    /// Usable bytes per partition of the space.
    pub capacity: u64,
    /// Spills in this space.
    pub spills: u32,
    /// Of them, rematerialized ([`crate::pass::spill::Remat`]: no store;
    /// reloaded from the DRAM the value was loaded from, set again by its
    /// memset, or copied again from the on-chip tile it was copied from).
    pub remats: u32,
    /// Bytes moved by the spill stores and reloads as the program runs
    /// (each DMA as often as the loops around it run it).
    pub spill_bytes: u64,
    /// Estimated cycles of those DMAs (`Target::dma_cycles` per DMA: fixed
    /// cost plus bytes over one engine's bandwidth, at the engine clock;
    /// each as often as it runs).
    pub spill_cycles: u64,
    /// Free-block size quantiles.
    pub fragmentation: FragmentationSummary,
}

impl SpaceReport {
    /// Peak as a percentage of the usable capacity.
    pub fn utilization_pct(&self) -> f64 {
        if self.capacity == 0 {
            0.0
        } else {
            self.peak as f64 * 100.0 / self.capacity as f64
        }
    }

    /// Peak over lower bound ([`analysis::peak_over_bound`]).
    pub fn peak_over_bound(&self) -> f64 {
        analysis::peak_over_bound(self.peak, self.lower_bound)
    }
}

/// What the scan did (its figures in docs/REPORT.md). Timing is left to the
/// caller (no clock in no_std).
#[derive(Clone, Debug, Default)]
pub struct LsaReport {
    /// PSUM figures.
    pub psum: SpaceReport,
    /// SB figures.
    pub sb: SpaceReport,
    /// Placement failures and the candidates ranked at each.
    pub log: SpillLog,
    /// The restarts after access splits (their splits are among `sb`'s
    /// spills, their traffic in its bytes and cycles).
    pub restarts: super::Restarts,
}

impl LsaReport {
    /// The figures of a space (DRAM: empty).
    pub fn space(&self, s: Space) -> SpaceReport {
        match s {
            Space::Psum => self.psum,
            Space::Sb => self.sb,
            Space::Dram => SpaceReport::default(),
        }
    }
}
