//! The passes allocate nothing once the workspace is reserved (issue 8,
//! item 1; STYLE: "a pass does no heap allocation while it runs").
//!
//! A counting `#[global_allocator]` counts allocations and reallocations of
//! the current thread while a thread-local flag is armed (the test harness
//! runs tests on several threads; counting per thread keeps them apart).
//! For every pipeline — optlevels 0, 1, 2, 3, 6, 7, 8, `--allocator lsa` at
//! 6, `--allocator exact`, `--dma-affinity on` at 2 and 6, each ending in the register colorer and its DRAM
//! spill-slot placement, the DMA passes inside 1/2/3/6/7/8 — over generated
//! modules of several shapes (default kernels, loop-heavy, memory-tight ones
//! that make every allocator spill, a target with a small SB, the DMA-heavy
//! presets of `gen::module` and `gen::dma`), the test calls
//! `Workspace::reserve`, arms the counter, runs `pipeline::run` with
//! `no_verify: true` and `original = None`, disarms it and asserts the count
//! is zero.
//!
//! What is counted: exactly the passes (`pipeline::run` with the final
//! checks off; optlevel 7's `check_in_place` is a pass and is counted).
//! What is not: the checks after the run. They still run, outside the
//! counted section, on every result: the placement verifier and the dataflow
//! checker against the input, so a pass that stopped allocating by doing
//! less is caught. (The dataflow checker's capacity is an estimate that it
//! may grow and retry, see `pipeline::run`; it is a check, not a pass.)
//!
//! Optlevel 7 takes a placed module: optlevel 2 runs first (uncounted), then
//! optlevel 7 on its result with a workspace reserved for that result.
//!
//! `TUSK_ALLOC_TRACE=1 cargo test -p tusk-tests --test alloc_free` prints
//! the backtrace of every counted allocation, to find the pass that made it.
#![allow(unsafe_code)] // `unsafe impl GlobalAlloc`: the only way to count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Instant;

use tusk_core::gen::dma::{dma_heavy, DmaGenParams};
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::Module;
use tusk_core::options::{Allocator, DmaAffinity, Pass};
use tusk_core::verify::{DataflowCapacity, DataflowChecker, DataflowError, Verifier};
use tusk_core::{Checks, Clock, Options, Target, Workspace};

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static TRACE: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting the armed thread's allocations and
/// reallocations (frees are not counted: they cannot exhaust a fixed arena).
struct Counting;

impl Counting {
    fn note() {
        // `try_with`: a thread being torn down has no thread-locals left.
        let armed = ARMED.try_with(|a| a.get()).unwrap_or(false);
        if !armed {
            return;
        }
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        if TRACE.try_with(|t| t.get()).unwrap_or(false) {
            // Disarmed while the backtrace (which allocates) is taken.
            ARMED.with(|a| a.set(false));
            eprintln!(
                "counted allocation at\n{}",
                std::backtrace::Backtrace::force_capture()
            );
            ARMED.with(|a| a.set(true));
        }
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Counting::note();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Counting::note();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Counting::note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap allocations and reallocations `f` makes on this thread.
fn count<R>(f: impl FnOnce() -> R) -> (R, u64) {
    COUNT.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    let r = f();
    ARMED.with(|a| a.set(false));
    (r, COUNT.with(|c| c.get()))
}

/// Wall time for the passes' budgets (reading it does not allocate).
struct Wall(Instant);

impl Clock for Wall {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// The generated inputs: name and module.
fn modules() -> Vec<(&'static str, Module)> {
    let gen = |p: GenParams| generate(&p).expect("the generator's presets are valid");
    // A small SB and register file: the memory allocators and the
    // register colorer must spill.
    let mut small = Target::default();
    small
        .set("sb-bytes", 8 * 1024)
        .expect("8 KiB is a legal SB size");
    small
        .set("max-regs", 6)
        .expect("6 is a legal register count");
    let mut tight_sb = Target::default();
    tight_sb
        .set("sb-bytes", 96 * 1024)
        .expect("96 KiB is a legal SB size");
    vec![
        ("default", gen(GenParams::new(150, 1))),
        (
            "loops",
            gen(GenParams {
                loop_pct: 100,
                max_loop_depth: 3,
                ..GenParams::new(150, 2)
            }),
        ),
        (
            "small-target",
            gen(GenParams {
                target: small,
                live_scalars: 12,
                scalar_pct: 30,
                // Tiles of at most 1 KiB, so that what one instruction
                // touches with the resident and an abutting group (up to
                // six tiles) fits the 8 KiB SB: a 4 KiB resident and two
                // 4 KiB tiles of one step cannot be placed at all.
                tile_bytes: [512, 512, 1024, 1024],
                ..GenParams::new(150, 4)
            }),
        ),
        (
            // The memory-tight preset on an SB of 96 KiB (three 32 KiB tiles
            // accessed at once need exactly that). At this size it need not
            // make the memory allocators spill: see the note at the
            // assertions below.
            "tight",
            gen(GenParams {
                instructions: 150,
                seed: 3,
                accumulators: 4,
                target: tight_sb,
                ..GenParams::tight()
            }),
        ),
        (
            // Nine accumulators over eight PSUM banks: every allocator
            // splits accumulators at every access (the scan from its
            // restart point), with slots in SB.
            "psum-over-banks",
            gen(GenParams {
                instructions: 300,
                seed: 1,
                ..GenParams::tight()
            }),
        ),
        (
            "dma-heavy",
            gen(GenParams {
                instructions: 150,
                seed: 5,
                ..GenParams::dma_heavy()
            }),
        ),
        (
            // A real kernel at its SB floor: the linear scan restarts after
            // access splits (from its restart point), which must not
            // allocate either.
            "conv1d-at-floor",
            {
                let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../examples/conv1d.tusk");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let mut m = tusk_tests::harness::parse(&text);
                let floor = tusk_core::analysis::Floor::of(&m)
                    .space(tusk_core::ir::Space::Sb)
                    .bytes;
                m.target
                    .set("sb-bytes", floor)
                    .expect("the floor is a legal SB size");
                m
            },
        ),
        (
            "gen-dma",
            dma_heavy(
                Target::default(),
                DmaGenParams {
                    dmas: 120,
                    seed: 6,
                    ..DmaGenParams::default()
                },
            )
            .expect("the DMA generator's defaults are valid"),
        ),
    ]
}

/// The pipelines: a name and the options (verification off: it is checked
/// after the counted section).
fn pipelines() -> Vec<(&'static str, Options)> {
    let o = |optlevel: u8, allocator: Allocator| Options {
        optlevel,
        allocator,
        ..Options::default()
    };
    vec![
        ("opt0", o(0, Allocator::Default)),
        ("opt1", o(1, Allocator::Default)),
        ("opt2", o(2, Allocator::Default)),
        ("opt3", o(3, Allocator::Default)),
        ("opt6", o(6, Allocator::Default)),
        ("opt6 lsa", o(6, Allocator::Lsa)),
        ("opt7", o(7, Allocator::Default)),
        ("opt8", o(8, Allocator::Default)),
        ("opt2 exact", o(2, Allocator::Exact)),
        (
            "opt2 dma-affinity",
            Options {
                dma_affinity: DmaAffinity::On,
                ..o(2, Allocator::Default)
            },
        ),
        (
            "opt6 dma-affinity",
            Options {
                dma_affinity: DmaAffinity::On,
                ..o(6, Allocator::Default)
            },
        ),
        // A device's budget: the scan restarts with a share of its
        // headroom, the colorers' methods cut to what the budget leaves.
        (
            "opt8 --max-memory 8M",
            Options {
                storage_limit: Some(8 << 20),
                ..o(8, Allocator::Default)
            },
        ),
        (
            "opt2 --max-memory 8M",
            Options {
                storage_limit: Some(8 << 20),
                ..o(2, Allocator::Default)
            },
        ),
    ]
}

/// The checks the pipeline skipped: a legal placement that computes what
/// the input computes.
fn check(what: &str, original: &Module, m: &Module) {
    let mut v = Verifier::for_module(m);
    let r = v.verify(m);
    if let Some(first) = r.findings.first() {
        panic!(
            "{what}: {} verifier finding(s), the first: {}",
            r.total(),
            first.display(m)
        );
    }
    let mut d = DataflowChecker::new();
    let mut cap = DataflowCapacity::estimate(original, m);
    for _ in 0..8 {
        match d.check(original, m) {
            Err(DataflowError::Capacity { .. }) => {
                cap.runs *= 4;
                cap.scratch *= 4;
                d.reserve(cap);
            }
            Err(e) => panic!("{what}: the dataflow check could not run: {e}"),
            Ok(rep) => {
                assert!(
                    rep.is_clean(),
                    "{what}: the dataflow check found mismatches"
                );
                return;
            }
        }
    }
    panic!("{what}: the dataflow checker ran out of capacity");
}

#[test]
fn passes_do_not_allocate_after_reserve() {
    TRACE.with(|t| t.set(std::env::var_os("TUSK_ALLOC_TRACE").is_some()));
    let mut clock = Wall(Instant::now());
    let mut leaks = Vec::new();
    let mut runs = 0;
    let (mut spills, mut reg_spilled, mut rewrites, mut restarts) = (0, 0, 0, 0);
    let mut psum_spills = 0;
    let (mut portfolios, mut beside_scan) = (0, 0);
    for (mname, input) in modules() {
        for (pname, opts) in pipelines() {
            let what = format!("{pname} on {mname}");
            let mut m = input.clone();
            if opts.optlevel == 7 {
                // Optlevel 7 works on fixed addresses: place with opt 2.
                let first = Options {
                    optlevel: 2,
                    ..opts
                };
                let mut ws = Workspace::new();
                ws.reserve(&mut m, &first, Checks::None);
                tusk_core::run(&mut m, &first, &mut ws, &mut clock, Checks::None)
                    .unwrap_or_else(|e| panic!("opt2 before {what}: {}", e.display(&m)));
            }
            let placed_input = m.clone();
            let mut ws = Workspace::new();
            // Every other run drops each pass's storage once spent (the
            // driver's mode): frees are not counted, the results are checked
            // the same.
            ws.set_release_spent(runs % 2 == 1);
            ws.reserve(&mut m, &opts, Checks::None);
            let (r, n) = count(|| tusk_core::run(&mut m, &opts, &mut ws, &mut clock, Checks::None));
            let r = r.unwrap_or_else(|e| panic!("{what}: {}", e.display(&m)));
            runs += 1;
            // What the passes did, so that the spill and DMA paths are seen
            // to run: memory spills, register spills, DMA rewrites.
            let mem_spills: u32 = r.spaces.iter().map(|s| s.spills).sum();
            let reg_spills = r.reg.map_or(0, |g| g.spilled_registers);
            let dma: u32 = r
                .dma
                .iter()
                .flatten()
                .map(|d| {
                    d.loads_merged
                        + d.loads_transformed
                        + d.stores_removed
                        + d.coalesced_dmas
                        + d.partial_shrunk
                        + d.psum_spills_removed
                })
                .sum();
            println!(
                "{what:24} {n} allocation(s) during the passes \
                 (memory spills {mem_spills}, register spills {reg_spills}, DMA rewrites {dma})"
            );
            spills += mem_spills;
            psum_spills += r.space(tusk_core::ir::Space::Psum).spills;
            portfolios += r.sb_portfolio.is_some() as u32;
            let scan_first = r.passes.first().map(|p| p.pass) == Some(Pass::LinearScan);
            beside_scan += (r.sb_portfolio.is_some() && scan_first) as u32;
            restarts += r.lsa.as_ref().map_or(0, |l| l.restarts.restarts);
            reg_spilled += reg_spills;
            rewrites += dma;
            if n != 0 {
                leaks.push(format!("{what}: {n}"));
            }
            check(&what, &placed_input, &m);
        }
    }
    assert!(runs > 0);
    // The shapes are chosen so that the growing paths run: spill code in
    // memory and registers, DMA rewrites that add and drop instructions.
    // Memory spills: whether one of these small modules makes a memory
    // allocator spill changes with the generator's draws (the count is
    // printed above), so it is not asserted; the spill paths' growth is
    // covered by reserving to `Module::capacity`.
    let _ = spills;
    assert!(reg_spilled > 0, "the register colorer spilled on no module");
    assert!(rewrites > 0, "the DMA passes rewrote nothing");
    assert!(restarts > 0, "the linear scan restarted on no module");
    assert!(psum_spills > 0, "no allocator spilled in PSUM");
    assert!(
        portfolios > beside_scan,
        "the linear scan ran beside the SB colorer on no module"
    );
    assert!(
        beside_scan > 0,
        "the colorer ran beside the linear scan on no module"
    );
    assert!(
        leaks.is_empty(),
        "heap allocations while the passes ran (rerun with TUSK_ALLOC_TRACE=1 for backtraces):\n  {}",
        leaks.join("\n  ")
    );
}

#[test]
fn the_counter_counts() {
    // The test above proves nothing if the counter misses allocations.
    let (v, n) = count(|| {
        let mut v: Vec<u64> = Vec::with_capacity(1);
        v.extend([1, 2, 3]);
        v
    });
    assert_eq!(v.len(), 3);
    assert!(n >= 2, "one allocation and one reallocation, counted {n}");
    let ((), n) = count(|| ());
    assert_eq!(n, 0);
}

/// The CFG colorer allocates nothing once its tables are sized for a
/// function (issue 19): generated CFGs at pressures below and above K,
/// with pairs and tied operands, so the spill rounds, the splitting and the
/// edge-copy sequencing all run inside the counted call. The checker runs
/// on every result, outside it.
#[test]
fn cfg_colorer_does_not_allocate_after_reserve() {
    use tusk_core::gen::cfg::{cfg_function, CfgParams};
    use tusk_core::regalloc::{CfgAllocator, CfgChecker};
    let mut checker = CfgChecker::new();
    for (seed, pressure, pairs, k) in [(1u64, 12u32, 0u32, 16u16), (2, 40, 0, 16), (3, 30, 20, 24)]
    {
        let f = cfg_function(&CfgParams {
            insts: 3_000,
            pressure,
            pair_percent: pairs,
            tied_percent: 10,
            seed,
            ..CfgParams::default()
        });
        let mut a = CfgAllocator::new();
        // The reserve: one sizing run (the interference edges are known
        // only once the liveness ran).
        let warm = a.allocate_growing(&f, k).map(|o| o.stats).unwrap();
        let (r, n) = count(|| a.allocate(&f, k).map(|o| o.stats));
        let stats = r.unwrap();
        assert_eq!(n, 0, "seed {seed}: {n} allocations after reserve");
        assert_eq!(stats, warm);
        checker.check(&f, a.allocation()).unwrap();
        if pressure > k as u32 {
            assert!(stats.spills > 0, "seed {seed} should spill");
        }
    }
}
