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

/// Fails when an atomic write left a temporary file in `dir`.
fn assert_no_temporary_files(dir: &Path) {
    let names: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(names.is_empty(), "temporary files left: {names:?}");
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
    assert_no_temporary_files(&work);
    // JSON out and back in gives the same text.
    let o = run_in(&work, &["fmt", "--json", "in.tusk", "-o", "in.json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = run_in(&work, &["fmt", "in.json"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, src));
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn fmt_write_and_check_change_only_what_is_not_canonical() {
    use std::os::unix::fs::MetadataExt;
    let work = scratch("fmt-write");
    let messy = "; kernel\ntarget trn2\nsb   %x [128 x 64]   ; scratch\nfunc @f {\nentry:\n  %x = memset 0 ; zero\n}\n";
    let canonical = "; kernel\ntarget trn2\n\nsb %x [128 x 64] ; scratch\n\nfunc @f {\nentry:\n  %x = memset 0 ; zero\n}\n";
    let bad = "; broken\nfunc @f {\n";
    fs::write(work.join("a.tusk"), messy).unwrap();
    fs::write(work.join("b.tusk"), canonical).unwrap();
    fs::write(work.join("bad.tusk"), bad).unwrap();
    let ino = |f: &str| fs::metadata(work.join(f)).unwrap().ino();
    let read = |f: &str| fs::read_to_string(work.join(f)).unwrap();
    // Printing keeps the comments.
    let o = run_in(&work, &["fmt", "a.tusk"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, canonical), "{}", o.stderr);
    // --check lists what --write would change, and changes nothing.
    let o = run_in(&work, &["fmt", "--check", "a.tusk", "b.tusk"]);
    assert_eq!((o.code, o.stdout.as_str()), (1, "a.tusk\n"), "{}", o.stderr);
    assert_eq!(read("a.tusk"), messy);
    let o = run_in(&work, &["fmt", "--check", "b.tusk"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{}", o.stderr);
    // --write rewrites the messy file, leaves the canonical one untouched
    // (same inode: not even rewritten) and the malformed one as it was,
    // with the parser's error and exit 2.
    let (b_ino, bad_ino) = (ino("b.tusk"), ino("bad.tusk"));
    let o = run_in(&work, &["fmt", "--write", "a.tusk", "b.tusk", "bad.tusk"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("error: bad.tusk:3:1:"), "{}", o.stderr);
    assert_eq!(read("a.tusk"), canonical);
    assert_eq!(
        (read("b.tusk"), ino("b.tusk")),
        (canonical.to_string(), b_ino)
    );
    assert_eq!(
        (read("bad.tusk"), ino("bad.tusk")),
        (bad.to_string(), bad_ino)
    );
    // Formatting again changes nothing; --check agrees.
    let a_ino = ino("a.tusk");
    let o = run_in(&work, &["fmt", "-i", "a.tusk"]);
    assert_eq!((o.code, o.stdout.as_str(), ino("a.tusk")), (0, "", a_ino));
    let o = run_in(&work, &["fmt", "--check", "a.tusk", "b.tusk"]);
    assert_eq!((o.code, o.stdout.as_str()), (0, ""), "{}", o.stderr);
    // Through a symbolic link: the file it names is rewritten, the link stays.
    fs::write(work.join("c.tusk"), messy).unwrap();
    std::os::unix::fs::symlink("c.tusk", work.join("link.tusk")).unwrap();
    let o = run_in(&work, &["fmt", "-i", "link.tusk"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(fs::symlink_metadata(work.join("link.tusk"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(read("c.tusk"), canonical);
    // A rewritten file keeps its permission bits.
    use std::os::unix::fs::PermissionsExt;
    fs::write(work.join("d.tusk"), messy).unwrap();
    fs::set_permissions(work.join("d.tusk"), fs::Permissions::from_mode(0o640)).unwrap();
    let o = run_in(&work, &["fmt", "-i", "d.tusk"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(read("d.tusk"), canonical);
    let mode = fs::metadata(work.join("d.tusk"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
    assert_no_temporary_files(&work);
    // Usage errors (exit 2), each naming the problem; nothing written.
    fs::write(work.join("m.json"), "{}").unwrap();
    for (args, says) in [
        (
            &["fmt", "a.tusk", "b.tusk"][..],
            "several files take --write",
        ),
        (&["fmt", "--write", "--json", "a.tusk"][..], "--json"),
        (
            &["fmt", "--check", "a.tusk", "-o", "out.tusk"][..],
            "--output",
        ),
        (&["fmt", "--write", "--check", "a.tusk"][..], "--check"),
        (&["fmt", "--write", "-"][..], "standard input"),
        (&["fmt", "--check", "m.json"][..], "read as JSON"),
    ] {
        let o = run_in(&work, args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{args:?}: {}", o.stderr);
    }
    assert!(!work.join("out.tusk").exists());
    assert_eq!(read("a.tusk"), canonical);
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
    // unplaced PSUM tensor is refused before any pass (exit 1), naming the
    // tensor and what to do, nothing written.
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
        o.stderr.contains(
            "optlevel 7 keeps the input's placements and runs no PSUM allocator, \
             so every PSUM location must come placed; %p@PSUM<?>(128 x 64) has none"
        ) && o.stderr.contains("or use optlevel 2"),
        "{}",
        o.stderr
    );
    assert!(!work.join("seven.tusk").exists());
    for (args, msg) in [
        (
            &["--optlevel", "4"][..],
            "[possible values: 0, 1, 2, 3, 6, 7, 8]",
        ),
        (
            &["--allocator", "best"][..],
            "[possible values: coloring, lsa, exact]",
        ),
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
        (
            &["--target", "trn9"][..],
            "[possible values: trn1, inf2, trn2, trn3]",
        ),
        // One range for every out-of-range count, the target's.
        (&["--max-regs", "1"][..], "1 is not in 2..=4096"),
        (&["--max-regs", "0"][..], "0 is not in 2..=4096"),
        (&["--max-regs", "99999"][..], "99999 is not in 2..=4096"),
        // `--set` names the override it refuses and the legal keys or range.
        (&["--set", "sb-bytes"][..], "`sb-bytes` is not KEY=VALUE"),
        (&["--set", "sb-bytes=lots"][..], "`lots` in `sb-bytes=lots`"),
        (
            &["--set", "sb-megs=3"][..],
            "--set sb-megs=3: unknown target override (known: max-regs,",
        ),
        (
            &["--set", "sb-bytes=0"][..],
            "--set sb-bytes=0: target override value must be a number in 1..=",
        ),
    ] {
        let mut v = vec!["run", "m.tusk"];
        v.extend_from_slice(args);
        let o = run_in(&work, &v);
        assert_eq!(o.code, 2, "{v:?}: {}", o.stderr);
        assert!(o.stderr.contains(msg), "{v:?}: {}", o.stderr);
    }
    // `--set` overrides the target as the module's `target` line does: the
    // 8 KiB tile does not fit 4096 bytes per partition (the floor's refusal,
    // naming the override), fits 8192, and the placed module records it.
    fs::write(
        work.join("big.tusk"),
        "sb %t [128 x 8192]\nfunc @f {\nentry:\n  %t = memset 0\n}\n",
    )
    .unwrap();
    let o = run_in(
        &work,
        &[
            "run",
            "big.tusk",
            "--set",
            "sb-bytes=4096",
            "-o",
            "small.tusk",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("SB has 4096 bytes per partition"),
        "{}",
        o.stderr
    );
    assert!(!work.join("small.tusk").exists());
    let o = run_in(
        &work,
        &[
            "run",
            "big.tusk",
            "--set",
            "sb-bytes=8192",
            "-o",
            "fits.tusk",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("100.0% of 8192"), "{}", o.stdout);
    let placed = fs::read_to_string(work.join("fits.tusk")).unwrap();
    assert!(placed.contains("sb-bytes=8192"), "{placed}");
    // The help lists every flag's values.
    let help = run_in(&work, &["run", "--help"]).stdout;
    for values in [
        "[default: 2] [possible values: 0, 1, 2, 3, 6, 7, 8]",
        "[possible values: coloring, lsa, exact]",
        "[possible values: trn1, inf2, trn2, trn3]",
    ] {
        assert!(help.contains(values), "no `{values}` in {help}");
    }
    assert!(!help.contains("[default: \"\"]"), "{help}");
    // A generated module has at least one instruction.
    let o = run_in(&work, &["gen", "-n", "0"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("at least 1 instruction (1..=16000000)"),
        "{}",
        o.stderr
    );
    // Usage errors (clap) are exit 2 too.
    assert_eq!(run_in(&work, &["run"]).code, 2);
    assert_eq!(run_in(&work, &["frobnicate"]).code, 2);
    let _ = fs::remove_dir_all(&work);
}

/// `tusk check` over the shipped examples: the unplaced and the hand-placed
/// copies are clean (exit 0); every broken copy fails with exit 1 and its
/// findings name what its `; expect: <kind> <names>` line planted. A
/// `pattern-outside` copy cannot reach the verifier: the reader refuses a
/// pattern that leaves its location (exit 2) at the line marked
/// `; <- planted`.
#[test]
fn the_input_read_again_checks_what_the_copy_checks() {
    // `--check-input reread` reads the file again after the passes instead
    // of holding a copy through them: the same placed module, the same
    // verdict, on every shipped example, at a coloring optlevel and at
    // the linear scan's (optlevel 8), with the checks on one thread and
    // on two.
    let work = scratch("check-input");
    let examples = workspace().join("examples");
    let mut files: Vec<_> = fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tusk"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let input = f.to_string_lossy().into_owned();
        for optlevel in ["2", "8"] {
            for threads in ["1", "2"] {
                let mut outs = Vec::new();
                for how in ["copy", "reread"] {
                    let out = format!("{name}.{optlevel}.{threads}.{how}");
                    let o = run_in(
                        &work,
                        &[
                            "run",
                            &input,
                            "--optlevel",
                            optlevel,
                            "--check-threads",
                            threads,
                            "--check-input",
                            how,
                            "-o",
                            &out,
                        ],
                    );
                    assert_eq!(o.code, 0, "{name} -O{optlevel} {how}: {}", o.stderr);
                    assert!(
                        o.stdout
                            .contains("verified: placement and dataflow checks clean"),
                        "{name} -O{optlevel} {how}: {}",
                        o.stdout
                    );
                    outs.push(fs::read(work.join(&out)).unwrap());
                }
                assert!(
                    outs[0] == outs[1],
                    "{name} -O{optlevel} --check-threads {threads}"
                );
            }
        }
    }
    let o = run_in(
        &work,
        &["run", &files[0].to_string_lossy(), "--check-input", "later"],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("--check-input later is not a setting (known: auto copy reread)"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_sampled_dataflow_check_is_reported_as_partial() {
    // A loop that a pattern moves with is walked iteration by iteration up
    // to --dataflow-executions, then sampled (iterations 0, 1 and the
    // last): the run must not then read as fully verified.
    let work = scratch("walk-limit");
    fs::write(
        work.join("loop.tusk"),
        "target trn2

dram %src [1 x 16] uint8 input
dram %dst [1 x 16] uint8 output
sb %t [1 x 4]

func @k {
  loop i in 8 {
    %t[p0:1, 0:2 +2*i mod 2] = load %src[p0:1, 0:2 +2*i]
    %dst[p0:1, 0:2 +2*i] = save %t[p0:1, 0:2 +2*i mod 2]
  }
}
",
    )
    .unwrap();
    let report = |limit: &str| {
        let o = run_in(
            &work,
            &[
                "run",
                "loop.tusk",
                "--dataflow-executions",
                limit,
                "-o",
                "out.tusk",
                "--report",
                "r.json",
            ],
        );
        assert_eq!(o.code, 0, "{limit}: {}", o.stderr);
        let j: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(work.join("r.json")).unwrap()).unwrap();
        (o.stdout, j["verified"].clone(), j["dataflow_check"].clone())
    };
    // 8 iterations of 2 instructions: 16 executions.
    let (text, verified, d) = report("15");
    assert!(
        text.contains("verified in part: placement check clean, dataflow check clean on a sample")
            && text.contains("iterations 0, 1 and the last of 1 loop")
            && text.contains("up to 16 executions, over --dataflow-executions 15")
            && !text.contains("verified: placement and dataflow checks clean"),
        "{text}"
    );
    assert_eq!(verified, true);
    assert_eq!(d["sampled"], true, "{d}");
    assert_eq!(
        (d["walk_executions"].clone(), d["walk_limit"].clone()),
        (16.into(), 15.into())
    );
    for limit in ["16", "all"] {
        let (text, _, d) = report(limit);
        assert!(
            text.contains("verified: placement and dataflow checks clean")
                && !text.contains("note:"),
            "{limit}: {text}"
        );
        assert_eq!(d["sampled"], false, "{limit}: {d}");
        assert_eq!(d["exact_loops"], 1, "{limit}: {d}");
    }
    // A batch says which files were checked in part, in the table and
    // after it.
    fs::create_dir_all(work.join("many")).unwrap();
    fs::copy(work.join("loop.tusk"), work.join("many/loop.tusk")).unwrap();
    fs::copy(
        workspace().join("examples/transpose2d.tusk"),
        work.join("many/transpose2d.tusk"),
    )
    .unwrap();
    let o = run_in(
        &work,
        &["run", "many", "--dataflow-executions", "15", "-o", "placed"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let table = format!("{}{}", o.stdout, o.stderr);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("many/{name}")))
            .unwrap_or_else(|| panic!("{name}: {table}"))
            .to_string()
    };
    assert!(row("loop.tusk").ends_with("ok, checked in part"), "{table}");
    assert!(row("transpose2d.tusk").ends_with("  ok"), "{table}");
    assert!(
        table.contains("1 of them checked in part: the dataflow check sampled their loops"),
        "{table}"
    );
    // The help states the core's default limit.
    let help = run_in(&work, &["run", "--help"]).stdout;
    assert!(
        help.contains(&format!(
            "Default: {}",
            tusk_core::verify::MAX_EXACT_EXECUTIONS
        )),
        "{help}"
    );
    let o = run_in(
        &work,
        &["run", "loop.tusk", "--dataflow-executions", "many"],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("`many` is not a count of executions"),
        "{}",
        o.stderr
    );
}

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
        if expect.split_whitespace().next() == Some("pattern-outside") {
            let line = text
                .lines()
                .position(|l| l.ends_with("; <- planted"))
                .unwrap_or_else(|| panic!("{}: no `; <- planted` line", p.display()))
                + 1;
            assert_eq!(o.code, 2, "{}: {}{}", p.display(), o.stdout, o.stderr);
            assert!(
                o.stderr.contains(&format!(":{line}:")) && o.stderr.contains("outside"),
                "{}: not refused at line {line}: {}",
                p.display(),
                o.stderr
            );
            continue;
        }
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

/// The first entity a message names: `%x` or `$r` (up to its `@`).
fn first_named(msg: &str) -> Option<&str> {
    let k = msg.find(['%', '$'])?;
    let end = msg[k..].find('@')? + k;
    Some(&msg[k..end])
}

/// Splits `FILE:LINE:COL: message` after `file`.
fn split_position<'a>(line: &'a str, file: &str) -> Option<(usize, usize, &'a str)> {
    let rest = line.strip_prefix(file)?.strip_prefix(':')?;
    let mut parts = rest.splitn(3, ':');
    let l = parts.next()?.parse().ok()?;
    let c = parts.next()?.parse().ok()?;
    Some((l, c, parts.next()?.trim_start()))
}

/// The text of `src` from 1-based `line`, `col` (characters) on.
fn text_at(src: &str, line: usize, col: usize) -> &str {
    let l = src.lines().nth(line - 1).unwrap_or("");
    let start = l.char_indices().nth(col - 1).map_or(l.len(), |(k, _)| k);
    &l[start..]
}

/// Every finding of `tusk check`, and the error of `tusk run`, on the
/// broken examples starts with `FILE:LINE:COL:`, and that line and column
/// of the file is the declaration of the entity the message names first
/// (the location or register whose placement or lane is at fault). The
/// JSON gives the same `line` and `col`; a JSON input has no positions.
#[test]
fn messages_point_at_the_declaration_they_blame() {
    let root = workspace().join("examples/broken");
    let mut files: Vec<PathBuf> = fs::read_dir(&root)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "tusk"));
    files.sort();
    assert!(!files.is_empty(), "no examples/broken/*.tusk");
    let mut pointed = 0;
    for p in &files {
        let text = fs::read_to_string(p).unwrap();
        if text.starts_with("; expect: pattern-outside") {
            continue; // refused by the reader, with its own position
        }
        let name = p.file_name().unwrap().to_str().unwrap();
        let check = run_in(&root, &["check", name]);
        assert_eq!(check.code, 1, "{name}: {}{}", check.stdout, check.stderr);
        let findings: Vec<&str> = check
            .stdout
            .lines()
            .filter(|l| !l.contains(" finding"))
            .collect();
        let run = run_in(&root, &["run", name]);
        let errors: Vec<&str> = run
            .stderr
            .lines()
            .filter_map(|l| l.strip_prefix("error: "))
            .collect();
        for line in findings.iter().chain(&errors) {
            let (l, c, msg) = split_position(line, name)
                .unwrap_or_else(|| panic!("{name}: no FILE:LINE:COL in `{line}`"));
            let blamed = first_named(msg).unwrap_or_else(|| panic!("{name}: names nothing: {msg}"));
            let at = text_at(&text, l, c);
            let decl = text.lines().nth(l - 1).unwrap_or("").trim_start();
            assert!(
                at.strip_prefix(blamed)
                    .is_some_and(|r| r.starts_with(char::is_whitespace)),
                "{name}:{l}:{c} is `{at}`, not the declaration of {blamed} ({msg})"
            );
            assert!(
                ["sb ", "psum ", "dram ", "reg "]
                    .iter()
                    .any(|k| decl.starts_with(k)),
                "{name}:{l}: `{decl}` is not a declaration"
            );
            pointed += 1;
        }
        // The JSON of `check` and of a failed `run` carry the same position.
        let j: serde_json::Value =
            serde_json::from_str(&run_in(&root, &["check", "--json", name]).stdout).unwrap();
        let f = &j["findings"][0];
        let (l, c, _) = split_position(findings[0], name).unwrap();
        assert_eq!(
            (f["line"].as_u64(), f["col"].as_u64()),
            (Some(l as u64), Some(c as u64)),
            "{name}"
        );
        if let Some(e) = errors.first() {
            let r: serde_json::Value =
                serde_json::from_str(&run_in(&root, &["run", "--json", name]).stdout).unwrap();
            let (l, c, _) = split_position(e, name).unwrap();
            assert_eq!(
                (r["line"].as_u64(), r["col"].as_u64()),
                (Some(l as u64), Some(c as u64)),
                "{name}"
            );
        }
    }
    assert!(pointed >= 10, "only {pointed} messages checked");
    // An input that cannot be read twice (standard input) gets the same
    // position: it is parsed with positions from the start.
    let name = "matmul_fully_optimized-out-of-bounds.tusk";
    let from_file = run_in(&root, &["run", name]);
    let first = from_file.stderr.lines().next().unwrap_or("");
    let (l, c, _) = split_position(first.trim_start_matches("error: "), name)
        .unwrap_or_else(|| panic!("no position in `{first}`"));
    let mut child = std::process::Command::new(common::BIN)
        .args(["run", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run tusk");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        stdin
            .write_all(&fs::read(root.join(name)).unwrap())
            .unwrap();
    }
    let out = child.wait_with_output().expect("wait for tusk");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("error: <stdin>:{l}:{c}: ")),
        "{stderr}"
    );
    // From JSON, the same findings carry no position.
    let work = scratch("json-positions");
    let src = root.join("matmul_fully_optimized-overlap.tusk");
    let o = run_in(
        &work,
        &["fmt", "--json", src.to_str().unwrap(), "-o", "m.json"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = run_in(&work, &["check", "m.json"]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.starts_with("m.json: %rhs_t@"), "{}", o.stdout);
    let o = run_in(&work, &["run", "m.json"]);
    assert!(
        o.stderr.starts_with("error: m.json: verify:"),
        "{}",
        o.stderr
    );
    let j: serde_json::Value =
        serde_json::from_str(&run_in(&work, &["check", "--json", "m.json"]).stdout).unwrap();
    assert!(j["findings"][0].get("line").is_none(), "{j:#}");
    let _ = fs::remove_dir_all(&work);
}

// ---------------------------------------------------------------------
// Standard output that fails

/// Where a run's standard output goes in [`run_stdout_to`].
#[derive(Clone, Copy, Debug)]
enum Stdout {
    /// `/dev/full`: every write fails with "No space left on device".
    Full,
    /// A pipe whose reader is gone before the binary can write (its input
    /// comes on standard input, which is closed only after the pipe is),
    /// so its first write fails with a broken pipe.
    ClosedPipe,
}

/// Runs `tusk args…` in `dir` with `input` on standard input and standard
/// output sent to `to`; standard error is captured.
fn run_stdout_to(dir: &Path, args: &[&str], input: &[u8], to: Stdout) -> Outcome {
    use std::io::Write;
    use std::process::Stdio;
    let stdout = match to {
        Stdout::Full => Stdio::from(
            fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full exists on Linux"),
        ),
        Stdout::ClosedPipe => Stdio::piped(),
    };
    let mut child = std::process::Command::new(common::BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tusk");
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // The binary may stop reading early (a bad input): a failed write here
    // is not the test's concern.
    let _ = stdin.write_all(input);
    drop(stdin);
    let out = child.wait_with_output().expect("wait for tusk");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every subcommand, with its input on standard input where it takes one,
/// and the exit code of the job itself.
fn every_subcommand() -> Vec<(Vec<&'static str>, Vec<u8>, i32)> {
    let module = b"target trn2\n\nsb %x [128 x 64]\ndram %o [128 x 64] output\n\nfunc @f {\nentry:\n  %x = memset 0\n  %o = save %x\n}\n".to_vec();
    let csv = b"id,lower,upper,size\na,0,4,4\nb,2,6,4\n".to_vec();
    let graph = b"p edge 3 3\ne 1 2\ne 2 3\ne 1 3\n".to_vec();
    vec![
        (vec!["check", "-"], module.clone(), 0),
        (vec!["info", "-"], module.clone(), 0),
        (vec!["fmt", "-"], module.clone(), 0),
        (vec!["fmt", "--json", "-"], module.clone(), 0),
        (vec!["run", "-"], module.clone(), 0),
        (vec!["run", "-", "--json"], module.clone(), 0),
        (vec!["run", "-", "-o", "-"], module.clone(), 0),
        (vec!["dsa", "-", "--capacity", "8"], csv.clone(), 0),
        (
            vec!["dsa", "-", "--capacity", "8", "-o", "-"],
            csv.clone(),
            0,
        ),
        // Over capacity: the job's own code is 1.
        (
            vec!["dsa", "-", "--capacity", "7", "--algo", "best-fit"],
            csv,
            1,
        ),
        (vec!["color", "-", "-k", "3"], graph.clone(), 0),
        (vec!["color", "-", "-k", "3", "-o", "-"], graph, 0),
        (vec!["gen", "-n", "300"], Vec::new(), 0),
    ]
}

#[test]
fn a_full_standard_output_is_an_io_error_in_every_subcommand() {
    let work = scratch("dev-full");
    for (args, input, _) in every_subcommand() {
        let o = run_stdout_to(&work, &args, &input, Stdout::Full);
        assert_eq!(o.code, 3, "{args:?}: {}", o.stderr);
        assert!(!o.stderr.contains("panicked"), "{args:?}: {}", o.stderr);
        let last = o.stderr.lines().last().unwrap_or("");
        assert_eq!(
            last, "error: cannot write standard output: No space left on device (os error 28)",
            "{args:?}: {}",
            o.stderr
        );
        assert_eq!(
            o.stderr.matches("error:").count(),
            1,
            "{args:?}: {}",
            o.stderr
        );
    }
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_closed_pipe_on_standard_output_ends_quietly_with_the_jobs_code() {
    let work = scratch("closed-pipe");
    for (args, input, code) in every_subcommand() {
        let o = run_stdout_to(&work, &args, &input, Stdout::ClosedPipe);
        assert_eq!(o.code, code, "{args:?}: {}", o.stderr);
        assert!(
            !o.stderr.contains("panicked") && !o.stderr.contains("error"),
            "{args:?}: {}",
            o.stderr
        );
    }
    // `tusk run big.tusk -o - | head -2`: the reader stops part-way through a
    // module far larger than the pipe's buffer.
    fs::write(
        work.join("big.tusk"),
        run_in(&work, &["gen", "-n", "20000"]).stdout,
    )
    .unwrap();
    for args in [
        &["run", "big.tusk", "-o", "-"][..],
        &["fmt", "big.tusk"][..],
        &["gen", "-n", "20000"][..],
    ] {
        use std::io::{BufRead, BufReader};
        let mut child = std::process::Command::new(common::BIN)
            .args(args)
            .current_dir(&work)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "target trn2", "{args:?}");
        assert!(lines.next().is_some());
        drop(lines);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("error"),
            "{args:?}: {stderr}"
        );
    }
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_closed_standard_output_descriptor_is_not_a_crash() {
    let work = scratch("closed-fd");
    fs::write(
        work.join("m.tusk"),
        "sb %x [128 x 64]\nfunc @f {\nentry:\n  %x = memset 0\n}\n",
    )
    .unwrap();
    for args in [
        &["check", "m.tusk"][..],
        &["info", "m.tusk"],
        &["run", "m.tusk"],
    ] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" >&-")
            .arg(common::BIN)
            .args(args)
            .current_dir(&work)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{args:?}: {stderr}"
        );
    }
    let _ = fs::remove_dir_all(&work);
}

// ---------------------------------------------------------------------
// Inputs refused before any work

/// `tusk dsa --explain`: each buffer with what lies under it while it is
/// live and what reuses its bytes; over the capacity, the buffers live at
/// the peak and the bytes missing.
#[test]
fn dsa_explain_says_why_and_what_is_missing() {
    let work = scratch("dsa-explain");
    fs::write(
        work.join("b.csv"),
        "id,lower,upper,size\na,0,10,64\nb,5,20,32\nc,12,30,64\n",
    )
    .unwrap();
    let o = run_in(
        &work,
        &[
            "dsa",
            "b.csv",
            "--capacity",
            "90",
            "--algo",
            "greedy-size",
            "--explain",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    for line in [
        "  b at [64, 96), live [5, 20); below it while it is live: c, a\n",
        "  a at [0, 64), live [0, 10); at offset 0; its bytes are reused at other times by c\n",
        "  at instant 5, 2 buffers are live with 96 bytes in all: no placement fits there, it needs 6 more bytes\n",
    ] {
        assert!(o.stdout.contains(line), "no `{line}` in {}", o.stdout);
    }
    let j = run_in(
        &work,
        &["dsa", "b.csv", "--capacity", "4096", "--explain", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["explain"][0]["title"], "placements");
    let _ = fs::remove_dir_all(&work);
}

/// `tusk dsa` (exact) at a capacity below the bound: proven not to fit,
/// and then searched at raised capacities, so the answer is the least peak
/// the search finds there, not the best heuristic's, and says so.
#[test]
fn dsa_exact_that_cannot_fit_searches_at_raised_capacities() {
    use tusk_core::dsa::Problem;
    use tusk_core::gen::dsa::{perfect_packing, PerfectPacking};
    let work = scratch("dsa-descent");
    let mut p = Problem::linear(0, 120);
    let mut known = Vec::new();
    perfect_packing(&PerfectPacking::new(120), 3, &mut p, &mut known).unwrap();
    common::write_csv(&work, "p.csv", &p);
    let below = (p.capacity - 1).to_string();
    let peak_of = |stdout: &str| -> u64 {
        let line = stdout.lines().find(|l| l.starts_with("peak: ")).unwrap();
        line["peak: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let colored = run_in(
        &work,
        &["dsa", "p.csv", "--capacity", &below, "--algo", "coloring"],
    );
    let o = run_in(
        &work,
        &[
            "dsa",
            "p.csv",
            "--capacity",
            &below,
            "--budget-nodes",
            "40000",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stdout.contains("proven infeasible at this capacity"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("raised capacities: "), "{}", o.stdout);
    assert!(o.stdout.contains("validated: legal"), "{}", o.stdout);
    // A perfect packing: the searches reach its bound, which the colorer
    // misses.
    assert!(peak_of(&colored.stdout) > p.capacity, "{}", colored.stdout);
    assert_eq!(peak_of(&o.stdout), p.capacity, "{}", o.stdout);
    let _ = fs::remove_dir_all(&work);
}

/// `tusk dsa --svg`: the placement drawn, one rectangle per buffer, and
/// over a long time line an inset at the peak; it shares standard output
/// with nothing.
#[test]
fn dsa_svg_draws_the_placement_with_an_inset_at_the_peak() {
    let work = scratch("dsa-svg");
    // 400 buffers of 64 bytes, each live over two instants, one after the
    // other, and one of 4096 over instants 200..203: the peak is there.
    let rows: String = (0..400)
        .map(|k| format!("b{k},{k},{},64\n", k + 2))
        .collect();
    let csv = format!("id,lower,upper,size\n{rows}big,200,203,4096\n");
    fs::write(work.join("b.csv"), csv).unwrap();
    let o = run_in(
        &work,
        &["dsa", "b.csv", "--capacity", "65536", "--svg", "m.svg"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("wrote m.svg"), "{}", o.stdout);
    let svg = fs::read_to_string(work.join("m.svg")).unwrap();
    assert_eq!(svg.matches("class=\"tensor\"").count(), 401);
    let window = svg
        .split("class=\"inset\" data-space=\"buffers\" data-window=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|w| w.split_once(':'))
        .map(|(a, b)| (a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap()))
        .unwrap_or_else(|| panic!("no inset in {svg}"));
    assert!(window.0 <= 200 && 203 <= window.1, "{window:?}");
    assert!(svg.contains("buffers around the peak"), "{svg}");
    let o = run_in(
        &work,
        &[
            "dsa",
            "b.csv",
            "--capacity",
            "65536",
            "--svg",
            "-",
            "-o",
            "-",
        ],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("would both write standard output"),
        "{}",
        o.stderr
    );
    let _ = fs::remove_dir_all(&work);
}

/// `tusk color --json`: the summary's figures as one object, exit code as
/// without it (1: a vertex left uncolored).
#[test]
fn color_json_has_the_summarys_figures() {
    let work = scratch("color-json");
    fs::write(work.join("tri.col"), "p edge 3 3\ne 1 2\ne 2 3\ne 1 3\n").unwrap();
    let o = run_in(&work, &["color", "tri.col", "-k", "2", "--json"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        (v["vertices"].as_u64(), v["edges"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(
        (v["k"].as_u64(), v["uncolored"].as_u64()),
        (Some(2), Some(1))
    );
    let o = run_in(&work, &["color", "tri.col", "-k", "3", "--json", "-o", "-"]);
    assert_eq!(o.code, 2, "-o - and --json both want standard output");
    let _ = fs::remove_dir_all(&work);
}

/// `tusk completions SHELL` prints a script that knows the commands, the
/// flags and their values.
#[test]
fn completions_know_the_flags_and_their_values() {
    let work = scratch("completions");
    for shell in ["bash", "zsh", "fish"] {
        let o = run_in(&work, &["completions", shell]);
        assert_eq!(o.code, 0, "{shell}: {}", o.stderr);
        // Fish spells long flags `-l optlevel`.
        for word in ["optlevel", "svg-window", "regalloc", "coloring"] {
            assert!(o.stdout.contains(word), "{shell}: no `{word}`");
        }
    }
    let bash = run_in(&work, &["completions", "bash"]).stdout;
    assert!(bash.contains("0 1 2 3 6 7 8"), "optlevel values");
    assert_eq!(run_in(&work, &["completions", "tcsh"]).code, 2);
    let _ = fs::remove_dir_all(&work);
}

/// `tusk dsa` names its algorithm as `--algo` spells it, not by its Rust
/// name.
#[test]
fn dsa_names_the_algorithm_as_the_flag_does() {
    let work = scratch("dsa-algo");
    fs::write(
        work.join("b.csv"),
        "id,lower,upper,size\na,0,10,64\nb,5,20,32\n",
    )
    .unwrap();
    for algo in ["exact", "coloring", "lsa", "greedy-size", "best-fit"] {
        let o = run_in(
            &work,
            &["dsa", "b.csv", "--capacity", "4096", "--algo", algo],
        );
        assert_eq!(o.code, 0, "{algo}: {}", o.stderr);
        assert!(
            o.stdout.contains(&format!("\nalgo: {algo}\n")),
            "{}",
            o.stdout
        );
        let j = run_in(
            &work,
            &[
                "dsa",
                "b.csv",
                "--capacity",
                "4096",
                "--algo",
                algo,
                "--json",
            ],
        );
        assert_eq!(j.code, 0, "{algo}: {}", j.stderr);
        let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
        assert_eq!(v["algo"], algo);
        assert_eq!(
            (v["peak"].as_u64(), v["lower_bound"].as_u64()),
            (Some(96), Some(96))
        );
        assert_eq!(v["fits"], true);
        assert_eq!(v["validated"], true);
    }
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn dsa_refuses_overlapping_pins_before_placing() {
    let work = scratch("dsa-pins");
    fs::write(
        work.join("pins.csv"),
        "id,lower,upper,size,offset\nw0,0,10,64,0\nfree,0,10,32,\nw1,5,20,64,32\n",
    )
    .unwrap();
    for algo in ["exact", "coloring", "lsa", "greedy-size", "best-fit"] {
        let o = run_in(
            &work,
            &["dsa", "pins.csv", "--capacity", "4096", "--algo", algo],
        );
        assert_eq!(o.code, 2, "{algo}: {}{}", o.stdout, o.stderr);
        assert_eq!(
            o.stderr,
            "error: pins.csv:4:12: pinned buffers `w0` (line 2: lifetime [0, 10), bytes [0, 64)) \
             and `w1` (line 4: lifetime [5, 20), bytes [32, 96)) overlap: both hold bytes \
             [32, 64) during [5, 10)\n",
            "{algo}"
        );
        // Refused while reading: no summary, no placement.
        assert_eq!(o.stdout, "", "{algo}");
    }
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn json_takes_loops_as_deep_as_text_and_refuses_hostile_nesting() {
    let work = scratch("json-depth");
    // 64 nested loops, the text format's limit, with an instruction inside.
    let mut src = String::from("target trn2\n\nsb %t [128 x 64]\n\nfunc @f {\n");
    for k in 0..64 {
        src.push_str(&format!("loop {} {{\n", k + 2));
    }
    src.push_str("inner:\n%t[p0:64, 0:32] = tensor_copy %t[p0:64, e2, [2,4] [1,8]]\n");
    src.push_str(&"}\n".repeat(65));
    fs::write(work.join("deep.tusk"), &src).unwrap();
    let canonical = run_in(&work, &["fmt", "deep.tusk"]);
    assert_eq!(canonical.code, 0, "{}", canonical.stderr);
    let o = run_in(&work, &["fmt", "--json", "deep.tusk", "-o", "deep.json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let back = run_in(&work, &["fmt", "deep.json"]);
    assert_eq!((back.code, back.stderr.as_str()), (0, ""));
    assert_eq!(back.stdout, canonical.stdout);
    let o = run_in(&work, &["check", "deep.json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // 100,000 bare brackets: a clear error at the first one too deep.
    fs::write(work.join("brackets.json"), "[".repeat(100_000)).unwrap();
    let o = run_in(&work, &["check", "brackets.json"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        o.stderr,
        "error: brackets.json:1:205: arrays and objects nested more than 204 deep: deeper \
         than any module's document (loops nest at most 64 deep)\n"
    );
    let _ = fs::remove_dir_all(&work);
}
