//! The memory allocators and the register colorer at 1k / 10k / 100k items
//! (1M with `TUSK_BENCH_1M=1` where the allocator is near-linear).
//!
//! `cargo bench -p tusk-benches --bench allocators`

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use tusk_benches::{lsa_buffers, perfect, sizes, sizes_upto};
use tusk_core::dsa::{
    place_buffers, Budget, BufferWorkspace, ExactOptions, ExactWorkspace, GcaOptions, GcaWorkspace,
    Objective, Placement,
};
use tusk_core::gen::dsa::SplitMix64;
use tusk_core::gen::scalar::{scalar_program, ScalarParams};
use tusk_core::pass::best_fit::{BestFitMemoryManager, Request};
use tusk_core::regalloc::{RegAllocConfig, RegAllocator};
use tusk_core::{NoClock, Target};

/// One start-order scan of the 1-D linear scan (`place_buffers`, no
/// capacity-tightening rescans).
fn linear_scan(c: &mut Criterion) {
    let mut g = c.benchmark_group("linear_scan");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in sizes() {
        let bufs = lsa_buffers(n, 1);
        let mut ws = BufferWorkspace::with_capacity(n);
        ws.tighten_rounds = 0;
        let mut off = vec![0u64; n];
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| place_buffers(&bufs, u64::MAX / 4, &mut ws, &mut off).expect("placed"))
        });
    }
    g.finish();
}

/// Best-fit placement in SB geometry: tiles of 128/64/32 partitions and up
/// to 2 KiB per partition, allocated in program order and freed when they
/// die (≈ 32 live at once).
fn best_fit(c: &mut Criterion) {
    let mut g = c.benchmark_group("best_fit_sb");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let target = Target::default();
    for n in sizes() {
        let mut r = SplitMix64::new(3);
        let reqs: Vec<Request> = (0..n as u32)
            .map(|t| Request {
                id: t,
                partitions: [128u16, 64, 32][r.below(3) as usize],
                bytes: 64 * (1 + r.below(32)),
                align: 64,
                birth: t,
                death: t + 1 + r.below(64) as u32,
            })
            .collect();
        // Deaths in time order: (death, id).
        let mut deaths: Vec<(u32, u32)> = reqs.iter().map(|q| (q.death, q.id)).collect();
        deaths.sort_unstable();
        let mut bf = BestFitMemoryManager::new();
        bf.reserve(n, 0);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                bf.reset_sb(&target, n).expect("reserved");
                let mut d = 0;
                let mut refused = 0u32;
                for q in &reqs {
                    while d < deaths.len() && deaths[d].0 <= q.birth {
                        if bf.is_placed(deaths[d].1) {
                            bf.free(deaths[d].1).expect("placed id");
                        }
                        d += 1;
                    }
                    if bf.allocate(q).expect("valid request").is_none() {
                        refused += 1;
                    }
                }
                (bf.peak(), refused)
            })
        });
    }
    g.finish();
}

/// The coloring allocator (GCA: greedy orders plus improvement replays) on
/// perfect-packing instances. Stops at 10k: one 100k solve takes ~8 s with
/// the default improvement budget (BENCHMARKS.md).
fn gca(c: &mut Criterion) {
    let mut g = c.benchmark_group("gca_perfect_packing");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in sizes_upto(10_000) {
        let (p, _) = perfect(n, 1);
        let mut ws = GcaWorkspace::new();
        ws.reserve_for(&p, 0, 0);
        let mut out = vec![Placement::default(); p.len()];
        g.throughput(Throughput::Elements(p.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| ws.solve(&p, &GcaOptions::default(), &mut out).peak)
        });
    }
    g.finish();
}

/// The exact search on small perfect packings (its answer is the lower
/// bound; the node budget caps the unlucky seeds).
fn exact(c: &mut Criterion) {
    let mut g = c.benchmark_group("exact_perfect_packing");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for n in [10usize, 20, 40] {
        let (p, _) = perfect(n, 1);
        let mut ws = ExactWorkspace::new();
        ws.reserve_for(&p);
        let mut out = vec![Placement::default(); p.len()];
        let opts = ExactOptions {
            budget: Budget {
                nodes: Some(200_000),
                micros: None,
            },
            objective: Objective::MinimizePeak,
            ..ExactOptions::default()
        };
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| ws.solve(&p, &opts, &mut NoClock, &mut out).peak)
        });
    }
    g.finish();
}

/// The register colorer on generated SSA scalar programs (pressure 16,
/// K = 62; the module is cloned outside the timing).
fn register_colorer(c: &mut Criterion) {
    let mut g = c.benchmark_group("register_colorer");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut t = Target::default();
    t.set("max-regs", 62).expect("62 registers is in range");
    for n in sizes_upto(100_000) {
        let p = ScalarParams {
            insts: n,
            pressure: 16,
            pair_percent: 10,
            max_life: 64,
            copy_percent: 10,
            loop_every: 200,
            loop_len: 24,
            seed: 7,
        };
        let base = scalar_program(t.clone(), &p).expect("generator");
        let mut ra = RegAllocator::new(&base);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched_ref(
                || base.clone(),
                |m| {
                    ra.allocate(m, &RegAllocConfig::default())
                        .expect("allocates")
                        .spilled_registers
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, linear_scan, best_fit, gca, exact, register_colorer);
criterion_main!(benches);
