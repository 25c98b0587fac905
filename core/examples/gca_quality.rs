//! Peak / lower bound of the coloring allocator (and the greedy baselines)
//! on MiniMalloc CSV files and generated perfect-packing instances.
//! `cargo run --release -p tusk-core --features gen --example gca_quality -- ../shared/data/dsa/*.csv`
use std::time::Instant;
use tusk_core::dsa::{Buffer, Placement, Problem};
use tusk_core::dsa::{GcaOptions, GcaWorkspace};
use tusk_core::dsa::{GreedyRule, GreedyWorkspace};
use tusk_core::gen::dsa::{perfect_packing, PerfectPacking};

fn load(path: &str) -> Problem {
    let text = std::fs::read_to_string(path).expect("readable csv");
    let mut p = Problem::linear(0, 4096);
    for line in text.lines().skip(1) {
        let f: Vec<u64> = line
            .split(',')
            .skip(1)
            .map(|x| x.trim().parse().expect("number"))
            .collect();
        let f = [0, f[0], f[1], f[2]];
        p.push(Buffer::linear(f[1], f[2], f[3]))
            .expect("valid buffer");
    }
    p
}

fn report(name: &str, p: &Problem) -> f64 {
    let mut out = vec![Placement::default(); p.len()];
    let mut g = GreedyWorkspace::new();
    g.reserve(p.len());
    let size = g.place(p, GreedyRule::BySize, &mut out);
    let bf = g.place(p, GreedyRule::StartBestFit, &mut out);
    let mut ws = GcaWorkspace::new();
    ws.reserve_for(p, 0, 0);
    let t = Instant::now();
    let o = ws.solve(p, &GcaOptions::default(), &mut out);
    let dt = t.elapsed();
    let lb = o.lower_bound as f64;
    println!(
        "{name:>24}  n={:5} LB={:8}  greedy-size {:.3}  best-fit {:.3}  gca {:.3} ({} via {}, {} replays, {:.1} ms)",
        p.len(), o.lower_bound, size as f64 / lb, bf as f64 / lb, o.peak as f64 / lb, o.peak, o.best_rule, o.replays,
        dt.as_secs_f64() * 1e3
    );
    o.peak as f64 / lb
}

fn main() {
    let mut ratios = Vec::new();
    for path in std::env::args().skip(1) {
        ratios.push(report(&path, &load(&path)));
    }
    for n in [100usize, 300, 1000] {
        for seed in 0..3 {
            let mut p = Problem::linear(0, n);
            let mut known = Vec::new();
            perfect_packing(&PerfectPacking::new(n), seed, &mut p, &mut known).expect("instance");
            ratios.push(report(&format!("perfect n={n} seed={seed}"), &p));
        }
    }
    println!(
        "mean gca peak/LB {:.3}",
        ratios.iter().sum::<f64>() / ratios.len() as f64
    );
}
