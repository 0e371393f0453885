//! Networking for one exit: an HTTP client whose connections all leave from the exit's
//! source IP.
//!
//! Why this module exists: exitcrawl spreads a crawl over several fixed egress IPs, and a
//! site's rate limits apply per source IP. So every TCP connection must leave from exactly
//! the IP of the exit that the scheduler picked — never from the kernel's default route —
//! and a failure must say whether the exit or the site was at fault.
//!
//! - [`ExitConnector`] (awc connector service): socket2 socket, `IP_BIND_ADDRESS_NO_PORT`,
//!   bind `source_ip:0`, `TCP_NODELAY`, keepalive, non-blocking connect with a timeout.
//! - [`DnsCache`]: resolve each host once per TTL for all exits, not once per connection.
//! - [`build_client`]: the awc client for one exit, from [`ClientOptions`].
//! - [`classify`]: [`FailureKind`] of a failed request, so a local failure moves the fetch
//!   to another exit without counting against the site.
//!
//! `awc::Client` is `!Send` (it holds `Rc`s): build one per exit on the Arbiter that uses it,
//! capturing only the `ClientOptions` (which is `Send`) and a clone of the shared `DnsCache`.

mod classify;
mod connector;
mod dns;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

pub use classify::{classify, classify_connect, FailureKind};
pub use connector::{connect_from, ExitConnector, SocketError, Stage};
pub use dns::{DnsCache, ResolveFuture};

/// Settings of one exit's HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// The exit's source IP; every connection binds to it.
    pub source_ip: IpAddr,
    /// Most connections in use at once, over all hosts (awc's pool limit). 0 = unlimited.
    pub max_concurrent: usize,
    /// Most requests in flight to one host. awc cannot enforce this (its pool limit is one
    /// semaphore across hosts), so [`build_client`] does not use it: the scheduler must
    /// keep at most this many requests per host in flight on this client. Because awc
    /// reuses an idle pooled connection before opening a new one, that also bounds the
    /// open connections per host to about this number.
    pub per_host_connections: usize,
    /// Bound on DNS resolution + TCP connect (+ TLS handshake for https).
    pub connect_timeout: Duration,
    /// Bound on sending the request and receiving the response head (awc's request
    /// timeout; reading the body is bounded separately by the caller).
    pub timeout: Duration,
    /// How long an idle pooled connection may be reused.
    pub keep_alive: Duration,
    /// Redirects followed per request; 0 disables following (awc caps at 255).
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
    /// request, 15 s keep-alive, 5 redirects, 60 s DNS TTL, `exitcrawl/<version>` UA.
    pub fn new(source_ip: IpAddr) -> Self {
        Self {
            source_ip,
            max_concurrent: 64,
            per_host_connections: 8,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
            keep_alive: Duration::from_secs(15),
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
/// - awc's connect timeout (DNS + TCP) and TLS handshake timeout = `connect_timeout`;
/// - pool: `limit = max_concurrent` (one semaphore over all hosts; per-host is the
///   scheduler's job, see [`ClientOptions::per_host_connections`]), idle keep-alive
///   `keep_alive`;
/// - request timeout `timeout`, `max_redirects`, `User-Agent: user_agent`;
/// - [`HttpOnly`] inside awc's redirect middleware: every hop must be http or https.
///
/// Built without compression features, so no `Accept-Encoding` is sent and bodies arrive
/// as the site sent them.
pub fn build_client(opts: &ClientOptions, dns: DnsCache) -> awc::Client {
    install_crypto_provider();
    let connector = awc::Connector::new()
        .connector(ExitConnector::new(
            opts.source_ip,
            dns,
            opts.connect_timeout,
        ))
        .timeout(opts.connect_timeout)
        .handshake_timeout(opts.connect_timeout)
        .limit(opts.max_concurrent)
        .conn_keep_alive(opts.keep_alive);
    let builder = awc::Client::builder()
        .connector(connector)
        .wrap(HttpOnly)
        .timeout(opts.timeout)
        .add_default_header((awc::http::header::USER_AGENT, opts.user_agent.as_str()));
    let builder = match opts.max_redirects {
        0 => builder.disable_redirects(),
        n => builder.max_redirects(u8::try_from(n).unwrap_or(u8::MAX)),
    };
    builder.finish()
}

/// The message of a request (or redirect hop) refused by [`HttpOnly`].
#[derive(Debug)]
pub struct UnsupportedScheme(pub String);

impl std::fmt::Display for UnsupportedScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "redirect to an unsupported scheme refused: {} (only http and https are followed)",
            self.0
        )
    }
}

impl std::error::Error for UnsupportedScheme {}

/// awc middleware that refuses any request whose URI is not http or https, with
/// [`UnsupportedScheme`] (as `SendRequestError::Custom`).
///
/// Why: awc's redirect middleware follows any `Location` and its connector sends plain HTTP
/// for every scheme but https, so `Location: ftp://host:21/` made the exit send an HTTP
/// request to that port (found by the fault tests). [`build_client`] installs this with
/// `wrap` before `finish`, which puts it *inside* the redirect middleware: it sees every
/// hop, not only the first request (which the scheduler has already checked).
#[derive(Debug, Clone, Copy)]
pub struct HttpOnly;

impl<S> awc::middleware::Transform<S, awc::ConnectRequest> for HttpOnly
where
    S: actix_service::Service<
        awc::ConnectRequest,
        Response = awc::ConnectResponse,
        Error = awc::error::SendRequestError,
    >,
{
    type Transform = HttpOnlyService<S>;

    fn new_transform(self, service: S) -> Self::Transform {
        HttpOnlyService(service)
    }
}

/// The service of [`HttpOnly`].
#[derive(Debug)]
pub struct HttpOnlyService<S>(S);

impl<S> actix_service::Service<awc::ConnectRequest> for HttpOnlyService<S>
where
    S: actix_service::Service<
        awc::ConnectRequest,
        Response = awc::ConnectResponse,
        Error = awc::error::SendRequestError,
    >,
{
    type Response = awc::ConnectResponse;
    type Error = awc::error::SendRequestError;
    type Future = futures_util::future::Either<
        S::Future,
        std::future::Ready<Result<awc::ConnectResponse, awc::error::SendRequestError>>,
    >;

    fn poll_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&self, req: awc::ConnectRequest) -> Self::Future {
        let head = match &req {
            awc::ConnectRequest::Client(head, ..) => head.as_ref(),
            awc::ConnectRequest::Tunnel(head, ..) => head,
        };
        match head.uri.scheme_str() {
            Some("http") | Some("https") | Some("ws") | Some("wss") => {
                futures_util::future::Either::Left(self.0.call(req))
            }
            _ => {
                let err = UnsupportedScheme(head.uri.to_string());
                futures_util::future::Either::Right(std::future::ready(Err(
                    awc::error::SendRequestError::Custom(Box::new(err), Box::new("HttpOnly")),
                )))
            }
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Options and the DNS cache cross Arbiters (the client itself cannot).
    #[test]
    fn options_and_cache_are_send() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ClientOptions>();
        assert_send_sync::<DnsCache>();
    }
}
