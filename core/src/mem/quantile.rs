//! Streaming quantiles with the P² algorithm (Jain & Chlamtac, 1985).
//!
//! The best-fit manager reports how fragmented its free space was: the
//! distribution of the sizes of the free blocks it created. Keeping every size
//! would cost memory proportional to the run; P² keeps five markers per
//! quantile and adjusts their heights with a piecewise-parabolic formula, so a
//! [`P2Quantile`] is a fixed 120 bytes and `add` never allocates. The
//! reference keeps two `p_square_cumulative_distribution` accumulators for the
//! same purpose.
//!
//! Invariant: after five observations the marker heights are non-decreasing
//! and the marker positions strictly increasing.

/// One streaming quantile estimate.
#[derive(Clone, Copy, Debug)]
pub struct P2Quantile {
    p: f64,
    heights: [f64; 5],
    pos: [f64; 5],
    desired: [f64; 5],
    step: [f64; 5],
    count: u64,
}

impl P2Quantile {
    /// An estimator of the `p` quantile (`0 < p < 1`; clamped).
    pub const fn new(p: f64) -> Self {
        let p = if p < 0.001 {
            0.001
        } else if p > 0.999 {
            0.999
        } else {
            p
        };
        P2Quantile {
            p,
            heights: [0.0; 5],
            pos: [1.0, 2.0, 3.0, 4.0, 5.0],
            desired: [1.0, 1.0 + 2.0 * p, 1.0 + 4.0 * p, 3.0 + 2.0 * p, 5.0],
            step: [0.0, p / 2.0, p, (1.0 + p) / 2.0, 1.0],
            count: 0,
        }
    }

    /// Observations so far.
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// Adds one observation.
    pub fn add(&mut self, x: f64) {
        if self.count < 5 {
            self.heights[self.count as usize] = x;
            self.count += 1;
            if self.count == 5 {
                // Insertion sort of the first five.
                for i in 1..5 {
                    let mut j = i;
                    while j > 0 && self.heights[j - 1] > self.heights[j] {
                        self.heights.swap(j - 1, j);
                        j -= 1;
                    }
                }
            }
            return;
        }
        self.count += 1;
        let q = &mut self.heights;
        let k = if x < q[0] {
            q[0] = x;
            0
        } else if x >= q[4] {
            q[4] = x;
            3
        } else {
            let mut k = 0;
            while k < 3 && x >= q[k + 1] {
                k += 1;
            }
            k
        };
        for i in k + 1..5 {
            self.pos[i] += 1.0;
        }
        for i in 0..5 {
            self.desired[i] += self.step[i];
        }
        for i in 1..4 {
            let d = self.desired[i] - self.pos[i];
            let up = self.pos[i + 1] - self.pos[i];
            let down = self.pos[i - 1] - self.pos[i];
            if (d >= 1.0 && up > 1.0) || (d <= -1.0 && down < -1.0) {
                let s = if d >= 0.0 { 1.0 } else { -1.0 };
                let (n0, n1, n2) = (self.pos[i - 1], self.pos[i], self.pos[i + 1]);
                let (q0, q1, q2) = (q[i - 1], q[i], q[i + 1]);
                let parabolic = q1
                    + s / (n2 - n0)
                        * ((n1 - n0 + s) * (q2 - q1) / (n2 - n1)
                            + (n2 - n1 - s) * (q1 - q0) / (n1 - n0));
                q[i] = if q0 < parabolic && parabolic < q2 {
                    parabolic
                } else {
                    // Linear prediction toward the neighbour in direction s.
                    let j = if s > 0.0 { i + 1 } else { i - 1 };
                    q1 + s * (q[j] - q1) / (self.pos[j] - n1)
                };
                self.pos[i] += s;
            }
        }
    }

    /// The current estimate (exact for fewer than six observations;
    /// 0 with none).
    pub fn estimate(&self) -> f64 {
        match self.count {
            0 => 0.0,
            n if n < 5 => {
                let mut v = [0.0f64; 5];
                let n = n as usize;
                v[..n].copy_from_slice(&self.heights[..n]);
                for i in 1..n {
                    let mut j = i;
                    while j > 0 && v[j - 1] > v[j] {
                        v.swap(j - 1, j);
                        j -= 1;
                    }
                }
                let idx = (self.p * (n - 1) as f64 + 0.5) as usize;
                v[idx.min(n - 1)]
            }
            5 => {
                let idx = (self.p * 4.0 + 0.5) as usize;
                self.heights[idx.min(4)]
            }
            _ => self.heights[2],
        }
    }
}

/// The fragmentation quantiles the manager reports: median, 90th and 99th
/// percentile of free-block sizes.
#[derive(Clone, Copy, Debug)]
pub struct FreeBlockQuantiles {
    /// 50th percentile.
    pub p50: P2Quantile,
    /// 90th percentile.
    pub p90: P2Quantile,
    /// 99th percentile.
    pub p99: P2Quantile,
}

impl Default for FreeBlockQuantiles {
    fn default() -> Self {
        FreeBlockQuantiles {
            p50: P2Quantile::new(0.5),
            p90: P2Quantile::new(0.9),
            p99: P2Quantile::new(0.99),
        }
    }
}

impl FreeBlockQuantiles {
    /// Records the size of one free block.
    pub fn add(&mut self, size: u64) {
        let x = size as f64;
        self.p50.add(x);
        self.p90.add(x);
        self.p99.add(x);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// `(count, p50, p90, p99)` rounded to whole bytes.
    pub fn summary(&self) -> FragmentationSummary {
        FragmentationSummary {
            samples: self.p50.count(),
            p50: self.p50.estimate().max(0.0) as u64,
            p90: self.p90.estimate().max(0.0) as u64,
            p99: self.p99.estimate().max(0.0) as u64,
        }
    }
}

/// Free-block size quantiles as reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragmentationSummary {
    /// Free blocks observed.
    pub samples: u64,
    /// Median free-block size (bytes).
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_for_few_observations() {
        let mut q = P2Quantile::new(0.5);
        assert_eq!(q.estimate(), 0.0);
        for x in [5.0, 1.0, 3.0] {
            q.add(x);
        }
        assert_eq!(q.estimate(), 3.0);
    }

    #[test]
    fn tracks_uniform_quantiles() {
        // A deterministic permutation of 0..10000 (multiplicative hash).
        let mut f = FreeBlockQuantiles::default();
        let n = 10_000u64;
        for i in 0..n {
            f.add((i * 7919) % n);
        }
        let s = f.summary();
        assert_eq!(s.samples, n);
        let close = |got: u64, want: u64| got.abs_diff(want) < n / 50;
        assert!(close(s.p50, 5000), "{s:?}");
        assert!(close(s.p90, 9000), "{s:?}");
        assert!(close(s.p99, 9900), "{s:?}");
    }
}
