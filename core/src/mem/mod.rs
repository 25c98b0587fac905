//! Memory allocators: the linear-scan allocator (LSA) and its best-fit
//! placement backend, the live-range manager it scans with, spill-at-interval
//! and the fragmentation statistics the backend reports.

pub mod best_fit;
pub mod live_range;
pub mod lsa;
pub mod quantile;
pub mod spill;
