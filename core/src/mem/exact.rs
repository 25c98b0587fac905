//! The exact placement search: complete searches over canonical placements.
//!
//! Two strategies share the model below. The default, [`Strategy::Portfolio`],
//! is the canonical search (`canonical`: buffers in offset order, dominance,
//! cross-section inference, decomposition where no buffer crosses the
//! timeline) with each of [`PREORDERS`] in turn. The skyline search
//! ([`Strategy::Skyline`]) is the alternative described here.
//!
//! # Model
//! Time is cut into sections at every lifetime end; partitions are cut into
//! stripes at every first and last partition a buffer may take (one stripe in
//! linear mode). A *cell* is a (stripe, section) pair. The search keeps, per
//! cell, a *floor*: nothing will be placed below it there any more. A cell is
//! *live* while some unplaced buffer could still cover it.
//!
//! # Skyline branching, and why it is complete
//! Push every buffer of a legal placement down until none moves: each then
//! sits at the lowest aligned offset, at or above the floors of its cells,
//! that avoids the pins (a *canonical* placement). At each node the search
//! takes the lowest live cell c (earliest section, then lowest stripe) at
//! floor f. In any placement that respects the floors, either some buffer
//! covers byte f of c — it then sits at offset exactly f, and all of its
//! cells are at floor f — or none does, and every buffer covering c sits at
//! or above its current lowest offset computed with c's floor at f + 1. So
//! the branches are: each unplaced buffer (with each legal base partition)
//! that covers c at offset f; and "c stays empty at f": raise c's floor to
//! the least of those lowest offsets. No placement is lost.
//!
//! # Skyline pruning
//! - Section inference: per section, the floors (times the stripe widths)
//!   plus the area of the unplaced buffers live there must fit under the
//!   capacity times the partitions. A raise is waste; on tight instances
//!   every section is full, so any waste fails at once.
//! - Dominance: once the subtree "b at offset x" is exhausted, b is
//!   forbidden at x in the sibling subtrees (any placement there with b at x
//!   is one the exhausted subtree contained). Identical buffers are placed in
//!   index order only.
//! - Branch and bound: when minimizing, each placement found lowers the
//!   capacity the rest of the search must beat to its peak minus one.
//!
//! # Skyline branch order
//! Candidates whose top meets the floor just outside their lifetime (or the
//! capacity) go first, then longer lifetimes, then larger sizes: closing a
//! floor step leaves a flat skyline that later buffers can fill without
//! waste.
//!
//! The first solution comes from the better of the two greedy rules
//! ([`super::greedy`]); the search starts when that one does not suffice.
//!
//! # Budget
//! A node count and/or a time limit read from a caller-supplied [`Clock`]
//! (no_std has none). The answer's [`Status`] says what is known.
//!
//! # Storage
//! [`ExactWorkspace::reserve_for`] sizes everything from the problem (the
//! undo trail from the sum of the buffers' cells, the branch stack from the
//! most buffers live at once); running out of them ends the search with
//! [`Limit::Storage`], never a reallocation.

use alloc::vec::Vec;
use core::fmt;

mod canonical;

pub use canonical::{Preorder, PREORDERS};

use super::greedy::{GreedyRule, GreedyWorkspace};
use super::problem::{align_offset, peak, Placement, Problem, Timeline};
/// splitmix64 as a one-shot hash: the branch-order noise of an attempt.
use crate::rng::mix64 as mix;
use crate::storage::refill;

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
pub struct Budget {
    /// Most search nodes to visit.
    pub nodes: Option<u64>,
    /// Most microseconds to spend, measured with the caller's [`Clock`].
    pub micros: Option<u64>,
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
    /// The canonical search with each of [`PREORDERS`] in turn, in node
    /// slices that double every round (each preorder alone is complete).
    #[default]
    Portfolio,
    /// The canonical search with one preorder, no restarts
    /// (`canonical` strategy: offset order, dominance, section
    /// inference, decomposition).
    Canonical(Preorder),
    /// Lowest live (stripe, section) cell first: place a covering buffer at
    /// its floor or raise the floor (see the module documentation), with
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
    /// The problem has more buffers than [`MAX_SEARCH_BUFFERS`]: the search
    /// did not start (its storage grows faster than linearly with the
    /// buffers), the answer is the greedy one.
    Size,
    /// The run's storage budget had no room for the search's cell grid
    /// ([`ExactWorkspace::reserve_within`]): the search did not start.
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

/// The answer of [`ExactWorkspace::solve`].
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

const NONE: u32 = u32::MAX;
const NO_LEVEL: u64 = u64::MAX;

/// One way to place a buffer: its base partition and the stripes it covers.
#[derive(Copy, Clone, Debug)]
struct Opt {
    buffer: u32,
    base: u16,
    st_lo: u16,
    st_hi: u16,
}

#[derive(Copy, Clone, Debug)]
struct Cand {
    opt: u32,
    key: (u8, u64, u64, u16),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Applied {
    Nothing,
    Place { opt: u32 },
    Raise,
}

#[derive(Copy, Clone, Debug)]
struct Frame {
    trail_mark: u32,
    forbid_mark: u32,
    cand_lo: u32,
    cand_hi: u32,
    next: u32,
    cell: u32,
    level: u64,
    raise_to: u64,
    applied: Applied,
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

/// Heap bytes of the search for one problem (see
/// [`ExactWorkspace::storage_needed`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchStorage {
    /// The tables, the cell grid and the live lists: the search cannot run
    /// without them.
    pub fixed: u64,
    /// The search stacks at their worst-case depth (a search given less
    /// stops early with [`Limit::Storage`]).
    pub stacks: u64,
}

impl SearchStorage {
    /// Both parts.
    pub fn total(&self) -> u64 {
        self.fixed.saturating_add(self.stacks)
    }
}

/// What [`ExactWorkspace::reserve_within`] did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchReservation {
    /// What the search would need.
    pub needed: SearchStorage,
    /// Bytes reserved for it (0 when refused or when the problem is beyond
    /// [`MAX_SEARCH_BUFFERS`]).
    pub granted: u64,
    /// True when the fixed part did not fit the allowance: the search
    /// will not run.
    pub refused: bool,
}

/// The element counts of the search's fixed storage: its cell grid,
/// options and live lists.
#[derive(Copy, Clone, Debug)]
struct Grid {
    /// Buffers.
    n: usize,
    /// Sections (at most two per buffer, plus one).
    nsec: usize,
    /// Stripes.
    nst: usize,
    /// Stripes × sections.
    cells: usize,
    /// Options: (buffer, legal base) pairs.
    opts: usize,
    /// Live-list entries: (option, section) pairs.
    spans: usize,
}

/// The element counts of the search's storage.
#[derive(Copy, Clone, Debug)]
struct SearchSizes {
    grid: Grid,
    trail: usize,
    branches: usize,
    /// Changes of minimum offsets on one path of the canonical search: each
    /// option's can rise once per placement of a buffer overlapping it.
    raises: usize,
}

impl SearchSizes {
    fn fixed_bytes(&self) -> u64 {
        use crate::storage::bytes_of;
        let g = &self.grid;
        let n = g.n;
        let per_buffer = bytes_of::<u32>(7 * n + 1)
            + bytes_of::<u64>(2 * n)
            + bytes_of::<bool>(n)
            + bytes_of::<Placement>(2 * n);
        let per_opt = bytes_of::<Opt>(g.opts)
            + bytes_of::<u64>(g.opts)
            + bytes_of::<u32>(g.opts)
            + bytes_of::<u16>(2 * g.opts + 2);
        let per_section = bytes_of::<u32>(2 * g.nsec + 4)
            + bytes_of::<bool>(g.nsec + 1)
            + bytes_of::<u64>(2 * g.nsec)
            + bytes_of::<u64>(g.nst);
        let per_cell = bytes_of::<u64>(g.cells)
            + bytes_of::<u32>(g.cells)
            + bytes_of::<u64>(2 * g.cells.next_power_of_two())
            + bytes_of::<u64>(g.cells);
        let canonical = bytes_of::<u32>(4 * n + 2)
            + bytes_of::<canonical::RankKey>(n)
            + bytes_of::<u32>(2 * n)
            + bytes_of::<(u32, u32)>(8 * n + 64)
            + bytes_of::<canonical::Scope>(n + 2)
            + bytes_of::<canonical::CanonFrame>(n + 2)
            + bytes_of::<u64>(g.opts);
        per_buffer
            .saturating_add(per_opt)
            .saturating_add(per_section)
            .saturating_add(per_cell)
            .saturating_add(bytes_of::<u32>(g.spans))
            .saturating_add(canonical)
    }

    fn stack_bytes(&self) -> u64 {
        use crate::storage::bytes_of;
        bytes_of::<(u32, u64)>(self.trail)
            .saturating_add(bytes_of::<(u32, u64)>(self.raises))
            .saturating_add(bytes_of::<(u32, u64)>(self.branches))
            .saturating_add(bytes_of::<Frame>(self.trail + 1))
            .saturating_add(bytes_of::<Cand>(self.branches))
    }
}

/// Why a search stopped.
enum Stop {
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

/// Most buffers the branch and bound takes on. Its cell grid, undo trail and
/// branch stack grow with buffers × sections (quadratically), so beyond
/// this they outgrow any storage a run affords, and a search that large
/// would not finish within any budget anyway. Larger problems get the
/// greedy answer with [`Limit::Size`].
pub const MAX_SEARCH_BUFFERS: usize = 20_000;

impl ExactWorkspace {
    /// An empty workspace.
    pub fn new() -> ExactWorkspace {
        ExactWorkspace::default()
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.incumbent,
            self.current,
            self.sec_lo,
            self.sec_hi,
            self.area,
            self.opt_at,
            self.placed,
            self.twin_prev,
            self.min_neighbour,
            self.order,
            self.pins,
            self.opts,
            self.forbid,
            self.live_at,
            self.live,
            self.start_at,
            self.starting,
            self.fin,
            self.cuts,
            self.width,
            self.floor_area,
            self.remaining,
            self.floor,
            self.count,
            self.tree,
            self.trail,
            self.forbid_trail,
            self.frames,
            self.cands,
            self.ends,
            self.canon,
            self.greedy,
            self.timeline
        )
    }

    /// Sizes every buffer of the search for `problem` (and smaller ones),
    /// with no storage budget. This (or [`Self::reserve_within`]) is the
    /// only place the workspace allocates.
    pub fn reserve_for(&mut self, problem: &Problem) {
        self.reserve_within(problem, u64::MAX);
    }

    /// The search's storage for `problem`, in heap bytes: what the linear
    /// tables, the cell grid and the live lists need (`fixed`), and what
    /// its stacks need to never stop for storage (`stacks`).
    pub fn storage_needed(&mut self, problem: &Problem) -> SearchStorage {
        let s = self.sizes(problem);
        SearchStorage {
            fixed: s.fixed_bytes(),
            stacks: s.stack_bytes(),
        }
    }

    /// [`Self::reserve_for`] within `allowance` heap bytes. The per-buffer
    /// tables the greedy rules and the lower bound need are always
    /// reserved (they are linear). The search's cell grid and live lists
    /// are reserved only when they fit the allowance — otherwise the search
    /// is refused ([`Limit::Budget`] at solve time) — and its stacks get
    /// what the allowance leaves, so a deep search stops with
    /// [`Limit::Storage`] instead of growing. Returns what was asked and
    /// what was granted.
    pub fn reserve_within(&mut self, problem: &Problem, allowance: u64) -> SearchReservation {
        fn at_least<T>(v: &mut Vec<T>, n: usize) {
            v.reserve(n.saturating_sub(v.len()));
        }
        let n = problem.len();
        self.greedy.reserve(n);
        for v in [&mut self.incumbent, &mut self.current] {
            at_least(v, n);
        }
        if n > MAX_SEARCH_BUFFERS {
            // The search will not start (see MAX_SEARCH_BUFFERS); the greedy
            // rules and the lower bound need only linear storage.
            self.timeline = Timeline::with_capacity(n);
            return SearchReservation::default();
        }
        let s = self.sizes(problem);
        let need = SearchStorage {
            fixed: s.fixed_bytes(),
            stacks: s.stack_bytes(),
        };
        if need.fixed > allowance {
            // Not reserved: a solve of this problem finds its grid larger
            // than the reserve and stops with `Limit::Budget`.
            self.timeline.reserve(n);
            return SearchReservation {
                needed: need,
                granted: 0,
                refused: true,
            };
        }
        // The stacks share what the fixed part leaves, in proportion.
        let room = allowance - need.fixed;
        let scale = |k: usize| -> usize {
            if need.stacks <= room {
                k
            } else {
                ((k as u128 * room as u128) / need.stacks.max(1) as u128) as usize
            }
        };
        self.timeline.reserve(n);
        for v in [
            &mut self.sec_lo,
            &mut self.sec_hi,
            &mut self.twin_prev,
            &mut self.order,
            &mut self.pins,
        ] {
            at_least(v, n);
        }
        at_least(&mut self.area, n);
        at_least(&mut self.min_neighbour, n);
        at_least(&mut self.opt_at, n + 1);
        at_least(&mut self.placed, n);
        at_least(&mut self.opts, s.grid.opts);
        at_least(&mut self.forbid, s.grid.opts);
        at_least(&mut self.live_at, s.grid.nsec + 2);
        at_least(&mut self.live, s.grid.spans);
        at_least(&mut self.start_at, s.grid.nsec + 2);
        at_least(&mut self.starting, s.grid.opts);
        at_least(&mut self.fin, s.grid.nsec + 1);
        at_least(&mut self.ends, n);
        at_least(&mut self.cuts, 2 * s.grid.opts + 2);
        at_least(&mut self.width, s.grid.nst);
        for v in [&mut self.floor_area, &mut self.remaining] {
            at_least(v, s.grid.nsec);
        }
        at_least(&mut self.floor, s.grid.cells);
        at_least(&mut self.count, s.grid.cells);
        at_least(&mut self.tree, 2 * s.grid.cells.next_power_of_two());
        at_least(&mut self.trail, scale(s.trail));
        at_least(&mut self.forbid_trail, scale(s.branches));
        at_least(&mut self.frames, scale(s.trail + 1));
        at_least(&mut self.cands, scale(s.branches));
        self.reserve_canonical(n, s.grid.cells, s.grid.opts, scale(s.raises));
        SearchReservation {
            needed: need,
            granted: need.fixed.saturating_add(need.stacks.min(room)),
            refused: false,
        }
    }

    /// True when the search's fixed storage (cell grid, options, live
    /// lists) is reserved for `problem`: the workspace serves every space,
    /// and a problem the budget refused finds it short.
    /// Allocates nothing (unlike [`Self::sizes`]).
    fn reserved_for(&mut self, problem: &Problem) -> bool {
        let g = self.grid(problem);
        g.cells <= self.floor.capacity()
            && g.cells <= self.count.capacity()
            && 2 * g.cells.next_power_of_two() <= self.tree.capacity()
            && g.spans <= self.live.capacity()
            && g.opts <= self.opts.capacity()
            && g.nsec + 2 <= self.live_at.capacity()
            && g.n <= self.ends.capacity()
    }

    /// The counts of the search's cell grid and live lists for `problem`
    /// (builds the timeline: linear, allocation-free).
    fn grid(&mut self, problem: &Problem) -> Grid {
        let n = problem.len();
        let parts = problem.partitions() as usize;
        self.timeline.build(problem);
        let t = &self.timeline;
        // Options: one per legal base of each buffer; live-list entries:
        // one per option and section it is live in.
        let (mut opts, mut spans) = (0usize, 0usize);
        for b in problem.buffers() {
            let bases = problem.legal_bases(b.partitions).count();
            opts = opts.saturating_add(bases);
            if !b.is_void() {
                let (lo, hi) = (t.section_of(b.lower), t.section_of(b.upper));
                spans = spans.saturating_add((hi - lo) * bases);
            }
        }
        let nsec = 2 * n + 1;
        // Stripes are cut at both ends of every option's partitions.
        let nst = (parts + 1).min(2 * opts + 2).max(1);
        Grid {
            n,
            nsec,
            nst,
            cells: nsec.saturating_mul(nst),
            opts,
            spans,
        }
    }

    /// The counts the search's storage follows for `problem` (builds the
    /// timeline: linear).
    fn sizes(&mut self, problem: &Problem) -> SearchSizes {
        let grid = self.grid(problem);
        let Grid { n, nst, cells, .. } = grid;
        let parts = problem.partitions() as usize;
        // The sum of the cells of every option bounds the trail of the
        // placements on any path and the live lists.
        let mut max_live = 0usize;
        let mut raises = 0usize;
        {
            let t = &self.timeline;
            let ns = t.sections();
            // Per section: (option delta, buffer delta, starting buffers,
            // their options).
            let mut delta: Vec<(i64, i64, usize, usize)> = alloc::vec![(0, 0, 0, 0); ns + 1];
            for b in problem.buffers().iter().filter(|b| !b.is_void()) {
                let (lo, hi) = (t.section_of(b.lower), t.section_of(b.upper));
                let bases = problem.legal_bases(b.partitions).count();
                delta[lo].0 += bases as i64;
                delta[hi].0 -= bases as i64;
                delta[lo].1 += 1;
                delta[hi].1 -= 1;
                delta[lo].2 += 1;
                delta[lo].3 += bases;
            }
            let (mut live, mut live_bufs) = (0i64, 0i64);
            for (d, db, starters, starter_opts) in delta {
                // Pairs of time-overlapping buffers whose later one starts
                // here, each counted with the options of both.
                let before_bufs = live_bufs.max(0) as usize;
                let before_opts = live.max(0) as usize;
                raises = raises
                    .saturating_add(starters.saturating_mul(before_opts))
                    .saturating_add(before_bufs.saturating_mul(starter_opts))
                    .saturating_add(starters.saturating_sub(1).saturating_mul(starter_opts));
                live += d;
                live_bufs += db;
                max_live = max_live.max(live as usize);
            }
        }
        let stripes_per_opt = nst.min(parts.max(1));
        // Every frame below the root adds at least one trail entry (a
        // placement its cells, a raise one), so the trail bounds the depth.
        let trail = grid
            .spans
            .saturating_mul(stripes_per_opt)
            .saturating_add(2 * cells + 4 * n + 64);
        // Each frame forbids at most its own branches.
        let branches = max_live.saturating_mul(2 * n + 16).saturating_add(64);
        SearchSizes {
            grid,
            trail,
            branches,
            raises: raises.saturating_add(64),
        }
    }

    /// Grows the per-buffer tables (the timeline of the lower bound, the
    /// greedy incumbents) to problems of `buffers` buffers: a caller whose
    /// problem grows by spill copies between solves reserves that here. The
    /// search's own storage stays as [`reserve_for`](Self::reserve_for)
    /// sized it; the search stops at it ([`Limit::Storage`]).
    pub fn reserve_headroom(&mut self, buffers: usize) {
        fn at_least<T>(v: &mut Vec<T>, n: usize) {
            v.reserve(n.saturating_sub(v.len()));
        }
        self.greedy.reserve(buffers);
        self.timeline.reserve(buffers);
        for v in [&mut self.incumbent, &mut self.current] {
            at_least(v, buffers);
        }
    }

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
        let refused = if n > MAX_SEARCH_BUFFERS {
            Some(Limit::Size)
        } else if !self.reserved_for(problem) {
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

    /// False when two pins collide or a pin reaches above the capacity.
    fn pins_consistent(&mut self, problem: &Problem, cap: u64) -> bool {
        let bufs = problem.buffers();
        self.pins.clear();
        for (i, b) in bufs.iter().enumerate() {
            if b.pin.is_some() && !b.is_void() {
                self.pins.push(i as u32);
            }
        }
        for (k, &i) in self.pins.iter().enumerate() {
            let a = &bufs[i as usize];
            let pa = a.pin.unwrap_or_default();
            if pa.offset + a.size > cap {
                return false;
            }
            for &j in &self.pins[..k] {
                let b = &bufs[j as usize];
                let pb = b.pin.unwrap_or_default();
                if a.overlaps_in_time(b)
                    && pa.base < pb.base + b.partitions
                    && pb.base < pa.base + a.partitions
                    && pa.offset < pb.offset + b.size
                    && pb.offset < pa.offset + a.size
                {
                    return false;
                }
            }
        }
        true
    }

    /// Builds sections, stripes, options and the root state at capacity `k`.
    fn setup(&mut self, problem: &Problem, k: u64, coarse: bool) {
        let bufs = problem.buffers();
        let n = bufs.len();
        self.timeline.build(problem);
        // Coarse sections: one per distinct end time, holding the buffers
        // live just before it (the cross-sections; every set of buffers live
        // at one instant is inside one of them, so they carry the same
        // inference and decomposition as the instants with fewer cells).
        self.ends.clear();
        if coarse {
            self.ends
                .extend(bufs.iter().filter(|b| !b.is_void()).map(|b| b.upper));
            self.ends.sort_unstable();
            self.ends.dedup();
        }
        let nsec = if coarse {
            self.ends.len().max(1)
        } else {
            self.timeline.sections().max(1)
        };
        self.nsec = nsec;
        // Stripes: cut at every first/last partition of every legal base.
        let total = problem.partitions();
        self.cuts.clear();
        self.cuts.push(0);
        self.cuts.push(total);
        for b in bufs.iter().filter(|b| !b.is_void() && b.pin.is_none()) {
            for base in problem.legal_bases(b.partitions) {
                self.cuts.push(base);
                self.cuts.push(base + b.partitions);
            }
        }
        self.cuts.sort_unstable();
        self.cuts.dedup();
        self.nst = self.cuts.len() - 1;
        self.width.clear();
        for w in self.cuts.windows(2) {
            self.width.push((w[1] - w[0]) as u64);
        }
        let cells = self.nst * nsec;
        // Per-buffer data and options.
        self.sec_lo.clear();
        self.sec_hi.clear();
        self.area.clear();
        self.placed.clear();
        self.opt_at.clear();
        self.opts.clear();
        self.unplaced = 0;
        for (i, b) in bufs.iter().enumerate() {
            let searchable = !b.is_void() && b.pin.is_none();
            let (lo, hi) = if b.is_void() {
                (0, 0)
            } else {
                if coarse {
                    (
                        self.ends.partition_point(|&e| e <= b.lower) as u32,
                        self.ends.partition_point(|&e| e <= b.upper) as u32,
                    )
                } else {
                    (
                        self.timeline.section_of(b.lower) as u32,
                        self.timeline.section_of(b.upper) as u32,
                    )
                }
            };
            self.sec_lo.push(lo);
            self.sec_hi.push(hi);
            self.area.push(b.size * b.partitions as u64);
            self.placed.push(!searchable);
            self.opt_at.push(self.opts.len() as u32);
            if let Some(pin) = b.pin {
                self.current[i] = pin;
            } else if b.is_void() {
                self.current[i] = Placement {
                    offset: 0,
                    base: problem.legal_bases(b.partitions).next().unwrap_or(0),
                };
            }
            if searchable {
                self.unplaced += 1;
                for base in problem.legal_bases(b.partitions) {
                    let st_lo = self.cuts.partition_point(|&c| c < base) as u16;
                    let st_hi = self.cuts.partition_point(|&c| c < base + b.partitions) as u16;
                    self.opts.push(Opt {
                        buffer: i as u32,
                        base,
                        st_lo,
                        st_hi,
                    });
                }
            }
        }
        self.opt_at.push(self.opts.len() as u32);
        refill(&mut self.forbid, self.opts.len(), NO_LEVEL);
        // Identical buffers are placed in index order.
        self.order.clear();
        self.order
            .extend((0..n as u32).filter(|&i| !self.placed[i as usize]));
        let ident = |b: &super::problem::Buffer| (b.lower, b.upper, b.size, b.align, b.partitions);
        self.order.sort_unstable_by(|&x, &y| {
            (ident(&bufs[x as usize]), x).cmp(&(ident(&bufs[y as usize]), y))
        });
        // Least neighbour sizes, over the buffers sorted by start (`order`
        // holds the searchable ones; pins also block, so they count too).
        refill(&mut self.min_neighbour, n, NO_LEVEL);
        for (x, &i) in self.order.iter().enumerate() {
            let a = &bufs[i as usize];
            for &j in &self.order[x + 1..] {
                let b = &bufs[j as usize];
                if b.lower >= a.upper {
                    break;
                }
                let (i, j) = (i as usize, j as usize);
                self.min_neighbour[i] = self.min_neighbour[i].min(b.size);
                self.min_neighbour[j] = self.min_neighbour[j].min(a.size);
            }
            for &p in &self.pins {
                let pb = &bufs[p as usize];
                if pb.overlaps_in_time(a) {
                    let i = i as usize;
                    self.min_neighbour[i] = self.min_neighbour[i].min(pb.size);
                }
            }
        }
        refill(&mut self.twin_prev, n, NONE);
        for w in self.order.windows(2) {
            if ident(&bufs[w[0] as usize]) == ident(&bufs[w[1] as usize]) {
                self.twin_prev[w[1] as usize] = w[0];
            }
        }
        // Options live in each section, by start section (CSR).
        refill(&mut self.live_at, nsec + 2, 0);
        for o in &self.opts {
            let b = o.buffer as usize;
            for s in self.sec_lo[b]..self.sec_hi[b] {
                self.live_at[s as usize + 1] += 1;
            }
        }
        for s in 0..=nsec {
            self.live_at[s + 1] += self.live_at[s];
        }
        refill(&mut self.live, self.live_at[nsec] as usize, 0);
        // `order` is sorted by start: fill each section's list in that order
        // (using floor_area as the fill cursor).
        refill(&mut self.floor_area, nsec, 0);
        for &b in &self.order {
            let b = b as usize;
            for o in self.opt_at[b]..self.opt_at[b + 1] {
                for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                    let at = self.live_at[s] as usize + self.floor_area[s] as usize;
                    self.live[at] = o;
                    self.floor_area[s] += 1;
                }
            }
        }
        refill(&mut self.start_at, nsec + 2, 0);
        for o in &self.opts {
            self.start_at[self.sec_lo[o.buffer as usize] as usize + 1] += 1;
        }
        for s in 0..=nsec {
            self.start_at[s + 1] += self.start_at[s];
        }
        refill(&mut self.starting, self.opts.len(), 0);
        self.floor_area.iter_mut().for_each(|x| *x = 0);
        for (o, opt) in self.opts.iter().enumerate() {
            let s = self.sec_lo[opt.buffer as usize] as usize;
            self.starting[self.start_at[s] as usize + self.floor_area[s] as usize] = o as u32;
            self.floor_area[s] += 1;
        }
        refill(&mut self.fin, nsec + 1, false);
        // Cells and sections.
        refill(&mut self.floor, cells, 0);
        refill(&mut self.count, cells, 0);
        self.tree.clear();
        refill(&mut self.floor_area, nsec, 0);
        refill(&mut self.remaining, nsec, 0);
        for b in 0..n {
            if !self.placed[b] {
                self.count_options(b, true);
                for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                    self.remaining[s] += self.area[b];
                }
            }
        }
        self.tsize = cells.next_power_of_two();
        refill(&mut self.tree, 2 * self.tsize, NO_LEVEL);
        for c in 0..cells {
            if self.count[c] > 0 {
                self.tree[self.tsize + c] = self.floor[c];
            }
        }
        for i in (1..self.tsize).rev() {
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
        let parts = total as u64;
        self.k = k.min((u64::MAX / 4) / parts);
        self.capacity_area = self.k * parts;
        self.trail.clear();
        self.forbid_trail.clear();
        self.frames.clear();
        self.cands.clear();
    }

    #[allow(clippy::too_many_arguments)]
    fn search(
        &mut self,
        problem: &Problem,
        options: &ExactOptions,
        clock: &mut dyn Clock,
        t0: u64,
        lb: u64,
        cap: u64,
        outcome: &mut Outcome,
    ) -> (Stop, bool) {
        let mut found = false;
        if !self.sections_fit(0, self.nsec) {
            return (Stop::Done, false);
        }
        if self.unplaced == 0 {
            // Only pins and void buffers, and the pins are consistent.
            self.record(problem, clock, t0, cap, outcome, &mut found);
            return (Stop::Done, true);
        }
        match self.expand(problem) {
            Ok(frame) => self.frames.push(frame),
            Err(l) => return (Stop::Limit(l), false),
        }
        loop {
            let Some(fi) = self.frames.len().checked_sub(1) else {
                return (Stop::Done, found);
            };
            if let Some(stop) = self.count_node(options, clock, t0, outcome) {
                return (stop, found);
            }
            // Undo the branch tried last; a placement subtree that is
            // exhausted is forbidden in the siblings.
            let applied = self.frames[fi].applied;
            if applied != Applied::Nothing {
                self.undo_branch(fi);
                if let Applied::Place { opt } = applied {
                    if let Err(l) = self.forbid(opt, self.frames[fi].level) {
                        return (Stop::Limit(l), found);
                    }
                }
                self.frames[fi].applied = Applied::Nothing;
            }
            // Next branch.
            let mut pushed = false;
            while self.frames[fi].next < self.frames[fi].cand_hi {
                let c = self.cands[self.frames[fi].next as usize];
                self.frames[fi].next += 1;
                let level = self.frames[fi].level;
                if self.forbid[c.opt as usize] == level {
                    continue;
                }
                self.frames[fi].applied = Applied::Place { opt: c.opt };
                match self.place(problem, c.opt, level) {
                    Ok(true) => {
                        pushed = true;
                        break;
                    }
                    Ok(false) => {
                        self.undo_branch(fi);
                        self.frames[fi].applied = Applied::Nothing;
                        if let Err(l) = self.forbid(c.opt, level) {
                            return (Stop::Limit(l), found);
                        }
                    }
                    Err(l) => return (Stop::Limit(l), found),
                }
            }
            if !pushed && self.frames[fi].raise_to != NO_LEVEL {
                let to = self.frames[fi].raise_to;
                self.frames[fi].raise_to = NO_LEVEL;
                self.frames[fi].applied = Applied::Raise;
                let cell = self.frames[fi].cell as usize;
                match self.set_floor(cell, to) {
                    Ok(()) => {
                        let s = cell % self.nsec;
                        if self.sections_fit(s, s + 1) {
                            pushed = true;
                        } else {
                            self.undo_branch(fi);
                            self.frames[fi].applied = Applied::Nothing;
                        }
                    }
                    Err(l) => return (Stop::Limit(l), found),
                }
            }
            if !pushed {
                self.pop_frame();
                continue;
            }
            if self.unplaced == 0 {
                let p = self.record(problem, clock, t0, cap, outcome, &mut found);
                if options.objective == Objective::Fit || p <= lb {
                    return (Stop::Done, true);
                }
                // Branch and bound: the rest must beat this peak. The top
                // frame's branch is undone (and forbidden) next round.
                self.k = p - 1;
                self.capacity_area = self.k * problem.partitions() as u64;
                continue;
            }
            if self.frames.len() == self.frames.capacity() {
                return (Stop::Limit(Limit::Storage), found);
            }
            match self.expand(problem) {
                Ok(frame) => self.frames.push(frame),
                Err(l) => return (Stop::Limit(l), found),
            }
        }
    }

    /// Counts one node of the current attempt (either strategy); returns
    /// why to stop when that spends the attempt's share (a restart) or the
    /// caller's node or time budget. The clock is read every 256 nodes: a
    /// node costs far less than a clock read on some devices.
    fn count_node(
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
    fn record(
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

    fn forbid(&mut self, opt: u32, level: u64) -> Result<(), Limit> {
        if self.forbid_trail.len() == self.forbid_trail.capacity() {
            return Err(Limit::Storage);
        }
        self.forbid_trail.push((opt, self.forbid[opt as usize]));
        self.forbid[opt as usize] = level;
        Ok(())
    }

    /// Leaves the top frame: undoes its forbids and drops its branch list.
    /// The parent's branch is undone by the parent.
    fn pop_frame(&mut self) {
        let Some(f) = self.frames.pop() else { return };
        while self.forbid_trail.len() > f.forbid_mark as usize {
            if let Some((o, old)) = self.forbid_trail.pop() {
                self.forbid[o as usize] = old;
            }
        }
        self.cands.truncate(f.cand_lo as usize);
    }

    /// Restores floors to the frame's trail mark and unplaces the buffer of
    /// a placement branch.
    fn undo_branch(&mut self, fi: usize) {
        let f = self.frames[fi];
        let nsec = self.nsec;
        while self.trail.len() > f.trail_mark as usize {
            if let Some((cell, old)) = self.trail.pop() {
                let cell = cell as usize;
                let (st, s) = (cell / nsec, cell % nsec);
                self.floor_area[s] -= (self.floor[cell] - old) * self.width[st];
                self.floor[cell] = old;
                self.refresh(cell);
            }
        }
        if let Applied::Place { opt } = f.applied {
            let b = self.opts[opt as usize].buffer as usize;
            self.placed[b] = false;
            self.unplaced += 1;
            for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                self.remaining[s] += self.area[b];
            }
            self.count_options(b, true);
        }
    }

    fn count_options(&mut self, b: usize, add: bool) {
        let nsec = self.nsec;
        let ready = !self.tree.is_empty();
        for o in self.opt_at[b] as usize..self.opt_at[b + 1] as usize {
            let opt = self.opts[o];
            for st in opt.st_lo as usize..opt.st_hi as usize {
                for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                    let cell = st * nsec + s;
                    let c = &mut self.count[cell];
                    let was_live = *c > 0;
                    if add {
                        *c += 1;
                    } else {
                        *c -= 1;
                    }
                    if ready && was_live != (*c > 0) {
                        self.refresh(cell);
                    }
                }
            }
        }
    }

    /// Recomputes the min-tree above `cell`.
    fn refresh(&mut self, cell: usize) {
        let mut i = self.tsize + cell;
        self.tree[i] = if self.count[cell] > 0 {
            self.floor[cell]
        } else {
            NO_LEVEL
        };
        while i > 1 {
            i /= 2;
            self.tree[i] = self.tree[2 * i].min(self.tree[2 * i + 1]);
        }
    }

    /// True when every section in `[lo, hi)` can still hold its unplaced area.
    fn sections_fit(&self, lo: usize, hi: usize) -> bool {
        (lo..hi).all(|s| self.floor_area[s] + self.remaining[s] <= self.capacity_area)
    }

    fn set_floor(&mut self, cell: usize, to: u64) -> Result<(), Limit> {
        if self.trail.len() == self.trail.capacity() {
            return Err(Limit::Storage);
        }
        let old = self.floor[cell];
        self.trail.push((cell as u32, old));
        let (st, s) = (cell / self.nsec, cell % self.nsec);
        self.floor_area[s] += (to - old) * self.width[st];
        self.floor[cell] = to;
        self.refresh(cell);
        Ok(())
    }

    /// Places option `opt` at `offset`; false when it or a section overflows.
    fn place(&mut self, problem: &Problem, opt: u32, offset: u64) -> Result<bool, Limit> {
        let o = self.opts[opt as usize];
        let b = o.buffer as usize;
        let top = offset + problem.buffers()[b].size;
        let nsec = self.nsec;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        for st in o.st_lo as usize..o.st_hi as usize {
            for s in lo..hi {
                self.set_floor(st * nsec + s, top)?;
            }
        }
        self.placed[b] = true;
        self.unplaced -= 1;
        self.current[b] = Placement {
            offset,
            base: o.base,
        };
        for s in lo..hi {
            self.remaining[s] -= self.area[b];
        }
        self.count_options(b, false);
        Ok(top <= self.k && self.sections_fit(lo, hi))
    }

    /// The lowest offset at or above `from` where option `o` avoids every pin.
    fn lowest(&self, problem: &Problem, o: &Opt, from: u64) -> u64 {
        let bufs = problem.buffers();
        let b = &bufs[o.buffer as usize];
        let mut off = align_offset(from, b.align);
        let end = o.base + b.partitions;
        loop {
            let mut moved = false;
            for &p in &self.pins {
                let pb = &bufs[p as usize];
                let pp = pb.pin.unwrap_or_default();
                if pb.overlaps_in_time(b)
                    && pp.base < end
                    && o.base < pp.base + pb.partitions
                    && pp.offset < off + b.size
                    && off < pp.offset + pb.size
                {
                    off = align_offset(pp.offset + pb.size, b.align);
                    moved = true;
                }
            }
            if !moved {
                return off;
            }
        }
    }

    /// The lowest offset above `f` at which option `o` (whose cells are all
    /// at or below `f`) can sit in a canonical placement where it does not
    /// sit at `f`: see [`Self::expand`].
    fn lowest_above(&self, problem: &Problem, o: &Opt, f: u64) -> u64 {
        let at = self.lowest(problem, o, f);
        if at > f {
            return at;
        }
        let b = o.buffer as usize;
        let step = self.min_neighbour[b];
        let mut best = if step == NO_LEVEL {
            NO_LEVEL
        } else {
            self.lowest(problem, o, f + step)
        };
        let bufs = problem.buffers();
        for &p in &self.pins {
            let pb = &bufs[p as usize];
            let pp = pb.pin.unwrap_or_default();
            let top = pp.offset + pb.size;
            if top > f
                && top < best
                && pb.overlaps_in_time(&bufs[b])
                && pp.base < o.base + bufs[b].partitions
                && o.base < pp.base + pb.partitions
            {
                best = best.min(self.lowest(problem, o, top));
            }
        }
        best
    }

    /// True when option `o` could be placed now at exactly `level`.
    fn fits_at(&self, problem: &Problem, o: usize, level: u64) -> bool {
        let opt = self.opts[o];
        let b = opt.buffer as usize;
        if self.placed[b] || self.forbid[o] == level || level + problem.buffers()[b].size > self.k {
            return false;
        }
        let nsec = self.nsec;
        for st in opt.st_lo as usize..opt.st_hi as usize {
            for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                if self.floor[st * nsec + s] > level {
                    return false;
                }
            }
        }
        self.lowest(problem, &opt, level) == level
    }

    /// The highest floor under option `o`, leaving out `cell`.
    fn max_floor_besides(&self, o: &Opt, cell: usize) -> u64 {
        let b = o.buffer as usize;
        let nsec = self.nsec;
        let mut m = 0;
        for st in o.st_lo as usize..o.st_hi as usize {
            for s in self.sec_lo[b] as usize..self.sec_hi[b] as usize {
                let c = st * nsec + s;
                if c != cell {
                    m = m.max(self.floor[c]);
                }
            }
        }
        m
    }

    /// How many floor steps a buffer `b` topping out at `top` in stripe `st`
    /// would close: the cells just before and just after its lifetime
    /// already at `top`, and `top` at the capacity. A closed step leaves a
    /// flat skyline that a later buffer can fill without waste, so such
    /// candidates go first (a branch order only; completeness is kept).
    fn closes(&self, st: usize, b: usize, top: u64) -> u8 {
        let nsec = self.nsec;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        let mut n = 0;
        if lo > 0 && self.floor[st * nsec + lo - 1] == top {
            n += 1;
        }
        if hi < nsec && self.floor[st * nsec + hi] == top {
            n += 1;
        }
        if top == self.k {
            n += 1;
        }
        n
    }

    /// Picks the node's cell and computes its branches.
    fn expand(&mut self, problem: &Problem) -> Result<Frame, Limit> {
        let nsec = self.nsec;
        let mut frame = Frame {
            trail_mark: self.trail.len() as u32,
            forbid_mark: self.forbid_trail.len() as u32,
            cand_lo: self.cands.len() as u32,
            cand_hi: self.cands.len() as u32,
            next: self.cands.len() as u32,
            cell: NONE,
            level: 0,
            raise_to: NO_LEVEL,
            applied: Applied::Nothing,
        };
        // The lowest live cell (first in cell order among equals).
        let f = self.tree[1];
        if f == NO_LEVEL {
            return Ok(frame);
        }
        let mut i = 1;
        while i < self.tsize {
            i = if self.tree[2 * i] == f {
                2 * i
            } else {
                2 * i + 1
            };
        }
        let best = i - self.tsize;
        frame.cell = best as u32;
        frame.level = f;
        let (cst, cs) = (best / nsec, best % nsec);
        let bufs = problem.buffers();
        // Look-ahead over the run of cells right of c in its stripe at
        // level f: a cell whose section cannot spare a byte there must be
        // covered at exactly f by a buffer inside the run, so the run must
        // be tileable by such buffers and wastable cells.
        let mut run_end = cs + 1;
        while run_end < nsec {
            let c = cst * nsec + run_end;
            if self.count[c] == 0 || self.floor[c] != f {
                break;
            }
            run_end += 1;
        }
        self.fin[run_end] = true;
        for s in (cs..run_end).rev() {
            let slack = self.capacity_area - self.floor_area[s] - self.remaining[s];
            let mut ok = slack >= self.width[cst] && self.fin[s + 1];
            let mut k = self.start_at[s] as usize;
            while !ok && k < self.start_at[s + 1] as usize {
                let o = self.starting[k] as usize;
                k += 1;
                let opt = self.opts[o];
                let e = self.sec_hi[opt.buffer as usize] as usize;
                ok = e <= run_end
                    && self.fin[e]
                    && (opt.st_lo as usize..opt.st_hi as usize).contains(&cst)
                    && self.fits_at(problem, o, f);
            }
            self.fin[s] = ok;
        }
        if !self.fin[cs] {
            return Ok(frame);
        }
        let mut raise_to = NO_LEVEL;
        for k in self.live_at[cs] as usize..self.live_at[cs + 1] as usize {
            let o = self.live[k] as usize;
            let opt = self.opts[o];
            let b = opt.buffer as usize;
            if self.placed[b] || !(opt.st_lo as usize..opt.st_hi as usize).contains(&cst) {
                continue;
            }
            let tw = self.twin_prev[b];
            let twin_waits = tw != NONE && !self.placed[tw as usize];
            // Where this option can sit at the lowest if byte f of the cell
            // stays empty: on its other cells' floors when those are above
            // f; else where pins or alignment put it; else resting on a
            // buffer that sits at f or higher, or on a pin.
            let others = self.max_floor_besides(&opt, best);
            let above = if others > f {
                self.lowest(problem, &opt, others)
            } else {
                self.lowest_above(problem, &opt, f)
            };
            raise_to = raise_to.min(above);
            if twin_waits || self.forbid[o] == f {
                continue;
            }
            if others > f
                || !self.fin[self.sec_hi[b] as usize]
                || self.lowest(problem, &opt, f) != f
                || f + bufs[b].size > self.k
            {
                continue;
            }
            if self.cands.len() == self.cands.capacity() {
                return Err(Limit::Storage);
            }
            let buf = &bufs[b];
            let mut life = buf.upper - buf.lower;
            if self.noise != 0 {
                // Up to doubling the lifetime, by a hash of (attempt, option).
                let h = mix(self.noise ^ o as u64) & 1023;
                life = life.saturating_add(((life as u128 * h as u128) >> 10) as u64);
            }
            self.cands.push(Cand {
                opt: o as u32,
                key: (
                    self.closes(cst, b, f + buf.size),
                    life,
                    buf.size,
                    buf.partitions,
                ),
            });
        }
        frame.cand_hi = self.cands.len() as u32;
        frame.raise_to = if raise_to <= self.k && self.fin[cs + 1] {
            raise_to
        } else {
            NO_LEVEL
        };
        self.cands[frame.cand_lo as usize..]
            .sort_unstable_by(|a, b| b.key.cmp(&a.key).then(a.opt.cmp(&b.opt)));
        Ok(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::dsa::SplitMix64;
    use crate::mem::problem::Buffer;
    use crate::target::Target;
    use crate::verify::buffers::Validator;
    use alloc::vec;

    const STRATEGIES: [Strategy; 5] = [
        Strategy::Portfolio,
        Strategy::Skyline,
        Strategy::Canonical(PREORDERS[0]),
        Strategy::Canonical(PREORDERS[1]),
        Strategy::Canonical(PREORDERS[2]),
    ];

    fn solve(p: &Problem, objective: Objective, budget: Budget) -> (Outcome, Vec<Placement>) {
        solve_with(p, objective, budget, Strategy::Portfolio)
    }

    fn solve_with(
        p: &Problem,
        objective: Objective,
        budget: Budget,
        strategy: Strategy,
    ) -> (Outcome, Vec<Placement>) {
        let mut ws = ExactWorkspace::new();
        ws.reserve_for(p);
        let mut out = vec![Placement::default(); p.len()];
        let o = ws.solve(
            p,
            &ExactOptions {
                budget,
                objective,
                strategy,
            },
            &mut NoClock,
            &mut out,
        );
        // Every answer is legal apart from the capacity, and within it when
        // the status says it fits.
        let mut v = Validator::with_capacity(p.len(), 4);
        let cap = if o.status.fits() {
            p.capacity
        } else {
            u64::MAX
        };
        assert_eq!(v.check(p, &out, cap).total, 0, "{:?} {:?}", o, v.findings());
        assert_eq!(o.peak, peak(p, &out));
        (o, out)
    }

    /// The lowest peak over every placement (offsets below `cap`), by
    /// exhaustive enumeration.
    fn brute_min_peak(p: &Problem, cap: u64) -> Option<u64> {
        fn go(p: &Problem, cap: u64, i: usize, at: &mut Vec<Placement>, best: &mut Option<u64>) {
            let bufs = p.buffers();
            if i == bufs.len() {
                let pk = peak(p, at);
                if best.is_none_or(|b| pk < b) {
                    *best = Some(pk);
                }
                return;
            }
            let b = bufs[i];
            let bases: Vec<u16> = p.legal_bases(b.partitions).collect();
            for base in bases {
                let mut off = 0;
                while off + b.size <= cap {
                    let ok = (0..i).all(|j| {
                        let (c, q) = (bufs[j], at[j]);
                        !(c.overlaps_in_time(&b)
                            && q.base < base + b.partitions
                            && base < q.base + c.partitions
                            && q.offset < off + b.size
                            && off < q.offset + c.size)
                    });
                    if ok {
                        at.push(Placement { offset: off, base });
                        go(p, cap, i + 1, at, best);
                        at.pop();
                    }
                    off += b.align;
                }
            }
        }
        let mut best = None;
        go(p, cap, 0, &mut Vec::new(), &mut best);
        best
    }

    /// The minimizing search's answer agrees with the exhaustive `truth`:
    /// infeasible when there is none, else optimal at its peak.
    fn assert_minimized_to(o: &Outcome, truth: Option<u64>, strategy: Strategy, p: &Problem) {
        match truth {
            None => assert_eq!(
                o.status,
                Status::Infeasible,
                "{strategy:?} {:?}",
                p.buffers()
            ),
            Some(best) => {
                assert_eq!(o.status, Status::Optimal, "{strategy:?} {:?}", p.buffers());
                assert_eq!(o.peak, best, "{strategy:?} {:?}", p.buffers());
            }
        }
    }

    fn random_linear(rng: &mut SplitMix64, n: usize, cap: u64) -> Problem {
        let mut p = Problem::linear(cap, n);
        for _ in 0..n {
            let lower = rng.below(6);
            let upper = lower + 1 + rng.below(4);
            let align = 1 + rng.below(2);
            p.push(Buffer {
                align,
                ..Buffer::linear(lower, upper, 1 + rng.below(3))
            })
            .unwrap();
        }
        p
    }

    #[test]
    fn matches_exhaustive_search_on_small_linear_instances() {
        let mut rng = SplitMix64::new(1);
        let (mut infeasible, mut optimal, mut beyond_bound) = (0, 0, 0);
        for _ in 0..300 {
            let n = 2 + rng.below(4) as usize;
            let cap = 3 + rng.below(4);
            let p = random_linear(&mut rng, n, cap);
            let truth = brute_min_peak(&p, cap);
            for strategy in STRATEGIES {
                let (o, _) = solve_with(&p, Objective::MinimizePeak, Budget::default(), strategy);
                assert_minimized_to(&o, truth, strategy, &p);
                let (f, _) = solve_with(&p, Objective::Fit, Budget::default(), strategy);
                assert_eq!(f.status.fits(), truth.is_some(), "{strategy:?}");
                if strategy == Strategy::Portfolio {
                    infeasible += truth.is_none() as u32;
                    // Infeasible although the live bytes fit: proven by search.
                    beyond_bound += (truth.is_none() && o.lower_bound <= cap) as u32;
                    optimal += truth.is_some() as u32;
                }
            }
        }
        assert!(infeasible > 20 && optimal > 20, "{infeasible} {optimal}");
        assert!(beyond_bound >= 3, "{beyond_bound}");
    }

    #[test]
    fn matches_exhaustive_search_in_2d_with_start_rule() {
        let t = Target::default();
        let mut rng = SplitMix64::new(2);
        let (mut infeasible, mut optimal) = (0, 0);
        for _ in 0..150 {
            let n = 2 + rng.below(3) as usize;
            let cap = 2 + rng.below(3);
            let mut p = Problem::partitioned(&t, cap, n);
            for _ in 0..n {
                let lower = rng.below(4);
                p.push(Buffer {
                    lower,
                    upper: lower + 1 + rng.below(3),
                    size: 1 + rng.below(2),
                    align: 1,
                    partitions: [16u16, 32, 40, 64, 100, 128][rng.below(6) as usize],
                    pin: None,
                })
                .unwrap();
            }
            let truth = brute_min_peak(&p, cap);
            for strategy in STRATEGIES {
                let (o, out) = solve_with(&p, Objective::MinimizePeak, Budget::default(), strategy);
                for (b, q) in p.buffers().iter().zip(&out) {
                    assert!(t.is_legal_start(q.base, b.partitions));
                }
                assert_minimized_to(&o, truth, strategy, &p);
            }
            infeasible += truth.is_none() as u32;
            optimal += truth.is_some() as u32;
        }
        assert!(infeasible > 10 && optimal > 10, "{infeasible} {optimal}");
    }

    #[test]
    fn problems_beyond_the_search_size_get_the_greedy_answer() {
        // Random lifetimes and sizes: the greedy rules leave holes above the
        // lower bound that the search could try to close, but the problem
        // is larger than the search takes.
        let n = MAX_SEARCH_BUFFERS + 2;
        let mut rng = SplitMix64::new(7);
        let mut p = Problem::linear(u64::MAX / 4, n);
        for _ in 0..n {
            let lower = rng.below(n as u64 / 4);
            p.push(Buffer::linear(
                lower,
                lower + 1 + rng.below(64),
                1 + rng.below(100),
            ))
            .unwrap();
        }
        let (o, _) = solve(&p, Objective::MinimizePeak, Budget::default());
        assert!(
            o.peak > o.lower_bound,
            "greedy hit the bound; pick another seed"
        );
        assert_eq!(o.stopped_by, Some(Limit::Size));
        assert_eq!(o.nodes, 0);
        assert_eq!(o.peak, o.greedy_peak);
        assert_eq!(o.status, Status::Feasible);
    }

    #[test]
    fn pins_are_obstacles() {
        let mut p = Problem::linear(4, 3);
        p.push(Buffer {
            pin: Some(Placement { offset: 1, base: 0 }),
            ..Buffer::linear(0, 4, 1)
        })
        .unwrap();
        p.push(Buffer::linear(0, 2, 2)).unwrap();
        p.push(Buffer::linear(1, 3, 1)).unwrap();
        let (o, out) = solve(&p, Objective::MinimizePeak, Budget::default());
        assert_eq!(o.status, Status::Optimal);
        assert_eq!(out[0].offset, 1);
        assert_eq!(Some(o.peak), brute_min_peak(&p, 4).map(|b| b.max(2)));
    }

    #[test]
    fn fits_perfect_packings_at_the_lower_bound() {
        use crate::gen::dsa::{perfect_packing, PerfectPacking};
        for seed in 0..10 {
            let mut p = Problem::linear(0, 60);
            let mut known = Vec::new();
            perfect_packing(&PerfectPacking::new(60), seed, &mut p, &mut known).unwrap();
            let (o, _) = solve(&p, Objective::Fit, Budget::default());
            assert_eq!(o.status, Status::Optimal, "seed {seed}: {o:?}");
            assert_eq!(o.peak, p.capacity);
        }
    }

    #[test]
    fn dressing_an_instance_does_not_change_the_effort_much() {
        // The orders depend on the structure only: a mirrored, shuffled or
        // scaled instance takes comparable effort. Summed over instances
        // (single ones are heavy-tailed), each dress stays within a small
        // factor of the instances as given, and every answer is the same.
        use crate::gen::dsa::{dress, perfect_packing, Dress, PerfectPacking};
        let dresses = [Dress::Mirror, Dress::Shuffle(5), Dress::Scale(3)];
        let mut given = 0u64;
        let mut dressed = [0u64; 3];
        let mut known = Vec::new();
        let mut from = Vec::new();
        for seed in 0..12 {
            let mut p = Problem::linear(0, 150);
            perfect_packing(&PerfectPacking::new(150), seed, &mut p, &mut known).unwrap();
            let (o, _) = solve(&p, Objective::Fit, Budget::default());
            assert!(o.status.fits(), "seed {seed}: {o:?}");
            given += o.nodes + 1;
            for (d, total) in dresses.iter().zip(&mut dressed) {
                let mut q = Problem::linear(0, 150);
                dress(&p, *d, &mut q, &mut from).unwrap();
                let (oq, _) = solve(&q, Objective::Fit, Budget::default());
                assert_eq!(oq.status.fits(), o.status.fits(), "seed {seed} {d:?}");
                *total += oq.nodes + 1;
            }
        }
        for (d, total) in dresses.iter().zip(dressed) {
            assert!(
                total <= 3 * given + 2000 && given <= 3 * total + 2000,
                "{d:?}: {total} nodes against {given} as given"
            );
        }
        // Scaling and shuffling keep the structure exactly.
        assert!(dressed[2] == given, "scaled {} vs {given}", dressed[2]);
    }

    #[test]
    fn budget_exhaustion_returns_the_best_found() {
        use crate::gen::dsa::{perfect_packing, PerfectPacking};
        let mut p = Problem::linear(0, 300);
        let mut known = Vec::new();
        perfect_packing(&PerfectPacking::new(300), 3, &mut p, &mut known).unwrap();
        let budget = Budget {
            nodes: Some(5),
            micros: None,
        };
        let (o, _) = solve(&p, Objective::Fit, budget);
        assert_eq!(o.stopped_by, Some(Limit::Nodes));
        assert_eq!(o.status, Status::BudgetExhausted);
        assert_eq!(o.peak, o.greedy_peak);
        assert!(o.peak > p.capacity);
        assert!(o.nodes <= 6);
    }
}
