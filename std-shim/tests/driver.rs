//! Driver-level tests: the golden files under `tests/golden/` and the
//! bad-input corpus under `tests/bad/`, both run through the real `tusk`
//! binary.
//!
//! They live in this package (not in the `tests/` package, which owns the
//! data files) because `CARGO_BIN_EXE_tusk` is only set for integration
//! tests of the package that builds the binary; a test elsewhere would have
//! to guess the binary's path or rely on it having been built.
//!
//! Golden file format (cranelift filetests style), one self-contained file:
//!
//! ```text
//! ; run: fmt --json          <- the subcommand and its flags; the input file is appended
//! <input IR>
//! ; exit: 0                  <- everything from here on is the expectation
//! ; stdout:
//! ; <line>
//! ; stderr:
//! ; <line>
//! ```
//!
//! The input is written to `input.tusk` in a scratch directory that is the
//! binary's working directory, so messages read `input.tusk:3:7: ...`.
//! Wall times (`12.34 ms`) in the output are masked as `<t> ms`.
//! `BLESS=1 cargo test -p tusk-shim --test driver` rewrites the expectations;
//! a mismatch prints a line diff.

use std::fs;
use std::path::{Path, PathBuf};

mod common;

use common::{run_in, workspace, Outcome};

fn scratch(name: &str) -> PathBuf {
    common::scratch("driver", name)
}

// ---------------------------------------------------------------------
// Golden files

struct Golden {
    args: Vec<String>,
    input: String,
}

fn parse_golden(text: &str) -> Golden {
    let mut args = Vec::new();
    let mut input = String::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with("; exit:") {
            break;
        }
        if let Some(rest) = line.strip_prefix("; run:") {
            args = rest.split_whitespace().map(String::from).collect();
        }
        input.push_str(line);
    }
    assert!(
        !args.is_empty(),
        "a golden file needs a `; run: <command>` line"
    );
    Golden { args, input }
}

fn expectation(o: &Outcome) -> String {
    let mut s = format!("; exit: {}\n", o.code);
    for (name, body) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        if body.is_empty() {
            continue;
        }
        s.push_str(&format!("; {name}:\n"));
        for l in body.lines() {
            if l.is_empty() {
                s.push_str(";\n");
            } else {
                s.push_str("; ");
                s.push_str(&mask_times(l));
                s.push('\n');
            }
        }
    }
    s
}

/// Replaces every wall time (`12.34 ms`) in `line` by `<t> ms`, so the
/// summary of `tusk run` can be pinned.
fn mask_times(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(k) = rest.find(" ms") {
        let head = &rest[..k];
        let num = head
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let unit_ends = !rest[k + 3..]
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
        if unit_ends && num > 0 && head[head.len() - num..].bytes().any(|b| b.is_ascii_digit()) {
            out.push_str(&head[..head.len() - num]);
            out.push_str("<t>");
        } else {
            out.push_str(head);
        }
        out.push_str(" ms");
        rest = &rest[k + 3..];
    }
    out.push_str(rest);
    out
}

/// A line diff (longest common subsequence), `-` expected, `+` actual.
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}

#[test]
fn golden_files() {
    let dir = workspace().join("tests/golden");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("tests/golden exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tusk"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden files in {}", dir.display());
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    for path in &files {
        let text = fs::read_to_string(path).unwrap();
        let g = parse_golden(&text);
        let work = scratch("golden");
        fs::write(work.join("input.tusk"), &g.input).unwrap();
        let mut args: Vec<&str> = g.args.iter().map(String::as_str).collect();
        args.push("input.tusk");
        let o = run_in(&work, &args);
        if g.args == ["fmt"] && o.code == 0 {
            // fmt output is canonical: formatting it again changes nothing.
            fs::write(work.join("again.tusk"), &o.stdout).unwrap();
            let again = run_in(&work, &["fmt", "again.tusk"]);
            assert_eq!(
                again.stdout,
                o.stdout,
                "{}: fmt is not idempotent",
                path.display()
            );
        }
        let actual = expectation(&o);
        let expected = &text[g.input.len()..];
        if expected != actual {
            if bless {
                fs::write(path, format!("{}{actual}", g.input)).unwrap();
                eprintln!("blessed {}", path.display());
            } else {
                failures.push(format!(
                    "{}: output differs (- expected, + actual; BLESS=1 rewrites):\n{}",
                    path.display(),
                    diff(expected, &actual)
                ));
            }
        }
        let _ = fs::remove_dir_all(&work);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("{} golden files checked", files.len());
}

#[test]
fn golden_masks_wall_times() {
    assert_eq!(
        mask_times("x: 5 passes in 0.03 ms, clean (35.52 ms) 7 mss"),
        "x: 5 passes in <t> ms, clean (<t> ms) 7 mss"
    );
    assert_eq!(mask_times("no times here"), "no times here");
}

#[test]
fn golden_diff_marks_changed_lines() {
    let d = diff("a\nb\nc\n", "a\nx\nc\n");
    assert_eq!(d, "  a\n+ x\n- b\n  c\n");
}

// ---------------------------------------------------------------------
// Bad input

/// Checks that `args` on the file fails with exit 2 and a
/// `FILE:line:col: message` error (no panic, no crash).
fn assert_bad(work: &Path, file: &str, expect: Option<&str>) -> String {
    let o = run_in(work, &["check", file]);
    assert_eq!(
        o.code, 2,
        "{file}: expected exit 2, got {}\nstderr: {}",
        o.code, o.stderr
    );
    assert!(
        !o.stderr.contains("panicked"),
        "{file}: panicked: {}",
        o.stderr
    );
    let prefix = format!("error: {file}:");
    let line = o
        .stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{file}: no `{prefix}line:col:` error in {:?}", o.stderr));
    let rest = &line[prefix.len()..];
    let mut parts = rest.splitn(3, ':');
    let l = parts.next().unwrap_or("");
    let c = parts.next().unwrap_or("");
    assert!(
        l.parse::<u32>().is_ok() && c.parse::<u32>().is_ok(),
        "{file}: no line:column in {line:?}"
    );
    if let Some(e) = expect {
        assert!(
            rest.contains(e),
            "{file}: expected {e:?} in the error, got {line:?}"
        );
    }
    rest.to_string()
}

/// Every file in `tests/bad/` starts with `; expect: <text>`: the error must
/// contain that text (it begins with the line:column).
#[test]
fn bad_input_corpus() {
    let dir = workspace().join("tests/bad");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("tests/bad exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the bad-input corpus is too small");
    let work = scratch("bad");
    for path in &files {
        let bytes = fs::read(path).unwrap();
        let first = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let first = String::from_utf8_lossy(first);
        let expect = first
            .strip_prefix("; expect: ")
            .unwrap_or_else(|| panic!("{}: first line must be `; expect: ...`", path.display()))
            .trim_end()
            .to_string();
        let name = path.file_name().unwrap().to_str().unwrap();
        fs::write(work.join(name), &bytes).unwrap();
        assert_bad(&work, name, Some(&expect));
    }
    println!("{} bad inputs rejected", files.len());
    let _ = fs::remove_dir_all(&work);
}

/// A small deterministic generator (xorshift64*), so the garbage is the
/// same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn ten_megabytes_of_garbage() {
    let work = scratch("garbage");
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let n = 10 << 20;
    // Raw bytes: almost surely invalid UTF-8 early.
    let raw: Vec<u8> = (0..n).map(|_| r.next() as u8).collect();
    fs::write(work.join("raw.tusk"), &raw).unwrap();
    assert_bad(&work, "raw.tusk", None);
    // Printable ASCII made of the format's own characters: gets past UTF-8
    // validation and into the lexer and parser.
    let alphabet = b"%$@[]{}<>:,=+-?; \n\tabcdeilmnoprsxyz0123456789_.";
    let ascii: Vec<u8> = (0..n)
        .map(|_| alphabet[(r.next() % alphabet.len() as u64) as usize])
        .collect();
    fs::write(work.join("ascii.tusk"), &ascii).unwrap();
    assert_bad(&work, "ascii.tusk", None);
    // A valid prefix followed by garbage: the error points past the prefix.
    let mut mixed = b"target trn2\nsb %x [128 x 64]\n".to_vec();
    mixed.extend_from_slice(&ascii[..1 << 20]);
    fs::write(work.join("mixed.tusk"), &mixed).unwrap();
    assert_bad(&work, "mixed.tusk", None);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_hundred_thousand_nested_loops() {
    let work = scratch("nested");
    let mut s = String::from("sb %x [128 x 64]\nfunc @f {\n");
    for _ in 0..100_000 {
        s.push_str("loop {\n");
    }
    fs::write(work.join("deep.tusk"), &s).unwrap();
    let e = assert_bad(&work, "deep.tusk", Some("nested too deeply"));
    // The limit is the module's loop depth: the 65th `loop` (line 67).
    assert!(e.starts_with("67:1:"), "{e}");
    // JSON nesting is refused as cleanly.
    let mut j = String::from(r#"{"target":{"preset":"trn2"},"funcs":[{"name":"f","body":"#);
    for _ in 0..100_000 {
        j.push_str(r#"[{"loop":{"body":"#);
    }
    fs::write(work.join("deep.json"), &j).unwrap();
    let o = run_in(&work, &["check", "deep.json"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.starts_with("error: deep.json:1:"), "{}", o.stderr);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn io_errors_exit_three_and_inputs_stay_untouched() {
    let work = scratch("io");
    let o = run_in(&work, &["check", "missing.tusk"]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr.contains("cannot read missing.tusk"),
        "{}",
        o.stderr
    );
    let src = "target trn2\n\nsb %x [128 x 64]\n\nfunc @f {\nentry:\n  %x = memset 0\n}\n";
    fs::write(work.join("in.tusk"), src).unwrap();
    // Refuses to write over its input.
    let o = run_in(&work, &["fmt", "in.tusk", "-o", "in.tusk"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(fs::read_to_string(work.join("in.tusk")).unwrap(), src);
    // An unwritable destination is an I/O error and leaves nothing behind.
    let o = run_in(&work, &["fmt", "in.tusk", "-o", "no/such/dir/out.tusk"]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    // A bad input writes no output at all.
    fs::write(work.join("bad.tusk"), "func @f {\n").unwrap();
    let o = run_in(&work, &["fmt", "bad.tusk", "-o", "out.tusk"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(!work.join("out.tusk").exists());
    // A good one writes exactly the canonical text, atomically.
    let o = run_in(&work, &["fmt", "in.tusk", "-o", "out.tusk"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(fs::read_to_string(work.join("out.tusk")).unwrap(), src);
    let names: Vec<_> = fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(names.is_empty(), "temporary files left: {names:?}");
    // JSON out and back in gives the same text.
    let o = run_in(&work, &["fmt", "--json", "in.tusk", "-o", "in.json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = run_in(&work, &["fmt", "in.json"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, src));
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn run_validates_every_flag_and_allocates() {
    let work = scratch("run");
    fs::write(
        work.join("m.tusk"),
        "sb %x [128 x 64]\nfunc @f {\nentry:\n  %x = memset 0\n}\n",
    )
    .unwrap();
    let all = [
        "run",
        "m.tusk",
        "--optlevel",
        "2",
        "--allocator",
        "coloring",
        "--loops-in-backend",
        "--vnc-count",
        "2",
        "--gca-dma-optlevel",
        "-1",
        "--target",
        "trn3",
        "--max-regs",
        "62",
        "-o",
        "out.tusk",
        "--report",
        "r.json",
        "--print-pipeline",
        "--no-verify",
    ];
    let o = run_in(&work, &all);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("optlevel 6"), "{}", o.stdout);
    assert!(o.stdout.contains("coloring_allocator_reg"), "{}", o.stdout);
    assert!(work.join("out.tusk").exists() && work.join("r.json").exists());
    let placed = fs::read_to_string(work.join("out.tusk")).unwrap();
    assert!(placed.contains("@ SB<0,0>"), "{placed}");
    let report = fs::read_to_string(work.join("r.json")).unwrap();
    assert!(report.contains("\"optlevel\": 6"), "{report}");
    // optlevel 7 takes a fixed assignment: it has no PSUM colorer, so an
    // unplaced PSUM tensor fails the in-place check (exit 1), nothing written.
    fs::write(
        work.join("p.tusk"),
        "psum %p [128 x 64]\nfunc @f {\nentry:\n  %p = memset 0\n}\n",
    )
    .unwrap();
    let o = run_in(
        &work,
        &["run", "p.tusk", "--smt-allocation", "-o", "seven.tusk"],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("smt allocation fails in-place write checker"),
        "{}",
        o.stderr
    );
    assert!(!work.join("seven.tusk").exists());
    for (args, msg) in [
        (&["--optlevel", "4"][..], "--optlevel 4"),
        (&["--allocator", "best"][..], "--allocator"),
        (
            &["--vnc-count", "2", "--allocator", "lsa"][..],
            "--vnc-count 2",
        ),
        (&["--vnc-count", "2", "--optlevel", "0"][..], "optlevel 0"),
        (
            &["--vnc-count", "2", "--loops-in-backend", "--optlevel", "3"][..],
            "optlevel 8",
        ),
        (&["--gca-dma-optlevel", "3"][..], "--gca-dma-optlevel 3"),
        (&["--target", "trn9"][..], "--target trn9"),
        (&["--max-regs", "1"][..], "--max-regs 1"),
    ] {
        let mut v = vec!["run", "m.tusk"];
        v.extend_from_slice(args);
        let o = run_in(&work, &v);
        assert_eq!(o.code, 2, "{v:?}: {}", o.stderr);
        assert!(o.stderr.contains(msg), "{v:?}: {}", o.stderr);
    }
    // Usage errors (clap) are exit 2 too.
    assert_eq!(run_in(&work, &["run"]).code, 2);
    assert_eq!(run_in(&work, &["frobnicate"]).code, 2);
    let _ = fs::remove_dir_all(&work);
}

/// `tusk check` over the shipped examples: the unplaced and the hand-placed
/// copies are clean (exit 0); every broken copy fails with exit 1 and its
/// findings name what its `; expect: <kind> <names>` line planted.
#[test]
fn check_finds_every_planted_violation_in_the_examples() {
    let root = workspace().join("examples");
    let list = |sub: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(root.join(sub))
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| p.extension().is_some_and(|e| e == "tusk"));
        v.sort();
        v
    };
    let broken = list("broken");
    if broken.is_empty() {
        println!("no examples/broken/*.tusk: nothing to check");
        return;
    }
    for p in list("").iter().chain(&list("placed")) {
        let o = run_in(&root, &["check", p.to_str().unwrap()]);
        assert_eq!(o.code, 0, "{}: {}{}", p.display(), o.stdout, o.stderr);
    }
    for p in &broken {
        let text = fs::read_to_string(p).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("; expect: "))
            .unwrap_or_else(|| panic!("{}: no `; expect:` line", p.display()));
        let o = run_in(&root, &["check", p.to_str().unwrap()]);
        assert_eq!(o.code, 1, "{}: {}{}", p.display(), o.stdout, o.stderr);
        for name in expect.split_whitespace().skip(1) {
            assert!(
                o.stdout.contains(&format!("{name}@")),
                "{}: no finding names {name}: {}",
                p.display(),
                o.stdout
            );
        }
    }
    println!("{} broken examples caught", broken.len());
}
