//! `SchedulerActor`: takes `Fetch`es, picks an exit for each, paces, retries, replies.
//!
//! Why the pacing state lives here and not in each exit: "which exit may send to this host
//! *now*" is the selection itself. Keeping every limiter key's pacer next to the selection
//! makes the choice exact without a round trip to the exits; the exits stay thin I/O.
//!
//! The state is a `Scheduler` behind a shared cell; [`SchedulerActor`] is its mailbox.
//! Fetches come in three ways: `Fetch` messages (other actors), `CrawlerHandle::fetch`'s
//! channel (read by the actor as a stream), and — when the caller runs on the scheduler's
//! Arbiter and every exit does too — the direct path (`Ingress::fetch`): a fetch that may
//! be sent now, with nothing queued for its host, is admitted, sent and settled on the
//! caller's own task, with the same selection, pacing, counting and reply as any other.
//! Why: each hand-off between tasks and mailboxes costs about as much as the scheduling
//! itself; against a fast site the direct path is what keeps the actor system close to a
//! bare client (README, "Cost of the actor system").
//!
//! Guarantees:
//! - exactly one reply per `Fetch`: each pending fetch owns its reply channel (or, on the
//!   direct path, the slot its caller reads right after), and a pending fetch that is
//!   dropped (shutdown, cancelled attempt) replies `Shutdown`;
//! - no polling: when nothing may be sent, one timer is set for the earliest moment
//!   something may, and completions and interval changes re-run the dispatch;
//! - backpressure: at most `queue_capacity` fetches wait in the queue; further `Fetch`es
//!   wait for a slot before they are queued, so `Addr::send(..).await` waits;
//! - a fetch whose exit cannot even connect (the source address is gone, nothing was
//!   sent) moves to another exit without counting an attempt or telling the limiter;
//! - a shutdown cuts off what is still in flight when its grace period ends, direct
//!   attempts included.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::clock::Instant;
use actix::dev::MessageResponse;
use actix::prelude::*;
use awc::http::Uri;
use exitcrawl::config::{Algorithm, Scope, Settings};
use exitcrawl::headers::ServerHints;
use exitcrawl::limiter::{self, interval_of, Quota, RateLimiter, TokenBucket};
use exitcrawl::pacer::Pacer;
use exitcrawl::retry::{Backoff, RetryBudget};
use exitcrawl::rng::SplitMix64;
use exitcrawl::select::{self, Candidate, NoExitReason, Selection};
use foldhash::HashMap;
use smallvec::SmallVec;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tracing_actix::ActorInstrument;

use crate::cutoff::CutOff;
use crate::exit::{ExitActor, ExitCore, Hop};
use crate::health::HealthActor;
use crate::limiter::{LimitKey, LimiterActor};
use crate::messages::{
    AllExitsDown, Answer, AttemptDone, AttemptReport, Attempted, ExitStats, Failed, Fetch,
    FetchError, FetchErrorKind, FetchResponse, GetCounters, GetStats, HealthChanged, Intake,
    Observed, ReportTo, SendRequest, SetInterval, Shutdown, Succeeded, Throttled,
};
use crate::metrics::{ExitHandles, Metrics, Outcome, RateLabels};
use crate::net::FailureKind;

type Reply = Result<FetchResponse, FetchError>;

/// A URL as sent, and its host (see `parse_url`).
pub(crate) type Parsed = (Uri, Arc<str>);

/// One exit as the scheduler sees it.
pub(crate) struct ExitSlot {
    pub name: Arc<str>,
    pub source_ip: std::net::IpAddr,
    pub region: Option<String>,
    pub enabled: bool,
    pub healthy: bool,
    pub addr: Addr<ExitActor>,
    /// The exit's core when it shares this Arbiter: requests start on it directly.
    pub local: Option<Rc<ExitCore>>,
    pub max_concurrent: u32,
    pub active: u32,
    pub bucket: Option<TokenBucket>,
    /// A failure was reported to the health actor and no success since: the next
    /// success must be reported too (it resets the count, or recovers a probing exit).
    pub failing: bool,
}

/// Distributed mode: the shared GCRA every request must pass.
#[derive(Clone)]
pub(crate) struct SharedLimits {
    pub gcra: crate::redis::RedisGcra,
}

/// A limiter key's pacing, shared between `SchedulerActor::keys` and the hosts using it.
type SharedKey = Rc<RefCell<KeyState>>;

/// One limiter key's pacing.
struct KeyState {
    limiter: Option<Box<dyn RateLimiter>>,
    pause_until: Option<std::time::Instant>,
    /// Distributed mode while Redis is unreachable: the shared rate this key had; the
    /// local limiter runs at a share of it meanwhile.
    fallback_from: Option<f64>,
}

impl KeyState {
    /// Start pacing on a local share; `true` when this call started the fallback.
    fn enter_fallback(&mut self, processes: u32, min_rps: f64, now: std::time::Instant) -> bool {
        let Some(l) = self.limiter.as_mut() else {
            return false;
        };
        if self.fallback_from.is_some() {
            return false;
        }
        let rps = l.quota().rps;
        self.fallback_from = Some(rps);
        l.set_rate(crate::redis::fallback_rps(rps, processes, min_rps), now);
        true
    }

    fn leave_fallback(&mut self, now: std::time::Instant) {
        if let (Some(rps), Some(l)) = (self.fallback_from.take(), self.limiter.as_mut()) {
            l.set_rate(rps, now);
        }
    }

    fn ready_in(&mut self, now: std::time::Instant) -> Duration {
        let pause = self
            .pause_until
            .map_or(Duration::ZERO, |p| p.saturating_duration_since(now));
        let pace = self
            .limiter
            .as_mut()
            .map_or(Duration::ZERO, |l| l.peek(now));
        pause.max(pace)
    }
}

struct Pending {
    fetch: Fetch,
    host: Arc<str>,
    /// Taken when the reply is sent; a pending fetch dropped without one (shutdown,
    /// cancelled attempt) answers `Shutdown` from `Drop`, so there is always a reply.
    reply: Option<oneshot::Sender<Reply>>,
    /// `exitcrawl_urls_done_total`, counted when the pending fetch ends (in `Drop`).
    done: prometheus_client::metrics::counter::Counter,
    /// Holds a queue slot while the fetch waits in the queue.
    slot: Option<OwnedSemaphorePermit>,
    attempts: u32,
    throttled: u32,
    excluded: Vec<usize>,
    arrived: Instant,
    /// The URL as sent, parsed at admission: it differs from the one requested for an IDN
    /// host (punycode) or a non-ASCII path (percent-encoded); replies carry the URL as
    /// requested. The first attempt takes it (cloning a `Uri` allocates); a retry parses
    /// the URL again.
    uri: Option<Uri>,
    no_exit_since: Option<Instant>,
    /// The last failure on our side (nothing sent), said when no exit is left to try.
    local_failure: Option<(FetchErrorKind, String)>,
    waited: bool,
    last_exit: Option<usize>,
    /// One span per fetch: every event about it (attempts, throttles, retries) carries it.
    /// Made on the first event (see [`Pending::span`]): most fetches have none, and a span
    /// costs a few hundred instructions to make and drop even when nothing records it.
    span: Option<tracing::Span>,
}

impl Pending {
    /// The fetch's span, made on first use.
    fn span(&mut self) -> &tracing::Span {
        let (url, host) = (&self.fetch.url, &self.host);
        self.span.get_or_insert_with(|| {
            // At WARN, not INFO: the default filter (`warn`) would otherwise drop the
            // span, and the warnings operators do see ("retries exhausted") would lose
            // url and host.
            tracing::warn_span!("fetch", url = %exitcrawl::redact::Masked(url), host = %host)
        })
    }

    fn fail(mut self, kind: FetchErrorKind, message: impl Into<String>, exits: &[ExitSlot]) {
        let err = FetchError {
            kind,
            message: message.into(),
            url: self.fetch.url.clone(),
            exit: self.last_exit.map(|i| Arc::clone(&exits[i].name)),
            attempts: self.attempts,
            throttled: self.throttled,
        };
        self.answer(Err(err));
    }

    fn answer(&mut self, reply: Reply) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(reply);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.done.inc();
        if self.reply.is_some() {
            let err = FetchError {
                kind: FetchErrorKind::Shutdown,
                message: "crawler shut down before this fetch finished".into(),
                url: std::mem::take(&mut self.fetch.url),
                exit: None,
                attempts: self.attempts,
                throttled: self.throttled,
            };
            self.answer(Err(err));
        }
    }
}

/// One host as the scheduler sees it. One map lookup per host visit finds its queue and
/// its in-flight counts together (the per-fetch path used to make several).
#[derive(Default)]
struct HostState {
    queue: VecDeque<Pending>,
    /// Fetches in flight to this host, by exit index.
    active: Vec<u32>,
    /// The host is in `order`.
    ordered: bool,
    /// Its pacing, found once instead of per visit.
    pacing: HostPacing,
}

/// A host's pacing as [`choose`] reads it: its limiter keys and how recently each exit
/// sent to it.
#[derive(Default)]
struct HostPacing {
    /// The limiter key of each exit, by exit index (scope `auto`: each exit's own lane,
    /// unpaced until the limiter gives it a rate).
    keys: Vec<Option<SharedKey>>,
    /// Scope `auto`: the host's budget, which every exit's requests draw on.
    host_key: Option<SharedKey>,
    /// `sends` when each exit last sent to this host (0: never).
    last_sent: Vec<u64>,
    /// Requests sent to this host.
    sends: u64,
}

impl HostState {
    /// Nothing queued, nothing in flight, not in `order`: the entry can go.
    fn idle(&self) -> bool {
        !self.ordered && self.queue.is_empty() && self.active.iter().all(|n| *n == 0)
    }
}

/// The pacing state of `key`, created on first use. `paced`: start with a pacer at the
/// first rate (with `aimd`); an exit's own lane under scope `auto` starts unpaced and
/// gets a pacer with the limiter's first [`SetInterval`] for it.
fn key_state(
    keys: &mut HashMap<LimitKey, SharedKey>,
    settings: &Settings,
    key: LimitKey,
    (seed, paced): (usize, bool),
    now: std::time::Instant,
) -> SharedKey {
    let l = &settings.limiter;
    let state = keys.entry(key).or_insert_with(|| {
        let limiter: Option<Box<dyn RateLimiter>> = match l.algorithm {
            Algorithm::None => None,
            _ if !paced => None,
            Algorithm::Aimd => Some(Box::new(Pacer::new(
                interval_of(l.initial_rps),
                l.jitter,
                seed as u64 ^ 0xa11ce,
                now,
            ))),
            other => other
                .limiter_kind()
                .map(|k| limiter::build(k, Quota::new(l.initial_rps, l.burst.max(1)), now)),
        };
        Rc::new(RefCell::new(KeyState {
            limiter,
            pause_until: None,
            fallback_from: None,
        }))
    });
    Rc::clone(state)
}

/// The key whose pacing every request through exit `exit` to `host` must pass first: the
/// scope's key, or under scope `auto` the exit's own lane.
fn exit_key(settings: &Settings, exit: &Arc<str>, host: &Arc<str>) -> (LimitKey, bool) {
    match settings.limiter.scope {
        Scope::Auto => (LimitKey::exit_lane(exit, host), false),
        scope => (LimitKey::new(scope, exit, host), true),
    }
}

/// What [`choose`] reads and updates besides the host's own state.
struct Choice<'a> {
    exits: &'a mut [ExitSlot],
    keys: &'a mut HashMap<LimitKey, SharedKey>,
    settings: &'a Settings,
    /// Scratch: when each exit may send next.
    ready: &'a mut Vec<Duration>,
    /// Breaks ties between equally loaded exits in turn.
    tie: &'a mut u64,
}

/// Which exit may send a fetch (`req`) to `host` now: the core's `select` over every
/// exit's health, load (the host's own count against `per_host_connections`), pacing
/// (the exit's token bucket, the limiter keys' pacers) and how recently it sent to this
/// host. On `Exit(i)` the permits the selection saw as free are taken.
fn choose(
    c: Choice<'_>,
    (active, pacing): (&mut Vec<u32>, &mut HostPacing),
    host: &Arc<str>,
    req: &select::Request<'_>,
    now_std: std::time::Instant,
) -> Selection {
    let n = c.exits.len();
    let per_host_cap = c.settings.crawler.per_host_connections;
    if active.len() < n {
        active.resize(n, 0);
        pacing.keys.resize(n, None);
        pacing.last_sent.resize(n, 0);
    }
    let host_ready = match c.settings.limiter.scope {
        Scope::Auto => pacing
            .host_key
            .get_or_insert_with(|| {
                let key = LimitKey {
                    exit: None,
                    host: Some(Arc::clone(host)),
                };
                key_state(c.keys, c.settings, key, (0, true), now_std)
            })
            .borrow_mut()
            .ready_in(now_std),
        _ => Duration::ZERO,
    };
    c.ready.clear();
    for (i, exit) in c.exits.iter_mut().enumerate() {
        let bucket = exit
            .bucket
            .as_mut()
            .map_or(Duration::ZERO, |b| b.peek(now_std));
        let key = pacing.keys[i]
            .get_or_insert_with(|| {
                let (key, paced) = exit_key(c.settings, &exit.name, host);
                key_state(c.keys, c.settings, key, (i, paced), now_std)
            })
            .borrow_mut()
            .ready_in(now_std);
        c.ready.push(bucket.max(key).max(host_ready));
    }
    // Filled in place: `collect` builds the (half-kilobyte) vector and then moves it.
    let mut cands: SmallVec<[Candidate<'_>; 8]> = SmallVec::new();
    for (i, e) in c.exits.iter().enumerate() {
        cands.push(Candidate {
            name: &e.name,
            region: e.region.as_deref(),
            available: e.enabled && e.healthy,
            active: if active[i] >= per_host_cap {
                e.max_concurrent
            } else {
                e.active
            },
            max_concurrent: e.max_concurrent,
            ready_in: c.ready[i],
            last_sent: pacing.last_sent[i],
            family: select::Family::of(e.source_ip),
        });
    }
    *c.tie = c.tie.wrapping_add(1);
    let selection = select::select(&cands, req, *c.tie);
    drop(cands);
    if let Selection::Exit(i) = selection {
        // Take the permits the selection saw as free.
        if let Some(b) = c.exits[i].bucket.as_mut() {
            b.check(now_std);
        }
        for key in pacing.keys[i].iter().chain(pacing.host_key.iter()) {
            if let Some(l) = key.borrow_mut().limiter.as_mut() {
                l.check(now_std);
            }
        }
        pacing.sends += 1;
        pacing.last_sent[i] = pacing.sends;
    }
    selection
}

/// Internal: a fetch that got its queue slot.
struct Enqueue {
    fetch: Fetch,
    uri: Uri,
    host: Arc<str>,
    slot: Option<OwnedSemaphorePermit>,
    reply: Option<oneshot::Sender<Reply>>,
    arrived: Instant,
}

impl Message for Enqueue {
    type Result = ();
}

/// What one look at a host's queue found.
enum Step {
    Sent,
    /// Sent the last queued fetch: the host leaves `order` without another visit.
    SentLast,
    Wait(Duration),
    Busy,
    Empty,
}

/// The scheduler's state and logic; [`SchedulerActor`] is its mailbox.
pub(crate) struct Scheduler {
    settings: Arc<Settings>,
    exits: Vec<ExitSlot>,
    /// Pacing per limiter key; hosts keep a handle to theirs (see [`HostState::keys`]).
    keys: HashMap<LimitKey, SharedKey>,
    /// Hosts with fetches queued or in flight.
    hosts: HashMap<Arc<str>, HostState>,
    /// Round-robin over the hosts with queued fetches.
    order: VecDeque<Arc<str>>,
    /// Scratch for `try_host`: when each exit may send next.
    ready: Vec<Duration>,
    delayed: HashMap<u64, Pending>,
    /// Attempts handed to an exit, by report id (see [`AttemptReport`]).
    sent: HashMap<u64, (usize, Pending)>,
    /// Redis checks in flight (distributed mode), cancelled at the end of a shutdown.
    in_flight_handles: HashMap<u64, SpawnHandle>,
    /// Where exits report attempts: a channel this actor reads as a stream.
    reports: Option<ReportTo>,
    next_id: u64,
    in_flight: u32,
    queue_slots: Arc<Semaphore>,
    limiter: Option<Addr<LimiterActor>>,
    health: Option<Addr<HealthActor>>,
    budget: RetryBudget,
    backoff: Backoff,
    rng: SplitMix64,
    tie: u64,
    wake: Option<(SpawnHandle, std::time::Instant)>,
    shutting_down: bool,
    drained: Vec<oneshot::Sender<()>>,
    metrics: Arc<Metrics>,
    handles: Vec<ExitHandles>,
    shared: Option<SharedLimits>,
    /// Fetches waiting in the queues (not in flight, not waiting for a retry).
    queued: i64,
    /// Every exit runs on this Arbiter: `CrawlerHandle::fetch` may take the direct path.
    all_local: bool,
    /// The direct path's way back to the actor, for what needs its timers.
    handoff: Option<tokio::sync::mpsc::UnboundedSender<Handoff>>,
    /// Fired when a shutdown's grace period ends: direct attempts still running stop.
    cut: Rc<CutOff>,
}

impl Scheduler {
    pub(crate) fn new(
        settings: Arc<Settings>,
        exits: Vec<ExitSlot>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let handles = exits
            .iter()
            .map(|e| metrics.exit_handles(&Metrics::exit(&e.name, e.source_ip)))
            .collect();
        let c = &settings.crawler;
        let queue_slots = Arc::new(Semaphore::new(c.queue_capacity as usize));
        let budget = RetryBudget::new(c.retry_budget, 1.0, Duration::from_secs(10));
        let backoff = Backoff {
            base: c.retry_backoff_base(),
            max: c.retry_backoff_max(),
        };
        Self {
            exits,
            keys: HashMap::default(),
            hosts: HashMap::default(),
            order: VecDeque::new(),
            ready: Vec::new(),
            delayed: HashMap::default(),
            sent: HashMap::default(),
            in_flight_handles: HashMap::default(),
            reports: None,
            next_id: 0,
            in_flight: 0,
            queue_slots,
            limiter: None,
            health: None,
            budget,
            backoff,
            rng: SplitMix64::new(0x5c4e_d01e),
            tie: 0,
            wake: None,
            shutting_down: false,
            drained: Vec::new(),
            metrics,
            handles,
            shared: None,
            queued: 0,
            all_local: false,
            handoff: None,
            cut: Rc::new(CutOff::default()),
            settings,
        }
    }

    /// Open the direct path's way back (needs the actor's context: call it in
    /// `SchedulerActor::create`).
    pub(crate) fn attach(&mut self, ctx: &mut Context<SchedulerActor>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        ctx.add_stream(Channel(rx));
        self.handoff = Some(tx);
        self.all_local = self.exits.iter().all(|e| e.local.is_some());
    }

    pub(crate) fn share_limits(&mut self, shared: SharedLimits) {
        self.shared = Some(shared);
    }

    pub(crate) fn connect(&mut self, limiter: Addr<LimiterActor>, health: Addr<HealthActor>) {
        self.limiter = Some(limiter);
        self.health = Some(health);
    }

    /// The pacing state of the scope's key for a request through `exit` to `host` (under
    /// scope `auto`, the host's budget: what Redis shares across processes).
    fn key_state(&mut self, exit: usize, host: &Arc<str>, now: std::time::Instant) -> SharedKey {
        let key = LimitKey::new(self.settings.limiter.scope, &self.exits[exit].name, host);
        key_state(&mut self.keys, &self.settings, key, (exit, true), now)
    }

    /// What [`choose`] needs, borrowed apart from the hosts it is asked about.
    fn split(&mut self) -> (Choice<'_>, &mut HashMap<Arc<str>, HostState>) {
        let choice = Choice {
            exits: &mut self.exits,
            keys: &mut self.keys,
            settings: &self.settings,
            ready: &mut self.ready,
            tie: &mut self.tie,
        };
        (choice, &mut self.hosts)
    }

    /// Send what may be sent; set one timer for the earliest moment more may go.
    fn dispatch(&mut self, ctx: &mut Context<SchedulerActor>) {
        let now = Instant::now();
        let concurrency = self.settings.crawler.concurrency;
        let mut wake: Option<Duration> = None;
        let mut to_visit = self.order.len();
        while to_visit > 0 && self.in_flight < concurrency {
            let Some(host) = self.order.pop_front() else {
                break;
            };
            to_visit -= 1;
            match self.try_host(&host, now, ctx) {
                Step::Sent => {
                    self.order.push_back(host);
                    to_visit = self.order.len();
                }
                // `try_host` took the host out of `order` (its count for the exit keeps
                // the entry until the fetch ends).
                Step::SentLast => to_visit = self.order.len(),
                Step::Wait(d) => {
                    wake = Some(wake.map_or(d, |w| w.min(d)));
                    self.order.push_back(host);
                }
                Step::Busy => self.order.push_back(host),
                Step::Empty => {
                    if let Some(state) = self.hosts.get_mut(&host) {
                        state.ordered = false;
                        if state.idle() {
                            self.hosts.remove(&host);
                        }
                    }
                }
            }
        }
        if let Some(d) = wake {
            let at = now.into_std() + d;
            if self
                .wake
                .as_ref()
                .is_some_and(|(_, t)| *t <= at && *t > now.into_std())
            {
                return;
            }
            if let Some((h, _)) = self.wake.take() {
                ctx.cancel_future(h);
            }
            let h = ctx.run_later(d.max(Duration::from_micros(50)), |act, ctx| {
                let mut act = act.state.borrow_mut();
                act.wake = None;
                act.dispatch(ctx);
            });
            self.wake = Some((h, at));
        }
    }

    fn try_host(
        &mut self,
        host: &Arc<str>,
        now: Instant,
        ctx: &mut Context<SchedulerActor>,
    ) -> Step {
        let now_std = now.into_std();
        let (choice, hosts) = self.split();
        let Some(state) = hosts.get_mut(host) else {
            return Step::Empty;
        };
        let Some(head) = state.queue.front_mut() else {
            return Step::Empty;
        };
        let req = select::Request {
            preferred: head.fetch.preferred_exit.as_deref(),
            region: head.fetch.region.as_deref(),
            exclude: &head.excluded,
            family: select::Family::of_host(host),
        };
        let selection = choose(
            choice,
            (&mut state.active, &mut state.pacing),
            host,
            &req,
            now_std,
        );
        match selection {
            Selection::Exit(i) => {
                let Some(mut p) = state.queue.pop_front() else {
                    return Step::Empty;
                };
                state.active[i] += 1;
                let last = state.queue.is_empty();
                p.waited |= !last;
                if last {
                    state.ordered = false;
                }
                self.set_queued(-1);
                self.send(i, p, ctx);
                if last {
                    Step::SentLast
                } else {
                    Step::Sent
                }
            }
            Selection::Wait(d) => {
                head.waited = true;
                Step::Wait(d)
            }
            Selection::Busy => Step::Busy,
            Selection::NoExit(reason) => self.no_exit(host, reason, now),
        }
    }

    fn no_exit(&mut self, host: &Arc<str>, reason: NoExitReason, now: Instant) -> Step {
        let Some(q) = self.hosts.get_mut(host).map(|h| &mut h.queue) else {
            return Step::Empty;
        };
        let (kind, message) = match reason {
            NoExitReason::UnknownPreferred => (
                FetchErrorKind::UnknownExit,
                format!(
                    "preferred exit {:?} is not configured",
                    q.front()
                        .and_then(|p| p.fetch.preferred_exit.clone())
                        .unwrap_or_default()
                ),
            ),
            NoExitReason::NoRegionMatch => (
                FetchErrorKind::NoRegion,
                format!(
                    "no exit in region {:?}",
                    q.front()
                        .and_then(|p| p.fetch.region.clone())
                        .unwrap_or_default()
                ),
            ),
            NoExitReason::NoFamilyMatch => (
                FetchErrorKind::AddressFamily,
                format!(
                    "no exit can reach {host}: it is an {} address and no exit has one",
                    select::Family::of_host(host).unwrap_or_default().as_str()
                ),
            ),
            NoExitReason::AllExcluded => match q.front_mut().and_then(|p| p.local_failure.take()) {
                // Every exit failed the same way: say how (a family mismatch, a bind error).
                Some((kind, message)) => (
                    kind,
                    format!("no exit could open a connection; the last said: {message}"),
                ),
                None => (
                    FetchErrorKind::LocalConnect,
                    "no exit could open a connection (every source address failed locally)".into(),
                ),
            },
            NoExitReason::AllUnavailable => {
                // Exits come back after their ejection time: wait a bounded time for one.
                let limit = self
                    .settings
                    .health
                    .max_ejection()
                    .min(Duration::from_secs(30));
                let Some(head) = q.front_mut() else {
                    return Step::Empty;
                };
                let since = *head.no_exit_since.get_or_insert(now);
                let waited = now.saturating_duration_since(since);
                if waited < limit {
                    return Step::Wait((limit - waited).min(Duration::from_secs(1)));
                }
                (
                    FetchErrorKind::NoHealthyExit,
                    format!(
                        "no healthy exit: every exit is ejected or disabled (waited {waited:?})"
                    ),
                )
            }
        };
        if let Some(p) = q.pop_front() {
            p.fail(kind, message, &self.exits);
            self.set_queued(-1);
        }
        Step::Sent
    }

    /// Send `p` through exit `i`; the host's count for the exit is already taken.
    fn send(&mut self, i: usize, mut p: Pending, ctx: &mut Context<SchedulerActor>) {
        p.slot = None; // leaves the queue: frees a slot for a waiting Fetch
        self.reserve(i);
        match self.shared.clone() {
            Some(shared) => self.check_shared(i, p, shared, ctx),
            None => self.launch(i, p),
        }
    }

    /// Count a fetch against the exit before anything is sent (the counterpart of
    /// [`Self::release`]).
    fn reserve(&mut self, i: usize) {
        self.exits[i].active += 1;
        self.handles[i].active.inc();
        self.in_flight += 1;
    }

    /// Send one HTTP attempt through exit `i` (already reserved).
    fn launch(&mut self, i: usize, mut p: Pending) {
        let now = Instant::now();
        p.attempts += 1;
        if p.attempts == 1 {
            self.budget.deposit(now.into_std());
        }
        p.last_exit = Some(i);
        let id = self.next_id;
        self.next_id += 1;
        let Some(reports) = self.reports.clone() else {
            return; // not started: unreachable, `started` sets it
        };
        let url = match p.uri.take().map_or_else(|| wire_uri(&p.fetch.url), Ok) {
            Ok(url) => url,
            Err(m) => {
                // Unreachable: the URL parsed at admission.
                self.release(i, &p.host);
                p.fail(FetchErrorKind::InvalidUrl, m, &self.exits);
                return;
            }
        };
        let req = SendRequest {
            url,
            method: p.fetch.method.clone(),
            headers: p.fetch.headers.clone(),
            body: p.fetch.body.clone(),
            from_public: p.fetch.from_public,
            done: AttemptReport::new(id, reports),
        };
        match &self.exits[i].local {
            Some(core) => core.send(req),
            // A stopped exit drops the message, and with it the report, which says so.
            None => self.exits[i].addr.do_send(req),
        }
        self.sent.insert(id, (i, p));
    }

    /// Distributed mode: ask the shared GCRA for the key's permit before sending. The
    /// local pacer has already allowed the request, so Redis sees at most the local rate.
    fn check_shared(
        &mut self,
        i: usize,
        mut p: Pending,
        shared: SharedLimits,
        ctx: &mut Context<SchedulerActor>,
    ) {
        let now = Instant::now().into_std();
        let key = LimitKey::new(self.settings.limiter.scope, &self.exits[i].name, &p.host);
        let state = self.key_state(i, &p.host, now);
        let (rps, burst) = match (&state.borrow().limiter, state.borrow().fallback_from) {
            // In a fallback the local rate is a share; Redis must see the whole.
            (_, Some(r)) => (r, 1),
            (Some(l), None) => {
                let q = l.quota();
                (q.rps, q.burst.max(1))
            }
            (None, None) => (self.settings.limiter.initial_rps, 1),
        };
        let name = key.redis_name();
        let id = self.next_id;
        self.next_id += 1;
        let span = p.span().clone();
        let fut = async move { shared.gcra.check(&name, rps, burst).await };
        let h = ctx.spawn(
            actix::fut::wrap_future::<_, SchedulerActor>(fut)
                .map(move |res, act, ctx| {
                    let mut act = act.state.borrow_mut();
                    act.in_flight_handles.remove(&id);
                    act.on_checked(i, key, p, res, ctx);
                })
                .actor_instrument(span),
        );
        self.in_flight_handles.insert(id, h);
    }

    fn on_checked(
        &mut self,
        i: usize,
        key: LimitKey,
        p: Pending,
        res: Result<exitcrawl::Decision, crate::redis::RedisError>,
        ctx: &mut Context<SchedulerActor>,
    ) {
        let now = Instant::now().into_std();
        let processes = self.settings.redis.processes;
        let min_rps = self.settings.limiter.min_rps;
        match res {
            Ok(exitcrawl::Decision::Allow) => {
                self.metrics.redis_up.set(1);
                if let Some(state) = self.keys.get(&key) {
                    state.borrow_mut().leave_fallback(now);
                }
                self.launch(i, p);
            }
            Ok(exitcrawl::Decision::Wait(d)) => {
                self.metrics.redis_up.set(1);
                if let Some(state) = self.keys.get(&key) {
                    let mut state = state.borrow_mut();
                    state.leave_fallback(now);
                    let until = now + d;
                    state.pause_until = Some(state.pause_until.map_or(until, |q| q.max(until)));
                }
                self.release(i, &p.host);
                self.requeue_front(p);
                self.check_drained();
                self.dispatch(ctx);
            }
            Err(e) => {
                // Redis is away: keep crawling on a conservative local share of the rate.
                self.metrics.redis_up.set(0);
                self.metrics.redis_errors.inc();
                if let Some(state) = self.keys.get(&key) {
                    if state.borrow_mut().enter_fallback(processes, min_rps, now) {
                        tracing::warn!(key = %key.redis_name(), error = %e, "redis unavailable: pacing this key on a local share");
                    }
                }
                self.launch(i, p);
            }
        }
    }

    fn set_queued(&mut self, delta: i64) {
        self.queued += delta;
        self.metrics.queue_depth.set(self.queued);
    }

    fn count(&self, i: usize, outcome: Outcome, status: Option<u16>) {
        self.handles[i].count(&self.metrics, outcome, status);
    }

    fn release(&mut self, i: usize, host: &Arc<str>) {
        self.handles[i].active.dec();
        self.exits[i].active = self.exits[i].active.saturating_sub(1);
        self.in_flight = self.in_flight.saturating_sub(1);
        self.release_host(i, host);
    }

    /// The host's own count for exit `i` (the counterpart of `state.active[i] += 1`).
    fn release_host(&mut self, i: usize, host: &Arc<str>) {
        if let Some(state) = self.hosts.get_mut(host) {
            if let Some(n) = state.active.get_mut(i) {
                *n = n.saturating_sub(1);
            }
            if state.idle() {
                self.hosts.remove(host);
            }
        }
    }

    /// [`Self::settle`] inside the fetch's span when the attempt may log something.
    fn settle_spanned(
        &mut self,
        i: usize,
        mut p: Pending,
        attempted: Option<Attempted>,
    ) -> Option<(Pending, Option<Duration>)> {
        // A plain answer logs nothing: no span for it. Anything else may (throttle, retry,
        // failure), and its events carry the fetch's span.
        let plain =
            matches!(&attempted, Some(Attempted { result: Ok(a), .. }) if self.is_plain(a.status));
        let span = if plain { None } else { Some(p.span().clone()) };
        // A disabled span (nothing records it) is not entered: entering one still costs a
        // trip through the `log` fallback.
        let _in_span = span
            .as_ref()
            .filter(|s| !s.is_disabled())
            .map(|s| s.enter());
        self.settle(i, p, attempted.ok_or(MailboxError::Closed))
    }

    /// An answer that ends the fetch at once (not a throttle, not a 5xx): settled, it is
    /// answered, logs nothing, and is not retried.
    fn is_plain(&self, status: u16) -> bool {
        status < 500 && !self.settings.limiter.is_throttle_status(status)
    }

    /// Count an ended attempt through exit `i`, tell the limiter and the health actor,
    /// and answer the fetch, requeue it (nothing was sent), or return it with the
    /// `Retry-After` floor when it is to be retried after a backoff.
    fn settle(
        &mut self,
        i: usize,
        mut p: Pending,
        res: Result<Attempted, MailboxError>,
    ) -> Option<(Pending, Option<Duration>)> {
        let mut retry = None;
        self.release(i, &p.host);
        let now = Instant::now();
        let exit_name = self.exits[i].name.clone();
        match res {
            Err(e) => {
                // The exit actor is gone: nothing was sent through it.
                p.attempts -= 1;
                p.excluded.push(i);
                self.observe(i, Some(format!("exit actor unavailable: {e}")));
                self.requeue_front(p);
            }
            Ok(att) => match att.result {
                Ok(answer) => {
                    let (throttle, hints) = self.note_answer(
                        i,
                        &exit_name,
                        &p.host,
                        p.waited,
                        (att.sent_at, att.latency),
                        &answer,
                    );
                    let latency_ms = att.latency.as_secs_f64() * 1e3;
                    if throttle {
                        p.throttled += 1;
                        tracing::info!(exit = %exit_name, host = %p.host, status = answer.status, attempt = p.attempts, latency_ms, "throttled");
                    }
                    let retryable = throttle || answer.status >= 500;
                    let verdict = if retryable {
                        self.may_retry(&p, now)
                    } else {
                        Retry::No
                    };
                    if verdict == Retry::Yes {
                        retry = Some((p, hints.retry_after));
                    } else {
                        if retryable {
                            tracing::warn!(exit = %exit_name, host = %p.host, status = answer.status, attempt = p.attempts, latency_ms, "retries exhausted");
                        }
                        let resp = FetchResponse {
                            // The pending fetch is answered here; its URL is not needed after.
                            url: std::mem::take(&mut p.fetch.url),
                            final_url: answer.final_url,
                            status: answer.status,
                            headers: answer.headers,
                            body: answer.body,
                            wire_bytes: answer.wire_bytes,
                            content_encoding: answer.content_encoding,
                            peer_private: answer.peer_private,
                            exit: exit_name,
                            attempts: p.attempts,
                            throttled: p.throttled,
                            elapsed: now.saturating_duration_since(p.arrived),
                            retry_refused: verdict == Retry::BudgetRefused,
                        };
                        p.answer(Ok(resp));
                    }
                }
                Err(f) if f.kind.is_local() => {
                    // Nothing reached the site: not an attempt, not the site's fault. A host
                    // without an address of the exit's family is not the exit's fault either.
                    p.attempts -= 1;
                    p.excluded.push(i);
                    tracing::warn!(exit = %exit_name, error = %f.message, "exit failed locally; moving the fetch");
                    if f.kind.is_exit_fault() {
                        self.observe(i, Some(f.message.clone()));
                    }
                    p.local_failure = Some((f.error, f.message));
                    self.requeue_front(p);
                }
                Err(f) => {
                    self.count(i, Outcome::Error, None);
                    if let Some(l) = &self.limiter {
                        l.do_send(Failed {
                            exit: exit_name.clone(),
                            host: p.host.clone(),
                            sent_at: att.sent_at,
                            latency: att.latency,
                            kind: f.kind,
                        });
                    }
                    // Refused, reset or timed out may be the site's doing, so they feed
                    // the limiter, not the exit's health (else one dead site would eject
                    // every exit); the health URL judges the exit's own path.
                    let connection_level = matches!(
                        f.kind,
                        FailureKind::ConnectRefused | FailureKind::Timeout | FailureKind::Reset
                    );
                    let verdict = if connection_level {
                        self.may_retry(&p, now)
                    } else {
                        Retry::No
                    };
                    if verdict == Retry::Yes {
                        retry = Some((p, None));
                    } else {
                        tracing::warn!(exit = %exit_name, host = %p.host, attempt = p.attempts, error = %f.message, "fetch failed");
                        let message = if verdict == Retry::BudgetRefused {
                            format!("{}; {RETRY_BUDGET_EXHAUSTED}", f.message)
                        } else {
                            f.message
                        };
                        p.fail(f.error, message, &self.exits);
                    }
                }
            },
        }
        retry
    }

    /// What an answer through exit `i` tells: time and count it, feed the limiter (a
    /// throttle; with the adaptive algorithm, any answer; the site's rate-limit headers).
    /// Returns whether it is a throttle, and the site's hints.
    fn note_answer(
        &mut self,
        i: usize,
        exit_name: &Arc<str>,
        host: &Arc<str>,
        waited: bool,
        (sent_at, latency): (std::time::Instant, Duration),
        answer: &Answer,
    ) -> (bool, ServerHints) {
        self.observe(i, None);
        self.handles[i].duration.observe(latency.as_secs_f64());
        // Every hint header is named retry-after or [x-]ratelimit…, and names arrive
        // lowercase: most answers have none, and skip the parse.
        let maybe_hint = |k: &awc::http::header::HeaderName| {
            matches!(k.as_str().as_bytes().first(), Some(b'r' | b'x'))
        };
        let hints = if answer.headers.keys().any(maybe_hint) {
            ServerHints::from_headers(
                answer
                    .headers
                    .iter()
                    .filter(|(k, _)| maybe_hint(k))
                    .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
                // Retry-After's HTTP-date form is relative to the wall clock.
                std::time::SystemTime::now(),
            )
        } else {
            ServerHints::default()
        };
        let throttle = self.settings.limiter.is_throttle_status(answer.status);
        // Fixed algorithms only need what can pause them: throttles and the site's
        // rate-limit headers.
        let adaptive = self.settings.limiter.algorithm == Algorithm::Aimd;
        let tell_limiter = throttle || adaptive || !hints.is_empty();
        if let Some(l) = self.limiter.as_ref().filter(|_| tell_limiter) {
            if throttle {
                l.do_send(Throttled {
                    exit: Arc::clone(exit_name),
                    host: Arc::clone(host),
                    sent_at,
                    latency,
                    status: answer.status,
                    hints,
                });
            } else {
                l.do_send(Succeeded {
                    exit: Arc::clone(exit_name),
                    host: Arc::clone(host),
                    sent_at,
                    latency,
                    status: answer.status,
                    hints,
                    limited: waited,
                });
            }
        }
        let outcome = if throttle {
            Outcome::Throttled
        } else {
            Outcome::Ok
        };
        self.count(i, outcome, Some(answer.status));
        self.metrics.body_wire_bytes.inc_by(answer.wire_bytes);
        self.metrics.body_bytes.inc_by(answer.body.len() as u64);
        (throttle, hints)
    }

    /// Passive health. Successes of an exit in good standing change nothing, so only
    /// failures and the first success after them are reported (one message less per
    /// fetch on the hot path).
    fn observe(&mut self, exit: usize, error: Option<String>) {
        let slot = &mut self.exits[exit];
        if error.is_none() && !slot.failing {
            return;
        }
        slot.failing = error.is_some();
        if let Some(h) = &self.health {
            h.do_send(Observed { exit, error });
        }
    }

    fn may_retry(&mut self, p: &Pending, now: Instant) -> Retry {
        if self.shutting_down || p.attempts > self.settings.crawler.max_retries {
            return Retry::No;
        }
        if self.budget.try_withdraw(now.into_std()) {
            self.metrics.retries.inc();
            return Retry::Yes;
        }
        self.metrics.retry_budget_refusals.inc();
        tracing::warn!(host = %p.host, attempt = p.attempts, "retry refused by the retry budget");
        Retry::BudgetRefused
    }

    fn retry_later(
        &mut self,
        p: Pending,
        retry_after: Option<Duration>,
        ctx: &mut Context<SchedulerActor>,
    ) {
        let delay = self.backoff.delay(p.attempts, retry_after, &mut self.rng);
        tracing::info!(host = %p.host, attempt = p.attempts, delay_ms = delay.as_millis() as u64, "backoff: retry scheduled");
        let id = self.next_id;
        self.next_id += 1;
        self.delayed.insert(id, p);
        ctx.run_later(delay, move |act, ctx| {
            let mut act = act.state.borrow_mut();
            if let Some(p) = act.delayed.remove(&id) {
                act.requeue_front(p);
                act.dispatch(ctx);
            }
        });
    }

    fn requeue_front(&mut self, p: Pending) {
        let host = p.host.clone();
        let state = self.hosts.entry(host.clone()).or_default();
        state.queue.push_front(p);
        if !state.ordered {
            state.ordered = true;
            self.order.push_front(host);
        }
        self.set_queued(1);
    }

    fn check_drained(&mut self) {
        if self.shutting_down && self.in_flight == 0 && self.delayed.is_empty() {
            for tx in self.drained.drain(..) {
                let _ = tx.send(());
            }
        }
    }
}

/// Routes fetches to exits: the mailbox of a `Scheduler`. The state sits behind a
/// shared cell so that `CrawlerHandle::fetch` on this Arbiter can take a fetch straight
/// through it (see `Ingress::fetch`); everything else comes in as messages.
pub struct SchedulerActor {
    state: Rc<RefCell<Scheduler>>,
}

impl SchedulerActor {
    pub(crate) fn new(state: Scheduler) -> Self {
        Self {
            state: Rc::new(RefCell::new(state)),
        }
    }

    /// The shared state, for the direct path on this Arbiter.
    pub(crate) fn state(&self) -> &Rc<RefCell<Scheduler>> {
        &self.state
    }
}

impl Actor for SchedulerActor {
    type Context = Context<SchedulerActor>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(64 * 1024);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        ctx.add_stream(Channel(rx));
        self.state.borrow_mut().reports = Some(Arc::new(tx));
    }
}

/// An unbounded channel's receiving end as a stream the scheduler's context reads
/// (`ctx.add_stream`): attempt reports, and fetches from `CrawlerHandle::fetch`.
pub(crate) struct Channel<T>(pub(crate) tokio::sync::mpsc::UnboundedReceiver<T>);

impl<T> futures_util::Stream for Channel<T> {
    type Item = T;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

/// What a failed attempt may do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    Yes,
    /// Out of attempts (`max_retries`), or shutting down.
    No,
    /// Attempts were left, but the retry budget refused one.
    BudgetRefused,
}

/// Said in a failed fetch's message when the retry budget refused its retry.
pub const RETRY_BUDGET_EXHAUSTED: &str = "retry budget exhausted";

/// Longest URL accepted: beyond this most servers answer 414 anyway, and a runaway input
/// line must not become a request.
pub(crate) const MAX_URL_BYTES: usize = 8192;

/// The URL as sent: non-ASCII URLs (IDN hosts, raw UTF-8 paths) go out in their ASCII form.
fn wire_uri(url: &str) -> Result<Uri, String> {
    let ascii = if url.is_ascii() {
        None
    } else {
        url::Url::parse(url).ok().map(String::from)
    };
    ascii
        .as_deref()
        .unwrap_or(url)
        .parse()
        .map_err(|e| format!("not a valid URL ({e})"))
}

/// The host of a URI's authority, as `Uri::host` gives it (an IPv6 literal keeps its
/// brackets), found with byte searches: `Uri::host` splits by `char` patterns, which
/// showed as a measurable share of admission.
fn host_of(uri: &Uri) -> Option<&str> {
    let auth = uri.authority()?.as_str();
    let host_port = match auth.bytes().rposition(|b| b == b'@') {
        Some(at) => &auth[at + 1..],
        None => auth,
    };
    if host_port.starts_with('[') {
        return host_port.find(']').map(|end| &host_port[..=end]);
    }
    Some(match host_port.bytes().position(|b| b == b':') {
        Some(colon) => &host_port[..colon],
        None => host_port,
    })
}

/// A port in the URL must be 1–65535 (an empty one means the scheme's default): `http::Uri`
/// keeps a port it cannot read as a `u16` (`:70000`) and reports none, so the connection
/// would go to the default port instead.
fn check_port(uri: &Uri) -> Result<(), String> {
    let Some(auth) = uri.authority().map(|a| a.as_str()) else {
        return Ok(());
    };
    let host_port = auth.rsplit_once('@').map_or(auth, |(_, hp)| hp);
    let after_host = match host_port.find(']') {
        Some(end) if host_port.starts_with('[') => &host_port[end + 1..],
        _ => host_port.find(':').map_or("", |c| &host_port[c..]),
    };
    let port = after_host.strip_prefix(':').unwrap_or(after_host);
    if port.is_empty() {
        return Ok(());
    }
    match port.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) && port.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err(format!("port {port:?} is not a port (expected 1..=65535)")),
    }
}

/// The URL parsed as sent, and its host in lowercase (shared with `hosts`' key when the
/// host is already there, which saves an allocation per fetch to a busy host), or why it
/// cannot be fetched.
fn parse_url(url: &str, hosts: &HashMap<Arc<str>, HostState>) -> Result<(Uri, Arc<str>), String> {
    let uri = wire_uri(url)?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => {
            return Err(format!(
                "unsupported scheme {other:?} (expected http or https)"
            ))
        }
        None => return Err("not an absolute URL (expected http:// or https://)".into()),
    }
    let host = host_of(&uri)
        .filter(|h| !h.is_empty())
        .ok_or_else(|| "URL has no host".to_string())?;
    check_port(&uri)?;
    let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Arc::from(host.to_ascii_lowercase().as_str())
    } else {
        match hosts.get_key_value(host) {
            Some((known, _)) => Arc::clone(known),
            None => Arc::from(host),
        }
    };
    Ok((uri, host))
}

impl Scheduler {
    /// The URL as sent and its host, or why the fetch is answered at once.
    fn validate(&self, fetch: &Fetch) -> Result<(Uri, Arc<str>), (FetchErrorKind, String)> {
        if fetch.url.len() > MAX_URL_BYTES {
            let m = format!(
                "URL is {} bytes long; at most {MAX_URL_BYTES} are accepted",
                fetch.url.len()
            );
            return Err((FetchErrorKind::InvalidUrl, m));
        }
        if !fetch.url.is_ascii() && fetch.url.contains('\u{FFFD}') {
            // A replacement character is what a lossy decode of non-UTF-8 input leaves.
            let m = "URL contains bytes that are not valid UTF-8".to_string();
            return Err((FetchErrorKind::InvalidUrl, m));
        }
        let parsed =
            parse_url(&fetch.url, &self.hosts).map_err(|m| (FetchErrorKind::InvalidUrl, m))?;
        if self.shutting_down {
            return Err((FetchErrorKind::Shutdown, "crawler is shutting down".into()));
        }
        Ok(parsed)
    }

    /// The queue's slots: `CrawlerHandle::fetch` takes one before it hands a fetch in.
    pub(crate) fn queue_slots(&self) -> Arc<Semaphore> {
        Arc::clone(&self.queue_slots)
    }
}

impl Handler<Fetch> for SchedulerActor {
    type Result = Admission;

    fn handle(&mut self, fetch: Fetch, ctx: &mut Self::Context) -> Self::Result {
        let state = Rc::clone(&self.state);
        self.state.borrow_mut().on_fetch(fetch, state, ctx)
    }
}

/// How a `Fetch` is answered. A fetch that may be sent now runs on a task of its own, as
/// on the direct path; others join the queue with actix's own reply channel as their
/// reply: no extra channel, task or boxed future per queued fetch.
pub struct Admission(AdmissionKind);

enum AdmissionKind {
    /// Answered at once (invalid URL, shutting down).
    Ready(Reply),
    /// Admitted on the direct path: run it on a task (see [`run_direct`]).
    Direct(Box<(Held, DirectAttempt, Fetch)>),
    /// A queue slot is free: join the queue as soon as the reply channel is known.
    Queue(Enqueue),
    /// The queue is full: wait for a slot (backpressure), then join.
    Wait(ResponseFuture<Reply>),
}

impl MessageResponse<SchedulerActor, Fetch> for Admission {
    fn handle(self, ctx: &mut Context<SchedulerActor>, tx: Option<oneshot::Sender<Reply>>) {
        match self.0 {
            AdmissionKind::Ready(r) => {
                if let Some(tx) = tx {
                    let _ = tx.send(r);
                }
            }
            AdmissionKind::Queue(mut m) => {
                m.reply = tx;
                ctx.spawn(
                    actix::fut::ready(()).map(move |_, act: &mut SchedulerActor, ctx| {
                        act.state.borrow_mut().enqueue(m, ctx);
                    }),
                );
            }
            AdmissionKind::Wait(fut) => {
                actix_rt::spawn(async move {
                    let r = fut.await;
                    if let Some(tx) = tx {
                        let _ = tx.send(r);
                    }
                });
            }
            AdmissionKind::Direct(direct) => {
                let (held, go, fetch) = *direct;
                actix_rt::spawn(async move {
                    let r = run_direct(Entry::Admitted(held, go), fetch).await;
                    if let Some(tx) = tx {
                        let _ = tx.send(r);
                    }
                });
            }
        }
    }
}

impl Scheduler {
    /// Validate a fetch and say how it will be answered.
    fn admit(
        &mut self,
        fetch: Fetch,
        parsed: Option<Parsed>,
        arrived: Instant,
        ctx: &mut Context<SchedulerActor>,
    ) -> Admission {
        let parsed = match parsed {
            Some(_) if self.shutting_down => {
                Err((FetchErrorKind::Shutdown, "crawler is shutting down".into()))
            }
            Some(parsed) => Ok(parsed),
            None => self.validate(&fetch),
        };
        let (uri, host) = match parsed {
            Ok(parsed) => parsed,
            Err((kind, message)) => {
                self.metrics.urls_done.inc();
                return Admission(AdmissionKind::Ready(Err(FetchError::unsent(
                    kind, message, fetch.url,
                ))));
            }
        };
        // The common case: a queue slot is free, so the fetch joins the queue right away.
        if let Ok(slot) = self.queue_slots.clone().try_acquire_owned() {
            return Admission(AdmissionKind::Queue(Enqueue {
                fetch,
                uri,
                host,
                slot: Some(slot),
                reply: None,
                arrived,
            }));
        }
        // Backpressure: the queue is full; wait for a slot, then enter through the mailbox.
        let url = fetch.url.clone();
        let shutdown = move || {
            Err(FetchError::shutdown(
                url.clone(),
                "crawler is shutting down",
            ))
        };
        let slots = self.queue_slots.clone();
        let me = ctx.address();
        let done = self.metrics.urls_done.clone();
        Admission(AdmissionKind::Wait(Box::pin(async move {
            let Ok(slot) = slots.acquire_owned().await else {
                done.inc();
                return shutdown();
            };
            let (tx, rx) = oneshot::channel();
            let msg = Enqueue {
                fetch,
                uri,
                host,
                slot: Some(slot),
                reply: Some(tx),
                arrived,
            };
            if me.send(msg).await.is_err() {
                return shutdown();
            }
            rx.await.unwrap_or_else(|_| shutdown())
        })))
    }
}

impl StreamHandler<AttemptDone> for SchedulerActor {
    fn handle(&mut self, m: AttemptDone, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_attempt_done(m, ctx)
    }
    /// The scheduler holds a sender, so the report stream never ends while it runs; the
    /// default would stop the actor.
    fn finished(&mut self, _ctx: &mut Self::Context) {}
}

impl StreamHandler<Intake> for SchedulerActor {
    fn handle(&mut self, m: Intake, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_intake(m, ctx)
    }
    /// `CrawlerHandle`s hold senders; when the last is gone, the `Addr` path remains.
    fn finished(&mut self, _ctx: &mut Self::Context) {}
}

impl Handler<Enqueue> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, m: Enqueue, ctx: &mut Self::Context) {
        self.state.borrow_mut().enqueue(m, ctx)
    }
}

impl Scheduler {
    fn enqueue(&mut self, m: Enqueue, ctx: &mut Context<SchedulerActor>) {
        let p = Pending {
            fetch: m.fetch,
            uri: Some(m.uri),
            host: m.host.clone(),
            reply: m.reply,
            done: self.metrics.urls_done.clone(),
            slot: m.slot,
            attempts: 0,
            throttled: 0,
            excluded: Vec::new(),
            arrived: m.arrived,
            no_exit_since: None,
            local_failure: None,
            waited: false,
            last_exit: None,
            span: None,
        };
        if self.shutting_down {
            p.fail(
                FetchErrorKind::Shutdown,
                "crawler is shutting down",
                &self.exits,
            );
            return;
        }
        let state = self.hosts.entry(m.host.clone()).or_default();
        state.queue.push_back(p);
        if !state.ordered {
            state.ordered = true;
            self.order.push_back(m.host);
        }
        self.set_queued(1);
        self.dispatch(ctx);
    }
}

impl Handler<SetInterval> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, m: SetInterval, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_set_interval(m, ctx)
    }
}

impl Handler<HealthChanged> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, m: HealthChanged, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_health_changed(m, ctx)
    }
}

impl Handler<AllExitsDown> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, _m: AllExitsDown, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_all_exits_down(_m, ctx)
    }
}

impl Handler<GetStats> for SchedulerActor {
    type Result = ResponseFuture<Vec<ExitStats>>;

    fn handle(&mut self, _m: GetStats, _ctx: &mut Self::Context) -> Self::Result {
        self.state.borrow_mut().on_get_stats(_m, _ctx)
    }
}

impl Handler<Shutdown> for SchedulerActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, m: Shutdown, ctx: &mut Self::Context) -> Self::Result {
        self.state.borrow_mut().on_shutdown(m, ctx)
    }
}

impl Scheduler {
    /// A `Fetch` from the mailbox. One that may be sent now takes the direct path, on a
    /// task of its own (`me` is this scheduler's cell): that saves the queue, the exit
    /// worker's hand-offs and the attempt report (README, "Cost of the actor system").
    /// Others are admitted to the queue, with backpressure, as before.
    fn on_fetch(
        &mut self,
        fetch: Fetch,
        me: Rc<RefCell<Scheduler>>,
        ctx: &mut Context<SchedulerActor>,
    ) -> Admission {
        let arrived = Instant::now();
        let parsed = match self.admit_direct(&fetch, arrived) {
            Direct::Go { exit, host, go } => {
                let held = Held::new(me, exit, host);
                return Admission(AdmissionKind::Direct(Box::new((held, go, fetch))));
            }
            Direct::Answered(kind, message) => {
                return Admission(AdmissionKind::Ready(Err(FetchError::unsent(
                    kind, message, fetch.url,
                ))))
            }
            Direct::Queue(parsed) => parsed,
        };
        self.metrics.urls_total.inc();
        self.admit(fetch, parsed, arrived, ctx)
    }

    fn on_attempt_done(&mut self, m: AttemptDone, ctx: &mut Context<SchedulerActor>) {
        // Missing after a shutdown's grace period cancelled it (already answered).
        let Some((i, p)) = self.sent.remove(&m.id) else {
            return;
        };
        if let Some((p, retry_after)) = self.settle_spanned(i, p, m.attempted) {
            self.retry_later(p, retry_after, ctx);
        }
        self.check_drained();
        self.dispatch(ctx);
    }

    fn on_intake(&mut self, mut m: Intake, ctx: &mut Context<SchedulerActor>) {
        self.metrics.urls_total.inc();
        let reply = m.reply.take();
        let fetch = std::mem::replace(&mut m.fetch, Fetch::get(String::new()));
        let parsed = match m.parsed.take() {
            // Parsed already, by the direct path that could not take it.
            Some(_) if self.shutting_down => {
                Err((FetchErrorKind::Shutdown, "crawler is shutting down".into()))
            }
            Some(parsed) => Ok(parsed),
            None => self.validate(&fetch),
        };
        match parsed {
            Ok((uri, host)) => {
                let slot = m.slot.take();
                self.enqueue(
                    Enqueue {
                        fetch,
                        uri,
                        host,
                        slot,
                        reply,
                        arrived: m.arrived,
                    },
                    ctx,
                );
            }
            Err((kind, message)) => {
                self.metrics.urls_done.inc();
                if let Some(tx) = reply {
                    let _ = tx.send(Err(FetchError::unsent(kind, message, fetch.url)));
                }
            }
        }
    }

    fn on_set_interval(&mut self, m: SetInterval, ctx: &mut Context<SchedulerActor>) {
        let now = Instant::now().into_std();
        let rate = RateLabels {
            exit: m.exit.as_deref().unwrap_or("*").to_owned(),
            host: m
                .host
                .as_deref()
                .map_or_else(|| "all".to_owned(), |h| self.metrics.host_label(h)),
        };
        self.metrics
            .limiter_rate
            .get_or_create(&rate)
            .set(1.0 / m.interval.as_secs_f64().max(1e-9));
        let key = LimitKey {
            exit: m.exit,
            host: m.host,
        };
        let adaptive = self.settings.limiter.algorithm == Algorithm::Aimd;
        if let Some(state) = self.keys.get(&key) {
            let state = &mut *state.borrow_mut();
            if state.limiter.is_none() && adaptive && key.exit.is_some() {
                // Scope `auto`: an exit's own lane is paced from its first rate on.
                let seed = self
                    .exits
                    .iter()
                    .position(|e| Some(&e.name) == key.exit.as_ref());
                state.limiter = Some(Box::new(Pacer::new(
                    m.interval,
                    self.settings.limiter.jitter,
                    seed.unwrap_or(0) as u64 ^ 0xa11ce,
                    now,
                )));
            }
            if let Some(l) = state.limiter.as_mut() {
                if adaptive {
                    let rps = 1.0 / m.interval.as_secs_f64().max(1e-9);
                    match state.fallback_from.as_mut() {
                        // Still on a local share: remember the new whole, pace the share.
                        Some(whole) => {
                            *whole = rps;
                            let share = crate::redis::fallback_rps(
                                rps,
                                self.settings.redis.processes,
                                self.settings.limiter.min_rps,
                            );
                            l.set_rate(share, now);
                        }
                        None => l.set_rate(rps, now),
                    }
                }
                if let Some(p) = m.pause_until {
                    // The pause reaches every request already queued for this key, and
                    // the saved-up burst is gone when it ends.
                    l.drain(p.max(now));
                }
            }
            if let Some(p) = m.pause_until {
                state.pause_until = Some(state.pause_until.map_or(p, |q| q.max(p)));
            }
        }
        self.dispatch(ctx);
    }

    fn on_health_changed(&mut self, m: HealthChanged, ctx: &mut Context<SchedulerActor>) {
        if let Some(e) = self.exits.get_mut(m.exit) {
            e.healthy = m.available;
        }
        let available = self.exits.iter().filter(|e| e.enabled && e.healthy).count();
        self.metrics
            .exits_available_ratio
            .set(available as f64 / self.exits.len().max(1) as f64);
        if m.available {
            // An exit that failed locally for a fetch may work now.
            for state in self.hosts.values_mut() {
                for p in state.queue.iter_mut() {
                    p.excluded.retain(|x| *x != m.exit);
                }
            }
        }
        self.dispatch(ctx);
    }

    fn on_all_exits_down(&mut self, _m: AllExitsDown, ctx: &mut Context<SchedulerActor>) {
        self.dispatch(ctx);
    }

    fn on_get_stats(
        &mut self,
        _m: GetStats,
        _ctx: &mut Context<SchedulerActor>,
    ) -> ResponseFuture<Vec<ExitStats>> {
        let views: Vec<_> = self
            .exits
            .iter()
            .map(|e| {
                let intervals: Vec<(String, Duration)> = self
                    .keys
                    .iter()
                    .filter(|(k, _)| k.exit.as_ref().is_none_or(|x| *x == e.name))
                    .filter_map(|(k, s)| {
                        let q = s.borrow().limiter.as_ref()?.quota();
                        let host = k.host.as_deref().unwrap_or("*").to_string();
                        Some((host, interval_of(q.rps)))
                    })
                    .collect();
                (
                    e.addr.clone(),
                    e.name.to_string(),
                    e.source_ip,
                    e.enabled,
                    e.healthy,
                    e.max_concurrent,
                    intervals,
                )
            })
            .collect();
        Box::pin(async move {
            let mut out = Vec::with_capacity(views.len());
            for (addr, name, source_ip, enabled, healthy, max, mut intervals) in views {
                let c = addr.send(GetCounters).await.unwrap_or_default();
                intervals.sort();
                out.push(ExitStats {
                    name,
                    source_ip,
                    enabled,
                    healthy,
                    active: c.active,
                    max,
                    total: c.total,
                    ok: c.ok,
                    throttled: c.throttled,
                    errors: c.errors,
                    error_rate: if c.total == 0 {
                        0.0
                    } else {
                        c.errors as f64 / c.total as f64
                    },
                    consecutive_failures: c.consecutive_failures,
                    latency_ewma: c.latency_ewma,
                    last_error: c.last_error,
                    intervals,
                });
            }
            out
        })
    }

    fn on_shutdown(
        &mut self,
        m: Shutdown,
        ctx: &mut Context<SchedulerActor>,
    ) -> ResponseFuture<()> {
        self.shutting_down = true;
        self.queue_slots.close();
        // Queued fetches end now; the hosts' in-flight counts stay until those end.
        let mut queued: Vec<Pending> = Vec::new();
        for state in self.hosts.values_mut() {
            queued.extend(state.queue.drain(..));
            state.ordered = false;
        }
        self.hosts.retain(|_, state| !state.idle());
        queued.extend(self.delayed.drain().map(|(_, p)| p));
        self.order.clear();
        self.queued = 0;
        self.metrics.queue_depth.set(0);
        for p in queued {
            p.fail(
                FetchErrorKind::Shutdown,
                "crawler shut down before this fetch was sent",
                &self.exits,
            );
        }
        let (tx, rx) = oneshot::channel();
        self.drained.push(tx);
        self.check_drained();
        // After the grace period, cancel what is still in flight: dropping a pending
        // fetch replies `Shutdown` to its sender.
        ctx.run_later(m.grace, |act, ctx| {
            let mut act = act.state.borrow_mut();
            act.cut.fire();
            for (_, h) in act.in_flight_handles.drain() {
                ctx.cancel_future(h);
            }
            // Their reports, if they still come, find nothing and are ignored.
            act.sent.clear();
            act.in_flight = 0;
            for e in act.exits.iter_mut() {
                e.active = 0;
            }
            act.hosts.clear();
            act.check_drained();
        });
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

// ---------------------------------------------------------------------------------------
// The direct path
// ---------------------------------------------------------------------------------------

/// What a direct attempt hands back to the actor: what needs its timers.
enum Handoff {
    /// Retry after a backoff (at least the `Retry-After`, if any).
    Retry(Box<Pending>, Option<Duration>),
    /// Capacity was freed, or a fetch requeued, while fetches wait: run the dispatch.
    Dispatch,
}

impl StreamHandler<Handoff> for SchedulerActor {
    fn handle(&mut self, h: Handoff, ctx: &mut Self::Context) {
        let mut st = self.state.borrow_mut();
        match h {
            Handoff::Retry(p, _) if st.shutting_down => {
                p.fail(
                    FetchErrorKind::Shutdown,
                    "crawler shut down before this fetch was retried",
                    &st.exits,
                );
                st.check_drained();
            }
            Handoff::Retry(p, retry_after) => st.retry_later(*p, retry_after, ctx),
            Handoff::Dispatch => {}
        }
        st.dispatch(ctx);
    }

    /// The scheduler holds the sender: the stream ends only with it.
    fn finished(&mut self, _ctx: &mut Self::Context) {}
}

/// How `Scheduler::admit_direct` took a fetch.
// The large variant is the common one, and the value lives on the stack for a moment:
// boxing it would add an allocation per fetch.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Direct {
    /// Send it now on the caller's task ([`run_direct`]) through exit `exit`, to `host`.
    Go {
        exit: usize,
        host: Arc<str>,
        go: DirectAttempt,
    },
    /// To be answered without an attempt (an invalid URL), with this error.
    Answered(FetchErrorKind, String),
    /// Not for the direct path now: hand it in the ordinary way, through the queue, with
    /// its URL as parsed when it got that far (so it is not parsed twice).
    Queue(Option<Parsed>),
}

/// A fetch admitted on the direct path: what its attempt needs besides the fetch itself
/// (which stays with the caller: moving it in and out is a copy each way). Not a
/// [`Pending`]: most direct fetches end with their first answer and never need one.
pub(crate) struct DirectAttempt {
    core: Rc<ExitCore>,
    arrived: Instant,
    uri: Uri,
    cut: Rc<CutOff>,
}

thread_local! {
    /// Schedulers on this thread whose exits are all local, by crawler id: where
    /// `CrawlerHandle::fetch` takes the direct path.
    static LOCAL: RefCell<Vec<(u64, std::rc::Weak<RefCell<Scheduler>>)>> =
        const { RefCell::new(Vec::new()) };
}

/// Make the scheduler reachable from `CrawlerHandle::fetch` calls on this thread.
pub(crate) fn register_local(id: u64, state: std::rc::Weak<RefCell<Scheduler>>) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        l.retain(|(_, w)| w.strong_count() > 0);
        l.push((id, state));
    });
}

/// The scheduler of crawler `id`, if it runs on this thread.
pub(crate) fn local(id: u64) -> Option<Rc<RefCell<Scheduler>>> {
    LOCAL.with(|l| {
        l.borrow()
            .iter()
            .find(|(k, _)| *k == id)
            .and_then(|(_, w)| w.upgrade())
    })
}

/// `CrawlerHandle::fetch`'s way in: the direct path when it can be taken, else the queue
/// through the intake channel, after taking a queue slot.
#[derive(Clone)]
pub(crate) struct Ingress {
    /// Finds the scheduler for the direct path when `fetch` runs on its Arbiter.
    pub(crate) id: u64,
    /// The way into the queue (see [`Intake`]).
    pub(crate) intake: tokio::sync::mpsc::UnboundedSender<Intake>,
    /// The scheduler's queue slots: a queued fetch waits for one (backpressure).
    pub(crate) queue_slots: Arc<Semaphore>,
    pub(crate) metrics: Arc<Metrics>,
}

/// A direct fetch's hold on the scheduler's capacity (its exit's slot, its host's count,
/// the crawler's concurrency), from admission until it is settled. Dropped before that —
/// its caller gave up on the fetch (a timeout around `CrawlerHandle::fetch`), or the
/// shutdown cut it off — it gives the capacity back and counts the fetch done: without
/// it, each abandoned fetch kept a slot for good.
pub(crate) struct Held {
    state: Rc<RefCell<Scheduler>>,
    exit: usize,
    host: Arc<str>,
    /// Not settled yet: dropping the hold gives the capacity back.
    armed: bool,
}

impl Held {
    fn new(state: Rc<RefCell<Scheduler>>, exit: usize, host: Arc<str>) -> Self {
        Self {
            state,
            exit,
            host,
            armed: true,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let host = &self.host;
        // A fetch future is dropped by its owner, never inside the scheduler's own code,
        // so the cell is free; if it were not, the capacity would stay taken (no panic
        // in a destructor).
        if let Ok(mut s) = self.state.try_borrow_mut() {
            s.abandon_direct(self.exit, host);
        }
    }
}

/// Where [`run_direct`] starts.
enum Entry<'a> {
    /// Admitted on the direct path already (a `Fetch` from the mailbox).
    Admitted(Held, DirectAttempt),
    /// Not admitted yet (`CrawlerHandle::fetch`): admit it, and queue it if it may not go
    /// now.
    Fresh(&'a Ingress),
}

/// Run a fetch on the direct path ([`Scheduler::admit_direct`]) on this task: the HTTP
/// exchange on the exit's core, raced against the shutdown cut-off, then the outcome
/// settled in place ([`Scheduler::finish_direct`]). A fresh fetch that may not go now
/// queues instead.
///
/// Why both entries share one `async fn`: the direct path's future is then not awaited
/// inside another, and each level of nested request future costs moves and a dispatch
/// per poll (a future returned by value is also copied whole).
async fn run_direct(entry: Entry<'_>, fetch: Fetch) -> Reply {
    // When it is sent: as it arrived for a fresh fetch (admission does not wait, and a
    // clock read is saved); now for one admitted in the mailbox, whose task may have
    // waited its turn (latency feeds the limiter).
    let (mut held, go, sent_at) = match entry {
        Entry::Admitted(held, go) => (held, go, Instant::now()),
        Entry::Fresh(ingress) => {
            let Some(state) = local(ingress.id) else {
                return ingress.queue(fetch, None).await;
            };
            let admitted = state.borrow_mut().admit_direct(&fetch, Instant::now());
            match admitted {
                Direct::Go { exit, host, go } => {
                    let sent_at = go.arrived;
                    (Held::new(state, exit, host), go, sent_at)
                }
                Direct::Answered(kind, message) => {
                    return Err(FetchError::unsent(kind, message, fetch.url))
                }
                Direct::Queue(parsed) => return ingress.queue(fetch, parsed).await,
            }
        }
    };
    let DirectAttempt {
        core,
        arrived,
        uri,
        cut,
    } = go;
    let running = core.start();
    let mut hop =
        Hop::new(uri, fetch.method.clone(), fetch.body.clone()).led_from_public(fetch.from_public);
    let attempted = {
        // Pinned where it is built: each move of a request future is a copy.
        let exchange = std::pin::pin!(core.exchange(&mut hop, &fetch.headers, sent_at));
        cut.race(exchange).await
    };
    let Some(attempted) = attempted else {
        // The shutdown's grace period is over (the scheduler has let go of the fetch).
        // The exit's counters and the scheduler's capacity are let go of as for any
        // fetch that ends unsettled, and it counts as done.
        drop(running);
        drop(held);
        return Err(FetchError {
            kind: FetchErrorKind::Shutdown,
            message: "crawler shut down before this fetch finished".into(),
            url: fetch.url,
            exit: None,
            attempts: 1,
            throttled: 0,
        });
    };
    running.end(&attempted);
    // Settling releases the capacity: the hold lets go of it.
    held.armed = false;
    let outcome = held
        .state
        .borrow_mut()
        .finish_direct(held.exit, fetch, &held.host, arrived, attempted);
    match outcome {
        Ok(reply) => reply,
        Err(later) => later.await.unwrap_or_else(|_| {
            Err(FetchError::shutdown(
                String::new(),
                "scheduler dropped the fetch without a reply",
            ))
        }),
    }
}

impl Ingress {
    /// Fetch one URL.
    ///
    /// On the scheduler's own Arbiter, with every exit there too, a fetch that may go now
    /// takes the direct path: admission, selection and pacing as for any fetch, then the
    /// HTTP exchange right here on the caller's task instead of on an exit worker, and
    /// the outcome settled in place. What the direct path cannot finish alone (a retry
    /// after backoff, waking queued fetches) goes to the actor. Anything else queues.
    ///
    /// Why: with every exit on the scheduler's Arbiter, the caller's task can run the
    /// request itself. That saves the hand-offs of the queued path (to the scheduler, to
    /// an exit worker, back to the scheduler, back to the caller), about a fifth of the
    /// cost of a fetch against a fast local site (README, "Cost of the actor system").
    pub(crate) fn fetch(&self, fetch: Fetch) -> impl std::future::Future<Output = Reply> + '_ {
        run_direct(Entry::Fresh(self), fetch)
    }

    /// Hand `fetch` in through the intake channel, after taking a queue slot
    /// (backpressure), and wait for its reply.
    async fn queue(&self, fetch: Fetch, parsed: Option<Parsed>) -> Reply {
        let arrived = Instant::now();
        let slot = match Arc::clone(&self.queue_slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => match Arc::clone(&self.queue_slots).acquire_owned().await {
                Ok(slot) => slot,
                // Closed: the crawler is shutting down.
                Err(_) => {
                    self.metrics.urls_total.inc();
                    self.metrics.urls_done.inc();
                    return Err(FetchError::shutdown(fetch.url, "crawler is shutting down"));
                }
            },
        };
        let (tx, rx) = oneshot::channel();
        let intake = Intake {
            fetch,
            parsed,
            slot: Some(slot),
            reply: Some(tx),
            arrived,
        };
        // A failed send drops the item, and the item's drop replies `Shutdown`.
        let _ = self.intake.send(intake);
        rx.await.unwrap_or_else(|_| {
            // Unreachable: every pending fetch and intake item replies before it is dropped.
            Err(FetchError::shutdown(
                String::new(),
                "scheduler dropped the fetch without a reply",
            ))
        })
    }
}

impl Scheduler {
    /// Admit a fetch on the direct path when it may be sent now without overtaking
    /// anything: every exit local, not distributed, not shutting down, concurrency left,
    /// nothing queued for its host, and an exit the selection allows now.
    pub(crate) fn admit_direct(&mut self, fetch: &Fetch, arrived: Instant) -> Direct {
        if !self.all_local
            || self.shared.is_some()
            || self.shutting_down
            || self.in_flight >= self.settings.crawler.concurrency
        {
            return Direct::Queue(None);
        }
        let (uri, host) = match self.validate(fetch) {
            Ok(parsed) => parsed,
            Err((kind, message)) => {
                self.metrics.urls_total.inc();
                self.metrics.urls_done.inc();
                return Direct::Answered(kind, message);
            }
        };
        let now_std = arrived.into_std();
        let (choice, hosts) = self.split();
        // A lookup before the entry: a host already there (the common case) costs no
        // reference-count round trip on its name.
        let state = match hosts.get_mut(&*host) {
            Some(state) => state,
            None => hosts.entry(Arc::clone(&host)).or_default(),
        };
        if !state.queue.is_empty() {
            return Direct::Queue(Some((uri, host)));
        }
        let req = select::Request {
            preferred: fetch.preferred_exit.as_deref(),
            region: fetch.region.as_deref(),
            exclude: &[],
            family: select::Family::of_host(&host),
        };
        let selection = choose(
            choice,
            (&mut state.active, &mut state.pacing),
            &host,
            &req,
            now_std,
        );
        let Selection::Exit(i) = selection else {
            if state.idle() {
                self.hosts.remove(&host);
            }
            return Direct::Queue(Some((uri, host)));
        };
        state.active[i] += 1;
        let Some(core) = self.exits[i].local.clone() else {
            // Unreachable: `all_local`. The permits taken are spent; the count is undone.
            self.release_host(i, &host);
            return Direct::Queue(Some((uri, host)));
        };
        self.metrics.urls_total.inc();
        self.reserve(i);
        self.budget.deposit(now_std);
        Direct::Go {
            exit: i,
            host,
            go: DirectAttempt {
                core,
                arrived,
                uri,
                cut: Rc::clone(&self.cut),
            },
        }
    }

    /// Settle a direct attempt. A plain answer is answered here and now; anything else
    /// becomes a pending fetch like any other (it may be retried, or moved to another
    /// exit), with a channel for its reply, whose receiver is returned. What needs the
    /// actor's timers goes to it.
    fn finish_direct(
        &mut self,
        i: usize,
        fetch: Fetch,
        host: &Arc<str>,
        arrived: Instant,
        attempted: Attempted,
    ) -> Result<Reply, oneshot::Receiver<Reply>> {
        let outcome = match attempted.result {
            Ok(answer) if self.is_plain(answer.status) => {
                self.release(i, host);
                let exit_name = Arc::clone(&self.exits[i].name);
                self.note_answer(
                    i,
                    &exit_name,
                    host,
                    false,
                    (attempted.sent_at, attempted.latency),
                    &answer,
                );
                self.metrics.urls_done.inc();
                Ok(Ok(FetchResponse {
                    url: fetch.url,
                    final_url: answer.final_url,
                    status: answer.status,
                    headers: answer.headers,
                    body: answer.body,
                    wire_bytes: answer.wire_bytes,
                    content_encoding: answer.content_encoding,
                    peer_private: answer.peer_private,
                    exit: exit_name,
                    attempts: 1,
                    throttled: 0,
                    // The attempt's end, without another clock read (a fetch sent as it
                    // arrived, the common case, needs no arithmetic).
                    elapsed: if attempted.sent_at == arrived.into_std() {
                        attempted.latency
                    } else {
                        (attempted.sent_at + attempted.latency)
                            .saturating_duration_since(arrived.into_std())
                    },
                    retry_refused: false,
                }))
            }
            result => {
                let (tx, rx) = oneshot::channel();
                let p = Pending {
                    fetch,
                    uri: None,
                    host: Arc::clone(host),
                    reply: Some(tx),
                    done: self.metrics.urls_done.clone(),
                    slot: None,
                    attempts: 1,
                    throttled: 0,
                    excluded: Vec::new(),
                    arrived,
                    no_exit_since: None,
                    local_failure: None,
                    waited: false,
                    last_exit: Some(i),
                    span: None,
                };
                let attempted = Attempted {
                    result,
                    ..attempted
                };
                if let Some((p, retry_after)) = self.settle_spanned(i, p, Some(attempted)) {
                    self.hand_off(Handoff::Retry(Box::new(p), retry_after));
                }
                Err(rx)
            }
        };
        if !self.order.is_empty() {
            self.hand_off(Handoff::Dispatch);
        }
        self.check_drained();
        outcome
    }

    /// A direct fetch that ended unsettled (see [`Held`]): its capacity back, counted done,
    /// and queued fetches woken if they may now go.
    fn abandon_direct(&mut self, i: usize, host: &Arc<str>) {
        self.release(i, host);
        self.metrics.urls_done.inc();
        if !self.order.is_empty() {
            self.hand_off(Handoff::Dispatch);
        }
        self.check_drained();
    }

    fn hand_off(&self, h: Handoff) {
        if let Some(tx) = &self.handoff {
            // Fails only when the actor is gone; a pending fetch dropped with it answers.
            let _ = tx.send(h);
        }
    }
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

    #[test]
    fn a_port_outside_1_to_65535_is_refused_never_replaced() {
        let hosts = HashMap::default();
        for url in [
            "http://127.0.0.1:70000/page/1",
            "http://127.0.0.1:0/",
            "http://[::1]:65536/",
            "http://user:pw@example.com:99999/",
        ] {
            let err = parse_url(url, &hosts).expect_err(url);
            assert!(
                err.contains("is not a port (expected 1..=65535)"),
                "{url}: {err}"
            );
        }
        for url in [
            "http://127.0.0.1:65535/",
            "http://127.0.0.1:1/",
            "http://example.com:/",
            "http://[::1]/",
            "http://user:pw@[::1]:8080/",
        ] {
            assert!(parse_url(url, &hosts).is_ok(), "{url}");
        }
    }
}
