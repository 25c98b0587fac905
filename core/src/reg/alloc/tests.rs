//! Tests of the module register allocator, and the checks other tests reuse
//! on its output (`check_registers`, `shared_checks`, `allocate_checked`).
//!
//! Part of the module allocator (`reg/alloc/`), not of the CFG allocator
//! (`reg/cfg/`), which has its own coalescing and splitting spill code.

use super::*;
use crate::analysis::{LinearOrder, RegLiveness};
use crate::ir::{Builder, MemLoc, Opcode, SubOp};
use crate::target::Target;
use crate::testing::{assert_same_dataflow, assert_verified_in};
use crate::verify::placement::Scope;
use alloc::collections::BTreeMap;
use alloc::vec;

/// Independent register check: every live register has a lane inside
/// the file, pairs are aligned, and no two registers live at a common
/// instruction share a lane (except the in-place hand-off of docs/SEMANTICS.md §1).
pub(crate) fn check_registers(m: &Module) -> Result<(), alloc::string::String> {
    let order = LinearOrder::of(m);
    let live = RegLiveness::of(m, &order);
    let k = m.target.max_regs as u32;
    let mut ivs = Vec::new();
    for r in m.regs().lanes.keys() {
        let Some(iv) = live.interval(r) else { continue };
        let (lane, l) = (m.regs().lane[r], m.regs().lanes[r] as u32);
        if lane == NO_LANE {
            return Err(alloc::format!("{r} is live but has no lane"));
        }
        if lane as u32 + l > k || (l == 2 && lane % 2 != 0) {
            return Err(alloc::format!("{r} has bad lane {lane} ({l} lanes)"));
        }
        ivs.push((iv.start, iv.end, r));
    }
    ivs.sort();
    for x in 0..ivs.len() {
        let (s, e, r) = ivs[x];
        for &(s2, _e2, r2) in ivs[x + 1..].iter() {
            if s2 > e {
                break;
            }
            let (a, la) = (m.regs().lane[r] as u32, m.regs().lanes[r] as u32);
            let (b, lb) = (m.regs().lane[r2] as u32, m.regs().lanes[r2] as u32);
            if a < b + lb && b < a + la {
                // In-place hand-off: r dies at s2 where r2 is written.
                let i = order.inst_at(s2);
                let handoff = e == s2
                    && s2 > s
                    && m.insts().flags[i].contains(InstFlags::IN_PLACE)
                    && m.uses(i).contains(&r)
                    && m.defs(i).contains(&r2)
                    && !m.uses(i).contains(&r2);
                if !handoff {
                    return Err(alloc::format!(
                        "{r} [{s},{e}] and {r2} share lanes at {}",
                        order.inst_at(s2)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Value-flow trace: for each instruction of `orig` that is not a copy,
/// the value ids its register operands read (value id = defining
/// instruction; copies, spill stores and reloads forward values).
/// Computed on virtual registers for `orig` and on physical lanes and
/// memory slots for `done`; equal traces mean the allocation preserved
/// the program's dataflow (straight-line walk of the linear order).
pub(crate) fn trace(m: &Module, physical: bool) -> BTreeMap<u32, Vec<u32>> {
    let mut lanes: BTreeMap<u32, u32> = BTreeMap::new();
    let mut mem: BTreeMap<MemLoc, u32> = BTreeMap::new();
    let mut out = BTreeMap::new();
    let key = |r: Reg| -> u32 {
        if physical {
            m.regs().lane[r] as u32
        } else {
            r.as_u32()
        }
    };
    for i in m.program_order() {
        let op = m.insts().opcode[i];
        let read: Vec<u32> = m
            .uses(i)
            .iter()
            .map(|&r| *lanes.get(&key(r)).unwrap_or(&u32::MAX))
            .collect();
        match op {
            Opcode::ScalarMov => {
                let d = m.defs(i)[0];
                for l in 0..m.regs().lanes[d] as u32 {
                    lanes.insert(key(d) + if physical { l } else { 0 }, read[0]);
                }
            }
            Opcode::RegSpillStore => {
                let slot = m.aps().loc[m.outputs(i).next().unwrap()];
                mem.insert(slot, read[0]);
            }
            Opcode::SyncWait => {}
            Opcode::RegReload => {
                let slot = m.aps().loc[m.inputs(i).next().unwrap()];
                let v = *mem.get(&slot).unwrap_or(&u32::MAX);
                let d = m.defs(i)[0];
                for l in 0..m.regs().lanes[d] as u32 {
                    lanes.insert(key(d) + if physical { l } else { 0 }, v);
                }
            }
            _ => {
                out.insert(i.as_u32(), read);
                for &d in m.defs(i) {
                    for l in 0..m.regs().lanes[d] as u32 {
                        lanes.insert(key(d) + if physical { l } else { 0 }, i.as_u32());
                    }
                }
            }
        }
    }
    out
}

/// The shared checks on a REG output: the placement verifier's
/// register rules (memory is not placed here: spill slots are left to
/// the pipeline's DRAM colorer) and the dataflow checker, `original`
/// against the allocated `m` (spill stores and reloads carry values
/// through their memory slots; colored registers share one physical
/// register file, so a lane clobber is a mismatch).
pub(crate) fn shared_checks(original: &Module, m: &Module) {
    let registers = Scope {
        psum: false,
        sb: false,
        dram: false,
        registers: true,
        uncolored: true,
    };
    assert_verified_in("the registers", m, Some(registers));
    let compared = assert_same_dataflow(original, m);
    assert!(compared > 0 || original.num_live_insts() == 0);
}

/// Allocates, runs the lane check, the value trace and the shared
/// checks ([`shared_checks`]), returns the report.
pub(crate) fn allocate_checked(m: &mut Module) -> Result<RegReport, RegAllocError> {
    allocate_checked_with(m, None)
}

/// As [`allocate_checked`], with a limit on spill temporaries
/// (`None`: the default).
pub(crate) fn allocate_checked_with(
    m: &mut Module,
    limit: Option<u32>,
) -> Result<RegReport, RegAllocError> {
    let original = m.clone();
    let before = trace(m, false);
    let mut a = RegAllocator::default();
    a.set_max_spill_temporaries(limit);
    a.reserve(m);
    let rep = a.allocate(m, &RegAllocConfig::default())?;
    m.check_structure().unwrap();
    check_registers(m).unwrap();
    shared_checks(&original, m);
    let after = trace(m, true);
    for (i, v) in before.iter() {
        assert_eq!(Some(v), after.get(i), "dataflow changed at inst{i}");
    }
    assert_eq!(
        before.len(),
        after.len(),
        "instructions appeared or vanished"
    );
    Ok(rep)
}

fn target(k: u64) -> Target {
    let mut t = Target::default();
    t.set("max-regs", k).unwrap();
    t
}

#[test]
fn coalescing_removes_copies_that_only_touch() {
    let mut m = Module::new(target(8));
    let mut b = Builder::new(&mut m);
    let [a, x, c, d] = ["a", "x", "c", "d"].map(|n| b.reg(n, 1).unwrap());
    b.func("f").unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[a], &[], 3)
        .unwrap();
    b.scalar(Opcode::ScalarMov, SubOp::None, &[x], &[a], 0)
        .unwrap();
    b.scalar(Opcode::ScalarAlu, SubOp::Add, &[c], &[x, x], 0)
        .unwrap();
    b.scalar(Opcode::ScalarMov, SubOp::None, &[d], &[c], 0)
        .unwrap();
    b.scalar(Opcode::Branch, SubOp::None, &[], &[d], 0).unwrap();
    let rep = allocate_checked(&mut m).unwrap();
    assert_eq!(rep.coalesced, 2);
    assert_eq!(rep.copies_removed, 2);
    assert!(m
        .program_order()
        .all(|i| m.insts().opcode[i] != Opcode::ScalarMov));
    assert_eq!(m.num_live_insts(), 3);
}

#[test]
fn coalescing_respects_interference() {
    let mut m = Module::new(target(8));
    let mut b = Builder::new(&mut m);
    let [a, x, c] = ["a", "x", "c"].map(|n| b.reg(n, 1).unwrap());
    b.func("f").unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[a], &[], 3)
        .unwrap();
    b.scalar(Opcode::ScalarMov, SubOp::None, &[x], &[a], 0)
        .unwrap();
    b.scalar(Opcode::ScalarAlu, SubOp::Add, &[c], &[a, x], 0)
        .unwrap();
    let rep = allocate_checked(&mut m).unwrap();
    assert_eq!((rep.coalesced, rep.copies_removed), (0, 0));
    assert_ne!(m.regs().lane[a], m.regs().lane[x]);
}

#[test]
fn pinned_registers_keep_their_lane_and_pairs_align() {
    let mut m = Module::new(target(6));
    let mut b = Builder::new(&mut m);
    let p = b.reg("p", 1).unwrap();
    let q = b.reg("q", 2).unwrap();
    let w = b.reg("w", 2).unwrap();
    let s = b.reg("s", 1).unwrap();
    b.func("f").unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[p], &[], 1)
        .unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[q], &[], 1)
        .unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[s], &[], 1)
        .unwrap();
    b.scalar(Opcode::ScalarAlu, SubOp::Add, &[w], &[p, q, s], 0)
        .unwrap();
    b.scalar(Opcode::Branch, SubOp::None, &[], &[w], 0).unwrap();
    m.columns_mut().regs.flags[p] = RegFlags::PINNED;
    m.columns_mut().regs.lane[p] = 3;
    let rep = allocate_checked(&mut m).unwrap();
    assert_eq!(rep.spilled_registers, 0);
    assert_eq!(m.regs().lane[p], 3);
    assert_eq!(m.regs().lane[q] % 2, 0);
    assert_eq!(m.regs().lane[w] % 2, 0);
    // p on 3 breaks pair (2,3): q, w and s must use (0,1) and (4,5).
    assert_ne!(m.regs().lane[q], 2);
}

#[test]
fn spill_temporaries_beyond_k_fail_clearly() {
    // One instruction reads 5 registers and defines one with K = 4:
    // whatever is spilled, its reload temporaries are live together.
    let mut m = Module::new(target(4));
    let mut b = Builder::new(&mut m);
    let regs: Vec<Reg> = (0..6)
        .map(|i| b.reg(&alloc::format!("r{i}"), 1).unwrap())
        .collect();
    b.func("f").unwrap();
    for &r in &regs[..5] {
        b.scalar(Opcode::ScalarImm, SubOp::None, &[r], &[], 1)
            .unwrap();
    }
    b.scalar(Opcode::ScalarAlu, SubOp::Add, &[regs[5]], &regs[..5], 0)
        .unwrap();
    let e = allocate_registers(&mut m, &RegAllocConfig::default()).unwrap_err();
    let msg = alloc::format!("{e}");
    assert!(
        msg.starts_with("cannot allocate registers since spilling candidates are not enough"),
        "{msg}"
    );
    match e {
        RegAllocError::RegisterPressure {
            capacity,
            live_lanes,
            ..
        } => {
            assert_eq!(capacity, 4);
            assert!(live_lanes > 4);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_pinned_lane_is_rejected() {
    let mut m = Module::new(target(4));
    let mut b = Builder::new(&mut m);
    let q = b.reg("q", 2).unwrap();
    b.func("f").unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[q], &[], 1)
        .unwrap();
    m.columns_mut().regs.flags[q] = RegFlags::PINNED;
    m.columns_mut().regs.lane[q] = 1;
    let e = allocate_registers(&mut m, &RegAllocConfig::default()).unwrap_err();
    assert!(matches!(e, RegAllocError::Malformed { .. }));
}

#[test]
fn in_place_def_may_reuse_a_dying_input() {
    let mut m = Module::new(target(2));
    let mut b = Builder::new(&mut m);
    let [a, c, d] = ["a", "c", "d"].map(|n| b.reg(n, 1).unwrap());
    b.func("f").unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[a], &[], 1)
        .unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[c], &[], 1)
        .unwrap();
    let i = b
        .scalar(Opcode::ScalarAlu, SubOp::Add, &[d], &[a, c], 0)
        .unwrap();
    b.scalar(Opcode::Branch, SubOp::None, &[], &[d], 0).unwrap();
    m.columns_mut().insts.flags[i] = InstFlags::IN_PLACE;
    let rep = allocate_checked(&mut m).unwrap();
    assert_eq!(rep.spilled_registers, 0);
    let _ = vec![0];
}

#[cfg(feature = "gen")]
mod gen_tests {
    use super::*;
    use crate::gen::scalar::{scalar_program, ScalarParams};

    /// Max over instructions of Σ lanes of the registers live there, and
    /// the same with every register counted as a pair.
    fn pressures(m: &Module) -> (u32, u32) {
        let order = LinearOrder::of(m);
        let live = RegLiveness::of(m, &order);
        let mut w = alloc::vec![0i64; order.len() + 1];
        let mut pw = alloc::vec![0i64; order.len() + 1];
        for r in m.regs().lanes.keys() {
            if let Some(iv) = live.interval(r) {
                let l = m.regs().lanes[r] as i64;
                w[iv.start as usize] += l;
                w[iv.end as usize + 1] -= l;
                pw[iv.start as usize] += 2;
                pw[iv.end as usize + 1] -= 2;
            }
        }
        let (mut a, mut b, mut ma, mut mb) = (0, 0, 0, 0);
        for p in 0..order.len() {
            a += w[p];
            b += pw[p];
            ma = ma.max(a);
            mb = mb.max(b);
        }
        (ma as u32, mb as u32)
    }

    #[test]
    fn zero_spills_when_one_lane_pressure_is_within_k() {
        for k in [8u64, 16, 62] {
            for pressure in [4u32, k as u32 / 2, k as u32] {
                for seed in 0..4 {
                    let p = ScalarParams {
                        insts: 600,
                        pressure,
                        pair_percent: 0,
                        max_life: 40,
                        copy_percent: 20,
                        loop_every: if seed % 2 == 0 { 50 } else { 0 },
                        loop_len: 12,
                        seed,
                    };
                    let mut m = scalar_program(target(k), &p).unwrap();
                    let (w, _) = pressures(&m);
                    assert!(w <= pressure, "generator exceeded its pressure bound");
                    let rep = allocate_checked(&mut m).unwrap();
                    assert_eq!(rep.spilled_registers, 0, "k {k} pressure {w} seed {seed}");
                    assert_eq!(rep.rounds, 1);
                }
            }
        }
    }

    #[test]
    fn zero_spills_for_pairs_when_pair_pressure_is_within_k() {
        for seed in 0..8 {
            let p = ScalarParams {
                insts: 500,
                pressure: 31,
                pair_percent: 40,
                max_life: 30,
                copy_percent: 15,
                loop_every: 40,
                loop_len: 10,
                seed,
            };
            let mut m = scalar_program(target(62), &p).unwrap();
            let (w, pw) = pressures(&m);
            assert!(w <= 31);
            let k = pw.max(4) as u64;
            m.target = target(k + k % 2);
            let rep = allocate_checked(&mut m).unwrap();
            assert_eq!(rep.spilled_registers, 0, "seed {seed} pair pressure {pw}");
        }
    }

    #[test]
    fn forced_pressure_spills_and_converges() {
        for (pair, seed) in [(0u32, 1u64), (30, 2), (50, 3)] {
            let p = ScalarParams {
                insts: 800,
                pressure: 64,
                pair_percent: pair,
                max_life: 60,
                copy_percent: 10,
                loop_every: 60,
                loop_len: 20,
                seed,
            };
            // K = 32 leaves room for the reload temporaries of the widest
            // instruction (12 reads of pairs + a pair def = 26 lanes).
            let mut m = scalar_program(target(32), &p).unwrap();
            // A limit below what the spill code needs is reported, never
            // grown into...
            let mut small = m.clone();
            let err = allocate_checked_with(&mut small, Some(8))
                .map(|_| ())
                .unwrap_err();
            assert_eq!(err, RegAllocError::SpillHeadroom { limit: 8 });
            assert!(alloc::format!("{err}").contains("set_max_spill_temporaries"));
            // ...and with room for a temporary per operand it converges.
            let every_operand = m.reg_pool().len() as u32;
            let rep = allocate_checked_with(&mut m, Some(every_operand)).unwrap();
            assert!(rep.spilled_registers > 0);
            assert!(rep.rounds >= 2);
            assert!(rep.spill_cycles > 0);
            check_registers(&m).unwrap();
        }
    }
}
