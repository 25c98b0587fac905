//! REG_Allocator, the module register allocator: colors the scalar
//! registers of a [`Module`] with `target.max_regs` lanes, spilling to memory
//! until everything is colored. This file is its driver (the spill fixpoint,
//! live ranges, renumbering, the final write-back); the colorer it runs each
//! round is `reg/chaitin_briggs.rs` over the graph of `reg/graph.rs`.
//!
//! Not to be confused with `reg/cfg/` (the CFG allocator): that one allocates
//! a client's control-flow graph with liveness by dataflow and splits live
//! ranges; this one works on the pipeline's module in its linear order, where
//! every range is one interval.
//!
//! ```text
//! reserve headroom; check structure
//! loop (round = 1, 2, …):                      // the spill fixpoint
//!     linear order, register live ranges       // analysis::{LinearOrder, RegLiveness}
//!     SSA representatives + copy coalescing    // union-find over `mov`s
//!     renumber: one node per representative
//!     interference graph (interval sweep)      // graph.rs
//!     spill costs; simplify; select; repair    // color.rs
//!     if uncolored: spill them to memory, or fail with RegisterPressure
//! write lanes; rename coalesced copies; delete self-moves; report
//! ```
//!
//! **Live ranges and interference.** A register's range is the
//! [`RegLiveness`] interval (first access to last access, widened by the
//! loop rule of docs/SEMANTICS.md §1). Positions are doubled so that an instruction's
//! reads sit at `2p` and its writes at `2p` too (a def interferes with every
//! register read by the same instruction), except at an in-place
//! instruction, whose fresh def starts at `2p + 1`: it may then share a lane
//! with an input that dies there. Ranges are intervals, so the graph is an
//! interval graph (chordal): whenever the lane-weighted pressure of 1-lane
//! registers is ≤ K, simplify never blocks and nothing spills.
//!
//! **Coalescing** (`coalesce.rs`): a copy whose two ranges only touch joins
//! the two registers into one class when the merged range stays within K.
//!
//! **Spilling** (`spill.rs`): spill costs, the choice of what to spill, the
//! spill code (a DRAM slot per spilled register, a reload before each use, a
//! store after each def) and the headroom it may need.
//!
//! **Report.** Spill cycles: see `spill.rs`. Lane utilization: distinct lanes used / K. Score: the REG score of the last
//! round's select (see `chaitin_briggs.rs`).

mod coalesce;
mod spill;
#[cfg(test)]
pub(crate) mod tests;

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use core::fmt;

use super::chaitin_briggs::{ColorConfig, ColorError, ColorStats, Colorer, NO_COLOR};
use super::graph::{GraphError, InterferenceGraph};
use crate::analysis::{LinearOrder, RegLiveness};
use crate::ir::{Capacity, Inst, InstFlags, IrError, Module, Reg, RegFlags, NO_LANE};
use spill::spill_headroom;
pub use spill::{default_spill_temporaries, SPILL_TEMP_FRACTION, SPILL_TEMP_SLACK};

/// Registers listed in a [`RegAllocError::RegisterPressure`].
pub const PRESSURE_LIST: usize = 8;

/// Why register allocation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegAllocError {
    /// Nodes are left uncolored and none of them may be spilled.
    RegisterPressure {
        /// Where the pressure peaks inside an uncolorable range.
        instruction: Inst,
        /// Registers live there (the first `PRESSURE_LIST`).
        live: ArrayVec<Reg, PRESSURE_LIST>,
        /// Number of registers live there.
        live_count: u32,
        /// Lanes they need.
        live_lanes: u32,
        /// Lanes available (K).
        capacity: u16,
    },
    /// The module is malformed for this pass.
    Malformed {
        /// What is wrong.
        what: &'static str,
        /// The register concerned, if any.
        reg: Reg,
    },
    /// Inserting spill code failed (reserve exhausted, limits).
    Ir(IrError),
    /// The interference graph does not fit its reserve.
    Graph(GraphError),
    /// The colorer refused its input.
    Color(ColorError),
    /// The spill fixpoint did not converge within the round limit.
    NoConvergence {
        /// Rounds run.
        rounds: u32,
    },
    /// The spill code needs more temporaries than the headroom reserved.
    SpillHeadroom {
        /// The limit on spill temporaries (one per reload or store).
        limit: u32,
    },
}

crate::ir::display_named!(RegAllocErrorDisplay for RegAllocError with Display);

/// Names registers (`$name`) and instructions of `m` when given.
impl crate::ir::WriteNamed for RegAllocError {
    fn write_named(&self, f: &mut fmt::Formatter<'_>, m: Option<&Module>) -> fmt::Result {
        let e = self;
        let reg = |f: &mut fmt::Formatter<'_>, r: Reg| match m {
            Some(m) if r.index() < m.num_regs() => write!(f, "${}", m.reg_name(r)),
            _ => write!(f, "{r}"),
        };
        match e {
            RegAllocError::RegisterPressure {
                instruction,
                live,
                live_count,
                live_lanes,
                capacity,
            } => {
                f.write_str("cannot allocate registers since spilling candidates are not enough: at ")?;
                match m {
                    Some(m) => write!(f, "{}", m.describe_inst(*instruction))?,
                    None => write!(f, "{instruction}")?,
                }
                write!(
                    f,
                    ", {live_count} registers needing {live_lanes} lanes are live ("
                )?;
                for (k, &r) in live.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    reg(f, r)?;
                }
                if *live_count as usize > live.len() {
                    f.write_str(", …")?;
                }
                write!(
                    f,
                    ") and none of the uncolored ones may be spilled; capacity {capacity} lanes: \
                     give the colorer more lanes (the target's max-regs, `--max-regs`)"
                )
            }
            RegAllocError::Malformed { what, reg: r } => {
                f.write_str("register ")?;
                reg(f, *r)?;
                write!(f, ": {what}")
            }
            RegAllocError::Ir(e) => write!(f, "inserting register spill code: {e}"),
            RegAllocError::Graph(e) => write!(f, "{e}"),
            RegAllocError::Color(e) => write!(f, "register colorer: {e}"),
            RegAllocError::NoConvergence { rounds } => {
                write!(
                    f,
                    "the register spill fixpoint did not converge in {rounds} rounds"
                )
            }
            RegAllocError::SpillHeadroom { limit } => write!(
                f,
                "the register spill code needs more than its limit of {limit} temporaries \
                 (by default one per {SPILL_TEMP_FRACTION} register operands plus {SPILL_TEMP_SLACK}): \
                 give the colorer more lanes (the target's max-regs, `--max-regs`), or raise the limit \
                 (RegAllocator::set_max_spill_temporaries, in a pipeline Options::reg_max_spill_temporaries)"
            ),
        }
    }
}

impl core::error::Error for RegAllocError {}

impl From<IrError> for RegAllocError {
    fn from(e: IrError) -> Self {
        RegAllocError::Ir(e)
    }
}

/// What the allocator did.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct RegReport {
    /// Rounds of the spill fixpoint (1 when nothing spilled).
    pub rounds: u32,
    /// Registers spilled to memory.
    pub spilled_registers: u32,
    /// Spill stores and reloads inserted.
    pub spill_instructions: u32,
    /// Estimated cycles of the spill code (see the module doc).
    pub spill_cycles: u64,
    /// Distinct lanes used / K, in percent.
    pub lane_utilization_pct: f64,
    /// Copies coalesced in the last round.
    pub coalesced: u32,
    /// Copies deleted as self-moves.
    pub copies_removed: u32,
    /// REG score of the last select (lower is better).
    pub score: f64,
    /// Colorer statistics of the last round.
    pub last_round: ColorStats,
    /// Max lane-weighted pressure of the input program.
    pub max_pressure: u32,
    /// Edges of the last round's interference graph.
    pub edges: u64,
}

/// Configuration of the allocator.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RegAllocConfig {
    /// Colorer strategy; its `k` is replaced by `target.max_regs`.
    pub color: ColorConfig,
    /// Most rounds of the spill fixpoint before giving up.
    pub max_rounds: u32,
}

impl Default for RegAllocConfig {
    fn default() -> Self {
        RegAllocConfig {
            color: ColorConfig::tuned(0),
            max_rounds: 64,
        }
    }
}

const NONE: u32 = u32::MAX;

/// The reusable workspace of the register allocator.
#[derive(Debug, Default)]
pub struct RegAllocator {
    order: LinearOrder,
    live: RegLiveness,
    parent: Vec<u32>,
    gstart: Vec<u32>,
    gend: Vec<u32>,
    node_of: Vec<u32>,
    node_reg: Vec<u32>,
    n_lanes: Vec<u8>,
    n_start: Vec<u32>,
    n_end: Vec<u32>,
    n_cost: Vec<f64>,
    n_fixed: Vec<u16>,
    colors: Vec<u16>,
    pressure: Vec<i32>,
    chosen: Vec<bool>,
    graph: InterferenceGraph,
    colorer: Colorer,
    depth_weight: [f64; 31],
    /// `order` and `live` are those of the module about to be allocated
    /// (set only by [`allocate_registers`], which holds the module
    /// exclusively from `new` to `allocate`): the first round skips
    /// recomputing them.
    fresh: bool,
    /// Limit on spill temporaries; `None`: [`default_spill_temporaries`].
    max_spill_temporaries: Option<u32>,
    /// Registers that arrive colored keep their lanes, as pinned ones do
    /// (optlevel 7: the input is a fixed assignment).
    keep_colored: bool,
}

impl RegAllocator {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.live,
            self.parent,
            self.gstart,
            self.gend,
            self.node_of,
            self.node_reg,
            self.n_lanes,
            self.n_start,
            self.n_end,
            self.n_cost,
            self.n_fixed,
            self.colors,
            self.pressure,
            self.chosen,
            self.graph,
            self.colorer
        )
    }

    /// A workspace sized for `m` and the spill code it may need. The
    /// adjacency reserve is three times what the input's interference graph
    /// needs plus slack for the spill temporaries, when any may be made (spilling replaces a long
    /// range by short ones, so later rounds rarely need more; when they do,
    /// the run fails with [`GraphError::Full`] rather than growing).
    pub fn new(m: &Module) -> Self {
        let mut a = RegAllocator::default();
        a.size_for(m);
        a
    }

    /// The module headroom the spill code of `m` can need at most, with
    /// the default limit on spill temporaries.
    pub fn headroom(m: &Module) -> Capacity {
        spill_headroom(m, None)
    }

    /// [`Self::headroom`] with `limit` spill temporaries (`None`: the
    /// default, `default_spill_temporaries`).
    pub fn headroom_with(m: &Module, limit: Option<u32>) -> Capacity {
        spill_headroom(m, limit)
    }

    /// Sets the limit on spill temporaries (`None`: the default) of later
    /// [`Self::reserve`] and [`Self::allocate`] calls. Call it before
    /// [`Self::reserve`]: the tables are sized for the limit in force then, and
    /// a larger limit set afterwards ends in a full-graph error, not growth.
    pub fn set_max_spill_temporaries(&mut self, limit: Option<u32>) {
        self.max_spill_temporaries = limit;
    }

    /// Whether registers that arrive with a lane keep it, as pinned ones do
    /// (never recolored, spilled or coalesced): optlevel 7 takes the
    /// input's assignment as fixed. Off by default.
    pub fn set_keep_colored(&mut self, on: bool) {
        self.keep_colored = on;
    }

    /// True when `r`'s lane is fixed: pinned, or colored on input under
    /// [`Self::set_keep_colored`].
    fn fixed(&self, m: &Module, r: Reg) -> bool {
        m.regs().flags[r].contains(RegFlags::PINNED)
            || (self.keep_colored && m.regs().lane[r] != NO_LANE)
    }

    /// The limit on spill temporaries for `m`.
    fn spill_limit(&self, m: &Module) -> u32 {
        self.max_spill_temporaries
            .unwrap_or_else(|| default_spill_temporaries(m))
    }

    /// Reserves `m`'s spill headroom and sizes the workspace for `m` and
    /// for everything `m`'s reserved capacity ([`Module::capacity`]) can
    /// hold: afterwards [`RegAllocator::allocate`] on `m` does not allocate,
    /// whatever the passes before it added within that capacity.
    pub fn reserve(&mut self, m: &mut Module) {
        m.reserve(spill_headroom(m, self.max_spill_temporaries));
        self.size_for(m);
    }

    /// True when `m` has room for the spill code of `m`.
    fn has_headroom(m: &Module, limit: Option<u32>) -> bool {
        let (cap, n, h) = (m.capacity(), m.counts(), spill_headroom(m, limit));
        cap.insts >= n.insts + h.insts
            && cap.aps >= n.aps + h.aps
            && cap.dims >= n.dims + h.dims
            && cap.reg_operands >= n.reg_operands + h.reg_operands
            && cap.mems >= n.mems + h.mems
            && cap.regs >= n.regs + h.regs
            && cap.names >= n.names + h.names
    }

    /// Sizes every table (see [`RegAllocator::new`]).
    fn size_for(&mut self, m: &Module) {
        let a = self;
        let mut w = 1.0;
        for d in a.depth_weight.iter_mut() {
            *d = w;
            w *= 10.0;
        }
        let cap = m.capacity();
        a.order.reserve(&cap);
        a.live.reserve(&cap);
        a.order.compute(m);
        a.live.compute(m, &a.order);
        let head = spill_headroom(m, a.max_spill_temporaries);
        // The module's capacity bounds what earlier passes may add.
        let regs = (m.num_regs() + head.regs).max(cap.regs);
        let insts = (m.num_live_insts() + head.insts).max(cap.insts);
        let positions = 2 * insts + 4;
        // Edges of the input: Σ over ranges of the ranges live at its start.
        let mut delta = alloc::vec![0i64; m.num_insts().max(1) + 2];
        let mut starts = alloc::vec![0i64; m.num_insts().max(1) + 2];
        for r in m.regs().lanes.keys() {
            if let Some(iv) = a.live.interval(r) {
                delta[iv.start as usize] += 1;
                delta[iv.end as usize + 1] -= 1;
                starts[iv.start as usize] += 1;
            }
        }
        let (mut live, mut edges) = (0i64, 0u64);
        for p in 0..delta.len() {
            // Ranges starting at p meet the ones live before p and each other.
            let s = starts[p];
            edges += (s * live + s * (s - 1) / 2) as u64;
            live += delta[p];
        }
        let k = m.target.max_regs as usize;
        // Without spill temporaries there is one round and its graph is the
        // input's (coalescing only merges nodes): no slack for them.
        let temp_slack = if head.regs == 0 { 0 } else { 4 * k * 64 + 4096 };
        let adjacency = 6 * edges as usize + temp_slack;
        a.graph.reserve(regs, adjacency, positions);
        a.colorer.reserve(regs, m.target.max_regs);
        for v in [
            &mut a.parent,
            &mut a.gstart,
            &mut a.gend,
            &mut a.node_of,
            &mut a.node_reg,
            &mut a.n_start,
            &mut a.n_end,
        ] {
            v.reserve_exact(regs);
        }
        a.n_lanes.reserve_exact(regs);
        a.n_cost.reserve_exact(regs);
        a.n_fixed.reserve_exact(regs);
        a.colors.reserve_exact(regs);
        a.chosen.reserve_exact(regs);
        a.pressure.reserve_exact(positions + 2);
    }

    /// Allocates every register of `m`; writes `m.regs().lane`.
    pub fn allocate(
        &mut self,
        m: &mut Module,
        cfg: &RegAllocConfig,
    ) -> Result<RegReport, RegAllocError> {
        m.check_structure()
            .map_err(|what| RegAllocError::Malformed {
                what,
                reg: Reg::INVALID,
            })?;
        let k = m.target.max_regs;
        // Fixed before the first spill: the spill code grows the operand
        // count the default is computed from.
        let limit = self.spill_limit(m);
        let mut ccfg = cfg.color;
        ccfg.k = k;
        for r in m.regs().lanes.keys() {
            if self.fixed(m, r) {
                let (lane, l) = (m.regs().lane[r], m.regs().lanes[r] as u32);
                if lane == NO_LANE || lane as u32 + l > k as u32 || (l == 2 && lane % 2 != 0) {
                    return Err(RegAllocError::Malformed {
                        what: "pinned to a lane outside the register file or misaligned",
                        reg: r,
                    });
                }
            }
        }
        let mut reserved = false;
        let mut report = RegReport::default();
        let mut spill_serial = 0u32;
        loop {
            report.rounds += 1;
            if report.rounds > cfg.max_rounds {
                return Err(RegAllocError::NoConvergence {
                    rounds: cfg.max_rounds,
                });
            }
            self.live_ranges(m);
            if report.rounds == 1 {
                report.max_pressure =
                    self.pressure.iter().copied().max().unwrap_or(0).max(0) as u32;
            }
            report.coalesced = self.coalesce(m, k);
            self.renumber(m);
            let positions = 2 * self.order.len() + 2;
            self.graph
                .build_from_intervals(&self.n_lanes, &self.n_start, &self.n_end, positions)
                .map_err(RegAllocError::Graph)?;
            self.find_costs(m);
            let n = self.n_lanes.len();
            self.colors.clear();
            self.colors.resize(n, NO_COLOR);
            let stats = self
                .colorer
                .color(
                    &self.graph,
                    &self.n_cost,
                    &self.n_fixed,
                    &ccfg,
                    &mut self.colors,
                )
                .map_err(RegAllocError::Color)?;
            report.last_round = stats;
            report.edges = self.graph.num_edges() as u64;

            report.score = stats.score;
            if stats.uncolored == 0 {
                break;
            }
            self.choose_spills()
                .map_err(|v| self.pressure_error(m, v, k))?;
            if !reserved {
                // Headroom for all spill code this run can insert. The
                // caller reserves it beforehand (`RegAllocator::reserve`,
                // as the pipeline does); only a module without that room
                // gets it here, once, before the first insertion.
                if !Self::has_headroom(m, Some(limit)) {
                    m.reserve(spill_headroom(m, Some(limit)));
                }
                reserved = true;
            }
            // Spill every register whose class was chosen.
            for r in m.regs().lanes.keys() {
                let root = self.find(r.as_u32());
                let v = self.node_of[root as usize];
                if v != NONE && self.chosen[v as usize] && self.live.interval(r).is_some() {
                    self.spill_register(m, r, &mut spill_serial, &mut report, limit)?;
                }
            }
        }
        self.finish(m, &mut report);
        Ok(report)
    }

    /// Doubled-position ranges per register and the lane-weighted pressure.
    fn live_ranges(&mut self, m: &Module) {
        if !core::mem::take(&mut self.fresh) {
            self.order.compute(m);
            self.live.compute(m, &self.order);
        }
        let nr = m.num_regs();
        let positions = 2 * self.order.len() + 2;
        self.parent.clear();
        self.gstart.clear();
        self.gend.clear();
        self.pressure.clear();
        self.pressure.resize(positions + 1, 0);
        for r in m.regs().lanes.keys() {
            self.parent.push(r.as_u32());
            let Some(iv) = self.live.interval(r) else {
                self.gstart.push(NONE);
                self.gend.push(NONE);
                continue;
            };
            let mut s = 2 * iv.start;
            let acc = self.live.accesses(r);
            if acc.first() == Some(&iv.start) && self.live.access_writes(r).next() == Some(true) {
                let i = self.order.inst_at(iv.start);
                if m.insts().flags[i].contains(InstFlags::IN_PLACE) {
                    s += 1;
                }
            }
            let e = (2 * iv.end).max(s);
            self.gstart.push(s);
            self.gend.push(e);
            let l = m.regs().lanes[r] as i32;
            self.pressure[s as usize] += l;
            self.pressure[e as usize + 1] -= l;
        }
        debug_assert_eq!(self.parent.len(), nr);
        for p in 1..self.pressure.len() {
            self.pressure[p] += self.pressure[p - 1];
        }
    }

    /// One node per live class representative.
    fn renumber(&mut self, m: &Module) {
        self.node_of.clear();
        self.node_of.resize(m.num_regs(), NONE);
        self.node_reg.clear();
        self.n_lanes.clear();
        self.n_start.clear();
        self.n_end.clear();
        self.n_fixed.clear();
        for r in m.regs().lanes.keys() {
            let ri = r.index();
            if self.parent[ri] != r.as_u32() || self.gstart[ri] == NONE {
                continue;
            }
            self.node_of[ri] = self.node_reg.len() as u32;
            self.node_reg.push(r.as_u32());
            self.n_lanes.push(m.regs().lanes[r]);
            self.n_start.push(self.gstart[ri]);
            self.n_end.push(self.gend[ri]);
            let fixed = self.fixed(m, r);
            self.n_fixed
                .push(if fixed { m.regs().lane[r] } else { NO_COLOR });
        }
    }

    fn pressure_error(&mut self, m: &Module, v: usize, k: u16) -> RegAllocError {
        let (s, e) = (self.n_start[v] as usize, self.n_end[v] as usize);
        let mut best = s;
        for q in s..=e.min(self.pressure.len().saturating_sub(1)) {
            if self.pressure[q] > self.pressure[best] {
                best = q;
            }
        }
        let pos = best as u32 / 2;
        let mut live = ArrayVec::new();
        let (mut count, mut lanes) = (0u32, 0u32);
        for r in m.regs().lanes.keys() {
            if let Some(iv) = self.live.interval(r) {
                if iv.contains(pos) {
                    count += 1;
                    lanes += m.regs().lanes[r] as u32;
                    // The error lists the first PRESSURE_LIST registers;
                    // `live_count` counts them all and the message marks
                    // the rest.
                    if !live.is_full() {
                        live.push(r);
                    }
                }
            }
        }
        RegAllocError::RegisterPressure {
            instruction: self.order.inst_at(pos),
            live,
            live_count: count,
            live_lanes: lanes,
            capacity: k,
        }
    }

    /// Writes lanes, renames coalesced classes, deletes self-moves, reports.
    fn finish(&mut self, m: &mut Module, report: &mut RegReport) {
        let k = m.target.max_regs as usize;
        let mut used: ArrayVec<u64, 64> = ArrayVec::new();
        for _ in 0..k.div_ceil(64).min(64) {
            used.push(0);
        }
        for r in m.regs().lanes.keys() {
            if self.gstart[r.index()] == NONE {
                continue;
            }
            let root = self.find(r.as_u32());
            let v = self.node_of[root as usize];
            if v == NONE {
                continue;
            }
            let c = self.colors[v as usize];
            m.set_reg_lane(r, c);
            for l in c as usize..c as usize + m.regs().lanes[r] as usize {
                if let Some(w) = used.get_mut(l / 64) {
                    *w |= 1 << (l % 64);
                }
            }
        }
        let lanes_used: u32 = used.iter().map(|w| w.count_ones()).sum();
        report.lane_utilization_pct = 100.0 * lanes_used as f64 / k.max(1) as f64;
        self.rename_coalesced(m, report);
        report.spill_cycles = spill::spill_cycles(m);
    }
}

/// Allocates the registers of `m` with a fresh workspace.
pub fn allocate_registers(
    m: &mut Module,
    cfg: &RegAllocConfig,
) -> Result<RegReport, RegAllocError> {
    let mut a = RegAllocator::new(m);
    // `new` computed the order and liveness of `m`, which nothing can
    // change before `allocate` runs: reuse them.
    a.fresh = true;
    a.allocate(m, cfg)
}

impl fmt::Display for RegReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "REG GCA iteration nums = {}; Number of registers spilled = {}; \
             Spilling from REG cost about {} cycles; {:.1}% REG utilization after allocation; \
             REG score = {:.4} (lower is better); copies coalesced {}, removed {}",
            self.rounds,
            self.spilled_registers,
            self.spill_cycles,
            self.lane_utilization_pct,
            self.score,
            self.coalesced,
            self.copies_removed
        )
    }
}
