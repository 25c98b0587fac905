//! A generator of placed, DMA-heavy modules for the DMA peepholes: tiled
//! loads of abutting slices (with abutting saves), duplicated loads,
//! over-broad loads and dead saves, mixed in chunks.
//!
//! Placement is a bump allocator inside the generator: every chunk's on-chip
//! tensors live only inside the chunk, so the SB bump pointer restarts at 0
//! for each chunk, and DRAM tensors get fresh addresses at the target's DRAM
//! alignment. Every tensor spans all of the target's SB partitions.
//! The result passes the placement verifier without any allocator.

use alloc::format;
use alloc::vec::Vec;

use super::rng::Rng;
use crate::ir::{
    ApSpec, Builder, Capacity, InstFlags, InstSpec, IrError, MemFlags, MemLoc, Module, Opcode,
    Space, SubOp,
};
use crate::target::Target;

/// What to generate.
#[derive(Copy, Clone, Debug)]
pub struct DmaGenParams {
    /// Approximate number of DMA instructions.
    pub dmas: usize,
    /// Tiles per tiled chunk.
    pub tiles: u32,
    /// Percent of chunks that are tiled (the rest split evenly between
    /// duplicated loads, over-broad loads and dead saves).
    pub tiled_pct: u8,
    /// RNG seed.
    pub seed: u64,
}

impl Default for DmaGenParams {
    fn default() -> Self {
        DmaGenParams {
            dmas: 1000,
            tiles: 8,
            tiled_pct: 55,
            seed: 1,
        }
    }
}

struct Gen<'b, 'm> {
    b: &'b mut Builder<'m>,
    /// The target's SB partitions: every tensor spans them all.
    parts: u16,
    /// The target's DRAM alignment.
    dram_align: u64,
    placed: Vec<(MemLoc, u64)>,
    sb: u64,
    dram: u64,
    n: u32,
    dmas: usize,
}

impl Gen<'_, '_> {
    fn sb(&mut self, parts: u16, bytes: u32) -> Result<MemLoc, IrError> {
        self.n += 1;
        let l = self.b.mem(
            &format!("s{}", self.n),
            Space::Sb,
            parts,
            bytes,
            1,
            MemFlags::empty(),
        )?;
        self.placed.push((l, self.sb));
        self.sb += bytes as u64;
        Ok(l)
    }
    fn dram(&mut self, bytes: u32, f: MemFlags) -> Result<MemLoc, IrError> {
        self.n += 1;
        let l = self.b.mem(
            &format!("d{}", self.n),
            Space::Dram,
            self.parts,
            bytes,
            1,
            f,
        )?;
        self.placed.push((l, self.dram));
        self.dram +=
            crate::align::align_saturating(self.parts as u64 * bytes as u64, self.dram_align);
        Ok(l)
    }
    fn dma(&mut self, op: Opcode, s: ApSpec, d: ApSpec) -> Result<(), IrError> {
        let mut spec = InstSpec::new(op);
        let (i, o) = ([s], [d]);
        spec.inputs = &i;
        spec.outputs = &o;
        self.b.inst(&spec)?;
        self.dmas += 1;
        Ok(())
    }
    /// A DMA of all of `from` to all of `to`.
    fn dma_full(&mut self, op: Opcode, from: MemLoc, to: MemLoc) -> Result<(), IrError> {
        let (s, d) = (self.b.full(from), self.b.full(to));
        self.dma(op, s, d)
    }
    /// A chunk that loads a DRAM input `x` of `in_bytes` per partition
    /// whole into a tile `t`, runs `body(x, t, o)`, and saves the tile `o`
    /// of `out_bytes` whole to a DRAM output (declared `x`, `y`, `t`, `o`).
    fn staged(
        &mut self,
        in_bytes: u32,
        out_bytes: u32,
        body: impl FnOnce(&mut Self, MemLoc, MemLoc, MemLoc) -> Result<(), IrError>,
    ) -> Result<(), IrError> {
        let x = self.dram(in_bytes, MemFlags::INPUT)?;
        let y = self.dram(out_bytes, MemFlags::OUTPUT)?;
        let t = self.sb(self.parts, in_bytes)?;
        let o = self.sb(self.parts, out_bytes)?;
        self.dma_full(Opcode::Load, x, t)?;
        body(self, x, t, o)?;
        self.dma_full(Opcode::Save, o, y)
    }
    fn act(&mut self, o: ApSpec, i: ApSpec) -> Result<(), IrError> {
        let mut spec = InstSpec::new(Opcode::Activation);
        spec.subop = SubOp::Exp;
        let (ins, outs) = ([i], [o]);
        spec.inputs = &ins;
        spec.outputs = &outs;
        self.b.inst(&spec).map(|_| ())
    }
}

/// Generates a placed DMA-heavy module.
pub fn dma_heavy(target: Target, p: DmaGenParams) -> Result<Module, IrError> {
    let (parts, dram_align) = (target.sb_partitions, target.dram_min_align as u64);
    let mut m = Module::new(target);
    let guess = p.dmas * 2 + 64;
    m.reserve(Capacity {
        insts: guess,
        aps: 2 * guess,
        dims: 2 * guess,
        mems: guess,
        names: guess,
        name_bytes: guess * 8,
        blocks: 4,
        funcs: 1,
        ..Capacity::default()
    });
    let mut rng = Rng::new(p.seed);
    let mut b = Builder::new(&mut m);
    b.func("main")?;
    let mut g = Gen {
        b: &mut b,
        parts,
        dram_align,
        placed: Vec::new(),
        sb: 0,
        dram: 0,
        n: 0,
        dmas: 0,
    };
    while g.dmas < p.dmas {
        g.sb = 0;
        let kind = if rng.percent(p.tiled_pct) {
            0
        } else {
            1 + rng.below(3)
        };
        match kind {
            0 => {
                let w = [512u32, 1024, 2048][rng.below(3) as usize];
                let t = p.tiles.max(1);
                let x = g.dram(t * w, MemFlags::INPUT)?;
                let y = g.dram(t * w, MemFlags::OUTPUT)?;
                let tiles: Vec<MemLoc> =
                    (0..t).map(|_| g.sb(parts, w)).collect::<Result<_, _>>()?;
                let outs: Vec<MemLoc> = (0..t).map(|_| g.sb(parts, w)).collect::<Result<_, _>>()?;
                for k in 0..t {
                    let (s, d) = (
                        g.b.slice(x, 0, parts, k * w, (k + 1) * w),
                        g.b.full(tiles[k as usize]),
                    );
                    g.dma(Opcode::Load, s, d)?;
                }
                for k in 0..t as usize {
                    let (o, i) = (g.b.full(outs[k]), g.b.full(tiles[k]));
                    g.act(o, i)?;
                }
                for k in 0..t {
                    let (s, d) = (
                        g.b.full(outs[k as usize]),
                        g.b.slice(y, 0, parts, k * w, (k + 1) * w),
                    );
                    g.dma(Opcode::Save, s, d)?;
                }
            }
            1 => {
                // Duplicated load of the same bytes into the same tile.
                g.staged(1024, 2048, |g, x, a, o| {
                    let (oo, i) = (g.b.slice(o, 0, parts, 0, 1024), g.b.full(a));
                    g.act(oo, i)?;
                    g.dma_full(Opcode::Load, x, a)?;
                    let (oo, i) = (g.b.slice(o, 0, parts, 1024, 2048), g.b.full(a));
                    g.act(oo, i)
                })?;
            }
            2 => {
                // Over-broad load: only a quarter is read.
                g.staged(4096, 1024, |g, _, t, o| {
                    let (oo, i) = (g.b.full(o), g.b.slice(t, 0, parts, 1024, 2048));
                    g.act(oo, i)
                })?;
            }
            _ => {
                // Dead save: overwritten before it is read back.
                let x = g.dram(512, MemFlags::INPUT)?;
                let d = g.dram(512, MemFlags::INTERNAL)?;
                let y = g.dram(512, MemFlags::OUTPUT)?;
                let t = g.sb(parts, 512)?;
                let u = g.sb(parts, 512)?;
                let r = g.sb(parts, 512)?;
                g.dma_full(Opcode::Load, x, t)?;
                g.dma_full(Opcode::Save, t, d)?;
                let (o, i) = (g.b.full(u), g.b.full(t));
                g.act(o, i)?;
                g.dma_full(Opcode::Save, u, d)?;
                g.dma_full(Opcode::Load, d, r)?;
                g.dma_full(Opcode::Save, r, y)?;
            }
        }
    }
    let placed = core::mem::take(&mut g.placed);
    let _ = InstFlags::empty();
    for (l, off) in placed {
        m.place(l, 0, off);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::shape;

    #[test]
    fn every_instruction_obeys_the_shape_rule() {
        for seed in 0..8 {
            for tiled_pct in [0, 55, 100] {
                let p = DmaGenParams {
                    dmas: 200,
                    seed,
                    tiled_pct,
                    ..DmaGenParams::default()
                };
                let m = dma_heavy(Target::default(), p).unwrap();
                assert!(m.num_live_insts() > 100);
                for i in m.program_order() {
                    let r = shape::check(&m, i);
                    assert!(r.is_ok(), "seed {seed} {i}: {r:?}");
                }
            }
        }
    }
}
