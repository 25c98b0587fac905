//! The Live_Range_Manager of the linear scan: per space, the intervals in
//! program order with remaining-use counts, and the active set ordered by the
//! reference's `liveSetComparator`.
//!
//! # The end weight
//! The comparator's first key is the reference's `loc+76` field, inferred to
//! be the interval-end weight. Here it is the interval's last live position
//! (after the loop rule, and shortened when a spill ends the interval early).
//! Ordering it descending puts at the head the interval that stays live the
//! longest: spilling it frees its space for the longest stretch of the scan,
//! which is the classic linear-scan victim rule (Poletto & Sarkar), and
//! `pick_for_spilling` returns that head.
//!
//! Ties: tensor name ascending, then def/use ownership (a location that some
//! instruction defines sorts before one that is only read, i.e. a
//! module input), then the name bytes, then the size (smaller first). Names
//! are unique in a module, so the last two keys only break ties between a
//! tensor and itself; they are kept for fidelity.
//!
//! The active set is a sorted array (binary-search insert and remove); its
//! size is the number of simultaneously live tensors of one space, which the
//! space's capacity keeps small.

use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::analysis::{LinearOrder, MemLiveness};
use crate::ir::{Column, MemFlags, MemLoc, Module, Space};

/// Position of an interval that is not live.
pub const NONE: u32 = u32::MAX;

/// Intervals and the active set of one space.
#[derive(Clone, Debug, Default)]
pub struct LiveRangeManager {
    start: Column<MemLoc, u32>,
    end: Column<MemLoc, u32>,
    /// Accesses not yet passed by the scan, plus the loop rule's pseudo-use.
    remaining: Column<MemLoc, u32>,
    defined: Column<MemLoc, bool>,
    active_flag: Column<MemLoc, bool>,
    /// Locations of the space with an interval, by start (then index).
    by_start: Vec<MemLoc>,
    /// The active set, sorted by the comparator.
    active: Vec<MemLoc>,
}

impl LiveRangeManager {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.start,
            self.end,
            self.remaining,
            self.defined,
            self.active_flag,
            self.by_start,
            self.active
        )
    }

    #[cfg(test)]
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sizes storage for `ids` locations (including ones a spill creates).
    pub fn reserve(&mut self, ids: usize) {
        for c in [&mut self.start, &mut self.end, &mut self.remaining] {
            c.reserve(ids.saturating_sub(c.len()));
        }
        self.defined.reserve(ids.saturating_sub(self.defined.len()));
        self.active_flag
            .reserve(ids.saturating_sub(self.active_flag.len()));
        crate::storage::grow(&mut self.by_start, ids);
        crate::storage::grow(&mut self.active, ids);
    }

    /// Builds the intervals of `space`. With `loop_aware` the intervals are
    /// the analysis's (docs/SEMANTICS.md §1 loop rule); without, the straight-line
    /// `[first access, last access]` (inputs from 0, outputs to the end).
    pub fn init(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        space: Space,
        loop_aware: bool,
        ids: usize,
    ) {
        let n = order.len() as u32;
        for c in [&mut self.start, &mut self.end, &mut self.remaining] {
            c.clear();
            c.resize(ids, NONE);
        }
        self.defined.clear();
        self.defined.resize(ids, false);
        self.active_flag.clear();
        self.active_flag.resize(ids, false);
        self.by_start.clear();
        self.active.clear();
        for v in m.mems().space.keys() {
            if m.mems().space[v] != space {
                continue;
            }
            let acc = live.accesses(v);
            let flags = m.mems().flags[v];
            let iv = if loop_aware {
                live.interval(v).map(|iv| (iv.start, iv.end))
            } else if n == 0
                || acc.is_empty() && !flags.intersects(MemFlags::INPUT | MemFlags::OUTPUT)
            {
                None
            } else {
                let s = if flags.contains(MemFlags::INPUT) {
                    0
                } else {
                    acc.first().copied().unwrap_or(0)
                };
                let e = if flags.contains(MemFlags::OUTPUT) {
                    n - 1
                } else {
                    acc.last().copied().unwrap_or(n - 1)
                };
                Some((s, e))
            };
            let Some((s, e)) = iv else { continue };
            self.start[v] = s;
            self.end[v] = e;
            let pseudo = acc.last().map_or(true, |&l| e > l) as u32;
            self.remaining[v] = acc.len() as u32 + pseudo;
            self.defined[v] = live.access_writes(v).any(|w| w);
            self.by_start.push(v);
        }
        let start = &self.start;
        self.by_start
            .sort_unstable_by_key(|&v| (start[v], v.index()));
    }

    /// Locations of the space in order of their interval start.
    pub fn by_start(&self) -> &[MemLoc] {
        &self.by_start
    }

    /// First live position of `v`, or [`NONE`].
    pub fn start(&self, v: MemLoc) -> u32 {
        self.start.get(v).copied().unwrap_or(NONE)
    }

    /// Last live position of `v` (its end weight), or [`NONE`].
    pub fn end(&self, v: MemLoc) -> u32 {
        self.end.get(v).copied().unwrap_or(NONE)
    }

    #[cfg(test)]
    /// Remaining uses of `v`: accesses the scan has not passed yet.
    pub fn remaining_uses(&self, v: MemLoc) -> u32 {
        self.remaining.get(v).copied().unwrap_or(0)
    }

    /// The scan passed one access of `v`.
    pub fn use_passed(&mut self, v: MemLoc) {
        if let Some(r) = self.remaining.get_mut(v) {
            *r = r.saturating_sub(1);
        }
    }

    /// Gives a spill's copy its interval `[start, end]` with `uses` accesses.
    pub fn add_interval(&mut self, v: MemLoc, start: u32, end: u32, uses: u32) {
        if v.index() < self.start.len() {
            self.start[v] = start;
            self.end[v] = end;
            self.remaining[v] = uses;
            self.defined[v] = true;
        }
    }

    /// Ends `v`'s interval early (a spill).
    pub fn cut(&mut self, v: MemLoc, end: u32) {
        if v.index() < self.end.len() {
            self.end[v] = end;
            self.remaining[v] = 0;
        }
    }

    /// The reference's `liveSetComparator`: `Less` when `a` ranks before `b`.
    pub fn compare(&self, m: &Module, a: MemLoc, b: MemLoc) -> Ordering {
        self.end[b]
            .cmp(&self.end[a])
            .then_with(|| m.mem_name(a).cmp(m.mem_name(b)))
            .then_with(|| self.defined[b].cmp(&self.defined[a]))
            .then_with(|| m.mem_name(a).as_bytes().cmp(m.mem_name(b).as_bytes()))
            .then_with(|| m.mems().bytes[a].cmp(&m.mems().bytes[b]))
            .then_with(|| a.index().cmp(&b.index()))
    }

    /// `makeLive`: adds `v` to the active set.
    pub fn make_live(&mut self, m: &Module, v: MemLoc) {
        if self.active_flag[v] {
            return;
        }
        let at = self
            .active
            .binary_search_by(|&x| self.compare(m, x, v))
            .unwrap_or_else(|e| e);
        // Capacity is reserved for every id; this never reallocates.
        if self.active.len() < self.active.capacity() {
            self.active.insert(at, v);
            self.active_flag[v] = true;
        }
    }

    /// `kill` + `erase`: removes `v` from the active set.
    pub fn kill(&mut self, m: &Module, v: MemLoc) {
        if !self.active_flag.get(v).copied().unwrap_or(false) {
            return;
        }
        if let Ok(at) = self.active.binary_search_by(|&x| self.compare(m, x, v)) {
            self.active.remove(at);
        } else if let Some(at) = self.active.iter().position(|&x| x == v) {
            self.active.remove(at);
        }
        self.active_flag[v] = false;
    }

    /// The active set in comparator order (head first).
    pub fn active(&self) -> &[MemLoc] {
        &self.active
    }

    /// `pickForSpilling`: the head of the active set among the intervals
    /// `eligible` accepts.
    #[cfg(test)]
    pub fn pick_for_spilling(&self, mut eligible: impl FnMut(MemLoc) -> bool) -> Option<MemLoc> {
        self.active.iter().copied().find(|&v| eligible(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Builder;
    use crate::target::Target;
    use crate::testing::{add, mem, tiles};

    #[test]
    fn comparator_puts_the_furthest_end_first_then_names() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let x = mem(&mut b, "x", Space::Dram, 128, 64, 1, MemFlags::INPUT);
        let [t, a, c] = tiles(&mut b, Space::Sb, ["t", "a", "c"], 128, 64, 1);
        b.func("f").unwrap();
        b.load(t, x, 0).unwrap(); // 0
        b.load(a, x, 0).unwrap(); // 1
        b.load(c, x, 0).unwrap(); // 2
        add(&mut b, c, &[a, c]); // 3
        add(&mut b, c, &[t, c]); // 4
        let o = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &o);
        let mut r = LiveRangeManager::new();
        r.reserve(m.num_mems());
        r.init(&m, &o, &l, Space::Sb, true, m.num_mems());
        assert_eq!(r.by_start(), &[t, a, c]);
        for v in [a, t, c] {
            r.make_live(&m, v);
        }
        // t and c end at 4 (t < c by name), a at 3.
        assert_eq!(r.active(), &[c, t, a]);
        assert_eq!(r.pick_for_spilling(|_| true), Some(c));
        assert_eq!(r.pick_for_spilling(|v| v != c), Some(t));
        r.kill(&m, t);
        assert_eq!(r.active(), &[c, a]);
        assert_eq!(r.remaining_uses(c), 5);
    }
}
