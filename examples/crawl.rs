//! `crawl` — fetch a list of URLs through exitcrawl's exits, write one JSON record per URL
//! and a JSON summary.
//!
//! ```text
//! cargo run --release --example crawl -- --config crawl.toml --urls urls.txt \
//!     --out results.jsonl --summary summary.json
//! cargo run --release --example crawl -- --demo
//! ```
//!
//! The flags and the record/summary formats are a public contract (see [`USAGE`]).
//!
//! Layout of this file:
//! - [`Cli`] / [`parse_args`]: hand-rolled argument parsing (no dependencies);
//! - [`spawn_reader`]: the URL source — a file or stdin read line by line on its own
//!   thread (never the whole file), or the demo's generated URLs — feeding a bounded
//!   channel, so a slow stdin never blocks the actors;
//! - [`crawl`]: the streaming loop — at most `crawler.concurrency` fetches in flight,
//!   one [`Record`] per input URL written as soon as it completes;
//! - [`spawn_progress`]: the status line on stderr every second;
//! - [`Summary`]: the final object, built from the totals and `CrawlerHandle::stats`.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, ExitStats, Fetch, FetchError, FetchResponse};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::future::{select, Either};
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use tokio::sync::mpsc;

const USAGE: &str = "\
crawl — fetch URLs through exitcrawl's exits

USAGE:
    crawl --config FILE --urls FILE [--out FILE] [--summary FILE]
    crawl --demo [--demo-urls N] [--out FILE] [--summary FILE]

OPTIONS:
    --config FILE     Settings (TOML); EXITCRAWL__SECTION__KEY environment overrides apply
    --urls FILE       URLs, one per line ('-' = stdin); blank lines and # comments skipped
    --out FILE        JSONL, one record per URL as results arrive ('-' = stdout):
                      url, status, exit, attempts, elapsed_ms, bytes, error
    --summary FILE    One JSON object at the end ('-' = stdout): total, ok, failed,
                      throttled, requests, elapsed_s, per_exit
                      (without --summary, the summary goes to stdout)
    --demo            Start a rate-limited test site on 127.0.0.1 and crawl it through
                      four exits bound to 127.0.0.1..127.0.0.4; prints the summary
    --demo-urls N     URLs the demo generates (default 3000)
    -h, --help        Print this help
    -V, --version     Print the version

EXIT STATUS:
    0 the crawl ran (even if some URLs failed); 1 an output could not be written;
    2 bad arguments or configuration
";

/// URLs the demo generates unless `--demo-urls` says otherwise.
const DEFAULT_DEMO_URLS: u64 = 3000;
/// Lines read ahead of the fetches (the reader thread waits when this many are queued).
const READ_AHEAD: usize = 1024;
/// How long in-flight fetches may take to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------

/// Where URLs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum UrlSource {
    File(PathBuf),
    Stdin,
    /// The demo's `n` generated URLs.
    Demo(u64),
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cli {
    Help,
    Version,
    Run(RunArgs),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RunArgs {
    /// `None` in demo mode (the demo builds its own settings).
    config: Option<PathBuf>,
    urls: UrlSource,
    out: Option<PathBuf>,
    summary: Option<PathBuf>,
}

impl RunArgs {
    fn is_demo(&self) -> bool {
        matches!(self.urls, UrlSource::Demo(_))
    }
}

/// Parse the arguments after the program name. `Err` is a message for stderr.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut config = None;
    let mut urls = None;
    let mut out = None;
    let mut summary = None;
    let mut demo = false;
    let mut demo_urls = None;

    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone().or_else(|| args.next()) {
                Some(v) if !v.is_empty() => Ok(v),
                _ => Err(format!("{flag} needs a value ({what})")),
            }
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Cli::Help),
            "-V" | "--version" => return Ok(Cli::Version),
            "--config" => set_once(&mut config, &flag, PathBuf::from(value("a TOML file")?))?,
            "--urls" => set_once(&mut urls, &flag, value("a file, or - for stdin")?)?,
            "--out" => set_once(&mut out, &flag, PathBuf::from(value("a file, or -")?))?,
            "--summary" => set_once(&mut summary, &flag, PathBuf::from(value("a file, or -")?))?,
            "--demo" if inline.is_none() => demo = true,
            "--demo-urls" => {
                let v = value("a count")?;
                let n: u64 = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--demo-urls: {v:?} is not a positive integer"))?;
                set_once(&mut demo_urls, &flag, n)?;
            }
            _ => return Err(format!("unknown argument {arg:?} (see --help)")),
        }
    }

    let urls = if demo {
        if config.is_some() || urls.is_some() {
            return Err("--demo builds its own settings and URLs: drop --config/--urls".into());
        }
        UrlSource::Demo(demo_urls.unwrap_or(DEFAULT_DEMO_URLS))
    } else {
        if demo_urls.is_some() {
            return Err("--demo-urls only goes with --demo".into());
        }
        if config.is_none() {
            return Err("missing --config FILE (or use --demo)".into());
        }
        match urls.as_deref() {
            None => return Err("missing --urls FILE (or - for stdin)".into()),
            Some("-") => UrlSource::Stdin,
            Some(p) => UrlSource::File(PathBuf::from(p)),
        }
    };
    Ok(Cli::Run(RunArgs {
        config,
        urls,
        out,
        summary,
    }))
}

fn set_once<T>(slot: &mut Option<T>, flag: &str, value: T) -> Result<(), String> {
    if slot.replace(value).is_some() {
        return Err(format!("{flag} given twice"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Records and summary (the output contract)
// ---------------------------------------------------------------------------------------

/// One line of `--out`: the fate of one input URL.
#[derive(Debug, Serialize)]
struct Record {
    url: String,
    /// HTTP status of the final attempt; `null` when there was no answer.
    status: Option<u16>,
    /// Exit of the final attempt; `null` when none was made.
    exit: Option<String>,
    attempts: u32,
    elapsed_ms: u64,
    /// Body bytes of the final answer.
    bytes: u64,
    /// `null`, or why the fetch ended without an answer.
    error: Option<String>,
    /// Not part of the record: 429/503 answers over all attempts (for the summary).
    #[serde(skip)]
    throttled: u32,
}

impl Record {
    fn new(result: Result<FetchResponse, FetchError>, waited: Duration) -> Self {
        match result {
            Ok(r) => Record {
                url: r.url,
                status: Some(r.status),
                exit: Some(r.exit),
                attempts: r.attempts,
                elapsed_ms: millis(r.elapsed),
                bytes: r.body.len() as u64,
                error: None,
                throttled: r.throttled,
            },
            Err(e) => Record {
                error: Some(format!("{}: {}", e.kind.as_str(), e.message)),
                url: e.url,
                status: None,
                exit: e.exit,
                attempts: e.attempts,
                elapsed_ms: millis(waited),
                bytes: 0,
                throttled: e.throttled,
            },
        }
    }

    fn is_ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Counts over the records written so far.
#[derive(Debug, Default)]
struct Totals {
    total: Cell<u64>,
    ok: Cell<u64>,
    throttled: Cell<u64>,
    requests: Cell<u64>,
    /// Input URLs read so far (≥ total: the difference is in flight).
    read: Cell<u64>,
}

impl Totals {
    fn add(&self, r: &Record) {
        let bump = |c: &Cell<u64>, n: u64| c.set(c.get() + n);
        bump(&self.total, 1);
        bump(&self.ok, u64::from(r.is_ok()));
        bump(&self.throttled, u64::from(r.throttled));
        bump(&self.requests, u64::from(r.attempts));
    }
}

/// The `--summary` object.
#[derive(Debug, Serialize)]
struct Summary {
    total: u64,
    /// Final answer 2xx.
    ok: u64,
    /// `total - ok`.
    failed: u64,
    /// 429/503 answers over all attempts of all URLs.
    throttled: u64,
    /// HTTP attempts sent (sum of `attempts`).
    requests: u64,
    elapsed_s: f64,
    per_exit: Vec<ExitSummary>,
}

#[derive(Debug, Serialize)]
struct ExitSummary {
    name: String,
    source_ip: IpAddr,
    requests: u64,
    ok: u64,
    throttled: u64,
    errors: u64,
    healthy: bool,
}

impl Summary {
    fn new(t: &Totals, elapsed: Duration, stats: Vec<ExitStats>) -> Self {
        Summary {
            total: t.total.get(),
            ok: t.ok.get(),
            failed: t.total.get() - t.ok.get(),
            throttled: t.throttled.get(),
            requests: t.requests.get(),
            elapsed_s: elapsed.as_secs_f64(),
            per_exit: stats
                .into_iter()
                .map(|s| ExitSummary {
                    name: s.name,
                    source_ip: s.source_ip,
                    requests: s.total,
                    ok: s.ok,
                    throttled: s.throttled,
                    errors: s.errors,
                    healthy: s.healthy,
                })
                .collect(),
        }
    }
}

/// A file, or stdout for `-`.
fn open_output(path: &Path) -> io::Result<Box<dyn Write>> {
    if path == Path::new("-") {
        Ok(Box::new(io::stdout().lock()))
    } else {
        Ok(Box::new(BufWriter::new(File::create(path)?)))
    }
}

// ---------------------------------------------------------------------------------------
// URL source
// ---------------------------------------------------------------------------------------

/// Open the source (errors here are argument errors: exit 2) and start a thread feeding
/// its URLs into a bounded channel. Lines are read one at a time, never the whole file.
fn spawn_reader(
    source: &UrlSource,
    demo_site: Option<&TestSite>,
) -> io::Result<mpsc::Receiver<io::Result<String>>> {
    let (tx, rx) = mpsc::channel(READ_AHEAD);
    match source {
        UrlSource::Demo(n) => {
            let n = *n;
            let base = demo_site.map(TestSite::base_url).unwrap_or_default();
            std::thread::spawn(move || {
                for i in 0..n {
                    if tx.blocking_send(Ok(format!("{base}/item/{i}"))).is_err() {
                        return;
                    }
                }
            });
        }
        UrlSource::Stdin => {
            std::thread::spawn(move || feed_lines(io::stdin().lock(), &tx));
        }
        UrlSource::File(path) => {
            let file = File::open(path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            std::thread::spawn(move || feed_lines(BufReader::new(file), &tx));
        }
    }
    Ok(rx)
}

/// Send every URL line of `input` (trimmed; blank lines and `#` comments skipped). A line
/// that is not UTF-8 is passed on lossily: it then fails as an invalid URL, with a record.
fn feed_lines(mut input: impl BufRead, tx: &mpsc::Sender<io::Result<String>>) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                if tx.blocking_send(Ok(line.to_string())).is_err() {
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

// ---------------------------------------------------------------------------------------
// The streaming loop
// ---------------------------------------------------------------------------------------

async fn fetch_one(handle: &CrawlerHandle, url: String) -> Record {
    let started = Instant::now();
    let result = handle.fetch(Fetch::get(url)).await;
    Record::new(result, started.elapsed())
}

/// Fetch every URL from `urls` with at most `concurrency` in flight, writing each record
/// to `out` as it completes. Returns when the input is exhausted and every fetch has ended.
async fn crawl(
    handle: &CrawlerHandle,
    mut urls: mpsc::Receiver<io::Result<String>>,
    concurrency: usize,
    mut out: Option<Box<dyn Write>>,
    totals: &Totals,
) -> Result<(), String> {
    enum Event {
        Line(Option<io::Result<String>>),
        Done(Option<Record>),
    }
    let mut in_flight = FuturesUnordered::new();
    let mut input_open = true;
    loop {
        let event = if !input_open || in_flight.len() >= concurrency {
            Event::Done(in_flight.next().await)
        } else if in_flight.is_empty() {
            Event::Line(urls.recv().await)
        } else {
            // Both: a slow input must not hold back finished records.
            match select(pin!(urls.recv()), in_flight.next()).await {
                Either::Left((line, _)) => Event::Line(line),
                Either::Right((done, _)) => Event::Done(done),
            }
        };
        match event {
            Event::Line(Some(Ok(url))) => {
                totals.read.set(totals.read.get() + 1);
                in_flight.push(fetch_one(handle, url));
            }
            Event::Line(Some(Err(e))) => {
                // Stop reading, but let what is in flight finish and be recorded.
                eprintln!("crawl: reading URLs: {e}; finishing the URLs already read");
                input_open = false;
            }
            Event::Line(None) => input_open = false,
            Event::Done(Some(record)) => {
                totals.add(&record);
                if let Some(w) = out.as_mut() {
                    write_record(w, &record).map_err(|e| format!("writing --out: {e}"))?;
                }
            }
            Event::Done(None) => break,
        }
    }
    if let Some(w) = out.as_mut() {
        w.flush().map_err(|e| format!("writing --out: {e}"))?;
    }
    Ok(())
}

fn write_record(w: &mut dyn Write, r: &Record) -> io::Result<()> {
    serde_json::to_writer(&mut *w, r)?;
    w.write_all(b"\n")
}

// ---------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------

/// Print a status line to stderr every second: done/read, ok, throttled, and per exit the
/// pacing rate (from the limiter intervals) and the requests actually sent in the last
/// second.
fn spawn_progress(
    handle: CrawlerHandle,
    totals: Rc<Totals>,
    expected: Option<u64>,
) -> actix_rt::task::JoinHandle<()> {
    actix_rt::spawn(async move {
        let mut tick = actix_rt::time::interval(Duration::from_secs(1));
        tick.tick().await; // the first tick is immediate
        let mut last_sent: HashMap<String, u64> = HashMap::new();
        let started = Instant::now();
        loop {
            tick.tick().await;
            let stats = handle.stats().await;
            let of = expected.unwrap_or_else(|| totals.read.get());
            let mut line = format!(
                "[{:>6.1}s] done {}/{} ok {} throttled {} |",
                started.elapsed().as_secs_f64(),
                totals.total.get(),
                of,
                totals.ok.get(),
                totals.throttled.get(),
            );
            for s in &stats {
                let sent = s.total - last_sent.insert(s.name.clone(), s.total).unwrap_or(0);
                line.push_str(&format!(
                    " {} pace {} sent {sent}/s{}",
                    s.name,
                    pace(&s.intervals),
                    if s.healthy { "" } else { " EJECTED" },
                ));
            }
            eprintln!("{line}");
        }
    })
}

/// The summed pacing rate of an exit's limiter keys, e.g. `48.5/s` (`-` when unpaced).
fn pace(intervals: &[(String, Duration)]) -> String {
    let rps: f64 = intervals
        .iter()
        .filter(|(_, i)| !i.is_zero())
        .map(|(_, i)| 1.0 / i.as_secs_f64())
        .sum();
    if rps > 0.0 {
        format!("{rps:.1}/s")
    } else {
        "-".into()
    }
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

/// Why `run` stopped early: bad input (exit 2) or an output failure (exit 1).
enum Failure {
    Usage(String),
    Output(String),
}

/// The demo: a site allowing 50 requests/s (burst 5) per client IP, four exits on
/// 127.0.0.1..127.0.0.4 with the default adaptive limiter, retries until every URL is 200.
fn demo_setup() -> (TestSite, Settings) {
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::per_second(50, 5)),
        retry_after: RetryAfter::Computed,
        log_requests: false,
        ..SiteConfig::default()
    });
    let exits = (1..=4)
        .map(|i| ExitSettings::new(format!("lo{i}"), IpAddr::V4(Ipv4Addr::new(127, 0, 0, i))))
        .collect();
    let mut s = Settings::with_exits(exits);
    debug_assert_eq!(s.limiter.algorithm, Algorithm::Aimd);
    s.crawler.concurrency = 64;
    s.crawler.max_retries = 100;
    s.crawler.retry_budget = 1.0;
    s.crawler.retry_backoff_base_ms = 100;
    s.crawler.retry_backoff_max_ms = 2_000;
    s.crawler.timeout_ms = 5_000;
    s.crawler.connect_timeout_ms = 2_000;
    (site, s)
}

async fn run(args: RunArgs) -> Result<(), Failure> {
    let (site, settings) = match &args.config {
        Some(path) => {
            let s = Settings::load(path)
                .map_err(|e| Failure::Usage(format!("config {}: {e}", path.display())))?;
            (None, s)
        }
        None => {
            let (site, s) = demo_setup();
            (Some(site), s)
        }
    };
    let concurrency = settings.crawler.concurrency.max(1) as usize;

    let urls = spawn_reader(&args.urls, site.as_ref())
        .map_err(|e| Failure::Usage(format!("--urls {e}")))?;
    let out = match &args.out {
        Some(p) => Some(
            open_output(p).map_err(|e| Failure::Usage(format!("--out {}: {e}", p.display())))?,
        ),
        None => None,
    };
    // Open the summary file up front too, so a bad path fails before the crawl.
    let summary_out = match &args.summary {
        Some(p) => Some(
            open_output(p)
                .map_err(|e| Failure::Usage(format!("--summary {}: {e}", p.display())))?,
        ),
        None => None,
    };

    let handle = Crawler::start(settings).map_err(|e| Failure::Usage(e.to_string()))?;
    let totals = Rc::new(Totals::default());
    let expected = match args.urls {
        UrlSource::Demo(n) => Some(n),
        _ => None,
    };
    let progress = spawn_progress(handle.clone(), totals.clone(), expected);
    let started = Instant::now();

    let crawled = crawl(&handle, urls, concurrency, out, &totals).await;
    let elapsed = started.elapsed();
    progress.abort();
    let stats = handle.stats().await;
    handle.shutdown(SHUTDOWN_GRACE).await;
    crawled.map_err(Failure::Output)?;

    let summary = Summary::new(&totals, elapsed, stats);
    let json = serde_json::to_string(&summary).expect("summary serializes");
    if let Some(mut w) = summary_out {
        writeln!(w, "{json}")
            .and_then(|()| w.flush())
            .map_err(|e| Failure::Output(format!("writing --summary: {e}")))?;
    }
    if args.is_demo() || args.summary.is_none() {
        println!("{json}");
    }
    if let Some(site) = &site {
        let st = site.stats();
        let peers: Vec<String> = st
            .peers
            .iter()
            .filter(|(_, p)| p.requests > 0)
            .map(|(ip, p)| format!("{ip} {} req {} 429", p.requests, p.limited))
            .collect();
        eprintln!("site saw: {}", peers.join(", "));
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = match parse_args(std::env::args().skip(1)) {
        Ok(cli) => cli,
        Err(msg) => {
            eprintln!("crawl: {msg}");
            return ExitCode::from(2);
        }
    };
    let args = match cli {
        Cli::Help => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Cli::Version => {
            println!("crawl {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Cli::Run(args) => args,
    };
    match actix_rt::System::new().block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("crawl: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Output(msg)) => {
            eprintln!("crawl: {msg}");
            ExitCode::from(1)
        }
    }
}
