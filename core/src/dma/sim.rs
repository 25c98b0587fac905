//! A byte-level reference execution of a *placed* module, used to prove that
//! a rewrite kept the program's data flow at real addresses: run the module
//! before and after, compare the bytes of every output.
//!
//! Memory is three byte arrays (SB and PSUM as partition × byte, DRAM flat)
//! addressed exactly as the placement says, so a rewrite that clobbers
//! another tensor's cells shows up as different output bytes. Inputs are
//! filled from a hash of their address; DMAs and `tensor_copy` move bytes in
//! walk order; `memset` writes its immediate; every other compute op writes a
//! hash of everything it reads. Loops run their trip count (unknown: twice).
//! Test and generator support only: it allocates freely.

use alloc::vec;
use alloc::vec::Vec;

use crate::ir::{Ap, Block, Loop, MemFlags, MemLoc, Module, Opcode, Space};

/// The memory image of a run.
#[derive(Clone, Debug)]
pub struct Machine {
    sb: Vec<u8>,
    sb_pitch: usize,
    psum: Vec<u8>,
    psum_pitch: usize,
    dram: Vec<u8>,
}

fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

impl Machine {
    /// Memory sized for every placed location of `m`, inputs filled.
    pub fn new(m: &Module) -> Machine {
        let (mut sbp, mut psp, mut dr) = (1usize, 1usize, 1usize);
        for l in m.mems().space.keys() {
            if !m.is_placed(l) {
                continue;
            }
            let end = m.mems().offset[l] as usize + m.mem_footprint(l) as usize;
            match m.mems().space[l] {
                Space::Sb => sbp = sbp.max(end),
                Space::Psum => psp = psp.max(end),
                Space::Dram => dr = dr.max(end),
            }
        }
        let parts = m.target.sb_partitions.max(m.target.psum_partitions) as usize;
        let mut mc = Machine {
            sb: vec![0; sbp * parts],
            sb_pitch: sbp,
            psum: vec![0; psp * parts],
            psum_pitch: psp,
            dram: vec![0; dr],
        };
        let mut addrs = Vec::new();
        for l in m.mems().space.keys() {
            if m.is_placed(l) && m.mems().flags[l].contains(MemFlags::INPUT) {
                let a = full(m, l);
                mc.addresses(m, &a, &mut addrs);
                for &(s, i) in &addrs {
                    *mc.cell(s, i) = mix(i as u64 * 31 + s as u64) as u8;
                }
            }
        }
        mc
    }

    fn cell(&mut self, space: u8, i: usize) -> &mut u8 {
        let v = match space {
            0 => &mut self.sb,
            1 => &mut self.psum,
            _ => &mut self.dram,
        };
        let n = v.len();
        &mut v[i.min(n - 1)]
    }

    /// Every byte an access pattern touches, in walk order, as (space, index).
    fn addresses(&self, m: &Module, a: &FullAp, out: &mut Vec<(u8, usize)>) {
        out.clear();
        let l = a.loc;
        let off = m.mems().offset[l] as i64;
        let es = a.elem as i64;
        let total: u64 = a.dims.iter().map(|d| d.1 as u64).product();
        for p in 0..a.parts as i64 {
            let part = a.part_start as i64 + p;
            let mut idx = [0u32; 8];
            for _ in 0..total {
                let mut e: i64 = 0;
                for (k, d) in a.dims.iter().enumerate() {
                    e += idx[k] as i64 * d.0 as i64;
                }
                for b in 0..es {
                    let byte = a.offset as i64 + e * es + b;
                    let (s, i) = match m.mems().space[l] {
                        Space::Sb => (
                            0u8,
                            (m.mems().base_partition[l] as i64 + part) * self.sb_pitch as i64
                                + off
                                + byte,
                        ),
                        Space::Psum => (
                            1u8,
                            (m.mems().base_partition[l] as i64 + part) * self.psum_pitch as i64
                                + off
                                + byte,
                        ),
                        Space::Dram => (2u8, off + part * m.mems().bytes[l] as i64 + byte),
                    };
                    out.push((s, i.max(0) as usize));
                }
                // Odometer over the dims, innermost last.
                for k in (0..a.dims.len()).rev() {
                    idx[k] += 1;
                    if idx[k] < a.dims[k].1 {
                        break;
                    }
                    idx[k] = 0;
                }
            }
        }
    }

    /// Runs every function of `m`.
    pub fn run(&mut self, m: &Module) {
        for f in m.funcs().name.keys() {
            let (a, b) = (m.funcs().first_block[f], m.funcs().end_block[f]);
            self.range(m, a.index(), b.index(), Loop::INVALID);
        }
    }

    fn range(&mut self, m: &Module, from: usize, to: usize, cur: Loop) {
        let mut b = from;
        while b < to {
            let mut l = m.blocks().loop_[Block::new(b)];
            let mut child = Loop::INVALID;
            while l.is_valid() && l != cur {
                child = l;
                l = m.loops().parent[l];
            }
            if child.is_valid() {
                let trip = m.loops().trip[child];
                let trips = if trip == crate::ir::UNKNOWN_TRIP {
                    2
                } else {
                    trip.min(4)
                };
                let (s, e) = (m.loops().first_block[child], m.loops().end_block[child]);
                for _ in 0..trips {
                    self.range(m, s.index(), e.index(), child);
                }
                b = e.index().max(b + 1);
            } else {
                self.block(m, Block::new(b));
                b += 1;
            }
        }
    }

    fn block(&mut self, m: &Module, b: Block) {
        let mut ins = Vec::new();
        let mut outs = Vec::new();
        for i in m.block_insts(b) {
            let op = m.insts().opcode[i];
            if op.is_scalar() {
                continue;
            }
            let mut data: Vec<u8> = Vec::new();
            let mut h: u64 = op as u64 * 0x9E37_79B9 + m.insts().subop[i] as u64;
            for a in m.inputs(i) {
                self.addresses(m, &ap_of(m, a), &mut ins);
                for &(s, x) in &ins {
                    let v = *self.cell(s, x);
                    data.push(v);
                    h = mix(h ^ v as u64);
                }
            }
            for a in m.outputs(i) {
                self.addresses(m, &ap_of(m, a), &mut outs);
                for (k, &(s, x)) in outs.iter().enumerate() {
                    let v = match op {
                        Opcode::Load | Opcode::Save | Opcode::DmaCopy | Opcode::TensorCopy => {
                            data.get(k).copied().unwrap_or(0)
                        }
                        Opcode::Memset => m.imm(i) as u8,
                        _ => mix(h.wrapping_add(k as u64)) as u8,
                    };
                    *self.cell(s, x) = v;
                }
            }
        }
    }

    /// The bytes of every output location, by name, in declaration order.
    pub fn outputs(&self, m: &Module) -> Vec<(alloc::string::String, Vec<u8>)> {
        let mut r = Vec::new();
        let mut addrs = Vec::new();
        for l in m.mems().space.keys() {
            if m.mems().flags[l].contains(MemFlags::OUTPUT) && m.is_placed(l) {
                self.addresses(m, &full(m, l), &mut addrs);
                let bytes = addrs.iter().map(|&(s, x)| self.get(s, x)).collect();
                r.push((alloc::string::String::from(m.mem_name(l)), bytes));
            }
        }
        r
    }

    fn get(&self, space: u8, i: usize) -> u8 {
        let v = match space {
            0 => &self.sb,
            1 => &self.psum,
            _ => &self.dram,
        };
        v.get(i).copied().unwrap_or(0)
    }
}

/// An access pattern as plain values.
struct FullAp {
    loc: MemLoc,
    part_start: u16,
    parts: u16,
    offset: u32,
    elem: u8,
    dims: Vec<(i32, u32)>,
}

fn ap_of(m: &Module, a: Ap) -> FullAp {
    FullAp {
        loc: m.aps().loc[a],
        part_start: m.aps().part_start[a].into(),
        parts: m.aps().part_count[a].into(),
        offset: m.aps().offset[a],
        elem: m.aps().elem_size[a],
        dims: m.ap_dims(a).iter().map(|d| (d.stride, d.count)).collect(),
    }
}

fn full(m: &Module, l: MemLoc) -> FullAp {
    let es = m.elem_size(l).max(1);
    FullAp {
        loc: l,
        part_start: 0,
        parts: m.mems().partitions[l],
        offset: 0,
        elem: es,
        dims: vec![(1, m.mems().bytes[l] / es as u32)],
    }
}

/// Runs `m` and returns its output bytes.
pub fn run_outputs(m: &Module) -> Vec<(alloc::string::String, Vec<u8>)> {
    let mut mc = Machine::new(m);
    mc.run(m);
    mc.outputs(m)
}
