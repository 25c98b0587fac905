//! Where the public reference data is (`../shared/data`: the MiniMalloc
//! instances, the DIMACS graphs, the register-allocation functions), for
//! the tests and benchmark binaries that read it.

use std::path::{Path, PathBuf};

/// The public data folder: `$TUSK_DATA` when it is set and not empty, else
/// `shared/data` beside the checkout (the workspace's parent folder, where
/// CI has it). An empty `TUSK_DATA` counts as unset: it would otherwise
/// name the current folder, and every test that needs the data would fail
/// on an empty variable rather than on missing data.
pub fn dir() -> PathBuf {
    match std::env::var_os("TUSK_DATA") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
    }
}
