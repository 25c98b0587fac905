//! The linear-scan memory allocator (the reference's `linear_scan_allocator`,
//! LSA): one scan per on-chip space in program order, PSUM first, then SB.
//!
//! At each instruction the scan (1) expires the intervals with no remaining
//! uses — their space goes back to the [`BestFitMemoryManager`]; (2) places
//! the reload copies due before the instruction; (3) when the instruction is
//! marked in-place, frees the inputs that die at it, so that an output may
//! take their space (docs/SEMANTICS.md §1: only then); (4) places every interval that
//! starts here (the instruction's outputs, and values the loop rule makes
//! live from a loop's first position). When nothing fits it logs the
//! failure and the ranked active set, spills the head of the set
//! ([`super::live_range`]) and retries, until the tensor fits or no
//! candidate is left, which is an [`LsaError::AllocationFailed`].
//!
//! Spillable plainly: not fixed, not accessed by the failing instruction,
//! accessed again later, defined before the failure, not accessed earlier
//! in a loop that contains the failure (the back edge would reach the freed
//! space). A reload copy written since its reload is stored again (its slot
//! would be stale otherwise). A tensor written again later is spillable: every later
//! access, read or write, moves to the reload copy. Inside loops the scan
//! also takes the shared planner's loop-invariant and slice splits
//! ([`super::spill`]; see `victim` and `evict`): the copy for the loop's
//! accesses already passed lies in the victim's rectangle, which it held
//! up to the failure.
//!
//! [`run`] is the reference's non-loop variant: intervals are the
//! straight-line `[first access, last access]`, valid only for programs
//! without loops (loops unrolled), so it refuses a module with loops.
//! [`run_with_loops`] ("Linear Scan Allocator(LIW)") uses the loop rule of
//! docs/SEMANTICS.md §1: a value used in a loop but defined before it, or carried around
//! the back edge, is live over the whole loop.
//!
//! Pinned or already-placed locations are obstacles, never moved: they are
//! announced to the manager before the scan (no other tensor whose lifetime
//! meets theirs may take their rectangle) and placed at their address when
//! the scan reaches them. The LSA is single-core (the reference asserts
//! `vncNcCount == 1` for it); a larger vnc count is an error.
//!
//! Storage: [`LsaWorkspace`] holds every table; [`LsaWorkspace::reserve`]
//! sizes it and the module's spill headroom before the scan, after which
//! the scan allocates nothing.
//!
//! Where no victim is left, a scan given a restart point
//! ([`LsaWorkspace::reserve_restart`]) starts again from the module as it
//! was, after splitting the tensors live there at every access
//! ([`restart`]).
//!
//! The files: `scan` is the pass over the program, `victim`
//! picks which live tensor to spill, `evict` spills it (its record, copy and
//! slot), `restart` the restart after an access split, `failure` is the
//! error and its text, `report` the figures.
//!
//! The 1-D buffer problem (`tusk dsa --algo lsa`) runs the same manager as a
//! portfolio of scans in [`super::portfolio`]. The pipeline's scan cannot be
//! a portfolio: it runs once, in program order, inserting spill code into
//! the module as it goes, so it cannot be rerun per variant or mirrored in
//! time. Its hole score can take [`Policy::outliving_first`] (SB and flat
//! honour it), but its default keeps the closest-death score: on generated
//! modules the outliving-first score does not lower the peak (measured by
//! the `pipeline_policy_survey` test).

// The failure carries its whole story (names, live set) inline so that the
// failure path of a no_std pass allocates nothing; errors are rare and the
// size only costs a copy on that path.
#![allow(clippy::result_large_err)]

use alloc::vec::Vec;

use alloc::collections::BinaryHeap;
use core::cmp::Reverse;

use super::best_fit::{BestFitMemoryManager, Policy};
use super::live_range::LiveRangeManager;
use super::spill::SpillRecord;
use crate::analysis::{Bounds, LinearOrder, MemLiveness};
use crate::ir::{Capacity, MemFlags, MemLoc, Module, Space};
use crate::mem::spill_strategy::{SpillStrategy, StrategyCopies};
use crate::mem::split_round::{RoundPoints, SplitRound};

mod evict;
mod failure;
mod report;
mod restart;
mod scan;
mod victim;

pub use failure::{AllocationFailure, LsaError, LsaErrorDisplay};
pub use report::{LsaReport, SpaceReport};
pub use restart::{RestartSplits, Restarts, NO_RESTART_POINT, RESTART_HEADROOM_SPENT};

/// Options of the scan.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LsaOptions {
    /// Virtual NeuronCores sharing the allocation; the LSA needs 1.
    pub vnc_count: u32,
    /// Placement policy of the best-fit manager.
    pub policy: Policy,
    /// Spills the scan may insert (headroom reserved in the module).
    /// `None`: [`default_spill_limit`] — one per eight on-chip locations
    /// plus 16 (on a small module at least one per on-chip access), since a
    /// scan that spills more than that has a memory problem the headroom should not hide (and headroom for one spill
    /// per location would reserve two instructions, four access patterns
    /// and two named locations per location on every module).
    pub max_spills: Option<u32>,
    /// Access copies the restarts of one pass may add in all (module
    /// headroom reserved for them; 0: the scan never restarts). A restart
    /// also needs a restart point ([`LsaWorkspace::reserve_restart`]).
    pub restart_copies: u32,
    /// Where the scan needs a victim in SB: spill one by the scan's rules
    /// first, restarting only where none is left
    /// ([`SpillStrategy::Ranges`]); restart after access splits first
    /// ([`SpillStrategy::Access`]); or every order from the same module,
    /// keeping the cheapest ([`SpillStrategy::Best`], where the workspace
    /// keeps the copies it needs); with `Ranges` or `Access`, the other
    /// orders only where the first fails (and the copies are kept).
    /// Restarts need a restart point: without one the scan spills by its
    /// rules.
    pub strategy: SpillStrategy,
    /// True when the caller withheld the restarts (`restart_copies` 0
    /// where the storage budget has no room for them): a failure for want
    /// of a victim then says that the scan kept no restart point
    /// ([`NO_RESTART_POINT`]), as it does when it was given copies but no
    /// point.
    pub restarts_withheld: bool,
    /// True: the scan places its DRAM spill slots itself, each above every
    /// DRAM location placed before it (a bump: each slot keeps its bytes
    /// for the whole program). False: it leaves them to the DRAM allocator
    /// that runs after it (the pipeline's), which shares the bytes of
    /// slots whose lifetimes (a store to its last reload) do not overlap,
    /// as it does for the coloring allocators' slots and the restarts'.
    pub place_slots: bool,
}

impl Default for LsaOptions {
    fn default() -> Self {
        LsaOptions {
            vnc_count: 1,
            policy: Policy::default(),
            max_spills: None,
            restart_copies: 0,
            strategy: SpillStrategy::Best,
            restarts_withheld: false,
            place_slots: true,
        }
    }
}

/// The default spill limit is one per this many on-chip locations...
pub const SPILL_FRACTION: u32 = 8;
/// ...plus this many.
pub const SPILL_SLACK: u32 = 16;
/// Bytes a copy's name adds to its original's:
/// `_ReloadStore<N>_ShrinkedCopy` with N up to 10 digits.
const COPY_NAME_EXTRA: usize = "_ReloadStore".len() + 10 + "_ShrinkedCopy".len();
/// Bytes a spill slot's name adds: `_SpillSlot`.
const SLOT_NAME_EXTRA: usize = "_SpillSlot".len();
/// Bytes a restart's copy or slot name adds at most to its tensor's:
/// `_Restart<what><n>[_<k>]` ([`restart`]), the longest `<what>` being
/// `ReloadInLoop`, each number up to 10 digits.
const RESTART_NAME_EXTRA: usize = "_RestartReloadInLoop".len() + 10 + "_".len() + 10;

/// On a small module the default limit is at least one spill per access
/// of an on-chip location, up to this many spills in all.
pub const SPILL_SMALL_CAP: u32 = 1024;

/// The spill limit of a scan of `m` when [`LsaOptions::max_spills`] is
/// `None`: one per [`SPILL_FRACTION`] on-chip locations plus
/// [`SPILL_SLACK`], and at least one per access of an on-chip location up
/// to `SPILL_SMALL_CAP` (1024) in all. The second term is for small kernels
/// under pressure: a tile reused by several instructions (a matmul's
/// operand tiles) may leave and come back before each of its accesses, so
/// the spills needed grow with the accesses, not with the locations;
/// capped by a constant, its headroom costs a bounded amount on any module,
/// and a large module keeps the first term. A scan needing more fails with
/// [`LsaError::SpillHeadroom`], which names the limit and how to raise it.
pub fn default_spill_limit(m: &Module) -> u32 {
    let on_chip = m.mems().space.values().filter(|s| s.is_on_chip()).count() as u32;
    let by_locations = on_chip / SPILL_FRACTION + SPILL_SLACK;
    if by_locations >= SPILL_SMALL_CAP {
        return by_locations;
    }
    let accesses = m
        .aps()
        .loc
        .values()
        .filter(|&&v| v.is_valid() && m.mems().space[v].is_on_chip())
        .count() as u32;
    by_locations.max(accesses.min(SPILL_SMALL_CAP))
}

/// A reload copy waiting for its position: `(position, Reverse(cells),
/// copy)`. The copies due at one position are placed largest first: they
/// are placed into the same free space at the same moment, and placing
/// the smaller ones first can leave the space cut into pieces none of the
/// larger fits (first fit decreasing); the id breaks ties.
type Due = (u32, Reverse<u64>, u32);

/// The [`Due`] key of copy `c`, reloaded before position `at`.
fn due(m: &Module, at: u32, c: MemLoc) -> Reverse<Due> {
    let cells = m.mems().partitions[c] as u64 * m.mems().bytes[c] as u64;
    Reverse((at, Reverse(cells), c.as_u32()))
}

/// Every table of the scan, reusable across modules.
#[derive(Debug, Default)]
pub struct LsaWorkspace {
    order: LinearOrder,
    live: MemLiveness,
    bounds: Bounds,
    lrm: LiveRangeManager,
    manager: BestFitMemoryManager,
    /// Copies waiting for their reload position ([`Due`]).
    pending: BinaryHeap<Reverse<Due>>,
    /// Placed intervals by end: (end, loc).
    ends: BinaryHeap<Reverse<(u32, u32)>>,
    /// Per location: the original tensor a copy holds (itself for originals).
    origin: Vec<MemLoc>,
    /// Per original: its DRAM spill slot.
    slot: Vec<MemLoc>,
    /// Per original: the location holding its value now.
    holder: Vec<MemLoc>,
    /// Per original: the first position from which the scan may evict it
    /// again (0: any). A rematerialization that copies it again keeps it in
    /// place up to its reloads ([`evict`]).
    pinned: Vec<u32>,
    records: Vec<SpillRecord>,
    max_spills: u32,
    /// Per location: pinned or placed before the scan (an obstacle).
    fixed: Vec<bool>,
    /// Next free DRAM byte for spill slots.
    dram_bump: u64,
    /// The scan under way places its slots ([`LsaOptions::place_slots`]).
    place_slots: bool,
    /// Location ids the tables are reserved for (0: not reserved).
    reserved_ids: usize,
    /// The module as it was before the scan, or after the last restart's
    /// splits ([`restart`]); `None`: the scan does not restart.
    restart_point: Option<Module>,
    /// The module before the pass and the first strategy's result, for
    /// [`SpillStrategy::Best`] (`None`: one strategy).
    strategies: Option<StrategyCopies>,
    /// The restarts' live-range splits ([`restart`]).
    round: SplitRound,
    /// The SB slots of a restart's access splits
    /// ([`crate::mem::access_split::SbSlots`]).
    sb_slots: Vec<(u32, u32, u64)>,
    /// The runs over a space's capacity a restart serves at once, where
    /// they outnumber the restarts ([`restart`]).
    points: RoundPoints,
    /// The scan under way returns its first SB failure to need a victim
    /// (the restart then splits there) instead of spilling one.
    access_first: bool,
    /// `order` and `live` describe the module of the next scan (handed in
    /// by [`LsaWorkspace::exchange_analyses`]); a scan clears it.
    current: bool,
    /// `bounds` too (computed from those `order` and `live`).
    bounds_current: bool,
}

impl LsaWorkspace {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.live,
            self.pending,
            self.ends,
            self.origin,
            self.slot,
            self.holder,
            self.pinned,
            self.records,
            self.fixed,
            self.bounds,
            self.sb_slots,
            self.points,
            self.lrm,
            self.manager,
            self.restart_point,
            self.strategies,
            self.round
        )
    }

    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Most spills a scan of `m` may insert.
    fn spill_limit(m: &Module, opts: &LsaOptions) -> usize {
        opts.max_spills.unwrap_or_else(|| default_spill_limit(m)) as usize
    }

    /// Most DRAM locations a scan of `m` may add: a spill slot per spill at
    /// most (its other new locations, the reload copies, are on-chip).
    pub fn spill_slots(m: &Module, opts: &LsaOptions) -> usize {
        Self::spill_limit(m, opts)
    }

    /// The module headroom the scan needs. Per spill: a copy, maybe a slot,
    /// a store and a reload (1 input + 1 output each), and the two names,
    /// budgeted by the longest name of the module's own on-chip tensors (a
    /// copy is named after its original, an input location of the scan:
    /// one of them or, after a restart, a restart's copy, whose name adds
    /// at most `RESTART_NAME_EXTRA`). The copies and slots of earlier
    /// spills do not count, so the headroom stays the same as restarts add
    /// them. The store and reload access contiguous slices (one dim, kept
    /// inline), so they take no pooled dims.
    pub fn headroom(m: &Module, opts: &LsaOptions) -> Capacity {
        let spills = Self::spill_limit(m, opts);
        let longest = m
            .mems()
            .space
            .keys()
            .filter(|&v| {
                m.mems().space[v].is_on_chip()
                    && !m.mems().flags[v].intersects(MemFlags::RELOAD | MemFlags::SPILL)
            })
            .map(|v| m.mem_name(v).len())
            .max()
            .unwrap_or(0);
        let original = if opts.restart_copies > 0 {
            longest + RESTART_NAME_EXTRA
        } else {
            longest
        };
        // The restarts' access splits: per access copy a location, a
        // reload and a store (two patterns each, their slot side carrying
        // the loop terms of the access), a name; per split a slot, at most
        // one per copy.
        let copies = opts.restart_copies as usize;
        let per = spills + copies;
        Capacity {
            insts: 2 * per,
            aps: 4 * per,
            dims: 0,
            mems: 2 * per,
            names: 2 * per,
            name_bytes: spills * (2 * original + COPY_NAME_EXTRA + SLOT_NAME_EXTRA)
                + copies * (2 * longest + 2 * RESTART_NAME_EXTRA),
            // A slice split's reload and write-back carry the loop terms its
            // victim's accesses had: only modules with such patterns.
            ap_exts: if m.counts().ap_exts > 0 { 2 * per } else { 0 },
            // A recomputed memset keeps its constant: only a module with
            // non-zero immediates needs room for them.
            imms: if m.counts().imms > 0 { per } else { 0 },
            ..Default::default()
        }
    }

    /// Keeps a restart point for the scans of `m` (a copy of `m` with its
    /// whole reserved capacity, so that saving and restoring never
    /// allocate); call it after every reservation of `m`. Returns its heap
    /// bytes. A scan restarts only with this and
    /// [`LsaOptions::restart_copies`].
    pub fn reserve_restart(&mut self, m: &Module) -> u64 {
        let point = self
            .restart_point
            .get_or_insert_with(|| Module::new(m.target.clone()));
        point.copy_from(m);
        crate::heap_bytes!(self.restart_point)
    }

    /// The module as the last scan with [`SpillStrategy::Best`] got it
    /// (`None` without strategy copies). The pipeline runs the coloring
    /// allocator from it too where SB must spill (`SbPortfolio` in the
    /// pipeline).
    pub fn module_before_pass(&self) -> Option<&Module> {
        self.strategies.as_ref().map(|k| &k.before)
    }

    /// With a restart point, keeps the two more copies of `m` that
    /// [`SpillStrategy::Best`] needs (the module before the pass and the
    /// first strategy's result); call it after every reservation of `m`.
    /// Returns their heap bytes.
    pub fn reserve_strategies(&mut self, m: &Module) -> u64 {
        StrategyCopies::reserve(&mut self.strategies, m)
    }

    /// Sizes the workspace for `m` and reserves `m`'s spill headroom. The
    /// analyses are sized to the module's whole reserved capacity
    /// ([`Module::capacity`]), so the scan never grows them.
    pub fn reserve(&mut self, m: &mut Module, opts: &LsaOptions) {
        self.reserve_tables(m, opts, None);
        // Sized to the capacity, the scan's computes do not allocate; the
        // scan computes (or is handed) them, so nothing is computed here.
        let cap = m.capacity();
        self.order.reserve(&cap);
        self.live.reserve(&cap);
        self.bounds.reserve(&cap);
    }

    /// [`Self::reserve`] without the order, liveness and bounds, for a
    /// caller that lends its own, reserved to the module's capacity, by
    /// [`Self::exchange_analyses`] around every scan (the pipeline: one copy
    /// of each serves every pass). With `live` (the liveness of `m` as the
    /// scan will see it), the manager's lines are sized for the locations
    /// live at once instead of for every location: the scan places a
    /// location at the start of its interval and frees it at the end, and a
    /// spilled value's copy is placed only after the value was freed (one
    /// holder per value at a time), so what is placed at once is at most
    /// what `most_live` counts.
    pub fn reserve_tables(
        &mut self,
        m: &mut Module,
        opts: &LsaOptions,
        live: Option<&MemLiveness>,
    ) {
        let spills = Self::spill_limit(m, opts);
        self.max_spills = spills as u32;
        m.reserve(Self::headroom(m, opts));
        let ids = m.num_mems() + 2 * spills + 2 * opts.restart_copies as usize;
        self.reserved_ids = ids;
        self.lrm.reserve(ids);
        // A restart's split of a PSUM tensor may give it an SB slot, live
        // with SB's own: one more SB block per PSUM location at most (a
        // split tensor's copies are not split again), when it restarts.
        let psum_slots = if opts.restart_copies > 0 {
            m.mems()
                .space
                .values()
                .filter(|&&s| s == Space::Psum)
                .count()
                .min(opts.restart_copies as usize)
        } else {
            0
        };
        let blocks = live.map_or(ids, |l| {
            most_live(m, l, Space::Sb).max(most_live(m, l, Space::Psum)) + psum_slots
        });
        self.manager.reserve_rows_for(
            BestFitMemoryManager::sb_rows(&m.target),
            ids,
            blocks,
            m.num_mems(),
        );
        self.pending
            .reserve(spills.saturating_sub(self.pending.len()));
        self.ends.reserve(ids.saturating_sub(self.ends.len()));
        for v in [&mut self.origin, &mut self.slot, &mut self.holder] {
            crate::storage::grow(v, ids);
        }
        crate::storage::grow(&mut self.pinned, ids);
        crate::storage::grow(&mut self.fixed, ids);
        crate::storage::grow(&mut self.records, spills);
        if opts.restart_copies > 0 {
            // Candidates: the tensors live at one point, of the input
            // or made by the restarts.
            let copies = opts.restart_copies as usize;
            self.round.reserve(blocks.saturating_add(copies), copies);
            crate::storage::grow(
                &mut self.sb_slots,
                crate::mem::access_split::MAX_SPLITS_AT_POINT,
            );
            // A run per copy at most; live sets for each location at two
            // runs on average (a restart leaves the rest to the next).
            self.points.reserve(ids, ids.saturating_mul(2), copies);
        }
    }

    /// Swaps the order, liveness and bounds with the caller's (the
    /// pipeline's, which computed them already), like the coloring and DMA
    /// workspaces: with `current` the next scan starts from them instead
    /// of walking the program again (`bounds_current`: the bounds too).
    /// The side that computes during the scan (the workspace's after the
    /// swap) must be reserved to the module's capacity, so the swap keeps
    /// every computation allocation-free; the other may be empty (a swap
    /// moves three pointers, whatever the sizes). The caller swaps back
    /// after the scan (with `false`): what it gets back is stale.
    pub fn exchange_analyses(
        &mut self,
        order: &mut LinearOrder,
        live: &mut MemLiveness,
        bounds: &mut Bounds,
        current: bool,
        bounds_current: bool,
    ) {
        core::mem::swap(&mut self.order, order);
        core::mem::swap(&mut self.live, live);
        core::mem::swap(&mut self.bounds, bounds);
        self.current = current;
        self.bounds_current = current && bounds_current;
    }

    /// The spills of the last run, in the order they were decided.
    pub fn spills(&self) -> &[SpillRecord] {
        &self.records
    }
}

/// The most locations of `space` live at one position by `live` (their
/// intervals, inclusive).
pub fn most_live(m: &Module, live: &MemLiveness, space: Space) -> usize {
    let mut events: Vec<(u32, i8)> = Vec::new();
    for v in m.mems().space.keys() {
        if m.mems().space[v] != space {
            continue;
        }
        if let Some(iv) = live.interval(v) {
            events.push((iv.start, 1));
            if let Some(after) = iv.end.checked_add(1) {
                events.push((after, -1));
            }
        }
    }
    // At one position the intervals that ended before it leave first.
    events.sort_unstable();
    let (mut now, mut most) = (0i64, 0i64);
    for &(_, d) in &events {
        now += d as i64;
        most = most.max(now);
    }
    most as usize
}

/// The straight-line scan: refuses modules with loops (see the module doc).
pub fn run(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    opts: &LsaOptions,
) -> Result<LsaReport, LsaError> {
    if m.num_loops() > 0 {
        return Err(LsaError::LoopsNeedLoopAwareScan {
            loops: m.num_loops(),
        });
    }
    restart::run(m, ws, opts, false)
}

/// The loop-aware scan.
pub fn run_with_loops(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    opts: &LsaOptions,
) -> Result<LsaReport, LsaError> {
    restart::run(m, ws, opts, true)
}

#[cfg(test)]
mod tests;
