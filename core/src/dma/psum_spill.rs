//! PSUM spill optimization (`PSUM_spill_optimization`, PSUM instance only):
//! a spill of a PSUM tile to DRAM and its reload into a fresh PSUM tile are
//! both removed when the spilled bank is not reused in between.
//!
//! Pair: a save `S` flagged `spill` (or into a `spill` slot) of a whole PSUM
//! tile `t`, whose slot's next access is a load `R` of the same slot bytes
//! into a whole tile `t'` of the same shape, in the same loop nest. Legal
//! when `t` is not written from `S` until `t'` dies and no other location
//! lives in `t`'s cells in that window (the bank is not reused): `R` is
//! dropped and `t'`'s accesses move onto `t`. `S` goes too when nothing else
//! reads the slot.

use super::conflict::{accessed_between, loc_rect, Claim, Rect};
use super::pass::{dma_view, DmaError, DmaOptimization, DmaView, DmaWorkspace, Proposal, Sweep};
use super::rewrite::{apply_accepted, space_dmas};
use crate::analysis::Interval;
use crate::ir::{Inst, InstFlags, MemFlags, MemLoc, Module};

/// One sweep; returns the number of reloads removed.
pub fn sweep(Sweep { pass, m, ws, st }: Sweep<'_>) -> Result<u32, DmaError> {
    ws.proposals.clear();
    for (pos, s, vs) in space_dmas(m, &ws.order, pass.space) {
        if let Some((r, drop_store, claim)) = judge(pass, m, ws, s, vs, pos) {
            let p = Proposal {
                inst: r,
                other: s,
                a: drop_store as u32,
                b: 0,
            };
            ws.proposals.propose(p, claim);
        }
    }
    apply_accepted(ws, |ws, p| {
        let (Some(vs), Some(vr)) = (
            dma_view(m, p.other, pass.space),
            dma_view(m, p.inst, pass.space),
        ) else {
            return Ok(false);
        };
        let (t, t2) = (m.aps().loc[vs.chip], m.aps().loc[vr.chip]);
        m.remove_inst(p.inst);
        if p.a != 0 {
            m.remove_inst(p.other);
        }
        ws.tracker.join(t2, t, 0);
        st.psum_spills_removed += 1;
        Ok(true)
    })
}

fn judge(
    pass: &DmaOptimization,
    m: &Module,
    ws: &DmaWorkspace,
    s: Inst,
    vs: DmaView,
    ps: u32,
) -> Option<(Inst, bool, Claim)> {
    if vs.load {
        return None;
    }
    let slot = m.aps().loc[vs.dram];
    let spill = m.insts().flags[s].contains(InstFlags::SPILL)
        || m.mems().flags[slot].contains(MemFlags::SPILL);
    if !spill || m.mems().flags[slot].intersects(MemFlags::OUTPUT | MemFlags::PINNED) {
        return None;
    }
    let t = m.aps().loc[vs.chip];
    if !m.is_full_access(vs.chip) {
        return None;
    }
    // The reload: the slot's next access after S.
    let acc = ws.live.accesses(slot);
    let next = acc.get(acc.partition_point(|&p| p <= ps)).copied()?;
    let r = ws.order.inst_at(next);
    let vr = dma_view(m, r, pass.space)?;
    if !vr.load || m.aps().loc[vr.dram] != slot {
        return None;
    }
    let same_bytes = m.aps().offset[vr.dram] == m.aps().offset[vs.dram]
        && m.aps().part_start[vr.dram] == m.aps().part_start[vs.dram]
        && m.aps().part_count[vr.dram] == m.aps().part_count[vs.dram]
        && m.ap_dims(vr.dram) == m.ap_dims(vs.dram)
        && m.aps().elem_size[vr.dram] == m.aps().elem_size[vs.dram];
    let t2 = m.aps().loc[vr.chip];
    let same_shape = m.is_full_access(vr.chip)
        && m.mems().partitions[t2] == m.mems().partitions[t]
        && m.mems().bytes[t2] == m.mems().bytes[t]
        && m.elem_size(t2) == m.elem_size(t);
    if !same_bytes
        || !same_shape
        || t2 == t
        || m.inst_loop(r) != m.inst_loop(s)
        || m.mems().flags[t2].intersects(MemFlags::PINNED | MemFlags::OUTPUT | MemFlags::INPUT)
        || ws.live.accesses(t2).first() != Some(&next)
    {
        return None;
    }
    let end = ws.live.interval(t2)?.end.max(next);
    let rect: Rect = loc_rect(m, t)?;
    // t's cells: not written by t from S until t' dies, not used by anyone else.
    if accessed_between(m, &ws.order, &ws.live, t, &rect, ps, end + 1, true) {
        return None;
    }
    let w = Interval { start: ps, end };
    if ws
        .index
        .find(m, &ws.live, w, &rect, &|l: MemLoc| l == t || l == t2)
        .is_some()
    {
        return None;
    }
    let slot_reads = ws.live.access_writes(slot).filter(|&w| !w).count();
    let drop_store = slot_reads == 1;
    Some((r, drop_store, Claim::on_chip(w, rect, t)))
}
