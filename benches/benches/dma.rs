//! The DMA optimization passes (load merging, dead stores, coalescing,
//! partial DMAs, and PSUM spill removal) on DMA-heavy generated modules,
//! placed by the coloring allocator first as at optlevel 2.
//!
//! `cargo bench -p tusk-benches --bench dma`

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use tusk_benches::{dma_module, place_on_chip, sizes_upto};
use tusk_core::pass::dma::{DmaWorkspace, DMA_OPTIMIZATION_PSUM, DMA_OPTIMIZATION_SB};

fn dma_passes(c: &mut Criterion) {
    let mut g = c.benchmark_group("dma_optimization");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in sizes_upto(100_000) {
        let mut base = dma_module(n, 1);
        place_on_chip(&mut base);
        g.throughput(Throughput::Elements(base.num_live_insts() as u64));
        for (name, pass) in [("psum", DMA_OPTIMIZATION_PSUM), ("sb", DMA_OPTIMIZATION_SB)] {
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter_batched_ref(
                    || {
                        let mut m = base.clone();
                        let mut ws = DmaWorkspace::new();
                        ws.reserve(&mut m);
                        (m, ws)
                    },
                    |(m, ws)| pass.run(m, ws).expect("pass runs").post.descriptors,
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, dma_passes);
criterion_main!(benches);
