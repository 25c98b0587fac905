//! The exact search's storage: what a problem needs, and reserving it.
//!
//! # Storage
//! [`ExactWorkspace::reserve_for`] sizes everything from the problem (the
//! undo trail from the sum of the buffers' cells, the branch stack from the
//! most unpinned buffers live at once: pins are never branched on);
//! [`ExactWorkspace::reserve_sizes_within`] does it once for several
//! problems (their [`SearchSizes::max`]). Running out of them ends the search with
//! [`Limit::Storage`](super::Limit::Storage), never a reallocation. The
//! reserve functions are the only ones that allocate: a solve of a problem
//! whose cell grid is reserved allocates nothing, and one whose grid is not
//! is refused ([`Limit::Budget`](super::Limit::Budget)) instead of growing.

use alloc::vec::Vec;

use super::canonical;
use super::skyline::{Cand, Frame};
use super::{ExactWorkspace, Opt};
use crate::mem::greedy::GreedyRule;
use crate::mem::problem::{Placement, Problem, Timeline};

/// Heap bytes of the search for one problem (see
/// [`ExactWorkspace::storage_needed`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchStorage {
    /// The tables, the cell grid and the live lists: the search cannot run
    /// without them.
    pub fixed: u64,
    /// The search stacks at their worst-case depth (a search given less
    /// stops early with [`Limit::Storage`](super::Limit::Storage)).
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
pub(super) struct Grid {
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

/// The element counts of the search's storage for a problem
/// ([`ExactWorkspace::search_sizes`]); [`Self::max`] of several is what a
/// workspace reserved once for a family of problems needs (the parts of
/// one problem, each with other buffers pinned, say).
#[derive(Copy, Clone, Debug)]
pub struct SearchSizes {
    grid: Grid,
    /// Not partitioned: the greedy rules may read an occupancy tree.
    linear: bool,
    trail: usize,
    branches: usize,
    /// Changes of minimum offsets on one path of the canonical search: each
    /// option's can rise once per placement of a buffer overlapping it.
    raises: usize,
}

impl SearchSizes {
    /// The larger count of each table of `self` and `other`.
    pub fn max(self, other: SearchSizes) -> SearchSizes {
        let (a, b) = (&self.grid, &other.grid);
        SearchSizes {
            grid: Grid {
                n: a.n.max(b.n),
                nsec: a.nsec.max(b.nsec),
                nst: a.nst.max(b.nst),
                cells: a.cells.max(b.cells),
                opts: a.opts.max(b.opts),
                spans: a.spans.max(b.spans),
            },
            linear: self.linear || other.linear,
            trail: self.trail.max(other.trail),
            branches: self.branches.max(other.branches),
            raises: self.raises.max(other.raises),
        }
    }

    /// The heap bytes these counts take.
    pub fn storage(&self) -> SearchStorage {
        SearchStorage {
            fixed: self.fixed_bytes(),
            stacks: self.stack_bytes(),
        }
    }

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

/// Most buffers the branch and bound takes on. Its cell grid, undo trail and
/// branch stack grow with buffers × sections (quadratically), so beyond
/// this they outgrow any storage a run affords, and a search that large
/// would not finish within any budget anyway. Larger problems get the
/// greedy answer with [`Limit::Size`](super::Limit::Size).
pub const MAX_SEARCH_BUFFERS: usize = 20_000;

/// Grows the room of `v` to `len` elements, those it holds included.
pub(super) fn at_least<T>(v: &mut Vec<T>, len: usize) {
    crate::storage::grow(v, len);
}

/// A table of the search, reserved ahead of the solves that fill it, with
/// its element type left out so that tables of several types form one list
/// ([`ExactWorkspace::grid_tables`]).
trait Table {
    /// Elements it has room for.
    fn room(&self) -> usize;
    /// [`at_least`].
    fn reserve_to(&mut self, len: usize);
}

impl<T> Table for Vec<T> {
    fn room(&self) -> usize {
        self.capacity()
    }

    fn reserve_to(&mut self, len: usize) {
        at_least(self, len);
    }
}

impl Grid {
    /// The counts of a problem of `n` buffers that the search does not
    /// take on: none but the buffers.
    fn empty(n: usize) -> Grid {
        Grid {
            n,
            nsec: 0,
            nst: 0,
            cells: 0,
            opts: 0,
            spans: 0,
        }
    }

    /// The counts of the search's cell grid and live lists for `problem`,
    /// whose sections `timeline` holds (built for `problem`). Linear and
    /// allocation-free.
    pub(super) fn of(problem: &Problem, timeline: &Timeline) -> Grid {
        let n = problem.len();
        let parts = problem.partitions() as usize;
        let t = timeline;
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
}

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
        self.search_sizes(problem).storage()
    }

    /// [`Self::reserve_for`] within `allowance` heap bytes. The per-buffer
    /// tables the greedy rules and the lower bound need are always
    /// reserved (they are linear). The search's cell grid and live lists
    /// are reserved only when they fit the allowance — otherwise the search
    /// is refused ([`Limit::Budget`](super::Limit::Budget) at solve time) — and its stacks get
    /// what the allowance leaves, so a deep search stops with
    /// [`Limit::Storage`](super::Limit::Storage) instead of growing. Returns what was asked and
    /// what was granted.
    pub fn reserve_within(&mut self, problem: &Problem, allowance: u64) -> SearchReservation {
        let s = self.search_sizes(problem);
        self.reserve_sizes_within(&s, allowance)
    }

    /// [`Self::reserve_within`] for problems of the counts `s` (from
    /// [`Self::search_sizes`], or the [`SearchSizes::max`] of several).
    pub fn reserve_sizes_within(&mut self, s: &SearchSizes, allowance: u64) -> SearchReservation {
        let n = s.grid.n;
        self.greedy.reserve(n);
        for v in [&mut self.incumbent, &mut self.current] {
            at_least(v, n);
        }
        if n > MAX_SEARCH_BUFFERS {
            // The search will not start (see MAX_SEARCH_BUFFERS); the greedy
            // rules and the lower bound need only linear storage, and the
            // greedy answer is the answer: its occupancy tree (linear too)
            // keeps it from walking every placed neighbour.
            self.greedy
                .reserve_rules(n, s.linear, &[GreedyRule::BySize, GreedyRule::StartBestFit]);
            self.timeline = Timeline::with_capacity(n);
            return SearchReservation::default();
        }
        let need = s.storage();
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
        at_least(&mut self.forbid, s.grid.opts);
        at_least(&mut self.start_at, s.grid.nsec + 2);
        at_least(&mut self.starting, s.grid.opts);
        at_least(&mut self.fin, s.grid.nsec + 1);
        at_least(&mut self.cuts, 2 * s.grid.opts + 2);
        at_least(&mut self.width, s.grid.nst);
        for v in [&mut self.floor_area, &mut self.remaining] {
            at_least(v, s.grid.nsec);
        }
        for (table, len) in self.grid_tables(&s.grid) {
            table.reserve_to(len);
        }
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

    /// The fixed tables a solve checks before it searches, each with the
    /// length the grid `g` gives it: the largest (the cells and the
    /// min-tree over them, the live lists, the options) and one per
    /// section and per buffer. [`Self::reserve_within`] reserves them with
    /// the rest of the fixed tables; a solve runs only when they hold its
    /// problem's grid ([`Self::reserved_for`]).
    fn grid_tables(&mut self, g: &Grid) -> [(&mut dyn Table, usize); 7] {
        [
            (&mut self.floor, g.cells),
            (&mut self.count, g.cells),
            (&mut self.tree, 2 * g.cells.next_power_of_two()),
            (&mut self.live, g.spans),
            (&mut self.opts, g.opts),
            (&mut self.live_at, g.nsec + 2),
            (&mut self.ends, g.n),
        ]
    }

    /// True when the search's fixed storage (cell grid, options, live
    /// lists) is reserved for a problem of grid `g`: the workspace serves
    /// every space, and a problem the budget refused finds it short.
    /// Allocates nothing.
    pub(super) fn reserved_for(&mut self, g: &Grid) -> bool {
        self.grid_tables(g)
            .iter()
            .all(|(table, len)| *len <= table.room())
    }

    /// The counts the search's storage follows for `problem` (builds the
    /// timeline and a per-section table: linear, and it allocates, so
    /// call it where the workspace is reserved). Pinned buffers count in the grid and the trail
    /// (they block cells) but not in the branch stack: a pin is placed
    /// before the search and never branched on. Above
    /// [`MAX_SEARCH_BUFFERS`] only the buffer count is taken (the search
    /// will not start).
    pub fn search_sizes(&mut self, problem: &Problem) -> SearchSizes {
        let n = problem.len();
        if n > MAX_SEARCH_BUFFERS {
            return SearchSizes {
                grid: Grid::empty(n),
                linear: !problem.is_partitioned(),
                trail: 0,
                branches: 0,
                raises: 0,
            };
        }
        self.timeline.build(problem);
        let grid = Grid::of(problem, &self.timeline);
        let Grid { n, nst, cells, .. } = grid;
        let parts = problem.partitions() as usize;
        // The sum of the cells of every option bounds the trail of the
        // placements on any path and the live lists. Only unpinned
        // buffers are branched on and have minimum offsets that rise, so
        // the branch stack and the raises count their options alone
        // (`free`); a pin still raises the options it overlaps.
        let mut max_live = 0usize;
        let mut raises = 0usize;
        let mut free = 0usize;
        {
            let t = &self.timeline;
            let ns = t.sections();
            // Per section: (free option delta, buffer delta, starting
            // buffers, their free options).
            let mut delta: Vec<(i64, i64, usize, usize)> = alloc::vec![(0, 0, 0, 0); ns + 1];
            for b in problem.buffers().iter().filter(|b| !b.is_void()) {
                let (lo, hi) = (t.section_of(b.lower), t.section_of(b.upper));
                let bases = if b.pin.is_none() {
                    free += 1;
                    problem.legal_bases(b.partitions).count()
                } else {
                    0
                };
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
                // here, each counted with the free options of the other.
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
        let branches = max_live.saturating_mul(2 * free + 16).saturating_add(64);
        SearchSizes {
            grid,
            linear: !problem.is_partitioned(),
            trail,
            branches,
            raises: raises.saturating_add(64),
        }
    }

    /// Grows the per-buffer tables (the timeline of the lower bound, the
    /// greedy incumbents) to problems of `buffers` buffers: a caller whose
    /// problem grows by spill copies between solves reserves that here. The
    /// search's own storage stays as [`reserve_for`](Self::reserve_for)
    /// sized it; the search stops at it ([`Limit::Storage`](super::Limit::Storage)).
    pub fn reserve_headroom(&mut self, buffers: usize) {
        self.greedy.reserve(buffers);
        self.timeline.reserve(buffers);
        for v in [&mut self.incumbent, &mut self.current] {
            at_least(v, buffers);
        }
    }
}
