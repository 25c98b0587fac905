//! Coalescing over the vreg interference graph: union-find classes that
//! take one register (or one slot) each, then the class graph the colorer
//! runs on, its spill costs and its copy affinities.
//!
//! Order and tests:
//! 1. **Tied pairs** first: the def joins its use's class (the use dies at
//!    the instruction once a tied use that outlives it got its copy, so the
//!    two never interfere; a conflict with an earlier merge is reported and
//!    the caller inserts a copy).
//! 2. **Moves and edges into one-predecessor blocks**, heaviest
//!    (10^depth) first, with the interference test only. Each such merge
//!    joins two ranges that touch at one program point whose dominator-tree
//!    parent is the other's (a move's early and late points; a lone
//!    predecessor's end and its successor's entry): every class stays a
//!    connected subtree of the dominator tree of points, so the class graph
//!    stays a subgraph of a chordal graph whose cliques are the pressure at
//!    a point. Simplify therefore never blocks when MaxLive ≤ K, and these
//!    merges cannot cost a spill.
//! 3. **Edges into joins**, heaviest first. Such a merge joins ranges that
//!    meet across a join, which can break chordality, so how they merge
//!    depends on the function ([`Joins`]): while MaxLive ≤ K, whenever the
//!    classes do not interfere (the caller recolors with the Briggs test,
//!    then without join merges, should a spill appear); above K, under the
//!    lane-weighted Briggs test: the merged class may have fewer than K
//!    lanes of significant neighbours (a neighbour is significant when its
//!    lane-weighted degree, bounded above by the sum over its members, is at
//!    least K).
//!
//! Every candidate not merged becomes an affinity of the colorer (select
//! prefers a partner's color), so an uncoalesced copy still often gets one
//! register. A class-interference test walks the smaller class's rows and
//! gives up (refuses the merge) past [`TEST_BUDGET`] neighbours, which
//! bounds the time on giant classes.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use crate::reg::reserve_total;
use alloc::vec::Vec;

use super::program::{Program, BLOCK_RELOAD, NONE, TEMP};
use crate::reg::graph::InterferenceGraph;

/// How edges into joins are coalesced.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Joins {
    /// Not at all: they only become affinities.
    Off,
    /// Under the lane-weighted Briggs test.
    Briggs,
    /// Whenever the classes do not interfere (for functions whose MaxLive
    /// is within K, where the caller falls back to `Briggs`, then `Off`,
    /// should a spill appear).
    Free,
}

/// Neighbour visits one class-interference or Briggs test may make.
pub const TEST_BUDGET: u32 = 1 << 11;
/// Neighbour visits one Briggs test may make (it touches both classes and
/// every neighbour's root, so it is kept tighter).
pub const BRIGGS_BUDGET: u32 = 1 << 8;

#[derive(Copy, Clone, Debug)]
struct Cand {
    weight: f64,
    a: u32,
    b: u32,
    conservative: bool,
}

/// The coalescer's workspace and results.
#[derive(Clone, Debug, Default)]
pub(crate) struct Coalescer {
    parent: Vec<u32>,
    next: Vec<u32>,
    size: Vec<u32>,
    cdeg: Vec<u32>,
    stamp: Vec<u32>,
    now: u32,
    cands: Vec<Cand>,
    /// Per vreg its class's node, [`NONE`] when not in a register.
    pub vnode: Vec<u32>,
    /// Per node a member (the class root).
    pub node_root: Vec<u32>,
    pub node_lanes: Vec<u8>,
    pub node_cost: Vec<f64>,
    pub node_fixed: Vec<u16>,
    /// Per node the sum of its members' degrees (a bound on its row).
    pub node_bound: Vec<u32>,
    /// Affinity CSR over nodes.
    pub hint_start: Vec<u32>,
    pub hint: Vec<u32>,
    hint_pairs: Vec<(u32, u32)>,
    vcost: Vec<f64>,
    vuses: Vec<u32>,
    /// Tied pairs whose classes interfere: `(instruction, tied index)`.
    pub tied_conflicts: Vec<(u32, u16)>,
    /// Copies and edge arguments merged (moves, edges), conservative merges.
    pub merged: u32,
    pub merged_conservative: u32,
}

impl Coalescer {
    /// Reserves for `vregs` vregs, `cands` candidates, `edges` graph edges
    /// and `tied` tied pairs.
    pub fn reserve(&mut self, vregs: usize, cands: usize, edges: usize, tied: usize) {
        reserve_totals!(vregs;
            self.parent, self.next, self.size, self.cdeg, self.stamp, self.vnode, self.node_root,
            self.vuses, self.node_lanes, self.node_cost, self.vcost, self.node_fixed, self.node_bound);
        reserve_total(&mut self.hint_start, vregs + 1);
        reserve_totals!(cands; self.cands, self.hint_pairs);
        reserve_total(&mut self.hint, 2 * cands);
        let _ = edges;
        reserve_total(&mut self.tied_conflicts, tied);
    }

    #[inline]
    pub fn find(&mut self, mut v: u32) -> u32 {
        while self.parent[v as usize] != v {
            let p = self.parent[v as usize];
            self.parent[v as usize] = self.parent[p as usize];
            v = p;
        }
        v
    }

    /// True when the classes of roots `ra` and `rb` interfere (or the test
    /// ran out of budget).
    fn interfere(&mut self, g: &InterferenceGraph, ra: u32, rb: u32, mut budget: u32) -> bool {
        let (small, other) = if self.size[ra as usize] <= self.size[rb as usize] {
            (ra, rb)
        } else {
            (rb, ra)
        };
        // Out of budget counts as interfering.
        self.walk_class(g, small, &mut budget, |c, n| c.find(n) == other)
            .unwrap_or(true)
    }

    /// Calls `visit` on every neighbour of every member of the class of
    /// root `root`, member by member, charging each member's row to
    /// `budget` before visiting it. Stops when `visit` returns true
    /// (`Some(true)`) or a row costs more than the budget has left (`None`);
    /// `Some(false)` when every row was visited.
    fn walk_class(
        &mut self,
        g: &InterferenceGraph,
        root: u32,
        budget: &mut u32,
        mut visit: impl FnMut(&mut Self, u32) -> bool,
    ) -> Option<bool> {
        let mut m = root;
        loop {
            let row = g.neighbors(m as usize);
            if row.len() as u32 > *budget {
                return None;
            }
            *budget -= row.len() as u32;
            for &n in row {
                if visit(self, n) {
                    return Some(true);
                }
            }
            m = self.next[m as usize];
            if m == root {
                return Some(false);
            }
        }
    }

    /// The lane-weighted Briggs test for merging roots `ra` and `rb`.
    fn briggs(&mut self, g: &InterferenceGraph, p: &Program, ra: u32, rb: u32, k: u32) -> bool {
        self.now = self.now.wrapping_add(1);
        if self.now == 0 {
            for s in self.stamp.iter_mut() {
                *s = 0;
            }
            self.now = 1;
        }
        let lanes = p.lanes[ra as usize];
        // Fewer lanes of neighbours in all than K: no need to look closer.
        let all = self.cdeg[ra as usize].saturating_add(self.cdeg[rb as usize]);
        if (lanes == 1 && all < k) || (lanes == 2 && all < k / 2) {
            return true;
        }
        let mut significant = 0u32;
        let mut budget = BRIGGS_BUDGET;
        for root in [ra, rb] {
            let walked = self.walk_class(g, root, &mut budget, |c, n| {
                let r = c.find(n);
                if c.stamp[r as usize] != c.now {
                    c.stamp[r as usize] = c.now;
                    if c.cdeg[r as usize] >= k {
                        significant += if lanes == 2 {
                            1
                        } else {
                            p.lanes[r as usize] as u32
                        };
                    }
                }
                false
            });
            // Out of budget: refuse the merge.
            if walked.is_none() {
                return false;
            }
        }
        if lanes == 2 {
            significant < k / 2
        } else {
            significant < k
        }
    }

    fn union(&mut self, ra: u32, rb: u32) {
        let (big, small) = if self.size[ra as usize] >= self.size[rb as usize] {
            (ra, rb)
        } else {
            (rb, ra)
        };
        self.parent[small as usize] = big;
        self.next.swap(big as usize, small as usize);
        self.size[big as usize] += self.size[small as usize];
        self.cdeg[big as usize] = self.cdeg[big as usize].saturating_add(self.cdeg[small as usize]);
    }

    /// Merges the classes of `a` and `b` unless they interfere (or the
    /// test would visit more than `budget` neighbours).
    fn merge(&mut self, g: &InterferenceGraph, a: u32, b: u32, budget: u32) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return true;
        }
        if self.interfere(g, ra, rb, budget) {
            return false;
        }
        self.union(ra, rb);
        true
    }

    /// Coalesces `p` over its vreg graph `g` (see the module doc), edges
    /// into joins as `joins` says.
    pub fn run(
        &mut self,
        p: &Program,
        g: &InterferenceGraph,
        param_live: &[bool],
        k: u16,
        joins: Joins,
    ) {
        let nv = p.nv();
        let k32 = k as u32;
        self.parent.clear();
        self.next.clear();
        self.size.clear();
        self.cdeg.clear();
        for v in 0..nv as u32 {
            self.parent.push(v);
            self.next.push(v);
            self.size.push(1);
            self.cdeg
                .push((g.degree(v as usize) + g.degree2(v as usize)) as u32);
        }
        self.stamp.clear();
        self.stamp.resize(nv, 0);
        self.now = 0;
        self.tied_conflicts.clear();
        self.merged = 0;
        self.merged_conservative = 0;
        for i in 0..p.num_insts() {
            for (t, pair) in p.tied_of(i).iter().enumerate() {
                let d = p.defs(i)[pair.def as usize];
                let u = p.uses(i)[pair.use_ as usize];
                // A constraint, not a saving: tested in full, whatever the
                // rows' length.
                if !self.merge(g, u, d, u32::MAX)
                    && self.tied_conflicts.len() < self.tied_conflicts.capacity()
                {
                    self.tied_conflicts.push((i as u32, t as u16));
                }
            }
        }
        self.cands.clear();
        for b in 0..p.num_blocks() {
            let w = p.block_weight(b);
            for i in p.block_start[b] as usize..p.block_end[b] as usize {
                if p.is_move[i] {
                    let (s, d) = (p.uses(i)[0], p.defs(i)[0]);
                    if p.in_reg(s) && p.in_reg(d) && self.cands.len() < self.cands.capacity() {
                        self.cands.push(Cand {
                            weight: w,
                            a: s,
                            b: d,
                            conservative: false,
                        });
                    }
                }
            }
            for (kk, &sb) in p.succs(b).iter().enumerate() {
                let e = p.succ_start[b] as usize + kk;
                let sb = sb as usize;
                let join = p.preds(sb).len() > 1;
                let w = if join { w } else { p.block_weight(sb) };
                let ps = p.param_start[sb] as usize;
                for (j, (&a, &q)) in p.args(e).iter().zip(p.params(sb)).enumerate() {
                    if a != q
                        && p.in_reg(a)
                        && p.in_reg(q)
                        && param_live[ps + j]
                        && self.cands.len() < self.cands.capacity()
                    {
                        self.cands.push(Cand {
                            weight: w,
                            a,
                            b: q,
                            conservative: join,
                        });
                    }
                }
            }
        }
        // Heaviest first; ties in program order (the sort key includes it).
        let mut order = core::mem::take(&mut self.cands);
        for (n, c) in order.iter_mut().enumerate() {
            // Fold the position into the weight's low bits so the unstable
            // sort is deterministic: weights are powers of ten, far apart.
            c.weight -= n as f64 * f64::EPSILON * c.weight;
        }
        order.sort_unstable_by(|x, y| y.weight.total_cmp(&x.weight));
        self.hint_pairs.clear();
        for pass in [false, true] {
            for c in order.iter() {
                if c.conservative != pass {
                    continue;
                }
                let ok = if !c.conservative {
                    self.merge(g, c.a, c.b, TEST_BUDGET)
                } else if joins != Joins::Off {
                    let (ra, rb) = (self.find(c.a), self.find(c.b));
                    if ra == rb {
                        true
                    } else if !self.interfere(g, ra, rb, TEST_BUDGET)
                        && (joins == Joins::Free || self.briggs(g, p, ra, rb, k32))
                    {
                        self.union(ra, rb);
                        self.merged_conservative += 1;
                        true
                    } else {
                        false
                    }
                } else {
                    false
                };
                if ok {
                    self.merged += 1;
                } else if self.hint_pairs.len() < self.hint_pairs.capacity() {
                    self.hint_pairs.push((c.a, c.b));
                }
            }
        }
        self.cands = order;
        self.build_nodes(p, g);
    }

    /// Nodes, the class graph, costs and affinities.
    fn build_nodes(&mut self, p: &Program, g: &InterferenceGraph) {
        let nv = p.nv();
        self.vnode.clear();
        self.vnode.resize(nv, NONE);
        self.node_root.clear();
        self.node_lanes.clear();
        for v in 0..nv as u32 {
            if p.in_reg(v) && self.find(v) == v {
                self.vnode[v as usize] = self.node_root.len() as u32;
                self.node_root.push(v);
                self.node_lanes.push(p.lanes[v as usize]);
            }
        }
        for v in 0..nv as u32 {
            if p.in_reg(v) {
                let r = self.find(v);
                self.vnode[v as usize] = self.vnode[r as usize];
            }
        }
        let n = self.node_root.len();
        self.node_bound.clear();
        self.node_bound.resize(n, 0);
        for v in 0..nv {
            let a = self.vnode[v];
            if a != NONE {
                self.node_bound[a as usize] += g.degree(v) as u32;
            }
        }
        // Costs: every access weighted by 10^depth and lanes.
        p.access_costs(&mut self.vcost, &mut self.vuses);
        self.node_cost.clear();
        self.node_cost.resize(n, 0.0);
        self.node_fixed.clear();
        self.node_fixed
            .resize(n, crate::reg::chaitin_briggs::NO_COLOR);
        // Which nodes have a spillable member.
        for s in self.stamp.iter_mut() {
            *s = 0;
        }
        for v in 0..nv {
            let node = self.vnode[v];
            if node == NONE {
                continue;
            }
            let kind = p.kind[v];
            let spillable = match kind {
                TEMP => false,
                BLOCK_RELOAD => self.vuses[v] >= 2,
                _ => true,
            };
            if !spillable {
                continue;
            }
            let c = if kind == BLOCK_RELOAD {
                self.vcost[v] * (self.vuses[v] - 1) as f64 / self.vuses[v] as f64
            } else {
                self.vcost[v]
            };
            self.node_cost[node as usize] += c * p.lanes[v] as f64;
            self.stamp[node as usize] = 1;
        }
        for node in 0..n {
            if self.stamp[node] == 0 {
                self.node_cost[node] = f64::INFINITY;
            } else if self.node_cost[node] <= 0.0 {
                // A spillable class without accesses (a value passed
                // through): the cheapest to spill, still positive.
                self.node_cost[node] = 1e-3;
            }
        }
        // Affinities in CSR.
        self.hint_start.clear();
        self.hint_start.resize(n + 1, 0);
        for &(a, b) in &self.hint_pairs {
            let (x, y) = (self.vnode[a as usize], self.vnode[b as usize]);
            if x != NONE && y != NONE && x != y {
                self.hint_start[x as usize + 1] += 1;
                self.hint_start[y as usize + 1] += 1;
            }
        }
        for i in 0..n {
            self.hint_start[i + 1] += self.hint_start[i];
        }
        self.hint.clear();
        self.hint.resize(self.hint_start[n] as usize, 0);
        // Fill with `stamp` as the per-node cursor.
        for node in 0..n {
            self.stamp[node] = self.hint_start[node];
        }
        for &(a, b) in &self.hint_pairs {
            let (x, y) = (self.vnode[a as usize], self.vnode[b as usize]);
            if x != NONE && y != NONE && x != y {
                self.hint[self.stamp[x as usize] as usize] = y;
                self.stamp[x as usize] += 1;
                self.hint[self.stamp[y as usize] as usize] = x;
                self.stamp[y as usize] += 1;
            }
        }
        for s in self.stamp.iter_mut() {
            *s = 0;
        }
    }

    /// Writes the class-graph row of `node` into `out` (the neighbour
    /// classes of its members, each once) and returns its length. `stamp`
    /// marks the classes already written (`node + 1`), so the rows of all
    /// nodes are built in one pass over the vreg rows.
    pub fn class_row(&mut self, g: &InterferenceGraph, node: usize, out: &mut [u32]) -> usize {
        let root = self.node_root[node];
        let mark = node as u32 + 1;
        let mut len = 0;
        let mut m = root;
        loop {
            for &u in g.neighbors(m as usize) {
                let c = self.vnode[u as usize];
                if c != NONE && c as usize != node && self.stamp[c as usize] != mark {
                    self.stamp[c as usize] = mark;
                    out[len] = c;
                    len += 1;
                }
            }
            m = self.next[m as usize];
            if m == root {
                return len;
            }
        }
    }

    /// Members of the class of root `r`, in no order.
    pub fn members(&self, r: u32) -> Members<'_> {
        Members {
            next: &self.next,
            first: r,
            cur: Some(r),
        }
    }
}

/// Iterator over a class's members.
#[derive(Debug)]
pub(crate) struct Members<'a> {
    next: &'a [u32],
    first: u32,
    cur: Option<u32>,
}

impl Iterator for Members<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        let c = self.cur?;
        let n = self.next[c as usize];
        self.cur = if n == self.first { None } else { Some(n) };
        Some(c)
    }
}
