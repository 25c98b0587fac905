//! Generators of buffer-placement problems: perfect packings (below) and
//! trace-like instances ([`trace_like`]).
//!
//! # Perfect packings
//!
//! A capacity × horizon rectangle (bytes × time) is cut by random guillotine
//! cuts into pieces; each piece becomes a buffer (its time extent is the
//! lifetime, its byte extent the size). Every instant is covered exactly, so
//! the lower bound equals the capacity, and the cutting itself is a packing
//! at the capacity: a solver must find a placement with zero waste. The
//! buffers are shuffled so their order tells nothing about the packing.
//!
//! Deterministic: the same parameters and seed give the same problem on every
//! platform ([`SplitMix64`]).

use alloc::vec::Vec;

use crate::mem::problem::{Buffer, Placement, Problem, ProblemError};

pub use crate::rng::SplitMix64;

/// Parameters of a perfect-packing instance.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PerfectPacking {
    /// Buffers to cut (fewer when pieces become too small to cut).
    pub buffers: usize,
    /// Bytes: the capacity and the lower bound of the instance.
    pub capacity: u64,
    /// Time units of the rectangle.
    pub horizon: u64,
    /// Sizes are multiples of this and buffers are aligned to it.
    pub unit: u64,
}

impl PerfectPacking {
    /// `buffers` pieces of a 1 MiB × 1,048,576 rectangle, 64-byte units.
    pub const fn new(buffers: usize) -> PerfectPacking {
        PerfectPacking {
            buffers,
            capacity: 1 << 20,
            horizon: 1 << 20,
            unit: 64,
        }
    }
}

/// A piece of the rectangle: times `[t0, t1)`, bytes `[a0, a1)`.
#[derive(Copy, Clone, Debug)]
struct Piece {
    t0: u64,
    t1: u64,
    a0: u64,
    a1: u64,
}

/// Fills `problem` (a linear problem, cleared first) with a perfect-packing
/// instance and `packing` with the known placement, one per buffer.
pub fn perfect_packing(
    params: &PerfectPacking,
    seed: u64,
    problem: &mut Problem,
    packing: &mut Vec<Placement>,
) -> Result<(), ProblemError> {
    let mut rng = SplitMix64::new(seed ^ 0x7A5C_0FFE_E000_0001);
    let unit = params.unit.max(1);
    let slots = (params.capacity / unit).max(1);
    let mut pieces: Vec<Piece> = Vec::with_capacity(params.buffers.max(1));
    pieces.push(Piece {
        t0: 0,
        t1: params.horizon.max(1),
        a0: 0,
        a1: slots,
    });
    let mut misses = 0;
    while pieces.len() < params.buffers && misses < 64 * params.buffers + 64 {
        // The larger (relative area) of two random pieces is cut.
        let i = rng.below(pieces.len() as u64) as usize;
        let j = rng.below(pieces.len() as u64) as usize;
        let rel = |p: &Piece| (p.t1 - p.t0) as u128 * slots as u128 + (p.a1 - p.a0) as u128;
        let k = if rel(&pieces[j]) > rel(&pieces[i]) {
            j
        } else {
            i
        };
        let p = pieces[k];
        let (dt, da) = (p.t1 - p.t0, p.a1 - p.a0);
        // Cut across the longer relative extent, sometimes the other one.
        let time_cut = {
            let rt = dt as u128 * slots as u128;
            let ra = da as u128 * params.horizon.max(1) as u128;
            (rt >= ra) ^ (rng.below(4) == 0)
        };
        let (lo, hi) = if time_cut { (p.t0, p.t1) } else { (p.a0, p.a1) };
        if hi - lo < 2 {
            misses += 1;
            continue;
        }
        let cut = lo + 1 + rng.below(hi - lo - 1);
        let (a, b) = if time_cut {
            (Piece { t1: cut, ..p }, Piece { t0: cut, ..p })
        } else {
            (Piece { a1: cut, ..p }, Piece { a0: cut, ..p })
        };
        pieces[k] = a;
        pieces.push(b);
    }
    // Shuffle (Fisher–Yates).
    for i in (1..pieces.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        pieces.swap(i, j);
    }
    problem.clear();
    problem.capacity = slots * unit;
    packing.clear();
    for p in &pieces {
        problem.push(Buffer {
            lower: p.t0,
            upper: p.t1,
            size: (p.a1 - p.a0) * unit,
            align: unit,
            partitions: 1,
            pin: None,
        })?;
        packing.push(Placement {
            offset: p.a0 * unit,
            base: 0,
        });
    }
    Ok(())
}

/// Parameters of a trace-like instance: the structure of ML-compiler
/// lifetime traces, many short-lived small buffers and a few huge
/// long-lived ones.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceLike {
    /// Buffers.
    pub buffers: usize,
    /// Buffers starting per time step on average (how many are live at
    /// once: about this times the median lifetime, plus the long ones).
    pub per_step: usize,
    /// One buffer in this many is huge and long-lived.
    pub huge_every: u64,
}

impl TraceLike {
    /// `buffers` buffers, 32 starting per step, one in 200 huge.
    pub const fn new(buffers: usize) -> TraceLike {
        TraceLike {
            buffers,
            per_step: 32,
            huge_every: 200,
        }
    }
}

/// Fills `problem` (a linear problem, cleared first; capacity left as is)
/// with a trace-like instance: small buffers (16 B to 256 KiB, log-uniform)
/// living 1 to 10 steps (median 5), one in twenty of them up to a tenth of
/// the horizon; huge ones (1 to 16 MiB) living a tenth to a half of it.
pub fn trace_like(
    params: &TraceLike,
    seed: u64,
    problem: &mut Problem,
) -> Result<(), ProblemError> {
    let mut rng = SplitMix64::new(seed ^ 0x00DD_BA11_7ACE_0002);
    let steps = (params.buffers / params.per_step.max(1)).max(16) as u64;
    problem.clear();
    for _ in 0..params.buffers {
        let lower = rng.below(steps);
        let (size, life) = if rng.below(params.huge_every.max(1)) == 0 {
            let size = (1u64 << 20) << rng.below(5);
            (
                size + 64 * rng.below(1 << 12),
                steps / 10 + rng.below(steps * 2 / 5 + 1),
            )
        } else {
            let size = 16u64 << rng.below(15);
            let size = size + rng.below(size);
            let life = if rng.below(20) == 0 {
                1 + rng.below(steps / 10 + 1)
            } else {
                1 + rng.below(10)
            };
            (size, life)
        };
        problem.push(Buffer {
            lower,
            upper: lower + life.max(1),
            size,
            align: 1,
            partitions: 1,
            pin: None,
        })?;
    }
    Ok(())
}

/// A way to dress an instance without changing it: the placements of the
/// dressed copy map one to one onto the original's, with the same peak over
/// the scale.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Dress {
    /// Time runs backwards: `[T - upper, T - lower)`.
    Mirror,
    /// The buffers in a seeded random order (renaming them: a problem's
    /// buffers are named by their index).
    Shuffle(u64),
    /// Sizes, alignments and the capacity times the factor, and times too.
    Scale(u64),
}

impl Dress {
    /// Writes `problem` dressed this way into `out` (cleared first; a linear
    /// problem with room for the buffers). Returns, for each buffer of `out`,
    /// its index in `problem`.
    pub fn apply(
        self,
        problem: &Problem,
        out: &mut Problem,
        from: &mut Vec<u32>,
    ) -> Result<(), ProblemError> {
        let dress = self;
        let bufs = problem.buffers();
        let horizon = bufs.iter().map(|b| b.upper).max().unwrap_or(0);
        from.clear();
        from.extend(0..bufs.len() as u32);
        if let Dress::Shuffle(seed) = dress {
            let mut rng = SplitMix64::new(seed);
            for i in (1..from.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                from.swap(i, j);
            }
        }
        out.clear();
        out.capacity = match dress {
            Dress::Scale(k) => problem.capacity.saturating_mul(k),
            _ => problem.capacity,
        };
        for &i in from.iter() {
            let b = bufs[i as usize];
            let b = match dress {
                Dress::Mirror => Buffer {
                    lower: horizon - b.upper,
                    upper: horizon - b.lower,
                    ..b
                },
                Dress::Shuffle(_) => b,
                Dress::Scale(k) => Buffer {
                    lower: b.lower * k,
                    upper: b.upper * k,
                    size: b.size * k,
                    align: b.align * k,
                    pin: b.pin.map(|p| Placement {
                        offset: p.offset * k,
                        ..p
                    }),
                    ..b
                },
            };
            out.push(b)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::problem::Timeline;
    use crate::verify::buffers::Validator;

    #[test]
    fn packing_is_perfect_and_legal() {
        for seed in 0..5 {
            let params = PerfectPacking::new(200);
            let mut p = Problem::linear(0, 200);
            let mut sol = Vec::new();
            perfect_packing(&params, seed, &mut p, &mut sol).unwrap();
            assert_eq!(p.len(), 200);
            let lb = p.lower_bound(&mut Timeline::default()).bytes;
            assert_eq!(lb, p.capacity);
            let mut v = Validator::with_capacity(p.len(), 4);
            assert_eq!(v.check(&p, &sol, p.capacity).total, 0);
        }
    }

    #[test]
    fn trace_like_has_many_small_short_and_few_huge_long_buffers() {
        let mut p = Problem::linear(0, 4000);
        trace_like(&TraceLike::new(4000), 1, &mut p).unwrap();
        let bufs = p.buffers();
        let huge = bufs.iter().filter(|b| b.size >= 1 << 20).count();
        let short = bufs.iter().filter(|b| b.upper - b.lower <= 10).count();
        assert!((5..60).contains(&huge), "{huge} huge buffers");
        assert!(short > 3000, "{short} short-lived buffers");
        let mut q = Problem::linear(0, 4000);
        trace_like(&TraceLike::new(4000), 1, &mut q).unwrap();
        assert_eq!(p.buffers(), q.buffers());
    }

    #[test]
    fn same_seed_same_instance() {
        let params = PerfectPacking::new(50);
        let (mut p, mut q) = (Problem::linear(0, 50), Problem::linear(0, 50));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        perfect_packing(&params, 7, &mut p, &mut a).unwrap();
        perfect_packing(&params, 7, &mut q, &mut b).unwrap();
        assert_eq!(p.buffers(), q.buffers());
        perfect_packing(&params, 8, &mut q, &mut b).unwrap();
        assert_ne!(p.buffers(), q.buffers());
    }
}
