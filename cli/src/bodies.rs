//! `--bodies DIR`: every answer's body in a file named by its SHA-256 (`DIR/ab/abcd…`, 256
//! subdirectories so no directory grows past a few thousand entries per million bodies).
//! A body already stored is not written again; a new one is written to a temporary file of
//! its own (random name, created only if new) and renamed into place, so a file under its
//! final name is whole after any kill (and one a power cut left short is written again, see
//! [`BodyStore::put`]), even with other processes writing the same directory.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The content-addressed store.
pub struct BodyStore {
    dir: PathBuf,
    /// Subdirectories known to exist (by their two hex digits).
    made: [bool; 256],
    /// Temporary names: the `next_tmp`th from `tmp_seed` (see [`BodyStore::tmp_name`]).
    tmp_seed: u64,
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
            tmp_seed: random_seed(),
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
        let tmp = self.write_tmp(&parent, body)?;
        if let Err(e) = fs::rename(&tmp, &path) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.written += 1;
        Ok(())
    }

    /// Write `body` to a temporary file of its own in `parent`. The name is random and
    /// the file created only if new: another process sharing the directory (consumers in
    /// containers, each pid 1, on one volume) never writes into it, nor this one into
    /// theirs. A failed write removes the file, so a full disk leaves nothing behind.
    fn write_tmp(&mut self, parent: &Path, body: &[u8]) -> io::Result<PathBuf> {
        let mut tries = 0;
        let (tmp, mut f) = loop {
            let tmp = parent.join(self.tmp_name(self.next_tmp));
            self.next_tmp += 1;
            match fs::File::options().write(true).create_new(true).open(&tmp) {
                Ok(f) => break (tmp, f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
                Err(e) => return Err(e),
            }
        };
        if let Err(e) = f.write_all(body) {
            drop(f);
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(tmp)
    }

    /// The `n`th temporary name: the process id (to tell whose a left-over file was) and
    /// 64 bits from the store's random seed through splitmix64, distinct for every `n`.
    fn tmp_name(&self, n: u64) -> String {
        let mut z = self
            .tmp_seed
            .wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        format!(".tmp-{}-{:016x}", std::process::id(), z ^ (z >> 31))
    }
}

/// A seed no other process shares but by chance: std's per-process random hash keys, the
/// time and the process id.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn sha_hex(body: &[u8]) -> String {
        Sha256::digest(body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn tmp_files(dir: &Path) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".tmp-")
            })
            .collect()
    }

    #[test]
    fn a_temporary_name_another_process_holds_is_left_to_it() {
        // Consumers in containers each run as pid 1 and may share one --bodies volume: the
        // name this store picks first may be another process's file being written.
        let dir =
            std::env::temp_dir().join(format!("exitcrawl-bodies-taken-{}", std::process::id()));
        let body = b"this process's body";
        let hex = sha_hex(body);
        let mut s = BodyStore::open(&dir).unwrap();
        let sub = dir.join(&hex[..2]);
        fs::create_dir_all(&sub).unwrap();
        let theirs = sub.join(s.tmp_name(0));
        fs::write(&theirs, b"the other process's bytes, longer than ours").unwrap();
        s.put(&hex, body).unwrap();
        assert_eq!(
            fs::read(&theirs).unwrap(),
            b"the other process's bytes, longer than ours"
        );
        let stored = fs::read(s.path_of(&hex)).unwrap();
        assert_eq!(sha_hex(&stored), hex);
        assert_eq!(tmp_files(&sub), vec![theirs]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        // The final name taken by a directory makes the rename fail, as a full disk makes
        // the write fail: the error is returned and nothing is left beside the bodies.
        let dir =
            std::env::temp_dir().join(format!("exitcrawl-bodies-failed-{}", std::process::id()));
        let body = b"a body";
        let hex = sha_hex(body);
        let mut s = BodyStore::open(&dir).unwrap();
        fs::create_dir_all(s.path_of(&hex).join("in-the-way")).unwrap();
        assert!(s.put(&hex, body).is_err());
        assert_eq!(tmp_files(&dir.join(&hex[..2])), Vec::<PathBuf>::new());
        assert_eq!(s.written, 0);
        let _ = fs::remove_dir_all(&dir);
    }

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
