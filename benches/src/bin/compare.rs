//! Linear scan vs coloring (GCA) vs exact search on the same inputs, in one
//! run: peak / lower bound and time per instance. Inputs: the public DSA
//! instances (`../shared/data/dsa/*.csv`, skipped when absent) and generated
//! perfect packings (lower bound = capacity = optimum).
//!
//! `cargo run --release -p tusk-benches --bin compare`
//!
//! Times are wall-clock medians of `COMPARE_REPS` (default 5) runs of the
//! linear scan and GCA; the exact search runs once (budget: 5M nodes or
//! `COMPARE_EXACT_MS`, default 2000 ms). `TUSK_DATA` overrides the data
//! directory (default `../shared/data` beside the workspace).

use std::path::Path;
use std::time::Instant;

use tusk_benches::perfect;
use tusk_core::dsa::{
    place_buffers, Budget, Buffer, BufferWorkspace, ExactOptions, ExactWorkspace, GcaOptions,
    GcaWorkspace, Objective, Placement, Problem,
};
use tusk_core::Clock;

/// Wall seconds of `f` (the median over repetitions damps the noise of a
/// shared machine).
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t0 = Instant::now();
    let x = f();
    (x, t0.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The exact search's wall-clock budget.
struct Wall(Instant);
impl Clock for Wall {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

fn load(path: &Path) -> Option<Problem> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut p = Problem::linear(0, 4096);
    for line in text.lines().skip(1) {
        let f: Vec<u64> = line
            .split(',')
            .skip(1)
            .filter_map(|x| x.trim().parse().ok())
            .collect();
        if f.len() == 3 {
            p.push(Buffer::linear(f[0], f[1], f[2])).ok()?;
        }
    }
    Some(p)
}

struct Row {
    name: String,
    n: usize,
    lb: u64,
    lsa: (u64, f64),
    gca: (u64, f64),
    exact: (u64, f64, String),
}

fn run(name: &str, p: &Problem, reps: usize, exact_ms: u64) -> Row {
    let bufs = p.buffers();
    let n = bufs.len();
    // Linear scan: the 1-D `place_buffers` with its default rescans.
    let mut lws = BufferWorkspace::with_capacity(n);
    let mut off = vec![0u64; n];
    let mut lsa_peak = 0;
    let mut lb = 0;
    let lsa_t = median(
        (0..reps)
            .map(|_| {
                let (o, s) = timed(|| place_buffers(bufs, u64::MAX / 4, &mut lws, &mut off));
                let o = o.expect("unbounded capacity fits");
                lsa_peak = o.peak;
                lb = o.lower_bound;
                s
            })
            .collect(),
    );
    // Coloring: GCA with the default options.
    let mut gws = GcaWorkspace::new();
    gws.reserve_for(p, 0, 0);
    let mut out = vec![Placement::default(); n];
    let mut gca_peak = 0;
    let gca_t = median(
        (0..reps)
            .map(|_| {
                let (o, s) = timed(|| gws.solve(p, &GcaOptions::default(), &mut out));
                gca_peak = o.peak;
                s
            })
            .collect(),
    );
    // Exact: minimize the peak within the budget, capacity = GCA's peak.
    let mut q = Problem::linear(gca_peak, n);
    for b in bufs {
        q.push(*b).expect("same buffers");
    }
    let mut ews = ExactWorkspace::new();
    ews.reserve_for(&q);
    let opts = ExactOptions {
        budget: Budget {
            nodes: Some(5_000_000),
            micros: Some(exact_ms * 1000),
        },
        objective: Objective::MinimizePeak,
        ..ExactOptions::default()
    };
    let (o, s) = timed(|| ews.solve(&q, &opts, &mut Wall(Instant::now()), &mut out));
    let status = match o.stopped_by {
        Some(l) => format!("{} ({l})", o.status),
        None => o.status.to_string(),
    };
    Row {
        name: name.to_string(),
        n,
        lb,
        lsa: (lsa_peak, lsa_t),
        gca: (gca_peak, gca_t),
        exact: (o.peak, s, status),
    }
}

fn main() {
    let reps: usize = std::env::var("COMPARE_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let exact_ms: u64 = std::env::var("COMPARE_EXACT_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let data = tusk_shim::shared_data::dir().join("dsa");
    let mut rows = Vec::new();
    match std::fs::read_dir(&data) {
        Ok(dir) => {
            let mut paths: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for path in paths {
                if let Some(p) = load(&path).filter(|p| p.len() > 8) {
                    let name = path.file_name().map(|f| f.to_string_lossy().to_string());
                    rows.push(run(&name.unwrap_or_default(), &p, reps, exact_ms));
                }
            }
        }
        Err(_) => println!("{}: absent, DSA instances skipped", data.display()),
    }
    for n in [20usize, 50, 100, 300, 1000] {
        for seed in 0..3 {
            let (p, _) = perfect(n, seed);
            rows.push(run(&format!("perfect n={n} s={seed}"), &p, reps, exact_ms));
        }
    }
    println!(
        "| instance | buffers | lower bound | LSA peak/LB | LSA ms | GCA peak/LB | GCA ms | exact peak/LB | exact ms | exact status |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let (mut sl, mut sg, mut se) = (0.0, 0.0, 0.0);
    for r in &rows {
        let f = |x: u64| x as f64 / r.lb.max(1) as f64;
        sl += f(r.lsa.0);
        sg += f(r.gca.0);
        se += f(r.exact.0);
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {} |",
            r.name,
            r.n,
            r.lb,
            f(r.lsa.0),
            r.lsa.1 * 1e3,
            f(r.gca.0),
            r.gca.1 * 1e3,
            f(r.exact.0),
            r.exact.1 * 1e3,
            r.exact.2
        );
    }
    let k = rows.len().max(1) as f64;
    println!(
        "| mean | | | {:.3} | | {:.3} | | {:.3} | | |",
        sl / k,
        sg / k,
        se / k
    );
}
