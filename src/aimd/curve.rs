//! The rate's curve: slow start's growth, the cubic probe cycle and its pricing, and the
//! cut a throttle, a queue or errors bring.

use std::time::{Duration, Instant};

use super::{Cause, Controller, Phase};

impl Controller {
    pub(super) fn doubling_time(&self) -> f64 {
        // Growth is earned by answers, as TCP's slow start grows per acknowledgement: at
        // most a doubling per request at the current rate. Time alone would quadruple a
        // 5 req/s rate between two answers 200 ms apart, and a small host's overshoot
        // would be refused twice where once tells as much.
        let answers = if self.ramp_by_answers {
            Self::SS_ANSWERS
        } else {
            1.0
        };
        let per_answers = answers / self.rate;
        self.cfg
            .doubling
            .as_secs_f64()
            .max(self.ss_rtts * self.srtt.unwrap_or(0.0))
            .max(per_answers)
    }

    pub(super) fn grow(&mut self, now: Instant, limited: bool) {
        let dt = now.saturating_duration_since(self.last_eval);
        self.last_eval = now;
        let frozen = self.latency.rising() || !limited || self.lockout.active();
        match self.phase {
            Phase::SlowStart => {
                if frozen || self.holds_for_price(dt) {
                    return;
                }
                // Growth since the last answer, at the doubling time of now: a longer
                // round trip slows the doubling from here on, it does not undo it.
                let doubling = self.doubling_time();
                let mut grown = self.rate * (dt.as_secs_f64() / doubling).exp2();
                if !self.may_probe() {
                    grown = grown.min(self.cfg.initial_rps.max(self.rate));
                }
                self.rate = self.clamp(grown, now);
            }
            Phase::Probe => {
                if frozen {
                    // Stop the cycle's clock, so growth resumes where it paused.
                    self.epoch += dt;
                    return;
                }
                let beta = self.cfg.decrease;
                let t = now.saturating_duration_since(self.epoch).as_secs_f64();
                if self.rate >= 1.5 * self.w_max {
                    // Half again above the estimate, and no throttle nor queue on the way:
                    // the estimate is stale (the site got faster, or slow start ended
                    // early). Find the new capacity the fast way — but more gently than
                    // the first time (a doubling per 8 round trips, not 2), as a queue or a
                    // limit may be right above and the signal comes a round trip late.
                    self.phase = Phase::SlowStart;
                    self.ss_rtts = 8.0;
                    return;
                }
                // Back to the estimate over K, which a pause may have stretched; above it
                // at the scale of an unpriced cycle, so that a capacity that came back is
                // found as fast as on a site whose throttles cost no pause.
                let scale = if t < self.k { self.k } else { self.k_above };
                let cubic = self.w_max + self.w_max * (1.0 - beta) * ((t - self.k) / scale).powi(3);
                // Past the plateau, probe at least linearly, by `increase_rps` per second
                // but never faster than the cubic's own scale (a tenth of w_max per K), so
                // a slow site is not probed every few dozen requests. Before the plateau
                // the curve alone rules, so a cycle always lasts K.
                let slope = self
                    .cfg
                    .increase_rps
                    .min((1.0 - beta) * self.w_max / self.k_above);
                let additive = if t > self.k {
                    self.w_max + slope * (t - self.k)
                } else {
                    0.0
                };
                let target = cubic.max(additive);
                self.rate = self.clamp(target, now);
                if self.rate < target {
                    // Held under a ceiling (a ban's, a hint's, `max_rps`): the cycle's
                    // clock stops, so that a ceiling raised or lifted lets the curve go
                    // on from where it was held, not from where it ran to meanwhile.
                    self.epoch += dt;
                }
            }
        }
    }

    /// Whether a host's first slow start may grow past `initial_rps`: above the configured
    /// start, slow start is a probe, and it ends in a throttle, which the site counts.
    /// A host is probed only once its work pays for that throttle at
    /// [`Controller::THROTTLE_SHARE`] of its requests: 50 requests waiting, or answered;
    /// 50 per throttle where the crawl's probes brought several (a limit per client
    /// address is overrun through every exit; see [`Controller::expect_probe_throttles`]).
    /// A broad crawl's small hosts (a few dozen pages each) are crawled at the start rate,
    /// and only those slower than it are throttled, where a ramp would throttle every
    /// host once. Where the work waiting is not known (the last answer's
    /// [`Response::backlog`](super::Response::backlog) is `None`), or once the host was
    /// cut, slow start is not held.
    fn may_probe(&self) -> bool {
        let budget = self.probe_throttles / Self::THROTTLE_SHARE;
        let Some(backlog) = self.backlog.filter(|_| self.decreases == 0) else {
            return true;
        };
        f64::from(backlog) >= budget || self.answers as f64 >= budget
    }

    /// Whether a host's first slow start holds its rate for the pause its overshoot would
    /// bring (see [`Controller::expect_pause`]): the work waiting is done at this rate
    /// before that pause would end, and holding has not yet cost as long as the pause.
    /// `dt` is the time since the last answer, spent held. Not a slow start resumed
    /// because the estimate went stale: the host took more than its estimate, and what
    /// waits for it then is what the sender's window holds, not what the host has left.
    fn holds_for_price(&mut self, dt: Duration) -> bool {
        let pause = self.expected_pause.as_secs_f64();
        let Some(backlog) = self.backlog.filter(|_| self.decreases == 0) else {
            return false;
        };
        if pause <= 0.0 || self.held_for_price >= pause || f64::from(backlog) >= self.rate * pause {
            return false;
        }
        self.held_for_price += dt.as_secs_f64();
        true
    }

    /// The shortest way back to the estimate that keeps the pauses probes bring at
    /// [`Controller::PAUSE_SHARE`] of the crawl, seconds.
    fn priced_k(&self) -> f64 {
        self.last_retry_after.as_secs_f64() / Self::PAUSE_SHARE
    }

    pub(super) fn enter_probe(&mut self, w_max: f64, now: Instant, at_plateau: bool) {
        self.phase = Phase::Probe;
        self.w_max = w_max.max(self.cfg.min_rps);
        // K: long enough for `probe_requests` requests per cycle, so that the one or two
        // throttles ending a cycle stay a small fraction at any rate.
        // A site that answers throttles with Retry-After makes every probe's end cost that
        // pause: stretch the cycle until the pause is PAUSE_SHARE of it (a probe of a
        // `Retry-After: 1` site every 33 s). Only the way back to the estimate stretches:
        // above it the curve keeps the scale of an unpriced cycle (`k_above`), since a
        // throttle there costs one pause however fast the rate rose, and a capacity that
        // came back must be found within seconds of the plateau, not a minute.
        let priced = self.priced_k();
        let floor = self.cfg.probe_time.as_secs_f64().max(priced);
        self.k = (self.cfg.probe_requests / self.w_max).clamp(floor, floor.max(Self::MAX_K));
        let unpriced = self.cfg.probe_time.as_secs_f64();
        self.k_above =
            (self.cfg.probe_requests / self.w_max).clamp(unpriced, unpriced.max(Self::MAX_K));
        // At the plateau: start the curve at t = K, where it is flat at w_max.
        self.epoch = if at_plateau {
            now.checked_sub(Duration::from_secs_f64(self.k))
                .unwrap_or(now)
        } else {
            now
        };
        self.last_eval = now;
    }

    /// Returns whether the new estimate is a guess (see `unproven_estimate`).
    pub(super) fn decrease(&mut self, now: Instant, cause: Cause) -> bool {
        self.first_cut.get_or_insert(now);
        let at_throttle = self.rate;
        let mut guess = false;
        let w_max = match self.phase {
            // What the site delivered is its capacity when a queue formed (as BBR's
            // bottleneck bandwidth), whatever the pacer allowed (the crawler's concurrency
            // may have held the rate far below it).
            Phase::Probe if matches!(cause, Cause::Latency(_)) => self.delivered(now),
            // What the site accepted when slow start overshot; with too few answers to
            // say anything, the rate it began at or, after a ramp by answers, the last
            // doubling before the throttle: a guess, checked as such below.
            Phase::SlowStart => match self.unproven_estimate(now) {
                Some(start) => {
                    guess = true;
                    start
                }
                // The best tenth before the refusal holds the burst, which the round
                // after the cut takes out (`refusals`). Where that round is too thin to
                // speak (answers within a millisecond) and each correction is a
                // `Retry-After` pause, cutting 10 % at a time from the burst's figure
                // costs a pause per cut: the estimate errs low instead. The first cut
                // only: a slow start resumed later grows gently, and its best tenth
                // holds little of the burst.
                None if self.decreases == 0
                    && cause == (Cause::Throttle { hold: false })
                    && !self.refusals.can_speak() =>
                {
                    self.halved_estimate(now)
                }
                // Under two thirds of the rate at the refusal, what was accepted is an
                // average over a steep ramp (several doublings within the second it
                // spans) as much as a burst's end: a lower bound, checked as a guess is.
                // Not where a throttle brings a pause: there each check costs one, and
                // the estimate errs low (see above).
                None => {
                    let accepted = self.accepted_estimate(now);
                    guess = cause == (Cause::Throttle { hold: true })
                        && accepted < at_throttle * 2.0 / 3.0;
                    accepted
                }
            },
            // The pause before this throttle withheld more than the span after it got
            // through, and the next will cost as much: halve, as TCP does at a loss,
            // rather than pay a pause per tenth (see `spans`).
            Phase::Probe
                if matches!(cause, Cause::Throttle { .. })
                    && at_throttle <= self.w_max
                    && self.spans.costly(at_throttle) =>
            {
                at_throttle / 2.0
            }
            Phase::Probe
                if matches!(cause, Cause::Throttle { .. }) && at_throttle <= self.w_max =>
            {
                // Throttled below the last estimate: the capacity dropped (or the last
                // estimate was high). CUBIC's fast convergence: release more room. Not for
                // latency, whose signal comes early, at the capacity rather than above it.
                at_throttle * (1.0 + self.cfg.decrease) / 2.0
            }
            Phase::Probe => at_throttle,
        };
        self.enter_probe(w_max, now, false);
        if guess {
            // A guess is checked within a short cycle, not one of `probe_requests`: the
            // way back to it still lasts the pause's price, and above it the curve soon
            // finds the estimate stale if the host takes more.
            let short = self.learning_cycle();
            self.k = self.k.min(short.max(self.priced_k()));
            self.k_above = short;
        }
        if matches!(cause, Cause::Latency(_)) && !self.refuses_before_queueing {
            // A server that queues pays for every probe above its capacity with a queue,
            // and the probe is seen only a round later: probe it four times as slowly
            // (CUBIC's growth above w_max scales with 1/K), so the queue a probe builds
            // before it is seen stays small. Not a site whose last throttle came while
            // its answers were quick: it limits a rate, so a probe above it costs a
            // refusal, priced as any probe's, and slower answers there are more likely
            // our own load or noise than a queue to be wary of.
            self.k *= Self::QUEUE_PROBE_STRETCH;
            self.k_above *= Self::QUEUE_PROBE_STRETCH;
        }
        // Errors warn before the wall: a gentler cut (half of β's) is enough. Latency cuts
        // by what it takes to drain the queue that formed (see `drain_factor`).
        let beta = match cause {
            Cause::Latency(factor) => factor,
            Cause::Errors => (1.0 + self.cfg.decrease) / 2.0,
            Cause::Throttle { .. } => self.cfg.decrease,
        };
        self.rate = self.clamp(beta * self.w_max, now);
        self.last_decrease = Some(now);
        self.decreases += 1;
        self.cuts += 1;
        self.ok_since_cut = false;
        if cause == (Cause::Throttle { hold: true }) {
            self.hold(now);
        }
        guess
    }

    /// A throttle without a Retry-After pauses the key a round trip (or two intervals),
    /// so that the requests already paced at the old rate are not all refused too.
    fn hold(&mut self, now: Instant) {
        let srtt = self.srtt.map_or(Duration::ZERO, Duration::from_secs_f64);
        let h = srtt.max(2 * self.interval()).min(self.cfg.hold);
        self.extend_pause(now + h);
    }

    /// Refused again with nothing accepted since the last throttle's cut: the site takes
    /// nothing at the moment (a restart, a blip, a window spent), which says nothing
    /// about its capacity, since a site that limits the rate lets its rate through.
    pub(super) fn in_refusal_run(&self) -> bool {
        self.phase == Phase::Probe && self.last_decrease.is_some() && !self.ok_since_cut
    }

    /// A throttle within a run of refusals: the rate still falls (the site is refusing,
    /// and each round trip of refusals costs it work), but the estimate stays where the
    /// run's first throttle put it and the cycle's clock stops, so the first success
    /// resumes the curve where the run began it. Cutting the estimate too would turn a
    /// few hundred milliseconds of refusals into a cycle of `probe_requests` at a
    /// fraction of the site's rate. A run that lasts is a lockout (see `lockout`).
    pub(super) fn cut_within_run(&mut self, now: Instant, hold: bool) {
        if let Some(last) = self.last_decrease {
            self.epoch += now.saturating_duration_since(last);
        }
        self.rate = self.clamp(self.cfg.decrease * self.rate, now);
        self.last_decrease = Some(now);
        self.decreases += 1;
        if hold {
            self.hold(now);
        }
    }
}
