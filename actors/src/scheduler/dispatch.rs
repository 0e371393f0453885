use std::sync::Arc;
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use exitcrawl::outcome::{self, AllDown};
use exitcrawl::select::{self, NoExitReason, Selection};
use tracing_actix::ActorInstrument;

use crate::controller::{HostsMet, LimitKey};
use crate::messages::{AttemptReport, FetchErrorKind, SendRequest};
use crate::metrics::Outcome;

use super::admission::wire_uri;
use super::alarm::Rang;
use super::pending::Pending;
use super::{ExitSlot, Scheduler, SchedulerActor, SharedLimits, Step};

/// Whom an all-down clock is for: the region the waiting fetches ask for and the family
/// of their host's address (`None`: any exit; a host name). The selector finds every
/// exit unavailable per region and family (`select::NoExitReason::AllUnavailable`).
pub(super) type AllDownKey = (Option<String>, Option<select::Family>);

/// `exit` may serve the fetches counted under `key`: its region and family match.
pub(super) fn serves(exit: &ExitSlot, (region, family): &AllDownKey) -> bool {
    let region_ok = region.is_none() || *region == exit.region;
    let family_ok = match (family, exit.family) {
        (Some(want), Some(have)) => *want == have,
        _ => true,
    };
    region_ok && family_ok
}

/// Lanes paced at this interval or longer are woken by the runtime's timer alone: its
/// lateness (1.1 ms at the median, `examples/bench_timers.rs`) is then about 2 % of
/// their rate or less.
const ALARM_BELOW: Duration = Duration::from_millis(50);

impl StreamHandler<Rang> for SchedulerActor {
    fn handle(&mut self, Rang(at): Rang, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_alarm(at, ctx);
    }

    /// The scheduler holds the alarm, whose sender the stream reads: it ends only with it.
    fn finished(&mut self, _ctx: &mut Self::Context) {}
}

impl Scheduler {
    /// Send what may be sent; set one timer for the earliest moment more may go.
    pub(super) fn dispatch(&mut self, ctx: &mut Context<SchedulerActor>) {
        let now = Instant::now();
        let concurrency = self.settings.crawler.concurrency;
        let mut wake: Option<Duration> = None;
        // The earliest wait of a host paced fast enough for the alarm: a slower host's
        // earlier wait must not leave a fast one to the runtime's timer.
        let mut fine: Option<Duration> = None;
        let mut to_visit = self.queues.round();
        while to_visit > 0 && self.in_flight.has_room(concurrency) {
            let Some(host) = self.queues.next_host() else {
                break;
            };
            to_visit -= 1;
            match self.try_host(&host, now, ctx) {
                Step::Sent => {
                    self.queues.revisit(host);
                    to_visit = self.queues.round();
                }
                // `try_host` took the host out of the round-robin (its count for the exit
                // keeps the entry until the fetch ends).
                Step::SentLast => to_visit = self.queues.round(),
                Step::Wait(d) => {
                    wake = Some(wake.map_or(d, |w| w.min(d)));
                    if fine.is_none_or(|f| d < f) && self.wants_alarm(&host) {
                        fine = Some(d);
                    }
                    self.queues.revisit(host);
                }
                Step::Busy => self.queues.revisit(host),
                Step::Empty => self.queues.leave(&host),
            }
        }
        self.tell_met();
        if let (Some(d), Some(alarm)) = (fine, &mut self.alarm) {
            alarm.set(now.into_std() + d, now.into_std());
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

    /// Tell the limiter the hosts whose pacing began, or went on past their forgetting,
    /// since it was last told: it forgets their pacing after a silence unless it hears
    /// from them (see [`HostsMet`]).
    pub(super) fn tell_met(&mut self) {
        if !self.pacing.has_met() {
            return;
        }
        let met = self.pacing.take_met();
        if let Some(l) = &self.limiter {
            l.do_send(HostsMet(met));
        }
    }

    /// Whether the wake for `host` is worth the alarm's finer timer: the runtime's timer
    /// wakes a send about a tick late, and each late send costs its lane that much of its
    /// interval (`alarm.rs`). At intervals of [`ALARM_BELOW`] and longer that is about 2 %
    /// of the lane's rate or less, worth less than the alarm's thread costs where wakes
    /// are dense (thousands of slow hosts at once). A wait with no paced key behind it (an
    /// exit's own token bucket) is taken to be fast.
    fn wants_alarm(&self, host: &Arc<str>) -> bool {
        self.queues
            .host(host)
            .and_then(|h| h.pacing.shortest_interval())
            .is_none_or(|i| i < ALARM_BELOW)
    }

    /// The alarm rang: run the dispatch if the runtime's clock has reached `at` (under
    /// paused time only the runtime's timer moves with it) and `at` is still the instant
    /// the alarm is set for. The dispatch re-sets the runtime's timer if it was for `at`.
    fn on_alarm(&mut self, at: std::time::Instant, ctx: &mut Context<SchedulerActor>) {
        if Instant::now().into_std() < at {
            return;
        }
        if self.alarm.as_mut().is_some_and(|a| a.rang(at)) {
            self.dispatch(ctx);
        }
    }

    pub(super) fn try_host(
        &mut self,
        host: &Arc<str>,
        now: Instant,
        ctx: &mut Context<SchedulerActor>,
    ) -> Step {
        let now_std = now.into_std();
        let (pacing, exits, queues) = (&mut self.pacing, &mut self.exits, &mut self.queues);
        let Some(state) = queues.host_mut(host) else {
            return Step::Empty;
        };
        if state.parts().0.is_some_and(|head| head.abandoned()) {
            // Its caller gave up on it while it waited: nobody reads the answer. Dropped,
            // it counts as done.
            drop(queues.pop_unsent(host));
            return Step::Sent;
        }
        let family = state.family;
        let (Some(head), active, host_pacing) = state.parts() else {
            return Step::Empty;
        };
        let req = select::Request {
            preferred: head.fetch.preferred_exit.as_deref(),
            region: head.fetch.region.as_deref(),
            exclude: head.excluded.current(|x| exits[x].returns),
            family,
            avoid: head.avoid,
        };
        let selection = pacing.choose(exits, (active, host_pacing), host, &req, now_std);
        match selection {
            Selection::Exit(i) => {
                let Some((mut p, last)) = self.queues.pop(host, i) else {
                    return Step::Empty;
                };
                p.waited |= !last;
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

    pub(super) fn no_exit(&mut self, host: &Arc<str>, reason: NoExitReason, now: Instant) -> Step {
        // Called for a host with a fetch at the head of its queue.
        let Some(state) = self.queues.host_mut(host) else {
            return Step::Empty;
        };
        let family = state.family;
        let Some(head) = state.parts().0 else {
            return Step::Empty;
        };
        let (kind, message) = match reason {
            NoExitReason::UnknownPreferred => (
                FetchErrorKind::UnknownExit,
                format!(
                    "preferred exit {:?} is not configured",
                    head.fetch.preferred_exit.clone().unwrap_or_default()
                ),
            ),
            NoExitReason::NoRegionMatch => (
                FetchErrorKind::NoRegion,
                format!(
                    "no exit in region {:?}",
                    head.fetch.region.clone().unwrap_or_default()
                ),
            ),
            NoExitReason::NoFamilyMatch => (
                FetchErrorKind::AddressFamily,
                format!(
                    "no exit can reach {host}: it is an {} address and no exit has one",
                    select::Family::of_host(host).unwrap_or_default().as_str()
                ),
            ),
            NoExitReason::AllExcluded => {
                if head.local_passes {
                    if let Some(wait) =
                        retry_locally(head, self.settings.health.max_ejection(), now)
                    {
                        return wait;
                    }
                }
                match head.local_failure.take() {
                    // Every exit failed the same way: say how (a family mismatch, a bind
                    // error).
                    Some((kind, message)) => (
                        kind,
                        format!("no exit could open a connection; the last said: {message}"),
                    ),
                    None => (
                        FetchErrorKind::LocalConnect,
                        "no exit could open a connection (every source address failed locally)"
                            .into(),
                    ),
                }
            }
            NoExitReason::AllUnavailable => {
                let key = (head.fetch.region.clone(), family);
                let since = *self.all_down_since.entry(key).or_insert(now);
                let max_ejection = self.settings.health.max_ejection();
                let waited = match outcome::all_down(since.into_std(), now.into_std(), max_ejection)
                {
                    AllDown::Wait(d) => return Step::Wait(d),
                    AllDown::GiveUp { waited } => waited,
                };
                (
                    FetchErrorKind::NoHealthyExit,
                    format!(
                        "no healthy exit: every exit is ejected or disabled (waited {waited:?})"
                    ),
                )
            }
        };
        if let Some(p) = self.queues.pop_unsent(host) {
            p.fail(kind, message, &self.exits);
        }
        Step::Sent
    }

    /// An attempt through exit `i` reached a site (an answer, or a failure that counts
    /// as an attempt): an exit in service, probing or not, takes fetches, and the stretch
    /// in which no exit did ends for the fetches it may serve. Why an attempt and not the
    /// exit's return: a probing exit that fails at once, nothing sent, would otherwise
    /// start the fleet's wait again at each return. Why not only a recovery: a probing
    /// exit whose fetches reach sites without an answer (refused, timed out) stays
    /// probing however long it serves, and ejected again it would leave the fetches then
    /// waiting a clock from the outage before it, which ends them at once. Each attempt
    /// counts against its fetch's retries, so a fleet that comes back this way still ends
    /// what it cannot fetch.
    pub(super) fn reached_site_through(&mut self, i: usize) {
        if self.all_down_since.is_empty() {
            return;
        }
        if let Some(e) = self.exits.get(i).filter(|e| e.enabled && e.healthy) {
            self.all_down_since.retain(|key, _| !serves(e, key));
        }
    }

    /// Send `p` through exit `i`; the host's count for the exit is already taken.
    pub(super) fn send(&mut self, i: usize, p: Pending, ctx: &mut Context<SchedulerActor>) {
        self.reserve(i);
        match self.shared.clone() {
            Some(shared) => self.check_shared(i, p, shared, ctx),
            None => self.launch(i, p),
        }
    }

    /// Count a fetch against the exit before anything is sent (the counterpart of
    /// [`Self::release`]).
    pub(super) fn reserve(&mut self, i: usize) {
        self.exits[i].share.reserve();
        self.in_flight.reserve();
    }

    /// Send one HTTP attempt through exit `i` (already reserved).
    pub(super) fn launch(&mut self, i: usize, mut p: Pending) {
        let now = Instant::now();
        p.attempts += 1;
        if p.first_send() {
            self.in_flight.first_attempt(&p.host, now.into_std());
        }
        p.last_exit = Some(i);
        p.last_exit_name = Some(Arc::clone(&self.exits[i].name));
        let id = self.in_flight.id();
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
            max_body_bytes: p.fetch.max_body_bytes,
            truncate_body: p.fetch.truncate_body,
            follow_redirects: p.fetch.follow_redirects,
            min_redirects: p.fetch.min_redirects,
            left_origin: p.fetch.left_origin,
            done: AttemptReport::new(id, reports),
        };
        match &self.exits[i].local {
            Some(core) => core.send(req),
            // A stopped exit drops the message, and with it the report, which says so.
            None => self.exits[i].addr.do_send(req),
        }
        self.in_flight.sent(id, i, p);
    }

    /// Distributed mode: ask the shared GCRA for the key's permit before sending. The
    /// local pacer has already allowed the request, so Redis sees at most the local rate.
    pub(super) fn check_shared(
        &mut self,
        i: usize,
        mut p: Pending,
        shared: SharedLimits,
        ctx: &mut Context<SchedulerActor>,
    ) {
        let now = crate::clock::now();
        let key = LimitKey::new(self.settings.limiter.scope, &self.exits[i].name, &p.host);
        let state = self.pacing.key((i, &self.exits[i].name), &p.host, now);
        let (rps, burst) = self.pacing.shared_quota(&state);
        let name = key.redis_name();
        let id = self.in_flight.id();
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

    pub(super) fn on_checked(
        &mut self,
        i: usize,
        key: LimitKey,
        p: Pending,
        res: Result<exitcrawl::Decision, crate::redis::RedisError>,
        ctx: &mut Context<SchedulerActor>,
    ) {
        let now = crate::clock::now();
        // A pause read while the check was away (a throttle's Retry-After, a hold) binds
        // this fetch too: the shared budget knows nothing of pauses.
        let paused = self
            .queues
            .host(&p.host)
            .is_some_and(|h| h.pacing.paused_for(i, now));
        match res {
            Ok(exitcrawl::Decision::Allow) if paused => {
                self.metrics.redis_up.set(1);
                self.pacing.shared_allowed(&key, now);
                self.put_back(i, p, ctx);
            }
            Ok(exitcrawl::Decision::Allow) => {
                self.metrics.redis_up.set(1);
                self.pacing.shared_allowed(&key, now);
                self.launch(i, p);
            }
            Ok(exitcrawl::Decision::Wait(d)) => {
                self.metrics.redis_up.set(1);
                self.pacing.shared_wait(&key, now + d, now);
                self.put_back(i, p, ctx);
            }
            Err(e) => {
                // Redis is away: keep crawling on a conservative local share of the rate.
                self.metrics.redis_up.set(0);
                self.metrics.redis_errors.inc();
                if self.pacing.shared_down(&key, now) {
                    tracing::warn!(key = %key.redis_name(), error = %e, "redis unavailable: pacing this key on a local share");
                }
                if paused {
                    self.put_back(i, p, ctx);
                } else {
                    self.launch(i, p);
                }
            }
        }
    }

    /// A fetch chosen for exit `i` is not sent after all: its slot is given back and it
    /// goes back to the front of its host's queue, for the pacing to send when it may.
    fn put_back(&mut self, i: usize, p: Pending, ctx: &mut Context<SchedulerActor>) {
        self.release(i, &p.host);
        self.requeue_front(p);
        self.check_drained();
        self.dispatch(ctx);
    }

    pub(super) fn count(&self, i: usize, host: &str, outcome: Outcome, status: Option<u16>) {
        self.handles[i].count(&self.metrics, host, outcome, status);
    }

    pub(super) fn release(&mut self, i: usize, host: &Arc<str>) {
        self.exits[i].share.release();
        self.in_flight.release();
        self.release_host(i, host);
    }

    /// The host's own count for exit `i` (the counterpart of the one a send takes).
    pub(super) fn release_host(&mut self, i: usize, host: &Arc<str>) {
        self.queues.release(i, host);
    }
}

/// Every exit that may send `head` has failed on our side for it, nothing sent, the last
/// for want of file descriptors: that is the process's, not an exit's (no exit is ejected
/// for it), and it passes as requests end. So the fetch waits and tries every exit again
/// each second ([`outcome::all_down`]'s pace and bound), where failing at once would lose
/// the URL to a moment's shortage. An exit's own failure (a bind error, a refusing proxy)
/// is said at once, and ejects the exit. `None`: waited that long, the fetch ends.
fn retry_locally(head: &mut Pending, max_ejection: Duration, now: Instant) -> Option<Step> {
    let (since, again) = *head.local.get_or_insert((now, now + LOCAL_RETRY));
    match outcome::all_down(since.into_std(), now.into_std(), max_ejection) {
        AllDown::GiveUp { .. } => {
            head.local = None;
            None
        }
        AllDown::Wait(_) if now < again => Some(Step::Wait(again - now)),
        AllDown::Wait(_) => {
            // A fresh round: what each exit says now decides.
            head.excluded.clear();
            head.local_passes = false;
            head.local = Some((since, now + LOCAL_RETRY));
            Some(Step::Wait(Duration::ZERO))
        }
    }
}

/// How often a fetch every exit failed locally for tries them all again.
const LOCAL_RETRY: Duration = Duration::from_secs(1);
