//! The best-fit placement backend of the linear-scan allocator (the
//! reference's `BestFitMemoryManager`).
//!
//! # Geometry
//! - **SB** is 2-D: partitions × bytes. The start-partition rule lets a tensor
//!   start only at multiples of its granularity (32, 64 or 128 partitions), so
//!   two tensors overlap in partitions exactly when their ranges rounded out to
//!   the smallest granularity `g` (a *quadrant*, 32 partitions) overlap. The
//!   manager therefore keeps one byte line per quadrant row (4 rows on every
//!   preset) and places a tensor of `P` partitions on `ceil(P / g)` adjacent
//!   rows at a legal base, on `[offset, offset + bytes)` free in each of them,
//!   within `target.sb_usable_bytes`.
//!   Three corner strategies are tried in the reference's order:
//!   *lower-left* (left edge on the start of a hole of the bottom row, bases
//!   ascending), *upper-left* (left edge on the start of a hole of the top row,
//!   bases descending), *right* (right edge on the end of a hole of the bottom
//!   row). For one-row tensors lower-left already sees every hole; the other
//!   two matter when the rows of a wide tensor are fragmented differently.
//!   A placement that only a middle row of a 3- or 4-row tensor could anchor
//!   is not searched (the reference has no such strategy either).
//! - **PSUM** is a grid of banks × quadrant rows: a tensor starts on a bank
//!   boundary and takes `ceil(bytes / bank)` consecutive banks (at most
//!   `target.psum_max_banks_per_tensor`; 1 below trn3) of the usable
//!   `target.psum_usable_banks`, on its quadrant rows. Best fit here means:
//!   the legal position that uses the fewest wholly free banks (so that
//!   full-width tensors keep finding empty banks), then the lowest bank.
//! - **Flat** is one byte line of a given capacity: the 1-D buffer problem of
//!   `tusk dsa` and DRAM-like spaces.
//!
//! # Index structure
//! The reference keeps its free blocks in a `boost::multi_index_container`
//! with three indices: sequenced by address, hashed by location, ordered by
//! size. Here, per byte line:
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
//!   walk that finds the same `candidates` smallest fitting holes (the
//!   treap's recursive updates were 45% of the scan's instructions);
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
//! side): see [`super::lsa::place_buffers`].
//!
//! # Fragmentation
//! Every hole produced by a free (after merging) is fed to P² estimators
//! ([`super::quantile`]); [`BestFitMemoryManager::fragmentation`] reports their
//! median, 90th and 99th percentile. The 1-D scan samples every 8th hole
//! instead ([`BestFitMemoryManager::set_fragmentation_sampling`]): the three
//! estimator updates were a fifth of its instructions.

use alloc::vec::Vec;
use core::fmt;

use super::quantile::{FragmentationSummary, FreeBlockQuantiles};
use super::size_bins::{self, SizeBins};
use crate::target::Target;

const NIL: u32 = u32::MAX;
/// `owner` of a free segment.
const FREE: u32 = u32::MAX;
/// Most quadrant rows a geometry may have.
pub const MAX_ROWS: usize = 16;
/// Most candidates the flat line compares ([`Policy::candidates`] is
/// clamped to it there).
pub const FLAT_CANDIDATES: usize = 8;
/// The 1-D scan's fragmentation sampling (see
/// [`BestFitMemoryManager::set_fragmentation_sampling`]).
pub const FLAT_FRAGMENTATION_SAMPLING: u32 = 8;
/// Death of a space boundary: a wall never dies.
const WALL: u32 = u32::MAX;

// ---------------------------------------------------------------------------
// Ordered index: an arena treap.

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u128,
    val: u32,
    prio: u32,
    l: u32,
    r: u32,
}

/// An ordered map `u128 → u32` in a fixed arena (expected O(log n) per
/// operation; recursion depth is the treap height).
#[derive(Clone, Debug)]
struct Treap {
    nodes: Vec<Node>,
    free: u32,
    root: u32,
    seed: u32,
}

impl Default for Treap {
    fn default() -> Self {
        Treap {
            nodes: Vec::new(),
            free: NIL,
            root: NIL,
            seed: 0x9E37_79B9,
        }
    }
}

impl Treap {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.nodes)
    }

    fn reserve(&mut self, n: usize) {
        self.nodes.reserve(n.saturating_sub(self.nodes.len()));
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.free = NIL;
        self.root = NIL;
        self.seed = 0x9E37_79B9;
    }

    fn rand(&mut self) -> u32 {
        crate::rng::xorshift32(&mut self.seed)
    }

    fn insert(&mut self, key: u128, val: u32) -> Result<(), ManagerError> {
        let prio = self.rand();
        let node = Node {
            key,
            val,
            prio,
            l: NIL,
            r: NIL,
        };
        let n = if self.free != NIL {
            let n = self.free;
            self.free = self.nodes[n as usize].l;
            self.nodes[n as usize] = node;
            n
        } else if self.nodes.len() < self.nodes.capacity() {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        } else {
            return Err(ManagerError::WorkspaceFull {
                what: "free-block index",
                capacity: self.nodes.capacity(),
            });
        };
        self.root = self.insert_at(self.root, n);
        Ok(())
    }

    fn insert_at(&mut self, t: u32, n: u32) -> u32 {
        if t == NIL {
            return n;
        }
        let (tk, tp) = (self.nodes[t as usize].key, self.nodes[t as usize].prio);
        let nk = self.nodes[n as usize].key;
        if self.nodes[n as usize].prio > tp {
            let (l, r) = self.split(t, nk);
            self.nodes[n as usize].l = l;
            self.nodes[n as usize].r = r;
            n
        } else if nk < tk {
            let l = self.insert_at(self.nodes[t as usize].l, n);
            self.nodes[t as usize].l = l;
            t
        } else {
            let r = self.insert_at(self.nodes[t as usize].r, n);
            self.nodes[t as usize].r = r;
            t
        }
    }

    /// Splits into keys `< key` and keys `>= key`.
    fn split(&mut self, t: u32, key: u128) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.nodes[t as usize].key < key {
            let (a, b) = self.split(self.nodes[t as usize].r, key);
            self.nodes[t as usize].r = a;
            (t, b)
        } else {
            let (a, b) = self.split(self.nodes[t as usize].l, key);
            self.nodes[t as usize].l = b;
            (a, t)
        }
    }

    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].r, b);
            self.nodes[a as usize].r = r;
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].l);
            self.nodes[b as usize].l = l;
            b
        }
    }

    fn remove(&mut self, key: u128) {
        self.root = self.remove_at(self.root, key);
    }

    fn remove_at(&mut self, t: u32, key: u128) -> u32 {
        if t == NIL {
            return NIL;
        }
        let n = self.nodes[t as usize];
        if key == n.key {
            let m = self.merge(n.l, n.r);
            self.nodes[t as usize].l = self.free;
            self.free = t;
            m
        } else if key < n.key {
            let l = self.remove_at(n.l, key);
            self.nodes[t as usize].l = l;
            t
        } else {
            let r = self.remove_at(n.r, key);
            self.nodes[t as usize].r = r;
            t
        }
    }

    /// The smallest entry with key `>= key`.
    fn lower_bound(&self, key: u128) -> Option<(u128, u32)> {
        let mut t = self.root;
        let mut best = None;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if n.key >= key {
                best = Some((n.key, n.val));
                t = n.l;
            } else {
                t = n.r;
            }
        }
        best
    }

    /// The largest entry with key `<= key`.
    fn floor(&self, key: u128) -> Option<(u128, u32)> {
        let mut t = self.root;
        let mut best = None;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if n.key <= key {
                best = Some((n.key, n.val));
                t = n.r;
            } else {
                t = n.l;
            }
        }
        best
    }
}

// ---------------------------------------------------------------------------
// One byte line.

#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u64,
    end: u64,
    prev: u32,
    next: u32,
    owner: u32,
    death: u32,
}

#[inline]
fn size_key(size: u64, start: u64) -> u128 {
    ((size as u128) << 64) | start as u128
}

#[inline]
fn align_up(x: u64, a: u64) -> Option<u64> {
    let a = a.max(1);
    x.checked_add(a - 1).map(|v| v / a * a)
}

#[inline]
fn align_down(x: u64, a: u64) -> u64 {
    let a = a.max(1);
    x / a * a
}

/// Which end of a hole a tensor is placed against.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// A byte line `[0, end)`: segments in address order, free ones indexed.
#[derive(Clone, Debug, Default)]
struct Line {
    segs: Vec<Seg>,
    seg_free: u32,
    by_size: Treap,
    by_addr: Treap,
    track_addr: bool,
    /// Flat lines index holes in size bins instead of the `by_size` treap.
    binned: bool,
    bins: SizeBins,
    end: u64,
    /// Highest end of any block ever placed (the peak).
    peak: u64,
}

impl Line {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.segs)
            .saturating_add(self.by_size.heap_bytes())
            .saturating_add(self.by_addr.heap_bytes())
            .saturating_add(self.bins.heap_bytes())
    }

    fn reserve(&mut self, blocks: usize) {
        let segs = 2 * blocks + 2;
        self.segs.reserve(segs.saturating_sub(self.segs.len()));
        self.by_size.reserve(blocks + 2);
        self.by_addr.reserve(blocks + 2);
        self.bins.reserve(segs);
    }

    fn reset(&mut self, end: u64, track_addr: bool, binned: bool) -> Result<(), ManagerError> {
        self.segs.clear();
        self.seg_free = NIL;
        self.by_size.clear();
        self.by_addr.clear();
        self.bins.clear();
        if binned {
            self.bins.open_links();
        }
        self.track_addr = track_addr;
        self.binned = binned;
        self.end = end;
        self.peak = 0;
        if end > 0 {
            let s = self.new_seg(Seg {
                start: 0,
                end,
                prev: NIL,
                next: NIL,
                owner: FREE,
                death: 0,
            })?;
            self.add_hole(s)?;
        }
        Ok(())
    }

    fn new_seg(&mut self, s: Seg) -> Result<u32, ManagerError> {
        if self.seg_free != NIL {
            let i = self.seg_free;
            self.seg_free = self.segs[i as usize].next;
            self.segs[i as usize] = s;
            Ok(i)
        } else if self.segs.len() < self.segs.capacity() {
            self.segs.push(s);
            Ok((self.segs.len() - 1) as u32)
        } else {
            Err(ManagerError::WorkspaceFull {
                what: "segments",
                capacity: self.segs.capacity(),
            })
        }
    }

    fn drop_seg(&mut self, i: u32) {
        self.segs[i as usize].next = self.seg_free;
        self.segs[i as usize].owner = FREE;
        self.seg_free = i;
    }

    fn add_hole(&mut self, h: u32) -> Result<(), ManagerError> {
        let s = self.segs[h as usize];
        if self.binned {
            if !self.bins.can_hold(h) {
                return Err(ManagerError::WorkspaceFull {
                    what: "size bins",
                    capacity: self.segs.capacity(),
                });
            }
            self.bins.insert(h, s.end - s.start);
            return Ok(());
        }
        self.by_size.insert(size_key(s.end - s.start, s.start), h)?;
        if self.track_addr {
            self.by_addr.insert(s.start as u128, h)?;
        }
        Ok(())
    }

    fn remove_hole(&mut self, h: u32) {
        let s = self.segs[h as usize];
        if self.binned {
            self.bins.remove(h, s.end - s.start);
            return;
        }
        self.by_size.remove(size_key(s.end - s.start, s.start));
        if self.track_addr {
            self.by_addr.remove(s.start as u128);
        }
    }

    /// The free segment containing `[off, end)`, if the whole range is free.
    fn hole_containing(&self, off: u64, end: u64) -> Option<u32> {
        let (_, h) = self.by_addr.floor(off as u128)?;
        let s = &self.segs[h as usize];
        (s.end >= end).then_some(h)
    }

    /// The offset of a block of `size` bytes placed against `side` of hole
    /// `h`, if it fits with its alignment.
    fn fit(&self, h: u32, size: u64, align: u64, side: Side) -> Option<u64> {
        let s = &self.segs[h as usize];
        match side {
            Side::Left => {
                let off = align_up(s.start, align)?;
                (off.checked_add(size)? <= s.end).then_some(off)
            }
            Side::Right => {
                let off = align_down(s.end.checked_sub(size)?, align);
                (off >= s.start).then_some(off)
            }
        }
    }

    /// Death of the neighbour on `side` of hole `h` ([`WALL`] at the ends).
    fn neighbour_death(&self, h: u32, side: Side) -> u32 {
        let s = &self.segs[h as usize];
        let n = match side {
            Side::Left => s.prev,
            Side::Right => s.next,
        };
        if n == NIL {
            WALL
        } else {
            self.segs[n as usize].death
        }
    }

    /// True when hole `h` runs to the end of the line.
    fn is_top(&self, h: u32) -> bool {
        self.segs[h as usize].next == NIL
    }

    /// Turns `[off, off + size)` of hole `h` into a used block.
    fn take(
        &mut self,
        h: u32,
        off: u64,
        size: u64,
        owner: u32,
        death: u32,
    ) -> Result<u32, ManagerError> {
        let Seg {
            start: hs,
            end: he,
            prev,
            next,
            ..
        } = self.segs[h as usize];
        self.remove_hole(h);
        let end = off + size;
        self.segs[h as usize] = Seg {
            start: off,
            end,
            prev,
            next,
            owner,
            death,
        };
        if off > hs {
            let l = self.new_seg(Seg {
                start: hs,
                end: off,
                prev,
                next: h,
                owner: FREE,
                death: 0,
            })?;
            if prev != NIL {
                self.segs[prev as usize].next = l;
            }
            self.segs[h as usize].prev = l;
            self.add_hole(l)?;
        }
        if end < he {
            let r = self.new_seg(Seg {
                start: end,
                end: he,
                prev: h,
                next,
                owner: FREE,
                death: 0,
            })?;
            if next != NIL {
                self.segs[next as usize].prev = r;
            }
            self.segs[h as usize].next = r;
            self.add_hole(r)?;
        }
        self.peak = self.peak.max(end);
        Ok(h)
    }

    /// Frees a used block, merging it with free neighbours; returns the size
    /// of the resulting hole.
    fn release(&mut self, b: u32) -> Result<u64, ManagerError> {
        let s = self.segs[b as usize];
        let (mut start, mut end, mut prev, mut next) = (s.start, s.end, s.prev, s.next);
        if prev != NIL && self.segs[prev as usize].owner == FREE {
            let p = self.segs[prev as usize];
            self.remove_hole(prev);
            self.drop_seg(prev);
            start = p.start;
            prev = p.prev;
        }
        if next != NIL && self.segs[next as usize].owner == FREE {
            let n = self.segs[next as usize];
            self.remove_hole(next);
            self.drop_seg(next);
            end = n.end;
            next = n.next;
        }
        self.segs[b as usize] = Seg {
            start,
            end,
            prev,
            next,
            owner: FREE,
            death: 0,
        };
        if prev != NIL {
            self.segs[prev as usize].next = b;
        }
        if next != NIL {
            self.segs[next as usize].prev = b;
        }
        self.add_hole(b)?;
        Ok(end - start)
    }

    /// Free holes in address order starting at or after `from`.
    fn next_hole_by_addr(&self, from: u64) -> Option<u32> {
        self.by_addr.lower_bound(from as u128).map(|(_, h)| h)
    }
}

// ---------------------------------------------------------------------------
// The manager.

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
    /// The geometry is not supported by this manager (too many rows).
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
    /// [`super::lsa::place_buffers`] turns it on per variant; the
    /// pipeline's default stays false: on generated modules the SB scan is
    /// at peak = lower bound with either score (survey
    /// `pipeline_policy_survey` in `lsa.rs`), so there is nothing to gain
    /// and the golden outputs stay as they are.
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

/// Extra constraints of one flat placement ([`BestFitMemoryManager::allocate_flat_hinted`]),
/// from the 1-D scan's offline knowledge.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FlatHint {
    /// Place at or above this offset when some hole allows it (a reservation
    /// of the bottom for a larger buffer that starts while this one is live);
    /// when none does, the constraint is dropped. 0: none.
    pub min_offset: u64,
    /// When the open end is chosen, place against its right end (the line's
    /// capacity) instead of its left end: with a capped line, long-lived or
    /// small buffers gathered at the top leave the bottom in one piece.
    pub open_right: bool,
}

/// The `want` smallest `(size, start)` keys offered, sorted: the flat
/// search's shortlist (insertion into a short array; cheaper than a
/// general sorted container at 4 entries).
struct Shortlist {
    keys: [u128; FLAT_CANDIDATES],
    ids: [u32; FLAT_CANDIDATES],
    len: usize,
    want: usize,
}

impl Shortlist {
    #[inline]
    fn new(want: usize) -> Self {
        Shortlist {
            keys: [0; FLAT_CANDIDATES],
            ids: [0; FLAT_CANDIDATES],
            len: 0,
            want: want.clamp(1, FLAT_CANDIDATES),
        }
    }

    /// True when `key` would enter the list.
    #[inline]
    fn would_take(&self, key: u128) -> bool {
        self.len < self.want || key < self.keys[self.len - 1]
    }

    /// Inserts `key` in order, dropping the largest when full.
    #[inline]
    fn offer(&mut self, key: u128, id: u32) {
        if !self.would_take(key) {
            return;
        }
        if self.len == self.want {
            self.len -= 1;
        }
        let mut i = self.len;
        while i > 0 && self.keys[i - 1] > key {
            self.keys[i] = self.keys[i - 1];
            self.ids[i] = self.ids[i - 1];
            i -= 1;
        }
        self.keys[i] = key;
        self.ids[i] = id;
        self.len += 1;
    }
}

/// A scored candidate: (score, offset, base row, (anchor row, anchor hole)).
type Candidate = ((u8, u64, u64), u64, usize, (usize, u32));

/// Where a placed block sits, per id.
#[derive(Copy, Clone, Debug)]
struct Slot {
    base_row: u8,
    rows: u8,
    /// Flat/SB: segment per row; PSUM: first bank in `segs[0]`, bank count in `segs[1]`.
    segs: [u32; 4],
}

const EMPTY_SLOT: Slot = Slot {
    base_row: u8::MAX,
    rows: 0,
    segs: [NIL; 4],
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
    /// Flat geometry: per id, its segment. Never cleared: an entry is
    /// current only when that segment exists and is owned by the id (an id
    /// not placed owns no segment), so a reset costs nothing per id — the
    /// per-scan clearing of `slots` was a full pass over memory at 1M ids.
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
        crate::heap_bytes!(self.slots, self.flat_seg, self.obstacles).saturating_add(
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
    /// time each) and `obstacles` fixed blocks. May allocate; nothing else does.
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
        for l in self.lines.iter_mut().take(rows.clamp(1, MAX_ROWS)) {
            l.reserve(blocks.min(ids));
        }
        self.slots.reserve(ids.saturating_sub(self.slots.len()));
        self.flat_seg
            .reserve(ids.saturating_sub(self.flat_seg.len()));
        self.obstacles
            .reserve(obstacles.saturating_sub(self.obstacles.len()));
    }

    /// Sets the lifetime policy.
    pub fn set_policy(&mut self, p: Policy) {
        self.policy = p;
    }

    /// Feeds only every `every`-th freed hole (1: all, the default) to the
    /// fragmentation estimators, from the next reset on. The three P²
    /// updates cost about as much as the rest of a free; the 1-D scan samples
    /// every [`FLAT_FRAGMENTATION_SAMPLING`]-th hole, which keeps the
    /// quantiles of a long scan (they summarize thousands of holes) at an
    /// eighth of the cost. [`FragmentationSummary::samples`] counts the holes
    /// actually fed.
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

    /// Lines the SB geometry of `target` uses: its partitions over the
    /// start granularity (at least 1; [`Self::reset_sb`] rejects more than
    /// [`MAX_ROWS`]).
    pub fn sb_rows(target: &Target) -> usize {
        let g = target
            .start_rules
            .iter()
            .fold(0u16, |acc, r| gcd(acc, r.granularity))
            .max(1);
        ((target.sb_partitions / g) as usize).clamp(1, MAX_ROWS)
    }

    /// Empties the manager as the SB of `target`, for ids `0..ids`.
    pub fn reset_sb(&mut self, target: &Target, ids: usize) -> Result<(), ManagerError> {
        self.reset_common(Geometry::Sb, ids)?;
        let g = target
            .start_rules
            .iter()
            .fold(0u16, |acc, r| gcd(acc, r.granularity))
            .max(1);
        let rows = (target.sb_partitions / g) as usize;
        if rows == 0 || rows > MAX_ROWS || target.sb_partitions % g != 0 {
            return Err(ManagerError::Unsupported {
                what: "the SB partition count is not 1..=16 start-granularity rows",
            });
        }
        self.rows = rows;
        self.row_partitions = g;
        self.total_partitions = target.sb_partitions;
        for (k, r) in target.start_rules.iter().enumerate() {
            self.start_rules[k] = (r.max_partitions, (r.granularity / g).max(1));
        }
        let track = rows > 1;
        for l in self.lines.iter_mut().take(rows) {
            l.reset(target.sb_usable_bytes as u64, track, false)?;
        }
        Ok(())
    }

    /// Empties the manager as the PSUM of `target`.
    pub fn reset_psum(&mut self, target: &Target, ids: usize) -> Result<(), ManagerError> {
        self.reset_common(Geometry::Psum, ids)?;
        let g = target
            .start_rules
            .iter()
            .fold(0u16, |acc, r| gcd(acc, r.granularity))
            .max(1);
        let rows = (target.psum_partitions / g) as usize;
        if rows == 0 || rows > MAX_ROWS || target.psum_partitions % g != 0 {
            return Err(ManagerError::Unsupported {
                what: "the PSUM partition count is not 1..=16 start-granularity rows",
            });
        }
        if target.psum_usable_banks as u32 > 64 {
            return Err(ManagerError::Unsupported {
                what: "more than 64 PSUM banks",
            });
        }
        self.rows = rows;
        self.row_partitions = g;
        self.total_partitions = target.psum_partitions;
        for (k, r) in target.start_rules.iter().enumerate() {
            self.start_rules[k] = (r.max_partitions, (r.granularity / g).max(1));
        }
        self.banks = target.psum_usable_banks as u32;
        self.bank_bytes = target.psum_bank_bytes.max(1) as u64;
        self.max_banks_per_tensor = (target.psum_max_banks_per_tensor as u32).max(1);
        Ok(())
    }

    /// Empties the manager as one flat line of `capacity` bytes.
    pub fn reset_flat(&mut self, capacity: u64, ids: usize) -> Result<(), ManagerError> {
        self.reset_common(Geometry::Flat, ids)?;
        self.rows = 1;
        self.row_partitions = 1;
        self.total_partitions = 1;
        self.start_rules = [(1, 1); 3];
        self.lines[0].reset(capacity, false, true)
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

    /// Places a block; `Ok(None)` when nothing free fits now (the caller
    /// spills), an error when it never could.
    pub fn allocate(&mut self, req: &Request) -> Result<Option<Placement>, ManagerError> {
        self.check_id(req.id)?;
        let p = match self.geometry {
            Geometry::Psum => self.allocate_psum(req)?,
            Geometry::Sb | Geometry::Flat => self.allocate_lines(req)?,
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

    /// The best candidate of one strategy on one base, as
    /// `(score, anchor hole, offset)`.
    fn best_on_base(
        &self,
        req: &Request,
        base: usize,
        k: usize,
        anchor: usize,
        side: Side,
    ) -> Option<((u8, u64, u64), u64, u32)> {
        let line = &self.lines[anchor];
        let mut key = size_key(req.bytes, 0);
        let mut found = 0u32;
        let mut best: Option<((u8, u64, u64), u64, u32)> = None;
        let want = if self.policy.lifetime_aware {
            self.policy.candidates.max(1)
        } else {
            1
        };
        while let Some((hk, h)) = line.by_size.lower_bound(key) {
            key = hk + 1;
            let hole_size = (hk >> 64) as u64;
            let top = line.is_top(h);
            if top && best.is_some() {
                // The open end is the last resort.
                continue;
            }
            // One-row tensors compare both ends of a hole (the right corner
            // of that row is the same hole's other end); wider tensors keep
            // the strategy's corner so that the three strategies differ.
            let both = [Side::Left, Side::Right];
            let one = [side];
            let sides: &[Side] = if k == 1 && self.policy.lifetime_aware && !top {
                &both
            } else {
                &one
            };
            let mut any = false;
            for &eff in sides {
                let Some(off) = line.fit(h, req.bytes, req.align, eff) else {
                    continue;
                };
                if !self.free_in_rows(base, k, anchor, off, off + req.bytes)
                    || self.hits_obstacle(base, k, off, off + req.bytes, req)
                {
                    continue;
                }
                any = true;
                let nd = line.neighbour_death(h, eff);
                let gap = if nd == WALL {
                    // A wall suits a block that outlives its neighbours.
                    u32::MAX as u64 - req.death as u64
                } else {
                    nd.abs_diff(req.death) as u64
                };
                let waste = hole_size - req.bytes;
                let score = if top {
                    // The open end: only the peak matters.
                    (2, off, 0)
                } else if self.policy.lifetime_aware {
                    let first = self.policy.outliving_first && nd < req.death;
                    (first as u8, gap, waste)
                } else {
                    (0, waste, off)
                };
                if best.map_or(true, |(b, _, _)| score < b) {
                    best = Some((score, off, h));
                }
            }
            if any {
                found += 1;
                if found >= want || top {
                    break;
                }
            }
        }
        best
    }

    fn free_in_rows(&self, base: usize, k: usize, anchor: usize, off: u64, end: u64) -> bool {
        (base..base + k)
            .filter(|&r| r != anchor)
            .all(|r| self.lines[r].hole_containing(off, end).is_some())
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

    fn allocate_lines(&mut self, req: &Request) -> Result<Option<Placement>, ManagerError> {
        if self.geometry == Geometry::Flat {
            return self.allocate_flat(req, FlatHint::default());
        }
        let (k, step) = self.rows_for(req.partitions)?;
        let cap = self.lines[0].end;
        if req.bytes == 0 || req.bytes > cap {
            return Err(ManagerError::NeverFits {
                what: "bytes per partition",
                value: req.bytes,
                max: cap,
            });
        }
        let nbases = if k > self.rows {
            0
        } else {
            (self.rows - k) / step + 1
        };
        let strategies = [
            (Corner::LowerLeft, false, Side::Left),
            (Corner::UpperLeft, true, Side::Left),
            (Corner::Right, false, Side::Right),
        ];
        for (corner, top_anchor, side) in strategies {
            let mut best: Option<Candidate> = None;
            for bi in 0..nbases {
                let base = if top_anchor {
                    (nbases - 1 - bi) * step
                } else {
                    bi * step
                };
                let anchor = if top_anchor { base + k - 1 } else { base };
                if let Some((score, off, h)) = self.best_on_base(req, base, k, anchor, side) {
                    if best.map_or(true, |(b, _, _, _)| score < b) {
                        best = Some((score, off, base, (anchor, h)));
                    }
                }
            }
            if let Some((_, off, base, hint)) = best {
                self.commit_lines(req, base, k, off, Some(hint))?;
                return Ok(Some(Placement {
                    base_partition: (base as u16) * self.row_partitions,
                    offset: off,
                    corner,
                }));
            }
            if k == 1 {
                // One row: lower-left already saw every hole of every base.
                break;
            }
        }
        Ok(None)
    }

    /// [`Self::allocate`] on a flat line, with the 1-D scan's [`FlatHint`].
    pub fn allocate_flat_hinted(
        &mut self,
        req: &Request,
        hint: FlatHint,
    ) -> Result<Option<Placement>, ManagerError> {
        self.check_id(req.id)?;
        if self.geometry != Geometry::Flat {
            return Err(ManagerError::Unsupported {
                what: "placement hints on a non-flat geometry",
            });
        }
        let p = self.allocate_flat(req, hint)?;
        if p.is_some() {
            self.placed += 1;
        }
        Ok(p)
    }

    /// The flat line's placement: the same answers as [`Self::best_on_base`]
    /// on one row (the `candidates` smallest fitting bounded holes by
    /// `(size, start)`, both ends of each compared by lifetime; the open end
    /// only when it is smaller than every fitting bounded hole or none
    /// fits), found through the size bins instead of repeated ordered-index
    /// look-ups. A hint's `min_offset` is tried first and dropped when no
    /// hole satisfies it.
    fn allocate_flat(
        &mut self,
        req: &Request,
        hint: FlatHint,
    ) -> Result<Option<Placement>, ManagerError> {
        let line = &self.lines[0];
        if req.partitions != 1 {
            return Err(ManagerError::NeverFits {
                what: "partition count",
                value: req.partitions as u64,
                max: 1,
            });
        }
        if req.bytes == 0 || req.bytes > line.end {
            return Err(ManagerError::NeverFits {
                what: "bytes per partition",
                value: req.bytes,
                max: line.end,
            });
        }
        let mut found = None;
        if hint.min_offset > 0 {
            found = self.search_flat(req, hint.min_offset, hint.open_right);
        }
        if found.is_none() {
            found = self.search_flat(req, 0, hint.open_right);
        }
        let Some((off, h)) = found else {
            return Ok(None);
        };
        // The flat commit: one line, the hole the search found.
        let seg = self.lines[0].take(h, off, req.bytes, req.id, req.death)?;
        self.flat_seg[req.id as usize] = seg;
        self.peak_bytes = self.peak_bytes.max(off + req.bytes);
        self.live_area += req.bytes;
        Ok(Some(Placement {
            base_partition: 0,
            offset: off,
            corner: Corner::LowerLeft,
        }))
    }

    /// The offset and hole of the flat search with every offset at or above
    /// `floor`; `None` when nothing fits.
    fn search_flat(&self, req: &Request, floor: u64, open_right: bool) -> Option<(u64, u32)> {
        let line = &self.lines[0];
        let aware = self.policy.lifetime_aware;
        let want = if aware {
            (self.policy.candidates as usize).clamp(1, FLAT_CANDIDATES)
        } else {
            1
        };
        let clear = |off: u64| -> bool {
            self.obstacles.is_empty() || !self.hits_obstacle(0, 1, off, off + req.bytes, req)
        };
        // The offset against `side` of bounded hole `h`, above the floor.
        let side_off = |h: u32, side: Side| -> Option<u64> {
            let off = line.fit(h, req.bytes, req.align, side)?;
            (off >= floor && clear(off)).then_some(off)
        };
        // The open end's offset: left end (above the floor), or right end.
        let open_off = |h: u32| -> Option<u64> {
            let s = &line.segs[h as usize];
            let lo = align_up(s.start.max(floor), req.align)?;
            if lo.checked_add(req.bytes)? > s.end {
                return None;
            }
            let off = if open_right {
                align_down(s.end - req.bytes, req.align).max(lo)
            } else {
                lo
            };
            clear(off).then_some(off)
        };
        // No floor, alignment or obstacle: every hole of the size fits at
        // both ends (the common case, checked once instead of per hole).
        let simple = floor == 0 && req.align <= 1 && self.obstacles.is_empty();
        // The `want` smallest fitting bounded holes, by (size, start).
        let mut cands = Shortlist::new(want);
        let mut top = None;
        let mut bin = size_bins::bin_of(req.bytes);
        while let Some(b) = line.bins.next_bin(bin) {
            let mut h = line.bins.head(b);
            while h != size_bins::NIL {
                let s = &line.segs[h as usize];
                let size = s.end - s.start;
                let next = line.bins.next(h);
                if size >= req.bytes {
                    if s.next == NIL {
                        if let Some(off) = open_off(h) {
                            top = Some((size_key(size, s.start), off, h));
                        }
                    } else {
                        let key = size_key(size, s.start);
                        if cands.would_take(key)
                            && (simple
                                || side_off(h, Side::Left).is_some()
                                || (aware && side_off(h, Side::Right).is_some()))
                        {
                            cands.offer(key, h);
                        }
                    }
                }
                h = next;
            }
            if cands.len >= want {
                break;
            }
            bin = b + 1;
        }
        if let Some((tk, off, h)) = top {
            if cands.len == 0 || tk < cands.keys[0] {
                return Some((off, h));
            }
        }
        let sides: &[Side] = if aware {
            &[Side::Left, Side::Right]
        } else {
            &[Side::Left]
        };
        let mut best: Option<((u8, u64, u64), u64, u32)> = None;
        for (&key, &h) in cands.keys[..cands.len].iter().zip(&cands.ids[..cands.len]) {
            let waste = (key >> 64) as u64 - req.bytes;
            let seg = &line.segs[h as usize];
            for &eff in sides {
                let off = if simple {
                    match eff {
                        Side::Left => seg.start,
                        Side::Right => seg.end - req.bytes,
                    }
                } else {
                    let Some(off) = side_off(h, eff) else {
                        continue;
                    };
                    off
                };
                let score = if aware {
                    let n = match eff {
                        Side::Left => seg.prev,
                        Side::Right => seg.next,
                    };
                    let gap = if n == NIL {
                        u32::MAX as u64 - req.death as u64
                    } else {
                        line.segs[n as usize].death.abs_diff(req.death) as u64
                    };
                    let first = self.policy.outliving_first
                        && n != NIL
                        && line.segs[n as usize].death < req.death;
                    (first as u8, gap, waste)
                } else {
                    (0, waste, off)
                };
                if best.map_or(true, |(b, _, _)| score < b) {
                    best = Some((score, off, h));
                }
            }
        }
        best.map(|(_, off, h)| (off, h))
    }

    fn commit_lines(
        &mut self,
        req: &Request,
        base: usize,
        k: usize,
        off: u64,
        hint: Option<(usize, u32)>,
    ) -> Result<(), ManagerError> {
        let end = off + req.bytes;
        let mut slot = EMPTY_SLOT;
        slot.base_row = base as u8;
        slot.rows = k as u8;
        for r in base..base + k {
            let line = &mut self.lines[r];
            let h = if let Some((_, h)) = hint.filter(|&(row, _)| row == r) {
                // The hole the search found in the anchor row.
                Some(h)
            } else if line.track_addr {
                line.hole_containing(off, end)
            } else {
                // One line without an address index: the caller found the
                // hole through the size index; find it again by size.
                let mut key = size_key(req.bytes, 0);
                let mut hit = None;
                while let Some((hk, h)) = line.by_size.lower_bound(key) {
                    key = hk + 1;
                    let s = &line.segs[h as usize];
                    if s.start <= off && end <= s.end {
                        hit = Some(h);
                        break;
                    }
                }
                hit
            };
            let Some(h) = h else {
                return Err(ManagerError::FixedOverlap { id: req.id });
            };
            let seg = line.take(h, off, req.bytes, req.id, req.death)?;
            if r - base < 4 {
                slot.segs[r - base] = seg;
            }
            self.peak_bytes = self.peak_bytes.max(end);
        }
        if k > 4 {
            return Err(ManagerError::Unsupported {
                what: "a tensor on more than 4 rows",
            });
        }
        if self.geometry == Geometry::Flat {
            self.flat_seg[req.id as usize] = slot.segs[0];
        } else {
            self.slots[req.id as usize] = slot;
        }
        self.live_area += req.bytes * k as u64 * self.row_partitions as u64;
        Ok(())
    }

    fn allocate_psum(&mut self, req: &Request) -> Result<Option<Placement>, ManagerError> {
        let (k, step) = self.rows_for(req.partitions)?;
        let need = req.bytes.div_ceil(self.bank_bytes) as u32;
        let max = self.max_banks_per_tensor.min(self.banks);
        if req.bytes == 0 || need > max {
            return Err(ManagerError::NeverFits {
                what: "PSUM bytes per partition",
                value: req.bytes,
                max: max as u64 * self.bank_bytes,
            });
        }
        let nbases = if k > self.rows {
            0
        } else {
            (self.rows - k) / step + 1
        };
        let used_any = self.bank_used[..self.rows].iter().fold(0u64, |a, &m| a | m);
        let run = if need >= 64 {
            u64::MAX
        } else {
            (1u64 << need) - 1
        };
        let mut best: Option<((u32, u32), u32, usize)> = None;
        for bank in 0..=(self.banks - need) {
            let offset = bank as u64 * self.bank_bytes;
            if offset % req.align.max(1) != 0 {
                continue;
            }
            let m = run << bank;
            for bi in 0..nbases {
                let base = bi * step;
                if (base..base + k).any(|r| self.bank_used[r] & m != 0)
                    || self.hits_obstacle(
                        base,
                        k,
                        offset,
                        offset + need as u64 * self.bank_bytes,
                        req,
                    )
                {
                    continue;
                }
                let fresh = (m & !used_any).count_ones();
                let score = (fresh, bank);
                if best.map_or(true, |(b, _, _)| score < b) {
                    best = Some((score, bank, base));
                }
            }
        }
        let Some((_, bank, base)) = best else {
            return Ok(None);
        };
        self.commit_psum(req, bank, need, base, k);
        Ok(Some(Placement {
            base_partition: base as u16 * self.row_partitions,
            offset: bank as u64 * self.bank_bytes,
            corner: Corner::Bank,
        }))
    }

    fn commit_psum(&mut self, req: &Request, bank: u32, need: u32, base: usize, k: usize) {
        let m = if need >= 64 {
            u64::MAX
        } else {
            ((1u64 << need) - 1) << bank
        };
        for r in base..base + k {
            self.bank_used[r] |= m;
        }
        self.slots[req.id as usize] = Slot {
            base_row: base as u8,
            rows: k as u8,
            segs: [bank, need, 0, 0],
        };
        self.peak_bytes = self.peak_bytes.max((bank + need) as u64 * self.bank_bytes);
        self.live_area += need as u64 * self.bank_bytes * k as u64 * self.row_partitions as u64;
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
            Geometry::Psum => bytes.div_ceil(self.bank_bytes) * self.bank_bytes,
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
                let m = ((1u64 << need) - 1) << bank;
                if (base..base + k).any(|r| self.bank_used[r] & m != 0) {
                    return Err(ManagerError::FixedOverlap { id: req.id });
                }
                self.commit_psum(req, bank, need, base, k);
            }
            _ => {
                for r in base..base + k {
                    if !self.lines[r].track_addr {
                        // Flat lines index by address only when asked; a
                        // fixed block needs it.
                        return Err(ManagerError::Unsupported {
                            what: "fixed blocks on a flat line",
                        });
                    }
                    if self.lines[r].hole_containing(s, e).is_none() {
                        return Err(ManagerError::FixedOverlap { id: req.id });
                    }
                }
                self.commit_lines(req, base, k, offset, None)?;
            }
        }
        Ok(())
    }

    /// Gives a block's space back.
    pub fn free(&mut self, id: u32) -> Result<(), ManagerError> {
        self.check_id(id)?;
        if self.geometry == Geometry::Flat {
            let Some(seg) = self.flat_block(id) else {
                return Err(ManagerError::UnknownId { id });
            };
            let line = &mut self.lines[0];
            let s = line.segs[seg as usize];
            self.live_area = self.live_area.saturating_sub(s.end - s.start);
            let merged = line.release(seg)?;
            if self.sample_now() {
                self.quantiles.add(merged);
            }
            return Ok(());
        }
        let slot = self.slots[id as usize];
        if slot.base_row == u8::MAX {
            return Err(ManagerError::UnknownId { id });
        }
        self.slots[id as usize] = EMPTY_SLOT;
        let base = slot.base_row as usize;
        let k = slot.rows as usize;
        match self.geometry {
            Geometry::Psum => {
                let (bank, need) = (slot.segs[0], slot.segs[1]);
                let m = ((1u64 << need) - 1) << bank;
                for r in base..base + k {
                    self.bank_used[r] &= !m;
                }
                self.live_area = self.live_area.saturating_sub(
                    need as u64 * self.bank_bytes * k as u64 * self.row_partitions as u64,
                );
                if self.sample_now() {
                    self.quantiles.add(need as u64 * self.bank_bytes);
                }
            }
            _ => {
                for r in base..base + k {
                    let seg = slot.segs[r - base];
                    let s = self.lines[r].segs[seg as usize];
                    self.live_area = self
                        .live_area
                        .saturating_sub((s.end - s.start) * self.row_partitions as u64);
                    let merged = self.lines[r].release(seg)?;
                    if r == base && self.sample_now() {
                        self.quantiles.add(merged);
                    }
                }
            }
        }
        Ok(())
    }

    /// The segment of a placed id on the flat line.
    #[inline]
    fn flat_block(&self, id: u32) -> Option<u32> {
        if id as usize >= self.ids {
            return None;
        }
        let seg = *self.flat_seg.get(id as usize)?;
        let s = self.lines[0].segs.get(seg as usize)?;
        (s.owner == id).then_some(seg)
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
        let nbases = (self.rows - k) / step + 1;
        let mut best = 0u64;
        for bi in 0..nbases {
            let base = bi * step;
            let b = match self.geometry {
                Geometry::Psum => {
                    let used = self.bank_used[base..base + k]
                        .iter()
                        .fold(0u64, |a, &m| a | m);
                    let mut run = 0u64;
                    let mut longest = 0u64;
                    for bank in 0..self.banks {
                        if used >> bank & 1 == 0 {
                            run += 1;
                            longest = longest.max(run);
                        } else {
                            run = 0;
                        }
                    }
                    longest.min(self.max_banks_per_tensor as u64) * self.bank_bytes
                }
                _ => self.largest_common_run(base, k),
            };
            best = best.max(b);
        }
        Rect {
            partitions: (k as u16 * self.row_partitions).min(self.total_partitions),
            bytes: best,
        }
    }

    /// Longest byte run free in every row of `base..base + k`.
    fn largest_common_run(&self, base: usize, k: usize) -> u64 {
        let line = &self.lines[base];
        if line.binned {
            // The largest hole is in the last non-empty bin.
            let Some(b) = line.bins.last_bin() else {
                return 0;
            };
            let mut best = 0;
            let mut h = line.bins.head(b);
            while h != size_bins::NIL {
                let s = &line.segs[h as usize];
                best = best.max(s.end - s.start);
                h = line.bins.next(h);
            }
            return best;
        }
        if !line.track_addr {
            // One row: the largest hole is the last entry of the size index.
            return line
                .by_size
                .floor(u128::MAX)
                .map_or(0, |(key, _)| (key >> 64) as u64);
        }
        let mut best = 0u64;
        let mut from = 0u64;
        while let Some(h) = line.next_hole_by_addr(from) {
            let s = line.segs[h as usize];
            from = s.start + 1;
            // Intersect [s.start, s.end) with the other rows, piece by piece.
            let mut lo = s.start;
            while lo < s.end {
                let mut hi = s.end;
                let mut ok = true;
                for r in base + 1..base + k {
                    match self.lines[r].by_addr.floor(lo as u128) {
                        Some((_, g)) if self.lines[r].segs[g as usize].end > lo => {
                            hi = hi.min(self.lines[r].segs[g as usize].end);
                        }
                        _ => {
                            ok = false;
                            // Jump to the next hole start of that row.
                            hi = self.lines[r]
                                .next_hole_by_addr(lo + 1)
                                .map_or(s.end, |g| self.lines[r].segs[g as usize].start)
                                .min(s.end);
                            break;
                        }
                    }
                }
                if ok {
                    best = best.max(hi - lo);
                }
                lo = hi.max(lo + 1);
            }
        }
        best
    }

    /// Bytes × partitions placed now.
    pub fn live_area(&self) -> u64 {
        self.live_area
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u32, partitions: u16, bytes: u64, death: u32) -> Request {
        Request {
            id,
            partitions,
            bytes,
            align: 1,
            birth: 0,
            death,
        }
    }

    fn sb(usable: u32) -> (BestFitMemoryManager, Target) {
        let t = Target {
            sb_usable_bytes: usable,
            ..Target::default()
        };
        let mut m = BestFitMemoryManager::new();
        m.reserve(64, 4);
        m.reset_sb(&t, 64).unwrap();
        (m, t)
    }

    #[test]
    fn lower_left_takes_the_bottom_row_and_left_edge() {
        let (mut m, _) = sb(1000);
        let p = m.allocate(&req(0, 32, 100, 5)).unwrap().unwrap();
        assert_eq!(
            (p.base_partition, p.offset, p.corner),
            (0, 0, Corner::LowerLeft)
        );
        let p = m.allocate(&req(1, 128, 100, 5)).unwrap().unwrap();
        assert_eq!(
            (p.base_partition, p.offset, p.corner),
            (0, 100, Corner::LowerLeft)
        );
    }

    fn sb_100() -> BestFitMemoryManager {
        let t = Target {
            sb_usable_bytes: 100,
            ..Target::default()
        };
        let mut m = BestFitMemoryManager::new();
        m.reserve(16, 4);
        m.reset_sb(&t, 16).unwrap();
        m
    }

    #[test]
    fn upper_left_when_lower_left_collides() {
        let mut m = sb_100();
        // Row 0 free [10,60), row 1 free [20,70), rows 2-3 full.
        m.place_fixed(&req(0, 32, 10, 9), 0, 0).unwrap();
        m.place_fixed(&req(1, 32, 40, 9), 0, 60).unwrap();
        m.place_fixed(&req(2, 32, 20, 9), 32, 0).unwrap();
        m.place_fixed(&req(3, 32, 30, 9), 32, 70).unwrap();
        m.place_fixed(&req(4, 64, 100, 9), 64, 0).unwrap();
        // 64 x 30: lower-left at row 0's hole start 10 collides with row 1's
        // [0,20); upper-left anchors row 1's hole start 20: [20,50) is free
        // in row 0 too.
        let p = m.allocate(&req(5, 64, 30, 9)).unwrap().unwrap();
        assert_eq!((p.base_partition, p.offset), (0, 20));
        assert_eq!(p.corner, Corner::UpperLeft);
        // 64 x 45 fits nowhere: largest common run is [20,60) = 40 bytes.
        m.free(5).unwrap();
        assert_eq!(m.allocate(&req(5, 64, 45, 9)).unwrap(), None);
        assert_eq!(
            m.largest_free(64),
            Rect {
                partitions: 64,
                bytes: 40
            }
        );
    }

    #[test]
    fn right_when_a_middle_row_binds() {
        let mut m = sb_100();
        // Row 0 free [10,50); row 1 free [30,100); rows 2, 3 free.
        m.place_fixed(&req(0, 32, 10, 9), 0, 0).unwrap();
        m.place_fixed(&req(1, 32, 50, 9), 0, 50).unwrap();
        m.place_fixed(&req(2, 32, 30, 9), 32, 0).unwrap();
        // 128 x 14: lower-left at 10 collides in row 1; upper-left anchors
        // row 3 at 0 and collides in row 0; the right edge of row 0's hole
        // gives [36,50), free in every row.
        let p = m.allocate(&req(3, 128, 14, 9)).unwrap().unwrap();
        assert_eq!((p.base_partition, p.offset), (0, 36));
        assert_eq!(p.corner, Corner::Right);
    }

    #[test]
    fn start_partition_rule_and_alignment() {
        let (mut m, _) = sb(4096);
        // Two 64-partition tensors share the byte range: bases 0 and 64.
        let a = m.allocate(&req(0, 64, 100, 9)).unwrap().unwrap();
        let b = m.allocate(&req(1, 40, 100, 9)).unwrap().unwrap();
        assert_eq!((a.base_partition, a.offset), (0, 0));
        assert_eq!((b.base_partition, b.offset), (64, 0));
        // A 65-partition tensor must start at 0.
        let c = m.allocate(&req(2, 65, 10, 9)).unwrap().unwrap();
        assert_eq!(c.base_partition, 0);
        assert_eq!(c.offset, 100);
        let mut r = req(3, 128, 10, 9);
        r.align = 64;
        let d = m.allocate(&r).unwrap().unwrap();
        assert_eq!(d.offset % 64, 0);
        assert!(d.offset >= 110);
        assert!(matches!(
            m.allocate(&req(4, 128, 5000, 9)),
            Err(ManagerError::NeverFits { .. })
        ));
    }

    #[test]
    fn psum_banks() {
        let t = Target {
            psum_usable_banks: 7,
            ..Target::default()
        };
        let mut m = BestFitMemoryManager::new();
        m.reserve(32, 0);
        m.reset_psum(&t, 32).unwrap();
        // Every full-width tensor takes a bank of its own, on a bank boundary.
        for i in 0..7 {
            let p = m.allocate(&req(i, 128, 100, 9)).unwrap().unwrap();
            assert_eq!(p.offset, i as u64 * 2048);
            assert_eq!(p.corner, Corner::Bank);
        }
        assert_eq!(m.allocate(&req(7, 128, 4, 9)).unwrap(), None);
        assert_eq!(m.largest_free(128).bytes, 0);
        m.free(3).unwrap();
        assert_eq!(m.largest_free(128).bytes, 2048);
        let p = m.allocate(&req(7, 32, 4, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 3 * 2048);
        // A second quadrant tensor shares bank 3 on other partitions.
        let p = m.allocate(&req(8, 32, 4, 9)).unwrap().unwrap();
        assert_eq!((p.base_partition, p.offset), (32, 3 * 2048));
        // Over one bank is refused below trn3.
        assert!(matches!(
            m.allocate(&req(9, 128, 2049, 9)),
            Err(ManagerError::NeverFits { .. })
        ));
        // trn3: consecutive banks.
        let t3 = Target::preset(crate::target::Generation::Trn3);
        m.reset_psum(&t3, 32).unwrap();
        m.allocate(&req(0, 128, 100, 9)).unwrap().unwrap();
        let p = m.allocate(&req(1, 128, 3 * 2048, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 2048);
        assert_eq!(m.peak(), 4 * 2048);
    }

    #[test]
    fn flat_best_fit_merges_and_prefers_bounded_holes() {
        let mut m = BestFitMemoryManager::new();
        m.reserve(8, 0);
        m.reset_flat(1000, 8).unwrap();
        m.set_policy(Policy {
            candidates: 1,
            lifetime_aware: false,
            outliving_first: false,
        });
        for (i, s) in [100u64, 50, 100, 30].iter().enumerate() {
            m.allocate(&req(i as u32, 1, *s, 9)).unwrap().unwrap();
        }
        m.free(1).unwrap(); // hole [100,150)
                            // 40 bytes: the bounded 50-byte hole, not the open end.
        let p = m.allocate(&req(4, 1, 40, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 100);
        m.free(4).unwrap();
        m.free(0).unwrap();
        m.free(2).unwrap(); // [0,250) merged
        let p = m.allocate(&req(5, 1, 250, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 0);
        assert_eq!(m.largest_free(1).bytes, 1000 - 280);
        assert!(m.fragmentation().samples >= 4);
    }
}
