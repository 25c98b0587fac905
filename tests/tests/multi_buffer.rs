//! SB multi-buffering (issue 14, build item 2): a tile rewritten in every
//! iteration of a loop takes slots used in turn (`+S*i mod N` terms), the
//! model's makespan drops, and the placement verifier and the dataflow
//! checker agree with the unrolled copy ([`tusk_tests::unroll`]) on the
//! result and on a corruption of it.

use tusk_core::analysis::{LinearOrder, MemLiveness};
use tusk_core::ir::{ApExt, Inst, Module, Opcode};
use tusk_core::options::Rotation;
use tusk_core::verify::{DataflowChecker, Verifier};
use tusk_core::Options;
use tusk_shim::text;
use tusk_tests::harness::{run_checked, Ticks};
use tusk_tests::unroll::Unroller;

/// Eight tiles loaded, exponentiated and saved on another queue: the load
/// of iteration i + 1 writes `%t` while ACT may still read iteration i's,
/// and the save of `%u` holds up the next `exp` the same way. `%acc` sums
/// every iteration's `%u` (it carries a value around the loop: never
/// buffered) and `%half` is written in part (its first access does not
/// write all of it: never buffered).
const SRC: &str = "target trn2
dram %x [128 x 4096] fp32 input
dram %y [128 x 4096] fp32 output
dram %s [128 x 512] fp32 output
dram %h [128 x 512] fp32 output
sb %t [128 x 512] fp32
sb %u [128 x 512] fp32
sb %acc [128 x 512] fp32
sb %half [128 x 512] fp32
func @main {
entry:
  %acc = memset 0
  loop i in 8 {
  body:
    %t = load %x[p0:128, 0:512 +512*i]
    %u = activation exp %t
    %y[p0:128, 0:512 +512*i] = save %u queue 1
    %acc = tensor_tensor add %acc, %u
    %half[p0:128, 0:256] = tensor_copy %t[p0:128, 0:256]
    %h[p0:128, 0:256] = save %half[p0:128, 0:256] queue 2
  }
  %s = save %acc
}
";

fn options(rotation: Rotation) -> Options {
    Options {
        optlevel: 2,
        rotation,
        ..Options::default()
    }
    .normalize()
    .unwrap()
}

/// The dataflow verdict of `rw` against `orig`.
fn dataflow(orig: &Module, rw: &Module) -> Result<(), String> {
    match DataflowChecker::new().check(orig, rw) {
        Ok(r) if r.is_clean() => Ok(()),
        Ok(r) => Err(r.mismatches[0].display(rw).to_string()),
        Err(e) => Err(format!("error {e}")),
    }
}

/// The placement verdict of `m`.
fn legality(m: &Module) -> Result<(), String> {
    let mut v = Verifier::for_module(m);
    let r = v.verify(m);
    match r.findings.first() {
        None => Ok(()),
        Some(f) => Err(f.display(m).to_string()),
    }
}

/// The loop term that wraps on pattern `k` of `i`, as (bytes, wrap).
fn wrapped(m: &Module, i: Inst, k: usize) -> Option<(i64, u16)> {
    let a = m.all_aps(i).nth(k)?;
    let t = m.ap_ext(a).terms.iter().find(|t| t.wraps())?;
    Some((t.bytes, t.wrap))
}

fn first(m: &Module, op: Opcode, out: &str) -> Inst {
    m.program_order()
        .find(|&i| {
            m.insts().opcode[i] == op && m.outputs(i).any(|a| m.mem_name(m.aps().loc[a]) == out)
        })
        .unwrap()
}

#[test]
fn a_loop_tile_takes_slots_used_in_turn_and_both_forms_agree() {
    let input = text::parse_str(SRC).unwrap();
    let mut plain = input.clone();
    let off = run_checked(&mut plain, &options(Rotation::Off), &mut Ticks::per_read(1)).unwrap();
    let mut out = input.clone();
    let r = run_checked(&mut out, &options(Rotation::All), &mut Ticks::per_read(1))
        .unwrap_or_else(|e| panic!("{}", e.display(&out)));
    let sb = r.sb_rotation.unwrap();
    assert_eq!(
        (sb.buffer_candidates, sb.buffered, sb.slots),
        (2, 2, 2),
        "{sb:?}"
    );
    let (before, after) = (off.schedule.unwrap(), r.schedule.unwrap());
    assert!(
        after.makespan < before.makespan,
        "slots shorten the loop: {} -> {}",
        before.makespan,
        after.makespan
    );
    // `%t` and `%u` hold two slots of 512 bytes; their loads, reads and
    // saves all move by 512 × (i mod 2).
    for name in ["t", "u"] {
        let v = out.mem_by_name(name).unwrap();
        assert_eq!(out.mems().bytes[v], 1024, "%{name}");
    }
    let load = first(&out, Opcode::Load, "t");
    let exp = first(&out, Opcode::Activation, "u");
    assert_eq!(wrapped(&out, load, 1), Some((512, 2)));
    assert_eq!(wrapped(&out, exp, 0), Some((512, 2)));
    assert_eq!(wrapped(&out, exp, 1), Some((512, 2)));
    // The tile carried around the loop and the tile written in part keep
    // one place.
    for name in ["acc", "half"] {
        let v = out.mem_by_name(name).unwrap();
        assert_eq!(out.mems().bytes[v], 512, "%{name}");
    }
    // The text form says it and reads back to the same module.
    let printed = text::print(&out);
    assert!(
        printed.contains("%t[p0:128, 0:512 +512*i mod 2] = load"),
        "{printed}"
    );
    assert_eq!(text::print(&text::parse_str(&printed).unwrap()), printed);
    // Both checkers, in the loop form and unrolled.
    assert_eq!(dataflow(&input, &out), Ok(()));
    assert_eq!(legality(&out), Ok(()));
    let u = Unroller::new(&input).unwrap();
    let (flat, rflat) = (u.unroll(&input).unwrap(), u.unroll(&out).unwrap());
    assert_eq!(dataflow(&flat, &rflat), Ok(()));
    assert_eq!(legality(&rflat), Ok(()));
    // Unrolled (each iteration's `%t` is a copy `%t.uK` at `%t`'s
    // cells), the eight loads write its two slots in turn.
    let slots: Vec<u32> = rflat
        .program_order()
        .filter(|&i| rflat.insts().opcode[i] == Opcode::Load)
        .flat_map(|i| rflat.outputs(i).collect::<Vec<_>>())
        .filter(|&a| rflat.mem_name(rflat.aps().loc[a]).starts_with("t.u"))
        .map(|a| rflat.aps().offset[a])
        .collect();
    assert_eq!(slots, [0, 512, 0, 512, 0, 512, 0, 512]);
}

#[test]
fn a_reader_that_misses_the_rotation_is_caught_in_both_forms() {
    let input = text::parse_str(SRC).unwrap();
    let mut out = input.clone();
    run_checked(&mut out, &options(Rotation::All), &mut Ticks::per_read(1)).unwrap();
    // `exp` reads slot 0 in every iteration: from iteration 1 on, the
    // value the load of the iteration before left there.
    let exp = first(&out, Opcode::Activation, "u");
    let k = out.operands(exp).n_out as usize;
    let a = out.all_aps(exp).nth(k).unwrap();
    let mut ext: ApExt = out.ap_ext(a).clone();
    ext.terms.retain(|t| !t.wraps());
    let mut bad = out.clone();
    bad.set_ap_ext(exp, k, ext).unwrap();
    let looped = dataflow(&input, &bad);
    assert!(
        looped.is_err(),
        "the loop form's check misses the stale read"
    );
    let u = Unroller::new(&input).unwrap();
    let unrolled = dataflow(&u.unroll(&input).unwrap(), &u.unroll(&bad).unwrap());
    assert!(
        unrolled.is_err(),
        "the unrolled check misses the stale read"
    );
    println!("loop form: {looped:?}\nunrolled: {unrolled:?}");
}

/// The liveness the pass plans with holds a tile with slots over its
/// loop: the placement the verifier judges is the one the pass placed
/// clear of everything live there.
#[test]
fn a_tile_with_slots_is_live_over_its_loop() {
    let input = text::parse_str(SRC).unwrap();
    let mut out = input.clone();
    run_checked(&mut out, &options(Rotation::All), &mut Ticks::per_read(1)).unwrap();
    let order = LinearOrder::of(&out);
    let live = MemLiveness::of(&out, &order);
    let t = out.mem_by_name("t").unwrap();
    let load = first(&out, Opcode::Load, "t");
    let (s, e) = order.loop_span(out.inst_loop(load)).unwrap();
    let iv = live.interval(t).unwrap();
    assert!(iv.start <= s && e <= iv.end, "{iv:?} over [{s}, {e}]");
}
