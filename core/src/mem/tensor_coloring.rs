//! The coloring allocator passes `coloring_allocator_{sb,psum,dram}`: one
//! space of a module placed by the graph colorer ([`super::interval_coloring`]), with the
//! exact search as the fallback before spilling, and spill rounds governed
//! by `--gca-dma-optlevel` when nothing fits.
//!
//! # From a module to a problem
//! Every live, unplaced location of the space becomes a buffer over the
//! positions `[start, end + 1)` of its live interval (loop rule included);
//! placed or pinned locations are pins (obstacles, never moved). Locations
//! that are never live stay unplaced. DRAM inputs and outputs are external
//! (the runtime places them) and are left alone unless placed.
//! - SB: 2-D, `sb_usable_bytes` per partition, the start-partition rule.
//! - PSUM: 2-D over banks: sizes rounded up to whole banks, bank-aligned,
//!   the usable banks as capacity; a tensor wider than
//!   `psum_max_banks_per_tensor` banks is refused.
//! - DRAM: 1-D, partitions × bytes, `dram_bytes`.
//!
//! # When the best coloring does not fit
//! 1. The exact search ([`super::exact`]) runs with the caller's budget: a
//!    fit costs nothing at run time, a spill costs DMA traffic.
//! 2. Otherwise a spill round (unless `--gca-dma-optlevel -1`): while the
//!    live bound exceeds the capacity, at the highest position of every
//!    run of positions where it does, the worst first (a long module has
//!    such runs stretch after stretch, and recoloring the whole space per
//!    run would cost runs × module); once the bound fits, where the
//!    placement ran over, since there the placement, not the bound,
//!    failed. A point where a tensor this round split is live, or one less
//!    than half as far over as the worst, waits for the next round
//!    ([`super::split_round::RoundPoints`]). At each point, victims live
//!    there but not accessed there are split: a `save` to a DRAM slot after their last access before the
//!    peak, a `load` into a fresh copy before their next access, later
//!    readers re-pointed (the same rewrite as the linear scan's,
//!    [`super::spill::finalize`]). A tile that a loop around the peak
//!    reads a slice per iteration may instead leave SB for the whole loop,
//!    each iteration reloading its slice ([`super::spill::slice_split`]);
//!    each tensor enters a round by its better-ranked plan. Then the space
//!    is colored again.
//!
//! `--gca-dma-optlevel` (default 1):
//! - `-1`: never insert spill traffic; report the failure.
//! - `0`: spill the largest eligible victim, one per round.
//! - `1`: rank victims by bytes freed × length of the gap they leave
//!   (positions between the last access before and the next access after
//!   the peak), so one round frees the most pressure for the fewest DMAs,
//!   and spill as many as the overflow needs in one round.
//! - `2`: as 1, and a victim whose value needs no slot is rematerialized
//!   (`spill::remat_from`): no store; an unmodified copy of DRAM (its last
//!   write a `load` that fills it from a rectangle of a DRAM tensor nobody
//!   writes in between: all of it, or a block of its rows and bytes) is
//!   loaded from that rectangle again, a constant (a `memset` of all of
//!   it) set again, a copy of a resident on-chip tile (a `tensor_copy`
//!   of a rectangle nobody writes in between) copied again.
//!
//! A victim must be safely splittable: an access before and after the peak,
//! and none of its accesses inside the outermost loop around the peak (so
//! the store and reload sit outside that loop). Every access after the
//! reload, reads and writes, moves to the copy.

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use core::fmt;

use super::access_split;
use super::affinity::{AffinityReport, Joiner};
use super::budgeted;
use super::exact::{Budget, Clock, ExactOptions, ExactWorkspace, Objective, Status};
use super::interval_coloring::{GcaOptions, GcaOutcome, GcaWorkspace};
use super::problem::{peak, Buffer, Placement, Problem, ProblemError};
use super::spill_strategy::{SpillStrategy, StrategyCopies};
use super::split_round::{RoundParams, RoundPoints, SplitRound};
use crate::analysis::{Bounds, LinearOrder, MemLiveness};
use crate::ir::DisplayNamed;
use crate::ir::{Capacity, Inst, IrError, MemFlags, MemLoc, Module, Space};
use crate::storage::{StorageBudget, StorageReport};

/// How the coloring pass is tuned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ColoringOptions {
    /// The colorer's sweep and improvement settings.
    pub gca: GcaOptions,
    /// Budget of the exact fallback (`None`: no exact fallback).
    pub exact: Option<Budget>,
    /// `--gca-dma-optlevel`, -1..=2.
    pub dma_optlevel: i8,
    /// Most spill rounds before giving up.
    pub max_spill_rounds: u32,
    /// Run the exact search even when the colorer fits, minimizing the peak
    /// within the budget (`--allocator exact`), and keep the lower peak.
    pub prefer_exact: bool,
    /// `--dma-affinity on`: in SB, try to place the pairs handed in
    /// ([`ColoringWorkspace::affinity_pairs_mut`]) side by side once the
    /// plain placement fits (`mem::affinity`).
    pub affinity: bool,
    /// How far an honoured affinity may raise the SB peak over the plain
    /// placement's, in percent (never past the capacity).
    pub affinity_slack_pct: u32,
    /// Most extra colorings spent on chains one at a time when honouring
    /// all of them at once went past the limit. Group testing finds k
    /// costly chains among n in about 2k log2(n / k) colorings, so the
    /// default leaves room for about ten costly chains among a few hundred
    /// (a kernel of a few thousand instructions); larger modules end with
    /// chains `untried`, counted in the report.
    pub affinity_trials: u32,
    /// The order of the on-chip spill rounds' splits ([`SpillStrategy`]).
    /// The other order runs (always for [`SpillStrategy::Best`], else where
    /// the first fails) only where the workspace keeps the copies of the
    /// module it needs ([`ColoringWorkspace::reserve_strategies`]).
    pub strategy: SpillStrategy,
}

impl Default for ColoringOptions {
    fn default() -> Self {
        ColoringOptions {
            gca: GcaOptions::default(),
            exact: Some(Budget {
                nodes: Some(2_000_000),
                micros: Some(2_000_000),
            }),
            dma_optlevel: 1,
            max_spill_rounds: 64,
            prefer_exact: false,
            affinity: false,
            affinity_slack_pct: 5,
            affinity_trials: 128,
            strategy: SpillStrategy::Best,
        }
    }
}

/// What one coloring pass did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ColoringReport {
    /// Buffers placed (excluding pins).
    pub placed: u32,
    /// Pins (placed or pinned locations).
    pub pins: u32,
    /// Peak bytes per partition of the final placement.
    pub peak: u64,
    /// Lower bound of the final problem.
    pub lower_bound: u64,
    /// Capacity of the space.
    pub capacity: u64,
    /// Colorer figures of the final round.
    pub sweeps: u32,
    /// Improvement replays of the final round.
    pub replays: u32,
    /// Interference edges of the final round.
    pub edges: u64,
    /// True when the exact search produced the final placement.
    pub exact_used: bool,
    /// What the exact search concluded, when it ran.
    pub exact_status: Option<Status>,
    /// Spill rounds run.
    pub spill_rounds: u32,
    /// Tensors spilled.
    pub spills: u32,
    /// Of them, rematerialized, without a store: loaded from DRAM, set by
    /// a memset or copied from a resident tile again.
    pub remats: u32,
    /// Reload copies inserted (a loop-invariant split inserts two for one
    /// spill; a slice split's write-back without a whole copy after the
    /// loop counts as one); at most [`spill_headroom`], the headroom the
    /// pass reserved.
    pub reloads: u32,
    /// Spill traffic in bytes (stores + reloads), each DMA as often as the
    /// loops around it run it.
    pub spill_bytes: u64,
    /// Estimated cycles of the spill traffic (`Target::dma_cycles`).
    pub spill_cycles: u64,
    /// What became of the placement affinities (SB with `affinity` on).
    pub affinity: Option<AffinityReport>,
}

/// Why a coloring pass failed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ColoringError {
    /// Even after spilling, the space does not fit.
    DoesNotFit {
        /// The space.
        space: Space,
        /// Best peak found (bytes per partition).
        peak: u64,
        /// The lower bound.
        lower_bound: u64,
        /// The capacity.
        capacity: u64,
        /// Position of the peak pressure.
        at: u32,
        /// Locations live there.
        live: u32,
        /// A large location live there that could not be spilled.
        tensor: MemLoc,
        /// Spill rounds run before giving up.
        spill_rounds: u32,
        /// The instruction at `at` ([`Inst::INVALID`] if none).
        inst: Inst,
        /// Why the spill rounds stopped there.
        stop: SpillStop,
    },
    /// A location cannot be represented (e.g. a PSUM tensor wider than the
    /// banks one tensor may span).
    Unplaceable {
        /// The location.
        tensor: MemLoc,
        /// Why.
        why: &'static str,
    },
    /// The buffer problem refused a location.
    Problem(ProblemError),
    /// The module's reserved workspace ran out during spill insertion.
    Ir(IrError),
}

impl From<IrError> for ColoringError {
    fn from(e: IrError) -> Self {
        ColoringError::Ir(e)
    }
}

impl From<ProblemError> for ColoringError {
    fn from(e: ProblemError) -> Self {
        ColoringError::Problem(e)
    }
}

/// Why the coloring pass's spill rounds stopped short of a fit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SpillStop {
    /// Spilling was off (`--gca-dma-optlevel -1`).
    Off,
    /// No tensor live at the point could be split around it.
    NothingToSplit,
    /// The rounds ran out ([`ColoringOptions::max_spill_rounds`], then as
    /// many access-split rounds): each serves the points over the capacity
    /// it can at once, but a point waits while a tensor split at another is
    /// live there, so a module whose points wait on each other in a long
    /// chain stops with tensors it could still split.
    RoundsSpent,
    /// The pass's spill headroom (the copies it reserved room to insert,
    /// `limit` of them) could not hold another spill.
    HeadroomSpent {
        /// The headroom in copies.
        limit: u32,
    },
}

crate::ir::display_named!(ColoringErrorDisplay for ColoringError);

/// Names the tensors as `m` does.
impl DisplayNamed for ColoringError {
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ColoringError::DoesNotFit {
                space,
                peak,
                lower_bound,
                capacity,
                at,
                live,
                tensor,
                spill_rounds,
                inst,
                stop,
            } => {
                write!(
                    f,
                    "coloring allocation failed in {space}: the best placement needs {peak} bytes per partition, \
                     the space has {capacity} (lower bound {lower_bound}); at "
                )?;
                if inst.is_valid() {
                    write!(f, "{}", m.describe_inst(inst))?;
                } else {
                    write!(f, "position {at}")?;
                }
                write!(f, " {live} locations are live")?;
                if tensor.is_valid() {
                    write!(
                        f,
                        ", the largest being %{} ({} x {})",
                        m.mem_name(tensor),
                        m.mems().partitions[tensor],
                        m.mems().bytes[tensor]
                    )?;
                }
                match stop {
                    SpillStop::RoundsSpent => write!(
                        f,
                        "; the allocator's {spill_rounds} spill rounds (each serves the points over the \
                         capacity that it can at once) ran out before this point: more are not supported \
                         yet; reduce the tensors live at such points or use a larger target"
                    ),
                    SpillStop::HeadroomSpent { limit } => write!(
                        f,
                        "; the pass's spill headroom ({limit} inserted copies, reserved before it ran) \
                         ran out after {spill_rounds} spill rounds: more spill copies are not supported \
                         yet; reduce the tensors live at such points or use a larger target"
                    ),
                    SpillStop::NothingToSplit => write!(
                        f,
                        "; {spill_rounds} spill rounds found no further tensor that can be split around that point \
                         (every live tensor is accessed there or used inside the loop around it). \
                         Reduce the tile sizes live at that point or use a larger target"
                    ),
                    SpillStop::Off => write!(
                        f,
                        "; spilling is off (--gca-dma-optlevel -1): allow it (--gca-dma-optlevel 0..2), \
                         reduce the tile sizes live at that point or use a larger target"
                    ),
                }
            }
            ColoringError::Unplaceable { tensor, why } => {
                write!(f, "%{} cannot be placed: {why}", m.mem_name(tensor))
            }
            ColoringError::Problem(e) => write!(f, "{e}"),
            ColoringError::Ir(e) => write!(f, "spill insertion: {e}"),
        }
    }
}

/// Reusable storage of the coloring passes.
#[derive(Debug, Default)]
pub struct ColoringWorkspace {
    order: LinearOrder,
    live: MemLiveness,
    bounds: Bounds,
    /// One problem per space (by [`Space::slot`]): each keeps its geometry
    /// and capacity, so a pass never rebuilds (reallocates) one.
    problems: [Option<Problem>; 3],
    locs: Vec<MemLoc>,
    out: Vec<Placement>,
    exact_out: Vec<Placement>,
    gca: GcaWorkspace,
    exact: ExactWorkspace,
    /// The spill rounds' candidates and records.
    round: SplitRound,
    /// The points over the capacity a spill round serves, room for one
    /// per copy of the headroom.
    points: RoundPoints,
    /// The placement affinities of SB and their storage.
    joiner: Joiner,
    /// True when `order` and `live` were handed in as describing the module
    /// the next [`run`] gets ([`ColoringWorkspace::exchange_analyses`]); the
    /// first round of that run then skips recomputing them.
    current: bool,
    /// The spill headroom the passes may use, when the pipeline chose it
    /// ([`ColoringWorkspace::set_spill_limit`]); else [`spill_headroom`]
    /// of the module.
    spill_limit: Option<usize>,
    /// The module before an on-chip pass and the result of its first strategy,
    /// when the pass tries both ([`ColoringWorkspace::reserve_strategies`]).
    strategies: Option<StrategyCopies>,
}

/// Marks the names of what the coloring passes' splits add
/// (`<tensor>_Gca<what><n>`).
const SPILL_PREFIX: &str = "Gca";

/// Spill headroom reserved per on-chip pass: this many spills (two
/// instructions, two locations, two access patterns each) on a module
/// whose SB tensors fit side by side...
pub const SPILL_HEADROOM: usize = 256;

/// ...and this many on one whose SB tensors do not: there the spill rounds
/// may end in access splits, a copy per access of each tensor split.
pub const PRESSURE_SPILL_HEADROOM: usize = 512;

/// Spill copies of headroom per run of positions where an on-chip space's
/// live bound is over its capacity ([`pressure_spill_headroom`]): a run
/// over by about a tensor takes one split, whose copies are one (a plain
/// split), two (a loop-invariant or slice split), or one per access of the
/// tensor and its slot (an access split: an accumulator in a loop has a
/// few accesses). Eight covers an access split of a tensor with seven
/// accesses, or a run over by several tensors split plainly.
pub const COPIES_PER_RUN: usize = 8;

/// The spill headroom of a module under pressure with the default storage
/// budget: [`PRESSURE_SPILL_HEADROOM`] and [`COPIES_PER_RUN`] more per run
/// of positions where SB's or PSUM's live bound is over the capacity
/// (`order` and `live` describe `m`; `bounds` is scratch). A fixed count
/// would run out on a long module with many such runs, each needing its
/// own split; this grows with them, as the storage does with the input.
pub fn pressure_spill_headroom(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    bounds: &mut Bounds,
) -> usize {
    let mut runs = 0usize;
    for space in [Space::Sb, Space::Psum] {
        let cap = m.target.capacity(space);
        bounds.over_capacity(m, order, live, space, cap, |_, _| runs += 1);
    }
    PRESSURE_SPILL_HEADROOM.saturating_add(runs.saturating_mul(COPIES_PER_RUN))
}

/// The spill headroom of `m`'s on-chip passes: [`PRESSURE_SPILL_HEADROOM`]
/// when the area of its user's SB tensors, or of its user's PSUM tensors
/// in whole banks (not the internal ones the passes add, so the answer
/// stays the same as they run), exceeds that space's usable area, else
/// [`SPILL_HEADROOM`]. Tensors that fit side by side never need a spill,
/// so such modules keep the smaller reservation. (The pipeline keeps the
/// smaller one under an explicit storage budget too: see
/// [`ColoringWorkspace::set_spill_limit`].)
pub fn spill_headroom(m: &Module) -> usize {
    let t = &m.target;
    let area = |space: Space| -> u64 {
        m.mems()
            .space
            .keys()
            .filter(|&v| {
                m.mems().space[v] == space && !m.mems().flags[v].contains(MemFlags::INTERNAL)
            })
            .map(|v| {
                let bytes = m.mems().bytes[v] as u64;
                let held = if space == Space::Psum {
                    t.psum_footprint(bytes)
                } else {
                    bytes
                };
                m.mems().partitions[v] as u64 * held
            })
            .sum()
    };
    let sb = t.sb_partitions as u64 * t.sb_usable_bytes as u64;
    let psum = t.psum_partitions as u64 * t.psum_usable_bytes() as u64;
    if area(Space::Sb) > sb || area(Space::Psum) > psum {
        PRESSURE_SPILL_HEADROOM
    } else {
        SPILL_HEADROOM
    }
}

/// Interference edges reserved per buffer the passes may add to a problem
/// after the reservation (for at most `2 × spill_headroom` of them): room
/// for each to meet a few dozen live neighbours.
const EDGES_PER_NEW_BUFFER: u64 = 32;

impl ColoringWorkspace {
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// The module headroom one on-chip coloring pass needs on `m`:
    /// [`spill_headroom`] spills of two instructions, two locations and two
    /// access patterns. The spill code accesses contiguous slices (one dim,
    /// kept inline), so it takes no pooled dims. A slice split's reload and
    /// write-back carry the loop terms its victim's accesses had, so a
    /// module with loop-indexed patterns gets room for two extensions per
    /// spill, one without none.
    pub fn headroom(m: &Module) -> Capacity {
        Self::headroom_with(m, spill_headroom(m))
    }

    /// [`Self::headroom`] for `h` spills.
    pub fn headroom_with(m: &Module, h: usize) -> Capacity {
        Capacity {
            insts: 2 * h,
            aps: 4 * h,
            dims: 0,
            mems: 2 * h,
            names: 2 * h,
            name_bytes: 64 * h,
            ap_exts: if m.counts().ap_exts > 0 { 2 * h } else { 0 },
            // A recomputed memset keeps its constant (zero is not stored).
            imms: if m.counts().imms > 0 { h } else { 0 },
            ..Capacity::default()
        }
    }

    /// The module headroom the coloring pass of `space` needs: none for
    /// DRAM, which never spills (a DRAM spill would save to DRAM: its slot
    /// is live at the peak where the victim was, so it frees nothing);
    /// [`Self::headroom_with`] `h` spills for an on-chip space.
    pub fn headroom_for(m: &Module, space: Space, h: usize) -> Capacity {
        if space.is_on_chip() {
            Self::headroom_with(m, h)
        } else {
            Capacity::default()
        }
    }

    /// Most DRAM locations the coloring pass of `space` may add with a
    /// headroom of `h` spills: a spill slot per spill of an on-chip pass,
    /// none for DRAM.
    pub fn spill_slots(h: usize, space: Space) -> usize {
        if space.is_on_chip() {
            h
        } else {
            0
        }
    }

    /// Makes the spill rounds stop at `h` reload copies per pass, the
    /// headroom the caller reserved ([`Self::headroom_with`]) instead of
    /// [`spill_headroom`] of the module (the pipeline keeps the smaller
    /// one under an explicit storage budget).
    pub fn set_spill_limit(&mut self, h: usize) {
        self.spill_limit = Some(h);
    }

    /// The spill headroom of a pass on `m`.
    fn spill_limit(&self, m: &Module) -> usize {
        self.spill_limit.unwrap_or_else(|| spill_headroom(m))
    }

    /// Sizes everything for `m` (and reserves the spill headroom in `m`).
    /// The analyses and the per-space problems are sized to the module's
    /// whole reserved capacity ([`Module::capacity`]), which also covers the
    /// headroom other passes reserved before: the spill rounds of any pass
    /// then recompute them without allocating. No storage budget.
    pub fn reserve(&mut self, m: &mut Module) {
        self.reserve_for_spaces(m, &Space::ALL, true);
    }

    /// Sizes the storage for the coloring passes of `spaces` only, and the
    /// exact fallback only when `exact` (firmware runs the DRAM colorer alone
    /// and cannot afford storage for passes it never runs). No storage
    /// budget.
    pub fn reserve_for_spaces(&mut self, m: &mut Module, spaces: &[Space], exact: bool) {
        // The module's own headroom, whatever a pipeline set before.
        self.spill_limit = None;
        if spaces.iter().any(|s| s.is_on_chip()) {
            m.reserve(Self::headroom(m));
        }
        let cap = m.capacity();
        // Any location added within the capacity may be a DRAM one.
        let new_dram = cap.mems.saturating_sub(m.num_mems());
        self.reserve_storage(m, spaces, new_dram);
        self.order.reserve(&cap);
        self.live.reserve(&cap);
        self.order.compute(m);
        self.live.compute(m, &self.order);
        let live = core::mem::take(&mut self.live);
        let mut storage = StorageReport::new(StorageBudget::UNLIMITED);
        self.size_problems(m, spaces, exact, new_dram, &live, &mut storage);
        self.live = live;
    }

    /// [`ColoringWorkspace::reserve_for_spaces`] for a caller that reserved
    /// the module's headroom (each pass's [`Self::headroom_for`]), with the
    /// caller's liveness of `m` (which must describe `m` as it is: a
    /// pipeline that already computed it saves the walk), and with the
    /// caller's order and liveness lent around every run
    /// ([`Self::exchange_analyses`], reserved by the caller to the module's
    /// capacity). `new_dram` bounds the DRAM locations the passes before
    /// may add (spill slots). Within what `storage` has left: the
    /// interference graph and the exact search are reserved only when they
    /// fit its allowance ([`StorageReport::allowance`]; see
    /// [`GcaWorkspace::reserve_within`], [`ExactWorkspace::reserve_within`]),
    /// and what did not is recorded in `storage.skipped`. The workspace's own bytes are added to `storage`.
    pub fn reserve_for_spaces_with(
        &mut self,
        m: &mut Module,
        spaces: &[Space],
        exact: bool,
        new_dram: usize,
        live: &MemLiveness,
        storage: &mut StorageReport,
    ) {
        self.reserve_storage(m, spaces, new_dram);
        storage.add("coloring: analyses and tables", self.base_heap_bytes());
        self.size_problems(m, spaces, exact, new_dram, live, storage);
    }

    /// The most buffers the problem of `space` can hold while the passes
    /// run: every location of `m`'s capacity for an on-chip space (its
    /// spill copies and the DMA passes' new tiles are on-chip), the DRAM
    /// locations of `m` and `new_dram` more for DRAM.
    fn buffer_bound(m: &Module, space: Space, new_dram: usize, h: usize) -> usize {
        if space.is_on_chip() {
            m.capacity().mems.max(m.num_mems().saturating_add(2 * h))
        } else {
            let dram = m
                .mems()
                .space
                .values()
                .filter(|&&s| s == Space::Dram)
                .count();
            dram.saturating_add(new_dram)
        }
    }

    /// Reserves the buffers of the passes of `spaces` (the spill tables
    /// only for an on-chip one: DRAM never spills) and, when one is
    /// on-chip, the bounds its spill rounds locate the peak with.
    fn reserve_storage(&mut self, m: &Module, spaces: &[Space], new_dram: usize) {
        let n = spaces
            .iter()
            .map(|&s| Self::buffer_bound(m, s, new_dram, self.spill_limit(m)))
            .max()
            .unwrap_or(0);
        self.locs.reserve(n);
        self.out.reserve(n);
        self.exact_out.reserve(n);
        if spaces.iter().any(|s| s.is_on_chip()) {
            let cap = m.capacity();
            self.bounds.reserve(&cap);
            let limit = self.spill_limit(m);
            self.round.reserve(n, limit);
            // Live sets: room for each location at two points on average
            // (a round leaves the points past it to the next).
            self.points.reserve(n, n.saturating_mul(2), limit);
        }
    }

    /// Heap bytes of everything but the solvers and the problems.
    fn base_heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.live,
            self.bounds,
            self.locs,
            self.out,
            self.exact_out,
            self.round,
            self.points
        )
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        let problems = self
            .problems
            .iter()
            .flatten()
            .fold(0u64, |n, p| n.saturating_add(p.heap_bytes()));
        crate::heap_bytes!(self.gca, self.exact, self.strategies)
            .saturating_add(self.base_heap_bytes())
            .saturating_add(problems)
    }

    /// Makes the on-chip passes on `m` able to try both spill orders (and
    /// keep the cheaper result, or the one that fits): keeps two copies of
    /// `m` with its whole reserved capacity (the module before the pass and
    /// the first result), so that saving and restoring never allocate; call
    /// it after every reservation of `m`. Returns their heap bytes.
    pub fn reserve_strategies(&mut self, m: &Module) -> u64 {
        StrategyCopies::reserve(&mut self.strategies, m)
    }

    /// The module as the last on-chip pass with strategy copies got it
    /// (`None` when the workspace keeps none). The pipeline runs the linear
    /// scan from it too where SB must spill (`SbPortfolio` in the
    /// pipeline).
    pub fn module_before_pass(&self) -> Option<&Module> {
        self.strategies.as_ref().map(|k| &k.before)
    }

    /// Drops the problem of `space` (a one-shot run after its last pass
    /// that colors `space`). A later run on `space` would build a problem
    /// anew, allocating: reserve the workspace again before one.
    pub fn release_problem(&mut self, space: Space) {
        self.problems[space.slot()] = None;
    }

    /// Drops the copies [`Self::reserve_strategies`] kept (a one-shot run
    /// after its last on-chip pass: the checks then run without them).
    pub fn release_strategies(&mut self) {
        self.strategies = None;
    }

    /// Builds each space's problem once, to size the solvers from it, within
    /// what `storage` has left. The linear part comes first, for every
    /// space: the problems, and the solvers' per-buffer tables (a
    /// reservation with no allowance reserves only those). The superlinear
    /// parts (the interference graphs, the search's grid and stacks) then
    /// share what the budget leaves, space by space in the same order, so
    /// that the whole stays within the budget whenever the linear part does.
    fn size_problems(
        &mut self,
        m: &Module,
        spaces: &[Space],
        exact: bool,
        new_dram: usize,
        live: &MemLiveness,
        storage: &mut StorageReport,
    ) {
        // Buffers the passes may add before a space is colored: its own
        // spill copies on-chip, the spill slots in DRAM.
        let h = self.spill_limit(m);
        let added = |space: Space| {
            if space.is_on_chip() {
                2 * h
            } else {
                new_dram
            }
        };
        let edges = |space: Space| EDGES_PER_NEW_BUFFER * added(space).min(2 * h) as u64;
        // Nothing to place (every buffer fixed): no search to size.
        let to_place = |p: &Problem| p.buffers().iter().any(|b| b.pin.is_none() && !b.is_void());
        let mut filled = [false; 3];
        let mut tables = 0u64;
        for &space in spaces {
            let mut p = new_problem(
                m,
                space,
                Self::buffer_bound(m, space, new_dram, self.spill_limit(m)),
            );
            storage.add(problem_part(space), p.heap_bytes());
            if fill(m, space, live, &mut p, &mut self.locs).is_ok() {
                filled[space.slot()] = true;
                tables += budgeted::graph_tables(&mut self.gca, &p, added(space));
                if exact && to_place(&p) {
                    let before = self.exact.heap_bytes();
                    budgeted::search_tables(&mut self.exact, &p);
                    self.exact.reserve_headroom(p.len() + added(space));
                    tables += self.exact.heap_bytes() - before;
                }
            }
            self.problems[space.slot()] = Some(p);
        }
        storage.add("coloring: per-buffer tables of the solvers", tables);
        // Every space's graph before any search: the colorer is the
        // allocator, the search its fallback.
        for &space in spaces {
            if !filled[space.slot()] {
                continue;
            }
            let Some(p) = self.problems[space.slot()].take() else {
                continue;
            };
            let graph = budgeted::graph(
                &mut self.gca,
                &p,
                added(space),
                edges(space),
                storage,
                graph_method(space),
            );
            storage.add(graph_part(space), graph);
            self.problems[space.slot()] = Some(p);
        }
        if !exact {
            return;
        }
        // Then each search, with an equal share of what is left for the
        // searches still to come (the first would otherwise take it all).
        let searched: ArrayVec<Space, 3> = spaces
            .iter()
            .copied()
            .filter(|s| filled[s.slot()] && self.problems[s.slot()].as_ref().is_some_and(to_place))
            .collect();
        for (k, &space) in searched.iter().enumerate() {
            let Some(p) = self.problems[space.slot()].take() else {
                continue;
            };
            let search = budgeted::search(
                &mut self.exact,
                &p,
                storage,
                (searched.len() - k) as u64,
                search_method(space),
                "the coloring allocator's placement",
            );
            storage.add(search_part(space), search);
            self.problems[space.slot()] = Some(p);
        }
    }

    /// The affinity pairs the next SB run tries to honour (filled by the
    /// caller, within the room [`Self::reserve_affinity`] made).
    pub fn affinity_pairs_mut(&mut self) -> &mut Vec<crate::dma::affinity::AffinityPair> {
        &mut self.joiner.pairs
    }

    /// The coalescing candidates the last SB coloring took as affinities
    /// (empty without `--dma-affinity on`).
    pub fn affinity_pairs(&self) -> &[crate::dma::affinity::AffinityPair] {
        &self.joiner.pairs
    }

    /// Reserves the affinity tables for `m` (its capacity of locations and
    /// instructions: at most one pair per DMA). Only a run with affinities
    /// on needs them; the others reserve nothing for them.
    pub fn reserve_affinity(&mut self, m: &Module, storage: &mut StorageReport) {
        let cap = m.capacity();
        let buffers = Self::buffer_bound(m, Space::Sb, 0, self.spill_limit(m));
        let before = self.joiner.heap_bytes();
        self.joiner.reserve(
            &m.target,
            m.target.capacity(Space::Sb),
            cap.insts,
            buffers,
            cap.mems.max(m.num_mems()),
        );
        storage.add(
            "coloring: placement affinities (SB)",
            self.joiner.heap_bytes() - before,
        );
    }

    /// Exchanges the workspace's program order and liveness with the
    /// caller's (a swap: no copy, no allocation; the side the run computes
    /// into, the workspace's after the swap, must be reserved to the
    /// module's capacity, the other may be empty). With `current`, the caller promises
    /// that what the workspace now holds describes the module the next
    /// [`run`] gets, and that run's first round does not recompute them.
    /// After a run without spill rounds (`ColoringReport::spill_rounds ==
    /// 0`) the workspace's analyses describe the module as the run left it:
    /// the pass only placed locations, and placements do not enter them.
    pub fn exchange_analyses(
        &mut self,
        order: &mut LinearOrder,
        live: &mut MemLiveness,
        current: bool,
    ) {
        core::mem::swap(&mut self.order, order);
        core::mem::swap(&mut self.live, live);
        self.current = current;
    }
}

/// The storage-report names of one space's parts (static strings: the
/// report is fixed-capacity and allocation-free).
const fn problem_part(space: Space) -> &'static str {
    per_space(
        space,
        [
            "coloring: problem (SB)",
            "coloring: problem (PSUM)",
            "coloring: problem (DRAM)",
        ],
    )
}

const fn graph_part(space: Space) -> &'static str {
    per_space(
        space,
        [
            "coloring: interference graph (SB)",
            "coloring: interference graph (PSUM)",
            "coloring: interference graph (DRAM)",
        ],
    )
}

const fn graph_method(space: Space) -> &'static str {
    per_space(
        space,
        [
            "the interference graph of coloring_allocator_sb",
            "the interference graph of coloring_allocator_psum",
            "the interference graph of coloring_allocator_dram",
        ],
    )
}

const fn search_part(space: Space) -> &'static str {
    per_space(
        space,
        [
            "coloring: exact search (SB)",
            "coloring: exact search (PSUM)",
            "coloring: exact search (DRAM)",
        ],
    )
}

const fn search_method(space: Space) -> &'static str {
    per_space(
        space,
        [
            "the exact placement search of SB",
            "the exact placement search of PSUM",
            "the exact placement search of DRAM",
        ],
    )
}

/// Picks `space`'s entry of a name table written `[SB, PSUM, DRAM]`; the
/// names stay whole literals because the storage report only takes
/// `&'static str` (it must not format or allocate).
const fn per_space(space: Space, [sb, psum, dram]: [&'static str; 3]) -> &'static str {
    match space {
        Space::Sb => sb,
        Space::Psum => psum,
        Space::Dram => dram,
    }
}

fn new_problem(m: &Module, space: Space, reserve: usize) -> Problem {
    let cap = m.target.capacity(space);
    match space {
        Space::Dram => Problem::linear(cap, reserve),
        _ => Problem::partitioned(&m.target, cap, reserve),
    }
}

/// The pass's name in pipelines and reports.
pub const fn pass_name(space: Space) -> &'static str {
    per_space(
        space,
        [
            "coloring_allocator_sb",
            "coloring_allocator_psum",
            "coloring_allocator_dram",
        ],
    )
}

/// Fills `p` (cleared) with the buffers of `space`; `locs[i]` is buffer i's location.
fn fill(
    m: &Module,
    space: Space,
    live: &MemLiveness,
    p: &mut Problem,
    locs: &mut Vec<MemLoc>,
) -> Result<(), ColoringError> {
    p.clear();
    locs.clear();
    let t = &m.target;
    let bank = t.psum_bank_bytes.max(1) as u64;
    for v in m.mems().space.keys() {
        if m.mems().space[v] != space {
            continue;
        }
        let flags = m.mems().flags[v];
        let placed = m.is_placed(v);
        if space == Space::Dram && !placed && flags.intersects(MemFlags::INPUT | MemFlags::OUTPUT) {
            continue;
        }
        let Some(iv) = live.interval(v) else { continue };
        let parts = m.mems().partitions[v];
        let bytes = m.mems().bytes[v] as u64;
        let (size, align, partitions) = match space {
            Space::Sb => (bytes, m.mems().align[v].max(1) as u64, parts),
            Space::Psum => {
                let banks = bytes.div_ceil(bank);
                if banks > t.psum_max_banks_per_tensor as u64 {
                    return Err(ColoringError::Unplaceable {
                        tensor: v,
                        why: "a PSUM tensor larger than the banks one tensor may span",
                    });
                }
                (banks * bank, bank, parts)
            }
            Space::Dram => (parts as u64 * bytes, m.mems().align[v].max(1) as u64, 1),
        };
        let pin = placed.then(|| Placement {
            offset: m.mems().offset[v],
            base: if space == Space::Dram {
                0
            } else {
                m.mems().base_partition[v]
            },
        });
        p.push(Buffer {
            lower: iv.start as u64,
            upper: iv.end as u64 + 1,
            size,
            align,
            partitions,
            pin,
        })
        .map_err(|e| match e {
            ProblemError::Full { .. } => ColoringError::Problem(e),
            // A refused buffer is this tensor: named, not by its index.
            _ => ColoringError::Unplaceable {
                tensor: v,
                why: e.reason(),
            },
        })?;
        locs.push(v);
    }
    Ok(())
}

/// Runs `coloring_allocator_<space>` on `m`.
pub fn run(
    m: &mut Module,
    space: Space,
    opts: &ColoringOptions,
    ws: &mut ColoringWorkspace,
    clock: &mut dyn Clock,
) -> Result<ColoringReport, ColoringError> {
    let mut report = ColoringReport {
        capacity: m.target.capacity(space),
        ..Default::default()
    };
    // Without a reserve for this space (a caller that skipped
    // `ColoringWorkspace::reserve`), the problem is made here.
    let mut problem = ws.problems[space.slot()]
        .take()
        .unwrap_or_else(|| new_problem(m, space, m.num_mems()));
    let on_chip = space.is_on_chip();
    let strategies = if on_chip { ws.strategies.take() } else { None };
    let access_first = on_chip && opts.strategy == SpillStrategy::Access;
    let result = match strategies {
        None => color_rounds(
            m,
            space,
            opts,
            ws,
            clock,
            &mut problem,
            &mut report,
            access_first,
        )
        .map(|()| report),
        Some(mut kept) => {
            let r = both_orders(m, space, opts, ws, clock, &mut problem, report, &mut kept);
            ws.strategies = Some(kept);
            r
        }
    };
    ws.problems[space.slot()] = Some(problem);
    result
}

/// Colors `space` (SB or PSUM) in the order of [`ColoringOptions::strategy`]
/// (live-range splits first but for [`SpillStrategy::Access`]), then from
/// the same module in the other: with [`SpillStrategy::Best`] always, and
/// keeps the result whose spills cost the fewest DMA cycles (then bytes),
/// the first one's when it needs no spill; with the others only where the
/// first failed (a failure above the floor is not a preference). Of two
/// failures, the first one's stands. `kept` holds the module before the
/// pass and the first result.
#[allow(clippy::too_many_arguments)]
fn both_orders(
    m: &mut Module,
    space: Space,
    opts: &ColoringOptions,
    ws: &mut ColoringWorkspace,
    clock: &mut dyn Clock,
    problem: &mut Problem,
    empty: ColoringReport,
    kept: &mut StrategyCopies,
) -> Result<ColoringReport, ColoringError> {
    let StrategyCopies { before, first } = kept;
    let cheapest = opts.strategy == SpillStrategy::Best;
    let access_first = opts.strategy == SpillStrategy::Access;
    before.copy_from(m);
    let mut a = empty;
    let ra = color_rounds(m, space, opts, ws, clock, problem, &mut a, access_first);
    if ra.is_ok() && (a.spills == 0 || !cheapest) {
        return ra.map(|()| a);
    }
    first.copy_from(m);
    m.copy_from(before);
    ws.current = false;
    let mut b = empty;
    let rb = color_rounds(m, space, opts, ws, clock, problem, &mut b, !access_first);
    let cost = |r: &ColoringReport| (r.spill_cycles, r.spill_bytes);
    match (ra, rb) {
        (Ok(()), Ok(())) if cost(&b) < cost(&a) => Ok(b),
        (Err(_), Ok(())) => Ok(b),
        (ra, _) => {
            m.copy_from(first);
            // The analyses describe the second result: stale.
            ws.current = false;
            ra.map(|()| a)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn color_rounds(
    m: &mut Module,
    space: Space,
    opts: &ColoringOptions,
    ws: &mut ColoringWorkspace,
    clock: &mut dyn Clock,
    problem: &mut Problem,
    report: &mut ColoringReport,
    access_first: bool,
) -> Result<(), ColoringError> {
    let cap = report.capacity;
    loop {
        // Handed-in analyses serve the first round only: a spill round
        // changes the program.
        if !core::mem::take(&mut ws.current) {
            ws.order.compute(m);
            ws.live.compute(m, &ws.order);
        }
        // The problem keeps the geometry of its space.
        if problem.is_partitioned() != (space != Space::Dram) || problem.capacity != cap {
            *problem = new_problem(m, space, ws.locs.capacity());
        }
        fill(m, space, &ws.live, problem, &mut ws.locs)?;
        ws.out.clear();
        ws.out.resize(problem.len(), Placement::default());
        let g: GcaOutcome = ws.gca.solve(problem, &opts.gca, &mut ws.out);
        report.sweeps = g.sweeps;
        report.replays = g.replays;
        report.edges = g.edges;
        report.lower_bound = g.lower_bound;
        report.peak = g.peak;
        report.exact_used = false;
        let mut fits = g.peak <= cap;
        let try_exact =
            (!fits && g.lower_bound <= cap) || (opts.prefer_exact && g.peak > g.lower_bound);
        if let (true, Some(budget)) = (try_exact, opts.exact) {
            let objective = if opts.prefer_exact {
                Objective::MinimizePeak
            } else {
                Objective::Fit
            };
            ws.exact_out.clear();
            ws.exact_out.resize(problem.len(), Placement::default());
            let o = ws.exact.solve(
                problem,
                &ExactOptions {
                    budget,
                    objective,
                    ..ExactOptions::default()
                },
                clock,
                &mut ws.exact_out,
            );
            report.exact_status = Some(o.status);
            if o.peak <= cap && (!fits || o.peak < report.peak) {
                fits = true;
                report.peak = o.peak;
                report.exact_used = true;
                ws.out.copy_from_slice(&ws.exact_out);
            }
        }
        if fits {
            if opts.affinity && space == Space::Sb {
                let limit = cap.min(
                    report
                        .peak
                        .saturating_add(report.peak * opts.affinity_slack_pct as u64 / 100),
                );
                let mut a = ws.joiner.honour(
                    problem,
                    &ws.locs,
                    &mut ws.gca,
                    &opts.gca,
                    limit,
                    opts.affinity_trials,
                    &mut ws.out,
                );
                a.plain_peak = report.peak;
                if a.honoured > 0 {
                    report.peak = peak(problem, &ws.out);
                    report.exact_used = false;
                }
                report.affinity = Some(a);
            }
            write_back(m, space, problem, &ws.locs, &ws.out);
            report.pins = problem.buffers().iter().filter(|b| b.pin.is_some()).count() as u32;
            report.placed = problem.len() as u32 - report.pins;
            return Ok(());
        }
        // Spill round: around the live bound's peaks while the bound does
        // not fit (every run of positions over the capacity at once, as far
        // as the round can serve them: see `SplitRound::run_points`); once
        // it does (the placement fails by fragmentation elsewhere), or when
        // nothing can be split at the bound's peaks, around the point where
        // the placement ran over.
        ws.bounds.compute(m, &ws.order, &ws.live);
        let bound_at = ws.bounds.space(space).peak_pos;
        let over = overflow_point(problem, &ws.out, cap);
        let at = match over {
            Some((p, _)) if g.lower_bound <= cap => p,
            _ => bound_at,
        };
        let out_of_rounds = report.spill_rounds >= opts.max_spill_rounds.saturating_mul(2);
        // DRAM does not spill: see [`ColoringWorkspace::headroom_for`].
        let spills = opts.dma_optlevel >= 0 && space.is_on_chip();
        let spilled = if out_of_rounds || !spills {
            0
        } else {
            let mut points = core::mem::take(&mut ws.points);
            points.list.clear();
            if g.lower_bound > cap {
                // Each point asks for its bound's excess and what the
                // coloring lost to fragmentation (its peak over the bound),
                // as the one point of a round did before: the coloring
                // after the round says what fragmentation is left.
                let margin = g.peak.saturating_sub(g.lower_bound);
                points.fill_runs(&mut ws.bounds, m, &ws.order, &ws.live, space, margin);
            }
            // One point at least (a workspace that was not reserved holds
            // room for none: it serves one point per round).
            if points.list.is_empty() {
                points.list.push((at, g.peak.saturating_sub(cap)));
            }
            points.prepare(m, &ws.live, space);
            let r = spill_at_points(
                m,
                space,
                opts,
                ws,
                &mut points,
                over,
                at,
                g.peak,
                access_first,
                report,
            );
            ws.points = points;
            r?
        };
        if spilled > 0 {
            report.spill_rounds += 1;
            continue;
        }
        // Why the rounds stop. Every spill inserts at least one copy: with
        // none left, no spill fits the headroom.
        let limit = ws.spill_limit(m);
        let stop = if opts.dma_optlevel < 0 {
            SpillStop::Off
        } else if out_of_rounds {
            SpillStop::RoundsSpent
        } else if report.reloads as usize >= limit {
            SpillStop::HeadroomSpent {
                limit: limit as u32,
            }
        } else {
            SpillStop::NothingToSplit
        };
        let (live, tensor) = live_at(m, space, &ws.live, at);
        return Err(ColoringError::DoesNotFit {
            space,
            peak: g.peak,
            lower_bound: g.lower_bound,
            capacity: cap,
            at,
            live,
            tensor,
            spill_rounds: report.spill_rounds,
            inst: if (at as usize) < ws.order.len() {
                ws.order.inst_at(at)
            } else {
                Inst::INVALID
            },
            stop,
        });
    }
}

/// One spill round of an on-chip space at `points` (the runs over the
/// capacity, or the one point `at` where the placement ran over;
/// prepared); `over` is where the placement ran over and `peak` its
/// height. Returns how many tensors it split: none when nothing could be.
#[allow(clippy::too_many_arguments)]
fn spill_at_points(
    m: &mut Module,
    space: Space,
    opts: &ColoringOptions,
    ws: &mut ColoringWorkspace,
    points: &mut RoundPoints,
    over: Option<(u32, u64)>,
    at: u32,
    peak: u64,
    access_first: bool,
    report: &mut ColoringReport,
) -> Result<u32, ColoringError> {
    // Past `max_spill_rounds`, only access splits (each removes a tensor
    // from the space for good, so they end): as many rounds again.
    let ordinary = report.spill_rounds < opts.max_spill_rounds;
    let mut spilled = if access_first {
        access_split_round(m, space, ws, points, report)?
    } else {
        0
    };
    if spilled == 0 && ordinary {
        spilled = spill_round(m, space, opts, ws, points, report)?;
    }
    if spilled == 0 && ordinary {
        // The other point, if it differs.
        let bound_at = ws.bounds.space(space).peak_pos;
        let other = match over {
            Some((p, _)) if p != at => Some(p),
            _ => (bound_at != at).then_some(bound_at),
        };
        if let Some(p) = other {
            points.list.clear();
            points.list.push((p, peak.saturating_sub(report.capacity)));
            points.prepare(m, &ws.live, space);
            spilled = spill_round(m, space, opts, ws, points, report)?;
        }
    }
    if spilled == 0 {
        // The last resort: tensors live there spilled at every access
        // (in PSUM too: an accumulator is reloaded before each
        // instruction that accumulates into it and stored after).
        spilled = access_split_round(m, space, ws, points, report)?;
    }
    Ok(spilled)
}

fn write_back(m: &mut Module, space: Space, p: &Problem, locs: &[MemLoc], out: &[Placement]) {
    for (i, (&v, b)) in locs.iter().zip(p.buffers()).enumerate() {
        if b.pin.is_some() {
            continue;
        }
        let base = if space == Space::Dram { 0 } else { out[i].base };
        m.place(v, base, out[i].offset);
    }
}

/// Where the placement `out` of `p` runs over the capacity `cap`: the
/// instant, within the lifetime of the buffer that reaches highest, at
/// which the buffers sharing partitions with it hold the most bytes (the
/// point where splitting one of them gives the colorer the most room),
/// and by how much that buffer runs over. `None` when nothing runs over.
/// The most congested instant of an interval is the start of one of the
/// buffers live in it, so only those are measured: the work is the square
/// of the buffers overlapping that one, on the failure path only.
fn overflow_point(p: &Problem, out: &[Placement], cap: u64) -> Option<(u32, u64)> {
    let bufs = p.buffers();
    let place = |i: usize| {
        bufs.get(i)
            .and_then(|b| b.pin)
            .or_else(|| out.get(i).copied())
            .unwrap_or_default()
    };
    let (top, worst) = bufs
        .iter()
        .enumerate()
        .filter(|(_, b)| !b.is_void())
        .map(|(i, b)| (place(i).offset + b.size, i))
        .max()?;
    if top <= cap {
        return None;
    }
    let w = bufs.get(worst)?;
    let base = place(worst).base as u64;
    let rows = |i: usize, b: &Buffer| {
        let lo = place(i).base as u64;
        lo < base + w.partitions as u64 && base < lo + b.partitions as u64
    };
    let overlapping =
        |i: usize, b: &Buffer| !b.is_void() && b.lower < w.upper && w.lower < b.upper && rows(i, b);
    let mut best = (0u64, w.lower);
    for (i, b) in bufs.iter().enumerate() {
        if !overlapping(i, b) {
            continue;
        }
        let q = b.lower.max(w.lower);
        let held: u64 = bufs
            .iter()
            .enumerate()
            .filter(|&(j, c)| overlapping(j, c) && c.lower <= q && q < c.upper)
            .map(|(_, c)| c.size)
            .sum();
        if held > best.0 || (held == best.0 && q < best.1) {
            best = (held, q);
        }
    }
    Some((u32::try_from(best.1).ok()?, top - cap))
}

/// Locations of `space` live at `at`, and the largest of them.
fn live_at(m: &Module, space: Space, live: &MemLiveness, at: u32) -> (u32, MemLoc) {
    let mut n = 0;
    let mut best = (0u64, MemLoc::INVALID);
    for v in m.mems().space.keys() {
        if m.mems().space[v] != space || !live.interval(v).is_some_and(|iv| iv.contains(at)) {
            continue;
        }
        n += 1;
        let area = m.mems().partitions[v] as u64 * m.mems().bytes[v] as u64;
        if area > best.0 {
            best = (area, v);
        }
    }
    (n, best.1)
}

/// Splits victims around each of `points` that the round can serve
/// ([`SplitRound::run_points`]); returns how many were spilled.
fn spill_round(
    m: &mut Module,
    space: Space,
    opts: &ColoringOptions,
    ws: &mut ColoringWorkspace,
    points: &mut RoundPoints,
    report: &mut ColoringReport,
) -> Result<u32, ColoringError> {
    let limit = ws.spill_limit(m);
    let params = RoundParams {
        space,
        at: 0,
        overflow: 0,
        reloads_left: limit.saturating_sub(report.reloads as usize),
        by_bytes: opts.dma_optlevel == 0,
        first: report.spills,
        prefix: SPILL_PREFIX,
    };
    let o = ws
        .round
        .run_points(m, &ws.order, &ws.live, points, &params)?;
    report.reloads += o.reloads;
    report.spills += o.spills;
    report.remats += o.remats;
    report.spill_bytes += o.bytes;
    report.spill_cycles += o.cycles;
    Ok(o.spills)
}

/// Splits tensors live at each of `points` at every access
/// ([`access_split::split_at_points`]): at each the most bytes freed there
/// first, until its overflow is freed or the spill headroom ends; returns
/// how many were split. Each split counts as a spill, its copies as
/// reloads (one headroom slot each, and one for the slot). A PSUM tensor's
/// slot is in SB where the SB bound of the round (`ws.bounds`, computed
/// before it) and the SB slots made in the round leave room
/// ([`access_split::slot_space`]).
fn access_split_round(
    m: &mut Module,
    space: Space,
    ws: &mut ColoringWorkspace,
    points: &mut RoundPoints,
    report: &mut ColoringReport,
) -> Result<u32, ColoringError> {
    let limit = ws.spill_limit(m);
    let names = access_split::SplitNames {
        prefix: SPILL_PREFIX,
        first: report.spills,
        copies_left: limit.saturating_sub(report.reloads as usize) as u32,
    };
    let sb_bound = ws.bounds.space(Space::Sb).lower_bound();
    let o = access_split::split_at_points(m, &ws.order, &ws.live, space, points, sb_bound, &names)?;
    report.reloads += o.copies;
    report.spills += o.splits;
    report.spill_bytes += o.moved;
    report.spill_cycles += o.cycles;
    Ok(o.splits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, InstFlags, Opcode, SubOp};
    use crate::mem::exact::NoClock;
    use crate::testing::{add, assert_sound, dram_io, mem, tiles};
    use crate::Target;

    fn check(original: &Module, m: &Module) {
        assert_sound(original, m);
    }

    /// Runs the pass over `space` with the default options and no clock.
    fn color(m: &mut Module, space: Space, ws: &mut ColoringWorkspace) -> ColoringReport {
        run(m, space, &ColoringOptions::default(), ws, &mut NoClock).unwrap()
    }

    /// A chain of tiles where each tile lives for two steps, plus a long-lived
    /// weight: the colorer must reuse space.
    fn chain(target: Target, tiles: u32, bytes: u32) -> Module {
        let mut m = Module::new(target);
        let mut b = Builder::new(&mut m);
        let [x, y] = dram_io(&mut b, 128, bytes, 4);
        let w = mem(&mut b, "w", Space::Sb, 128, bytes, 4, MemFlags::empty());
        let mut ts = Vec::new();
        for k in 0..tiles {
            ts.push(
                b.mem(
                    &alloc::format!("t{k}"),
                    Space::Sb,
                    128,
                    bytes,
                    4,
                    MemFlags::empty(),
                )
                .unwrap(),
            );
        }
        b.func("main").unwrap();
        b.load(w, x, 0).unwrap();
        b.compute(
            Opcode::Activation,
            SubOp::Exp,
            ts[0],
            &[w],
            InstFlags::empty(),
        )
        .unwrap();
        for k in 1..tiles as usize {
            b.compute(
                Opcode::TensorTensor,
                SubOp::Add,
                ts[k],
                &[ts[k - 1], w],
                InstFlags::empty(),
            )
            .unwrap();
        }
        b.save(y, ts[tiles as usize - 1], 0).unwrap();
        m
    }

    #[test]
    fn places_sb_with_reuse_and_passes_the_checks() {
        let original = chain(Target::default(), 20, 4096);
        let mut m = original.clone();
        let mut ws = ColoringWorkspace::new();
        ws.reserve(&mut m);
        let r = color(&mut m, Space::Sb, &mut ws);
        // w + two tiles live at a time: 3 × 4096.
        assert_eq!(r.lower_bound, 3 * 4096);
        assert_eq!(r.peak, 3 * 4096);
        assert_eq!(r.spills, 0);
        check(&original, &m);
    }

    /// Long-lived tensors a, b are read again at the end; a tight space
    /// forces them out around the middle.
    fn four_in_three() -> Module {
        let mut t = Target::default();
        t.set("sb-bytes", 3 * 4096).unwrap();
        let mut m = Module::new(t);
        let mut b = Builder::new(&mut m);
        let [x, y] = dram_io(&mut b, 128, 4096, 4);
        let [a, c, d, e, f] = tiles(&mut b, Space::Sb, ["a", "c", "d", "e", "f"], 128, 4096, 4);
        b.func("main").unwrap();
        b.load(a, x, 0).unwrap(); // 0
        b.op(Opcode::Memset, &[b.full(c)], &[]).unwrap(); // 1
        b.op(Opcode::Memset, &[b.full(d)], &[]).unwrap(); // 2
                                                          // a, c, d, e live here: four tiles in a space of three.
        add(&mut b, e, &[c, d]); // 3
        add(&mut b, f, &[e, a]); // 4
        b.save(y, f, 0).unwrap(); // 5
        m
    }

    /// [`four_in_three`]'s SB pass with `rounds` spill rounds and a spill
    /// headroom of `headroom` copies (`None`: the module's), which must
    /// fail: the error, and its text.
    fn four_in_three_fails(
        rounds: u32,
        headroom: Option<usize>,
    ) -> (ColoringError, alloc::string::String) {
        let mut m = four_in_three();
        let mut ws = ColoringWorkspace::new();
        ws.reserve(&mut m);
        if let Some(h) = headroom {
            ws.set_spill_limit(h);
        }
        let opts = ColoringOptions {
            max_spill_rounds: rounds,
            exact: None,
            ..ColoringOptions::default()
        };
        let e = run(&mut m, Space::Sb, &opts, &mut ws, &mut NoClock).unwrap_err();
        let text = alloc::format!("{}", e.display(&m));
        (e, text)
    }

    #[test]
    fn a_failure_for_want_of_spill_headroom_says_so() {
        let (e, text) = four_in_three_fails(ColoringOptions::default().max_spill_rounds, Some(0));
        assert!(
            matches!(
                e,
                ColoringError::DoesNotFit {
                    stop: SpillStop::HeadroomSpent { limit: 0 },
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            text.contains("spill headroom (0 inserted copies, reserved before it ran) ran out"),
            "{text}"
        );
    }

    #[test]
    fn a_failure_for_want_of_spill_rounds_says_so() {
        let (e, text) = four_in_three_fails(0, None);
        assert!(
            matches!(
                e,
                ColoringError::DoesNotFit {
                    stop: SpillStop::RoundsSpent,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            text.contains("spill rounds (each serves the points over the capacity that it can at once) ran out"),
            "{text}"
        );
    }

    #[test]
    fn spills_when_the_space_is_too_small_and_keeps_data_flow() {
        let original = four_in_three();
        for level in [0i8, 1, 2] {
            let mut m = original.clone();
            let mut ws = ColoringWorkspace::new();
            ws.reserve(&mut m);
            let opts = ColoringOptions {
                dma_optlevel: level,
                exact: None,
                ..ColoringOptions::default()
            };
            let r = run(&mut m, Space::Sb, &opts, &mut ws, &mut NoClock).unwrap();
            assert!(r.spills >= 1, "level {level}");
            assert!(r.peak <= 3 * 4096);
            // Place the DRAM slots, then everything must check.
            run(&mut m, Space::Dram, &opts, &mut ws, &mut NoClock).unwrap();
            check(&original, &m);
            {
                // a is an unmodified load of x: rematerialized, no store.
                let stores = m
                    .program_order()
                    .filter(|&i| m.insts().flags[i].contains(InstFlags::SPILL))
                    .count();
                assert_eq!(stores, 0);
            }
        }
        let mut m = original.clone();
        let mut ws = ColoringWorkspace::new();
        ws.reserve(&mut m);
        let opts = ColoringOptions {
            dma_optlevel: -1,
            exact: None,
            ..ColoringOptions::default()
        };
        let err = run(&mut m, Space::Sb, &opts, &mut ws, &mut NoClock).unwrap_err();
        let text = alloc::format!("{}", err.display(&m));
        assert!(text.contains("coloring allocation failed in SB"), "{text}");
        assert!(
            text.contains("needs 16384 bytes per partition, the space has 12288"),
            "{text}"
        );
    }

    #[test]
    fn psum_is_bank_granular() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let s = mem(&mut b, "s", Space::Sb, 128, 512, 4, MemFlags::empty());
        let [p0, p1] = tiles(&mut b, Space::Psum, ["p0", "p1"], 128, 512, 4);
        let o = mem(&mut b, "o", Space::Sb, 128, 512, 4, MemFlags::empty());
        b.func("f").unwrap();
        b.op(Opcode::Memset, &[b.full(s)], &[]).unwrap();
        b.compute(Opcode::Matmul, SubOp::None, p0, &[s], InstFlags::empty())
            .unwrap();
        b.compute(Opcode::Matmul, SubOp::None, p1, &[s], InstFlags::empty())
            .unwrap();
        add(&mut b, o, &[p0, p1]);
        let original = m.clone();
        let mut ws = ColoringWorkspace::new();
        ws.reserve(&mut m);
        let r = color(&mut m, Space::Psum, &mut ws);
        assert_eq!(r.peak, 2 * 2048);
        assert_ne!(m.mems().bank[p0], m.mems().bank[p1]);
        color(&mut m, Space::Sb, &mut ws);
        check(&original, &m);
    }

    /// An SB module whose tensors are the pieces of a cut rectangle (a
    /// perfect packing at `sb-bytes`): tensor i is written (memset) at its
    /// first instant and saved to its own DRAM output at its last, events
    /// ordered by time with ends before starts, so the overlaps, and hence
    /// the lower bound, are those of the cut.
    fn packing_module(seed: u64, pieces: usize) -> Option<Module> {
        use crate::gen::dsa::{perfect_packing, PerfectPacking};
        let params = PerfectPacking {
            buffers: pieces,
            capacity: 64 * 1024,
            horizon: 48,
            unit: 1024,
        };
        let mut p = Problem::linear(0, pieces);
        let mut known = Vec::new();
        perfect_packing(&params, seed, &mut p, &mut known).ok()?;
        let mut t = Target::default();
        t.set("sb-bytes", params.capacity).ok()?;
        let mut m = Module::new(t);
        let mut b = Builder::new(&mut m);
        let mut ts = Vec::new();
        for (i, buf) in p.buffers().iter().enumerate() {
            // The buffer's output in DRAM and its tile in SB, of one size.
            let mut tensor =
                |name: &str, space, flags| b.mem(name, space, 128, buf.size as u32, 4, flags).ok();
            let y = tensor(&alloc::format!("y{i}"), Space::Dram, MemFlags::OUTPUT)?;
            let v = tensor(&alloc::format!("t{i}"), Space::Sb, MemFlags::empty())?;
            ts.push((y, v));
        }
        // (time, 0 = end / 1 = start, tensor)
        let mut events = Vec::new();
        for (i, buf) in p.buffers().iter().enumerate() {
            events.push((buf.lower, 1, i));
            events.push((buf.upper, 0, i));
        }
        events.sort_unstable();
        b.func("main").ok()?;
        for (_, kind, i) in events {
            let (y, v) = ts[i];
            if kind == 1 {
                b.op(Opcode::Memset, &[b.full(v)], &[]).ok()?;
            } else {
                b.save(y, v, 0).ok()?;
            }
        }
        Some(m)
    }

    #[test]
    fn exact_search_fits_what_the_colorer_cannot_before_spilling() {
        let no_spill = |exact| ColoringOptions {
            dma_optlevel: -1,
            exact,
            ..ColoringOptions::default()
        };
        let mut cases = 0;
        for seed in 0..12 {
            let Some(original) = packing_module(seed, 30) else {
                continue;
            };
            // Only the modules the colorer alone cannot fit.
            let mut m = original.clone();
            let mut ws = ColoringWorkspace::new();
            ws.reserve(&mut m);
            if run(&mut m, Space::Sb, &no_spill(None), &mut ws, &mut NoClock).is_ok() {
                continue;
            }
            cases += 1;
            let mut m = original.clone();
            let mut ws = ColoringWorkspace::new();
            ws.reserve(&mut m);
            let opts = no_spill(ColoringOptions::default().exact);
            let r = run(&mut m, Space::Sb, &opts, &mut ws, &mut NoClock).unwrap();
            assert!(r.exact_used, "seed {seed}: {r:?}");
            assert!(
                r.exact_status.is_some_and(|s| s.fits()),
                "seed {seed}: {r:?}"
            );
            assert_eq!(r.lower_bound, 64 * 1024, "seed {seed}");
            assert!(r.peak <= 64 * 1024, "seed {seed}: {r:?}");
            assert_eq!(r.spills, 0);
            check(&original, &m);
        }
        assert!(cases >= 3, "only {cases} modules beat the colorer");
    }
}
