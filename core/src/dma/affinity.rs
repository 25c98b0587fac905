//! Placement affinities: the coalescing candidates of a space found before
//! allocation, for the allocator to place side by side (`--dma-affinity
//! on`).
//!
//! A pair (A, B) says: tile B's DMA moves the DRAM bytes right after tile
//! A's (same DRAM location, same partitions, same kind, queue and loop
//! nest), and every predicate of [`super::coalesce`] that does not depend on
//! addresses holds for both DMAs and for their merge (per-DMA predicates
//! through [`screen`], the group's count limit and `tooLargeForCoalescing`
//! through [`merged_too_large`], the merged read through
//! [`reads_uninit`]). If the allocator gives B the address right after A in
//! A's partitions, the coalescing pass after allocation sees the two sides
//! abut and merges them; whether the merged cells stay free over the hull
//! and the DRAM bytes unchanged is then its own check at real addresses.
//!
//! Pairs come in chains in DRAM order (A, B), (B, C), ..., one chain per
//! group the coalescing pass could form. The finder allocates nothing after
//! [`AffinityFinder::reserve`].

use alloc::vec::Vec;

use super::coalesce::{merged_too_large, reads_uninit, screen, Facts};
use crate::analysis::{LinearOrder, MemLiveness};
use crate::ir::{MemLoc, Module, Space};

/// Reusable storage of the finder: one entry per candidate DMA.
#[derive(Debug, Default)]
pub struct AffinityFinder {
    cands: Vec<(Facts, u32)>,
}

impl AffinityFinder {
    /// Room for `dmas` candidates (the module's instructions bound them).
    pub fn reserve(&mut self, dmas: usize) {
        self.cands.reserve(dmas.saturating_sub(self.cands.len()));
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.cands)
    }

    /// Writes into `out` (cleared) the affinity pairs of `space` in `m`,
    /// described by `order` and `live`, at most its capacity; returns the
    /// number of pairs that did not fit `out`.
    pub fn find(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        space: Space,
        out: &mut Vec<(MemLoc, MemLoc)>,
    ) -> u32 {
        out.clear();
        self.cands.clear();
        for (pos, &i) in order.insts().iter().enumerate() {
            let Some(Ok(f)) = screen(m, live, pos as u32, i, space, false) else {
                continue;
            };
            if self.cands.len() == self.cands.capacity() {
                break;
            }
            self.cands.push((f, pos as u32));
        }
        self.cands
            .sort_unstable_by_key(|(f, pos)| (f.key, f.flags, f.dram_off, *pos));
        let t = &m.target;
        let mut dropped = 0;
        let mut k = 0;
        let n = self.cands.len();
        while k < n {
            let (first, first_pos) = self.cands[k];
            let dram_loc = MemLoc::from_u32(first.key.2);
            let parts = first.key.4 as u64;
            let (mut hi, mut bytes, mut members) = (first.dram_off + first.bytes, first.bytes, 1);
            let mut merged_pos = first_pos;
            let mut j = k + 1;
            while j < n {
                let (c, pos) = self.cands[j];
                if (c.key, c.flags) != (first.key, first.flags) || c.dram_off != hi {
                    break;
                }
                if members + 1 >= t.dma_coalesce_count_limit
                    || merged_too_large(t, parts, bytes + c.bytes)
                {
                    break;
                }
                let pos_after = if first.load {
                    merged_pos.min(pos)
                } else {
                    merged_pos.max(pos)
                };
                let inst = |p: u32| order.inst_at(p);
                let uninit =
                    |p: u32| reads_uninit(m, live, dram_loc, first.load, inst(p), pos_after);
                if uninit(pos)
                    || (pos_after != merged_pos && self.cands[k..j].iter().any(|&(_, p)| uninit(p)))
                {
                    break;
                }
                let (prev, _) = self.cands[j - 1];
                if out.len() < out.capacity() {
                    out.push((prev.chip_loc, c.chip_loc));
                } else {
                    dropped += 1;
                }
                merged_pos = pos_after;
                hi += c.bytes;
                bytes += c.bytes;
                members += 1;
                j += 1;
            }
            k = j;
        }
        dropped
    }
}
