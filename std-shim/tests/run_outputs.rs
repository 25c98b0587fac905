//! `tusk run` outputs beyond the summary, through the real binary: the
//! memory-map picture (`--svg`, also of a failed allocation), `--json`,
//! and batch runs over several files or a directory (the table, the
//! per-input outputs, the exit codes).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use svg::node::element::tag::Type;
use svg::parser::Event;

mod common;

use common::{run_in, Outcome};

fn examples() -> PathBuf {
    common::workspace().join("examples")
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("runout", name)
}

fn tusk(dir: &Path, args: &[&str]) -> Outcome {
    run_in(dir, args)
}

/// Parses an SVG file, failing on a parse error or unbalanced tags, and
/// returns the `data-tensor` names of its tensor rectangles (with
/// repetitions) and their fills.
fn tensor_rects(path: &Path) -> Vec<(String, String)> {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(80)]);
    let mut depth = 0i32;
    let mut rects = Vec::new();
    for ev in svg::read(&text).expect("an SVG document") {
        match ev {
            Event::Error(e) => panic!("{}: malformed SVG: {e}", path.display()),
            Event::Tag(name, ty, attrs) => {
                match ty {
                    Type::Start => depth += 1,
                    Type::End => depth -= 1,
                    Type::Empty => {}
                }
                assert!(depth >= 0, "an end tag without a start");
                let class = attrs.get("class").map(|v| v.to_string());
                if name == "rect" && ty != Type::End && class.as_deref() == Some("tensor") {
                    rects.push((
                        attrs
                            .get("data-tensor")
                            .map(|v| v.to_string())
                            .unwrap_or_default(),
                        attrs.get("fill").map(|v| v.to_string()).unwrap_or_default(),
                    ));
                }
            }
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced tags in {}", path.display());
    rects
}

/// Two full-width tensors of 120000 bytes per partition live together: SB
/// holds 212984, and with spilling off the colorer must fail.
const TOO_BIG: &str = "\
dram %out [128 x 4096] output
sb %a [128 x 120000]
sb %b [128 x 120000]
psum %p [128 x 2048]
func @f {
entry:
  %a = memset 0
  %b = memset 1
  %p = memset 0
  %a = tensor_tensor add %a, %b
  %out = save %a
}
";

#[test]
fn svg_draws_one_rectangle_per_placed_tensor() {
    let work = scratch("svg");
    let src = examples().join("attention.tusk");
    let o = tusk(
        &work,
        &[
            "run",
            src.to_str().unwrap(),
            "--svg",
            "map.svg",
            "--report",
            "r.json",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The summary still ends the run.
    assert!(o.stdout.contains("SB    peak"), "{}", o.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(work.join("r.json")).unwrap()).unwrap();
    let placed: u64 = report["spaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["placed"].as_u64().unwrap())
        .sum();
    let rects = tensor_rects(&work.join("map.svg"));
    // attention's tensors are all full-width: one panel for SB, so one
    // rectangle per tensor, no name twice.
    let names: BTreeSet<&str> = rects.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(rects.len(), names.len(), "{rects:?}");
    assert_eq!(rects.len() as u64, placed, "{rects:?}");
    let svg = fs::read_to_string(work.join("map.svg")).unwrap();
    for must in ["capacity", "peak", "PSUM, by bank", "program order"] {
        assert!(svg.contains(must), "no `{must}` in the picture");
    }
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn svg_of_partial_tensors_has_a_panel_per_quadrant() {
    let work = scratch("svg-quadrants");
    let src = examples().join("conv_as_matmul.tusk");
    let o = tusk(&work, &["run", src.to_str().unwrap(), "--svg", "map.svg"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let svg = fs::read_to_string(work.join("map.svg")).unwrap();
    assert!(
        svg.contains("SB, partitions 0\u{2013}31"),
        "no quadrant panel"
    );
    // A 64-partition tensor at partition 0 shows in two quadrants only.
    let rects = tensor_rects(&work.join("map.svg"));
    let wt = rects.iter().filter(|r| r.0 == "wt").count();
    assert_eq!(wt, 2, "{rects:?}");
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_failed_allocation_draws_the_moment_it_failed() {
    let work = scratch("svg-fail");
    fs::write(work.join("big.tusk"), TOO_BIG).unwrap();
    let o = tusk(
        &work,
        &[
            "run",
            "big.tusk",
            "--gca-dma-optlevel",
            "-1",
            "--svg",
            "fail.svg",
            "-o",
            "out.tusk",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("fail.svg"), "{}", o.stderr);
    // The allocated module is written only on success; the picture is the
    // point of a failure.
    assert!(!work.join("out.tusk").exists());
    let rects = tensor_rects(&work.join("fail.svg"));
    // The tensor the colorer names is drawn as the one that does not fit
    // (red), the other live one as demand stacked on it; PSUM was placed.
    let fill = |n: &str| rects.iter().find(|r| r.0 == n).map(|r| r.1.clone());
    assert_eq!(fill("a").as_deref(), Some("#e04040"), "{rects:?}");
    assert!(fill("b").is_some() && fill("p").is_some(), "{rects:?}");
    let svg = fs::read_to_string(work.join("fail.svg")).unwrap();
    assert!(svg.contains("does not fit at"), "no failure marker");
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn json_replaces_the_summary_on_stdout() {
    let work = scratch("json");
    let src = examples().join("softmax.tusk");
    let o = tusk(
        &work,
        &["run", src.to_str().unwrap(), "--json", "--print-pipeline"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("stdout is JSON alone");
    assert_eq!(v["optlevel"], 2);
    assert_eq!(v["verified"], true);
    assert!(!o.stdout.contains("SB    peak"));
    // The pass list moved to stderr so stdout stays JSON.
    assert!(o.stderr.contains("coloring_allocator_sb"), "{}", o.stderr);
    let _ = fs::remove_dir_all(&work);
}

/// The shipped unplaced examples, copied into `dir`.
fn copy_examples(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for e in fs::read_dir(examples()).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "tusk") {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            fs::copy(&p, dir.join(&name)).unwrap();
            names.push(name);
        }
    }
    names.sort();
    names
}

#[test]
fn batch_over_a_directory_prints_a_table_and_writes_per_input_outputs() {
    let work = scratch("batch");
    let inputs = work.join("in");
    fs::create_dir_all(inputs.join("sub")).unwrap();
    let names = copy_examples(&inputs);
    assert!(names.len() >= 2, "need examples/*.tusk");
    fs::rename(inputs.join(&names[0]), inputs.join("sub").join(&names[0])).unwrap();
    fs::write(inputs.join("notes.txt"), "not a module").unwrap();
    let o = tusk(
        &work,
        &["run", "in", "-o", "out", "--report", "rep", "--svg", "pics"],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("SB peak/bound"), "{}", o.stdout);
    assert!(
        o.stdout.contains(&format!(
            "{} files: {} ok, 0 failed",
            names.len(),
            names.len()
        )),
        "{}",
        o.stdout
    );
    // Not a terminal: a plain progress line per file on stderr.
    assert_eq!(
        o.stderr.matches(": ok (").count(),
        names.len(),
        "{}",
        o.stderr
    );
    for (k, n) in names.iter().enumerate() {
        let rel = if k == 0 {
            Path::new("sub").join(n)
        } else {
            PathBuf::from(n)
        };
        assert!(
            o.stdout.contains(&*rel.to_string_lossy()),
            "{n}: {}",
            o.stdout
        );
        assert!(work.join("out").join(&rel).exists(), "{}", rel.display());
        assert!(work.join("rep").join(rel.with_extension("json")).exists());
        assert!(work.join("pics").join(rel.with_extension("svg")).exists());
    }
    // --json: an array of reports instead of the table.
    let o = tusk(&work, &["run", "in", "--json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("a JSON array");
    assert_eq!(v.as_array().map(Vec::len), Some(names.len()));
    // With several inputs, -o must name a directory.
    fs::write(work.join("plain"), "").unwrap();
    let o = tusk(&work, &["run", "in", "-o", "plain"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("names a directory"), "{}", o.stderr);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn batch_exit_codes_follow_the_worst_file() {
    let work = scratch("batch-codes");
    let names = copy_examples(&work);
    fs::write(work.join("big.tusk"), TOO_BIG).unwrap();
    // One allocation failure: exit 1, the others still run.
    let mut args = vec!["run", "--gca-dma-optlevel", "-1", "big.tusk"];
    args.extend(names.iter().map(String::as_str));
    let o = tusk(&work, &args);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains(&format!("{} ok, 1 failed", names.len())),
        "{}",
        o.stdout
    );
    assert!(
        o.stderr.contains("big.tusk: coloring allocation failed"),
        "{}",
        o.stderr
    );
    // Add a malformed file: exit 2, whatever else failed.
    fs::write(work.join("bad.tusk"), "sb %x [128 x\n").unwrap();
    let o = tusk(&work, &["run", "--gca-dma-optlevel", "-1", "."]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("1 bad input"), "{}", o.stdout);
    assert!(o.stderr.contains("bad.tusk:"), "{}", o.stderr);
    // A missing file among several: an I/O error (3) unless something is
    // malformed.
    let o = tusk(&work, &["run", names[0].as_str(), "missing.tusk"]);
    assert_eq!(o.code, 3, "{}{}", o.stdout, o.stderr);
    let _ = fs::remove_dir_all(&work);
}
