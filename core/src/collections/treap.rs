//! Treaps kept in a node pool: split, merge, insert, remove and the
//! ordered searches, for every ordered set of the crate — the dataflow
//! checker's slab trees (one per region, keyed by first byte), the
//! placement verifier's active sets (one per slab, keyed by first byte and
//! location) and the best-fit manager's free-block indexes ([`TreapMap`]).
//!
//! Every operation is a loop, not recursion: a treap is O(log n) deep only
//! in expectation, and the priorities are not secret (on firmware they are
//! a fixed sequence), so an input crafted against them may make a treap
//! deep — slower then, never a stack overflow.
//!
//! The pool owns the nodes; a treap is its root index, [`NIL`] when empty.
//! Keys are distinct; the operations see them only through the caller's
//! predicates, which must be monotone along the in-order sequence.
//! Augmented trees (the verifier keeps the largest end of each subtree)
//! recompute what they keep from the nodes [`split`] and [`merge`] report
//! as `touched`, deepest last: pulling them in reverse order is bottom-up.

use alloc::vec::Vec;
use core::cmp::Ordering;

/// No node: an empty treap, a missing child.
pub(crate) const NIL: u32 = u32::MAX;

/// A pool of treap nodes addressed by `u32` index: each node's two child
/// links and its heap priority (a parent's priority is at least its
/// children's).
pub(crate) trait TreapPool {
    /// The left child of `n` (smaller keys), or [`NIL`].
    fn left(&self, n: u32) -> u32;
    /// The right child of `n` (larger keys), or [`NIL`].
    fn right(&self, n: u32) -> u32;
    /// Sets the left child of `n`.
    fn set_left(&mut self, n: u32, child: u32);
    /// Sets the right child of `n`.
    fn set_right(&mut self, n: u32, child: u32);
    /// The heap priority of `n`.
    fn prio(&self, n: u32) -> u32;
}

/// Splits treap `t` into the nodes for which `below` holds — a prefix of
/// its in-order sequence, e.g. the keys below a bound — and the rest;
/// returns the two roots. Pushes every node whose children changed on
/// `touched` (deepest last) when given.
pub(crate) fn split<P: TreapPool + ?Sized>(
    pool: &mut P,
    t: u32,
    below: impl Fn(&P, u32) -> bool,
    mut touched: Option<&mut Vec<u32>>,
) -> (u32, u32) {
    let (mut low, mut high) = (NIL, NIL);
    // The last node of each side, whose open child the next one takes:
    // the right child on the low side, the left on the high side.
    let (mut low_last, mut high_last) = (NIL, NIL);
    let mut at = t;
    while at != NIL {
        if let Some(v) = touched.as_deref_mut() {
            v.push(at);
        }
        let low_side = below(pool, at);
        let (root, last) = if low_side {
            (&mut low, &mut low_last)
        } else {
            (&mut high, &mut high_last)
        };
        if *last == NIL {
            *root = at;
        } else if low_side {
            pool.set_right(*last, at);
        } else {
            pool.set_left(*last, at);
        }
        *last = at;
        at = if low_side {
            pool.right(at)
        } else {
            pool.left(at)
        };
    }
    if low_last != NIL {
        pool.set_right(low_last, NIL);
    }
    if high_last != NIL {
        pool.set_left(high_last, NIL);
    }
    (low, high)
}

/// Joins treaps `a` and `b`, every key of `a` below every key of `b`;
/// returns the root. Pushes every node whose children changed on `touched`
/// (deepest last) when given.
pub(crate) fn merge<P: TreapPool + ?Sized>(
    pool: &mut P,
    mut a: u32,
    mut b: u32,
    mut touched: Option<&mut Vec<u32>>,
) -> u32 {
    let mut root = NIL;
    // Where the next node goes: the right child of a node taken from `a`,
    // the left child of one taken from `b`.
    let (mut last, mut last_from_a) = (NIL, false);
    loop {
        let from_a = b == NIL || (a != NIL && pool.prio(a) >= pool.prio(b));
        let pick = if from_a { a } else { b };
        if last == NIL {
            root = pick;
        } else if last_from_a {
            pool.set_right(last, pick);
        } else {
            pool.set_left(last, pick);
        }
        if a == NIL || b == NIL {
            return root;
        }
        if let Some(v) = touched.as_deref_mut() {
            v.push(pick);
        }
        last = pick;
        last_from_a = from_a;
        if from_a {
            a = pool.right(pick);
        } else {
            b = pool.left(pick);
        }
    }
}

/// Inserts node `n`, whose children are [`NIL`], into treap `t`; returns
/// the root. `below(pool, x)` is true when node `x`'s key is below `n`'s.
pub(crate) fn insert<P: TreapPool + ?Sized>(
    pool: &mut P,
    t: u32,
    n: u32,
    below: impl Fn(&P, u32) -> bool,
) -> u32 {
    let prio = pool.prio(n);
    // Down to the first node `n` outranks: `n` takes its place, with that
    // subtree split around its key as children.
    let (mut parent, mut left_side, mut at) = (NIL, false, t);
    while at != NIL && prio <= pool.prio(at) {
        parent = at;
        left_side = !below(pool, at);
        at = if left_side {
            pool.left(at)
        } else {
            pool.right(at)
        };
    }
    let (a, b) = split(pool, at, &below, None);
    pool.set_left(n, a);
    pool.set_right(n, b);
    attach(pool, t, parent, left_side, n)
}

/// Removes from treap `t` the node at which `order(pool, x)` — the sought
/// key compared with node `x`'s — is `Equal`; returns the root and the
/// node taken out ([`NIL`] when no key matched; its links are left as
/// they were).
pub(crate) fn remove<P: TreapPool + ?Sized>(
    pool: &mut P,
    t: u32,
    order: impl Fn(&P, u32) -> Ordering,
) -> (u32, u32) {
    let (mut parent, mut left_side, mut at) = (NIL, false, t);
    loop {
        if at == NIL {
            return (t, NIL);
        }
        match order(pool, at) {
            Ordering::Equal => break,
            o => {
                parent = at;
                left_side = o == Ordering::Less;
                at = if left_side {
                    pool.left(at)
                } else {
                    pool.right(at)
                };
            }
        }
    }
    let (l, r) = (pool.left(at), pool.right(at));
    let sub = merge(pool, l, r, None);
    (attach(pool, t, parent, left_side, sub), at)
}

/// Hangs `sub` where the descent stopped: the root when `parent` is
/// [`NIL`], else `parent`'s child on `left_side`. Returns the root.
fn attach<P: TreapPool + ?Sized>(
    pool: &mut P,
    t: u32,
    parent: u32,
    left_side: bool,
    sub: u32,
) -> u32 {
    if parent == NIL {
        sub
    } else {
        if left_side {
            pool.set_left(parent, sub);
        } else {
            pool.set_right(parent, sub);
        }
        t
    }
}

/// Where `before(pool, x)` stops holding along the in-order sequence: the
/// last node at which it holds and the first at which it does not
/// ([`NIL`] for none). `before` must hold on a prefix of the sequence
/// (`key(x) < k` gives the floor below `k` and the lower bound of `k`).
pub(crate) fn partition<P: TreapPool + ?Sized>(
    pool: &P,
    t: u32,
    before: impl Fn(&P, u32) -> bool,
) -> (u32, u32) {
    let (mut at, mut last_before, mut first_after) = (t, NIL, NIL);
    while at != NIL {
        if before(pool, at) {
            last_before = at;
            at = pool.right(at);
        } else {
            first_after = at;
            at = pool.left(at);
        }
    }
    (last_before, first_after)
}

/// Puts `node` into a pool reserved once: into the first freed slot
/// (`free` heads the freed slots, chained through `link`), else after the
/// last within the reservation. `None` when the pool is full: it never
/// grows.
pub(crate) fn take_slot<T>(
    pool: &mut Vec<T>,
    free: &mut u32,
    node: T,
    link: impl Fn(&T) -> u32,
) -> Option<u32> {
    if let Some(slot) = pool.get_mut(*free as usize) {
        let n = *free;
        *free = link(slot);
        *slot = node;
        Some(n)
    } else if pool.len() < pool.capacity() {
        pool.push(node);
        Some((pool.len() - 1) as u32)
    } else {
        None
    }
}

/// Implements [`TreapPool`] for a slice of `$node`, whose `u32` fields
/// `$left` and `$right` are its child links and `$prio` its priority.
macro_rules! treap_pool {
    ($node:ty, $left:ident, $right:ident, $prio:ident) => {
        impl $crate::collections::treap::TreapPool for [$node] {
            fn left(&self, n: u32) -> u32 {
                self[n as usize].$left
            }
            fn right(&self, n: u32) -> u32 {
                self[n as usize].$right
            }
            fn set_left(&mut self, n: u32, child: u32) {
                self[n as usize].$left = child;
            }
            fn set_right(&mut self, n: u32, child: u32) {
                self[n as usize].$right = child;
            }
            fn prio(&self, n: u32) -> u32 {
                self[n as usize].$prio
            }
        }
    };
}
pub(crate) use treap_pool;

/// One entry of a [`TreapMap`].
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u128,
    val: u32,
    prio: u32,
    left: u32,
    right: u32,
}

treap_pool!(Entry, left, right, prio);

/// The map is full: every entry [`TreapMap::reserve`] made room for is in
/// use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapFull {
    /// Entries reserved.
    pub capacity: usize,
}

/// An ordered map `u128 → u32` with distinct keys, in an arena reserved
/// once: insert and remove reuse freed entries and never grow it. Expected
/// O(log n) per operation.
#[derive(Clone, Debug)]
pub(crate) struct TreapMap {
    entries: Vec<Entry>,
    /// Freed entries, chained through `left`.
    free: u32,
    root: u32,
    /// State of the priorities' generator (xorshift32).
    seed: u32,
}

/// The priorities' seed at every [`TreapMap::clear`]: a map refilled the
/// same way takes the same shape.
const MAP_SEED: u32 = 0x9E37_79B9;

impl Default for TreapMap {
    fn default() -> Self {
        TreapMap {
            entries: Vec::new(),
            free: NIL,
            root: NIL,
            seed: MAP_SEED,
        }
    }
}

impl TreapMap {
    /// Heap bytes reserved.
    pub(crate) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.entries)
    }

    /// Makes room for `n` entries in all.
    pub(crate) fn reserve(&mut self, n: usize) {
        crate::storage::grow(&mut self.entries, n);
    }

    /// Drops every entry, keeping the reservation.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.free = NIL;
        self.root = NIL;
        self.seed = MAP_SEED;
    }

    fn next_prio(&mut self) -> u32 {
        crate::rng::xorshift32(&mut self.seed)
    }

    /// Adds `key → val`; `key` must not be in the map.
    pub(crate) fn insert(&mut self, key: u128, val: u32) -> Result<(), MapFull> {
        let entry = Entry {
            key,
            val,
            prio: self.next_prio(),
            left: NIL,
            right: NIL,
        };
        let Some(n) = take_slot(&mut self.entries, &mut self.free, entry, |e| e.left) else {
            return Err(MapFull {
                capacity: self.entries.capacity(),
            });
        };
        self.root = insert(&mut self.entries[..], self.root, n, |p, x| {
            p[x as usize].key < key
        });
        Ok(())
    }

    /// Removes `key` if present.
    pub(crate) fn remove(&mut self, key: u128) {
        let (root, gone) = remove(&mut self.entries[..], self.root, |p, x| {
            key.cmp(&p[x as usize].key)
        });
        self.root = root;
        if let Some(e) = self.entries.get_mut(gone as usize) {
            e.left = self.free;
            self.free = gone;
        }
    }

    /// The entry at `n` as `(key, val)`, `None` for [`NIL`].
    fn entry(&self, n: u32) -> Option<(u128, u32)> {
        self.entries.get(n as usize).map(|e| (e.key, e.val))
    }

    /// The smallest entry with key `>= key`.
    pub(crate) fn lower_bound(&self, key: u128) -> Option<(u128, u32)> {
        let (_, at) = partition(&self.entries[..], self.root, |p, x| p[x as usize].key < key);
        self.entry(at)
    }

    /// The largest entry with key `<= key`.
    pub(crate) fn floor(&self, key: u128) -> Option<(u128, u32)> {
        let (at, _) = partition(&self.entries[..], self.root, |p, x| {
            p[x as usize].key <= key
        });
        self.entry(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain pool: keys, priorities and links.
    struct Pool {
        key: Vec<u32>,
        prio: Vec<u32>,
        left: Vec<u32>,
        right: Vec<u32>,
    }

    impl TreapPool for Pool {
        fn left(&self, n: u32) -> u32 {
            self.left[n as usize]
        }
        fn right(&self, n: u32) -> u32 {
            self.right[n as usize]
        }
        fn set_left(&mut self, n: u32, c: u32) {
            self.left[n as usize] = c;
        }
        fn set_right(&mut self, n: u32, c: u32) {
            self.right[n as usize] = c;
        }
        fn prio(&self, n: u32) -> u32 {
            self.prio[n as usize]
        }
    }

    fn in_order(p: &Pool, t: u32, out: &mut Vec<u32>) {
        if t != NIL {
            in_order(p, p.left[t as usize], out);
            out.push(p.key[t as usize]);
            in_order(p, p.right[t as usize], out);
        }
    }

    fn heap_ordered(p: &Pool, t: u32) -> bool {
        t == NIL
            || [p.left[t as usize], p.right[t as usize]].iter().all(|&c| {
                c == NIL || (p.prio[c as usize] <= p.prio[t as usize] && heap_ordered(p, c))
            })
    }

    #[test]
    fn split_then_merge_keeps_the_order_and_the_heap_at_every_cut() {
        let mut x = 0x9E37_79B9u32;
        for n in [0u32, 1, 2, 7, 64] {
            for cut in 0..=n {
                let mut p = Pool {
                    key: (0..n).collect(),
                    prio: (0..n)
                        .map(|_| crate::rng::xorshift32(&mut x) % 8) // ties on purpose
                        .collect(),
                    left: alloc::vec![NIL; n as usize],
                    right: alloc::vec![NIL; n as usize],
                };
                // Build by merging single nodes in key order.
                let mut root = NIL;
                for k in 0..n {
                    root = merge(&mut p, root, k, None);
                }
                assert!(heap_ordered(&p, root));
                let mut touched = Vec::new();
                let (lo, hi) = split(
                    &mut p,
                    root,
                    |p, m| p.key[m as usize] < cut,
                    Some(&mut touched),
                );
                let (mut l, mut h) = (Vec::new(), Vec::new());
                in_order(&p, lo, &mut l);
                in_order(&p, hi, &mut h);
                assert_eq!(l, (0..cut).collect::<Vec<_>>());
                assert_eq!(h, (cut..n).collect::<Vec<_>>());
                assert!(heap_ordered(&p, lo) && heap_ordered(&p, hi));
                let back = merge(&mut p, lo, hi, Some(&mut touched));
                let mut all = Vec::new();
                in_order(&p, back, &mut all);
                assert_eq!(all, (0..n).collect::<Vec<_>>());
                assert!(heap_ordered(&p, back));
            }
        }
    }

    #[test]
    fn insert_remove_and_searches_agree_with_a_sorted_list() {
        let mut map = TreapMap::default();
        map.reserve(64);
        let mut model: Vec<(u128, u32)> = Vec::new();
        let mut x = 0x2545_F491u32;
        for step in 0..2000u32 {
            crate::rng::xorshift32(&mut x);
            let key = (x % 97) as u128;
            match model.binary_search_by_key(&key, |e| e.0) {
                Ok(i) => {
                    map.remove(key);
                    model.remove(i);
                }
                Err(i) if model.len() < 64 => {
                    map.insert(key, step).unwrap();
                    model.insert(i, (key, step));
                }
                Err(_) => assert_eq!(map.insert(key, step), Err(MapFull { capacity: 64 })),
            }
            for probe in [0u128, key, key + 1, 50, 200] {
                let lb = model.iter().find(|e| e.0 >= probe).copied();
                let fl = model.iter().rev().find(|e| e.0 <= probe).copied();
                assert_eq!(map.lower_bound(probe), lb, "lower bound of {probe}");
                assert_eq!(map.floor(probe), fl, "floor of {probe}");
            }
        }
        // Removing an absent key changes nothing.
        let before = map.lower_bound(0);
        map.remove(1000);
        assert_eq!(map.lower_bound(0), before);
    }

    #[test]
    fn a_treap_deep_as_its_size_takes_no_stack() {
        // Priorities rising with the keys make the treap one path down the
        // left: a recursive walk of it would take a stack frame per node.
        let n = 500_000u32;
        let mut p = Pool {
            key: (0..n).collect(),
            prio: (0..n).collect(),
            left: alloc::vec![NIL; n as usize],
            right: alloc::vec![NIL; n as usize],
        };
        let mut root = NIL;
        for k in 0..n {
            root = insert(&mut p, root, k, |p, x| p.key[x as usize] < k);
        }
        let (mut depth, mut at) = (0u32, root);
        while at != NIL {
            depth += 1;
            at = p.left[at as usize];
        }
        assert_eq!(depth, n);
        assert_eq!(partition(&p, root, |_, _| false).1, 0);
        assert_eq!(partition(&p, root, |p, x| p.key[x as usize] == 0).0, 0);
        let (root, gone) = remove(&mut p, root, |p, x| 0.cmp(&p.key[x as usize]));
        assert_eq!(gone, 0);
        assert_eq!(partition(&p, root, |_, _| false).1, 1);
        let (lo, hi) = split(&mut p, root, |p, x| p.key[x as usize] < n / 2, None);
        assert_eq!(partition(&p, lo, |_, _| true).0, n / 2 - 1);
        let back = merge(&mut p, lo, hi, None);
        assert_eq!(partition(&p, back, |_, _| true).0, n - 1);
        assert_eq!(partition(&p, back, |_, _| false).1, 1);
    }
}
