//! The parser: tokens in, a [`Module`] out, through the module's public
//! building API.
//!
//! No recursion: loop nesting is an explicit stack bounded by
//! `Module::limits.loop_depth`, so hostile nesting ends in a
//! [`ErrorKind::NestedTooDeeply`] error instead of a stack overflow. Operand
//! buffers are reused from one instruction to the next, and names are looked
//! up from byte slices of the source, so parsing allocates only what the
//! module itself stores.

use arrayvec::ArrayVec;
use tusk_core::ir::{
    full_ap, slice_ap, ApSpec, Block, Capacity, Dim, Func, InstSpec, Loop, MemFlags, Module,
    Opcode, Reg, Space, SubOp, MAX_DIMS, NO_BANK, NO_LANE, NO_PARTITION, UNKNOWN_TRIP,
};
use tusk_core::ir::{types, ApExt, DType, Engine, IvTerm, MemLoc, RegFlags, RegTerm, MAX_IV_TERMS};
use tusk_core::Target;

use super::error::{ErrorKind, ParseError};
use super::lexer::{Lexer, Tok, Token};
use super::source_map::{Kind, Offsets, SourceMap};

type Result<T> = std::result::Result<T, ParseError>;

/// Parses a module from validated UTF-8 text; with `positions`, also where
/// the text wrote each entity.
pub(super) fn parse_str(src: &str, positions: bool) -> Result<(Module, Option<SourceMap>)> {
    let mut lx = Lexer::new(src);
    let tok = lx.next_token()?;
    // Reserve from the input size (a canonical instruction line is 30 to 80
    // bytes), so the columns do not regrow and copy while parsing. The
    // estimate is proportional to the input, which the size limit bounds.
    // Capped at the module's limits; the pages are only touched when used.
    let n = src.len();
    let mut m = Module::new(Target::default());
    let lim = m.limits;
    let insts = (n / 48).min(lim.instructions as usize);
    // Declarations come before the first function, one per line: their
    // count sizes the location columns and the name table exactly (a
    // generated module has one location per 100 bytes of text, ten times
    // the size estimate, and every regrowth rehashed the whole table).
    let decl_end = src.find("\nfunc ").unwrap_or(n);
    let decls = bytecount_newlines(&src.as_bytes()[..decl_end]);
    m.reserve(Capacity {
        insts,
        aps: (n / 32).min(2 * insts),
        // Only multi-dimension patterns use the pool.
        dims: (n / 256).min(2 * insts),
        imms: insts / 8,
        ap_exts: 0,
        reg_operands: (n / 128).min(insts),
        mems: decls.max(n / 1024).min(lim.locations as usize),
        regs: (n / 4096).min(lim.registers as usize),
        blocks: n / 1024,
        loops: n / 4096,
        funcs: 1,
        // Twice the names the text declares: the table is sized from the
        // count, and the pipeline's headroom (spill copies and slots, DMA
        // temporaries: about as many names again at 5M) would otherwise
        // regrow it once parsed — a rehash of every name, 0.2 s at 5M.
        // Only the 4-byte slots double (the name bytes are reserved as
        // before); the pipeline ends at the same table either way.
        names: 2 * (decls + n / 512),
        name_bytes: decls * 8 + n / 128,
    });
    let mut p = Parser {
        lx,
        tok,
        m,
        ins: Vec::new(),
        outs: Vec::new(),
        uses: Vec::new(),
        defs: Vec::new(),
        label_stamp: Vec::new(),
        loops: Vec::new(),
        seen_func: false,
        names: NameCache::new(),
        offsets: positions.then(Box::default),
    };
    p.module()?;
    // The reservation above was an estimate; keep only what the module holds.
    p.m.shrink_to_fit();
    let map = p.offsets.map(|o| o.into_map(src));
    Ok((p.m, map))
}

/// Number of `\n` bytes (counted per chunk in a byte, which the compiler
/// vectorizes; a `usize` per byte does not).
pub(crate) fn bytecount_newlines(b: &[u8]) -> usize {
    b.chunks(255)
        .map(|c| c.iter().fold(0u8, |a, &x| a + (x == b'\n') as u8) as usize)
        .sum()
}

struct Parser<'a> {
    lx: Lexer<'a>,
    /// The current (not yet consumed) token.
    tok: Token,
    m: Module,
    ins: Vec<ApSpec>,
    outs: Vec<ApSpec>,
    uses: Vec<Reg>,
    defs: Vec<Reg>,
    /// Per name index: 1 + the function whose block label it is, or 0.
    label_stamp: Vec<u32>,
    /// Open loops of the current function, innermost last.
    loops: Vec<Loop>,
    seen_func: bool,
    /// Operand name resolution ahead of the module's name table.
    names: NameCache,
    /// Byte offsets of the entities, when positions were asked for.
    offsets: Option<Box<Offsets>>,
}

/// Slots of [`NameCache`] (a power of two; 2 × 16 KiB, stays in L2).
const NAME_CACHE_SLOTS: usize = 4096;

/// Resolves operand names without the module's name table in the common
/// cases: that table is as large as the module's names (tens of MB at
/// millions of locations), so every lookup there is a few cache misses,
/// which dominated parsing at scale. Two guesses are tried first, each
/// confirmed by comparing the candidate's interned name with the text
/// (names are unique per kind, so a match is exactly what the table would
/// answer): the location declared right after the highest one used so far
/// (generated and printed programs define tensors in declaration order),
/// and a direct-mapped cache of recently resolved names (reused operands:
/// inputs, weights, loop registers). A miss falls back to the table.
#[derive(Debug)]
struct NameCache {
    mems: KindCache,
    regs: KindCache,
}

/// The two guesses of [`NameCache`] for one kind of name, over raw ids.
#[derive(Debug)]
struct KindCache {
    /// Direct-mapped by [`name_slot`]; `u32::MAX` (an invalid id) when empty.
    slots: Vec<u32>,
    /// Highest id resolved so far (+1), 0 when none.
    next: u32,
}

fn name_slot(s: &str) -> usize {
    // FNV-1a over the short name; only spreads the cache slots.
    let mut h: u32 = 0x811c_9dc5;
    for &b in s.as_bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h as usize & (NAME_CACHE_SLOTS - 1)
}

impl KindCache {
    fn new() -> Self {
        KindCache {
            slots: vec![u32::MAX; NAME_CACHE_SLOTS],
            next: 0,
        }
    }

    /// The id named `name`: the next id, else the cached one, each
    /// confirmed by `is`, else `lookup` (the module's name table).
    fn resolve(
        &mut self,
        name: &str,
        is: impl Fn(u32) -> bool,
        lookup: impl FnOnce() -> Option<u32>,
    ) -> Option<u32> {
        let slot = name_slot(name);
        let found = if is(self.next) {
            self.next
        } else if is(self.slots[slot]) {
            self.slots[slot]
        } else {
            lookup()?
        };
        self.slots[slot] = found;
        self.next = self.next.max(found.saturating_add(1));
        Some(found)
    }
}

impl NameCache {
    fn new() -> Self {
        NameCache {
            mems: KindCache::new(),
            regs: KindCache::new(),
        }
    }

    fn mem(&mut self, m: &Module, name: &str) -> Option<MemLoc> {
        let is = |v: u32| {
            m.mems()
                .name
                .get(MemLoc::from_u32(v))
                .is_some_and(|&n| m.names().bytes(n) == name.as_bytes())
        };
        let lookup = || m.mem_by_name(name).map(MemLoc::as_u32);
        self.mems.resolve(name, is, lookup).map(MemLoc::from_u32)
    }

    fn reg(&mut self, m: &Module, name: &str) -> Option<Reg> {
        let is = |v: u32| {
            m.regs()
                .name
                .get(Reg::from_u32(v))
                .is_some_and(|&n| m.names().bytes(n) == name.as_bytes())
        };
        let lookup = || m.reg_by_name(name).map(Reg::as_u32);
        self.regs.resolve(name, is, lookup).map(Reg::from_u32)
    }
}

/// Words accepted after a location's shape.
const MEM_ATTRS: &str = "fp32 bf16 fp16 fp8e4m3 fp8e5m2 int32 int16 int8 uint8 elem align input output pinned spill internal reload, then `@ <address>`";
/// Words accepted after an instruction's operands.
const INST_ATTRS: &str = "queue engine inplace uninit spill reload synthetic";

impl<'a> Parser<'a> {
    // ------------------------------------------------------------------
    // Token plumbing

    /// Records that entity `index` of `kind` starts at byte `at` (only when
    /// positions were asked for).
    #[inline]
    fn note(&mut self, kind: Kind, index: usize, at: u32) {
        if let Some(o) = self.offsets.as_deref_mut() {
            o.record(kind, index, at);
        }
    }

    fn bump(&mut self) -> Result<()> {
        self.tok = self.lx.next_token()?;
        Ok(())
    }

    fn peek(&self) -> Result<Token> {
        let mut l = self.lx;
        l.next_token()
    }

    fn text(&self, t: &Token) -> &'a str {
        self.lx.text(t)
    }

    fn err_at(&self, at: u32, kind: ErrorKind) -> ParseError {
        ParseError::at(self.lx.src(), at as usize, kind)
    }

    fn err(&self, kind: ErrorKind) -> ParseError {
        self.err_at(self.tok.start, kind)
    }

    fn invalid(&self, at: u32, msg: String) -> ParseError {
        self.err_at(at, ErrorKind::Invalid(msg))
    }

    fn expected(&self, expected: &'static str) -> ParseError {
        self.err(ErrorKind::Expected {
            expected,
            found: self.lx.describe(&self.tok),
        })
    }

    fn expect(&mut self, kind: Tok, what: &'static str) -> Result<Token> {
        if self.tok.kind != kind {
            return Err(self.expected(what));
        }
        let t = self.tok;
        self.bump()?;
        Ok(t)
    }

    fn is_word(&self, w: &str) -> bool {
        self.tok.kind == Tok::Word && self.text(&self.tok) == w
    }

    fn expect_word(&mut self, w: &'static str, what: &'static str) -> Result<()> {
        if !self.is_word(w) {
            return Err(self.expected(what));
        }
        self.bump()
    }

    /// Ends a line: a newline (consumed) or the end of the file.
    fn eol(&mut self) -> Result<()> {
        match self.tok.kind {
            Tok::Newline => self.bump(),
            Tok::Eof => Ok(()),
            _ => Err(self.expected("the end of the line")),
        }
    }

    fn skip_newlines(&mut self) -> Result<()> {
        while self.tok.kind == Tok::Newline {
            self.bump()?;
        }
        Ok(())
    }

    /// A number in `min..=max`, consumed (both signs lexed alike, so the
    /// range check alone decides; `i128` holds every u64 and its negation).
    fn number_in(&mut self, what: &'static str, min: i128, max: i128) -> Result<i128> {
        let t = self.tok;
        let value = match t.kind {
            Tok::Int => t.value as i128,
            Tok::NegInt => -(t.value as i128),
            _ => return Err(self.expected(what_number(what))),
        };
        if value < min || value > max {
            return Err(self.err(ErrorKind::OutOfRange {
                what,
                value,
                min,
                max,
            }));
        }
        self.bump()?;
        Ok(value)
    }

    /// A non-negative number in `min..=max`, consumed.
    fn int_in(&mut self, what: &'static str, min: u64, max: u64) -> Result<u64> {
        self.number_in(what, min as i128, max as i128)
            .map(|v| v as u64)
    }

    /// A signed number in `min..=max`, consumed.
    fn signed_in(&mut self, what: &'static str, min: i64, max: i64) -> Result<i64> {
        self.number_in(what, min as i128, max as i128)
            .map(|v| v as i64)
    }

    /// The number in a word like `p0`, `e4`, `r5` (prefix, then digits).
    fn word_num(&self, t: &Token, prefix: u8, what: &'static str, max: u64) -> Result<u64> {
        let w = self.text(t).as_bytes();
        let digits = w.get(1..).unwrap_or(&[]);
        if w.first() != Some(&prefix) || digits.is_empty() || !digits.iter().all(u8::is_ascii_digit)
        {
            return Err(self.err_at(
                t.start,
                ErrorKind::Expected {
                    expected: what_word(prefix),
                    found: self.lx.describe(t),
                },
            ));
        }
        let mut v: u128 = 0;
        for &d in digits {
            v = v * 10 + (d - b'0') as u128;
            if v > u64::MAX as u128 {
                return Err(self.err_at(
                    t.start,
                    ErrorKind::NumberTooLarge {
                        text: self.text(t).into(),
                    },
                ));
            }
        }
        if v > max as u128 {
            return Err(self.err_at(
                t.start,
                ErrorKind::OutOfRange {
                    what,
                    value: v as i128,
                    min: 0,
                    max: max as i128,
                },
            ));
        }
        Ok(v as u64)
    }

    // ------------------------------------------------------------------
    // Module

    fn module(&mut self) -> Result<()> {
        self.skip_newlines()?;
        if self.is_word("target") {
            self.target()?;
        }
        loop {
            self.skip_newlines()?;
            if self.tok.kind == Tok::Eof {
                return Ok(());
            }
            let at = self.tok.start;
            if self.tok.kind == Tok::Word {
                match self.text(&self.tok) {
                    w @ ("dram" | "sb" | "psum") => {
                        if self.seen_func {
                            return Err(self.invalid(
                                at,
                                format!("`{w}` declaration after a `func`: declarations come before the first function"),
                            ));
                        }
                        self.decl_mem()?;
                        continue;
                    }
                    "reg" => {
                        if self.seen_func {
                            return Err(self.invalid(
                                at,
                                "`reg` declaration after a `func`: declarations come before the first function".into(),
                            ));
                        }
                        self.decl_reg()?;
                        continue;
                    }
                    "func" => {
                        self.func()?;
                        continue;
                    }
                    "target" => {
                        return Err(self.invalid(
                            at,
                            "the `target` line must be the first line of the module".into(),
                        ))
                    }
                    _ => {}
                }
            }
            return Err(self.expected("a declaration (`dram`, `sb`, `psum`, `reg`) or `func`"));
        }
    }

    fn target(&mut self) -> Result<()> {
        self.bump()?;
        let t = self.expect(Tok::Word, "a target preset (trn1, inf2, trn2, trn3)")?;
        let name = self.text(&t);
        let mut target = Target::by_name(name).ok_or_else(|| {
            self.err_at(
                t.start,
                ErrorKind::UnknownWord {
                    what: "target",
                    word: name.into(),
                    known: "trn1 inf2 trn2 trn3",
                },
            )
        })?;
        while self.tok.kind == Tok::Word {
            let k = self.tok;
            let key = self.text(&k);
            self.bump()?;
            self.expect(Tok::Eq, "`=` after the override key")?;
            let vt = self.tok;
            let value = self.int_in("override value", 0, u64::MAX)?;
            target.set(key, value).map_err(|e| match e {
                tusk_core::target::TargetError::UnknownKey => self.err_at(
                    k.start,
                    ErrorKind::UnknownWord {
                        what: "target override",
                        word: key.into(),
                        known: "max-regs psum-banks sb-bytes psum-span dram-bytes coalesce-budget \
                                coalesce-count coalesce-elements",
                    },
                ),
                tusk_core::target::TargetError::BadValue { min, max } => self.err_at(
                    vt.start,
                    ErrorKind::OutOfRange {
                        what: "target override value",
                        value: value as i128,
                        min: min as i128,
                        max: max as i128,
                    },
                ),
            })?;
        }
        self.m.target = target;
        self.eol()
    }

    // ------------------------------------------------------------------
    // Declarations

    fn decl_mem(&mut self) -> Result<()> {
        let space = match self.text(&self.tok) {
            "dram" => Space::Dram,
            "sb" => Space::Sb,
            _ => Space::Psum,
        };
        self.bump()?;
        let nt = self.expect(Tok::Mem, "a location name (`%name`)")?;
        let name = self.text(&nt);
        self.expect(
            Tok::LBracket,
            "`[` before the shape `[<partitions> x <bytes>]`",
        )?;
        let max_parts = match space {
            Space::Sb => self.m.target.sb_partitions,
            Space::Psum => self.m.target.psum_partitions,
            Space::Dram => NO_PARTITION - 1,
        };
        let parts = self.int_in("partition count", 1, max_parts as u64)? as u16;
        self.expect_word("x", "`x` between partitions and bytes")?;
        let bytes = self.int_in("bytes per partition", 1, u32::MAX as u64 - 1)? as u32;
        self.expect(Tok::RBracket, "`]` after the shape")?;

        let mut elem: Option<DType> = None;
        let mut align: Option<u32> = None;
        let mut flags = MemFlags::empty();
        let mut addr: Option<(u16, u64)> = None;
        loop {
            match self.tok.kind {
                Tok::Newline | Tok::Eof => break,
                Tok::At | Tok::Func => {
                    addr = Some(self.address(space)?);
                    break;
                }
                Tok::Word => {
                    let at = self.tok.start;
                    let w = self.text(&self.tok);
                    if w == "elem" {
                        self.bump()?;
                        if elem.is_some() {
                            return Err(self.invalid(at, "`elem` given twice".into()));
                        }
                        let vt = self.tok.start;
                        let e = self.int_in("element size", 1, 16)?;
                        if !e.is_power_of_two() {
                            return Err(self.invalid(
                                vt,
                                format!("element size {e} is not one of 1, 2, 4, 8, 16"),
                            ));
                        }
                        elem = Some(DType::Raw(e as u8));
                    } else if let Some(t) = DType::from_keyword(w) {
                        if elem.is_some() {
                            return Err(
                                self.invalid(at, "the element type (or `elem`) given twice".into())
                            );
                        }
                        elem = Some(t);
                        self.bump()?;
                    } else if w == "align" {
                        self.bump()?;
                        if align.is_some() {
                            return Err(self.invalid(at, "`align` given twice".into()));
                        }
                        let vt = self.tok.start;
                        let a = self.int_in("alignment", 1, 1 << 20)?;
                        if !a.is_power_of_two() {
                            return Err(
                                self.invalid(vt, format!("alignment {a} is not a power of two"))
                            );
                        }
                        align = Some(a as u32);
                    } else if let Some(f) = mem_flag(w) {
                        flags |= f;
                        self.bump()?;
                    } else {
                        return Err(self.err(ErrorKind::UnknownWord {
                            what: "location attribute",
                            word: w.into(),
                            known: MEM_ATTRS,
                        }));
                    }
                }
                _ => return Err(self.expected("a location attribute or the end of the line")),
            }
        }
        if let Some(e) = elem.filter(|&e| bytes % e.size() as u32 != 0) {
            return Err(self.invalid(
                nt.start,
                format!(
                    "%{name} has {bytes} bytes per partition, not a multiple of its element size {} ({e})",
                    e.size()
                ),
            ));
        }
        let ir = |p: &Self, e| p.err_at(nt.start, ErrorKind::Ir(e));
        // `add_mem` refuses a duplicate itself: the name is looked up only
        // when it fails (a lookup of a new name misses the whole table, and
        // declarations are half the lookups of a parse), and a duplicate is
        // reported first, as before.
        let mem = match self.m.add_mem(name, space, parts, bytes) {
            Ok(mem) => mem,
            Err(_) if self.m.mem_by_name(name).is_some() => {
                return Err(self.err_at(
                    nt.start,
                    ErrorKind::Duplicate {
                        what: "location",
                        name: format!("%{name}"),
                    },
                ))
            }
            Err(e) => return Err(ir(self, e)),
        };
        self.note(Kind::Mem, mem.index(), nt.start);
        if let Some(e) = elem {
            self.m.set_dtype(mem, e).map_err(|e| ir(self, e))?;
        }
        if let Some(a) = align {
            self.m.set_align(mem, a).map_err(|e| ir(self, e))?;
        }
        self.m.set_mem_flags(mem, flags);
        if let Some((p, off)) = addr {
            self.m.place(mem, p, off);
        }
        self.eol()
    }

    /// `@ SB<p,b>`, `@ PSUM<p,bank k>`, `@ PSUM<p,bank k+off>`, `@ DRAM<a>`;
    /// returns (base partition, byte offset) as [`Module::place`] takes them.
    fn address(&mut self, space: Space) -> Result<(u16, u64)> {
        let wt = if self.tok.kind == Tok::At {
            self.bump()?;
            self.expect(
                Tok::Word,
                "an address (`SB<p,b>`, `PSUM<p,bank k>`, `DRAM<a>`)",
            )?
        } else {
            // `@SB<..>` lexes as a function-name token.
            let t = self.tok;
            self.bump()?;
            t
        };
        let word = self.text(&wt);
        let given = match word {
            "SB" => Space::Sb,
            "PSUM" => Space::Psum,
            "DRAM" => Space::Dram,
            _ => {
                return Err(self.err_at(
                    wt.start,
                    ErrorKind::UnknownWord {
                        what: "address space",
                        word: word.into(),
                        known: "SB PSUM DRAM",
                    },
                ))
            }
        };
        if given != space {
            return Err(self.invalid(
                wt.start,
                format!(
                    "a {} address on a `{}` location (its addresses are `{}<..>`)",
                    given.upper(),
                    space.keyword(),
                    space.upper()
                ),
            ));
        }
        self.expect(Tok::Lt, "`<` after the address space")?;
        let placed = match space {
            Space::Dram => (0, self.int_in("DRAM address", 0, u64::MAX - 1)?),
            Space::Sb => {
                let p = self.int_in("base partition", 0, NO_PARTITION as u64 - 1)? as u16;
                self.expect(Tok::Comma, "`,` between partition and byte offset")?;
                (p, self.int_in("byte offset", 0, u64::MAX - 1)?)
            }
            Space::Psum => {
                let p = self.int_in("base partition", 0, NO_PARTITION as u64 - 1)? as u16;
                self.expect(Tok::Comma, "`,` between partition and bank")?;
                self.expect_word("bank", "`bank`")?;
                let bank = self.int_in("PSUM bank", 0, NO_BANK as u64 - 1)?;
                let bank_bytes = self.m.target.psum_bank_bytes as u64;
                let mut off = 0;
                if self.tok.kind == Tok::Plus {
                    self.bump()?;
                    off = self.int_in("offset inside the bank", 0, bank_bytes.saturating_sub(1))?;
                }
                (p, bank * bank_bytes + off)
            }
        };
        self.expect(Tok::Gt, "`>` closing the address")?;
        Ok(placed)
    }

    fn decl_reg(&mut self) -> Result<()> {
        self.bump()?;
        let nt = self.expect(Tok::Reg, "a register name (`$name`)")?;
        let name = self.text(&nt);
        let lanes = self.int_in("register lanes", 1, 2)? as u8;
        let mut flags = RegFlags::empty();
        let mut lane = NO_LANE;
        loop {
            match self.tok.kind {
                Tok::Newline | Tok::Eof => break,
                Tok::At | Tok::Func => {
                    let t = if self.tok.kind == Tok::At {
                        self.bump()?;
                        self.expect(Tok::Word, "a lane (`r<N>`)")?
                    } else {
                        let t = self.tok;
                        self.bump()?;
                        t
                    };
                    lane = self.word_num(&t, b'r', "register lane", NO_LANE as u64 - 1)? as u16;
                    break;
                }
                Tok::Word => {
                    let w = self.text(&self.tok);
                    match types::REG_FLAG_WORDS.iter().find(|(_, s)| *s == w) {
                        Some((f, _)) => flags |= *f,
                        None => {
                            return Err(self.err(ErrorKind::UnknownWord {
                                what: "register attribute",
                                word: w.into(),
                                known: "pinned spilltemp, then `@ r<N>`",
                            }))
                        }
                    }
                    self.bump()?;
                }
                _ => return Err(self.expected("a register attribute or the end of the line")),
            }
        }
        // As in `decl_mem`: the duplicate lookup only on failure.
        let r = match self.m.add_reg(name, lanes) {
            Ok(r) => r,
            Err(_) if self.m.reg_by_name(name).is_some() => {
                return Err(self.err_at(
                    nt.start,
                    ErrorKind::Duplicate {
                        what: "register",
                        name: format!("${name}"),
                    },
                ))
            }
            Err(e) => return Err(self.err_at(nt.start, ErrorKind::Ir(e))),
        };
        self.note(Kind::Reg, r.index(), nt.start);
        self.m.set_reg_flags(r, flags);
        self.m.set_reg_lane(r, lane);
        self.eol()
    }

    // ------------------------------------------------------------------
    // Functions, blocks, loops

    fn func(&mut self) -> Result<()> {
        self.seen_func = true;
        self.bump()?;
        let nt = self.expect(Tok::Func, "a function name (`@name`)")?;
        let name = self.text(&nt);
        if self.m.func_by_name(name).is_some() {
            return Err(self.err_at(
                nt.start,
                ErrorKind::Duplicate {
                    what: "function",
                    name: format!("@{name}"),
                },
            ));
        }
        self.expect(Tok::LBrace, "`{` after the function name")?;
        self.eol()?;
        let f = self
            .m
            .add_func(name)
            .map_err(|e| self.err_at(nt.start, ErrorKind::Ir(e)))?;
        self.note(Kind::Func, f.index(), nt.start);
        self.loops.clear();
        let mut block = Block::INVALID;
        loop {
            self.skip_newlines()?;
            match self.tok.kind {
                Tok::RBrace => {
                    let at = self.tok.start;
                    self.bump()?;
                    let Some(l) = self.loops.pop() else {
                        return self.eol();
                    };
                    if self.m.loops().first_block[l] == self.m.loops().end_block[l] {
                        return Err(self.invalid(
                            at,
                            "empty loop: a loop must hold at least one block".into(),
                        ));
                    }
                    block = Block::INVALID;
                    self.eol()?;
                }
                Tok::Eof => {
                    let what = match self.loops.len() {
                        0 => format!("`func @{name}` is missing its closing `}}`"),
                        n => format!(
                            "{n} loop{} and `func @{name}` are missing their closing `}}`",
                            if n == 1 { "" } else { "s" }
                        ),
                    };
                    return Err(self.err(ErrorKind::Unclosed { what }));
                }
                Tok::Word if self.peek()?.kind == Tok::Colon => {
                    block = self.label(f)?;
                }
                Tok::Word if self.is_word("loop") => {
                    self.loop_header()?;
                    block = Block::INVALID;
                }
                Tok::Word if self.is_word("func") => {
                    return Err(self.invalid(
                        self.tok.start,
                        format!("`func` inside `func @{name}`: the function above is missing its closing `}}`"),
                    ))
                }
                _ => {
                    if !block.is_valid() {
                        block = self.auto_block(f)?;
                    }
                    self.inst(block)?;
                }
            }
        }
    }

    fn label(&mut self, f: Func) -> Result<Block> {
        let t = self.tok;
        let label = self.text(&t);
        if label.contains('-') {
            return Err(self.invalid(
                t.start,
                format!("`{label}` is not a valid label (`[A-Za-z_][A-Za-z0-9_.]*`)"),
            ));
        }
        self.bump()?;
        self.bump()?; // the colon
        self.add_block(f, label, t.start)
    }

    fn add_block(&mut self, f: Func, label: &str, at: u32) -> Result<Block> {
        let stamp = f.as_u32() + 1;
        if let Some(n) = self.m.names().lookup(label) {
            if self.label_stamp.get(n.index()) == Some(&stamp) {
                return Err(self.err_at(
                    at,
                    ErrorKind::Duplicate {
                        what: "block label",
                        name: label.into(),
                    },
                ));
            }
        }
        let lp = self.loops.last().copied().unwrap_or(Loop::INVALID);
        let b = self
            .m
            .add_block(label, lp)
            .map_err(|e| self.err_at(at, ErrorKind::Ir(e)))?;
        self.note(Kind::Block, b.index(), at);
        let n = self.m.blocks().name[b].index();
        if self.label_stamp.len() <= n {
            self.label_stamp.resize(self.m.names().len().max(n + 1), 0);
        }
        self.label_stamp[n] = stamp;
        Ok(b)
    }

    /// A block for instructions that follow a `}` or open a function
    /// without a label: `block<N>` with N its index (or the next free N).
    fn auto_block(&mut self, f: Func) -> Result<Block> {
        let stamp = f.as_u32() + 1;
        let mut n = self.m.num_blocks();
        loop {
            let label = format!("block{n}");
            let taken = self
                .m
                .names()
                .lookup(&label)
                .is_some_and(|nm| self.label_stamp.get(nm.index()) == Some(&stamp));
            if !taken {
                return self.add_block(f, &label, self.tok.start);
            }
            n += 1;
        }
    }

    fn loop_header(&mut self) -> Result<()> {
        let at = self.tok.start;
        self.bump()?;
        // `loop NAME in TRIP {`: the induction variable's name.
        let mut iv: Option<Token> = None;
        if self.tok.kind == Tok::Word && self.peek()?.kind == Tok::Word {
            let nt = self.tok;
            self.bump()?;
            self.expect_word("in", "`in` after the loop variable's name")?;
            iv = Some(nt);
        }
        let trip = match self.tok.kind {
            Tok::Question => {
                self.bump()?;
                UNKNOWN_TRIP
            }
            Tok::LBrace => UNKNOWN_TRIP,
            _ => self.int_in("trip count", 0, UNKNOWN_TRIP as u64 - 1)? as u32,
        };
        self.expect(Tok::LBrace, "`{` after the trip count")?;
        self.eol()?;
        let limit = self.m.limits.loop_depth;
        if self.loops.len() >= limit as usize {
            return Err(self.err_at(at, ErrorKind::NestedTooDeeply { limit }));
        }
        let parent = self.loops.last().copied().unwrap_or(Loop::INVALID);
        let l = self
            .m
            .add_loop(parent, trip)
            .map_err(|e| self.err_at(at, ErrorKind::Ir(e)))?;
        self.note(Kind::Loop, l.index(), at);
        if let Some(nt) = iv {
            let name = self.text(&nt);
            if name.contains('-') || name.contains('.') {
                return Err(self.invalid(
                    nt.start,
                    format!("`{name}` is not a valid loop variable (`[A-Za-z_][A-Za-z0-9_]*`)"),
                ));
            }
            self.m
                .set_loop_name(l, name)
                .map_err(|e| self.err_at(nt.start, ErrorKind::Ir(e)))?;
        }
        self.loops.push(l);
        Ok(())
    }

    /// The innermost open loop whose variable is `name`.
    fn loop_named(&self, name: &str) -> Option<Loop> {
        self.loops
            .iter()
            .rev()
            .copied()
            .find(|&l| self.m.loop_name(l) == Some(name))
    }

    /// Loop terms (`+S*i`, `-S*i`) and, where `regs`, a register term
    /// (`+$r[*S] in LO:HI`) of a pattern's partition (`parts`) or offset
    /// part, into `ext`.
    fn terms(&mut self, ext: &mut ApExt, parts: bool, regs: bool) -> Result<()> {
        loop {
            let at = self.tok.start;
            let neg = match self.tok.kind {
                Tok::Plus => {
                    self.bump()?;
                    false
                }
                Tok::NegInt => true,
                _ => return Ok(()),
            };
            if !neg && self.tok.kind == Tok::Reg {
                if !regs {
                    return Err(self.invalid(
                        at,
                        "a register term moves bytes: it follows the byte range or offset".into(),
                    ));
                }
                self.reg_term(ext, at)?;
                continue;
            }
            let (mag, nt) = (self.tok.value, self.tok);
            if !matches!(self.tok.kind, Tok::Int | Tok::NegInt) {
                return Err(self.expected("a stride `<N>*<loop>` or a register `$r`"));
            }
            self.bump()?;
            self.expect(Tok::Star, "`*` between a term's stride and its loop")?;
            let lt = self.expect(Tok::Word, "the loop variable of the term")?;
            let name = self.text(&lt);
            let Some(lp) = self.loop_named(name) else {
                return Err(self.err_at(
                    lt.start,
                    ErrorKind::Undefined {
                        what: "loop variable (of an enclosing `loop NAME in N`)",
                        name: name.into(),
                    },
                ));
            };
            let limit = if parts {
                i16::MAX as u64
            } else {
                i64::MAX as u64
            };
            if mag > limit {
                return Err(self.invalid(nt.start, format!("term stride {mag} is out of range")));
            }
            let v = if neg { -(mag as i64) } else { mag as i64 };
            let wrap = self.wrap_suffix()?;
            if ext.term(lp).is_some_and(|t| t.wrap != wrap) {
                return Err(self.invalid(
                    at,
                    format!("loop `{name}` moves this pattern's partitions and bytes with different `mod`s"),
                ));
            }
            if ext.term(lp).is_some() && {
                let t = ext.term(lp).copied();
                t.is_some_and(|t| if parts { t.parts != 0 } else { t.bytes != 0 })
            } {
                return Err(self.invalid(at, format!("loop `{name}` moves this part twice")));
            }
            if let Some(t) = ext.terms.iter_mut().find(|t| t.lp == lp) {
                if parts {
                    t.parts = v as i16;
                } else {
                    t.bytes = v;
                }
            } else {
                let t = IvTerm {
                    wrap,
                    ..IvTerm::affine(
                        lp,
                        if parts { v as i16 } else { 0 },
                        if parts { 0 } else { v },
                    )
                };
                if ext.terms.try_push(t).is_err() {
                    return Err(self.err_at(
                        at,
                        ErrorKind::Limit {
                            what: "loop terms in one access pattern",
                            limit: MAX_IV_TERMS as u64,
                        },
                    ));
                }
            }
        }
    }

    /// The optional ` mod N` after a term's loop variable (`N ≥ 2`: the
    /// term wraps, see `tusk_core::ir::pattern`); 0 when absent.
    fn wrap_suffix(&mut self) -> Result<u16> {
        if !self.is_word("mod") {
            return Ok(0);
        }
        self.bump()?;
        let at = self.tok.start;
        let n = self.int_in("a term's `mod`", 0, u16::MAX as u64)? as u16;
        if n < 2 {
            return Err(self.invalid(
                at,
                format!("`mod {n}`: a term wraps at 2 or more (slots used in turn)"),
            ));
        }
        Ok(n)
    }

    /// `$r[*S] in LO:HI` (after its `+`): the register becomes a use of the
    /// instruction.
    fn reg_term(&mut self, ext: &mut ApExt, at: u32) -> Result<()> {
        if ext.reg.is_some() {
            return Err(self.invalid(at, "a pattern has at most one register term".into()));
        }
        let t = self.tok;
        let name = self.text(&t);
        let r = self.names.reg(&self.m, name).ok_or_else(|| {
            self.err(ErrorKind::Undefined {
                what: "register",
                name: format!("${name}"),
            })
        })?;
        self.bump()?;
        let mut scale = 1i64;
        if self.tok.kind == Tok::Star {
            self.bump()?;
            scale = self.signed_in("register scale", i32::MIN as i64, i32::MAX as i64)?;
        }
        self.expect_word(
            "in",
            "`in <lo>:<hi>`, the window the register term moves in",
        )?;
        let wt = self.tok.start;
        let lo = self.int_in("window start", 0, u32::MAX as u64)?;
        self.expect(Tok::Colon, "`:` in the window")?;
        let hi = self.int_in("window end", 0, u32::MAX as u64)?;
        if hi <= lo {
            return Err(self.invalid(wt, format!("the window [{lo}, {hi}) is empty")));
        }
        let limit = self.m.limits.regs_per_inst as usize;
        if self.uses.len() + self.defs.len() >= limit {
            return Err(self.err(ErrorKind::Limit {
                what: "registers in one instruction",
                limit: limit as u64,
            }));
        }
        self.uses.push(r);
        ext.reg = Some(RegTerm {
            use_index: (self.uses.len() - 1) as u8,
            scale: scale as i32,
            window_lo: lo as u32,
            window_hi: hi as u32,
        });
        Ok(())
    }

    // ------------------------------------------------------------------
    // Instructions

    fn inst(&mut self, block: Block) -> Result<()> {
        let at = self.tok.start;
        self.ins.clear();
        self.outs.clear();
        self.uses.clear();
        self.defs.clear();
        let mut imm: Option<i64> = None;
        if matches!(self.tok.kind, Tok::Mem | Tok::Reg) {
            loop {
                self.operand(true, &mut imm)?;
                if self.tok.kind != Tok::Comma {
                    break;
                }
                self.bump()?;
            }
            self.expect(Tok::Eq, "`=` after the outputs")?;
        }
        let ot = self.tok;
        if ot.kind != Tok::Word {
            return Err(self.expected("an opcode"));
        }
        let mn = self.text(&ot);
        let opcode = Opcode::from_mnemonic(mn)
            .ok_or_else(|| self.err_at(ot.start, ErrorKind::UnknownOpcode(mn.into())))?;
        self.bump()?;
        let mut spec = InstSpec::new(opcode);
        if self.tok.kind == Tok::Word {
            let w = self.text(&self.tok);
            if let Some(s) = SubOp::from_keyword(w).filter(|s| *s != SubOp::None) {
                if !subop_fits(opcode, s) {
                    return Err(self.invalid(
                        self.tok.start,
                        format!(
                            "`{w}` is not a sub-operation of `{mn}` (its sub-operations: {})",
                            subops_of(opcode)
                        ),
                    ));
                }
                spec.subop = s;
                self.bump()?;
            } else if !is_inst_attr(w) && SubOp::ALL.iter().any(|&s| subop_fits(opcode, s)) {
                // The word where a sub-operation goes, and not an attribute:
                // a misspelt sub-operation rather than an unknown attribute.
                return Err(self.err(ErrorKind::UnknownSubop {
                    opcode: opcode.mnemonic(),
                    word: w.into(),
                    known: subops_of(opcode),
                }));
            }
        }
        if matches!(self.tok.kind, Tok::Mem | Tok::Reg | Tok::Int | Tok::NegInt) {
            loop {
                self.operand(false, &mut imm)?;
                if self.tok.kind != Tok::Comma {
                    break;
                }
                self.bump()?;
            }
        }
        while self.tok.kind == Tok::Word {
            let w = self.text(&self.tok);
            match w {
                "queue" => {
                    self.bump()?;
                    spec.queue = self.int_in("queue", 0, u8::MAX as u64)? as u8;
                }
                "engine" => {
                    self.bump()?;
                    let et = self.expect(Tok::Word, "an engine (pe act dve pool sp dma)")?;
                    let e = self.text(&et);
                    spec.engine = Engine::from_keyword(e).ok_or_else(|| {
                        self.err_at(
                            et.start,
                            ErrorKind::UnknownWord {
                                what: "engine",
                                word: e.into(),
                                known: "pe act dve pool sp dma",
                            },
                        )
                    })?;
                }
                _ => {
                    let Some((f, _)) = types::INST_FLAG_WORDS.iter().find(|(_, s)| *s == w) else {
                        return Err(self.err(ErrorKind::UnknownWord {
                            what: "instruction attribute",
                            word: w.into(),
                            known: INST_ATTRS,
                        }));
                    };
                    spec.flags |= *f;
                    self.bump()?;
                }
            }
        }
        if !matches!(self.tok.kind, Tok::Newline | Tok::Eof) {
            return Err(self.expected("`,`, an instruction attribute or the end of the line"));
        }
        if matches!(opcode, Opcode::ScalarImm | Opcode::Memset) && imm.is_none() {
            return Err(self.invalid(at, format!("`{mn}` needs an immediate operand")));
        }
        spec.imm = imm.unwrap_or(0);
        spec.inputs = &self.ins;
        spec.outputs = &self.outs;
        spec.uses = &self.uses;
        spec.defs = &self.defs;
        let i = match self.m.append_inst(block, &spec) {
            Ok(i) => i,
            // Name the location of a pattern that breaks its rules.
            Err(tusk_core::ir::IrError::BadPattern { operand, error }) => {
                let loc = spec
                    .inputs
                    .iter()
                    .chain(spec.outputs)
                    .nth(operand as usize)
                    .map_or("?", |s| self.m.mem_name(s.loc));
                return Err(self.invalid(
                    at,
                    format!("`{mn}` access pattern {} on %{loc} {error}", operand + 1),
                ));
            }
            Err(e) => return Err(ParseError::at(self.lx.src(), at as usize, ErrorKind::Ir(e))),
        };
        self.note(Kind::Inst, i.index(), at);
        if let Err(e) = tusk_core::ir::shape::check(&self.m, i) {
            return Err(self.invalid(at, format!("`{mn}` {e}")));
        }
        self.eol()
    }

    fn operand(&mut self, output: bool, imm: &mut Option<i64>) -> Result<()> {
        let t = self.tok;
        match t.kind {
            Tok::Mem => {
                let limit = self.m.limits.aps_per_inst as usize;
                if self.ins.len() + self.outs.len() >= limit {
                    return Err(self.err(ErrorKind::Limit {
                        what: "access patterns in one instruction",
                        limit: limit as u64,
                    }));
                }
                let ap = self.access_pattern()?;
                if output {
                    self.outs.push(ap);
                } else {
                    self.ins.push(ap);
                }
            }
            Tok::Reg => {
                let limit = self.m.limits.regs_per_inst as usize;
                if self.uses.len() + self.defs.len() >= limit {
                    return Err(self.err(ErrorKind::Limit {
                        what: "registers in one instruction",
                        limit: limit as u64,
                    }));
                }
                let name = self.text(&t);
                let r = self.names.reg(&self.m, name).ok_or_else(|| {
                    self.err(ErrorKind::Undefined {
                        what: "register",
                        name: format!("${name}"),
                    })
                })?;
                self.bump()?;
                if output {
                    self.defs.push(r);
                } else {
                    self.uses.push(r);
                }
            }
            Tok::Int | Tok::NegInt if !output => {
                if imm.is_some() {
                    return Err(self.invalid(t.start, "more than one immediate operand".into()));
                }
                *imm = Some(self.signed_in("immediate", i64::MIN, i64::MAX)?);
            }
            _ => {
                return Err(self.expected(if output {
                    "an output (`%loc` or `$reg`)"
                } else {
                    "an operand (`%loc`, `$reg` or a number)"
                }))
            }
        }
        Ok(())
    }

    /// `%x`, `%x[pA:B, lo:hi]` or `%x[pA:B, +off, eN, [stride,count]...]`.
    fn access_pattern(&mut self) -> Result<ApSpec> {
        let nt = self.tok;
        let name = self.text(&nt);
        let loc = self.names.mem(&self.m, name).ok_or_else(|| {
            self.err(ErrorKind::Undefined {
                what: "location",
                name: format!("%{name}"),
            })
        })?;
        self.bump()?;
        if self.tok.kind != Tok::LBracket {
            return Ok(full_ap(&self.m, loc));
        }
        self.bump()?;
        let parts = self.m.mems().partitions[loc];
        let pt = self.expect(Tok::Word, "a partition range `p<start>:<end>`")?;
        let p0 = self.word_num(&pt, b'p', "first partition", NO_PARTITION as u64 - 1)?;
        self.expect(Tok::Colon, "`:` in the partition range")?;
        let p1 = self.int_in("partition end", 0, NO_PARTITION as u64 - 1)?;
        let mut ext = ApExt::default();
        self.terms(&mut ext, true, false)?;
        if self.is_word("step") {
            self.bump()?;
            ext.pstep = Some(self.int_in("partition step", 0, u32::MAX as u64)? as u32);
        }
        // A DRAM pattern with a partition step addresses rows by the step,
        // not by the location's partitions: its flat extent is checked.
        let pitched = ext.pstep.is_some() && self.m.mems().space[loc] == Space::Dram;
        let max_end = if pitched {
            tusk_core::ir::MAX_AP_PARTITIONS as u64
        } else {
            parts as u64
        };
        if p1 <= p0 || p1 > max_end {
            return Err(self.invalid(
                pt.start,
                format!(
                    "partitions [{p0}, {p1}) are outside %{name}'s {parts} partitions (or empty)"
                ),
            ));
        }
        let (p0, pn) = (p0 as u16, (p1 - p0) as u16);
        self.expect(Tok::Comma, "`,` after the partition range")?;
        let bytes = self.m.mems().bytes[loc];
        let mut spec = if self.tok.kind == Tok::Int {
            let lt = self.tok.start;
            let lo = self.int_in("first byte", 0, u32::MAX as u64)?;
            self.expect(Tok::Colon, "`:` in the byte range")?;
            let hi = self.int_in("byte end", 0, u32::MAX as u64)?;
            if hi <= lo || hi > bytes as u64 {
                return Err(self.invalid(
                    lt,
                    format!(
                        "bytes [{lo}, {hi}) are outside %{name}'s {bytes} bytes per partition (or empty)"
                    ),
                ));
            }
            self.terms(&mut ext, false, true)?;
            slice_ap(&self.m, loc, p0, pn, lo as u32, hi as u32)
        } else {
            let start = self.tok.start;
            let mut offset = 0u32;
            let mut elem = self.m.elem_size(loc).max(1);
            if self.tok.kind == Tok::Plus {
                self.bump()?;
                let ot = self.tok;
                offset = self.int_in("access-pattern offset", 0, u32::MAX as u64)? as u32;
                if self.tok.kind == Tok::Star {
                    // `+S*i` first: a loop term, offset 0.
                    self.bump()?;
                    let lt = self.expect(Tok::Word, "the loop variable of the term")?;
                    let name = self.text(&lt);
                    let lp = self.loop_named(name).ok_or_else(|| {
                        self.err_at(
                            lt.start,
                            ErrorKind::Undefined {
                                what: "loop variable (of an enclosing `loop NAME in N`)",
                                name: name.into(),
                            },
                        )
                    })?;
                    let wrap = self.wrap_suffix()?;
                    let _ = ext.terms.try_push(IvTerm {
                        wrap,
                        ..IvTerm::affine(lp, 0, ot.value as i64)
                    });
                    offset = 0;
                }
                self.terms(&mut ext, false, true)?;
                self.expect(Tok::Comma, "`,` after the offset")?;
            }
            if self.tok.kind == Tok::Word {
                let t = self.tok;
                let e = self.word_num(&t, b'e', "element size", 16)?;
                if e == 0 || !e.is_power_of_two() {
                    return Err(self.invalid(
                        t.start,
                        format!("element size {e} is not one of 1, 2, 4, 8, 16"),
                    ));
                }
                elem = e as u8;
                self.bump()?;
                self.expect(Tok::Comma, "`,` after the element size")?;
            }
            let mut dims: ArrayVec<Dim, MAX_DIMS> = ArrayVec::new();
            while self.tok.kind == Tok::LBracket {
                if dims.is_full() {
                    return Err(self.err(ErrorKind::Limit {
                        what: "dimensions in one access pattern",
                        limit: MAX_DIMS as u64,
                    }));
                }
                self.bump()?;
                let stride = self.signed_in("stride", i32::MIN as i64, i32::MAX as i64)? as i32;
                self.expect(Tok::Comma, "`,` between stride and count")?;
                let count = self.int_in("count", 1, u32::MAX as u64)? as u32;
                self.expect(Tok::RBracket, "`]` closing the dimension")?;
                dims.push(Dim::new(stride, count));
                if self.tok.kind == Tok::Comma {
                    self.bump()?;
                }
            }
            if dims.is_empty() {
                return Err(
                    self.expected("a byte range `<lo>:<hi>` or a dimension `[stride,count]`")
                );
            }
            let spec = ApSpec {
                loc,
                part_start: p0,
                part_count: pn,
                offset,
                elem_size: elem,
                dims,
                ext: Default::default(),
            };
            if let Err(msg) = check_extent(&self.m, &spec) {
                return Err(self.invalid(start, msg));
            }
            spec
        };
        self.expect(Tok::RBracket, "`]` closing the access pattern")?;
        spec.ext = ext;
        Ok(spec)
    }
}

fn what_number(what: &'static str) -> &'static str {
    match what {
        "partition count" => "the partition count (a number)",
        "bytes per partition" => "the bytes per partition (a number)",
        "trip count" => "a trip count (a number or `?`)",
        "register lanes" => "the register's lanes (1 or 2)",
        _ => "a number",
    }
}

fn what_word(prefix: u8) -> &'static str {
    match prefix {
        b'p' => "a partition range `p<start>:<end>`",
        b'e' => "an element size `e<N>`",
        b'r' => "a register lane `r<N>`",
        _ => "a numbered word",
    }
}

fn mem_flag(w: &str) -> Option<MemFlags> {
    types::MEM_FLAG_WORDS
        .iter()
        .find(|(_, s)| *s == w)
        .map(|(f, _)| *f)
}

/// True when `s` is a sub-operation `op` takes.
pub fn subop_fits(op: Opcode, s: SubOp) -> bool {
    s != SubOp::None && s.fits(op)
}

/// The sub-operations of `op`, space-separated, in [`SubOp::ALL`] order.
pub fn subops_of(op: Opcode) -> String {
    let words: Vec<&str> = SubOp::ALL
        .iter()
        .filter(|&&s| subop_fits(op, s))
        .map(|s| s.keyword())
        .collect();
    words.join(" ")
}

/// Whether `w` is one of the words [`INST_ATTRS`] lists.
fn is_inst_attr(w: &str) -> bool {
    INST_ATTRS.split(' ').any(|a| a == w)
}

/// Checks that an access pattern stays inside its location's bytes and
/// moves at most 4 GiB per partition. Computed in `i128`, so no input can
/// overflow it; passing it guarantees that the core's `i64` / `u64` span and
/// size arithmetic cannot overflow either.
pub fn check_extent(m: &Module, s: &ApSpec) -> std::result::Result<(), String> {
    let bytes = m.mems().bytes[s.loc] as i128;
    let name = m.mem_name(s.loc);
    let es = s.elem_size as i128;
    let mut lo: i128 = 0;
    let mut hi: i128 = 0;
    let mut elements: i128 = 1;
    for d in &s.dims {
        if d.count == 0 {
            return Err("a dimension with count 0".into());
        }
        let reach = d.stride as i128 * (d.count as i128 - 1);
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
        elements = (elements * d.count as i128).min(1 << 64);
    }
    let lo = s.offset as i128 + lo * es;
    let hi = s.offset as i128 + (hi + 1) * es;
    if lo < 0 || hi > bytes {
        return Err(format!(
            "access pattern reaches bytes [{lo}, {hi}), outside %{name}'s {bytes} bytes per partition"
        ));
    }
    if elements * es > u32::MAX as i128 {
        return Err(format!(
            "access pattern moves {} bytes per partition, more than the limit of {}",
            elements * es,
            u32::MAX
        ));
    }
    Ok(())
}
