//! Where URLs come from: a file or stdin read line by line on a thread of its own (never
//! the whole file), or the demo's generated URLs, feeding a bounded channel so a slow
//! stdin never blocks the actors.
//!
//! URLs cross the channel in batches of up to [`BATCH`]: one hand-off per URL woke the
//! reader thread once per fetch (a futex wake and two context switches, measured at a
//! tenth of the program's CPU against a fast local site). A batch goes as soon as it is
//! full, and also whenever the reader would otherwise wait for more input, so a slow
//! stdin's URLs are not held back.
//!
//! A UTF-8 byte order mark at the start of a line is not part of its URL. In list mode a
//! URL line seen before in the same list is handed over as [`Line::Duplicate`] (fetched
//! once, recorded for each line), remembered in bounded memory ([`super::seen`]).

use std::collections::HashSet;
use std::fs::File;
use std::future::poll_fn;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use exitcrawl::redact::mask_url;
use exitcrawl_actors::MAX_URL_BYTES;
use exitcrawl_testsite::TestSite;
use tokio::sync::mpsc;

use super::seen::{Insert, Seen, MAX_TABLE_BYTES};

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
pub const MAX_LINE: usize = 16 * 1024;

/// Where URLs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlSource {
    File(PathBuf),
    Stdin,
    /// The demo's `n` generated URLs.
    Demo(u64),
    /// A shared Redis frontier (`--frontier` without `--enqueue`).
    Frontier(FrontierUrl),
    /// No URL list: the crawl's URLs are its arguments, or `--sitemap` alone seeds it.
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

/// `--frontier redis://HOST:PORT/QUEUE`, split into the server and the queue name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontierUrl {
    /// `redis://HOST:PORT/`
    pub redis: String,
    pub queue: String,
}

impl FrontierUrl {
    pub fn parse(v: &str) -> Result<Self, String> {
        let bad =
            || format!("{v:?} is not redis://HOST:PORT/QUEUE (QUEUE: letters, digits and - _ . :)");
        let rest = v.strip_prefix("redis://").ok_or_else(bad)?;
        let (authority, queue) = rest.split_once('/').ok_or_else(bad)?;
        let queue = queue.trim_end_matches('/');
        if authority.is_empty()
            || queue.is_empty()
            || !queue
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(bad());
        }
        Ok(FrontierUrl {
            redis: format!("redis://{authority}/"),
            queue: queue.to_string(),
        })
    }

    /// `redis://HOST:PORT/QUEUE`, as given.
    pub fn shown(&self) -> String {
        format!("{}{}", self.redis, self.queue)
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

/// One URL line of the input, as the crawl loop gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A URL to fetch.
    Url(String),
    /// A URL this list had on an earlier line (list mode, unless `--no-dedupe`): not
    /// fetched again, recorded with `skipped: "duplicate"`.
    Duplicate(String),
    /// A line longer than any URL the crawler accepts: its first bytes, and its length
    /// in bytes without the line ending (the rest was never buffered).
    TooLong(String, u64),
}

impl Line {
    /// The URL (or the kept start of a long line), whatever the line is.
    pub fn into_url(self) -> String {
        match self {
            Line::Url(u) | Line::Duplicate(u) | Line::TooLong(u, _) => u,
        }
    }

    /// The `error` of a line too long to be a URL, as the crawler words it.
    pub fn too_long_message(bytes: u64) -> String {
        format!("invalid_url: URL is {bytes} bytes long; at most {MAX_URL_BYTES} are accepted")
    }
}

/// The receiving end of the reader: URLs one at a time, out of the batches.
pub struct Lines {
    rx: mpsc::Receiver<io::Result<Vec<Line>>>,
    batch: std::vec::IntoIter<Line>,
    /// Lines the reader read and could not hand over (see [`Lines::unsent`]).
    unsent: Arc<AtomicU64>,
    /// The reader thread panicked: the channel's end is then no end of the input.
    panicked: Arc<AtomicBool>,
    /// Resolves when the reader thread's end of the channel is gone: it counted what it
    /// read for nothing ([`Lines::reader_ended`]).
    ended: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Lines {
    /// The next line; `None` at the end of the input; `Err` if reading failed (the end too).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Line>>> {
        loop {
            if let Some(url) = self.batch.next() {
                return Poll::Ready(Some(Ok(url)));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Ok(batch))) => self.batch = batch.into_iter(),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) if self.panicked.swap(false, Ordering::SeqCst) => {
                    return Poll::Ready(Some(Err(io::Error::other(
                        "the URL reader stopped (a bug: it panicked); the URLs after those read were not",
                    ))))
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    pub async fn recv(&mut self) -> Option<io::Result<Line>> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Take no more: the reader thread stops at its next line. URLs it read but did not
    /// hand over have no record; `--resume` fetches them. Returns how many lines were
    /// handed over and not taken; those of the reader's own batch are
    /// [`Lines::unsent`] once it has seen the close.
    pub fn close(&mut self) -> u64 {
        self.rx.close();
        let mut left = std::mem::replace(&mut self.batch, Vec::new().into_iter()).count();
        while let Ok(batch) = self.rx.try_recv() {
            left += batch.map_or(0, |b| b.len());
        }
        left as u64
    }

    /// Lines the reader read after [`Lines::close`] and could not hand over: its batch in
    /// hand, and the line it was reading. Whole once [`Lines::reader_ended`] says so.
    pub fn unsent(&self) -> u64 {
        self.unsent.load(Ordering::SeqCst)
    }

    /// Wait, at most `within`, for the reader thread to notice [`Lines::close`] and end,
    /// so that [`Lines::unsent`] counts its batch in hand. It notices at its next line:
    /// a reader blocked on an input that sends nothing (an idle pipe) is not waited for
    /// longer, and what it holds is then not counted. Whether it ended.
    pub async fn reader_ended(&mut self, within: Duration) -> bool {
        match self.ended.take() {
            Some(rx) => tokio::time::timeout(within, rx).await.is_ok(),
            None => true,
        }
    }
}

/// The sending end: collects URLs into batches.
struct Batcher {
    tx: mpsc::Sender<io::Result<Vec<Line>>>,
    batch: Vec<Line>,
    /// Lines read that the crawl, closed, did not take (shared with [`Lines`]).
    unsent: Arc<AtomicU64>,
    /// Set when the reader thread unwinds (shared with [`Lines`]): a closed channel would
    /// otherwise read as the end of the input, and the run end complete with the rest of
    /// the list never read.
    panicked: Arc<AtomicBool>,
    /// Dropped with the reader's end: tells [`Lines::reader_ended`].
    _ended: tokio::sync::oneshot::Sender<()>,
}

impl Drop for Batcher {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.panicked.store(true, Ordering::SeqCst);
        }
    }
}

impl Batcher {
    /// The sending end of a channel, and its receiving end, [`Lines`].
    fn channel() -> (Batcher, Lines) {
        let (tx, rx) = mpsc::channel(READ_AHEAD_BATCHES);
        let unsent = Arc::new(AtomicU64::new(0));
        let panicked = Arc::new(AtomicBool::new(false));
        let (ended_tx, ended_rx) = tokio::sync::oneshot::channel();
        let lines = Lines {
            rx,
            batch: Vec::new().into_iter(),
            unsent: Arc::clone(&unsent),
            panicked: Arc::clone(&panicked),
            ended: Some(ended_rx),
        };
        let out = Batcher {
            tx,
            batch: Vec::with_capacity(BATCH),
            unsent,
            panicked,
            _ended: ended_tx,
        };
        (out, lines)
    }

    /// Add a line; `false` when the crawl takes no more (the line and the batch in hand
    /// are then counted unsent).
    fn push(&mut self, url: Line) -> bool {
        if self.tx.is_closed() {
            self.give_up(1);
            return false;
        }
        self.batch.push(url);
        self.batch.len() < BATCH || self.flush()
    }

    /// Hand over what is collected; `false` when the crawl takes no more.
    fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return !self.tx.is_closed();
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        match self.tx.blocking_send(Ok(batch)) {
            Ok(()) => true,
            Err(mpsc::error::SendError(back)) => {
                self.batch = back.unwrap_or_default();
                self.give_up(0);
                false
            }
        }
    }

    /// The crawl took no more: what is in hand, and `more` lines besides, were read for
    /// nothing.
    fn give_up(&mut self, more: u64) {
        let n = self.batch.len() as u64 + more;
        self.batch.clear();
        self.unsent.fetch_add(n, Ordering::SeqCst);
    }

    fn fail(mut self, e: io::Error) {
        if self.flush() {
            let _ = self.tx.blocking_send(Err(e));
        }
    }
}

/// An input opened and checked, nothing read from it yet (see [`UrlInput::open`]).
pub enum UrlInput {
    File {
        path: PathBuf,
        file: File,
        size: u64,
    },
    Stdin,
    Demo(u64),
    None,
}

impl UrlInput {
    /// Open `--urls` without reading from it: a file that cannot be opened, or a
    /// directory, is an argument error (exit 2) found before anything else is touched.
    pub fn open(source: &UrlSource) -> Result<Self, String> {
        match source {
            UrlSource::Demo(n) => Ok(UrlInput::Demo(*n)),
            UrlSource::Frontier(_) | UrlSource::Nothing => Ok(UrlInput::None),
            UrlSource::Stdin => {
                // A directory on stdin (`< /tmp`) fails its first read: found here, it is
                // refused as a directory named with `--urls` is.
                use std::os::fd::AsFd as _;
                let dir = std::io::stdin()
                    .as_fd()
                    .try_clone_to_owned()
                    .ok()
                    .and_then(|fd| File::from(fd).metadata().ok())
                    .is_some_and(|m| m.is_dir());
                if dir {
                    return Err(
                        "-: standard input is a directory (expected a file with one \
                                URL a line)"
                            .into(),
                    );
                }
                Ok(UrlInput::Stdin)
            }
            UrlSource::File(path) => {
                let file = open_url_file(path)?;
                let meta = file
                    .metadata()
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let size = if meta.is_file() { meta.len() } else { 0 };
                Ok(UrlInput::File {
                    path: path.clone(),
                    file,
                    size,
                })
            }
        }
    }
}

/// A file of URLs, opened for reading: not a directory.
pub fn open_url_file(path: &Path) -> Result<File, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match file.metadata() {
        Ok(m) if m.is_dir() => Err(format!(
            "{}: is a directory (expected a file with one URL a line, or - for stdin)",
            path.display()
        )),
        Ok(_) => Ok(file),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// How the reader treats the lines.
pub struct ReadOptions {
    /// URLs to leave out, counted (`--resume`: they have a final record).
    pub skip: HashSet<String>,
    /// Hand a URL seen on an earlier line over as [`Line::Duplicate`].
    pub dedupe: bool,
}

/// Start a thread feeding `input`'s URLs into a bounded channel, after the URLs `given`
/// as arguments: each of those is read as a line before the input's, so that repeats,
/// `--resume`, blank and bad lines are all as in a list. A line break inside an argument
/// (not at its ends, trimmed as a line's whitespace is) is read as U+FFFD: the argument
/// stays one line, an invalid URL (no request can carry a line break), not two URLs.
pub fn spawn_reader(
    input: UrlInput,
    given: &[String],
    demo_site: Option<&TestSite>,
    opts: ReadOptions,
) -> (Lines, Arc<ReadStats>) {
    // Trimmed first, as a line is: a break at either end (`"$(head -1 list)"` with CRLF)
    // is no part of the URL.
    let given: Vec<String> = given
        .iter()
        .map(|u| u.trim().replace(['\n', '\r'], "\u{FFFD}"))
        .collect();
    let given_lines = given
        .iter()
        .filter(|u| url_line(u.as_bytes()).is_some())
        .count() as u64;
    let mut text = Vec::new();
    for u in &given {
        text.extend_from_slice(u.as_bytes());
        text.push(b'\n');
    }
    let given_bytes = text.len() as u64;
    let given = io::Cursor::new(text);
    let (out, lines) = Batcher::channel();
    let stats = match input {
        UrlInput::Demo(n) => {
            let stats = Arc::new(ReadStats::default());
            stats.total.store(n, Ordering::Relaxed);
            let base = demo_site.map(TestSite::base_url).unwrap_or_default();
            let st = Arc::clone(&stats);
            let mut out = out;
            std::thread::spawn(move || {
                for i in 0..n {
                    st.lines.fetch_add(1, Ordering::Relaxed);
                    if !out.push(Line::Url(format!("{base}/item/{i}"))) {
                        return;
                    }
                }
                out.flush();
            });
            stats
        }
        UrlInput::None if given_bytes == 0 => Arc::new(ReadStats::default()),
        UrlInput::None => {
            let stats = Arc::new(ReadStats::default());
            stats.total.store(given_lines, Ordering::Relaxed);
            let st = Arc::clone(&stats);
            std::thread::spawn(move || feed_lines(LineReader::new(given), out, &st, &opts));
            stats
        }
        UrlInput::Stdin => {
            let stats = Arc::new(ReadStats::default());
            let st = Arc::clone(&stats);
            std::thread::spawn(move || {
                feed_lines(
                    LineReader::new(given.chain(io::stdin().lock())),
                    out,
                    &st,
                    &opts,
                )
            });
            stats
        }
        UrlInput::File { path, file, size } => {
            let stats = Arc::new(ReadStats {
                size: if size > 0 { size + given_bytes } else { 0 },
                ..ReadStats::default()
            });
            let st = Arc::clone(&stats);
            std::thread::spawn(move || {
                if size > 0 && size <= PRECOUNT_MAX_BYTES {
                    if let Some(n) = count_url_lines(&path) {
                        st.total.store(n + given_lines, Ordering::Relaxed);
                    }
                }
                feed_lines(LineReader::new(given.chain(file)), out, &st, &opts)
            });
            stats
        }
    };
    (lines, stats)
}

/// A buffered reader that says when it is about to wait for input, and reads lines of
/// at most `MAX_LINE` bytes.
pub struct LineReader<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// The last line read ended with `\n` (not the input's end).
    newline: bool,
}

impl<R: Read> LineReader<R> {
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            pos: 0,
            end: 0,
            newline: false,
        }
    }

    /// Whether the last line read ended with `\n` (else with the input).
    pub fn ended_with_newline(&self) -> bool {
        self.newline
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
        self.newline = false;
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
                self.newline = true;
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

/// The URL of an input line: trimmed of whitespace and UTF-8 byte order marks (a BOM is
/// invisible, and never part of a URL: one after a space or at the end of a line is taken
/// off too); `None` for blank lines and `#` comments. A line that is not UTF-8 is taken
/// lossily: it then fails as an invalid URL, with a record.
pub fn url_line(raw: &[u8]) -> Option<String> {
    let line = String::from_utf8_lossy(raw);
    let line = line.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    (!line.is_empty() && !line.starts_with('#')).then(|| line.to_string())
}

/// What a line [`LineReader::read_line`] read is: `raw` the bytes it kept, `consumed`
/// the line's length as read, `newline` whether it ended with `\n`. A line cut at
/// `MAX_LINE` is [`Line::TooLong`] with its real length.
pub fn classify(raw: &[u8], consumed: usize, newline: bool) -> Option<Line> {
    let url = url_line(raw)?;
    let length = consumed - usize::from(newline);
    let kept = raw.len() - usize::from(raw.last() == Some(&b'\n'));
    if length > kept {
        return Some(Line::TooLong(url, length as u64));
    }
    Some(Line::Url(url))
}

/// `--resume`: the line's URL has its final record already.
fn done_before(line: &Line, opts: &ReadOptions) -> bool {
    match line {
        Line::Url(url) | Line::TooLong(url, _) => {
            !opts.skip.is_empty() && opts.skip.contains(&mask_url(url))
        }
        Line::Duplicate(_) => false,
    }
}

/// Send every URL line of `input` that is not in `opts.skip`.
fn feed_lines(
    mut input: LineReader<impl Read>,
    mut out: Batcher,
    stats: &ReadStats,
    opts: &ReadOptions,
) {
    let mut seen = opts.dedupe.then(|| Seen::new(MAX_TABLE_BYTES));
    let mut full_noted = false;
    let mut buf = Vec::new();
    let mut open = true;
    loop {
        buf.clear();
        // What was collected goes before a read that may wait (a slow stdin).
        let read = input.read_line(&mut buf, &mut || open = open && out.flush());
        match read {
            // The crawl took no more while this line was read: one more read for nothing,
            // unless it was done before.
            Ok(n) if !open => {
                let line = classify(&buf, n, input.ended_with_newline());
                if line.is_some_and(|l| !done_before(&l, opts)) {
                    out.give_up(1);
                }
                return;
            }
            _ if !open => return,
            Ok(0) => {
                out.flush();
                return;
            }
            Ok(n) => {
                stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                let Some(line) = classify(&buf, n, input.ended_with_newline()) else {
                    continue;
                };
                stats.lines.fetch_add(1, Ordering::Relaxed);
                let line = match (line, seen.as_mut()) {
                    // A line too long to be a URL is recorded by its kept start: once
                    // recorded, it is done as a URL is.
                    (line, _) if done_before(&line, opts) => {
                        stats.skipped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    // A line that was not UTF-8 is no URL (it ends `invalid_url`), and two
                    // such lines read alike once decoded: neither is a duplicate.
                    (Line::Url(url), Some(_)) if url.contains('\u{fffd}') => Line::Url(url),
                    (Line::Url(url), Some(seen)) => match seen.insert(&url) {
                        Insert::New => Line::Url(url),
                        Insert::Duplicate => Line::Duplicate(url),
                        Insert::Full => {
                            if !std::mem::replace(&mut full_noted, true) {
                                super::term::say(&format!(
                                    "--urls: more than {} distinct URLs; duplicates of the \
                                     later ones are fetched again (the dedupe table is at its \
                                     {} MiB cap)",
                                    seen.len(),
                                    MAX_TABLE_BYTES >> 20
                                ));
                            }
                            Line::Url(url)
                        }
                    },
                    (line, _) => line,
                };
                if !out.push(line) {
                    return;
                }
            }
            Err(e) => return out.fail(e),
        }
    }
}

/// The URL-list reader over `input`, whole: every line as the crawl loop would get it
/// (`dedupe`: repeats as [`Line::Duplicate`]), and the read error that ended it, if one
/// did. The reader's thread and channel are the crawl's own. For the fuzz target
/// (`tests/fuzz_readers.rs`); not an API.
#[doc(hidden)]
pub fn read_url_list(input: impl Read + Send, dedupe: bool) -> (Vec<Line>, Option<io::Error>) {
    let (out, mut from) = Batcher::channel();
    let opts = ReadOptions {
        skip: HashSet::new(),
        dedupe,
    };
    let stats = ReadStats::default();
    std::thread::scope(|s| {
        s.spawn(|| feed_lines(LineReader::new(input), out, &stats, &opts));
        let mut lines = Vec::new();
        while let Some(batch) = from.rx.blocking_recv() {
            match batch {
                Ok(b) => lines.extend(b),
                Err(e) => return (lines, Some(e)),
            }
        }
        (lines, None)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_reader_that_panics_is_a_read_error_not_the_end_of_the_input() {
        let (mut out, mut lines) = Batcher::channel();
        let reader = std::thread::spawn(move || {
            out.push(Line::Url("http://a.test/".into()));
            out.flush();
            panic!("a bug in the reader");
        });
        assert!(reader.join().is_err(), "it panicked");
        let first = lines.recv().await.expect("a line").expect("read");
        assert_eq!(first, Line::Url("http://a.test/".into()));
        let next = lines.recv().await.expect("not the end of the input");
        let e = next.expect_err("a read error");
        assert!(e.to_string().contains("URL reader stopped"), "{e}");
    }

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
        assert_eq!(
            classify(&buf, n, input.ended_with_newline()),
            Some(Line::TooLong("a".repeat(MAX_LINE), MAX_LINE as u64 * 3))
        );
        buf.clear();
        let n = input.read_line(&mut buf, &mut || {}).unwrap();
        assert_eq!(url_line(&buf).as_deref(), Some("next"));
        assert_eq!(
            classify(&buf, n, input.ended_with_newline()),
            Some(Line::Url("next".into()))
        );
        // A line of exactly MAX_LINE bytes is whole.
        let mut exact = vec![b'b'; MAX_LINE];
        exact.push(b'\n');
        let mut input = LineReader::new(io::Cursor::new(exact));
        buf.clear();
        let n = input.read_line(&mut buf, &mut || {}).unwrap();
        assert!(matches!(classify(&buf, n, true), Some(Line::Url(u)) if u.len() == MAX_LINE));
        assert_eq!(
            url_line(b"\xef\xbb\xbfhttp://a/\r\n").as_deref(),
            Some("http://a/")
        );
        assert_eq!(
            url_line(" \u{feff}http://a/ \u{feff}\n".as_bytes()).as_deref(),
            Some("http://a/")
        );
        assert_eq!(url_line("\u{feff}\r\n".as_bytes()), None);
        assert_eq!(url_line(b"  # comment\n"), None);
        assert_eq!(url_line(b"   \n"), None);
    }

    #[test]
    fn batches_go_when_full_and_before_a_wait() {
        let (out, mut lines) = Batcher::channel();
        let input: Vec<u8> = (0..BATCH + 3)
            .flat_map(|i| format!("u{i}\n").into_bytes())
            .collect();
        let stats = ReadStats::default();
        std::thread::scope(|s| {
            s.spawn(|| {
                let opts = ReadOptions {
                    skip: HashSet::new(),
                    dedupe: true,
                };
                feed_lines(LineReader::new(io::Cursor::new(input)), out, &stats, &opts)
            });
            let batches: Vec<Vec<Line>> = std::iter::from_fn(|| lines.rx.blocking_recv())
                .map(|b| b.unwrap())
                .collect();
            let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
            assert_eq!(sizes, [BATCH, 3]);
        });
        assert_eq!(stats.lines.load(Ordering::Relaxed), BATCH as u64 + 3);
    }

    #[test]
    fn lines_read_after_the_crawl_stopped_taking_them_are_counted_unsent() {
        let (mut out, mut lines) = Batcher::channel();
        let url = |i: usize| Line::Url(format!("u{i}"));
        // Four batches fill the channel; the reader then holds ten more when it closes.
        for i in 0..BATCH * READ_AHEAD_BATCHES + 10 {
            assert!(out.push(url(i)));
        }
        assert_eq!(lines.close(), (BATCH * READ_AHEAD_BATCHES) as u64);
        // The next line finds the crawl closed: it and the ten in hand were for nothing.
        assert!(!out.push(url(0)));
        assert_eq!(lines.unsent(), 11);
        // A full batch whose hand-off fails is counted too.
        let (mut out, mut lines) = Batcher::channel();
        for i in 0..BATCH - 1 {
            assert!(out.push(url(i)));
        }
        lines.rx.close();
        assert!(!out.flush());
        assert_eq!(lines.unsent(), BATCH as u64 - 1);
    }

    /// A reader that notices the close only at its next line, after the crawl has
    /// looked: waiting for it to end counts what it held.
    #[actix_rt::test]
    async fn the_count_of_lines_read_for_nothing_waits_for_the_reader_to_notice() {
        let (mut out, mut lines) = Batcher::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            for i in 0..3 {
                out.push(Line::Url(format!("u{i}")));
            }
            // Reading the next line, slowly: the crawl closes meanwhile.
            wait.recv().unwrap();
            out.push(Line::Url("u3".into()));
        });
        assert_eq!(lines.close(), 0, "nothing handed over yet");
        assert_eq!(lines.unsent(), 0, "the reader has not noticed");
        go.send(()).unwrap();
        assert!(lines.reader_ended(Duration::from_secs(10)).await);
        assert_eq!(lines.unsent(), 4, "the three in hand and the one it read");
        reader.join().unwrap();
    }

    #[test]
    fn a_line_read_as_the_crawl_closed_is_counted_unless_done_before() {
        let opts = ReadOptions {
            skip: ["http://a/done".to_string()].into_iter().collect(),
            dedupe: false,
        };
        assert!(done_before(&Line::Url("http://a/done".into()), &opts));
        assert!(!done_before(&Line::Url("http://a/new".into()), &opts));
        assert!(!done_before(
            &Line::Duplicate("http://a/done".into()),
            &opts
        ));
    }

    fn read_all(input: &str, opts: ReadOptions) -> (Vec<Line>, ReadStats) {
        let (out, mut lines) = Batcher::channel();
        let stats = ReadStats::default();
        let bytes = input.as_bytes().to_vec();
        let lines = std::thread::scope(|s| {
            s.spawn(|| feed_lines(LineReader::new(io::Cursor::new(bytes)), out, &stats, &opts));
            std::iter::from_fn(|| lines.rx.blocking_recv())
                .flat_map(|b| b.unwrap())
                .collect()
        });
        (lines, stats)
    }

    #[test]
    fn duplicates_are_marked_and_resumed_urls_left_out() {
        let input = "\u{feff}http://a/1\nhttp://a/2\n# c\nhttp://a/1\n  http://a/2  \nhttp://a/3\n";
        let opts = ReadOptions {
            skip: ["http://a/3".to_string()].into_iter().collect(),
            dedupe: true,
        };
        let (lines, stats) = read_all(input, opts);
        let url = |u: &str| Line::Url(u.into());
        let dup = |u: &str| Line::Duplicate(u.into());
        assert_eq!(
            lines,
            [
                url("http://a/1"),
                url("http://a/2"),
                dup("http://a/1"),
                dup("http://a/2")
            ]
        );
        assert_eq!(stats.skipped.load(Ordering::Relaxed), 1);
        assert_eq!(stats.lines.load(Ordering::Relaxed), 5);
        let opts = ReadOptions {
            skip: HashSet::new(),
            dedupe: false,
        };
        let (lines, _) = read_all(input, opts);
        assert_eq!(lines.len(), 5, "--no-dedupe: every line a URL");
        assert!(lines.iter().all(|l| matches!(l, Line::Url(_))));
    }
}
