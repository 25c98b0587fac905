//! The order a program's instructions execute in, one at a time, so that
//! two programs can be walked in lockstep.
//!
//! Loops come in two kinds ([`LoopPlan`]):
//! - an **exact** loop — one that some access pattern's loop term moves
//!   with (in either program) — is walked once per iteration, its
//!   induction variable taking `0, 1, …, trip − 1`, so every iteration's
//!   cells are what they are in the unrolled program;
//! - any other loop touches the same cells in every iteration, and its body
//!   is walked twice when its trip count is not 1 (the second walk runs
//!   inner non-exact loops once), so a value clobbered on its way around a
//!   back edge is caught.
//!
//! When walking every exact iteration would exceed the checker's execution
//! limit ([`MAX_EXACT_EXECUTIONS`] unless the caller sets another), the
//! plan *samples* the exact loops instead: iterations 0, 1 and `trip − 1`
//! only, and says so ([`LoopPlan::sampled`]): the check is then partial,
//! and its report says so, with the executions a full walk would take
//! ([`LoopPlan::walk`]), so that a caller can lift the limit.

use alloc::vec::Vec;

use super::report::DataflowError;
use crate::analysis::order::{executions_with, BlockSpan};
use crate::ir::{Inst, Loop, Module, UNKNOWN_TRIP};

/// Most instruction executions the exact walk of one program may take
/// before the plan samples the exact loops, unless the checker is given
/// another limit (the check's time is linear in it; a kernel's tiled
/// loops stay far below).
pub const MAX_EXACT_EXECUTIONS: u64 = 1 << 25;

/// How each loop is walked, shared by both programs so that their walks
/// stay in lockstep.
#[derive(Debug, Default)]
pub(super) struct LoopPlan {
    /// Per loop: walked iteration by iteration.
    exact: Vec<bool>,
    /// True when the exact loops are sampled (see the module doc).
    pub sampled: bool,
    /// Exact loops in all.
    pub exact_loops: u32,
    /// Executions of a full walk of the longer program, every exact
    /// iteration walked (an upper bound: every other loop counted twice),
    /// whether or not the plan samples; 0 without exact loops.
    pub walk: u64,
}

impl LoopPlan {
    /// Reserves for `loops` loops.
    pub fn reserve(&mut self, loops: usize) {
        crate::storage::grow(&mut self.exact, loops);
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.exact)
    }

    /// The plan for walking `a` and `b` (an original and its rewrite: the
    /// same loops) together, sampling the exact loops when their full walk
    /// would take more than `limit` executions.
    pub fn compute(&mut self, a: &Module, b: &Module, limit: u64) -> Result<(), DataflowError> {
        let n = a.num_loops().max(b.num_loops());
        self.exact.clear();
        if self.exact.try_reserve(n).is_err() {
            return Err(DataflowError::Capacity {
                what: "the loop plan",
                reserved: self.exact.capacity(),
            });
        }
        self.exact.resize(n, false);
        for m in [a, b] {
            for k in 0..m.num_aps() {
                let ap = crate::ir::Ap::new(k);
                if m.ap_is_plain(ap) {
                    continue;
                }
                for t in &m.ap_ext(ap).terms {
                    if let Some(x) = self.exact.get_mut(t.lp.index()) {
                        *x = true;
                    }
                }
            }
        }
        self.exact_loops = self.exact.iter().filter(|&&x| x).count() as u32;
        self.sampled = false;
        self.walk = 0;
        if self.exact_loops > 0 {
            self.walk = executions(a, &self.exact).max(executions(b, &self.exact));
            self.sampled = self.walk > limit;
        }
        Ok(())
    }

    fn is_exact(&self, l: Loop) -> bool {
        self.exact.get(l.index()).copied().unwrap_or(false)
    }
}

/// Instruction executions of an exact walk of `m` (an upper bound: every
/// non-exact loop counted twice), saturating.
fn executions(m: &Module, exact: &[bool]) -> u64 {
    executions_with(m, |l| {
        let trip = m.loops().trip[l];
        let k = if exact.get(l.index()).copied().unwrap_or(false) && trip != UNKNOWN_TRIP {
            trip as u64
        } else {
            2
        };
        k.max(1)
    })
}

#[derive(Copy, Clone, Debug)]
struct Frame {
    /// The blocks and the passes over them; `span.pass` is the walk number
    /// within this loop (an exact loop: the iteration index into `iters`).
    span: BlockSpan,
    once: bool,
    exact: bool,
    /// The exact loop's trip count (for the sampled iterations).
    trip: u32,
    sampled: bool,
}

impl Frame {
    /// The induction value of walk `pass` of an exact loop.
    fn iv(&self) -> u32 {
        if self.sampled && self.span.pass() == 2 {
            self.trip.saturating_sub(1)
        } else {
            self.span.pass()
        }
    }
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
        crate::storage::grow(&mut self.frames, loops + 1);
    }

    /// Starts at the first block of `m`.
    pub fn start(&mut self, m: &Module) {
        self.frames.clear();
        self.frames.push(Frame {
            span: BlockSpan::program(m),
            once: false,
            exact: false,
            trip: 1,
            sampled: false,
        });
        self.cur = Inst::INVALID;
        self.pass = 0;
    }

    /// The induction value of loop `l` in the current execution, when `l`
    /// is an exact loop that encloses it (`None` otherwise).
    pub fn iv(&self, l: Loop) -> Option<u32> {
        self.frames
            .iter()
            .rev()
            .find(|f| f.span.lp() == l)
            .filter(|f| f.exact)
            .map(Frame::iv)
    }

    /// The next execution: the instruction and 0 on the first walk of its
    /// innermost non-exact loop, 1 on the second; `None` at the end.
    pub fn next(
        &mut self,
        m: &Module,
        plan: &LoopPlan,
    ) -> Result<Option<(Inst, u8)>, DataflowError> {
        loop {
            if self.cur.is_valid() {
                let i = self.cur;
                self.cur = m.insts().next[i];
                return Ok(Some((i, self.pass)));
            }
            let Some(top) = self.frames.last().copied() else {
                return Ok(None);
            };
            let depth = self.frames.len() - 1;
            if top.span.done() {
                if !self.frames[depth].span.end_pass() {
                    self.frames.pop();
                }
                continue;
            }
            let b = top.span.block();
            if let Some(span) = self.frames[depth].span.enter_child(m) {
                let child = span.lp();
                let trip = m.loops().trip[child];
                let exact = plan.is_exact(child) && trip != UNKNOWN_TRIP;
                let once = !exact && (top.once || (!top.exact && top.span.pass() >= 1));
                let passes = if exact {
                    if plan.sampled {
                        trip.min(3)
                    } else {
                        trip
                    }
                } else if once || (trip <= 1 && trip != UNKNOWN_TRIP) {
                    1
                } else {
                    2
                };
                if passes == 0 {
                    continue;
                }
                if self.frames.len() == self.frames.capacity() {
                    return Err(DataflowError::Capacity {
                        what: "loop nesting",
                        reserved: self.frames.capacity(),
                    });
                }
                self.frames.push(Frame {
                    span: span.with_passes(passes),
                    once,
                    exact,
                    trip,
                    sampled: exact && plan.sampled,
                });
                continue;
            }
            self.frames[depth].span.advance();
            self.cur = m.blocks().first[b];
            // The walk number reported is that of the innermost non-exact
            // loop (an exact loop's iterations are not re-walks).
            self.pass = self
                .frames
                .iter()
                .rev()
                .find(|f| !f.exact)
                .map_or(0, |f| f.span.pass().min(1) as u8);
        }
    }
}
