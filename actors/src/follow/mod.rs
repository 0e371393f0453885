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
//! - **Sitemaps** (`sitemaps.rs`): the sitemaps in [`FollowOptions::sitemaps`] and, with
//!   `[crawl] sitemaps`, those named by the `Sitemap:` lines of each robots.txt fetched,
//!   are read once each (indexes name further sitemaps; gzip'd ones are decompressed
//!   within `crawler.max_body_bytes`); the URLs they list on their own host join the
//!   frontier at depth 0 through scope and dedupe, like links, and keep their
//!   `<lastmod>` for their record. Sitemap fetches get no record of their own: they are
//!   counted ([`FollowTotals::sitemap_fetches`]) and a failure is logged.
//! - **Private addresses**: a link (or a sitemap URL) found on an answer that came from a
//!   public address is fetched with [`Fetch::found_on_public`], so it may not lead to a
//!   private address ([`FetchResponse::peer_private`]); seeds and `--sitemap` URLs are
//!   trusted. A refused URL gets a record with the error `"private address refused"`.
//! - **Waiting** is a tokio sleep until the frontier's next ready time, capped at
//!   [`FollowOptions::max_wait`], raced against the next completion: no busy loop.
//!
//! Everything runs on the calling task (no spawn); the futures in flight borrow `handle`.

mod record;
mod sitemaps;
mod state;

use std::pin::pin;
use std::time::{Duration, Instant};

use exitcrawl::config::{CrawlSettings, Settings};
use exitcrawl::discover::robots::{origin_key, robots_url};
use exitcrawl::discover::{
    host_key, normalize, Entry, Pop, RobotsCache, RobotsPolicy, RobotsState,
};
use futures_util::future::{select, Either, FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};

pub use record::{FollowError, FollowRecord, FollowTotals, PendingLink, Resume, SkipReason};
use state::{is_html, Done, State};

use crate::crawler::CrawlerHandle;
use crate::messages::{Fetch, FetchErrorKind, FetchResponse};

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
    /// Sitemaps to seed the crawl from (given by the user: trusted, and their hosts are
    /// in scope like seeds'). Default none.
    pub sitemaps: Vec<String>,
    /// Largest sitemap once decompressed, bytes (`crawler.max_body_bytes`).
    pub max_sitemap_bytes: u64,
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
            sitemaps: Vec::new(),
            max_sitemap_bytes: s.crawler.max_body_bytes,
        }
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
/// [`Scope::check`]: exitcrawl::discover::Scope::check
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
    let robots = RobotsCache::new(&opts.robots_token, opts.robots_policy);
    let mut crawl = Crawl {
        handle,
        opts,
        st: State::new(c, robots)?,
        in_flight: FuturesUnordered::new(),
    };
    if !c.robots {
        tracing::warn!(
            "robots.txt is IGNORED for this crawl ([crawl] robots = false / --ignore-robots): \
             disallowed paths and Crawl-delay will not be honoured"
        );
    }
    crawl.start(seeds, resume, &mut on_record);
    loop {
        let wait = crawl.hand_out(&mut on_record);
        if crawl.in_flight.is_empty() {
            match wait {
                Some(d) => {
                    tokio::time::sleep(d.min(opts.max_wait)).await;
                    continue;
                }
                None if crawl.st.frontier.is_empty() || crawl.st.budget_spent => break,
                None => {
                    // Not reached: every frontier slot in use belongs to a future in flight.
                    tracing::error!(
                        queued = crawl.st.frontier.len(),
                        "follow: frontier busy with nothing in flight; stopping"
                    );
                    break;
                }
            }
        }
        let done = match wait {
            Some(d) => {
                let sleep = pin!(tokio::time::sleep(d.min(opts.max_wait)));
                match select(crawl.in_flight.next(), sleep).await {
                    Either::Left((done, _)) => done,
                    Either::Right(((), _)) => None,
                }
            }
            None => crawl.in_flight.next().await,
        };
        let Some(done) = done else {
            continue;
        };
        match done {
            Done::Robots {
                origin,
                host,
                result,
            } => crawl.on_robots(origin, &host, result, &mut on_record),
            Done::Page {
                entry,
                sent,
                result,
            } => crawl.on_page(entry, sent, result, &mut on_record),
            Done::Sitemap { url, result } => crawl.on_sitemap(url, result),
        }
    }
    Ok(crawl.st.totals)
}

/// One crawl in progress: its state and the fetches in flight, which borrow the handle.
struct Crawl<'h> {
    handle: &'h CrawlerHandle,
    opts: &'h FollowOptions,
    st: State,
    in_flight: FuturesUnordered<LocalBoxFuture<'h, Done>>,
}

type OnRecord<'r> = dyn FnMut(FollowRecord, Option<FetchResponse>) + 'r;

impl<'h> Crawl<'h> {
    /// Seeds, `--sitemap`s, then what an earlier run left pending, into the crawl.
    fn start(&mut self, seeds: Vec<String>, resume: Resume, on_record: &mut OnRecord<'_>) {
        let st = &mut self.st;
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
                    on_record(FollowRecord::invalid_seed(s, e.to_string()), None);
                }
            }
        }
        for s in &self.opts.sitemaps {
            match normalize(s) {
                Ok(u) => {
                    self.st.scope = std::mem::take(&mut self.st.scope).seed(&u);
                    self.fetch_sitemap(u, false);
                }
                Err(e) => {
                    tracing::warn!(sitemap = %exitcrawl::redact::Masked(s), error = %e, "sitemap: not an http(s) URL");
                    self.st.totals.sitemap_errors += 1;
                }
            }
        }
        let st = &mut self.st;
        for link in resume.pending {
            let Ok(u) = normalize(&link.url) else {
                continue;
            };
            // Seeds define the scope, so a link that was in scope then is checked again.
            if st.scope.check(&u, link.depth) != exitcrawl::discover::Verdict::In
                || !st.seen.insert(&u)
            {
                continue;
            }
            if st.budget_spent {
                st.totals.skipped_budget += 1;
                continue;
            }
            let parent = link.parent.as_deref().and_then(|p| normalize(p).ok());
            let from_public = st.resumed_from_public(parent.as_ref());
            st.frontier.push_entry(Entry {
                url: u,
                depth: link.depth,
                parent,
                from_public,
            });
        }
    }

    /// Hand out ready URLs while there is room; how long until the next is ready, if
    /// that is what stopped it.
    fn hand_out(&mut self, on_record: &mut OnRecord<'_>) -> Option<Duration> {
        let concurrency = self.opts.concurrency.max(1);
        while self.in_flight.len() < concurrency && !self.st.budget_spent {
            let now = Instant::now();
            let entry = match self.st.frontier.pop(now) {
                Pop::Ready(e) => e,
                Pop::Wait(d) => return Some(d),
                Pop::Busy | Pop::Empty => return None,
            };
            let host = host_key(&entry.url).to_owned();
            if self.opts.crawl.robots && !self.robots_gate(entry.clone(), &host, now, on_record) {
                continue;
            }
            let busy = self.st.host_in_flight.get(&host).copied().unwrap_or(0);
            if busy > 0 && self.st.delays.contains_key(&host) {
                // Crawl-delay hosts are serial; the next send is timed from the answer.
                self.st.frontier.requeue(entry);
                continue;
            }
            if !self.st.scope.take_page() {
                self.st.frontier.release(&host);
                self.st.totals.skipped_budget += 1;
                self.st.spend_budget();
                return None;
            }
            *self.st.host_in_flight.entry(host).or_default() += 1;
            let fetch = Fetch::get(entry.url.to_string()).found_on_public(entry.from_public);
            let handle = self.handle;
            self.in_flight.push(
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
        None
    }

    /// robots.txt for a popped entry: `true` when it may be fetched now; otherwise the
    /// entry was recorded, set aside or put back.
    fn robots_gate(
        &mut self,
        entry: Entry,
        host: &str,
        now: Instant,
        on_record: &mut OnRecord<'_>,
    ) -> bool {
        let st = &mut self.st;
        let origin = origin_key(&entry.url);
        if st.robots_gave_up.contains(&origin) {
            st.frontier.release(host);
            st.totals.skipped_robots += 1;
            let why = "robots_unavailable: robots.txt could not be fetched";
            on_record(FollowRecord::skipped(&entry, Some(why.into())), None);
            return false;
        }
        match st.robots.lookup(&origin, now) {
            RobotsState::Known(r) if r.allowed(&entry.url) => true,
            RobotsState::Known(_) => {
                st.frontier.release(host);
                st.totals.skipped_robots += 1;
                on_record(FollowRecord::skipped(&entry, None), None);
                false
            }
            RobotsState::Fetch => {
                st.frontier.release(host);
                st.robots_in_flight.insert(origin.clone());
                st.totals.robots_fetches += 1;
                // robots.txt of a host a public page led to is no more trusted than the page.
                let fetch = Fetch::get(robots_url(&entry.url).to_string())
                    .found_on_public(entry.from_public);
                st.stash.entry(origin.clone()).or_default().push(entry);
                let (handle, host) = (self.handle, host.to_owned());
                self.in_flight.push(
                    async move {
                        Done::Robots {
                            result: handle.fetch(fetch).await,
                            origin,
                            host,
                        }
                    }
                    .boxed_local(),
                );
                false
            }
            RobotsState::Wait(until) => {
                if st.robots_in_flight.contains(&origin) {
                    st.frontier.release(host);
                    st.stash.entry(origin).or_default().push(entry);
                } else {
                    // robots.txt failed: nothing from this origin until the retry.
                    st.frontier.requeue(entry);
                    st.frontier.set_next(host, until);
                }
                false
            }
        }
    }

    fn on_robots(
        &mut self,
        origin: String,
        host: &str,
        result: Result<FetchResponse, crate::FetchError>,
        on_record: &mut OnRecord<'_>,
    ) {
        let now = Instant::now();
        let st = &mut self.st;
        st.robots_in_flight.remove(&origin);
        let stashed = st.stash.remove(&origin).unwrap_or_default();
        if let Err(e) = &result {
            if e.kind == FetchErrorKind::PrivateAddress {
                // Nothing was sent: the entries led there from public pages are refused,
                // the others ask again for robots.txt themselves.
                st.robots.forget(&origin);
                for entry in stashed {
                    if entry.from_public {
                        tracing::warn!(url = %exitcrawl::redact::Masked(entry.url.as_str()), why = %e.message, "private address refused");
                        st.totals.fetched += 1;
                        st.totals.failed += 1;
                        on_record(FollowRecord::refused(&entry), None);
                    } else {
                        st.frontier.push_entry(entry);
                    }
                }
                return;
            }
        }
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
            if *n >= self.opts.max_robots_failures {
                tracing::warn!(%origin, failures = *n, "robots.txt unreachable; skipping the origin");
                st.robots_gave_up.insert(origin.clone());
            }
        } else {
            st.robots_failures.remove(&origin);
            st.apply_robots_delay(&origin, host, now);
        }
        for e in stashed {
            self.st.frontier.push_entry(e);
        }
        if let (false, true, Ok(r)) = (failed, self.opts.crawl.sitemaps, &result) {
            let from_public = r.peer_private == Some(false);
            for url in self.robots_sitemaps(&origin, now) {
                self.fetch_sitemap(url, from_public);
            }
        }
    }

    fn on_page(
        &mut self,
        entry: Entry,
        sent: Instant,
        result: Result<FetchResponse, crate::FetchError>,
        on_record: &mut OnRecord<'_>,
    ) {
        let now = Instant::now();
        let st = &mut self.st;
        let host = host_key(&entry.url).to_owned();
        st.frontier.done(&host);
        if let Some(n) = st.host_in_flight.get_mut(&host) {
            *n = n.saturating_sub(1);
        }
        if let Some(d) = st.delays.get(&host) {
            st.frontier.set_next(&host, now + *d);
        }
        st.totals.fetched += 1;
        let lastmod = st.lastmods.remove(entry.url.as_str());
        let (record, answer) = match result {
            Ok(r) => {
                st.totals.requests += u64::from(r.attempts);
                let ok = (200..300).contains(&r.status);
                st.totals.ok += u64::from(ok);
                let links = if self.opts.crawl.follow && ok && is_html(&r.headers) {
                    let from_public = r.peer_private == Some(false);
                    st.enqueue_links(&entry, r.final_url.as_deref(), &r.body, from_public)
                } else {
                    Vec::new()
                };
                (FollowRecord::answered(&entry, &r, links), Some(r))
            }
            Err(e) => {
                st.totals.requests += u64::from(e.attempts);
                st.totals.failed += 1;
                if e.kind == FetchErrorKind::PrivateAddress {
                    tracing::warn!(url = %exitcrawl::redact::Masked(entry.url.as_str()), why = %e.message, "private address refused");
                }
                (FollowRecord::failed(&entry, &e, sent.elapsed()), None)
            }
        };
        on_record(FollowRecord { lastmod, ..record }, answer);
    }
}

#[cfg(test)]
mod tests {
    use super::state::build_scope;
    use super::*;
    use http::HeaderMap;

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
