//! The order a program's instructions execute in, one at a time, so that
//! two programs can be walked in lockstep.
//!
//! Loops: each loop body is walked twice when its trip count is not 1 (the
//! second walk runs inner loops once), so a value clobbered on its way
//! around a back edge is caught; an instruction at loop depth d is executed
//! at most d + 1 times.

use alloc::vec::Vec;

use super::report::DataflowError;
use crate::ir::{Block, Inst, Loop, Module, UNKNOWN_TRIP};

#[derive(Copy, Clone, Debug)]
struct Frame {
    lp: Loop,
    start: u32,
    end: u32,
    next: u32,
    pass: u8,
    passes: u8,
    once: bool,
}

/// A resumable walk over a module's executions (see the module doc).
#[derive(Debug)]
pub(super) struct Walker {
    frames: Vec<Frame>,
    /// The next instruction of the current block, and the walk it is in.
    cur: Inst,
    pass: u8,
}

impl Default for Walker {
    fn default() -> Self {
        Walker {
            frames: Vec::new(),
            cur: Inst::INVALID,
            pass: 0,
        }
    }
}

impl Walker {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.frames)
    }

    /// Reserves the loop-nesting stack for `loops` loops.
    pub fn reserve(&mut self, loops: usize) {
        self.frames
            .reserve((loops + 1).saturating_sub(self.frames.len()));
    }

    /// Starts at the first block of `m`.
    pub fn start(&mut self, m: &Module) {
        self.frames.clear();
        self.frames.push(Frame {
            lp: Loop::INVALID,
            start: 0,
            end: m.num_blocks() as u32,
            next: 0,
            pass: 0,
            passes: 1,
            once: false,
        });
        self.cur = Inst::INVALID;
        self.pass = 0;
    }

    /// The next execution: the instruction and 0 on the first walk of its
    /// innermost loop, 1 on the second; `None` at the end.
    pub fn next(&mut self, m: &Module) -> Result<Option<(Inst, u8)>, DataflowError> {
        loop {
            if self.cur.is_valid() {
                let i = self.cur;
                self.cur = m.insts.next[i];
                return Ok(Some((i, self.pass)));
            }
            let Some(top) = self.frames.last().copied() else {
                return Ok(None);
            };
            let depth = self.frames.len() - 1;
            if top.next >= top.end {
                let f = &mut self.frames[depth];
                f.pass += 1;
                if f.pass < f.passes {
                    f.next = f.start;
                } else {
                    self.frames.pop();
                }
                continue;
            }
            let b = Block::new(top.next as usize);
            // The child loop of the current one that contains b, if any.
            let mut l = m.blocks.loop_[b];
            let mut child = Loop::INVALID;
            while l.is_valid() && l != top.lp {
                if m.loops.parent[l] == top.lp {
                    child = l;
                    break;
                }
                l = m.loops.parent[l];
            }
            if child.is_valid() && m.loops.first_block[child] == b {
                let once = top.once || top.pass >= 1;
                let trip = m.loops.trip[child];
                let passes = if once || (trip <= 1 && trip != UNKNOWN_TRIP) {
                    1
                } else {
                    2
                };
                // A malformed loop (ending at or before its start) still advances.
                let end = m.loops.end_block[child].as_u32().max(b.as_u32() + 1);
                self.frames[depth].next = end;
                if self.frames.len() == self.frames.capacity() {
                    return Err(DataflowError::Capacity {
                        what: "loop nesting",
                        reserved: self.frames.capacity(),
                    });
                }
                self.frames.push(Frame {
                    lp: child,
                    start: b.as_u32(),
                    end,
                    next: b.as_u32(),
                    pass: 0,
                    passes,
                    once,
                });
                continue;
            }
            self.frames[depth].next += 1;
            self.cur = m.blocks.first[b];
            self.pass = top.pass;
        }
    }
}
