//! Workload generators shared by benchmarks, tests and fuzzing (feature
//! `gen`; always compiled for the core's own unit tests). Deterministic: the
//! same parameters and seed give the same output on every host.

pub mod cfg;
pub mod dma;
pub mod dsa;
pub mod module;
pub mod rng;
pub mod scalar;
