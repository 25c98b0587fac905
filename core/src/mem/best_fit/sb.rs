//! The SB geometry: partitions × bytes as one byte line per row of the
//! finest start granularity (a *quadrant* of 32 partitions on every preset
//! target), a tensor of `P` partitions on `ceil(P / g)` adjacent rows at a
//! legal base, on `[offset, offset + bytes)` free in each of them, within
//! `target.sb_usable_bytes`.
//!
//! Three corner strategies are tried in the reference's order:
//! *lower-left* (left edge on the start of a hole of the bottom row, bases
//! ascending), *upper-left* (left edge on the start of a hole of the top
//! row, bases descending), *right* (right edge on the end of a hole of the
//! bottom row). For one-row tensors lower-left already sees every hole; the
//! other two matter when the rows of a wide tensor are fragmented
//! differently. A placement that only a middle row of a 3- or 4-row tensor
//! could anchor is not searched (the reference has no such strategy
//! either).
//!
//! Invariant: a placed tensor holds one used segment in each of its rows,
//! all on the same byte range, listed in `row_segs` from its base row.

use super::line::{size_key, Side, WALL};
use super::{
    row_granularity, BestFitMemoryManager, Corner, Geometry, ManagerError, Placement, Request,
    Slot, EMPTY_SLOT, MAX_ROWS,
};
use crate::target::Target;

/// A scored candidate: (score, offset, base row, (anchor row, anchor hole)).
type Candidate = ((u8, u64, u64), u64, usize, (usize, u32));

impl BestFitMemoryManager {
    /// Lines the SB geometry of `target` uses: its partitions over the
    /// finest start granularity (at least 1; [`Self::reset_sb`] rejects
    /// more than [`MAX_ROWS`]).
    pub fn sb_rows(target: &Target) -> usize {
        ((target.sb_partitions / row_granularity(target)) as usize).clamp(1, MAX_ROWS)
    }

    /// Empties the manager as the SB of `target`, for ids `0..ids`.
    pub fn reset_sb(&mut self, target: &Target, ids: usize) -> Result<(), ManagerError> {
        self.reset_common(Geometry::Sb, ids)?;
        self.set_rows(target, "SB", target.sb_partitions)?;
        let rows = self.rows;
        let segs = ids.saturating_mul(rows);
        if segs > self.row_segs.capacity() {
            return Err(ManagerError::WorkspaceFull {
                what: "row segment",
                capacity: self.row_segs.capacity(),
            });
        }
        self.row_segs.clear();
        self.row_segs.resize(segs, super::NIL);
        let track = rows > 1;
        for l in self.lines.iter_mut().take(rows) {
            l.reset(target.sb_usable_bytes as u64, track, false)?;
        }
        Ok(())
    }

    /// The best candidate of one strategy on one base, as
    /// `(score, anchor hole, offset)`.
    fn best_on_base(
        &self,
        req: &Request,
        base: usize,
        k: usize,
        anchor: usize,
        side: Side,
    ) -> Option<((u8, u64, u64), u64, u32)> {
        let line = &self.lines[anchor];
        let mut key = size_key(req.bytes, 0);
        let mut found = 0u32;
        let mut best: Option<((u8, u64, u64), u64, u32)> = None;
        let want = if self.policy.lifetime_aware {
            self.policy.candidates.max(1)
        } else {
            1
        };
        while let Some((hk, h)) = line.by_size.lower_bound(key) {
            key = hk + 1;
            let hole_size = (hk >> 64) as u64;
            let top = line.is_top(h);
            if top && best.is_some() {
                // The open end is the last resort.
                continue;
            }
            // One-row tensors compare both ends of a hole (the right corner
            // of that row is the same hole's other end); wider tensors keep
            // the strategy's corner so that the three strategies differ.
            let both = [Side::Left, Side::Right];
            let one = [side];
            let sides: &[Side] = if k == 1 && self.policy.lifetime_aware && !top {
                &both
            } else {
                &one
            };
            let mut any = false;
            for &eff in sides {
                let Some(off) = line.fit(h, req.bytes, req.align, eff) else {
                    continue;
                };
                if !self.free_in_rows(base, k, anchor, off, off + req.bytes)
                    || self.hits_obstacle(base, k, off, off + req.bytes, req)
                {
                    continue;
                }
                any = true;
                let nd = line.neighbour_death(h, eff);
                let gap = if nd == WALL {
                    // A wall suits a block that outlives its neighbours.
                    u32::MAX as u64 - req.death as u64
                } else {
                    nd.abs_diff(req.death) as u64
                };
                let waste = hole_size - req.bytes;
                let score = if top {
                    // The open end: only the peak matters.
                    (2, off, 0)
                } else if self.policy.lifetime_aware {
                    let first = self.policy.outliving_first && nd < req.death;
                    (first as u8, gap, waste)
                } else {
                    (0, waste, off)
                };
                if best.map_or(true, |(b, _, _)| score < b) {
                    best = Some((score, off, h));
                }
            }
            if any {
                found += 1;
                if found >= want || top {
                    break;
                }
            }
        }
        best
    }

    fn free_in_rows(&self, base: usize, k: usize, anchor: usize, off: u64, end: u64) -> bool {
        (base..base + k)
            .filter(|&r| r != anchor)
            .all(|r| self.lines[r].hole_containing(off, end).is_some())
    }

    /// The SB placement: the three corner strategies in the reference's
    /// order, each over every legal base; the first that finds a place
    /// wins.
    pub(super) fn allocate_rows(
        &mut self,
        req: &Request,
    ) -> Result<Option<Placement>, ManagerError> {
        let (k, step) = self.rows_for(req.partitions)?;
        let cap = self.lines[0].end;
        if req.bytes == 0 || req.bytes > cap {
            return Err(ManagerError::NeverFits {
                what: "bytes per partition",
                value: req.bytes,
                max: cap,
            });
        }
        let nbases = self.bases(k, step);
        let strategies = [
            (Corner::LowerLeft, false, Side::Left),
            (Corner::UpperLeft, true, Side::Left),
            (Corner::Right, false, Side::Right),
        ];
        for (corner, top_anchor, side) in strategies {
            let mut best: Option<Candidate> = None;
            for bi in 0..nbases {
                let base = if top_anchor {
                    (nbases - 1 - bi) * step
                } else {
                    bi * step
                };
                let anchor = if top_anchor { base + k - 1 } else { base };
                if let Some((score, off, h)) = self.best_on_base(req, base, k, anchor, side) {
                    if best.map_or(true, |(b, _, _, _)| score < b) {
                        best = Some((score, off, base, (anchor, h)));
                    }
                }
            }
            if let Some((_, off, base, hint)) = best {
                self.commit_rows(req, base, k, off, Some(hint))?;
                return Ok(Some(Placement {
                    base_partition: (base as u16) * self.row_partitions,
                    offset: off,
                    corner,
                }));
            }
            if k == 1 {
                // One row: lower-left already saw every hole of every base.
                break;
            }
        }
        Ok(None)
    }

    /// Takes `[off, off + bytes)` in rows `base..base + k`; `hint` is the
    /// anchor row's hole when the search found it.
    pub(super) fn commit_rows(
        &mut self,
        req: &Request,
        base: usize,
        k: usize,
        off: u64,
        hint: Option<(usize, u32)>,
    ) -> Result<(), ManagerError> {
        let end = off + req.bytes;
        let segs = req.id as usize * self.rows;
        for r in base..base + k {
            let line = &mut self.lines[r];
            let h = if let Some((_, h)) = hint.filter(|&(row, _)| row == r) {
                // The hole the search found in the anchor row.
                Some(h)
            } else if line.track_addr {
                line.hole_containing(off, end)
            } else {
                // One line without an address index: the caller found the
                // hole through the size index; find it again by size.
                let mut key = size_key(req.bytes, 0);
                let mut hit = None;
                while let Some((hk, h)) = line.by_size.lower_bound(key) {
                    key = hk + 1;
                    let s = &line.segs[h as usize];
                    if s.start <= off && end <= s.end {
                        hit = Some(h);
                        break;
                    }
                }
                hit
            };
            let Some(h) = h else {
                return Err(ManagerError::FixedOverlap { id: req.id });
            };
            self.row_segs[segs + (r - base)] = line.take(h, off, req.bytes, req.id, req.death)?;
            self.peak_bytes = self.peak_bytes.max(end);
        }
        self.slots[req.id as usize] = Slot {
            base_row: base as u8,
            rows: k as u8,
            ..EMPTY_SLOT
        };
        self.live_area += req.bytes * k as u64 * self.row_partitions as u64;
        Ok(())
    }

    /// [`Self::free`] of a tensor on rows.
    pub(super) fn free_rows(&mut self, id: u32, slot: &Slot) -> Result<(), ManagerError> {
        let base = slot.base_row as usize;
        let segs = id as usize * self.rows;
        for r in base..base + slot.rows as usize {
            let seg = self.row_segs[segs + (r - base)];
            let s = self.lines[r].segs[seg as usize];
            self.live_area = self
                .live_area
                .saturating_sub((s.end - s.start) * self.row_partitions as u64);
            let merged = self.lines[r].release(seg)?;
            if r == base && self.sample_now() {
                self.quantiles.add(merged);
            }
        }
        Ok(())
    }

    /// Longest byte run free in every row of `base..base + k`.
    pub(super) fn largest_common_run(&self, base: usize, k: usize) -> u64 {
        let line = &self.lines[base];
        if !line.track_addr {
            // One row: the largest hole is the last entry of the size index.
            return line
                .by_size
                .floor(u128::MAX)
                .map_or(0, |(key, _)| (key >> 64) as u64);
        }
        let mut best = 0u64;
        let mut from = 0u64;
        while let Some(h) = line.next_hole_by_addr(from) {
            let s = line.segs[h as usize];
            from = s.start + 1;
            // Intersect [s.start, s.end) with the other rows, piece by piece.
            let mut lo = s.start;
            while lo < s.end {
                let mut hi = s.end;
                let mut ok = true;
                for r in base + 1..base + k {
                    match self.lines[r].by_addr.floor(lo as u128) {
                        Some((_, g)) if self.lines[r].segs[g as usize].end > lo => {
                            hi = hi.min(self.lines[r].segs[g as usize].end);
                        }
                        _ => {
                            ok = false;
                            // Jump to the next hole start of that row.
                            hi = self.lines[r]
                                .next_hole_by_addr(lo + 1)
                                .map_or(s.end, |g| self.lines[r].segs[g as usize].start)
                                .min(s.end);
                            break;
                        }
                    }
                }
                if ok {
                    best = best.max(hi - lo);
                }
                lo = hi.max(lo + 1);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::super::request as req;
    use super::*;
    use crate::mem::best_fit::Rect;

    /// A manager reset as the SB of the default target with `usable`
    /// bytes per partition, holding the `fixed` blocks `(partitions, bytes,
    /// base partition, offset)` as ids 0, 1, …
    fn sb_with(usable: u32, fixed: &[(u16, u64, u16, u64)]) -> BestFitMemoryManager {
        let t = Target {
            sb_usable_bytes: usable,
            ..Target::default()
        };
        let mut m = BestFitMemoryManager::new();
        m.reserve(64, 4);
        m.reset_sb(&t, 64).unwrap();
        for (id, &(partitions, bytes, base, offset)) in fixed.iter().enumerate() {
            m.place_fixed(&req(id as u32, partitions, bytes, 9), base, offset)
                .unwrap();
        }
        m
    }

    fn sb(usable: u32) -> BestFitMemoryManager {
        sb_with(usable, &[])
    }

    #[test]
    fn lower_left_takes_the_bottom_row_and_left_edge() {
        let mut m = sb(1000);
        let p = m.allocate(&req(0, 32, 100, 5)).unwrap().unwrap();
        assert_eq!(
            (p.base_partition, p.offset, p.corner),
            (0, 0, Corner::LowerLeft)
        );
        let p = m.allocate(&req(1, 128, 100, 5)).unwrap().unwrap();
        assert_eq!(
            (p.base_partition, p.offset, p.corner),
            (0, 100, Corner::LowerLeft)
        );
    }

    #[test]
    fn upper_left_when_lower_left_collides() {
        // Row 0 free [10,60), row 1 free [20,70), rows 2-3 full.
        let fixed = [
            (32, 10, 0, 0),
            (32, 40, 0, 60),
            (32, 20, 32, 0),
            (32, 30, 32, 70),
            (64, 100, 64, 0),
        ];
        let mut m = sb_with(100, &fixed);
        // 64 x 30: lower-left at row 0's hole start 10 collides with row 1's
        // [0,20); upper-left anchors row 1's hole start 20: [20,50) is free
        // in row 0 too.
        let p = m.allocate(&req(5, 64, 30, 9)).unwrap().unwrap();
        assert_eq!((p.base_partition, p.offset), (0, 20));
        assert_eq!(p.corner, Corner::UpperLeft);
        // 64 x 45 fits nowhere: largest common run is [20,60) = 40 bytes.
        m.free(5).unwrap();
        assert_eq!(m.allocate(&req(5, 64, 45, 9)).unwrap(), None);
        assert_eq!(
            m.largest_free(64),
            Rect {
                partitions: 64,
                bytes: 40
            }
        );
    }

    #[test]
    fn right_when_a_middle_row_binds() {
        // Row 0 free [10,50); row 1 free [30,100); rows 2, 3 free.
        let mut m = sb_with(100, &[(32, 10, 0, 0), (32, 50, 0, 50), (32, 30, 32, 0)]);
        // 128 x 14: lower-left at 10 collides in row 1; upper-left anchors
        // row 3 at 0 and collides in row 0; the right edge of row 0's hole
        // gives [36,50), free in every row.
        let p = m.allocate(&req(3, 128, 14, 9)).unwrap().unwrap();
        assert_eq!((p.base_partition, p.offset), (0, 36));
        assert_eq!(p.corner, Corner::Right);
    }

    #[test]
    fn start_partition_rule_and_alignment() {
        let mut m = sb(4096);
        // Two 64-partition tensors share the byte range: bases 0 and 64.
        let a = m.allocate(&req(0, 64, 100, 9)).unwrap().unwrap();
        let b = m.allocate(&req(1, 40, 100, 9)).unwrap().unwrap();
        assert_eq!((a.base_partition, a.offset), (0, 0));
        assert_eq!((b.base_partition, b.offset), (64, 0));
        // A 65-partition tensor must start at 0.
        let c = m.allocate(&req(2, 65, 10, 9)).unwrap().unwrap();
        assert_eq!(c.base_partition, 0);
        assert_eq!(c.offset, 100);
        let mut r = req(3, 128, 10, 9);
        r.align = 64;
        let d = m.allocate(&r).unwrap().unwrap();
        assert_eq!(d.offset % 64, 0);
        assert!(d.offset >= 110);
        assert!(matches!(
            m.allocate(&req(4, 128, 5000, 9)),
            Err(ManagerError::NeverFits { .. })
        ));
    }
}
