//! robots.txt for the URL-list and frontier modes (`--follow` has its own in
//! `exitcrawl_actors::follow`): the same cache (`exitcrawl::discover::RobotsCache`), the same
//! fetch through the crawler's exits, the same `skipped: "robots"` records, and
//! Crawl-delay — but for a stream of URLs in input order instead of a frontier.
//!
//! Per URL, [`RobotsGate::check`] (at once, for a known origin) or
//! [`RobotsGate::admit`] (after waiting) answers:
//! - robots.txt of the URL's origin is known: allowed → go (after the Crawl-delay wait,
//!   if the site sets one); disallowed → skip;
//! - unknown: the first URL of the origin fetches it (4xx → allow all, 2xx → parse); the
//!   origin's other URLs wait for that one fetch;
//! - the site throttles robots.txt (429, 503): the fetch waits for the host, as a page's
//!   does, and the origin's URLs wait for it;
//! - the site answered robots.txt with 5xx (after the retries), or throttled it past
//!   `give_up_after_ms`: the site is disallowed until the cache's retry time (1 min,
//!   doubling to 1 h) and its URLs are skipped meanwhile with
//!   `error: "robots_unavailable: …"` (records `--resume` fetches again), so no URL waits
//!   more than one robots.txt fetch;
//! - robots.txt got no answer (a closed port, a refused connection, TLS to a plain port,
//!   a timeout): the same wait, but that is the network's fault, not the site's rule, so
//!   each URL's record is that error (`connect_refused: …`), not a robots skip.
//!
//! Crawl-delay `d` makes the origin serial — one fetch at a time — with each send at
//! least `d` after the previous answer (and after robots.txt's), as `--follow` does. URLs
//! waiting for their turn hold their place in the list's read-ahead (`list.rs`), as URLs
//! waiting for the limiter's pacing do.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitcrawl::config::Settings;
use exitcrawl::discover::crawl::ROBOTS_UNAVAILABLE;
use exitcrawl::discover::robots::robots_url;
use exitcrawl::discover::{RobotsCache, RobotsPolicy, RobotsState};
use exitcrawl_actors::{CrawlerHandle, Fetch, FetchErrorKind};
use exitcrawl_net::clock;
use tokio::sync::{Mutex, Notify, OwnedMutexGuard};
use url::Url;

use super::origin::Split;

/// What may happen to a URL.
pub enum Admit {
    /// Fetch it; with a Crawl-delay, call [`Spacing::answered`] when the answer is in.
    Go(Option<Spacing>),
    /// Do not fetch it: disallowed (`None`) or robots.txt unavailable (why).
    Skip(Option<String>),
    /// Do not fetch it: robots.txt got no answer, for this reason (see the module docs).
    Fail(FetchErrorKind, String),
    /// The crawler is shutting down (a robots.txt fetch was dropped): interrupted.
    Stopped,
}

/// A Crawl-delay origin's turn: while held, no other fetch to the origin starts.
pub struct Spacing {
    next: OwnedMutexGuard<Option<Instant>>,
    delay: Duration,
}

impl Spacing {
    /// The answer is in: the origin's next send is `delay` from now.
    pub fn answered(mut self) {
        *self.next = Some(clock::now() + self.delay);
    }
}

/// The robots.txt gate of one crawl.
pub struct RobotsGate {
    enabled: bool,
    cache: RefCell<RobotsCache>,
    /// Origins whose robots.txt fetch is in flight; their other URLs wait on it.
    fetching: RefCell<HashMap<String, Rc<Notify>>>,
    /// Why an origin's last robots.txt fetch failed (for the records skipped meanwhile).
    failures: RefCell<HashMap<String, (String, Option<FetchErrorKind>)>>,
    /// Crawl-delay origins: the time the next send may go, behind a fair lock.
    turns: RefCell<HashMap<String, Arc<Mutex<Option<Instant>>>>>,
    stopped: Cell<bool>,
    /// Wakes the URLs waiting for a Crawl-delay turn when the crawl stops.
    stop: Notify,
    /// robots.txt fetches made, and the HTTP attempts they took.
    pub fetches: Cell<u64>,
    pub requests: Cell<u64>,
}

impl RobotsGate {
    /// A gate for `[crawl] robots` (off: every URL goes, nothing is fetched).
    pub fn new(s: &Settings) -> RobotsGate {
        let policy = RobotsPolicy {
            ttl: s.crawl.robots_ttl(),
            ..RobotsPolicy::default()
        };
        let token = exitcrawl::discover::robots::robots_token(&s.crawl, &s.crawler.user_agent);
        RobotsGate {
            enabled: s.crawl.robots,
            cache: RefCell::new(RobotsCache::new(&token, policy)),
            fetching: RefCell::default(),
            failures: RefCell::default(),
            turns: RefCell::default(),
            stopped: Cell::new(false),
            stop: Notify::new(),
            fetches: Cell::new(0),
            requests: Cell::new(0),
        }
    }

    /// Whether robots.txt is obeyed (`[crawl] robots`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// May `url` be fetched? Answered at once when the origin's robots.txt is known and
    /// sets no Crawl-delay — nearly every URL; the rest take [`RobotsGate::admit`].
    pub fn check(&self, url: &str) -> Check {
        if !self.enabled {
            return Check::Go;
        }
        let split = Split::of(url);
        if let Split::Invalid = split {
            // The crawler refuses it with its own reason.
            return Check::Go;
        }
        match self.look_up(&split) {
            Step::Allowed(None) => Check::Go,
            Step::Disallowed => Check::Skip(None),
            Step::Unavailable(why) => Check::Skip(Some(why)),
            Step::Unreachable(kind, why) => Check::Fail(kind, why),
            step => Check::Wait(step),
        }
    }

    /// The rest of [`RobotsGate::check`]: wait for the origin's robots.txt (one fetch per
    /// origin and cache period, made through `handle`) and for its Crawl-delay turn.
    pub async fn admit(&self, handle: &CrawlerHandle, url: &str, mut step: Step) -> Admit {
        let split = Split::of(url);
        let origin = split.origin();
        loop {
            if self.stopped.get() {
                return Admit::Stopped;
            }
            match step {
                Step::Allowed(delay) => {
                    return match self.turn(&origin, delay).await {
                        Some(spacing) => Admit::Go(spacing),
                        None => Admit::Stopped,
                    }
                }
                Step::Disallowed => return Admit::Skip(None),
                Step::Unavailable(why) => return Admit::Skip(Some(why)),
                Step::Unreachable(kind, why) => return Admit::Fail(kind, why),
                Step::Fetch => self.fetch_robots(handle, &split, &origin).await,
                Step::Pending(notify) => notify.notified().await,
            }
            step = self.look_up(&split);
        }
    }

    fn look_up(&self, split: &Split<'_>) -> Step {
        let origin = match split {
            Split::Canonical(o, _) => std::borrow::Cow::Borrowed(*o),
            _ => std::borrow::Cow::Owned(split.origin()),
        };
        // The fetch in flight is the origin's one robots.txt fetch however long it takes:
        // it goes through the crawler (queued, paced, retried, held by a Retry-After), so
        // it can outlast the cache's pending mark, and asking again would fetch twice.
        if let Some(n) = self.fetching.borrow().get(origin.as_ref()) {
            return Step::Pending(Rc::clone(n));
        }
        let mut cache = self.cache.borrow_mut();
        match cache.lookup(&origin, clock::now()) {
            RobotsState::Known(r) if r.allowed_path(split.path()) => Step::Allowed(r.crawl_delay()),
            RobotsState::Known(_) => Step::Disallowed,
            RobotsState::Fetch => Step::Fetch,
            RobotsState::Wait(_) => match self.failures.borrow().get(origin.as_ref()).cloned() {
                Some((why, Some(kind))) => Step::Unreachable(
                    kind,
                    format!("{why} (robots.txt got no answer; this URL was not sent)"),
                ),
                why => Step::Unavailable(format!(
                    "{ROBOTS_UNAVAILABLE} ({})",
                    why.map_or_else(|| "no answer yet".to_owned(), |w| w.0)
                )),
            },
        }
    }

    /// Fetch the origin's robots.txt and record the outcome in the cache.
    async fn fetch_robots(&self, handle: &CrawlerHandle, split: &Split<'_>, origin: &str) {
        let robots = match split {
            Split::Parsed(u) => robots_url(u),
            _ => match Url::parse(&format!("{origin}/robots.txt")) {
                Ok(u) => u,
                Err(_) => return,
            },
        };
        let notify = Rc::new(Notify::new());
        self.fetching
            .borrow_mut()
            .insert(origin.to_owned(), Rc::clone(&notify));
        // Whatever ends this fetch (an answer, or the future dropped at shutdown), the
        // waiting URLs look again.
        let _wake = Wake {
            gate: self,
            origin,
            notify,
        };
        // A throttled robots.txt waits for its host as a page does (a 429 means later):
        // counted as a failure, it skipped the origin's URLs while the site only asked
        // for a pause. Only a host given up on (`give_up_after_ms` of nothing but
        // throttles) leaves it unavailable.
        let result = handle
            .fetch(
                Fetch::get(robots.to_string())
                    .first_bytes(exitcrawl::discover::robots::MAX_ROBOTS_BYTES as u64)
                    .follow_at_least(exitcrawl::discover::robots::MIN_REDIRECTS),
            )
            .await;
        let now = clock::now();
        self.fetches.set(self.fetches.get() + 1);
        let attempts = match &result {
            Ok(r) => r.attempts,
            Err(e) => e.attempts,
        };
        self.requests.set(self.requests.get() + u64::from(attempts));
        let mut cache = self.cache.borrow_mut();
        let failure = match result {
            Ok(r) => {
                cache.on_fetched(origin, r.status, &r.body, now);
                (r.status == 429 || r.status >= 500)
                    .then(|| (format!("it answered {}", r.status), None))
            }
            Err(e) if e.kind == FetchErrorKind::Shutdown => {
                self.stop();
                None
            }
            Err(e) if e.kind == FetchErrorKind::ThrottledOut => {
                // The site answered, with throttles only: unavailable, not unreachable.
                cache.on_fetched(origin, 429, b"", now);
                Some((format!("{}: {}", e.kind.as_str(), e.message), None))
            }
            Err(e) => {
                cache.on_network_error(origin, now);
                Some((format!("{}: {}", e.kind.as_str(), e.message), Some(e.kind)))
            }
        };
        match failure {
            Some((why, None)) => {
                tracing::warn!(%origin, %why, "robots.txt unavailable; its URLs are skipped until a retry");
                self.failures
                    .borrow_mut()
                    .insert(origin.to_owned(), (why, None));
            }
            Some((why, kind)) => {
                tracing::warn!(%origin, %why, "robots.txt got no answer; its URLs fail with that error until a retry");
                self.failures
                    .borrow_mut()
                    .insert(origin.to_owned(), (why, kind));
            }
            None => {
                self.failures.borrow_mut().remove(origin);
                if let RobotsState::Known(r) = cache.lookup(origin, now) {
                    if let Some(d) = r.crawl_delay().filter(|d| !d.is_zero()) {
                        // The first page waits a delay after robots.txt, as in --follow.
                        if let Ok(mut next) = self.turn_lock(origin).try_lock_owned() {
                            *next = Some(now + d);
                        }
                    }
                }
            }
        }
    }

    fn turn_lock(&self, origin: &str) -> Arc<Mutex<Option<Instant>>> {
        let mut turns = self.turns.borrow_mut();
        Arc::clone(turns.entry(origin.to_owned()).or_default())
    }

    /// With a Crawl-delay: wait for the origin's turn and its time (`Some(None)` without
    /// one); `None` when the crawl stops meanwhile: the URL was never sent, and waiting
    /// out the turns of an origin's other URLs would hold the stop past its grace.
    async fn turn(&self, origin: &str, delay: Option<Duration>) -> Option<Option<Spacing>> {
        let Some(delay) = delay.filter(|d| !d.is_zero()) else {
            return Some(None);
        };
        // Made before the check, so that a stop between the two still wakes it.
        let stopped = std::pin::pin!(self.stop.notified());
        if self.stopped.get() {
            return None;
        }
        let lock = self.turn_lock(origin);
        let wait = std::pin::pin!(async move {
            let next = lock.lock_owned().await;
            if let Some(at) = *next {
                tokio::time::sleep_until(at.into()).await;
            }
            next
        });
        match futures_util::future::select(wait, stopped).await {
            futures_util::future::Either::Left((next, _)) => Some(Some(Spacing { next, delay })),
            futures_util::future::Either::Right(_) => None,
        }
    }

    /// The crawl stops: no URL is admitted any more, and those waiting for a Crawl-delay
    /// turn end at once, unsent.
    pub fn stop(&self) {
        self.stopped.set(true);
        self.stop.notify_waiters();
    }

    /// The crawl is stopping ([`RobotsGate::stop`]).
    pub fn stopped(&self) -> bool {
        self.stopped.get()
    }
}

/// Where a URL stands with its origin's robots.txt.
pub enum Step {
    Allowed(Option<Duration>),
    Disallowed,
    /// Fetch robots.txt (this URL was told to; the cache marked it pending).
    Fetch,
    /// Another URL's robots.txt fetch is in flight.
    Pending(Rc<Notify>),
    /// The last fetch failed: skipped until the retry time (why).
    Unavailable(String),
    /// robots.txt got no answer: the URL fails with that error.
    Unreachable(FetchErrorKind, String),
}

/// [`RobotsGate::check`]'s answer.
pub enum Check {
    Go,
    Skip(Option<String>),
    /// robots.txt got no answer: the URL's error.
    Fail(FetchErrorKind, String),
    /// Go on with [`RobotsGate::admit`].
    Wait(Step),
}

/// Ends an origin's "robots.txt in flight" state and wakes its waiting URLs. It clears
/// only the `fetching` entry it registered (`notify`), never one a later fetch registered.
struct Wake<'a> {
    gate: &'a RobotsGate,
    origin: &'a str,
    notify: Rc<Notify>,
}

impl Drop for Wake<'_> {
    fn drop(&mut self) {
        let mut fetching = self.gate.fetching.borrow_mut();
        if fetching
            .get(self.origin)
            .is_some_and(|n| Rc::ptr_eq(n, &self.notify))
        {
            fetching.remove(self.origin);
        }
        drop(fetching);
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitcrawl::config::{Algorithm, ExitSettings};
    use exitcrawl_actors::Crawler;
    use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};

    /// Whether `url` may go, asked as `fetch.rs` asks.
    async fn goes(gate: &RobotsGate, h: &CrawlerHandle, url: &str) -> bool {
        match gate.check(url) {
            Check::Go => true,
            Check::Wait(step) => matches!(gate.admit(h, url, step).await, Admit::Go(_)),
            Check::Skip(_) | Check::Fail(..) => false,
        }
    }

    /// A robots.txt fetch goes through the crawler (queued, paced, retried) and can
    /// outlast the cache's pending mark: a URL of the origin checked after the mark has
    /// lapsed still waits for that one robots.txt answer instead of asking again.
    #[actix_rt::test]
    async fn a_robots_txt_slower_than_the_pending_mark_is_fetched_once() {
        // Paused time, the site on the test's runtime: its latency is exact.
        tokio::time::pause();
        let pages = Pages::new(|_: &str, pq: &str| {
            Some(if pq == "/robots.txt" {
                Page::text("User-agent: *\nDisallow: /private/\n")
            } else {
                Page::html("<p>page</p>")
            })
        });
        // Longer than `RobotsPolicy::fetch_timeout` (60 s).
        let site = TestSite::start_on_runtime(SiteConfig {
            pages: Some(pages),
            latency: Duration::from_secs(70),
            ..SiteConfig::default()
        });
        let exit = ExitSettings::new("e2", "127.0.0.2".parse().expect("ip"));
        let mut s = Settings::with_exits(vec![exit]);
        s.limiter.algorithm = Algorithm::None;
        // Beyond the site's latency: on paused time a jump may only reach that timer.
        s.crawler.timeout_ms = 600_000;
        s.crawler.connect_timeout_ms = 600_000;
        let gate = RobotsGate::new(&s);
        // As `run.rs` starts it: the program asks robots.txt itself, not the handle.
        let h = Crawler::start(s).expect("start").polite(false);
        let (first, second) = (site.url("/p/1"), site.url("/p/2"));
        let later = async {
            tokio::time::sleep(Duration::from_secs(65)).await;
            goes(&gate, &h, &second).await
        };
        let answers = futures_util::future::join(goes(&gate, &h, &first), later).await;
        assert_eq!(answers, (true, true));
        let log = site.requests();
        let robots = log.iter().filter(|r| r.path == "/robots.txt").count();
        assert_eq!((robots, gate.fetches.get()), (1, 1), "{log:?}");
    }
}
