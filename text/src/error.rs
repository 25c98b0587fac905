//! Parse errors: a position (1-based line and column, columns counted in
//! characters) and what went wrong.

use std::fmt;

use tusk_core::ir::IrError;

/// What went wrong while reading a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The bytes are not UTF-8.
    InvalidUtf8,
    /// The input is larger than the text-size limit.
    FileTooLarge {
        /// Size of the input.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A character that starts no token.
    UnexpectedChar(char),
    /// The grammar wanted something else here.
    Expected {
        /// What would have been accepted.
        expected: &'static str,
        /// What stands there.
        found: String,
    },
    /// A decimal number larger than `u64::MAX`.
    NumberTooLarge {
        /// The number as written (shortened).
        text: String,
    },
    /// A number outside the range of its field.
    OutOfRange {
        /// The field.
        what: &'static str,
        /// The value written (with its sign).
        value: i128,
        /// Smallest legal value.
        min: i128,
        /// Largest legal value.
        max: i128,
    },
    /// A mnemonic that names no opcode.
    UnknownOpcode(String),
    /// A keyword that is not one of the accepted ones.
    UnknownWord {
        /// Which kind of keyword was expected.
        what: &'static str,
        /// The word.
        word: String,
        /// The accepted words.
        known: &'static str,
    },
    /// A word after an opcode that takes sub-operations which is neither
    /// one of them nor an instruction attribute.
    UnknownSubop {
        /// The opcode's mnemonic.
        opcode: &'static str,
        /// The word.
        word: String,
        /// The opcode's sub-operations, space-separated.
        known: String,
    },
    /// A name used but never declared.
    Undefined {
        /// `location`, `register`, …
        what: &'static str,
        /// The name with its sigil.
        name: String,
    },
    /// A name declared twice.
    Duplicate {
        /// `location`, `register`, `function`, `block label`.
        what: &'static str,
        /// The name with its sigil.
        name: String,
    },
    /// A name longer than the name limit.
    NameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Loops nested deeper than the module's limit.
    NestedTooDeeply {
        /// The limit.
        limit: u16,
    },
    /// The input ended inside a construct.
    Unclosed {
        /// What was left open.
        what: String,
    },
    /// A count limit (instructions, operands, dims, …) was exceeded.
    Limit {
        /// What ran out.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// Well-formed syntax with an inconsistent meaning (a pattern outside
    /// its location, an address in the wrong space, …).
    Invalid(String),
    /// The IR refused an entity.
    Ir(IrError),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::InvalidUtf8 => f.write_str("invalid UTF-8"),
            ErrorKind::FileTooLarge { bytes, limit } => {
                write!(f, "input of {bytes} bytes is larger than the limit of {limit} bytes")
            }
            ErrorKind::UnexpectedChar(c) => {
                write!(f, "unexpected character `{}`", c.escape_debug())
            }
            ErrorKind::Expected { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            ErrorKind::NumberTooLarge { text } => {
                write!(f, "number {text} is too large (overflows u64)")
            }
            ErrorKind::OutOfRange {
                what,
                value,
                min,
                max,
            } => write!(f, "{what} {value} is out of range (must be {min}..={max})"),
            ErrorKind::UnknownOpcode(op) => write!(
                f,
                "unknown opcode `{op}` (known: load save dma_copy tensor_copy matmul activation \
                 tensor_tensor tensor_scalar memset imm mov alu spill_store reload branch sync_wait)"
            ),
            ErrorKind::UnknownWord { what, word, known } => {
                write!(f, "unknown {what} `{word}` (known: {known})")
            }
            ErrorKind::UnknownSubop {
                opcode,
                word,
                known,
            } => write!(f, "unknown {opcode} subop `{word}` (known: {known})"),
            ErrorKind::Undefined { what, name } => write!(f, "undefined {what} `{name}`"),
            ErrorKind::Duplicate { what, name } => write!(f, "{what} `{name}` is declared twice"),
            ErrorKind::NameTooLong { len } => write!(
                f,
                "name of {len} bytes is longer than the limit of {} bytes",
                tusk_core::ir::names::MAX_NAME_LEN
            ),
            ErrorKind::NestedTooDeeply { limit } => {
                write!(f, "loops nested too deeply (the limit is {limit} levels)")
            }
            ErrorKind::Unclosed { what } => write!(f, "unexpected end of file: {what}"),
            ErrorKind::Limit { what, limit } => {
                write!(f, "too many {what} (the limit is {limit})")
            }
            ErrorKind::Invalid(msg) => f.write_str(msg),
            ErrorKind::Ir(e) => write!(f, "{e}"),
        }
    }
}

/// A parse error at a position of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl ParseError {
    /// An error at byte offset `at` of `src` (clamped to the input, and to a
    /// character boundary).
    pub fn at(src: &str, at: usize, kind: ErrorKind) -> ParseError {
        let (line, col) = line_col(src.as_bytes(), at);
        ParseError { line, col, kind }
    }
}

/// The 1-based line and character column of byte offset `at`. Continuation
/// bytes of a multi-byte character are not counted, so the column is in
/// characters for UTF-8 text and in bytes up to the first invalid byte.
pub fn line_col(bytes: &[u8], at: usize) -> (u32, u32) {
    let at = at.min(bytes.len());
    let head = &bytes[..at];
    let line_start = head.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let line = 1 + head.iter().filter(|&&b| b == b'\n').count();
    let col = 1 + head[line_start..]
        .iter()
        .filter(|&&b| (b & 0xC0) != 0x80)
        .count();
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(col).unwrap_or(u32::MAX),
    )
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.kind)
    }
}

impl std::error::Error for ParseError {}
