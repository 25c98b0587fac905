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

use super::{Clock, ExactOptions, ExactWorkspace, Limit, Outcome, Stop, NONE, NO_LEVEL};
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
    /// Length of the scope stack before this node opened (restored when
    /// it is left).
    scopes_before: u32,
    /// When this node starts a later component of a split: the frame of
    /// the split node, which fails with this node (`NONE` otherwise).
    jump: u32,
    /// The sections whose buffers this node branches on.
    cands: (u32, u32),
}

/// What opening a node found.
pub(super) enum Opened {
    /// A node with branches (pushed).
    Node,
    /// A dead end.
    Dead,
    /// A dead end at the start of a later component: the split node at this
    /// frame fails.
    Jump(u32),
}

/// A region of the search: the unplaced buffers inside a section range.
/// A node whose region's unplaced buffers fall apart into time-disjoint
/// components (no buffer crosses between them) solves them one after the
/// other, each from the node's level: they share no cell, so each one's
/// canonical sequence is the restriction of the whole one. When a later
/// component fails, no change to an earlier one can help: the split node
/// fails at once (a backjump over the earlier component's decisions).
#[derive(Copy, Clone, Debug)]
pub(super) struct Scope {
    /// The region that was split (sections `[lo, hi)`).
    lo: u32,
    hi: u32,
    /// The component being solved.
    sub_lo: u32,
    sub_hi: u32,
    /// The scope whose component was split (`NONE` for the root).
    outer: u32,
    /// Level and last buffer at the split node.
    level: u64,
    last: u32,
    /// Frame of the split node (`NONE` for the root).
    jump: u32,
}

impl ExactWorkspace {
    /// Reserves the storage of this strategy (called by `reserve_for`).
    pub(super) fn reserve_ordered(&mut self, n: usize, cells: usize) {
        self.rank.reserve(n.saturating_sub(self.rank.len()));
        self.cross
            .reserve((2 * n + 2).saturating_sub(self.cross.len()));
        self.scopes
            .reserve((2 * n + 4).saturating_sub(self.scopes.len()));
        self.eff.reserve(cells.saturating_sub(self.eff.len()));
        self.oframes
            .reserve((n + 2).saturating_sub(self.oframes.len()));
    }

    /// Ranks the buffers: longer lifetime, then larger size, then lower
    /// index first. Identical buffers keep index order, as the twin rule
    /// requires.
    fn rank_buffers(&mut self, problem: &Problem) {
        let bufs = problem.buffers();
        let life = |b: usize| bufs[b].upper - bufs[b].lower;
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
        (ilo, ihi): (usize, usize),
        (clo, chi): (usize, usize),
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
        #[allow(clippy::needless_range_loop)]
        for b in 0..n {
            if self.placed[b] {
                continue;
            }
            let (blo, bhi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
            if blo < ilo || bhi > ihi {
                continue;
            }
            let candidate = blo >= clo && bhi <= chi;
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
                let canonical = a > level || (a == level && last_rank.map_or(true, |r| r < rank));
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
                if !canonical || twin_waits || !candidate {
                    continue;
                }
                let key = (a, rank, o as u32);
                if after.is_some_and(|t| key <= t) {
                    continue;
                }
                if best.map_or(true, |(k, _, _)| key < k) {
                    best = Some((key, o as u32, a));
                }
            }
            if !reachable && infer {
                return None;
            }
        }
        if infer {
            let k = self.k;
            for s in ilo..ihi {
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
        for s in lo + 1..hi {
            self.cross[s] -= 1;
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
            for s in self.sec_lo[b] as usize + 1..self.sec_hi[b] as usize {
                self.cross[s] += 1;
            }
            self.oframes[fi].placed = NONE;
        }
        self.level = f.level;
        self.last = f.last;
    }

    /// The first component (in time) of the unplaced buffers in sections
    /// `[lo, hi)`, and whether another one follows (`None`: none left).
    fn component(&self, lo: usize, hi: usize) -> Option<((usize, usize), bool)> {
        let start = (lo..hi).find(|&s| self.remaining[s] > 0)?;
        let mut end = start + 1;
        while end < hi && self.cross[end] > 0 {
            end += 1;
        }
        let more = (end..hi).any(|s| self.remaining[s] > 0);
        Some(((start, end), more))
    }

    /// Opens a node at the current state: moves on to the next component
    /// when the current one is placed, splits the current one when it
    /// falls apart, checks for dead ends and finds the first branch.
    fn open_ordered(&mut self, problem: &Problem) -> Result<Opened, Limit> {
        let scopes_before = self.scopes.len() as u32;
        let mut jump = NONE;
        // The current component is placed: the next one of the innermost
        // region that still has unplaced buffers, from that split's level.
        let mut top = self.scopes.len() - 1;
        loop {
            let sc = self.scopes[top];
            if self
                .component(sc.sub_lo as usize, sc.sub_hi as usize)
                .is_some()
            {
                break;
            }
            let Some(((a, b), _)) = self.component(sc.lo as usize, sc.hi as usize) else {
                if sc.outer == NONE {
                    // Unreachable: the caller stops when all are placed.
                    return Ok(Opened::Dead);
                }
                top = sc.outer as usize;
                continue;
            };
            if self.scopes.len() == self.scopes.capacity() {
                return Err(Limit::Storage);
            }
            self.scopes.push(Scope {
                sub_lo: a as u32,
                sub_hi: b as u32,
                ..sc
            });
            self.level = sc.level;
            self.last = sc.last;
            jump = sc.jump;
            top = self.scopes.len() - 1;
            break;
        }
        let sc = self.scopes[top];
        let region = (sc.sub_lo as usize, sc.sub_hi as usize);
        let mut cands = region;
        if let Some((first, true)) = self.component(region.0, region.1) {
            if self.scopes.len() == self.scopes.capacity() {
                return Err(Limit::Storage);
            }
            self.scopes.push(Scope {
                lo: region.0 as u32,
                hi: region.1 as u32,
                sub_lo: first.0 as u32,
                sub_hi: first.1 as u32,
                outer: top as u32,
                level: self.level,
                last: self.last,
                jump: self.oframes.len() as u32,
            });
            cands = first;
        }
        let dead = |ws: &mut Self| {
            ws.scopes.truncate(scopes_before as usize);
            Ok(if jump == NONE {
                Opened::Dead
            } else {
                Opened::Jump(jump)
            })
        };
        let Some(first) = self.scan_ordered(problem, None, true, region, cands) else {
            return dead(self);
        };
        if first.is_none() {
            return dead(self);
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
            scopes_before,
            jump,
            cands: (cands.0 as u32, cands.1 as u32),
        });
        Ok(Opened::Node)
    }

    /// Leaves frames down to and including `to` (a split node whose later
    /// component failed), undoing their placements.
    fn jump_ordered(&mut self, to: usize) {
        while self.oframes.len() > to {
            let fi = self.oframes.len() - 1;
            self.undo_ordered(fi);
            let f = self.oframes[fi];
            self.scopes.truncate(f.scopes_before as usize);
            self.oframes.pop();
        }
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
        self.cross.clear();
        self.cross.resize(self.nsec + 1, 0);
        for b in 0..problem.len() {
            if !self.placed[b] {
                for s in self.sec_lo[b] as usize + 1..self.sec_hi[b] as usize {
                    self.cross[s] += 1;
                }
            }
        }
        self.scopes.clear();
        self.scopes.push(Scope {
            lo: 0,
            hi: self.nsec as u32,
            sub_lo: 0,
            sub_hi: self.nsec as u32,
            outer: NONE,
            level: 0,
            last: NONE,
            jump: NONE,
        });
        if self.unplaced == 0 {
            self.record(problem, clock, t0, cap, outcome, &mut found);
            return (Stop::Done, true);
        }
        match self.open_ordered(problem) {
            Ok(Opened::Node) => {}
            Ok(_) => return (Stop::Done, false),
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
                    let (lo, hi) = self.oframes[fi].cands;
                    let range = (lo as usize, hi as usize);
                    self.scan_ordered(problem, after, false, range, range)
                        .flatten()
                }
            };
            let Some((key, o, offset)) = next else {
                let f = self.oframes[fi];
                if f.jump != NONE {
                    self.jump_ordered(f.jump as usize);
                } else {
                    self.scopes.truncate(f.scopes_before as usize);
                    self.oframes.pop();
                }
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
                Ok(Opened::Node | Opened::Dead) => {}
                Ok(Opened::Jump(to)) => self.jump_ordered(to as usize),
                Err(l) => return (Stop::Limit(l), found),
            }
        }
    }
}
