//! A [`FunctionBuf`] seen as a `regalloc2::Function`, and regalloc2's
//! figures counted the way `tusk regalloc` counts its own, so the two
//! allocators are compared on the same functions in one process.
//!
//! Mapping: every vreg is of one class (Float, whose 64 registers are all
//! allocatable; Int's last encoding is regalloc2's invalid marker); uses
//! are early register uses, defs late register defs, a tied def is a
//! reuse of its use's operand; the function's moves are ordinary
//! instructions (regalloc2 has no move instruction); the last instruction
//! of a block is its branch (with successors) or its return. Pairs are
//! not expressible here (1-lane functions only).

use regalloc2::{
    Allocation, Block as RBlock, Edit, Function, Inst, InstRange, MachineEnv, Operand, Output,
    PReg, PRegSet, RegClass, VReg as RVReg,
};
use tusk_core::regalloc::{Block, CfgFunction, CfgInst, FunctionBuf};

/// The adapter (owns regalloc2-typed copies of the index lists).
#[derive(Debug)]
pub struct Ra2Function<'a> {
    f: &'a FunctionBuf,
    ops: Vec<Operand>,
    op_start: Vec<u32>,
    succs: Vec<Vec<RBlock>>,
    preds: Vec<Vec<RBlock>>,
    params: Vec<Vec<RVReg>>,
    args: Vec<Vec<Vec<RVReg>>>,
    block_of: Vec<u32>,
}

fn vreg(v: tusk_core::regalloc::VReg) -> RVReg {
    RVReg::new(v.index(), RegClass::Float)
}

impl<'a> Ra2Function<'a> {
    /// Wraps `f` (validated, 1-lane vregs only).
    pub fn new(f: &'a FunctionBuf) -> Self {
        let mut ops = Vec::new();
        let mut op_start = vec![0u32];
        let mut block_of = vec![0u32; f.num_insts()];
        for i in 0..f.num_insts() {
            let inst = CfgInst(i as u32);
            for &u in f.uses(inst) {
                ops.push(Operand::reg_use(vreg(u)));
            }
            for (j, &d) in f.defs(inst).iter().enumerate() {
                let tied = f.tied(inst).iter().find(|t| t.def as usize == j);
                ops.push(match tied {
                    Some(t) => Operand::reg_reuse_def(vreg(d), t.use_ as usize),
                    None => Operand::reg_def(vreg(d)),
                });
            }
            op_start.push(ops.len() as u32);
        }
        let nb = f.num_blocks();
        let mut succs = Vec::with_capacity(nb);
        let mut preds = Vec::with_capacity(nb);
        let mut params = Vec::with_capacity(nb);
        let mut args = Vec::with_capacity(nb);
        for b in 0..nb {
            let blk = Block(b as u32);
            let (s, e) = f.block_insts(blk);
            for i in s..e {
                block_of[i as usize] = b as u32;
            }
            succs.push(
                f.succs(blk)
                    .iter()
                    .map(|s| RBlock::new(s.index()))
                    .collect(),
            );
            preds.push(
                f.preds(blk)
                    .iter()
                    .map(|s| RBlock::new(s.index()))
                    .collect(),
            );
            params.push(f.params(blk).iter().map(|&v| vreg(v)).collect());
            args.push(
                (0..f.succs(blk).len())
                    .map(|k| f.edge_args(blk, k).iter().map(|&v| vreg(v)).collect())
                    .collect(),
            );
        }
        Ra2Function {
            f,
            ops,
            op_start,
            succs,
            preds,
            params,
            args,
            block_of,
        }
    }

    /// Loop depth of the block holding instruction `i`.
    pub fn depth_of(&self, i: usize) -> u32 {
        self.f.loop_depth(Block(self.block_of[i]))
    }
}

impl Function for Ra2Function<'_> {
    fn num_insts(&self) -> usize {
        self.f.num_insts()
    }
    fn num_blocks(&self) -> usize {
        self.f.num_blocks()
    }
    fn entry_block(&self) -> RBlock {
        RBlock::new(self.f.entry().index())
    }
    fn block_insns(&self, block: RBlock) -> InstRange {
        let (s, e) = self.f.block_insts(Block(block.index() as u32));
        InstRange::new(Inst::new(s as usize), Inst::new(e as usize))
    }
    fn block_succs(&self, block: RBlock) -> &[RBlock] {
        &self.succs[block.index()]
    }
    fn block_preds(&self, block: RBlock) -> &[RBlock] {
        &self.preds[block.index()]
    }
    fn block_params(&self, block: RBlock) -> &[RVReg] {
        &self.params[block.index()]
    }
    fn is_ret(&self, insn: Inst) -> bool {
        let b = self.block_of[insn.index()] as usize;
        let (_, e) = self.f.block_insts(Block(b as u32));
        insn.index() + 1 == e as usize && self.succs[b].is_empty()
    }
    fn is_branch(&self, insn: Inst) -> bool {
        let b = self.block_of[insn.index()] as usize;
        let (_, e) = self.f.block_insts(Block(b as u32));
        insn.index() + 1 == e as usize && !self.succs[b].is_empty()
    }
    fn branch_blockparams(&self, block: RBlock, _insn: Inst, succ_idx: usize) -> &[RVReg] {
        &self.args[block.index()][succ_idx]
    }
    fn inst_operands(&self, insn: Inst) -> &[Operand] {
        let i = insn.index();
        &self.ops[self.op_start[i] as usize..self.op_start[i + 1] as usize]
    }
    fn inst_clobbers(&self, _insn: Inst) -> PRegSet {
        PRegSet::empty()
    }
    fn num_vregs(&self) -> usize {
        self.f.num_vregs()
    }
    fn spillslot_size(&self, _regclass: RegClass) -> usize {
        1
    }
}

/// A machine of `k` interchangeable registers (`k` ≤ 64), no scratch.
pub fn machine(k: u16) -> MachineEnv {
    let mut regs = PRegSet::empty();
    for r in 0..k.min(64) as usize {
        regs.add(PReg::new(r, RegClass::Float));
    }
    MachineEnv {
        preferred_regs_by_class: [PRegSet::empty(), regs, PRegSet::empty()],
        non_preferred_regs_by_class: [PRegSet::empty(); 3],
        scratch_by_class: [None; 3],
        fixed_stack_slots: Vec::new(),
    }
}

/// regalloc2's output counted as `tusk regalloc` counts: stores, reloads,
/// register moves, kept moves and Σ 10^depth over all of them.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct Ra2Figures {
    /// Register to stack moves.
    pub spills: u64,
    /// Stack to register moves.
    pub reloads: u64,
    /// Register to register moves inserted.
    pub moves_inserted: u64,
    /// The function's moves whose operands got different locations.
    pub moves_kept: u64,
    /// Σ 10^depth over the above.
    pub weighted_cost: f64,
}

/// Counts `out` for `rf`.
pub fn figures(rf: &Ra2Function<'_>, out: &Output) -> Ra2Figures {
    let mut x = Ra2Figures::default();
    let w = |d: u32| 10f64.powi(d.min(30) as i32);
    for (point, edit) in &out.edits {
        let Edit::Move { from, to } = edit;
        if from == to {
            continue;
        }
        match (from.is_reg(), to.is_reg()) {
            (true, false) => x.spills += 1,
            (false, true) => x.reloads += 1,
            _ => x.moves_inserted += 1,
        }
        x.weighted_cost += w(rf.depth_of(point.inst().index()));
    }
    for i in 0..rf.f.num_insts() {
        if rf.f.is_move(CfgInst(i as u32)) {
            let a: &[Allocation] = out.inst_allocs(Inst::new(i));
            if a[0] != a[1] {
                x.moves_kept += 1;
                x.weighted_cost += w(rf.depth_of(i));
            }
        }
    }
    x
}
