//! Partial-DMA (`partial_DMA_access`): a load that fills a tile of which its
//! readers only ever touch a sub-range is shrunk to that sub-range.
//!
//! Trigger: the load is the tile's only writer and covers the whole tile; the
//! union of the byte spans its readers touch (rounded out to the tile's
//! alignment and element size) is strictly smaller than the tile. Rewrite: a
//! smaller location over the used cells (inside the old rectangle, so the
//! placement stays legal), a narrower DMA from the matching DRAM bytes,
//! readers re-pointed (location and offset), the wide DMA removed; the
//! oversized location is left without any access.

use super::pass::{dma_view, has_room, write_count, DmaError, Sweep};
use super::rewrite::{insert_like, run_like, space_dmas, whole};
use crate::ir::{Ap, MemFlags, Module};

/// One sweep; returns the number of DMAs shrunk.
pub fn sweep(Sweep { pass, m, ws, st }: Sweep<'_>) -> Result<u32, DmaError> {
    ws.members.clear();
    ws.keys.clear();
    for (pos, _, v) in space_dmas(m, &ws.order, pass.space) {
        if !v.load || !m.is_full_access(v.chip) || !m.is_contiguous(v.dram) {
            continue;
        }
        if m.aps().elem_size[v.dram] != m.aps().elem_size[v.chip] {
            continue;
        }
        let t = m.aps().loc[v.chip];
        if m.mems().flags[t].intersects(MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT)
            || write_count(&ws.live, t) != 1
        {
            continue;
        }
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        let mut readers = 0;
        for &p in ws.live.accesses(t) {
            if p == pos {
                continue;
            }
            let j = ws.order.inst_at(p);
            for a in m.inputs(j) {
                if m.aps().loc[a] != t {
                    continue;
                }
                let Some((l, h)) = m.ap_byte_span(a) else {
                    lo = 0;
                    hi = u64::MAX;
                    continue;
                };
                lo = lo.min(l);
                hi = hi.max(h);
                readers += 1;
            }
        }
        if readers == 0 {
            continue;
        }
        let bytes = m.mems().bytes[t] as u64;
        let grain = (m.mems().align[t] as u64).max(m.elem_size(t) as u64).max(1);
        let elem = m.elem_size(t).max(1) as u64;
        let lo = lo / grain * grain;
        let hi = crate::align::align_saturating(hi, elem);
        if hi > bytes || hi <= lo || hi - lo >= bytes {
            continue;
        }
        if ws.members.len() < ws.members.capacity() {
            ws.members.push(pos);
            ws.keys.push((lo, hi as u32));
        }
    }
    let mut made = 0;
    for k in 0..ws.members.len() {
        let i = ws.order.inst_at(ws.members[k]);
        let (lo, hi) = ws.keys[k];
        let Some(v) = dma_view(m, i, pass.space) else {
            continue;
        };
        if !has_room(m, 0, true) {
            st.headroom_skipped += 1;
            continue;
        }
        let t = m.aps().loc[v.chip];
        let len = hi as u64 - lo;
        let elem = m.aps().elem_size[v.chip].max(1);
        let parts = m.mems().partitions[t];
        let new = ws.add_loc(m, pass.name, "p", t, len as u32, m.mems().offset[t] + lo)?;
        let dram = run_like(m, v.dram, m.aps().offset[v.dram] + lo as u32, elem, len);
        let chip = whole(new, parts, elem, len);
        insert_like(pass.name, m, i, i, true, dram, chip)?;
        m.remove_inst(i);
        // Re-point the readers: same cells, new location, offset - lo.
        for &p in ws.live.accesses(t) {
            let j = ws.order.inst_at(p);
            if j == i {
                continue;
            }
            for a in m.inputs(j).chain(m.outputs(j)) {
                repoint(m, a, t, new, lo as u32);
            }
        }
        st.partial_shrunk += 1;
        st.partial_bytes_saved += m.mems().bytes[t] as u64 - len;
        made += 1;
    }
    Ok(made)
}

fn repoint(m: &mut Module, a: Ap, from: crate::ir::MemLoc, to: crate::ir::MemLoc, lo: u32) {
    if m.aps().loc[a] == from {
        m.shift_ap(a, to, 0, -(lo as i64));
    }
}
