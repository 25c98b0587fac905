//! Hand-made CFGs with hand-checked results, planted corruptions the
//! checker must catch, validation errors, and property runs over
//! generated CFGs.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use alloc::vec;
use alloc::vec::Vec;

use super::*;

/// An instruction: uses, defs, tied pairs, move flag.
type I = (&'static [u32], &'static [u32], &'static [(u16, u16)], bool);

/// A block: instructions, parameters, successors with arguments, depth.
struct B {
    insts: Vec<I>,
    params: &'static [u32],
    succs: Vec<(u32, &'static [u32])>,
    depth: u32,
}

fn op(uses: &'static [u32], defs: &'static [u32]) -> I {
    (uses, defs, &[], false)
}

fn mv(src: &'static [u32], dst: &'static [u32]) -> I {
    (src, dst, &[], true)
}

fn blk(insts: Vec<I>, params: &'static [u32], succs: Vec<(u32, &'static [u32])>) -> B {
    B {
        insts,
        params,
        succs,
        depth: 0,
    }
}

fn build(nv: u32, blocks: Vec<B>) -> FunctionBuf {
    let mut f = FunctionBuf::new();
    let mut start = 0u32;
    for b in &blocks {
        for &(u, d, t, m) in &b.insts {
            let u: Vec<VReg> = u.iter().map(|&x| VReg(x)).collect();
            let d: Vec<VReg> = d.iter().map(|&x| VReg(x)).collect();
            let t: Vec<TiedPair> = t
                .iter()
                .map(|&(d, u)| TiedPair { def: d, use_: u })
                .collect();
            f.push_inst(&u, &d, &t, m);
        }
        let end = start + b.insts.len() as u32;
        let params: Vec<VReg> = b.params.iter().map(|&x| VReg(x)).collect();
        let args: Vec<Vec<VReg>> = b
            .succs
            .iter()
            .map(|(_, a)| a.iter().map(|&x| VReg(x)).collect())
            .collect();
        let succs: Vec<(Block, &[VReg])> = b
            .succs
            .iter()
            .zip(&args)
            .map(|((s, _), a)| (Block(*s), a.as_slice()))
            .collect();
        f.push_block((start, end), b.depth, &params, &succs);
        start = end;
    }
    f.num_vregs = nv;
    f.finish();
    f
}

/// Allocates with `k` registers, checks, returns the allocation.
fn run(f: &FunctionBuf, k: u16) -> CfgAllocation {
    let mut a = CfgAllocator::new();
    let mut c = CfgChecker::new();
    match a.allocate_checked(f, k, &mut c) {
        Ok(out) => out.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// The diamond of the module doc: `x` is read only on the then-path, the
/// else-path holds two values of its own. Linear-order intervals would
/// make `x` live across the else block (laid out first) too: three values
/// at K = 2. The CFG liveness sees two at most.
fn diamond() -> FunctionBuf {
    // 0: a, x; br a -> 1 (else), 2 (then)
    // 1: y1, y2; use y1 y2 -> join(y1)
    // 2: use x; c -> join(c)
    // 3(p): use p; exit
    build(
        7,
        vec![
            blk(
                vec![op(&[], &[0]), op(&[], &[1]), op(&[0], &[])],
                &[],
                vec![(1, &[]), (2, &[])],
            ),
            blk(
                vec![op(&[], &[2]), op(&[], &[3]), op(&[2, 3], &[]), op(&[], &[])],
                &[],
                vec![(3, &[2])],
            ),
            blk(vec![op(&[1], &[4]), op(&[], &[])], &[], vec![(3, &[4])]),
            blk(vec![op(&[5], &[])], &[5], vec![]),
        ],
    )
}

#[test]
fn diamond_is_precise_at_the_join() {
    let f = diamond();
    let out = run(&f, 2);
    assert_eq!(out.stats.max_live, 2);
    assert_eq!(out.stats.spills + out.stats.reloads, 0);
    // y1 dies at block 1's use but is passed to the join: the join
    // parameter takes its register (and c's), so no edge copy is needed.
    assert_eq!(out.stats.moves_inserted, 0, "{:?}", out.edits());
    let p = out.param_location(Block(3), 0).unwrap();
    assert_eq!(out.use_location(CfgInst(9), 0), Some(p));
}

/// A loop whose header carries `i` around the back edge:
/// 0: i0, n -> H(i0); H(i): c = i < n; br c -> B, X; B: i1 = i + 1 -> H(i1);
/// X: use i.
fn counted_loop() -> FunctionBuf {
    let mut blocks = vec![
        blk(
            vec![op(&[], &[0]), op(&[], &[1]), op(&[], &[])],
            &[],
            vec![(1, &[0])],
        ),
        blk(
            vec![op(&[2, 1], &[3]), op(&[3], &[])],
            &[2],
            vec![(2, &[]), (3, &[])],
        ),
        blk(vec![op(&[2], &[4]), op(&[], &[])], &[], vec![(1, &[4])]),
        blk(vec![op(&[2], &[])], &[], vec![]),
    ];
    blocks[1].depth = 1;
    blocks[2].depth = 1;
    build(5, blocks)
}

#[test]
fn loop_carried_value_keeps_one_register() {
    let f = counted_loop();
    let out = run(&f, 3);
    assert_eq!(out.stats.spills + out.stats.reloads, 0);
    // i0, i and i1 coalesce: the header parameter, the entry's def and the
    // increment share a register, so neither edge copies anything.
    assert_eq!(out.stats.moves_inserted, 0, "{:?}", out.edits());
    let i = out.param_location(Block(1), 0).unwrap();
    assert_eq!(out.def_location(CfgInst(0), 0), Some(i));
    assert_eq!(out.def_location(CfgInst(5), 0), Some(i));
    // n is live through the loop: another register.
    assert_ne!(out.def_location(CfgInst(1), 0), Some(i));
    assert_eq!(out.stats.weighted_cost, 0.0);
}

#[test]
fn tied_operand_shares_its_register_or_gets_one_copy() {
    // 0: a, b; c = a + b (c tied to a, a dies); use c; exit.
    let dies = build(
        3,
        vec![blk(
            vec![
                op(&[], &[0]),
                op(&[], &[1]),
                (&[0, 1], &[2], &[(0, 0)], false),
                op(&[2], &[]),
            ],
            &[],
            vec![],
        )],
    );
    let out = run(&dies, 4);
    assert_eq!(out.stats.moves_inserted, 0);
    assert_eq!(
        out.def_location(CfgInst(2), 0),
        out.use_location(CfgInst(2), 0)
    );
    assert_eq!(
        out.def_location(CfgInst(0), 0),
        out.use_location(CfgInst(2), 0)
    );
    // Same, but a is read again after: a copy of a feeds the tied use.
    let lives = build(
        3,
        vec![blk(
            vec![
                op(&[], &[0]),
                op(&[], &[1]),
                (&[0, 1], &[2], &[(0, 0)], false),
                op(&[2, 0], &[]),
            ],
            &[],
            vec![],
        )],
    );
    let out = run(&lives, 4);
    assert_eq!(out.stats.moves_inserted, 1, "{:?}", out.edits());
    assert_eq!(out.stats.max_live, 3);
    assert_eq!(
        out.def_location(CfgInst(2), 0),
        out.use_location(CfgInst(2), 0)
    );
    assert_ne!(
        out.def_location(CfgInst(0), 0),
        out.use_location(CfgInst(2), 0)
    );
    let e = out.edits()[0];
    assert_eq!(e.point, EditPoint::Before(CfgInst(2)));
    assert_eq!(e.kind(), EditKind::Move);
}

/// 0: x, y -> H(x, y); H(p, q): br p -> B, X; B: use p q -> H(q, p);
/// X: use q.
fn swap_loop() -> FunctionBuf {
    build(
        4,
        vec![
            blk(
                vec![op(&[], &[0]), op(&[], &[1]), op(&[], &[])],
                &[],
                vec![(1, &[0, 1])],
            ),
            blk(vec![op(&[2], &[])], &[2, 3], vec![(2, &[]), (3, &[])]),
            blk(
                vec![op(&[2, 3], &[]), op(&[], &[])],
                &[],
                vec![(1, &[3, 2])],
            ),
            blk(vec![op(&[3], &[])], &[], vec![]),
        ],
    )
}

#[test]
fn swap_cycle_on_an_edge_uses_a_scratch_only_for_the_cycle() {
    let f = swap_loop();
    // K = 3: a free register breaks the cycle: three moves on the back
    // edge, none elsewhere.
    let out = run(&f, 3);
    assert_eq!(
        (
            out.stats.spills,
            out.stats.reloads,
            out.stats.moves_inserted
        ),
        (0, 0, 3),
        "{:?}",
        out.edits()
    );
    assert!(out.edits().iter().all(|e| e.point
        == EditPoint::Edge {
            from: Block(2),
            succ: 0
        }));
    // K = 2: p and q fill the file, so the cycle goes through the scratch
    // slot: one store, one move, one reload.
    let out = run(&f, 2);
    assert_eq!(
        (
            out.stats.spills,
            out.stats.reloads,
            out.stats.moves_inserted
        ),
        (1, 1, 1),
        "{:?}",
        out.edits()
    );
}

/// One block: three values defined, then read (two together, then one,
/// then the first again): three live at once.
fn three_live() -> FunctionBuf {
    build(
        3,
        vec![blk(
            vec![
                op(&[], &[0]),
                op(&[], &[1]),
                op(&[], &[2]),
                op(&[0, 1], &[]),
                op(&[2], &[]),
                op(&[0], &[]),
            ],
            &[],
            vec![],
        )],
    )
}

#[test]
fn pressure_above_k_spills_and_checks() {
    // Three values live at once with K = 2: one class spills.
    let f = three_live();
    let out = run(&f, 2);
    assert_eq!(out.stats.max_live, 3);
    assert!(out.stats.spilled >= 1);
    assert!(out.stats.spills >= 1 && out.stats.reloads >= 1);
}

#[test]
fn the_checker_catches_a_wrong_register_on_one_path() {
    let f = diamond();
    let mut out = run(&f, 2);
    // Instruction 8 (block 2) reads x: point it at the other register.
    let i = CfgInst(7);
    let good = out.use_location(i, 0).unwrap();
    let bad = Location::reg(1 - good.as_reg().unwrap());
    let s = out.op_start[7] as usize;
    out.parts_mut().0[s] = bad;
    let e = CfgChecker::new().check(&f, &out).unwrap_err();
    assert_eq!((e.block, e.inst), (Block(2), Some(i)));
    assert!(matches!(
        e.kind,
        CheckErrorKind::WrongValue { vreg: VReg(1), .. }
    ));
}

#[test]
fn the_checker_catches_a_missing_reload() {
    let f = three_live();
    let mut out = run(&f, 2);
    let r = out
        .edits()
        .iter()
        .position(|e| e.kind() == EditKind::Reload)
        .expect("a reload");
    out.parts_mut().2.remove(r);
    let e = CfgChecker::new().check(&f, &out).unwrap_err();
    assert!(matches!(e.kind, CheckErrorKind::WrongValue { .. }), "{e}");
}

#[test]
fn the_checker_catches_a_clobbered_edge_copy() {
    let f = swap_loop();
    let mut out = run(&f, 3);
    // Drop the last move of the back edge's sequence: a parameter of the
    // header then holds the wrong value on the back edge.
    let n = out.edits().len();
    out.parts_mut().2.remove(n - 1);
    let e = CfgChecker::new().check(&f, &out).unwrap_err();
    assert!(matches!(e.kind, CheckErrorKind::WrongValue { .. }), "{e}");
    // Redirect an edge copy's destination: the same.
    let mut out = run(&f, 3);
    let edits = out.parts_mut().2;
    edits[0].to = Location::reg(match edits[0].to.as_reg() {
        Some(0) => 1,
        _ => 0,
    });
    assert!(CfgChecker::new().check(&f, &out).is_err());
}

#[test]
fn malformed_functions_are_rejected() {
    // Critical edge: 0 -> {1, 2}, 1 -> 2.
    let f = build(
        1,
        vec![
            blk(
                vec![op(&[], &[0]), op(&[0], &[])],
                &[],
                vec![(1, &[]), (2, &[])],
            ),
            blk(vec![op(&[], &[])], &[], vec![(2, &[])]),
            blk(vec![op(&[], &[])], &[], vec![]),
        ],
    );
    assert_eq!(
        validate(&f),
        Err(CfgError::CriticalEdge {
            from: Block(0),
            to: Block(2)
        })
    );
    // Defined twice.
    let f = build(
        1,
        vec![blk(vec![op(&[], &[0]), op(&[], &[0])], &[], vec![])],
    );
    assert!(matches!(
        validate(&f),
        Err(CfgError::DefinedTwice { vreg: VReg(0), .. })
    ));
    // Argument count.
    let f = build(
        2,
        vec![
            blk(vec![op(&[], &[0])], &[], vec![(1, &[0, 0])]),
            blk(vec![op(&[1], &[])], &[1], vec![]),
        ],
    );
    assert!(matches!(
        validate(&f),
        Err(CfgError::ArgCount {
            args: 2,
            params: 1,
            ..
        })
    ));
    // Unknown block.
    let f = build(0, vec![blk(vec![op(&[], &[])], &[], vec![(7, &[])])]);
    assert!(matches!(
        validate(&f),
        Err(CfgError::UnknownBlock { succ: Block(7), .. })
    ));
    // Read before its definition in its block, and never defined.
    let f = build(
        1,
        vec![blk(vec![op(&[0], &[]), op(&[], &[0])], &[], vec![])],
    );
    assert!(matches!(validate(&f), Err(CfgError::UseBeforeDef { .. })));
    let f = build(2, vec![blk(vec![op(&[1], &[])], &[], vec![])]);
    assert!(matches!(validate(&f), Err(CfgError::Undefined { .. })));
    // Defined on one arm only and read after the join: not dominated.
    let f = build(
        1,
        vec![
            blk(vec![op(&[], &[])], &[], vec![(1, &[]), (2, &[])]),
            blk(vec![op(&[], &[0])], &[], vec![(3, &[])]),
            blk(vec![op(&[], &[])], &[], vec![(3, &[])]),
            blk(vec![op(&[0], &[])], &[], vec![]),
        ],
    );
    assert_eq!(validate(&f), Ok(()));
    let e = CfgAllocator::new().allocate_growing(&f, 4).unwrap_err();
    assert!(matches!(
        e,
        CfgAllocError::Invalid(CfgError::NotDominated { vreg: VReg(0), .. })
    ));
    // A move with two defs.
    let f = build(
        2,
        vec![blk(
            vec![op(&[], &[0]), mv(&[0], &[1]), (&[0], &[], &[], true)],
            &[],
            vec![],
        )],
    );
    assert!(matches!(validate(&f), Err(CfgError::BadMove { .. })));
}

#[test]
fn pairs_take_aligned_registers_and_move_lane_by_lane() {
    // The swap loop with every value a pair: K = 6 leaves one free pair.
    let mut f = swap_loop();
    for v in 0..4 {
        f.set_lanes(VReg(v), 2);
    }
    let out = run(&f, 6);
    assert_eq!(out.stats.spills + out.stats.reloads, 0);
    for b in 0..4 {
        for j in 0..f.params(Block(b)).len() {
            assert_eq!(
                out.param_location(Block(b), j).unwrap().as_reg().unwrap() % 2,
                0
            );
        }
    }
    // Pairs that must spill (K = 4: p, q fill it and the cycle's scratch
    // goes to a slot lane by lane).
    let out = run(&f, 4);
    assert!(out.stats.spills >= 1);
}

#[cfg(feature = "gen")]
mod generated {
    use super::*;
    use crate::gen::cfg::{cfg_function, CfgParams};

    #[test]
    fn generated_cfgs_check_at_many_pressures() {
        let mut a = CfgAllocator::new();
        let mut c = CfgChecker::new();
        for seed in 0..12u64 {
            for &(pressure, k) in &[
                (4u32, 3u16),
                (6, 4),
                (8, 8),
                (12, 8),
                (20, 16),
                (24, 32),
                (40, 16),
            ] {
                let p = CfgParams {
                    insts: 300,
                    pressure,
                    pair_percent: if seed % 3 == 0 { 20 } else { 0 },
                    seed,
                    ..CfgParams::default()
                };
                let f = cfg_function(&p);
                validate(&f).unwrap();
                let k = if p.pair_percent > 0 { k.max(6) } else { k };
                let out = match a.allocate_checked(&f, k, &mut c) {
                    Ok(o) => o.stats,
                    Err(e) => panic!("seed {seed} pressure {pressure} k {k}: {e}"),
                };
                if out.max_live <= k as u32 && p.pair_percent == 0 {
                    assert_eq!(out.spilled, 0, "seed {seed} pressure {pressure} k {k}");
                    assert_eq!(out.rounds, 1);
                }
            }
        }
    }
}

#[test]
fn an_instruction_needing_more_than_k_registers_is_reported() {
    // Instruction 2 reads two values: K = 1 cannot hold them.
    let f = build(
        3,
        vec![blk(
            vec![
                op(&[], &[0]),
                op(&[], &[1]),
                op(&[0, 1], &[2]),
                op(&[2], &[]),
            ],
            &[],
            vec![],
        )],
    );
    let e = CfgAllocator::new().allocate_growing(&f, 1).unwrap_err();
    match e {
        CfgAllocError::Pressure { inst, k, .. } => assert_eq!((inst, k), (CfgInst(2), 1)),
        other => panic!("{other:?}"),
    }
    assert!(alloc::format!("{e}").starts_with("instruction 2: vreg"));
    // K = 2 is enough, without spills (MaxLive is 2).
    let out = run(&f, 2);
    assert_eq!(out.stats.max_live, 2);
    assert_eq!(out.stats.spilled, 0);
}

#[test]
fn the_long_rarely_read_value_is_the_one_spilled() {
    // a lives over the whole block and is read once at the end; b, c, d
    // are read together at instruction 6, where a, b, c, d are all live:
    // four values, K = 3. Spilling a frees the point for one store and one
    // reload; any other choice costs reloads at the hot reads.
    let f = build(
        4,
        vec![blk(
            vec![
                op(&[], &[0]),
                op(&[], &[1]),
                op(&[], &[2]),
                op(&[1, 2], &[]),
                op(&[1, 2], &[]),
                op(&[], &[3]),
                op(&[1, 2, 3], &[]),
                op(&[0], &[]),
            ],
            &[],
            vec![],
        )],
    );
    let out = run(&f, 3);
    assert_eq!(out.stats.max_live, 4);
    assert_eq!(
        (out.stats.spilled, out.stats.spills, out.stats.reloads),
        (1, 1, 1),
        "{:?}",
        out.edits()
    );
    let store = out
        .edits()
        .iter()
        .find(|e| e.kind() == EditKind::Spill)
        .unwrap();
    assert_eq!(store.point, EditPoint::After(CfgInst(0)));
    let reload = out
        .edits()
        .iter()
        .find(|e| e.kind() == EditKind::Reload)
        .unwrap();
    assert_eq!(reload.point, EditPoint::Before(CfgInst(7)));
}
