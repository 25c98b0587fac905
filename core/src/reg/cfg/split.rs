//! Spilling that splits: what a spilled class becomes.
//!
//! A spilled class gets one slot (its members never interfere, so they can
//! share it as they would have shared a register). Its client vregs then
//! live in the slot: a def writes a temporary that is stored right after
//! the instruction; the uses of one vreg in one block read one
//! [`BLOCK_RELOAD`] reloaded before the first of them — the value's range
//! is split at the block's boundaries, in memory across them, in a
//! register inside — except a tied use, which gets a temporary of its own;
//! a tied copy from the vreg becomes a reload. Block parameters and edge
//! arguments in the slot are written and read there by the edge copies, so
//! a value carried around a loop in a slot costs nothing on the back edge.
//! A spilled block reload is split again: each of its uses reloads its own
//! temporary. Temporaries ([`TEMP`]) are never spilled.
//!
//! Reload points are the first use in each block, stores are at the
//! definition (a single store serves every reload, since the slot is never
//! overwritten while the value lives). Rematerialization is not done: the
//! `regalloc-vregs-only-v1` format says nothing of which values are
//! constants, and [`super::CfgFunction`] has no such query.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use super::program::{Full, Program, PseudoKind, BLOCK_RELOAD, DEAD, NONE, ORIG, TEMP};

/// Scratch of the rewrite.
#[derive(Clone, Debug, Default)]
pub(crate) struct Splitter {
    /// Per client vreg: the block and temp of its current block reload.
    bt_block: alloc::vec::Vec<u32>,
    bt_vreg: alloc::vec::Vec<u32>,
}

impl Splitter {
    /// Reserves for `vregs` client vregs.
    pub fn reserve(&mut self, vregs: usize) {
        for v in [&mut self.bt_block, &mut self.bt_vreg] {
            if v.capacity() < vregs {
                v.reserve_exact(vregs - v.len());
            }
        }
    }

    /// Rewrites every occurrence of the vregs just spilled: client vregs
    /// whose `slot` was set since the last rewrite (they still occur in
    /// operands) and block reloads marked [`DEAD`] (still occurring too).
    /// With `per_use`, every read of a newly spilled value reloads its own
    /// temporary (what [`super::pressure`] assumed when it chose them).
    pub fn rewrite(&mut self, p: &mut Program, per_use: bool) -> Result<(), Full> {
        self.bt_block.clear();
        self.bt_block.resize(p.orig_vregs, NONE);
        self.bt_vreg.clear();
        self.bt_vreg.resize(p.orig_vregs, NONE);
        for b in 0..p.num_blocks() {
            for i in p.block_start[b] as usize..p.block_end[b] as usize {
                let (s, nu) = (p.op_start[i] as usize, p.n_use[i] as usize);
                let e = p.op_start[i + 1] as usize;
                for j in s..s + nu {
                    let v = p.ops[j];
                    let kind = p.kind[v as usize];
                    let before = 2 * i as u32;
                    if kind == DEAD {
                        let o = p.origin[v as usize];
                        let t = p.new_vreg(TEMP, v)?;
                        p.push_pseudo(before, PseudoKind::Reload, t, p.slot[o as usize])?;
                        p.ops[j] = t;
                        continue;
                    }
                    if kind != ORIG || p.slot[v as usize] == NONE {
                        continue;
                    }
                    let slot = p.slot[v as usize];
                    let tied = p.tied_of(i).iter().any(|t| t.use_ as usize == j - s);
                    if tied || per_use {
                        let t = p.new_vreg(TEMP, v)?;
                        p.push_pseudo(before, PseudoKind::Reload, t, slot)?;
                        p.ops[j] = t;
                    } else if self.bt_block[v as usize] == b as u32 {
                        p.ops[j] = self.bt_vreg[v as usize];
                    } else {
                        let t = p.new_vreg(BLOCK_RELOAD, v)?;
                        p.push_pseudo(before, PseudoKind::Reload, t, slot)?;
                        self.bt_block[v as usize] = b as u32;
                        self.bt_vreg[v as usize] = t;
                        p.ops[j] = t;
                    }
                }
                for j in s + nu..e {
                    let v = p.ops[j];
                    if p.kind[v as usize] != ORIG || p.slot[v as usize] == NONE {
                        continue;
                    }
                    let slot = p.slot[v as usize];
                    let t = p.new_vreg(TEMP, v)?;
                    p.push_pseudo(2 * i as u32 + 1, PseudoKind::Store, slot, t)?;
                    p.ops[j] = t;
                }
            }
        }
        // Tied copies from a spilled vreg become reloads; reloads into a
        // split block reload disappear.
        for q in p.pseudo.iter_mut() {
            if q.kind == PseudoKind::Copy
                && p.kind[q.src as usize] == ORIG
                && p.slot[q.src as usize] != NONE
            {
                q.kind = PseudoKind::Reload;
                q.src = p.slot[q.src as usize];
            }
        }
        let kind = &p.kind;
        p.pseudo
            .retain(|q| !(q.kind == PseudoKind::Reload && kind[q.dst as usize] == DEAD));
        p.sort_pseudo();
        Ok(())
    }
}
