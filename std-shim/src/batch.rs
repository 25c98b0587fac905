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

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde_json::{json, Value};
use tusk_core::ir::{Module, Space};
use tusk_core::pipeline::Options;

use crate::{io, json, memmap, run, svg, text};

/// Success.
pub const EXIT_OK: u8 = 0;
/// Well-formed input, failed job.
pub const EXIT_FAILED: u8 = 1;
/// Bad input or usage.
pub const EXIT_BAD_INPUT: u8 = 2;
/// A file could not be read or written.
pub const EXIT_IO: u8 = 3;

/// What every file of a run gets: the normalized options and the flags
/// that shape output.
#[derive(Clone, Debug, Default)]
pub struct JobConfig {
    /// Normalized pipeline options.
    pub opts: Options,
    /// Read every input as JSON.
    pub from_json: bool,
    /// Print the pass list before running.
    pub print_pipeline: bool,
    /// Print the JSON report to standard output instead of the summary.
    pub json: bool,
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
}

impl FileOutcome {
    /// `ok`, `failed`, `bad input`, `I/O error`.
    pub fn status(&self) -> &'static str {
        match self.code {
            EXIT_OK => "ok",
            EXIT_FAILED => "failed",
            EXIT_BAD_INPUT => "bad input",
            _ => "I/O error",
        }
    }
}

/// Reads and parses a module; the error is the exit code and the message.
pub fn load(path: &Path, from_json: bool) -> Result<Module, (u8, String)> {
    let bytes = io::read_limited(path, text::MAX_TEXT_BYTES).map_err(|e| {
        let code = match e {
            io::IoError::TooLarge { .. } => EXIT_BAD_INPUT,
            _ => EXIT_IO,
        };
        (code, format!("error: {e}\n"))
    })?;
    let as_json = from_json || path.extension().is_some_and(|e| e == "json");
    let r = if as_json {
        json::parse_json(&bytes).map_err(|e| e.to_string())
    } else {
        text::parse(&bytes).map_err(|e| e.to_string())
    };
    r.map_err(|e| (EXIT_BAD_INPUT, format!("error: {}:{e}\n", path.display())))
}

/// Writes `bytes` atomically to `out`, refusing to overwrite `input`.
fn write_file(out: &Path, input: &Path, bytes: &[u8]) -> Result<(), (u8, String)> {
    write_file_with(out, input, &|w| w.write_all(bytes))
}

/// [`write_file`] of what `body` writes (streamed into the temporary file).
fn write_file_with(
    out: &Path,
    input: &Path,
    body: &dyn Fn(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), (u8, String)> {
    let same = match (std::fs::canonicalize(out), std::fs::canonicalize(input)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    if same {
        return Err((
            EXIT_BAD_INPUT,
            format!(
                "error: refusing to overwrite the input file {} (inputs are never modified)\n",
                input.display()
            ),
        ));
    }
    io::write_atomic_with(out, body).map_err(|e| (EXIT_IO, format!("error: {e}\n")))
}

/// The one-line figures under a picture's title.
fn figures(r: &tusk_core::pipeline::RunReport) -> String {
    let mut s = format!("optlevel {}", r.optlevel);
    for sp in [Space::Sb, Space::Psum] {
        let x = r.space(sp);
        if x.placed > 0 || x.lower_bound > 0 {
            s.push_str(&format!(
                " \u{b7} {} peak {} / bound {}, {} spills",
                sp.upper(),
                svg::bytes_label(x.peak),
                svg::bytes_label(x.lower_bound),
                x.spills
            ));
        }
    }
    s
}

/// Runs one file: what `tusk run FILE` does, without printing.
pub fn run_file(path: &Path, cfg: &JobConfig, out: &Outputs) -> FileOutcome {
    let t0 = Instant::now();
    let file = path.display().to_string();
    let mut o = FileOutcome {
        file: file.clone(),
        code: EXIT_OK,
        stdout: String::new(),
        stderr: String::new(),
        row: Row::default(),
        micros: 0,
        json: Value::Null,
    };
    let code = job(path, cfg, out, &mut o);
    o.code = code;
    o.micros = t0.elapsed().as_micros() as u64;
    if code != EXIT_OK && o.json.is_null() {
        o.json = json!({"file": file, "status": o.status(), "error": o.stderr.trim_end()});
    }
    o
}

fn job(path: &Path, cfg: &JobConfig, out: &Outputs, o: &mut FileOutcome) -> u8 {
    let opts = &cfg.opts;
    let mut m = match load(path, cfg.from_json) {
        Ok(m) => m,
        Err((code, msg)) => {
            o.stderr.push_str(&msg);
            return code;
        }
    };
    if let Some(g) = opts.target {
        let overrides: Vec<(&str, u64)> = m.target.overrides().collect();
        m.target = tusk_core::Target::preset(g);
        for (k, v) in overrides {
            if let Err(e) = m.target.set(k, v) {
                o.stderr.push_str(&format!(
                    "error: --target {}: the module's override {k}={v}: {e}\n",
                    g.name()
                ));
                return EXIT_BAD_INPUT;
            }
        }
    }
    if let Some(r) = opts.max_regs {
        if let Err(e) = m.target.set("max-regs", r as u64) {
            o.stderr.push_str(&format!("error: --max-regs {r}: {e}\n"));
            return EXIT_BAD_INPUT;
        }
    }
    if cfg.print_pipeline {
        // Standard output carries the JSON alone under --json.
        let t = run::pipeline_text(opts);
        if cfg.json {
            o.stderr.push_str(&t);
        } else {
            o.stdout.push_str(&t);
        }
    }
    let file = &o.file.clone();
    o.row.optlevel = Some(opts.optlevel);
    let report = match run::allocate(&mut m, opts) {
        Ok(r) => r,
        Err(e) => {
            let msg = e.display(&m).to_string();
            o.stderr.push_str(&format!("error: {file}: {msg}\n"));
            o.json = json!({"file": file, "status": "failed", "error": msg});
            if let Some(p) = &out.svg {
                // The picture of the moment it failed: `m` is as the failing
                // pass left it.
                let site = e.site();
                let chart = memmap::memory_map(
                    &m,
                    &format!("{file}: allocation failed"),
                    &format!("optlevel {}: {msg}", opts.optlevel),
                    site.as_ref(),
                );
                let doc = svg::render(&chart).to_string();
                if let Err((code, msg)) = write_file(p, path, doc.as_bytes()) {
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
    let ran: Vec<_> = report.dma.iter().flatten().filter(|d| !d.skipped).collect();
    if !ran.is_empty() {
        o.row.dma = Some((
            ran.iter().map(|d| d.pre.descriptors).sum(),
            ran.iter().map(|d| d.post.descriptors).sum(),
        ));
    }
    o.row.reg_spills = report.reg.as_ref().map(|g| g.spilled_registers);
    let v = run::report_json(file, &m, &report);
    {
        // Each output as a string (for `-`) and as a writer body (for a
        // file: the module's text is printed on every core and streamed).
        type Text<'a> = &'a dyn Fn() -> String;
        type Body<'a> = &'a dyn Fn(&mut dyn std::io::Write) -> std::io::Result<()>;
        let report_text = || serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        let svg_text = || {
            let chart =
                memmap::memory_map(&m, &format!("{file}: memory map"), &figures(&report), None);
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
        for (dest, body, write) in writes {
            if let Some(p) = dest {
                if p.as_os_str() == "-" {
                    // `-o -`: the module owns standard output (the summary
                    // goes to standard error below) so it pipes onward.
                    o.stdout.push_str(&body());
                    continue;
                }
                if let Err((code, msg)) = write_file_with(p, path, write) {
                    o.stderr.push_str(&msg);
                    return code;
                }
            }
        }
    }
    let module_on_stdout = out.module.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if cfg.json {
        o.stdout.push_str(&format!("{v:#}\n"));
    } else if module_on_stdout {
        o.stderr.push_str(&run::summary(file, &m, &report));
    } else {
        o.stdout.push_str(&run::summary(file, &m, &report));
    }
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
            if d.exists() && !d.is_dir() {
                return Err((
                    EXIT_BAD_INPUT,
                    format!(
                        "error: {flag} {}: with several inputs, {flag} names a directory",
                        d.display()
                    ),
                ));
            }
            std::fs::create_dir_all(d)
                .map_err(|e| (EXIT_IO, format!("error: {flag} {}: {e}", d.display())))?;
        }
        Ok(())
    }

    /// The outputs of an input named `rel` (see [`expand`]); creates the
    /// subdirectories `rel` needs.
    fn for_file(&self, rel: &Path) -> Result<Outputs, (u8, String)> {
        let at = |d: &Option<PathBuf>, ext: &str| -> Result<Option<PathBuf>, (u8, String)> {
            let Some(d) = d else { return Ok(None) };
            let p = d.join(rel).with_extension(ext);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| (EXIT_IO, format!("error: {}: {e}\n", parent.display())))?;
            }
            Ok(Some(p))
        };
        Ok(Outputs {
            module: at(&self.module, "tusk")?,
            report: at(&self.report, "json")?,
            svg: at(&self.svg, "svg")?,
        })
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
                o.status().to_string(),
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
    s
}

/// The exit code of a batch (module doc).
pub fn batch_code(outcomes: &[FileOutcome]) -> u8 {
    let has = |c: u8| outcomes.iter().any(|o| o.code == c);
    if has(EXIT_BAD_INPUT) {
        EXIT_BAD_INPUT
    } else if outcomes.iter().any(|o| o.code >= EXIT_IO) {
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
        eprintln!("error: standard input (`-`) cannot be one of several inputs");
        return EXIT_BAD_INPUT;
    }
    let files = match expand(paths) {
        Ok(f) => f,
        Err(msg) => {
            eprintln!("{msg}");
            return EXIT_IO;
        }
    };
    if files.is_empty() {
        eprintln!("error: no *.tusk or *.json file among the inputs");
        return EXIT_BAD_INPUT;
    }
    if dirs.any() {
        if let Err((code, msg)) = dirs.prepare() {
            eprintln!("{msg}");
            return code;
        }
        let mut seen: HashMap<PathBuf, &Path> = HashMap::new();
        for (f, rel) in &files {
            if let Some(prev) = seen.insert(rel.with_extension(""), f) {
                eprintln!(
                    "error: {} and {} would both write `{}.*` in the output directory",
                    prev.display(),
                    f.display(),
                    rel.with_extension("").display()
                );
                return EXIT_BAD_INPUT;
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
            let o = match dirs.for_file(rel) {
                Ok(out) => run_file(f, cfg, &out),
                Err((code, msg)) => FileOutcome {
                    file: f.display().to_string(),
                    code,
                    stdout: String::new(),
                    stderr: msg.clone(),
                    row: Row::default(),
                    micros: 0,
                    json: json!({"file": f.display().to_string(), "status": "I/O error", "error": msg.trim_end()}),
                },
            };
            let k = done.fetch_add(1, Ordering::Relaxed) + 1;
            let line = format!(
                "[{k}/{n}] {}: {} ({:.1} ms)",
                o.file,
                o.status(),
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
                    eprintln!("{}{line}", o.stderr);
                }
            }
            o
        })
        .collect();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if cfg.json {
        let all: Vec<Value> = outcomes.iter().map(|o| o.json.clone()).collect();
        println!("{:#}", Value::Array(all));
    } else {
        print!("{}", table(&outcomes));
    }
    batch_code(&outcomes)
}
