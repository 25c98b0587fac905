//! The split round: where an on-chip space runs over at a point, tensors
//! live there are split around it, best first, until what they free there
//! covers the overflow. One mechanism for both SB allocators: the coloring
//! allocator runs a round per failed coloring, the linear scan's restarts
//! run one on their restart point (see [`crate::mem::lsa`]), so both
//! consider the same splits and price them alike. A round may serve many
//! points at once ([`SplitRound::run_points`], [`RoundPoints`]): a long
//! module runs over the capacity stretch after stretch.
//!
//! A tensor enters a round by its better plan ([`super::spill`]): a plain
//! split (stored after its last access before the point, reloaded before
//! the next one; rematerialized from the DRAM it was loaded from when that
//! is unwritten in between), a loop-invariant split (two copies, the first
//! reloaded before the loop), or per-iteration slices of a loop. Ranked by
//! the bytes freed over the positions the split covers per DMA cycle (by
//! bytes alone with `by_bytes`, as the reference's `--gca-dma-optlevel 0`).
//!
//! Invariants: the round adds, per split, at most one DRAM slot and per
//! reload copy two instructions, two locations and four patterns (a copy's
//! share of the caller's headroom, [`RoundParams::reloads_left`] of them);
//! its tables are reserved once ([`SplitRound::reserve`]), so a round
//! allocates nothing.

use alloc::vec::Vec;
use core::fmt::Write as _;

use super::spill::{
    add_reload_copy, add_slot, best_slice_split, finalize, invariant_remat, invariant_score,
    invariant_split, loop_split_ok, reload_point, reload_traffic, remat_from, slice_remat,
    slice_traffic, spill_score, store_traffic, ReloadPoint, Remat, SliceSplit, SpillRecord,
    SpillView,
};
use crate::analysis::{Bounds, LinearOrder, LiveSets, MemLiveness};
use crate::ir::{IrError, MemFlags, MemLoc, Module, Space};

/// One candidate of a round: its rank (higher first), the tensor, and how
/// it would be split.
#[derive(Copy, Clone, Debug)]
struct Candidate {
    score: u64,
    v: MemLoc,
    plan: Plan,
}

#[derive(Copy, Clone, Debug)]
enum Plan {
    /// Around the point: the store after `before` (the last access before
    /// it, or the last write before the loop for a loop-invariant split),
    /// the reload before `after`, and for a loop-invariant split
    /// ([`invariant_split`]) its first copy's reload.
    Split {
        before: u32,
        after: u32,
        first: Option<ReloadPoint>,
    },
    /// Per-iteration slices of a loop around the point, or of a later loop
    /// that holds the tensor's next access ([`best_slice_split`]).
    Slice(SliceSplit),
}

/// What a round is asked to do.
#[derive(Copy, Clone, Debug)]
pub struct RoundParams<'a> {
    /// The space that ran over.
    pub space: Space,
    /// The position where it ran over.
    pub at: u32,
    /// Bytes per partition missing there (at least one split is made when
    /// any candidate exists).
    pub overflow: u64,
    /// Reload copies the caller's headroom still holds.
    pub reloads_left: usize,
    /// Rank by bytes alone (`--gca-dma-optlevel 0`): one split per round.
    pub by_bytes: bool,
    /// The number of the round's first split, for the names.
    pub first: u32,
    /// Marks the names of what the round adds (`<tensor>_<prefix><what><n>`).
    pub prefix: &'a str,
}

/// What a round did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundOutcome {
    /// Tensors split.
    pub spills: u32,
    /// Reload copies made.
    pub reloads: u32,
    /// Splits whose reloads read the DRAM the value came from (no store).
    pub remats: u32,
    /// Bytes the inserted DMAs move as the program runs.
    pub bytes: u64,
    /// Their DMA cycles under the target's model.
    pub cycles: u64,
    /// Bytes per partition the splits free at their points (summed over
    /// a round's points).
    pub freed: u64,
}

/// The round's reusable tables.
#[derive(Debug, Default)]
pub struct SplitRound {
    candidates: Vec<Candidate>,
    records: Vec<SpillRecord>,
}

impl SplitRound {
    /// Room for `candidates` tensors live at a point and `records` reload
    /// copies.
    pub fn reserve(&mut self, candidates: usize, records: usize) {
        crate::storage::grow(&mut self.candidates, candidates);
        crate::storage::grow(&mut self.records, records);
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.candidates, self.records)
    }

    /// Splits tensors of `p.space` live at `p.at` in `m` (described by
    /// `order` and `live`), best first, until they free `p.overflow` bytes
    /// per partition there or the headroom ends; inserts their stores and
    /// reloads. Pinned, input, output and placed tensors stay.
    pub fn run(
        &mut self,
        m: &mut Module,
        order: &LinearOrder,
        live: &MemLiveness,
        p: &RoundParams<'_>,
    ) -> Result<RoundOutcome, IrError> {
        self.records.clear();
        let mut out = RoundOutcome::default();
        self.gather(m, order, live, p, m.mems().space.keys());
        self.take(m, order, live, p, 0, &mut out)?;
        self.finish(m, order, live)?;
        Ok(out)
    }

    /// [`Self::run`] at each point of `points` that the round can serve
    /// ([`RoundPoints::prepare`] made them ready; their own positions and
    /// overflows in place of `p.at` and `p.overflow`), with one insertion
    /// of all the stores and reloads at the end. The points are served
    /// the most over first, as rounds of their own would take them; a
    /// point where a tensor split at an earlier one (or one such a split's
    /// reload copies from) is live is left for the next round: what is
    /// live there changed, and `live` no longer says what. So every point
    /// the round serves is served from a true picture, and no tensor is
    /// split twice.
    pub fn run_points(
        &mut self,
        m: &mut Module,
        order: &LinearOrder,
        live: &MemLiveness,
        points: &mut RoundPoints,
        p: &RoundParams<'_>,
    ) -> Result<RoundOutcome, IrError> {
        self.records.clear();
        let mut out = RoundOutcome::default();
        for j in 0..points.ready() {
            let (k, at, overflow) = points.nth(j);
            if points.busy(k) {
                continue;
            }
            let here = RoundParams { at, overflow, ..*p };
            self.gather(m, order, live, &here, points.live_at(k).iter().copied());
            let first = self.records.len();
            let before = out.spills;
            self.take(m, order, live, &here, first, &mut out)?;
            if out.spills == before && out.reloads as usize >= p.reloads_left {
                break;
            }
            for r in &self.records[first..] {
                points.mark(r.victim);
                if let Some(Remat::Copy(src)) = r.remat {
                    points.mark(src.loc);
                }
            }
        }
        points.unmark();
        self.finish(m, order, live)?;
        Ok(out)
    }

    /// Collects the candidates among `locs` (tensors of any space, live
    /// anywhere) of a split around `p.at`: tensors of `p.space` live there
    /// and free to move, each by its better plan, best first.
    fn gather(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        p: &RoundParams<'_>,
        locs: impl Iterator<Item = MemLoc>,
    ) {
        self.candidates.clear();
        let (space, at, by_bytes) = (p.space, p.at, p.by_bytes);
        for v in locs {
            if m.mems().space[v] != space || m.is_placed(v) {
                continue;
            }
            if m.mems().flags[v].intersects(MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT) {
                continue;
            }
            let Some(iv) = live.interval(v) else {
                continue;
            };
            if !iv.contains(at) {
                continue;
            }
            // Each tensor enters a round once, by its better plan.
            let cx = SpillView::new(m, order, live);
            let plain = split_candidate(cx, by_bytes, v, at);
            let slice =
                best_slice_split(cx, v, at, iv.end, by_bytes, |_| true).map(|(score, split)| {
                    Candidate {
                        score,
                        v,
                        plan: Plan::Slice(split),
                    }
                });
            let best = match (plain, slice) {
                (Some(a), Some(b)) => Some(if b.score > a.score { b } else { a }),
                (a, b) => a.or(b),
            };
            if let Some(c) = best {
                self.candidates.push(c);
            }
        }
        self.candidates
            .sort_unstable_by(|a, b| b.score.cmp(&a.score).then(a.v.cmp(&b.v)));
    }

    /// Splits the gathered candidates, best first, until they free
    /// `p.overflow` at `p.at` or the headroom ends; records from `first`
    /// on are this point's.
    fn take(
        &mut self,
        m: &mut Module,
        order: &LinearOrder,
        live: &MemLiveness,
        p: &RoundParams<'_>,
        first: usize,
        out: &mut RoundOutcome,
    ) -> Result<(), IrError> {
        let want = if p.by_bytes { 1 } else { self.candidates.len() };
        let (mut freed, spills) = (0u64, out.spills);
        for k in 0..want.min(self.candidates.len()) {
            if freed >= p.overflow.max(1) && out.spills > spills {
                break;
            }
            let Candidate { v, plan, .. } = self.candidates[k];
            // A tensor that a split of this point copies again at its
            // reloads stays where it is (see `source_kept`); the earlier
            // points' sources are not live here (`run_points`).
            if self.records[first..]
                .iter()
                .any(|r| matches!(r.remat, Some(Remat::Copy(src)) if src.loc == v))
            {
                continue;
            }
            let n = p.first + out.spills;
            let freed_before = out.freed;
            match plan {
                Plan::Slice(split) => {
                    if out.reloads as usize + 2 > p.reloads_left {
                        break;
                    }
                    self.slice_records(m, order, live, v, &split, n, p, out)?;
                }
                Plan::Split {
                    before,
                    after,
                    first,
                } => {
                    // Each reload copy takes one share of the headroom:
                    // stop at the end of what was reserved.
                    let copies = 1 + first.is_some() as u32;
                    if (out.reloads + copies) as usize > p.reloads_left {
                        break;
                    }
                    self.split_records(m, order, live, v, (before, after, first), n, p, out)?;
                }
            }
            freed += out.freed - freed_before;
            out.spills += 1;
        }
        Ok(())
    }

    /// Inserts the round's stores and reloads.
    fn finish(
        &mut self,
        m: &mut Module,
        order: &LinearOrder,
        live: &MemLiveness,
    ) -> Result<(), IrError> {
        // finalize() expects records in position order of their reloads.
        self.records.sort_unstable_by_key(|r| r.reload_before);
        finalize(m, order, Some(live), &self.records)
    }

    /// `remat`, unless it copies an on-chip location again
    /// ([`Remat::Copy`]) that this round split already: its cells are not
    /// its value's between that split and its reload. (The other way
    /// round, a tensor this round copies again is not split in it; a later
    /// round sees the copy as one more reader.)
    fn source_kept(&self, remat: Option<Remat>) -> Option<Remat> {
        remat.filter(|h| match h {
            Remat::Copy(src) => !self.records.iter().any(|r| r.origin == src.loc),
            _ => true,
        })
    }

    /// Records the plain or loop-invariant split of `v` (the `n`-th split).
    #[allow(clippy::too_many_arguments)]
    fn split_records(
        &mut self,
        m: &mut Module,
        order: &LinearOrder,
        live: &MemLiveness,
        v: MemLoc,
        (before, after, first): (u32, u32, Option<ReloadPoint>),
        n: u32,
        p: &RoundParams<'_>,
        out: &mut RoundOutcome,
    ) -> Result<(), IrError> {
        let at = p.at;
        out.reloads += 1 + first.is_some() as u32;
        let parts = m.mems().partitions[v];
        let bytes = m.mems().bytes[v];
        // A reload that can read the DRAM the value came from needs no
        // store and no slot: one DMA instead of two, at every level. (For
        // an invariant split the DRAM is unwritten from the load's loop
        // nest to the end of the one around `after`, which holds the first
        // copy's reload too.)
        let cx = SpillView::new(m, order, live);
        let remat = if first.is_some() {
            invariant_remat(cx, v, after)
        } else {
            remat_from(cx, v, after)
        };
        let remat = self.source_kept(remat);
        let reload = reload_point(cx, v, at, after);
        let slot = match remat {
            Some(how) => how.slot(),
            None => add_slot(m, v, split_name(m, v, p.prefix, "Slot", n, None).as_str())?,
        };
        let copy_name = split_name(m, v, p.prefix, "Reload", n, None);
        let copy = add_reload_copy(m, v, copy_name.as_str(), parts, bytes)?;
        let store_after = if remat.is_some() { u32::MAX } else { before };
        // Every record of the value (its first copy's, when it has one, and
        // the main reload's) moves the whole tensor through one slot.
        let whole = |m: &Module, copy, store_after, reload_before, reload_hoisted| {
            let reload = ReloadPoint {
                before: reload_before,
                hoisted: reload_hoisted,
            };
            SpillRecord::whole(m, v, slot, copy, store_after, reload, remat, at)
        };
        let moved = parts as u64 * bytes as u64;
        let shape = (parts as u64, bytes as u64);
        if let Some(first) = first {
            // The first copy takes the accesses from its reload up to the
            // point, the slot's store goes before the loop (below).
            let name = split_name(m, v, p.prefix, "ReloadInLoop", n, None);
            let c = add_reload_copy(m, v, name.as_str(), parts, bytes)?;
            self.records
                .push(whole(m, c, store_after, first.before, first.hoisted));
            let (b, c) = reload_traffic(m, order, remat, v, shape, first.runs_at());
            out.bytes += b;
            out.cycles += c;
        }
        // With a first copy, its record stores.
        let main_store = if first.is_some() {
            u32::MAX
        } else {
            store_after
        };
        self.records
            .push(whole(m, copy, main_store, reload.before, reload.hoisted));
        let (b, c) = reload_traffic(m, order, remat, v, shape, reload.runs_at());
        out.bytes += b;
        out.cycles += c;
        if remat.is_none() {
            let (b, c) = store_traffic(m, order, moved, before);
            out.bytes += b;
            out.cycles += c;
        }
        out.remats += remat.is_some() as u32;
        out.freed += bytes as u64;
        Ok(())
    }

    /// Records the slice split of `v` (the `n`-th split): a slice copy
    /// reloaded in every iteration of the loop, and a whole copy before the
    /// next access after it.
    #[allow(clippy::too_many_arguments)]
    fn slice_records(
        &mut self,
        m: &mut Module,
        order: &LinearOrder,
        live: &MemLiveness,
        v: MemLoc,
        split: &SliceSplit,
        n: u32,
        p: &RoundParams<'_>,
        out: &mut RoundOutcome,
    ) -> Result<(), IrError> {
        let at = p.at;
        let parts = m.mems().partitions[v];
        let bytes = m.mems().bytes[v];
        let remat = self.source_kept(slice_remat(SpillView::new(m, order, live), v, split));
        let (cycles, moved) = slice_traffic(SpillView::new(m, order, live), v, at, split, remat);
        let slot = match remat {
            Some(how) => how.slot(),
            None => add_slot(m, v, split_name(m, v, p.prefix, "Slot", n, None).as_str())?,
        };
        let slice_name = split_name(m, v, p.prefix, "Slice", n, None);
        let copy = add_reload_copy(
            m,
            v,
            slice_name.as_str(),
            split.part_count,
            split.slice_bytes() as u32,
        )?;
        let store_after = if remat.is_some() {
            u32::MAX
        } else {
            split.store_after
        };
        self.records.push(SpillRecord {
            part_start: split.part_start,
            part_count: split.part_count,
            byte_lo: split.byte_lo,
            byte_hi: split.byte_hi,
            slice: Some(split.terms),
            ..SpillRecord::whole(
                m,
                v,
                slot,
                copy,
                store_after,
                ReloadPoint {
                    before: split.span.0,
                    hoisted: false,
                },
                remat,
                at,
            )
        });
        // A write-back takes a copy's share of the headroom (its instruction
        // and patterns), whether or not a whole copy follows.
        out.reloads +=
            1 + (split.after.is_none() && split.terms.write_back_after != u32::MAX) as u32;
        if let Some(after) = split.after {
            let reload = reload_point(SpillView::new(m, order, live), v, at, after);
            let name = split_name(m, v, p.prefix, "Reload", n, None);
            let c = add_reload_copy(m, v, name.as_str(), parts, bytes)?;
            self.records.push(SpillRecord::whole(
                m,
                v,
                slot,
                c,
                u32::MAX,
                reload,
                remat,
                at,
            ));
            out.reloads += 1;
        }
        out.bytes += moved;
        out.cycles += cycles;
        out.remats += remat.is_some() as u32;
        out.freed += bytes as u64 - split.slice_bytes();
        Ok(())
    }
}

/// The points over the capacity one round serves, and what the round
/// knows of them: the tensors live at each ([`LiveSets`], from the
/// liveness the round starts from), the order it serves them in, and the
/// tensors it split so far (whose points wait for the next round).
/// Storage is reserved once ([`RoundPoints::reserve`]).
#[derive(Clone, Debug, Default)]
pub struct RoundPoints {
    /// (position, bytes per partition over the capacity there), in rising
    /// position: the caller fills it, up to its capacity.
    pub list: Vec<(u32, u64)>,
    sets: LiveSets,
    /// Indices into `list` of the points with a set, most over first.
    by_need: Vec<u32>,
    /// Per location: split (or copied from) in this round.
    split: Vec<bool>,
    /// The locations marked in `split`, to clear at the end of the round.
    marked: Vec<MemLoc>,
    /// The SB slots the round's access splits made
    /// ([`super::access_split::SbSlots`]).
    pub(crate) sb_slots: Vec<(u32, u32, u64)>,
}

impl RoundPoints {
    /// Room for `points` points, for their live sets over `locations`
    /// locations (`entries` in all), and for marking any of the locations.
    pub fn reserve(&mut self, locations: usize, entries: usize, points: usize) {
        crate::storage::grow(&mut self.list, points);
        crate::storage::grow(&mut self.by_need, points);
        crate::storage::grow(&mut self.marked, points.saturating_mul(2));
        crate::storage::grow(&mut self.sb_slots, points);
        crate::storage::grow(&mut self.split, locations);
        self.sets.reserve(locations, entries, points);
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.list,
            self.by_need,
            self.split,
            self.marked,
            self.sb_slots
        )
        .saturating_add(self.sets.heap_bytes())
    }

    /// Fills `list` with the runs over `space`'s capacity in `m` (one point
    /// each: [`Bounds::over_capacity`]; `bounds` is scratch), each asking
    /// `margin` more than its excess, as many as `list` has room for, in
    /// position order (a later round serves the rest). Returns how many
    /// runs there are, counted or not.
    pub fn fill_runs(
        &mut self,
        bounds: &mut Bounds,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        space: Space,
        margin: u64,
    ) -> u32 {
        let list = &mut self.list;
        list.clear();
        let room = list.capacity();
        let mut runs = 0u32;
        bounds.over_capacity(
            m,
            order,
            live,
            space,
            m.target.capacity(space),
            |p, over| {
                runs += 1;
                if list.len() < room {
                    list.push((p, over.saturating_add(margin)));
                }
            },
        );
        runs
    }

    /// Readies `list` for a round in `space` of `m` as `live` describes
    /// it: the live set of each point (as many as the reserved room takes,
    /// from the first; the rest are dropped from `list` for this round)
    /// and the order to serve them in.
    pub fn prepare(&mut self, m: &Module, live: &MemLiveness, space: Space) {
        let n = self
            .sets
            .collect(m, live, space, self.list.iter().map(|&(at, _)| at));
        self.list.truncate(n);
        self.by_need.clear();
        self.by_need.extend(0..n as u32);
        let list = &self.list;
        self.by_need
            .sort_unstable_by_key(|&k| (core::cmp::Reverse(list[k as usize].1), k));
        // Points less than half as far over as the worst wait for a later
        // round: a split made for a worse point often frees them too, and
        // the coloring after it says what they still need (its peak over
        // the bound). Repeated structure (unrolled stages, the same loop
        // again) is over by the same at each copy, so each round still
        // serves every copy at once.
        let worst = self.by_need.first().map_or(0, |&k| list[k as usize].1);
        let served = self
            .by_need
            .partition_point(|&k| list[k as usize].1.saturating_mul(2) >= worst);
        self.by_need.truncate(served);
        if self.split.len() < m.num_mems() {
            self.split.resize(m.num_mems(), false);
        }
    }

    /// How many points are ready for the round.
    pub fn ready(&self) -> usize {
        self.by_need.len()
    }

    /// The `j`-th point to serve (most over first): its index into
    /// `list`, position and overflow.
    pub fn nth(&self, j: usize) -> (usize, u32, u64) {
        let k = self.by_need[j] as usize;
        let (at, over) = self.list[k];
        (k, at, over)
    }

    /// The tensors live at point `k` (an index into `list`).
    pub fn live_at(&self, k: usize) -> &[MemLoc] {
        self.sets.at(k)
    }

    /// True when a tensor live at point `k` was marked in this round.
    pub fn busy(&self, k: usize) -> bool {
        self.sets
            .at(k)
            .iter()
            .any(|v| self.split.get(v.index()).copied().unwrap_or(false))
    }

    /// Marks `v` as split (or copied from) in this round.
    pub fn mark(&mut self, v: MemLoc) {
        if let Some(s) = self.split.get_mut(v.index()) {
            if !*s {
                *s = true;
                self.marked.push(v);
            }
        }
    }

    /// Clears the round's marks.
    pub fn unmark(&mut self) {
        for v in self.marked.drain(..) {
            if let Some(s) = self.split.get_mut(v.index()) {
                *s = false;
            }
        }
    }
}

/// The candidate of a plain or loop-invariant split of `v` around `at`:
/// the last access before it, the next one after it; none when `v` is
/// accessed at `at` or has no access on one side. A value around a back
/// edge of the loops there gets the loop-invariant plan where it only
/// reads in the loop ([`invariant_split`]), else none.
fn split_candidate(cx: SpillView<'_>, by_bytes: bool, v: MemLoc, at: u32) -> Option<Candidate> {
    let (m, live) = (cx.m, cx.live);
    let acc = live.accesses(v);
    let k = acc.partition_point(|&q| q <= at);
    let &before = acc.get(k.wrapping_sub(1))?;
    let &after = acc.get(k)?;
    if before == at {
        return None;
    }
    let bytes = m.mems().bytes[v] as u64;
    if !loop_split_ok(cx, v, at) {
        // A tile the loop only reads, read before the point too: two
        // copies in the loop.
        let split = invariant_split(cx, v, at)?;
        let score = if by_bytes {
            bytes
        } else {
            invariant_score(cx, v, at, after, &split)
        };
        return Some(Candidate {
            score,
            v,
            plan: Plan::Split {
                before: split.store_after,
                after,
                first: Some(split.first),
            },
        });
    }
    let score = if by_bytes {
        bytes
    } else {
        spill_score(cx, v, bytes, m.mems().partitions[v], before, at, after)
    };
    Some(Candidate {
        score,
        v,
        plan: Plan::Split {
            before,
            after,
            first: None,
        },
    })
}

/// The name of what a split adds: `<tensor>_<prefix><what><n>`, and
/// `_<k>` after it when given (an access copy's index). A copy split again
/// is named after the tensor it copies (the part before its own
/// `_<prefix>` suffix), so names do not grow a suffix every round; the
/// split number keeps them apart. The tensor's name is cut to 200 bytes.
pub fn split_name(
    m: &Module,
    v: MemLoc,
    prefix: &str,
    what: &str,
    n: u32,
    k: Option<u32>,
) -> heapless::String<300> {
    let name = m.mem_name(v);
    let base = if prefix.is_empty() {
        name
    } else {
        let mut cut = name.len();
        let mut from = 0;
        while let Some(i) = name[from..].find(prefix) {
            let i = from + i;
            if i > 0 && name.as_bytes()[i - 1] == b'_' {
                cut = i - 1;
                break;
            }
            from = i + prefix.len();
        }
        &name[..cut]
    };
    let mut end = base.len().min(200);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    let mut s = heapless::String::new();
    let _ = write!(s, "{}_{prefix}{what}{n}", &base[..end]);
    if let Some(k) = k {
        let _ = write!(s, "_{k}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::LinearOrder;
    use crate::ir::{Builder, Opcode, SubOp};
    use crate::target::Target;
    use crate::testing::{add, tiles};

    #[test]
    fn points_are_served_worst_first_and_wait_on_what_was_split() {
        // a and b live over positions 0-2, c written at 2 and read at 3.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [a, b, c, d] = tiles(&mut bl, Space::Sb, ["a", "b", "c", "d"], 128, 64, 4);
        bl.func("f").unwrap();
        bl.op(Opcode::Memset, &[bl.full(a)], &[]).unwrap();
        bl.op(Opcode::Memset, &[bl.full(b)], &[]).unwrap();
        add(&mut bl, c, &[a, b]);
        bl.compute(Opcode::Activation, SubOp::Exp, d, &[c], Default::default())
            .unwrap();
        let o = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &o);
        let mut pts = RoundPoints::default();
        pts.reserve(m.num_mems(), 16, 4);
        // Three points, over by 10, 40 and 25: 40 first, then 25; 10 is
        // less than half of 40 and waits for a later round.
        pts.list.extend([(0, 10), (1, 40), (3, 25)]);
        pts.prepare(&m, &l, Space::Sb);
        assert_eq!(pts.ready(), 2);
        assert_eq!(pts.nth(0), (1, 1, 40));
        assert_eq!(pts.nth(1), (2, 3, 25));
        assert_eq!(pts.live_at(1), &[a, b]);
        // Split b: position 1 (where b is live) waits, position 3 not.
        pts.mark(b);
        assert!(pts.busy(1) && !pts.busy(2));
        // The marks last one round.
        pts.unmark();
        assert!(!pts.busy(1));
    }
}
