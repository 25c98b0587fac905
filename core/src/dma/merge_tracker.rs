//! The reference's `MemoryMergeTracker`: a union-find over memory locations
//! that records which locations the coalescer merged into which, and where
//! each merged location's bytes now sit.
//!
//! Every location starts as its own set. `join(child, into, delta)` records
//! that `child`'s bytes now live at byte `delta` of `into` (same partitions).
//! [`MemoryMergeTracker::resolve`] follows the chain to the current location
//! and accumulates the offset, with path compression, so after any number of
//! merge rounds a tile resolves to its final merged location in near-constant
//! time. Storage is one parent and one offset per location, reserved up front.

use alloc::vec::Vec;

use crate::ir::MemLoc;

/// Union-find of merged locations with per-link byte offsets.
#[derive(Clone, Debug, Default)]
pub struct MemoryMergeTracker {
    parent: Vec<u32>,
    delta: Vec<u32>,
    merged: u32,
}

impl MemoryMergeTracker {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.parent, self.delta)
    }

    /// Room for `n` locations (including the ones the pass will create).
    pub fn with_capacity(n: usize) -> Self {
        MemoryMergeTracker {
            parent: Vec::with_capacity(n),
            delta: Vec::with_capacity(n),
            merged: 0,
        }
    }

    /// Forgets every merge and tracks `n` locations (no allocation while `n`
    /// fits the reserved capacity).
    pub fn reset(&mut self, n: usize) {
        self.parent.clear();
        self.delta.clear();
        self.parent.extend((0..n).map(|i| i as u32));
        self.delta.resize(n, 0);
        self.merged = 0;
    }

    /// Starts tracking locations created after [`MemoryMergeTracker::reset`]
    /// (up to `n` in total). Returns false when the reserve is exhausted.
    pub fn grow_to(&mut self, n: usize) -> bool {
        if n > self.parent.capacity() {
            return false;
        }
        while self.parent.len() < n {
            self.parent.push(self.parent.len() as u32);
            self.delta.push(0);
        }
        true
    }

    /// Records that `child` now lives at byte `delta` of `into`.
    pub fn join(&mut self, child: MemLoc, into: MemLoc, delta: u32) -> bool {
        let (c, p) = (child.index(), into.index());
        if c >= self.parent.len() || p >= self.parent.len() || c == p {
            return false;
        }
        self.parent[c] = p as u32;
        self.delta[c] = delta;
        self.merged += 1;
        true
    }

    /// The location that now holds `l`'s bytes and the byte offset of `l`
    /// inside it (`(l, 0)` for a location never merged).
    pub fn resolve(&mut self, l: MemLoc) -> (MemLoc, u32) {
        let i = l.index();
        if i >= self.parent.len() {
            return (l, 0);
        }
        // Find the root and the total offset.
        let mut root = i;
        let mut total = 0u32;
        while self.parent[root] as usize != root {
            total = total.saturating_add(self.delta[root]);
            root = self.parent[root] as usize;
        }
        // Compress: point every node on the path straight at the root.
        let mut cur = i;
        let mut rem = total;
        while self.parent[cur] as usize != root && cur != root {
            let next = self.parent[cur] as usize;
            let d = self.delta[cur];
            self.parent[cur] = root as u32;
            self.delta[cur] = rem;
            rem -= d;
            cur = next;
        }
        (MemLoc::new(root), total)
    }

    /// Number of joins recorded since the last reset.
    pub fn merges(&self) -> u32 {
        self.merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_resolve_with_accumulated_offsets() {
        let mut t = MemoryMergeTracker::with_capacity(8);
        t.reset(5);
        let l = |i| MemLoc::new(i);
        assert!(t.join(l(0), l(3), 0));
        assert!(t.join(l(1), l(3), 64));
        assert!(t.join(l(3), l(4), 128));
        assert_eq!(t.resolve(l(1)), (l(4), 192));
        assert_eq!(t.resolve(l(1)), (l(4), 192));
        assert_eq!(t.resolve(l(0)), (l(4), 128));
        assert_eq!(t.resolve(l(2)), (l(2), 0));
        assert!(t.grow_to(7));
        assert!(t.join(l(4), l(6), 8));
        assert_eq!(t.resolve(l(1)), (l(6), 200));
        assert!(!t.grow_to(9));
        assert_eq!(t.merges(), 4);
    }
}
