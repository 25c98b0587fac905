//! Physical geometry of locations and access patterns, and the live-interval
//! index the peepholes use to prove that a rewrite clobbers nothing.
//!
//! A rewrite is legal for placement when the cells it makes a location
//! occupy are not used by any other location live at the same time: exactly
//! the verifier's rule. [`LiveIndex`] answers "which location of this space,
//! other than these, is live during window `W` and overlaps rectangle `R`?"
//! with a static interval tree over live intervals (sorted by start, each
//! implicit subtree node holding the largest end below it): `O(log n + k)`
//! where `k` is the number of locations live during `W`, never a scan of all
//! pairs.

use alloc::vec::Vec;

use crate::analysis::{Interval, LinearOrder, MemLiveness};
use crate::ir::{Ap, MemLoc, Module, Space};

/// A physical rectangle: partitions `[p0, p1)` × bytes `[lo, hi)`. DRAM is
/// one partition (`[0, 1)`) of flat addresses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Rect {
    /// First partition.
    pub p0: u32,
    /// One past the last partition.
    pub p1: u32,
    /// First byte.
    pub lo: u64,
    /// One past the last byte.
    pub hi: u64,
}

impl Rect {
    /// True when the two rectangles share a cell.
    #[inline]
    pub const fn overlaps(&self, o: &Rect) -> bool {
        self.p0 < o.p1 && o.p0 < self.p1 && self.lo < o.hi && o.lo < self.hi
    }
}

/// The cells a placed location occupies, or `None` when it is unplaced.
pub fn loc_rect(m: &Module, l: MemLoc) -> Option<Rect> {
    if !m.is_placed(l) {
        return None;
    }
    let off = m.mems().offset[l];
    Some(match m.mems().space[l] {
        Space::Dram => Rect {
            p0: 0,
            p1: 1,
            lo: off,
            hi: off + m.mem_footprint(l),
        },
        _ => {
            let b = m.mems().base_partition[l] as u32;
            Rect {
                p0: b,
                p1: b + m.mems().partitions[l] as u32,
                lo: off,
                hi: off + m.mems().bytes[l] as u64,
            }
        }
    })
}

/// The cells an access pattern touches (its hull for strided DRAM patterns
/// over several partitions), or `None` when its location is unplaced.
pub fn ap_rect(m: &Module, a: Ap) -> Option<Rect> {
    let l = m.aps().loc[a];
    if !m.is_placed(l) {
        return None;
    }
    let (lo, hi) = m.ap_byte_span(a)?;
    let off = m.mems().offset[l];
    let (r0, r1) = m.ap_rows(a);
    let (ps, pc) = (r0 as u64, r1.saturating_sub(r0) as u64);
    Some(match m.mems().space[l] {
        Space::Dram => {
            let pitch = m.mems().bytes[l] as u64;
            Rect {
                p0: 0,
                p1: 1,
                lo: off + ps * pitch + lo,
                hi: off + (ps + pc.max(1) - 1) * pitch + hi,
            }
        }
        _ => {
            let b = m.mems().base_partition[l] as u64 + ps;
            Rect {
                p0: b as u32,
                p1: (b + pc) as u32,
                lo: off + lo,
                hi: off + hi,
            }
        }
    })
}

#[derive(Copy, Clone, Debug)]
struct Entry {
    start: u64,
    end: u64,
    loc: MemLoc,
}

/// Static interval tree over one space's placed, live locations, keyed by
/// live interval (on chip, where many tensors share addresses over time) or
/// by address range (DRAM, where inputs and outputs are live throughout but
/// placed apart); the other dimension is filtered on the hits.
#[derive(Clone, Debug, Default)]
pub struct LiveIndex {
    entries: Vec<Entry>,
    max_end: Vec<u64>,
    by_address: bool,
}

impl LiveIndex {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.entries, self.max_end)
    }

    /// Empty storage for `n` locations.
    pub fn with_capacity(n: usize) -> Self {
        LiveIndex {
            entries: Vec::with_capacity(n),
            max_end: Vec::with_capacity(n),
            by_address: false,
        }
    }

    /// Rebuilds the index over the placed, live locations of `space`
    /// (does not allocate while the location count fits the capacity).
    pub fn build(&mut self, m: &Module, live: &MemLiveness, space: Space) {
        self.entries.clear();
        self.max_end.clear();
        self.by_address = space == Space::Dram;
        let cap = self.entries.capacity().min(self.max_end.capacity());
        let indexed = m.mems().space.keys().filter_map(|l| {
            let ours = m.mems().space[l] == space && m.is_placed(l);
            ours.then(|| live.interval(l).map(|iv| (l, iv))).flatten()
        });
        if self.by_address {
            for (l, _) in indexed.take(cap) {
                if let Some(r) = loc_rect(m, l) {
                    let end = r.hi.saturating_sub(1);
                    self.entries.push(Entry {
                        start: r.lo,
                        end,
                        loc: l,
                    });
                }
            }
            self.entries.sort_unstable_by_key(|e| (e.start, e.loc));
        } else {
            // By live interval: the order is (start, location), both 32-bit,
            // so one word per location sorts (a third of an entry's bytes,
            // compared as one integer), `max_end` lending its room; the
            // entries are then laid out in that order.
            for (l, iv) in indexed.take(cap) {
                self.max_end
                    .push(u64::from(iv.start) << 32 | u64::from(l.as_u32()));
            }
            self.max_end.sort_unstable();
            for &k in &self.max_end {
                let l = MemLoc::from_u32(k as u32);
                if let Some(iv) = live.interval(l) {
                    let (start, end) = (iv.start.into(), iv.end.into());
                    self.entries.push(Entry { start, end, loc: l });
                }
            }
        }
        self.max_end.clear();
        self.max_end.resize(self.entries.len(), 0);
        fill_max(&self.entries, &mut self.max_end, 0, self.entries.len());
    }

    /// The first location (in index order) live during `w` whose cells
    /// overlap `r` and that `exclude` does not exclude.
    pub fn find(
        &self,
        m: &Module,
        live: &MemLiveness,
        w: Interval,
        r: &Rect,
        exclude: &dyn Fn(MemLoc) -> bool,
    ) -> Option<MemLoc> {
        if r.lo >= r.hi {
            return None;
        }
        let key = if self.by_address {
            (r.lo, r.hi - 1)
        } else {
            (w.start as u64, w.end as u64)
        };
        self.query(m, live, key, w, r, exclude, 0, self.entries.len())
    }

    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        m: &Module,
        live: &MemLiveness,
        key: (u64, u64),
        w: Interval,
        r: &Rect,
        exclude: &dyn Fn(MemLoc) -> bool,
        lo: usize,
        hi: usize,
    ) -> Option<MemLoc> {
        if lo >= hi {
            return None;
        }
        let mid = lo + (hi - lo) / 2;
        if self.max_end[mid] < key.0 {
            return None;
        }
        if let Some(x) = self.query(m, live, key, w, r, exclude, lo, mid) {
            return Some(x);
        }
        let e = self.entries[mid];
        if e.start > key.1 {
            return None;
        }
        if e.end >= key.0 && !exclude(e.loc) {
            let in_time = live.interval(e.loc).is_some_and(|iv| iv.overlaps(w));
            if in_time && loc_rect(m, e.loc).is_some_and(|lr| lr.overlaps(r)) {
                return Some(e.loc);
            }
        }
        self.query(m, live, key, w, r, exclude, mid + 1, hi)
    }
}

fn fill_max(e: &[Entry], out: &mut [u64], lo: usize, hi: usize) -> u64 {
    if lo >= hi {
        return 0;
    }
    let mid = lo + (hi - lo) / 2;
    let l = fill_max(e, out, lo, mid);
    let r = fill_max(e, out, mid + 1, hi);
    let v = e[mid].end.max(l).max(r);
    out[mid] = v;
    v
}

/// True when an instruction strictly between positions `after` and `before`
/// accesses location `loc` over cells overlapping `r` (writes only when
/// `writes_only`). Walks `loc`'s access list between the two positions.
#[allow(clippy::too_many_arguments)]
pub fn accessed_between(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    loc: MemLoc,
    r: &Rect,
    after: u32,
    before: u32,
    writes_only: bool,
) -> bool {
    if before <= after + 1 {
        return false;
    }
    let acc = live.accesses(loc);
    let from = acc.partition_point(|&p| p <= after);
    for &p in &acc[from..] {
        if p >= before {
            break;
        }
        let i = order.inst_at(p);
        let hit = |a: Ap| m.aps().loc[a] == loc && ap_rect(m, a).map_or(true, |x| x.overlaps(r));
        if m.outputs(i).any(hit) || (!writes_only && m.inputs(i).any(hit)) {
            return true;
        }
    }
    false
}

/// What one proposed rewrite claims for a while: the on-chip cells a location
/// (`owner`) will occupy beyond its current live interval, and the DRAM bytes
/// whose access it moves in time.
#[derive(Copy, Clone, Debug)]
pub struct Claim {
    /// Positions during which the claim holds.
    pub win: Interval,
    /// On-chip cells claimed (empty when `lo == hi`).
    pub rect: Rect,
    /// The location that will occupy `rect`; claims of one owner never
    /// conflict with each other.
    pub owner: MemLoc,
    /// DRAM bytes whose access moves, in `dram_loc`'s own coordinates
    /// (partitions of the access pattern × bytes inside each partition;
    /// empty when `lo == hi`).
    pub dram: Rect,
    /// The DRAM location of `dram`.
    pub dram_loc: MemLoc,
    /// True when the moved DRAM access writes.
    pub dram_write: bool,
    /// The proposal this claim belongs to.
    pub id: u32,
    /// Set by [`sweep_claims`] when the claim was accepted.
    pub ok: bool,
}

impl Claim {
    /// A claim of on-chip cells only: the rewrite moves no DRAM access.
    pub fn on_chip(win: Interval, rect: Rect, owner: MemLoc) -> Claim {
        let none = Rect {
            p0: 0,
            p1: 0,
            lo: 0,
            hi: 0,
        };
        Claim {
            win,
            rect,
            owner,
            dram: none,
            dram_loc: MemLoc::INVALID,
            dram_write: false,
            id: 0,
            ok: false,
        }
    }

    fn conflicts(&self, o: &Claim) -> bool {
        let cells = self.rect.lo < self.rect.hi
            && o.rect.lo < o.rect.hi
            && self.owner != o.owner
            && self.rect.overlaps(&o.rect);
        let dram = self.dram.lo < self.dram.hi
            && o.dram.lo < o.dram.hi
            && (self.dram_write || o.dram_write)
            && self.dram_loc == o.dram_loc
            && self.dram.overlaps(&o.dram);
        cells || dram
    }
}

/// Accepts a subset of proposals, earliest window first, so that no two
/// accepted claims conflict while their windows overlap. The index proved
/// each proposal against the program as it was; this sweep proves them
/// against each other (`O(n log n + n·a)`, `a` = claims active at once).
/// `active` is scratch.
pub fn sweep_claims(claims: &mut [Claim], active: &mut Vec<u32>) {
    claims.sort_unstable_by_key(|c| (c.win.start, c.id));
    active.clear();
    for k in 0..claims.len() {
        let c = claims[k];
        active.retain(|&a| claims[a as usize].win.end >= c.win.start);
        let clash = active.iter().any(|&a| claims[a as usize].conflicts(&c));
        if !clash && active.len() < active.capacity() {
            claims[k].ok = true;
            active.push(k as u32);
        }
    }
}
