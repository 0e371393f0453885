//! Prometheus metrics: what operators watch, from the actors' own events.
//!
//! Why prometheus-client: the OpenMetrics text comes from the ecosystem's encoder, not from
//! hand-built strings, so names, types and escaping are right by construction. The
//! registry holds atomics, so actors on any Arbiter update it without messages.
//!
//! Cardinality: per-exit labels are bounded by the configuration. Hosts are unbounded (a
//! crawl may touch 100k domains), so no metric carries a host label unless
//! `[metrics] host_labels` opts in with a cap; hosts beyond the cap fold into `other`.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use actix_http::body::BoxBody;
use actix_http::header::{HeaderValue, CONTENT_TYPE};
use actix_http::{HttpServiceBuilder, Method, Request, Response, StatusCode};
use actix_service::{fn_service, Service, ServiceFactory};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of per-exit metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExitLabels {
    /// Exit name.
    pub exit: String,
    /// Source address.
    pub source_ip: String,
}

/// Labels of request counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// Exit name.
    pub exit: String,
    /// Source address.
    pub source_ip: String,
    /// `ok`, `throttled` or `error`.
    pub outcome: &'static str,
    /// `2xx` … `5xx`, or `none` without an HTTP answer.
    pub class: &'static str,
}

/// Labels of the limiter rate gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RateLabels {
    /// Exit name (`*` when the limiter scope does not key on exits).
    pub exit: String,
    /// Host, or `all` when host labels are off, `other` past the cap.
    pub host: String,
}

/// Labels of `exitcrawl_limiter_scope`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScopeLabels {
    /// Host, or `all` when host labels are off, `other` past the cap.
    pub host: String,
    /// `unknown`, `host` or `per_ip`.
    pub scope: String,
}

/// Every metric exitcrawl exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    host_cap: usize,
    hosts: Mutex<HashSet<String>>,
    /// 1 when the exit takes work, 0 when ejected or disabled.
    pub exit_healthy: Family<ExitLabels, Gauge>,
    /// Requests in flight per exit.
    pub exit_active: Family<ExitLabels, Gauge>,
    /// `max_concurrent` per exit.
    pub exit_max_concurrent: Family<ExitLabels, Gauge>,
    /// Requests by outcome and status class.
    pub requests: Family<OutcomeLabels, Counter>,
    /// Time to the response head, per exit.
    pub request_duration: Family<ExitLabels, Histogram>,
    /// Ejections per exit.
    pub ejections: Family<ExitLabels, Counter>,
    /// Failures in a row per exit.
    pub consecutive_failures: Family<ExitLabels, Gauge>,
    /// Current limiter rate, requests/s.
    pub limiter_rate: Family<RateLabels, Gauge<f64, AtomicU64>>,
    /// Scope `auto`: 1 for what a host's answers say about its limit, 0 for the rest.
    pub limiter_scope: Family<ScopeLabels, Gauge>,
    /// Answer body bytes as they came over the wire (encoded, if they were).
    pub body_wire_bytes: Counter,
    /// Answer body bytes once decoded.
    pub body_bytes: Counter,
    /// Available exits / configured exits.
    pub exits_available_ratio: Gauge<f64, AtomicU64>,
    /// Fetches waiting in the scheduler's queue.
    pub queue_depth: Gauge,
    /// Fetches that got their reply.
    pub urls_done: Counter,
    /// Fetches handed to the scheduler.
    pub urls_total: Counter,
    /// Retries scheduled.
    pub retries: Counter,
    /// Retries the retry budget deferred (each deferral once; the retry is made later).
    pub retry_budget_refusals: Counter,
    /// Fetches given up because their host refused everything for `give_up_after_ms`,
    /// or asked for a pause over `max_retry_after_ms`.
    pub throttled_out: Counter,
    /// Delay between when a timer tick was due and when it ran.
    pub event_loop_lag: Histogram,
    /// Distributed mode: 1 while the last Redis check answered, 0 during an outage.
    pub redis_up: Gauge,
    /// Distributed mode: Redis checks that failed (the key paced locally instead).
    pub redis_errors: Counter,
}

impl Metrics {
    /// A registry with every metric. `host_cap`: how many distinct hosts may appear as
    /// labels (0: none, every host is `all`).
    pub fn new(host_cap: usize) -> Arc<Self> {
        let mut m = Self {
            host_cap,
            hosts: Mutex::new(HashSet::new()),
            exit_healthy: Family::default(),
            exit_active: Family::default(),
            exit_max_concurrent: Family::default(),
            requests: Family::default(),
            request_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 16))
            }),
            ejections: Family::default(),
            consecutive_failures: Family::default(),
            limiter_rate: Family::default(),
            limiter_scope: Family::default(),
            body_wire_bytes: Counter::default(),
            body_bytes: Counter::default(),
            exits_available_ratio: Gauge::default(),
            queue_depth: Gauge::default(),
            urls_done: Counter::default(),
            urls_total: Counter::default(),
            retries: Counter::default(),
            retry_budget_refusals: Counter::default(),
            throttled_out: Counter::default(),
            event_loop_lag: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            redis_up: Gauge::default(),
            redis_errors: Counter::default(),
            registry: Registry::with_prefix("exitcrawl"),
        };
        m.register_exit_series();
        m.register_limiter_series();
        m.register_crawl_series();
        m.register_redis_series();
        Arc::new(m)
    }

    /// Per-exit series: health, load, requests and their durations, ejections.
    fn register_exit_series(&mut self) {
        self.registry.register(
            "exit_healthy",
            "1 when the exit takes work, 0 when ejected or disabled",
            self.exit_healthy.clone(),
        );
        self.registry.register(
            "exit_active_requests",
            "Requests in flight per exit",
            self.exit_active.clone(),
        );
        self.registry.register(
            "exit_max_concurrent",
            "Configured max_concurrent per exit",
            self.exit_max_concurrent.clone(),
        );
        self.registry.register(
            "requests",
            "HTTP requests by outcome (ok, throttled, error) and status class",
            self.requests.clone(),
        );
        self.registry.register_with_unit(
            "request_duration",
            "Time from send to the response head",
            prometheus_client::registry::Unit::Seconds,
            self.request_duration.clone(),
        );
        self.registry.register(
            "exit_ejections",
            "Times an exit was ejected by health checking",
            self.ejections.clone(),
        );
        self.registry.register(
            "exit_consecutive_failures",
            "Failures in a row per exit",
            self.consecutive_failures.clone(),
        );
    }

    /// The limiter's series, per key.
    fn register_limiter_series(&mut self) {
        self.registry.register(
            "limiter_rate",
            "Current limiter rate per key, requests per second",
            self.limiter_rate.clone(),
        );
        self.registry.register(
            "limiter_scope",
            "Scope auto: 1 for what a host's throttles say about its limit (host: one budget \
             shared by the exits; per_ip: some exits have their own), 0 for the others",
            self.limiter_scope.clone(),
        );
    }

    /// Crawl-wide series: answer bytes, available exits, the queue, URLs, retries and the
    /// event loop's lag.
    fn register_crawl_series(&mut self) {
        self.registry.register(
            "response_body_wire_bytes",
            "Answer body bytes as they came over the wire (compressed, if they were)",
            self.body_wire_bytes.clone(),
        );
        self.registry.register(
            "response_body_bytes",
            "Answer body bytes once decoded",
            self.body_bytes.clone(),
        );
        self.registry.register(
            "exits_available_ratio",
            "Available exits divided by enabled exits",
            self.exits_available_ratio.clone(),
        );
        self.registry.register(
            "scheduler_queue_depth",
            "Fetches waiting in the scheduler queue",
            self.queue_depth.clone(),
        );
        self.registry.register(
            "urls_done",
            "Fetches that got their reply",
            self.urls_done.clone(),
        );
        self.registry.register(
            "urls",
            "Fetches handed to the scheduler",
            self.urls_total.clone(),
        );
        self.registry
            .register("retries", "Retries scheduled", self.retries.clone());
        self.registry.register(
            "retry_budget_refusals",
            "Retries the retry budget deferred (made later, not lost)",
            self.retry_budget_refusals.clone(),
        );
        self.registry.register(
            "throttled_out",
            "Fetches given up: their host refused everything for give_up_after_ms, or asked for a pause over max_retry_after_ms",
            self.throttled_out.clone(),
        );
        self.registry.register_with_unit(
            "event_loop_lag",
            "Delay between when a timer tick was due and when it ran",
            prometheus_client::registry::Unit::Seconds,
            self.event_loop_lag.clone(),
        );
    }

    /// Distributed mode's series: the Redis connection.
    fn register_redis_series(&mut self) {
        self.registry.register(
            "redis_up",
            "Distributed mode: 1 while Redis answers, 0 during an outage",
            self.redis_up.clone(),
        );
        self.registry.register(
            "redis_errors",
            "Distributed mode: Redis checks that failed (paced locally instead)",
            self.redis_errors.clone(),
        );
    }

    /// Create every per-exit series at its initial value, so dashboards and alerts see
    /// the exit before its first request.
    pub fn register_exit(&self, name: &str, ip: IpAddr, max_concurrent: u32, enabled: bool) {
        let l = Self::exit(name, ip);
        self.exit_healthy.get_or_create(&l).set(i64::from(enabled));
        self.exit_active.get_or_create(&l).set(0);
        self.exit_max_concurrent
            .get_or_create(&l)
            .set(i64::from(max_concurrent));
        self.consecutive_failures.get_or_create(&l).set(0);
        let _ = self.ejections.get_or_create(&l);
        let _ = self.request_duration.get_or_create(&l);
        for (outcome, status) in OUTCOMES {
            let _ = self.requests.get_or_create(&OutcomeLabels {
                exit: l.exit.clone(),
                source_ip: l.source_ip.clone(),
                outcome: outcome.label(),
                class: class_label(status),
            });
        }
    }

    /// One exit's hot-path handles, looked up once: a labelled lookup hashes the label
    /// strings and takes a lock on every call; the handles are plain shared atomics.
    pub fn exit_handles(&self, l: &ExitLabels) -> ExitHandles {
        let mut requests: [Option<Counter>; 11] = Default::default();
        for (outcome, status) in OUTCOMES {
            let labels = OutcomeLabels {
                exit: l.exit.clone(),
                source_ip: l.source_ip.clone(),
                outcome: outcome.label(),
                class: class_label(status),
            };
            requests[outcome_slot(outcome, status)] =
                Some(self.requests.get_or_create(&labels).clone());
        }
        ExitHandles {
            labels: l.clone(),
            duration: self.request_duration.get_or_create(l).clone(),
            requests,
        }
    }

    /// Labels of one exit.
    pub fn exit(name: &str, ip: IpAddr) -> ExitLabels {
        ExitLabels {
            exit: name.to_owned(),
            source_ip: ip.to_string(),
        }
    }

    /// The label for `host`: itself while under the cap, `other` beyond, `all` when off.
    pub fn host_label(&self, host: &str) -> String {
        if self.host_cap == 0 {
            return "all".into();
        }
        let Ok(mut seen) = self.hosts.lock() else {
            return "other".into();
        };
        if seen.contains(host) {
            return host.to_owned();
        }
        if seen.len() < self.host_cap {
            seen.insert(host.to_owned());
            return host.to_owned();
        }
        "other".into()
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The (outcome, class) pairs every exit's request counter starts with.
const OUTCOMES: [(Outcome, Option<u16>); 7] = [
    (Outcome::Ok, Some(200)),
    (Outcome::Ok, Some(300)),
    (Outcome::Ok, Some(400)),
    (Outcome::Ok, Some(500)),
    (Outcome::Throttled, Some(400)),
    (Outcome::Throttled, Some(500)),
    (Outcome::Error, None),
];

/// What became of one request: the `outcome` label of `exitcrawl_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with a status that is not a throttle.
    Ok,
    /// Answered with a throttle status.
    Throttled,
    /// No answer.
    Error,
}

impl Outcome {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Throttled => "throttled",
            Outcome::Error => "error",
        }
    }
}

/// The `class` label: of the status, or `none` without an answer.
fn class_label(status: Option<u16>) -> &'static str {
    status.map_or("none", status_class)
}

/// Where the counter of (outcome, status class) sits in [`ExitHandles`]: five classes for
/// each answered outcome, one slot for errors.
fn outcome_slot(outcome: Outcome, status: Option<u16>) -> usize {
    let class = match status {
        Some(100..=199) => 0,
        Some(200..=299) => 1,
        Some(300..=399) => 2,
        Some(400..=499) => 3,
        _ => 4,
    };
    match outcome {
        Outcome::Ok => class,
        Outcome::Throttled => 5 + class,
        Outcome::Error => 10,
    }
}

/// One exit's metric handles for the per-request path (see [`Metrics::exit_handles`]).
#[derive(Debug, Clone)]
pub struct ExitHandles {
    labels: ExitLabels,
    /// `exitcrawl_request_duration_seconds` of this exit.
    pub duration: Histogram,
    /// Request counters by [`outcome_slot`]; the pairs of [`OUTCOMES`] are filled in.
    // An index, not a search by label strings: this is counted once per request.
    requests: [Option<Counter>; 11],
}

impl ExitHandles {
    /// Count one request with this outcome and status (`None`: no answer).
    pub fn count(&self, metrics: &Metrics, outcome: Outcome, status: Option<u16>) {
        match &self.requests[outcome_slot(outcome, status)] {
            Some(counter) => {
                counter.inc();
            }
            None => {
                let labels = OutcomeLabels {
                    exit: self.labels.exit.clone(),
                    source_ip: self.labels.source_ip.clone(),
                    outcome: outcome.label(),
                    class: class_label(status),
                };
                metrics.requests.get_or_create(&labels).inc();
            }
        }
    }
}

/// The status class label of an HTTP status.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// Serve `GET /metrics` on `addr` from the current Arbiter. Returns the bound address
/// (ask for port 0 to get a free one).
pub fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let local = std_listener.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(std_listener)?;
    actix_rt::spawn(async move {
        let factory = HttpServiceBuilder::default().h1(fn_service(move |req: Request| {
            let metrics = Arc::clone(&metrics);
            async move { Ok::<_, std::convert::Infallible>(answer(&req, &metrics)) }
        }));
        let service = match factory.new_service(()).await {
            Ok(s) => Rc::new(s),
            Err(e) => {
                tracing::error!(error = ?e, "metrics endpoint: cannot build the HTTP service");
                return;
            }
        };
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                actix_rt::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let service = Rc::clone(&service);
            actix_rt::spawn(async move {
                let _ = service.call((stream, Some(peer))).await;
            });
        }
    });
    Ok(local)
}

fn answer(req: &Request, metrics: &Metrics) -> Response<BoxBody> {
    if req.method() != Method::GET || req.path() != "/metrics" {
        return Response::with_body(StatusCode::NOT_FOUND, BoxBody::new("not found\n"));
    }
    let mut res = Response::with_body(StatusCode::OK, BoxBody::new(metrics.encode()));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    res
}

/// Measures event-loop lag: a tick is due every `period`; how late it runs is the lag.
pub struct LagActor {
    metrics: Arc<Metrics>,
    period: Duration,
    due: Option<Instant>,
}

impl LagActor {
    /// A lag meter ticking every `period`.
    pub fn new(metrics: Arc<Metrics>, period: Duration) -> Self {
        Self {
            metrics,
            period,
            due: None,
        }
    }
}

impl Actor for LagActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.due = Some(Instant::now() + self.period);
        ctx.run_interval(self.period, |act, _ctx| {
            let now = Instant::now();
            if let Some(due) = act.due {
                act.metrics
                    .event_loop_lag
                    .observe(now.saturating_duration_since(due).as_secs_f64());
            }
            act.due = Some(now + act.period);
        });
    }
}
