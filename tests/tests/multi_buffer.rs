//! SB multi-buffering (issue 14, build item 2): a tile rewritten in every
//! iteration of a loop takes slots used in turn (`+S*i mod N` terms), the
//! model's makespan drops, and the placement verifier and the dataflow
//! checker agree with the unrolled copy ([`tusk_tests::unroll`]) on the
//! result and on a corruption of it.

use tusk_core::analysis::{LinearOrder, MemLiveness};
use tusk_core::ir::{ApExt, Inst, Module, Opcode};
use tusk_core::options::Rotation;
use tusk_core::Options;
use tusk_shim::text;
use tusk_tests::harness::{dataflow, legality, run_checked, Ticks};
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
    // Unrolled, each iteration's `%t` is a copy `%t.uK`: the slot that
    // iteration uses. The eight loads write the two slots in turn.
    let base = out.mems().offset[out.mem_by_name("t").unwrap()];
    let slots: Vec<u64> = rflat
        .program_order()
        .filter(|&i| rflat.insts().opcode[i] == Opcode::Load)
        .flat_map(|i| rflat.outputs(i).collect::<Vec<_>>())
        .filter(|&a| rflat.mem_name(rflat.aps().loc[a]).starts_with("t.u"))
        .map(|a| rflat.mems().offset[rflat.aps().loc[a]] + rflat.aps().offset[a] as u64 - base)
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
    // Patterns are numbered inputs first: 0 is the read of `%t`.
    let k = 0;
    let a = out.all_aps(exp).nth(k).unwrap();
    assert_eq!(out.mem_name(out.aps().loc[a]), "t");
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

/// PE writes a PSUM tile that ACT drains, 64 times: in one bank each
/// matmul waits for the previous drain. The tile takes a bank per slot.
const PSUM_SRC: &str = "target trn2
dram %x [128 x 1024] bf16 input
dram %w [128 x 256] bf16 input
dram %y [128 x 2048] fp32 output
sb %wt [128 x 256] bf16
sb %xt [128 x 1024] bf16
sb %o [128 x 2048] fp32
psum %ps [128 x 2048] fp32
func @main {
entry:
  %wt = load %w
  %xt = load %x
  loop i in 64 {
  body:
    %ps = matmul %wt, %xt
    %o = activation exp %ps
  }
  %y = save %o
}
";

#[test]
fn psum_banks_rotate_with_the_loop_and_both_forms_agree() {
    let input = text::parse_str(PSUM_SRC).unwrap();
    let mut plain = input.clone();
    let off = run_checked(&mut plain, &options(Rotation::Off), &mut Ticks::per_read(1)).unwrap();
    let mut out = input.clone();
    let r = run_checked(&mut out, &options(Rotation::All), &mut Ticks::per_read(1))
        .unwrap_or_else(|e| panic!("{}", e.display(&out)));
    let sb = r.sb_rotation.unwrap();
    assert_eq!((sb.buffered, sb.psum_buffered), (1, 1), "{sb:?}");
    let (before, after) = (off.schedule.unwrap(), r.schedule.unwrap());
    assert!(
        after.makespan < before.makespan,
        "{} -> {}",
        before.makespan,
        after.makespan
    );
    let ps = out.mem_by_name("ps").unwrap();
    let bank = out.target.psum_bank_bytes as i64;
    let mm = first(&out, Opcode::Matmul, "ps");
    let (bytes, wrap) = wrapped(&out, mm, out.operands(mm).n_in as usize).unwrap();
    assert_eq!(bytes, bank);
    assert!(wrap >= 2);
    assert_eq!(out.mems().bytes[ps] as i64, bank * wrap as i64);
    assert_eq!(dataflow(&input, &out), Ok(()));
    assert_eq!(legality(&out), Ok(()));
    let u = Unroller::new(&input).unwrap();
    let (flat, rflat) = (u.unroll(&input).unwrap(), u.unroll(&out).unwrap());
    assert_eq!(dataflow(&flat, &rflat), Ok(()));
    assert_eq!(legality(&rflat), Ok(()));
    // Unrolled, the matmuls write banks b, b + 1, ... in turn.
    let banks: Vec<u64> = rflat
        .program_order()
        .filter(|&i| rflat.insts().opcode[i] == Opcode::Matmul)
        .map(|i| {
            let a = rflat.outputs(i).next().unwrap();
            let l = rflat.aps().loc[a];
            (rflat.mems().offset[l] + rflat.aps().offset[a] as u64) / bank as u64
        })
        .take(4)
        .collect();
    let b0 = banks[0];
    let expect: Vec<u64> = (0..4).map(|k| b0 + k % wrap as u64).collect();
    assert_eq!(banks, expect);
}

/// The slot rule: a PSUM location of two banks is two tensors only while
/// every access stays in one slot. A matmul that writes the whole
/// location (both banks at once) breaks the banks-per-tensor rule.
#[test]
fn a_psum_access_across_two_slots_breaks_the_bank_rule() {
    let input = text::parse_str(PSUM_SRC).unwrap();
    let mut out = input.clone();
    run_checked(&mut out, &options(Rotation::All), &mut Ticks::per_read(1)).unwrap();
    assert_eq!(legality(&out), Ok(()));
    // The drain reads both slots at once in a copy of the module.
    let exp = first(&out, Opcode::Activation, "o");
    let a = out.all_aps(exp).next().unwrap();
    assert_eq!(out.mem_name(out.aps().loc[a]), "ps");
    let mut ext: ApExt = out.ap_ext(a).clone();
    ext.terms.clear();
    let mut bad = out.clone();
    bad.set_ap_ext(exp, 0, ext).unwrap();
    // 1024 fp32 elements: 4096 bytes, both banks.
    bad.set_ap_dim(a, 0, tusk_core::ir::Dim::new(1, 1024))
        .unwrap();
    let e = legality(&bad).expect_err("an access over two banks of a slotted tile");
    assert!(e.contains("%ps") && e.contains("bank"), "{e}");
}

/// A slot is cells like any other: a tile placed on `%t`'s second slot
/// while `%t` is live (over the whole loop, once it wraps) is an overlap
/// the verifier reports. (This one happens to clobber nothing the program
/// reads later, so the dataflow check stays clean: the verifier is the
/// check that holds slots apart.)
#[test]
fn a_tile_placed_on_a_slot_in_use_is_caught() {
    let input = text::parse_str(SRC).unwrap();
    let mut out = input.clone();
    run_checked(&mut out, &options(Rotation::All), &mut Ticks::per_read(1)).unwrap();
    let t = out.mem_by_name("t").unwrap();
    let u = out.mem_by_name("u").unwrap();
    let mut bad = out.clone();
    bad.place(u, 0, out.mems().offset[t] + 512);
    let e = legality(&bad).expect_err("%u on %t's second slot");
    assert!(e.contains("%t") && e.contains("%u"), "{e}");
}
