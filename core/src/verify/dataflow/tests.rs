//! The checker on hand-made rewrites, right and broken.

use super::shape::Seg;
use super::split::{OriginalHalf, ReadBatch, RewriteHalf, SplitRunner};
use super::*;
use crate::ir::{
    full_ap, slice_ap, Builder, Capacity, Dim, Inst, InstFlags, InstSpec, MemFlags, MemLoc,
    MemSpec, Module, Opcode, Space, SubOp,
};
use crate::target::Target;
use crate::testing::{add, dram_io, exp, mem, tiles};
use crate::verify::placement::Verifier;
use alloc::format;
use alloc::string::String;

const B: u32 = 256;

struct Prog {
    m: Module,
    x: MemLoc,
    y: MemLoc,
    t: MemLoc,
    u: MemLoc,
    v: MemLoc,
    /// load t, exp u = t, add v = u + t, save y = v.
    insts: [Inst; 4],
}

fn prog() -> Prog {
    let mut m = Module::new(Target::default());
    let mut b = Builder::new(&mut m);
    let [x, y] = dram_io(&mut b, 128, B, 1);
    let [t, u, v] = tiles(&mut b, Space::Sb, ["t", "u", "v"], 128, B, 1);
    b.func("main").unwrap();
    let i0 = b.load(t, x, 0).unwrap();
    let i1 = exp(&mut b, u, t);
    let i2 = add(&mut b, v, &[u, t]);
    let i3 = b.save(y, v, 1).unwrap();
    Prog {
        m,
        x,
        y,
        t,
        u,
        v,
        insts: [i0, i1, i2, i3],
    }
}

fn headroom(m: &mut Module) {
    m.reserve(Capacity {
        insts: 8,
        aps: 16,
        dims: 80,
        reg_operands: 16,
        mems: 8,
        regs: 8,
        names: 16,
        name_bytes: 256,
        ..Default::default()
    });
}

fn texts(m: &Module, r: &DataflowReport<'_>) -> String {
    let mut s = String::new();
    for x in r.mismatches {
        s.push_str(&format!("{}\n", x.display(m)));
    }
    s
}

/// The checker's one mismatch between the original `o` and the rewrite
/// `r`, and the text of all it found (asserted to be one).
fn one_mismatch(o: &Module, r: &Module) -> (Mismatch, String) {
    let mut c = DataflowChecker::new();
    let rep = c.check(o, r).unwrap();
    let s = texts(r, &rep);
    assert_eq!(rep.mismatches.len(), 1, "{s}");
    (rep.mismatches[0], s)
}

/// The LSA-style spill of `t`: a store to a DRAM slot after its
/// definition, a reload into a fresh location before the add, the add
/// re-pointed. Returns (rewritten, slot, reload, store, reload inst).
fn spill_t(p: &Prog, reload_before_store: bool) -> (Module, MemLoc, MemLoc, Inst, Inst) {
    let mut r = p.m.clone();
    headroom(&mut r);
    let slot = r
        .try_add_mem(&MemSpec {
            flags: MemFlags::SPILL,
            ..MemSpec::new("t_spill", Space::Dram, 128, B)
        })
        .unwrap();
    let rl = r
        .try_add_mem(&MemSpec {
            flags: MemFlags::RELOAD,
            ..MemSpec::new("t_ReloadStore0_ShrinkedCopy", Space::Sb, 128, B)
        })
        .unwrap();
    let [i0, _, i2, _] = p.insts;
    let (sa, sb) = ([full_ap(&r, p.t)], [full_ap(&r, slot)]);
    let mut st = InstSpec::new(Opcode::Save);
    st.inputs = &sa;
    st.outputs = &sb;
    st.flags = InstFlags::SPILL;
    let store = r.insert_after(i0, &st).unwrap();
    let (la, lb) = ([full_ap(&r, slot)], [full_ap(&r, rl)]);
    let mut ld = InstSpec::new(Opcode::Load);
    ld.inputs = &la;
    ld.outputs = &lb;
    ld.flags = InstFlags::RELOAD;
    let at = if reload_before_store { store } else { i2 };
    let reload = r.insert_before(at, &ld).unwrap();
    let t_in = r.inputs(i2).nth(1).unwrap();
    r.columns_mut().aps.loc[t_in] = rl;
    (r, slot, rl, store, reload)
}

#[test]
fn identical_programs_agree() {
    let p = prog();
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &p.m).unwrap();
    assert!(rep.is_clean(), "{}", texts(&p.m, &rep));
    assert_eq!(rep.coverage.compared, 4);
}

#[test]
fn correct_spill_with_placement_is_accepted() {
    let p = prog();
    let (mut r, slot, rl, _, _) = spill_t(&p, false);
    // t dies at the exp, so its reload may take t's cells again.
    r.place(p.t, 0, 0);
    r.place(p.u, 0, B as u64);
    r.place(rl, 0, 0);
    r.place(p.v, 0, 2 * B as u64);
    r.place(slot, 0, 0);
    assert!(Verifier::new().verify(&r).is_clean());
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &r).unwrap();
    assert!(rep.is_clean(), "{}", texts(&r, &rep));
    assert_eq!(rep.coverage.compared, 4);
}

#[test]
fn reload_before_the_store_is_caught() {
    let p = prog();
    let (r, _, rl, _, _) = spill_t(&p, true);
    let (found, s) = one_mismatch(&p.m, &r);
    assert_eq!(
        found,
        Mismatch::Read {
            inst: p.insts[2],
            operand: 1,
            reads: Operand::Mem(rl),
            walk: 0,
            byte: 0,
            expected: Value {
                origin: Origin::Input(p.x),
                offset: 0
            },
            found: Value {
                origin: Origin::Uninit,
                offset: 0
            },
        }
    );
    assert!(
        s.contains("`%v = tensor_tensor add %u, %t_ReloadStore0_ShrinkedCopy` (block block0, 5th) operand 2 reading %t_ReloadStore0_ShrinkedCopy"),
        "{s}"
    );
    assert!(
        s.contains("holds uninitialized memory but the original program read byte 0 of input %x"),
        "{s}"
    );
}

#[test]
fn consumer_repointed_to_the_wrong_location_is_caught() {
    let p = prog();
    let mut r = p.m.clone();
    let t_in = r.inputs(p.insts[2]).nth(1).unwrap();
    r.columns_mut().aps.loc[t_in] = p.u;
    let (found, s) = one_mismatch(&p.m, &r);
    assert!(
        matches!(found, Mismatch::Read { inst, operand: 1, reads: Operand::Mem(l),
        found: Value { origin: Origin::Def { inst: w, operand: 0 }, .. }, .. }
        if inst == p.insts[2] && l == p.u && w == p.insts[1]),
        "{s}"
    );
    assert!(
        s.contains("byte 0 of output 1 of `%u = activation exp %t` (block block0, 2nd)"),
        "{s}"
    );
}

#[test]
fn clobbering_placement_is_caught() {
    let p = prog();
    let mut r = p.m.clone();
    // u is written at the exp while t is still needed by the add.
    r.place(p.t, 0, 0);
    r.place(p.u, 0, 0);
    r.place(p.v, 0, 2 * B as u64);
    let (found, s) = one_mismatch(&p.m, &r);
    assert!(
        matches!(found, Mismatch::Read { inst, operand: 1, reads: Operand::Mem(l),
        expected: Value { origin: Origin::Input(xx), offset: 0 },
        found: Value { origin: Origin::Def { inst: w, .. }, offset: 0 }, .. }
        if inst == p.insts[2] && l == p.t && xx == p.x && w == p.insts[1]),
        "{s}"
    );
    // The placement verifier agrees, independently.
    assert!(!Verifier::new().verify(&r).is_clean());
}

#[test]
fn dropped_save_of_an_output_is_caught() {
    let p = prog();
    let mut r = p.m.clone();
    r.remove_inst(p.insts[3]);
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &r).unwrap();
    let s = texts(&r, &rep);
    assert_eq!(
        rep.mismatches,
        &[Mismatch::Output {
            mem: p.y,
            byte: 0,
            expected: Value {
                origin: Origin::Def {
                    inst: p.insts[2],
                    operand: 0
                },
                offset: 0
            },
            found: Value {
                origin: Origin::Uninit,
                offset: 0
            },
        }],
        "{s}"
    );
    assert!(
        s.contains("output %y@DRAM<?>(128 x 256) ends holding uninitialized memory"),
        "{s}"
    );
}

#[test]
fn merge_of_two_abutting_loads_is_accepted_and_a_wrong_half_is_not() {
    let mut o = Module::new(Target::default());
    let mut b = Builder::new(&mut o);
    let x = mem(&mut b, "x", Space::Dram, 128, 2 * B, 1, MemFlags::INPUT);
    let y = mem(&mut b, "y", Space::Dram, 128, B, 1, MemFlags::OUTPUT);
    let [lo, hi, s] = tiles(&mut b, Space::Sb, ["lo", "hi", "s"], 128, B, 1);
    b.func("main").unwrap();
    let ld = |b: &mut Builder<'_>, dst: MemLoc, from: u32| {
        let src = [b.slice(x, 0, 128, from, from + B)];
        let dst = [b.full(dst)];
        let mut spec = InstSpec::new(Opcode::Load);
        spec.inputs = &src;
        spec.outputs = &dst;
        b.inst(&spec).unwrap()
    };
    let l0 = ld(&mut b, lo, 0);
    let l1 = ld(&mut b, hi, B);
    let add = add(&mut b, s, &[lo, hi]);
    b.save(y, s, 0).unwrap();

    let merged = |swap: bool| {
        let mut r = o.clone();
        headroom(&mut r);
        let both = r
            .try_add_mem(&MemSpec::new("lo_hi", Space::Sb, 128, 2 * B))
            .unwrap();
        let (src, dst) = ([full_ap(&r, x)], [full_ap(&r, both)]);
        let mut spec = InstSpec::new(Opcode::Load);
        spec.inputs = &src;
        spec.outputs = &dst;
        spec.flags = InstFlags::SYNTHETIC;
        r.insert_before(l0, &spec).unwrap();
        r.remove_inst(l0);
        r.remove_inst(l1);
        for (k, a) in r.inputs(add).enumerate() {
            let half = if (k == 1) != swap { B } else { 0 };
            let sl = slice_ap(&r, both, 0, 128, half, half + B);
            r.columns_mut().aps.loc[a] = both;
            r.columns_mut().aps.offset[a] = sl.offset;
        }
        r.place(both, 0, 0);
        r.place(s, 0, 2 * B as u64);
        r
    };
    let mut c = DataflowChecker::new();
    let r = merged(false);
    assert!(Verifier::new().verify(&r).is_clean());
    let rep = c.check(&o, &r).unwrap();
    assert!(rep.is_clean(), "{}", texts(&r, &rep));
    assert_eq!(rep.coverage.compared, 2, "the two removed loads are exempt");
    let r = merged(true);
    let rep = c.check(&o, &r).unwrap();
    let t = texts(&r, &rep);
    assert_eq!(rep.mismatches.len(), 2, "{t}");
    assert!(
        t.contains("byte 256 of input %x but the original program read byte 0 of input %x"),
        "{t}"
    );
}

#[test]
fn register_spill_through_memory_and_a_lane_clobber() {
    let mut o = Module::new(Target::default());
    let mut b = Builder::new(&mut o);
    let k = b.reg("k", 1).unwrap();
    let z = b.reg("z", 1).unwrap();
    b.func("main").unwrap();
    let def = b
        .scalar(Opcode::ScalarImm, SubOp::None, &[k], &[], 5)
        .unwrap();
    let zdef = b
        .scalar(Opcode::ScalarImm, SubOp::None, &[z], &[], 1)
        .unwrap();
    let zuse = b.scalar(Opcode::Branch, SubOp::None, &[], &[z], 0).unwrap();
    let kuse = b.scalar(Opcode::Branch, SubOp::None, &[], &[k], 0).unwrap();

    let mut r = o.clone();
    headroom(&mut r);
    let slot = r
        .try_add_mem(&MemSpec {
            flags: MemFlags::SPILL,
            ..MemSpec::new("k_slot", Space::Sb, 1, 4)
        })
        .unwrap();
    let k1 = r.try_add_reg("k1", 1).unwrap();
    let k2 = r.try_add_reg("k2", 1).unwrap();
    r.regs_mut(def)[0] = k1;
    r.regs_mut(kuse)[0] = k2;
    let (outs, uses) = ([full_ap(&r, slot)], [k1]);
    let mut st = InstSpec::new(Opcode::RegSpillStore);
    st.outputs = &outs;
    st.uses = &uses;
    st.flags = InstFlags::SPILL;
    r.insert_after(def, &st).unwrap();
    let (ins, defs) = ([full_ap(&r, slot)], [k2]);
    let mut ld = InstSpec::new(Opcode::RegReload);
    ld.inputs = &ins;
    ld.defs = &defs;
    ld.flags = InstFlags::RELOAD;
    r.insert_before(kuse, &ld).unwrap();
    // One lane for everything: k1 dies at the store, z lives between, k2 after.
    r.columns_mut().regs.lane[k1] = 0;
    r.columns_mut().regs.lane[z] = 0;
    r.columns_mut().regs.lane[k2] = 0;
    r.columns_mut().regs.lane[k] = 1;
    r.place(slot, 0, 0);
    assert!(Verifier::new().verify(&r).is_clean());
    let mut c = DataflowChecker::new();
    let rep = c.check(&o, &r).unwrap();
    assert!(rep.is_clean(), "{}", texts(&r, &rep));
    assert_eq!(rep.coverage.compared, 4);

    // Without the spill, k and z on one lane: z's def clobbers k.
    let mut bad = o.clone();
    bad.columns_mut().regs.lane[k] = 3;
    bad.columns_mut().regs.lane[z] = 3;
    let rep = c.check(&o, &bad).unwrap();
    let s = texts(&bad, &rep);
    assert_eq!(rep.mismatches.len(), 1, "{s}");
    assert!(
        matches!(rep.mismatches[0], Mismatch::Read { inst, reads: Operand::Reg(rr),
        found: Value { origin: Origin::Def { inst: w, .. }, .. }, .. }
        if inst == kuse && rr == k && w == zdef),
        "{s}"
    );
    assert!(
        s.contains("`branch $k` (block block0, 4th) operand 1 reading $k"),
        "{s}"
    );
    let _ = zuse;
}

#[test]
fn a_clobber_around_the_back_edge_is_caught_on_the_second_walk() {
    // a = load x; loop 4 { b = exp a; save y = b }: a is read every
    // iteration, so b may not take a's cells.
    let mut o = Module::new(Target::default());
    let mut bl = Builder::new(&mut o);
    let [x, y] = dram_io(&mut bl, 128, B, 1);
    let [a, b] = tiles(&mut bl, Space::Sb, ["a", "b"], 128, B, 1);
    bl.func("main").unwrap();
    bl.load(a, x, 0).unwrap();
    bl.begin_loop(4).unwrap();
    let e = exp(&mut bl, b, a);
    bl.save(y, b, 0).unwrap();
    bl.end_loop().unwrap();
    let mut r = o.clone();
    r.place(a, 0, 0);
    r.place(b, 0, 0);
    let mut c = DataflowChecker::new();
    let rep = c.check(&o, &r).unwrap();
    let s = texts(&r, &rep);
    assert_eq!(rep.mismatches.len(), 1, "{s}");
    assert!(
        matches!(rep.mismatches[0], Mismatch::Read { inst, walk: 1, .. } if inst == e),
        "{s}"
    );
    assert!(s.contains("(second walk of its loop)"), "{s}");
    // Separate cells are fine.
    r.place(b, 0, B as u64);
    assert!(c.check(&o, &r).unwrap().is_clean());
}

#[test]
fn removed_producer_and_reordering_are_reported_and_the_workspace_is_reused() {
    let p = prog();
    let [i0, i1, i2, i3] = p.insts;
    // Removing the exp leaves the add reading a u nobody wrote.
    let mut r = p.m.clone();
    r.remove_inst(i1);
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &r).unwrap();
    assert_eq!(rep.mismatches.len(), 1);
    // Swapping the exp and the add (relinking the block) is a reorder.
    let mut r = p.m.clone();
    swap_second_and_third(&mut r, [i0, i1, i2, i3]);
    r.check_structure().unwrap();
    let e = c.check(&p.m, &r).unwrap_err();
    assert_eq!(
        e,
        DataflowError::Reordered {
            expected: i1,
            found: i2
        }
    );
    assert!(format!("{e}").contains("runs inst2 where the original runs inst1"));
    // With the module, both are named as the user wrote them.
    let named = format!("{}", e.display(&r));
    assert!(
        named.contains(&format!(
            "the rewrite runs {} where the original runs {}",
            r.describe_inst(i2),
            r.describe_inst(i1)
        )) && named.contains('`')
            && !named.contains("inst1"),
        "{named}"
    );
    let caps = (
        c.orig.state.reserved(),
        c.rw.state.reserved(),
        c.rw.reads.v.capacity(),
    );
    assert!(c.check(&p.m, &p.m).unwrap().is_clean());
    assert_eq!(
        caps,
        (
            c.orig.state.reserved(),
            c.rw.state.reserved(),
            c.rw.reads.v.capacity()
        )
    );
}

#[test]
fn cell_map_splits_and_reads_back() {
    use super::pieces::{Piece, Pieces};
    use super::state::{CellMap, Fill};
    let mut s = CellMap::default();
    s.reserve(64);
    s.clear(1);
    let o1 = Origin::Input(MemLoc::new(1));
    let o2 = Origin::Input(MemLoc::new(2));
    let fill = |origin, offset| Fill {
        origin,
        offset,
        pstride: 0,
    };
    s.assign(0, 7, 8, 0, 100, fill(o1, 0)).unwrap();
    s.assign(0, 7, 8, 40, 60, fill(o2, 1000)).unwrap();
    s.assign(0, 8, 9, 0, 10, fill(o2, 0)).unwrap();
    let mut out = Pieces::default();
    s.read(0, 7, 8, &[Seg::once(30, 110)], &mut out).unwrap();
    let piece = Piece::run;
    assert_eq!(
        out.v,
        [
            piece(o1, 30, 10),
            piece(o2, 1000, 20),
            piece(o1, 60, 40),
            piece(Origin::Uninit, 0, 10),
        ]
    );
    // Overwrite across run boundaries; the freed slabs are reused.
    s.assign(0, 7, 8, 10, 95, fill(o2, 5)).unwrap();
    out.clear();
    s.read(0, 7, 8, &[Seg::once(0, 100)], &mut out).unwrap();
    assert_eq!(
        out.v,
        [piece(o1, 0, 10), piece(o2, 5, 85), piece(o1, 95, 5)]
    );
    // Partition 8 kept its own value under the same addresses.
    out.clear();
    s.read(0, 8, 9, &[Seg::once(0, 12)], &mut out).unwrap();
    assert_eq!(out.v, [piece(o2, 0, 10), piece(Origin::Uninit, 0, 2)]);
}

/// Two states that store a rectangle alike — the same runs, placed alike
/// relative to two different corners — compare equal without a read; any
/// differing value, origin, partition stride, uninitialized cell or
/// extent compares unequal (and a read settles it).
#[test]
fn rectangles_stored_alike_are_found_so_and_others_are_not() {
    use super::state::{CellMap, Fill};
    let o1 = Origin::Input(MemLoc::new(1));
    let o2 = Origin::Input(MemLoc::new(2));
    let fill = |origin, offset, pstride| Fill {
        origin,
        offset,
        pstride,
    };
    // A tile of 16 partitions × 64 bytes at `base` of region 0: the left
    // half from o1 (a band per partition group), the right half from o2.
    let state = |base: u64, right: Fill, last_row: bool| {
        let mut s = CellMap::default();
        s.reserve(64);
        s.clear(2);
        // A neighbour outside the rectangle, which must not matter.
        s.assign(0, 0, 16, base.saturating_sub(8), base, fill(o2, 7, 3))
            .unwrap();
        s.assign(0, 0, 16, base, base + 32, fill(o1, 0, 64))
            .unwrap();
        s.assign(
            0,
            0,
            if last_row { 16 } else { 15 },
            base + 32,
            base + 64,
            right,
        )
        .unwrap();
        s
    };
    let a = state(100, fill(o2, 0, 32), true);
    // (other state's corner, its right half, its last row written, the
    // corner compared, alike?, what differs)
    let cases = [
        (100, fill(o2, 0, 32), true, 100, true, "nothing"),
        (4000, fill(o2, 0, 32), true, 4000, true, "placed elsewhere"),
        (100, fill(o2, 1, 32), true, 100, false, "another value"),
        (100, fill(o1, 32, 64), true, 100, false, "another origin"),
        (100, fill(o2, 0, 33), true, 100, false, "another stride"),
        (
            100,
            fill(o2, 0, 32),
            false,
            100,
            false,
            "a row left unwritten",
        ),
        (100, fill(o2, 0, 32), true, 101, false, "another corner"),
    ];
    for (base, right, last_row, corner, want, what) in cases {
        let b = state(base, right, last_row);
        let got = a.stored_alike(0, (0, 16), (100, 164), &b, 0, 0, corner);
        assert_eq!(got, want, "{what}");
    }
    // Partition 4 alone: the stride means nothing on one partition (this
    // one holds there what `a` holds, and differs on every other).
    let at4 = state(100, fill(o2, 128u64.wrapping_sub(4 * 33), 33), true);
    assert!(a.stored_alike(0, (4, 5), (100, 164), &at4, 0, 4, 100));
    assert!(!a.stored_alike(0, (3, 5), (100, 164), &at4, 0, 3, 100));
    // Another region of the same state, never written: unequal, and an
    // unknown region is unequal rather than an error.
    assert!(!a.stored_alike(0, (0, 16), (100, 164), &a, 1, 0, 100));
    assert!(!a.stored_alike(0, (0, 16), (100, 164), &a, 9, 0, 100));
    // Both never written: alike (uninitialized throughout).
    assert!(a.stored_alike(1, (0, 16), (0, 64), &a, 1, 0, 500));
}

#[test]
fn a_whole_rectangle_is_one_slab_and_reads_back_per_partition() {
    use super::pieces::{Piece, Pieces};
    use super::state::{CellMap, Fill};
    let mut s = CellMap::default();
    s.reserve(64);
    s.clear(1);
    let o = Origin::Input(MemLoc::new(3));
    // 128 partitions × 256 bytes, partition stride 256: one band.
    let fill = Fill {
        origin: o,
        offset: 0,
        pstride: 256,
    };
    s.assign(0, 0, 128, 1000, 1256, fill).unwrap();
    assert_eq!(s.slabs_in(0), 1);
    let mut out = Pieces::default();
    s.read(0, 0, 128, &[Seg::once(1000, 1256)], &mut out)
        .unwrap();
    assert_eq!(out.v, [Piece::run(o, 0, 128 * 256)]);
    // A column slice of partitions 32..64 over it, then the same columns
    // written back: the slabs collapse to one again.
    let other = Origin::Input(MemLoc::new(4));
    let slice = Fill {
        origin: other,
        offset: 0,
        pstride: 16,
    };
    s.assign(0, 32, 64, 1100, 1116, slice).unwrap();
    assert_eq!(s.slabs_in(0), 3);
    out.clear();
    s.read(0, 33, 34, &[Seg::once(1096, 1120)], &mut out)
        .unwrap();
    assert_eq!(
        out.v,
        [
            Piece::run(o, 33 * 256 + 96, 4),
            Piece::run(other, 16, 16),
            Piece::run(o, 33 * 256 + 116, 4),
        ]
    );
    let back = Fill {
        origin: o,
        offset: 32 * 256 + 100,
        pstride: 256,
    };
    s.assign(0, 32, 64, 1100, 1116, back).unwrap();
    assert_eq!(s.slabs_in(0), 1);
    // Erasing the middle partitions leaves two bands, one slab.
    let gone = Fill {
        origin: Origin::Uninit,
        offset: 0,
        pstride: 0,
    };
    s.assign(0, 10, 20, 1000, 1256, gone).unwrap();
    assert_eq!(s.slabs_in(0), 1);
    out.clear();
    s.read(0, 19, 21, &[Seg::once(1000, 1001)], &mut out)
        .unwrap();
    assert_eq!(
        out.v,
        [Piece::run(Origin::Uninit, 0, 1), Piece::run(o, 20 * 256, 1),]
    );
}

/// x (DRAM input 128 × B), t, k (SB 128 × B, 16 × B), s (SB 128 × B/2), y
/// (DRAM output 128 × B/2): load t = x; memset k; s = exp t[:, B/2..B];
/// save y = s.
struct Sliced {
    m: Module,
    t: MemLoc,
    k: MemLoc,
    s: MemLoc,
    y: MemLoc,
    /// load, memset, exp, save.
    insts: [Inst; 4],
}

fn sliced() -> Sliced {
    let mut m = Module::new(Target::default());
    let mut b = Builder::new(&mut m);
    let x = mem(&mut b, "x", Space::Dram, 128, B, 1, MemFlags::INPUT);
    let y = mem(&mut b, "y", Space::Dram, 128, B / 2, 1, MemFlags::OUTPUT);
    let t = mem(&mut b, "t", Space::Sb, 128, B, 1, MemFlags::empty());
    let k = mem(&mut b, "k", Space::Sb, 16, B, 1, MemFlags::empty());
    let s = mem(&mut b, "s", Space::Sb, 128, B / 2, 1, MemFlags::empty());
    b.func("main").unwrap();
    let i0 = b.load(t, x, 0).unwrap();
    let i1 = b.op(Opcode::Memset, &[b.full(k)], &[]).unwrap();
    let src = [b.slice(t, 0, 128, B / 2, B)];
    let dst = [b.full(s)];
    let mut spec = InstSpec::new(Opcode::Activation);
    spec.subop = SubOp::Exp;
    spec.inputs = &src;
    spec.outputs = &dst;
    let i2 = b.inst(&spec).unwrap();
    let i3 = b.save(y, s, 0).unwrap();
    Sliced {
        m,
        t,
        k,
        s,
        y,
        insts: [i0, i1, i2, i3],
    }
}

#[test]
fn a_column_slice_read_of_a_placed_tile_is_accepted() {
    let p = sliced();
    let mut r = p.m.clone();
    r.place(p.t, 0, 0);
    r.place(p.k, 0, B as u64);
    r.place(p.s, 0, 2 * B as u64);
    assert!(Verifier::new().verify(&r).is_clean());
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &r).unwrap();
    assert!(rep.is_clean(), "{}", texts(&r, &rep));
    assert_eq!(rep.coverage.compared, 4);
}

#[test]
fn a_small_tile_clobbering_some_partitions_of_a_live_one_is_caught_at_the_first_byte() {
    // k (16 partitions) on partitions 32..48 of t's cells, written while t
    // is still to be read: the exp sees the memset from partition 32 on.
    let p = sliced();
    let mut r = p.m.clone();
    r.place(p.t, 0, 0);
    r.place(p.k, 32, 0);
    r.place(p.s, 0, 2 * B as u64);
    let (found, s) = one_mismatch(&p.m, &r);
    let half = (B / 2) as u64;
    assert_eq!(
        found,
        Mismatch::Read {
            inst: p.insts[2],
            operand: 0,
            reads: Operand::Mem(p.t),
            walk: 0,
            // Partition 32 of the slice: 32 rows of B/2 bytes before it.
            byte: 32 * half,
            expected: Value {
                origin: Origin::Input(MemLoc::new(0)),
                offset: 32 * B as u64 + half,
            },
            found: Value {
                origin: Origin::Const {
                    value: 0,
                    dtype: p.m.mems().dtype[p.k].code(),
                    elem: 1,
                },
                offset: half,
            },
        },
        "{s}"
    );
    assert!(
        s.contains("byte 4096 holds byte 0 of the constant 0 (elem 1) but the original program read byte 8320 of input %x"),
        "{s}"
    );
}

#[test]
fn a_consumer_reading_the_wrong_columns_is_caught() {
    let p = sliced();
    let mut r = p.m.clone();
    let a = r.inputs(p.insts[2]).next().unwrap();
    r.columns_mut().aps.offset[a] = 0;
    let (found, s) = one_mismatch(&p.m, &r);
    assert!(
        matches!(found, Mismatch::Read { inst, byte: 0,
        expected: Value { origin: Origin::Input(_), offset: e },
        found: Value { origin: Origin::Input(_), offset: 0 }, .. }
        if inst == p.insts[2] && e == (B / 2) as u64),
        "{s}"
    );
}

#[test]
fn a_consumer_reading_with_another_stride_is_caught() {
    // Every other column of t from B/2 on: the first byte agrees, the
    // second does not.
    let p = sliced();
    let mut r = p.m.clone();
    let a = r.inputs(p.insts[2]).next().unwrap();
    assert_eq!(r.ap_ndims(a), 1);
    r.set_ap_dim(a, 0, Dim::new(2, B / 4)).unwrap();
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &r).unwrap();
    let s = texts(&r, &rep);
    assert!(!rep.is_clean(), "{s}");
    assert!(
        matches!(rep.mismatches[0], Mismatch::Read { inst, byte: 1, .. } if inst == p.insts[2]),
        "{s}"
    );
}

#[test]
fn a_shrunk_load_that_drops_columns_still_read_is_caught() {
    // A partial DMA shrunk too far: the load brings columns 0..B/2 only,
    // but the exp reads B/2..B.
    let p = sliced();
    let mut r = p.m.clone();
    let [ld, ..] = p.insts;
    let (src, dst) = (r.inputs(ld).next().unwrap(), r.outputs(ld).next().unwrap());
    for a in [src, dst] {
        let d = r.ap_dims(a)[0];
        r.set_ap_dim(a, 0, Dim::new(d.stride, B / 2)).unwrap();
    }
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &r).unwrap();
    let s = texts(&r, &rep);
    // The load's own read changed (it is an original instruction), and the
    // exp reads columns nobody wrote.
    assert_eq!(rep.mismatches.len(), 2, "{s}");
    assert!(
        matches!(rep.mismatches[0], Mismatch::Read { inst, .. } if inst == ld),
        "{s}"
    );
    assert!(
        matches!(rep.mismatches[1], Mismatch::Read { inst, byte: 0, reads: Operand::Mem(l),
        found: Value { origin: Origin::Uninit, .. }, .. }
        if inst == p.insts[2] && l == p.t),
        "{s}"
    );
}

#[test]
fn a_save_that_writes_only_some_partitions_of_an_output_is_caught() {
    let p = sliced();
    let mut r = p.m.clone();
    let sv = p.insts[3];
    for a in [r.inputs(sv).next().unwrap(), r.outputs(sv).next().unwrap()] {
        r.columns_mut().aps.part_count[a] = 64;
    }
    let mut c = DataflowChecker::new();
    let rep = c.check(&p.m, &r).unwrap();
    let s = texts(&r, &rep);
    // The save's own read is shorter (an operand-size change), and y ends
    // uninitialized from partition 64 on.
    assert!(
        rep.mismatches.iter().any(|x| matches!(x, Mismatch::Output { mem, byte, found: Value { origin: Origin::Uninit, .. }, .. }
            if *mem == p.y && *byte == 64 * (B / 2) as u64)),
        "{s}"
    );
    assert!(
        s.contains("output %y@DRAM<?>(128 x 128) ends holding uninitialized memory at byte 8192"),
        "{s}"
    );
}

#[test]
fn a_removed_spill_store_leaves_the_reload_reading_an_empty_slot() {
    // Dead-store removal gone wrong: the spill store is dropped, its slot
    // is still reloaded.
    let p = prog();
    let (mut r, _, rl, store, _) = spill_t(&p, false);
    r.remove_inst(store);
    let (found, s) = one_mismatch(&p.m, &r);
    assert!(
        matches!(found, Mismatch::Read { inst, operand: 1, reads: Operand::Mem(l),
        found: Value { origin: Origin::Uninit, .. }, .. }
        if inst == p.insts[2] && l == rl),
        "{s}"
    );
}

#[test]
fn a_reload_placed_one_partition_off_is_caught() {
    // The reload lands on partitions 1..129 of SB (on another tile's cells
    // from partition 1 on) while the add reads it from partition 0: every
    // row is shifted, and the first byte already differs.
    let p = prog();
    let (mut r, slot, rl, _, _) = spill_t(&p, false);
    r.place(p.t, 0, 0);
    r.place(p.u, 0, B as u64);
    r.place(p.v, 0, 2 * B as u64);
    r.place(slot, 0, 0);
    r.place(rl, 0, 3 * B as u64);
    let mut c = DataflowChecker::new();
    assert!(c.check(&p.m, &r).unwrap().is_clean());
    // Now the add's read of the reload starts one partition later (the
    // rewrite re-pointed it with a wrong partition start).
    let a = r.inputs(p.insts[2]).nth(1).unwrap();
    r.columns_mut().aps.part_start[a] = 1;
    r.columns_mut().aps.part_count[a] = 127;
    let rep = c.check(&p.m, &r).unwrap();
    let s = texts(&r, &rep);
    assert!(!rep.is_clean(), "{s}");
    assert!(
        matches!(rep.mismatches[0], Mismatch::Read { inst, operand: 1, byte: 0,
        expected: Value { origin: Origin::Input(_), offset: 0 },
        found: Value { origin: Origin::Input(_), offset: o }, .. }
        if inst == p.insts[2] && o == B as u64),
        "{s}"
    );
}

#[test]
fn a_register_moved_between_different_widths_is_not_a_copy() {
    // mov of a 1-lane register into a 2-lane one makes fresh values, so a
    // rewrite that replaces a use of k by its wider copy is caught.
    let mut o = Module::new(Target::default());
    let mut b = Builder::new(&mut o);
    let k = b.reg("k", 1).unwrap();
    let w = b.reg("w", 2).unwrap();
    b.func("main").unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[k], &[], 5)
        .unwrap();
    b.scalar(Opcode::ScalarMov, SubOp::None, &[w], &[k], 0)
        .unwrap();
    let kuse = b.scalar(Opcode::Branch, SubOp::None, &[], &[k], 0).unwrap();
    let mut r = o.clone();
    r.regs_mut(kuse)[0] = w;
    let mut c = DataflowChecker::new();
    let rep = c.check(&o, &r).unwrap();
    let s = texts(&r, &rep);
    assert_eq!(rep.mismatches.len(), 1, "{s}");
    assert!(
        s.contains("`branch $w` (block block0, 3rd) operand 1 reading $w"),
        "{s}"
    );
    assert!(
        s.contains("output 1 of `$w = mov $k` (block block0, 2nd)"),
        "{s}"
    );
}

/// Byte by byte: the values of a list of runs in order.
fn expand(pieces: &[super::pieces::Piece]) -> alloc::vec::Vec<Value> {
    let mut v = alloc::vec::Vec::new();
    for p in pieces {
        for k in 0..p.reps {
            for j in 0..p.len {
                v.push(match p.origin {
                    Origin::Uninit => Value::UNINIT,
                    o => Value {
                        origin: o,
                        offset: p
                            .offset
                            .wrapping_add(k.wrapping_mul(p.stride))
                            .wrapping_add(j),
                    },
                });
            }
        }
    }
    v
}

#[test]
fn a_tile_written_in_column_slices_reads_back_as_one_group() {
    // Four column slices of one value tile on partitions [0, 64) (values
    // of a tile whose rows are twice as long, so that partitions do not
    // abut), and on [64, 128) slices of two other origins in turn: four
    // slabs of two bands each, which cannot merge. A read of [0, 64)
    // joins each partition's four pieces into one run and the partitions
    // into one group; a read across partition 64 gives that group, then
    // four runs per partition.
    use super::pieces::{Piece, Pieces};
    use super::state::{CellMap, Fill};
    const ROW: u64 = 8192;
    let origin = Origin::Def {
        inst: Inst::new(7),
        operand: 0,
    };
    let other = Origin::Input(MemLoc::new(1));
    let mut s = CellMap::default();
    s.reserve(16);
    s.clear(1);
    for k in [2u64, 0, 3, 1] {
        let (a, b) = (k * 2048, (k + 1) * 2048);
        let low = Fill {
            origin,
            offset: a,
            pstride: 2 * ROW,
        };
        s.assign(0, 0, 64, a, b, low).unwrap();
        let high = Fill {
            origin: if k % 2 == 0 { other } else { origin },
            offset: a + 1_000_000,
            pstride: ROW,
        };
        s.assign(0, 64, 128, a, b, high).unwrap();
    }
    assert_eq!(s.slabs_in(0), 4);
    let group = Piece {
        origin,
        offset: 0,
        len: ROW,
        reps: 64,
        stride: 2 * ROW,
    };
    let mut out = Pieces::default();
    s.read(0, 0, 64, &[Seg::once(0, ROW)], &mut out).unwrap();
    assert_eq!(out.v, [group]);
    out.clear();
    s.read(0, 60, 66, &[Seg::once(0, ROW)], &mut out).unwrap();
    assert_eq!(
        out.v[0],
        Piece {
            offset: 60 * 2 * ROW,
            reps: 4,
            ..group
        }
    );
    assert_eq!(out.v.len(), 1 + 2 * 4);
    assert_eq!(out.v[1], Piece::run(other, 1_000_000, 2048));
    let bytes: u64 = out.v.iter().map(|p| p.bytes()).sum();
    assert_eq!(bytes, 6 * ROW);
}

#[test]
fn cell_map_agrees_with_a_byte_by_byte_model_on_random_writes_and_reads() {
    cell_map_against_the_model(1);
}

/// Writes on tile boundaries (whole multiples of 8 bytes) rewrite slabs
/// exactly, the case [`CellMap::assign`] paints in place: same values, and
/// still no two neighbouring slabs that continue each other.
#[test]
fn cell_map_agrees_with_the_model_on_tile_aligned_writes() {
    cell_map_against_the_model(8);
}

/// Random writes and reads of a [`CellMap`] against a byte-by-byte model;
/// the writes' addresses are multiples of `grid`.
fn cell_map_against_the_model(grid: u64) {
    use super::pieces::{first_difference, Pieces};
    use super::state::{CellMap, Fill};
    const REGIONS: usize = 2;
    const PARTS: usize = 9;
    const BYTES: usize = 48;
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rnd = |n: u64| crate::rng::xorshift64(&mut seed) % n;
    let mut model = alloc::vec![Value::UNINIT; REGIONS * PARTS * BYTES];
    let at = |r: usize, p: usize, x: usize| (r * PARTS + p) * BYTES + x;
    let mut s = CellMap::default();
    s.reserve(16);
    s.clear(REGIONS);
    let origins = [
        Origin::Uninit,
        Origin::Input(MemLoc::new(1)),
        Origin::Input(MemLoc::new(2)),
        Origin::Def {
            inst: Inst::new(3),
            operand: 0,
        },
    ];
    let (mut out, mut other) = (Pieces::default(), Pieces::default());
    for step in 0..4000 {
        let r = rnd(REGIONS as u64) as usize;
        let p0 = rnd(PARTS as u64) as u32;
        let p1 = p0 + 1 + rnd(PARTS as u64 - p0 as u64) as u32;
        // On the grid, half the writes are of every partition (whole
        // tiles), so that rewritten slabs continue their neighbours often.
        let (p0, p1) = if grid > 1 && rnd(2) == 0 {
            (0, PARTS as u32)
        } else {
            (p0, p1)
        };
        let tiles = BYTES as u64 / grid;
        let a = rnd(tiles) * grid;
        let b = a + grid * (1 + rnd(tiles - a / grid));
        // Few distinct fills, so that runs continue each other often.
        let origin = origins[rnd(4) as usize];
        let pstride = [0, b - a, BYTES as u64, 5][rnd(4) as usize];
        let offset = [0, a, 100][rnd(3) as usize];
        s.assign(
            r,
            p0,
            p1,
            a,
            b,
            Fill {
                origin,
                offset,
                pstride,
            },
        )
        .unwrap();
        for p in p0..p1 {
            for x in a..b {
                model[at(r, p as usize, x as usize)] = match origin {
                    Origin::Uninit => Value::UNINIT,
                    o => Value {
                        origin: o,
                        offset: offset + (p - p0) as u64 * pstride + (x - a),
                    },
                };
            }
        }
        // Read a random rectangle with one to three segments, each walked
        // one to three times (a broadcast walks the same cells again).
        let q0 = rnd(PARTS as u64) as u32;
        let q1 = q0 + 1 + rnd(PARTS as u64 - q0 as u64) as u32;
        let mut segs = alloc::vec::Vec::new();
        for _ in 0..1 + rnd(3) {
            let x0 = rnd(BYTES as u64);
            let reps = if rnd(4) == 0 { 2 + rnd(2) } else { 1 };
            segs.push(Seg {
                a: x0,
                b: x0 + 1 + rnd(BYTES as u64 - x0),
                reps,
            });
        }
        out.clear();
        s.read(r, q0, q1, &segs, &mut out).unwrap();
        let mut want = alloc::vec::Vec::new();
        for q in q0..q1 {
            for g in &segs {
                for _ in 0..g.reps {
                    for x in g.a..g.b {
                        want.push(model[at(r, q as usize, x as usize)]);
                    }
                }
            }
        }
        assert_eq!(expand(&out.v), want, "step {step}");
        // The run-level comparison agrees with the byte-level one against
        // a second read of whole rows of the other region.
        other.clear();
        let ro = (r + 1) % REGIONS;
        let n = segs.iter().map(|s| s.bytes()).sum::<u64>();
        s.read(ro, q0, q1, &[Seg::once(0, n.min(BYTES as u64))], &mut other)
            .unwrap();
        let (e, f) = (expand(&out.v), expand(&other.v));
        let naive = (0..e.len().max(f.len())).find_map(|i| {
            let x = e.get(i).copied();
            let y = f.get(i).copied();
            match (x, y) {
                (Some(x), _) if x.origin == Origin::Uninit => None,
                (Some(x), Some(y)) if x == y => None,
                (None, None) => None,
                (x, y) => Some((
                    i as u64,
                    x.unwrap_or(Value::UNINIT),
                    y.unwrap_or(Value::UNINIT),
                )),
            }
        });
        assert_eq!(first_difference(&out.v, &other.v), naive, "step {step}");
        assert_eq!(s.continuing_neighbours(r), 0, "step {step}");
    }
}

#[test]
fn copies_land_byte_for_byte_whatever_the_shapes() {
    use super::pieces::Pieces;
    use super::shape::Rect;
    use super::side::put_copy;
    use super::state::{CellMap, Fill};
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = |n: u64| crate::rng::xorshift64(&mut seed) % n;
    let mut s = CellMap::default();
    s.clear(2);
    let (mut src, mut back) = (Pieces::default(), Pieces::default());
    let mut chunk = alloc::vec::Vec::new();
    for step in 0..3000 {
        // Region 0: a few rectangles of values; region 1: the copy target.
        if step % 50 == 0 {
            s.clear(2);
            for k in 0..4 {
                let p0 = rnd(8) as u32;
                let a = rnd(40);
                let fill = Fill {
                    origin: Origin::Input(MemLoc::new(k)),
                    offset: rnd(3) * 10,
                    pstride: [0, 7, 64][rnd(3) as usize],
                };
                s.assign(0, p0, p0 + 1 + rnd(8) as u32, a, a + 1 + rnd(24), fill)
                    .unwrap();
            }
        }
        // Source: rows of `w` bytes on `parts` partitions of region 0.
        let parts = 1 + rnd(6) as u32;
        let w = 1 + rnd(12);
        let (q0, x0) = (rnd(4) as u32, rnd(40));
        src.clear();
        s.read(0, q0, q0 + parts, &[Seg::once(x0, x0 + w)], &mut src)
            .unwrap();
        // Destination: the same bytes per partition, in one or two segments.
        let d0 = rnd(30);
        let cut = rnd(w + 1);
        let segs: alloc::vec::Vec<Seg> = if cut == 0 || cut == w {
            alloc::vec![Seg::once(d0, d0 + w)]
        } else {
            alloc::vec![
                Seg::once(d0 + 40, d0 + 40 + cut),
                Seg::once(d0, d0 + w - cut)
            ]
        };
        let p = rnd(4) as u32;
        let rect = Rect {
            region: 1,
            p0: p,
            p1: p + parts,
            row: w,
            bcast: 0,
        };
        put_copy(&mut s, rect, &segs, &src.v, &mut chunk).unwrap();
        back.clear();
        s.read(1, p, p + parts, &segs, &mut back).unwrap();
        assert_eq!(expand(&back.v), expand(&src.v), "step {step}");
    }
}

#[test]
fn an_output_written_row_by_row_is_compared_in_blocks_at_the_same_byte() {
    // y (128 × 64) saved one partition at a time from the rows of a tile in
    // another order, so that no two rows' runs continue each other: a read
    // of all of y gives one run per partition. A rewrite whose save of row
    // 100 reads the tile's next row leaves other values there. However the
    // compare splits y into blocks of partitions (one read of it all, or
    // a few rows when the reads' scratch is small), it reports the first
    // difference at the same byte.
    let mut m = Module::new(Target::default());
    let mut b = Builder::new(&mut m);
    let y = mem(&mut b, "y", Space::Dram, 128, 64, 1, MemFlags::OUTPUT);
    let x = mem(&mut b, "x", Space::Dram, 128, 64, 1, MemFlags::INPUT);
    let t = mem(&mut b, "t", Space::Sb, 128, 64, 1, MemFlags::empty());
    b.func("main").unwrap();
    // Loaded, not set: every row of t holds bytes of its own.
    let (src, dst) = ([b.full(x)], [b.full(t)]);
    let mut load = InstSpec::new(Opcode::Load);
    load.inputs = &src;
    load.outputs = &dst;
    b.inst(&load).unwrap();
    let mut saves = alloc::vec::Vec::new();
    for p in 0..128u16 {
        let from = (p * 37 + 5) % 127;
        let src = [b.slice(t, from, 1, 0, 64)];
        let dst = [b.slice(y, p, 1, 0, 64)];
        let mut spec = InstSpec::new(Opcode::Save);
        spec.inputs = &src;
        spec.outputs = &dst;
        saves.push(b.inst(&spec).unwrap());
    }
    let mut r = m.clone();
    let a = r.inputs(saves[100]).next().unwrap();
    r.columns_mut().aps.part_start[a] += 1;
    let outputs = |rep: &DataflowReport<'_>| {
        rep.mismatches
            .iter()
            .filter(|x| matches!(x, Mismatch::Output { .. }))
            .copied()
            .collect::<alloc::vec::Vec<_>>()
    };
    let roomy = DataflowCapacity {
        runs: 4096,
        scratch: 1 << 16,
        mismatches: 64,
    };
    let tight = DataflowCapacity {
        runs: 1,
        scratch: 1,
        mismatches: 64,
    };
    let mut c = DataflowChecker::new();
    let whole = outputs(&c.check_growing(&m, &r, roomy).unwrap());
    let mut c = DataflowChecker::new();
    let blocks = outputs(&c.check_growing(&m, &r, tight).unwrap());
    assert_eq!(whole, blocks);
    assert!(
        matches!(whole.as_slice(), [Mismatch::Output { mem, byte, .. }]
            if *mem == y && *byte == 100 * 64),
        "{whole:?}"
    );
    // The clean rewrite is clean either way.
    for cap in [roomy, tight] {
        let mut c = DataflowChecker::new();
        assert!(c.check_growing(&m, &m.clone(), cap).unwrap().is_clean());
    }
}

/// A runner without threads: the original's half to its end, its batches
/// queued, then the rewrite's half over them (the protocol of
/// [`SplitRunner`], with an unbounded queue).
#[derive(Debug)]
struct QueueAll;

impl SplitRunner for QueueAll {
    fn run(
        &self,
        original_half: OriginalHalf<'_>,
        rewrite_half: RewriteHalf<'_>,
        original: &Module,
        rewritten: &Module,
    ) -> Result<(), DataflowError> {
        let mut q = alloc::collections::VecDeque::new();
        original_half.run(original, rewritten, &mut |b| {
            q.push_back(b);
            Some(ReadBatch::default())
        });
        rewrite_half.run(original, rewritten, &mut |_| q.pop_front())
    }
}

/// What a check says, as text: the mismatches, dropped and compared
/// counts, or the error.
fn verdict(r: Result<DataflowReport<'_>, DataflowError>) -> String {
    match r {
        Ok(r) => format!(
            "{:?} dropped {} compared {}",
            r.mismatches, r.dropped, r.coverage.compared
        ),
        Err(e) => format!("error {e:?}"),
    }
}

/// Asserts the split walk says what the sequential one says, and both what
/// the walk that keeps every location to the end says; returns it.
fn agree(o: &Module, r: &Module) -> String {
    let seq = verdict(DataflowChecker::new().check(o, r));
    let cap = DataflowCapacity::estimate(o, r);
    let split = verdict(DataflowChecker::new().check_split(o, r, cap, &QueueAll));
    assert_eq!(seq, split);
    let mut keep = DataflowChecker::new();
    keep.set_keep_all(true);
    assert_eq!(seq, verdict(keep.check(o, r)));
    let mut every = DataflowChecker::new();
    every.set_read_every_output(true);
    assert_eq!(seq, verdict(every.check(o, r)), "reading every output");
    seq
}

#[test]
fn the_split_walk_agrees_with_the_sequential_one_on_planted_violations() {
    let p = prog();
    let [i0, i1, i2, i3] = p.insts;
    let mut cases: alloc::vec::Vec<(&str, Module)> = alloc::vec::Vec::new();
    cases.push(("identical", p.m.clone()));
    let (mut r, slot, rl, _, _) = spill_t(&p, false);
    r.place(p.t, 0, 0);
    r.place(p.u, 0, B as u64);
    r.place(rl, 0, 0);
    r.place(p.v, 0, 2 * B as u64);
    r.place(slot, 0, 0);
    cases.push(("correct spill", r));
    cases.push(("reload before store", spill_t(&p, true).0));
    let mut r = p.m.clone();
    let t_in = r.inputs(i2).nth(1).unwrap();
    r.columns_mut().aps.loc[t_in] = p.u;
    cases.push(("repointed consumer", r));
    let mut r = p.m.clone();
    r.place(p.t, 0, 0);
    r.place(p.u, 0, 0);
    r.place(p.v, 0, 2 * B as u64);
    cases.push(("clobbering placement", r));
    let mut r = p.m.clone();
    r.remove_inst(i3);
    cases.push(("dropped save", r));
    let mut r = p.m.clone();
    r.remove_inst(i1);
    cases.push(("removed producer", r));
    let mut r = p.m.clone();
    swap_second_and_third(&mut r, [i0, i1, i2, i3]);
    cases.push(("reordered", r));
    let mut r = p.m.clone();
    r.remove_inst(i3);
    r.remove_inst(i2);
    r.remove_inst(i1);
    cases.push(("only the load left", r));
    let mut r = p.m.clone();
    let a = r.inputs(i2).next().unwrap();
    r.columns_mut().aps.offset[a] = 1 << 30;
    cases.push(("a read outside its location", r));
    let mut r = p.m.clone();
    let a = r.outputs(i0).next().unwrap();
    r.columns_mut().aps.offset[a] = 1 << 30;
    cases.push(("a write outside its location", r));
    let s = sliced();
    cases.push(("sliced, identical", s.m.clone()));
    let mut r = s.m.clone();
    r.place(s.t, 0, 0);
    r.place(s.k, 32, 0);
    r.place(s.s, 0, 2 * B as u64);
    cases.push(("sliced, a small tile clobbering", r));
    let mut r = s.m.clone();
    for a in [
        r.inputs(s.insts[3]).next().unwrap(),
        r.outputs(s.insts[3]).next().unwrap(),
    ] {
        r.columns_mut().aps.part_count[a] = 64;
    }
    cases.push(("sliced, a short save", r));
    // a = load x; loop 4 { b = exp a; save y = b }, and the rewrite's loop
    // made to run once: the original's second walk is left at the end.
    let mut lo = Module::new(Target::default());
    let mut bl = Builder::new(&mut lo);
    let [x, y] = dram_io(&mut bl, 128, B, 1);
    let [a, b] = tiles(&mut bl, Space::Sb, ["a", "b"], 128, B, 1);
    bl.func("main").unwrap();
    bl.load(a, x, 0).unwrap();
    bl.begin_loop(4).unwrap();
    exp(&mut bl, b, a);
    bl.save(y, b, 0).unwrap();
    bl.end_loop().unwrap();
    let mut r = lo.clone();
    r.place(a, 0, 0);
    r.place(b, 0, 0);
    cases.push(("loop, clobbered around the back edge", r));
    let mut r = lo.clone();
    let l = crate::ir::Loop::new(0);
    r.columns_mut().loops.trip[l] = 1;
    cases.push(("loop, run once in the rewrite", r));
    let mut clean = 0;
    let mut errors = 0;
    for (what, r) in &cases {
        let o = if what.starts_with("sliced") {
            &s.m
        } else if what.starts_with("loop") {
            &lo
        } else {
            &p.m
        };
        let v = agree(o, r);
        // And with the roles swapped: the original's half meets the
        // errors and the removed instructions then.
        let w = agree(r, o);
        errors += usize::from(w.starts_with("error"));
        clean += usize::from(v.starts_with("[] dropped 0"));
        errors += usize::from(v.starts_with("error"));
    }
    // The cases reach clean checks, mismatches and errors alike.
    assert!(clean >= 2 && errors >= 6, "{clean} clean, {errors} errors");
}

/// Relinks the block of `i0..i3` as `i0, i2, i1, i3`: a reorder no mutator
/// makes (the block's list stays well formed).
fn swap_second_and_third(r: &mut Module, [i0, i1, i2, i3]: [Inst; 4]) {
    let insts = r.columns_mut().insts;
    insts.next[i0] = i2;
    insts.prev[i2] = i0;
    insts.next[i2] = i1;
    insts.prev[i1] = i2;
    insts.next[i1] = i3;
    insts.prev[i3] = i1;
}

/// `c = memset 7` read by an add after an exp; the rewrite sets a copy of
/// `c` again right before the add (with `value` into a location of element
/// type `dtype`) and re-points the add to it.
fn memset_recomputed(value: i64, dtype: crate::ir::DType) -> (Module, Module, Inst) {
    let mut m = Module::new(Target::default());
    let mut b = Builder::new(&mut m);
    let [x, y] = dram_io(&mut b, 128, B, 1);
    let [t, c, u, v] = tiles(&mut b, Space::Sb, ["t", "c", "u", "v"], 128, B, 1);
    b.func("main").unwrap();
    b.load(t, x, 0).unwrap();
    let outs = [b.full(c)];
    let mut set = InstSpec::new(Opcode::Memset);
    set.outputs = &outs;
    set.imm = 7;
    b.inst(&set).unwrap();
    exp(&mut b, u, t);
    let sum = add(&mut b, v, &[u, c]);
    b.save(y, v, 1).unwrap();
    let mut r = m.clone();
    headroom(&mut r);
    r.reserve(Capacity {
        imms: 2,
        ..Default::default()
    });
    let again = r
        .try_add_mem(&MemSpec {
            dtype,
            flags: MemFlags::RELOAD,
            ..MemSpec::new("c_Recompute", Space::Sb, 128, B)
        })
        .unwrap();
    let outs = [full_ap(&r, again)];
    let mut set = InstSpec::new(Opcode::Memset);
    set.outputs = &outs;
    set.imm = value;
    set.flags = InstFlags::RELOAD;
    r.insert_before(sum, &set).unwrap();
    let c_in = r.inputs(sum).nth(1).unwrap();
    r.columns_mut().aps.loc[c_in] = again;
    (m, r, sum)
}

#[test]
fn a_memset_set_again_holds_its_constant() {
    let (m, r, _) = memset_recomputed(7, crate::ir::DType::Raw(1));
    let mut c = DataflowChecker::new();
    let rep = c.check(&m, &r).unwrap();
    assert!(rep.is_clean(), "{}", texts(&r, &rep));
}

#[test]
fn a_memset_set_again_with_another_constant_or_type_is_caught() {
    for (value, dtype) in [
        (8, crate::ir::DType::Raw(1)),
        (7, crate::ir::DType::U8),
        // Beyond 32 bits a constant is named by its instruction.
        (1 << 40, crate::ir::DType::Raw(1)),
    ] {
        let (m, r, sum) = memset_recomputed(value, dtype);
        let (found, s) = one_mismatch(&m, &r);
        assert!(
            matches!(found, Mismatch::Read { inst, operand: 1,
                expected: Value { origin: Origin::Const { value: 7, .. }, .. }, .. }
                if inst == sum),
            "{value} {dtype}: {s}"
        );
    }
}

/// A runner on two threads: the halves as [`QueueAll`] runs them, and
/// [`SplitRunner::both`] with the first closure on a second thread (the
/// output comparison in two shares at once, as the std shim runs it).
#[derive(Debug)]
struct TwoThreads;

impl SplitRunner for TwoThreads {
    fn run(
        &self,
        original_half: OriginalHalf<'_>,
        rewrite_half: RewriteHalf<'_>,
        original: &Module,
        rewritten: &Module,
    ) -> Result<(), DataflowError> {
        QueueAll.run(original_half, rewrite_half, original, rewritten)
    }

    fn both(&self, a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
        extern crate std;
        std::thread::scope(|s| {
            s.spawn(a);
            b();
        });
    }
}

/// `OUTS` outputs, each saved in two column halves, one from each of two
/// tiles (`t` = load x, `u` = exp t; which half from which alternates), so
/// that every row of an output reads as two runs; and the saves of the
/// first halves, in program order.
fn many_outputs() -> (Module, [MemLoc; 2], alloc::vec::Vec<Inst>) {
    const OUTS: usize = 80;
    const P: u16 = 16;
    let mut m = Module::new(Target::default());
    let mut b = Builder::new(&mut m);
    let [x, _] = dram_io(&mut b, P, B, 1);
    let ys: alloc::vec::Vec<MemLoc> = (0..OUTS)
        .map(|k| {
            mem(
                &mut b,
                &format!("y{k}"),
                Space::Dram,
                P,
                B,
                1,
                MemFlags::OUTPUT,
            )
        })
        .collect();
    let [t, u] = tiles(&mut b, Space::Sb, ["t", "u"], P, B, 1);
    b.func("main").unwrap();
    b.load(t, x, 0).unwrap();
    exp(&mut b, u, t);
    let mut firsts = alloc::vec::Vec::new();
    for (k, &y) in ys.iter().enumerate() {
        for (h, tile) in [[t, u], [u, t]][k % 2].into_iter().enumerate() {
            let (lo, hi) = (h as u32 * B / 2, (h as u32 + 1) * B / 2);
            let (src, dst) = ([b.slice(tile, 0, P, lo, hi)], [b.slice(y, 0, P, lo, hi)]);
            let mut spec = InstSpec::new(Opcode::Save);
            spec.inputs = &src;
            spec.outputs = &dst;
            let i = b.inst(&spec).unwrap();
            if h == 0 {
                firsts.push(i);
            }
        }
    }
    (m, [t, u], firsts)
}

/// The outputs' comparison split in two shares (on one thread and on two)
/// finds what the one-thread comparison finds, in the same order, with the
/// same ones kept and dropped past the cap (64 kept).
#[test]
fn the_outputs_compared_in_two_shares_agree_with_one_thread() {
    let (o, [t, u], saves) = many_outputs();
    let mut cases: alloc::vec::Vec<(&str, Module)> = alloc::vec::Vec::new();
    cases.push(("identical", o.clone()));
    let mut r = o.clone();
    for &s in saves.iter().step_by(3) {
        r.remove_inst(s);
    }
    cases.push(("every third save dropped", r));
    let mut r = o.clone();
    for &s in &saves {
        r.remove_inst(s);
    }
    cases.push(("every save dropped", r));
    let mut r = o.clone();
    for &s in &saves[30..50] {
        let a = r.inputs(s).next().unwrap();
        let other = if r.aps().loc[a] == t { u } else { t };
        r.columns_mut().aps.loc[a] = other;
    }
    cases.push(("saves 30..50 from the other tile", r));
    for (what, r) in &cases {
        let seq = verdict(DataflowChecker::new().check(&o, r));
        let cap = DataflowCapacity::estimate(&o, r);
        for runner in [&QueueAll as &dyn SplitRunner, &TwoThreads] {
            let split = verdict(DataflowChecker::new().check_split(&o, r, cap, runner));
            assert_eq!(seq, split, "{what}");
        }
        let want = match *what {
            "identical" => "[] dropped 0",
            "every save dropped" => "dropped 16",
            _ => "Output",
        };
        assert!(seq.contains(want), "{what}: {seq}");
    }
}

/// Under storage limits from what the walks need upwards, in steps finer
/// than one share's storage: the one-thread comparison, the shares on one
/// thread and on two give the same verdict, whether the room is too small
/// for shares, enough to start them but not for what they hold (a share
/// over its storage makes the comparison run again on one thread), or
/// ample. Two scratch sizes for one instruction's reads: 256 runs (shares
/// start at 20 KB) and one run (they start at 80 bytes, and their tallies
/// alone may take them over).
#[test]
fn the_outputs_compared_in_two_shares_agree_under_storage_limits() {
    let (o, _, saves) = many_outputs();
    let mut r = o.clone();
    for &s in saves.iter().step_by(3) {
        r.remove_inst(s);
    }
    let mut seen = alloc::collections::BTreeSet::new();
    for (scratch, step) in [(256, 1024), (1, 128)] {
        let cap = DataflowCapacity {
            scratch,
            ..DataflowCapacity::estimate(&o, &r)
        };
        // The least limit (in steps of 128 bytes) under which the split
        // walk ends (it also holds the batches in flight): from there on
        // both walks end, and only the outputs' comparison meets the limit.
        let split_at = |limit: u64| {
            let mut c = DataflowChecker::new();
            c.set_storage_limit(limit);
            verdict(c.check_split(&o, &r, cap, &QueueAll))
        };
        let mut c = DataflowChecker::new();
        c.check_growing(&o, &r, cap).unwrap();
        let mut need = c.heap_bytes();
        while split_at(need).contains("OverBudget") {
            need += 128;
        }
        for j in 0..200 {
            let limit = need + j * step;
            let mut c = DataflowChecker::new();
            c.set_storage_limit(limit);
            let seq = verdict(c.check_growing(&o, &r, cap));
            for runner in [&QueueAll as &dyn SplitRunner, &TwoThreads] {
                let mut c = DataflowChecker::new();
                c.set_storage_limit(limit);
                let split = verdict(c.check_split(&o, &r, cap, runner));
                assert_eq!(seq, split, "scratch {scratch}, limit {limit}");
            }
            seen.insert(seq);
        }
    }
    assert!(seen.iter().any(|v| v.contains("Output")), "{seen:?}");
}

/// The outputs' comparison alone, again over the final states of one
/// check, under limits that leave it from no room to ample (in steps finer
/// than a share's storage): split in two shares (on two threads), it gives
/// the one-thread comparison's findings or error at every limit — shares
/// refused for room, shares over their storage (the comparison then runs
/// again on one thread), shares that end.
#[test]
fn the_outputs_compared_again_agree_at_every_room() {
    let (o, _, saves) = many_outputs();
    let mut r = o.clone();
    for &s in saves.iter().step_by(3) {
        r.remove_inst(s);
    }
    let cap = DataflowCapacity {
        scratch: 1,
        ..DataflowCapacity::estimate(&o, &r)
    };
    let finished = || {
        let mut c = DataflowChecker::new();
        // Every output read, under every limit (the ones stored alike too,
        // which are most of them here).
        c.set_read_every_output(true);
        c.check_split(&o, &r, cap, &QueueAll).unwrap();
        c.tally.mismatches.clear();
        c.tally.dropped = 0;
        c
    };
    let (mut one, mut two) = (finished(), finished());
    let tally = |c: &DataflowChecker| format!("{:?} {}", c.tally.mismatches, c.tally.dropped);
    let mut outcomes = alloc::collections::BTreeSet::new();
    for room in (0..24 * 1024).step_by(256) {
        for c in [&mut one, &mut two] {
            c.tally.mismatches.clear();
            c.tally.dropped = 0;
            c.set_storage_limit(c.heap_bytes() + room);
        }
        let a = super::outputs::compare(&mut one, &o, &r).map(|()| tally(&one));
        let b = super::outputs::compare_split(&mut two, &o, &r, &TwoThreads).map(|()| tally(&two));
        assert_eq!(a, b, "room {room}");
        outcomes.insert(a.is_ok());
    }
    assert_eq!(outcomes.len(), 2, "both errors and findings");
}

/// The memo of fixed patterns' cells answers as `ap_rect` does: every
/// pattern of a generated module (more patterns than the memo has slots,
/// so slots are shared and overwritten) at several iterations of its loops,
/// through the memo and without it, errors included. Patterns that no loop
/// moves are answered from the memo when met again; the others never are.
#[test]
fn the_pattern_memo_answers_as_the_pattern_does() {
    use super::shape::{ap_rect, ap_rect_memo, Layout, RectMemo};
    use crate::gen::module::{generate, GenParams};
    let m = generate(&GenParams {
        instructions: 3000,
        ..GenParams::default()
    })
    .unwrap();
    let mut layout = Layout::default();
    layout.compute(&m).unwrap();
    let mut memo = RectMemo::default();
    memo.clear(u64::MAX);
    let (mut s1, mut s2) = (alloc::vec::Vec::new(), alloc::vec::Vec::new());
    let (mut hits, mut errors) = (0, 0);
    // Each pattern at several iterations in turn, as a loop body's
    // patterns are met in a walk.
    for i in m.program_order() {
        for a in m.all_aps(i) {
            for k in [0u32, 1, 2, 40, 0] {
                let iv = |_| Some(k);
                let ext = m.ap_ext(a);
                let held = memo.get(a).is_some();
                assert!(!held || ext.terms.is_empty() && ext.reg.is_none());
                let plain = ap_rect(&m, &layout, i, a, &mut s1, &iv);
                let memoed = ap_rect_memo(&m, &layout, &mut memo, i, a, &mut s2, &iv);
                match (plain, memoed) {
                    (Ok(r1), Ok(r2)) => assert_eq!((r1, &s1), (r2, &s2), "{a:?} at {k}"),
                    (Err(e1), Err(e2)) => {
                        assert_eq!(e1, e2);
                        errors += 1;
                    }
                    (p, q) => panic!("{a:?} at {k}: {p:?} against {q:?}"),
                }
                hits += held as u32;
            }
        }
    }
    assert!(m.num_aps() > 1024 && hits > 1000, "{} {hits}", m.num_aps());
    // Iteration 40 takes some moving patterns out of their locations.
    assert!(errors > 0);
    // Under a storage limit the memo takes no more than it is given, and
    // gives back what a larger walk took.
    for bytes in [0u64, 500, 5_000, 50_000] {
        memo.clear(bytes);
        assert!(
            memo.heap_bytes() <= bytes,
            "{} > {bytes}",
            memo.heap_bytes()
        );
    }
    memo.clear(0);
    assert_eq!(memo.heap_bytes(), 0);
}
