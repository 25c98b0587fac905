//! Integration tests live in tests/tests/; this crate holds what several of
//! them share.

pub mod harness;
pub mod unroll;
