//! What a [`run()`](crate::run()) reports, and the parts of its errors: the
//! types a [`RunReport`](crate::RunReport) and a
//! [`PipelineError`](crate::PipelineError) are made of, for an embedder that
//! prints or stores them, and [`InModule`]: any of them printed with the
//! names of the module it speaks of. docs/REPORT.md documents every field.

pub use crate::analysis::{CostlyDep, Floor, FloorKind, ScheduleReport, SpaceFloor};
pub use crate::dma::affinity::coalescing_bound;
pub use crate::dma::{descriptor_lower_bound, dma_analysis, DmaError, DmaReport, DmaStats, Vetoes};
pub use crate::ir::{DisplayNamed, InModule};
pub use crate::mem::affinity::AffinityReport;
pub use crate::mem::lsa::{
    AllocationFailure, LsaError, LsaErrorDisplay, LsaReport, RestartSplits, Restarts, SpaceReport,
};
pub use crate::mem::rotation::RotationReport;
pub use crate::mem::sb_rotation::{SbProbe, SbRotationReport};
pub use crate::mem::spill::{FailureEntry, SpillLog, SpillLogDisplay, SpillRecord};
pub use crate::mem::tensor_coloring::{
    pass_name, ColoringError, ColoringErrorDisplay, ColoringReport, SpillStop,
};
pub use crate::pipeline::passes::MAX_PASSES;
pub use crate::pipeline::run::{PassRecord, PipelineErrorDisplay, SbPortfolio, SpaceSummary};
pub use crate::pipeline::FailureSite;
pub use crate::reg::RegReport;
pub use crate::storage::{Skipped, StoragePart, StorageReport};
