//! Loop versus unrolled (issue 13, Tests): on generated modules, a loop
//! nest and its unrolled copy ([`tusk_tests::unroll`]) get the same
//! dataflow verdicts, the loop form's placement legality implies the
//! unrolled form's, and the loop form's lower bounds are at least the
//! unrolled form's.
//!
//! The dataflow checker walks every loop a pattern moves with iteration by
//! iteration and every other loop twice; liveness keeps a location live
//! over a loop unless it can prove a partial write covers what the loop
//! reads back (`analysis::liveness`, the loop rule), so the loop form may be
//! stricter than its unrolled copy, never laxer. Where it is stricter the
//! test prints the case: a precision gap, not a failure. Where the loop form
//! says "clean" or "legal" and the unrolled form does not, the loop form
//! missed a clobber the straight-line program shows, and the test fails.
//!
//! Each module is the allocated module of optlevel 2 (clean by the
//! pipeline's own checks) and planted corruptions of it: a placed tensor
//! moved onto another one, a DMA's DRAM offset moved by one element, a DMA's
//! loop term frozen at iteration 0. A corruption is planted in the loop form
//! and the loop form is unrolled with it, so both forms carry the same
//! corruption in every iteration.

use tusk_core::analysis::{Bounds, LinearOrder, MemLiveness};
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Inst, Module, Opcode, Space};
use tusk_core::verify::{DataflowChecker, DataflowCoverage, MAX_EXACT_EXECUTIONS};
use tusk_shim::text;
use tusk_tests::harness::{self, dataflow, legality, Ticks};
use tusk_tests::unroll::{UnrollError, Unroller, MAX_UNROLLED_INSTS};

/// The generated modules: several seeds of the constructs preset (loops
/// with loop-indexed terms on every side, register terms, steps,
/// broadcasts) and of the default preset, small enough that their unrolled
/// forms stay under the unroller's cap.
fn modules(seeds: u64, instructions: usize, trip_max: u32) -> Vec<(String, Module)> {
    let mut v = Vec::new();
    for (preset, params, n) in [
        ("constructs", GenParams::constructs(), seeds),
        ("default", GenParams::default(), seeds.div_ceil(2) + 1),
    ] {
        for seed in 1..=n {
            let p = GenParams {
                instructions,
                seed,
                trip_max,
                ..params.clone()
            };
            v.push((format!("{preset} seed {seed}"), generate(&p).unwrap()));
        }
    }
    v
}

/// Lower bounds of SB, PSUM and DRAM from liveness alone.
fn bounds(m: &Module) -> [u64; 3] {
    let order = LinearOrder::of(m);
    let live = MemLiveness::of(m, &order);
    let b = Bounds::of(m, &order, &live);
    [Space::Sb, Space::Psum, Space::Dram].map(|s| b.space(s).lower_bound())
}

/// The allocated module of `optlevel`, checks off (this test runs them).
fn allocate(input: &Module, optlevel: u8) -> Module {
    let mut m = input.clone();
    harness::run_unchecked(&mut m, optlevel, &mut Ticks::per_read(1000));
    m
}

/// The allocated module of optlevel 2 with `--rotation all` (tiles moved,
/// loop tiles given slots used in turn), checks off.
fn allocate_rotated(input: &Module) -> Module {
    let mut m = input.clone();
    let opts = tusk_core::Options {
        optlevel: 2,
        rotation: tusk_core::options::Rotation::All,
        ..tusk_core::Options::default()
    }
    .normalize()
    .unwrap();
    let mut ws = tusk_core::Workspace::new();
    ws.reserve(&mut m, &opts, tusk_core::Checks::None)
        .run(&mut Ticks::per_read(1000))
        .unwrap_or_else(|e| panic!("--rotation all: {}", e.display(input)));
    m
}

/// The patterns of DMAs on their DRAM side: (instruction, operand index).
fn dram_sides(m: &Module) -> Vec<(Inst, usize)> {
    let mut v = Vec::new();
    for i in m.program_order() {
        if !m.insts().opcode[i].is_dma() {
            continue;
        }
        for (k, a) in m.all_aps(i).enumerate() {
            if m.mems().space[m.aps().loc[a]] == Space::Dram {
                v.push((i, k));
            }
        }
    }
    v
}

/// Planted corruptions of an allocated module: (what, corrupted module).
fn corruptions(m: &Module) -> Vec<(String, Module)> {
    let mut out = Vec::new();
    // A placed SB tensor moved onto the next placed one that the program
    // accesses: both are live somewhere, often at once.
    let accessed: Vec<_> = {
        let mut seen = vec![false; m.num_mems()];
        for i in m.program_order() {
            for a in m.all_aps(i) {
                seen[m.aps().loc[a].index()] = true;
            }
        }
        m.mems()
            .space
            .keys()
            .filter(|&v| seen[v.index()] && m.mems().space[v] == Space::Sb && m.is_placed(v))
            .collect()
    };
    for w in accessed.windows(2).take(3) {
        let (a, b) = (w[0], w[1]);
        if m.mems().offset[a] == m.mems().offset[b]
            && m.mems().base_partition[a] == m.mems().base_partition[b]
        {
            continue;
        }
        let mut c = m.clone();
        // Both are SB locations: no bank to keep.
        c.place(a, m.mems().base_partition[b], m.mems().offset[b]);
        out.push((
            format!("%{} moved onto %{}", m.mem_name(a), m.mem_name(b)),
            c,
        ));
    }
    let sides = dram_sides(m);
    // A DRAM offset moved by one element (a static side that stays inside
    // its location), the first two in loops and the first outside one.
    let mut in_loop = 0;
    let mut outside = 0;
    for &(i, k) in &sides {
        let a = m.all_aps(i).nth(k).unwrap();
        if m.ap_ext(a).reg.is_some() {
            continue;
        }
        let looped = m.inst_loop(i).is_valid();
        if (looped && in_loop == 2) || (!looped && outside == 1) {
            continue;
        }
        let es = m.aps().elem_size[a] as u32;
        let mut c = m.clone();
        let moved = c.aps().offset[a] + es;
        c.set_ap_offset(a, moved);
        let e = c.ap_extent(a);
        let row = c.mems().bytes[c.aps().loc[a]] as i64;
        let inside = if e.flat {
            e.byte_hi <= row * c.mems().partitions[c.aps().loc[a]] as i64
        } else {
            e.byte_hi <= row
        };
        if !inside {
            continue;
        }
        if looped {
            in_loop += 1;
        } else {
            outside += 1;
        }
        out.push((
            format!("{} operand {k}: DRAM offset +{es}", c.describe_inst(i)),
            c,
        ));
    }
    // A DMA's loop term frozen at iteration 0: every iteration moves the
    // first iteration's tile.
    let mut frozen = 0;
    for &(i, k) in &sides {
        let a = m.all_aps(i).nth(k).unwrap();
        let ext = m.ap_ext(a);
        if ext.terms.is_empty() || frozen == 2 {
            continue;
        }
        let mut e = ext.clone();
        e.terms.remove(0);
        let mut c = m.clone();
        if c.set_ap_ext(i, k, e).is_ok() {
            frozen += 1;
            out.push((
                format!("{} operand {k}: a loop term dropped", m.describe_inst(i)),
                c,
            ));
        }
    }
    // An on-chip loop term halved: iterations that wrote (or read)
    // disjoint slices of a tile now overlap.
    let mut halved = 0;
    for i in m.program_order() {
        for (k, a) in m.all_aps(i).enumerate() {
            let ext = m.ap_ext(a);
            if halved == 2 || !m.mems().space[m.aps().loc[a]].is_on_chip() || ext.terms.is_empty() {
                continue;
            }
            let es = m.aps().elem_size[a] as i64;
            let mut e = ext.clone();
            let t = &mut e.terms[0];
            t.parts /= 2;
            t.bytes = t.bytes / 2 / es * es;
            let mut c = m.clone();
            if c.set_ap_ext(i, k, e).is_ok() {
                halved += 1;
                out.push((
                    format!("{} operand {k}: a loop term halved", m.describe_inst(i)),
                    c,
                ));
            }
        }
    }
    out
}

/// What the comparison of one module found.
#[derive(Default)]
struct Tally {
    modules: u32,
    skipped: Vec<String>,
    verdicts: u32,
    /// Loop-form dataflow verdicts that were not clean.
    not_clean: u32,
    /// Loop-form placement verdicts that were not legal.
    illegal: u32,
    /// Corruptions both forms call clean and legal (a corruption of a
    /// value nobody reads, or of a tile that was not live at the time).
    harmless: u32,
    /// Loop form illegal, unrolled legal: the loop form's liveness was
    /// conservative.
    legality_gaps: Vec<String>,
    bound_gaps: Vec<String>,
    failures: Vec<String>,
    /// Modules where `--rotation all` gave a loop tile slots used in turn.
    buffered: u32,
}

fn compare(name: &str, input: &Module, optlevels: &[u8], t: &mut Tally) {
    let unroller = match Unroller::new(input) {
        Ok(u) => u,
        Err(e @ UnrollError::TooLarge { .. }) => {
            t.skipped.push(format!("{name}: {e}"));
            return;
        }
        Err(e) => panic!("{name}: {e}"),
    };
    t.modules += 1;
    let flat = unroller
        .unroll(input)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    flat.check_structure().unwrap();
    assert!(
        (0..flat.num_aps()).all(|k| flat.ap_ext(tusk_core::ir::Ap::new(k)).terms.is_empty()),
        "{name}: a loop term survived unrolling"
    );
    let (lb, ub) = (bounds(input), bounds(&flat));
    for (s, (l, u)) in ["SB", "PSUM", "DRAM"].iter().zip(lb.iter().zip(&ub)) {
        if l < u {
            t.failures.push(format!(
                "{name}: {s} lower bound {l} in the loop form, {u} unrolled: the loop form's \
                 bound is not conservative"
            ));
        } else if l > u {
            t.bound_gaps
                .push(format!("{name}: {s} bound {l} (loop) > {u} (unrolled)"));
        }
    }
    let mut cases = Vec::new();
    for &o in optlevels {
        let allocated = allocate(input, o);
        for (what, c) in corruptions(&allocated) {
            cases.push((format!("optlevel {o} {what}"), c));
        }
        cases.push((format!("optlevel {o} allocated"), allocated));
    }
    let rotated = allocate_rotated(input);
    let wraps = (0..rotated.num_aps()).any(|k| {
        let e = rotated.ap_ext(tusk_core::ir::Ap::new(k));
        e.terms.iter().any(|t| t.wraps())
    });
    t.buffered += u32::from(wraps);
    for (what, c) in corruptions(&rotated) {
        cases.push((format!("rotation all {what}"), c));
    }
    cases.push(("rotation all allocated".into(), rotated));
    for (what, rw) in cases {
        let rflat = match unroller.unroll(&rw) {
            Ok(m) => m,
            Err(e) => panic!("{name} {what}: {e}"),
        };
        t.verdicts += 1;
        let (dl, du) = (dataflow(input, &rw), dataflow(&flat, &rflat));
        if dl.is_err() {
            t.not_clean += 1;
        }
        if dl.is_ok() != du.is_ok() {
            t.failures.push(format!(
                "{name} {what}: dataflow loop form {dl:?}, unrolled {du:?}"
            ));
        }
        if what.ends_with(" allocated") {
            assert!(dl.is_ok(), "{name}: the pipeline's own output: {dl:?}");
        }
        let (pl, pu) = (legality(&rw), legality(&rflat));
        if pl.is_err() {
            t.illegal += 1;
        }
        if !what.ends_with(" allocated") && dl.is_ok() && du.is_ok() && pl.is_ok() && pu.is_ok() {
            t.harmless += 1;
        }
        match (&pl, &pu) {
            (Ok(()), Err(e)) => t.failures.push(format!(
                "{name} {what}: legal in the loop form, unrolled: {e}"
            )),
            (Err(e), Ok(())) => t
                .legality_gaps
                .push(format!("{name} {what}: loop form: {e}; unrolled legal")),
            _ => {}
        }
    }
}

/// Compares every module of `modules(seeds, instructions, trip_max)` at
/// `optlevels` and prints the tally; returns it.
fn sweep(seeds: u64, instructions: usize, trip_max: u32, optlevels: &[u8]) -> Tally {
    let mut t = Tally::default();
    for (name, m) in modules(seeds, instructions, trip_max) {
        compare(&name, &m, optlevels, &mut t);
    }
    println!(
        "{} modules compared ({} verdict pairs: {} not clean, {} not legal, {} corruptions \
         harmless in both forms), {} skipped above the cap of {MAX_UNROLLED_INSTS} instructions; \
         {} with loop tiles in slots (--rotation all)",
        t.modules,
        t.verdicts,
        t.not_clean,
        t.illegal,
        t.harmless,
        t.skipped.len(),
        t.buffered
    );
    for s in &t.skipped {
        println!("skipped: {s}");
    }
    println!(
        "{} legality gaps (loop form illegal, unrolled legal):",
        t.legality_gaps.len()
    );
    for g in &t.legality_gaps {
        println!("  {g}");
    }
    println!(
        "{} lower-bound gaps (loop form above unrolled):",
        t.bound_gaps.len()
    );
    for g in &t.bound_gaps {
        println!("  {g}");
    }
    assert!(t.failures.is_empty(), "{}", t.failures.join("\n"));
    t
}

#[test]
fn generated_loops_and_their_unrolled_copies_get_the_same_verdicts() {
    let t = sweep(6, 120, 6, &[2]);
    // The comparison is not vacuous: every module fits the cap, and the
    // corruptions make verdicts on both sides.
    assert!(
        t.skipped.is_empty() && t.modules == 10,
        "{} modules compared",
        t.modules
    );
    assert!(
        t.not_clean >= t.modules,
        "{} corrupted verdicts",
        t.not_clean
    );
}

/// The same over more seeds, longer modules and trips, and the optlevels
/// that rewrite most (DMA passes, spills). Minutes in debug; set
/// `TUSK_EQ_SEEDS` (default 16) and `TUSK_EQ_INSTS` (default 300).
#[test]
#[ignore = "a wide sweep: cargo test --release -p tusk-tests --test loop_equivalence -- --ignored"]
fn wide_sweep_of_loops_and_their_unrolled_copies() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let t = sweep(
        env("TUSK_EQ_SEEDS", 16),
        env("TUSK_EQ_INSTS", 300) as usize,
        16,
        &[0, 2, 8],
    );
    assert!(t.modules > 0, "every module was above the cap");
}

/// The unroller on the hand-written tiled loop gives the hand-unrolled
/// program: each iteration's tiles are private copies, placed where the
/// loop's tiles are.
#[test]
fn unrolling_the_tiled_loop_gives_its_hand_unrolled_copy() {
    let looped = text::parse_str(
        "target trn2
dram %x [128 x 2048] elem 4 input
dram %y [128 x 2048] elem 4 output
sb %t [128 x 512] elem 4 @ SB<0,0>
sb %u [128 x 512] elem 4 @ SB<0,2048>
reg $i 1
reg $one 1
func @main {
entry:
  $i = imm 0
  $one = imm 1
  loop i in 4 {
  body:
    %t = load %x[p0:128, 0:512 +512*i]
    %u = activation exp %t
    %y[p0:128, 0:512 +512*i] = save %u
    $i = alu add $i, $one
    branch $i
  }
}
",
    )
    .unwrap();
    let flat = Unroller::new(&looped).unwrap().unroll(&looped).unwrap();
    let printed = text::print(&flat);
    for i in 0..4 {
        let (lo, hi) = (512 * i, 512 * (i + 1));
        let iteration = format!(
            "body_{i}:\n  %t.u{i} = load %x[p0:128, {lo}:{hi}]\n  %u.u{i} = activation exp \
             %t.u{i}\n  %y[p0:128, {lo}:{hi}] = save %u.u{i}\n  $i = alu add $i, $one\n  \
             branch $i\n"
        );
        assert!(printed.contains(&iteration), "{printed}");
    }
    for i in 0..4 {
        assert!(
            printed.contains(&format!("sb %t.u{i} [128 x 512] elem 4 @ SB<0,0>"))
                && printed.contains(&format!("sb %u.u{i} [128 x 512] elem 4 @ SB<0,2048>")),
            "placements kept: {printed}"
        );
    }
    assert!(!printed.contains("loop"), "{printed}");
    assert_eq!(text::print(&text::parse_str(&printed).unwrap()), printed);
}

/// Loops of unknown trip count stay loops; the known loops inside them
/// unroll; a rewrite's added and removed instructions keep the ids the
/// dataflow checker pairs.
#[test]
fn unknown_loops_stay_and_rewrites_keep_their_pairing() {
    let src = "target trn2
dram %x [128 x 2048] elem 4 input
dram %y [128 x 2048] elem 4 output
sb %t [128 x 512] elem 4
sb %u [128 x 512] elem 4
func @main {
entry:
  loop ? {
  outer:
    loop i in 2 {
    body:
      %t = load %x[p0:128, 0:512 +512*i]
      %u = activation exp %t
      %y[p0:128, 0:512 +512*i] = save %u
    }
  }
}
";
    let orig = text::parse_str(src).unwrap();
    let u = Unroller::new(&orig).unwrap();
    let flat = u.unroll(&orig).unwrap();
    assert_eq!(flat.num_loops(), 1);
    assert_eq!(
        flat.loops().trip[tusk_core::ir::Loop::new(0)],
        tusk_core::ir::UNKNOWN_TRIP
    );
    assert_eq!(flat.num_live_insts(), 6);
    // A rewrite that copies %t through a new tile before the activation
    // and drops nothing: clean in both forms.
    let mut rw = orig.clone();
    rw.reserve(tusk_core::ir::Capacity {
        insts: 2,
        aps: 4,
        mems: 1,
        names: 2,
        name_bytes: 8,
        ..Default::default()
    });
    let act = rw
        .program_order()
        .find(|&i| rw.insts().opcode[i] == Opcode::Activation)
        .unwrap();
    let t = rw.mem_by_name("t").unwrap();
    let c = rw
        .try_add_mem(&tusk_core::ir::MemSpec {
            dtype: tusk_core::ir::DType::Raw(4),
            ..tusk_core::ir::MemSpec::new("c", Space::Sb, 128, 512)
        })
        .unwrap();
    let ins = [tusk_core::ir::full_ap(&rw, t)];
    let outs = [tusk_core::ir::full_ap(&rw, c)];
    let mut spec = tusk_core::ir::InstSpec::new(Opcode::TensorCopy);
    spec.inputs = &ins;
    spec.outputs = &outs;
    rw.insert_before(act, &spec).unwrap();
    let a = rw.inputs(act).next().unwrap();
    rw.shift_ap(a, c, 0, 0);
    let rflat = u.unroll(&rw).unwrap();
    assert_eq!(dataflow(&orig, &rw), Ok(()));
    assert_eq!(dataflow(&flat, &rflat), Ok(()));
    // Removing the save is a finding in both.
    let mut gone = rw.clone();
    let save = gone
        .program_order()
        .find(|&i| gone.insts().opcode[i] == Opcode::Save)
        .unwrap();
    gone.remove_inst(save);
    let gflat = u.unroll(&gone).unwrap();
    assert_eq!(
        gflat.num_insts(),
        rflat.num_insts(),
        "the removed save keeps its ids"
    );
    assert!(dataflow(&orig, &gone).is_err());
    assert!(dataflow(&flat, &gflat).is_err());
}

/// A clobber that needs three iterations to show: `%c` shares `%z`'s
/// cells, and the copy chain `%a → %b → %c` writes into them `%x`'s values
/// in the first two iterations (what `%z` holds anyway) and `exp`'s in the
/// third. The dataflow checker walks a loop without loop terms twice (its
/// documented model), so the loop form's dataflow verdict may be clean;
/// the unrolled form's is not, and the placement verifier finds the overlap
/// in the loop form, so no run that has both checks on accepts it.
#[test]
fn a_clobber_of_the_third_iteration_is_caught_unrolled_and_by_the_verifier() {
    let src = |placed: bool| {
        let at = |a: &str| {
            if placed {
                format!(" @ SB<0,{a}>")
            } else {
                String::new()
            }
        };
        format!(
            "target trn2
dram %x [128 x 512] fp32 input
dram %y [128 x 512] fp32 output
dram %w [128 x 512] fp32 output
sb %a [128 x 512] fp32{}
sb %b [128 x 512] fp32{}
sb %z [128 x 512] fp32{}
sb %c [128 x 512] fp32{}
func @main {{
entry:
  %a = load %x
  %b = tensor_copy %a
  %z = tensor_copy %a
  loop 3 {{
  body:
    %c = tensor_copy %b
    %b = tensor_copy %a
    %a = activation exp %a
  }}
  %y = save %z
  %w = save %c
}}
",
            at("0"),
            at("2048"),
            at("4096"),
            at("4096")
        )
    };
    let orig = text::parse_str(&src(false)).unwrap();
    let placed = text::parse_str(&src(true)).unwrap();
    let u = Unroller::new(&orig).unwrap();
    let (flat, pflat) = (u.unroll(&orig).unwrap(), u.unroll(&placed).unwrap());
    let unrolled = dataflow(&flat, &pflat);
    assert!(unrolled.is_err(), "the third iteration overwrites %z");
    let looped = dataflow(&orig, &placed);
    println!("loop form's dataflow verdict: {looped:?}; unrolled: {unrolled:?}");
    let e = legality(&placed).expect_err("%c and %z overlap while both are live");
    assert!(e.contains("%c") && e.contains("%z"), "{e}");
    assert!(legality(&pflat).is_err());
}

/// A precision gap of the loop form, kept conservative: a tile the body
/// fills with two partial writes (halves) before reading it carries nothing
/// from one iteration to the next, but liveness only credits a single
/// covering write (`analysis::liveness`, `covering_write`), so the loop
/// form keeps `%t` live over the whole loop: its SB bound is 3072 bytes
/// where the unrolled form's is 2048, and placing `%v` on `%t`'s cells is
/// illegal in the loop form and legal unrolled. What must hold holds: the
/// loop form is never laxer, and both forms agree on the dataflow.
#[test]
fn a_tile_filled_in_halves_is_conservative_in_the_loop_form() {
    let src = |placed: bool| {
        let at = |a: &str| {
            if placed {
                format!(" @ SB<0,{a}>")
            } else {
                String::new()
            }
        };
        format!(
            "target trn2
dram %x [128 x 4096] fp32 input
dram %y [128 x 4096] fp32 output
sb %t [128 x 1024] fp32{}
sb %u [128 x 1024] fp32{}
sb %v [128 x 1024] fp32{}
func @main {{
entry:
  loop i in 4 {{
  body:
    %t[p0:128, 0:512] = load %x[p0:128, 0:512 +1024*i]
    %t[p0:128, 512:1024] = load %x[p0:128, 512:1024 +1024*i]
    %u = activation exp %t
    %v = activation exp %u
    %y[p0:128, 0:1024 +1024*i] = save %v
  }}
}}
",
            at("0"),
            at("1024"),
            at("0")
        )
    };
    let orig = text::parse_str(&src(false)).unwrap();
    let placed = text::parse_str(&src(true)).unwrap();
    let u = Unroller::new(&orig).unwrap();
    let (flat, pflat) = (u.unroll(&orig).unwrap(), u.unroll(&placed).unwrap());
    let (lb, ub) = (bounds(&orig)[0], bounds(&flat)[0]);
    assert_eq!(ub, 2048, "unrolled, %t and %v never meet");
    assert!(lb >= ub, "loop form {lb} below unrolled {ub}");
    assert_eq!(legality(&pflat), Ok(()));
    let looped = legality(&placed);
    println!("SB bound: loop form {lb}, unrolled {ub}; loop-form legality: {looped:?}");
    assert_eq!(
        dataflow(&orig, &placed).is_ok(),
        dataflow(&flat, &pflat).is_ok()
    );
    assert_eq!(dataflow(&flat, &pflat), Ok(()));
}

/// A check that samples a loop (its full walk over the checker's walk
/// limit) says so, and misses what only the other iterations show: here
/// the rewrite saves from a tile slot that cycles by 3 where the load
/// fills one that cycles by 2, which agree at iterations 0, 1 and 7 (the
/// sampled ones of 8) and nowhere else in between. Walked in full (the
/// limit lifted, or at its default for a loop this small) the check finds
/// the iteration-2 read, and reports every execution compared.
#[test]
fn a_sampled_check_says_so_and_the_full_walk_finds_the_middle_iterations() {
    let src = |save_wrap: u32| {
        format!(
            "target trn2

dram %src [1 x 16] uint8 input
dram %dst [1 x 16] uint8 output
sb %t [1 x 6]

func @k {{
  loop i in 8 {{
    %t[p0:1, 0:2 +2*i mod 2] = load %src[p0:1, 0:2 +2*i]
    %dst[p0:1, 0:2 +2*i] = save %t[p0:1, 0:2 +2*i mod {save_wrap}]
  }}
}}
"
        )
    };
    let orig = text::parse_str(&src(2)).unwrap();
    let rw = text::parse_str(&src(3)).unwrap();
    let mut c = DataflowChecker::new();
    assert_eq!(c.walk_limit(), MAX_EXACT_EXECUTIONS);
    // 8 iterations of 2 instructions: over a limit of 15, within 16.
    c.set_walk_limit(15);
    let r = c.check(&orig, &rw).unwrap();
    assert!(r.is_clean(), "only the middle iterations differ");
    assert_eq!(
        r.coverage,
        DataflowCoverage {
            compared: 6,
            exact_loops: 1,
            sampled: true,
            walk: 16,
            walk_limit: 15,
        }
    );
    for limit in [16, u64::MAX, MAX_EXACT_EXECUTIONS] {
        c.set_walk_limit(limit);
        let r = c.check(&orig, &rw).unwrap();
        assert!(!r.coverage.sampled, "limit {limit}");
        assert!(
            !r.is_clean(),
            "limit {limit}: the iteration-2 save reads stale cells"
        );
        let clean = c.check(&orig, &orig).unwrap();
        assert!(clean.is_clean() && !clean.coverage.sampled);
        assert_eq!(
            clean.coverage.compared, 16,
            "limit {limit}: every execution"
        );
    }
}
