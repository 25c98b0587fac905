//! Victim choice: which live tensor the scan spills when a tensor finds no
//! room, and how. A candidate must be spillable (the rules of the module
//! doc of [`super`]); each one is planned by the shared planner of
//! [`spill`] as the coloring allocator's spill rounds plan theirs — a plain
//! split ([`loop_split_ok`]), a loop-invariant split
//! ([`spill::invariant_split`]) of an original the loop only reads but reads
//! before the failure too, or a per-iteration slice split
//! ([`spill::best_slice_split`]) — and enters by its best-ranked plan
//! (Belady's rule times bytes freed, per DMA cycle with the loops' trip
//! counts). Among those the best rank wins; on a tie the active set's order
//! (the furthest end first) decides, and a plain split before the others.
//!
//! Invariant: the choice only reads the workspace and the module; spilling
//! the victim is `evict`'s.

use super::scan::is_fixed;
use super::LsaWorkspace;
use crate::analysis::MemLiveness;
use crate::ir::{Inst, MemLoc, Module, Space};
use crate::mem::spill::{
    self, loop_split_ok, remat_from, InvariantSplit, Remat, SliceSplit, SpillView,
};

/// How a victim leaves its space.
#[derive(Copy, Clone, Debug)]
pub(super) enum Plan {
    /// Stored after its last write before the failure, reloaded before its
    /// next access.
    Plain,
    /// Stored once before the loop, reloaded by two copies in it.
    Invariant(InvariantSplit),
    /// Stored once before the loop, a slice reloaded per iteration.
    Slice(SliceSplit),
}

/// The spillable active interval of the best rank at position `p`
/// (instruction `inst`) and its plan, or `None` when no active interval
/// may be spilled.
pub(super) fn choose_victim(
    m: &Module,
    ws: &LsaWorkspace,
    p: u32,
    inst: Inst,
) -> Option<(MemLoc, Plan)> {
    let lrm = &ws.lrm;
    let mut best: Option<(u64, MemLoc, Plan)> = None;
    let mut offer = |score: u64, c: MemLoc, plan: Plan| {
        if best.as_ref().map_or(true, |b| score > b.0) {
            best = Some((score, c, plan));
        }
    };
    for &c in lrm.active() {
        if !accessible(m, &ws.origin, &ws.holder, &ws.fixed, c, inst) {
            continue;
        }
        // The source of a pending copy-again rematerialization stays.
        if p < ws.pinned[ws.origin[c.index()].index()] {
            continue;
        }
        // A slice copy moves with its loop: its cells are not its origin's
        // at one offset, so it is not split again (the failure path only:
        // a search of the records).
        if ws.origin[c.index()] != c && ws.records.iter().any(|r| r.copy == c && r.slice.is_some())
        {
            continue;
        }
        let cx = SpillView::new(m, &ws.order, &ws.live);
        let stays = |h| super::evict::source_stays(ws, h);
        let plain = spillable(cx, &ws.origin, &ws.slot, &stays, c, lrm.start(c), p);
        if plain {
            let score = victim_score(cx, ws.origin[c.index()], c, p);
            offer(score, c, Plan::Plain);
        }
        // A reload copy reloaded at the start of a loop around `p` that
        // reads it a slice per iteration, or hoisted out of a loop that
        // accesses it only there: its record becomes that slice's (see
        // `evict::resplit_copy`).
        if ws.origin[c.index()] != c {
            if let Some((score, split)) = copy_slice(m, ws, c, p) {
                offer(score, c, Plan::Slice(split));
            }
            continue;
        }
        // The splits inside loops, for an original still in its first
        // placement (its first copy and slice copy take its rectangle).
        let acc = cx.live.accesses(c);
        let after = acc.partition_point(|&q| q <= p);
        if !plain {
            if let (Some(&next), Some(split)) = (acc.get(after), spill::invariant_split(cx, c, p)) {
                let score = spill::invariant_score(cx, c, p, next, &split);
                offer(score, c, Plan::Invariant(split));
            }
        }
        if let Some((score, split)) = spill::best_slice_split(cx, c, p, lrm.end(c), false, |_| true)
        {
            let base = m.mems().base_partition[c];
            let legal =
                m.mems().space[c] != Space::Sb || m.target.is_legal_start(base, split.part_count);
            if legal {
                offer(score, c, Plan::Slice(split));
            }
        }
    }
    best.map(|(_, c, plan)| (c, plan))
}

/// The best slice split of the reload copy `c` at `p` over a loop around
/// `p` that starts where `c` was reloaded, or that is the only place the
/// loop `c`'s reload was hoisted out of accesses it ([`hoisted_over`]),
/// with its rank: the
/// copy's record then reloads one slice per iteration instead of the whole
/// copy ([`super::evict::resplit_copy`]). Needs `c` to be the latest copy
/// of its origin, its slot able to take the loop's write-backs (a
/// rematerialized copy's source never is), and the whole reload after the
/// loop to read the same source as `c`'s.
fn copy_slice(m: &Module, ws: &LsaWorkspace, c: MemLoc, p: u32) -> Option<(u64, SliceSplit)> {
    slice_of_copy(m, ws, c, p, false)
}

/// The best slice split of the reload copy `c` that is due at `p` (its
/// reload point) and finds no room there, over a loop around `p` that the
/// copy's spill preceded: the copy is then reloaded a slice per iteration
/// at `p` and needs only the slice's cells
/// ([`super::evict::shrink_reload`]). A reload hoisted out of that loop
/// qualifies too: it is not placed yet, so its record can still move into
/// the loop.
pub(super) fn pending_copy_slice(
    m: &Module,
    ws: &LsaWorkspace,
    c: MemLoc,
    p: u32,
) -> Option<SliceSplit> {
    let o = ws.origin[c.index()];
    if !o.is_valid() || o == c || ws.manager.is_placed(c.as_u32()) {
        return None;
    }
    slice_of_copy(m, ws, c, p, true).map(|(_, sp)| sp)
}

/// [`copy_slice`] and [`pending_copy_slice`]: `pending` takes a reload
/// hoisted to the loop's start as well.
fn slice_of_copy(
    m: &Module,
    ws: &LsaWorkspace,
    c: MemLoc,
    p: u32,
    pending: bool,
) -> Option<(u64, SliceSplit)> {
    let o = ws.origin[c.index()];
    let r = ws.records.iter().rev().find(|r| r.origin == o)?;
    if r.copy != c || r.slice.is_some() {
        return None;
    }
    let cx = SpillView::new(m, &ws.order, &ws.live);
    let accept = |sp: &SliceSplit| {
        let writes_back = sp.terms.write_back_after != u32::MAX;
        let same_source = sp.after.map_or(true, |a| {
            r.remat.is_none() || remat_from(cx, o, a) == r.remat
        });
        // A placed copy was reloaded at the loop's start, or hoisted out of
        // an outer loop that accesses it only in this one. A pending one is
        // reloaded at `p`, anywhere in the loop, when it was spilled before
        // the loop: no access of its origin lies between the loop's start
        // and `p` (the reload precedes the next access after the spill),
        // so the slice reload at `p` serves every access of the iteration.
        let starts = if pending {
            r.at < sp.span.0 && r.reload_before == p
        } else if r.reload_hoisted {
            hoisted_over(cx, o, r.reload_before, sp)
        } else {
            sp.span.0 == r.reload_before
        };
        starts
            && sp.span.0 <= p
            && p <= sp.span.1
            && !(r.remat.is_some() && writes_back)
            && same_source
            // A placed copy's slice keeps its corner; a pending one is
            // placed by the manager, at a legal start.
            && (pending
                || m.mems().space[c] != Space::Sb
                || m.target.is_legal_start(m.mems().base_partition[c], sp.part_count))
            // The slice inside the cells the copy holds.
            && sp.part_start >= r.part_start
            && sp.byte_lo >= r.byte_lo
    };
    spill::best_slice_split(cx, o, p, ws.lrm.end(c), false, accept)
}

/// Whether a placed copy of `o` whose reload was hoisted out of the loop
/// starting at `hoisted_to` may become the slice reload of `sp` instead:
/// that loop holds `sp`'s loop, and every access of `o` in it lies inside
/// `sp`'s loop. The copy then carried `o` around the outer loop's back edge
/// only through `sp`'s loop, whose slice reloads read the slot and whose
/// write-backs keep it current from one outer iteration to the next; the
/// next access after `sp`'s loop (its whole reload) is after the outer
/// loop, so nothing between reads the copy that is gone.
fn hoisted_over(cx: SpillView<'_>, o: MemLoc, hoisted_to: u32, sp: &SliceSplit) -> bool {
    let SpillView { m, order, live } = cx;
    let mut l = order.loop_at(sp.span.0);
    let outer_end = loop {
        if !l.is_valid() {
            return false;
        }
        match order.loop_span(l) {
            Some((s, e)) if s == hoisted_to => break e,
            _ => l = m.loops().parent[l],
        }
    };
    let acc = live.accesses(o);
    let inside = |q: u32| sp.span.0 <= q && q <= sp.span.1;
    acc.iter()
        .filter(|&&q| hoisted_to <= q && q <= outer_end)
        .all(|&q| inside(q))
}

/// May `c` leave its space at all at `p`: not fixed, not accessed by the
/// instruction being allocated, and holding a value.
fn accessible(
    m: &Module,
    origin: &[MemLoc],
    holder: &[MemLoc],
    fixed: &[bool],
    c: MemLoc,
    inst: Inst,
) -> bool {
    !is_fixed(fixed, c)
        && !m
            .all_aps(inst)
            .any(|a| holder[m.aps().loc[a].index()] == c || m.aps().loc[a] == c)
        && origin[c.index()].is_valid()
}

/// May `c` be split plainly at position `p` (stored, freed, reloaded
/// before its next access)? [`accessible`] is checked first.
#[allow(clippy::too_many_arguments)]
fn spillable(
    cx: SpillView<'_>,
    origin: &[MemLoc],
    slot: &[MemLoc],
    stays: &dyn Fn(Remat) -> bool,
    c: MemLoc,
    c_start: u32,
    p: u32,
) -> bool {
    let live = cx.live;
    let o = origin[c.index()];
    let acc = live.accesses(o);
    let after = acc.partition_point(|&q| q <= p);
    // Something left to reload for. Later writes are fine: every later
    // access (read or write) moves to the reload copy.
    if after == acc.len() {
        return false;
    }
    // A reload copy written since its reload holds a value its slot does
    // not: spilling it stores it again (`evict::spill_victim`). An
    // unwritten copy's value is in its origin's slot, or (a
    // rematerialized origin has no slot) where it was loaded or copied
    // from, when that is still unwritten (and, on chip, in place) up to
    // the next reload, or in its memset's constant.
    if c != o
        && !copy_written(live, o, c_start, p)
        && !slot[o.index()].is_valid()
        && remat_from(cx, o, acc[after])
            .filter(|&h| stays(h))
            .is_none()
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
    loop_split_ok(cx, o, p)
}

/// Whether the reload copy of `o` reloaded at `c_start` was written from
/// there up to position `p`: its cells then hold a value its slot does not.
pub(super) fn copy_written(live: &MemLiveness, o: MemLoc, c_start: u32, p: u32) -> bool {
    let acc = live.accesses(o);
    let (from, to) = (
        acc.partition_point(|&q| q < c_start),
        acc.partition_point(|&q| q <= p),
    );
    live.access_writes(o)
        .skip(from)
        .take(to.saturating_sub(from))
        .any(|w| w)
}

/// [`spill::spill_score`] of spilling `c` (holding origin `o`'s value) at
/// position `p`: the last write before `p` to store after, and as its next
/// use the point its copy comes back — its next access, or the start of
/// the loop its reload is hoisted to ([`spill::reload_point`]): from there
/// the copy holds the whole tile over all of that loop, so the split frees
/// nothing beyond it (a forward scan meets that loop after the split, and
/// a slice split of the loop, which keeps only a slice there, ranks by the
/// pressure it relieves inside it).
fn victim_score(cx: SpillView<'_>, o: MemLoc, c: MemLoc, p: u32) -> u64 {
    let SpillView { m, live, .. } = cx;
    let acc = live.accesses(o);
    let after = acc.partition_point(|&q| q <= p);
    let Some(&next) = acc.get(after) else {
        return 0;
    };
    let store_after = live.last_write_among(o, after).map_or(p, |k| acc[k]);
    let next = spill::reload_point(cx, o, p, next).before;
    spill::spill_score(
        cx,
        o,
        m.mems().bytes[c] as u64,
        m.mems().partitions[c],
        store_after,
        p,
        next,
    )
}
