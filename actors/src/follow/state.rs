//! The crawl's state besides the futures in flight: scope, seen-set, frontier, robots.txt
//! cache, sitemaps, and what a fetch that completed did to them.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use exitcrawl::address::AddressRule;
use exitcrawl::config::CrawlSettings;
use exitcrawl::discover::{
    extract_links, normalize, Entry, Frontier, RobotsCache, RobotsState, Scope, Seen, Sitemaps,
    Verdict,
};
use http::HeaderMap;
use url::Url;

use super::record::{FollowError, FollowTotals};
use crate::messages::{FetchError, FetchResponse};

/// A fetch of the crawl that completed.
pub(super) enum Done {
    Page {
        entry: Entry,
        sent: Instant,
        result: Result<FetchResponse, FetchError>,
    },
    Robots {
        origin: String,
        host: String,
        result: Result<FetchResponse, FetchError>,
    },
    Sitemap {
        url: Url,
        result: Result<FetchResponse, FetchError>,
    },
}

pub(super) fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(awc::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim_start().to_ascii_lowercase();
            v.starts_with("text/html") || v.starts_with("application/xhtml+xml")
        })
}

pub(super) fn build_scope(c: &CrawlSettings) -> Result<Scope, FollowError> {
    let mut scope = Scope::new(c.scope.mode());
    for (i, p) in c.allow.iter().enumerate() {
        scope = scope.allow(p).map_err(|e| FollowError {
            key: format!("crawl.allow[{i}]"),
            message: e.to_string(),
        })?;
    }
    for (i, p) in c.deny.iter().enumerate() {
        scope = scope.deny(p).map_err(|e| FollowError {
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

/// The crawl's state besides the futures in flight.
pub(super) struct State {
    pub scope: Scope,
    pub seen: Seen,
    pub frontier: Frontier,
    pub robots: RobotsCache,
    /// Entries popped while their origin's robots.txt fetch is in flight.
    pub stash: HashMap<String, Vec<Entry>>,
    pub robots_in_flight: HashSet<String>,
    pub robots_failures: HashMap<String, u32>,
    /// Origins whose robots.txt stayed unreachable: their URLs are skipped.
    pub robots_gave_up: HashSet<String>,
    /// Frontier hosts with a Crawl-delay: serial, spaced from the previous answer.
    pub delays: HashMap<String, Duration>,
    pub host_in_flight: HashMap<String, u32>,
    pub budget_spent: bool,
    pub totals: FollowTotals,
    /// Sitemap files read (each once) and the `<lastmod>` of the URLs they listed that
    /// have no record yet.
    pub sitemaps: Sitemaps,
    pub lastmods: HashMap<String, String>,
    /// The private-address rule: which links count as found on a public page.
    pub addresses: AddressRule,
}

impl State {
    pub fn new(c: &CrawlSettings, robots: RobotsCache) -> Result<State, FollowError> {
        let mut frontier = Frontier::new();
        frontier.set_max_in_flight(c.per_host_concurrency);
        Ok(State {
            scope: build_scope(c)?,
            seen: Seen::with_limit(usize::try_from(c.seen_limit).unwrap_or(usize::MAX)),
            frontier,
            robots,
            stash: HashMap::new(),
            robots_in_flight: HashSet::new(),
            robots_failures: HashMap::new(),
            robots_gave_up: HashSet::new(),
            delays: HashMap::new(),
            host_in_flight: HashMap::new(),
            budget_spent: false,
            totals: FollowTotals::default(),
            sitemaps: Sitemaps::default(),
            lastmods: HashMap::new(),
            addresses: c.address_rule(),
        })
    }

    pub fn apply_robots_delay(&mut self, origin: &str, host: &str, now: Instant) {
        if let RobotsState::Known(r) = self.robots.lookup(origin, now) {
            if let Some(d) = r.crawl_delay().filter(|d| !d.is_zero()) {
                self.delays.insert(host.to_owned(), d);
                self.frontier.set_interval(host, d);
                self.frontier.set_next(host, now + d);
            }
        }
    }

    /// Drop everything queued: the page budget is spent.
    pub fn spend_budget(&mut self) {
        self.budget_spent = true;
        let stashed: usize = self.stash.values().map(Vec::len).sum();
        self.totals.skipped_budget += (self.frontier.len() + stashed) as u64;
        self.stash.clear();
        // Nothing more is handed out; completions still report `done` harmlessly.
        self.frontier = Frontier::new();
    }

    /// A discovered URL into the frontier, if it is in scope, new, and within the budget;
    /// `true` when it went in.
    pub fn offer(&mut self, entry: Entry) -> bool {
        if self.scope.check(&entry.url, entry.depth) != Verdict::In {
            self.totals.skipped_scope += 1;
            return false;
        }
        let refused = self.seen.refused();
        if !self.seen.insert(&entry.url) {
            if self.seen.refused() > refused {
                self.totals.seen_full += 1;
            } else {
                self.totals.deduped += 1;
            }
            return false;
        }
        self.totals.discovered += 1;
        if self.budget_spent {
            self.totals.skipped_budget += 1;
            return false;
        }
        self.frontier.push_entry(entry);
        true
    }

    /// Links of a fetched page into the frontier. `final_url` is where redirects led, if
    /// any: relative links resolve against it, and it counts as seen (it was fetched).
    /// `from_public`: the page came from a public address.
    pub fn enqueue_links(
        &mut self,
        page: &Entry,
        final_url: Option<&str>,
        body: &[u8],
        from_public: bool,
    ) -> Vec<String> {
        let depth = page.depth.saturating_add(1);
        let landed = final_url.and_then(|u| normalize(u).ok());
        if let Some(u) = &landed {
            self.seen.insert(u);
        }
        let base = landed.as_ref().unwrap_or(&page.url);
        let mut new = Vec::new();
        for link in extract_links(body, base) {
            let entry = Entry {
                url: link,
                depth,
                parent: Some(page.url.clone()),
                from_public,
            };
            let url = entry.url.to_string();
            if self.offer(entry) {
                new.push(url);
            }
        }
        new
    }

    /// Whether a link an earlier run found on `parent` counts as found on a public page.
    /// The earlier run's answers are gone: only a parent whose host is an address literal
    /// (or `localhost`) that is private counts as private.
    pub fn resumed_from_public(&self, parent: Option<&Url>) -> bool {
        let Some(host) = parent.and_then(Url::host) else {
            return false;
        };
        let private = match host {
            url::Host::Ipv4(ip) => self.addresses.is_private(ip.into()),
            url::Host::Ipv6(ip) => self.addresses.is_private(ip.into()),
            url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        };
        self.addresses.enforced() && !private
    }
}
