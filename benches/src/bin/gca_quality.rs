//! Peak / lower bound of the coloring allocator (and the greedy baselines)
//! on MiniMalloc CSV files and generated perfect-packing instances.
//! `cargo run --release -p tusk-benches --bin gca_quality -- ../shared/data/dsa/*.csv`
//! (the files are read by the shim's CSV reader, as `tusk dsa` reads them).
use std::time::Instant;
use tusk_core::dsa::{GcaOptions, GcaWorkspace, GreedyRule, GreedyWorkspace, Placement, Problem};
use tusk_core::gen::dsa::{perfect_packing, PerfectPacking};

fn load(path: &str) -> Problem {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    tusk_shim::csv::parse(&bytes)
        .unwrap_or_else(|e| panic!("{path}:{e}"))
        .problem
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
