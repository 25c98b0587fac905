//! Workload generators shared by benchmarks, tests and fuzzing (feature
//! `gen`). Deterministic: the same parameters and seed give the same module
//! on every host.

pub mod dma;
pub mod module;
pub mod rng;
