//! The command line: clap's derive for parsing and `--help`, then [`validate`] for the
//! rules between flags (which flags go together), with the messages scripts already know.
//!
//! Every flag takes its value as `--flag VALUE` or `--flag=VALUE`; a value may start with
//! `-` (`--urls -` is stdin); a valued flag given twice is an error, a switch given twice
//! is not. Exit status 2 for any argument error (clap's own included).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

use super::overrides::{exit_args, source_ip};
pub use super::overrides::{ExitArg, Overrides};
use super::source::{FrontierUrl, UrlSource};
use super::values::{
    byte_size, grace, number, path, positive_count, positive_secs, socket_addr, text,
};

/// URLs the demo generates unless `--demo-urls` says otherwise.
pub const DEFAULT_DEMO_URLS: u64 = 3000;
/// Default `--grace`.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);
/// Default `--claim-idle`.
pub const DEFAULT_CLAIM_IDLE: Duration = Duration::from_secs(30);
/// Default `--idle-exit`.
pub const DEFAULT_IDLE_EXIT: Duration = Duration::from_secs(5);
/// Default `--redis-wait`.
pub const DEFAULT_REDIS_WAIT: Duration = exitcrawl::frontier::DEFAULT_REDIS_WAIT;

/// Text after the flags in `--help`.
const AFTER_HELP: &str = "\
PROGRESS:
    When stderr is a terminal: a progress bar with URLs done/total, ok/throttled/failed,
    the rate and each exit's health. The total is exact for the demo and for a regular
    --urls file up to 16 MiB (counted in a quick first pass); for a larger file it is an
    estimate from the bytes read so far (shown with ~); for stdin it is the URLs read.
    Otherwise: a status line every 5 s (every second with --demo).

ROBOTS.TXT:
    Obeyed in every mode unless [crawl] robots = false or --ignore-robots: fetched once
    per site through the same exits, cached ([crawl] robots_ttl_ms); a disallowed URL gets
    a record with skipped \"robots\" and is never fetched; Crawl-delay makes the site serial
    and spaced. A robots.txt answered 5xx or 429 disallows the site until a retry a
    minute later (error \"robots_unavailable: ...\"); one that gets no answer (closed
    port, refused, TLS to a plain port) makes each URL's record that error.

STOPPING:
    Ctrl-C (or SIGTERM) stops reading URLs, lets in-flight fetches finish for --grace
    seconds, records every URL sent but not finished as interrupted (URLs read ahead but
    not yet sent get no record: --resume fetches them; the summary counts them in
    left_queued), flushes --out, writes --summary and exits 130. A second Ctrl-C exits
    at once (records already written stay; --resume completes the job). A --frontier consumer gives the URLs it did not finish
    back to the queue; the same command goes on (it appends to --out).

SECURITY:
    Credentials in URLs are masked in --out, in WARC headers and on stderr: the password
    of user:pass@ and the values of query parameters named like token, key, password,
    secret, auth, sig become ***. --resume compares these masked forms. So are the values
    of headers (-H, [crawler.headers]) named Authorization, Cookie or like token, key,
    secret, password, auth, sig, in messages and WARC request records; Authorization,
    Cookie and Proxy-Authorization are not sent past a redirect to another origin.

PRIVATE ADDRESSES:
    URLs you give (--urls, --sitemap) are trusted. A link found in a page, a URL listed
    in a sitemap or a redirect that leads from a public address to a loopback, private
    (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16, fe80::/10) or
    unspecified address is refused, checked on the address connected to: its record says
    error \"private address refused\". A crawl that starts on a private host follows its
    own links there. [crawl] allow_private = true lifts the rule.

EXIT STATUS:
    0 the crawl ran (even if some URLs failed); 1 an output could not be written (or,
    with --frontier/--enqueue, Redis failed or lost the queue, or a consumer stopped
    because its fetches all failed on its own side);
    2 bad arguments or configuration; 130 interrupted
";

/// Usage lines, with the program's name.
pub fn usage(name: &str) -> String {
    [
        "[--config FILE] --urls FILE [--out FILE [--resume]] [--summary FILE] [OPTIONS]",
        "[--config FILE] URL... [--urls FILE] [--out FILE [--resume]] [OPTIONS]",
        "--demo [--demo-urls N] [--out FILE] [--summary FILE] [OPTIONS]",
        "[--config FILE] --urls SEEDS --follow [--ignore-robots] [--out FILE] [OPTIONS]",
        "[--config FILE] --sitemap URL [--urls SEEDS] [--follow] [--out FILE] [OPTIONS]",
        "[--exit IP ...] [--proxy URL ...] [--proxies FILE] --urls FILE [OPTIONS]",
        "--enqueue FILE --frontier redis://HOST:PORT/QUEUE [--recrawl]",
        "--config FILE --frontier redis://HOST:PORT/QUEUE --out FILE [OPTIONS]",
        "--dedupe FILE [--dedupe FILE ...] --out FILE",
        "completions bash|zsh|fish",
    ]
    .iter()
    .enumerate()
    .map(|(i, l)| {
        let pad = if i == 0 { "" } else { "       " };
        format!("{pad}{name} {l}")
    })
    .collect::<Vec<_>>()
    .join("\n")
}

/// The command line as clap parses it.
#[derive(Debug, Parser)]
#[command(
    version,
    about = "Fetch URLs through exitcrawl's exits: one JSON record per URL, a summary, and \
             optionally the pages (WARC, content-addressed bodies)",
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Sub>,
    #[command(flatten)]
    pub flags: Flags,
}

/// Subcommands besides the crawl itself.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Print a shell completion script on stdout, e.g.
    /// `exitcrawl completions bash > /etc/bash_completion.d/exitcrawl`
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines
    #[default]
    Text,
    /// One JSON object a line
    Json,
}

/// Every flag. Validity across flags is [`validate`]'s job.
#[derive(Debug, Default, clap::Args)]
pub struct Flags {
    /// Settings (TOML); EXITCRAWL__SECTION__KEY environment overrides apply
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true)]
    pub config: Option<PathBuf>,
    /// URLs, one per line ('-' = stdin); blank lines and # comments skipped
    #[arg(long, value_name = "FILE", value_parser = text, allow_hyphen_values = true)]
    pub urls: Option<String>,
    /// URLs to crawl, each as if it were a line of a --urls file; with --urls too, both
    /// are crawled (these first)
    #[arg(value_name = "URL")]
    pub given: Vec<String>,
    /// JSONL, one record per URL as results arrive ('-' = stdout): url, status, exit,
    /// attempts, elapsed_ms, bytes, error, skipped, final_url, content_type, sha256 (a URL
    /// stopped by Ctrl-C gets status null, error "interrupted")
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true)]
    pub out: Option<PathBuf>,
    /// Append to --out, skip the URLs that already have a final record there (one whose
    /// error is not "interrupted") and fetch the rest; at the end --out is rewritten
    /// (atomically) with one record per URL, its last final one, and the summary counts the
    /// whole crawl. With --follow: URLs with a record are not fetched again, and the links
    /// the recorded pages found are crawled on
    #[arg(long, overrides_with = "resume")]
    pub resume: bool,
    /// One JSON object at the end ('-' = stdout): total, ok, failed, throttled, requests,
    /// interrupted, skipped, skipped_robots, robots_fetches, elapsed_s, per_exit (without
    /// --summary, the summary goes to stdout)
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true)]
    pub summary: Option<PathBuf>,
    /// One self-contained HTML page at the end (and on Ctrl-C): timeline, busiest hosts,
    /// exits, status classes, errors, slowest hosts; no script or network needed
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true)]
    pub report: Option<PathBuf>,
    /// On Ctrl-C/SIGTERM, how long in-flight fetches may finish [default: 10]
    #[arg(long, value_name = "SECS", value_parser = grace, allow_hyphen_values = true)]
    pub grace: Option<Duration>,
    /// Serve Prometheus metrics on http://ADDR/metrics (sets [metrics] listen), e.g.
    /// 127.0.0.1:9100
    #[arg(long, value_name = "ADDR", value_parser = socket_addr, allow_hyphen_values = true)]
    pub metrics: Option<SocketAddr>,
    /// No progress bar or status line
    #[arg(long, overrides_with = "quiet")]
    pub quiet: bool,
    /// Logs on stderr; RUST_LOG filters them (default 'warn'), e.g. RUST_LOG=info
    #[arg(long, value_name = "FMT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Start a rate-limited test site on 127.0.0.1 and crawl it through four exits bound
    /// to 127.0.0.1..127.0.0.4; prints the summary
    #[arg(long, overrides_with = "demo")]
    pub demo: bool,
    /// URLs the demo generates [default: 3000]
    #[arg(long, value_name = "N", value_parser = positive_count, allow_hyphen_values = true)]
    pub demo_urls: Option<u64>,
    /// Crawl, not only fetch (sets [crawl] follow = true): the --urls are seeds, links
    /// are followed within the [crawl] scope. Records gain depth, parent, new_links,
    /// links; the summary gains discovered, skipped_scope, deduped. A Ctrl-C stops at
    /// once (exit 130); --resume goes on
    #[arg(long, overrides_with = "follow")]
    pub follow: bool,
    /// Do not fetch or obey robots.txt, in any mode (sets [crawl] robots = false);
    /// prints a warning
    #[arg(long, overrides_with = "ignore_robots")]
    pub ignore_robots: bool,
    /// A shared Redis frontier redis://HOST:PORT/QUEUE (one QUEUE is one crawl). With
    /// --enqueue: push URLs into it. Otherwise (with --config, without --urls): pull URLs
    /// from it, fetch, append the record to --out (flushed), then mark the URL done and
    /// acknowledge it (at-least-once: merge the --out files with --dedupe)
    #[arg(long, value_name = "URL", value_parser = FrontierUrl::parse, allow_hyphen_values = true)]
    pub frontier: Option<FrontierUrl>,
    /// Push the URLs of FILE ('-' = stdin) into --frontier, each once per crawl: a URL
    /// already queued or done in it is skipped; prints 'enqueued N skipped M'
    #[arg(long, value_name = "FILE", value_parser = text, allow_hyphen_values = true)]
    pub enqueue: Option<String>,
    /// With --enqueue: start the crawl over (drop its queue, done and enqueued sets)
    /// before pushing; stop its consumers first
    #[arg(long, overrides_with = "recrawl")]
    pub recrawl: bool,
    /// Frontier: a consumer silent for this long (no heartbeat; one is sent every SECS/4)
    /// is dead, and the others take its entries over, all at once [default: 30]
    #[arg(long, value_name = "SECS", value_parser = positive_secs, allow_hyphen_values = true)]
    pub claim_idle: Option<Duration>,
    /// Frontier: exit once nothing is in flight, nothing is pending for any consumer and
    /// nothing new came for this long [default: 5]
    #[arg(long, value_name = "SECS", value_parser = positive_secs, allow_hyphen_values = true)]
    pub idle_exit: Option<Duration>,
    /// Frontier: while Redis does not answer, retry with backoff for this long, then exit
    /// 1 [default: 60]
    #[arg(long, value_name = "SECS", value_parser = positive_secs, allow_hyphen_values = true)]
    pub redis_wait: Option<Duration>,
    /// Merge results files (repeatable, read in order) into --out FILE: one record per
    /// URL, the last final (not interrupted) one, else the last one
    #[arg(long, value_name = "FILE", value_parser = path, action = ArgAction::Append, allow_hyphen_values = true)]
    pub dedupe: Vec<PathBuf>,
    /// Keep the pages as WARC 1.1 (FILE ends in .warc.gz: one gzip member per record, or
    /// .warc): a warcinfo record, then a request and a response record per answer
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true)]
    pub warc: Option<PathBuf>,
    /// Start a new WARC file (FILE-00001.warc.gz, …) once the current one reaches this
    /// size: bytes, or with a K, M or G suffix (powers of 1024)
    #[arg(long, value_name = "BYTES", value_parser = byte_size, allow_hyphen_values = true)]
    pub warc_max_bytes: Option<u64>,
    /// Keep every answer's body in DIR, named by its sha256 (DIR/ab/abcd…): the record's
    /// sha256 names the file; identical bodies are stored once
    #[arg(long, value_name = "DIR", value_parser = path, allow_hyphen_values = true)]
    pub bodies: Option<PathBuf>,
    /// Send this header with every request: 'Name: value' (repeatable; adds to and
    /// overrides [crawler.headers]). Values of Authorization, Cookie and secret-looking
    /// names are masked wherever they are shown
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE", action = ArgAction::Append, allow_hyphen_values = true)]
    pub header: Vec<String>,
    /// The User-Agent sent with every request (sets [crawler] user_agent; robots.txt is
    /// matched against its product token)
    #[arg(long, value_name = "UA", allow_hyphen_values = true)]
    pub user_agent: Option<String>,
    /// Seed the crawl from a sitemap, a sitemap index or a .xml.gz (repeatable; --urls
    /// may then be left out). Every URL listed on the sitemap's host is fetched once,
    /// within the [crawl] scope and robots.txt; records are those of --follow, with the
    /// sitemap as parent and its lastmod. Links are followed only with --follow
    #[arg(long, value_name = "URL", action = ArgAction::Append, value_parser = text, allow_hyphen_values = true)]
    pub sitemap: Vec<String>,
    /// An exit bound to this local source address (repeatable; replaces the config's
    /// [[exits]]). With no --exit, --proxy, --proxies and no --config: one exit on the
    /// default route, named after this host
    #[arg(long = "exit", value_name = "IP", action = ArgAction::Append, value_parser = source_ip, allow_hyphen_values = true)]
    pub exits: Vec<std::net::IpAddr>,
    /// An exit through this proxy: http://[user:pass@]host:port (CONNECT),
    /// socks5://… or socks5h://… (repeatable; replaces the config's [[exits]])
    // Parsed after clap, as -H is: clap's own message would repeat the value, password
    // and all.
    #[arg(long = "proxy", value_name = "URL", action = ArgAction::Append, value_parser = text, allow_hyphen_values = true)]
    pub proxies: Vec<String>,
    /// Proxies, one URL per line (blank lines and # comments skipped), each an exit as
    /// with --proxy
    #[arg(long = "proxies", value_name = "FILE", value_parser = path, allow_hyphen_values = true)]
    pub proxies_file: Option<PathBuf>,
    /// Most fetches in flight at once, all exits together (sets [crawler] concurrency)
    #[arg(long, value_name = "N", value_parser = number::<u32>, allow_hyphen_values = true)]
    pub concurrency: Option<u32>,
    /// Ceiling of each host's rate, req/s (sets [limiter] max_rps)
    #[arg(long, value_name = "RPS", value_parser = number::<f64>, allow_hyphen_values = true)]
    pub max_rps: Option<f64>,
    /// Each host's starting rate, req/s (sets [limiter] initial_rps)
    #[arg(long, value_name = "RPS", value_parser = number::<f64>, allow_hyphen_values = true)]
    pub initial_rps: Option<f64>,
    /// Whole-request deadline in seconds (sets [crawler] timeout_ms; the connect timeout
    /// is lowered to it when longer)
    #[arg(long, value_name = "SECS", value_parser = number::<f64>, allow_hyphen_values = true)]
    pub timeout: Option<f64>,
    /// Further attempts per URL after an error (sets [crawler] max_retries)
    #[arg(long, value_name = "N", value_parser = number::<u32>, allow_hyphen_values = true)]
    pub retries: Option<u32>,
    /// Links followed from a seed, at most (sets [crawl] max_depth)
    #[arg(long, value_name = "N", value_parser = number::<u32>, allow_hyphen_values = true)]
    pub depth: Option<u32>,
    /// Pages fetched in a --follow crawl, at most (sets [crawl] max_pages)
    #[arg(long, value_name = "N", value_parser = number::<u64>, allow_hyphen_values = true)]
    pub max_pages: Option<u64>,
    /// Fetch every line of --urls, repeats too (by default a URL on an earlier line is
    /// fetched once; each repeat gets a record with skipped "duplicate")
    #[arg(long, overrides_with = "no_dedupe")]
    pub no_dedupe: bool,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// A crawl: URL list, demo, follow or frontier consumer.
    Run(Box<RunArgs>),
    /// `--enqueue FILE --frontier URL`: push the URLs of FILE and exit.
    Enqueue {
        urls: UrlSource,
        frontier: FrontierUrl,
        recrawl: bool,
    },
    /// `--dedupe FILE... --out FILE`: merge results files.
    Dedupe { inputs: Vec<PathBuf>, out: PathBuf },
    /// `completions SHELL`.
    Completions(Shell),
}

/// A crawl's arguments, checked.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// `None` in demo mode (the demo builds its own settings).
    pub config: Option<PathBuf>,
    pub urls: UrlSource,
    /// URLs given as arguments: lines read before `urls`.
    pub given: Vec<String>,
    pub out: Option<PathBuf>,
    pub summary: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub resume: bool,
    pub grace: Duration,
    pub metrics: Option<SocketAddr>,
    pub quiet: bool,
    pub log_format: LogFormat,
    pub follow: bool,
    pub ignore_robots: bool,
    pub claim_idle: Duration,
    pub idle_exit: Duration,
    pub redis_wait: Duration,
    pub warc: Option<PathBuf>,
    pub warc_max_bytes: Option<u64>,
    pub bodies: Option<PathBuf>,
    /// `-H`, parsed: name and value.
    pub headers: Vec<(String, String)>,
    pub user_agent: Option<String>,
    pub sitemaps: Vec<String>,
    pub no_dedupe: bool,
    /// `--exit`, `--proxy` and `--proxies`, in that order; empty when none was given.
    pub exits: Vec<ExitArg>,
    /// The everyday settings given as flags.
    pub overrides: Overrides,
}

impl RunArgs {
    pub fn is_demo(&self) -> bool {
        matches!(self.urls, UrlSource::Demo(_))
    }

    /// Whether `--out` (and `--warc`) are appended to: `--resume`, or a frontier
    /// consumer, which never truncates what an earlier run of it recorded.
    pub fn appends(&self) -> bool {
        self.resume || matches!(self.urls, UrlSource::Frontier(_))
    }
}

/// The rules between flags. `Err` is a message for stderr (exit 2).
pub fn validate(cli: Cli) -> Result<Command, String> {
    if let Some(Sub::Completions { shell }) = cli.command {
        return Ok(Command::Completions(shell));
    }
    let f = cli.flags;
    let keeps = f.warc.is_some()
        || f.bodies.is_some()
        || f.warc_max_bytes.is_some()
        || !f.header.is_empty()
        || f.user_agent.is_some()
        || !f.sitemap.is_empty();
    if !f.dedupe.is_empty() {
        return dedupe_command(f, keeps);
    }
    if let Some(file) = f.enqueue {
        let frontier = f
            .frontier
            .ok_or("--enqueue needs --frontier redis://HOST:PORT/QUEUE")?;
        if f.demo
            || f.config.is_some()
            || f.urls.is_some()
            || !f.given.is_empty()
            || f.out.is_some()
            || f.follow
            || keeps
            || f.redis_wait.is_some()
        {
            return Err("--enqueue only goes with --frontier and --recrawl".into());
        }
        return Ok(Command::Enqueue {
            urls: UrlSource::from_arg(&file),
            frontier,
            recrawl: f.recrawl,
        });
    }
    if f.recrawl {
        return Err("--recrawl only goes with --enqueue FILE --frontier URL".into());
    }
    if (f.claim_idle.is_some() || f.idle_exit.is_some() || f.redis_wait.is_some())
        && f.frontier.is_none()
    {
        return Err("--claim-idle/--idle-exit/--redis-wait only go with --frontier".into());
    }
    check_keep_flags(&f)?;
    let headers = parse_headers(&f.header)?;
    if let Some(ua) = &f.user_agent {
        check_user_agent(ua)?;
    }
    let urls = url_source(&f)?;
    let exits = exit_args(f.demo, &f.exits, &f.proxies, f.proxies_file.as_deref())?;
    if f.resume && f.out.as_deref().is_none_or(|p| p == Path::new("-")) {
        return Err("--resume needs --out FILE (the results of the earlier run)".into());
    }
    Ok(Command::Run(Box::new(RunArgs {
        config: f.config,
        urls,
        given: f.given,
        out: f.out,
        summary: f.summary,
        report: f.report,
        resume: f.resume,
        grace: f.grace.unwrap_or(DEFAULT_STOP_GRACE),
        metrics: f.metrics,
        quiet: f.quiet,
        log_format: f.log_format.unwrap_or_default(),
        follow: f.follow,
        ignore_robots: f.ignore_robots,
        claim_idle: f.claim_idle.unwrap_or(DEFAULT_CLAIM_IDLE),
        idle_exit: f.idle_exit.unwrap_or(DEFAULT_IDLE_EXIT),
        redis_wait: f.redis_wait.unwrap_or(DEFAULT_REDIS_WAIT),
        warc: f.warc,
        warc_max_bytes: f.warc_max_bytes,
        bodies: f.bodies,
        headers,
        user_agent: f.user_agent,
        sitemaps: f.sitemap,
        no_dedupe: f.no_dedupe,
        exits,
        overrides: Overrides {
            concurrency: f.concurrency,
            max_rps: f.max_rps,
            initial_rps: f.initial_rps,
            timeout: f.timeout,
            retries: f.retries,
            depth: f.depth,
            max_pages: f.max_pages,
        },
    })))
}

/// `--dedupe FILE... --out FILE`, alone.
fn dedupe_command(f: Flags, keeps: bool) -> Result<Command, String> {
    if f.demo
        || f.config.is_some()
        || f.urls.is_some()
        || !f.given.is_empty()
        || f.frontier.is_some()
        || f.enqueue.is_some()
        || keeps
    {
        return Err("--dedupe only goes with --out FILE".into());
    }
    let out = f
        .out
        .ok_or("--dedupe needs --out FILE (the merged results)")?;
    Ok(Command::Dedupe {
        inputs: f.dedupe,
        out,
    })
}

/// `-H 'Name: value'` each, checked as `[crawler.headers]` entries are; a message that
/// shows a secret-looking header's value masked.
fn parse_headers(raw: &[String]) -> Result<Vec<(String, String)>, String> {
    let max = exitcrawl::config::MAX_HEADERS;
    if raw.len() > max {
        return Err(format!(
            "-H: given {} times; at most {max} headers",
            raw.len()
        ));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for h in raw {
        let Some((name, value)) = h.split_once(':') else {
            let shown = exitcrawl::redact::mask_header(h, h);
            return Err(format!(
                "-H {shown:?}: expected 'Name: value' (a header name, a colon, its value)"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if let Err(why) = exitcrawl::config::check_header(name, value) {
            let shown = format!("{name}: {}", exitcrawl::redact::mask_header(name, value));
            return Err(format!("-H {shown:?}: {why}"));
        }
        out.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        out.push((name.to_owned(), value.to_owned()));
    }
    Ok(out)
}

/// `--user-agent`: what `[crawler] user_agent` allows.
fn check_user_agent(ua: &str) -> Result<(), String> {
    if ua.is_empty() || ua.len() > 512 || !ua.chars().all(|c| (' '..='~').contains(&c)) {
        return Err(format!(
            "--user-agent {ua:?}: must be 1..=512 characters of visible ASCII or spaces (it is sent as an HTTP header)"
        ));
    }
    Ok(())
}

/// `--warc`, `--warc-max-bytes`, `--bodies`.
fn check_keep_flags(f: &Flags) -> Result<(), String> {
    if f.warc_max_bytes.is_some() && f.warc.is_none() {
        return Err("--warc-max-bytes only goes with --warc FILE".into());
    }
    if let Some(w) = &f.warc {
        super::warc::WarcName::parse(w)?;
    }
    if f.bodies.as_deref() == Some(Path::new("-")) {
        return Err("--bodies: \"-\" is not a directory (files are written into DIR)".into());
    }
    Ok(())
}

/// Where a crawl's URLs come from: the frontier, the demo or `--urls`.
fn url_source(f: &Flags) -> Result<UrlSource, String> {
    if let Some(fr) = &f.frontier {
        if f.demo || f.urls.is_some() || !f.given.is_empty() {
            return Err(
                "--frontier pulls its URLs from Redis: drop --urls/--demo and the URL arguments"
                    .into(),
            );
        }
        if f.config.is_none() {
            return Err("--frontier needs --config FILE".into());
        }
        if f.follow || !f.sitemap.is_empty() {
            return Err("--frontier does not go with --follow or --sitemap".into());
        }
        if f.out.as_deref().is_none_or(|p| p == Path::new("-")) {
            return Err("--frontier needs --out FILE (records are written before the ack)".into());
        }
        return Ok(UrlSource::Frontier(fr.clone()));
    }
    if f.demo {
        if f.config.is_some() || f.urls.is_some() || !f.sitemap.is_empty() || !f.given.is_empty() {
            return Err(
                "--demo builds its own settings and URLs: drop --config/--urls/--sitemap \
                 and the URL arguments"
                    .into(),
            );
        }
        if f.resume {
            return Err(
                "--resume does not go with --demo (its site's port changes every run)".into(),
            );
        }
        return Ok(UrlSource::Demo(f.demo_urls.unwrap_or(DEFAULT_DEMO_URLS)));
    }
    if f.demo_urls.is_some() {
        return Err("--demo-urls only goes with --demo".into());
    }
    match f.urls.as_deref() {
        None if !f.sitemap.is_empty() || !f.given.is_empty() => Ok(UrlSource::Nothing),
        None => Err(
            "missing URLs: give them as arguments, or --urls FILE (or - for stdin), or \
             --sitemap URL"
                .into(),
        ),
        Some(u) => Ok(UrlSource::from_arg(u)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Command, String> {
        let cli = Cli::try_parse_from(std::iter::once("crawl").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        validate(cli)
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn inline_values_repeats_and_hyphens() {
        let Ok(Command::Run(a)) = parse(&[
            "--config=c.toml",
            "--urls",
            "-",
            "--quiet",
            "--quiet",
            "--grace=0.5",
        ]) else {
            panic!("parses");
        };
        assert_eq!(a.urls, UrlSource::Stdin);
        assert_eq!(a.grace, Duration::from_millis(500));
        assert!(a.quiet);
        let e = parse(&["--config", "a", "--config", "b", "--urls", "u"]).unwrap_err();
        assert!(e.contains("--config"), "{e}");
        let e = parse(&["--config", "c", "--urls", "u", "--grace", "-1"]).unwrap_err();
        assert!(
            e.contains("--grace") && e.contains("-1 seconds is out of range"),
            "{e}"
        );
        let e = parse(&["--config", "c", "--urls", "u", "--grace", "86401"]).unwrap_err();
        assert!(
            e.contains("86401 seconds is out of range (0 to 86400)"),
            "{e}"
        );
        let e = parse(&["--config", "c", "--urls", "u", "--grace", "soon"]).unwrap_err();
        assert!(e.contains("is not a number of seconds (0 to 86400)"), "{e}");
        let e = parse(&["--config", "c", "--urls="]).unwrap_err();
        assert!(e.contains("--urls"), "{e}");
    }

    #[test]
    fn keep_flags_need_a_crawl() {
        let e = parse(&["--config", "c", "--urls", "u", "--warc-max-bytes", "1M"]).unwrap_err();
        assert!(e.contains("--warc-max-bytes only goes with --warc"), "{e}");
        let e = parse(&["--config", "c", "--urls", "u", "--warc", "x.zip"]).unwrap_err();
        assert!(e.contains("--warc") && e.contains(".warc.gz"), "{e}");
        let e = parse(&["--dedupe", "a", "--out", "b", "--warc", "x.warc.gz"]).unwrap_err();
        assert!(e.contains("--dedupe only goes with --out"), "{e}");
        assert!(matches!(
            parse(&["completions", "zsh"]),
            Ok(Command::Completions(Shell::Zsh))
        ));
    }
}
