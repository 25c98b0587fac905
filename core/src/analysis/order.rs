//! Linear program order: functions, blocks in layout order, instructions in
//! block order, numbered 0..n. Every analysis and allocator works on these
//! positions; loops become position spans.

use alloc::vec::Vec;

use crate::ir::{Block, Capacity, Column, Inst, Loop, Module};
use crate::storage::grow;

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
        for b in m.blocks().name.keys() {
            let start = self.insts().len() as u32;
            let l = m.blocks().loop_[b];
            for i in m.block_insts(b) {
                self.pos[i] = self.insts().len() as u32;
                self.insts.push(i);
                self.loop_at.push(l);
            }
            self.block_start.push(start);
            self.block_end.push(self.insts().len() as u32);
        }
        self.loop_start.clear();
        self.loop_end.clear();
        for l in m.loops().trip.keys() {
            let (fb, eb) = (m.loops().first_block[l], m.loops().end_block[l]);
            let start = self
                .block_start
                .get(fb)
                .copied()
                .unwrap_or(self.insts().len() as u32);
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
        self.insts().len()
    }

    /// True for a module without instructions.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.insts().is_empty()
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
        if m.loops().trip[l] == 1 {
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
            l = m.loops().parent[l];
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

/// A walk's position in the blocks of one loop body (or of the whole
/// program), in layout order, and in its passes over them. Walkers of the
/// loop nest (the schedule model, the dataflow checker) keep a stack of
/// these, one per entered loop; how many passes a loop gets, and what they
/// do per pass, is theirs.
#[derive(Copy, Clone, Debug)]
pub(crate) struct BlockSpan {
    /// The loop whose body this is ([`Loop::INVALID`]: the whole program).
    lp: Loop,
    /// The body's first block.
    start: u32,
    /// One past the body's last block.
    end: u32,
    /// The block visited next (`end`: this pass is over).
    next: u32,
    /// The current pass, from 0.
    pass: u32,
    /// How many passes the walker makes over the body.
    passes: u32,
}

impl BlockSpan {
    /// Every block of `m`, outside any loop.
    pub(crate) fn program(m: &Module) -> Self {
        Self {
            lp: Loop::INVALID,
            start: 0,
            end: m.num_blocks() as u32,
            next: 0,
            pass: 0,
            passes: 1,
        }
    }

    /// The loop whose body this is ([`Loop::INVALID`]: the whole program).
    pub(crate) fn lp(&self) -> Loop {
        self.lp
    }

    /// The current pass, from 0.
    pub(crate) fn pass(&self) -> u32 {
        self.pass
    }

    /// The same span, walked `passes` times.
    pub(crate) fn with_passes(self, passes: u32) -> Self {
        Self { passes, ..self }
    }

    /// Moves past the block [`BlockSpan::block`] names.
    pub(crate) fn advance(&mut self) {
        self.next += 1;
    }

    /// Whether every block of this pass over the body has been visited.
    pub(crate) fn done(&self) -> bool {
        self.next >= self.end
    }

    /// Ends the current pass: starts the next one and returns true, or
    /// returns false when that was the last (the walker then leaves the body).
    pub(crate) fn end_pass(&mut self) -> bool {
        self.pass += 1;
        if self.pass < self.passes {
            self.next = self.start;
            true
        } else {
            false
        }
    }

    /// The block visited next.
    pub(crate) fn block(&self) -> Block {
        Block::new(self.next as usize)
    }

    /// When the next block starts a loop directly inside this one, that
    /// loop's body (with one pass: see [`BlockSpan::with_passes`]), and this span
    /// then resumes after the loop (whether or not the caller enters it). A
    /// malformed loop (ending at or before its start) still covers its first
    /// block, so the walk advances.
    pub(crate) fn enter_child(&mut self, m: &Module) -> Option<BlockSpan> {
        let b = self.block();
        let child = child_loop_starting_at(m, self.lp, b)?;
        let end = m.loops().end_block[child].as_u32().max(b.as_u32() + 1);
        self.next = end;
        Some(BlockSpan {
            lp: child,
            start: b.as_u32(),
            end,
            next: b.as_u32(),
            pass: 0,
            passes: 1,
        })
    }
}

/// Instruction executions of a walk of `m` that makes `passes(l)` passes
/// over each loop `l`: each block's instructions times the passes of the
/// loops around it, saturating.
pub(crate) fn executions_with(m: &Module, passes: impl Fn(Loop) -> u64) -> u64 {
    let mut total = 0u64;
    for b in 0..m.num_blocks() {
        let b = Block::new(b);
        let n = m.block_insts(b).count() as u64;
        let mut mult = 1u64;
        let mut l = m.blocks().loop_[b];
        while l.is_valid() {
            mult = mult.saturating_mul(passes(l));
            l = m.loops().parent[l];
        }
        total = total.saturating_add(n.saturating_mul(mult));
    }
    total
}

/// The loop directly inside `outer` whose first block is `b`, if any.
fn child_loop_starting_at(m: &Module, outer: Loop, b: Block) -> Option<Loop> {
    let mut l = m.blocks().loop_[b];
    while l.is_valid() && l != outer {
        if m.loops().parent[l] == outer {
            return (m.loops().first_block[l] == b).then_some(l);
        }
        l = m.loops().parent[l];
    }
    None
}
