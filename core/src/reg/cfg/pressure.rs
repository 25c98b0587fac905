//! Spilling by pressure before the first coloring: where more than K
//! lanes are live at a point, values live there (not read or written at
//! that point) go to slots, cheapest first, until at most K remain.
//!
//! Why before coloring: a function whose MaxLive exceeds K would otherwise
//! take one full coloring round per wave of spills (a spilled value's
//! reloads can leave their neighbours uncolored in turn). Spilled here, a
//! value is reloaded before each read and stored after its definition, and
//! such a temporary occupies a register only at that one point, where the
//! value occupied one anyway: the spill code never raises the pressure. So
//! after this pass every point needs at most K registers except those
//! whose own operands exceed K, the program's graph is (up to joins) a
//! subgraph of a chordal graph of clique ≤ K, and the first coloring round
//! usually succeeds; the rounds that follow only repair what it leaves.
//! The rewrite must therefore reload per read (the pass's model): one
//! reload per block would keep a temporary over the block's reads, which
//! the pass did not count, and the coloring rounds would spill again.
//!
//! The choice is local and greedy, in block order: spilling a value only
//! lowers the pressure elsewhere, so a point fixed stays fixed. The value
//! spilled is the one with the least cost per lane per instruction of its
//! range: cost is its accesses weighted by 10^depth (a value read in a deep
//! loop stays), the range (whole blocks where it is live across a boundary,
//! else the distance to its block's end or start) is what spilling it
//! frees — the same trade as Chaitin's cost per degree, with the range
//! standing for the degree.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use alloc::vec::Vec;

use super::interference::LiveLanes;
use super::liveness::Liveness;
use super::program::{Program, PseudoKind, NONE, ORIG};
use super::walk::{BackwardSteps, Step};

/// The values a point may not spill: the operands of an instruction
/// (`ops[lo..hi]`) or up to two vregs.
#[derive(Copy, Clone, Debug)]
enum Keep {
    Ops(usize, usize),
    These([u32; 2]),
}

/// The pass's workspace.
#[derive(Clone, Debug, Default)]
pub(crate) struct PressureSpiller {
    live: LiveLanes,
    cost: Vec<f64>,
    reads: Vec<u32>,
    /// Per vreg the instructions its range covers (the benefit of spilling
    /// it: a long range read rarely frees a register over many points).
    span: Vec<u32>,
    /// Values marked in the last run.
    pub spilled: u32,
}

impl PressureSpiller {
    /// Reserves for `vregs` vregs.
    pub fn reserve(&mut self, vregs: usize) {
        self.live.set.reserve(vregs);
        if self.reads.capacity() < vregs {
            self.reads.reserve_exact(vregs - self.reads.len());
        }
        if self.span.capacity() < vregs {
            self.span.reserve_exact(vregs - self.span.len());
        }
        if self.cost.capacity() < vregs {
            self.cost.reserve_exact(vregs - self.cost.len());
        }
    }

    /// Marks values of `p` to spill (their `slot`) so that at most `k`
    /// lanes are live at every point where that is possible. The caller
    /// rewrites the marked values (per-use temporaries).
    pub fn run(&mut self, p: &mut Program, lv: &Liveness, k: u32) {
        p.access_costs(&mut self.cost, &mut self.reads);
        self.spans(p, lv);
        self.live.set.reset(p.nv());
        self.spilled = 0;
        for b in 0..p.num_blocks() {
            self.block(p, lv, b, k);
        }
    }

    /// Instructions covered per vreg: whole blocks where it is live in or
    /// out (globals), plus def-to-last-read inside blocks.
    fn spans(&mut self, p: &Program, lv: &Liveness) {
        let nv = p.nv();
        self.span.clear();
        self.span.resize(nv, 0);
        for b in 0..p.num_blocks() {
            let len = p.block_end[b] - p.block_start[b];
            for g in lv.live_in_of(b) {
                self.span[lv.globals[g as usize] as usize] += len;
            }
            for g in lv.live_out_of(b) {
                self.span[lv.globals[g as usize] as usize] += len;
            }
            for i in p.block_start[b]..p.block_end[b] {
                // A read at distance d from the block's start or a def at
                // distance d from its end bounds a local range by d.
                for &u in p.uses(i as usize) {
                    let d = i - p.block_start[b] + 1;
                    let x = &mut self.span[u as usize];
                    *x = (*x).max(d);
                }
                for &d in p.defs(i as usize) {
                    let x = &mut self.span[d as usize];
                    *x = (*x).max(p.block_end[b] - i);
                }
            }
        }
    }

    /// Makes `v` live when it lives in a register (a spilled vreg holds no
    /// lane).
    #[inline]
    fn add(&mut self, p: &Program, v: u32) {
        if p.in_reg(v) {
            self.live.add(p, v);
        }
    }

    /// Brings the pressure at this point to `k` by spilling live values
    /// other than `keep`; `extra` lanes of temporaries are also live here.
    fn relieve(&mut self, p: &mut Program, k: u32, keep: Keep, extra: u32) {
        while self.live.lanes + extra > k {
            let mut best: Option<(f64, u32)> = None;
            for &v in &self.live.set.dense {
                let kept = match keep {
                    Keep::Ops(lo, hi) => p.ops[lo..hi].contains(&v),
                    Keep::These(a) => a.contains(&v),
                };
                if p.kind[v as usize] != ORIG || kept {
                    continue;
                }
                let c = self.cost[v as usize]
                    / (p.lanes[v as usize] as f64 * self.span[v as usize].max(1) as f64);
                if best.map_or(true, |(bc, _)| c < bc) {
                    best = Some((c, v));
                }
            }
            let Some((_, v)) = best else {
                return;
            };
            let lanes = p.lanes[v as usize];
            p.slot[v as usize] = p.new_slot(lanes);
            self.spilled += 1;
            self.live.kill(p, v);
        }
    }

    /// Lanes of the spilled values among `vs` (they get a temporary each
    /// at this point).
    fn temps(p: &Program, vs: &[u32]) -> u32 {
        vs.iter()
            .filter(|&&v| p.kind[v as usize] == ORIG && p.slot[v as usize] != NONE)
            .map(|&v| p.lanes[v as usize] as u32)
            .sum()
    }

    fn block(&mut self, p: &mut Program, lv: &Liveness, b: usize, k: u32) {
        self.live.start_at_exit(p, lv, b);
        self.relieve(p, k, Keep::These([NONE; 2]), 0);
        let mut walk = BackwardSteps::new(p, b);
        while let Some(step) = walk.step(p) {
            let iu = match step {
                Step::Pseudo(x) => {
                    self.pseudo(p, x, k);
                    continue;
                }
                Step::Inst(i) => i as usize,
            };
            let (o0, nu, o1) = (
                p.op_start[iu] as usize,
                p.n_use[iu] as usize,
                p.op_start[iu + 1] as usize,
            );
            // Late point: the live values and the defs.
            for j in o0 + nu..o1 {
                let d = p.ops[j];
                self.add(p, d);
            }
            let extra = Self::temps(p, &p.ops[o0 + nu..o1]);
            self.relieve(p, k, Keep::Ops(o0 + nu, o1), extra);
            for j in o0 + nu..o1 {
                let d = p.ops[j];
                self.live.kill(p, d);
            }
            // Early point: the live values and the uses.
            for j in o0..o0 + nu {
                let u = p.ops[j];
                self.add(p, u);
            }
            let extra = Self::temps(p, &p.ops[o0..o0 + nu]);
            self.relieve(p, k, Keep::Ops(o0, o0 + nu), extra);
        }
        let (a, z) = (p.param_start[b] as usize, p.param_start[b + 1] as usize);
        for j in a..z {
            let v = p.param[j];
            self.add(p, v);
        }
        self.relieve(p, k, Keep::These([NONE; 2]), 0);
    }

    fn pseudo(&mut self, p: &mut Program, x: usize, k: u32) {
        let q = p.pseudo[x];
        match q.kind {
            PseudoKind::Reload => {
                self.add(p, q.dst);
                self.relieve(p, k, Keep::These([q.dst, NONE]), 0);
                self.live.kill(p, q.dst);
            }
            PseudoKind::Store => self.add(p, q.src),
            PseudoKind::Copy => {
                self.add(p, q.dst);
                self.relieve(p, k, Keep::These([q.dst, q.src]), 0);
                self.live.kill(p, q.dst);
                self.add(p, q.src);
            }
        }
    }
}
