//! The module scan: one pass per on-chip space in program order (PSUM, then
//! SB), expiring, reloading, freeing in place and placing at each
//! instruction, spilling when nothing fits (see the module doc of
//! [`super`] for the four steps).
//!
//! Invariants: a location is placed in the manager exactly while its
//! interval is active in the live-range manager; fixed locations are
//! obstacles from the first position and are never moved; `ws.holder`
//! names, per original, the location that holds its value at the current
//! position (a reload copy once the original was spilled).

// See the module doc of `super`: the failure is carried inline.
#![allow(clippy::result_large_err)]

use core::cmp::Reverse;

use super::evict::{shrink_reload, split_victim};
use super::failure::failure;
use super::victim::{choose_victim, pending_copy_slice};
use super::{LsaError, LsaOptions, LsaReport, LsaWorkspace, SpaceReport};
use crate::ir::{Inst, InstFlags, MemFlags, MemLoc, Module, Space};
use crate::mem::best_fit::{Corner, ManagerError, Request};
use crate::mem::spill::{self, FailureEntry, SpillLog, LOG_CANDIDATES};

pub(super) fn scan(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    opts: &LsaOptions,
    loop_aware: bool,
) -> Result<LsaReport, LsaError> {
    if opts.vnc_count != 1 {
        return Err(LsaError::MultiCore {
            vnc_count: opts.vnc_count,
        });
    }
    // `LsaWorkspace::reserve` sizes everything beforehand (the pipeline
    // always calls it); only a workspace never reserved for a module this
    // large is reserved here, once.
    if ws.reserved_ids == 0 || ws.reserved_ids < m.num_mems() + 2 * ws.max_spills as usize {
        ws.reserve(m, opts);
    } else {
        // A workspace reused for another module: that module needs its own
        // spill headroom. When it has it (the pipeline reserved it), this
        // reserves nothing and does not allocate.
        m.reserve(LsaWorkspace::headroom(m, opts));
    }
    let bounds_current = core::mem::take(&mut ws.bounds_current);
    if !core::mem::take(&mut ws.current) {
        ws.order.compute(m);
        ws.live.compute(m, &ws.order);
        ws.bounds.compute(m, &ws.order, &ws.live);
    } else if !bounds_current {
        ws.bounds.compute(m, &ws.order, &ws.live);
    }
    ws.manager.set_policy(opts.policy);
    ws.records.clear();
    let ids = m.num_mems() + 2 * ws.max_spills as usize;
    ws.origin.clear();
    ws.origin.extend((0..m.num_mems()).map(MemLoc::new));
    ws.origin.resize(ids, MemLoc::INVALID);
    ws.holder.clear();
    ws.holder.extend((0..m.num_mems()).map(MemLoc::new));
    ws.holder.resize(ids, MemLoc::INVALID);
    ws.slot.clear();
    ws.slot.resize(ids, MemLoc::INVALID);
    ws.pinned.clear();
    ws.pinned.resize(ids, 0);
    ws.fixed.clear();
    ws.fixed.extend(
        m.mems()
            .space
            .keys()
            .map(|v| m.is_placed(v) || m.mems().flags[v].contains(MemFlags::PINNED)),
    );
    ws.fixed.resize(ids, false);
    // Spill slots go above every DRAM location placed so far (a bump).
    ws.place_slots = opts.place_slots;
    ws.dram_bump = m
        .mems()
        .space
        .keys()
        .filter(|&v| m.mems().space[v] == Space::Dram && m.is_placed(v))
        .map(|v| m.mems().offset[v] + m.mem_footprint(v))
        .max()
        .unwrap_or(0);
    let mut report = LsaReport::default();
    for space in [Space::Psum, Space::Sb] {
        let r = scan_space(m, ws, space, loop_aware, ids, &mut report.log)?;
        match space {
            Space::Psum => report.psum = r,
            _ => report.sb = r,
        }
    }
    spill::finalize(m, &ws.order, None, &ws.records)?;
    Ok(report)
}

pub(super) fn request(m: &Module, v: MemLoc, birth: u32, death: u32) -> Request {
    Request {
        id: v.as_u32(),
        partitions: m.mems().partitions[v],
        bytes: m.mems().bytes[v] as u64,
        align: m.mems().align[v].max(1) as u64,
        birth,
        death,
    }
}

pub(super) fn is_fixed(fixed: &[bool], v: MemLoc) -> bool {
    fixed.get(v.index()).copied().unwrap_or(false)
}

fn scan_space(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    space: Space,
    loop_aware: bool,
    ids: usize,
    log: &mut SpillLog,
) -> Result<SpaceReport, LsaError> {
    let t = m.target.clone();
    let reset = match space {
        Space::Psum => ws.manager.reset_psum(&t, ids),
        _ => ws.manager.reset_sb(&t, ids),
    };
    reset.map_err(|error| LsaError::Manager {
        tensor: MemLoc::INVALID,
        error,
    })?;
    ws.lrm.init(m, &ws.order, &ws.live, space, loop_aware, ids);
    ws.pending.clear();
    ws.ends.clear();
    let mut rep = SpaceReport {
        lower_bound: ws.bounds.space(space).lower_bound(),
        capacity: match space {
            Space::Psum => t.psum_usable_bytes() as u64,
            _ => t.sb_usable_bytes as u64,
        },
        ..Default::default()
    };
    // Fixed locations are obstacles from the start.
    for k in 0..ws.lrm.by_start().len() {
        let v = ws.lrm.by_start()[k];
        if !is_fixed(&ws.fixed, v) {
            continue;
        }
        if !m.is_placed(v) {
            return Err(LsaError::PinnedUnplaced { tensor: v });
        }
        let req = request(m, v, ws.lrm.start(v), ws.lrm.end(v));
        ws.manager
            .add_obstacle(&req, m.mems().base_partition[v], m.mems().offset[v])
            .map_err(|error| LsaError::Manager { tensor: v, error })?;
    }
    let n = ws.order.len() as u32;
    let mut next = 0usize;
    for p in 0..n {
        let inst = ws.order.inst_at(p);
        // 1. Expire intervals with no remaining uses (ended before p).
        while let Some(&Reverse((end, v))) = ws.ends.peek() {
            if end >= p {
                break;
            }
            ws.ends.pop();
            expire(m, ws, MemLoc::from_u32(v), end)?;
        }
        // 2. Reload copies due before this instruction.
        while let Some(&Reverse((q, _, c))) = ws.pending.peek() {
            if q != p {
                break;
            }
            ws.pending.pop();
            let c = MemLoc::from_u32(c);
            // From its reload on, the copy holds its origin's value (after
            // a slice split, the slice copy did inside the loop).
            let o = ws.origin[c.index()];
            if o.is_valid() {
                ws.holder[o.index()] = c;
            }
            place(m, ws, space, c, p, inst, log)?;
        }
        // 3. In-place: inputs dying here hand their space to the outputs.
        if m.insts().flags[inst].contains(InstFlags::IN_PLACE) {
            for k in 0..m.operands(inst).n_in as usize {
                let a = crate::ir::Ap::new(m.operands(inst).ap_start as usize + k);
                let v = ws.holder[m.aps().loc[a].index()];
                // Fixed inputs too: their obstacle keeps every other tensor
                // off their rectangle up to p, so only this instruction's
                // outputs can take it (the verifier's in-place rule).
                if v.is_valid()
                    && m.mems().space[v] == space
                    && ws.lrm.end(v) == p
                    && ws.manager.is_placed(v.as_u32())
                    && !m
                        .outputs(inst)
                        .any(|o| ws.holder[m.aps().loc[o].index()] == v)
                {
                    expire(m, ws, v, p)?;
                }
            }
        }
        // 4. Intervals starting here.
        while next < ws.lrm.by_start().len() && ws.lrm.start(ws.lrm.by_start()[next]) == p {
            let v = ws.lrm.by_start()[next];
            next += 1;
            place(m, ws, space, v, p, inst, log)?;
        }
        // Remaining-use bookkeeping.
        for a in m.all_aps(inst) {
            let v = ws.holder[m.aps().loc[a].index()];
            if v.is_valid() {
                ws.lrm.use_passed(v);
            }
        }
    }
    rep.peak = ws.manager.peak();
    rep.placed = ws.manager.placed();
    rep.fragmentation = ws.manager.fragmentation();
    // Each DMA as often as the loops around it run it. The records of one
    // split (its inner copy's and its whole copy's) are consecutive, with
    // the same origin and point: they count as one spill.
    let mut prev: Option<(MemLoc, u32)> = None;
    for r in ws
        .records
        .iter()
        .filter(|r| m.mems().space[r.copy] == space)
    {
        let (moved, cycles) = r.traffic(m, &ws.order);
        if prev != Some((r.origin, r.at)) {
            rep.spills += 1;
            rep.remats += r.remat.is_some() as u32;
        }
        prev = Some((r.origin, r.at));
        rep.spill_bytes += moved;
        rep.spill_cycles += cycles;
    }
    Ok(rep)
}

/// A fixed location of `v`'s space, live with `v` (by the scan's
/// intervals) and overlapping its rectangle: the other side of a
/// [`LsaError::FixedOverlap`] (the error path only; a linear search).
fn fixed_overlapping(m: &Module, ws: &LsaWorkspace, v: MemLoc) -> MemLoc {
    let rect = |u: MemLoc| {
        let p0 = m.mems().base_partition[u] as u64;
        let b0 = m.mems().offset[u];
        (
            p0,
            p0 + m.mems().partitions[u] as u64,
            b0,
            b0 + m.mems().bytes[u] as u64,
        )
    };
    let (p0, p1, b0, b1) = rect(v);
    let (s, e) = (ws.lrm.start(v), ws.lrm.end(v));
    for &u in ws.lrm.by_start() {
        if u == v || !is_fixed(&ws.fixed, u) || m.mems().space[u] != m.mems().space[v] {
            continue;
        }
        if ws.lrm.start(u) > e || ws.lrm.end(u) < s {
            continue;
        }
        let (q0, q1, c0, c1) = rect(u);
        if q0 < p1 && p0 < q1 && c0 < b1 && b0 < c1 {
            return u;
        }
    }
    MemLoc::INVALID
}

/// Frees `v` if it is still placed and its interval really ended at `end`.
fn expire(m: &Module, ws: &mut LsaWorkspace, v: MemLoc, end: u32) -> Result<(), LsaError> {
    if ws.lrm.end(v) != end || !ws.manager.is_placed(v.as_u32()) {
        return Ok(()); // stale entry (spilled or freed in place)
    }
    ws.manager
        .free(v.as_u32())
        .map_err(|error| LsaError::Manager { tensor: v, error })?;
    ws.lrm.kill(m, v);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn place(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    space: Space,
    v: MemLoc,
    p: u32,
    inst: Inst,
    log: &mut SpillLog,
) -> Result<(), LsaError> {
    let mut v = v;
    let mut end = ws.lrm.end(v);
    let mut req = request(m, v, p, end);
    if is_fixed(&ws.fixed, v) {
        ws.manager
            .place_fixed(&req, m.mems().base_partition[v], m.mems().offset[v])
            .map_err(|e| match e {
                ManagerError::FixedOverlap { .. } => LsaError::FixedOverlap {
                    tensor: v,
                    other: fixed_overlapping(m, ws, v),
                },
                error => LsaError::Manager { tensor: v, error },
            })?;
    } else {
        loop {
            let got = ws
                .manager
                .allocate(&req)
                .map_err(|error| LsaError::Manager { tensor: v, error })?;
            if let Some(pl) = got {
                debug_assert!(pl.corner != Corner::Fixed);
                m.place(v, pl.base_partition, pl.offset);
                break;
            }
            // 3. Spill at interval.
            let mut entry = FailureEntry {
                tensor: v,
                space: Some(space),
                position: p,
                candidates: heapless::Vec::new(),
                active: ws.lrm.active().len() as u32,
            };
            for &c in ws.lrm.active().iter().take(LOG_CANDIDATES) {
                let _ = entry.candidates.push(c);
            }
            log.push(entry);
            if ws.access_first && space == Space::Sb {
                // The restart splits tensors here instead (see `restart`).
                return Err(LsaError::AllocationFailed(failure(
                    m, ws, space, v, p, inst,
                )));
            }
            let Some((victim, plan)) = choose_victim(m, ws, p, inst) else {
                // A reload copy due at the start of a loop that reads it a
                // slice per iteration needs only the slice: it comes back
                // as that loop's slice reload, and the scan places the
                // slice copy instead.
                if let Some(split) = pending_copy_slice(m, ws, v, p) {
                    let inner = shrink_reload(m, ws, v, split, p)?;
                    if inner != v {
                        v = inner;
                        end = ws.lrm.end(v);
                        req = request(m, v, p, end);
                        continue;
                    }
                }
                return Err(LsaError::AllocationFailed(failure(
                    m, ws, space, v, p, inst,
                )));
            };
            split_victim(m, ws, victim, plan, v, p)?;
        }
    }
    ws.lrm.make_live(m, v);
    ws.ends.push(Reverse((end, v.as_u32())));
    Ok(())
}
