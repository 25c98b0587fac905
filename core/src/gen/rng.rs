//! A small deterministic random number generator: xoshiro256** seeded
//! through splitmix64, so that every seed (including 0) gives a well-mixed
//! state. Written here rather than taken from a crate so that generated
//! workloads never change with a dependency update.

/// One step of splitmix64: a bijective mixer used to expand a seed.
pub use crate::rng::splitmix64;

/// xoshiro256** (Blackman and Vigna): 256 bits of state, period 2^256 − 1.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose state is expanded from `seed` by splitmix64. The
    /// state is never all zero (splitmix64 is a bijection of a counter, so
    /// four consecutive outputs are never all zero).
    pub const fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A value in `0..n` (0 when `n == 0`), by the multiply-high reduction
    /// (bias below 2^-32 for the small ranges used here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A value in `lo..=hi` (`lo` when `hi <= lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `pct` / 100.
    pub fn percent(&mut self, pct: u8) -> bool {
        self.below(100) < pct as u64
    }

    /// An index into `weights` chosen with probability proportional to its
    /// weight; 0 when every weight is zero.
    pub fn weighted(&mut self, weights: &[u8]) -> usize {
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        if total == 0 {
            return 0;
        }
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < w as u64 {
                return i;
            }
            x -= w as u64;
        }
        weights.len() - 1
    }

    /// One of the items of a non-empty slice, uniformly.
    pub fn pick<T: Copy>(&mut self, items: &[T], fallback: T) -> T {
        items
            .get(self.below(items.len() as u64) as usize)
            .copied()
            .unwrap_or(fallback)
    }

    /// A generator for a sub-stream: deterministic in this generator's next
    /// output, independent of how much the child later draws.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_ranges_hold() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let mut differs = false;
        for _ in 0..1000 {
            let x = a.next_u64();
            assert_eq!(x, b.next_u64());
            differs |= x != c.next_u64();
            let r = a.range(3, 9);
            b.range(3, 9);
            assert!((3..=9).contains(&r));
        }
        assert!(differs);
        assert_eq!(a.range(5, 5), 5);
        assert_eq!(a.below(0), 0);
    }

    #[test]
    fn weighted_respects_zero_weights() {
        let mut r = Rng::new(7);
        let mut seen = [0u32; 3];
        for _ in 0..3000 {
            seen[r.weighted(&[1, 0, 3])] += 1;
        }
        assert_eq!(seen[1], 0);
        assert!(seen[2] > seen[0]);
        assert_eq!(r.weighted(&[0, 0]), 0);
    }
}
