//! Linear program order: functions, blocks in layout order, instructions in
//! block order, numbered 0..n. Every analysis and allocator works on these
//! positions; loops become position spans.

use alloc::vec::Vec;

use crate::ir::{Block, Capacity, Column, Inst, Loop, Module};

/// Position of an instruction that is not linked into any block.
pub const NO_POS: u32 = u32::MAX;

/// The linear order of a module and the position spans of its blocks and loops.
///
/// Invariant: `insts[pos[i]] == i` for every linked instruction `i`;
/// a loop's span `[start, end]` covers exactly the instructions of its blocks
/// (`start > end` for a loop without instructions).
#[derive(Clone, Debug, Default)]
pub struct LinearOrder {
    insts: Vec<Inst>,
    /// The innermost loop of the instruction at each position (its block's
    /// loop): the liveness loop rule reads it per access, one load instead
    /// of three dependent ones (instruction, block, loop).
    loop_at: Vec<Loop>,
    pos: Column<Inst, u32>,
    block_start: Column<Block, u32>,
    block_end: Column<Block, u32>,
    loop_start: Column<Loop, u32>,
    loop_end: Column<Loop, u32>,
}

impl LinearOrder {
    /// Empty storage; [`LinearOrder::compute`] sizes it.
    pub fn new() -> Self {
        Self::default()
    }

    /// The order of `m` (allocates its storage).
    pub fn of(m: &Module) -> Self {
        let mut o = Self::new();
        o.compute(m);
        o
    }

    /// Sizes the storage for a module of up to `cap` entities (totals, e.g.
    /// [`Module::capacity`]): afterwards [`LinearOrder::compute`] on any
    /// module within `cap` does not allocate.
    pub fn reserve(&mut self, cap: &Capacity) {
        grow(&mut self.insts, cap.insts);
        grow(&mut self.loop_at, cap.insts);
        self.pos.reserve(cap.insts.saturating_sub(self.pos.len()));
        for c in [&mut self.block_start, &mut self.block_end] {
            c.reserve(cap.blocks.saturating_sub(c.len()));
        }
        for c in [&mut self.loop_start, &mut self.loop_end] {
            c.reserve(cap.loops.saturating_sub(c.len()));
        }
    }

    /// Recomputes for `m`, reusing storage (allocates only when `m` grew
    /// beyond what this order held before and beyond its reserve).
    pub fn compute(&mut self, m: &Module) {
        self.insts.clear();
        self.loop_at.clear();
        self.pos.clear();
        self.pos.resize(m.num_insts(), NO_POS);
        self.block_start.clear();
        self.block_end.clear();
        for b in m.blocks.name.keys() {
            let start = self.insts.len() as u32;
            let l = m.blocks.loop_[b];
            for i in m.block_insts(b) {
                self.pos[i] = self.insts.len() as u32;
                self.insts.push(i);
                self.loop_at.push(l);
            }
            self.block_start.push(start);
            self.block_end.push(self.insts.len() as u32);
        }
        self.loop_start.clear();
        self.loop_end.clear();
        for l in m.loops.trip.keys() {
            let (fb, eb) = (m.loops.first_block[l], m.loops.end_block[l]);
            let start = self
                .block_start
                .get(fb)
                .copied()
                .unwrap_or(self.insts.len() as u32);
            let end = if eb.index() > fb.index() {
                self.block_end[Block::new(eb.index() - 1)]
            } else {
                start
            };
            // Stored inclusive: [start, end - 1]; empty when end == start.
            self.loop_start.push(start);
            self.loop_end.push(end.wrapping_sub(1));
        }
    }

    /// Number of linked instructions.
    #[inline]
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// True for a module without instructions.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }

    /// Instructions in program order.
    #[inline]
    pub fn insts(&self) -> &[Inst] {
        &self.insts
    }

    /// The instruction at a position.
    #[inline]
    pub fn inst_at(&self, pos: u32) -> Inst {
        self.insts
            .get(pos as usize)
            .copied()
            .unwrap_or(Inst::INVALID)
    }

    /// The innermost loop of the instruction at a position
    /// ([`Module::inst_loop`] of [`LinearOrder::inst_at`]), or
    /// [`Loop::INVALID`] outside every loop or past the end.
    #[inline]
    pub fn loop_at(&self, pos: u32) -> Loop {
        self.loop_at
            .get(pos as usize)
            .copied()
            .unwrap_or(Loop::INVALID)
    }

    /// Position of an instruction, or [`NO_POS`] when it is not linked.
    #[inline]
    pub fn pos(&self, i: Inst) -> u32 {
        self.pos.get(i).copied().unwrap_or(NO_POS)
    }

    /// Positions `[start, end)` of a block's instructions.
    pub fn block_span(&self, b: Block) -> (u32, u32) {
        (self.block_start[b], self.block_end[b])
    }

    /// [`LinearOrder::loop_span`] of a loop that runs its body more than
    /// once (a known trip count other than 1, or unknown): a loop that
    /// runs once has no back edge, so the loop rule of liveness and the
    /// spill rules leave it out.
    pub fn repeating_span(&self, m: &Module, l: Loop) -> Option<(u32, u32)> {
        if m.loops.trip[l] == 1 {
            return None;
        }
        self.loop_span(l)
    }

    /// Inclusive position span `[start, end]` of a loop, or `None` when it
    /// holds no instruction.
    pub fn loop_span(&self, l: Loop) -> Option<(u32, u32)> {
        let (s, e) = (self.loop_start[l], self.loop_end[l]);
        (e != u32::MAX && s <= e).then_some((s, e))
    }

    /// The inclusive span of the outermost loop around position `pos` that
    /// may run more than once (the union of those loops' spans, as loops
    /// nest), or `None` when no such loop encloses it: a loop of one
    /// iteration carries nothing from one iteration to the next.
    pub fn outermost_loop_span(&self, m: &Module, pos: u32) -> Option<(u32, u32)> {
        let mut l = self.loop_at(pos);
        let mut span: Option<(u32, u32)> = None;
        while l.is_valid() {
            if let Some((ls, le)) = self.repeating_span(m, l) {
                span = Some(span.map_or((ls, le), |(s, e)| (s.min(ls), e.max(le))));
            }
            l = m.loops.parent[l];
        }
        span
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.insts,
            self.loop_at,
            self.pos,
            self.block_start,
            self.block_end,
            self.loop_start,
            self.loop_end
        )
    }

    /// Bytes of storage held.
    pub fn reserved_bytes(&self) -> usize {
        self.insts.capacity() * 4
            + self.loop_at.capacity() * 4
            + self.pos.reserved_bytes()
            + self.block_start.reserved_bytes() * 2
            + self.loop_start.reserved_bytes() * 2
    }
}

/// Grows `v`'s capacity to at least `n` elements (whatever its length).
pub(crate) fn grow<T>(v: &mut Vec<T>, n: usize) {
    v.reserve(n.saturating_sub(v.len()));
}
