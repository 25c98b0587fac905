//! The report table of issue 6: every example under `examples/` through
//! every optlevel (and the allocators the selection map allows), the placed
//! copies under `examples/placed/` at optlevel 7. Per run: peak / lower bound
//! per space, memory spills, DMA descriptors before and after, register
//! spills, and the time of the passes (best of three, wall clock, checks not
//! included; the checks run once per row and must be clean). Generated
//! modules (default, DMA-heavy and tight presets, 2000 instructions, seed 1;
//! tight with 8 PSUM accumulators)
//! follow the examples.
//!
//! `cargo run --release -p tusk-benches --bin optlevel_table` prints the
//! Markdown table of BENCHMARKS.md ("Per example and optlevel"); with
//! `-- --examples` only the examples' rows (the table of issue 13).

use std::path::PathBuf;
use std::time::Instant;

use tusk_benches::{examples, load};
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Module, Space};
use tusk_core::options::Allocator;
use tusk_core::report::dma_analysis;
use tusk_core::{Checks, Clock, Options, RunReport, Workspace};
use tusk_shim::text;

struct Wall(Instant);

impl Clock for Wall {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// One run with the checks on (`verify`) or off; the report and the result.
fn once(input: &Module, opts: &Options, verify: bool) -> Result<(RunReport, Module), String> {
    let mut m = input.clone();
    let original = verify.then(|| input.clone());
    let checks = match &original {
        Some(input) => Checks::Full { input },
        None => Checks::None,
    };
    let o = *opts;
    let mut ws = Workspace::new();
    ws.reserve(&mut m, &o, checks);
    let mut clock = Wall(Instant::now());
    match tusk_core::run(&mut m, &o, &mut ws, &mut clock, checks) {
        Ok(r) => Ok((r, m)),
        Err(e) => Err(e.display(&m).to_string()),
    }
}

fn space_cell(r: &RunReport, s: Space) -> String {
    let x = r.space(s);
    if x.placed == 0 && x.lower_bound == 0 {
        "—".into()
    } else {
        format!(
            "{} / {} ({:.3})",
            x.peak,
            x.lower_bound,
            x.peak_over_bound()
        )
    }
}

/// Where a row's input comes from.
#[derive(Clone)]
enum Input {
    File(PathBuf),
    /// A generated module: its name and the module.
    Gen(String, Box<Module>),
    /// A row that could not be set up: its name and why (printed as a
    /// failed row, never dropped).
    Broken(String, String),
}

impl Input {
    fn name(&self) -> String {
        match self {
            Input::File(p) => p.file_stem().unwrap().to_string_lossy().into_owned(),
            Input::Gen(n, _) | Input::Broken(n, _) => n.clone(),
        }
    }
    /// The module, or why there is none.
    fn module(&self) -> Result<Module, String> {
        match self {
            Input::File(p) => Ok(load(p)),
            Input::Gen(_, m) => Ok((**m).clone()),
            Input::Broken(_, e) => Err(e.clone()),
        }
    }
}

/// The optlevels of a row group on unplaced input.
fn levels(input: &Input, rows: &mut Vec<(Input, String, Options)>) {
    for o in [0u8, 1, 2, 3, 6, 8] {
        let opts = Options {
            optlevel: o,
            ..Options::default()
        };
        rows.push((input.clone(), format!("{o}"), opts));
        if o == 2 {
            let exact = Options {
                allocator: Allocator::Exact,
                ..opts
            };
            rows.push((input.clone(), "2 exact".into(), exact));
        }
        if o == 6 {
            let lsa = Options {
                allocator: Allocator::Lsa,
                ..opts
            };
            rows.push((input.clone(), "6 lsa".into(), lsa));
        }
    }
}

fn main() {
    let examples_only = std::env::args().skip(1).any(|a| a == "--examples");
    let mut rows: Vec<(Input, String, Options)> = Vec::new();
    let opt7 = Options {
        optlevel: 7,
        ..Options::default()
    };
    for path in examples("") {
        levels(&Input::File(path.clone()), &mut rows);
        let placed = path
            .parent()
            .unwrap()
            .join("placed")
            .join(path.file_name().unwrap());
        if placed.exists() {
            rows.push((Input::File(placed), "7 (placed)".into(), opt7));
        }
    }
    // Generated modules: what the DMA passes and the spill paths see on
    // larger, redundant input. Optlevel 7 takes the optlevel-2 result.
    let generated = if examples_only {
        Vec::new()
    } else {
        generated()
    };
    for (name, p) in generated {
        let m = generate(&p).expect("generator knobs in range");
        let input = Input::Gen(name.into(), Box::new(m.clone()));
        levels(&input, &mut rows);
        if let Ok((_, placed)) = once(&m, &Options::default(), false) {
            let back = match text::parse_str(&text::print(&placed)) {
                Ok(back) => Input::Gen(name.into(), Box::new(back)),
                Err(e) => Input::Broken(
                    name.into(),
                    format!("the printed result does not parse: {e}"),
                ),
            };
            rows.push((back, "7 (opt-2 result)".into(), opt7));
        }
    }
    print_rows(rows);
}

/// The generated modules of the table: name and knobs.
fn generated() -> Vec<(&'static str, GenParams)> {
    vec![
        ("gen default 2k", GenParams::new(2000, 1)),
        (
            "gen dma_heavy 2k",
            GenParams {
                instructions: 2000,
                ..GenParams::dma_heavy()
            },
        ),
        (
            // The tight preset with one accumulator per PSUM bank (its nine
            // exceed the eight banks, which no allocator can fix).
            "gen tight 2k",
            GenParams {
                instructions: 2000,
                accumulators: 8,
                ..GenParams::tight()
            },
        ),
    ]
}

/// Runs every row (checked once, timed three times without the checks) and
/// prints the table.
fn print_rows(rows: Vec<(Input, String, Options)>) {
    println!("| example | optlevel | SB peak / LB | PSUM peak / LB | DRAM peak / LB | mem spills | DMA descriptors before → after | reg spills | passes µs |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (src, label, opts) in rows {
        let name = src.name();
        let input = match src.module() {
            Ok(m) => m,
            Err(e) => {
                println!("| {name} | {label} | failed: {e} | | | | | | |");
                continue;
            }
        };
        let (r, m) = match once(&input, &opts, true) {
            Ok(x) => x,
            Err(e) => {
                println!("| {name} | {label} | failed: {e} | | | | | | |");
                continue;
            }
        };
        let best = (0..3)
            .filter_map(|_| once(&input, &opts, false).ok())
            .map(|(r, _)| r.pass_micros())
            .min()
            .unwrap_or(r.pass_micros());
        let spills: u32 = Space::ALL.iter().map(|&s| r.space(s).spills).sum();
        let before = dma_analysis(&input).descriptors;
        let after = dma_analysis(&m).descriptors;
        let reg = r.reg.as_ref().map_or(0, |g| g.spilled_registers);
        println!(
            "| {name} | {label} | {} | {} | {} | {spills} | {before} → {after} | {reg} | {} |",
            space_cell(&r, Space::Sb),
            space_cell(&r, Space::Psum),
            space_cell(&r, Space::Dram),
            best
        );
    }
}
