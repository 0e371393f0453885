//! What a crawl hands out: one record per URL, the crawl's counters, and what an
//! interrupted crawl goes on from.

use std::fmt;
use std::time::Duration;

use exitcrawl::discover::Entry;
use serde::Serialize;
use url::Url;

use crate::messages::{FetchError, FetchResponse};

/// Why a URL was not fetched (only reasons that get a record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// robots.txt disallows it, or robots.txt stayed unreachable (then `error` says so).
    Robots,
    /// The URL list had it on an earlier line (the `exitcrawl` program's list mode): that
    /// line's record tells its fate.
    Duplicate,
}

/// One line of output: the fate of one URL (fetched, or skipped by robots.txt).
///
/// Serialises (JSON) with the binary's record fields plus `depth`, `parent`, `skipped`,
/// `new_links` and, when there are any, `links` and the sitemap's `lastmod`:
/// `url, status, exit, attempts, elapsed_ms, bytes, wire_bytes, error, depth, parent,
/// skipped, …`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowRecord {
    /// The normalised URL.
    pub url: String,
    /// HTTP status of the final attempt; `None` without an answer (or when skipped).
    pub status: Option<u16>,
    /// Exit of the final attempt; `None` when none was made.
    pub exit: Option<String>,
    /// HTTP attempts sent (0 when skipped).
    pub attempts: u32,
    /// From handing the fetch to the crawler to its reply.
    pub elapsed_ms: u64,
    /// Body bytes of the final answer (decoded).
    pub bytes: u64,
    /// The same body's bytes as they came over the wire (smaller when it came compressed).
    pub wire_bytes: u64,
    /// `None`, or why the fetch ended without an answer (`kind: message`).
    pub error: Option<String>,
    /// Links followed from a seed (seeds are 0).
    pub depth: u32,
    /// The page the link was found on (`None` for seeds).
    pub parent: Option<String>,
    /// `None` if fetched; why not otherwise.
    pub skipped: Option<SkipReason>,
    /// In-scope, unseen links this page added to the frontier.
    pub new_links: u32,
    /// Those links (normalised): what an interrupted crawl resumes from ([`Resume`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    /// The `<lastmod>` of the sitemap that listed the URL (`parent` is that sitemap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lastmod: Option<String>,
    /// 429/503 answers over all attempts (not serialised; for summaries).
    #[serde(skip)]
    pub throttled: u32,
}

/// Counters of one crawl.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FollowTotals {
    /// Distinct URLs accepted for crawling (valid seeds + in-scope unseen links).
    pub discovered: u64,
    /// Page fetches completed (answered or failed); robots.txt fetches not included.
    pub fetched: u64,
    /// Fetched pages answered 2xx.
    pub ok: u64,
    /// Fetched pages that got no HTTP answer.
    pub failed: u64,
    /// Link occurrences outside the scope (host/domain, allow/deny, depth).
    pub skipped_scope: u64,
    /// URLs not fetched because of robots.txt (each has a record).
    pub skipped_robots: u64,
    /// In-scope link occurrences (and seeds) already seen.
    pub deduped: u64,
    /// Discovered URLs not fetched because `max_pages` was reached.
    pub skipped_budget: u64,
    /// New in-scope URLs dropped because the seen-set was full (`seen_limit`).
    pub seen_full: u64,
    /// Seeds that are not http(s) URLs (each has a record with an error).
    pub invalid_seeds: u64,
    /// robots.txt fetches sent.
    pub robots_fetches: u64,
    /// HTTP attempts of all fetches, robots.txt included.
    pub requests: u64,
    /// URLs an earlier run already has records for ([`Resume::done`]): not fetched again.
    pub resumed: u64,
    /// Sitemap files fetched (given, from robots.txt, or named by an index).
    pub sitemap_fetches: u64,
    /// Distinct in-scope URLs the sitemaps added to the crawl.
    pub sitemap_urls: u64,
    /// Sitemap files that could not be fetched or read (each is logged).
    pub sitemap_errors: u64,
}

impl FollowRecord {
    /// A URL robots.txt did not let through (`error`: why, when robots.txt was unreachable).
    pub(super) fn skipped(entry: &Entry, error: Option<String>) -> FollowRecord {
        FollowRecord {
            skipped: Some(SkipReason::Robots),
            ..FollowRecord::unfetched(entry.url.to_string(), entry, error)
        }
    }

    /// A URL a public page led to whose host is private: refused before anything was
    /// sent (its robots.txt fetch was).
    pub(super) fn refused(entry: &Entry) -> FollowRecord {
        let error = Some(crate::messages::PRIVATE_REFUSED.to_string());
        FollowRecord::unfetched(entry.url.to_string(), entry, error)
    }

    /// A seed that is no http(s) URL.
    pub(super) fn invalid_seed(url: String, error: String) -> FollowRecord {
        let entry = Entry {
            url: Url::parse("http://invalid.invalid/").expect("a valid URL"),
            depth: 0,
            parent: None,
            from_public: false,
        };
        FollowRecord::unfetched(url, &entry, Some(format!("invalid_url: {error}")))
    }

    fn unfetched(url: String, entry: &Entry, error: Option<String>) -> FollowRecord {
        FollowRecord {
            url,
            status: None,
            exit: None,
            attempts: 0,
            elapsed_ms: 0,
            bytes: 0,
            wire_bytes: 0,
            error,
            depth: entry.depth,
            parent: entry.parent.as_ref().map(Url::to_string),
            skipped: None,
            new_links: 0,
            links: Vec::new(),
            lastmod: None,
            throttled: 0,
        }
    }

    /// A page that was answered, with the links it added.
    pub(super) fn answered(entry: &Entry, r: &FetchResponse, links: Vec<String>) -> FollowRecord {
        FollowRecord {
            status: Some(r.status),
            exit: Some(String::from(&*r.exit)),
            attempts: r.attempts,
            elapsed_ms: millis(r.elapsed),
            bytes: r.body.len() as u64,
            wire_bytes: r.wire_bytes,
            new_links: u32::try_from(links.len()).unwrap_or(u32::MAX),
            links,
            throttled: r.throttled,
            ..FollowRecord::unfetched(entry.url.to_string(), entry, None)
        }
    }

    /// A page fetch that ended without an answer after `elapsed`.
    pub(super) fn failed(entry: &Entry, e: &FetchError, elapsed: Duration) -> FollowRecord {
        FollowRecord {
            exit: e.exit.as_deref().map(String::from),
            attempts: e.attempts,
            elapsed_ms: millis(elapsed),
            throttled: e.throttled,
            ..FollowRecord::unfetched(entry.url.to_string(), entry, Some(e.record_error()))
        }
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What an earlier, interrupted run of the same crawl left in its records, to go on from
/// there ([`resume_site`]; `crawl --follow --resume`). The records hold everything needed:
/// each URL's fate, and each page's `links` — the URLs it put in the frontier, of which
/// those without a record of their own were still waiting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resume {
    /// URLs that have a record (fetched or skipped): never handed out again.
    pub done: Vec<String>,
    /// Pages the earlier run fetched: they count against `max_pages`.
    pub pages: u64,
    /// Links the earlier run's pages put in the frontier.
    pub pending: Vec<PendingLink>,
}

/// A link found by an earlier run ([`Resume::pending`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLink {
    /// The link.
    pub url: String,
    /// Its depth (its page's depth + 1).
    pub depth: u32,
    /// The page it was found on.
    pub parent: Option<String>,
}

/// Why [`crawl_site`] could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowError {
    /// The settings key at fault (`crawl.deny[2]`).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FollowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for FollowError {}
