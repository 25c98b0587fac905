//! The dataflow checker: proves that a rewrite (placement, spills, reloads,
//! copies, merged or removed DMAs, re-pointed consumers, register spills)
//! preserved every value the original program read. It shares no code with
//! the allocators.
//!
//! # Model
//!
//! Both programs are executed symbolically over bytes. A byte holds a
//! [`Value`]: byte `offset` of an [`Origin`] — a module input (`INPUT`
//! location; offset = partition × bytes + byte), an output operand of an
//! instruction (offset = byte index in that operand's traversal order), or
//! uninitialized memory. Pure data movements (`load`, `save`, `dma_copy`,
//! `tensor_copy` of one element size, `spill_store`, `reload`, `mov`) are
//! transparent; a `memset` writes its constant (an [`Origin::Const`]: the
//! same bytes whichever memset of that constant and element type wrote
//! them, so a tile set again instead of reloaded holds its value); every
//! other write makes fresh values named by the writing instruction
//! (`side`). So a value is the same in both programs exactly when it is
//! one constant, or was made by the same original instruction, and only
//! moved since.
//! Traversal order of an access pattern: its partitions in order, then its
//! dims outermost first.
//!
//! Cells are physical for placed locations and colored registers, private
//! otherwise (`shape`), so two locations an allocator put on the same cells
//! clobber each other exactly as on hardware. The state (`state`) holds
//! run-length value rectangles: a write of a whole tile, or of a column
//! slice of it on every partition, is one rectangle whatever its partition
//! count.
//!
//! # The check
//!
//! The two programs are walked in lockstep (`checker`, `walk`): the
//! rewritten program leads, and when it reaches an instruction of the
//! original (the same [`crate::ir::Inst`] id, linked in both; rewrites
//! never reuse ids) the original program is walked up to the same
//! execution, and the reads of the two executions (input access patterns,
//! then used registers) are compared as value runs. Original instructions
//! the rewrite removed are executed in the original only, and exempt: their
//! values are only checked where someone reads them. Instructions the
//! rewrite added are executed but not compared. The final contents of every
//! `OUTPUT` location are compared at the end. An original read that saw
//! uninitialized memory matches anything. Nothing is recorded for the whole
//! program: the memory is the two states plus one instruction's reads (and,
//! when the walk runs as two halves on two threads — `split` — the
//! original's reads in flight, a few batches).
//!
//! Loops: each loop body is walked twice when its trip count is not 1 (the
//! second walk runs inner loops once), so a value clobbered on its way around
//! a back edge is caught. Differences that need more than two iterations of
//! a chain of copies to appear are not modelled.
//!
//! # Cost
//!
//! Per instruction execution: per access pattern, O(log S) per slab it
//! touches in each program's state (S the slabs of that region) to write
//! or find them, plus O(partitions) cheap steps to emit and compare the
//! runs a read gives (a whole tile gives one run per partition, merged on
//! the fly into one). Storage: one slab and one band per value rectangle
//! held, in two arenas per program reserved from the modules' counts
//! ([`DataflowCapacity::estimate`]) that grow by doubling when a module
//! needs more; see `state` for the invariants. A location the walk is done
//! with (unplaced, not an output, past its last block and the loops around
//! it) is dropped from its state (`release`), so the arenas hold what later
//! executions may still read rather than everything the program wrote.

mod checker;
mod outputs;
mod pieces;
mod release;
mod report;
mod shape;
mod side;
mod split;
mod state;
mod walk;

pub use checker::{DataflowCapacity, DataflowChecker, DataflowCoverage, DataflowReport};
pub use report::{DataflowError, Mismatch, MismatchDisplay, Operand, Origin, Value};
pub use split::{OriginalHalf, ReadBatch, RewriteHalf, SplitRunner, BATCH_RECORDS, BATCH_RUNS};
pub use walk::MAX_EXACT_EXECUTIONS;

#[cfg(test)]
mod tests;
