//! `tusk fmt`: a module's canonical text with the user's comments kept
//! ([`crate::text::comments`]), written to standard output or `-o`, or put
//! in place of each file (`--write`), or only compared (`--check`).
//!
//! Invariants: a file is rewritten only when its canonical text differs
//! from its bytes, and then atomically ([`io::write_atomic`]: a reader sees
//! the old file or the new one, never a part); a file that does not parse
//! gets the parser's error (exit 2) and is left as it is; one bad file does
//! not stop the others, and the exit code is the worst of the files'
//! ([`batch::worst_code`]). `--check` writes nothing and lists the files
//! that `--write` would change (exit 1 when there is one).

use std::path::{Path, PathBuf};

use clap::Args;

use crate::batch;
use crate::console::{self, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::{io, json, text};

/// The flags of `tusk fmt`.
#[derive(Args, Debug)]
pub struct FmtArgs {
    /// The module (`-` for standard input; files ending in `.json` are read
    /// as JSON). Several files take `--write` or `--check`.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Read the input as JSON whatever its name.
    #[arg(long, conflicts_with_all = ["write", "check"])]
    from_json: bool,
    /// Write here (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "OUT", conflicts_with_all = ["write", "check"])]
    output: Option<PathBuf>,
    /// Write JSON instead of text (comments are not kept).
    #[arg(long, conflicts_with_all = ["write", "check"])]
    json: bool,
    /// Rewrite each file in place (atomically) with its canonical text,
    /// comments kept; files already canonical are not touched, files that
    /// do not parse are reported and left as they are.
    #[arg(short = 'i', long, conflicts_with = "check")]
    write: bool,
    /// Change nothing: list the files whose text is not canonical (exit 1
    /// when there is one).
    #[arg(long)]
    check: bool,
}

/// Runs `tusk fmt`; returns the exit code.
pub fn run(a: &FmtArgs) -> u8 {
    if !a.write && !a.check {
        let [file] = a.files.as_slice() else {
            console::error(format_args!(
                "{} files given: several files take --write (rewrite each in place) or --check",
                a.files.len()
            ));
            return EXIT_BAD_INPUT;
        };
        return to_output(a, file);
    }
    let mut changed = String::new();
    let mut codes = Vec::with_capacity(a.files.len());
    for file in &a.files {
        let code = match in_place(file, a.write) {
            Ok(true) if a.check => {
                changed.push_str(&batch::display_name(file));
                changed.push('\n');
                EXIT_FAILED
            }
            Ok(_) => EXIT_OK,
            Err(code) => code,
        };
        codes.push(code);
    }
    console::print_and_finish(batch::worst_code(codes.iter().copied()), &changed)
}

/// One module to standard output or `-o`: canonical text with its
/// comments, or JSON.
fn to_output(a: &FmtArgs, file: &Path) -> u8 {
    let dest = a.output.as_deref().unwrap_or(Path::new("-"));
    if let Err(msg) = io::check_outputs(Some(file), &[("-o", dest)]) {
        console::error(msg);
        return EXIT_BAD_INPUT;
    }
    let out = if batch::is_json(file, a.from_json) {
        match batch::load(file, true) {
            Ok(m) if a.json => json::to_json_string(&m),
            Ok(m) => text::print(&m),
            Err((code, msg)) => return fail(code, &msg),
        }
    } else {
        match batch::load_with_comments(file) {
            Ok((m, _, _)) if a.json => json::to_json_string(&m),
            Ok((m, c, _)) => text::print_with_comments(&m, &c),
            Err((code, msg)) => return fail(code, &msg),
        }
    };
    match io::write_atomic(dest, out.as_bytes()) {
        Ok(()) => EXIT_OK,
        Err(e) => e.report(EXIT_OK),
    }
}

/// Formats one file for `--write` (rewriting it, when `write`) or
/// `--check`: whether its text is not canonical, or the exit code of why
/// it could not be formatted (reported here).
fn in_place(file: &Path, write: bool) -> Result<bool, u8> {
    let refuse = |why: &str| {
        console::error(format_args!("{}: {why}", batch::display_name(file)));
        EXIT_BAD_INPUT
    };
    if write && file.as_os_str() == "-" {
        return Err(refuse("--write rewrites files; standard input has none"));
    }
    if batch::is_json(file, false) {
        return Err(refuse(
            "is read as JSON; --write and --check take text modules",
        ));
    }
    let (m, c, bytes) = batch::load_with_comments(file).map_err(|(code, msg)| fail(code, &msg))?;
    let out = text::print_with_comments(&m, &c);
    if out.as_bytes() == bytes {
        return Ok(false);
    }
    if write {
        // Through a symbolic link to the file it names, so the link stays.
        let dest = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        io::write_atomic(&dest, out.as_bytes()).map_err(|e| e.report(EXIT_OK))?;
    }
    Ok(true)
}

/// Prints a load error; returns its code.
fn fail(code: u8, msg: &str) -> u8 {
    console::eprint(msg);
    code
}
