//! # exitcrawl-testsite — a real HTTP site on loopback for tests, benches and the demo
//!
//! Why: exitcrawl's claims ("never exceeds the site's limit", "backs off on 429", "each exit
//! is seen from its own IP", "an exit the site refuses gets ejected") are about what a
//! *server* observes. This crate is that server: it enforces a rate limit like a real site
//! would, and records what it saw from each peer IP, so tests can assert on the site's view
//! rather than on the crawler's own bookkeeping.
//!
//! [`TestSite::start`] binds `127.0.0.1:0` and serves HTTP/1.1 (actix-http's server on a
//! plain tokio listener) on its own thread with its own actix `System`, so callers in any
//! runtime — `#[actix_rt::test]`, plain `#[test]`, another System — can use it. On Linux a
//! client can bind any address in 127.0.0.0/8 (127.0.0.2, 127.0.0.3, …) and the site sees
//! those as distinct peers, which is how several exits are modelled on one machine.
//!
//! Behaviour, per request:
//! 1. a peer marked failing ([`TestSite::set_fail_peer`]) gets 503, or with
//!    [`FailMode::Close`] its connections are closed without an answer;
//! 2. `/health` answers 200 or 500 ([`TestSite::set_health`]); it is not rate limited;
//! 3. the rate limit ([`Limit`]) is checked at arrival with an exact token bucket; over the
//!    limit answers 429, with `Retry-After` per [`RetryAfter`];
//! 4. anything else answers 200 with a body of [`SiteConfig::body_size`] bytes — or, if
//!    [`SiteConfig::pages`] is set, whatever that generator returns for the host and path
//!    (404 when it returns `None`);
//! 5. every answer is delayed by [`SiteConfig::latency`] (the request counts as in flight
//!    meanwhile), then logged as a [`RequestRecord`].
//!
//! Every site also has a second listener, the *fault listener* ([`TestSite::fault_url`],
//! module [`fault`]): a hand-written HTTP/1.1 loop on a raw socket that misbehaves per
//! request and reproducibly — by path (`/fault/<code>/<tag>`, see [`Fault`]) or by the seeded
//! [`SiteConfig::faults`] mix — and records every request at arrival with what it did.
//!
//! Time here is real (`std::time::Instant`): the server is real. Keep latencies and rate
//! windows in milliseconds in tests.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod bucket;
pub mod fault;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use actix_http::body::BoxBody;
use actix_http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use actix_http::{ConnectionType, HttpServiceBuilder, KeepAlive, Request, Response, StatusCode};
use actix_service::{fn_service, Service, ServiceFactory};
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

pub use bucket::Rate;
use bucket::TokenBucket;
pub use fault::{Fault, FaultMix, RetryHint, HANG_MAX};

/// The path that answers 200 or 500 depending on [`TestSite::set_health`].
pub const HEALTH_PATH: &str = "/health";

/// Which rate limit the site enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Limit {
    /// No limit: every request is served.
    #[default]
    None,
    /// One token bucket per peer IP (what most sites do per client address).
    PerPeer(Rate),
    /// One token bucket shared by all peers (a site-wide capacity limit).
    Global(Rate),
}

/// What a 429 says about when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryAfter {
    /// No `Retry-After` header: the client must guess.
    Omit,
    /// `Retry-After: N` with N = seconds until a token is available, rounded up, at least 1.
    #[default]
    Computed,
    /// `Retry-After: N` with a fixed N.
    Fixed(u64),
}

/// How the site treats a peer marked failing with [`TestSite::set_fail_peer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Answer 503 (with `Connection: close`).
    #[default]
    Status503,
    /// Close the connection without answering: new connections are closed at accept,
    /// open ones when their next request arrives.
    Close,
}

/// Configuration of a [`TestSite`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfig {
    /// The rate limit to enforce.
    pub limit: Limit,
    /// `Retry-After` on 429 answers.
    pub retry_after: RetryAfter,
    /// Added to every answer before it is sent.
    pub latency: Duration,
    /// Size in bytes of a 200 answer's body.
    pub body_size: usize,
    /// How a failing peer is treated.
    pub fail_mode: FailMode,
    /// Keep the per-request log ([`TestSite::requests`]). Counters are always kept; turn
    /// the log off for long benches so memory stays flat.
    pub log_requests: bool,
    /// Serve generated pages instead of the fixed body (default `None`). Rate limits,
    /// failing peers and `/health` still come first.
    pub pages: Option<Pages>,
    /// The fault listener's mix for paths that do not name a fault (`/fault/…` paths
    /// always get theirs). `None`: such paths answer 200.
    pub faults: Option<FaultMix>,
}

/// A page returned by a [`Pages`] generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
    /// `Location` header value, for redirects.
    pub location: Option<String>,
}

impl Page {
    /// A 200 `text/html; charset=utf-8` page.
    pub fn html(body: impl Into<Bytes>) -> Page {
        Page {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: body.into(),
            location: None,
        }
    }

    /// A 200 `text/plain` page (e.g. robots.txt).
    pub fn text(body: impl Into<Bytes>) -> Page {
        Page {
            status: 200,
            content_type: "text/plain",
            body: body.into(),
            location: None,
        }
    }

    /// A redirect (`status` 301, 302, 303, 307 or 308) to `location`, as given.
    pub fn redirect(status: u16, location: impl Into<String>) -> Page {
        Page {
            status,
            content_type: "text/plain",
            body: Bytes::from_static(b"moved"),
            location: Some(location.into()),
        }
    }
}

/// A page generator for [`SiteConfig::pages`]: called once per admitted request with the
/// request's `Host` header (e.g. `localhost:41234`; empty if absent) and its path with
/// query; `None` answers 404. Served in place of the fixed body, so a site of any shape
/// (interlinked HTML, robots.txt, several virtual hosts on one port) needs no files.
/// Compares equal only to clones of itself.
#[derive(Clone)]
#[allow(clippy::type_complexity)]
pub struct Pages(Arc<dyn Fn(&str, &str) -> Option<Page> + Send + Sync>);

impl Pages {
    /// Wrap a generator `f(host, path_and_query)`.
    pub fn new(f: impl Fn(&str, &str) -> Option<Page> + Send + Sync + 'static) -> Pages {
        Pages(Arc::new(f))
    }

    fn get(&self, host: &str, path_and_query: &str) -> Page {
        (self.0)(host, path_and_query).unwrap_or(Page {
            status: 404,
            content_type: "text/plain",
            body: Bytes::from_static(b"not found"),
            location: None,
        })
    }
}

impl std::fmt::Debug for Pages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pages(..)")
    }
}

impl PartialEq for Pages {
    fn eq(&self, other: &Pages) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Pages {}

impl Default for SiteConfig {
    /// No limit, `Retry-After` computed, no latency, 1 KiB bodies, 503 for failing peers,
    /// request log on, no generated pages.
    fn default() -> Self {
        Self {
            limit: Limit::None,
            retry_after: RetryAfter::Computed,
            latency: Duration::ZERO,
            body_size: 1024,
            fail_mode: FailMode::Status503,
            log_requests: true,
            pages: None,
            faults: None,
        }
    }
}

/// What the site saw from one peer IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerStats {
    /// TCP connections accepted (including ones closed at once because the peer fails).
    pub connections: u64,
    /// HTTP requests received (every status).
    pub requests: u64,
    /// Answered 200 (including `/health` when healthy).
    pub ok: u64,
    /// Answered 429.
    pub limited: u64,
    /// Answered 503 because the peer was failing, or 500 from `/health`.
    pub failed: u64,
    /// Connections closed without an answer because the peer was failing ([`FailMode::Close`]);
    /// on the fault listener, requests that got no status line (close, hang, garbage).
    pub closed: u64,
    /// Requests in flight right now (received, answer not yet sent).
    pub in_flight: u64,
    /// The most requests ever in flight at once from this peer.
    pub peak_in_flight: u64,
}

/// A snapshot of everything the site counted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SiteStats {
    /// Requests received from all peers.
    pub requests: u64,
    /// 429s sent to all peers.
    pub limited: u64,
    /// Requests in flight right now, all peers.
    pub in_flight: u64,
    /// The most requests ever in flight at once, all peers together.
    pub peak_in_flight: u64,
    /// Per peer IP.
    pub peers: BTreeMap<IpAddr, PeerStats>,
    /// Body bytes the fault listener wrote for [`Fault::BigBody`] and [`Fault::Trickle`]
    /// (what a client that cuts bodies off made the site send).
    pub fault_body_bytes: u64,
}

impl SiteStats {
    /// The stats of one peer (all zero if it never connected).
    pub fn peer(&self, ip: IpAddr) -> PeerStats {
        self.peers.get(&ip).copied().unwrap_or_default()
    }
}

/// One answered request, as the site saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The peer's IP (the client's source address).
    pub peer: IpAddr,
    /// The request method (empty on the fault listener).
    pub method: String,
    /// The request headers, names in lowercase (main listener only; empty on the fault
    /// listener).
    pub headers: Vec<(String, String)>,
    /// The request path (no query).
    pub path: String,
    /// When the request head had arrived.
    pub arrived: Instant,
    /// The status code sent (0: no status line, e.g. [`Fault::Close`]).
    pub status: u16,
    /// The fault acted out (fault listener only; `None` on the main listener).
    pub fault: Option<Fault>,
}

/// A running test site. Stops on [`TestSite::stop`] or drop.
pub struct TestSite {
    addr: SocketAddr,
    fault_addr: SocketAddr,
    shared: Arc<Shared>,
    system: Option<actix_rt::System>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TestSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestSite")
            .field("addr", &self.addr)
            .field("config", &self.shared.cfg)
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl TestSite {
    /// Bind `127.0.0.1:0` and serve on a new thread. Panics if the socket cannot be bound
    /// or the config has an invalid [`Rate`] (this is a test fixture: fail loudly).
    pub fn start(cfg: SiteConfig) -> TestSite {
        match cfg.limit {
            Limit::None => {}
            Limit::PerPeer(rate) | Limit::Global(rate) => {
                // Panic here, on the caller's thread, not inside the server.
                TokenBucket::new(rate, Instant::now());
            }
        }
        // Bind on the caller's thread so the address is known (and errors surface) before
        // start() returns; the server thread only adopts the listener.
        let listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .expect("test site: bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("test site: set_nonblocking");
        let addr = listener.local_addr().expect("test site: local_addr");
        let fault_listener =
            std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                .expect("test site: bind the fault listener on 127.0.0.1:0");
        fault_listener
            .set_nonblocking(true)
            .expect("test site: set_nonblocking");
        let fault_addr = fault_listener
            .local_addr()
            .expect("test site: fault listener local_addr");
        let shared = Arc::new(Shared::new(cfg, fault_addr.port()));

        let (tx, rx) = std::sync::mpsc::channel();
        let server_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("testsite-{}", addr.port()))
            .spawn(move || {
                let system = actix_rt::System::new();
                system.block_on(async move {
                    let listener =
                        TcpListener::from_std(listener).expect("test site: adopt listener");
                    let fault_listener = TcpListener::from_std(fault_listener)
                        .expect("test site: adopt fault listener");
                    actix_rt::spawn(fault::serve(fault_listener, Arc::clone(&server_shared)));
                    actix_rt::spawn(serve(listener, server_shared));
                });
                // The receiver only goes away if start() itself panicked.
                let _ = tx.send(actix_rt::System::current());
                if let Err(e) = system.run() {
                    tracing::warn!(error = %e, "test site system ended with an error");
                }
            })
            .expect("test site: spawn thread");
        let system = rx.recv().expect("test site thread failed to start");
        TestSite {
            addr,
            fault_addr,
            shared,
            system: Some(system),
            thread: Some(thread),
        }
    }

    /// The socket address the site listens on (127.0.0.1:port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port the site listens on (for URLs with a host name, e.g. `localhost`).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:port`, no trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `base_url()` + `path` (a leading `/` is added if missing).
    pub fn url(&self, path: &str) -> String {
        if path.starts_with('/') {
            format!("http://{}{path}", self.addr)
        } else {
            format!("http://{}/{path}", self.addr)
        }
    }

    /// The fault listener's address (127.0.0.1:port).
    pub fn fault_addr(&self) -> SocketAddr {
        self.fault_addr
    }

    /// `http://127.0.0.1:<fault port>` + `path`: a URL on the fault listener (a leading `/`
    /// is added if missing). Build fault paths with [`Fault::path`].
    pub fn fault_url(&self, path: &str) -> String {
        if path.starts_with('/') {
            format!("http://{}{path}", self.fault_addr)
        } else {
            format!("http://{}/{path}", self.fault_addr)
        }
    }

    /// The fault the fault listener gives `path` (None: it answers 200). Pure: the same
    /// path always gets the same answer.
    pub fn fault_for(&self, path: &str) -> Option<Fault> {
        fault::fault_for(self.shared.cfg.faults.as_ref(), path)
    }

    /// The configuration the site runs with.
    pub fn config(&self) -> &SiteConfig {
        &self.shared.cfg
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> SiteStats {
        let mut stats = self.shared.lock().stats.clone();
        stats.fault_body_bytes = self.shared.fault_bytes.load(Ordering::Relaxed);
        stats
    }

    /// The request log, ordered by arrival (empty if `log_requests` is off).
    pub fn requests(&self) -> Vec<RequestRecord> {
        let mut log = self.shared.lock().log.clone();
        // Logged when answered; with latency and concurrency that is not arrival order.
        log.sort_by_key(|r| r.arrived);
        log
    }

    /// Start (`true`) or stop (`false`) refusing the peer `ip`, as per [`FailMode`].
    pub fn set_fail_peer(&self, ip: IpAddr, fail: bool) {
        let mut state = self.shared.lock();
        if fail {
            state.failing.insert(ip);
        } else {
            state.failing.remove(&ip);
        }
        self.shared
            .any_failing
            .store(!state.failing.is_empty(), Ordering::Release);
    }

    /// Make `/health` answer 200 (`true`) or 500 (`false`).
    pub fn set_health(&self, healthy: bool) {
        self.shared.healthy.store(healthy, Ordering::Release);
    }

    /// Stop serving and join the server thread. Open connections are dropped. Counters and
    /// the log stay readable. Idempotent.
    pub fn stop(&mut self) {
        if let Some(system) = self.system.take() {
            system.stop();
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::warn!("test site thread panicked");
            }
        }
    }
}

impl Drop for TestSite {
    fn drop(&mut self) {
        self.stop();
    }
}

/// State shared between the server thread and the [`TestSite`] handle.
struct Shared {
    cfg: SiteConfig,
    body: Bytes,
    healthy: AtomicBool,
    /// Fast path for the per-read check in [`PeerStream`]: true while any peer is failing.
    any_failing: AtomicBool,
    state: Mutex<State>,
    /// The fault listener's port (for [`Fault::RedirectScheme`] locations).
    fault_port: u16,
    /// See [`SiteStats::fault_body_bytes`].
    fault_bytes: AtomicU64,
}

#[derive(Default)]
struct State {
    failing: HashSet<IpAddr>,
    stats: SiteStats,
    global_bucket: Option<TokenBucket>,
    peer_buckets: HashMap<IpAddr, TokenBucket>,
    log: Vec<RequestRecord>,
}

/// What to answer, decided at arrival.
enum Verdict {
    Fail,
    Health(bool),
    Limited(Duration),
    Ok,
}

impl Shared {
    fn new(cfg: SiteConfig, fault_port: u16) -> Self {
        let body = Bytes::from(vec![b'x'; cfg.body_size]);
        Self {
            cfg,
            body,
            healthy: AtomicBool::new(true),
            any_failing: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            fault_port,
            fault_bytes: AtomicU64::new(0),
        }
    }

    fn fault_port(&self) -> u16 {
        self.fault_port
    }

    /// Fault listener: count a new connection.
    fn count_connection(&self, ip: IpAddr) {
        self.lock().stats.peers.entry(ip).or_default().connections += 1;
    }

    /// Fault listener: count and log a request at arrival, with what it will get.
    fn record_fault_request(
        &self,
        ip: IpAddr,
        path: &str,
        arrived: Instant,
        fault: Option<Fault>,
        status: u16,
    ) {
        let mut state = self.lock();
        let stats = &mut state.stats;
        stats.requests += 1;
        if status == 429 {
            stats.limited += 1;
        }
        let peer = stats.peers.entry(ip).or_default();
        peer.requests += 1;
        match status {
            200 => peer.ok += 1,
            429 => peer.limited += 1,
            0 => peer.closed += 1,
            s if s >= 500 => peer.failed += 1,
            _ => {}
        }
        if self.cfg.log_requests {
            state
                .log
                .push(fault::record(ip, path, arrived, fault, status));
        }
    }

    /// A poisoned lock only means a test thread panicked; the counters are still usable.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn closes(&self, ip: IpAddr) -> bool {
        self.cfg.fail_mode == FailMode::Close
            && self.any_failing.load(Ordering::Acquire)
            && self.lock().failing.contains(&ip)
    }

    /// Count a new connection; false if it must be closed at once.
    fn accept(&self, ip: IpAddr) -> bool {
        let mut state = self.lock();
        let close = self.cfg.fail_mode == FailMode::Close && state.failing.contains(&ip);
        let peer = state.stats.peers.entry(ip).or_default();
        peer.connections += 1;
        if close {
            peer.closed += 1;
        }
        !close
    }

    fn count_closed(&self, ip: IpAddr) {
        self.lock().stats.peers.entry(ip).or_default().closed += 1;
    }

    /// Decide the answer and count the request as arrived and in flight.
    fn admit(&self, ip: IpAddr, path: &str, now: Instant) -> Verdict {
        let mut state = self.lock();
        let state = &mut *state;
        let verdict = if state.failing.contains(&ip) {
            Verdict::Fail
        } else if path == HEALTH_PATH {
            Verdict::Health(self.healthy.load(Ordering::Acquire))
        } else {
            let taken = match self.cfg.limit {
                Limit::None => Ok(()),
                Limit::Global(rate) => state
                    .global_bucket
                    .get_or_insert_with(|| TokenBucket::new(rate, now))
                    .take(now),
                Limit::PerPeer(rate) => state
                    .peer_buckets
                    .entry(ip)
                    .or_insert_with(|| TokenBucket::new(rate, now))
                    .take(now),
            };
            match taken {
                Ok(()) => Verdict::Ok,
                Err(wait) => Verdict::Limited(wait),
            }
        };

        let stats = &mut state.stats;
        stats.requests += 1;
        stats.in_flight += 1;
        stats.peak_in_flight = stats.peak_in_flight.max(stats.in_flight);
        if matches!(verdict, Verdict::Limited(_)) {
            stats.limited += 1;
        }
        let peer = stats.peers.entry(ip).or_default();
        peer.requests += 1;
        peer.in_flight += 1;
        peer.peak_in_flight = peer.peak_in_flight.max(peer.in_flight);
        match verdict {
            Verdict::Ok | Verdict::Health(true) => peer.ok += 1,
            Verdict::Fail | Verdict::Health(false) => peer.failed += 1,
            Verdict::Limited(_) => peer.limited += 1,
        }
        verdict
    }

    fn respond(&self, verdict: &Verdict) -> Response<BoxBody> {
        match *verdict {
            Verdict::Ok => {
                let mut res = Response::with_body(StatusCode::OK, self.body.clone());
                res.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                );
                res.map_into_boxed_body()
            }
            Verdict::Health(true) => {
                Response::with_body(StatusCode::OK, "ok").map_into_boxed_body()
            }
            Verdict::Health(false) => {
                Response::with_body(StatusCode::INTERNAL_SERVER_ERROR, "unhealthy")
                    .map_into_boxed_body()
            }
            Verdict::Fail => {
                let mut res = Response::with_body(StatusCode::SERVICE_UNAVAILABLE, "refused");
                // A refused client should not keep a pooled connection to us.
                res.head_mut().set_connection_type(ConnectionType::Close);
                res.map_into_boxed_body()
            }
            Verdict::Limited(wait) => {
                let mut res =
                    Response::with_body(StatusCode::TOO_MANY_REQUESTS, "too many requests");
                let secs = match self.cfg.retry_after {
                    RetryAfter::Omit => None,
                    RetryAfter::Fixed(n) => Some(n),
                    RetryAfter::Computed => {
                        Some(wait.as_nanos().div_ceil(1_000_000_000).max(1) as u64)
                    }
                };
                if let Some(secs) = secs {
                    res.headers_mut()
                        .insert(RETRY_AFTER, HeaderValue::from(secs));
                }
                res.map_into_boxed_body()
            }
        }
    }
}

/// Counts a request as in flight until dropped; logs it when [`InFlight::sent`] is called.
/// Dropped without `sent` (client went away mid-latency): only the in-flight count drops.
struct InFlight<'a> {
    shared: &'a Shared,
    peer: IpAddr,
}

impl InFlight<'_> {
    fn sent(self, req: &Request, path: String, arrived: Instant, status: u16) {
        if self.shared.cfg.log_requests {
            let headers = req
                .head()
                .headers
                .iter()
                .map(|(k, v)| {
                    let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                    (k.as_str().to_owned(), v)
                })
                .collect();
            self.shared.lock().log.push(RequestRecord {
                peer: self.peer,
                method: req.method().to_string(),
                headers,
                path,
                arrived,
                status,
                fault: None,
            });
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.stats.in_flight -= 1;
        if let Some(peer) = state.stats.peers.get_mut(&self.peer) {
            peer.in_flight -= 1;
        }
    }
}

async fn handle(shared: Arc<Shared>, req: Request) -> Result<Response<BoxBody>, Infallible> {
    let arrived = Instant::now();
    let peer = req
        .peer_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
    let path = req.path().to_owned();
    let verdict = shared.admit(peer, &path, arrived);
    let guard = InFlight {
        shared: &shared,
        peer,
    };
    let res = match (&shared.cfg.pages, &verdict) {
        (Some(pages), Verdict::Ok) => {
            let host = req
                .head()
                .headers
                .get(actix_http::header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
            let page = pages.get(host, pq);
            let status = StatusCode::from_u16(page.status).unwrap_or(StatusCode::OK);
            let mut res = Response::with_body(status, page.body);
            res.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(page.content_type));
            if let Some(v) = page
                .location
                .as_deref()
                .and_then(|l| HeaderValue::from_str(l).ok())
            {
                res.headers_mut().insert(actix_http::header::LOCATION, v);
            }
            res.map_into_boxed_body()
        }
        _ => shared.respond(&verdict),
    };
    if !shared.cfg.latency.is_zero() {
        actix_rt::time::sleep(shared.cfg.latency).await;
    }
    guard.sent(&req, path, arrived, res.status().as_u16());
    Ok(res)
}

/// Accept loop: runs until the System stops.
async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let handler_shared = Arc::clone(&shared);
    let factory = HttpServiceBuilder::default()
        // Longer than awc's 15 s default pool keep-alive, so the client, not the site,
        // decides when an idle connection goes (fewer stale-connection races in benches).
        .keep_alive(KeepAlive::Timeout(Duration::from_secs(60)))
        .h1(fn_service(move |req: Request| {
            handle(Arc::clone(&handler_shared), req)
        }));
    let service = match factory.new_service(()).await {
        Ok(s) => Rc::new(s),
        Err(e) => {
            tracing::error!(error = ?e, "test site: cannot build HTTP service");
            return;
        }
    };
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "test site: accept failed");
                actix_rt::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if !shared.accept(peer.ip()) {
            drop(stream);
            continue;
        }
        // Small answers should leave at once, like a tuned production server.
        let _ = stream.set_nodelay(true);
        let io = PeerStream {
            inner: stream,
            peer: peer.ip(),
            shared: Arc::clone(&shared),
            closed: false,
        };
        let service = Rc::clone(&service);
        actix_rt::spawn(async move {
            if let Err(e) = service.call((io, Some(peer))).await {
                tracing::debug!(%peer, error = ?e, "test site: connection ended with an error");
            }
        });
    }
}

/// The accepted TCP stream, which reports EOF instead of reading once its peer is failing
/// in [`FailMode::Close`] mode, so the dispatcher drops the connection without answering.
struct PeerStream {
    inner: TcpStream,
    peer: IpAddr,
    shared: Arc<Shared>,
    closed: bool,
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closed || this.shared.closes(this.peer) {
            if !this.closed {
                this.closed = true;
                this.shared.count_closed(this.peer);
            }
            // Zero bytes read = EOF.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
