//! REG_Allocator: colors the scalar registers of a module with
//! `target.max_regs` lanes, spilling to memory until everything is colored.
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
//! **SSA representatives and coalescing.** For `b = mov a` where `a`'s range
//! ends at the copy and `b`'s range starts there (the two only touch),
//! `b` joins `a`'s union-find class; the class's range is the union, still an
//! interval. The test is conservative in the lane-weighted Briggs sense for
//! interval graphs: the merged node's neighbours at every position are the
//! registers live there, so it is trivially colorable exactly when the
//! lane-weighted pressure over its range stays within K; a merge whose range
//! crosses a position above K is refused (it would make a bigger spill
//! candidate out of two small ones). Pinned registers and spill temporaries
//! are never coalesced. After coloring, the class members are renamed to the
//! representative and the copies, now `a = mov a`, are deleted.
//!
//! **Spill cost** of a node: `Σ over accesses 10^min(depth, 30) × lanes`
//! (depth = loop depth of the accessing instruction); the colorer divides it
//! by the node's current lane-weighted degree when it chooses a potential
//! spill. Spill temporaries and pinned registers cost `∞` (never spilled).
//!
//! **Spill code.** A spilled register gets a DRAM memory location of
//! `4 × lanes` bytes flagged `SPILL | INTERNAL` (DRAM: the flat per-core
//! space the target reserves for spill slots, placed by the pipeline after
//! this pass; the sequencer reaches it through a queue, hence the waits).
//! Each def writes a fresh `SPILL_TEMP` register, followed by
//! `spill_store` and a `sync_wait`; each use reads a fresh `SPILL_TEMP`
//! filled by `reload` and a `sync_wait` just before it.
//!
//! **Report.** Spill cycles: every inserted store or reload costs
//! `target.reg_spill_cycles` (sync wait included) times the product of the
//! trip counts of its enclosing loops (an unknown trip counts 1). Lane
//! utilization: distinct lanes used / K. Score: the REG score of the last
//! round's select (see `color.rs`).

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use core::fmt;
use core::fmt::Write as _;

use super::color::{ColorConfig, ColorError, ColorStats, Colorer, NO_COLOR};
use super::graph::{GraphError, InterferenceGraph};
use crate::analysis::{LinearOrder, RegLiveness};
use crate::ir::{
    full_ap, Capacity, Inst, InstFlags, InstSpec, IrError, MemFlags, Module, Opcode, Reg, RegFlags,
    Space, NO_LANE, UNKNOWN_TRIP,
};

/// Registers listed in a [`RegAllocError::RegisterPressure`].
pub const PRESSURE_LIST: usize = 8;

/// Why register allocation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegAllocError {
    /// Nodes are left uncolored and none of them may be spilled.
    RegisterPressure {
        /// Where the pressure peaks inside an uncolorable range.
        instruction: Inst,
        /// Registers live there (the first [`PRESSURE_LIST`]).
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

impl fmt::Display for RegAllocError {
    /// Without the module: registers and instructions by index. A driver
    /// prints [`RegAllocError::display`] instead, which names them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_reg_error(self, f, None)
    }
}

impl RegAllocError {
    /// A printable form that names the registers (`$name`) and the
    /// instruction of `m`.
    pub fn display<'m>(&'m self, m: &'m Module) -> RegAllocErrorDisplay<'m> {
        RegAllocErrorDisplay { e: self, m }
    }
}

/// See [`RegAllocError::display`].
#[derive(Debug)]
pub struct RegAllocErrorDisplay<'m> {
    e: &'m RegAllocError,
    m: &'m Module,
}

impl fmt::Display for RegAllocErrorDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_reg_error(self.e, f, Some(self.m))
    }
}

/// The text of `e`, naming registers and instructions of `m` when given.
fn write_reg_error(
    e: &RegAllocError,
    f: &mut fmt::Formatter<'_>,
    m: Option<&Module>,
) -> fmt::Result {
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

/// The default limit on spill temporaries is one per this many register
/// operands...
pub const SPILL_TEMP_FRACTION: usize = 4;
/// ...plus this many.
pub const SPILL_TEMP_SLACK: usize = 64;

/// Spill temporaries (each one reload or one store) a run on `m` may
/// insert by default: one per [`SPILL_TEMP_FRACTION`] register operands
/// plus [`SPILL_TEMP_SLACK`], at most one per operand (what spilling every
/// register would take). Reserving for every operand costs megabytes on a
/// 1,000-instruction module; a run needing more fails with
/// [`RegAllocError::SpillHeadroom`], which says how to raise the limit.
///
/// None when no register can ever be spilled ([`never_spills`]).
pub fn default_spill_temporaries(m: &Module) -> u32 {
    if never_spills(m) {
        return 0;
    }
    let t = m.reg_pool.len();
    (t / SPILL_TEMP_FRACTION + SPILL_TEMP_SLACK).min(t) as u32
}

/// True when the register file holds every register of `m` at once, each
/// on a lane pair of its own: at most K/2 registers, of one or two lanes,
/// none pinned or colored. A node's neighbours then occupy fewer than K/2
/// aligned lane pairs (one each, whatever their lanes), so some pair, and
/// some lane, is always free: simplify never blocks, select always finds a
/// color, and nothing spills, so the spill code needs no headroom.
pub fn never_spills(m: &Module) -> bool {
    m.num_regs().saturating_mul(2) <= m.target.max_regs as usize
        && m.regs.lanes.keys().all(|r| {
            m.regs.lanes[r] <= 2
                && !m.regs.flags[r].contains(RegFlags::PINNED)
                && m.regs.lane[r] == NO_LANE
        })
}

/// Headroom the spill code of `m` can need with at most `limit` spill
/// temporaries (`None`: [`default_spill_temporaries`]): every original
/// register is spilled at most once (one slot each), and each temporary
/// adds two instructions, one access pattern and one register operand. The
/// pattern is a full access of a one-partition slot: one dim, kept inline,
/// so no pooled dims.
fn spill_headroom(m: &Module, limit: Option<u32>) -> Capacity {
    let t = limit.unwrap_or_else(|| default_spill_temporaries(m)) as usize;
    let r = m.num_regs();
    Capacity {
        insts: 2 * t,
        aps: t,
        dims: 0,
        reg_operands: t,
        mems: r,
        regs: t,
        names: t + r,
        name_bytes: (t + r) * 24,
        ..Capacity::default()
    }
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
            self.chosen
        )
        .saturating_add(self.graph.heap_bytes())
        .saturating_add(self.colorer.heap_bytes())
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
    /// default, [`default_spill_temporaries`]).
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
        m.regs.flags[r].contains(RegFlags::PINNED)
            || (self.keep_colored && m.regs.lane[r] != NO_LANE)
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
        for r in m.regs.lanes.keys() {
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

    /// Marks the nodes to spill in `chosen`: every uncolored spillable
    /// node, and for every uncolored unspillable node (a spill temporary or
    /// a pinned register) its cheapest spillable neighbour (by cost per
    /// lane), since freeing a neighbour's lanes is the only way to make
    /// room for it. Fails with the unspillable node that has no spillable
    /// neighbour.
    fn choose_spills(&mut self, _k: u16) -> Result<(), usize> {
        let n = self.colors.len();
        self.chosen.clear();
        self.chosen.resize(n, false);
        let mut any = false;
        for v in 0..n {
            if self.colors[v] == NO_COLOR && self.n_cost[v].is_finite() {
                self.chosen[v] = true;
                any = true;
            }
        }
        for v in 0..n {
            if self.colors[v] != NO_COLOR || self.n_cost[v].is_finite() {
                continue;
            }
            let mut best: Option<(f64, usize)> = None;
            let mut covered = false;
            for &u in self.graph.neighbors(v) {
                let u = u as usize;
                let c = self.n_cost[u];
                if !c.is_finite() {
                    continue;
                }
                if self.chosen[u] {
                    covered = true;
                    continue;
                }
                let per_lane = c / self.n_lanes[u] as f64;
                if best.map_or(true, |(b, _)| per_lane < b) {
                    best = Some((per_lane, u));
                }
            }
            match best {
                Some((_, u)) if !covered => {
                    self.chosen[u] = true;
                    any = true;
                }
                Some(_) | None if covered => {}
                _ => return Err(v),
            }
        }
        if any {
            Ok(())
        } else {
            Err(0)
        }
    }

    fn find(&mut self, mut r: u32) -> u32 {
        while self.parent[r as usize] != r {
            let p = self.parent[r as usize];
            self.parent[r as usize] = self.parent[p as usize];
            r = p;
        }
        r
    }

    /// Allocates every register of `m`; writes `m.regs.lane`.
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
        for r in m.regs.lanes.keys() {
            if self.fixed(m, r) {
                let (lane, l) = (m.regs.lane[r], m.regs.lanes[r] as u32);
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
            self.choose_spills(k)
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
            for r in m.regs.lanes.keys() {
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
        for r in m.regs.lanes.keys() {
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
                if m.insts.flags[i].contains(InstFlags::IN_PLACE) {
                    s += 1;
                }
            }
            let e = (2 * iv.end).max(s);
            self.gstart.push(s);
            self.gend.push(e);
            let l = m.regs.lanes[r] as i32;
            self.pressure[s as usize] += l;
            self.pressure[e as usize + 1] -= l;
        }
        debug_assert_eq!(self.parent.len(), nr);
        for p in 1..self.pressure.len() {
            self.pressure[p] += self.pressure[p - 1];
        }
    }

    fn coalescable(&self, m: &Module, r: Reg) -> bool {
        !self.fixed(m, r) && !m.regs.flags[r].contains(RegFlags::SPILL_TEMP)
    }

    /// Merges copy-related classes whose ranges touch only at the copy.
    fn coalesce(&mut self, m: &Module, k: u16) -> u32 {
        let over = self.pressure.iter().any(|&p| p > k as i32);
        let mut merged = 0;
        for p in 0..self.order.len() {
            let i = self.order.insts()[p];
            if m.insts.opcode[i] != Opcode::ScalarMov {
                continue;
            }
            let (u, d) = (m.uses(i), m.defs(i));
            if u.len() != 1 || d.len() != 1 {
                continue;
            }
            let (a, b) = (u[0], d[0]);
            if a == b
                || m.regs.lanes[a] != m.regs.lanes[b]
                || !self.coalescable(m, a)
                || !self.coalescable(m, b)
            {
                continue;
            }
            let (ra, rb) = (self.find(a.as_u32()), self.find(b.as_u32()));
            let p2 = 2 * p as u32;
            if ra == rb || self.gend[ra as usize] != p2 || self.gstart[rb as usize] != p2 {
                continue;
            }
            let end = self.gend[rb as usize];
            if over {
                let (lo, hi) = (self.gstart[ra as usize] as usize, end as usize);
                let lanes = m.regs.lanes[a] as i32;
                let worst = (lo..=hi)
                    .map(|q| self.pressure[q] - if q == p2 as usize { lanes } else { 0 })
                    .max()
                    .unwrap_or(0);
                if worst > k as i32 {
                    continue;
                }
            }
            self.parent[rb as usize] = ra;
            self.gend[ra as usize] = end;
            self.pressure[p2 as usize] -= m.regs.lanes[a] as i32;
            merged += 1;
        }
        merged
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
        for r in m.regs.lanes.keys() {
            let ri = r.index();
            if self.parent[ri] != r.as_u32() || self.gstart[ri] == NONE {
                continue;
            }
            self.node_of[ri] = self.node_reg.len() as u32;
            self.node_reg.push(r.as_u32());
            self.n_lanes.push(m.regs.lanes[r]);
            self.n_start.push(self.gstart[ri]);
            self.n_end.push(self.gend[ri]);
            let fixed = self.fixed(m, r);
            self.n_fixed
                .push(if fixed { m.regs.lane[r] } else { NO_COLOR });
        }
    }

    fn find_costs(&mut self, m: &Module) {
        let n = self.node_reg.len();
        self.n_cost.clear();
        self.n_cost.resize(n, 0.0);
        for r in m.regs.lanes.keys() {
            if self.gstart[r.index()] == NONE {
                continue;
            }
            let root = self.find(r.as_u32());
            let v = self.node_of[root as usize] as usize;
            if self.fixed(m, r) || m.regs.flags[r].contains(RegFlags::SPILL_TEMP) {
                self.n_cost[v] = f64::INFINITY;
                continue;
            }
            let lanes = m.regs.lanes[r] as f64;
            let mut c = 0.0;
            for &p in self.live.accesses(r) {
                let d = m.inst_loop_depth(self.order.inst_at(p)).min(30) as usize;
                c += self.depth_weight[d] * lanes;
            }
            self.n_cost[v] += c;
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
        for r in m.regs.lanes.keys() {
            if let Some(iv) = self.live.interval(r) {
                if iv.contains(pos) {
                    count += 1;
                    lanes += m.regs.lanes[r] as u32;
                    let _ = live.try_push(r);
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

    fn fresh_name(m: &Module, prefix: &str, serial: &mut u32) -> heapless::String<32> {
        loop {
            let mut s: heapless::String<32> = heapless::String::new();
            let _ = write!(s, "{prefix}{}", *serial);
            *serial += 1;
            if m.reg_by_name(&s).is_none() && m.mem_by_name(&s).is_none() {
                return s;
            }
        }
    }

    /// Rewrites `r` to live in a memory slot (see the module doc).
    fn spill_register(
        &mut self,
        m: &mut Module,
        r: Reg,
        serial: &mut u32,
        report: &mut RegReport,
        limit: u32,
    ) -> Result<(), RegAllocError> {
        let lanes = m.regs.lanes[r];
        let name = Self::fresh_name(m, "spill.slot", serial);
        let slot = m.try_add_mem(&name, Space::Dram, 1, 4 * lanes as u32)?;
        m.set_elem_size(slot, 4)?;
        m.mems.flags[slot] = MemFlags::SPILL | MemFlags::INTERNAL;
        report.spilled_registers += 1;
        let ap = [full_ap(m, slot)];
        let mut last = u32::MAX;
        let n_acc = self.live.accesses(r).len();
        for k in 0..n_acc {
            let p = self.live.accesses(r)[k];
            if p == last {
                continue;
            }
            last = p;
            let i = self.order.inst_at(p);
            let ops = m.operands(i);
            let n_use = ops.n_use as usize;
            let uses_r = m.uses(i).contains(&r);
            let defs_r = m.defs(i).contains(&r);
            let temps = uses_r as u32 + defs_r as u32;
            if report.spill_instructions + temps > limit {
                return Err(RegAllocError::SpillHeadroom { limit });
            }
            if uses_r {
                let tn = Self::fresh_name(m, "spill.t", serial);
                let t = m.try_add_reg(&tn, lanes)?;
                m.regs.flags[t] = RegFlags::SPILL_TEMP;
                let defs = [t];
                let mut spec = InstSpec::new(Opcode::RegReload);
                spec.inputs = &ap;
                spec.defs = &defs;
                spec.flags = InstFlags::RELOAD;
                m.insert_before(i, &spec)?;
                m.insert_before(i, &InstSpec::new(Opcode::SyncWait))?;
                for x in m.regs_mut(i)[..n_use].iter_mut() {
                    if *x == r {
                        *x = t;
                    }
                }
                report.spill_instructions += 1;
            }
            if defs_r {
                let tn = Self::fresh_name(m, "spill.t", serial);
                let t = m.try_add_reg(&tn, lanes)?;
                m.regs.flags[t] = RegFlags::SPILL_TEMP;
                for x in m.regs_mut(i)[n_use..].iter_mut() {
                    if *x == r {
                        *x = t;
                    }
                }
                let uses = [t];
                let mut spec = InstSpec::new(Opcode::RegSpillStore);
                spec.outputs = &ap;
                spec.uses = &uses;
                spec.flags = InstFlags::SPILL;
                let st = m.insert_after(i, &spec)?;
                m.insert_after(st, &InstSpec::new(Opcode::SyncWait))?;
                report.spill_instructions += 1;
            }
        }
        Ok(())
    }

    /// Writes lanes, renames coalesced classes, deletes self-moves, reports.
    fn finish(&mut self, m: &mut Module, report: &mut RegReport) {
        let k = m.target.max_regs as usize;
        let mut used: ArrayVec<u64, 64> = ArrayVec::new();
        for _ in 0..k.div_ceil(64).min(64) {
            used.push(0);
        }
        for r in m.regs.lanes.keys() {
            if self.gstart[r.index()] == NONE {
                continue;
            }
            let root = self.find(r.as_u32());
            let v = self.node_of[root as usize];
            if v == NONE {
                continue;
            }
            let c = self.colors[v as usize];
            m.regs.lane[r] = c;
            for l in c as usize..c as usize + m.regs.lanes[r] as usize {
                if let Some(w) = used.get_mut(l / 64) {
                    *w |= 1 << (l % 64);
                }
            }
        }
        let lanes_used: u32 = used.iter().map(|w| w.count_ones()).sum();
        report.lane_utilization_pct = 100.0 * lanes_used as f64 / k.max(1) as f64;
        for p in 0..self.order.len() {
            let i = self.order.insts()[p];
            if report.coalesced > 0 {
                for x in 0..m.regs_mut(i).len() {
                    let r = m.regs_mut(i)[x];
                    let root = Reg::from_u32(self.find(r.as_u32()));
                    m.regs_mut(i)[x] = root;
                }
            }
            if m.insts.opcode[i] == Opcode::ScalarMov
                && m.uses(i).len() == 1
                && m.defs(i).len() == 1
                && m.uses(i)[0] == m.defs(i)[0]
            {
                m.remove_inst(i);
                report.copies_removed += 1;
            }
        }
        let cyc = m.target.reg_spill_cycles as u64;
        let mut cycles = 0u64;
        for i in m.program_order() {
            let op = m.insts.opcode[i];
            if op != Opcode::RegSpillStore && op != Opcode::RegReload {
                continue;
            }
            let mut w = 1u64;
            let mut l = m.inst_loop(i);
            while l.is_valid() {
                let t = m.loops.trip[l];
                if t != UNKNOWN_TRIP {
                    w = w.saturating_mul(t as u64);
                }
                l = m.loops.parent[l];
            }
            cycles = cycles.saturating_add(w.saturating_mul(cyc));
        }
        report.spill_cycles = cycles;
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::{LinearOrder, RegLiveness};
    use crate::ir::{Builder, MemLoc, SubOp};
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
        for r in m.regs.lanes.keys() {
            let Some(iv) = live.interval(r) else { continue };
            let (lane, l) = (m.regs.lane[r], m.regs.lanes[r] as u32);
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
                let (a, la) = (m.regs.lane[r] as u32, m.regs.lanes[r] as u32);
                let (b, lb) = (m.regs.lane[r2] as u32, m.regs.lanes[r2] as u32);
                if a < b + lb && b < a + la {
                    // In-place hand-off: r dies at s2 where r2 is written.
                    let i = order.inst_at(s2);
                    let handoff = e == s2
                        && s2 > s
                        && m.insts.flags[i].contains(InstFlags::IN_PLACE)
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
                m.regs.lane[r] as u32
            } else {
                r.as_u32()
            }
        };
        for i in m.program_order() {
            let op = m.insts.opcode[i];
            let read: Vec<u32> = m
                .uses(i)
                .iter()
                .map(|&r| *lanes.get(&key(r)).unwrap_or(&u32::MAX))
                .collect();
            match op {
                Opcode::ScalarMov => {
                    let d = m.defs(i)[0];
                    for l in 0..m.regs.lanes[d] as u32 {
                        lanes.insert(key(d) + if physical { l } else { 0 }, read[0]);
                    }
                }
                Opcode::RegSpillStore => {
                    let slot = m.aps.loc[m.outputs(i).next().unwrap()];
                    mem.insert(slot, read[0]);
                }
                Opcode::SyncWait => {}
                Opcode::RegReload => {
                    let slot = m.aps.loc[m.inputs(i).next().unwrap()];
                    let v = *mem.get(&slot).unwrap_or(&u32::MAX);
                    let d = m.defs(i)[0];
                    for l in 0..m.regs.lanes[d] as u32 {
                        lanes.insert(key(d) + if physical { l } else { 0 }, v);
                    }
                }
                _ => {
                    out.insert(i.as_u32(), read);
                    for &d in m.defs(i) {
                        for l in 0..m.regs.lanes[d] as u32 {
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
            .all(|i| m.insts.opcode[i] != Opcode::ScalarMov));
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
        assert_ne!(m.regs.lane[a], m.regs.lane[x]);
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
        m.regs.flags[p] = RegFlags::PINNED;
        m.regs.lane[p] = 3;
        let rep = allocate_checked(&mut m).unwrap();
        assert_eq!(rep.spilled_registers, 0);
        assert_eq!(m.regs.lane[p], 3);
        assert_eq!(m.regs.lane[q] % 2, 0);
        assert_eq!(m.regs.lane[w] % 2, 0);
        // p on 3 breaks pair (2,3): q, w and s must use (0,1) and (4,5).
        assert_ne!(m.regs.lane[q], 2);
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
        m.regs.flags[q] = RegFlags::PINNED;
        m.regs.lane[q] = 1;
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
        m.insts.flags[i] = InstFlags::IN_PLACE;
        let rep = allocate_checked(&mut m).unwrap();
        assert_eq!(rep.spilled_registers, 0);
        let _ = vec![0];
    }
}

#[cfg(all(test, feature = "gen"))]
mod gen_tests {
    use super::tests::{allocate_checked, allocate_checked_with, check_registers};
    use super::*;
    use crate::analysis::{LinearOrder, RegLiveness};
    use crate::gen::scalar::{scalar_program, ScalarParams};
    use crate::target::Target;

    /// Max over instructions of Σ lanes of the registers live there, and
    /// the same with every register counted as a pair.
    fn pressures(m: &Module) -> (u32, u32) {
        let order = LinearOrder::of(m);
        let live = RegLiveness::of(m, &order);
        let mut w = alloc::vec![0i64; order.len() + 1];
        let mut pw = alloc::vec![0i64; order.len() + 1];
        for r in m.regs.lanes.keys() {
            if let Some(iv) = live.interval(r) {
                let l = m.regs.lanes[r] as i64;
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

    fn target(k: u64) -> Target {
        let mut t = Target::default();
        t.set("max-regs", k).unwrap();
        t
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
            let every_operand = m.reg_pool.len() as u32;
            let rep = allocate_checked_with(&mut m, Some(every_operand)).unwrap();
            assert!(rep.spilled_registers > 0);
            assert!(rep.rounds >= 2);
            assert!(rep.spill_cycles > 0);
            check_registers(&m).unwrap();
        }
    }
}
