//! The command line as clap sees it: every flag, its value, its heading in `--help`, its
//! one-line help (`-h`) and its full help (`--help`). What flags mean together is
//! `args`' job.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

use super::help::{AFTER_HELP, AFTER_SHORT_HELP};
use super::overrides::source_ip;
use super::source::FrontierUrl;
use super::values::{
    byte_size, concurrency, crawl_scope, depth, grace, initial_rps, max_pages, max_rps, path,
    positive_count, positive_secs, retries, socket_addr, text, timeout,
};

// `--help`'s headings; the fields below are in the order they are shown.
const INPUT: &str = "Input";
const OUTPUT: &str = "Output and archive";
const EXITS: &str = "Exits and requests";
const LIMITS: &str = "Politeness and limits";
const CRAWLING: &str = "Crawling";
const DISTRIBUTED: &str = "Distributed (Redis frontier)";
const OBSERVABILITY: &str = "Observability";
const DEMO: &str = "Demo";

/// The command line as clap parses it.
#[derive(Debug, Parser)]
#[command(
    version,
    about = "Fetch URLs through exitcrawl's exits: one JSON record per URL, a summary, and \
             optionally the pages (WARC, content-addressed bodies)",
    after_help = AFTER_SHORT_HELP,
    after_long_help = AFTER_HELP,
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
    /// Print a shell completion script on stdout
    ///
    /// e.g. `exitcrawl completions bash > /etc/bash_completion.d/exitcrawl`
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

/// Every flag. Validity across flags is `args::validate`'s job.
#[derive(Debug, Default, clap::Args)]
pub struct Flags {
    /// Settings file (TOML)
    ///
    /// EXITCRAWL__SECTION__KEY environment overrides apply
    #[arg(short, long, value_name = "FILE", value_parser = path, allow_hyphen_values = true, help_heading = INPUT)]
    pub config: Option<PathBuf>,
    /// URLs, one per line ('-' = stdin)
    ///
    /// Blank lines and # comments are skipped
    #[arg(short, long, value_name = "FILE", value_parser = text, allow_hyphen_values = true, help_heading = INPUT)]
    pub urls: Option<String>,
    /// URLs to crawl, as lines of a --urls file
    ///
    /// With --urls too, both are crawled (these first)
    #[arg(value_name = "URL", help_heading = INPUT)]
    pub given: Vec<String>,
    /// Seed the crawl from a sitemap (repeatable)
    ///
    /// A sitemap, a sitemap index or a .xml.gz; --urls may then be left out. Every URL
    /// listed on the sitemap's host is fetched once, within the [crawl] scope and
    /// robots.txt; records are those of --follow, with the sitemap as parent and its
    /// lastmod. Links are followed only with --follow
    #[arg(long, value_name = "URL", action = ArgAction::Append, value_parser = text, allow_hyphen_values = true, help_heading = INPUT)]
    pub sitemap: Vec<String>,
    /// Fetch repeated lines of --urls again
    ///
    /// By default a URL on an earlier line is fetched once; each repeat gets a record
    /// with skipped "duplicate"
    #[arg(long, overrides_with = "no_dedupe", help_heading = INPUT)]
    pub no_dedupe: bool,

    /// JSONL records, one per URL ('-' = stdout)
    ///
    /// Written as results arrive: url, status, exit, attempts, throttled, elapsed_ms,
    /// bytes, wire_bytes, error, skipped, final_url, content_type, fetched_at, sha256 (and
    /// with --warc warc_file, warc_offset, warc_length; docs/cli.md has them all). A URL
    /// stopped by Ctrl-C gets status null, error "interrupted"
    #[arg(short, long, value_name = "FILE", value_parser = path, allow_hyphen_values = true, help_heading = OUTPUT)]
    pub out: Option<PathBuf>,
    /// Go on from --out: fetch only what it lacks
    ///
    /// Append to --out, skip the URLs that already have a final record there (not one
    /// interrupted, sent nowhere for want of an exit, or skipped for an unavailable
    /// robots.txt) and fetch the rest; at the end --out is rewritten
    /// (atomically) with one record per URL, its last final one, and the summary counts
    /// the whole crawl. With --follow: URLs with a record are not fetched again, and the
    /// links the recorded pages found are crawled on
    #[arg(long, overrides_with = "resume", help_heading = OUTPUT)]
    pub resume: bool,
    /// The summary, one JSON object ('-' = stdout)
    ///
    /// Written at the end: total, ok, failed, throttled, requests, interrupted, skipped,
    /// skipped_robots, robots_fetches, elapsed_s, per_exit, hosts and more (docs/cli.md
    /// has them all; without --summary, the summary goes to stdout)
    #[arg(short, long, value_name = "FILE", value_parser = path, allow_hyphen_values = true, help_heading = OUTPUT)]
    pub summary: Option<PathBuf>,
    /// One self-contained HTML page about the crawl
    ///
    /// Written at the end (and on Ctrl-C): timeline, busiest hosts, exits, status classes,
    /// errors, slowest hosts; no script or network needed
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true, help_heading = OUTPUT)]
    pub report: Option<PathBuf>,
    /// Keep the pages as WARC 1.1
    ///
    /// FILE ends in .warc.gz (one gzip member per record) or .warc: a warcinfo record,
    /// then a request and a response record per answer
    #[arg(long, value_name = "FILE", value_parser = path, allow_hyphen_values = true, help_heading = OUTPUT)]
    pub warc: Option<PathBuf>,
    /// Start a new WARC file past this size
    ///
    /// FILE-00001.warc.gz, … once the current one reaches BYTES: bytes, or with a K, M
    /// or G suffix (powers of 1024)
    #[arg(long, value_name = "BYTES", value_parser = byte_size, allow_hyphen_values = true, help_heading = OUTPUT)]
    pub warc_max_bytes: Option<u64>,
    /// Keep every body in DIR, named by its sha256
    ///
    /// DIR/ab/abcd…: the record's sha256 names the file; identical bodies are stored once
    #[arg(long, value_name = "DIR", value_parser = path, allow_hyphen_values = true, help_heading = OUTPUT)]
    pub bodies: Option<PathBuf>,
    /// Merge results files into --out (repeatable)
    ///
    /// Read in order; one record per URL, the last final (not interrupted) one, else the
    /// last one
    #[arg(long, value_name = "FILE", value_parser = path, action = ArgAction::Append, allow_hyphen_values = true, help_heading = OUTPUT)]
    pub dedupe: Vec<PathBuf>,

    /// An exit bound to this source address
    ///
    /// Repeatable; replaces the config's [[exits]]. With no --exit, --proxy, --proxies
    /// and no --config: one exit on the default route, named after this host
    #[arg(long = "exit", value_name = "IP", action = ArgAction::Append, value_parser = source_ip, allow_hyphen_values = true, help_heading = EXITS)]
    pub exits: Vec<std::net::IpAddr>,
    /// An exit through this proxy
    ///
    /// http://[user:pass@]host:port (CONNECT), socks5://… or socks5h://… (repeatable;
    /// replaces the config's [[exits]])
    // Parsed after clap, as -H is: clap's own message would repeat the value, password
    // and all.
    #[arg(long = "proxy", value_name = "URL", action = ArgAction::Append, value_parser = text, allow_hyphen_values = true, help_heading = EXITS)]
    pub proxies: Vec<String>,
    /// Proxies, one URL per line
    ///
    /// Blank lines and # comments skipped; each is an exit as with --proxy
    #[arg(long = "proxies", value_name = "FILE", value_parser = path, allow_hyphen_values = true, help_heading = EXITS)]
    pub proxies_file: Option<PathBuf>,
    /// Send this header with every request
    ///
    /// 'Name: value' (repeatable; adds to and overrides [crawler.headers]). Values of
    /// Authorization, Cookie and secret-looking names are masked wherever they are shown
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE", action = ArgAction::Append, allow_hyphen_values = true, help_heading = EXITS)]
    pub header: Vec<String>,
    /// The User-Agent sent with every request
    ///
    /// Sets [crawler] user_agent; robots.txt is matched against its product token
    #[arg(short = 'A', long, value_name = "UA", allow_hyphen_values = true, help_heading = EXITS)]
    pub user_agent: Option<String>,

    /// Most fetches in flight, all exits together
    ///
    /// Sets [crawler] concurrency
    #[arg(long, value_name = "N", value_parser = concurrency, allow_hyphen_values = true, help_heading = LIMITS)]
    pub concurrency: Option<u32>,
    /// Ceiling of each host's rate, req/s
    ///
    /// Sets [limiter] max_rps
    #[arg(long, value_name = "RPS", value_parser = max_rps, allow_hyphen_values = true, help_heading = LIMITS)]
    pub max_rps: Option<f64>,
    /// Each host's starting rate, req/s
    ///
    /// Sets [limiter] initial_rps
    #[arg(long, value_name = "RPS", value_parser = initial_rps, allow_hyphen_values = true, help_heading = LIMITS)]
    pub initial_rps: Option<f64>,
    /// Whole-request deadline, seconds
    ///
    /// Sets [crawler] timeout_ms; the connect timeout is lowered to it when longer
    #[arg(long, value_name = "SECS", value_parser = timeout, allow_hyphen_values = true, help_heading = LIMITS)]
    pub timeout: Option<f64>,
    /// Further attempts per URL after an error
    ///
    /// Sets [crawler] max_retries
    #[arg(long, value_name = "N", value_parser = retries, allow_hyphen_values = true, help_heading = LIMITS)]
    pub retries: Option<u32>,
    /// Do not fetch or obey robots.txt
    ///
    /// In any mode (sets [crawl] robots = false); prints a warning
    #[arg(long, overrides_with = "ignore_robots", help_heading = LIMITS)]
    pub ignore_robots: bool,
    /// Time in-flight fetches get on Ctrl-C [10]
    ///
    /// On Ctrl-C/SIGTERM, how long in-flight fetches may finish [default: 10]
    #[arg(long, value_name = "SECS", value_parser = grace, allow_hyphen_values = true, help_heading = LIMITS)]
    pub grace: Option<Duration>,

    /// Follow links from the --urls (seeds)
    ///
    /// Crawl, not only fetch (sets [crawl] follow = true): links are followed within the
    /// [crawl] scope. Records gain depth, parent, new_links, links (when any); the summary
    /// gains discovered, skipped_scope, deduped, skipped_budget and the sitemap figures.
    /// A Ctrl-C stops at once (exit 130); --resume goes on
    #[arg(short, long, overrides_with = "follow", help_heading = CRAWLING)]
    pub follow: bool,
    /// Links followed from a seed, at most
    ///
    /// Sets [crawl] max_depth
    #[arg(long, value_name = "N", value_parser = depth, allow_hyphen_values = true, help_heading = CRAWLING)]
    pub depth: Option<u32>,
    /// Hosts links may lead to: same_host, same_domain, any
    ///
    /// In a --follow crawl (sets [crawl] scope): same_host (the seeds' hosts, the
    /// default), same_domain (any host under a seed's registrable domain) or any
    #[arg(long, value_name = "SCOPE", value_parser = crawl_scope, help_heading = CRAWLING)]
    pub scope: Option<exitcrawl::config::CrawlScope>,
    /// Pages fetched, at most
    ///
    /// In a --follow crawl (sets [crawl] max_pages)
    #[arg(long, value_name = "N", value_parser = max_pages, allow_hyphen_values = true, help_heading = CRAWLING)]
    pub max_pages: Option<u64>,

    /// A shared Redis frontier redis://HOST:PORT/QUEUE
    ///
    /// One QUEUE is one crawl. With --enqueue: push URLs into it. Otherwise (with
    /// --config, without --urls): pull URLs from it, fetch, append the record to --out
    /// (flushed), then mark the URL done and acknowledge it (at-least-once: merge the
    /// --out files with --dedupe)
    #[arg(long, value_name = "URL", value_parser = FrontierUrl::parse, allow_hyphen_values = true, help_heading = DISTRIBUTED)]
    pub frontier: Option<FrontierUrl>,
    /// Push the URLs of FILE into --frontier
    ///
    /// FILE may be '-' (stdin). Each URL once per crawl: a URL already queued or done in
    /// it is skipped; prints 'enqueued N skipped M'
    #[arg(long, value_name = "FILE", value_parser = text, allow_hyphen_values = true, help_heading = DISTRIBUTED)]
    pub enqueue: Option<String>,
    /// With --enqueue: start the crawl over
    ///
    /// Drops its queue, done and enqueued sets before pushing; stop its consumers first
    #[arg(long, overrides_with = "recrawl", help_heading = DISTRIBUTED)]
    pub recrawl: bool,
    /// A silent consumer is dead after SECS [30]
    ///
    /// A consumer silent for this long (no heartbeat; one is sent every SECS/4) is dead,
    /// and the others take its entries over, all at once [default: 30]
    #[arg(long, value_name = "SECS", value_parser = positive_secs, allow_hyphen_values = true, help_heading = DISTRIBUTED)]
    pub claim_idle: Option<Duration>,
    /// Exit after SECS with nothing to do [5]
    ///
    /// Exit once nothing is in flight, nothing is pending for any consumer and nothing
    /// new came for this long [default: 5]
    #[arg(long, value_name = "SECS", value_parser = positive_secs, allow_hyphen_values = true, help_heading = DISTRIBUTED)]
    pub idle_exit: Option<Duration>,
    /// Retry an unanswering Redis for SECS [60]
    ///
    /// While Redis does not answer, retry with backoff for this long, then exit 1
    /// [default: 60]
    #[arg(long, value_name = "SECS", value_parser = positive_secs, allow_hyphen_values = true, help_heading = DISTRIBUTED)]
    pub redis_wait: Option<Duration>,

    /// No progress bar or status line
    #[arg(short, long, overrides_with = "quiet", help_heading = OBSERVABILITY)]
    pub quiet: bool,
    /// Serve Prometheus metrics on http://ADDR/metrics
    ///
    /// Sets [metrics] listen, e.g. 127.0.0.1:9100
    #[arg(long, value_name = "ADDR", value_parser = socket_addr, allow_hyphen_values = true, help_heading = OBSERVABILITY)]
    pub metrics: Option<SocketAddr>,
    /// Logs on stderr: text or json
    ///
    /// RUST_LOG filters them (default 'warn'), e.g. RUST_LOG=info
    #[arg(long, value_name = "FMT", value_enum, hide_possible_values = true, help_heading = OBSERVABILITY)]
    pub log_format: Option<LogFormat>,

    /// Crawl a local rate-limited test site
    ///
    /// Starts the site on 127.0.0.1 and crawls it through four exits bound to
    /// 127.0.0.1..127.0.0.4; prints the summary
    #[arg(long, overrides_with = "demo", help_heading = DEMO)]
    pub demo: bool,
    /// URLs the demo generates [3000]
    ///
    /// [default: 3000]
    #[arg(long, value_name = "N", value_parser = positive_count, allow_hyphen_values = true, help_heading = DEMO)]
    pub demo_urls: Option<u64>,
}
