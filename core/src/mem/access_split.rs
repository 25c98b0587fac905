//! The access split: a tensor spilled at every access, the last resort of
//! an on-chip allocator when no split of a live range frees room at the
//! point where the space runs over.
//!
//! After the split of tensor `V`, `V`'s value lives in a DRAM slot shaped
//! like it, and each instruction that accessed `V` accesses its own
//! *access copy* instead: a new location of the rectangle that instruction
//! names of `V` in one execution, loaded from the slot just before the
//! instruction (when it reads `V`, or writes only part of that rectangle)
//! and saved back just after it (when it writes `V`). `V` has no access
//! left. An access copy is live only around its instruction, so once every
//! tensor live at a point is split, what is live there is what the
//! instruction there accesses, the rectangles the floor
//! ([`crate::analysis::Floor`]) counts (a copy for a pattern with a
//! register term or a partition step holds more: its hull over every
//! iteration), at the price of up to two DMAs per access, each run as
//! often as the loops around it.
//!
//! The rectangle moves with the loops when every pattern of `V` in the
//! instruction moves with the same loop terms and has no register term or
//! partition step: the copy then holds one iteration's cells, the
//! patterns lose their terms, and the reload and the store carry them on
//! the slot's side (the slot has `V`'s shape, so the terms mean the same
//! there). Otherwise the copy holds the hull of every iteration (and the
//! register window) and the patterns keep their extension, shifted.
//!
//! A DMA that accessed `V` needs no copy: its side of `V` moves onto the
//! slot (same patterns: the slot has `V`'s shape) and it becomes a
//! `dma_copy`, DRAM to DRAM — a load into `V` now fills the slot, a save of
//! `V` reads it. That also undoes earlier spills of `V` (their stores and
//! reloads are DMAs), so splitting a reload copy does not make a copy as
//! large as it.
//!
//! The inserted reloads are `load`s flagged `RELOAD`, the stores `save`s
//! flagged `SPILL`: pure data movements, which the dataflow checker sees
//! through. The slot is left unplaced for the DRAM allocator.
//!
//! A PSUM tensor's slot may be in SB instead ([`slot_space`]): an engine
//! copy between SB and PSUM costs a fraction of a DMA's fixed cost
//! ([`crate::Target::copy_cycles`] against [`crate::Target::dma_cycles`]).
//! The reloads and stores are then `tensor_copy`s (same flags, same
//! element type on both sides, so they stay pure movements), a DMA's PSUM
//! side moves onto the SB slot unchanged (no register term, no partition
//! step), and the slot is left unplaced for the SB allocator, which runs
//! after PSUM's.

use crate::analysis::floor::side_moves_to_dram;
use alloc::vec::Vec;

use crate::analysis::{LinearOrder, MemLiveness};
use crate::ir::{
    full_ap, slice_ap, Ap, ApExt, Inst, InstFlags, InstSpec, IrError, MemLoc, Module, Opcode, Space,
};
use crate::mem::spill::{add_reload_copy, add_sb_slot, add_slot, executions};
use crate::mem::split_round::RoundPoints;

/// Most patterns of one instruction the split rewrites.
const MAX_APS: usize = 32;

/// Where a split of `v` keeps its value: SB for a PSUM tensor when SB has
/// room for the slot at every position (`sb_live_bound`, the most SB bytes
/// per partition live at once, plus the slot's bytes within the usable SB;
/// the caller adds the SB slots made since whose tensors are live with
/// `v`, [`SbSlots`]) and an engine copy of it is cheaper than a DMA; DRAM
/// otherwise. The bound is
/// the whole-program one, so an SB slot never raises SB's bound past its
/// capacity: the SB allocator may still have to spill by fragmentation.
pub fn slot_space(m: &Module, v: MemLoc, sb_live_bound: u64) -> Space {
    let t = &m.target;
    let (parts, bytes) = (m.mems().partitions[v], m.mems().bytes[v] as u64);
    let room =
        sb_live_bound.saturating_add(bytes) <= t.sb_usable_bytes as u64 && parts <= t.sb_partitions;
    let cheaper = t.copy_cycles(bytes) < t.dma_cycles(parts as u64 * bytes);
    if m.mems().space[v] == Space::Psum && room && cheaper {
        Space::Sb
    } else {
        Space::Dram
    }
}

/// True when pattern `a` of DMA `i` can move onto a slot in `slot_space`
/// unchanged: an SB side onto DRAM ([`side_moves_to_dram`]), a PSUM side
/// onto SB (no register term, no partition step either).
fn side_moves(m: &Module, i: Inst, a: Ap, slot_space: Space) -> bool {
    match slot_space {
        Space::Sb => {
            let e = m.ap_ext(a);
            m.insts().opcode[i].is_dma()
                && m.mems().space[m.aps().loc[a]] == Space::Psum
                && e.reg.is_none()
                && e.pstep.is_none()
        }
        _ => side_moves_to_dram(m, i, a),
    }
}

/// What an access split inserted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AccessSplit {
    /// The slot that holds the tensor's value (DRAM, or SB for a PSUM
    /// tensor: [`slot_space`]).
    pub slot: MemLoc,
    /// Instructions that accessed the tensor through an access copy.
    pub accesses: u32,
    /// DMAs that accessed it, now moving its cells to or from the slot.
    pub direct: u32,
    /// Reloads inserted.
    pub loads: u32,
    /// Stores inserted.
    pub stores: u32,
    /// Bytes the inserted reloads and stores move as the program runs
    /// (loop trips included).
    pub moved: u64,
    /// Their cycles under the target's model (DMA cycles, or engine copy
    /// cycles for an SB slot).
    pub cycles: u64,
}

/// The rectangle of `v` one execution of `i` accesses, and how the access
/// copy holds it.
struct Rect {
    part_lo: u16,
    part_hi: u16,
    byte_lo: u64,
    byte_hi: u64,
    /// True when the copy holds one iteration's cells and the patterns'
    /// loop terms move to the slot's side.
    rigid: bool,
}

impl Rect {
    fn parts(&self) -> u16 {
        self.part_hi - self.part_lo
    }

    fn bytes(&self) -> u64 {
        self.byte_hi - self.byte_lo
    }
}

/// The rectangle `i` accesses of `v` through the patterns `aps` (not
/// empty), clamped to `v`.
fn rect_of(m: &Module, v: MemLoc, aps: &[(usize, Ap)]) -> Rect {
    let first = m.ap_ext(aps[0].1);
    let same_terms = |e: &ApExt| {
        e.terms.len() == first.terms.len() && e.terms.iter().all(|t| first.terms.contains(t))
    };
    let rigid = aps.iter().all(|&(_, a)| {
        let e = m.ap_ext(a);
        e.reg.is_none() && e.pstep.is_none() && same_terms(e)
    });
    let parts = m.mems().partitions[v];
    let bytes = m.mems().bytes[v] as u64;
    let mut r = Rect {
        part_lo: parts,
        part_hi: 0,
        byte_lo: bytes,
        byte_hi: 0,
        rigid,
    };
    let plain = ApExt::default();
    for &(_, a) in aps {
        let (p0, p1, b0, b1) = if rigid {
            let e = m.ap_extent_with(a, &plain);
            let clamp = |x: i64, hi: u64| x.clamp(0, hi as i64) as u64;
            (
                clamp(e.part_lo, parts as u64) as u16,
                clamp(e.part_hi, parts as u64) as u16,
                clamp(e.byte_lo, bytes),
                clamp(e.byte_hi, bytes),
            )
        } else {
            m.ap_hull(a)
        };
        r.part_lo = r.part_lo.min(p0);
        r.part_hi = r.part_hi.max(p1);
        r.byte_lo = r.byte_lo.min(b0);
        r.byte_hi = r.byte_hi.max(b1);
    }
    if r.part_lo >= r.part_hi || r.byte_lo >= r.byte_hi {
        // A degenerate pattern: hold all of `v`.
        r.part_lo = 0;
        r.part_hi = parts;
        r.byte_lo = 0;
        r.byte_hi = bytes;
        r.rigid = false;
    }
    r
}

/// `v`'s patterns in `i`, with their index among `i`'s input-then-output
/// patterns.
fn aps_of(m: &Module, i: Inst, v: MemLoc) -> heapless::Vec<(usize, Ap), MAX_APS> {
    m.all_aps(i)
        .enumerate()
        .filter(|&(_, a)| m.aps().loc[a] == v)
        .take(MAX_APS)
        .collect()
}

/// Bytes per partition of `v` that stay live at position `at` once `v` is
/// split: the access copy's, when the instruction there accesses `v`
/// (none when it is a DMA whose side of `v` moves to the slot).
pub fn held_at(m: &Module, order: &LinearOrder, v: MemLoc, at: u32) -> u64 {
    let i = order.inst_at(at);
    if !i.is_valid() {
        return 0;
    }
    let aps = aps_of(m, i, v);
    if aps.is_empty() || aps.iter().all(|&(_, a)| side_moves_to_dram(m, i, a)) {
        return 0;
    }
    rect_of(m, v, &aps).bytes()
}

/// Instructions that access `v` (the access copies a split makes).
pub fn access_count(live: &MemLiveness, v: MemLoc) -> u32 {
    let acc = live.accesses(v);
    let mut n = 0u32;
    let mut last = u32::MAX;
    for &p in acc {
        n += (p != last) as u32;
        last = p;
    }
    n
}

/// Splits `v` at every access (see the module doc). `order` and `live`
/// describe `m` as it is when called; the split adds a slot in
/// `slot_space` ([`slot_space`]: DRAM, or SB for a PSUM tensor) named
/// `slot_name`, and access copies named by `copy_name` from their index.
/// The caller checks the module's headroom first: a slot and
/// [`access_count`] copies, two instructions and four patterns each. An
/// error part-way (the module's reserved storage ran out) leaves an
/// instruction re-pointed without its reload: the pass must fail with it,
/// as it does.
pub fn split_every_access(
    m: &mut Module,
    order: &LinearOrder,
    live: &MemLiveness,
    v: MemLoc,
    slot_space: Space,
    slot_name: &str,
    copy_name: &mut dyn FnMut(&Module, u32) -> heapless::String<300>,
) -> Result<AccessSplit, IrError> {
    let on_chip = slot_space == Space::Sb;
    let slot = if on_chip {
        add_sb_slot(m, v, slot_name)?
    } else {
        add_slot(m, v, slot_name)?
    };
    let mut out = AccessSplit {
        slot,
        accesses: 0,
        direct: 0,
        loads: 0,
        stores: 0,
        moved: 0,
        cycles: 0,
    };
    let mut last = u32::MAX;
    for &pos in live.accesses(v) {
        if pos == last {
            continue;
        }
        last = pos;
        let i = order.inst_at(pos);
        if !i.is_valid() {
            continue;
        }
        let aps = aps_of(m, i, v);
        if aps.is_empty() {
            continue;
        }
        // A DMA moves `v`'s cells to or from the slot directly, no copy
        // (the slot has `v`'s shape, so the patterns keep their meaning on
        // it): DRAM to DRAM for a DRAM slot, to or from SB for an SB one.
        let direct = aps.iter().all(|&(_, a)| side_moves(m, i, a, slot_space));
        if direct {
            for &(_, a) in &aps {
                m.shift_ap(a, slot, 0, 0);
            }
            if !on_chip {
                m.make_dma_copy(i)?;
            }
            out.direct += 1;
            continue;
        }
        let n_in = m.operands(i).n_in as usize;
        let r = rect_of(m, v, &aps);
        let reads = aps.iter().any(|&(k, _)| k < n_in);
        let writes = aps.iter().any(|&(k, _)| k >= n_in);
        // A write of the whole rectangle through one dense pattern needs
        // no reload: nothing of the slot's old cells survives in the copy.
        let covers = !reads
            && aps.len() == 1
            && r.rigid
            && m.is_contiguous(aps[0].1)
            && u16::from(m.aps().part_count[aps[0].1]) == r.parts()
            && m.ap_bytes_per_partition(aps[0].1) == r.bytes();
        let name = copy_name(m, out.accesses);
        let copy = add_reload_copy(m, v, name.as_str(), r.parts(), r.bytes() as u32)?;
        out.accesses += 1;
        let mut slot_ap = slice_ap(
            m,
            slot,
            r.part_lo,
            r.parts(),
            r.byte_lo as u32,
            r.byte_hi as u32,
        );
        if r.rigid {
            slot_ap.ext.terms = m.ap_ext(aps[0].1).terms.clone();
        }
        for &(k, a) in &aps {
            if r.rigid && !m.ap_is_plain(a) {
                m.set_ap_ext(i, k, ApExt::default())?;
            }
            m.shift_ap(a, copy, -(r.part_lo as i32), -(r.byte_lo as i64));
        }
        let runs = executions(m, order, pos);
        let one = r.parts() as u64 * r.bytes();
        let (cycles, load, save) = if on_chip {
            let c = m.target.copy_cycles(r.bytes());
            (c, Opcode::TensorCopy, Opcode::TensorCopy)
        } else {
            (m.target.dma_cycles(one), Opcode::Load, Opcode::Save)
        };
        let cycles = cycles.max(1);
        let copy_ap = [full_ap(m, copy)];
        let slot_aps = [slot_ap];
        // (opcode, flag, written, read, before `i`) of each move inserted.
        let reload = (!covers).then_some((load, InstFlags::RELOAD, &copy_ap, &slot_aps, true));
        let store = writes.then_some((save, InstFlags::SPILL, &slot_aps, &copy_ap, false));
        for (opcode, flags, outputs, inputs, before) in reload.into_iter().chain(store) {
            let mut s = InstSpec::new(opcode);
            s.flags = flags;
            s.outputs = outputs;
            s.inputs = inputs;
            if before {
                m.insert_before(i, &s)?;
                out.loads += 1;
            } else {
                m.insert_after(i, &s)?;
                out.stores += 1;
            }
            out.moved = out.moved.saturating_add(one.saturating_mul(runs));
            out.cycles = out.cycles.saturating_add(cycles.saturating_mul(runs));
        }
    }
    Ok(out)
}

/// True when a split of `v` frees nothing anywhere: every position of its
/// live interval `iv` accesses it, one of them only is not a DMA, and
/// that one accesses all of `v`. Its DMAs would go to the slot, and the
/// access copy of that instruction, as large as `v`, would be loaded and
/// saved right around it, live over the same positions (an access copy
/// whose reload and store are adjacent to its instruction is such a
/// tensor).
fn is_minimal(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    v: MemLoc,
    iv: crate::analysis::Interval,
) -> bool {
    if access_count(live, v) as u64 != (iv.end - iv.start) as u64 + 1 {
        return false;
    }
    let mut compute = (iv.start..=iv.end).filter_map(|p| {
        let i = order.inst_at(p);
        (i.is_valid() && !m.insts().opcode[i].is_dma()).then_some(i)
    });
    let (Some(i), None) = (compute.next(), compute.next()) else {
        return false;
    };
    let r = rect_of(m, v, &aps_of(m, i, v));
    r.parts() == m.mems().partitions[v] && r.bytes() == m.mems().bytes[v] as u64
}

/// The bytes per partition a split of `v` frees at position `at`, when
/// `v` may be split there: of `space`, live at `at`, not fixed (placed,
/// pinned, an input or an output), not already as short as a split makes
/// it (see `is_minimal`), and freeing something.
pub fn frees_at(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    space: crate::ir::Space,
    v: MemLoc,
    at: u32,
) -> Option<u64> {
    use crate::ir::MemFlags;
    let fixed = MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT;
    let iv = live.interval(v)?;
    if m.mems().space[v] != space
        || m.is_placed(v)
        || m.mems().flags[v].intersects(fixed)
        || !iv.contains(at)
        || is_minimal(m, order, live, v, iv)
    {
        return None;
    }
    let bytes = m.mems().bytes[v] as u64;
    let freed = bytes.saturating_sub(held_at(m, order, v, at));
    (freed > 0).then_some(freed)
}

/// The tensor of `space` whose split frees the most at position `at`, and
/// the bytes per partition it frees there: one [`frees_at`] accepts, not
/// in `done`. Ranked by the area freed at `at`, then by fewer accesses
/// (fewer DMAs), then by id.
pub fn best_at(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    space: crate::ir::Space,
    at: u32,
    done: &[MemLoc],
) -> Option<(MemLoc, u64)> {
    best_among(m, order, live, space, at, m.mems().space.keys(), done)
}

/// [`best_at`] among `locs` (which must hold every tensor of `space` live
/// at `at` for the answer to be the same).
pub fn best_among(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    space: crate::ir::Space,
    at: u32,
    locs: impl Iterator<Item = MemLoc>,
    done: &[MemLoc],
) -> Option<(MemLoc, u64)> {
    let mut best: Option<(u64, u32, MemLoc, u64)> = None;
    for v in locs {
        if done.contains(&v) {
            continue;
        }
        let Some(freed) = frees_at(m, order, live, space, v, at) else {
            continue;
        };
        let area = freed * m.mems().partitions[v] as u64;
        let n = access_count(live, v);
        let better = match best {
            None => true,
            Some((a, k, w, _)) => {
                (area, core::cmp::Reverse(n), core::cmp::Reverse(v))
                    > (a, core::cmp::Reverse(k), core::cmp::Reverse(w))
            }
        };
        if better {
            best = Some((area, n, v, freed));
        }
    }
    best.map(|(_, _, v, freed)| (v, freed))
}

/// The SB slots a run of access splits made, against SB's bound when it
/// began ([`slot_space`]): a slot lives over its tensor's live interval,
/// so a new slot counts the earlier ones whose intervals meet its own (at
/// one point all of them; across a round's points, only those). The list
/// is the caller's storage, reserved for the splits it allows.
#[derive(Debug)]
pub struct SbSlots<'a> {
    /// SB's bound when the splits began.
    pub bound: u64,
    /// (first position, last position, bytes per partition) of each slot.
    pub made: &'a mut Vec<(u32, u32, u64)>,
}

impl SbSlots<'_> {
    /// SB's bound with the slots made so far that are live with `v`.
    fn with(&self, live: &MemLiveness, v: MemLoc) -> u64 {
        let Some(iv) = live.interval(v) else {
            return self.bound;
        };
        self.made
            .iter()
            .filter(|&&(s, e, _)| s <= iv.end && iv.start <= e)
            .fold(self.bound, |n, &(_, _, b)| n.saturating_add(b))
    }

    fn add(&mut self, live: &MemLiveness, v: MemLoc, bytes: u64) {
        if let Some(iv) = live.interval(v) {
            self.made.push((iv.start, iv.end, bytes));
        }
    }
}

/// Most tensors split at one point.
pub const MAX_SPLITS_AT_POINT: usize = 16;

/// What access splits at one or more points did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PointSplits {
    /// Tensors split.
    pub splits: u32,
    /// Copies made: an access copy per instruction that accessed a split
    /// tensor, and its slot.
    pub copies: u32,
    /// Bytes the inserted reloads and stores move as the program runs.
    pub moved: u64,
    /// Their cycles under the target's model.
    pub cycles: u64,
    /// True when a split that would help needed more copies than were left.
    pub spent: bool,
}

/// How access splits are named and numbered, and the copies they may make.
#[derive(Copy, Clone, Debug)]
pub struct SplitNames<'a> {
    /// Marks the names (`<tensor>_<prefix>Access<n>_<k>`, `..AccessSlot<n>`).
    pub prefix: &'a str,
    /// The number of the first split.
    pub first: u32,
    /// Copies the caller's headroom still holds.
    pub copies_left: u32,
}

/// Splits at every access, in `m` (described by `order` and `live`),
/// `first` when given, then the tensors of `space` live at `at` (among
/// `candidates`, which hold every one of them; all of `m`'s when `None`)
/// whose split frees the most there, until they free `overflow` bytes per
/// partition, or [`MAX_SPLITS_AT_POINT`] tensors, or the copies run out;
/// adds to `out` and appends the split tensors to `done`. A PSUM tensor's
/// slot is in SB where `sb` leaves room there ([`slot_space`]); `sb`
/// records it.
#[allow(clippy::too_many_arguments)]
pub fn split_at_point(
    m: &mut Module,
    order: &LinearOrder,
    live: &MemLiveness,
    space: Space,
    (at, overflow): (u32, u64),
    first: Option<MemLoc>,
    candidates: Option<&[MemLoc]>,
    sb: &mut SbSlots<'_>,
    names: &SplitNames<'_>,
    out: &mut PointSplits,
    done: &mut heapless::Vec<MemLoc, MAX_SPLITS_AT_POINT>,
) -> Result<(), IrError> {
    let start = done.len();
    let mut freed = 0u64;
    let mut next = first;
    loop {
        let v = match next.take() {
            Some(v) => v,
            None => {
                if freed >= overflow.max(1) || done.is_full() {
                    break;
                }
                let split = &done[start..];
                let best = match candidates {
                    Some(c) => best_among(m, order, live, space, at, c.iter().copied(), split),
                    None => best_at(m, order, live, space, at, split),
                };
                match best {
                    Some((v, _)) => v,
                    None => break,
                }
            }
        };
        let need = access_count(live, v) + 1;
        if out.copies.saturating_add(need) > names.copies_left {
            out.spent = true;
            break;
        }
        let frees = frees_at(m, order, live, space, v, at).unwrap_or(0);
        let n = names.first + out.splits;
        let slot = super::split_round::split_name(m, v, names.prefix, "AccessSlot", n, None);
        let slot_space = slot_space(m, v, sb.with(live, v));
        if slot_space == Space::Sb {
            sb.add(live, v, m.mems().bytes[v] as u64);
        }
        let s = split_every_access(m, order, live, v, slot_space, slot.as_str(), &mut |m, k| {
            super::split_round::split_name(m, v, names.prefix, "Access", n, Some(k))
        })?;
        out.splits += 1;
        out.copies += need;
        out.moved = out.moved.saturating_add(s.moved);
        out.cycles = out.cycles.saturating_add(s.cycles);
        freed += frees;
        let _ = done.push(v);
    }
    Ok(())
}

/// [`split_at_point`] at each point of `points` that the round can serve
/// (prepared: [`RoundPoints::prepare`]), the most over first; a point
/// where a tensor split at another is live waits for the next round, as in
/// [`super::split_round::SplitRound::run_points`]. `sb_bound` is SB's
/// bound when the round began; every SB slot of the round counts against
/// it where its tensor's interval meets the new one's ([`SbSlots`]).
#[allow(clippy::too_many_arguments)]
pub fn split_at_points(
    m: &mut Module,
    order: &LinearOrder,
    live: &MemLiveness,
    space: Space,
    points: &mut RoundPoints,
    sb_bound: u64,
    names: &SplitNames<'_>,
) -> Result<PointSplits, IrError> {
    let mut out = PointSplits::default();
    let mut made = core::mem::take(&mut points.sb_slots);
    made.clear();
    let mut sb = SbSlots {
        bound: sb_bound,
        made: &mut made,
    };
    for j in 0..points.ready() {
        let (k, at, overflow) = points.nth(j);
        if points.busy(k) {
            continue;
        }
        let mut done: heapless::Vec<MemLoc, MAX_SPLITS_AT_POINT> = heapless::Vec::new();
        let r = split_at_point(
            m,
            order,
            live,
            space,
            (at, overflow),
            None,
            Some(points.live_at(k)),
            &mut sb,
            names,
            &mut out,
            &mut done,
        );
        for &v in &done {
            points.mark(v);
        }
        if r.is_err() || out.spent {
            points.sb_slots = made;
            points.unmark();
            r?;
            return Ok(out);
        }
    }
    points.sb_slots = made;
    points.unmark();
    Ok(out)
}

/// Where `space` is fragmented at `at` (what is live there fits, but no
/// free rectangle is as large as the tensor that needs one): the largest
/// tensor of `space` live at `at` since before it, accessed there and split
/// by nothing yet (not fixed, not already as short as a split makes it).
/// Its split frees nothing at `at` ([`frees_at`] refuses it), but its
/// access copy there is placed afresh at its reload, where the space is
/// free then, instead of in the rectangle the tensor took when it was
/// placed among tensors that have died since. Ranked by area, then by
/// fewer accesses, then by id.
pub fn replaced_at(
    m: &Module,
    order: &LinearOrder,
    live: &MemLiveness,
    space: crate::ir::Space,
    at: u32,
) -> Option<MemLoc> {
    use crate::ir::MemFlags;
    let fixed = MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT;
    let mut best: Option<(u64, core::cmp::Reverse<u32>, core::cmp::Reverse<MemLoc>)> = None;
    for v in m.mems().space.keys() {
        let Some(iv) = live.interval(v) else {
            continue;
        };
        if m.mems().space[v] != space
            || m.is_placed(v)
            || m.mems().flags[v].intersects(fixed)
            || !(iv.start < at && at <= iv.end)
            || held_at(m, order, v, at) == 0
            || is_minimal(m, order, live, v, iv)
        {
            continue;
        }
        let area = m.mems().partitions[v] as u64 * m.mems().bytes[v] as u64;
        let key = (
            area,
            core::cmp::Reverse(access_count(live, v)),
            core::cmp::Reverse(v),
        );
        if best.map_or(true, |b| key > b) {
            best = Some(key);
        }
    }
    best.map(|(_, _, core::cmp::Reverse(v))| v)
}
