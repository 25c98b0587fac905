//! The scale targets of issue 15 alone: generated trace-like instances
//! (`gen::dsa::trace_like`, seed 1) of 20k, 100k and 1M buffers, each
//! greedy rule and large first timed in one run, with peak / lower bound
//! and workspace bytes per buffer; every answer checked by the independent
//! validator.
//!
//! `cargo run --release -p tusk-benches --bin dsa_trace [N ...]`
//! (default `20000 100000 1000000`). `DSA_TRACE_RULES=size` (or `fit`,
//! `large`) runs one method only (for peak-RSS measurements of one
//! method). `DSA_TRACE_SEEDS=1,2,3` runs those seeds of each size
//! (default: seed 1), so a change is judged on more than one instance.

use std::time::Instant;

use tusk_core::dsa::{
    GreedyRule, GreedyWorkspace, LargeFirstOptions, LargeFirstWorkspace, Placement, Problem,
    Timeline, Validator,
};
use tusk_core::gen::dsa::{trace_like, TraceLike};
use tusk_core::Clock;

struct Wall(Instant);
impl Clock for Wall {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

fn main() {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = vec![20_000, 100_000, 1_000_000];
    }
    let only = std::env::var("DSA_TRACE_RULES").unwrap_or_default();
    let seeds: Vec<u64> = std::env::var("DSA_TRACE_SEEDS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let seeds = if seeds.is_empty() { vec![1] } else { seeds };
    println!("| buffers | seed | method | ms | peak / lower bound | workspace bytes / buffer |");
    println!("|---|---|---|---|---|---|");
    for (n, seed) in sizes
        .iter()
        .flat_map(|&n| seeds.iter().map(move |&s| (n, s)))
    {
        let mut p = Problem::linear(u64::MAX / 8, n);
        trace_like(&TraceLike::new(n), seed, &mut p).expect("generated");
        let lb = p.lower_bound(&mut Timeline::with_capacity(n)).bytes;
        let mut out = vec![Placement::default(); n];
        let mut v = Validator::with_capacity(n, 4);
        let rules = [
            ("size", "greedy by size", GreedyRule::BySize),
            ("fit", "best fit by start", GreedyRule::StartBestFit),
        ];
        for (key, label, rule) in rules {
            if !only.is_empty() && only != key {
                continue;
            }
            let mut g = GreedyWorkspace::new();
            g.reserve_for(&p);
            let t = Instant::now();
            let pk = g.place(&p, rule, &mut out);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(v.check(&p, &out, u64::MAX).total, 0, "illegal placement");
            println!(
                "| {n} | {seed} | {label} | {ms:.0} | {:.4} | {:.0} |",
                pk as f64 / lb as f64,
                g.heap_bytes() as f64 / n as f64
            );
        }
        if only.is_empty() || only == "large" {
            let opts = LargeFirstOptions::default();
            let mut lf = LargeFirstWorkspace::new();
            lf.reserve(&p, &opts);
            let t = Instant::now();
            let o = lf.place(&p, &opts, &mut Wall(t), &mut out);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(v.check(&p, &out, u64::MAX).total, 0, "illegal placement");
            println!(
                "| {n} | {seed} | large first | {ms:.0} | {:.4} | {:.0} |",
                o.peak as f64 / lb as f64,
                lf.heap_bytes() as f64 / n as f64
            );
        }
    }
}
