//! The CFG colorer: Chaitin–Briggs over a client's control-flow graph.
//!
//! ```text
//! validate; copy the function into the workspace
//! loop (round = 1, 2, …):
//!     liveness (dataflow over the CFG)            // liveness.rs
//!     round 1: a copy for each tied use that outlives its instruction;
//!              above K, spills by pressure until K suffice  // pressure.rs
//!     interference + pressure walk                // interference.rs
//!     coalesce (tied, moves, edges; joins freely within K, Briggs above)
//!     color the class graph (simplify, select with affinities)
//!     if spills although MaxLive ≤ K: recolor with fewer join merges
//!     if uncolored: spill the chosen classes (split at block boundaries)  // split.rs
//! locations; spill code and sequenced edge copies as edits  // parallel_copy.rs
//! ```
//!
//! Spill choice: first by pressure (`pressure.rs`), which brings every
//! point within K before the first coloring; then, for what the coloring
//! still leaves, the register colorer's (see `alloc.rs`): every uncolored
//! class with a spillable member, and for an uncolored class of
//! temporaries its cheapest spillable neighbour. Costs are accesses
//! weighted by 10^depth.
//!
//! Storage: [`CfgAllocator::reserve`] sizes every table for a function;
//! [`CfgAllocator::allocate`] then allocates nothing, and reports
//! [`CfgAllocError::Full`] when a table is too small (the interference
//! edges are only known once the liveness ran); [`CfgAllocator::allocate_growing`]
//! grows the table that ran out and retries, so a reused allocator settles
//! at the size of the largest function it has seen.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use crate::reg::reserve_total;
use alloc::vec::Vec;
use core::fmt;

use super::checker::{CfgChecker, CheckError};
use super::coalesce::{Coalescer, Joins};
use super::function::{Block, CfgFunction, CfgInst, VReg};
use super::interference::Walk;
use super::liveness::Liveness;
use super::output::{CfgAllocation, CfgStats, Edit, EditKind, EditPoint, Location};
use super::parallel_copy::{ParallelCopy, ScratchSlots};
use super::pressure::PressureSpiller;
use super::program::{Counts, Full, Program, PseudoKind, BLOCK_RELOAD, DEAD, NONE, ORIG, TEMP};
use super::split::Splitter;
use super::validate::{CfgError, DefSite, Validator};
use crate::reg::chaitin_briggs::{
    Affinity, ColorChoice, ColorConfig, ColorError, Colorer, MAX_K, NO_COLOR,
};
use crate::reg::graph::{GraphError, InterferenceGraph};

/// Why an allocation failed.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum CfgAllocError {
    /// The function is malformed.
    Invalid(CfgError),
    /// K is outside `1..=MAX_K`.
    BadK {
        /// K asked for.
        k: u32,
    },
    /// A table is smaller than this function needs.
    Full(Full),
    /// The interference graph does not fit its reserve.
    Graph(GraphError),
    /// The colorer refused its input.
    Color(ColorError),
    /// Some instruction needs more registers at once than K: the
    /// temporaries of this vreg's operands cannot all be colored and
    /// nothing around them may be spilled.
    Pressure {
        /// The client vreg whose temporaries are left uncolored.
        vreg: VReg,
        /// An instruction reading or writing one of them.
        inst: CfgInst,
        /// Registers available.
        k: u16,
    },
    /// The spill rounds did not converge.
    NoConvergence {
        /// Rounds run.
        rounds: u32,
    },
}

impl fmt::Display for CfgAllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CfgAllocError::Invalid(e) => write!(f, "{e}"),
            CfgAllocError::BadK { k } => write!(f, "K = {k} is out of range 1..={MAX_K}"),
            CfgAllocError::Full(x) => write!(
                f,
                "{} needs {} entries but {} are reserved",
                x.what, x.needed, x.capacity
            ),
            CfgAllocError::Graph(e) => write!(f, "{e}"),
            CfgAllocError::Color(e) => write!(f, "register colorer: {e}"),
            CfgAllocError::Pressure { vreg, inst, k } => write!(
                f,
                "instruction {inst}: vreg {vreg} cannot get a register: the values this \
                 instruction needs at once, with the ones live across it that cannot be \
                 spilled, take more than the {k} registers"
            ),
            CfgAllocError::NoConvergence { rounds } => {
                write!(f, "the spill rounds did not converge in {rounds} rounds")
            }
        }
    }
}

impl core::error::Error for CfgAllocError {}

impl From<Full> for CfgAllocError {
    fn from(x: Full) -> Self {
        CfgAllocError::Full(x)
    }
}

/// Parameters of the CFG colorer.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct CfgConfig {
    /// Colorer strategy (its `k` is replaced by the K asked for).
    pub color: ColorConfig,
    /// Most coloring rounds.
    pub max_rounds: u32,
    /// Coalesce edges into joins (freely while MaxLive ≤ K, under the
    /// Briggs test above; false: they are only affinities).
    pub conservative_joins: bool,
}

impl Default for CfgConfig {
    fn default() -> Self {
        CfgConfig {
            // Cost/degree spill choice; select by copy affinity, else the
            // lowest free register. The saturation rule and the tabu repair
            // cost a large share of a spilling function's time without
            // saving spills here: the affinity decides most choices and the
            // spill rounds repair what select leaves.
            color: ColorConfig {
                repair_moves: 0,
                color_choice: ColorChoice::FirstFit,
                ..ColorConfig::tuned(0)
            },
            max_rounds: 40,
            conservative_joins: true,
        }
    }
}

/// The reusable workspace of the CFG colorer (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct CfgAllocator {
    validator: Validator,
    prog: Program,
    live: Liveness,
    walk: Walk,
    graph: InterferenceGraph,
    cgraph: InterferenceGraph,
    coal: Coalescer,
    colorer: Colorer,
    colors: Vec<u16>,
    chosen: Vec<bool>,
    split: Splitter,
    pressure: PressureSpiller,
    pcopy: ParallelCopy,
    free: Vec<u64>,
    out: CfgAllocation,
    /// Interference edges to reserve (grown by `allocate_growing`).
    edge_hint: usize,
    /// Global vregs to reserve bitset rows for.
    global_hint: usize,
    count_scratch: Vec<u32>,
    /// Global reads to reserve (grown by `allocate_growing`).
    live_reads: usize,
    /// Configuration.
    pub config: CfgConfig,
}

/// Adds the parameters, edges and edge arguments of block `blk` to `c`.
fn count_block<F: CfgFunction + ?Sized>(f: &F, blk: Block, c: &mut Counts) {
    c.params += f.params(blk).len();
    let succs = f.succs(blk).len();
    c.edges += succs;
    for k in 0..succs {
        let n = f.edge_args(blk, k).len();
        c.args += n;
        c.max_args = c.max_args.max(n);
    }
}

/// Adds the operands and tied pairs of instruction `inst` to `c`.
fn count_inst<F: CfgFunction + ?Sized>(f: &F, inst: CfgInst, c: &mut Counts) {
    c.operands += f.uses(inst).len() + f.defs(inst).len();
    c.tied += f.tied(inst).len();
}

/// The counts of `f`; the global vregs only when `globals` (a second pass
/// over the operands).
fn counts<F: CfgFunction + ?Sized>(f: &F, def_block: &mut Vec<u32>, globals: bool) -> Counts {
    let mut c = Counts {
        blocks: f.num_blocks(),
        insts: f.num_insts(),
        vregs: f.num_vregs(),
        ..Counts::default()
    };
    if !globals {
        for b in 0..c.blocks {
            count_block(f, Block(b as u32), &mut c);
        }
        for i in 0..c.insts {
            count_inst(f, CfgInst(i as u32), &mut c);
        }
        return c;
    }
    def_block.clear();
    def_block.resize(c.vregs, NONE);
    for b in 0..c.blocks {
        let blk = Block(b as u32);
        count_block(f, blk, &mut c);
        for &p in f.params(blk) {
            if let Some(d) = def_block.get_mut(p.index()) {
                *d = b as u32;
            }
        }
        let (s, e) = f.block_insts(blk);
        for i in s..e.min(c.insts as u32) {
            let inst = CfgInst(i);
            count_inst(f, inst, &mut c);
            for &d in f.defs(inst) {
                if let Some(x) = def_block.get_mut(d.index()) {
                    *x = b as u32;
                }
            }
        }
    }
    for b in 0..c.blocks {
        let blk = Block(b as u32);
        let (s, e) = f.block_insts(blk);
        for i in s..e.min(c.insts as u32) {
            for &u in f.uses(CfgInst(i)) {
                if def_block
                    .get(u.index())
                    .is_some_and(|&d| d != b as u32 && d != NONE)
                {
                    def_block[u.index()] = NONE - 1;
                }
            }
        }
        for k in 0..f.succs(blk).len() {
            for &a in f.edge_args(blk, k) {
                if let Some(d) = def_block.get_mut(a.index()) {
                    *d = NONE - 1;
                }
            }
        }
    }
    c.globals = def_block.iter().filter(|&&d| d == NONE - 1).count();
    c
}

impl CfgAllocator {
    /// A new allocator (reserve before use, or use `allocate_growing`).
    pub fn new() -> Self {
        CfgAllocator::default()
    }

    /// Sizes every table for `f` at `k` registers (may allocate).
    pub fn reserve<F: CfgFunction + ?Sized>(&mut self, f: &F, k: u16) {
        let mut scratch = core::mem::take(&mut self.count_scratch);
        let c = counts(f, &mut scratch, true);
        self.count_scratch = scratch;
        self.reserve_counts(&c, k);
    }

    /// [`Self::reserve`] without the count of global vregs (one pass
    /// instead of two; the liveness reports a shortfall, which
    /// [`Self::allocate_growing`] grows).
    fn reserve_quick<F: CfgFunction + ?Sized>(&mut self, f: &F, k: u16) {
        let mut scratch = core::mem::take(&mut self.count_scratch);
        let c = counts(f, &mut scratch, false);
        self.count_scratch = scratch;
        self.reserve_counts(&c, k);
    }

    fn reserve_counts(&mut self, c: &Counts, k: u16) {
        self.validator.reserve(c.blocks, c.vregs);
        self.prog.reserve(c);
        let vmax = c.vregs + 2 * c.operands + c.tied + 16;
        self.global_hint = self.global_hint.max(c.globals);
        self.live_reads = self.live_reads.max(3 * c.operands + c.tied + 16);
        self.live
            .reserve(c.blocks, vmax, self.global_hint, self.live_reads);
        self.edge_hint = self
            .edge_hint
            .max(8 * (c.operands + c.params + c.args) + 1024);
        self.walk
            .reserve(vmax, self.edge_hint, c.params, c.tied.max(1));
        self.graph.reserve(vmax, 2 * self.edge_hint, 0);
        self.cgraph.reserve(vmax, 2 * self.edge_hint, 0);
        let cands = c.insts + c.args;
        self.coal
            .reserve(vmax, cands, self.edge_hint, c.tied.max(1));
        self.colorer.reserve(vmax, k.clamp(1, MAX_K));
        reserve_total(&mut self.colors, vmax);
        reserve_total(&mut self.chosen, vmax);
        self.split.reserve(c.vregs);
        self.pressure.reserve(vmax);
        self.pcopy.reserve(2 * c.max_args + 4);
        reserve_total(&mut self.free, (k as usize).div_ceil(64) + 1);
        let o = &mut self.out;
        reserve_total(&mut o.op_start, c.insts + 1);
        reserve_total(&mut o.n_use, c.insts);
        reserve_total(&mut o.op_locs, c.operands);
        reserve_total(&mut o.param_start, c.blocks + 1);
        reserve_total(&mut o.param_locs, c.params);
        // Edits: one per temporary, plus edge copies (two lanes per
        // argument, doubled for cycle breaks and slot-to-slot moves).
        reserve_total(&mut o.edits, 2 * c.operands + c.tied + 8 * c.args + 16);
    }

    /// [`Self::allocate`], growing the table that ran out and retrying
    /// (allocation happens only on such a retry).
    pub fn allocate_growing<F: CfgFunction + ?Sized>(
        &mut self,
        f: &F,
        k: u16,
    ) -> Result<&CfgAllocation, CfgAllocError> {
        self.reserve_quick(f, k);
        for _ in 0..16 {
            match self.allocate_inner(f, k) {
                Err(CfgAllocError::Full(x)) => self.grow(f, k, x),
                Err(CfgAllocError::Graph(GraphError::Full { needed, .. })) => {
                    self.edge_hint = self.edge_hint.max(needed as usize);
                    self.reserve(f, k);
                }
                Err(e) => return Err(e),
                Ok(()) => return Ok(&self.out),
            }
        }
        self.allocate(f, k)
    }

    fn grow<F: CfgFunction + ?Sized>(&mut self, f: &F, k: u16, x: Full) {
        let needed = x.needed as usize;
        match x.what {
            "interference edges" => self.edge_hint = self.edge_hint.max(2 * needed),
            "global vregs" => self.global_hint = self.global_hint.max(needed),
            "spill temporaries" => {
                let extra = needed.saturating_sub(self.prog.lanes.capacity());
                self.prog.lanes.reserve(extra + needed / 2);
                self.prog.kind.reserve(extra + needed / 2);
                self.prog.origin.reserve(extra + needed / 2);
                self.prog.slot.reserve(extra + needed / 2);
            }
            "spill code" => self.prog.pseudo.reserve(needed),
            "global reads" => self.live_reads = self.live_reads.max(2 * needed),
            "edits" => self.out.edits.reserve(needed),
            _ => self.edge_hint = self.edge_hint.max(2 * needed),
        }
        self.reserve(f, k);
        let n = self.prog.lanes.capacity();
        self.live
            .reserve(f.num_blocks(), n, self.global_hint, n.max(self.live_reads));
        self.walk.reserve(n, self.edge_hint, 0, 0);
        self.graph.reserve(n, 2 * self.edge_hint, 0);
        self.cgraph.reserve(n, 2 * self.edge_hint, 0);
        self.coal.reserve(n, 0, self.edge_hint, 0);
        self.pressure.reserve(n);
        self.colorer.reserve(n, k.clamp(1, MAX_K));
        reserve_total(&mut self.colors, n);
        reserve_total(&mut self.chosen, n);
    }

    /// Allocates `f` with `k` registers; afterwards [`Self::allocation`]
    /// holds the result. Does not allocate after [`Self::reserve`] for
    /// `f` (or after an [`Self::allocate_growing`] of `f`).
    pub fn allocate<F: CfgFunction + ?Sized>(
        &mut self,
        f: &F,
        k: u16,
    ) -> Result<&CfgAllocation, CfgAllocError> {
        self.allocate_inner(f, k)?;
        Ok(&self.out)
    }

    /// Checks `f` completely without allocating registers: the structural
    /// validation, then that every read is dominated by its definition
    /// (the liveness finds a vreg live into the entry block otherwise). A
    /// reader calls it to refuse a malformed function before any work.
    pub fn check_function<F: CfgFunction + ?Sized>(&mut self, f: &F) -> Result<(), CfgAllocError> {
        self.reserve(f, 1);
        self.validator.validate(f).map_err(CfgAllocError::Invalid)?;
        self.prog.load(f);
        self.liveness()?;
        self.dominance()
    }

    /// [`CfgError::NotDominated`] when a vreg is live into the entry.
    fn dominance(&self) -> Result<(), CfgAllocError> {
        match self.live.live_in_of(self.prog.entry as usize).next() {
            Some(g) => {
                let v = VReg(self.live.globals[g as usize]);
                let def = self
                    .validator
                    .def_site(v)
                    .unwrap_or(DefSite::Param(Block(0)));
                Err(CfgAllocError::Invalid(CfgError::NotDominated {
                    vreg: v,
                    def,
                }))
            }
            None => Ok(()),
        }
    }

    /// The last result.
    pub fn allocation(&self) -> &CfgAllocation {
        &self.out
    }

    fn allocate_inner<F: CfgFunction + ?Sized>(
        &mut self,
        f: &F,
        k: u16,
    ) -> Result<(), CfgAllocError> {
        if k == 0 || k > MAX_K {
            return Err(CfgAllocError::BadK { k: k as u32 });
        }
        self.validator.validate(f).map_err(CfgAllocError::Invalid)?;
        self.prog.load(f);
        let mut ccfg = self.config.color;
        ccfg.k = k;
        let mut stats = CfgStats {
            instructions: f.num_insts() as u32,
            ..CfgStats::default()
        };
        let mut tied_done = false;
        loop {
            stats.rounds += 1;
            if stats.rounds > self.config.max_rounds {
                return Err(CfgAllocError::NoConvergence {
                    rounds: self.config.max_rounds,
                });
            }
            // A spill round changes the occurrences of the spilled values
            // only (their temporaries are local to one block), so the
            // live sets of every other value stay as they were: the
            // liveness is computed once, and the walk skips the values
            // that went to slots since.
            if stats.rounds == 1 {
                self.liveness()?;
            }
            if stats.rounds == 1 {
                self.dominance()?;
            }
            if !tied_done {
                tied_done = true;
                // The pressure, and the tied uses that outlive their
                // instruction (each gets a copy, counted in the pressure).
                self.walk.run(&self.prog, &self.live, false)?;
                let n = self.walk.tied_live.len();
                if n > 0 {
                    for x in 0..n {
                        let (i, t) = self.walk.tied_live[x];
                        self.tied_copy(i, t)?;
                    }
                    self.prog.sort_pseudo();
                    self.liveness()?;
                    self.walk.run(&self.prog, &self.live, false)?;
                }
                stats.max_live = self.walk.max_live;
                if stats.max_live > k as u32 {
                    self.pressure.run(&mut self.prog, &self.live, k as u32);
                    stats.spilled += self.pressure.spilled;
                    if self.pressure.spilled > 0 {
                        self.split.rewrite(&mut self.prog, true)?;
                    }
                }
            }
            self.walk.run(&self.prog, &self.live, true)?;
            self.graph
                .build_from_edges_unsorted(&self.prog.lanes, &self.walk.edges, false)
                .map_err(CfgAllocError::Graph)?;
            // Joins: merged freely while this round's program (spill code
            // included) needs at most K registers at every point (the
            // chordal bound then holds without them, and the fallbacks
            // restore it should a spill appear), under the Briggs test
            // above K.
            let within = self.walk.max_live <= k as u32;
            let first = if !self.config.conservative_joins {
                Joins::Off
            } else if within {
                Joins::Free
            } else {
                Joins::Briggs
            };
            let mut uncolored = self.coalesce_and_color(&ccfg, first)?;
            if !self.coal.tied_conflicts.is_empty() {
                let n = self.coal.tied_conflicts.len();
                for x in 0..n {
                    let (i, t) = self.coal.tied_conflicts[x];
                    self.tied_copy(i, t)?;
                }
                self.prog.sort_pseudo();
                self.liveness()?;
                continue;
            }
            // Merges across joins can break the chordal shape that makes
            // a program within K colorable without a spill: recolor with
            // fewer of them then (above K spills are due anyway, and
            // recoloring would double the cost of every spill round).
            for next in [Joins::Briggs, Joins::Off] {
                if uncolored == 0
                    || !within
                    || self.coal.merged_conservative == 0
                    || first == Joins::Off
                    || (next == Joins::Briggs && first != Joins::Free)
                {
                    continue;
                }
                uncolored = self.coalesce_and_color(&ccfg, next)?;
            }
            stats.coalesced = self.coal.merged;
            if uncolored == 0 {
                break;
            }
            self.choose_spills(k)?;
            let n = self.coal.node_root.len();
            for node in 0..n {
                if !self.chosen[node] {
                    continue;
                }
                let root = self.coal.node_root[node];
                let lanes = self.prog.lanes[root as usize];
                let slot = self.prog.new_slot(lanes);
                stats.spilled += 1;
                for m in self.coal.members(root) {
                    match self.prog.kind[m as usize] {
                        ORIG => self.prog.slot[m as usize] = slot,
                        BLOCK_RELOAD => self.prog.kind[m as usize] = DEAD,
                        _ => {}
                    }
                }
            }
            self.split.rewrite(&mut self.prog, false)?;
        }
        self.assemble(f, k, stats)
    }

    fn liveness(&mut self) -> Result<(), CfgAllocError> {
        self.live.compute(&self.prog).map_err(CfgAllocError::Full)
    }

    /// A copy before instruction `i` for its tied pair `t`: the tied use
    /// reads a fresh temporary copied from the value.
    fn tied_copy(&mut self, i: u32, t: u16) -> Result<(), Full> {
        let iu = i as usize;
        let pair = self.prog.tied_of(iu)[t as usize];
        let j = self.prog.op_start[iu] as usize + pair.use_ as usize;
        let u = self.prog.ops[j];
        let tmp = self.prog.new_vreg(TEMP, u)?;
        self.prog.push_pseudo(2 * i, PseudoKind::Copy, tmp, u)?;
        self.prog.ops[j] = tmp;
        Ok(())
    }

    /// Coalesces, builds the class graph and colors it; returns the number
    /// of uncolored nodes.
    fn coalesce_and_color(
        &mut self,
        ccfg: &ColorConfig,
        joins: Joins,
    ) -> Result<u32, CfgAllocError> {
        self.coal.run(
            &self.prog,
            &self.graph,
            &self.walk.param_live,
            ccfg.k,
            joins,
        );
        // The class graph, row by row from the vreg rows (the coalescer's
        // stamps are clear after coalescing; the next run clears them).
        let lanes = core::mem::take(&mut self.coal.node_lanes);
        let bounds = core::mem::take(&mut self.coal.node_bound);
        let (coal, graph) = (&mut self.coal, &self.graph);
        let r = self
            .cgraph
            .build_from_rows(&lanes, &bounds, |v, out| coal.class_row(graph, v, out));
        self.coal.node_lanes = lanes;
        self.coal.node_bound = bounds;
        r.map_err(CfgAllocError::Graph)?;
        let n = self.coal.node_root.len();
        self.colors.clear();
        self.colors.resize(n, NO_COLOR);
        let aff = Affinity {
            start: &self.coal.hint_start,
            partners: &self.coal.hint,
        };
        let st = self
            .colorer
            .color_with_affinity(
                &self.cgraph,
                &self.coal.node_cost,
                &self.coal.node_fixed,
                ccfg,
                Some(aff),
                &mut self.colors,
            )
            .map_err(CfgAllocError::Color)?;
        Ok(st.uncolored)
    }

    /// Marks the nodes to spill (see the module doc).
    #[allow(clippy::needless_range_loop)] // node ids index several columns
    fn choose_spills(&mut self, k: u16) -> Result<(), CfgAllocError> {
        let n = self.colors.len();
        let cost = &self.coal.node_cost;
        self.chosen.clear();
        self.chosen.resize(n, false);
        let mut any = false;
        for v in 0..n {
            if self.colors[v] == NO_COLOR && cost[v].is_finite() {
                self.chosen[v] = true;
                any = true;
            }
        }
        for v in 0..n {
            if self.colors[v] != NO_COLOR || cost[v].is_finite() {
                continue;
            }
            let mut best: Option<(f64, usize)> = None;
            let mut covered = false;
            for &u in self.cgraph.neighbors(v) {
                let u = u as usize;
                if !cost[u].is_finite() {
                    continue;
                }
                if self.chosen[u] {
                    covered = true;
                    continue;
                }
                let per_lane = cost[u] / self.coal.node_lanes[u] as f64;
                if best.map_or(true, |(b, _)| per_lane < b) {
                    best = Some((per_lane, u));
                }
            }
            match best {
                _ if covered => {}
                Some((_, u)) => {
                    self.chosen[u] = true;
                    any = true;
                }
                None => {
                    let root = self.coal.node_root[v];
                    let p = &self.prog;
                    let vn = &self.coal.vnode;
                    let inst = (0..p.num_insts())
                        .find(|&i| {
                            let (s, e) = (p.op_start[i] as usize, p.op_start[i + 1] as usize);
                            p.ops[s..e].iter().any(|&x| vn[x as usize] == v as u32)
                                || p.pseudo.iter().any(|q| {
                                    q.key / 2 == i as u32
                                        && q.kind != PseudoKind::Store
                                        && vn[q.dst as usize] == v as u32
                                })
                        })
                        .unwrap_or(0);
                    return Err(CfgAllocError::Pressure {
                        vreg: VReg(self.prog.origin[root as usize]),
                        inst: CfgInst(inst as u32),
                        k,
                    });
                }
            }
        }
        if any {
            Ok(())
        } else {
            Err(CfgAllocError::NoConvergence {
                rounds: self.config.max_rounds,
            })
        }
    }

    #[inline]
    fn loc(&self, v: u32) -> Location {
        loc_of(&self.prog, &self.coal, &self.colors, v)
    }

    fn push_edit(
        &mut self,
        point: EditPoint,
        from: Location,
        to: Location,
        lanes: u8,
    ) -> Result<(), Full> {
        if from == to {
            return Ok(());
        }
        if self.out.edits.len() >= self.out.edits.capacity() {
            return Err(Full {
                what: "edits",
                needed: self.out.edits.len() as u64 + 1,
                capacity: self.out.edits.capacity() as u64,
            });
        }
        self.out.edits.push(Edit {
            point,
            from,
            to,
            lanes,
        });
        Ok(())
    }

    /// Locations, edits and figures.
    fn assemble<F: CfgFunction + ?Sized>(
        &mut self,
        f: &F,
        k: u16,
        mut stats: CfgStats,
    ) -> Result<(), CfgAllocError> {
        let p = &self.prog;
        self.out.k = k;
        self.out.op_start.clear();
        self.out.op_start.extend_from_slice(&p.op_start);
        self.out.n_use.clear();
        self.out.n_use.extend_from_slice(&p.n_use);
        self.out.op_locs.clear();
        for j in 0..self.prog.ops.len() {
            let l = self.loc(self.prog.ops[j]);
            self.out.op_locs.push(l);
        }
        self.out.param_start.clear();
        self.out
            .param_start
            .extend_from_slice(&self.prog.param_start);
        self.out.param_locs.clear();
        for j in 0..self.prog.param.len() {
            let l = self.loc(self.prog.param[j]);
            self.out.param_locs.push(l);
        }
        self.out.edits.clear();
        let mut scratch = ScratchSlots::default();
        let mut slot_top = self.prog.slot_top;
        let words = (k as usize).div_ceil(64);
        for b in 0..self.prog.num_blocks() {
            let (ps, pe) = self.prog.pseudo_range(b);
            for x in ps..pe {
                let q = self.prog.pseudo[x];
                let i = CfgInst(q.key / 2);
                let point = if q.key % 2 == 0 {
                    EditPoint::Before(i)
                } else {
                    EditPoint::After(i)
                };
                let (from, to, lanes) = match q.kind {
                    PseudoKind::Reload => (
                        Location::slot(q.src),
                        self.loc(q.dst),
                        self.prog.lanes[q.dst as usize],
                    ),
                    PseudoKind::Store => (
                        self.loc(q.src),
                        Location::slot(q.dst),
                        self.prog.lanes[q.src as usize],
                    ),
                    PseudoKind::Copy => (
                        self.loc(q.src),
                        self.loc(q.dst),
                        self.prog.lanes[q.src as usize],
                    ),
                };
                self.push_edit(point, from, to, lanes)?;
            }
            let (s0, s1) = (
                self.prog.succ_start[b] as usize,
                self.prog.succ_start[b + 1] as usize,
            );
            for e in s0..s1 {
                let sb = self.prog.succ[e] as usize;
                // Free register lanes across the edge.
                self.free.clear();
                for w in 0..words {
                    let lo = w * 64;
                    self.free.push(if k as usize >= lo + 64 {
                        u64::MAX
                    } else {
                        (1u64 << (k as usize - lo)) - 1
                    });
                }
                for g in self.live.live_in_of(sb) {
                    let v = self.live.globals[g as usize];
                    let l = loc_of(&self.prog, &self.coal, &self.colors, v);
                    occupy(&mut self.free, l, self.prog.lanes[v as usize]);
                }
                let (a0, a1) = (
                    self.prog.arg_start[e] as usize,
                    self.prog.arg_start[e + 1] as usize,
                );
                let pstart = self.prog.param_start[sb] as usize;
                if !self.pcopy.has_room(2 * (a1 - a0)) {
                    return Err(CfgAllocError::Full(Full {
                        what: "edge copy",
                        needed: 2 * (a1 - a0) as u64,
                        capacity: 0,
                    }));
                }
                for j in 0..a1 - a0 {
                    let a = self.prog.arg[a0 + j];
                    let q = self.prog.param[pstart + j];
                    let lanes = self.prog.lanes[q as usize];
                    let (la, lq) = (self.loc(a), self.loc(q));
                    occupy(&mut self.free, la, lanes);
                    occupy(&mut self.free, lq, lanes);
                    let live = !self.prog.in_reg(q) || self.walk.param_live[pstart + j];
                    if live {
                        for l in 0..lanes as u32 {
                            self.pcopy.push(la.plus(l), lq.plus(l));
                        }
                    }
                }
                let point = EditPoint::Edge {
                    from: Block(b as u32),
                    succ: (e - s0) as u32,
                };
                let mut pc = core::mem::take(&mut self.pcopy);
                let mut free = core::mem::take(&mut self.free);
                let edits = &mut self.out.edits;
                let r = pc.sequence(&mut free, &mut scratch, &mut slot_top, &mut |from, to| {
                    if edits.len() >= edits.capacity() {
                        return Err(Full {
                            what: "edits",
                            needed: edits.len() as u64 + 1,
                            capacity: edits.capacity() as u64,
                        });
                    }
                    edits.push(Edit {
                        point,
                        from,
                        to,
                        lanes: 1,
                    });
                    Ok(())
                });
                self.pcopy = pc;
                self.free = free;
                r?;
            }
        }
        self.out.slot_lanes = slot_top;
        stats.slot_lanes = slot_top;
        // Figures.
        let p = &self.prog;
        for ed in &self.out.edits {
            let b = match ed.point {
                EditPoint::Before(i) | EditPoint::After(i) => p.block_of[i.index()] as usize,
                EditPoint::Edge { from, succ } => {
                    let s = p.succs(from.index())[succ as usize] as usize;
                    if p.preds(s).len() == 1 {
                        s
                    } else {
                        from.index()
                    }
                }
            };
            match ed.kind() {
                EditKind::Spill => stats.spills += 1,
                EditKind::Reload => stats.reloads += 1,
                _ => stats.moves_inserted += 1,
            }
            stats.weighted_cost += p.block_weight(b);
        }
        for i in 0..p.num_insts() {
            if p.is_move[i] {
                let s = self.out.op_start[i] as usize;
                if self.out.op_locs[s] != self.out.op_locs[s + 1] {
                    stats.moves_kept += 1;
                    stats.weighted_cost += p.block_weight(p.block_of[i] as usize);
                }
            }
        }
        let _ = f;
        self.out.stats = stats;
        Ok(())
    }

    /// Allocates `f` and checks the result with `checker`: the checked
    /// allocation, an allocation error, or the checker's finding.
    pub fn allocate_checked<F: CfgFunction + ?Sized>(
        &mut self,
        f: &F,
        k: u16,
        checker: &mut CfgChecker,
    ) -> Result<&CfgAllocation, CheckedError> {
        self.allocate_growing(f, k).map_err(CheckedError::Alloc)?;
        checker.check(f, &self.out).map_err(CheckedError::Check)?;
        Ok(&self.out)
    }
}

/// Where `v` is: its slot, or its class's register.
#[inline]
fn loc_of(p: &Program, coal: &Coalescer, colors: &[u16], v: u32) -> Location {
    let s = p.slot[v as usize];
    if s != NONE {
        return Location::slot(s);
    }
    let node = coal.vnode[v as usize];
    let c = if node == NONE {
        0
    } else {
        colors[node as usize]
    };
    Location::reg(c as u32)
}

/// Clears the lanes of `l` (a register) in `free`.
fn occupy(free: &mut [u64], l: Location, lanes: u8) {
    if let Some(r) = l.as_reg() {
        for x in r..r + lanes as u32 {
            if let Some(wd) = free.get_mut(x as usize / 64) {
                *wd &= !(1u64 << (x % 64));
            }
        }
    }
}

/// An allocation error or a checker finding.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum CheckedError {
    /// The allocator failed.
    Alloc(CfgAllocError),
    /// The checker rejected the output.
    Check(CheckError),
}

impl fmt::Display for CheckedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckedError::Alloc(e) => fmt::Display::fmt(e, f),
            CheckedError::Check(e) => write!(f, "the checker rejected the allocation: {e}"),
        }
    }
}

impl core::error::Error for CheckedError {}
