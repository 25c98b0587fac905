//! What a caller of the exact search passes and gets back: the options
//! (objective, strategy, budget), the clock a time budget is read from, and
//! the outcome, whose [`Status`] says what is known about the placement and
//! whose [`Limit`] says what stopped the search early.
//!
//! # Budget
//! A node count and/or a time limit read from a caller-supplied [`Clock`]
//! (no_std has none). The answer's [`Status`] says what is known: it fits
//! ([`Status::fits`]) exactly when the placement returned is within the
//! capacity.

use core::fmt;

use super::Preorder;

/// A monotonic clock supplied by the caller.
pub trait Clock {
    /// Microseconds since an arbitrary, fixed origin.
    fn now_micros(&mut self) -> u64;
}

/// A clock that never advances: time budgets never run out with it.
#[derive(Copy, Clone, Debug, Default)]
pub struct NoClock;

impl Clock for NoClock {
    fn now_micros(&mut self) -> u64 {
        0
    }
}

/// How much search the caller allows.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Budget {
    /// Most search nodes to visit.
    pub nodes: Option<u64>,
    /// Most microseconds to spend, measured with the caller's [`Clock`].
    pub micros: Option<u64>,
}

impl Budget {
    /// One `parts`-th of this budget (at least 1 node or microsecond of
    /// whatever it limits).
    pub fn share(self, parts: u64) -> Budget {
        let parts = parts.max(1);
        Budget {
            nodes: self.nodes.map(|k| (k / parts).max(1)),
            micros: self.micros.map(|us| (us / parts).max(1)),
        }
    }
}

/// What the search aims for.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Objective {
    /// Stop at the first placement within the capacity.
    #[default]
    Fit,
    /// Search for the lowest peak (proving it optimal when the budget allows).
    MinimizePeak,
}

/// Which search runs. Each one alone is complete (sound and, given the
/// budget, exhaustive); they differ in what they find fast.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Strategy {
    /// The canonical search with each of [`PREORDERS`](super::PREORDERS)
    /// in turn, then the skyline search, in node slices that double every
    /// round (each member alone is complete).
    #[default]
    Portfolio,
    /// The canonical search with one preorder, no restarts
    /// (`canonical` strategy: offset order, dominance, section
    /// inference, decomposition).
    Canonical(Preorder),
    /// Lowest live (stripe, section) cell first: place a covering buffer at
    /// its floor or raise the floor (the `skyline` module says why this is
    /// complete), with
    /// Luby restarts under seeded branch-order noise.
    Skyline,
}

/// Options of one search.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ExactOptions {
    /// The budget.
    pub budget: Budget,
    /// The objective.
    pub objective: Objective,
    /// The search strategy.
    pub strategy: Strategy,
}

/// What is known about the answer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Status {
    /// A legal placement within the capacity whose peak is proven minimal.
    Optimal,
    /// A legal placement within the capacity, not proven optimal.
    Feasible,
    /// Proven: no legal placement fits in the capacity. The placement
    /// returned is the best found, above the capacity.
    Infeasible,
    /// The budget ran out before any placement within the capacity was
    /// found; the placement returned is the best found, above the capacity.
    BudgetExhausted,
}

impl Status {
    /// True when the placement returned fits in the capacity.
    pub const fn fits(self) -> bool {
        matches!(self, Status::Optimal | Status::Feasible)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Optimal => "legal, proven optimal",
            Status::Feasible => "legal, not proven optimal",
            Status::Infeasible => "proven infeasible at this capacity",
            Status::BudgetExhausted => "budget exhausted; the best found does not fit",
        })
    }
}

/// Which limit stopped the search early.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Limit {
    /// The node budget.
    Nodes,
    /// The time budget.
    Time,
    /// The reserved undo trail or branch stack.
    Storage,
    /// The problem has more buffers than [`MAX_SEARCH_BUFFERS`](super::MAX_SEARCH_BUFFERS): the search
    /// did not start (its storage grows faster than linearly with the
    /// buffers), the answer is the greedy one.
    Size,
    /// The run's storage budget had no room for the search's cell grid
    /// ([`ExactWorkspace::reserve_within`](super::ExactWorkspace::reserve_within)): the search did not start.
    Budget,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Nodes => "node budget",
            Limit::Time => "time budget",
            Limit::Storage => "reserved search storage",
            Limit::Size => "problem size (more buffers than the search takes)",
            Limit::Budget => "storage budget (the search's cell grid does not fit it)",
        })
    }
}

/// The answer of [`ExactWorkspace::solve`](super::ExactWorkspace::solve).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What is known.
    pub status: Status,
    /// Peak of the placement written to the caller's slice.
    pub peak: u64,
    /// The lower bound of the problem.
    pub lower_bound: u64,
    /// Peak of the better greedy rule (the first solution).
    pub greedy_peak: u64,
    /// Search nodes visited.
    pub nodes: u64,
    /// Nodes and microseconds at the first placement within the capacity
    /// found by the search (`None` when greedy fitted or none was found).
    pub first_fit: Option<(u64, u64)>,
    /// The limit that stopped the search, if one did.
    pub stopped_by: Option<Limit>,
}
