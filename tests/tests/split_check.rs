//! The dataflow check on two threads (`tusk_shim::split::ThreadSplit`, what
//! `tusk run` uses on a machine with a second core) against the one-thread
//! walk, on allocated generated modules with planted violations: the same
//! mismatches, counts and errors. The modules are large enough that the
//! original's reads cross many batches and the queue fills.

use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Module, Opcode};
use tusk_core::verify::{
    DataflowCapacity, DataflowChecker, DataflowError, DataflowReport, BATCH_RECORDS,
};
use tusk_shim::split::ThreadSplit;
use tusk_tests::harness::{self, Ticks};

fn allocated(orig: &Module, optlevel: u8) -> Module {
    let mut m = orig.clone();
    harness::run_unchecked(&mut m, optlevel, &mut Ticks::per_read(1));
    m
}

fn verdict(r: Result<DataflowReport<'_>, DataflowError>) -> String {
    match r {
        Ok(r) => format!(
            "{:?} dropped {} compared {}",
            r.mismatches, r.dropped, r.coverage.compared
        ),
        Err(e) => format!("error {e:?}"),
    }
}

/// Both walks' verdicts; asserts they agree, and agree with the walk that
/// keeps every location's values to the end.
fn agree(o: &Module, r: &Module, what: &str) -> String {
    let seq = verdict(DataflowChecker::new().check(o, r));
    let cap = DataflowCapacity::estimate(o, r);
    let split = verdict(DataflowChecker::new().check_split(o, r, cap, &ThreadSplit));
    assert_eq!(seq, split, "{what}");
    // The reference walks: keeping every location's values to the end, and
    // reading every output (outputs stored alike in both final states are
    // otherwise not read): the same verdict.
    type Setting = fn(&mut DataflowChecker);
    let references: [(&str, Setting); 2] = [
        ("keeping every location", |c| c.set_keep_all(true)),
        ("reading every output", |c| c.set_read_every_output(true)),
    ];
    for (how, set) in references {
        let mut c = DataflowChecker::new();
        set(&mut c);
        assert_eq!(seq, verdict(c.check(o, r)), "{what}: {how}");
    }
    seq
}

fn nth_of(m: &Module, op: Opcode, frac: usize) -> tusk_core::ir::Inst {
    let all: Vec<_> = m
        .program_order()
        .filter(|&i| m.insts().opcode[i] == op)
        .collect();
    all[(all.len() - 1) * frac / 100]
}

#[test]
fn two_threads_find_what_one_finds() {
    let mut modules = Vec::new();
    for (preset, n, seed) in [("default", 6_000usize, 1u64), ("constructs", 2_000, 4)] {
        let base = if preset == "default" {
            GenParams::default()
        } else {
            GenParams::constructs()
        };
        let p = GenParams {
            instructions: n,
            seed,
            ..base
        };
        modules.push((preset, generate(&p).unwrap()));
    }
    let mut seen = [0usize; 3]; // clean, mismatches, errors
                                // Some final outputs differ (read, not taken as stored alike).
    let mut outputs_differ = false;
    for (preset, orig) in &modules {
        for opt in [2u8, 8] {
            let rw = allocated(orig, opt);
            let mut cases: Vec<(String, Module)> = vec![("as allocated".into(), rw.clone())];
            for frac in [5usize, 50, 95] {
                let mut r = rw.clone();
                let s = nth_of(&r, Opcode::Save, frac);
                let a = r.outputs(s).next().unwrap();
                let l = r.aps().loc[a];
                r.shift_ap(a, l, 0, 4);
                cases.push((format!("save at {frac}% writes 4 bytes further"), r));
                let mut r = rw.clone();
                let ld = nth_of(&r, Opcode::Load, frac);
                r.remove_inst(ld);
                cases.push((format!("load at {frac}% removed"), r));
                let mut r = rw.clone();
                let ld = nth_of(&r, Opcode::Load, frac);
                let a = r.inputs(ld).next().unwrap();
                r.set_ap_offset(a, 1 << 30);
                cases.push((format!("load at {frac}% reads outside"), r));
            }
            for (what, r) in &cases {
                let ctx = format!("{preset} optlevel {opt}: {what}");
                let v = agree(orig, r, &ctx);
                let k = if v.starts_with("error") {
                    2
                } else if v.starts_with("[] dropped 0") {
                    0
                } else {
                    1
                };
                seen[k] += 1;
                outputs_differ |= v.contains("Output {");
                if what == "as allocated" {
                    assert_eq!(k, 0, "{ctx}: {v}");
                    // Enough executions for many batches.
                    let mut c = DataflowChecker::new();
                    let n = c.check(orig, r).unwrap().coverage.compared;
                    assert!(n as usize > 2 * BATCH_RECORDS, "{ctx}: {n}");
                    // Dropping what the walk is done with holds fewer runs.
                    let mut keep = DataflowChecker::new();
                    keep.set_keep_all(true);
                    keep.check(orig, r).unwrap();
                    let (dropped, kept) = (c.used().runs, keep.used().runs);
                    assert!(2 * dropped < kept, "{ctx}: {dropped} runs, {kept} kept");
                }
                // With the roles swapped, the original's half meets the
                // broken patterns and the removed instructions.
                agree(r, orig, &format!("{ctx}, swapped"));
            }
        }
    }
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    assert!(outputs_differ, "no case changed a final output");
}
