//! Reproducible figures of the register colorer (REG_Allocator):
//! throughput on generated SSA scalar programs and spills versus pressure.
//!
//! `cargo run --release -p tusk-benches --bin regalloc`

use tusk_benches::CpuClock as Clock;
use tusk_core::gen::scalar::{scalar_program, ScalarParams};
use tusk_core::regalloc::{allocate_registers, ColorConfig, RegAllocConfig, RegAllocator};
use tusk_core::Target;

fn target(k: u64) -> Target {
    let mut t = Target::default();
    t.set("max-regs", k).expect("max-regs in range");
    t
}

fn main() {
    let sizes: Vec<usize> = match std::env::var("REG_SIZES") {
        Ok(s) => s.split(',').filter_map(|x| x.parse().ok()).collect(),
        Err(_) => vec![10_000, 100_000, 1_000_000],
    };
    let pressures: Vec<u32> = match std::env::var("REG_PRESSURES") {
        Ok(s) => s.split(',').filter_map(|x| x.parse().ok()).collect(),
        Err(_) => vec![16, 32, 48],
    };
    println!("== throughput (K = 62, 10% pairs, 10% copies, loops; mean thread CPU time) ==");
    println!(
        "{:>8} {:>8} {:>10} {:>9} {:>10} {:>9} {:>10} {:>8} {:>7}",
        "insts",
        "pressure",
        "edges",
        "cold ms",
        "cold M/s",
        "warm ms",
        "warm M/s",
        "spilled",
        "rounds"
    );
    for &pressure in &pressures {
        for &n in &sizes {
            let p = ScalarParams {
                insts: n,
                pressure,
                pair_percent: 10,
                max_life: 64,
                copy_percent: 10,
                loop_every: 200,
                loop_len: 24,
                seed: 7,
            };
            // Mean over enough repetitions that the scheduler-tick
            // granularity of the CPU clock averages out.
            // `REG_REPS` overrides the count (1 under a profiler).
            let reps = std::env::var("REG_REPS")
                .ok()
                .and_then(|x| x.parse().ok())
                .unwrap_or((2_000_000 / n).clamp(3, 200));
            let mut best = 0.0;
            let mut warm = 0.0;
            let mut rep = None;
            let base = scalar_program(target(62), &p).expect("generator");
            let mut ra = RegAllocator::new(&base);
            for _ in 0..reps {
                // Cold: the one-shot `allocate_registers` (a new workspace
                // each time).
                let mut m = base.clone();
                let insts = m.num_live_insts();
                let t0 = Clock::start();
                let r = allocate_registers(&mut m, &RegAllocConfig::default()).expect("allocates");
                best += t0.secs() / reps as f64;
                // Warm: the workspace reused (the intended use across functions).
                let mut m = base.clone();
                let t0 = Clock::start();
                let _ = ra
                    .allocate(&mut m, &RegAllocConfig::default())
                    .expect("allocates");
                warm += t0.secs() / reps as f64;
                rep = Some((insts, r));
            }
            let (insts, r) = rep.expect("ran");
            println!(
                "{:>8} {:>8} {:>10} {:>9.2} {:>10.2} {:>9.2} {:>10.2} {:>8} {:>7}",
                insts,
                pressure,
                r.edges,
                best * 1e3,
                insts as f64 / best / 1e6,
                warm * 1e3,
                insts as f64 / warm / 1e6,
                r.spilled_registers,
                r.rounds
            );
        }
    }
    if std::env::var_os("REG_NO_SPILL_TABLE").is_some() {
        return;
    }
    println!();
    println!("== spills vs max lane-weighted pressure (K = 62, 4000 insts, loops, 3 seeds) ==");
    println!(
        "{:>9} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "pressure", "pairs%", "measured", "spilled", "rounds", "spill cyc", "textbook"
    );
    for &pairs in &[0u32, 20] {
        for &pr in &[32u32, 48, 62, 64, 72, 96, 124] {
            let (mut sp, mut rd, mut cy, mut tb, mut meas) = (0u32, 0u32, 0u64, 0u32, 0u32);
            for seed in 0..3 {
                let p = ScalarParams {
                    insts: 4000,
                    pressure: pr,
                    pair_percent: pairs,
                    max_life: 80,
                    copy_percent: 10,
                    loop_every: 100,
                    loop_len: 20,
                    seed,
                };
                let base = scalar_program(target(62), &p).expect("generator");
                let mut m = base.clone();
                let r = RegAllocator::new(&m)
                    .allocate(&mut m, &RegAllocConfig::default())
                    .expect("allocates");
                sp += r.spilled_registers;
                rd = rd.max(r.rounds);
                cy += r.spill_cycles;
                meas = meas.max(r.max_pressure);
                let mut m = base.clone();
                let cfg = RegAllocConfig {
                    color: ColorConfig::textbook(0),
                    ..RegAllocConfig::default()
                };
                let r = RegAllocator::new(&m)
                    .allocate(&mut m, &cfg)
                    .expect("allocates");
                tb += r.spilled_registers;
            }
            println!(
                "{:>9} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
                pr, pairs, meas, sp, rd, cy, tb
            );
        }
    }
}
