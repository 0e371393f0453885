//! What the site takes: the controller's estimates of a host's capacity.
//!
//! Each estimator speaks where the others are weak: what was accepted over the last
//! second (slow start's overshoot), what a queue delivered (latency), the round after a
//! cut (`refusals`), what got through between throttles (`between`), the spans after two
//! pauses that refilled the bucket (`spans`), and the buckets that explain a thin host's
//! first answers (`fit`). Every one only ever moves the estimate within what it can know.

use std::time::Instant;

use super::fit::Bounds;
use super::{Controller, Phase, Response};

impl Controller {
    /// Requests a probe cycle spans after an estimate from what got through between
    /// throttles (see `lower_between`).
    pub(super) const LEARNED_CYCLE: f64 = 10.0;
    /// Answers in a second from which what got through says something besides the burst.
    const SECOND_SAYS: u32 = 8;
    /// The fit of a host's first answers speaks while its fastest refill gives at most
    /// this many tokens over the spread of their round trips: the site then saw any two
    /// requests a token apart in the order they were sent.
    pub(super) const FIT_TOKENS_PER_SHUFFLE: f64 = 1.0;
    /// The stricter bound where a bucket per exit explains the answers as well: at most
    /// this many tokens per round trip (see `fit_estimate`).
    pub(super) const FIT_TOKENS_PER_RTT: f64 = 0.5;
    /// A fit whose fastest refill is within this factor of its slowest has pinned the
    /// rate: the estimate goes no higher than the middle of the range.
    pub(super) const FIT_PINNED: f64 = 1.5;

    /// What the site accepted just now — over the last second, or the last ten on a site
    /// too slow for a second to say much — kept between half and all of the current
    /// rate: slow start overshoots (a site's burst hides its limit for a while), so the
    /// rate reached says less than what actually got through.
    pub(super) fn accepted_estimate(&mut self, now: Instant) -> f64 {
        let (short, n) = self.accepted.rate(now, self.created);
        let accepted = if n >= Self::SECOND_SAYS {
            // Slow start ramps within that second; the best of its last few tenths says
            // more about what the site takes now than their average.
            let (peak, m) = self.accepted.peak(3, now);
            if m >= Self::SECOND_SAYS {
                short.max(peak)
            } else {
                short
            }
        } else {
            self.accepted_long.rate(now, self.created).0
        };
        accepted.clamp(self.rate / 2.0, self.rate)
    }

    /// Slow start's first estimate where the round after the cut cannot take the burst
    /// out and each correction is a `Retry-After` pause (see `decrease`): the last
    /// second's rate, at least half the rate at the throttle, as TCP halves at slow
    /// start's first loss. Not the best of the last tenths: it holds the burst on top of
    /// the rate (a 200 req/s site with a burst of 20 reads as 400), and how much of it
    /// depends on where the tenths fall. A deep burst holds the refusal back past more
    /// than a doubling, and the estimate then errs low, which costs a climb back, not a
    /// pause per cut.
    pub(super) fn halved_estimate(&mut self, now: Instant) -> f64 {
        let (second, _) = self.accepted.rate(now, self.created);
        second.clamp(self.rate / 2.0, self.rate)
    }

    /// The estimate of a host's first cut when its slow start ends with fewer than eight
    /// answers in its last second: what got through that quickly is mostly the burst
    /// (three answers of a 5 req/s host with a burst of 2 read as 10 req/s), and the
    /// doublings since the start were never answered, so nothing shows the host takes
    /// more than where it began. A slow start from the host prior is the exception: it
    /// doubled once per [`Controller::SS_ANSWERS`] answers, so each doubling but the last
    /// was answered, and half the rate at the throttle (at least the start) is what it
    /// showed, as TCP halves at slow start's first loss. Held at its start instead, a
    /// 5 req/s host that the prior started at 1 req/s (a crawl with a tenth of its hosts
    /// that slow) would be crawled at 1 req/s for the pause's price. `None` when there are
    /// answers enough for [`Controller::accepted_estimate`], or when the host was cut
    /// before (a slow start resumed later starts from a rate the host was seen to take).
    pub(super) fn unproven_estimate(&mut self, now: Instant) -> Option<f64> {
        let (_, n) = self.accepted.rate(now, self.created);
        let start = self.start_rps.min(self.rate);
        (n < Self::SECOND_SAYS && self.decreases == 0).then(|| {
            if self.ramp_by_answers {
                (self.rate / 2.0).max(start)
            } else {
                start
            }
        })
    }

    /// A learning host's probe cycle, seconds: [`Controller::LEARNED_CYCLE`] requests at
    /// the estimate, at least `probe_time`.
    pub(super) fn learning_cycle(&self) -> f64 {
        self.cfg
            .probe_time
            .as_secs_f64()
            .max(Self::LEARNED_CYCLE / self.w_max)
    }

    /// The round after slow start's first refusal says the rate is `est` (see
    /// [`refusals`](super::refusals)): an estimate above it came from the burst, and so did
    /// the rate cut from it. Only ever lowers them.
    pub(super) fn lower_estimate(&mut self, est: f64, now: Instant) {
        // Off by more than a cut corrects: an estimate's noise around a right one must
        // not ratchet it down.
        if self.phase != Phase::Probe || !est.is_finite() || est >= self.cfg.decrease * self.w_max {
            return;
        }
        self.w_max = est.max(self.cfg.min_rps);
        let cut = self.clamp(self.cfg.decrease * self.w_max, now);
        if cut < self.rate {
            // The cycle starts again from the cut, its length following the estimate.
            self.enter_probe(self.w_max, now, false);
            self.rate = cut;
        }
    }

    /// What got through since the last throttle says the rate is `est` (see
    /// [`between`](super::between)).
    /// Lowered to it, the probe cycle spans [`Controller::LEARNED_CYCLE`] requests (at
    /// least `probe_time`), not priced by the pause nor stretched to `probe_requests`: a
    /// pause longer than the site's burst lasts wastes refill the span counted, so `est`
    /// may be low, and the cycle must find that out within a few requests, not in the
    /// minutes a slow host's cycle lasts.
    pub(super) fn lower_between(&mut self, est: f64, now: Instant) {
        let before = self.w_max;
        self.lower_estimate(est, now);
        if self.w_max < before {
            self.k = self.learning_cycle();
            self.k_above = self.k;
            self.epoch = now;
        }
    }

    /// The fit listens to a host's first
    /// [`BucketFit::EVENTS`](super::fit::BucketFit::EVENTS) answers, and speaks no more
    /// once it holds them: by then a thin host is learned and a fast one is the other
    /// estimators'.
    pub(super) fn fit_record(&mut self, r: &Response, exit: usize, ok: bool) {
        if let Some(f) = &mut self.fit {
            f.record(r.sent_at, exit, ok, r.latency);
            if !f.open() {
                self.fit = None;
                self.fit_ceiling = None;
            }
        }
    }

    /// While a thin host is learned: keep the estimate within the refills that explain
    /// every answer so far (see [`fit`](super::fit)), and the rate under the fastest of
    /// them, which would only be throttled. A fast host's first throttle comes after the
    /// fit stopped listening, and a host learned no longer needs it.
    pub(super) fn fit_estimate(&mut self, now: Instant) {
        let Some(fit) = self.fit.as_deref() else {
            return;
        };
        if self.cuts > Self::LEARNING {
            self.fit = None;
            self.fit_ceiling = None;
            return;
        }
        let hi = 2.0 * self.w_max.max(self.rate);
        let Some(Bounds { lo, hi, per_exit }) = fit.bounds(self.cfg.min_rps, hi) else {
            self.fit_ceiling = None;
            return;
        };
        // The fit takes the order requests were sent in for the order they arrived: true
        // while a token takes longer than the network can shuffle arrivals by, which the
        // spread of the round trips bounds. Where a bucket per exit explains the answers
        // as well, the limit may be per client address, which one bucket for the host
        // explains only while the exits take even turns: a turn that came round early (two
        // requests through one exit closer than its share's token, the host under its
        // rate) reads as a slow host, and a ceiling there holds a per-address site under
        // its rate. The fit then keeps to hosts whose tokens are two round trips apart.
        let silent = if per_exit {
            hi * self.srtt.unwrap_or(f64::INFINITY) > Self::FIT_TOKENS_PER_RTT
        } else {
            hi * fit.shuffle() > Self::FIT_TOKENS_PER_SHUFFLE
        };
        if silent {
            self.fit_ceiling = None;
            return;
        }
        self.fit_ceiling = Some(hi);
        let pinned = hi <= Self::FIT_PINNED * lo;
        let top = if pinned { (lo + hi) / 2.0 } else { hi };
        let w_max = self.w_max.clamp(lo, top);
        if pinned {
            // Known within half again, as well as a probe would tell: start flat at the
            // middle, in a learned host's cycle (`probe_requests`, at least the pause's
            // price). A cycle that checked it within seconds would add a throttle and
            // its pause per host.
            self.enter_probe(w_max, now, true);
            self.rate = self.clamp(w_max, now);
        } else if (w_max - self.w_max).abs() > 1e-9 {
            self.w_max = w_max;
            self.rate = self.clamp(self.cfg.decrease * w_max, now);
        }
    }

    /// How far to go below the site's rate to drain a queue whose answers take `median`
    /// instead of the quiet base: Gradient2's `base / current`, between one half and `most`.
    /// A queue that doubled the latency is gone within a few round trips at half the rate;
    /// one that barely shows needs only the gentle cut.
    pub(super) fn drain_factor(&self, median: f64, most: f64) -> f64 {
        match self.latency.base() {
            Some(b) if median > 0.0 => (b / median).clamp(0.5, most),
            _ => most,
        }
    }

    /// What a server with a queue delivered over the last half second: its capacity, as
    /// long as the queue stood that long (a longer span would reach back to before it
    /// formed and underestimate). Kept between half and all of the current rate.
    pub(super) fn delivered(&mut self, now: Instant) -> f64 {
        match self.accepted.rate_last(5, now, self.created) {
            (r, n) if n >= 16 => r.clamp(self.rate / 2.0, self.rate),
            _ => self.accepted_estimate(now),
        }
    }
}
