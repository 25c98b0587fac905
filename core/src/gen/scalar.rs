//! SSA scalar programs with a controlled lane-weighted register pressure,
//! for the register colorer's tests and benchmarks.
//!
//! Every instruction defines one fresh register (1 lane, or 2 with
//! probability `pair_percent`), reads registers whose planned lifetime ends
//! there, and sometimes one more live register. The generator keeps
//! `live lanes after each instruction ≤ pressure − (largest def)`, so that
//! the lane-weighted pressure at every instruction (registers live there,
//! including the ones read for the last time, plus the def) is at most
//! `pressure`. Loops hold only registers local to the loop: a body reads
//! registers defined in the same body, and a closing `branch` reads the ones
//! still live, so the loop rule does not widen any range. Copies (`mov` of a
//! register read for the last time) give the coalescer work.

use alloc::vec::Vec;

use crate::ir::{Builder, IrError, Module, Opcode, Reg, SubOp};
use crate::target::Target;

/// Shape of a generated program.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ScalarParams {
    /// Instructions to generate (approximately; loop branches add some).
    pub insts: usize,
    /// Bound on the lane-weighted pressure (≥ 4).
    pub pressure: u32,
    /// Percent of registers that are 64-bit (two lanes).
    pub pair_percent: u32,
    /// Longest planned lifetime, in instructions.
    pub max_life: u32,
    /// Percent of instructions that are copies.
    pub copy_percent: u32,
    /// Straight-line instructions between loops (0: no loops).
    pub loop_every: usize,
    /// Instructions in a loop body.
    pub loop_len: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for ScalarParams {
    fn default() -> Self {
        ScalarParams {
            insts: 1000,
            pressure: 32,
            pair_percent: 0,
            max_life: 64,
            copy_percent: 10,
            loop_every: 0,
            loop_len: 16,
            seed: 1,
        }
    }
}

/// splitmix64 with a modulo reduction (the programs generated from a seed
/// depend on this exact draw).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        crate::rng::splitmix64(&mut self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[derive(Copy, Clone)]
struct Value {
    reg: Reg,
    deadline: usize,
    lanes: u32,
    /// Index of the loop body it belongs to (0: straight-line code).
    scope: usize,
}

/// Most registers one instruction reads.
const MAX_USES: usize = 12;

/// Generates a program (allocates; a generator, not a pass).
pub fn scalar_program(target: Target, p: &ScalarParams) -> Result<Module, IrError> {
    let mut m = Module::new(target);
    let mut rng = Rng(p.seed);
    let mut b = Builder::new(&mut m);
    b.func("main")?;
    let cap = p.pressure.max(4);
    let max_def = if p.pair_percent > 0 { 2 } else { 1 };
    let mut live: Vec<Value> = Vec::new();
    let mut live_lanes = 0u32;
    let mut regs = 0usize;
    let mut step = 0usize;
    let mut scope = 0usize;
    let mut scopes = 0usize;
    let mut since_loop = 0usize;
    let mut body_left = 0usize;
    let mut name = heapless::String::<24>::new();
    while step < p.insts {
        if scope == 0 && p.loop_every > 0 && since_loop >= p.loop_every {
            b.begin_loop(8)?;
            scopes += 1;
            scope = scopes;
            body_left = p.loop_len.max(2);
            since_loop = 0;
        }
        let mut uses: heapless::Vec<usize, MAX_USES> = heapless::Vec::new();
        // Registers whose lifetime is up and that this scope may read.
        for (k, v) in live.iter().enumerate() {
            if uses.len() + 2 >= MAX_USES {
                break;
            }
            if v.deadline <= step && (scope == 0 || v.scope == scope) {
                let _ = uses.push(k);
            }
        }
        let closing = scope != 0 && body_left == 1;
        if closing {
            // The back-edge branch reads every register of the body.
            uses.clear();
            for (k, v) in live.iter().enumerate() {
                if v.scope == scope {
                    let _ = uses.push(k);
                }
            }
        }
        let lanes = if rng.below(100) < p.pair_percent as u64 {
            2
        } else {
            1
        };
        let dying: u32 = uses.iter().map(|&k| live[k].lanes).sum();
        let mut after = live_lanes - dying + if closing { 0 } else { lanes };
        // Force earlier deaths so the next instruction has room.
        if after + max_def > cap {
            let mut order: Vec<usize> = (0..live.len())
                .filter(|&k| !uses.contains(&k) && (scope == 0 || live[k].scope == scope))
                .collect();
            order.sort_by_key(|&k| live[k].deadline);
            for k in order {
                if after + max_def <= cap || uses.len() >= MAX_USES {
                    break;
                }
                let _ = uses.push(k);
                after -= live[k].lanes;
            }
        }
        if !closing && after + max_def > cap {
            // No room to define inside this scope: close the loop early or
            // skip the def (straight-line code always has something to free).
            if scope != 0 {
                body_left = 1;
                continue;
            }
        }
        let mut use_regs: heapless::Vec<Reg, { MAX_USES + 1 }> = heapless::Vec::new();
        for &k in uses.iter() {
            let _ = use_regs.push(live[k].reg);
        }
        // Sometimes read one more live register that does not die here.
        if !closing && rng.below(3) == 0 && !live.is_empty() {
            let k = rng.below(live.len() as u64) as usize;
            if !uses.contains(&k) && (scope == 0 || live[k].scope == scope) {
                let _ = use_regs.push(live[k].reg);
            }
        }
        if closing {
            b.scalar(Opcode::Branch, SubOp::None, &[], &use_regs, 0)?;
        } else {
            name.clear();
            let _ = core::fmt::write(&mut name, format_args!("v{regs}"));
            regs += 1;
            let r = b.reg(&name, lanes as u8)?;
            let copy = uses.len() == 1
                && use_regs.len() == 1
                && live[uses[0]].lanes == lanes
                && rng.below(100) < p.copy_percent as u64;
            if copy {
                b.scalar(Opcode::ScalarMov, SubOp::None, &[r], &use_regs, 0)?;
            } else if use_regs.is_empty() {
                b.scalar(Opcode::ScalarImm, SubOp::None, &[r], &[], step as i64)?;
            } else {
                b.scalar(Opcode::ScalarAlu, SubOp::Add, &[r], &use_regs, 0)?;
            }
            let life = 1 + rng.below(p.max_life.max(1) as u64) as usize;
            let mut deadline = step + life;
            if scope != 0 {
                deadline = deadline.min(step + body_left.saturating_sub(1).max(1));
            }
            live.push(Value {
                reg: r,
                deadline,
                lanes,
                scope,
            });
        }
        // Remove the registers read for the last time (largest index first).
        let mut dead: heapless::Vec<usize, MAX_USES> = uses.clone();
        dead.sort_unstable();
        for &k in dead.iter().rev() {
            live_lanes -= live[k].lanes;
            live.swap_remove(k);
        }
        if !closing {
            live_lanes += lanes;
        }
        step += 1;
        if scope != 0 {
            body_left -= 1;
            if closing {
                b.end_loop()?;
                scope = 0;
            }
        } else {
            since_loop += 1;
        }
    }
    if scope != 0 {
        let mut use_regs: heapless::Vec<Reg, { MAX_USES + 1 }> = heapless::Vec::new();
        for v in live.iter().filter(|v| v.scope == scope) {
            let _ = use_regs.push(v.reg);
        }
        b.scalar(Opcode::Branch, SubOp::None, &[], &use_regs, 0)?;
        b.end_loop()?;
    }
    b.finish()?;
    Ok(m)
}
