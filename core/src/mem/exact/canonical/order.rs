//! The static preorders of the canonical search, and the ranks they give
//! the buffers of a piece.
//!
//! # Orders
//! The rank breaks ties between equal offsets. It is a static preorder on
//! properties of the problem that do not change when an instance is
//! mirrored in time, its rows shuffled, its ids renamed or its sizes and
//! times scaled: lifetime length, area, and the largest total live area
//! over the buffer's sections (the contention it is part of), in three
//! priority orders. The portfolio runs them in turn with doubling node
//! limits; each alone is complete, so the portfolio is too. Ranks stay
//! distinct, and identical buffers keep index order (the twin rule).

use crate::mem::exact::ExactWorkspace;
use crate::mem::problem::Problem;

/// A static preorder: the priority of three structural keys (all compared
/// larger first).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Preorder {
    /// Lifetime length, then area, then contention.
    #[default]
    LifetimeAreaContention,
    /// Contention, then area, then lifetime length.
    ContentionAreaLifetime,
    /// Contention, then lifetime length, then area.
    ContentionLifetimeArea,
}

/// The preorders the portfolio cycles through.
pub const PREORDERS: [Preorder; 3] = [
    Preorder::LifetimeAreaContention,
    Preorder::ContentionAreaLifetime,
    Preorder::ContentionLifetimeArea,
];

/// The keys of one buffer in a preorder.
#[derive(Copy, Clone, Debug, Default)]
pub(in crate::mem::exact) struct RankKey {
    k1: u128,
    k2: u128,
    k3: u128,
    size: u64,
    parts: u16,
    edge: u64,
}

impl ExactWorkspace {
    /// Ranks the buffers of the piece `[lo, hi)` by the attempt's
    /// preorder, with the contention (largest unplaced area over a
    /// buffer's sections) of the current state: once a piece is cut off,
    /// its own sections decide. Ties: size, partitions, the distance of the
    /// lifetime from the nearer end of the timeline (all unchanged by the
    /// transforms of the module doc), then index, so that identical buffers
    /// keep index order as the twin rule requires. The piece's buffers take
    /// the ranks they held, reordered, so ranks stay distinct; the old ones
    /// are trailed. Without trail room the piece keeps its ranks (any fixed
    /// order is complete).
    pub(super) fn rank_piece(&mut self, problem: &Problem, lo: usize, hi: usize) {
        let bufs = problem.buffers();
        self.canon.piece_bufs.clear();
        for i in self.start_at[lo] as usize..self.start_at[hi] as usize {
            let o = self.starting[i] as usize;
            let b = self.opts[o].buffer as usize;
            if !self.placed[b] && o == self.opt_at[b] as usize {
                self.canon.piece_bufs.push(b as u32);
            }
        }
        let m = self.canon.piece_bufs.len();
        if self.canon.rtrail.len() + m > self.canon.rtrail.capacity() {
            return;
        }
        let times = self.timeline.times();
        let (t0, t1) = (
            times.first().copied().unwrap_or(0),
            times.last().copied().unwrap_or(0),
        );
        self.canon.piece_ranks.clear();
        for &b in &self.canon.piece_bufs {
            let b = b as usize;
            let buf = &bufs[b];
            let life = buf.upper.saturating_sub(buf.lower) as u128;
            let area = buf.size.saturating_mul(buf.partitions as u64) as u128;
            let mut contention = 0u64;
            for s in self.sec_lo[b]..self.sec_hi[b] {
                contention = contention.max(self.remaining[s as usize]);
            }
            let contention = contention as u128;
            let life_area = area.saturating_mul(life);
            let (k1, k2, k3) = match self.canon.preorder {
                Preorder::LifetimeAreaContention => (life, life_area, contention),
                Preorder::ContentionAreaLifetime => (contention, life_area, life),
                Preorder::ContentionLifetimeArea => (contention, life, life_area),
            };
            self.canon.keys[b] = RankKey {
                k1,
                k2,
                k3,
                size: buf.size,
                parts: buf.partitions,
                edge: buf
                    .lower
                    .saturating_sub(t0)
                    .min(t1.saturating_sub(buf.upper)),
            };
            self.canon.rtrail.push((b as u32, self.canon.rank[b]));
            self.canon.piece_ranks.push(self.canon.rank[b]);
        }
        self.canon.piece_ranks.sort_unstable();
        let keys = &self.canon.keys;
        self.canon.piece_bufs.sort_unstable_by(|&x, &y| {
            let (a, b) = (&keys[x as usize], &keys[y as usize]);
            (b.k1, b.k2, b.k3, b.size, b.parts)
                .cmp(&(a.k1, a.k2, a.k3, a.size, a.parts))
                .then(a.edge.cmp(&b.edge))
                .then(x.cmp(&y))
        });
        for (i, &b) in self.canon.piece_bufs.iter().enumerate() {
            self.canon.rank[b as usize] = self.canon.piece_ranks[i];
        }
    }

    /// Restores the ranks to `mark`.
    pub(super) fn restore_ranks(&mut self, mark: u32) {
        while self.canon.rtrail.len() > mark as usize {
            if let Some((b, r)) = self.canon.rtrail.pop() {
                self.canon.rank[b as usize] = r;
            }
        }
    }
}
