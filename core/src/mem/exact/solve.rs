//! Running a strategy under the caller's budget: the better greedy rule
//! gives the first solution, then attempts of the search follow until one
//! completes or the budget runs out, and the answer's [`Status`] says what
//! is known.
//!
//! # Attempts
//! When the lower bound is below the capacity, attempts alternate between
//! the capacity and the bound (a placement at the bound prunes far better
//! and fits the capacity too). The skyline search restarts with seeded
//! branch-order noise after `RESTART_NODES` times the Luby sequence; the
//! portfolio gives each of its members the node slice of its round,
//! doubling every round. Either way the shares grow without bound, so some
//! attempt is complete and the search stays exhaustive given the budget.
//! Every node of either search is counted by
//! [`ExactWorkspace::count_node`], the one place the budget is checked.

use super::sizing::Grid;
use super::{
    Clock, ExactOptions, ExactWorkspace, Limit, Objective, Outcome, Status, Strategy,
    MAX_SEARCH_BUFFERS, PREORDERS,
};
use crate::mem::greedy::GreedyRule;
use crate::mem::problem::{peak, Placement, Problem};
/// splitmix64 as a one-shot hash: the branch-order noise of an attempt.
use crate::rng::mix64 as mix;
use crate::storage::refill;

/// Why a search stopped.
pub(super) enum Stop {
    Done,
    Limit(Limit),
    /// The attempt's node share ran out: restart with another order.
    Restart,
}

/// Nodes of the first skyline attempt; attempt r gets this times luby(r).
const RESTART_NODES: u64 = 2000;

/// Node slice of the first round of the canonical portfolio on `n`
/// buffers: a few times the buffers (a search that never backtracks visits
/// about one node per buffer).
fn canonical_slice(n: usize) -> u64 {
    (CANONICAL_SLICE_PER_BUFFER * n as u64).max(64)
}

/// See [`canonical_slice`].
const CANONICAL_SLICE_PER_BUFFER: u64 = 2;

/// The Luby sequence 1 1 2 1 1 2 4 1 1 2 1 1 2 4 8 … (1-based).
fn luby(i: u64) -> u64 {
    let mut i = i.max(1);
    loop {
        let mut k = 1u32;
        while (1u64 << k) - 1 < i {
            k += 1;
        }
        if i == (1u64 << k) - 1 {
            return 1u64 << (k - 1);
        }
        i -= (1u64 << (k - 1)) - 1;
    }
}

impl ExactWorkspace {
    /// Solves `problem` at its capacity and writes the best placement found
    /// into `out` (one entry per buffer). Allocates nothing when
    /// [`reserve_for`](Self::reserve_for) saw this problem or a larger one.
    pub fn solve(
        &mut self,
        problem: &Problem,
        options: &ExactOptions,
        clock: &mut dyn Clock,
        out: &mut [Placement],
    ) -> Outcome {
        let t0 = clock.now_micros();
        let n = problem.len();
        let lb = problem.lower_bound(&mut self.timeline).bytes;
        let cap = problem.capacity;
        // The first solution: the better greedy rule.
        refill(&mut self.incumbent, n, Placement::default());
        refill(&mut self.current, n, Placement::default());
        let by_size = self
            .greedy
            .place(problem, GreedyRule::BySize, &mut self.incumbent);
        let best_fit = self
            .greedy
            .place(problem, GreedyRule::StartBestFit, &mut self.current);
        let greedy_peak = by_size.min(best_fit);
        if best_fit < by_size {
            self.incumbent.copy_from_slice(&self.current);
        }
        let mut outcome = Outcome {
            status: Status::Feasible,
            peak: greedy_peak,
            lower_bound: lb,
            greedy_peak,
            nodes: 0,
            first_fit: None,
            stopped_by: None,
        };
        let finish = |ws: &Self, out: &mut [Placement], mut o: Outcome| {
            out.copy_from_slice(&ws.incumbent);
            o.peak = peak(problem, out);
            o
        };
        if lb > cap || !self.pins_consistent(problem, cap) {
            outcome.status = Status::Infeasible;
            return finish(self, out, outcome);
        }
        if greedy_peak <= cap && (greedy_peak == lb || options.objective == Objective::Fit) {
            outcome.status = if greedy_peak == lb {
                Status::Optimal
            } else {
                Status::Feasible
            };
            return finish(self, out, outcome);
        }
        // The grid is counted on the timeline the lower bound built.
        let refused = if n > MAX_SEARCH_BUFFERS {
            Some(Limit::Size)
        } else if !self.reserved_for(&Grid::of(problem, &self.timeline)) {
            Some(Limit::Budget)
        } else {
            None
        };
        if let Some(limit) = refused {
            outcome.stopped_by = Some(limit);
            if greedy_peak > cap {
                outcome.status = Status::BudgetExhausted;
            }
            return finish(self, out, outcome);
        }
        let k = if greedy_peak <= cap {
            greedy_peak - 1
        } else {
            cap
        };
        // When the lower bound is below the capacity, attempts alternate
        // between the capacity and the lower bound itself: a placement at
        // the bound fits the capacity too, and the tight problem prunes far
        // better. An attempt at the bound that completes without a
        // placement proves the bound unreachable, and only the capacity is
        // searched from then on.
        let mut found = false;
        let mut tight = (lb < k).then_some(lb);
        // Attempts made, by [at the bound].
        let mut runs = [0u64; 2];
        let stop = loop {
            let k = if found { outcome.peak - 1 } else { k };
            if found && k < lb {
                break Stop::Done;
            }
            let at_bound = !found && tight.is_some() && runs[1] <= runs[0];
            let attempt = runs[at_bound as usize];
            runs[at_bound as usize] += 1;
            let coarse = options.strategy != Strategy::Skyline;
            self.setup(problem, if at_bound { lb } else { k }, coarse);
            let (stop, f) = match options.strategy {
                Strategy::Skyline => {
                    // Attempt r may visit `RESTART_NODES * luby(r)` nodes
                    // with its own branch order (attempt 0 the plain
                    // heuristic, later ones with seeded noise). A thrashing
                    // order is left early; the Luby sequence grows without
                    // bound, so some attempt is always complete.
                    self.noise = if attempt == 0 { 0 } else { mix(attempt) };
                    self.attempt_end = outcome
                        .nodes
                        .saturating_add(RESTART_NODES.saturating_mul(luby(attempt + 1)));
                    self.search(problem, options, clock, t0, lb, cap, &mut outcome)
                }
                Strategy::Canonical(pre) => {
                    // One order, never restarted (complete by itself); at
                    // the bound only as long as attempts at the capacity
                    // keep pace, so both share the nodes.
                    self.attempt_end = if tight.is_some() {
                        outcome
                            .nodes
                            .saturating_add(canonical_slice(n).saturating_mul(1 << attempt.min(40)))
                    } else {
                        u64::MAX
                    };
                    self.search_canonical(problem, pre, options, clock, t0, cap, &mut outcome)
                }
                Strategy::Portfolio => {
                    // Every preorder of the canonical search in turn, then
                    // the skyline search (which finds what the canonical
                    // one misses on guillotine-cut packings, and the other
                    // way round), each with the node slice of its round,
                    // doubling every round, so some attempt is always
                    // complete.
                    let len = PREORDERS.len() as u64 + 1;
                    let (round, member) = (attempt / len, (attempt % len) as usize);
                    self.attempt_end = outcome
                        .nodes
                        .saturating_add(canonical_slice(n).saturating_mul(1 << round.min(40)));
                    if member < PREORDERS.len() {
                        let pre = PREORDERS[member];
                        self.search_canonical(problem, pre, options, clock, t0, cap, &mut outcome)
                    } else {
                        if coarse {
                            self.setup(problem, if at_bound { lb } else { k }, false);
                        }
                        self.noise = if round == 0 { 0 } else { mix(round) };
                        // The skyline's undo trail can fill on deep paths of
                        // raises; the other members go on then (they are
                        // complete without it).
                        match self.search(problem, options, clock, t0, lb, cap, &mut outcome) {
                            (Stop::Limit(Limit::Storage), f) => (Stop::Restart, f),
                            other => other,
                        }
                    }
                }
            };
            found |= f;
            match stop {
                Stop::Restart => {}
                Stop::Done if at_bound && !f => tight = None,
                // The canonical search stops at its first placement;
                // minimizing goes on below its peak.
                Stop::Done
                    if f && options.objective == Objective::MinimizePeak
                        && options.strategy != Strategy::Skyline => {}
                other => break other,
            }
        };
        let best = if found {
            outcome.peak.min(greedy_peak)
        } else {
            greedy_peak
        };
        outcome.status = match stop {
            Stop::Done => {
                if best <= cap {
                    if options.objective == Objective::MinimizePeak || best == lb {
                        Status::Optimal
                    } else {
                        Status::Feasible
                    }
                } else {
                    Status::Infeasible
                }
            }
            Stop::Limit(l) => {
                outcome.stopped_by = Some(l);
                if best <= cap {
                    Status::Feasible
                } else {
                    Status::BudgetExhausted
                }
            }
            Stop::Restart => {
                // Not returned out of the restart loop; kept total.
                outcome.stopped_by = Some(Limit::Nodes);
                if best <= cap {
                    Status::Feasible
                } else {
                    Status::BudgetExhausted
                }
            }
        };
        finish(self, out, outcome)
    }

    /// Counts one node of the current attempt (either strategy); returns
    /// why to stop when that spends the attempt's share (a restart) or the
    /// caller's node or time budget. The clock is read every 256 nodes: a
    /// node costs far less than a clock read on some devices.
    pub(super) fn count_node(
        &self,
        options: &ExactOptions,
        clock: &mut dyn Clock,
        t0: u64,
        outcome: &mut Outcome,
    ) -> Option<Stop> {
        outcome.nodes += 1;
        if outcome.nodes > self.attempt_end {
            return Some(Stop::Restart);
        }
        if options.budget.nodes.is_some_and(|max| outcome.nodes > max) {
            return Some(Stop::Limit(Limit::Nodes));
        }
        if let Some(max) = options.budget.micros {
            if outcome.nodes & 255 == 0 && clock.now_micros().saturating_sub(t0) > max {
                return Some(Stop::Limit(Limit::Time));
            }
        }
        None
    }

    /// Records the current complete placement; returns its peak.
    pub(super) fn record(
        &mut self,
        problem: &Problem,
        clock: &mut dyn Clock,
        t0: u64,
        cap: u64,
        outcome: &mut Outcome,
        found: &mut bool,
    ) -> u64 {
        let p = peak(problem, &self.current);
        if !*found || p < outcome.peak {
            self.incumbent.copy_from_slice(&self.current);
            outcome.peak = p;
        }
        if !*found && p <= cap {
            outcome.first_fit = Some((outcome.nodes, clock.now_micros().saturating_sub(t0)));
        }
        *found = true;
        p
    }
}
