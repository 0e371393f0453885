//! # exitcrawl-testsite — a real HTTP site on loopback for tests, benches and the demo
//!
//! Why: exitcrawl's claims ("never exceeds the site's limit", "backs off on 429", "each exit
//! is seen from its own IP", "an exit the site refuses gets ejected", "is never banned",
//! "does not pile up a queue at a full server") are about what a *server* observes. This
//! crate is that server: it limits like real sites do (see [`Limit`]), varies its latency
//! like real pages do, and records what it saw from each peer IP, so tests can assert on the
//! site's view rather than on the crawler's own bookkeeping.
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
//! 3. a site that holds its clients to the `Retry-After` it sent ([`HoldRetryAfter`])
//!    refuses a request its pause covers (that peer's, or anyone's) without asking the limit;
//! 4. the limit ([`Limit`]) decides at arrival, per peer IP or for the whole site:
//!    - a token bucket ([`Limit::PerPeer`], [`Limit::Global`]) or a fixed window
//!      ([`Limit::Window`], optionally with `X-RateLimit-*` headers) refuses with
//!      [`SiteConfig::reject_status`] (429 by default; nginx says 503) and `Retry-After` per
//!      [`RetryAfter`];
//!    - nginx `limit_req` with `burst=` and without `nodelay` ([`Limit::Delayed`]) holds
//!      what exceeds its rate until its turn and refuses past the burst, as a token bucket;
//!    - a penalty box ([`Limit::Ban`]) bans a key that sent too many requests in a period:
//!      all its requests answer 403 (or the ban's status) until the ban ends;
//!    - a full server ([`Limit::Workers`]) refuses nothing: the request waits (FIFO) for
//!      one of a fixed number of workers and holds it for the service time — or answers 503
//!      after an optional longest wait;
//! 5. anything else answers 200 with a body of [`SiteConfig::body_size`] bytes — or, if
//!    [`SiteConfig::pages`] is set, whatever that generator returns for the host and path
//!    (404 when it returns `None`);
//! 6. every answer is delayed by [`SiteConfig::latency`] × the request's latency factor
//!    (1 unless [`SiteConfig::latency_noise`] or [`SiteConfig::tail`] is set; drawn from
//!    [`SiteConfig::seed`]) — except rejections when [`SiteConfig::fast_rejections`] is set —
//!    and the request counts as in flight meanwhile; then it is logged as a
//!    [`RequestRecord`].
//!
//! Counts per peer and in total — requests, ok, limited, banned, failed, in flight and its
//! distribution, first and last arrival, every ban and every pause held — are in
//! [`TestSite::stats`].
//!
//! Every site also has a second listener, the *fault listener* ([`TestSite::fault_url`],
//! module [`fault`]): a hand-written HTTP/1.1 loop on a raw socket that misbehaves per
//! request and reproducibly — by path (`/fault/<code>/<tag>`, see [`Fault`]) or by the seeded
//! [`SiteConfig::faults`] mix (e.g. 5 % connections dropped, 2 % hangs, 3 % 500s, see
//! [`FaultMix`]) — and records every request at arrival with what it did. A hang lasts until
//! the client gives up or [`SiteConfig::hang_max`] passes.
//!
//! Time here is real (`std::time::Instant`): the server is real. Keep latencies and rate
//! windows in milliseconds in tests. The exception is [`TestSite::start_on_runtime`]: the
//! site runs on the caller's runtime and its clock is that runtime's (tokio's), so a test
//! under `tokio::time::pause()` sees the site's log in paused time.
//!
//! Many hosts at once — a broad crawl's hosts, each its own limit on its own loopback address
//! (127.0.1.1, 127.0.1.2, …) with its own counters — are a [`BroadSite`] (module [`broad`]).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod broad;
mod bucket;
mod clock;
pub mod fault;
mod hold;
mod latency;
mod limit;
mod pages;
pub mod proxy;
mod server;
mod stats;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

pub use broad::{BroadConfig, BroadHost, BroadSite, HostClass, LimitKey, Rps};
pub use bucket::Rate;
use clock::SiteClock;
pub use fault::{zstd_zeros, Encoding, Fault, FaultMix, RetryHint, ENCODED_PAGE, HANG_MAX};
pub use hold::HoldRetryAfter;
pub use latency::MAX_NOISE;
pub use limit::{Limit, RetryAfter};
pub use pages::{Page, Pages};
use server::Shared;
pub use stats::{BanRecord, PauseRecord, PeerStats, RequestRecord, SiteStats};

/// The path that answers 200 or 500 depending on [`TestSite::set_health`].
pub const HEALTH_PATH: &str = "/health";

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

/// Configuration of a [`TestSite`]. Build it as `SiteConfig { field: …,
/// ..SiteConfig::default() }`: fields are only ever added, with defaults that keep the
/// site's earlier behaviour.
///
/// Equality compares the `f64` fields by their bits (so `Eq` holds; a NaN equals itself —
/// and is refused at start anyway).
#[derive(Debug, Clone)]
pub struct SiteConfig {
    /// The rate limit to enforce.
    pub limit: Limit,
    /// `Retry-After` on rate-limit refusals ([`Limit::PerPeer`], [`Limit::Global`],
    /// [`Limit::Window`]).
    pub retry_after: RetryAfter,
    /// Whom a refusal's `Retry-After` holds off until it ends (default
    /// [`HoldRetryAfter::No`]: the limit alone decides). Held requests are refused like
    /// any rate-limit refusal, with `Retry-After` per [`SiteConfig::retry_after`] over the
    /// pause's rest; every pause is in [`SiteStats::pauses`].
    pub hold_retry_after: HoldRetryAfter,
    /// The status of a rate-limit refusal (default 429). nginx `limit_req` answers 503
    /// unless `limit_req_status` says otherwise. Whatever it is, such answers count as
    /// [`PeerStats::limited`].
    pub reject_status: u16,
    /// Added to every answer before it is sent (the base, scaled per request by the latency
    /// factor).
    pub latency: Duration,
    /// Spread of the latency factor: each request's factor is `1 + latency_noise · u`, `u`
    /// uniform in [-1, 1). In [0, [`MAX_NOISE`]]; 0 (default): no spread. Scales
    /// [`SiteConfig::latency`] and a [`Limit::Workers`] service time alike.
    pub latency_noise: f64,
    /// A heavy tail: `Some((fraction, factor))` makes that fraction of requests (e.g. 0.02)
    /// take `factor` (≥ 1, e.g. 5.0) times their latency. `None` (default): no tail.
    pub tail: Option<(f64, f64)>,
    /// Seed of the latency factors (default 1): the n-th request to arrive gets the n-th
    /// factor of this seed's stream.
    pub seed: u64,
    /// Answer refusals (rate limit, ban, a worker queue's 503) at once, without
    /// [`SiteConfig::latency`], like an nginx front that refuses before the page work.
    /// Default `false`: every answer waits its latency.
    pub fast_rejections: bool,
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
    /// The longest a [`Fault::Hang`] holds a connection before the site closes it without
    /// answering (default [`HANG_MAX`], 60 s: the client's timeout ends it first). Set it
    /// below the client's timeout to model a proxy that gives up and drops the connection.
    pub hang_max: Duration,
    /// Set a cookie on the main listener's answers (default `false`): every answer to a
    /// request without a `Cookie` header carries `Set-Cookie: seen=<peer IP>@<Host>;
    /// Path=/`, so the log shows which client and which host a cookie sent back came from.
    pub set_cookie: bool,
}

impl Default for SiteConfig {
    /// No limit, `Retry-After` computed and not held, refusals 429, no latency (no noise, no tail, seed
    /// 1, refusals delayed like any answer), 1 KiB bodies, 503 for failing peers, request
    /// log on, no generated pages, no fault mix, hangs up to [`HANG_MAX`], no cookies.
    fn default() -> Self {
        Self {
            limit: Limit::None,
            retry_after: RetryAfter::Computed,
            hold_retry_after: HoldRetryAfter::No,
            reject_status: 429,
            latency: Duration::ZERO,
            latency_noise: 0.0,
            tail: None,
            seed: 1,
            fast_rejections: false,
            body_size: 1024,
            fail_mode: FailMode::Status503,
            log_requests: true,
            pages: None,
            faults: None,
            hang_max: HANG_MAX,
            set_cookie: false,
        }
    }
}

impl PartialEq for SiteConfig {
    fn eq(&self, other: &Self) -> bool {
        // Destructured so that a new field cannot be forgotten here.
        let SiteConfig {
            limit,
            retry_after,
            hold_retry_after,
            reject_status,
            latency,
            latency_noise,
            tail,
            seed,
            fast_rejections,
            body_size,
            fail_mode,
            log_requests,
            pages,
            faults,
            hang_max,
            set_cookie,
        } = self;
        let bits = |t: Option<(f64, f64)>| t.map(|(a, b)| (a.to_bits(), b.to_bits()));
        *limit == other.limit
            && *retry_after == other.retry_after
            && *hold_retry_after == other.hold_retry_after
            && *reject_status == other.reject_status
            && *latency == other.latency
            && latency_noise.to_bits() == other.latency_noise.to_bits()
            && bits(*tail) == bits(other.tail)
            && *seed == other.seed
            && *fast_rejections == other.fast_rejections
            && *body_size == other.body_size
            && *fail_mode == other.fail_mode
            && *log_requests == other.log_requests
            && *pages == other.pages
            && *faults == other.faults
            && *hang_max == other.hang_max
            && *set_cookie == other.set_cookie
    }
}

impl Eq for SiteConfig {}

impl SiteConfig {
    /// Panic on a setting that cannot be served (at start, on the caller's thread).
    fn validate(&self) {
        self.limit.validate();
        limit::valid_status(self.reject_status);
        latency::Jitter::validate(self.latency_noise, self.tail);
    }
}

/// A running test site. Stops on [`TestSite::stop`] or drop.
pub struct TestSite {
    addr: SocketAddr,
    fault_addr: SocketAddr,
    shared: Arc<Shared>,
    system: Option<actix_rt::System>,
    thread: Option<JoinHandle<()>>,
    /// [`TestSite::start_on_runtime`]: the accept loops on the caller's runtime.
    tasks: Vec<actix_rt::task::JoinHandle<()>>,
}

impl std::fmt::Debug for TestSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestSite")
            .field("addr", &self.addr)
            .field("config", &self.shared.cfg)
            .field(
                "running",
                &(self.thread.is_some() || !self.tasks.is_empty()),
            )
            .finish()
    }
}

impl TestSite {
    /// Bind `127.0.0.1:0` and serve on a new thread. Panics if the socket cannot be bound
    /// or the config is invalid — a [`Rate`] or [`Limit`] with a zero, an invalid status,
    /// noise or tail out of range (this is a test fixture: fail loudly).
    pub fn start(cfg: SiteConfig) -> TestSite {
        Self::start_at(cfg, IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// Like [`TestSite::start`], listening on `ip` (e.g. `::1` for a site that only IPv6
    /// exits can reach); the fault listener stays on 127.0.0.1.
    pub fn start_at(cfg: SiteConfig, ip: IpAddr) -> TestSite {
        let (listener, fault_listener, shared) = bind(cfg, ip, SiteClock::Real);
        let addr = listener.local_addr().expect("test site: local_addr");
        let fault_addr = fault_addr_of(&fault_listener);
        let (tx, rx) = std::sync::mpsc::channel();
        let server_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("testsite-{}", addr.port()))
            .spawn(move || {
                let system = actix_rt::System::new();
                system.block_on(async move {
                    spawn_listeners(listener, fault_listener, server_shared);
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
            tasks: Vec::new(),
        }
    }

    /// Like [`TestSite::start`], but served by tasks on the *calling* actix runtime (e.g.
    /// inside `#[actix_rt::test]`; panics outside one), with arrivals stamped, limits
    /// decided and latencies slept on that runtime's tokio clock. Under
    /// `tokio::time::pause()` the whole exchange — client timers, the site's buckets and
    /// its log — then runs on one paused clock, so spacing can be asserted exactly and does
    /// not depend on how loaded the machine is. The tasks end on [`TestSite::stop`], on
    /// drop or with the runtime.
    pub fn start_on_runtime(cfg: SiteConfig) -> TestSite {
        Self::start_on_runtime_at(cfg, IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// [`TestSite::start_on_runtime`] listening on `ip` (any of 127.0.0.0/8): another
    /// host to the crawler, which keys hosts by address, not by port.
    pub fn start_on_runtime_at(cfg: SiteConfig, ip: IpAddr) -> TestSite {
        let (listener, fault_listener, shared) = bind(cfg, ip, SiteClock::Runtime);
        let addr = listener.local_addr().expect("test site: local_addr");
        let fault_addr = fault_addr_of(&fault_listener);
        let tasks = spawn_listeners(listener, fault_listener, Arc::clone(&shared));
        TestSite {
            addr,
            fault_addr,
            shared,
            system: None,
            thread: None,
            tasks,
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

    /// The fault the fault listener gives `path`'s first request (None: it answers 200).
    /// Pure: without [`FaultMix::per_request`] every request for the path gets it.
    pub fn fault_for(&self, path: &str) -> Option<Fault> {
        fault::fault_for(self.shared.cfg.faults.as_ref(), path, 0)
    }

    /// When the site started: [`Limit::Window`] edges are at `started() + k × window`.
    pub fn started(&self) -> Instant {
        self.shared.start
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

    /// Stop serving: join the server thread, dropping open connections; or, on the
    /// caller's runtime, end the accept loops (connections already open there end with the
    /// runtime). Counters and the log stay readable. Idempotent.
    pub fn stop(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
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

/// Bind the site's two listeners (nonblocking, ready for tokio) and build its state. On the
/// caller's thread so that the address is known, and errors surface, before start returns.
fn bind(
    cfg: SiteConfig,
    ip: IpAddr,
    clock: SiteClock,
) -> (std::net::TcpListener, std::net::TcpListener, Arc<Shared>) {
    // Panic here, on the caller's thread, not inside the server.
    cfg.validate();
    let listener = std::net::TcpListener::bind(SocketAddr::new(ip, 0))
        .unwrap_or_else(|e| panic!("test site: bind {ip}:0: {e}"));
    listener
        .set_nonblocking(true)
        .expect("test site: set_nonblocking");
    let fault_listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .expect("test site: bind the fault listener on 127.0.0.1:0");
    fault_listener
        .set_nonblocking(true)
        .expect("test site: set_nonblocking");
    let shared = Arc::new(Shared::new(
        cfg,
        fault_addr_of(&fault_listener).port(),
        clock,
    ));
    (listener, fault_listener, shared)
}

fn fault_addr_of(fault_listener: &std::net::TcpListener) -> SocketAddr {
    fault_listener
        .local_addr()
        .expect("test site: fault listener local_addr")
}

/// Spawn both accept loops on the current actix runtime.
fn spawn_listeners(
    listener: std::net::TcpListener,
    fault_listener: std::net::TcpListener,
    shared: Arc<Shared>,
) -> Vec<actix_rt::task::JoinHandle<()>> {
    let listener = TcpListener::from_std(listener).expect("test site: adopt listener");
    let fault_listener =
        TcpListener::from_std(fault_listener).expect("test site: adopt fault listener");
    vec![
        actix_rt::spawn(fault::serve(fault_listener, Arc::clone(&shared))),
        actix_rt::spawn(server::serve(listener, shared)),
    ]
}

impl Drop for TestSite {
    fn drop(&mut self) {
        self.stop();
    }
}
