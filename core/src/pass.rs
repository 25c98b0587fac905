//! Each pass of the pipelines on its own, for an embedder that composes a
//! pipeline of its own or measures one pass (the benchmarks do). A pass
//! runs on a module whose analyses it computes itself, with a workspace it
//! reserves once; [`run()`](crate::run()) is these passes in the order the
//! selection map gives.

/// The graph-coloring tensor allocator of one memory space
/// (`TensorColoringAllocator` in the reference).
pub mod coloring {
    pub use crate::dma::affinity::AffinityPair;
    pub use crate::mem::tensor_coloring::{
        run, spill_headroom, ColoringOptions, ColoringWorkspace, PRESSURE_SPILL_HEADROOM,
        SPILL_HEADROOM,
    };
}

/// The linear-scan tensor allocator over the whole module.
pub mod linear_scan {
    pub use crate::mem::lsa::{
        default_spill_limit, run, run_with_loops, LsaOptions, LsaWorkspace, RestartSplits,
        Restarts, NO_RESTART_POINT, RESTART_HEADROOM_SPENT, SPILL_FRACTION, SPILL_SLACK,
    };
}

/// The 2-D best-fit placement manager the linear scan places with
/// (`BestFitMemoryManager` in the reference).
pub mod best_fit {
    pub use crate::mem::best_fit::{
        BestFitMemoryManager, Corner, FlatHint, Geometry, ManagerError, Placement, Policy, Rect,
        Request, FLAT_FRAGMENTATION_SAMPLING, MAX_ROWS,
    };
    pub use crate::mem::quantile::FragmentationSummary;
}

/// The post-allocation DMA peepholes of one space
/// (`DMA_OPTIMIZATION_PSUM` / `DMA_OPTIMIZATION_SB`).
pub mod dma {
    pub use crate::dma::{
        DmaError, DmaOptimization, DmaStats, DmaWorkspace, Vetoes, DMA_OPTIMIZATION_PSUM,
        DMA_OPTIMIZATION_SB,
    };
}

/// The spill rewrite the allocators share: a planned spill (a store and
/// its reloads, or a rematerialized load) applied to the module.
pub mod spill {
    pub use crate::mem::spill::{
        finalize, inst_cycles, remat_from, Remat, RematSource, SpillRecord, SpillView,
    };
    pub use crate::mem::split_round::{
        split_name, RoundOutcome, RoundParams, RoundPoints, SplitRound,
    };
}
