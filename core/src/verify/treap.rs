//! Split and merge of treaps kept in a node pool, shared by the two
//! checkers that keep ordered sets: the dataflow checker's slab trees (one
//! per region, keyed by first byte) and the placement verifier's active
//! sets (one per slab, keyed by first byte and location).
//!
//! Both operations are loops, not recursion: a treap is O(log n) deep only
//! in expectation, and the priorities are not secret (on firmware they are
//! a fixed sequence), so an input crafted against them may make a treap
//! deep — slower then, never a stack overflow.
//!
//! The pool owns the nodes; a treap is its root index, [`NIL`] when empty.
//! Augmented trees (the verifier keeps the largest end of each subtree)
//! recompute what they keep from the nodes the operations report as
//! `touched`, deepest last: pulling them in reverse order is bottom-up.

use alloc::vec::Vec;

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
        if below(pool, at) {
            if low_last == NIL {
                low = at;
            } else {
                pool.set_right(low_last, at);
            }
            low_last = at;
            at = pool.right(at);
        } else {
            if high_last == NIL {
                high = at;
            } else {
                pool.set_left(high_last, at);
            }
            high_last = at;
            at = pool.left(at);
        }
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
}
