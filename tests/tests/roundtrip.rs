//! Round trips of the text format and JSON, over generated modules of many
//! shapes and over every file under `examples/`; and no panic on truncated
//! or mutated input.
//!
//! The generator below builds modules through the core's public API (not
//! through text), so the printer is exercised on whatever the API can
//! express: every space, element size, alignment, flag, placement, opcode,
//! sub-operation, engine, queue, immediate, access-pattern form (full,
//! slice, general with negative strides and several dims) and loop nesting.

use std::path::{Path, PathBuf};

use tusk_core::ir::{
    ApSpec, Block, Dim, Engine, Func, InstFlags, InstSpec, Loop, MemFlags, MemLoc, Module, Opcode,
    Reg, RegFlags, Space, SubOp, UNKNOWN_TRIP,
};
use tusk_core::target::{Generation, Target};
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
        let mut elem = self.r.pick(&[1u8, 1, 2, 4, 8, 16]);
        while bytes % elem as u32 != 0 {
            elem /= 2;
        }
        m.set_elem_size(x, elem).unwrap();
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
        m.mems.flags[x] = flags;
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
        m.regs.flags[r] = flags;
        if self.r.chance(40) {
            m.regs.lane[r] = self.r.below(64) as u16;
        }
        self.regs.push(r);
    }

    /// A loop body (or function body): 1..=4 items, each a block or, above
    /// depth 3, a nested loop. Every loop gets at least one block.
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

    fn ap(&mut self, m: &Module) -> ApSpec {
        let x = self.r.pick(&self.mems);
        let parts = m.mems.partitions[x];
        let bytes = m.mems.bytes[x];
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

    fn inst(&mut self, m: &mut Module, b: Block) {
        let op = self.r.pick(&Opcode::ALL);
        let mut spec = InstSpec::new(op);
        spec.subop = match op {
            Opcode::ScalarAlu | Opcode::TensorTensor | Opcode::TensorScalar => {
                self.r.pick(&SubOp::ALL[1..11])
            }
            Opcode::Activation => self.r.pick(&SubOp::ALL[11..]),
            _ => SubOp::None,
        };
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
        let n_in = self.r.below(3) as usize;
        let n_out = self.r.below(2) as usize;
        let ins: Vec<ApSpec> = (0..n_in).map(|_| self.ap(m)).collect();
        let outs: Vec<ApSpec> = (0..n_out).map(|_| self.ap(m)).collect();
        let (mut uses, mut defs) = (Vec::new(), Vec::new());
        if !self.regs.is_empty() {
            for _ in 0..self.r.below(3) {
                uses.push(self.r.pick(&self.regs));
            }
            for _ in 0..self.r.below(2) {
                defs.push(self.r.pick(&self.regs));
            }
        }
        spec.inputs = &ins;
        spec.outputs = &outs;
        spec.uses = &uses;
        spec.defs = &defs;
        m.append_inst(b, &spec).unwrap();
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
    for seed in 0..300 {
        let m = Gen::module(seed);
        insts += m.num_live_insts();
        loops += m.num_loops();
        assert_round_trips(&format!("seed {seed}"), &text::print(&m));
    }
    // The generator really produced loops and instructions of every kind.
    assert!(insts > 1000 && loops > 50, "{insts} insts, {loops} loops");
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
