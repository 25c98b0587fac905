//! A builder over [`Module`], so that firmware and tests build programs
//! without the text format. It keeps a cursor (the current function, block
//! and open loops) and makes access patterns from short descriptions.

use arrayvec::ArrayVec;

use super::ap::{Dim, MAX_DIMS};
use super::module::{ApSpec, Block, Func, Inst, InstSpec, IrError, Loop, MemLoc, Module, Reg};
use super::types::{InstFlags, Opcode, Space, SubOp};

/// Most loops open at once in one builder.
pub const MAX_OPEN_LOOPS: usize = 64;

/// Builds a module front to back.
///
/// Declarations first, then functions: each function's instructions go to
/// its current block, and loops nest by `begin_loop` / `end_loop`.
/// [`Builder::finish`] refuses an unbalanced or empty program.
///
/// ```
/// use tusk_core::ir::{InstFlags, MemFlags, Opcode, Space, SubOp};
/// use tusk_core::{Builder, Module, Target};
///
/// let mut m = Module::new(Target::default());
/// let mut b = Builder::new(&mut m);
/// let x = b.mem("x", Space::Dram, 128, 512, 4, MemFlags::INPUT)?;
/// let y = b.mem("y", Space::Dram, 128, 512, 4, MemFlags::OUTPUT)?;
/// let t = b.mem("t", Space::Sb, 128, 512, 4, MemFlags::empty())?;
/// b.func("main")?;
/// b.load(t, x, 0)?;
/// // Four rounds of exp in place, as a loop with a known trip count.
/// b.begin_loop(4)?;
/// b.compute(Opcode::Activation, SubOp::Exp, t, &[t], InstFlags::empty())?;
/// b.end_loop()?;
/// b.save(y, t, 0)?;
/// b.finish()?;
/// assert_eq!(m.mem_name(t), "t");
/// assert_eq!(m.program_order().count(), 3);
///
/// // A loop left open is an error value, not a panic.
/// let mut m = Module::new(Target::default());
/// let mut b = Builder::new(&mut m);
/// b.func("main")?;
/// b.begin_loop(2)?;
/// assert!(b.finish().is_err());
/// # Ok::<(), tusk_core::ir::IrError>(())
/// ```
#[derive(Debug)]
pub struct Builder<'m> {
    module: &'m mut Module,
    func: Func,
    block: Block,
    loops: ArrayVec<Loop, MAX_OPEN_LOOPS>,
    /// True when the next instruction must open a fresh block (after a loop
    /// opens or closes).
    need_block: bool,
    blocks_made: u32,
}

impl<'m> Builder<'m> {
    /// A builder appending to `module`.
    pub fn new(module: &'m mut Module) -> Self {
        let blocks_made = module.num_blocks() as u32;
        Builder {
            module,
            func: Func::INVALID,
            block: Block::INVALID,
            loops: ArrayVec::new(),
            need_block: true,
            blocks_made,
        }
    }

    /// The module being built.
    pub fn module(&mut self) -> &mut Module {
        self.module
    }

    /// Declares a location with element size and flags.
    pub fn mem(
        &mut self,
        name: &str,
        space: Space,
        partitions: u16,
        bytes: u32,
        elem: u8,
        flags: super::types::MemFlags,
    ) -> Result<MemLoc, IrError> {
        let m = self.module.add_mem(name, space, partitions, bytes)?;
        self.module.set_elem_size(m, elem)?;
        self.module.set_mem_flags(m, flags);
        Ok(m)
    }

    /// Declares a register.
    pub fn reg(&mut self, name: &str, lanes: u8) -> Result<Reg, IrError> {
        self.module.add_reg(name, lanes)
    }

    /// Starts a function.
    pub fn func(&mut self, name: &str) -> Result<Func, IrError> {
        if !self.loops.is_empty() {
            return Err(IrError::Unbalanced);
        }
        self.func = self.module.add_func(name)?;
        self.need_block = true;
        Ok(self.func)
    }

    /// Starts a labeled block at the cursor.
    pub fn block(&mut self, label: &str) -> Result<Block, IrError> {
        let l = self.loops.last().copied().unwrap_or(Loop::INVALID);
        self.block = self.module.add_block(label, l)?;
        self.blocks_made += 1;
        self.need_block = false;
        Ok(self.block)
    }

    /// Opens a loop (`trip` = [`super::module::UNKNOWN_TRIP`] when unknown).
    pub fn begin_loop(&mut self, trip: u32) -> Result<Loop, IrError> {
        let parent = self.loops.last().copied().unwrap_or(Loop::INVALID);
        let l = self.module.add_loop(parent, trip)?;
        self.loops.try_push(l).map_err(|_| IrError::Full {
            what: "open loops",
            limit: MAX_OPEN_LOOPS as u64,
        })?;
        self.need_block = true;
        Ok(l)
    }

    /// Closes the innermost open loop.
    pub fn end_loop(&mut self) -> Result<(), IrError> {
        self.loops.pop().ok_or(IrError::Unbalanced)?;
        self.need_block = true;
        Ok(())
    }

    /// Checks that every loop was closed.
    pub fn finish(&self) -> Result<(), IrError> {
        if self.loops.is_empty() {
            Ok(())
        } else {
            Err(IrError::Unbalanced)
        }
    }

    fn ensure_block(&mut self) -> Result<Block, IrError> {
        if self.need_block || !self.block.is_valid() {
            let mut label: heapless::String<24> = heapless::String::new();
            let _ = core::fmt::write(&mut label, format_args!("block{}", self.blocks_made));
            self.block(&label)?;
        }
        Ok(self.block)
    }

    /// Appends an instruction at the cursor.
    pub fn inst(&mut self, spec: &InstSpec<'_>) -> Result<Inst, IrError> {
        let b = self.ensure_block()?;
        self.module.append_inst(b, spec)
    }

    /// The full access pattern of a location: all partitions, all bytes, one
    /// contiguous dim in elements.
    pub fn full(&self, m: MemLoc) -> ApSpec {
        full_ap(self.module, m)
    }

    /// A contiguous byte range `[lo, hi)` of partitions `[p0, p0 + pn)`.
    pub fn slice(&self, m: MemLoc, p0: u16, pn: u16, lo: u32, hi: u32) -> ApSpec {
        slice_ap(self.module, m, p0, pn, lo, hi)
    }

    /// `dst = op(srcs)` with default engine and no flags.
    pub fn op(
        &mut self,
        opcode: Opcode,
        outputs: &[ApSpec],
        inputs: &[ApSpec],
    ) -> Result<Inst, IrError> {
        let mut s = InstSpec::new(opcode);
        s.outputs = outputs;
        s.inputs = inputs;
        self.inst(&s)
    }

    /// A DMA load `dst = load src` on a queue.
    pub fn load(&mut self, dst: MemLoc, src: MemLoc, queue: u8) -> Result<Inst, IrError> {
        self.dma(Opcode::Load, dst, src, queue)
    }

    /// A DMA save `dst = save src` on a queue.
    pub fn save(&mut self, dst: MemLoc, src: MemLoc, queue: u8) -> Result<Inst, IrError> {
        self.dma(Opcode::Save, dst, src, queue)
    }

    /// A whole-location DMA `dst = opcode src` on a queue (load and save
    /// differ only in the opcode, which says which side is DRAM).
    fn dma(
        &mut self,
        opcode: Opcode,
        dst: MemLoc,
        src: MemLoc,
        queue: u8,
    ) -> Result<Inst, IrError> {
        let outs = [self.full(dst)];
        let ins = [self.full(src)];
        let spec = InstSpec {
            queue,
            outputs: &outs,
            inputs: &ins,
            ..InstSpec::new(opcode)
        };
        self.inst(&spec)
    }

    /// A compute instruction over full access patterns.
    pub fn compute(
        &mut self,
        opcode: Opcode,
        subop: SubOp,
        dst: MemLoc,
        srcs: &[MemLoc],
        flags: InstFlags,
    ) -> Result<Inst, IrError> {
        let outs = [self.full(dst)];
        let mut ins: ArrayVec<ApSpec, 4> = ArrayVec::new();
        for &s in srcs.iter().take(4) {
            ins.push(self.full(s));
        }
        let mut spec = InstSpec::new(opcode);
        spec.subop = subop;
        spec.flags = flags;
        spec.outputs = &outs;
        spec.inputs = &ins;
        self.inst(&spec)
    }

    /// A scalar instruction over registers.
    pub fn scalar(
        &mut self,
        opcode: Opcode,
        subop: SubOp,
        defs: &[Reg],
        uses: &[Reg],
        imm: i64,
    ) -> Result<Inst, IrError> {
        let mut spec = InstSpec::new(opcode);
        spec.subop = subop;
        spec.defs = defs;
        spec.uses = uses;
        spec.imm = imm;
        self.inst(&spec)
    }
}

/// The full access pattern of a location (see [`Builder::full`]).
pub fn full_ap(module: &Module, m: MemLoc) -> ApSpec {
    let elem = module.elem_size(m).max(1);
    let mut dims = ArrayVec::<Dim, MAX_DIMS>::new();
    dims.push(Dim::new(1, module.mems().bytes[m] / elem as u32));
    ApSpec {
        loc: m,
        part_start: 0,
        part_count: module.mems().partitions[m],
        offset: 0,
        elem_size: elem,
        dims,
        ext: Default::default(),
    }
}

/// A contiguous byte range of a partition range (see [`Builder::slice`]).
/// When the range is not a whole number of elements the pattern falls back
/// to byte elements.
pub fn slice_ap(module: &Module, m: MemLoc, p0: u16, pn: u16, lo: u32, hi: u32) -> ApSpec {
    let mut elem = module.elem_size(m).max(1);
    let len = hi.saturating_sub(lo);
    if len % elem as u32 != 0 || lo % elem as u32 != 0 {
        elem = 1;
    }
    let mut dims = ArrayVec::<Dim, MAX_DIMS>::new();
    dims.push(Dim::new(1, len / elem as u32));
    ApSpec {
        loc: m,
        part_start: p0,
        part_count: pn,
        offset: lo,
        elem_size: elem,
        dims,
        ext: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::types::MemFlags;
    use crate::target::Target;
    use crate::testing::{dram_io, exp, mem, tiles};

    #[test]
    fn builds_blocks_loops_and_lists() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let [x, y] = dram_io(&mut b, 128, 4096, 4);
        let [t, u] = tiles(&mut b, Space::Sb, ["t", "u"], 128, 4096, 4);
        b.func("main").unwrap();
        let i0 = b.load(t, x, 0).unwrap();
        b.begin_loop(4).unwrap();
        let i1 = exp(&mut b, u, t);
        b.end_loop().unwrap();
        let i2 = b.save(y, u, 1).unwrap();
        b.finish().unwrap();
        assert_eq!(m.num_blocks(), 3);
        let order: alloc::vec::Vec<_> = m.program_order().collect();
        assert_eq!(order, [i0, i1, i2]);
        assert_eq!(m.inst_loop_depth(i1), 1);
        assert_eq!(m.inst_loop_depth(i2), 0);
        let a = m.inputs(i1).next().unwrap();
        assert!(m.is_full_access(a));
        assert!(m.is_contiguous(a));
        assert_eq!(m.ap_bytes(a), 128 * 4096);
        m.check_structure().unwrap();
        assert_eq!(
            m.add_mem("t", Space::Sb, 1, 1),
            Err(IrError::Duplicate {
                what: "memory location"
            })
        );
    }

    #[test]
    fn pass_insertion_respects_the_reserve() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let t = mem(&mut b, "t", Space::Sb, 128, 64, 1, MemFlags::empty());
        b.func("f").unwrap();
        let i0 = b.op(Opcode::Memset, &[full_ap(b.module, t)], &[]).unwrap();
        // Fill the reserve exactly, then insertion must fail without growing.
        let spare = m.insts().opcode.capacity() - m.insts().opcode.len();
        for _ in 0..spare {
            let outs = [full_ap(&m, t)];
            let mut s = InstSpec::new(Opcode::Memset);
            s.outputs = &outs;
            if m.insert_after(i0, &s).is_err() {
                break;
            }
        }
        let outs = [full_ap(&m, t)];
        let mut s = InstSpec::new(Opcode::Memset);
        s.outputs = &outs;
        let cap = m.insts().opcode.capacity();
        assert!(matches!(m.insert_after(i0, &s), Err(IrError::Full { .. })));
        assert_eq!(m.insts().opcode.capacity(), cap);
        m.check_structure().unwrap();
    }

    #[test]
    fn remove_and_insert_keep_links() {
        let mut m = Module::new(Target::default());
        m.reserve(crate::ir::module::Capacity {
            insts: 8,
            aps: 16,
            dims: 80,
            ..Default::default()
        });
        let mut b = Builder::new(&mut m);
        let t = mem(&mut b, "t", Space::Sb, 128, 64, 1, MemFlags::empty());
        b.func("f").unwrap();
        let mk = |b: &mut Builder<'_>| {
            let o = [full_ap(b.module, t)];
            b.op(Opcode::Memset, &o, &[]).unwrap()
        };
        let a = mk(&mut b);
        let c = mk(&mut b);
        let outs = [full_ap(&m, t)];
        let mut s = InstSpec::new(Opcode::Memset);
        s.outputs = &outs;
        let x = m.insert_before(c, &s).unwrap();
        assert_eq!(m.program_order().collect::<alloc::vec::Vec<_>>(), [a, x, c]);
        m.remove_inst(a);
        assert_eq!(m.program_order().collect::<alloc::vec::Vec<_>>(), [x, c]);
        m.remove_inst(c);
        assert_eq!(m.program_order().collect::<alloc::vec::Vec<_>>(), [x]);
        m.check_structure().unwrap();
        assert_eq!(m.num_live_insts(), 1);
    }
}
