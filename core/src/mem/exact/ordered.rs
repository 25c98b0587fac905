//! The second strategy of the exact search: placement in offset order.
//!
//! # Why it is complete
//! Take any legal placement and sort its buffers by (offset, index). Move
//! each, in that order, to the lowest aligned offset that avoids the pins
//! and lies at or above the tops of the buffers before it that share a cell
//! with it. Each moves down or stays (its old offset is such a candidate),
//! no two collide, and re-sorting by (offset, index) keeps every buffer at
//! the lowest such offset over its predecessors. So every fitting instance
//! has an *offset-ordered canonical* placement: in (offset, index) order,
//! each buffer sits at `lowest(max floor of its cells)`, where a cell's
//! floor is the highest top of the buffers placed before it there.
//!
//! The search builds exactly those sequences: at each node, with level `L`
//! (the offset placed last) and `last` (its buffer), the branches are the
//! unplaced options whose `lowest(max floor)` is above `L`, or equal to `L`
//! with a larger buffer index. An option whose lowest offset is below `L`
//! is not placed here (dominance: that placement would not be canonical;
//! its floor must rise first). Every canonical sequence is one path, so no
//! subtree repeats another and no forbid list is needed. Identical buffers
//! take their places in index order.
//!
//! # Inference
//! Every unplaced buffer will sit at or above `L` and at or above the
//! floors of its cells; its least reachable offset only grows along a
//! branch. Per cell, the least reachable offset over the unplaced options
//! covering it is an *effective floor*: no byte below it will be used. A
//! node is a dead end when
//! - some unplaced buffer cannot reach an offset at which it fits under the
//!   capacity, or
//! - some section's unplaced area exceeds the room above its cells'
//!   effective floors.
//!
//! On tight instances every section is full, so any gap the order leaves
//! (a byte at level `L` that no remaining buffer can reach) fails at once.
//! This is what the skyline strategy lacks: here a high placement raises
//! the level for the whole time axis, instead of leaving unrelated regions
//! to be retried.
//!
//! # Storage
//! Branches are not stored: a frame keeps the key of the branch it tried
//! last and the next one is found by a rescan (keys are a total order), so
//! the frame stack is bounded by the buffer count and the trail by the sum
//! of the options' cells, both reserved in
//! [`ExactWorkspace::reserve_for`](super::ExactWorkspace::reserve_for).

use super::{mix, Clock, ExactOptions, ExactWorkspace, Limit, Outcome, Stop, NONE, NO_LEVEL};
use crate::mem::problem::{Placement, Problem};

/// Total order of the branches of a node: lower offset first, then the
/// buffer's rank (the attempt's static order: longer lifetime, larger size,
/// lower index first), then the option.
pub(super) type Key = (u64, u32, u32);

/// One node of the offset-ordered search.
#[derive(Copy, Clone, Debug)]
pub(super) struct OrderedFrame {
    trail_mark: u32,
    /// Level and last buffer at this node (restored when its child is undone).
    level: u64,
    last: u32,
    /// The option placed for the child being explored (`NONE`: none).
    placed: u32,
    /// The key of the branch tried last (`None`: none tried yet).
    tried: Option<Key>,
    /// The first branch, found when the node was created.
    pending: Option<(Key, u32, u64)>,
}

impl ExactWorkspace {
    /// Reserves the storage of this strategy (called by `reserve_for`).
    pub(super) fn reserve_ordered(&mut self, n: usize, cells: usize) {
        self.rank.reserve(n.saturating_sub(self.rank.len()));
        self.eff.reserve(cells.saturating_sub(self.eff.len()));
        self.oframes
            .reserve((n + 2).saturating_sub(self.oframes.len()));
    }

    /// Ranks the buffers for this attempt: longer lifetime, then larger
    /// size, then lower index first; with the attempt's noise, lifetimes
    /// are stretched by up to 2x by a hash (restarts try other orders).
    /// Identical buffers keep index order, as the twin rule requires.
    fn rank_buffers(&mut self, problem: &Problem) {
        let bufs = problem.buffers();
        let noise = self.noise;
        let life = |b: usize| {
            let buf = &bufs[b];
            let life = buf.upper - buf.lower;
            if noise == 0 {
                return life;
            }
            // Identical buffers get the same stretch.
            let id = mix(buf.lower ^ mix(buf.upper ^ mix(buf.size ^ (buf.partitions as u64))));
            let h = mix(noise ^ id) & 1023;
            life.saturating_add(((life as u128 * h as u128) >> 10) as u64)
        };
        self.order.clear();
        self.order.extend(0..bufs.len() as u32);
        self.order.sort_unstable_by_key(|&b| {
            let b = b as usize;
            (u64::MAX - life(b), u64::MAX - bufs[b].size, b)
        });
        self.rank.clear();
        self.rank.resize(bufs.len(), 0);
        for (r, &b) in self.order.iter().enumerate() {
            self.rank[b as usize] = r as u32;
        }
    }

    /// The highest floor under option `o`.
    fn max_floor(&self, o: usize) -> u64 {
        let opt = self.opts[o];
        let b = opt.buffer as usize;
        let nsec = self.nsec;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        let mut m = 0;
        for st in opt.st_lo as usize..opt.st_hi as usize {
            for &f in &self.floor[st * nsec + lo..st * nsec + hi] {
                m = m.max(f);
            }
        }
        m
    }

    /// Scans the unplaced options: with `infer`, checks the node for dead
    /// ends (`None` then); returns the least branch whose key is above
    /// `after`.
    #[allow(clippy::type_complexity)]
    fn scan_ordered(
        &mut self,
        problem: &Problem,
        after: Option<Key>,
        infer: bool,
    ) -> Option<Option<(Key, u32, u64)>> {
        let bufs = problem.buffers();
        let nsec = self.nsec;
        let level = self.level;
        // Rank of the buffer placed last.
        let last_rank = if self.last == NONE {
            None
        } else {
            Some(self.rank[self.last as usize])
        };
        if infer {
            self.eff.iter_mut().for_each(|e| *e = NO_LEVEL);
        }
        let mut best: Option<(Key, u32, u64)> = None;
        let n = bufs.len();
        for b in 0..n {
            if self.placed[b] {
                continue;
            }
            let buf = &bufs[b];
            let tw = self.twin_prev[b];
            let twin_waits = tw != NONE && !self.placed[tw as usize];
            let rank = self.rank[b];
            let mut reachable = false;
            for o in self.opt_at[b] as usize..self.opt_at[b + 1] as usize {
                let opt = self.opts[o];
                let m = self.max_floor(o);
                let a = self.lowest(problem, &opt, m);
                // Canonical here: above the level, or at it after the
                // buffer placed last in rank order.
                let canonical = a > level || (a == level && last_rank.is_none_or(|r| r < rank));
                // The least offset this option can still reach: its
                // canonical one, or else on a buffer yet to be placed at or
                // above the level on one of its cells (so at least its
                // least neighbour size higher).
                let reach = if canonical {
                    a
                } else {
                    match self.min_neighbour[b] {
                        NO_LEVEL => NO_LEVEL,
                        nb => self.lowest(problem, &opt, level.saturating_add(nb)),
                    }
                };
                if reach == NO_LEVEL || reach.saturating_add(buf.size) > self.k {
                    continue;
                }
                reachable = true;
                if infer {
                    for st in opt.st_lo as usize..opt.st_hi as usize {
                        let cells = st * nsec + self.sec_lo[b] as usize
                            ..st * nsec + self.sec_hi[b] as usize;
                        for e in &mut self.eff[cells] {
                            *e = (*e).min(reach);
                        }
                    }
                }
                if !canonical || twin_waits {
                    continue;
                }
                let key = (a, rank, o as u32);
                if after.is_some_and(|t| key <= t) {
                    continue;
                }
                if best.is_none_or(|(k, _, _)| key < k) {
                    best = Some((key, o as u32, a));
                }
            }
            if !reachable && infer {
                return None;
            }
        }
        if infer {
            let k = self.k;
            for s in 0..nsec {
                let need = self.remaining[s];
                if need == 0 {
                    continue;
                }
                let mut room = 0u64;
                for st in 0..self.nst {
                    let e = self.eff[st * nsec + s];
                    if e < k {
                        room += (k - e) * self.width[st];
                    }
                }
                if room < need {
                    return None;
                }
            }
        }
        Some(best)
    }

    /// Places option `o` at `offset` (its canonical place): raises the
    /// floors of its cells, the level and the last buffer.
    fn place_ordered(&mut self, problem: &Problem, o: u32, offset: u64) -> Result<(), Limit> {
        let opt = self.opts[o as usize];
        let b = opt.buffer as usize;
        let top = offset + problem.buffers()[b].size;
        let nsec = self.nsec;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        for st in opt.st_lo as usize..opt.st_hi as usize {
            for s in lo..hi {
                if self.trail.len() == self.trail.capacity() {
                    return Err(Limit::Storage);
                }
                let c = st * nsec + s;
                self.trail.push((c as u32, self.floor[c]));
                self.floor[c] = top;
            }
        }
        self.placed[b] = true;
        self.unplaced -= 1;
        self.current[b] = Placement {
            offset,
            base: opt.base,
        };
        for s in lo..hi {
            self.remaining[s] -= self.area[b];
        }
        self.level = offset;
        self.last = b as u32;
        Ok(())
    }

    /// Undoes the child placement of frame `fi`.
    fn undo_ordered(&mut self, fi: usize) {
        let f = self.oframes[fi];
        while self.trail.len() > f.trail_mark as usize {
            if let Some((c, old)) = self.trail.pop() {
                self.floor[c as usize] = old;
            }
        }
        if f.placed != NONE {
            let b = self.opts[f.placed as usize].buffer as usize;
            self.placed[b] = false;
            self.unplaced += 1;
            for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                self.remaining[s] += self.area[b];
            }
            self.oframes[fi].placed = NONE;
        }
        self.level = f.level;
        self.last = f.last;
    }

    /// Opens a node at the current state; false when it is a dead end.
    fn open_ordered(&mut self, problem: &Problem) -> Result<bool, Limit> {
        let Some(first) = self.scan_ordered(problem, None, true) else {
            return Ok(false);
        };
        if first.is_none() {
            return Ok(false);
        }
        if self.oframes.len() == self.oframes.capacity() {
            return Err(Limit::Storage);
        }
        self.oframes.push(OrderedFrame {
            trail_mark: self.trail.len() as u32,
            level: self.level,
            last: self.last,
            placed: NONE,
            tried: None,
            pending: first,
        });
        Ok(true)
    }

    /// One attempt of the offset-ordered search at the capacity `self.k`
    /// set by `setup` (which this strategy shares with the skyline one).
    /// Stops at the first placement found; the caller tightens the capacity
    /// and searches again when minimizing.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn search_ordered(
        &mut self,
        problem: &Problem,
        options: &ExactOptions,
        clock: &mut dyn Clock,
        t0: u64,
        cap: u64,
        outcome: &mut Outcome,
    ) -> (Stop, bool) {
        let mut found = false;
        self.level = 0;
        self.last = NONE;
        self.oframes.clear();
        self.eff.clear();
        self.eff.resize(self.nst * self.nsec, NO_LEVEL);
        self.rank_buffers(problem);
        if self.unplaced == 0 {
            self.record(problem, clock, t0, cap, outcome, &mut found);
            return (Stop::Done, true);
        }
        match self.open_ordered(problem) {
            Ok(true) => {}
            Ok(false) => return (Stop::Done, false),
            Err(l) => return (Stop::Limit(l), false),
        }
        loop {
            let Some(fi) = self.oframes.len().checked_sub(1) else {
                return (Stop::Done, found);
            };
            outcome.nodes += 1;
            if outcome.nodes > self.attempt_end {
                return (Stop::Restart, found);
            }
            if let Some(max) = options.budget.nodes {
                if outcome.nodes > max {
                    return (Stop::Limit(Limit::Nodes), found);
                }
            }
            if let Some(max) = options.budget.micros {
                if outcome.nodes & 255 == 0 && clock.now_micros().saturating_sub(t0) > max {
                    return (Stop::Limit(Limit::Time), found);
                }
            }
            self.undo_ordered(fi);
            let next = match self.oframes[fi].pending.take() {
                Some(c) => Some(c),
                None => {
                    let after = self.oframes[fi].tried;
                    self.scan_ordered(problem, after, false).flatten()
                }
            };
            let Some((key, o, offset)) = next else {
                self.oframes.pop();
                continue;
            };
            self.oframes[fi].tried = Some(key);
            self.oframes[fi].placed = o;
            if let Err(l) = self.place_ordered(problem, o, offset) {
                return (Stop::Limit(l), found);
            }
            if self.unplaced == 0 {
                self.record(problem, clock, t0, cap, outcome, &mut found);
                return (Stop::Done, true);
            }
            match self.open_ordered(problem) {
                Ok(_) => {}
                Err(l) => return (Stop::Limit(l), found),
            }
        }
    }
}
