//! Where the text wrote each entity of a parsed module: the 1-based line
//! and column (in characters, as [`ParseError`](crate::ParseError) counts
//! them) of every instruction, location and register declaration, block
//! label, loop header and function, by id.
//!
//! Invariants: a [`SourceMap`] describes the module [`parse_with_positions`]
//! returned with it, as it was parsed. Ids are handed out in text order and
//! passes only append, so an id below the count at parse time is an entity
//! of the text (its position is here) and one at or past it was created
//! later (spill copies, reloads, slots: no position, `None`). The core keeps
//! no positions; plain [`parse`](crate::parse) records none and costs
//! nothing for them.
//!
//! What each position points at: an instruction's first token (its first
//! output, or its opcode), a declaration's name (`%x`, `$r`, `@f`), a block's
//! label (an unlabelled block: its first instruction), a loop's `loop`.
//!
//! [`parse_with_positions`]: crate::parse_with_positions

use std::fmt;

use tusk_core::ir::{Block, Entity, Func, Inst, Loop, MemLoc, Reg};

use crate::parser::bytecount_newlines;

/// A 1-based line and column.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
}

/// The kinds of entity the parser records, each a table of [`SourceMap`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Inst,
    Mem,
    Reg,
    Block,
    Loop,
    Func,
}

/// Tables per [`Kind`].
const KINDS: usize = 6;

/// Positions by id, one table per kind of entity (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceMap {
    /// By [`Kind`]; line 0 marks an id the text did not write.
    tables: [Vec<Pos>; KINDS],
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// The position of id `index` of one kind: `$doc`, one accessor per kind.
macro_rules! accessors {
    ($($(#[$doc:meta])* $name:ident($id:ty) = $kind:ident;)*) => {
        impl SourceMap {
            $(
                $(#[$doc])*
                pub fn $name(&self, id: $id) -> Option<Pos> {
                    self.at(Kind::$kind, id.index())
                }
            )*
        }
    };
}

accessors! {
    /// Where instruction `id` was written.
    inst(Inst) = Inst;
    /// Where location `id` was declared.
    mem(MemLoc) = Mem;
    /// Where register `id` was declared.
    reg(Reg) = Reg;
    /// Where block `id`'s label (or its first instruction) was written.
    block(Block) = Block;
    /// Where loop `id`'s header was written.
    loop_header(Loop) = Loop;
    /// Where function `id` was declared.
    func(Func) = Func;
}

impl SourceMap {
    fn at(&self, kind: Kind, index: usize) -> Option<Pos> {
        let table = self.tables.get(kind as usize)?;
        table.get(index).copied().filter(|p| p.line != 0)
    }

    /// Where a blamed entity was written.
    pub fn entity(&self, e: Entity) -> Option<Pos> {
        match e {
            Entity::Inst(i) => self.inst(i),
            Entity::Mem(m) => self.mem(m),
            Entity::Reg(r) => self.reg(r),
        }
    }

    /// The position of the first of `blamed` the text wrote (entities
    /// created after parsing are skipped).
    pub fn first_of(&self, blamed: impl IntoIterator<Item = Entity>) -> Option<Pos> {
        blamed.into_iter().find_map(|e| self.entity(e))
    }

    /// Instructions the text wrote (the count at parse time).
    pub fn num_insts(&self) -> usize {
        self.tables.get(Kind::Inst as usize).map_or(0, Vec::len)
    }
}

/// Byte offsets the parser records while it reads, by [`Kind`], converted
/// to lines and columns once at the end ([`Offsets::into_map`]): a store
/// per entity while parsing, one pass over the text after.
#[derive(Debug, Default)]
pub(crate) struct Offsets {
    tables: [Vec<u32>; KINDS],
}

/// Marks an id with no recorded offset.
const NO_OFFSET: u32 = u32::MAX;

impl Offsets {
    /// Records byte offset `off` for id `index` of `kind` (ids come in
    /// order; a skipped one stays unrecorded).
    pub(crate) fn record(&mut self, kind: Kind, index: usize, off: u32) {
        let Some(table) = self.tables.get_mut(kind as usize) else {
            return;
        };
        if index >= table.len() {
            table.resize(index + 1, NO_OFFSET);
        }
        if let Some(x) = table.get_mut(index) {
            *x = off;
        }
    }

    /// The line and column of every recorded offset of `src`. The tables
    /// are merged by offset (each is in text order), so one forward scan
    /// of the text serves them all.
    pub(crate) fn into_map(self, src: &str) -> SourceMap {
        let mut out: [Vec<Pos>; KINDS] = Default::default();
        for (o, t) in out.iter_mut().zip(&self.tables) {
            o.reserve_exact(t.len());
        }
        let src = src.as_bytes();
        let mut c = Cursor::START;
        loop {
            // The table whose next offset comes first in the text.
            let mut next: Option<(u32, usize)> = None;
            for (k, (o, t)) in out.iter().zip(&self.tables).enumerate() {
                match t.get(o.len()) {
                    Some(&off) if !matches!(next, Some((best, _)) if best <= off) => {
                        next = Some((off, k));
                    }
                    _ => {}
                }
            }
            let Some((off, k)) = next else { break };
            if let Some(o) = out.get_mut(k) {
                o.push(c.pos(src, off));
            }
        }
        SourceMap { tables: out }
    }
}

/// A forward scan of the text that turns increasing byte offsets into
/// lines and columns in one pass (an offset behind it restarts it).
#[derive(Copy, Clone, Debug)]
struct Cursor {
    /// Start of the line the cursor is on.
    line_start: usize,
    /// Its 1-based number.
    line: u32,
}

impl Cursor {
    const START: Cursor = Cursor {
        line_start: 0,
        line: 1,
    };

    fn pos(&mut self, src: &[u8], off: u32) -> Pos {
        if off == NO_OFFSET {
            return Pos { line: 0, col: 0 };
        }
        let off = (off as usize).min(src.len());
        if off < self.line_start {
            *self = Cursor::START;
        }
        let ahead = src.get(self.line_start..off).unwrap_or(&[]);
        // The last newline first (a short scan back over one line's
        // head), then the newlines before it counted in bulk.
        if let Some(k) = ahead.iter().rposition(|&b| b == b'\n') {
            let lines = 1 + bytecount_newlines(ahead.get(..k).unwrap_or(&[]));
            self.line = self
                .line
                .saturating_add(u32::try_from(lines).unwrap_or(u32::MAX));
            self.line_start += k + 1;
        }
        let head = src.get(self.line_start..off).unwrap_or(&[]);
        // Continuation bytes of a character are not counted.
        let col = 1 + head.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
        Pos {
            line: self.line,
            col: u32::try_from(col).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tusk_core::ir::Module;

    /// Two functions, labelled and unlabelled blocks, nested loops, a
    /// register, comments, a multi-byte character before a column.
    const SRC: &str = "\
target trn2

dram %in  [4 x 64] fp32 input  ; the input
dram %out [4 x 64] fp32 output
sb   %t   [4 x 64] fp32
sb   %u   [4 x 64] fp32
reg  $k 1

func @first {
entry:
  %t = load %in
  loop i in 2 {
  body:
    %u = tensor_copy %t
    loop j in 3 {
      %u = tensor_copy %u
    }
  }
  %out = save %u
}

func @second {
  $k = imm 7
  %t = load %in
}
";

    /// The text at `p`, to the end of its line.
    fn text_at(src: &str, p: Pos) -> &str {
        let line = src.lines().nth(p.line as usize - 1).expect("line exists");
        let start = line
            .char_indices()
            .nth(p.col as usize - 1)
            .map_or(line.len(), |(k, _)| k);
        &line[start..]
    }

    fn parsed() -> (Module, SourceMap) {
        crate::parse_str_with_positions(SRC).expect("valid text")
    }

    #[test]
    fn every_instruction_points_at_its_first_token() {
        let (m, map) = parsed();
        let want = [
            (11, "%t = load %in"),
            (14, "%u = tensor_copy %t"),
            (16, "%u = tensor_copy %u"),
            (19, "%out = save %u"),
            (23, "$k = imm 7"),
            (24, "%t = load %in"),
        ];
        let got: Vec<(u32, &str)> = m
            .program_order()
            .map(|i| {
                let p = map.inst(i).expect("a parsed instruction has a position");
                (p.line, text_at(SRC, p))
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(map.num_insts(), m.num_insts());
    }

    #[test]
    fn declarations_point_at_their_names() {
        let (m, map) = parsed();
        for (name, line) in [("in", 3), ("out", 4), ("t", 5), ("u", 6)] {
            let x = m.mem_by_name(name).expect("declared");
            let p = map.mem(x).expect("a declared location has a position");
            assert_eq!(p.line, line, "%{name}");
            assert!(text_at(SRC, p).starts_with(&format!("%{name} ")), "%{name}");
        }
        let k = m.reg_by_name("k").expect("declared");
        let p = map.reg(k).expect("a declared register has a position");
        assert_eq!((p.line, text_at(SRC, p)), (7, "$k 1"));
        for (name, line) in [("first", 9), ("second", 22)] {
            let f = m.func_by_name(name).expect("declared");
            let p = map.func(f).expect("a function has a position");
            assert_eq!(p.line, line);
            assert!(text_at(SRC, p).starts_with(&format!("@{name} {{")));
        }
    }

    #[test]
    fn blocks_and_loops_point_at_labels_and_headers() {
        let (m, map) = parsed();
        let blocks: Vec<(String, u32, String)> = (0..m.num_blocks())
            .map(|k| {
                let b = Block::new(k);
                let p = map.block(b).expect("every parsed block has a position");
                (
                    m.block_name(b).to_string(),
                    p.line,
                    text_at(SRC, p).to_string(),
                )
            })
            .collect();
        // Labelled blocks at their labels; a block after a `}` or at the
        // top of a function without a label at its first instruction.
        assert_eq!(blocks[0], ("entry".into(), 10, "entry:".into()));
        assert_eq!(blocks[1], ("body".into(), 13, "body:".into()));
        assert_eq!(blocks[2].1, 16);
        assert_eq!(blocks[2].2, "%u = tensor_copy %u");
        assert_eq!(blocks[3].1, 19);
        assert_eq!(blocks[4].1, 23);
        assert_eq!(blocks.len(), 5);
        let loops: Vec<(u32, &str)> = (0..m.num_loops())
            .map(|k| {
                let p = map
                    .loop_header(Loop::new(k))
                    .expect("a loop has a position");
                (p.line, text_at(SRC, p))
            })
            .collect();
        assert_eq!(loops, [(12, "loop i in 2 {"), (15, "loop j in 3 {")]);
    }

    #[test]
    fn entities_created_after_parsing_have_none() {
        let (mut m, map) = parsed();
        let n = m.num_insts();
        let t = m.mem_by_name("t").expect("declared");
        let extra = m
            .add_mem("t_copy", tusk_core::ir::Space::Sb, 4, 64)
            .expect("room for one more");
        assert!(map.mem(t).is_some());
        assert_eq!(map.mem(extra), None);
        assert_eq!(map.inst(Inst::new(n)), None);
        assert_eq!(map.entity(Entity::Mem(extra)), None);
        assert_eq!(
            map.first_of([Entity::Mem(extra), Entity::Mem(t)]),
            map.mem(t),
            "the first entity with a position"
        );
        assert_eq!(map.first_of([Entity::Inst(Inst::new(n))]), None);
    }

    #[test]
    fn columns_count_characters_and_plain_parse_matches() {
        // `é` is two bytes: the column after it counts one.
        let src = "target trn2\n; é\nsb %t [4 x 8] fp32 ; é\nfunc @main {\n  %t = memset 0\n}\n";
        let (m, map) = crate::parse_str_with_positions(src).expect("valid text");
        let t = m.mem_by_name("t").expect("declared");
        assert_eq!(map.mem(t), Some(Pos { line: 3, col: 4 }));
        let i = m.program_order().next().expect("one instruction");
        assert_eq!(map.inst(i), Some(Pos { line: 5, col: 3 }));
        assert_eq!(format!("{}", Pos { line: 5, col: 3 }), "5:3");
        // The positions change nothing in the module.
        let plain = crate::parse_str(src).expect("valid text");
        assert_eq!(crate::print(&plain), crate::print(&m));
    }

    #[test]
    fn offsets_out_of_order_and_gaps_convert() {
        let src = "ab\ncd\nef";
        let mut o = Offsets::default();
        o.record(Kind::Inst, 0, 7);
        o.record(Kind::Inst, 2, 1);
        o.record(Kind::Inst, 1, 3);
        o.record(Kind::Mem, 1, 4);
        let map = o.into_map(src);
        assert_eq!(map.inst(Inst::new(0)), Some(Pos { line: 3, col: 2 }));
        assert_eq!(map.inst(Inst::new(1)), Some(Pos { line: 2, col: 1 }));
        assert_eq!(map.inst(Inst::new(2)), Some(Pos { line: 1, col: 2 }));
        assert_eq!(map.mem(MemLoc::new(0)), None, "a gap");
        assert_eq!(map.mem(MemLoc::new(1)), Some(Pos { line: 2, col: 2 }));
    }
}
