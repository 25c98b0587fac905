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
/// holds 212984, and with spilling off the colorer must fail. No single
/// instruction touches both, so the program is above its floor (120000):
/// the failure is the allocator's, not the floor's refusal.
const TOO_BIG: &str = "\
dram %out [128 x 120000] output
sb %a [128 x 120000]
sb %b [128 x 120000]
psum %p [128 x 2048]
func @f {
entry:
  %a = memset 0
  %b = memset 1
  %p = memset 0
  %out[p0:128, 0:4096] = save %b[p0:128, 0:4096]
  %out[p0:128, 4096:8192] = save %a[p0:128, 0:4096]
}
";

#[test]
fn svg_draws_one_rectangle_per_placed_tensor() {
    let work = scratch("svg");
    let src = examples().join("rmsnorm_qkv.tusk");
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
    // rmsnorm_qkv's tensors are all full-width: one panel for SB, so one
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

/// Runs `tusk run examples/<example> --svg map.svg` in a fresh scratch
/// directory named `dir`, and returns that directory; the run must
/// succeed.
fn svg_of_example(dir: &str, example: &str) -> PathBuf {
    let work = scratch(dir);
    let src = examples().join(example);
    let o = tusk(&work, &["run", src.to_str().unwrap(), "--svg", "map.svg"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    work
}

#[test]
fn svg_of_partial_tensors_has_a_panel_per_quadrant() {
    let work = svg_of_example("svg-quadrants", "transpose2d.tusk");
    let svg = fs::read_to_string(work.join("map.svg")).unwrap();
    assert!(
        svg.contains("SB, partitions 0\u{2013}31"),
        "no quadrant panel"
    );
    // A 5-partition tile lies in one quadrant: one rectangle each.
    let rects = tensor_rects(&work.join("map.svg"));
    for t in ["in_tile", "out_tile"] {
        assert_eq!(rects.iter().filter(|r| r.0 == t).count(), 1, "{rects:?}");
    }
    // Three positions, each tile the height of its panel: the main map
    // reads, no inset.
    assert!(
        insets(&work.join("map.svg")).is_empty() && !svg.contains("inset-frame"),
        "an inset on a three-position module"
    );
    // A 64-partition tensor at partition 0 shows in two quadrants only.
    fs::write(work.join("half.tusk"), HALF).unwrap();
    let o = tusk(&work, &["run", "half.tusk", "--svg", "half.svg"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rects = tensor_rects(&work.join("half.svg"));
    let w = rects.iter().filter(|r| r.0 == "w").count();
    assert_eq!(w, 2, "{rects:?}");
    let _ = fs::remove_dir_all(&work);
}

/// A 64-partition tensor live with a full-width one.
const HALF: &str = "\
dram %x [64 x 512] fp32 input
dram %y [128 x 512] fp32 output
sb %w [64 x 512] fp32
sb %a [128 x 512] fp32
psum %p [128 x 512] fp32
func @f {
entry:
  %w = load %x
  %a = memset 0
  %p = matmul %w[p0:64, 0:512], %a[p0:64, 0:512]
  %a = tensor_copy %p
  %y = save %a
}
";

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
    // Five positions of large tensors, all named: no inset.
    assert!(insets(&work.join("fail.svg")).is_empty(), "{svg}");
    let _ = fs::remove_dir_all(&work);
}

/// One zoomed inset of a picture: its space, its window of positions
/// `[lo, hi)`, its title, the tensors it draws and the texts it writes.
#[derive(Debug)]
struct InsetSeen {
    space: String,
    window: (u64, u64),
    title: String,
    tensors: Vec<String>,
    texts: Vec<String>,
}

/// The insets of an SVG file (`<g class="inset">` and what lies inside).
fn insets(path: &Path) -> Vec<InsetSeen> {
    let text = fs::read_to_string(path).unwrap();
    let mut out: Vec<InsetSeen> = Vec::new();
    // Depth of the open tags inside the current inset, when in one.
    let mut inside: Option<i32> = None;
    for ev in svg::read(&text).expect("an SVG document") {
        match ev {
            Event::Error(e) => panic!("{}: malformed SVG: {e}", path.display()),
            Event::Tag(name, ty, attrs) => {
                if let Some(d) = inside.as_mut() {
                    match ty {
                        Type::Start => *d += 1,
                        Type::End => *d -= 1,
                        Type::Empty => {}
                    }
                    if *d == 0 {
                        inside = None;
                    }
                }
                let class = attrs.get("class").map(|v| v.to_string());
                if name == "g" && ty == Type::Start && class.as_deref() == Some("inset") {
                    let w = attrs.get("data-window").unwrap().to_string();
                    let (lo, hi) = w.split_once(':').unwrap();
                    out.push(InsetSeen {
                        space: attrs.get("data-space").unwrap().to_string(),
                        window: (lo.parse().unwrap(), hi.parse().unwrap()),
                        title: String::new(),
                        tensors: Vec::new(),
                        texts: Vec::new(),
                    });
                    inside = Some(1);
                } else if inside.is_some()
                    && name == "rect"
                    && ty != Type::End
                    && class.as_deref() == Some("inset-tensor")
                {
                    let t = attrs.get("data-tensor").unwrap().to_string();
                    out.last_mut().unwrap().tensors.push(t);
                }
            }
            Event::Text(t) if inside.is_some() => {
                let last = out.last_mut().unwrap();
                if last.title.is_empty() {
                    last.title = t.trim().to_string();
                }
                last.texts.push(t.trim().to_string());
            }
            _ => {}
        }
    }
    out
}

/// Every tensor `inset` draws carries a label in it: its name inside the
/// rectangle, or a key number drawn there that the inset's key list
/// (`too thin to name: 1 a · 2 b`) gives the name of.
fn assert_every_tensor_labelled(inset: &InsetSeen) {
    let keys: Vec<(String, String)> = inset
        .texts
        .iter()
        .filter_map(|t| t.strip_prefix("too thin to name: "))
        .flat_map(|l| l.split(" \u{b7} "))
        .filter_map(|e| e.split_once(' '))
        .map(|(k, n)| (k.to_string(), n.to_string()))
        .collect();
    for t in &inset.tensors {
        let named = inset.texts.iter().any(|x| x == t);
        let keyed = keys
            .iter()
            .any(|(k, n)| n == t && inset.texts.iter().any(|x| x == k));
        assert!(named || keyed, "{t} has no label in {inset:#?}");
    }
}

/// A failure at position 1 or 2 of a 404-position program: two tensors of
/// 120000 bytes per partition (SB holds 212984) early, then 200 short-lived
/// 64-byte tensors the input places (so they are drawn at the failure),
/// `%f<k>` live over positions `4 + 2k` and `5 + 2k`.
fn early_failure() -> String {
    let mut s = String::from(
        "dram %out [128 x 120000] output\nsb %a [128 x 120000]\nsb %b [128 x 120000]\n",
    );
    for k in 0..200 {
        s.push_str(&format!("sb %f{k} [128 x 64] @ SB<0,0>\n"));
    }
    s.push_str(
        "func @f {\nentry:\n  %a = memset 0\n  %b = memset 1\n  \
         %out[p0:128, 0:4096] = save %b[p0:128, 0:4096]\n  \
         %out[p0:128, 4096:8192] = save %a[p0:128, 0:4096]\n",
    );
    for k in 0..200 {
        s.push_str(&format!(
            "  %f{k} = memset 0\n  %out[p0:128, 0:64] = save %f{k}[p0:128, 0:64]\n"
        ));
    }
    s.push_str("}\n");
    s
}

#[test]
fn a_failure_in_a_long_program_gets_an_inset_around_it() {
    let work = scratch("svg-inset-fail");
    fs::write(work.join("early.tusk"), early_failure()).unwrap();
    let o = tusk(
        &work,
        &[
            "run",
            "early.tusk",
            "--gca-dma-optlevel",
            "-1",
            "--svg",
            "fail.svg",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    let svg = fs::read_to_string(work.join("fail.svg")).unwrap();
    // The failure position, as the main map's marker names it.
    let at: u64 = svg
        .split("does not fit at ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .expect("a failure marker");
    let all = insets(&work.join("fail.svg"));
    let fail: Vec<&InsetSeen> = all
        .iter()
        .filter(|i| i.title.contains("around the failure"))
        .collect();
    assert_eq!(fail.len(), 1, "{all:#?}");
    let i = fail[0];
    assert_eq!(i.space, "SB");
    let positions = format!("positions {}..{}", i.window.0, i.window.1 - 1);
    assert!(
        i.title
            .contains(&format!("around the failure at {at}, {positions}: `%")),
        "the title names the position, the window and the instruction: {}",
        i.title
    );
    let (lo, hi) = i.window;
    assert!(lo <= at && at < hi, "{at} outside {lo}..{hi}");
    // Zoomed: a small part of the 404 positions, at least MIN_POSITIONS.
    assert!((12..=60).contains(&(hi - lo)), "{lo}..{hi}");
    // Every tensor live in the window is drawn there, once, and labelled.
    let mut expected: BTreeSet<String> = ["a", "b"].map(String::from).into();
    for k in 0..200u64 {
        let (s, e) = (4 + 2 * k, 6 + 2 * k);
        if s < hi && lo < e {
            expected.insert(format!("f{k}"));
        }
    }
    let drawn: BTreeSet<String> = i.tensors.iter().cloned().collect();
    assert_eq!(drawn, expected, "{i:#?}");
    assert_eq!(drawn.len(), i.tensors.len(), "{i:#?}");
    assert_every_tensor_labelled(i);
    // The frame on the main map and the line to the inset.
    assert!(svg.contains("class=\"inset-frame\""));
    assert!(svg.contains("class=\"inset-connector\""));
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_peak_among_thin_tensors_gets_an_inset_around_it() {
    let work = svg_of_example("svg-inset-peak", "flash_attn_bwd.tusk");
    let all = insets(&work.join("map.svg"));
    let sb = all
        .iter()
        .find(|i| i.space == "SB")
        .unwrap_or_else(|| panic!("no SB inset: {all:#?}"));
    assert!(sb.title.starts_with("SB around the peak "), "{}", sb.title);
    let at: u64 = sb
        .title
        .split(" at ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no peak position in {}", sb.title));
    assert!(sb.window.0 <= at && at < sb.window.1, "{sb:#?}");
    assert!(!sb.tensors.is_empty());
    assert_every_tensor_labelled(sb);
    // The main map still draws one rectangle per tensor: the inset's are
    // of their own class.
    let main = tensor_rects(&work.join("map.svg"));
    assert!(main.len() > sb.tensors.len());
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn json_replaces_the_summary_on_stdout() {
    let work = scratch("json");
    let src = examples().join("rmsnorm_qkv.tusk");
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
        // At the line and column of `%b = memset 1`, where it ran out.
        o.stderr
            .contains("big.tusk:8:3: coloring allocation failed"),
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

/// The names in `dir`, sorted (hidden temporary files included).
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The files below `dir` (not directories), as paths relative to it, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                v.push(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    v.sort();
    v
}

#[test]
fn outputs_that_collide_are_refused_before_any_work() {
    let work = scratch("collide");
    fs::copy(examples().join("rmsnorm_qkv.tusk"), work.join("in.tusk")).unwrap();
    for (args, msg) in [
        (
            &["-o", "x", "--report", "x"][..],
            "error: -o and --report both name x; give each output its own file\n",
        ),
        (
            &["-o", "x", "--svg", "./x"][..],
            "error: -o and --svg both name ./x; give each output its own file\n",
        ),
        (
            &["--report", "r.json", "--svg", "r.json"][..],
            "error: --report and --svg both name r.json; give each output its own file\n",
        ),
        (
            &["-o", "in.tusk"][..],
            "error: -o in.tusk is the input file (inputs are never modified)\n",
        ),
        (
            &["--report", "./in.tusk"][..],
            "error: --report ./in.tusk is the input file (inputs are never modified)\n",
        ),
        (
            &["--svg", "in.tusk"][..],
            "error: --svg in.tusk is the input file (inputs are never modified)\n",
        ),
        (
            &["-o", "-", "--json"][..],
            "error: -o and --json would both write standard output\n",
        ),
        (
            &["-o", "-", "--report", "-"][..],
            "error: -o and --report would both write standard output\n",
        ),
    ] {
        let mut v = vec!["run", "in.tusk"];
        v.extend_from_slice(args);
        let o = tusk(&work, &v);
        assert_eq!(o.code, 2, "{v:?}: {}", o.stderr);
        assert_eq!(o.stderr, msg, "{v:?}");
        // Before any work: no summary, nothing written, the input intact.
        assert_eq!(o.stdout, "", "{v:?}");
        assert_eq!(names_in(&work), ["in.tusk"], "{v:?}");
    }
    assert_eq!(
        fs::read(work.join("in.tusk")).unwrap(),
        fs::read(examples().join("rmsnorm_qkv.tusk")).unwrap()
    );
    // `-o -` owns standard output: the pass list goes to standard error.
    let o = tusk(&work, &["run", "in.tusk", "-o", "-", "--print-pipeline"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("target "), "{}", o.stdout);
    assert!(!o.stdout.contains("pipeline:"), "{}", o.stdout);
    assert!(o.stderr.contains("pipeline:"), "{}", o.stderr);
    // `/dev/null` twice overwrites nothing: allowed.
    let o = tusk(
        &work,
        &["run", "in.tusk", "-o", "/dev/null", "--report", "/dev/null"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // A batch refuses an output directory that would overwrite its inputs.
    let o = tusk(&work, &["run", "in.tusk", "in.tusk", "-o", "."]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let o = tusk(&work, &["run", ".", "-o", "."]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("-o would write ./in.tusk over the input file ./in.tusk"),
        "{}",
        o.stderr
    );
    assert_eq!(names_in(&work), ["in.tusk"]);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_failed_run_writes_nothing_but_the_documented_picture() {
    let work = scratch("all-or-nothing");
    fs::copy(examples().join("rmsnorm_qkv.tusk"), work.join("in.tusk")).unwrap();
    fs::write(work.join("big.tusk"), TOO_BIG).unwrap();
    // The module cannot be written: the report, staged first, is not
    // written either.
    let o = tusk(
        &work,
        &[
            "run",
            "in.tusk",
            "-o",
            "no/such/dir/out.tusk",
            "--report",
            "r.json",
            "--svg",
            "m.svg",
        ],
    );
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert_eq!(
        o.stderr,
        "error: cannot write no/such/dir/out.tusk: directory no/such/dir does not exist\n"
    );
    assert_eq!(o.stdout, "");
    assert_eq!(names_in(&work), ["big.tusk", "in.tusk"]);
    // The last output cannot be written (its name is a directory): the
    // two before it stay unwritten.
    fs::create_dir(work.join("taken")).unwrap();
    let o = tusk(
        &work,
        &[
            "run", "in.tusk", "-o", "out.tusk", "--report", "r.json", "--svg", "taken",
        ],
    );
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert_eq!(o.stderr, "error: cannot write taken: it is a directory\n");
    assert_eq!(names_in(&work), ["big.tusk", "in.tusk", "taken"]);
    // A failed allocation writes neither the module nor the report; the
    // picture of the failure is the one output a failure has (README).
    let o = tusk(
        &work,
        &[
            "run",
            "big.tusk",
            "--gca-dma-optlevel",
            "-1",
            "-o",
            "out.tusk",
            "--report",
            "r.json",
            "--svg",
            "fail.svg",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        names_in(&work),
        ["big.tusk", "fail.svg", "in.tusk", "taken"]
    );
    // Success writes all three.
    let o = tusk(
        &work,
        &[
            "run", "in.tusk", "-o", "out.tusk", "--report", "r.json", "--svg", "m.svg",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        names_in(&work),
        ["big.tusk", "fail.svg", "in.tusk", "m.svg", "out.tusk", "r.json", "taken"]
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_missing_output_directory_is_named_in_every_subcommand() {
    let work = scratch("no-dir");
    fs::copy(examples().join("rmsnorm_qkv.tusk"), work.join("in.tusk")).unwrap();
    fs::write(work.join("b.csv"), "id,lower,upper,size\na,0,4,4\n").unwrap();
    fs::write(work.join("g.col"), "p edge 2 1\ne 1 2\n").unwrap();
    for args in [
        &["run", "in.tusk", "-o", "gone/x"][..],
        &["run", "in.tusk", "--report", "gone/x"],
        &["run", "in.tusk", "--svg", "gone/x"],
        &["fmt", "in.tusk", "-o", "gone/x"],
        &["gen", "-n", "50", "-o", "gone/x"],
        &["dsa", "b.csv", "--capacity", "8", "-o", "gone/x"],
        &["color", "g.col", "-k", "2", "-o", "gone/x"],
    ] {
        let o = tusk(&work, args);
        assert_eq!(o.code, 3, "{args:?}: {}", o.stderr);
        assert_eq!(
            o.stderr, "error: cannot write gone/x: directory gone does not exist\n",
            "{args:?}"
        );
    }
    assert_eq!(names_in(&work), ["b.csv", "g.col", "in.tusk"]);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_failing_file_of_a_batch_leaves_none_of_its_outputs() {
    let work = scratch("batch-partial");
    let inputs = work.join("in");
    fs::create_dir_all(inputs.join("sub")).unwrap();
    fs::copy(examples().join("rmsnorm_qkv.tusk"), inputs.join("a.tusk")).unwrap();
    fs::copy(examples().join("conv1d.tusk"), inputs.join("sub/b.tusk")).unwrap();
    fs::write(inputs.join("big.tusk"), TOO_BIG).unwrap();
    fs::write(inputs.join("bad.tusk"), "sb %x [128 x\n").unwrap();
    // `out/sub` is a file: b's module has nowhere to go.
    fs::create_dir_all(work.join("out")).unwrap();
    fs::write(work.join("out/sub"), "in the way").unwrap();
    let o = tusk(
        &work,
        &[
            "run",
            "in",
            "--gca-dma-optlevel",
            "-1",
            "-o",
            "out",
            "--report",
            "rep",
            "--svg",
            "pics",
        ],
    );
    // The worst file decides: a malformed input.
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout
            .contains("4 files: 1 ok, 1 failed, 1 bad input, 1 I/O errors"),
        "{}",
        o.stdout
    );
    assert!(
        o.stderr
            .contains("error: cannot write out/sub/b.tusk: cannot create directory out/sub"),
        "{}",
        o.stderr
    );
    // a: everything; b and bad: nothing; big: only the failure's picture.
    // (The subdirectories that mirror the inputs may exist, empty.)
    assert_eq!(files_under(&work.join("out")), ["a.tusk", "sub"]);
    assert_eq!(files_under(&work.join("rep")), ["a.json"]);
    assert_eq!(files_under(&work.join("pics")), ["a.svg", "big.svg"]);
    let _ = fs::remove_dir_all(&work);
}

/// Sends `signal` (a `kill -s` name) to `pid`.
fn send(signal: &str, pid: u32) {
    let ok = std::process::Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(ok.success(), "kill -s {signal} {pid}");
}

/// Starts `tusk run big.tusk -o out/out.tusk` and waits until its temporary
/// output file exists (the module is being written); returns the child.
fn start_writing(work: &Path) -> std::process::Child {
    let mut child = std::process::Command::new(common::BIN)
        .args([
            "run",
            "big.tusk",
            "--optlevel",
            "0",
            "--no-verify",
            "-o",
            "out/out.tusk",
        ])
        .current_dir(work)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run tusk");
    let start = std::time::Instant::now();
    loop {
        if names_in(&work.join("out"))
            .iter()
            .any(|n| n.starts_with(".out.tusk.tusk-tmp-"))
        {
            return child;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("tusk ended ({status}) before its output was seen being written");
        }
        assert!(
            start.elapsed().as_secs() < 300,
            "no temporary output file after 5 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// SIGINT, SIGTERM and SIGHUP during the write of a large module remove
/// the temporary file and exit with 128 + the signal; SIGKILL cannot be
/// caught, and the next run writing into the directory removes what it
/// left. 300,000 instructions give a write of some 20 MB, long enough to
/// be caught in the act (the window is what matters, not the size).
#[test]
fn signals_mid_write_leave_no_temporary_file() {
    let work = scratch("signals");
    fs::create_dir(work.join("out")).unwrap();
    let o = tusk(&work, &["gen", "-n", "300000", "-o", "big.tusk"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for (signal, code) in [("TERM", 143), ("INT", 130), ("HUP", 129)] {
        let child = start_writing(&work);
        send(signal, child.id());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "SIG{signal}: {stderr}");
        assert!(!stderr.contains("panicked"), "SIG{signal}: {stderr}");
        assert_eq!(
            names_in(&work.join("out")),
            Vec::<String>::new(),
            "SIG{signal}"
        );
    }
    let mut child = start_writing(&work);
    child.kill().unwrap();
    child.wait().unwrap();
    let left = names_in(&work.join("out"));
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with(".out.tusk.tusk-tmp-"), "{left:?}");
    fs::copy(examples().join("rmsnorm_qkv.tusk"), work.join("s.tusk")).unwrap();
    let o = tusk(&work, &["fmt", "s.tusk", "-o", "out/s.tusk"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .starts_with("note: removed out/.out.tusk.tusk-tmp-"),
        "{}",
        o.stderr
    );
    assert_eq!(names_in(&work.join("out")), ["s.tusk"]);
    let _ = fs::remove_dir_all(&work);
}

/// Only temporary files of the exact pattern whose process has ended are
/// removed: not a live process's, not other names, not directories.
#[test]
fn stale_temporary_files_of_ended_processes_are_collected() {
    let work = scratch("stale");
    let out = work.join("out");
    fs::create_dir(&out).unwrap();
    // PIDs above Linux's largest pid_max (2^22) never run.
    let dead = ".old.tusk.tusk-tmp-99999999";
    let live = format!(".old.tusk.tusk-tmp-{}", std::process::id());
    for name in [
        dead,
        live.as_str(),
        "old.tusk.tusk-tmp-99999999",
        ".old.tusk",
    ] {
        fs::write(out.join(name), "x").unwrap();
    }
    fs::create_dir(out.join(".dir.tusk-tmp-99999999")).unwrap();
    fs::copy(examples().join("rmsnorm_qkv.tusk"), work.join("s.tusk")).unwrap();
    let o = tusk(&work, &["fmt", "s.tusk", "-o", "out/new.tusk"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stderr,
        format!(
            "note: removed out/{dead}, left by an earlier tusk (process 99999999) that did not \
             finish\n"
        )
    );
    let mut expect = vec![
        ".dir.tusk-tmp-99999999".to_string(),
        ".old.tusk".to_string(),
        live,
        "new.tusk".to_string(),
        "old.tusk.tusk-tmp-99999999".to_string(),
    ];
    expect.sort();
    assert_eq!(names_in(&out), expect);
    let _ = fs::remove_dir_all(&work);
}
