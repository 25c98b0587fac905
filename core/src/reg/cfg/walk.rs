//! The order in which a backward walk meets the points of one block: from
//! the block's exit to its entry, each instruction between the spill code
//! after it (point `2i + 1`) and the spill code before it (point `2i`),
//! spill code at one point in reverse insertion order.
//!
//! Every pass that walks a block backward from its live-out set (the
//! interference walk, the pressure spiller) takes its steps from here, so
//! they agree on where each reload, store and copy stands. The cursor holds
//! no borrow of the program: a pass may change the program between steps
//! (mark spills), as long as it adds no spill code to the block it walks,
//! since the order is read from the program's sorted spill code as it goes.

use super::program::Program;

/// One point of the walk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The spill-code operation `pseudo[x]` of the program.
    Pseudo(usize),
    /// Instruction `i` (its late point, then its early point).
    Inst(u32),
}

/// A cursor over the steps of one block, last first.
#[derive(Copy, Clone, Debug)]
pub(crate) struct BackwardSteps {
    /// The block's first spill-code operation.
    first_pseudo: usize,
    /// One past the next spill-code operation to visit.
    pseudo: usize,
    /// The block's first instruction.
    first: u32,
    /// One past the next instruction to visit.
    inst: u32,
}

impl BackwardSteps {
    /// The walk of block `b` of `p`, at the block's exit.
    pub fn new(p: &Program, b: usize) -> Self {
        let (first_pseudo, pseudo) = p.pseudo_range(b);
        Self {
            first_pseudo,
            pseudo,
            first: p.block_start[b],
            inst: p.block_end[b],
        }
    }

    /// The next step towards the block's entry, `None` once every
    /// instruction and every spill-code operation of the block was met.
    #[inline]
    pub fn step(&mut self, p: &Program) -> Option<Step> {
        if self.pseudo > self.first_pseudo {
            // Spill code after the next instruction (`2i + 1` with
            // `i = inst - 1`) or at a point already passed comes first.
            if p.pseudo[self.pseudo - 1].key + 1 >= 2 * self.inst {
                self.pseudo -= 1;
                return Some(Step::Pseudo(self.pseudo));
            }
        }
        if self.inst > self.first {
            self.inst -= 1;
            return Some(Step::Inst(self.inst));
        }
        None
    }
}
