//! Searches at raised capacities: when the capacity cannot be reached (or
//! was not, within a budget), the least peak the search finds above it.
//!
//! # Why bisection
//! A search that cannot fit the bound often fits a few percent above it in
//! a few thousand nodes: the slack prunes nothing but lets almost every
//! branch succeed. Stepping down from a peak one byte at a time
//! ([`Objective::MinimizePeak`]) spends its budget on many near-equal
//! peaks; halving the range between a floor and the best peak reaches the
//! region where the search turns hard in a few steps.

use super::api::{Budget, Clock, ExactOptions, Objective};
use super::ExactWorkspace;
use crate::mem::problem::{peak, Placement, Problem};

/// What [`ExactWorkspace::raise`] did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Raised {
    /// Searches run.
    pub steps: u32,
    /// Nodes over all of them.
    pub nodes: u64,
    /// Peak of `best` before.
    pub before: u64,
    /// Peak of `best` after.
    pub peak: u64,
}

impl ExactWorkspace {
    /// Up to `steps` searches (objective: fit) at capacities bisecting
    /// `[floor, peak of best)`, each within `slice`: one that fits lowers
    /// the best peak to what it found (and `best` takes its placement), one
    /// that does not raises the floor above its capacity (proven or not).
    /// `problem`'s capacity is restored. `trial` is scratch of the
    /// problem's length.
    #[allow(clippy::too_many_arguments)]
    pub fn raise(
        &mut self,
        problem: &mut Problem,
        floor: u64,
        steps: u32,
        slice: Budget,
        clock: &mut dyn Clock,
        best: &mut [Placement],
        trial: &mut [Placement],
    ) -> Raised {
        let capacity = problem.capacity;
        let before = peak(problem, best);
        let mut r = Raised {
            before,
            peak: before,
            ..Raised::default()
        };
        let mut lo = floor;
        let options = ExactOptions {
            budget: slice,
            objective: Objective::Fit,
            ..ExactOptions::default()
        };
        while r.steps < steps && lo < r.peak {
            r.steps += 1;
            problem.capacity = lo + (r.peak - lo) / 2;
            let o = self.solve(problem, &options, clock, trial);
            r.nodes += o.nodes;
            if o.status.fits() {
                if o.peak < r.peak {
                    r.peak = o.peak;
                    best.copy_from_slice(trial);
                }
            } else {
                lo = problem.capacity + 1;
            }
        }
        problem.capacity = capacity;
        r
    }
}
