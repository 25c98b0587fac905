//! The pipeline: options and the selection map ([`options`]), the pass list
//! each selection runs ([`mod@passes`]), the runner with its reusable
//! workspace and report ([`mod@run`]), and the steps that end a run
//! ([`mod@finish`]).

pub(crate) mod finish;
pub(crate) mod options;
pub(crate) mod passes;
#[allow(clippy::indexing_slicing)] // per-space report arrays by Space::slot (see the crate docs)
pub(crate) mod run;

pub use finish::{DataflowStep, EndSteps, Passed, PlacementStep, ScheduleStep};
pub use options::{
    Allocator, DmaAffinity, Options, OptionsError, Rotation, Selection, SpillStrategy, OPTLEVELS,
};
pub use passes::{passes, Pass};
pub use run::{
    run, run_passes, Checks, FailureSite, PipelineError, Reserved, RunReport, Workspace,
};
