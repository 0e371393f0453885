//! Prometheus metrics: what operators watch, from the actors' own events.
//!
//! Why prometheus-client: the OpenMetrics text comes from the ecosystem's encoder, not from
//! hand-built strings, so names, types and escaping are right by construction. The
//! registry holds atomics, so actors on any Arbiter update it without messages.
//!
//! Cardinality: per-exit labels are bounded by the configuration. Hosts are unbounded (a
//! crawl may touch 100k domains), so every `host` label is `all` unless
//! `[metrics] host_labels` opts in with a cap N: the first N distinct hosts the crawl
//! meets keep their name, later ones fold into `other`. First-seen rather than busiest:
//! a counter's series cannot move to another label once exported without its rate
//! jumping, and the first hosts of a crawl are usually the ones it was started for.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

mod endpoint;
mod host_labels;

pub(crate) use endpoint::{serve, LagActor};

/// Labels of per-exit metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ExitLabels {
    /// Exit name.
    pub(crate) exit: String,
    /// Source address.
    pub(crate) source_ip: String,
}

/// Labels of request counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    /// Exit name.
    pub(crate) exit: String,
    /// Source address.
    pub(crate) source_ip: String,
    /// `ok`, `throttled` or `error`.
    pub(crate) outcome: &'static str,
    /// `2xx` … `5xx`, or `none` without an HTTP answer.
    pub(crate) class: &'static str,
}

/// Labels of `exitcrawl_requests_total`: an exit's outcome labels and the host.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    /// Exit name.
    pub(crate) exit: String,
    /// Source address.
    pub(crate) source_ip: String,
    /// Host, or `all` when host labels are off, `other` past the cap.
    pub(crate) host: String,
    /// `ok`, `throttled` or `error`.
    pub(crate) outcome: &'static str,
    /// `2xx` … `5xx`, or `none` without an HTTP answer.
    pub(crate) class: &'static str,
}

/// Labels of the limiter's per-key series (rate, pauses).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RateLabels {
    /// Exit name (`*` when the limiter scope does not key on exits).
    pub(crate) exit: String,
    /// Host, or `all` when host labels are off, `other` past the cap.
    pub(crate) host: String,
}

/// Labels of `exitcrawl_limiter_scope`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ScopeLabels {
    /// Host, or `all` when host labels are off, `other` past the cap.
    pub(crate) host: String,
    /// `unknown`, `host` or `per_ip`.
    pub(crate) scope: String,
}

/// Every metric exitcrawl exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    host_cap: usize,
    hosts: Mutex<HashSet<String>>,
    /// 1 when the exit takes work, 0 when ejected or disabled.
    pub(crate) exit_healthy: Family<ExitLabels, Gauge>,
    /// Requests in flight per exit.
    pub(crate) exit_active: Family<ExitLabels, Gauge>,
    /// `max_concurrent` per exit.
    pub(crate) exit_max_concurrent: Family<ExitLabels, Gauge>,
    /// Requests by host, outcome and status class (exported).
    pub(crate) requests: Family<RequestLabels, Counter>,
    /// Requests by exit, outcome and status class over every host: not exported (the
    /// exported family sums to it), read by the end-of-crawl summary.
    pub(crate) exit_requests: Family<OutcomeLabels, Counter>,
    /// Time to the response head, per exit.
    pub(crate) request_duration: Family<ExitLabels, Histogram>,
    /// Ejections per exit.
    pub(crate) ejections: Family<ExitLabels, Counter>,
    /// Failures in a row per exit.
    pub(crate) consecutive_failures: Family<ExitLabels, Gauge>,
    /// Current limiter rate, requests/s: a key of no host (`host="all"`), or of a host
    /// with a label of its own (see [`Metrics::host_label_of`]).
    pub(crate) limiter_rate: Family<RateLabels, Gauge<f64, AtomicU64>>,
    /// Pauses the limiter ordered per key: a Retry-After or a used-up rate-limit quota, the
    /// hold after a throttle, a host refusing everything.
    pub(crate) limiter_pauses: Family<RateLabels, Counter>,
    /// Seconds of pause the limiter ordered per key, each second counted once.
    pub(crate) limiter_pause_seconds: Family<RateLabels, Counter<f64, AtomicU64>>,
    /// The same seconds by the host's own name, whatever its label (`host` the host, `""`
    /// for a key that names none): not exported (its cardinality is the crawl's hosts),
    /// read by the end-of-crawl summary.
    pub(crate) host_pause_seconds: Family<RateLabels, Counter<f64, AtomicU64>>,
    /// Scope `auto`: 1 for what a host's answers say about its limit, 0 for the rest; for
    /// a host with a label of its own.
    pub(crate) limiter_scope: Family<ScopeLabels, Gauge>,
    /// Answer body bytes as they came over the wire (encoded, if they were).
    pub(crate) body_wire_bytes: Counter,
    /// Answer body bytes once decoded.
    pub(crate) body_bytes: Counter,
    /// Available exits / configured exits.
    pub(crate) exits_available_ratio: Gauge<f64, AtomicU64>,
    /// Fetches waiting in the scheduler's queue.
    pub(crate) queue_depth: Gauge,
    /// Fetches that got their reply.
    pub(crate) urls_done: Counter,
    /// Fetches handed to the scheduler.
    pub(crate) urls_total: Counter,
    /// Retries scheduled.
    pub(crate) retries: Counter,
    /// Retries the retry budget deferred (each deferral once; the retry is made later).
    pub(crate) retry_budget_refusals: Counter,
    /// Fetches given up because their host refused everything for `give_up_after_ms`,
    /// or asked for a pause over `max_retry_after_ms`.
    pub(crate) throttled_out: Counter,
    /// Delay between when a timer tick was due and when it ran.
    pub(crate) event_loop_lag: Histogram,
    /// Distributed mode: 1 while the last Redis check answered, 0 during an outage.
    pub(crate) redis_up: Gauge,
    /// Distributed mode: Redis checks that failed (the key paced locally instead).
    pub(crate) redis_errors: Counter,
}

impl Metrics {
    /// A registry with every metric. `host_cap`: how many distinct hosts may appear as
    /// labels (0: none, every host is `all`).
    pub(crate) fn new(host_cap: usize) -> Arc<Self> {
        let mut m = Self {
            host_cap,
            hosts: Mutex::new(HashSet::new()),
            exit_healthy: Family::default(),
            exit_active: Family::default(),
            exit_max_concurrent: Family::default(),
            requests: Family::default(),
            exit_requests: Family::default(),
            request_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 16))
            }),
            ejections: Family::default(),
            consecutive_failures: Family::default(),
            limiter_rate: Family::default(),
            limiter_pauses: Family::default(),
            limiter_pause_seconds: Family::default(),
            host_pause_seconds: Family::default(),
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
            "HTTP requests by host, outcome (ok, throttled, error) and status class",
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
            "Current limiter rate per key, requests per second (a host's keys only under a \
             host label of its own)",
            self.limiter_rate.clone(),
        );
        self.registry.register(
            "limiter_pauses",
            "Pauses the limiter ordered per key (Retry-After, used-up quota, hold after a throttle, refusals)",
            self.limiter_pauses.clone(),
        );
        self.registry.register_with_unit(
            "limiter_pause",
            "Time the limiter ordered a key to send nothing, each second counted once",
            prometheus_client::registry::Unit::Seconds,
            self.limiter_pause_seconds.clone(),
        );
        self.registry.register(
            "limiter_scope",
            "Scope auto: 1 for what a host's throttles say about its limit (host: one budget \
             shared by the exits; per_ip: some exits have their own), 0 for the others; only \
             for a host with a label of its own",
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
    pub(crate) fn register_exit(&self, name: &str, ip: IpAddr, max_concurrent: u32, enabled: bool) {
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
            let labels = OutcomeLabels {
                exit: l.exit.clone(),
                source_ip: l.source_ip.clone(),
                outcome: outcome.label(),
                class: class_label(status),
            };
            // With host labels on, no host is known yet: a host's series starts with
            // its first request.
            if self.host_cap == 0 {
                let _ = self.requests.get_or_create(&with_host(&labels, "all"));
            }
            let _ = self.exit_requests.get_or_create(&labels);
        }
    }

    /// One exit's hot-path handles, looked up once: a labelled lookup hashes the label
    /// strings and takes a lock on every call; the handles are plain shared atomics.
    pub(crate) fn exit_handles(&self, l: &ExitLabels) -> ExitHandles {
        let mut totals: [Option<Counter>; 11] = Default::default();
        let mut folded: [Option<Counter>; 11] = Default::default();
        for (outcome, status) in OUTCOMES {
            let labels = OutcomeLabels {
                exit: l.exit.clone(),
                source_ip: l.source_ip.clone(),
                outcome: outcome.label(),
                class: class_label(status),
            };
            let slot = outcome_slot(outcome, status);
            totals[slot] = Some(self.exit_requests.get_or_create(&labels).clone());
            if self.host_cap == 0 {
                folded[slot] = Some(
                    self.requests
                        .get_or_create(&with_host(&labels, "all"))
                        .clone(),
                );
            }
        }
        ExitHandles {
            labels: l.clone(),
            duration: self.request_duration.get_or_create(l).clone(),
            totals,
            folded,
        }
    }

    /// Labels of one exit.
    pub(crate) fn exit(name: &str, ip: IpAddr) -> ExitLabels {
        ExitLabels {
            exit: name.to_owned(),
            source_ip: ip.to_string(),
        }
    }

    /// The limiter forgot `host`: its rate and scope series go, where they are its own
    /// (not `all` or `other`, which other hosts share). Its label stays its own.
    pub(crate) fn forget_host(&self, host: &str, exits: &[Arc<str>]) {
        if !self.hosts.lock().is_ok_and(|seen| seen.contains(host)) {
            return;
        }
        for exit in exits.iter().map(|e| &**e).chain(["*"]) {
            self.limiter_rate.remove(&RateLabels {
                exit: exit.to_owned(),
                host: host.to_owned(),
            });
        }
        for scope in ["unknown", "host", "per_ip"] {
            self.limiter_scope.remove(&ScopeLabels {
                host: host.to_owned(),
                scope: scope.to_owned(),
            });
        }
    }

    /// The limiter ordered `key` (of `host`, by its own name) to send nothing until
    /// `until`, over a pause that ran to `before` (`None`: none): count a pause when none
    /// was running at `now`, and the seconds it adds beyond the one already running.
    pub(crate) fn note_pause(
        &self,
        key: &RateLabels,
        host: Option<&str>,
        before: Option<std::time::Instant>,
        until: std::time::Instant,
        now: std::time::Instant,
    ) {
        let from = before.map_or(now, |b| b.max(now));
        if until <= from {
            return;
        }
        if from == now {
            self.limiter_pauses.get_or_create(key).inc();
        }
        let secs = (until - from).as_secs_f64();
        self.limiter_pause_seconds.get_or_create(key).inc_by(secs);
        let by_name = RateLabels {
            exit: key.exit.clone(),
            host: host.unwrap_or_default().to_owned(),
        };
        self.host_pause_seconds.get_or_create(&by_name).inc_by(secs);
    }

    /// Fetches handed to the crawler (`exitcrawl_urls_total`).
    pub fn urls_total(&self) -> u64 {
        self.urls_total.get()
    }

    /// Fetches that got their reply (`exitcrawl_urls_done_total`).
    pub fn urls_done(&self) -> u64 {
        self.urls_done.get()
    }

    /// Fetches waiting in the scheduler's queue now (`exitcrawl_queue_depth`).
    pub fn queue_depth(&self) -> i64 {
        self.queue_depth.get()
    }

    /// Retries scheduled.
    pub fn retries(&self) -> u64 {
        self.retries.get()
    }

    /// Retries the retry budget deferred (each deferral once; the retry is made later).
    pub fn retry_budget_refusals(&self) -> u64 {
        self.retry_budget_refusals.get()
    }

    /// Fetches given up because their host refused everything for `give_up_after_ms`,
    /// or asked for a pause over `max_retry_after_ms`.
    pub fn throttled_out(&self) -> u64 {
        self.throttled_out.get()
    }

    /// Distributed mode: Redis checks that failed (the key paced locally instead).
    pub fn redis_errors(&self) -> u64 {
        self.redis_errors.get()
    }

    /// Requests through exit `exit` (from `source_ip`) over every host that ended
    /// `outcome` (`ok`, `throttled`, `error`) with a status of `class` (`1xx` … `5xx`,
    /// `none` without an answer): the label values of `exitcrawl_requests_total`.
    pub fn exit_requests(
        &self,
        exit: &str,
        source_ip: IpAddr,
        outcome: &'static str,
        class: &'static str,
    ) -> u64 {
        let labels = OutcomeLabels {
            exit: exit.to_owned(),
            source_ip: source_ip.to_string(),
            outcome,
            class,
        };
        self.exit_requests.get(&labels).map_or(0, |c| c.get())
    }

    /// Seconds of pause the limiter ordered for `host` on the budget of `exit` (`*` for a
    /// budget the exits share), each second counted once, by the host's own name whatever
    /// its metrics label.
    pub fn host_pause_seconds(&self, exit: &str, host: &str) -> f64 {
        let labels = RateLabels {
            exit: exit.to_owned(),
            host: host.to_owned(),
        };
        self.host_pause_seconds
            .get(&labels)
            .map_or(0.0, |c| c.get())
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// `labels` with a host.
fn with_host(labels: &OutcomeLabels, host: &str) -> RequestLabels {
    RequestLabels {
        exit: labels.exit.clone(),
        source_ip: labels.source_ip.clone(),
        host: host.to_owned(),
        outcome: labels.outcome,
        class: labels.class,
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
pub(crate) enum Outcome {
    /// Answered with a status that is not a throttle.
    Ok,
    /// Answered with a throttle status.
    Throttled,
    /// No answer.
    Error,
}

impl Outcome {
    /// The label value.
    pub(crate) fn label(self) -> &'static str {
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
pub(crate) struct ExitHandles {
    labels: ExitLabels,
    /// `exitcrawl_request_duration_seconds` of this exit.
    pub(crate) duration: Histogram,
    /// This exit's request totals over every host, by [`outcome_slot`]; the pairs of
    /// [`OUTCOMES`] are filled in.
    // An index, not a search by label strings: this is counted once per request.
    totals: [Option<Counter>; 11],
    /// The exported `host="all"` counters, by slot, when host labels are off.
    folded: [Option<Counter>; 11],
}

impl ExitHandles {
    /// Count one request to `host` with this outcome and status (`None`: no answer).
    pub(crate) fn count(
        &self,
        metrics: &Metrics,
        host: &str,
        outcome: Outcome,
        status: Option<u16>,
    ) {
        let slot = outcome_slot(outcome, status);
        let labels = || OutcomeLabels {
            exit: self.labels.exit.clone(),
            source_ip: self.labels.source_ip.clone(),
            outcome: outcome.label(),
            class: class_label(status),
        };
        match &self.totals[slot] {
            Some(counter) => counter.inc(),
            None => metrics.exit_requests.get_or_create(&labels()).inc(),
        };
        match &self.folded[slot] {
            Some(counter) => counter.inc(),
            None => {
                let labels = with_host(&labels(), &metrics.host_label(host));
                metrics.requests.get_or_create(&labels).inc()
            }
        };
    }
}

/// The status class label of an HTTP status.
pub(crate) fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_pause_counts_once_and_each_second_once() {
        let m = Metrics::new(0);
        let key = RateLabels {
            exit: "*".into(),
            host: "all".into(),
        };
        let t0 = std::time::Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let host = Some("h.example");
        m.note_pause(&key, host, None, s(2), t0);
        // Extended while running: no new pause, only the second beyond it.
        m.note_pause(&key, host, Some(s(2)), s(3), s(1));
        // Inside the running one: nothing.
        m.note_pause(&key, host, Some(s(3)), s(2), s(1));
        // After it ended: a new pause of 2 s.
        m.note_pause(&key, host, Some(s(3)), s(6), s(4));
        assert_eq!(m.limiter_pauses.get_or_create(&key).get(), 2);
        let secs = m.limiter_pause_seconds.get_or_create(&key).get();
        assert!((secs - 5.0).abs() < 1e-9, "{secs}");
        // By the host's name, though its label is `all`.
        let by_name = RateLabels {
            exit: "*".into(),
            host: "h.example".into(),
        };
        let secs = m.host_pause_seconds.get_or_create(&by_name).get();
        assert!((secs - 5.0).abs() < 1e-9, "{secs}");
    }
}
