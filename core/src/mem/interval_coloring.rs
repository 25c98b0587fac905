//! The graph-coloring memory allocator (GCA): an interference graph over
//! one space's buffers, a best-of-N sweep of placement orders, then an
//! iterated-greedy improvement of the best order.
//!
//! The reference's colorer body is out of the seed's scope; this is our
//! design. A "color" is a 2-D address: each buffer, taken in some order, goes
//! to the lowest feasible offset (over its legal base partitions) that its
//! already placed neighbours leave free, which is first-fit coloring of an
//! interval graph with weighted colors.
//!
//! # Interference
//! Two buffers interfere when their lifetimes share an instant. The graph
//! is never stored: an interval index ([`OverlapIndex`], linear storage at
//! any density) lists the buffers that overlap one buffer in O((1 + d) log n)
//! for d overlaps, and gives degrees by binary search. So the storage stays
//! a few words per buffer however many buffers are live at once, and a
//! replay costs O(n log n) plus the overlaps it visits. On a linear
//! problem a replay asks an [`Occupancy`] tree for each lowest offset
//! instead (the same answers, without visiting the overlaps one by one);
//! the work bound below still counts the overlaps, so the number of
//! replays, and the result, do not depend on which one runs.
//!
//! # Orders
//! Sweep `k` of `N` takes, in turn: size (largest first), area (size ×
//! partitions), conflict degree, start, end (latest first), then seeded
//! random tie-breaks of the size order. Every order keeps pins first.
//!
//! # Improvement
//! Squeaky-wheel optimization: after each replay, every buffer that ends
//! above a blame level (three quarters of the way from the lower bound to the
//! best peak so far) has its priority raised by how far above it ends, and
//! the next replay takes buffers by priority. Buffers that keep landing high
//! move forward until they find room low. It stops at the lower bound or
//! after `improve` replays.
//!
//! # Work bound
//! One replay costs O(Σ d log d) over the degrees d. The sweep and replay
//! counts are cut so that their total stays under `work` neighbour visits,
//! which keeps huge modules linear in practice (documented in
//! [`GcaOptions::work`]).

use alloc::vec::Vec;

use super::greedy::{GreedyRule, GreedyWorkspace};
use super::occupancy::Occupancy;
use super::overlap::OverlapIndex;
use super::problem::{align_offset, peak, Buffer, Obstacle, Placement, Problem, Timeline};

/// Tuning of the colorer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GcaOptions {
    /// Placement orders tried (the N of best-of-N), at least 1.
    pub sweeps: u32,
    /// Seed of the random tie-breaks.
    pub seed: u64,
    /// Most improvement replays of the best order.
    pub improve: u32,
    /// Budget of neighbour visits over all sweeps and replays; the counts
    /// above are reduced so that `replays × edges` stays under it (but at
    /// least one sweep always runs).
    pub work: u64,
}

impl Default for GcaOptions {
    fn default() -> Self {
        GcaOptions {
            sweeps: 16,
            seed: 0x7u64 << 32 | 0x5eed,
            improve: 400,
            work: 200_000_000,
        }
    }
}

/// Which rule produced an order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OrderRule {
    /// Largest size first.
    Size,
    /// Largest size × partitions first.
    Area,
    /// Highest conflict degree first.
    Degree,
    /// Earliest start first.
    Start,
    /// Latest end first.
    End,
    /// Size order with seeded random tie-breaks (the seed index).
    Random(u32),
    /// No interference graph: it did not fit the storage budget, and the
    /// greedy-by-size rule (linear storage) placed the buffers.
    GreedyFallback,
}

impl core::fmt::Display for OrderRule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OrderRule::Size => f.write_str("size"),
            OrderRule::Area => f.write_str("area"),
            OrderRule::Degree => f.write_str("degree"),
            OrderRule::Start => f.write_str("start"),
            OrderRule::End => f.write_str("end"),
            OrderRule::Random(k) => write!(f, "random#{k}"),
            OrderRule::GreedyFallback => f.write_str("greedy-size (no graph: storage budget)"),
        }
    }
}

/// What a run found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GcaOutcome {
    /// Peak of the best placement (bytes per partition).
    pub peak: u64,
    /// Lower bound of the problem.
    pub lower_bound: u64,
    /// The order rule the best placement descends from.
    pub best_rule: OrderRule,
    /// Orders swept.
    pub sweeps: u32,
    /// Improvement replays run.
    pub replays: u32,
    /// Interfering pairs (edges of the interference graph, which is not
    /// stored).
    pub edges: u64,
}

impl GcaOutcome {
    /// True when the peak fits the problem's capacity.
    pub fn fits(&self, capacity: u64) -> bool {
        self.peak <= capacity
    }
}

/// Reusable storage of the colorer.
#[derive(Debug, Default)]
pub struct GcaWorkspace {
    index: OverlapIndex,
    order: Vec<u32>,
    best_order: Vec<u32>,
    keys: Vec<u64>,
    /// Sort scratch of [`GcaWorkspace::sort_order`]: one packed key per
    /// buffer.
    packed: Vec<u128>,
    placed: Vec<bool>,
    near: Vec<Obstacle>,
    current: Vec<Placement>,
    timeline: Timeline,
    /// The linear-storage fallback when the graph does not fit the budget.
    greedy: GreedyWorkspace,
    /// The placed ranges over time a replay on a linear problem asks for
    /// each lowest offset instead of walking the placed neighbours (same
    /// answers; see [`GcaWorkspace::reserve_occupancy_within`]).
    occupancy: Occupancy,
}

/// What [`GcaWorkspace::reserve_within`] did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphReservation {
    /// Interfering pairs of the problem (plus the headroom).
    pub edges: u64,
    /// Heap bytes the interval index needs (linear in the buffers).
    pub needed: u64,
    /// True when even the index did not fit: [`GcaWorkspace::solve`] places
    /// by the greedy-by-size rule instead.
    pub refused: bool,
}

impl GcaWorkspace {
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts the interfering pairs of `problem` (O(n log n), linear
    /// storage: it builds the interval index).
    pub fn count_edges(&mut self, problem: &Problem) -> u64 {
        self.index.reserve(problem.len());
        self.index.build(problem);
        self.index.pairs(problem)
    }

    /// Reserves every list for `problem` with `headroom` extra buffers, so
    /// that later runs on problems up to that size do not allocate. No
    /// storage budget. (`headroom_edges` is kept for callers that size a
    /// graph: the colorer stores none.)
    pub fn reserve_for(&mut self, problem: &Problem, headroom: usize, headroom_edges: u64) {
        self.reserve_within(problem, headroom, headroom_edges, u64::MAX);
        self.reserve_occupancy_within(problem, headroom, u64::MAX);
    }

    /// Reserves the occupancy tree the replays of a linear problem (and
    /// `headroom` more buffers) read instead of walking the neighbours,
    /// when it fits `allowance` heap bytes; returns the bytes added (none
    /// for a partitioned problem). Optional: without it the replays walk
    /// and place the same, so a storage budget's plan
    /// ([`reserve_within`](Self::reserve_within)) leaves it out and a
    /// caller with room to spare asks for it.
    pub fn reserve_occupancy_within(
        &mut self,
        problem: &Problem,
        headroom: usize,
        allowance: u64,
    ) -> u64 {
        let n = problem.len() + headroom;
        if problem.is_partitioned() || Occupancy::bytes_for(n) > allowance {
            return 0;
        }
        let before = self.occupancy.heap_bytes();
        self.occupancy.reserve(n);
        self.occupancy.heap_bytes().saturating_sub(before)
    }

    /// [`Self::reserve_for`] within `allowance` heap bytes for the
    /// interference structure. It is linear in the buffers, so it fits any
    /// allowance a caller gives a problem's own storage; when it does not,
    /// none is reserved and [`Self::solve`] falls back to the greedy-by-size
    /// rule.
    pub fn reserve_within(
        &mut self,
        problem: &Problem,
        headroom: usize,
        headroom_edges: u64,
        allowance: u64,
    ) -> GraphReservation {
        let n = problem.len() + headroom;
        crate::storage::grow(&mut self.packed, n);
        let needed = OverlapIndex::bytes_for(n);
        let refused = needed > allowance;
        let e = if refused {
            0
        } else {
            self.count_edges(problem).saturating_add(headroom_edges)
        };
        let grow = |v: &mut Vec<u32>, k: usize| crate::storage::grow(v, k);
        // The workspace serves every space: what one problem was refused
        // does not shrink what another was granted. A problem the reserved
        // index cannot hold is placed greedily (see `solve`).
        if refused {
            self.greedy.reserve(n);
        } else {
            self.index.reserve(n);
        }
        grow(&mut self.order, n);
        grow(&mut self.best_order, n);
        crate::storage::grow(&mut self.keys, n);
        crate::storage::grow(&mut self.placed, n);
        crate::storage::grow(&mut self.near, n);
        crate::storage::grow(&mut self.current, n);
        self.timeline.reserve(n);
        GraphReservation {
            edges: e,
            needed,
            refused,
        }
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.best_order,
            self.keys,
            self.packed,
            self.placed,
            self.near,
            self.current,
            self.timeline,
            self.greedy,
            self.index,
            self.occupancy
        )
    }

    /// Places every buffer of `problem` into `out` (indexed like the
    /// buffers) and returns what it found. Pins keep their placement.
    pub fn solve(
        &mut self,
        problem: &Problem,
        opts: &GcaOptions,
        out: &mut [Placement],
    ) -> GcaOutcome {
        let bufs = problem.buffers();
        let n = bufs.len();
        if !self.index.holds(n) {
            let lower_bound = problem.lower_bound(&mut self.timeline).bytes;
            let pk = self.greedy.place(problem, GreedyRule::BySize, out);
            return GcaOutcome {
                peak: pk,
                lower_bound,
                best_rule: OrderRule::GreedyFallback,
                sweeps: 0,
                replays: 0,
                edges: 0,
            };
        }
        self.index.build(problem);
        // Linear problems, when reserved, replay on the occupancy tree.
        let tree = self.occupancy.build(problem);
        let edges = self.index.pairs(problem);
        let lower_bound = problem.lower_bound(&mut self.timeline).bytes;
        self.current.clear();
        self.current.resize(n, Placement::default());
        self.placed.clear();
        self.placed.resize(n, false);
        let replay_cost = (2 * edges + n as u64).max(1);
        let max_replays = (opts.work / replay_cost).max(1);
        let sweeps = (opts.sweeps.max(1) as u64).min(max_replays) as u32;
        let improve = (opts.improve as u64).min(max_replays.saturating_sub(sweeps as u64)) as u32;

        let mut best_peak = u64::MAX;
        let mut best_rule = OrderRule::Size;
        let mut swept = 0;
        for k in 0..sweeps {
            let rule = match k {
                0 => OrderRule::Size,
                1 => OrderRule::Area,
                2 => OrderRule::Degree,
                3 => OrderRule::Start,
                4 => OrderRule::End,
                r => OrderRule::Random(r - 4),
            };
            self.make_order(problem, rule, opts.seed);
            let pk = self.replay(problem, tree);
            swept += 1;
            if pk < best_peak {
                best_peak = pk;
                best_rule = rule;
                out.copy_from_slice(&self.current);
                self.best_order.clear();
                self.best_order.extend_from_slice(&self.order);
            }
            if best_peak <= lower_bound {
                break;
            }
        }

        // Squeaky-wheel improvement: every buffer that ends above the lower
        // bound is blamed by how far above it ends, and its priority grows by
        // the blame; the next replay takes buffers by priority. Buffers that
        // keep landing high move forward until they find room low.
        let mut replays = 0;
        if improve > 0 && best_peak > lower_bound {
            self.keys.clear();
            self.keys.extend(
                bufs.iter()
                    .map(|b| b.size.saturating_mul(b.partitions as u64)),
            );
            let mut blame_base = lower_bound;
            while replays < improve && best_peak > lower_bound {
                replays += 1;
                for (v, b) in bufs.iter().enumerate() {
                    if b.pin.is_some() || b.is_void() {
                        continue;
                    }
                    let top = self.current[v].offset + b.size;
                    if top > blame_base {
                        self.keys[v] = self.keys[v].saturating_add(top - blame_base);
                    }
                }
                self.sort_order(bufs, false);
                let pk = self.replay(problem, tree);
                if pk < best_peak {
                    best_peak = pk;
                    out.copy_from_slice(&self.current);
                    self.best_order.clear();
                    self.best_order.extend_from_slice(&self.order);
                }
                // Blame relative to a level between the bound and the best
                // so far, so that blame keeps flowing on plateaus.
                blame_base = lower_bound + (best_peak - lower_bound.min(best_peak)) * 3 / 4;
            }
        }
        GcaOutcome {
            peak: peak(problem, out),
            lower_bound,
            best_rule,
            sweeps: swept,
            replays,
            edges,
        }
    }

    fn make_order(&mut self, p: &Problem, rule: OrderRule, seed: u64) {
        let bufs = p.buffers();
        let n = bufs.len();
        self.keys.clear();
        for (i, b) in bufs.iter().enumerate() {
            let key = match rule {
                OrderRule::Size | OrderRule::GreedyFallback => b.size,
                OrderRule::Area => b.size.saturating_mul(b.partitions as u64),
                OrderRule::Degree => self.index.degree(b) as u64,
                OrderRule::Start => u64::MAX - b.lower,
                OrderRule::End => b.upper,
                OrderRule::Random(k) => {
                    // Size, blurred by up to ±25% so that equal and near-equal
                    // sizes come in many orders.
                    let r = crate::rng::mix64(seed ^ (k as u64) << 32 ^ i as u64) % 512;
                    (b.size.saturating_mul(b.partitions as u64) / 256).saturating_mul(256 + r) / 4
                }
            };
            self.keys.push(key);
        }
        self.order.clear();
        self.order.extend(0..n as u32);
        self.sort_order(bufs, true);
    }

    /// Sorts `self.order` (a permutation of the buffers): pinned first, then
    /// by `self.keys` descending, then (with `by_span`) by lifetime length
    /// descending, then by index. Through one packed integer per buffer
    /// when every lifetime length fits 32 bits and the scratch is reserved:
    /// the comparator reads two buffers and two keys per comparison, all
    /// over memory at millions of buffers. Both paths give the same order
    /// (the index makes it total).
    fn sort_order(&mut self, bufs: &[Buffer], by_span: bool) {
        let span = |b: &Buffer| b.upper.saturating_sub(b.lower);
        let packable = self.order.len() <= self.packed.capacity()
            && (!by_span || bufs.iter().all(|b| span(b) <= u32::MAX as u64));
        if !packable {
            let keys = &self.keys;
            self.order.sort_unstable_by(|&x, &y| {
                let (a, b) = (&bufs[x as usize], &bufs[y as usize]);
                let by = if by_span {
                    span(b).cmp(&span(a))
                } else {
                    core::cmp::Ordering::Equal
                };
                b.pin
                    .is_some()
                    .cmp(&a.pin.is_some())
                    .then(keys[y as usize].cmp(&keys[x as usize]))
                    .then(by)
                    .then(x.cmp(&y))
            });
            return;
        }
        // Pinned first: each group packed, then sorted on its own.
        let pinned = |i: u32| bufs[i as usize].pin.is_some();
        self.packed.clear();
        let mut n_pinned = 0;
        for pass_pinned in [true, false] {
            for &i in &self.order {
                if pinned(i) != pass_pinned {
                    continue;
                }
                let b = &bufs[i as usize];
                let key = !self.keys[i as usize] as u128;
                let sp = if by_span { !(span(b) as u32) } else { 0 };
                self.packed.push(key << 64 | (sp as u128) << 32 | i as u128);
            }
            if pass_pinned {
                n_pinned = self.packed.len();
            }
        }
        let (pins, rest) = self.packed.split_at_mut(n_pinned);
        pins.sort_unstable();
        rest.sort_unstable();
        for (slot, &p) in self.order.iter_mut().zip(&self.packed) {
            *slot = p as u32;
        }
    }

    /// Places the buffers in `self.order` into `self.current`; returns the
    /// peak. `tree`: the occupancy tree is built over `p` (a linear
    /// problem) and answers the lowest offsets until it runs out of room.
    fn replay(&mut self, p: &Problem, mut tree: bool) -> u64 {
        let bufs = p.buffers();
        for x in self.placed.iter_mut() {
            *x = false;
        }
        if tree {
            self.occupancy.clear();
        }
        let mut pk = 0;
        for k in 0..self.order.len() {
            let v = self.order[k] as usize;
            let b = bufs[v];
            let pl = if let Some(pin) = b.pin {
                pin
            } else if b.is_void() {
                Placement {
                    offset: 0,
                    base: p.legal_bases(b.partitions).next().unwrap_or(0),
                }
            } else {
                let fit = if tree {
                    self.occupancy.lowest_fit(&b)
                } else {
                    None
                };
                match fit {
                    Some(offset) => Placement { offset, base: 0 },
                    None => self.lowest(p, v, &b),
                }
            };
            self.current[v] = pl;
            self.placed[v] = true;
            tree = tree && self.occupancy.add(&b, pl.offset).is_ok();
            if !b.is_void() {
                pk = pk.max(pl.offset + b.size);
            }
        }
        pk
    }

    /// The lowest feasible placement of `b` given its placed neighbours
    /// (lowest top, then lowest offset, then lowest base).
    fn lowest(&mut self, p: &Problem, v: usize, b: &Buffer) -> Placement {
        let bufs = p.buffers();
        self.near.clear();
        let (near, placed, current) = (&mut self.near, &self.placed, &self.current);
        self.index.for_each_overlapping(b, |u| {
            let u = u as usize;
            if u != v && placed[u] {
                near.push(Obstacle::of(&bufs[u], current[u]));
            }
        });
        self.near.sort_unstable_by_key(|o| o.offset());
        let mut best: Option<Placement> = None;
        for base in p.legal_bases(b.partitions) {
            let end = base + b.partitions;
            let mut off = 0u64;
            for o in self.near.iter().filter(|o| o.meets_partitions(base, end)) {
                if off + b.size <= o.offset() {
                    break;
                }
                off = off.max(align_offset(o.top(), b.align));
            }
            if best.map_or(true, |p| off < p.offset) {
                best = Some(Placement { offset: off, base });
            }
            if off == 0 {
                break;
            }
        }
        best.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::dsa::{perfect_packing, PerfectPacking};
    use crate::mem::problem::peak;
    use crate::verify::buffers;

    #[test]
    fn interval_graph_and_lowest_fit() {
        // a [0,4) 4 B, b [0,2) 2 B, c [2,4) 2 B: b and c can share, the peak is 6.
        let mut p = Problem::linear(100, 3);
        p.push(Buffer::linear(0, 4, 4)).unwrap();
        p.push(Buffer::linear(0, 2, 2)).unwrap();
        p.push(Buffer::linear(2, 4, 2)).unwrap();
        let mut ws = GcaWorkspace::new();
        ws.reserve_for(&p, 0, 0);
        let mut out = [Placement::default(); 3];
        let o = ws.solve(&p, &GcaOptions::default(), &mut out);
        assert_eq!(o.edges, 2);
        assert_eq!(o.peak, 6);
        assert_eq!(o.lower_bound, 6);
        assert_eq!(out[1].offset, out[2].offset);
    }

    #[test]
    fn replays_on_the_occupancy_tree_place_as_the_neighbour_walk() {
        use crate::gen::dsa::{trace_like, TraceLike};
        let mut p = Problem::linear(u64::MAX / 8, 2000);
        for seed in 0..3 {
            for k in 0..2 {
                if k == 0 {
                    trace_like(&TraceLike::new(2000), seed, &mut p).unwrap();
                } else {
                    let mut packing = Vec::new();
                    perfect_packing(&PerfectPacking::new(200), seed, &mut p, &mut packing).unwrap();
                }
                let opts = GcaOptions {
                    improve: 20,
                    ..GcaOptions::default()
                };
                let mut walk = GcaWorkspace::new();
                walk.reserve_within(&p, 0, 0, u64::MAX);
                let mut tree = GcaWorkspace::new();
                tree.reserve_for(&p, 0, 0);
                assert!(tree.heap_bytes() >= walk.heap_bytes() + Occupancy::bytes_for(p.len()));
                let mut a = alloc::vec![Placement::default(); p.len()];
                let mut b = a.clone();
                let oa = walk.solve(&p, &opts, &mut a);
                let ob = tree.solve(&p, &opts, &mut b);
                assert_eq!(a, b, "seed {seed}, problem {k}");
                assert_eq!((oa.peak, oa.replays), (ob.peak, ob.replays));
                let mut v = buffers::Validator::with_capacity(p.len(), 8);
                assert_eq!(v.check(&p, &b, ob.peak).total, 0);
            }
        }
    }

    #[test]
    fn every_solution_validates_and_improvement_helps() {
        let mut sum_first = 0.0;
        let mut sum_best = 0.0;
        let mut validator = buffers::Validator::with_capacity(200, 8);
        for seed in 0..8 {
            let mut p = Problem::linear(0, 200);
            let mut known = alloc::vec::Vec::new();
            let params = PerfectPacking {
                buffers: 60,
                capacity: 4096,
                horizon: 1000,
                unit: 16,
            };
            perfect_packing(&params, seed, &mut p, &mut known).unwrap();
            let mut ws = GcaWorkspace::new();
            ws.reserve_for(&p, 0, 0);
            let mut out = alloc::vec![Placement::default(); p.len()];
            let one = GcaOptions {
                sweeps: 1,
                improve: 0,
                ..GcaOptions::default()
            };
            let first = ws.solve(&p, &one, &mut out);
            assert_eq!(validator.check(&p, &out, u64::MAX).total, 0);
            let best = ws.solve(&p, &GcaOptions::default(), &mut out);
            assert_eq!(validator.check(&p, &out, u64::MAX).total, 0);
            assert_eq!(peak(&p, &out), best.peak);
            assert!(best.peak <= first.peak);
            sum_first += first.peak as f64 / first.lower_bound as f64;
            sum_best += best.peak as f64 / best.lower_bound as f64;
        }
        assert!(
            sum_best < sum_first,
            "improvement must lower the mean ratio"
        );
    }

    #[test]
    fn partitioned_respects_start_rule() {
        let t = crate::Target::default();
        let mut p = Problem::partitioned(&t, 1000, 4);
        for _ in 0..4 {
            p.push(Buffer {
                lower: 0,
                upper: 10,
                size: 100,
                align: 1,
                partitions: 32,
                pin: None,
            })
            .unwrap();
        }
        let mut ws = GcaWorkspace::new();
        ws.reserve_for(&p, 0, 0);
        let mut out = [Placement::default(); 4];
        let o = ws.solve(&p, &GcaOptions::default(), &mut out);
        // Four 32-partition quadrant tensors sit side by side at offset 0.
        assert_eq!(o.peak, 100);
        let mut bases: alloc::vec::Vec<u16> = out.iter().map(|p| p.base).collect();
        bases.sort_unstable();
        assert_eq!(bases, [0, 32, 64, 96]);
    }
}
