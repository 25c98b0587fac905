//! The scalar register colorer (REG_Allocator): Chaitin–Briggs over the
//! sequencer's scalar registers, with lane pairs and a spill-to-memory
//! fixpoint. `graph` holds the interference graph, `color` the
//! simplify/select/repair core (also run on DIMACS graphs by `tusk color`),
//! `alloc` the allocator over a module, `cfg` the colorer on a client's
//! control-flow graph (liveness by dataflow, coalescing, splitting).

pub mod alloc;
pub mod cfg;
pub mod color;
pub mod graph;

pub use self::alloc::{allocate_registers, RegAllocConfig, RegAllocError, RegAllocator, RegReport};
pub use color::{
    check_coloring, is_trivially_colorable, ColorChoice, ColorConfig, ColorError, ColorStats,
    Colorer, SpillChoice, NO_COLOR,
};
pub use graph::{GraphError, InterferenceGraph};

use ::alloc::vec::Vec;

/// Grows `v`'s capacity to `n` items in all (never shrinks it): the
/// register allocators size every table once, before a run, so that the run
/// does not allocate.
pub(crate) fn reserve_total<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        v.reserve_exact(n - v.len());
    }
}
