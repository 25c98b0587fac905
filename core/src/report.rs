//! What a [`run()`](crate::run()) reports, and the parts of its errors: the
//! types a [`RunReport`](crate::RunReport) and a
//! [`PipelineError`](crate::PipelineError) are made of, for an embedder that
//! prints or stores them, and [`Named`]: any of them printed with the names
//! of the module it speaks of. docs/REPORT.md documents every field.

use core::fmt;

use crate::ir::Module;

pub use crate::analysis::{CostlyDep, Floor, FloorKind, ScheduleReport, SpaceFloor};
pub use crate::dma::{descriptor_lower_bound, dma_analysis, DmaError, DmaReport, DmaStats, Vetoes};
pub use crate::mem::lsa::{AllocationFailure, LsaError, LsaErrorDisplay, LsaReport, SpaceReport};
pub use crate::mem::rotation::RotationReport;
pub use crate::mem::spill::{FailureEntry, SpillLog, SpillLogDisplay, SpillRecord};
pub use crate::mem::tensor_coloring::{
    pass_name, ColoringError, ColoringErrorDisplay, ColoringReport,
};
pub use crate::pipeline::passes::MAX_PASSES;
pub use crate::pipeline::run::{PassRecord, PipelineErrorDisplay, SpaceSummary};
pub use crate::reg::RegReport;
pub use crate::storage::{Skipped, StoragePart};

/// A value about a module that prints in the module's own names (tensors,
/// instructions, registers as the user wrote them, never internal ids).
pub trait DisplayNamed {
    /// Writes the value, naming what it refers to from `m`.
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// `value` printed with the names of `m` ([`DisplayNamed`]): what each
/// error's and report's `display(m)` returns.
#[derive(Debug)]
pub struct Named<'m, T: ?Sized> {
    value: &'m T,
    m: &'m Module,
}

impl<'m, T: ?Sized> Named<'m, T> {
    /// `value`, to be printed with the names of `m`.
    pub fn new(value: &'m T, m: &'m Module) -> Self {
        Named { value, m }
    }
}

impl<T: DisplayNamed + ?Sized> fmt::Display for Named<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt_named(self.m, f)
    }
}

/// Gives `$ty` its `display(m)` (documented `$doc`): `$ty` printed with the
/// names of `m` through its [`DisplayNamed`], under the public name
/// `$alias`.
macro_rules! display_named {
    ($alias:ident for $ty:ty, $doc:literal) => {
        impl $ty {
            #[doc = $doc]
            pub fn display<'m>(&'m self, m: &'m $crate::ir::Module) -> $alias<'m> {
                $crate::report::Named::new(self, m)
            }
        }

        #[doc = concat!("See [`", stringify!($ty), "::display`].")]
        pub type $alias<'m> = $crate::report::Named<'m, $ty>;
    };
}
pub(crate) use display_named;
