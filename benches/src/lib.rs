//! Shared inputs of the benchmarks and of the figure binaries: every input
//! is generated from a seed by `tusk_core::gen`, so a figure is reproduced
//! by rerunning the same command.

pub mod ra2;

use std::time::Instant;

use tusk_core::dsa::{Buffer, Placement, Problem};
use tusk_core::gen::dsa::{perfect_packing, PerfectPacking, SplitMix64};
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Module, Space};
use tusk_core::pass::coloring::{self, ColoringOptions, ColoringWorkspace};
use tusk_core::NoClock;

/// The sizes of the scaling benchmarks.
pub const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// True when `TUSK_BENCH_1M` is set: the benchmarks that scale linearly add
/// a 1,000,000 point (off by default to keep `cargo bench` near 10 minutes).
pub fn with_1m() -> bool {
    std::env::var_os("TUSK_BENCH_1M").is_some()
}

/// True under `cargo bench` (criterion's harness gets `--bench`); false
/// under `cargo test --benches`, which runs each benchmark once as a smoke
/// test.
pub fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// [`SIZES`], plus 1M when [`with_1m`]; only the smallest in the smoke run
/// (`cargo test --benches`) so CI stays fast.
pub fn sizes() -> Vec<usize> {
    sizes_upto(usize::MAX)
}

/// [`sizes`] up to `max`.
pub fn sizes_upto(max: usize) -> Vec<usize> {
    if !measuring() {
        return vec![SIZES[0]];
    }
    let mut v: Vec<usize> = SIZES.iter().copied().filter(|&n| n <= max).collect();
    if with_1m() && max >= 1_000_000 {
        v.push(1_000_000);
    }
    v
}

/// `n` interval buffers for the 1-D linear scan: one starts per time unit,
/// lifetimes up to 2000, sizes up to 4 KiB (the `lsa_throughput` workload).
pub fn lsa_buffers(n: usize, seed: u64) -> Vec<Buffer> {
    let mut r = SplitMix64::new(seed);
    (0..n as u64)
        .map(|t| {
            let upper = t + 1 + r.below(2000);
            Buffer::linear(t, upper, 1 + r.below(4096))
        })
        .collect()
}

/// A perfect-packing instance of `n` buffers (capacity = lower bound) and
/// its known packing.
pub fn perfect(n: usize, seed: u64) -> (Problem, Vec<Placement>) {
    let mut p = Problem::linear(0, n);
    let mut known = Vec::new();
    perfect_packing(&PerfectPacking::new(n), seed, &mut p, &mut known)
        .expect("perfect-packing parameters are valid");
    (p, known)
}

/// A generated module of `n` instructions with the default knobs.
pub fn module(n: usize, seed: u64) -> Module {
    generate(&GenParams::new(n, seed)).expect("default generator knobs are valid")
}

/// A generated DMA-heavy module of `n` instructions.
pub fn dma_module(n: usize, seed: u64) -> Module {
    let p = GenParams {
        instructions: n,
        seed,
        ..GenParams::dma_heavy()
    };
    generate(&p).expect("dma-heavy generator knobs are valid")
}

/// Places PSUM and SB of `m` with the coloring allocator (the state the DMA
/// passes and the verifier see at optlevel 2).
pub fn place_on_chip(m: &mut Module) {
    let mut ws = ColoringWorkspace::default();
    ws.reserve(m);
    for s in [Space::Psum, Space::Sb, Space::Dram] {
        coloring::run(m, s, &ColoringOptions::default(), &mut ws, &mut NoClock)
            .expect("generated modules fit");
    }
}

/// Seconds this thread has run on a CPU (`/proc/thread-self/schedstat`),
/// so that figures hold on a machine shared with other jobs; falls back to
/// wall-clock time where the file is absent.
#[derive(Debug)]
pub struct CpuClock(Instant, Option<u64>);

fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

impl CpuClock {
    /// Starts the clock.
    pub fn start() -> Self {
        CpuClock(Instant::now(), thread_cpu_ns())
    }
    /// Seconds since the start.
    pub fn secs(&self) -> f64 {
        match (self.1, thread_cpu_ns()) {
            (Some(a), Some(b)) => (b - a) as f64 * 1e-9,
            _ => self.0.elapsed().as_secs_f64(),
        }
    }
}

/// The `.tusk` files of `examples/<sub>` (`""`: the top folder), sorted,
/// for the figure binaries that tabulate the shipped kernels.
pub fn examples(sub: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(sub);
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "tusk"))
        .collect();
    v.sort();
    v
}

/// The module a text file holds; a figure binary stops on a bad file.
pub fn load(path: &std::path::Path) -> Module {
    let src = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    tusk_shim::text::parse(&src).unwrap_or_else(|e| panic!("{}:{e}", path.display()))
}
