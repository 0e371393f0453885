//! The main listener: actix-http's HTTP/1 server on a plain tokio listener, and the state it
//! shares with the [`TestSite`](crate::TestSite) handle and the fault listener.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use actix_http::body::BoxBody;
use actix_http::header::{HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use actix_http::{ConnectionType, HttpServiceBuilder, KeepAlive, Request, Response, StatusCode};
use actix_service::{fn_service, Service, ServiceFactory};
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::clock::SiteClock;
use crate::fault::{self, Fault};
use crate::hold::Holds;
use crate::latency::{scale, Jitter};
use crate::limit::{whole_seconds_up, Decision, Limiter, WindowHeaders};
use crate::stats::{BanRecord, Outcome, RequestRecord, SiteStats};
use crate::{FailMode, Limit, RetryAfter, SiteConfig, HEALTH_PATH};

/// State shared between the server thread and the [`TestSite`](crate::TestSite) handle.
pub(crate) struct Shared {
    pub(crate) cfg: SiteConfig,
    pub(crate) body: Bytes,
    /// Window edges are aligned to this; see [`TestSite::started`](crate::TestSite::started).
    pub(crate) start: Instant,
    /// The clock of every arrival stamp and limit decision.
    pub(crate) clock: SiteClock,
    pub(crate) healthy: AtomicBool,
    /// Fast path for the per-read check in [`PeerStream`]: true while any peer is failing.
    pub(crate) any_failing: AtomicBool,
    state: Mutex<State>,
    /// The workers of a [`Limit::Workers`] site (a fair, i.e. FIFO, semaphore).
    workers: Option<Workers>,
    /// The fault listener's port (for [`Fault::RedirectScheme`] locations).
    fault_port: u16,
    /// See [`SiteStats::fault_body_bytes`].
    pub(crate) fault_bytes: AtomicU64,
}

struct Workers {
    permits: Semaphore,
    service: Duration,
    max_wait: Option<Duration>,
}

pub(crate) struct State {
    pub(crate) failing: HashSet<IpAddr>,
    pub(crate) stats: SiteStats,
    limiter: Limiter,
    holds: Holds,
    jitter: Jitter,
    pub(crate) log: Vec<RequestRecord>,
    /// Requests seen per path by the fault listener, for [`FaultMix::per_request`](crate::FaultMix::per_request)
    /// (counted only then).
    fault_asks: HashMap<String, u32>,
}

/// What to answer.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    Fail,
    Health(bool),
    Limited {
        wait: Duration,
        headers: Option<WindowHeaders>,
    },
    Banned(u16),
    Ok(Option<WindowHeaders>),
    /// Wait for a worker first (decided at arrival, resolved to `Ok` or `QueueTimeout`).
    Queue,
    /// Held this long first, then served ([`Limit::Delayed`]).
    Held(Duration),
    QueueTimeout,
}

impl Verdict {
    /// Refused by the site's limit (not by a failure of the site).
    fn is_rejection(&self) -> bool {
        matches!(
            self,
            Verdict::Limited { .. } | Verdict::Banned(_) | Verdict::QueueTimeout
        )
    }

    fn outcome(&self) -> Outcome {
        match self {
            Verdict::Ok(_) | Verdict::Health(true) => Outcome::Ok,
            Verdict::Fail | Verdict::Health(false) | Verdict::QueueTimeout => Outcome::Failed,
            Verdict::Limited { .. } => Outcome::Limited,
            Verdict::Banned(_) => Outcome::Banned,
            // Counted when it gets a worker or gives up, or when its hold is over.
            Verdict::Queue | Verdict::Held(_) => Outcome::Other,
        }
    }
}

impl Shared {
    pub(crate) fn new(cfg: SiteConfig, fault_port: u16, clock: SiteClock) -> Self {
        let body = Bytes::from(vec![b'x'; cfg.body_size]);
        let start = clock.now();
        let workers = match cfg.limit {
            Limit::Workers {
                workers,
                service,
                max_wait,
            } => Some(Workers {
                permits: Semaphore::new(workers),
                service,
                max_wait,
            }),
            _ => None,
        };
        let state = State {
            failing: HashSet::new(),
            stats: SiteStats::default(),
            limiter: Limiter::new(cfg.limit, start),
            holds: Holds::default(),
            jitter: Jitter::new(cfg.seed, cfg.latency_noise, cfg.tail),
            log: Vec::new(),
            fault_asks: HashMap::new(),
        };
        Self {
            cfg,
            body,
            start,
            clock,
            healthy: AtomicBool::new(true),
            any_failing: AtomicBool::new(false),
            state: Mutex::new(state),
            workers,
            fault_port,
            fault_bytes: AtomicU64::new(0),
        }
    }

    pub(crate) fn fault_port(&self) -> u16 {
        self.fault_port
    }

    /// Fault listener: count a new connection.
    pub(crate) fn count_connection(&self, ip: IpAddr) {
        self.lock().stats.peers.entry(ip).or_default().connections += 1;
    }

    /// Fault listener: count and log a request at arrival, with what it will get.
    /// How many requests for `path` the fault listener saw before this one (always 0
    /// unless the fault mix draws per request).
    pub(crate) fn fault_asks(&self, path: &str) -> u32 {
        if !self.cfg.faults.as_ref().is_some_and(|m| m.per_request) {
            return 0;
        }
        let mut state = self.lock();
        let n = state.fault_asks.entry(path.to_string()).or_insert(0);
        *n += 1;
        *n - 1
    }

    pub(crate) fn record_fault_request(
        &self,
        ip: IpAddr,
        path: &str,
        arrived: Instant,
        fault: Option<Fault>,
        status: u16,
    ) {
        let mut state = self.lock();
        state.stats.arrive(ip, path, arrived);
        let outcome = match status {
            200 => Outcome::Ok,
            429 => Outcome::Limited,
            0 => Outcome::Closed,
            s if s >= 500 => Outcome::Failed,
            _ => Outcome::Other,
        };
        state.stats.outcome(ip, outcome);
        if self.cfg.log_requests {
            state
                .log
                .push(fault::record(ip, path, arrived, fault, status));
        }
    }

    /// A poisoned lock only means a test thread panicked; the counters are still usable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
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
        self.lock().stats.outcome(ip, Outcome::Closed);
    }

    /// Decide the answer, count the request as arrived and in flight, and draw its latency
    /// factor.
    fn admit(&self, ip: IpAddr, path: &str, now: Instant) -> (Verdict, f64) {
        let mut state = self.lock();
        let state = &mut *state;
        let verdict = if state.failing.contains(&ip) {
            Verdict::Fail
        } else if path == HEALTH_PATH {
            Verdict::Health(self.healthy.load(Ordering::Acquire))
        } else if let Some(until) = state.holds.holding(self.cfg.hold_retry_after, ip, now) {
            // A pause the site announced: refused without asking the limit.
            Verdict::Limited {
                wait: until - now,
                headers: None,
            }
        } else {
            match state.limiter.decide(ip, now) {
                Decision::Accept(headers) => Verdict::Ok(headers),
                Decision::Reject { wait, headers } => {
                    if let Some(secs) = self.retry_after_secs(wait) {
                        let until = now + Duration::from_secs(secs);
                        let mode = self.cfg.hold_retry_after;
                        if let Some(p) = state.holds.announce(mode, ip, now, until) {
                            state.stats.pauses.push(p);
                        }
                    }
                    Verdict::Limited { wait, headers }
                }
                Decision::Banned { status, started } => {
                    if let Some(until) = started {
                        state.stats.bans.push(BanRecord {
                            peer: self.ban_key(ip),
                            start: now,
                            until,
                        });
                    }
                    Verdict::Banned(status)
                }
                Decision::Queue => Verdict::Queue,
                Decision::Hold(d) => Verdict::Held(d),
            }
        };
        state.stats.arrive(ip, path, now);
        state.stats.enter(ip);
        state.stats.outcome(ip, verdict.outcome());
        (verdict, state.jitter.next_factor())
    }

    fn ban_key(&self, ip: IpAddr) -> Option<IpAddr> {
        match self.cfg.limit {
            Limit::Ban {
                per_peer: false, ..
            } => None,
            _ => Some(ip),
        }
    }

    /// [`Limit::Workers`]: wait for a worker (FIFO), hold it for the service time. Returns
    /// the verdict, the wait and the service time. Dropped with the request (client gone):
    /// its place in the queue or its worker is given up.
    async fn work(&self, ip: IpAddr, factor: f64) -> (Verdict, Duration, Duration) {
        let Some(workers) = &self.workers else {
            return (Verdict::Ok(None), Duration::ZERO, Duration::ZERO);
        };
        let asked = self.clock.now();
        let permit = match workers.max_wait {
            Some(max) => actix_rt::time::timeout(max, workers.permits.acquire())
                .await
                .ok(),
            None => Some(workers.permits.acquire().await),
        };
        let queued = self.clock.now().saturating_duration_since(asked);
        // The semaphore is never closed, so `Some(Err(_))` cannot happen.
        let Some(Ok(permit)) = permit else {
            self.lock().stats.outcome(ip, Outcome::Failed);
            return (Verdict::QueueTimeout, queued, Duration::ZERO);
        };
        self.lock().stats.outcome(ip, Outcome::Ok);
        let service = scale(workers.service, factor);
        if !service.is_zero() {
            actix_rt::time::sleep(service).await;
        }
        drop(permit);
        (Verdict::Ok(None), queued, service)
    }

    fn respond(&self, verdict: &Verdict) -> Response<BoxBody> {
        match *verdict {
            Verdict::Ok(_) | Verdict::Queue | Verdict::Held(_) => {
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
            Verdict::Limited { wait, .. } => self.limited(wait),
            Verdict::Banned(status) => {
                Response::with_body(status_code(status), "banned").map_into_boxed_body()
            }
            Verdict::QueueTimeout => {
                Response::with_body(StatusCode::SERVICE_UNAVAILABLE, "no worker in time")
                    .map_into_boxed_body()
            }
        }
    }

    /// A rate-limit refusal: [`SiteConfig::reject_status`], `Retry-After` per [`RetryAfter`].
    fn limited(&self, wait: Duration) -> Response<BoxBody> {
        let status = status_code(self.cfg.reject_status);
        let body = if status == StatusCode::TOO_MANY_REQUESTS {
            "too many requests"
        } else {
            "rate limited"
        };
        let mut res = Response::with_body(status, body);
        if let Some(secs) = self.retry_after_secs(wait) {
            res.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        res.map_into_boxed_body()
    }

    /// The `Retry-After` of a refusal whose limit frees up in `wait`, in seconds; `None`
    /// when the site sends none.
    fn retry_after_secs(&self, wait: Duration) -> Option<u64> {
        match self.cfg.retry_after {
            RetryAfter::Omit => None,
            RetryAfter::Fixed(n) => Some(n),
            RetryAfter::Computed => Some(whole_seconds_up(wait)),
        }
    }

    fn page(&self, req: &Request) -> Option<Response<BoxBody>> {
        let pages = self.cfg.pages.as_ref()?;
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
        Some(res.map_into_boxed_body())
    }
}

/// Statuses are validated at start; this never falls back in practice.
fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::TOO_MANY_REQUESTS)
}

fn add_window_headers(res: &mut Response<BoxBody>, h: WindowHeaders) {
    let headers = res.headers_mut();
    for (name, value) in [
        ("x-ratelimit-limit", h.limit),
        ("x-ratelimit-remaining", h.remaining),
        ("x-ratelimit-reset", h.reset),
    ] {
        headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
    }
}

/// Counts a request as in flight until dropped; logs it when [`InFlight::sent`] is called.
/// Dropped without `sent` (client went away mid-latency): only the in-flight count drops.
struct InFlight<'a> {
    shared: &'a Shared,
    peer: IpAddr,
}

/// What the log says about an answer besides the request itself.
struct Sent {
    arrived: Instant,
    status: u16,
    latency: Duration,
    queued: Duration,
}

impl InFlight<'_> {
    fn sent(self, req: &Request, path: String, sent: Sent) {
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
                arrived: sent.arrived,
                status: sent.status,
                fault: None,
                latency: sent.latency,
                queued: sent.queued,
            });
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.shared.lock().stats.leave(self.peer);
    }
}

async fn handle(shared: Arc<Shared>, req: Request) -> Result<Response<BoxBody>, Infallible> {
    let arrived = shared.clock.now();
    let peer = req
        .peer_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip());
    let path = req.path().to_owned();
    let (verdict, factor) = shared.admit(peer, &path, arrived);
    let guard = InFlight {
        shared: &shared,
        peer,
    };
    let (verdict, queued, service) = match verdict {
        Verdict::Queue => shared.work(peer, factor).await,
        Verdict::Held(d) => {
            if !d.is_zero() {
                actix_rt::time::sleep(d).await;
            }
            shared.lock().stats.outcome(peer, Outcome::Ok);
            (Verdict::Ok(None), d, Duration::ZERO)
        }
        v => (v, Duration::ZERO, Duration::ZERO),
    };
    let page = match verdict {
        Verdict::Ok(_) => shared.page(&req),
        _ => None,
    };
    let mut res = page.unwrap_or_else(|| shared.respond(&verdict));
    if shared.cfg.set_cookie && !req.head().headers.contains_key(actix_http::header::COOKIE) {
        let host = req
            .head()
            .headers
            .get(actix_http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if let Ok(v) = HeaderValue::from_str(&format!("seen={peer}@{host}; Path=/")) {
            res.headers_mut().append(actix_http::header::SET_COOKIE, v);
        }
    }
    if let Verdict::Ok(Some(h))
    | Verdict::Limited {
        headers: Some(h), ..
    } = verdict
    {
        add_window_headers(&mut res, h);
    }
    let delay = if shared.cfg.fast_rejections && verdict.is_rejection() {
        Duration::ZERO
    } else {
        scale(shared.cfg.latency, factor)
    };
    if !delay.is_zero() {
        actix_rt::time::sleep(delay).await;
    }
    let sent = Sent {
        arrived,
        status: res.status().as_u16(),
        latency: service + delay,
        queued,
    };
    guard.sent(&req, path, sent);
    Ok(res)
}

/// Accept loop: runs until the System stops.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
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
