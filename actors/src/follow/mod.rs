//! Crawling, not only fetching: the loop that follows links from seed URLs.
//!
//! Every decision (what to fetch next and when, scope, dedupe, budget, robots.txt,
//! Crawl-delay, sitemaps, resume) is made by the core's state machine,
//! [`exitcrawl::discover::Crawl`], so it can be tested without a server; [`crawl`]
//! only carries its answers out with the crawler's own fetches, feeds the results back,
//! and turns them into records. The data flow:
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
//!   host's URLs wait in the frontier meanwhile. 4xx → allow all; 5xx, 429 and network
//!   errors → nothing is fetched from the origin, the fetch is retried with the
//!   [`RobotsCache`](exitcrawl::discover::RobotsCache)'s doubling backoff, and after [`FollowOptions::max_robots_failures`]
//!   failures in a row its URLs are recorded as skipped (`"robots"`, with an error saying
//!   robots.txt was unreachable). Disallowed URLs become records with `skipped = "robots"`
//!   and are never fetched.
//! - **Crawl-delay** `d` makes the host serial (one fetch in flight) and spaces each send
//!   at least `d` after the previous answer *arrived* (and after the robots.txt answer),
//!   which bounds the spacing the server sees from below by `d` even when the scheduler
//!   queues one request longer than the next. Hosts without a delay get
//!   `crawl.per_host_concurrency` fetches in flight and the limiter's pacing.
//! - **Links** are taken from 2xx answers whose `Content-Type` is `text/html` (or
//!   `application/xhtml+xml`), resolved against the page's URL and `<base href>`.
//! - **Redirects** are not followed inside a page's fetch ([`Fetch::no_redirects`]): a
//!   redirect is the page's answer and record, and its target a page of its own, queued
//!   through robots.txt, the scope and the dedupe like a link
//!   (`exitcrawl::discover::crawl::Crawl::on_page`), fetched through the exit that read
//!   the redirect and without the configured credentials once the chain has left its
//!   first origin. A page that redirects to itself is asked again within its one fetch,
//!   once its host's Crawl-delay allows.
//! - **Records**: one [`FollowRecord`] per URL that was fetched or skipped by robots.
//!   Links that are out of scope, already seen, or past the page budget get no record;
//!   they are only counted in [`FollowTotals`] (one count per link *occurrence* for
//!   scope and dedupe, so a nav-bar link on 100 pages counts 100 times).
//! - **Sitemaps** (`sitemaps.rs`): the sitemaps in [`FollowOptions::sitemaps`] and, with
//!   `[crawl] sitemaps`, those named by the `Sitemap:` lines of each robots.txt fetched,
//!   are read once each (indexes name further sitemaps; gzip'd ones are decompressed
//!   within [`FollowOptions::max_sitemap_bytes`]). A sitemap fetch is handed out by the
//!   core as a page is: after its origin's robots.txt (a disallowed one is logged,
//!   counted in [`FollowTotals::sitemap_errors`] and not fetched), within the
//!   concurrency, the per-host cap and the Crawl-delay; its redirects are hops the core
//!   queues, each through robots.txt again. The URLs they list on their own host join the
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

use std::collections::HashMap;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitcrawl::config::{CrawlSettings, Settings};
use exitcrawl::discover::crawl::{Action, Answer, Crawl, Next, Notice, Request};
use exitcrawl::discover::RobotsPolicy;
use exitcrawl::redact::Masked;
use futures_util::future::{select, Either, FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};

pub use exitcrawl::discover::crawl::{
    CrawlError as FollowError, CrawlTotals as FollowTotals, PendingLink, Resume,
};
pub use record::{FollowRecord, SkipReason};
use state::{outcome, Again, Chain, Done};

use crate::crawler::CrawlerHandle;
use crate::messages::{Fetch, FetchErrorKind, FetchResponse};

/// The largest sitemap the protocol allows, uncompressed (sitemaps.org: 50 MB,
/// 52,428,800 bytes): a sitemap fetch may bring that much, whatever
/// `crawler.max_body_bytes` allows a page.
pub const SITEMAP_MAX_BYTES: u64 = 52_428_800;

/// How [`crawl`] crawls: the `[crawl]` table plus what comes from elsewhere. Made with
/// [`FollowOptions::from_settings`], then changed field by field.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FollowOptions {
    /// The `[crawl]` table (`follow = false`: fetch the seeds only, still obeying robots).
    pub crawl: CrawlSettings,
    /// Fetches in flight at once, pages, robots.txt and sitemaps together
    /// (`crawler.concurrency`).
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
    /// Largest sitemap, as it comes and once decompressed, bytes (default the protocol's
    /// 50 MB, [`SITEMAP_MAX_BYTES`], whatever `crawler.max_body_bytes` says).
    pub max_sitemap_bytes: u64,
    /// Kept up to date with the crawl's counters as it goes, if set: what a caller that
    /// stops the crawl (drops its future) reports. Default none.
    pub so_far: Option<std::rc::Rc<std::cell::RefCell<FollowTotals>>>,
    /// An earlier run to go on from (see [`crawl`]). Default none: a fresh crawl.
    pub resume: Option<Resume>,
    /// Redirects a page may take (`crawler.max_redirects`). The crawl follows them
    /// itself, each target a page of its own through robots.txt, the scope and the
    /// dedupe (see `exitcrawl::discover::crawl::Crawl::on_page`).
    pub max_redirects: u32,
}

impl FollowOptions {
    /// Options from loaded settings: `[crawl]`, `crawler.concurrency` and the robots token
    /// (`crawl.user_agent_token`, else the product token of `crawler.user_agent`).
    pub fn from_settings(s: &Settings) -> FollowOptions {
        FollowOptions {
            crawl: s.crawl.clone(),
            concurrency: s.crawler.concurrency.max(1) as usize,
            robots_token: exitcrawl::discover::robots::robots_token(
                &s.crawl,
                &s.crawler.user_agent,
            ),
            robots_policy: RobotsPolicy {
                ttl: s.crawl.robots_ttl(),
                ..RobotsPolicy::default()
            },
            max_robots_failures: 3,
            max_wait: Duration::from_secs(1),
            sitemaps: Vec::new(),
            max_sitemap_bytes: SITEMAP_MAX_BYTES,
            so_far: None,
            resume: None,
            max_redirects: s.crawler.max_redirects,
        }
    }
}

/// Crawl from `seeds` through `handle`, calling `on_record` once per fetched or
/// robots-skipped URL as results arrive, with the answer the record was made from (`None`
/// for robots-skipped URLs, invalid seeds and fetches without an answer: a caller that
/// keeps pages, like the `exitcrawl` program's WARC output, keeps them from there);
/// returns the counters when nothing is left.
///
/// Scope: seeds are always fetched (subject to robots.txt) and define the hosts/domains
/// of `same_host`/`same_domain`; discovered links go through [`Scope::check`], then the
/// seen-set, then the per-host frontier. See the module doc for robots and Crawl-delay.
/// With `crawl.robots = false` robots.txt is neither fetched nor obeyed (a warning is
/// logged; the caller should say so too).
///
/// With [`FollowOptions::resume`] set, the crawl goes on from an earlier run's records:
/// URLs in `resume.done` are not fetched again (seeds included), its pages count against
/// `max_pages`, and its pending links join the frontier (after the seeds) unless done.
/// Records and totals cover this run only, so appending them to the earlier ones gives
/// each URL one record.
///
/// [`Scope::check`]: exitcrawl::discover::Scope::check
///
/// Errors only for rules that do not compile (validated settings never do).
pub async fn crawl(
    handle: &CrawlerHandle,
    seeds: Vec<String>,
    mut opts: FollowOptions,
    mut on_record: impl FnMut(FollowRecord, Option<FetchResponse>),
) -> Result<FollowTotals, FollowError> {
    let resume = opts.resume.take().unwrap_or_default();
    let opts = &opts;
    // The crawl asks robots.txt itself (a disallowed link gets its record and never
    // takes a frontier slot), so its fetches skip the handle's own gate.
    let handle = &handle.polite(false);
    let robots = exitcrawl::discover::RobotsCache::new(&opts.robots_token, opts.robots_policy);
    let crawl = Crawl::new(&opts.crawl, robots)?
        .with_concurrency(opts.concurrency)
        .with_max_robots_failures(opts.max_robots_failures)
        .with_max_redirects(opts.max_redirects);
    let mut driver = Driver {
        handle,
        opts,
        crawl,
        in_flight: FuturesUnordered::new(),
        redirected_by: resumed_chains(&resume),
        sitemap_chains: HashMap::new(),
    };
    if !opts.crawl.robots {
        tracing::warn!(
            "robots.txt is IGNORED for this crawl ([crawl] robots = false / --ignore-robots): \
             disallowed paths and Crawl-delay will not be honoured"
        );
    }
    for a in driver.crawl.start(seeds, &opts.sitemaps, resume) {
        driver.act(a, None, &mut on_record);
    }
    if let Some(s) = &opts.so_far {
        s.borrow_mut().clone_from(driver.crawl.totals());
    }
    loop {
        let wait = match driver.hand_out(&mut on_record) {
            Next::Wait(d) => Some(d),
            Next::Idle => None,
            _ => break,
        };
        let done = match wait {
            Some(d) if driver.in_flight.is_empty() => {
                tokio::time::sleep(d.min(opts.max_wait)).await;
                continue;
            }
            Some(d) => {
                let sleep = pin!(tokio::time::sleep(d.min(opts.max_wait)));
                match select(driver.in_flight.next(), sleep).await {
                    Either::Left((done, _)) => done,
                    Either::Right(((), _)) => None,
                }
            }
            None => driver.in_flight.next().await,
        };
        if let Some(done) = done {
            driver.on_done(done, &mut on_record);
        }
        if let Some(s) = &opts.so_far {
            s.borrow_mut().clone_from(driver.crawl.totals());
        }
    }
    Ok(driver.crawl.into_totals())
}

/// One crawl in progress: the core's decisions and the fetches in flight, which borrow
/// the handle.
struct Driver<'h> {
    handle: &'h CrawlerHandle,
    opts: &'h FollowOptions,
    crawl: Crawl,
    in_flight: FuturesUnordered<LocalBoxFuture<'h, Done>>,
    /// Redirect targets queued, and the chain that named them (see [`Chain`]).
    redirected_by: HashMap<String, Chain>,
    /// The same for sitemaps' redirects (one entry at most for each sitemap read, of
    /// which a crawl reads a bounded number).
    sitemap_chains: HashMap<String, Chain>,
}

type OnRecord<'r> = dyn FnMut(FollowRecord, Option<FetchResponse>) + 'r;

impl<'h> Driver<'h> {
    /// Carry out what the crawl hands out until it says to wait ([`Next::Wait`],
    /// [`Next::Idle`]) or that it is over ([`Next::Done`]).
    fn hand_out(&mut self, on_record: &mut OnRecord<'_>) -> Next {
        loop {
            match self.crawl.next(crate::clock::now()) {
                Next::Act(a) => self.act(a, None, on_record),
                wait @ (Next::Wait(_) | Next::Idle) => return wait,
                Next::Done => {
                    if self.crawl.queued() > 0 && !self.crawl.budget_spent() {
                        // Not reached: every frontier slot in use belongs to a fetch in flight.
                        tracing::error!(
                            queued = self.crawl.queued(),
                            "follow: frontier busy with nothing in flight; stopping"
                        );
                    }
                    return Next::Done;
                }
            }
        }
    }

    /// Carry out one action. `why`: what refused the robots.txt fetch that led to an
    /// [`Action::Refused`], for its log line.
    fn act(&mut self, a: Action, why: Option<&str>, on_record: &mut OnRecord<'_>) {
        match a {
            Action::Fetch(r) => self.send(r),
            Action::Skipped { entry, error } => {
                self.redirected_by.remove(entry.url.as_str());
                on_record(FollowRecord::skipped(&entry, error.map(String::from)), None);
            }
            Action::Refused(entry) => {
                self.redirected_by.remove(entry.url.as_str());
                tracing::warn!(url = %Masked(entry.url.as_str()), why = %why.unwrap_or_default(), "private address refused");
                on_record(FollowRecord::refused(&entry), None);
            }
            Action::Unreachable { entry, error } => {
                self.redirected_by.remove(entry.url.as_str());
                on_record(FollowRecord::unreachable(&entry, error), None);
            }
            Action::InvalidSeed { url, error } => {
                on_record(FollowRecord::invalid_seed(url, error), None);
            }
            Action::Notice(n) => {
                if let Notice::SitemapSkipped { url, .. } = &n {
                    self.sitemap_chains.remove(url.as_str());
                }
                log(&n);
            }
        }
    }

    /// Send a fetch; its completion comes back as a [`Done`].
    fn send(&mut self, r: Request) {
        let handle = self.handle;
        let fut = match r {
            Request::Page(entry) => {
                let chain = self.redirected_by.remove(entry.url.as_str());
                let sent = crate::clock::now();
                page_fetch(handle, entry, sent, chain, Again::default())
            }
            Request::Robots {
                origin,
                host,
                url,
                from_public,
            } => {
                // A throttled robots.txt waits for its host as a page does (a 429 means
                // later); only a host given up on leaves it unavailable. Its first
                // 500 KiB are read (RFC 9309 §2.5), however long it is.
                let fetch = Fetch::get(url.to_string())
                    .found_on_public(from_public)
                    .first_bytes(exitcrawl::discover::robots::MAX_ROBOTS_BYTES as u64)
                    .follow_at_least(exitcrawl::discover::robots::MIN_REDIRECTS);
                async move {
                    Done::Robots {
                        result: handle.fetch(fetch).await,
                        origin,
                        host,
                    }
                }
                .boxed_local()
            }
            Request::Sitemap { url, from_public } => {
                // Its redirects are the crawl's to follow, each hop through robots.txt
                // and the host's pacing, as a page's are.
                let mut fetch = Fetch::get(url.as_str())
                    .found_on_public(from_public)
                    .body_limit(self.opts.max_sitemap_bytes)
                    .no_redirects();
                let chain = self.sitemap_chains.remove(url.as_str());
                if let Some(c) = &chain {
                    fetch = fetch.off_origin(c.left_origin);
                    if let Some(exit) = &c.exit {
                        fetch = fetch.prefer_first(&**exit);
                    }
                }
                async move {
                    Done::Sitemap {
                        result: handle.fetch(fetch).await,
                        url,
                        chain,
                    }
                }
                .boxed_local()
            }
        };
        self.in_flight.push(fut);
    }

    /// A fetch completed: the crawl hears of it, its record (for pages) is handed on.
    fn on_done(&mut self, done: Done, on_record: &mut OnRecord<'_>) {
        match done {
            Done::Robots {
                origin,
                host,
                result,
            } => {
                let now = crate::clock::now();
                let answer = match &result {
                    // The site answered, with throttles only: unavailable, not unreachable.
                    Err(e) if e.kind == FetchErrorKind::ThrottledOut => Ok(Answer {
                        status: 429,
                        attempts: e.attempts,
                        body: &[],
                        final_url: None,
                        location: None,
                        html: false,
                        from_public: true,
                    }),
                    _ => outcome(&result),
                };
                let actions = self.crawl.on_robots(&origin, &host, answer, now);
                let why = result.as_ref().err().map(|e| e.message.as_str());
                for a in actions {
                    self.act(a, why, on_record);
                }
            }
            Done::Page {
                entry,
                sent,
                result,
                chain,
                again,
            } => self.on_page(entry, (sent, chain, again), result, on_record),
            Done::Sitemap { url, result, chain } => {
                if let Ok(r) = &result {
                    self.sitemap_hop(&url, r, chain);
                }
                for a in self.on_sitemap(&url, &result) {
                    self.act(a, None, on_record);
                }
            }
        }
    }

    /// A page's answer. One that redirects to the page itself (a cookie set, then the page
    /// again) is asked again, through the exit that read it, up to `max_redirects` times,
    /// within the page's one fetch and one record: the crawl, to which it is seen
    /// already, would end it there. The host's Crawl-delay, if any, is waited out first
    /// (the page still holds its host's one fetch, so nothing else goes there meanwhile).
    /// Otherwise the crawl hears of it; a redirect's target is queued with its chain.
    fn on_page(
        &mut self,
        entry: exitcrawl::discover::Entry,
        (sent, chain, again): (Instant, Option<Chain>, Again),
        mut result: Result<FetchResponse, crate::FetchError>,
        on_record: &mut OnRecord<'_>,
    ) {
        let left = chain.as_ref().is_some_and(|c| c.left_origin);
        let to_itself = result.as_ref().ok().and_then(|r| {
            let target = r.redirect_target()?.ok()?;
            let same = exitcrawl::discover::normalize(target.as_str()).ok()? == entry.url;
            same.then(|| Arc::clone(&r.exit))
        });
        let mut error = None;
        // With no redirects to follow, a redirect to itself is the page's answer as any.
        if let Some(exit) = to_itself.filter(|_| self.opts.max_redirects > 0) {
            if again.times < self.opts.max_redirects {
                let (attempts, throttled) = result
                    .as_ref()
                    .map_or((0, 0), |r| (r.attempts, r.throttled));
                let again = Again {
                    times: again.times + 1,
                    attempts: again.attempts + attempts,
                    throttled: again.throttled + throttled,
                };
                let chain = Chain {
                    exit: Some(exit),
                    left_origin: left,
                };
                let delay = self
                    .crawl
                    .crawl_delay(exitcrawl::discover::host_key(&entry.url));
                let fut = page_fetch(self.handle, entry, sent, Some(chain), again);
                self.in_flight.push(match delay {
                    Some(d) => tokio::time::sleep(d).then(|()| fut).boxed_local(),
                    None => fut,
                });
                return;
            }
            error = Some(format!(
                "too_many_redirects: too many redirects: more than {} (last Location: {})",
                self.opts.max_redirects, entry.url
            ));
        }
        match &mut result {
            Ok(r) => {
                r.attempts += again.attempts;
                r.throttled += again.throttled;
            }
            Err(e) => {
                e.attempts += again.attempts;
                e.throttled += again.throttled;
            }
        }
        let page = self
            .crawl
            .on_page(&entry, outcome(&result), crate::clock::now());
        if let (Ok(r), [target]) = (&result, page.links.as_slice()) {
            if r.redirect_target().is_some() {
                let moved = url::Url::parse(target).is_ok_and(|t| t.origin() != entry.url.origin());
                let chain = Chain {
                    exit: Some(Arc::clone(&r.exit)),
                    left_origin: left || moved,
                };
                self.redirected_by.insert(target.clone(), chain);
            }
        }
        let (mut record, answer) = match result {
            Ok(r) => (FollowRecord::answered(&entry, &r, page.links), Some(r)),
            Err(e) => {
                if e.kind == FetchErrorKind::PrivateAddress {
                    tracing::warn!(url = %Masked(entry.url.as_str()), why = %e.message, "private address refused");
                }
                (FollowRecord::failed(&entry, &e, sent.elapsed()), None)
            }
        };
        let error = error.or(page.error).or(record.error.take());
        let lastmod = page.lastmod;
        on_record(
            FollowRecord {
                lastmod,
                error,
                ..record
            },
            answer,
        );
    }
}

/// The chains of the redirect targets an earlier run left pending: their exits are not
/// in the records, but whether they left their first origin is (the target's origin
/// against its page's), so the configured credentials stay behind as they would have.
fn resumed_chains(resume: &Resume) -> HashMap<String, Chain> {
    let origin = |u: &str| url::Url::parse(u).ok().map(|u| u.origin());
    resume
        .pending
        .iter()
        .filter(|l| l.redirect)
        .filter_map(|l| {
            let page = l.parent.as_deref()?;
            let url = exitcrawl::discover::normalize(&l.url).ok()?;
            let left = origin(url.as_str()) != origin(page);
            let chain = Chain {
                exit: None,
                left_origin: left,
            };
            Some((url.to_string(), chain))
        })
        .collect()
}

/// Fetch the page `entry`, sent first at `sent`, reached by `chain` (its next hop through
/// that chain's exit, without credentials once it left its first origin); `again`: its
/// asks so far for redirecting to itself (see [`Driver::on_page`]).
fn page_fetch<'h>(
    handle: &'h CrawlerHandle,
    entry: exitcrawl::discover::Entry,
    sent: Instant,
    chain: Option<Chain>,
    again: Again,
) -> LocalBoxFuture<'h, Done> {
    let mut fetch = Fetch::get(entry.url.to_string())
        .found_on_public(entry.from_public)
        .no_redirects();
    if let Some(c) = &chain {
        fetch = fetch.off_origin(c.left_origin);
        if let Some(exit) = &c.exit {
            fetch = fetch.prefer_first(&**exit);
        }
    }
    async move {
        let result = handle.fetch(fetch).await;
        Done::Page {
            entry,
            sent,
            result,
            chain,
            again,
        }
    }
    .boxed_local()
}

/// The log line for a notice from the crawl.
fn log(n: &Notice) {
    match n {
        Notice::SitemapUrlInvalid { url, error } => {
            tracing::warn!(sitemap = %Masked(url), error = %error, "sitemap: not an http(s) URL");
        }
        Notice::SitemapFailed { url, why } => {
            tracing::warn!(sitemap = %Masked(url.as_str()), error = %why, "sitemap could not be read");
        }
        Notice::SitemapMalformed { url, why, kept } => {
            tracing::warn!(sitemap = %Masked(url.as_str()), error = %why, kept = *kept, "sitemap: malformed; the entries before the fault are used");
        }
        Notice::SitemapSkipped { url, why } => {
            tracing::warn!(sitemap = %Masked(url.as_str()), why = %why, "sitemap not fetched");
        }
        Notice::RobotsUnreachable { origin, failures } => {
            tracing::warn!(%origin, failures = *failures, "robots.txt unreachable; skipping the origin");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::state::is_html;
    use super::*;
    use exitcrawl::discover::crawl::build_scope;
    use http::HeaderMap;

    #[test]
    fn html_content_types() {
        let h = |v: &'static str| {
            let mut m = HeaderMap::new();
            m.insert(
                http::header::CONTENT_TYPE,
                http::header::HeaderValue::from_static(v),
            );
            crate::Headers::from(m)
        };
        assert!(is_html(&h("text/html; charset=utf-8")));
        assert!(is_html(&h(" TEXT/HTML")));
        assert!(is_html(&h("application/xhtml+xml")));
        assert!(!is_html(&h("text/plain")));
        assert!(!is_html(&crate::Headers::new()));
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
