//! No output may be an input or another output: `--summary urls.txt` would replace the
//! URL list, `--out crawl.toml` the config. Paths are compared as the files they name —
//! canonical paths (symlinks, `..`, `./` resolved) and, for files that exist, device and
//! inode (hard links) — before any file is touched.

use std::io;
use std::path::{Path, PathBuf};

/// What a path names.
#[derive(Debug, PartialEq, Eq)]
struct FileId {
    canonical: PathBuf,
    /// Device and inode, when the file exists.
    inode: Option<(u64, u64)>,
}

impl FileId {
    fn same(&self, other: &FileId) -> bool {
        self.canonical == other.canonical
            || matches!((self.inode, other.inode), (Some(a), Some(b)) if a == b)
    }
}

/// Identify `path`: the file itself when it exists, else its canonical directory and
/// name (`None` when even the directory cannot be resolved: opening it will say why).
fn identify(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt;
    match std::fs::canonicalize(path) {
        Ok(canonical) => {
            #[cfg(unix)]
            let inode = std::fs::metadata(&canonical)
                .ok()
                .map(|m| (m.dev(), m.ino()));
            #[cfg(not(unix))]
            let inode = None;
            Some(FileId { canonical, inode })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let name = path.file_name()?;
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => std::fs::canonicalize(d).ok()?,
                _ => std::env::current_dir().ok()?,
            };
            Some(FileId {
                canonical: dir.join(name),
                inode: None,
            })
        }
        Err(_) => None,
    }
}

/// A path given on the command line, with the flag that gave it.
pub struct Named<'a> {
    pub flag: &'static str,
    pub path: &'a Path,
}

/// Refuse an output that is the same file as an input or as another output. `-`
/// (stdin/stdout) is no file. The message names both flags and paths.
pub fn check_distinct(inputs: &[Named<'_>], outputs: &[Named<'_>]) -> Result<(), String> {
    let id = |n: &Named<'_>| {
        (n.path != Path::new("-"))
            .then(|| identify(n.path))
            .flatten()
    };
    let ins: Vec<_> = inputs.iter().map(|n| (n, id(n))).collect();
    let outs: Vec<_> = outputs.iter().map(|n| (n, id(n))).collect();
    for (i, (out, out_id)) in outs.iter().enumerate() {
        let Some(out_id) = out_id else { continue };
        let earlier = outs[..i].iter().map(|(n, f)| (n, f, "output"));
        let others = ins.iter().map(|(n, f)| (n, f, "input")).chain(earlier);
        for (other, other_id, what) in others {
            if other_id.as_ref().is_some_and(|o| o.same(out_id)) {
                return Err(format!(
                    "{} {} is the same file as {} {} (an {what}): refusing to write over it \
                     (nothing was written; give {} another path)",
                    out.flag,
                    out.path.display(),
                    other.flag,
                    other.path.display(),
                    out.flag
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_files_are_found_through_links_and_dots() {
        let d = std::env::temp_dir().join(format!("exitcrawl-paths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let urls = d.join("urls.txt");
        std::fs::write(&urls, "http://a/\n").unwrap();
        std::fs::hard_link(&urls, d.join("hard.txt")).unwrap();
        std::os::unix::fs::symlink(&urls, d.join("soft.txt")).unwrap();
        fn n<'a>(flag: &'static str, path: &'a Path) -> Named<'a> {
            Named { flag, path }
        }
        let dotted = d.join("sub/../urls.txt");
        for alias in [urls.clone(), dotted, d.join("hard.txt"), d.join("soft.txt")] {
            let e = check_distinct(&[n("--urls", &urls)], &[n("--summary", &alias)]).unwrap_err();
            assert!(e.contains("--summary") && e.contains("--urls"), "{e}");
        }
        let (a, b) = (d.join("new.json"), d.join("sub/../new.json"));
        let e = check_distinct(&[], &[n("--out", &a), n("--summary", &b)]).unwrap_err();
        assert!(e.contains("an output"), "{e}");
        let dash = Path::new("-");
        check_distinct(
            &[n("--urls", dash)],
            &[n("--out", dash), n("--summary", dash)],
        )
        .unwrap();
        check_distinct(&[n("--urls", &urls)], &[n("--out", &a)]).unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }
}
