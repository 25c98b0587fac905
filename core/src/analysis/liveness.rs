//! Live intervals of memory locations and scalar registers.
//!
//! A value is *live at* position `p` when `start <= p <= end`, where, before
//! the loop rule, `start` is its first access (position 0 for module inputs)
//! and `end` its last access (the last position for module outputs). The loop
//! rule of docs/SEMANTICS.md §1 then widens intervals:
//! - a value accessed inside loop `L` but defined before `L` starts is live
//!   until `L`'s last position (the next iteration reads it again);
//! - a value whose first access is a read inside `L` and that `L` also
//!   writes later is carried around the back edge: live over all of `L`;
//! - a value that `L` writes only in part (a slice, or a pattern that moves
//!   with the loop) and that is accessed after that write keeps, at the
//!   next iteration's start, the bytes earlier iterations wrote: live over
//!   all of `L` (the bytes a later iteration writes are not the ones it
//!   reads back, in general) — unless the write provably covers what the
//!   iteration reads back: it is a plain dense write, the location's first
//!   access in the loop nest, not read by its own instruction, and every
//!   later access in that nest lies inside the write's innermost loop and
//!   inside its rows and bytes (`covering_write`). Then no iteration
//!   observes an earlier one's bytes (a one-partition tile loaded and read
//!   back each iteration, say).
//!
//! The first and the third case skip a loop whose first access of the
//! value (in position order over the loop's span) writes all of it without
//! reading it: every iteration then starts from that write, and nothing the
//! code before the loop or an earlier iteration left is read (a tile loaded
//! whole, then patched in part and read, in each iteration). A loop around
//! that one whose own first access is something else still applies.
//!
//! A loop that runs once (trip count 1) has no back edge and no next
//! iteration: the rule leaves it out ([`LinearOrder::repeating_span`]).
//!
//! Per value the accesses are kept in position order (a CSR), which gives the
//! remaining-use counts the linear scan needs: `remaining_uses(v, p)` counts
//! accesses after `p`, plus one pseudo-use at `end` when the loop rule pushed
//! `end` beyond the last access, so that "no remaining uses" means exactly
//! "dead after `p`".

use alloc::vec::Vec;

use super::order::LinearOrder;
use crate::ir::{
    Capacity, Column, EntityRef, Inst, InstFlags, Loop, MemFlags, MemLoc, Module, Reg,
};
use crate::storage::grow;

/// `start` of a value that is never live.
pub const NOT_LIVE: u32 = u32::MAX;

/// An access that writes the whole value.
const FULL_WRITE: u8 = 1;
/// An access that writes part of a location (a slice, or a pattern that
/// moves): the rest keeps what it held.
const PARTIAL_WRITE: u8 = 2;

/// An inclusive position interval.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Interval {
    /// First live position.
    pub start: u32,
    /// Last live position.
    pub end: u32,
}

impl Interval {
    /// True when the two intervals share a position.
    #[inline]
    pub const fn overlaps(self, other: Interval) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    /// True when `p` is inside.
    #[inline]
    pub const fn contains(self, p: u32) -> bool {
        self.start <= p && p <= self.end
    }
}

/// Live intervals and access lists of one kind of value (`MemLoc` or `Reg`).
#[derive(Clone, Debug)]
pub struct Liveness<K> {
    start: Column<K, u32>,
    end: Column<K, u32>,
    /// CSR offsets into `acc_pos`, one more entry than values.
    acc_off: Vec<u32>,
    acc_pos: Vec<u32>,
    /// 0 for a read, [`FULL_WRITE`] or [`PARTIAL_WRITE`], parallel to
    /// `acc_pos`.
    acc_write: Vec<u8>,
    /// Scratch: fill cursor per value.
    cursor: Vec<u32>,
}

/// Liveness of memory locations.
pub type MemLiveness = Liveness<MemLoc>;
/// Liveness of scalar registers.
pub type RegLiveness = Liveness<Reg>;

impl<K: EntityRef> Default for Liveness<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef> Liveness<K> {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.start,
            self.end,
            self.acc_off,
            self.acc_pos,
            self.acc_write,
            self.cursor
        )
    }

    /// Empty storage.
    pub fn new() -> Self {
        Liveness {
            start: Column::new(),
            end: Column::new(),
            acc_off: Vec::new(),
            acc_pos: Vec::new(),
            acc_write: Vec::new(),
            cursor: Vec::new(),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// The live interval of `v`, or `None` when it is never live.
    #[inline]
    pub fn interval(&self, v: K) -> Option<Interval> {
        let s = *self.start.get(v)?;
        (s != NOT_LIVE).then(|| Interval {
            start: s,
            end: self.end[v],
        })
    }

    /// Positions of every access of `v`, ascending.
    pub fn accesses(&self, v: K) -> &[u32] {
        let i = v.index();
        match (self.acc_off.get(i), self.acc_off.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.acc_pos[a as usize..b as usize],
            _ => &[],
        }
    }

    /// For each access of `v` (parallel to [`Liveness::accesses`]), true when
    /// it writes.
    pub fn access_writes(&self, v: K) -> impl Iterator<Item = bool> + '_ {
        let i = v.index();
        let (a, b) = match (self.acc_off.get(i), self.acc_off.get(i + 1)) {
            (Some(&a), Some(&b)) => (a as usize, b as usize),
            _ => (0, 0),
        };
        self.acc_write[a..b].iter().map(|&w| w != 0)
    }

    /// The index (into [`Liveness::accesses`]) of the last write among the
    /// first `n` accesses of `v`: the write whose value the accesses after
    /// those `n` see. `None` when none of them writes.
    pub fn last_write_among(&self, v: K, n: usize) -> Option<usize> {
        self.access_writes(v)
            .take(n)
            .enumerate()
            .filter(|&(_, w)| w)
            .last()
            .map(|(k, _)| k)
    }

    /// Number of reads and writes of `v`.
    pub fn access_count(&self, v: K) -> u32 {
        self.accesses(v).len() as u32
    }

    /// Accesses of `v` strictly after position `p`, plus the loop rule's
    /// pseudo-use at `end` (see the module doc). Zero means dead after `p`.
    pub fn remaining_uses(&self, v: K, p: u32) -> u32 {
        let Some(iv) = self.interval(v) else {
            return 0;
        };
        let acc = self.accesses(v);
        let after = (acc.len() - acc.partition_point(|&q| q <= p)) as u32;
        let beyond_last = acc.last().map_or(true, |&last| iv.end > last);
        after + (beyond_last && iv.end > p) as u32
    }

    /// The first access at or after `p`, if any.
    pub fn next_access(&self, v: K, p: u32) -> Option<u32> {
        let acc = self.accesses(v);
        acc.get(acc.partition_point(|&q| q < p)).copied()
    }

    /// Bytes of storage held.
    pub fn reserved_bytes(&self) -> usize {
        self.start.reserved_bytes() * 2
            + (self.acc_off.capacity() + self.acc_pos.capacity() + self.cursor.capacity()) * 4
            + self.acc_write.capacity()
    }

    /// Sizes the storage for `values` values with `accesses` accesses in all.
    fn reserve_for(&mut self, values: usize, accesses: usize) {
        for c in [&mut self.start, &mut self.end] {
            c.reserve(values.saturating_sub(c.len()));
        }
        grow(&mut self.acc_off, values + 1);
        grow(&mut self.cursor, values);
        grow(&mut self.acc_pos, accesses);
        grow(&mut self.acc_write, accesses);
    }

    /// Shared construction: `each` calls its callback with `(value, kind)`
    /// for every access of the instruction, the kind (read, full or partial
    /// write) worked out only when its `bool` asks for it: the first of the
    /// two walks only counts accesses.
    fn build<F>(&mut self, m: &Module, order: &LinearOrder, n_values: usize, mut each: F)
    where
        F: FnMut(&Module, Inst, bool, &mut dyn FnMut(K, u8)),
    {
        self.acc_off.clear();
        self.acc_off.resize(n_values + 1, 0);
        for &i in order.insts() {
            let off = &mut self.acc_off;
            each(m, i, false, &mut |v: K, _w| {
                if let Some(c) = off.get_mut(v.index() + 1) {
                    *c += 1;
                }
            });
        }
        for k in 1..self.acc_off.len() {
            self.acc_off[k] += self.acc_off[k - 1];
        }
        let total = self.acc_off.last().copied().unwrap_or(0) as usize;
        // No clearing: the fill below writes every slot under `total`
        // exactly once (the cursors walk each value's counted range), so
        // only growth needs initializing.
        self.acc_pos.resize(total, 0);
        self.acc_write.resize(total, 0);
        self.cursor.clear();
        self.cursor.extend_from_slice(&self.acc_off[..n_values]);
        for (p, &i) in order.insts().iter().enumerate() {
            let (cursor, pos, wr) = (&mut self.cursor, &mut self.acc_pos, &mut self.acc_write);
            each(m, i, true, &mut |v: K, w| {
                if let Some(c) = cursor.get_mut(v.index()) {
                    let slot = *c as usize;
                    pos[slot] = p as u32;
                    wr[slot] = w;
                    *c += 1;
                }
            });
        }
        self.start.clear();
        self.end.clear();
        self.start.resize(n_values, NOT_LIVE);
        self.end.resize(n_values, 0);
    }

    /// Computes `[start, end]` for `v` from its accesses, the input/output
    /// pins, and the loop rule.
    fn finish_value(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        v: K,
        live_from_entry: bool,
        live_to_exit: bool,
        covers: &CoversFn<'_>,
    ) {
        let n = order.len() as u32;
        let (a, b) = (
            self.acc_off[v.index()] as usize,
            self.acc_off[v.index() + 1] as usize,
        );
        if a == b && !live_from_entry && !live_to_exit || n == 0 {
            return;
        }
        let first = if a < b { self.acc_pos[a] } else { 0 };
        let last = if a < b { self.acc_pos[b - 1] } else { 0 };
        let mut start = if live_from_entry { 0 } else { first };
        let mut end = if live_to_exit { n - 1 } else { last };
        // The first access of the value in the span `[ls, le]` (which
        // holds one of its accesses) writes all of it: every iteration of a
        // loop with that span starts from that write alone, reading nothing
        // an earlier iteration or the code before the loop left (an
        // instruction's reads are recorded before its writes, so one that
        // reads and writes the value does not count).
        let killed_at_start = |ls: u32| {
            let first = a + self.acc_pos[a..b].partition_point(|&q| q < ls);
            self.acc_write[first] == FULL_WRITE
        };
        // Loop rule, part 1: accessed in a loop that starts after the
        // definition, unless each iteration writes it whole first.
        for k in a..b {
            let p = self.acc_pos[k];
            let mut l = order.loop_at(p);
            let mut widest = end;
            while l.is_valid() {
                if let Some((ls, le)) = order.repeating_span(m, l) {
                    if ls > start && !killed_at_start(ls) {
                        widest = widest.max(le);
                    }
                }
                l = m.loops().parent[l];
            }
            end = widest;
        }
        // Loop rule, part 3: written in part inside a loop and accessed
        // after that write: earlier iterations' bytes are carried.
        // A covering write vouches for every later access of its nest, the
        // nest's other partial writes included.
        let mut vouched_until: Option<u32> = None;
        for k in a..b {
            let p = self.acc_pos[k];
            if self.acc_write[k] != PARTIAL_WRITE
                || p >= end
                || vouched_until.is_some_and(|e| p <= e)
            {
                continue;
            }
            // Only the loops around the write whose iterations do not
            // begin by writing all of the value carry bytes of one
            // iteration's partial write into the next.
            let mut nest: Option<(u32, u32)> = None;
            let mut l = order.loop_at(p);
            while l.is_valid() {
                if let Some((ls, le)) = order.repeating_span(m, l) {
                    if !killed_at_start(ls) {
                        nest = Some(nest.map_or((ls, le), |(s, e)| (s.min(ls), e.max(le))));
                    }
                }
                l = m.loops().parent[l];
            }
            if nest.is_none() {
                continue;
            }
            let span = match covers(&self.acc_pos[a..b], k - a) {
                Some(sweep) => {
                    vouched_until = nest.map(|(_, e)| e);
                    sweep
                }
                None => nest,
            };
            if let Some((ls, le)) = span {
                start = start.min(ls);
                end = end.max(le);
            }
        }
        // Loop rule, part 2: read first, written later in the same loop.
        if a < b && self.acc_write[a] == 0 && !live_from_entry {
            let last_write = (a..b)
                .rev()
                .find(|&k| self.acc_write[k] != 0)
                .map(|k| self.acc_pos[k]);
            if let Some(w) = last_write {
                let mut l: Loop = order.loop_at(first);
                let mut carried: Option<(u32, u32)> = None;
                while l.is_valid() {
                    if let Some((ls, le)) = order.repeating_span(m, l) {
                        if w > first && w <= le {
                            carried = Some((ls, le));
                        }
                    }
                    l = m.loops().parent[l];
                }
                if let Some((ls, le)) = carried {
                    start = start.min(ls);
                    end = end.max(le);
                }
            }
        }
        self.start[v] = start;
        self.end[v] = end;
    }
}

/// The loop rule's covering test ([`covering_write`] for locations): given
/// a value's access positions and the index of a partial write among them,
/// `None` when the write covers nothing, else the span it vouches for.
type CoversFn<'a> = dyn Fn(&[u32], usize) -> Option<Option<(u32, u32)>> + 'a;

/// Whether the partial write of `v` at `acc[k]` covers everything the loop
/// nest around it reads of `v` afterwards, so that the loop rule for
/// partial writes need not carry `v` over the whole nest (see the module
/// doc).
///
/// The write may *sweep*: move with the induction variables of the `d`
/// loops directly around it (innermost first, every trip count known), its
/// terms tiling a dense byte range row by row (the strides, sorted, are the
/// per-iteration width times the product of the faster loops' trips).
/// After the innermost `d` loops complete, the write has covered that
/// range. The accesses of `v` after it must then lie in the same iteration
/// of the loop around the sweep (the write's own loop when `d = 0`) and
/// inside the covered rectangle. Then the write needs to be carried over
/// the sweep's loops only: `Some` of that span (`Some(None)` when it does
/// not sweep). `None` when not shown to cover (conservative): the full
/// rule applies.
fn covering_write(
    m: &Module,
    order: &LinearOrder,
    v: MemLoc,
    acc: &[u32],
    k: usize,
) -> Option<Option<(u32, u32)>> {
    let p = acc[k];
    let (outer_start, outer_end) = order.outermost_loop_span(m, p)?;
    // The write is the nest's first access of `v`, alone in its
    // instruction.
    if k > 0 && acc[k - 1] >= outer_start {
        return None;
    }
    let i = order.inst_at(p);
    if m.inputs(i).any(|a| m.aps().loc[a] == v) {
        return None;
    }
    let mut writes = m.outputs(i).filter(|&a| m.aps().loc[a] == v);
    let (Some(w), None) = (writes.next(), writes.next()) else {
        return None;
    };
    let ext = m.ap_ext(w);
    if ext.pstep.is_some() || ext.reg.is_some() || !m.is_contiguous(w) {
        return None;
    }
    // The sweep: its loops are the innermost `d` around the write.
    let width = m.ap_bytes_per_partition(w);
    let d = ext.terms.len();
    let mut strides: arrayvec::ArrayVec<(i64, u32), { crate::ir::MAX_IV_TERMS }> =
        arrayvec::ArrayVec::new();
    let mut l = m.inst_loop(i);
    for _ in 0..d {
        if !l.is_valid() {
            return None;
        }
        let t = ext.terms.iter().find(|t| t.lp == l)?;
        let trip = m.loops().trip[l];
        if t.parts != 0 || t.wraps() || trip == crate::ir::UNKNOWN_TRIP || trip == 0 {
            return None;
        }
        strides.push((t.bytes, trip));
        l = m.loops().parent[l];
    }
    // `l` is now the loop whose one iteration holds the whole sweep.
    strides.sort_unstable();
    let mut covered = width as i64;
    for &(bytes, trip) in &strides {
        if bytes != covered {
            return None;
        }
        covered = covered.saturating_mul(trip as i64);
    }
    let (lo, hi) = m.ap_byte_span(w)?;
    if (hi - lo) as i64 != covered {
        return None;
    }
    let (r0, r1) = m.ap_rows(w);
    // The sweep ends with its outermost loop; what follows must stay in
    // the iteration that holds it: `l` (the write's own loop when `d = 0`).
    let (after_sweep, holder, sweep_span) = if d == 0 {
        (p, m.inst_loop(i), None)
    } else {
        let mut top = m.inst_loop(i);
        for _ in 1..d {
            top = m.loops().parent[top];
        }
        let (top_start, top_end) = order.loop_span(top)?;
        (top_end, l, Some((top_start, top_end)))
    };
    let holder_end = if holder.is_valid() {
        match order.loop_span(holder) {
            Some((_, e)) => e,
            None => return None,
        }
    } else {
        // The sweep is the whole nest: nothing in it comes after.
        outer_end
    };
    let inside = |a: crate::ir::Ap| {
        let (x0, x1) = m.ap_rows(a);
        r0 <= x0
            && x1 <= r1
            && m.ap_byte_span(a)
                .is_some_and(|(xl, xh)| lo <= xl && xh <= hi)
    };
    // Inside the sweep, an access in the write's iteration must stay in the
    // slice that iteration wrote: the same sweep terms, and a static part
    // (moved only by loops nested inside the write's loop) within the
    // write's static part.
    let w_loop = m.inst_loop(i);
    let inner_end = order.loop_span(w_loop).map_or(p, |(_, e)| e);
    let (w_lo, w_hi) = static_span(m, w)?;
    let w_rows = (
        m.aps().part_start[w] as u32,
        m.aps().part_start[w] as u32 + m.aps().part_count[w] as u32,
    );
    let in_slice = |a: crate::ir::Ap| -> bool {
        let e = m.ap_ext(a);
        if e.pstep.is_some() || e.reg.is_some() {
            return false;
        }
        if ext.terms.iter().any(|t| !e.terms.contains(t)) {
            return false;
        }
        let Some((mut lo, mut hi)) = static_span(m, a) else {
            return false;
        };
        for t in e.terms.iter().filter(|t| !ext.terms.contains(t)) {
            let trip = m.loops().trip[t.lp];
            if t.parts != 0 || trip == crate::ir::UNKNOWN_TRIP || !nested_in(m, t.lp, w_loop) {
                return false;
            }
            let reach = t
                .bytes
                .saturating_mul(t.indices(trip).saturating_sub(1) as i64);
            lo += reach.min(0);
            hi += reach.max(0);
        }
        let r0 = m.aps().part_start[a] as u32;
        let r1 = r0 + m.aps().part_count[a] as u32;
        w_rows.0 <= r0 && r1 <= w_rows.1 && w_lo <= lo && hi <= w_hi
    };
    let covered = acc[k + 1..]
        .iter()
        .take_while(|&&q| q <= outer_end)
        .all(|&q| {
            let j = order.inst_at(q);
            let mine = m
                .inputs(j)
                .chain(m.outputs(j))
                .filter(|&a| m.aps().loc[a] == v);
            if q <= after_sweep {
                q <= inner_end && { mine }.all(in_slice)
            } else {
                q <= holder_end && { mine }.all(inside)
            }
        });
    // The slices earlier iterations of the sweep wrote are carried over
    // the sweep's loops (nothing beyond them).
    covered.then_some(sweep_span)
}

/// The byte range `[lo, hi)` a pattern touches in each partition with every
/// loop and register term at zero (its plain part), relative to its
/// location.
fn static_span(m: &Module, a: crate::ir::Ap) -> Option<(i64, i64)> {
    let (lo, hi) = crate::ir::ap::element_span(m.ap_dims(a))?;
    let es = m.aps().elem_size[a] as i64;
    let base = m.aps().offset[a] as i64;
    Some((base + lo * es, base + hi * es))
}

/// True when loop `inner` is nested strictly inside loop `outer`.
fn nested_in(m: &Module, inner: Loop, outer: Loop) -> bool {
    let mut l = m.loops().parent[inner];
    while l.is_valid() {
        if l == outer {
            return true;
        }
        l = m.loops().parent[l];
    }
    false
}

/// A kind of value liveness is computed for: memory locations (accessed
/// through access patterns) or scalar registers (through register operands).
pub trait LiveValue: EntityRef {
    /// Values and accesses a module within `cap` holds at the most: the
    /// bounds [`Liveness::reserve`] sizes for.
    fn bounds(cap: &Capacity) -> (usize, usize);

    /// Recomputes `l` for every value of this kind in `m`.
    fn compute(l: &mut Liveness<Self>, m: &Module, order: &LinearOrder);
}

impl<K: LiveValue> Liveness<K> {
    /// Liveness of every value of this kind in `m` (allocates its storage).
    pub fn of(m: &Module, order: &LinearOrder) -> Self {
        let mut l = Self::new();
        l.compute(m, order);
        l
    }

    /// Sizes the storage for a module of up to `cap` entities (totals, e.g.
    /// [`Module::capacity`]; [`LiveValue::bounds`]: every access is one
    /// access pattern of a location, or one register operand). Afterwards
    /// [`Self::compute`] on any module within `cap` does not allocate.
    pub fn reserve(&mut self, cap: &Capacity) {
        let (values, accesses) = K::bounds(cap);
        self.reserve_for(values, accesses);
    }

    /// Recomputes for `m`, reusing storage.
    pub fn compute(&mut self, m: &Module, order: &LinearOrder) {
        K::compute(self, m, order);
    }
}

impl LiveValue for MemLoc {
    fn bounds(cap: &Capacity) -> (usize, usize) {
        (cap.mems, cap.aps)
    }

    fn compute(l: &mut Liveness<MemLoc>, m: &Module, order: &LinearOrder) {
        l.build(m, order, m.num_mems(), |m, i, kinds, f| {
            for a in m.inputs(i) {
                f(m.aps().loc[a], 0);
            }
            for a in m.outputs(i) {
                let w = if kinds && m.is_full_access(a) {
                    FULL_WRITE
                } else {
                    PARTIAL_WRITE
                };
                f(m.aps().loc[a], w);
            }
        });
        for v in m.mems().space.keys() {
            let flags = m.mems().flags[v];
            l.finish_value(
                m,
                order,
                v,
                flags.contains(MemFlags::INPUT),
                flags.contains(MemFlags::OUTPUT),
                &|acc, k| covering_write(m, order, v, acc, k),
            );
        }
    }
}

impl Liveness<MemLoc> {
    /// True when two locations interfere: live at a common position, except
    /// where one dies at an in-place instruction that defines the other.
    pub fn interferes(&self, m: &Module, order: &LinearOrder, a: MemLoc, b: MemLoc) -> bool {
        let (Some(ia), Some(ib)) = (self.interval(a), self.interval(b)) else {
            return false;
        };
        if !ia.overlaps(ib) {
            return false;
        }
        !(self.in_place_handoff(m, order, a, b) || self.in_place_handoff(m, order, b, a))
    }

    /// True when `dying` ends exactly where `born` starts, at an in-place
    /// instruction that reads `dying` and writes `born`.
    pub fn in_place_handoff(
        &self,
        m: &Module,
        order: &LinearOrder,
        dying: MemLoc,
        born: MemLoc,
    ) -> bool {
        let (Some(d), Some(b)) = (self.interval(dying), self.interval(born)) else {
            return false;
        };
        if d.end != b.start {
            return false;
        }
        let i = order.inst_at(d.end);
        if !i.is_valid() || !m.insts().flags[i].contains(InstFlags::IN_PLACE) {
            return false;
        }
        let reads = m.inputs(i).any(|x| m.aps().loc[x] == dying);
        let writes_dying = m.outputs(i).any(|x| m.aps().loc[x] == dying);
        let writes = m.outputs(i).any(|x| m.aps().loc[x] == born);
        reads && writes && !writes_dying
    }
}

impl LiveValue for Reg {
    fn bounds(cap: &Capacity) -> (usize, usize) {
        (cap.regs, cap.reg_operands)
    }

    fn compute(l: &mut Liveness<Reg>, m: &Module, order: &LinearOrder) {
        l.build(m, order, m.num_regs(), |m, i, _, f| {
            for &r in m.uses(i) {
                f(r, 0);
            }
            for &r in m.defs(i) {
                f(r, FULL_WRITE);
            }
        });
        for v in m.regs().lanes.keys() {
            l.finish_value(m, order, v, false, false, &|_, _| None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, Opcode, Space, SubOp};
    use crate::target::Target;
    use crate::testing::{counter_loop, dram_io, exp, tiles};

    /// x(in) → t = load x; loop 3 { u = exp t; v = exp u }; y = save v.
    fn loop_module() -> (Module, [MemLoc; 5]) {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let [x, y] = dram_io(&mut b, 128, 64, 1);
        let [t, u, v] = tiles(&mut b, Space::Sb, ["t", "u", "v"], 128, 64, 1);
        b.func("main").unwrap();
        b.load(t, x, 0).unwrap(); // 0
        b.begin_loop(3).unwrap();
        exp(&mut b, u, t); // 1
        exp(&mut b, v, u); // 2
        b.end_loop().unwrap();
        b.save(y, v, 0).unwrap(); // 3
        (m, [x, y, t, u, v])
    }

    #[test]
    fn hand_computed_intervals_with_loop_extension() {
        let (m, [x, y, t, u, v]) = loop_module();
        let o = LinearOrder::of(&m);
        assert_eq!(o.len(), 4);
        let l = MemLiveness::of(&m, &o);
        assert_eq!(l.interval(x), Some(Interval { start: 0, end: 0 }));
        assert_eq!(l.interval(y), Some(Interval { start: 3, end: 3 }));
        // t is defined before the loop and read in it: live to the loop end.
        assert_eq!(l.interval(t), Some(Interval { start: 0, end: 2 }));
        assert_eq!(l.interval(u), Some(Interval { start: 1, end: 2 }));
        assert_eq!(l.interval(v), Some(Interval { start: 2, end: 3 }));
        // Remaining uses: t is accessed at 0 and 1; the loop rule adds a pseudo-use at 2.
        assert_eq!(l.remaining_uses(t, 0), 2);
        assert_eq!(l.remaining_uses(t, 1), 1);
        assert_eq!(l.remaining_uses(t, 2), 0);
        assert_eq!(l.remaining_uses(v, 2), 1);
        assert_eq!(l.remaining_uses(v, 3), 0);
        assert!(l.interferes(&m, &o, t, u));
        assert!(!l.interferes(&m, &o, u, y));
    }

    #[test]
    fn carried_around_the_back_edge() {
        // loop 2 { o = exp acc; acc = exp o } : acc is read before it is written.
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let [pre, acc, o] = tiles(&mut b, Space::Sb, ["pre", "acc", "o"], 128, 64, 1);
        b.func("f").unwrap();
        b.op(Opcode::Memset, &[b.full(pre)], &[]).unwrap(); // 0
        b.begin_loop(2).unwrap();
        b.compute(
            Opcode::Activation,
            SubOp::Exp,
            o,
            &[acc, pre],
            Default::default(),
        )
        .unwrap(); // 1
        exp(&mut b, acc, o); // 2
        b.end_loop().unwrap();
        let ord = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &ord);
        assert_eq!(l.interval(acc), Some(Interval { start: 1, end: 2 }));
        assert_eq!(l.interval(o), Some(Interval { start: 1, end: 2 }));
        assert_eq!(l.interval(pre), Some(Interval { start: 0, end: 2 }));
    }

    #[test]
    fn in_place_handoff_does_not_interfere() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let [a, c, d] = tiles(&mut b, Space::Sb, ["a", "c", "d"], 128, 64, 1);
        b.func("f").unwrap();
        b.op(Opcode::Memset, &[b.full(a)], &[]).unwrap();
        b.compute(Opcode::Activation, SubOp::Exp, c, &[a], InstFlags::IN_PLACE)
            .unwrap();
        exp(&mut b, d, c);
        let o = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &o);
        assert!(!l.interferes(&m, &o, a, c));
        assert!(l.interferes(&m, &o, c, d));
    }

    #[test]
    fn register_intervals() {
        let (m, [i, one, k, z]) = counter_loop();
        let o = LinearOrder::of(&m);
        let l = RegLiveness::of(&m, &o);
        assert_eq!(l.interval(i), Some(Interval { start: 0, end: 4 }));
        assert_eq!(l.interval(one), Some(Interval { start: 1, end: 4 }));
        assert_eq!(l.interval(k), Some(Interval { start: 3, end: 5 }));
        assert_eq!(l.interval(z), Some(Interval { start: 5, end: 6 }));
        assert_eq!(o.loop_span(Loop::new(0)), Some((2, 4)));
    }
}
