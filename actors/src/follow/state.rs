//! What the driver hands between the crawler and the core: completed fetches, and the
//! crawler's answers reduced to what `exitcrawl::discover::crawl` decides on.

use std::sync::Arc;
use std::time::Instant;

use crate::headers::Headers;
use exitcrawl::discover::crawl::{Answer, Failure};
use exitcrawl::discover::Entry;
use url::Url;

use crate::messages::{FetchError, FetchErrorKind, FetchResponse};

/// A fetch of the crawl that completed.
pub(super) enum Done {
    Page {
        entry: Entry,
        sent: Instant,
        result: Result<FetchResponse, FetchError>,
        /// The redirect chain that led to it, if any.
        chain: Option<Chain>,
        /// Its asks so far for redirecting to itself.
        again: Again,
    },
    Robots {
        origin: String,
        host: String,
        result: Result<FetchResponse, FetchError>,
    },
    Sitemap {
        url: Url,
        result: Result<FetchResponse, FetchError>,
        /// The redirect chain that led to it, if any.
        chain: Option<Chain>,
    },
}

pub(super) fn is_html(headers: &Headers) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim_start().to_ascii_lowercase();
            v.starts_with("text/html") || v.starts_with("application/xhtml+xml")
        })
}

/// `r` as the core sees it, with `body` standing for its body (a sitemap's decompressed).
pub(super) fn answer<'a>(r: &'a FetchResponse, body: &'a [u8]) -> Answer<'a> {
    Answer {
        status: r.status,
        attempts: r.attempts,
        body,
        final_url: r.final_url.as_deref(),
        location: location(r),
        html: is_html(&r.headers),
        from_public: r.peer_private == Some(false),
    }
}

/// The `Location` of a redirect answer (301, 302, 303, 307, 308), as it came.
fn location(r: &FetchResponse) -> Option<&[u8]> {
    if !matches!(r.status, 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    r.headers.get(http::header::LOCATION).map(|v| v.as_bytes())
}

/// A redirect chain the crawl follows: the exit that read its last redirect (the next
/// hop goes through it: one address, one cookie jar), and whether it has left the origin
/// it began at (the configured credentials stay behind then).
#[derive(Debug, Clone)]
pub(super) struct Chain {
    /// `None` for a chain an earlier run left pending (see `resumed_chains`).
    pub(super) exit: Option<Arc<str>>,
    pub(super) left_origin: bool,
}

/// A page asked again for redirecting to itself: how often, and the attempts and
/// throttles those asks took (its record sums them).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Again {
    pub(super) times: u32,
    pub(super) attempts: u32,
    pub(super) throttled: u32,
}

/// `e` as the core sees it.
pub(super) fn failure(e: &FetchError) -> Failure {
    Failure {
        attempts: e.attempts,
        private: e.kind == FetchErrorKind::PrivateAddress,
        why: e.record_error(),
    }
}

/// The answer `result` as the core sees it.
pub(super) fn outcome(result: &Result<FetchResponse, FetchError>) -> Result<Answer<'_>, Failure> {
    match result {
        Ok(r) => Ok(answer(r, &r.body)),
        Err(e) => Err(failure(e)),
    }
}
