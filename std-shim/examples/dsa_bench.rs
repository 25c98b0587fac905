//! Reproducible measurements of the exact placement search (no timed tests).
//!
//! `cargo run --release -p tusk-shim --example dsa_bench -- data DIR`
//!   every `*.csv` in DIR at its file-name capacity, and C.1048576.csv also
//!   at its lower bound; greedy-size and best-fit peak/LB alongside.
//! `cargo run --release -p tusk-shim --example dsa_bench -- gen N SEEDS [BUDGET_MS]`
//!   perfect-packing instances of N buffers, seeds 0..SEEDS: fit rate within
//!   the budget (default 1000 ms) and the distribution of times.

use std::time::Instant;

use tusk_core::dsa::{
    Budget, ExactOptions, ExactWorkspace, GreedyRule, GreedyWorkspace, Objective, Outcome,
    Placement, Problem, Strategy, Timeline, Validator, PREORDERS,
};
use tusk_core::gen::dsa::{perfect_packing, PerfectPacking};
use tusk_shim::dsa::StdClock;

fn exact(problem: &Problem, budget_ms: u64) -> (Outcome, f64) {
    let mut ws = ExactWorkspace::new();
    ws.reserve_for(problem);
    let mut out = vec![Placement::default(); problem.len()];
    let options = ExactOptions {
        budget: Budget {
            nodes: std::env::var("DSA_BUDGET_NODES")
                .ok()
                .and_then(|s| s.parse().ok()),
            micros: Some(budget_ms * 1000),
        },
        objective: Objective::Fit,
        strategy: strategy(),
    };
    let t = Instant::now();
    let o = ws.solve(problem, &options, &mut StdClock(t), &mut out);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let mut v = Validator::with_capacity(problem.len(), 4);
    let cap = if o.status.fits() {
        problem.capacity
    } else {
        u64::MAX
    };
    let check = v.check(problem, &out, cap);
    assert_eq!(check.total, 0, "invalid placement: {:?}", v.findings());
    (o, ms)
}

/// The search strategy, from `DSA_STRATEGY` (skyline, or canonical0..2 for
/// one preorder of the canonical search; default the portfolio).
fn strategy() -> Strategy {
    match std::env::var("DSA_STRATEGY").as_deref() {
        Ok("skyline") => Strategy::Skyline,
        Ok(s) if s.starts_with("canonical") => {
            let i: usize = s["canonical".len()..].parse().unwrap_or(0);
            Strategy::Canonical(PREORDERS[i % PREORDERS.len()])
        }
        _ => Strategy::Portfolio,
    }
}

fn greedy(problem: &Problem, rule: GreedyRule) -> u64 {
    let mut ws = GreedyWorkspace::new();
    ws.reserve(problem.len());
    let mut out = vec![Placement::default(); problem.len()];
    ws.place(problem, rule, &mut out)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("data") => {
            let dir = args
                .get(1)
                .cloned()
                .unwrap_or_else(|| "../shared/data/dsa".into());
            let mut files: Vec<_> = std::fs::read_dir(&dir)
                .expect("data folder")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .collect();
            files.sort();
            println!("file | n | capacity | LB | greedy-size/LB | best-fit/LB | exact peak | status | ms");
            for f in files {
                let bytes = std::fs::read(&f).expect("read");
                let mut t = tusk_shim::csv::parse(&bytes).expect("parse");
                let cap = tusk_shim::csv::capacity_from_name(&f).expect("capacity in name");
                let lb = t.problem.lower_bound(&mut Timeline::default()).bytes;
                let mut caps = vec![cap];
                if lb < cap {
                    caps.push(lb);
                }
                for c in caps {
                    t.problem.capacity = c;
                    let gs = greedy(&t.problem, GreedyRule::BySize);
                    let bf = greedy(&t.problem, GreedyRule::StartBestFit);
                    let budget = std::env::var("DSA_BUDGET_MS")
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(10_000);
                    let (o, ms) = exact(&t.problem, budget);
                    println!(
                        "{} | {} | {c} | {lb} | {:.4} | {:.4} | {} | {} {:?} nodes {} | {ms:.2}",
                        f.file_name().unwrap_or_default().to_string_lossy(),
                        t.problem.len(),
                        gs as f64 / lb as f64,
                        bf as f64 / lb as f64,
                        o.peak,
                        o.status,
                        o.stopped_by,
                        o.nodes,
                    );
                }
            }
        }
        Some("gen") => {
            let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100);
            let seeds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
            let budget: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1000);
            let mut times = Vec::new();
            let mut fit = 0;
            let (mut gs_sum, mut bf_sum) = (0.0, 0.0);
            for seed in 0..seeds {
                let mut p = Problem::linear(0, n);
                let mut known = Vec::new();
                perfect_packing(&PerfectPacking::new(n), seed, &mut p, &mut known).expect("gen");
                gs_sum += greedy(&p, GreedyRule::BySize) as f64 / p.capacity as f64;
                bf_sum += greedy(&p, GreedyRule::StartBestFit) as f64 / p.capacity as f64;
                let (o, ms) = exact(&p, budget);
                if o.status.fits() {
                    fit += 1;
                }
                println!(
                    "n={n} seed={seed} status={} peak/LB={:.4} nodes={} ms={ms:.2}",
                    o.status,
                    o.peak as f64 / o.lower_bound as f64,
                    o.nodes
                );
                times.push(ms);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "n={n}: fit {fit}/{seeds} within {budget} ms; time ms min {:.2} median {:.2} p90 {:.2} p95 {:.2} max {:.2}; mean greedy-size/LB {:.4}, best-fit/LB {:.4}",
                times[0],
                quantile(&times, 0.5),
                quantile(&times, 0.9),
                quantile(&times, 0.95),
                times[times.len() - 1],
                gs_sum / seeds as f64,
                bf_sum / seeds as f64,
            );
        }
        _ => eprintln!("usage: dsa_bench data DIR | gen N SEEDS [BUDGET_MS]"),
    }
}
