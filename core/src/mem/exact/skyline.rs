//! The skyline search: the lowest live (stripe, section) cell first, a
//! covering buffer placed at its floor or the floor raised.
//!
//! # Skyline branching, and why it is complete
//! Push every buffer of a legal placement down until none moves: each then
//! sits at the lowest aligned offset, at or above the floors of its cells,
//! that avoids the pins (a *canonical* placement). At each node the search
//! takes the lowest live cell c (earliest section, then lowest stripe) at
//! floor f. In any placement that respects the floors, either some buffer
//! covers byte f of c — it then sits at offset exactly f, and all of its
//! cells are at floor f — or none does, and every buffer covering c sits at
//! or above its current lowest offset computed with c's floor at f + 1. So
//! the branches are: each unplaced buffer (with each legal base partition)
//! that covers c at offset f; and "c stays empty at f": raise c's floor to
//! the least of those lowest offsets. No placement is lost.
//!
//! # Skyline pruning
//! - Section inference: per section, the floors (times the stripe widths)
//!   plus the area of the unplaced buffers live there must fit under the
//!   capacity times the partitions. A raise is waste; on tight instances
//!   every section is full, so any waste fails at once.
//! - Dominance: once the subtree "b at offset x" is exhausted, b is
//!   forbidden at x in the sibling subtrees (any placement there with b at x
//!   is one the exhausted subtree contained). Identical buffers are placed in
//!   index order only.
//! - Branch and bound: when minimizing, each placement found lowers the
//!   capacity the rest of the search must beat to its peak minus one.
//!
//! # Skyline branch order
//! Candidates whose top meets the floor just outside their lifetime (or the
//! capacity) go first, then longer lifetimes, then larger sizes: closing a
//! floor step leaves a flat skyline that later buffers can fill without
//! waste.
//!
//! # Storage
//! Every change of a floor goes on the undo trail, every forbid on its own
//! trail, every node on the frame stack and its branches on the candidate
//! stack, each of the capacity the workspace reserved: a full one stops the
//! search with [`Limit::Storage`].

use super::solve::Stop;
use super::{Clock, ExactOptions, ExactWorkspace, Limit, Objective, Opt, Outcome, NONE, NO_LEVEL};
use crate::mem::problem::{Placement, Problem};
/// splitmix64 as a one-shot hash: the branch-order noise of an attempt.
use crate::rng::mix64 as mix;

/// A branch of a node: an option to place at the node's level, with its
/// sort key (larger first).
#[derive(Copy, Clone, Debug)]
pub(super) struct Cand {
    opt: u32,
    key: (u8, u64, u64, u16),
}

/// The branch a node has applied and will undo next.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Applied {
    Nothing,
    Place { opt: u32 },
    Raise,
}

/// A node of the search: its cell and level, its branches in the candidate
/// stack, and the marks its undo and forbid trails return to.
#[derive(Copy, Clone, Debug)]
pub(super) struct Frame {
    trail_mark: u32,
    forbid_mark: u32,
    cand_lo: u32,
    cand_hi: u32,
    next: u32,
    cell: u32,
    level: u64,
    raise_to: u64,
    applied: Applied,
}

impl ExactWorkspace {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn search(
        &mut self,
        problem: &Problem,
        options: &ExactOptions,
        clock: &mut dyn Clock,
        t0: u64,
        lb: u64,
        cap: u64,
        outcome: &mut Outcome,
    ) -> (Stop, bool) {
        let mut found = false;
        if !self.sections_fit(0, self.nsec) {
            return (Stop::Done, false);
        }
        if self.unplaced == 0 {
            // Only pins and void buffers, and the pins are consistent.
            self.record(problem, clock, t0, cap, outcome, &mut found);
            return (Stop::Done, true);
        }
        // The first frame is bounded like every later one: a stack the
        // storage budget scaled to nothing ends the search, never grows.
        if self.frames.len() == self.frames.capacity() {
            return (Stop::Limit(Limit::Storage), false);
        }
        match self.expand(problem) {
            Ok(frame) => self.frames.push(frame),
            Err(l) => return (Stop::Limit(l), false),
        }
        loop {
            let Some(fi) = self.frames.len().checked_sub(1) else {
                return (Stop::Done, found);
            };
            if let Some(stop) = self.count_node(options, clock, t0, outcome) {
                return (stop, found);
            }
            // Undo the branch tried last; a placement subtree that is
            // exhausted is forbidden in the siblings.
            let applied = self.frames[fi].applied;
            if applied != Applied::Nothing {
                self.undo_branch(fi);
                if let Applied::Place { opt } = applied {
                    if let Err(l) = self.forbid(opt, self.frames[fi].level) {
                        return (Stop::Limit(l), found);
                    }
                }
                self.frames[fi].applied = Applied::Nothing;
            }
            // Next branch.
            let mut pushed = false;
            while self.frames[fi].next < self.frames[fi].cand_hi {
                let c = self.cands[self.frames[fi].next as usize];
                self.frames[fi].next += 1;
                let level = self.frames[fi].level;
                if self.forbid[c.opt as usize] == level {
                    continue;
                }
                self.frames[fi].applied = Applied::Place { opt: c.opt };
                match self.place(problem, c.opt, level) {
                    Ok(true) => {
                        pushed = true;
                        break;
                    }
                    Ok(false) => {
                        self.undo_branch(fi);
                        self.frames[fi].applied = Applied::Nothing;
                        if let Err(l) = self.forbid(c.opt, level) {
                            return (Stop::Limit(l), found);
                        }
                    }
                    Err(l) => return (Stop::Limit(l), found),
                }
            }
            if !pushed && self.frames[fi].raise_to != NO_LEVEL {
                let to = self.frames[fi].raise_to;
                self.frames[fi].raise_to = NO_LEVEL;
                self.frames[fi].applied = Applied::Raise;
                let cell = self.frames[fi].cell as usize;
                match self.set_floor(cell, to) {
                    Ok(()) => {
                        let s = cell % self.nsec;
                        if self.sections_fit(s, s + 1) {
                            pushed = true;
                        } else {
                            self.undo_branch(fi);
                            self.frames[fi].applied = Applied::Nothing;
                        }
                    }
                    Err(l) => return (Stop::Limit(l), found),
                }
            }
            if !pushed {
                self.pop_frame();
                continue;
            }
            if self.unplaced == 0 {
                let p = self.record(problem, clock, t0, cap, outcome, &mut found);
                if options.objective == Objective::Fit || p <= lb {
                    return (Stop::Done, true);
                }
                // Branch and bound: the rest must beat this peak. The top
                // frame's branch is undone (and forbidden) next round.
                self.k = p - 1;
                self.capacity_area = self.k * problem.partitions() as u64;
                continue;
            }
            if self.frames.len() == self.frames.capacity() {
                return (Stop::Limit(Limit::Storage), found);
            }
            match self.expand(problem) {
                Ok(frame) => self.frames.push(frame),
                Err(l) => return (Stop::Limit(l), found),
            }
        }
    }

    fn forbid(&mut self, opt: u32, level: u64) -> Result<(), Limit> {
        if self.forbid_trail.len() == self.forbid_trail.capacity() {
            return Err(Limit::Storage);
        }
        self.forbid_trail.push((opt, self.forbid[opt as usize]));
        self.forbid[opt as usize] = level;
        Ok(())
    }

    /// Leaves the top frame: undoes its forbids and drops its branch list.
    /// The parent's branch is undone by the parent.
    fn pop_frame(&mut self) {
        let Some(f) = self.frames.pop() else { return };
        while self.forbid_trail.len() > f.forbid_mark as usize {
            if let Some((o, old)) = self.forbid_trail.pop() {
                self.forbid[o as usize] = old;
            }
        }
        self.cands.truncate(f.cand_lo as usize);
    }

    /// Restores floors to the frame's trail mark and unplaces the buffer of
    /// a placement branch.
    fn undo_branch(&mut self, fi: usize) {
        let f = self.frames[fi];
        let nsec = self.nsec;
        while self.trail.len() > f.trail_mark as usize {
            if let Some((cell, old)) = self.trail.pop() {
                let cell = cell as usize;
                let (st, s) = (cell / nsec, cell % nsec);
                self.floor_area[s] -= (self.floor[cell] - old) * self.width[st];
                self.floor[cell] = old;
                self.refresh(cell);
            }
        }
        if let Applied::Place { opt } = f.applied {
            let b = self.opts[opt as usize].buffer as usize;
            self.placed[b] = false;
            self.unplaced += 1;
            for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                self.remaining[s] += self.area[b];
            }
            self.count_options(b, true);
        }
    }

    /// True when every section in `[lo, hi)` can still hold its unplaced area.
    fn sections_fit(&self, lo: usize, hi: usize) -> bool {
        (lo..hi).all(|s| self.floor_area[s] + self.remaining[s] <= self.capacity_area)
    }

    fn set_floor(&mut self, cell: usize, to: u64) -> Result<(), Limit> {
        if self.trail.len() == self.trail.capacity() {
            return Err(Limit::Storage);
        }
        let old = self.floor[cell];
        self.trail.push((cell as u32, old));
        let (st, s) = (cell / self.nsec, cell % self.nsec);
        self.floor_area[s] += (to - old) * self.width[st];
        self.floor[cell] = to;
        self.refresh(cell);
        Ok(())
    }

    /// Places option `opt` at `offset`; false when it or a section overflows.
    fn place(&mut self, problem: &Problem, opt: u32, offset: u64) -> Result<bool, Limit> {
        let o = self.opts[opt as usize];
        let b = o.buffer as usize;
        let top = offset + problem.buffers()[b].size;
        let nsec = self.nsec;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        for st in o.st_lo as usize..o.st_hi as usize {
            for s in lo..hi {
                self.set_floor(st * nsec + s, top)?;
            }
        }
        self.placed[b] = true;
        self.unplaced -= 1;
        self.current[b] = Placement {
            offset,
            base: o.base,
        };
        for s in lo..hi {
            self.remaining[s] -= self.area[b];
        }
        self.count_options(b, false);
        Ok(top <= self.k && self.sections_fit(lo, hi))
    }

    /// The lowest offset above `f` at which option `o` (whose cells are all
    /// at or below `f`) can sit in a canonical placement where it does not
    /// sit at `f`: see [`Self::expand`].
    fn lowest_above(&self, problem: &Problem, o: &Opt, f: u64) -> u64 {
        let at = self.lowest(problem, o, f);
        if at > f {
            return at;
        }
        let b = o.buffer as usize;
        let step = self.min_neighbour[b];
        let mut best = if step == NO_LEVEL {
            NO_LEVEL
        } else {
            self.lowest(problem, o, f + step)
        };
        let bufs = problem.buffers();
        for &p in &self.pins {
            let pb = &bufs[p as usize];
            let pp = pb.pin.unwrap_or_default();
            let top = pp.offset + pb.size;
            if top > f
                && top < best
                && pb.overlaps_in_time(&bufs[b])
                && pp.base < o.base + bufs[b].partitions
                && o.base < pp.base + pb.partitions
            {
                best = best.min(self.lowest(problem, o, top));
            }
        }
        best
    }

    /// True when option `o` could be placed now at exactly `level`.
    fn fits_at(&self, problem: &Problem, o: usize, level: u64) -> bool {
        let opt = self.opts[o];
        let b = opt.buffer as usize;
        if self.placed[b] || self.forbid[o] == level || level + problem.buffers()[b].size > self.k {
            return false;
        }
        let nsec = self.nsec;
        for st in opt.st_lo as usize..opt.st_hi as usize {
            for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                if self.floor[st * nsec + s] > level {
                    return false;
                }
            }
        }
        self.lowest(problem, &opt, level) == level
    }

    /// The highest floor under option `o`, leaving out `cell`.
    fn max_floor_besides(&self, o: &Opt, cell: usize) -> u64 {
        let b = o.buffer as usize;
        let nsec = self.nsec;
        let mut m = 0;
        for st in o.st_lo as usize..o.st_hi as usize {
            for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                let c = st * nsec + s;
                if c != cell {
                    m = m.max(self.floor[c]);
                }
            }
        }
        m
    }

    /// How many floor steps a buffer `b` topping out at `top` in stripe `st`
    /// would close: the cells just before and just after its lifetime
    /// already at `top`, and `top` at the capacity. A closed step leaves a
    /// flat skyline that a later buffer can fill without waste, so such
    /// candidates go first (a branch order only; completeness is kept).
    fn closes(&self, st: usize, b: usize, top: u64) -> u8 {
        let nsec = self.nsec;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        let mut n = 0;
        if lo > 0 && self.floor[st * nsec + lo - 1] == top {
            n += 1;
        }
        if hi < nsec && self.floor[st * nsec + hi] == top {
            n += 1;
        }
        if top == self.k {
            n += 1;
        }
        n
    }

    /// Picks the node's cell and computes its branches.
    fn expand(&mut self, problem: &Problem) -> Result<Frame, Limit> {
        let nsec = self.nsec;
        let mut frame = Frame {
            trail_mark: self.trail.len() as u32,
            forbid_mark: self.forbid_trail.len() as u32,
            cand_lo: self.cands.len() as u32,
            cand_hi: self.cands.len() as u32,
            next: self.cands.len() as u32,
            cell: NONE,
            level: 0,
            raise_to: NO_LEVEL,
            applied: Applied::Nothing,
        };
        // The lowest live cell (first in cell order among equals).
        let f = self.tree[1];
        if f == NO_LEVEL {
            return Ok(frame);
        }
        let mut i = 1;
        while i < self.tsize {
            i = if self.tree[2 * i] == f {
                2 * i
            } else {
                2 * i + 1
            };
        }
        let best = i - self.tsize;
        frame.cell = best as u32;
        frame.level = f;
        let (cst, cs) = (best / nsec, best % nsec);
        let bufs = problem.buffers();
        // Look-ahead over the run of cells right of c in its stripe at
        // level f: a cell whose section cannot spare a byte there must be
        // covered at exactly f by a buffer inside the run, so the run must
        // be tileable by such buffers and wastable cells.
        let mut run_end = cs + 1;
        while run_end < nsec {
            let c = cst * nsec + run_end;
            if self.count[c] == 0 || self.floor[c] != f {
                break;
            }
            run_end += 1;
        }
        self.fin[run_end] = true;
        for s in (cs..run_end).rev() {
            let slack = self.capacity_area - self.floor_area[s] - self.remaining[s];
            let mut ok = slack >= self.width[cst] && self.fin[s + 1];
            let mut k = self.start_at[s] as usize;
            while !ok && k < self.start_at[s + 1] as usize {
                let o = self.starting[k] as usize;
                k += 1;
                let opt = self.opts[o];
                let e = self.sec_hi[opt.buffer as usize] as usize;
                ok = e <= run_end
                    && self.fin[e]
                    && (opt.st_lo as usize..opt.st_hi as usize).contains(&cst)
                    && self.fits_at(problem, o, f);
            }
            self.fin[s] = ok;
        }
        if !self.fin[cs] {
            return Ok(frame);
        }
        let mut raise_to = NO_LEVEL;
        for k in self.live_at[cs] as usize..self.live_at[cs + 1] as usize {
            let o = self.live[k] as usize;
            let opt = self.opts[o];
            let b = opt.buffer as usize;
            if self.placed[b] || !(opt.st_lo as usize..opt.st_hi as usize).contains(&cst) {
                continue;
            }
            let tw = self.twin_prev[b];
            let twin_waits = tw != NONE && !self.placed[tw as usize];
            // Where this option can sit at the lowest if byte f of the cell
            // stays empty: on its other cells' floors when those are above
            // f; else where pins or alignment put it; else resting on a
            // buffer that sits at f or higher, or on a pin.
            let others = self.max_floor_besides(&opt, best);
            let above = if others > f {
                self.lowest(problem, &opt, others)
            } else {
                self.lowest_above(problem, &opt, f)
            };
            raise_to = raise_to.min(above);
            if twin_waits || self.forbid[o] == f {
                continue;
            }
            if others > f
                || !self.fin[self.sec_hi[b] as usize]
                || self.lowest(problem, &opt, f) != f
                || f + bufs[b].size > self.k
            {
                continue;
            }
            if self.cands.len() == self.cands.capacity() {
                return Err(Limit::Storage);
            }
            let buf = &bufs[b];
            let mut life = buf.upper - buf.lower;
            if self.noise != 0 {
                // Up to doubling the lifetime, by a hash of (attempt, option).
                let h = mix(self.noise ^ o as u64) & 1023;
                life = life.saturating_add(((life as u128 * h as u128) >> 10) as u64);
            }
            self.cands.push(Cand {
                opt: o as u32,
                key: (
                    self.closes(cst, b, f + buf.size),
                    life,
                    buf.size,
                    buf.partitions,
                ),
            });
        }
        frame.cand_hi = self.cands.len() as u32;
        frame.raise_to = if raise_to <= self.k && self.fin[cs + 1] {
            raise_to
        } else {
            NO_LEVEL
        };
        self.cands[frame.cand_lo as usize..]
            .sort_unstable_by(|a, b| b.key.cmp(&a.key).then(a.opt.cmp(&b.opt)));
        Ok(frame)
    }
}
