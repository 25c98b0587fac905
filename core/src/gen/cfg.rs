//! Structured SSA control-flow graphs for the CFG colorer's tests and
//! benchmarks: straight-line code, if/else diamonds whose join merges
//! values through block parameters, and loops whose header carries values
//! around the back edge, nested up to a depth. Critical edges never arise
//! (a branch's targets each have one predecessor, a join's predecessors
//! each one successor).
//!
//! Pressure: the generator keeps a pool of values that may still be read
//! (at most `pressure`); each instruction reads one or two of them, the
//! read being the last with some probability (always when the pool is
//! full), and defines a fresh value. Values defined inside an arm or a
//! loop body leave the pool at its end (only block parameters carry values
//! out), so the pool is an upper bound on the values live at a point up to
//! loop-carried reads. `copy_percent` of instructions are moves,
//! `tied_percent` two-address instructions (their tied use is the last
//! read of that value or not, at random, so both the coalesced case and
//! the copy case occur), `pair_percent` of values are register pairs.

use alloc::vec::Vec;

use super::rng::Rng;
use crate::reg::cfg::{Block, FunctionBuf, TiedPair, VReg};

/// Shape of a generated function.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CfgParams {
    /// Instructions to generate (approximately).
    pub insts: usize,
    /// Most values in the pool (≥ 2).
    pub pressure: u32,
    /// Percent of instructions that open a diamond or a loop.
    pub branch_percent: u32,
    /// Percent of the openings that are loops.
    pub loop_percent: u32,
    /// Deepest nesting of diamonds and loops.
    pub max_nest: u32,
    /// Percent of instructions that are moves.
    pub copy_percent: u32,
    /// Percent of instructions that are two-address (tied).
    pub tied_percent: u32,
    /// Percent of values that are register pairs.
    pub pair_percent: u32,
    /// Seed.
    pub seed: u64,
}

impl Default for CfgParams {
    fn default() -> Self {
        CfgParams {
            insts: 1000,
            pressure: 16,
            branch_percent: 8,
            loop_percent: 40,
            max_nest: 4,
            copy_percent: 15,
            tied_percent: 5,
            pair_percent: 0,
            seed: 1,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct BlockSpec {
    start: u32,
    end: u32,
    depth: u32,
    params: Vec<VReg>,
    succs: Vec<(u32, Vec<VReg>)>,
}

struct Gen {
    p: CfgParams,
    rng: Rng,
    f: FunctionBuf,
    blocks: Vec<BlockSpec>,
    lanes: Vec<u8>,
    cur: u32,
    pool: Vec<VReg>,
    emitted: usize,
}

impl Gen {
    fn fresh(&mut self, lanes: u8) -> VReg {
        let v = VReg(self.lanes.len() as u32);
        self.lanes.push(lanes);
        v
    }

    fn new_lanes(&mut self) -> u8 {
        if self.rng.below(100) < self.p.pair_percent as u64 {
            2
        } else {
            1
        }
    }

    fn inst(&mut self, uses: &[VReg], defs: &[VReg], tied: &[TiedPair], mv: bool) {
        self.f.push_inst(uses, defs, tied, mv);
        self.emitted += 1;
    }

    /// Takes a value of the pool for a read; removes it when the read is
    /// its last.
    fn read(&mut self, last: bool) -> Option<VReg> {
        if self.pool.is_empty() {
            return None;
        }
        let k = self.rng.below(self.pool.len() as u64) as usize;
        let v = self.pool[k];
        if last {
            self.pool.swap_remove(k);
        }
        Some(v)
    }

    fn straight(&mut self) {
        let full = self.pool.len() as u32 >= self.p.pressure;
        let r = self.rng.below(100) as u32;
        if r < self.p.copy_percent && !self.pool.is_empty() {
            let last = full || self.rng.below(2) == 0;
            if let Some(s) = self.read(last) {
                let d = self.fresh(self.lanes[s.index()]);
                self.inst(&[s], &[d], &[], true);
                self.pool.push(d);
            }
            return;
        }
        if r < self.p.copy_percent + self.p.tied_percent && !self.pool.is_empty() {
            let last = full || self.rng.below(2) == 0;
            if let Some(a) = self.read(last) {
                let b = self.read(false).unwrap_or(a);
                let d = self.fresh(self.lanes[a.index()]);
                let uses = if b == a {
                    alloc::vec![a]
                } else {
                    alloc::vec![a, b]
                };
                self.inst(&uses, &[d], &[TiedPair { def: 0, use_: 0 }], false);
                self.pool.push(d);
            }
            return;
        }
        let mut uses = Vec::new();
        let n = if self.pool.is_empty() {
            0
        } else {
            1 + self.rng.below(2) as usize
        };
        for x in 0..n {
            let last = (full && x == 0) || self.rng.below(4) == 0;
            if let Some(v) = self.read(last) {
                if !uses.contains(&v) {
                    uses.push(v);
                }
            }
        }
        let lanes = self.new_lanes();
        let d = self.fresh(lanes);
        self.inst(&uses, &[d], &[], false);
        self.pool.push(d);
    }

    /// Starts block `b` at the current instruction.
    fn start(&mut self, depth: u32, params: Vec<VReg>) -> u32 {
        let b = self.blocks.len() as u32;
        self.blocks.push(BlockSpec {
            start: self.emitted as u32,
            end: 0,
            depth,
            params,
            succs: Vec::new(),
        });
        self.cur = b;
        b
    }

    /// Ends the current block with a branch reading the pool (or an exit).
    fn end(&mut self, succs: Vec<(u32, Vec<VReg>)>, branch: bool) {
        let cond = if branch { self.read(false) } else { None };
        let uses: Vec<VReg> = cond.into_iter().collect();
        self.inst(&uses, &[], &[], false);
        let b = self.cur as usize;
        self.blocks[b].end = self.emitted as u32;
        self.blocks[b].succs = succs;
    }

    fn region(&mut self, depth: u32, nest: u32, budget: usize) {
        let stop = self.emitted + budget;
        while self.emitted < stop {
            let open = nest < self.p.max_nest
                && stop - self.emitted > 8
                && self.rng.below(100) < self.p.branch_percent as u64;
            if !open {
                self.straight();
                continue;
            }
            let inner = ((stop - self.emitted) / 3).max(2);
            if self.rng.below(100) < self.p.loop_percent as u64 {
                self.lp(depth, nest, inner);
            } else {
                self.diamond(depth, nest, inner);
            }
        }
    }

    fn diamond(&mut self, depth: u32, nest: u32, budget: usize) {
        let cond_block = self.cur as usize;
        let before = self.pool.clone();
        // The branch: patched with the arms once they exist.
        self.end(Vec::new(), true);
        let t = self.start(depth, Vec::new());
        self.region(depth, nest + 1, budget / 2);
        let t_pool = core::mem::take(&mut self.pool);
        let t_end = self.cur as usize;
        self.end(Vec::new(), false);
        self.pool = before.clone();
        let e = self.start(depth, Vec::new());
        self.region(depth, nest + 1, budget / 2);
        let e_pool = core::mem::take(&mut self.pool);
        let e_end = self.cur as usize;
        self.end(Vec::new(), false);
        // Merge up to two values defined in the arms through parameters.
        let m = self.rng.below(3) as usize;
        let mut params = Vec::new();
        let mut t_args = Vec::new();
        let mut e_args = Vec::new();
        for x in 0..m {
            let ta = t_pool
                .iter()
                .rev()
                .find(|v| !before.contains(v) && !t_args.contains(*v));
            let ea = e_pool
                .iter()
                .rev()
                .find(|v| !before.contains(v) && !e_args.contains(*v));
            if let (Some(&ta), Some(&ea)) = (ta, ea) {
                if self.lanes[ta.index()] == self.lanes[ea.index()] {
                    let q = self.fresh(self.lanes[ta.index()]);
                    params.push(q);
                    t_args.push(ta);
                    e_args.push(ea);
                }
            }
            let _ = x;
        }
        let join = self.blocks.len() as u32;
        self.blocks[t_end].succs = alloc::vec![(join, t_args)];
        self.blocks[e_end].succs = alloc::vec![(join, e_args)];
        self.blocks[cond_block].succs = alloc::vec![(t, Vec::new()), (e, Vec::new())];
        // After the join: what both arms left of the values from before.
        self.pool = before
            .iter()
            .copied()
            .filter(|v| t_pool.contains(v) && e_pool.contains(v))
            .collect();
        self.pool.extend(params.iter().copied());
        self.start(depth, params);
    }

    fn lp(&mut self, depth: u32, nest: u32, budget: usize) {
        // Carried values: up to three taken from the pool.
        let m = (self.rng.below(4) as usize).min(self.pool.len());
        let mut init = Vec::new();
        for _ in 0..m {
            if let Some(v) = self.read(true) {
                init.push(v);
            }
        }
        let params: Vec<VReg> = init
            .iter()
            .map(|&v| self.fresh(self.lanes[v.index()]))
            .collect();
        let header = self.blocks.len() as u32;
        self.end(alloc::vec![(header, init)], false);
        self.start(depth + 1, params.clone());
        self.pool.extend(params.iter().copied());
        let before = self.pool.clone();
        let header_block = self.cur as usize;
        self.end(Vec::new(), true);
        let body = self.start(depth + 1, Vec::new());
        self.region(depth + 1, nest + 1, budget);
        // The latch passes a current value of each carried width.
        let mut args = Vec::new();
        for &q in &params {
            let l = self.lanes[q.index()];
            let pick = self
                .pool
                .iter()
                .rev()
                .find(|v| self.lanes[v.index()] == l && !args.contains(*v))
                .copied()
                .unwrap_or(q);
            args.push(pick);
        }
        // A carried value the body read for the last time still crosses
        // the back edge: the latch passes it, so it is live there.
        self.end(alloc::vec![(header, args)], false);
        let exit = self.blocks.len() as u32;
        self.blocks[header_block].succs = alloc::vec![(body, Vec::new()), (exit, Vec::new())];
        self.pool = before;
        self.start(depth, Vec::new());
    }
}

/// A generated function (see the module doc).
pub fn cfg_function(p: &CfgParams) -> FunctionBuf {
    let mut g = Gen {
        p: *p,
        rng: Rng::new(p.seed),
        f: FunctionBuf::new(),
        blocks: Vec::new(),
        lanes: Vec::new(),
        cur: 0,
        pool: Vec::new(),
        emitted: 0,
    };
    g.p.pressure = g.p.pressure.max(2);
    g.start(0, Vec::new());
    g.region(0, 0, p.insts.max(1));
    g.end(Vec::new(), false);
    let blocks = core::mem::take(&mut g.blocks);
    for b in &blocks {
        let succs: Vec<(Block, &[VReg])> = b
            .succs
            .iter()
            .map(|(s, a)| (Block(*s), a.as_slice()))
            .collect();
        g.f.push_block((b.start, b.end), b.depth, &b.params, &succs);
    }
    g.f.num_vregs = g.lanes.len() as u32;
    for (v, &l) in g.lanes.iter().enumerate() {
        if l != 1 {
            g.f.set_lanes(VReg(v as u32), l);
        }
    }
    g.f.entry = Block(0);
    g.f.finish();
    g.f
}
