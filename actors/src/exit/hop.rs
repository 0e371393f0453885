//! One hop of a request: where it goes, what it may connect to, and how a redirect
//! moves it on.

use awc::http::header::HeaderValue;
use awc::http::{Method, Uri};
use bytes::Bytes;
use url::Url;

use crate::messages::{AttemptFailure, FetchErrorKind};
use exitcrawl::outcome::Failure;

/// Where one hop of a request goes, and how.
///
/// Why the exit follows redirects itself instead of awc's redirect middleware: the crawl
/// needs the URL an answer finally came from (links resolve against it), which awc does
/// not report, and every hop's scheme must be checked (awc's middleware sends plain HTTP
/// for any scheme but https, so `Location: ftp://host:21/` reached port 21).
///
/// The private-address rule, hop by hop: a hop led to from a public address (a link on
/// a public page, a redirect from a public address) may reach public addresses only
/// (`public_only`); any other hop goes where its host resolves, and which kind of address
/// that was is kept in `private` — it decides the next hop's reach, and it is what the
/// answer reports (links on a page from a private address may lead to private ones).
pub(crate) struct Hop {
    pub(super) uri: Uri,
    pub(super) method: Method,
    pub(super) body: Option<Bytes>,
    /// A redirect went to another scheme, host or port: credentials stay behind.
    pub(super) cross_origin: bool,
    /// Led to from a public address: private targets are refused.
    pub(super) public_only: bool,
    /// Whether the address this hop goes to is private, once the exit has decided (`None`
    /// before that, and always when the rule is lifted).
    pub(super) private: Option<bool>,
    /// This request's body limit, if not the exit's (see [`crate::Fetch::max_body_bytes`]).
    pub(super) body_limit: Option<u64>,
    /// A body over the limit is cut, not refused (see [`crate::Fetch::truncate_body`]).
    pub(super) truncate: bool,
    /// Redirects are followed (see [`crate::Fetch::follow_redirects`]).
    pub(super) follow_redirects: bool,
    /// At least this many, whatever the exit's limit (see [`crate::Fetch::min_redirects`]).
    pub(super) min_redirects: usize,
}

impl Hop {
    /// The first hop of a request.
    pub(crate) fn new(uri: Uri, method: Method, body: Option<Bytes>) -> Self {
        Self {
            uri,
            method,
            body,
            cross_origin: false,
            public_only: false,
            private: None,
            body_limit: None,
            truncate: false,
            follow_redirects: true,
            min_redirects: 0,
        }
    }

    /// A hop of a chain its caller follows that has left its first origin: credentials
    /// stay behind, as past a redirect this exit follows.
    pub(crate) fn off_origin(mut self, left: bool) -> Self {
        self.cross_origin = left;
        self
    }

    /// Follow redirects from this hop (`true`), at least `at_least` of them, or answer
    /// with them.
    pub(crate) fn redirects(mut self, follow: bool, at_least: u8) -> Self {
        self.follow_redirects = follow;
        self.min_redirects = usize::from(at_least);
        self
    }

    /// Allow a body of `limit` bytes for this request, if set; `truncate`: cut a longer
    /// one there instead of refusing it.
    pub(crate) fn body_limit(mut self, limit: Option<u64>, truncate: bool) -> Self {
        self.body_limit = limit;
        self.truncate = truncate;
        self
    }

    /// A hop led to from a public address (`from_public`: a link found on a page that
    /// came from one): it may not reach a private address.
    pub(crate) fn led_from_public(mut self, from_public: bool) -> Self {
        self.public_only = from_public;
        self
    }

    /// Move to `location` (relative to this hop), as browsers and awc do: 301/302/303
    /// turn any method but GET and HEAD into a bodyless GET; 307/308 keep both.
    pub(super) async fn follow(
        &mut self,
        mut resp: awc::ClientResponse,
        location: &str,
    ) -> Result<(), AttemptFailure> {
        let unusable = |why: String| AttemptFailure {
            kind: Failure::Other,
            error: FetchErrorKind::Other,
            message: why,
        };
        let unusable_location = |e: url::ParseError| {
            unusable(format!(
                "redirect to an unusable Location {location:?}: {e}"
            ))
        };
        let base = Url::parse(&self.uri.to_string()).map_err(unusable_location)?;
        let next = base.join(location).map_err(unusable_location)?;
        if !matches!(next.scheme(), "http" | "https") {
            return Err(unusable(format!(
                "redirect to an unsupported scheme refused: {next} (only http and https are followed)"
            )));
        }
        // The parser takes port 0, which no request can go to: refused as a listed URL
        // with port 0 is, before anything is dialled.
        if next.port() == Some(0) {
            return Err(unusable(format!(
                "redirect to port 0 refused: {next} (ports are 1 to 65535)"
            )));
        }
        let uri: Uri = next.as_str().parse().map_err(|e| {
            unusable(format!(
                "redirect to an unusable Location {location:?}: {e}"
            ))
        })?;
        // Read a small redirect body so the connection can go back to the pool — if it
        // comes at once: the body's read has no deadline of its own (the request's timer
        // ended with the head), and a site that sends the head and then nothing would hold
        // the fetch, and its exit's slot, for good. Given up, the connection is dropped.
        let _ =
            actix_rt::time::timeout(REDIRECT_DRAIN_WAIT, resp.body().limit(REDIRECT_BODY_LIMIT))
                .await;
        // Origins as URLs have them: `https://API.example.com:443` and the `/v1/` it
        // redirects to are one origin (compared raw, the host's case and the default port
        // would tell them apart and leave the credentials behind).
        if base.origin() != next.origin() {
            self.cross_origin = true;
        }
        if !matches!(resp.status().as_u16(), 307 | 308) {
            if self.method != Method::GET && self.method != Method::HEAD {
                self.method = Method::GET;
            }
            self.body = None;
        }
        self.uri = uri;
        // A redirect from a public address is a link from one.
        self.public_only = self.private == Some(false);
        self.private = None;
        Ok(())
    }
}

/// At most this much of a redirect's body is read (and dropped) before the next hop.
pub(super) const REDIRECT_BODY_LIMIT: usize = 64 * 1024;

/// How long a redirect's body (or a health check's) is waited for before its connection
/// is dropped instead of reused.
pub(super) const REDIRECT_DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The `Location` of a redirect answer (301, 302, 303, 307, 308 with the header).
pub(super) fn redirect_location<S>(resp: &awc::ClientResponse<S>) -> Option<String> {
    let location = location_header(resp)?;
    Some(String::from_utf8_lossy(location.as_bytes()).into_owned())
}

/// The `Location` header of a redirect status, without copying it.
pub(super) fn location_header<S>(resp: &awc::ClientResponse<S>) -> Option<&HeaderValue> {
    if !matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    resp.headers().get(awc::http::header::LOCATION)
}

pub(crate) use exitcrawl::redact::is_credential;
