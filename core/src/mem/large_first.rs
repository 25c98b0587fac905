//! Large first: the largest buffers placed by the exact search, a tier at
//! a time, then the rest around them by the greedy-by-size rule.
//!
//! # What it exploits
//! When sizes span orders of magnitude (activations of bytes to KiB beside
//! weights and caches of MiB), the peak is made of the large buffers: the
//! small ones are a thin layer that fits into the holes the large ones
//! leave. A greedy rule places the large ones in size order without looking
//! ahead and the small ones cannot undo its mistakes; a search over only
//! the large ones stays small (a few hundred buffers) however many small
//! ones there are, and reaches or nears their own bound. When sizes are
//! alike, the large set is simply the first part of the greedy order,
//! searched instead of placed greedily, and the search starts from that
//! greedy answer, so it is never worse on that part.
//!
//! The search's reach, not the instance, sets a tier's size: it proves or
//! nears the bound on a few hundred buffers (MiniMalloc's instances are
//! 150-450) and slows down past that, so when more buffers matter (a
//! million-buffer trace has thousands of huge ones) the next tier is
//! searched against the earlier ones pinned where they landed. Within half
//! to twice that size a tier ends where the sizes drop (a class of alike
//! buffers is searched whole, not split between a tier and the next).
//!
//! Each tier's search first minimizes the peak for half its budget (from
//! the greedy answer down, a byte at a time; on a small tier this proves
//! the optimum), then spends the other half descending capacities between
//! the tier's bound and the best peak ([`ExactWorkspace::raise`]): a
//! search for a fit at a fixed capacity branches where the capacity is
//! tight, which a least-peak search reaches only after many near-equal
//! peaks.
//!
//! The tiers are the buffers by area (size × partitions), ties by the
//! longer lifetime, then the earlier start, then the index: properties of
//! the buffers, not of the input's order.
//!
//! # Storage
//! Linear in the buffers (an order, a copy of the problem with the tiers
//! pinned, the greedy rule's tables) plus the search sized for all tiers
//! at once (the last tier's part holds the earlier tiers as pins), all
//! reserved by [`LargeFirstWorkspace::reserve`];
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
    /// Buffers a tier's search takes at once (at most).
    pub tier: u32,
    /// Tiers searched, each against the earlier ones pinned.
    pub tiers: u32,
    /// Capacities a tier's descent tries after its least-peak search.
    pub steps: u32,
    /// The search's budget over all tiers, shared equally; a tier spends
    /// half of its share on the least peak and the rest on the descent's
    /// steps.
    pub budget: Budget,
}

impl Default for LargeFirstOptions {
    fn default() -> Self {
        LargeFirstOptions {
            tier: 512,
            tiers: 2,
            steps: 8,
            budget: Budget {
                nodes: Some(200_000),
                micros: None,
            },
        }
    }
}

impl LargeFirstOptions {
    /// Buffers searched over all tiers (at most).
    pub fn searched(&self) -> usize {
        (self.tier as usize).saturating_mul(self.tiers as usize)
    }
}

/// What a run found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LargeFirstOutcome {
    /// Peak of the whole placement.
    pub peak: u64,
    /// Buffers searched, over all tiers.
    pub large: u32,
    /// Tiers searched.
    pub tiers: u32,
    /// Peak of the searched buffers (and pins) alone, as the searches left
    /// them.
    pub large_peak: u64,
    /// Their own lower bound.
    pub large_bound: u64,
    /// What the search knows about the searched buffers' placement:
    /// `Optimal` when there was one tier and its peak is proven the least
    /// it allows.
    pub status: Status,
    /// Search nodes, over all tiers and steps.
    pub nodes: u64,
    /// What stopped a tier's least-peak search early, if anything did.
    pub stopped_by: Option<Limit>,
}

impl LargeFirstOutcome {
    /// Before any search: `large` buffers to search, the peak so far.
    fn unsearched(large: u32, peak: u64) -> Self {
        LargeFirstOutcome {
            peak,
            large,
            tiers: 0,
            large_peak: 0,
            large_bound: 0,
            status: Status::Feasible,
            nodes: 0,
            stopped_by: None,
        }
    }
}

/// Reusable storage of the method (see the module doc).
#[derive(Debug)]
pub struct LargeFirstWorkspace {
    order: Vec<u32>,
    /// Per buffer: its position in `order` when it is searched, or
    /// `u32::MAX`.
    slot: Vec<u32>,
    /// Where the searches put the searched buffers, in `order`.
    found: Vec<Placement>,
    /// Buffers `work` was made for.
    reserved: usize,
    /// Buffers `part`, `part_out` and `trial` were made for: the searched
    /// buffers and the pins.
    part_room: usize,
    part: Problem,
    part_out: Vec<Placement>,
    trial: Vec<Placement>,
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
            found: Vec::new(),
            reserved: 0,
            part_room: 0,
            part: Problem::linear(0, 0),
            part_out: Vec::new(),
            trial: Vec::new(),
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
            self.found,
            self.part,
            self.part_out,
            self.trial,
            self.work,
            self.exact,
            self.greedy,
            self.timeline
        )
    }

    /// Reserves everything [`Self::place`] uses for `problem` with `opts`
    /// (the search is sized for this problem's tiers).
    pub fn reserve(&mut self, problem: &Problem, opts: &LargeFirstOptions) {
        self.reserve_within(problem, opts, u64::MAX);
    }

    /// [`Self::reserve`] with at most `allowance` heap bytes for the
    /// search (its linear tables are always reserved): when its grid does
    /// not fit, [`Self::place`] keeps the greedy placement of the tiers
    /// and says so ([`LargeFirstOutcome::stopped_by`]).
    pub fn reserve_within(&mut self, problem: &Problem, opts: &LargeFirstOptions, allowance: u64) {
        let n = problem.len();
        crate::storage::grow(&mut self.order, n);
        crate::storage::grow(&mut self.slot, n);
        if self.work.geometry() != problem.geometry() || self.reserved < n {
            self.work = Problem::with_geometry(problem.geometry().clone(), 0, n);
            self.reserved = n;
        }
        // The rest is placed by size only.
        self.greedy
            .reserve_rules(n, !problem.is_partitioned(), &[GreedyRule::BySize]);
        self.timeline.reserve(n);
        let searched = self.rank(problem, opts);
        let m = searched + pins(problem);
        crate::storage::grow(&mut self.found, m);
        if self.part.geometry() != problem.geometry() || self.part_room < m {
            self.part = Problem::with_geometry(problem.geometry().clone(), 0, m);
            self.part_room = m;
        }
        crate::storage::grow(&mut self.part_out, m);
        crate::storage::grow(&mut self.trial, m);
        // Each tier's part as `place` makes it (the tiers depend on the
        // problem alone; where the earlier tiers are pinned does not matter
        // to the counts): the search is reserved for the largest count of
        // each of its tables over the parts. The branch stack follows a
        // part's unpinned buffers, so this is well below sizing one part
        // of every searched buffer unpinned.
        crate::storage::refill(&mut self.found, searched, Placement::default());
        let tier = (opts.tier as usize).max(1);
        let mut hi = self.tier_end(problem, 0, tier, searched);
        self.build_part(problem, 0, hi);
        let mut need = self.exact.search_sizes(&self.part);
        while hi < searched {
            let lo = hi;
            hi = self.tier_end(problem, lo, tier, searched);
            self.build_part(problem, lo, hi);
            need = need.max(self.exact.search_sizes(&self.part));
        }
        self.exact.reserve_sizes_within(&need, allowance);
        self.part.clear();
    }

    /// Places every buffer of `problem` into `out` (indexed like its
    /// buffers); pins keep their placement. A problem larger than the
    /// reserved one (more buffers, or more to search and pin), or of
    /// another geometry, is placed by the greedy rule alone (no tier).
    pub fn place(
        &mut self,
        problem: &Problem,
        opts: &LargeFirstOptions,
        clock: &mut dyn Clock,
        out: &mut [Placement],
    ) -> LargeFirstOutcome {
        let reserved = problem.len() <= self.reserved
            && self.work.geometry() == problem.geometry()
            && self.part.geometry() == problem.geometry();
        let searched = if reserved {
            self.rank(problem, opts)
        } else {
            usize::MAX
        };
        if searched.saturating_add(pins(problem)) > self.part_room {
            let pk = self.greedy.place(problem, GreedyRule::BySize, out);
            return LargeFirstOutcome::unsearched(0, pk);
        }
        crate::storage::refill(&mut self.found, searched, Placement::default());
        let tier = (opts.tier as usize).max(1);
        let mut o = LargeFirstOutcome::unsearched(searched as u32, 0);
        let start = clock.now_micros();
        let mut lo = 0;
        while lo < searched {
            let hi = self.tier_end(problem, lo, tier, searched);
            // What is left of the budget, shared by the tiers left; without
            // a descent a tier's least-peak search has all of its share.
            let elapsed = clock.now_micros().saturating_sub(start);
            let left = Budget {
                nodes: opts.budget.nodes.map(|k| k.saturating_sub(o.nodes)),
                micros: opts.budget.micros.map(|us| us.saturating_sub(elapsed)),
            };
            let share = left.share((searched - lo).div_ceil(tier) as u64);
            let half = share.share(if opts.steps > 0 { 2 } else { 1 });
            let minimize = ExactOptions {
                budget: half,
                objective: Objective::MinimizePeak,
                ..ExactOptions::default()
            };
            self.build_part(problem, lo, hi);
            let m = self.part.len();
            crate::storage::refill(&mut self.part_out, m, Placement::default());
            let r = self
                .exact
                .solve(&self.part, &minimize, clock, &mut self.part_out);
            o.nodes += r.nodes;
            o.stopped_by = o.stopped_by.or(r.stopped_by);
            o.status = r.status;
            // A search that did not start (no room for it) has nothing to
            // descend from.
            let started = !matches!(r.stopped_by, Some(Limit::Budget | Limit::Size));
            if r.status != Status::Optimal && opts.steps > 0 && started {
                crate::storage::refill(&mut self.trial, m, Placement::default());
                let floor = self.part.lower_bound(&mut self.timeline).bytes;
                let slice = half.share(opts.steps as u64);
                let d = self.exact.raise(
                    &mut self.part,
                    floor,
                    opts.steps,
                    slice,
                    clock,
                    &mut self.part_out[..m],
                    &mut self.trial[..m],
                );
                o.nodes += d.nodes;
            }
            // The part lists the tier first, in `order`.
            self.found[lo..hi].copy_from_slice(&self.part_out[..hi - lo]);
            o.tiers += 1;
            lo = hi;
        }
        if o.tiers > 1 {
            o.status = Status::Feasible;
        }
        if o.tiers > 0 {
            // The searched buffers alone (and the pins): the last part,
            // with the last tier where its search put it.
            o.large_bound = self.part.lower_bound(&mut self.timeline).bytes;
            o.large_peak = peak(&self.part, &self.part_out[..self.part.len()]);
        }
        // The whole problem again, the searched buffers pinned where the
        // searches put them.
        let bufs = problem.buffers();
        crate::storage::refill(&mut self.slot, bufs.len(), u32::MAX);
        for (k, &i) in self.order[..searched].iter().enumerate() {
            self.slot[i as usize] = k as u32;
        }
        self.work.clear();
        self.work.capacity = problem.capacity;
        for (b, &k) in bufs.iter().zip(&self.slot) {
            let pin = (k != u32::MAX).then(|| self.found[k as usize]).or(b.pin);
            // Room was reserved and the buffer and the search's placement
            // of it are legal, so this push cannot fail.
            let pushed = self.work.push(Buffer { pin, ..*b });
            debug_assert!(pushed.is_ok());
        }
        self.greedy.place(&self.work, GreedyRule::BySize, out);
        o.peak = peak(problem, out);
        o
    }

    /// Lists the searched buffers first in `order`, by area; returns how
    /// many there are (all tiers).
    fn rank(&mut self, problem: &Problem, opts: &LargeFirstOptions) -> usize {
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
        let searched = opts.searched().min(self.order.len());
        if searched > 0 && searched < self.order.len() {
            self.order.select_nth_unstable_by_key(searched - 1, key);
        }
        self.order[..searched].sort_unstable_by_key(key);
        searched
    }

    /// Where the tier starting at `order[lo]` ends: at the widest drop in
    /// area between neighbours in `order` (the larger at least 3/2 of the
    /// smaller) within half to twice `tier` buffers from `lo`, else after
    /// `tier` buffers; never past `searched`, and all of the rest when it
    /// is no more than `tier` buffers. A gap in the sizes is where a
    /// class of alike buffers (copies of one tensor shape, say) ends: the
    /// search takes a class whole, since alike buffers are exchangeable
    /// and a class split between a tier and the next (or the greedy rest)
    /// is packed by the later one around the earlier one's choices.
    fn tier_end(&self, problem: &Problem, lo: usize, tier: usize, searched: usize) -> usize {
        if searched - lo <= tier {
            return searched;
        }
        let bufs = problem.buffers();
        let area = |k: usize| {
            let b = &bufs[self.order[k] as usize];
            b.size.saturating_mul(b.partitions as u64)
        };
        let first = (lo + tier / 2).max(lo + 1);
        let last = (lo + 2 * tier).min(searched);
        // (larger, smaller) of the widest drop: the cut goes before k.
        let mut best: Option<(usize, u64, u64)> = None;
        for k in first..last {
            let (big, small) = (area(k - 1), area(k));
            let wider = match best {
                None => true,
                // big / small > b / s, without division.
                Some((_, b, s)) => (big as u128) * (s as u128) > (b as u128) * (small as u128),
            };
            if wider {
                best = Some((k, big, small));
            }
        }
        match best {
            Some((k, big, small)) if 2 * (big as u128) >= 3 * (small as u128) => k,
            _ => (lo + tier).min(searched),
        }
    }

    /// Makes `part` the problem of the tier `order[lo..hi]` (first, in that
    /// order), the earlier tiers pinned where `found` has them, and every
    /// pin of `problem`.
    fn build_part(&mut self, problem: &Problem, lo: usize, hi: usize) {
        let bufs = problem.buffers();
        self.part.clear();
        // No capacity: the search lowers the tier's peak step by step from
        // the greedy one, whatever the problem's capacity is.
        self.part.capacity = u64::MAX / 8;
        // Within the reserved room (checked by the callers), of buffers
        // the problem already accepted, pinned where an earlier search
        // placed them legally: the pushes cannot fail.
        for &i in &self.order[lo..hi] {
            let pushed = self.part.push(bufs[i as usize]);
            debug_assert!(pushed.is_ok());
        }
        for (&i, &at) in self.order[..lo].iter().zip(&self.found) {
            let pushed = self.part.push(Buffer {
                pin: Some(at),
                ..bufs[i as usize]
            });
            debug_assert!(pushed.is_ok());
        }
        for b in bufs.iter().filter(|b| b.pin.is_some() && !b.is_void()) {
            let pushed = self.part.push(*b);
            debug_assert!(pushed.is_ok());
        }
    }
}

/// Pinned buffers of `problem` that take room (every part holds them).
fn pins(problem: &Problem) -> usize {
    problem
        .buffers()
        .iter()
        .filter(|b| b.pin.is_some() && !b.is_void())
        .count()
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

    #[test]
    fn the_descent_lowers_a_peak_the_least_peak_search_leaves() {
        // A packing known to fit at its bound, cut into 300 pieces: the
        // least-peak search with the whole budget stalls well above the
        // bound; half of it spent on descending capacities gets lower.
        use crate::gen::dsa::{perfect_packing, PerfectPacking};
        let mut p = Problem::linear(u64::MAX / 8, 300);
        let mut known = Vec::new();
        perfect_packing(&PerfectPacking::new(300), 1, &mut p, &mut known).unwrap();
        let large_peak = |steps: u32| {
            let opts = LargeFirstOptions {
                steps,
                budget: Budget {
                    nodes: Some(20_000),
                    micros: None,
                },
                ..LargeFirstOptions::default()
            };
            let mut ws = LargeFirstWorkspace::new();
            ws.reserve(&p, &opts);
            let mut out = vec![Placement::default(); p.len()];
            let o = ws.place(&p, &opts, &mut NoClock, &mut out);
            let mut v = Validator::with_capacity(p.len(), 4);
            assert_eq!(v.check(&p, &out, u64::MAX).total, 0);
            assert_eq!((o.large as usize, o.tiers), (p.len(), 1));
            o.large_peak
        };
        let (least, descended) = (large_peak(0), large_peak(8));
        assert!(
            descended < least,
            "descent {descended} vs least-peak search alone {least}"
        );
    }

    #[test]
    fn a_second_tier_is_searched_around_the_first_pinned() {
        // Pieces of a perfect packing: a first tier of 100 that its search
        // does not prove stays where it landed, pinned under the second.
        use crate::gen::dsa::{perfect_packing, PerfectPacking};
        let mut p = Problem::linear(u64::MAX / 8, 300);
        let mut known = Vec::new();
        perfect_packing(&PerfectPacking::new(300), 1, &mut p, &mut known).unwrap();
        let o = tiered(&p, 100, 4_000);
        assert_eq!((o.large, o.tiers), (200, 2));
        assert_eq!(o.status, Status::Feasible, "two tiers prove nothing");
    }

    #[test]
    fn a_tier_ends_where_the_sizes_drop_not_inside_a_class() {
        // 300 buffers of about 1,000 bytes, then 700 of 100 to 599: a tier
        // of 256 takes the whole class of 300; past it no drop reaches
        // 3/2 within the window, so the next tier is 256 long (capped at
        // the 512 searched).
        let mut p = Problem::linear(u64::MAX / 8, 1000);
        for i in 0..1000u64 {
            let size = if i < 300 {
                1000 + i % 7
            } else {
                100 + (i * 37) % 500
            };
            p.push(Buffer::linear(i % 50, i % 50 + 10, size)).unwrap();
        }
        let opts = LargeFirstOptions {
            tier: 256,
            ..LargeFirstOptions::default()
        };
        let mut ws = LargeFirstWorkspace::new();
        ws.reserve(&p, &opts);
        let searched = ws.rank(&p, &opts);
        assert_eq!(searched, 512);
        assert_eq!(ws.tier_end(&p, 0, 256, searched), 300);
        assert_eq!(ws.tier_end(&p, 300, 256, searched), 512);
        // The rest within one tier: taken whole, drop or not.
        assert_eq!(ws.tier_end(&p, 0, 600, searched), 512);
        assert_eq!(ws.tier_end(&p, 0, 400, searched), 300);
    }

    /// Large first in two tiers of `tier` on `p` within `nodes`, checked.
    fn tiered(p: &Problem, tier: u32, nodes: u64) -> LargeFirstOutcome {
        let opts = LargeFirstOptions {
            tier,
            tiers: 2,
            budget: Budget {
                nodes: Some(nodes),
                micros: None,
            },
            ..LargeFirstOptions::default()
        };
        let mut ws = LargeFirstWorkspace::new();
        ws.reserve(p, &opts);
        let heap = ws.heap_bytes();
        let mut out = vec![Placement::default(); p.len()];
        let o = ws.place(p, &opts, &mut NoClock, &mut out);
        assert_eq!(ws.heap_bytes(), heap, "place allocated");
        let mut v = Validator::with_capacity(p.len(), 4);
        assert_eq!(v.check(p, &out, u64::MAX).total, 0);
        assert_eq!(o.peak, peak(p, &out));
        assert!(o.large_peak >= o.large_bound && o.peak >= o.large_peak);
        o
    }
}
