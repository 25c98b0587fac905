//! The scalar register colorer (REG_Allocator): Chaitin–Briggs over the
//! sequencer's scalar registers, with lane pairs and a spill-to-memory
//! fixpoint.

pub mod color;
pub mod graph;

pub use color::{
    check_coloring, is_trivially_colorable, ColorChoice, ColorConfig, ColorError, ColorStats,
    Colorer, SpillChoice, NO_COLOR,
};
pub use graph::{GraphError, InterferenceGraph};
