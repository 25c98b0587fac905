//! The temporary files of atomic writes, and their cleanup.
//!
//! An output is written to `.NAME.tusk-tmp-PID` beside its destination and
//! renamed over it when complete (`crate::io`). Every such file is in a
//! process-wide registry from its creation to its rename or removal, so:
//!
//! - SIGINT, SIGTERM and SIGHUP remove the registered files and end the
//!   process with the conventional code 128 + the signal number
//!   ([`install_signal_cleanup`]); creation, rename and the handler hold
//!   the registry's lock, so the handler never misses a file that exists
//!   and no file appears after it ran;
//! - a process killed harder (SIGKILL, a power cut) leaves at most files of
//!   that clearly named pattern, and the next tusk that writes into the
//!   directory removes those whose process has ended ([`clean_stale`]):
//!   only names of the exact pattern, only regular files, only when the
//!   process table can be read (`/proc` on Linux; elsewhere nothing is
//!   removed, since a live writer cannot be told from a dead one).

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The marker between the destination's name and the writer's PID.
const MARK: &str = ".tusk-tmp-";

/// The temporary files of this process that exist now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The directories this process has already cleaned of stale files.
static CLEANED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// The registry, even if a thread panicked while holding it (it is a plain
/// list of paths: a panic cannot leave it inconsistent).
fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The temporary name of `dest` for this process, in `dest`'s directory.
pub fn temp_path(dir: &Path, file_name: &std::ffi::OsStr) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(file_name);
    name.push(format!("{MARK}{}", std::process::id()));
    dir.join(name)
}

/// The writer's PID of a temporary file name of the pattern, if it is one.
fn writer_pid(name: &std::ffi::OsStr) -> Option<u32> {
    let name = name.to_str()?;
    let rest = name.strip_prefix('.')?;
    let k = rest.rfind(MARK)?;
    let pid = &rest[k + MARK.len()..];
    if k == 0 || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// A temporary file that exists and is registered; dropped without
/// [`TempFile::persist`], it is removed.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    file: Option<File>,
}

impl TempFile {
    /// Creates (exclusively) and registers the temporary file of a
    /// destination named `file_name` in `dir`, after removing the stale
    /// temporary files of `dir` once per process.
    pub fn create(dir: &Path, file_name: &std::ffi::OsStr) -> std::io::Result<TempFile> {
        clean_stale(dir);
        let path = temp_path(dir, file_name);
        let mut reg = live();
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        reg.push(path.clone());
        Ok(TempFile {
            path,
            file: Some(file),
        })
    }

    /// Writes the whole content with `body`, then syncs and closes the
    /// file (it stays registered until renamed or dropped).
    pub fn write(
        &mut self,
        body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let Some(mut f) = self.file.take() else {
            return Err(std::io::Error::other(
                "the temporary file is already closed",
            ));
        };
        body(&mut f)?;
        f.sync_all()
    }

    /// Gives the file `permissions` (those of the file it will replace).
    pub fn set_permissions(&self, permissions: fs::Permissions) -> std::io::Result<()> {
        fs::set_permissions(&self.path, permissions)
    }

    /// Renames the file over `dest`; it leaves the registry in the same
    /// step.
    pub fn persist(mut self, dest: &Path) -> std::io::Result<()> {
        self.file = None;
        let mut reg = live();
        fs::rename(&self.path, dest)?;
        reg.retain(|p| p != &self.path);
        drop(reg);
        // Renamed: nothing left for the destructor to remove.
        self.path = PathBuf::new();
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.path.as_os_str().is_empty() {
            return;
        }
        self.file = None;
        let mut reg = live();
        let _ = fs::remove_file(&self.path);
        reg.retain(|p| p != &self.path);
    }
}

/// Removes every registered temporary file (the signal handler's work).
fn remove_all(reg: &mut Vec<PathBuf>) {
    for p in reg.drain(..) {
        let _ = fs::remove_file(p);
    }
}

/// Starts the thread that, on SIGINT, SIGTERM or SIGHUP, removes the
/// temporary files and exits with 128 + the signal number. Without it
/// (or where signals cannot be caught) the default action applies and
/// [`clean_stale`] collects what is left.
pub fn install_signal_cleanup() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("tusk-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    // Held until the process is gone: no temporary file can
                    // be created or renamed after this point.
                    let mut reg = live();
                    remove_all(&mut reg);
                    std::process::exit(128 + sig);
                }
            });
    }
}

/// True when the process `pid` may still be running; false only when the
/// process table says it is not.
fn may_be_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return true;
    }
    proc.join(pid.to_string()).exists()
}

/// Removes the temporary files in `dir` left by processes that have ended
/// (module doc), once per directory per process, and says so on standard
/// error. A file of this process's PID that is not in the registry is a
/// leftover of an earlier process that had the same PID.
pub fn clean_stale(dir: &Path) {
    let key = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    {
        let mut cleaned = CLEANED.lock().unwrap_or_else(|e| e.into_inner());
        if !cleaned.get_or_insert_with(HashSet::new).insert(key) {
            return;
        }
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    for e in entries.flatten() {
        let Some(pid) = writer_pid(&e.file_name()) else {
            continue;
        };
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = e.path();
        let stale = if pid == me {
            !live().contains(&path)
        } else {
            !may_be_alive(pid)
        };
        if stale && fs::remove_file(&path).is_ok() {
            crate::console::eprint(&format!(
                "note: removed {}, left by an earlier tusk (process {pid}) that did not finish\n",
                path.display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn only_the_exact_pattern_names_a_writer() {
        assert_eq!(writer_pid(OsStr::new(".out.tusk.tusk-tmp-123")), Some(123));
        assert_eq!(
            writer_pid(OsStr::new(".a.tusk-tmp-1.tusk-tmp-77")),
            Some(77)
        );
        for not in [
            "out.tusk.tusk-tmp-123",
            ".out.tusk.tusk-tmp-",
            ".out.tusk.tusk-tmp-12a",
            "..tusk-tmp-5x",
            ".tusk-tmp-5",
            ".out.tusk",
        ] {
            assert_eq!(writer_pid(OsStr::new(not)), None, "{not}");
        }
        let p = temp_path(Path::new("d"), OsStr::new("x.svg"));
        assert_eq!(writer_pid(p.file_name().unwrap()), Some(std::process::id()));
    }

    #[test]
    fn a_dropped_temp_file_is_removed_and_unregistered() {
        let d = std::env::temp_dir().join(format!("tusk-tempfiles-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let t = TempFile::create(&d, OsStr::new("a.txt")).unwrap();
        let path = t.path.clone();
        assert!(path.exists() && live().contains(&path));
        drop(t);
        assert!(!path.exists() && !live().contains(&path));
        let mut t = TempFile::create(&d, OsStr::new("b.txt")).unwrap();
        t.write(|w| w.write_all(b"b")).unwrap();
        t.persist(&d.join("b.txt")).unwrap();
        assert_eq!(fs::read(d.join("b.txt")).unwrap(), b"b");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        fs::remove_dir_all(&d).unwrap();
    }
}
