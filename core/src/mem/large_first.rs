//! Large first: the largest buffers placed by the exact search, then the
//! rest around them by the greedy-by-size rule.
//!
//! # What it exploits
//! When sizes span orders of magnitude (activations of bytes to KiB beside
//! weights and caches of MiB), the peak is made of the large buffers: the
//! small ones are a thin layer that fits into the holes the large ones
//! leave. A greedy rule places the large ones in size order without looking
//! ahead and the small ones cannot undo its mistakes; a search over only
//! the large ones stays small (a few hundred to a thousand buffers) however
//! many small ones there are, and reaches or nears their own bound. When
//! sizes are alike, the large set is simply the first part of the greedy
//! order, searched instead of placed greedily, and the search starts from
//! that greedy answer, so it is never worse on that part.
//!
//! The large set is the `large` biggest buffers by area (size × partitions),
//! ties by the longer lifetime, then the earlier start, then the index:
//! properties of the buffers, not of the input's order.
//!
//! # Storage
//! Linear in the buffers (an order, a copy of the problem with the large
//! set pinned, the greedy rule's tables) plus the search sized for the large
//! set, all reserved by [`LargeFirstWorkspace::reserve`];
//! [`LargeFirstWorkspace::place`] allocates nothing for the problem it was
//! reserved for or a smaller one like it.

use alloc::vec::Vec;

use super::exact::{Budget, Clock, ExactOptions, ExactWorkspace, Limit, Objective, Status};
use super::greedy::{GreedyRule, GreedyWorkspace};
use super::problem::{peak, Buffer, Placement, Problem, Timeline};

/// Tuning of the method.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LargeFirstOptions {
    /// Buffers in the large set (at most).
    pub large: u32,
    /// The search's budget on the large set.
    pub budget: Budget,
}

impl Default for LargeFirstOptions {
    fn default() -> Self {
        LargeFirstOptions {
            large: 1024,
            budget: Budget {
                nodes: Some(50_000),
                micros: None,
            },
        }
    }
}

/// What a run found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LargeFirstOutcome {
    /// Peak of the whole placement.
    pub peak: u64,
    /// Buffers in the large set.
    pub large: u32,
    /// Peak of the large set alone, as the search left it.
    pub large_peak: u64,
    /// The large set's own lower bound.
    pub large_bound: u64,
    /// What the search knows about the large set's placement: `Optimal`
    /// when its peak is proven the least the large set allows.
    pub status: Status,
    /// Search nodes.
    pub nodes: u64,
    /// What stopped the search early, if anything did.
    pub stopped_by: Option<Limit>,
}

/// Reusable storage of the method (see the module doc).
#[derive(Debug)]
pub struct LargeFirstWorkspace {
    order: Vec<u32>,
    /// Per buffer: its index in the part, or `u32::MAX`.
    slot: Vec<u32>,
    /// Buffers `work` and `part` were made for.
    reserved: usize,
    part: Problem,
    part_out: Vec<Placement>,
    work: Problem,
    exact: ExactWorkspace,
    greedy: GreedyWorkspace,
    timeline: Timeline,
}

impl Default for LargeFirstWorkspace {
    fn default() -> Self {
        LargeFirstWorkspace {
            order: Vec::new(),
            slot: Vec::new(),
            reserved: 0,
            part: Problem::linear(0, 0),
            part_out: Vec::new(),
            work: Problem::linear(0, 0),
            exact: ExactWorkspace::new(),
            greedy: GreedyWorkspace::new(),
            timeline: Timeline::default(),
        }
    }
}

impl LargeFirstWorkspace {
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.slot,
            self.part,
            self.part_out,
            self.work,
            self.exact,
            self.greedy,
            self.timeline
        )
    }

    /// Reserves everything [`Self::place`] uses for `problem` with `opts`
    /// (the search is sized for this problem's large set).
    pub fn reserve(&mut self, problem: &Problem, opts: &LargeFirstOptions) {
        self.reserve_within(problem, opts, u64::MAX);
    }

    /// [`Self::reserve`] with at most `allowance` heap bytes for the
    /// search (its linear tables are always reserved): when its grid does
    /// not fit, [`Self::place`] keeps the greedy placement of the large set
    /// and says so ([`LargeFirstOutcome::stopped_by`]).
    pub fn reserve_within(&mut self, problem: &Problem, opts: &LargeFirstOptions, allowance: u64) {
        let n = problem.len();
        crate::storage::grow(&mut self.order, n);
        crate::storage::grow(&mut self.slot, n);
        if self.work.geometry() != problem.geometry() || self.reserved < n {
            self.work = Problem::with_geometry(problem.geometry().clone(), 0, n);
            self.part = Problem::with_geometry(problem.geometry().clone(), 0, n);
            self.reserved = n;
        }
        self.greedy.reserve_for(problem);
        self.timeline.reserve(n);
        crate::storage::grow(&mut self.part_out, n);
        self.build_part(problem, opts);
        self.exact.reserve_within(&self.part, allowance);
        self.part.clear();
    }

    /// Places every buffer of `problem` into `out` (indexed like its
    /// buffers); pins keep their placement. A problem larger than the
    /// reserved one, or of another geometry, is placed by the greedy rule
    /// alone (an empty large set).
    pub fn place(
        &mut self,
        problem: &Problem,
        opts: &LargeFirstOptions,
        clock: &mut dyn Clock,
        out: &mut [Placement],
    ) -> LargeFirstOutcome {
        if problem.len() > self.reserved || self.work.geometry() != problem.geometry() {
            let pk = self.greedy.place(problem, GreedyRule::BySize, out);
            return LargeFirstOutcome {
                peak: pk,
                large: 0,
                large_peak: 0,
                large_bound: 0,
                status: Status::Feasible,
                nodes: 0,
                stopped_by: None,
            };
        }
        let large = self.build_part(problem, opts);
        let large_bound = self.part.lower_bound(&mut self.timeline).bytes;
        let m = self.part.len();
        crate::storage::refill(&mut self.part_out, m, Placement::default());
        let options = ExactOptions {
            budget: opts.budget,
            objective: Objective::MinimizePeak,
            ..ExactOptions::default()
        };
        let r = self
            .exact
            .solve(&self.part, &options, clock, &mut self.part_out);
        // The whole problem again, the large set pinned where the search
        // put it (the part lists the large set first, in `order`).
        let bufs = problem.buffers();
        crate::storage::refill(&mut self.slot, bufs.len(), u32::MAX);
        for (k, &i) in self.order[..large].iter().enumerate() {
            self.slot[i as usize] = k as u32;
        }
        self.work.clear();
        self.work.capacity = problem.capacity;
        for (b, &k) in bufs.iter().zip(&self.slot) {
            let pin = (k != u32::MAX).then(|| self.part_out[k as usize]).or(b.pin);
            // Room was reserved and the buffer and the search's placement
            // of it are legal, so this push cannot fail.
            let pushed = self.work.push(Buffer { pin, ..*b });
            debug_assert!(pushed.is_ok());
        }
        self.greedy.place(&self.work, GreedyRule::BySize, out);
        LargeFirstOutcome {
            peak: peak(problem, out),
            large: large as u32,
            large_peak: r.peak,
            large_bound,
            status: r.status,
            nodes: r.nodes,
            stopped_by: r.stopped_by,
        }
    }

    /// Lists the large set first in `order` and makes `part` the problem of
    /// the large set and every pin; returns the large set's size.
    fn build_part(&mut self, problem: &Problem, opts: &LargeFirstOptions) -> usize {
        let bufs = problem.buffers();
        self.order.clear();
        self.order.extend(
            (0..bufs.len() as u32)
                .filter(|&i| bufs[i as usize].pin.is_none() && !bufs[i as usize].is_void()),
        );
        let key = |&i: &u32| {
            let b: &Buffer = &bufs[i as usize];
            (
                core::cmp::Reverse(b.size.saturating_mul(b.partitions as u64)),
                core::cmp::Reverse(b.upper - b.lower),
                b.lower,
                i,
            )
        };
        let large = (opts.large as usize).min(self.order.len());
        if large > 0 && large < self.order.len() {
            self.order.select_nth_unstable_by_key(large - 1, key);
        }
        self.order[..large].sort_unstable_by_key(key);
        self.part.clear();
        // No capacity: the search lowers the large set's peak step by step
        // from the greedy one, whatever the problem's capacity is.
        self.part.capacity = u64::MAX / 8;
        // Within the reserved room (checked by the callers), of buffers
        // the problem already accepted: the pushes cannot fail.
        for &i in &self.order[..large] {
            let pushed = self.part.push(bufs[i as usize]);
            debug_assert!(pushed.is_ok());
        }
        for b in bufs.iter().filter(|b| b.pin.is_some() && !b.is_void()) {
            let pushed = self.part.push(*b);
            debug_assert!(pushed.is_ok());
        }
        large
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::dsa::{trace_like, TraceLike};
    use crate::mem::exact::NoClock;
    use crate::verify::buffers::Validator;
    use alloc::vec;

    fn trace(n: usize) -> Problem {
        let mut p = Problem::linear(u64::MAX / 8, n);
        trace_like(&TraceLike::new(n), 1, &mut p).unwrap();
        p
    }

    #[test]
    fn the_large_set_searched_first_beats_greedy_by_size_on_a_trace() {
        // Sizes of 16 B to 256 KiB beside 1-16 MiB buffers: the peak is the
        // huge ones', which greedy by size places without look-ahead.
        let p = trace(4000);
        let lb = p.lower_bound(&mut Timeline::with_capacity(p.len())).bytes;
        let mut g = GreedyWorkspace::new();
        g.reserve(p.len());
        let mut out = vec![Placement::default(); p.len()];
        let greedy = g.place(&p, GreedyRule::BySize, &mut out);
        let opts = LargeFirstOptions::default();
        let mut ws = LargeFirstWorkspace::new();
        ws.reserve(&p, &opts);
        let heap = ws.heap_bytes();
        let o = ws.place(&p, &opts, &mut NoClock, &mut out);
        assert_eq!(ws.heap_bytes(), heap, "place allocated");
        let mut v = Validator::with_capacity(p.len(), 4);
        assert_eq!(v.check(&p, &out, u64::MAX).total, 0);
        assert_eq!(o.peak, peak(&p, &out));
        assert!(o.large_peak >= o.large_bound);
        assert!(
            o.peak < greedy && o.peak >= lb,
            "large first {} vs greedy {greedy}, bound {lb}",
            o.peak
        );
    }

    #[test]
    fn a_dressed_trace_is_placed_as_well() {
        // The large set and its search depend on sizes and lifetimes only:
        // mirrored, shuffled and scaled traces land as close to their bound
        // (scaling keeps the structure exactly, so the very same ratio).
        use crate::gen::dsa::Dress;
        let ratio = |p: &Problem| {
            let lb = p.lower_bound(&mut Timeline::with_capacity(p.len())).bytes;
            let opts = LargeFirstOptions::default();
            let mut ws = LargeFirstWorkspace::new();
            ws.reserve(p, &opts);
            let mut out = vec![Placement::default(); p.len()];
            let o = ws.place(p, &opts, &mut NoClock, &mut out);
            let mut v = Validator::with_capacity(p.len(), 4);
            assert_eq!(v.check(p, &out, u64::MAX).total, 0);
            o.peak as f64 / lb as f64
        };
        let mut from = Vec::new();
        for seed in 0..2 {
            let mut p = Problem::linear(u64::MAX / 8, 3000);
            trace_like(&TraceLike::new(3000), seed, &mut p).unwrap();
            let given = ratio(&p);
            for d in [Dress::Mirror, Dress::Shuffle(7), Dress::Scale(3)] {
                let mut q = Problem::linear(u64::MAX / 8, 3000);
                d.apply(&p, &mut q, &mut from).unwrap();
                let r = ratio(&q);
                if matches!(d, Dress::Scale(_)) {
                    assert_eq!(r, given, "seed {seed}: scaled");
                } else {
                    assert!(
                        (r - given).abs() <= 0.01,
                        "seed {seed} {d:?}: {r} vs {given}"
                    );
                }
            }
        }
    }

    #[test]
    fn pins_stay_and_a_small_problem_is_all_large() {
        let mut p = Problem::linear(u64::MAX / 8, 4);
        p.push(Buffer::linear(0, 4, 4)).unwrap();
        p.push(Buffer::linear(0, 2, 4)).unwrap();
        p.push(Buffer::linear(2, 4, 4)).unwrap();
        p.push(Buffer {
            pin: Some(Placement { offset: 4, base: 0 }),
            ..Buffer::linear(1, 3, 2)
        })
        .unwrap();
        let opts = LargeFirstOptions::default();
        let mut ws = LargeFirstWorkspace::new();
        ws.reserve(&p, &opts);
        let mut out = vec![Placement::default(); 4];
        let o = ws.place(&p, &opts, &mut NoClock, &mut out);
        assert_eq!(o.large, 3);
        assert_eq!(out[3], Placement { offset: 4, base: 0 });
        let mut v = Validator::with_capacity(4, 4);
        assert_eq!(v.check(&p, &out, u64::MAX).total, 0);
        // 4 under, the pin at 4..6, the two halves above it: 10 at best.
        assert_eq!(o.peak, 10);
    }
}
