//! Which buffers of a problem overlap in time: an interval index in linear
//! storage, instead of an all-pairs interference graph.
//!
//! The non-void buffers are sorted by lifetime start, and a max-tree over
//! that order holds the latest end of every range. The buffers overlapping
//! `[lower, upper)` are those that start before `upper` (a prefix of the
//! order) and end after `lower` (found by descending only into subtrees
//! whose latest end is after `lower`): a query costs O((1 + d) log n) for d
//! overlapping buffers, the storage is four words per buffer at any density,
//! and building it is one sort. Degrees come from two binary searches.
//!
//! The placement rules that ask "which placed buffers share an instant with
//! this one" (the greedy rules, the colorer's replays) walk this index and
//! skip the unplaced ones; their work is the overlaps they visit.

use alloc::vec::Vec;

use super::problem::{Buffer, Problem};

/// The interval index of one problem (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct OverlapIndex {
    /// Non-void buffer indices by (lower, index).
    by_lower: Vec<u32>,
    /// Their lowers, in that order.
    lowers: Vec<u64>,
    /// Their uppers, sorted (for degrees).
    uppers: Vec<u64>,
    /// Max-tree of the uppers in `by_lower` order; leaves at `size + p`.
    tree: Vec<u64>,
    size: usize,
}

impl OverlapIndex {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.by_lower, self.lowers, self.uppers, self.tree)
    }

    /// Heap bytes the index of `n` buffers takes.
    pub fn bytes_for(n: usize) -> u64 {
        use crate::storage::bytes_of;
        bytes_of::<u32>(n)
            .saturating_add(bytes_of::<u64>(2 * n))
            .saturating_add(bytes_of::<u64>(2 * n.next_power_of_two()))
    }

    /// Grows the storage to problems of `n` buffers.
    pub fn reserve(&mut self, n: usize) {
        fn at_least<T>(v: &mut Vec<T>, n: usize) {
            crate::storage::grow(v, n);
        }
        at_least(&mut self.by_lower, n);
        at_least(&mut self.lowers, n);
        at_least(&mut self.uppers, n);
        at_least(&mut self.tree, 2 * n.next_power_of_two());
    }

    /// Whether the reserved storage holds problems of `n` buffers without
    /// growing.
    pub fn holds(&self, n: usize) -> bool {
        self.by_lower.capacity() >= n
            && self.lowers.capacity() >= n
            && self.uppers.capacity() >= n
            && self.tree.capacity() >= 2 * n.next_power_of_two()
    }

    /// Rebuilds the index over the non-void buffers of `problem`.
    pub fn build(&mut self, problem: &Problem) {
        let bufs = problem.buffers();
        self.by_lower.clear();
        self.by_lower
            .extend((0..bufs.len() as u32).filter(|&i| !bufs[i as usize].is_void()));
        self.by_lower
            .sort_unstable_by_key(|&i| (bufs[i as usize].lower, i));
        self.lowers.clear();
        self.lowers
            .extend(self.by_lower.iter().map(|&i| bufs[i as usize].lower));
        self.uppers.clear();
        self.uppers
            .extend(self.by_lower.iter().map(|&i| bufs[i as usize].upper));
        let m = self.by_lower.len();
        self.size = m.next_power_of_two().max(1);
        self.tree.clear();
        self.tree.resize(2 * self.size, 0);
        for (p, &u) in self.uppers.iter().enumerate() {
            self.tree[self.size + p] = u;
        }
        for i in (1..self.size).rev() {
            self.tree[i] = self.tree[2 * i].max(self.tree[2 * i + 1]);
        }
        self.uppers.sort_unstable();
    }

    /// Calls `f(index)` for every indexed buffer whose lifetime shares an
    /// instant with `b`'s (`b` itself included when it is indexed).
    pub fn for_each_overlapping(&self, b: &Buffer, f: impl FnMut(u32)) {
        self.walk(&self.tree, b, f);
    }

    /// The descent of [`for_each_overlapping`](Self::for_each_overlapping)
    /// over `tree`, a max-tree of uppers in this index's order whose every
    /// node is at most the index's own (so it prunes at least as much).
    fn walk(&self, tree: &[u64], b: &Buffer, mut f: impl FnMut(u32)) {
        if b.is_void() || self.by_lower.is_empty() {
            return;
        }
        let end = self.lowers.partition_point(|&l| l < b.upper);
        // Nodes (index, first leaf, leaf count) still to visit; the depth of
        // the tree bounds the stack (two entries per level).
        let mut stack = [(0usize, 0usize, 0usize); 2 * usize::BITS as usize];
        let mut top = 1;
        stack[0] = (1, 0, self.size);
        while top > 0 {
            top -= 1;
            let (i, first, len) = stack[top];
            if first >= end || tree[i] <= b.lower {
                continue;
            }
            if len == 1 {
                f(self.by_lower[first]);
                continue;
            }
            let half = len / 2;
            stack[top] = (2 * i + 1, first + half, half);
            stack[top + 1] = (2 * i, first, half);
            top += 2;
        }
    }

    /// Indexed buffers other than `b` that overlap it in time (`b` must be
    /// one of the indexed buffers, or void).
    pub fn degree(&self, b: &Buffer) -> u32 {
        if b.is_void() {
            return 0;
        }
        let started = self.lowers.partition_point(|&l| l < b.upper);
        let ended = self.uppers.partition_point(|&u| u <= b.lower);
        (started - ended).saturating_sub(1) as u32
    }

    /// Pairs of indexed buffers that overlap in time.
    pub fn pairs(&self, problem: &Problem) -> u64 {
        let bufs = problem.buffers();
        let sum: u64 = self
            .by_lower
            .iter()
            .map(|&i| self.degree(&bufs[i as usize]) as u64)
            .sum();
        sum / 2
    }
}

/// A growing subset of the buffers of an [`OverlapIndex`] ("inserted", e.g.
/// the placed ones), queried by time overlap without visiting the others.
///
/// It keeps a second max-tree over the index's lifetime-start order whose
/// leaves are an inserted buffer's end and 0 for the rest, so a query
/// descends only into subtrees holding an inserted buffer that ends after
/// the query's start: O((1 + d) log n) for d inserted overlaps, however many
/// uninserted buffers share the interval. Insertion updates one leaf-to-root
/// path, O(log n). Storage: one word per buffer plus the tree.
#[derive(Clone, Debug, Default)]
pub struct OverlapSubset {
    /// Leaf position of every buffer in the index's order (`u32::MAX`: void).
    pos: Vec<u32>,
    /// Max-tree of the inserted uppers; leaves at `size + p`.
    live: Vec<u64>,
}

impl OverlapSubset {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.pos, self.live)
    }

    /// Grows the storage to problems of `n` buffers.
    pub fn reserve(&mut self, n: usize) {
        crate::storage::grow(&mut self.pos, n);
        let t = 2 * n.next_power_of_two();
        crate::storage::grow(&mut self.live, t);
    }

    /// Empties the subset for `index` (built over a problem of `n` buffers).
    pub fn reset(&mut self, index: &OverlapIndex, n: usize) {
        self.pos.clear();
        self.pos.resize(n, u32::MAX);
        for (p, &i) in index.by_lower.iter().enumerate() {
            self.pos[i as usize] = p as u32;
        }
        self.live.clear();
        self.live.resize(2 * index.size, 0);
    }

    /// Adds buffer `i` (of the problem `index` was built over; void buffers
    /// are ignored: they overlap nothing).
    pub fn insert(&mut self, index: &OverlapIndex, i: usize) {
        let p = self.pos[i];
        if p == u32::MAX {
            return;
        }
        let mut at = index.size + p as usize;
        let u = index.tree[at];
        while at >= 1 && self.live[at] < u {
            self.live[at] = u;
            at /= 2;
        }
    }

    /// Calls `f(index)` for every inserted buffer whose lifetime shares an
    /// instant with `b`'s, in the index's lifetime-start order.
    pub fn for_each_overlapping(&self, index: &OverlapIndex, b: &Buffer, f: impl FnMut(u32)) {
        index.walk(&self.live, b, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::dsa::SplitMix64;
    use alloc::vec;

    #[test]
    fn queries_and_degrees_match_all_pairs() {
        let mut rng = SplitMix64::new(11);
        for round in 0..40 {
            let n = 1 + rng.below(60) as usize;
            let mut p = Problem::linear(1 << 20, n);
            for _ in 0..n {
                let lower = rng.below(50);
                let upper = lower + rng.below(12);
                p.push(Buffer::linear(lower, upper, rng.below(4))).unwrap();
            }
            let mut ix = OverlapIndex::default();
            ix.reserve(n);
            ix.build(&p);
            let bufs = p.buffers();
            let mut pairs = 0;
            for (i, a) in bufs.iter().enumerate() {
                let mut got = vec![];
                ix.for_each_overlapping(a, |j| got.push(j as usize));
                got.sort_unstable();
                let want: Vec<usize> = (0..n)
                    .filter(|&j| !bufs[j].is_void() && !a.is_void() && a.overlaps_in_time(&bufs[j]))
                    .collect();
                assert_eq!(got, want, "round {round} buffer {i}");
                if !a.is_void() {
                    assert_eq!(ix.degree(a) as usize, want.len() - 1);
                    pairs += want.len() - 1;
                }
            }
            assert_eq!(ix.pairs(&p), pairs as u64 / 2);
            // A growing subset reports exactly its own overlapping members.
            let mut sub = OverlapSubset::default();
            sub.reserve(n);
            sub.reset(&ix, n);
            let mut member = vec![false; n];
            for step in 0..n {
                let k = rng.below(n as u64) as usize;
                sub.insert(&ix, k);
                member[k] = true;
                let a = &bufs[step];
                let mut got = vec![];
                sub.for_each_overlapping(&ix, a, |j| got.push(j as usize));
                got.sort_unstable();
                let want: Vec<usize> = (0..n)
                    .filter(|&j| member[j] && !bufs[j].is_void() && !a.is_void())
                    .filter(|&j| a.overlaps_in_time(&bufs[j]))
                    .collect();
                assert_eq!(got, want, "round {round} subset step {step}");
            }
        }
    }
}
