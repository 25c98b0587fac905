//! Scalar register allocation: two allocators over one colorer.
//!
//! - `alloc`, the **module allocator** (REG_Allocator, the pipeline's
//!   register pass): colors a module's scalar registers in its linear order,
//!   where every live range is one interval, and spills to DRAM slots until
//!   everything is colored.
//! - `cfg`, the **CFG allocator**: allocates a client's control-flow graph
//!   (liveness by dataflow, coalescing of copies and block-parameter edges,
//!   spilling that splits live ranges at block boundaries), with its own
//!   symbolic checker.
//!
//! Both build a `graph` (the lane-weighted interference graph) and run
//! `color` on it (Chaitin–Briggs simplify/select/repair with lane pairs,
//! also run on DIMACS graphs by `tusk color`).

/// [`reserve_total`] of several tables to one size:
/// `reserve_totals!(n; self.a, self.b)` grows each listed table to `n` items
/// in all (declared before the submodules, which use it).
macro_rules! reserve_totals {
    ($n:expr; $($table:expr),+ $(,)?) => {{
        let n: usize = $n;
        $( $crate::reg::reserve_total(&mut $table, n); )+
    }};
}

pub mod alloc;
pub mod cfg;
pub mod chaitin_briggs;
pub mod graph;

pub use self::alloc::{allocate_registers, RegAllocConfig, RegAllocError, RegAllocator, RegReport};
pub use chaitin_briggs::{
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
