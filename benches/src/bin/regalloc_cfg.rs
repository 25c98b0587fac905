//! tusk's CFG colorer and regalloc2 side by side, in one process, on the
//! same functions: the 54 bz2-wasm functions of the shared data and
//! generated CFG programs, at K = 25 and K = 64. Per allocator: functions,
//! instructions, spills, reloads, inserted moves, kept moves, weighted cost
//! (Σ 10^depth over all of them), time (median of repetitions per function,
//! wall clock, the two allocators' runs interleaved; summed: the thread CPU
//! clock of the other figures ticks in 4 ms steps on a loaded machine, too
//! coarse for functions of a few hundred microseconds), instructions per second, the slowest
//! function, functions spilling values although MaxLive ≤ K, and how many
//! outputs each checker accepted (tusk's symbolic checker on tusk's output;
//! regalloc2's own checker on regalloc2's).
//!
//! `cargo run --release -p tusk-benches --bin regalloc_cfg [-- DATA_DIR]`
//! (DATA_DIR defaults to `$TUSK_DATA`, else `../shared/data`);
//! `RA_QUICK=1` drops the 100,000-instruction functions.

use std::path::PathBuf;
use std::time::Instant;

use regalloc2::checker::Checker;
use regalloc2::{run_with_ctx, Ctx, RegallocOptions};
use tusk_benches::ra2::{figures, machine, Ra2Figures, Ra2Function};
use tusk_core::gen::cfg::{cfg_function, CfgParams};
use tusk_core::regalloc::{CfgAllocator, CfgChecker, CfgFunction, FunctionBuf};

#[derive(Default, Debug, Clone, Copy)]
struct Row {
    functions: u64,
    insts: u64,
    spills: u64,
    reloads: u64,
    moves_inserted: u64,
    moves_kept: u64,
    weighted: f64,
    secs: f64,
    max_secs: f64,
    spilled_within_k: u64,
    checked: u64,
}

impl Row {
    fn add(&mut self, insts: usize, x: &Ra2Figures, secs: f64, spilled_within_k: bool, ok: bool) {
        self.functions += 1;
        self.insts += insts as u64;
        self.spills += x.spills;
        self.reloads += x.reloads;
        self.moves_inserted += x.moves_inserted;
        self.moves_kept += x.moves_kept;
        self.weighted += x.weighted_cost;
        self.secs += secs;
        self.max_secs = self.max_secs.max(secs);
        self.spilled_within_k += spilled_within_k as u64;
        self.checked += ok as u64;
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn data_dir() -> PathBuf {
    if let Some(a) = std::env::args().nth(1) {
        return PathBuf::from(a);
    }
    tusk_shim::shared_data::dir()
}

fn bz2() -> Vec<FunctionBuf> {
    let dir = data_dir().join("regalloc/bz2-wasm");
    let files = tusk_shim::regalloc::input_files(&dir).expect("the bz2-wasm folder");
    assert_eq!(
        files.len(),
        54,
        "{} must hold the 54 functions",
        dir.display()
    );
    files
        .iter()
        .map(|p| {
            tusk_shim::regalloc::parse_function(&std::fs::read(p).expect("readable"))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

fn generated(big: bool) -> Vec<(String, Vec<FunctionBuf>)> {
    let mut sets = Vec::new();
    let mut small = Vec::new();
    for seed in 0..24u64 {
        let pressure = [12u32, 20, 28, 40, 56, 80][seed as usize % 6];
        small.push(cfg_function(&CfgParams {
            insts: 2_000,
            pressure,
            seed,
            ..CfgParams::default()
        }));
    }
    sets.push(("gen-2k x24 (pressure 12..80)".to_string(), small));
    if big {
        let mut b = Vec::new();
        for (seed, pressure) in [(100u64, 20u32), (101, 48)] {
            b.push(cfg_function(&CfgParams {
                insts: 100_000,
                pressure,
                seed,
                ..CfgParams::default()
            }));
        }
        sets.push(("gen-100k x2 (pressure 20, 48)".to_string(), b));
    }
    sets
}

fn run_set(name: &str, funcs: &[FunctionBuf], k: u16) {
    let mut tusk = Row::default();
    let mut ra2 = Row::default();
    let mut alloc = CfgAllocator::new();
    let mut checker = CfgChecker::new();
    let mut ctx = Ctx::default();
    let env = machine(k);
    let opts = RegallocOptions::default();
    for f in funcs {
        let n = f.num_insts();
        let reps = (300_000 / n.max(1)).clamp(1, 30);
        let rf = Ra2Function::new(f);
        // Warm-up (sizes tusk's tables for this function; regalloc2's
        // context likewise keeps its storage).
        let tusk_ok = alloc.allocate_growing(f, k).is_ok();
        let ra2_ok = run_with_ctx(&rf, &env, &opts, &mut ctx).is_ok();
        let (mut tt, mut rt) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let c = Instant::now();
            let r = alloc.allocate_growing(f, k).map(|_| ());
            tt.push(c.elapsed().as_secs_f64());
            assert_eq!(r.is_ok(), tusk_ok);
            let c = Instant::now();
            let r = run_with_ctx(&rf, &env, &opts, &mut ctx).map(|_| ());
            rt.push(c.elapsed().as_secs_f64());
            assert_eq!(r.is_ok(), ra2_ok);
        }
        // tusk's figures and check.
        let a = alloc.allocate_growing(f, k).expect("tusk allocates");
        let s = a.stats;
        let ok = checker.check(f, a).is_ok();
        let x = Ra2Figures {
            spills: s.spills as u64,
            reloads: s.reloads as u64,
            moves_inserted: s.moves_inserted as u64,
            moves_kept: s.moves_kept as u64,
            weighted_cost: s.weighted_cost,
        };
        let within = s.max_live <= k as u32;
        tusk.add(n, &x, median(&mut tt), within && s.spilled > 0, ok);
        // regalloc2's figures and check.
        let out = run_with_ctx(&rf, &env, &opts, &mut ctx).expect("regalloc2 allocates");
        let y = figures(&rf, out);
        let mut ch = Checker::new(&rf, &env);
        ch.prepare(out);
        let ok2 = ch.run().is_ok();
        ra2.add(n, &y, median(&mut rt), within && y.spills > 0, ok2);
    }
    for (who, r) in [("tusk", &tusk), ("regalloc2", &ra2)] {
        println!(
            "{:<30} {:>3} {:<10} {:>4} {:>8} {:>7} {:>7} {:>8} {:>7} {:>12.0} {:>9.2} {:>7.3} {:>8.2} {:>5} {:>4}",
            name,
            k,
            who,
            r.functions,
            r.insts,
            r.spills,
            r.reloads,
            r.moves_inserted,
            r.moves_kept,
            r.weighted,
            r.secs * 1e3,
            r.insts as f64 / r.secs / 1e6,
            r.max_secs * 1e3,
            r.spilled_within_k,
            r.checked
        );
    }
    println!(
        "{:<30} {:>3} tusk/regalloc2: weighted cost {:.3}x, time {:.3}x",
        name,
        k,
        tusk.weighted / ra2.weighted.max(1e-9),
        tusk.secs / ra2.secs.max(1e-12)
    );
}

fn main() {
    let big = std::env::var_os("RA_QUICK").is_none();
    let bz = bz2();
    let gens = generated(big);
    println!(
        "{:<30} {:>3} {:<10} {:>4} {:>8} {:>7} {:>7} {:>8} {:>7} {:>12} {:>9} {:>7} {:>8} {:>5} {:>4}",
        "set", "K", "allocator", "fns", "insts", "spills", "reloads", "moves+", "kept",
        "weighted", "ms", "M/s", "max ms", "sp<=K", "ok"
    );
    for k in [25u16, 64] {
        run_set("bz2-wasm x54", &bz, k);
        for (name, fs) in &gens {
            run_set(name, fs, k);
        }
    }
}
