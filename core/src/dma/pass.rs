//! The pass: one [`DmaOptimization`] type, instantiated as
//! [`DMA_OPTIMIZATION_PSUM`] and [`DMA_OPTIMIZATION_SB`], differing only in
//! name and memory space (the reference's data-driven PSUM/SB split), and the
//! reusable [`DmaWorkspace`] it runs in.

use alloc::vec::Vec;
use core::fmt;

use super::conflict::LiveIndex;
use super::merge_tracker::MemoryMergeTracker;
use super::report::{dma_analysis, DmaReport};
use super::rewrite::Proposals;
use super::{coalesce, dead_store, load_merge, partial, psum_spill};
use crate::analysis::{LinearOrder, MemLiveness};
use crate::ir::{
    Capacity, DType, Inst, IrError, MemFlags, MemLoc, MemSpec, Module, Space, MAX_DIMS,
};

/// Something the pass could not do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DmaError {
    /// The workspace or the module's reserve ran out while rewriting
    /// (the workspace was reserved for a smaller module).
    Reserve {
        /// The pass instance.
        pass: &'static str,
        /// What ran out.
        what: &'static str,
        /// The reserved room.
        limit: u64,
    },
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DmaError::Reserve { pass, what, limit } => write!(
                f,
                "{pass}: ran out of reserved {what} (reserved {limit}); reserve the workspace for this module first"
            ),
        }
    }
}

impl core::error::Error for DmaError {}

/// Why the coalescer declined to merge a neighbour into a group; one count
/// per vetoing predicate, so a report explains every descriptor above the
/// lower bound.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Vetoes {
    /// The on-chip side is not a full access of its location.
    pub not_full_access: u32,
    /// A side is not byte-contiguous.
    pub not_contiguous: u32,
    /// The tile has another writer, or is read before its load.
    pub producer_chain: u32,
    /// The group reached `dma_coalesce_count_limit` members.
    pub count_limit: u32,
    /// `tooLargeForCoalescing`: byte budget, descriptor ceiling or alignment.
    pub too_large: u32,
    /// The two DMAs sit in different loop nests.
    pub loop_boundary: u32,
    /// The merged read would read uninitialized memory.
    pub uninit: u32,
    /// Another location lives in the merged cells, or the DRAM bytes change
    /// in between, or a PSUM bank boundary would be crossed.
    pub conflict: u32,
    /// A proposal lost to an earlier proposal of the same round.
    pub claim: u32,
    /// A side's offset comes from a register (a register term): merging
    /// would need the same register and abutting static parts, which the
    /// coalescer does not prove, and never drops the term.
    pub dynamic_offset: u32,
    /// A side moves with a loop (loop terms) or steps partitions: only
    /// plain DMAs are merged.
    pub loop_indexed: u32,
    /// The DRAM sides abut but the on-chip tiles were placed apart (other
    /// bytes, or not right after the group): the placement, not a
    /// predicate, kept the pair unmerged.
    pub not_adjacent: u32,
}

/// What one run of the pass did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DmaStats {
    /// True when the module had no DMA and the pass returned at once.
    pub skipped: bool,
    /// `PreGcaDMAAccesses`.
    pub pre: DmaReport,
    /// `PostGcaDMAAccesses`.
    pub post: DmaReport,
    /// Loads dropped because their data was resident (`merge_load`).
    pub loads_merged: u32,
    /// Loads replaced by an on-chip copy (`transform_load`).
    pub loads_transformed: u32,
    /// Saves dropped as dead stores (`removeRedundantWrites`).
    pub stores_removed: u32,
    /// Merged DMAs created by coalescing.
    pub coalesced_groups: u32,
    /// DMAs absorbed into merged DMAs.
    pub coalesced_dmas: u32,
    /// DMAs shrunk to their used sub-range (`partial_DMA_access`).
    pub partial_shrunk: u32,
    /// Bytes per partition the shrinking saved, summed.
    pub partial_bytes_saved: u64,
    /// PSUM spill/reload pairs removed (reloads dropped).
    pub psum_spills_removed: u32,
    /// Coalescing rounds run.
    pub rounds: u32,
    /// Rewrites left undone because the module's reserved headroom was
    /// used up ([`DmaWorkspace::headroom_in`]): the DMAs stay as they were.
    pub headroom_skipped: u32,
    /// Coalescing vetoes by predicate.
    pub vetoes: Vetoes,
}

impl fmt::Display for DmaStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.skipped {
            return f.write_str("skipped: no DMA instruction");
        }
        writeln!(f, "PreGcaDMAAccesses:  {}", self.pre)?;
        writeln!(f, "PostGcaDMAAccesses: {}", self.post)?;
        write!(
            f,
            "merged loads {}, transformed loads {}, dead stores {}, coalesced {} DMAs into {}, shrunk {} ({} B/partition), PSUM spills removed {}",
            self.loads_merged,
            self.loads_transformed,
            self.stores_removed,
            self.coalesced_dmas,
            self.coalesced_groups,
            self.partial_shrunk,
            self.partial_bytes_saved,
            self.psum_spills_removed
        )?;
        if self.headroom_skipped > 0 {
            write!(
                f,
                ", {} rewrites skipped (reserved headroom used up)",
                self.headroom_skipped
            )?;
        }
        Ok(())
    }
}

/// One instance of the DMA optimization pass.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DmaOptimization {
    /// Pass name (`dma_optimization_psum` / `dma_optimization_sb`).
    pub name: &'static str,
    /// The on-chip space whose DMAs it optimizes.
    pub space: Space,
}

/// The PSUM instance (pipeline order 45).
pub const DMA_OPTIMIZATION_PSUM: DmaOptimization = DmaOptimization {
    name: "dma_optimization_psum",
    space: Space::Psum,
};

/// The SB instance (pipeline order 54).
pub const DMA_OPTIMIZATION_SB: DmaOptimization = DmaOptimization {
    name: "dma_optimization_sb",
    space: Space::Sb,
};

/// The module headroom of a pass is one rewrite per this many candidate
/// DMAs (see [`DmaWorkspace::headroom_in`])...
pub const REWRITE_SHARE: usize = 2;
/// ...plus this many.
pub const REWRITE_SLACK: usize = 16;

/// True when the module's reserved room takes one more rewrite: an
/// instruction with two access patterns, `pooled` dims in the dim pool, and
/// with `new_loc` a new location and its name. Checked before a rewrite
/// changes anything, so that a pass out of headroom leaves the DMA as it
/// is.
pub(crate) fn has_room(m: &Module, pooled: usize, new_loc: bool) -> bool {
    let (cap, n) = (m.capacity(), m.counts());
    let loc = new_loc as usize;
    n.insts < cap.insts
        && n.aps + 2 <= cap.aps
        && n.dims + pooled <= cap.dims
        && n.mems + loc <= cap.mems
        && n.names + loc <= cap.names
}

/// Most coalescing rounds (each round merges whole chains; a second round
/// only picks up what the first round's claims deferred).
const MAX_ROUNDS: u32 = 8;
/// Most sweeps of the other peepholes.
const MAX_SWEEPS: u32 = 4;

/// Reusable scratch of the pass, sized from a module.
#[derive(Clone, Debug, Default)]
pub struct DmaWorkspace {
    pub(crate) order: LinearOrder,
    pub(crate) live: MemLiveness,
    pub(crate) index: LiveIndex,
    pub(crate) dram_index: LiveIndex,
    pub(crate) tracker: MemoryMergeTracker,
    pub(crate) cands: Vec<coalesce::Cand>,
    pub(crate) keys: Vec<(u64, u32)>,
    /// Sort keys of the load-merging sweep: packed key, position.
    pub(crate) load_keys: Vec<(u128, u32)>,
    pub(crate) proposals: Proposals,
    pub(crate) members: Vec<u32>,
    pub(crate) mark: Vec<u32>,
    pub(crate) name_seq: u32,
    /// True when `order` and `live` describe the module as it is now: set by
    /// [`DmaWorkspace::sync`] and by a caller that hands in current
    /// analyses ([`DmaWorkspace::exchange_analyses`]); cleared as soon as a
    /// sweep rewrites anything.
    pub(crate) current: bool,
    /// True when `index`, `dram_index` and `mark` match the module (and
    /// `live`); cleared with `current` and at the start of each run.
    pub(crate) indexed: bool,
}

/// A proposed rewrite of one peephole, kept between the proposing scan and
/// the apply step.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Proposal {
    /// The instruction the rewrite drops or replaces.
    pub inst: Inst,
    /// A second instruction (the anchor load, the spill store), or INVALID.
    pub other: Inst,
    /// Peephole-specific: first member / kind / bytes.
    pub a: u32,
    /// Peephole-specific.
    pub b: u32,
}

impl DmaWorkspace {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.live,
            self.cands,
            self.keys,
            self.load_keys,
            self.proposals,
            self.members,
            self.mark,
            self.index,
            self.dram_index,
            self.tracker
        )
    }

    /// Empty workspace; [`DmaWorkspace::reserve`] sizes it.
    pub fn new() -> Self {
        Self::default()
    }

    /// The module headroom both instances need on `m` as it is: the
    /// candidates of each are disjoint (see [`Self::headroom_in`]).
    pub fn headroom(m: &Module) -> Capacity {
        Self::headroom_for(candidates(m, None), 0)
    }

    /// The module headroom the instance of `space` needs when the passes
    /// before it may insert up to `inserted` more instructions (spill
    /// stores and reloads, each a possible candidate). Only a one-to-one
    /// DMA between DRAM and `space` can be rewritten, so those are counted,
    /// not every DMA.
    pub fn headroom_in(m: &Module, space: Space, inserted: usize) -> Capacity {
        Self::headroom_for(candidates(m, Some(space)), inserted)
    }

    /// Room for one rewrite per [`REWRITE_SHARE`] candidates plus
    /// [`REWRITE_SLACK`]. A rewrite (a merged DMA, a shrunk DMA or a load
    /// turned into an on-chip copy) adds one instruction with two access
    /// patterns, at most [`MAX_DIMS`] pooled dims (only the copy keeps a
    /// multi-dimension pattern) and at most one location. The worst case,
    /// every candidate rewritten by several peepholes in turn, is about
    /// three rewrites per candidate; kernels see far fewer (the tiles a
    /// rewrite needs are the exception), so the pass reserves for the
    /// typical case and skips the rewrites beyond it
    /// ([`DmaStats::headroom_skipped`]) instead of failing.
    fn headroom_for(candidates: usize, inserted: usize) -> Capacity {
        let dmas = candidates.saturating_add(inserted);
        let rewrites = dmas.div_ceil(REWRITE_SHARE).saturating_add(REWRITE_SLACK);
        Capacity {
            insts: rewrites,
            aps: 2 * rewrites,
            dims: MAX_DIMS * rewrites,
            mems: rewrites,
            names: rewrites,
            name_bytes: rewrites * 24,
            ..Capacity::default()
        }
    }

    /// Reserves the module's headroom and sizes every buffer for it. This is
    /// the one step that allocates; the pass then runs without allocating.
    /// The shared analyses are sized to the module's whole reserved capacity
    /// ([`Module::capacity`]: this pass's headroom and whatever earlier
    /// passes reserved), so they do not grow as the rewrites add entities.
    pub fn reserve(&mut self, m: &mut Module) {
        let extra = Self::headroom(m);
        m.reserve(extra);
        let cap = m.capacity();
        let insts = cap.insts.max(m.num_insts() + extra.insts);
        self.order.reserve(&cap);
        self.live.reserve(&cap);
        // The analyses are computed by the first refresh of a run (or
        // handed in): computing them here too would be a wasted walk.
        self.current = false;
        self.reserve_tables(m, insts);
    }

    /// [`Self::reserve`] for a caller that reserved the module's headroom
    /// and lends its own order and liveness ([`Self::exchange_analyses`]
    /// around every run, reserved to the module's capacity): only the
    /// pass's tables, for at most `dmas` candidate DMAs of one space at a
    /// time ([`Self::candidate_bound`]). Every per-DMA list (candidates,
    /// proposals, claims, sort keys, sweep members) holds at most one entry
    /// per candidate DMA of the space being optimized, and the rewrites
    /// never add to their number (a merge makes one of several, a shrink
    /// or a transformed load one of one); the per-location tables take
    /// the module's location capacity, and each live index the locations
    /// of its space (on-chip: the larger of SB and PSUM) and every
    /// location the capacity has room for.
    pub fn reserve_tables(&mut self, m: &Module, dmas: usize) {
        let mems = m.capacity().mems.max(m.num_mems());
        let new = mems - m.num_mems();
        let count = |s: Space| m.mems().space.values().filter(|&&x| x == s).count();
        let chip = count(Space::Sb).max(count(Space::Psum));
        self.current = false;
        self.index = LiveIndex::with_capacity(chip + new);
        self.dram_index = LiveIndex::with_capacity(count(Space::Dram) + new);
        self.tracker = MemoryMergeTracker::with_capacity(mems);
        self.cands = Vec::with_capacity(dmas);
        self.keys = Vec::with_capacity(dmas);
        // Only touched for the loads (pages beyond are never faulted in).
        self.load_keys = Vec::with_capacity(dmas);
        self.proposals = Proposals::with_capacity(dmas);
        self.members = Vec::with_capacity(dmas);
        self.mark = Vec::with_capacity(mems);
    }

    /// The most candidate DMAs the pass of `space` can see on `m` when the
    /// passes before it insert up to `inserted` more instructions (each a
    /// possible candidate): the candidates now plus those.
    pub fn candidate_bound(m: &Module, space: Space, inserted: usize) -> usize {
        candidates(m, Some(space)).saturating_add(inserted)
    }

    /// Brings the analyses up to date with the module: the order and
    /// liveness always, the live indexes (and coalescing marks) only
    /// `with_index` — the partial-access sweep never queries them, so a
    /// rewrite before it does not pay for two index builds. At the start of
    /// a run the indexes are rebuilt (they depend on the placements, which
    /// change between passes).
    /// Sound because of the sweep invariant: a sweep (or coalescing round)
    /// that returns 0 rewrote nothing — no instruction, access pattern,
    /// location or placement changed and the merge tracker holds no remap —
    /// so what the last refresh computed still holds.
    fn sync(&mut self, m: &Module, space: Space, with_index: bool) {
        if !self.current {
            self.order.compute(m);
            self.live.compute(m, &self.order);
            self.current = true;
        }
        if with_index && !self.indexed {
            self.index.build(m, &self.live, space);
            self.dram_index.build(m, &self.live, Space::Dram);
            self.mark.clear();
            self.mark.resize(m.num_mems().min(self.mark.capacity()), 0);
            self.indexed = true;
        }
    }

    /// Records the outcome of a sweep: `n > 0` rewrites made the analyses
    /// and the indexes stale.
    fn after_sweep(&mut self, n: u32) {
        if n > 0 {
            self.current = false;
            self.indexed = false;
        }
    }

    /// Exchanges the workspace's program order and liveness with the
    /// caller's (a swap: no copy, no allocation; the side the run computes
    /// into, the workspace's after the swap, must be reserved to the
    /// module's capacity, the other may be empty). `current` says whether what
    /// the workspace now holds describes the module the next
    /// [`DmaOptimization::run`] gets; when true that run does not recompute
    /// them before its first sweep. Returns whether the analyses handed
    /// back to the caller were current after the last run (see
    /// [`DmaWorkspace::analyses_current`]).
    pub fn exchange_analyses(
        &mut self,
        order: &mut LinearOrder,
        live: &mut MemLiveness,
        current: bool,
    ) -> bool {
        let was = self.current;
        core::mem::swap(&mut self.order, order);
        core::mem::swap(&mut self.live, live);
        self.current = current;
        was
    }

    /// True when the workspace's order and liveness describe the module as
    /// the last run left it (the run ended on a sweep that rewrote nothing,
    /// or skipped the module). Placements do not enter them: the pipeline
    /// may place or unplace locations afterwards and they stay current.
    pub fn analyses_current(&self) -> bool {
        self.current
    }

    /// Re-points every access pattern of a location the tracker moved.
    pub(crate) fn apply_remaps(&mut self, m: &mut Module) {
        if self.tracker.merges() == 0 {
            return;
        }
        for k in 0..m.num_aps() {
            let a = crate::ir::Ap::new(k);
            let l = m.aps().loc[a];
            let (to, d) = self.tracker.resolve(l);
            if to != l {
                m.shift_ap(a, to, 0, d as i64);
            }
        }
        self.tracker.reset(m.num_mems());
    }

    /// Creates a location shaped like `like` (space, partitions, element
    /// size, alignment, flags) of `bytes` bytes per partition with a fresh
    /// name, and places it on `like`'s partitions at byte `offset`.
    pub(crate) fn add_loc(
        &mut self,
        m: &mut Module,
        pass: &'static str,
        prefix: &str,
        like: MemLoc,
        bytes: u32,
        offset: u64,
    ) -> Result<MemLoc, DmaError> {
        let space = m.mems().space[like];
        let (partitions, base) = (m.mems().partitions[like], m.mems().base_partition[like]);
        let mut last = IrError::Full {
            what: "names",
            limit: 0,
        };
        for _ in 0..16 {
            let mut name: heapless::String<48> = heapless::String::new();
            let _ = fmt::write(
                &mut name,
                format_args!("{}.{}{}", m.mem_name(like), prefix, self.name_seq),
            );
            self.name_seq += 1;
            // An untyped copy of `like`'s layout: the tile holds `like`'s
            // bytes as they are.
            let spec = MemSpec {
                dtype: DType::Raw(m.elem_size(like)),
                align: m.mems().align[like],
                flags: m.mems().flags[like] & !(MemFlags::PINNED),
                ..MemSpec::new(&name, space, partitions, bytes)
            };
            match m.try_add_mem(&spec) {
                Ok(l) => {
                    m.place(l, base, offset);
                    if !self.tracker.grow_to(m.num_mems()) {
                        return Err(DmaError::Reserve {
                            pass,
                            what: "merge-tracker entries",
                            limit: self.tracker_capacity() as u64,
                        });
                    }
                    return Ok(l);
                }
                Err(e @ IrError::Duplicate { .. }) | Err(e @ IrError::NameTooLong) => last = e,
                Err(e) => {
                    last = e;
                    break;
                }
            }
        }
        let limit = match last {
            IrError::Full { limit, .. } => limit,
            _ => 0,
        };
        Err(DmaError::Reserve {
            pass,
            what: "memory locations",
            limit,
        })
    }

    fn tracker_capacity(&self) -> usize {
        self.mark.capacity()
    }
}

/// The two sides of a DMA between DRAM and this pass's on-chip space.
#[derive(Copy, Clone, Debug)]
pub(crate) struct DmaView {
    /// True for DRAM → on-chip.
    pub load: bool,
    /// The DRAM-side access pattern.
    pub dram: crate::ir::Ap,
    /// The on-chip-side access pattern.
    pub chip: crate::ir::Ap,
}

/// The DRAM and on-chip sides of `i` when it is a one-to-one DMA between
/// DRAM and `space` with both locations placed.
pub(crate) fn dma_view(m: &Module, i: Inst, space: Space) -> Option<DmaView> {
    let v = dma_sides(m, i, space)?;
    (m.is_placed(m.aps().loc[v.dram]) && m.is_placed(m.aps().loc[v.chip])).then_some(v)
}

/// [`dma_view`] without the placement test: the sides of a plain one-to-one
/// DMA between DRAM and `space`, placed or not (the placement affinities
/// look at the DMAs before allocation).
pub(crate) fn dma_sides(m: &Module, i: Inst, space: Space) -> Option<DmaView> {
    let v = dma_pair(m, i, space)?;
    // Only plain DMAs are rewritten: a register term or a loop term is the
    // DMA's meaning, and no peephole here proves it keeps it.
    (m.ap_is_plain(v.dram) && m.ap_is_plain(v.chip)).then_some(v)
}

/// The sides of `i` when it is a one-to-one DMA between DRAM and `space`,
/// whatever its patterns: every DMA a peephole of `space` rewrites, or
/// counts a veto against, is one.
pub(crate) fn dma_pair(m: &Module, i: Inst, space: Space) -> Option<DmaView> {
    if !m.insts().opcode[i].is_dma() {
        return None;
    }
    let o = m.operands(i);
    if o.n_in != 1 || o.n_out != 1 {
        return None;
    }
    let src = m.inputs(i).next()?;
    let dst = m.outputs(i).next()?;
    let (ls, ld) = (m.aps().loc[src], m.aps().loc[dst]);
    let (ss, sd) = (m.mems().space[ls], m.mems().space[ld]);
    if ss == Space::Dram && sd == space {
        Some(DmaView {
            load: true,
            dram: src,
            chip: dst,
        })
    } else if ss == space && sd == Space::Dram {
        Some(DmaView {
            load: false,
            dram: dst,
            chip: src,
        })
    } else {
        None
    }
}

/// Positions of the first and last write of `l`, if any.
pub(crate) fn write_span(live: &MemLiveness, l: MemLoc) -> Option<(u32, u32)> {
    let mut first = None;
    let mut last = None;
    for (p, w) in live.accesses(l).iter().zip(live.access_writes(l)) {
        if w {
            first.get_or_insert(*p);
            last = Some(*p);
        }
    }
    Some((first?, last?))
}

/// Number of writes of `l`.
pub(crate) fn write_count(live: &MemLiveness, l: MemLoc) -> usize {
    live.access_writes(l).filter(|&w| w).count()
}

/// The DMAs of `m` the pass of `space` (`None`: either on-chip space) can
/// rewrite, counted before placement: one input and one output, one side in
/// DRAM and the other in the space ([`dma_view`] without the placement
/// test).
fn candidates(m: &Module, space: Option<Space>) -> usize {
    m.program_order()
        .filter(|&i| {
            let o = m.operands(i);
            if !m.insts().opcode[i].is_dma() || o.n_in != 1 || o.n_out != 1 {
                return false;
            }
            let side = |a: Option<crate::ir::Ap>| a.map(|a| m.mems().space[m.aps().loc[a]]);
            let (Some(ss), Some(sd)) = (side(m.inputs(i).next()), side(m.outputs(i).next())) else {
                return false;
            };
            let chip = match (ss, sd) {
                (Space::Dram, c) | (c, Space::Dram) => c,
                _ => return false,
            };
            chip.is_on_chip() && space.map_or(true, |s| s == chip)
        })
        .count()
}

/// [`DmaStats::headroom_skipped`] of one peephole: the most rewrites one of
/// its sweeps skipped.
#[derive(Default)]
struct SkipCount {
    most: u32,
}

impl SkipCount {
    /// Runs one sweep, keeping its skips out of `st` until [`Self::next`].
    fn sweep<T>(
        &mut self,
        st: &mut DmaStats,
        f: impl FnOnce(&mut DmaStats) -> Result<T, DmaError>,
    ) -> Result<T, DmaError> {
        let before = st.headroom_skipped;
        let r = f(st);
        self.most = self.most.max(st.headroom_skipped - before);
        st.headroom_skipped = before;
        r
    }

    /// Adds the peephole's count to `st` and starts the next peephole's.
    fn next(&mut self, st: &mut DmaStats) {
        st.headroom_skipped += core::mem::take(&mut self.most);
    }
}

/// Maps an IR refusal during a rewrite to the pass's error.
pub(crate) fn reserve_err(pass: &'static str, e: IrError) -> DmaError {
    match e {
        IrError::Full { what, limit } => DmaError::Reserve { pass, what, limit },
        _ => DmaError::Reserve {
            pass,
            what: "instructions",
            limit: 0,
        },
    }
}

/// What one sweep of a peephole works on: the pass's options, the module it
/// rewrites, the workspace (its analyses current when the sweep starts) and
/// the statistics it adds to. Every peephole's sweep takes this one value, so
/// the interface of a sweep is written here once.
pub struct Sweep<'a> {
    /// The pass (space, name, cost model).
    pub pass: &'a DmaOptimization,
    /// The module the sweep rewrites.
    pub m: &'a mut Module,
    /// Analyses and scratch of the pass.
    pub ws: &'a mut DmaWorkspace,
    /// Counts of what the sweep did and skipped.
    pub st: &'a mut DmaStats,
}

/// One sweep of a peephole: returns how many rewrites it made.
type SweepFn = fn(Sweep<'_>) -> Result<u32, DmaError>;

impl DmaOptimization {
    /// Runs `sweep` until a sweep rewrites nothing or `most` sweeps ran,
    /// each on current analyses (and, with `with_index`, the live indexes),
    /// re-pointing what it merged, counting its headroom skips as one
    /// peephole's ([`SkipCount`]).
    fn repeat(
        &self,
        m: &mut Module,
        ws: &mut DmaWorkspace,
        st: &mut DmaStats,
        most: u32,
        with_index: bool,
        sweep: SweepFn,
    ) -> Result<(), DmaError> {
        let mut skips = SkipCount::default();
        for _ in 0..most {
            ws.sync(m, self.space, with_index);
            let n = skips.sweep(st, |st| {
                sweep(Sweep {
                    pass: self,
                    m,
                    ws,
                    st,
                })
            })?;
            ws.apply_remaps(m);
            ws.after_sweep(n);
            if n == 0 {
                break;
            }
        }
        skips.next(st);
        Ok(())
    }

    /// Runs the peepholes on a placed module. `ws` must have been reserved
    /// for this module ([`DmaWorkspace::reserve`]).
    pub fn run(&self, m: &mut Module, ws: &mut DmaWorkspace) -> Result<DmaStats, DmaError> {
        self.run_known(m, ws, None)
    }

    /// [`Self::run`] given the module's DMA report when the caller has it
    /// (`pre`: the previous instance's `post`, no instruction or pattern
    /// changed since; placements do not enter the report), which is then
    /// not worked out again.
    pub fn run_known(
        &self,
        m: &mut Module,
        ws: &mut DmaWorkspace,
        pre: Option<DmaReport>,
    ) -> Result<DmaStats, DmaError> {
        let mut st = DmaStats::default();
        // One walk of the program finds whether it has a DMA at all (the
        // reference's `skip_pass` when not) and whether one is between DRAM
        // and this space.
        let (mut any, mut ours) = (false, false);
        for i in m.program_order().filter(|&i| m.insts().opcode[i].is_dma()) {
            any = true;
            if dma_pair(m, i, self.space).is_some() {
                ours = true;
                break;
            }
        }
        if !any {
            st.skipped = true;
            return Ok(st);
        }
        debug_assert!(
            pre.map_or(true, |r| r == dma_analysis(m)),
            "a stale DMA report"
        );
        st.pre = pre.unwrap_or_else(|| dma_analysis(m));
        if !ours {
            // Every peephole rewrites, or counts a veto against, a DMA
            // between DRAM and this space only: with none, no sweep could
            // change or count anything, and the analyses and indexes the
            // sweeps read are not worth computing.
            st.post = st.pre;
            return Ok(st);
        }
        ws.tracker.reset(m.num_mems());

        // The placements changed since the indexes were last built.
        ws.indexed = false;
        // A rewrite skipped for headroom stays possible, and the next sweep
        // proposes it again: each peephole counts the most it skipped in
        // one sweep, not every proposal.
        self.repeat(m, ws, &mut st, MAX_SWEEPS, true, load_merge::sweep)?;
        self.repeat(m, ws, &mut st, MAX_SWEEPS, true, dead_store::sweep)?;
        self.repeat(m, ws, &mut st, MAX_ROUNDS, true, |cx| {
            cx.st.rounds += 1;
            coalesce::round(cx)
        })?;
        self.repeat(m, ws, &mut st, MAX_SWEEPS, false, partial::sweep)?;
        if self.space == Space::Psum {
            self.repeat(m, ws, &mut st, MAX_SWEEPS, true, psum_spill::sweep)?;
        }
        st.post = dma_analysis(m);
        Ok(st)
    }
}
