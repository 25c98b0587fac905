//! Spill-at-interval: the records a spill leaves, the failure log, and the
//! rewrite that materializes the spills at the end of the scan (the
//! reference's `addSpillInstsCanread`).
//!
//! A spill of tensor `V` at position `p` (where tensor `O` found no room):
//! - a `save` (flag SPILL) of the bytes `V`'s remaining reads touch, into a
//!   DRAM spill slot shaped like `V`, right after the write that defines the
//!   value those reads see. A spilled reload copy needs no store: its slot
//!   already holds the value;
//! - a `load` (flag RELOAD) of those bytes into a new, smaller location
//!   `<V>_ReloadStore<N>_ShrinkedCopy` just before `V`'s next access;
//! - every later read of `V` re-pointed to the copy (partition and byte
//!   offsets rebased onto it).
//!
//! The scan only *records* spills; positions stay those of the original
//! program while it runs, and [`finalize`] inserts the instructions and
//! re-points the readers afterwards, in record order.
//!
//! A *rematerialization* is a spill whose value needs no slot ([`Remat`],
//! found by [`remat_from`], shared by both allocators), in two kinds:
//! - a reload from DRAM: the last write before the reload is a `load` that
//!   fills all of the tensor from a DRAM rectangle (all of a location, or
//!   a block of its rows and columns) that nothing writes from that load
//!   to the reload (loops around either included), so the reload reads
//!   that rectangle again and no store is inserted. The dataflow checker
//!   sees the reload as a read of those DRAM bytes: had they been written
//!   in between, the reload's value would differ from the input's;
//! - a recompute: the last write is a `memset` that fills all of the
//!   tensor, and the "reload" sets the copy to the same constant again,
//!   on an engine, with no DMA at all. The dataflow checker names a
//!   memset's bytes by their constant, so it proves the copy holds what
//!   the original's readers saw;
//! - a copy again: the last write is a `tensor_copy` of all of the tensor
//!   from a rectangle of an on-chip location that nothing writes from that
//!   copy to the reload, and that is still accessed at or after the
//!   reload (so it is resident there): the reload copies it again on an
//!   engine. The allocator keeps the source resident up to the reload (the
//!   scan does not evict it there; a split round does not split it beside
//!   the copy) and [`finalize`] reads it where its value is then (a reload
//!   copy of it, when it was split earlier).
//!
//! Spill slots are created in DRAM and placed by a bump pointer above every
//! DRAM location placed before the scan (each slot lives for the whole
//! program, so no two share bytes). A DRAM allocator that runs later (the
//! reference runs `coloring_allocator_dram_debug` after the LSA at optlevel
//! 8) sees them as placed obstacles.

use core::fmt;

use crate::analysis::{LinearOrder, MemLiveness};
use crate::ir::DisplayNamed;
use arrayvec::ArrayVec;

use crate::ir::{
    full_ap, slice_ap, Ap, ApExt, DType, Inst, InstFlags, InstSpec, IrError, IvTerm, Loop,
    MemFlags, MemLoc, MemSpec, Module, Opcode, Space, MAX_IV_TERMS,
};

/// Entries kept in the failure log; further failures are only counted.
pub const LOG_CAPACITY: usize = 32;
/// Candidates kept per failure entry.
pub const LOG_CANDIDATES: usize = 8;

/// One spill decision.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SpillRecord {
    /// The tensor the scan evicted (an original or an earlier copy).
    pub victim: MemLoc,
    /// The original tensor whose value it holds.
    pub origin: MemLoc,
    /// The DRAM slot holding the value.
    pub slot: MemLoc,
    /// The reload copy.
    pub copy: MemLoc,
    /// Position after which the store goes, or `u32::MAX` when the slot is
    /// already written (a copy was spilled).
    pub store_after: u32,
    /// Position before which the reload goes (the next access, or the
    /// start of the loop that holds it: see `reload_point`).
    pub reload_before: u32,
    /// True when `reload_before` starts a loop the reload is hoisted out
    /// of: the reload then goes after the instruction before it, outside
    /// that loop, and runs once rather than in every iteration.
    pub reload_hoisted: bool,
    /// First partition of the origin the copy covers.
    pub part_start: u16,
    /// Partitions the copy covers.
    pub part_count: u16,
    /// First byte of the origin the copy covers.
    pub byte_lo: u32,
    /// One past the last byte.
    pub byte_hi: u32,
    /// A rematerialization: no store; the reload reads the DRAM the value
    /// was loaded from again (`slot` is that location, and the origin's
    /// first cell lies at the [`RematSource`]'s corner of it, so that the
    /// reload of the origin's cells reads the bytes the load put there), or
    /// sets the copy with the memset that made the value (`slot` is
    /// [`MemLoc::INVALID`]). `None` for a spill slot, shaped like the
    /// origin.
    pub remat: Option<Remat>,
    /// The tensor that found no room.
    pub failed: MemLoc,
    /// Position of the failure.
    pub at: u32,
    /// For a per-iteration slice reload (a slice split): the loop terms
    /// that move the slice read from the slot, taken off the re-pointed
    /// accesses, and where the slice is saved back; the store then saves
    /// all of the victim. `None` for a plain reload.
    pub slice: Option<SliceTerms>,
}

/// Most loop terms a per-iteration slice reload carries (those of the
/// sliced loop and the loops around it that the victim's accesses move
/// with).
pub const SLICE_TERMS: usize = 4;

/// The loop terms of a per-iteration slice reload (see
/// [`SpillRecord::slice`]): fixed-capacity, so that a record stays `Copy`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SliceTerms {
    len: u8,
    terms: [IvTerm; SLICE_TERMS],
    /// Position after which each iteration saves its slice back to the
    /// slot (the last write of the victim in the loop), or `u32::MAX` when
    /// the loop only reads it.
    pub write_back_after: u32,
}

impl SliceTerms {
    const NONE: IvTerm = IvTerm::affine(Loop::INVALID, 0, 0);

    /// No term: a slice that does not move.
    pub const fn empty() -> Self {
        SliceTerms {
            len: 0,
            terms: [Self::NONE; SLICE_TERMS],
            write_back_after: u32::MAX,
        }
    }

    /// The terms.
    pub fn as_slice(&self) -> &[IvTerm] {
        self.terms.get(..self.len as usize).unwrap_or(&[])
    }

    /// Adds a term; false when full.
    fn push(&mut self, t: IvTerm) -> bool {
        match self.terms.get_mut(self.len as usize) {
            Some(slot) => {
                *slot = t;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// True when `l` is one of the terms' loops.
    fn moves_with(&self, l: Loop) -> bool {
        self.as_slice().iter().any(|t| t.lp == l)
    }
}

impl SpillRecord {
    /// A plain record that moves all of `v` (victim and origin) through
    /// `slot` into `copy`, reloaded at `reload`, for a split at `at`.
    #[allow(clippy::too_many_arguments)]
    pub fn whole(
        m: &Module,
        v: MemLoc,
        slot: MemLoc,
        copy: MemLoc,
        store_after: u32,
        reload: ReloadPoint,
        remat: Option<Remat>,
        at: u32,
    ) -> Self {
        SpillRecord {
            victim: v,
            origin: v,
            slot,
            copy,
            store_after,
            reload_before: reload.before,
            reload_hoisted: reload.hoisted,
            part_start: 0,
            part_count: m.mems().partitions[v],
            byte_lo: 0,
            byte_hi: m.mems().bytes[v],
            remat,
            failed: MemLoc::INVALID,
            at,
            slice: None,
        }
    }

    /// Where the origin's first cell lies in `slot`: its row and byte (the
    /// corner of a rematerialized load's rectangle; zero in a spill slot).
    fn slot_corner(&self) -> (u16, u32) {
        self.remat
            .and_then(Remat::source)
            .map_or((0, 0), |src| (src.part, src.byte))
    }

    /// Bytes one DMA of this spill moves.
    pub fn bytes(&self) -> u64 {
        self.part_count as u64 * (self.byte_hi - self.byte_lo) as u64
    }
}

/// One placement failure and the ranked candidates at that moment.
#[derive(Clone, Debug)]
pub struct FailureEntry {
    /// The tensor that did not fit.
    pub tensor: MemLoc,
    /// Its space.
    pub space: Option<Space>,
    /// Position in program order.
    pub position: u32,
    /// Active intervals, head (first spill choice) first.
    pub candidates: heapless::Vec<MemLoc, LOG_CANDIDATES>,
    /// Active intervals in all (may exceed the kept candidates).
    pub active: u32,
}

/// The fixed-capacity log of placement failures ("Failed to allocate …").
#[derive(Clone, Debug, Default)]
pub struct SpillLog {
    /// The first `LOG_CAPACITY` (32) failures.
    pub entries: heapless::Vec<FailureEntry, LOG_CAPACITY>,
    /// Failures not kept because the log was full.
    pub dropped: u32,
}

impl SpillLog {
    /// Forgets everything.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.dropped = 0;
    }

    /// Records a failure.
    pub fn push(&mut self, e: FailureEntry) {
        if self.entries.push(e).is_err() {
            self.dropped += 1;
        }
    }
}

crate::ir::display_named!(SpillLogDisplay for SpillLog);

/// The log as text, names resolved through `m`.
impl DisplayNamed for SpillLog {
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.entries {
            let space = e.space.map_or("?", |s| s.upper());
            writeln!(
                f,
                "Failed to allocate %{} in {space} at position {}; {} live, spill candidates:",
                m.mem_name(e.tensor),
                e.position,
                e.active
            )?;
            for (i, c) in e.candidates.iter().enumerate() {
                writeln!(f, "  {i}: %{} ({space})", m.mem_name(*c))?;
            }
        }
        if self.dropped > 0 {
            writeln!(f, "({} more failures not logged)", self.dropped)?;
        }
        Ok(())
    }
}

/// What every spill decision of this file reads: the module, its linear
/// order, and the accesses of its locations in that order. The queries
/// that need all three take it as one argument; it is a view (three
/// shared borrows, `Copy`), so a caller builds it where it asks and is free
/// to mutate the module between questions.
#[derive(Copy, Clone, Debug)]
pub struct SpillView<'a> {
    /// The module whose locations are split.
    pub m: &'a Module,
    /// Its instructions in linear order, with their loops.
    pub order: &'a LinearOrder,
    /// Each location's accesses, as positions of `order`.
    pub live: &'a MemLiveness,
}

impl<'a> SpillView<'a> {
    /// The view of `m` under `order` and `live` (both of `m` as it is).
    pub fn new(m: &'a Module, order: &'a LinearOrder, live: &'a MemLiveness) -> Self {
        SpillView { m, order, live }
    }
}

/// The span `[start, end]` of the outermost loop around position `at`, or
/// `(at, at)` outside loops.
pub fn outer_loop_span(m: &Module, order: &LinearOrder, at: u32) -> (u32, u32) {
    let mut l = order.loop_at(at);
    let mut span = (at, at);
    while l.is_valid() {
        if let Some((s, e)) = order.loop_span(l) {
            span = (s.min(span.0), e.max(span.1));
        }
        l = m.loops().parent[l];
    }
    span
}

/// May `v` be split around position `at` — freed there, its value kept in
/// a slot (or its DRAM source) and reloaded before its next access — with
/// respect to the loops around `at`? Positions are linear, but a loop runs
/// its body again after its end, so for every loop `L` around `at` one of:
/// - `v` is not accessed in `L` before `at` and not written anywhere in
///   `L`: every iteration reaches `at` with `v`'s value unchanged, and a
///   reload inside `L` (per iteration) reads the same value each time;
/// - `v` is local to an iteration of `L`: its first access in `L` writes
///   all of it without reading it — one instruction, or a strip loop
///   inside `L` that tiles it (see [`tiling_nest`]) — so no value of `v`
///   crosses `L`'s back edge; then the store after the last write before
///   `at` and the reload before the next access run in the same iteration
///   (or the reload once after `L`, reading the last iteration's store).
///   `v` must not be accessed before `L`, unless the split needs no store
///   and no reload: `L` surely runs (a known trip count of at least one),
///   so a value from before `L` is dead in it, and the next access after
///   `at` writes all of `v` without reading it ([`Remat::Overwritten`]),
///   so the value at `at` is dead too. (Stored splits there are not
///   offered: on generated modules they kept the colorer's rounds from
///   converging.)
///
/// Otherwise a value would go around a back edge in freed space (or a
/// per-iteration reload would overwrite what an iteration wrote).
pub fn loop_split_ok(cx: SpillView<'_>, v: MemLoc, at: u32) -> bool {
    let SpillView { m, order, live } = cx;
    let acc = live.accesses(v);
    let next = acc.get(acc.partition_point(|&q| q <= at));
    let dead = next.is_some_and(|&q| fully_defines(m, order, v, q));
    let mut l = order.loop_at(at);
    while l.is_valid() {
        if let Some((s, e)) = order.repeating_span(m, l) {
            let first_in = acc.partition_point(|&q| q < s);
            let accessed_before = first_in < acc.len() && acc[first_in] < at;
            let trip = m.loops().trip[l];
            let runs = trip != crate::ir::UNKNOWN_TRIP && trip >= 1;
            let ok = if accessed_before {
                (first_in == 0 || runs && dead) && defines_in(m, order, v, acc[first_in], l)
            } else {
                // Not accessed in `L` before `at`: its next access, when in
                // `L`, is its first there, and one that overwrites it all
                // in a loop that surely runs leaves no value around the
                // back edge either.
                (runs && dead)
                    || !acc
                        .iter()
                        .zip(live.access_writes(v))
                        .any(|(&q, w)| w && s <= q && q <= e)
            };
            if !ok {
                return false;
            }
        }
        l = m.loops().parent[l];
    }
    true
}

/// Where the reload of `v`, split around `at`, goes given its next access
/// `next`: before `next`, unless a loop that holds `next` but not `at`
/// carries `v` around its back edge (writes it, and an iteration does not
/// start by writing all of it, by one instruction or a strip loop) — a reload in every iteration of that loop
/// would overwrite what an iteration wrote — and then at the start of the outermost such
/// loop, hoisted out of it (after the instruction before it: see
/// [`SpillRecord::reload_hoisted`]), so that inside it the copy carries the
/// value around the back edge as `v` did. Nothing accesses `v` between
/// `at` and `next`. A loop that only reads `v` keeps the reload before
/// `next`: the copy is then live only from there (hoisting it would hold
/// the copy over the rest of the loop, where the pressure may be higher);
/// the cost rank counts the reload once per iteration.
pub fn reload_point(cx: SpillView<'_>, v: MemLoc, at: u32, next: u32) -> ReloadPoint {
    let SpillView { m, order, live } = cx;
    let mut point = ReloadPoint {
        before: next,
        hoisted: false,
    };
    let acc = live.accesses(v);
    let mut l = order.loop_at(next);
    while l.is_valid() {
        match order.loop_span(l) {
            Some((s, e)) if s <= at && at <= e => break,
            Some((s, e)) if s > 0 && m.loops().trip[l] != 1 => {
                let written = acc
                    .iter()
                    .zip(live.access_writes(v))
                    .any(|(&q, w)| w && s <= q && q <= e);
                // An iteration that starts by writing all of `v` does not
                // read what the previous one wrote: no value crosses.
                let first = acc[acc.partition_point(|&q| q < s)];
                if written && !defines_in(m, order, v, first, l) {
                    point = ReloadPoint {
                        before: s.min(point.before),
                        hoisted: true,
                    };
                }
            }
            _ => {}
        }
        l = m.loops().parent[l];
    }
    point
}

/// See [`reload_point`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ReloadPoint {
    /// The position the reload precedes ([`SpillRecord::reload_before`]).
    pub before: u32,
    /// It starts a loop the reload is hoisted out of
    /// ([`SpillRecord::reload_hoisted`]).
    pub hoisted: bool,
}

impl ReloadPoint {
    /// The position whose loops run the reload.
    pub fn runs_at(&self) -> u32 {
        if self.hoisted {
            self.before - 1
        } else {
            self.before
        }
    }
}

/// The rank of a spill candidate (higher first): Belady's rule — the
/// furthest next access `next` from the point `at` — times the bytes per
/// partition it frees, per DMA cycle the spill costs in the target's model
/// ([`reload_traffic`] and [`store_traffic`]: loop trip counts included,
/// no store for a rematerialization, an engine's time for a recompute).
/// Scaled so the integer ratio keeps its order.
#[allow(clippy::too_many_arguments)]
pub fn spill_score(
    cx: SpillView<'_>,
    v: MemLoc,
    bytes: u64,
    partitions: u16,
    store_after: u32,
    at: u32,
    next: u32,
) -> u64 {
    let SpillView { m, order, .. } = cx;
    let reload = reload_point(cx, v, at, next);
    let remat = remat_from(cx, v, next);
    let cells = partitions as u64 * bytes;
    let shape = (partitions as u64, bytes);
    let (_, mut cost) = reload_traffic(m, order, remat, v, shape, reload.runs_at());
    if remat.is_none() {
        cost = cost.saturating_add(store_traffic(m, order, cells, store_after).1);
    }
    let gain = bytes.saturating_mul(next.saturating_sub(at) as u64);
    gain.saturating_mul(1 << 20) / cost.max(1)
}

/// How many times the instruction at `pos` runs: the product of the trip
/// counts of the loops around it (saturating; an unknown one counts 1:
/// [`Module::counted_trip`]).
pub fn executions(m: &Module, order: &LinearOrder, pos: u32) -> u64 {
    let mut n = 1u64;
    let mut l = order.loop_at(pos);
    while l.is_valid() {
        n = n.saturating_mul(m.counted_trip(l).max(1));
        l = m.loops().parent[l];
    }
    n
}

/// The DMA cycles a spill of `bytes` (partitions × bytes) costs with the
/// target's model: the reload runs as often as the instruction at
/// `reload_at` ([`ReloadPoint::runs_at`]), the store (none for a
/// rematerialization) as often as the one at `store_after`.
pub fn spill_cost(
    m: &Module,
    order: &LinearOrder,
    bytes: u64,
    store_after: Option<u32>,
    reload_at: u32,
) -> u64 {
    let one = m.target.dma_cycles(bytes).max(1);
    one.saturating_mul(spill_runs(m, order, store_after, reload_at))
}

/// The bytes a reload of `parts` partitions × `per_part` bytes of `v`
/// moves and the cycles it costs as the program runs, as often as the
/// loops around `reload_at` ([`ReloadPoint::runs_at`]) run it: a DMA of
/// those bytes, or, for a recompute ([`Remat::Memset`]), no bytes moved
/// and the memset's engine time over the elements each partition gets
/// (the schedule model's cost, [`crate::Target::engine_cycles`]).
pub fn reload_traffic(
    m: &Module,
    order: &LinearOrder,
    remat: Option<Remat>,
    v: MemLoc,
    (parts, per_part): (u64, u64),
    reload_at: u32,
) -> (u64, u64) {
    let runs = executions(m, order, reload_at);
    let cells = parts.saturating_mul(per_part);
    let (moved, once) = match remat {
        Some(Remat::Memset(_)) => (0, set_cycles(m, per_part / (m.elem_size(v).max(1) as u64))),
        Some(Remat::Copy(_)) => (cells, m.target.copy_cycles(per_part).max(1)),
        Some(Remat::Overwritten) => (0, 0),
        _ => (cells, m.target.dma_cycles(cells).max(1)),
    };
    (moved.saturating_mul(runs), once.saturating_mul(runs))
}

/// The cycles one run of a spill instruction `i` that an allocator
/// inserted costs in the model the spill reports use: a DMA's
/// ([`crate::Target::dma_cycles`] of its bytes), an engine copy's between
/// on-chip locations ([`crate::Target::copy_cycles`] of its bytes per
/// partition) or a recompute's (a memset: the pool engine's time over its
/// elements per partition, as `reload_traffic` counts it).
pub fn inst_cycles(m: &Module, i: Inst) -> u64 {
    let out = m.outputs(i).next();
    let bytes = out.map_or(0, |a| m.ap_bytes(a));
    let parts = out.map_or(1, |a| u64::from(m.aps().part_count[a]).max(1));
    match m.insts().opcode[i] {
        Opcode::Memset => set_cycles(
            m,
            out.map_or(0, |a| {
                bytes / parts / u64::from(m.aps().elem_size[a].max(1))
            }),
        ),
        Opcode::TensorCopy => m.target.copy_cycles(bytes / parts),
        _ => m.target.dma_cycles(bytes),
    }
}

/// The cycles of a memset of `elems` elements per partition: its engine's
/// fixed cost and rate in the target (the schedule model's), at least one.
fn set_cycles(m: &Module, elems: u64) -> u64 {
    let engine = crate::analysis::engine_slot(Opcode::Memset.default_engine());
    m.target.engine_cycles(engine, elems).max(1)
}

/// How many DMAs a spill issues as the program runs: its reload, run by
/// the loops around position `reload_at` ([`ReloadPoint::runs_at`]), and
/// its store after `store_after`, if any.
pub fn spill_runs(
    m: &Module,
    order: &LinearOrder,
    store_after: Option<u32>,
    reload_at: u32,
) -> u64 {
    executions(m, order, reload_at)
        .saturating_add(store_after.map_or(0, |p| store_runs(m, order, p)))
}

/// The bytes and DMA cycles of the store of `bytes` (partitions × bytes)
/// after position `p`, as often as [`store_runs`] counts it: a store after
/// a strip of a tiling nest moves its strip per iteration, the whole tensor
/// per run of the nest, not the whole tensor per strip.
pub fn store_traffic(m: &Module, order: &LinearOrder, bytes: u64, p: u32) -> (u64, u64) {
    let runs = store_runs(m, order, p);
    (
        bytes.saturating_mul(runs),
        m.target.dma_cycles(bytes).max(1).saturating_mul(runs),
    )
}

/// How many times the store after position `p` runs, as DMAs of the whole
/// tensor: as often as `p` runs; after a strip of a [`tiling_nest`] (where
/// each iteration saves the strip it wrote: see [`finalize`]), as often as
/// the nest runs, since its strips together move the tensor once per run.
/// The model then counts one DMA's fixed cost per run rather than one per
/// strip.
pub fn store_runs(m: &Module, order: &LinearOrder, p: u32) -> u64 {
    let i = order.inst_at(p);
    let nest = i.is_valid().then(|| {
        m.outputs(i)
            .find_map(|o| tiling_nest(m, order, m.aps().loc[o], p))
    });
    match nest.flatten() {
        Some((nest, _)) => {
            let mut n = 1u64;
            let mut l = m.loops().parent[nest];
            while l.is_valid() {
                n = n.saturating_mul(m.counted_trip(l).max(1));
                l = m.loops().parent[l];
            }
            n
        }
        None => executions(m, order, p),
    }
}

/// A split of `v` around `at` inside the outermost loop there, for a `v`
/// that loop only reads but also reads before `at` in it (a loop-invariant
/// tile: weights, an identity, a bias column): the rule of
/// [`loop_split_ok`] refuses it, since the next iteration reads it again
/// before `at`. Instead `v`'s value goes to its slot once before the loop
/// (after its last write, or not at all for a rematerialization) and two
/// copies take its accesses in the loop: the *first* reloaded before its
/// first access in the loop (hoisted out of any loop there that does not
/// hold `at`), read up to `at`; the *second* reloaded before its next
/// access after `at`. Both are written before they are read in every
/// iteration, so neither crosses the loop's back edge, and neither is live
/// at `at`. Needs: no write of `v` in the loop; no access of `v` before
/// `at` in any loop inside it that holds `at` (the first copy would cross
/// that loop's back edge); a write of `v` before the loop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct InvariantSplit {
    /// Where the first copy's reload goes.
    pub first: ReloadPoint,
    /// The last write of `v` before the loop (the store goes after it).
    pub store_after: u32,
}

/// See [`InvariantSplit`]; `None` when it does not apply.
pub fn invariant_split(cx: SpillView<'_>, v: MemLoc, at: u32) -> Option<InvariantSplit> {
    let SpillView { m, order, live } = cx;
    let acc = live.accesses(v);
    let touched_before = |s: u32| {
        let k = acc.partition_point(|&q| q < s);
        k < acc.len() && acc[k] < at
    };
    // The outermost repeating loop around `at`; every inner one must not
    // touch `v` before `at`.
    let mut outer = None;
    let mut l = order.loop_at(at);
    while l.is_valid() {
        if let Some(span) = order.repeating_span(m, l) {
            if let Some((s, _)) = outer {
                if touched_before(s) {
                    return None;
                }
            }
            outer = Some(span);
        }
        l = m.loops().parent[l];
    }
    let (s, e) = outer?;
    if !touched_before(s) {
        return None; // the plain split applies
    }
    let written_in = acc
        .iter()
        .zip(live.access_writes(v))
        .any(|(&q, w)| w && s <= q && q <= e);
    if written_in {
        return None;
    }
    let k = acc.partition_point(|&q| q < s);
    let w = live.last_write_among(v, k)?;
    let f = acc[k];
    // Hoist the first reload out of the loops that hold `f` but not `at`.
    let mut first = ReloadPoint {
        before: f,
        hoisted: false,
    };
    let mut l = order.loop_at(f);
    while l.is_valid() {
        match order.loop_span(l) {
            Some((ls, le)) if ls <= at && at <= le => break,
            // Strictly inside the loop: a reload before it would make the
            // copy live over the whole loop.
            Some((ls, _)) if ls > s => {
                first = ReloadPoint {
                    before: ls,
                    hoisted: true,
                }
            }
            _ => {}
        }
        l = m.loops().parent[l];
    }
    Some(InvariantSplit {
        first,
        store_after: acc[w],
    })
}

/// A split of `v` into per-iteration slices of a loop `L` around the
/// pressure point, for a `v` that `L` accesses a part per iteration (a
/// strip of weights per output tile, a window per shift, an accumulator
/// tile per output block): tiles indexed by the loop's variable are used
/// one slice at a time, so only that slice need be on chip. `v`'s value goes to its slot once, after its last write
/// before `L` (or not at all for a rematerialization); a copy of one
/// iteration's slice is reloaded at the start of every iteration of `L`,
/// its source moved by the loop terms the accesses had, and those accesses
/// read it with the terms taken off. The copy is written before it is read
/// in every iteration, so it crosses no back edge; `v` is not live inside
/// `L`. When `L` also writes `v`, each iteration saves its slice back to
/// the slot after its last write of it, so the slot holds `v`'s value
/// between iterations and after `L`. An access after `L` gets a whole
/// reload before it (as a plain split's).
///
/// Needs: no access of `v` in `L` with a register term, and
/// all of them moved alike by the loops from `L` outwards (the slice of an
/// iteration is then the union of their cells with those terms off, at
/// most [`SLICE_TERMS`] terms); the slice narrower than `v`; a write of
/// `v` before `L`; and for every loop `P` around `L` that repeats, either
/// no access of `v` in `P` before `L` and no write in `P` (the slot keeps
/// the value every iteration of `P` reads), or `v` local to an iteration
/// of `P` (its first access in `P`, before `L`, writes all of it, by one
/// instruction or a strip loop: [`tiling_nest`]), and every write of `v`
/// in `L` writes the whole slice. When
/// `L` writes `v`, the slot carries what it wrote around `P`'s back edge:
/// then only writes outside `L` count.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SliceSplit {
    /// Positions `[start, end]` of `L`; the slice reload goes before
    /// `start`, in `L`.
    pub span: (u32, u32),
    /// The last write of `v` before `L` (the store goes after it).
    pub store_after: u32,
    /// The last access of `v` before `L`.
    pub before: u32,
    /// The first access of `v` after `L`, if any.
    pub after: Option<u32>,
    /// First partition of iteration 0's slice, relative to `v`.
    pub part_start: u16,
    /// Partitions of the slice.
    pub part_count: u16,
    /// First byte of the slice.
    pub byte_lo: u32,
    /// One past its last byte.
    pub byte_hi: u32,
    /// The loop terms that move the slice.
    pub terms: SliceTerms,
}

impl SliceSplit {
    /// Bytes per partition of the slice copy.
    pub fn slice_bytes(&self) -> u64 {
        (self.byte_hi - self.byte_lo) as u64
    }
}

/// See [`SliceSplit`]; `None` when it does not apply to `v` and loop `l`.
pub fn slice_split(cx: SpillView<'_>, v: MemLoc, l: Loop) -> Option<SliceSplit> {
    let SpillView { m, order, live } = cx;
    let (s, e) = order.repeating_span(m, l)?;
    let acc = live.accesses(v);
    let k0 = acc.partition_point(|&q| q < s);
    let k1 = acc.partition_point(|&q| q <= e);
    if k0 == 0 || k1 == k0 {
        return None;
    }
    let w = live.last_write_among(v, k0)?;
    // The last write in `L`, if it writes.
    let write_back_after = live
        .access_writes(v)
        .enumerate()
        .skip(k0)
        .take(k1 - k0)
        .filter(|&(_, w)| w)
        .last()
        .map_or(u32::MAX, |(k, _)| acc[k]);
    // `t` is `l` or a loop around it.
    let outward = |t: Loop| {
        let mut x = l;
        while x.is_valid() {
            if x == t {
                return true;
            }
            x = m.loops().parent[x];
        }
        false
    };
    let mut terms: Option<SliceTerms> = None;
    let (mut plo, mut phi, mut blo, mut bhi) = (i64::MAX, i64::MIN, i64::MAX, i64::MIN);
    for &p in acc.get(k0..k1)? {
        let i = order.inst_at(p);
        for a in m.all_aps(i).filter(|&a| m.aps().loc[a] == v) {
            let ext = m.ap_ext(a);
            // A slice moves with its loops' affine terms; one that wraps
            // (a buffered tile) would need its slots in the copy too.
            if ext.reg.is_some() || ext.terms.iter().any(|t| t.wraps()) {
                return None;
            }
            let mut own = SliceTerms::empty();
            for t in ext.terms.iter().filter(|t| outward(t.lp)) {
                if !own.push(*t) {
                    return None;
                }
            }
            match terms {
                None => terms = Some(own),
                Some(t) => {
                    let same =
                        t.len == own.len && t.as_slice().iter().all(|x| own.as_slice().contains(x));
                    if !same {
                        return None;
                    }
                }
            }
            let mut rest: ApExt = ext.clone();
            rest.terms.retain(|t| !outward(t.lp));
            let x = m.ap_extent_with(a, &rest);
            if x.flat {
                return None;
            }
            plo = plo.min(x.part_lo);
            phi = phi.max(x.part_hi);
            blo = blo.min(x.byte_lo);
            bhi = bhi.max(x.byte_hi);
        }
    }
    let mut terms = terms?;
    terms.write_back_after = write_back_after;
    if plo < 0 || blo < 0 || phi <= plo || bhi <= blo || bhi - blo >= m.mems().bytes[v] as i64 {
        return None;
    }
    // Every write of `v` in `L` writes the whole slice (with the slice's
    // terms off): a copy written in part and read back (by its write-back)
    // keeps earlier bytes, so the liveness rule would carry it over every
    // loop around the write, where `v`'s own space is reused.
    for &p in acc.get(k0..k1)? {
        let i = order.inst_at(p);
        for a in m.outputs(i).filter(|&a| m.aps().loc[a] == v) {
            let mut rest: ApExt = m.ap_ext(a).clone();
            rest.terms.retain(|t| !outward(t.lp));
            let x = m.ap_extent_with(a, &rest);
            let whole = (x.part_lo, x.part_hi, x.byte_lo, x.byte_hi) == (plo, phi, blo, bhi);
            if !rest.terms.is_empty() || !m.is_contiguous(a) || !whole {
                return None;
            }
        }
    }
    // The loops around `l`: the slot must hold the value each of their
    // iterations reads in `l`.
    let mut p = m.loops().parent[l];
    while p.is_valid() {
        if let Some((ps, pe)) = order.repeating_span(m, p) {
            let kin = acc.partition_point(|&q| q < ps);
            let kout = acc.partition_point(|&q| q <= pe);
            // Writes of `v` in `P` outside `L` (the slot holds what `L`
            // writes).
            let written = live
                .access_writes(v)
                .enumerate()
                .skip(kin)
                .take(kout - kin)
                .any(|(k, w)| w && !(k0..k1).contains(&k));
            let local = kin < k0 && defines_in(m, order, v, acc[kin], p);
            let ok = local || (!written && kin == k0);
            if !ok {
                return None;
            }
        }
        p = m.loops().parent[p];
    }
    Some(SliceSplit {
        span: (s, e),
        store_after: acc[w],
        before: acc[k0 - 1],
        after: acc.get(k1).copied(),
        part_start: u16::try_from(plo).ok()?,
        part_count: u16::try_from(phi - plo).ok()?,
        byte_lo: u32::try_from(blo).ok()?,
        byte_hi: u32::try_from(bhi).ok()?,
        terms,
    })
}

/// The last position at which the slice copy of `split` is live in an
/// iteration of its loop, given its last access `last` there: `last`, or
/// the end of the outermost repeating loop inside the split's loop that
/// holds `last`. The copy is reloaded at the start of the iteration, so a
/// loop inside that reads it reads it again around its back edge
/// (docs/SEMANTICS.md §1): the copy is live over all of that loop.
pub fn slice_live_end(m: &Module, order: &LinearOrder, split: &SliceSplit, last: u32) -> u32 {
    let mut end = last;
    let mut l = order.loop_at(last);
    while l.is_valid() {
        match order.repeating_span(m, l) {
            Some(span) if span == split.span => break,
            Some((s, e)) if split.span.0 <= s && e <= split.span.1 => end = end.max(e),
            _ => {}
        }
        l = m.loops().parent[l];
    }
    end
}

/// The rematerialization a slice split of `v` uses instead of a slot, if
/// any: one that serves its slice reloads and its whole reload after the
/// loop, of a loop that only reads `v`. A loop that writes `v` saves its slices
/// back: into a slot of its own, never into the DRAM it was loaded from.
pub fn slice_remat(cx: SpillView<'_>, v: MemLoc, split: &SliceSplit) -> Option<Remat> {
    if split.terms.write_back_after != u32::MAX {
        return None;
    }
    let src = remat_from(cx, v, split.span.0)?;
    match split.after {
        Some(after) => (remat_from(cx, v, after) == Some(src)).then_some(src),
        None => Some(src),
    }
}

/// The cycles and bytes a slice split of `v` around `at` moves as the
/// program runs, rematerialized by `remat` (its [`slice_remat`], or none):
/// its store of all of `v` (none for a rematerialization), a slice reload
/// per execution of the loop's first instruction (and a slice saved back
/// per execution of its last write in the loop), and the whole reload
/// before its next access after the loop, if any ([`reload_traffic`]).
pub fn slice_traffic(
    cx: SpillView<'_>,
    v: MemLoc,
    at: u32,
    split: &SliceSplit,
    remat: Option<Remat>,
) -> (u64, u64) {
    let SpillView { m, order, .. } = cx;
    let whole = m.mems().partitions[v] as u64 * m.mems().bytes[v] as u64;
    let whole_shape = (m.mems().partitions[v] as u64, m.mems().bytes[v] as u64);
    let slice = split.part_count as u64 * split.slice_bytes();
    let store = remat.is_none().then_some(split.store_after);
    let slice_shape = (split.part_count as u64, split.slice_bytes());
    let (mut moved, mut cycles) = reload_traffic(m, order, remat, v, slice_shape, split.span.0);
    let back = split.terms.write_back_after;
    if back != u32::MAX {
        cycles = cycles.saturating_add(spill_cost(m, order, slice, None, back));
        moved = moved.saturating_add(slice * spill_runs(m, order, None, back));
    }
    if let Some(p) = store {
        let (bytes, dma) = store_traffic(m, order, whole, p);
        moved = moved.saturating_add(bytes);
        cycles = cycles.saturating_add(dma);
    }
    if let Some(after) = split.after {
        let reload = reload_point(cx, v, at, after);
        let (b, c) = reload_traffic(m, order, remat, v, whole_shape, reload.runs_at());
        moved = moved.saturating_add(b);
        cycles = cycles.saturating_add(c);
    }
    (cycles, moved)
}

/// The best slice split of `v` ([`slice_split`]) over the loops around
/// `at`, and over the loops that hold `v`'s next access after `at` but not
/// `at` itself when every repeating loop around `at` holds them too or
/// does not access `v` (`v` is then not accessed between `at` and such a
/// loop: it leaves at `at` and only its slices come back in that loop),
/// with its rank: the bytes per partition it frees at `at` (`v`'s less its
/// slice's when the loop holds `at`) times the distance to `v`'s next whole use (its next access
/// after the loop, or the end of its interval `end`), per DMA cycle of
/// [`slice_traffic`] (the bytes freed alone with `by_bytes`, optlevel 0's
/// rank). An inner loop gives a smaller slice reloaded more often; the
/// rank weighs the two. A split whose whole reload would run inside the
/// loop (hoisted to just after its last instruction) is refused: it would
/// bring `v` back into every iteration (and precede the iteration's
/// write-back, which goes after the same instruction). Only splits
/// `accept` takes are ranked.
#[allow(clippy::too_many_arguments)]
pub fn best_slice_split(
    cx: SpillView<'_>,
    v: MemLoc,
    at: u32,
    end: u32,
    by_bytes: bool,
    accept: impl Fn(&SliceSplit) -> bool,
) -> Option<(u64, SliceSplit)> {
    let SpillView { m, order, live } = cx;
    let bytes = m.mems().bytes[v] as u64;
    let mut best: Option<(u64, SliceSplit)> = None;
    let acc = live.accesses(v);
    let next = acc.get(acc.partition_point(|&q| q <= at)).copied();
    // Every repeating loop around `at` holds the later loop `(s, e)` or
    // does not access `v`: one that ends before the later loop starts runs
    // all its iterations while `v` waits in its slot, so an access of `v`
    // in it would find `v` gone in the next iteration.
    let inside_at_loops = |s: u32, e: u32| {
        let mut l = order.loop_at(at);
        while l.is_valid() {
            if let Some((ls, le)) = order.repeating_span(m, l) {
                let k = acc.partition_point(|&q| q < ls);
                let touches = acc.get(k).is_some_and(|&q| q <= le);
                if !(ls <= s && e <= le) && touches {
                    return false;
                }
            }
            l = m.loops().parent[l];
        }
        true
    };
    let starts = [Some(at), next];
    for (k, from) in starts.iter().enumerate() {
        let Some(from) = *from else { continue };
        let mut l = order.loop_at(from);
        while l.is_valid() {
            let span = order.loop_span(l);
            let holds_at = span.is_some_and(|(s, e)| s <= at && at <= e);
            if k == 1 && holds_at {
                break; // tried from `at`
            }
            let later_ok = holds_at || span.is_some_and(|(s, e)| inside_at_loops(s, e));
            let split = slice_split(cx, v, l).filter(|sp| {
                later_ok
                    && accept(sp)
                    && sp.after.map_or(true, |after| {
                        let r = reload_point(cx, v, at, after).runs_at();
                        !(sp.span.0..=sp.span.1).contains(&r)
                    })
            });
            if let Some(split) = split {
                let (cost, _) = slice_traffic(cx, v, at, &split, slice_remat(cx, v, &split));
                let freed = if holds_at {
                    bytes - split.slice_bytes()
                } else {
                    bytes
                };
                let next = split.after.unwrap_or(end.saturating_add(1));
                let score = if by_bytes {
                    freed
                } else {
                    freed
                        .saturating_mul(next.saturating_sub(at) as u64)
                        .saturating_mul(1 << 20)
                        / cost.max(1)
                };
                if best.as_ref().map_or(true, |b| score > b.0) {
                    best = Some((score, split));
                }
            }
            l = m.loops().parent[l];
        }
    }
    best
}

/// The rank of an [`InvariantSplit`] of `v` around `at`, next accessed at
/// `after`, on [`spill_score`]'s scale: the bytes per partition it frees
/// times the distance to `after`, per DMA cycle of the store (none for a
/// rematerialization) and of both copies' reloads, each as often as its
/// loops run it.
pub fn invariant_score(
    cx: SpillView<'_>,
    v: MemLoc,
    at: u32,
    after: u32,
    split: &InvariantSplit,
) -> u64 {
    let SpillView { m, order, .. } = cx;
    let bytes = m.mems().bytes[v] as u64;
    let shape = (m.mems().partitions[v] as u64, bytes);
    let moved = shape.0 * bytes;
    let reload = reload_point(cx, v, at, after);
    let remat = invariant_remat(cx, v, after);
    let mut cost = reload_traffic(m, order, remat, v, shape, reload.runs_at()).1;
    cost = cost.saturating_add(reload_traffic(m, order, remat, v, shape, split.first.runs_at()).1);
    if remat.is_none() {
        cost = cost.saturating_add(store_traffic(m, order, moved, split.store_after).1);
    }
    let gain = bytes.saturating_mul(after.saturating_sub(at) as u64);
    gain.saturating_mul(1 << 20) / cost.max(1)
}

impl SpillRecord {
    /// The bytes and DMA cycles this record's instructions move as the
    /// program runs, each as often as the loops around it run it: the
    /// store (all of the victim for a slice record, else the record's
    /// cells), the reload, and a slice record's write-back. `order` is the
    /// order the record's positions refer to.
    pub fn traffic(&self, m: &Module, order: &LinearOrder) -> (u64, u64) {
        let part = self.bytes();
        let reload = ReloadPoint {
            before: self.reload_before,
            hoisted: self.reload_hoisted,
        };
        let shape = (self.part_count as u64, (self.byte_hi - self.byte_lo) as u64);
        let (mut moved, mut cycles) =
            reload_traffic(m, order, self.remat, self.origin, shape, reload.runs_at());
        if self.store_after != u32::MAX {
            let whole =
                m.mems().partitions[self.victim] as u64 * m.mems().bytes[self.victim] as u64;
            let nest = tiling_nest(m, order, self.victim, self.store_after).is_some();
            let stored = match self.slice {
                Some(_) => whole,
                None if nest => whole,
                None => part,
            };
            let (bytes, dma) = store_traffic(m, order, stored, self.store_after);
            moved = moved.saturating_add(bytes);
            cycles = cycles.saturating_add(dma);
        }
        if let Some(t) = self.slice.filter(|t| t.write_back_after != u32::MAX) {
            let back = t.write_back_after;
            moved = moved.saturating_add(part.saturating_mul(spill_runs(m, order, None, back)));
            cycles = cycles.saturating_add(spill_cost(m, order, part, None, back));
        }
        (moved, cycles)
    }
}

/// True when the instruction at `pos` writes all of `v` through one plain
/// pattern and does not read it.
fn fully_defines(m: &Module, order: &LinearOrder, v: MemLoc, pos: u32) -> bool {
    let i = order.inst_at(pos);
    i.is_valid()
        && m.outputs(i)
            .any(|o| m.aps().loc[o] == v && m.is_full_access(o))
        && !m.inputs(i).any(|a| m.aps().loc[a] == v)
}

/// The loop nest in which the instruction at `pos` writes all of `v`
/// without reading it, a part per iteration, if it does: one pattern whose
/// loop terms belong to loops around `pos` tiles `v` — a strip loop of
/// loads or memsets filling a tile one strip per iteration — and nothing
/// else in those loops accesses `v` (a read there could see a cell the
/// nest has not written yet; another write would change a strip after it
/// was written). The tiling holds when iteration 0 writes a dense
/// rectangle and, per dimension, each term moves it by exactly what the
/// terms of smaller stride cover together, until the location is covered
/// from its first cell. Returns the outermost of the terms' loops (the
/// nest) and the pattern.
pub fn tiling_nest(m: &Module, order: &LinearOrder, v: MemLoc, pos: u32) -> Option<(Loop, Ap)> {
    let i = order.inst_at(pos);
    if !i.is_valid() || m.inputs(i).any(|a| m.aps().loc[a] == v) {
        return None;
    }
    let mut outs = m.outputs(i).filter(|&o| m.aps().loc[o] == v);
    let (Some(o), None) = (outs.next(), outs.next()) else {
        return None;
    };
    let ext = m.ap_ext(o);
    let wraps = ext.terms.iter().any(|t| t.wraps());
    if ext.reg.is_some() || ext.pstep.is_some() || ext.terms.is_empty() || wraps {
        return None;
    }
    if !m.is_contiguous(o) {
        return None;
    }
    let mut outer = Loop::INVALID;
    let mut found = 0;
    let mut l = order.loop_at(pos);
    while l.is_valid() {
        if ext.terms.iter().any(|t| t.lp == l) {
            found += 1;
            outer = l;
        }
        l = m.loops().parent[l];
    }
    if found != ext.terms.len() {
        return None;
    }
    let (s, e) = order.loop_span(outer)?;
    for q in s..=e {
        let j = order.inst_at(q);
        if q != pos && j.is_valid() && m.all_aps(j).any(|a| m.aps().loc[a] == v) {
            return None;
        }
    }
    // Per dimension: (stride, trip) of the terms that move it.
    let mut parts: ArrayVec<(i64, u32), MAX_IV_TERMS> = ArrayVec::new();
    let mut bytes = parts.clone();
    for t in &ext.terms {
        let trip = m.loops().trip[t.lp];
        let (stride, dim) = match (t.parts, t.bytes) {
            (0, b) if b > 0 => (b, &mut bytes),
            (p, 0) if p > 0 => (p as i64, &mut parts),
            _ => return None,
        };
        if trip == 0 || dim.try_push((stride, trip)).is_err() {
            return None;
        }
    }
    let covers = |terms: &mut [(i64, u32)], start: u64, width: u64, whole: u64| {
        terms.sort_unstable();
        let mut w = width;
        for &(stride, trip) in terms.iter() {
            if stride as u64 != w {
                return false;
            }
            w = w.saturating_mul(trip as u64);
        }
        start == 0 && w == whole
    };
    let tiles = covers(
        &mut parts,
        m.aps().part_start[o] as u64,
        u16::from(m.aps().part_count[o]) as u64,
        m.mems().partitions[v] as u64,
    ) && covers(
        &mut bytes,
        m.aps().offset[o] as u64,
        m.ap_bytes_per_partition(o),
        m.mems().bytes[v] as u64,
    );
    tiles.then_some((outer, o))
}

/// True when the instruction at `pos` leaves all of `v` written within one
/// iteration of loop `ctx` (within the program, for [`Loop::INVALID`])
/// before anything reads it, so that no value of `v` from an earlier
/// iteration of `ctx` is read after `pos`: one plain pattern writes all of
/// it ([`fully_defines`]), or a [`tiling_nest`] strictly inside `ctx` does.
fn defines_in(m: &Module, order: &LinearOrder, v: MemLoc, pos: u32, ctx: Loop) -> bool {
    if fully_defines(m, order, v, pos) {
        return true;
    }
    let Some((nest, _)) = tiling_nest(m, order, v, pos) else {
        return false;
    };
    let mut l = m.loops().parent[nest];
    while l.is_valid() && l != ctx {
        l = m.loops().parent[l];
    }
    l == ctx
}

/// The DRAM rectangle a rematerialization reloads: `loc`, from partition
/// (row) `part` and byte `byte` of each row on, as many rows and bytes per
/// row as the tensor it fills has, so that the tensor's cell `(p, b)` holds
/// the location's byte `byte + b` of row `part + p`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RematSource {
    /// The DRAM location.
    pub loc: MemLoc,
    /// Its row that holds the tensor's partition 0.
    pub part: u16,
    /// Its byte, in each of those rows, that holds the tensor's byte 0.
    pub byte: u32,
}

/// The rematerialization of an invariant split of `v` whose whole copy is
/// reloaded before `after`: [`remat_from`], except nothing
/// ([`Remat::Overwritten`]): the first copy, reloaded in the loop, needs
/// the value.
pub fn invariant_remat(cx: SpillView<'_>, v: MemLoc, after: u32) -> Option<Remat> {
    remat_from(cx, v, after).filter(|&r| r != Remat::Overwritten)
}

/// How a rematerialization brings a value back without a spill slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Remat {
    /// A load of the DRAM rectangle the value was loaded from.
    Reload(RematSource),
    /// The `memset` that made the value, run again on the copy: the same
    /// constant, element type and size ([`remat_from`]).
    Memset(Inst),
    /// An engine copy of the on-chip rectangle the value was copied from
    /// ([`remat_from`]).
    Copy(RematSource),
    /// Nothing: the access the reload would precede writes all of the
    /// tile without reading it, so the value is dead from the split on
    /// and the copy only takes the later accesses (no store, no reload).
    Overwritten,
}

impl Remat {
    /// The location a reload reads ([`MemLoc::INVALID`] for a memset or
    /// nothing, which read nothing): the spill record's slot.
    pub fn slot(self) -> MemLoc {
        self.source().map_or(MemLoc::INVALID, |src| src.loc)
    }

    /// The rectangle a reload or a copy reads; `None` for a memset.
    pub fn source(self) -> Option<RematSource> {
        match self {
            Remat::Reload(src) | Remat::Copy(src) => Some(src),
            Remat::Memset(_) | Remat::Overwritten => None,
        }
    }
}

/// How a reload of `v` before position `reload_at` can do without a spill
/// slot, if it can: nothing at all when the instruction at `reload_at`
/// writes all of `v` through one plain pattern without reading it (the
/// value is dead: no reload before the next access, and no loop around
/// `reload_at` but not the split reads it again before, since that access
/// is the first after the split); a recompute when the last write of `v` before
/// `reload_at` is a `memset` of all of `v` through one plain pattern of
/// `v`'s element size, with a constant the dataflow checker names by its
/// value (32 bits); otherwise a reload from the DRAM it was loaded from,
/// or a copy again from the on-chip location it was copied from
/// (`copied_from`). A memset's value depends on nothing, so no write
/// between it and the reload matters, and an engine setting a tile costs
/// no DMA.
pub fn remat_from(cx: SpillView<'_>, v: MemLoc, reload_at: u32) -> Option<Remat> {
    let SpillView { m, order, live } = cx;
    if live.accesses(v).binary_search(&reload_at).is_ok() && fully_defines(m, order, v, reload_at) {
        return Some(Remat::Overwritten);
    }
    let acc = live.accesses(v);
    let before = acc.partition_point(|&q| q < reload_at);
    let i = order.inst_at(acc[live.last_write_among(v, before)?]);
    if i.is_valid() && m.insts().opcode[i] == Opcode::Memset {
        let mut outs = m.outputs(i);
        let (Some(o), None) = (outs.next(), outs.next()) else {
            return None;
        };
        let set = m.aps().loc[o] == v
            && m.is_full_access(o)
            && m.ap_is_plain(o)
            && m.aps().elem_size[o] == m.elem_size(v)
            && i32::try_from(m.imm(i)).is_ok();
        return set.then_some(Remat::Memset(i));
    }
    copied_from(cx, v, reload_at)
}

/// The rectangle a reload of `v` before position `reload_at` can read
/// again instead of a spill slot, if any. From DRAM ([`Remat::Reload`]):
/// the last write of `v` before `reload_at` is a `load` that fills all of `v` (one plain pattern) from a rectangle of a
/// DRAM location — all of it, or a block of its rows and of the bytes of
/// each row, read through a plain contiguous pattern of `v`'s partitions
/// and bytes per partition, so cell `(p, b)` of `v` is byte `offset + b` of
/// row `part_start + p` (see [`RematSource`]) — and no instruction writes
/// that location from the outermost loop around the load to the end of the
/// outermost loop around the reload. Then every execution of the reload
/// reads the bytes the load read, and `v`'s remaining reads see the same
/// value as in the input. Any part of `v`'s cells reloads through the same
/// shift, so slice reloads (moved by loop terms in `v`'s rows and bytes)
/// read the rectangle's matching cells.
///
/// The same for a `tensor_copy` from an on-chip location `S` of `v`'s
/// element type (or untyped) and size, which the dataflow checker sees
/// through: `S` unwritten over the same span and accessed at or after
/// `reload_at`, so that its interval holds the reload (an engine copy
/// again, [`Remat::Copy`]).
fn copied_from(cx: SpillView<'_>, v: MemLoc, reload_at: u32) -> Option<Remat> {
    let SpillView { m, order, live } = cx;
    let acc = live.accesses(v);
    let before = acc.partition_point(|&q| q < reload_at);
    let k = live.last_write_among(v, before)?;
    let def = acc[k];
    let i = order.inst_at(def);
    let op = if i.is_valid() {
        m.insts().opcode[i]
    } else {
        return None;
    };
    if op != Opcode::Load && op != Opcode::TensorCopy {
        return None;
    }
    let mut outs = m.outputs(i);
    let (Some(o), None) = (outs.next(), outs.next()) else {
        return None;
    };
    let mut ins = m.inputs(i);
    let (Some(a), None) = (ins.next(), ins.next()) else {
        return None;
    };
    let src = m.aps().loc[a];
    // A plain dense block of `v`'s rows and bytes per row, inside `src`.
    let (part, count) = (
        m.aps().part_start[a] as u16,
        u16::from(m.aps().part_count[a]),
    );
    let (byte, per_row) = (m.aps().offset[a], m.ap_bytes_per_partition(a));
    let rectangle = m.ap_is_plain(a)
        && m.is_contiguous(a)
        && count == m.mems().partitions[v]
        && per_row == m.mems().bytes[v] as u64
        && part as u32 + count as u32 <= m.mems().partitions[src] as u32
        && byte as u64 + per_row <= m.mems().bytes[src] as u64;
    let on_chip = m.mems().space[src].is_on_chip();
    let (ti, to) = (m.mems().dtype[src], m.mems().dtype[v]);
    let moves = match op {
        Opcode::Load => !on_chip,
        // What the dataflow checker sees as a plain move: one element
        // size, no conversion.
        _ => {
            on_chip
                && m.aps().elem_size[a] == m.aps().elem_size[o]
                && m.elem_size(src) == m.elem_size(v)
                && (ti == to || ti.is_raw() || to.is_raw())
                && src != v
                && live.accesses(src).last().is_some_and(|&q| q >= reload_at)
        }
    };
    if m.aps().loc[o] != v || !m.is_full_access(o) || !moves || !rectangle {
        return None;
    }
    let (lo, _) = outer_loop_span(m, order, def);
    let (_, hi) = outer_loop_span(m, order, reload_at);
    let written = live
        .accesses(src)
        .iter()
        .zip(live.access_writes(src))
        .any(|(&q, w)| w && lo <= q && q <= hi);
    let src = RematSource {
        loc: src,
        part,
        byte,
    };
    (!written).then_some(if on_chip {
        Remat::Copy(src)
    } else {
        Remat::Reload(src)
    })
}

/// The DRAM spill slot of `of`, named `name`: shaped like `of`, flagged
/// `SPILL | INTERNAL` (made by an allocator, not by the user), with an
/// untyped element of `of`'s element size: a slot only holds bytes that the
/// store and the reload copy, never convert. Left unplaced (each allocator
/// places its slots its own way).
pub fn add_slot(m: &mut Module, of: MemLoc, name: &str) -> Result<MemLoc, IrError> {
    m.try_add_mem(&MemSpec {
        dtype: DType::Raw(m.elem_size(of)),
        flags: MemFlags::SPILL | MemFlags::INTERNAL,
        ..MemSpec::new(
            name,
            Space::Dram,
            m.mems().partitions[of],
            m.mems().bytes[of],
        )
    })
}

/// An SB slot for the PSUM tensor `of` (an access split's, when SB has
/// room: [`crate::mem::access_split::slot_space`]), named `name`: `of`'s
/// shape, element type and alignment, so that the engine copies to and
/// from it convert nothing; flagged `SPILL | INTERNAL`, unplaced for the SB
/// allocator.
pub fn add_sb_slot(m: &mut Module, of: MemLoc, name: &str) -> Result<MemLoc, IrError> {
    m.try_add_mem(&MemSpec {
        dtype: m.mems().dtype[of],
        align: m.mems().align[of],
        flags: MemFlags::SPILL | MemFlags::INTERNAL,
        ..MemSpec::new(name, Space::Sb, m.mems().partitions[of], m.mems().bytes[of])
    })
}

/// A reload copy of `of`, named `name`, in `of`'s space, of `partitions ×
/// bytes` (the cells still accessed after the spill): flagged
/// `RELOAD | INTERNAL` (made by an allocator, like its slot), with `of`'s
/// element type and alignment, since every later access of `of` moves to it
/// unchanged.
pub fn add_reload_copy(
    m: &mut Module,
    of: MemLoc,
    name: &str,
    partitions: u16,
    bytes: u32,
) -> Result<MemLoc, IrError> {
    m.try_add_mem(&MemSpec {
        dtype: m.mems().dtype[of],
        align: m.mems().align[of],
        flags: MemFlags::RELOAD | MemFlags::INTERNAL,
        ..MemSpec::new(name, m.mems().space[of], partitions, bytes)
    })
}

/// Inserts the stores and reloads of `records` and re-points the readers
/// (`addSpillInstsCanread`). `order` is the order the scan ran on (the
/// program before any insertion). Needs the headroom reserved before the
/// scan: one store and one reload per record.
pub fn finalize(
    m: &mut Module,
    order: &LinearOrder,
    live: Option<&MemLiveness>,
    records: &[SpillRecord],
) -> Result<(), IrError> {
    for (k, r) in records.iter().enumerate() {
        if r.remat == Some(Remat::Overwritten) {
            // Nothing to bring back: the next access writes it all.
            repoint_readers(m, order, live, records, k)?;
            continue;
        }
        if let Some(Remat::Memset(set)) = r.remat {
            // The constant set again on all of the copy (which holds only
            // cells of the memset's).
            let outs = [full_ap(m, r.copy)];
            let mut s = InstSpec::new(Opcode::Memset);
            s.flags = InstFlags::RELOAD;
            s.outputs = &outs;
            s.imm = m.imm(set);
            insert_reload(m, order, r, &s)?;
            repoint_readers(m, order, live, records, k)?;
            continue;
        }
        // The origin's cells in the slot (shifted onto the rectangle a
        // rematerialized load read).
        let (slot_part, slot_byte) = r.slot_corner();
        let mut slot_ap = slice_ap(
            m,
            r.slot,
            r.part_start + slot_part,
            r.part_count,
            r.byte_lo + slot_byte,
            r.byte_hi + slot_byte,
        );
        if r.store_after != u32::MAX {
            let at = order.inst_at(r.store_after);
            // A slice record's store saves all of the victim: every
            // iteration reloads another part of it.
            // After a strip of a tiling nest, each iteration saves the
            // strip it wrote: the slot holds all of the victim once the
            // nest is done, and no store reads cells not yet written.
            let nest = tiling_nest(m, order, r.victim, r.store_after);
            let (src, dst) = match (nest, r.slice) {
                (Some((_, o)), _) => {
                    let src = m.ap_spec(o);
                    let mut dst = src.clone();
                    dst.loc = r.slot;
                    // Origin coordinates in the slot, from a reload copy's.
                    let (p0, b0) = corner_of(records, k, r.victim);
                    dst.part_start += p0;
                    dst.offset += b0;
                    (src, dst)
                }
                (None, Some(_)) => (full_ap(m, r.victim), full_ap(m, r.slot)),
                (None, None) => {
                    // A reload copy stored again holds its origin's cells
                    // from its own record's corner.
                    let (p0, b0) = corner_of(records, k, r.victim);
                    (
                        slice_ap(
                            m,
                            r.victim,
                            r.part_start.saturating_sub(p0),
                            r.part_count,
                            r.byte_lo.saturating_sub(b0),
                            r.byte_hi.saturating_sub(b0),
                        ),
                        slot_ap.clone(),
                    )
                }
            };
            let outs = [dst];
            let ins = [src];
            let mut s = InstSpec::new(Opcode::Save);
            s.flags = InstFlags::SPILL;
            s.outputs = &outs;
            s.inputs = &ins;
            m.insert_after(at, &s)?;
        }
        if let Some(t) = r.slice {
            slot_ap.ext.terms.extend(t.as_slice().iter().copied());
        }
        let outs = [full_ap(m, r.copy)];
        let ins = [slot_ap];
        // An on-chip source is copied again by an engine (the allocator
        // kept it resident up to here: see the module doc).
        let mut s = InstSpec::new(match r.remat {
            Some(Remat::Copy(_)) => Opcode::TensorCopy,
            _ => Opcode::Load,
        });
        s.flags = InstFlags::RELOAD;
        s.outputs = &outs;
        s.inputs = &ins;
        insert_reload(m, order, r, &s)?;
        if let Some(t) = r.slice.filter(|t| t.write_back_after != u32::MAX) {
            // The iteration's slice back to where the next one (and the
            // reload after the loop) reads it.
            let outs = [ins[0].clone()];
            let from = [full_ap(m, r.copy)];
            let mut s = InstSpec::new(Opcode::Save);
            s.flags = InstFlags::SPILL;
            s.outputs = &outs;
            s.inputs = &from;
            m.insert_after(order.inst_at(t.write_back_after), &s)?;
        }
        repoint_readers(m, order, live, records, k)?;
    }
    Ok(())
}

/// Inserts `records[k]`'s reload `s`: before its reload point, or, hoisted
/// out of the loop that starts there, after the instruction before it.
fn insert_reload(
    m: &mut Module,
    order: &LinearOrder,
    r: &SpillRecord,
    s: &InstSpec<'_>,
) -> Result<(), IrError> {
    if r.reload_hoisted && r.reload_before > 0 {
        m.insert_after(order.inst_at(r.reload_before - 1), s)?;
    } else {
        m.insert_before(order.inst_at(r.reload_before), s)?;
    }
    Ok(())
}

/// Re-points `records[k]`'s readers: from its reload up to the next
/// reload of the same origin, and, when `live` describes the positions of
/// `order`, no further than the last position where its victim or origin
/// is live (no instruction of `order` past it names either): a round with
/// many records then walks each one's own range, not the rest of the
/// program.
fn repoint_readers(
    m: &mut Module,
    order: &LinearOrder,
    live: Option<&MemLiveness>,
    records: &[SpillRecord],
    k: usize,
) -> Result<(), IrError> {
    let r = &records[k];
    let next = records[k + 1..]
        .iter()
        .find(|n| n.origin == r.origin)
        .map_or(u32::MAX, |n| n.reload_before);
    let last = live.map_or(u32::MAX, |l| {
        let end = |v| l.interval(v).map_or(0, |iv| iv.end.saturating_add(1));
        end(r.victim).max(end(r.origin))
    });
    let until = next.min(last);
    let mut p = r.reload_before;
    while p < until && (p as usize) < order.len() {
        let i = order.inst_at(p);
        repoint(m, i, r)?;
        p += 1;
    }
    Ok(())
}

/// Where `victim`'s cells start in its origin's: `(0, 0)` for an original,
/// the corner of the record before `k` whose reload copy it is otherwise.
fn corner_of(records: &[SpillRecord], k: usize, victim: MemLoc) -> (u16, u32) {
    records[..k]
        .iter()
        .rev()
        .find(|p| p.copy == victim)
        .map_or((0, 0), |p| (p.part_start, p.byte_lo))
}

/// Re-points the accesses (reads and writes) of `r.origin` (or of the
/// victim) in `i` to the copy; for a slice record, without the loop terms
/// its reload took over.
fn repoint(m: &mut Module, i: Inst, r: &SpillRecord) -> Result<(), IrError> {
    let aps: heapless::Vec<crate::ir::Ap, 32> = m.all_aps(i).collect();
    for (k, a) in aps.into_iter().enumerate() {
        let l = m.aps().loc[a];
        if l == r.origin || l == r.victim {
            if let Some(t) = r.slice {
                let mut ext = m.ap_ext(a).clone();
                ext.terms.retain(|x| !t.moves_with(x.lp));
                m.set_ap_ext(i, k, ext)?;
            }
            // Reads were made relative to the origin; rebase onto the copy
            // (which holds every iteration's cells: see the scan's range).
            m.shift_ap(a, r.copy, -(r.part_start as i32), -(r.byte_lo as i64));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, UNKNOWN_TRIP};
    use crate::target::Target;
    use crate::testing::{exp, tiles};

    /// A loop of unknown trip count runs once per entry in the cost model
    /// (as in the schedule model and the register colorer): a spill inside
    /// one inside a loop of 3 trips runs 3 times, not 3 × `u32::MAX`.
    #[test]
    fn a_loop_of_unknown_trip_counts_once_per_entry() {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [a, b] = tiles(&mut bl, Space::Sb, ["a", "b"], 128, 512, 4);
        bl.func("f").unwrap();
        bl.begin_loop(3).unwrap();
        bl.begin_loop(UNKNOWN_TRIP).unwrap();
        let i = exp(&mut bl, b, a);
        bl.end_loop().unwrap();
        bl.end_loop().unwrap();
        let order = LinearOrder::of(&m);
        let pos = order.pos(i);
        assert_eq!(executions(&m, &order, pos), 3);
        let one = m.target.dma_cycles(128 * 512);
        assert_eq!(spill_cost(&m, &order, 128 * 512, None, pos), 3 * one);
    }
}
