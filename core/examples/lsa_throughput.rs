//! Intervals per second of the linear scan's best-fit manager on the 1-D
//! buffer problem, at 1k, 10k, 100k and 1M intervals (one scan, no
//! tightening rounds). Run in release:
//! `cargo run -p tusk-core --release --example lsa_throughput`.
//!
//! Workload: one buffer starts per time step, lifetimes uniform in 1..=2000
//! steps, sizes uniform in 1..=4096 bytes (about 1000 buffers live at once),
//! from a fixed xorshift seed.

use std::time::Instant;
use tusk_core::mem::lsa::{place_buffers, Buffer, BufferWorkspace};

fn main() {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    // `LSA_SIZES=10000,1000000` picks the sizes (e.g. under callgrind).
    let sizes: Vec<usize> = std::env::var("LSA_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000, 1_000_000]);
    for n in sizes {
        let bufs: Vec<Buffer> = (0..n as u64)
            .map(|t| Buffer {
                lower: t,
                upper: t + 1 + rnd(2000),
                size: 1 + rnd(4096),
                align: 1,
            })
            .collect();
        let mut ws = BufferWorkspace::with_capacity(n);
        ws.tighten_rounds = 0;
        let mut off = vec![0u64; n];
        // Warm up once, then time the best of three.
        place_buffers(&bufs, u64::MAX / 4, &mut ws, &mut off).expect("placed");
        let mut best = f64::MAX;
        let mut out = None;
        for _ in 0..3 {
            let t0 = Instant::now();
            out = Some(place_buffers(&bufs, u64::MAX / 4, &mut ws, &mut off).expect("placed"));
            best = best.min(t0.elapsed().as_secs_f64());
        }
        let r = out.expect("ran");
        println!(
            "{n:>8} intervals: {:>7.2} M intervals/s, {:>6.1} ns/interval, peak/lb {:.3}",
            n as f64 / best / 1e6,
            best * 1e9 / n as f64,
            r.peak as f64 / r.lower_bound as f64
        );
    }
}
