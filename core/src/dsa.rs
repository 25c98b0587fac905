//! Dynamic storage allocation in one dimension: place buffers of known
//! sizes and lifetimes in the least memory, so that no two buffers live at
//! once share a byte. The module allocators reduce each memory space to this
//! problem; an embedder can also pose it directly (the `tusk dsa` command
//! reads it from CSV).
//!
//! A [`Problem`] is the buffers; every method answers with one
//! [`Placement`] a buffer, which the independent [`Validator`] checks:
//! - [`GreedyWorkspace`]: greedy rules (by size, by lifetime, first fit);
//! - [`GcaWorkspace`]: the interval colorer (best of several orders);
//! - [`place_buffers`]: the linear-scan portfolio;
//! - [`ExactWorkspace`]: the exact search, to a [`Budget`];
//! - [`budgeted`]: the colorer and the search within a storage budget.

pub use crate::mem::budgeted;
pub use crate::mem::exact::{
    Budget, ExactOptions, ExactWorkspace, Limit, Objective, Outcome, Raised, SearchReservation,
    SearchSizes, SearchStorage, Status, Strategy, MAX_SEARCH_BUFFERS, PREORDERS,
};
pub use crate::mem::greedy::{GreedyRule, GreedyWorkspace};
pub use crate::mem::interval_coloring::{
    GcaOptions, GcaOutcome, GcaWorkspace, GraphReservation, OrderRule,
};
pub use crate::mem::large_first::{LargeFirstOptions, LargeFirstOutcome, LargeFirstWorkspace};
pub use crate::mem::portfolio::{
    place_buffers, BufferError, BufferOutcome, BufferWorkspace, OpenEnd, ScanVariant,
    PORTFOLIO_LEN, PORTFOLIO_ORDER, WORK_BUDGET,
};
pub use crate::mem::problem::{
    peak, Buffer, BufferNames, ByIndex, Geometry, LowerBound, NamedDisplay, Placement, Problem,
    ProblemError, Timeline, WithBufferNames, MAX_BYTES,
};
pub use crate::mem::repack::{
    RepackOptions, RepackOutcome, RepackWorkspace, PART_STACK_BYTES as REPACK_PART_STACK_BYTES,
};
pub use crate::verify::buffers::{BufferCheck, Finding, Validator};
