//! The `tusk` driver.
//!
//! Exit codes (docs/FORMAT.md, README): 0 success; 1 the input is well formed
//! but the job failed (verifier findings, allocation failed); 2 bad input or
//! usage (malformed file with line:column, invalid options, limits exceeded);
//! 3 I/O error.
//! Outputs are written atomically and only on success (except `tusk run
//! --svg`, which draws a failed allocation too); inputs are only read.
//! `tusk run` over several files exits with the worst code of its files
//! (2 before 3 before 1; see `tusk_shim::batch`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tusk_core::ir::{Module, Space, NO_LANE};
use tusk_core::pipeline::{Allocator, Options};
use tusk_core::target::Generation;
use tusk_core::verify::placement::{Scope, Verifier};
use tusk_shim::batch::{self, JobConfig, OutputDirs, Outputs};
use tusk_shim::{io, json, text};

/// Success.
const EXIT_OK: u8 = 0;
/// Well-formed input, failed job (findings, allocation failure).
const EXIT_FAILED: u8 = 1;
/// Bad input or usage.
const EXIT_BAD_INPUT: u8 = 2;
/// A file could not be read or written.
const EXIT_IO: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "tusk",
    version,
    about = "tusk: the allocation back end for Trainium-class tensor accelerators",
    after_help = "Exit codes: 0 success, 1 findings / job failed, 2 bad input or usage, 3 I/O error."
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Check(a) => check(a),
        Command::Fmt(a) => fmt(a),
        Command::Info(a) => info(a),
        Command::Run(a) => run(a),
        Command::Gen(a) => exit_code(tusk_shim::gen::run(a)),
        Command::Color(a) => exit_code(tusk_shim::color::run(a)),
        Command::Dsa(a) => exit_code(tusk_shim::dsa::run(a)),
        Command::Regalloc(a) => exit_code(tusk_shim::regalloc::run(a)),
    };
    ExitCode::from(code)
}

/// The process exit code of a subcommand's `i32` result (anything outside
/// 0..=255 is an internal error, reported as an I/O-class failure).
fn exit_code(code: i32) -> u8 {
    u8::try_from(code).unwrap_or(EXIT_IO)
}

/// Reads and parses the input; on failure prints the error and returns the
/// exit code.
fn load(input: &Input) -> Result<Module, u8> {
    let path = &input.file;
    let bytes = io::read_limited(path, text::MAX_TEXT_BYTES).map_err(|e| {
        eprintln!("error: {e}");
        match e {
            io::IoError::TooLarge { .. } => EXIT_BAD_INPUT,
            _ => EXIT_IO,
        }
    })?;
    let as_json = input.from_json || path.extension().is_some_and(|e| e == "json");
    if as_json {
        json::parse_json(&bytes).map_err(|e| {
            eprintln!("error: {}:{e}", path.display());
            EXIT_BAD_INPUT
        })
    } else {
        text::parse(&bytes).map_err(|e| {
            eprintln!("error: {}:{e}", path.display());
            EXIT_BAD_INPUT
        })
    }
}

fn check(a: &CheckArgs) -> u8 {
    let m = match load(&a.input) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let file = a.input.file.display();
    if let Err(e) = m.check_structure() {
        println!("{file}: structure: {e}");
        return EXIT_FAILED;
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
    };
    let mut verifier = Verifier::for_module(&m);
    verifier.set_scope(scope);
    let report = verifier.verify(&m);
    for f in report.findings {
        println!("{file}: {}", f.display(&m));
    }
    if report.dropped > 0 {
        println!("{file}: ... and {} more findings", report.dropped);
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
        println!("{file}: {} findings ({checked})", report.total());
        return EXIT_FAILED;
    }
    println!(
        "{file}: ok: {} functions, {} blocks, {} instructions ({checked})",
        m.num_funcs(),
        m.num_blocks(),
        m.num_live_insts()
    );
    EXIT_OK
}

fn fmt(a: &FmtArgs) -> u8 {
    let m = match load(&a.input) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let out = if a.json {
        json::to_json_string(&m)
    } else {
        text::print(&m)
    };
    write_output(a.output.as_deref(), &a.input.file, out.as_bytes())
}

/// Writes the result to `out` (standard output when absent), refusing to
/// overwrite the input.
fn write_output(out: Option<&Path>, input: &Path, bytes: &[u8]) -> u8 {
    let Some(out) = out else {
        return match io::write_atomic(Path::new("-"), bytes) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_IO
            }
        };
    };
    if same_file(out, input) {
        eprintln!(
            "error: refusing to overwrite the input file {} (inputs are never modified)",
            input.display()
        );
        return EXIT_BAD_INPUT;
    }
    match io::write_atomic(out, bytes) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_IO
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn info(a: &InfoArgs) -> u8 {
    let m = match load(&a.input) {
        Ok(m) => m,
        Err(code) => return code,
    };
    print!("{}", tusk_shim::info::info_text(&m));
    EXIT_OK
}

fn run(a: &RunArgs) -> u8 {
    let allocator = match Allocator::from_name(&a.allocator) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    let target = match &a.target {
        None => None,
        Some(name) => match Generation::from_name(name) {
            Some(g) => Some(g),
            None => {
                eprintln!("error: --target {name} is not a target (known: trn1 inf2 trn2 trn3)");
                return EXIT_BAD_INPUT;
            }
        },
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
    };
    let opts = match opts.normalize() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
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
            };
            let o = batch::run_file(one, &cfg, &out);
            print!("{}", o.stdout);
            eprint!("{}", o.stderr);
            return o.code;
        }
    }
    let dirs = OutputDirs {
        module: a.output.clone(),
        report: a.report.clone(),
        svg: a.svg.clone(),
    };
    batch::run_batch(&a.files, &cfg, &dirs)
}
