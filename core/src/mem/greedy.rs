//! The two classic greedy placement rules, as real allocators on a
//! [`Problem`]. They give the exact search its first solution and serve as
//! baselines in reports.
//!
//! - [`GreedyRule::BySize`]: largest buffer first (ties: longer lifetime,
//!   earlier start, lower index), each at the lowest feasible offset given
//!   the already placed buffers whose lifetimes overlap it — the rule of
//!   XLA's and TFLite's heap simulators.
//! - [`GreedyRule::StartBestFit`]: a linear scan by start time; each buffer
//!   takes the smallest free gap among the live placed buffers that holds
//!   it (ties: lowest offset), or the space above them all.
//!
//! In 2-D mode every legal base partition is tried and the lowest offset
//! (by size) or the best gap (best fit) wins, lower base first on ties.
//! Pins are obstacles placed first. Neither rule looks at the capacity: the
//! peak they reach is the answer, possibly above the capacity.
//!
//! Cost: by size on a linear problem asks an [`Occupancy`] tree (the
//! union of the placed buffers' ranges over segments of time) for the
//! lowest fit: O(log T) sets a query, each passed range a treap step, so a
//! stack of placed neighbours under a buffer costs one step, not one visit
//! each. Best fit on a linear problem without pins sweeps a
//! [`LiveGaps`] index (the gaps between the buffers live at each start, by
//! size): O(log n) a buffer. Otherwise (2-D, pins under best fit, or an
//! index out of its reserved room) the placed buffers are kept in an
//! [`OverlapSubset`] of an interval
//! index over the problem, so each buffer visits only the *placed* buffers
//! that share an instant with it and sorts them: O(d log d) per buffer of
//! d placed overlaps. Both give the same placements (a test compares them
//! with an all-pairs reference); storage linear in the buffers, and no
//! allocation after [`GreedyWorkspace::reserve`].

use alloc::vec::Vec;

use super::live_gaps::LiveGaps;
use super::occupancy::Occupancy;
use super::overlap::{OverlapIndex, OverlapSubset};
use super::problem::{align_offset, Buffer, Obstacle, Placement, Problem};

/// Which greedy rule to run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GreedyRule {
    /// Largest first, lowest feasible offset.
    BySize,
    /// Start-time order, best-fitting gap.
    StartBestFit,
}

impl GreedyRule {
    /// The spelling on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            GreedyRule::BySize => "greedy-size",
            GreedyRule::StartBestFit => "best-fit",
        }
    }
}

/// Reusable storage of the greedy rules.
#[derive(Debug, Default)]
pub struct GreedyWorkspace {
    order: Vec<u32>,
    placed: OverlapSubset,
    near: Vec<Obstacle>,
    scratch: Vec<Obstacle>,
    index: OverlapIndex,
    occupancy: Occupancy,
    gaps: LiveGaps,
}

impl GreedyWorkspace {
    /// An empty workspace; call [`reserve`](Self::reserve) before use to keep
    /// the rules allocation-free.
    pub fn new() -> GreedyWorkspace {
        GreedyWorkspace::default()
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.order,
            self.placed,
            self.near,
            self.scratch,
            self.index,
            self.occupancy,
            self.gaps
        )
    }

    /// Sizes the storage for problems of up to `buffers` buffers: the
    /// neighbour walk's, which places any problem.
    pub fn reserve(&mut self, buffers: usize) {
        crate::storage::grow(&mut self.order, buffers);
        self.placed.reserve(buffers);
        crate::storage::grow(&mut self.near, buffers);
        crate::storage::grow(&mut self.scratch, buffers);
        self.index.reserve(buffers);
    }

    /// [`Self::reserve`] for `problem`, and when it is linear what both
    /// rules read instead of walking ([`Self::reserve_rules`]).
    pub fn reserve_for(&mut self, problem: &Problem) {
        self.reserve_rules(
            problem.len(),
            !problem.is_partitioned(),
            &[GreedyRule::BySize, GreedyRule::StartBestFit],
        );
    }

    /// [`Self::reserve`] for `buffers` buffers, and for a `linear`
    /// problem the structures the listed `rules` read instead of walking:
    /// the occupancy tree of greedy by size, the live gaps of best fit (a
    /// few hundred bytes a buffer each; 2-D problems use neither). A rule
    /// not listed still places any problem, by the walk.
    pub fn reserve_rules(&mut self, buffers: usize, linear: bool, rules: &[GreedyRule]) {
        self.reserve(buffers);
        if linear && rules.contains(&GreedyRule::BySize) {
            self.occupancy.reserve(buffers);
        }
        if linear && rules.contains(&GreedyRule::StartBestFit) {
            self.gaps.reserve(buffers);
        }
    }

    /// Places every buffer of `problem` by `rule` into `out` (indexed like
    /// the buffers; must have exactly one entry per buffer) and returns the
    /// peak.
    pub fn place(&mut self, problem: &Problem, rule: GreedyRule, out: &mut [Placement]) -> u64 {
        let bufs = problem.buffers();
        debug_assert_eq!(out.len(), bufs.len());
        self.order.clear();
        // Lowest fit is what the occupancy tree answers; best fit needs
        // the gaps' sizes, which its merged ranges do not keep.
        let mut tree = rule == GreedyRule::BySize && self.occupancy.build(problem);
        for (i, b) in bufs.iter().enumerate() {
            if let Some(pin) = b.pin {
                out[i] = pin;
                tree = tree && self.occupancy.add(b, pin.offset).is_ok();
            } else if b.is_void() {
                out[i] = Placement {
                    offset: 0,
                    base: problem.legal_bases(b.partitions).next().unwrap_or(0),
                };
            } else {
                self.order.push(i as u32);
            }
        }
        match rule {
            GreedyRule::BySize => self.order.sort_unstable_by(|&x, &y| {
                let (a, b) = (&bufs[x as usize], &bufs[y as usize]);
                b.size
                    .cmp(&a.size)
                    .then((b.upper - b.lower).cmp(&(a.upper - a.lower)))
                    .then(a.lower.cmp(&b.lower))
                    .then(x.cmp(&y))
            }),
            GreedyRule::StartBestFit => self.order.sort_unstable_by(|&x, &y| {
                let (a, b) = (&bufs[x as usize], &bufs[y as usize]);
                a.lower.cmp(&b.lower).then(x.cmp(&y))
            }),
        }
        // Best fit on a linear problem without pins sweeps the live gaps.
        let mut sweep = rule == GreedyRule::StartBestFit
            && !problem.is_partitioned()
            && bufs.iter().all(|b| b.pin.is_none())
            && self.gaps.holds(bufs.len());
        if sweep {
            self.gaps.start(bufs);
        }
        // The walk's index and placed subset, built when the walk first
        // places a buffer (from the pins and the buffers placed before it).
        let mut walking = false;
        for k in 0..self.order.len() {
            let i = self.order[k] as usize;
            let buf = bufs[i];
            let fit = if sweep {
                // Out of room: the walk places the rest.
                let fit = self.gaps.place(bufs, i).ok();
                sweep = fit.is_some();
                fit
            } else if tree {
                self.occupancy.lowest_fit(&buf)
            } else {
                None
            };
            let offset = match fit {
                Some(offset) => {
                    out[i] = Placement { offset, base: 0 };
                    offset
                }
                None => {
                    if !walking {
                        self.start_walk(problem, k);
                        walking = true;
                    }
                    out[i] = self.walk(problem, rule, out, &buf);
                    self.placed.insert(&self.index, i);
                    out[i].offset
                }
            };
            tree = tree && self.occupancy.add(&buf, offset).is_ok();
        }
        super::problem::peak(problem, out)
    }

    /// Builds the walk's index and fills its placed subset with the pins
    /// and the first `placed` buffers of the order.
    fn start_walk(&mut self, problem: &Problem, placed: usize) {
        let bufs = problem.buffers();
        self.index.build(problem);
        self.placed.reset(&self.index, bufs.len());
        for (i, b) in bufs.iter().enumerate() {
            if b.pin.is_some() {
                self.placed.insert(&self.index, i);
            }
        }
        for k in 0..placed {
            self.placed.insert(&self.index, self.order[k] as usize);
        }
    }

    /// `buf`'s placement by `rule` among the placed buffers that share an
    /// instant with it, over every legal base.
    fn walk(
        &mut self,
        problem: &Problem,
        rule: GreedyRule,
        out: &[Placement],
        buf: &Buffer,
    ) -> Placement {
        self.collect_neighbours(problem.buffers(), out, buf);
        let mut best: Option<(u64, u64, u16)> = None; // (key, offset, base)
        for base in problem.legal_bases(buf.partitions) {
            let end = base + buf.partitions;
            self.scratch.clear();
            self.scratch.extend(
                self.near
                    .iter()
                    .filter(|o| o.meets_partitions(base, end))
                    .copied(),
            );
            self.scratch.sort_unstable_by_key(|o| o.offset());
            let (key, offset) = match rule {
                GreedyRule::BySize => {
                    let off = lowest_fit(&self.scratch, buf);
                    (off, off)
                }
                GreedyRule::StartBestFit => best_fit(&self.scratch, buf),
            };
            let better = match best {
                None => true,
                Some((k0, o0, _)) => (key, offset) < (k0, o0),
            };
            if better {
                best = Some((key, offset, base));
            }
        }
        let (_, offset, base) = best.unwrap_or((0, 0, 0));
        Placement { offset, base }
    }

    fn collect_neighbours(&mut self, bufs: &[Buffer], out: &[Placement], buf: &Buffer) {
        self.near.clear();
        let near = &mut self.near;
        self.placed.for_each_overlapping(&self.index, buf, |j| {
            let j = j as usize;
            near.push(Obstacle::of(&bufs[j], out[j]));
        });
    }
}

/// The lowest aligned offset at which `buf` avoids every obstacle (sorted by
/// offset).
fn lowest_fit(sorted: &[Obstacle], buf: &Buffer) -> u64 {
    let mut off = 0;
    for o in sorted {
        if o.offset() >= off + buf.size {
            break;
        }
        if o.top() > off {
            off = align_offset(o.top(), buf.align);
        }
    }
    off
}

/// The best-fitting gap among the obstacles (sorted by offset): the smallest
/// gap that holds the aligned buffer, keyed by its size, or the space above
/// every obstacle (key `u64::MAX`). Returns `(key, offset)`.
fn best_fit(sorted: &[Obstacle], buf: &Buffer) -> (u64, u64) {
    let mut best = (u64::MAX, 0u64);
    let mut free_from = 0u64;
    for o in sorted {
        if o.offset() > free_from {
            let start = align_offset(free_from, buf.align);
            if start + buf.size <= o.offset() {
                let gap = o.offset() - free_from;
                if gap < best.0 {
                    best = (gap, start);
                }
            }
        }
        free_from = free_from.max(o.top());
    }
    if best.0 == u64::MAX {
        best.1 = align_offset(free_from, buf.align);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::problem::Timeline;
    use crate::target::Target;
    use crate::verify::buffers::Validator;

    fn solve(p: &Problem, rule: GreedyRule) -> (Vec<Placement>, u64) {
        let mut ws = GreedyWorkspace::new();
        ws.reserve_for(p);
        let mut out = alloc::vec![Placement::default(); p.len()];
        let peak = ws.place(p, rule, &mut out);
        (out, peak)
    }

    fn assert_legal(p: &Problem, out: &[Placement], capacity: u64) {
        let mut v = Validator::with_capacity(p.len(), 8);
        let r = v.check(p, out, capacity);
        assert_eq!(r.total, 0, "{:?}", v.findings());
    }

    /// The rules as the module doc states them, with the neighbours found by
    /// scanning every placed buffer: the interval index and the placed
    /// subset must not change a single placement.
    fn reference(p: &Problem, rule: GreedyRule) -> Vec<Placement> {
        let bufs = p.buffers();
        let mut out = alloc::vec![Placement::default(); p.len()];
        let mut placed = alloc::vec![false; p.len()];
        let mut order = Vec::new();
        for (i, b) in bufs.iter().enumerate() {
            if let Some(pin) = b.pin {
                out[i] = pin;
                placed[i] = true;
            } else if b.is_void() {
                out[i].base = p.legal_bases(b.partitions).next().unwrap_or(0);
            } else {
                order.push(i);
            }
        }
        let key = |i: usize| {
            let b = &bufs[i];
            match rule {
                GreedyRule::BySize => (
                    u64::MAX - b.size,
                    u64::MAX - (b.upper - b.lower),
                    b.lower,
                    i,
                ),
                GreedyRule::StartBestFit => (b.lower, 0, 0, i),
            }
        };
        order.sort_by_key(|&i| key(i));
        for i in order {
            let b = bufs[i];
            let mut best: Option<(u64, u64, u16)> = None;
            for base in p.legal_bases(b.partitions) {
                let mut near: Vec<Obstacle> = (0..bufs.len())
                    .filter(|&j| placed[j] && !bufs[j].is_void() && bufs[j].overlaps_in_time(&b))
                    .map(|j| Obstacle::of(&bufs[j], out[j]))
                    .filter(|o| o.meets_partitions(base, base + b.partitions))
                    .collect();
                near.sort_by_key(|o| o.offset());
                let (k, off) = match rule {
                    GreedyRule::BySize => {
                        let off = lowest_fit(&near, &b);
                        (off, off)
                    }
                    GreedyRule::StartBestFit => best_fit(&near, &b),
                };
                if best.is_none_or(|(k0, o0, _)| (k, off) < (k0, o0)) {
                    best = Some((k, off, base));
                }
            }
            let (_, offset, base) = best.unwrap();
            out[i] = Placement { offset, base };
            placed[i] = true;
        }
        out
    }

    #[test]
    fn placements_match_the_all_pairs_reference() {
        use crate::gen::dsa::{perfect_packing, trace_like, PerfectPacking, TraceLike};
        let mut p = Problem::linear(u64::MAX / 8, 1500);
        let mut problems = Vec::new();
        for seed in 0..3 {
            trace_like(&TraceLike::new(1500), seed, &mut p).unwrap();
            problems.push(p.clone());
            let mut packing = Vec::new();
            perfect_packing(&PerfectPacking::new(300), seed, &mut p, &mut packing).unwrap();
            problems.push(p.clone());
        }
        // Mixed alignments, no pins: the live-gap sweep of best fit skips
        // the gaps that alignment disqualifies.
        let mut rng = crate::gen::dsa::SplitMix64::new(9);
        let mut aligned = Problem::linear(u64::MAX / 8, 1500);
        for b in problems[0].buffers() {
            aligned
                .push(Buffer {
                    align: 1 << rng.below(7),
                    ..*b
                })
                .unwrap();
        }
        problems.push(aligned);
        // Pins, voids and partitions: every path of the placement loop.
        let t = Target::default();
        let mut q = Problem::partitioned(&t, 1 << 20, 64);
        let mut rng = crate::gen::dsa::SplitMix64::new(5);
        for i in 0..64u64 {
            let lower = rng.below(30);
            q.push(Buffer {
                lower,
                upper: lower + rng.below(8),
                size: 64 * (1 + rng.below(20)),
                align: 64,
                partitions: [16u16, 40, 100, 128][rng.below(4) as usize],
                pin: (i % 17 == 3).then_some(Placement {
                    offset: 64 * 4096 * i,
                    base: 0,
                }),
            })
            .unwrap();
        }
        problems.push(q);
        // Linear, with pins, voids and alignment; nested lifetimes whose
        // aligned ranges never touch, so the occupancy tree runs out of
        // its reserved ranges midway and the walk places the rest.
        let mut nested = Problem::linear(1 << 40, 400);
        for k in 0..400u64 {
            nested
                .push(Buffer {
                    lower: k,
                    upper: if k % 50 == 7 { k } else { 1000 - k },
                    size: 1000 - k,
                    align: 1024,
                    partitions: 1,
                    pin: (k % 61 == 5).then_some(Placement {
                        offset: 1024 * (k + 3),
                        base: 0,
                    }),
                })
                .unwrap();
        }
        let mut occupancy = Occupancy::default();
        occupancy.reserve(nested.len());
        assert!(occupancy.build(&nested));
        let placed = reference(&nested, GreedyRule::BySize);
        let overflows = (0..nested.len()).any(|i| {
            occupancy
                .add(&nested.buffers()[i], placed[i].offset)
                .is_err()
        });
        assert!(overflows, "the nested problem must exhaust the tree");
        problems.push(nested);
        for p in &problems {
            for rule in [GreedyRule::BySize, GreedyRule::StartBestFit] {
                let (out, peak) = solve(p, rule);
                assert_eq!(out, reference(p, rule), "{rule:?}");
                assert_legal(p, &out, peak);
            }
        }
    }

    #[test]
    fn by_size_places_largest_first_at_lowest_offset() {
        let mut p = Problem::linear(100, 4);
        p.push(Buffer::linear(0, 10, 2)).unwrap();
        p.push(Buffer::linear(0, 10, 8)).unwrap();
        p.push(Buffer::linear(10, 20, 5)).unwrap();
        let (out, peak) = solve(&p, GreedyRule::BySize);
        assert_eq!(out[1].offset, 0);
        assert_eq!(out[0].offset, 8);
        assert_eq!(out[2].offset, 0);
        assert_eq!(peak, 10);
        assert_legal(&p, &out, 10);
    }

    #[test]
    fn best_fit_takes_the_smallest_gap() {
        let mut p = Problem::linear(100, 8);
        // Three long-lived buffers leave gaps of 4 and 2 after the middle ones die.
        p.push(Buffer::linear(0, 10, 3)).unwrap(); // 0..3
        p.push(Buffer::linear(0, 2, 4)).unwrap(); // 3..7
        p.push(Buffer::linear(0, 10, 1)).unwrap(); // 7..8
        p.push(Buffer::linear(0, 2, 2)).unwrap(); // 8..10
        p.push(Buffer::linear(0, 10, 1)).unwrap(); // 10..11
        p.push(Buffer::linear(5, 9, 2)).unwrap(); // best fit: the gap of 2 at 8
        let (out, _) = solve(&p, GreedyRule::StartBestFit);
        assert_eq!(out[5].offset, 8);
        assert_legal(&p, &out, 11);
    }

    #[test]
    fn both_rules_respect_alignment_pins_and_partitions() {
        let t = Target::default();
        let mut p = Problem::partitioned(&t, 1 << 20, 16);
        for i in 0..12u64 {
            p.push(Buffer {
                lower: i % 3,
                upper: 5 + i % 4,
                size: 100 + 13 * i,
                align: 64,
                partitions: [16u16, 40, 100, 128][(i % 4) as usize],
                pin: (i == 5).then_some(Placement {
                    offset: 128,
                    base: 64,
                }),
            })
            .unwrap();
        }
        let lb = p.lower_bound(&mut Timeline::default()).bytes;
        for rule in [GreedyRule::BySize, GreedyRule::StartBestFit] {
            let (out, peak) = solve(&p, rule);
            assert!(peak >= lb);
            assert_eq!(
                out[5],
                Placement {
                    offset: 128,
                    base: 64
                }
            );
            assert_legal(&p, &out, peak);
        }
    }
}
