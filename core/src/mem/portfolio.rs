//! The 1-D buffer problem (`tusk dsa --algo lsa`): the linear scan's
//! best-fit manager on one flat line, run as a *portfolio* of linear scans
//! of which the lowest peak is kept.
//!
//! Here the whole problem is known before the scan (unlike the pipeline's
//! scan, [`super::lsa`], which rewrites the module as it goes), so the scan
//! can be rerun. Every member is still a linear scan (buffers in time
//! order, an active set, best fit into the manager's free space); they
//! differ in the offline knowledge they use ([`ScanVariant`]): time
//! mirrored (the problem is symmetric in time), a reservation of the bottom
//! for a larger buffer that starts while the new one lives, a hole score
//! that prefers neighbours outliving the new buffer
//! ([`Policy::outliving_first`]), and the open end's side in the
//! capacity-tightening rescans. Each member also rescans with the line
//! capped (binary search on the peak). A work budget ([`WORK_BUDGET`]
//! placements) bounds the portfolio, so its cost stays linear in the
//! number of buffers; with `tighten_rounds = 0` a call is exactly one scan
//! (the throughput configuration).
//!
//! Buffers are [`problem::Buffer`](super::problem::Buffer)s of linear mode:
//! one partition, no pin (others are refused with
//! [`BufferError::Unsupported`]); an alignment of 0 counts as 1.
//! Deterministic: no randomness, a fixed order.

use alloc::vec::Vec;
use core::fmt;

use alloc::collections::BinaryHeap;
use core::cmp::Reverse;

use super::best_fit::{
    BestFitMemoryManager, FlatHint, ManagerError, Policy, Request, FLAT_FRAGMENTATION_SAMPLING,
};
use super::problem::{display_by_index, Buffer, BufferNames, NamedDisplay};
use super::quantile::FragmentationSummary;

/// What [`place_buffers`] found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BufferOutcome {
    /// Highest `offset + size`.
    pub peak: u64,
    /// Max over time of the live bytes: no placement has a lower peak.
    pub lower_bound: u64,
    /// `peak <= capacity`.
    pub fits: bool,
    /// Scans run, over every variant (each: 1 plus the tightening rounds
    /// that were tried).
    pub rounds: u32,
    /// Portfolio variants run ([`BufferWorkspace::variants_for`]).
    pub variants: u32,
    /// Free-hole size quantiles of the scan that found the placement
    /// (every [`FLAT_FRAGMENTATION_SAMPLING`]-th freed hole).
    pub fragmentation: FragmentationSummary,
}

/// Why the buffers could not be placed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BufferError {
    /// `offsets` is shorter than `buffers`, or the workspace is too small.
    Shape {
        /// What.
        what: &'static str,
    },
    /// A buffer with `upper <= lower` or zero size.
    Empty {
        /// Its index.
        index: usize,
    },
    /// A pinned or multi-partition buffer: the portfolio places unpinned
    /// buffers on one flat line.
    Unsupported {
        /// Its index.
        index: usize,
        /// What it has.
        what: &'static str,
    },
    /// A portfolio code that names no [`ScanVariant`].
    VariantCode {
        /// The code.
        code: u8,
    },
    /// The manager refused.
    Manager(ManagerError),
}

impl NamedDisplay for BufferError {
    fn write_named(&self, names: &dyn BufferNames, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferError::Shape { what } => write!(f, "buffer placement: {what}"),
            BufferError::Empty { index } => {
                names.write_name(*index, f)?;
                f.write_str(" is empty: it needs lower < upper and a non-zero size")
            }
            BufferError::Unsupported { index, what } => {
                names.write_name(*index, f)?;
                write!(
                    f,
                    " is {what}: the linear-scan portfolio places unpinned buffers on one flat line"
                )
            }
            BufferError::VariantCode { code } => write!(
                f,
                "portfolio code {code} names no scan variant (codes are 0 to {})",
                PORTFOLIO_LEN - 1
            ),
            BufferError::Manager(e) => write!(f, "buffer placement: {e}"),
        }
    }
}

display_by_index!(BufferError);

impl From<ManagerError> for BufferError {
    fn from(e: ManagerError) -> Self {
        BufferError::Manager(e)
    }
}

/// Where a scan puts a buffer that goes to the open end of a capped line
/// (the tightening rescans; the first scan's line is unbounded, so its open
/// end has no right end to use).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpenEnd {
    /// Always its left end (the lowest free offset above the last block).
    Left,
    /// The right end (against the cap) for buffers live over more than 2/5
    /// of the horizon: they gather at the top, out of the way of the
    /// short-lived traffic below.
    LongLived,
    /// The right end for buffers smaller than half the lower bound: the
    /// large ones keep the bottom.
    Small,
}

/// One scan configuration of the portfolio of [`place_buffers`]. Every one
/// is a linear scan (intervals in time order, an active set, best fit in the
/// manager's free space); they differ in what offline knowledge they use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ScanVariant {
    /// Scan the mirrored problem (time runs backwards: `[T - upper,
    /// T - lower)`). The overlaps are the same, so a placement of the
    /// mirror is a placement of the original; the scan's choices differ.
    pub reverse: bool,
    /// Reservation factor `k` (0: none). A buffer `b` during whose life a
    /// buffer of size `R > k × size(b)` starts (`R` the largest such) is
    /// placed at an offset `>= R` when a hole allows it: the bottom stays
    /// free for the larger buffer that is coming. Dropped for `b` when no
    /// hole satisfies it.
    pub reserve: u8,
    /// [`Policy::outliving_first`] for this scan.
    pub outliving_first: bool,
    /// Open-end side in the capped rescans.
    pub open_end: OpenEnd,
}

impl TryFrom<u8> for ScanVariant {
    type Error = BufferError;

    /// The variant of a portfolio code `reverse·18 + reserve·6 +
    /// outliving·3 + open_end`: the cross product {forward, reverse} ×
    /// reserve {0, 1, 2} × {closest death, outliving first} × {left,
    /// long-lived, small}. Code 0 is the plainest scan (forward, no
    /// reservation, closest death, left). A code of [`PORTFOLIO_LEN`] or
    /// more is [`BufferError::VariantCode`].
    fn try_from(code: u8) -> Result<ScanVariant, BufferError> {
        if code as usize >= PORTFOLIO_LEN {
            return Err(BufferError::VariantCode { code });
        }
        let code = code as usize;
        Ok(ScanVariant {
            reverse: code / 18 == 1,
            reserve: ((code / 6) % 3) as u8,
            outliving_first: (code / 3) % 2 == 1,
            open_end: match code % 3 {
                0 => OpenEnd::Left,
                1 => OpenEnd::LongLived,
                _ => OpenEnd::Small,
            },
        })
    }
}

/// Variants in the portfolio.
pub const PORTFOLIO_LEN: usize = 36;

/// The portfolio's order, as [`ScanVariant`] codes: code 3
/// (forward, no reservation, outliving first, left open end) first, since
/// it needs no precomputation (no mirror, no reservations) and is the one
/// scan large inputs get; then every other code in code order, so that a
/// work budget that cuts the portfolio short keeps the variants that
/// differ least from the first one's cost.
pub const PORTFOLIO_ORDER: [u8; PORTFOLIO_LEN] = [
    3, 0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
    26, 27, 28, 29, 30, 31, 32, 33, 34, 35,
];

/// Default work budget of [`place_buffers`]: buffer placements over the
/// whole portfolio (each variant costs `n × (1 + tighten_rounds)`). With
/// 12 tightening rounds, inputs up to ~2,000 buffers get all 36 variants,
/// 10k about 8, and from ~80k buffers on one variant (one scan plus its
/// tightening rounds): the portfolio's cost stays linear in `n` with a
/// constant bounded by the budget.
pub const WORK_BUDGET: u64 = 1 << 20;

/// Reusable storage of [`place_buffers`].
#[derive(Debug, Default)]
pub struct BufferWorkspace {
    manager: BestFitMemoryManager,
    /// Buffer indices by `(lower, size descending, index)`, forward time.
    by_lower: Vec<u32>,
    /// The same for the mirrored problem.
    by_lower_rev: Vec<u32>,
    /// The mirrored buffers (index `i` mirrors buffer `i`).
    mirrored: Vec<Buffer>,
    /// Per buffer: the reservation of the current variant (0: none).
    reserve: Vec<u64>,
    /// Range-maximum tree over sizes in scan order (2n entries).
    tree: Vec<u64>,
    /// Placed buffers by `(upper, index)` packed in one `u128` (one compare
    /// per heap step): the live set only, small and in cache, where a
    /// sorted array of all uppers would be walked through memory.
    live: BinaryHeap<Reverse<u128>>,
    best: Vec<u64>,
    /// Rounds of capacity tightening after each variant's first scan. 0:
    /// exactly one scan of the portfolio's first code (code 3 in
    /// [`PORTFOLIO_ORDER`]), no portfolio (the throughput configuration).
    pub tighten_rounds: u32,
    /// Most portfolio variants to run (at most the portfolio's length).
    pub variants: u32,
    /// The variants, in order, as [`ScanVariant`] codes (below
    /// [`PORTFOLIO_LEN`]); empty: [`PORTFOLIO_ORDER`].
    pub portfolio: &'static [u8],
    /// Buffer placements the portfolio may spend; variants past the budget
    /// are skipped, but the portfolio's first code always runs.
    pub work_budget: u64,
    /// Placement policy (candidates, lifetime awareness); each variant sets
    /// its own `outliving_first`.
    pub policy: Policy,
}

impl BufferWorkspace {
    /// Storage for `n` buffers (the only allocation), with the default
    /// portfolio: 12 tightening rounds, every variant, [`WORK_BUDGET`].
    pub fn with_capacity(n: usize) -> Self {
        let mut w = BufferWorkspace {
            tighten_rounds: 12,
            variants: PORTFOLIO_LEN as u32,
            work_budget: WORK_BUDGET,
            ..Default::default()
        };
        w.reserve(n);
        w
    }

    /// Grows storage to `n` buffers.
    pub fn reserve(&mut self, n: usize) {
        self.manager.reserve(n, 0);
        for v in [&mut self.by_lower, &mut self.by_lower_rev] {
            crate::storage::grow(v, n);
        }
        crate::storage::grow(&mut self.mirrored, n);
        crate::storage::grow(&mut self.reserve, n);
        crate::storage::grow(&mut self.tree, 2 * n);
        self.live.reserve(n.saturating_sub(self.live.len()));
        crate::storage::grow(&mut self.best, n);
    }

    /// Variants a call on `n` buffers runs: 1 when `tighten_rounds == 0`,
    /// else as many as `work_budget` pays for, within `variants`.
    pub fn variants_for(&self, n: usize) -> u32 {
        if self.tighten_rounds == 0 {
            return 1;
        }
        let per = (n as u64).max(1) * (1 + self.tighten_rounds as u64);
        let len = self.codes().len() as u32;
        (self.work_budget / per).clamp(1, self.variants.clamp(1, len) as u64) as u32
    }

    /// The portfolio in use.
    fn codes(&self) -> &'static [u8] {
        if self.portfolio.is_empty() {
            &PORTFOLIO_ORDER
        } else {
            self.portfolio
        }
    }
}

/// Places `buffers` on one line with a portfolio of linear scans: each scan
/// goes in order of `lower`, frees the buffers whose `upper` has passed, then
/// best-fits the new one (lifetime-aware, [`Policy`], with the variant's
/// [`FlatHint`]). Writes the best placement found to `offsets` and reports
/// its peak.
///
/// A scan never fails for lack of room: the line is as long as all buffers
/// stacked, so a result over `capacity` is still a placement (with
/// `fits == false`). When `tighten_rounds > 0`, each variant
/// (of [`BufferWorkspace::portfolio`]) runs one scan and then up to `tighten_rounds`
/// rescans with the line capped at smaller peaks (binary search between the
/// lower bound and that variant's peak): a cap changes which hole is the
/// open end, hence the choices. The number of variants is bounded by
/// [`BufferWorkspace::variants_for`] (a work budget that leaves large
/// inputs one variant). Deterministic: no randomness, fixed order.
pub fn place_buffers(
    buffers: &[Buffer],
    capacity: u64,
    ws: &mut BufferWorkspace,
    offsets: &mut [u64],
) -> Result<BufferOutcome, BufferError> {
    let n = buffers.len();
    if offsets.len() < n {
        return Err(BufferError::Shape {
            what: "fewer offsets than buffers",
        });
    }
    if ws.by_lower.capacity() < n
        || ws.by_lower_rev.capacity() < n
        || ws.mirrored.capacity() < n
        || ws.reserve.capacity() < n
        || ws.tree.capacity() < 2 * n
        || ws.best.capacity() < n
    {
        return Err(BufferError::Shape {
            what: "workspace reserved for fewer buffers",
        });
    }
    let mut total = 0u64;
    let mut max_time = 0u64;
    let mut min_time = u64::MAX;
    // Already in scan order (by lower, larger first): no sort needed.
    let mut in_order = true;
    for (i, b) in buffers.iter().enumerate() {
        if b.is_void() {
            return Err(BufferError::Empty { index: i });
        }
        if b.pin.is_some() {
            return Err(BufferError::Unsupported {
                index: i,
                what: "pinned",
            });
        }
        if b.partitions > 1 {
            return Err(BufferError::Unsupported {
                index: i,
                what: "spread over several partitions",
            });
        }
        if i > 0 {
            let p = &buffers[i - 1];
            in_order &= (p.lower, Reverse(p.size)) <= (b.lower, Reverse(b.size));
        }
        total = total.saturating_add(b.size.saturating_add(b.align.saturating_sub(1)));
        max_time = max_time.max(b.upper);
        min_time = min_time.min(b.lower);
    }
    let shift = (64 - max_time.leading_zeros()).saturating_sub(31);
    let variants = ws.variants_for(n);
    if in_order {
        ws.by_lower.clear();
        ws.by_lower.extend(0..n as u32);
    } else {
        sort_by_lower(buffers, &mut ws.by_lower);
    }
    // One scan: it writes `offsets` directly, no best-so-far copy.
    let single = variants == 1 && ws.tighten_rounds == 0;
    let codes = &ws.codes()[..variants as usize];
    let mut any_reverse = false;
    for &c in codes {
        any_reverse |= ScanVariant::try_from(c)?.reverse;
    }
    if any_reverse {
        ws.mirrored.clear();
        ws.mirrored.extend(buffers.iter().map(|b| Buffer {
            lower: max_time - b.upper,
            upper: max_time - b.lower,
            ..*b
        }));
        sort_by_lower(&ws.mirrored, &mut ws.by_lower_rev);
    }

    let line = total.max(capacity).max(1);
    ws.manager
        .set_fragmentation_sampling(FLAT_FRAGMENTATION_SAMPLING);
    let mut lb = 0u64;
    let mut best_peak = u64::MAX;
    let mut fragmentation = FragmentationSummary::default();
    let mut rounds = 0;
    for &code in codes {
        let v = ScanVariant::try_from(code)?;
        let (bufs, order): (&[Buffer], &[u32]) = if v.reverse {
            (&ws.mirrored, &ws.by_lower_rev)
        } else {
            (buffers, &ws.by_lower)
        };
        let horizon = if v.reverse {
            max_time - min_time
        } else {
            max_time
        };
        let reserve: &[u64] = if v.reserve > 0 {
            reservations(bufs, order, v.reserve as u64, &mut ws.tree, &mut ws.reserve);
            &ws.reserve
        } else {
            &[]
        };
        let mut policy = ws.policy;
        policy.outliving_first = v.outliving_first;
        ws.manager.set_policy(policy);
        let mut scan = Scan {
            bufs,
            order,
            reserve,
            open_end: v.open_end,
            horizon,
            manager: &mut ws.manager,
            live: &mut ws.live,
            shift,
        };
        // The first scan never runs out of line; it also sweeps the lower bound.
        let first = scan.run(line, false, 0, offsets, &mut lb)?;
        rounds += 1;
        let first = first.unwrap_or(u64::MAX);
        if first < best_peak {
            best_peak = first;
            fragmentation = scan.manager.fragmentation();
            if !single {
                ws.best.clear();
                ws.best.extend_from_slice(&offsets[..n]);
            }
        }
        let (mut lo, mut hi) = (lb, first);
        let mut r = 0;
        while r < ws.tighten_rounds && lo < hi {
            let cap = lo + (hi - lo) / 2;
            r += 1;
            rounds += 1;
            let mut unused = 0;
            match scan.run(cap.max(1), true, lb, offsets, &mut unused)? {
                Some(p) => {
                    hi = p.min(cap);
                    if p < best_peak {
                        best_peak = p;
                        fragmentation = scan.manager.fragmentation();
                        ws.best.clear();
                        ws.best.extend_from_slice(&offsets[..n]);
                    }
                }
                None => lo = cap + 1,
            }
        }
        if best_peak == lb {
            break;
        }
    }
    if !single {
        offsets[..n].copy_from_slice(&ws.best[..n]);
    }
    Ok(BufferOutcome {
        peak: best_peak,
        lower_bound: lb,
        fits: best_peak <= capacity,
        rounds,
        variants,
        fragmentation,
    })
}

/// `order` := buffer indices by `(lower, size descending, index)`: at the
/// same start the larger first (they are the hardest to fit later).
fn sort_by_lower(buffers: &[Buffer], order: &mut Vec<u32>) {
    order.clear();
    order.extend(0..buffers.len() as u32);
    order.sort_unstable_by_key(|&i| {
        let b = &buffers[i as usize];
        (b.lower, Reverse(b.size), i)
    });
}

/// `out[i]` := the largest size of a buffer starting strictly inside buffer
/// `i`'s life, when it exceeds `factor × size(i)`; else 0. A bottom-up
/// range-maximum tree over sizes in scan order: O(n log n), no allocation
/// (`tree` and `out` are reserved).
fn reservations(
    bufs: &[Buffer],
    order: &[u32],
    factor: u64,
    tree: &mut Vec<u64>,
    out: &mut Vec<u64>,
) {
    let n = order.len();
    tree.clear();
    tree.resize(2 * n, 0);
    for (p, &i) in order.iter().enumerate() {
        tree[n + p] = bufs[i as usize].size;
    }
    for p in (1..n).rev() {
        tree[p] = tree[2 * p].max(tree[2 * p + 1]);
    }
    out.clear();
    out.resize(bufs.len(), 0);
    for &i in order {
        let b = &bufs[i as usize];
        // Positions with lower in (b.lower, b.upper).
        let (mut lo, mut hi) = (
            order.partition_point(|&j| bufs[j as usize].lower <= b.lower) + n,
            order.partition_point(|&j| bufs[j as usize].lower < b.upper) + n,
        );
        let mut m = 0;
        while lo < hi {
            if lo & 1 == 1 {
                m = m.max(tree[lo]);
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                m = m.max(tree[hi]);
            }
            lo /= 2;
            hi /= 2;
        }
        if m > factor.saturating_mul(b.size) {
            out[i as usize] = m;
        }
    }
}

/// One variant's scans over one problem direction.
struct Scan<'a> {
    bufs: &'a [Buffer],
    order: &'a [u32],
    /// Per buffer reservation, or empty.
    reserve: &'a [u64],
    open_end: OpenEnd,
    horizon: u64,
    manager: &'a mut BestFitMemoryManager,
    live: &'a mut BinaryHeap<Reverse<u128>>,
    shift: u32,
}

impl Scan<'_> {
    /// One scan on a line of `line` bytes (`capped`: a tightening rescan,
    /// where the open end's right end is the cap); `None` when some buffer
    /// found no room. `lb` is raised to the largest live byte count seen
    /// (the lower bound, once a scan has run to the end); `bound` is the
    /// lower bound known so far (the [`OpenEnd::Small`] threshold).
    fn run(
        &mut self,
        line: u64,
        capped: bool,
        bound: u64,
        offsets: &mut [u64],
        lb: &mut u64,
    ) -> Result<Option<u64>, BufferError> {
        let n = self.bufs.len();
        self.manager.reset_flat(line, n)?;
        self.live.clear();
        let mut live = 0u64;
        for &i in self.order {
            let b = &self.bufs[i as usize];
            // Expire: buffers whose `upper` has passed (ties by index).
            while let Some(&Reverse(key)) = self.live.peek() {
                let (upper, j) = ((key >> 32) as u64, key as u32);
                if upper > b.lower {
                    break;
                }
                self.live.pop();
                self.manager.free(j)?;
                live -= self.bufs[j as usize].size;
            }
            live += b.size;
            *lb = (*lb).max(live);
            if b.size > line {
                return Ok(None);
            }
            let req = Request {
                id: i,
                partitions: 1,
                bytes: b.size,
                align: b.align.max(1),
                birth: (b.lower >> self.shift) as u32,
                death: ((b.upper - 1) >> self.shift) as u32,
            };
            let hint = FlatHint {
                min_offset: self.reserve.get(i as usize).copied().unwrap_or(0),
                open_right: capped
                    && match self.open_end {
                        OpenEnd::Left => false,
                        OpenEnd::LongLived => {
                            (b.upper - b.lower).saturating_mul(5) > self.horizon.saturating_mul(2)
                        }
                        OpenEnd::Small => b.size.saturating_mul(2) < bound,
                    },
            };
            match self.manager.allocate_flat_hinted(&req, hint)? {
                Some(p) => offsets[i as usize] = p.offset,
                None => return Ok(None),
            }
            // Reserved for every buffer: never grows.
            self.live
                .push(Reverse(((b.upper as u128) << 32) | i as u128));
        }
        Ok(Some(self.manager.peak()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    /// Independent check: no two time-overlapping buffers overlap in bytes.
    fn check(bufs: &[Buffer], off: &[u64]) -> u64 {
        let mut peak = 0;
        for (i, a) in bufs.iter().enumerate() {
            assert_eq!(off[i] % a.align.max(1), 0);
            peak = peak.max(off[i] + a.size);
            for (j, b) in bufs.iter().enumerate().skip(i + 1) {
                if a.lower < b.upper && b.lower < a.upper {
                    assert!(
                        off[i] + a.size <= off[j] || off[j] + b.size <= off[i],
                        "buffers {i} and {j} overlap"
                    );
                }
            }
        }
        peak
    }

    #[test]
    fn small_instance_is_optimal() {
        // MiniMalloc's `input.12.csv`: 12 bytes is both its lower bound and
        // the peak of a legal placement; without the buffer that lives
        // throughout (the last), 8.
        let bufs = [
            Buffer::linear(0, 3, 4),
            Buffer::linear(3, 9, 4),
            Buffer::linear(0, 9, 4),
            Buffer::linear(9, 21, 4),
            Buffer::linear(0, 21, 4),
        ];
        for (bufs, lb) in [(&bufs[..], 12), (&bufs[..4], 8)] {
            let mut ws = BufferWorkspace::with_capacity(bufs.len());
            let mut off = vec![0; bufs.len()];
            let r = place_buffers(bufs, 12, &mut ws, &mut off).unwrap();
            assert_eq!(check(bufs, &off), r.peak);
            assert_eq!((r.peak, r.lower_bound), (lb, lb));
            assert!(r.fits);
        }
    }

    #[test]
    fn codes_pins_and_partitions_it_cannot_place_are_refused() {
        let bufs = [Buffer::linear(0, 3, 4), Buffer::linear(1, 5, 4)];
        let mut off = vec![0; bufs.len()];
        let mut ws = BufferWorkspace::with_capacity(bufs.len());
        ws.portfolio = &[3, 36];
        let e = place_buffers(&bufs, 12, &mut ws, &mut off).unwrap_err();
        assert_eq!(e, BufferError::VariantCode { code: 36 });
        assert!(e.to_string().contains("code 36"), "{e}");
        assert_eq!(
            ScanVariant::try_from(255),
            Err(BufferError::VariantCode { code: 255 })
        );
        ws.portfolio = &[];
        let mut pinned = bufs;
        pinned[1].pin = Some(crate::mem::problem::Placement::default());
        let e = place_buffers(&pinned, 12, &mut ws, &mut off).unwrap_err();
        assert!(
            matches!(e, BufferError::Unsupported { index: 1, .. }),
            "{e}"
        );
        let mut wide = bufs;
        wide[0].partitions = 2;
        let e = place_buffers(&wide, 12, &mut ws, &mut off).unwrap_err();
        assert!(
            matches!(e, BufferError::Unsupported { index: 0, .. }),
            "{e}"
        );
        assert!(e.to_string().starts_with("buffer 0 is spread"), "{e}");
    }

    #[test]
    fn portfolio_is_deterministic_legal_and_no_worse_than_its_first_scan() {
        let bufs = perfect(100, 4);
        let mut ws = BufferWorkspace::with_capacity(bufs.len());
        let (mut a, mut b) = (vec![0; bufs.len()], vec![0; bufs.len()]);
        let r = place_buffers(&bufs, 1 << 20, &mut ws, &mut a).unwrap();
        assert_eq!(r.variants, PORTFOLIO_LEN as u32);
        assert_eq!(check(&bufs, &a), r.peak);
        let r2 = place_buffers(&bufs, 1 << 20, &mut ws, &mut b).unwrap();
        assert_eq!((r, &a), (r2, &b));
        ws.variants = 1;
        let one = place_buffers(&bufs, 1 << 20, &mut ws, &mut b).unwrap();
        assert_eq!(one.variants, 1);
        assert!(r.peak <= one.peak);
        ws.tighten_rounds = 0;
        ws.variants = PORTFOLIO_LEN as u32;
        let single = place_buffers(&bufs, 1 << 20, &mut ws, &mut b).unwrap();
        assert_eq!((single.rounds, single.variants), (1, 1));
        assert_eq!(check(&bufs, &b), single.peak);
    }

    #[test]
    fn every_variant_alone_places_legally() {
        let bufs = perfect(60, 9);
        let all: &'static [u8; PORTFOLIO_LEN] = &PORTFOLIO_ORDER;
        for k in 0..PORTFOLIO_LEN {
            let code = all[k];
            let mut ws = BufferWorkspace::with_capacity(bufs.len());
            ws.portfolio = &all[k..=k];
            let mut off = vec![0; bufs.len()];
            let r = place_buffers(&bufs, 1 << 20, &mut ws, &mut off).unwrap();
            assert_eq!(check(&bufs, &off), r.peak, "variant {code}");
            assert!(r.peak >= r.lower_bound);
        }
    }

    #[test]
    fn reservation_is_the_largest_buffer_starting_inside() {
        let b = Buffer::linear;
        // 0 lives over [0,10): 1 (size 50) and 2 (size 80) start inside;
        // 3 starts at 10, outside. 1 lives over [2,6): 2 starts at 5.
        let bufs = [b(0, 10, 20), b(2, 6, 50), b(5, 9, 80), b(10, 12, 500)];
        let mut order = Vec::with_capacity(4);
        sort_by_lower(&bufs, &mut order);
        let (mut tree, mut out) = (Vec::new(), Vec::new());
        reservations(&bufs, &order, 1, &mut tree, &mut out);
        assert_eq!(out, [80, 80, 0, 0]);
        // Factor 2: 80 > 2 × 20 but not > 2 × 50.
        reservations(&bufs, &order, 2, &mut tree, &mut out);
        assert_eq!(out, [80, 0, 0, 0]);
    }

    /// The perfect packings of the survey: (buffers, seed) → problem.
    fn perfect(n: usize, seed: u64) -> Vec<Buffer> {
        use crate::gen::dsa::{perfect_packing, PerfectPacking};
        use crate::mem::problem::Problem;
        let mut p = Problem::linear(0, n);
        let mut sol = Vec::new();
        perfect_packing(&PerfectPacking::new(n), seed, &mut p, &mut sol).unwrap();
        p.buffers().to_vec()
    }
}
