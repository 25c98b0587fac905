//! The `tusk` driver.
//!
//! Exit codes (docs/FORMAT.md, README): 0 success; 1 the input is well formed
//! but the job failed (verifier findings, allocation failed); 2 bad input or
//! usage (malformed file with line:column, invalid options, limits exceeded,
//! outputs that collide); 3 I/O error (standard output included; a closed
//! pipe is not one, see `tusk_shim::console`); 128 + N when signal N
//! (SIGINT, SIGTERM, SIGHUP) stopped the run, its temporary files removed.
//! Outputs are written atomically and only on success (except `tusk run
//! --svg`, which draws a failed allocation too); inputs are only read,
//! except by `tusk fmt --write`, which replaces a file (atomically) by its
//! canonical text.
//! `tusk run` over several files exits with the worst code of its files
//! (2 before 3 before 1; see `tusk_shim::batch`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tusk_core::ir::{Module, Space, NO_LANE};
use tusk_core::options::{Allocator, DmaAffinity, Rotation, SpillStrategy};
use tusk_core::target::Generation;
use tusk_core::verify::{Scope, Verifier};
use tusk_core::Options;
use tusk_shim::batch::{self, JobConfig, OutputDirs, Outputs};
use tusk_shim::console::{self, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use tusk_shim::{blame, text};

#[derive(Parser, Debug)]
#[command(
    name = "tusk",
    version,
    about = "tusk: the allocation back end for Trainium-class tensor accelerators",
    after_help = "Exit codes: 0 success, 1 findings / job failed, 2 bad input or usage, 3 I/O error, 128+N stopped by signal N."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse a module and verify it (exit 0 clean, 1 findings, 2 bad input).
    Check(CheckArgs),
    /// Print a module in canonical text with its comments (or JSON), or
    /// rewrite files in place (`--write`), or check them (`--check`).
    Fmt(tusk_shim::fmt::FmtArgs),
    /// Print counts, and per space the live-interval summary and lower bounds.
    Info(InfoArgs),
    /// Allocate a module: the pipeline the optlevel selects, then the checks.
    Run(RunArgs),
    /// Write a synthetic, realistic module of any size.
    Gen(tusk_shim::gen::GenArgs),
    /// Color a DIMACS graph with the register colorer's core.
    Color(tusk_shim::color::ColorArgs),
    /// Place the buffers of a MiniMalloc CSV (1-D dynamic storage allocation).
    Dsa(tusk_shim::dsa::DsaArgs),
    /// Allocate the registers of CFG functions (regalloc-vregs-only-v1 JSON).
    Regalloc(tusk_shim::regalloc::RegallocArgs),
    /// Print a shell completion script (e.g. `tusk completions bash >
    /// ~/.local/share/bash-completion/completions/tusk`).
    Completions(CompletionsArgs),
}

#[derive(Args, Debug)]
struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// The input file and its format.
#[derive(Args, Debug)]
struct Input {
    /// The module (`-` for standard input). Files ending in `.json` are read
    /// as JSON.
    file: PathBuf,
    /// Read the input as JSON whatever its name.
    #[arg(long)]
    from_json: bool,
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[command(flatten)]
    input: Input,
    /// Print one JSON object instead of the text: `file`, `status` (`ok`,
    /// `findings`, `structure`), `checked` (the spaces verified), `total`,
    /// `findings[]` (`kind`, `message`, `tensors`, `registers`, and `line`,
    /// `col` of the first entity it blames when the text wrote it) and
    /// `dropped` (findings beyond those kept).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct InfoArgs {
    #[command(flatten)]
    input: Input,
    /// Print the same facts as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `KEY=VALUE` of `--set`: the key as written (checked against the target
/// when it is applied, so the message lists the known keys), the value a
/// number.
fn parse_override(s: &str) -> Result<(String, u64), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not KEY=VALUE (e.g. sb-bytes=65536)"))?;
    let v = v
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("`{v}` in `{s}` is not a non-negative integer"))?;
    Ok((k.trim().to_string(), v))
}

/// Every flag of `tusk run` (README).
#[derive(Args, Debug)]
struct RunArgs {
    /// The module (`-` for standard input; files ending in `.json` are read
    /// as JSON). Several files or a directory (searched recursively for
    /// `*.tusk` and `*.json`) run in parallel and end with a table.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Read the inputs as JSON whatever their names.
    #[arg(long)]
    from_json: bool,
    /// Optimization level (the selection map; `--print-pipeline` lists
    /// each level's passes).
    #[arg(long, default_value = "2", value_parser = optlevel_parser())]
    optlevel: u8,
    /// Memory allocator family (default: the optlevel's; `exact` is the
    /// exact search, beyond the reference).
    #[arg(long, value_parser = ["coloring", "lsa", "exact"])]
    allocator: Option<String>,
    /// Use the SMT allocation pipeline (forces optlevel 7).
    #[arg(long)]
    smt_allocation: bool,
    /// Loops stay in the back end (optlevel 2 → 6, anything else → 8).
    #[arg(long)]
    loops_in_backend: bool,
    /// Virtual NeuronCores sharing the program (LSA, opt0 and opt8 need 1).
    #[arg(long, default_value_t = 1)]
    vnc_count: u32,
    /// How eagerly the colorer inserts spill/reload DMAs, -1..=2.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    gca_dma_optlevel: i8,
    /// Target preset; default: the module's.
    #[arg(long, value_parser = ["trn1", "inf2", "trn2", "trn3"])]
    target: Option<String>,
    /// Override MaxRegNumPerEngine (scalar register lanes).
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..=4096))]
    max_regs: Option<u16>,
    /// Override one number of the target, as the module's `target` line
    /// does (`sb-bytes=65536`; keys: max-regs, psum-banks, sb-bytes,
    /// psum-span, dram-bytes, coalesce-budget, coalesce-count,
    /// coalesce-elements). Repeatable; applied after `--target` and the
    /// module's own overrides, before `--max-regs`.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_override)]
    set: Vec<(String, u64)>,
    /// Write the allocated module here (atomically); `-` writes it to
    /// standard output and the summary to standard error; with several
    /// inputs, a directory that gets `<stem>.tusk` per input.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
    /// Write the run report as JSON to this file (several inputs: a
    /// directory of `<stem>.json`).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Draw the memory map as SVG to this file (several inputs: a directory
    /// of `<stem>.svg`); a failed allocation draws the moment it failed.
    /// An inset under the map zooms on each space's peak or the failure
    /// when the map alone does not show it readably.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Print the JSON report on standard output instead of the summary
    /// (several inputs: a JSON array instead of the table).
    #[arg(long)]
    json: bool,
    /// Draw only program positions START..END (END excluded) in `--svg`
    /// and `--map`: a readable map of part of a big module, or a close
    /// look at a failure.
    #[arg(long, value_name = "START:END", value_parser = parse_window)]
    svg_window: Option<(u64, u64)>,
    /// After the summary, explain the run: why each tensor sits where it
    /// does, every spill with its cost, what the DMA passes did; on
    /// failure, what is live where it failed, how many more bytes per
    /// partition it needs and where, and which tensors could be spilled.
    /// With --json, the report's `explain` instead.
    #[arg(long)]
    explain: bool,
    /// After the summary (or the error), the memory map as text: program
    /// order across, addresses up, around the peak (or the failure) of
    /// each space, with a legend.
    #[arg(long)]
    map: bool,
    /// Print the selected pipeline.
    #[arg(long)]
    print_pipeline: bool,
    /// Skip the independent verifier after allocation.
    #[arg(long)]
    no_verify: bool,
    /// Threads of the dataflow check: 1, or 2 (the original program's walk
    /// on a second thread, the same findings). Default: 2 when the machine
    /// has a second core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=2))]
    check_threads: Option<u8>,
    /// Where the dataflow check's input comes from: `copy` (a copy of the
    /// module taken before the passes and held through them), `reread`
    /// (the file read again after the passes, once their storage is gone:
    /// a lower memory peak for one more parse; the file must not change
    /// meanwhile) or `auto` (reread inputs of 256 MiB and more, copy
    /// smaller ones). Standard input, which cannot be read twice, is
    /// always copied.
    #[arg(long, default_value = "auto", value_name = "auto|copy|reread")]
    check_input: String,
    /// Executions the dataflow check may walk through the loops that
    /// access patterns move with (each iteration reads other cells) before
    /// it samples them instead: iterations 0, 1 and the last, a partial
    /// check that the summary and the report say was sampled. `all` walks
    /// every iteration; the check's time grows with the count. Default:
    /// 33554432 (2^25).
    #[arg(long, value_name = "N|all", value_parser = parse_walk_limit)]
    dataflow_executions: Option<u64>,
    /// Storage budget of the run: bytes, or with a suffix K, M, G (powers
    /// of 1024). Methods whose storage grows faster than the input (exact
    /// search, dense interference graphs) are skipped when they do not fit
    /// it, and the summary says so. Below 64 MiB, where SB must spill, the
    /// SB allocators do not run beside each other and the linear scan's
    /// restarts get a share of their headroom in proportion (their
    /// headroom would take most of such a budget). Default: 8 × the
    /// module's own storage, at least 1 GiB, and at least 2 × the module's
    /// storage past what the passes and checks reserve.
    #[arg(long, value_name = "BYTES", value_parser = tusk_shim::io::parse_bytes)]
    max_memory: Option<u64>,
    /// Address rotation after allocation: `off` (the allocators' placements),
    /// `psum` (successive PSUM tiles go round the free banks) or `all`
    /// (PSUM, and SB tiles whose shared cells cost the schedule model's
    /// makespan move to cells of their own, the peak growing at most 5%).
    #[arg(long, default_value = "off", value_name = "off|psum|all")]
    rotation: String,
    /// DMA-aware placement: `off` (the allocators minimize the peak only)
    /// or `on` (the SB colorer places DMA pairs whose DRAM sides abut side
    /// by side, when that costs no spill and the peak stays within 5%, so
    /// the DMA passes can merge them; optlevels 2, 3 and 6).
    #[arg(long, default_value = "off", value_name = "off|on")]
    dma_affinity: String,
    /// Where the input needs more SB than there is, the order in which the
    /// allocators try their splits: `ranges` (live-range splits first, a
    /// tensor split at every access last), `access` (the split at every
    /// access first) or `best` (both, keeping the one whose spills cost
    /// fewer DMA cycles).
    #[arg(long, default_value = "best", value_name = "best|ranges|access")]
    spill_strategy: String,
}

/// `--svg-window START:END`: two positions, START below END.
fn parse_window(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not START:END (two positions, e.g. 100:400)"))?;
    let num = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{x}` in `{s}` is not a position (a whole number)"))
    };
    let (a, b) = (num(a)?, num(b)?);
    if a >= b {
        return Err(format!("START {a} must be below END {b}"));
    }
    Ok((a, b))
}

/// `--dataflow-executions N|all`: a count of executions (`all`: no limit).
fn parse_walk_limit(s: &str) -> Result<u64, String> {
    if s == "all" {
        return Ok(u64::MAX);
    }
    s.parse::<u64>()
        .map_err(|_| format!("`{s}` is not a count of executions (a whole number) or `all`"))
}

/// `--optlevel`: one of [`tusk_core::options::OPTLEVELS`], listed in
/// `--help` and in the error for any other value.
fn optlevel_parser() -> impl clap::builder::TypedValueParser<Value = u8> {
    use clap::builder::TypedValueParser;
    const NAMES: [&str; 7] = ["0", "1", "2", "3", "6", "7", "8"];
    clap::builder::PossibleValuesParser::new(NAMES).map(|s| {
        let level = s.parse::<u8>().unwrap_or(u8::MAX);
        debug_assert!(tusk_core::options::OPTLEVELS.contains(&level));
        level
    })
}

fn main() -> ExitCode {
    tusk_shim::heap::return_large_blocks_on_free();
    let cli = Cli::parse();
    tusk_shim::tempfiles::install_signal_cleanup();
    let code = match &cli.command {
        Command::Check(a) => check(a),
        Command::Fmt(a) => tusk_shim::fmt::run(a),
        Command::Info(a) => info(a),
        Command::Run(a) => run(a),
        Command::Gen(a) => tusk_shim::gen::run(a),
        Command::Color(a) => tusk_shim::color::run(a),
        Command::Dsa(a) => tusk_shim::dsa::run(a),
        Command::Regalloc(a) => tusk_shim::regalloc::run(a),
        Command::Completions(a) => completions(a),
    };
    ExitCode::from(code)
}

/// `tusk completions SHELL`: the script clap derives from the flags above,
/// on standard output.
fn completions(a: &CompletionsArgs) -> u8 {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "tusk", &mut script);
    console::print_and_finish(EXIT_OK, &String::from_utf8_lossy(&script))
}

/// Reads and parses the input; on failure prints the error and returns the
/// exit code.
fn load(input: &Input) -> Result<Module, u8> {
    batch::load(&input.file, input.from_json).map_err(|(code, msg)| {
        console::eprint(&msg);
        code
    })
}

fn check(a: &CheckArgs) -> u8 {
    let (m, map) = match batch::load_with_positions(&a.input.file, a.input.from_json) {
        Ok(x) => x,
        Err((code, msg)) => {
            console::eprint(&msg);
            return code;
        }
    };
    let file = batch::display_name(&a.input.file);
    let (code, text, json) = check_text(&file, &m, map.as_ref());
    if a.json {
        return console::print_and_finish(code, &format!("{json:#}\n"));
    }
    console::print_and_finish(code, &text)
}

/// What `tusk check` prints about `m` (text and JSON), and its exit code;
/// each finding starts with where `map` (a text input's) says the text
/// wrote the entity it blames first.
fn check_text(
    file: &str,
    m: &Module,
    map: Option<&text::SourceMap>,
) -> (u8, String, serde_json::Value) {
    use serde_json::json;
    use std::fmt::Write;
    let mut out = String::new();
    if let Err(e) = m.check_structure() {
        let _ = writeln!(out, "{file}: structure: {e}");
        let j = json!({"file": file, "status": "structure", "error": e.to_string()});
        return (EXIT_FAILED, out, j);
    }
    // The placement verifier (docs/SEMANTICS.md §2) judges what has been allocated: a
    // space where nothing is placed yet (registers: nothing colored) is not
    // checked, so an unallocated module checks clean and a partly placed
    // space reports its unplaced locations.
    let placed = |space: Space| {
        m.mems()
            .space
            .keys()
            .any(|x| m.mems().space[x] == space && m.is_placed(x))
    };
    let scope = Scope {
        psum: placed(Space::Psum),
        sb: placed(Space::Sb),
        dram: placed(Space::Dram),
        registers: m.regs().lane.values().any(|&l| l != NO_LANE),
        uncolored: true,
    };
    let mut verifier = Verifier::for_module(m);
    verifier.set_scope(scope);
    let report = verifier.verify(m);
    let pos = |f: &tusk_core::verify::Finding| blame::position(map, f.blamed());
    for f in report.findings {
        let _ = writeln!(out, "{}: {}", blame::at(file, pos(f)), f.display(m));
    }
    if report.dropped > 0 {
        let _ = writeln!(out, "{file}: ... and {} more findings", report.dropped);
    }
    let checked: Vec<&str> = [
        (scope.psum, "PSUM"),
        (scope.sb, "SB"),
        (scope.dram, "DRAM"),
        (scope.registers, "registers"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, n)| *n)
    .collect();
    let findings: Vec<serde_json::Value> = report
        .findings
        .iter()
        .map(|f| {
            let mut j = json!({
                "kind": f.kind(),
                "message": f.display(m).to_string(),
                "tensors": f.mems().iter().map(|&v| format!("%{}", m.mem_name(v))).collect::<Vec<_>>(),
                "registers": f.regs().iter().map(|&r| format!("${}", m.reg_name(r))).collect::<Vec<_>>(),
            });
            blame::add_to(&mut j, pos(f));
            j
        })
        .collect();
    let j = json!({
        "file": file,
        "status": if report.is_clean() { "ok" } else { "findings" },
        "checked": checked,
        "total": report.total(),
        "findings": findings,
        "dropped": report.dropped,
    });
    let checked = if checked.is_empty() {
        "nothing placed yet, structure only".to_string()
    } else {
        format!("placements verified: {}", checked.join(", "))
    };
    if !report.is_clean() {
        let n = report.total();
        let noun = if n == 1 { "finding" } else { "findings" };
        let _ = writeln!(out, "{file}: {n} {noun} ({checked})");
        return (EXIT_FAILED, out, j);
    }
    let _ = writeln!(
        out,
        "{file}: ok: {} functions, {} blocks, {} instructions ({checked})",
        m.num_funcs(),
        m.num_blocks(),
        m.num_live_insts()
    );
    (EXIT_OK, out, j)
}

fn info(a: &InfoArgs) -> u8 {
    let m = match load(&a.input) {
        Ok(m) => m,
        Err(code) => return code,
    };
    if a.json {
        let v = tusk_shim::info::info_json(&m);
        return console::print_and_finish(EXIT_OK, &format!("{v:#}\n"));
    }
    console::print_and_finish(EXIT_OK, &tusk_shim::info::info_text(&m))
}

fn run(a: &RunArgs) -> u8 {
    let allocator = match Allocator::from_name(a.allocator.as_deref().unwrap_or("")) {
        Ok(x) => x,
        Err(e) => {
            console::error(e);
            return EXIT_BAD_INPUT;
        }
    };
    let target = match &a.target {
        None => None,
        Some(name) => match Generation::from_name(name) {
            Some(g) => Some(g),
            None => {
                console::error(format_args!(
                    "--target {name} is not a target (known: trn1 inf2 trn2 trn3)"
                ));
                return EXIT_BAD_INPUT;
            }
        },
    };
    let Some(check_input) = tusk_shim::run::CheckInput::from_name(&a.check_input) else {
        console::error(format_args!(
            "--check-input {} is not a setting (known: auto copy reread)",
            a.check_input
        ));
        return EXIT_BAD_INPUT;
    };
    let Some(rotation) = Rotation::from_name(&a.rotation) else {
        console::error(format_args!(
            "--rotation {} is not a rotation (known: off psum all)",
            a.rotation
        ));
        return EXIT_BAD_INPUT;
    };
    let Some(dma_affinity) = DmaAffinity::from_name(&a.dma_affinity) else {
        console::error(format_args!(
            "--dma-affinity {} is not a setting (known: off on)",
            a.dma_affinity
        ));
        return EXIT_BAD_INPUT;
    };
    let Some(spill_strategy) = SpillStrategy::from_name(&a.spill_strategy) else {
        console::error(format_args!(
            "--spill-strategy {} is not a strategy (known: best ranges access)",
            a.spill_strategy
        ));
        return EXIT_BAD_INPUT;
    };
    let opts = Options {
        optlevel: a.optlevel,
        allocator,
        smt_allocation: a.smt_allocation,
        loops_in_backend: a.loops_in_backend,
        vnc_count: a.vnc_count,
        gca_dma_optlevel: a.gca_dma_optlevel,
        target,
        max_regs: a.max_regs,
        schedule_model: true,
        lsa_max_spills: None,
        reg_max_spill_temporaries: None,
        storage_limit: a.max_memory,
        rotation,
        dma_affinity,
        spill_strategy,
        dataflow_walk_limit: a
            .dataflow_executions
            .unwrap_or(tusk_core::verify::MAX_EXACT_EXECUTIONS),
    };
    let opts = match opts.normalize() {
        Ok(o) => o,
        Err(e) => {
            console::error(e);
            return EXIT_BAD_INPUT;
        }
    };
    let cfg = JobConfig {
        opts,
        target_overrides: a.set.clone(),
        from_json: a.from_json,
        print_pipeline: a.print_pipeline,
        json: a.json,
        explain: a.explain,
        map: a.map,
        window: a.svg_window,
        check_threads: a.check_threads,
        verify: !a.no_verify,
        check_input,
    };
    if let [one] = a.files.as_slice() {
        if !one.is_dir() {
            let out = Outputs {
                module: a.output.clone(),
                report: a.report.clone(),
                svg: a.svg.clone(),
                create_dirs: false,
            };
            if let Err(msg) = out.check(Some(one), cfg.json) {
                console::error(msg);
                return EXIT_BAD_INPUT;
            }
            let o = batch::run_file_with_progress(one, &cfg, &out);
            let printed = console::print(&o.stdout);
            console::eprint(&o.stderr);
            return console::finish(o.code, printed);
        }
    }
    let dirs = OutputDirs {
        module: a.output.clone(),
        report: a.report.clone(),
        svg: a.svg.clone(),
    };
    batch::run_batch(&a.files, &cfg, &dirs)
}
