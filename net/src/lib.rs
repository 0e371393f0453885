//! # exitcrawl-net
//!
//! Networking for one exit: an HTTP client whose connections all leave from the exit's
//! source IP; and the runtime's clock that the crawler's I/O layers read ([`clock`]).
//!
//! Why this module exists: exitcrawl spreads a crawl over several fixed egress IPs, and a
//! site's rate limits apply per source IP. So every TCP connection must leave from exactly
//! the IP of the exit that the scheduler picked — never from the kernel's default route —
//! and a failure must say whether the exit or the site was at fault.
//!
//! - [`ExitConnector`] (awc connector service): socket2 socket, `IP_BIND_ADDRESS_NO_PORT`,
//!   bind `source_ip:0`, `TCP_NODELAY`, keepalive, non-blocking connect, the whole connect
//!   within the connect timeout.
//! - [`DnsCache`]: resolve each host once per TTL for all exits, not once per connection.
//! - [`build_client`]: the awc client for one exit, from [`ClientOptions`].
//! - [`classify`]: the core's [`Failure`](exitcrawl::outcome::Failure) of a failed request, so a local failure moves the fetch
//!   to another exit without counting against the site.
//!
//! `awc::Client` is `!Send` (it holds `Rc`s): build one per exit on the Arbiter that uses it,
//! capturing only the `ClientOptions` (which is `Send`) and a clone of the shared `DnsCache`.

mod classify;
pub mod clock;
mod connector;
mod dns;
pub mod process;
mod proxy;
mod renew;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use awc::http::Uri;

pub use classify::{classify, classify_connect, refusal, resolver_failure};
pub use connector::{connect_from, test_bind, ExitConnector, Reach, SocketError, Stage};
pub use dns::{Addrs, DnsCache, ResolveFuture};
pub use renew::Renewing;

/// What exitcrawl's clients ask for in `Accept-Encoding`: the encodings the crawler
/// decodes itself, within a body limit (`exitcrawl-actors`' `body.rs`).
pub const ACCEPT_ENCODING: &str = "gzip, deflate, br, zstd";

/// Settings of one exit's HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// The exit's source IP; every connection binds to it (to the site, or to the proxy).
    /// Unspecified (`0.0.0.0`): not bound, the kernel picks.
    pub source_ip: IpAddr,
    /// The proxy every connection is tunnelled through; `None` connects directly.
    pub proxy: Option<exitcrawl::proxy::ProxyUrl>,
    /// Most connections in use at once, over all hosts (awc's pool limit). 0 = unlimited.
    pub max_concurrent: usize,
    /// Most requests in flight to one host. awc cannot enforce this (its pool limit is one
    /// semaphore across hosts), so [`build_client`] does not use it: the scheduler must
    /// keep at most this many requests per host in flight on this client. Because awc
    /// reuses an idle pooled connection before opening a new one, that also bounds the
    /// open connections per host to about this number.
    pub per_host_connections: usize,
    /// Bound on opening a connection: resolving the name and the TCP connect, every address
    /// tried included (through a proxy: its connect and handshake too), all within this one
    /// budget. The TLS handshake for https is bounded by it separately.
    pub connect_timeout: Duration,
    /// Bound on sending the request and receiving the response head (awc's request
    /// timeout; reading the body is bounded separately by the caller).
    pub timeout: Duration,
    /// How long an idle pooled connection may be reused.
    pub keep_alive: Duration,
    /// Hosts an exit's client serves before the exit replaces it with a fresh one, which
    /// closes the old one's idle connections (see `Renewing`). [`build_client`] builds one
    /// client and leaves renewal to its caller.
    pub pool_hosts: usize,
    /// Redirects followed per request; 0 disables following.
    pub max_redirects: usize,
    /// `User-Agent` on every request.
    pub user_agent: String,
    /// TTL for the shared DNS cache: create it with `DnsCache::new(opts.dns_ttl)` once and
    /// pass clones to every exit's [`build_client`] (the cache is shared, so its TTL is
    /// fixed at creation, not per client).
    pub dns_ttl: Duration,
}

impl ClientOptions {
    /// Defaults for the given source IP: 64 connections, 8 per host, 5 s connect, 30 s
    /// request, 15 s keep-alive, 256 hosts per pool, 5 redirects, 60 s DNS TTL, `exitcrawl/<version>` UA.
    pub fn new(source_ip: IpAddr) -> Self {
        Self {
            source_ip,
            proxy: None,
            max_concurrent: 64,
            per_host_connections: 8,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
            keep_alive: Duration::from_secs(15),
            pool_hosts: 256,
            max_redirects: 5,
            user_agent: concat!("exitcrawl/", env!("CARGO_PKG_VERSION")).to_owned(),
            dns_ttl: Duration::from_secs(60),
        }
    }
}

impl Default for ClientOptions {
    /// [`ClientOptions::new`] with source `0.0.0.0` (kernel picks the source address).
    fn default() -> Self {
        Self::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }
}

/// Build the awc client of one exit. Must be called on the Arbiter that will use it.
///
/// - TCP via [`ExitConnector`] bound to `opts.source_ip`, resolving through `dns`;
/// - the connector keeps DNS + TCP (+ the proxy's handshake) within `connect_timeout`;
///   awc's connect timeout lies [`CONNECT_TIMEOUT_MARGIN`] beyond it; TLS handshake
///   timeout = `connect_timeout`;
/// - pool: `limit = max_concurrent` (one semaphore over all hosts; per-host is the
///   scheduler's job, see [`ClientOptions::per_host_connections`]), idle keep-alive
///   `keep_alive`;
/// - request timeout `timeout`, `User-Agent: user_agent`;
/// - redirects not followed: the exit follows them itself, checking every hop's scheme
///   and keeping the final URL (see `exit.rs`).
///
/// Built without compression features, so no `Accept-Encoding` is sent and bodies arrive
/// as the site sent them.
pub fn build_client(opts: &ClientOptions, dns: DnsCache) -> awc::Client {
    build_client_reaching(opts, dns, Reach::Any)
}

/// [`build_client`] whose connections go only to the addresses `reach` allows. A client
/// per reach keeps the pools apart: a connection opened for one is never reused for the
/// other.
pub fn build_client_reaching(opts: &ClientOptions, dns: DnsCache, reach: Reach) -> awc::Client {
    install_crypto_provider();
    // HTTP/1.1 alone in ALPN: awc's HTTP/2 client adds `content-length: 0` to every GET
    // and bypasses the patched HTTP/1.1 codec (docs/operating.md), so a site that speaks
    // both is asked over the one this crate fixes.
    let connector = awc::Connector::new()
        .max_http_version(awc::http::Version::HTTP_11)
        .connector(
            ExitConnector::new(opts.source_ip, dns, connect_deadline(opts))
                .reaching(reach)
                .through(opts.proxy.clone()),
        )
        // The connector keeps to `connect_timeout` itself and says whose step ran out of
        // time, the site's or the proxy's; awc's timer can only say "timeout" (the site's),
        // so it is a safety net that must never fire first.
        .timeout(opts.connect_timeout + CONNECT_TIMEOUT_MARGIN)
        .handshake_timeout(opts.connect_timeout)
        .limit(opts.max_concurrent)
        .conn_keep_alive(opts.keep_alive);
    awc::Client::builder()
        .connector(connector)
        .disable_redirects()
        .timeout(opts.timeout)
        .add_default_header((awc::http::header::USER_AGENT, opts.user_agent.as_str()))
        // Decoded by the exit itself, within the body limit (see `body.rs`).
        .add_default_header((awc::http::header::ACCEPT_ENCODING, ACCEPT_ENCODING))
        .finish()
}

/// The connector's own deadline: `connect_timeout`, but ending a little before the
/// request's whole `timeout` where the two are (nearly) equal. awc's request timer starts
/// before the connector does and says only "timeout" (the site's); a stalled proxy must be
/// told as the connector tells it, the exit's fault.
fn connect_deadline(opts: &ClientOptions) -> Duration {
    const LEAD: Duration = Duration::from_millis(50);
    opts.connect_timeout
        .min(opts.timeout.saturating_sub(LEAD))
        .max(opts.connect_timeout.min(LEAD))
}

/// How far beyond the connector's own deadline awc's connect timeout lies. Only a
/// connector that failed to keep its deadline would meet it; a second is far more than a
/// late poll on a busy arbiter can add.
pub const CONNECT_TIMEOUT_MARGIN: Duration = Duration::from_secs(1);

/// Make ring rustls's process-wide crypto provider. awc builds its rustls `ClientConfig` in
/// `Connector::new()`, and rustls 0.23 panics there if it cannot pick a provider — which
/// happens as soon as both ring and aws-lc-rs are enabled anywhere in the build. Installing
/// one explicitly keeps that from depending on other crates' features. Later calls (and a
/// provider installed by the application first) are fine: the first one wins.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The host of a URI's authority, as `Uri::host` gives it (an IPv6 literal keeps its
/// brackets).
#[inline]
pub fn host_of(uri: &Uri) -> Option<&str> {
    host_and_port(uri).map(|(host, _)| host)
}

/// A URI's authority split into its host (as [`host_of`] gives it) and the port's text
/// after the `:` (empty when there is none), found with byte searches: `Uri::host` splits
/// by `char` patterns, which showed as a measurable share of admission. `#[inline]`:
/// the scheduler calls it for every fetch, from another crate.
#[inline]
pub fn host_and_port(uri: &Uri) -> Option<(&str, &str)> {
    let auth = uri.authority()?.as_str();
    let host_port = match auth.bytes().rposition(|b| b == b'@') {
        Some(at) => &auth[at + 1..],
        None => auth,
    };
    let host_end = if host_port.starts_with('[') {
        host_port.bytes().position(|b| b == b']')? + 1
    } else {
        host_port
            .bytes()
            .position(|b| b == b':')
            .unwrap_or(host_port.len())
    };
    let (host, rest) = host_port.split_at(host_end);
    Some((host, rest.strip_prefix(':').unwrap_or(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_agrees_with_uri_host() {
        for url in [
            "http://example.com/",
            "http://Example.COM:8080/x",
            "https://user:pw@example.com:443/a?b#c",
            "http://user@[::1]:8080/",
            "http://[2001:db8::1]/",
            "http://127.0.0.1:1234",
            "http://a@b@c:80/",
            "http://example.com:/",
        ] {
            let uri: Uri = url.parse().expect(url);
            assert_eq!(host_of(&uri), uri.host(), "{url}");
        }
    }

    /// Options and the DNS cache cross Arbiters (the client itself cannot).
    #[test]
    fn options_and_cache_are_send() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ClientOptions>();
        assert_send_sync::<DnsCache>();
    }
}
