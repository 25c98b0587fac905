//! A run in steps, for an embedder that schedules them itself (the `tusk`
//! driver runs the end steps on two threads): [`run_passes`] or
//! [`Reserved::run_passes`](crate::Reserved::run_passes) give the [`Passed`] module, whose
//! [`Workspace::end_steps`](crate::Workspace::end_steps) are three steps
//! that only read it: the [`ScheduleStep`], the [`PlacementStep`] (the
//! verifier) and the [`DataflowStep`]; [`EndSteps`] puts their results
//! together as [`run()`](crate::run()) does.

pub use crate::pipeline::{
    run_passes, DataflowStep, EndSteps, Passed, PlacementStep, ScheduleStep,
};
