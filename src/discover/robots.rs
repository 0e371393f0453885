//! robots.txt: the rules for our user agent, Crawl-delay, and a per-host cache.
//!
//! Parsing uses **texting_robots 0.2.2**: rules are parsed once per file into matchers
//! (not re-parsed per URL), it selects the group for our agent (falling back to `*`),
//! applies longest-match with allow winning ties, exposes `Crawl-delay`, and its test
//! suite covers Google's and reppy's cases plus real-world files. The cost is build time:
//! +34 s cold (nom 7, bstr 0.2, anyhow, thiserror 1, regex with default features). The
//! lean alternative, `robotstxt` 0.3 (Google's C++ parser ported, no deps, +0.9 s), re-parses
//! the whole file for every URL checked and has no Crawl-delay accessor.
//!
//! Choices on top of the crate:
//! - the user agent is reduced to its product token (`exitcrawl/0.1.0 (+url)` → `exitcrawl`),
//!   which is what robots.txt groups name;
//! - only the first 500 KiB of a body are read (RFC 9309 §2.5 lets crawlers stop there);
//! - a body the crate cannot parse allows everything (as an empty file would);
//! - Crawl-delay is capped at [`MAX_CRAWL_DELAY`]; negative or non-numeric values are ignored.
//!
//! [`RobotsCache`] is the per-host state machine. Its answer for a host is one of
//! `Known(rules)`, `Fetch` (go get `/robots.txt`; exactly one caller is told so) or
//! `Wait(until)` (a fetch is in flight, or the last one failed and we back off). Fetch
//! outcomes follow RFC 9309 §2.3.1: 2xx → parse; 3xx left after redirects and 4xx
//! (except 429) → allow all; 429, 5xx and network errors → disallow all for now and retry
//! with exponential backoff. Known rules expire after [`RobotsPolicy::ttl`] (24 h).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use url::{Position, Url};

/// Longest Crawl-delay obeyed; longer values are clamped (a site asking for one request
/// an hour would otherwise stall the crawl of that host).
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(60);

/// Bytes of a robots.txt body that are parsed.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;

/// Redirects a robots.txt fetch follows at least, whatever the crawl's own limit: RFC 9309
/// §2.3.1.2 asks for five, and a robots.txt left at a redirect reads as none (allow all).
pub const MIN_REDIRECTS: u8 = 5;

/// Parsed rules for one user agent.
#[derive(Debug)]
pub struct Robots {
    rules: Option<texting_robots::Robot>,
    delay: Option<Duration>,
}

/// The robots.txt token of a crawl: `[crawl] user_agent_token`, else the product token
/// of `user_agent`.
pub fn robots_token(crawl: &crate::config::CrawlSettings, user_agent: &str) -> String {
    match &crawl.user_agent_token {
        Some(t) => t.clone(),
        None => product_token(user_agent).to_owned(),
    }
}

/// The robots.txt product token of a User-Agent header value.
pub fn product_token(user_agent: &str) -> &str {
    let ua = user_agent.trim();
    let end = ua
        .find(|c: char| c == '/' || c.is_whitespace())
        .unwrap_or(ua.len());
    &ua[..end]
}

/// `body` with each `Allow`/`Disallow` path written as the crawler writes a URL's path:
/// bytes outside US-ASCII percent-encoded, escapes of unreserved characters decoded and
/// the others in upper case ([`normalize_escapes`](super::normalize::normalize_escapes)).
///
/// Why: RFC 9309 §2.2.2 compares the two sides percent-encoded alike (`/%7Ejoe` and
/// `/~joe` are one path), and the matcher compares bytes. The crawler's URLs are already
/// in that form, a rule as the site wrote it may not be: `Disallow: /%7Ejoe/` would
/// never match the link `/~joe/`, and the page would be fetched.
fn rules_as_urls_are(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let rule = |line: &[u8]| {
        let t = line.trim_ascii_start();
        ["allow", "disallow"].iter().find_map(|k| {
            let head = t.get(..k.len())?;
            let rest = t[k.len()..].trim_ascii_start();
            (head.eq_ignore_ascii_case(k.as_bytes()) && rest.first() == Some(&b':'))
                .then(|| line.len() - rest.len() + 1)
        })
    };
    if !body
        .split(|b| *b == b'\n')
        .any(|l| rule(l).is_some_and(|at| needs_work(&l[at..])))
    {
        return std::borrow::Cow::Borrowed(body);
    }
    let mut out = Vec::with_capacity(body.len() + 64);
    for (i, line) in body.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        match rule(line) {
            Some(at) if needs_work(&line[at..]) => {
                out.extend_from_slice(&line[..at]);
                out.extend_from_slice(encoded(&line[at..]).as_bytes());
            }
            _ => out.extend_from_slice(line),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether a rule's value has an escape or a byte outside US-ASCII.
fn needs_work(value: &[u8]) -> bool {
    value.iter().any(|b| *b == b'%' || !b.is_ascii())
}

/// A rule's value percent-encoded as a URL path is (see [`rules_as_urls_are`]).
fn encoded(value: &[u8]) -> String {
    let mut s = String::with_capacity(value.len());
    for &b in value {
        if b.is_ascii() {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    super::normalize::normalize_escapes(&s).unwrap_or(s)
}

/// The robots.txt URL for the origin of `url`.
pub fn robots_url(url: &Url) -> Url {
    let mut u = url.clone();
    u.set_path("/robots.txt");
    u.set_query(None);
    u.set_fragment(None);
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u
}

/// Cache key for `url`: its origin (`scheme://host:port`), which robots.txt is scoped to.
pub fn origin_key(url: &Url) -> String {
    url.origin().ascii_serialization()
}

impl Robots {
    /// Parse `body` for `user_agent` (a full User-Agent value or just its token). Its
    /// first [`MAX_ROBOTS_BYTES`] are read; a body that long may have been cut there
    /// (fetches take no more), so its last line, which the cut may have split, is left
    /// out: `Disallow: /private` cut to `Disallow: /` would shut the site, `Allow:
    /// /a/b/public` cut to `Allow: /a/b/` open what a `Disallow: /a/b` closes.
    pub fn parse(body: &[u8], user_agent: &str) -> Robots {
        let body = if body.len() >= MAX_ROBOTS_BYTES {
            let head = &body[..MAX_ROBOTS_BYTES];
            let end = head
                .iter()
                .rposition(|b| matches!(b, b'\n' | b'\r'))
                .map_or(0, |i| i + 1);
            &head[..end]
        } else {
            body
        };
        let body = rules_as_urls_are(body);
        match texting_robots::Robot::new(product_token(user_agent), &body) {
            Ok(r) => {
                let delay = r
                    .delay
                    .filter(|d| d.is_finite() && *d >= 0.0)
                    .map(|d| Duration::from_secs_f32(d.min(MAX_CRAWL_DELAY.as_secs_f32())));
                Robots {
                    rules: Some(r),
                    delay,
                }
            }
            Err(_) => Robots::allow_all(),
        }
    }

    /// No rules: everything allowed, no delay.
    pub fn allow_all() -> Robots {
        Robots {
            rules: None,
            delay: None,
        }
    }

    /// May `url` be fetched?
    pub fn allowed(&self, url: &Url) -> bool {
        self.allowed_path(&url[Position::BeforePath..Position::AfterQuery])
    }

    /// May the URL with this path and query (as `Url` serialises them, from the leading
    /// `/`) be fetched? For callers that have the path without a parsed `Url`.
    pub fn allowed_path(&self, path_and_query: &str) -> bool {
        let Some(r) = &self.rules else {
            return true;
        };
        // Escapes as the rules have them (see `rules_as_urls_are`): a URL handed in as
        // written (`/%7ejoe/`) is the same path as `/~joe/`.
        match super::normalize::normalize_escapes(path_and_query) {
            Some(p) => r.allowed(&p),
            None => r.allowed(path_and_query),
        }
    }

    /// The Crawl-delay of our group (or of the top of the file), capped.
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.delay
    }

    /// Sitemap URLs listed in the file.
    pub fn sitemaps(&self) -> &[String] {
        self.rules.as_ref().map_or(&[], |r| &r.sitemaps)
    }
}

/// Timing of the [`RobotsCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobotsPolicy {
    /// How long fetched rules (or a 4xx allow-all) stay valid.
    pub ttl: Duration,
    /// A fetch handed out and not answered after this long may be handed out again.
    pub fetch_timeout: Duration,
    /// First retry delay after a 5xx/network error; doubles per failure.
    pub retry_base: Duration,
    /// Ceiling of the retry delay.
    pub retry_max: Duration,
}

impl Default for RobotsPolicy {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(24 * 3600),
            fetch_timeout: Duration::from_secs(60),
            retry_base: Duration::from_secs(60),
            retry_max: Duration::from_secs(3600),
        }
    }
}

/// What to do about a host's robots.txt now.
#[derive(Debug)]
pub enum RobotsState<'a> {
    /// Rules are known: check URLs against them.
    Known(&'a Robots),
    /// Fetch robots.txt now, then call [`RobotsCache::on_fetched`] or
    /// [`RobotsCache::on_network_error`]. Handed out once per round.
    Fetch,
    /// Fetch nothing from this host before this instant (a robots fetch is in flight,
    /// or robots.txt is unreachable and everything is disallowed for now).
    Wait(Instant),
}

#[derive(Debug)]
enum Slot {
    Pending { since: Instant, failures: u32 },
    Known { robots: Robots, expires: Instant },
    Failed { retry_at: Instant, failures: u32 },
}

/// robots.txt per host (origin key), with expiry and retry backoff.
#[derive(Debug)]
pub struct RobotsCache {
    user_agent: String,
    policy: RobotsPolicy,
    slots: HashMap<String, Slot>,
}

impl RobotsCache {
    /// Cache parsing for `user_agent` with `policy`.
    pub fn new(user_agent: &str, policy: RobotsPolicy) -> Self {
        Self {
            user_agent: user_agent.to_owned(),
            policy,
            slots: HashMap::new(),
        }
    }

    /// Hosts with an entry.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// No host has an entry.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The state for `host` (see [`origin_key`]) at `now`. A `Fetch` answer marks the
    /// host as pending, so concurrent callers get `Wait` until the outcome comes in.
    pub fn lookup(&mut self, host: &str, now: Instant) -> RobotsState<'_> {
        enum Step {
            Known,
            Wait(Instant),
            Fetch(u32),
        }
        let step = match self.slots.get(host) {
            None => Step::Fetch(0),
            Some(Slot::Known { expires, .. }) if now < *expires => Step::Known,
            Some(Slot::Known { .. }) => Step::Fetch(0),
            Some(Slot::Pending { since, failures }) => {
                let until = *since + self.policy.fetch_timeout;
                if now < until {
                    Step::Wait(until)
                } else {
                    Step::Fetch(*failures)
                }
            }
            Some(Slot::Failed { retry_at, failures }) if now < *retry_at => Step::Wait(*retry_at),
            Some(Slot::Failed { failures, .. }) => Step::Fetch(*failures),
        };
        match step {
            Step::Known => match self.slots.get(host) {
                Some(Slot::Known { robots, .. }) => RobotsState::Known(robots),
                _ => RobotsState::Fetch, // not reached: the slot was Known just above
            },
            Step::Wait(until) => RobotsState::Wait(until),
            Step::Fetch(failures) => {
                self.slots.insert(
                    host.to_owned(),
                    Slot::Pending {
                        since: now,
                        failures,
                    },
                );
                RobotsState::Fetch
            }
        }
    }

    /// The robots.txt fetch for `host` answered `status` with `body`.
    pub fn on_fetched(&mut self, host: &str, status: u16, body: &[u8], now: Instant) {
        let robots = match status {
            200..=299 => Robots::parse(body, &self.user_agent),
            300..=399 => Robots::allow_all(),
            429 => return self.on_network_error(host, now),
            400..=499 => Robots::allow_all(),
            _ => return self.on_network_error(host, now),
        };
        let expires = now + self.policy.ttl;
        self.slots
            .insert(host.to_owned(), Slot::Known { robots, expires });
    }

    /// The robots.txt fetch for `host` was not made after all (refused before anything
    /// was sent, e.g. by the private-address rule): the host is as if never looked up.
    pub fn forget(&mut self, host: &str) {
        if matches!(self.slots.get(host), Some(Slot::Pending { .. })) {
            self.slots.remove(host);
        }
    }

    /// The robots.txt fetch for `host` failed (5xx, 429, timeout, connect error):
    /// disallow the host and retry after a doubling backoff.
    pub fn on_network_error(&mut self, host: &str, now: Instant) {
        let failures = match self.slots.get(host) {
            Some(Slot::Pending { failures, .. } | Slot::Failed { failures, .. }) => *failures,
            _ => 0,
        }
        .saturating_add(1);
        let backoff = self
            .policy
            .retry_base
            .saturating_mul(1u32 << (failures - 1).min(20))
            .min(self.policy.retry_max);
        self.slots.insert(
            host.to_owned(),
            Slot::Failed {
                retry_at: now + backoff,
                failures,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TXT: &[u8] = b"Crawl-delay: 9\n\
        User-agent: otherbot\nDisallow: /\n\n\
        User-agent: *\nDisallow: /private/\nAllow: /private/open\nCrawl-delay: 2.5\n\
        Sitemap: http://e.com/sitemap.xml\n";

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn rules_and_delay_for_our_agent() {
        let r = Robots::parse(TXT, "exitcrawl/0.1 (+https://example.org/bot)");
        assert!(r.allowed(&u("http://e.com/")));
        assert!(r.allowed(&u("http://e.com/public?x=1")));
        assert!(!r.allowed(&u("http://e.com/private/x")));
        assert!(r.allowed(&u("http://e.com/private/open/y")));
        assert_eq!(r.crawl_delay(), Some(Duration::from_millis(2500)));
        assert_eq!(r.sitemaps(), ["http://e.com/sitemap.xml"]);
        let other = Robots::parse(TXT, "OtherBot");
        assert!(!other.allowed(&u("http://e.com/")));
        let capped = Robots::parse(b"User-agent: *\nCrawl-delay: 86400\n", "x");
        assert_eq!(capped.crawl_delay(), Some(MAX_CRAWL_DELAY));
        assert!(Robots::allow_all().allowed(&u("http://e.com/private/x")));
    }

    #[test]
    fn a_rule_and_a_url_match_however_either_is_percent_encoded() {
        // RFC 9309 §2.2.2: both sides are compared percent-encoded alike.
        let r = Robots::parse(
            "User-agent: *\nDisallow: /%7Ejoe/\nDisallow: /a%2fb\nDisallow: /caf\u{e9}/\nDisallow: /x%41y\n"
                .as_bytes(),
            "exitcrawl",
        );
        for blocked in [
            "http://e.com/~joe/x",
            "http://e.com/%7Ejoe/x",
            "http://e.com/%7ejoe/x",
            "http://e.com/a%2Fb",
            "http://e.com/a%2fb",
            "http://e.com/caf%C3%A9/menu",
            "http://e.com/café/menu",
            "http://e.com/xAy",
        ] {
            assert!(!r.allowed(&u(blocked)), "{blocked}");
        }
        assert!(
            r.allowed(&u("http://e.com/a/b")),
            "an encoded slash is not a slash"
        );
        assert!(r.allowed(&u("http://e.com/joe/x")));
    }

    /// A robots.txt whose `MAX_ROBOTS_BYTES` cut falls inside its last rule, leaving
    /// `cut_to` of it.
    fn cut_in_a_rule(head: &str, rule: &str, cut_to: &str) -> Vec<u8> {
        let mut body = head.as_bytes().to_vec();
        let room = MAX_ROBOTS_BYTES - body.len() - cut_to.len();
        let filler = "# filler\n".repeat(room / 9 + 1);
        body.extend_from_slice(&filler.as_bytes()[filler.len() - room..]);
        assert!(body.ends_with(b"\n"));
        body.extend_from_slice(rule.as_bytes());
        assert_eq!(
            &body[MAX_ROBOTS_BYTES - cut_to.len()..MAX_ROBOTS_BYTES],
            cut_to.as_bytes()
        );
        body
    }

    #[test]
    fn a_rule_the_size_limit_cuts_in_two_is_left_out() {
        // `Allow: /a/b/c/public` cut to `Allow: /a/b/` would outweigh `Disallow: /a/b`.
        let body = cut_in_a_rule(
            "User-agent: *\nDisallow: /a/b\n",
            "Allow: /a/b/c/public\n",
            "Allow: /a/b/",
        );
        for (what, body) in [
            ("cut here", &body[..MAX_ROBOTS_BYTES]),
            ("longer", &body[..]),
        ] {
            let r = Robots::parse(body, "exitcrawl");
            assert!(!r.allowed(&u("http://e.com/a/b/secret")), "{what}");
        }
        // `Disallow: /private` cut to `Disallow: /` would shut the whole site.
        let body = cut_in_a_rule("User-agent: *\n", "Disallow: /private\n", "Disallow: /");
        let r = Robots::parse(&body[..MAX_ROBOTS_BYTES], "exitcrawl");
        assert!(r.allowed(&u("http://e.com/public")));
        // A body within the limit keeps its last line, newline or not.
        let r = Robots::parse(b"User-agent: *\nDisallow: /x", "exitcrawl");
        assert!(!r.allowed(&u("http://e.com/x")));
    }

    #[test]
    fn helpers() {
        assert_eq!(product_token(" exitcrawl/1.0 foo"), "exitcrawl");
        assert_eq!(product_token("bot"), "bot");
        let x = u("https://a:b@E.com:8443/p?q#f");
        assert_eq!(robots_url(&x).as_str(), "https://e.com:8443/robots.txt");
        assert_eq!(origin_key(&x), "https://e.com:8443");
    }

    #[test]
    fn cache_fetch_once_then_known_then_expire() {
        let t0 = Instant::now();
        let p = RobotsPolicy::default();
        let mut c = RobotsCache::new("exitcrawl", p);
        assert!(matches!(c.lookup("h", t0), RobotsState::Fetch));
        let pending = c.lookup("h", t0);
        assert!(matches!(pending, RobotsState::Wait(t) if t == t0 + p.fetch_timeout));
        c.on_fetched("h", 200, b"User-agent: *\nDisallow: /x\n", t0);
        match c.lookup("h", t0 + Duration::from_secs(10)) {
            RobotsState::Known(r) => assert!(!r.allowed(&u("http://h/x"))),
            s => panic!("{s:?}"),
        }
        assert!(matches!(c.lookup("h", t0 + p.ttl), RobotsState::Fetch));
        // a lost fetch is handed out again after the timeout
        assert!(matches!(
            c.lookup("h", t0 + p.ttl + p.fetch_timeout),
            RobotsState::Fetch
        ));
    }

    #[test]
    fn cache_status_rules_and_backoff() {
        let t0 = Instant::now();
        let p = RobotsPolicy::default();
        let mut c = RobotsCache::new("exitcrawl", p);
        for (status, host) in [(404, "a"), (403, "b"), (301, "c")] {
            assert!(matches!(c.lookup(host, t0), RobotsState::Fetch));
            c.on_fetched(host, status, b"User-agent: *\nDisallow: /\n", t0);
            match c.lookup(host, t0) {
                RobotsState::Known(r) => assert!(r.allowed(&u("http://a/x")), "{status}"),
                s => panic!("{status}: {s:?}"),
            }
        }
        // 5xx: wait retry_base, then retry_base*2, capped at retry_max
        let mut now = t0;
        let mut expect = p.retry_base;
        for status in [503, 500, 429, 502, 503, 503, 503, 503] {
            assert!(matches!(c.lookup("d", now), RobotsState::Fetch));
            c.on_fetched("d", status, b"", now);
            match c.lookup("d", now) {
                RobotsState::Wait(t) => assert_eq!(t - now, expect),
                s => panic!("{s:?}"),
            }
            now += expect;
            expect = (expect * 2).min(p.retry_max);
        }
        assert!(matches!(c.lookup("d", now), RobotsState::Fetch));
        c.on_network_error("d", now);
        assert!(matches!(c.lookup("d", now), RobotsState::Wait(t) if t - now == p.retry_max));
        // success resets
        let later = now + p.retry_max;
        assert!(matches!(c.lookup("d", later), RobotsState::Fetch));
        c.on_fetched("d", 200, b"", later);
        assert!(matches!(c.lookup("d", later), RobotsState::Known(_)));
        assert_eq!(c.len(), 4);
    }
}
