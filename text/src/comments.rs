//! The comments of a source text, kept beside its module so that `tusk fmt`
//! can print canonical text without losing them.
//!
//! The IR holds no comments, so [`parse_with_comments`] records them in a
//! side table ([`Comments`]): each `;` comment is attached to an item of the
//! module ([`Anchor`]: the `target` line, a declaration, a function, a
//! block label, a loop header, an instruction, a closing `}`, or the end of
//! the file), either on its own line before the item ([`Place::Before`]) or
//! after it on the item's line ([`Place::Trailing`]). Blank lines between
//! items are kept as [`Place::Blank`] entries (one however many the user
//! wrote; none right after a `{` or right before a `}`).
//!
//! The table is built by a second, line-by-line scan of text that has
//! already parsed, so [`crate::parse`] does no extra work for it. The scan
//! names items the way the parser numbers them (declarations, functions,
//! loops, blocks, instructions each counted in source order; an unlabelled
//! block where an instruction follows a `{` or `}`), and checks its counts,
//! and the names of functions and labels, against the module.
//!
//! [`print_with_comments`] prints the canonical text of the module with the
//! comments at their items. Invariants (tested on every example and on
//! hand-written cases): its output is a fixed point (printing what it parses
//! to gives the same text), every comment appears once, attached to the same
//! item, in source order (declarations print locations before registers, so
//! a register's comments move with it), and the module parses back the same.
//! Trailing comments on consecutive lines are aligned one space after the
//! longest of those lines. Comment text is kept as written, minus trailing
//! whitespace.

use std::collections::HashMap;

use tusk_core::ir::{Block, Func, Inst, Loop, MemLoc, Module, Reg};

use super::error::{ErrorKind, ParseError};
use super::printer::{
    indent, print, print_func_open, print_inst, print_label, print_loop_open, print_mem_decl,
    print_reg_decl, print_target,
};
use super::walk::{walk, Event};

/// The item a comment belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Anchor {
    /// The `target` line (printed first, whether or not the text has one):
    /// also the comments that open a file before a blank line.
    Header,
    /// A location declaration.
    Mem(MemLoc),
    /// A register declaration.
    Reg(Reg),
    /// A `func @name {` line.
    Func(Func),
    /// A block label (`name:`).
    Block(Block),
    /// A `loop ... {` line.
    Loop(Loop),
    /// An instruction.
    Inst(Inst),
    /// The `}` closing a loop.
    LoopEnd(Loop),
    /// The `}` closing a function.
    FuncEnd(Func),
    /// The end of the file: comments after the last item.
    End,
}

/// Where a comment stands relative to its item.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// On its own line, before the item (and after the item's earlier
    /// entries).
    Before,
    /// After the item, on the item's line.
    Trailing,
    /// A blank line before the item (the entry has no text).
    Blank,
}

/// One entry of [`Comments`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Comment<'c> {
    /// The item.
    pub anchor: Anchor,
    /// Before it, after it, or a blank line.
    pub place: Place,
    /// The comment from its `;` on (empty for [`Place::Blank`]).
    pub text: &'c str,
}

#[derive(Copy, Clone, Debug)]
struct Entry {
    anchor: Anchor,
    place: Place,
    start: u32,
    end: u32,
}

/// The comments and blank lines of one source text, in source order, each
/// at its item. The entries of one item are consecutive.
#[derive(Clone, Debug, Default)]
pub struct Comments {
    entries: Vec<Entry>,
    text: String,
}

impl Comments {
    /// True when the text had no comments and no blank lines worth keeping.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry in source order (blank lines included).
    pub fn iter(&self) -> impl Iterator<Item = Comment<'_>> + '_ {
        self.entries.iter().map(|e| self.comment(e))
    }

    fn comment(&self, e: &Entry) -> Comment<'_> {
        Comment {
            anchor: e.anchor,
            place: e.place,
            text: self
                .text
                .get(e.start as usize..e.end as usize)
                .unwrap_or(""),
        }
    }

    /// The comments only (no blank lines), in source order.
    pub fn comments(&self) -> impl Iterator<Item = Comment<'_>> + '_ {
        self.iter().filter(|c| c.place != Place::Blank)
    }

    fn push(&mut self, anchor: Anchor, place: Place, text: &str) {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        self.entries.push(Entry {
            anchor,
            place,
            start,
            end: self.text.len() as u32,
        });
    }
}

/// Parses a module and records its comments (see the module docs). Errors
/// are those of [`crate::parse`].
pub fn parse_with_comments(bytes: &[u8]) -> Result<(Module, Comments), ParseError> {
    let src = super::text_of(bytes)?;
    let (m, _) = super::parser::parse_str(src, false)?;
    let comments = Scan::new(&m).run(src)?;
    Ok((m, comments))
}

/// An error that the scan cannot meet on text the parser accepted: a
/// disagreement between the scan and the parser.
fn internal(what: &str) -> ParseError {
    ParseError {
        line: 1,
        col: 1,
        kind: ErrorKind::Invalid(format!(
            "cannot attach the comments to the module's items ({what}); this is a bug in tusk"
        )),
    }
}

/// What has not been attached yet: a comment line (its text) or a blank.
type Pending<'s> = (Place, &'s str);

/// The line-by-line scan behind [`parse_with_comments`].
struct Scan<'m, 's> {
    m: &'m Module,
    out: Comments,
    /// Entries before the next item.
    pending: Vec<Pending<'s>>,
    mems: usize,
    regs: usize,
    funcs: usize,
    loops: usize,
    blocks: usize,
    insts: usize,
    /// The open function.
    func: Option<Func>,
    /// Its open loops, innermost last.
    open: Vec<Loop>,
    /// Instructions here go to the current block (else they start an
    /// unlabelled one).
    in_block: bool,
    /// An item was seen (the first one decides where the file's opening
    /// comments go).
    seen_item: bool,
    /// A non-blank line was seen (blank lines at the top are not kept).
    seen_line: bool,
    /// Blank lines since the last non-blank one.
    blank: bool,
    /// The last non-blank line opened a function or loop.
    after_open: bool,
}

impl<'m, 's> Scan<'m, 's> {
    fn new(m: &'m Module) -> Self {
        Scan {
            m,
            out: Comments::default(),
            pending: Vec::new(),
            mems: 0,
            regs: 0,
            funcs: 0,
            loops: 0,
            blocks: 0,
            insts: 0,
            func: None,
            open: Vec::new(),
            in_block: false,
            seen_item: false,
            seen_line: false,
            blank: false,
            after_open: false,
        }
    }

    fn run(mut self, src: &'s str) -> Result<Comments, ParseError> {
        // Per line: its end, its first `;` (only searched for when the text
        // has one), its first and last non-blank byte before the comment.
        // Byte scans, not `str` searches: the scan runs over every line of
        // the input, and `tusk fmt` of a canonical module is mostly this
        // scan besides parsing and printing.
        let bytes = src.as_bytes();
        let any_comment = bytes.contains(&b';');
        let mut pos = 0;
        while pos <= bytes.len() {
            let rest = bytes.get(pos..).unwrap_or(&[]);
            let len = find_byte(rest, b'\n').unwrap_or(rest.len());
            let line = src.get(pos..pos + len).unwrap_or("");
            pos += len + 1;
            let (code, comment) = match any_comment.then(|| find_byte(line.as_bytes(), b';')) {
                Some(Some(k)) => (
                    line.get(..k).unwrap_or(""),
                    line.get(k..).map(str::trim_end),
                ),
                _ => (line, None),
            };
            let code = trim_blanks(code);
            if code.is_empty() && comment.is_none() {
                self.blank |= self.seen_line;
                continue;
            }
            if std::mem::take(&mut self.blank) && !self.after_open {
                self.pending.push((Place::Blank, ""));
            }
            self.seen_line = true;
            self.after_open = false;
            match comment {
                Some(text) if code.is_empty() => self.pending.push((Place::Before, text)),
                _ => self.items(code, comment)?,
            }
        }
        let rest = if self.seen_item {
            Anchor::End
        } else {
            Anchor::Header
        };
        self.attach(rest);
        let m = self.m;
        let counts = [
            (self.mems, m.num_mems(), "locations"),
            (self.regs, m.num_regs(), "registers"),
            (self.funcs, m.num_funcs(), "functions"),
            (self.loops, m.num_loops(), "loops"),
            (self.blocks, m.num_blocks(), "blocks"),
            (self.insts, m.num_insts(), "instructions"),
        ];
        for (seen, held, what) in counts {
            if seen != held {
                return Err(internal(&format!(
                    "{seen} {what} in the text, {held} in the module"
                )));
            }
        }
        Ok(self.out)
    }

    /// Gives the pending entries to `anchor`.
    fn attach(&mut self, anchor: Anchor) {
        for (place, text) in std::mem::take(&mut self.pending) {
            self.out.push(anchor, place, text);
        }
    }

    /// The items of one line of code (`code` has no comment and is not
    /// empty), then its trailing comment on the last of them. A line holds
    /// one item, or block labels followed by at most one other item (the
    /// parser reads `entry: %t = load %in` as a label and an instruction).
    /// The text parsed, so the first word (and whether a `:` follows it)
    /// tells the item, as it tells the parser.
    fn items(&mut self, code: &'s str, comment: Option<&'s str>) -> Result<(), ParseError> {
        let mut rest = code;
        let mut first = true;
        let last = loop {
            let w = first_word(rest);
            let anchor = match self.func {
                None => self.top_level(w, rest)?,
                Some(f) => {
                    let after = rest.get(w.len()..).unwrap_or("").trim_start_matches(BLANKS);
                    if let (false, Some(next)) = (w.is_empty(), after.strip_prefix(':')) {
                        let b = Block::new(self.blocks);
                        let same = self.blocks < self.m.num_blocks() && self.m.block_name(b) == w;
                        self.check_name(w, same)?;
                        self.blocks += 1;
                        self.in_block = true;
                        self.item(Anchor::Block(b), first);
                        first = false;
                        rest = next.trim_start_matches(BLANKS);
                        if rest.is_empty() {
                            break Anchor::Block(b);
                        }
                        continue;
                    }
                    self.in_func(f, rest.starts_with('}'), w == "loop")
                }
            };
            self.item(anchor, first);
            break anchor;
        };
        if let Some(text) = comment {
            self.out.push(last, Place::Trailing, text);
        }
        Ok(())
    }

    /// The item a line outside any function starts with: its first word
    /// `word`, and the whole line `code`.
    fn top_level(&mut self, word: &str, code: &str) -> Result<Anchor, ParseError> {
        Ok(match word {
            "target" => Anchor::Header,
            "dram" | "sb" | "psum" => {
                self.mems += 1;
                Anchor::Mem(MemLoc::new(self.mems - 1))
            }
            "reg" => {
                self.regs += 1;
                Anchor::Reg(Reg::new(self.regs - 1))
            }
            "func" => {
                let f = Func::new(self.funcs);
                let name = code
                    .get(word.len()..)
                    .unwrap_or("")
                    .trim_start_matches(BLANKS)
                    .trim_start_matches('@');
                let name = first_word(name);
                let same = self.funcs < self.m.num_funcs() && self.m.func_name(f) == name;
                self.check_name(name, same)?;
                self.funcs += 1;
                self.func = Some(f);
                self.open.clear();
                self.in_block = false;
                self.after_open = true;
                Anchor::Func(f)
            }
            _ => return Err(internal("a line outside a function starts no item")),
        })
    }

    /// The item a line inside function `f` starts with, when it is not a
    /// label: a `}`, a loop header, or an instruction.
    fn in_func(&mut self, f: Func, close: bool, is_loop: bool) -> Anchor {
        if close {
            self.in_block = false;
            return match self.open.pop() {
                Some(l) => Anchor::LoopEnd(l),
                None => {
                    self.func = None;
                    Anchor::FuncEnd(f)
                }
            };
        }
        if is_loop {
            let l = Loop::new(self.loops);
            self.loops += 1;
            self.open.push(l);
            self.in_block = false;
            self.after_open = true;
            return Anchor::Loop(l);
        }
        if !self.in_block {
            // The parser's unlabelled block: the printer writes its label
            // first, so what stands before the instruction goes with it.
            self.blocks += 1;
            self.in_block = true;
            self.item(Anchor::Block(Block::new(self.blocks - 1)), true);
        }
        self.insts += 1;
        Anchor::Inst(Inst::new(self.insts - 1))
    }

    /// Refuses an item whose name is not the module's (`same` is false).
    fn check_name(&self, name: &str, same: bool) -> Result<(), ParseError> {
        if same {
            return Ok(());
        }
        Err(internal(&format!(
            "`{name}` is not where the module has it"
        )))
    }

    /// A new item: the first one of its line takes the pending entries.
    fn item(&mut self, anchor: Anchor, first: bool) {
        if !first || (self.pending.is_empty() && self.seen_item) {
            return;
        }
        if matches!(anchor, Anchor::LoopEnd(_) | Anchor::FuncEnd(_))
            && self.pending.last().is_some_and(|p| p.0 == Place::Blank)
        {
            self.pending.pop();
        }
        // The printer writes a blank line before each function and before
        // the declarations: a blank line there is not recorded, so a text
        // without comments has no entries (and prints as fast as `print`).
        let first_decl = if self.m.num_mems() > 0 {
            Anchor::Mem(MemLoc::new(0))
        } else {
            Anchor::Reg(Reg::new(0))
        };
        if (matches!(anchor, Anchor::Func(_)) || anchor == first_decl)
            && self.pending.first().is_some_and(|p| p.0 == Place::Blank)
        {
            self.pending.remove(0);
        }
        if !std::mem::replace(&mut self.seen_item, true) && anchor != Anchor::Header {
            // A file without a `target` line: the comments up to its last
            // blank line open the file and go with the (printed) target
            // line; the rest belong to the first item.
            if let Some(k) = self.pending.iter().rposition(|p| p.0 == Place::Blank) {
                let rest = self.pending.split_off(k);
                self.attach(Anchor::Header);
                self.pending = rest;
            }
        }
        self.attach(anchor);
    }
}

/// The blanks the lexer skips.
const BLANKS: [char; 3] = [' ', '\t', '\r'];

/// `s` without the blanks at either end.
fn trim_blanks(s: &str) -> &str {
    let b = s.as_bytes();
    let blank = |c: &u8| matches!(c, b' ' | b'\t' | b'\r');
    let lo = b.iter().position(|c| !blank(c)).unwrap_or(b.len());
    let hi = b.iter().rposition(|c| !blank(c)).map_or(lo, |k| k + 1);
    s.get(lo..hi).unwrap_or("")
}

/// The first position of `byte` in `hay`, eight bytes at a time (the
/// classic zero-byte test on `hay ^ byte` per `u64`: the lowest flagged
/// byte is exact).
fn find_byte(hay: &[u8], byte: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO * byte as u64;
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        let x = u64::from_le_bytes(word) ^ pattern;
        let found = x.wrapping_sub(LO) & !x & HI;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == byte)
        .map(|k| at + k)
}

/// The bare word `code` starts with (empty when it starts with a sigil or
/// punctuation): the bytes a word may hold.
fn first_word(code: &str) -> &str {
    let n = code
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')))
        .unwrap_or(code.len());
    code.get(..n).unwrap_or("")
}

/// Prints `m` as canonical text with the comments of `c` at their items
/// (see the module docs). `c` comes from [`parse_with_comments`] of the
/// text `m` was parsed from; entries whose item `m` does not have are not
/// printed. Without entries this is [`print()`].
pub fn print_with_comments(m: &Module, c: &Comments) -> String {
    if c.is_empty() {
        return print(m);
    }
    let mut at: HashMap<Anchor, (usize, usize)> = HashMap::new();
    for (k, e) in c.entries.iter().enumerate() {
        at.entry(e.anchor).or_insert((k, k)).1 = k + 1;
    }
    let mut w = Writer {
        c,
        at,
        out: String::with_capacity(64 + m.num_live_insts() * 40 + m.num_mems() * 40),
        run: Vec::new(),
    };
    w.item(Anchor::Header, 0, 0, |o| print_target(m, o));
    if m.num_mems() + m.num_regs() > 0 {
        w.blank();
    }
    for v in m.mems().space.keys() {
        w.item(Anchor::Mem(v), 0, 0, |o| print_mem_decl(m, v, o));
    }
    for r in m.regs().lanes.keys() {
        w.item(Anchor::Reg(r), 0, 0, |o| print_reg_decl(m, r, o));
    }
    let mut open: Vec<Loop> = Vec::new();
    walk(m, |e| match e {
        Event::FuncStart(f) => {
            w.blank();
            w.item(Anchor::Func(f), 0, 0, |o| print_func_open(m, f, o));
        }
        Event::LoopOpen(l, depth) => {
            open.push(l);
            w.item(Anchor::Loop(l), depth + 1, depth + 1, |o| {
                print_loop_open(m, l, o)
            });
        }
        Event::Block(b, depth) => {
            w.item(Anchor::Block(b), depth, depth, |o| print_label(m, b, o));
            for i in m.block_insts(b) {
                w.item(Anchor::Inst(i), depth + 1, depth + 1, |o| {
                    print_inst(m, i, o)
                });
            }
        }
        Event::LoopClose(depth) => {
            let a = open.pop().map_or(Anchor::End, Anchor::LoopEnd);
            w.item(a, depth + 1, depth + 2, |o| o.push('}'));
        }
        Event::FuncEnd(f) => {
            open.clear();
            w.item(Anchor::FuncEnd(f), 0, 1, |o| o.push('}'));
        }
    });
    w.before(Anchor::End, 0);
    w.flush();
    w.out
}

/// The output of [`print_with_comments`], line by line.
struct Writer<'c> {
    c: &'c Comments,
    /// The entries of each anchor: a range of `c.entries`.
    at: HashMap<Anchor, (usize, usize)>,
    out: String,
    /// The lines at the end of `out` that have trailing comments, not yet
    /// written: (start, end) of the line's code in `out`, and the comment.
    run: Vec<(usize, usize, &'c str)>,
}

impl<'c> Writer<'c> {
    fn entries(&self, a: Anchor) -> impl Iterator<Item = Comment<'c>> + 'c {
        let c = self.c;
        let (lo, hi) = self.at.get(&a).copied().unwrap_or((0, 0));
        c.entries
            .get(lo..hi)
            .unwrap_or(&[])
            .iter()
            .map(|e| c.comment(e))
    }

    /// An item's entries before it (comments at indentation `note`), then
    /// its line (at `depth`, text by `line`) with its trailing comment.
    fn item(&mut self, a: Anchor, depth: usize, note: usize, line: impl FnOnce(&mut String)) {
        let trailing = self.before(a, note);
        if trailing.is_none() {
            self.flush();
        }
        let start = self.out.len();
        indent(&mut self.out, depth);
        line(&mut self.out);
        if let Some(t) = trailing {
            self.run.push((start, self.out.len(), t));
        }
        self.out.push('\n');
    }

    /// Writes the blank lines and own-line comments of `a`; returns its
    /// trailing comment.
    fn before(&mut self, a: Anchor, note: usize) -> Option<&'c str> {
        let mut trailing = None;
        for e in self.entries(a) {
            match e.place {
                Place::Blank => self.blank(),
                Place::Before => {
                    self.flush();
                    indent(&mut self.out, note);
                    self.out.push_str(e.text);
                    self.out.push('\n');
                }
                Place::Trailing => trailing = Some(e.text),
            }
        }
        trailing
    }

    /// One blank line, unless there is one already (or nothing yet).
    fn blank(&mut self) {
        self.flush();
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    /// Writes the trailing comments of the pending lines, aligned one space
    /// after the longest line.
    fn flush(&mut self) {
        let Some(&(base, _, _)) = self.run.first() else {
            return;
        };
        let width = self.run.iter().map(|&(s, e, _)| e - s).max().unwrap_or(0);
        let tail = self.out.split_off(base);
        for &(s, e, text) in &self.run {
            self.out
                .push_str(tail.get(s - base..e - base).unwrap_or(""));
            for _ in e - s..=width {
                self.out.push(' ');
            }
            self.out.push_str(text);
            self.out.push('\n');
        }
        self.run.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(src: &str) -> String {
        let (m, c) = parse_with_comments(src.as_bytes()).unwrap();
        print_with_comments(&m, &c)
    }

    fn comments_of(c: &Comments) -> Vec<(Anchor, Place, String)> {
        c.comments()
            .map(|c| (c.anchor, c.place, c.text.to_string()))
            .collect()
    }

    /// The invariants of the module docs, for one text; returns fmt(src).
    fn assert_invariants(name: &str, src: &str) -> String {
        let (m, c) = parse_with_comments(src.as_bytes()).unwrap();
        let once = print_with_comments(&m, &c);
        let (m2, c2) = parse_with_comments(once.as_bytes())
            .unwrap_or_else(|e| panic!("{name}: fmt output does not parse: {e}\n{once}"));
        assert_eq!(print(&m2), print(&m), "{name}: not the same module");
        assert_eq!(
            print_with_comments(&m2, &c2),
            once,
            "{name}: fmt is not idempotent"
        );
        assert_eq!(
            comments_of(&c2),
            comments_of(&c),
            "{name}: comments moved\n{once}"
        );
        let n = src.lines().filter(|l| l.contains(';')).count();
        assert_eq!(c.comments().count(), n, "{name}: comments lost");
        for c in c.comments() {
            assert!(once.contains(c.text), "{name}: `{}` lost", c.text);
        }
        once
    }

    #[test]
    fn examples_keep_their_comments() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut n = 0;
        for sub in ["", "placed"] {
            for e in std::fs::read_dir(dir.join(sub)).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "tusk") {
                    let src = std::fs::read_to_string(&p).unwrap();
                    let out = assert_invariants(&p.display().to_string(), &src);
                    assert!(src.contains(';') && out.contains(';'), "{}", p.display());
                    n += 1;
                }
            }
        }
        assert!(n >= 14, "only {n} examples found");
    }

    const BODY: &str = "\
target trn2

dram %in [4 x 8] fp32 input
dram %out [4 x 8] fp32 output
sb %t [4 x 8] fp32
reg $k 1
";

    #[test]
    fn comments_stay_at_their_items() {
        let src = "\
; header
target trn2 ; the target

; inputs
dram %in [4 x 8] fp32 input ; in
dram %out  [4 x 8] fp32 output ; out


sb %t [4 x 8] fp32
reg $k 1 ; a register

; the kernel
func @main { ; main
; the entry
entry: ; entry block
  %t = load %in ; load it
  ; a loop
  loop i in 2 { ; two
    %t = tensor_scalar mul %t, $k inplace
    ; before the loop's brace
  } ; loop done

  %out = save %t
  ; before the function's brace
} ; end of main
; at the end
";
        // The exact output is pinned by tests/golden/fmt_comments.tusk.
        assert_invariants("hand", src);
        let (_, c) = parse_with_comments(src.as_bytes()).unwrap();
        let got = comments_of(&c);
        use Place::{Before, Trailing};
        for (text, anchor, place) in [
            ("; header", Anchor::Header, Before),
            ("; the target", Anchor::Header, Trailing),
            ("; out", Anchor::Mem(MemLoc::new(1)), Trailing),
            ("; a register", Anchor::Reg(Reg::new(0)), Trailing),
            ("; main", Anchor::Func(Func::new(0)), Trailing),
            ("; the entry", Anchor::Block(Block::new(0)), Before),
            ("; load it", Anchor::Inst(Inst::new(0)), Trailing),
            ("; a loop", Anchor::Loop(Loop::new(0)), Before),
            (
                "; before the loop's brace",
                Anchor::LoopEnd(Loop::new(0)),
                Before,
            ),
            ("; end of main", Anchor::FuncEnd(Func::new(0)), Trailing),
            ("; at the end", Anchor::End, Before),
        ] {
            let g = got.iter().find(|g| g.2 == text).unwrap();
            assert_eq!((g.0, g.1), (anchor, place), "{text}");
        }
    }

    #[test]
    fn canonical_text_without_comments_prints_unchanged() {
        let src = format!("{BODY}\nfunc @main {{\nentry:\n  %t = load %in\n  %out = save %t\n}}\n");
        let (m, c) = parse_with_comments(src.as_bytes()).unwrap();
        assert_eq!(print(&m), src);
        // The canonical blank lines are the printer's own: nothing recorded.
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(print_with_comments(&m, &c), src);
    }

    #[test]
    fn only_comments() {
        let src = "; just\n;   notes\n\n; and more   \n";
        assert_eq!(
            assert_invariants("only", src),
            "; just\n;   notes\n\n; and more\ntarget trn2\n"
        );
        assert_eq!(fmt(""), "target trn2\n");
        assert_eq!(fmt("\n\n; x\n\n"), "; x\ntarget trn2\n");
    }

    #[test]
    fn opening_comments_without_a_target_line() {
        // Up to the last blank line: the file's header, printed above the
        // target line; after it: the first declaration's.
        let src = "; file\n\n; first\ndram %in [4 x 8] fp32 input\n";
        assert_eq!(
            assert_invariants("no target", src),
            "; file\ntarget trn2\n\n; first\ndram %in [4 x 8] fp32 input\n"
        );
        let src = "; first\ndram %in [4 x 8] fp32 input\n";
        assert_eq!(
            assert_invariants("no target, no blank", src),
            "target trn2\n\n; first\ndram %in [4 x 8] fp32 input\n"
        );
    }

    #[test]
    fn blank_lines_collapse_and_vanish_inside_braces() {
        let src = format!(
            "{BODY}\n\n\nfunc @main {{\n\n  %t = load %in\n\n\n\n  %out = save %t\n\n}}\n\n\n"
        );
        assert_eq!(
            assert_invariants("blanks", &src),
            format!("{BODY}\nfunc @main {{\nblock0:\n  %t = load %in\n\n  %out = save %t\n}}\n")
        );
    }

    #[test]
    fn labels_and_instructions_on_one_line() {
        let src = format!(
            "{BODY}func @main {{\n a: b: %t = load %in ; both\n loop 2 {{\n %t = load %in\n }}\n c: ; c\n %out = save %t\n}}\n"
        );
        let (m, c) = parse_with_comments(src.as_bytes()).unwrap();
        assert_eq!(m.num_blocks(), 4);
        let got = comments_of(&c);
        assert_eq!(got[0].0, Anchor::Inst(Inst::new(0)));
        assert_eq!(got[1].0, Anchor::Block(Block::new(3)));
        assert_invariants("one line", &src);
    }

    #[test]
    fn a_register_comment_moves_with_it() {
        let src = "reg $k 1 ; k\ndram %in [4 x 8] fp32 input ; in\n";
        let out = fmt(src);
        assert_eq!(
            out,
            "target trn2\n\ndram %in [4 x 8] fp32 input ; in\nreg $k 1                    ; k\n"
        );
        let (_, c) = parse_with_comments(out.as_bytes()).unwrap();
        let mut got = comments_of(&c);
        got.reverse();
        let (_, c0) = parse_with_comments(src.as_bytes()).unwrap();
        assert_eq!(got, comments_of(&c0));
    }

    #[test]
    fn several_functions_and_nested_loops() {
        let src = format!(
            "{BODY}
func @a {{
  %t = load %in
  loop 2 {{
    loop 3 {{ ; inner
      %t = load %in
    }}
    ; between
    loop 4 {{
      %t = load %in ; deep
    }} ; closes 3rd
  }}
  %out = save %t
}}
; between functions
func @b {{
entry:
  %t = load %in ; in b
}}
"
        );
        let (_, c) = parse_with_comments(src.as_bytes()).unwrap();
        let got = comments_of(&c);
        assert_eq!(got[0].0, Anchor::Loop(Loop::new(1)));
        assert_eq!(got[1].0, Anchor::Loop(Loop::new(2)));
        assert_eq!(got[2].0, Anchor::Inst(Inst::new(2)));
        assert_eq!(got[3].0, Anchor::LoopEnd(Loop::new(2)));
        assert_eq!(got[4].0, Anchor::Func(Func::new(1)));
        assert_eq!(got[5].0, Anchor::Inst(Inst::new(4)));
        let out = assert_invariants("nested", &src);
        assert!(out.contains("}\n\n; between functions\nfunc @b {"), "{out}");
    }

    /// Generated modules (loops, several blocks, registers) with comments
    /// and blank lines sprinkled before and after random lines.
    #[test]
    fn generated_modules_with_random_comments() {
        use tusk_core::gen::module::{generate, GenParams};
        for seed in [1u64, 7, 11, 23] {
            let m = generate(&GenParams::new(300, seed)).unwrap();
            // xorshift64: which lines get comments.
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut below = |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut src = String::new();
            for (k, line) in print(&m).lines().enumerate() {
                match below(8) {
                    0 => src.push_str(&format!("; before line {k}\n")),
                    1 => src.push_str("\n\n"),
                    _ => {}
                }
                src.push_str(line);
                if below(4) == 0 {
                    src.push_str(&format!("   ; after line {k}"));
                }
                src.push('\n');
            }
            src.push_str("; the end\n");
            let out = assert_invariants(&format!("seed {seed}"), &src);
            assert!(out.contains("; after line") && out.contains("; before line"));
        }
    }

    #[test]
    fn find_byte_finds_the_first() {
        for len in 0..40 {
            for at in 0..=len {
                let mut hay = vec![b'a'; len];
                hay.extend_from_slice(b"\n;\n");
                hay[at] = b'\n';
                assert_eq!(find_byte(&hay, b'\n'), Some(at), "{len} {at}");
                assert_eq!(find_byte(&hay[..at], b'\n'), None);
            }
        }
        // A byte just above the one searched for (the test's borrow) is
        // not taken for it.
        assert_eq!(find_byte(b"\x0b\x0b\x0b\x0b\x0b\x0b\x0b\n", b'\n'), Some(7));
        assert_eq!(find_byte(b"\x8a\x0a", b'\n'), Some(1));
    }

    #[test]
    fn errors_are_the_parsers() {
        let bad = "target trn2 ; ok\nsb %t [4 x 8] fp33 ; bad\n";
        let e = parse_with_comments(bad.as_bytes()).unwrap_err();
        assert_eq!(e, crate::parse(bad.as_bytes()).unwrap_err());
        assert_eq!((e.line, e.col), (2, 15));
    }
}
