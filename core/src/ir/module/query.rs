//! Reading the module: counts, lookups by name, operands, what an access
//! pattern touches, placements, and walks in program order. Nothing here
//! changes the module.

use super::*;

impl Module {
    /// Number of instructions linked into blocks.
    pub fn num_live_insts(&self) -> usize {
        self.live_insts
    }

    /// The location named `name` (without `%`).
    pub fn mem_by_name(&self, name: &str) -> Option<MemLoc> {
        let n = self.names.lookup(name)?;
        self.mem_by_name.get(n).copied().filter(|m| m.is_valid())
    }

    /// The register named `name` (without `$`).
    pub fn reg_by_name(&self, name: &str) -> Option<Reg> {
        let n = self.names.lookup(name)?;
        self.reg_by_name.get(n).copied().filter(|r| r.is_valid())
    }

    /// The function named `name` (without `@`).
    pub fn func_by_name(&self, name: &str) -> Option<Func> {
        let n = self.names.lookup(name)?;
        self.func_by_name.get(n).copied().filter(|f| f.is_valid())
    }

    /// The name of a location.
    pub fn mem_name(&self, m: MemLoc) -> &str {
        self.mems.name.get(m).map_or("", |&n| self.names.get(n))
    }

    /// The name of a register.
    pub fn reg_name(&self, r: Reg) -> &str {
        self.regs.name.get(r).map_or("", |&n| self.names.get(n))
    }

    /// The label of a block.
    pub fn block_name(&self, b: Block) -> &str {
        self.blocks.name.get(b).map_or("", |&n| self.names.get(n))
    }

    /// The name of a function.
    pub fn func_name(&self, f: Func) -> &str {
        self.funcs.name.get(f).map_or("", |&n| self.names.get(n))
    }

    /// The name of a loop's induction variable (`None` when unnamed).
    pub fn loop_name(&self, l: Loop) -> Option<&str> {
        let n = *self.loops.name.get(l)?;
        n.is_valid().then(|| self.names.get(n))
    }

    /// The operand handle of an instruction.
    #[inline]
    pub fn operands(&self, i: Inst) -> Operands {
        self.insts.operands[i]
    }

    /// Input access patterns of an instruction.
    pub fn inputs(&self, i: Inst) -> impl ExactSizeIterator<Item = Ap> + Clone {
        let o = self.insts.operands[i];
        (o.ap_start..o.ap_start + o.n_in as u32).map(Ap::from_u32)
    }

    /// Output access patterns of an instruction.
    pub fn outputs(&self, i: Inst) -> impl ExactSizeIterator<Item = Ap> + Clone {
        let o = self.insts.operands[i];
        let s = o.ap_start + o.n_in as u32;
        (s..s + o.n_out as u32).map(Ap::from_u32)
    }

    /// All access patterns of an instruction (inputs, then outputs).
    pub fn all_aps(&self, i: Inst) -> impl ExactSizeIterator<Item = Ap> + Clone {
        let o = self.insts.operands[i];
        (o.ap_start..o.ap_start + o.n_in as u32 + o.n_out as u32).map(Ap::from_u32)
    }

    /// Registers an instruction reads.
    pub fn uses(&self, i: Inst) -> &[Reg] {
        let o = self.insts.operands[i];
        let s = o.reg_start as usize;
        self.reg_pool.get(s..s + o.n_use as usize).unwrap_or(&[])
    }

    /// Registers an instruction writes.
    pub fn defs(&self, i: Inst) -> &[Reg] {
        let o = self.insts.operands[i];
        let s = o.reg_start as usize + o.n_use as usize;
        self.reg_pool.get(s..s + o.n_def as usize).unwrap_or(&[])
    }

    /// The immediate of an instruction (0 when it has none).
    #[inline]
    pub fn imm(&self, i: Inst) -> i64 {
        self.insts.imms.get(i)
    }

    /// The dims of an access pattern.
    #[inline]
    pub fn ap_dims(&self, a: Ap) -> &[Dim] {
        let slot = &self.aps.dim[a];
        match pooled(slot) {
            None => core::slice::from_ref(slot),
            Some((s, n)) => self.dims.get(s..s + n).unwrap_or(&[]),
        }
    }

    /// The extension of an access pattern (loop terms, register term,
    /// partition step): the plain one for nearly every pattern.
    #[inline]
    pub fn ap_ext(&self, a: Ap) -> &ApExt {
        match self.aps.ext[a] {
            NO_EXT => &PLAIN,
            k => self.ap_ext.get(k as usize).unwrap_or(&PLAIN),
        }
    }

    /// True when an access pattern is plain (no extension).
    #[inline]
    pub fn ap_is_plain(&self, a: Ap) -> bool {
        self.aps.ext[a] == NO_EXT
    }

    /// The cells an access pattern may touch over all iterations (and its
    /// register window), relative to its location ([`pattern::Extent`]).
    pub fn ap_extent(&self, a: Ap) -> pattern::Extent {
        self.ap_extent_with(a, self.ap_ext(a))
    }

    /// The extent of an access pattern's static part under the extension
    /// `ext` instead of its own (e.g. without its loop terms: the cells of
    /// iteration 0).
    pub fn ap_extent_with(&self, a: Ap, ext: &pattern::ApExt) -> pattern::Extent {
        pattern::extent(self, self.ap_plain(a), ext)
    }

    /// The plain fields of an access pattern as [`pattern`] takes them.
    pub(super) fn ap_plain(&self, a: Ap) -> pattern::PlainFields<'_> {
        pattern::PlainFields {
            loc: self.aps.loc[a],
            part_start: self.aps.part_start[a] as u16,
            part_count: self.aps.part_count[a] as u16,
            offset: self.aps.offset[a],
            elem_size: self.aps.elem_size[a],
            dims: self.ap_dims(a),
        }
    }

    /// The plain description of an access pattern (to copy or re-create it).
    pub fn ap_spec(&self, a: Ap) -> ApSpec {
        ApSpec {
            loc: self.aps.loc[a],
            part_start: self.aps.part_start[a] as u16,
            part_count: self.aps.part_count[a] as u16,
            offset: self.aps.offset[a],
            elem_size: self.aps.elem_size[a],
            dims: self.ap_dims(a).iter().copied().collect(),
            ext: self.ap_ext(a).clone(),
        }
    }

    /// Number of dims of an access pattern (1..=5).
    #[inline]
    pub fn ap_ndims(&self, a: Ap) -> usize {
        self.ap_dims(a).len()
    }

    /// Bytes per partition an access pattern moves.
    pub fn ap_bytes_per_partition(&self, a: Ap) -> u64 {
        ap::elements(self.ap_dims(a)) * self.aps.elem_size[a] as u64
    }

    /// Total bytes an access pattern moves.
    pub fn ap_bytes(&self, a: Ap) -> u64 {
        self.ap_bytes_per_partition(a) * self.aps.part_count[a] as u64
    }

    /// The byte range `[lo, hi)` an access pattern may touch inside each
    /// partition, relative to its location (`None` for an empty or
    /// negative-reaching pattern): for a pattern that moves, the hull over
    /// every iteration and its register window; for a DRAM pattern with an
    /// explicit partition step, the whole row. An over-approximation for
    /// patterns that move: use it to test overlap, never coverage.
    pub fn ap_byte_span(&self, a: Ap) -> Option<(u64, u64)> {
        if !self.ap_is_plain(a) {
            let e = self.ap_extent(a);
            if e.flat {
                return Some((0, self.mems.bytes[self.aps.loc[a]] as u64));
            }
            return (e.byte_lo >= 0 && e.byte_lo < e.byte_hi)
                .then_some((e.byte_lo as u64, e.byte_hi as u64));
        }
        let (lo, hi) = ap::element_span(self.ap_dims(a))?;
        let es = self.aps.elem_size[a] as i64;
        let base = self.aps.offset[a] as i64;
        let lo = base + lo * es;
        let hi = base + hi * es;
        (lo >= 0).then_some((lo as u64, hi as u64))
    }

    /// The partitions `[lo, hi)` of its location an access pattern may
    /// touch (the hull over every iteration for one that moves; every
    /// partition for a DRAM pattern with an explicit partition step).
    pub fn ap_rows(&self, a: Ap) -> (u16, u16) {
        let ps = self.aps.part_start[a] as u16;
        if self.ap_is_plain(a) {
            return (ps, ps + self.aps.part_count[a] as u16);
        }
        let e = self.ap_extent(a);
        if e.flat {
            return (0, self.mems.partitions[self.aps.loc[a]]);
        }
        let clamp = |x: i64| x.clamp(0, u16::MAX as i64) as u16;
        (clamp(e.part_lo), clamp(e.part_hi))
    }

    /// The rectangle of its location an access pattern names over every
    /// iteration: partitions `[r0, r1)` and bytes `[lo, hi)` per partition,
    /// both hulls ([`Module::ap_rows`], [`Module::ap_byte_span`], the whole
    /// row when the span is unknown). A partition broadcast touches one
    /// partition but names `part_count` of them, and a copy it reads from
    /// must hold them all, so the rows extend over them. Clamped to the
    /// location.
    pub fn ap_hull(&self, a: Ap) -> (u16, u16, u64, u64) {
        let l = self.aps.loc[a];
        let bytes = self.mems.bytes[l] as u64;
        let (lo, hi) = self.ap_byte_span(a).unwrap_or((0, bytes));
        let (r0, mut r1) = self.ap_rows(a);
        if self.ap_ext(a).is_broadcast(self.mems.space[l]) {
            r1 = r1.saturating_add((self.aps.part_count[a] as u16).saturating_sub(1));
        }
        (r0, r1, lo.min(bytes), hi.min(bytes))
    }

    /// How location `v` is laid out when it is buffered in slots used in
    /// turn: every pattern of `v` in a linked instruction carries exactly
    /// one loop term that wraps, all of the same loop, byte stride (moving
    /// no partition) and wrap `n`, and without that term each pattern
    /// stays inside the first slot, the location's bytes less `n − 1`
    /// strides (never wider than a stride). Then every access, at every
    /// iteration, lies in one slot. `None` otherwise. Scans the program:
    /// for checks that ask it of few locations.
    pub fn slots(&self, v: MemLoc) -> Option<pattern::Slots> {
        let mut slot: Option<(Loop, i64, u16)> = None;
        for i in self.program_order() {
            for a in self.all_aps(i).filter(|&a| self.aps.loc[a] == v) {
                let ext = self.ap_ext(a);
                let mut wrapped = ext.terms.iter().filter(|t| t.wraps());
                let (Some(t), None) = (wrapped.next(), wrapped.next()) else {
                    return None;
                };
                if t.parts != 0 || t.bytes <= 0 {
                    return None;
                }
                let key = (t.lp, t.bytes, t.wrap);
                if *slot.get_or_insert(key) != key {
                    return None;
                }
            }
        }
        let (lp, stride, n) = slot?;
        let bytes = self.mems.bytes[v] as i64;
        let width = bytes.checked_sub(stride.checked_mul(n as i64 - 1)?)?;
        if width <= 0 || width > stride {
            return None;
        }
        for i in self.program_order() {
            for a in self.all_aps(i).filter(|&a| self.aps.loc[a] == v) {
                let mut first = self.ap_ext(a).clone();
                first.terms.retain(|t| t.lp != lp);
                let e = self.ap_extent_with(a, &first);
                if e.flat || e.byte_lo < 0 || e.byte_hi > width {
                    return None;
                }
            }
        }
        Some(pattern::Slots {
            lp,
            stride: stride as u64,
            count: n,
            width: width as u64,
        })
    }

    /// `isFullAccess`: the access pattern covers its whole location — every
    /// partition and every byte, densely.
    pub fn is_full_access(&self, a: Ap) -> bool {
        let m = self.aps.loc[a];
        self.ap_is_plain(a)
            && self.aps.part_start[a] == 0
            && u16::from(self.aps.part_count[a]) == self.mems.partitions[m]
            && self.aps.offset[a] == 0
            && ap::is_contiguous(self.ap_dims(a))
            && self.ap_bytes_per_partition(a) == self.mems.bytes[m] as u64
    }

    /// `IsContiguous`: the bytes touched in each partition form one dense
    /// ascending run.
    pub fn is_contiguous(&self, a: Ap) -> bool {
        ap::is_contiguous(self.ap_dims(a))
    }

    /// The passes over loop `l` per entry that the cost models count: its
    /// trip count, or 1 when it is unknown ([`UNKNOWN_TRIP`]: the models
    /// cannot know it, and counting it as `u32::MAX` passes would make
    /// anything inside it look four billion times dearer than it is).
    #[inline]
    pub fn counted_trip(&self, l: Loop) -> u64 {
        match self.loops.trip[l] {
            UNKNOWN_TRIP => 1,
            t => t as u64,
        }
    }

    /// True when an allocator (or the input) has placed the location.
    #[inline]
    pub fn is_placed(&self, m: MemLoc) -> bool {
        self.mems.offset[m] != UNPLACED
    }

    /// Bytes the location occupies in its space: per partition on chip,
    /// partitions × bytes in DRAM.
    pub fn mem_footprint(&self, m: MemLoc) -> u64 {
        match self.mems.space[m] {
            Space::Dram => self.mems.partitions[m] as u64 * self.mems.bytes[m] as u64,
            _ => self.mems.bytes[m] as u64,
        }
    }

    /// Element size of a location in bytes.
    #[inline]
    pub fn elem_size(&self, m: MemLoc) -> u8 {
        self.mems.dtype[m].size()
    }

    /// The reference's address spelling: `SB<p,b>`, `PSUM<p,bank k>`,
    /// `DRAM<a>`, or `SB<?>` when unplaced.
    pub fn address(&self, m: MemLoc) -> Address {
        Address {
            space: self.mems.space[m],
            base_partition: self.mems.base_partition[m],
            offset: self.mems.offset[m],
            bank: self.mems.bank[m],
            bank_bytes: self.target.psum_bank_bytes,
        }
    }

    /// Instructions of a block in order.
    pub fn block_insts(&self, b: Block) -> BlockInsts<'_> {
        BlockInsts {
            module: self,
            next: self.blocks.first[b],
        }
    }

    /// Blocks of a function in layout order.
    pub fn func_blocks(&self, f: Func) -> impl Iterator<Item = Block> {
        (self.funcs.first_block[f].index()..self.funcs.end_block[f].index()).map(Block::new)
    }

    /// Every linked instruction of the module in program order (functions,
    /// then blocks in layout order, then block order).
    pub fn program_order(&self) -> impl Iterator<Item = Inst> + '_ {
        self.blocks
            .name
            .keys()
            .flat_map(move |b| self.block_insts(b))
    }

    /// The innermost loop containing an instruction, or [`Loop::INVALID`].
    pub fn inst_loop(&self, i: Inst) -> Loop {
        let b = self.insts.block[i];
        if b.is_valid() {
            self.blocks.loop_[b]
        } else {
            Loop::INVALID
        }
    }

    /// Loop depth of an instruction (0 outside loops).
    pub fn inst_loop_depth(&self, i: Inst) -> u16 {
        let l = self.inst_loop(i);
        if l.is_valid() {
            self.loops.depth[l]
        } else {
            0
        }
    }
}

/// Iterator over a block's instructions.
#[derive(Debug, Clone)]
pub struct BlockInsts<'m> {
    module: &'m Module,
    next: Inst,
}

impl Iterator for BlockInsts<'_> {
    type Item = Inst;
    fn next(&mut self) -> Option<Inst> {
        if !self.next.is_valid() {
            return None;
        }
        let i = self.next;
        self.next = self.module.insts.next[i];
        Some(i)
    }
}
