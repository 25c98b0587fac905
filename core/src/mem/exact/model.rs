//! The model both searches work on, built by
//! [`ExactWorkspace::setup`] for each attempt.
//!
//! # Model
//! Time is cut into sections at every lifetime end (the skyline search), or
//! at every distinct end time (the canonical search's coarse sections);
//! partitions are cut into stripes at every first and last partition a
//! buffer may take (one stripe in linear mode). A *cell* is a (stripe,
//! section) pair. The skyline search keeps, per cell, a *floor*: nothing
//! will be placed below it there any more. A cell is *live* while some
//! unplaced buffer could still cover it; a min-tree over the live cells'
//! floors finds the lowest one. An *option* is one way to place a buffer:
//! a legal base partition, and so the stripes it covers. Pins are
//! obstacles: every offset a search tries is clear of them
//! ([`ExactWorkspace::lowest`]).

use super::{ExactWorkspace, Opt, NONE, NO_LEVEL};
use crate::mem::problem::{align_offset, Buffer, Placement, Problem};
use crate::storage::refill;

impl ExactWorkspace {
    /// Builds sections, stripes, options and the root state at capacity `k`.
    pub(super) fn setup(&mut self, problem: &Problem, k: u64, coarse: bool) {
        let bufs = problem.buffers();
        let n = bufs.len();
        self.timeline.build(problem);
        // Coarse sections: one per distinct end time, holding the buffers
        // live just before it (the cross-sections; every set of buffers live
        // at one instant is inside one of them, so they carry the same
        // inference and decomposition as the instants with fewer cells).
        self.ends.clear();
        if coarse {
            self.ends
                .extend(bufs.iter().filter(|b| !b.is_void()).map(|b| b.upper));
            self.ends.sort_unstable();
            self.ends.dedup();
        }
        let nsec = if coarse {
            self.ends.len().max(1)
        } else {
            self.timeline.sections().max(1)
        };
        self.nsec = nsec;
        // Stripes: cut at every first/last partition of every legal base.
        let total = problem.partitions();
        self.cuts.clear();
        self.cuts.push(0);
        self.cuts.push(total);
        for b in bufs.iter().filter(|b| !b.is_void() && b.pin.is_none()) {
            for base in problem.legal_bases(b.partitions) {
                self.cuts.push(base);
                self.cuts.push(base + b.partitions);
            }
        }
        self.cuts.sort_unstable();
        self.cuts.dedup();
        self.nst = self.cuts.len() - 1;
        self.width.clear();
        for w in self.cuts.windows(2) {
            self.width.push((w[1] - w[0]) as u64);
        }
        let cells = self.nst * nsec;
        // Per-buffer data and options.
        self.sec_lo.clear();
        self.sec_hi.clear();
        self.area.clear();
        self.placed.clear();
        self.opt_at.clear();
        self.opts.clear();
        self.unplaced = 0;
        for (i, b) in bufs.iter().enumerate() {
            let searchable = !b.is_void() && b.pin.is_none();
            let (lo, hi) = if b.is_void() {
                (0, 0)
            } else {
                if coarse {
                    (
                        self.ends.partition_point(|&e| e <= b.lower) as u32,
                        self.ends.partition_point(|&e| e <= b.upper) as u32,
                    )
                } else {
                    (
                        self.timeline.section_of(b.lower) as u32,
                        self.timeline.section_of(b.upper) as u32,
                    )
                }
            };
            self.sec_lo.push(lo);
            self.sec_hi.push(hi);
            self.area.push(b.size * b.partitions as u64);
            self.placed.push(!searchable);
            self.opt_at.push(self.opts.len() as u32);
            if let Some(pin) = b.pin {
                self.current[i] = pin;
            } else if b.is_void() {
                self.current[i] = Placement {
                    offset: 0,
                    base: problem.legal_bases(b.partitions).next().unwrap_or(0),
                };
            }
            if searchable {
                self.unplaced += 1;
                for base in problem.legal_bases(b.partitions) {
                    let st_lo = self.cuts.partition_point(|&c| c < base) as u16;
                    let st_hi = self.cuts.partition_point(|&c| c < base + b.partitions) as u16;
                    self.opts.push(Opt {
                        buffer: i as u32,
                        base,
                        st_lo,
                        st_hi,
                    });
                }
            }
        }
        self.opt_at.push(self.opts.len() as u32);
        refill(&mut self.forbid, self.opts.len(), NO_LEVEL);
        // Identical buffers are placed in index order.
        self.order.clear();
        self.order
            .extend((0..n as u32).filter(|&i| !self.placed[i as usize]));
        let ident = |b: &Buffer| (b.lower, b.upper, b.size, b.align, b.partitions);
        self.order.sort_unstable_by(|&x, &y| {
            (ident(&bufs[x as usize]), x).cmp(&(ident(&bufs[y as usize]), y))
        });
        // Least neighbour sizes, over the buffers sorted by start (`order`
        // holds the searchable ones; pins also block, so they count too).
        refill(&mut self.min_neighbour, n, NO_LEVEL);
        for (x, &i) in self.order.iter().enumerate() {
            let a = &bufs[i as usize];
            for &j in &self.order[x + 1..] {
                let b = &bufs[j as usize];
                if b.lower >= a.upper {
                    break;
                }
                let (i, j) = (i as usize, j as usize);
                self.min_neighbour[i] = self.min_neighbour[i].min(b.size);
                self.min_neighbour[j] = self.min_neighbour[j].min(a.size);
            }
            for &p in &self.pins {
                let pb = &bufs[p as usize];
                if pb.overlaps_in_time(a) {
                    let i = i as usize;
                    self.min_neighbour[i] = self.min_neighbour[i].min(pb.size);
                }
            }
        }
        refill(&mut self.twin_prev, n, NONE);
        for w in self.order.windows(2) {
            if ident(&bufs[w[0] as usize]) == ident(&bufs[w[1] as usize]) {
                self.twin_prev[w[1] as usize] = w[0];
            }
        }
        // Options live in each section, by start section (CSR).
        refill(&mut self.live_at, nsec + 2, 0);
        for o in &self.opts {
            let b = o.buffer as usize;
            for s in self.sec_lo[b]..self.sec_hi[b] {
                self.live_at[s as usize + 1] += 1;
            }
        }
        for s in 0..=nsec {
            self.live_at[s + 1] += self.live_at[s];
        }
        refill(&mut self.live, self.live_at[nsec] as usize, 0);
        // `order` is sorted by start: fill each section's list in that order
        // (using floor_area as the fill cursor).
        refill(&mut self.floor_area, nsec, 0);
        for &b in &self.order {
            let b = b as usize;
            for o in self.opt_at[b]..self.opt_at[b + 1] {
                for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                    let at = self.live_at[s] as usize + self.floor_area[s] as usize;
                    self.live[at] = o;
                    self.floor_area[s] += 1;
                }
            }
        }
        refill(&mut self.start_at, nsec + 2, 0);
        for o in &self.opts {
            self.start_at[self.sec_lo[o.buffer as usize] as usize + 1] += 1;
        }
        for s in 0..=nsec {
            self.start_at[s + 1] += self.start_at[s];
        }
        refill(&mut self.starting, self.opts.len(), 0);
        self.floor_area.iter_mut().for_each(|x| *x = 0);
        for (o, opt) in self.opts.iter().enumerate() {
            let s = self.sec_lo[opt.buffer as usize] as usize;
            self.starting[self.start_at[s] as usize + self.floor_area[s] as usize] = o as u32;
            self.floor_area[s] += 1;
        }
        refill(&mut self.fin, nsec + 1, false);
        // Cells and sections.
        refill(&mut self.floor, cells, 0);
        refill(&mut self.count, cells, 0);
        self.tree.clear();
        refill(&mut self.floor_area, nsec, 0);
        refill(&mut self.remaining, nsec, 0);
        for b in 0..n {
            if !self.placed[b] {
                self.count_options(b, true);
                for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                    self.remaining[s] += self.area[b];
                }
            }
        }
        self.tsize = cells.next_power_of_two();
        refill(&mut self.tree, 2 * self.tsize, NO_LEVEL);
        for c in 0..cells {
            if self.count[c] > 0 {
                self.tree[self.tsize + c] = self.floor[c];
            }
        }
        for i in (1..self.tsize).rev() {
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
        let parts = total as u64;
        self.k = k.min((u64::MAX / 4) / parts);
        self.capacity_area = self.k * parts;
        self.trail.clear();
        self.forbid_trail.clear();
        self.frames.clear();
        self.cands.clear();
    }

    pub(super) fn count_options(&mut self, b: usize, add: bool) {
        let nsec = self.nsec;
        let ready = !self.tree.is_empty();
        for o in self.opt_at[b] as usize..self.opt_at[b + 1] as usize {
            let opt = self.opts[o];
            for st in opt.st_lo as usize..opt.st_hi as usize {
                for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                    let cell = st * nsec + s;
                    let c = &mut self.count[cell];
                    let was_live = *c > 0;
                    if add {
                        *c += 1;
                    } else {
                        *c -= 1;
                    }
                    if ready && was_live != (*c > 0) {
                        self.refresh(cell);
                    }
                }
            }
        }
    }

    /// Recomputes the min-tree above `cell`.
    pub(super) fn refresh(&mut self, cell: usize) {
        let mut i = self.tsize + cell;
        self.tree[i] = if self.count[cell] > 0 {
            self.floor[cell]
        } else {
            NO_LEVEL
        };
        while i > 1 {
            i /= 2;
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
    }

    /// The lowest offset at or above `from` where option `o` avoids every pin.
    ///
    /// One pass over the pins in offset order ([`Self::pins_consistent`]
    /// sorts them): every pin passed ends at or below `off` (it was either
    /// clear of it or pushed it up), so `off` only rises, and the first pin
    /// starting at or above `off + size` ends the pass, as do all after it.
    pub(super) fn lowest(&self, problem: &Problem, o: &Opt, from: u64) -> u64 {
        let bufs = problem.buffers();
        let b = &bufs[o.buffer as usize];
        let mut off = align_offset(from, b.align);
        let end = o.base + b.partitions;
        for &p in &self.pins {
            let pb = &bufs[p as usize];
            let pp = pb.pin.unwrap_or_default();
            if pp.offset >= off + b.size {
                break;
            }
            if off < pp.offset + pb.size
                && pb.overlaps_in_time(b)
                && pp.base < end
                && o.base < pp.base + pb.partitions
            {
                off = align_offset(pp.offset + pb.size, b.align);
            }
        }
        off
    }

    /// False when two pins collide or a pin reaches above the capacity.
    /// Lists the pins in offset order (what [`Self::lowest`] relies on).
    pub(super) fn pins_consistent(&mut self, problem: &Problem, cap: u64) -> bool {
        let bufs = problem.buffers();
        self.pins.clear();
        for (i, b) in bufs.iter().enumerate() {
            if b.pin.is_some() && !b.is_void() {
                self.pins.push(i as u32);
            }
        }
        self.pins
            .sort_unstable_by_key(|&i| (bufs[i as usize].pin.unwrap_or_default().offset, i));
        for (k, &i) in self.pins.iter().enumerate() {
            let a = &bufs[i as usize];
            let pa = a.pin.unwrap_or_default();
            if pa.offset + a.size > cap {
                return false;
            }
            for &j in &self.pins[..k] {
                let b = &bufs[j as usize];
                let pb = b.pin.unwrap_or_default();
                if a.overlaps_in_time(b)
                    && pa.base < pb.base + b.partitions
                    && pb.base < pa.base + a.partitions
                    && pa.offset < pb.offset + b.size
                    && pb.offset < pa.offset + a.size
                {
                    return false;
                }
            }
        }
        true
    }
}
