//! Reserving the buffer-problem solvers within a storage budget (see
//! [`StorageBudget`](crate::options::StorageBudget)), for the coloring passes and `tusk dsa` alike.
//!
//! Each solver has a linear part it always reserves (per-buffer tables:
//! sort lists, the greedy fallback, the incumbent placement) and a part
//! that grows faster than the problem (the colorer's interference graph,
//! the search's cell grid and stacks), which gets at most what the budget
//! leaves. The linear parts come first (a reservation with no allowance
//! reserves only them) and are counted before any superlinear share is
//! taken, so that the whole stays within the budget whenever the linear
//! part does; a caller with several problems reserves every linear part
//! before the first superlinear one.

use super::exact::ExactWorkspace;
use super::interval_coloring::GcaWorkspace;
use super::problem::Problem;
use crate::storage::{Skipped, StorageReport};

/// Reserves the colorer's per-buffer tables for `problem` and `headroom`
/// more buffers; returns the heap bytes added.
pub fn graph_tables(ws: &mut GcaWorkspace, problem: &Problem, headroom: usize) -> u64 {
    let before = ws.heap_bytes();
    ws.reserve_within(problem, headroom, 0, 0);
    ws.heap_bytes().saturating_sub(before)
}

/// Reserves the interference graph of `problem` (and `headroom` buffers
/// with `headroom_edges` edges) when it fits what `storage` allows, and
/// records `method` as skipped when it does not; returns the heap bytes
/// added (the tables too, when [`graph_tables`] did not reserve them).
/// A problem whose graph exceeds what the workspace reserved (for it or a
/// larger problem) is solved by the greedy-by-size rule.
pub fn graph(
    ws: &mut GcaWorkspace,
    problem: &Problem,
    headroom: usize,
    headroom_edges: u64,
    storage: &mut StorageReport,
    method: &'static str,
) -> u64 {
    let before = ws.heap_bytes();
    let available = storage.allowance();
    let g = ws.reserve_within(problem, headroom, headroom_edges, available);
    if g.refused {
        storage.skip(Skipped {
            method,
            instead: "the greedy-by-size placement (linear storage)",
            needed: g.needed,
            available,
            cut_short: false,
        });
    }
    ws.heap_bytes().saturating_sub(before)
}

/// Reserves the exact search's per-buffer tables for `problem`; returns the
/// heap bytes added.
pub fn search_tables(ws: &mut ExactWorkspace, problem: &Problem) -> u64 {
    let before = ws.heap_bytes();
    ws.reserve_within(problem, 0);
    ws.heap_bytes().saturating_sub(before)
}

/// Reserves the exact search for `problem` within a `1 / shares` share of
/// what `storage` allows (`shares`: the searches still to reserve, this
/// one included): refused (recorded with `instead`, what runs in its place)
/// when its grid does not fit, cut short (its stacks stop it early) when
/// its stacks do not; returns the heap bytes added.
pub fn search(
    ws: &mut ExactWorkspace,
    problem: &Problem,
    storage: &mut StorageReport,
    shares: u64,
    method: &'static str,
    instead: &'static str,
) -> u64 {
    let before = ws.heap_bytes();
    let available = storage.allowance() / shares.max(1);
    let r = ws.reserve_within(problem, available);
    if r.refused {
        storage.skip(Skipped {
            method,
            instead,
            needed: r.needed.total(),
            available,
            cut_short: false,
        });
    } else if r.granted < r.needed.total() {
        storage.skip(Skipped {
            method,
            instead: "a search that stops early when its stacks fill",
            needed: r.needed.total(),
            available,
            cut_short: true,
        });
    }
    ws.heap_bytes().saturating_sub(before)
}
