//! The independent placement verifier (also the optlevel-7 in-place check).
//!
//! Given a placed module it checks every rule of docs/SEMANTICS.md §2 and the target model,
//! sharing no placement code with any allocator (only the liveness analysis):
//!
//! - every live location is placed (DRAM locations flagged `input` or
//!   `output` are external, bound by the runtime, and may stay unplaced);
//! - every placed location lies inside its space: SB partitions and usable
//!   bytes per partition, PSUM partitions and usable banks, the DRAM size;
//! - its offset is a multiple of its `align`;
//! - on chip, its base partition obeys the start-partition rule
//!   ([`crate::Target::is_legal_start`]);
//! - PSUM: it starts on a bank boundary, its `bank` agrees with its offset,
//!   and it spans at most `psum_max_banks_per_tensor` consecutive banks;
//! - no two interfering locations ([`MemLiveness::interferes`], which honours
//!   the in-place handoff) share a (partition, byte) cell (DRAM: a byte);
//! - registers: every live register is colored, `lane + lanes <= max_regs`,
//!   a 2-lane register sits on an even lane, and no two interfering registers
//!   (closed live intervals sharing a position) share a lane, except the
//!   in-place handoff of docs/SEMANTICS.md §1 (an in-place instruction defines a register
//!   on the lanes of a register it reads and that dies there).
//!
//! The per-location rules and the sweep over locations are in `memory.rs`,
//! the register rules and their sweep in `registers.rs`, and what they report
//! in `finding.rs`.
//!
//! All scratch lives in [`Verifier`], sized by [`Verifier::reserve`] from the
//! module's capacity (address space only: the pool and the heap are written
//! up to the largest active set); a second `verify` on a module of the same
//! size does not allocate. At most `max_findings` findings are kept; the
//! rest are counted.

mod finding;
mod memory;
mod registers;

pub use finding::{Axis, Finding, FindingDisplay};
pub use memory::first_illegal_placement;

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::treap::NIL;
use crate::analysis::{LinearOrder, MemLiveness, RegLiveness};
use crate::ir::{Capacity, Module, Space};
use memory::{max_slabs_per_rect, Node, Slabs};
use registers::lane_table_len;

/// How many findings a [`Verifier`] keeps by default; the rest are counted.
pub const DEFAULT_MAX_FINDINGS: usize = 10_000;

/// Which parts of a module a [`Verifier`] checks. Everything by default; a
/// pipeline stage that has not placed a space yet turns it off.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Scope {
    /// Check PSUM locations.
    pub psum: bool,
    /// Check SB locations.
    pub sb: bool,
    /// Check DRAM locations.
    pub dram: bool,
    /// Check registers.
    pub registers: bool,
    /// Report live registers without a lane (off: check only the colored
    /// ones, as the optlevel-7 in-place check does before the colorer).
    pub uncolored: bool,
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            psum: true,
            sb: true,
            dram: true,
            registers: true,
            uncolored: true,
        }
    }
}

impl Scope {
    fn space(&self, s: Space) -> bool {
        match s {
            Space::Psum => self.psum,
            Space::Sb => self.sb,
            Space::Dram => self.dram,
        }
    }
}

/// What one [`Verifier::verify`] found.
#[derive(Copy, Clone, Debug)]
pub struct Report<'v> {
    /// The findings kept, in discovery order: per-location and per-register
    /// rules first, then conflicts in sweep order.
    pub findings: &'v [Finding],
    /// Findings beyond the cap, counted but not kept.
    pub dropped: u64,
    /// Active leaves and lane holders examined by the sweeps: at most the
    /// slabs a rectangle covers (4 on the presets) times (findings + in-place
    /// handoffs + start-rule breakers); see the module doc.
    pub candidates: u64,
}

impl Report<'_> {
    /// True when the placement breaks no rule.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty() && self.dropped == 0
    }

    /// Every finding, kept and dropped.
    pub fn total(&self) -> u64 {
        self.findings.len() as u64 + self.dropped
    }
}

/// The reusable workspace of the verifier. See the module doc for the rules
/// and the complexity.
#[derive(Debug)]
pub struct Verifier {
    scope: Scope,
    max_findings: usize,
    order: LinearOrder,
    mem_live: MemLiveness,
    reg_live: RegLiveness,
    findings: Vec<Finding>,
    dropped: u64,
    candidates: u64,
    // --- memory sweep -------------------------------------------------
    /// Swept locations as `(start << 32) | location`, sorted before the sweep.
    swept: Vec<u64>,
    /// Active locations as `(end << 32) | location`, the earliest end on top.
    ending: BinaryHeap<Reverse<u64>>,
    /// The active leaves (treap nodes); freed nodes are chained through
    /// `left` from `free`. Only the active set is ever touched.
    nodes: Vec<Node>,
    free: u32,
    /// State of the treap priorities' generator (xorshift64).
    rng: u64,
    /// Treap root of each global slab.
    roots: Vec<u32>,
    /// Nodes a treap operation or query passed (split, merge, query).
    path: Vec<u32>,
    /// Nodes above the one `remove` takes out (it merges on the way).
    rpath: Vec<u32>,
    // --- register sweep -----------------------------------------------
    /// Head of the active list of each lane.
    lane_head: Vec<u32>,
    /// List links of node `2 × reg + k` (the register's k-th lane).
    node_next: Vec<u32>,
    node_prev: Vec<u32>,
}

impl Default for Verifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.mem_live,
            self.reg_live,
            self.findings,
            self.swept,
            self.ending,
            self.nodes,
            self.roots,
            self.path,
            self.rpath,
            self.lane_head,
            self.node_next,
            self.node_prev
        )
    }

    /// An empty workspace checking everything, keeping
    /// [`DEFAULT_MAX_FINDINGS`] findings.
    pub fn new() -> Self {
        Verifier {
            scope: Scope::default(),
            max_findings: DEFAULT_MAX_FINDINGS,
            order: LinearOrder::new(),
            mem_live: MemLiveness::new(),
            reg_live: RegLiveness::new(),
            findings: Vec::new(),
            dropped: 0,
            candidates: 0,
            swept: Vec::new(),
            ending: BinaryHeap::new(),
            nodes: Vec::new(),
            free: NIL,
            rng: 1,
            roots: Vec::new(),
            path: Vec::new(),
            rpath: Vec::new(),
            lane_head: Vec::new(),
            node_next: Vec::new(),
            node_prev: Vec::new(),
        }
    }

    /// A workspace reserved for `m`.
    pub fn for_module(m: &Module) -> Self {
        let mut v = Self::new();
        v.reserve(m);
        v
    }

    /// The program order and memory liveness of the module the last
    /// [`Verifier::verify`] checked (empty before the first): a caller that
    /// needs them of the same module (the pipeline's lower bounds of the
    /// result) reads them instead of walking the module again.
    pub fn analyses(&self) -> (&LinearOrder, &MemLiveness) {
        (&self.order, &self.mem_live)
    }

    /// Restricts what is checked.
    pub fn set_scope(&mut self, scope: Scope) {
        self.scope = scope;
    }

    /// Sets how many findings are kept (the rest are counted).
    pub fn set_max_findings(&mut self, n: usize) {
        self.max_findings = n;
        crate::storage::grow(&mut self.findings, n);
    }

    /// Sizes every buffer for `m` and anything it may grow to while passes
    /// run ([`Module::capacity`]): afterwards `verify(m)` (or any module
    /// within that capacity) runs without allocating. Only address space is
    /// reserved here; the analyses run, and the pages are written, when
    /// `verify` runs.
    pub fn reserve(&mut self, m: &Module) {
        let cap = m.capacity();
        self.order.reserve(&cap);
        self.mem_live.reserve(&cap);
        self.reg_live.reserve(&cap);
        self.reserve_buffers(m, &cap);
    }

    fn compute_analyses(&mut self, m: &Module) {
        self.order.compute(m);
        self.mem_live.compute(m, &self.order);
        self.reg_live.compute(m, &self.order);
    }

    fn reserve_buffers(&mut self, m: &Module, cap: &Capacity) {
        let (mems, regs) = (cap.mems, cap.regs);
        fn grow<T>(v: &mut Vec<T>, n: usize) {
            crate::storage::grow(v, n);
        }
        grow(&mut self.findings, self.max_findings);
        grow(&mut self.swept, mems.max(regs));
        // The active set: at most every swept location, in every slab it
        // touches. Reserved (address space), but only the high-water mark
        // of the active set is ever written.
        self.ending
            .reserve(mems.max(regs).saturating_sub(self.ending.len()));
        grow(&mut self.nodes, mems * max_slabs_per_rect(m));
        grow(&mut self.roots, Slabs::of(m).total());
        // Treap paths: about 2 log2(active) deep; deeper ones grow them.
        grow(&mut self.path, 128);
        grow(&mut self.rpath, 128);
        grow(&mut self.lane_head, lane_table_len(m));
        grow(&mut self.node_next, 2 * regs);
        grow(&mut self.node_prev, 2 * regs);
    }

    /// Checks every rule on `m` and returns what broke. Reserves first (a
    /// no-op when the workspace is already large enough).
    pub fn verify(&mut self, m: &Module) -> Report<'_> {
        self.compute_analyses(m);
        self.reserve_buffers(m, &m.counts());
        self.findings.clear();
        self.dropped = 0;
        self.candidates = 0;
        self.check_locations(m);
        self.check_patterns(m);
        self.sweep_locations(m);
        if self.scope.registers {
            self.check_registers(m);
            self.sweep_registers(m);
        }
        Report {
            findings: &self.findings,
            dropped: self.dropped,
            candidates: self.candidates,
        }
    }

    fn push(&mut self, f: Finding) {
        if self.findings.len() < self.max_findings {
            self.findings.push(f);
        } else {
            self.dropped += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, Inst, InstFlags, MemFlags, MemLoc, Opcode, SubOp};
    use crate::target::Target;
    use alloc::format;
    use alloc::string::String;

    pub(super) fn sb(b: &mut Builder<'_>, name: &str, parts: u16, bytes: u32) -> MemLoc {
        b.mem(name, Space::Sb, parts, bytes, 1, MemFlags::empty())
            .unwrap()
    }

    /// x(in) → t = load x; u = exp t; v = exp u; y = save v. Positions 0..=3.
    pub(super) fn chain() -> (Module, [MemLoc; 5], [Inst; 4]) {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let x = b
            .mem("x", Space::Dram, 128, 4096, 1, MemFlags::INPUT)
            .unwrap();
        let y = b
            .mem("y", Space::Dram, 128, 4096, 1, MemFlags::OUTPUT)
            .unwrap();
        let t = sb(&mut b, "t", 128, 4096);
        let u = sb(&mut b, "u", 128, 4096);
        let v = sb(&mut b, "v", 128, 4096);
        b.func("main").unwrap();
        let i0 = b.load(t, x, 0).unwrap();
        let i1 = b
            .compute(Opcode::Activation, SubOp::Exp, u, &[t], InstFlags::empty())
            .unwrap();
        let i2 = b
            .compute(Opcode::Activation, SubOp::Exp, v, &[u], InstFlags::empty())
            .unwrap();
        let i3 = b.save(y, v, 1).unwrap();
        (m, [x, y, t, u, v], [i0, i1, i2, i3])
    }

    pub(super) fn texts(m: &Module, r: &Report<'_>) -> String {
        let mut s = String::new();
        for f in r.findings {
            s.push_str(&format!("{}\n", f.display(m)));
        }
        s
    }

    #[test]
    fn findings_are_capped_and_counted() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let xs: alloc::vec::Vec<_> = (0..20)
            .map(|k| sb(&mut b, &format!("x{k}"), 128, 64))
            .collect();
        b.func("f").unwrap();
        for &x in &xs {
            b.op(Opcode::Memset, &[b.full(x)], &[]).unwrap();
        }
        let ins: alloc::vec::Vec<_> = xs.iter().take(15).map(|&x| b.full(x)).collect();
        let outs = [b.full(xs[19])];
        let mut spec = crate::ir::InstSpec::new(Opcode::TensorTensor);
        spec.inputs = &ins[..14];
        spec.outputs = &outs;
        b.inst(&spec).unwrap();
        for &x in &xs {
            m.place(x, 0, 0);
        }
        let mut ver = Verifier::new();
        ver.set_max_findings(5);
        let r = ver.verify(&m);
        assert_eq!(r.findings.len(), 5);
        assert!(r.dropped > 0);
        // x0..x13 are live from their memsets to the read at 20, each of
        // x14..x18 at its one memset, x19 from 19: all placed on one cell,
        // C(14,2) + 5 × 14 + 14 = 175 overlapping pairs.
        assert_eq!(r.total(), 175);
    }

    #[test]
    fn a_second_run_reuses_the_workspace() {
        let (mut m, [_, _, t, u, v], _) = chain();
        m.place(t, 0, 0);
        m.place(u, 0, 4096);
        m.place(v, 0, 0);
        let mut ver = Verifier::for_module(&m);
        let caps = (
            ver.nodes.capacity(),
            ver.swept.capacity(),
            ver.findings.capacity(),
        );
        assert!(ver.verify(&m).is_clean());
        assert!(ver.verify(&m).is_clean());
        assert_eq!(
            caps,
            (
                ver.nodes.capacity(),
                ver.swept.capacity(),
                ver.findings.capacity()
            )
        );
    }
}
