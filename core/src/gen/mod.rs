//! Workload generators shared by tests, benchmarks and fuzzing.

pub mod scalar;
