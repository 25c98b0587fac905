//! Independent checkers: they share no placement code with the allocators,
//! so a bug in an allocator cannot hide itself.

pub mod buffers;
pub mod dataflow;
mod patterns;
pub mod placement;
// The placement verifier reaches the shared treap as `super::treap`.
use crate::collections::treap;
