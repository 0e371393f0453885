use std::sync::Arc;
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use exitcrawl::config::Algorithm;
use exitcrawl::headers::ServerHints;
use exitcrawl::outcome::{self, Attempts, Ended, GaveUp, Heard, Throttle, Verdict};
use exitcrawl::redact::mask_message;

use crate::messages::{Answer, Attempted, Failed, FetchErrorKind, Observed, Succeeded, Throttled};
use crate::messages::{AttemptFailure, Delivery};
use crate::metrics::{Outcome, RateLabels};

use super::pending::Pending;
use super::{Scheduler, SchedulerActor};

impl Scheduler {
    /// [`Self::settle`] inside the fetch's span when the attempt may log something.
    pub(super) fn settle_spanned(
        &mut self,
        i: usize,
        mut p: Pending,
        attempted: Option<Attempted>,
    ) -> Option<(Pending, Duration)> {
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
    pub(super) fn is_plain(&self, status: u16) -> bool {
        status < 500 && !self.settings.limiter.is_throttle_status(status)
    }

    /// Count an ended attempt through exit `i`, tell the limiter and the health actor,
    /// and answer the fetch, requeue it (nothing was sent), or return it with how long
    /// it waits before it goes back to its host's queue (a retry, a throttle, or a retry
    /// the budget deferred).
    pub(super) fn settle(
        &mut self,
        i: usize,
        p: Pending,
        res: Result<Attempted, MailboxError>,
    ) -> Option<(Pending, Duration)> {
        // The host's own count goes last: the host's entry, and with it the handle to its
        // pacing, is dropped once nothing is queued or in flight for it, and a throttle's
        // Retry-After must reach that pacing first, so that no fetch handed in before the
        // limiter's word is sent into the pause.
        self.exits[i].share.release();
        self.in_flight.release();
        let host = Arc::clone(&p.host);
        let out = self.settle_attempt(i, p, res);
        self.release_host(i, &host);
        out
    }

    /// [`Self::settle`], the capacity but the host's count given back.
    fn settle_attempt(
        &mut self,
        i: usize,
        mut p: Pending,
        res: Result<Attempted, MailboxError>,
    ) -> Option<(Pending, Duration)> {
        let att = match res {
            Ok(att) => att,
            Err(e) => {
                // The exit actor is gone: nothing was sent through it.
                p.attempts -= 1;
                p.excluded.push(i, self.exits[i].returns);
                self.observe(i, Some(format!("exit actor unavailable: {e}")));
                self.requeue_front(p);
                return None;
            }
        };
        let timing = (att.sent_at, att.latency);
        match att.result {
            Ok(answer) => self.settle_answer(i, p, timing, answer),
            Err(f) => self.settle_failure(i, p, timing, f),
        }
    }

    /// Nothing reached the site through exit `i` (the verdict [`Verdict::Move`]): not an
    /// attempt, not the site's fault. A host without an address of the exit's family is
    /// not the exit's fault either.
    fn move_to_another_exit(&mut self, i: usize, mut p: Pending, f: AttemptFailure) {
        p.attempts -= 1;
        p.excluded.push(i, self.exits[i].returns);
        tracing::warn!(exit = %self.exits[i].name, error = %mask_message(&f.message), "exit failed locally; moving the fetch");
        if f.kind.is_exit_fault() {
            self.observe(i, Some(f.message.clone()));
        }
        // Any exit short of descriptors makes the fetch wait for them, whatever the other
        // exits said (one of another family, one whose address is gone).
        p.local_passes |= f.kind == outcome::Failure::OutOfFiles;
        p.local_failure = Some((f.error, f.message));
        self.requeue_front(p);
    }

    /// An answer came back through exit `i`: deliver it, retry it (a 5xx, while attempts
    /// are left), put it back for later (a throttle), or give it up (its host refuses
    /// everything, or asks for too long a pause).
    fn settle_answer(
        &mut self,
        i: usize,
        mut p: Pending,
        (sent_at, latency): (std::time::Instant, Duration),
        answer: Answer,
    ) -> Option<(Pending, Duration)> {
        p.reached_site();
        let now = Instant::now();
        let exit_name = self.exits[i].name.clone();
        let (throttle, hints, asked) = self.note_answer(
            i,
            &exit_name,
            &p.host,
            (p.waited, p.is_retry(), p.backlog),
            (sent_at, latency),
            &answer,
        );
        let latency_ms = latency.as_secs_f64() * 1e3;
        let (ended, wait, bound_here) = if throttle {
            tracing::info!(exit = %exit_name, host = %p.host, status = answer.status, attempt = p.attempts, latency_ms, "throttled");
            self.throttled(&mut p, (i, &exit_name), hints.retry_after, asked, now)
        } else {
            self.answered_through(&p.host, i);
            let status = answer.status;
            // A 5xx's Retry-After still spaces its retry.
            (Ended::Answer { status }, hints.retry_after, false)
        };
        let verdict = self.decide(&p, ended, now);
        if let Some(delay) = self.wait_for(&mut p, verdict, wait) {
            return Some((p, delay));
        }
        if let Verdict::GaveUp(why) = verdict {
            let host = Arc::clone(&p.host);
            p.last_exit = Some(i);
            self.give_up(p, why);
            // A pause bound to this exit, or a pinned fetch's refusals, say nothing of the
            // host's other URLs, which other exits may take.
            let this_exits = matches!(why, GaveUp::RefusingExit(_))
                || (matches!(why, GaveUp::RetryAfter(_)) && bound_here);
            if !this_exits {
                self.give_up_host(&host, why);
            }
            return None;
        }
        if verdict == Verdict::Interrupted {
            p.last_exit = Some(i);
            self.interrupt(p);
            return None;
        }
        if ended.wants_retry() {
            tracing::warn!(exit = %exit_name, host = %p.host, status = answer.status, attempt = p.attempts, latency_ms, "retries exhausted");
        }
        let resp = answer.deliver(Delivery {
            // The pending fetch is answered here; its URL is not needed after.
            url: std::mem::take(&mut p.fetch.url),
            exit: exit_name,
            attempts: p.attempts,
            throttled: p.throttled,
            elapsed: now.saturating_duration_since(p.arrived),
        });
        p.answer(Ok(resp));
        None
    }

    /// A throttle through exit `i` (named `exit_name`): its `Retry-After` (cut to
    /// `max_retry_after`; `asked` the longer one the site gave) honoured, its run counted.
    /// Returns the outcome, the fetch's wait before it goes back to its host's queue (the
    /// pause, unless the pause is the exit's alone and longer than the fetch may wait: then
    /// another exit takes it, and the queue's pacing keeps it from the paused one), and
    /// whether the pause went on the exit's own key.
    fn throttled(
        &mut self,
        p: &mut Pending,
        (i, exit_name): (usize, &Arc<str>),
        retry_after: Option<Duration>,
        asked: Option<Duration>,
        now: Instant,
    ) -> (Ended, Option<Duration>, bool) {
        p.throttled += 1;
        let (mut elsewhere, mut on_exit) = (false, false);
        if let Some(ra) = retry_after {
            let until = now.into_std() + ra;
            on_exit = self.honour_pause(&p.host, i, until, false);
            elsewhere = asked.is_some() && on_exit && self.open_elsewhere(p, i, until);
        }
        let quiet = self.settings.crawler.max_retry_after();
        // A fetch pinned to this exit counts its throttles against the exit alone: the
        // host may answer the others, and its run would give up their URLs.
        let pinned = p.fetch.preferred_exit.as_deref() == Some(&**exit_name);
        let (refusing_for, pinned_for) = if pinned {
            let key = (Arc::clone(&p.host), i);
            let run = self.refusing_pinned.throttled(&key, now.into_std(), quiet);
            (Duration::ZERO, Some(run))
        } else {
            let run = self.refusing.throttled(&p.host, now.into_std(), quiet);
            (run, None)
        };
        let ended = Ended::Throttled(Throttle {
            retry_after: asked.or(retry_after),
            refusing_for,
            pinned_for,
            elsewhere,
        });
        (ended, retry_after.filter(|_| !elsewhere), on_exit)
    }

    /// No answer through exit `i`: a local failure moves the fetch to another exit;
    /// otherwise (refused, reset, timed out, …) the limiter hears it, and a
    /// connection-level failure is retried while attempts are left (the retry budget may
    /// delay it, never end it).
    fn settle_failure(
        &mut self,
        i: usize,
        mut p: Pending,
        (sent_at, latency): (std::time::Instant, Duration),
        f: AttemptFailure,
    ) -> Option<(Pending, Duration)> {
        let now = Instant::now();
        let verdict = self.decide(&p, Ended::Failed(f.kind), now);
        if verdict == Verdict::Move {
            self.move_to_another_exit(i, p, f);
            return None;
        }
        p.reached_site();
        self.reached_site_through(i);
        let exit_name = self.exits[i].name.clone();
        self.count(i, &p.host, Outcome::Error, None);
        if let Some(l) = &self.limiter {
            l.do_send(Failed {
                exit: exit_name.clone(),
                host: p.host.clone(),
                sent_at,
                latency,
                kind: f.kind,
                retry: p.is_retry(),
            });
        }
        // Refused, reset or timed out may be the site's doing, so they feed the limiter,
        // not the exit's health (else one dead site would eject every exit); the health
        // URL judges the exit's own path.
        if let Some(delay) = self.wait_for(&mut p, verdict, None) {
            return Some((p, delay));
        }
        if verdict == Verdict::Interrupted {
            self.interrupt(p);
            return None;
        }
        tracing::warn!(exit = %exit_name, host = %p.host, attempt = p.attempts, error = %mask_message(&f.message), "fetch failed");
        p.fail(f.error, f.message, &self.exits);
        None
    }

    /// `host` answered through exit `i` with anything but a throttle: it takes requests,
    /// through that exit too.
    pub(super) fn answered_through(&mut self, host: &Arc<str>, i: usize) {
        self.refusing.answered(host);
        if !self.refusing_pinned.is_empty() {
            self.refusing_pinned.answered(&(Arc::clone(host), i));
        }
    }

    /// End `p` interrupted: the crawler shuts down and its last attempt wanted another.
    /// Its attempts and throttles go with it, and a program records it as interrupted,
    /// to be fetched again by a resumed crawl.
    fn interrupt(&mut self, p: Pending) {
        p.fail(
            FetchErrorKind::Shutdown,
            "crawler shut down before this fetch could be tried again",
            &self.exits,
        );
    }

    /// End `p` throttled out, saying why.
    fn give_up(&mut self, p: Pending, why: GaveUp) {
        self.metrics.throttled_out.inc();
        p.fail(FetchErrorKind::ThrottledOut, why.to_string(), &self.exits);
    }

    /// Its host gave a fetch up: the host's other waiting fetches (queued, or waiting
    /// for a retry) end the same way, since the site would answer them alike. Fetches
    /// in flight settle on their own answers.
    fn give_up_host(&mut self, host: &Arc<str>, why: GaveUp) {
        tracing::warn!(host = %host, reason = %why, "giving up the host's waiting URLs");
        // Given up for a pause too long to wait: the host did not refuse for long, and a URL
        // of it met later starts its own run. A host given up for refusing keeps its run, so
        // that the fetches still in flight end on their next throttle too.
        if matches!(why, GaveUp::RetryAfter(_)) {
            self.refusing.given_up(host);
        }
        let queued = self.queues.drain_host(host);
        let waiting = self.in_flight.take_delayed_where(|p| p.host == *host);
        for p in queued.into_iter().chain(waiting) {
            self.give_up(p, why);
        }
    }

    /// What an answer through exit `i` tells: time and count it, feed the limiter (a
    /// throttle; with the adaptive algorithm, any answer; the site's rate-limit headers).
    /// `waited`: the attempt waited for its pacer; `retry`: it retried a page that failed;
    /// `backlog`: the fetches waiting for the host when it was sent.
    /// Returns whether it is a throttle, the site's hints with their pauses cut to
    /// `max_retry_after`, and the pause the site asked for when it was longer.
    pub(super) fn note_answer(
        &mut self,
        i: usize,
        exit_name: &Arc<str>,
        host: &Arc<str>,
        (waited, retry, backlog): (bool, bool, u32),
        (sent_at, latency): (std::time::Instant, Duration),
        answer: &Answer,
    ) -> (bool, ServerHints, Option<Duration>) {
        self.observe(i, None);
        self.reached_site_through(i);
        self.handles[i].duration.observe(latency.as_secs_f64());
        // Every hint header is named retry-after or [x-]ratelimit…, and names arrive
        // lowercase: most answers have none, and skip the parse.
        let maybe_hint = |k: &awc::http::header::HeaderName| {
            matches!(k.as_str().as_bytes().first(), Some(b'r' | b'x'))
        };
        let mut hints = if answer.headers.keys().any(maybe_hint) {
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
        let asked = self.cap_pauses(host, &mut hints);
        // A quota used up pauses from the moment it is read, as a throttle's Retry-After
        // does: the limiter's word comes a mailbox hop later, and the host's fetches sent
        // meanwhile would meet the same wall.
        if hints.remaining == Some(0) {
            if let Some(d) = hints.pacing().and_then(|p| p.pause_for) {
                self.honour_pause(host, i, crate::clock::now() + d, true);
            }
        }
        let throttle = self.settings.limiter.is_throttle_status(answer.status);
        let adaptive = self.settings.limiter.algorithm == Algorithm::Aimd;
        let heard = outcome::heard(throttle, adaptive, !hints.is_empty());
        if let Some(l) = self.limiter.as_ref().filter(|_| heard != Heard::Nothing) {
            if heard == Heard::Throttled {
                l.do_send(Throttled {
                    exit: Arc::clone(exit_name),
                    host: Arc::clone(host),
                    sent_at,
                    latency,
                    status: answer.status,
                    hints,
                    backlog: Some(backlog),
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
                    backlog: Some(backlog),
                    retry,
                });
            }
        }
        let outcome = if throttle {
            Outcome::Throttled
        } else {
            Outcome::Ok
        };
        self.count(i, host, outcome, Some(answer.status));
        self.metrics.body_wire_bytes.inc_by(answer.wire_bytes);
        self.metrics.body_bytes.inc_by(answer.body.len() as u64);
        (throttle, hints, asked)
    }

    /// A throttle's Retry-After (or a quota used up, `quota`) through exit `i` binds from
    /// the moment it is read ([`HostPacing::pause`](super::pacing::HostPacing::pause)),
    /// and is counted in the pause metrics.
    fn honour_pause(
        &mut self,
        host: &Arc<str>,
        i: usize,
        until: std::time::Instant,
        quota: bool,
    ) -> bool {
        let Some(pacing) = self.queues.host(host).map(|h| &h.pacing) else {
            return false;
        };
        let now = crate::clock::now();
        let Some((on_exit, before)) = pacing.pause(i, until, now, quota) else {
            return false;
        };
        // Named as the limiter names its keys (an exit's lane by the exit, a host's budget
        // `*`), so this pause and the limiter's own for the same Retry-After land on one
        // series and count once.
        let labels = RateLabels {
            exit: if on_exit { &*self.exits[i].name } else { "*" }.to_owned(),
            host: self.metrics.host_label(host),
        };
        self.metrics
            .note_pause(&labels, Some(&**host), before, until, now);
        on_exit
    }

    /// Whether an exit other than `i` that may take `p` (in service, of its region and its
    /// host's family, not one that failed it; none for a fetch pinned to its exit) may
    /// send to its host before `until`: neither its own key nor the host's budget is
    /// paused past it.
    fn open_elsewhere(&self, p: &Pending, i: usize, until: std::time::Instant) -> bool {
        if p.fetch.preferred_exit.is_some() && !p.fetch.prefer_first_attempt {
            return false;
        }
        let Some(state) = self.queues.host(&p.host) else {
            return false;
        };
        let key = (p.fetch.region.clone(), state.family);
        let may_take = self
            .exits
            .iter()
            .enumerate()
            .filter(|(j, e)| {
                *j != i
                    && e.enabled
                    && e.healthy
                    && !p.excluded.holds(*j, |x| self.exits[x].returns)
                    && super::dispatch::serves(e, &key)
            })
            .map(|(j, _)| j);
        state.pacing.open_before(may_take, until)
    }

    /// Cut the pauses `hints` ask for to `crawler.max_retry_after_ms`; a longer one is
    /// returned, and warned about once per host (a site may send it on every answer).
    fn cap_pauses(&mut self, host: &Arc<str>, hints: &mut ServerHints) -> Option<Duration> {
        if hints.is_empty() {
            return None;
        }
        let max = self.settings.crawler.max_retry_after();
        let asked = hints.cap_pauses(max)?;
        if self.warned_pause.insert(Arc::clone(host)) {
            tracing::warn!(
                host = %host,
                asked_s = asked.as_secs(),
                max_s = max.as_secs(),
                "the site asked for a pause longer than crawler.max_retry_after_ms; pausing that long at most"
            );
        }
        Some(asked)
    }

    /// Passive health. The health actor weighs failing checks against the exit's recent
    /// answers, so it hears of them, but coarsely: at most one answer per exit every
    /// quarter of the check interval (at most a second), plus the first answer after a
    /// failure or a health change — one message per exit now and then, not per fetch.
    pub(super) fn observe(&mut self, exit: usize, error: Option<String>) {
        let Some(h) = &self.health else { return };
        let slot = &mut self.exits[exit];
        if error.is_some() {
            slot.report_next = true;
        } else {
            let now = crate::clock::now();
            let every = (self.settings.health.interval() / 4).min(Duration::from_secs(1));
            let fresh = slot
                .answer_reported
                .is_some_and(|at| now.saturating_duration_since(at) < every);
            if fresh && !slot.report_next {
                return;
            }
            slot.report_next = false;
            slot.answer_reported = Some(now);
        }
        h.do_send(Observed { exit, error });
    }

    /// The core's verdict on an ended attempt; counts and logs what it decided.
    fn decide(&mut self, p: &Pending, ended: Ended, now: Instant) -> Verdict {
        let attempts = Attempts {
            made: p.attempts,
            throttled: p.throttled,
            max_throttles: p.fetch.max_throttles,
            shutting_down: self.shutting_down,
        };
        let verdict = outcome::decide(
            ended,
            attempts,
            &self.bounds,
            self.in_flight.budget(&p.host, now.into_std()),
            now.into_std(),
        );
        match verdict {
            Verdict::Retry => {
                self.metrics.retries.inc();
            }
            Verdict::Defer => {
                self.metrics.retry_budget_refusals.inc();
                tracing::info!(host = %p.host, attempt = p.attempts, "retry deferred by the retry budget");
            }
            Verdict::Later
            | Verdict::GaveUp(_)
            | Verdict::Final
            | Verdict::Move
            | Verdict::Interrupted => {}
        }
        verdict
    }

    /// How long a fetch the verdict keeps waits before it goes back to its host's queue:
    /// a retry backs off by the errors so far, a throttled fetch by its throttles (never
    /// less than the site's `retry_after`), and a retry the budget deferred waits its
    /// backoff too, and at least the budget's recheck, before it asks again. `None`: the
    /// verdict ends the fetch, or moves it.
    fn wait_for(
        &mut self,
        p: &mut Pending,
        verdict: Verdict,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        // A fetch that goes on goes around the exit its last attempt took, while another
        // may take it: a retry, since that exit failed it; a throttled fetch, since the
        // site may refuse that exit's address alone (where it limits the host, every
        // exit waits for the same pacing, and the choice costs nothing).
        let goes_on = matches!(verdict, Verdict::Retry | Verdict::Later | Verdict::Defer);
        p.avoid = p.last_exit.filter(|_| goes_on);
        if p.fetch.prefer_first_attempt && goes_on {
            p.fetch.preferred_exit = None;
        }
        match verdict {
            Verdict::Retry => Some(self.in_flight.backoff(p.errors(), retry_after)),
            Verdict::Later => Some(self.in_flight.after_throttle(retry_after)),
            Verdict::Defer => {
                p.awaits_budget = true;
                Some(self.in_flight.deferred(p.errors(), retry_after))
            }
            Verdict::GaveUp(_) | Verdict::Final | Verdict::Move | Verdict::Interrupted => None,
        }
    }

    /// `p` goes back to its host's queue after `delay`. One whose retry the budget
    /// deferred asks the budget again then, and waits another round if it still says no.
    pub(super) fn retry_later(
        &mut self,
        p: Pending,
        delay: Duration,
        ctx: &mut Context<SchedulerActor>,
    ) {
        tracing::info!(host = %p.host, attempt = p.attempts, delay_ms = delay.as_millis() as u64, "backoff: retry scheduled");
        let id = self.in_flight.delay(p);
        ctx.run_later(delay, move |act, ctx| {
            let mut act = act.state.borrow_mut();
            let Some(mut p) = act.in_flight.take_delayed(id) else {
                return;
            };
            if p.awaits_budget {
                if !act.in_flight.try_withdraw(&p.host, crate::clock::now()) {
                    let again = act.in_flight.recheck_after();
                    act.retry_later(p, again, ctx);
                    return;
                }
                p.awaits_budget = false;
                act.metrics.retries.inc();
            }
            act.requeue_front(p);
            act.dispatch(ctx);
        });
    }

    /// `p` goes back to the front of its host's queue: a retry whose wait is over, or a
    /// fetch whose attempt sent nothing (a local failure, an exit gone, the shared
    /// budget's wait). During a shutdown the queues are closed and drained: it ends
    /// `Shutdown` instead, as the queued fetches did, so that a shutdown that reports
    /// every fetch answered has answered this one too.
    pub(super) fn requeue_front(&mut self, p: Pending) {
        if self.shutting_down {
            p.fail(
                FetchErrorKind::Shutdown,
                "crawler shut down before this fetch was sent",
                &self.exits,
            );
            return;
        }
        self.queues.push_front(p);
    }

    pub(super) fn check_drained(&mut self) {
        if self.shutting_down && self.in_flight.is_idle() {
            for tx in self.drained.drain(..) {
                let _ = tx.send(());
            }
        }
    }
}
