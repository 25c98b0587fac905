//! The free gaps between the buffers live at one instant, ordered by
//! size, for best fit in a sweep by start time without walking the live
//! neighbours.
//!
//! In start order, the placed buffers that share an instant with the next
//! one are exactly those still live at its start (every placed buffer
//! started no later), and in a legal placement their ranges are disjoint.
//! So the sweep keeps the live ranges in offset order and the gaps between
//! them (the one under the lowest range included, the space above the
//! highest excluded) keyed by `(length, start)`: the best fit is the first
//! gap from length `size` up that holds the aligned buffer — the smallest
//! such gap, the lowest on ties, as the neighbour walk of
//! [`GreedyRule::StartBestFit`](super::greedy::GreedyRule) chooses — found
//! in O(log n) plus the gaps that alignment disqualifies. A buffer placed
//! splits its gap; one that ends joins the gaps beside it.
//!
//! Pins break the premise (a pin that starts later is an obstacle too):
//! the sweep is for problems without pins, linear mode.

use alloc::vec::Vec;

use crate::collections::treap::{MapFull, TreapMap};

use super::problem::{align_offset, Buffer};

/// Live ranges and their gaps; see the module doc.
#[derive(Debug, Default)]
pub struct LiveGaps {
    /// Live ranges by offset: `offset → buffer`.
    live: TreapMap,
    /// Gaps: `(length << 64) | start`.
    gaps: TreapMap,
    /// Buffers by end, for expiry: indices into the problem.
    by_end: Vec<u32>,
    /// How many of `by_end` have been removed.
    expired: usize,
    /// The top of each placed buffer, by buffer index (0: not placed).
    tops: Vec<u64>,
}

const fn gap_key(start: u64, end: u64) -> u128 {
    ((end - start) as u128) << 64 | start as u128
}

impl LiveGaps {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.live, self.gaps, self.by_end, self.tops)
    }

    /// Sizes the storage for problems of up to `buffers` buffers.
    pub fn reserve(&mut self, buffers: usize) {
        self.live.reserve(buffers);
        // A gap lies under each live range.
        self.gaps.reserve(buffers);
        crate::storage::grow(&mut self.by_end, buffers);
        crate::storage::grow(&mut self.tops, buffers);
    }

    /// True when problems of `buffers` buffers fit the reservation.
    pub fn holds(&self, buffers: usize) -> bool {
        self.by_end.capacity() >= buffers && self.tops.capacity() >= buffers
    }

    /// Starts a sweep over `bufs` (none pinned; `holds(bufs.len())`): the
    /// non-void ones are expired in the order of their ends.
    pub fn start(&mut self, bufs: &[Buffer]) {
        self.live.clear();
        self.gaps.clear();
        self.by_end.clear();
        self.by_end
            .extend((0..bufs.len() as u32).filter(|&i| !bufs[i as usize].is_void()));
        self.by_end
            .sort_unstable_by_key(|&i| (bufs[i as usize].upper, i));
        self.expired = 0;
        self.tops.clear();
        self.tops.resize(bufs.len(), 0);
    }

    /// Removes the buffers that end at or before `instant`.
    fn expire(&mut self, bufs: &[Buffer], instant: u64) -> Result<(), MapFull> {
        while let Some(&j) = self.by_end.get(self.expired) {
            let j = j as usize;
            if bufs[j].upper > instant {
                break;
            }
            self.expired += 1;
            let top = self.tops[j];
            if top == 0 {
                // Not placed (a non-void buffer's top is above 0).
                continue;
            }
            let offset = top - bufs[j].size;
            let below = self.below(offset);
            let above = self
                .live
                .lower_bound(offset as u128 + 1)
                .map(|(k, _)| k as u64);
            self.live.remove(offset as u128);
            if below < offset {
                self.gaps.remove(gap_key(below, offset));
            }
            if let Some(next) = above {
                if top < next {
                    self.gaps.remove(gap_key(top, next));
                }
                self.gaps.insert(gap_key(below, next), 0)?;
            }
        }
        Ok(())
    }

    /// The top of the highest live range below `offset`, 0 when none.
    fn below(&self, offset: u64) -> u64 {
        match offset.checked_sub(1) {
            Some(o) => self
                .live
                .floor(o as u128)
                .map_or(0, |(_, j)| self.tops[j as usize]),
            None => 0,
        }
    }

    /// Places buffer `i` (the next in start order) at its best fit and
    /// returns the offset.
    pub fn place(&mut self, bufs: &[Buffer], i: usize) -> Result<u64, MapFull> {
        let b = bufs[i];
        self.expire(bufs, b.lower)?;
        let mut key = (b.size as u128) << 64;
        let mut fit = None;
        while let Some((k, _)) = self.gaps.lower_bound(key) {
            let (len, start) = ((k >> 64) as u64, k as u64);
            let at = align_offset(start, b.align);
            if at + b.size <= start + len {
                fit = Some((start, start + len, at));
                break;
            }
            key = k + 1;
        }
        let offset = match fit {
            Some((start, end, at)) => {
                self.gaps.remove(gap_key(start, end));
                if start < at {
                    self.gaps.insert(gap_key(start, at), 0)?;
                }
                if at + b.size < end {
                    self.gaps.insert(gap_key(at + b.size, end), 0)?;
                }
                at
            }
            None => {
                // Above every live range; the space under it is a gap.
                let top = self.below(u64::MAX);
                let at = align_offset(top, b.align);
                if top < at {
                    self.gaps.insert(gap_key(top, at), 0)?;
                }
                at
            }
        };
        self.live.insert(offset as u128, i as u32)?;
        self.tops[i] = offset + b.size;
        Ok(offset)
    }
}
