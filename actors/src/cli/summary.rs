//! The `--summary` object (one JSON line).

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

use super::record::Totals;
use crate::{ExitStats, FollowTotals};

/// The `--summary` object.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// URLs read (and recorded) by this run.
    pub total: u64,
    /// Final answer 2xx.
    pub ok: u64,
    /// `total - ok` (interrupted and robots-skipped URLs included).
    pub failed: u64,
    /// 429/503 answers over all attempts of all URLs.
    pub throttled: u64,
    /// HTTP attempts sent: the records' `attempts` plus robots.txt fetches.
    pub requests: u64,
    /// URLs recorded as interrupted (Ctrl-C).
    pub interrupted: u64,
    /// URLs skipped by `--resume` (a final record was already in `--out`).
    pub skipped: u64,
    /// URLs not fetched because of robots.txt (each has a record).
    pub skipped_robots: u64,
    /// robots.txt fetches sent (their attempts count in `requests`).
    pub robots_fetches: u64,
    pub elapsed_s: f64,
    pub per_exit: Vec<ExitSummary>,
    /// `--follow` only: the crawl's discovery counters.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub follow: Option<FollowSummary>,
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

#[derive(Debug, Serialize)]
pub struct ExitSummary {
    pub name: String,
    pub source_ip: IpAddr,
    pub requests: u64,
    pub ok: u64,
    pub throttled: u64,
    pub errors: u64,
    pub healthy: bool,
}

impl Summary {
    pub fn new(t: &Totals, skipped: u64, elapsed: Duration, stats: Vec<ExitStats>) -> Self {
        Summary {
            total: t.total.get(),
            ok: t.ok.get(),
            failed: t.total.get() - t.ok.get(),
            throttled: t.throttled.get(),
            requests: t.requests.get(),
            interrupted: t.interrupted.get(),
            skipped,
            skipped_robots: t.skipped_robots.get(),
            robots_fetches: t.robots_fetches.get(),
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

    /// A `--follow` crawl's counters (robots.txt fetches go through the exits too: they
    /// count in `requests`, so `per_exit` adds up).
    pub fn with_follow(mut self, ft: &FollowTotals) -> Self {
        self.requests = ft.requests;
        self.skipped = ft.resumed;
        self.skipped_robots = ft.skipped_robots;
        self.robots_fetches = ft.robots_fetches;
        self.follow = Some(FollowSummary {
            discovered: ft.discovered,
            skipped_scope: ft.skipped_scope,
            deduped: ft.deduped,
            skipped_budget: ft.skipped_budget,
            sitemaps: (ft.sitemap_fetches + ft.sitemap_errors > 0).then_some(SitemapSummary {
                sitemap_fetches: ft.sitemap_fetches,
                sitemap_urls: ft.sitemap_urls,
                sitemap_errors: ft.sitemap_errors,
            }),
        });
        self
    }
}
