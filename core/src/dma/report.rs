//! The DMA report (`DMAReport::DMA_analysis`): a snapshot of a module's DMA
//! traffic, taken before and after the peepholes and published as the
//! reference's `PreGcaDMAAccesses` / `PostGcaDMAAccesses` metrics.
//!
//! Descriptor model: a descriptor moves one run that is contiguous on both
//! sides of the transfer, inside one partition, and at most
//! `target.dma_descriptor_max_bytes` long. A DMA over `P` partitions whose
//! source breaks every `Cs` bytes and destination every `Cd` bytes (the
//! innermost dense extent of each access pattern) has, per partition, one run
//! between consecutive breaks of either side, each split at the limit.

use alloc::vec::Vec;
use core::fmt;

use crate::ir::{Ap, Dim, Inst, Module, Space};

/// One snapshot of the DMA traffic of a module.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DmaReport {
    /// DMA instructions (load, save, dma_copy) linked in the program.
    pub instructions: u64,
    /// Bytes the DMAs move.
    pub bytes: u64,
    /// Descriptors the DMAs need.
    pub descriptors: u64,
    /// Bytes read from DRAM.
    pub dram_bytes_loaded: u64,
    /// Bytes written to DRAM.
    pub dram_bytes_saved: u64,
}

impl DmaReport {
    /// Average bytes per DMA instruction (0 when there is none).
    pub fn average_dma_bytes(&self) -> u64 {
        self.bytes.checked_div(self.instructions).unwrap_or(0)
    }
}

impl fmt::Display for DmaReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} DMAs, {} bytes, {} descriptors, {} B average, {} B loaded from DRAM, {} B saved to DRAM",
            self.instructions,
            self.bytes,
            self.descriptors,
            self.average_dma_bytes(),
            self.dram_bytes_loaded,
            self.dram_bytes_saved
        )
    }
}

/// Bytes of the innermost dense run of an access pattern: where its walk
/// first jumps (the whole per-partition size when it never does).
pub fn dense_run_bytes(dims: &[Dim], elem: u64) -> u64 {
    let mut extent: i64 = 1;
    for d in dims.iter().rev() {
        if d.count <= 1 {
            continue;
        }
        if d.stride as i64 != extent {
            break;
        }
        extent *= d.count as i64;
    }
    extent as u64 * elem
}

/// Descriptors of one partition of a transfer of `n` bytes whose source
/// breaks every `cs` bytes and destination every `cd` bytes.
pub fn partition_descriptors(n: u64, cs: u64, cd: u64, max: u64) -> u64 {
    let max = max.max(1);
    let (cs, cd) = (cs.clamp(1, n.max(1)), cd.clamp(1, n.max(1)));
    let split = |len: u64| len.div_ceil(max);
    if n == 0 {
        return 0;
    }
    let (small, large) = if cs <= cd { (cs, cd) } else { (cd, cs) };
    if large % small == 0 {
        // Every break of the coarse side is a break of the fine side.
        let full = n / small;
        let rest = n % small;
        return full * split(small) + if rest > 0 { split(rest) } else { 0 };
    }
    // General case: walk the union of the two break sequences.
    let mut count = 0;
    let (mut prev, mut a, mut b) = (0u64, cs, cd);
    while prev < n {
        let next = a.min(b).min(n);
        count += split(next - prev);
        prev = next;
        if a == next {
            a += cs;
        }
        if b == next {
            b += cd;
        }
    }
    count
}

/// Descriptors of one DMA instruction.
pub fn dma_descriptors(m: &Module, i: Inst) -> u64 {
    let (Some(src), Some(dst)) = (m.inputs(i).next(), m.outputs(i).next()) else {
        return 0;
    };
    let cs = dense_run_bytes(m.ap_dims(src), m.aps().elem_size[src] as u64);
    let cd = dense_run_bytes(m.ap_dims(dst), m.aps().elem_size[dst] as u64);
    let parts = transfer_partitions(m, src, dst);
    // Bytes per counted partition: a DMA that reshapes (different
    // partition counts on its two sides) moves its total bytes over the
    // partitions counted, not the other side's per-partition bytes.
    let n = m.ap_bytes(dst) / parts.max(1);
    parts * partition_descriptors(n, cs, cd, m.target.dma_descriptor_max_bytes as u64)
}

/// Partitions a transfer is split into: the on-chip side's, or the
/// source's for a DRAM-to-DRAM copy.
fn transfer_partitions(m: &Module, src: Ap, dst: Ap) -> u64 {
    if m.mems().space[m.aps().loc[dst]].is_on_chip() {
        m.aps().part_count[dst] as u64
    } else {
        m.aps().part_count[src] as u64
    }
}

/// The report of every DMA of `m` (`DMA_analysis`).
pub fn dma_analysis(m: &Module) -> DmaReport {
    let mut r = DmaReport::default();
    for i in m.program_order() {
        if !m.insts().opcode[i].is_dma() {
            continue;
        }
        let (Some(src), Some(dst)) = (m.inputs(i).next(), m.outputs(i).next()) else {
            continue;
        };
        let bytes = m.ap_bytes(dst);
        r.instructions += 1;
        r.bytes += bytes;
        r.descriptors += dma_descriptors(m, i);
        if m.mems().space[m.aps().loc[src]] == Space::Dram {
            r.dram_bytes_loaded += m.ap_bytes(src);
        }
        if m.mems().space[m.aps().loc[dst]] == Space::Dram {
            r.dram_bytes_saved += bytes;
        }
    }
    r
}

/// One contiguous piece of a transfer: `len` bytes from a physical source
/// address to a physical destination address, inside one partition.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Piece {
    /// Opcode, source space, destination space.
    pub kind: (u8, u8, u8),
    /// Source partition (0 in DRAM).
    pub src_part: u32,
    /// Destination partition (0 in DRAM).
    pub dst_part: u32,
    /// Physical source address.
    pub src: u64,
    /// Physical destination address.
    pub dst: u64,
    /// Bytes.
    pub len: u64,
}

/// Physical `(partition, address)` of byte `b` of partition `p` of an access
/// pattern's walk, for a pattern whose per-partition walk is dense.
fn phys(m: &Module, a: Ap, p: u64, b: u64) -> (u32, u64) {
    let l = m.aps().loc[a];
    let off = m.mems().offset[l];
    let ap_off = m.aps().offset[a] as u64 + b;
    let part = m.aps().part_start[a] as u64 + p;
    match m.mems().space[l] {
        Space::Dram => (0, off + part * m.mems().bytes[l] as u64 + ap_off),
        _ => (
            (m.mems().base_partition[l] as u64 + part) as u32,
            off + ap_off,
        ),
    }
}

/// The descriptor lower bound of a module's DMA traffic: split every DMA into
/// its contiguous per-partition pieces at physical addresses, drop identical
/// pieces, join pieces that abut on both sides (same kind, same partitions),
/// and count the maximal runs, each split at the descriptor limit. No set of
/// merges, whatever their legality, needs fewer descriptors to move the same
/// bytes with the same DMAs' directions. DMAs over strided patterns
/// contribute their report count (their pieces are not enumerated).
///
/// `scratch` is reused between calls (a reporting helper, not a pass: it may
/// grow).
pub fn descriptor_lower_bound(m: &Module, scratch: &mut Vec<Piece>) -> u64 {
    scratch.clear();
    let max = m.target.dma_descriptor_max_bytes.max(1) as u64;
    let mut strided = 0u64;
    for i in m.program_order() {
        let op = m.insts().opcode[i];
        if !op.is_dma() {
            continue;
        }
        let (Some(src), Some(dst)) = (m.inputs(i).next(), m.outputs(i).next()) else {
            continue;
        };
        if !m.is_contiguous(src)
            || !m.is_contiguous(dst)
            || !m.is_placed(m.aps().loc[src])
            || !m.is_placed(m.aps().loc[dst])
        {
            strided += dma_descriptors(m, i);
            continue;
        }
        let len = m.ap_bytes_per_partition(dst);
        let kind = (
            op as u8,
            m.mems().space[m.aps().loc[src]] as u8,
            m.mems().space[m.aps().loc[dst]] as u8,
        );
        for p in 0..transfer_partitions(m, src, dst) {
            let (sp, sa) = phys(m, src, p, 0);
            let (dp, da) = phys(m, dst, p, 0);
            scratch.push(Piece {
                kind,
                src_part: sp,
                dst_part: dp,
                src: sa,
                dst: da,
                len,
            });
        }
    }
    // Pieces that can chain share the diagonal `src - dst`: sorting by it
    // puts every abutting successor right after its predecessor, however
    // many other pieces share the addresses at other times.
    scratch.sort_unstable_by_key(|q| {
        (
            q.kind,
            q.src_part,
            q.dst_part,
            q.src.wrapping_sub(q.dst),
            q.src,
            q.len,
        )
    });
    scratch.dedup();
    let mut total = strided;
    let mut k = 0;
    while k < scratch.len() {
        let first = scratch[k];
        let mut run = first.len;
        let (mut s_end, mut d_end) = (first.src + first.len, first.dst + first.len);
        let mut j = k + 1;
        while j < scratch.len() {
            let q = scratch[j];
            if q.kind != first.kind || q.src_part != first.src_part || q.dst_part != first.dst_part
            {
                break;
            }
            if q.src == s_end && q.dst == d_end {
                run += q.len;
                s_end += q.len;
                d_end += q.len;
                j += 1;
            } else {
                break;
            }
        }
        total += run.div_ceil(max);
        k = j;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_descriptor_counts() {
        // Dense both sides: one run, split at the limit.
        assert_eq!(partition_descriptors(4096, 4096, 4096, 65536), 1);
        assert_eq!(partition_descriptors(200_000, 200_000, 200_000, 65536), 4);
        // Source breaks every 256 B: 16 runs.
        assert_eq!(partition_descriptors(4096, 256, 4096, 65536), 16);
        // Breaks at 3 and 4 on 12 bytes: 3,4,6,8,9 -> runs 3,1,2,2,1,3 = 6.
        assert_eq!(partition_descriptors(12, 3, 4, 65536), 6);
        assert_eq!(partition_descriptors(0, 1, 1, 65536), 0);
    }

    #[test]
    fn dense_runs() {
        assert_eq!(dense_run_bytes(&[Dim::new(1, 64)], 4), 256);
        assert_eq!(
            dense_run_bytes(&[Dim::new(128, 4), Dim::new(1, 64)], 2),
            128
        );
        assert_eq!(dense_run_bytes(&[Dim::new(64, 4), Dim::new(1, 64)], 1), 256);
    }
}
