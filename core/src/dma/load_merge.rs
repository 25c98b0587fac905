//! Redundant-load removal (`load_merging`): a load whose data is already
//! resident is dropped (`merge_load`) or replaced by an on-chip copy
//! (`transform_load`).
//!
//! Loads are sorted by (source location, source partitions, element size,
//! kind, queue, uninit flag, loop nest), then position, so every run holds
//! loads that `same_load` accepts and that no loop boundary separates. Inside
//! a run, each load `B` is compared with the last few loads kept before it
//! (anchors `A`):
//!
//! - `merge_load`: same source access pattern, same destination cells (the
//!   same SB destination at real addresses), `B`'s location not pinned or an
//!   output, `B`'s tile inside `A`'s location on the same partitions, nothing
//!   wrote `A`'s tile or the source bytes in between, and no other location
//!   lives in `A`'s cells until `B`'s tile dies. `B` is dropped; its readers
//!   are re-pointed onto `A`'s location (the merge tracker).
//! - `transform_load`: same source, different pattern, `B`'s source bytes
//!   inside `A`'s, partitions match, `A`'s tile intact until `B`, and the cost
//!   model says an engine copy is cheaper than the DMA
//!   (`Target::copy_cycles(bytes per partition) < Target::dma_cycles(bytes)`).
//!   `B` becomes a `tensor_copy` from the matching slice of `A`'s tile.

use arrayvec::ArrayVec;

use super::coalesce::touched_between;
use super::conflict::{accessed_between, ap_rect, loc_rect, Claim};
use super::pass::{
    dma_view, has_room, reserve_err, DmaError, DmaOptimization, DmaWorkspace, Proposal, Sweep,
};
use super::rewrite::{apply_accepted, run_like, space_dmas};
use crate::analysis::Interval;
use crate::ir::{ApSpec, Dim, Inst, InstFlags, InstSpec, MemFlags, MemLoc, Module, Opcode};

const MERGE: u32 = 0;
const TRANSFORM: u32 = 1;
/// Anchors kept per run.
const ANCHORS: usize = 4;

type Key = (u32, u16, u16, u8, u8, u8, bool, u32);

fn key(m: &Module, i: Inst, dram: crate::ir::Ap) -> Key {
    (
        m.aps().loc[dram].as_u32(),
        m.aps().part_start[dram].into(),
        m.aps().part_count[dram].into(),
        m.aps().elem_size[dram],
        m.insts().opcode[i] as u8,
        m.insts().queue[i],
        m.insts().flags[i].contains(InstFlags::CAN_READ_UNINIT),
        m.inst_loop(i).as_u32(),
    )
}

/// `k` as one integer whose order is the tuple's (fields big-endian at their
/// full widths: 32 + 16 + 16 + 8 + 8 + 8 + 8 + 32 bits).
fn packed(k: Key) -> u128 {
    let (loc, ps, pc, elem, op, queue, uninit, lp) = k;
    (loc as u128) << 96
        | (ps as u128) << 80
        | (pc as u128) << 64
        | (elem as u128) << 56
        | (op as u128) << 48
        | (queue as u128) << 40
        | (uninit as u128) << 32
        | lp as u128
}

/// One sweep; returns the number of loads dropped or transformed.
pub fn sweep(Sweep { pass, m, ws, st }: Sweep<'_>) -> Result<u32, DmaError> {
    // Keys are computed once per load and packed into one integer, so the
    // sort compares integers rather than reading the module again on every
    // comparison.
    ws.load_keys.clear();
    for (pos, i, v) in space_dmas(m, &ws.order, pass.space) {
        if v.load
            && m.is_contiguous(v.dram)
            && m.is_contiguous(v.chip)
            && m.aps().elem_size[v.dram] == m.aps().elem_size[v.chip]
            && ws.load_keys.len() < ws.load_keys.capacity().min(ws.members.capacity())
        {
            ws.load_keys.push((packed(key(m, i, v.dram)), pos));
        }
    }
    ws.load_keys.sort_unstable();
    ws.members.clear();
    ws.members.extend(ws.load_keys.iter().map(|&(_, p)| p));
    ws.proposals.clear();
    let mut anchors: ArrayVec<u32, ANCHORS> = ArrayVec::new();
    let mut run_key: Option<Key> = None;
    for k in 0..ws.members.len() {
        let pb = ws.members[k];
        let b = ws.order.inst_at(pb);
        let Some(vb) = dma_view(m, b, pass.space) else {
            continue;
        };
        let kb = key(m, b, vb.dram);
        if run_key != Some(kb) {
            anchors.clear();
            run_key = Some(kb);
        }
        let mut done = false;
        for &pa in anchors.iter().rev() {
            if let Some((kind, claim)) = judge(pass, m, ws, pa, pb) {
                let p = Proposal {
                    inst: b,
                    other: ws.order.inst_at(pa),
                    a: kind,
                    b: 0,
                };
                ws.proposals.propose(p, claim);
                done = true;
                break;
            }
        }
        if !done {
            if anchors.is_full() {
                anchors.remove(0);
            }
            anchors.push(pb);
        }
    }
    apply_accepted(ws, |ws, p| {
        if p.a == MERGE {
            merge_load(pass, m, ws, p.other, p.inst);
            st.loads_merged += 1;
        } else {
            // The copy keeps the load's on-chip pattern (pooled when it has
            // several dims).
            let dims = dma_view(m, p.inst, pass.space).map_or(0, |v| m.ap_dims(v.chip).len());
            if !has_room(m, if dims > 1 { dims } else { 0 }, false) {
                st.headroom_skipped += 1;
                return Ok(false);
            }
            transform_load(pass, m, p.other, p.inst)?;
            st.loads_transformed += 1;
        }
        Ok(true)
    })
}

/// Decides whether load `B` at `pb` is redundant after anchor `A` at `pa`.
fn judge(
    pass: &DmaOptimization,
    m: &Module,
    ws: &DmaWorkspace,
    pa: u32,
    pb: u32,
) -> Option<(u32, Claim)> {
    let (a, b) = (ws.order.inst_at(pa), ws.order.inst_at(pb));
    let va = dma_view(m, a, pass.space)?;
    let vb = dma_view(m, b, pass.space)?;
    let (ta, tb) = (m.aps().loc[va.chip], m.aps().loc[vb.chip]);
    let dram = m.aps().loc[va.dram];
    let (sa, sb) = (m.ap_byte_span(va.dram)?, m.ap_byte_span(vb.dram)?);
    let ra = loc_rect(m, ta)?;
    let ps = m.aps().part_start[va.dram] as u64;
    let pc = m.aps().part_count[va.dram] as u64;
    // The source bytes must be unchanged between A and B.
    let src_rect = ap_rect(m, vb.dram)?;
    if touched_between(m, ws, dram, ps, pc, sb.0, sb.1, pa, pb, true)
        || ws
            .dram_index
            .find(
                m,
                &ws.live,
                Interval { start: pa, end: pb },
                &src_rect,
                &|l: MemLoc| l == dram,
            )
            .is_some()
    {
        return None;
    }
    // A's tile must still hold the data at B.
    if accessed_between(m, &ws.order, &ws.live, ta, &ra, pa, pb, true) {
        return None;
    }
    let same_ap = sa == sb && m.ap_dims(va.dram) == m.ap_dims(vb.dram);
    let same_dst = ap_rect(m, va.chip) == ap_rect(m, vb.chip)
        && m.ap_dims(va.chip) == m.ap_dims(vb.chip)
        && m.aps().elem_size[va.chip] == m.aps().elem_size[vb.chip];
    let flags_b = m.mems().flags[tb];
    if same_ap && same_dst && !flags_b.intersects(MemFlags::PINNED | MemFlags::OUTPUT) {
        let rb = loc_rect(m, tb)?;
        let inside = rb.p0 == ra.p0 && rb.p1 == ra.p1 && rb.lo >= ra.lo && rb.hi <= ra.hi;
        let b_first = tb == ta || ws.live.accesses(tb).first() == Some(&pb);
        let end = ws.live.interval(tb).map_or(pb, |iv| iv.end.max(pb));
        let w = Interval { start: pa, end };
        // The index query last: it walks every location live in the window.
        if inside
            && b_first
            && ws
                .index
                .find(m, &ws.live, w, &ra, &|l: MemLoc| l == ta || l == tb)
                .is_none()
        {
            return Some((MERGE, Claim::on_chip(w, ra, ta)));
        }
    }
    // transform_load: B's source inside A's, partitions match.
    let pcs_match = m.aps().part_count[va.chip] == m.aps().part_count[vb.chip]
        && m.aps().elem_size[va.chip] == m.aps().elem_size[vb.chip];
    if !same_ap && pcs_match && sb.0 >= sa.0 && sb.1 <= sa.1 {
        let bytes = m.ap_bytes(vb.dram);
        let per_part = m.ap_bytes_per_partition(vb.dram);
        if m.target.copy_cycles(per_part) >= m.target.dma_cycles(bytes) {
            return None;
        }
        let w = Interval { start: pa, end: pb };
        let free = ws
            .index
            .find(m, &ws.live, w, &ra, &|l: MemLoc| l == ta)
            .is_none();
        if free {
            return Some((TRANSFORM, Claim::on_chip(w, ra, ta)));
        }
    }
    None
}

/// Drops `b`; its tile's readers move onto `a`'s location.
fn merge_load(pass: &DmaOptimization, m: &mut Module, ws: &mut DmaWorkspace, a: Inst, b: Inst) {
    let (Some(va), Some(vb)) = (dma_view(m, a, pass.space), dma_view(m, b, pass.space)) else {
        return;
    };
    let (ta, tb) = (m.aps().loc[va.chip], m.aps().loc[vb.chip]);
    m.remove_inst(b);
    if ta != tb {
        let delta = m.mems().offset[tb] - m.mems().offset[ta];
        ws.tracker.join(tb, ta, delta as u32);
    }
}

/// Replaces `b` by a `tensor_copy` from the slice of `a`'s tile that holds
/// `b`'s source bytes.
fn transform_load(
    pass: &DmaOptimization,
    m: &mut Module,
    a: Inst,
    b: Inst,
) -> Result<(), DmaError> {
    let (Some(va), Some(vb)) = (dma_view(m, a, pass.space), dma_view(m, b, pass.space)) else {
        return Ok(());
    };
    let (Some(sa), Some(sb)) = (m.ap_byte_span(va.dram), m.ap_byte_span(vb.dram)) else {
        return Ok(());
    };
    // The copy is a compute instruction: its destination keeps the load's
    // on-chip dims, which must fit the compute engines' limit.
    if m.ap_ndims(vb.chip) > m.target.compute_max_dims as usize {
        return Ok(());
    }
    let elem = m.aps().elem_size[vb.chip].max(1);
    let bytes = m.ap_bytes_per_partition(vb.dram);
    let offset = m.aps().offset[va.chip] + (sb.0 - sa.0) as u32;
    let src = run_like(m, va.chip, offset, elem, bytes);
    let mut dd = ArrayVec::<Dim, { crate::ir::MAX_DIMS }>::new();
    for &d in m.ap_dims(vb.chip) {
        dd.push(d);
    }
    let dst = ApSpec {
        loc: m.aps().loc[vb.chip],
        part_start: m.aps().part_start[vb.chip].into(),
        part_count: m.aps().part_count[vb.chip].into(),
        offset: m.aps().offset[vb.chip],
        elem_size: m.aps().elem_size[vb.chip],
        dims: dd,
        ext: Default::default(),
    };
    let mut spec = InstSpec::new(Opcode::TensorCopy);
    spec.flags = InstFlags::SYNTHETIC;
    let ins = [src];
    let outs = [dst];
    spec.inputs = &ins;
    spec.outputs = &outs;
    m.insert_before(b, &spec)
        .map_err(|e| reserve_err(pass.name, e))?;
    m.remove_inst(b);
    Ok(())
}
