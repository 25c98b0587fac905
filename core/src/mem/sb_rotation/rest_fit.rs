//! Rest-fit: the movable SB tiles placed again, each where its cells have
//! rested longest enough since their last use.
//!
//! A tile that takes cells another tile just left makes its first writer
//! wait for that tile's last reader (a placement-added dependency). The
//! longer the cells rested (positions between the last live position of
//! the tile that left them and the first of the one that takes them), the
//! likelier that reader has finished when the writer is ready: a load runs
//! ahead on its DMA queue, a compute engine behind it. Rest-fit places the
//! tiles in the order their lives start (as first-fit does, which packs an
//! interval problem of one partition range at its bound) and gives each
//! the lowest start whose cells rested at least `gap` positions, or where
//! none did, the start whose cells rested longest. How long is enough
//! depends on the engines' speeds, which the schedule model knows: the
//! caller tries a few gaps and lets the model choose.
//!
//! Resting spreads the tiles upward and can leave a later tile no room
//! within the limit. Then the tiles live with the one that found none give
//! way, and the placement resumes at the first of them: memory is tight
//! there, and only there does resting give way ([`RestFit::repair`]).
//! They are packed lowest (rest 0) the first time; where that too leaves
//! no room (tiles that stay where they are, e.g. coalescing pairs placed
//! side by side, can make first-fit in start order fail), they go back to
//! where they were when the series began, which was legal as a whole.
//!
//! Legality: a tile never shares a cell with a tile live with it (on a
//! common partition), stays aligned and ends within the limit; tiles that
//! do not move (see [`super`]) keep their cells and are avoided over the
//! positions they hold them (their lives, or a coalescing chain's span),
//! and tiles first read that are not inputs (they read what was left in
//! their cells) are avoided over the whole program. Only byte offsets
//! change.
//!
//! Storage: [`RestFit::reserve`] from the location count; no allocation
//! after it. Work: placing a tile visits the tiles live with it and at
//! most [`AGED_CAP`] blocks of cells left before it, a few times over
//! (one pass per rest length tried for it); the caller's work bound stops
//! a placement past it (the placement is then undone).

use alloc::vec::Vec;

use super::{cells, Cells};
use crate::analysis::Interval;
use crate::ir::{MemLoc, Module, Space};

/// Why a placement did not finish (see [`RestFit::place`] for what is
/// left in place).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Unplaced {
    /// This tile found no room within the limit.
    NoRoom(MemLoc),
    /// The work bound, or the reserved storage, ran out.
    Work,
}

/// Rest-fit's storage (see the module doc).
#[derive(Clone, Debug, Default)]
pub(super) struct RestFit {
    /// The movable tiles, by where their lives start (longer first, then
    /// larger first, among those starting together).
    order: Vec<MemLoc>,
    /// Their offsets when [`Self::prepare`] ran, parallel to `order`.
    initial: Vec<u64>,
    /// Their offsets when [`Self::begin`] ran.
    start: Vec<u64>,
    /// Their offsets at the placement kept ([`Self::keep`]).
    kept: Vec<u64>,
    /// Tiles that stay, live, in the order their lives start: they take
    /// part in the sweep (their cells age like any tile's).
    fixed: Vec<MemLoc>,
    /// Tiles first read that are not inputs: busy for the whole program.
    relying: Vec<MemLoc>,
    /// How far each tile gave way (by location index; see the module
    /// doc): 0 rests, 1 packs lowest, 2 goes back where it was.
    give_way: Vec<u8>,
    /// Placed tiles (movable or fixed) whose lives reach the current start.
    active: Vec<MemLoc>,
    /// Cells left before the current start, with the last position they
    /// were live; an entry whose cells a later-left entry covers is gone.
    aged: Vec<(Cells, u32)>,
    /// Byte ranges the current tile must stay clear of.
    busy: Vec<(u64, u64)>,
    /// The last live positions of the aged cells on its partitions.
    ends: Vec<u32>,
}

impl RestFit {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.order, self.initial, self.start, self.kept, self.fixed)
            + crate::heap_bytes!(self.relying, self.give_way, self.active, self.aged)
            + crate::heap_bytes!(self.busy, self.ends)
    }

    /// Sizes the storage for up to `mems` locations.
    pub(super) fn reserve(&mut self, mems: usize) {
        use crate::storage::grow;
        grow(&mut self.order, mems);
        grow(&mut self.initial, mems);
        grow(&mut self.start, mems);
        grow(&mut self.kept, mems);
        grow(&mut self.fixed, mems);
        grow(&mut self.relying, mems);
        grow(&mut self.give_way, mems);
        grow(&mut self.active, mems);
        grow(&mut self.aged, AGED_CAP.min(mems));
        grow(&mut self.busy, mems);
        grow(&mut self.ends, AGED_CAP.min(mems));
    }

    /// Takes the tiles of `m` that may move (`movable`, by location
    /// index), those tiles first read that are not inputs (`relies`), the
    /// positions each tile holds its cells (`hold`: its live interval, or
    /// wider) and the current placement as the initial one. False when
    /// they do not fit the reserved storage (then nothing can be
    /// re-placed).
    pub(super) fn prepare(
        &mut self,
        m: &Module,
        hold: &[Option<Interval>],
        movable: &[bool],
        relies: &[bool],
    ) -> bool {
        let n = m.num_mems();
        if self.give_way.capacity() < n || movable.len() < n || relies.len() < n || hold.len() < n {
            return false;
        }
        self.order.clear();
        self.fixed.clear();
        self.relying.clear();
        self.give_way.clear();
        self.give_way.resize(n, 0);
        for v in m.mems().space.keys() {
            if m.mems().space[v] != Space::Sb || !m.is_placed(v) {
                continue;
            }
            if relies[v.index()] {
                self.relying.push(v);
            } else if movable[v.index()] {
                self.order.push(v);
            } else if hold[v.index()].is_some() {
                self.fixed.push(v);
            }
        }
        let key = |v: &MemLoc| {
            let i = hold[(*v).index()];
            (
                i.map_or(0, |i| i.start),
                core::cmp::Reverse(i.map_or(0, |i| i.end)),
                core::cmp::Reverse(m.mems().bytes[*v]),
                v.index(),
            )
        };
        self.order.sort_unstable_by_key(key);
        self.fixed.sort_unstable_by_key(key);
        self.initial.clear();
        self.initial
            .extend(self.order.iter().map(|&v| m.mems().offset[v]));
        true
    }

    /// Starts a series of placements from the current one: it is the one
    /// [`Self::restore`] and [`Self::restore_start`] go back to, and no
    /// tile has given way yet (where tiles must give way depends on the
    /// limit).
    pub(super) fn begin(&mut self, m: &Module) {
        self.start.clear();
        self.start
            .extend(self.order.iter().map(|&v| m.mems().offset[v]));
        self.kept.clear();
        self.kept.extend_from_slice(&self.start);
        self.give_way.iter_mut().for_each(|c| *c = 0);
    }

    /// Tiles whose offset differs from [`Self::prepare`]'s, and from
    /// [`Self::begin`]'s.
    pub(super) fn moved(&self, m: &Module) -> (u32, u32) {
        let differ = |from: &[u64]| {
            let pairs = self.order.iter().zip(from);
            pairs.filter(|(&v, &o)| m.mems().offset[v] != o).count() as u32
        };
        (differ(&self.initial), differ(&self.start))
    }

    /// Records the current placement as the one to keep.
    pub(super) fn keep(&mut self, m: &Module) {
        for (k, &v) in self.order.iter().enumerate() {
            self.kept[k] = m.mems().offset[v];
        }
    }

    /// Puts the tiles back where [`Self::keep`] (or [`Self::begin`])
    /// last left them.
    pub(super) fn restore(&self, m: &mut Module) {
        for (&v, &o) in self.order.iter().zip(&self.kept) {
            m.place(v, m.mems().base_partition[v], o);
        }
    }

    /// Puts the tiles back where [`Self::begin`] found them.
    pub(super) fn restore_start(&mut self, m: &mut Module) {
        self.kept.clear();
        self.kept.extend_from_slice(&self.start);
        self.restore(m);
    }

    /// Makes the movable tiles live with `v` (and `v`) give way one step
    /// further in later placements; returns where in the order the first
    /// of them that did is (the placement may resume there), or `None`
    /// when all had given way fully.
    pub(super) fn repair(&mut self, hold: &[Option<Interval>], v: MemLoc) -> Option<usize> {
        let iv = hold[v.index()]?;
        let mut first = None;
        for (k, &w) in self.order.iter().enumerate() {
            let with = w == v || hold[w.index()].is_some_and(|i| i.overlaps(iv));
            if with && self.give_way[w.index()] < GO_BACK {
                self.give_way[w.index()] += 1;
                first = first.or(Some(k));
            }
        }
        first
    }

    /// Places every movable tile (see the module doc) within `limit`,
    /// resting cells `gap` positions; `work` is what the caller's bound
    /// leaves, spent here. The tiles before `from` in the order stay where
    /// the previous call with the same `limit` and `gap` put them (it found
    /// no room for a later tile, and [`Self::repair`] marked none before
    /// `from`, so placing them again would give the same cells): the sweep
    /// only replays them. On `Err(Work)` the placement is the kept one; on
    /// `Err(NoRoom)` it is partial, for the caller to resume or
    /// [`Self::restore`].
    pub(super) fn place(
        &mut self,
        m: &mut Module,
        hold: &[Option<Interval>],
        limit: u64,
        gap: u32,
        from: usize,
        work: &mut u64,
    ) -> Result<(), Unplaced> {
        self.active.clear();
        self.aged.clear();
        let mut next_fixed = 0;
        for k in 0..self.order.len() {
            let v = self.order[k];
            let Some(iv) = hold[v.index()] else {
                continue;
            };
            // Fixed tiles that started by now join the sweep.
            while let Some(&f) = self.fixed.get(next_fixed) {
                if hold[f.index()].map_or(true, |i| i.start > iv.start) {
                    break;
                }
                self.active.push(f);
                next_fixed += 1;
            }
            self.age(m, hold, iv.start, work);
            if k < from {
                self.active.push(v);
                continue;
            }
            let way = self.give_way[v.index()];
            let g = if way > 0 { 0 } else { gap };
            let r = self.collect(m, hold, v, next_fixed, work).and_then(|()| {
                // Where it was when the series began, if still free: that
                // placement was legal as a whole, and the tiles placed
                // after this one keep clear of it.
                let was = self.start[k];
                let back = self.clear_at(m, v, was, limit).then_some(was);
                // A tile that went back and finds its cells taken names
                // itself: the tiles live with it give way next.
                let to = if way >= GO_BACK {
                    back
                } else {
                    self.pick(m, v, iv.start, limit, g, work).or(back)
                };
                to.ok_or(Unplaced::NoRoom(v))
            });
            match r {
                Ok(to) if *work > 0 => {
                    m.place(v, m.mems().base_partition[v], to);
                    self.active.push(v);
                }
                Ok(_) => {
                    self.restore(m);
                    return Err(Unplaced::Work);
                }
                Err(Unplaced::Work) => {
                    self.restore(m);
                    return Err(Unplaced::Work);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Moves the active tiles whose lives end before `start` to the aged
    /// cells (sorted by their first byte): an entry whose cells the new
    /// one covers goes, and past [`AGED_CAP`] entries the one left longest
    /// ago goes (its cells then count as never used: they rested longer
    /// than any kept).
    fn age(&mut self, m: &Module, hold: &[Option<Interval>], start: u32, work: &mut u64) {
        let mut j = 0;
        while j < self.active.len() {
            let w = self.active[j];
            let end = hold[w.index()].map_or(0, |i| i.end);
            if end >= start {
                j += 1;
                continue;
            }
            self.active.swap_remove(j);
            let cw = cells(m, w, m.mems().offset[w]);
            spend(work, self.aged.len() as u64);
            self.aged.retain(|&(a, e)| {
                let covered = cw.p0 <= a.p0 && a.p1 <= cw.p1 && cw.b0 <= a.b0 && a.b1 <= cw.b1;
                !(covered && e <= end)
            });
            if self.aged.len() >= AGED_CAP {
                let oldest = (0..self.aged.len()).min_by_key(|&i| self.aged[i].1);
                if let Some(i) = oldest {
                    self.aged.remove(i);
                }
            }
            let at = self.aged.partition_point(|a| a.0.b0 <= cw.b0);
            self.aged.insert(at, (cw, end));
        }
    }

    /// Fills `busy` with the byte ranges, on `v`'s partitions, of the
    /// active tiles, the fixed tiles yet to start that are live with it
    /// and the tiles first read, sorted by their first byte, and `ends`
    /// with the last live positions of the aged cells on those
    /// partitions, ascending.
    fn collect(
        &mut self,
        m: &Module,
        hold: &[Option<Interval>],
        v: MemLoc,
        next_fixed: usize,
        work: &mut u64,
    ) -> Result<(), Unplaced> {
        let me = cells(m, v, 0);
        let end = hold[v.index()].map_or(0, |i| i.end);
        self.busy.clear();
        let later = self.fixed[next_fixed..]
            .iter()
            .take_while(|&&f| hold[f.index()].is_some_and(|i| i.start <= end));
        let mut visited = self.active.len() + self.relying.len() + self.aged.len();
        for &w in self.active.iter().chain(later).chain(&self.relying) {
            visited += 1;
            let cw = cells(m, w, m.mems().offset[w]);
            if cw.shares_partitions(me) {
                if self.busy.len() == self.busy.capacity() {
                    return Err(Unplaced::Work);
                }
                self.busy.push((cw.b0, cw.b1));
            }
        }
        spend(work, visited as u64);
        self.busy.sort_unstable();
        self.ends.clear();
        for &(a, e) in &self.aged {
            if a.shares_partitions(me) {
                self.ends.push(e);
            }
        }
        self.ends.sort_unstable();
        self.ends.dedup();
        Ok(())
    }

    /// The lowest start clear of `busy`, within `limit`, whose cells
    /// rested at least `gap` positions before `start`; else the lowest of
    /// the clear starts whose cells rested longest; `None` when no start
    /// is clear of `busy`.
    #[allow(clippy::too_many_arguments)]
    fn pick(
        &self,
        m: &Module,
        v: MemLoc,
        start: u32,
        limit: u64,
        gap: u32,
        work: &mut u64,
    ) -> Option<u64> {
        let me = cells(m, v, 0);
        let align = (m.mems().align[v] as u64).max(1);
        let clear = |since: i64, work: &mut u64| {
            spend(work, (self.busy.len() + self.aged.len()) as u64);
            self.lowest_clear(me, align, limit, since)
        };
        // Cells last live after `since` have not rested long enough.
        if let Some(to) = clear(i64::from(start) - i64::from(gap), work) {
            return Some(to);
        }
        // The longest rest any start allows: the earliest `since` at which
        // one is clear (clear at `since` implies clear at any later one).
        let (mut lo, mut hi) = (0, self.ends.len());
        let mut best = clear(i64::MAX, work)?;
        while lo < hi {
            let mid = (lo + hi) / 2;
            match clear(i64::from(self.ends[mid]), work) {
                Some(to) => {
                    best = to;
                    hi = mid;
                }
                None => lo = mid + 1,
            }
        }
        Some(best)
    }

    /// True when `v`'s cells at `at` are clear of `busy` and within
    /// `limit`.
    fn clear_at(&self, m: &Module, v: MemLoc, at: u64, limit: u64) -> bool {
        let bytes = m.mems().bytes[v] as u64;
        at + bytes <= limit && !self.busy.iter().any(|b| at < b.1 && b.0 < at + bytes)
    }

    /// The lowest aligned start within `limit` of a tile with `me`'s
    /// partitions and bytes that is clear of `busy` and of the aged cells
    /// on those partitions last live after `since`.
    fn lowest_clear(&self, me: Cells, align: u64, limit: u64, since: i64) -> Option<u64> {
        let bytes = me.b1;
        let aged = self
            .aged
            .iter()
            .filter(|&&(a, e)| a.shares_partitions(me) && i64::from(e) > since);
        let mut aged = aged.map(|&(a, _)| (a.b0, a.b1)).peekable();
        let mut busy = self.busy.iter().copied().peekable();
        let mut pos = 0u64;
        loop {
            // The next range by its first byte, of either sorted list.
            let next = match (busy.peek(), aged.peek()) {
                (Some(b), Some(a)) if b.0 <= a.0 => busy.next(),
                (Some(_), None) => busy.next(),
                (_, Some(_)) => aged.next(),
                (None, None) => None,
            };
            let at = crate::align::align_up(pos, align)?;
            let room = next.map_or(limit, |r| r.0.min(limit));
            if at + bytes <= room {
                return Some(at);
            }
            let r = next?;
            pos = pos.max(r.1);
            if pos >= limit {
                return None;
            }
        }
    }
}

/// [`RestFit::give_way`]'s last step: back where the series began.
const GO_BACK: u8 = 2;

/// Aged cell entries kept at most: the cells left most recently are what
/// a rest length compares against; older ones count as never used.
const AGED_CAP: usize = 128;

/// Takes `n` from the work left, to zero at least.
fn spend(work: &mut u64, n: u64) {
    *work = work.saturating_sub(n.max(1));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{LinearOrder, MemLiveness};
    use crate::ir::{Builder, MemFlags, Opcode};
    use crate::target::Target;
    use crate::testing::{assert_placed_legally, exp, mem, tiles};

    /// Rest-fit reserved for `m`, every SB tile in `movable` taken, and
    /// the tiles' live intervals.
    fn prepared(
        m: &Module,
        movable: &[MemLoc],
        relies: &[MemLoc],
    ) -> (RestFit, Vec<Option<Interval>>) {
        let live = MemLiveness::of(m, &LinearOrder::of(m));
        let live: Vec<_> = m.mems().space.keys().map(|v| live.interval(v)).collect();
        let mut r = RestFit::default();
        r.reserve(m.num_mems());
        let mark = |set: &[MemLoc]| -> Vec<bool> {
            m.mems().space.keys().map(|v| set.contains(&v)).collect()
        };
        assert!(r.prepare(m, &live, &mark(movable), &mark(relies)));
        r.begin(m);
        (r, live)
    }

    #[test]
    fn where_resting_leaves_no_room_the_tiles_live_there_pack_and_the_rest_stays() {
        // `a` (512 B) dies before `l` (512 B) and `big` (1024 B) start;
        // `l` lives across `big`. Within 1536 B, resting puts `l` in fresh
        // cells at 512, which leaves `big` two 512-B holes; repaired, `l`
        // packs into `a`'s cells and `big` takes the fresh ones above.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let x = mem(&mut bl, "x", Space::Dram, 128, 1024, 4, MemFlags::INPUT);
        let y = mem(&mut bl, "y", Space::Dram, 128, 1024, 4, MemFlags::OUTPUT);
        let [a, l] = tiles(&mut bl, Space::Sb, ["a", "l"], 128, 512, 4);
        let big = mem(&mut bl, "big", Space::Sb, 128, 1024, 4, MemFlags::empty());
        bl.func("f").unwrap();
        bl.load(a, x, 0).unwrap();
        bl.save(y, a, 0).unwrap();
        bl.load(l, x, 0).unwrap();
        bl.load(big, x, 0).unwrap();
        bl.save(y, big, 0).unwrap();
        bl.save(y, l, 0).unwrap();
        for (t, off) in [(a, 0), (l, 0), (big, 512)] {
            m.place(t, 0, off);
        }
        let (mut r, live) = prepared(&m, &[a, l, big], &[]);
        let mut work = u64::MAX;
        let first = r.place(&mut m, &live, 1536, u32::MAX, 0, &mut work);
        assert_eq!(first, Err(Unplaced::NoRoom(big)));
        assert_eq!(m.mems().offset[l], 512, "resting put `l` in fresh cells");
        // `l` and `big` pack from now on; `a`, before them, is replayed.
        assert_eq!(r.repair(&live, big), Some(1));
        assert_eq!(r.place(&mut m, &live, 1536, u32::MAX, 1, &mut work), Ok(()));
        let at = |t| m.mems().offset[t];
        assert_eq!((at(a), at(l), at(big)), (0, 0, 512));
        assert_placed_legally("repaired", &m);
        // Two more steps: back where they were, then nothing is left.
        assert_eq!(r.repair(&live, big), Some(1));
        assert_eq!(r.repair(&live, big), None);
    }

    #[test]
    fn where_packing_fails_around_a_tile_that_stays_the_tiles_go_back() {
        // `f` is pinned at 512 while `big` (1024 B) lives; `e` dies just
        // after `l` starts. In start order `e` packs at 0, `l` (live with
        // `e` and `f`) at 1024, and `big` finds no room in 2048 B, resting
        // or packed. Given way fully, the tiles return to where they were
        // (`e` 1024, `l` 0, `big` 1024), a placement legal as a whole.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let x = mem(&mut bl, "x", Space::Dram, 128, 1024, 4, MemFlags::INPUT);
        let y = mem(&mut bl, "y", Space::Dram, 128, 1024, 4, MemFlags::OUTPUT);
        let [e, l] = tiles(&mut bl, Space::Sb, ["e", "l"], 128, 512, 4);
        let f = mem(&mut bl, "f", Space::Sb, 128, 512, 4, MemFlags::PINNED);
        let big = mem(&mut bl, "big", Space::Sb, 128, 1024, 4, MemFlags::empty());
        bl.func("k").unwrap();
        bl.load(e, x, 0).unwrap();
        bl.load(l, x, 0).unwrap();
        bl.save(y, e, 0).unwrap();
        bl.load(f, x, 0).unwrap();
        bl.load(big, x, 0).unwrap();
        bl.save(y, f, 0).unwrap();
        bl.save(y, big, 0).unwrap();
        bl.save(y, l, 0).unwrap();
        for (t, off) in [(e, 1024), (l, 0), (f, 512), (big, 1024)] {
            m.place(t, 0, off);
        }
        assert_placed_legally("given", &m);
        let (mut r, live) = prepared(&m, &[e, l, big], &[]);
        let mut work = u64::MAX;
        let mut from = 0;
        let mut repairs = 0;
        let placed = loop {
            match r.place(&mut m, &live, 2048, u32::MAX, from, &mut work) {
                Ok(()) => break true,
                Err(Unplaced::NoRoom(v)) => match r.repair(&live, v) {
                    Some(k) => {
                        from = k;
                        repairs += 1;
                    }
                    None => break false,
                },
                Err(Unplaced::Work) => break false,
            }
        };
        assert!(placed, "placed after {repairs} repairs");
        // Packed, then back: `l` and `big` twice, then `e` (live with `l`).
        assert!(repairs >= 3, "{repairs} repairs");
        let at = |t| m.mems().offset[t];
        assert_eq!((at(e), at(l), at(big)), (1024, 0, 1024));
        assert_placed_legally("gone back", &m);
    }

    #[test]
    fn a_tile_first_read_keeps_its_cells_from_every_mover() {
        // `r` is first read: it reads what `w` left in their cells. `t`
        // lives between them; packed lowest it would take `w`'s cells
        // (free while it lives) and overwrite what `r` reads.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [w, r, t] = tiles(&mut bl, Space::Sb, ["w", "r", "t"], 128, 512, 4);
        let o = mem(&mut bl, "o", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
        bl.func("f").unwrap();
        for (x, read) in [(w, w), (t, t)] {
            let full = bl.full(x);
            bl.op(Opcode::Memset, &[full], &[]).unwrap();
            exp(&mut bl, o, read);
        }
        exp(&mut bl, o, r);
        for (x, off) in [(w, 0), (r, 0), (t, 512), (o, 1024)] {
            m.place(x, 0, off);
        }
        let (mut rf, live) = prepared(&m, &[t], &[r]);
        let mut work = u64::MAX;
        assert_eq!(rf.place(&mut m, &live, 1536, 0, 0, &mut work), Ok(()));
        assert_eq!(m.mems().offset[t], 512);
    }

    #[test]
    fn a_placement_past_the_work_bound_is_undone() {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let x = mem(&mut bl, "x", Space::Dram, 128, 512, 4, MemFlags::INPUT);
        let y = mem(&mut bl, "y", Space::Dram, 128, 512, 4, MemFlags::OUTPUT);
        let [a, b] = tiles(&mut bl, Space::Sb, ["a", "b"], 128, 512, 4);
        bl.func("f").unwrap();
        for t in [a, b] {
            bl.load(t, x, 0).unwrap();
            bl.save(y, t, 0).unwrap();
        }
        m.place(a, 0, 512);
        m.place(b, 0, 512);
        let (mut r, live) = prepared(&m, &[a, b], &[]);
        let mut work = 1;
        assert_eq!(
            r.place(&mut m, &live, 1024, u32::MAX, 0, &mut work),
            Err(Unplaced::Work)
        );
        assert_eq!((m.mems().offset[a], m.mems().offset[b]), (512, 512));
        // With work to spare, `a` takes the lowest cells, `b` fresh ones.
        let mut work = u64::MAX;
        assert_eq!(r.place(&mut m, &live, 1024, u32::MAX, 0, &mut work), Ok(()));
        assert_eq!((m.mems().offset[a], m.mems().offset[b]), (0, 512));
    }
}
