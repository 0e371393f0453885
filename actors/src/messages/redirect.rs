//! A redirect chain followed above the exit: each hop a fetch of its own, the chain one
//! answer.
//!
//! Why above the exit: a hop is a request to a URL nobody asked robots.txt about, and
//! for a link-following crawl it is a page the dedupe and the scope must see. The
//! robots.txt gate of the handle and the program's list mode follow redirects this way
//! (`Fetch::no_redirects`, then one [`RedirectChain`] step per answer); what a hop asks
//! for (its exit, its credentials, its reach) is what a hop the exit follows gets.

use std::sync::Arc;
use std::time::Duration;

use url::{Origin, Url};

use super::{Fetch, FetchError, FetchErrorKind, FetchResponse};

/// The redirects of one fetch so far, and what they add up to.
#[derive(Debug)]
pub struct RedirectChain {
    /// The URL asked for: every answer and error of the chain is reported under it.
    asked: String,
    first: Option<Origin>,
    max: u32,
    hops: u32,
    left_origin: bool,
    attempts: u32,
    throttled: u32,
    elapsed: Duration,
}

/// What an answer in a [`RedirectChain`] calls for.
#[derive(Debug)]
pub enum ChainStep {
    /// The chain's answer: no redirect (`final_url` where the chain ended, attempts,
    /// throttles and time summed over its hops).
    Answer(FetchResponse),
    /// Fetch this next (admitted first, as the chain's first fetch was).
    Hop(RedirectHop),
    /// The redirect cannot be followed: past `crawler.max_redirects`, or its `Location`
    /// is no http(s) URL.
    Failed(FetchError),
}

/// The next hop of a [`RedirectChain`].
#[derive(Debug)]
#[non_exhaustive]
pub struct RedirectHop {
    /// Where the redirect leads.
    pub url: Url,
    /// The answer that redirects there: its status says what becomes of a method.
    pub status: u16,
    /// The exit that read the redirect: the hop goes through it (one address, one
    /// cookie jar, as one client's session).
    pub exit: Arc<str>,
    /// The redirect came from a public address: the hop may not reach a private one.
    pub from_public: bool,
    /// The chain has left the origin it began at: credentials stay behind.
    pub left_origin: bool,
}

impl RedirectHop {
    /// The hop as a GET [`Fetch`] that does not follow redirects itself, sent through
    /// the exit that read the redirect; if that attempt does not end it (a refused
    /// connection, a throttle of that address), the next go through any exit.
    pub fn fetch(&self) -> Fetch {
        Fetch::get(self.url.as_str())
            .no_redirects()
            .found_on_public(self.from_public)
            .off_origin(self.left_origin)
            .prefer_first(&*self.exit)
    }
}

impl RedirectChain {
    /// The chain of the fetch of `asked`, at most `max` redirects long.
    pub fn new(asked: String, max: u32) -> Self {
        let first = Url::parse(&asked).ok().map(|u| u.origin());
        RedirectChain {
            asked,
            first,
            max,
            hops: 0,
            left_origin: false,
            attempts: 0,
            throttled: 0,
            elapsed: Duration::ZERO,
        }
    }

    /// The answer `r` to the chain's last fetch.
    pub fn step(&mut self, mut r: FetchResponse) -> ChainStep {
        let next = match r.redirect_target() {
            None => {
                r.final_url = (self.hops > 0).then(|| std::mem::take(&mut r.url));
                r.url.clone_from(&self.asked);
                r.attempts += self.attempts;
                r.throttled += self.throttled;
                r.elapsed += self.elapsed;
                return ChainStep::Answer(r);
            }
            Some(Err(why)) => {
                return ChainStep::Failed(self.refused(FetchErrorKind::Other, why, &r))
            }
            Some(Ok(next)) if self.hops == self.max => {
                let why = format!(
                    "too many redirects: more than {} (last Location: {next})",
                    self.max
                );
                return ChainStep::Failed(self.refused(FetchErrorKind::TooManyRedirects, why, &r));
            }
            Some(Ok(next)) => next,
        };
        self.hops += 1;
        self.left_origin |= self.first.as_ref() != Some(&next.origin());
        self.attempts += r.attempts;
        self.throttled += r.throttled;
        self.elapsed += r.elapsed;
        ChainStep::Hop(RedirectHop {
            url: next,
            status: r.status,
            exit: Arc::clone(&r.exit),
            from_public: r.peer_private == Some(false),
            left_origin: self.left_origin,
        })
    }

    /// The hop was not sent: its admission refused it with `kind` and `why` (robots.txt
    /// disallows it, the crawler stopped). The chain ends with that error, its attempts
    /// those made so far.
    pub fn not_followed(&self, hop: &RedirectHop, kind: FetchErrorKind, why: &str) -> FetchError {
        let mut e = FetchError::unsent(
            kind,
            format!("redirect to {} not followed: {why}", hop.url),
            self.asked.clone(),
        );
        e.attempts = self.attempts;
        e.throttled = self.throttled;
        e.exit = Some(Arc::clone(&hop.exit));
        e
    }

    /// A hop's fetch failed with `e`: the chain's error, its attempts summed.
    pub fn failed(&self, mut e: FetchError) -> FetchError {
        e.url.clone_from(&self.asked);
        e.attempts += self.attempts;
        e.throttled += self.throttled;
        e
    }

    fn refused(&self, kind: FetchErrorKind, why: String, r: &FetchResponse) -> FetchError {
        let mut e = FetchError::unsent(kind, why, self.asked.clone());
        e.attempts = self.attempts + r.attempts;
        e.throttled = self.throttled + r.throttled;
        e.exit = Some(Arc::clone(&r.exit));
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// An answer to `url` with `status` and, when given, a `Location`.
    fn answer(url: &str, status: u16, location: Option<&str>, private: bool) -> FetchResponse {
        let mut headers = http::HeaderMap::new();
        if let Some(l) = location {
            headers.insert(http::header::LOCATION, l.parse().unwrap());
        }
        FetchResponse {
            url: url.into(),
            final_url: None,
            status,
            headers: headers.into(),
            body: Bytes::new(),
            wire_bytes: 0,
            truncated: false,
            content_encoding: None,
            peer_private: Some(private),
            left_origin: false,
            exit: Arc::from("e1"),
            attempts: 1,
            throttled: u32::from(status == 429),
            elapsed: Duration::from_millis(10),
        }
    }

    fn hop(step: ChainStep) -> RedirectHop {
        match step {
            ChainStep::Hop(h) => h,
            other => panic!("expected a hop, got {other:?}"),
        }
    }

    #[test]
    fn a_chain_is_one_answer_under_the_url_asked_for() {
        let mut c = RedirectChain::new("http://a.test/x".into(), 10);
        let h = hop(c.step(answer("http://a.test/x", 301, Some("/y"), false)));
        assert_eq!(h.url.as_str(), "http://a.test/y");
        assert!(h.from_public && !h.left_origin);
        assert_eq!(&*h.exit, "e1");
        let h = hop(c.step(answer(
            "http://a.test/y",
            302,
            Some("http://b.test/z"),
            true,
        )));
        assert!(h.left_origin && !h.from_public);
        let h = hop(c.step(answer(
            "http://b.test/z",
            307,
            Some("http://a.test/w"),
            true,
        )));
        assert!(
            h.left_origin,
            "once left, the chain stays without credentials"
        );
        let f = h.fetch();
        assert!(f.left_origin && !f.follow_redirects);
        assert_eq!(f.preferred_exit.as_deref(), Some("e1"));
        match c.step(answer("http://a.test/w", 200, None, true)) {
            ChainStep::Answer(r) => {
                assert_eq!(r.url, "http://a.test/x");
                assert_eq!(r.final_url.as_deref(), Some("http://a.test/w"));
                assert_eq!(r.attempts, 4);
                assert_eq!(r.elapsed, Duration::from_millis(40));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn past_max_redirects_or_off_http_the_chain_fails() {
        let mut c = RedirectChain::new("http://a.test/0".into(), 2);
        hop(c.step(answer("http://a.test/0", 301, Some("/1"), false)));
        hop(c.step(answer("http://a.test/1", 301, Some("/2"), false)));
        match c.step(answer("http://a.test/2", 301, Some("/3"), false)) {
            ChainStep::Failed(e) => {
                assert_eq!(e.kind, FetchErrorKind::TooManyRedirects);
                assert_eq!((e.url.as_str(), e.attempts), ("http://a.test/0", 3));
            }
            other => panic!("{other:?}"),
        }
        let mut c = RedirectChain::new("http://a.test/0".into(), 2);
        match c.step(answer("http://a.test/0", 302, Some("ftp://a.test/"), false)) {
            ChainStep::Failed(e) => assert_eq!(e.kind, FetchErrorKind::Other, "{e}"),
            other => panic!("{other:?}"),
        }
        let mut c = RedirectChain::new("http://a.test/0".into(), 2);
        let h = hop(c.step(answer("http://a.test/0", 302, Some("/private"), false)));
        let e = c.not_followed(&h, FetchErrorKind::Robots, "robots.txt disallows it");
        assert_eq!(e.attempts, 1);
        assert!(e
            .message
            .starts_with("redirect to http://a.test/private not followed"));
    }
}
