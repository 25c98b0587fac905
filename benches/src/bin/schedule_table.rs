//! The table of issue 14: every example under `examples/` and three
//! generated modules (default, DMA-heavy, loop-heavy: 2000 instructions,
//! seed 1) at optlevel 2, with `--rotation off`, `psum` and `all`. Per
//! run: SB and PSUM peak, DMA descriptors of the result, the schedule
//! model's makespan, its makespan with unlimited memory and the loss
//! between them, what the rotations moved (and the loop tiles the SB
//! rotation gave slots used in turn), the SB peak the SB rotation's
//! probe found for the rest of the loss, and the executions the model
//! simulated ("N of M": extrapolated). Both checks run on every row
//! and must be clean.
//!
//! `cargo run --release -p tusk-benches --bin schedule_table` prints the
//! Markdown table of BENCHMARKS.md ("Schedule model and PSUM rotation").
//! With the argument `affinity` it prints the table of "DMA-aware
//! placement" instead: the same modules with `--dma-affinity off` and
//! `on` (rotation off), the affinity pairs found, honoured and refused by
//! cause, and the SB spills. With `both`, the same columns for the four
//! settings of the two switches (`--dma-affinity off|on`, `--rotation
//! off|all`), the bound the lowest of the four results'.

use std::time::Instant;

use tusk_benches::{examples, load};
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Module, Space};
use tusk_core::options::{DmaAffinity, Rotation};
use tusk_core::report::{coalescing_bound, dma_analysis};
use tusk_core::{Checks, Clock, Options, Workspace};

struct Wall(Instant);

impl Clock for Wall {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

fn row(name: &str, input: &Module, rotation: Rotation) {
    let mut m = input.clone();
    let opts = Options {
        rotation,
        ..Options::default()
    };
    let Some(r) = run(name, &mut m, input, &opts) else {
        return;
    };
    let s = r.schedule.clone().unwrap_or_default();
    let rot = r
        .rotation
        .map_or("—".to_string(), |x| format!("{} / {}", x.moved, x.tiles));
    // The SB rotation's own model runs come after the SB allocator and
    // before the DMA passes: its makespans are of that program.
    let sb = r.sb_rotation.map_or("—".to_string(), |x| {
        let slots = if x.buffered > 0 {
            format!(
                "; {} of {} loop tiles in ≤ {} slots",
                x.buffered, x.buffer_candidates, x.slots
            )
        } else {
            String::new()
        };
        format!(
            "{} / {}: {} → {} (unlimited {}){slots}",
            x.moved, x.movable, x.makespan_before, x.makespan_after, x.makespan_unlimited
        )
    });
    let probe = r
        .sb_rotation
        .and_then(|x| x.probe)
        .map_or("—".to_string(), |p| {
            format!("{} B: {}", p.peak, p.makespan)
        });
    println!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} ({:.1}%) | {} | {} | {} | {} |",
        match rotation {
            Rotation::Off => "off",
            Rotation::Psum => "psum",
            Rotation::All => "all",
        },
        r.space(Space::Sb).peak,
        r.space(Space::Psum).peak,
        dma_analysis(&m).descriptors,
        s.makespan,
        s.makespan_unlimited,
        s.loss(),
        s.loss_pct(),
        rot,
        sb,
        probe,
        if s.extrapolated {
            format!("{} of {}", s.executions, s.total_executions)
        } else {
            format!("{}", s.executions)
        }
    );
}

/// Runs `opts` on `m` with both checks; `None` (a table row saying so)
/// when the run fails.
fn run(name: &str, m: &mut Module, input: &Module, opts: &Options) -> Option<tusk_core::RunReport> {
    let mut ws = Workspace::new();
    ws.reserve(m, opts, Checks::Full { input });
    let mut clock = Wall(Instant::now());
    match tusk_core::run(m, opts, &mut ws, &mut clock, Checks::Full { input }) {
        Ok(r) => {
            assert!(r.verified(), "{name}: checks not clean");
            Some(r)
        }
        Err(e) => {
            println!(
                "| {name} | {:?} {:?} | failed: {} |",
                opts.rotation,
                opts.dma_affinity,
                e.display(m)
            );
            None
        }
    }
}

/// One row of the affinity table, without its bound: the columns before
/// and after the bound, and the coalescing bound of the result
/// (`coalescing_bound`).
fn affinity_row(
    name: &str,
    input: &Module,
    dma_affinity: DmaAffinity,
    rotation: Rotation,
) -> Option<(String, String, u64)> {
    let mut m = input.clone();
    let opts = Options {
        dma_affinity,
        rotation,
        ..Options::default()
    };
    let r = run(name, &mut m, input, &opts)?;
    let s = r.schedule.clone().unwrap_or_default();
    let a = r.coloring[Space::Sb.slot()].and_then(|c| c.affinity);
    let pairs = a.map_or("—".to_string(), |a| {
        let causes: Vec<String> = [
            ("capacity", a.capacity),
            ("lifetime", a.lifetime),
            ("placed", a.placed),
            ("alignment", a.alignment),
            ("untried", a.untried),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
        format!(
            "{} / {} / {}",
            a.pairs,
            a.honoured,
            if causes.is_empty() {
                "0".to_string()
            } else {
                causes.join(", ")
            }
        )
    });
    let d = dma_analysis(&m);
    let before = format!(
        "| {name} | {}{} | {} | {} | {} | {} |",
        match dma_affinity {
            DmaAffinity::Off => "off",
            DmaAffinity::On => "on",
        },
        match rotation {
            Rotation::Off => "",
            Rotation::Psum => ", rotation psum",
            Rotation::All => ", rotation all",
        },
        r.space(Space::Sb).peak,
        r.space(Space::Sb).spills,
        d.instructions,
        d.descriptors,
    );
    let after = format!(
        " {} | {} ({:.1}%) | {} |",
        s.makespan,
        s.loss(),
        s.loss_pct(),
        pairs
    );
    Some((before, after, coalescing_bound(&m)))
}

fn main() {
    let mode = std::env::args().nth(1);
    if matches!(mode.as_deref(), Some("affinity" | "both")) {
        let settings: &[(DmaAffinity, Rotation)] = if mode.as_deref() == Some("both") {
            &[
                (DmaAffinity::Off, Rotation::Off),
                (DmaAffinity::On, Rotation::Off),
                (DmaAffinity::Off, Rotation::All),
                (DmaAffinity::On, Rotation::All),
            ]
        } else {
            &[
                (DmaAffinity::Off, Rotation::Off),
                (DmaAffinity::On, Rotation::Off),
            ]
        };
        println!("| module | affinity | SB peak | SB spills | DMAs after | DMA descriptors after | coalescing bound | model makespan | loss | pairs found / placed side by side / apart by cause |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        // The bound of a module: the lowest of its results' (each
        // result's merges may block a chain of the other's).
        for (name, m) in modules() {
            let rows: Vec<_> = settings
                .iter()
                .filter_map(|&(a, r)| affinity_row(&name, &m, a, r))
                .collect();
            let bound = rows.iter().map(|r| r.2).min().unwrap_or(0);
            for (before, after, _) in rows {
                println!("{before} {bound} |{after}");
            }
        }
        return;
    }
    println!("| module | rotation | SB peak | PSUM peak | DMA descriptors after | model makespan | unlimited memory | loss | PSUM tiles moved | SB tiles moved / movable: its model before → after | its probe: peak: makespan | executions simulated |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, m) in modules() {
        for r in [Rotation::Off, Rotation::Psum, Rotation::All] {
            row(&name, &m, r);
        }
    }
}

/// Every example, then the three generated modules.
fn modules() -> Vec<(String, Module)> {
    let mut v = Vec::new();
    for p in examples("") {
        let m = load(&p);
        let name = p
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into());
        v.push((name, m));
    }
    let generated = [
        ("gen default 2k", GenParams::new(2000, 1)),
        (
            "gen dma-heavy 2k",
            GenParams {
                instructions: 2000,
                seed: 1,
                ..GenParams::dma_heavy()
            },
        ),
        (
            "gen loop-heavy 2k",
            GenParams {
                instructions: 2000,
                seed: 1,
                loop_pct: 100,
                max_loop_depth: 3,
                loop_term_pct: 40,
                ..GenParams::default()
            },
        ),
    ];
    for (name, p) in generated {
        let m = generate(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        v.push((name.to_string(), m));
    }
    v
}
