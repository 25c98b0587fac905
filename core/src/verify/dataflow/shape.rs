//! Where an access pattern, a location or a register lives in the cell
//! planes of the state: a region, a partition range and the byte segments
//! each partition covers.
//!
//! A placed location's cells are physical — its space's region, partition
//! `base_partition + q`, address `offset + byte` — so two locations an
//! allocator put on the same cells clobber each other exactly as on
//! hardware. DRAM is one flat byte space (partition 0, address `offset + q ×
//! bytes + byte`). An unplaced location has a private region of its own
//! (partition q, address byte), except an unplaced DRAM location that some
//! pattern reaches as flat bytes ([`Layout`]). Registers are 4 bytes per 32-bit lane:
//! colored ones in the register-file region at `lane × 4`, uncolored ones in
//! a private region.

use alloc::vec::Vec;

use super::pieces::push_grow;
use super::report::DataflowError;
use crate::ir::{Ap, Dim, Inst, Loop, MemLoc, Module, Reg, Space, NO_LANE};

/// The register file's region; the three spaces take regions 0–2 by
/// their [`Space::slot`].
const REGISTER_FILE: usize = 3;
/// Private regions start here: locations, then registers.
const FIRST_PRIVATE: usize = 4;

/// How a module's unplaced DRAM locations are held: as a plane (partition
/// q at row q, the form of an unplaced on-chip location) or as flat bytes
/// (partition q at byte `q × bytes`, the form of placed DRAM).
///
/// Both forms hold the same value at the same cell — flat byte `q × bytes +
/// x` is cell (q, x) of the plane — so the choice changes no finding; it is
/// what a location's writes cost. A rectangle write is one run in a plane
/// but one run per partition in flat bytes (a column slice of a DRAM tile
/// is 128 rows of it), so a location is held flat only when it must be:
/// when some pattern of the module on it has an explicit partition step
/// (partition k of the pattern at `k × step` bytes, not a row of the
/// plane), or may reach past the plane's rows or partitions (the hull over
/// its iterations and window, [`Module::ap_byte_span`] and
/// [`Module::ap_rows`]: a plane would refuse such a cell, flat bytes hold
/// it while it stays inside the location).
///
/// Invariant: after [`Layout::compute`] for `m`, bit `l` is set iff the
/// unplaced DRAM location `l` of `m` is held flat.
#[derive(Debug, Default)]
pub(super) struct Layout {
    flat: Vec<u64>,
}

impl Layout {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.flat)
    }

    /// Decides the form of each of `m`'s unplaced DRAM locations (see the
    /// type doc), in one pass over its access patterns.
    pub fn compute(&mut self, m: &Module) -> Result<(), DataflowError> {
        let words = m.num_mems().div_ceil(64);
        self.flat.clear();
        if self.flat.try_reserve(words).is_err() {
            return Err(DataflowError::Capacity {
                what: "the DRAM layout",
                reserved: self.flat.capacity(),
            });
        }
        self.flat.resize(words, 0);
        for k in 0..m.num_aps() {
            let a = Ap::new(k);
            let l = m.aps().loc[a];
            if !l.is_valid()
                || l.index() >= m.num_mems()
                || m.mems().space[l] != Space::Dram
                || m.is_placed(l)
            {
                continue;
            }
            let in_plane = m.ap_ext(a).pstep.is_none()
                && m.ap_rows(a).1 <= m.mems().partitions[l]
                && m.ap_byte_span(a)
                    .is_some_and(|(_, hi)| hi <= m.mems().bytes[l] as u64);
            if !in_plane {
                self.flat[l.index() / 64] |= 1 << (l.index() % 64);
            }
        }
        Ok(())
    }

    /// True when unplaced DRAM location `l` is held as flat bytes.
    fn is_flat(&self, l: MemLoc) -> bool {
        self.flat
            .get(l.index() / 64)
            .is_some_and(|w| w & (1 << (l.index() % 64)) != 0)
    }
}

/// Regions a module's cells need.
pub(super) fn regions(m: &Module) -> usize {
    FIRST_PRIVATE + m.num_mems() + m.num_regs()
}

/// One segment of a traversal: addresses `[a, b)` of a partition, walked
/// `reps` times in a row (a dimension of stride 0 — a broadcast — walks the
/// same cells again; a read sees them again, a write overwrites them, so the
/// last walk's values stay).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Seg {
    pub a: u64,
    pub b: u64,
    pub reps: u64,
}

impl Seg {
    /// `[a, b)` once.
    pub fn once(a: u64, b: u64) -> Seg {
        Seg { a, b, reps: 1 }
    }

    /// Bytes of one walk.
    pub fn len(&self) -> u64 {
        self.b.wrapping_sub(self.a)
    }

    /// Bytes of all walks.
    pub fn bytes(&self) -> u64 {
        self.len().saturating_mul(self.reps)
    }
}

/// Cells `[p0, p1) × segments` of a region; `row` is the bytes of one
/// partition's segments (the traversal stride between partitions).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Rect {
    pub region: usize,
    pub p0: u32,
    pub p1: u32,
    pub row: u64,
    /// A partition broadcast: the one partition `p0` is read this many
    /// times (0: not a broadcast).
    pub bcast: u32,
}

impl Rect {
    pub fn parts(&self) -> u64 {
        (self.p1 - self.p0) as u64
    }
}

/// How many outer dims remain after folding the contiguous inner ones, and
/// the elements of one row.
fn folded_dims(dims: &[Dim]) -> (usize, u64) {
    let mut row: u64 = 1;
    let mut k = dims.len();
    while k > 0 {
        let d = dims[k - 1];
        if d.count == 1 {
            k -= 1;
        } else if d.stride as i64 == row as i64 {
            row = row.saturating_mul(d.count as u64);
            k -= 1;
        } else {
            break;
        }
    }
    (k, row)
}

/// Address-contiguous rows (per partition) an access pattern walks: the
/// segments [`ap_rect`] lists for an on-chip or unplaced location.
pub(super) fn rows(m: &Module, a: Ap) -> usize {
    let dims = m.ap_dims(a);
    let k = folded_dims(dims).0;
    // Stride-0 dims walk the same rows again (see `Seg`).
    dims[..k]
        .iter()
        .filter(|d| d.stride != 0)
        .fold(1usize, |n, d| n.saturating_mul(d.count as usize))
}

/// Appends `[a, b)` walked `reps` times: it extends the last segment when it
/// continues it (both walked once), or adds to its walks when it is the
/// same cells again.
fn push_seg(segs: &mut Vec<Seg>, a: u64, b: u64, reps: u64) -> Result<(), DataflowError> {
    if let Some(last) = segs.last_mut() {
        if last.reps == 1 && reps == 1 && last.b == a {
            last.b = b;
            return Ok(());
        }
        if last.a == a && last.b == b {
            last.reps = last.reps.saturating_add(reps);
            return Ok(());
        }
    }
    push_grow(
        segs,
        Seg { a, b, reps },
        "the segments of one access pattern",
    )
}

/// The rectangle and the segments (into `segs`, cleared first, in
/// traversal order) of an access pattern of `inst` in the current
/// execution: `iv(l)` is loop `l`'s induction value (the walk's exact
/// loops; see `walk`). A pattern with a register term covers its whole
/// window on each of its partitions (a may-access); a partition broadcast
/// reads its first partition once per partition of the pattern
/// ([`Rect::bcast`]); a DRAM pattern with an explicit partition step puts
/// partition k of the pattern `k × step` bytes after its first row. A
/// pattern whose cells leave its location at this execution is a
/// [`DataflowError::BadAccess`].
pub(super) fn ap_rect(
    m: &Module,
    layout: &Layout,
    inst: Inst,
    ap: Ap,
    segs: &mut Vec<Seg>,
    iv: &dyn Fn(Loop) -> Option<u32>,
) -> Result<Rect, DataflowError> {
    segs.clear();
    let loc = m.aps().loc[ap];
    let (region, p_base, addr_base, flat) = place(m, layout, loc);
    let ext = m.ap_ext(ap);
    let bad = DataflowError::BadAccess { inst, ap };
    // The static start, moved by this execution's loop terms.
    let (mut q0, mut base) = (m.aps().part_start[ap] as i64, m.aps().offset[ap] as i64);
    for t in &ext.terms {
        let k = t.index(iv(t.lp).ok_or(bad)?) as i64;
        q0 = q0.saturating_add((t.parts as i64).saturating_mul(k));
        base = base.saturating_add(t.bytes.saturating_mul(k));
    }
    let qn = m.aps().part_count[ap] as u64;
    let parts = m.mems().partitions[loc] as i64;
    let bytes = m.mems().bytes[loc] as u64;
    let bcast = ext.is_broadcast(m.mems().space[loc]);
    let pitch = match (flat, ext.pstep) {
        (true, Some(step)) => step as u64,
        _ => bytes,
    };
    let dims = m.ap_dims(ap);
    let mut rect = Rect {
        region,
        p0: 0,
        p1: 0,
        row: 0,
        bcast: 0,
    };
    if dims.iter().any(|d| d.count == 0) || qn == 0 {
        return Ok(rect);
    }
    if q0 < 0 {
        return Err(bad);
    }
    let q0 = q0 as u64;
    // Flat DRAM: every segment is checked against the location's end
    // below; on chip the partitions here.
    let rows_used = if bcast { 1 } else { qn };
    if !flat && q0.saturating_add(rows_used) > parts as u64 {
        return Err(bad);
    }
    let row_of = |k: u64| -> u64 {
        if flat {
            addr_base
                .wrapping_add(q0.wrapping_mul(bytes))
                .wrapping_add(k.wrapping_mul(pitch))
        } else {
            addr_base
        }
    };
    // Flat DRAM lists every partition's segments; elsewhere one partition's
    // stand for all.
    let partitions = if flat { 0..rows_used } else { 0..1 };
    if let Some(r) = ext.reg {
        // Somewhere in the window: the whole window, on every partition.
        if r.window_lo >= r.window_hi || r.window_hi as u64 > bytes {
            return Err(bad);
        }
        for k in partitions {
            let a = row_of(k).wrapping_add(r.window_lo as u64);
            push_seg(
                segs,
                a,
                a.wrapping_add((r.window_hi - r.window_lo) as u64),
                1,
            )?;
        }
    } else {
        let (mut nk, row_elems) = folded_dims(dims);
        // An innermost outer dim of stride 0 walks the same row again: one
        // segment with that many walks, not an odometer step per walk.
        let mut walks = 1u64;
        if nk > 0 && dims[nk - 1].stride == 0 {
            walks = dims[nk - 1].count as u64;
            nk -= 1;
        }
        let outer = &dims[..nk];
        let es = m.aps().elem_size[ap] as i64;
        let row_bytes = row_elems.saturating_mul(es as u64);
        for k in partitions {
            let shift = row_of(k);
            let mut idx = [0u32; crate::ir::MAX_DIMS];
            loop {
                let e: i64 = outer.iter().zip(idx.iter()).fold(0i64, |s, (d, &i)| {
                    s.wrapping_add((d.stride as i64).wrapping_mul(i as i64))
                });
                let byte = base.wrapping_add(e.wrapping_mul(es));
                let end = (shift - addr_base).saturating_add(byte as u64 + row_bytes);
                let limit = if flat {
                    (parts as u64).saturating_mul(bytes)
                } else {
                    bytes
                };
                if byte < 0 || end > limit {
                    return Err(bad);
                }
                let a = shift.wrapping_add(byte as u64);
                push_seg(segs, a, a.wrapping_add(row_bytes), walks)?;
                // Odometer over the outer dims, innermost fastest.
                let mut done = true;
                let mut j = nk;
                while j > 0 {
                    j -= 1;
                    idx[j] += 1;
                    if idx[j] < outer[j].count {
                        done = false;
                        break;
                    }
                    idx[j] = 0;
                }
                if done {
                    break;
                }
            }
        }
    }
    rect.row = segs.iter().fold(0u64, |n, s| n.wrapping_add(s.bytes()));
    if flat {
        rect.p0 = 0;
        rect.p1 = 1;
    } else if bcast {
        rect.p0 = (p_base + q0) as u32;
        rect.p1 = rect.p0 + 1;
        rect.bcast = qn as u32;
    } else {
        rect.p0 = (p_base + q0) as u32;
        rect.p1 = (p_base + q0 + qn) as u32;
    }
    Ok(rect)
}

/// Most slots of [`RectMemo`] (64 KiB of entries).
const MEMO_SLOTS: usize = 1024;

/// The cells [`ap_rect`] gave for patterns that no loop term or register
/// moves, direct-mapped by pattern. Such a pattern covers the same cells at
/// every execution (they follow from the module, which the walk only reads,
/// and the layout, fixed when the walk begins), and a loop walked iteration
/// by iteration executes it again in every pass; so it is worked out once
/// while it keeps its slot. Only one-segment answers are kept (a pattern
/// of several rows of flat DRAM is worked out each time). Patterns that
/// loops move are worked out each time as well: most of them are rows of
/// flat DRAM, and a moved answer would need its bounds checked again.
///
/// Invariant: a slot `(a, r, s)` with `a` valid holds `ap_rect`'s answer
/// for pattern `a` of the module the walk began on.
#[derive(Debug, Default)]
pub(super) struct RectMemo {
    slots: Vec<(Ap, Rect, Seg)>,
}

impl RectMemo {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.slots)
    }

    /// Empties the memo for a new walk, with as many slots (a power of two,
    /// at most [`MEMO_SLOTS`]) as `max_bytes` holds: the memo only saves
    /// work, so under a storage limit it takes a small share of what the
    /// limit leaves, and none when that is too little to be worth a table.
    pub fn clear(&mut self, max_bytes: u64) {
        const EMPTY: (Ap, Rect, Seg) = (
            Ap::INVALID,
            Rect {
                region: 0,
                p0: 0,
                p1: 0,
                row: 0,
                bcast: 0,
            },
            Seg {
                a: 0,
                b: 0,
                reps: 0,
            },
        );
        let fit = max_bytes / core::mem::size_of::<(Ap, Rect, Seg)>() as u64;
        let slots = match fit.min(MEMO_SLOTS as u64) {
            n if n < 16 => 0,
            n => 1usize << n.ilog2(),
        };
        if self.slots.capacity() > slots {
            self.slots = Vec::new();
        }
        self.slots.clear();
        if self.slots.try_reserve_exact(slots).is_ok() {
            self.slots.resize(slots, EMPTY);
        }
    }

    /// The rectangle and segment of pattern `a`, when held.
    #[inline]
    pub fn get(&self, a: Ap) -> Option<(Rect, Seg)> {
        let mask = self.slots.len().checked_sub(1)?;
        let &(k, r, s) = self.slots.get(a.index() & mask)?;
        (k == a).then_some((r, s))
    }

    /// Holds `ap_rect`'s one-segment answer for pattern `a`.
    #[inline]
    fn put(&mut self, a: Ap, r: Rect, s: Seg) {
        if let Some(mask) = self.slots.len().checked_sub(1) {
            if let Some(slot) = self.slots.get_mut(a.index() & mask) {
                *slot = (a, r, s);
            }
        }
    }
}

/// The cells of pattern `ap` of `inst` in the current execution, as
/// [`ap_rect`] gives them, through `memo` when no loop or register moves
/// the pattern.
pub(super) fn ap_rect_memo(
    m: &Module,
    layout: &Layout,
    memo: &mut RectMemo,
    inst: Inst,
    ap: Ap,
    segs: &mut Vec<Seg>,
    iv: &dyn Fn(Loop) -> Option<u32>,
) -> Result<Rect, DataflowError> {
    let ext = m.ap_ext(ap);
    let fixed = ext.terms.is_empty() && ext.reg.is_none();
    if fixed {
        if let Some((r, s)) = memo.get(ap) {
            segs.clear();
            push_grow(segs, s, "the segments of one access pattern")?;
            return Ok(r);
        }
    }
    let r = ap_rect(m, layout, inst, ap, segs, iv)?;
    if let (true, [s]) = (fixed, segs.as_slice()) {
        memo.put(ap, r, *s);
    }
    Ok(r)
}

/// (region, first partition, first address, flat DRAM?) of a location.
fn place(m: &Module, layout: &Layout, l: MemLoc) -> (usize, u64, u64, bool) {
    if !m.is_placed(l) {
        // Unplaced DRAM is flat when a pattern needs it (`Layout`).
        let flat = m.mems().space[l] == Space::Dram && layout.is_flat(l);
        return (FIRST_PRIVATE + l.index(), 0, 0, flat);
    }
    let space = m.mems().space[l];
    let off = m.mems().offset[l];
    match space {
        Space::Dram => (space.slot(), 0, off, true),
        Space::Sb | Space::Psum => (space.slot(), m.mems().base_partition[l] as u64, off, false),
    }
}

/// The whole of a location: its rectangle, and its one segment per
/// partition (all partitions' bytes in one segment in flat DRAM).
pub(super) fn loc_rect(m: &Module, layout: &Layout, l: MemLoc) -> (Rect, Seg) {
    let (region, p_base, addr, flat) = place(m, layout, l);
    let parts = m.mems().partitions[l] as u64;
    let bytes = m.mems().bytes[l] as u64;
    if flat {
        let n = parts.saturating_mul(bytes);
        let r = Rect {
            region,
            p0: 0,
            p1: 1,
            row: n,
            bcast: 0,
        };
        (r, Seg::once(addr, addr.saturating_add(n)))
    } else {
        let r = Rect {
            region,
            p0: p_base as u32,
            p1: (p_base + parts) as u32,
            row: bytes,
            bcast: 0,
        };
        (r, Seg::once(addr, addr.saturating_add(bytes)))
    }
}

/// The cells of a register: (region, start, end) on partition 0.
pub(super) fn reg_cells(m: &Module, r: Reg) -> (usize, u64, u64) {
    let lane_bytes = m.target.reg_lane_bytes as u64;
    let n = m.regs().lanes[r] as u64 * lane_bytes;
    match m.regs().lane[r] {
        NO_LANE => (FIRST_PRIVATE + m.num_mems() + r.index(), 0, n),
        lane => {
            let a = lane as u64 * lane_bytes;
            (REGISTER_FILE, a, a + n)
        }
    }
}

/// The private region of location `l` when `m` holds it in one (unplaced:
/// its cells are no other location's), else `None`.
pub(super) fn private_region(m: &Module, l: MemLoc) -> Option<usize> {
    (!m.is_placed(l)).then_some(FIRST_PRIVATE + l.index())
}
