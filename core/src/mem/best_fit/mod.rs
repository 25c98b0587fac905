//! The best-fit placement backend of the linear-scan allocator (the
//! reference's `BestFitMemoryManager`): the manager's face — requests,
//! placements, errors, the policy, reservation and the per-id state — over
//! three geometries, each in its own file:
//!
//! - **SB** (`sb.rs`) is 2-D: partitions × bytes. The
//!   start-partition rule lets a tensor start only at multiples of its
//!   granularity, so two tensors overlap in partitions exactly when their
//!   ranges rounded out to the smallest granularity `g` overlap. The
//!   manager keeps one byte line per such *row* (`target.sb_partitions /
//!   g` of them) and places a tensor of `P` partitions on `ceil(P / g)`
//!   adjacent rows at a legal base, on a byte range free in each of them,
//!   with the reference's three corner strategies.
//! - **PSUM** (`psum.rs`) is a grid of banks × rows: a tensor
//!   starts on a bank boundary and takes consecutive banks, best fit being
//!   the position that opens the fewest wholly free banks.
//! - **Flat** (`flat.rs`) is one byte line of a given capacity:
//!   the 1-D buffer problem of `tusk dsa` and DRAM-like spaces.
//!
//! # Index structure
//! The reference keeps its free blocks in a `boost::multi_index_container`
//! with three indices: sequenced by address, hashed by location, ordered by
//! size. Here, per byte line (`line.rs`):
//! - a doubly linked list of *all* segments (free and used) in address order
//!   replaces the sequenced index: freeing a block merges with its neighbours
//!   in O(1), and the neighbours of a hole are what the lifetime-aware choice
//!   looks at;
//! - the hashed-by-location index is a plain per-id array of segment ids
//!   (ids are dense), O(1) without hashing;
//! - the size index is a treap keyed by `(size, start)` over the free
//!   segments: best fit is a `lower_bound`, O(log h) for h holes. Flat
//!   lines (the 1-D buffer problem, the hot path) use segregated size bins
//!   instead ([`super::size_bins`]): O(1) insert and remove, and a bitmap
//!   walk that finds the same `candidates` smallest fitting holes without
//!   the treap's rebalancing on every change;
//! - SB rows also keep a treap of free segments keyed by start, to test in
//!   O(log h) whether a range is free in the other rows of a wide tensor.
//!
//! All of it lives in arenas sized by [`BestFitMemoryManager::reserve`];
//! placing and freeing never allocate (a full arena is an error, not growth).
//!
//! # Lifetime-aware best fit
//! Plain best fit takes the smallest hole that fits. Among the few smallest
//! fitting holes ([`Policy::candidates`]) this manager prefers the one whose
//! neighbour, on the side the tensor is placed against, dies closest to when
//! the new tensor dies: when both die the space comes back as one larger
//! hole instead of two slivers. The hole that runs to the end of the space is
//! used only when no bounded hole fits, which keeps the peak low.
//! [`Policy::outliving_first`] ranks a side whose neighbour outlives the
//! tensor before one whose neighbour dies first. On the flat line the 1-D
//! scan may also pass a [`FlatHint`] (a minimum offset, the open end's
//! side): see [`super::portfolio::place_buffers`].
//!
//! # Fragmentation
//! Every hole produced by a free (after merging) is fed to P² estimators
//! ([`super::quantile`]); [`BestFitMemoryManager::fragmentation`] reports their
//! median, 90th and 99th percentile. The 1-D scan samples a fixed share of
//! the holes instead ([`BestFitMemoryManager::set_fragmentation_sampling`]):
//! the estimator updates cost as much as the rest of a free.

use alloc::vec::Vec;
use core::fmt;

use super::quantile::{FragmentationSummary, FreeBlockQuantiles};
use crate::target::Target;

mod flat;
mod line;
mod psum;
mod sb;

pub use flat::{FlatHint, FLAT_FRAGMENTATION_SAMPLING};
use line::{Line, NIL};

/// Most start-granularity rows a geometry may have: the length of the
/// manager's inline per-row arrays (the byte lines, the PSUM bank masks),
/// which keep a manager one value that a reservation sizes once and that
/// [`BestFitMemoryManager::reserve`] can size without a target. Rows are the partitions
/// over the finest start granularity; [`BestFitMemoryManager::reset_sb`]
/// and [`BestFitMemoryManager::reset_psum`] refuse a target with more
/// ([`ManagerError::TooManyRows`]).
pub const MAX_ROWS: usize = 16;

// Obstacles keep their rows as a bit mask.
const _: () = assert!(MAX_ROWS <= u32::BITS as usize);

/// Which placement routine a manager runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Geometry {
    /// 2-D partition × byte scratchpad with corner strategies.
    Sb,
    /// Bank-addressed accumulator.
    Psum,
    /// One flat byte line.
    Flat,
}

/// The strategy (or rule) that produced a placement.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Corner {
    /// Bottom row, left edge on a hole start.
    LowerLeft,
    /// Top row, left edge on a hole start.
    UpperLeft,
    /// Bottom row, right edge on a hole end.
    Right,
    /// PSUM bank placement.
    Bank,
    /// A fixed (pinned or pre-placed) location.
    Fixed,
}

/// What to place.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Dense id of the block (a location index, a buffer index).
    pub id: u32,
    /// Partitions (Flat: 1).
    pub partitions: u16,
    /// Bytes per partition.
    pub bytes: u64,
    /// Byte alignment of the offset (a power of two, or 1).
    pub align: u64,
    /// First live position.
    pub birth: u32,
    /// Last live position (the lifetime-aware choice compares these).
    pub death: u32,
}

/// Where a block went.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// First partition (Flat: 0).
    pub base_partition: u16,
    /// Byte offset (PSUM: bank × bank bytes).
    pub offset: u64,
    /// The strategy that found it.
    pub corner: Corner,
}

/// A free rectangle, for failure messages.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rect {
    /// Partitions.
    pub partitions: u16,
    /// Bytes per partition.
    pub bytes: u64,
}

impl fmt::Display for Rect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x {} bytes", self.partitions, self.bytes)
    }
}

/// Something the manager cannot do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ManagerError {
    /// The reserved arena is used up (reserve more blocks).
    WorkspaceFull {
        /// Which arena.
        what: &'static str,
        /// Its capacity.
        capacity: usize,
    },
    /// The block can never fit this geometry, whatever is free.
    NeverFits {
        /// Which dimension.
        what: &'static str,
        /// Requested.
        value: u64,
        /// Largest possible.
        max: u64,
    },
    /// A fixed block overlaps a block already there.
    FixedOverlap {
        /// Its id.
        id: u32,
    },
    /// The target's space has more start-granularity rows than the
    /// manager holds ([`MAX_ROWS`]), or is not a whole number of them.
    TooManyRows {
        /// Which space ("SB", "PSUM").
        space: &'static str,
        /// Its partitions.
        partitions: u16,
        /// The finest start granularity (partitions per row).
        granularity: u16,
        /// Most rows.
        max: usize,
    },
    /// The request is not supported by this geometry.
    Unsupported {
        /// Why.
        what: &'static str,
    },
    /// The id was never reserved or is not placed.
    UnknownId {
        /// The id.
        id: u32,
    },
}

impl fmt::Display for ManagerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManagerError::WorkspaceFull { what, capacity } => write!(
                f,
                "the best-fit manager's {what} arena is full ({capacity} entries reserved)"
            ),
            ManagerError::NeverFits { what, value, max } => {
                write!(f, "{what} {value} can never fit: the space has {max}")
            }
            ManagerError::FixedOverlap { id } => {
                write!(f, "fixed block {id} overlaps a block already placed")
            }
            ManagerError::TooManyRows {
                space,
                partitions,
                granularity,
                max,
            } => write!(
                f,
                "the {space} of {partitions} partitions is not 1 to {max} rows of the \
                 finest start granularity ({granularity} partitions)"
            ),
            ManagerError::Unsupported { what } => write!(f, "unsupported geometry: {what}"),
            ManagerError::UnknownId { id } => write!(f, "block {id} is not placed"),
        }
    }
}

/// Tunables of the lifetime-aware choice.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// How many of the smallest fitting holes (per side) are compared by
    /// lifetime; 1 is plain best fit.
    pub candidates: u32,
    /// False: always place against the left end (plain best fit).
    pub lifetime_aware: bool,
    /// Lifetime-aware only: prefer a side whose neighbour dies at or after
    /// the new block (then the closest death, then the least waste) over a
    /// side whose neighbour dies first. A neighbour that outlives the block
    /// keeps the hole's edge where it is when the block leaves, so the space
    /// comes back as the same hole; one that dies first leaves the block as
    /// an island in a larger hole. Both geometries honour it (flat search
    /// and the SB corner strategies). The 1-D portfolio of
    /// [`super::portfolio::place_buffers`] turns it on per variant; the
    /// pipeline's default is false: the SB scan of generated modules
    /// reaches the lower bound with either score (`pipeline_policy_survey`
    /// in `lsa.rs` measures it), so the default keeps the plainer rule.
    pub outliving_first: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            candidates: 4,
            lifetime_aware: true,
            outliving_first: false,
        }
    }
}

/// Where a placed block of the SB or PSUM geometry sits, per id (the flat
/// geometry keeps only its segment, in `flat_seg`).
#[derive(Copy, Clone, Debug)]
struct Slot {
    /// First row, `u8::MAX` when the id is not placed.
    base_row: u8,
    rows: u8,
    /// PSUM: the first bank and the bank count (SB keeps its segments in
    /// `row_segs`).
    first_bank: u32,
    banks: u32,
}

const EMPTY_SLOT: Slot = Slot {
    base_row: u8::MAX,
    rows: 0,
    first_bank: 0,
    banks: 0,
};

/// An obstacle not yet live: a fixed block the scan will reach later.
#[derive(Copy, Clone, Debug)]
struct Obstacle {
    rows_mask: u32,
    start: u64,
    end: u64,
    birth: u32,
    death: u32,
}

/// The best-fit placement manager of one space.
#[derive(Clone, Debug)]
pub struct BestFitMemoryManager {
    geometry: Geometry,
    policy: Policy,
    lines: [Line; MAX_ROWS],
    rows: usize,
    /// Partitions per row (the smallest start granularity).
    row_partitions: u16,
    /// Start-rule rows `(max partitions, granularity in rows)`.
    start_rules: [(u16, u16); 3],
    total_partitions: u16,
    // PSUM
    banks: u32,
    bank_bytes: u64,
    max_banks_per_tensor: u32,
    bank_used: [u64; MAX_ROWS],
    slots: Vec<Slot>,
    /// SB geometry: per id, the segment of each of its rows, `rows` entries
    /// an id (a tensor spans at most every row).
    row_segs: Vec<u32>,
    /// Flat geometry: per id, its segment. Never cleared: an entry is
    /// current only when that segment exists and is owned by the id (an id
    /// not placed owns no segment), so a reset costs nothing per id where a
    /// clearing pass would touch every id's entry on each scan.
    flat_seg: Vec<u32>,
    /// Ids `0..ids` are valid since the last reset.
    ids: usize,
    obstacles: Vec<Obstacle>,
    quantiles: FreeBlockQuantiles,
    /// Feed every `frag_every`-th freed hole to the quantile estimators.
    frag_every: u32,
    /// Frees until the next sample.
    frag_countdown: u32,
    placed: u64,
    peak_bytes: u64,
    live_area: u64,
}

impl Default for BestFitMemoryManager {
    fn default() -> Self {
        Self::new()
    }
}

impl BestFitMemoryManager {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.slots, self.row_segs, self.flat_seg, self.obstacles).saturating_add(
            self.lines
                .iter()
                .fold(0u64, |n, l| n.saturating_add(l.heap_bytes())),
        )
    }

    /// An empty manager; call [`Self::reserve`] and a `reset_*` before use.
    pub fn new() -> Self {
        BestFitMemoryManager {
            geometry: Geometry::Flat,
            policy: Policy::default(),
            lines: Default::default(),
            rows: 0,
            row_partitions: 1,
            start_rules: [(1, 1); 3],
            total_partitions: 1,
            banks: 0,
            bank_bytes: 0,
            max_banks_per_tensor: 0,
            bank_used: [0; MAX_ROWS],
            slots: Vec::new(),
            row_segs: Vec::new(),
            flat_seg: Vec::new(),
            ids: 0,
            obstacles: Vec::new(),
            quantiles: FreeBlockQuantiles::default(),
            frag_every: 1,
            frag_countdown: 1,
            placed: 0,
            peak_bytes: 0,
            live_area: 0,
        }
    }

    /// Reserves room for `ids` distinct block ids (placed at most once at a
    /// time each) and `obstacles` fixed blocks, on any geometry of at most
    /// [`MAX_ROWS`] rows. May allocate; nothing else does.
    pub fn reserve(&mut self, ids: usize, obstacles: usize) {
        self.reserve_rows(MAX_ROWS, ids, obstacles);
    }

    /// [`Self::reserve`] for the first `rows` lines only: the SB geometry of
    /// a target uses [`Self::sb_rows`] lines, the flat one line 0, PSUM
    /// none (it tracks banks). A line not reserved fails with
    /// [`ManagerError::WorkspaceFull`] on use rather than growing.
    pub fn reserve_rows(&mut self, rows: usize, ids: usize, obstacles: usize) {
        self.reserve_rows_for(rows, ids, ids, obstacles);
    }

    /// [`Self::reserve_rows`] when at most `blocks` ids are placed at once:
    /// a line's segments and free-block indexes hold what is placed now
    /// (freed entries are reused), only the per-id tables take every id.
    pub fn reserve_rows_for(&mut self, rows: usize, ids: usize, blocks: usize, obstacles: usize) {
        let rows = rows.clamp(1, MAX_ROWS);
        for l in self.lines.iter_mut().take(rows) {
            l.reserve(blocks.min(ids));
        }
        let at_least = |v: &mut Vec<_>, n: usize| crate::storage::grow(v, n);
        crate::storage::grow(&mut self.slots, ids);
        at_least(&mut self.row_segs, ids.saturating_mul(rows));
        at_least(&mut self.flat_seg, ids);
        crate::storage::grow(&mut self.obstacles, obstacles);
    }

    /// Sets the lifetime policy.
    pub fn set_policy(&mut self, p: Policy) {
        self.policy = p;
    }

    /// Feeds only every `every`-th freed hole (1: all, the default) to the
    /// fragmentation estimators, from the next reset on. The P² updates
    /// cost about as much as the rest of a free; the 1-D scan samples every
    /// [`FLAT_FRAGMENTATION_SAMPLING`]-th hole, which still summarizes the
    /// thousands of holes of a long scan. [`FragmentationSummary::samples`]
    /// counts the holes actually fed.
    pub fn set_fragmentation_sampling(&mut self, every: u32) {
        self.frag_every = every.max(1);
        self.frag_countdown = self.frag_every;
    }

    /// True when this free is sampled (a countdown, no division).
    #[inline]
    fn sample_now(&mut self) -> bool {
        self.frag_countdown -= 1;
        if self.frag_countdown == 0 {
            self.frag_countdown = self.frag_every;
            true
        } else {
            false
        }
    }

    /// The geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn reset_common(&mut self, geometry: Geometry, ids: usize) -> Result<(), ManagerError> {
        self.geometry = geometry;
        if ids > self.slots.capacity() {
            return Err(ManagerError::WorkspaceFull {
                what: "block id",
                capacity: self.slots.capacity(),
            });
        }
        self.slots.clear();
        if geometry == Geometry::Flat {
            if ids > self.flat_seg.capacity() {
                return Err(ManagerError::WorkspaceFull {
                    what: "block id",
                    capacity: self.flat_seg.capacity(),
                });
            }
            if self.flat_seg.len() < ids {
                self.flat_seg.resize(ids, NIL);
            }
        } else {
            self.slots.resize(ids, EMPTY_SLOT);
        }
        self.ids = ids;
        self.obstacles.clear();
        self.quantiles.clear();
        self.frag_countdown = self.frag_every;
        self.bank_used = [0; MAX_ROWS];
        self.placed = 0;
        self.peak_bytes = 0;
        self.live_area = 0;
        Ok(())
    }

    /// Takes the row geometry of a space of `partitions` partitions under
    /// `target`'s start rule: rows of the finest start granularity.
    fn set_rows(
        &mut self,
        target: &Target,
        space: &'static str,
        partitions: u16,
    ) -> Result<(), ManagerError> {
        let g = row_granularity(target);
        let rows = (partitions / g) as usize;
        if rows == 0 || rows > MAX_ROWS || partitions % g != 0 {
            return Err(ManagerError::TooManyRows {
                space,
                partitions,
                granularity: g,
                max: MAX_ROWS,
            });
        }
        self.rows = rows;
        self.row_partitions = g;
        self.total_partitions = partitions;
        for (k, r) in target.start_rules.iter().enumerate() {
            self.start_rules[k] = (r.max_partitions, (r.granularity / g).max(1));
        }
        Ok(())
    }

    /// Rows a tensor of `partitions` partitions takes and the legal base
    /// step in rows.
    fn rows_for(&self, partitions: u16) -> Result<(usize, usize), ManagerError> {
        if partitions == 0 || partitions > self.total_partitions {
            return Err(ManagerError::NeverFits {
                what: "partition count",
                value: partitions as u64,
                max: self.total_partitions as u64,
            });
        }
        let k = partitions.div_ceil(self.row_partitions) as usize;
        let step = self
            .start_rules
            .iter()
            .find(|r| partitions <= r.0)
            .map_or(self.rows, |r| r.1 as usize)
            .max(1);
        Ok((k, step))
    }

    /// Legal bases of a tensor of `k` rows with base step `step`.
    fn bases(&self, k: usize, step: usize) -> usize {
        if k > self.rows {
            0
        } else {
            (self.rows - k) / step + 1
        }
    }

    /// Places a block; `Ok(None)` when nothing free fits now (the caller
    /// spills), an error when it never could.
    pub fn allocate(&mut self, req: &Request) -> Result<Option<Placement>, ManagerError> {
        self.check_id(req.id)?;
        let p = match self.geometry {
            Geometry::Psum => self.allocate_psum(req)?,
            Geometry::Sb => self.allocate_rows(req)?,
            Geometry::Flat => self.allocate_flat(req, FlatHint::default())?,
        };
        if p.is_some() {
            self.placed += 1;
        }
        Ok(p)
    }

    fn check_id(&self, id: u32) -> Result<(), ManagerError> {
        if (id as usize) < self.ids {
            Ok(())
        } else {
            Err(ManagerError::UnknownId { id })
        }
    }

    fn hits_obstacle(&self, base: usize, k: usize, off: u64, end: u64, req: &Request) -> bool {
        let mask = rows_mask(base, k);
        self.obstacles.iter().any(|o| {
            o.rows_mask & mask != 0
                && o.start < end
                && off < o.end
                && o.birth <= req.death
                && req.birth <= o.death
        })
    }

    /// Announces a fixed block that becomes live later: until it is placed
    /// with [`Self::place_fixed`], no block whose lifetime meets it may take
    /// its rectangle.
    pub fn add_obstacle(
        &mut self,
        req: &Request,
        base_partition: u16,
        offset: u64,
    ) -> Result<(), ManagerError> {
        let (k, _) = self.rows_for(req.partitions)?;
        let base = (base_partition / self.row_partitions) as usize;
        let span = self.footprint(req.bytes);
        if self.obstacles.len() == self.obstacles.capacity() {
            return Err(ManagerError::WorkspaceFull {
                what: "obstacle",
                capacity: self.obstacles.capacity(),
            });
        }
        self.obstacles.push(Obstacle {
            rows_mask: rows_mask(base, k),
            start: offset,
            end: offset + span,
            birth: req.birth,
            death: req.death,
        });
        Ok(())
    }

    fn footprint(&self, bytes: u64) -> u64 {
        match self.geometry {
            Geometry::Psum => crate::align::align_saturating(bytes, self.bank_bytes),
            _ => bytes,
        }
    }

    /// Places a block at a fixed address (pinned or already placed); it is
    /// an obstacle, never moved. Fails when the rectangle is not free.
    pub fn place_fixed(
        &mut self,
        req: &Request,
        base_partition: u16,
        offset: u64,
    ) -> Result<(), ManagerError> {
        self.check_id(req.id)?;
        let (k, _) = self.rows_for(req.partitions)?;
        let base = (base_partition / self.row_partitions) as usize;
        if base + k > self.rows {
            return Err(ManagerError::NeverFits {
                what: "last partition",
                value: base_partition as u64 + req.partitions as u64,
                max: self.total_partitions as u64,
            });
        }
        // Its announcement, if any, is now a real block.
        let (s, e) = (offset, offset + self.footprint(req.bytes));
        let mask = rows_mask(base, k);
        if let Some(i) = self
            .obstacles
            .iter()
            .position(|o| o.rows_mask == mask && o.start == s && o.end == e && o.birth == req.birth)
        {
            self.obstacles.swap_remove(i);
        }
        match self.geometry {
            Geometry::Psum => {
                let bank = (offset / self.bank_bytes) as u32;
                let need = req.bytes.div_ceil(self.bank_bytes) as u32;
                if need == 0 || bank + need > self.banks {
                    return Err(ManagerError::NeverFits {
                        what: "PSUM bank end",
                        value: (bank + need) as u64,
                        max: self.banks as u64,
                    });
                }
                let m = psum::bank_mask(bank, need);
                if (base..base + k).any(|r| self.bank_used[r] & m != 0) {
                    return Err(ManagerError::FixedOverlap { id: req.id });
                }
                self.commit_psum(req, bank, need, base, k);
                Ok(())
            }
            _ => {
                for line in &self.lines[base..base + k] {
                    if !line.track_addr {
                        // Flat lines index by address only when asked; a
                        // fixed block needs it.
                        return Err(ManagerError::Unsupported {
                            what: "fixed blocks on a flat line",
                        });
                    }
                    if line.hole_containing(s, e).is_none() {
                        return Err(ManagerError::FixedOverlap { id: req.id });
                    }
                }
                self.commit_rows(req, base, k, offset, None)
            }
        }
    }

    /// Gives a block's space back.
    pub fn free(&mut self, id: u32) -> Result<(), ManagerError> {
        self.check_id(id)?;
        if self.geometry == Geometry::Flat {
            return self.free_flat(id);
        }
        let slot = self.slots[id as usize];
        if slot.base_row == u8::MAX {
            return Err(ManagerError::UnknownId { id });
        }
        self.slots[id as usize] = EMPTY_SLOT;
        match self.geometry {
            Geometry::Psum => {
                self.free_banks(&slot);
                Ok(())
            }
            _ => self.free_rows(id, &slot),
        }
    }

    /// True when the id is placed now.
    pub fn is_placed(&self, id: u32) -> bool {
        if self.geometry == Geometry::Flat {
            return self.flat_block(id).is_some();
        }
        self.slots
            .get(id as usize)
            .is_some_and(|s| s.base_row != u8::MAX)
    }

    /// Highest byte (PSUM: bank end) ever used: the peak footprint per
    /// partition.
    pub fn peak(&self) -> u64 {
        self.peak_bytes
    }

    /// Blocks placed so far (not counting fixed ones).
    pub fn placed(&self) -> u64 {
        self.placed
    }

    /// Free-block size quantiles.
    pub fn fragmentation(&self) -> FragmentationSummary {
        self.quantiles.summary()
    }

    /// The largest free rectangle a block of `partitions` partitions could
    /// take now (for failure messages). O(holes) — failure path only.
    pub fn largest_free(&self, partitions: u16) -> Rect {
        let Ok((k, step)) = self.rows_for(partitions) else {
            return Rect::default();
        };
        if k > self.rows {
            return Rect::default();
        }
        let mut best = 0u64;
        for bi in 0..self.bases(k, step) {
            let base = bi * step;
            let b = match self.geometry {
                Geometry::Psum => self.largest_bank_run(base, k),
                Geometry::Flat => self.largest_hole(),
                Geometry::Sb => self.largest_common_run(base, k),
            };
            best = best.max(b);
        }
        Rect {
            partitions: (k as u16 * self.row_partitions).min(self.total_partitions),
            bytes: best,
        }
    }

    /// Bytes × partitions placed now.
    pub fn live_area(&self) -> u64 {
        self.live_area
    }
}

/// Partitions per row under `target`'s start rule: the finest granularity
/// every rule's is a multiple of (their gcd), at least 1.
fn row_granularity(target: &Target) -> u16 {
    target
        .start_rules
        .iter()
        .fold(0u16, |acc, r| gcd(acc, r.granularity))
        .max(1)
}

fn rows_mask(base: usize, k: usize) -> u32 {
    let run = if k >= 32 { u32::MAX } else { (1u32 << k) - 1 };
    run << base.min(31)
}

const fn gcd(a: u16, b: u16) -> u16 {
    let (mut a, mut b) = (a, b);
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// A request of alignment 1, born at 0, for the geometries' tests.
#[cfg(test)]
fn request(id: u32, partitions: u16, bytes: u64, death: u32) -> Request {
    Request {
        id,
        partitions,
        bytes,
        align: 1,
        birth: 0,
        death,
    }
}
