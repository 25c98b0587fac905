//! Memory placement. The linear-scan allocator (LSA) scans the module with
//! its live-range manager and places through the best-fit manager, spilling
//! at interval; the graph-coloring allocator (GCA), the greedy baselines,
//! the linear-scan portfolio of the 1-D problem and the exact
//! branch-and-bound search work on the shared buffer-placement problem.

pub mod access_split;
pub mod affinity;
pub mod best_fit;
pub mod budgeted;
pub mod exact;
pub mod greedy;
pub mod interval_coloring;
pub mod large_first;
pub mod live_gaps;
pub mod live_range;
pub mod lsa;
pub mod occupancy;
pub mod overlap;
pub mod portfolio;
pub mod problem;
pub mod quantile;
pub mod repack;
pub mod rotation;
pub mod sb_rotation;
pub mod size_bins;
pub mod spill;
pub mod spill_strategy;
pub mod split_round;
pub mod tensor_coloring;
