//! The flat geometry: one byte line of a given capacity, the 1-D buffer
//! problem of `tusk dsa` and DRAM-like spaces, on the hot path of the 1-D
//! scan: its holes sit in size bins, and the search walks the bins for the
//! `candidates` smallest fitting holes.
//!
//! Invariant: `flat_seg[id]` names the segment of a placed id; an entry is
//! current only while that segment is owned by the id.

use super::super::size_bins;
use super::line::{align_down, size_key, Side, NIL};
use super::{BestFitMemoryManager, Corner, Geometry, ManagerError, Placement, Request};
use crate::align::align_up;

/// Most candidates the flat line compares ([`super::Policy::candidates`]
/// is clamped to it there): the length of the search's inline shortlist.
pub const FLAT_CANDIDATES: usize = 8;
/// The 1-D scan's fragmentation sampling (see
/// [`BestFitMemoryManager::set_fragmentation_sampling`]).
pub const FLAT_FRAGMENTATION_SAMPLING: u32 = 8;

/// Extra constraints of one flat placement ([`BestFitMemoryManager::allocate_flat_hinted`]),
/// from the 1-D scan's offline knowledge.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FlatHint {
    /// Place at or above this offset when some hole allows it (a reservation
    /// of the bottom for a larger buffer that starts while this one is live);
    /// when none does, the constraint is dropped. 0: none.
    pub min_offset: u64,
    /// When the open end is chosen, place against its right end (the line's
    /// capacity) instead of its left end: with a capped line, long-lived or
    /// small buffers gathered at the top leave the bottom in one piece.
    pub open_right: bool,
}

/// The `want` smallest `(size, start)` keys offered, sorted: the flat
/// search's shortlist (insertion into a short array: at a handful of
/// entries cheaper than a general sorted container).
struct Shortlist {
    keys: [u128; FLAT_CANDIDATES],
    ids: [u32; FLAT_CANDIDATES],
    len: usize,
    want: usize,
}

impl Shortlist {
    #[inline]
    fn new(want: usize) -> Self {
        Shortlist {
            keys: [0; FLAT_CANDIDATES],
            ids: [0; FLAT_CANDIDATES],
            len: 0,
            want: want.clamp(1, FLAT_CANDIDATES),
        }
    }

    /// True when `key` would enter the list.
    #[inline]
    fn would_take(&self, key: u128) -> bool {
        self.len < self.want || key < self.keys[self.len - 1]
    }

    /// Inserts `key` in order, dropping the largest when full.
    #[inline]
    fn offer(&mut self, key: u128, id: u32) {
        if !self.would_take(key) {
            return;
        }
        if self.len == self.want {
            self.len -= 1;
        }
        let mut i = self.len;
        while i > 0 && self.keys[i - 1] > key {
            self.keys[i] = self.keys[i - 1];
            self.ids[i] = self.ids[i - 1];
            i -= 1;
        }
        self.keys[i] = key;
        self.ids[i] = id;
        self.len += 1;
    }
}

impl BestFitMemoryManager {
    /// Empties the manager as one flat line of `capacity` bytes.
    pub fn reset_flat(&mut self, capacity: u64, ids: usize) -> Result<(), ManagerError> {
        self.reset_common(Geometry::Flat, ids)?;
        self.rows = 1;
        self.row_partitions = 1;
        self.total_partitions = 1;
        self.start_rules = [(1, 1); 3];
        self.lines[0].reset(capacity, false, true)
    }

    /// [`Self::allocate`] on a flat line, with the 1-D scan's [`FlatHint`].
    pub fn allocate_flat_hinted(
        &mut self,
        req: &Request,
        hint: FlatHint,
    ) -> Result<Option<Placement>, ManagerError> {
        self.check_id(req.id)?;
        if self.geometry != Geometry::Flat {
            return Err(ManagerError::Unsupported {
                what: "placement hints on a non-flat geometry",
            });
        }
        let p = self.allocate_flat(req, hint)?;
        if p.is_some() {
            self.placed += 1;
        }
        Ok(p)
    }

    /// The flat line's placement: the same answers as [`Self::best_on_base`]
    /// on one row (the `candidates` smallest fitting bounded holes by
    /// `(size, start)`, both ends of each compared by lifetime; the open end
    /// only when it is smaller than every fitting bounded hole or none
    /// fits), found through the size bins instead of repeated ordered-index
    /// look-ups. A hint's `min_offset` is tried first and dropped when no
    /// hole satisfies it.
    pub(super) fn allocate_flat(
        &mut self,
        req: &Request,
        hint: FlatHint,
    ) -> Result<Option<Placement>, ManagerError> {
        let line = &self.lines[0];
        if req.partitions != 1 {
            return Err(ManagerError::NeverFits {
                what: "partition count",
                value: req.partitions as u64,
                max: 1,
            });
        }
        if req.bytes == 0 || req.bytes > line.end {
            return Err(ManagerError::NeverFits {
                what: "bytes per partition",
                value: req.bytes,
                max: line.end,
            });
        }
        let mut found = None;
        if hint.min_offset > 0 {
            found = self.search_flat(req, hint.min_offset, hint.open_right);
        }
        if found.is_none() {
            found = self.search_flat(req, 0, hint.open_right);
        }
        let Some((off, h)) = found else {
            return Ok(None);
        };
        // The flat commit: one line, the hole the search found.
        let seg = self.lines[0].take(h, off, req.bytes, req.id, req.death)?;
        self.flat_seg[req.id as usize] = seg;
        self.peak_bytes = self.peak_bytes.max(off + req.bytes);
        self.live_area += req.bytes;
        Ok(Some(Placement {
            base_partition: 0,
            offset: off,
            corner: Corner::LowerLeft,
        }))
    }

    /// The offset and hole of the flat search with every offset at or above
    /// `floor`; `None` when nothing fits.
    fn search_flat(&self, req: &Request, floor: u64, open_right: bool) -> Option<(u64, u32)> {
        let line = &self.lines[0];
        let aware = self.policy.lifetime_aware;
        let want = if aware {
            (self.policy.candidates as usize).clamp(1, FLAT_CANDIDATES)
        } else {
            1
        };
        let clear = |off: u64| -> bool {
            self.obstacles.is_empty() || !self.hits_obstacle(0, 1, off, off + req.bytes, req)
        };
        // The offset against `side` of bounded hole `h`, above the floor.
        let side_off = |h: u32, side: Side| -> Option<u64> {
            let off = line.fit(h, req.bytes, req.align, side)?;
            (off >= floor && clear(off)).then_some(off)
        };
        // The open end's offset: left end (above the floor), or right end.
        let open_off = |h: u32| -> Option<u64> {
            let s = &line.segs[h as usize];
            let lo = align_up(s.start.max(floor), req.align)?;
            if lo.checked_add(req.bytes)? > s.end {
                return None;
            }
            let off = if open_right {
                align_down(s.end - req.bytes, req.align).max(lo)
            } else {
                lo
            };
            clear(off).then_some(off)
        };
        // No floor, alignment or obstacle: every hole of the size fits at
        // both ends (the common case, checked once instead of per hole).
        let simple = floor == 0 && req.align <= 1 && self.obstacles.is_empty();
        // The `want` smallest fitting bounded holes, by (size, start).
        let mut cands = Shortlist::new(want);
        let mut top = None;
        let mut bin = size_bins::bin_of(req.bytes);
        while let Some(b) = line.bins.next_bin(bin) {
            let mut h = line.bins.head(b);
            while h != size_bins::NIL {
                let s = &line.segs[h as usize];
                let size = s.end - s.start;
                let next = line.bins.next(h);
                if size >= req.bytes {
                    if s.next == NIL {
                        if let Some(off) = open_off(h) {
                            top = Some((size_key(size, s.start), off, h));
                        }
                    } else {
                        let key = size_key(size, s.start);
                        if cands.would_take(key)
                            && (simple
                                || side_off(h, Side::Left).is_some()
                                || (aware && side_off(h, Side::Right).is_some()))
                        {
                            cands.offer(key, h);
                        }
                    }
                }
                h = next;
            }
            if cands.len >= want {
                break;
            }
            bin = b + 1;
        }
        if let Some((tk, off, h)) = top {
            if cands.len == 0 || tk < cands.keys[0] {
                return Some((off, h));
            }
        }
        let sides: &[Side] = if aware {
            &[Side::Left, Side::Right]
        } else {
            &[Side::Left]
        };
        let mut best: Option<((u8, u64, u64), u64, u32)> = None;
        for (&key, &h) in cands.keys[..cands.len].iter().zip(&cands.ids[..cands.len]) {
            let waste = (key >> 64) as u64 - req.bytes;
            let seg = &line.segs[h as usize];
            for &eff in sides {
                let off = if simple {
                    match eff {
                        Side::Left => seg.start,
                        Side::Right => seg.end - req.bytes,
                    }
                } else {
                    let Some(off) = side_off(h, eff) else {
                        continue;
                    };
                    off
                };
                let score = if aware {
                    let n = match eff {
                        Side::Left => seg.prev,
                        Side::Right => seg.next,
                    };
                    let gap = if n == NIL {
                        u32::MAX as u64 - req.death as u64
                    } else {
                        line.segs[n as usize].death.abs_diff(req.death) as u64
                    };
                    let first = self.policy.outliving_first
                        && n != NIL
                        && line.segs[n as usize].death < req.death;
                    (first as u8, gap, waste)
                } else {
                    (0, waste, off)
                };
                if best.map_or(true, |(b, _, _)| score < b) {
                    best = Some((score, off, h));
                }
            }
        }
        best.map(|(_, off, h)| (off, h))
    }

    /// The segment of a placed id on the flat line.
    #[inline]
    pub(super) fn flat_block(&self, id: u32) -> Option<u32> {
        if id as usize >= self.ids {
            return None;
        }
        let seg = *self.flat_seg.get(id as usize)?;
        let s = self.lines[0].segs.get(seg as usize)?;
        (s.owner == id).then_some(seg)
    }

    /// [`Self::free`] on the flat line.
    pub(super) fn free_flat(&mut self, id: u32) -> Result<(), ManagerError> {
        let Some(seg) = self.flat_block(id) else {
            return Err(ManagerError::UnknownId { id });
        };
        let line = &mut self.lines[0];
        let s = line.segs[seg as usize];
        self.live_area = self.live_area.saturating_sub(s.end - s.start);
        let merged = line.release(seg)?;
        if self.sample_now() {
            self.quantiles.add(merged);
        }
        Ok(())
    }

    /// The largest hole of the flat line: one in the last non-empty bin.
    pub(super) fn largest_hole(&self) -> u64 {
        let line = &self.lines[0];
        let Some(b) = line.bins.last_bin() else {
            return 0;
        };
        let mut best = 0;
        let mut h = line.bins.head(b);
        while h != size_bins::NIL {
            let s = &line.segs[h as usize];
            best = best.max(s.end - s.start);
            h = line.bins.next(h);
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::super::request as req;
    use super::super::Policy;
    use super::*;

    #[test]
    fn flat_best_fit_merges_and_prefers_bounded_holes() {
        let mut m = BestFitMemoryManager::new();
        m.reserve(8, 0);
        m.reset_flat(1000, 8).unwrap();
        m.set_policy(Policy {
            candidates: 1,
            lifetime_aware: false,
            outliving_first: false,
        });
        for (i, s) in [100u64, 50, 100, 30].iter().enumerate() {
            m.allocate(&req(i as u32, 1, *s, 9)).unwrap().unwrap();
        }
        m.free(1).unwrap(); // hole [100,150)
                            // 40 bytes: the bounded 50-byte hole, not the open end.
        let p = m.allocate(&req(4, 1, 40, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 100);
        m.free(4).unwrap();
        m.free(0).unwrap();
        m.free(2).unwrap(); // [0,250) merged
        let p = m.allocate(&req(5, 1, 250, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 0);
        assert_eq!(m.largest_free(1).bytes, 1000 - 280);
        assert!(m.fragmentation().samples >= 4);
    }
}
