//! `ExitActor`: one per source IP. Owns the HTTP client whose connections leave from that
//! address, and the exit's counters.
//!
//! Why an actor per exit: the awc client is `!Send`, so it must live on one Arbiter; an
//! actor gives it a home there and a mailbox the scheduler can reach from anywhere. The
//! actor decides nothing: the scheduler chose this exit and paced the request, the exit
//! just sends it and reports what happened.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::rc::{Rc, Weak};
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use awc::error::{PayloadError, SendRequestError};
use awc::http::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::Notify;

use crate::messages::{
    Answer, AttemptFailure, Attempted, FetchErrorKind, GetCounters, Ping, SendRequest,
};
use crate::net::{build_client, classify, ClientOptions, DnsCache, FailureKind};

/// An exit's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Requests in flight.
    pub active: u32,
    /// Requests sent (attempted).
    pub total: u64,
    /// Answered with a status that was not a throttle.
    pub ok: u64,
    /// Answered with a throttle status.
    pub throttled: u64,
    /// No answer.
    pub errors: u64,
    /// Failures in a row.
    pub consecutive_failures: u32,
    /// Smoothed latency of answers.
    pub latency_ewma: Option<Duration>,
    /// The last failure's message.
    pub last_error: Option<String>,
}

impl Counters {
    /// Count one ended attempt.
    fn record(&mut self, attempted: &Attempted, throttle_statuses: &[u16]) {
        let c = self;
        c.active = c.active.saturating_sub(1);
        match &attempted.result {
            Ok(answer) => {
                if throttle_statuses.contains(&answer.status) {
                    c.throttled += 1;
                } else {
                    c.ok += 1;
                }
                c.consecutive_failures = 0;
                c.latency_ewma = Some(match c.latency_ewma {
                    None => attempted.latency,
                    Some(l) => l.mul_f64(0.8) + attempted.latency.mul_f64(0.2),
                });
            }
            Err(f) => {
                c.errors += 1;
                c.consecutive_failures += 1;
                c.last_error = Some(f.message.clone());
            }
        }
    }
}

/// Settings of one exit.
#[derive(Debug, Clone)]
pub struct ExitOptions {
    /// Client settings (source IP, timeouts, pool).
    pub client: ClientOptions,
    /// Body cap, bytes.
    pub max_body_bytes: usize,
    /// Statuses that count as throttles (for the counters).
    pub throttle_statuses: Vec<u16>,
}

/// What an exit is, apart from its mailbox: the client bound to its source IP, and its
/// counters. Built on the Arbiter that uses it (the awc client is `!Send`).
///
/// Why it is separate from [`ExitActor`]: when the exit shares the scheduler's Arbiter
/// (`crawler.arbiters = "single"`), the scheduler holds the core too and starts requests
/// on it directly, saving a mailbox hop per fetch; an exit on an Arbiter of its own is
/// reached through the actor's mailbox. Either way the request runs the same code.
///
/// Requests run on worker tasks that live as long as the core (at most `max_concurrent`,
/// started as load needs them), not on a task per request: an async request is a large
/// future, and spawning one per request copied it several times and was among the
/// largest costs of the actor path (see README, "Cost of the actor system").
pub struct ExitCore {
    opts: ExitOptions,
    client: awc::Client,
    counters: RefCell<Counters>,
    /// Requests waiting for a worker.
    queue: RefCell<VecDeque<SendRequest>>,
    /// Wakes one idle worker per request queued.
    work: Rc<Notify>,
    /// Worker tasks started.
    workers: Cell<usize>,
    /// Workers waiting on `work` and not yet woken.
    idle: Cell<usize>,
    me: Weak<ExitCore>,
}

impl Drop for ExitCore {
    fn drop(&mut self) {
        // Idle workers hold only a weak reference: wake them to see it is gone and end.
        self.work.notify_waiters();
    }
}

impl ExitCore {
    /// Build the exit's client; call it on the Arbiter that will use it.
    pub fn new(opts: ExitOptions, dns: DnsCache) -> Rc<Self> {
        Rc::new_cyclic(|me| Self {
            client: build_client(&opts.client, dns),
            opts,
            counters: RefCell::default(),
            queue: RefCell::default(),
            work: Rc::new(Notify::new()),
            workers: Cell::new(0),
            idle: Cell::new(0),
            me: me.clone(),
        })
    }

    /// The exit's counters now.
    pub fn counters(&self) -> Counters {
        self.counters.borrow().clone()
    }

    /// Send one request on a worker and report the attempt through `msg.done`.
    pub(crate) fn send(&self, msg: SendRequest) {
        {
            let mut c = self.counters.borrow_mut();
            c.active += 1;
            c.total += 1;
        }
        self.queue.borrow_mut().push_back(msg);
        if self.idle.get() > 0 {
            self.idle.set(self.idle.get() - 1);
            self.work.notify_one();
        } else if self.workers.get() < self.opts.client.max_concurrent.max(1) {
            self.workers.set(self.workers.get() + 1);
            // Tasks of their own, not futures in an actor's context: a context polls
            // every future it holds each time any of them makes progress.
            actix_rt::spawn(worker(self.me.clone(), Rc::clone(&self.work)));
        }
        // Otherwise every worker is busy; the first one free takes it.
    }

    /// The next queued request, or `None` after counting the caller as idle.
    fn next_or_idle(&self) -> Option<SendRequest> {
        let next = self.queue.borrow_mut().pop_front();
        if next.is_none() {
            self.idle.set(self.idle.get() + 1);
        }
        next
    }

    async fn attempt(&self, msg: SendRequest) {
        let SendRequest {
            url,
            method,
            headers,
            body,
            done,
        } = msg;
        let limit = self.opts.max_body_bytes;
        let max_redirects = self.opts.client.max_redirects;
        let sent_at = Instant::now();
        let mut req = self.client.request(method, url);
        for (name, value) in &headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                req = req.insert_header((n, v));
            }
        }
        let sent = match body {
            Some(b) => req.send_body(b).await,
            None => req.send().await,
        };
        let latency = sent_at.elapsed();
        let result = match sent {
            Err(e) => Err(send_failure(&e)),
            Ok(resp) if max_redirects > 0 && redirect_limit_hit(&resp) => {
                let location = resp
                    .headers()
                    .get(awc::http::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                Err(AttemptFailure {
                    kind: FailureKind::Other,
                    error: FetchErrorKind::TooManyRedirects,
                    message: format!(
                        "too many redirects: more than {max_redirects} (last Location: {location})"
                    ),
                })
            }
            Ok(resp) => {
                let status = resp.status().as_u16();
                let mut resp = resp.timeout(self.opts.client.timeout);
                match resp.body().limit(limit).await {
                    Ok(body) => {
                        // Move the headers out instead of cloning the map.
                        let mut headers = HeaderMap::new();
                        let _ = resp.map_body(|head, payload| {
                            headers = std::mem::take(&mut head.headers);
                            payload
                        });
                        Ok(Answer {
                            status,
                            headers,
                            body,
                        })
                    }
                    Err(e) => Err(body_failure(&e, limit)),
                }
            }
        };
        let attempted = Attempted {
            sent_at: sent_at.into_std(),
            latency,
            result,
        };
        self.counters
            .borrow_mut()
            .record(&attempted, &self.opts.throttle_statuses);
        done.send(attempted);
    }

    /// Fetch the health URL through this exit.
    fn ping(&self, msg: Ping) -> impl std::future::Future<Output = Result<(), String>> {
        let client = self.client.clone();
        async move {
            let req = client.get(msg.url.as_str()).timeout(msg.timeout);
            match req.send().await {
                Ok(mut resp) if resp.status().is_success() => {
                    // Drain a little so the connection can be reused; the content is unused.
                    let _ = resp.body().limit(64 * 1024).await;
                    Ok(())
                }
                Ok(resp) => Err(format!("health check answered {}", resp.status())),
                Err(e) => Err(format!("health check failed: {e}")),
            }
        }
    }
}

/// A worker: runs queued requests one after another while the core lives.
async fn worker(core: Weak<ExitCore>, work: Rc<Notify>) {
    loop {
        let next = match core.upgrade() {
            Some(core) => core.next_or_idle().map(|msg| (core, msg)),
            None => return,
        };
        match next {
            // The strong reference is held only while a request runs.
            Some((core, msg)) => core.attempt(msg).await,
            None => work.notified().await,
        }
    }
}

/// One exit's mailbox: requests from a scheduler on another Arbiter, health pings,
/// counter reads.
pub struct ExitActor {
    opts: ExitOptions,
    dns: DnsCache,
    /// Built when the actor starts, on its own Arbiter, unless given.
    core: Option<Rc<ExitCore>>,
}

impl ExitActor {
    /// An exit; its client is built when the actor starts, on the actor's own Arbiter.
    pub fn new(opts: ExitOptions, dns: DnsCache) -> Self {
        Self {
            opts,
            dns,
            core: None,
        }
    }

    /// An exit around a core built on the current Arbiter (shared with the scheduler).
    pub fn with_core(core: Rc<ExitCore>, dns: DnsCache) -> Self {
        Self {
            opts: core.opts.clone(),
            dns,
            core: Some(core),
        }
    }

    /// The exit's source address.
    pub fn source_ip(&self) -> IpAddr {
        self.opts.client.source_ip
    }

    fn core(&mut self) -> &Rc<ExitCore> {
        let (opts, dns) = (&self.opts, &self.dns);
        self.core
            .get_or_insert_with(|| ExitCore::new(opts.clone(), dns.clone()))
    }
}

impl Actor for ExitActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Requests are many and small: the default mailbox of 16 would make the scheduler
        // wait on a busy exit for no reason (the scheduler already bounds what it sends).
        ctx.set_mailbox_capacity(4096);
        self.core();
    }
}

/// Map an awc send error to the fetch error kind and a message that keeps the OS error.
fn send_failure(err: &SendRequestError) -> AttemptFailure {
    if let SendRequestError::Custom(e, _) = err {
        // HttpOnly refused a redirect hop: its message says so (not a "redirect" limit).
        return AttemptFailure {
            kind: FailureKind::Other,
            error: FetchErrorKind::Other,
            message: e.to_string(),
        };
    }
    let kind = classify(err);
    let message = match (kind, err) {
        // awc words an EOF before the answer as a connect failure ("connector has been
        // disconnected"); say what the site did.
        (FailureKind::Reset, _) => {
            format!("connection closed or reset by the site without a complete answer ({err})")
        }
        (FailureKind::Other, SendRequestError::Response(e)) => {
            format!("malformed HTTP response: {e}")
        }
        _ => err.to_string(),
    };
    let error = match kind {
        FailureKind::LocalConnect => FetchErrorKind::LocalConnect,
        FailureKind::ConnectRefused => FetchErrorKind::ConnectRefused,
        FailureKind::Timeout => FetchErrorKind::Timeout,
        FailureKind::Reset => FetchErrorKind::Reset,
        FailureKind::Other => {
            // awc reports a redirect loop or a redirect beyond the limit as a send error
            // whose text says so; make it a kind of its own.
            let lower = message.to_ascii_lowercase();
            if lower.contains("redirect") {
                FetchErrorKind::TooManyRedirects
            } else {
                FetchErrorKind::Other
            }
        }
    };
    AttemptFailure {
        kind,
        error,
        message,
    }
}

fn body_failure(err: &PayloadError, limit: usize) -> AttemptFailure {
    match err {
        PayloadError::Overflow => AttemptFailure {
            kind: FailureKind::Other,
            error: FetchErrorKind::BodyTooLarge,
            message: format!("response body larger than the limit of {limit} bytes"),
        },
        other => {
            let message = format!("reading the body: {other}");
            // awc says "Response Payload IO timed out" for its body timeout.
            let lower = message.to_ascii_lowercase();
            let timed_out = matches!(other, PayloadError::Io(e) if e.kind() == std::io::ErrorKind::TimedOut)
                || lower.contains("timeout")
                || lower.contains("timed out");
            let (kind, error) = if timed_out {
                (FailureKind::Timeout, FetchErrorKind::Timeout)
            } else {
                (FailureKind::Reset, FetchErrorKind::Reset)
            };
            AttemptFailure {
                kind,
                error,
                message,
            }
        }
    }
}

/// awc's redirect middleware follows 301/302/303/307/308 with a `Location` until its
/// limit, then hands back that redirect as if it were the answer: such an answer means the
/// limit was hit.
fn redirect_limit_hit<S>(resp: &awc::ClientResponse<S>) -> bool {
    matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308)
        && resp.headers().contains_key(awc::http::header::LOCATION)
}

impl Handler<SendRequest> for ExitActor {
    type Result = ();

    fn handle(&mut self, msg: SendRequest, _ctx: &mut Self::Context) {
        self.core().send(msg);
    }
}

impl Handler<Ping> for ExitActor {
    type Result = ResponseFuture<Result<(), String>>;

    fn handle(&mut self, msg: Ping, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(self.core().ping(msg))
    }
}

impl Handler<GetCounters> for ExitActor {
    type Result = MessageResult<GetCounters>;

    fn handle(&mut self, _msg: GetCounters, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.core().counters())
    }
}
