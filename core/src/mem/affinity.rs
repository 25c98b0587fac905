//! Placement affinities in the colorer: pairs of buffers (A, B) that should
//! sit side by side, B at the address right after A in A's partitions, so
//! that the DMA coalescing after allocation can merge their transfers
//! (the pairs come from `dma::affinity`, before allocation).
//!
//! # How an affinity is honoured
//! The pairs form chains A, B, C, .... A chain is placed as one *joined*
//! buffer: its lifetime the hull of its members' (from the first one's
//! start to the last one's end, which is what the merged DMA's location
//! occupies) and, for a chain of saves inside a repeating loop, the loop
//! nest the merged location stays live over ([`AffinityPair::nest`]),
//! its size the sum of theirs, its partitions and alignment the
//! first member's. The colorer places the joined problem; member k then
//! sits at the joined buffer's offset plus the sizes before it. Each
//! member's cells lie inside the joined buffer's cells over a sub-interval
//! of its lifetime, so the expanded placement is legal whenever the joined
//! one is.
//!
//! # Never at a cost the plain placement did not have
//! [`Joiner::honour`] runs after the plain placement fits. The joined
//! placement is kept only when its peak stays within the capacity and
//! within `slack_pct` percent of the plain peak; otherwise the chains are
//! tested in groups, cheapest first (by the bytes × positions joining adds
//! to the live set), at most `trials` more colorings: a group is kept
//! when the placement with it and the groups kept before still meets the
//! same limit, else halved, and a single chain that does not is refused. The plain placement is the fallback, so no affinity causes a
//! spill (spill rounds run before, on the plain problem) or a peak past
//! what is allowed.
//!
//! # Why a pair stays apart
//! [`AffinityReport`] counts every pair once: honoured, or refused for
//! `capacity` (its chain raised the peak past the limit while the members'
//! lifetimes overlap), `lifetime` (the same, with disjoint lifetimes:
//! joining them keeps cells that the plain placement reuses in the gap),
//! `placed` (a member is pinned, already placed, not live, or already in
//! another chain), `alignment` (B's alignment does not divide its offset in
//! the chain) or `untried` (the trial budget ran out first).
//!
//! Storage: reserved once by [`Joiner::reserve`]; `honour` allocates nothing.

use alloc::vec::Vec;

use super::interval_coloring::{GcaOptions, GcaWorkspace};
use super::problem::{Buffer, Placement, Problem};
use crate::dma::affinity::AffinityPair;
use crate::ir::MemLoc;
use crate::target::Target;

/// What became of the affinity pairs of one space.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AffinityReport {
    /// Pairs found before allocation.
    pub pairs: u32,
    /// Pairs placed side by side.
    pub honoured: u32,
    /// Refused: the peak rose past the limit (overlapping lifetimes).
    pub capacity: u32,
    /// Refused: the peak rose past the limit (disjoint lifetimes).
    pub lifetime: u32,
    /// Refused: a member pinned, placed, not live or in another chain.
    pub placed: u32,
    /// Refused: B's alignment does not divide its offset in the chain.
    pub alignment: u32,
    /// Not tried: the trial budget ran out.
    pub untried: u32,
    /// Colorings run for the affinities.
    pub trials: u32,
    /// The SB peak of the plain placement, before any chain was joined
    /// (bytes per partition): what later passes' headroom is measured
    /// from, so joined chains and those passes share one slack.
    pub plain_peak: u64,
}

impl AffinityReport {
    /// Pairs that stayed apart.
    pub fn apart(&self) -> u32 {
        self.pairs - self.honoured
    }
}

const NONE: u32 = u32::MAX;

/// Chain state of a head buffer during [`Joiner::honour`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Off,
    On,
    Kept,
    Refused,
}

/// Reusable storage of the affinity step of the colorer.
#[derive(Debug, Default)]
pub struct Joiner {
    /// The pairs of the next run (set by the pipeline).
    pub pairs: Vec<AffinityPair>,
    /// Per buffer, `[lower, upper)` that its chain's joined buffer must
    /// cover besides the members' lifetimes (`(u64::MAX, 0)`: nothing): the
    /// loop nest over which a merged save stays live
    /// ([`AffinityPair::nest`]).
    reach: Vec<(u64, u64)>,
    /// Buffer index of each location (by [`MemLoc::index`]), [`NONE`]
    /// when it has none.
    buf_of: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Chain heads, and their state.
    heads: Vec<u32>,
    /// Ranges of chain indices still to test (a stack, at most
    /// 2 log2(chains) + 2 deep).
    ranges: Vec<(u32, u32)>,
    state: Vec<State>,
    /// Per buffer: its index in the joined problem, and its offset there.
    slot: Vec<u32>,
    within: Vec<u64>,
    joined: Option<Problem>,
    joined_out: Vec<Placement>,
    best: Vec<Placement>,
}

impl Joiner {
    /// Room for `pairs` pairs, `buffers` buffers and `mems` locations.
    pub fn reserve(
        &mut self,
        t: &Target,
        capacity: u64,
        pairs: usize,
        buffers: usize,
        mems: usize,
    ) {
        let grow = |v: &mut Vec<u32>, n: usize| crate::storage::grow(v, n);
        crate::storage::grow(&mut self.pairs, pairs);
        grow(&mut self.buf_of, mems);
        grow(&mut self.next, buffers);
        crate::storage::grow(&mut self.reach, buffers);
        grow(&mut self.prev, buffers);
        grow(&mut self.heads, buffers);
        self.ranges.reserve(2 * 64 + 2);
        grow(&mut self.slot, buffers);
        crate::storage::grow(&mut self.state, buffers);
        crate::storage::grow(&mut self.within, buffers);
        crate::storage::grow(&mut self.joined_out, buffers);
        crate::storage::grow(&mut self.best, buffers);
        self.joined = Some(Problem::partitioned(t, capacity, buffers));
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        let joined = self.joined.as_ref().map_or(0, |p| p.heap_bytes());
        crate::heap_bytes!(
            self.pairs,
            self.reach,
            self.buf_of,
            self.next,
            self.prev,
            self.heads,
            self.ranges,
            self.state,
            self.slot,
            self.within,
            self.joined_out,
            self.best
        )
        .saturating_add(joined)
    }

    /// Tries to honour [`Self::pairs`] on the fitting placement `out` of
    /// `p` (buffer i is location `locs[i]`), whose peak is `plain_peak`:
    /// rewrites `out` with the best placement that honours chains within
    /// `limit` bytes (module doc).
    #[allow(clippy::too_many_arguments)]
    pub fn honour(
        &mut self,
        p: &Problem,
        locs: &[MemLoc],
        gca: &mut GcaWorkspace,
        opts: &GcaOptions,
        limit: u64,
        trials: u32,
        out: &mut [Placement],
    ) -> AffinityReport {
        let mut r = AffinityReport {
            pairs: self.pairs.len() as u32,
            ..AffinityReport::default()
        };
        let Some(mut joined) = self.joined.take() else {
            r.untried = r.pairs;
            return r;
        };
        let n = p.len();
        if self.slot.capacity() < n || self.best.capacity() < n {
            self.joined = Some(joined);
            r.untried = r.pairs;
            return r;
        }
        self.link(p, locs, &mut r);
        if self.heads.is_empty() {
            self.joined = Some(joined);
            return r;
        }
        // All chains at once first: the common case where they cost nothing.
        for s in self.state.iter_mut() {
            *s = State::On;
        }
        let mut kept_any = false;
        r.trials += 1;
        if self.try_joined(p, &mut joined, gca, opts, limit) {
            for s in self.state.iter_mut() {
                *s = State::Kept;
            }
            kept_any = true;
        } else {
            for s in self.state.iter_mut() {
                *s = State::Off;
            }
            // Group testing: a range of chains that fits with those kept
            // is kept whole, one that does not is halved, a single chain
            // that does not is refused. The few chains that cost memory
            // are found in O(k log n) colorings for k of them, not n.
            self.ranges.clear();
            let n_heads = self.heads.len() as u32;
            self.ranges.push((n_heads / 2, n_heads));
            self.ranges.push((0, n_heads / 2));
            while let Some((lo, hi)) = self.ranges.pop() {
                if lo >= hi {
                    continue;
                }
                if r.trials > trials {
                    break;
                }
                let range = lo as usize..hi as usize;
                for s in &mut self.state[range.clone()] {
                    *s = State::On;
                }
                r.trials += 1;
                if self.try_joined(p, &mut joined, gca, opts, limit) {
                    for s in &mut self.state[range] {
                        *s = State::Kept;
                    }
                    kept_any = true;
                } else if hi - lo == 1 {
                    self.state[lo as usize] = State::Refused;
                } else {
                    for s in &mut self.state[range] {
                        *s = State::Off;
                    }
                    let mid = lo + (hi - lo) / 2;
                    if self.ranges.len() + 2 > self.ranges.capacity() {
                        break;
                    }
                    self.ranges.push((mid, hi));
                    self.ranges.push((lo, mid));
                }
            }
        }
        for h in 0..self.heads.len() {
            let links = self.chain_len(self.heads[h]) - 1;
            match self.state[h] {
                State::Kept => r.honoured += links,
                State::Refused if self.chain_disjoint(p, self.heads[h]) => r.lifetime += links,
                State::Refused => r.capacity += links,
                _ => r.untried += links,
            }
        }
        if kept_any {
            out.copy_from_slice(&self.best[..n]);
        }
        self.joined = Some(joined);
        r
    }

    /// Builds the chains of the pairs over the buffers of `p`; refusals
    /// that do not need a coloring are counted into `r`.
    fn link(&mut self, p: &Problem, locs: &[MemLoc], r: &mut AffinityReport) {
        let bufs = p.buffers();
        let n = bufs.len();
        self.buf_of.clear();
        self.buf_of.resize(self.buf_of.capacity(), NONE);
        for (i, l) in locs.iter().enumerate() {
            if let Some(x) = self.buf_of.get_mut(l.index()) {
                *x = i as u32;
            }
        }
        self.next.clear();
        self.next.resize(n, NONE);
        self.prev.clear();
        self.prev.resize(n, NONE);
        self.reach.clear();
        self.reach.resize(n, (u64::MAX, 0));
        self.heads.clear();
        self.state.clear();
        let free = |b: &Buffer| b.pin.is_none() && !b.is_void();
        for &AffinityPair {
            first: a,
            second: b,
            nest,
        } in &self.pairs
        {
            let ia = self.buf_of.get(a.index()).copied().unwrap_or(NONE);
            let ib = self.buf_of.get(b.index()).copied().unwrap_or(NONE);
            let (Some(ba), Some(bb)) = (bufs.get(ia as usize), bufs.get(ib as usize)) else {
                r.placed += 1;
                continue;
            };
            let (ia, ib) = (ia as usize, ib as usize);
            if !free(ba)
                || !free(bb)
                || ia == ib
                || ba.partitions != bb.partitions
                || self.next[ia] != NONE
                || self.prev[ib] != NONE
                || self.reaches(ib, ia)
            {
                r.placed += 1;
                continue;
            }
            // B's offset in the chain: the sizes from the head to A.
            let mut head = ia;
            let mut prefix = ba.size;
            while self.prev[head] != NONE {
                head = self.prev[head] as usize;
                prefix += bufs[head].size;
            }
            let head_align = bufs[head].align;
            if prefix % bb.align != 0 || head_align % bb.align != 0 {
                r.alignment += 1;
                continue;
            }
            // B may head a chain already: its members move with it, and
            // each must stay aligned at its new offset.
            let mut ok = true;
            let (mut k, mut off) = (ib, prefix);
            while k != NONE as usize {
                let bk = &bufs[k];
                if off % bk.align != 0 || head_align % bk.align != 0 {
                    ok = false;
                    break;
                }
                off += bk.size;
                k = self.next[k] as usize;
            }
            if !ok {
                r.alignment += 1;
                continue;
            }
            self.next[ia] = ib as u32;
            self.prev[ib] = ia as u32;
            if let Some((start, end)) = nest {
                // Positions are the problem's time: a buffer of positions
                // [s, e] is [s, e + 1).
                let span = (start as u64, end as u64 + 1);
                for k in [ia, ib] {
                    let r = &mut self.reach[k];
                    *r = (r.0.min(span.0), r.1.max(span.1));
                }
            }
        }
        for i in 0..n {
            if self.prev[i] == NONE && self.next[i] != NONE {
                self.heads.push(i as u32);
                self.state.push(State::Off);
            }
        }
        // Cheapest first: what joining adds to the live bytes is each
        // member's size over the part of the hull it was not live in. The
        // chains that add nothing lead, so the group tests below keep
        // them in few colorings and the costly ones gather at the end.
        let (next, reach) = (&self.next, &self.reach);
        let added = |head: u32| {
            let (mut lo, mut hi) = (u64::MAX, 0);
            let mut k = head as usize;
            while k != NONE as usize {
                lo = lo.min(bufs[k].lower).min(reach[k].0);
                hi = hi.max(bufs[k].upper).max(reach[k].1);
                k = next[k] as usize;
            }
            let mut cost = 0u64;
            let mut k = head as usize;
            while k != NONE as usize {
                let b = &bufs[k];
                let own = b.upper - b.lower;
                cost = cost.saturating_add(b.size.saturating_mul((hi - lo).saturating_sub(own)));
                k = next[k] as usize;
            }
            cost
        };
        self.heads.sort_unstable_by_key(|&h| (added(h), h));
    }

    /// True when following `next` from `from` reaches `to`.
    fn reaches(&self, from: usize, to: usize) -> bool {
        let mut k = from;
        while k != NONE as usize {
            if k == to {
                return true;
            }
            k = self.next[k] as usize;
        }
        false
    }

    fn chain_len(&self, head: u32) -> u32 {
        let (mut k, mut len) = (head as usize, 0);
        while k != NONE as usize {
            len += 1;
            k = self.next[k] as usize;
        }
        len
    }

    /// True when some two consecutive members of the chain never live at
    /// the same time.
    fn chain_disjoint(&self, p: &Problem, head: u32) -> bool {
        let bufs = p.buffers();
        let mut k = head as usize;
        while self.next[k] != NONE {
            let j = self.next[k] as usize;
            if !bufs[k].overlaps_in_time(&bufs[j]) {
                return true;
            }
            k = j;
        }
        false
    }

    /// Colors `p` with the chains in state `On` or `Kept` joined; when the
    /// peak is within `limit`, keeps the expanded placement in `best`.
    fn try_joined(
        &mut self,
        p: &Problem,
        joined: &mut Problem,
        gca: &mut GcaWorkspace,
        opts: &GcaOptions,
        limit: u64,
    ) -> bool {
        let bufs = p.buffers();
        let n = bufs.len();
        joined.clear();
        self.slot.clear();
        self.slot.resize(n, NONE);
        self.within.clear();
        self.within.resize(n, 0);
        let on = |s: State| matches!(s, State::On | State::Kept);
        for (h, &head) in self.heads.iter().enumerate() {
            if !on(self.state[h]) {
                continue;
            }
            let mut b = bufs[head as usize];
            let idx = joined.len() as u32;
            let (mut k, mut off) = (head as usize, 0);
            while k != NONE as usize {
                let bk = &bufs[k];
                b.lower = b.lower.min(bk.lower).min(self.reach[k].0);
                b.upper = b.upper.max(bk.upper).max(self.reach[k].1);
                self.slot[k] = idx;
                self.within[k] = off;
                off += bk.size;
                k = self.next[k] as usize;
            }
            b.size = off;
            if joined.push(b).is_err() {
                return false;
            }
        }
        for (i, b) in bufs.iter().enumerate() {
            if self.slot[i] != NONE {
                continue;
            }
            self.slot[i] = joined.len() as u32;
            if joined.push(*b).is_err() {
                return false;
            }
        }
        self.joined_out.clear();
        self.joined_out.resize(joined.len(), Placement::default());
        let g = gca.solve(joined, opts, &mut self.joined_out);
        if g.peak > limit {
            return false;
        }
        self.best.clear();
        for i in 0..n {
            let j = self.joined_out[self.slot[i] as usize];
            self.best.push(Placement {
                offset: j.offset + self.within[i],
                base: j.base,
            });
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::problem::peak;
    use crate::verify::buffers::Validator;

    /// Buffers `[lower, upper)` of 1024 B over all 128 partitions, buffer
    /// i being location i; the plain placement and the joiner's result.
    fn run(
        spans: &[(u64, u64)],
        pins: &[usize],
        pairs: &[(u32, u32)],
        limit_of: impl Fn(u64) -> u64,
    ) -> (Problem, AffinityReport, alloc::vec::Vec<Placement>, u64) {
        let t = Target::default();
        let mut p = Problem::partitioned(&t, 1 << 20, spans.len());
        for (i, &(lower, upper)) in spans.iter().enumerate() {
            let pin = pins.contains(&i).then_some(Placement {
                offset: 8192,
                base: 0,
            });
            p.push(Buffer {
                lower,
                upper,
                size: 1024,
                align: 4,
                partitions: 128,
                pin,
            })
            .unwrap();
        }
        let locs: alloc::vec::Vec<MemLoc> = (0..spans.len() as u32).map(MemLoc::from_u32).collect();
        let mut gca = GcaWorkspace::new();
        gca.reserve_for(&p, 0, 0);
        let opts = GcaOptions::default();
        let mut out = alloc::vec![Placement::default(); p.len()];
        let plain = gca.solve(&p, &opts, &mut out).peak;
        let mut j = Joiner::default();
        j.reserve(&t, 1 << 20, pairs.len(), p.len(), p.len());
        for &(a, b) in pairs {
            j.pairs.push(AffinityPair {
                first: MemLoc::from_u32(a),
                second: MemLoc::from_u32(b),
                nest: None,
            });
        }
        let r = j.honour(&p, &locs, &mut gca, &opts, limit_of(plain), 8, &mut out);
        let mut v = Validator::with_capacity(p.len(), 8);
        assert_eq!(v.check(&p, &out, u64::MAX).total, 0, "an illegal placement");
        (p, r, out, plain)
    }

    #[test]
    fn an_affinity_that_costs_nothing_is_honoured() {
        // b outlives a, so the plain colorer takes it first and puts a
        // above it; side by side costs nothing (c is live with both).
        let (p, r, out, plain) = run(&[(0, 3), (1, 5), (2, 4)], &[], &[(0, 1)], |pk| pk);
        assert_eq!((r.pairs, r.honoured, r.apart()), (1, 1, 0));
        assert_eq!(out[1].offset, out[0].offset + 1024);
        assert_eq!(out[1].base, out[0].base);
        assert_eq!(peak(&p, &out), plain);
    }

    #[test]
    fn an_affinity_past_the_limit_is_refused_for_capacity() {
        // a dies at 3, where w takes its cells; a and b side by side until
        // b's end would need a fourth slot.
        let spans = [(0, 3), (1, 6), (2, 6), (3, 6)];
        let (p, r, out, plain) = run(&spans, &[], &[(0, 1)], |pk| pk);
        assert_eq!(plain, 3072);
        assert_eq!((r.honoured, r.capacity, r.lifetime), (0, 1, 0));
        assert_eq!(peak(&p, &out), plain, "the plain placement is kept");
        assert_eq!(r.trials, 2, "all at once, then the one chain alone");
    }

    #[test]
    fn disjoint_lifetimes_are_refused_as_lifetime_and_pins_as_placed() {
        let (_, r, _, _) = run(&[(0, 2), (2, 4)], &[], &[(0, 1)], |pk| pk);
        assert_eq!((r.honoured, r.lifetime, r.capacity), (0, 1, 0));
        let (_, r, _, _) = run(&[(0, 3), (1, 5)], &[1], &[(0, 1)], |pk| pk);
        assert_eq!((r.honoured, r.placed, r.trials), (0, 1, 0));
    }

    #[test]
    fn chains_join_in_order_and_one_refused_chain_keeps_the_others() {
        // Chain 0 -> 1 -> 2 costs nothing (all live together); chain 3 -> 4
        // has disjoint lifetimes and is refused at the plain peak.
        let spans = [(0, 6), (0, 6), (0, 6), (0, 2), (3, 5)];
        let (_, r, out, _) = run(&spans, &[], &[(0, 1), (1, 2), (3, 4)], |pk| pk);
        assert_eq!((r.pairs, r.honoured, r.lifetime), (3, 2, 1));
        assert_eq!(out[1].offset, out[0].offset + 1024);
        assert_eq!(out[2].offset, out[1].offset + 1024);
    }
}
