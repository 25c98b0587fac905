//! Multi-buffering: a tile rewritten in every iteration of a loop gets `N`
//! slots used in turn; in SB, and in PSUM a bank per slot (the banks
//! rotate with the loop).
//!
//! A tile written whole at the start of every iteration of its loop and
//! read in it holds one value per iteration. In one place, the next
//! iteration's writer waits for this iteration's last reader (a load on a
//! DMA queue waits for the compute engine still reading the previous
//! tile): the loop runs at the pace of the slowest engine plus the
//! hand-off. With `N` slots, iteration `i` uses slot `i mod N` and the
//! writer runs up to `N − 1` iterations ahead. The rewrite is exact in the
//! IR: every pattern of the tile gains a loop term that wraps
//! (`+S*i mod N`, [`crate::ir::IvTerm::wrap`]), the tile grows to `N`
//! slots of `S` bytes (its size rounded up to its alignment; in PSUM a
//! bank), and both checkers and the schedule model evaluate the slot of
//! each iteration. In PSUM each slot is a tensor of the banks-per-tensor
//! rule ([`crate::ir::Module::slots`]).
//!
//! Which tiles: movable SB tiles (see [`super`]) and PSUM tiles movable
//! by the same rules, of at most one bank, whose first access is an
//! instruction directly in the body of a loop that runs at least twice
//! and writes the whole tile without reading it, and whose every access
//! lies in that loop and carries no term of it, no register term and no
//! partition step. Such a tile carries nothing from one iteration to the
//! next (each iteration starts by writing all of it), so each iteration
//! may use other cells. Once it wraps, the liveness rule for a loop that
//! writes a location in part holds it over every repeating loop around
//! its first write ([`crate::analysis::LinearOrder::outermost_loop_span`]):
//! its slots are kept clear of every tile live there, so the placement
//! verifier sees a legal placement.
//!
//! How much memory: up to the usable bytes of the space (the capacity;
//! the placement is done, so slots never cause a spill), each step kept
//! only when the model's makespan drops by at least the share of the
//! usable bytes that the space's peak grows by ([`pays`]): unlike the
//! moves, whose headroom is a fixed share of the peak, a slot's worth
//! depends on the loop, and the model prices it. SB first, then PSUM
//! (where a bank is an eighth of the space, so a bank must buy an eighth
//! of the makespan).
//!
//! How deep: for each depth of [`SLOT_LADDER`], every candidate in the
//! order its life starts gets that many slots (fewer, down to 2, where
//! the capacity leaves no room for that many; none where not even 2
//! fit), where it is when that is clear, else at the lowest clear start;
//! one model run per depth, and the model keeps the depth that pays
//! best. Then, while the pass's trials last, each candidate left without slots
//! tries each depth alone and keeps the one that pays best: where the
//! batch does not pay, its memory went to tiles whose hand-off costs
//! nothing as well as to those whose hand-off is the loop's pace. The
//! property exploited: a loop-carried hand-off between engines is paid
//! once per iteration, so a few slots remove a cost that grows with the
//! trip count.
//!
//! Storage: the candidates and the undo log, reserved with the pass; the
//! extensions the new terms need come from the module's reserved pool
//! ([`ext_headroom`]); where it runs out, the tile is left as it was and
//! no further tile is given slots. Time: one walk over the tiles'
//! accesses and one model run per depth and space, then at most
//! [`SINGLE_RUNS`] per space (within the pass's `max_trials` and
//! `max_executions`), only where the batch shortened the makespan and
//! the model walked the whole module; the search for room stops at
//! [`SLOT_WORK`] tile visits per batch.

use super::{cells, space_peak, SbRotation, SbRotationOptions, SbRotationReport};
use crate::analysis::schedule::ScheduleOptions;
use crate::analysis::{Interval, LinearOrder, MemLiveness};
use crate::ir::{
    InstFlags, IvTerm, Loop, MemFlags, MemLoc, Module, Space, MAX_IV_TERMS, UNKNOWN_TRIP,
};

/// Slot counts tried, one model run each. Two removes the hand-off of
/// one iteration to the next; more help where one iteration's reader is
/// slower than the writer by more than an iteration. Each costs a tile's
/// size again.
pub const SLOT_LADDER: [u16; 3] = [2, 3, 4];

/// Most access-pattern extensions the pass may add (one per plain pattern
/// of a tile given slots): the module reserves this many for it, so the
/// pool's memory stays bounded on large modules.
const MAX_NEW_EXTS: usize = 1 << 12;

/// Model runs the single tiles of one space may take after the batch
/// (within the pass's own trial and execution budgets): a few dozen
/// candidates at one run each, the depth above a paying one at one more.
pub const SINGLE_RUNS: u32 = 24;

/// Tile visits the search for clear cells may spend per batch (and for
/// the single tiles after it): each visits every placed SB tile, so on
/// modules of a hundred thousand tiles the batch stops after the first
/// few hundred candidates rather than growing quadratically.
pub const SLOT_WORK: u64 = 1 << 24;

/// Extensions a module needs reserved for the pass (see
/// [`MAX_NEW_EXTS`]).
pub fn ext_headroom(m: &Module) -> usize {
    m.num_aps().min(MAX_NEW_EXTS)
}

/// A tile that may get slots: its loop and the positions its slots are
/// held over once it wraps.
#[derive(Copy, Clone, Debug)]
pub(super) struct Candidate {
    v: MemLoc,
    lp: Loop,
    hold: Interval,
}

/// A tile given slots, with what it was before.
#[derive(Copy, Clone, Debug)]
pub(super) struct Given {
    v: MemLoc,
    lp: Loop,
    offset: u64,
    bytes: u32,
    hold: Option<Interval>,
}

impl SbRotation {
    /// Gives slots to the tiles that may take them (see the module doc),
    /// SB tiles first, then PSUM tiles, at the depths that pay for their
    /// memory, within each space's usable bytes; updates the report.
    /// `live` and `order` must describe `m` before the pass.
    pub(super) fn buffer(
        &mut self,
        m: &mut Module,
        live: &MemLiveness,
        order: &LinearOrder,
        opts: &SbRotationOptions,
        rep: &mut SbRotationReport,
    ) {
        self.given.clear();
        self.slot_stopped = false;
        let mut budget = (0u32, 0u64);
        for space in [Space::Sb, Space::Psum] {
            self.buffer_space(m, live, order, opts, rep, space, &mut budget);
        }
        rep.buffer_tried = budget.0;
        rep.buffer_stopped = self.slot_stopped;
        rep.buffered = self.given.len() as u32;
        rep.peak_after = space_peak(m, Space::Sb);
    }

    /// [`Self::buffer`] for the tiles of `space`; `budget` counts the
    /// model runs and executions spent.
    #[allow(clippy::too_many_arguments)]
    fn buffer_space(
        &mut self,
        m: &mut Module,
        live: &MemLiveness,
        order: &LinearOrder,
        opts: &SbRotationOptions,
        rep: &mut SbRotationReport,
        space: Space,
        budget: &mut (u32, u64),
    ) {
        self.find_candidates(m, live, order, space);
        rep.buffer_candidates += self.candidates.len() as u32;
        if self.candidates.is_empty() {
            return;
        }
        let quick = ScheduleOptions {
            what_if_executions: 0,
            ..opts.schedule
        };
        let limit = m.target.capacity(space);
        let ladder = SLOT_LADDER
            .into_iter()
            .filter(|&d| u32::from(d) <= opts.max_slots);
        let start = self.given.len();
        let makespan = rep.makespan_after;
        let mut base = (makespan, space_peak(m, space));
        let mut extrapolated = false;
        // A model run: (makespan, the space's peak), and whether the model
        // extrapolated.
        let run = |this: &mut Self, m: &Module, budget: &mut (u32, u64)| {
            let r = this.schedule.run(m, &quick);
            budget.0 += 1;
            budget.1 = budget.1.saturating_add(r.executions);
            ((r.makespan, space_peak(m, space)), r.extrapolated)
        };
        // Every candidate at once, one depth per model run.
        let mut batch = None;
        let mut shortened = false;
        for depth in ladder.clone() {
            self.slot_work = SLOT_WORK;
            for k in 0..self.candidates.len() {
                if !self.give(m, live, order, k, depth, limit) {
                    break;
                }
            }
            if self.given.len() > start {
                let (now, extra) = run(self, m, budget);
                extrapolated |= extra;
                shortened |= now.0 < makespan;
                if pays(base, now, limit) {
                    base = now;
                    batch = Some(depth);
                }
            }
            self.take_back_to(m, live, order, start);
        }
        if let Some(depth) = batch {
            rep.slots = rep.slots.max(u32::from(depth));
            self.slot_work = SLOT_WORK;
            for k in 0..self.candidates.len() {
                if !self.give(m, live, order, k, depth, limit) {
                    break;
                }
            }
        }
        // Then one tile at a time, those left without slots, while the
        // trials last: the batch spends memory on tiles whose hand-off
        // costs nothing too. Where slots for every candidate did not
        // shorten the makespan at all, the loops' hand-offs are off the
        // critical path and no single tile's slots would pay either; and
        // where the model extrapolated (a module too long to walk whole),
        // one tile's slots are below what its figures resolve.
        self.slot_work = SLOT_WORK;
        let singles = if shortened && !extrapolated {
            self.candidates.len()
        } else {
            0
        };
        let first_run = budget.0;
        'tiles: for k in 0..singles {
            let v = self.candidates[k].v;
            if self.given[start..].iter().any(|g| g.v == v) {
                continue;
            }
            let mark = self.given.len();
            let mut kept = None;
            // Deeper only while the shallower paid: a tile whose second
            // slot buys nothing costs one run.
            for depth in ladder.clone() {
                let spent = budget.0 - first_run;
                if spent >= SINGLE_RUNS || budget.0 >= opts.max_trials {
                    break 'tiles;
                }
                if budget.1 >= opts.max_executions {
                    break 'tiles;
                }
                if !self.give(m, live, order, k, depth, limit) || self.given.len() == mark {
                    break;
                }
                let (now, _) = run(self, m, budget);
                self.take_back_to(m, live, order, mark);
                if !pays(base, now, limit) {
                    break;
                }
                base = now;
                kept = Some(depth);
            }
            if let Some(depth) = kept {
                self.give(m, live, order, k, depth, limit);
                rep.slots = rep.slots.max(u32::from(depth));
            }
        }
        if space == Space::Psum {
            rep.psum_buffered = (self.given.len() - start) as u32;
        }
        if self.given.len() > start {
            rep.makespan_after = base.0;
        }
    }

    /// Fills `self.candidates` with the tiles of `space` that may take
    /// slots (see the module doc), in the order their lives start.
    fn find_candidates(
        &mut self,
        m: &Module,
        live: &MemLiveness,
        order: &LinearOrder,
        space: Space,
    ) {
        self.candidates.clear();
        // Tiles first read that are not inputs are rare; where there are
        // none, no PSUM tile needs the scan for one.
        let relies = m
            .mems()
            .space
            .keys()
            .any(|w| m.mems().space[w] == space && self.relies[w.index()]);
        if relies && space == Space::Psum {
            // Then each PSUM tile scans the tiles: bounded like the search
            // for room, or no PSUM tile takes slots.
            let tiles = m
                .mems()
                .space
                .keys()
                .filter(|&w| m.mems().space[w] == space);
            if (tiles.count() as u64).saturating_mul(m.num_mems() as u64) > SLOT_WORK {
                self.slot_stopped = true;
                return;
            }
        }
        for v in m.mems().space.keys() {
            if self.candidates.len() == self.candidates.capacity() {
                break;
            }
            if m.mems().space[v] != space {
                continue;
            }
            let movable = match space {
                Space::Psum => self.psum_movable(m, live, order, v, relies),
                _ => self.movable.get(v.index()).copied().unwrap_or(false),
            };
            // A tile whose hold was widened (a coalescing chain) stays.
            if !movable || self.hold[v.index()] != live.interval(v) {
                continue;
            }
            if let Some(c) = candidate(m, live, order, v) {
                self.candidates.push(c);
            }
        }
        self.candidates
            .sort_unstable_by_key(|c| (c.hold.start, c.v));
    }

    /// True when PSUM tile `v` may take slots as a movable SB tile may
    /// move (see [`super`]): placed, live, not pinned, an input or an
    /// output, first written, accessed by no in-place instruction, and
    /// sharing no cell with a tile first read that is not an input.
    /// `relies`: whether any PSUM tile is first read (else the scan for
    /// one is skipped).
    fn psum_movable(
        &self,
        m: &Module,
        live: &MemLiveness,
        order: &LinearOrder,
        v: MemLoc,
        relies: bool,
    ) -> bool {
        let fixed = MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT;
        let ok = m.is_placed(v)
            && live.interval(v).is_some()
            && !m.mems().flags[v].intersects(fixed)
            && live.access_writes(v).next() == Some(true);
        if !ok {
            return false;
        }
        let in_place = live
            .accesses(v)
            .iter()
            .any(|&p| m.insts().flags[order.inst_at(p)].contains(InstFlags::IN_PLACE));
        let me = cells(m, v, m.mems().offset[v]);
        let reads_here = relies
            && super::on_its_partitions(m, v)
                .any(|(w, cw)| self.relies[w.index()] && super::meets(me, cw));
        !in_place && !reads_here
    }

    /// Gives candidate `k` `depth` slots, or fewer (down to 2) where only
    /// those fit under `limit`, or none where not even 2 fit; logged in
    /// `self.given` for [`Self::take_back_to`]. False when the module's
    /// reserved extensions or the work bound ([`SLOT_WORK`]) ran out (the
    /// tile is left as it was, and no further tile should be tried).
    fn give(
        &mut self,
        m: &mut Module,
        live: &MemLiveness,
        order: &LinearOrder,
        k: usize,
        depth: u16,
        limit: u64,
    ) -> bool {
        let c = self.candidates[k];
        let row = m.mems().bytes[c.v];
        // PSUM: one bank per slot (each slot a tensor of the bank rule).
        let bank = m.target.psum_bank_bytes as u64;
        let psum = m.mems().space[c.v] == Space::Psum;
        let align = if psum {
            bank.max(1)
        } else {
            (m.mems().align[c.v] as u64).max(1)
        };
        let stride = match crate::align::align_up(row as u64, align) {
            Some(s) if !psum || s == bank => s,
            _ => return true,
        };
        let before = Given {
            v: c.v,
            lp: c.lp,
            offset: m.mems().offset[c.v],
            bytes: row,
            hold: self.hold[c.v.index()],
        };
        let mut placed = None;
        for n in (2..=depth).rev() {
            let visits = m.num_mems() as u64;
            if self.slot_work < visits {
                self.slot_stopped = true;
                let _ = m.set_mem_bytes(c.v, row);
                return false;
            }
            self.slot_work -= visits;
            let total = stride * (u64::from(n) - 1) + row as u64;
            let Ok(total) = u32::try_from(total) else {
                continue;
            };
            if m.set_mem_bytes(c.v, total).is_err() {
                break;
            }
            if let Some(at) = self.clear_start(m, c.v, c.hold, before.offset, align, limit) {
                placed = Some((n, at));
                break;
            }
        }
        let Some((n, at)) = placed else {
            let _ = m.set_mem_bytes(c.v, row);
            return true;
        };
        m.place(c.v, m.mems().base_partition[c.v], at);
        let term = IvTerm {
            wrap: n,
            ..IvTerm::affine(c.lp, 0, stride as i64)
        };
        if self.given.len() == self.given.capacity() || !add_term(m, live, order, c.v, term) {
            undo(m, before);
            self.slot_stopped = true;
            return false;
        }
        self.hold[c.v.index()] = Some(c.hold);
        self.given.push(before);
        true
    }

    /// Undoes [`Self::give`] down to `len` tiles given, last first (so
    /// that the extensions they took return to the pool).
    fn take_back_to(
        &mut self,
        m: &mut Module,
        live: &MemLiveness,
        order: &LinearOrder,
        len: usize,
    ) {
        while self.given.len() > len {
            let Some(g) = self.given.pop() else {
                break;
            };
            remove_term(m, live, order, g.v, g.lp);
            undo(m, g);
            self.hold[g.v.index()] = g.hold;
        }
    }

    /// The start for `v` (at its current size) under `limit` whose cells
    /// meet no SB tile held during `hold` on its partitions, nor a tile
    /// first read that is not an input: `prefer` when clear, else the
    /// lowest.
    fn clear_start(
        &mut self,
        m: &Module,
        v: MemLoc,
        hold: Interval,
        prefer: u64,
        align: u64,
        limit: u64,
    ) -> Option<u64> {
        if !self.collect_busy_over(m, v, hold, v) {
            return None;
        }
        let bytes = cells(m, v, 0).b1;
        let clear = |busy: &[(u64, u64)], at: u64| {
            at + bytes <= limit && !busy.iter().any(|b| at < b.1 && b.0 < at + bytes)
        };
        if clear(&self.busy, prefer) {
            return Some(prefer);
        }
        let mut pos = 0u64;
        for k in 0..=self.busy.len() {
            let gap_end = self.busy.get(k).map_or(limit, |b| b.0.min(limit));
            if let Some(start) = crate::align::align_up(pos, align) {
                if start + bytes <= gap_end {
                    return Some(start);
                }
            }
            if let Some(b) = self.busy.get(k) {
                pos = pos.max(b.1);
            }
            if pos >= limit {
                break;
            }
        }
        None
    }
}

/// True when going from `(makespan, peak)` `before` to `now` pays for
/// its memory: the makespan drops, by at least the share of the usable SB
/// (`usable` bytes per partition) that the peak grows by. Memory the
/// placement leaves unused is cheap and memory near the capacity dear,
/// so a slot is kept where its cells would stay idle, and must earn its
/// place where they are scarce.
fn pays(before: (u64, u64), now: (u64, u64), usable: u64) -> bool {
    let (m0, p0) = before;
    let (m1, p1) = now;
    if m1 >= m0 {
        return false;
    }
    let gain = (m0 - m1) as u128 * usable.max(1) as u128;
    gain >= m0 as u128 * p1.saturating_sub(p0) as u128
}

/// `v` as a candidate (see the module doc), or `None`.
fn candidate(m: &Module, live: &MemLiveness, order: &LinearOrder, v: MemLoc) -> Option<Candidate> {
    let acc = live.accesses(v);
    let &first = acc.first()?;
    let i = order.inst_at(first);
    let lp = m.inst_loop(i);
    if !lp.is_valid() || m.loop_name(lp).is_none() {
        return None;
    }
    let trip = m.loops().trip[lp];
    if trip == UNKNOWN_TRIP || trip < 2 {
        return None;
    }
    // The first access writes all of `v` and reads none of it.
    if m.inputs(i).any(|a| m.aps().loc[a] == v) {
        return None;
    }
    let mut writes = m.outputs(i).filter(|&a| m.aps().loc[a] == v);
    match (writes.next(), writes.next()) {
        (Some(w), None) if m.is_full_access(w) => {}
        _ => return None,
    }
    let (s, e) = order.loop_span(lp)?;
    for &p in acc {
        if p < s || p > e {
            return None;
        }
        for a in m.all_aps(order.inst_at(p)) {
            if m.aps().loc[a] != v {
                continue;
            }
            let ext = m.ap_ext(a);
            let fixed = ext.reg.is_some() || ext.pstep.is_some() || ext.term(lp).is_some();
            if fixed || ext.terms.len() == MAX_IV_TERMS {
                return None;
            }
        }
    }
    let iv = live.interval(v)?;
    let (hs, he) = order.outermost_loop_span(m, first)?;
    Some(Candidate {
        v,
        lp,
        hold: Interval {
            start: hs.min(iv.start),
            end: he.max(iv.end),
        },
    })
}

/// The instructions that access `v`, each once, in position order.
fn accessors<'a>(
    live: &'a MemLiveness,
    order: &'a LinearOrder,
    v: MemLoc,
) -> impl DoubleEndedIterator<Item = crate::ir::Inst> + 'a {
    let acc = live.accesses(v);
    acc.iter()
        .enumerate()
        .filter(move |&(k, p)| k == 0 || acc[k - 1] != *p)
        .map(move |(_, &p)| order.inst_at(p))
}

/// Adds `term` to every pattern of `v`. False (and nothing changed) when
/// the module's reserved extensions run out.
fn add_term(
    m: &mut Module,
    live: &MemLiveness,
    order: &LinearOrder,
    v: MemLoc,
    term: IvTerm,
) -> bool {
    for i in accessors(live, order, v) {
        let n = m.all_aps(i).len();
        for k in 0..n {
            let Some(a) = m.all_aps(i).nth(k) else {
                continue;
            };
            if m.aps().loc[a] != v {
                continue;
            }
            let mut ext = m.ap_ext(a).clone();
            let _ = ext.terms.try_push(term);
            if m.set_ap_ext(i, k, ext).is_err() {
                remove_term(m, live, order, v, term.lp);
                return false;
            }
        }
    }
    true
}

/// Removes the term of `lp` from every pattern of `v`, last first.
fn remove_term(m: &mut Module, live: &MemLiveness, order: &LinearOrder, v: MemLoc, lp: Loop) {
    for i in accessors(live, order, v).rev() {
        let n = m.all_aps(i).len();
        for k in (0..n).rev() {
            let Some(a) = m.all_aps(i).nth(k) else {
                continue;
            };
            if m.aps().loc[a] != v || m.ap_ext(a).term(lp).is_none() {
                continue;
            }
            let mut ext = m.ap_ext(a).clone();
            ext.terms.retain(|t| t.lp != lp);
            // Removing a term keeps a pattern inside its location: it
            // was there at iteration 0.
            let _ = m.set_ap_ext(i, k, ext);
        }
    }
}

/// Puts `v` back as `g` says (its terms already removed).
fn undo(m: &mut Module, g: Given) {
    let _ = m.set_mem_bytes(g.v, g.bytes);
    m.place(g.v, m.mems().base_partition[g.v], g.offset);
}
