//! Running a pipeline: the passes of [`mod@super::passes`] over one module, each
//! timed with the caller's clock, then the independent checks.
//!
//! [`Workspace::reserve`] sizes every pass's storage from the module and
//! reserves the module's headroom for the instructions and locations the
//! passes may add; after it, [`run`] does not allocate (proved by the
//! counting-allocator test in `tests/`).
//!
//! **Shared analyses.** The program order and memory liveness are the
//! costliest analyses (a walk of every access pattern each) and most passes
//! start from them. [`run`] computes them once at the start (for the lower
//! bounds) and keeps them *fresh* while no pass changes the program: it
//! hands them to the linear-scan, coloring and DMA workspaces by swapping
//! storage, and takes back what the pass leaves. Only the pipeline's copy is
//! reserved, for the module's final capacity: the workspaces' sides are
//! empty, and a swap moves pointers, so it neither copies nor allocates,
//! and the pass computes into the reserved copy it holds.
//! The invariant: `fresh` is true only when `ws.order`/`ws.live` describe
//! the module's instructions and access patterns as they are now.
//! Placements do not enter either analysis, so placing and unplacing (every
//! allocator's result, the provisional DRAM addresses, releasing abandoned
//! locations) keeps them fresh; anything that inserts, removes or re-points
//! an access clears it: the linear scan always (it inserts spill code; it
//! is handed the bounds too while no pass ran before it), the register
//! colorer when it spilled or removed a copy, a coloring pass when it ran a
//! spill round, a DMA pass when its last sweep rewrote something.

use arrayvec::ArrayVec;
use core::fmt;

use super::finish::Passed;
use super::options::{Allocator, DmaAffinity, Options, OptionsError, Selection, SpillStrategy};
use super::passes::{passes, Pass, MAX_PASSES};
use crate::analysis::{
    Bounds, Floor, LinearOrder, MemLiveness, Schedule, ScheduleOptions, ScheduleReport, SpaceFloor,
};
use crate::dma::affinity::AffinityFinder;
use crate::dma::pass::{
    DmaError, DmaStats, DmaWorkspace, DMA_OPTIMIZATION_PSUM, DMA_OPTIMIZATION_SB,
};
use crate::dma::DmaReport;
use crate::ir::DisplayNamed;
use crate::ir::{Capacity, Entity, Inst, MemFlags, MemLoc, Module, Space};
use crate::mem::exact::{Budget, Clock};
use crate::mem::interval_coloring::GcaOptions;
use crate::mem::lsa::{self, LsaError, LsaOptions, LsaReport, LsaWorkspace};
use crate::mem::rotation::{Rotation, RotationReport};
use crate::mem::sb_rotation::{SbRotation, SbRotationOptions, SbRotationReport};
use crate::mem::tensor_coloring::{
    self, ColoringError, ColoringOptions, ColoringReport, ColoringWorkspace,
};
use crate::reg::alloc::{RegAllocConfig, RegAllocError, RegAllocator, RegReport};
use crate::storage::{Skipped, StorageBudget, StorageReport};
use crate::verify::dataflow::{
    DataflowCapacity, DataflowChecker, DataflowCoverage, DataflowError, Mismatch, SplitRunner,
};
use crate::verify::placement::{Finding, Scope, Verifier};

/// Time and outcome of one pass.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PassRecord {
    /// The pass.
    pub pass: Pass,
    /// Wall time by the caller's clock, in microseconds.
    pub micros: u64,
}

/// Figures of one space after the pipeline.
///
/// Not the linear scan's `mem::lsa::SpaceReport`, though the two share
/// fields: that one is what one allocator did in a space (the tensors *it*
/// placed, its free-block fragmentation, the bound of the program it was
/// given); this one describes the run's result whatever allocators ran
/// (every location placed, the bounds of the final module and of the input,
/// the floor), and sums the spill figures of every pass that spilled into
/// the space.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceSummary {
    /// Locations placed in the space.
    pub placed: u32,
    /// Highest byte used in any partition (PSUM: end of the highest bank
    /// used; DRAM: highest address used).
    pub peak: u64,
    /// Lower bound of the result: of the module as the passes left it
    /// (spill code and DMA rewrites included), the same module `peak`
    /// describes, so `peak >= lower_bound` for every legal placement
    /// (analysis::Bounds).
    pub lower_bound: u64,
    /// Lower bound of the input program, before any pass: what the
    /// passes' rewrites started from (it may lie above `peak` when a spill
    /// or a DMA rewrite shrank what is live).
    pub input_lower_bound: u64,
    /// The floor of the input program ([`crate::analysis::Floor`]): the
    /// least capacity any placement could use, from the largest
    /// instruction's own operands (0 for DRAM).
    pub floor: u64,
    /// Capacity of the space.
    pub capacity: u64,
    /// Spills inserted by the memory allocator of this space.
    pub spills: u32,
    /// Of them, rematerializations, without a store (loaded from DRAM,
    /// set by a memset or copied from a resident tile again).
    pub remats: u32,
    /// Spill traffic in bytes.
    pub spill_bytes: u64,
    /// Estimated spill cycles (`Target::dma_cycles`).
    pub spill_cycles: u64,
}

impl SpaceSummary {
    /// Peak over lower bound ([`crate::analysis::peak_over_bound`]).
    pub fn peak_over_bound(&self) -> f64 {
        crate::analysis::peak_over_bound(self.peak, self.lower_bound)
    }

    /// Peak over capacity, in percent.
    pub fn utilization_pct(&self) -> f64 {
        if self.capacity == 0 {
            0.0
        } else {
            100.0 * self.peak as f64 / self.capacity as f64
        }
    }
}

/// Everything a run reports (docs/REPORT.md), grouped as a run goes: what
/// the input and the reservation are, the passes (in the selection map's
/// order), the schedule model, the checks.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// The normalized optlevel that ran.
    pub optlevel: u8,
    /// The passes with their times.
    pub passes: ArrayVec<PassRecord, MAX_PASSES>,
    /// Per space, indexed by [`Space::slot`].
    pub spaces: [SpaceSummary; 3],
    /// The floor of the input program per on-chip space, with the
    /// instruction that sets it.
    pub floor: Floor,
    /// What the workspace's reservation is made of, and the methods it
    /// skipped or cut short for the storage budget.
    pub storage: StorageReport,
    /// The linear scan's report, when it ran.
    pub lsa: Option<LsaReport>,
    /// The coloring passes' reports, by [`Space::slot`].
    pub coloring: [Option<ColoringReport>; 3],
    /// Where SB had to spill and the other on-chip allocator placed from
    /// the same module too: both costs, and which placement was kept.
    pub sb_portfolio: Option<SbPortfolio>,
    /// The DMA passes' figures: PSUM, SB.
    pub dma: [Option<DmaStats>; 2],
    /// The register colorer's report.
    pub reg: Option<RegReport>,
    /// The PSUM address rotation's report, when it ran.
    pub rotation: Option<RotationReport>,
    /// The SB address rotation's report, when it ran.
    pub sb_rotation: Option<SbRotationReport>,
    /// The schedule model on the result (makespan, and what the placement
    /// costs: the schedule model of `analysis`).
    pub schedule: Option<ScheduleReport>,
    /// Microseconds of the checks by the wall clock, `None` when they did
    /// not run (`--no-verify`). A report exists only for a clean result: a
    /// finding of either check ends the run with its error. When an
    /// embedder runs the end steps side by side, the schedule model running
    /// beside them is included.
    pub checks_micros: Option<u64>,
    /// How much of the programs the dataflow check walked, when it ran:
    /// a clean check of sampled loops is a partial one.
    pub dataflow: Option<DataflowCoverage>,
}

impl RunReport {
    /// The summary of one space.
    pub fn space(&self, s: Space) -> &SpaceSummary {
        &self.spaces[s.slot()]
    }

    /// Total pass time in microseconds.
    pub fn pass_micros(&self) -> u64 {
        self.passes.iter().map(|p| p.micros).sum()
    }

    /// True when both checks ran on the result and found nothing (a
    /// finding would have ended the run with an error instead): on every
    /// execution, unless [`Self::dataflow`] says the check sampled loops.
    pub fn verified(&self) -> bool {
        self.checks_micros.is_some()
    }
}

/// The SB spills of the coloring allocator against the linear scan's
/// from the same module (the pipeline runs the scan too where SB must
/// spill and the budget allows: the scan's rules decide at each point
/// from what is placed there, the colorer's rounds from the whole
/// program, and neither is cheaper everywhere, nor fits everywhere the
/// other fits). With `--spill-strategy best` the placement whose spills
/// cost fewer cycles (then bytes) is kept; with another strategy the scan
/// runs only where the colorer fails.
///
/// At optlevel 8 the other way round: the coloring allocator (PSUM, then
/// SB, live-range splits first) beside the linear scan, the on-chip spill
/// costs of both spaces compared.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SbPortfolio {
    /// The colorer's spill cycles and bytes, `None` when it failed.
    pub colorer: Option<(u64, u64)>,
    /// The scan's, `None` when it failed.
    pub scan: Option<(u64, u64)>,
    /// True when the scan's placement was kept.
    pub kept_scan: bool,
}

/// Why a run failed.
#[derive(Clone, Debug)]
pub enum PipelineError {
    /// The options violate the selection map.
    Options(OptionsError),
    /// The linear scan failed (boxed: its report of the live set is large).
    Lsa(alloc::boxed::Box<LsaError>),
    /// A coloring pass failed.
    Coloring(ColoringError),
    /// A DMA pass failed.
    Dma(DmaError),
    /// The register colorer failed.
    Reg(RegAllocError),
    /// The result (or, at optlevel 7, the fixed assignment) is not legal.
    Verify {
        /// The pass that ran the check.
        pass: &'static str,
        /// Findings in all.
        total: u64,
        /// The first finding.
        first: Finding,
    },
    /// The rewritten program does not compute what the input computes.
    Dataflow {
        /// Mismatches found.
        mismatches: u32,
        /// The first of them.
        first: Option<Mismatch>,
    },
    /// The dataflow checker could not run.
    DataflowCheck(DataflowError),
    /// A placement the input fixes breaks a rule of the target on its own
    /// (out of bounds, misaligned, ...). Every allocator keeps the input's
    /// placements, so no pass could make it legal: the run stops before
    /// the first pass, naming it as the verifier does.
    IllegalInputPlacement {
        /// Such findings in all.
        total: u64,
        /// The first, in declaration order.
        first: Finding,
    },
    /// The rewrite reads other values than the input, and the input's own
    /// register lanes conflict: the input does not compute what its names
    /// say, so the comparison is against a broken program.
    InputRegisterConflict {
        /// Register findings of the input in all.
        total: u64,
        /// The first, as the verifier words it on the input.
        first: alloc::string::String,
        /// The same finding by id (the input's ids, which a rewrite keeps).
        finding: Finding,
    },
    /// Optlevel 7 keeps the input's placements and runs no PSUM allocator
    /// (as in the reference), so every PSUM location must come placed.
    UnplacedPsum {
        /// The first unplaced PSUM location that is accessed, in
        /// declaration order.
        first: MemLoc,
        /// How many there are.
        count: u32,
    },
    /// The capacity of a space an allocator must place is below the floor:
    /// one instruction's own operands need more than the space holds, so
    /// no placement, spill or rematerialization can fit the program.
    BelowFloor {
        /// The space.
        space: Space,
        /// Its usable bytes per partition.
        capacity: u64,
        /// The floor and the instruction that sets it.
        floor: SpaceFloor,
    },
    /// The pipeline ran more passes than [`RunReport::passes`] records
    /// ([`MAX_PASSES`]): a pass list was made longer than the report's
    /// table. The list of every option set fits, so this names a defect of
    /// the pipeline, not of the input.
    PassTableFull {
        /// The table's capacity.
        limit: usize,
    },
    /// The run's checks were [`Checks::Deferred`] and its end steps
    /// finished without the input ([`super::EndSteps::give_input`]): the
    /// dataflow check could not run, so the result is not called verified.
    InputNotGiven,
}

/// Where a run failed, as far as the error says: the space that did not
/// fit, the instruction or position of the failure, and the tensor that
/// could not be placed with the rectangle it needs. Positions are in the
/// program order of the module as it was at failure (the allocator's
/// spills included), so a picture of that module can mark them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FailureSite {
    /// The space that did not fit.
    pub space: Option<Space>,
    /// The instruction that could not be served (linear scan).
    pub inst: Option<Inst>,
    /// The position of the failure (coloring: the peak pressure).
    pub position: Option<u32>,
    /// The tensor that could not be placed.
    pub tensor: Option<MemLoc>,
    /// The rectangle it needs: partitions, bytes per partition.
    pub needed: Option<(u16, u64)>,
}

impl PipelineError {
    /// The failure site, when the error names one (allocation failures do;
    /// option, DMA and check errors do not).
    pub fn site(&self) -> Option<FailureSite> {
        match self {
            PipelineError::Coloring(ColoringError::DoesNotFit {
                space, at, tensor, ..
            }) => Some(FailureSite {
                space: Some(*space),
                position: Some(*at),
                tensor: (*tensor != MemLoc::INVALID).then_some(*tensor),
                ..FailureSite::default()
            }),
            PipelineError::BelowFloor { space, floor, .. } => Some(FailureSite {
                space: Some(*space),
                inst: floor.inst.is_valid().then_some(floor.inst),
                tensor: floor.operand.is_valid().then_some(floor.operand),
                ..FailureSite::default()
            }),
            PipelineError::Coloring(ColoringError::Unplaceable { tensor, .. }) => {
                Some(FailureSite {
                    tensor: Some(*tensor),
                    ..FailureSite::default()
                })
            }
            PipelineError::Lsa(e) => match &**e {
                LsaError::AllocationFailed(a) => Some(FailureSite {
                    space: Some(a.space),
                    inst: Some(a.instruction),
                    position: Some(a.position),
                    tensor: Some(a.tensor),
                    needed: Some((a.needed.partitions, a.needed.bytes)),
                }),
                LsaError::Manager { tensor, .. }
                | LsaError::PinnedUnplaced { tensor }
                | LsaError::FixedOverlap { tensor, .. } => Some(FailureSite {
                    tensor: Some(*tensor),
                    ..FailureSite::default()
                }),
                _ => None,
            },
            PipelineError::UnplacedPsum { first, .. } => Some(FailureSite {
                space: Some(Space::Psum),
                tensor: Some(*first),
                ..FailureSite::default()
            }),
            PipelineError::IllegalInputPlacement { first, .. } => {
                first.mems().first().map(|&t| FailureSite {
                    tensor: Some(t),
                    ..FailureSite::default()
                })
            }
            _ => None,
        }
    }
}

impl PipelineError {
    /// The entities the error blames, in the order its message names them
    /// (the first is the one a driver points the user at; empty when the
    /// error names none: options, reserve and internal errors). Ids are the
    /// module's as the failing pass left it, spill code included.
    pub fn blamed(&self) -> ArrayVec<Entity, 3> {
        let mut v = ArrayVec::new();
        let valid_inst = |i: Inst| i.is_valid().then_some(Entity::Inst(i));
        let valid_mem = |x: MemLoc| x.is_valid().then_some(Entity::Mem(x));
        let ids: [Option<Entity>; 3] = match self {
            PipelineError::Coloring(ColoringError::DoesNotFit { inst, tensor, .. }) => {
                [valid_inst(*inst), valid_mem(*tensor), None]
            }
            PipelineError::Coloring(ColoringError::Unplaceable { tensor, .. }) => {
                [valid_mem(*tensor), None, None]
            }
            PipelineError::Lsa(e) => match &**e {
                LsaError::AllocationFailed(a) => {
                    [valid_inst(a.instruction), valid_mem(a.tensor), None]
                }
                LsaError::PinnedUnplaced { tensor } | LsaError::Manager { tensor, .. } => {
                    [valid_mem(*tensor), None, None]
                }
                LsaError::FixedOverlap { tensor, other } => {
                    [valid_mem(*tensor), valid_mem(*other), None]
                }
                _ => [None; 3],
            },
            PipelineError::Reg(RegAllocError::RegisterPressure {
                instruction, live, ..
            }) => [
                valid_inst(*instruction),
                live.first().map(|&r| Entity::Reg(r)),
                None,
            ],
            PipelineError::Reg(RegAllocError::Malformed { reg, .. }) => {
                [reg.is_valid().then_some(Entity::Reg(*reg)), None, None]
            }
            PipelineError::Verify { first, .. }
            | PipelineError::IllegalInputPlacement { first, .. }
            | PipelineError::InputRegisterConflict { finding: first, .. } => {
                let b = first.blamed();
                [b.first().copied(), b.get(1).copied(), b.get(2).copied()]
            }
            PipelineError::Dataflow { first: Some(x), .. } => match *x {
                Mismatch::Read { inst, reads, .. } => [
                    valid_inst(inst),
                    Some(match reads {
                        crate::verify::dataflow::Operand::Mem(x) => Entity::Mem(x),
                        crate::verify::dataflow::Operand::Reg(r) => Entity::Reg(r),
                    }),
                    None,
                ],
                Mismatch::Term { inst, .. } => [valid_inst(inst), None, None],
                Mismatch::Output { mem, .. } => [valid_mem(mem), None, None],
            },
            PipelineError::DataflowCheck(e) => match *e {
                DataflowError::OperandsChanged { inst, .. }
                | DataflowError::BadAccess { inst, .. } => [valid_inst(inst), None, None],
                DataflowError::Reordered { expected, found } => {
                    [valid_inst(expected), valid_inst(found), None]
                }
                _ => [None; 3],
            },
            PipelineError::UnplacedPsum { first, .. } => [valid_mem(*first), None, None],
            PipelineError::BelowFloor { floor, .. } => {
                [valid_inst(floor.inst), valid_mem(floor.operand), None]
            }
            _ => [None; 3],
        };
        for e in ids.into_iter().flatten() {
            let _ = v.try_push(e);
        }
        v
    }
}

crate::ir::display_named!(PipelineErrorDisplay for PipelineError);

/// Names tensors and registers as `m` does.
impl DisplayNamed for PipelineError {
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::Options(e) => write!(f, "{e}"),
            PipelineError::Lsa(e) => write!(f, "linear_scan_allocator: {}", e.display(m)),
            PipelineError::Coloring(e) => write!(f, "{}", e.display(m)),
            PipelineError::Dma(e) => write!(f, "dma_optimization: {e}"),
            PipelineError::Reg(e) => write!(f, "coloring_allocator_reg: {}", e.display(m)),
            PipelineError::Verify { pass, total, first } => {
                if *pass == "check_in_place" {
                    write!(f, "smt allocation fails in-place write checker: ")?;
                } else {
                    write!(f, "{pass}: the result is not a legal placement: ")?;
                }
                match total {
                    1 => write!(f, "1 finding: {}", first.display(m)),
                    n => write!(f, "{n} findings, the first: {}", first.display(m)),
                }
            }
            PipelineError::Dataflow { mismatches, first } => {
                write!(
                    f,
                    "dataflow check: {mismatches} {} of the rewritten program {} a different value than in the input",
                    if *mismatches == 1 { "read" } else { "reads" },
                    if *mismatches == 1 { "sees" } else { "see" }
                )?;
                if let Some(x) = first {
                    let lead = if *mismatches == 1 { ": " } else { "; the first: " };
                    write!(f, "{lead}{}", x.display(m))?;
                }
                Ok(())
            }
            PipelineError::DataflowCheck(e) => {
                write!(f, "dataflow check could not run: {}", e.display(m))
            }
            PipelineError::IllegalInputPlacement { total, first } => write!(
                f,
                "the input fixes an illegal placement, which no pass can repair (every pass keeps the input's placements): {}{}",
                first.display(m),
                match total {
                    1 => "",
                    _ => " (and more: `tusk check` lists them all)",
                }
            ),
            PipelineError::InputRegisterConflict { total, first, .. } => write!(
                f,
                "the input's register lanes conflict, so the input does not compute what its names say and the dataflow check cannot hold against it: {first}{}; fix the input's lanes (`@ rN`) or drop them (the colorer assigns lanes)",
                match total {
                    1 => "",
                    _ => " (and more: `tusk check` lists them all)",
                }
            ),
            PipelineError::UnplacedPsum { first, count } => {
                write!(
                    f,
                    "optlevel 7 keeps the input's placements and runs no PSUM allocator, so every PSUM location must come placed; {} has none",
                    m.describe_mem(*first)
                )?;
                if *count > 1 {
                    write!(f, " ({count} PSUM locations are unplaced)")?;
                }
                write!(
                    f,
                    ": place them in the input (`@ PSUM<p,bank k>`, as the files of examples/placed/ do), or use optlevel 2, which allocates PSUM"
                )
            }
            PipelineError::BelowFloor {
                space,
                capacity,
                floor,
            } => write!(
                f,
                "{space} has {capacity} bytes per partition, below the floor of {} that any placement needs: {}; \
                 no spill or rematerialization helps, split the instruction into smaller tiles or give the space more room (target override {})",
                floor.bytes,
                floor.display(m),
                if *space == Space::Psum { "psum-banks" } else { "sb-bytes" }
            ),
            PipelineError::PassTableFull { limit } => write!(
                f,
                "internal error: the pipeline ran more than {limit} passes, more than its report records"
            ),
            PipelineError::InputNotGiven => write!(
                f,
                "the dataflow check was deferred until the input is given again after the passes, and the run ended without it: the result is not verified"
            ),
        }
    }
}

/// The coloring workspace that colors `space`: DRAM's own when the
/// workspace has one ([`Workspace::reserve`]), else the shared one. (Fields
/// rather than the workspace, so that its order and liveness can be lent
/// to the one returned.)
fn colorer_of<'w>(
    space: Space,
    shared: &'w mut ColoringWorkspace,
    dram: &'w mut Option<ColoringWorkspace>,
) -> &'w mut ColoringWorkspace {
    match dram {
        Some(d) if space == Space::Dram => d,
        _ => shared,
    }
}

/// Storage of every pass, reserved once per module shape.
///
/// With [`Workspace::set_release_spent`], [`run`] drops a pass's storage
/// once the pass list has no further use for it (the linear scan's after
/// the scan, the DMA passes' after the last of them, the register
/// colorer's after it), so the passes that run late do not stack their
/// memory on the early ones' and the peak is lower. Dropping frees and never
/// allocates; the workspace must be reserved again before the next run.
#[derive(Debug, Default)]
pub struct Workspace {
    pub(super) release_spent: bool,
    lsa: LsaWorkspace,
    pub(super) coloring: ColoringWorkspace,
    /// The DRAM colorer's own tables, sized for DRAM's locations, when a
    /// one-shot run colors an on-chip space too ([`Workspace::reserve`]):
    /// the on-chip colorer's tables, sized for every location, then go
    /// after the last pass that uses them instead of staying through the
    /// DMA passes and the register colorer for a DRAM pass that needs a
    /// fraction of them. `None`: the DRAM passes use `coloring`.
    pub(super) dram_coloring: Option<ColoringWorkspace>,
    dma: DmaWorkspace,
    reg: Option<RegAllocator>,
    pub(super) verifier: Verifier,
    pub(super) dataflow: DataflowChecker,
    /// Runs the dataflow check's original half on another thread, when
    /// given ([`Workspace::set_split_runner`]).
    pub(super) split: Option<alloc::boxed::Box<dyn SplitRunner>>,
    pub(super) order: LinearOrder,
    pub(super) live: MemLiveness,
    pub(super) bounds: Bounds,
    pub(super) schedule: Schedule,
    rotation: Rotation,
    sb_rotation: SbRotation,
    /// The coalescing candidates found before the SB colorer
    /// (`--dma-affinity on`).
    affinity: AffinityFinder,
    storage: StorageReport,
    /// `bounds` describe the module [`Workspace::reserve`] was given (it
    /// computed them to decide what to keep for the SB allocators); the
    /// run that follows takes them instead of computing them again.
    bounds_current: bool,
    /// Where SB must spill: room for the result of the allocator the
    /// pipeline selected while the other one places from the same module
    /// (see [`SbPortfolio`]).
    portfolio: Option<Module>,
    /// The scan's options beside the SB colorer, as its storage was
    /// reserved.
    portfolio_lsa: LsaOptions,
    /// The scan's options as its storage was reserved (its restart copies
    /// grow with the runs over the capacity counted then).
    scan_options: LsaOptions,
}

impl Workspace {
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether [`run`] drops each pass's storage after its last use in the
    /// pass list (for a one-shot run: lower peak memory; a later run needs
    /// [`Workspace::reserve`] again). Off by default.
    pub fn set_release_spent(&mut self, on: bool) {
        self.release_spent = on;
    }

    /// Gives the dataflow check a runner for its original half (the std
    /// shim's thread): the check then walks the two programs on two
    /// threads ([`DataflowChecker::check_split`]), with the same findings.
    pub fn set_split_runner(&mut self, runner: Option<alloc::boxed::Box<dyn SplitRunner>>) {
        self.split = runner;
    }

    /// Drops the storage of the passes that `done` was the last user of.
    fn release_after(&mut self, done: Pass, list: &[Pass], k: usize) {
        let later = |f: &dyn Fn(&Pass) -> bool| list.get(k + 1..).is_some_and(|r| r.iter().any(f));
        // A space's problem (its buffers' table, filled when the workspace
        // was reserved) goes after the last pass that colors the space.
        let colors = |p: &Pass, s: Space| match p {
            Pass::Coloring(t) | Pass::Exact(t) => *t == s,
            Pass::RegSpillSlots => s == Space::Dram,
            _ => false,
        };
        let colored = match done {
            Pass::Coloring(s) | Pass::Exact(s) => Some(s),
            Pass::RegSpillSlots => Some(Space::Dram),
            _ => None,
        };
        if let Some(s) = colored {
            if !later(&|p| colors(p, s)) {
                colorer_of(s, &mut self.coloring, &mut self.dram_coloring).release_problem(s);
            }
        }
        match done {
            Pass::LinearScan if !later(&|p| *p == Pass::LinearScan) => {
                self.lsa = LsaWorkspace::default();
                self.portfolio = None;
            }
            Pass::DmaOptimization(_) if !later(&|p| matches!(p, Pass::DmaOptimization(_))) => {
                self.dma = DmaWorkspace::default();
            }
            Pass::ColoringReg if !later(&|p| *p == Pass::ColoringReg) => self.reg = None,
            Pass::Coloring(s) | Pass::Exact(s)
                if s.is_on_chip()
                    && !later(
                        &|p| matches!(p, Pass::Coloring(s) | Pass::Exact(s) if s.is_on_chip()),
                    ) =>
            {
                // The SB rotation reads the colorer's placement affinities;
                // the DRAM passes use these tables when they have none of
                // their own.
                let dram_here = self.dram_coloring.is_none() && later(&|p| colors(p, Space::Dram));
                if dram_here || later(&|p| *p == Pass::RotationSb) {
                    self.coloring.release_strategies();
                } else {
                    self.coloring = ColoringWorkspace::default();
                }
                self.portfolio = None;
                if !list.contains(&Pass::LinearScan) {
                    self.lsa = LsaWorkspace::default();
                }
            }
            _ => {}
        }
    }

    /// Sizes every pass for `m` and reserves `m`'s headroom, and the
    /// storage of the `checks` that [`run`] will be given.
    ///
    /// The headroom is the sum over the pass list (each pass may use all of
    /// its own before the next runs); it is reserved first, so that every
    /// workspace below sizes its analyses to the module's final capacity
    /// ([`Module::capacity`]) — what the module can grow to while the passes
    /// run. After this, [`run`] does not allocate.
    ///
    /// Storage: the linear part (the module and every pass's tables) is
    /// reserved first; the methods whose storage grows faster than the
    /// input (the coloring passes' interference graphs and exact search,
    /// the dataflow checker's scratch) then get what the run's budget
    /// ([`Options::storage_limit`]) leaves, and are skipped or cut short
    /// when it does not suffice. [`Workspace::storage`] says what the
    /// reservation is made of and what it left out.
    ///
    /// The order and liveness computed here describe `m` as it is; the
    /// returned [`Reserved`] runs from them instead of computing them
    /// again. Dropping it keeps the reservation, and a later [`run`]
    /// computes them anew.
    pub fn reserve<'r, 'a>(
        &'r mut self,
        m: &'r mut Module,
        opts: &'r Options,
        checks: Checks<'a>,
    ) -> Reserved<'r, 'a> {
        let original = checks.input();
        // A deferred input is the module as given now, without its name
        // index (nothing looks a name up in it; the driver drops it, as a
        // read-only copy never has one): what the caller will hold during
        // the checks.
        let deferred_bytes = matches!(checks, Checks::Deferred)
            .then(|| m.reserved_bytes().saturating_sub(m.name_index_bytes()));
        let list = passes(opts);
        // The pipeline's order and liveness, computed before the headroom
        // (reserving keeps them: the module's instructions stay): the
        // headroom of a module under pressure grows with its runs over
        // the capacity.
        self.order.compute(m);
        self.live.compute(m, &self.order);
        // The coloring passes' spill headroom: the larger one for a module
        // under pressure, unless the caller set a storage budget, which the
        // smaller one is measured against.
        let spills = match opts.storage_limit {
            Some(_) => tensor_coloring::SPILL_HEADROOM,
            None if tensor_coloring::spill_headroom(m)
                == tensor_coloring::PRESSURE_SPILL_HEADROOM =>
            {
                tensor_coloring::pressure_spill_headroom(
                    m,
                    &self.order,
                    &self.live,
                    &mut self.bounds,
                )
            }
            None => tensor_coloring::SPILL_HEADROOM,
        };
        self.coloring.set_spill_limit(spills);
        let lo = lsa_options(opts, m, spills);
        self.scan_options = lo;
        let mut headroom = RegAllocator::headroom_with(m, opts.reg_max_spill_temporaries);
        // The DRAM locations the passes may add (spill slots; the DMA
        // passes add on-chip tiles only): the register colorer's new
        // locations are its slots.
        let mut new_dram = headroom.mems;
        // Instructions the allocators before a DMA pass may insert (spill
        // stores and reloads) may be candidates of it. Each is a DMA of one
        // space, so a candidate of one DMA pass only: they are charged to
        // the next DMA pass, once (the passes' headroom is summed).
        let mut spill_insts = 0usize;
        // The most candidate DMAs one DMA pass can see: its space's DMAs
        // and every instruction the allocators before it may insert (a
        // spill store or reload of either on-chip space).
        let mut inserted = 0usize;
        let mut dmas = 0usize;
        // The SB portfolio's scan may run in place of the SB colorer's
        // result (see `SbPortfolio`): its headroom too, where it may run.
        let portfolio = spill_room(opts) && sb_portfolio_possible(opts, &list, m);
        // At optlevel 8, the colorer beside the scan: both on-chip passes.
        let beside = spill_room(opts) && colorer_beside_possible(&list, m);
        // The scan beside the colorer spills within the colorer's headroom
        // (a scan that needs more fails, and the colorer's placement
        // stays): the module headroom stays that of a spill round, however
        // large the module.
        let plo = LsaOptions {
            max_spills: Some(spills as u32),
            ..lo
        };
        for p in &list {
            let h = match p {
                Pass::LinearScan if beside => LsaWorkspace::headroom(m, &lo)
                    .plus(ColoringWorkspace::headroom_for(m, Space::Psum, spills))
                    .plus(ColoringWorkspace::headroom_for(m, Space::Sb, spills)),
                Pass::LinearScan => LsaWorkspace::headroom(m, &lo),
                Pass::Coloring(Space::Sb) | Pass::Exact(Space::Sb) if portfolio => {
                    ColoringWorkspace::headroom_for(m, Space::Sb, spills)
                        .plus(LsaWorkspace::headroom(m, &plo))
                }
                Pass::Coloring(s) | Pass::Exact(s) => {
                    ColoringWorkspace::headroom_for(m, *s, spills)
                }
                Pass::RegSpillSlots => ColoringWorkspace::headroom_for(m, Space::Dram, spills),
                Pass::DmaOptimization(s) => {
                    dmas = dmas.max(DmaWorkspace::candidate_bound(m, *s, inserted));
                    DmaWorkspace::headroom_in(m, *s, core::mem::take(&mut spill_insts))
                }
                // Multi-buffering adds a loop term to each pattern of a
                // tile it gives slots.
                Pass::RotationSb => Capacity {
                    ap_exts: crate::mem::sb_rotation::multi_buffer::ext_headroom(m),
                    ..Capacity::default()
                },
                Pass::CheckInPlace | Pass::ColoringReg | Pass::RotationPsum => Capacity::default(),
            };
            new_dram = new_dram.saturating_add(match p {
                Pass::LinearScan if beside => {
                    LsaWorkspace::spill_slots(m, &lo)
                        + ColoringWorkspace::spill_slots(spills, Space::Psum)
                        + ColoringWorkspace::spill_slots(spills, Space::Sb)
                }
                Pass::LinearScan => LsaWorkspace::spill_slots(m, &lo),
                Pass::Coloring(Space::Sb) | Pass::Exact(Space::Sb) if portfolio => {
                    ColoringWorkspace::spill_slots(spills, Space::Sb)
                        + LsaWorkspace::spill_slots(m, &plo)
                }
                Pass::Coloring(s) | Pass::Exact(s) => ColoringWorkspace::spill_slots(spills, *s),
                _ => 0,
            });
            if !matches!(p, Pass::DmaOptimization(_)) {
                spill_insts = spill_insts.saturating_add(h.insts);
                inserted = inserted.saturating_add(h.insts);
            }
            headroom = headroom.plus(h);
        }
        m.reserve(headroom);
        let budget = storage_budget(m, opts);
        let mut storage = StorageReport::new(budget);
        if let Some(o) = original {
            storage.add("the input copy of the dataflow check", o.reserved_bytes());
        }
        if let Some(bytes) = deferred_bytes {
            storage.add("the input, given again after the passes", bytes);
        }
        m.storage_parts(&mut storage);
        // The pipeline's analyses are computed once here, for the module's
        // final capacity: the workspaces size their tables from them.
        let cap = m.capacity();
        self.order.reserve(&cap);
        self.live.reserve(&cap);
        self.bounds.reserve(&cap);
        let analyses = crate::heap_bytes!(self.order, self.live, self.bounds);
        storage.add("pipeline analyses (order, liveness, bounds)", analyses);
        // One order, liveness and bounds (the pipeline's) serve every pass:
        // the workspaces reserve only their own tables and are lent these
        // around each run (see the module doc).
        if list.contains(&Pass::LinearScan) {
            // The live set the scan sees is the input's when no pass runs
            // before it.
            let live = (list.first() == Some(&Pass::LinearScan)).then_some(&self.live);
            self.lsa.reserve_tables(m, &lo, live);
            storage.add("linear scan", self.lsa.heap_bytes());
        }
        let mut spaces: ArrayVec<Space, 3> = ArrayVec::new();
        for p in &list {
            let s = match p {
                Pass::Coloring(s) | Pass::Exact(s) => *s,
                Pass::RegSpillSlots => Space::Dram,
                _ => continue,
            };
            if !spaces.contains(&s) {
                spaces.push(s);
            }
        }
        if list.iter().any(|p| matches!(p, Pass::DmaOptimization(_))) {
            self.dma.reserve_tables(m, dmas);
            storage.add("DMA optimization", self.dma.heap_bytes());
        }
        let reg = self.reg.get_or_insert_with(RegAllocator::default);
        reg.set_max_spill_temporaries(opts.reg_max_spill_temporaries);
        reg.reserve(m);
        storage.add("register colorer", reg.heap_bytes());
        // The verifier runs after the passes unless --no-verify, and as the
        // in-place check at optlevel 7.
        if checks.placement() || list.contains(&Pass::CheckInPlace) {
            self.verifier.reserve(m);
            storage.add("placement verifier", self.verifier.heap_bytes());
        }
        if checks.dataflow() {
            let before = self.dataflow.heap_bytes();
            // Deferred: `m` has not been rewritten yet, so it is the input.
            let est = DataflowCapacity::estimate(original.unwrap_or(m), m);
            let cap = est.within(storage.allowance());
            if cap != est {
                storage.skip(Skipped {
                    method: "the dataflow checker's up-front reservation",
                    instead: "a smaller one that grows up to the budget",
                    needed: est.bytes(),
                    available: storage.allowance(),
                    cut_short: true,
                });
            }
            self.dataflow.reserve(cap);
            storage.add(
                "dataflow checker",
                self.dataflow.heap_bytes().saturating_sub(before),
            );
        }
        // Last of the linear part, before the methods that take what the
        // budget leaves.
        let exact = coloring_options(opts).exact.is_some();
        // A one-shot run that colors an on-chip space and DRAM gives DRAM
        // tables of its own (see `dram_coloring`); the budget is shared in
        // the same order as by one reservation (DRAM comes last in every
        // pass list).
        let split_dram = self.release_spent
            && spaces.iter().any(|s| s.is_on_chip())
            && spaces.last() == Some(&Space::Dram);
        let shared = &spaces[..spaces.len() - split_dram as usize];
        self.coloring
            .reserve_for_spaces_with(m, shared, exact, new_dram, &self.live, &mut storage);
        self.dram_coloring = split_dram.then(|| {
            let mut dram = ColoringWorkspace::default();
            dram.set_spill_limit(spills);
            let live = &self.live;
            dram.reserve_for_spaces_with(m, &[Space::Dram], exact, new_dram, live, &mut storage);
            dram
        });
        // Every pass reserved within the headroom above: the capacity the
        // analyses were sized for is final (reserving again is a no-op
        // unless a workspace grew the module, which the report would show).
        let cap = m.capacity();
        self.order.reserve(&cap);
        self.live.reserve(&cap);
        self.bounds.reserve(&cap);
        let grown = crate::heap_bytes!(self.order, self.live, self.bounds) - analyses;
        if grown > 0 {
            storage.add("pipeline analyses (grown)", grown);
        }
        if opts.schedule_model {
            self.schedule
                .reserve(&cap, ScheduleOptions::default().window);
            storage.add("schedule model", self.schedule.heap_bytes());
        }
        if affinity_active(opts) {
            self.affinity.reserve(cap.insts);
            storage.add("placement affinities", self.affinity.heap_bytes());
            self.coloring.reserve_affinity(m, &mut storage);
        }
        if list.contains(&Pass::RotationPsum) {
            self.rotation.reserve(&cap);
            storage.add("address rotation", self.rotation.heap_bytes());
        }
        if list.contains(&Pass::RotationSb) {
            self.sb_rotation
                .reserve(&cap, &SbRotationOptions::default());
            storage.add("SB address rotation", self.sb_rotation.heap_bytes());
        }
        // The linear scan's restart point and the on-chip colorers' second
        // strategy cost copies of the module (one, two): kept only where the
        // pass must spill (the input needs more SB, or for the scan's restart
        // more PSUM, than the space has), and within the budget.
        let colored = |s: Space| {
            list.iter()
                .any(|p| matches!(p, Pass::Coloring(t) | Pass::Exact(t) if *t == s))
        };
        let (sb_colored, psum_colored) = (colored(Space::Sb), colored(Space::Psum));
        let scans_first = list.first() == Some(&Pass::LinearScan) && lo.restart_copies > 0;
        self.bounds_current = false;
        if scans_first || sb_colored || psum_colored {
            self.bounds.compute(m, &self.order, &self.live);
            self.bounds_current = true;
            let sb_over =
                self.bounds.space(Space::Sb).lower_bound() > m.target.sb_usable_bytes as u64;
            let psum_over =
                self.bounds.space(Space::Psum).lower_bound() > m.target.psum_usable_bytes() as u64;
            if sb_over || psum_over {
                let copy = m.reserved_bytes();
                let restart = scans_first
                    && within(
                        &mut storage,
                        copy,
                        "the linear scan's restart after access splits",
                        "a scan that finds no tensor to spill fails there",
                    );
                if restart {
                    storage.add(
                        "the linear scan's restart point",
                        self.lsa.reserve_restart(m),
                    );
                }
                let lsa_strategies = restart
                    && sb_over
                    && within(
                        &mut storage,
                        copy.saturating_mul(2),
                        "the linear scan's second spill strategy (access splits first)",
                        "the scan spills by its rules first, splits at every access last",
                    );
                if lsa_strategies {
                    let b = self.lsa.reserve_strategies(m);
                    storage.add("the linear scan's second strategy", b);
                }
                self.portfolio = None;
                // The colorer beside the scan: room for the scan's result
                // (the scan's strategy copies hold the module it got).
                if beside
                    && lsa_strategies
                    && within(
                        &mut storage,
                        copy,
                        "the coloring allocator beside the linear scan",
                        "the scan's placement alone",
                    )
                {
                    let result = self
                        .portfolio
                        .get_or_insert_with(|| Module::new(m.target.clone()));
                    result.copy_from(m);
                    storage.add("the linear scan's result", result.reserved_bytes());
                    // The PSUM and SB colorers' tables, within what the
                    // budget leaves (as for the coloring pipelines).
                    let exact = coloring_options(opts).exact.is_some();
                    self.coloring.reserve_for_spaces_with(
                        m,
                        &[Space::Psum, Space::Sb],
                        exact,
                        0,
                        &self.live,
                        &mut storage,
                    );
                    // Its second spill strategy, as the coloring pipelines
                    // have it: without it the colorer beside the scan fails
                    // where theirs fits.
                    if within(
                        &mut storage,
                        copy.saturating_mul(2),
                        "the second spill strategy of the colorer beside the scan",
                        "live-range splits first, access splits last",
                    ) {
                        let b = self.coloring.reserve_strategies(m);
                        storage.add("the colorer's second strategy", b);
                    }
                }
                let colorer_strategies = ((sb_colored && sb_over) || (psum_colored && psum_over))
                    && within(
                        &mut storage,
                        copy.saturating_mul(2),
                        "the on-chip colorer's second spill strategy (access splits first)",
                        "live-range splits first, access splits last",
                    );
                if colorer_strategies {
                    let b = self.coloring.reserve_strategies(m);
                    storage.add("the on-chip colorer's second strategy", b);
                }
                // The scan beside the SB colorer: its restart point and
                // strategy copies, room for the colorer's result (four
                // copies of the module) and its tables (per location, less
                // than a module's storage per instruction: a fifth copy
                // bounds them).
                if portfolio
                    && colorer_strategies
                    && sb_over
                    && within(
                        &mut storage,
                        copy.saturating_mul(5),
                        "the linear scan beside the SB colorer",
                        "the colorer's placement alone",
                    )
                {
                    self.lsa.reserve_tables(m, &plo, None);
                    self.portfolio_lsa = plo;
                    let tables = self.lsa.heap_bytes();
                    let point = self.lsa.reserve_restart(m);
                    let b = self.lsa.reserve_strategies(m);
                    let result = self
                        .portfolio
                        .get_or_insert_with(|| Module::new(m.target.clone()));
                    result.copy_from(m);
                    storage.add("the linear scan beside the SB colorer", tables);
                    storage.add(
                        "its restart point, strategy copies and the colorer's result",
                        point + b + result.reserved_bytes(),
                    );
                }
            }
        }
        self.dataflow.set_walk_limit(opts.dataflow_walk_limit);
        // The checker may grow into what the whole reservation left.
        self.dataflow.set_storage_limit(
            self.dataflow
                .heap_bytes()
                .saturating_add(storage.remaining()),
        );
        self.storage = storage;
        Reserved {
            ws: self,
            m,
            opts,
            checks,
        }
    }

    /// What the last [`Workspace::reserve`] is made of, under which budget,
    /// and which methods it skipped or cut short for it.
    pub fn storage(&self) -> &StorageReport {
        &self.storage
    }
}

/// Runs the linear scan beside the SB colorer whose result `m` holds
/// (report `rc`; `None` when the colorer failed), from the module the
/// colorer got, where the workspace keeps what it needs ([`SbPortfolio`]);
/// keeps the placement whose spills cost fewer cycles (then bytes) in `m`,
/// the scan's whenever the colorer failed. `None` when it did not run.
fn scan_beside(
    m: &mut Module,
    ws: &mut Workspace,
    rc: Option<&ColoringReport>,
) -> Option<(SbPortfolio, Option<LsaReport>)> {
    let result = ws.portfolio.as_mut()?;
    let before = ws.coloring.module_before_pass()?;
    result.copy_from(m);
    m.copy_from(before);
    let lo = ws.portfolio_lsa;
    // `m` is not what the pipeline's analyses describe: computed anew.
    let r = scan_lent(m, ws, &lo, false, false);
    let colorer = rc.map(|rc| (rc.spill_cycles, rc.spill_bytes));
    let scan = r.as_ref().ok().map(scan_cost);
    let kept_scan = scan.is_some_and(|s| colorer.map_or(true, |c| s < c));
    if !kept_scan {
        if let Some(result) = ws.portfolio.as_ref() {
            m.copy_from(result);
        }
    }
    let p = SbPortfolio {
        colorer,
        scan,
        kept_scan,
    };
    Some((p, r.ok()))
}

/// The linear scan on `m`, in the pipeline's order, liveness and bounds
/// lent to its workspace (`current` / `bounds_current`: they describe `m`).
fn scan_lent(
    m: &mut Module,
    ws: &mut Workspace,
    lo: &LsaOptions,
    current: bool,
    bounds_current: bool,
) -> Result<LsaReport, alloc::boxed::Box<LsaError>> {
    ws.lsa.exchange_analyses(
        &mut ws.order,
        &mut ws.live,
        &mut ws.bounds,
        current,
        bounds_current,
    );
    let r = if m.num_loops() > 0 {
        lsa::run_with_loops(m, &mut ws.lsa, lo)
    } else {
        lsa::run(m, &mut ws.lsa, lo)
    };
    ws.lsa
        .exchange_analyses(&mut ws.order, &mut ws.live, &mut ws.bounds, false, false);
    r.map_err(alloc::boxed::Box::new)
}

/// Adds the spills, rematerializations, bytes and cycles of the placement
/// a pass kept to its space's summary.
fn add_spills(sum: &mut SpaceSummary, (spills, remats, bytes, cycles): (u32, u32, u64, u64)) {
    sum.spills += spills;
    sum.remats += remats;
    sum.spill_bytes += bytes;
    sum.spill_cycles += cycles;
}

/// The on-chip spill cycles and bytes of a scan.
fn scan_cost(l: &LsaReport) -> (u64, u64) {
    (
        l.sb.spill_cycles.saturating_add(l.psum.spill_cycles),
        l.sb.spill_bytes.saturating_add(l.psum.spill_bytes),
    )
}

/// Runs the coloring allocator (PSUM, then SB) beside the linear scan
/// whose result `m` holds (report `rl`; `None` when the scan failed), from
/// the module the scan got, where the workspace keeps what it needs
/// ([`SbPortfolio`]); keeps the placement whose on-chip spills cost fewer
/// cycles (then bytes) in `m`, the colorer's whenever the scan failed.
/// `None` when it did not run; else the colorer's two reports when its
/// placement was kept.
fn colorer_beside(
    m: &mut Module,
    ws: &mut Workspace,
    copts: &ColoringOptions,
    clock: &mut dyn Clock,
    rl: Option<&LsaReport>,
) -> Option<(SbPortfolio, Option<[ColoringReport; 2]>)> {
    let result = ws.portfolio.as_mut()?;
    let before = ws.lsa.module_before_pass()?;
    result.copy_from(m);
    m.copy_from(before);
    let mut reports = [ColoringReport::default(); 2];
    let mut ok = true;
    for (k, space) in [Space::Psum, Space::Sb].into_iter().enumerate() {
        ws.coloring
            .exchange_analyses(&mut ws.order, &mut ws.live, false);
        let r = tensor_coloring::run(m, space, copts, &mut ws.coloring, clock);
        ws.coloring
            .exchange_analyses(&mut ws.order, &mut ws.live, false);
        match r {
            Ok(r) => reports[k] = r,
            Err(_) => {
                ok = false;
                break;
            }
        }
    }
    let colorer = ok.then(|| {
        (
            reports[0]
                .spill_cycles
                .saturating_add(reports[1].spill_cycles),
            reports[0]
                .spill_bytes
                .saturating_add(reports[1].spill_bytes),
        )
    });
    let scan = rl.map(scan_cost);
    let kept_colorer = colorer.is_some_and(|c| scan.map_or(true, |s| c < s));
    if !kept_colorer {
        if let Some(result) = ws.portfolio.as_ref() {
            m.copy_from(result);
        }
    }
    let p = SbPortfolio {
        colorer,
        scan,
        kept_scan: !kept_colorer,
    };
    Some((p, kept_colorer.then_some(reports)))
}

/// True when the SB colorer (or exact search) of `list` may run beside the
/// linear scan ([`SbPortfolio`]): the colorer allowed to spill
/// (`--gca-dma-optlevel` 0 to 2), and the user's SB tensors do not fit
/// side by side (the headroom decision of
/// [`crate::mem::tensor_coloring::spill_headroom`]). The pipeline keeps it
/// only where the budget has room for its headroom ([`spill_room`]), SB's
/// bound is over its capacity and the budget has room for its copies.
fn sb_portfolio_possible(opts: &Options, list: &[Pass], m: &Module) -> bool {
    opts.gca_dma_optlevel >= 0
        && (list.contains(&Pass::Coloring(Space::Sb)) || list.contains(&Pass::Exact(Space::Sb)))
        && crate::mem::tensor_coloring::spill_headroom(m)
            == crate::mem::tensor_coloring::PRESSURE_SPILL_HEADROOM
}

/// True when the coloring allocator may run beside the linear scan of
/// `list` ([`SbPortfolio`], optlevel 8): the conditions of
/// [`sb_portfolio_possible`] with the scan as the pipeline's SB allocator.
fn colorer_beside_possible(list: &[Pass], m: &Module) -> bool {
    list.first() == Some(&Pass::LinearScan)
        && crate::mem::tensor_coloring::spill_headroom(m)
            == crate::mem::tensor_coloring::PRESSURE_SPILL_HEADROOM
}

/// True when `bytes` more fit what the budget of `storage` has left; else
/// records `method` as skipped, with what runs `instead`.
fn within(
    storage: &mut StorageReport,
    bytes: u64,
    method: &'static str,
    instead: &'static str,
) -> bool {
    let fits = bytes <= storage.remaining();
    if !fits {
        storage.skip(Skipped {
            method,
            instead,
            needed: bytes,
            available: storage.remaining(),
            cut_short: false,
        });
    }
    fits
}

/// The least explicit storage budget with room for the spill headroom
/// of the SB portfolio and for all of the scan's restart headroom under a
/// budget ([`tensor_coloring::SPILL_HEADROOM`] copies): that headroom is a
/// fixed number of copies that every table reserved after it is sized
/// for, a few MB across the pipeline for a module of a few thousand
/// instructions, which would take most of a budget of a few MB (a
/// firmware's) from the passes' own tables; a budget of tens of MB (a
/// device tool's) has room for it. A smaller budget gives the restarts a
/// share of their headroom in proportion ([`restart_copies`]).
pub const SPILL_ROOM_BUDGET: u64 = 64 << 20;

// The scan's failure text names it (`lsa::RESTART_HEADROOM_SPENT`).
const _: () = assert!(SPILL_ROOM_BUDGET == 64 << 20);

/// Whether the run of `opts` has room in its storage budget for the spill
/// headroom of the SB portfolio: always under the default budget (at least
/// [`crate::storage::DEFAULT_BUDGET_FLOOR`]), under an explicit one of at
/// least [`SPILL_ROOM_BUDGET`].
fn spill_room(opts: &Options) -> bool {
    opts.storage_limit.map_or(true, |b| b >= SPILL_ROOM_BUDGET)
}

/// The access copies the scan's restarts may make under an explicit
/// storage budget `b`, on a module under pressure: the coloring passes'
/// headroom for such a module ([`tensor_coloring::PRESSURE_SPILL_HEADROOM`])
/// when `b` is at least the default budget's floor
/// ([`crate::storage::DEFAULT_BUDGET_FLOOR`]); below, the smaller headroom
/// the coloring passes get under a budget
/// ([`tensor_coloring::SPILL_HEADROOM`]), in proportion to the budget
/// under [`SPILL_ROOM_BUDGET`] (each copy sizes every table reserved after
/// it, so a budget of a few MB keeps room for a few splits). The default
/// budget gives them the coloring passes' headroom ([`lsa_options`]).
fn restart_copies(b: u64) -> u32 {
    use crate::mem::tensor_coloring::{PRESSURE_SPILL_HEADROOM, SPILL_HEADROOM};
    let copies = if b >= crate::storage::DEFAULT_BUDGET_FLOOR {
        PRESSURE_SPILL_HEADROOM
    } else {
        let per_copy = SPILL_ROOM_BUDGET / SPILL_HEADROOM as u64;
        (b / per_copy).min(SPILL_HEADROOM as u64) as usize
    };
    copies as u32
}

/// The linear scan's options on `m`. Under pressure it may restart after
/// splits ([`LsaWorkspace::reserve_restart`]) with the access copies the
/// budget has room for ([`restart_copies`]), as the coloring passes' spill
/// headroom: that headroom sizes every workspace reserved to the module's
/// capacity after it; under the default budget, the coloring passes'
/// (`spills`, which grows with the runs over the capacity). The restart
/// point itself is kept only within the budget (`Workspace::reserve`).
fn lsa_options(opts: &Options, m: &Module, spills: usize) -> LsaOptions {
    let under_pressure = crate::mem::tensor_coloring::spill_headroom(m)
        == crate::mem::tensor_coloring::PRESSURE_SPILL_HEADROOM;
    let copies = match (under_pressure, opts.storage_limit) {
        (false, _) => 0,
        (true, None) => u32::try_from(spills).unwrap_or(u32::MAX),
        (true, Some(b)) => restart_copies(b),
    };
    LsaOptions {
        vnc_count: opts.vnc_count,
        max_spills: opts.lsa_max_spills,
        restart_copies: copies,
        strategy: opts.spill_strategy,
        // Under pressure, a budget without room is why the scan does not
        // restart: its failure says so.
        restarts_withheld: under_pressure && copies == 0,
        // The pipeline's DRAM allocator runs after every on-chip one.
        place_slots: false,
        ..LsaOptions::default()
    }
}

/// The budget of a run on `m`: the option, or the default for `m`'s size.
pub fn storage_budget(m: &Module, opts: &Options) -> StorageBudget {
    match opts.storage_limit {
        Some(limit) => StorageBudget::bytes(limit),
        None => StorageBudget::default_for(m.reserved_bytes()),
    }
}

/// Effort of the coloring allocator per optlevel: more orders and
/// improvement replays at higher levels.
pub fn coloring_options(opts: &Options) -> ColoringOptions {
    let (sweeps, improve) = match opts.optlevel {
        0 => (1, 0),
        1 => (6, 100),
        3 => (32, 1500),
        _ => (16, 400),
    };
    ColoringOptions {
        gca: GcaOptions {
            sweeps,
            improve,
            ..GcaOptions::default()
        },
        exact: Some(Budget {
            nodes: Some(5_000_000),
            micros: Some(2_000_000),
        }),
        dma_optlevel: opts.gca_dma_optlevel,
        prefer_exact: opts.allocator == Allocator::Exact,
        affinity: affinity_active(opts),
        strategy: opts.spill_strategy,
        ..ColoringOptions::default()
    }
}

/// Which independent checks end a [`run`]: the one switch for verification.
///
/// The placement verifier needs only the result; the dataflow checker also
/// needs the program as it was before the passes, so [`Checks::Full`]
/// carries that copy (the caller takes it, e.g. with
/// [`Module::read_only_copy`], before the run rewrites `m`). Optlevel 7's
/// in-place check is a pass of its pipeline and runs under every variant.
#[derive(Clone, Copy, Debug, Default)]
pub enum Checks<'a> {
    /// No check after the passes (`--no-verify`).
    None,
    /// The placement verifier on the result.
    #[default]
    Placement,
    /// The placement verifier, then the dataflow checker, which proves that
    /// every read of the result sees the value the same read of `input`
    /// sees.
    Full {
        /// The module as it was given to [`run`].
        input: &'a Module,
    },
    /// [`Checks::Full`] with the input given after the passes: the caller
    /// makes it again (e.g. reads its file again) and hands it to
    /// [`super::EndSteps::give_input`], so that no copy is held while the
    /// passes run. The checker is sized from the module the reservation
    /// gets, which is the input. End steps that finish without it fail
    /// ([`PipelineError::InputNotGiven`]); [`run`] and [`Reserved::run`]
    /// give no input, so this variant needs [`Reserved::run_passes`] and
    /// [`Workspace::end_steps`].
    Deferred,
}

impl<'a> Checks<'a> {
    /// The input copy the dataflow checker compares against, if it runs.
    pub fn input(self) -> Option<&'a Module> {
        match self {
            Checks::Full { input } => Some(input),
            Checks::None | Checks::Placement | Checks::Deferred => None,
        }
    }

    /// Whether the dataflow checker runs after the passes (its input given
    /// now or later).
    pub fn dataflow(self) -> bool {
        matches!(self, Checks::Full { .. } | Checks::Deferred)
    }

    /// Whether the placement verifier runs on the result.
    pub fn placement(self) -> bool {
        !matches!(self, Checks::None)
    }
}

/// Runs the pipeline `opts` selects on `m`, then the `checks`: the placement
/// verifier on the result, and the dataflow checker against the input copy
/// [`Checks::Full`] holds. The same as [`run_passes`], then the
/// [`Workspace::end_steps`] run in order.
pub fn run(
    m: &mut Module,
    opts: &Options,
    ws: &mut Workspace,
    clock: &mut dyn Clock,
    checks: Checks<'_>,
) -> Result<RunReport, PipelineError> {
    let passed = run_from(m, opts, ws, clock, checks, false)?;
    ws.end_steps(passed, clock).run_in_order(m, clock)
}

/// The passes of [`run`] without its end steps (the schedule model and the
/// `checks`), for an embedder that runs those itself, e.g. on several
/// threads: [`Workspace::end_steps`] on the result, then
/// [`EndSteps::finish`](super::finish::EndSteps::finish), gives what [`run`]
/// gives.
pub fn run_passes<'a>(
    m: &mut Module,
    opts: &Options,
    ws: &mut Workspace,
    clock: &mut dyn Clock,
    checks: Checks<'a>,
) -> Result<Passed<'a>, PipelineError> {
    run_from(m, opts, ws, clock, checks, false)
}

/// A workspace just reserved for a module by [`Workspace::reserve`]. It
/// holds the module, the options and the checks the reservation was sized
/// for, so that nothing changes the module between the reservation and the
/// run: the order and liveness the reservation computed still describe it,
/// and the run starts from them.
#[derive(Debug)]
pub struct Reserved<'r, 'a> {
    ws: &'r mut Workspace,
    m: &'r mut Module,
    opts: &'r Options,
    checks: Checks<'a>,
}

impl<'a> Reserved<'_, 'a> {
    /// [`run`] on the reserved module.
    pub fn run(self, clock: &mut dyn Clock) -> Result<RunReport, PipelineError> {
        let Reserved {
            ws,
            m,
            opts,
            checks,
        } = self;
        let passed = run_from(m, opts, ws, clock, checks, true)?;
        ws.end_steps(passed, clock).run_in_order(m, clock)
    }

    /// [`run_passes`] on the reserved module.
    pub fn run_passes(self, clock: &mut dyn Clock) -> Result<Passed<'a>, PipelineError> {
        run_from(self.m, self.opts, self.ws, clock, self.checks, true)
    }
}

/// [`run_passes`]; `analyses_current` when `ws.order`/`ws.live` describe `m`.
fn run_from<'a>(
    m: &mut Module,
    opts: &Options,
    ws: &mut Workspace,
    clock: &mut dyn Clock,
    checks: Checks<'a>,
    analyses_current: bool,
) -> Result<Passed<'a>, PipelineError> {
    let opts = opts.normalize().map_err(PipelineError::Options)?;
    let mut report = RunReport {
        optlevel: opts.optlevel,
        storage: ws.storage.clone(),
        ..RunReport::default()
    };
    // Lower bounds of the input program.
    if !analyses_current {
        ws.order.compute(m);
        ws.live.compute(m, &ws.order);
    }
    // What no pass can change is refused before the first one runs.
    if let Some((first, total)) = crate::verify::placement::first_illegal_placement(m) {
        return Err(PipelineError::IllegalInputPlacement { total, first });
    }
    if opts.selection() == Some(Selection::ColoringVerified) {
        let mut unplaced = m.mems().space.keys().filter(|&v| {
            m.mems().space[v] == Space::Psum && !m.is_placed(v) && ws.live.interval(v).is_some()
        });
        if let Some(first) = unplaced.next() {
            return Err(PipelineError::UnplacedPsum {
                first,
                count: 1 + unplaced.count() as u32,
            });
        }
    }
    if !(core::mem::take(&mut ws.bounds_current) && analyses_current) {
        ws.bounds.compute(m, &ws.order, &ws.live);
    }
    for s in Space::ALL {
        let b = ws.bounds.space(s).lower_bound();
        report.spaces[s.slot()].input_lower_bound = b;
        report.spaces[s.slot()].lower_bound = b;
    }
    report.floor = Floor::of(m);
    for s in [Space::Sb, Space::Psum] {
        let floor = *report.floor.space(s);
        report.spaces[s.slot()].floor = floor.bytes;
        let capacity = match s {
            Space::Psum => m.target.psum_usable_bytes() as u64,
            _ => m.target.sb_usable_bytes as u64,
        };
        if floor.bytes > capacity && allocates(&opts, m, s) {
            return Err(PipelineError::BelowFloor {
                space: s,
                capacity,
                floor,
            });
        }
    }
    // See the module doc: true while ws.order/ws.live describe `m`.
    let mut fresh = true;
    // True until the first pass: ws.bounds are the input's, from the
    // fresh order and liveness.
    let mut bounds_fresh = true;
    let copts = coloring_options(&opts);
    // The SB portfolio compares both allocators' spills; under another
    // strategy the one beside runs only where the selected one fails.
    let cheapest = opts.spill_strategy == SpillStrategy::Best;
    // The last DMA instance's report of the module, while only DMA
    // instances have run since (they rewrite and report; what runs between
    // two of them here only places or unplaces).
    let mut dma_report: Option<DmaReport> = None;
    for pass in passes(&opts) {
        let t0 = clock.now_micros();
        let known_dma = dma_report.take();
        match pass {
            Pass::LinearScan => {
                let lo = ws.scan_options;
                let r = scan_lent(m, ws, &lo, fresh, bounds_fresh);
                fresh = false;
                let mut colored = None;
                let r = match r {
                    Ok(r) => {
                        if cheapest && r.sb.spills + r.psum.spills > 0 {
                            if let Some((p, kept)) = colorer_beside(m, ws, &copts, clock, Some(&r))
                            {
                                colored = kept;
                                report.sb_portfolio = Some(p);
                            }
                        }
                        Some(r)
                    }
                    // A scan that found no placement where the colorer
                    // beside it finds one: the colorer's stands (and the
                    // report has no scan).
                    Err(e) => match colorer_beside(m, ws, &copts, clock, None) {
                        Some((p, Some(kept))) => {
                            colored = Some(kept);
                            report.sb_portfolio = Some(p);
                            None
                        }
                        _ => return Err(PipelineError::Lsa(e)),
                    },
                };
                for (k, s) in [Space::Psum, Space::Sb].into_iter().enumerate() {
                    let kept = match (&colored, &r) {
                        (Some(c), _) => (
                            c[k].spills,
                            c[k].remats,
                            c[k].spill_bytes,
                            c[k].spill_cycles,
                        ),
                        (None, Some(r)) => {
                            let sr = r.space(s);
                            (sr.spills, sr.remats, sr.spill_bytes, sr.spill_cycles)
                        }
                        (None, None) => (0, 0, 0, 0),
                    };
                    add_spills(&mut report.spaces[s.slot()], kept);
                    if let Some(c) = &colored {
                        report.coloring[s.slot()] = Some(c[k]);
                    }
                }
                report.lsa = r;
            }
            Pass::Coloring(space) | Pass::Exact(space) => {
                let mut o = copts;
                o.prefer_exact = matches!(pass, Pass::Exact(_));
                if o.affinity && space == Space::Sb {
                    if !fresh {
                        ws.order.compute(m);
                        ws.live.compute(m, &ws.order);
                        fresh = true;
                    }
                    let pairs = ws.coloring.affinity_pairs_mut();
                    ws.affinity.find(m, &ws.order, &ws.live, Space::Sb, pairs);
                }
                let colorer = colorer_of(space, &mut ws.coloring, &mut ws.dram_coloring);
                colorer.exchange_analyses(&mut ws.order, &mut ws.live, fresh);
                let r = tensor_coloring::run(m, space, &o, colorer, clock);
                colorer.exchange_analyses(&mut ws.order, &mut ws.live, false);
                let r = match r {
                    Ok(r) => Some(r),
                    // An SB colorer that found no placement where the scan
                    // beside it finds one: the scan's stands (and the
                    // report has no SB colorer).
                    Err(e) if space == Space::Sb => match scan_beside(m, ws, None) {
                        Some((p, Some(l))) if p.kept_scan => {
                            fresh = false;
                            let sb = l.sb;
                            add_spills(
                                &mut report.spaces[space.slot()],
                                (sb.spills, sb.remats, sb.spill_bytes, sb.spill_cycles),
                            );
                            report.lsa = Some(l);
                            report.sb_portfolio = Some(p);
                            None
                        }
                        _ => return Err(PipelineError::Coloring(e)),
                    },
                    Err(e) => return Err(PipelineError::Coloring(e)),
                };
                if let Some(r) = r {
                    // Without a spill round the pass only placed: what it
                    // handed back (ours, or its own first-round walk) is
                    // fresh.
                    fresh = r.spill_rounds == 0;
                    let mut kept = (r.spills, r.remats, r.spill_bytes, r.spill_cycles);
                    if cheapest && space == Space::Sb && r.spills > 0 {
                        if let Some((p, l)) = scan_beside(m, ws, Some(&r)) {
                            fresh = false;
                            if p.kept_scan {
                                let sb = l.as_ref().map(|l| l.sb).unwrap_or_default();
                                kept = (sb.spills, sb.remats, sb.spill_bytes, sb.spill_cycles);
                                report.lsa = l;
                            }
                            report.sb_portfolio = Some(p);
                        }
                    }
                    add_spills(&mut report.spaces[space.slot()], kept);
                    report.coloring[space.slot()] = Some(r);
                }
            }
            Pass::DmaOptimization(space) => {
                let (pass_obj, k) = if space == Space::Psum {
                    (DMA_OPTIMIZATION_PSUM, 0)
                } else {
                    (DMA_OPTIMIZATION_SB, 1)
                };
                let provisional = place_dram_provisionally(m);
                ws.dma.exchange_analyses(&mut ws.order, &mut ws.live, fresh);
                let st = pass_obj.run_known(m, &mut ws.dma, known_dma);
                fresh = ws.dma.exchange_analyses(&mut ws.order, &mut ws.live, false);
                unplace_provisional_dram(m, provisional);
                let st = st.map_err(PipelineError::Dma)?;
                dma_report = (!st.skipped).then_some(st.post);
                report.dma[k] = Some(st);
                if opts.optlevel != 7 {
                    if !fresh {
                        ws.order.compute(m);
                        ws.live.compute(m, &ws.order);
                        fresh = true;
                    }
                    release_abandoned(m, &ws.live, space);
                }
            }
            Pass::RotationPsum => {
                if !fresh {
                    ws.order.compute(m);
                    ws.live.compute(m, &ws.order);
                    fresh = true;
                }
                // Placement only: the analyses stay fresh.
                report.rotation = Some(ws.rotation.run(m, &ws.live));
            }
            Pass::RotationSb => {
                if !fresh {
                    ws.order.compute(m);
                    ws.live.compute(m, &ws.order);
                }
                // Placement only, unless tiles were given slots.
                let o = SbRotationOptions::default();
                let pairs = ws.coloring.affinity_pairs();
                // The headroom is over the plain placement's peak: joined
                // chains already spent part of it.
                let plain = report.coloring[Space::Sb.slot()]
                    .and_then(|c| c.affinity)
                    .map(|a| a.plain_peak);
                let r = ws.sb_rotation.run(m, &ws.live, &ws.order, pairs, plain, &o);
                // Tiles given slots changed size and patterns.
                fresh = r.buffered == 0;
                report.sb_rotation = Some(r);
            }
            Pass::CheckInPlace => {
                // Memory, and the registers the input colored: the fixed
                // assignment. The others are colored by the low-level
                // stage after this check, around the fixed ones.
                ws.verifier.set_scope(Scope {
                    uncolored: false,
                    ..Scope::default()
                });
                let r = ws.verifier.verify(m);
                if let Some(first) = r.findings.first() {
                    return Err(PipelineError::Verify {
                        pass: pass.name(),
                        total: r.total(),
                        first: *first,
                    });
                }
            }
            Pass::ColoringReg => {
                let reg = ws.reg.get_or_insert_with(|| RegAllocator::new(m));
                reg.set_max_spill_temporaries(opts.reg_max_spill_temporaries);
                reg.set_keep_colored(opts.optlevel == 7);
                let r = reg
                    .allocate(m, &RegAllocConfig::default())
                    .map_err(PipelineError::Reg)?;
                // Spill code, spill slots and removed self-moves change the
                // program; renaming registers does not touch memory accesses.
                fresh &=
                    r.spilled_registers == 0 && r.spill_instructions == 0 && r.copies_removed == 0;
                report.reg = Some(r);
            }
            Pass::RegSpillSlots => {
                let needs = m
                    .mems()
                    .space
                    .keys()
                    .any(|v| m.mems().space[v] == Space::Dram && !m.is_placed(v));
                if needs {
                    let colorer = colorer_of(Space::Dram, &mut ws.coloring, &mut ws.dram_coloring);
                    colorer.exchange_analyses(&mut ws.order, &mut ws.live, fresh);
                    let r = tensor_coloring::run(m, Space::Dram, &copts, colorer, clock);
                    colorer.exchange_analyses(&mut ws.order, &mut ws.live, false);
                    fresh = r.map_err(PipelineError::Coloring)?.spill_rounds == 0;
                }
            }
        }
        bounds_fresh = false;
        let micros = clock.now_micros().saturating_sub(t0);
        report
            .passes
            .try_push(PassRecord { pass, micros })
            .map_err(|_| PipelineError::PassTableFull { limit: MAX_PASSES })?;
        if ws.release_spent {
            let k = report.passes.len().saturating_sub(1);
            ws.release_after(pass, &passes(&opts), k);
        }
    }
    summarize(m, &mut report);
    if !checks.placement() {
        // The bounds of the result, from the pipeline's analyses (made
        // current if a pass changed the program).
        if !fresh {
            ws.order.compute(m);
            ws.live.compute(m, &ws.order);
        }
        ws.bounds.compute(m, &ws.order, &ws.live);
        result_bounds(&ws.bounds, &mut report);
    }
    Ok(Passed {
        report,
        schedule: opts.schedule_model,
        checks,
    })
}

/// True when `--dma-affinity on` has an effect on the pipeline of `opts`:
/// the SB colorer runs before the SB DMA pass, which then merges what it
/// placed side by side.
fn affinity_active(opts: &Options) -> bool {
    let list = passes(opts);
    let sb_color = list
        .iter()
        .position(|p| matches!(p, Pass::Coloring(Space::Sb) | Pass::Exact(Space::Sb)));
    let sb_dma = list
        .iter()
        .position(|p| *p == Pass::DmaOptimization(Space::Sb));
    opts.dma_affinity == DmaAffinity::On
        && matches!((sb_color, sb_dma), (Some(c), Some(d)) if c < d)
}

/// True when the pipeline of `opts` runs an allocator of `space` and `m`
/// has a location there to place (a module placed by hand is judged by
/// the verifier, not refused for its floor).
fn allocates(opts: &Options, m: &Module, space: Space) -> bool {
    let runs = passes(opts).iter().any(|p| match p {
        Pass::LinearScan => true,
        Pass::Coloring(s) | Pass::Exact(s) => *s == space,
        _ => false,
    });
    runs && m
        .mems()
        .space
        .keys()
        .any(|v| m.mems().space[v] == space && !m.is_placed(v))
}

/// Gives every unplaced DRAM location a provisional address of its own,
/// above the target's DRAM, and returns where that region starts.
///
/// The DMA peepholes reason on placed DRAM sides (overlap of the bytes a
/// load reads with the bytes a save writes), but at most optlevels they run
/// before `coloring_allocator_dram`, and external inputs and outputs are
/// never placed by tusk at all: without addresses every DMA was skipped.
/// Before DRAM allocation distinct tensors are distinct memory, which is
/// exactly what disjoint provisional addresses say, so a rewrite proved safe
/// on them stays safe once the DRAM colorer shares addresses between
/// tensors whose lifetimes do not overlap (it only does so for those).
fn place_dram_provisionally(m: &mut Module) -> u64 {
    let base = m.target.dram_bytes.max(1).next_power_of_two();
    let mut at = base;
    for v in m.mems().space.keys() {
        if m.mems().space[v] != Space::Dram || m.is_placed(v) {
            continue;
        }
        let align = (m.mems().align[v] as u64).max(m.target.dram_min_align as u64);
        at = crate::align::align_saturating(at, align);
        m.place(v, 0, at);
        at += m.mem_footprint(v);
    }
    base
}

/// Forgets the provisional DRAM addresses of [`place_dram_provisionally`]
/// (every DRAM placement at or above `base`).
fn unplace_provisional_dram(m: &mut Module, base: u64) {
    for v in m.mems().space.keys() {
        if m.mems().space[v] == Space::Dram && m.is_placed(v) && m.mems().offset[v] >= base {
            m.unplace(v);
        }
    }
}

/// The lower bounds `b` (of the result) into the report.
pub(super) fn result_bounds(b: &Bounds, report: &mut RunReport) {
    for s in Space::ALL {
        report.spaces[s.slot()].lower_bound = b.space(s).lower_bound();
    }
}

/// Peaks and placed counts per space from the placements.
fn summarize(m: &Module, report: &mut RunReport) {
    let t = &m.target;
    report.spaces[Space::Sb.slot()].capacity = t.sb_usable_bytes as u64;
    report.spaces[Space::Psum.slot()].capacity = t.psum_usable_bytes() as u64;
    report.spaces[Space::Dram.slot()].capacity = t.dram_bytes;
    for v in m.mems().space.keys() {
        if !m.is_placed(v) {
            continue;
        }
        let s = m.mems().space[v];
        let mut top = m.mems().offset[v] + m.mem_footprint(v);
        if s == Space::Psum {
            // A PSUM tensor owns whole banks (the bound counts them so too).
            top = t.psum_footprint(top);
        }
        let sum = &mut report.spaces[s.slot()];
        sum.placed += 1;
        sum.peak = sum.peak.max(top);
    }
}

/// Unplaces the locations of `space` that the DMA rewrites left without any
/// access (a wide tensor replaced by its shrunk copy, the halves of a
/// merge): they are dead, and a placement would only make reports and the
/// printed module claim space nobody uses. Pinned and I/O locations stay, and
/// at optlevel 7 nothing is released: the placements are the user's fixed
/// assignment.
/// `live` must describe `m` (the pipeline's fresh analyses).
fn release_abandoned(m: &mut Module, live: &MemLiveness, space: Space) {
    for v in m.mems().space.keys() {
        let keep = m.mems().space[v] != space
            || !m.is_placed(v)
            || m.mems().flags[v].intersects(MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT)
            || live.interval(v).is_some();
        if !keep {
            m.unplace(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blamed_names_the_errors_entities_in_message_order() {
        let (i, t) = (Inst::new(4), MemLoc::new(2));
        let floor = SpaceFloor {
            bytes: 10,
            inst: i,
            operand: t,
            ..SpaceFloor::default()
        };
        let e = PipelineError::BelowFloor {
            space: Space::Sb,
            capacity: 8,
            floor,
        };
        assert_eq!(e.blamed().as_slice(), [Entity::Inst(i), Entity::Mem(t)]);
        let e = PipelineError::UnplacedPsum { first: t, count: 1 };
        assert_eq!(e.blamed().as_slice(), [Entity::Mem(t)]);
        // Invalid ids (an error that names no instruction) are left out.
        let e = PipelineError::Coloring(ColoringError::DoesNotFit {
            space: Space::Sb,
            peak: 9,
            lower_bound: 9,
            capacity: 8,
            at: 0,
            live: 1,
            tensor: t,
            spill_rounds: 0,
            inst: Inst::INVALID,
            stop: crate::mem::tensor_coloring::SpillStop::NothingToSplit,
        });
        assert_eq!(e.blamed().as_slice(), [Entity::Mem(t)]);
        let f = Finding::Misaligned {
            mem: t,
            offset: 3,
            align: 4,
        };
        let e = PipelineError::IllegalInputPlacement { total: 1, first: f };
        assert_eq!(e.blamed().as_slice(), [Entity::Mem(t)]);
        assert!(PipelineError::PassTableFull { limit: 1 }
            .blamed()
            .is_empty());
    }
}
