//! The locations of one space live at each of a set of positions, found
//! in one sweep instead of a walk over every location per position.
//!
//! A spill round that serves many points over the capacity at once needs
//! the live set at each: scanning all locations per point costs points ×
//! locations (at a million instructions, thousands × hundreds of
//! thousands). The sweep sorts the space's locations by the start of their
//! live interval, then walks the points in rising position, admitting the
//! locations that start by each and dropping those that ended before it
//! (each location enters and leaves once), and keeps each point's set.
//!
//! Invariants: the sets describe the liveness they were collected with
//! (the caller may rewrite the module afterwards, as a spill round does,
//! as long as it asks about that liveness's positions). Storage is
//! reserved once ([`LiveSets::reserve`]): collecting allocates nothing,
//! and the points whose sets do not fit the reserved room are left out
//! (the caller serves the rest another time).

use alloc::vec::Vec;

use super::liveness::MemLiveness;
use crate::ir::{MemLoc, Module, Space};

/// See the module doc.
#[derive(Clone, Debug, Default)]
pub struct LiveSets {
    /// The space's live locations by (interval start, id).
    by_start: Vec<MemLoc>,
    /// Admitted locations whose interval may still reach the next point.
    active: Vec<MemLoc>,
    /// Every point's set, one after the other...
    sets: Vec<MemLoc>,
    /// ...point `k`'s from `ends[k - 1]` (0 for the first) to `ends[k]`.
    ends: Vec<u32>,
    /// The room reserved: entries of `sets`, and points.
    room: (usize, usize),
}

impl LiveSets {
    /// Room for a sweep over `locations` locations and `entries` entries
    /// in all the sets of up to `points` points.
    pub fn reserve(&mut self, locations: usize, entries: usize, points: usize) {
        crate::storage::grow(&mut self.by_start, locations);
        crate::storage::grow(&mut self.active, locations);
        crate::storage::grow(&mut self.sets, entries);
        crate::storage::grow(&mut self.ends, points);
        self.room = (self.room.0.max(entries), self.room.1.max(points));
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.by_start, self.active, self.sets, self.ends)
    }

    /// Collects, for each of `points` (positions, rising), the locations of
    /// `space` in `m` live there (start ≤ point ≤ end) in the order they
    /// start. Returns how many points got their set: a prefix of `points`,
    /// all of them unless the reserved room ran out, and never none of
    /// them (the first point's set is kept whatever the room).
    pub fn collect(
        &mut self,
        m: &Module,
        live: &MemLiveness,
        space: Space,
        points: impl Iterator<Item = u32>,
    ) -> usize {
        self.by_start.clear();
        self.active.clear();
        self.sets.clear();
        self.ends.clear();
        for v in m.mems().space.keys() {
            if m.mems().space[v] == space && live.interval(v).is_some() {
                self.by_start.push(v);
            }
        }
        self.by_start
            .sort_unstable_by_key(|&v| (live.interval(v).map_or(0, |iv| iv.start), v));
        let mut next = 0;
        let mut last = 0;
        for at in points {
            debug_assert!(at >= last, "the points rise");
            last = at;
            while let Some(&v) = self.by_start.get(next) {
                if live.interval(v).map_or(true, |iv| iv.start > at) {
                    break;
                }
                self.active.push(v);
                next += 1;
            }
            self.active
                .retain(|&v| live.interval(v).is_some_and(|iv| iv.end >= at));
            // The first point always gets its set (allocating, when
            // nothing was reserved): a caller can always serve one.
            let (entries, points) = self.room;
            let full = self.ends.len() >= points || self.sets.len() + self.active.len() > entries;
            if full && !self.ends.is_empty() {
                break;
            }
            self.sets.extend_from_slice(&self.active);
            self.ends.push(self.sets.len() as u32);
        }
        self.ends.len()
    }

    /// The set of the `k`-th point collected.
    pub fn at(&self, k: usize) -> &[MemLoc] {
        let from = k.checked_sub(1).map_or(0, |j| self.ends[j] as usize);
        &self.sets[from..self.ends[k] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::LinearOrder;
    use crate::ir::{Builder, MemFlags, Opcode, SubOp};
    use crate::target::Target;
    use crate::testing::{add, mem, tiles};

    /// a, b, c, d in a chain (c reads a and b, d reads c), p a PSUM
    /// result of c: each position has its own SB set.
    fn chain() -> (Module, MemLoc) {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [a, b, c] = tiles(&mut bl, Space::Sb, ["a", "b", "c"], 128, 64, 4);
        let d = mem(&mut bl, "d", Space::Sb, 128, 64, 4, MemFlags::empty());
        let p = mem(&mut bl, "p", Space::Psum, 128, 64, 4, MemFlags::empty());
        bl.func("f").unwrap();
        bl.op(Opcode::Memset, &[bl.full(a)], &[]).unwrap();
        bl.op(Opcode::Memset, &[bl.full(b)], &[]).unwrap();
        add(&mut bl, c, &[a, b]);
        bl.compute(Opcode::Matmul, SubOp::None, p, &[c], Default::default())
            .unwrap();
        add(&mut bl, d, &[c]);
        (m, p)
    }

    #[test]
    fn each_point_gets_exactly_the_locations_live_there() {
        let (m, p) = chain();
        let o = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &o);
        let mut s = LiveSets::default();
        s.reserve(m.num_mems(), 64, 8);
        let n = o.len() as u32;
        assert_eq!(s.collect(&m, &l, Space::Sb, 0..n), n as usize);
        for at in 0..n {
            let mut want: Vec<MemLoc> = m
                .mems()
                .space
                .keys()
                .filter(|&v| m.mems().space[v] == Space::Sb)
                .filter(|&v| l.interval(v).is_some_and(|iv| iv.contains(at)))
                .collect();
            let mut got = s.at(at as usize).to_vec();
            want.sort();
            got.sort();
            assert_eq!(got, want, "live SB locations at position {at}");
        }
        assert_eq!(s.collect(&m, &l, Space::Psum, [3].into_iter()), 1);
        assert_eq!(s.at(0), &[p]);
    }

    #[test]
    fn the_points_past_the_reserved_room_are_left_out() {
        let (m, _) = chain();
        let o = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &o);
        let mut s = LiveSets::default();
        // Positions 0, 1 and 2 hold 1, 2 and 3 live SB tensors: room for
        // four entries takes the first two points only.
        s.reserve(m.num_mems(), 4, 8);
        assert_eq!(s.collect(&m, &l, Space::Sb, 0..3), 2);
        assert_eq!(s.at(1).len(), 2);
        // Room for one point.
        let mut one = LiveSets::default();
        one.reserve(m.num_mems(), 64, 1);
        assert_eq!(one.collect(&m, &l, Space::Sb, 0..3), 1);
        // No room: the first point still gets its set.
        let mut none = LiveSets::default();
        assert_eq!(none.collect(&m, &l, Space::Sb, 2..3), 1);
        assert_eq!(none.at(0).len(), 3);
    }
}
