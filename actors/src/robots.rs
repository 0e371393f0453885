//! robots.txt for [`crate::CrawlerHandle::fetch`] (unless the handle opted out with
//! [`crate::CrawlerHandle::polite`]): one cache per crawler, shared by every clone of the
//! handle, answering "may this URL be fetched?" before any request goes to it.
//!
//! The policy is the core's [`RobotsCache`] (RFC 9309: 2xx parsed, 4xx allows all, 429,
//! 5xx and no answer disallow all until a retry with backoff; kept `[crawl] robots_ttl_ms`),
//! read with the runtime's clock. What this module adds is the I/O around it:
//! - the first fetch to an origin fetches its `/robots.txt` through the crawler itself
//!   (paced, retried and counted like any request, redirects followed as any fetch's);
//!   the origin's other fetches wait for that one answer instead of asking again;
//! - a disallowed URL (or one of an origin whose robots.txt is unavailable) ends with
//!   [`FetchErrorKind::Robots`] and is never sent;
//! - a Crawl-delay `d` makes the origin serial, each send at least `d` after the previous
//!   answer (and after robots.txt's);
//! - a redirect is followed here, hop by hop, each hop admitted as the fetch was (see
//!   [`RobotsGate::follow`]), not inside the exit, which would send to a disallowed path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use exitcrawl::config::Settings;
use exitcrawl::discover::robots::{origin_key, robots_url, MAX_ROBOTS_BYTES, MIN_REDIRECTS};
use exitcrawl::discover::{RobotsCache, RobotsPolicy, RobotsState};
use tokio::sync::{watch, OwnedMutexGuard};
use url::{Position, Url};

use crate::clock;
use crate::messages::{
    ChainStep, Fetch, FetchError, FetchErrorKind, FetchResponse, RedirectChain, RedirectHop,
};

/// The robots.txt cache of one crawler.
pub(crate) struct RobotsGate {
    token: String,
    /// Redirects a fetch may take, each asked of robots.txt (`crawler.max_redirects`).
    max_redirects: u32,
    inner: Mutex<Inner>,
}

struct Inner {
    cache: RobotsCache,
    /// Origins whose robots.txt fetch is in flight: `true` is sent when it ends.
    fetching: HashMap<String, watch::Receiver<bool>>,
    /// Why an origin's last robots.txt fetch failed.
    failures: HashMap<String, String>,
    /// Crawl-delay origins: when the next send may go, behind a fair lock.
    turns: HashMap<String, Arc<tokio::sync::Mutex<Option<Instant>>>>,
}

/// Hand the Crawl-delay turn back once `result` is in.
fn answered(
    spacing: Option<Spacing>,
    result: Result<FetchResponse, FetchError>,
) -> Result<FetchResponse, FetchError> {
    if let Some(s) = spacing {
        s.answered();
    }
    result
}

/// What a fetch asked for that its redirect hops are made from.
struct Asked {
    method: http::Method,
    headers: Vec<(String, String)>,
    body: Option<bytes::Bytes>,
    region: Option<String>,
    max_body_bytes: Option<u64>,
    truncate_body: bool,
    max_throttles: Option<u32>,
    /// The fetch itself came off its chain's first origin: its credentials stayed
    /// behind, and so they do on every hop.
    left_origin: bool,
}

impl Asked {
    fn of(f: &Fetch) -> Asked {
        Asked {
            method: f.method.clone(),
            headers: f.headers.clone(),
            body: f.body.clone(),
            region: f.region.clone(),
            max_body_bytes: f.max_body_bytes,
            truncate_body: f.truncate_body,
            max_throttles: f.max_throttles,
            left_origin: f.left_origin,
        }
    }

    /// The fetch for `hop` (see [`RobotsGate::follow`]).
    fn hop(&mut self, hop: &RedirectHop) -> Fetch {
        if !matches!(hop.status, 307 | 308) {
            if self.method != http::Method::GET && self.method != http::Method::HEAD {
                self.method = http::Method::GET;
            }
            self.body = None;
        }
        let left = hop.left_origin || self.left_origin;
        if left {
            self.headers
                .retain(|(name, _)| !crate::exit::is_credential(name));
        }
        let mut f = hop.fetch().off_origin(left);
        f.method = self.method.clone();
        f.headers = self.headers.clone();
        f.body = self.body.clone();
        f.region = self.region.clone();
        f.max_body_bytes = self.max_body_bytes;
        f.truncate_body = self.truncate_body;
        f.max_throttles = self.max_throttles;
        f
    }
}

/// Where a URL stands with its origin's robots.txt.
enum Step {
    Allowed(Option<Duration>),
    Disallowed,
    Unavailable(String),
    Fetch(watch::Sender<bool>),
    Pending(watch::Receiver<bool>),
}

/// A Crawl-delay origin's turn: while held, no other fetch to the origin starts.
pub(crate) struct Spacing {
    next: OwnedMutexGuard<Option<Instant>>,
    delay: Duration,
}

impl Spacing {
    /// The answer is in: the origin's next send is `delay` from now.
    pub(crate) fn answered(mut self) {
        *self.next = Some(clock::now() + self.delay);
    }
}

impl RobotsGate {
    /// The gate of `[crawl] robots` (`None` when it is off).
    pub(crate) fn new(s: &Settings) -> Option<RobotsGate> {
        if !s.crawl.robots {
            return None;
        }
        let policy = RobotsPolicy {
            ttl: s.crawl.robots_ttl(),
            ..RobotsPolicy::default()
        };
        let token = exitcrawl::discover::robots::robots_token(&s.crawl, &s.crawler.user_agent);
        Some(RobotsGate {
            inner: Mutex::new(Inner {
                cache: RobotsCache::new(&token, policy),
                fetching: HashMap::new(),
                failures: HashMap::new(),
                turns: HashMap::new(),
            }),
            token,
            max_redirects: s.crawler.max_redirects,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `fetch` through `send` if robots.txt allows it (waiting for its Crawl-delay turn),
    /// else the error that ends it unsent; `send` makes the robots.txt fetch too. What
    /// `CrawlerHandle::fetch` and a `Fetch` message both go through.
    ///
    /// Not an `async fn`, which would keep a second copy of `fetch` in its future (see
    /// `scheduler::direct::run_direct`).
    #[allow(clippy::manual_async_fn)] // on purpose: see above
    pub(crate) fn obey<'a, F, Fut>(
        &'a self,
        fetch: Fetch,
        send: F,
    ) -> impl std::future::Future<Output = Result<FetchResponse, FetchError>> + 'a
    where
        F: Fn(Fetch) -> Fut + 'a,
        Fut: std::future::Future<Output = Result<FetchResponse, FetchError>> + 'a,
    {
        async move {
            let spacing = self.admit(&fetch, &send).await?;
            if !fetch.follow_redirects || self.max_redirects == 0 {
                return answered(spacing, send(fetch).await);
            }
            // What the next hop of a redirect is made from; cheap to keep (the headers
            // are usually none, the body shared).
            let asked = Asked::of(&fetch);
            let result = answered(spacing, send(fetch.no_redirects()).await);
            match result {
                Ok(r) if r.redirect_target().is_some() => {
                    // Boxed: a redirect is rare, and inline it would make every fetch's
                    // future larger.
                    Box::pin(self.follow(asked, r, &send)).await
                }
                other => other,
            }
        }
    }

    /// Follow the redirects of `r`, the answer to the fetch `asked` was made from, each
    /// hop admitted as the fetch was (robots.txt, Crawl-delay), so that a redirect into a
    /// disallowed path, or to another origin's, is not fetched there. Each hop is a
    /// request as the exits make one ([`RedirectChain`]): through the exit that read the
    /// redirect, 301/302/303 turning any method but GET and HEAD into a bodyless GET,
    /// 307/308 keeping both, credentials left behind once the chain leaves the first
    /// origin, the private-address rule for a hop from a public address. The chain is one
    /// answer, at most `max_redirects` hops.
    async fn follow<F, Fut>(
        &self,
        mut asked: Asked,
        mut r: FetchResponse,
        send: &F,
    ) -> Result<FetchResponse, FetchError>
    where
        F: Fn(Fetch) -> Fut,
        Fut: std::future::Future<Output = Result<FetchResponse, FetchError>>,
    {
        let mut chain = RedirectChain::new(r.url.clone(), self.max_redirects);
        loop {
            let hop = match chain.step(r) {
                ChainStep::Answer(r) => return Ok(r),
                ChainStep::Failed(e) => return Err(e),
                ChainStep::Hop(hop) => hop,
            };
            let next = asked.hop(&hop);
            let spacing = match self.admit(&next, send).await {
                Ok(spacing) => spacing,
                Err(e) => return Err(chain.not_followed(&hop, e.kind, &e.message)),
            };
            r = match answered(spacing, send(next).await) {
                Ok(r) => r,
                Err(e) => return Err(chain.failed(e)),
            };
        }
    }

    /// Admit `fetch`: `Ok` with the Crawl-delay turn to hold while it runs, or the error
    /// that ends it unsent. `send` makes the robots.txt fetch.
    async fn admit<F, Fut>(&self, fetch: &Fetch, send: F) -> Result<Option<Spacing>, FetchError>
    where
        F: Fn(Fetch) -> Fut,
        Fut: std::future::Future<Output = Result<FetchResponse, FetchError>>,
    {
        let Ok(url) = Url::parse(&fetch.url) else {
            // The crawler refuses it with its own reason.
            return Ok(None);
        };
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Ok(None);
        }
        let origin = origin_key(&url);
        let path = &url[Position::BeforePath..Position::AfterQuery];
        loop {
            match self.look_up(&origin, path) {
                Step::Allowed(delay) => return Ok(self.turn(&origin, delay).await),
                Step::Disallowed => {
                    let why = format!(
                        "disallowed by {origin}/robots.txt for user-agent {:?}; not sent",
                        self.token
                    );
                    return Err(FetchError::unsent(
                        FetchErrorKind::Robots,
                        why,
                        fetch.url.clone(),
                    ));
                }
                Step::Unavailable(why) => {
                    let why = format!(
                        "{origin}/robots.txt is unavailable ({why}): the site is disallowed until a retry; not sent"
                    );
                    return Err(FetchError::unsent(
                        FetchErrorKind::Robots,
                        why,
                        fetch.url.clone(),
                    ));
                }
                Step::Fetch(done) => {
                    let mut guard = InFlight {
                        gate: self,
                        origin: &origin,
                        done,
                        answered: false,
                    };
                    // Boxed: once per origin, and its future (a whole fetch) would
                    // otherwise make every fetch's future that much larger.
                    let stopped = Box::pin(self.fetch_robots(&url, &origin, &send)).await;
                    guard.answered = !stopped;
                    drop(guard);
                    if stopped {
                        return Err(FetchError::shutdown(
                            fetch.url.clone(),
                            "the crawler stopped during the robots.txt fetch",
                        ));
                    }
                }
                Step::Pending(mut rx) => {
                    let _ = rx.wait_for(|done| *done).await;
                }
            }
        }
    }

    fn look_up(&self, origin: &str, path: &str) -> Step {
        let mut inner = self.lock();
        let inner = &mut *inner;
        // The fetch in flight is the origin's one robots.txt fetch however long it takes:
        // it goes through the crawler (queued, paced, retried, held by a Retry-After), so
        // it can outlast the cache's pending mark, and asking again would fetch twice.
        if let Some(rx) = inner.fetching.get(origin) {
            return Step::Pending(rx.clone());
        }
        match inner.cache.lookup(origin, clock::now()) {
            RobotsState::Known(r) if r.allowed_path(path) => Step::Allowed(r.crawl_delay()),
            RobotsState::Known(_) => Step::Disallowed,
            RobotsState::Fetch => {
                let (tx, rx) = watch::channel(false);
                inner.fetching.insert(origin.to_owned(), rx);
                Step::Fetch(tx)
            }
            RobotsState::Wait(_) => Step::Unavailable(
                inner
                    .failures
                    .get(origin)
                    .cloned()
                    .unwrap_or_else(|| "no answer yet".to_owned()),
            ),
        }
    }

    /// Fetch the origin's robots.txt and record the outcome; `true` if the crawler stopped.
    async fn fetch_robots<F, Fut>(&self, url: &Url, origin: &str, send: &F) -> bool
    where
        F: Fn(Fetch) -> Fut,
        Fut: std::future::Future<Output = Result<FetchResponse, FetchError>>,
    {
        // A throttled robots.txt waits for its host as a page does (a 429 means later):
        // counted as a failure, it failed the origin's fetches while the site only asked
        // for a pause. Only a host given up on (`give_up_after_ms` of nothing but
        // throttles) leaves it unavailable.
        let fetch = Fetch::get(robots_url(url).to_string())
            .first_bytes(MAX_ROBOTS_BYTES as u64)
            .follow_at_least(MIN_REDIRECTS);
        let result = send(fetch).await;
        let now = clock::now();
        let mut inner = self.lock();
        let inner = &mut *inner;
        let cache = &mut inner.cache;
        let failure = match result {
            Ok(r) => {
                cache.on_fetched(origin, r.status, &r.body, now);
                (r.status == 429 || r.status >= 500).then(|| format!("it answered {}", r.status))
            }
            Err(e) if e.kind == FetchErrorKind::Shutdown => return true,
            Err(e) if e.kind == FetchErrorKind::ThrottledOut => {
                // The site answered, with throttles only: unavailable, not unreachable.
                cache.on_fetched(origin, 429, b"", now);
                Some(format!("{}: {}", e.kind.as_str(), e.message))
            }
            Err(e) => {
                cache.on_network_error(origin, now);
                Some(format!("{}: {}", e.kind.as_str(), e.message))
            }
        };
        if let Some(why) = failure {
            tracing::warn!(%origin, %why, "robots.txt unavailable; the origin's fetches fail until a retry");
            inner.failures.insert(origin.to_owned(), why);
            return false;
        }
        inner.failures.remove(origin);
        if let RobotsState::Known(r) = cache.lookup(origin, now) {
            if let Some(d) = r.crawl_delay().filter(|d| !d.is_zero()) {
                // The first page waits a delay after robots.txt, as every later one does.
                let lock = Arc::clone(inner.turns.entry(origin.to_owned()).or_default());
                if let Ok(mut next) = lock.try_lock_owned() {
                    *next = Some(now + d);
                }
            }
        }
        false
    }

    /// With a Crawl-delay: wait for the origin's turn and its time.
    async fn turn(&self, origin: &str, delay: Option<Duration>) -> Option<Spacing> {
        let delay = delay.filter(|d| !d.is_zero())?;
        let lock = Arc::clone(self.lock().turns.entry(origin.to_owned()).or_default());
        let next = lock.lock_owned().await;
        if let Some(at) = *next {
            tokio::time::sleep_until(at.into()).await;
        }
        Some(Spacing { next, delay })
    }
}

/// An origin's robots.txt fetch in flight. However it ends (an answer, or the future
/// dropped), its waiting fetches look again; without an answer the origin is as if never
/// looked up, so the next fetch asks again instead of every one waiting for the timeout.
/// It clears only the `fetching` entry it registered (the channel of `done`): one a later
/// fetch registered is that fetch's to clear, and so is the cache's pending mark then.
struct InFlight<'a> {
    gate: &'a RobotsGate,
    origin: &'a str,
    done: watch::Sender<bool>,
    answered: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut inner = self.gate.lock();
        let ours = inner
            .fetching
            .get(self.origin)
            .is_some_and(|rx| rx.same_channel(&self.done.subscribe()));
        if ours {
            inner.fetching.remove(self.origin);
            if !self.answered {
                inner.cache.forget(self.origin);
            }
        }
        drop(inner);
        let _ = self.done.send(true);
    }
}
