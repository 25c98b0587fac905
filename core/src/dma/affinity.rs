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

use super::coalesce::{merged_too_large, reads_uninit, save_nest, screen, Facts};
use super::report::{dma_analysis, dma_descriptors, partition_descriptors};
use crate::analysis::{LinearOrder, MemLiveness};
use crate::ir::{MemLoc, Module, Space};

/// One affinity: `second`'s tile should sit right after `first`'s, in the
/// same partitions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AffinityPair {
    /// The tile whose DRAM side comes first.
    pub first: MemLoc,
    /// The tile whose DRAM side abuts it.
    pub second: MemLoc,
    /// For a pair of saves inside a repeating loop, the inclusive span of
    /// positions over which their merged location stays live, the loop
    /// nest (the coalescing pass requires the cells free over it). `None`
    /// for loads and for saves outside a repeating loop.
    pub nest: Option<(u32, u32)>,
}

/// Reusable storage of the finder: one entry per candidate DMA.
#[derive(Debug, Default)]
pub struct AffinityFinder {
    cands: Vec<(Facts, u32)>,
}

impl AffinityFinder {
    /// Room for `dmas` candidates (the module's instructions bound them).
    pub fn reserve(&mut self, dmas: usize) {
        crate::storage::grow(&mut self.cands, dmas);
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
        out: &mut Vec<AffinityPair>,
    ) -> u32 {
        out.clear();
        let mut dropped = 0;
        self.chains(m, order, live, space, |chain| {
            for w in chain.windows(2) {
                let (a, b) = (&w[0].0, &w[1].0);
                let nest = if a.load {
                    None
                } else {
                    save_nest(m, order, [a.live.start, b.live.start])
                };
                if out.len() < out.capacity() {
                    out.push(AffinityPair {
                        first: a.chip_loc,
                        second: b.chip_loc,
                        nest,
                    });
                } else {
                    dropped += 1;
                }
            }
        });
        dropped
    }

    /// The coalescing bound of `space` in `m` (described by `order` and
    /// `live`): the DMA descriptors of `m` if every chain the finder forms
    /// were merged into one DMA. The address-free predicates are a subset
    /// of the pass's and hereditary (a run inside a legal group is legal),
    /// so growing each chain greedily in DRAM order gives the fewest
    /// groups any placement allows these DMAs. Their descriptors are the
    /// bound: exact when each chain's bytes per partition fit one
    /// descriptor (every grouping then costs a partition count per group),
    /// otherwise within one descriptor per partition and group of the
    /// fewest. The capacity is ignored: a bound, not a placement.
    pub fn coalescing_bound(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        space: Space,
    ) -> u64 {
        let max = m.target.dma_descriptor_max_bytes as u64;
        let mut saved = 0u64;
        self.chains(m, order, live, space, |chain| {
            let members: u64 = chain
                .iter()
                .map(|&(_, pos)| dma_descriptors(m, order.inst_at(pos)))
                .sum();
            let bytes: u64 = chain.iter().map(|(f, _)| f.bytes).sum();
            let parts = chain[0].0.key.4 as u64;
            let merged = parts * partition_descriptors(bytes, bytes, bytes, max);
            saved += members.saturating_sub(merged);
        });
        dma_analysis(m).descriptors.saturating_sub(saved)
    }

    /// Calls `chain` with every chain of two or more candidate DMAs that
    /// the coalescing pass could merge into one group, in DRAM order.
    fn chains(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        space: Space,
        mut chain: impl FnMut(&[(Facts, u32)]),
    ) {
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
                merged_pos = pos_after;
                hi += c.bytes;
                bytes += c.bytes;
                members += 1;
                j += 1;
            }
            if j - k >= 2 {
                chain(&self.cands[k..j]);
            }
            k = j;
        }
    }
}

/// The coalescing bound of `m` over SB and PSUM
/// (`AffinityFinder::coalescing_bound` of each): a reporting helper for
/// a result, not a pass (it allocates its analyses).
pub fn coalescing_bound(m: &Module) -> u64 {
    let mut order = LinearOrder::new();
    order.compute(m);
    let mut live = MemLiveness::new();
    live.compute(m, &order);
    let mut f = AffinityFinder::default();
    f.reserve(m.num_insts());
    let all = dma_analysis(m).descriptors;
    let mut saved = 0;
    for s in [Space::Sb, Space::Psum] {
        saved += all - f.coalescing_bound(m, &order, &live, s);
    }
    all - saved
}
