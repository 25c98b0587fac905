//! Memory placement: the buffer-placement problem every memory allocator
//! shares, the greedy baselines, and the exact branch-and-bound search.

pub mod exact;
pub mod gca;
pub mod greedy;
pub mod problem;
