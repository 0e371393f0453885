//! `--out` and `--summary` destinations: a file (truncated, or appended to with
//! `--resume`) or stdout for `-`.
//!
//! Nothing an output names is destroyed before the run is sure to go ahead: `--out` is
//! opened at start without truncating it ([`PendingOut`]) and cut only once every
//! start-up check has passed; the summary is written whole to a temporary file and
//! renamed over its name ([`write_atomic`]), so a crash or a second Ctrl-C leaves either
//! the old summary or the new one, never half of one.

use std::cell::{Cell, RefCell};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::Serialize;

/// `--out`, shared by the crawl loop and the signal task (which flushes it on a second
/// Ctrl-C before exiting). Everything runs on the System's one thread.
pub type SharedOut = Rc<RefCell<Option<Box<dyn Write>>>>;

/// `--out` opened and checked, not truncated yet.
pub struct PendingOut {
    /// `None`: stdout.
    file: Option<File>,
    path: PathBuf,
    append: bool,
    /// The file did not exist before: [`Self::abandon`] removes it.
    created: bool,
}

impl PendingOut {
    /// Open `path` for writing without changing it (created when absent).
    pub fn open(path: &Path, append: bool) -> io::Result<Self> {
        if path == Path::new("-") {
            return Ok(PendingOut {
                file: None,
                path: path.to_path_buf(),
                append,
                created: false,
            });
        }
        let existed = path.symlink_metadata().is_ok();
        if path.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(io::Error::other("is a directory"));
        }
        let file = OpenOptions::new()
            .write(true)
            .append(append)
            .create(true)
            .truncate(false)
            .open(path)?;
        Ok(PendingOut {
            file: Some(file),
            path: path.to_path_buf(),
            append,
            created: !existed,
        })
    }

    /// Start writing: the file is truncated now, unless appending.
    pub fn commit(self) -> io::Result<Box<dyn Write>> {
        match self.file {
            None => Ok(Box::new(io::stdout().lock())),
            Some(f) => {
                // A device or a pipe cannot be truncated, and needs not be.
                if !self.append && f.metadata()?.is_file() {
                    f.set_len(0)?;
                }
                Ok(Box::new(BufWriter::new(f)))
            }
        }
    }

    /// What syncs `--out` to the disk ([`OutSync`]): `None` for a pipe or a terminal,
    /// which have no disk to reach.
    pub fn sync_handle(&self) -> io::Result<Option<OutSync>> {
        let file = match &self.file {
            Some(f) => f.try_clone()?,
            // A closed stdout has nothing to sync.
            #[cfg(unix)]
            None => match std::os::fd::AsFd::as_fd(&io::stdout()).try_clone_to_owned() {
                Ok(fd) => File::from(fd),
                Err(_) => return Ok(None),
            },
            #[cfg(not(unix))]
            None => return Ok(None),
        };
        if !file.metadata()?.is_file() {
            return Ok(None);
        }
        let new_in = Cell::new(self.created.then(|| self.path.clone()));
        Ok(Some(OutSync { file, new_in }))
    }

    /// The run does not go ahead: a file this run created is removed, any other is left
    /// as it was.
    pub fn abandon(self) {
        if self.created {
            drop(self.file);
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Brings what is written to `--out` (and flushed) to the disk.
pub struct OutSync {
    file: File,
    /// The file's path while its entry in its directory, made by this run, is not synced.
    new_in: Cell<Option<PathBuf>>,
}

impl OutSync {
    /// What was written and flushed to `--out` is on the disk once this returns: its data
    /// (`sync_data`), and the first time, the directory entry of a file this run created.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()?;
        if let Some(p) = self.new_in.take() {
            if let Err(e) = sync_dir(&p) {
                self.new_in.set(Some(p));
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Cut an unfinished last line (a hard kill mid-write) off the file at `path`, so that
/// appended records start on a line of their own; reads only the file's tail. Returns the
/// bytes cut (0 for a missing, empty or complete file, or one that is not a regular file).
pub fn cut_unfinished_line(path: &Path) -> io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Ok(0);
    }
    let len = meta.len();
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|b| *b == b'\n') {
            end = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if end < len {
        f.set_len(end)?;
    }
    Ok(len - end)
}

/// One JSON line.
pub fn write_line(w: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *w, value)?;
    w.write_all(b"\n")
}

/// Flush `--out` if there is one.
pub fn flush(out: &SharedOut) -> Result<(), String> {
    match out.borrow_mut().as_mut() {
        Some(w) => w.flush().map_err(|e| format!("writing --out: {e}")),
        None => Ok(()),
    }
}

/// Where a replaced file really is: a symlink is followed (the file it points to is
/// replaced, the link stays).
fn resolve(path: &Path) -> io::Result<PathBuf> {
    match std::fs::canonicalize(path) {
        Ok(p) => Ok(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(path.to_path_buf()),
        Err(e) => Err(e),
    }
}

/// The temporary name `target` is written under before the rename: in its directory
/// (a rename does not cross file systems), hidden, this process's.
fn temp_name(target: &Path) -> io::Result<PathBuf> {
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::other("names no file"))?;
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Check at start that [`write_atomic`] can write `path` at the end: not a directory,
/// and its directory takes a new file (tried, and removed at once).
pub fn probe_atomic(path: &Path) -> io::Result<()> {
    let target = resolve(path)?;
    match target.metadata() {
        Ok(m) if m.is_dir() => return Err(io::Error::other("is a directory")),
        Ok(m) if !m.is_file() => return Ok(()),
        _ => {}
    }
    let tmp = temp_name(&target)?;
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    std::fs::remove_file(&tmp)
}

/// Replace `path` with `data` in one step: written to a temporary file in the same
/// directory, synced, then renamed over `path`. A device or a pipe (`/dev/stdout`, a
/// FIFO) cannot be replaced: it is written as it is.
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut f = Replacement::create(path)?;
    f.write_all(data)?;
    f.commit()
}

/// A file written under a temporary name and renamed over its own on
/// [`Replacement::commit`]; dropped without a commit, it is removed and the old file
/// stays. A device or a pipe is written in place.
pub struct Replacement {
    out: BufWriter<File>,
    /// (temporary, target) for a file; `None` for a device or a pipe.
    rename: Option<(PathBuf, PathBuf)>,
}

impl Replacement {
    pub fn create(path: &Path) -> io::Result<Self> {
        let target = resolve(path)?;
        match target.metadata() {
            Ok(m) if m.is_dir() => return Err(io::Error::other("is a directory")),
            Ok(m) if !m.is_file() => {
                let f = OpenOptions::new().write(true).open(&target)?;
                return Ok(Replacement {
                    out: BufWriter::new(f),
                    rename: None,
                });
            }
            _ => {}
        }
        let tmp = temp_name(&target)?;
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        // The new file takes the old one's mode (a results file kept private stays so).
        if let Ok(m) = target.metadata() {
            f.set_permissions(m.permissions())?;
        }
        Ok(Replacement {
            out: BufWriter::new(f),
            rename: Some((tmp, target)),
        })
    }

    /// Put the new content in place: synced, renamed over the target, and the directory
    /// synced so that the rename itself survives a power cut.
    pub fn commit(mut self) -> io::Result<()> {
        self.out.flush()?;
        let Some((tmp, target)) = self.rename.take() else {
            return Ok(());
        };
        let done = self
            .out
            .get_ref()
            .sync_all()
            .and_then(|()| std::fs::rename(&tmp, &target));
        if done.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        done?;
        sync_dir(&target)
    }
}

impl Write for Replacement {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.rename.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Sync the directory holding `path` (its entries: a rename into it, a file created
/// there). Where a directory cannot be opened as a file (not Unix), there is nothing to
/// sync.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if cfg!(unix) {
        File::open(dir)?.sync_all()
    } else {
        Ok(())
    }
}

/// Write `data` to stdout; a closed or full stdout is an error, not a panic.
pub fn write_stdout(data: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(data).and_then(|()| out.flush())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("exitcrawl-output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn pending_out_truncates_only_on_commit() {
        let d = temp_dir("pending");
        let p = d.join("out.jsonl");
        std::fs::write(&p, "kept\n").unwrap();
        let pending = PendingOut::open(&p, false).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "kept\n");
        pending.abandon();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "kept\n",
            "not created: kept"
        );
        let mut w = PendingOut::open(&p, false).unwrap().commit().unwrap();
        w.write_all(b"new\n").unwrap();
        drop(w);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        let fresh = d.join("fresh.jsonl");
        PendingOut::open(&fresh, false).unwrap().abandon();
        assert!(!fresh.exists(), "a file the run created is removed");
        assert!(PendingOut::open(&d, false).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_unfinished_last_line_is_cut() {
        let d = temp_dir("cut");
        let p = d.join("out.jsonl");
        assert_eq!(cut_unfinished_line(&p).unwrap(), 0, "missing");
        std::fs::write(&p, "{\"a\":1}\n{\"b\":").unwrap();
        assert_eq!(cut_unfinished_line(&p).unwrap(), 5);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":1}\n");
        assert_eq!(cut_unfinished_line(&p).unwrap(), 0, "complete");
        let long = "x".repeat(200_000);
        std::fs::write(&p, format!("one\n{long}")).unwrap();
        assert_eq!(
            cut_unfinished_line(&p).unwrap(),
            200_000,
            "beyond one chunk"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one\n");
        std::fs::write(&p, "no newline").unwrap();
        assert_eq!(cut_unfinished_line(&p).unwrap(), 10);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn atomic_writes_replace_the_target_of_a_link() {
        let d = temp_dir("atomic");
        let real = d.join("real.json");
        std::fs::write(&real, "old").unwrap();
        let link = d.join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        probe_atomic(&link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            2,
            "no temporary file left"
        );
        assert!(probe_atomic(&d).is_err());
        assert!(probe_atomic(&d.join("missing/x.json")).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
