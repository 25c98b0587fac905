//! The lexer: byte slices in, small tokens out.
//!
//! Tokens carry byte offsets into the source, never owned strings, so lexing
//! allocates nothing. The source is validated UTF-8 before lexing starts
//! ([`super::parse`] does it), so every token span that starts and ends on an
//! ASCII byte is a valid `&str` slice. Newlines are tokens (they end
//! declarations and instructions); `;` comments and other whitespace are
//! skipped.

use super::error::{ErrorKind, ParseError};

/// What a token is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// A bare word: `[A-Za-z_][A-Za-z0-9_.-]*` (keywords, mnemonics, labels,
    /// `p0`, `e4`, `max-regs`).
    Word,
    /// `%name` (a memory location).
    Mem,
    /// `$name` (a register).
    Reg,
    /// `@name` (a function; `@SB<..>` is read as `@` + `SB` by the parser).
    Func,
    /// A decimal number; the value is in [`Token::value`].
    Int,
    /// `-` followed by a decimal number; the magnitude is in [`Token::value`].
    NegInt,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// `=`
    Eq,
    /// `@` not followed by a name.
    At,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `+`
    Plus,
    /// `*`
    Star,
    /// `?`
    Question,
    /// End of a line.
    Newline,
    /// End of the input.
    Eof,
}

impl Tok {
    /// How the token is named in "expected X, found Y" messages.
    pub fn describe(self) -> &'static str {
        match self {
            Tok::Word => "a word",
            Tok::Mem => "a location (`%name`)",
            Tok::Reg => "a register (`$name`)",
            Tok::Func => "a function name (`@name`)",
            Tok::Int => "a number",
            Tok::NegInt => "a negative number",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::LBrace => "`{`",
            Tok::RBrace => "`}`",
            Tok::Comma => "`,`",
            Tok::Colon => "`:`",
            Tok::Eq => "`=`",
            Tok::At => "`@`",
            Tok::Lt => "`<`",
            Tok::Gt => "`>`",
            Tok::Plus => "`+`",
            Tok::Star => "`*`",
            Tok::Question => "`?`",
            Tok::Newline => "the end of the line",
            Tok::Eof => "the end of the file",
        }
    }
}

/// A token: kind, byte span, and the value of a number.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub kind: Tok,
    /// Byte offset of the first byte.
    pub start: u32,
    /// Byte offset one past the last byte.
    pub end: u32,
    /// The number's magnitude for [`Tok::Int`] and [`Tok::NegInt`].
    pub value: u64,
}

/// Longest name after a sigil, and longest bare word, in bytes.
pub const MAX_WORD_LEN: usize = tusk_core::ir::names::MAX_NAME_LEN;

/// Byte classes, one bit each, looked up in [`CLASS`]: the name scans
/// test one table bit per byte instead of four or five range comparisons
/// (lexing is most of parsing, and names most of lexing).
const START: u8 = 1;
/// May continue a name after a sigil: `[A-Za-z0-9_.]`.
const CONT: u8 = 2;
/// May continue a bare word: a name byte or `-`.
const WORD: u8 = 4;

const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let start = b.is_ascii_alphabetic() || b == b'_';
        let cont = b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
        t[c] = (if start { START } else { 0 })
            | (if cont { CONT | WORD } else { 0 })
            | (if b == b'-' { WORD } else { 0 });
        c += 1;
    }
    t
};

#[inline]
fn is_ident_start(b: u8) -> bool {
    CLASS[b as usize] & START != 0
}

/// The end of the run of bytes of class `class` from `from`.
#[inline]
fn scan(b: &[u8], from: usize, class: u8) -> usize {
    let rest = b.get(from..).unwrap_or(&[]);
    from + rest
        .iter()
        .position(|&c| CLASS[c as usize] & class == 0)
        .unwrap_or(rest.len())
}

/// A cursor over the source. Cheap to copy, so the parser peeks ahead by
/// copying it.
#[derive(Copy, Clone, Debug)]
pub struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `src`.
    pub fn new(src: &'a str) -> Self {
        Lexer { src, pos: 0 }
    }

    /// The source text.
    pub fn src(&self) -> &'a str {
        self.src
    }

    /// The text of a token (for names: without the sigil).
    #[inline]
    pub fn text(&self, t: &Token) -> &'a str {
        let s = t.start as usize;
        let e = t.end as usize;
        match t.kind {
            Tok::Mem | Tok::Reg | Tok::Func => self.src.get(s + 1..e).unwrap_or(""),
            _ => self.src.get(s..e).unwrap_or(""),
        }
    }

    fn err(&self, at: usize, kind: ErrorKind) -> ParseError {
        ParseError::at(self.src, at, kind)
    }

    /// The next token.
    pub fn next_token(&mut self) -> Result<Token, ParseError> {
        let b = self.src.as_bytes();
        // Skip blanks and comments (a comment runs to the end of the line,
        // the newline itself stays a token).
        loop {
            match b.get(self.pos) {
                Some(b' ' | b'\t' | b'\r') => self.pos += 1,
                Some(b';') => {
                    while let Some(&c) = b.get(self.pos) {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        let start = self.pos;
        let Some(&c) = b.get(start) else {
            return Ok(self.tok(Tok::Eof, start, start, 0));
        };
        let punct = match c {
            b'\n' => Some(Tok::Newline),
            b'[' => Some(Tok::LBracket),
            b']' => Some(Tok::RBracket),
            b'{' => Some(Tok::LBrace),
            b'}' => Some(Tok::RBrace),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            b'=' => Some(Tok::Eq),
            b'<' => Some(Tok::Lt),
            b'>' => Some(Tok::Gt),
            b'+' => Some(Tok::Plus),
            b'*' => Some(Tok::Star),
            b'?' => Some(Tok::Question),
            _ => None,
        };
        if let Some(k) = punct {
            self.pos += 1;
            return Ok(self.tok(k, start, start + 1, 0));
        }
        match c {
            b'0'..=b'9' => self.number(start, start, Tok::Int),
            b'-' if b.get(start + 1).is_some_and(u8::is_ascii_digit) => {
                self.number(start, start + 1, Tok::NegInt)
            }
            b'%' | b'$' | b'@' => {
                let kind = match c {
                    b'%' => Tok::Mem,
                    b'$' => Tok::Reg,
                    _ => Tok::Func,
                };
                if !b.get(start + 1).copied().is_some_and(is_ident_start) {
                    if c == b'@' {
                        self.pos += 1;
                        return Ok(self.tok(Tok::At, start, start + 1, 0));
                    }
                    return Err(self.err(
                        start + 1,
                        ErrorKind::Expected {
                            expected: "a name (`[A-Za-z_][A-Za-z0-9_.]*`) after the sigil",
                            found: self.found_at(start + 1),
                        },
                    ));
                }
                let e = scan(b, start + 2, CONT);
                if e - start - 1 > MAX_WORD_LEN {
                    return Err(self.err(start, ErrorKind::NameTooLong { len: e - start - 1 }));
                }
                self.pos = e;
                Ok(self.tok(kind, start, e, 0))
            }
            c if is_ident_start(c) => {
                let e = scan(b, start + 1, WORD);
                if e - start > MAX_WORD_LEN {
                    return Err(self.err(start, ErrorKind::NameTooLong { len: e - start }));
                }
                self.pos = e;
                Ok(self.tok(Tok::Word, start, e, 0))
            }
            _ => Err(self.err(start, ErrorKind::UnexpectedChar(self.char_at(start)))),
        }
    }

    fn number(&mut self, start: usize, digits: usize, kind: Tok) -> Result<Token, ParseError> {
        let b = self.src.as_bytes();
        let mut v: u64 = 0;
        let mut e = digits;
        let mut overflow = false;
        while let Some(&d) = b.get(e) {
            if !d.is_ascii_digit() {
                break;
            }
            match v
                .checked_mul(10)
                .and_then(|v| v.checked_add((d - b'0') as u64))
            {
                Some(n) => v = n,
                None => overflow = true,
            }
            e += 1;
        }
        if overflow {
            return Err(self.err(
                start,
                ErrorKind::NumberTooLarge {
                    text: self.src.get(start..e.min(start + 40)).unwrap_or("").into(),
                },
            ));
        }
        if b.get(e).copied().is_some_and(is_ident_start) {
            return Err(self.err(
                e,
                ErrorKind::Expected {
                    expected: "a separator after the number",
                    found: self.found_at(e),
                },
            ));
        }
        self.pos = e;
        Ok(self.tok(kind, start, e, v))
    }

    #[inline]
    fn tok(&self, kind: Tok, start: usize, end: usize, value: u64) -> Token {
        Token {
            kind,
            start: start as u32,
            end: end as u32,
            value,
        }
    }

    fn char_at(&self, at: usize) -> char {
        self.src
            .get(at..)
            .and_then(|s| s.chars().next())
            .unwrap_or('\u{FFFD}')
    }

    /// A short description of what stands at `at`, for messages.
    pub fn found_at(&self, at: usize) -> String {
        match self.src.as_bytes().get(at) {
            None => "the end of the file".into(),
            Some(b'\n') => "the end of the line".into(),
            Some(_) => format!("`{}`", self.char_at(at).escape_debug()),
        }
    }

    /// A short description of a token, for messages.
    pub fn describe(&self, t: &Token) -> String {
        match t.kind {
            Tok::Word | Tok::Int | Tok::NegInt | Tok::Mem | Tok::Reg | Tok::Func => {
                let s = self.src.get(t.start as usize..t.end as usize).unwrap_or("");
                format!("`{s}`")
            }
            k => k.describe().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        let mut l = Lexer::new(s);
        let mut v = Vec::new();
        loop {
            let t = l.next_token().unwrap();
            v.push(t.kind);
            if t.kind == Tok::Eof {
                return v;
            }
        }
    }

    #[test]
    fn tokens_of_an_instruction() {
        use Tok::*;
        assert_eq!(
            kinds("%xt = load %x[p0:128, 0:4096] queue 1 ; c\n"),
            [
                Mem, Eq, Word, Mem, LBracket, Word, Colon, Int, Comma, Int, Colon, Int, RBracket,
                Word, Int, Newline, Eof
            ]
        );
        assert_eq!(
            kinds("[-4,8] @ SB<0,1> @main max-regs=62"),
            [
                LBracket, NegInt, Comma, Int, RBracket, At, Word, Lt, Int, Comma, Int, Gt, Func,
                Word, Eq, Int, Eof
            ]
        );
    }

    #[test]
    fn numbers_overflow_cleanly() {
        let mut l = Lexer::new("18446744073709551615 18446744073709551616");
        assert_eq!(l.next_token().unwrap().value, u64::MAX);
        let e = l.next_token().unwrap_err();
        assert_eq!((e.line, e.col), (1, 22));
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn names_and_text() {
        let mut l = Lexer::new("%a.b_1 $k");
        let t = l.next_token().unwrap();
        assert_eq!(l.text(&t), "a.b_1");
        let t = l.next_token().unwrap();
        assert_eq!((t.kind, l.text(&t)), (Tok::Reg, "k"));
        assert!(Lexer::new("%1").next_token().is_err());
        assert!(Lexer::new("#").next_token().is_err());
    }
}
