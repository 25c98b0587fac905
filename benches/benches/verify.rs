//! The checks: the placement verifier and the dataflow checker on modules
//! placed by the coloring allocator, and the whole pipeline for scale.
//!
//! `cargo bench -p tusk-benches --bench verify`

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use tusk_benches::{module, place_on_chip, sizes, sizes_upto};
use tusk_core::verify::{DataflowChecker, Verifier};
use tusk_core::{Checks, NoClock, Options, Workspace};

fn verifier(c: &mut Criterion) {
    let mut g = c.benchmark_group("verifier");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in sizes() {
        let mut m = module(n, 1);
        place_on_chip(&mut m);
        let mut v = Verifier::for_module(&m);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| v.verify(&m).total())
        });
    }
    g.finish();
}

/// The dataflow checker's cost grows with partition rows touched (one
/// interval-map operation per partition row of every placed access), so it
/// stops at 10k here; BENCHMARKS.md has its time at larger sizes.
fn dataflow(c: &mut Criterion) {
    let mut g = c.benchmark_group("dataflow_check");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    for n in sizes_upto(10_000) {
        let orig = module(n, 1);
        let mut m = orig.clone();
        place_on_chip(&mut m);
        let mut d = DataflowChecker::new();
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| d.check(&orig, &m).expect("check runs").is_clean())
        });
    }
    g.finish();
}

/// `tusk run --optlevel 2 --no-verify` without the text I/O.
fn pipeline_o2(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline_o2");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let opts = Options {
        optlevel: 2,
        ..Options::default()
    };
    for n in sizes() {
        let base = module(n, 1);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched_ref(
                || {
                    let mut m = base.clone();
                    let mut ws = Workspace::new();
                    ws.reserve(&mut m, &opts, Checks::None);
                    (m, ws)
                },
                |(m, ws)| {
                    tusk_core::run(m, &opts, ws, &mut NoClock, Checks::None)
                        .expect("generated modules allocate")
                        .pass_micros()
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, verifier, dataflow, pipeline_o2);
criterion_main!(benches);
