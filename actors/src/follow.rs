//! Crawling, not only fetching: the loop that follows links from seed URLs.
//!
//! [`crawl_site`] drives the pure parts in `exitcrawl::discover` with the crawler's own
//! fetches:
//!
//! ```text
//! seeds ─normalize─▶ Seen ─▶ Frontier ──pop(now)──▶ robots? ──▶ handle.fetch(page)
//!                      ▲      (per host,      │        │                │
//!                      │     round-robin)     │   RobotsCache      text/html answer
//!                      │                      │   (fetch once per        │
//!                      └── Scope ◀── resolve ◀┴── origin, same exits) ◀──┘ extract_links
//! ```
//!
//! - **Robots**: before a host's first page, `/robots.txt` of its origin is fetched through
//!   the same [`CrawlerHandle::fetch`] (so the same exits, limiter and retries apply); the
//!   host's popped URLs wait aside meanwhile. 4xx → allow all; 5xx, 429 and network errors
//!   → nothing is fetched from the origin, the fetch is retried with the
//!   [`RobotsCache`]'s doubling backoff, and after [`FollowOptions::max_robots_failures`]
//!   failures in a row its URLs are recorded as skipped (`"robots"`, with an error saying
//!   robots.txt was unreachable). Disallowed URLs become records with `skipped = "robots"`
//!   and are never fetched.
//! - **Crawl-delay** `d` makes the host serial (one fetch in flight) and spaces each send
//!   at least `d` after the previous answer *arrived* (and after the robots.txt answer),
//!   which bounds the spacing the server sees from below by `d` even when the scheduler
//!   queues one request longer than the next. Hosts without a delay get
//!   `crawl.per_host_concurrency` fetches in flight and the limiter's pacing.
//! - **Links** are taken from 2xx answers whose `Content-Type` is `text/html` (or
//!   `application/xhtml+xml`), resolved against the URL the answer finally came from
//!   (after redirects, [`FetchResponse::final_url`]) and `<base href>`. That final URL
//!   counts as seen, so a link to it is not fetched again.
//! - **Records**: one [`FollowRecord`] per URL that was fetched or skipped by robots.
//!   Links that are out of scope, already seen, or past the page budget get no record;
//!   they are only counted in [`FollowTotals`] (one count per link *occurrence* for
//!   scope and dedupe, so a nav-bar link on 100 pages counts 100 times).
//! - **Waiting** is a tokio sleep until the frontier's next ready time, capped at
//!   [`FollowOptions::max_wait`], raced against the next completion: no busy loop.
//!
//! Everything runs on the calling task (no spawn); the futures in flight borrow `handle`.

use awc::http::header::HeaderMap;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::pin::pin;
use std::time::{Duration, Instant};

use exitcrawl::config::{CrawlSettings, Settings};
use exitcrawl::discover::robots::{origin_key, robots_url};
use exitcrawl::discover::{
    extract_links, host_key, normalize, Entry, Frontier, Pop, RobotsCache, RobotsPolicy,
    RobotsState, Scope, Seen, Verdict,
};
use futures_util::future::{select, Either, FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use url::Url;

use crate::crawler::CrawlerHandle;
use crate::messages::{Fetch, FetchError, FetchResponse};

/// How [`crawl_site`] crawls: the `[crawl]` table plus what comes from elsewhere.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// The `[crawl]` table (`follow = false`: fetch the seeds only, still obeying robots).
    pub crawl: CrawlSettings,
    /// Fetches in flight at once, pages and robots.txt together (`crawler.concurrency`).
    pub concurrency: usize,
    /// The name robots.txt groups are matched against.
    pub robots_token: String,
    /// robots.txt cache timing (`ttl` from `crawl.robots_ttl_ms`; retry backoff after
    /// 5xx/network errors from [`RobotsPolicy::default`]: 60 s doubling to 1 h).
    pub robots_policy: RobotsPolicy,
    /// Failed robots.txt fetches in a row after which the origin's URLs are skipped.
    pub max_robots_failures: u32,
    /// Longest single sleep while waiting for a host to become ready.
    pub max_wait: Duration,
}

impl FollowOptions {
    /// Options from loaded settings: `[crawl]`, `crawler.concurrency` and the robots token
    /// (`crawl.user_agent_token`, else the product token of `crawler.user_agent`).
    pub fn from_settings(s: &Settings) -> FollowOptions {
        FollowOptions {
            crawl: s.crawl.clone(),
            concurrency: s.crawler.concurrency.max(1) as usize,
            robots_token: s.crawl.robots_token(&s.crawler.user_agent),
            robots_policy: RobotsPolicy {
                ttl: s.crawl.robots_ttl(),
                ..RobotsPolicy::default()
            },
            max_robots_failures: 3,
            max_wait: Duration::from_secs(1),
        }
    }
}

/// Why a URL was not fetched (only reasons that get a record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// robots.txt disallows it, or robots.txt stayed unreachable (then `error` says so).
    Robots,
}

/// One line of output: the fate of one URL (fetched, or skipped by robots.txt).
///
/// Serialises (JSON) with the binary's record fields plus `depth`, `parent`, `skipped`,
/// `new_links` and, when there are any, `links`:
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

enum Done {
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
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(awc::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim_start().to_ascii_lowercase();
            v.starts_with("text/html") || v.starts_with("application/xhtml+xml")
        })
}

fn skipped_record(entry: &Entry, error: Option<String>) -> FollowRecord {
    FollowRecord {
        url: entry.url.to_string(),
        status: None,
        exit: None,
        attempts: 0,
        elapsed_ms: 0,
        bytes: 0,
        wire_bytes: 0,
        error,
        depth: entry.depth,
        parent: entry.parent.as_ref().map(Url::to_string),
        skipped: Some(SkipReason::Robots),
        new_links: 0,
        links: Vec::new(),
        throttled: 0,
    }
}

fn build_scope(c: &CrawlSettings) -> Result<Scope, FollowError> {
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
struct State {
    scope: Scope,
    seen: Seen,
    frontier: Frontier,
    robots: RobotsCache,
    /// Entries popped while their origin's robots.txt fetch is in flight.
    stash: HashMap<String, Vec<Entry>>,
    robots_in_flight: HashSet<String>,
    robots_failures: HashMap<String, u32>,
    /// Origins whose robots.txt stayed unreachable: their URLs are skipped.
    robots_gave_up: HashSet<String>,
    /// Frontier hosts with a Crawl-delay: serial, spaced from the previous answer.
    delays: HashMap<String, Duration>,
    host_in_flight: HashMap<String, u32>,
    budget_spent: bool,
    totals: FollowTotals,
}

impl State {
    fn apply_robots_delay(&mut self, origin: &str, host: &str, now: Instant) {
        if let RobotsState::Known(r) = self.robots.lookup(origin, now) {
            if let Some(d) = r.crawl_delay().filter(|d| !d.is_zero()) {
                self.delays.insert(host.to_owned(), d);
                self.frontier.set_interval(host, d);
                self.frontier.set_next(host, now + d);
            }
        }
    }

    /// Drop everything queued: the page budget is spent.
    fn spend_budget(&mut self) {
        self.budget_spent = true;
        let stashed: usize = self.stash.values().map(Vec::len).sum();
        self.totals.skipped_budget += (self.frontier.len() + stashed) as u64;
        self.stash.clear();
        // Nothing more is handed out; completions still report `done` harmlessly.
        self.frontier = Frontier::new();
    }

    /// Links of a fetched page into the frontier. `final_url` is where redirects led, if
    /// any: relative links resolve against it, and it counts as seen (it was fetched).
    fn enqueue_links(&mut self, page: &Entry, final_url: Option<&str>, body: &[u8]) -> Vec<String> {
        let depth = page.depth.saturating_add(1);
        let landed = final_url.and_then(|u| normalize(u).ok());
        if let Some(u) = &landed {
            self.seen.insert(u);
        }
        let base = landed.as_ref().unwrap_or(&page.url);
        let mut new = Vec::new();
        for link in extract_links(body, base) {
            if self.scope.check(&link, depth) != Verdict::In {
                self.totals.skipped_scope += 1;
                continue;
            }
            let refused = self.seen.refused();
            if !self.seen.insert(&link) {
                if self.seen.refused() > refused {
                    self.totals.seen_full += 1;
                } else {
                    self.totals.deduped += 1;
                }
                continue;
            }
            self.totals.discovered += 1;
            if self.budget_spent {
                self.totals.skipped_budget += 1;
                continue;
            }
            new.push(link.to_string());
            self.frontier.push(link, depth, Some(page.url.clone()));
        }
        new
    }
}

/// Crawl from `seeds` through `handle`, calling `on_record` once per fetched or
/// robots-skipped URL as results arrive; returns the counters when nothing is left.
///
/// Scope: seeds are always fetched (subject to robots.txt) and define the hosts/domains
/// of `same_host`/`same_domain`; discovered links go through [`Scope::check`], then the
/// seen-set, then the per-host frontier. See the module doc for robots and Crawl-delay.
/// With `crawl.robots = false` robots.txt is neither fetched nor obeyed (a warning is
/// logged; the caller should say so too).
///
/// Errors only for rules that do not compile (validated settings never do).
pub async fn crawl_site(
    handle: &CrawlerHandle,
    seeds: Vec<String>,
    opts: &FollowOptions,
    on_record: impl FnMut(FollowRecord),
) -> Result<FollowTotals, FollowError> {
    resume_site(handle, seeds, Resume::default(), opts, on_record).await
}

/// [`crawl_site`], going on from an earlier run's records: URLs in `resume.done` are not
/// fetched again (seeds included), its pages count against `max_pages`, and its pending
/// links join the frontier (after the seeds) unless done. Records and totals cover this
/// run only, so appending them to the earlier ones gives each URL one record.
pub async fn resume_site(
    handle: &CrawlerHandle,
    seeds: Vec<String>,
    resume: Resume,
    opts: &FollowOptions,
    mut on_record: impl FnMut(FollowRecord),
) -> Result<FollowTotals, FollowError> {
    resume_site_answers(handle, seeds, resume, opts, move |r, _| on_record(r)).await
}

/// [`resume_site`], handing each record over with the answer it was made from (`None`
/// for robots-skipped URLs, invalid seeds and fetches without an answer), for callers
/// that keep the pages themselves (the `exitcrawl` program's WARC output).
pub async fn resume_site_answers(
    handle: &CrawlerHandle,
    seeds: Vec<String>,
    resume: Resume,
    opts: &FollowOptions,
    mut on_record: impl FnMut(FollowRecord, Option<FetchResponse>),
) -> Result<FollowTotals, FollowError> {
    let c = &opts.crawl;
    let mut st = State {
        scope: build_scope(c)?,
        seen: Seen::with_limit(usize::try_from(c.seen_limit).unwrap_or(usize::MAX)),
        frontier: Frontier::new(),
        robots: RobotsCache::new(&opts.robots_token, opts.robots_policy),
        stash: HashMap::new(),
        robots_in_flight: HashSet::new(),
        robots_failures: HashMap::new(),
        robots_gave_up: HashSet::new(),
        delays: HashMap::new(),
        host_in_flight: HashMap::new(),
        budget_spent: false,
        totals: FollowTotals::default(),
    };
    st.frontier.set_max_in_flight(c.per_host_concurrency);
    if !c.robots {
        tracing::warn!(
            "robots.txt is IGNORED for this crawl ([crawl] robots = false / --ignore-robots): \
             disallowed paths and Crawl-delay will not be honoured"
        );
    }

    for u in &resume.done {
        if let Ok(u) = normalize(u) {
            st.seen.insert(&u);
            st.totals.resumed += 1;
        }
    }
    // A spent budget shows at the first hand-out, as in a run that spends it.
    for _ in 0..resume.pages {
        st.scope.take_page();
    }

    for s in seeds {
        match normalize(&s) {
            Ok(u) => {
                st.scope = std::mem::take(&mut st.scope).seed(&u);
                if st.seen.insert(&u) {
                    st.totals.discovered += 1;
                    st.frontier.push(u, 0, None);
                } else {
                    st.totals.deduped += 1;
                }
            }
            Err(e) => {
                st.totals.invalid_seeds += 1;
                on_record(
                    FollowRecord {
                        url: s,
                        status: None,
                        exit: None,
                        attempts: 0,
                        elapsed_ms: 0,
                        bytes: 0,
                        wire_bytes: 0,
                        error: Some(format!("invalid_url: {e}")),
                        depth: 0,
                        parent: None,
                        skipped: None,
                        new_links: 0,
                        links: Vec::new(),
                        throttled: 0,
                    },
                    None,
                );
            }
        }
    }

    for link in resume.pending {
        let Ok(u) = normalize(&link.url) else {
            continue;
        };
        // Seeds define the scope, so a link that was in scope then is checked again.
        if st.scope.check(&u, link.depth) != Verdict::In || !st.seen.insert(&u) {
            continue;
        }
        if st.budget_spent {
            st.totals.skipped_budget += 1;
            continue;
        }
        let parent = link.parent.as_deref().and_then(|p| normalize(p).ok());
        st.frontier.push(u, link.depth, parent);
    }

    let concurrency = opts.concurrency.max(1);
    let mut in_flight: FuturesUnordered<LocalBoxFuture<'_, Done>> = FuturesUnordered::new();

    loop {
        // Hand out ready URLs while there is room.
        let mut wait: Option<Duration> = None;
        while in_flight.len() < concurrency && !st.budget_spent {
            let now = Instant::now();
            let entry = match st.frontier.pop(now) {
                Pop::Ready(e) => e,
                Pop::Wait(d) => {
                    wait = Some(d);
                    break;
                }
                Pop::Busy | Pop::Empty => break,
            };
            let host = host_key(&entry.url).to_owned();
            if c.robots {
                let origin = origin_key(&entry.url);
                if st.robots_gave_up.contains(&origin) {
                    st.frontier.release(&host);
                    st.totals.skipped_robots += 1;
                    on_record(
                        skipped_record(
                            &entry,
                            Some("robots_unavailable: robots.txt could not be fetched".into()),
                        ),
                        None,
                    );
                    continue;
                }
                match st.robots.lookup(&origin, now) {
                    RobotsState::Known(r) => {
                        if !r.allowed(&entry.url) {
                            st.frontier.release(&host);
                            st.totals.skipped_robots += 1;
                            on_record(skipped_record(&entry, None), None);
                            continue;
                        }
                    }
                    RobotsState::Fetch => {
                        st.frontier.release(&host);
                        st.robots_in_flight.insert(origin.clone());
                        st.totals.robots_fetches += 1;
                        let fetch = Fetch::get(robots_url(&entry.url).to_string());
                        st.stash.entry(origin.clone()).or_default().push(entry);
                        let h = host.clone();
                        in_flight.push(
                            async move {
                                Done::Robots {
                                    result: handle.fetch(fetch).await,
                                    origin,
                                    host: h,
                                }
                            }
                            .boxed_local(),
                        );
                        continue;
                    }
                    RobotsState::Wait(until) => {
                        if st.robots_in_flight.contains(&origin) {
                            st.frontier.release(&host);
                            st.stash.entry(origin).or_default().push(entry);
                        } else {
                            // robots.txt failed: nothing from this origin until the retry.
                            st.frontier.requeue(entry);
                            st.frontier.set_next(&host, until);
                        }
                        continue;
                    }
                }
            }
            let busy = st.host_in_flight.get(&host).copied().unwrap_or(0);
            if busy > 0 && st.delays.contains_key(&host) {
                // Crawl-delay hosts are serial; the next send is timed from the answer.
                st.frontier.requeue(entry);
                continue;
            }
            if !st.scope.take_page() {
                st.frontier.release(&host);
                st.totals.skipped_budget += 1;
                st.spend_budget();
                break;
            }
            *st.host_in_flight.entry(host).or_default() += 1;
            let fetch = Fetch::get(entry.url.to_string());
            in_flight.push(
                async move {
                    let sent = Instant::now();
                    let result = handle.fetch(fetch).await;
                    Done::Page {
                        entry,
                        sent,
                        result,
                    }
                }
                .boxed_local(),
            );
        }

        if in_flight.is_empty() {
            match wait {
                Some(d) => {
                    tokio::time::sleep(d.min(opts.max_wait)).await;
                    continue;
                }
                None if st.frontier.is_empty() || st.budget_spent => break,
                None => {
                    // Not reached: every frontier slot in use belongs to a future in flight.
                    tracing::error!(
                        queued = st.frontier.len(),
                        "follow: frontier busy with nothing in flight; stopping"
                    );
                    break;
                }
            }
        }

        let done = match wait {
            Some(d) => {
                let sleep = pin!(tokio::time::sleep(d.min(opts.max_wait)));
                match select(in_flight.next(), sleep).await {
                    Either::Left((done, _)) => done,
                    Either::Right(((), _)) => None,
                }
            }
            None => in_flight.next().await,
        };
        let Some(done) = done else {
            continue;
        };
        let now = Instant::now();
        match done {
            Done::Robots {
                origin,
                host,
                result,
            } => {
                st.robots_in_flight.remove(&origin);
                let failed = match &result {
                    Ok(r) => {
                        st.totals.requests += u64::from(r.attempts);
                        st.robots.on_fetched(&origin, r.status, &r.body, now);
                        r.status == 429 || r.status >= 500
                    }
                    Err(e) => {
                        st.totals.requests += u64::from(e.attempts);
                        st.robots.on_network_error(&origin, now);
                        true
                    }
                };
                if failed {
                    let n = st.robots_failures.entry(origin.clone()).or_default();
                    *n += 1;
                    if *n >= opts.max_robots_failures {
                        tracing::warn!(%origin, failures = *n, "robots.txt unreachable; skipping the origin");
                        st.robots_gave_up.insert(origin.clone());
                    }
                } else {
                    st.robots_failures.remove(&origin);
                    st.apply_robots_delay(&origin, &host, now);
                }
                for e in st.stash.remove(&origin).unwrap_or_default() {
                    st.frontier.push(e.url, e.depth, e.parent);
                }
            }
            Done::Page {
                entry,
                sent,
                result,
            } => {
                let host = host_key(&entry.url).to_owned();
                st.frontier.done(&host);
                if let Some(n) = st.host_in_flight.get_mut(&host) {
                    *n = n.saturating_sub(1);
                }
                if let Some(d) = st.delays.get(&host) {
                    st.frontier.set_next(&host, now + *d);
                }
                st.totals.fetched += 1;
                let parent = entry.parent.as_ref().map(Url::to_string);
                let (record, answer) = match result {
                    Ok(r) => {
                        st.totals.requests += u64::from(r.attempts);
                        let ok = (200..300).contains(&r.status);
                        st.totals.ok += u64::from(ok);
                        let links = if c.follow && ok && is_html(&r.headers) {
                            st.enqueue_links(&entry, r.final_url.as_deref(), &r.body)
                        } else {
                            Vec::new()
                        };
                        let record = FollowRecord {
                            url: entry.url.to_string(),
                            status: Some(r.status),
                            exit: Some(String::from(&*r.exit)),
                            attempts: r.attempts,
                            elapsed_ms: millis(r.elapsed),
                            bytes: r.body.len() as u64,
                            wire_bytes: r.wire_bytes,
                            error: None,
                            depth: entry.depth,
                            parent,
                            skipped: None,
                            new_links: u32::try_from(links.len()).unwrap_or(u32::MAX),
                            links,
                            throttled: r.throttled,
                        };
                        (record, Some(r))
                    }
                    Err(e) => {
                        st.totals.requests += u64::from(e.attempts);
                        st.totals.failed += 1;
                        let record = FollowRecord {
                            url: entry.url.to_string(),
                            status: None,
                            exit: e.exit.as_deref().map(String::from),
                            attempts: e.attempts,
                            elapsed_ms: millis(sent.elapsed()),
                            bytes: 0,
                            wire_bytes: 0,
                            error: Some(format!("{}: {}", e.kind.as_str(), e.message)),
                            depth: entry.depth,
                            parent,
                            skipped: None,
                            new_links: 0,
                            links: Vec::new(),
                            throttled: e.throttled,
                        };
                        (record, None)
                    }
                };
                on_record(record, answer);
            }
        }
    }
    Ok(st.totals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_content_types() {
        let h = |v: &'static str| {
            let mut m = HeaderMap::new();
            m.insert(
                awc::http::header::CONTENT_TYPE,
                awc::http::header::HeaderValue::from_static(v),
            );
            m
        };
        assert!(is_html(&h("text/html; charset=utf-8")));
        assert!(is_html(&h(" TEXT/HTML")));
        assert!(is_html(&h("application/xhtml+xml")));
        assert!(!is_html(&h("text/plain")));
        assert!(!is_html(&HeaderMap::new()));
    }

    #[test]
    fn options_from_settings() {
        let mut s = Settings::with_exits(vec![]);
        s.crawler.user_agent = "mybot/2.0 (+https://x)".into();
        s.crawler.concurrency = 7;
        s.crawl.robots_ttl_ms = 5_000;
        let o = FollowOptions::from_settings(&s);
        assert_eq!(o.robots_token, "mybot");
        assert_eq!(o.concurrency, 7);
        assert_eq!(o.robots_policy.ttl, Duration::from_secs(5));
        s.crawl.deny = vec!["(".into()];
        assert_eq!(build_scope(&s.crawl).unwrap_err().key, "crawl.deny[0]");
    }
}
