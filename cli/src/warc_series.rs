//! The files of a `--warc` series on disk: their names, which of them are there, the lock
//! that keeps one process per series, and where a run starts writing.
//!
//! A series is `FILE` (index 0), then `STEM-00001.warc.gz`, … A resumed run goes on after
//! the highest index there or named by the records, whichever is later, so a name is
//! never used twice even when earlier files were moved away. The last file there is first
//! cut back to what the records account for (see [`crate::warc_repair`]).

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

use super::warc_repair::{cut_to_accounted, Accounted};

/// `--warc FILE`: the first file's name, and how the rotated ones are named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarcName {
    /// FILE without its `.warc[.gz]` ending.
    stem: PathBuf,
    pub gzip: bool,
}

impl WarcName {
    /// FILE must end in `.warc.gz` (gzip members) or `.warc` (plain).
    pub fn parse(path: &Path) -> Result<WarcName, String> {
        let s = path.to_string_lossy();
        let (stem, gzip) = if let Some(stem) = s.strip_suffix(".warc.gz") {
            (stem, true)
        } else if let Some(stem) = s.strip_suffix(".warc") {
            (stem, false)
        } else {
            return Err(format!(
                "--warc: {s:?} must end in .warc.gz (one gzip member per record) or .warc \
                 (uncompressed)"
            ));
        };
        if stem.is_empty() || stem.ends_with('/') {
            return Err(format!("--warc: {s:?} has no file name before .warc"));
        }
        Ok(WarcName {
            stem: PathBuf::from(stem),
            gzip,
        })
    }

    fn ext(&self) -> &'static str {
        if self.gzip {
            ".warc.gz"
        } else {
            ".warc"
        }
    }

    /// File `index`: 0 is FILE as given, then `STEM-00001.warc.gz`, …
    pub fn file(&self, index: u32) -> PathBuf {
        let mut s = self.stem.clone().into_os_string();
        if index > 0 {
            s.push(format!("-{index:05}"));
        }
        s.push(self.ext());
        PathBuf::from(s)
    }

    /// The name of file `index` without its directory, as the records and the warcinfo
    /// record's `WARC-Filename` give it.
    pub fn file_name(&self, index: u32) -> String {
        let file = self.file(index);
        file.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    }

    /// The index of the series file called `name` (without directory), if it is one.
    pub fn index_of(&self, name: &str) -> Option<u32> {
        let stem = self.stem.file_name()?.to_str()?;
        let rest = name.strip_prefix(stem)?.strip_suffix(self.ext())?;
        let index = match rest {
            "" => 0,
            _ => rest.strip_prefix('-')?.parse().ok()?,
        };
        // `-1` or `-000001` are not how the series spells an index.
        (self.file_name(index) == name).then_some(index)
    }

    /// The indices of the series' files in its directory, lowest first.
    fn present(&self) -> io::Result<Vec<u32>> {
        let dir = match self.stem.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?
        {
            let name = entry?.file_name();
            if let Some(i) = name.to_str().and_then(|n| self.index_of(n)) {
                found.push(i);
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// `FILE.lock`, beside the series.
    fn lock_path(&self) -> PathBuf {
        let mut s = self.file(0).into_os_string();
        s.push(".lock");
        PathBuf::from(s)
    }
}

/// The series' lock (`FILE.lock`, an exclusive `flock`), held while the run writes it:
/// a second process repairing the live file on `--resume`, or truncating it, would break
/// the series and the first process's records. The file stays; the lock goes with the
/// process, however it ends.
pub struct SeriesLock {
    _file: File,
}

impl SeriesLock {
    /// Take the lock, or say that another process holds it.
    pub fn take(name: &WarcName) -> io::Result<SeriesLock> {
        let path = name.lock_path();
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(SeriesLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "{} is locked: another process is writing this series (one process \
                     per series: wait for it to end, or give this run another --warc FILE)",
                    path.display()
                ),
            )),
            Err(TryLockError::Error(e)) => Err(io::Error::new(
                e.kind(),
                format!("locking {}: {e}", path.display()),
            )),
        }
    }
}

/// Per file of a series named by the records (its name, without directory): the exchange
/// there that ends last, as `(offset, end)` in bytes.
pub type NamedEnds = HashMap<String, (u64, u64)>;

/// The index a run writes first. A new run refuses a series whose later files are there
/// (they are another run's). A resumed one cuts the last file there back to what the
/// records account for, and goes on after it, or after the last file the records name.
pub fn start_index(name: &WarcName, resume: bool, named: &NamedEnds) -> io::Result<u32> {
    let present = name.present()?;
    if !resume {
        return match present.iter().find(|i| **i > 0) {
            Some(i) => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} is there from an earlier run's series: remove the series, name \
                     another file, or add --resume to go on with it",
                    name.file(*i).display()
                ),
            )),
            None => Ok(0),
        };
    }
    let last_named = named.keys().filter_map(|n| name.index_of(n)).max();
    let Some(&last) = present.last() else {
        return Ok(last_named.map_or(0, |n| n + 1));
    };
    // A file before the last one the records name was finished before that one began.
    if last_named.is_none_or(|n| last >= n) {
        repair(name, last, named, last_named.is_some())?;
    }
    Ok(last.max(last_named.unwrap_or(0)) + 1)
}

/// Cut file `index`, the last there, back to what the records account for: up to the
/// exchange they name last in it; with none named in it but some in the series, to its
/// warcinfo record (its exchanges have no record); with none named in the series (records
/// written without `warc_file`, or none), to its last whole record.
fn repair(name: &WarcName, index: u32, named: &NamedEnds, series_named: bool) -> io::Result<()> {
    let path = name.file(index);
    let accounted = match named.get(&name.file_name(index)) {
        Some(&(offset, end)) => Accounted::Through { offset, end },
        None if series_named => Accounted::Nothing,
        None => Accounted::Unknown,
    };
    let repaired = cut_to_accounted(&path, name.gzip, accounted)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    if let Some(end) = repaired.short_of {
        tracing::warn!(
            file = %path.display(),
            named_end = end,
            "the records name an exchange this WARC file does not hold whole; cut after its last whole record"
        );
    }
    if repaired.cut > 0 {
        tracing::warn!(
            file = %path.display(),
            bytes = repaired.cut,
            "cut what an interrupted run left in a WARC file without a record"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let n = WarcName::parse(Path::new("out/crawl.warc.gz")).unwrap();
        assert_eq!(n.file(0), PathBuf::from("out/crawl.warc.gz"));
        assert_eq!(n.file(2), PathBuf::from("out/crawl-00002.warc.gz"));
        assert_eq!(n.index_of("crawl.warc.gz"), Some(0));
        assert_eq!(n.index_of("crawl-00002.warc.gz"), Some(2));
        assert_eq!(n.index_of("crawl-123456.warc.gz"), Some(123_456));
        for other in [
            "crawl-2.warc.gz",
            "crawl-00002.warc",
            "crawl.warc.gz.lock",
            "x.warc.gz",
        ] {
            assert_eq!(n.index_of(other), None, "{other}");
        }
        let n = WarcName::parse(Path::new("a.warc")).unwrap();
        assert_eq!(n.file(1), PathBuf::from("a-00001.warc"));
        assert_eq!(n.lock_path(), PathBuf::from("a.warc.lock"));
        assert!(WarcName::parse(Path::new("a.gz")).is_err());
        assert!(WarcName::parse(Path::new(".warc.gz")).is_err());
    }

    #[test]
    fn one_lock_per_series() {
        let dir = std::env::temp_dir().join(format!("warc-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let name = WarcName::parse(&dir.join("w.warc.gz")).unwrap();
        let held = SeriesLock::take(&name).unwrap();
        let e = SeriesLock::take(&name).err().expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(e.to_string().contains("w.warc.gz.lock is locked"), "{e}");
        let other = WarcName::parse(&dir.join("w.warc")).unwrap();
        drop(SeriesLock::take(&other).unwrap());
        drop(held);
        drop(SeriesLock::take(&name).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
