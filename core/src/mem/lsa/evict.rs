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

use super::victim::{copy_written, Plan};
use super::{due, LsaError, LsaWorkspace};
use crate::ir::{MemLoc, Module};
use crate::mem::best_fit::ManagerError;
use crate::mem::spill::{self, remat_from, Remat, SpillRecord, SpillView};

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
    let reload = spill::reload_point(SpillView::new(m, &ws.order, &ws.live), o, p, q);
    // The bytes and partitions the remaining accesses touch (origin
    // coordinates): later writes move to the copy too.
    let (mut plo, mut phi, mut lo, mut hi) = (u16::MAX, 0u16, u64::MAX, 0u64);
    for &pos in &acc[after..] {
        let i = ws.order.inst_at(pos);
        for a in m.all_aps(i) {
            if m.aps().loc[a] != o {
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
        (plo, phi, lo, hi) = (0, m.mems().partitions[o], 0, m.mems().bytes[o] as u64);
    }
    hi = hi.min(m.mems().bytes[o] as u64);
    let written = victim != o && copy_written(&ws.live, o, ws.lrm.start(victim), p);
    // A copy stored again holds only its own record's cells: the new copy
    // takes no more.
    if written {
        if let Some(r) = ws.records.iter().rev().find(|r| r.copy == victim) {
            plo = plo.max(r.part_start);
            phi = phi.min(r.part_start + r.part_count);
            lo = lo.max(r.byte_lo as u64);
            hi = hi.min(r.byte_hi as u64);
        }
    }
    // The copy: `<name>_ReloadStore<N>_ShrinkedCopy`.
    let nth = ws.records.len();
    let mut name: heapless::String<300> = heapless::String::new();
    let _ = fmt::write(
        &mut name,
        format_args!("{}_ReloadStore{}_ShrinkedCopy", m.mem_name(o), nth),
    );
    let copy = spill::add_reload_copy(m, o, &name, phi - plo, (hi - lo) as u32)?;
    // A value loaded from DRAM that stays unwritten is read again from
    // there; otherwise the slot, once per original. A reload copy written
    // since its reload is stored again, to the slot: its value is no
    // longer the slot's, nor the DRAM's it was loaded from.
    let remat = if written {
        None
    } else {
        let how = remat_from(SpillView::new(m, &ws.order, &ws.live), o, q);
        how.filter(|&h| source_stays(ws, h))
    };
    // After the last write before p: the value the remaining reads see.
    let last_write = ws
        .live
        .last_write_among(o, after)
        .map_or(u32::MAX, |k| acc[k]);
    let (n_acc, last) = (acc.len(), *acc.last().unwrap_or(&0));
    pin_source(m, ws, remat, reload.before);
    let mut store_after = u32::MAX;
    let slot = match remat {
        Some(how) => how.slot(),
        None => slot_of(m, ws, o)?,
    };
    if (victim == o && remat.is_none()) || written {
        store_after = last_write;
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
        remat,
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
    let uses = (n_acc - after) as u32 + (end > last) as u32;
    ws.lrm.add_interval(copy, reload.before, end, uses);
    ws.origin[copy.index()] = o;
    ws.holder[o.index()] = copy;
    ws.pending.push(due(m, reload.before, copy));
    Ok(())
}

/// May the scan use `remat`? Not when it copies an on-chip location again
/// ([`Remat::Copy`]) that was split before: its value has moved to a
/// reload copy, or waits in a slot. An unsplit source is resident now
/// (read before the split point, accessed at or after the reloads), and
/// [`pin_source`] keeps it so.
pub(super) fn source_stays(ws: &LsaWorkspace, remat: Remat) -> bool {
    let Remat::Copy(src) = remat else {
        return true;
    };
    let s = src.loc;
    ws.holder[s.index()] == s && !ws.records.iter().any(|r| r.origin == s)
}

/// Keeps the source of a [`Remat::Copy`] in place up to `until`, the last
/// reload of the records being made: no victim choice evicts it before
/// the end of the loops around `until` (a reload in a loop runs again
/// after the loop's later positions).
fn pin_source(m: &Module, ws: &mut LsaWorkspace, remat: Option<Remat>, until: u32) {
    if let Some(Remat::Copy(src)) = remat {
        let end = spill::outer_loop_span(m, &ws.order, until).1 + 1;
        let s = src.loc.index();
        ws.pinned[s] = ws.pinned[s].max(end);
    }
}

/// The DRAM spill slot of original `o`, made on its first spill and placed
/// by the bump above every DRAM location placed before the scan, or left
/// to the DRAM allocator ([`super::LsaOptions::place_slots`]).
fn slot_of(m: &mut Module, ws: &mut LsaWorkspace, o: MemLoc) -> Result<MemLoc, LsaError> {
    let slot = ws.slot[o.index()];
    if slot.is_valid() {
        return Ok(slot);
    }
    let mut sname: heapless::String<300> = heapless::String::new();
    let _ = fmt::write(&mut sname, format_args!("{}_SpillSlot", m.mem_name(o)));
    let slot = spill::add_slot(m, o, &sname)?;
    ws.slot[o.index()] = slot;
    if !ws.place_slots {
        return Ok(slot);
    }
    let at = crate::align::align_saturating(ws.dram_bump, m.mems().align[slot] as u64);
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
    Ok(slot)
}

/// A reload copy of `o` of `partitions × bytes`, named
/// `<o>_ReloadStore<N>_<what>` after the record it will belong to (N its
/// index: unique per `what`).
fn named_copy(
    m: &mut Module,
    o: MemLoc,
    nth: usize,
    what: &str,
    partitions: u16,
    bytes: u32,
) -> Result<MemLoc, LsaError> {
    let mut name: heapless::String<300> = heapless::String::new();
    let _ = fmt::write(
        &mut name,
        format_args!("{}_ReloadStore{}_{}", m.mem_name(o), nth, what),
    );
    Ok(spill::add_reload_copy(m, o, &name, partitions, bytes)?)
}

/// [`named_copy`] as `<o>_ReloadStore<N>_ShrinkedCopy`.
fn new_copy(
    m: &mut Module,
    o: MemLoc,
    nth: usize,
    partitions: u16,
    bytes: u32,
) -> Result<MemLoc, LsaError> {
    named_copy(m, o, nth, "ShrinkedCopy", partitions, bytes)
}

/// Splits the original `o` (still in its first placement) at position `p`,
/// where `failed` found no room, by a loop-invariant or slice plan of the
/// shared planner ([`spill::invariant_split`], [`spill::slice_split`]). A
/// forward scan cannot move the accesses it already passed, but it need not:
/// the copy that takes the accesses of the loop before `p` (the invariant
/// split's first copy, the slice copy) lies inside `o`'s rectangle, which
/// `o` held over every position from its start to `p`, so no tensor placed
/// so far meets it; `o` itself then ends before the loop (its store), and
/// the copy is written before it is read in every iteration, so neither
/// crosses the loop's back edge. From `p` on only the slice copy (if it is
/// accessed again in the loop) keeps part of the rectangle; the whole copy
/// after the loop is placed when its reload comes, as a plain split's.
pub(super) fn split_victim(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    o: MemLoc,
    plan: Plan,
    failed: MemLoc,
    p: u32,
) -> Result<(), LsaError> {
    if ws.origin[o.index()] != o {
        let Plan::Slice(split) = plan else {
            return spill_victim(m, ws, o, failed, p);
        };
        return resplit_copy(m, ws, o, split, p);
    }
    let (remat, store_after, first, slice) = match plan {
        Plan::Plain => return spill_victim(m, ws, o, failed, p),
        Plan::Invariant(split) => {
            let acc = ws.live.accesses(o);
            let next = acc[acc.partition_point(|&q| q <= p)];
            let remat = spill::invariant_remat(SpillView::new(m, &ws.order, &ws.live), o, next);
            (remat, split.store_after, split.first, None)
        }
        Plan::Slice(split) => {
            let remat = spill::slice_remat(SpillView::new(m, &ws.order, &ws.live), o, &split);
            let start = spill::ReloadPoint {
                before: split.span.0,
                hoisted: false,
            };
            (remat, split.store_after, start, Some(split))
        }
    };
    if ws.records.len() + 2 > ws.max_spills as usize {
        return Err(LsaError::SpillHeadroom {
            max_spills: ws.max_spills,
        });
    }
    debug_assert_eq!(ws.origin[o.index()], o);
    let (parts, bytes) = (m.mems().partitions[o], m.mems().bytes[o]);
    let (base, offset) = (m.mems().base_partition[o], m.mems().offset[o]);
    let end = ws.lrm.end(o);
    let acc = ws.live.accesses(o);
    let last = *acc.last().unwrap_or(&0);
    // The whole copy's next access: the next one after `p` (invariant), the
    // first after the loop (slice), if any.
    let next = match slice {
        None => acc.get(acc.partition_point(|&q| q <= p)).copied(),
        Some(sp) => sp.after,
    };
    // The accesses the whole copy takes.
    let whole_uses = next.map_or(0, |n| {
        (acc.len() - acc.partition_point(|&q| q < n)) as u32 + (end > last) as u32
    });
    // The slice copy's accesses from `p` on in the loop, and its last.
    let (slice_uses, slice_end) = match slice {
        Some(sp) => {
            let k0 = acc.partition_point(|&q| q <= p);
            let k1 = acc.partition_point(|&q| q <= sp.span.1);
            let end = spill::slice_live_end(m, &ws.order, &sp, acc[k1 - 1]);
            ((k1.saturating_sub(k0)) as u32, end)
        }
        None => (0, 0),
    };
    // The last reload of the records made below (a slice's, in each
    // iteration up to its loop's end).
    let until = match (slice, next) {
        (Some(sp), _) => sp.span.1.max(sp.after.unwrap_or(0)),
        (None, Some(n)) => n,
        (None, None) => first.before,
    };
    let remat = remat.filter(|&h| source_stays(ws, h));
    pin_source(m, ws, remat, until);
    let slot = match remat {
        Some(how) => how.slot(),
        None => slot_of(m, ws, o)?,
    };
    let store_after = if remat.is_some() {
        u32::MAX
    } else {
        store_after
    };
    // The copy of the loop's accesses before `p`, in `o`'s rectangle.
    let nth = ws.records.len();
    let (cp, cb) = match slice {
        Some(sp) => (sp.part_count, sp.slice_bytes() as u32),
        None => (parts, bytes),
    };
    let inner = new_copy(m, o, nth, cp, cb)?;
    // A slice copy of a loop after `p` is placed when its reload comes.
    let later = first.before > p;
    if !later {
        m.place(inner, base, offset);
    }
    let r = SpillRecord::whole(m, o, slot, inner, store_after, first, remat, p);
    ws.records.push(match slice {
        Some(sp) => SpillRecord {
            part_start: sp.part_start,
            part_count: sp.part_count,
            byte_lo: sp.byte_lo,
            byte_hi: sp.byte_hi,
            slice: Some(sp.terms),
            failed,
            ..r
        },
        None => SpillRecord { failed, ..r },
    });
    ws.origin[inner.index()] = o;
    let mut wc = MemLoc::INVALID;
    let mut reload = None;
    if let Some(next) = next {
        let rp = spill::reload_point(SpillView::new(m, &ws.order, &ws.live), o, p, next);
        wc = new_copy(m, o, nth + 1, parts, bytes)?;
        let r = SpillRecord::whole(m, o, slot, wc, u32::MAX, rp, remat, p);
        ws.records.push(SpillRecord { failed, ..r });
        ws.origin[wc.index()] = o;
        reload = Some(rp);
    }
    release(m, ws, o, p)?;
    ws.holder[o.index()] = wc;
    if later {
        ws.lrm
            .add_interval(inner, first.before, slice_end, slice_uses);
        ws.pending.push(due(m, first.before, inner));
    } else if slice.is_some() {
        let corner = SliceCorner::new(inner, (base, offset), slice_end, slice_uses);
        keep_corner(m, ws, o, p, corner)?;
    }
    await_reload(m, ws, wc, reload, end, whole_uses);
    Ok(())
}

/// A slice copy that keeps its corner of the victim's rectangle from the
/// failure point on, while the loop still accesses it.
struct SliceCorner {
    copy: MemLoc,
    /// The victim's base partition and offset: the corner's.
    at: (u16, u64),
    /// The copy's last access in the loop, and how many it has from `p` on.
    end: u32,
    uses: u32,
}

impl SliceCorner {
    fn new(copy: MemLoc, at: (u16, u64), end: u32, uses: u32) -> Self {
        Self {
            copy,
            at,
            end,
            uses,
        }
    }
}

/// Places `c.copy` at its corner from `p` to its last access and makes it
/// `o`'s holder, when the loop still accesses the slice at or after `p`
/// (otherwise the slice needs no room from `p` on and nothing happens).
/// The corner is free of anything placed so far: the victim held the
/// whole rectangle up to `p`.
fn keep_corner(
    m: &Module,
    ws: &mut LsaWorkspace,
    o: MemLoc,
    p: u32,
    c: SliceCorner,
) -> Result<(), LsaError> {
    if c.end < p {
        return Ok(());
    }
    let req = super::scan::request(m, c.copy, p, c.end);
    ws.manager
        .place_fixed(&req, c.at.0, c.at.1)
        .map_err(|error| LsaError::Manager {
            tensor: c.copy,
            error,
        })?;
    ws.lrm.add_interval(c.copy, p, c.end, c.uses);
    ws.lrm.make_live(m, c.copy);
    ws.ends.push(Reverse((c.end, c.copy.as_u32())));
    ws.holder[o.index()] = c.copy;
    Ok(())
}

/// The whole copy `wc`, when it comes back (`reload`), lives from its
/// reload to `end` with `uses` accesses and waits to be placed then.
fn await_reload(
    m: &Module,
    ws: &mut LsaWorkspace,
    wc: MemLoc,
    reload: Option<spill::ReloadPoint>,
    end: u32,
    uses: u32,
) {
    if let Some(rp) = reload {
        ws.lrm.add_interval(wc, rp.before, end, uses);
        ws.pending.push(due(m, rp.before, wc));
    }
}

/// Turns the record of the reload copy `c`, reloaded at the start of the
/// loop of `split` (around `p`) or hoisted out of an outer loop that
/// accesses it only in that one, into that loop's slice reload: a slice
/// copy in `c`'s rectangle (which `c` held from its reload to `p`)
/// is reloaded in every iteration instead of all of `c` once, the loop's
/// accesses read it with the loop terms off (and write it back, when the
/// loop writes it), and a copy of `c`'s cells is reloaded before the next
/// access after the loop. `c`'s store, slot and rematerialization stay.
fn resplit_copy(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    c: MemLoc,
    split: spill::SliceSplit,
    p: u32,
) -> Result<(), LsaError> {
    if ws.records.len() + 1 > ws.max_spills as usize {
        return Err(LsaError::SpillHeadroom {
            max_spills: ws.max_spills,
        });
    }
    let o = ws.origin[c.index()];
    let Some(k) = ws.records.iter().rposition(|r| r.copy == c) else {
        return Ok(());
    };
    let (base, offset) = (m.mems().base_partition[c], m.mems().offset[c]);
    let end = ws.lrm.end(c);
    let acc = ws.live.accesses(o);
    let last = *acc.last().unwrap_or(&0);
    let k0 = acc.partition_point(|&q| q <= p);
    let k1 = acc.partition_point(|&q| q <= split.span.1);
    let slice_end = spill::slice_live_end(m, &ws.order, &split, acc[k1 - 1]);
    let slice_uses = k1.saturating_sub(k0) as u32;
    let whole_uses = split.after.map_or(0, |n| {
        (acc.len() - acc.partition_point(|&q| q < n)) as u32 + (end > last) as u32
    });
    // The slice reload starts the loop: where the copy's reload was, or
    // inside the loop that reload was hoisted out of (`hoisted_over`).
    let (inner, wc, reload) = slice_record(m, ws, k, &split, split.span.0, p)?;
    m.place(inner, base, offset);
    // `c` is gone: its record is the slice's.
    ws.manager
        .free(c.as_u32())
        .map_err(|error| LsaError::Manager { tensor: c, error })?;
    ws.lrm.kill(m, c);
    ws.lrm.cut(c, p.saturating_sub(1));
    ws.origin[c.index()] = MemLoc::INVALID;
    ws.holder[o.index()] = wc;
    let corner = SliceCorner::new(inner, (base, offset), slice_end, slice_uses);
    keep_corner(m, ws, o, p, corner)?;
    await_reload(m, ws, wc, reload, end, whole_uses);
    Ok(())
}

/// Turns the record of the reload copy `c`, due at `p` (in the loop of
/// `split`) and not placed yet because nothing could make room for
/// all of it, into that loop's slice reload, as [`resplit_copy`] does for
/// a placed copy: a slice copy reloaded in every iteration takes the loop's
/// accesses, and a copy of `c`'s cells is reloaded before the next access
/// after the loop. Returns the slice copy, with its interval from `p` to
/// its last access in the loop, for the scan to place instead of `c`. `c`'s
/// store, slot and rematerialization stay; the reload stays at `p`, now in
/// every iteration (a hoisted one moves into the loop).
pub(super) fn shrink_reload(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    c: MemLoc,
    split: spill::SliceSplit,
    p: u32,
) -> Result<MemLoc, LsaError> {
    if ws.records.len() + 1 > ws.max_spills as usize {
        return Err(LsaError::SpillHeadroom {
            max_spills: ws.max_spills,
        });
    }
    let o = ws.origin[c.index()];
    let Some(k) = ws.records.iter().rposition(|r| r.copy == c) else {
        return Ok(c);
    };
    let end = ws.lrm.end(c);
    let acc = ws.live.accesses(o);
    let last = *acc.last().unwrap_or(&0);
    // Every access of the loop from `p` on: the copy was not placed, so
    // none of them has been passed.
    let k0 = acc.partition_point(|&q| q < p);
    let k1 = acc.partition_point(|&q| q <= split.span.1);
    if k1 <= k0 {
        return Ok(c);
    }
    let slice_end = spill::slice_live_end(m, &ws.order, &split, acc[k1 - 1]);
    let slice_uses = (k1 - k0) as u32;
    let whole_uses = split.after.map_or(0, |n| {
        (acc.len() - acc.partition_point(|&q| q < n)) as u32 + (end > last) as u32
    });
    let (inner, wc, reload) = slice_record(m, ws, k, &split, p, p)?;
    // `c` never held anything: its interval ends before it began.
    ws.lrm.cut(c, p.saturating_sub(1));
    ws.origin[c.index()] = MemLoc::INVALID;
    ws.holder[o.index()] = inner;
    ws.lrm.add_interval(inner, p, slice_end, slice_uses);
    await_reload(m, ws, wc, reload, end, whole_uses);
    Ok(inner)
}

/// Turns record `k` (a reload copy's) into the slice reload of `split`,
/// reloaded before position `before` in every iteration, with a new slice
/// copy (named after the record it replaces, whose copy keeps the
/// `ShrinkedCopy` name); when the origin is accessed after the loop, adds
/// the record of a copy of the old copy's cells reloaded before that
/// access. Returns the slice copy, the whole copy (or
/// [`MemLoc::INVALID`]) and its reload point. The record's store, slot and
/// rematerialization stay.
#[allow(clippy::type_complexity)]
fn slice_record(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    k: usize,
    split: &spill::SliceSplit,
    before: u32,
    p: u32,
) -> Result<(MemLoc, MemLoc, Option<spill::ReloadPoint>), LsaError> {
    let r = ws.records[k];
    let o = r.origin;
    let inner = named_copy(
        m,
        o,
        k,
        "SliceCopy",
        split.part_count,
        split.slice_bytes() as u32,
    )?;
    ws.records[k] = SpillRecord {
        copy: inner,
        reload_before: before,
        reload_hoisted: false,
        part_start: split.part_start,
        part_count: split.part_count,
        byte_lo: split.byte_lo,
        byte_hi: split.byte_hi,
        slice: Some(split.terms),
        ..r
    };
    ws.origin[inner.index()] = o;
    let Some(next) = split.after else {
        return Ok((inner, MemLoc::INVALID, None));
    };
    let rp = spill::reload_point(SpillView::new(m, &ws.order, &ws.live), o, p, next);
    let nth = ws.records.len();
    let wc = new_copy(m, o, nth, r.part_count, r.byte_hi - r.byte_lo)?;
    ws.records.push(SpillRecord {
        victim: inner,
        copy: wc,
        store_after: u32::MAX,
        reload_before: rp.before,
        reload_hoisted: rp.hoisted,
        slice: None,
        at: p,
        ..r
    });
    ws.origin[wc.index()] = o;
    Ok((inner, wc, Some(rp)))
}

/// Frees the original `o` at `p`: its space goes back to the manager and
/// its interval ends before `p` (it keeps its address, live up to its store
/// and its last access before the loop, both earlier than `p`).
fn release(m: &Module, ws: &mut LsaWorkspace, o: MemLoc, p: u32) -> Result<(), LsaError> {
    ws.manager
        .free(o.as_u32())
        .map_err(|error| LsaError::Manager { tensor: o, error })?;
    ws.lrm.kill(m, o);
    ws.lrm.cut(o, p.saturating_sub(1));
    Ok(())
}
