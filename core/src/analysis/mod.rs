//! Analyses over a module: linear program order, loop spans, liveness of
//! memory locations and registers (with the loop rule of docs/SEMANTICS.md §1), the
//! locations live at each of many positions, lower bounds per space and where
//! they run over a capacity, and the schedule model (makespan and what the
//! placement costs). Each analysis keeps its storage between runs
//! (`compute(&mut self, ..)`), so a pass that reruns it after a rewrite does
//! not allocate once the storage has grown to the module's size.

pub(crate) mod bounds;
pub(crate) mod floor;
pub(crate) mod live_sets;
pub(crate) mod liveness;
pub(crate) mod order;
pub(crate) mod schedule;

pub use bounds::{peak_over_bound, Bounds, SpaceBound};
pub use floor::{Floor, FloorKind, SpaceFloor};
pub use live_sets::LiveSets;
pub use liveness::{Interval, LiveValue, Liveness, MemLiveness, RegLiveness, NOT_LIVE};
pub use order::{LinearOrder, NO_POS};
pub use schedule::{engine_slot, CostlyDep, Schedule, ScheduleOptions, ScheduleReport};
