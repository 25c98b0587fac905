//! Tests of the exact search: every strategy against exhaustive
//! enumeration on small instances, pins, perfect packings, dressed
//! instances, and the size and node limits. Every answer goes through the
//! independent verifier.

use super::*;
use crate::gen::dsa::SplitMix64;
use crate::mem::problem::{peak, Buffer, Placement, Problem};
use crate::target::Target;
use crate::verify::buffers::Validator;
use alloc::vec;
use alloc::vec::Vec;

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
fn pinned_buffers_take_no_branch_stack_and_the_search_still_proves_the_rest() {
    // Half of each packing pinned where the generator put it: the search
    // branches on the other half only, so it needs smaller stacks, and
    // storage sized that way (once for both problems, by the larger
    // count of each table) still lets it fit both at the bound.
    use crate::gen::dsa::{perfect_packing, PerfectPacking};
    for seed in 0..10 {
        let mut free = Problem::linear(0, 60);
        let mut known = Vec::new();
        perfect_packing(&PerfectPacking::new(60), seed, &mut free, &mut known).unwrap();
        let mut half = Problem::linear(free.capacity, free.len());
        for (i, (b, at)) in free.buffers().iter().zip(&known).enumerate() {
            let pin = (i % 2 == 0).then_some(*at);
            half.push(Buffer { pin, ..*b }).unwrap();
        }
        let mut ws = ExactWorkspace::new();
        let (a, b) = (ws.search_sizes(&free), ws.search_sizes(&half));
        assert!(
            b.storage().stacks < a.storage().stacks,
            "seed {seed}: {:?} pinned vs {:?} free",
            b.storage(),
            a.storage()
        );
        assert_eq!(b.storage().fixed, a.storage().fixed, "seed {seed}");
        // Reserved for the pinned problem alone, then for both.
        for (sizes, problems) in [(b, &[&half][..]), (a.max(b), &[&half, &free][..])] {
            ws.reserve_sizes_within(&sizes, u64::MAX);
            let before = ws.heap_bytes();
            for &p in problems {
                let mut out = vec![Placement::default(); p.len()];
                let opts = ExactOptions {
                    objective: Objective::Fit,
                    ..ExactOptions::default()
                };
                let o = ws.solve(p, &opts, &mut NoClock, &mut out);
                assert_eq!(o.status, Status::Optimal, "seed {seed}: {o:?}");
                assert_eq!(o.peak, p.capacity, "seed {seed}");
                let mut v = Validator::with_capacity(p.len(), 4);
                assert_eq!(v.check(p, &out, p.capacity).total, 0, "seed {seed}");
                assert_eq!(ws.heap_bytes(), before, "seed {seed}: the solve allocated");
            }
        }
    }
}

#[test]
fn dressing_an_instance_does_not_change_the_effort_much() {
    // The orders depend on the structure only: a mirrored, shuffled or
    // scaled instance takes comparable effort. Summed over instances
    // (single ones are heavy-tailed), each dress stays within a small
    // factor of the instances as given, and every answer is the same.
    use crate::gen::dsa::{perfect_packing, Dress, PerfectPacking};
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
            d.apply(&p, &mut q, &mut from).unwrap();
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

#[test]
fn raised_capacities_reach_the_bound_of_a_packing_the_greedy_misses() {
    use crate::gen::dsa::{perfect_packing, PerfectPacking};
    use crate::mem::greedy::{GreedyRule, GreedyWorkspace};
    let mut p = Problem::linear(0, 120);
    let mut known = Vec::new();
    perfect_packing(&PerfectPacking::new(120), 3, &mut p, &mut known).unwrap();
    let lb = p.capacity;
    // A capacity below the bound: nothing fits there.
    p.capacity = lb - 1;
    let mut g = GreedyWorkspace::new();
    g.reserve(p.len());
    let mut best = vec![Placement::default(); p.len()];
    let greedy = g.place(&p, GreedyRule::BySize, &mut best);
    assert!(greedy > lb, "the greedy rule packs this one perfectly");
    let mut ws = ExactWorkspace::new();
    ws.reserve_for(&p);
    let mut trial = vec![Placement::default(); p.len()];
    let slice = Budget {
        nodes: Some(20_000),
        micros: None,
    };
    let r = ws.raise(&mut p, lb, 8, slice, &mut NoClock, &mut best, &mut trial);
    assert_eq!(p.capacity, lb - 1, "the capacity is restored");
    assert_eq!((r.before, r.peak), (greedy, lb));
    assert!(r.steps >= 1 && r.steps <= 8);
    assert_eq!(peak(&p, &best), lb);
    let mut v = Validator::with_capacity(p.len(), 4);
    assert_eq!(v.check(&p, &best, u64::MAX).total, 0);
}
