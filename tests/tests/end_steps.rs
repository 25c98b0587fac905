//! The end steps of a run (the schedule model, the placement verifier, the
//! dataflow check) side by side on threads (`tusk_shim::run::end_concurrently`,
//! what `tusk run` does on a machine with a second core) against the steps
//! run in order (what `tusk_core::run` does), on allocated generated modules
//! with planted violations of either check: the same result, report and
//! error, field for field.

use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Module, Opcode, Space};
use tusk_core::{Checks, Options, PipelineError, RunReport, Workspace};
use tusk_shim::split::ThreadSplit;
use tusk_tests::harness::Ticks;

type Plant = fn(&mut Module);

fn nth_of(m: &Module, op: Opcode, frac: usize) -> tusk_core::ir::Inst {
    let all: Vec<_> = m
        .program_order()
        .filter(|&i| m.insts().opcode[i] == op)
        .collect();
    all[(all.len() - 1) * frac / 100]
}

/// The result with the clock's readings zeroed (both runs read the clock a
/// different number of times), as text: every other field compared.
fn verdict(r: Result<RunReport, PipelineError>) -> String {
    match r {
        Ok(mut r) => {
            r.checks_micros = r.checks_micros.map(|_| 0);
            for p in &mut r.passes {
                p.micros = 0;
            }
            format!("{r:?}")
        }
        Err(e) => format!("error {e:?}"),
    }
}

/// Runs `opts`' passes on a copy of `orig`, plants `plant` in the result,
/// and ends the run in order or concurrently.
fn end(orig: &Module, opts: &Options, plant: Plant, concurrent: bool) -> String {
    let mut m = orig.clone();
    // What the driver holds through the passes: a copy without the name
    // index (its storage part is then the deferred input's, byte for byte).
    let input = orig.read_only_copy();
    let mut ws = Workspace::new();
    ws.set_release_spent(true);
    ws.set_split_runner(Some(Box::new(ThreadSplit)));
    let mut clock = Ticks::per_read(1);
    let checks = Checks::Full { input: &input };
    let passed = ws
        .reserve(&mut m, opts, checks)
        .run_passes(&mut clock)
        .unwrap_or_else(|e| panic!("{}", e.display(&m)));
    plant(&mut m);
    let steps = ws.end_steps(passed, &mut clock);
    let r = if concurrent {
        tusk_shim::run::end_concurrently(steps, &m, &mut clock)
    } else {
        steps.run_in_order(&m, &mut clock)
    };
    verdict(r)
}

/// [`end`] with the checks deferred: no copy through the passes, the input
/// made again afterwards and given to the end steps (what `tusk run
/// --check-input reread` does), or never given when `give` is false.
fn end_deferred(
    orig: &Module,
    opts: &Options,
    plant: Plant,
    concurrent: bool,
    give: bool,
) -> String {
    let mut m = orig.clone();
    let mut ws = Workspace::new();
    ws.set_release_spent(true);
    ws.set_split_runner(Some(Box::new(ThreadSplit)));
    let mut clock = Ticks::per_read(1);
    let passed = ws
        .reserve(&mut m, opts, Checks::Deferred)
        .run_passes(&mut clock)
        .unwrap_or_else(|e| panic!("{}", e.display(&m)));
    plant(&mut m);
    let input = orig.clone();
    let mut steps = ws.end_steps(passed, &mut clock);
    if give {
        steps.give_input(&input);
    }
    let r = if concurrent {
        tusk_shim::run::end_concurrently(steps, &m, &mut clock)
    } else {
        steps.run_in_order(&m, &mut clock)
    };
    // The storage report names the input's part after where it comes
    // from; every other field must be the copy's.
    verdict(r).replace(
        "the input, given again after the passes",
        "the input copy of the dataflow check",
    )
}

fn cases() -> [(&'static str, Plant); 5] {
    [
        ("as allocated", |_| {}),
        ("a save writes 4 bytes further", |r| {
            let s = nth_of(r, Opcode::Save, 50);
            let a = r.outputs(s).next().unwrap();
            let l = r.aps().loc[a];
            r.shift_ap(a, l, 0, 4);
        }),
        ("a load removed", |r| {
            let ld = nth_of(r, Opcode::Load, 50);
            r.remove_inst(ld);
        }),
        ("a load reads outside", |r| {
            let ld = nth_of(r, Opcode::Load, 95);
            let a = r.inputs(ld).next().unwrap();
            r.set_ap_offset(a, 1 << 30);
        }),
        ("every SB tile at the first one's place", |r| {
            let sb: Vec<_> = r
                .mems()
                .space
                .keys()
                .filter(|&v| r.mems().space[v] == Space::Sb && r.is_placed(v))
                .collect();
            let (p, o) = (r.mems().base_partition[sb[0]], r.mems().offset[sb[0]]);
            for v in sb {
                if r.mems().base_partition[v] == p {
                    r.place(v, p, o);
                }
            }
        }),
    ]
}

/// A generated module of 6,000 instructions.
fn module(seed: u64) -> Module {
    generate(&GenParams {
        instructions: 6_000,
        seed,
        ..GenParams::default()
    })
    .unwrap()
}

/// What a verdict is: 0 clean, 1 a placement finding, 2 a dataflow error.
fn kind(verdict: &str) -> usize {
    if !verdict.starts_with("error") {
        0
    } else if verdict.starts_with("error Verify") {
        1
    } else {
        2
    }
}

#[test]
fn concurrent_end_steps_give_what_the_steps_in_order_give() {
    let cases = cases();
    let orig = module(3);
    let mut seen = [0usize; 3]; // by `kind`
    for optlevel in [2u8, 8] {
        let opts = Options {
            optlevel,
            schedule_model: true,
            ..Options::default()
        };
        for (what, plant) in cases {
            let seq = end(&orig, &opts, plant, false);
            let par = end(&orig, &opts, plant, true);
            assert_eq!(seq, par, "optlevel {optlevel}: {what}");
            let k = kind(&seq);
            seen[k] += 1;
            if what == "as allocated" {
                assert_eq!(k, 0, "optlevel {optlevel}: {seq}");
                assert!(seq.contains("schedule: Some"), "{seq}");
            }
        }
    }
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

#[test]
fn an_input_given_after_the_passes_gives_what_a_copy_gives() {
    let orig = module(5);
    let mut seen = [0usize; 3]; // by `kind`
    for optlevel in [2u8, 8] {
        let opts = Options {
            optlevel,
            schedule_model: true,
            ..Options::default()
        };
        for (what, plant) in cases() {
            let copy = end(&orig, &opts, plant, false);
            for concurrent in [false, true] {
                let given = end_deferred(&orig, &opts, plant, concurrent, true);
                assert_eq!(
                    copy, given,
                    "optlevel {optlevel}: {what}, concurrent {concurrent}"
                );
                // Never given: the verifier's finding still comes first;
                // a result it passes is not called verified.
                let never = end_deferred(&orig, &opts, plant, concurrent, false);
                if kind(&copy) == 1 {
                    assert_eq!(never, copy, "optlevel {optlevel}: {what}");
                } else {
                    assert_eq!(never, "error InputNotGiven", "optlevel {optlevel}: {what}");
                }
            }
            seen[kind(&copy)] += 1;
        }
    }
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

#[test]
fn the_driver_checks_against_the_module_it_reads_again() {
    use tusk_shim::run::{allocate, AllocateError};
    let orig = module(7);
    // The input the passes got, a program that computes something else
    // (a load reads its DRAM tensor 4 bytes further), and no input at
    // all: the check holds against the first only, so the module read
    // again is what it compares with.
    let other = {
        let mut o = orig.clone();
        let ld = nth_of(&o, Opcode::Load, 50);
        let a = o.inputs(ld).next().unwrap();
        let l = o.aps().loc[a];
        o.shift_ap(a, l, 0, 4);
        o
    };
    for optlevel in [2u8, 8] {
        let opts = Options {
            optlevel,
            ..Options::default()
        };
        for threads in [1u8, 2] {
            let at = format!("optlevel {optlevel}, {threads} thread(s)");
            let same = || Ok(orig.clone());
            let r = allocate(&mut orig.clone(), &opts, true, Some(threads), Some(&same));
            assert!(r.is_ok(), "{at}: {r:?}");
            let changed = || Ok(other.clone());
            let r = allocate(
                &mut orig.clone(),
                &opts,
                true,
                Some(threads),
                Some(&changed),
            );
            assert!(
                matches!(
                    r,
                    Err(AllocateError::Pipeline(
                        PipelineError::Dataflow { .. } | PipelineError::DataflowCheck(_)
                    ))
                ),
                "{at}: {r:?}"
            );
            let gone = || Err((3u8, String::from("gone")));
            let r = allocate(&mut orig.clone(), &opts, true, Some(threads), Some(&gone));
            assert!(
                matches!(&r, Err(AllocateError::Input(3, msg)) if msg == "gone"),
                "{at}: {r:?}"
            );
            // Without the checks nothing is read again.
            let r = allocate(&mut orig.clone(), &opts, false, Some(threads), Some(&gone));
            assert!(r.is_ok(), "{at}: {r:?}");
        }
    }
}
