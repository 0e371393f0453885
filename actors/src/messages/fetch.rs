//! A fetch and its outcome: the [`Fetch`] command, the [`FetchResponse`] that answers it,
//! and the [`FetchError`] when no answer came (its [`FetchErrorKind`], the record's
//! `error` vocabulary).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use http::Method;

use crate::headers::Headers;

/// Fetch one URL. Send it to the `SchedulerActor`; the reply comes when the fetch is done
/// (after retries), and there is exactly one reply per `Fetch`, always.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Fetch {
    /// An absolute http(s) URL.
    pub url: String,
    /// The method (default GET).
    pub method: Method,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Request body, if any.
    pub body: Option<Bytes>,
    /// Send through this exit if it is healthy (by name); otherwise through another.
    pub preferred_exit: Option<String>,
    /// Only exits of this region.
    pub region: Option<String>,
    /// The URL was found on a page (or in a sitemap) that came from a public address: it
    /// may not lead to a private one, unless `[crawl] allow_private` (see
    /// [`FetchResponse::peer_private`]). `false` for URLs the user gives, which are
    /// trusted.
    pub from_public: bool,
    /// At most this many throttled answers (429/503) before a throttle is the fetch's
    /// answer. `None` (the default): a throttled fetch waits for its host however often it
    /// is throttled, until the host has refused everything for `crawler.give_up_after_ms`.
    /// A robots.txt fetch sets it: a robots.txt that keeps answering 503 is unavailable.
    pub max_throttles: Option<u32>,
    /// The largest body in bytes for this fetch, on the wire and once decoded; `None`
    /// (the default): `crawler.max_body_bytes`. A sitemap fetch sets the protocol's 50 MB.
    pub max_body_bytes: Option<u64>,
    /// A body over that limit is cut there (the answer says [`FetchResponse::truncated`])
    /// instead of failing with `body_too_large`. A robots.txt fetch sets it: its first
    /// 500 KiB are parsed (RFC 9309 §2.5).
    pub truncate_body: bool,
    /// Follow redirects (the default, up to `crawler.max_redirects`). `false`: a redirect
    /// is the fetch's answer, its `Location` left to the caller. Link following sets it,
    /// so that a redirect's target is asked of robots.txt, the scope and the dedupe as
    /// any link is.
    pub follow_redirects: bool,
    /// Redirects this fetch follows at least, whatever `crawler.max_redirects` says (with
    /// `follow_redirects`). Default 0. A robots.txt fetch sets 5: RFC 9309 asks crawlers
    /// to follow at least five, and a robots.txt left at a redirect would read as none.
    pub min_redirects: u8,
    /// This fetch is a hop of a redirect chain its caller follows, and the chain has
    /// left the origin it began at: the configured credentials (`Authorization`, `Cookie`,
    /// `Proxy-Authorization` of `[crawler] headers`) are not sent, as on a hop the exit
    /// follows itself. Default `false`.
    pub left_origin: bool,
    /// `preferred_exit` holds for the first attempt only: a redirect hop goes through
    /// the exit that read the redirect (one client's session), but an attempt refused
    /// there must not keep the hop on an address the site refuses.
    pub(crate) prefer_first_attempt: bool,
}

impl Fetch {
    /// A GET of `url`.
    pub fn get(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            method: Method::GET,
            headers: Vec::new(),
            body: None,
            preferred_exit: None,
            region: None,
            from_public: false,
            max_throttles: None,
            max_body_bytes: None,
            truncate_body: false,
            follow_redirects: true,
            min_redirects: 0,
            prefer_first_attempt: false,
            left_origin: false,
        }
    }

    /// Do not follow redirects: a redirect is the answer (see [`Fetch::follow_redirects`]).
    pub fn no_redirects(mut self) -> Self {
        self.follow_redirects = false;
        self
    }

    /// Follow at least `n` redirects, whatever `crawler.max_redirects` says (see
    /// [`Fetch::min_redirects`]).
    pub fn follow_at_least(mut self, n: u8) -> Self {
        self.min_redirects = n;
        self
    }

    /// A hop of a redirect chain that has left its first origin: no configured
    /// credentials (see [`Fetch::left_origin`]).
    pub fn off_origin(mut self, left: bool) -> Self {
        self.left_origin = left;
        self
    }

    /// Take the body's first `bytes` (decoded) and cut the rest, instead of failing a
    /// body over the limit; see [`Fetch::truncate_body`].
    pub fn first_bytes(mut self, bytes: u64) -> Self {
        self.max_body_bytes = Some(bytes);
        self.truncate_body = true;
        self
    }

    /// Allow a body of up to `bytes` (on the wire and decoded) for this fetch, instead of
    /// `crawler.max_body_bytes`; see [`Fetch::max_body_bytes`].
    pub fn body_limit(mut self, bytes: u64) -> Self {
        self.max_body_bytes = Some(bytes);
        self
    }

    /// Let at most `n` throttled answers wait for the host; the next one is the fetch's
    /// answer (see [`Fetch::max_throttles`]).
    pub fn throttle_waits(mut self, n: u32) -> Self {
        self.max_throttles = Some(n);
        self
    }

    /// Mark the URL as found on a page (or in a sitemap) that came from a public address
    /// (`true`), so it may not lead to a private one; see [`Fetch::from_public`].
    pub fn found_on_public(mut self, from_public: bool) -> Self {
        self.from_public = from_public;
        self
    }

    /// Prefer the exit named `name`.
    pub fn prefer(mut self, name: impl Into<String>) -> Self {
        self.preferred_exit = Some(name.into());
        self
    }

    /// Send the first attempt through exit `name` (a redirect hop, through the exit that
    /// read the redirect: one client's session); an attempt that does not end the fetch
    /// (a refused connection, a throttle of that address) lets the next go through any.
    pub(crate) fn prefer_first(mut self, name: impl Into<String>) -> Self {
        self.preferred_exit = Some(name.into());
        self.prefer_first_attempt = true;
        self
    }

    /// Only exits in `region`.
    pub fn in_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Add a request header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

impl Message for Fetch {
    type Result = Result<FetchResponse, FetchError>;
}

/// The site's final answer to a [`Fetch`] (any status: a 404 is an answer, not an error;
/// a 429 or 503 is returned when retries did not overcome it).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FetchResponse {
    /// The URL as requested.
    pub url: String,
    /// The URL the answer came from, when redirects were followed to get it (`None`
    /// when it came from `url` itself). Relative links in the body resolve against it.
    pub final_url: Option<String>,
    /// HTTP status of the final attempt.
    pub status: u16,
    /// Response headers of the final attempt (names and values of the `http` crate; see
    /// [`Headers`] for why not an `http::HeaderMap`).
    pub headers: Headers,
    /// Response body, decoded (at most `crawler.max_body_bytes`, on the wire and once
    /// decoded). When it came
    /// encoded, `Content-Encoding` and `Content-Length` are taken off `headers` (they
    /// described the encoded body) and the encoding is in `content_encoding`.
    pub body: Bytes,
    /// Body bytes as they came over the wire: the encoded size of a compressed answer.
    pub wire_bytes: u64,
    /// The body is the first `max_body_bytes` of a longer one, cut there as the fetch
    /// asked ([`Fetch::first_bytes`]); `false` for a whole body (the only kind without
    /// that request: a longer one fails).
    pub truncated: bool,
    /// The `Content-Encoding` the body came in and was decoded from (`gzip`, `br`,
    /// `zstd`, `deflate`), if any.
    pub content_encoding: Option<String>,
    /// Whether the final answer came from a private address (loopback, private,
    /// link-local, unspecified): links found on it may then lead to private addresses too
    /// (hand them on with [`Fetch::found_on_public`]`(false)`). `None` when the rule is
    /// lifted (`[crawl] allow_private`) and nothing was checked.
    pub peer_private: Option<bool>,
    /// The final answer was asked for off the origin the fetch began at (a redirect the
    /// exit followed left it, or the fetch was a hop [`Fetch::off_origin`]): the
    /// configured credentials (`Authorization`, `Cookie`, `Proxy-Authorization` of
    /// `[crawler] headers`) were not sent with it.
    pub left_origin: bool,
    /// Name of the exit that got the final answer (shared with the scheduler: a copy
    /// of the name per fetch was a measurable share of its cost).
    pub exit: Arc<str>,
    /// HTTP attempts sent for this fetch (1 + retries).
    pub attempts: u32,
    /// 429/503 answers received over all attempts.
    pub throttled: u32,
    /// From the `Fetch` arriving to the reply.
    pub elapsed: Duration,
}

impl FetchResponse {
    /// Where this answer redirects, when it is a redirect (301, 302, 303, 307, 308 with a
    /// `Location`) that was not followed ([`Fetch::no_redirects`]): the target resolved
    /// against the URL that answered, or why it cannot be followed (only http and https,
    /// never port 0, as the exits follow redirects). `None` for any other answer.
    pub fn redirect_target(&self) -> Option<Result<url::Url, String>> {
        if !matches!(self.status, 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        let location = self.headers.get(http::header::LOCATION)?;
        let location = String::from_utf8_lossy(location.as_bytes());
        let at = self.final_url.as_deref().unwrap_or(&self.url);
        let next = match url::Url::parse(at).and_then(|base| base.join(&location)) {
            Ok(next) => next,
            Err(e) => {
                return Some(Err(format!(
                    "redirect to an unusable Location {location:?}: {e}"
                )))
            }
        };
        Some(if !matches!(next.scheme(), "http" | "https") {
            Err(format!(
                "redirect to an unsupported scheme refused: {next} (only http and https are followed)"
            ))
        } else if next.port() == Some(0) {
            Err(format!(
                "redirect to port 0 refused: {next} (ports are 1 to 65535)"
            ))
        } else {
            Ok(next)
        })
    }
}

/// What kind of failure ended a fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FetchErrorKind {
    /// The URL is not an absolute http(s) URL.
    InvalidUrl,
    /// `preferred_exit` names no configured exit.
    UnknownExit,
    /// No exit matches the requested region.
    NoRegion,
    /// Every exit is ejected or disabled, and none came back within the wait.
    NoHealthyExit,
    /// The request timed out (connect or response).
    Timeout,
    /// The connection was refused.
    ConnectRefused,
    /// The host's name did not resolve: it does not exist, has no address, or the
    /// resolver failed (the message says which). A temporary failure (`EAI_AGAIN`, a
    /// resolver timeout) is retried like a timeout; the others are final.
    Dns,
    /// The connection was reset or closed without an answer.
    Reset,
    /// No exit could even open a connection (all failed locally).
    LocalConnect,
    /// The exit's proxy could not be reached or refused the tunnel (407, 403, a SOCKS5
    /// refusal), on every exit tried: the message names the proxy (password masked).
    Proxy,
    /// No exit of the host's address family (IPv4 exits for an IPv6-only host, or the
    /// other way round).
    AddressFamily,
    /// The response body was larger than `crawler.max_body_bytes` (the message says
    /// whether on the wire, once decoded, or as its `Content-Length` announced).
    BodyTooLarge,
    /// The connection ended before the body its framing announced was all there
    /// (`Content-Length` not reached, a chunk cut short, no last chunk, a TLS stream cut
    /// without its close, a compressed body read until the close whose stream stops
    /// short): retried like a reset; the part that came is never handed on.
    IncompleteBody,
    /// The answer's HTTP framing does not parse (a garbage status line or head, a chunk
    /// size that is not hexadecimal): the site's doing, not retried.
    Malformed,
    /// The body does not decode from its `Content-Encoding` (invalid gzip, deflate,
    /// brotli or zstd): the site's doing, not retried.
    DecodeError,
    /// More redirects than `crawler.max_redirects`.
    TooManyRedirects,
    /// A link or redirect from a public address led to a private one (loopback, private,
    /// link-local, unspecified), checked on the address connected to; `[crawl]
    /// allow_private = true` lifts the rule.
    PrivateAddress,
    /// The crawler is shutting down.
    Shutdown,
    /// Its host refused every request for `crawler.give_up_after_ms`, or asked every exit
    /// that may take the URL for a pause longer than `crawler.max_retry_after_ms`: the URL
    /// was given up (its last
    /// answer, if any, was a throttle). The message says which, with the site's value.
    ThrottledOut,
    /// robots.txt of the URL's origin disallows it for our user agent, or is unavailable
    /// (a 5xx, 429 or no answer: disallowed until a retry); the message names the
    /// robots.txt and the user agent. Nothing was sent to the URL.
    Robots,
    /// Anything else (TLS, …); the message says what.
    Other,
}

impl FetchErrorKind {
    /// A short stable name (`timeout`, `connect_refused`, …) for logs and records.
    pub fn as_str(self) -> &'static str {
        match self {
            FetchErrorKind::InvalidUrl => "invalid_url",
            FetchErrorKind::UnknownExit => "unknown_exit",
            FetchErrorKind::NoRegion => "no_region",
            FetchErrorKind::NoHealthyExit => "no_healthy_exit",
            FetchErrorKind::Timeout => "timeout",
            FetchErrorKind::ConnectRefused => "connect_refused",
            FetchErrorKind::Dns => "dns",
            FetchErrorKind::Reset => "reset",
            FetchErrorKind::LocalConnect => "local_connect",
            FetchErrorKind::Proxy => "proxy",
            FetchErrorKind::AddressFamily => "address_family",
            FetchErrorKind::BodyTooLarge => "body_too_large",
            FetchErrorKind::IncompleteBody => "incomplete_body",
            FetchErrorKind::Malformed => "malformed",
            FetchErrorKind::DecodeError => "decode_error",
            FetchErrorKind::TooManyRedirects => "too_many_redirects",
            FetchErrorKind::PrivateAddress => "private_address",
            FetchErrorKind::Shutdown => "shutdown",
            FetchErrorKind::ThrottledOut => "throttled_out",
            FetchErrorKind::Robots => "robots",
            FetchErrorKind::Other => "other",
        }
    }
}

/// The record error of [`FetchErrorKind::PrivateAddress`].
pub const PRIVATE_REFUSED: &str = "private address refused";

/// A fetch that ended without an HTTP answer.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FetchError {
    /// What happened.
    pub kind: FetchErrorKind,
    /// A readable account of it.
    pub message: String,
    /// The URL as requested.
    pub url: String,
    /// The exit of the last attempt, if any was made.
    pub exit: Option<Arc<str>>,
    /// HTTP attempts sent.
    pub attempts: u32,
    /// 429/503 answers received over all attempts.
    pub throttled: u32,
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.url, self.message, self.kind.as_str())
    }
}

impl std::error::Error for FetchError {}

impl FetchError {
    /// The `error` of a record of this failure: `"kind: message"`, but exactly `"private
    /// address refused"` for the private-address rule (its details are logged), so
    /// records can be matched on it.
    pub fn record_error(&self) -> String {
        match self.kind {
            FetchErrorKind::PrivateAddress => PRIVATE_REFUSED.to_string(),
            kind => format!("{}: {}", kind.as_str(), self.message),
        }
    }

    /// A fetch answered before any attempt was sent (invalid URL, shutting down, …).
    pub(crate) fn unsent(kind: FetchErrorKind, message: impl Into<String>, url: String) -> Self {
        FetchError {
            kind,
            message: message.into(),
            url,
            exit: None,
            attempts: 0,
            throttled: 0,
        }
    }

    /// A fetch that ended before any attempt because the crawler stopped or is stopping.
    pub(crate) fn shutdown(url: String, message: impl Into<String>) -> Self {
        Self::unsent(FetchErrorKind::Shutdown, message, url)
    }
}
