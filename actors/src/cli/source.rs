//! Where URLs come from: a file or stdin read line by line on a thread of its own (never
//! the whole file), or the demo's generated URLs, feeding a bounded channel so a slow
//! stdin never blocks the actors.
//!
//! URLs cross the channel in batches of up to [`BATCH`]: one hand-off per URL woke the
//! reader thread once per fetch (a futex wake and two context switches, measured at a
//! tenth of the program's CPU against a fast local site). A batch goes as soon as it is
//! full, and also whenever the reader would otherwise wait for more input, so a slow
//! stdin's URLs are not held back.

use std::collections::HashSet;
use std::fs::File;
use std::future::poll_fn;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use exitcrawl::redact::mask_url;
use exitcrawl_testsite::TestSite;
use tokio::sync::mpsc;

use super::frontier::FrontierUrl;

/// Most URLs in one hand-off from the reader thread.
pub const BATCH: usize = 256;
/// Batches read ahead of the fetches (the reader thread waits when this many are queued):
/// with [`BATCH`], 1024 URLs.
const READ_AHEAD_BATCHES: usize = 4;
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
    /// No URL list: the crawl is seeded by `--sitemap` alone.
    Nothing,
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

/// The receiving end of the reader: URLs one at a time, out of the batches.
pub struct Lines {
    rx: mpsc::Receiver<io::Result<Vec<String>>>,
    batch: std::vec::IntoIter<String>,
}

impl Lines {
    /// The next URL; `None` at the end of the input; `Err` if reading failed (the end too).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<String>>> {
        loop {
            if let Some(url) = self.batch.next() {
                return Poll::Ready(Some(Ok(url)));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Ok(batch))) => self.batch = batch.into_iter(),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    pub async fn recv(&mut self) -> Option<io::Result<String>> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Take no more: the reader thread stops at its next hand-off. URLs it read but did
    /// not hand over have no record; `--resume` fetches them.
    pub fn close(&mut self) {
        self.rx.close();
        self.batch = Vec::new().into_iter();
    }
}

/// The sending end: collects URLs into batches.
struct Batcher {
    tx: mpsc::Sender<io::Result<Vec<String>>>,
    batch: Vec<String>,
}

impl Batcher {
    /// Add a URL; `false` when the crawl takes no more.
    fn push(&mut self, url: String) -> bool {
        self.batch.push(url);
        self.batch.len() < BATCH || self.flush()
    }

    /// Hand over what is collected; `false` when the crawl takes no more.
    fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return !self.tx.is_closed();
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        self.tx.blocking_send(Ok(batch)).is_ok()
    }

    fn fail(mut self, e: io::Error) {
        if self.flush() {
            let _ = self.tx.blocking_send(Err(e));
        }
    }
}

/// Open the source (errors here are argument errors: exit 2) and start a thread feeding
/// its URLs into a bounded channel. URLs in `skip` (`--resume`) are counted and left out.
pub fn spawn_reader(
    source: &UrlSource,
    demo_site: Option<&TestSite>,
    skip: HashSet<String>,
) -> io::Result<(Lines, Arc<ReadStats>)> {
    let (tx, rx) = mpsc::channel(READ_AHEAD_BATCHES);
    let out = Batcher {
        tx,
        batch: Vec::with_capacity(BATCH),
    };
    let stats = match source {
        UrlSource::Demo(n) => {
            let n = *n;
            let stats = Arc::new(ReadStats::default());
            stats.total.store(n, Ordering::Relaxed);
            let base = demo_site.map(TestSite::base_url).unwrap_or_default();
            let st = Arc::clone(&stats);
            let mut out = out;
            std::thread::spawn(move || {
                for i in 0..n {
                    st.lines.fetch_add(1, Ordering::Relaxed);
                    if !out.push(format!("{base}/item/{i}")) {
                        return;
                    }
                }
                out.flush();
            });
            stats
        }
        UrlSource::Frontier(_) | UrlSource::Nothing => Arc::new(ReadStats::default()),
        UrlSource::Stdin => {
            let stats = Arc::new(ReadStats::default());
            let st = Arc::clone(&stats);
            std::thread::spawn(move || {
                feed_lines(LineReader::new(io::stdin().lock()), out, &st, &skip)
            });
            stats
        }
        UrlSource::File(path) => spawn_file_reader(path, out, skip)?,
    };
    let lines = Lines {
        rx,
        batch: Vec::new().into_iter(),
    };
    Ok((lines, stats))
}

fn spawn_file_reader(
    path: &Path,
    out: Batcher,
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
        feed_lines(LineReader::new(file), out, &st, &skip)
    });
    Ok(stats)
}

/// A buffered reader that says when it is about to wait for input, and reads lines of
/// at most `MAX_LINE` bytes.
pub struct LineReader<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
}

impl<R: Read> LineReader<R> {
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            pos: 0,
            end: 0,
        }
    }

    /// Like `read_until(b'\n')`, but keeps at most `MAX_LINE` bytes of the line (the rest
    /// is skipped without being buffered). `before_wait` runs before each read of the
    /// underlying input, which may block. Returns the bytes consumed (0 at the end).
    pub fn read_line(
        &mut self,
        line: &mut Vec<u8>,
        before_wait: &mut dyn FnMut(),
    ) -> io::Result<usize> {
        let mut consumed = 0;
        loop {
            if self.pos == self.end {
                before_wait();
                self.end = match self.inner.read(&mut self.buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                self.pos = 0;
                if self.end == 0 {
                    return Ok(consumed);
                }
            }
            let chunk = &self.buf[self.pos..self.end];
            let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let room = MAX_LINE.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..take.min(room)]);
            self.pos += take;
            consumed += take;
            if done {
                return Ok(consumed);
            }
        }
    }
}

/// The URL lines of a small file (the progress bar's total); `None` on a read error.
fn count_url_lines(path: &Path) -> Option<u64> {
    let mut input = LineReader::new(File::open(path).ok()?);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        match input.read_line(&mut buf, &mut || {}) {
            Ok(0) => return Some(n),
            Ok(_) => n += u64::from(url_line(&buf).is_some()),
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
    mut input: LineReader<impl Read>,
    mut out: Batcher,
    stats: &ReadStats,
    skip: &HashSet<String>,
) {
    let mut buf = Vec::new();
    let mut open = true;
    loop {
        buf.clear();
        // What was collected goes before a read that may wait (a slow stdin).
        let read = input.read_line(&mut buf, &mut || open = open && out.flush());
        match read {
            _ if !open => return,
            Ok(0) => {
                out.flush();
                return;
            }
            Ok(n) => {
                stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                let Some(url) = url_line(&buf) else { continue };
                stats.lines.fetch_add(1, Ordering::Relaxed);
                if !skip.is_empty() && skip.contains(&mask_url(&url)) {
                    stats.skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if !out.push(url) {
                    return;
                }
            }
            Err(e) => return out.fail(e),
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
        let mut input = LineReader::new(io::Cursor::new(long));
        let mut buf = Vec::new();
        let mut waits = 0;
        let n = input.read_line(&mut buf, &mut || waits += 1).unwrap();
        assert_eq!(n, MAX_LINE * 3 + 1);
        assert_eq!(buf.len(), MAX_LINE);
        assert_eq!(waits, 1, "one read of the underlying input");
        buf.clear();
        input.read_line(&mut buf, &mut || {}).unwrap();
        assert_eq!(url_line(&buf).as_deref(), Some("next"));
        assert_eq!(url_line(b"  # comment\n"), None);
        assert_eq!(url_line(b"   \n"), None);
    }

    #[test]
    fn batches_go_when_full_and_before_a_wait() {
        let (tx, mut rx) = mpsc::channel(READ_AHEAD_BATCHES);
        let out = Batcher {
            tx,
            batch: Vec::new(),
        };
        let input: Vec<u8> = (0..BATCH + 3)
            .flat_map(|i| format!("u{i}\n").into_bytes())
            .collect();
        let stats = ReadStats::default();
        std::thread::scope(|s| {
            s.spawn(|| {
                feed_lines(
                    LineReader::new(io::Cursor::new(input)),
                    out,
                    &stats,
                    &HashSet::new(),
                )
            });
            let sizes: Vec<usize> = std::iter::from_fn(|| rx.blocking_recv())
                .map(|b| b.unwrap().len())
                .collect();
            assert_eq!(sizes, [BATCH, 3]);
        });
        assert_eq!(stats.lines.load(Ordering::Relaxed), BATCH as u64 + 3);
    }
}
