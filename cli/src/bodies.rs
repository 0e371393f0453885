//! `--bodies DIR`: every answer's body in a file named by its SHA-256 (`DIR/ab/abcd…`, 256
//! subdirectories so no directory grows past a few thousand entries per million bodies).
//! A body already stored is not written again; a new one is written to a temporary name
//! and renamed into place, so a file under its final name is whole after any kill (and one
//! a power cut left short is written again, see [`BodyStore::put`]).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The content-addressed store.
pub struct BodyStore {
    dir: PathBuf,
    /// Subdirectories known to exist (by their two hex digits).
    made: [bool; 256],
    /// Temporary names, unique within the process.
    next_tmp: u64,
    /// Bodies written (not counting those already there).
    pub written: u64,
}

impl BodyStore {
    /// Create DIR if needed.
    pub fn open(dir: &Path) -> io::Result<BodyStore> {
        fs::create_dir_all(dir)?;
        Ok(BodyStore {
            dir: dir.to_path_buf(),
            made: [false; 256],
            next_tmp: 0,
            written: 0,
        })
    }

    /// The path of the body whose SHA-256 is `hex` (64 lower-case hex digits).
    pub fn path_of(&self, hex: &str) -> PathBuf {
        self.dir.join(&hex[..2]).join(hex)
    }

    /// Store `body` under `hex` unless it is there already, whole.
    ///
    /// Whole means of the body's length: a file renamed into place without a sync can be
    /// found empty or short after a power cut (the rename reached the disk, the data did
    /// not), and is then written again rather than trusted. Syncing every body instead
    /// would cost a disk flush per page.
    pub fn put(&mut self, hex: &str, body: &[u8]) -> io::Result<()> {
        let path = self.path_of(hex);
        let sub = u8::from_str_radix(&hex[..2], 16).map_or(0, usize::from);
        let there = |p: &Path| fs::metadata(p).is_ok_and(|m| m.len() == body.len() as u64);
        if self.made[sub] && there(&path) {
            return Ok(());
        }
        let parent = self.dir.join(&hex[..2]);
        if !self.made[sub] {
            fs::create_dir_all(&parent)?;
            self.made[sub] = true;
            if there(&path) {
                return Ok(());
            }
        }
        let tmp = parent.join(format!(".tmp-{}-{}", std::process::id(), self.next_tmp));
        self.next_tmp += 1;
        let mut f = fs::File::create(&tmp)?;
        f.write_all(body)?;
        drop(f);
        fs::rename(&tmp, &path)?;
        self.written += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_once_by_name() {
        let dir = std::env::temp_dir().join(format!("exitcrawl-bodies-{}", std::process::id()));
        let mut s = BodyStore::open(&dir).unwrap();
        let hex = "ab".repeat(32);
        s.put(&hex, b"hello").unwrap();
        s.put(&hex, b"hello").unwrap();
        assert_eq!(s.written, 1);
        assert_eq!(fs::read(s.path_of(&hex)).unwrap(), b"hello");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_short_of_its_body_is_written_again() {
        // What a power cut can leave: the name in place, the data not.
        let dir =
            std::env::temp_dir().join(format!("exitcrawl-bodies-short-{}", std::process::id()));
        let hex = "cd".repeat(32);
        let mut s = BodyStore::open(&dir).unwrap();
        s.put(&hex, b"hello").unwrap();
        fs::write(s.path_of(&hex), b"").unwrap();
        let mut again = BodyStore::open(&dir).unwrap();
        again.put(&hex, b"hello").unwrap();
        assert_eq!(fs::read(again.path_of(&hex)).unwrap(), b"hello");
        assert_eq!(again.written, 1);
        let _ = fs::remove_dir_all(&dir);
    }
}
