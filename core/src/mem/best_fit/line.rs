//! One byte line `[0, end)` of the best-fit manager: every segment, free
//! or used, in a doubly linked list in address order, and the free ones
//! (*holes*) indexed by size — a treap keyed by `(size, start)`, or size
//! bins on flat lines — and, where a wide tensor must find the same range
//! free in other rows, by start.
//!
//! Invariants: the segments tile `[0, end)` without gaps; no two holes are
//! neighbours (a release merges them); every hole is in the size index
//! (and in the start index when `track_addr`), and nothing else is. The
//! arenas are reserved by [`Line::reserve`]; taking and releasing reuse
//! freed segments and never grow them.

use alloc::vec::Vec;

use super::super::size_bins::SizeBins;
use super::ManagerError;
use crate::align::align_up;
use crate::collections::treap::{MapFull, TreapMap};

/// No segment: the end of the list, an id not placed.
pub(super) const NIL: u32 = u32::MAX;
/// `owner` of a free segment.
pub(super) const FREE: u32 = u32::MAX;
/// Death of a space boundary: a wall never dies.
pub(super) const WALL: u32 = u32::MAX;

/// One segment: `[start, end)`, its neighbours in address order, and for
/// a used one the block's id and death (holes: [`FREE`], 0). Plain data:
/// its fields are as visible as the struct.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seg {
    pub start: u64,
    pub end: u64,
    pub prev: u32,
    pub next: u32,
    pub owner: u32,
    pub death: u32,
}

impl Seg {
    /// A hole `[start, end)` between `prev` and `next`.
    const fn hole(start: u64, end: u64, prev: u32, next: u32) -> Seg {
        Seg {
            start,
            end,
            prev,
            next,
            owner: FREE,
            death: 0,
        }
    }
}

/// The size index's key of a hole: by size, then start (distinct, as
/// starts are).
#[inline]
pub(super) fn size_key(size: u64, start: u64) -> u128 {
    ((size as u128) << 64) | start as u128
}

/// Rounds `x` down to a multiple of `a` (0 counts as 1).
#[inline]
pub(super) fn align_down(x: u64, a: u64) -> u64 {
    let a = a.max(1);
    x / a * a
}

/// Which end of a hole a tensor is placed against.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Side {
    Left,
    Right,
}

/// A byte line `[0, end)`: segments in address order, free ones indexed.
#[derive(Clone, Debug, Default)]
pub(super) struct Line {
    /// The segments, by id; freed ids are chained through `next` from
    /// `seg_free`.
    pub(super) segs: Vec<Seg>,
    seg_free: u32,
    /// Holes by `(size, start)` ([`size_key`]).
    pub(super) by_size: TreapMap,
    /// Holes by start, when `track_addr`.
    pub(super) by_addr: TreapMap,
    pub(super) track_addr: bool,
    /// Flat lines index holes in size bins instead of the `by_size` treap:
    /// O(1) insert and remove on the hot path of the 1-D scan.
    binned: bool,
    pub(super) bins: SizeBins,
    pub(super) end: u64,
}

impl Line {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.segs, self.by_size, self.by_addr, self.bins)
    }

    pub(super) fn reserve(&mut self, blocks: usize) {
        let segs = 2 * blocks + 2;
        crate::storage::grow(&mut self.segs, segs);
        self.by_size.reserve(blocks + 2);
        self.by_addr.reserve(blocks + 2);
        self.bins.reserve(segs);
    }

    pub(super) fn reset(
        &mut self,
        end: u64,
        track_addr: bool,
        binned: bool,
    ) -> Result<(), ManagerError> {
        self.segs.clear();
        self.seg_free = NIL;
        self.by_size.clear();
        self.by_addr.clear();
        self.bins.clear();
        if binned {
            self.bins.open_links();
        }
        self.track_addr = track_addr;
        self.binned = binned;
        self.end = end;
        if end > 0 {
            self.new_hole(Seg::hole(0, end, NIL, NIL))?;
        }
        Ok(())
    }

    fn new_seg(&mut self, s: Seg) -> Result<u32, ManagerError> {
        if self.seg_free != NIL {
            let i = self.seg_free;
            self.seg_free = self.segs[i as usize].next;
            self.segs[i as usize] = s;
            Ok(i)
        } else if self.segs.len() < self.segs.capacity() {
            self.segs.push(s);
            Ok((self.segs.len() - 1) as u32)
        } else {
            Err(ManagerError::WorkspaceFull {
                what: "segments",
                capacity: self.segs.capacity(),
            })
        }
    }

    fn drop_seg(&mut self, i: u32) {
        self.segs[i as usize].next = self.seg_free;
        self.segs[i as usize].owner = FREE;
        self.seg_free = i;
    }

    fn add_hole(&mut self, h: u32) -> Result<(), ManagerError> {
        let s = self.segs[h as usize];
        if self.binned {
            if !self.bins.can_hold(h) {
                return Err(ManagerError::WorkspaceFull {
                    what: "size bins",
                    capacity: self.segs.capacity(),
                });
            }
            self.bins.insert(h, s.end - s.start);
            return Ok(());
        }
        let full = |e: MapFull| ManagerError::WorkspaceFull {
            what: "free-block index",
            capacity: e.capacity,
        };
        self.by_size
            .insert(size_key(s.end - s.start, s.start), h)
            .map_err(full)?;
        if self.track_addr {
            self.by_addr.insert(s.start as u128, h).map_err(full)?;
        }
        Ok(())
    }

    fn remove_hole(&mut self, h: u32) {
        let s = self.segs[h as usize];
        if self.binned {
            self.bins.remove(h, s.end - s.start);
            return;
        }
        self.by_size.remove(size_key(s.end - s.start, s.start));
        if self.track_addr {
            self.by_addr.remove(s.start as u128);
        }
    }

    /// The free segment containing `[off, end)`, if the whole range is free.
    pub(super) fn hole_containing(&self, off: u64, end: u64) -> Option<u32> {
        let (_, h) = self.by_addr.floor(off as u128)?;
        let s = &self.segs[h as usize];
        (s.end >= end).then_some(h)
    }

    /// The offset of a block of `size` bytes placed against `side` of hole
    /// `h`, if it fits with its alignment.
    pub(super) fn fit(&self, h: u32, size: u64, align: u64, side: Side) -> Option<u64> {
        let s = &self.segs[h as usize];
        match side {
            Side::Left => {
                let off = align_up(s.start, align)?;
                (off.checked_add(size)? <= s.end).then_some(off)
            }
            Side::Right => {
                let off = align_down(s.end.checked_sub(size)?, align);
                (off >= s.start).then_some(off)
            }
        }
    }

    /// Death of the neighbour on `side` of hole `h` ([`WALL`] at the ends).
    pub(super) fn neighbour_death(&self, h: u32, side: Side) -> u32 {
        let s = &self.segs[h as usize];
        let n = match side {
            Side::Left => s.prev,
            Side::Right => s.next,
        };
        if n == NIL {
            WALL
        } else {
            self.segs[n as usize].death
        }
    }

    /// True when hole `h` runs to the end of the line.
    pub(super) fn is_top(&self, h: u32) -> bool {
        self.segs[h as usize].next == NIL
    }

    /// Turns `[off, off + size)` of hole `h` into a used block; what is
    /// left of the hole on either side stays a hole.
    pub(super) fn take(
        &mut self,
        h: u32,
        off: u64,
        size: u64,
        owner: u32,
        death: u32,
    ) -> Result<u32, ManagerError> {
        let Seg {
            start: hs,
            end: he,
            prev,
            next,
            ..
        } = self.segs[h as usize];
        self.remove_hole(h);
        let end = off + size;
        self.segs[h as usize] = Seg {
            start: off,
            end,
            prev,
            next,
            owner,
            death,
        };
        if off > hs {
            self.new_hole(Seg::hole(hs, off, prev, h))?;
        }
        if end < he {
            self.new_hole(Seg::hole(end, he, h, next))?;
        }
        Ok(h)
    }

    /// Adds hole `s` between its neighbours.
    fn new_hole(&mut self, s: Seg) -> Result<(), ManagerError> {
        let h = self.new_seg(s)?;
        self.link(h);
        self.add_hole(h)
    }

    /// Points the neighbours of segment `s` at it.
    fn link(&mut self, s: u32) {
        let Seg { prev, next, .. } = self.segs[s as usize];
        if prev != NIL {
            self.segs[prev as usize].next = s;
        }
        if next != NIL {
            self.segs[next as usize].prev = s;
        }
    }

    /// Frees a used block, merging it with free neighbours; returns the size
    /// of the resulting hole.
    pub(super) fn release(&mut self, b: u32) -> Result<u64, ManagerError> {
        let s = self.segs[b as usize];
        let (mut start, mut end, mut prev, mut next) = (s.start, s.end, s.prev, s.next);
        if let Some(p) = self.absorb(prev) {
            (start, prev) = (p.start, p.prev);
        }
        if let Some(n) = self.absorb(next) {
            (end, next) = (n.end, n.next);
        }
        self.segs[b as usize] = Seg::hole(start, end, prev, next);
        self.link(b);
        self.add_hole(b)?;
        Ok(end - start)
    }

    /// Takes neighbour `n` ([`NIL`]: none) out of the line when it is a
    /// hole, for a release to merge it; returns it.
    fn absorb(&mut self, n: u32) -> Option<Seg> {
        let s = *self.segs.get(n as usize)?;
        if s.owner != FREE {
            return None;
        }
        self.remove_hole(n);
        self.drop_seg(n);
        Some(s)
    }

    /// Free holes in address order starting at or after `from`.
    pub(super) fn next_hole_by_addr(&self, from: u64) -> Option<u32> {
        self.by_addr.lower_bound(from as u128).map(|(_, h)| h)
    }
}

// ---------------------------------------------------------------------------
