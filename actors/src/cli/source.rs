//! Where URLs come from: a file or stdin read line by line on a thread of its own (never
//! the whole file), or the demo's generated URLs, feeding a bounded channel so a slow
//! stdin never blocks the actors.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use exitcrawl::redact::mask_url;
use exitcrawl_testsite::TestSite;
use tokio::sync::mpsc;

use super::frontier::FrontierUrl;

/// Lines read ahead of the fetches (the reader thread waits when this many are queued).
const READ_AHEAD: usize = 1024;
/// A regular `--urls` file up to this size is counted before the crawl (exact total).
const PRECOUNT_MAX_BYTES: u64 = 16 << 20;
/// Longest input line kept, bytes. A longer line keeps its first `MAX_LINE` bytes (the
/// scheduler then refuses it as too long, so it still gets its record) and the rest is
/// skipped without being buffered: a 10 GB line must not take 10 GB.
const MAX_LINE: usize = 16 * 1024;

/// Where URLs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlSource {
    File(PathBuf),
    Stdin,
    /// The demo's `n` generated URLs.
    Demo(u64),
    /// A shared Redis frontier (`--frontier` without `--enqueue`).
    Frontier(FrontierUrl),
}

impl UrlSource {
    /// `-` is stdin, anything else a file.
    pub fn from_arg(v: &str) -> UrlSource {
        if v == "-" {
            UrlSource::Stdin
        } else {
            UrlSource::File(PathBuf::from(v))
        }
    }
}

/// What the reader thread has done so far (shared with the progress display).
#[derive(Debug, Default)]
pub struct ReadStats {
    /// Size of the `--urls` file when it is a regular file (0 otherwise).
    pub size: u64,
    /// Bytes of the file consumed.
    pub bytes: AtomicU64,
    /// URL lines seen (skipped ones included).
    pub lines: AtomicU64,
    /// URL lines skipped by `--resume`.
    pub skipped: AtomicU64,
    /// The exact number of URL lines, once known (0 = unknown): the demo's count, or a
    /// small regular file's first pass.
    pub total: AtomicU64,
}

/// The receiving end of the reader.
pub type Lines = mpsc::Receiver<io::Result<String>>;

/// Open the source (errors here are argument errors: exit 2) and start a thread feeding
/// its URLs into a bounded channel. URLs in `skip` (`--resume`) are counted and left out.
pub fn spawn_reader(
    source: &UrlSource,
    demo_site: Option<&TestSite>,
    skip: HashSet<String>,
) -> io::Result<(Lines, Arc<ReadStats>)> {
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    let stats = match source {
        UrlSource::Demo(n) => {
            let n = *n;
            let stats = Arc::new(ReadStats::default());
            stats.total.store(n, Ordering::Relaxed);
            let base = demo_site.map(TestSite::base_url).unwrap_or_default();
            let st = Arc::clone(&stats);
            std::thread::spawn(move || {
                for i in 0..n {
                    st.lines.fetch_add(1, Ordering::Relaxed);
                    if tx.blocking_send(Ok(format!("{base}/item/{i}"))).is_err() {
                        return;
                    }
                }
            });
            stats
        }
        UrlSource::Frontier(_) => {
            drop(tx);
            Arc::new(ReadStats::default())
        }
        UrlSource::Stdin => {
            let stats = Arc::new(ReadStats::default());
            let st = Arc::clone(&stats);
            std::thread::spawn(move || feed_lines(io::stdin().lock(), &tx, &st, &skip));
            stats
        }
        UrlSource::File(path) => spawn_file_reader(path, tx, skip)?,
    };
    Ok((rx, stats))
}

fn spawn_file_reader(
    path: &Path,
    tx: mpsc::Sender<io::Result<String>>,
    skip: HashSet<String>,
) -> io::Result<Arc<ReadStats>> {
    let file = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let meta = file.metadata()?;
    let size = if meta.is_file() { meta.len() } else { 0 };
    let stats = Arc::new(ReadStats {
        size,
        ..ReadStats::default()
    });
    let st = Arc::clone(&stats);
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        if size > 0 && size <= PRECOUNT_MAX_BYTES {
            if let Some(n) = count_url_lines(&path) {
                st.total.store(n, Ordering::Relaxed);
            }
        }
        feed_lines(BufReader::new(file), &tx, &st, &skip)
    });
    Ok(stats)
}

/// Like `read_until(b'\n')`, but keeps at most `MAX_LINE` bytes of the line. Returns the
/// bytes consumed (0 at end of input).
pub fn read_line_capped(input: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut consumed = 0;
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = MAX_LINE.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        input.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}

/// The URL lines of a small file (the progress bar's total); `None` on a read error.
fn count_url_lines(path: &Path) -> Option<u64> {
    let mut input = BufReader::new(File::open(path).ok()?);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        match read_line_capped(&mut input, &mut buf) {
            Ok(0) => return Some(n),
            Ok(_) => n += u64::from(url_line(&buf).is_some()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
}

/// The URL of an input line: trimmed; `None` for blank lines and `#` comments. A line
/// that is not UTF-8 is taken lossily: it then fails as an invalid URL, with a record.
pub fn url_line(raw: &[u8]) -> Option<String> {
    let line = String::from_utf8_lossy(raw);
    let line = line.trim();
    (!line.is_empty() && !line.starts_with('#')).then(|| line.to_string())
}

/// Send every URL line of `input` that is not in `skip`.
fn feed_lines(
    mut input: impl BufRead,
    tx: &mpsc::Sender<io::Result<String>>,
    stats: &ReadStats,
    skip: &HashSet<String>,
) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match read_line_capped(&mut input, &mut buf) {
            Ok(0) => return,
            Ok(n) => {
                stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                let Some(url) = url_line(&buf) else { continue };
                stats.lines.fetch_add(1, Ordering::Relaxed);
                if !skip.is_empty() && skip.contains(&mask_url(&url)) {
                    stats.skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if tx.blocking_send(Ok(url)).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_capped_and_trimmed() {
        let mut long = vec![b'a'; MAX_LINE * 3];
        long.extend_from_slice(b"\nnext\n");
        let mut input = io::Cursor::new(long);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_capped(&mut input, &mut buf).unwrap(),
            MAX_LINE * 3 + 1
        );
        assert_eq!(buf.len(), MAX_LINE);
        buf.clear();
        read_line_capped(&mut input, &mut buf).unwrap();
        assert_eq!(url_line(&buf).as_deref(), Some("next"));
        assert_eq!(url_line(b"  # comment\n"), None);
        assert_eq!(url_line(b"   \n"), None);
    }
}
