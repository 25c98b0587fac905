//! End to end (issue 6, item 5): every example under `examples/` through
//! every optlevel and allocator the selection map allows, the hand-placed
//! copies under `examples/placed/` through optlevel 7, and generated modules
//! (default, DMA-heavy and constructs presets, a few seeds) through every
//! optlevel; together the generated modules hold every construct of the IR
//! (element types and conversions, tiles moving with loops on either side,
//! register offsets, partition steps and broadcasts, reductions,
//! transposes, scans, bias and scale columns).
//!
//! Each run goes through `pipeline::run` with a copy of the input, so the
//! placement verifier (every space and the registers) and the dataflow
//! checker (original against allocated) run after the passes; a run passes
//! only when both are clean. Optlevel 7 takes the placements given in the
//! input, so a generated module reaches it as the printed result of an
//! optlevel-2 run, re-parsed: the fixed-assignment mode must accept what the
//! pipeline itself produced.

use std::path::{Path, PathBuf};

use tusk_core::gen::module::{generate, Census, GenParams};
use tusk_core::ir::{MemFlags, Module, Space, NO_LANE};
use tusk_core::options::{Allocator, DmaAffinity, Rotation};
use tusk_core::{Checks, Options, RunReport, Workspace};
use tusk_shim::text;
use tusk_tests::harness::Ticks;

fn examples(sub: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(sub);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tusk"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no examples in {}", dir.display());
    v
}

fn load(path: &Path) -> Module {
    let src = std::fs::read(path).unwrap();
    text::parse(&src).unwrap_or_else(|e| panic!("{}:{e}", path.display()))
}

/// The selections of the end-to-end matrix on unplaced input: every
/// optlevel but 7, LSA at 6, and the exact search at 2.
fn selections() -> Vec<(String, Options)> {
    let mut v = Vec::new();
    for o in [0u8, 1, 2, 3, 6, 8] {
        v.push((
            format!("--optlevel {o}"),
            Options {
                optlevel: o,
                ..Options::default()
            },
        ));
    }
    v.push((
        "--optlevel 6 --allocator lsa".into(),
        Options {
            optlevel: 6,
            allocator: Allocator::Lsa,
            ..Options::default()
        },
    ));
    // Address rotation re-places after allocation: both checks see its
    // result like any allocator's.
    for (flags, optlevel, allocator, rotation) in [
        (
            "--optlevel 2 --rotation psum",
            2,
            Allocator::Default,
            Rotation::Psum,
        ),
        (
            "--optlevel 6 --allocator lsa --rotation psum",
            6,
            Allocator::Lsa,
            Rotation::Psum,
        ),
        // SB rotation moves tiles after the SB allocator, before the
        // DMA passes: every allocator's placement goes through it.
        (
            "--optlevel 2 --rotation all",
            2,
            Allocator::Default,
            Rotation::All,
        ),
        (
            "--optlevel 6 --rotation all",
            6,
            Allocator::Default,
            Rotation::All,
        ),
        (
            "--optlevel 8 --rotation all",
            8,
            Allocator::Default,
            Rotation::All,
        ),
    ] {
        v.push((
            flags.into(),
            Options {
                optlevel,
                allocator,
                rotation,
                ..Options::default()
            },
        ));
    }
    v.push((
        "--optlevel 2 --allocator exact".into(),
        Options {
            optlevel: 2,
            allocator: Allocator::Exact,
            ..Options::default()
        },
    ));
    for (flags, optlevel, allocator) in [
        ("--optlevel 2 --dma-affinity on", 2, Allocator::Default),
        ("--optlevel 3 --dma-affinity on", 3, Allocator::Default),
        ("--optlevel 6 --dma-affinity on", 6, Allocator::Default),
        (
            "--optlevel 2 --allocator exact --dma-affinity on",
            2,
            Allocator::Exact,
        ),
    ] {
        v.push((
            flags.into(),
            Options {
                optlevel,
                allocator,
                dma_affinity: DmaAffinity::On,
                ..Options::default()
            },
        ));
    }
    v
}

/// Runs `opts` on `m` with the checks on; returns the report or the
/// failure's message.
fn run_checked(m: &mut Module, opts: &Options) -> Result<RunReport, String> {
    let original = m.clone();
    let mut ws = Workspace::new();
    ws.reserve(m, opts, Checks::Full { input: &original });
    tusk_core::run(
        m,
        opts,
        &mut ws,
        &mut Ticks::per_read(1000),
        Checks::Full { input: &original },
    )
    .map_err(|e| e.display(m).to_string())
}

/// What every successful run must show: the checks ran clean, every
/// location the program accesses is placed (except DRAM inputs and outputs,
/// which the runtime places), every register it uses has a lane, and in
/// every space the peak is at least the lower bound, both of the result.
fn assert_complete(what: &str, m: &Module, r: &RunReport) {
    assert!(r.verified(), "{what}: the checks did not run");
    for s in Space::ALL {
        let x = r.space(s);
        assert!(
            x.peak >= x.lower_bound,
            "{what}: {} peak {} below its lower bound {} (input's bound {})",
            s.upper(),
            x.peak,
            x.lower_bound,
            x.input_lower_bound
        );
    }
    let s = r.schedule.as_ref().expect("the schedule model ran");
    assert!(s.makespan >= s.makespan_unlimited, "{what}: model loss < 0");
    if let Some(x) = r.rotation {
        assert!(
            x.banks_after <= m.target.psum_usable_banks as u32,
            "{what}: rotated past capacity"
        );
    }
    assert!(r.reg.is_some(), "{what}: the register colorer did not run");
    for i in m.program_order() {
        for a in m.all_aps(i) {
            let v = m.aps().loc[a];
            let external = m.mems().space[v] == Space::Dram
                && m.mems().flags[v].intersects(MemFlags::INPUT | MemFlags::OUTPUT);
            assert!(
                external || m.is_placed(v),
                "{what}: location {} left unplaced",
                m.mem_name(v)
            );
        }
        for &x in m.uses(i).iter().chain(m.defs(i)) {
            assert_ne!(
                m.regs().lane[x],
                NO_LANE,
                "{what}: register {} left without a lane",
                m.reg_name(x)
            );
        }
    }
}

#[test]
fn every_example_through_every_optlevel() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for path in examples("") {
        let input = load(&path);
        for (flags, opts) in selections() {
            let mut m = input.clone();
            let what = format!("{} {flags}", path.display());
            match run_checked(&mut m, &opts) {
                Ok(r) => {
                    assert_complete(&what, &m, &r);
                    runs += 1;
                }
                Err(e) => failures.push(format!("{what}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("{runs} example runs verified");
}

#[test]
fn every_placed_example_at_optlevel_7() {
    let opts = Options {
        optlevel: 7,
        ..Options::default()
    };
    for path in examples("placed") {
        let input = load(&path);
        let mut m = input.clone();
        let what = format!("{} --optlevel 7", path.display());
        let r = run_checked(&mut m, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_complete(&what, &m, &r);
        // Every location the input placed stays where the input put it.
        for v in input.mems().space.keys() {
            if input.is_placed(v) {
                assert_eq!(
                    (m.mems().space[v], m.mems().offset[v]),
                    (input.mems().space[v], input.mems().offset[v]),
                    "{what}: location {v:?} moved"
                );
            }
        }
    }
}

/// Small generated modules: the default, the DMA-heavy and the constructs
/// preset.
fn generated() -> Vec<(String, Module)> {
    let mut v = Vec::new();
    for seed in [1u64, 2, 3] {
        let p = GenParams {
            instructions: 300,
            seed,
            ..GenParams::constructs()
        };
        v.push((format!("constructs seed {seed}"), generate(&p).unwrap()));
        let p = GenParams {
            instructions: 300,
            seed,
            ..GenParams::default()
        };
        v.push((format!("default seed {seed}"), generate(&p).unwrap()));
        let p = GenParams {
            instructions: 300,
            seed,
            ..GenParams::dma_heavy()
        };
        v.push((format!("dma_heavy seed {seed}"), generate(&p).unwrap()));
    }
    v
}

#[test]
fn generated_modules_through_every_optlevel() {
    let modules = generated();
    let mut census = Census::default();
    for (_, m) in &modules {
        census.add(&Census::of(m));
    }
    let missing: Vec<&str> = census.missing().collect();
    assert!(
        missing.is_empty(),
        "the generated modules have no {missing:?}"
    );
    let mut failures = Vec::new();
    for (name, input) in modules {
        for (flags, opts) in selections() {
            let mut m = input.clone();
            let what = format!("generated {name} {flags}");
            match run_checked(&mut m, &opts) {
                Ok(r) => assert_complete(&what, &m, &r),
                Err(e) => failures.push(format!("{what}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generated_modules_placed_by_optlevel_2_pass_optlevel_7() {
    for (name, input) in generated() {
        let mut m = input.clone();
        let o2 = Options::default();
        run_checked(&mut m, &o2).unwrap_or_else(|e| panic!("generated {name} opt 2: {e}"));
        // Through text, as a user would hand it back.
        let printed = text::print(&m);
        let mut placed =
            text::parse_str(&printed).unwrap_or_else(|e| panic!("generated {name}: re-parse: {e}"));
        let o7 = Options {
            optlevel: 7,
            ..Options::default()
        };
        let what = format!("generated {name} placed at opt 2, then --optlevel 7");
        let r = run_checked(&mut placed, &o7).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_complete(&what, &placed, &r);
    }
}

/// `--dma-affinity on` against off on every example and generated module
/// at optlevel 2: never a spill the plain placement did not have, an SB
/// peak within the colorer's 5% slack of the plain one, never more DMA
/// descriptors after the DMA passes, and the checks clean (`run_checked`).
#[test]
fn dma_affinity_costs_no_spill_and_never_adds_descriptors() {
    let mut inputs: Vec<(String, Module)> = examples("")
        .iter()
        .map(|p| (p.display().to_string(), load(p)))
        .collect();
    inputs.extend(generated());
    let mut honoured = 0;
    for (name, input) in inputs {
        let mut runs = Vec::new();
        for a in [DmaAffinity::Off, DmaAffinity::On] {
            let opts = Options {
                dma_affinity: a,
                ..Options::default()
            };
            let mut m = input.clone();
            let r = run_checked(&mut m, &opts).unwrap_or_else(|e| panic!("{name} {a:?}: {e}"));
            assert_complete(&format!("{name} {a:?}"), &m, &r);
            runs.push((r, tusk_core::report::dma_analysis(&m).descriptors));
        }
        let ((off, d_off), (on, d_on)) = (&runs[0], &runs[1]);
        let (so, sn) = (off.space(Space::Sb), on.space(Space::Sb));
        assert!(
            sn.spills <= so.spills,
            "{name}: {} spills, off {}",
            sn.spills,
            so.spills
        );
        assert!(
            sn.peak * 100 <= so.peak * 105,
            "{name}: SB peak {} with affinities, {} without",
            sn.peak,
            so.peak
        );
        assert!(d_on <= d_off, "{name}: {d_on} descriptors, off {d_off}");
        assert!(off.coloring[Space::Sb.slot()]
            .and_then(|c| c.affinity)
            .is_none());
        let a = on.coloring[Space::Sb.slot()]
            .and_then(|c| c.affinity)
            .unwrap_or_else(|| panic!("{name}: no affinity report"));
        honoured += a.honoured;
    }
    assert!(honoured > 0, "no affinity was honoured anywhere");
}
