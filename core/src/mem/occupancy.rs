//! Which offsets the placed buffers occupy over a span of time, for the
//! lowest-fit query of greedy placement without visiting every placed
//! neighbour.
//!
//! A segment tree over the problem's elementary intervals of time (between
//! consecutive distinct lifetime ends). A placed buffer's offset range is
//! added to the *cover* set of each canonical node of its lifetime (the
//! O(log T) nodes whose time ranges tile it) and to the *below* set of
//! those nodes and all their ancestors. Each set is the union of what was
//! added to it, kept as disjoint, non-touching ranges in a treap keyed by
//! their ends, each linked to the next in offset order.
//!
//! The buffers sharing an instant with a lifetime are exactly those in the
//! below sets of its canonical nodes and in the cover sets of their proper
//! ancestors (a shared instant lies under one canonical node; the buffer's
//! own canonical node over that instant is either inside it or above it).
//! The lowest aligned offset where a buffer fits is found by merging those
//! O(log T) sets' ranges in start order: a range that meets the buffer at
//! the current offset moves the offset to its aligned end, until the
//! lowest remaining range starts clear above the buffer. Every move skips
//! only offsets that meet an occupied range, so the answer is the lowest,
//! the same as a walk of every placed neighbour sorted by offset.
//!
//! Why it is faster: the sets are unions, so a stack of placed buffers
//! over the same span of time is one range, passed in one step, where the
//! neighbour walk collects and sorts every one of them; the query visits
//! O(log T) sets whatever the lifetime's length, and a set's cursor moves
//! to the next range by its link (a treap search only when the offset
//! jumped far). The storage is reserved
//! once: instants and set roots linear in the buffers, and
//! [`RANGES_PER_BUFFER`] ranges per buffer; a placement that needs more
//! ranges than reserved gets an error from [`Occupancy::add`], and the
//! caller walks the neighbours for the rest.
//!
//! Linear mode only: a range here spans every partition.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;

use crate::collections::treap::{self, treap_pool, NIL};

use super::problem::{align_offset, Buffer, Problem};

/// Sets a lifetime's decomposition lists at most: a level has at most two
/// partly covered nodes (one set each) and two canonical ones (two sets
/// each when inserting), and a tree over at most 2^64 instants has 65
/// levels.
const QUERY_NODES: usize = 6 * 65;

/// Ranges reserved per buffer. A lifetime has at most `2 log T` canonical
/// nodes and as many ancestors, but the ranges that meet or touch in a set
/// merge: the sets high in the tree hold the union of many buffers (dense,
/// few ranges), the low ones few buffers each.
pub const RANGES_PER_BUFFER: usize = 8;

/// The reserved ranges are all in use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OccupancyFull;

/// One occupied offset range `[start, end)` kept at a node.
#[derive(Copy, Clone, Debug)]
struct Range {
    start: u64,
    end: u64,
    /// The set's next range in offset order, or [`NIL`].
    next: u32,
    prio: u32,
    left: u32,
    right: u32,
}

treap_pool!(Range, left, right, prio);

/// A query's place in one set: the set's root slot and its first range
/// ending above the offset as it was when the cursor was taken. Cursors
/// compare by that range's start, reversed, so that a max-heap of them
/// has the lowest-starting on top (the merge's next range).
#[derive(Copy, Clone, Debug)]
struct Cursor {
    /// The range's start, `u64::MAX` past the set's last range.
    start: u64,
    end: u64,
    range: u32,
    slot: u32,
}

impl PartialEq for Cursor {
    fn eq(&self, other: &Self) -> bool {
        self.start == other.start
    }
}

impl Eq for Cursor {}

impl PartialOrd for Cursor {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cursor {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        other.start.cmp(&self.start)
    }
}

/// Ranges a stale cursor follows through `next` before it searches its
/// set from the root instead: a jump usually lands just past the range
/// it jumped, so the next one is the answer.
const STEPS_BEFORE_SEARCH: u32 = 4;

/// The priorities' seed at every [`Occupancy::build`]: the same problem
/// placed the same way builds the same treaps.
const SEED: u32 = 0x2545_F491;

/// Occupied offsets over time; see the module doc.
#[derive(Debug, Default)]
pub struct Occupancy {
    /// Distinct lifetime ends of the problem's non-void buffers, sorted.
    instants: Vec<u64>,
    /// Treap roots: the cover set of segment-tree node `v` (1-based heap
    /// order, leaves from `leaves_pow2`) at `v`, its below set at
    /// `2 * leaves_pow2 + v`.
    roots: Vec<u32>,
    ranges: Vec<Range>,
    /// Freed ranges, chained through `left`.
    free: u32,
    leaves_pow2: usize,
    seed: u32,
    /// The sets (root slots) of the current query or insertion.
    nodes: Vec<u32>,
    /// The decomposition's pending nodes `(node, first leaf, end leaf)`.
    stack: Vec<(u32, usize, usize)>,
    /// Per nonempty set of the query, its next range `(start, end)` and
    /// its root slot; the lowest start on top.
    cursors: BinaryHeap<Cursor>,
}

impl Occupancy {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.instants,
            self.roots,
            self.ranges,
            self.nodes,
            self.stack,
            self.cursors
        )
    }

    /// Heap bytes [`Self::reserve`] takes for `buffers` buffers.
    pub fn bytes_for(buffers: usize) -> u64 {
        let instants = buffers.saturating_mul(2) as u64;
        let roots = instants.max(1).next_power_of_two().saturating_mul(4);
        let size = |bytes: usize| bytes as u64;
        instants * size(core::mem::size_of::<u64>())
            + roots * size(core::mem::size_of::<u32>())
            + buffers as u64 * RANGES_PER_BUFFER as u64 * size(core::mem::size_of::<Range>())
            + QUERY_NODES as u64
                * size(
                    core::mem::size_of::<u32>()
                        + core::mem::size_of::<(u32, usize, usize)>()
                        + core::mem::size_of::<Cursor>(),
                )
    }

    /// Sizes the storage for problems of up to `buffers` buffers.
    pub fn reserve(&mut self, buffers: usize) {
        let instants = buffers.saturating_mul(2);
        crate::storage::grow(&mut self.instants, instants);
        let pow2 = instants.max(1).next_power_of_two();
        crate::storage::grow(&mut self.roots, pow2.saturating_mul(4));
        crate::storage::grow(&mut self.ranges, buffers.saturating_mul(RANGES_PER_BUFFER));
        crate::storage::grow(&mut self.nodes, QUERY_NODES);
        crate::storage::grow(&mut self.stack, QUERY_NODES);
        self.cursors
            .reserve(QUERY_NODES.saturating_sub(self.cursors.len()));
    }

    /// Empties the tree over `problem`'s instants. False when the problem
    /// is partitioned or larger than the reservation (nothing is kept then
    /// and every query answers `None`).
    pub fn build(&mut self, problem: &Problem) -> bool {
        self.instants.clear();
        self.roots.clear();
        self.ranges.clear();
        self.free = NIL;
        self.seed = SEED;
        self.leaves_pow2 = 0;
        let bufs = problem.buffers();
        if problem.is_partitioned() || bufs.len().saturating_mul(2) > self.instants.capacity() {
            return false;
        }
        for b in bufs.iter().filter(|b| !b.is_void()) {
            self.instants.push(b.lower);
            self.instants.push(b.upper);
        }
        self.instants.sort_unstable();
        self.instants.dedup();
        let leaves = self.instants.len().saturating_sub(1).max(1);
        let pow2 = leaves.next_power_of_two();
        if pow2 * 4 > self.roots.capacity() {
            return false;
        }
        self.roots.resize(pow2 * 4, NIL);
        self.leaves_pow2 = pow2;
        true
    }

    /// Empties every set, keeping the built problem's instants: the same
    /// problem placed again.
    pub fn clear(&mut self) {
        self.roots.fill(NIL);
        self.ranges.clear();
        self.free = NIL;
        self.seed = SEED;
    }

    /// Lists in `nodes` the sets that hold the placed buffers sharing an
    /// instant with `b` (non-void, of the built problem): with `insert`,
    /// the sets `b` goes into (cover sets of its canonical nodes, below
    /// sets of those and their ancestors); else the sets a query reads
    /// (below sets of the canonical nodes, cover sets of the ancestors).
    fn decompose(&mut self, b: &Buffer, insert: bool) {
        let rank = |t: u64| self.instants.partition_point(|&x| x < t);
        let (l, r) = (rank(b.lower), rank(b.upper));
        let below = 2 * self.leaves_pow2 as u32;
        self.nodes.clear();
        self.stack.clear();
        self.stack.push((1, 0, self.leaves_pow2));
        while let Some((v, lo, hi)) = self.stack.pop() {
            if hi <= l || r <= lo {
                continue;
            }
            if l <= lo && hi <= r {
                self.nodes.push(below + v);
                if insert {
                    self.nodes.push(v);
                }
                continue;
            }
            self.nodes.push(if insert { below + v } else { v });
            let mid = lo + (hi - lo) / 2;
            self.stack.push((2 * v, lo, mid));
            self.stack.push((2 * v + 1, mid, hi));
        }
    }

    /// The lowest offset, a multiple of `b.align`, at which `b` meets no
    /// occupied range during its lifetime; `None` when the tree is not
    /// built.
    pub fn lowest_fit(&mut self, b: &Buffer) -> Option<u64> {
        if self.leaves_pow2 == 0 {
            return None;
        }
        if b.is_void() {
            return Some(0);
        }
        self.decompose(b, false);
        // A merge of the sets' ranges in start order: each set's cursor is
        // its first range ending above the offset as it was when the cursor
        // was taken; the lowest-starting cursor either lies clear above the
        // buffer (then every one does: done), or is stale (taken again), or
        // meets the buffer (the offset jumps over it).
        let pool = &self.ranges[..];
        let roots = &self.roots;
        let cursor = |slot: u32, from: u32, off: u64| -> Cursor {
            let mut at = from;
            let mut steps = 0;
            while let Some(r) = pool.get(at as usize) {
                if r.end > off {
                    break;
                }
                steps += 1;
                at = if steps < STEPS_BEFORE_SEARCH {
                    r.next
                } else {
                    treap::partition(pool, roots[slot as usize], |p, x| p[x as usize].end <= off).1
                };
            }
            let (start, end) = pool
                .get(at as usize)
                .map_or((u64::MAX, u64::MAX), |r| (r.start, r.end));
            Cursor {
                start,
                end,
                range: at,
                slot,
            }
        };
        let mut off = 0u64;
        self.cursors.clear();
        for &slot in &self.nodes {
            let root = roots[slot as usize];
            if root != NIL {
                // The set's first range: leftmost of its treap.
                let first = treap::partition(pool, root, |_, _| false).1;
                self.cursors.push(cursor(slot, first, off));
            }
        }
        // The heap holds one cursor per nonempty set (reserved: no
        // allocation); the top is replaced in place, then sifted down.
        while let Some(mut top) = self.cursors.peek_mut() {
            let c = *top;
            if c.start >= off.saturating_add(b.size) {
                break;
            }
            if c.end > off {
                off = align_offset(c.end, b.align);
            }
            *top = cursor(c.slot, c.range, off);
        }
        Some(off)
    }

    /// Records `b` placed at `offset`. Does nothing when the tree is not
    /// built or `b` is void; an error when the reserved ranges run out
    /// (the tree is then incomplete: build it again before the next query).
    pub fn add(&mut self, b: &Buffer, offset: u64) -> Result<(), OccupancyFull> {
        if self.leaves_pow2 == 0 || b.is_void() {
            return Ok(());
        }
        self.decompose(b, true);
        for k in 0..self.nodes.len() {
            self.add_at(self.nodes[k] as usize, offset, offset + b.size)?;
        }
        Ok(())
    }

    /// Adds `[start, end)` to the set at root slot `v`: the ranges it
    /// meets or touches (consecutive in offset order) merge into one.
    ///
    /// The sets' ranges are disjoint, so ordering them by end orders them
    /// by start too: the first range met grows in place to the union
    /// (its key moves, but not past a neighbour, since the ranges it
    /// swallows on the way up are removed), and only a range met by none
    /// is inserted. Stacking onto or next to a placed range, the common
    /// case, is then one descent and no treap change.
    fn add_at(&mut self, v: usize, start: u64, end: u64) -> Result<(), OccupancyFull> {
        // The last range ending before `start` (it will link to a new
        // range) and the first range that does not.
        let (before, at) = treap::partition(&self.ranges[..], self.roots[v], |p, x| {
            p[x as usize].end < start
        });
        match self.ranges.get(at as usize) {
            Some(&met) if met.start <= end => {
                let mut grown = end.max(met.end);
                // Later ranges the union reaches: out of the treap, their
                // links bypassed (the met range keeps its old end, its key,
                // until they are gone).
                let mut next = met.next;
                while let Some(&r) = self.ranges.get(next as usize) {
                    if r.start > grown {
                        break;
                    }
                    let (root, gone) =
                        treap::remove(&mut self.ranges[..], self.roots[v], |p, x| {
                            r.end.cmp(&p[x as usize].end)
                        });
                    self.roots[v] = root;
                    self.ranges[gone as usize].left = self.free;
                    self.free = gone;
                    next = r.next;
                    grown = grown.max(r.end);
                }
                let m = &mut self.ranges[at as usize];
                m.start = m.start.min(start);
                m.end = grown;
                m.next = next;
                Ok(())
            }
            _ => {
                let range = Range {
                    start,
                    end,
                    next: at,
                    prio: crate::rng::xorshift32(&mut self.seed),
                    left: NIL,
                    right: NIL,
                };
                let n = treap::take_slot(&mut self.ranges, &mut self.free, range, |r| r.left)
                    .ok_or(OccupancyFull)?;
                if let Some(r) = self.ranges.get_mut(before as usize) {
                    r.next = n;
                }
                self.roots[v] = treap::insert(&mut self.ranges[..], self.roots[v], n, |p, x| {
                    p[x as usize].end < end
                });
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::dsa::{trace_like, SplitMix64, TraceLike};

    /// The lowest fit by the definition: the least aligned offset whose
    /// range meets no placed buffer sharing an instant.
    fn by_definition(p: &Problem, placed: &[(usize, u64)], b: &Buffer) -> u64 {
        let bufs = p.buffers();
        let mut off = 0;
        loop {
            let hit = placed.iter().find(|&&(j, o)| {
                bufs[j].overlaps_in_time(b) && o < off + b.size && off < o + bufs[j].size
            });
            match hit {
                Some(&(j, o)) => off = align_offset(o + bufs[j].size, b.align),
                None => return off,
            }
        }
    }

    #[test]
    fn queries_agree_with_the_definition() {
        let mut p = Problem::linear(u64::MAX / 8, 600);
        let mut rng = SplitMix64::new(3);
        for seed in 0..4 {
            trace_like(&TraceLike::new(600), seed, &mut p).unwrap();
            let mut occ = Occupancy::default();
            occ.reserve(p.len());
            assert!(occ.build(&p));
            let mut placed = Vec::new();
            for i in 0..p.len() {
                let mut b = p.buffers()[i];
                if b.is_void() {
                    continue;
                }
                b.align = 1 << (rng.next_u64() % 4);
                let want = by_definition(&p, &placed, &b);
                assert_eq!(occ.lowest_fit(&b), Some(want), "buffer {i}");
                // Place it at the fit or, now and then, higher up, so that
                // the ranges of a set have holes between them.
                let at = want + (rng.next_u64() % 3) * b.size;
                occ.add(&b, at).unwrap();
                placed.push((i, at));
            }
        }
    }

    /// The ranges of the set at root slot `v`, in offset order (by the
    /// links from the treap's leftmost).
    fn ranges_of(occ: &Occupancy, v: usize) -> Vec<(u64, u64)> {
        let pool = &occ.ranges[..];
        let mut at = treap::partition(pool, occ.roots[v], |_, _| false).1;
        let mut out = Vec::new();
        while let Some(r) = pool.get(at as usize) {
            out.push((r.start, r.end));
            at = r.next;
        }
        out
    }

    #[test]
    fn a_range_that_meets_or_bridges_others_merges_with_them() {
        // Buffers of one lifetime: every one goes to the same sets.
        let mut p = Problem::linear(1 << 20, 8);
        for _ in 0..8 {
            p.push(Buffer::linear(0, 4, 8)).unwrap();
        }
        let mut occ = Occupancy::default();
        occ.reserve(p.len());
        assert!(occ.build(&p));
        let b = p.buffers()[0];
        for at in [0, 16, 32, 56] {
            occ.add(&b, at).unwrap();
        }
        occ.decompose(&b, true);
        let v = occ.nodes[0] as usize;
        assert_eq!(ranges_of(&occ, v), [(0, 8), (16, 24), (32, 40), (56, 64)]);
        // Touching the first from above grows it in place; bridging the
        // next two swallows them; one met by none is new.
        occ.add(&Buffer::linear(0, 4, 4), 8).unwrap();
        assert_eq!(ranges_of(&occ, v), [(0, 12), (16, 24), (32, 40), (56, 64)]);
        occ.add(&Buffer::linear(0, 4, 28), 12).unwrap();
        assert_eq!(ranges_of(&occ, v), [(0, 40), (56, 64)]);
        occ.add(&Buffer::linear(0, 4, 4), 44).unwrap();
        assert_eq!(ranges_of(&occ, v), [(0, 40), (44, 48), (56, 64)]);
        // Touching one from below: its start moves down.
        occ.add(&Buffer::linear(0, 4, 4), 52).unwrap();
        assert_eq!(ranges_of(&occ, v), [(0, 40), (44, 48), (52, 64)]);
        assert_eq!(occ.lowest_fit(&Buffer::linear(0, 4, 4)), Some(40));
        assert_eq!(occ.lowest_fit(&Buffer::linear(0, 4, 5)), Some(64));
        // Every swallowed range went back to the free list and is reused.
        let used = occ.ranges.len();
        occ.add(&Buffer::linear(0, 4, 16), 40).unwrap();
        assert_eq!(ranges_of(&occ, v), [(0, 64)]);
        occ.add(&Buffer::linear(0, 4, 8), 100).unwrap();
        assert_eq!(occ.ranges.len(), used, "a freed range is taken first");
    }

    #[test]
    fn long_and_short_lifetimes_nest_and_a_partitioned_problem_is_refused() {
        let mut p = Problem::linear(1 << 20, 65);
        for k in 0..64 {
            p.push(Buffer::linear(k, k + 1, 8)).unwrap();
        }
        p.push(Buffer::linear(0, 64, 8)).unwrap();
        let mut occ = Occupancy::default();
        occ.reserve(p.len());
        assert!(occ.build(&p));
        let long = p.buffers()[64];
        occ.add(&long, 0).unwrap();
        // Under the long one: a short one goes above it.
        assert_eq!(occ.lowest_fit(&p.buffers()[3]), Some(8));
        occ.add(&p.buffers()[3], 8).unwrap();
        occ.add(&p.buffers()[40], 16).unwrap();
        // A long one over both short ones: above the highest.
        assert_eq!(occ.lowest_fit(&long), Some(24));
        assert_eq!(occ.lowest_fit(&Buffer::linear(3, 5, 8)), Some(16));
        assert_eq!(occ.lowest_fit(&Buffer::linear(4, 40, 8)), Some(8));
        let t = crate::target::Target::default();
        let q = Problem::partitioned(&t, 1 << 20, 4);
        assert!(!occ.build(&q));
        assert_eq!(occ.lowest_fit(&Buffer::linear(0, 1, 8)), None);
    }

    #[test]
    fn the_reservation_is_what_bytes_for_says() {
        for n in [0, 1, 5, 1000] {
            let mut occ = Occupancy::default();
            occ.reserve(n);
            assert!(occ.heap_bytes() >= Occupancy::bytes_for(n), "{n}");
            assert!(occ.heap_bytes() <= Occupancy::bytes_for(n) + 64 * 64, "{n}");
        }
    }

    #[test]
    fn running_out_of_ranges_is_an_error() {
        let mut p = Problem::linear(1 << 20, 4);
        p.push(Buffer::linear(0, 4, 8)).unwrap();
        let mut occ = Occupancy::default();
        occ.reserve(1);
        assert!(occ.build(&p));
        // Disjoint ranges at the root's one node never merge.
        let b = p.buffers()[0];
        let mut err = None;
        for k in 0..=RANGES_PER_BUFFER as u64 * 2 {
            if let Err(e) = occ.add(&b, k * 16) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(err, Some(OccupancyFull));
    }
}
