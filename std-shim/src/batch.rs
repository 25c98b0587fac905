//! `tusk run` over one file or many: the per-file job (load, allocate,
//! write the outputs, say how it went) and the batch around it — inputs
//! expanded from directories, files allocated in parallel (rayon), a
//! progress bar on a terminal and plain lines otherwise, and a table.
//!
//! A job never prints: it returns its standard output and error texts, so
//! one file prints exactly what `tusk run FILE` always printed and a batch
//! can keep its progress display tidy.
//!
//! Exit codes (the driver's): 0 success, 1 the job failed (allocation or
//! checks), 2 bad input or usage, 3 I/O error. A batch exits with the most
//! telling code of its files: 2 if any input was malformed, else 3 if any
//! file could not be read or written, else 1 if any allocation failed.
//!
//! Outputs are all or nothing per file: a job stages every output it was
//! asked for and commits them together only after the run succeeded
//! (`crate::io::stage`), so a file that fails in any way — bad input, a
//! failed allocation, an output that cannot be written, a panic — leaves
//! none of its outputs, and the other files of a batch go on. The one
//! exception is documented: `--svg` of a failed allocation draws the
//! moment it failed.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde_json::{json, Value};
use tusk_core::digest::digest;
use tusk_core::ir::{Module, Space};
use tusk_core::Options;

pub use crate::console::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_IO, EXIT_OK};
use crate::text::SourceMap;
use crate::{blame, console, explain, io, json, memmap, run, svg, text, textmap};

/// What every file of a run gets: the normalized options and the flags
/// that shape output.
#[derive(Clone, Debug, Default)]
pub struct JobConfig {
    /// Normalized pipeline options.
    pub opts: Options,
    /// `--set KEY=VALUE` target overrides, applied in order after the
    /// preset (`opts.target`) and the module's own overrides.
    pub target_overrides: Vec<(String, u64)>,
    /// Read every input as JSON.
    pub from_json: bool,
    /// Print the pass list before running.
    pub print_pipeline: bool,
    /// Print the JSON report to standard output instead of the summary.
    pub json: bool,
    /// After the summary, the run's decisions (`explain`), or on failure
    /// what was live where it failed and what would make room; the JSON
    /// report gets them as `explain`.
    pub explain: bool,
    /// After the summary (or the error), the memory map as text
    /// (`textmap`) at the peak, or at the failure.
    pub map: bool,
    /// Positions `[start, end)` the pictures (`--svg`, `--map`) draw.
    pub window: Option<(u64, u64)>,
    /// Threads of the dataflow check, 1 or 2 (`None`: 2 when the machine
    /// has a second core).
    pub check_threads: Option<u8>,
    /// The placement verifier and the dataflow checker after the passes
    /// (off with `--no-verify`).
    pub verify: bool,
    /// Where the dataflow check's input comes from (`--check-input`).
    pub check_input: run::CheckInput,
}

/// Where one file's outputs go.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// The allocated module (text).
    pub module: Option<PathBuf>,
    /// The JSON report.
    pub report: Option<PathBuf>,
    /// The memory-map picture.
    pub svg: Option<PathBuf>,
    /// Create the directories the outputs go to when they are written (a
    /// batch's subdirectories), instead of refusing a missing one.
    pub create_dirs: bool,
}

impl Outputs {
    /// The outputs as (flag, path) pairs, standard output included (`-`;
    /// `--json` puts the report there).
    fn flags(&self, json: bool) -> Vec<(&'static str, &Path)> {
        let mut v: Vec<(&'static str, &Path)> = [
            ("-o", &self.module),
            ("--report", &self.report),
            ("--svg", &self.svg),
        ]
        .into_iter()
        .filter_map(|(flag, p)| p.as_deref().map(|p| (flag, p)))
        .collect();
        if json {
            v.push(("--json", Path::new("-")));
        }
        v
    }

    /// Refuses outputs that would write over `input` or over each other
    /// (`crate::io::check_outputs`); `json` when the report goes to
    /// standard output.
    pub fn check(&self, input: Option<&Path>, json: bool) -> Result<(), String> {
        io::check_outputs(input, &self.flags(json))
    }
}

/// The figures of one file for the batch table.
#[derive(Clone, Debug, Default)]
pub struct Row {
    /// Normalized optlevel, once options applied.
    pub optlevel: Option<u8>,
    /// SB peak and lower bound.
    pub sb: Option<(u64, u64)>,
    /// PSUM peak and lower bound.
    pub psum: Option<(u64, u64)>,
    /// Spills over all spaces.
    pub spills: Option<u32>,
    /// DMA descriptors before and after the DMA passes.
    pub dma: Option<(u64, u64)>,
    /// Registers spilled.
    pub reg_spills: Option<u32>,
    /// The dataflow check sampled loops (a clean result verified in part).
    pub checked_in_part: bool,
}

/// How one file went.
#[derive(Clone, Debug)]
pub struct FileOutcome {
    /// The input as given.
    pub file: String,
    /// Its exit code.
    pub code: u8,
    /// What `tusk run FILE` prints on standard output.
    pub stdout: String,
    /// What it prints on standard error.
    pub stderr: String,
    /// Table figures.
    pub row: Row,
    /// Wall time of the whole job, in microseconds.
    pub micros: u64,
    /// The JSON report (or the error) for `--json` batches.
    pub json: Value,
    /// The job panicked (a bug): its code is [`EXIT_FAILED`].
    pub internal_error: bool,
}

impl FileOutcome {
    /// `ok`, `failed`, `bad input`, `I/O error`, `internal error`.
    pub fn status(&self) -> &'static str {
        if self.internal_error {
            return "internal error";
        }
        match self.code {
            EXIT_OK => "ok",
            EXIT_FAILED => "failed",
            EXIT_BAD_INPUT => "bad input",
            _ => "I/O error",
        }
    }

    /// [`Self::status`] as the batch's lines show it: `ok, checked in
    /// part` for a clean run whose dataflow check sampled loops.
    pub fn status_text(&self) -> String {
        let s = self.status();
        if s == "ok" && self.row.checked_in_part {
            return "ok, checked in part".into();
        }
        s.into()
    }

    fn new(file: String) -> FileOutcome {
        FileOutcome {
            file,
            code: EXIT_OK,
            stdout: String::new(),
            stderr: String::new(),
            row: Row::default(),
            micros: 0,
            json: Value::Null,
            internal_error: false,
        }
    }
}

/// Reads and parses a module; the error is the exit code and the message.
pub fn load(path: &Path, from_json: bool) -> Result<Module, (u8, String)> {
    read(path, from_json, false, false).map(|(m, _, _)| m)
}

/// [`load`], with where a text input wrote each entity (`None` for JSON,
/// which carries no positions), for messages that point at it.
pub fn load_with_positions(
    path: &Path,
    from_json: bool,
) -> Result<(Module, Option<SourceMap>), (u8, String)> {
    read(path, from_json, true, false).map(|(m, map, _)| (m, map))
}

/// A module as [`read`] gives it: with its positions and the
/// [`digest`] of its bytes, each when asked for.
type Parsed = (Module, Option<SourceMap>, Option<u64>);

/// Reads and parses a module, with its positions when `positions`, and
/// when `hash` the [`digest`] of the bytes it was parsed from.
fn read(path: &Path, from_json: bool, positions: bool, hash: bool) -> Result<Parsed, (u8, String)> {
    let bytes = read_input(path)?;
    let hash = hash.then(|| digest(&bytes));
    let r = if is_json(path, from_json) {
        json::parse_json(&bytes)
            .map(|m| (m, None))
            .map_err(|e| e.to_string())
    } else if positions {
        text::parse_with_positions(&bytes)
            .map(|(m, map)| (m, Some(map)))
            .map_err(|e| e.to_string())
    } else {
        text::parse(&bytes)
            .map(|m| (m, None))
            .map_err(|e| e.to_string())
    };
    r.map(|(m, map)| (m, map, hash))
        .map_err(|e| malformed(path, e))
}

/// [`load`] of a text module with its comments ([`text::parse_with_comments`],
/// for `tusk fmt`), and the bytes it was read from.
pub fn load_with_comments(path: &Path) -> Result<(Module, text::Comments, Vec<u8>), (u8, String)> {
    let bytes = read_input(path)?;
    let (m, c) = text::parse_with_comments(&bytes).map_err(|e| malformed(path, e))?;
    Ok((m, c, bytes))
}

/// The size and modification time of the regular file at `path`, to tell
/// whether a second read sees the text the first one did; `None` for
/// anything that cannot be read twice (standard input, a pipe, a device).
fn file_stamp(path: &Path) -> Option<(u64, std::time::SystemTime)> {
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    Some((meta.len(), meta.modified().ok()?))
}

/// Whether the input at `path` is read as JSON (its name, or `--from-json`).
pub fn is_json(path: &Path, from_json: bool) -> bool {
    from_json || path.extension().is_some_and(|e| e == "json")
}

/// The bytes of an input, within the text-size limit.
fn read_input(path: &Path) -> Result<Vec<u8>, (u8, String)> {
    io::read_limited(path, text::MAX_TEXT_BYTES)
        .map_err(|e| (e.exit_code(EXIT_OK), format!("error: {e}\n")))
}

/// The message of a malformed input: the file, then the parser's
/// `line:column: what`.
fn malformed(path: &Path, e: impl std::fmt::Display) -> (u8, String) {
    (
        EXIT_BAD_INPUT,
        format!("error: {}:{e}\n", display_name(path)),
    )
}

/// Stages one output of `out` at `dest` (creating its directory first
/// when `out.create_dirs`); the error is the exit code and the message.
fn stage(
    out: &Outputs,
    dest: &Path,
    body: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<io::Staged, (u8, String)> {
    if out.create_dirs {
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                (
                    EXIT_IO,
                    format!(
                        "error: cannot write {}: cannot create directory {}: {e}\n",
                        dest.display(),
                        parent.display()
                    ),
                )
            })?;
        }
    }
    io::stage(dest, body).map_err(|e| (e.exit_code(EXIT_OK), format!("error: {e}\n")))
}

/// The one-line figures under a picture's title.
fn figures(r: &tusk_core::RunReport) -> String {
    let mut s = format!("optlevel {}", r.optlevel);
    for sp in [Space::Sb, Space::Psum] {
        let x = r.space(sp);
        if x.placed > 0 || x.lower_bound > 0 {
            s.push_str(&format!(
                " \u{b7} {} peak {} / bound {}, {}",
                sp.upper(),
                svg::bytes_label(x.peak),
                svg::bytes_label(x.lower_bound),
                run::count(x.spills as u64, "spill")
            ));
        }
    }
    s
}

/// [`run_file`] with a spinner on standard error when that is a terminal
/// and the run lasts longer than a second (a multi-million-instruction
/// file is otherwise silent for seconds): the file and the time elapsed,
/// cleared before anything is printed.
pub fn run_file_with_progress(path: &Path, cfg: &JobConfig, out: &Outputs) -> FileOutcome {
    if !std::io::stderr().is_terminal() {
        return run_file(path, cfg, out);
    }
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let name = display_name(path);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(move || {
            if wait.recv_timeout(std::time::Duration::from_secs(1)).is_ok() {
                return;
            }
            let bar = ProgressBar::new_spinner().with_elapsed(t0.elapsed());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed} tusk run {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(name);
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            let _ = wait.recv();
            bar.finish_and_clear();
        });
        let o = run_file(path, cfg, out);
        let _ = done.send(());
        o
    })
}

/// How messages, summaries and pictures name an input: its path, and
/// `<stdin>` for `-`.
pub fn display_name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

/// Runs one file: what `tusk run FILE` does, without printing.
pub fn run_file(path: &Path, cfg: &JobConfig, out: &Outputs) -> FileOutcome {
    let t0 = Instant::now();
    let file = display_name(path);
    let mut o = FileOutcome::new(file.clone());
    let code = job(path, cfg, out, &mut o);
    o.code = code;
    o.micros = t0.elapsed().as_micros() as u64;
    if code != EXIT_OK && o.json.is_null() {
        o.json = json!({"file": file, "status": o.status(), "error": o.stderr.trim_end()});
    }
    o
}

/// The module `job` read from `path` (whose stamp and [`digest`]
/// were `stamp` and `hash`), read and set up again: refused, with exit
/// code 3, when the file changed in between, since the dataflow check must
/// compare the result with the input the passes got.
fn read_again(
    path: &Path,
    cfg: &JobConfig,
    stamp: Option<(u64, std::time::SystemTime)>,
    hash: Option<u64>,
) -> Result<Module, (u8, String)> {
    let changed = || {
        (
            EXIT_IO,
            format!(
                "error: {}: changed while it was allocated, so the dataflow check cannot read the input the passes got; run again, or with --check-input copy\n",
                display_name(path)
            ),
        )
    };
    if stamp.is_none() || hash.is_none() || file_stamp(path) != stamp {
        return Err(changed());
    }
    let (mut again, _, h) = read(path, cfg.from_json, false, true).map_err(|_| changed())?;
    if h != hash {
        return Err(changed());
    }
    set_target(&mut again, cfg)?;
    // Only read by the check, as the copy it stands for.
    again.drop_name_index();
    Ok(again)
}

/// Applies the run's target settings to a module just read: `--target`
/// (keeping the module's own overrides), then each `--set`, then
/// `--max-regs`. The error is the exit code and the message.
fn set_target(m: &mut Module, cfg: &JobConfig) -> Result<(), (u8, String)> {
    let opts = &cfg.opts;
    if let Some(g) = opts.target {
        let overrides: Vec<(&str, u64)> = m.target.overrides().collect();
        let mut target = tusk_core::Target::preset(g);
        for (k, v) in overrides {
            target.set(k, v).map_err(|e| {
                (
                    EXIT_BAD_INPUT,
                    format!(
                        "error: --target {}: the module's override {k}={v}: {e}\n",
                        g.name()
                    ),
                )
            })?;
        }
        m.target = target;
    }
    for (k, v) in &cfg.target_overrides {
        m.target
            .set(k, *v)
            .map_err(|e| (EXIT_BAD_INPUT, format!("error: --set {k}={v}: {e}\n")))?;
    }
    if let Some(r) = opts.max_regs {
        m.target
            .set("max-regs", r as u64)
            .map_err(|e| (EXIT_BAD_INPUT, format!("error: --max-regs {r}: {e}\n")))?;
    }
    Ok(())
}

fn job(path: &Path, cfg: &JobConfig, out: &Outputs, o: &mut FileOutcome) -> u8 {
    let opts = &cfg.opts;
    // Positions cost a table of 8 bytes an instruction, filled while
    // parsing. A run whose success prints none (no --json, no --report)
    // parses without them and reads them only if it fails, from the input
    // again: inputs are never changed, so the text is the same, unless
    // another program changed the file (its size and time tell). An input
    // that cannot be read twice (standard input, a pipe) has no stamp and
    // is parsed with them.
    let stamp = file_stamp(path);
    let eager = cfg.json || out.report.is_some() || stamp.is_none();
    let rereads = cfg.verify && stamp.is_some_and(|(bytes, _)| cfg.check_input.rereads(bytes));
    let (mut m, mut map, hash) = match read(path, cfg.from_json, eager, rereads) {
        Ok(x) => x,
        Err((code, msg)) => {
            o.stderr.push_str(&msg);
            return code;
        }
    };
    if let Err((code, msg)) = set_target(&mut m, cfg) {
        o.stderr.push_str(&msg);
        return code;
    }
    let module_on_stdout = out.module.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if cfg.print_pipeline {
        // Standard output carries the JSON or the module alone under
        // --json or -o -.
        let t = run::pipeline_text(opts);
        if cfg.json || module_on_stdout {
            o.stderr.push_str(&t);
        } else {
            o.stdout.push_str(&t);
        }
    }
    let file = &o.file.clone();
    o.row.optlevel = Some(opts.optlevel);
    let input_placed: Vec<bool> = if cfg.explain {
        m.mems().space.keys().map(|v| m.is_placed(v)).collect()
    } else {
        Vec::new()
    };
    // The dataflow check's input read again after the passes (see
    // `run::CheckInput`): the same bytes, the same target settings.
    let reread = || read_again(path, cfg, stamp, hash);
    let reread: Option<run::Reread<'_>> = rereads.then_some(&reread);
    let allocated = run::allocate(&mut m, opts, cfg.verify, cfg.check_threads, reread);
    let report = match allocated {
        Ok(r) => r,
        Err(run::AllocateError::Input(code, msg)) => {
            o.stderr.push_str(&msg);
            o.json = json!({"file": file, "status": "failed", "error": msg.trim_end()});
            return code;
        }
        Err(run::AllocateError::Pipeline(e)) => {
            if !eager && file_stamp(path) == stamp {
                map = read(path, cfg.from_json, true, false)
                    .ok()
                    .and_then(|(_, map, _)| map);
            }
            let msg = e.display(&m).to_string();
            let pos = blame::position(map.as_ref(), e.blamed());
            o.stderr
                .push_str(&format!("error: {}: {msg}\n", blame::at(file, pos)));
            o.json = json!({"file": file, "status": "failed", "error": msg});
            blame::add_to(&mut o.json, pos);
            if cfg.explain {
                let src = explain::Source {
                    file,
                    map: map.as_ref(),
                };
                let x = explain::of_failure(&m, &e, src);
                if !cfg.json {
                    o.stderr.push_str(&x.render());
                }
                o.json["explain"] = x.to_json();
            }
            if cfg.map {
                // The error is printed above: the map's subtitle is the
                // optlevel alone.
                let chart = memmap::memory_map_window(
                    &m,
                    &format!("{file}: memory map at the failure"),
                    &format!("optlevel {}", opts.optlevel),
                    e.site().as_ref(),
                    cfg.window,
                );
                o.stderr.push_str(&textmap::render(&chart));
            }
            if let Some(p) = &out.svg {
                // The picture of the moment it failed: `m` is as the failing
                // pass left it.
                let site = e.site();
                let chart = memmap::memory_map_window(
                    &m,
                    &format!("{file}: allocation failed"),
                    &format!("optlevel {}: {msg}", opts.optlevel),
                    site.as_ref(),
                    cfg.window,
                );
                let doc = svg::render(&chart).to_string();
                let written = if p.as_os_str() == "-" {
                    o.stdout.push_str(&doc);
                    Ok(())
                } else {
                    stage(out, p, |w| w.write_all(doc.as_bytes())).and_then(|s| {
                        io::commit(vec![s]).map_err(|e| (EXIT_IO, format!("error: {e}\n")))
                    })
                };
                if let Err((code, msg)) = written {
                    o.stderr.push_str(&msg);
                    return code;
                }
                o.stderr.push_str(&format!(
                    "note: the memory map at the failure is in {}\n",
                    p.display()
                ));
            }
            if cfg.json {
                o.stdout.push_str(&format!("{:#}\n", o.json));
            }
            return EXIT_FAILED;
        }
    };
    let sp = |s: Space| {
        let x = report.space(s);
        (x.placed > 0 || x.lower_bound > 0).then_some((x.peak, x.lower_bound))
    };
    o.row.sb = sp(Space::Sb);
    o.row.psum = sp(Space::Psum);
    o.row.spills = Some(Space::ALL.iter().map(|&s| report.space(s).spills).sum());
    // Each DMA pass counts the whole module: before the first, after the
    // last.
    let ran: Vec<_> = report.dma.iter().flatten().filter(|d| !d.skipped).collect();
    if let (Some(first), Some(last)) = (ran.first(), ran.last()) {
        o.row.dma = Some((first.pre.descriptors, last.post.descriptors));
    }
    o.row.reg_spills = report.reg.as_ref().map(|g| g.spilled_registers);
    o.row.checked_in_part = report.dataflow.is_some_and(|d| d.sampled);
    let mut v = run::report_json(file, &m, &report, map.as_ref());
    // What --explain and --map add after the summary.
    // Under --json the explanation is the report's `explain` alone.
    let mut extra = String::new();
    if cfg.explain {
        let x = explain::of_run(&m, &report, &input_placed);
        if !cfg.json {
            extra.push_str(&x.render());
        }
        v["explain"] = x.to_json();
    }
    if cfg.map {
        let chart = memmap::memory_map_window(
            &m,
            &format!("{file}: memory map"),
            &figures(&report),
            None,
            cfg.window,
        );
        extra.push_str(&textmap::render(&chart));
    }
    // What goes to standard output once every file is in place.
    let mut stdout = String::new();
    {
        // Each output as a string (for `-`) and as a writer body (for a
        // file: the module's text is printed on every core and streamed).
        type Text<'a> = &'a dyn Fn() -> String;
        type Body<'a> = &'a dyn Fn(&mut dyn std::io::Write) -> std::io::Result<()>;
        let report_text = || serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        let svg_text = || {
            let chart = memmap::memory_map_window(
                &m,
                &format!("{file}: memory map"),
                &figures(&report),
                None,
                cfg.window,
            );
            svg::render(&chart).to_string()
        };
        let writes: [(&Option<PathBuf>, Text, Body); 3] = [
            (&out.report, &report_text, &|w| {
                w.write_all(report_text().as_bytes())
            }),
            (&out.module, &|| text::print(&m), &|w| {
                text::write_module(&m, w, text::printer_threads())
            }),
            (&out.svg, &svg_text, &|w| w.write_all(svg_text().as_bytes())),
        ];
        // Every file output staged in full, then all committed: a failure
        // anywhere leaves none of them (module doc).
        let mut staged = Vec::new();
        for (dest, text, write) in writes {
            if let Some(p) = dest {
                if p.as_os_str() == "-" {
                    // `-o -`: the module owns standard output (the summary
                    // goes to standard error below) so it pipes onward.
                    stdout.push_str(&text());
                    continue;
                }
                match stage(out, p, write) {
                    Ok(s) => staged.push(s),
                    Err((code, msg)) => {
                        o.stderr.push_str(&msg);
                        return code;
                    }
                }
            }
        }
        if let Err(e) = io::commit(staged) {
            o.stderr.push_str(&format!("error: {e}\n"));
            return e.exit_code(EXIT_OK);
        }
    }
    if cfg.json {
        stdout.push_str(&format!("{v:#}\n"));
        o.stderr.push_str(&extra);
    } else if module_on_stdout {
        o.stderr.push_str(&run::summary(file, &m, &report));
        o.stderr.push_str(&extra);
    } else {
        stdout.push_str(&run::summary(file, &m, &report));
        stdout.push_str(&extra);
    }
    o.stdout.push_str(&stdout);
    o.json = v;
    EXIT_OK
}

/// The module files under `paths`, each with the name its outputs get in
/// an output directory: a file as given (named by its file name), a
/// directory walked recursively for `*.tusk` and `*.json`, sorted (named by
/// the path below that directory, so `examples/placed/a.tusk` found under
/// `examples` writes `<dir>/placed/a.*`).
pub fn expand(paths: &[PathBuf]) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found).map_err(|e| format!("error: {}: {e}", p.display()))?;
            for f in found {
                let rel = f
                    .strip_prefix(p)
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|_| f.clone());
                out.push((f, rel));
            }
        } else {
            let name = p
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_else(|| p.clone());
            out.push((p.clone(), name));
        }
    }
    Ok(out)
}

/// The `*.tusk` and `*.json` files below `dir`, in path order. Iterative
/// (an explicit stack, so the directory depth cannot exhaust the call
/// stack) and not following symbolic links to directories (so a link loop
/// cannot make it endless).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let first = out.len();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "tusk" || x == "json") {
                out.push(p);
            }
        }
    }
    // Component-wise path order: the order of a sorted depth-first walk.
    out[first..].sort();
    Ok(())
}

/// Output directories of a batch: `-o`, `--report`, `--svg` must each name
/// a directory (created when missing).
#[derive(Clone, Debug, Default)]
pub struct OutputDirs {
    /// Allocated modules, `<dir>/<stem>.tusk`.
    pub module: Option<PathBuf>,
    /// Reports, `<dir>/<stem>.json`.
    pub report: Option<PathBuf>,
    /// Pictures, `<dir>/<stem>.svg`.
    pub svg: Option<PathBuf>,
}

impl OutputDirs {
    fn prepare(&self) -> Result<(), (u8, String)> {
        for (flag, d) in [
            ("-o", &self.module),
            ("--report", &self.report),
            ("--svg", &self.svg),
        ] {
            let Some(d) = d else { continue };
            if d.as_os_str() == "-" {
                return Err((
                    EXIT_BAD_INPUT,
                    format!(
                        "error: with several inputs, {flag} names a directory, not standard output"
                    ),
                ));
            }
            if d.exists() && !d.is_dir() {
                return Err((
                    EXIT_BAD_INPUT,
                    format!(
                        "error: {flag} {}: with several inputs, {flag} names a directory",
                        d.display()
                    ),
                ));
            }
            std::fs::create_dir_all(d).map_err(|e| {
                (
                    EXIT_IO,
                    format!(
                        "error: {flag} {}: cannot create the directory: {e}",
                        d.display()
                    ),
                )
            })?;
        }
        Ok(())
    }

    /// The outputs of an input named `rel` (see [`expand`]); the
    /// subdirectories `rel` needs are created when the outputs are written.
    fn for_file(&self, rel: &Path) -> Outputs {
        let at =
            |d: &Option<PathBuf>, ext: &str| d.as_ref().map(|d| d.join(rel).with_extension(ext));
        Outputs {
            module: at(&self.module, "tusk"),
            report: at(&self.report, "json"),
            svg: at(&self.svg, "svg"),
            create_dirs: true,
        }
    }

    fn any(&self) -> bool {
        self.module.is_some() || self.report.is_some() || self.svg.is_some()
    }
}

fn cell_pair(x: Option<(u64, u64)>) -> String {
    x.map(|(a, b)| format!("{a}/{b}"))
        .unwrap_or_else(|| "-".into())
}

fn cell<T: ToString>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// The batch table: one row per file, columns aligned, then a count line.
pub fn table(outcomes: &[FileOutcome]) -> String {
    let head = [
        "file",
        "opt",
        "SB peak/bound",
        "PSUM peak/bound",
        "spills",
        "DMA desc",
        "REG spills",
        "ms",
        "status",
    ];
    let rows: Vec<[String; 9]> = outcomes
        .iter()
        .map(|o| {
            [
                o.file.clone(),
                cell(o.row.optlevel),
                cell_pair(o.row.sb),
                cell_pair(o.row.psum),
                cell(o.row.spills),
                o.row
                    .dma
                    .map(|(a, b)| format!("{a}->{b}"))
                    .unwrap_or_else(|| "-".into()),
                cell(o.row.reg_spills),
                format!("{:.1}", o.micros as f64 / 1000.0),
                o.status_text(),
            ]
        })
        .collect();
    let mut w = head.map(|h| h.len());
    for r in &rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (k, c) in cells.iter().enumerate() {
            let pad = w[k] - c.chars().count();
            if k == 0 || k == cells.len() - 1 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
            s.push_str("  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(&head.map(String::from));
    s.push_str(&line(&w.map(|n| "-".repeat(n))));
    for r in &rows {
        s.push_str(&line(r));
    }
    let count = |c: u8| outcomes.iter().filter(|o| o.code == c).count();
    s.push_str(&format!(
        "{} files: {} ok, {} failed, {} bad input, {} I/O errors\n",
        outcomes.len(),
        count(EXIT_OK),
        count(EXIT_FAILED),
        count(EXIT_BAD_INPUT),
        outcomes.len() - count(EXIT_OK) - count(EXIT_FAILED) - count(EXIT_BAD_INPUT)
    ));
    let partial = outcomes.iter().filter(|o| o.row.checked_in_part).count();
    if partial > 0 {
        s.push_str(&format!(
            "{partial} of them checked in part: the dataflow check sampled their loops at \
             iterations 0, 1 and the last (`tusk run FILE` alone names them; \
             --dataflow-executions all walks every iteration)\n"
        ));
    }
    s
}

/// The exit code of a batch (module doc).
pub fn batch_code(outcomes: &[FileOutcome]) -> u8 {
    worst_code(outcomes.iter().map(|o| o.code))
}

/// The exit code of several jobs that ended with `codes`: 2 if any input
/// was malformed, else 3 (I/O) if any, else 1 if any failed, else 0.
pub fn worst_code(codes: impl Iterator<Item = u8> + Clone) -> u8 {
    let has = |c: u8| codes.clone().any(|x| x == c);
    if has(EXIT_BAD_INPUT) {
        EXIT_BAD_INPUT
    } else if codes.clone().any(|x| x >= EXIT_IO) {
        EXIT_IO
    } else if has(EXIT_FAILED) {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// Runs every input in parallel, reporting progress on standard error,
/// and prints the table (or, with `--json`, a JSON array) on standard
/// output. Returns the exit code.
pub fn run_batch(paths: &[PathBuf], cfg: &JobConfig, dirs: &OutputDirs) -> u8 {
    if paths.iter().any(|p| p.as_os_str() == "-") {
        console::error("standard input (`-`) cannot be one of several inputs");
        return EXIT_BAD_INPUT;
    }
    let files = match expand(paths) {
        Ok(f) => f,
        Err(msg) => {
            console::eprint(&format!("{msg}\n"));
            return EXIT_IO;
        }
    };
    if files.is_empty() {
        console::error("no *.tusk or *.json file among the inputs");
        return EXIT_BAD_INPUT;
    }
    if dirs.any() {
        if let Err((code, msg)) = dirs.prepare() {
            console::eprint(&format!("{msg}\n"));
            return code;
        }
        let mut seen: HashMap<PathBuf, &Path> = HashMap::new();
        for (f, rel) in &files {
            if let Some(prev) = seen.insert(rel.with_extension(""), f) {
                console::error(format_args!(
                    "{} and {} would both write `{}.*` in the output directory",
                    prev.display(),
                    f.display(),
                    rel.with_extension("").display()
                ));
                return EXIT_BAD_INPUT;
            }
        }
        // No output of any file may be an input of the batch.
        let inputs: HashMap<io::FileId, &Path> = files
            .iter()
            .map(|(f, _)| (io::file_id(f), f.as_path()))
            .collect();
        for (_, rel) in &files {
            let out = dirs.for_file(rel);
            for (flag, p) in out.flags(false) {
                if let Some(input) = inputs.get(&io::file_id(p)) {
                    console::error(format_args!(
                        "{flag} would write {} over the input file {} (inputs are never modified)",
                        p.display(),
                        input.display()
                    ));
                    return EXIT_BAD_INPUT;
                }
            }
        }
    }
    let n = files.len();
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = ProgressBar::new(n as u64);
        b.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    });
    let done = AtomicUsize::new(0);
    let outcomes: Vec<FileOutcome> = files
        .par_iter()
        .map(|(f, rel)| {
            let o = run_file_guarded(f, cfg, &dirs.for_file(rel));
            let k = done.fetch_add(1, Ordering::Relaxed) + 1;
            let line = format!(
                "[{k}/{n}] {}: {} ({:.1} ms)",
                o.file,
                o.status_text(),
                o.micros as f64 / 1000.0
            );
            match &bar {
                Some(b) => {
                    if !o.stderr.is_empty() {
                        b.println(o.stderr.trim_end());
                    }
                    b.set_message(o.file.clone());
                    b.inc(1);
                }
                None => {
                    // One write per file so lines of parallel jobs do not mix.
                    console::eprint(&format!("{}{line}\n", o.stderr));
                }
            }
            o
        })
        .collect();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let text = if cfg.json {
        let all: Vec<Value> = outcomes.iter().map(|o| o.json.clone()).collect();
        format!("{:#}\n", Value::Array(all))
    } else {
        table(&outcomes)
    };
    console::print_and_finish(batch_code(&outcomes), &text)
}

/// [`run_file`], with a panic of the job (a bug) caught and reported as
/// that file's internal error, so the other files of a batch still finish.
/// Its staged outputs are dropped while unwinding: nothing of it is written.
fn run_file_guarded(path: &Path, cfg: &JobConfig, out: &Outputs) -> FileOutcome {
    let t0 = Instant::now();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_file(path, cfg, out))) {
        Ok(o) => o,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let file = path.display().to_string();
            let mut o = FileOutcome::new(file.clone());
            o.code = EXIT_FAILED;
            o.internal_error = true;
            o.micros = t0.elapsed().as_micros() as u64;
            o.stderr = format!(
                "error: {file}: internal error (a bug in tusk, please report it): {what}\n"
            );
            o.json = json!({"file": file, "status": o.status(), "error": o.stderr.trim_end()});
            o
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn an_input_changed_between_the_two_reads_is_refused() {
        let dir = std::env::temp_dir().join(format!("tusk-read-again-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.tusk");
        let text = "sb %x [128 x 64]\nfunc @f {\nentry:\n  %x = memset 0\n}\n";
        write(&path, text);
        let cfg = JobConfig {
            opts: Options {
                max_regs: Some(40),
                ..Options::default()
            },
            ..JobConfig::default()
        };
        let stamp = file_stamp(&path);
        let (mut m, _, hash) = read(&path, false, false, true).unwrap();
        set_target(&mut m, &cfg).unwrap();
        // Unchanged: the same module, with the run's target settings.
        let again = read_again(&path, &cfg, stamp, hash).unwrap();
        assert_eq!(again.target.get("max-regs"), Some(40));
        assert_eq!(text::print(&again), text::print(&m));
        let refused = |r: Result<Module, (u8, String)>| {
            let (code, msg) = r.expect_err("refused");
            assert_eq!(code, EXIT_IO);
            assert!(
                msg.contains("m.tusk: changed while it was allocated"),
                "{msg}"
            );
        };
        // The same length and modification time, other bytes: the hash
        // tells them apart.
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        write(&path, &text.replace("memset 0", "memset 1"));
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert_eq!(file_stamp(&path), stamp);
        refused(read_again(&path, &cfg, stamp, hash));
        // Another length: the stamp tells them apart before any read.
        write(&path, &text.replace("memset 0", "memset 10"));
        refused(read_again(&path, &cfg, stamp, hash));
        // An input that cannot be read twice is never read again.
        write(&path, text);
        refused(read_again(&path, &cfg, None, hash));
        // Nor one read without its hash.
        refused(read_again(&path, &cfg, file_stamp(&path), None));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
