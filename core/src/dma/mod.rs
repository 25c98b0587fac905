//! DMA optimization: the post-allocation DMA peepholes and the DMA report
//! (the reference's `dma_optimization_{psum,sb}`, one class, two names).
//!
//! The pass runs on a *placed* module: every location it touches has a real
//! address. It works on the DMAs whose on-chip side lives in its memory space
//! ([`Space::Psum`](crate::ir::Space) or [`Space::Sb`](crate::ir::Space)) and
//! applies, in the seed's order:
//!
//! 1. [`load_merge`]: drop a load whose data is already resident
//!    (`merge_load`), or replace it by an on-chip copy when the cost model
//!    says so (`transform_load`);
//! 2. [`dead_store`]: drop a save whose DRAM bytes are overwritten before any
//!    read (`removeRedundantWrites`);
//! 3. [`coalesce`]: merge physically abutting DMAs (`internal_dma_coalescing`);
//! 4. [`partial`]: shrink a DMA to the sub-range its readers use
//!    (`partial_DMA_access`);
//! 5. [`psum_spill`]: PSUM instance only, remove a spill/reload pair whose
//!    bank is not reused in between (`PSUM_spill_optimization`).
//!
//! [`report`] takes the Pre/Post snapshots (`DMA_analysis`); `rewrite` holds
//! the pieces the peepholes build their rewrites from.
//!
//! Invariants every rewrite keeps: the bytes every instruction reads are the
//! bytes it read before (data flow), and every location stays inside cells
//! that no interfering location uses (placement). Conflicts are found with the
//! live-interval index of [`conflict`] in `O(log n + k)` per query.
//!
//! Storage: a [`DmaWorkspace`] is sized from the module (and reserves the
//! module's headroom for the merged DMAs and locations) before the pass runs;
//! the peepholes then do not allocate. The headroom is sized for the typical
//! number of rewrites, not the worst case: a rewrite that finds it used up
//! is skipped before it changes anything and counted
//! ([`DmaStats::headroom_skipped`]).

pub mod affinity;
pub mod coalesce;
pub mod conflict;
pub mod dead_store;
pub mod load_merge;
pub mod merge_tracker;
pub mod partial;
pub mod pass;
pub mod psum_spill;
pub mod report;
mod rewrite;
#[cfg(test)]
mod sim;

pub use pass::{
    DmaError, DmaOptimization, DmaStats, DmaWorkspace, Vetoes, DMA_OPTIMIZATION_PSUM,
    DMA_OPTIMIZATION_SB,
};
pub use report::{descriptor_lower_bound, dma_analysis, DmaReport};
#[cfg(test)]
mod tests;
