//! Every message of the actor system: a fetch and its outcome in `fetch.rs`, the rest here.
//!
//! Commands are verbs (`Fetch`, `SetInterval`, `Ping`), reports are past tense
//! (`Succeeded`, `Throttled`, `Failed`, `HealthChanged`). Public messages are what an
//! embedding application or another actor sends; the `pub(crate)` ones are the actors'
//! own traffic.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use bytes::Bytes;
use exitcrawl::headers::ServerHints;
use http::Method;

use crate::headers::Headers;

use exitcrawl::outcome::Failure;

mod fetch;
mod redirect;

pub use fetch::{Fetch, FetchError, FetchErrorKind, FetchResponse, PRIVATE_REFUSED};
pub use redirect::{ChainStep, RedirectChain, RedirectHop};

// ---------------------------------------------------------------------------------------
// Public: pacing and feedback
// ---------------------------------------------------------------------------------------

/// Change the pacing of one limiter key. `exit`/`host` are `None` where the limiter scope
/// does not key on them (scope `host`: no exit; `exit`: no host; `global`: neither).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInterval {
    /// Exit name, if the scope keys on exits.
    pub exit: Option<Arc<str>>,
    /// Host, if the scope keys on hosts.
    pub host: Option<Arc<str>>,
    /// Time between sends.
    pub interval: Duration,
    /// No send before this instant.
    pub pause_until: Option<Instant>,
    /// A host's budget under scope `auto`: a Retry-After read on this host binds only the
    /// exit that read it, which the scheduler pauses, while this key goes on at its cut
    /// rate (see `exitcrawl::aimd::coupling`). `false`: it binds this key.
    pub retry_after_binds_exit: bool,
}

impl Message for SetInterval {
    type Result = ();
}

/// The site answered (a status that is not a throttle).
#[derive(Debug, Clone)]
pub struct Succeeded {
    /// Exit name.
    pub exit: Arc<str>,
    /// Host of the URL.
    pub host: Arc<str>,
    /// When the request was sent.
    pub sent_at: Instant,
    /// Time to the response head.
    pub latency: Duration,
    /// HTTP status.
    pub status: u16,
    /// Rate-limit headers of the answer.
    pub hints: ServerHints,
    /// The request had waited for its pacer (the crawler wanted to go faster).
    pub limited: bool,
    /// Fetches that were waiting for the host when it was sent, if known: the work a
    /// faster rate would speed up (`exitcrawl::aimd::Response::backlog`).
    pub backlog: Option<u32>,
    /// A retry of a page that failed before (see `exitcrawl::aimd::classify::of_retry`).
    pub retry: bool,
}

impl Message for Succeeded {
    type Result = ();
}

/// The site said slow down (a status in `limiter.throttle_statuses`).
#[derive(Debug, Clone)]
pub struct Throttled {
    /// Exit name.
    pub exit: Arc<str>,
    /// Host of the URL.
    pub host: Arc<str>,
    /// When the request was sent.
    pub sent_at: Instant,
    /// Time to the response head.
    pub latency: Duration,
    /// HTTP status (429, 503, …).
    pub status: u16,
    /// Rate-limit headers of the answer (Retry-After among them).
    pub hints: ServerHints,
    /// Fetches that were waiting for the host when it was sent, if known: what a pause
    /// would hold up (`exitcrawl::aimd::Response::backlog`).
    pub backlog: Option<u32>,
}

impl Message for Throttled {
    type Result = ();
}

/// The request got no HTTP answer.
#[derive(Debug, Clone)]
pub struct Failed {
    /// Exit name.
    pub exit: Arc<str>,
    /// Host of the URL.
    pub host: Arc<str>,
    /// When the request was sent.
    pub sent_at: Instant,
    /// Time until the failure.
    pub latency: Duration,
    /// What kind of failure.
    pub kind: Failure,
    /// A retry of a page that failed before (see `exitcrawl::aimd::classify::of_retry`).
    pub retry: bool,
}

impl Message for Failed {
    type Result = ();
}

// ---------------------------------------------------------------------------------------
// Public: health and stats
// ---------------------------------------------------------------------------------------

/// An exit was ejected or came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChanged {
    /// Index of the exit in the configuration.
    pub exit: usize,
    /// May it take work now.
    pub available: bool,
    /// Available only to be probed: it has not proved itself since its ejection.
    pub probing: bool,
    /// The last error that counted against it.
    pub error: Option<String>,
}

impl Message for HealthChanged {
    type Result = ();
}

/// Every exit is down (reported once when it happens, again after a recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllExitsDown;

impl Message for AllExitsDown {
    type Result = ();
}

/// One exit's figures.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ExitStats {
    /// Exit name.
    pub name: String,
    /// Source address.
    pub source_ip: std::net::IpAddr,
    /// Enabled in the configuration.
    pub enabled: bool,
    /// Not ejected.
    pub healthy: bool,
    /// Requests in flight now.
    pub active: u32,
    /// `max_concurrent`.
    pub max: u32,
    /// Requests sent.
    pub total: u64,
    /// Answers with a status that was not a throttle.
    pub ok: u64,
    /// Throttle answers.
    pub throttled: u64,
    /// Requests without an answer (including local connect failures).
    pub errors: u64,
    /// `errors / total` (0 when nothing was sent).
    pub error_rate: f64,
    /// Failures in a row now.
    pub consecutive_failures: u32,
    /// Smoothed latency of answers.
    pub latency_ewma: Option<Duration>,
    /// The last error of an attempt through this exit, with the OS error where there was
    /// one; without any, why the health checks last took it out of service (an exit whose
    /// source address would not bind is ejected at start and sent nothing).
    pub last_error: Option<String>,
    /// Current pacing interval per host (limiter keys involving this exit).
    pub intervals: Vec<(String, Duration)>,
}

impl ExitStats {
    /// An exit that has sent nothing yet: enabled, healthy, `max` 0 and every count 0;
    /// a starting point for figures made outside the crawler (a display's test data).
    pub fn new(name: impl Into<String>, source_ip: std::net::IpAddr) -> Self {
        ExitStats {
            name: name.into(),
            source_ip,
            enabled: true,
            healthy: true,
            active: 0,
            max: 0,
            total: 0,
            ok: 0,
            throttled: 0,
            errors: 0,
            error_rate: 0.0,
            consecutive_failures: 0,
            latency_ewma: None,
            last_error: None,
            intervals: Vec::new(),
        }
    }
}

/// Ask the scheduler for every exit's figures.
#[derive(Debug, Clone, Copy)]
pub struct GetStats;

impl Message for GetStats {
    type Result = Vec<ExitStats>;
}

/// What the adaptive limiter knows about one host (scope `auto`), or one key (other
/// scopes).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HostLimits {
    /// The host (`*` for a key that does not name one).
    pub host: String,
    /// Scope `auto`: what the host's answers say about its limit — `unknown` (no throttle
    /// yet), `host` (one budget shared by the exits, or equal per-IP budgets used evenly)
    /// or `per_ip` (some exits have budgets of their own). Other scopes: the scope.
    pub scope: String,
    /// Where a `Retry-After` read on this host binds now: `exit` (the exit that read it,
    /// while the others go on at the host's cut rate: a learned host through several
    /// exits) or `host` (every exit: a host being learned, one exit, or a host whose
    /// Retry-After proved host-wide). Other scopes: the scope's key, named as `scope`.
    pub retry_after_binds: String,
    /// The host's budget first (`exit: None`), then each exit's own.
    pub lanes: Vec<LaneLimits>,
}

/// One budget of a host: the host's whole, or one exit's own.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LaneLimits {
    /// The exit, for an exit's own budget.
    pub exit: Option<String>,
    /// The current rate, requests/s.
    pub rps: f64,
    /// Waiting out a lockout (everything refused) now.
    pub locked_out: bool,
    /// Lockouts the site did not explain (bans) so far.
    pub bans: u32,
    /// The rate ceiling bans have left, requests/s, while it stands: it is raised step by
    /// step and lifted once the rate a ban came at has been held without one.
    pub ceiling: Option<f64>,
    /// The site's latency when nothing queues (median of quiet rounds).
    pub latency_base: Option<Duration>,
    /// Share of recent answers that were errors (5xx that are not throttles, resets,
    /// timeouts).
    pub error_share: f64,
    /// Times this process cut the rate on what it saw (throttles, errors, latency). A
    /// lower rate taken from another crawler process (distributed mode) is not one: the
    /// cut was that process's.
    pub decreases: u64,
}

/// Ask the limiter what it knows per host.
#[derive(Debug, Clone, Copy)]
pub struct GetLimits;

impl Message for GetLimits {
    type Result = Vec<HostLimits>;
}

/// Stop taking work: queued fetches fail with `Shutdown`, in-flight ones finish (or fail
/// after `grace`). Replies when nothing is in flight any more.
#[derive(Debug, Clone, Copy)]
pub struct Shutdown {
    /// How long in-flight fetches may take to finish.
    pub grace: Duration,
}

impl Message for Shutdown {
    type Result = ();
}

// ---------------------------------------------------------------------------------------
// Internal
// ---------------------------------------------------------------------------------------

/// Scheduler → exit: send one HTTP request, and report how it went through `done`.
///
/// Why not a reply: a request/reply future has to be polled by the scheduler's context,
/// and an actix context polls every future it holds each time it wakes, so with C
/// fetches in flight each completion cost C polls. A report is one message per fetch.
#[derive(Debug)]
pub(crate) struct SendRequest {
    pub url: http::Uri,
    pub method: Method,
    pub headers: Vec<(String, String)>,
    pub body: Option<Bytes>,
    /// See [`Fetch::from_public`].
    pub from_public: bool,
    /// See [`Fetch::max_body_bytes`].
    pub max_body_bytes: Option<u64>,
    /// See [`Fetch::truncate_body`].
    pub truncate_body: bool,
    /// See [`Fetch::follow_redirects`].
    pub follow_redirects: bool,
    /// See [`Fetch::min_redirects`].
    pub min_redirects: u8,
    /// See [`Fetch::left_origin`].
    pub left_origin: bool,
    pub done: AttemptReport,
}

impl Message for SendRequest {
    type Result = ();
}

/// Where exits report attempts: the scheduler's report channel.
///
/// Why a channel and not the scheduler's mailbox: every actix message is boxed and queued
/// on its own, and reports are one per request; the channel's items are read by the
/// scheduler's context as a stream, without a box per report. Shared, not cloned per
/// report: cloning a sender touches two shared counters, an `Arc` one.
pub(crate) type ReportTo = Arc<tokio::sync::mpsc::UnboundedSender<AttemptDone>>;

/// Where an exit reports one attempt. Exactly one [`AttemptDone`] reaches the scheduler
/// per report: the attempt's result, or — when the report is dropped unused because the
/// exit stopped before or while sending — `None`.
pub(crate) struct AttemptReport {
    id: u64,
    to: Option<ReportTo>,
}

impl AttemptReport {
    pub fn new(id: u64, to: ReportTo) -> Self {
        Self { id, to: Some(to) }
    }

    /// Report the attempt.
    pub fn send(mut self, attempted: Attempted) {
        self.deliver(Some(attempted));
    }

    fn deliver(&mut self, attempted: Option<Attempted>) {
        if let Some(to) = self.to.take() {
            // Fails only when the scheduler is gone, and then nobody waits for it.
            let _ = to.send(AttemptDone {
                id: self.id,
                attempted,
            });
        }
    }
}

impl Drop for AttemptReport {
    fn drop(&mut self) {
        self.deliver(None);
    }
}

impl fmt::Debug for AttemptReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptReport")
            .field("id", &self.id)
            .finish()
    }
}

/// Exit → scheduler: attempt `id` ended; `None` when the exit dropped it without an
/// answer (its actor or Arbiter stopped).
#[derive(Debug)]
pub(crate) struct AttemptDone {
    pub id: u64,
    pub attempted: Option<Attempted>,
}

/// The way in → scheduler: a fetch that holds its queue slot and is to join the queue
/// (any fetch that does not take the direct path, from `CrawlerHandle::fetch` or a
/// `Fetch` message alike).
///
/// Why a channel item and not an actix message: an actix request/reply boxes the message,
/// queues it, and needs a spawned future in the scheduler's context to join the queue once
/// the reply channel is known. An intake item carries its own reply channel and joins the
/// queue directly. If the scheduler is gone before reading it, dropping the item replies
/// `Shutdown`, so there is still one reply.
pub(crate) struct Intake {
    pub fetch: Fetch,
    /// The URL as sent and its host, when the direct path parsed it already.
    pub parsed: Option<Parsed>,
    pub slot: Option<tokio::sync::OwnedSemaphorePermit>,
    pub reply: Option<tokio::sync::oneshot::Sender<Result<FetchResponse, FetchError>>>,
    pub arrived: actix::clock::Instant,
}

impl Drop for Intake {
    fn drop(&mut self) {
        if let Some(tx) = self.reply.take() {
            let url = std::mem::take(&mut self.fetch.url);
            let _ = tx.send(Err(FetchError::shutdown(url, "crawler is shutting down")));
        }
    }
}

/// Exit → scheduler: how one HTTP request went.
#[derive(Debug)]
pub(crate) struct Attempted {
    pub sent_at: Instant,
    pub latency: Duration,
    pub result: Result<Answer, AttemptFailure>,
}

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: Headers,
    pub body: Bytes,
    /// Body bytes as they came over the wire (encoded, if it was).
    pub wire_bytes: u64,
    /// The `Content-Encoding` that was decoded, if any.
    pub content_encoding: Option<String>,
    /// Where redirects led, when they were followed.
    pub final_url: Option<String>,
    /// See [`FetchResponse::peer_private`].
    pub peer_private: Option<bool>,
    /// See [`FetchResponse::truncated`].
    pub truncated: bool,
    /// See [`FetchResponse::left_origin`].
    pub left_origin: bool,
}

/// How a fetch went, beside its last answer: what its [`FetchResponse`] says of it.
pub(crate) struct Delivery {
    /// The URL as requested.
    pub url: String,
    pub exit: Arc<str>,
    pub attempts: u32,
    pub throttled: u32,
    pub elapsed: Duration,
}

impl Answer {
    /// The reply to a fetch whose last answer this is.
    #[inline]
    pub(crate) fn deliver(self, d: Delivery) -> FetchResponse {
        FetchResponse {
            url: d.url,
            final_url: self.final_url,
            status: self.status,
            headers: self.headers,
            body: self.body,
            wire_bytes: self.wire_bytes,
            content_encoding: self.content_encoding,
            peer_private: self.peer_private,
            truncated: self.truncated,
            left_origin: self.left_origin,
            exit: d.exit,
            attempts: d.attempts,
            throttled: d.throttled,
            elapsed: d.elapsed,
        }
    }
}

/// No HTTP answer.
#[derive(Debug, Clone)]
pub(crate) struct AttemptFailure {
    pub kind: Failure,
    pub error: FetchErrorKind,
    pub message: String,
}

/// Health → exit: fetch the health URL through this exit's client.
#[derive(Debug, Clone)]
pub(crate) struct Ping {
    pub url: String,
    pub timeout: Duration,
}

impl Message for Ping {
    type Result = Result<(), String>;
}

/// Scheduler → health: what real traffic said about an exit (passive health).
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub exit: usize,
    pub error: Option<String>,
}

impl Message for Observed {
    type Result = ();
}

/// Scheduler → exit: the exit's own counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GetCounters;

impl Message for GetCounters {
    type Result = Counters;
}

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

/// A URL as sent, and its host (see the scheduler's `parse_url`).
pub(crate) type Parsed = (http::Uri, Arc<str>);
