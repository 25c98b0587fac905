//! Independent checkers: they share no placement code with the allocators,
//! so a bug in an allocator cannot hide itself.

pub(crate) mod buffers;
pub(crate) mod dataflow;
mod patterns;
pub(crate) mod placement;
// The placement verifier reaches the shared treap as `super::treap`.
use crate::collections::treap;

pub use dataflow::{
    DataflowCapacity, DataflowChecker, DataflowCoverage, DataflowError, DataflowReport, Mismatch,
    MismatchDisplay, Operand, Origin, OriginalHalf, ReadBatch, RewriteHalf, SplitRunner, Value,
    BATCH_RECORDS, BATCH_RUNS, MAX_EXACT_EXECUTIONS,
};
pub use placement::{
    first_illegal_placement, Axis, Finding, FindingDisplay, Report, Scope, Verifier,
    DEFAULT_MAX_FINDINGS,
};
