//! SB address rotation (`address_rotation_sb`): after allocation, a tile
//! whose reused cells make an engine wait moves to cells of its own when
//! that shortens the schedule model's makespan.
//!
//! The allocators minimize the peak, so tiles whose lifetimes do not
//! overlap share cells; when they belong to different engines, the later
//! tile's first write has to wait for the earlier tile's last reader (a
//! placement-added dependency, [`crate::analysis::schedule`]). The model
//! names the dependencies that cost the makespan most. This pass works
//! down that list: for each, it tries to move one of the two tiles (the
//! waiting one first) to the lowest gaps of the SB address range, and to
//! the highest, that are free, on its partitions, of every tile live with
//! it and of the tile it waited for; it re-runs the model and keeps the
//! first move that makes the makespan drop, or keeps it and makes fewer
//! executions wait for reused cells (where the loss is spread over many
//! waits, each alone is off the critical path, and removing them one by
//! one is what shortens it). The property it exploits is that the
//! model's costliest dependency is where a move can gain most, and that
//! the model, not a rule of thumb, decides whether a move gains.
//!
//! Before the moves, the pass re-places all the movable tiles at once by
//! rest-fit ([`rest_fit`]): in the order their lives start, each where its
//! cells rested a given number of positions since their last use, at each
//! rest length of [`REST_LADDER`] in turn, and keeps the placement the
//! model prefers. Where the loss is spread over thousands of waits, each
//! off the critical path, one move at a time cannot reach it within a
//! bounded number of model runs; a whole placement built so that reused
//! cells rest does, in one run per rest length.
//!
//! After the moves, tiles rewritten in every iteration of a loop, in SB
//! and in PSUM, may take slots used in turn ([`multi_buffer`]): the one
//! rewrite of this pass that changes patterns and sizes (the invariants
//! below are the moves'; the slots' are in that module).
//!
//! Invariants: only byte offsets change (the base partition stays); a move
//! is legal whatever else holds: the new cells are shared with no tile
//! whose live interval overlaps the mover's on a common partition, aligned
//! to the mover's alignment, and end at or below the limit: the SB peak
//! before the pass (before the colorer joined coalescing chains, when it
//! did: both spend one headroom) plus the headroom
//! ([`SbRotationOptions::headroom_pct`]), never below the peak as it is nor
//! past the usable SB. A tile moves only when nothing depends on
//! where it is:
//! - it is not pinned, an input or an output, and it is placed and live;
//! - its first access writes it (a tile first read relies on the cells it
//!   was given, e.g. a spill slice that keeps its victim's corner);
//! - it takes no in-place hand-off: an instruction marked `inplace` may
//!   write its output over an input that dies at it, and where the two
//!   share cells neither moves (one may rely on the other's cells). An
//!   in-place instruction's operands that do not share cells move like any
//!   tile: the closed live intervals of an input dying at the instruction
//!   and of its output meet there, so a move never puts them together;
//! - it is not one of a coalescing pair placed side by side (with
//!   `--dma-affinity on`: the DMA passes merge the pair's transfers only
//!   while the tiles abut);
//! - its cells meet no tile that is first read without being an input
//!   (such a tile reads what this one left there); no tile moves into
//!   such a tile's cells either, wherever their lives are.
//!
//! The pass runs before the DMA passes, whose merged transfers alias the
//! tiles they merge. The placement verifier and the dataflow checker see
//! the result like any allocator's. Moves are never spills: no
//! instruction is added.
//!
//! When the loss stays above the headroom's reach, [`SbRotation::run`]
//! goes on with the usable SB as the limit: rest-fit again, and the moves,
//! each lowered to the lowest start that keeps its gain; it undoes them,
//! and the report says what peak the rest of the loss would need and what
//! makespan that peak would give ([`SbProbe`], the better of the two).
//! Moves that settle within the limit are kept instead (the kept phase
//! tries only a few gaps per move).
//!
//! Storage: [`SbRotation::reserve`] from the location count;
//! [`SbRotation::run`] does not allocate after it. Time: a fixed number
//! of model runs (`max_trials` and `max_executions` bound the moves, one
//! run per rest length), and rest-fit's work bound ([`REST_WORK`]).

pub(crate) mod multi_buffer;
mod rest_fit;

use alloc::vec::Vec;
use arrayvec::ArrayVec;

use crate::analysis::schedule::{Schedule, ScheduleOptions, ScheduleReport};
use crate::analysis::{Interval, LinearOrder, MemLiveness};
use crate::dma::affinity::AffinityPair;
use crate::ir::{Capacity, InstFlags, MemFlags, MemLoc, Module, Space};
use multi_buffer::{Candidate, Given};
use rest_fit::{RestFit, Unplaced};

/// The pass's limits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SbRotationOptions {
    /// The SB peak may grow by this percentage of the peak before the
    /// pass (the memory a user trades for speed).
    pub headroom_pct: u32,
    /// Moves tried (each costs one run of the model) at most, in the
    /// kept phase and in the probe each.
    pub max_trials: u32,
    /// Executions the model may simulate over all the trials of one phase
    /// (each run simulates at most `schedule.max_executions`), so the
    /// pass's time is bounded by a fixed number of model walks however
    /// large the module.
    pub max_executions: u64,
    /// The model's limits for each run.
    pub schedule: ScheduleOptions,
    /// The most slots a loop tile may get ([`multi_buffer`]; below 2: no
    /// multi-buffering).
    pub max_slots: u32,
}

impl Default for SbRotationOptions {
    fn default() -> Self {
        SbRotationOptions {
            // The placement issue's bound on the memory traded for speed.
            headroom_pct: 5,
            // Each trial is one model run (bounded by its execution cap):
            // a few dozen keep the pass a small multiple of the model.
            max_trials: 48,
            // Sixteen walks at the model's own cap: a kernel's few
            // thousand executions per walk leave the trial cap binding.
            max_executions: 16 << 16,
            schedule: ScheduleOptions::default(),
            // The deepest rung of the slot ladder.
            max_slots: multi_buffer::SLOT_LADDER[multi_buffer::SLOT_LADDER.len() - 1] as u32,
        }
    }
}

/// What the rest of the loss would need (see the module doc).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SbProbe {
    /// The SB peak (bytes per partition) the probe's moves reached.
    pub peak: u64,
    /// The model's makespan at that peak.
    pub makespan: u64,
    /// Tiles the probe moved (then put back).
    pub moves: u32,
}

/// What one SB rotation did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SbRotationReport {
    /// SB tiles that may move (see the module doc).
    pub movable: u32,
    /// Moves tried (model runs).
    pub tried: u32,
    /// Tiles whose offset the pass changed.
    pub moved: u32,
    /// The rest length (positions; `u32::MAX`: as long as the cells
    /// allow) of the rest-fit placement kept, if one was.
    pub rest: Option<u32>,
    /// Rest lengths tried within the limit.
    pub rest_tried: u32,
    /// Rest-fit placements that fitted the limit (a model run each).
    pub rest_fitted: u32,
    /// True when rest-fit stopped at its work bound, or its storage,
    /// before a placement finished (that placement was undone).
    pub rest_stopped: bool,
    /// SB peak before and after (bytes per partition).
    pub peak_before: u64,
    /// See `peak_before` (after the moves and the slots).
    pub peak_after: u64,
    /// The limit the kept moves stayed within.
    pub limit: u64,
    /// The model's makespan before and after.
    pub makespan_before: u64,
    /// See `makespan_before`.
    pub makespan_after: u64,
    /// The makespan with unlimited memory (no placement-added dependency).
    pub makespan_unlimited: u64,
    /// When moves past the limit (up to the usable SB) shortened the
    /// makespan further: what they needed and gave.
    pub probe: Option<SbProbe>,
    /// Tiles rewritten in every iteration of a loop that could take slots
    /// used in turn (`mem::sb_rotation::multi_buffer`).
    pub buffer_candidates: u32,
    /// Model runs that priced slots.
    pub buffer_tried: u32,
    /// Tiles given slots (SB and PSUM).
    pub buffered: u32,
    /// Of those, PSUM tiles (a bank per slot).
    pub psum_buffered: u32,
    /// The depth kept (0: none; a tile gets fewer where only fewer fit).
    pub slots: u32,
    /// True when the search for clear cells stopped at its work bound
    /// (`multi_buffer::SLOT_WORK`) or the reserved pattern extensions
    /// ran out, before every candidate was tried.
    pub buffer_stopped: bool,
}

/// A location's cells: partitions `p0..p1`, bytes `b0..b1` of each.
#[derive(Copy, Clone, Debug)]
pub(super) struct Cells {
    p0: u32,
    p1: u32,
    b0: u64,
    b1: u64,
}

impl Cells {
    /// True when the two have a partition in common (their bytes may
    /// meet there).
    fn shares_partitions(self, other: Cells) -> bool {
        self.p0 < other.p1 && other.p0 < self.p1
    }
}

/// The pass's storage.
#[derive(Clone, Debug, Default)]
pub struct SbRotation {
    movable: Vec<bool>,
    /// By location index: tiles first read that are not inputs (they read
    /// what was left in their cells; nothing moves into them).
    relies: Vec<bool>,
    /// By location index: the positions over which a tile holds its
    /// cells. Its live interval, except for the tiles of a coalescing pair
    /// placed side by side: the merged transfer's location holds both
    /// tiles' cells over both lives (and a merged save in a loop over the
    /// loop nest), so each holds the whole chain's span.
    hold: Vec<Option<Interval>>,
    /// Busy byte ranges on the mover's partitions, for the gap search.
    busy: Vec<(u64, u64)>,
    /// Moves kept in the probe: (tile, its offset before).
    undo: Vec<(MemLoc, u64)>,
    /// Candidate starts of [`Self::settle`].
    starts: Vec<u64>,
    /// Tiles that may get slots ([`multi_buffer`]), and those given slots
    /// with what they were.
    candidates: Vec<Candidate>,
    given: Vec<Given>,
    /// What is left of the current [`multi_buffer::SLOT_WORK`], and
    /// whether it ran out.
    slot_work: u64,
    slot_stopped: bool,
    rest: RestFit,
    schedule: Schedule,
}

impl SbRotation {
    #[cfg(test)]
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.movable, self.relies, self.hold, self.busy, self.undo)
            + crate::heap_bytes!(self.starts, self.candidates, self.given)
            + self.rest.heap_bytes()
            + self.schedule.heap_bytes()
    }

    /// Sizes the storage for up to `cap.mems` locations and the model's
    /// `window`.
    pub fn reserve(&mut self, cap: &Capacity, opts: &SbRotationOptions) {
        use crate::storage::grow;
        grow(&mut self.movable, cap.mems);
        grow(&mut self.relies, cap.mems);
        grow(&mut self.hold, cap.mems);
        grow(&mut self.busy, cap.mems);
        grow(&mut self.starts, cap.mems + 1);
        grow(&mut self.undo, opts.max_trials as usize);
        grow(&mut self.candidates, cap.mems);
        grow(&mut self.given, cap.mems);
        self.rest.reserve(cap.mems);
        self.schedule.reserve(cap, opts.schedule.window);
    }

    /// Rotates the SB tiles of `m`, then gives slots to the tiles rewritten
    /// in every iteration of a loop ([`multi_buffer`]); `live` and `order`
    /// must describe `m` (after the pass they do not when
    /// [`SbRotationReport::buffered`] is not 0: the tiles given slots
    /// changed size and patterns). The tiles of the coalescing candidates
    /// `pairs` that abut stay. The headroom is over `plain_peak` when given
    /// (the SB peak before the colorer joined coalescing chains, which
    /// spent part of the same headroom), else over the peak as it is; the
    /// limit is never below the peak as it is.
    pub fn run(
        &mut self,
        m: &mut Module,
        live: &MemLiveness,
        order: &LinearOrder,
        pairs: &[AffinityPair],
        plain_peak: Option<u64>,
        opts: &SbRotationOptions,
    ) -> SbRotationReport {
        let mut rep = self.move_tiles(m, live, pairs, plain_peak, opts);
        if rep.movable > 0 && opts.max_slots >= 2 {
            self.buffer(m, live, order, opts, &mut rep);
        }
        rep
    }

    /// The moves of [`Self::run`]: rest-fit, single moves and the probe.
    fn move_tiles(
        &mut self,
        m: &mut Module,
        live: &MemLiveness,
        pairs: &[AffinityPair],
        plain_peak: Option<u64>,
        opts: &SbRotationOptions,
    ) -> SbRotationReport {
        let peak = sb_peak(m);
        let usable = m.target.sb_usable_bytes as u64;
        let base = plain_peak.unwrap_or(peak).min(peak);
        let headroom = base + base * opts.headroom_pct as u64 / 100;
        let limit = usable.min(headroom.max(peak));
        let mut rep = SbRotationReport {
            peak_before: peak,
            peak_after: peak,
            limit,
            ..SbRotationReport::default()
        };
        rep.movable = self.mark_movable(m, live, pairs);
        let mut first = self.schedule.run(m, &opts.schedule);
        rep.makespan_before = first.makespan;
        rep.makespan_unlimited = first.makespan_unlimited;
        let prepared = rep.movable > 0
            && self
                .rest
                .prepare(m, &self.hold, &self.movable, &self.relies);
        if prepared && first.loss() > 0 {
            let kept = self.rest_ladder(m, opts, &first, limit, false, &mut rep);
            if let Some((_, _, gap)) = kept {
                rep.rest = Some(gap);
                // The ladder's runs skip the what-if pricing: the moves
                // need the costliest dependencies of the placement kept.
                first = self.schedule.run(m, &opts.schedule);
            }
        }
        let (kept, tried, moved) = self.improve(m, live, opts, first, limit, false);
        rep.makespan_after = kept.makespan;
        rep.tried = tried;
        rep.moved = if prepared {
            self.rest.moved(m).0
        } else {
            moved
        };
        rep.peak_after = sb_peak(m);
        if kept.loss() > 0 && limit < usable {
            let mut rest_probe = None;
            if prepared {
                let best = self.rest_ladder(m, opts, &kept, usable, true, &mut rep);
                if let Some((r, peak, _)) = best {
                    rest_probe = Some(SbProbe {
                        peak,
                        makespan: r.makespan,
                        moves: self.rest.moved(m).1,
                    });
                }
                self.rest.restore_start(m);
            }
            self.undo.clear();
            let (probe, _, moves) = self.improve(m, live, opts, kept, usable, true);
            self.settle(m, live, opts, probe.makespan);
            let gain = moves > 0 && probe.makespan < rep.makespan_after;
            if gain && sb_peak(m) <= limit {
                // Settled within the limit: the kept phase's gap choice
                // missed these moves, and they are legal there too.
                self.undo.clear();
                rep.makespan_after = probe.makespan;
                rep.moved = if prepared {
                    self.rest.moved(m).0
                } else {
                    rep.moved + moves
                };
                rep.peak_after = sb_peak(m);
                return rep;
            }
            // Moves that only removed waits off the critical path say
            // nothing about what the makespan needs.
            let moved_probe = gain.then(|| SbProbe {
                peak: sb_peak(m),
                makespan: probe.makespan,
                moves,
            });
            rep.probe = [moved_probe, rest_probe]
                .into_iter()
                .flatten()
                .min_by_key(|p| (p.makespan, p.peak));
            while let Some((v, off)) = self.undo.pop() {
                m.place(v, m.mems().base_partition[v], off);
            }
        }
        rep
    }

    /// Rest-fit at each rung of [`REST_LADDER`] within `limit`, one model
    /// run per placement that fits. Returns the one the model prefers
    /// (its report, SB peak and rung) when it beats
    /// `base`: by makespan, then placement waits, then peak; for a `probe`
    /// by makespan, then peak. That one is left in place; otherwise the
    /// placement is as before.
    #[allow(clippy::too_many_arguments)]
    fn rest_ladder(
        &mut self,
        m: &mut Module,
        opts: &SbRotationOptions,
        base: &ScheduleReport,
        limit: u64,
        probe: bool,
        rep: &mut SbRotationReport,
    ) -> Option<(ScheduleReport, u64, u32)> {
        let quick = ScheduleOptions {
            what_if_executions: 0,
            ..opts.schedule
        };
        let key = |r: &ScheduleReport, peak: u64| {
            let waits = if probe { 0 } else { r.placement_waits };
            (r.makespan, waits, peak)
        };
        let mut best = key(base, sb_peak(m));
        self.rest.begin(m);
        let mut kept = None;
        let mut fit = 0;
        let mut work = REST_WORK;
        let mut repairs = 0;
        for gap in REST_LADDER {
            if !probe {
                rep.rest_tried += 1;
            }
            let mut from = 0;
            let placed = loop {
                match self.rest.place(m, &self.hold, limit, gap, from, &mut work) {
                    Ok(()) => break true,
                    Err(Unplaced::NoRoom(v)) => {
                        repairs += 1;
                        match self.rest.repair(&self.hold, v) {
                            Some(k) if repairs <= MAX_REPAIRS => from = k,
                            _ => {
                                self.rest.restore(m);
                                break false;
                            }
                        }
                    }
                    Err(Unplaced::Work) => {
                        rep.rest_stopped = true;
                        break false;
                    }
                }
            };
            if rep.rest_stopped {
                break;
            }
            if !placed {
                continue;
            }
            fit += 1;
            let r = self.schedule.run(m, &quick);
            let peak = sb_peak(m);
            if key(&r, peak) < best {
                best = key(&r, peak);
                self.rest.keep(m);
                kept = Some((r, peak, gap));
            }
        }
        self.rest.restore(m);
        if !probe {
            rep.rest_fitted += fit;
        }
        kept
    }

    /// Marks the tiles that may move (see the module doc); returns how
    /// many.
    fn mark_movable(&mut self, m: &Module, live: &MemLiveness, pairs: &[AffinityPair]) -> u32 {
        let n = m.num_mems();
        self.movable.clear();
        self.relies.clear();
        self.hold.clear();
        if self.movable.capacity() < n || self.relies.capacity() < n || self.hold.capacity() < n {
            // Not reserved for this module: nothing moves.
            return 0;
        }
        let fixed = MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT;
        for v in m.mems().space.keys() {
            let ok = m.mems().space[v] == Space::Sb
                && m.is_placed(v)
                && live.interval(v).is_some()
                && !m.mems().flags[v].intersects(fixed)
                && live.access_writes(v).next() == Some(true);
            self.movable.push(ok);
        }
        for i in m.insts().flags.keys() {
            if !m.insts().flags[i].contains(InstFlags::IN_PLACE) {
                continue;
            }
            for o in m.outputs(i) {
                let out = m.aps().loc[o];
                for a in m.inputs(i) {
                    let inp = m.aps().loc[a];
                    let shared = inp != out
                        && m.is_placed(inp)
                        && m.is_placed(out)
                        && m.mems().space[inp] == m.mems().space[out]
                        && meets(
                            cells(m, inp, m.mems().offset[inp]),
                            cells(m, out, m.mems().offset[out]),
                        );
                    if shared {
                        self.movable[inp.index()] = false;
                        self.movable[out.index()] = false;
                    }
                }
            }
        }
        // Tiles first read that are not inputs read what a tile sharing
        // their cells left there: neither side may move.
        for r in m.mems().space.keys() {
            let relies = m.mems().space[r].is_on_chip()
                && m.is_placed(r)
                && !m.mems().flags[r].contains(MemFlags::INPUT)
                && live.access_writes(r).next() == Some(false);
            self.relies.push(relies);
            if !relies {
                continue;
            }
            let cr = cells(m, r, m.mems().offset[r]);
            for v in m.mems().space.keys() {
                let same = m.mems().space[v] == m.mems().space[r];
                if self.movable[v.index()] && same && meets(cr, cells(m, v, m.mems().offset[v])) {
                    self.movable[v.index()] = false;
                }
            }
        }
        self.hold
            .extend(m.mems().space.keys().map(|v| live.interval(v)));
        // A chain's span reaches all its tiles after as many sweeps as it
        // has pairs; a sweep that widens nothing ends it.
        for _ in 0..pairs.len() {
            let mut widened = false;
            for p in pairs {
                let (a, b) = (p.first, p.second);
                let placed = m.is_placed(a) && m.is_placed(b);
                let abut = placed
                    && m.mems().base_partition[a] == m.mems().base_partition[b]
                    && m.mems().partitions[a] == m.mems().partitions[b]
                    && m.mems().offset[a] + m.mems().bytes[a] as u64 == m.mems().offset[b];
                if !abut {
                    continue;
                }
                self.movable[a.index()] = false;
                self.movable[b.index()] = false;
                let nest = p.nest.map(|(start, end)| Interval { start, end });
                let span = [self.hold[a.index()], self.hold[b.index()], nest]
                    .into_iter()
                    .flatten()
                    .reduce(|x, y| Interval {
                        start: x.start.min(y.start),
                        end: x.end.max(y.end),
                    });
                for t in [a, b] {
                    widened |= self.hold[t.index()] != span;
                    self.hold[t.index()] = span;
                }
            }
            if !widened {
                break;
            }
        }
        self.keep_holds_that_merge(m, live, pairs);
        self.movable.iter().filter(|&&x| x).count() as u32
    }

    /// Narrows back to its live interval the hold of each tile whose
    /// widened hold meets another tile's cells in the placement as it is:
    /// the DMA passes refuse that merge anyway (`conflict`), and the
    /// placement must stay legal under the holds (it is where rest-fit's
    /// tiles go back to). Bounded: past [`HOLD_CHECKS`] tile visits no
    /// hold stays widened.
    fn keep_holds_that_merge(&mut self, m: &Module, live: &MemLiveness, pairs: &[AffinityPair]) {
        if pairs.is_empty() {
            return;
        }
        let widened = |h: &[Option<Interval>], t: MemLoc| h[t.index()] != live.interval(t);
        let sb = |t: MemLoc| m.mems().space[t] == Space::Sb && m.is_placed(t);
        let n = m
            .mems()
            .space
            .keys()
            .filter(|&t| sb(t) && widened(&self.hold, t))
            .count();
        if (n as u64).saturating_mul(m.num_mems() as u64) > HOLD_CHECKS {
            for t in m.mems().space.keys() {
                self.hold[t.index()] = live.interval(t);
            }
            return;
        }
        for t in m.mems().space.keys() {
            if !sb(t) || !widened(&self.hold, t) {
                continue;
            }
            let Some(h) = self.hold[t.index()] else {
                continue;
            };
            let ct = cells(m, t, m.mems().offset[t]);
            let clash = on_its_partitions(m, t)
                .any(|(w, cw)| meets(ct, cw) && live.interval(w).is_some_and(|i| i.overlaps(h)));
            if clash {
                self.hold[t.index()] = live.interval(t);
            }
        }
    }

    /// Works down the model's costliest dependencies, keeping each move
    /// that shortens the makespan (or keeps it and removes placement
    /// waits), until no candidate gains or the trials run out. With `probe`, kept moves are logged for undoing. Returns
    /// the last report, the trials made and the moves kept.
    fn improve(
        &mut self,
        m: &mut Module,
        live: &MemLiveness,
        opts: &SbRotationOptions,
        mut best: ScheduleReport,
        limit: u64,
        probe: bool,
    ) -> (ScheduleReport, u32, u32) {
        let quick = ScheduleOptions {
            what_if_executions: 0,
            ..opts.schedule
        };
        let (mut tried, mut moved, mut spent) = (0u32, 0u32, 0u64);
        let within =
            |tried: u32, spent: u64| tried < opts.max_trials && spent < opts.max_executions;
        'rounds: while best.loss() > 0 && within(tried, spent) {
            let deps = best.costliest.clone();
            for d in &deps {
                for (v, partner) in [(d.loc, d.other), (d.other, d.loc)] {
                    if !self.movable.get(v.index()).copied().unwrap_or(false) {
                        continue;
                    }
                    let from = m.mems().offset[v];
                    for to in self.gaps(m, live, v, partner, limit) {
                        if to == from || !within(tried, spent) {
                            continue;
                        }
                        tried += 1;
                        m.place(v, m.mems().base_partition[v], to);
                        let r = self.schedule.run(m, &quick);
                        spent = spent.saturating_add(r.executions);
                        if (r.makespan, r.placement_waits) < (best.makespan, best.placement_waits) {
                            if probe && self.undo.len() == self.undo.capacity() {
                                // No room to undo it later: take it back now.
                                m.place(v, m.mems().base_partition[v], from);
                                break 'rounds;
                            }
                            if probe {
                                self.undo.push((v, from));
                            }
                            moved += 1;
                            // The next round's candidates: the quick walk's,
                            // by their local delay (pricing each by a what-if
                            // walk would cost a walk per candidate).
                            best = r;
                            continue 'rounds;
                        }
                        m.place(v, m.mems().base_partition[v], from);
                    }
                }
            }
            break;
        }
        (best, tried, moved)
    }

    /// Where `v` may go: the lowest aligned start of each of the first
    /// gaps of `[0, limit)` on its partitions that hold it clear of every
    /// tile live with it and of `partner`, ascending, then the highest
    /// aligned start of the last gap that holds it. Low addresses first:
    /// the least memory that removes the dependency; the highest last: the
    /// cells least likely to be shared with anything.
    fn gaps(
        &mut self,
        m: &Module,
        live: &MemLiveness,
        v: MemLoc,
        partner: MemLoc,
        limit: u64,
    ) -> ArrayVec<u64, { GAPS_TRIED + 1 }> {
        let mut out = ArrayVec::new();
        if !self.collect_busy(m, live, v, partner) {
            return out;
        }
        let me = cells(m, v, 0);
        let bytes = me.b1;
        let align = (m.mems().align[v] as u64).max(1);
        let mut high = None;
        let mut pos = 0u64;
        for k in 0..=self.busy.len() {
            let gap_end = self.busy.get(k).map_or(limit, |b| b.0.min(limit));
            if let Some(start) = crate::align::align_up(pos, align) {
                if start + bytes <= gap_end {
                    if out.len() < GAPS_TRIED {
                        out.push(start);
                    }
                    high = Some((gap_end - bytes) / align * align);
                }
            }
            if let Some(b) = self.busy.get(k) {
                pos = pos.max(b.1);
            }
            if pos >= limit {
                break;
            }
        }
        if let Some(h) = high.filter(|h| !out.contains(h)) {
            out.push(h);
        }
        out
    }

    /// Fills `self.busy` with the byte ranges, on `v`'s partitions, of
    /// every SB tile live with `v`, of `partner` and of the tiles first
    /// read that are not inputs (see the module doc), sorted. False when
    /// `v` is not live or they do not fit the reserved storage (a range
    /// left out could make a move illegal, so `v` stays).
    fn collect_busy(&mut self, m: &Module, live: &MemLiveness, v: MemLoc, partner: MemLoc) -> bool {
        match live.interval(v) {
            Some(iv) => self.collect_busy_over(m, v, iv, partner),
            None => false,
        }
    }

    /// [`Self::collect_busy`] for `v` held over `iv`.
    fn collect_busy_over(&mut self, m: &Module, v: MemLoc, iv: Interval, partner: MemLoc) -> bool {
        self.busy.clear();
        for (w, cw) in on_its_partitions(m, v) {
            let with = |x: Option<Interval>| x.is_some_and(|x| x.overlaps(iv));
            if w == partner || self.relies[w.index()] || with(self.hold[w.index()]) {
                if self.busy.len() == self.busy.capacity() {
                    return false;
                }
                self.busy.push((cw.b0, cw.b1));
            }
        }
        self.busy.sort_unstable();
        true
    }

    /// Lowers each of the probe's moves (`self.undo`, in the order made)
    /// to the lowest start that keeps the makespan at `best`: the probe
    /// takes the first gap that gains, often the highest, and the peak it
    /// reports should be what the gain needs, not where the search
    /// happened to look. The starts tried are the bottom of SB and the
    /// top of every SB tile on the mover's partitions (bottom-left
    /// points), below where it went, clear of every tile live with it; at
    /// most [`SETTLE_TRIES`] per move and `max_trials` model runs in all.
    fn settle(&mut self, m: &mut Module, live: &MemLiveness, opts: &SbRotationOptions, best: u64) {
        let quick = ScheduleOptions {
            what_if_executions: 0,
            ..opts.schedule
        };
        let mut tried = 0u32;
        for k in 0..self.undo.len() {
            let v = self.undo[k].0;
            if !self.collect_busy(m, live, v, v) {
                continue;
            }
            let from = m.mems().offset[v];
            let me = cells(m, v, 0);
            let align = (m.mems().align[v] as u64).max(1);
            self.starts.clear();
            self.starts.push(0);
            for (_, cw) in on_its_partitions(m, v) {
                match crate::align::align_up(cw.b1, align) {
                    Some(t) if t < from && self.starts.len() < self.starts.capacity() => {
                        self.starts.push(t)
                    }
                    _ => {}
                }
            }
            self.starts.sort_unstable();
            self.starts.dedup();
            let mut here = 0;
            for idx in 0..self.starts.len() {
                let to = self.starts[idx];
                let clear = !self.busy.iter().any(|b| to < b.1 && b.0 < to + me.b1);
                if !clear {
                    continue;
                }
                if here == SETTLE_TRIES || tried >= opts.max_trials {
                    break;
                }
                here += 1;
                tried += 1;
                m.place(v, m.mems().base_partition[v], to);
                if self.schedule.run(m, &quick).makespan <= best {
                    break;
                }
                m.place(v, m.mems().base_partition[v], from);
            }
        }
    }
}

/// Rest lengths (positions) rest-fit tries, longest first: as long as the
/// cells allow, then a geometric ladder down to one (the lowest start free
/// while the tile lives). How long a cell must rest before its next
/// writer no longer waits depends on the engines' speeds and the program's
/// shape, which the model, not this list, knows: each rung is one
/// placement and one model run, and the model picks.
pub const REST_LADDER: [u32; 6] = [u32::MAX, 256, 64, 16, 4, 1];

/// Work (tiles and cells visited) that rest-fit may spend over one ladder,
/// so the pass's time stays bounded on modules of millions of tiles (a
/// placement visits, per tile, those live with it and the cells left
/// before it: tens, usually).
pub const REST_WORK: u64 = 1 << 29;

/// Tile visits [`SbRotation::keep_holds_that_merge`] may spend.
const HOLD_CHECKS: u64 = 1 << 26;

/// Placements that found no room may mark tiles to pack lowest this many
/// times over one ladder (each mark starts the placement again).
const MAX_REPAIRS: u32 = 64;

/// Gaps whose lowest start is tried for one move (then the highest start).
const GAPS_TRIED: usize = 2;

/// Starts, lowest first, that [`SbRotation::settle`] tries for one move.
const SETTLE_TRIES: u32 = 8;

/// The placed tiles of `v`'s space other than `v` on any of `v`'s
/// partitions, with their cells: those a move of `v` may meet.
fn on_its_partitions(m: &Module, v: MemLoc) -> impl Iterator<Item = (MemLoc, Cells)> + '_ {
    let me = cells(m, v, 0);
    let space = m.mems().space[v];
    m.mems()
        .space
        .keys()
        .filter(move |&w| w != v && m.mems().space[w] == space && m.is_placed(w))
        .map(|w| (w, cells(m, w, m.mems().offset[w])))
        .filter(move |(_, cw)| cw.shares_partitions(me))
}

/// The cells of `v` with its bytes at `offset`.
pub(super) fn cells(m: &Module, v: MemLoc, offset: u64) -> Cells {
    let p0 = m.mems().base_partition[v] as u32;
    Cells {
        p0,
        p1: p0 + m.mems().partitions[v] as u32,
        b0: offset,
        b1: offset + m.mems().bytes[v] as u64,
    }
}

/// True when two cell rectangles share a cell.
fn meets(a: Cells, b: Cells) -> bool {
    a.shares_partitions(b) && a.b0 < b.b1 && b.b0 < a.b1
}

/// The end of the highest placed SB tile (bytes per partition).
fn sb_peak(m: &Module) -> u64 {
    space_peak(m, Space::Sb)
}

/// The end of the highest placed tile of `space` (bytes per partition).
fn space_peak(m: &Module, space: Space) -> u64 {
    m.mems()
        .space
        .keys()
        .filter(|&v| m.mems().space[v] == space && m.is_placed(v))
        .map(|v| m.mems().offset[v] + m.mems().bytes[v] as u64)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::LinearOrder;
    use crate::ir::{Builder, Opcode, SubOp};
    use crate::target::Target;
    use crate::testing::{assert_placed_legally, assert_sound, dram_io, exp, mem, tiles};

    /// `a` and `b` loaded from DRAM on one queue, each drained by ACT into
    /// an output tile of its own; `b` shares `a`'s cells, so its load waits
    /// for ACT's read of `a` (a placement-added dependency). Peak 1536 B:
    /// `a`/`b` at 0, the outputs at 512 and 1024. With `cleared`, POOL
    /// clears `o2` first, so both outputs are live from the start and the
    /// only free cells are above the peak.
    fn shared_load(cleared: bool) -> Module {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [x, _] = dram_io(&mut bl, 128, 512, 4);
        let [a, b] = tiles(&mut bl, Space::Sb, ["a", "b"], 128, 512, 4);
        let o1 = mem(&mut bl, "o1", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
        let o2 = mem(&mut bl, "o2", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
        bl.func("f").unwrap();
        if cleared {
            let full = bl.full(o2);
            bl.op(Opcode::Memset, &[full], &[]).unwrap();
        }
        bl.load(a, x, 0).unwrap();
        exp(&mut bl, o1, a);
        bl.load(b, x, 0).unwrap();
        exp(&mut bl, o2, b);
        for (t, off) in [(a, 0), (b, 0), (o1, 512), (o2, 1024)] {
            m.place(t, 0, off);
        }
        m
    }

    fn rotate(m: &mut Module, opts: &SbRotationOptions) -> SbRotationReport {
        rotate_over(m, None, opts)
    }

    /// [`rotate`] with the headroom over `plain_peak`.
    fn rotate_over(
        m: &mut Module,
        plain_peak: Option<u64>,
        opts: &SbRotationOptions,
    ) -> SbRotationReport {
        let o = LinearOrder::of(m);
        let live = MemLiveness::of(m, &o);
        let mut r = SbRotation::new();
        r.reserve(&m.capacity(), opts);
        r.run(m, &live, &o, &[], plain_peak, opts)
    }

    /// The pass reserved for `m`, its tiles marked movable (with the
    /// coalescing candidates `pairs`), and the liveness they were marked by.
    fn marked(
        m: &Module,
        pairs: &[AffinityPair],
        opts: &SbRotationOptions,
    ) -> (SbRotation, MemLiveness, u32) {
        let order = LinearOrder::of(m);
        let live = MemLiveness::of(m, &order);
        let mut rot = SbRotation::new();
        rot.reserve(&m.capacity(), opts);
        let movable = rot.mark_movable(m, &live, pairs);
        (rot, live, movable)
    }

    #[test]
    fn a_tile_moves_to_cells_free_while_it_lives_without_growing_the_peak() {
        let before = shared_load(false);
        let mut m = before.clone();
        let rep = rotate(&mut m, &SbRotationOptions::default());
        assert!(rep.makespan_before > rep.makespan_unlimited);
        assert_eq!(rep.makespan_after, rep.makespan_unlimited);
        assert_eq!((rep.movable, rep.moved), (2, 1));
        // `b`'s wait is on `a`'s cells; `b` finds no room within the
        // headroom (the outputs live with it hold 512..1536), `a` does: in
        // `o2`'s cells, which `o2` takes only after `a`'s last read.
        let a = m.mem_by_name("a").unwrap();
        assert_eq!(m.mems().offset[a], 1024);
        assert_eq!((rep.peak_before, rep.peak_after), (1536, 1536));
        assert_eq!(rep.probe, None);
        assert_placed_legally("rotated", &m);
        assert_sound(&before, &m);
    }

    #[test]
    fn rest_fit_gives_a_load_the_cells_that_rested_and_no_move_is_needed() {
        // `t0` is cleared and drained first; `a` and `b` are loaded on one
        // queue and drained by ACT into the output. Placed at the peak
        // with `b` in `a`'s cells, `b`'s load waits for ACT's read of `a`.
        // Rest-fit, within the same three slots, gives `b` the cells `t0`
        // left long before.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [x, _] = dram_io(&mut bl, 128, 512, 4);
        let [t0, a, b] = tiles(&mut bl, Space::Sb, ["t0", "a", "b"], 128, 512, 4);
        let out = mem(&mut bl, "out", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
        bl.func("f").unwrap();
        let full = bl.full(t0);
        bl.op(Opcode::Memset, &[full], &[]).unwrap();
        exp(&mut bl, out, t0);
        for t in [a, b] {
            bl.load(t, x, 0).unwrap();
            exp(&mut bl, out, t);
        }
        for (t, off) in [(out, 0), (t0, 512), (a, 1024), (b, 1024)] {
            m.place(t, 0, off);
        }
        let before = m.clone();
        let rep = rotate(&mut m, &SbRotationOptions::default());
        assert!(rep.makespan_before > rep.makespan_unlimited);
        assert_eq!(rep.makespan_after, rep.makespan_unlimited);
        assert_eq!(rep.rest, Some(u32::MAX));
        assert_eq!(rep.tried, 0, "no single move was needed");
        assert_eq!((rep.peak_before, rep.peak_after), (1536, 1536));
        let at = |t| m.mems().offset[t];
        assert_eq!((at(t0), at(a), at(b)), (512, 1024, 512));
        assert_eq!(rep.moved, 1);
        assert_placed_legally("rest-fit", &m);
        assert_sound(&before, &m);
    }

    #[test]
    fn a_load_waiting_for_reused_cells_moves_when_the_headroom_allows() {
        let before = shared_load(true);
        let mut m = before.clone();
        let opts = SbRotationOptions {
            headroom_pct: 50,
            ..SbRotationOptions::default()
        };
        let rep = rotate(&mut m, &opts);
        assert!(rep.makespan_before > rep.makespan_unlimited);
        assert_eq!(rep.makespan_after, rep.makespan_unlimited);
        assert_eq!((rep.movable, rep.moved), (2, 1));
        // The lowest gap free of `a` and of the outputs live with `b`.
        let b = m.mem_by_name("b").unwrap();
        assert_eq!(m.mems().offset[b], 1536);
        assert_eq!(
            (rep.peak_before, rep.peak_after, rep.limit),
            (1536, 2048, 2304)
        );
        assert_eq!(rep.probe, None);
        assert_placed_legally("rotated", &m);
        assert_sound(&before, &m);
    }

    #[test]
    fn within_the_default_headroom_nothing_moves_and_the_probe_says_what_it_would_need() {
        let before = shared_load(true);
        let mut m = before.clone();
        let rep = rotate(&mut m, &SbRotationOptions::default());
        assert_eq!(rep.moved, 0);
        assert_eq!(rep.limit, 1536 + 1536 * 5 / 100);
        assert_eq!(rep.makespan_after, rep.makespan_before);
        let p = rep.probe.expect("the probe ran");
        assert_eq!(
            (p.peak, p.makespan, p.moves),
            (2048, rep.makespan_unlimited, 1)
        );
        // The probe's moves are undone: the placement is the input's.
        for v in before.mems().space.keys() {
            assert_eq!(m.mems().offset[v], before.mems().offset[v]);
        }
    }

    #[test]
    fn the_headroom_is_over_the_peak_before_chains_were_joined() {
        // Joined chains raised the peak from 1,200 B to 1,536 B: past the
        // 5% over 1,200 already, so nothing may grow the peak further.
        let opts = SbRotationOptions::default();
        for (plain, limit) in [(None, 1612), (Some(1536), 1612), (Some(1200), 1536)] {
            let mut m = shared_load(true);
            let rep = rotate_over(&mut m, plain, &opts);
            assert_eq!(rep.limit, limit, "plain peak {plain:?}");
            assert!(sb_peak(&m) <= limit);
        }
    }

    #[test]
    fn only_the_in_place_hand_offs_taken_stay() {
        // Two in-place activations: `o1` over `i1`, which dies at it (the
        // hand-off taken: neither moves); `o2` beside `i2` (not taken: both
        // move like any tile written first).
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [i1, o1, i2, o2] = tiles(&mut bl, Space::Sb, ["i1", "o1", "i2", "o2"], 128, 512, 4);
        let out = mem(&mut bl, "out", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
        bl.func("f").unwrap();
        for (i, o) in [(i1, o1), (i2, o2)] {
            let full = bl.full(i);
            bl.op(Opcode::Memset, &[full], &[]).unwrap();
            bl.compute(Opcode::Activation, SubOp::Exp, o, &[i], InstFlags::IN_PLACE)
                .unwrap();
            exp(&mut bl, out, o);
        }
        for (x, off) in [(i1, 0), (o1, 0), (i2, 0), (o2, 512), (out, 1024)] {
            m.place(x, 0, off);
        }
        let (rot, _, _) = marked(&m, &[], &SbRotationOptions::default());
        let movable: Vec<bool> = [i1, o1, i2, o2].map(|x| rot.movable[x.index()]).into();
        assert_eq!(movable, [false, false, true, true]);
    }

    #[test]
    fn a_coalescing_pair_side_by_side_stays_and_holds_its_cells_over_both_lives() {
        // `a` and `b` abut (a coalescing pair); `b` dies before `a`, and
        // `t` lives in between. Merged, the load writes both tiles' cells
        // at once and they are held until `a` dies: unless another tile
        // already sits there (`t` in `b`'s cells), when the DMA passes
        // refuse the merge anyway and `b` holds only its own life.
        for t_at in [1536, 512] {
            let mut m = Module::new(Target::default());
            let mut bl = Builder::new(&mut m);
            let [x, _] = dram_io(&mut bl, 128, 512, 4);
            let [a, b, t] = tiles(&mut bl, Space::Sb, ["a", "b", "t"], 128, 512, 4);
            let o = mem(&mut bl, "o", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
            bl.func("f").unwrap();
            bl.load(a, x, 0).unwrap();
            bl.load(b, x, 0).unwrap();
            exp(&mut bl, o, b);
            let full = bl.full(t);
            bl.op(Opcode::Memset, &[full], &[]).unwrap();
            exp(&mut bl, o, t);
            exp(&mut bl, o, a);
            for (x, off) in [(a, 0), (b, 512), (t, t_at), (o, 1024)] {
                m.place(x, 0, off);
            }
            assert_placed_legally("given", &m);
            let pair = AffinityPair {
                first: a,
                second: b,
                nest: None,
            };
            let (rot, live, movable) = marked(&m, &[pair], &SbRotationOptions::default());
            assert_eq!(movable, 1, "only `t` moves");
            let (la, lb) = (live.interval(a).unwrap(), live.interval(b).unwrap());
            let hull = Interval {
                start: la.start.min(lb.start),
                end: la.end.max(lb.end),
            };
            assert_eq!(rot.hold[a.index()], Some(hull));
            let b_holds = if t_at == 512 { lb } else { hull };
            assert_eq!(rot.hold[b.index()], Some(b_holds), "`t` at {t_at}");
        }
    }

    #[test]
    fn settling_lowers_a_probe_move_to_the_lowest_start_that_keeps_its_gain() {
        // The probe took the highest gap for `b` (8192): its gain needs
        // cells clear of `a`'s (the wait) and of the outputs live with `b`
        // (512..1536); settled, `b` sits right above them.
        let mut m = shared_load(true);
        let b = m.mem_by_name("b").unwrap();
        m.place(b, 0, 8192);
        let opts = SbRotationOptions::default();
        let (mut rot, live, _) = marked(&m, &[], &opts);
        let high = rot.schedule.run(&m, &opts.schedule);
        assert_eq!(high.makespan, high.makespan_unlimited);
        rot.undo.push((b, 0));
        rot.settle(&mut m, &live, &opts, high.makespan);
        assert_eq!(m.mems().offset[b], 1536);
        assert_eq!(rot.schedule.run(&m, &opts.schedule).makespan, high.makespan);
        assert_placed_legally("settled", &m);
    }

    #[test]
    fn outputs_pinned_tiles_and_tiles_first_read_stay() {
        // `w` is cleared and dies; `r`, in `w`'s cells, is first read: it
        // relies on what `w` left there, so neither moves. `p` is pinned,
        // `o` an output; `t` is written first and moves.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [w, r, t] = tiles(&mut bl, Space::Sb, ["w", "r", "t"], 128, 512, 4);
        let p = mem(&mut bl, "p", Space::Sb, 128, 512, 4, MemFlags::PINNED);
        let o = mem(&mut bl, "o", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
        bl.func("f").unwrap();
        for x in [w, p, t] {
            let full = bl.full(x);
            bl.op(Opcode::Memset, &[full], &[]).unwrap();
        }
        exp(&mut bl, o, w);
        exp(&mut bl, o, r);
        exp(&mut bl, o, p);
        exp(&mut bl, o, t);
        for (x, off) in [(w, 0), (r, 0), (t, 512), (p, 1024), (o, 1536)] {
            m.place(x, 0, off);
        }
        let (rot, _, movable) = marked(&m, &[], &SbRotationOptions::default());
        assert_eq!(movable, 1);
        let movable: Vec<bool> = [w, r, t, p, o].map(|x| rot.movable[x.index()]).into();
        assert_eq!(movable, [false, false, true, false, false]);
    }
}
