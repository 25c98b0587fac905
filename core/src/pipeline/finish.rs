//! The steps that end a run once its passes are done: the schedule model,
//! the placement verifier (with the result's lower bounds, from the
//! analyses it computes) and the dataflow checker.
//!
//! Each step reads only the final module (and, for the dataflow checker,
//! the input: the copy [`Checks::Full`] carries, or under
//! [`Checks::Deferred`] the module given to [`EndSteps::give_input`]) and
//! writes only storage of its own
//! in the [`Workspace`], so the steps do not depend on each other and an
//! embedder with threads may run them at the same time
//! ([`EndSteps::parts`]); the core runs them one after the other
//! ([`EndSteps::run_in_order`], what [`super::run`] does). Either way
//! [`EndSteps::finish`] combines their outcomes into the same result, in
//! the order of precedence the sequential run has: a placement finding
//! first (the dataflow check's outcome is then not looked at), then the
//! dataflow check's error or mismatches, explained by the input's own
//! register conflicts when it has any.
//!
//! The one front door stays [`super::run`]: the steps are the same calls,
//! split so that the std shim can put them on two cores; the core itself
//! has no threads.

use super::run::{result_bounds, PipelineError, RunReport, Workspace};
use super::Checks;
use crate::analysis::{Bounds, LinearOrder, MemLiveness, Schedule, ScheduleOptions};
use crate::ir::Module;
use crate::mem::exact::Clock;
use crate::mem::tensor_coloring::ColoringWorkspace;
use crate::verify::dataflow::{
    DataflowCapacity, DataflowChecker, DataflowCoverage, DataflowError, Mismatch, SplitRunner,
};
use crate::verify::placement::{Finding, Scope, Verifier};

/// A run whose passes are done and whose end steps are not: what
/// [`super::run_passes`] and [`super::Reserved::run_passes`] return, to be handed to
/// [`Workspace::end_steps`].
#[derive(Debug)]
#[must_use = "the run ends only with `Workspace::end_steps(..).finish(..)`"]
pub struct Passed<'a> {
    pub(super) report: RunReport,
    pub(super) schedule: bool,
    pub(super) checks: Checks<'a>,
}

/// The schedule model on the result (a no-op unless the options ask for it).
#[derive(Debug)]
pub struct ScheduleStep<'w> {
    schedule: Option<&'w mut Schedule>,
    ran: bool,
    out: Option<crate::analysis::ScheduleReport>,
}

impl ScheduleStep<'_> {
    /// Runs the model on the final module `m` (once: a step that ran
    /// already does not run again).
    pub fn run(&mut self, m: &Module) {
        if self.ran {
            return;
        }
        if let Some(s) = self.schedule.as_deref_mut() {
            self.out = Some(s.run(m, &ScheduleOptions::default()));
        }
        self.ran = true;
    }
}

/// The placement verifier on the result, then the result's lower bounds
/// from the analyses it computed (a no-op under [`Checks::None`]).
#[derive(Debug)]
pub struct PlacementStep<'w> {
    verifier: &'w mut Verifier,
    bounds: &'w mut Bounds,
    on: bool,
    release: bool,
    /// Findings in all and the first, once run.
    out: Option<(u64, Option<Finding>)>,
}

impl PlacementStep<'_> {
    fn ran(&self) -> bool {
        !self.on || self.out.is_some()
    }
}

impl PlacementStep<'_> {
    /// Verifies the final module `m`; when it is clean, computes its
    /// bounds. With the workspace's release of spent storage, the
    /// verifier's storage goes once it is done. A step that ran already
    /// does not run again.
    pub fn run(&mut self, m: &Module) {
        if self.ran() {
            return;
        }
        self.verifier.set_scope(Scope::default());
        let r = self.verifier.verify(m);
        let (total, first) = (r.total(), r.findings.first().copied());
        if first.is_none() {
            let (order, live) = self.verifier.analyses();
            self.bounds.compute(m, order, live);
            if self.release {
                *self.verifier = Verifier::new();
            }
        }
        self.out = Some((total, first));
    }
}

/// What the dataflow check came to: its error, or the mismatches in all,
/// the first, and how much of the programs it walked.
type DataflowOutcome = Result<(u32, Option<Mismatch>, DataflowCoverage), DataflowError>;

/// The dataflow checker against the input copy (a no-op unless the checks
/// are [`Checks::Full`]).
#[derive(Debug)]
pub struct DataflowStep<'w, 'a> {
    checker: &'w mut DataflowChecker,
    split: Option<&'w dyn SplitRunner>,
    original: Option<&'a Module>,
    out: Option<DataflowOutcome>,
}

impl DataflowStep<'_, '_> {
    fn ran(&self) -> bool {
        self.original.is_none() || self.out.is_some()
    }
}

impl DataflowStep<'_, '_> {
    /// Checks the final module `m` against the input copy (on two threads
    /// when the workspace has a split runner); once, like the other steps.
    pub fn run(&mut self, m: &Module) {
        let Some(orig) = self.original.filter(|_| self.out.is_none()) else {
            return;
        };
        // Reserved (within the budget) by `Workspace::reserve`; the walk
        // grows what proves short, up to the storage limit (this is the
        // check, not a pass).
        let start = DataflowCapacity::default();
        let d = match self.split {
            Some(runner) => self.checker.check_split(orig, m, start, runner),
            None => self.checker.check_growing(orig, m, start),
        };
        self.out = Some(d.map(|d| {
            let n = d.mismatches.len() as u32 + d.dropped.min(u32::MAX as u64) as u32;
            (n, d.mismatches.first().copied(), d.coverage)
        }));
    }
}

/// The end steps of one run over a workspace (see the module doc).
#[derive(Debug)]
pub struct EndSteps<'w, 'a> {
    report: RunReport,
    original: Option<&'a Module>,
    /// The checks were [`Checks::Deferred`] and no input was given yet.
    awaiting_input: bool,
    t0: u64,
    /// The schedule model.
    pub schedule: ScheduleStep<'w>,
    /// The placement verifier and the result's bounds.
    pub placement: PlacementStep<'w>,
    /// The dataflow checker.
    pub dataflow: DataflowStep<'w, 'a>,
}

impl Workspace {
    /// The end steps of the run `passed` (whose passes ran on this
    /// workspace), begun now by `clock`: the checks' time counts from here.
    pub fn end_steps<'w, 'a>(
        &'w mut self,
        passed: Passed<'a>,
        clock: &mut dyn Clock,
    ) -> EndSteps<'w, 'a> {
        let Passed {
            report,
            schedule,
            checks,
        } = passed;
        let on = checks.placement();
        if on && self.release_spent {
            // Spent: the checks bring their own analyses.
            (self.coloring, self.order) = (ColoringWorkspace::default(), LinearOrder::default());
            self.dram_coloring = None;
            (self.live, self.bounds) = (MemLiveness::default(), Bounds::default());
        }
        EndSteps {
            report,
            original: checks.input(),
            awaiting_input: matches!(checks, Checks::Deferred),
            t0: clock.now_micros(),
            schedule: ScheduleStep {
                schedule: schedule.then_some(&mut self.schedule),
                ran: false,
                out: None,
            },
            placement: PlacementStep {
                verifier: &mut self.verifier,
                bounds: &mut self.bounds,
                on,
                release: self.release_spent,
                out: None,
            },
            dataflow: DataflowStep {
                checker: &mut self.dataflow,
                split: self.split.as_deref(),
                original: checks.input(),
                out: None,
            },
        }
    }
}

impl<'a> EndSteps<'_, 'a> {
    /// Gives the dataflow check the input of a run whose checks were
    /// [`Checks::Deferred`]: the module as it was given to the passes,
    /// made again by the caller (the check then holds against it exactly
    /// as against a copy taken before them). Ignored under any other
    /// checks, which either carry their input or run no dataflow check.
    pub fn give_input(&mut self, input: &'a Module) {
        if self.awaiting_input {
            self.original = Some(input);
            self.dataflow.original = Some(input);
            self.awaiting_input = false;
        }
    }

    /// Whether the placement verifier finds nothing on `m` (it runs now
    /// unless it ran already). True when the checks run no verifier.
    pub fn placement_clean(&mut self, m: &Module) -> bool {
        self.placement.run(m);
        !matches!(self.placement.out, Some((total, _)) if total > 0)
    }

    /// Runs the steps one after the other on `m` and finishes, as
    /// [`super::run`] does: the schedule model (outside the checks' time,
    /// unless it ran already), the verifier, and the dataflow check only
    /// when the verifier found nothing (its outcome would not be looked
    /// at).
    pub fn run_in_order(
        mut self,
        m: &Module,
        clock: &mut dyn Clock,
    ) -> Result<RunReport, PipelineError> {
        if !self.schedule.ran {
            self.schedule.run(m);
            self.t0 = clock.now_micros();
        }
        self.finish(m, clock)
    }

    /// The run's result from the steps' outcomes. A step not run yet runs
    /// here first, on `m` (the module the others ran on), in the order of
    /// [`Self::run_in_order`]: no check is skipped whoever runs the steps.
    pub fn finish(mut self, m: &Module, clock: &mut dyn Clock) -> Result<RunReport, PipelineError> {
        self.schedule.run(m);
        self.placement.run(m);
        let clean = !matches!(self.placement.out, Some((total, _)) if total > 0);
        if clean && !self.dataflow.ran() {
            self.dataflow.run(m);
        }
        let mut report = self.report;
        report.schedule = self.schedule.out;
        if !self.placement.on {
            return Ok(report);
        }
        let (total, first) = self.placement.out.unwrap_or((0, None));
        debug_assert!(total == 0 || first.is_some(), "the first finding is kept");
        if let Some(first) = first {
            return Err(PipelineError::Verify {
                pass: "verify",
                total,
                first,
            });
        }
        if self.awaiting_input {
            return Err(PipelineError::InputNotGiven);
        }
        result_bounds(self.placement.bounds, &mut report);
        if let Some(orig) = self.original {
            let (mismatches, first) = match self.dataflow.out {
                Some(d) => {
                    let (n, first, coverage) = d.map_err(PipelineError::DataflowCheck)?;
                    report.dataflow = Some(coverage);
                    (n, first)
                }
                None => (0, None),
            };
            if mismatches > 0 {
                // Explain a mismatch the input causes: lanes it colors that
                // conflict make its own reads see other registers' values.
                let verifier = self.placement.verifier;
                verifier.set_scope(Scope {
                    psum: false,
                    sb: false,
                    dram: false,
                    registers: true,
                    uncolored: false,
                });
                let r = verifier.verify(orig);
                if let Some(first) = r.findings.first() {
                    return Err(PipelineError::InputRegisterConflict {
                        total: r.total(),
                        first: alloc::format!("{}", first.display(orig)),
                        finding: *first,
                    });
                }
                return Err(PipelineError::Dataflow { mismatches, first });
            }
        }
        report.checks_micros = Some(clock.now_micros().saturating_sub(self.t0));
        Ok(report)
    }
}
