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
//! - [`read_resume`]: `--resume` — the URLs `--out` already has a final record for;
//! - [`spawn_reader`]: the URL source — a file or stdin read line by line on its own
//!   thread (never the whole file), or the demo's generated URLs — feeding a bounded
//!   channel, so a slow stdin never blocks the actors;
//! - [`crawl`]: the streaming loop — at most `crawler.concurrency` fetches in flight,
//!   one [`Record`] per input URL written as soon as it completes, and the stop on
//!   Ctrl-C / SIGTERM ([`spawn_signals`]);
//! - [`spawn_progress`]: the progress bar (stderr is a terminal) or status line;
//! - [`init_logging`]: `tracing` events to stderr, filtered by `RUST_LOG`;
//! - [`Summary`]: the final object, built from the totals and `CrawlerHandle::stats`;
//! - [`follow_crawl`]: `--follow` — the URLs are seeds for `follow::crawl_site`;
//! - [`enqueue`] / [`frontier_crawl`] / [`dedupe`]: the shared Redis frontier — push URLs,
//!   consume them (write, flush, then complete: at-least-once), merge results files.
//!
//! Every URL written to `--out` or stderr goes through `exitcrawl::redact::mask_url`.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::future::{poll_fn, Future};
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Seek, SeekFrom, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::{pin, Pin};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl::redact::mask_url;
use exitcrawl_actors::redis::{Frontier, FrontierEntry, Redis, RedisOptions};
use exitcrawl_actors::{
    resume_site, Crawler, CrawlerHandle, ExitStats, Fetch, FetchError, FetchErrorKind,
    FetchResponse, FollowOptions, FollowRecord, FollowTotals, PendingLink, Resume,
};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::future::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

const USAGE: &str = "\
crawl — fetch URLs through exitcrawl's exits

USAGE:
    crawl --config FILE --urls FILE [--out FILE [--resume]] [--summary FILE] [OPTIONS]
    crawl --demo [--demo-urls N] [--out FILE] [--summary FILE] [OPTIONS]
    crawl --config FILE --urls SEEDS --follow [--ignore-robots] [--out FILE] [OPTIONS]
    crawl --enqueue FILE --frontier redis://HOST:PORT/QUEUE
    crawl --config FILE --frontier redis://HOST:PORT/QUEUE --out FILE [OPTIONS]
    crawl --dedupe FILE [--dedupe FILE ...] --out FILE

OPTIONS:
    --config FILE       Settings (TOML); EXITCRAWL__SECTION__KEY environment overrides apply
    --urls FILE         URLs, one per line ('-' = stdin); blank lines and # comments skipped
    --out FILE          JSONL, one record per URL as results arrive ('-' = stdout):
                        url, status, exit, attempts, elapsed_ms, bytes, error
                        (a URL stopped by Ctrl-C gets status null, error \"interrupted\")
    --resume            Append to --out instead of truncating it, and skip the URLs that
                        already have a final record there (one whose error is not
                        \"interrupted\"); interrupted URLs are fetched again and get a new
                        record. When a URL has several records, the LAST one counts.
                        With --follow: URLs with a record are not fetched again, and the
                        links the recorded pages found (their 'links') are crawled on.
    --summary FILE      One JSON object at the end ('-' = stdout): total, ok, failed,
                        throttled, requests, interrupted, skipped, elapsed_s, per_exit
                        (without --summary, the summary goes to stdout)
    --grace SECS        On Ctrl-C/SIGTERM, how long in-flight fetches may finish (default 10)
    --metrics ADDR      Serve Prometheus metrics on http://ADDR/metrics (sets
                        [metrics] listen), e.g. 127.0.0.1:9100
    --quiet             No progress bar or status line
    --log-format FMT    Logs on stderr as 'text' (default) or 'json' (one object a line);
                        RUST_LOG filters them (default 'warn'), e.g. RUST_LOG=info
    --demo              Start a rate-limited test site on 127.0.0.1 and crawl it through
                        four exits bound to 127.0.0.1..127.0.0.4; prints the summary
    --demo-urls N       URLs the demo generates (default 3000)
    --follow            Crawl, not only fetch (sets [crawl] follow = true): the --urls are
                        seeds, links are followed within the [crawl] scope, robots.txt is
                        obeyed. Records gain depth, parent, skipped (\"robots\"), new_links,
                        links; the summary gains discovered, skipped_scope, skipped_robots,
                        deduped. A Ctrl-C stops at once (exit 130); --resume goes on.
    --ignore-robots     Do not fetch or obey robots.txt (sets [crawl] robots = false);
                        prints a warning
    --frontier URL      A shared Redis frontier redis://HOST:PORT/QUEUE. With --enqueue:
                        push URLs into it. Otherwise (with --config, without --urls): pull
                        URLs from it (consumer hostname-pid), fetch, write the record to
                        --out (flushed), then mark the URL done and acknowledge it
                        (at-least-once: merge the --out files with --dedupe)
    --enqueue FILE      Push the URLs of FILE ('-' = stdin) once into --frontier; prints
                        'enqueued N' and exits
    --claim-idle SECS   Frontier: take over entries another consumer left pending for this
                        long (a dead consumer's), checked every SECS/2 (default 30)
    --idle-exit SECS    Frontier: exit once nothing is in flight, nothing is pending for
                        any consumer and nothing new came for this long (default 5)
    --dedupe FILE       Merge results files (repeatable, read in order) into --out FILE:
                        one record per URL, the last final (not interrupted) one, else the
                        last one; in order of first appearance; unreadable lines dropped
    -h, --help          Print this help
    -V, --version       Print the version

PROGRESS:
    When stderr is a terminal: a progress bar with URLs done/total, ok/throttled/failed,
    the rate and each exit's health. The total is exact for the demo and for a regular
    --urls file up to 16 MiB (counted in a quick first pass); for a larger file it is an
    estimate from the bytes read so far (shown with ~); for stdin it is the URLs read.
    Otherwise: a status line every 5 s (every second with --demo).

STOPPING:
    Ctrl-C (or SIGTERM) stops reading URLs, lets in-flight fetches finish for --grace
    seconds, records every URL read but not finished as interrupted, flushes --out, writes
    --summary and exits 130. A second Ctrl-C exits at once (records already written stay;
    --resume completes the job).

SECURITY:
    Credentials in URLs are masked in --out and on stderr: the password of user:pass@
    and the values of query parameters named like token, key, password, secret, auth,
    sig become ***. --resume compares these masked forms.

EXIT STATUS:
    0 the crawl ran (even if some URLs failed); 1 an output could not be written (or,
    with --frontier/--enqueue, Redis failed);
    2 bad arguments or configuration; 130 interrupted
";

/// URLs the demo generates unless `--demo-urls` says otherwise.
const DEFAULT_DEMO_URLS: u64 = 3000;
/// Lines read ahead of the fetches (the reader thread waits when this many are queued).
const READ_AHEAD: usize = 1024;
/// How long in-flight fetches may take to finish at the end of a complete run.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Default `--grace`.
const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);
/// A regular `--urls` file up to this size is counted before the crawl (exact total).
const PRECOUNT_MAX_BYTES: u64 = 16 << 20;
/// `--out` is flushed at least this often (so `tail -f` and a hard kill lose little).
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// The `error` of a record whose fetch was stopped by Ctrl-C.
const INTERRUPTED: &str = "interrupted";
/// Default `--claim-idle`.
const DEFAULT_CLAIM_IDLE: Duration = Duration::from_secs(30);
/// Default `--idle-exit`.
const DEFAULT_IDLE_EXIT: Duration = Duration::from_secs(5);
/// Exit code of an interrupted run (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

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
    /// A shared Redis frontier (`--frontier` without `--enqueue`).
    Frontier(FrontierUrl),
}

/// `--frontier redis://HOST:PORT/QUEUE`, split into the server and the queue name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FrontierUrl {
    /// `redis://HOST:PORT/`
    redis: String,
    queue: String,
}

impl FrontierUrl {
    fn parse(v: &str) -> Result<Self, String> {
        let bad = || format!("--frontier: {v:?} is not redis://HOST:PORT/QUEUE");
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
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cli {
    Help,
    Version,
    Run(RunArgs),
    /// `--enqueue FILE --frontier URL`: push the URLs of FILE and exit.
    Enqueue {
        urls: UrlSource,
        frontier: FrontierUrl,
    },
    /// `--dedupe FILE... --out FILE`: merge results files.
    Dedupe {
        inputs: Vec<PathBuf>,
        out: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RunArgs {
    /// `None` in demo mode (the demo builds its own settings).
    config: Option<PathBuf>,
    urls: UrlSource,
    out: Option<PathBuf>,
    summary: Option<PathBuf>,
    resume: bool,
    grace: Duration,
    metrics: Option<SocketAddr>,
    quiet: bool,
    log_format: LogFormat,
    /// `--follow`: set `[crawl] follow = true`.
    follow: bool,
    /// `--ignore-robots`: set `[crawl] robots = false`.
    ignore_robots: bool,
    /// `--claim-idle` (frontier mode).
    claim_idle: Duration,
    /// `--idle-exit` (frontier mode).
    idle_exit: Duration,
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
    let mut resume = false;
    let mut grace = None;
    let mut metrics = None;
    let mut quiet = false;
    let mut log_format = None;
    let mut follow = false;
    let mut ignore_robots = false;
    let mut frontier = None;
    let mut enqueue = None;
    let mut claim_idle = None;
    let mut idle_exit = None;
    let mut dedupe: Vec<PathBuf> = Vec::new();

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
            "--resume" if inline.is_none() => resume = true,
            "--quiet" if inline.is_none() => quiet = true,
            "--follow" if inline.is_none() => follow = true,
            "--ignore-robots" if inline.is_none() => ignore_robots = true,
            "--frontier" => {
                let v = value("redis://HOST:PORT/QUEUE")?;
                set_once(&mut frontier, &flag, FrontierUrl::parse(&v)?)?;
            }
            "--enqueue" => set_once(&mut enqueue, &flag, value("a file, or - for stdin")?)?,
            "--dedupe" => dedupe.push(PathBuf::from(value("a results file")?)),
            "--claim-idle" | "--idle-exit" => {
                let v = value("seconds")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                    .ok_or_else(|| format!("{flag}: {v:?} is not a positive number of seconds"))?;
                let slot = if flag == "--claim-idle" {
                    &mut claim_idle
                } else {
                    &mut idle_exit
                };
                set_once(slot, &flag, Duration::from_secs_f64(secs))?;
            }
            "--demo-urls" => {
                let v = value("a count")?;
                let n: u64 = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--demo-urls: {v:?} is not a positive integer"))?;
                set_once(&mut demo_urls, &flag, n)?;
            }
            "--grace" => {
                let v = value("seconds")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= 86_400.0)
                    .ok_or_else(|| format!("--grace: {v:?} is not a number of seconds"))?;
                set_once(&mut grace, &flag, Duration::from_secs_f64(secs))?;
            }
            "--metrics" => {
                let v = value("an address such as 127.0.0.1:9100")?;
                let addr: SocketAddr = v.parse().map_err(|_| {
                    format!("--metrics: {v:?} is not a socket address (e.g. 127.0.0.1:9100)")
                })?;
                set_once(&mut metrics, &flag, addr)?;
            }
            "--log-format" => {
                let v = value("text or json")?;
                let f = match v.as_str() {
                    "text" => LogFormat::Text,
                    "json" => LogFormat::Json,
                    _ => return Err(format!("--log-format: {v:?} is neither text nor json")),
                };
                set_once(&mut log_format, &flag, f)?;
            }
            _ => return Err(format!("unknown argument {arg:?} (see --help)")),
        }
    }

    if !dedupe.is_empty() {
        if demo || config.is_some() || urls.is_some() || frontier.is_some() || enqueue.is_some() {
            return Err("--dedupe only goes with --out FILE".into());
        }
        let out = out.ok_or("--dedupe needs --out FILE (the merged results)")?;
        return Ok(Cli::Dedupe {
            inputs: dedupe,
            out,
        });
    }
    if let Some(file) = enqueue {
        let frontier = frontier.ok_or("--enqueue needs --frontier redis://HOST:PORT/QUEUE")?;
        if demo || config.is_some() || urls.is_some() || out.is_some() || follow {
            return Err("--enqueue only goes with --frontier".into());
        }
        let urls = if file == "-" {
            UrlSource::Stdin
        } else {
            UrlSource::File(PathBuf::from(file))
        };
        return Ok(Cli::Enqueue { urls, frontier });
    }
    if (claim_idle.is_some() || idle_exit.is_some()) && frontier.is_none() {
        return Err("--claim-idle/--idle-exit only go with --frontier".into());
    }
    let urls = if let Some(f) = frontier {
        if demo || urls.is_some() {
            return Err("--frontier pulls its URLs from Redis: drop --urls/--demo".into());
        }
        if config.is_none() {
            return Err("--frontier needs --config FILE".into());
        }
        if resume || follow {
            return Err("--frontier does not go with --resume or --follow".into());
        }
        if out.as_deref().is_none_or(|p| p == Path::new("-")) {
            return Err("--frontier needs --out FILE (records are written before the ack)".into());
        }
        UrlSource::Frontier(f)
    } else if demo {
        if config.is_some() || urls.is_some() {
            return Err("--demo builds its own settings and URLs: drop --config/--urls".into());
        }
        if resume {
            return Err(
                "--resume does not go with --demo (its site's port changes every run)".into(),
            );
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
    if resume && out.as_deref().is_none_or(|p| p == Path::new("-")) {
        return Err("--resume needs --out FILE (the results of the earlier run)".into());
    }
    Ok(Cli::Run(RunArgs {
        config,
        urls,
        out,
        summary,
        resume,
        grace: grace.unwrap_or(DEFAULT_STOP_GRACE),
        metrics,
        quiet,
        log_format: log_format.unwrap_or_default(),
        follow,
        ignore_robots,
        claim_idle: claim_idle.unwrap_or(DEFAULT_CLAIM_IDLE),
        idle_exit: idle_exit.unwrap_or(DEFAULT_IDLE_EXIT),
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
    /// `null`, or why the fetch ended without an answer (`"interrupted"`: Ctrl-C).
    error: Option<String>,
    /// Not part of the record: 429/503 answers over all attempts (for the summary).
    #[serde(skip)]
    throttled: u32,
}

impl Record {
    /// The record of a finished fetch. `stopping`: the crawl is being interrupted, so a
    /// fetch the crawler dropped (`Shutdown`) is recorded as interrupted.
    fn new(result: Result<FetchResponse, FetchError>, waited: Duration, stopping: bool) -> Self {
        match result {
            Ok(r) => Record {
                url: mask_url(&r.url),
                status: Some(r.status),
                exit: Some(String::from(&*r.exit)),
                attempts: r.attempts,
                elapsed_ms: millis(r.elapsed),
                bytes: r.body.len() as u64,
                error: None,
                throttled: r.throttled,
            },
            Err(e) => Record {
                error: Some(if stopping && e.kind == FetchErrorKind::Shutdown {
                    INTERRUPTED.to_string()
                } else {
                    mask_text(&format!("{}: {}", e.kind.as_str(), e.message), &e.url)
                }),
                url: mask_url(&e.url),
                status: None,
                exit: e.exit.as_deref().map(String::from),
                attempts: e.attempts,
                elapsed_ms: millis(waited),
                bytes: 0,
                throttled: e.throttled,
            },
        }
    }

    /// A URL that was read but whose fetch never replied before the stop deadline.
    fn interrupted(url: String, waited: Duration) -> Self {
        Record {
            url: mask_url(&url),
            status: None,
            exit: None,
            attempts: 0,
            elapsed_ms: millis(waited),
            bytes: 0,
            error: Some(INTERRUPTED.to_string()),
            throttled: 0,
        }
    }

    fn is_ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    fn is_interrupted(&self) -> bool {
        self.error.as_deref() == Some(INTERRUPTED)
    }
}

/// `msg` with the credentials of `raw_url` (and of any URL-looking word) masked.
fn mask_text(msg: &str, raw_url: &str) -> String {
    let msg = if raw_url.is_empty() {
        msg.to_string()
    } else {
        msg.replace(raw_url, &mask_url(raw_url))
    };
    msg.split(' ')
        .map(|w| {
            if w.contains("://") || w.contains('?') || w.contains('@') {
                mask_url(w)
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
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
    interrupted: Cell<u64>,
    /// Input URLs read so far (≥ total: the difference is in flight).
    read: Cell<u64>,
}

impl Totals {
    fn add(&self, r: &Record) {
        self.count(r.is_ok(), r.throttled, r.attempts, r.is_interrupted());
    }

    fn count(&self, ok: bool, throttled: u32, attempts: u32, interrupted: bool) {
        let bump = |c: &Cell<u64>, n: u64| c.set(c.get() + n);
        bump(&self.total, 1);
        bump(&self.ok, u64::from(ok));
        bump(&self.throttled, u64::from(throttled));
        bump(&self.requests, u64::from(attempts));
        bump(&self.interrupted, u64::from(interrupted));
    }
}

/// The `--summary` object.
#[derive(Debug, Serialize)]
struct Summary {
    /// URLs read (and recorded) by this run.
    total: u64,
    /// Final answer 2xx.
    ok: u64,
    /// `total - ok` (interrupted URLs included).
    failed: u64,
    /// 429/503 answers over all attempts of all URLs.
    throttled: u64,
    /// HTTP attempts sent (sum of `attempts`).
    requests: u64,
    /// URLs recorded as interrupted (Ctrl-C).
    interrupted: u64,
    /// URLs skipped by `--resume` (a final record was already in `--out`).
    skipped: u64,
    elapsed_s: f64,
    per_exit: Vec<ExitSummary>,
    /// `--follow` only: the crawl's discovery counters.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    follow: Option<FollowSummary>,
}

/// The summary's extra counters with `--follow` (see `FollowTotals`).
#[derive(Debug, Serialize)]
struct FollowSummary {
    /// Distinct URLs accepted for crawling (valid seeds + in-scope unseen links).
    discovered: u64,
    /// Link occurrences outside the scope.
    skipped_scope: u64,
    /// URLs not fetched because of robots.txt (each has a record).
    skipped_robots: u64,
    /// In-scope link occurrences (and seeds) already seen.
    deduped: u64,
    /// Discovered URLs not fetched because `max_pages` was reached.
    skipped_budget: u64,
    /// robots.txt fetches sent (their attempts count in `requests`).
    robots_fetches: u64,
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
    fn new(t: &Totals, skipped: u64, elapsed: Duration, stats: Vec<ExitStats>) -> Self {
        Summary {
            total: t.total.get(),
            ok: t.ok.get(),
            failed: t.total.get() - t.ok.get(),
            throttled: t.throttled.get(),
            requests: t.requests.get(),
            interrupted: t.interrupted.get(),
            skipped,
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
            follow: None,
        }
    }
}

/// A file (truncated, or appended to), or stdout for `-`.
fn open_output(path: &Path, append: bool) -> io::Result<Box<dyn Write>> {
    if path == Path::new("-") {
        Ok(Box::new(io::stdout().lock()))
    } else if append {
        let f = OpenOptions::new().append(true).create(true).open(path)?;
        Ok(Box::new(BufWriter::new(f)))
    } else {
        Ok(Box::new(BufWriter::new(File::create(path)?)))
    }
}

// ---------------------------------------------------------------------------------------
// Resume
// ---------------------------------------------------------------------------------------

/// The fields of an earlier record that `--resume` needs (the last four: `--follow`).
#[derive(Deserialize)]
struct SeenRecord {
    url: String,
    error: Option<String>,
    #[serde(default)]
    depth: u32,
    #[serde(default)]
    skipped: Option<String>,
    #[serde(default)]
    links: Vec<String>,
}

/// What `--resume` found in `--out`.
#[derive(Debug, Default)]
struct ResumeState {
    /// URLs whose last record is final (not interrupted): skipped.
    done: HashSet<String>,
    /// Records read.
    records: u64,
    /// URLs whose last record says interrupted: fetched again.
    interrupted: u64,
    /// Lines that were not a record (left in place, ignored).
    unreadable: u64,
    /// Bytes of an unfinished last line (a hard kill mid-write) cut off the file.
    truncated: u64,
    /// `--follow`: records of fetched pages (they count against `max_pages`).
    pages: u64,
    /// `--follow`: the links the recorded pages put in the frontier. A link whose
    /// credentials were masked (`***`) cannot be fetched as written and is left out.
    links: Vec<PendingLink>,
    /// `--follow`: links left out because they were masked.
    masked_links: u64,
}

/// Read the existing `--out` (absent = nothing done yet). The last record of a URL
/// decides: final → skip it, interrupted → fetch it again. An unfinished last line (no
/// newline) is cut off so the appended records start on a line of their own.
fn read_resume(path: &Path) -> io::Result<ResumeState> {
    let mut state = ResumeState::default();
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(state),
        Err(e) => return Err(e),
    };
    let mut interrupted = HashSet::new();
    let mut complete_len = 0u64;
    let mut reader = BufReader::new(&mut file);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            state.truncated = n as u64;
            break;
        }
        complete_len += n as u64;
        match serde_json::from_slice::<SeenRecord>(&buf) {
            Ok(r) => {
                state.records += 1;
                let invalid_seed = r
                    .error
                    .as_deref()
                    .is_some_and(|e| e.starts_with("invalid_url"));
                if r.skipped.is_none() && !invalid_seed {
                    state.pages += 1;
                }
                for link in r.links {
                    if link.contains("***") {
                        state.masked_links += 1;
                        continue;
                    }
                    state.links.push(PendingLink {
                        url: link,
                        depth: r.depth.saturating_add(1),
                        parent: Some(r.url.clone()),
                    });
                }
                if r.error.as_deref() == Some(INTERRUPTED) {
                    state.done.remove(&r.url);
                    interrupted.insert(r.url);
                } else {
                    interrupted.remove(&r.url);
                    state.done.insert(r.url);
                }
            }
            Err(_) if buf.iter().all(u8::is_ascii_whitespace) => {}
            Err(_) => state.unreadable += 1,
        }
    }
    drop(reader);
    if state.truncated > 0 {
        file.set_len(complete_len)?;
        file.seek(SeekFrom::End(0))?;
    }
    state.interrupted = interrupted.len() as u64;
    Ok(state)
}

// ---------------------------------------------------------------------------------------
// URL source
// ---------------------------------------------------------------------------------------

/// What the reader thread has done so far (shared with the progress display).
#[derive(Debug, Default)]
struct ReadStats {
    /// Size of the `--urls` file when it is a regular file (0 otherwise).
    size: u64,
    /// Bytes of the file consumed.
    bytes: AtomicU64,
    /// URL lines seen (skipped ones included).
    lines: AtomicU64,
    /// URL lines skipped by `--resume`.
    skipped: AtomicU64,
    /// The exact number of URL lines, once known (0 = unknown): the demo's count, or a
    /// small regular file's first pass.
    total: AtomicU64,
}

/// Open the source (errors here are argument errors: exit 2) and start a thread feeding
/// its URLs into a bounded channel. Lines are read one at a time, never the whole file.
/// URLs in `skip` (`--resume`) are counted and left out.
fn spawn_reader(
    source: &UrlSource,
    demo_site: Option<&TestSite>,
    skip: HashSet<String>,
) -> io::Result<(mpsc::Receiver<io::Result<String>>, Arc<ReadStats>)> {
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
        UrlSource::File(path) => {
            let file = File::open(path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            let meta = file.metadata()?;
            let size = if meta.is_file() { meta.len() } else { 0 };
            let stats = Arc::new(ReadStats {
                size,
                ..ReadStats::default()
            });
            let st = Arc::clone(&stats);
            let path = path.clone();
            std::thread::spawn(move || {
                if size > 0 && size <= PRECOUNT_MAX_BYTES {
                    if let Some(n) = count_url_lines(&path) {
                        st.total.store(n, Ordering::Relaxed);
                    }
                }
                feed_lines(BufReader::new(file), &tx, &st, &skip)
            });
            stats
        }
    };
    Ok((rx, stats))
}

/// Longest input line kept, bytes. A longer line keeps its first `MAX_LINE` bytes (the
/// scheduler then refuses it as too long, so it still gets its record) and the rest is
/// skipped without being buffered: a 10 GB line must not take 10 GB.
const MAX_LINE: usize = 16 * 1024;

/// Like `read_until(b'\n')`, but keeps at most `MAX_LINE` bytes of the line. Returns the
/// bytes consumed (0 at end of input).
fn read_line_capped(input: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<usize> {
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
fn url_line(raw: &[u8]) -> Option<String> {
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

// ---------------------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------------------

/// `--out`, shared by the crawl loop and the signal task (which flushes it on a second
/// Ctrl-C before exiting). Everything runs on the System's one thread.
type SharedOut = Rc<RefCell<Option<Box<dyn Write>>>>;

/// Watch SIGINT and SIGTERM: the first one is sent on the returned channel (the crawl
/// loop stops); a second one flushes `--out` and exits with 130 at once.
fn spawn_signals(out: SharedOut) -> io::Result<mpsc::UnboundedReceiver<()>> {
    let (tx, rx) = mpsc::unbounded_channel();
    #[cfg(unix)]
    let mut signals = {
        use actix_rt::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        )
    };
    actix_rt::spawn(async move {
        let mut seen = 0u32;
        loop {
            #[cfg(unix)]
            {
                let (int, term) = &mut signals;
                let _ =
                    futures_util::future::select(Box::pin(int.recv()), Box::pin(term.recv())).await;
            }
            #[cfg(not(unix))]
            {
                if actix_rt::signal::ctrl_c().await.is_err() {
                    return;
                }
            }
            seen += 1;
            if seen == 1 {
                let _ = tx.send(());
            } else {
                if let Ok(mut out) = out.try_borrow_mut() {
                    if let Some(w) = out.as_mut() {
                        let _ = w.flush();
                    }
                }
                note("crawl: interrupted again: exiting now (records written so far are kept)");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        }
    });
    Ok(rx)
}

// ---------------------------------------------------------------------------------------
// The streaming loop
// ---------------------------------------------------------------------------------------

/// How the crawl loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Every URL read has its final record.
    Complete,
    /// Ctrl-C/SIGTERM: the URLs not finished are recorded as interrupted.
    Interrupted,
}

/// Fetch every URL from `urls` with at most `concurrency` in flight, writing each record
/// to `out` as it completes. Returns when the input is exhausted and every fetch has
/// ended, or — after a stop signal — when the in-flight fetches have finished or the
/// grace period (plus a second) has passed; then every URL read without a final record
/// gets an interrupted record.
async fn crawl(
    handle: &CrawlerHandle,
    mut urls: mpsc::Receiver<io::Result<String>>,
    mut stop: mpsc::UnboundedReceiver<()>,
    grace: Duration,
    concurrency: usize,
    out: &SharedOut,
    totals: &Totals,
) -> Result<Ended, String> {
    enum Event {
        Stop,
        Deadline,
        Done(u64, Result<FetchResponse, FetchError>, Duration),
        Line(Option<io::Result<String>>),
        Flush,
        Finished,
    }
    let write = |record: &Record| -> Result<(), String> {
        totals.add(record);
        if let Some(w) = out.borrow_mut().as_mut() {
            write_record(w, record).map_err(|e| format!("writing --out: {e}"))?;
        }
        Ok(())
    };
    let mut in_flight = FuturesUnordered::new();
    // URLs read whose record is not written yet, by fetch id.
    let mut pending: HashMap<u64, (String, Instant)> = HashMap::new();
    let mut next_id = 0u64;
    let mut input_open = true;
    let mut stopping = false;
    let mut deadline: Option<Pin<Box<actix_rt::time::Sleep>>> = None;
    let mut flush = actix_rt::time::interval(FLUSH_EVERY);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    loop {
        let event = poll_fn(|cx| {
            if !stopping {
                if let Poll::Ready(Some(())) = stop.poll_recv(cx) {
                    return Poll::Ready(Event::Stop);
                }
            }
            if let Some(d) = deadline.as_mut() {
                if d.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::Deadline);
                }
            }
            if let Poll::Ready(Some((id, result, waited))) = in_flight.poll_next_unpin(cx) {
                return Poll::Ready(Event::Done(id, result, waited));
            }
            if !input_open && in_flight.is_empty() {
                return Poll::Ready(Event::Finished);
            }
            if input_open && in_flight.len() < concurrency {
                if let Poll::Ready(line) = urls.poll_recv(cx) {
                    return Poll::Ready(Event::Line(line));
                }
            }
            if flush.poll_tick(cx).is_ready() {
                return Poll::Ready(Event::Flush);
            }
            Poll::Pending
        })
        .await;
        match event {
            Event::Stop => {
                stopping = true;
                input_open = false;
                // The reader thread's next send fails: it stops reading.
                urls.close();
                note(&format!(
                    "crawl: interrupted: no new URLs; {} in flight get {:.0} s to finish \
                     (Ctrl-C again to quit now)",
                    pending.len(),
                    grace.as_secs_f64()
                ));
                // Queued fetches fail at once (recorded as interrupted), in-flight ones
                // get `grace`; the deadline is a backstop should a reply never come.
                let h = handle.clone();
                actix_rt::spawn(async move { h.shutdown(grace).await });
                deadline = Some(Box::pin(actix_rt::time::sleep(
                    grace + Duration::from_secs(1),
                )));
            }
            Event::Deadline => {
                let mut left: Vec<_> = pending.drain().collect();
                left.sort_by_key(|(id, _)| *id);
                for (_, (url, started)) in left {
                    write(&Record::interrupted(url, started.elapsed()))?;
                }
                break;
            }
            Event::Done(id, result, waited) => {
                pending.remove(&id);
                write(&Record::new(result, waited, stopping))?;
            }
            Event::Line(Some(Ok(url))) => {
                totals.read.set(totals.read.get() + 1);
                let id = next_id;
                next_id += 1;
                let started = Instant::now();
                pending.insert(id, (url.clone(), started));
                let h = handle.clone();
                in_flight.push(async move {
                    let result = h.fetch(Fetch::get(url)).await;
                    (id, result, started.elapsed())
                });
            }
            Event::Line(Some(Err(e))) => {
                // Stop reading, but let what is in flight finish and be recorded.
                note(&format!(
                    "crawl: reading URLs: {e}; finishing the URLs already read"
                ));
                input_open = false;
            }
            Event::Line(None) => input_open = false,
            Event::Flush => {
                if let Some(w) = out.borrow_mut().as_mut() {
                    w.flush().map_err(|e| format!("writing --out: {e}"))?;
                }
            }
            Event::Finished => break,
        }
    }
    if let Some(w) = out.borrow_mut().as_mut() {
        w.flush().map_err(|e| format!("writing --out: {e}"))?;
    }
    Ok(if stopping {
        Ended::Interrupted
    } else {
        Ended::Complete
    })
}

// ---------------------------------------------------------------------------------------
// --follow
// ---------------------------------------------------------------------------------------

/// `--follow`: every URL of the source is a seed; `follow::crawl_site` does the rest. Each
/// record (masked) is written as it arrives. A stop signal ends the crawl at once (the
/// fetches in flight are dropped, without records): exit 130.
async fn follow_crawl(
    handle: &CrawlerHandle,
    mut urls: mpsc::Receiver<io::Result<String>>,
    resume: Resume,
    mut stop: mpsc::UnboundedReceiver<()>,
    out: &SharedOut,
    totals: &Totals,
) -> Result<(Ended, Option<FollowTotals>), String> {
    let mut seeds = Vec::new();
    while let Some(line) = urls.recv().await {
        match line {
            Ok(u) => seeds.push(u),
            Err(e) => return Err(format!("reading seeds: {e}")),
        }
    }
    totals.read.set(seeds.len() as u64);
    let opts = FollowOptions::from_settings(handle.settings());
    let failed: RefCell<Option<String>> = RefCell::new(None);
    let last_flush = Cell::new(Instant::now());
    let on_record = |mut r: FollowRecord| {
        let raw = std::mem::take(&mut r.url);
        r.url = mask_url(&raw);
        r.parent = r.parent.as_deref().map(mask_url);
        for l in &mut r.links {
            *l = mask_url(l);
        }
        r.error = r.error.as_deref().map(|e| mask_text(e, &raw));
        totals.count(
            r.status.is_some_and(|s| (200..300).contains(&s)),
            r.throttled,
            r.attempts,
            false,
        );
        if failed.borrow().is_some() {
            return;
        }
        if let Some(w) = out.borrow_mut().as_mut() {
            let mut written = serde_json::to_writer(&mut *w, &r)
                .map_err(io::Error::from)
                .and_then(|()| w.write_all(b"\n"));
            if written.is_ok() && last_flush.get().elapsed() >= FLUSH_EVERY {
                last_flush.set(Instant::now());
                written = w.flush();
            }
            if let Err(e) = written {
                *failed.borrow_mut() = Some(format!("writing --out: {e}"));
            }
        }
    };
    let crawl = pin!(resume_site(handle, seeds, resume, &opts, on_record));
    let stopped = pin!(stop.recv());
    let (ended, ft) = match futures_util::future::select(crawl, stopped).await {
        futures_util::future::Either::Left((result, _)) => {
            let ft = result.map_err(|e| e.to_string())?;
            (Ended::Complete, Some(ft))
        }
        futures_util::future::Either::Right(_) => {
            note("crawl: interrupted: --follow stops at once (fetches in flight get no record)");
            (Ended::Interrupted, None)
        }
    };
    if let Some(e) = failed.take() {
        return Err(e);
    }
    if let Some(w) = out.borrow_mut().as_mut() {
        w.flush().map_err(|e| format!("writing --out: {e}"))?;
    }
    Ok((ended, ft))
}

// ---------------------------------------------------------------------------------------
// Shared frontier (--frontier, --enqueue, --dedupe)
// ---------------------------------------------------------------------------------------

/// URLs pushed per `Frontier::enqueue` call by `--enqueue`.
const ENQUEUE_BATCH: usize = 10_000;
/// Longest wait for new entries when nothing is in flight.
const FRONTIER_BLOCK: Duration = Duration::from_millis(250);
/// Longest wait for a completion before looking for more entries.
const FRONTIER_POLL: Duration = Duration::from_millis(100);

/// The consumer name: `hostname-pid`.
fn consumer_name() -> String {
    let host = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".into());
    format!("{host}-{}", std::process::id())
}

async fn open_frontier(f: &FrontierUrl) -> Result<Frontier, String> {
    let redis = Redis::connect(&f.redis, RedisOptions::default())
        .map_err(|e| format!("--frontier {}: {e}", f.redis))?;
    Frontier::open(&redis, &f.queue)
        .await
        .map_err(|e| format!("--frontier {}{}: {e}", f.redis, f.queue))
}

/// `--enqueue FILE --frontier URL`: push every URL line once. Returns how many.
async fn enqueue(urls: &UrlSource, f: &FrontierUrl) -> Result<usize, Failure> {
    let input: Box<dyn BufRead> = match urls {
        UrlSource::File(p) => {
            Box::new(BufReader::new(File::open(p).map_err(|e| {
                Failure::Usage(format!("--enqueue {}: {e}", p.display()))
            })?))
        }
        _ => Box::new(BufReader::new(io::stdin().lock())),
    };
    let frontier = open_frontier(f).await.map_err(Failure::Output)?;
    let mut added = 0;
    let mut batch = Vec::new();
    let mut lines = input.split(b'\n');
    loop {
        let line = lines.next();
        let end = line.is_none();
        if let Some(line) = line {
            let line = line.map_err(|e| Failure::Usage(format!("--enqueue: {e}")))?;
            if let Some(u) = url_line(&line) {
                batch.push(u);
            }
        }
        if batch.len() >= ENQUEUE_BATCH || (end && !batch.is_empty()) {
            added += frontier
                .enqueue(batch.drain(..))
                .await
                .map_err(|e| Failure::Output(format!("--enqueue: {e} ({added} enqueued)")))?;
        }
        if end {
            return Ok(added);
        }
    }
}

struct FrontierOptions {
    claim_idle: Duration,
    idle_exit: Duration,
    grace: Duration,
    concurrency: usize,
}

/// `--frontier` consumer: pull entries, fetch, write the record (flushed), then
/// `complete` (done-set + ack). Entries other consumers left pending for `claim_idle` are
/// claimed every `claim_idle / 2`. Ends when nothing is in flight or pending and nothing
/// came for `idle_exit`; on a stop signal, the fetches in flight get `grace`, the rest stay
/// pending for other consumers.
async fn frontier_crawl(
    handle: &CrawlerHandle,
    f: &FrontierUrl,
    o: &FrontierOptions,
    mut stop: mpsc::UnboundedReceiver<()>,
    out: &SharedOut,
    totals: &Totals,
) -> Result<Ended, String> {
    type Done = (FrontierEntry, Result<FetchResponse, FetchError>, Duration);
    let frontier = open_frontier(f).await?;
    let consumer = consumer_name();
    note(&format!(
        "crawl: frontier {}{} as consumer {consumer}",
        f.redis, f.queue
    ));
    let mut in_flight: FuturesUnordered<futures_util::future::LocalBoxFuture<'_, Done>> =
        FuturesUnordered::new();
    let mut ids: HashSet<String> = HashSet::new();
    let claim_every = o.claim_idle / 2;
    let mut last_claim: Option<Instant> = None;
    let mut last_activity = Instant::now();

    let finish = |(entry, result, waited): Done| {
        let frontier = &frontier;
        async move {
            let record = Record::new(result, waited, false);
            totals.add(&record);
            if let Some(w) = out.borrow_mut().as_mut() {
                write_record(w, &record)
                    .and_then(|()| w.flush())
                    .map_err(|e| format!("writing --out: {e}"))?;
            }
            // Written (and flushed) first, acknowledged after: at-least-once.
            if let Err(e) = frontier.complete(&entry).await {
                note(&format!(
                    "crawl: frontier: completing {}: {e} (it stays pending; another \
                     consumer will redo it)",
                    mask_url(&entry.url)
                ));
            }
            Ok::<_, String>(entry.id)
        }
    };

    let stopped = loop {
        if stop.try_recv().is_ok() {
            break true;
        }
        let free = o.concurrency.saturating_sub(in_flight.len());
        let mut got = Vec::new();
        let mut redis_failed = false;
        if free > 0 {
            if last_claim.is_none_or(|t| t.elapsed() >= claim_every) {
                last_claim = Some(Instant::now());
                match frontier.claim_stale(&consumer, o.claim_idle, free).await {
                    Ok(c) => {
                        if !c.is_empty() {
                            note(&format!(
                                "crawl: frontier: claimed {} stale entries",
                                c.len()
                            ));
                        }
                        got.extend(c.into_iter().filter(|e| !ids.contains(&e.id)));
                    }
                    Err(e) => {
                        redis_failed = true;
                        note(&format!("crawl: frontier: claim: {e}"));
                    }
                }
            }
            if got.len() < free {
                let block = if in_flight.is_empty() && got.is_empty() {
                    FRONTIER_BLOCK
                } else {
                    Duration::ZERO
                };
                match frontier.next(&consumer, free - got.len(), block).await {
                    Ok(n) => got.extend(n),
                    Err(e) => {
                        redis_failed = true;
                        note(&format!("crawl: frontier: read: {e}"));
                    }
                }
            }
        }
        if !got.is_empty() {
            last_activity = Instant::now();
        }
        for entry in got {
            match frontier.is_done(&entry.url).await {
                Ok(true) => {
                    let _ = frontier.ack(&entry.id).await;
                    continue;
                }
                Ok(false) => {}
                Err(e) => note(&format!("crawl: frontier: is_done: {e}")),
            }
            totals.read.set(totals.read.get() + 1);
            ids.insert(entry.id.clone());
            let h = handle.clone();
            in_flight.push(
                async move {
                    let started = Instant::now();
                    let result = h.fetch(Fetch::get(entry.url.clone())).await;
                    (entry, result, started.elapsed())
                }
                .boxed_local(),
            );
        }
        if in_flight.is_empty() {
            if last_activity.elapsed() >= o.idle_exit {
                match frontier.pending().await {
                    Ok(0) => break false,
                    Ok(_) => {}
                    Err(e) => note(&format!("crawl: frontier: pending: {e}")),
                }
            }
            if redis_failed || free == 0 {
                actix_rt::time::sleep(FRONTIER_BLOCK).await;
            }
            continue;
        }
        if let Ok(Some(done)) = actix_rt::time::timeout(FRONTIER_POLL, in_flight.next()).await {
            let id = finish(done).await?;
            ids.remove(&id);
            last_activity = Instant::now();
        }
    };
    if !stopped {
        return Ok(Ended::Complete);
    }
    note(&format!(
        "crawl: interrupted: {} in flight get {:.0} s to finish; the rest stay pending for \
         other consumers",
        in_flight.len(),
        o.grace.as_secs_f64()
    ));
    let drain = async {
        while let Some(done) = in_flight.next().await {
            finish(done).await?;
        }
        Ok::<_, String>(())
    };
    if let Ok(r) = actix_rt::time::timeout(o.grace, drain).await {
        r?;
    }
    Ok(Ended::Interrupted)
}

/// `--dedupe IN... --out OUT`: one record per URL — its last final record (error not
/// "interrupted"), else its last record — in order of first appearance. Lines that are
/// not records (e.g. a line cut by a hard kill) are dropped and counted.
fn dedupe(inputs: &[PathBuf], out: &Path) -> Result<(), Failure> {
    let mut order: Vec<String> = Vec::new();
    let mut best: HashMap<String, (String, bool)> = HashMap::new();
    let (mut read, mut dropped) = (0u64, 0u64);
    for path in inputs {
        let f = File::open(path)
            .map_err(|e| Failure::Usage(format!("--dedupe {}: {e}", path.display())))?;
        for line in BufReader::new(f).lines() {
            let line =
                line.map_err(|e| Failure::Usage(format!("--dedupe {}: {e}", path.display())))?;
            if line.trim().is_empty() {
                continue;
            }
            let Ok(r) = serde_json::from_str::<SeenRecord>(&line) else {
                dropped += 1;
                continue;
            };
            read += 1;
            let is_final = r.error.as_deref() != Some(INTERRUPTED);
            match best.get_mut(&r.url) {
                Some(slot) => {
                    if is_final || !slot.1 {
                        *slot = (line, is_final);
                    }
                }
                None => {
                    order.push(r.url.clone());
                    best.insert(r.url, (line, is_final));
                }
            }
        }
    }
    let mut w = open_output(out, false)
        .map_err(|e| Failure::Usage(format!("--out {}: {e}", out.display())))?;
    for url in &order {
        writeln!(w, "{}", best[url].0)
            .map_err(|e| Failure::Output(format!("writing --out: {e}")))?;
    }
    w.flush()
        .map_err(|e| Failure::Output(format!("writing --out: {e}")))?;
    note(&format!(
        "crawl: --dedupe: {read} records, {} URLs written, {dropped} unreadable lines dropped",
        order.len()
    ));
    Ok(())
}

fn write_record(w: &mut dyn Write, r: &Record) -> io::Result<()> {
    serde_json::to_writer(&mut *w, r)?;
    w.write_all(b"\n")
}

// ---------------------------------------------------------------------------------------
// Progress and logs
// ---------------------------------------------------------------------------------------

/// The progress bar, while there is one: messages and logs go through it so they do not
/// tear its lines.
static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// A line on stderr (above the progress bar, if any).
fn note(msg: &str) {
    match BAR.get() {
        Some(bar) => bar.suspend(|| eprintln!("{msg}")),
        None => eprintln!("{msg}"),
    }
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProgressMode {
    Off,
    /// A status line every period (stderr is not a terminal).
    Line(Duration),
    /// An indicatif bar (stderr is a terminal).
    Bar,
}

/// The total to show: exact (demo, small file), estimated from the bytes read (large
/// file, `~`), or unknown (stdin).
fn total_hint(read: &ReadStats) -> Option<(u64, bool)> {
    let exact = read.total.load(Ordering::Relaxed);
    if exact > 0 {
        return Some((exact, true));
    }
    let bytes = read.bytes.load(Ordering::Relaxed);
    if read.size == 0 || bytes == 0 {
        return None;
    }
    let lines = read.lines.load(Ordering::Relaxed);
    let estimate = (lines as f64 * read.size as f64 / bytes as f64).round() as u64;
    Some((estimate.max(lines), bytes >= read.size))
}

/// The per-exit part of the progress: each exit's pacing rate, the requests it sent
/// since the last call, and EJECTED when it is out; for more than 8 exits, one part with
/// counts and the first ejected names.
fn exit_parts(
    stats: &[ExitStats],
    last_sent: &mut HashMap<String, u64>,
    period: Duration,
) -> Vec<String> {
    let per_s = period.as_secs_f64().max(1e-3);
    if stats.len() > 8 {
        let healthy = stats.iter().filter(|s| s.healthy).count();
        let ejected: Vec<&str> = stats
            .iter()
            .filter(|s| !s.healthy)
            .take(5)
            .map(|s| s.name.as_str())
            .collect();
        let sent: u64 = stats
            .iter()
            .map(|s| s.total - last_sent.insert(s.name.clone(), s.total).unwrap_or(0))
            .sum();
        let mut line = format!(
            "exits healthy {healthy}/{} sent {:.0}/s",
            stats.len(),
            sent as f64 / per_s
        );
        if !ejected.is_empty() {
            line.push_str(&format!(" ejected: {}", ejected.join(", ")));
        }
        return vec![line];
    }
    stats
        .iter()
        .map(|s| {
            let sent = s.total - last_sent.insert(s.name.clone(), s.total).unwrap_or(0);
            format!(
                "{} pace {} sent {:.0}/s{}",
                s.name,
                pace(&s.intervals),
                sent as f64 / per_s,
                if s.healthy { "" } else { " EJECTED" },
            )
        })
        .collect()
}

/// Show progress until aborted: a bar redrawn 4 times a second (figures refreshed every
/// second), or a status line every `period`.
fn spawn_progress(
    mode: ProgressMode,
    handle: CrawlerHandle,
    totals: Rc<Totals>,
    read: Arc<ReadStats>,
) -> Option<actix_rt::task::JoinHandle<()>> {
    let started = Instant::now();
    match mode {
        ProgressMode::Off => None,
        ProgressMode::Line(period) => Some(actix_rt::spawn(async move {
            let mut tick = actix_rt::time::interval(period);
            tick.tick().await; // the first tick is immediate
            let mut last_sent = HashMap::new();
            let mut last_done = 0;
            loop {
                tick.tick().await;
                let stats = handle.stats().await;
                let done = totals.total.get();
                let of = match total_hint(&read) {
                    Some((n, true)) => n.to_string(),
                    Some((n, false)) => format!("~{n}"),
                    None => totals.read.get().to_string(),
                };
                let skipped = read.skipped.load(Ordering::Relaxed);
                eprintln!(
                    "[{:>6.1}s] done {}/{of} ok {} throttled {} failed {}{} {:.1} URLs/s | {}",
                    started.elapsed().as_secs_f64(),
                    done + skipped,
                    totals.ok.get(),
                    totals.throttled.get(),
                    done - totals.ok.get(),
                    if skipped > 0 {
                        format!(" skipped {skipped}")
                    } else {
                        String::new()
                    },
                    (done - last_done) as f64 / period.as_secs_f64(),
                    exit_parts(&stats, &mut last_sent, period).join(" |"),
                );
                last_done = done;
            }
        })),
        ProgressMode::Bar => {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let known = ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{bar:40}] {pos}/{len} {percent}% eta {eta}\n{wide_msg}",
            )
            .expect("valid template")
            .progress_chars("=> ");
            let unknown =
                ProgressStyle::with_template("{spinner} {elapsed_precise} {pos} done\n{wide_msg}")
                    .expect("valid template");
            bar.set_style(unknown.clone());
            let _ = BAR.set(bar.clone());
            Some(actix_rt::spawn(async move {
                const TICK: Duration = Duration::from_millis(250);
                let mut tick = actix_rt::time::interval(TICK);
                let mut last_sent = HashMap::new();
                let mut rate_from = (Instant::now(), 0u64);
                let mut has_len = false;
                let mut n = 0u64;
                loop {
                    tick.tick().await;
                    let done = totals.total.get();
                    let skipped = read.skipped.load(Ordering::Relaxed);
                    match total_hint(&read) {
                        Some((len, _)) => {
                            if !has_len {
                                bar.set_style(known.clone());
                                has_len = true;
                            }
                            bar.set_length(len);
                        }
                        None => bar.set_length(totals.read.get() + skipped),
                    }
                    bar.set_position(done + skipped);
                    bar.tick();
                    if n.is_multiple_of(4) {
                        let stats = handle.stats().await;
                        let period = rate_from.0.elapsed();
                        let rate = (done - rate_from.1) as f64 / period.as_secs_f64().max(1e-3);
                        rate_from = (Instant::now(), done);
                        let estimated = matches!(total_hint(&read), Some((_, false)));
                        let mut msg = format!(
                            "ok {} throttled {} failed {}",
                            totals.ok.get(),
                            totals.throttled.get(),
                            done - totals.ok.get(),
                        );
                        if skipped > 0 {
                            msg.push_str(&format!(" skipped {skipped}"));
                        }
                        msg.push_str(&format!(" · {rate:.1} URLs/s"));
                        if estimated {
                            msg.push_str(" · total estimated from the bytes read");
                        }
                        // Two exits a line, so each line fits an 80-column terminal.
                        for chunk in exit_parts(&stats, &mut last_sent, period).chunks(2) {
                            msg.push('\n');
                            msg.push_str(&chunk.join(" · "));
                        }
                        bar.set_message(msg);
                    }
                    n += 1;
                }
            }))
        }
    }
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

/// A log line, written to stderr in one piece (above the progress bar) when dropped.
struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.0);
        let write = || {
            let _ = io::stderr().lock().write_all(&bytes);
        };
        match BAR.get() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }
}

/// `tracing` events to stderr as text or JSON lines, filtered by `RUST_LOG` (default
/// `warn`). An invalid `RUST_LOG` is an argument error.
fn init_logging(format: LogFormat) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => {
            EnvFilter::try_new(&v).map_err(|e| format!("RUST_LOG {v:?}: {e}"))?
        }
        _ => EnvFilter::new("warn"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogLine(Vec::new()));
    let done = match format {
        LogFormat::Text => builder.with_ansi(io::stderr().is_terminal()).try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
    done.map_err(|e| format!("logging: {e}"))
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

async fn run(args: RunArgs) -> Result<Ended, Failure> {
    let (site, mut settings) = match &args.config {
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
    if let Some(addr) = args.metrics {
        settings.metrics.listen = Some(addr);
    }
    if args.follow {
        settings.crawl.follow = true;
    }
    if args.ignore_robots {
        settings.crawl.robots = false;
        note(
            "crawl: WARNING: --ignore-robots: robots.txt is NOT fetched or obeyed; disallowed \
             paths and Crawl-delay will not be honoured. Make sure you may crawl these sites.",
        );
    }
    let frontier = match &args.urls {
        UrlSource::Frontier(f) => Some(f.clone()),
        _ => None,
    };
    let follow = settings.crawl.follow && frontier.is_none();
    let concurrency = settings.crawler.concurrency.max(1) as usize;

    let mut skip = HashSet::new();
    let mut resume = Resume::default();
    if let (true, Some(path)) = (args.resume, &args.out) {
        let state = read_resume(path)
            .map_err(|e| Failure::Usage(format!("--resume {}: {e}", path.display())))?;
        if state.truncated > 0 {
            note(&format!(
                "crawl: --resume: cut an unfinished last line ({} bytes) off {}",
                state.truncated,
                path.display()
            ));
        }
        if state.unreadable > 0 {
            note(&format!(
                "crawl: --resume: {} lines of {} are not records; ignored",
                state.unreadable,
                path.display()
            ));
        }
        note(&format!(
            "crawl: --resume: {} records, {} URLs done, {} interrupted to fetch again",
            state.records,
            state.done.len(),
            state.interrupted
        ));
        if follow && state.masked_links > 0 {
            note(&format!(
                "crawl: --resume: {} recorded links have masked credentials (***) and are \
                 not resumed",
                state.masked_links
            ));
        }
        if follow {
            // The seeds all go to the crawl, which knows which are done.
            resume.done = state.done.into_iter().collect();
            resume.pages = state.pages;
            resume.pending = state.links;
        } else {
            skip = state.done;
        }
    }

    // Open the outputs up front, so a bad path fails before the crawl.
    let out = match &args.out {
        Some(p) => Some(
            open_output(p, args.resume)
                .map_err(|e| Failure::Usage(format!("--out {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let summary_out = match &args.summary {
        Some(p) => Some(
            open_output(p, false)
                .map_err(|e| Failure::Usage(format!("--summary {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let out: SharedOut = Rc::new(RefCell::new(out));
    let stop = spawn_signals(Rc::clone(&out))
        .map_err(|e| Failure::Usage(format!("cannot watch for Ctrl-C: {e}")))?;

    let handle = Crawler::start(settings).map_err(|e| Failure::Usage(e.to_string()))?;
    if let Some(addr) = handle.metrics_addr() {
        note(&format!("crawl: metrics on http://{addr}/metrics"));
    }
    let (urls, read) = spawn_reader(&args.urls, site.as_ref(), skip)
        .map_err(|e| Failure::Usage(format!("--urls {e}")))?;
    let totals = Rc::new(Totals::default());
    let mode = if args.quiet {
        ProgressMode::Off
    } else if io::stderr().is_terminal() {
        ProgressMode::Bar
    } else if args.is_demo() {
        ProgressMode::Line(Duration::from_secs(1))
    } else {
        ProgressMode::Line(Duration::from_secs(5))
    };
    let progress = spawn_progress(mode, handle.clone(), totals.clone(), Arc::clone(&read));
    let started = Instant::now();
    tracing::info!(
        exits = handle.settings().exits.len(),
        concurrency,
        resume = args.resume,
        "crawl started"
    );

    let mut follow_totals = None;
    let crawled = if let Some(f) = &frontier {
        let opts = FrontierOptions {
            claim_idle: args.claim_idle,
            idle_exit: args.idle_exit,
            grace: args.grace,
            concurrency,
        };
        frontier_crawl(&handle, f, &opts, stop, &out, &totals).await
    } else if follow {
        let r = follow_crawl(&handle, urls, resume, stop, &out, &totals).await;
        r.map(|(ended, ft)| {
            follow_totals = ft;
            ended
        })
    } else {
        crawl(&handle, urls, stop, args.grace, concurrency, &out, &totals).await
    };
    let elapsed = started.elapsed();
    if let Some(p) = progress {
        p.abort();
    }
    if let Some(bar) = BAR.get() {
        bar.finish_and_clear();
    }
    let stats = handle.stats().await;
    // After an interrupt the shutdown is already under way (this returns at once).
    let _ = actix_rt::time::timeout(
        SHUTDOWN_GRACE + Duration::from_secs(1),
        handle.shutdown(SHUTDOWN_GRACE),
    )
    .await;
    let ended = crawled.map_err(Failure::Output)?;
    drop(out.borrow_mut().take());
    tracing::info!(
        total = totals.total.get(),
        ok = totals.ok.get(),
        interrupted = totals.interrupted.get(),
        elapsed_s = elapsed.as_secs_f64(),
        "crawl finished"
    );

    let mut summary = Summary::new(
        &totals,
        read.skipped.load(Ordering::Relaxed),
        elapsed,
        stats,
    );
    if let Some(ft) = follow_totals {
        // robots.txt fetches go through the exits too: count them so per_exit adds up.
        summary.requests = ft.requests;
        summary.skipped = ft.resumed;
        summary.follow = Some(FollowSummary {
            discovered: ft.discovered,
            skipped_scope: ft.skipped_scope,
            skipped_robots: ft.skipped_robots,
            deduped: ft.deduped,
            skipped_budget: ft.skipped_budget,
            robots_fetches: ft.robots_fetches,
        });
    }
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
        note(&format!("site saw: {}", peers.join(", ")));
    }
    if ended == Ended::Interrupted {
        note(&format!(
            "crawl: interrupted: {} URLs recorded, {} of them interrupted; run again with \
             --resume to finish",
            totals.total.get(),
            totals.interrupted.get()
        ));
    }
    Ok(ended)
}

fn main() -> ExitCode {
    // Large bodies and glibc's heap trimming: see exitcrawl_actors::alloc.
    exitcrawl_actors::alloc::keep_freed_memory(64 << 20);
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
        Cli::Enqueue { urls, frontier } => {
            return match actix_rt::System::new().block_on(enqueue(&urls, &frontier)) {
                Ok(n) => {
                    println!("enqueued {n}");
                    ExitCode::SUCCESS
                }
                Err(Failure::Usage(msg)) => {
                    eprintln!("crawl: {msg}");
                    ExitCode::from(2)
                }
                Err(Failure::Output(msg)) => {
                    eprintln!("crawl: {msg}");
                    ExitCode::from(1)
                }
            };
        }
        Cli::Dedupe { inputs, out } => {
            return match dedupe(&inputs, &out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(Failure::Usage(msg)) => {
                    eprintln!("crawl: {msg}");
                    ExitCode::from(2)
                }
                Err(Failure::Output(msg)) => {
                    eprintln!("crawl: {msg}");
                    ExitCode::from(1)
                }
            };
        }
    };
    if let Err(msg) = init_logging(args.log_format) {
        eprintln!("crawl: {msg}");
        return ExitCode::from(2);
    }
    match actix_rt::System::new().block_on(run(args)) {
        Ok(Ended::Complete) => ExitCode::SUCCESS,
        Ok(Ended::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
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
