//! What the driver tells its caller: standard output, standard error and
//! the exit code.
//!
//! Every byte the driver prints goes through here, so a stream that fails
//! is handled once, the same way in every subcommand:
//!
//! - Standard output closed by its reader (a broken pipe, `tusk … | head`)
//!   is not an error: the reader has what it wanted. The driver stops
//!   printing and exits quietly with the code the job has anyway (0 when it
//!   succeeded), as ripgrep does. Files are written before standard
//!   output, so they are complete by then.
//! - Any other failure to write standard output (a full disk, `/dev/full`)
//!   is an I/O error: exit 3 and one line on standard error.
//! - A failure to write standard error is ignored: there is nowhere left to
//!   report it, and the exit code still says how the job went.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Success.
pub const EXIT_OK: u8 = 0;
/// Well-formed input, failed job (findings, allocation failure, no fit).
pub const EXIT_FAILED: u8 = 1;
/// Bad input or usage.
pub const EXIT_BAD_INPUT: u8 = 2;
/// A file (or standard output) could not be read or written.
pub const EXIT_IO: u8 = 3;

/// Why standard output took less than it was given.
#[derive(Debug)]
pub enum StdoutError {
    /// Its reader closed it (a broken pipe): not an error of the job.
    Closed,
    /// Writing failed for another reason.
    Failed(std::io::Error),
}

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StdoutError::Closed => write!(f, "standard output was closed by its reader"),
            StdoutError::Failed(e) => write!(f, "cannot write standard output: {e}"),
        }
    }
}

impl std::error::Error for StdoutError {}

impl From<std::io::Error> for StdoutError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == ErrorKind::BrokenPipe {
            StdoutError::Closed
        } else {
            StdoutError::Failed(e)
        }
    }
}

/// Streams what `body` writes to standard output, then flushes it.
pub fn print_with(
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), StdoutError> {
    let mut out = std::io::stdout().lock();
    body(&mut out).and_then(|()| out.flush())?;
    Ok(())
}

/// Writes `text` to standard output.
pub fn print(text: &str) -> Result<(), StdoutError> {
    print_with(|w| w.write_all(text.as_bytes()))
}

/// Writes `text` to standard error; a failure is ignored (module doc).
pub fn eprint(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// Writes `error: {msg}` and a newline to standard error.
pub fn error(msg: impl fmt::Display) {
    eprint(&format!("error: {msg}\n"));
}

/// The exit code of a job whose own code is `code` and whose standard
/// output went as `printed` (module doc): a closed pipe keeps `code`, any
/// other failure is reported and makes it [`EXIT_IO`].
pub fn finish(code: u8, printed: Result<(), StdoutError>) -> u8 {
    match printed {
        Ok(()) | Err(StdoutError::Closed) => code,
        Err(e) => {
            error(e);
            EXIT_IO
        }
    }
}

/// Prints `text` and returns the exit code by [`finish`].
pub fn print_and_finish(code: u8, text: &str) -> u8 {
    finish(code, print(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_keeps_the_code_and_other_errors_are_io() {
        let closed = StdoutError::from(std::io::Error::from(ErrorKind::BrokenPipe));
        assert!(matches!(closed, StdoutError::Closed));
        assert_eq!(finish(EXIT_OK, Err(closed)), EXIT_OK);
        assert_eq!(finish(EXIT_FAILED, Err(StdoutError::Closed)), EXIT_FAILED);
        let full = StdoutError::from(std::io::Error::from_raw_os_error(28));
        assert!(matches!(full, StdoutError::Failed(_)));
        assert!(full
            .to_string()
            .starts_with("cannot write standard output: "));
        assert_eq!(finish(EXIT_OK, Err(full)), EXIT_IO);
        assert_eq!(finish(EXIT_BAD_INPUT, Ok(())), EXIT_BAD_INPUT);
    }
}
