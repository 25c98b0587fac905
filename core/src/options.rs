//! What [`Options`](crate::Options) is made of: the selection map (the
//! optimization levels, the pipeline each selects and its passes), the
//! allocator families, the placement switches, the storage budget, and
//! what [`Options::normalize`](crate::Options::normalize) refuses.

pub use crate::pipeline::{
    passes, Allocator, DmaAffinity, OptionsError, Pass, Rotation, Selection, SpillStrategy,
    OPTLEVELS,
};
pub use crate::storage::StorageBudget;
