//! tusk-text: the tusk text format (docs/FORMAT.md) — lexer, parser and
//! printer — for every user of `tusk-core`, not only the `tusk` driver.
//!
//! [`parse`] takes raw bytes (anything at all: it validates UTF-8 and the
//! size limit first) and returns a [`Module`] or a [`ParseError`] with a
//! 1-based line and column. It never panics and never recurses on input
//! structure. [`parse_with_positions`] also returns a [`SourceMap`]: the
//! line and column where the text wrote each instruction and declaration,
//! for messages about them (plain [`parse`] records none and costs nothing
//! for them). [`print()`] writes canonical text; `print(&parse(x)?) == x` for
//! every canonical `x`. [`write_module`] writes the same bytes from several
//! threads for large modules. [`parse_with_comments`] also returns the
//! text's `;` comments, which [`print_with_comments`] prints back at their
//! items (what `tusk fmt` does).
//!
//! The crate needs `std` (strings, and threads for the writer); the core it
//! feeds stays `no_std`.
//!
//! ```
//! let src = "\
//! target trn2
//!
//! dram %in  [4 x 8] fp32 input
//! dram %out [4 x 8] fp32 output
//!
//! sb %t [4 x 8] fp32
//!
//! func @main {
//! entry:
//!   %t = load %in
//!   %out = save %t
//! }
//! ";
//! let m = tusk_text::parse_str(src).expect("valid text");
//! // The printer writes canonical text, which parses back to itself.
//! let text = tusk_text::print(&m);
//! assert_eq!(tusk_text::print(&tusk_text::parse_str(&text).unwrap()), text);
//! // Errors carry a 1-based line and column.
//! let err = tusk_text::parse_str("target trn2\nsb %t [4 x 8] fp33\n").unwrap_err();
//! assert_eq!((err.line, err.col), (2, 15)); // at `fp33`
//! ```

#![forbid(unsafe_code)]

pub mod comments;
pub mod error;
pub mod lexer;
mod parser;
pub mod printer;
pub mod source_map;
pub mod stream;
pub mod walk;

pub use comments::{parse_with_comments, print_with_comments, Anchor, Comment, Comments, Place};
pub use error::{ErrorKind, ParseError};
pub use printer::{print, print_into};
pub use source_map::{Pos, SourceMap};
pub use stream::{printer_threads, write_module};

pub use parser::{check_extent, subop_fits, subops_of};

use tusk_core::ir::Module;

/// Largest text input accepted, in bytes (1 GiB: far above the module's
/// instruction limit at ~40 bytes a line, and below the `u32` byte offsets
/// that tokens carry).
pub const MAX_TEXT_BYTES: u64 = 1 << 30;

/// Parses a module from bytes.
pub fn parse(bytes: &[u8]) -> Result<Module, ParseError> {
    parse_bytes(bytes, false).map(|(m, _)| m)
}

/// Parses a module from bytes, with where the text wrote each of its
/// entities ([`SourceMap`]), for messages that point at a line and column.
pub fn parse_with_positions(bytes: &[u8]) -> Result<(Module, SourceMap), ParseError> {
    parse_bytes(bytes, true).map(|(m, map)| (m, map.unwrap_or_default()))
}

/// [`parse_with_positions`] of text.
pub fn parse_str_with_positions(src: &str) -> Result<(Module, SourceMap), ParseError> {
    parse_with_positions(src.as_bytes())
}

fn parse_bytes(bytes: &[u8], positions: bool) -> Result<(Module, Option<SourceMap>), ParseError> {
    parser::parse_str(text_of(bytes)?, positions)
}

/// The bytes as text: within [`MAX_TEXT_BYTES`] and UTF-8.
pub(crate) fn text_of(bytes: &[u8]) -> Result<&str, ParseError> {
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(ParseError {
            line: 1,
            col: 1,
            kind: ErrorKind::FileTooLarge {
                bytes: bytes.len() as u64,
                limit: MAX_TEXT_BYTES,
            },
        });
    }
    std::str::from_utf8(bytes).map_err(|e| {
        let (line, col) = error::line_col(bytes, e.valid_up_to());
        ParseError {
            line,
            col,
            kind: ErrorKind::InvalidUtf8,
        }
    })
}

/// Parses a module from text.
pub fn parse_str(src: &str) -> Result<Module, ParseError> {
    parse(src.as_bytes())
}
