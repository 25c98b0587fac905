//! The table of issue 14: every example under `examples/` and three
//! generated modules (default, DMA-heavy, loop-heavy: 2000 instructions,
//! seed 1) at optlevel 2, with `--rotation off` and `--rotation psum`. Per
//! run: SB and PSUM peak, DMA descriptors of the result, the schedule
//! model's makespan, its makespan with unlimited memory and the loss
//! between them, what the rotation moved, and the executions the model
//! simulated ("N of M": extrapolated). Both checks run on every row
//! and must be clean.
//!
//! `cargo run --release -p tusk-benches --bin schedule_table` prints the
//! Markdown table of BENCHMARKS.md ("Schedule model and PSUM rotation").

use std::time::Instant;

use tusk_benches::{examples, load};
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Module, Space};
use tusk_core::report::dma_analysis;
use tusk_core::{Checks, Clock, Options, Rotation, Workspace};

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
    let mut ws = Workspace::new();
    ws.reserve(&mut m, &opts, Checks::Full { input });
    let mut clock = Wall(Instant::now());
    let r = match tusk_core::run(&mut m, &opts, &mut ws, &mut clock, Checks::Full { input }) {
        Ok(r) => r,
        Err(e) => {
            println!("| {name} | {rotation:?} | failed: {} |", e.display(&m));
            return;
        }
    };
    assert!(r.verified && r.findings == 0, "{name}: checks not clean");
    let s = r.schedule.clone().unwrap_or_default();
    let rot = r
        .rotation
        .map_or("—".to_string(), |x| format!("{} / {}", x.moved, x.tiles));
    println!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} ({:.1}%) | {} | {} |",
        match rotation {
            Rotation::Off => "off",
            Rotation::Psum => "psum",
        },
        r.space(Space::Sb).peak,
        r.space(Space::Psum).peak,
        dma_analysis(&m).descriptors,
        s.makespan,
        s.makespan_unlimited,
        s.loss(),
        s.loss_pct(),
        rot,
        if s.extrapolated {
            format!("{} of {}", s.executions, s.total_executions)
        } else {
            format!("{}", s.executions)
        }
    );
}

fn main() {
    println!("| module | rotation | SB peak | PSUM peak | DMA descriptors after | model makespan | unlimited memory | loss | tiles moved | executions simulated |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for p in examples("") {
        let m = load(&p);
        let name = p
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into());
        for r in [Rotation::Off, Rotation::Psum] {
            row(&name, &m, r);
        }
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
        for r in [Rotation::Off, Rotation::Psum] {
            row(name, &m, r);
        }
    }
}
