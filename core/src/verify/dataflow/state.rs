//! The symbolic memory: which value every cell holds, as run-length
//! rectangles.
//!
//! # Representation
//!
//! Cells are grouped in *regions*, each a plane of partitions × byte
//! addresses: the four physical regions (PSUM, SB, DRAM, the register
//! file), one private region per unplaced location and one per uncolored
//! register (see `shape`). 1-D regions (DRAM, registers) use partition 0
//! only.
//!
//! A region's address axis is cut into *slabs* — disjoint address ranges
//! `[start, end)`, kept in one treap per region (arena-allocated randomized
//! search tree keyed by `start`, iterative split and merge, no recursion).
//! A slab holds a short list of *bands*: disjoint partition ranges
//! `[p0, p1)`, sorted, each saying that cell (p, x) holds byte
//! `offset + (p − p0) × pstride + (x − start)` of `origin`. Cells no band
//! covers, and addresses no slab covers, are uninitialized.
//!
//! So a write of a whole rectangle — the common case: an instruction
//! writing its full output tile, or a column slice of it, on every
//! partition — is one band in the slabs it spans, whatever the partition
//! count; a read of it gives one value run per partition that the reader
//! merges back into one. Adjacent slabs whose band lists continue each
//! other (same partition ranges, origins and partition strides, offsets
//! running on) are merged after every write, so rewriting a tile that was
//! once written in pieces collapses its slabs again.
//!
//! # Cost
//!
//! Writing a rectangle costs O(log S + k × b) with S the slabs of the
//! region, k the slabs it overlaps and b their bands; reading one costs
//! O(log S × k) to find the slabs plus O(partitions × k × b) cheap steps to
//! emit the runs. Storage: one slab and one band per run held. Both arenas
//! are reserved up front from the modules' counts and grow by doubling
//! (fallibly) when a module needs more; freed slabs and bands are reused.
//!
//! # Invariants
//!
//! Within a region, slabs are disjoint and every slab has at least one
//! band; within a slab, bands are disjoint, sorted by `p0`, non-empty,
//! and never [`Origin::Uninit`].

use alloc::vec::Vec;

use super::pieces::{push_capped, push_grow, Pieces};
use super::report::{DataflowError, Origin};
use super::shape::Seg;
use crate::collections::treap::{self, NIL};

#[derive(Copy, Clone, Debug)]
struct Slab {
    start: u64,
    end: u64,
    /// First band, NIL for none.
    band: u32,
    left: u32,
    right: u32,
    prio: u32,
}

treap::treap_pool!(Slab, left, right, prio);

#[derive(Copy, Clone, Debug)]
struct Band {
    p0: u32,
    p1: u32,
    origin: Origin,
    offset: u64,
    pstride: u64,
    /// Next band of the slab (or of the free list).
    next: u32,
}

/// Heap bytes of one run of the state (a slab and a band).
pub(super) const RUN_BYTES: u64 =
    (core::mem::size_of::<Slab>() + core::mem::size_of::<Band>()) as u64;

/// What a rectangle write stores: byte `offset + (p − p0) × pstride +
/// (x − a)` of `origin` at cell (p, x) of the rectangle `[p0, p1) × [a, b)`.
#[derive(Copy, Clone, Debug)]
pub(super) struct Fill {
    pub origin: Origin,
    pub offset: u64,
    pub pstride: u64,
}

/// The value state of one program (see the module doc).
#[derive(Debug, Default)]
pub(super) struct CellMap {
    slabs: Vec<Slab>,
    bands: Vec<Band>,
    /// Treap root per region.
    roots: Vec<u32>,
    free_slab: u32,
    free_band: u32,
    seed: u32,
    /// Scratch: the slabs a write covers, then the ones it leaves.
    seq: Vec<u32>,
    out: Vec<u32>,
    /// Scratch of [`CellMap::read`].
    scratch: ReadScratch,
    /// Most slabs (and bands) the arenas may grow to: the state's share of
    /// a storage limit ([`CellMap::set_run_cap`]); `None`: no limit.
    run_cap: Option<usize>,
}

/// One run of a rectangle's cells ([`CellMap::stored_alike`]), placed
/// relative to the rectangle's corner: addresses `[x0, x1)` of partitions
/// `[q0, q1)` hold byte `value + (q − q0) × pstride + (x − x0)` of
/// `origin` (`pstride` 0 when the run has one partition, where it means
/// nothing).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct RelRun {
    x0: u64,
    x1: u64,
    q0: u32,
    q1: u32,
    origin: Origin,
    value: u64,
    pstride: u64,
}

/// The runs of a rectangle of a state, slab by slab and band by band
/// ([`CellMap::runs_in`]).
struct Runs<'m> {
    map: &'m CellMap,
    root: u32,
    p: (u32, u32),
    x: (u64, u64),
    /// The slab being walked (NIL past the last) and its next band.
    slab: u32,
    band: u32,
}

impl Iterator for Runs<'_> {
    type Item = RelRun;

    fn next(&mut self) -> Option<RelRun> {
        let ((p0, p1), (a, b)) = (self.p, self.x);
        while self.slab != NIL {
            let sl = self.map.slabs[self.slab as usize];
            if sl.start >= b {
                self.slab = NIL;
                break;
            }
            while self.band != NIL {
                let bd = self.map.bands[self.band as usize];
                self.band = bd.next;
                let (q0, q1) = (bd.p0.max(p0), bd.p1.min(p1));
                if q0 >= q1 {
                    continue;
                }
                let (x0, x1) = (sl.start.max(a), sl.end.min(b));
                let value = bd
                    .offset
                    .wrapping_add(((q0 - bd.p0) as u64).wrapping_mul(bd.pstride))
                    .wrapping_add(x0 - sl.start);
                return Some(RelRun {
                    x0: x0 - a,
                    x1: x1 - a,
                    q0: q0 - p0,
                    q1: q1 - p0,
                    origin: bd.origin,
                    value,
                    pstride: if q1 - q0 > 1 { bd.pstride } else { 0 },
                });
            }
            self.slab = self.map.above(self.root, sl.start);
            self.band = self.map.bands_of(self.slab);
        }
        None
    }
}

/// Scratch of a read ([`CellMap::read_with`]): a reader that shares the
/// state (on another thread) brings its own.
#[derive(Debug, Default)]
pub(super) struct ReadScratch {
    /// The (start, end, slab, band cursor) pieces a read covers.
    gather: Vec<(u64, u64, u32, u32)>,
    /// Per segment of a read, its pieces in `gather` and its walks.
    groups: Vec<(u32, u32, u64)>,
}

impl ReadScratch {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.gather, self.groups)
    }
}

/// Pushes a run onto an arena, growing it by doubling but never past `cap`
/// entries: a state that needs more is over its share of the budget.
fn push_run<T>(v: &mut Vec<T>, x: T, cap: Option<usize>) -> Result<(), DataflowError> {
    push_capped(v, x, cap, RUN_BYTES, "the value-run state")
}

/// Whether the pieces one partition read are one run of one origin, each
/// in a band of the same partition stride, and up to which partition those
/// bands all reach: the next partitions then read the same run shifted by
/// the stride, up to there.
#[derive(Copy, Clone, Debug)]
struct Stretch {
    /// The run so far (origin, offset, bytes, partition stride); `None`
    /// before the first piece.
    run: Option<(Origin, u64, u64, u64)>,
    /// The first band end (or the read's end).
    hi: u32,
    broken: bool,
}

/// A run on partition `q` of a stretch: `len` bytes of `origin` from
/// `offset` on, and from `offset + k × pstride` on partition `q + k`.
#[derive(Copy, Clone, Debug)]
struct RunAt {
    origin: Origin,
    offset: u64,
    len: u64,
    pstride: u64,
}

impl Stretch {
    fn new(p1: u32) -> Self {
        Stretch {
            run: None,
            hi: p1,
            broken: false,
        }
    }

    /// The next piece of the partition: `len` bytes of `origin` from
    /// `offset` on, in a band ending at partition `band.0` with partition
    /// stride `band.1` (`None`: no band, uninitialized).
    fn add(&mut self, origin: Origin, offset: u64, len: u64, band: Option<(u32, u64)>) {
        let Some((end, pstride)) = band.filter(|_| !self.broken) else {
            self.broken = true;
            return;
        };
        self.hi = self.hi.min(end);
        match &mut self.run {
            None => self.run = Some((origin, offset, len, pstride)),
            Some((o, off, n, ps))
                if *o == origin && *ps == pstride && off.wrapping_add(*n) == offset =>
            {
                *n += len;
            }
            Some(_) => self.broken = true,
        }
    }

    /// The run of the partition before `q` and the end of the partitions
    /// from `q` on that read it shifted, when there are any.
    fn rest(&self, q: u32) -> Option<(RunAt, u32)> {
        let (origin, offset, len, pstride) = self.run.filter(|_| !self.broken)?;
        (self.hi > q).then_some((
            RunAt {
                origin,
                offset,
                len,
                pstride,
            },
            self.hi,
        ))
    }
}

/// One write of [`CellMap::assign`]: cells `[p0, p1) × [a, b)` now hold
/// `fill`, carried whole through the split and the repaint.
#[derive(Clone, Copy)]
struct Write {
    p0: u32,
    p1: u32,
    a: u64,
    b: u64,
    fill: Fill,
}

/// Stores `x` in a node of `pool`: the head of the free list `free` (linked
/// through `link`, [`NIL`]-terminated) when there is one, else a new node
/// (within `cap`, as [`push_run`]). Returns the node's index.
fn take_node<T>(
    pool: &mut Vec<T>,
    free: &mut u32,
    link: fn(&T) -> u32,
    x: T,
    cap: Option<usize>,
) -> Result<u32, DataflowError> {
    if *free != NIL {
        let n = *free;
        *free = link(&pool[n as usize]);
        pool[n as usize] = x;
        return Ok(n);
    }
    push_run(pool, x, cap)?;
    Ok(pool.len() as u32 - 1)
}

impl CellMap {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.slabs, self.bands, self.roots, self.seq, self.out)
            .saturating_add(self.scratch.heap_bytes())
    }

    /// Reserves room for `runs` slabs and bands, as far as the heap
    /// allows (a refused reservation is left to the growth of the walk,
    /// which reports it).
    pub fn reserve(&mut self, runs: usize) {
        let _ = self
            .slabs
            .try_reserve(runs.saturating_sub(self.slabs.len()));
        let _ = self
            .bands
            .try_reserve(runs.saturating_sub(self.bands.len()));
        let _ = self.seq.try_reserve(64usize.saturating_sub(self.seq.len()));
        let _ = self.out.try_reserve(64usize.saturating_sub(self.out.len()));
        let sc = &mut self.scratch;
        let _ = sc
            .gather
            .try_reserve(64usize.saturating_sub(sc.gather.len()));
        let _ = sc
            .groups
            .try_reserve(64usize.saturating_sub(sc.groups.len()));
    }

    /// Caps the slab and band arenas at `runs` entries each (`None`: no
    /// cap), so that the state's growth stops at its share of a storage
    /// limit instead of doubling past it.
    pub fn set_run_cap(&mut self, runs: Option<usize>) {
        self.run_cap = runs;
    }

    /// Entries the slab and band arenas both hold without growing.
    pub fn arena_capacity(&self) -> usize {
        self.slabs.capacity().min(self.bands.capacity())
    }

    /// Empties the state and sizes it for `regions` regions.
    pub fn clear(&mut self, regions: usize) {
        self.slabs.clear();
        self.bands.clear();
        self.roots.clear();
        self.roots.resize(regions, NIL);
        self.free_slab = NIL;
        self.free_band = NIL;
        self.seed = 0x9E37_79B9;
    }

    /// Slab and band arena entries in use (high-water marks).
    pub fn used(&self) -> usize {
        self.slabs.len().max(self.bands.len())
    }

    /// Reserved arena entries.
    #[cfg(test)]
    pub fn reserved(&self) -> usize {
        self.slabs.capacity().min(self.bands.capacity())
    }

    fn root_of(&self, region: usize) -> Result<u32, DataflowError> {
        self.roots
            .get(region)
            .copied()
            .ok_or(DataflowError::Capacity {
                what: "cell regions",
                reserved: self.roots.len(),
            })
    }

    fn new_slab(&mut self, start: u64, end: u64, band: u32) -> Result<u32, DataflowError> {
        // Deterministic priorities.
        crate::rng::xorshift32(&mut self.seed);
        let s = Slab {
            start,
            end,
            band,
            left: NIL,
            right: NIL,
            prio: self.seed,
        };
        take_node(
            &mut self.slabs,
            &mut self.free_slab,
            |x| x.right,
            s,
            self.run_cap,
        )
    }

    /// Makes every cell of `region` uninitialized, its slabs and bands
    /// back on the free lists.
    pub fn drop_region(&mut self, region: usize) -> Result<(), DataflowError> {
        let root = self.root_of(region)?;
        if root == NIL {
            return Ok(());
        }
        if let Some(r) = self.roots.get_mut(region) {
            *r = NIL;
        }
        let mut stack = core::mem::take(&mut self.seq);
        stack.clear();
        let mut r = push_grow(&mut stack, root, "the slabs of a dropped region");
        while let (Ok(()), Some(t)) = (&r, stack.pop()) {
            let (left, right) = (self.slabs[t as usize].left, self.slabs[t as usize].right);
            self.free_slab(t);
            for c in [left, right] {
                if c != NIL && r.is_ok() {
                    r = push_grow(&mut stack, c, "the slabs of a dropped region");
                }
            }
        }
        stack.clear();
        self.seq = stack;
        r
    }

    fn free_slab(&mut self, s: u32) {
        self.free_bands(self.slabs[s as usize].band);
        self.slabs[s as usize].band = NIL;
        self.slabs[s as usize].right = self.free_slab;
        self.free_slab = s;
    }

    fn new_band(&mut self, b: Band) -> Result<u32, DataflowError> {
        take_node(
            &mut self.bands,
            &mut self.free_band,
            |x| x.next,
            b,
            self.run_cap,
        )
    }

    fn free_bands(&mut self, mut b: u32) {
        while b != NIL {
            let next = self.bands[b as usize].next;
            self.bands[b as usize].next = self.free_band;
            self.free_band = b;
            b = next;
        }
    }

    /// Splits `t` into starts `< key` and starts `>= key`.
    fn split(&mut self, t: u32, key: u64) -> (u32, u32) {
        treap::split(
            &mut self.slabs[..],
            t,
            |p, n| p[n as usize].start < key,
            None,
        )
    }

    /// Merges two treaps, every start of `a` below every start of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        treap::merge(&mut self.slabs[..], a, b, None)
    }

    fn max_node(&self, mut t: u32) -> u32 {
        if t == NIL {
            return NIL;
        }
        while self.slabs[t as usize].right != NIL {
            t = self.slabs[t as usize].right;
        }
        t
    }

    /// Removes the leftmost node of `t`; returns (new root, removed or NIL).
    fn pop_min(&mut self, t: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let (mut parent, mut n) = (NIL, t);
        while self.slabs[n as usize].left != NIL {
            parent = n;
            n = self.slabs[n as usize].left;
        }
        let r = self.slabs[n as usize].right;
        self.slabs[n as usize].right = NIL;
        if parent == NIL {
            (r, n)
        } else {
            self.slabs[parent as usize].left = r;
            (t, n)
        }
    }

    /// Appends the nodes of `t` to `seq` in order, dismantling the tree
    /// (rotating left children up, so no stack is needed).
    fn flatten(&mut self, mut t: u32, seq: &mut Vec<u32>) -> Result<(), DataflowError> {
        while t != NIL {
            let l = self.slabs[t as usize].left;
            if l != NIL {
                self.slabs[t as usize].left = self.slabs[l as usize].right;
                self.slabs[l as usize].right = t;
                t = l;
            } else {
                let r = self.slabs[t as usize].right;
                self.slabs[t as usize].right = NIL;
                push_grow(seq, t, "the slabs one write covers")?;
                t = r;
            }
        }
        Ok(())
    }

    /// Cuts slab `s` at `x` (inside it): `s` keeps `[start, x)`; the new
    /// slab `[x, end)`, with copies of its bands, is returned (not linked).
    fn cut(&mut self, s: u32, x: u64) -> Result<u32, DataflowError> {
        let Slab {
            start, end, band, ..
        } = self.slabs[s as usize];
        let d = x - start;
        let (mut head, mut last) = (NIL, NIL);
        let mut b = band;
        while b != NIL {
            let mut nb = self.bands[b as usize];
            b = nb.next;
            nb.offset = nb.offset.wrapping_add(d);
            nb.next = NIL;
            let n = self.new_band(nb)?;
            if last == NIL {
                head = n;
            } else {
                self.bands[last as usize].next = n;
            }
            last = n;
        }
        self.slabs[s as usize].end = x;
        self.new_slab(x, end, head)
    }

    /// Overwrites partitions `[p0, p1)` of slab `s` with `fill` (shifted to
    /// the slab's start: `fill.offset` is the value at (p0, slab start)).
    fn paint(&mut self, s: u32, p0: u32, p1: u32, fill: Fill) -> Result<(), DataflowError> {
        let (mut prev, mut cur) = (NIL, self.slabs[s as usize].band);
        while cur != NIL {
            let b = self.bands[cur as usize];
            if b.p1 <= p0 {
                prev = cur;
                cur = b.next;
                continue;
            }
            if b.p0 >= p1 {
                break;
            }
            if b.p0 < p0 && b.p1 > p1 {
                // The new band goes inside this one: split off its top.
                let top = Band {
                    p0: p1,
                    offset: b
                        .offset
                        .wrapping_add(((p1 - b.p0) as u64).wrapping_mul(b.pstride)),
                    ..b
                };
                let t = self.new_band(top)?;
                self.bands[cur as usize].p1 = p0;
                self.bands[cur as usize].next = t;
                prev = cur;
                cur = t;
                break;
            }
            if b.p0 < p0 {
                self.bands[cur as usize].p1 = p0;
                prev = cur;
                cur = b.next;
                continue;
            }
            if b.p1 > p1 {
                let x = &mut self.bands[cur as usize];
                x.offset = x
                    .offset
                    .wrapping_add(((p1 - b.p0) as u64).wrapping_mul(b.pstride));
                x.p0 = p1;
                break;
            }
            // Covered: drop it.
            let next = b.next;
            self.bands[cur as usize].next = self.free_band;
            self.free_band = cur;
            if prev == NIL {
                self.slabs[s as usize].band = next;
            } else {
                self.bands[prev as usize].next = next;
            }
            cur = next;
        }
        if fill.origin != Origin::Uninit {
            let n = self.new_band(Band {
                p0,
                p1,
                origin: fill.origin,
                offset: fill.offset,
                pstride: fill.pstride,
                next: cur,
            })?;
            if prev == NIL {
                self.slabs[s as usize].band = n;
            } else {
                self.bands[prev as usize].next = n;
            }
            // Partition neighbours that continue the new band join it.
            let mut n = n;
            if prev != NIL && self.band_continues(prev, n) {
                self.bands[prev as usize].p1 = p1;
                self.bands[prev as usize].next = cur;
                self.bands[n as usize].next = self.free_band;
                self.free_band = n;
                n = prev;
            }
            if cur != NIL && self.band_continues(n, cur) {
                let c = self.bands[cur as usize];
                self.bands[n as usize].p1 = c.p1;
                self.bands[n as usize].next = c.next;
                self.bands[cur as usize].next = self.free_band;
                self.free_band = cur;
            }
        }
        Ok(())
    }

    /// True when band `b` starts where `a` ends and continues its values.
    fn band_continues(&self, a: u32, b: u32) -> bool {
        let (x, y) = (&self.bands[a as usize], &self.bands[b as usize]);
        x.p1 == y.p0
            && x.origin == y.origin
            && x.pstride == y.pstride
            && x.offset
                .wrapping_add(((x.p1 - x.p0) as u64).wrapping_mul(x.pstride))
                == y.offset
    }

    /// True when slab `b` (starting where `a` ends) continues `a`: the same
    /// bands with offsets running on, so the two may be one slab.
    fn continues(&self, a: u32, b: u32) -> bool {
        let (sa, sb) = (&self.slabs[a as usize], &self.slabs[b as usize]);
        if sa.end != sb.start {
            return false;
        }
        let len = sa.end - sa.start;
        let (mut x, mut y) = (sa.band, sb.band);
        while x != NIL && y != NIL {
            let (p, q) = (&self.bands[x as usize], &self.bands[y as usize]);
            if p.p0 != q.p0
                || p.p1 != q.p1
                || p.origin != q.origin
                || p.pstride != q.pstride
                || p.offset.wrapping_add(len) != q.offset
            {
                return false;
            }
            x = p.next;
            y = q.next;
        }
        x == NIL && y == NIL
    }

    /// Appends slab `s` to the output sequence: dropped when it holds
    /// nothing, absorbed by the previous one when it continues it.
    fn emit(&mut self, out: &mut Vec<u32>, s: u32) -> Result<(), DataflowError> {
        if self.slabs[s as usize].band == NIL {
            self.free_slab(s);
            return Ok(());
        }
        if let Some(&last) = out.last() {
            if self.continues(last, s) {
                self.slabs[last as usize].end = self.slabs[s as usize].end;
                self.free_slab(s);
                return Ok(());
            }
        }
        push_grow(out, s, "the slabs one write covers")
    }

    /// Cells `[p0, p1) × [a, b)` of `region` now hold `fill` (see [`Fill`]).
    pub fn assign(
        &mut self,
        region: usize,
        p0: u32,
        p1: u32,
        a: u64,
        b: u64,
        fill: Fill,
    ) -> Result<(), DataflowError> {
        if a >= b || p0 >= p1 {
            return Ok(());
        }
        let root = self.root_of(region)?;
        // A write of exactly one slab's addresses (a tile rewritten whole,
        // the common case) paints that slab in place: one descent instead
        // of the splits and merges. When the painted slab then continues a
        // neighbour, the general write below runs as well (painting the
        // same fill again changes nothing) and joins them, as every write
        // does. An uninitializing write may empty the slab: general path.
        if fill.origin != Origin::Uninit {
            let (prev, s, next) = self.around(root, a);
            if s != NIL && self.slabs[s as usize].start == a && self.slabs[s as usize].end == b {
                self.paint(s, p0, p1, fill)?;
                let joins = (prev != NIL && self.continues(prev, s))
                    || (next != NIL && self.continues(s, next));
                if !joins {
                    return Ok(());
                }
            }
        }
        self.roots[region] = NIL;
        let mut seq = core::mem::take(&mut self.seq);
        let mut out = core::mem::take(&mut self.out);
        let w = Write { p0, p1, a, b, fill };
        let r = self.assign_in(root, region, w, &mut seq, &mut out);
        self.seq = seq;
        self.out = out;
        r
    }

    fn assign_in(
        &mut self,
        root: u32,
        region: usize,
        w: Write,
        seq: &mut Vec<u32>,
        out: &mut Vec<u32>,
    ) -> Result<(), DataflowError> {
        let Write { a, b, .. } = w;
        seq.clear();
        out.clear();
        let (left, r1) = self.split(root, a);
        let (mid, mut right) = self.split(r1, b);
        // Reattach what is split off before any fallible step, so that a
        // failure leaves every slab reachable or freed.
        let lm = self.max_node(left);
        let mut res = Ok(());
        if lm != NIL && self.slabs[lm as usize].end > a {
            match self.cut(lm, a) {
                Ok(c) => res = push_grow(seq, c, "the slabs one write covers"),
                Err(e) => res = Err(e),
            }
        }
        if res.is_ok() {
            res = self.flatten(mid, seq);
        }
        if res.is_ok() {
            if let Some(&last) = seq.last() {
                if self.slabs[last as usize].end > b {
                    match self.cut(last, b) {
                        Ok(t) => right = self.merge(t, right),
                        Err(e) => res = Err(e),
                    }
                }
            }
        }
        if res.is_ok() {
            res = self.repaint(seq, out, w);
        }
        if res.is_err() {
            // The check stops here; the next one clears the arenas. Keep
            // the tree well-formed without the covered slabs.
            self.roots[region] = self.merge(left, right);
            return res;
        }
        // Neighbours that continue the new run join it.
        let mut left = left;
        if let Some(&first) = out.first() {
            if lm != NIL && self.continues(lm, first) {
                self.slabs[lm as usize].end = self.slabs[first as usize].end;
                self.free_slab(first);
                out.remove(0);
            }
        }
        let (rest, rmin) = self.pop_min(right);
        right = rest;
        if rmin != NIL {
            let joined = match out.last() {
                Some(&last) if self.continues(last, rmin) => {
                    self.slabs[last as usize].end = self.slabs[rmin as usize].end;
                    self.free_slab(rmin);
                    true
                }
                None if lm != NIL && self.continues(lm, rmin) => {
                    self.slabs[lm as usize].end = self.slabs[rmin as usize].end;
                    self.free_slab(rmin);
                    true
                }
                _ => false,
            };
            if !joined {
                right = self.merge(rmin, right);
            }
        }
        let mut m = NIL;
        for &s in out.iter() {
            self.slabs[s as usize].left = NIL;
            self.slabs[s as usize].right = NIL;
            m = self.merge(m, s);
        }
        left = self.merge(left, m);
        self.roots[region] = self.merge(left, right);
        res
    }

    /// Paints `[p0, p1)` over the slabs `seq` (sorted, inside `[a, b)`),
    /// filling the gaps between them with new slabs, into `out`.
    fn repaint(
        &mut self,
        seq: &mut Vec<u32>,
        out: &mut Vec<u32>,
        w: Write,
    ) -> Result<(), DataflowError> {
        let Write { p0, p1, a, b, fill } = w;
        let at = |x: u64| Fill {
            offset: fill.offset.wrapping_add(x - a),
            ..fill
        };
        let mut x = a;
        let mut k = 0;
        while k < seq.len() {
            let s = seq[k];
            let (start, end) = (self.slabs[s as usize].start, self.slabs[s as usize].end);
            if start > x && fill.origin != Origin::Uninit {
                let g = self.new_slab(x, start, NIL)?;
                self.paint(g, p0, p1, at(x))?;
                self.emit(out, g)?;
            }
            self.paint(s, p0, p1, at(start))?;
            // Taken out of `seq` before `emit` may free it.
            seq[k] = NIL;
            k += 1;
            self.emit(out, s)?;
            x = end;
        }
        if x < b && fill.origin != Origin::Uninit {
            let g = self.new_slab(x, b, NIL)?;
            self.paint(g, p0, p1, at(x))?;
            self.emit(out, g)?;
        }
        seq.clear();
        Ok(())
    }

    /// The slab with the largest start `<= x`, or NIL.
    fn floor(&self, root: u32, x: u64) -> u32 {
        let (mut t, mut best) = (root, NIL);
        while t != NIL {
            if self.slabs[t as usize].start <= x {
                best = t;
                t = self.slabs[t as usize].right;
            } else {
                t = self.slabs[t as usize].left;
            }
        }
        best
    }

    /// In one descent: the slab with the largest start `<= x` (NIL for
    /// none) and the slabs just before and after it in address order (the
    /// one after: the smallest start `> x`).
    fn around(&self, root: u32, x: u64) -> (u32, u32, u32) {
        let (mut t, mut at, mut before, mut after) = (root, NIL, NIL, NIL);
        while t != NIL {
            if self.slabs[t as usize].start <= x {
                // The descent leaves each earlier `at` to the right, so the
                // last one is `at`'s predecessor unless `at` has a left
                // subtree (whose largest start is then, below).
                before = at;
                at = t;
                t = self.slabs[t as usize].right;
            } else {
                after = t;
                t = self.slabs[t as usize].left;
            }
        }
        if at != NIL && self.slabs[at as usize].left != NIL {
            before = self.max_node(self.slabs[at as usize].left);
        }
        (before, at, after)
    }

    /// The first slab that ends past `x` (the one holding `x`, else the
    /// next one), or NIL: where a walk of the slabs from `x` starts.
    fn first_from(&self, root: u32, x: u64) -> u32 {
        let s = self.floor(root, x);
        if s == NIL || self.slabs[s as usize].end <= x {
            return self.above(root, x);
        }
        s
    }

    /// The first band of slab `s` (NIL for NIL).
    fn bands_of(&self, s: u32) -> u32 {
        if s == NIL {
            NIL
        } else {
            self.slabs[s as usize].band
        }
    }

    /// The slab with the smallest start `> x`, or NIL.
    fn above(&self, root: u32, x: u64) -> u32 {
        let (mut t, mut best) = (root, NIL);
        while t != NIL {
            if self.slabs[t as usize].start > x {
                best = t;
                t = self.slabs[t as usize].left;
            } else {
                t = self.slabs[t as usize].right;
            }
        }
        best
    }

    /// Reads cells `[p0, p1) × segs` of `region` into `out` in traversal
    /// order: partitions outermost, then the segments in order, each as
    /// many times as it is walked.
    pub fn read(
        &mut self,
        region: usize,
        p0: u32,
        p1: u32,
        segs: &[Seg],
        out: &mut Pieces,
    ) -> Result<(), DataflowError> {
        let mut scratch = core::mem::take(&mut self.scratch);
        let r = self.read_with(region, p0, p1, segs, out, &mut scratch);
        self.scratch = scratch;
        r
    }

    /// True when the rectangle `[p0, p1) × [a, b)` of `region` here holds
    /// what `[q0, q0 + (p1 − p0)) × [c, c + (b − a))` of `oregion` holds in
    /// `other`, cell for cell, because both are stored alike: the same
    /// runs (bands clipped to the rectangle, in order) at the same places
    /// relative to the corners, with the same origins, values and
    /// partition strides, and the same cells left uninitialized. False
    /// says nothing: equal contents stored in other runs (a slab split in
    /// one state and whole in the other) compare false, and are for a
    /// read to settle. Only reads both states.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stored_alike(
        &self,
        region: usize,
        (p0, p1): (u32, u32),
        (a, b): (u64, u64),
        other: &CellMap,
        oregion: usize,
        q0: u32,
        c: u64,
    ) -> bool {
        let (Ok(r), Ok(o)) = (self.root_of(region), other.root_of(oregion)) else {
            return false;
        };
        let theirs = other.runs_in(
            o,
            (q0, q0.saturating_add(p1 - p0)),
            (c, c.saturating_add(b - a)),
        );
        self.runs_in(r, (p0, p1), (a, b)).eq(theirs)
    }

    /// The runs of the rectangle `[p0, p1) × [a, b)` of the region whose
    /// treap is `root`, in address then partition order.
    fn runs_in(&self, root: u32, (p0, p1): (u32, u32), (a, b): (u64, u64)) -> Runs<'_> {
        let slab = self.first_from(root, a);
        Runs {
            map: self,
            root,
            p: (p0, p1),
            x: (a, b),
            slab,
            band: self.bands_of(slab),
        }
    }

    /// [`Self::read`] with the scratch of the caller: the state is only
    /// read, so readers on several threads may share it.
    pub fn read_with(
        &self,
        region: usize,
        p0: u32,
        p1: u32,
        segs: &[Seg],
        out: &mut Pieces,
        scratch: &mut ReadScratch,
    ) -> Result<(), DataflowError> {
        let root = self.root_of(region)?;
        let ReadScratch { gather, groups } = scratch;
        gather.clear();
        groups.clear();
        const WHAT: &str = "the runs one read covers";
        for seg in segs {
            let (a, b) = (seg.a, seg.b);
            let g0 = gather.len() as u32;
            let mut x = a;
            let mut s = self.first_from(root, a);
            while x < b {
                if s == NIL || self.slabs[s as usize].start >= b {
                    push_grow(gather, (x, b, NIL, NIL), WHAT)?;
                    break;
                }
                let sl = self.slabs[s as usize];
                if sl.start > x {
                    push_grow(gather, (x, sl.start, NIL, NIL), WHAT)?;
                    x = sl.start;
                }
                let e = sl.end.min(b);
                push_grow(gather, (x, e, s, sl.band), WHAT)?;
                x = e;
                // The next slab only when the segment goes on past this
                // one: each search is a descent from the root.
                if x < b {
                    s = self.above(root, sl.start);
                }
            }
            push_grow(groups, (g0, gather.len() as u32, seg.reps), WHAT)?;
        }
        // One slab piece per partition: a band's partitions are one group.
        if let ([(x0, x1, s, _)], [(_, _, 1)]) = (&gather[..], &groups[..]) {
            let (x0, x1, s) = (*x0, *x1, *s);
            let len = x1 - x0;
            if s == NIL {
                return out.push(Origin::Uninit, 0, len.saturating_mul((p1 - p0) as u64));
            }
            let sl = &self.slabs[s as usize];
            let mut q = p0;
            let mut b = sl.band;
            while q < p1 {
                while b != NIL && self.bands[b as usize].p1 <= q {
                    b = self.bands[b as usize].next;
                }
                let band = (b != NIL).then(|| &self.bands[b as usize]);
                match band {
                    Some(band) if band.p0 <= q => {
                        let k = band.p1.min(p1) - q;
                        let off = band
                            .offset
                            .wrapping_add(((q - band.p0) as u64).wrapping_mul(band.pstride))
                            .wrapping_add(x0 - sl.start);
                        out.push_group(band.origin, off, len, k as u64, band.pstride)?;
                        q += k;
                    }
                    _ => {
                        let next = band.map_or(p1, |band| band.p0.min(p1));
                        out.push(Origin::Uninit, 0, len.saturating_mul((next - q) as u64))?;
                        q = next;
                    }
                }
            }
            return Ok(());
        }
        // Partitions ascend, so each piece's band cursor (the fourth field,
        // from the slab's first band) only moves on.
        if let [(_, _, 1)] = groups[..] {
            // One segment, walked once. When a partition's pieces are one
            // run of one origin, each in a band of the same partition
            // stride, the partitions up to the first band end read the
            // same run shifted by that stride: one group.
            let mut q = p0;
            while q < p1 {
                // Only a partition with more after it can start a stretch.
                let mut stretch = Stretch::new(p1);
                stretch.broken = q + 1 == p1;
                for g in gather.iter_mut() {
                    let (origin, off) = self.piece_at(g, q);
                    let len = g.1 - g.0;
                    out.push(origin, off, len)?;
                    if !stretch.broken {
                        let band = (origin != Origin::Uninit).then(|| &self.bands[g.3 as usize]);
                        stretch.add(origin, off, len, band.map(|b| (b.p1, b.pstride)));
                    }
                }
                q += 1;
                if let Some((r, hi)) = stretch.rest(q) {
                    let next = r.offset.wrapping_add(r.pstride);
                    out.push_group(r.origin, next, r.len, (hi - q) as u64, r.pstride)?;
                    q = hi;
                }
            }
            return Ok(());
        }
        for q in p0..p1 {
            for &(g0, g1, reps) in groups.iter() {
                // A segment that is one piece and walked many times is one
                // group of stride 0; one of several pieces repeats them.
                let (times, each) = if g1 - g0 == 1 { (1, reps) } else { (reps, 1) };
                for t in 0..times {
                    for g in gather[g0 as usize..g1 as usize].iter_mut() {
                        let (origin, off) = if t == 0 {
                            self.piece_at(g, q)
                        } else {
                            self.piece_here(g, q)
                        };
                        out.push_group(origin, off, g.1 - g.0, each, 0)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The value at the start of gathered piece `g` on partition `q`,
    /// after moving its band cursor on to `q` (partitions ascend).
    fn piece_at(&self, g: &mut (u64, u64, u32, u32), q: u32) -> (Origin, u64) {
        let mut b = g.3;
        while b != NIL && self.bands[b as usize].p1 <= q {
            b = self.bands[b as usize].next;
        }
        g.3 = b;
        self.piece_here(g, q)
    }

    /// The value at the start of gathered piece `g` on partition `q`, its
    /// band cursor already at `q`.
    fn piece_here(&self, g: &(u64, u64, u32, u32), q: u32) -> (Origin, u64) {
        let b = g.3;
        if b != NIL {
            let band = &self.bands[b as usize];
            if band.p0 <= q {
                let start = self.slabs[g.2 as usize].start;
                let off = band
                    .offset
                    .wrapping_add(((q - band.p0) as u64).wrapping_mul(band.pstride))
                    .wrapping_add(g.0 - start);
                return (band.origin, off);
            }
        }
        (Origin::Uninit, 0)
    }

    /// Pairs of neighbouring slabs of `region` whose values continue each
    /// other, which every write joins (for tests: 0 after any write).
    #[cfg(test)]
    pub fn continuing_neighbours(&self, region: usize) -> usize {
        let root = self.roots[region];
        let (mut n, mut prev) = (0, NIL);
        let mut s = self.first_from(root, 0);
        while s != NIL {
            if prev != NIL && self.continues(prev, s) {
                n += 1;
            }
            prev = s;
            s = self.above(root, self.slabs[s as usize].start);
        }
        n
    }

    /// Slabs held by `region` (for tests).
    #[cfg(test)]
    pub fn slabs_in(&self, region: usize) -> usize {
        let root = self.roots[region];
        let mut n = 0;
        let mut s = self.first_from(root, 0);
        while s != NIL {
            n += 1;
            s = self.above(root, self.slabs[s as usize].start);
        }
        n
    }
}
