//! Victim choice: which live tensor the scan spills when a tensor finds no
//! room. A candidate must be spillable (the rules of the module doc of
//! [`super`]); among those the best [`spill::spill_score`] wins, and on a
//! tie the active set's order (the furthest end first) decides.
//!
//! Invariant: the choice only reads the workspace and the module; spilling
//! the victim is `evict`'s.

use super::scan::is_fixed;
use super::LsaWorkspace;
use crate::analysis::{LinearOrder, MemLiveness};
use crate::ir::{Inst, MemLoc, Module};
use crate::mem::spill::{self, loop_split_ok, remat_source};

/// The spillable active interval of the best rank at position `p`
/// (instruction `inst`), or `None` when no active interval may be spilled.
pub(super) fn choose_victim(m: &Module, ws: &LsaWorkspace, p: u32, inst: Inst) -> Option<MemLoc> {
    let lrm = &ws.lrm;
    let mut best: Option<(u64, MemLoc)> = None;
    for &c in lrm.active() {
        let ok = spillable(
            m,
            &ws.order,
            &ws.live,
            &ws.origin,
            &ws.holder,
            &ws.fixed,
            &ws.slot,
            c,
            lrm.start(c),
            p,
            inst,
        );
        if !ok {
            continue;
        }
        let score = victim_score(m, &ws.order, &ws.live, ws.origin[c.index()], c, p);
        if best.map_or(true, |(b, _)| score > b) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c)
}

/// May `c` be spilled at position `p` (instruction `inst`)?
#[allow(clippy::too_many_arguments)]
fn spillable(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    origin: &[MemLoc],
    holder: &[MemLoc],
    fixed: &[bool],
    slot: &[MemLoc],
    c: MemLoc,
    c_start: u32,
    p: u32,
    inst: Inst,
) -> bool {
    if is_fixed(fixed, c) {
        return false;
    }
    // Not accessed by the instruction being allocated.
    if m.all_aps(inst)
        .any(|a| holder[m.aps.loc[a].index()] == c || m.aps.loc[a] == c)
    {
        return false;
    }
    let o = origin[c.index()];
    if !o.is_valid() {
        return false;
    }
    let acc = live.accesses(o);
    let after = acc.partition_point(|&q| q <= p);
    // Something left to reload for. Later writes are fine: every later
    // access (read or write) moves to the reload copy.
    if after == acc.len() {
        return false;
    }
    // A reload copy written since its reload holds a value its slot does
    // not: it is not spilled again (the slot would go stale).
    if c != o {
        let from = acc.partition_point(|&q| q < c_start);
        if live
            .access_writes(o)
            .enumerate()
            .skip(from)
            .take(after.saturating_sub(from))
            .any(|(_, w)| w)
        {
            return false;
        }
    }
    // A copy's value is in its origin's slot, or (a rematerialized origin
    // has no slot) in the DRAM it was loaded from, when that is still
    // unwritten up to the next reload.
    if c != o
        && !slot[o.index()].is_valid()
        && remat_source(m, order, live, o, acc[after]).is_none()
    {
        return false;
    }
    // A value that must have been written to be spilled (an input that was
    // never loaded has no definition to store after: skip).
    if origin[c.index()] == c && !live.access_writes(o).take(after).any(|w| w) {
        return false;
    }
    // Loop rule: no value of it goes around a back edge in the freed space
    // (see `spill::loop_split_ok`).
    loop_split_ok(m, order, live, o, p)
}

/// [`spill::spill_score`] of spilling `c` (holding origin `o`'s value) at
/// position `p`: its next access, the last write before `p` to store after.
fn victim_score(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    o: MemLoc,
    c: MemLoc,
    p: u32,
) -> u64 {
    let acc = live.accesses(o);
    let after = acc.partition_point(|&q| q <= p);
    let Some(&next) = acc.get(after) else {
        return 0;
    };
    let store_after = live.last_write_among(o, after).map_or(p, |k| acc[k]);
    spill::spill_score(
        m,
        order,
        live,
        o,
        m.mems.bytes[c] as u64,
        m.mems.partitions[c],
        store_after,
        p,
        next,
    )
}
