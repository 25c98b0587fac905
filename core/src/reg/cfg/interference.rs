//! Interference from the CFG liveness: one backward walk per block from its
//! live-out set, over the instructions and the spill code between them.
//!
//! At every definition point (an instruction's late point, a reload or
//! copy, the block's entry for its parameters) each vreg written there
//! interferes with every vreg live there, the other defs of the point
//! included; a def that is never read still takes a register at its point.
//! A move's def does not interfere with its source (the two hold one value:
//! Chaitin's rule), so coalescing can join them. Uses are read at the early
//! point, so a use that dies at an instruction does not interfere with the
//! instruction's defs.
//!
//! The same walk measures the lane-weighted pressure at every point (its
//! maximum is MaxLive), finds the tied uses that outlive their instruction
//! (they need a copy) and records which block parameters are live at entry.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use crate::reg::reserve_total;
use alloc::vec::Vec;

use super::liveness::Liveness;
use super::program::{Full, Program, PseudoKind, NONE};
use super::walk::{BackwardSteps, Step};

/// A set of vregs with O(1) insert, remove, membership and clear, and
/// iteration in insertion order (Briggs–Torczon sparse set).
#[derive(Clone, Debug, Default)]
pub(crate) struct SparseSet {
    pub dense: Vec<u32>,
    pos: Vec<u32>,
}

impl SparseSet {
    /// Reserves for vregs `0..n`.
    pub fn reserve(&mut self, n: usize) {
        if self.pos.capacity() < n {
            self.pos.reserve_exact(n - self.pos.len());
        }
        if self.dense.capacity() < n {
            self.dense.reserve_exact(n - self.dense.len());
        }
    }
    /// Empties the set for vregs `0..n`.
    pub fn reset(&mut self, n: usize) {
        self.dense.clear();
        if self.pos.len() < n {
            self.pos.resize(n, 0);
        }
    }
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        let p = self.pos[v as usize] as usize;
        p < self.dense.len() && self.dense[p] == v
    }
    /// Inserts `v`; true when it was absent.
    #[inline]
    pub fn insert(&mut self, v: u32) -> bool {
        if self.contains(v) {
            return false;
        }
        self.pos[v as usize] = self.dense.len() as u32;
        self.dense.push(v);
        true
    }
    #[inline]
    pub fn remove(&mut self, v: u32) {
        if !self.contains(v) {
            return;
        }
        let p = self.pos[v as usize] as usize;
        let last = self.dense[self.dense.len() - 1];
        self.dense[p] = last;
        self.pos[last as usize] = p as u32;
        self.dense.pop();
    }
}

/// What one walk over the program collects.
/// The vregs live at a point of a walk and the lanes they hold (the
/// lane-weighted pressure there). Invariant: `lanes` is the sum of the lanes
/// of the vregs in `set`.
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveLanes {
    pub set: SparseSet,
    pub lanes: u32,
}

impl LiveLanes {
    /// Makes `v` live (no change when it is).
    #[inline]
    pub fn add(&mut self, p: &Program, v: u32) {
        if self.set.insert(v) {
            self.lanes += p.lanes[v as usize] as u32;
        }
    }

    /// Makes `v` dead (no change when it is).
    #[inline]
    pub fn kill(&mut self, p: &Program, v: u32) {
        if self.set.contains(v) {
            self.set.remove(v);
            self.lanes -= p.lanes[v as usize] as u32;
        }
    }

    /// The values of block `b` live at its exit that hold a register (one
    /// spilled since the liveness ran is in its slot, not live here): the
    /// start of a backward walk over the block.
    pub fn start_at_exit(&mut self, p: &Program, lv: &Liveness, b: usize) {
        self.clear();
        for g in lv.live_out_of(b) {
            let v = lv.globals[g as usize];
            if p.in_reg(v) {
                self.add(p, v);
            }
        }
    }

    /// Nothing live (the set's positions stay reserved).
    pub fn clear(&mut self) {
        self.set.dense.clear();
        self.lanes = 0;
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Walk {
    live: LiveLanes,
    /// Interference edges (vreg pairs; repeats allowed).
    pub edges: Vec<(u32, u32)>,
    /// Per block parameter (pool index): live at its block's entry.
    pub param_live: Vec<bool>,
    /// Tied pairs whose use outlives the instruction:
    /// `(instruction, tied index)`.
    pub tied_live: Vec<(u32, u16)>,
    /// Largest lane-weighted pressure at any point.
    pub max_live: u32,
}

impl Walk {
    /// Reserves for `vregs` vregs, `edges` edges, `params` parameters and
    /// `tied` tied pairs.
    pub fn reserve(&mut self, vregs: usize, edges: usize, params: usize, tied: usize) {
        self.live.set.reserve(vregs);
        reserve_total(&mut self.edges, edges);
        reserve_total(&mut self.param_live, params);
        reserve_total(&mut self.tied_live, tied);
    }

    /// Walks every block of `p`; with `edges` false only the pressure, the
    /// live tied uses and the live parameters are collected.
    pub fn run(&mut self, p: &Program, lv: &Liveness, edges: bool) -> Result<(), Full> {
        self.live.set.reset(p.nv());
        self.edges.clear();
        self.param_live.clear();
        self.param_live.resize(p.param.len(), false);
        self.tied_live.clear();
        self.max_live = 0;
        for b in 0..p.num_blocks() {
            self.block(p, lv, b, edges)?;
        }
        Ok(())
    }

    /// The vregs `defs` written together at one point (`exempt`: a move's
    /// source, which they do not interfere with).
    fn define(&mut self, p: &Program, defs: &[u32], exempt: u32, edges: bool) -> Result<(), Full> {
        for &d in defs {
            if p.in_reg(d) {
                self.live.add(p, d);
            }
        }
        self.max_live = self.max_live.max(self.live.lanes);
        if edges {
            for (j, &d) in defs.iter().enumerate() {
                if !p.in_reg(d) {
                    continue;
                }
                let need = self.edges.len() + self.live.set.dense.len();
                if need > self.edges.capacity() {
                    return Err(Full {
                        what: "interference edges",
                        needed: need as u64,
                        capacity: self.edges.capacity() as u64,
                    });
                }
                // Once per pair: a vreg is defined at one point only, and
                // within the point's group the earlier defs already paired
                // with the later ones.
                for &x in &self.live.set.dense {
                    if x != d && x != exempt && !defs[..j].contains(&x) {
                        self.edges.push((d, x));
                    }
                }
            }
        }
        for &d in defs {
            self.live.kill(p, d);
        }
        Ok(())
    }

    fn pseudo(&mut self, p: &Program, k: usize, edges: bool) -> Result<(), Full> {
        let q = p.pseudo[k];
        match q.kind {
            PseudoKind::Reload => self.define(p, &[q.dst], NONE, edges)?,
            PseudoKind::Store => self.live.add(p, q.src),
            PseudoKind::Copy => {
                self.define(p, &[q.dst], q.src, edges)?;
                self.live.add(p, q.src);
            }
        }
        self.max_live = self.max_live.max(self.live.lanes);
        Ok(())
    }

    fn block(&mut self, p: &Program, lv: &Liveness, b: usize, edges: bool) -> Result<(), Full> {
        self.live.start_at_exit(p, lv, b);
        self.max_live = self.max_live.max(self.live.lanes);
        let mut walk = BackwardSteps::new(p, b);
        while let Some(step) = walk.step(p) {
            let i = match step {
                Step::Pseudo(x) => {
                    self.pseudo(p, x, edges)?;
                    continue;
                }
                Step::Inst(i) => i,
            };
            let iu = i as usize;
            let exempt = if p.is_move[iu] { p.uses(iu)[0] } else { NONE };
            self.define(p, p.defs(iu), exempt, edges)?;
            for (t, pair) in p.tied_of(iu).iter().enumerate() {
                let u = p.uses(iu)[pair.use_ as usize];
                if self.live.set.contains(u) && self.tied_live.len() < self.tied_live.capacity() {
                    self.tied_live.push((i, t as u16));
                }
            }
            for &u in p.uses(iu) {
                self.live.add(p, u);
            }
            self.max_live = self.max_live.max(self.live.lanes);
        }
        let (a, z) = (p.param_start[b] as usize, p.param_start[b + 1] as usize);
        for j in a..z {
            let v = p.param[j];
            self.param_live[j] = p.in_reg(v) && self.live.set.contains(v);
        }
        self.define(p, &p.param[a..z], NONE, edges)?;
        Ok(())
    }
}
