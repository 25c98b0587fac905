//! The allocator's own copy of a [`CfgFunction`], in struct-of-arrays
//! columns, that the spill rounds rewrite: operand vregs are renamed to
//! spill temporaries, and spill code lives in a side list of [`Pseudo`]
//! operations keyed by program point. The client's function is never
//! changed; the checker reads the client's function, not this copy.
//!
//! Program points: `2i` is before instruction `i` (reloads for its uses,
//! tied copies), `2i + 1` after it (stores of its defs). Edge copies are not
//! pseudo operations: they are derived from the block parameters and
//! arguments when the output is assembled.
//!
//! Vregs `0..num_vregs` are the client's; temporaries are appended. Every
//! vreg is in a register or, once spilled, in a slot (`slot[v]`): a vreg in
//! a slot has no register occurrence left (its defs write temporaries that
//! are stored, its uses read reloaded temporaries) except as a block
//! parameter or edge argument, which the edge copies read or write in the
//! slot directly.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use crate::reg::reserve_total;
use alloc::vec::Vec;

use super::function::{Block, CfgFunction, CfgInst, TiedPair, VReg};

/// No vreg / slot / block.
pub(crate) const NONE: u32 = u32::MAX;

/// A vreg of the client.
pub(crate) const ORIG: u8 = 0;
/// A spill temporary live for one operand (a reload just before its use, a
/// def stored just after, a tied copy): never spilled.
pub(crate) const TEMP: u8 = 1;
/// A reload shared by the uses of one spilled value in one block (a split
/// of the value's range at the block's boundaries): spilling it again gives
/// each use its own [`TEMP`].
pub(crate) const BLOCK_RELOAD: u8 = 2;
/// A [`BLOCK_RELOAD`] replaced by per-use temporaries: no occurrence left.
pub(crate) const DEAD: u8 = 3;

/// What a pseudo operation does.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum PseudoKind {
    /// `dst` (a vreg) ← slot `src`.
    Reload,
    /// Slot `dst` ← `src` (a vreg).
    Store,
    /// `dst` ← `src` (vregs): the copy a tied use that outlives its
    /// instruction needs.
    Copy,
}

/// Spill code at a program point.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pseudo {
    /// Program point (`2i` before instruction `i`, `2i + 1` after).
    pub key: u32,
    /// Insertion order (ties at one point keep it).
    pub seq: u32,
    /// What it does.
    pub kind: PseudoKind,
    /// Destination vreg or slot.
    pub dst: u32,
    /// Source vreg or slot.
    pub src: u32,
}

/// Why the program ran out of its reserve.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Full {
    /// What ran out.
    pub what: &'static str,
    /// Entries needed.
    pub needed: u64,
    /// Entries reserved.
    pub capacity: u64,
}

/// The rewritable copy (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct Program {
    /// Client vregs (`0..orig_vregs`).
    pub orig_vregs: usize,
    pub entry: u32,
    pub block_start: Vec<u32>,
    pub block_end: Vec<u32>,
    pub block_of: Vec<u32>,
    pub depth: Vec<u32>,
    pub succ_start: Vec<u32>,
    pub succ: Vec<u32>,
    pub pred_start: Vec<u32>,
    pub pred: Vec<u32>,
    pub param_start: Vec<u32>,
    pub param: Vec<u32>,
    /// Per edge (`succ_start[b] + k`) the start of its arguments.
    pub arg_start: Vec<u32>,
    pub arg: Vec<u32>,
    /// Per instruction the start of its operands (uses, then defs).
    pub op_start: Vec<u32>,
    pub n_use: Vec<u16>,
    pub ops: Vec<u32>,
    pub tied_start: Vec<u32>,
    pub tied: Vec<TiedPair>,
    pub is_move: Vec<bool>,
    // Vreg columns (client vregs, then temporaries).
    pub lanes: Vec<u8>,
    pub kind: Vec<u8>,
    /// The client vreg whose value a temporary holds (itself for a client
    /// vreg).
    pub origin: Vec<u32>,
    /// First slot lane of a spilled vreg, [`NONE`] while in a register.
    pub slot: Vec<u32>,
    /// Slot lanes handed out.
    pub slot_top: u32,
    pub pseudo: Vec<Pseudo>,
    pub seq: u32,
    /// Blocks in post-order from the entry, then the unreachable ones.
    pub postorder: Vec<u32>,
    /// Cost weight of an access at loop depth `d`: `10^min(d, 30)`.
    pub weight: [f64; 31],
    /// Scratch of the post-order walk.
    stack: Vec<(u32, u32)>,
    seen: Vec<bool>,
}

/// Counts of a function that size the tables.
#[derive(Copy, Clone, Debug, Default)]
pub struct Counts {
    /// Blocks.
    pub blocks: usize,
    /// Instructions.
    pub insts: usize,
    /// CFG edges (successor entries).
    pub edges: usize,
    /// Block parameters.
    pub params: usize,
    /// Edge arguments.
    pub args: usize,
    /// Register operands (uses and defs).
    pub operands: usize,
    /// Tied pairs.
    pub tied: usize,
    /// Virtual registers.
    pub vregs: usize,
    /// Vregs used outside the block that defines them (counted only when
    /// asked for).
    pub globals: usize,
    /// Most arguments on one edge.
    pub max_args: usize,
}

/// Declares the readers of the compressed runs: `$name(i)` is the run
/// `$items[$start[i]..$start[i + 1]]`.
macro_rules! runs {
    ($( $(#[$m:meta])* $name:ident($i:ident) in $items:ident from $start:ident; )*) => {$(
        $(#[$m])*
        #[inline]
        pub fn $name(&self, $i: usize) -> &[u32] {
            &self.$items[self.$start[$i] as usize..self.$start[$i + 1] as usize]
        }
    )*};
}

impl Program {
    /// Reserves for a function of counts `c` and the temporaries its spill
    /// code may add.
    pub fn reserve(&mut self, c: &Counts) {
        let Counts {
            blocks,
            insts,
            edges,
            params,
            args,
            operands,
            tied,
            vregs,
            ..
        } = *c;
        let temps = 2 * operands + tied + 16;
        reserve_total(&mut self.block_start, blocks);
        reserve_total(&mut self.block_end, blocks);
        reserve_total(&mut self.block_of, insts);
        reserve_total(&mut self.depth, blocks);
        reserve_total(&mut self.succ_start, blocks + 1);
        reserve_total(&mut self.succ, edges);
        reserve_total(&mut self.pred_start, blocks + 1);
        reserve_total(&mut self.pred, edges);
        reserve_total(&mut self.param_start, blocks + 1);
        reserve_total(&mut self.param, params);
        reserve_total(&mut self.arg_start, edges + 1);
        reserve_total(&mut self.arg, args);
        reserve_total(&mut self.op_start, insts + 1);
        reserve_total(&mut self.n_use, insts);
        reserve_total(&mut self.ops, operands);
        reserve_total(&mut self.tied_start, insts + 1);
        reserve_total(&mut self.tied, tied);
        reserve_total(&mut self.is_move, insts);
        for v in [&mut self.origin, &mut self.slot] {
            reserve_total(v, vregs + temps);
        }
        reserve_total(&mut self.lanes, vregs + temps);
        reserve_total(&mut self.kind, vregs + temps);
        reserve_total(&mut self.pseudo, temps);
        reserve_total(&mut self.postorder, blocks);
        reserve_total(&mut self.stack, blocks);
        reserve_total(&mut self.seen, blocks);
    }

    /// Copies `f` (already validated) into the columns.
    pub fn load<F: CfgFunction + ?Sized>(&mut self, f: &F) {
        let (nb, ni, nv) = (f.num_blocks(), f.num_insts(), f.num_vregs());
        self.orig_vregs = nv;
        self.entry = f.entry().0;
        let mut w = 1.0;
        for d in self.weight.iter_mut() {
            *d = w;
            w *= 10.0;
        }
        for v in [
            &mut self.block_start,
            &mut self.block_end,
            &mut self.block_of,
            &mut self.depth,
            &mut self.succ,
            &mut self.pred,
            &mut self.param,
            &mut self.arg,
            &mut self.ops,
            &mut self.succ_start,
            &mut self.pred_start,
            &mut self.param_start,
            &mut self.arg_start,
            &mut self.op_start,
            &mut self.tied_start,
        ] {
            v.clear();
        }
        self.n_use.clear();
        self.tied.clear();
        self.is_move.clear();
        self.succ_start.push(0);
        self.pred_start.push(0);
        self.param_start.push(0);
        self.arg_start.push(0);
        self.op_start.push(0);
        self.tied_start.push(0);
        for b in 0..nb {
            let blk = Block(b as u32);
            let (s, e) = f.block_insts(blk);
            self.block_start.push(s);
            self.block_end.push(e);
            self.depth.push(f.loop_depth(blk));
            for (k, &sb) in f.succs(blk).iter().enumerate() {
                self.succ.push(sb.0);
                self.arg.extend(f.edge_args(blk, k).iter().map(|v| v.0));
                self.arg_start.push(self.arg.len() as u32);
            }
            self.succ_start.push(self.succ.len() as u32);
            self.pred.extend(f.preds(blk).iter().map(|p| p.0));
            self.pred_start.push(self.pred.len() as u32);
            self.param.extend(f.params(blk).iter().map(|v| v.0));
            self.param_start.push(self.param.len() as u32);
            for i in s..e {
                let inst = CfgInst(i);
                self.block_of.push(b as u32);
                let (u, d) = (f.uses(inst), f.defs(inst));
                self.ops.extend(u.iter().map(|v| v.0));
                self.ops.extend(d.iter().map(|v| v.0));
                self.n_use.push(u.len() as u16);
                self.op_start.push(self.ops.len() as u32);
                self.tied.extend_from_slice(f.tied(inst));
                self.tied_start.push(self.tied.len() as u32);
                self.is_move.push(f.is_move(inst));
            }
        }
        self.lanes.clear();
        self.kind.clear();
        self.origin.clear();
        self.slot.clear();
        for v in 0..nv {
            self.lanes.push(f.lanes(VReg(v as u32)));
            self.kind.push(ORIG);
            self.origin.push(v as u32);
            self.slot.push(NONE);
        }
        self.slot_top = 0;
        self.pseudo.clear();
        self.seq = 0;
        debug_assert_eq!(
            self.num_insts(),
            ni,
            "validated blocks cover every instruction"
        );
        self.compute_postorder();
    }

    fn compute_postorder(&mut self) {
        let nb = self.num_blocks();
        self.postorder.clear();
        self.seen.clear();
        self.seen.resize(nb, false);
        self.stack.clear();
        self.stack.push((self.entry, 0));
        self.seen[self.entry as usize] = true;
        while let Some(&mut (b, ref mut k)) = self.stack.last_mut() {
            let (s, e) = (self.succ_start[b as usize], self.succ_start[b as usize + 1]);
            if s + *k < e {
                let sb = self.succ[(s + *k) as usize];
                *k += 1;
                if !self.seen[sb as usize] {
                    self.seen[sb as usize] = true;
                    self.stack.push((sb, 0));
                }
            } else {
                self.postorder.push(b);
                self.stack.pop();
            }
        }
        for b in 0..nb {
            if !self.seen[b] {
                self.postorder.push(b as u32);
            }
        }
    }

    /// Number of vregs (client and temporaries).
    #[inline]
    pub fn nv(&self) -> usize {
        self.lanes.len()
    }

    runs! {
        /// Successors of `b`.
        succs(b) in succ from succ_start;
        /// Predecessors of `b`.
        preds(b) in pred from pred_start;
        /// Parameters of `b`.
        params(b) in param from param_start;
        /// Arguments of edge `e` (`succ_start[b] + k`).
        args(e) in arg from arg_start;
    }

    /// Uses of instruction `i` (current vregs).
    #[inline]
    pub fn uses(&self, i: usize) -> &[u32] {
        let s = self.op_start[i] as usize;
        &self.ops[s..s + self.n_use[i] as usize]
    }

    /// Defs of instruction `i` (current vregs).
    #[inline]
    pub fn defs(&self, i: usize) -> &[u32] {
        let s = self.op_start[i] as usize;
        &self.ops[s + self.n_use[i] as usize..self.op_start[i + 1] as usize]
    }

    /// Tied pairs of instruction `i`.
    #[inline]
    pub fn tied_of(&self, i: usize) -> &[TiedPair] {
        &self.tied[self.tied_start[i] as usize..self.tied_start[i + 1] as usize]
    }

    /// Blocks loaded (one `block_start` entry each).
    pub fn num_blocks(&self) -> usize {
        self.block_start.len()
    }

    /// Instructions loaded: the blocks cover them all (validated), one
    /// `n_use` entry each.
    pub fn num_insts(&self) -> usize {
        self.n_use.len()
    }

    /// Weight of an access in block `b`.
    #[inline]
    pub fn block_weight(&self, b: usize) -> f64 {
        self.weight[self.depth[b].min(30) as usize]
    }

    /// Index range of the pseudo operations of block `b` (they are sorted).
    pub fn pseudo_range(&self, b: usize) -> (usize, usize) {
        let (lo, hi) = (2 * self.block_start[b], 2 * self.block_end[b]);
        let s = self.pseudo.partition_point(|p| p.key < lo);
        let e = self.pseudo.partition_point(|p| p.key < hi);
        (s, e)
    }

    /// A new vreg of `kind` holding `origin`'s value.
    pub fn new_vreg(&mut self, kind: u8, origin: u32) -> Result<u32, Full> {
        let v = self.lanes.len();
        if v >= self.lanes.capacity() {
            return Err(Full {
                what: "spill temporaries",
                needed: v as u64 + 1,
                capacity: self.lanes.capacity() as u64,
            });
        }
        let lanes = self.lanes[origin as usize];
        self.lanes.push(lanes);
        self.kind.push(kind);
        self.origin.push(self.origin[origin as usize]);
        self.slot.push(NONE);
        Ok(v as u32)
    }

    /// A new slot of `lanes` lanes; returns its first slot lane.
    pub fn new_slot(&mut self, lanes: u8) -> u32 {
        let s = self.slot_top;
        self.slot_top += lanes as u32;
        s
    }

    /// Appends a pseudo operation (call [`Self::sort_pseudo`] afterwards).
    pub fn push_pseudo(
        &mut self,
        key: u32,
        kind: PseudoKind,
        dst: u32,
        src: u32,
    ) -> Result<(), Full> {
        if self.pseudo.len() >= self.pseudo.capacity() {
            return Err(Full {
                what: "spill code",
                needed: self.pseudo.len() as u64 + 1,
                capacity: self.pseudo.capacity() as u64,
            });
        }
        self.pseudo.push(Pseudo {
            key,
            seq: self.seq,
            kind,
            dst,
            src,
        });
        self.seq += 1;
        Ok(())
    }

    /// Restores the (point, insertion) order of the pseudo operations.
    pub fn sort_pseudo(&mut self) {
        self.pseudo.sort_unstable_by_key(|p| (p.key, p.seq));
    }

    /// Per vreg the spill cost of its accesses (reads and writes by
    /// instructions and spill code, block parameters, edge arguments, each
    /// weighted by its block's 10^depth) and its number of reads.
    pub fn access_costs(&self, cost: &mut Vec<f64>, reads: &mut Vec<u32>) {
        let nv = self.nv();
        cost.clear();
        cost.resize(nv, 0.0);
        reads.clear();
        reads.resize(nv, 0);
        for b in 0..self.num_blocks() {
            let w = self.block_weight(b);
            for i in self.block_start[b] as usize..self.block_end[b] as usize {
                for &u in self.uses(i) {
                    cost[u as usize] += w;
                    reads[u as usize] += 1;
                }
                for &d in self.defs(i) {
                    cost[d as usize] += w;
                }
            }
            for &q in self.params(b) {
                cost[q as usize] += w;
            }
            for e in self.succ_start[b] as usize..self.succ_start[b + 1] as usize {
                for &a in self.args(e) {
                    cost[a as usize] += w;
                }
            }
        }
        for q in self.pseudo.iter() {
            let w = self.block_weight(self.block_of[(q.key / 2) as usize] as usize);
            if q.kind != PseudoKind::Reload {
                cost[q.src as usize] += w;
                reads[q.src as usize] += 1;
            }
        }
    }

    /// True when `v` lives in a register.
    #[inline]
    pub fn in_reg(&self, v: u32) -> bool {
        self.slot[v as usize] == NONE && self.kind[v as usize] != DEAD
    }
}
