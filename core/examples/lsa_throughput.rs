//! Intervals per second of the linear scan's best-fit manager on the 1-D
//! buffer problem, at 1k, 10k, 100k and 1M intervals: ONE scan (code 3, the first
//! of the portfolio, `tighten_rounds = 0`, which also turns the portfolio
//! off). Run in release:
//! `cargo run -p tusk-core --release --example lsa_throughput`.
//!
//! Workload: one buffer starts per time step, lifetimes uniform in 1..=L
//! steps (`LSA_MAX_LIFE`, default L = 2000), sizes uniform in 1..=4096 bytes,
//! from a fixed xorshift seed. About L/2 buffers are live at once in steady
//! state, which a run reaches after about L intervals: with the default the
//! 1k run never does (~420 live on average against ~1000 from 10k on), so
//! its time per interval is that of a ramp-up; `LSA_MAX_LIFE=200` (~100
//! live, a kernel-sized live set) puts every size in steady state.
//!
//! Timing: each size is run `max(5, 2M / n)` times after one warm-up. The machine is shared (other jobs keep its two cores
//! busy), so besides the median wall time per run the example reads the
//! thread's CPU time over the whole batch (`/proc/thread-self/schedstat`,
//! Linux; tick-granular, hence per batch of >= 2M intervals): wall time
//! includes waiting for a core, which at 1M intervals (~0.2 s a run) is most
//! of the noise. M/s and ns/interval are the batch's CPU time per interval
//! when it is available, else the median wall time.

use std::time::Instant;
use tusk_core::dsa::{place_buffers, Buffer, BufferWorkspace};

/// Nanoseconds this thread has spent on a CPU (Linux; None elsewhere).
/// The kernel updates it at scheduler ticks and switches, so it is read
/// around a whole batch of runs (>= 0.4 s), not around one run.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    // `LSA_SIZES=10000,1000000` picks the sizes (e.g. under callgrind);
    // `LSA_RUNS=k` fixes the number of timed runs per size.
    let sizes: Vec<usize> = std::env::var("LSA_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000, 1_000_000]);
    let fixed_runs: Option<usize> = std::env::var("LSA_RUNS")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let max_life: u64 = std::env::var("LSA_MAX_LIFE")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&l| l > 0)
        .unwrap_or(2000);
    for n in sizes {
        let bufs: Vec<Buffer> = (0..n as u64)
            .map(|t| {
                let upper = t + 1 + rnd(max_life);
                Buffer::linear(t, upper, 1 + rnd(4096))
            })
            .collect();
        let mut ws = BufferWorkspace::with_capacity(n);
        ws.tighten_rounds = 0;
        let mut off = vec![0u64; n];
        place_buffers(&bufs, u64::MAX / 4, &mut ws, &mut off).expect("placed");
        let runs = fixed_runs.unwrap_or((2_000_000 / n).max(5));
        let mut wall = Vec::new();
        let mut out = None;
        let c0 = cpu_ns();
        for _ in 0..runs {
            let t0 = Instant::now();
            out = Some(place_buffers(&bufs, u64::MAX / 4, &mut ws, &mut off).expect("placed"));
            wall.push(t0.elapsed().as_secs_f64() * 1e9);
        }
        let c1 = cpu_ns();
        let r = out.expect("ran");
        let wall_ns = median(&mut wall) / n as f64;
        let (ns, basis) = match (c0, c1) {
            (Some(a), Some(b)) if b > a => ((b - a) as f64 / (runs * n) as f64, "cpu"),
            _ => (wall_ns, "wall"),
        };
        println!(
            "{n:>8} intervals: {:>6.2} M intervals/s, {:>6.1} ns/interval ({basis}; wall {:>6.1}), {runs} runs, peak/lb {:.3}",
            1e3 / ns,
            ns,
            wall_ns,
            r.peak as f64 / r.lower_bound as f64
        );
    }
}
