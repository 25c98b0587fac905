//! Fixtures the unit tests share: the tensors and the instructions that
//! recur in the small modules the tests build with the [`Builder`], and the
//! two independent checks every rewrite must pass (the placement verifier
//! and the dataflow checker).
//!
//! Test-only. A fixture that cannot be built is a broken test, so the
//! helpers unwrap; they declare in the order they are called, so ids,
//! names and placements are the same as when the calls are written out.

use crate::ir::{Builder, Inst, InstFlags, MemFlags, MemLoc, Module, Opcode, Reg, Space, SubOp};
use crate::target::Target;
use crate::verify::dataflow::{DataflowCapacity, DataflowChecker};
use crate::verify::placement::{Scope, Verifier};
use alloc::format;

/// Four scalar registers around a loop of 8: `i` counts (`i = 0`,
/// `one = 1`, then `i += one` and a branch on `i` in the loop), `k` is
/// defined in the loop and read after it by `z = k`, and a branch reads `z`.
/// Instructions 0..=6 in linear order; the loop spans 2..=4.
pub(crate) fn counter_loop() -> (Module, [Reg; 4]) {
    let mut m = Module::new(Target::default());
    let mut b = Builder::new(&mut m);
    let i = b.reg("i", 1).unwrap();
    let one = b.reg("one", 1).unwrap();
    let k = b.reg("k", 2).unwrap();
    let z = b.reg("z", 1).unwrap();
    b.func("f").unwrap();
    b.scalar(Opcode::ScalarImm, SubOp::None, &[i], &[], 0)
        .unwrap(); // 0
    b.scalar(Opcode::ScalarImm, SubOp::None, &[one], &[], 1)
        .unwrap(); // 1
    b.begin_loop(8).unwrap();
    b.scalar(Opcode::ScalarAlu, SubOp::Add, &[i], &[i, one], 0)
        .unwrap(); // 2
    b.scalar(Opcode::ScalarImm, SubOp::None, &[k], &[], 7)
        .unwrap(); // 3
    b.scalar(Opcode::Branch, SubOp::None, &[], &[i], 0).unwrap(); // 4
    b.end_loop().unwrap();
    b.scalar(Opcode::ScalarMov, SubOp::None, &[z], &[k], 0)
        .unwrap(); // 5
    b.scalar(Opcode::Branch, SubOp::None, &[], &[z], 0).unwrap(); // 6
    (m, [i, one, k, z])
}

/// A tensor `name` in `space`: `parts` partitions of `bytes` bytes, of
/// `elem`-byte elements.
pub(crate) fn mem(
    b: &mut Builder<'_>,
    name: &str,
    space: Space,
    parts: u16,
    bytes: u32,
    elem: u8,
    flags: MemFlags,
) -> MemLoc {
    b.mem(name, space, parts, bytes, elem, flags).unwrap()
}

/// Tensors of one shape and no flags, named `names`, declared in order.
pub(crate) fn tiles<const N: usize>(
    b: &mut Builder<'_>,
    space: Space,
    names: [&str; N],
    parts: u16,
    bytes: u32,
    elem: u8,
) -> [MemLoc; N] {
    names.map(|name| mem(b, name, space, parts, bytes, elem, MemFlags::empty()))
}

/// A kernel's DRAM input `x` and output `y`, of one shape.
pub(crate) fn dram_io(b: &mut Builder<'_>, parts: u16, bytes: u32, elem: u8) -> [MemLoc; 2] {
    [
        mem(b, "x", Space::Dram, parts, bytes, elem, MemFlags::INPUT),
        mem(b, "y", Space::Dram, parts, bytes, elem, MemFlags::OUTPUT),
    ]
}

/// `dst = exp(src)` on the activation engine.
pub(crate) fn exp(b: &mut Builder<'_>, dst: MemLoc, src: MemLoc) -> Inst {
    b.compute(
        Opcode::Activation,
        SubOp::Exp,
        dst,
        &[src],
        InstFlags::empty(),
    )
    .unwrap()
}

/// `dst = srcs[0] + srcs[1] + …` on the vector engine.
pub(crate) fn add(b: &mut Builder<'_>, dst: MemLoc, srcs: &[MemLoc]) -> Inst {
    b.compute(
        Opcode::TensorTensor,
        SubOp::Add,
        dst,
        srcs,
        InstFlags::empty(),
    )
    .unwrap()
}

/// Asserts that the placement verifier finds nothing in `m`; `what` names
/// the module in the message, which shows the first finding.
pub(crate) fn assert_placed_legally(what: &str, m: &Module) {
    assert_verified_in(what, m, None);
}

/// [`assert_placed_legally`] with the verifier's `scope` (the spaces and
/// the registers it checks) when given.
pub(crate) fn assert_verified_in(what: &str, m: &Module, scope: Option<Scope>) {
    let mut v = Verifier::for_module(m);
    if let Some(scope) = scope {
        v.set_scope(scope);
    }
    let r = v.verify(m);
    let first = r.findings.first().map(|f| format!("{}", f.display(m)));
    assert!(
        first.is_none(),
        "verifier on {what}: {} finding(s), the first: {}",
        r.total(),
        first.unwrap_or_default()
    );
}

/// Asserts that `rewritten` computes what `original` computes (the
/// dataflow checker, reserved with room for strided patterns, which read
/// more value runs than its estimate plans for), naming the first
/// mismatch. Returns the executions compared.
pub(crate) fn assert_same_dataflow(original: &Module, rewritten: &Module) -> u64 {
    let mut cap = DataflowCapacity::estimate(original, rewritten);
    cap.scratch *= 16;
    cap.runs *= 64;
    let mut d = DataflowChecker::with_capacity(cap);
    let r = d
        .check(original, rewritten)
        .expect("the dataflow checker runs");
    if let Some(x) = r.mismatches.first() {
        panic!(
            "dataflow: {} mismatch(es), the first: {}",
            r.mismatches.len() as u64 + r.dropped,
            x.display(rewritten)
        );
    }
    assert_eq!(r.dropped, 0);
    r.coverage.compared
}

/// Both checks on a rewrite: `rewritten` is placed legally and computes
/// what `original` computes.
pub(crate) fn assert_sound(original: &Module, rewritten: &Module) {
    assert_placed_legally("the rewrite", rewritten);
    assert_same_dataflow(original, rewritten);
}
