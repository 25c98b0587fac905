//! Liveness by dataflow over the CFG: live-in and live-out bitsets per
//! block, iterated to the fixpoint in post-order (successors before
//! predecessors, so a backward problem without loops converges in one
//! sweep and each loop adds one).
//!
//! Only *global* vregs get a bit: those read in a block other than their
//! defining one, and every edge argument. A vreg defined and read in one
//! block only (most of them) is never live across a block boundary, so the
//! bitsets stay `blocks × globals` rather than `blocks × vregs` (the
//! non-local names of semi-pruned SSA construction).
//!
//! Equations, with `gen(b)` the globals read in `b` and defined elsewhere
//! and `kill(b)` the globals defined in `b` (parameters included):
//! `out(b) = ∪_{s ∈ succ(b)} in(s) ∪ args(b)`, `in(b) = gen(b) ∪ (out(b) − kill(b))`.
//! Parameters are killed at their block's entry and arguments are read at
//! its end, so a value passed along one edge of a join is not live on the
//! others: precise at joins.
//!
//! Vregs in slots are not tracked (they hold no register).
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use crate::reg::reserve_total;
use alloc::vec::Vec;

use super::program::{Full, Program, PseudoKind, NONE};

/// The liveness of a [`Program`] (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct Liveness {
    /// Per vreg its global index, or [`NONE`].
    pub global_of: Vec<u32>,
    /// Per global index its vreg.
    pub globals: Vec<u32>,
    /// Words per block row.
    pub words: usize,
    pub live_in: Vec<u64>,
    pub live_out: Vec<u64>,
    /// Per block (compressed rows) the globals read there and defined
    /// elsewhere, and the globals defined there: short lists, where dense
    /// rows would cost a row per block to clear and to read every sweep.
    gen_start: Vec<u32>,
    gen: Vec<u32>,
    kill_start: Vec<u32>,
    kill: Vec<u32>,
    row: Vec<u64>,
    dirty: Vec<bool>,
    /// Per vreg the block defining it ([`NONE`]: none, or in a slot).
    pub def_block: Vec<u32>,
    /// Sweeps the last fixpoint took.
    pub sweeps: u32,
}

#[inline]
fn set(row: &mut [u64], g: u32) {
    row[g as usize / 64] |= 1u64 << (g % 64);
}

impl Liveness {
    /// Reserves for `blocks` blocks, `vregs` vregs of which at most
    /// `globals` are global, and `reads` register reads.
    pub fn reserve(&mut self, blocks: usize, vregs: usize, globals: usize, reads: usize) {
        let words = globals.div_ceil(64).max(1);
        reserve_total(&mut self.global_of, vregs);
        reserve_total(&mut self.globals, vregs);
        reserve_total(&mut self.def_block, vregs);
        for v in [&mut self.live_in, &mut self.live_out] {
            reserve_total(v, blocks * words);
        }
        reserve_total(&mut self.gen_start, blocks + 1);
        reserve_total(&mut self.kill_start, blocks + 1);
        reserve_total(&mut self.gen, reads);
        reserve_total(&mut self.kill, vregs);
        reserve_total(&mut self.row, words);
        reserve_total(&mut self.dirty, blocks);
    }

    fn push_gen(&mut self, g: u32) -> Result<(), Full> {
        if self.gen.len() >= self.gen.capacity() {
            return Err(Full {
                what: "global reads",
                needed: self.gen.len() as u64 + 1,
                capacity: self.gen.capacity() as u64,
            });
        }
        self.gen.push(g);
        Ok(())
    }

    /// Computes the liveness of `p`. Fails when the globals do not fit the
    /// reserved rows.
    pub fn compute(&mut self, p: &Program) -> Result<(), Full> {
        let nv = p.nv();
        let nb = p.num_blocks();
        self.def_block.clear();
        self.def_block.resize(nv, NONE);
        for b in 0..nb {
            for &v in p.params(b) {
                self.def_block[v as usize] = b as u32;
            }
            for i in p.block_start[b] as usize..p.block_end[b] as usize {
                for &d in p.defs(i) {
                    self.def_block[d as usize] = b as u32;
                }
            }
        }
        for q in &p.pseudo {
            if q.kind != PseudoKind::Store {
                self.def_block[q.dst as usize] = p.block_of[(q.key / 2) as usize];
            }
        }
        // Globals: read outside the defining block, or passed on an edge.
        self.global_of.clear();
        self.global_of.resize(nv, NONE);
        self.globals.clear();
        for b in 0..nb {
            for i in p.block_start[b] as usize..p.block_end[b] as usize {
                for &u in p.uses(i) {
                    if self.def_block[u as usize] != b as u32 {
                        self.mark(p, u);
                    }
                }
            }
            for e in p.succ_start[b] as usize..p.succ_start[b + 1] as usize {
                for &a in p.args(e) {
                    self.mark(p, a);
                }
            }
        }
        for q in &p.pseudo {
            if q.kind != PseudoKind::Reload {
                let b = p.block_of[(q.key / 2) as usize];
                if self.def_block[q.src as usize] != b {
                    self.mark(p, q.src);
                }
            }
        }
        let words = self.globals.len().div_ceil(64).max(1);
        if nb * words > self.live_in.capacity() || words > self.row.capacity() {
            return Err(Full {
                what: "global vregs",
                needed: self.globals.len() as u64,
                capacity: (self.row.capacity() * 64) as u64,
            });
        }
        self.words = words;
        for v in [&mut self.live_in, &mut self.live_out] {
            v.clear();
            v.resize(nb * words, 0);
        }
        self.row.clear();
        self.row.resize(words, 0);
        // kill: the globals by defining block (a counting sort).
        self.kill_start.clear();
        self.kill_start.resize(nb + 1, 0);
        for &v in &self.globals {
            let d = self.def_block[v as usize];
            if d != NONE {
                self.kill_start[d as usize + 1] += 1;
            }
        }
        for b in 0..nb {
            self.kill_start[b + 1] += self.kill_start[b];
        }
        self.kill.clear();
        self.kill.resize(self.kill_start[nb] as usize, 0);
        self.gen_start.clear();
        self.gen_start.extend_from_slice(&self.kill_start[..nb]);
        for (g, &v) in self.globals.iter().enumerate() {
            let d = self.def_block[v as usize];
            if d != NONE {
                let c = &mut self.gen_start[d as usize];
                self.kill[*c as usize] = g as u32;
                *c += 1;
            }
        }
        // gen: the reads of globals defined elsewhere, block by block.
        self.gen_start.clear();
        self.gen_start.push(0);
        self.gen.clear();
        for b in 0..nb {
            for i in p.block_start[b] as usize..p.block_end[b] as usize {
                for &u in p.uses(i) {
                    let g = self.global_of[u as usize];
                    if g != NONE && self.def_block[u as usize] != b as u32 {
                        self.push_gen(g)?;
                    }
                }
            }
            let (ps, pe) = p.pseudo_range(b);
            for q in &p.pseudo[ps..pe] {
                if q.kind != PseudoKind::Reload {
                    let g = self.global_of[q.src as usize];
                    if g != NONE && self.def_block[q.src as usize] != b as u32 {
                        self.push_gen(g)?;
                    }
                }
            }
            self.gen_start.push(self.gen.len() as u32);
        }
        // The fixpoint: sweeps in post-order over the blocks whose
        // successors changed since their last visit.
        self.dirty.clear();
        self.dirty.resize(nb, true);
        self.sweeps = 0;
        loop {
            self.sweeps += 1;
            let mut changed = false;
            for &b in &p.postorder {
                let b = b as usize;
                if !self.dirty[b] {
                    continue;
                }
                self.dirty[b] = false;
                let (lo, hi) = (b * words, (b + 1) * words);
                for w in self.row.iter_mut() {
                    *w = 0;
                }
                for (k, &s) in p.succs(b).iter().enumerate() {
                    let s = s as usize;
                    let src = &self.live_in[s * words..(s + 1) * words];
                    for (r, &x) in self.row.iter_mut().zip(src) {
                        *r |= x;
                    }
                    for &a in p.args(p.succ_start[b] as usize + k) {
                        let g = self.global_of[a as usize];
                        if g != NONE {
                            set(&mut self.row, g);
                        }
                    }
                }
                self.live_out[lo..hi].copy_from_slice(&self.row);
                for k in self.kill_start[b]..self.kill_start[b + 1] {
                    let g = self.kill[k as usize];
                    self.row[g as usize / 64] &= !(1u64 << (g % 64));
                }
                for k in self.gen_start[b]..self.gen_start[b + 1] {
                    set(&mut self.row, self.gen[k as usize]);
                }
                let moved = self.live_in[lo..hi] != self.row[..];
                if moved {
                    self.live_in[lo..hi].copy_from_slice(&self.row);
                }
                if moved {
                    changed = true;
                    for &q in p.preds(b) {
                        self.dirty[q as usize] = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Ok(())
    }

    fn mark(&mut self, p: &Program, v: u32) {
        if p.in_reg(v) && self.global_of[v as usize] == NONE {
            self.global_of[v as usize] = self.globals.len() as u32;
            self.globals.push(v);
        }
    }

    /// The vregs live out of `b`, in global order.
    pub fn live_out_of(&self, b: usize) -> BitIter<'_> {
        BitIter::new(&self.live_out[b * self.words..(b + 1) * self.words])
    }

    /// The vregs live into `b`, in global order.
    pub fn live_in_of(&self, b: usize) -> BitIter<'_> {
        BitIter::new(&self.live_in[b * self.words..(b + 1) * self.words])
    }
}

/// The set bits of a row, as global indices.
#[derive(Clone, Debug)]
pub(crate) struct BitIter<'a> {
    row: &'a [u64],
    w: usize,
    cur: u64,
}

impl<'a> BitIter<'a> {
    fn new(row: &'a [u64]) -> Self {
        BitIter {
            row,
            w: 0,
            cur: row.first().copied().unwrap_or(0),
        }
    }
}

impl Iterator for BitIter<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        loop {
            if self.cur != 0 {
                let t = self.cur.trailing_zeros();
                self.cur &= self.cur - 1;
                return Some((self.w * 64) as u32 + t);
            }
            self.w += 1;
            if self.w >= self.row.len() {
                return None;
            }
            self.cur = self.row[self.w];
        }
    }
}
