//! Round trips of the text format and JSON, over generated modules of many
//! shapes and over every file under `examples/`; and no panic on truncated
//! or mutated input.
//!
//! The generator below builds modules through the core's public API (not
//! through text), so the printer is exercised on whatever the API can
//! express: every space, element type and size, alignment, flag, placement,
//! opcode (with operands that obey its shape rule), sub-operation, engine,
//! queue, immediate, access-pattern form (full, slice, general with
//! negative strides and several dims; loop terms, register terms with
//! windows, partition steps and broadcasts) and loop nesting (named and
//! unnamed loops).

use std::path::{Path, PathBuf};

use tusk_core::ir::{
    ApExt, ApSpec, Block, DType, Dim, Engine, Func, InstFlags, InstSpec, IvTerm, Loop, MemFlags,
    MemLoc, Module, Opcode, Reg, RegFlags, RegTerm, Space, SubOp, UNKNOWN_TRIP,
};
use tusk_core::target::Generation;
use tusk_core::Target;
use tusk_shim::{json, text};

/// xorshift64*: deterministic, so a failing seed reproduces.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

struct Gen {
    r: Rng,
    mems: Vec<MemLoc>,
    regs: Vec<Reg>,
    labels: u32,
    loops: u32,
}

/// A pattern's shape: partitions and elements per partition.
#[derive(Copy, Clone, Debug)]
struct Shape {
    parts: u16,
    elems: u32,
}

impl Gen {
    fn module(seed: u64) -> Module {
        let mut r = Rng::new(seed);
        let gen = r.pick(&[Generation::Trn1, Generation::Trn2, Generation::Trn3]);
        let mut target = Target::preset(gen);
        if r.chance(30) {
            target.set("max-regs", 62).unwrap();
        }
        if r.chance(20) {
            target.set("psum-banks", 7).unwrap();
        }
        let mut m = Module::new(target);
        let mut g = Gen {
            r,
            mems: Vec::new(),
            regs: Vec::new(),
            labels: 0,
            loops: 0,
        };
        let n_mems = 1 + g.r.below(12);
        for i in 0..n_mems {
            g.mem(&mut m, i);
        }
        for i in 0..g.r.below(6) {
            g.reg(&mut m, i);
        }
        for fi in 0..1 + g.r.below(3) {
            let f = m.add_func(&format!("f{fi}")).unwrap();
            g.body(&mut m, f, Loop::INVALID, 0);
        }
        m.check_structure().unwrap();
        m
    }

    fn mem(&mut self, m: &mut Module, i: u64) {
        let space = self
            .r
            .pick(&[Space::Dram, Space::Sb, Space::Sb, Space::Psum]);
        let parts = match space {
            Space::Dram => 1 + self.r.below(200) as u16,
            _ => self.r.pick(&[1u16, 32, 64, 96, 128]),
        };
        let bytes = self.r.pick(&[8u32, 64, 100, 2048, 4096, 65536]);
        let x = m
            .add_mem(&format!("t{i}.{}", space.keyword()), space, parts, bytes)
            .unwrap();
        if self.r.chance(40) {
            // Typed: any type whose size divides the row.
            let t = loop {
                let t = self.r.pick(&DType::TYPED);
                if bytes % t.size() as u32 == 0 {
                    break t;
                }
            };
            m.set_dtype(x, t).unwrap();
        } else {
            let mut elem = self.r.pick(&[1u8, 1, 2, 4, 8, 16]);
            while bytes % elem as u32 != 0 {
                elem /= 2;
            }
            m.set_elem_size(x, elem).unwrap();
        }
        if self.r.chance(25) {
            m.set_align(x, self.r.pick(&[1u32, 2, 64, 512, 1 << 20]))
                .unwrap();
        }
        let mut flags = MemFlags::empty();
        for f in [
            MemFlags::INPUT,
            MemFlags::OUTPUT,
            MemFlags::PINNED,
            MemFlags::SPILL,
            MemFlags::INTERNAL,
            MemFlags::RELOAD,
        ] {
            if self.r.chance(15) {
                flags |= f;
            }
        }
        m.set_mem_flags(x, flags);
        if self.r.chance(50) {
            let (p, off) = match space {
                Space::Dram => (0, self.r.below(1 << 40)),
                Space::Sb => (self.r.pick(&[0u16, 32, 64, 96]), self.r.below(200_000)),
                Space::Psum => {
                    let bank = self.r.below(8);
                    let inside = if self.r.chance(50) {
                        0
                    } else {
                        self.r.below(2048)
                    };
                    (0, bank * 2048 + inside)
                }
            };
            m.place(x, p, off);
        }
        self.mems.push(x);
    }

    fn reg(&mut self, m: &mut Module, i: u64) {
        let r = m
            .add_reg(&format!("r_{i}"), 1 + self.r.below(2) as u8)
            .unwrap();
        let mut flags = RegFlags::empty();
        if self.r.chance(20) {
            flags |= RegFlags::PINNED;
        }
        if self.r.chance(20) {
            flags |= RegFlags::SPILL_TEMP;
        }
        m.set_reg_flags(r, flags);
        if self.r.chance(40) {
            m.set_reg_lane(r, self.r.below(64) as u16);
        }
        self.regs.push(r);
    }

    /// A loop body (or function body): 1..=4 items, each a block or, above
    /// depth 3, a nested loop (most named, with unique names, so that a
    /// term always names the loop it was made for). Every loop gets at
    /// least one block.
    fn body(&mut self, m: &mut Module, f: Func, lp: Loop, depth: u32) {
        let _ = f;
        for _ in 0..1 + self.r.below(4) {
            if depth < 4 && self.r.chance(30) {
                let trip = if self.r.chance(20) {
                    UNKNOWN_TRIP
                } else {
                    self.r.below(1000) as u32
                };
                let l = m.add_loop(lp, trip).unwrap();
                if self.r.chance(70) {
                    self.loops += 1;
                    m.set_loop_name(l, &format!("k{}", self.loops)).unwrap();
                }
                self.body(m, f, l, depth + 1);
            } else {
                self.labels += 1;
                let b = m.add_block(&format!("b{}", self.labels), lp).unwrap();
                for _ in 0..self.r.below(7) {
                    self.inst(m, b);
                }
            }
        }
    }

    /// Any pattern of any location (the shape is what it is).
    fn ap(&mut self, m: &Module) -> ApSpec {
        let x = self.r.pick(&self.mems);
        let parts = m.mems().partitions[x];
        let bytes = m.mems().bytes[x];
        match self.r.below(3) {
            0 => tusk_core::ir::full_ap(m, x),
            1 => {
                let p0 = self.r.below(parts as u64) as u16;
                let pn = 1 + self.r.below((parts - p0) as u64) as u16;
                let lo = self.r.below(bytes as u64) as u32;
                let hi = lo + 1 + self.r.below((bytes - lo) as u64) as u32;
                tusk_core::ir::slice_ap(m, x, p0, pn, lo, hi)
            }
            _ => {
                let elem = self.r.pick(&[1u8, 2, 4]); // every location has at least 8 bytes
                let max_elems = (bytes / elem as u32) as u64;
                let count = 1 + self.r.below(max_elems.min(16));
                let mut stride = 1 + self.r.below(3) as i64;
                if (count - 1) as i64 * stride + 1 > max_elems as i64 {
                    stride = 1;
                }
                let reach = (count as i64 - 1) * stride * elem as i64;
                let room = bytes as i64 - reach - elem as i64;
                let mut offset = self.r.below(room as u64 + 1) as i64;
                if self.r.chance(30) {
                    stride = -stride;
                    offset += reach;
                }
                let mut dims = arrayvec::ArrayVec::new();
                if self.r.chance(30) {
                    dims.push(Dim::new(self.r.below(1000) as i32, 1));
                }
                dims.push(Dim::new(stride as i32, count as u32));
                let p0 = self.r.below(parts as u64) as u16;
                ApSpec {
                    loc: x,
                    part_start: p0,
                    part_count: 1 + self.r.below((parts - p0) as u64) as u16,
                    offset: offset as u32,
                    elem_size: elem,
                    dims,
                    ext: Default::default(),
                }
            }
        }
    }

    fn shape_of(s: &ApSpec) -> Shape {
        Shape {
            parts: s.part_count,
            elems: s.dims.iter().map(|d| d.count).product(),
        }
    }

    /// A pattern of shape `sh` on a location `fits` accepts (in `space`
    /// when given), at a random place, in one dim or two (the outer one
    /// maybe reversed); `None` when no location can hold it.
    fn shaped(
        &mut self,
        m: &Module,
        space: Option<Space>,
        sh: Shape,
        fits: impl Fn(DType) -> bool,
    ) -> Option<ApSpec> {
        self.shaped_in(m, space, sh, None, fits)
    }

    /// [`Self::shaped`] in elements of `elem` bytes when given (a typed
    /// location only when its type has that size).
    fn shaped_in(
        &mut self,
        m: &Module,
        space: Option<Space>,
        sh: Shape,
        elem: Option<u8>,
        fits: impl Fn(DType) -> bool,
    ) -> Option<ApSpec> {
        let n = self.mems.len();
        let first = self.r.below(n as u64) as usize;
        for k in 0..n {
            let x = self.mems[(first + k) % n];
            let (parts, bytes, ty) = (m.mems().partitions[x], m.mems().bytes[x], m.mems().dtype[x]);
            if space.is_some_and(|s| s != m.mems().space[x]) || parts < sh.parts || !fits(ty) {
                continue;
            }
            let elem = match elem {
                Some(e) if !ty.is_raw() && ty.size() != e => continue,
                Some(e) => e,
                None if ty.is_raw() => self.r.pick(&[1u8, 2, 4]),
                None => ty.size(),
            };
            let span = sh.elems as u64 * elem as u64;
            if span == 0 || span > bytes as u64 {
                continue;
            }
            let slots = (bytes as u64 - span) / elem as u64;
            let offset = (self.r.below(slots + 1) * elem as u64) as u32;
            let mut dims = arrayvec::ArrayVec::new();
            let inner = [4u32, 8, 2]
                .into_iter()
                .find(|&d| sh.elems % d == 0 && sh.elems > d);
            match inner {
                Some(b) if self.r.chance(40) => {
                    let a = sh.elems / b;
                    if self.r.chance(30) {
                        // Rows in reverse order.
                        dims.push(Dim::new(-(b as i32), a));
                        dims.push(Dim::new(1, b));
                        let offset = offset + (a - 1) * b * elem as u32;
                        return Some(self.placed_ap(x, parts, sh, offset, elem, dims));
                    }
                    dims.push(Dim::new(b as i32, a));
                    dims.push(Dim::new(1, b));
                }
                _ => dims.push(Dim::new(1, sh.elems)),
            }
            return Some(self.placed_ap(x, parts, sh, offset, elem, dims));
        }
        None
    }

    fn placed_ap(
        &mut self,
        x: MemLoc,
        parts: u16,
        sh: Shape,
        offset: u32,
        elem: u8,
        dims: arrayvec::ArrayVec<Dim, 5>,
    ) -> ApSpec {
        ApSpec {
            loc: x,
            part_start: self.r.below((parts - sh.parts) as u64 + 1) as u16,
            part_count: sh.parts,
            offset,
            elem_size: elem,
            dims,
            ext: Default::default(),
        }
    }

    /// A random shape for a pattern to have.
    fn any_shape(&mut self) -> Shape {
        Shape {
            parts: self.r.pick(&[1u16, 2, 16, 32, 64, 128]),
            elems: self.r.pick(&[1u32, 2, 4, 8, 16, 32, 64]),
        }
    }

    /// Operands for `op` that obey its shape rule (and the rest of `spec`:
    /// subop, uses), or `None` when no locations can hold them.
    fn shaped_operands(
        &mut self,
        m: &Module,
        op: Opcode,
        spec: &mut InstSpec<'_>,
        uses: &mut Vec<Reg>,
    ) -> Option<(Vec<ApSpec>, Vec<ApSpec>)> {
        let any = |_: DType| true;
        let float = |t: DType| t.is_float() || t.is_raw();
        Some(match op {
            Opcode::Load | Opcode::Save | Opcode::DmaCopy => {
                let src = self.ap(m);
                let sh = Self::shape_of(&src);
                let bytes = sh.elems * src.elem_size as u32;
                let ty = m.mems().dtype[src.loc];
                // The other side: the same bytes per partition, in bytes
                // or in elements of a compatible type.
                let same = move |t: DType| t == ty || t.is_raw() || ty.is_raw();
                let bytewise = Shape {
                    parts: sh.parts,
                    elems: bytes,
                };
                let dst = match self.shaped_in(m, None, bytewise, Some(1), same) {
                    Some(d) => d,
                    None => self.shaped_in(m, None, sh, Some(src.elem_size), same)?,
                };
                (vec![src], vec![dst])
            }
            Opcode::TensorCopy | Opcode::TensorScan | Opcode::TensorTensor => {
                let sh = self.any_shape();
                let k = match op {
                    Opcode::TensorCopy => 1,
                    Opcode::TensorTensor => 2,
                    _ if spec.subop == SubOp::MulAdd => 2,
                    _ => 1,
                };
                let mut ins = Vec::new();
                for _ in 0..k {
                    ins.push(self.shaped(m, None, sh, any)?);
                }
                (ins, vec![self.shaped(m, None, sh, any)?])
            }
            Opcode::Activation => {
                let sh = self.any_shape();
                let mut ins = vec![self.shaped(m, None, sh, any)?];
                for _ in 0..self.r.below(3) {
                    let extra = if self.r.chance(50) {
                        Shape { elems: 1, ..sh }
                    } else {
                        sh
                    };
                    ins.push(self.shaped(m, None, extra, any)?);
                }
                (ins, vec![self.shaped(m, None, sh, any)?])
            }
            Opcode::TensorScalar => {
                let sh = self.any_shape();
                let mut ins = vec![self.shaped(m, None, sh, any)?];
                if self.regs.is_empty() || self.r.chance(40) {
                    uses.clear();
                    ins.push(self.shaped(m, None, Shape { elems: 1, ..sh }, any)?);
                } else if uses.is_empty() {
                    uses.push(self.r.pick(&self.regs));
                }
                (ins, vec![self.shaped(m, None, sh, any)?])
            }
            Opcode::TensorReduce => {
                let sh = self.any_shape();
                let out = Shape {
                    elems: self.r.pick(&[1u32, 2, 4]).min(sh.elems),
                    ..sh
                };
                let out = if sh.elems % out.elems == 0 {
                    out
                } else {
                    Shape { elems: 1, ..sh }
                };
                (
                    vec![self.shaped(m, None, sh, any)?],
                    vec![self.shaped(m, None, out, any)?],
                )
            }
            Opcode::Matmul => {
                let (k, mm, n) = (
                    self.r.pick(&[1u16, 32, 64, 128]),
                    self.r.pick(&[1u32, 16, 64, 128]),
                    self.r.pick(&[1u32, 8, 64, 512]),
                );
                let st = self.shaped(
                    m,
                    None,
                    Shape {
                        parts: k,
                        elems: mm,
                    },
                    float,
                )?;
                let mv = self.shaped(m, None, Shape { parts: k, elems: n }, float)?;
                let out = self.shaped(
                    m,
                    Some(Space::Psum),
                    Shape {
                        parts: mm as u16,
                        elems: n,
                    },
                    |t| t == DType::F32 || t.is_raw(),
                )?;
                let mut ins = vec![st, mv];
                if self.r.chance(30) {
                    // The accumulator: the output read again.
                    ins.push(out.clone());
                }
                (ins, vec![out])
            }
            Opcode::Transpose => {
                let sh = Shape {
                    parts: self.r.pick(&[1u16, 32, 128]),
                    elems: self.r.pick(&[1u32, 16, 128]),
                };
                let src = self.shaped(m, Some(Space::Sb), sh, any)?;
                let ty = m.mems().dtype[src.loc];
                let out = self.shaped(
                    m,
                    Some(Space::Psum),
                    Shape {
                        parts: sh.elems as u16,
                        elems: sh.parts as u32,
                    },
                    |t| t == ty || t == DType::F32 || t.is_raw(),
                )?;
                (vec![src], vec![out])
            }
            Opcode::Memset => (Vec::new(), vec![self.ap(m)]),
            _ => return None,
        })
    }

    /// Maybe makes `s` move: a loop term on an enclosing named loop of
    /// known trip, a register term, a partition step. Kept only when the
    /// pattern stays inside its location at every iteration.
    fn movement(
        &mut self,
        m: &Module,
        inner: Loop,
        n_use: usize,
        read: bool,
        op: Opcode,
        s: &mut ApSpec,
    ) {
        let mut ext = ApExt::default();
        let mut named = Vec::new();
        let mut l = inner;
        while l.is_valid() {
            if m.loop_name(l).is_some() && m.loops().trip[l] != UNKNOWN_TRIP {
                named.push(l);
            }
            l = m.loops().parent[l];
        }
        if !named.is_empty() && self.r.chance(30) {
            let lp = self.r.pick(&named);
            let span = s.elem_size as i64 * self.r.pick(&[1i64, 4, 16]);
            let parts: i16 = if self.r.chance(20) { 1 } else { 0 };
            let bytes = if self.r.chance(20) { -span } else { span };
            // A wrapped term (a tile buffered 2 or 3 deep) now and then.
            let wrap = if self.r.chance(15) {
                self.r.pick(&[2u16, 3])
            } else {
                0
            };
            ext.terms.push(IvTerm {
                wrap,
                ..IvTerm::affine(lp, parts, bytes)
            });
        }
        // A tensor_scalar with a column reads no register: a register
        // term would make its column a second input beside a register.
        let column = op == Opcode::TensorScalar && n_use == 0;
        if n_use > 0 && !column && self.r.chance(20) {
            let row = m.mems().bytes[s.loc];
            let lo = self.r.below(row as u64) as u32;
            ext.reg = Some(RegTerm {
                use_index: self.r.below(n_use as u64) as u8,
                scale: self.r.pick(&[1i32, 4, -2, 512]),
                window_lo: lo,
                window_hi: lo + 1 + self.r.below((row - lo) as u64) as u32,
            });
        }
        if self.r.chance(15) {
            ext.pstep = Some(match m.mems().space[s.loc] {
                Space::Dram => self.r.pick(&[0u32, 1, 4, 64]).max(1),
                _ if read => self.r.pick(&[0u32, 1]),
                _ => 1,
            });
        }
        if ext.is_plain() {
            return;
        }
        let ok = tusk_core::ir::pattern::check(m, inner, n_use, read, s.plain(), &ext);
        if ok.is_ok() {
            s.ext = ext;
        }
    }

    fn inst(&mut self, m: &mut Module, b: Block) {
        let op = self.r.pick(&Opcode::ALL);
        let mut spec = InstSpec::new(op);
        let subs: Vec<SubOp> = SubOp::ALL.iter().copied().filter(|s| s.fits(op)).collect();
        spec.subop = self.r.pick(&subs);
        if self.r.chance(15) {
            spec.engine = self.r.pick(&Engine::ALL);
        }
        if op.is_dma() || op == Opcode::SyncWait || self.r.chance(5) {
            spec.queue = self.r.below(20) as u8;
        }
        for f in [
            InstFlags::IN_PLACE,
            InstFlags::CAN_READ_UNINIT,
            InstFlags::SPILL,
            InstFlags::RELOAD,
            InstFlags::SYNTHETIC,
        ] {
            if self.r.chance(10) {
                spec.flags |= f;
            }
        }
        if matches!(op, Opcode::ScalarImm | Opcode::Memset) || self.r.chance(10) {
            spec.imm = match self.r.below(4) {
                0 => 0,
                1 => i64::MIN,
                2 => i64::MAX,
                _ => self.r.below(2000) as i64 - 1000,
            };
        }
        let (mut uses, mut defs) = (Vec::new(), Vec::new());
        if !self.regs.is_empty() {
            for _ in 0..self.r.below(3) {
                uses.push(self.r.pick(&self.regs));
            }
            for _ in 0..self.r.below(2) {
                defs.push(self.r.pick(&self.regs));
            }
        }
        let (mut ins, mut outs) = match self.shaped_operands(m, op, &mut spec, &mut uses) {
            Some(io) => io,
            None if op.is_scalar() => {
                let n_in = self.r.below(3) as usize;
                let n_out = self.r.below(2) as usize;
                (
                    (0..n_in).map(|_| self.ap(m)).collect(),
                    (0..n_out).map(|_| self.ap(m)).collect(),
                )
            }
            // No location can hold the operands: a scalar instruction.
            None => {
                spec = InstSpec::new(Opcode::ScalarImm);
                (Vec::new(), Vec::new())
            }
        };
        let inner = m.blocks().loop_[b];
        let n_use = uses.len();
        let n_in = ins.len();
        for (k, s) in ins.iter_mut().chain(outs.iter_mut()).enumerate() {
            self.movement(m, inner, n_use, k < n_in, spec.opcode, s);
        }
        spec.inputs = &ins;
        spec.outputs = &outs;
        spec.uses = &uses;
        spec.defs = &defs;
        let i = m.append_inst(b, &spec).unwrap();
        if let Err(e) = tusk_core::ir::shape::check(m, i) {
            panic!("the test's generator broke the shape rule of {op}: {e}");
        }
    }
}

/// print → parse → print is the identity, and so is print → JSON → print.
fn assert_round_trips(what: &str, printed: &str) {
    let back = text::parse_str(printed)
        .unwrap_or_else(|e| panic!("{what}: printed text does not parse: {e}\n{printed}"));
    back.check_structure().unwrap();
    let again = text::print(&back);
    assert_eq!(again, printed, "{what}: print(parse(x)) != x");
    let js = json::to_json_string(&back);
    let from_json = json::parse_json(js.as_bytes())
        .unwrap_or_else(|e| panic!("{what}: JSON does not parse back: {e}\n{js}"));
    assert_eq!(
        text::print(&from_json),
        printed,
        "{what}: text → JSON → text"
    );
}

#[test]
fn generated_modules_round_trip() {
    let mut insts = 0;
    let mut loops = 0;
    // Typed locations, named loops, loop terms, register terms, partition
    // steps, broadcasts, and each opcode.
    let mut seen = [0usize; 6];
    let mut ops = [0usize; Opcode::ALL.len()];
    for seed in 0..300 {
        let m = Gen::module(seed);
        insts += m.num_live_insts();
        loops += m.num_loops();
        seen[0] += m.mems().dtype.values().filter(|t| !t.is_raw()).count();
        seen[1] += (0..m.num_loops())
            .filter(|&l| m.loop_name(Loop::new(l)).is_some())
            .count();
        for i in m.program_order() {
            ops[m.insts().opcode[i] as usize] += 1;
            for a in m.all_aps(i) {
                let x = m.ap_ext(a);
                seen[2] += usize::from(!x.terms.is_empty());
                seen[3] += usize::from(x.reg.is_some());
                seen[4] += usize::from(x.pstep.is_some_and(|p| p > 0));
                seen[5] += usize::from(x.pstep == Some(0));
            }
        }
        assert_round_trips(&format!("seed {seed}"), &text::print(&m));
    }
    // The generator really produced loops and instructions of every kind.
    assert!(insts > 1000 && loops > 50, "{insts} insts, {loops} loops");
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    for op in Opcode::ALL {
        assert!(ops[op as usize] > 0, "no {op}");
    }
}

fn example_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "tusk") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A broken example whose planted violation is a pattern outside its
/// location: the reader refuses it (std-shim/tests/driver.rs checks where).
fn refused_by_design(src: &[u8]) -> bool {
    src.starts_with(b"; expect: pattern-outside ")
}

#[test]
fn every_example_round_trips() {
    let files = example_files();
    if files.is_empty() {
        println!("no examples/*.tusk yet: nothing to round-trip");
        return;
    }
    for p in &files {
        let src = std::fs::read(p).unwrap();
        if refused_by_design(&src) {
            continue;
        }
        let m = text::parse(&src).unwrap_or_else(|e| panic!("{}:{e}", p.display()));
        let canonical = text::print(&m);
        assert_round_trips(&p.display().to_string(), &canonical);
    }
    println!("{} examples round-trip", files.len());
}

/// Prefixes a module of `len` bytes is cut to: every one up to
/// [`EVERY_PREFIX_UP_TO`] bytes, else [`SPREAD`] spread evenly (parsing every
/// prefix costs the square of the length; the kernels run to 60 KB).
fn cuts(len: usize) -> impl Iterator<Item = usize> {
    let step = if len <= EVERY_PREFIX_UP_TO {
        1
    } else {
        len.div_ceil(SPREAD)
    };
    (0..len).step_by(step)
}

/// See [`cuts`].
const EVERY_PREFIX_UP_TO: usize = 8192;
/// See [`cuts`].
const SPREAD: usize = 2048;

/// Every prefix of a real module (a spread of them for the large ones), and
/// many random byte mutations of it, parse or fail with a positioned error;
/// none panics.
#[test]
fn truncated_and_mutated_inputs_never_panic() {
    let mut sources: Vec<Vec<u8>> = example_files()
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    sources.push(text::print(&Gen::module(7)).into_bytes());
    sources.push(text::print(&Gen::module(11)).into_bytes());
    let mut r = Rng::new(42);
    let mut errors = 0;
    for src in &sources {
        for cut in cuts(src.len()) {
            if let Err(e) = text::parse(&src[..cut]) {
                assert!(e.line >= 1 && e.col >= 1);
                errors += 1;
            }
        }
        for _ in 0..300 {
            let mut s = src.clone();
            for _ in 0..1 + r.below(4) {
                if s.is_empty() {
                    break;
                }
                let i = r.below(s.len() as u64) as usize;
                match r.below(3) {
                    0 => s[i] = r.next() as u8,
                    1 => {
                        s.remove(i);
                    }
                    _ => s.insert(i, b"%$@[]{}<>:,=+-?;\n0x9 "[r.below(20) as usize]),
                }
            }
            if let Err(e) = text::parse(&s) {
                assert!(e.line >= 1 && e.col >= 1);
                assert!(!e.to_string().is_empty());
            }
        }
    }
    assert!(errors > 0);
}
