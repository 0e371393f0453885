//! The `--summary` object (one JSON line). Every figure is defined in docs/cli.md ("The
//! summary").
//!
//! `per_exit` counts what each exit sent, from the counters behind
//! `exitcrawl_requests_total` (an attempt that could not leave the exit — no connection
//! could be opened from its address — reached no site and is not a request: it is in
//! `not_sent`); `requests` is their sum, so the two always add up.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::net::IpAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitcrawl_actors::follow::FollowTotals;
use exitcrawl_actors::Metrics;
use exitcrawl_actors::{CrawlerHandle, ExitStats, HostLimits};
use exitcrawl_net::clock;
use serde::Serialize;

use super::date::rfc3339_millis;
use super::dedupe::RecordCounts;
use super::output::{write_atomic, write_stdout};
use super::record::{HostTally, Totals};
use super::source::ReadStats;
use super::Failure;

/// The `--summary` object.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// URLs read (and recorded) by this run; after `--resume`, the records of the
    /// compacted `--out` (see `resumed`).
    pub total: u64,
    /// Final answer 2xx.
    pub ok: u64,
    /// Fetches that were tried and failed: errors (robots.txt unreachable included) and
    /// final answers that are not 2xx (nor a redirect). `total` is `ok + failed +
    /// redirected + interrupted + skipped_robots + skipped_duplicate + invalid`.
    pub failed: u64,
    /// Answered with a redirect (301, 302, 303, 307, 308): with `--follow`, the target is
    /// a page of its own; otherwise one not followed (`crawler.max_redirects = 0`).
    pub redirected: u64,
    /// 429/503 answers over all attempts of all URLs.
    pub throttled: u64,
    /// HTTP requests the exits sent (every attempt, robots.txt fetches included): the
    /// sum of `per_exit[].requests`.
    pub requests: u64,
    /// URLs recorded as interrupted (Ctrl-C).
    pub interrupted: u64,
    /// URLs read ahead but not yet sent when the crawl was stopped: no record, so
    /// `--resume` fetches them (they do not count in `total`).
    pub left_queued: u64,
    /// URLs skipped by `--resume` (a final record was already in `--out`), or with
    /// `--frontier`, entries whose URL was already done in this crawl.
    pub skipped: u64,
    /// URLs not fetched because of robots.txt (each has a record).
    pub skipped_robots: u64,
    /// Lines of the list whose URL an earlier line had (each has a record, `skipped:
    /// "duplicate"`; not fetched).
    pub skipped_duplicate: u64,
    /// Lines that are not a URL the crawler takes (each has a record, error
    /// `invalid_url`; not fetched).
    pub invalid: u64,
    /// robots.txt fetches sent (their attempts count in `requests`).
    pub robots_fetches: u64,
    /// `--resume`: `total`, `ok`, `failed`, `redirected`, `throttled`, `interrupted`, `skipped_robots`,
    /// `skipped_duplicate` and `invalid` count the records of the compacted `--out`, one per URL —
    /// the whole crawl over every run; the other figures are this run's.
    pub resumed: bool,
    pub elapsed_s: f64,
    pub per_exit: Vec<ExitSummary>,
    /// This run's fetched URLs per host, most requests first, at most
    /// [`HostSummary::MAX`] of them.
    pub hosts: Vec<HostSummary>,
    /// Hosts left out of `hosts` (beyond [`HostSummary::MAX`]).
    pub hosts_omitted: u64,
    /// `--follow` only: the crawl's discovery counters.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub follow: Option<FollowSummary>,
    /// `--frontier` only: what this consumer did with the queue.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub frontier: Option<FrontierSummary>,
}

/// The summary's extra counters of a `--frontier` consumer.
#[derive(Debug, Serialize)]
pub struct FrontierSummary {
    /// URLs that failed on this consumer's side and went back to the queue (no record).
    pub requeued: u64,
    /// Entries given back unfetched: after a stop signal, or when the consumer stopped.
    pub released: u64,
    /// Entries taken over from consumers whose heartbeat expired.
    pub claimed: u64,
}

/// The summary's extra counters with `--follow` (see `FollowTotals`).
#[derive(Debug, Serialize)]
pub struct FollowSummary {
    /// Distinct URLs accepted for crawling (valid seeds + in-scope unseen links).
    pub discovered: u64,
    /// Link occurrences outside the scope.
    pub skipped_scope: u64,
    /// In-scope link occurrences (and seeds) already seen.
    pub deduped: u64,
    /// Discovered URLs not fetched because `max_pages` was reached.
    pub skipped_budget: u64,
    /// Links left out of pages with more than 10,000 (`<a href>` past the cap), and the
    /// pages that had them.
    pub links_over_cap: u64,
    pub pages_over_cap: u64,
    /// When sitemaps were read (`--sitemap`, `[crawl] sitemaps`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub sitemaps: Option<SitemapSummary>,
}

/// The summary's sitemap counters (see `FollowTotals`).
#[derive(Debug, Serialize)]
pub struct SitemapSummary {
    /// Sitemap files fetched.
    pub sitemap_fetches: u64,
    /// Distinct in-scope URLs they added.
    pub sitemap_urls: u64,
    /// Sitemap files that could not be fetched or read.
    pub sitemap_errors: u64,
}

/// One exit's requests.
#[derive(Debug, Serialize)]
pub struct ExitSummary {
    pub name: String,
    pub source_ip: IpAddr,
    /// HTTP requests sent through this exit (answered or not).
    pub requests: u64,
    /// Of those, answered 2xx.
    pub ok: u64,
    /// Answered with a throttle status (`limiter.throttle_statuses`, 429/503).
    pub throttled: u64,
    /// Sent, and ended without an answer (timeout, reset, refused, …).
    pub errors: u64,
    /// Attempts that never left the exit (no connection could be opened from its
    /// address, or the host has no address of its family): moved to another exit.
    pub not_sent: u64,
    pub healthy: bool,
    /// Pause the limiter ordered for this exit's own budgets (per-IP limits), over every
    /// host, ms; a host's shared budget's pauses are that host's (`hosts[].paused_ms`).
    pub paused_ms: u64,
    /// When the first and last record whose final attempt went through it were made (RFC
    /// 3339, UTC).
    pub first_at: Option<String>,
    pub last_at: Option<String>,
}

/// One host's account: what this run fetched there, and where its limit settled.
#[derive(Debug, Serialize, PartialEq)]
pub struct HostSummary {
    pub host: String,
    /// URLs fetched (at least one attempt).
    pub urls: u64,
    /// Attempts, throttled ones included.
    pub requests: u64,
    /// URLs whose final answer was 2xx.
    pub ok: u64,
    /// Throttle answers (429/503) over every attempt.
    pub throttled: u64,
    /// URLs fetched that did not end 2xx, nor with a redirect.
    pub failed: u64,
    /// The rate the limiter allowed the host at the end (its whole budget over every
    /// exit), requests/s; `null` without an adaptive limit for it.
    pub rate_rps: Option<f64>,
    /// What its answers said about its limit: `unknown`, `host` or `per_ip` (scope
    /// `auto`), or the configured scope; `null` without a limit for it.
    pub scope: Option<String>,
    /// Pause the limiter ordered for it (a `Retry-After`, a used-up quota, the hold after
    /// a throttle), summed over its budgets (the host's and each exit's own), ms; each
    /// moment of a budget's pause counted once.
    pub paused_ms: u64,
    /// When its first and last record were made (RFC 3339, UTC).
    pub first_at: Option<String>,
    pub last_at: Option<String>,
}

impl HostSummary {
    /// Most hosts listed: a broad crawl's summary stays a line one can read.
    pub const MAX: usize = 1000;

    /// The busiest hosts of `tallies`, with what `limits` say of them.
    fn list(
        tallies: &HashMap<String, HostTally>,
        limits: &[HostLimits],
        paused_ms: impl Fn(&str) -> u64,
    ) -> (Vec<Self>, u64) {
        let limit_of: HashMap<&str, &HostLimits> =
            limits.iter().map(|l| (l.host.as_str(), l)).collect();
        let mut v: Vec<_> = tallies.iter().collect();
        v.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then(a.0.cmp(b.0)));
        let omitted = v.len().saturating_sub(Self::MAX) as u64;
        let hosts = v
            .into_iter()
            .take(Self::MAX)
            .map(|(host, t)| {
                let l = limit_of.get(host.as_str());
                HostSummary {
                    host: host.clone(),
                    urls: t.urls,
                    requests: t.requests,
                    ok: t.ok,
                    throttled: t.throttled,
                    failed: t.failed,
                    rate_rps: l.and_then(|l| l.lanes.first()).map(|lane| lane.rps),
                    scope: l.map(|l| l.scope.clone()),
                    paused_ms: paused_ms(host),
                    first_at: t.first_at.map(rfc3339_millis),
                    last_at: t.last_at.map(rfc3339_millis),
                }
            })
            .collect();
        (hosts, omitted)
    }
}

const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "none"];

/// The requests exit `s` sent, of `outcome` (`ok`, `throttled`, `error`), from the
/// counters behind `exitcrawl_requests_total`.
fn sent_of(metrics: &Metrics, s: &ExitStats, outcome: &'static str) -> u64 {
    CLASSES
        .iter()
        .map(|c| metrics.exit_requests(&s.name, s.source_ip, outcome, c))
        .sum()
}

/// The requests exit `s` sent, answered or not: the attempts that left it (not those
/// that could not, which `ExitStats::total` counts too). The summary's `requests`.
pub fn sent_by(metrics: &Metrics, s: &ExitStats) -> u64 {
    ["ok", "throttled", "error"]
        .into_iter()
        .map(|outcome| sent_of(metrics, s, outcome))
        .sum()
}

impl ExitSummary {
    fn new(s: ExitStats, metrics: &Metrics) -> Self {
        let count = |outcome: &'static str, class: &'static str| {
            metrics.exit_requests(&s.name, s.source_ip, outcome, class)
        };
        let throttled = sent_of(metrics, &s, "throttled");
        let errors = sent_of(metrics, &s, "error");
        let requests = sent_by(metrics, &s);
        ExitSummary {
            ok: count("ok", "2xx"),
            requests,
            throttled,
            errors,
            not_sent: s.total.saturating_sub(requests),
            healthy: s.healthy,
            name: s.name,
            source_ip: s.source_ip,
            paused_ms: 0,
            first_at: None,
            last_at: None,
        }
    }
}

/// The pauses the limiter ordered, per budget, by the hosts' names.
struct Pauses<'a> {
    metrics: &'a Metrics,
    /// The crawl's exits, and `*` (a host's budget shared by the exits).
    lanes: Vec<String>,
}

impl Pauses<'_> {
    fn ms(&self, exit: &str, host: &str) -> u64 {
        let secs = self.metrics.host_pause_seconds(exit, host);
        // Whole milliseconds of a count that is never negative.
        (secs * 1000.0).round() as u64
    }

    /// `host`'s pauses over every budget.
    fn host(&self, host: &str) -> u64 {
        self.lanes.iter().map(|e| self.ms(e, host)).sum()
    }

    /// `exit`'s own budgets' pauses over `hosts`.
    fn exit<'h>(&self, exit: &str, hosts: impl Iterator<Item = &'h String>) -> u64 {
        hosts.map(|h| self.ms(exit, h)).sum()
    }
}

impl Summary {
    pub fn new(
        t: &Totals,
        skipped: u64,
        elapsed: Duration,
        stats: Vec<ExitStats>,
        metrics: &Metrics,
    ) -> Self {
        // A disabled exit sends nothing and is not one of the crawl's exits.
        let per_exit: Vec<ExitSummary> = stats
            .into_iter()
            .filter(|s| s.enabled)
            .map(|s| ExitSummary::new(s, metrics))
            .collect();
        Summary {
            total: t.total.get(),
            ok: t.ok.get(),
            failed: t.failed.get(),
            redirected: t.redirected.get(),
            throttled: t.throttled.get(),
            requests: per_exit.iter().map(|e| e.requests).sum(),
            interrupted: t.interrupted.get(),
            left_queued: t.left_queued.get(),
            skipped: skipped + t.skipped_done.get(),
            skipped_robots: t.skipped_robots.get(),
            skipped_duplicate: t.skipped_duplicate.get(),
            invalid: t.invalid.get(),
            robots_fetches: t.robots_fetches.get(),
            resumed: false,
            elapsed_s: elapsed.as_secs_f64(),
            per_exit,
            hosts: Vec::new(),
            hosts_omitted: 0,
            follow: None,
            frontier: None,
        }
    }

    /// The per-host account of `t`, with the limiter's view of each host (its limits, and
    /// from `metrics` its pauses); each exit's records and pauses.
    pub fn with_hosts(mut self, t: &Totals, limits: &[HostLimits], metrics: &Metrics) -> Self {
        let mut lanes: Vec<String> = self.per_exit.iter().map(|e| e.name.clone()).collect();
        lanes.push("*".into());
        let pauses = Pauses { metrics, lanes };
        let tallies = t.hosts.borrow();
        (self.hosts, self.hosts_omitted) = HostSummary::list(&tallies, limits, |h| pauses.host(h));
        let exits = t.exits.borrow();
        for e in &mut self.per_exit {
            e.paused_ms = pauses.exit(&e.name, tallies.keys());
            let tally = exits.get(&e.name).copied().unwrap_or_default();
            e.first_at = tally.first_at.map(rfc3339_millis);
            e.last_at = tally.last_at.map(rfc3339_millis);
        }
        self
    }

    /// A resumed crawl's figures: over the records `--out` keeps, one per URL.
    pub fn over_records(mut self, c: &RecordCounts) -> Self {
        self.resumed = true;
        self.total = c.total;
        self.ok = c.ok;
        self.failed = c.failed;
        self.redirected = c.redirected;
        self.throttled = c.throttled;
        self.interrupted = c.interrupted;
        self.skipped_robots = c.skipped_robots;
        self.skipped_duplicate = c.skipped_duplicate;
        self.invalid = c.invalid;
        self
    }

    /// A `--frontier` consumer's counters.
    pub fn with_frontier(mut self, t: &Totals) -> Self {
        self.frontier = Some(FrontierSummary {
            requeued: t.requeued.get(),
            released: t.released.get(),
            claimed: t.claimed.get(),
        });
        self
    }

    /// A `--follow` crawl's counters. `skipped_robots` stays the records' own count, as
    /// the other record figures do: the crawl's counters are a snapshot that a stop may
    /// take before the last robots skips it handed out were written.
    pub fn with_follow(mut self, ft: &FollowTotals) -> Self {
        self.skipped = ft.resumed;
        self.robots_fetches = ft.robots_fetches;
        self.follow = Some(FollowSummary {
            discovered: ft.discovered,
            skipped_scope: ft.skipped_scope,
            deduped: ft.deduped,
            skipped_budget: ft.skipped_budget,
            links_over_cap: ft.links_over_cap,
            pages_over_cap: ft.pages_over_cap,
            sitemaps: (ft.sitemap_fetches + ft.sitemap_errors > 0).then_some(SitemapSummary {
                sitemap_fetches: ft.sitemap_fetches,
                sitemap_urls: ft.sitemap_urls,
                sitemap_errors: ft.sitemap_errors,
            }),
        });
        self
    }
}

/// Where the summary goes, and what it is made of: written at the end of a run, or on a
/// second Ctrl-C from what is recorded by then.
pub struct SummaryWriter {
    /// `--summary FILE` (`-`: stdout).
    pub path: Option<PathBuf>,
    /// Also on stdout (the demo, or no `--summary`).
    pub stdout: bool,
    pub totals: Rc<Totals>,
    pub read: Arc<ReadStats>,
    pub started: Instant,
    pub handle: CrawlerHandle,
    /// A `--frontier` consumer: its counters are added.
    pub frontier: bool,
    /// What a terminal on stdout gets instead of the JSON line (the closing table).
    pub for_terminal: fn(&Summary) -> String,
}

impl SummaryWriter {
    /// The summary now: each exit's figures are asked for (bounded, as the scheduler may
    /// be busy shutting down).
    pub async fn summary(&self, follow: Option<&FollowTotals>) -> Summary {
        let stats = actix_rt::time::timeout(Duration::from_secs(2), self.handle.stats())
            .await
            .unwrap_or_default();
        let limits = actix_rt::time::timeout(Duration::from_secs(2), self.handle.limits())
            .await
            .unwrap_or_default();
        let summary = Summary::new(
            &self.totals,
            self.read.skipped.load(Ordering::Relaxed),
            clock::since(self.started),
            stats,
            self.handle.metrics(),
        )
        .with_hosts(&self.totals, &limits, self.handle.metrics());
        let summary = match follow {
            Some(ft) => summary.with_follow(ft),
            None => summary,
        };
        if self.frontier {
            summary.with_frontier(&self.totals)
        } else {
            summary
        }
    }

    /// Write `summary` to `--summary` (replaced in one step) and to stdout if asked; once
    /// on stdout when `--summary -` puts it there already.
    pub fn write(&self, summary: &Summary) -> Result<(), Failure> {
        let mut json = serde_json::to_vec(summary).expect("summary serializes");
        json.push(b'\n');
        let to_stdout =
            |e: std::io::Error| Failure::Output(format!("writing the summary to stdout: {e}"));
        let mut on_stdout = false;
        match &self.path {
            Some(p) if p.as_os_str() == "-" => {
                write_stdout(&json).map_err(to_stdout)?;
                on_stdout = true;
            }
            Some(p) => write_atomic(p, &json)
                .map_err(|e| Failure::Output(format!("writing --summary {}: {e}", p.display())))?,
            None => {}
        }
        if self.stdout && !on_stdout {
            // A person reads the terminal; a script reads a pipe or a file.
            let out = if std::io::stdout().is_terminal() {
                (self.for_terminal)(summary).into_bytes()
            } else {
                json
            };
            write_stdout(&out).map_err(to_stdout)?;
        }
        Ok(())
    }
}
