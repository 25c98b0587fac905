//! cargo-fuzz target: see `tusk_shim::fuzz::check_dimacs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tusk_shim::fuzz::check_dimacs(data));
