//! Storage bounded by the input and the budget: the hostile inputs of
//! issue 16, each run through the real binary under a 4 GiB address-space
//! limit (`ulimit -v`), so a reservation that grows as a product of the
//! input aborts the process (exit 134) instead of passing quietly.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

#[allow(dead_code)] // each test binary uses a part of the helpers
mod common;

use common::{scratch, Outcome, BIN};

/// Address space the runs may use (KiB, for `ulimit -v`).
const LIMIT_KIB: u64 = 4 << 20;

/// Runs `tusk args…` in `dir` under [`LIMIT_KIB`].
fn run_limited(dir: &Path, args: &[&str]) -> Outcome {
    let mut cmd = format!("ulimit -v {LIMIT_KIB} && exec '{BIN}'");
    for a in args {
        write!(cmd, " '{a}'").unwrap();
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .current_dir(dir)
        .output()
        .expect("run tusk under sh");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn assert_ok(o: &Outcome, what: &str) {
    assert_eq!(
        o.code, 0,
        "{what}: exit {}\nstdout:\n{}\nstderr:\n{}",
        o.code, o.stdout, o.stderr
    );
}

/// `n` one-partition SB (or PSUM) tensors, all live at once: loaded (or
/// set) one after the other, then all saved.
fn all_live(n: usize, space: &str, placed: bool) -> String {
    let mut s = String::from("target trn2\n");
    let at = |x: &str| {
        if placed {
            format!(" @ {x}")
        } else {
            String::new()
        }
    };
    writeln!(s, "dram %x [128 x 65536] input{}", at("DRAM<0>")).unwrap();
    for i in 0..n {
        writeln!(
            s,
            "{space} %t{i} [1 x 64]{}",
            at(&format!("SB<0,{}>", i * 64))
        )
        .unwrap();
    }
    writeln!(s, "dram %y [1 x 64] output{}", at("DRAM<16777216>")).unwrap();
    s.push_str("func @main {\nentry:\n");
    for i in 0..n {
        if space == "psum" {
            writeln!(s, "  %t{i} = memset 0").unwrap();
        } else {
            writeln!(s, "  %t{i} = load %x[p0:1, 0:64]").unwrap();
        }
    }
    for i in 0..n {
        writeln!(s, "  %y = save %t{i}").unwrap();
    }
    s.push_str("}\n");
    s
}

#[test]
fn many_live_tensors_run_at_every_optlevel_within_the_budget() {
    let dir = scratch("storage", "live500");
    fs::write(dir.join("live.tusk"), all_live(500, "sb", false)).unwrap();
    for opt in ["0", "1", "2", "3", "6", "7", "8"] {
        let o = run_limited(&dir, &["run", "live.tusk", "--optlevel", opt]);
        assert_ok(&o, &format!("optlevel {opt}"));
        assert!(
            o.stdout.contains("verified:"),
            "optlevel {opt}: {}",
            o.stdout
        );
    }
    // The exact search's stacks would need gigabytes: the summary says it
    // ran with less.
    let o = run_limited(&dir, &["run", "live.tusk", "--optlevel", "2"]);
    assert!(
        o.stdout
            .contains("storage: the exact placement search of SB cut short"),
        "{}",
        o.stdout
    );
}

#[test]
fn a_thousand_live_tensors_in_sb_and_psum_do_not_abort() {
    let dir = scratch("storage", "live1000");
    fs::write(dir.join("sb.tusk"), all_live(1000, "sb", false)).unwrap();
    let o = run_limited(&dir, &["run", "sb.tusk", "--optlevel", "2"]);
    assert_ok(&o, "1000 SB tensors");
    // PSUM: 1000 live tensors of one partition cannot all fit (32 bank
    // slots); whatever the outcome, it is an answer, not an abort.
    fs::write(dir.join("psum.tusk"), all_live(1000, "psum", false)).unwrap();
    let o = run_limited(&dir, &["run", "psum.tusk", "--optlevel", "8"]);
    assert!(matches!(o.code, 0 | 1), "exit {}: {}", o.code, o.stderr);
}

#[test]
fn a_placed_module_under_smt_allocation_reserves_no_search() {
    let dir = scratch("storage", "placed");
    fs::write(dir.join("placed.tusk"), all_live(1000, "sb", true)).unwrap();
    let check = run_limited(&dir, &["check", "placed.tusk"]);
    assert_ok(&check, "check");
    let o = run_limited(
        &dir,
        &[
            "run",
            "placed.tusk",
            "--smt-allocation",
            "--report",
            "r.json",
        ],
    );
    assert_ok(&o, "--smt-allocation");
    let r: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    let parts = r["storage"]["parts"].as_array().unwrap();
    assert!(
        !parts
            .iter()
            .any(|p| p["what"].as_str().unwrap().contains("exact search")),
        "nothing to place, nothing to search: {parts:?}"
    );
    // The reservation stays a small multiple of the module.
    let reserved = r["storage"]["reserved"].as_u64().unwrap();
    assert!(reserved < 64 << 20, "reserved {reserved} B");
}

#[test]
fn broadcast_and_strided_patterns_are_checked_without_a_product_reservation() {
    let dir = scratch("storage", "patterns");
    fs::write(
        dir.join("bcast.tusk"),
        "target trn2\nsb %a [128 x 4096]\nsb %b [128 x 4096]\nfunc @main {\nentry:\n  %a = memset 0\n  %b = tensor_reduce add %a[p0:128, +0, e1, [0,2048] [0,2048]]\n}\n",
    )
    .unwrap();
    let o = run_limited(&dir, &["run", "bcast.tusk"]);
    assert_ok(&o, "broadcast");
    assert!(o.stdout.contains("verified:"), "{}", o.stdout);
    fs::write(
        dir.join("strided.tusk"),
        "target trn2\ndram %a [1 x 2000000] input\ndram %b [1 x 1000000] output\nfunc @main {\nentry:\n  %b = dma_copy %a[p0:1, +0, e1, [2,1000000]]\n}\n",
    )
    .unwrap();
    let o = run_limited(&dir, &["run", "strided.tusk"]);
    assert_ok(&o, "strided");
}

#[test]
fn a_dense_csv_is_placed_in_linear_storage() {
    let dir = scratch("storage", "dense");
    let mut csv = String::from("id,lower,upper,size\n");
    for i in 0..10_000 {
        writeln!(csv, "{i},0,10,16").unwrap();
    }
    fs::write(dir.join("dense.csv"), &csv).unwrap();
    // The default algorithm (exact): its stacks are cut to the budget.
    let o = run_limited(&dir, &["dsa", "dense.csv", "--capacity", "1000000"]);
    assert_ok(&o, "dsa exact");
    assert!(o.stdout.contains("fits: yes"), "{}", o.stdout);
    // Coloring: the 50 M interfering pairs are never stored (interval
    // index, linear storage), so the colorer itself runs within the budget.
    let o = run_limited(
        &dir,
        &[
            "dsa",
            "dense.csv",
            "--capacity",
            "1000000",
            "--algo",
            "coloring",
        ],
    );
    assert_ok(&o, "dsa coloring");
    assert!(!o.stdout.contains("storage: "), "{}", o.stdout);
    assert!(
        o.stdout.contains("49995000 interference edges"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("validated: legal"), "{}", o.stdout);
}

#[test]
fn a_budget_too_small_for_the_search_still_gives_a_verified_result() {
    // 5 MB: above the 4.3 MB the passes and both checks reserve for these
    // 200 tiles, and far below the 1.3 GB the exact search needs.
    let dir = scratch("storage", "tight");
    fs::write(dir.join("live.tusk"), all_live(200, "sb", false)).unwrap();
    let o = run_limited(
        &dir,
        &["run", "live.tusk", "--optlevel", "2", "--max-memory", "5M"],
    );
    assert_ok(&o, "--max-memory 5M");
    assert!(o.stdout.contains("storage: "), "{}", o.stdout);
    assert!(o.stdout.contains("verified:"), "{}", o.stdout);
    let bad = run_limited(&dir, &["run", "live.tusk", "--max-memory", "4T"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

#[test]
fn optlevel_8_accepts_an_in_place_output_placed_over_its_input() {
    let root = common::workspace();
    // mamba_v3's product scan_res * C is written in place over scan_res.
    let file = root.join("examples/placed/mamba_v3.tusk");
    let dir = scratch("storage", "inplace");
    let o = run_limited(&dir, &["run", file.to_str().unwrap(), "--optlevel", "8"]);
    assert_ok(&o, "optlevel 8 on a placed in-place step");
}

#[test]
fn smt_allocation_keeps_fixed_register_lanes_and_checks_them() {
    let root = common::workspace();
    let dir = scratch("storage", "smtregs");
    let good = root.join("examples/placed/flash_attn_bwd.tusk");
    let o = run_limited(
        &dir,
        &[
            "run",
            good.to_str().unwrap(),
            "--smt-allocation",
            "-o",
            "out.tusk",
        ],
    );
    assert_ok(&o, "smt on a legal placed module");
    // Every register keeps the lane the input gave it.
    let lanes = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("reg "))
            .map(|l| {
                let decl = l.split(';').next().unwrap();
                decl.split_whitespace().collect::<Vec<_>>().join(" ")
            })
            .collect()
    };
    let input = fs::read_to_string(&good).unwrap();
    let output = fs::read_to_string(dir.join("out.tusk")).unwrap();
    assert_eq!(lanes(&input), lanes(&output));
    // A planted register overlap is the in-place checker's finding, not a
    // silent recoloring.
    let bad = root.join("examples/broken/flash_attn_bwd-register-overlap.tusk");
    let o = run_limited(&dir, &["run", bad.to_str().unwrap(), "--smt-allocation"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("in-place write checker") && o.stderr.contains("$neg1"),
        "{}",
        o.stderr
    );
}
