//! The `tusk` driver.
//!
//! Exit codes (docs/FORMAT.md, README): 0 success; 1 the input is well formed
//! but the job failed (verifier findings, allocation failed); 2 bad input or
//! usage (malformed file with line:column, invalid options, limits exceeded,
//! outputs that collide); 3 I/O error (standard output included; a closed
//! pipe is not one, see `tusk_shim::console`); 128 + N when signal N
//! (SIGINT, SIGTERM, SIGHUP) stopped the run, its temporary files removed.
//! Outputs are written atomically and only on success (except `tusk run
//! --svg`, which draws a failed allocation too); inputs are only read.
//! `tusk run` over several files exits with the worst code of its files
//! (2 before 3 before 1; see `tusk_shim::batch`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tusk_core::ir::{Module, Space, NO_LANE};
use tusk_core::pipeline::{Allocator, Options, Rotation};
use tusk_core::target::Generation;
use tusk_core::verify::placement::{Scope, Verifier};
use tusk_shim::batch::{self, JobConfig, OutputDirs, Outputs};
use tusk_shim::console::{self, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use tusk_shim::{io, json, text};

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
    /// Print a module in canonical text (or JSON).
    Fmt(FmtArgs),
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
}

#[derive(Args, Debug)]
struct FmtArgs {
    #[command(flatten)]
    input: Input,
    /// Write here (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
    /// Write JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct InfoArgs {
    #[command(flatten)]
    input: Input,
}

/// Every flag of SPEC §4.
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
    /// Optimization level: 0, 1, 2, 3, 6, 7 or 8 (the selection map).
    #[arg(long, default_value_t = 2)]
    optlevel: u8,
    /// Memory allocator family: `coloring` or `lsa` (default: by optlevel).
    #[arg(long, default_value = "")]
    allocator: String,
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
    /// Target preset (trn1, inf2, trn2, trn3); default: the module's.
    #[arg(long)]
    target: Option<String>,
    /// Override MaxRegNumPerEngine (scalar register lanes).
    #[arg(long)]
    max_regs: Option<u16>,
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
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Print the JSON report on standard output instead of the summary
    /// (several inputs: a JSON array instead of the table).
    #[arg(long)]
    json: bool,
    /// Print the selected pipeline.
    #[arg(long)]
    print_pipeline: bool,
    /// Skip the independent verifier after allocation.
    #[arg(long)]
    no_verify: bool,
    /// Storage budget of the run: bytes, or with a suffix K, M, G (powers
    /// of 1024). Methods whose storage grows faster than the input (exact
    /// search, dense interference graphs) are skipped when they do not fit
    /// it, and the summary says so. Default: 8 × the module's own storage,
    /// at least 1 GiB.
    #[arg(long, value_name = "BYTES", value_parser = tusk_shim::io::parse_bytes)]
    max_memory: Option<u64>,
    /// Address rotation after allocation: `off` (the allocators' placements)
    /// or `psum` (successive PSUM tiles go round the free banks).
    #[arg(long, default_value = "off", value_name = "off|psum")]
    rotation: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tusk_shim::tempfiles::install_signal_cleanup();
    let code = match &cli.command {
        Command::Check(a) => check(a),
        Command::Fmt(a) => fmt(a),
        Command::Info(a) => info(a),
        Command::Run(a) => run(a),
        Command::Gen(a) => tusk_shim::gen::run(a),
        Command::Color(a) => tusk_shim::color::run(a),
        Command::Dsa(a) => tusk_shim::dsa::run(a),
        Command::Regalloc(a) => tusk_shim::regalloc::run(a),
    };
    ExitCode::from(code)
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
    let m = match load(&a.input) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let (code, text) = check_text(&a.input.file.display().to_string(), &m);
    console::print_and_finish(code, &text)
}

/// What `tusk check` prints about `m`, and its exit code.
fn check_text(file: &str, m: &Module) -> (u8, String) {
    use std::fmt::Write;
    let mut out = String::new();
    if let Err(e) = m.check_structure() {
        let _ = writeln!(out, "{file}: structure: {e}");
        return (EXIT_FAILED, out);
    }
    // The placement verifier (SPEC §3) judges what has been allocated: a
    // space where nothing is placed yet (registers: nothing colored) is not
    // checked, so an unallocated module checks clean and a partly placed
    // space reports its unplaced locations.
    let placed = |space: Space| {
        m.mems
            .space
            .keys()
            .any(|x| m.mems.space[x] == space && m.is_placed(x))
    };
    let scope = Scope {
        psum: placed(Space::Psum),
        sb: placed(Space::Sb),
        dram: placed(Space::Dram),
        registers: m.regs.lane.values().any(|&l| l != NO_LANE),
        uncolored: true,
    };
    let mut verifier = Verifier::for_module(m);
    verifier.set_scope(scope);
    let report = verifier.verify(m);
    for f in report.findings {
        let _ = writeln!(out, "{file}: {}", f.display(m));
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
    let checked = if checked.is_empty() {
        "nothing placed yet, structure only".to_string()
    } else {
        format!("placements verified: {}", checked.join(", "))
    };
    if !report.is_clean() {
        let n = report.total();
        let noun = if n == 1 { "finding" } else { "findings" };
        let _ = writeln!(out, "{file}: {n} {noun} ({checked})");
        return (EXIT_FAILED, out);
    }
    let _ = writeln!(
        out,
        "{file}: ok: {} functions, {} blocks, {} instructions ({checked})",
        m.num_funcs(),
        m.num_blocks(),
        m.num_live_insts()
    );
    (EXIT_OK, out)
}

fn fmt(a: &FmtArgs) -> u8 {
    let dest = a.output.as_deref().unwrap_or(Path::new("-"));
    if let Err(msg) = io::check_outputs(Some(&a.input.file), &[("-o", dest)]) {
        console::error(msg);
        return EXIT_BAD_INPUT;
    }
    let m = match load(&a.input) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let out = if a.json {
        json::to_json_string(&m)
    } else {
        text::print(&m)
    };
    match io::write_atomic(dest, out.as_bytes()) {
        Ok(()) => EXIT_OK,
        Err(e) => e.report(EXIT_OK),
    }
}

fn info(a: &InfoArgs) -> u8 {
    let m = match load(&a.input) {
        Ok(m) => m,
        Err(code) => return code,
    };
    console::print_and_finish(EXIT_OK, &tusk_shim::info::info_text(&m))
}

fn run(a: &RunArgs) -> u8 {
    let allocator = match Allocator::from_name(&a.allocator) {
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
    let Some(rotation) = Rotation::from_name(&a.rotation) else {
        console::error(format_args!(
            "--rotation {} is not a rotation (known: off psum)",
            a.rotation
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
        no_verify: a.no_verify,
        lsa_max_spills: None,
        reg_max_spill_temporaries: None,
        storage_limit: a.max_memory,
        rotation,
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
        from_json: a.from_json,
        print_pipeline: a.print_pipeline,
        json: a.json,
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
            let o = batch::run_file(one, &cfg, &out);
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
