//! Helpers shared by the driver-level integration tests: they run the real
//! `tusk` binary (`CARGO_BIN_EXE_tusk` exists only for this package's tests)
//! in a scratch directory and capture what it printed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tusk");

/// The workspace root (the package sits one level below it).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the package sits in the workspace")
        .to_path_buf()
}

/// A fresh, empty scratch directory, unique per test binary and `name`.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tusk-{prefix}-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `problem`'s buffers as a buffer CSV (`id,lower,upper,size`, ids
/// `b0`, `b1`, …) named `name` in `dir`; returns its path.
#[allow(dead_code)] // the `tusk dsa` tests' helper; other test binaries include this file too
pub fn write_csv(dir: &Path, name: &str, problem: &tusk_core::dsa::Problem) -> PathBuf {
    let mut text = String::from("id,lower,upper,size\n");
    for (i, b) in problem.buffers().iter().enumerate() {
        text.push_str(&format!("b{i},{},{},{}\n", b.lower, b.upper, b.size));
    }
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

/// What one run of the binary did.
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `tusk args…` in `dir`.
pub fn run_in(dir: &Path, args: &[&str]) -> Outcome {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run tusk");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
