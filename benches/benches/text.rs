//! The text format (std-shim): parsing and printing generated modules,
//! with and without the comment side table of `tusk fmt`.
//!
//! `cargo bench -p tusk-benches --bench text`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use tusk_benches::{module, sizes};
use tusk_shim::text;

fn parse_print(c: &mut Criterion) {
    let mut g = c.benchmark_group("text");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in sizes() {
        let m = module(n, 1);
        let src = text::print(&m);
        g.throughput(Throughput::Bytes(src.len() as u64));
        g.bench_with_input(BenchmarkId::new("parse", n), &n, |b, _| {
            b.iter(|| text::parse(src.as_bytes()).expect("printed text parses"))
        });
        g.bench_with_input(BenchmarkId::new("print", n), &n, |b, _| {
            b.iter(|| text::print(&m).len())
        });
        // What `tusk fmt` does: the comment scan on top of the parse, and
        // the comment printer (on text without comments: `print`).
        g.bench_with_input(BenchmarkId::new("parse_with_comments", n), &n, |b, _| {
            b.iter(|| text::parse_with_comments(src.as_bytes()).expect("printed text parses"))
        });
        let (_, comments) = text::parse_with_comments(src.as_bytes()).expect("printed text parses");
        g.bench_with_input(BenchmarkId::new("print_with_comments", n), &n, |b, _| {
            b.iter(|| text::print_with_comments(&m, &comments).len())
        });
    }
    g.finish();
}

criterion_group!(benches, parse_print);
criterion_main!(benches);
