//! Creating entities: declarations (locations, registers, functions,
//! blocks, loops) and instructions with their access patterns, each
//! checked against the limits and the pattern rules where it is made. The
//! `insert_*` and `try_add_*` forms are for passes: they fail instead of
//! growing the reserved storage.

use super::mutate::{check_align, check_dtype};
use super::*;

impl Module {
    fn check_count(&self, n: usize, limit: u32, what: &'static str) -> Result<(), IrError> {
        if n >= limit as usize {
            return Err(IrError::Full {
                what,
                limit: limit as u64,
            });
        }
        Ok(())
    }

    pub(super) fn intern(&mut self, name: &str) -> Result<Name, IrError> {
        if self.mem_by_name.len() < self.names.len() {
            self.rebuild_name_index();
        }
        let n = self.names.intern(name).ok_or(IrError::NameTooLong)?;
        let len = self.names.len();
        if self.mem_by_name.len() < len {
            self.mem_by_name.resize(len, MemLoc::INVALID);
            self.reg_by_name.resize(len, Reg::INVALID);
            self.func_by_name.resize(len, Func::INVALID);
        }
        Ok(n)
    }

    /// Interns a name for a block label or a diagnostic.
    pub fn intern_name(&mut self, name: &str) -> Result<Name, IrError> {
        self.intern(name)
    }

    /// Declares a memory location. Alignment defaults to the element size
    /// (at least the space's minimum alignment).
    pub fn add_mem(
        &mut self,
        name: &str,
        space: Space,
        partitions: u16,
        bytes: u32,
    ) -> Result<MemLoc, IrError> {
        self.check_count(self.num_mems(), self.limits.locations, "memory locations")?;
        let max_parts = match space {
            Space::Sb => self.target.sb_partitions,
            Space::Psum => self.target.psum_partitions,
            Space::Dram => MAX_AP_PARTITIONS,
        }
        .min(MAX_AP_PARTITIONS);
        if partitions == 0 || partitions > max_parts {
            return Err(IrError::BadShape {
                what: "partition count",
                value: partitions as u64,
                max: max_parts as u64,
            });
        }
        if bytes == 0 || bytes == u32::MAX {
            return Err(IrError::BadShape {
                what: "bytes per partition",
                value: bytes as u64,
                max: u32::MAX as u64 - 1,
            });
        }
        let n = self.intern(name)?;
        if self.mem_by_name[n].is_valid() {
            return Err(IrError::Duplicate {
                what: "memory location",
            });
        }
        let min_align = match space {
            Space::Sb => self.target.sb_min_align,
            Space::Psum => self.target.psum_min_align,
            Space::Dram => self.target.dram_min_align,
        };
        let m = self.mems.space.push(space);
        self.mems.partitions.push(partitions);
        self.mems.bytes.push(bytes);
        self.mems.align.push(min_align.max(1));
        self.mems.dtype.push(DType::Raw(1));
        self.mems.name.push(n);
        self.mems.flags.push(MemFlags::empty());
        self.mems.base_partition.push(NO_PARTITION);
        self.mems.offset.push(UNPLACED);
        self.mems.bank.push(NO_BANK);
        self.mem_by_name[n] = m;
        Ok(m)
    }

    /// Declares a scalar register of 1 or 2 lanes.
    pub fn add_reg(&mut self, name: &str, lanes: u8) -> Result<Reg, IrError> {
        self.check_count(self.num_regs(), self.limits.registers, "registers")?;
        if lanes == 0 || lanes > 2 {
            return Err(IrError::BadShape {
                what: "register lanes",
                value: lanes as u64,
                max: 2,
            });
        }
        let n = self.intern(name)?;
        if self.reg_by_name[n].is_valid() {
            return Err(IrError::Duplicate { what: "register" });
        }
        let r = self.regs.lanes.push(lanes);
        self.regs.name.push(n);
        self.regs.flags.push(RegFlags::empty());
        self.regs.lane.push(NO_LANE);
        self.reg_by_name[n] = r;
        Ok(r)
    }

    /// Declares a function; its blocks are the ones added after it.
    pub fn add_func(&mut self, name: &str) -> Result<Func, IrError> {
        let n = self.intern(name)?;
        if self.func_by_name[n].is_valid() {
            return Err(IrError::Duplicate { what: "function" });
        }
        let b = Block::new(self.num_blocks());
        let f = self.funcs.name.push(n);
        self.funcs.first_block.push(b);
        self.funcs.end_block.push(b);
        self.func_by_name[n] = f;
        Ok(f)
    }

    /// Appends a block to the last function, inside `loop_` (innermost).
    pub fn add_block(&mut self, label: &str, loop_: Loop) -> Result<Block, IrError> {
        let f = match self.funcs.name.keys().last() {
            Some(f) => f,
            None => {
                return Err(IrError::BadOperand {
                    what: "a block outside any function",
                })
            }
        };
        self.check_count(self.num_blocks(), self.limits.instructions, "blocks")?;
        let n = self.intern(label)?;
        let b = self.blocks.name.push(n);
        self.blocks.func.push(f);
        self.blocks.loop_.push(loop_);
        self.blocks.first.push(Inst::INVALID);
        self.blocks.last.push(Inst::INVALID);
        self.funcs.end_block[f] = Block::new(b.index() + 1);
        // Every enclosing loop now extends to this block.
        let mut l = loop_;
        while l.is_valid() {
            self.loops.end_block[l] = Block::new(b.index() + 1);
            l = self.loops.parent[l];
        }
        Ok(b)
    }

    /// Opens a loop nested in `parent`; blocks added until it is closed
    /// belong to it.
    pub fn add_loop(&mut self, parent: Loop, trip: u32) -> Result<Loop, IrError> {
        let depth = if parent.is_valid() {
            self.loops.depth[parent] + 1
        } else {
            1
        };
        if depth > self.limits.loop_depth {
            return Err(IrError::Full {
                what: "nested loops",
                limit: self.limits.loop_depth as u64,
            });
        }
        let b = Block::new(self.num_blocks());
        let l = self.loops.parent.push(parent);
        self.loops.name.push(Name::INVALID);
        self.loops.trip.push(trip);
        self.loops.depth.push(depth);
        self.loops.first_block.push(b);
        self.loops.end_block.push(b);
        Ok(l)
    }

    /// Creates an instruction (not yet in any block). Fails without
    /// allocating when `grow` is false and the reserved room is used up.
    fn create_inst(
        &mut self,
        spec: &InstSpec<'_>,
        grow: bool,
        inner: Loop,
    ) -> Result<Inst, IrError> {
        self.check_count(self.num_insts(), self.limits.instructions, "instructions")?;
        let n_aps = spec.inputs.len() + spec.outputs.len();
        if n_aps > self.limits.aps_per_inst as usize {
            return Err(IrError::Full {
                what: "access patterns in one instruction",
                limit: self.limits.aps_per_inst as u64,
            });
        }
        let n_regs = spec.uses.len() + spec.defs.len();
        if n_regs > self.limits.regs_per_inst as usize {
            return Err(IrError::Full {
                what: "registers in one instruction",
                limit: self.limits.regs_per_inst as u64,
            });
        }
        let legacy = legacy_offset_operand(self, spec);
        for (k, s) in spec.inputs.iter().chain(spec.outputs).enumerate() {
            self.check_ap_spec(s)?;
            self.check_ap_dims(spec.opcode, k, s.dims.len())?;
            let read = k < spec.inputs.len();
            let lx;
            let ext = if legacy == Some(k) {
                lx = legacy_ext(self, s);
                &lx
            } else {
                &s.ext
            };
            pattern::check(self, inner, spec.uses.len(), read, s.plain(), ext).map_err(
                |error| IrError::BadPattern {
                    operand: k as u8,
                    error,
                },
            )?;
        }
        let n_ext = spec
            .inputs
            .iter()
            .chain(spec.outputs)
            .enumerate()
            .filter(|(k, s)| !s.ext.is_plain() || legacy == Some(*k))
            .count();
        for &r in spec.uses.iter().chain(spec.defs) {
            if r.index() >= self.num_regs() {
                return Err(IrError::BadOperand {
                    what: "an undeclared register",
                });
            }
        }
        let pooled: usize = spec
            .inputs
            .iter()
            .chain(spec.outputs)
            .map(|s| if s.dims.len() > 1 { s.dims.len() } else { 0 })
            .sum();
        if self.dims.len() + pooled > MAX_DIM_POOL {
            return Err(IrError::Full {
                what: "dims of multi-dimension access patterns",
                limit: MAX_DIM_POOL as u64,
            });
        }
        if !grow {
            let full = self.insts.opcode.len() == self.insts.opcode.capacity()
                || self.aps.loc.len() + n_aps > self.aps.loc.capacity()
                || self.dims.len() + pooled > self.dims.capacity()
                || self.ap_ext.len() + n_ext > self.ap_ext.capacity()
                || self.reg_pool.len() + n_regs > self.reg_pool.capacity()
                || (spec.imm != 0 && !self.insts.imms.has_room());
            if full {
                return Err(IrError::Full {
                    what: "instructions in the reserved workspace",
                    limit: self.insts.opcode.capacity() as u64,
                });
            }
        }
        let ap_start = self.aps.loc.len() as u32;
        for (k, s) in spec.inputs.iter().chain(spec.outputs).enumerate() {
            if legacy == Some(k) {
                let ext = legacy_ext(self, s);
                self.push_ap(s, Some(ext));
            } else {
                self.push_ap(s, None);
            }
        }
        let reg_start = self.reg_pool.len() as u32;
        self.reg_pool.extend_from_slice(spec.uses);
        self.reg_pool.extend_from_slice(spec.defs);
        let i = self.insts.opcode.push(spec.opcode);
        self.insts.subop.push(spec.subop);
        self.insts.engine.push(spec.engine);
        self.insts.queue.push(spec.queue);
        self.insts.flags.push(spec.flags);
        self.insts.imms.push(i, spec.imm);
        self.insts.operands.push(Operands {
            ap_start,
            reg_start,
            n_in: spec.inputs.len() as u8,
            n_out: spec.outputs.len() as u8,
            n_use: spec.uses.len() as u8,
            n_def: spec.defs.len() as u8,
        });
        self.insts.block.push(Block::INVALID);
        self.insts.prev.push(Inst::INVALID);
        self.insts.next.push(Inst::INVALID);
        Ok(i)
    }

    /// Operand `k` of an `opcode` instruction has `n` dims: at most the
    /// target's limit for its engines, and that limit within what the
    /// storage holds.
    fn check_ap_dims(&self, opcode: Opcode, k: usize, n: usize) -> Result<(), IrError> {
        let dma = opcode.is_dma();
        let max = if dma {
            self.target.dma_max_dims
        } else {
            self.target.compute_max_dims
        };
        if max as usize > MAX_DIMS {
            return Err(IrError::TargetDims { max, dma });
        }
        if n > max as usize {
            return Err(IrError::TooManyDims {
                opcode,
                operand: k as u8,
                dims: n as u8,
                max,
                dma,
            });
        }
        Ok(())
    }

    fn check_ap_spec(&self, s: &ApSpec) -> Result<(), IrError> {
        if s.loc.index() >= self.num_mems() {
            return Err(IrError::BadOperand {
                what: "an undeclared memory location",
            });
        }
        if s.dims.is_empty() {
            return Err(IrError::BadOperand {
                what: "an access pattern without dimensions",
            });
        }
        if s.dims.iter().any(|d| d.count == 0) {
            return Err(IrError::BadShape {
                what: "dimension count",
                value: 0,
                max: u32::MAX as u64,
            });
        }
        if s.elem_size == 0 {
            return Err(IrError::BadShape {
                what: "element size",
                value: 0,
                max: 16,
            });
        }
        let parts = self.mems.partitions[s.loc];
        // A DRAM pattern with a partition step is checked by its flat
        // extent ([`pattern::check`]).
        let pitched = s.ext.pstep.is_some() && self.mems.space[s.loc] == Space::Dram;
        let max_end = if pitched {
            MAX_AP_PARTITIONS as u32
        } else {
            parts as u32
        };
        if s.part_count == 0 || s.part_start as u32 + s.part_count as u32 > max_end {
            return Err(IrError::BadOperand {
                what: "a partition range outside its location",
            });
        }
        // Locations have at most MAX_AP_PARTITIONS partitions, so this only
        // fails for a location made before that limit (never): checked
        // anyway, as the columns are u8.
        if u8::try_from(s.part_start).is_err() || u8::try_from(s.part_count).is_err() {
            return Err(IrError::BadShape {
                what: "access-pattern partition range end",
                value: s.part_start as u64 + s.part_count as u64,
                max: MAX_AP_PARTITIONS as u64,
            });
        }
        Ok(())
    }

    /// Appends a pattern [`Self::check_ap_spec`] accepted (partitions fit
    /// `u8`, counts ≥ 1) and whose pool room `create_inst` checked; `ext`
    /// replaces the spec's extension when given.
    fn push_ap(&mut self, s: &ApSpec, ext: Option<ApExt>) {
        let ext = ext.unwrap_or_else(|| s.ext.clone());
        let slot_ext = if ext.is_plain() {
            NO_EXT
        } else {
            self.ap_ext.push(ext);
            (self.ap_ext.len() - 1) as u32
        };
        let slot = match s.dims.as_slice() {
            [one] => *one,
            many => {
                let start = self.dims.len();
                self.dims.extend_from_slice(many);
                pool_slot(start, many.len())
            }
        };
        self.aps.loc.push(s.loc);
        self.aps
            .part_start
            .push(s.part_start.min(u8::MAX as u16) as u8);
        self.aps
            .part_count
            .push(s.part_count.min(u8::MAX as u16) as u8);
        self.aps.offset.push(s.offset);
        self.aps.elem_size.push(s.elem_size);
        self.aps.dim.push(slot);
        self.aps.ext.push(slot_ext);
    }

    /// Builds an instruction at the end of `block` (builder and parser use;
    /// may grow storage).
    pub fn append_inst(&mut self, block: Block, spec: &InstSpec<'_>) -> Result<Inst, IrError> {
        if block.index() >= self.num_blocks() {
            return Err(IrError::BadOperand {
                what: "an undeclared block",
            });
        }
        let inner = self
            .blocks
            .loop_
            .get(block)
            .copied()
            .unwrap_or(Loop::INVALID);
        let i = self.create_inst(spec, true, inner)?;
        self.link_at_end(block, i);
        Ok(i)
    }

    /// Creates an instruction inside the reserved workspace and links it
    /// before `at` (pass use: never allocates; fails when the reserve is
    /// used up).
    pub fn insert_before(&mut self, at: Inst, spec: &InstSpec<'_>) -> Result<Inst, IrError> {
        let (b, i) = self.create_beside(at, spec)?;
        let p = self.insts.prev[at];
        self.link_between(b, p, i, at);
        Ok(i)
    }

    /// Creates an instruction inside the reserved workspace and links it
    /// after `at` (pass use: never allocates).
    pub fn insert_after(&mut self, at: Inst, spec: &InstSpec<'_>) -> Result<Inst, IrError> {
        let (b, i) = self.create_beside(at, spec)?;
        let n = self.insts.next[at];
        self.link_between(b, at, i, n);
        Ok(i)
    }

    /// Creates, inside the reserved workspace, an instruction for the block
    /// of `at` (refused when `at` was removed); returns the block and it.
    fn create_beside(&mut self, at: Inst, spec: &InstSpec<'_>) -> Result<(Block, Inst), IrError> {
        let b = self.insts.block[at];
        if !b.is_valid() {
            return Err(IrError::BadOperand {
                what: "insertion point was removed",
            });
        }
        let i = self.create_inst(spec, false, self.blocks.loop_[b])?;
        Ok((b, i))
    }

    fn link_at_end(&mut self, b: Block, i: Inst) {
        let last = self.blocks.last[b];
        self.link_between(b, last, i, Inst::INVALID);
    }

    /// Links unlinked instruction `i` into block `b` between neighbours
    /// `p` and `n` (either [`Inst::INVALID`] at that end of the list).
    fn link_between(&mut self, b: Block, p: Inst, i: Inst, n: Inst) {
        self.join(b, p, i);
        self.join(b, i, n);
        self.insts.block[i] = b;
        self.live_insts += 1;
    }

    /// Makes `n` follow `p` in block `b`'s list; an invalid `p` makes `n`
    /// the first, an invalid `n` makes `p` the last.
    fn join(&mut self, b: Block, p: Inst, n: Inst) {
        if p.is_valid() {
            self.insts.next[p] = n;
        } else {
            self.blocks.first[b] = n;
        }
        if n.is_valid() {
            self.insts.prev[n] = p;
        } else {
            self.blocks.last[b] = p;
        }
    }

    /// Unlinks an instruction from its block. Its operands stay readable.
    pub fn remove_inst(&mut self, i: Inst) {
        let b = self.insts.block[i];
        if !b.is_valid() {
            return;
        }
        self.join(b, self.insts.prev[i], self.insts.next[i]);
        self.insts.block[i] = Block::INVALID;
        self.insts.prev[i] = Inst::INVALID;
        self.insts.next[i] = Inst::INVALID;
        self.live_insts -= 1;
    }

    /// Creates the location `spec` describes inside the reserved workspace
    /// (pass use: fails instead of growing), whole: every check runs before
    /// anything is added.
    pub fn try_add_mem(&mut self, spec: &MemSpec<'_>) -> Result<MemLoc, IrError> {
        if self.mems.space.len() == self.mems.space.capacity()
            || self.names.len() >= self.mem_by_name.capacity()
        {
            return Err(IrError::Full {
                what: "memory locations in the reserved workspace",
                limit: self.mems.space.capacity() as u64,
            });
        }
        check_dtype(spec.dtype)?;
        if spec.align != 0 {
            check_align(spec.align)?;
        }
        let v = self.add_mem(spec.name, spec.space, spec.partitions, spec.bytes)?;
        self.mems.dtype[v] = spec.dtype;
        self.mems.align[v] = match spec.align {
            0 => self.mems.align[v].max(spec.dtype.size() as u32),
            a => a,
        };
        self.mems.flags[v] = spec.flags;
        Ok(v)
    }

    /// Creates a register inside the reserved workspace (pass use).
    pub fn try_add_reg(&mut self, name: &str, lanes: u8) -> Result<Reg, IrError> {
        if self.regs.lanes.len() == self.regs.lanes.capacity()
            || self.names.len() >= self.reg_by_name.capacity()
        {
            return Err(IrError::Full {
                what: "registers in the reserved workspace",
                limit: self.regs.lanes.capacity() as u64,
            });
        }
        self.add_reg(name, lanes)
    }
}

/// The operand index (inputs, then outputs) of a DMA's DRAM-side pattern
/// that the legacy spelling moves: a DMA with exactly one used register and
/// no register term anywhere reads that register as the dynamic offset of
/// its DRAM side (the load's source, the save's destination, a copy's
/// DRAM operand, the source when both are). `None` otherwise.
fn legacy_offset_operand(m: &Module, spec: &InstSpec<'_>) -> Option<usize> {
    if !spec.opcode.is_dma() || spec.uses.len() != 1 {
        return None;
    }
    let any_term = spec
        .inputs
        .iter()
        .chain(spec.outputs)
        .any(|s| s.ext.reg.is_some());
    if any_term {
        return None;
    }
    let dram = |s: &ApSpec| m.mems.space.get(s.loc).copied() == Some(Space::Dram);
    let input = spec.inputs.first().filter(|s| dram(s)).map(|_| 0);
    let output = spec
        .outputs
        .first()
        .filter(|s| dram(s))
        .map(|_| spec.inputs.len());
    match spec.opcode {
        Opcode::Save => output.or(input),
        _ => input.or(output),
    }
}

/// The legacy register term of `s` (see [`legacy_offset_operand`]): the
/// first use, scale 1, anywhere in the location's row.
fn legacy_ext(m: &Module, s: &ApSpec) -> ApExt {
    let mut e = s.ext.clone();
    e.reg = Some(RegTerm {
        use_index: 0,
        scale: 1,
        window_lo: 0,
        window_hi: m.mems.bytes.get(s.loc).copied().unwrap_or(0),
    });
    e
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ap_spec, one_block};
    use super::*;

    #[test]
    fn single_dims_are_inline_and_multi_dims_are_pooled() {
        let mut m = Module::new(Target::default());
        let t = m.add_mem("t", Space::Sb, 128, 4096).unwrap();
        let b = one_block(&mut m);
        let one = [Dim::new(-2, 7)];
        let three = [Dim::new(512, 2), Dim::new(8, 4), Dim::new(1, 8)];
        let ins = [ap_spec(t, 128, &one), ap_spec(t, 64, &three)];
        let outs = [ap_spec(t, 1, &three[1..])];
        let mut s = InstSpec::new(Opcode::TensorCopy);
        s.inputs = &ins;
        s.outputs = &outs;
        let i = m.append_inst(b, &s).unwrap();
        let aps: alloc::vec::Vec<Ap> = m.all_aps(i).collect();
        assert_eq!(m.ap_dims(aps[0]), &one);
        assert_eq!(m.ap_dims(aps[1]), &three);
        assert_eq!(m.ap_dims(aps[2]), &three[1..]);
        assert_eq!(m.ap_ndims(aps[1]), 3);
        // Only the two multi-dimension patterns use the pool.
        assert_eq!(m.dims.len(), 5);
        assert_eq!(m.aps.part_count[aps[0]], 128);
        assert_eq!(m.imm(i), 0);
        assert!(m.insts.imms.is_empty());
    }

    #[test]
    fn patterns_have_at_most_the_targets_dims_for_their_engines() {
        let mut m = Module::new(Target::default());
        let t = m.add_mem("t", Space::Sb, 128, 4096).unwrap();
        let d = m.add_mem("d", Space::Dram, 128, 4096).unwrap();
        let b = one_block(&mut m);
        let dims = |n: usize| -> alloc::vec::Vec<Dim> { (0..n).map(|_| Dim::new(1, 1)).collect() };
        let (dma, compute) = (
            m.target.dma_max_dims as usize,
            m.target.compute_max_dims as usize,
        );
        assert!(compute < dma && dma <= MAX_DIMS);
        // A compute pattern at the compute limit is made; one past it is
        // refused, naming the instruction, the operand and both numbers.
        let mut s = InstSpec::new(Opcode::TensorCopy);
        let ins = [ap_spec(t, 128, &dims(compute))];
        let outs = [ap_spec(t, 128, &dims(1))];
        (s.inputs, s.outputs) = (&ins, &outs);
        m.append_inst(b, &s).unwrap();
        let ins = [ap_spec(t, 128, &dims(1))];
        let outs = [ap_spec(t, 128, &dims(compute + 1))];
        (s.inputs, s.outputs) = (&ins, &outs);
        let e = m.append_inst(b, &s).unwrap_err();
        assert_eq!(
            e,
            IrError::TooManyDims {
                opcode: Opcode::TensorCopy,
                operand: 1,
                dims: compute as u8 + 1,
                max: compute as u8,
                dma: false,
            }
        );
        assert_eq!(
            alloc::format!("{e}"),
            alloc::format!(
                "`tensor_copy` access pattern 2 has {} dimensions; compute access patterns \
                 have at most {compute} on this target",
                compute + 1
            )
        );
        // A DMA pattern may have the DMA limit, which the target sets.
        let mut s = InstSpec::new(Opcode::Load);
        let ins = [ap_spec(d, 128, &dims(dma))];
        let outs = [ap_spec(t, 128, &dims(1))];
        (s.inputs, s.outputs) = (&ins, &outs);
        m.append_inst(b, &s).unwrap();
        m.target.dma_max_dims = 2;
        assert!(matches!(
            m.append_inst(b, &s),
            Err(IrError::TooManyDims {
                opcode: Opcode::Load,
                operand: 0,
                max: 2,
                dma: true,
                ..
            })
        ));
        // A target whose limit exceeds what a pattern can hold is refused.
        m.target.dma_max_dims = MAX_DIMS as u8 + 1;
        let e = m.append_inst(b, &s).unwrap_err();
        assert_eq!(
            e,
            IrError::TargetDims {
                max: MAX_DIMS as u8 + 1,
                dma: true
            }
        );
        assert!(alloc::format!("{e}").contains("more than the 5 an access pattern can hold"));
        m.check_structure().unwrap();
    }

    #[test]
    fn zero_counts_and_wide_partition_ranges_are_refused() {
        let mut m = Module::new(Target::default());
        let d = m.add_mem("d", Space::Dram, 255, 64).unwrap();
        assert_eq!(
            m.add_mem("e", Space::Dram, 256, 64),
            Err(IrError::BadShape {
                what: "partition count",
                value: 256,
                max: MAX_AP_PARTITIONS as u64,
            })
        );
        let b = one_block(&mut m);
        let outs = [ap_spec(d, 255, &[Dim::new(1, 0)])];
        let mut s = InstSpec::new(Opcode::Memset);
        s.outputs = &outs;
        assert!(matches!(
            m.append_inst(b, &s),
            Err(IrError::BadShape {
                what: "dimension count",
                ..
            })
        ));
        let outs = [ap_spec(d, 255, &[Dim::new(1, 64)])];
        s.outputs = &outs;
        let i = m.append_inst(b, &s).unwrap();
        assert_eq!(m.aps.part_count[m.outputs(i).next().unwrap()], 255);
    }

    #[test]
    fn immediates_are_sparse_and_pass_inserts_need_reserved_room() {
        let mut m = Module::new(Target::default());
        let r = m.add_reg("r", 1).unwrap();
        let b = one_block(&mut m);
        let defs = [r];
        let mut s = InstSpec::new(Opcode::ScalarImm);
        s.defs = &defs;
        let zero = m.append_inst(b, &s).unwrap();
        s.imm = -5;
        let five = m.append_inst(b, &s).unwrap();
        assert_eq!((m.imm(zero), m.imm(five)), (0, -5));
        assert_eq!(m.insts.imms.len(), 1);
        // Room for instructions but not for another immediate: refused.
        m.reserve(Capacity {
            insts: 4,
            reg_operands: 4,
            ..Capacity::default()
        });
        m.insts.imms.shrink_to_fit();
        assert!(matches!(
            m.insert_after(five, &s),
            Err(IrError::Full { .. })
        ));
        s.imm = 0;
        assert!(m.insert_after(five, &s).is_ok());
        m.reserve(Capacity {
            imms: 1,
            ..Capacity::default()
        });
        s.imm = 9;
        let nine = m.insert_after(five, &s).unwrap();
        assert_eq!(m.imm(nine), 9);
        m.check_structure().unwrap();
    }
}
