//! The register colorer on any control-flow graph: a client's function
//! seen through the [`CfgFunction`] trait (blocks, instructions, successors
//! and predecessors, block parameters and edge arguments, operands, tied
//! pairs, moves, loop depths), allocated by Chaitin–Briggs with liveness by
//! dataflow over the CFG, coalescing of copies and block-parameter edges,
//! and spilling that splits live ranges at block boundaries; the output is
//! a location per operand plus the edits (moves, spills, reloads), checked
//! by an independent symbolic checker.
//!
//! Data flows `function` → `validate` → `program` (the rewritable copy) →
//! `liveness` → `pressure` (spills before coloring above K) → `interference` → `coalesce` → colorer (`reg::chaitin_briggs`) →
//! `split` (spill rounds) → `parallel_copy` + `output` → `checker`.
//!
//! This is the CFG allocator, one of the two register allocators. The other,
//! the module allocator (`reg/alloc/`), is the pipeline's REG_Allocator: it
//! works on a module in its linear order, where every range is one interval,
//! and neither splits nor sees a CFG. The two share the colorer
//! (`reg/chaitin_briggs.rs`) and its graph (`reg/graph.rs`), nothing else.

pub(crate) mod allocator;
pub(crate) mod checker;
mod coalesce;
pub(crate) mod function;
mod interference;
mod liveness;
pub(crate) mod output;
mod parallel_copy;
mod pressure;
mod program;
mod split;
pub(crate) mod validate;
mod walk;

#[cfg(test)]
mod tests;

pub use allocator::{CfgAllocError, CfgAllocator, CfgConfig, CheckedError};
pub use checker::{CfgChecker, CheckError, CheckErrorKind};
pub use function::{Block, CfgFunction, CfgInst, FunctionBuf, TiedPair, VReg};
pub use output::{CfgAllocation, CfgStats, Edit, EditKind, EditPoint, Location};
pub use program::Full;
pub use validate::{validate, CfgError, DefSite, Validator};
