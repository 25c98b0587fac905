//! One program's half of the lockstep walk: its value state, its walker,
//! and the reads and writes of one instruction.
//!
//! Pure data movements — `load`, `save`, `dma_copy`, `tensor_copy` (same
//! element size), `spill_store`, `reload` and `mov`, with one source and
//! one destination of equal size — are transparent: byte `i` of the source
//! traversal lands in byte `i` of the destination traversal. A `memset`
//! writes its constant (`Origin::Const`), the same bytes wherever it runs.
//! Every other write makes fresh values named by the writing instruction.

use alloc::vec::Vec;

use super::pieces::{push_grow, Cursor, Piece, Pieces};
use super::release::Release;
use super::report::{DataflowError, Origin};
use super::shape::{ap_rect_memo, loc_rect, reg_cells, regions, Layout, Rect, RectMemo, Seg};
use super::state::{CellMap, Fill};
use super::walk::Walker;
use crate::ir::{Ap, Inst, MemFlags, Module, Opcode};

/// One execution's reads: runs, and where each operand's runs start in
/// them (plus one end).
#[derive(Copy, Clone, Debug)]
pub(super) struct ReadsView<'a> {
    pub pieces: &'a [Piece],
    pub ops: &'a [u32],
}

impl<'a> ReadsView<'a> {
    /// Read operands.
    pub fn n_operands(&self) -> usize {
        self.ops.len().saturating_sub(1)
    }

    /// The runs read operand `k` produced.
    pub fn operand(&self, k: usize) -> &'a [Piece] {
        match (self.ops.get(k), self.ops.get(k + 1)) {
            (Some(&a), Some(&b)) => self.pieces.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Side {
    pub state: CellMap,
    pub walker: Walker,
    /// How the program's unplaced DRAM locations are held.
    pub layout: Layout,
    /// The cells of the patterns no loop moves, once worked out.
    memo: RectMemo,
    /// One instruction's reads, operand after operand.
    pub reads: Pieces,
    /// Where each read operand's runs start in `reads` (plus one end).
    pub ops: Vec<u32>,
    /// Scratch: one access pattern's segments; a copy's first partition.
    segs: Vec<Seg>,
    chunk: Vec<Piece>,
    /// The most runs one instruction's reads produced.
    pub reads_high: usize,
    /// The locations the walk is done with, dropped from `state` as it
    /// passes them.
    pub release: Release,
}

impl Side {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.reads.v, self.ops, self.segs, self.chunk)
            .saturating_add(self.state.heap_bytes())
            .saturating_add(self.walker.heap_bytes())
            .saturating_add(self.layout.heap_bytes())
            .saturating_add(self.memo.heap_bytes())
            .saturating_add(self.release.heap_bytes())
    }

    /// Caps what the buffers that may grow large (the value-run arenas
    /// and one instruction's reads) may add to their reservations at
    /// `slack` bytes, half each (`None`: no cap). Called before every
    /// execution with this side's share of what the storage limit leaves,
    /// so that no execution takes the checker past the limit: each growth
    /// takes at most what is left, down to nothing (the walk then stops
    /// with [`DataflowError::OverBudget`]).
    pub fn cap_growth(&mut self, slack: Option<u64>) {
        let Some(slack) = slack else {
            self.state.set_run_cap(None);
            self.reads.set_cap(None);
            return;
        };
        let half = slack / 2;
        let runs = half / super::state::RUN_BYTES;
        let reads = half / core::mem::size_of::<Piece>() as u64;
        let add = |n: usize, k: u64| n.saturating_add(k.min(usize::MAX as u64) as usize);
        self.state
            .set_run_cap(Some(add(self.state.arena_capacity(), runs)));
        self.reads
            .set_cap(Some(add(self.reads.v.capacity(), reads)));
    }

    pub fn reserve(&mut self, runs: usize, reads: usize) {
        fn grow<T>(v: &mut Vec<T>, n: usize) {
            let _ = v.try_reserve(n.saturating_sub(v.len()));
        }
        self.state.reserve(runs);
        grow(&mut self.reads.v, reads);
        grow(&mut self.ops, 64);
        grow(&mut self.segs, 64);
        grow(&mut self.chunk, 64);
    }

    /// Clears the state to `m`'s start: module inputs hold their own bytes
    /// (partition × bytes + byte), everything else is uninitialized. The
    /// memo of patterns' cells may take `memo_bytes`.
    pub fn begin(&mut self, m: &Module, memo_bytes: u64) -> Result<(), DataflowError> {
        self.state.clear(regions(m));
        self.layout.compute(m)?;
        self.memo.clear(memo_bytes);
        self.reads_high = 0;
        for l in m.mems().space.keys() {
            if m.mems().flags[l].contains(MemFlags::INPUT) {
                let (r, Seg { a, b, .. }) = loc_rect(m, &self.layout, l);
                let fill = Fill {
                    origin: Origin::Input(l),
                    offset: 0,
                    pstride: r.row,
                };
                self.state.assign(r.region, r.p0, r.p1, a, b, fill)?;
            }
        }
        self.release.compute(m)?;
        self.walker.start(m);
        Ok(())
    }

    fn push_op(&mut self) -> Result<(), DataflowError> {
        self.reads.fence();
        let at = self.reads.len() as u32;
        push_grow(&mut self.ops, at, "operands of one instruction")
    }

    /// Drops the locations the walk is done with (`release`), then reads
    /// every operand of `i` into `reads`: the input access
    /// patterns, the used registers, then — for each output with a
    /// register term — the window it may write, as it is before the write
    /// (a may-write keeps what it does not overwrite, so what it may keep
    /// must match too).
    pub fn read(&mut self, m: &Module, i: Inst) -> Result<(), DataflowError> {
        self.release.enter(m, m.insts().block[i], &mut self.state)?;
        self.reads.clear();
        self.ops.clear();
        for a in m.inputs(i) {
            self.push_op()?;
            self.read_ap(m, i, a)?;
        }
        for &g in m.uses(i) {
            self.push_op()?;
            let (region, a, b) = reg_cells(m, g);
            self.state
                .read(region, 0, 1, &[Seg::once(a, b)], &mut self.reads)?;
        }
        for a in m.outputs(i) {
            if m.ap_ext(a).is_dynamic() {
                self.push_op()?;
                self.read_ap(m, i, a)?;
            }
        }
        self.push_op()?;
        self.reads_high = self.reads_high.max(self.reads.len());
        Ok(())
    }

    /// The cells of pattern `a` of `i` in this execution: its rectangle,
    /// its segments in `segs`.
    fn cells(&mut self, m: &Module, i: Inst, a: Ap) -> Result<Rect, DataflowError> {
        let w = &self.walker;
        let iv = |l| w.iv(l);
        ap_rect_memo(m, &self.layout, &mut self.memo, i, a, &mut self.segs, &iv)
    }

    /// Appends the cells of pattern `a` (this execution's) to `reads`.
    fn read_ap(&mut self, m: &Module, i: Inst, a: Ap) -> Result<(), DataflowError> {
        let r = self.cells(m, i, a)?;
        if r.bcast > 0 {
            for _ in 0..r.bcast {
                self.state
                    .read(r.region, r.p0, r.p1, &self.segs, &mut self.reads)?;
            }
            return Ok(());
        }
        self.state
            .read(r.region, r.p0, r.p1, &self.segs, &mut self.reads)
    }

    /// The reads of the last [`Self::read`], operand by operand.
    pub fn view(&self) -> ReadsView<'_> {
        ReadsView {
            pieces: &self.reads.v,
            ops: &self.ops,
        }
    }

    /// The runs read operand `k` produced.
    pub fn operand(&self, k: usize) -> &[Piece] {
        self.view().operand(k)
    }

    /// Bytes read operand `k` produced.
    fn read_bytes(&self, k: usize) -> u64 {
        self.operand(k)
            .iter()
            .fold(0u64, |n, p| n.saturating_add(p.bytes()))
    }

    /// The read operand whose bytes a pure data movement copies, if `i` is one.
    fn copy_source(&self, m: &Module, i: Inst) -> Option<usize> {
        let o = m.operands(i);
        // A register-offset access is somewhere in its window: what it
        // moves is not known byte for byte.
        if m.all_aps(i).any(|a| m.ap_ext(a).is_dynamic()) {
            return None;
        }
        let op = m.insts().opcode[i];
        let first_in = Ap::from_u32(o.ap_start);
        let first_out = Ap::from_u32(o.ap_start + o.n_in as u32);
        match op {
            Opcode::Load | Opcode::Save | Opcode::DmaCopy | Opcode::TensorCopy
                if o.n_in == 1 && o.n_out == 1 && o.n_def == 0 =>
            {
                // A tensor copy between element types converts.
                let (ti, to) = (
                    m.mems().dtype[m.aps().loc[first_in]],
                    m.mems().dtype[m.aps().loc[first_out]],
                );
                let same_elem = op != Opcode::TensorCopy
                    || (m.aps().elem_size[first_in] == m.aps().elem_size[first_out]
                        && (ti == to || ti.is_raw() || to.is_raw()));
                (same_elem && self.read_bytes(0) == m.ap_bytes(first_out)).then_some(0)
            }
            Opcode::RegSpillStore
                if o.n_in == 0 && o.n_use == 1 && o.n_out == 1 && o.n_def == 0 =>
            {
                (self.read_bytes(0) == m.ap_bytes(first_out)).then_some(0)
            }
            Opcode::RegReload if o.n_in == 1 && o.n_use == 0 && o.n_out == 0 && o.n_def == 1 => {
                let r = m.defs(i)[0];
                (self.read_bytes(0) == m.regs().lanes[r] as u64 * m.target.reg_lane_bytes as u64)
                    .then_some(0)
            }
            Opcode::ScalarMov if o.n_in == 0 && o.n_use == 1 && o.n_out == 0 && o.n_def == 1 => {
                let (s, d) = (m.uses(i)[0], m.defs(i)[0]);
                (m.regs().lanes[s] == m.regs().lanes[d]).then_some(0)
            }
            _ => None,
        }
    }

    /// Applies the writes of `i` (after [`Self::read`]): a transparent copy
    /// for pure data movements, fresh values otherwise.
    pub fn write(&mut self, m: &Module, i: Inst) -> Result<(), DataflowError> {
        let o = m.operands(i);
        if let Some(k) = self.copy_source(m, i) {
            let rect = if o.n_out == 1 {
                self.cells(m, i, Ap::from_u32(o.ap_start + o.n_in as u32))?
            } else {
                let (region, x, y) = reg_cells(m, m.defs(i)[0]);
                self.segs.clear();
                push_grow(
                    &mut self.segs,
                    Seg::once(x, y),
                    "the segments of one access pattern",
                )?;
                Rect {
                    region,
                    p0: 0,
                    p1: 1,
                    row: y - x,
                    bcast: 0,
                }
            };
            let (a, b) = (self.ops[k] as usize, self.ops[k + 1] as usize);
            let pieces = &self.reads.v[a..b];
            return put_copy(&mut self.state, rect, &self.segs, pieces, &mut self.chunk);
        }
        for (k, a) in m.outputs(i).enumerate() {
            let origin = const_origin(m, i, a).unwrap_or(Origin::Def {
                inst: i,
                operand: k as u8,
            });
            let r = self.cells(m, i, a)?;
            let mut t: u64 = 0;
            for seg in &self.segs {
                // A segment written several times keeps its last walk.
                t = t.wrapping_add(seg.len().wrapping_mul(seg.reps.saturating_sub(1)));
                let fill = Fill {
                    origin,
                    offset: t,
                    pstride: r.row,
                };
                self.state
                    .assign(r.region, r.p0, r.p1, seg.a, seg.b, fill)?;
                t = t.wrapping_add(seg.len());
            }
        }
        for (k, &g) in m.defs(i).iter().enumerate() {
            let origin = Origin::Def {
                inst: i,
                operand: (o.n_out as usize + k) as u8,
            };
            let (region, x, y) = reg_cells(m, g);
            let fill = Fill {
                origin,
                offset: 0,
                pstride: 0,
            };
            self.state.assign(region, 0, 1, x, y, fill)?;
        }
        Ok(())
    }
}

/// The value a `memset` writes through output `a`: its constant, as the
/// element type of the location and the element size of the pattern
/// (`None` for any other instruction, and for an immediate beyond 32 bits,
/// which keeps the name of its instruction).
fn const_origin(m: &Module, i: Inst, a: Ap) -> Option<Origin> {
    if m.insts().opcode[i] != Opcode::Memset {
        return None;
    }
    Some(Origin::Const {
        value: i32::try_from(m.imm(i)).ok()?,
        dtype: m.mems().dtype[m.aps().loc[a]].code(),
        elem: m.aps().elem_size[a],
    })
}

/// Writes the copied runs `pieces` (in traversal order) over the cells of
/// `rect` × `segs`. When every partition receives the same runs as the
/// first, shifted by a fixed stride (a whole tile, or a slice of a
/// regularly laid out one), each run is one rectangle over all partitions;
/// otherwise partition by partition.
pub(super) fn put_copy(
    state: &mut CellMap,
    rect: Rect,
    segs: &[Seg],
    pieces: &[Piece],
    chunk: &mut Vec<Piece>,
) -> Result<(), DataflowError> {
    if rect.parts() > 1 {
        if let Some(stride) = affine(pieces, rect.parts(), rect.row, chunk)? {
            let mut c = Cursor::new(chunk);
            return put_row(state, rect.region, rect.p0, rect.p1, segs, &mut c, stride);
        }
    }
    let mut c = Cursor::new(pieces);
    for q in rect.p0..rect.p1 {
        put_row(state, rect.region, q, q + 1, segs, &mut c, 0)?;
    }
    Ok(())
}

/// Writes runs from `c` over `segs` in order on partitions `[q0, q1)`,
/// shifting by `pstride` per partition; stops when `c` runs dry.
fn put_row(
    state: &mut CellMap,
    region: usize,
    q0: u32,
    q1: u32,
    segs: &[Seg],
    c: &mut Cursor<'_>,
    pstride: u64,
) -> Result<(), DataflowError> {
    for seg in segs {
        // Every walk but the last is overwritten by the next.
        let mut skip = seg.len().saturating_mul(seg.reps.saturating_sub(1));
        while skip > 0 {
            let Some(p) = c.take(skip) else {
                return Ok(());
            };
            skip -= p.len;
        }
        let (a, b) = (seg.a, seg.b);
        let mut x = a;
        while x < b {
            let Some(p) = c.take(b - x) else {
                return Ok(());
            };
            let fill = Fill {
                origin: p.origin,
                offset: p.offset,
                pstride,
            };
            state.assign(region, q0, q1, x, x + p.len, fill)?;
            x += p.len;
        }
    }
    Ok(())
}

/// When `pieces` (`parts` partitions of `row` bytes each) give every
/// partition q the runs of partition 0 with offsets shifted by q × S:
/// partition 0's runs (into `chunk`) and S.
fn affine(
    pieces: &[Piece],
    parts: u64,
    row: u64,
    chunk: &mut Vec<Piece>,
) -> Result<Option<u64>, DataflowError> {
    chunk.clear();
    // One group with a run per partition, or one run over all of them.
    if let [p] = pieces {
        if p.reps == parts && p.len == row {
            push_grow(
                chunk,
                Piece::run(p.origin, p.offset, row),
                "the runs of one copied partition",
            )?;
            return Ok(Some(p.stride));
        }
        if p.reps == 1 && p.len == parts.saturating_mul(row) {
            push_grow(
                chunk,
                Piece::run(p.origin, p.offset, row),
                "the runs of one copied partition",
            )?;
            return Ok(Some(if p.origin == Origin::Uninit { 0 } else { row }));
        }
    }
    let mut c = Cursor::new(pieces);
    let mut got = 0;
    while got < row {
        let Some(p) = c.take(row - got) else {
            return Ok(None);
        };
        push_grow(chunk, p, "the runs of one copied partition")?;
        got += p.len;
    }
    let mut stride: Option<u64> = None;
    for q in 1..parts {
        for e in chunk.iter() {
            let Some(p) = c.take(e.len) else {
                return Ok(None);
            };
            if p.len != e.len || p.origin != e.origin {
                return Ok(None);
            }
            if e.origin == Origin::Uninit {
                continue;
            }
            let d = p.offset.wrapping_sub(e.offset);
            match stride {
                None if d % q == 0 => stride = Some(d / q),
                Some(s) if s.wrapping_mul(q) == d => {}
                _ => return Ok(None),
            }
        }
    }
    Ok(Some(stride.unwrap_or(0)))
}
