use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use awc::http::Uri;
use exitcrawl::select::{self, Selection};
use tokio::sync::{oneshot, Semaphore};

use crate::cutoff::CutOff;
use crate::exit::{ExitCore, Hop};
use crate::messages::Delivery;
use crate::messages::{Attempted, Fetch, FetchError, FetchErrorKind, Intake, Parsed};
use crate::metrics::{Metrics, Outcome};

use super::pending::Pending;
use super::{Reply, Scheduler, SchedulerActor};

// ---------------------------------------------------------------------------------------
// The direct path
// ---------------------------------------------------------------------------------------

/// What a direct attempt hands back to the actor: what needs its timers.
pub(super) enum Handoff {
    /// Back to its host's queue after this long (a retry's backoff, a throttle's wait,
    /// or a retry the budget deferred).
    Retry(Box<Pending>, Duration),
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
            Handoff::Retry(p, delay) => st.retry_later(*p, delay, ctx),
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
    /// Where a queued fetch's caller says it gave up (see [`Withdrawn`]).
    pub(crate) withdrawn: tokio::sync::mpsc::UnboundedSender<Withdrawn>,
    /// The scheduler's queue slots: a queued fetch waits for one (backpressure).
    pub(crate) queue_slots: Arc<Semaphore>,
    pub(crate) metrics: Arc<Metrics>,
}

/// The way in → scheduler: a queued fetch's caller stopped waiting for its reply. The
/// scheduler then drops the queued fetches nobody waits for, so that their queue slots go
/// to fetches waiting for one. Without it a slot came back only when the dispatch reached
/// the fetch at its host's queue head: behind a long pause (a `Retry-After`), fetches
/// given up on held their slots, and once they held them all, every other host, that long.
pub(crate) struct Withdrawn;

/// Armed while a queued fetch's caller waits for the reply; dropped before it (the
/// caller's future dropped: a timeout, a cancelled task), it sends [`Withdrawn`].
struct Waiting<'a>(Option<&'a tokio::sync::mpsc::UnboundedSender<Withdrawn>>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(tx) = self.0 {
            // The scheduler gone, nothing is queued any more.
            let _ = tx.send(Withdrawn);
        }
    }
}

impl StreamHandler<Withdrawn> for SchedulerActor {
    fn handle(&mut self, _: Withdrawn, ctx: &mut Self::Context) {
        let mut st = self.state.borrow_mut();
        if st.withdrawing {
            return;
        }
        // Callers often give up together (one timeout around many fetches): one look
        // over the queues, once this turn's notices are in, serves them all.
        st.withdrawing = true;
        ctx.run_later(Duration::ZERO, |act, ctx| {
            let mut st = act.state.borrow_mut();
            st.withdrawing = false;
            if st.queues.withdraw_abandoned() > 0 {
                st.check_drained();
                st.dispatch(ctx);
            }
        });
    }

    /// The way in holds the sender: the stream ends only with the crawler.
    fn finished(&mut self, _ctx: &mut Self::Context) {}
}

/// A direct fetch's hold on the scheduler's capacity (its exit's slot, its host's count,
/// the crawler's concurrency), from admission until it is settled. Dropped before that —
/// its caller gave up on the fetch (a timeout around `CrawlerHandle::fetch`), or the
/// shutdown cut it off — it gives the capacity back and counts the fetch done, and its
/// attempt on its exit as a request without an answer: without it, each abandoned fetch
/// kept a slot for good.
pub(crate) struct Held {
    state: Rc<RefCell<Scheduler>>,
    exit: usize,
    host: Arc<str>,
    /// Not settled yet: dropping the hold gives the capacity back.
    armed: bool,
}

impl Held {
    pub(super) fn new(state: Rc<RefCell<Scheduler>>, exit: usize, host: Arc<str>) -> Self {
        Self {
            state,
            exit,
            host,
            armed: true,
        }
    }

    /// The name of the exit the attempt went out through.
    fn exit_name(&self) -> Option<Arc<str>> {
        let s = self.state.try_borrow().ok()?;
        Some(Arc::clone(&s.exits.get(self.exit)?.name))
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

/// Run a fetch on the direct path ([`Scheduler::admit_direct`]) on this task, once the
/// answers already received are taken in: the HTTP exchange on the exit's core, raced
/// against the shutdown cut-off, then the outcome settled in place
/// ([`Scheduler::finish_direct`]). A fetch that may not go now queues instead.
///
/// Why an `async` block and not an `async fn`, and why the queue is boxed: the future is
/// moved whole, by copy, at each level that takes it (the caller's own future, a spawned
/// task), so its size is a cost of every fetch. An `async fn` keeps a second copy of each
/// argument, and the queue's future, live only on the way that does not run here, would
/// sit beside the exchange's; each queued fetch pays one allocation instead.
#[allow(clippy::manual_async_fn)] // on purpose: see above
pub(super) fn run_direct(
    ingress: &Ingress,
    fetch: Fetch,
) -> impl std::future::Future<Output = Reply> + '_ {
    async move {
        let Some(state) = local(ingress.id) else {
            return Box::pin(ingress.queue(fetch, None)).await;
        };
        // Answers already received are taken in first. A caller that hands in its next
        // fetch as soon as one answer is in (a crawl loop) would otherwise have it
        // admitted, and sent, before the answers that arrived beside that one are read: a
        // 429 among them, and the pause the limiter makes of it, would come too late for
        // this fetch, which would go to a host that has just said "slow down". Yielding
        // puts this task behind every task already woken, and behind the next poll for
        // I/O; the reports they send (limiter, health) are handled before the admission.
        // Tested in `tests/ingress.rs`
        // (`a_fetch_handed_in_beside_a_throttle_waits_for_its_pause`). Fetches handed in
        // together take that turn together, in the order they came (`turns.rs`).
        super::turns::take_turn(&state).await;
        let admitted = state.borrow_mut().admit_direct(&fetch, Instant::now());
        let (mut held, core, arrived, uri, cut) = match admitted {
            Direct::Go {
                exit,
                host,
                go:
                    DirectAttempt {
                        core,
                        arrived,
                        uri,
                        cut,
                    },
            } => (Held::new(state, exit, host), core, arrived, uri, cut),
            Direct::Answered(kind, message) => {
                return Err(FetchError::unsent(kind, message, fetch.url))
            }
            Direct::Queue(parsed) => return Box::pin(ingress.queue(fetch, parsed)).await,
        };
        let running = core.start();
        let mut hop = Hop::new(uri, fetch.method.clone(), fetch.body.clone())
            .led_from_public(fetch.from_public)
            .body_limit(fetch.max_body_bytes, fetch.truncate_body)
            .redirects(fetch.follow_redirects, fetch.min_redirects)
            .off_origin(fetch.left_origin);
        let attempted = {
            // Pinned where it is built: each move of a request future is a copy. Admission
            // does not wait: the fetch is sent as it arrived (one clock read saved).
            let exchange = std::pin::pin!(core.exchange(&mut hop, &fetch.headers, arrived));
            cut.race(exchange).await
        };
        let Some(attempted) = attempted else {
            // The shutdown's grace period is over (the scheduler has let go of the fetch).
            // The scheduler's capacity is let go of as for any fetch that ends unsettled
            // (the hold), and it counts as done; the attempt had left its exit, which the
            // error names.
            let exit = held.exit_name();
            drop(held);
            return Err(FetchError {
                kind: FetchErrorKind::Shutdown,
                message: "crawler shut down before this fetch finished".into(),
                url: fetch.url,
                exit,
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
}

impl Ingress {
    /// Fetch one URL.
    ///
    /// On the scheduler's own Arbiter, with every exit there too, a fetch that may go now
    /// takes the direct path: once the answers already received are taken in (see
    /// [`run_direct`]), admission, selection and pacing as for any fetch, then the
    /// HTTP exchange right here on the caller's task instead of on an exit worker, and
    /// the outcome settled in place. What the direct path cannot finish alone (a retry
    /// after backoff, waking queued fetches) goes to the actor. Anything else queues.
    ///
    /// Why: with every exit on the scheduler's Arbiter, the caller's task can run the
    /// request itself. That saves the hand-offs of the queued path (to the scheduler, to
    /// an exit worker, back to the scheduler, back to the caller), about a fifth of the
    /// cost of a fetch against a fast local site (docs/embedding.md, "Cost of the actor system").
    pub(crate) fn fetch(&self, fetch: Fetch) -> impl std::future::Future<Output = Reply> + '_ {
        run_direct(self, fetch)
    }

    /// Hand `fetch` in through the intake channel, after taking a queue slot
    /// (backpressure), and wait for its reply.
    pub(super) async fn queue(&self, fetch: Fetch, parsed: Option<Parsed>) -> Reply {
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
        // Before the reply's receiver, so that it is dropped after it: the scheduler
        // then finds the fetch abandoned.
        let mut waiting = Waiting(None);
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
        waiting.0 = Some(&self.withdrawn);
        let reply = rx.await;
        waiting.0 = None;
        reply.unwrap_or_else(|_| {
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
    /// anything: every exit local, not distributed, concurrency left, nothing queued for
    /// its host, and an exit the selection allows now. During a shutdown `validate`
    /// answers it.
    pub(crate) fn admit_direct(&mut self, fetch: &Fetch, arrived: Instant) -> Direct {
        if !self.all_local
            || self.shared.is_some()
            || !self.in_flight.has_room(self.settings.crawler.concurrency)
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
        let (pacing, exits, queues) = (&mut self.pacing, &mut self.exits, &mut self.queues);
        // A lookup before the entry (see `Queues::entry`).
        let state = match queues.host_mut(&host) {
            Some(state) => state,
            None => queues.entry(&host),
        };
        if state.has_queued() {
            return Direct::Queue(Some((uri, host)));
        }
        let req = select::Request {
            preferred: fetch.preferred_exit.as_deref(),
            region: fetch.region.as_deref(),
            exclude: &[],
            family: state.family,
            avoid: None,
        };
        let selection = pacing.choose(
            exits,
            (&mut state.active, &mut state.pacing),
            &host,
            &req,
            now_std,
        );
        let Selection::Exit(i) = selection else {
            self.queues.forget_if_idle(&host);
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
        self.in_flight.first_attempt(&host, now_std);
        // A crawl that takes the direct path alone may never run the dispatch, which
        // tells the limiter the hosts met.
        self.tell_met();
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
    pub(super) fn finish_direct(
        &mut self,
        i: usize,
        fetch: Fetch,
        host: &Arc<str>,
        arrived: Instant,
        attempted: Attempted,
    ) -> Result<Reply, oneshot::Receiver<Reply>> {
        let outcome = match attempted.result {
            Ok(answer) if self.is_plain(answer.status) => {
                let exit_name = Arc::clone(&self.exits[i].name);
                self.answered_through(host, i);
                // Noted before the host's count is given back: a quota the answer says is
                // used up pauses the host's pacing, whose handle goes with its last count.
                self.note_answer(
                    i,
                    &exit_name,
                    host,
                    (false, false, 0),
                    (attempted.sent_at, attempted.latency),
                    &answer,
                );
                self.release(i, host);
                self.metrics.urls_done.inc();
                Ok(Ok(answer.deliver(Delivery {
                    url: fetch.url,
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
                })))
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
                    awaits_budget: false,
                    excluded: Default::default(),
                    arrived,
                    local_failure: None,
                    local: None,
                    local_passes: false,
                    waited: false,
                    backlog: 0,
                    last_exit: Some(i),
                    last_exit_name: Some(Arc::clone(&self.exits[i].name)),
                    avoid: None,
                    span: None,
                };
                let attempted = Attempted {
                    result,
                    ..attempted
                };
                if let Some((p, delay)) = self.settle_spanned(i, p, Some(attempted)) {
                    self.hand_off(Handoff::Retry(Box::new(p), delay));
                }
                Err(rx)
            }
        };
        if self.queues.has_waiting() {
            self.hand_off(Handoff::Dispatch);
        }
        self.check_drained();
        outcome
    }

    /// A direct fetch that ended unsettled (see [`Held`]): its attempt had left exit `i`,
    /// which counts it as a request that ended without an answer; its capacity back,
    /// counted done, and queued fetches woken if they may now go.
    pub(super) fn abandon_direct(&mut self, i: usize, host: &Arc<str>) {
        self.count(i, host, Outcome::Error, None);
        self.release(i, host);
        self.metrics.urls_done.inc();
        if self.queues.has_waiting() {
            self.hand_off(Handoff::Dispatch);
        }
        self.check_drained();
    }

    pub(super) fn hand_off(&self, h: Handoff) {
        if let Some(tx) = &self.handoff {
            // Fails only when the actor is gone; a pending fetch dropped with it answers.
            let _ = tx.send(h);
        }
    }
}
