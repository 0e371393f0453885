//! `SchedulerActor`: takes `Fetch`es, picks an exit for each, paces, retries, replies.
//!
//! Why the limiter keys' pacers live here and not in each exit: "which exit may send to
//! this host *now*" is the selection itself, and a key (a host, or a host through one
//! exit) spans exits. Keeping every key's pacer next to the selection makes the choice
//! exact without a round trip to the exits. What is the exit's alone, its active count
//! and its own token bucket, the exit owns ([`ExitShare`]); the scheduler reads it in
//! place.
//!
//! The state is a `Scheduler` behind a shared cell; [`SchedulerActor`] is its mailbox.
//! A fetch has one way in, [`Ingress::fetch`], which `CrawlerHandle::fetch` calls on the
//! caller's task and a `Fetch` message calls on a task of its own: when the caller runs on
//! the scheduler's Arbiter and every exit does too, a fetch that may be sent now, with
//! nothing queued for its host, takes the direct path: it is admitted, sent and settled on
//! that task, with the same selection, pacing, counting and reply as any other. Any other
//! fetch takes a queue slot (backpressure) and joins the queue through the intake channel
//! the actor reads. Why the direct path: each hand-off between tasks and mailboxes costs
//! about as much as the scheduling itself; against a fast site it is what keeps the actor
//! system close to a bare client (docs/embedding.md, "Cost of the actor system").
//!
//! How `fetch` finds the state without a mailbox: the scheduler registers its cell in a
//! per-thread registry keyed by crawler id (`direct::register_local`), and the handle's
//! [`Ingress`] looks it up there (`direct::local`). The state holds `Rc`s (awc clients,
//! exit cores) and cannot leave its thread, while a handle is `Send` and may be called
//! from any thread; the lookup is what tells the two cases apart, and a caller on another
//! thread finds nothing and queues.
//!
//! # Layout
//! - `mod.rs`: the state ([`Scheduler`]), the exits as the scheduler sees them
//!   ([`ExitSlot`]) and the mailbox ([`SchedulerActor`]);
//! - `exits.rs`: the exits started from the settings, as slots;
//! - `queues.rs`: [`Queues`], a part that owns its state: the hosts' queues, the
//!   round-robin over the hosts with queued fetches, the hosts' in-flight counts and the
//!   queue's slots (backpressure), behind a small API (push, next host, pop, release);
//! - `admission.rs`: a URL checked and parsed; a `Fetch` message handed to the one way
//!   in; a fetch with its queue slot put in its host's queue;
//! - `pacing/`: [`Pacing`], a part that owns its state: every limiter key's pacer, the
//!   host prior new hosts start from, and the exit choice over the core's `select`
//!   ([`Pacing::choose`]); what changes a key comes in through its small API (the
//!   limiter's interval, a Retry-After, the shared budget's verdict). Its own tests;
//! - `dispatch.rs`: the dispatch over the queues' round-robin, the sends, and the Redis
//!   check of distributed mode;
//! - `alarm.rs`: the dispatch's wake on a timer finer than the runtime's millisecond;
//! - `settle.rs`: an ended attempt delivered, retried, or moved to another exit, and what
//!   the limiter and the health actor hear of it;
//! - `handlers.rs`: the actor's messages and streams (interval changes, health, stats,
//!   shutdown);
//! - `direct.rs`: the way in ([`Ingress`]) and the direct path;
//! - `in_flight.rs`: [`InFlight`], a part that owns its state: the attempts sent (by
//!   report id), the fetches waiting for a retry timer, the count of attempts that
//!   `crawler.concurrency` caps, each host's retry budget and the backoff;
//! - `pending.rs`: a fetch in the scheduler's hands, which always replies once;
//! - `turns.rs`: direct fetches handed in together take their turns in order.
//!
//! # How a fetch travels
//! A queued fetch: `direct.rs` (`Ingress::fetch`, no direct path, a queue slot, the
//! intake channel) → `handlers.rs` (the intake stream) → `admission.rs` (validated,
//! `enqueue`) → [`Queues::push`] → `dispatch.rs` (`dispatch`, `try_host`: the next host,
//! [`Pacing::choose`], [`Queues::pop`], `send`, `launch`) → the exit → `handlers.rs`
//! (the report stream) → `settle.rs` (the verdict: reply, retry later, or move) →
//! `pending.rs` (the reply) → back to the dispatch for what waits.
//!
//! A direct fetch: `direct.rs` (`run_direct`: its turn, `admit_direct` with [`Pacing::choose`],
//! the exchange on the exit's core, `finish_direct`) → `settle.rs` only when the answer
//! is not plain.
//!
//! Where this goes: each part owning its state and visited once, top to bottom: ingress
//! (one way in) → queues → pacing (limiter keys, exit shares, the choice) → exit →
//! in-flight (sent, delayed, retry budgets, backoff) → one settle carrying out the core's
//! verdict → reply. The queues, the pacing and the in-flight fetches are cut out this way
//! so far; `settle.rs` carries out the core's verdict in one place (`wait_for` for what
//! waits, then the reply or the end).
//!
//! Guarantees:
//! - exactly one reply per `Fetch`: each pending fetch owns its reply channel (or, on the
//!   direct path, the slot its caller reads right after), and a pending fetch that is
//!   dropped (shutdown, cancelled attempt) replies `Shutdown`;
//! - no polling: when nothing may be sent, one timer is set for the earliest moment
//!   something may, and completions and interval changes re-run the dispatch;
//! - backpressure: at most `queue_capacity` fetches wait in the queue; further `Fetch`es
//!   wait for a slot before they are queued, so `Addr::send(..).await` waits; a queued
//!   fetch whose caller gives up leaves the queue with its slot at once
//!   ([`direct::Withdrawn`]);
//! - a fetch whose exit cannot even connect (the source address is gone, nothing was
//!   sent) moves to another exit without counting an attempt or telling the limiter, and
//!   may go through that exit again once it is back from an ejection, wherever the fetch
//!   is then;
//! - a shutdown cuts off what is still in flight when its grace period ends, direct
//!   attempts included.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use awc::http::Uri;
use exitcrawl::aimd::prior::HostPrior;
use exitcrawl::config::Settings;
use exitcrawl::outcome::{Bounds, Refusing};
use exitcrawl::retry::{Backoff, SiteBudgets};
use foldhash::HashMap;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::controller::LimiterActor;
use crate::cutoff::CutOff;
use crate::exit::{ExitActor, ExitCore, ExitShare};
use crate::health::HealthActor;
use crate::messages::{Fetch, FetchError, FetchResponse, ReportTo};
use crate::metrics::{ExitHandles, Metrics};
use crate::robots::RobotsGate;

mod admission;
mod alarm;
mod direct;
mod dispatch;
mod exits;
mod handlers;
mod in_flight;
mod pacing;
mod pending;
mod queues;
mod settle;
mod turns;

pub use admission::MAX_URL_BYTES;
use direct::Handoff;
pub(crate) use direct::{register_local, Ingress, Withdrawn};
pub(crate) use exits::start_exits;
use in_flight::InFlight;
use pacing::Pacing;
use pending::Pending;
use queues::Queues;

type Reply = Result<FetchResponse, FetchError>;

/// One exit as the scheduler sees it.
pub(crate) struct ExitSlot {
    pub name: Arc<str>,
    pub source_ip: std::net::IpAddr,
    /// The address family the exit reaches; `None` for both (a proxy exit, whose proxy
    /// connects to the site, or one on the default route).
    pub family: Option<exitcrawl::select::Family>,
    pub region: Option<String>,
    pub enabled: bool,
    pub healthy: bool,
    /// Why the health actor last took the exit out of service. Shown in the stats when
    /// no attempt through the exit failed: an exit ejected at start (its address would
    /// not bind) is never sent a fetch, but its stats still say why.
    pub health_error: Option<String>,
    pub addr: Addr<ExitActor>,
    /// The exit's core when it shares this Arbiter: requests start on it directly.
    pub local: Option<Rc<ExitCore>>,
    pub max_concurrent: u32,
    /// The exit's active count and token bucket, which it owns.
    pub share: ExitShare,
    /// The health actor must hear this exit's next answer: a failure was reported and no
    /// answer since (the answer resets the count), or the exit's health changed (a real
    /// answer recovers a probing exit).
    pub report_next: bool,
    /// When an answer through this exit was last reported to the health actor.
    pub answer_reported: Option<std::time::Instant>,
    /// How many times the exit came back into service after an ejection: a fetch it
    /// failed locally excludes it until its next return (see [`pending::Excluded`]).
    pub returns: u64,
}

/// Distributed mode: the shared GCRA every request must pass.
#[derive(Clone)]
pub(crate) struct SharedLimits {
    pub gcra: crate::redis::RedisGcra,
}

/// A fetch that got its queue slot, checked, on its way into its host's queue.
struct Enqueue {
    fetch: Fetch,
    uri: Uri,
    host: Arc<str>,
    slot: Option<OwnedSemaphorePermit>,
    reply: Option<oneshot::Sender<Reply>>,
    arrived: Instant,
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
    /// Every limiter key's pacing, the host prior and the exit choice over them.
    pacing: Pacing,
    /// The hosts' queues, their round-robin and the queue's slots.
    queues: Queues,
    /// Redis checks in flight (distributed mode), cancelled at the end of a shutdown.
    in_flight_handles: HashMap<u64, SpawnHandle>,
    /// Where exits report attempts: a channel this actor reads as a stream.
    reports: Option<ReportTo>,
    /// Attempts sent (by report id, see
    /// [`AttemptReport`](crate::messages::AttemptReport)), fetches waiting for a retry,
    /// the count `crawler.concurrency` caps, the hosts' retry budgets and the backoff.
    in_flight: InFlight<Pending>,
    limiter: Option<Addr<LimiterActor>>,
    health: Option<Addr<HealthActor>>,
    /// `max_retries`, `give_up_after`, `max_retry_after`: what a URL's attempts live within.
    bounds: Bounds,
    /// Hosts answering nothing but throttles, and since when.
    refusing: Refusing<Arc<str>>,
    /// The same through one exit, for fetches pinned to it (`preferred_exit`), whose
    /// host may answer the others meanwhile.
    refusing_pinned: Refusing<(Arc<str>, usize)>,
    /// Hosts already warned about a pause over `max_retry_after`.
    warned_pause: foldhash::HashSet<Arc<str>>,
    /// The dispatch's one timer: the runtime's, and the instant it is set for.
    wake: Option<(SpawnHandle, std::time::Instant)>,
    /// A finer timer for the earliest wait of a host paced fast enough to need it (see
    /// `alarm.rs`); made in `attach`.
    alarm: Option<alarm::Alarm>,
    /// Since when no exit in service has taken the fetches waiting for one (each was
    /// ejected, or came back only probing and nothing it was sent reached a site; see
    /// `Scheduler::reached_site_through`), by the region the waiting fetches ask for and
    /// the family of their host's address (`None`: any exit; a host name): one clock for
    /// all of them, so that once the bound is past every waiting fetch ends at once, not
    /// one per bound. A region's and a family's own, so that the exits of one being down
    /// since long ago does not end at once the fetches of another whose exits have just
    /// gone down.
    all_down_since: foldhash::HashMap<dispatch::AllDownKey, Instant>,
    shutting_down: bool,
    drained: Vec<oneshot::Sender<()>>,
    metrics: Arc<Metrics>,
    handles: Vec<ExitHandles>,
    shared: Option<SharedLimits>,
    /// Every exit runs on this Arbiter: `CrawlerHandle::fetch` may take the direct path.
    all_local: bool,
    /// The direct path's way back to the actor, for what needs its timers.
    handoff: Option<tokio::sync::mpsc::UnboundedSender<Handoff>>,
    /// Fired when a shutdown's grace period ends: direct attempts still running stop.
    cut: Rc<CutOff>,
    /// Direct fetches waiting for their turn, in the order they came (see `turns.rs`).
    turns: turns::Turns,
    /// A look for queued fetches given up on is on its way (see [`direct::Withdrawn`]).
    withdrawing: bool,
}

impl Scheduler {
    pub(crate) fn new(
        settings: Arc<Settings>,
        exits: Vec<ExitSlot>,
        metrics: Arc<Metrics>,
        prior: Arc<Mutex<HostPrior>>,
    ) -> Self {
        let handles = exits
            .iter()
            .map(|e| metrics.exit_handles(&Metrics::exit(&e.name, e.source_ip)))
            .collect();
        let c = &settings.crawler;
        let queues = Queues::new(c.queue_capacity as usize, metrics.queue_depth.clone());
        let budgets = SiteBudgets::with_hasher(c.retry_budget, Default::default());
        let backoff = Backoff {
            base: c.retry_backoff_base(),
            max: c.retry_backoff_max(),
        };
        let bounds = Bounds {
            max_retries: c.max_retries,
            give_up_after: c.give_up_after(),
            max_retry_after: c.max_retry_after(),
        };
        Self {
            exits,
            pacing: Pacing::new(Arc::clone(&settings), prior),
            queues,
            in_flight_handles: HashMap::default(),
            reports: None,
            in_flight: InFlight::new(budgets, backoff),
            limiter: None,
            health: None,
            bounds,
            refusing: Refusing::default(),
            refusing_pinned: Refusing::default(),
            warned_pause: foldhash::HashSet::default(),
            wake: None,
            alarm: None,
            all_down_since: foldhash::HashMap::default(),
            shutting_down: false,
            drained: Vec::new(),
            metrics,
            handles,
            shared: None,
            all_local: false,
            handoff: None,
            cut: Rc::new(CutOff::default()),
            turns: turns::Turns::default(),
            withdrawing: false,
            settings,
        }
    }

    /// Open the direct path's way back (needs the actor's context: call it in
    /// `SchedulerActor::create`).
    pub(crate) fn attach(&mut self, ctx: &mut Context<SchedulerActor>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        ctx.add_stream(Channel(rx));
        self.handoff = Some(tx);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        ctx.add_stream(Channel(rx));
        self.alarm = Some(alarm::Alarm::new(tx));
        self.all_local = self.exits.iter().all(|e| e.local.is_some());
    }

    pub(crate) fn share_limits(&mut self, shared: SharedLimits) {
        self.shared = Some(shared);
    }

    pub(crate) fn connect(&mut self, limiter: Addr<LimiterActor>, health: Addr<HealthActor>) {
        self.limiter = Some(limiter);
        self.health = Some(health);
    }
}

/// Routes fetches to exits: the mailbox of a `Scheduler`. The state sits behind a
/// shared cell so that `CrawlerHandle::fetch` on this Arbiter can take a fetch straight
/// through it (see `Ingress::fetch`); everything else comes in as messages.
pub struct SchedulerActor {
    state: Rc<RefCell<Scheduler>>,
    /// The one way in for a fetch, which a `Fetch` message takes too.
    ingress: Rc<Ingress>,
    /// `[crawl] robots`: a `Fetch` message asks robots.txt first, as a polite
    /// `CrawlerHandle::fetch` does, through the crawler's one cache.
    robots: Option<Arc<RobotsGate>>,
}

impl SchedulerActor {
    pub(crate) fn new(state: Scheduler, ingress: Ingress, robots: Option<Arc<RobotsGate>>) -> Self {
        Self {
            state: Rc::new(RefCell::new(state)),
            ingress: Rc::new(ingress),
            robots,
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
