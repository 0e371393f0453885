//! What a crawl counts, what an interrupted crawl goes on from, and the one way building
//! a crawl can fail. Plain data, so the actor layer can serialise and report them as is.

use std::fmt;

use serde::Serialize;

use crate::config::CrawlSettings;
use crate::discover::Scope;

/// Counters of one crawl.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CrawlTotals {
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
    /// Links left out because their page had more than
    /// [`MAX_LINKS_PER_PAGE`](crate::discover::MAX_LINKS_PER_PAGE) (`<a href>` past it).
    pub links_over_cap: u64,
    /// Pages that had more links than that.
    pub pages_over_cap: u64,
}

/// What an earlier, interrupted run of the same crawl left in its records, to go on from
/// there (`crawl --follow --resume`). The records hold everything needed: each URL's
/// fate, and each page's `links` — the URLs it put in the frontier, of which those
/// without a record of their own were still waiting.
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
    /// Its depth (its page's depth + 1; a redirect's target, its page's depth).
    pub depth: u32,
    /// The page it was found on.
    pub parent: Option<String>,
    /// It is where its page redirected, not a link on it: at depth 0, a seed's target,
    /// in scope as the seed is.
    pub redirect: bool,
}

/// Why a crawl could not start: a rule that does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrawlError {
    /// The settings key at fault (`crawl.deny[2]`).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CrawlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

impl std::error::Error for CrawlError {}

/// The [`Scope`] the `[crawl]` table describes (seeds are added as they come in).
pub fn build_scope(c: &CrawlSettings) -> Result<Scope, CrawlError> {
    let mut scope = Scope::new(c.scope.into());
    for (i, p) in c.allow.iter().enumerate() {
        scope = scope.allow(p).map_err(|e| CrawlError {
            key: format!("crawl.allow[{i}]"),
            message: e.to_string(),
        })?;
    }
    for (i, p) in c.deny.iter().enumerate() {
        scope = scope.deny(p).map_err(|e| CrawlError {
            key: format!("crawl.deny[{i}]"),
            message: e.to_string(),
        })?;
    }
    if let Some(d) = c.max_depth {
        scope = scope.max_depth(d);
    }
    if let Some(n) = c.max_pages {
        scope = scope.max_pages(n);
    }
    Ok(scope)
}
