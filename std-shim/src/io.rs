//! File I/O of the driver: bounded reads and atomic writes.
//!
//! Inputs are read with a size limit, so a huge or endless file (a FIFO,
//! `/dev/zero`) ends in an error instead of exhausting memory. Outputs are
//! written to a temporary file in the destination's directory
//! ([`crate::tempfiles`]: removed on a signal, collected after a crash) and
//! renamed over the destination, so a reader never sees a partial file and
//! a failed run leaves the old file (or none) in place. A job with several
//! outputs stages them all and commits them together ([`stage`],
//! [`commit`]): all are written or none. Outputs that would write over the
//! input or over each other are refused before any work
//! ([`check_outputs`]). Inputs are only ever opened for reading. `-` is
//! standard output, written through [`crate::console`].

use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::console::{self, StdoutError, EXIT_BAD_INPUT, EXIT_IO};
use crate::tempfiles::TempFile;

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
    /// The directory an output goes to does not exist (or is not one).
    NoDirectory {
        /// The output.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// True when `dir` exists but is not a directory.
        exists: bool,
    },
    /// Standard output could not be written (a closed pipe included; see
    /// [`crate::console`] for what that means to the exit code).
    Stdout(StdoutError),
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
            IoError::NoDirectory { path, dir, exists } => {
                if *exists {
                    write!(
                        f,
                        "cannot write {}: {} is not a directory",
                        path.display(),
                        dir.display()
                    )
                } else {
                    write!(
                        f,
                        "cannot write {}: directory {} does not exist",
                        path.display(),
                        dir.display()
                    )
                }
            }
            IoError::Stdout(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for IoError {}

impl IoError {
    /// The driver's exit code for this error when the job itself ended
    /// with `code`: a too-large input is bad input (2), a closed standard
    /// output keeps `code`, everything else is an I/O error (3).
    pub fn exit_code(&self, code: u8) -> u8 {
        match self {
            IoError::TooLarge { .. } => EXIT_BAD_INPUT,
            IoError::Stdout(StdoutError::Closed) => code,
            _ => EXIT_IO,
        }
    }

    /// Prints the error (nothing for a closed standard output, which is not
    /// one) and returns [`IoError::exit_code`].
    pub fn report(&self, code: u8) -> u8 {
        if !matches!(self, IoError::Stdout(StdoutError::Closed)) {
            console::error(self);
        }
        self.exit_code(code)
    }
}

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

/// An output written in full under its temporary name, not yet in place:
/// [`commit`] renames a set of them together, and dropping one removes its
/// temporary file, so a run that fails before committing leaves nothing.
#[derive(Debug)]
pub struct Staged {
    dest: PathBuf,
    content: Content,
}

#[derive(Debug)]
enum Content {
    /// A regular file's temporary twin.
    Temp(TempFile),
    /// The bytes for a device or a pipe (`/dev/null`, a FIFO), which cannot
    /// be replaced by a rename and must not be: written at [`commit`].
    Device(Vec<u8>),
}

/// The directory a file path is in (`.` for a bare name).
fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes what `body` writes to a temporary file beside `path` (synced),
/// ready for [`commit`]. `path` must not be `-`. On failure nothing is left
/// behind and `path` is untouched.
pub fn stage(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<Staged, IoError> {
    let write_err = |source| IoError::Write {
        path: path.to_path_buf(),
        source,
    };
    // An existing file keeps its permission bits when it is replaced (an
    // in-place `fmt --write` must not change who may read the file).
    let mut keep_permissions = None;
    match fs::metadata(path) {
        Ok(m) if m.is_file() => keep_permissions = Some(m.permissions()),
        Ok(m) if m.is_dir() => {
            return Err(write_err(std::io::Error::other("it is a directory")));
        }
        Ok(m) if !m.is_file() => {
            let mut bytes = Vec::new();
            body(&mut bytes).map_err(write_err)?;
            return Ok(Staged {
                dest: path.to_path_buf(),
                content: Content::Device(bytes),
            });
        }
        _ => {}
    }
    let dir = dir_of(path);
    match fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(IoError::NoDirectory {
                path: path.to_path_buf(),
                dir,
                exists: true,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(IoError::NoDirectory {
                path: path.to_path_buf(),
                dir,
                exists: false,
            })
        }
        Err(e) => return Err(write_err(e)),
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| write_err(std::io::Error::other("not a file name")))?;
    let mut tmp = TempFile::create(&dir, file_name).map_err(write_err)?;
    tmp.write(body).map_err(write_err)?;
    if let Some(p) = keep_permissions {
        tmp.set_permissions(p).map_err(write_err)?;
    }
    Ok(Staged {
        dest: path.to_path_buf(),
        content: Content::Temp(tmp),
    })
}

/// Puts every staged output in place: devices are written first (they
/// cannot be taken back), then the temporary files are renamed over their
/// destinations. If a step fails, the files this call already renamed are
/// removed again and the rest are dropped, so the set is written whole or
/// not at all (a device written before the failure excepted).
pub fn commit(staged: Vec<Staged>) -> Result<(), IoError> {
    let (devices, files): (Vec<Staged>, Vec<Staged>) = staged
        .into_iter()
        .partition(|s| matches!(s.content, Content::Device(_)));
    for s in devices {
        if let Content::Device(bytes) = &s.content {
            fs::OpenOptions::new()
                .write(true)
                .open(&s.dest)
                .and_then(|mut f| f.write_all(bytes))
                .map_err(|source| IoError::Write {
                    path: s.dest.clone(),
                    source,
                })?;
        }
    }
    let mut renamed: Vec<PathBuf> = Vec::new();
    for s in files {
        let Content::Temp(tmp) = s.content else {
            continue;
        };
        if let Err(source) = tmp.persist(&s.dest) {
            for p in &renamed {
                let _ = fs::remove_file(p);
            }
            return Err(IoError::Write {
                path: s.dest,
                source,
            });
        }
        renamed.push(s.dest);
    }
    Ok(())
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
    if path.as_os_str() == "-" {
        return console::print_with(body).map_err(IoError::Stdout);
    }
    commit(vec![stage(path, body)?])
}

/// What identifies the file a path names, whether or not it exists yet:
/// the device and inode of an existing file (so hard links and symbolic
/// links agree), else the canonical directory joined with the name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileId {
    /// Standard input or output (`-`).
    Std,
    /// A device (`/dev/null`): writing it twice overwrites nothing, so it
    /// never collides.
    Device,
    /// An existing file.
    #[cfg(unix)]
    Inode(u64, u64),
    /// A path (canonical where its directory exists).
    Path(PathBuf),
}

/// The [`FileId`] of `path`.
pub fn file_id(path: &Path) -> FileId {
    if path.as_os_str() == "-" {
        return FileId::Std;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = fs::metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if m.file_type().is_char_device() {
                return FileId::Device;
            }
            return FileId::Inode(m.dev(), m.ino());
        }
    }
    if let Ok(p) = fs::canonicalize(path) {
        return FileId::Path(p);
    }
    let dir = fs::canonicalize(dir_of(path)).unwrap_or_else(|_| dir_of(path));
    match path.file_name() {
        Some(name) => FileId::Path(dir.join(name)),
        None => FileId::Path(path.to_path_buf()),
    }
}

/// Refuses, before any work, outputs that would write over the input or
/// over each other: `outputs` are (flag, path) pairs of the outputs given
/// (`-` is standard output; `--json` and the like pass `-` too). The error
/// names both flags and the path.
pub fn check_outputs(input: Option<&Path>, outputs: &[(&str, &Path)]) -> Result<(), String> {
    let input_id = input.filter(|p| p.as_os_str() != "-").map(file_id);
    let ids: Vec<FileId> = outputs.iter().map(|(_, p)| file_id(p)).collect();
    for (k, ((flag, path), id)) in outputs.iter().zip(&ids).enumerate() {
        if input_id.as_ref() == Some(id) {
            return Err(format!(
                "{flag} {} is the input file (inputs are never modified)",
                path.display()
            ));
        }
        if *id == FileId::Device {
            continue;
        }
        if let Some(j) = ids[..k].iter().position(|x| x == id) {
            let first = outputs[j].0;
            return Err(if *id == FileId::Std {
                format!("{first} and {flag} would both write standard output")
            } else {
                format!(
                    "{first} and {flag} both name {}; give each output its own file",
                    path.display()
                )
            });
        }
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
