//! The dataflow checker: proves that a rewrite (placement, spills, reloads,
//! copies, merged or removed DMAs, re-pointed consumers) preserved every
//! value the original program read.
//!
//! # Model
//!
//! Both programs are executed symbolically over bytes. A byte holds a
//! [`Value`]: byte `offset` of an [`Origin`] — a module input (`INPUT`
//! location; offset = partition × bytes + byte), an output operand of an
//! instruction (offset = byte index in that operand's traversal order), or
//! uninitialized memory. Pure data movements — `load`, `save`, `dma_copy`,
//! `tensor_copy` (same element size), `spill_store`, `reload` and `mov`, with
//! one source and one destination of equal size — are transparent: byte `i`
//! of the source traversal lands in byte `i` of the destination traversal.
//! Every other write makes fresh values named by the writing instruction, so
//! a value is the same in both programs exactly when it was made by the same
//! original instruction and only moved since. Traversal order of an access
//! pattern: its partitions in order, then its dims outermost first.
//!
//! The state maps *cells* to values. A placed location's cells are physical
//! — (space, partition, byte address); DRAM is one flat byte space — so two
//! locations an allocator put on the same cells clobber each other exactly as
//! on hardware. An unplaced location has private cells, linearized as
//! partition × bytes + byte so a whole-tensor write is one run. Registers
//! are 4 bytes per 32-bit lane: colored ones in one physical register-file
//! space at `lane × 4`, uncolored ones in private cells; a spilled register's
//! value travels through its memory slot like any other copy.
//!
//! The state is a run-length interval map: runs `[start, end)` of one cell
//! row (`hi` = region and partition) holding consecutive bytes of one origin,
//! kept in one treap per row (arena-allocated randomized search trees
//! ordered by `(hi, start)`, with iterative split and merge and no
//! recursion, sharing one node arena). Writing a range costs O(log N) plus
//! the runs it replaces; reading costs O(log N) per run returned, where N is
//! the number of runs held in that row.
//!
//! # The check
//!
//! The original program is walked once, recording for every instruction
//! execution what each read operand (input access patterns, then used
//! registers) saw, as value runs; then the final contents of every `OUTPUT`
//! location. The rewritten program is walked the same way and, at each
//! instruction that exists in the original (the same [`Inst`] id, linked in
//! both; rewrites never reuse ids), its reads are compared with the record.
//! Original instructions the rewrite removed are exempt: their values are
//! only checked where someone reads them. Instructions the rewrite added are
//! executed but not compared. Outputs are compared at the end. A record of
//! the original that expected uninitialized memory matches anything.
//!
//! Loops: each loop body is walked twice when its trip count is not 1 (the
//! second walk runs inner loops once), so a value clobbered on its way around
//! a back edge is caught; an instruction at loop depth d is executed at most
//! d + 1 times. Differences that need more than two iterations of a chain of
//! copies to appear are not modelled.
//!
//! # Cost
//!
//! With S the address-contiguous segments of all access patterns executed
//! (one per partition row for placed on-chip tensors, usually one per operand
//! for unplaced ones), R the value runs read and written, and N the runs
//! held: O((S + R) log N) time. Storage is reserved up front from the two
//! modules' counts ([`DataflowCapacity::estimate`]); the walk never
//! allocates and reports [`DataflowError::Capacity`] instead of growing.

use alloc::vec::Vec;
use core::fmt;

use crate::ir::{
    Ap, Block, Inst, Loop, MemFlags, MemLoc, Module, Opcode, Reg, Space, NO_LANE, UNKNOWN_TRIP,
};

/// Bytes of one 32-bit register lane.
const LANE_BYTES: u64 = 4;

/// Where a value was made.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Origin {
    /// Memory nothing wrote.
    Uninit,
    /// A module input location.
    Input(MemLoc),
    /// Output operand `operand` (output access patterns, then defined
    /// registers) of an instruction.
    Def {
        /// The writing instruction.
        inst: Inst,
        /// Its output operand index.
        operand: u8,
    },
}

/// Byte `offset` of an origin.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Value {
    /// Who made it.
    pub origin: Origin,
    /// Which byte of it.
    pub offset: u64,
}

/// What an operand reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Operand {
    /// A memory location through an access pattern.
    Mem(MemLoc),
    /// A register.
    Reg(Reg),
}

/// A read that sees a different value after the rewrite.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mismatch {
    /// An original instruction's read operand.
    Read {
        /// The instruction.
        inst: Inst,
        /// Its read operand index (input access patterns, then used registers).
        operand: u8,
        /// What the rewritten operand reads.
        reads: Operand,
        /// 0 on the first walk of the innermost enclosing loop, 1 on the second.
        walk: u8,
        /// The first differing byte, in the operand's traversal order.
        byte: u64,
        /// What the original program read there.
        expected: Value,
        /// What the rewritten program reads there.
        found: Value,
    },
    /// A module output holds something else at the end.
    Output {
        /// The output location.
        mem: MemLoc,
        /// The first differing byte (partition × bytes + byte).
        byte: u64,
        /// What the original program left there.
        expected: Value,
        /// What the rewritten program leaves there.
        found: Value,
    },
}

impl Mismatch {
    /// A printable form naming instructions and locations.
    pub fn display<'m>(&'m self, rewritten: &'m Module) -> MismatchDisplay<'m> {
        MismatchDisplay {
            mismatch: self,
            module: rewritten,
        }
    }
}

/// A [`Mismatch`] with the (rewritten) module, for printing.
#[derive(Copy, Clone, Debug)]
pub struct MismatchDisplay<'m> {
    mismatch: &'m Mismatch,
    module: &'m Module,
}

struct ValueDisplay<'m>(&'m Module, Value);

impl fmt::Display for ValueDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        match self.1.origin {
            Origin::Uninit => f.write_str("uninitialized memory"),
            Origin::Input(x) => write!(f, "byte {} of input %{}", self.1.offset, m.mem_name(x)),
            Origin::Def { inst, operand } => {
                write!(f, "byte {} of output {operand} of {inst}", self.1.offset)?;
                if let Some(op) = m.insts.opcode.get(inst) {
                    write!(f, " ({op})")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for MismatchDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.module;
        match *self.mismatch {
            Mismatch::Read {
                inst,
                operand,
                reads,
                walk,
                byte,
                expected,
                found,
            } => {
                write!(f, "{inst}")?;
                if let Some(op) = m.insts.opcode.get(inst) {
                    write!(f, " ({op})")?;
                }
                write!(f, " operand {operand} reading ")?;
                match reads {
                    Operand::Mem(x) => write!(f, "{}", m.describe_mem(x))?,
                    Operand::Reg(r) => write!(f, "${}", m.reg_name(r))?,
                }
                if walk > 0 {
                    f.write_str(" (second walk of its loop)")?;
                }
                write!(
                    f,
                    ": byte {byte} holds {} but the original program read {}",
                    ValueDisplay(m, found),
                    ValueDisplay(m, expected)
                )
            }
            Mismatch::Output {
                mem,
                byte,
                expected,
                found,
            } => write!(
                f,
                "output {} ends holding {} at byte {byte}, but the original program left {}",
                m.describe_mem(mem),
                ValueDisplay(m, found),
                ValueDisplay(m, expected)
            ),
        }
    }
}

/// Why a check could not be completed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DataflowError {
    /// A reserved buffer is full.
    Capacity {
        /// Which buffer.
        what: &'static str,
        /// Its reserved size.
        reserved: usize,
    },
    /// The rewritten module is not a rewrite of the original (it has fewer
    /// locations, registers or instructions).
    NotARewrite {
        /// What is missing.
        what: &'static str,
    },
    /// An original instruction has a different number of read operands.
    OperandsChanged {
        /// The instruction.
        inst: Inst,
        /// Read operands in the original.
        expected: u32,
        /// Read operands after the rewrite.
        found: u32,
    },
    /// Original instructions execute in a different order after the rewrite.
    Reordered {
        /// The instruction the original walk executes next.
        expected: Inst,
        /// The one the rewritten walk executes ([`Inst::INVALID`]: none).
        found: Inst,
    },
    /// An access pattern reaches below byte 0 of its location.
    BadAccess {
        /// The instruction.
        inst: Inst,
        /// The access pattern.
        ap: Ap,
    },
}

impl fmt::Display for DataflowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DataflowError::Capacity { what, reserved } => write!(
                f,
                "dataflow checker: {what} needs more than the {reserved} entries reserved; \
                 raise it with DataflowChecker::with_capacity"
            ),
            DataflowError::NotARewrite { what } => {
                write!(f, "dataflow checker: the rewritten module has fewer {what} than the original")
            }
            DataflowError::OperandsChanged {
                inst,
                expected,
                found,
            } => write!(
                f,
                "dataflow checker: {inst} reads {expected} operands in the original but {found} after the rewrite"
            ),
            DataflowError::Reordered { expected, found } => {
                if found.is_valid() {
                    write!(f, "dataflow checker: the rewrite runs {found} where the original runs {expected} (instructions reordered or moved)")
                } else {
                    write!(f, "dataflow checker: {expected} of the original never runs after the rewrite")
                }
            }
            DataflowError::BadAccess { inst, ap } => write!(
                f,
                "dataflow checker: {ap} of {inst} reaches below byte 0 of its location"
            ),
        }
    }
}

impl core::error::Error for DataflowError {}

/// Reserved sizes of a [`DataflowChecker`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct DataflowCapacity {
    /// Runs the state may hold at once.
    pub runs: usize,
    /// Value runs the record of the original may hold.
    pub log_runs: usize,
    /// Instruction executions the record may hold.
    pub executions: usize,
    /// Read operands the record may hold.
    pub operands: usize,
    /// Value runs one instruction's reads may produce.
    pub scratch: usize,
    /// Output locations whose final contents are recorded.
    pub outputs: usize,
    /// Mismatches kept (the rest are counted).
    pub mismatches: usize,
}

impl DataflowCapacity {
    /// An estimate from the two modules' counts: runs for every location
    /// (one per partition for placed on-chip ones) and register, two value
    /// runs per operand read, executions counted with the loop walks.
    pub fn estimate(original: &Module, rewritten: &Module) -> Self {
        let mut cap = DataflowCapacity {
            mismatches: 64,
            ..Default::default()
        };
        for m in [original, rewritten] {
            let mut runs = m.num_mems() + m.num_regs();
            let mut on_chip = 0usize;
            for x in m.mems.space.keys() {
                if m.is_placed(x) && m.mems.space[x].is_on_chip() {
                    on_chip += m.mems.partitions[x] as usize;
                }
            }
            // Placed on-chip locations share physical rows: the runs held at
            // once are bounded by what fits on the chip, not by the sum over
            // all locations (hundreds of millions at 5M instructions). The
            // cap is an estimate; the caller grows it on `Capacity`.
            runs += on_chip.min(PHYSICAL_RUNS_ESTIMATE);
            let (mut execs, mut ops, mut logged, mut widest) = (0usize, 0usize, 0usize, 0usize);
            for i in m.program_order() {
                let o = m.operands(i);
                let times = m.inst_loop_depth(i) as usize + 1;
                execs += times;
                let w: usize = m
                    .inputs(i)
                    .map(|a| m.aps.part_count[a] as usize * rows(m, a))
                    .sum();
                let reads = o.n_in as usize + o.n_use as usize;
                ops += times * reads;
                // Only the original's reads are logged, over private
                // (unplaced) rows where a read of whole partition rows is
                // one run; a strided or sliced read logs one run per row
                // it covers (`check` grows the log when a module needs more).
                logged += times * reads;
                widest = widest.max(w + o.n_use as usize);
            }
            let (mut outs, mut n_outs) = (0usize, 0usize);
            for x in m.mems.space.keys() {
                if m.mems.flags[x].contains(MemFlags::OUTPUT) {
                    outs += m.mems.partitions[x] as usize;
                    n_outs += 1;
                }
            }
            cap.outputs = cap.outputs.max(n_outs);
            cap.runs = cap.runs.max(4096 + 2 * runs);
            cap.executions = cap.executions.max(64 + execs);
            cap.operands = cap.operands.max(64 + ops);
            cap.log_runs = cap.log_runs.max(4096 + 2 * logged + outs);
            cap.scratch = cap.scratch.max(4096 + 2 * widest);
        }
        cap
    }
}

/// Times [`DataflowChecker::check`] grows its storage and walks again.
const MAX_REGROWS: u32 = 8;

impl DataflowCapacity {
    /// Four times the storage that `what` (a [`DataflowError::Capacity`]
    /// name) ran out of (at least 4096 entries, so that a buffer that
    /// started empty grows too); all of it for a name not listed.
    pub fn grown(self, what: &str) -> Self {
        let x4 = |n: usize| n.saturating_mul(4).max(4096);
        let mut c = self;
        match what {
            "the value-run state" => c.runs = x4(c.runs),
            "the record of the original's reads" => c.log_runs = x4(c.log_runs),
            "instruction executions" => c.executions = x4(c.executions),
            "read operands" => c.operands = x4(c.operands),
            "one instruction's reads" => c.scratch = x4(c.scratch),
            "output records" => c.outputs = x4(c.outputs),
            _ => {
                c.runs = x4(c.runs);
                c.log_runs = x4(c.log_runs);
                c.executions = x4(c.executions);
                c.operands = x4(c.operands);
                c.scratch = x4(c.scratch);
                c.outputs = x4(c.outputs);
            }
        }
        c
    }
}

/// Rows (address-contiguous runs per partition) an access pattern walks.
fn rows(m: &Module, a: Ap) -> usize {
    let dims = m.ap_dims(a);
    let k = folded_dims(dims).0;
    dims[..k].iter().map(|d| d.count as usize).product()
}

/// How many outer dims remain after folding the contiguous inner ones, and
/// the elements of one row.
fn folded_dims(dims: &[crate::ir::Dim]) -> (usize, u64) {
    let mut row: u64 = 1;
    let mut k = dims.len();
    while k > 0 {
        let d = dims[k - 1];
        if d.count == 1 {
            k -= 1;
        } else if d.stride as i64 == row as i64 {
            row *= d.count as u64;
            k -= 1;
        } else {
            break;
        }
    }
    (k, row)
}

/// A run of consecutive value bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Piece {
    origin: Origin,
    offset: u64,
    len: u64,
}

const NIL: u32 = u32::MAX;

#[derive(Copy, Clone, Debug)]
struct Node {
    hi: u64,
    start: u64,
    end: u64,
    origin: Origin,
    offset: u64,
    left: u32,
    right: u32,
    prio: u32,
}

/// The state: one treap of runs per cell row `hi`, keyed by `(hi, start)`;
/// runs of one row are disjoint. Freed nodes are chained through `right`.
/// A tree per row keeps each search to the few runs of its row (a placed
/// access touches one row per partition, and a single tree over all rows
/// was three times deeper and cache-cold).
#[derive(Debug, Default)]
struct RunMap {
    nodes: Vec<Node>,
    /// Root per row, indexed by [`RunMap::slot`].
    roots: Vec<u32>,
    /// Location rows start here in `roots`; register rows follow them.
    mem_base: usize,
    reg_base: usize,
    free: u32,
    seed: u32,
}

/// The estimate of runs held at once on the physical on-chip rows (see
/// [`DataflowCapacity::estimate`]): 128 partitions × 4096 runs.
const PHYSICAL_RUNS_ESTIMATE: usize = 128 * 4096;

/// Physical rows: 4 regions × 2^16 partitions (the width of the key's
/// partition field).
const PHYSICAL_ROWS: usize = 4 << 16;

impl RunMap {
    /// Sizes the row roots for `mems` locations and `regs` registers.
    fn reserve_rows(&mut self, mems: usize, regs: usize) {
        self.mem_base = PHYSICAL_ROWS;
        self.reg_base = PHYSICAL_ROWS + mems;
        let n = self.reg_base + regs;
        if self.roots.len() < n {
            self.roots.resize(n, NIL);
        }
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.roots.fill(NIL);
        self.free = NIL;
        self.seed = 0x9E37_79B9;
    }

    /// The index of row `hi` in `roots`.
    fn slot(&self, hi: u64) -> Result<usize, DataflowError> {
        let id = ((hi >> 16) & 0xFFFF_FFFF) as usize;
        let k = match hi >> 48 {
            KIND_PHYSICAL => (id << 16) | (hi & 0xFFFF) as usize,
            KIND_MEM => self.mem_base + id,
            _ => self.reg_base + id,
        };
        if k < self.roots.len() && (hi >> 48 != KIND_MEM || k < self.reg_base) {
            Ok(k)
        } else {
            Err(DataflowError::Capacity {
                what: "cell rows",
                reserved: self.roots.len(),
            })
        }
    }

    fn key(&self, n: u32) -> (u64, u64) {
        let x = &self.nodes[n as usize];
        (x.hi, x.start)
    }

    fn alloc(&mut self, mut node: Node) -> Result<u32, DataflowError> {
        // xorshift32: deterministic priorities.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 17;
        self.seed ^= self.seed << 5;
        node.prio = self.seed;
        node.left = NIL;
        node.right = NIL;
        if self.free != NIL {
            let n = self.free;
            self.free = self.nodes[n as usize].right;
            self.nodes[n as usize] = node;
            return Ok(n);
        }
        if self.nodes.len() == self.nodes.capacity() {
            return Err(DataflowError::Capacity {
                what: "the value-run state",
                reserved: self.nodes.capacity(),
            });
        }
        self.nodes.push(node);
        Ok(self.nodes.len() as u32 - 1)
    }

    /// Splits `t` into keys `< key` and keys `>= key`.
    fn split(&mut self, mut t: u32, key: (u64, u64)) -> (u32, u32) {
        let (mut l_root, mut r_root, mut l_last, mut r_last) = (NIL, NIL, NIL, NIL);
        while t != NIL {
            if self.key(t) < key {
                if l_last == NIL {
                    l_root = t;
                } else {
                    self.nodes[l_last as usize].right = t;
                }
                l_last = t;
                t = self.nodes[t as usize].right;
            } else {
                if r_last == NIL {
                    r_root = t;
                } else {
                    self.nodes[r_last as usize].left = t;
                }
                r_last = t;
                t = self.nodes[t as usize].left;
            }
        }
        if l_last != NIL {
            self.nodes[l_last as usize].right = NIL;
        }
        if r_last != NIL {
            self.nodes[r_last as usize].left = NIL;
        }
        (l_root, r_root)
    }

    /// Merges two treaps, every key of `a` below every key of `b`.
    fn merge(&mut self, mut a: u32, mut b: u32) -> u32 {
        let mut root = NIL;
        // The slot to fill next: (node, true = its left child).
        let mut slot: (u32, bool) = (NIL, false);
        loop {
            let take_a =
                b == NIL || (a != NIL && self.nodes[a as usize].prio > self.nodes[b as usize].prio);
            let pick = if take_a { a } else { b };
            match slot {
                (NIL, _) => root = pick,
                (n, true) => self.nodes[n as usize].left = pick,
                (n, false) => self.nodes[n as usize].right = pick,
            }
            if a == NIL || b == NIL {
                return root;
            }
            if pick == a {
                slot = (a, false);
                a = self.nodes[a as usize].right;
            } else {
                slot = (b, true);
                b = self.nodes[b as usize].left;
            }
        }
    }

    fn max_node(&self, mut t: u32) -> u32 {
        if t == NIL {
            return NIL;
        }
        while self.nodes[t as usize].right != NIL {
            t = self.nodes[t as usize].right;
        }
        t
    }

    /// Returns every node of `t` to the free list (rotating left children
    /// up, so no stack is needed).
    fn free_tree(&mut self, mut t: u32) {
        while t != NIL {
            let l = self.nodes[t as usize].left;
            if l != NIL {
                self.nodes[t as usize].left = self.nodes[l as usize].right;
                self.nodes[l as usize].right = t;
                t = l;
            } else {
                let r = self.nodes[t as usize].right;
                self.nodes[t as usize].right = self.free;
                self.free = t;
                t = r;
            }
        }
    }

    /// Cells `[a, b)` of row `hi` now hold `origin` from byte `offset` on.
    fn assign(
        &mut self,
        hi: u64,
        a: u64,
        b: u64,
        origin: Origin,
        offset: u64,
    ) -> Result<(), DataflowError> {
        if a >= b {
            return Ok(());
        }
        let slot = self.slot(hi)?;
        let root = self.roots[slot];
        self.roots[slot] = NIL;
        let (l, r1) = self.split(root, (hi, a));
        let (mid, r) = self.split(r1, (hi, b));
        let mut tail: Option<Node> = None;
        let lm = self.max_node(l);
        if lm != NIL {
            let x = self.nodes[lm as usize];
            if x.hi == hi && x.end > a {
                if x.end > b {
                    tail = Some(Node {
                        start: b,
                        offset: x.offset + (b - x.start),
                        ..x
                    });
                }
                self.nodes[lm as usize].end = a;
            }
        }
        let mm = self.max_node(mid);
        if mm != NIL {
            let x = self.nodes[mm as usize];
            if x.end > b {
                tail = Some(Node {
                    start: b,
                    offset: x.offset + (b - x.start),
                    ..x
                });
            }
        }
        self.free_tree(mid);
        let n = self.alloc(Node {
            hi,
            start: a,
            end: b,
            origin,
            offset,
            left: NIL,
            right: NIL,
            prio: 0,
        });
        let t = match tail {
            Some(x) => self.alloc(x),
            None => Ok(NIL),
        };
        // Reattach before reporting a failure so the map stays whole.
        let mut left = l;
        if let Ok(n) = n {
            left = self.merge(left, n);
        }
        let mut right = r;
        if let Ok(t) = t {
            right = self.merge(t, right);
        }
        self.roots[slot] = self.merge(left, right);
        n.and(t).map(|_| ())
    }

    /// The node with the largest key `<= key` in the tree `root`, or NIL.
    fn floor(&self, root: u32, key: (u64, u64)) -> u32 {
        let (mut t, mut best) = (root, NIL);
        while t != NIL {
            if self.key(t) <= key {
                best = t;
                t = self.nodes[t as usize].right;
            } else {
                t = self.nodes[t as usize].left;
            }
        }
        best
    }

    /// The node with the smallest key `> key` in the tree `root`, or NIL.
    fn above(&self, root: u32, key: (u64, u64)) -> u32 {
        let (mut t, mut best) = (root, NIL);
        while t != NIL {
            if self.key(t) > key {
                best = t;
                t = self.nodes[t as usize].left;
            } else {
                t = self.nodes[t as usize].right;
            }
        }
        best
    }

    /// Reads cells `[a, b)` of row `hi` in order into `out`.
    fn read(&self, hi: u64, a: u64, b: u64, out: &mut Pieces) -> Result<(), DataflowError> {
        let root = if a < b {
            self.roots[self.slot(hi)?]
        } else {
            NIL
        };
        let mut x = a;
        while x < b {
            let f = self.floor(root, (hi, x));
            if f != NIL {
                let n = &self.nodes[f as usize];
                if n.hi == hi && n.end > x {
                    let e = n.end.min(b);
                    out.push(n.origin, n.offset + (x - n.start), e - x)?;
                    x = e;
                    continue;
                }
            }
            let c = self.above(root, (hi, x));
            let next = if c != NIL && self.nodes[c as usize].hi == hi {
                self.nodes[c as usize].start.min(b)
            } else {
                b
            };
            out.push(Origin::Uninit, 0, next - x)?;
            x = next;
        }
        Ok(())
    }
}

/// A bounded list of value runs that merges a run continuing the last one.
#[derive(Debug, Default)]
struct Pieces {
    v: Vec<Piece>,
    what: &'static str,
}

impl Pieces {
    fn push(&mut self, origin: Origin, offset: u64, len: u64) -> Result<(), DataflowError> {
        if len == 0 {
            return Ok(());
        }
        if let Some(last) = self.v.last_mut() {
            let continues = last.origin == origin
                && (origin == Origin::Uninit || last.offset + last.len == offset);
            if continues {
                last.len += len;
                return Ok(());
            }
        }
        if self.v.len() == self.v.capacity() {
            return Err(DataflowError::Capacity {
                what: self.what,
                reserved: self.v.capacity(),
            });
        }
        self.v.push(Piece {
            origin,
            offset: if origin == Origin::Uninit { 0 } else { offset },
            len,
        });
        Ok(())
    }
}

/// Region tags of the `hi` half of a cell key: `kind << 48 | id << 16 | partition`.
const KIND_PHYSICAL: u64 = 0;
const KIND_MEM: u64 = 1;
const KIND_REG: u64 = 2;
/// Physical region ids: the space slots (PSUM 0, SB 1, DRAM 2), then the register file.
const REGISTER_FILE: u64 = 3;

fn row(kind: u64, id: u64, partition: u64) -> u64 {
    kind << 48 | (id & 0xFFFF_FFFF) << 16 | (partition & 0xFFFF)
}

/// The cell row and address of byte `x` of partition `q` of location `l`.
fn cell(m: &Module, l: MemLoc, q: u64, x: u64) -> (u64, u64) {
    let space = m.mems.space[l];
    let bytes = m.mems.bytes[l] as u64;
    if !m.is_placed(l) {
        return (row(KIND_MEM, l.as_u32() as u64, 0), q * bytes + x);
    }
    let off = m.mems.offset[l];
    match space {
        Space::Dram => (
            row(KIND_PHYSICAL, space.slot() as u64, 0),
            off + q * bytes + x,
        ),
        Space::Sb | Space::Psum => {
            let p = m.mems.base_partition[l] as u64 + q;
            (row(KIND_PHYSICAL, space.slot() as u64, p), off + x)
        }
    }
}

/// The cells of a register: `(row, start, end)`.
fn reg_cells(m: &Module, r: Reg) -> (u64, u64, u64) {
    let n = m.regs.lanes[r] as u64 * LANE_BYTES;
    match m.regs.lane[r] {
        NO_LANE => (row(KIND_REG, r.as_u32() as u64, 0), 0, n),
        lane => {
            let a = lane as u64 * LANE_BYTES;
            (row(KIND_PHYSICAL, REGISTER_FILE, 0), a, a + n)
        }
    }
}

/// Calls `f(row, start, end)` for the address-contiguous segments of an
/// access pattern in traversal order.
fn for_each_segment(
    m: &Module,
    inst: Inst,
    ap: Ap,
    mut f: impl FnMut(u64, u64, u64) -> Result<(), DataflowError>,
) -> Result<(), DataflowError> {
    let dims = m.ap_dims(ap);
    if dims.iter().any(|d| d.count == 0) {
        return Ok(());
    }
    let (k, row_elems) = folded_dims(dims);
    let outer = &dims[..k];
    let es = m.aps.elem_size[ap] as i64;
    let row_bytes = row_elems * es as u64;
    let loc = m.aps.loc[ap];
    let base = m.aps.offset[ap] as i64;
    let p0 = m.aps.part_start[ap] as u64;
    let mut pending: Option<(u64, u64, u64)> = None;
    for q in p0..p0 + m.aps.part_count[ap] as u64 {
        let mut idx = [0u32; crate::ir::MAX_DIMS];
        loop {
            let e: i64 = outer
                .iter()
                .zip(idx.iter())
                .map(|(d, &i)| d.stride as i64 * i as i64)
                .sum();
            let byte = base + e * es;
            if byte < 0 {
                return Err(DataflowError::BadAccess { inst, ap });
            }
            let (h, a) = cell(m, loc, q, byte as u64);
            let b = a + row_bytes;
            pending = match pending {
                Some((ph, pa, pb)) if ph == h && pb == a => Some((ph, pa, b)),
                Some((ph, pa, pb)) => {
                    f(ph, pa, pb)?;
                    Some((h, a, b))
                }
                None => Some((h, a, b)),
            };
            // Odometer over the outer dims, innermost fastest.
            let mut done = true;
            let mut j = k;
            while j > 0 {
                j -= 1;
                idx[j] += 1;
                if idx[j] < outer[j].count {
                    done = false;
                    break;
                }
                idx[j] = 0;
            }
            if done {
                break;
            }
        }
    }
    if let Some((h, a, b)) = pending {
        f(h, a, b)?;
    }
    Ok(())
}

#[derive(Copy, Clone, Debug)]
struct Exec {
    inst: Inst,
    first_op: u32,
}

#[derive(Copy, Clone, Debug)]
struct Frame {
    lp: Loop,
    start: u32,
    end: u32,
    next: u32,
    pass: u8,
    passes: u8,
    once: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Mode {
    Record,
    Compare,
}

/// What a [`DataflowChecker::check`] found.
#[derive(Copy, Clone, Debug)]
pub struct DataflowReport<'c> {
    /// The first mismatches, in the rewritten program's order.
    pub mismatches: &'c [Mismatch],
    /// Mismatches beyond the cap, counted.
    pub dropped: u64,
    /// Original instruction executions compared.
    pub compared: u64,
}

impl DataflowReport<'_> {
    /// True when every read sees its original value.
    pub fn is_clean(&self) -> bool {
        self.mismatches.is_empty() && self.dropped == 0
    }
}

/// The reusable workspace of the dataflow checker (see the module doc).
#[derive(Debug, Default)]
pub struct DataflowChecker {
    state: RunMap,
    /// The original's record: runs, per-operand run ranges, executions.
    log: Vec<Piece>,
    ops: Vec<(u32, u32)>,
    execs: Vec<Exec>,
    /// Final contents of the original's outputs: (location, run range).
    outputs: Vec<(MemLoc, u32, u32)>,
    /// One instruction's reads.
    scratch: Pieces,
    /// Where each read operand's runs start in `scratch` (plus one end).
    scratch_ops: Vec<u32>,
    frames: Vec<Frame>,
    mismatches: Vec<Mismatch>,
    max_mismatches: usize,
    dropped: u64,
    compared: u64,
    cursor: usize,
}

impl DataflowChecker {
    /// An empty workspace; [`DataflowChecker::check`] reserves from the
    /// modules' counts on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// A workspace with explicit reserved sizes.
    pub fn with_capacity(cap: DataflowCapacity) -> Self {
        let mut c = Self::new();
        c.reserve(cap);
        c
    }

    /// Grows every buffer to at least `cap`.
    pub fn reserve(&mut self, cap: DataflowCapacity) {
        fn grow<T>(v: &mut Vec<T>, n: usize) {
            v.reserve(n.saturating_sub(v.len()));
        }
        grow(&mut self.state.nodes, cap.runs);
        grow(&mut self.log, cap.log_runs);
        grow(&mut self.ops, cap.operands);
        grow(&mut self.execs, cap.executions);
        grow(&mut self.outputs, cap.outputs);
        grow(&mut self.scratch.v, cap.scratch);
        grow(&mut self.scratch_ops, 64);
        grow(&mut self.frames, 64);
        grow(&mut self.mismatches, cap.mismatches);
        self.max_mismatches = self.max_mismatches.max(cap.mismatches);
    }

    /// Checks that `rewritten` reads, at every surviving original
    /// instruction and at the outputs, the values `original` reads. Reserves
    /// from [`DataflowCapacity::estimate`] first (a no-op when large enough),
    /// and when a walk still runs out, grows ([`DataflowCapacity::grown`])
    /// what ran out and walks again, up to 8 times; then reports the
    /// [`DataflowError::Capacity`].
    pub fn check(
        &mut self,
        original: &Module,
        rewritten: &Module,
    ) -> Result<DataflowReport<'_>, DataflowError> {
        let cap = DataflowCapacity::estimate(original, rewritten);
        self.check_from(original, rewritten, cap)
    }

    /// [`Self::check`] starting from `start` instead of the estimate, for a
    /// memory-tight caller (firmware) that would rather grow from small
    /// buffers than reserve the estimate: each buffer that proves too small
    /// is grown alone and the walk repeated, a bounded number of times.
    pub fn check_growing(
        &mut self,
        original: &Module,
        rewritten: &Module,
        start: DataflowCapacity,
    ) -> Result<DataflowReport<'_>, DataflowError> {
        self.check_from(original, rewritten, start)
    }

    /// How much of each buffer the last check used (high-water marks, for
    /// sizing a later [`Self::check_growing`]).
    pub fn used(&self) -> DataflowCapacity {
        DataflowCapacity {
            runs: self.state.nodes.len(),
            log_runs: self.log.len(),
            executions: self.execs.len(),
            operands: self.ops.len(),
            scratch: self.scratch.v.len(),
            outputs: self.outputs.len(),
            mismatches: self.mismatches.len(),
        }
    }

    fn check_from(
        &mut self,
        original: &Module,
        rewritten: &Module,
        mut cap: DataflowCapacity,
    ) -> Result<DataflowReport<'_>, DataflowError> {
        if rewritten.num_mems() < original.num_mems() {
            return Err(DataflowError::NotARewrite { what: "locations" });
        }
        if rewritten.num_regs() < original.num_regs() {
            return Err(DataflowError::NotARewrite { what: "registers" });
        }
        if rewritten.num_insts() < original.num_insts() {
            return Err(DataflowError::NotARewrite {
                what: "instructions",
            });
        }
        self.state
            .reserve_rows(rewritten.num_mems(), rewritten.num_regs());
        let frames = original.num_loops().max(rewritten.num_loops()) + 1;
        self.frames
            .reserve(frames.saturating_sub(self.frames.len()));
        let regs_per_inst =
            original.limits.regs_per_inst as usize + original.limits.aps_per_inst as usize + 1;
        self.scratch_ops
            .reserve(regs_per_inst.saturating_sub(self.scratch_ops.len()));
        self.scratch.what = "one instruction's reads";
        // The estimate is sized for typical modules, not for the worst case
        // (which at millions of instructions is tens of GB): when a walk runs
        // out, grow and walk again, a bounded number of times.
        let mut tries = 0;
        loop {
            self.reserve(cap);
            match self.check_once(original, rewritten) {
                Err(DataflowError::Capacity { what, .. }) if tries < MAX_REGROWS => {
                    tries += 1;
                    cap = cap.grown(what);
                }
                r => break r?,
            }
        }
        Ok(DataflowReport {
            mismatches: &self.mismatches,
            dropped: self.dropped,
            compared: self.compared,
        })
    }

    /// Both walks and the tail check, with the storage as reserved.
    fn check_once(&mut self, original: &Module, rewritten: &Module) -> Result<(), DataflowError> {
        self.log.clear();
        self.ops.clear();
        self.execs.clear();
        self.outputs.clear();
        self.mismatches.clear();
        self.dropped = 0;
        self.compared = 0;
        self.cursor = 0;
        self.walk(original, original, Mode::Record)?;
        self.walk(rewritten, original, Mode::Compare)?;
        while self.cursor < self.execs.len() {
            let e = self.execs[self.cursor].inst;
            if rewritten.insts.block[e].is_valid() {
                return Err(DataflowError::Reordered {
                    expected: e,
                    found: Inst::INVALID,
                });
            }
            self.cursor += 1;
        }
        Ok(())
    }

    fn walk(&mut self, m: &Module, orig: &Module, mode: Mode) -> Result<(), DataflowError> {
        self.state.clear();
        // Module inputs hold their own bytes from the start.
        for l in m.mems.space.keys() {
            if m.mems.flags[l].contains(MemFlags::INPUT) {
                let bytes = m.mems.bytes[l] as u64;
                for q in 0..m.mems.partitions[l] as u64 {
                    let (h, a) = cell(m, l, q, 0);
                    self.state
                        .assign(h, a, a + bytes, Origin::Input(l), q * bytes)?;
                }
            }
        }
        self.frames.clear();
        self.frames.push(Frame {
            lp: Loop::INVALID,
            start: 0,
            end: m.num_blocks() as u32,
            next: 0,
            pass: 0,
            passes: 1,
            once: false,
        });
        while let Some(top) = self.frames.last().copied() {
            let depth = self.frames.len() - 1;
            if top.next >= top.end {
                let f = &mut self.frames[depth];
                f.pass += 1;
                if f.pass < f.passes {
                    f.next = f.start;
                } else {
                    self.frames.pop();
                }
                continue;
            }
            let b = Block::new(top.next as usize);
            // The child loop of the current one that contains b, if any.
            let mut l = m.blocks.loop_[b];
            let mut child = Loop::INVALID;
            while l.is_valid() && l != top.lp {
                if m.loops.parent[l] == top.lp {
                    child = l;
                    break;
                }
                l = m.loops.parent[l];
            }
            if child.is_valid() && m.loops.first_block[child] == b {
                let once = top.once || top.pass >= 1;
                let trip = m.loops.trip[child];
                let passes = if once || (trip <= 1 && trip != UNKNOWN_TRIP) {
                    1
                } else {
                    2
                };
                let end = m.loops.end_block[child].as_u32();
                self.frames[depth].next = end;
                if self.frames.len() == self.frames.capacity() {
                    return Err(DataflowError::Capacity {
                        what: "loop nesting",
                        reserved: self.frames.capacity(),
                    });
                }
                self.frames.push(Frame {
                    lp: child,
                    start: b.as_u32(),
                    end,
                    next: b.as_u32(),
                    pass: 0,
                    passes,
                    once,
                });
                continue;
            }
            self.frames[depth].next += 1;
            for i in m.block_insts(b) {
                self.execute(m, orig, mode, i, top.pass)?;
            }
        }
        // Final contents of the original's outputs.
        for l in orig.mems.space.keys() {
            if !orig.mems.flags[l].contains(MemFlags::OUTPUT) {
                continue;
            }
            self.scratch.v.clear();
            let bytes = m.mems.bytes[l] as u64;
            for q in 0..m.mems.partitions[l] as u64 {
                let (h, a) = cell(m, l, q, 0);
                self.state.read(h, a, a + bytes, &mut self.scratch)?;
            }
            match mode {
                Mode::Record => {
                    let s = self.log.len() as u32;
                    self.append_log(0, self.scratch.v.len())?;
                    if self.outputs.len() == self.outputs.capacity() {
                        return Err(DataflowError::Capacity {
                            what: "output records",
                            reserved: self.outputs.capacity(),
                        });
                    }
                    self.outputs.push((l, s, self.log.len() as u32));
                }
                Mode::Compare => {
                    let Some(&(_, s, e)) = self.outputs.iter().find(|o| o.0 == l) else {
                        continue;
                    };
                    if let Some((byte, expected, found)) =
                        first_difference(&self.log[s as usize..e as usize], &self.scratch.v)
                    {
                        self.report(Mismatch::Output {
                            mem: l,
                            byte,
                            expected,
                            found,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    fn append_log(&mut self, a: usize, b: usize) -> Result<(), DataflowError> {
        if self.log.len() + (b - a) > self.log.capacity() {
            return Err(DataflowError::Capacity {
                what: "the record of the original's reads",
                reserved: self.log.capacity(),
            });
        }
        self.log.extend_from_slice(&self.scratch.v[a..b]);
        Ok(())
    }

    fn report(&mut self, x: Mismatch) {
        if self.mismatches.len() < self.max_mismatches {
            self.mismatches.push(x);
        } else {
            self.dropped += 1;
        }
    }

    fn execute(
        &mut self,
        m: &Module,
        orig: &Module,
        mode: Mode,
        i: Inst,
        walk: u8,
    ) -> Result<(), DataflowError> {
        let o = m.operands(i);
        let n_reads = o.n_in as usize + o.n_use as usize;
        // 1. Read every operand into the scratch.
        self.scratch.v.clear();
        self.scratch_ops.clear();
        for a in m.inputs(i) {
            self.push_scratch_op()?;
            let (state, scratch) = (&self.state, &mut self.scratch);
            for_each_segment(m, i, a, |h, x, y| state.read(h, x, y, scratch))?;
        }
        for &r in m.uses(i) {
            self.push_scratch_op()?;
            let (h, x, y) = reg_cells(m, r);
            self.state.read(h, x, y, &mut self.scratch)?;
        }
        self.push_scratch_op()?;
        // 2. Record or compare.
        let original = i.index() < orig.num_insts() && orig.insts.block[i].is_valid();
        match mode {
            Mode::Record => self.record(i, n_reads)?,
            Mode::Compare if original => self.compare(m, orig, i, walk)?,
            Mode::Compare => {}
        }
        // 3. Write.
        self.write(m, i)
    }

    fn push_scratch_op(&mut self) -> Result<(), DataflowError> {
        if self.scratch_ops.len() == self.scratch_ops.capacity() {
            return Err(DataflowError::Capacity {
                what: "operands of one instruction",
                reserved: self.scratch_ops.capacity(),
            });
        }
        self.scratch_ops.push(self.scratch.v.len() as u32);
        Ok(())
    }

    fn record(&mut self, i: Inst, n_reads: usize) -> Result<(), DataflowError> {
        if self.execs.len() == self.execs.capacity() {
            return Err(DataflowError::Capacity {
                what: "instruction executions",
                reserved: self.execs.capacity(),
            });
        }
        if self.ops.len() + n_reads > self.ops.capacity() {
            return Err(DataflowError::Capacity {
                what: "read operands",
                reserved: self.ops.capacity(),
            });
        }
        self.execs.push(Exec {
            inst: i,
            first_op: self.ops.len() as u32,
        });
        for k in 0..n_reads {
            let (a, b) = (
                self.scratch_ops[k] as usize,
                self.scratch_ops[k + 1] as usize,
            );
            let s = self.log.len() as u32;
            self.append_log(a, b)?;
            self.ops.push((s, self.log.len() as u32));
        }
        Ok(())
    }

    fn compare(
        &mut self,
        m: &Module,
        orig: &Module,
        i: Inst,
        walk: u8,
    ) -> Result<(), DataflowError> {
        loop {
            let Some(e) = self.execs.get(self.cursor) else {
                return Err(DataflowError::Reordered {
                    expected: Inst::INVALID,
                    found: i,
                });
            };
            if e.inst == i {
                break;
            }
            if m.insts.block[e.inst].is_valid() {
                return Err(DataflowError::Reordered {
                    expected: e.inst,
                    found: i,
                });
            }
            self.cursor += 1;
        }
        let first = self.execs[self.cursor].first_op as usize;
        let end = self
            .execs
            .get(self.cursor + 1)
            .map_or(self.ops.len(), |e| e.first_op as usize);
        self.cursor += 1;
        self.compared += 1;
        let oo = orig.operands(i);
        let ro = m.operands(i);
        let expected_n = oo.n_in as u32 + oo.n_use as u32;
        let found_n = ro.n_in as u32 + ro.n_use as u32;
        if expected_n != found_n || end - first != found_n as usize {
            return Err(DataflowError::OperandsChanged {
                inst: i,
                expected: expected_n,
                found: found_n,
            });
        }
        for k in 0..found_n as usize {
            let (ls, le) = self.ops[first + k];
            let (ss, se) = (
                self.scratch_ops[k] as usize,
                self.scratch_ops[k + 1] as usize,
            );
            let diff =
                first_difference(&self.log[ls as usize..le as usize], &self.scratch.v[ss..se]);
            if let Some((byte, expected, found)) = diff {
                let reads = if k < ro.n_in as usize {
                    Operand::Mem(m.aps.loc[Ap::from_u32(ro.ap_start + k as u32)])
                } else {
                    Operand::Reg(m.uses(i)[k - ro.n_in as usize])
                };
                self.report(Mismatch::Read {
                    inst: i,
                    operand: k as u8,
                    reads,
                    walk,
                    byte,
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }

    /// Bytes a read operand `k` produced (its scratch runs' lengths).
    fn read_bytes(&self, k: usize) -> u64 {
        let (a, b) = (
            self.scratch_ops[k] as usize,
            self.scratch_ops[k + 1] as usize,
        );
        self.scratch.v[a..b].iter().map(|p| p.len).sum()
    }

    /// Applies the instruction's writes: a transparent copy for pure data
    /// movements, fresh values otherwise.
    fn write(&mut self, m: &Module, i: Inst) -> Result<(), DataflowError> {
        let o = m.operands(i);
        let op = m.insts.opcode[i];
        let out_bytes = |a: Ap| m.ap_bytes(a);
        let first_in = Ap::from_u32(o.ap_start);
        let first_out = Ap::from_u32(o.ap_start + o.n_in as u32);
        let copy_src = match op {
            Opcode::Load | Opcode::Save | Opcode::DmaCopy | Opcode::TensorCopy
                if o.n_in == 1 && o.n_out == 1 && o.n_def == 0 =>
            {
                let same_elem = op != Opcode::TensorCopy
                    || m.aps.elem_size[first_in] == m.aps.elem_size[first_out];
                (same_elem && self.read_bytes(0) == out_bytes(first_out)).then_some(0)
            }
            Opcode::RegSpillStore
                if o.n_in == 0 && o.n_use == 1 && o.n_out == 1 && o.n_def == 0 =>
            {
                (self.read_bytes(0) == out_bytes(first_out)).then_some(0)
            }
            Opcode::RegReload if o.n_in == 1 && o.n_use == 0 && o.n_out == 0 && o.n_def == 1 => {
                let r = m.defs(i)[0];
                (self.read_bytes(0) == m.regs.lanes[r] as u64 * LANE_BYTES).then_some(0)
            }
            Opcode::ScalarMov if o.n_in == 0 && o.n_use == 1 && o.n_out == 0 && o.n_def == 1 => {
                let (s, d) = (m.uses(i)[0], m.defs(i)[0]);
                (m.regs.lanes[s] == m.regs.lanes[d]).then_some(0)
            }
            _ => None,
        };
        if let Some(k) = copy_src {
            let mut at = self.scratch_ops[k] as usize;
            let end = self.scratch_ops[k + 1] as usize;
            let mut used: u64 = 0; // bytes of scratch[at] already written
            let mut put = |state: &mut RunMap, h: u64, mut x: u64, y: u64, pieces: &[Piece]| {
                while x < y && at < end {
                    let p = pieces[at];
                    let n = (p.len - used).min(y - x);
                    state.assign(h, x, x + n, p.origin, p.offset + used)?;
                    x += n;
                    used += n;
                    if used == p.len {
                        at += 1;
                        used = 0;
                    }
                }
                Ok(())
            };
            let (state, pieces) = (&mut self.state, &self.scratch.v);
            if o.n_out == 1 {
                for_each_segment(m, i, first_out, |h, x, y| put(state, h, x, y, pieces))?;
            } else {
                let (h, x, y) = reg_cells(m, m.defs(i)[0]);
                put(state, h, x, y, pieces)?;
            }
            return Ok(());
        }
        for (k, a) in m.outputs(i).enumerate() {
            let origin = Origin::Def {
                inst: i,
                operand: k as u8,
            };
            let mut t: u64 = 0;
            let state = &mut self.state;
            for_each_segment(m, i, a, |h, x, y| {
                state.assign(h, x, y, origin, t)?;
                t += y - x;
                Ok(())
            })?;
        }
        for (k, &r) in m.defs(i).iter().enumerate() {
            let origin = Origin::Def {
                inst: i,
                operand: (o.n_out as usize + k) as u8,
            };
            let (h, x, y) = reg_cells(m, r);
            self.state.assign(h, x, y, origin, 0)?;
        }
        Ok(())
    }
}

/// The first byte where `found` differs from `expected` (an expected
/// uninitialized byte matches anything), as (byte, expected, found).
fn first_difference(expected: &[Piece], found: &[Piece]) -> Option<(u64, Value, Value)> {
    let (mut i, mut j) = (0usize, 0usize);
    let (mut ui, mut uj) = (0u64, 0u64); // bytes used of expected[i], found[j]
    let mut byte: u64 = 0;
    let val = |p: &Piece, used: u64| Value {
        origin: p.origin,
        offset: if p.origin == Origin::Uninit {
            0
        } else {
            p.offset + used
        },
    };
    while i < expected.len() && j < found.len() {
        let (e, f) = (&expected[i], &found[j]);
        let n = (e.len - ui).min(f.len - uj);
        let same =
            e.origin == Origin::Uninit || (e.origin == f.origin && e.offset + ui == f.offset + uj);
        if !same {
            return Some((byte, val(e, ui), val(f, uj)));
        }
        byte += n;
        ui += n;
        uj += n;
        if ui == e.len {
            i += 1;
            ui = 0;
        }
        if uj == f.len {
            j += 1;
            uj = 0;
        }
    }
    // Lengths differ only when operand sizes changed.
    let missing = Value {
        origin: Origin::Uninit,
        offset: 0,
    };
    match (expected.get(i), found.get(j)) {
        (Some(e), None) if e.origin != Origin::Uninit => Some((byte, val(e, ui), missing)),
        (None, Some(f)) => Some((byte, missing, val(f, uj))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{full_ap, slice_ap, Builder, Capacity, InstFlags, InstSpec, SubOp};
    use crate::target::Target;
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
        let x = b.mem("x", Space::Dram, 128, B, 1, MemFlags::INPUT).unwrap();
        let y = b
            .mem("y", Space::Dram, 128, B, 1, MemFlags::OUTPUT)
            .unwrap();
        let t = b.mem("t", Space::Sb, 128, B, 1, MemFlags::empty()).unwrap();
        let u = b.mem("u", Space::Sb, 128, B, 1, MemFlags::empty()).unwrap();
        let v = b.mem("v", Space::Sb, 128, B, 1, MemFlags::empty()).unwrap();
        b.func("main").unwrap();
        let i0 = b.load(t, x, 0).unwrap();
        let i1 = b
            .compute(Opcode::Activation, SubOp::Exp, u, &[t], InstFlags::empty())
            .unwrap();
        let i2 = b
            .compute(
                Opcode::TensorTensor,
                SubOp::Add,
                v,
                &[u, t],
                InstFlags::empty(),
            )
            .unwrap();
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

    /// The LSA-style spill of `t`: a store to a DRAM slot after its
    /// definition, a reload into a fresh location before the add, the add
    /// re-pointed. Returns (rewritten, slot, reload, store, reload inst).
    fn spill_t(p: &Prog, reload_before_store: bool) -> (Module, MemLoc, MemLoc, Inst, Inst) {
        let mut r = p.m.clone();
        headroom(&mut r);
        let slot = r.try_add_mem("t_spill", Space::Dram, 128, B).unwrap();
        r.mems.flags[slot] = MemFlags::SPILL;
        let rl = r
            .try_add_mem("t_ReloadStore0_ShrinkedCopy", Space::Sb, 128, B)
            .unwrap();
        r.mems.flags[rl] = MemFlags::RELOAD;
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
        r.aps.loc[t_in] = rl;
        (r, slot, rl, store, reload)
    }

    #[test]
    fn identical_programs_agree() {
        let p = prog();
        let mut c = DataflowChecker::new();
        let rep = c.check(&p.m, &p.m).unwrap();
        assert!(rep.is_clean(), "{}", texts(&p.m, &rep));
        assert_eq!(rep.compared, 4);
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
        assert_eq!(rep.compared, 4);
    }

    #[test]
    fn reload_before_the_store_is_caught() {
        let p = prog();
        let (r, _, rl, _, _) = spill_t(&p, true);
        let mut c = DataflowChecker::new();
        let rep = c.check(&p.m, &r).unwrap();
        let s = texts(&r, &rep);
        assert_eq!(rep.mismatches.len(), 1, "{s}");
        assert_eq!(
            rep.mismatches[0],
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
            s.contains("inst2 (tensor_tensor) operand 1 reading %t_ReloadStore0_ShrinkedCopy"),
            "{s}"
        );
        assert!(
            s.contains(
                "holds uninitialized memory but the original program read byte 0 of input %x"
            ),
            "{s}"
        );
    }

    #[test]
    fn consumer_repointed_to_the_wrong_location_is_caught() {
        let p = prog();
        let mut r = p.m.clone();
        let t_in = r.inputs(p.insts[2]).nth(1).unwrap();
        r.aps.loc[t_in] = p.u;
        let mut c = DataflowChecker::new();
        let rep = c.check(&p.m, &r).unwrap();
        let s = texts(&r, &rep);
        assert_eq!(rep.mismatches.len(), 1, "{s}");
        assert!(
            matches!(rep.mismatches[0], Mismatch::Read { inst, operand: 1, reads: Operand::Mem(l),
            found: Value { origin: Origin::Def { inst: w, operand: 0 }, .. }, .. }
            if inst == p.insts[2] && l == p.u && w == p.insts[1]),
            "{s}"
        );
        assert!(
            s.contains("byte 0 of output 0 of inst1 (activation)"),
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
        let mut c = DataflowChecker::new();
        let rep = c.check(&p.m, &r).unwrap();
        let s = texts(&r, &rep);
        assert_eq!(rep.mismatches.len(), 1, "{s}");
        assert!(
            matches!(rep.mismatches[0], Mismatch::Read { inst, operand: 1, reads: Operand::Mem(l),
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
        let x = b
            .mem("x", Space::Dram, 128, 2 * B, 1, MemFlags::INPUT)
            .unwrap();
        let y = b
            .mem("y", Space::Dram, 128, B, 1, MemFlags::OUTPUT)
            .unwrap();
        let lo = b
            .mem("lo", Space::Sb, 128, B, 1, MemFlags::empty())
            .unwrap();
        let hi = b
            .mem("hi", Space::Sb, 128, B, 1, MemFlags::empty())
            .unwrap();
        let s = b.mem("s", Space::Sb, 128, B, 1, MemFlags::empty()).unwrap();
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
        let add = b
            .compute(
                Opcode::TensorTensor,
                SubOp::Add,
                s,
                &[lo, hi],
                InstFlags::empty(),
            )
            .unwrap();
        b.save(y, s, 0).unwrap();

        let merged = |swap: bool| {
            let mut r = o.clone();
            headroom(&mut r);
            let both = r.try_add_mem("lo_hi", Space::Sb, 128, 2 * B).unwrap();
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
                r.aps.loc[a] = both;
                r.aps.offset[a] = sl.offset;
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
        assert_eq!(rep.compared, 2, "the two removed loads are exempt");
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
        let slot = r.try_add_mem("k_slot", Space::Sb, 1, 4).unwrap();
        r.mems.flags[slot] = MemFlags::SPILL;
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
        r.regs.lane[k1] = 0;
        r.regs.lane[z] = 0;
        r.regs.lane[k2] = 0;
        r.regs.lane[k] = 1;
        r.place(slot, 0, 0);
        assert!(Verifier::new().verify(&r).is_clean());
        let mut c = DataflowChecker::new();
        let rep = c.check(&o, &r).unwrap();
        assert!(rep.is_clean(), "{}", texts(&r, &rep));
        assert_eq!(rep.compared, 4);

        // Without the spill, k and z on one lane: z's def clobbers k.
        let mut bad = o.clone();
        bad.regs.lane[k] = 3;
        bad.regs.lane[z] = 3;
        let rep = c.check(&o, &bad).unwrap();
        let s = texts(&bad, &rep);
        assert_eq!(rep.mismatches.len(), 1, "{s}");
        assert!(
            matches!(rep.mismatches[0], Mismatch::Read { inst, reads: Operand::Reg(rr),
            found: Value { origin: Origin::Def { inst: w, .. }, .. }, .. }
            if inst == kuse && rr == k && w == zdef),
            "{s}"
        );
        assert!(s.contains("inst3 (branch) operand 0 reading $k"), "{s}");
        let _ = zuse;
    }

    #[test]
    fn a_clobber_around_the_back_edge_is_caught_on_the_second_walk() {
        // a = load x; loop 4 { b = exp a; save y = b }: a is read every
        // iteration, so b may not take a's cells.
        let mut o = Module::new(Target::default());
        let mut bl = Builder::new(&mut o);
        let x = bl
            .mem("x", Space::Dram, 128, B, 1, MemFlags::INPUT)
            .unwrap();
        let y = bl
            .mem("y", Space::Dram, 128, B, 1, MemFlags::OUTPUT)
            .unwrap();
        let a = bl
            .mem("a", Space::Sb, 128, B, 1, MemFlags::empty())
            .unwrap();
        let b = bl
            .mem("b", Space::Sb, 128, B, 1, MemFlags::empty())
            .unwrap();
        bl.func("main").unwrap();
        bl.load(a, x, 0).unwrap();
        bl.begin_loop(4).unwrap();
        let e = bl
            .compute(Opcode::Activation, SubOp::Exp, b, &[a], InstFlags::empty())
            .unwrap();
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
        r.insts.next[i0] = i2;
        r.insts.prev[i2] = i0;
        r.insts.next[i2] = i1;
        r.insts.prev[i1] = i2;
        r.insts.next[i1] = i3;
        r.insts.prev[i3] = i1;
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
        let caps = (
            c.state.nodes.capacity(),
            c.log.capacity(),
            c.scratch.v.capacity(),
        );
        assert!(c.check(&p.m, &p.m).unwrap().is_clean());
        assert_eq!(
            caps,
            (
                c.state.nodes.capacity(),
                c.log.capacity(),
                c.scratch.v.capacity()
            )
        );
    }

    #[test]
    fn run_map_splits_and_reads_back() {
        let mut s = RunMap::default();
        s.nodes.reserve(64);
        s.reserve_rows(0, 0);
        s.clear();
        let o1 = Origin::Input(MemLoc::new(1));
        let o2 = Origin::Input(MemLoc::new(2));
        s.assign(7, 0, 100, o1, 0).unwrap();
        s.assign(7, 40, 60, o2, 1000).unwrap();
        s.assign(8, 0, 10, o2, 0).unwrap();
        let mut out = Pieces {
            v: Vec::with_capacity(16),
            what: "test",
        };
        s.read(7, 30, 110, &mut out).unwrap();
        assert_eq!(
            out.v,
            [
                Piece {
                    origin: o1,
                    offset: 30,
                    len: 10
                },
                Piece {
                    origin: o2,
                    offset: 1000,
                    len: 20
                },
                Piece {
                    origin: o1,
                    offset: 60,
                    len: 40
                },
                Piece {
                    origin: Origin::Uninit,
                    offset: 0,
                    len: 10
                },
            ]
        );
        // Overwrite across run boundaries; the freed nodes are reused.
        s.assign(7, 10, 95, o2, 5).unwrap();
        out.v.clear();
        s.read(7, 0, 100, &mut out).unwrap();
        assert_eq!(
            out.v,
            [
                Piece {
                    origin: o1,
                    offset: 0,
                    len: 10
                },
                Piece {
                    origin: o2,
                    offset: 5,
                    len: 85
                },
                Piece {
                    origin: o1,
                    offset: 95,
                    len: 5
                },
            ]
        );
        assert!(s.nodes.len() <= 6);
    }
}
