//! File I/O of the driver: bounded reads and atomic writes.
//!
//! Inputs are read with a size limit, so a huge or endless file (a FIFO,
//! `/dev/zero`) ends in an error instead of exhausting memory. Outputs are
//! written to a temporary file in the destination's directory and renamed
//! over the destination, so a reader never sees a partial file and a failed
//! run leaves the old file (or none) in place. Inputs are only ever opened
//! for reading.

use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// An I/O failure, naming the file.
#[derive(Debug)]
pub enum IoError {
    /// The file could not be read.
    Read {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is larger than the limit.
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file could not be written.
    Write {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            IoError::TooLarge { path, limit } => write!(
                f,
                "{} is larger than the input limit of {limit} bytes",
                path.display()
            ),
            IoError::Write { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for IoError {}

/// Reads a whole file of at most `limit` bytes (`-` reads standard input).
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, IoError> {
    let read_err = |source| IoError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut buf = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .lock()
            .take(limit + 1)
            .read_to_end(&mut buf)
            .map_err(read_err)?;
    } else {
        let file = File::open(path).map_err(read_err)?;
        if let Ok(meta) = file.metadata() {
            if meta.is_dir() {
                return Err(read_err(std::io::Error::other("it is a directory")));
            }
            if meta.is_file() && meta.len() > limit {
                return Err(IoError::TooLarge {
                    path: path.to_path_buf(),
                    limit,
                });
            }
            buf.reserve(meta.len() as usize);
        }
        file.take(limit + 1)
            .read_to_end(&mut buf)
            .map_err(read_err)?;
    }
    if buf.len() as u64 > limit {
        return Err(IoError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(buf)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, flushed and synced, then renamed over `path`. On failure the
/// temporary file is removed and `path` is untouched. `-` writes standard
/// output; an existing device or pipe is written directly.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] of whatever `body` writes: the text streams into the
/// temporary file instead of being built whole first. An error of `body`
/// fails the write the same way (temporary file removed, `path` untouched).
pub fn write_atomic_with(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), IoError> {
    let write_err = |source| IoError::Write {
        path: path.to_path_buf(),
        source,
    };
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return body(&mut out).and_then(|()| out.flush()).map_err(write_err);
    }
    // A device or a pipe (`/dev/null`, a FIFO) cannot be replaced by a
    // rename, and must not be: write to it directly.
    if fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| body(&mut f))
            .map_err(write_err);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| write_err(std::io::Error::other("not a file name")))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".tusk-tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        body(&mut f)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(write_err(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tusk-io-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = scratch("atomic");
        let p = d.join("out.tusk");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // Writing into a missing directory fails and creates nothing.
        assert!(write_atomic(&d.join("no/such/dir/x"), b"x").is_err());
        // A body that fails part-way leaves the old file and no temp.
        let e = write_atomic_with(&p, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("printer failed"))
        });
        assert!(e.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn reads_are_bounded() {
        let d = scratch("bounded");
        let p = d.join("in");
        fs::write(&p, vec![b'x'; 100]).unwrap();
        assert_eq!(read_limited(&p, 100).unwrap().len(), 100);
        assert!(matches!(
            read_limited(&p, 99),
            Err(IoError::TooLarge { limit: 99, .. })
        ));
        assert!(matches!(
            read_limited(&d.join("missing"), 10),
            Err(IoError::Read { .. })
        ));
        assert!(matches!(read_limited(&d, 10), Err(IoError::Read { .. })));
        fs::remove_dir_all(&d).unwrap();
    }
}

/// Parses a byte count for `--max-memory`: digits, optionally followed by
/// `K`, `M` or `G` (powers of 1024; `KiB`, `MiB`, `GiB` too).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a byte count (digits, then K, M or G)"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" | "k" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        u => return Err(format!("unknown unit `{u}` in `{s}` (use K, M or G)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}` is more than {} bytes", u64::MAX))
}

#[cfg(test)]
mod byte_count_tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_with_units() {
        assert_eq!(parse_bytes("512"), Ok(512));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("3M"), Ok(3 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert!(parse_bytes("x").is_err());
        assert!(parse_bytes("4T").is_err());
        assert!(parse_bytes("99999999999999999999G").is_err());
    }
}
