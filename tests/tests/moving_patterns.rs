//! Patterns that move (issue 13): loop terms, register terms with their
//! windows, partition broadcasts. Each check must catch a planted misuse:
//! the coalescing miscompile that dropped DMA offsets, a dropped or changed
//! register term, a window or an iteration outside its location; and a loop
//! with loop-indexed patterns must be checked as precisely as its unrolled
//! copy.

use tusk_core::ir::{
    full_ap, slice_ap, ApExt, DType, Inst, InstFlags, InstSpec, MemSpec, Module, Opcode, Space,
};
use tusk_core::verify::{DataflowChecker, DataflowError, Finding, Mismatch, Verifier};
use tusk_core::{Checks, Options, Workspace};
use tusk_shim::text;
use tusk_tests::harness::{self, parse, Ticks};

/// Runs the pipeline of `optlevel` on a copy of `input` with both checks,
/// and asserts the run verified; `what` names the case in a failure.
fn checked_run(input: &Module, optlevel: u8, what: &str) -> tusk_core::RunReport {
    let mut m = input.clone();
    let opts = Options {
        optlevel,
        ..Options::default()
    }
    .normalize()
    .unwrap();
    let r = harness::run_checked(&mut m, &opts, &mut Ticks::per_read(1))
        .unwrap_or_else(|e| panic!("optlevel {optlevel}: {}\n{what}", e.display(&m)));
    assert!(r.verified(), "optlevel {optlevel}: checked\n{what}");
    r
}

fn parse_err(src: &str) -> String {
    match text::parse(src.as_bytes()) {
        Ok(_) => panic!("parsed, but must not:\n{src}"),
        Err(e) => e.to_string(),
    }
}

/// The module of issue 13: two loads of one DRAM tensor at dynamic offsets.
const DYNAMIC: &str = "target trn2
dram %x [128 x 65536] elem 2 input @ DRAM<0>
dram %y [128 x 2048] elem 2 output @ DRAM<8388608>
sb %a [128 x 1024] elem 2 @ SB<0,0>
sb %b [128 x 1024] elem 2 @ SB<0,1024>
sb %c [128 x 1024] elem 2 @ SB<0,2048>
reg $o1 2 @ r0
reg $o2 2 @ r2
func @main {
entry:
  $o1 = imm 0
  $o2 = imm 32768
  %a = load %x[p0:128, 0:1024], $o1
  %b = load %x[p0:128, 1024:2048], $o2
  %c = tensor_tensor add %a, %b
  %y[p0:128, 0:1024] = save %c
}
";

fn nth_op(m: &Module, op: Opcode, n: usize) -> Inst {
    m.program_order()
        .filter(|&i| m.insts().opcode[i] == op)
        .nth(n)
        .expect("the instruction")
}

fn headroom(m: &mut Module) {
    m.reserve(tusk_core::ir::Capacity {
        insts: 4,
        aps: 8,
        dims: 16,
        mems: 4,
        names: 8,
        name_bytes: 64,
        ap_exts: 4,
        ..Default::default()
    });
}

fn check(orig: &Module, rw: &Module) -> Result<Vec<Mismatch>, DataflowError> {
    let mut c = DataflowChecker::new();
    let r = c.check(orig, rw)?;
    Ok(r.mismatches.to_vec())
}

#[test]
fn the_legacy_offset_spelling_is_a_register_term_over_the_row() {
    let m = parse(DYNAMIC);
    let a = nth_op(&m, Opcode::Load, 0);
    let src = m.inputs(a).next().unwrap();
    let r = m.ap_ext(src).reg.expect("a register term");
    assert_eq!((r.window_lo, r.window_hi, r.scale), (0, 65536, 1));
    assert_eq!(
        m.uses(a)[r.use_index as usize],
        m.reg_by_name("o1").unwrap()
    );
    // It prints in the explicit form, which parses to the same module.
    let t = text::print(&m);
    assert!(
        t.contains("%a = load %x[p0:128, 0:1024 +$o1 in 0:65536]"),
        "{t}"
    );
    assert_eq!(text::print(&parse(&t)), t);
}

/// The rewrite the coalescer made before issue 13: the two dynamic loads
/// replaced by one static load of bytes [0, 2048) into a merged tile, the
/// add re-pointed to its halves. Every iteration of a tiled loop would load
/// block 0; the checker must say so.
#[test]
fn the_coalescing_miscompile_is_a_dataflow_finding() {
    let orig = parse(DYNAMIC);
    let mut rw = orig.clone();
    headroom(&mut rw);
    let (la, lb) = (nth_op(&rw, Opcode::Load, 0), nth_op(&rw, Opcode::Load, 1));
    let x = rw.mem_by_name("x").unwrap();
    let merged = rw
        .try_add_mem(&MemSpec {
            dtype: DType::Raw(2),
            ..MemSpec::new("a.c0", Space::Sb, 128, 2048)
        })
        .unwrap();
    rw.place(merged, 0, 0);
    let ins = [slice_ap(&rw, x, 0, 128, 0, 2048)];
    let outs = [full_ap(&rw, merged)];
    let mut spec = InstSpec::new(Opcode::Load);
    spec.inputs = &ins;
    spec.outputs = &outs;
    spec.flags = InstFlags::SYNTHETIC;
    rw.insert_before(la, &spec).unwrap();
    rw.remove_inst(la);
    rw.remove_inst(lb);
    let add = nth_op(&rw, Opcode::TensorTensor, 0);
    let (a0, a1) = {
        let mut it = rw.inputs(add);
        (it.next().unwrap(), it.next().unwrap())
    };
    rw.shift_ap(a0, merged, 0, 0);
    rw.shift_ap(a1, merged, 0, 1024);
    let found = check(&orig, &rw).expect("the check runs");
    assert!(
        !found.is_empty(),
        "a rewrite that drops both DMA offsets must not check clean"
    );
    // The pipeline no longer makes it: the coalescer names the veto.
    let mut m = orig.clone();
    let opts = Options {
        smt_allocation: true,
        ..Options::default()
    }
    .normalize()
    .unwrap();
    let mut ws = Workspace::new();
    let r = ws
        .reserve(&mut m, &opts, Checks::Full { input: &orig })
        .run(&mut Ticks::per_read(1))
        .unwrap_or_else(|e| panic!("{}", e.display(&m)));
    let sb = r.dma[1].expect("the SB DMA pass ran");
    assert_eq!(sb.coalesced_dmas, 0);
    assert_eq!(sb.vetoes.dynamic_offset, 2);
}

#[test]
fn a_dropped_or_changed_register_term_is_a_finding() {
    let orig = parse(DYNAMIC);
    let load = nth_op(&orig, Opcode::Load, 0);
    // Dropped: the load keeps its register use but reads a fixed window.
    let mut rw = orig.clone();
    rw.set_ap_ext(load, 0, ApExt::default()).unwrap();
    let found = check(&orig, &rw).unwrap();
    assert!(
        found.iter().any(|x| matches!(
            x,
            Mismatch::Term {
                dropped: true,
                operand: 0,
                ..
            }
        )),
        "{found:?}"
    );
    // Changed scale.
    let mut rw = orig.clone();
    headroom(&mut rw);
    let mut e = orig.ap_ext(orig.inputs(load).next().unwrap()).clone();
    e.reg.as_mut().unwrap().scale = 2;
    rw.set_ap_ext(load, 0, e).unwrap();
    let found = check(&orig, &rw).unwrap();
    assert!(
        found
            .iter()
            .any(|x| matches!(x, Mismatch::Term { dropped: false, .. })),
        "{found:?}"
    );
    // Changed window.
    let mut rw = orig.clone();
    let mut e = orig.ap_ext(orig.inputs(load).next().unwrap()).clone();
    e.reg.as_mut().unwrap().window_hi = 32768;
    rw.set_ap_ext(load, 0, e).unwrap();
    let found = check(&orig, &rw).unwrap();
    assert!(
        found.iter().any(|x| matches!(x, Mismatch::Term { .. })),
        "{found:?}"
    );
    // Kept: clean.
    assert!(check(&orig, &orig.clone()).unwrap().is_empty());
}

#[test]
fn a_dynamic_read_sees_its_whole_window() {
    // The load may read any byte of its window: a write of DRAM bytes the
    // static part does not cover still changes what it loads.
    let src = "target trn2
dram %x [128 x 4096] input
dram %y [128 x 1024] output
sb %a [128 x 1024]
sb %z [128 x 1024]
reg $o 1
func @main {
entry:
  $o = imm 0
  %z = memset 0
  %x[p0:128, 2048:3072] = save %z
  %a = load %x[p0:128, 0:1024 +$o in 0:4096]
  %y = save %a
}
";
    let orig = parse(src);
    let mut rw = orig.clone();
    // Drop the save into the window's far end: the dynamic load's result
    // may differ, so the check must not call it clean.
    let s = nth_op(&rw, Opcode::Save, 0);
    rw.remove_inst(s);
    let found = check(&orig, &rw).unwrap();
    assert!(!found.is_empty(), "the window's contents changed");
}

#[test]
fn patterns_outside_their_location_are_refused_and_found() {
    // The reader refuses an iteration or a window past the location.
    let e = parse_err(
        "target trn2
dram %x [128 x 4096] input
sb %t [128 x 1024]
func @main {
entry:
  loop i in 5 {
  body:
    %t = load %x[p0:128, 0:1024 +1024*i]
  }
}
",
    );
    assert!(e.contains("outside its location"), "{e}");
    let e = parse_err(
        "target trn2
dram %x [128 x 4096] input
sb %t [128 x 1024]
reg $o 1
func @main {
entry:
  %t = load %x[p0:128, 0:1024 +$o in 0:8192]
}
",
    );
    assert!(e.contains("window"), "{e}");
    let e = parse_err(
        "target trn2
dram %x [128 x 4096] input
sb %t [128 x 1024]
func @main {
entry:
  loop ? {
  body:
    %t = load %x[p0:128, 0:1024 +1024*i]
  }
}
",
    );
    assert!(e.contains("loop variable"), "{e}");
    // A pass that writes the columns past the IR's check: the verifier and
    // the dataflow checker both find the last iteration outside.
    let src = "target trn2
dram %x [128 x 4096] input @ DRAM<0>
dram %y [128 x 4096] output @ DRAM<1048576>
sb %t [128 x 1024] @ SB<0,0>
func @main {
entry:
  loop i in 4 {
  body:
    %t = load %x[p0:128, 0:1024 +1024*i]
    %y[p0:128, 0:1024 +1024*i] = save %t
  }
}
";
    let orig = parse(src);
    let mut rw = orig.clone();
    let load = nth_op(&rw, Opcode::Load, 0);
    let a = rw.inputs(load).next().unwrap();
    rw.set_ap_offset(a, 512);
    let mut v = Verifier::for_module(&rw);
    let r = v.verify(&rw);
    assert!(
        r.findings
            .iter()
            .any(|f| matches!(f, Finding::PatternOutside { operand: 0, .. })),
        "{:?}",
        r.findings
    );
    let msg = r.findings[0].display(&rw).to_string();
    assert!(msg.contains("%x") && msg.contains("outside"), "{msg}");
    assert!(matches!(
        check(&orig, &rw),
        Err(DataflowError::BadAccess { .. })
    ));
    // A window moved past the row.
    let orig = parse(DYNAMIC);
    let mut rw = orig.clone();
    let load = nth_op(&rw, Opcode::Load, 0);
    let a = rw.inputs(load).next().unwrap();
    let x = rw.aps().loc[a];
    rw.shift_ap(a, x, 0, 1024);
    let mut v = Verifier::for_module(&rw);
    let r = v.verify(&rw);
    assert!(
        r.findings
            .iter()
            .any(|f| matches!(f, Finding::PatternOutside { .. })),
        "{:?}",
        r.findings
    );
}

/// A tiled loop written once, and its unrolled copy.
fn tiled(trips: u32, unrolled: bool) -> String {
    let mut s = format!(
        "target trn2
dram %x [128 x {b}] elem 4 input
dram %y [128 x {b}] elem 4 output
sb %t [128 x 512] elem 4
sb %u [128 x 512] elem 4
func @main {{
entry:
",
        b = 512 * trips
    );
    if unrolled {
        for i in 0..trips {
            let (lo, hi) = (512 * i, 512 * (i + 1));
            s.push_str(&format!(
                "  %t = load %x[p0:128, {lo}:{hi}]\n  %u = activation exp %t\n  %y[p0:128, {lo}:{hi}] = save %u\n"
            ));
        }
    } else {
        s.push_str(&format!(
            "  loop i in {trips} {{\n  body:\n    %t = load %x[p0:128, 0:512 +512*i]\n    %u = activation exp %t\n    %y[p0:128, 0:512 +512*i] = save %u\n  }}\n"
        ));
    }
    s.push_str("}\n");
    s
}

/// What the checker says of a rewrite in which the `k`-th save writes
/// `shift` bytes further (`shift` 0: the rewrite is the allocated module).
fn verdict(src: &str, opt: u8, corrupt: Option<i64>) -> (bool, bool) {
    let orig = parse(src);
    let mut m = orig.clone();
    harness::run_unchecked(&mut m, opt, &mut Ticks::per_read(1));
    let mut applied = false;
    if let Some(shift) = corrupt {
        // Every save writes its tile `shift` bytes further: in the loop one
        // instruction, unrolled every copy.
        let saves: Vec<Inst> = m
            .program_order()
            .filter(|&i| m.insts().opcode[i] == Opcode::Save)
            .collect();
        for s in saves {
            let a = m.outputs(s).next().unwrap();
            let l = m.aps().loc[a];
            if m.aps().offset[a] as i64 + shift >= 0 {
                m.shift_ap(a, l, 0, shift);
                applied = true;
            }
        }
    }
    let mut v = Verifier::for_module(&m);
    let legal = v.verify(&m).findings.is_empty();
    let mut c = DataflowChecker::new();
    let clean = match c.check(&orig, &m) {
        Ok(r) => r.is_clean(),
        Err(_) => false,
    };
    (legal && clean, applied)
}

#[test]
fn a_loop_and_its_unrolled_copy_get_the_same_verdicts() {
    for trips in [1u32, 2, 4, 7] {
        let (l, u) = (tiled(trips, false), tiled(trips, true));
        for opt in [0u8, 2, 8] {
            for corrupt in [None, Some(4), Some(512), Some(96)] {
                let ((vl, al), (vu, au)) = (verdict(&l, opt, corrupt), verdict(&u, opt, corrupt));
                assert_eq!(
                    vl, vu,
                    "trip {trips} optlevel {opt} corruption {corrupt:?}: loop {vl}, unrolled {vu}"
                );
                // A shift that could not apply (it would start below the
                // tensor) leaves the allocated module, which is clean.
                assert_eq!(al, au);
                assert_eq!(vl, !al, "trip {trips} optlevel {opt} {corrupt:?}");
            }
        }
    }
}

#[test]
fn a_broadcast_read_is_checked_per_partition() {
    // A one-partition row copied, as a broadcast, to all partitions.
    let src = "target trn2
dram %w [1 x 512] elem 4 input
dram %y [128 x 512] elem 4 output
sb %r [128 x 512] elem 4
sb %b [128 x 512] elem 4
func @main {
entry:
  %r[p0:1, 0:512] = load %w
  %b = tensor_copy %r[p0:128 step 0, 0:512]
  %y = save %b
}
";
    let m = parse(src);
    let mut ws = Workspace::new();
    let mut mm = m.clone();
    let r = ws
        .reserve(&mut mm, &Options::default(), Checks::Full { input: &m })
        .run(&mut Ticks::per_read(1));
    assert!(r.is_ok(), "{}", r.err().unwrap().display(&mm));
    // A broadcast write is refused.
    let e = parse_err(&src.replace(
        "%b = tensor_copy %r[p0:128 step 0, 0:512]",
        "%b[p0:128 step 0, 0:512] = tensor_copy %r",
    ));
    assert!(e.contains("partition step"), "{e}");
}

#[test]
fn every_new_construct_round_trips_through_text_and_json() {
    let src = "target trn2

dram %x [128 x 65536] bf16 input
dram %w [1 x 512] fp32 input
dram %d [1 x 2048] fp8e4m3 input
dram %y [128 x 4096] fp32 output
sb %a [128 x 1024] bf16
sb %r [128 x 512] fp32
sb %c [128 x 4096] fp32
sb %s [128 x 4] fp32
sb %q [128 x 1536] fp8e4m3
psum %p [128 x 2048] fp32
reg $o 1

func @main {
entry:
  $o = imm 0
  %r[p0:1, 0:512] = load %w
  %q = load %d[p0:128 step 4, 0:1536]
  loop k in 4 {
  body:
    loop j in 2 {
    inner:
      %a = load %x[p0:128, 0:1024 +1024*k +8192*j]
      %c[p0:128, +0 +1024*k, e4, [1,128]] = tensor_copy %r[p0:128 step 0, 0:512]
      %s[p0:32 +32*j, 0:4] = tensor_reduce max %c[p0:32 +32*j, 0:4096]
    }
    %a = load %x[p0:128, 0:1024 +$o*2 in 0:65536]
    %p[p0:128, 0:512] = transpose %a[p0:128, 0:256]
  }
  %y = save %c
}
";
    let m = parse(src);
    let t = text::print(&m);
    assert_eq!(text::print(&parse(&t)), t, "text round trip");
    let j = tusk_shim::json::to_json_string(&m);
    let back = tusk_shim::json::parse_json(j.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{j}"));
    assert_eq!(text::print(&back), t, "JSON round trip");
    assert!(
        t.contains("loop k in 4 {") && t.contains("+1024*k +8192*j"),
        "{t}"
    );
    assert!(
        t.contains("step 0") && t.contains("step 4") && t.contains("+$o*2 in 0:65536"),
        "{t}"
    );
}

/// A tile filled slice by slice in a loop and read after it keeps every
/// iteration's slice: live over the whole loop, so the loop's temporaries
/// cannot take its space (the allocators and the verifier once let them,
/// and only the dataflow checker saw the clobber).
#[test]
fn a_tile_written_in_slices_by_a_loop_is_live_over_the_loop() {
    let src = "target trn2
dram %x [128 x 4096] fp32 input
dram %y [128 x 4096] fp32 output
sb %t [128 x 1024] fp32
sb %u [128 x 1024] fp32
sb %acc [128 x 4096] fp32
func @main {
entry:
  loop i in 4 {
  body:
    %t = load %x[p0:128, 0:1024 +1024*i]
    %u = tensor_copy %t
    %acc[p0:128, 0:1024 +1024*i] = tensor_copy %u
  }
  %y = save %acc
}
";
    let input = parse(src);
    for opt in [0u8, 1, 2, 3, 6, 8] {
        let r = checked_run(&input, opt, src);
        // %acc + %t + %u are live together: 6144 bytes per partition.
        assert_eq!(r.space(Space::Sb).lower_bound, 6144, "optlevel {opt}");
    }
}

/// A tile that each iteration first writes whole and then in part carries
/// nothing from one iteration to the next: the bytes the partial write
/// leaves are the ones the same iteration's full write put there, so the
/// tile is live only from that write to its last read, and the loop's
/// later temporaries may share its space. When the iteration's first write
/// is partial too, the bytes it leaves come from the previous iteration:
/// the tile is live over the whole loop.
fn rewritten(first: &str, bytes: u32) -> String {
    format!(
        "target trn2
dram %x [128 x 4096] fp32 input
dram %y [128 x 4096] fp32 output
sb %t [128 x 1024] fp32
sb %u [128 x 1024] fp32
sb %v [128 x 1024] fp32
func @main {{
entry:
  %t = memset 0
  loop i in 4 {{
  body:
    {first} = load %x[p0:128, 0:{bytes} +1024*i]
    %t[p0:128, 0:4] = memset 0
    %u = tensor_copy %t
    %v = activation exp %u
    %y[p0:128, 0:1024 +1024*i] = save %v
  }}
}}
"
    )
}

#[test]
fn a_tile_written_whole_then_in_part_each_iteration_is_not_carried() {
    for (first, bytes, bound) in [("%t", 1024, 2048u64), ("%t[p0:128, 0:1020]", 1020, 3072)] {
        let src = rewritten(first, bytes);
        let input = parse(&src);
        for opt in [1u8, 2, 8] {
            let r = checked_run(&input, opt, &src);
            assert_eq!(
                r.space(Space::Sb).lower_bound,
                bound,
                "optlevel {opt}:\n{src}"
            );
        }
    }
}

/// The same two programs with `%v` placed on `%t`'s bytes: where each
/// iteration writes `%t` whole first, they are never live together and
/// both checkers accept the placement; where its first write is partial,
/// `%t`'s last four bytes cross the back edge, `%v` clobbers them, and the
/// placement verifier and the dataflow checker each reject it.
#[test]
fn both_checkers_catch_a_tile_reused_over_bytes_an_iteration_carries() {
    for (first, bytes, carried) in [("%t", 1024, false), ("%t[p0:128, 0:1020]", 1020, true)] {
        let src = rewritten(first, bytes);
        let placed = src
            .replace(
                "sb %t [128 x 1024] fp32",
                "sb %t [128 x 1024] fp32 @ SB<0,0>",
            )
            .replace(
                "sb %u [128 x 1024] fp32",
                "sb %u [128 x 1024] fp32 @ SB<0,1024>",
            )
            .replace(
                "sb %v [128 x 1024] fp32",
                "sb %v [128 x 1024] fp32 @ SB<0,0>",
            );
        let (orig, rw) = (parse(&src), parse(&placed));
        let findings = Verifier::for_module(&rw).verify(&rw).findings.len();
        let mismatches = check(&orig, &rw).unwrap().len();
        assert_eq!(
            findings > 0,
            carried,
            "{first}: verifier findings {findings}"
        );
        assert_eq!(
            mismatches > 0,
            carried,
            "{first}: dataflow mismatches {mismatches}"
        );
    }
}

/// A tile that a loop writes whole, slice by slice, before anything in the
/// same iteration of the enclosing loop reads it, carries nothing from one
/// iteration to the next: the loop's other tiles may share its space. A
/// sweep that leaves gaps (a stride wider than a slice) covers nothing, and
/// the tile stays live over the loop.
fn swept(stride: u32) -> String {
    format!(
        "target trn2
dram %x [128 x 8192] fp32 input
dram %y [128 x 8192] fp32 output
dram %z [128 x 8192] fp32 output
sb %w [128 x 4096] fp32
sb %acc [128 x 4096] fp32
func @main {{
entry:
  loop j in 2 {{
  outer:
    %w = load %x[p0:128, 0:4096 +4096*j]
    %y[p0:128, 0:4096 +4096*j] = save %w
    loop i in 2 {{
    inner:
      %acc[p0:128, 0:1024 +{stride}*i] = load %x[p0:128, 0:1024 +1024*i]
    }}
    %z[p0:128, 0:4096 +4096*j] = save %acc
  }}
}}
"
    )
}

#[test]
fn a_tile_swept_whole_by_its_loop_is_not_carried() {
    // Two slices of 1024 bytes: the dense sweep covers a 2048-byte tile.
    let dense = swept(1024).replace("sb %acc [128 x 4096]", "sb %acc [128 x 2048]");
    let dense = dense.replace("save %acc", "save %acc[p0:128, 0:2048]");
    let dense = dense.replace("%z[p0:128, 0:4096 +4096*j]", "%z[p0:128, 0:2048 +4096*j]");
    let gapped = swept(2048);
    for (src, bound) in [(&dense, 4096u64), (&gapped, 4096 + 4096)] {
        let input = parse(src);
        for opt in [1u8, 2, 8] {
            let r = checked_run(&input, opt, src);
            assert_eq!(
                r.space(Space::Sb).lower_bound,
                bound,
                "optlevel {opt}:\n{src}"
            );
        }
    }
}

/// Inside the sweep, a read of the slice the same iteration wrote needs
/// nothing carried; a read that reaches the slices earlier iterations wrote
/// keeps the tile live over the loop nest.
#[test]
fn reads_inside_a_sweep_see_only_their_own_slice() {
    let src = |read: &str| {
        format!(
            "target trn2
dram %x [128 x 8192] fp32 input
dram %y [128 x 8192] fp32 output
dram %z [128 x 8192] fp32 output
sb %w [128 x 2048] fp32
sb %acc [128 x 2048] fp32
sb %t [128 x 1024] fp32
func @main {{
entry:
  loop j in 2 {{
  outer:
    %w = load %x[p0:128, 0:2048 +4096*j]
    %y[p0:128, 0:2048 +4096*j] = save %w
    loop i in 2 {{
    inner:
      %acc[p0:128, 0:1024 +1024*i] = load %x[p0:128, 0:1024 +1024*i]
      %t = tensor_copy %acc[{read}]
      %z[p0:128, 0:1024 +4096*j +1024*i] = save %t
    }}
  }}
}}
"
        )
    };
    // Own slice: %acc lives over the inner loop only, so %w may share it
    // (the peak is %acc with %t). Always the second slice: the first inner
    // iteration reads what the previous outer iteration wrote, so %acc is
    // carried over the outer loop and meets %w.
    for (read, bound) in [
        ("p0:128, 0:1024 +1024*i", 2048 + 1024u64),
        ("p0:128, 1024:2048", 2048 + 2048),
    ] {
        let text = src(read);
        let input = parse(&text);
        for opt in [1u8, 8] {
            let r = checked_run(&input, opt, &text);
            assert_eq!(
                r.space(Space::Sb).lower_bound,
                bound,
                "optlevel {opt}:\n{text}"
            );
        }
    }
}

/// Column slices of DRAM tensors, loaded, combined and saved, written with
/// a loop when `looped`; every DRAM pattern spells its partition step
/// (`step 4096`: the row, the same cells as the default) when `pitched`,
/// and the DRAM locations are placed when `placed`.
fn slices(pitched: bool, looped: bool, placed: bool) -> String {
    let st = if pitched { " step 4096" } else { "" };
    let (px, py) = if placed {
        (" @ DRAM<0>", " @ DRAM<1048576>")
    } else {
        ("", "")
    };
    let body = if looped {
        format!(
            "  loop i in 2 {{
  body:
    %a = load %x[p0:128{st}, 0:1024 +2048*i]
    %b = load %x[p0:128{st}, 1024:2048 +2048*i]
    %c = tensor_tensor add %a, %b
    %y[p0:128{st}, 0:1024 +1024*i] = save %c
  }}
  %y[p0:128{st}, 3072:4096] = save %a
"
        )
    } else {
        format!(
            "  %a = load %x[p0:128{st}, 0:1024]
  %b = load %x[p0:128{st}, 1024:2048]
  %c = tensor_tensor add %a, %b
  %y[p0:128{st}, 0:1024] = save %c
  %y[p0:128{st}, 2048:3072] = save %a
"
        )
    };
    format!(
        "target trn2
dram %x [128 x 4096] input{px}
dram %y [128 x 4096] output{py}
sb %a [128 x 1024]
sb %b [128 x 1024]
sb %c [128 x 1024]
func @main {{
entry:
{body}}}
"
    )
}

#[test]
fn unplaced_dram_held_as_rows_or_as_flat_bytes_gives_the_same_findings() {
    // The checker holds an unplaced DRAM location as a plane of rows
    // unless a pattern on it needs flat bytes (a partition step); the two
    // forms must agree on every finding, and with placed (physical, flat)
    // DRAM in the rewrite.
    type Plant = fn(&mut Module);
    fn shift(m: &mut Module, op: Opcode, n: usize, output: bool, dpart: i32, dbyte: i64) {
        let i = nth_op(m, op, n);
        let a = if output {
            m.outputs(i).next().unwrap()
        } else {
            m.inputs(i).next().unwrap()
        };
        let l = m.aps().loc[a];
        m.shift_ap(a, l, dpart, dbyte);
    }
    let plants: [(&str, Plant); 5] = [
        ("none", |_| {}),
        ("a load reads other columns", |m| {
            shift(m, Opcode::Load, 0, false, 0, 512)
        }),
        ("a load reads one partition further", |m| {
            let i = nth_op(m, Opcode::Load, 1);
            let a = m.inputs(i).next().unwrap();
            let start = m.aps().part_start[a] as u16;
            m.set_ap_partitions(a, start, 64).unwrap();
            let l = m.aps().loc[a];
            m.shift_ap(a, l, 1, 0);
            let o = m.outputs(i).next().unwrap();
            let start = m.aps().part_start[o] as u16;
            m.set_ap_partitions(o, start, 64).unwrap();
        }),
        ("a save writes other columns", |m| {
            shift(m, Opcode::Save, 1, true, 0, 1024)
        }),
        ("a save reads the wrong tile", |m| {
            let i = nth_op(m, Opcode::Save, 0);
            let a = m.inputs(i).next().unwrap();
            let b = nth_op(m, Opcode::Load, 1);
            let t = m.aps().loc[m.outputs(b).next().unwrap()];
            m.shift_ap(a, t, 0, 0);
        }),
    ];
    for looped in [false, true] {
        let mut dirty = 0;
        for (what, plant) in plants {
            let run = |orig_pitched: bool, rw_pitched: bool, placed: bool| {
                let orig = parse(&slices(orig_pitched, looped, false));
                let mut rw = parse(&slices(rw_pitched, looped, placed));
                plant(&mut rw);
                let mut c = DataflowChecker::new();
                let found = c
                    .check(&orig, &rw)
                    .map(|r| format!("{:?}", r.mismatches))
                    .map_err(|e| format!("{e:?}"));
                (found, c.used().runs)
            };
            let (rows, rows_runs) = run(false, false, false);
            let (flat, flat_runs) = run(true, true, false);
            let (mixed, _) = run(false, true, false);
            let (placed, _) = run(false, false, true);
            let ctx = format!("looped {looped}, plant: {what}");
            assert_eq!(rows, flat, "{ctx}");
            assert_eq!(rows, mixed, "{ctx}");
            assert_eq!(rows, placed, "{ctx}");
            assert_eq!(
                rows.as_deref() == Ok("[]"),
                what == "none",
                "{ctx}: {rows:?}"
            );
            dirty += usize::from(what != "none");
            // The plane holds a column slice as one run, flat bytes as one
            // per partition.
            assert!(
                rows_runs < flat_runs,
                "{ctx}: {rows_runs} vs {flat_runs} runs"
            );
        }
        assert_eq!(dirty, plants.len() - 1);
    }
}

#[test]
fn placed_dram_that_shares_bytes_still_clobbers() {
    // A scratch tensor saved between two loads of an input: placed apart,
    // both are held in planes of their own and the rewrite is clean; placed
    // on the input's bytes, the save clobbers what the second load reads.
    let src = |scratch_at: Option<u64>| {
        let (x, s) = match scratch_at {
            Some(at) => (" @ DRAM<0>".to_string(), format!(" @ DRAM<{at}>")),
            None => (String::new(), String::new()),
        };
        format!(
            "target trn2
dram %x [128 x 4096] input{x}
dram %s [128 x 1024]{s}
dram %y [128 x 1024] output
sb %a [128 x 1024]
sb %b [128 x 1024]
func @main {{
entry:
  %a = load %x[p0:128, 0:1024]
  %s = save %a
  %b = load %x[p0:128, 1024:2048]
  %y = save %b
}}
"
        )
    };
    let orig = parse(&src(None));
    let apart = parse(&src(Some(1 << 20)));
    assert_eq!(check(&orig, &apart).unwrap(), vec![]);
    let shared = parse(&src(Some(1024)));
    let found = check(&orig, &shared).unwrap();
    let load = nth_op(&shared, Opcode::Load, 1);
    assert!(
        found
            .iter()
            .any(|x| matches!(x, Mismatch::Read { inst, .. } if *inst == load)),
        "{found:?}"
    );
}
