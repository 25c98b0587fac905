//! Dead-store removal (`removeRedundantWrites`): a save whose DRAM bytes are
//! overwritten before anything reads them, and that is not a module output,
//! is removed.
//!
//! For a save `S` of bytes `R` of DRAM location `D` (not an output, not
//! pinned, not aliased by another DRAM location live after `S`), the
//! accesses of `D` after `S` are walked in program order: a read overlapping
//! `R` keeps `S`; a write in `S`'s own loop nest covering all of `R` kills
//! it. When the walk ends without a read, `S` is dead unless a read earlier
//! in `S`'s loop could see it on the next iteration.

use super::conflict::ap_rect;
use super::pass::{DmaError, DmaWorkspace, Sweep};
use super::rewrite::space_dmas;
use crate::analysis::Interval;
use crate::ir::{Ap, Inst, MemFlags, MemLoc, Module};

/// One sweep; returns the number of saves removed.
pub fn sweep(Sweep { pass, m, ws, st }: Sweep<'_>) -> Result<u32, DmaError> {
    ws.members.clear();
    for (pos, i, v) in space_dmas(m, &ws.order, pass.space) {
        if !v.load && is_dead(m, ws, i, pos, v.dram) && ws.members.len() < ws.members.capacity() {
            ws.members.push(pos);
        }
    }
    for k in 0..ws.members.len() {
        let i = ws.order.inst_at(ws.members[k]);
        m.remove_inst(i);
        st.stores_removed += 1;
    }
    Ok(ws.members.len() as u32)
}

fn is_dead(m: &Module, ws: &DmaWorkspace, s: Inst, ps: u32, d: Ap) -> bool {
    let dl = m.aps().loc[d];
    if m.mems().flags[dl].intersects(MemFlags::OUTPUT | MemFlags::PINNED) || !m.is_contiguous(d) {
        return false;
    }
    let Some((lo, hi)) = m.ap_byte_span(d) else {
        return false;
    };
    let (p0, p1) = m.ap_rows(d);
    // Overlap by the hull of a moving pattern (it may touch the bytes);
    // coverage only by a plain one (a moving one may miss them).
    let overlaps = |x: Ap| {
        let (x0, x1) = m.ap_rows(x);
        x0 < p1 && p0 < x1 && m.ap_byte_span(x).map_or(true, |(a, b)| a < hi && lo < b)
    };
    let covers = |x: Ap| {
        let (x0, x1) = m.ap_rows(x);
        m.ap_is_plain(x)
            && m.is_contiguous(x)
            && x0 <= p0
            && x1 >= p1
            && m.ap_byte_span(x).is_some_and(|(a, b)| a <= lo && b >= hi)
    };
    let n = ws.order.len() as u32;
    // Aliasing DRAM locations live after S keep it.
    if let Some(r) = ap_rect(m, d) {
        let w = Interval {
            start: ps,
            end: n.saturating_sub(1),
        };
        if ws
            .dram_index
            .find(m, &ws.live, w, &r, &|l: MemLoc| l == dl)
            .is_some()
        {
            return false;
        }
    }
    let lp = m.inst_loop(s);
    let acc = ws.live.accesses(dl);
    let from = acc.partition_point(|&p| p <= ps);
    for &p in &acc[from..] {
        let j = ws.order.inst_at(p);
        let on = |x: &Ap| m.aps().loc[*x] == dl;
        if m.inputs(j).filter(on).any(overlaps) {
            return false;
        }
        if m.inst_loop(j) == lp && m.outputs(j).filter(on).any(covers) {
            return true;
        }
    }
    // No later read: the save is dead unless its loop reads the bytes on the
    // next iteration.
    if lp.is_valid() {
        let Some((ls, _)) = ws.order.loop_span(lp) else {
            return false;
        };
        let a = acc.partition_point(|&p| p < ls);
        for &p in &acc[a..from] {
            let j = ws.order.inst_at(p);
            if m.inputs(j).filter(|x| m.aps().loc[*x] == dl).any(overlaps) {
                return false;
            }
        }
        // An enclosing loop may run the body again: any read of D in the
        // outermost loop around S keeps it.
        let mut outer = lp;
        while m.loops().parent[outer].is_valid() {
            outer = m.loops().parent[outer];
        }
        if let Some((os, _)) = ws.order.loop_span(outer) {
            let a = acc.partition_point(|&p| p < os);
            for &p in &acc[a..from] {
                let j = ws.order.inst_at(p);
                if m.inputs(j).filter(|x| m.aps().loc[*x] == dl).any(overlaps) {
                    return false;
                }
            }
        }
    }
    true
}
