//! Independent checkers of allocator output: the placement verifier and the
//! dataflow checker. They share no placement code with any allocator.

pub mod dataflow;
pub mod placement;
