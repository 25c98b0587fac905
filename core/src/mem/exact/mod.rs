//! The exact placement search: complete searches over canonical placements.
//!
//! Two strategies share one model (`model`: sections, stripes, options and
//! live lists). The default, [`Strategy::Portfolio`], is the canonical
//! search (`canonical`: buffers in offset order, dominance, cross-section
//! inference, decomposition where no buffer crosses the timeline) with each
//! of [`PREORDERS`] in turn, then the skyline search (`skyline`, also
//! [`Strategy::Skyline`] alone: the lowest live cell first, placed at its
//! floor or raised), in node slices that double every round.
//!
//! The first solution comes from the better of the two greedy rules
//! ([`super::greedy`]); the search starts when that one does not suffice.
//!
//! # Files
//! [`ExactWorkspace`], defined here, holds the state of every file below;
//! its fields are private to this folder.
//! - `api`: what a caller passes (options, budget, clock) and gets back
//!   (outcome, status, limit);
//! - `sizing`: what the search's storage is for a problem, reserved once;
//! - `model`: the sections, stripes and options both searches work on;
//! - `skyline` and `canonical`: the two searches (`canonical::order`: the
//!   canonical search's preorders);
//! - `solve`: the greedy first solution, then the attempts of a strategy
//!   under the budget, with restarts, and what the answer's status is;
//! - `raise`: searches at raised capacities, bisecting toward the least
//!   peak the search finds when the capacity is out of reach.

mod api;
mod canonical;
mod model;
mod raise;
mod sizing;
mod skyline;
mod solve;

#[cfg(test)]
mod tests;

pub use api::{Budget, Clock, ExactOptions, Limit, NoClock, Objective, Outcome, Status, Strategy};
pub use canonical::{Preorder, PREORDERS};
pub use raise::Raised;
pub use sizing::{SearchReservation, SearchSizes, SearchStorage, MAX_SEARCH_BUFFERS};

use alloc::vec::Vec;

use crate::mem::greedy::GreedyWorkspace;
use crate::mem::problem::{Placement, Timeline};
use skyline::{Cand, Frame};

/// No index: the empty end of a link between buffers or options.
const NONE: u32 = u32::MAX;
/// No level: above every offset (a dead cell's floor in the min-tree, an
/// option not forbidden anywhere, a frame with no raise).
const NO_LEVEL: u64 = u64::MAX;

/// One way to place a buffer: its base partition and the stripes it covers.
#[derive(Copy, Clone, Debug)]
struct Opt {
    buffer: u32,
    base: u16,
    st_lo: u16,
    st_hi: u16,
}

/// Reusable storage of the exact search. Reserve once, solve many times.
#[derive(Debug, Default)]
pub struct ExactWorkspace {
    greedy: GreedyWorkspace,
    timeline: Timeline,
    incumbent: Vec<Placement>,
    current: Vec<Placement>,
    // Per buffer.
    sec_lo: Vec<u32>,
    sec_hi: Vec<u32>,
    area: Vec<u64>,
    opt_at: Vec<u32>,
    placed: Vec<bool>,
    twin_prev: Vec<u32>,
    /// Least size of another buffer live at a common instant (`NO_LEVEL`
    /// when none): a buffer resting on another rests at least this high.
    min_neighbour: Vec<u64>,
    order: Vec<u32>,
    pins: Vec<u32>,
    // Per option.
    opts: Vec<Opt>,
    forbid: Vec<u64>,
    // Options live in each section, and starting in each section (CSR).
    live_at: Vec<u32>,
    live: Vec<u32>,
    start_at: Vec<u32>,
    starting: Vec<u32>,
    /// Scratch of the valley look-ahead: `fin[s]` is true when sections
    /// `[s, run end)` of the chosen row can still be tiled at the level.
    fin: Vec<bool>,
    // Stripes.
    cuts: Vec<u16>,
    width: Vec<u64>,
    // Per section.
    floor_area: Vec<u64>,
    remaining: Vec<u64>,
    // Per cell.
    floor: Vec<u64>,
    count: Vec<u32>,
    /// Min-tree over the cells: the floor of a live cell, `NO_LEVEL` for a
    /// dead one; leaves at `tsize + cell`.
    tree: Vec<u64>,
    tsize: usize,
    // Search stacks.
    trail: Vec<(u32, u64)>,
    forbid_trail: Vec<(u32, u64)>,
    frames: Vec<Frame>,
    cands: Vec<Cand>,
    nsec: usize,
    nst: usize,
    capacity_area: u64,
    k: u64,
    unplaced: usize,
    /// Seed of the branch-order noise of this attempt (0: none).
    noise: u64,
    /// Node count at which this attempt restarts.
    attempt_end: u64,
    /// The canonical strategy's own tables.
    canon: canonical::Canon,
    /// Distinct end times (the coarse sections of the canonical search).
    ends: Vec<u64>,
}
