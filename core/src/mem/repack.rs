//! Window repacking: a large-neighbourhood improvement of any legal
//! placement, by the exact search on small parts of it.
//!
//! # Method
//! Let `p` be the peak. A buffer that reaches it (a *violator*) is freed
//! together with its neighbourhood: the buffers live in a time window
//! around an instant of its life, the `k` highest of them (the ones that
//! make the stack high there). Every other buffer that shares an instant
//! with a freed one becomes a pinned obstacle at its current placement;
//! those entirely below the lowest freed and listed obstacle are merged into
//! one pinned floor block, so the part stays small however crowded the
//! instant. The exact search then fits the part under `p - 1`. When it fits,
//! the freed buffers take the part's placement (every freed buffer now ends
//! below `p`, and nothing else moved, so the whole stays legal); when every
//! violator is gone the peak has dropped and the next level starts.
//!
//! A neighbour that itself reaches the peak is freed too (as a pin it would
//! make the part infeasible). A part that does not fit in its node budget
//! counts as a failure; each failure widens the next window (more freedom,
//! a harder part) up to `max_window`, each success narrows it back. After a
//! failure the same part is re-placed under `p` (a plateau move), kept when
//! no more of its buffers reach the peak than before: the next windows then
//! see a different arrangement. The improvement ends at the lower bound, at
//! its budget, or after [`STUCK`] failures in a row.
//!
//! # What the neighbourhood exploits
//! Peaks of a greedy placement are local: a few buffers stacked at one
//! instant. The buffers that can lower that stack are the high ones near
//! it in time; the low ones and the far ones only constrain them, and
//! constraints cost the search nothing when they are pins. So the part is
//! chosen by height and time alone (no order of the input, no names), and
//! the random instant and window width make repeated attempts differ.
//!
//! # Storage
//! Linear in the buffers (an [`OverlapIndex`], a role and a scratch entry
//! per buffer) plus one part of at most
//! `max_window × (1 + OBSTACLES_PER_FREED) + 1` buffers and the exact
//! search sized for it, all reserved by [`RepackWorkspace::reserve`];
//! [`RepackWorkspace::improve`] allocates nothing. With the default
//! options the part's search takes about 16 MB on a linear problem and
//! 65 MB on a 128-partition one (its grid has a stripe per start
//! partition), whatever the problem's size.

use alloc::vec::Vec;

use super::exact::{Budget, Clock, ExactOptions, ExactWorkspace, Objective, Strategy};
use super::overlap::OverlapIndex;
use super::problem::{peak, Buffer, Placement, Problem};

/// Failures in a row after which the improvement ends.
pub const STUCK: u32 = 64;

/// Obstacles a part may list per freed buffer (beyond the floor block);
/// a window with more fails (its part would be mostly pins).
pub const OBSTACLES_PER_FREED: usize = 16;

/// Heap bytes the part's search stacks may take beyond its tables: a part
/// whose search goes deeper stops there (and counts as not fitted).
pub const PART_STACK_BYTES: u64 = 4 << 20;

const FREED: u8 = 1;
const SEEN: u8 = 2;

/// Tuning of the improvement.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RepackOptions {
    /// Buffers freed by the first window (at least 1).
    pub window: u32,
    /// Most buffers freed by one window.
    pub max_window: u32,
    /// Search nodes one part may use.
    pub nodes_per_window: u64,
    /// Search nodes over the whole improvement.
    pub nodes: u64,
    /// Microseconds over the whole improvement (read from the caller's
    /// clock; `None`: no time limit).
    pub micros: Option<u64>,
    /// Seed of the instants and widths.
    pub seed: u64,
}

impl Default for RepackOptions {
    fn default() -> Self {
        RepackOptions {
            window: 24,
            max_window: 96,
            nodes_per_window: 4_000,
            nodes: 4_000_000,
            micros: None,
            seed: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

/// What an improvement did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RepackOutcome {
    /// Peak before.
    pub peak_before: u64,
    /// Peak after.
    pub peak: u64,
    /// Parts solved.
    pub windows: u32,
    /// Parts that fitted (and were applied).
    pub improved: u32,
    /// Parts proven not to fit.
    pub proven: u32,
    /// Windows refused before a search (too many obstacles, or one above
    /// the target).
    pub refused: u32,
    /// Search nodes used.
    pub nodes: u64,
}

/// Reusable storage of the improvement (see the module doc).
#[derive(Debug)]
pub struct RepackWorkspace {
    index: OverlapIndex,
    /// Per buffer: 0, [`FREED`] or [`SEEN`] while a part is built.
    role: Vec<u8>,
    /// Buffers of the window, then the neighbours of the freed ones.
    scratch: Vec<(u64, u32)>,
    freed: Vec<u32>,
    violators: Vec<u32>,
    part: Problem,
    part_out: Vec<Placement>,
    exact: ExactWorkspace,
    /// The timeline's first and last instant (of the non-void buffers).
    horizon: (u64, u64),
    /// Buffers a part may hold (what the search was sized for).
    room: usize,
}

impl Default for RepackWorkspace {
    fn default() -> Self {
        RepackWorkspace {
            index: OverlapIndex::default(),
            role: Vec::new(),
            scratch: Vec::new(),
            freed: Vec::new(),
            violators: Vec::new(),
            part: Problem::linear(0, 0),
            part_out: Vec::new(),
            exact: ExactWorkspace::new(),
            horizon: (0, 0),
            room: 0,
        }
    }
}

/// Most buffers of one part for `opts`.
fn part_len(opts: &RepackOptions) -> usize {
    let w = opts.max_window.max(1) as usize;
    w + w * OBSTACLES_PER_FREED + 1
}

impl RepackWorkspace {
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.index,
            self.role,
            self.scratch,
            self.freed,
            self.violators,
            self.part,
            self.part_out,
            self.exact
        )
    }

    /// Heap bytes [`Self::reserve`] takes for a problem of `n` buffers,
    /// beyond the part's search (which depends on the geometry, not `n`).
    pub fn linear_bytes_for(n: usize) -> u64 {
        use crate::storage::bytes_of;
        OverlapIndex::bytes_for(n)
            .saturating_add(bytes_of::<u8>(n))
            .saturating_add(bytes_of::<(u64, u32)>(n))
            .saturating_add(bytes_of::<u32>(2 * n))
    }

    /// Reserves everything [`Self::improve`] uses for problems of up to `n`
    /// buffers shaped like `problem` (its geometry), with `opts`.
    pub fn reserve(&mut self, problem: &Problem, n: usize, opts: &RepackOptions) {
        use crate::storage::grow;
        self.index.reserve(n);
        grow(&mut self.role, n);
        grow(&mut self.scratch, n);
        grow(&mut self.freed, n);
        grow(&mut self.violators, n);
        let m = part_len(opts);
        if self.part.geometry() != problem.geometry() || self.room < m {
            self.part = Problem::with_geometry(problem.geometry().clone(), 0, m);
            self.room = m;
        }
        grow(&mut self.part_out, m);
        // The search sized for the largest part: every buffer live at once
        // over distinct instants (the most sections and live entries) and
        // one partition wide (the most start partitions).
        self.part.clear();
        self.part.capacity = u64::MAX / 4;
        for i in 0..m as u64 {
            let b = Buffer {
                lower: i,
                upper: 2 * m as u64 - i,
                size: 1,
                align: 1,
                partitions: 1,
                pin: None,
            };
            if self.part.push(b).is_err() {
                break;
            }
        }
        let need = self.exact.storage_needed(&self.part);
        self.exact
            .reserve_within(&self.part, need.fixed.saturating_add(PART_STACK_BYTES));
        self.exact.reserve_headroom(m);
        self.part.clear();
    }

    /// Whether [`Self::reserve`] saw problems of `n` buffers.
    pub fn holds(&self, n: usize) -> bool {
        self.index.holds(n) && self.role.capacity() >= n && self.scratch.capacity() >= n
    }

    /// Lowers the peak of the legal placement `out` of `problem` (indexed
    /// like its buffers) towards `lower_bound`, keeping it legal. Pins keep
    /// their placement. Does nothing when [`Self::holds`] is false for the
    /// problem or its geometry differs from the reserved one.
    pub fn improve(
        &mut self,
        problem: &Problem,
        lower_bound: u64,
        out: &mut [Placement],
        opts: &RepackOptions,
        clock: &mut dyn Clock,
    ) -> RepackOutcome {
        let bufs = problem.buffers();
        let n = bufs.len();
        let mut o = RepackOutcome {
            peak_before: peak(problem, out),
            ..RepackOutcome::default()
        };
        o.peak = o.peak_before;
        if !self.holds(n)
            || self.part.geometry() != problem.geometry()
            || self.room < part_len(opts)
        {
            return o;
        }
        self.index.build(problem);
        crate::storage::refill(&mut self.role, n, 0);
        self.horizon = bufs
            .iter()
            .filter(|b| !b.is_void())
            .fold((u64::MAX, 0), |(l, u), b| (l.min(b.lower), u.max(b.upper)));
        let t0 = clock.now_micros();
        let mut rng = opts.seed;
        let min_k = opts.window.clamp(1, opts.max_window.max(1));
        let mut k = min_k;
        let mut fails = 0;
        let mut level = u64::MAX;
        while o.peak > lower_bound && o.nodes < opts.nodes && fails < STUCK {
            if opts
                .micros
                .is_some_and(|m| clock.now_micros().saturating_sub(t0) >= m)
            {
                break;
            }
            if level != o.peak {
                level = o.peak;
                self.violators.clear();
                for (i, b) in bufs.iter().enumerate() {
                    if out[i].offset.saturating_add(b.size) >= level {
                        self.violators.push(i as u32);
                    }
                }
                // A pin or an empty lifetime at the peak: no part lowers it.
                if self
                    .violators
                    .iter()
                    .any(|&v| bufs[v as usize].pin.is_some() || bufs[v as usize].is_void())
                {
                    break;
                }
            }
            let v = self.violators
                [(crate::rng::splitmix64(&mut rng) % self.violators.len() as u64) as usize];
            let budget = opts.nodes_per_window.min(opts.nodes - o.nodes);
            let built = self.build_part(problem, out, v, k as usize, o.peak - 1, &mut rng);
            if !built {
                o.refused += 1;
            }
            let fitted = built && self.solve_part(o.peak - 1, budget, clock, &mut o);
            if fitted {
                self.apply(out);
            }
            o.windows += 1;
            if fitted {
                o.improved += 1;
                fails = 0;
                k = (k - k / 4).max(min_k);
                let p = level;
                self.violators
                    .retain(|&i| out[i as usize].offset + bufs[i as usize].size >= p);
                if self.violators.is_empty() {
                    o.peak = peak(problem, out);
                }
            } else {
                fails += 1;
                k = (k + k / 2 + 1).min(opts.max_window.max(1));
                if built {
                    self.shake(problem, out, level, budget, clock, &mut o);
                    if self.violators.is_empty() {
                        o.peak = peak(problem, out);
                    }
                }
            }
        }
        o
    }

    /// Builds the part around violator `v` with about `k` freed buffers
    /// under `cap`; false when it has too many obstacles or an obstacle
    /// above `cap`. Leaves every role cleared.
    fn build_part(
        &mut self,
        problem: &Problem,
        out: &[Placement],
        v: u32,
        k: usize,
        cap: u64,
        rng: &mut u64,
    ) -> bool {
        let bufs = problem.buffers();
        let b = bufs[v as usize];
        let top = |i: u32| out[i as usize].offset + bufs[i as usize].size;
        // A window around a random instant of v's life, doubled until it
        // holds k movable buffers (or the whole timeline).
        let life = b.upper - b.lower;
        let centre = b.lower + crate::rng::splitmix64(rng) % life;
        let mut half = if crate::rng::splitmix64(rng) % 2 == 0 {
            1
        } else {
            (life / 2).max(1)
        };
        loop {
            let probe = Buffer::linear(
                centre.saturating_sub(half),
                centre.saturating_add(half).max(centre + 1),
                1,
            );
            self.scratch.clear();
            let scratch = &mut self.scratch;
            self.index.for_each_overlapping(&probe, |i| {
                if bufs[i as usize].pin.is_none() {
                    scratch.push((top(i), i));
                }
            });
            let whole = probe.lower <= self.horizon.0 && probe.upper >= self.horizon.1;
            if self.scratch.len() >= k || whole {
                break;
            }
            half = half.saturating_mul(2);
        }
        // The k highest (ties: larger first, then earlier start: properties
        // of the buffers, never their index, decide before the index does).
        let key = |&(t, i): &(u64, u32)| {
            let bi = &bufs[i as usize];
            (
                core::cmp::Reverse(t),
                core::cmp::Reverse(bi.size),
                bi.lower,
                i,
            )
        };
        if self.scratch.len() > k {
            self.scratch.select_nth_unstable_by_key(k - 1, key);
            self.scratch.truncate(k);
        }
        self.freed.clear();
        self.freed.extend(self.scratch.iter().map(|&(_, i)| i));
        if !self.freed.contains(&v) {
            if let Some(last) = self.freed.last_mut() {
                *last = v;
            } else {
                self.freed.push(v);
            }
        }
        for &f in &self.freed {
            self.role[f as usize] = FREED;
        }
        // The neighbours of the freed buffers. One that reaches above `cap`
        // joins the freed ones (a pin there would make the part infeasible),
        // up to `2k`; the others are candidates for obstacles.
        self.scratch.clear();
        let most = 2 * k.max(1);
        let mut below_cap = true;
        let mut fi = 0;
        while fi < self.freed.len() {
            let f = self.freed[fi];
            fi += 1;
            let role = &mut self.role;
            let scratch = &mut self.scratch;
            let freed = &mut self.freed;
            self.index.for_each_overlapping(&bufs[f as usize], |j| {
                if role[j as usize] != 0 {
                    return;
                }
                let t = top(j);
                if t > cap && bufs[j as usize].pin.is_none() && freed.len() < most {
                    role[j as usize] = FREED;
                    freed.push(j);
                } else {
                    role[j as usize] = SEEN;
                    scratch.push((t, j));
                    below_cap &= t <= cap;
                }
            });
        }
        let (mut lo, mut hi) = (u64::MAX, 0);
        let mut floor = u64::MAX;
        for &f in &self.freed {
            let bf = &bufs[f as usize];
            lo = lo.min(bf.lower);
            hi = hi.max(bf.upper);
            floor = floor.min(out[f as usize].offset);
        }
        self.scratch.sort_unstable_by_key(key);
        // Freed neighbours can double the window, so the room the part was
        // sized for bounds the obstacles too.
        let limit = (self.freed.len() * OBSTACLES_PER_FREED)
            .min(self.room.saturating_sub(self.freed.len() + 1));
        let mut listed = 0;
        let mut ok = below_cap;
        for s in 0..self.scratch.len() {
            let (t, j) = self.scratch[s];
            if t <= floor {
                break;
            }
            if t > cap || listed == limit {
                ok = false;
                break;
            }
            floor = floor.min(out[j as usize].offset);
            self.scratch[listed] = (t, j);
            listed += 1;
        }
        for &(_, j) in &self.scratch {
            self.role[j as usize] = 0;
        }
        for &f in &self.freed {
            self.role[f as usize] = 0;
        }
        if !ok {
            return false;
        }
        self.scratch.truncate(listed);
        // The part: freed buffers first, then the listed pins, then the floor.
        self.part.clear();
        self.part.capacity = cap;
        for &f in &self.freed {
            let bf = bufs[f as usize];
            if self.part.push(Buffer { pin: None, ..bf }).is_err() {
                return false;
            }
        }
        for &(_, j) in &self.scratch {
            let bj = bufs[j as usize];
            let pinned = Buffer {
                pin: Some(out[j as usize]),
                ..bj
            };
            if self.part.push(pinned).is_err() {
                return false;
            }
        }
        if floor > 0 && floor != u64::MAX {
            let block = Buffer {
                lower: lo,
                upper: hi,
                size: floor,
                align: 1,
                partitions: problem.partitions(),
                pin: Some(Placement::default()),
            };
            if self.part.push(block).is_err() {
                return false;
            }
        }
        true
    }

    /// Re-places the built part at the peak `level` (a plateau move): kept
    /// when no more freed buffers reach the peak than before; then the
    /// violators are listed again.
    fn shake(
        &mut self,
        problem: &Problem,
        out: &mut [Placement],
        level: u64,
        nodes: u64,
        clock: &mut dyn Clock,
        o: &mut RepackOutcome,
    ) {
        let bufs = problem.buffers();
        let reaching = |placed: &mut dyn Iterator<Item = (u32, Placement)>| {
            placed
                .filter(|&(f, at)| at.offset + bufs[f as usize].size >= level)
                .count()
        };
        let before = reaching(&mut self.freed.iter().map(|&f| (f, out[f as usize])));
        if !self.solve_part(level, nodes, clock, o) {
            return;
        }
        let after = reaching(
            &mut self
                .freed
                .iter()
                .zip(&self.part_out)
                .map(|(&f, &at)| (f, at)),
        );
        if after <= before {
            self.apply(out);
            self.violators.clear();
            for (i, b) in bufs.iter().enumerate() {
                if out[i].offset.saturating_add(b.size) >= level {
                    self.violators.push(i as u32);
                }
            }
        }
    }

    /// Solves the built part under `cap` within `nodes` into `part_out`;
    /// true when it fits.
    fn solve_part(
        &mut self,
        cap: u64,
        nodes: u64,
        clock: &mut dyn Clock,
        o: &mut RepackOutcome,
    ) -> bool {
        self.part.capacity = cap;
        let m = self.part.len();
        crate::storage::refill(&mut self.part_out, m, Placement::default());
        let options = ExactOptions {
            budget: Budget {
                nodes: Some(nodes),
                micros: None,
            },
            objective: Objective::Fit,
            strategy: Strategy::Portfolio,
        };
        let r = self
            .exact
            .solve(&self.part, &options, clock, &mut self.part_out);
        o.nodes += r.nodes.max(1);
        if r.status == super::exact::Status::Infeasible {
            o.proven += 1;
        }
        r.status.fits()
    }

    /// Moves the freed buffers of `out` to the part's placement (the freed
    /// buffers come first in the part).
    fn apply(&self, out: &mut [Placement]) {
        for (&f, &at) in self.freed.iter().zip(&self.part_out) {
            out[f as usize] = at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::dsa::{perfect_packing, PerfectPacking};
    use crate::mem::exact::NoClock;
    use crate::mem::greedy::{GreedyRule, GreedyWorkspace};
    use crate::mem::problem::Timeline;
    use crate::verify::buffers::Validator;
    use alloc::vec;

    fn packing(seed: u64, n: usize) -> Problem {
        let mut p = Problem::linear(0, n);
        let mut known = Vec::new();
        let params = PerfectPacking {
            buffers: n,
            capacity: 4096,
            horizon: 1000,
            unit: 16,
        };
        perfect_packing(&params, seed, &mut p, &mut known).unwrap();
        p.capacity = u64::MAX / 8;
        p
    }

    fn lower_bound(p: &Problem) -> u64 {
        p.lower_bound(&mut Timeline::with_capacity(p.len())).bytes
    }

    /// First fit by start time, then repacking within `nodes`: the first
    /// fit's peak, the outcome and the placement.
    fn first_fit_then_repack(p: &Problem, nodes: u64) -> (u64, RepackOutcome, Vec<Placement>) {
        let mut g = GreedyWorkspace::new();
        g.reserve(p.len());
        let mut out = vec![Placement::default(); p.len()];
        let first = g.place(p, GreedyRule::StartBestFit, &mut out);
        let opts = RepackOptions {
            nodes,
            ..RepackOptions::default()
        };
        let mut ws = RepackWorkspace::new();
        ws.reserve(p, p.len(), &opts);
        let heap = ws.heap_bytes();
        let o = ws.improve(p, lower_bound(p), &mut out, &opts, &mut NoClock);
        assert_eq!(ws.heap_bytes(), heap, "improve allocated");
        (first, o, out)
    }

    #[test]
    fn repacking_keeps_placements_legal_and_never_raises_the_peak() {
        let mut validator = Validator::with_capacity(200, 8);
        let (mut before, mut after) = (0, 0);
        for seed in 0..6 {
            let p = packing(seed, 120);
            let (first, o, out) = first_fit_then_repack(&p, 200_000);
            assert_eq!(validator.check(&p, &out, u64::MAX).total, 0);
            assert_eq!(o.peak_before, first);
            assert_eq!(o.peak, peak(&p, &out));
            assert!(o.peak <= first);
            assert!(o.peak >= lower_bound(&p));
            before += first;
            after += o.peak;
        }
        // Perfect packings are where first fit leaves most room: the parts
        // must find some of it.
        assert!(
            after < before,
            "repacking lowered no peak: {before} -> {after}"
        );
    }

    #[test]
    fn a_stack_a_window_can_lower_is_lowered_to_the_bound() {
        // a [0,2) and b [2,4) could share offset 4 above c [0,4) at 0, but b
        // was put at 8: peak 12, bound 8. d [4,6), pinned at 0, stays.
        let mut p = Problem::linear(u64::MAX / 8, 4);
        p.push(Buffer::linear(0, 2, 4)).unwrap();
        p.push(Buffer::linear(2, 4, 4)).unwrap();
        p.push(Buffer::linear(0, 4, 4)).unwrap();
        p.push(Buffer {
            pin: Some(Placement { offset: 0, base: 0 }),
            ..Buffer::linear(4, 6, 4)
        })
        .unwrap();
        let mut out = vec![
            Placement { offset: 4, base: 0 },
            Placement { offset: 8, base: 0 },
            Placement { offset: 0, base: 0 },
            Placement { offset: 0, base: 0 },
        ];
        let opts = RepackOptions::default();
        let mut ws = RepackWorkspace::new();
        ws.reserve(&p, p.len(), &opts);
        let o = ws.improve(&p, lower_bound(&p), &mut out, &opts, &mut NoClock);
        assert_eq!((o.peak_before, o.peak), (12, 8));
        assert_eq!(out[3], Placement { offset: 0, base: 0 }, "the pin moved");
        let mut validator = Validator::with_capacity(4, 4);
        assert_eq!(validator.check(&p, &out, u64::MAX).total, 0);
    }

    #[test]
    fn partitioned_parts_keep_the_start_rule() {
        let t = crate::Target::default();
        let mut p = Problem::partitioned(&t, u64::MAX / 8, 64);
        let mut x = 1u64;
        for _ in 0..48 {
            let r = crate::rng::splitmix64(&mut x);
            let lower = r % 50;
            let parts = [1u16, 32, 64, 128][(r >> 8) as usize % 4];
            p.push(Buffer {
                lower,
                upper: lower + 1 + (r >> 16) % 20,
                size: 64 * (1 + (r >> 24) % 8),
                align: 64,
                partitions: parts,
                pin: None,
            })
            .unwrap();
        }
        let (first, o, out) = first_fit_then_repack(&p, 100_000);
        let mut validator = Validator::with_capacity(p.len(), 8);
        assert_eq!(validator.check(&p, &out, u64::MAX).total, 0);
        assert!(o.peak <= first);
    }

    #[test]
    fn an_unreserved_problem_is_left_as_it_is() {
        let p = packing(1, 40);
        let mut g = GreedyWorkspace::new();
        g.reserve(p.len());
        let mut out = vec![Placement::default(); p.len()];
        g.place(&p, GreedyRule::StartBestFit, &mut out);
        let kept = out.clone();
        let mut ws = RepackWorkspace::new();
        let o = ws.improve(
            &p,
            lower_bound(&p),
            &mut out,
            &RepackOptions::default(),
            &mut NoClock,
        );
        assert_eq!(out, kept);
        assert_eq!((o.windows, o.peak), (0, o.peak_before));
    }
}
