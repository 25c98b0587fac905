//! Spilling the chosen victim: its [`SpillRecord`] (store after the last
//! write before the failure, reload before its next access), the reload
//! copy shrunk to the cells the remaining accesses touch, its DRAM slot (or
//! the DRAM it was loaded from, for a rematerialization), and the interval
//! bookkeeping: the victim is freed now, the copy lives from its reload to
//! the victim's old end.
//!
//! Invariants: one slot per original, placed by a bump above every DRAM
//! location placed before the scan (slots live for the whole program); at
//! most `max_spills` records (the reserved headroom); the instructions are
//! inserted later, by [`spill::finalize`], in record order.

// See the module doc of `super`: the failure is carried inline.
#![allow(clippy::result_large_err)]

use core::cmp::Reverse;
use core::fmt;

use super::{LsaError, LsaWorkspace};
use crate::ir::{MemLoc, Module};
use crate::mem::best_fit::ManagerError;
use crate::mem::spill::{self, remat_source, SpillRecord};

/// Spills `victim` at position `p`, where `failed` found no room.
pub(super) fn spill_victim(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    victim: MemLoc,
    failed: MemLoc,
    p: u32,
) -> Result<(), LsaError> {
    if ws.records.len() >= ws.max_spills as usize {
        return Err(LsaError::SpillHeadroom {
            max_spills: ws.max_spills,
        });
    }
    let o = ws.origin[victim.index()];
    let acc = ws.live.accesses(o);
    let after = acc.partition_point(|&q| q <= p);
    let q = acc[after];
    // Before the next access, or once before the loop that holds it.
    let reload = spill::reload_point(m, &ws.order, &ws.live, o, p, q);
    // The bytes and partitions the remaining accesses touch (origin
    // coordinates): later writes move to the copy too.
    let (mut plo, mut phi, mut lo, mut hi) = (u16::MAX, 0u16, u64::MAX, 0u64);
    for &pos in &acc[after..] {
        let i = ws.order.inst_at(pos);
        for a in m.all_aps(i) {
            if m.aps.loc[a] != o {
                continue;
            }
            // Hulls: a pattern that moves with a loop keeps every
            // iteration's cells in the copy, a broadcast every partition it
            // names.
            let (r0, r1, l, h) = m.ap_hull(a);
            plo = plo.min(r0);
            phi = phi.max(r1);
            lo = lo.min(l);
            hi = hi.max(h);
        }
    }
    if plo >= phi || lo >= hi {
        (plo, phi, lo, hi) = (0, m.mems.partitions[o], 0, m.mems.bytes[o] as u64);
    }
    hi = hi.min(m.mems.bytes[o] as u64);
    // The copy: `<name>_ReloadStore<N>_ShrinkedCopy`.
    let nth = ws.records.len();
    let mut name: heapless::String<300> = heapless::String::new();
    let _ = fmt::write(
        &mut name,
        format_args!("{}_ReloadStore{}_ShrinkedCopy", m.mem_name(o), nth),
    );
    let copy = spill::add_reload_copy(m, o, &name, phi - plo, (hi - lo) as u32)?;
    // A value loaded from DRAM that stays unwritten is read again from
    // there; otherwise the slot, once per original.
    let remat = remat_source(m, &ws.order, &ws.live, o, q);
    let mut store_after = u32::MAX;
    let mut slot = remat.unwrap_or(ws.slot[o.index()]);
    if !slot.is_valid() {
        let mut sname: heapless::String<300> = heapless::String::new();
        let _ = fmt::write(&mut sname, format_args!("{}_SpillSlot", m.mem_name(o)));
        slot = spill::add_slot(m, o, &sname)?;
        let align = m.mems.align[slot].max(1) as u64;
        let at = ws.dram_bump.div_ceil(align) * align;
        let end = at + m.mem_footprint(slot);
        if end > m.target.dram_bytes {
            return Err(LsaError::Manager {
                tensor: slot,
                error: ManagerError::NeverFits {
                    what: "DRAM spill slot end",
                    value: end,
                    max: m.target.dram_bytes,
                },
            });
        }
        m.place(slot, 0, at);
        ws.dram_bump = end;
        ws.slot[o.index()] = slot;
    }
    if victim == o && remat.is_none() {
        // After the last write before p: the value the remaining reads see.
        store_after = ws
            .live
            .last_write_among(o, after)
            .map_or(u32::MAX, |k| acc[k]);
    }
    ws.records.push(SpillRecord {
        victim,
        origin: o,
        slot,
        copy,
        store_after,
        reload_before: reload.before,
        reload_hoisted: reload.hoisted,
        part_start: plo,
        part_count: phi - plo,
        byte_lo: lo as u32,
        byte_hi: hi as u32,
        remat: remat.is_some(),
        failed,
        at: p,
        slice: None,
    });
    // Free the victim now; the copy lives from the reload to the old end.
    let end = ws.lrm.end(victim);
    ws.manager
        .free(victim.as_u32())
        .map_err(|error| LsaError::Manager {
            tensor: victim,
            error,
        })?;
    ws.lrm.kill(m, victim);
    // The victim keeps its address: it stays live up to its store and its
    // last read before p, both earlier than p.
    ws.lrm.cut(victim, p.saturating_sub(1));
    let uses = (acc.len() - after) as u32 + (end > *acc.last().unwrap_or(&0)) as u32;
    ws.lrm.add_interval(copy, reload.before, end, uses);
    ws.origin[copy.index()] = o;
    ws.holder[o.index()] = copy;
    ws.pending.push(Reverse((reload.before, copy.as_u32())));
    Ok(())
}
