//! The adaptive rate controller: finds a site's capacity and stays just under it.
//!
//! Plain AIMD (add a little on success, halve on a 429) saws between ½C and C and averages
//! about 75 % of a site's capacity C. This controller aims at the equilibrium instead, the
//! way TCP CUBIC does for a link:
//!
//! 1. **Slow start.** From `initial_rps` the rate doubles every `max(doubling, 2 × srtt)`,
//!    and at most once per request at the current rate, until the first throttle (or
//!    until latency says the site is filling up).
//! 2. **Capacity estimate.** On the first throttle the rate at that moment overshoots (the
//!    site's burst hid the limit for a while), so the estimate `w_max` is what the site
//!    *accepted* over the last second (the last ten on a slow site) — and once the round of
//!    requests already on their way is back, the share of it accepted, which the burst
//!    cannot inflate (`refusals.rs`). On a host too slow for a round to say anything, what
//!    got through between two throttles is its rate, whatever its burst (`between.rs`).
//!    While a thin host is learned, the token buckets that explain every answer so far
//!    bound the estimate from both sides (`fit.rs`), whatever a pause wasted; once they
//!    pin it within half again, it is held at their middle in a learned host's cycle. On
//!    a host answered too quickly for a round to exist, whose throttles carry a
//!    `Retry-After` (each correction a pause), slow start's first estimate is the last
//!    second's rate, at least half the rate at the throttle, not the best tenth, which
//!    holds the burst (`Controller::halved_estimate`); later, the pauses refill its
//!    bucket, and the spans from two pauses' ends to the next refusal give its refill
//!    (`spans.rs`); where a thin host's pause withheld more than the span after it got
//!    through, the next throttle halves the rate rather than cut a tenth, one pause per
//!    halving instead of one per tenth. A first throttle after fewer than eight answers
//!    in a second says nothing: the estimate is a guess, the rate the host started at (or,
//!    after a slow start from the host prior, which ramps by answers, its last doubling),
//!    held for the pause's price and then checked by a short cycle
//!    (`Controller::unproven_estimate`). So is a first estimate under two thirds of the
//!    rate at a throttle without `Retry-After`: the second it averages held several of
//!    slow start's doublings, and a check costs a held round trip.
//! 3. **Hold.** A throttle without `Retry-After` pauses the key for a short hold
//!    (`max(srtt, 2 intervals)`, at most `hold`), so the requests already on their way don't
//!    all hit the wall; `Retry-After` is a floor: no send before it expires.
//! 4. **Gentle probe.** After a decrease to `decrease × w_max` the rate follows CUBIC's curve
//!    `w_max + w_max·(1−β)·(t/K − 1)³`: quickly back towards `w_max`, flat near it, then a
//!    slowly accelerating probe above it. `K` is long enough that a cycle spans at least
//!    `probe_requests` requests *whatever the rate* (a 1 req/s site probes every five
//!    minutes, not every few dozen requests), so the throttles ending each cycle stay under
//!    1 %; and long enough that the pause a probe's throttle brings (a Retry-After) is at
//!    most 3 % of the cycle: a throttle's cost is its pause, not its count. A probe that
//!    gets half again above the estimate without a throttle or a queue means the estimate
//!    is stale (the site got faster): slow start resumes from there. Held under a
//!    ceiling, the curve's clock stops.
//! 5. **At most one decrease per round trip.** Responses to requests sent before the last
//!    decrease carry no news (they were sent at the old rate), so they cannot cut again.
//! 6. **Latency as an early warning** (`latency.rs`): the median of each round of answers
//!    against the median of quiet rounds, so ordinary variation and a heavy tail are not a
//!    queue. A rising round stops growth (and ends slow start); an overloaded one cuts
//!    gently, and cuts again only while rounds keep getting slower — the mark of a queue the
//!    crawler builds itself. Each such cut is on trial (`trial.rs`): undone if the first
//!    round sent once a queue of ours would have drained is no faster.
//! 7. **Errors are not throttles** (`errors.rs`): resets, timeouts and 5xx pages cut the rate
//!    only when they dominate the answers or rise well above their usual share, and only
//!    first attempts' errors count (a retry's is its broken page's, `classify::of_retry`).
//! 8. **Lockouts** (`lockout.rs`): when everything is refused for a while (a used-up quota,
//!    a penalty box answering 403), single probes at doubling intervals wait it out; a
//!    lockout the site did not explain is a ban and leaves a ceiling at half the rate
//!    that earned it, raised again step by step at a pace priced by the ban's length
//!    (an outage looks like a ban while it lasts).
//!
//! The controller is pure: feed it [`Response`]s with `now` and it returns an [`Adjustment`]
//! when the interval or the pause changed; a [`crate::pacer::Pacer`] carries that out.
//! [`coupling`] runs one per host and per exit and decides which one a throttle concerns,
//! and whether its Retry-After binds the exit that read it or the host (`binding.rs`);
//! [`classify`] says what an answer or a failure means.

mod adopt;
mod between;
mod binding;
pub mod classify;
mod config;
pub mod coupling;
mod curve;
mod errors;
mod estimate;
mod fit;
pub mod fleet;
pub mod forget;
mod guess;
mod hint;
mod latency;
mod lockout;
mod meter;
pub mod prior;
mod refusals;
mod spans;
mod trial;

use std::time::{Duration, Instant};

use crate::limiter::interval_of;

use between::Between;
pub use config::AimdConfig;
use errors::ErrorSignal;
use fit::BucketFit;
use guess::GuessCap;
use latency::{LatencySignal, Reading};
use lockout::Lockout;
use meter::Meter;
use refusals::Refusals;
use spans::PauseSpans;

/// What one response says about the site's load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Signal {
    /// The site served the request.
    Success,
    /// The site asked us to slow down (429, 503, a configured throttle status).
    Throttle {
        /// The site's `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },
    /// The site refused the request (403 and the like). One is a page's own answer; a run
    /// of them with no success between is a block, handled as a lockout.
    Refused,
    /// A failure that may be the page's own: a 5xx that is not a throttle status, a
    /// reset, a timeout. Counts only when such failures dominate or rise.
    Error,
    /// Says nothing about load (404, a local connect error, …): ignored.
    Neutral,
}

/// Feedback for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Response {
    /// When the request was sent.
    pub sent_at: Instant,
    /// Time from send to the response's head.
    pub latency: Duration,
    /// What the response means.
    pub signal: Signal,
    /// The request had to wait for the pacer: the sender wanted more than the current
    /// rate. Only such answers grow the rate (TCP's cwnd-limited rule): a crawler with
    /// few URLs must not build up a rate that was never tried against the site.
    pub limited: bool,
    /// Requests that were waiting for this key when this one was sent, if the sender
    /// knows: the work a faster rate would speed up, which slow start weighs against the
    /// pause its overshoot will bring (see [`Controller::expect_pause`]). `None`: unknown,
    /// taken as plenty.
    pub backlog: Option<u32>,
}

/// Which phase the controller is in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// Doubling until the first throttle.
    SlowStart,
    /// Following the cubic probe curve around the capacity estimate.
    Probe,
}

/// A change the sender must carry out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adjustment {
    /// The new rate, requests/s.
    pub rps: f64,
    /// The new interval between sends (1 / rps).
    pub interval: Duration,
    /// No send before this instant, if set.
    pub pause_until: Option<Instant>,
}

/// Why the rate is cut.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cause {
    /// The site said so; `hold`: without a Retry-After, so we pause briefly ourselves.
    Throttle { hold: bool },
    /// Answers are getting slower: a queue is forming at the site. The cut's factor.
    Latency(f64),
    /// Errors dominate or rose with the rate.
    Errors,
}

/// The adaptive controller for one limiter key.
#[derive(Debug, Clone)]
pub struct Controller {
    cfg: AimdConfig,
    rate: f64,
    phase: Phase,
    /// Slow start: how many round trips a doubling takes at least (2 at first, 8 when
    /// slow start resumes above an estimate).
    ss_rtts: f64,
    /// Probe: the capacity estimate, when the cycle began, and its length K in seconds.
    w_max: f64,
    epoch: Instant,
    k: f64,
    /// The cycle's scale above the estimate, seconds: K before a pause priced it.
    k_above: f64,
    last_eval: Instant,
    last_decrease: Option<Instant>,
    pause_until: Option<Instant>,
    /// Announced by the site (RateLimit headers): a ceiling, until it expires.
    hint_cap: Option<(f64, Instant)>,
    /// When the site last announced a pause (a used-up quota) in its headers.
    hinted_pause: Option<Instant>,
    /// What the last Retry-After cost, priced as a pause of the whole key: the pause
    /// times the share of the key's rate it stopped (zero if none).
    last_retry_after: Duration,
    /// A Retry-After pauses this key (the default), or only the exit that read it, which
    /// the caller pauses (see [`Controller::bind_retry_after`]).
    retry_after_pauses_key: bool,
    /// The share of this key's rate a Retry-After pause stops.
    retry_after_share: f64,
    /// What refusals say about the rate, the burst aside.
    refusals: Refusals,
    /// What got through since an earlier throttle, the burst aside.
    between: Between,
    /// What the spans after two pauses say, the burst aside.
    spans: PauseSpans,
    /// The token buckets that explain the first answers, while a host is learned.
    fit: Option<Box<BucketFit>>,
    /// The fastest refill the fit allows, while it speaks.
    fit_ceiling: Option<f64>,
    srtt: Option<f64>,
    latency: LatencySignal,
    /// The round median that led to the last latency cut, while rounds stay elevated.
    latency_cut_at: Option<f64>,
    /// After a latency cut, until a round sent after it is judged: what to restore if
    /// the cut did not bring latency down (then it was not a queue of ours).
    latency_trial: Option<trial::Trial>,
    errors: ErrorSignal,
    lockout: Lockout,
    created: Instant,
    /// Successes over the last second and the last ten.
    accepted: Meter,
    accepted_long: Meter,
    broadcast_rps: f64,
    decreases: u64,
    /// The cuts that were news, the ones a run of refusals adds aside: the bucket fit
    /// listens through a host's first [`Controller::LEARNING`] of them. A thin host met
    /// far above its rate without `Retry-After` refuses most requests in short runs, and
    /// counting their cuts would stop the fit before it had pinned the rate.
    cuts: u64,
    /// A success came since the last cut: a throttle now starts a new run of refusals
    /// (see [`Controller::cut_within_run`]).
    ok_since_cut: bool,
    /// Answers that said something (not neutral).
    answers: u64,
    /// The last throttle came while latency was quiet: the site limits a rate, and a
    /// probe above it costs a refusal, not a queue.
    refuses_before_queueing: bool,
    /// Started from the host prior below `initial_rps`: slow start doubles per answers,
    /// not only per time (see `doubling_time`).
    ramp_by_answers: bool,
    /// Where slow start began: `initial_rps`, or the host prior.
    start_rps: f64,
    /// The pause a throttle is expected to bring before this key has been throttled:
    /// what the crawl's other hosts sent (see [`Controller::expect_pause`]).
    expected_pause: Duration,
    /// Set by a throttle whose `Retry-After` paused the key and left a guess for an
    /// estimate: what checking the guess would risk (see `clamp`). `None` once a throttle
    /// left an estimate the answers showed.
    guess_cap: Option<GuessCap>,
    /// The last answer's [`Response::backlog`].
    backlog: Option<u32>,
    /// Seconds slow start was held for the pause's price while the sender wanted more.
    held_for_price: f64,
    /// The throttles a probe past `initial_rps` is expected to bring: what the crawl's
    /// other hosts' first overshoots brought (see [`Controller::expect_probe_throttles`]).
    probe_throttles: f64,
    /// When the rate was first cut.
    first_cut: Option<Instant>,
    /// Throttles of requests sent before the first cut: what the first overshoot cost.
    overshoot: u32,
}

impl Controller {
    /// Longest probe cycle, seconds: a cycle of `probe_requests` at 0.5 req/s.
    const MAX_K: f64 = 600.0;
    /// How much longer a probe cycle is after a latency cut (see `decrease`).
    const QUEUE_PROBE_STRETCH: f64 = 4.0;
    /// The share of the time the pauses that probes bring may cost: a probe ends in a
    /// throttle, and a throttle with a Retry-After of P stops the key for P, so a cycle
    /// lasts at least P / PAUSE_SHARE (a `Retry-After: 1` site is probed every 33 s; one
    /// without, whose holds last a round trip, as often as `probe_requests` allows).
    const PAUSE_SHARE: f64 = 0.03;
    /// The share of a host's requests that its first probe, slow start's ramp past
    /// `initial_rps`, may cost in refusals (see `may_probe`).
    const THROTTLE_SHARE: f64 = 0.02;
    /// The throttles (counted after their cut) during which a host is being learned: what
    /// got through between them may correct slow start's estimate (see [`between`]).
    const LEARNING: u64 = 3;
    /// A slow start from the host prior doubles at most once per this many answers.
    pub const SS_ANSWERS: f64 = 4.0;

    /// A controller in slow start at `cfg.initial_rps` (clamped into `[min_rps, max_rps]`).
    pub fn new(cfg: AimdConfig, now: Instant) -> Self {
        let rate = cfg.initial_rps.clamp(cfg.min_rps, cfg.max_rps);
        Self {
            rate,
            phase: Phase::SlowStart,
            ss_rtts: 2.0,
            w_max: rate,
            epoch: now,
            k: cfg.probe_time.as_secs_f64(),
            k_above: cfg.probe_time.as_secs_f64(),
            last_eval: now,
            last_decrease: None,
            pause_until: None,
            hint_cap: None,
            hinted_pause: None,
            last_retry_after: Duration::ZERO,
            retry_after_pauses_key: true,
            retry_after_share: 1.0,
            refusals: Refusals::default(),
            between: Between::default(),
            spans: PauseSpans::default(),
            fit: Some(Box::default()),
            fit_ceiling: None,
            srtt: None,
            latency: LatencySignal::new(cfg.latency_tolerance, cfg.latency_floor),
            latency_cut_at: None,
            latency_trial: None,
            errors: ErrorSignal::default(),
            lockout: Lockout::default(),
            created: now,
            accepted: Meter::new(Duration::from_millis(100), now),
            accepted_long: Meter::new(Duration::from_secs(1), now),
            broadcast_rps: rate,
            decreases: 0,
            cuts: 0,
            ok_since_cut: true,
            answers: 0,
            refuses_before_queueing: false,
            ramp_by_answers: false,
            start_rps: rate,
            expected_pause: Duration::ZERO,
            guess_cap: None,
            backlog: None,
            held_for_price: 0.0,
            probe_throttles: 1.0,
            first_cut: None,
            overshoot: 0,
            cfg,
        }
    }

    /// Where the next throttle's Retry-After binds: `pauses_key`, this key (the default);
    /// otherwise only the exit that read it, which the caller pauses while this key goes
    /// on at its cut rate. `share` is the part of this key's rate that pause stops (1.0
    /// for the whole key): a probe cycle is priced by it, so that the pauses probes bring
    /// stay the same share of the crawl whichever way they bind (see `coupling`).
    pub fn bind_retry_after(&mut self, pauses_key: bool, share: f64) {
        self.retry_after_pauses_key = pauses_key;
        self.retry_after_share = share.clamp(0.0, 1.0);
    }

    /// The next refusal continues the run of refusals the last cut began, whatever
    /// answers came back since to requests sent before that cut: it answers a request
    /// another exit sent before the cut was in force, while a pause bound to one exit is
    /// judged (`binding.rs` counts those apart, for the same reason). It is the old
    /// rate's answer, not news about the cut one: it cuts the rate, not the estimate.
    /// Cut as a new throttle each, the other exits' refusals after one pause took the
    /// estimate down by a cut apiece, and a site that pauses every client fell to two
    /// thirds of its rate for ten seconds after each such pause.
    pub fn continue_run(&mut self) {
        self.ok_since_cut = false;
    }

    /// Still learning the key: before its first cut, or before as many answers as the
    /// bucket fit listens to. Its rate is a guess until then; a thin host (a few requests
    /// a second, a few dozen pages) is learning for most of its crawl, and a pause of it
    /// costs a request or two anyway.
    pub fn learning(&self) -> bool {
        self.decreases == 0 || self.answers < fit::BucketFit::EVENTS as u64
    }

    /// The current rate, requests/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The current interval between sends.
    pub fn interval(&self) -> Duration {
        interval_of(self.rate)
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The pause in force at `now`, if any.
    pub fn pause_until(&self, now: Instant) -> Option<Instant> {
        self.pause_until.filter(|p| *p > now)
    }

    /// The capacity estimate (meaningful once out of slow start).
    pub fn capacity_estimate(&self) -> f64 {
        self.w_max
    }

    /// The pause the last `Retry-After` brought, as a pause of the whole key (zero if
    /// none came).
    pub fn last_pause(&self) -> Duration {
        self.last_retry_after
    }

    /// How many times the rate was cut.
    pub fn decreases(&self) -> u64 {
        self.decreases
    }

    /// The smoothed round-trip time, if any response was seen.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_secs_f64)
    }

    /// The median latency of quiet rounds: the site's latency when nothing queues.
    pub fn latency_base(&self) -> Option<Duration> {
        self.latency.base().map(Duration::from_secs_f64)
    }

    /// Share of recent answers that were errors (not throttles).
    pub fn error_share(&self) -> f64 {
        self.errors.share()
    }

    /// Waiting out a lockout (everything refused) now.
    pub fn locked_out(&self) -> bool {
        self.lockout.active()
    }

    /// Lockouts the site did not explain (bans) so far.
    pub fn bans(&self) -> u32 {
        self.lockout.bans()
    }

    /// The ceiling bans have left on the rate, if any.
    pub fn ceiling(&self) -> Option<f64> {
        self.lockout.ceiling()
    }

    /// Feed one response; returns the change to carry out, if any.
    pub fn on_response(&mut self, r: &Response, now: Instant) -> Option<Adjustment> {
        self.on_answer(0, r, now)
    }

    /// [`Controller::on_response`] for an answer through exit `exit` of those the key is
    /// reached through, which the bucket fit tells apart (see `fit`).
    pub(super) fn on_answer(
        &mut self,
        exit: usize,
        r: &Response,
        now: Instant,
    ) -> Option<Adjustment> {
        let pause_before = self.pause_until;
        // A response to a request sent before the last decrease was sent at the old rate:
        // it carries no news about the new one.
        let fresh = self.last_decrease.is_none_or(|d| r.sent_at >= d);
        if r.signal != Signal::Neutral {
            self.answers += 1;
        }
        self.backlog = r.backlog;
        let accepted_long = &mut self.accepted_long;
        let created = self.created;
        self.lockout
            .step(now, || accepted_long.rate(now, created).0);
        match r.signal {
            Signal::Neutral => {}
            Signal::Success => self.on_success(r, exit, fresh, now),
            Signal::Error => {
                self.errors.observe(true);
                if fresh && !self.lockout.active() && self.errors.overloaded() {
                    self.errors.cut();
                    self.decrease(now, Cause::Errors);
                }
            }
            Signal::Throttle { retry_after } => {
                self.errors.observe(false);
                if self.first_cut.is_none_or(|c| r.sent_at < c) {
                    self.overshoot += 1;
                }
                self.fit_record(r, exit, false);
                let spanned = self.spans.refusal(r.sent_at);
                if let Some(ra) = retry_after {
                    if self.retry_after_pauses_key {
                        self.extend_pause(now + ra);
                        self.spans.paused(self.pause_until.unwrap_or(now + ra), ra);
                    }
                    // Priced up to a minute: a longer pause is a quota's window or a
                    // lockout, waited out as such, not a probe's cost.
                    self.last_retry_after = ra
                        .min(Duration::from_secs(60))
                        .mul_f64(self.retry_after_share);
                }
                let informed = retry_after.is_some()
                    || self
                        .hinted_pause
                        .is_some_and(|h| now.saturating_duration_since(h) < Duration::from_secs(1));
                self.on_refusal(r, now, informed);
                let news = fresh && !self.lockout.active();
                if news && self.in_refusal_run() {
                    self.cut_within_run(now, retry_after.is_none());
                } else if news {
                    // Slow start's first cut: the round of requests already on their way
                    // tells what the site takes, its burst aside (see `refusals`).
                    if self.phase == Phase::SlowStart {
                        self.refusals.cut(r.sent_at, now, self.rate);
                    }
                    // A site that refused while its answers were as quick as ever limits a
                    // rate: it refuses before it queues (see `decrease`).
                    self.refuses_before_queueing = !self.latency.rising();
                    let srtt = self.srtt.unwrap_or(0.0);
                    let since_last = self.between.throttle(r.sent_at, self.rate * srtt, srtt);
                    let guess = self.decrease(
                        now,
                        Cause::Throttle {
                            hold: retry_after.is_none(),
                        },
                    );
                    // A guess's check, if wrong, costs this pause again (see `clamp`).
                    self.guess_cap = retry_after
                        .filter(|_| guess && self.retry_after_pauses_key)
                        .zip(r.backlog)
                        .map(|(ra, backlog)| GuessCap::new(ra, backlog));
                    self.rate = self.clamp(self.rate, now);
                    // Learning a new host only: later, a throttle ends a probe, and a
                    // span a long pause wasted would keep lowering a right estimate.
                    if let Some(est) = since_last.filter(|_| self.decreases <= Self::LEARNING) {
                        self.lower_between(est, now);
                    }
                    self.fit_estimate(now);
                } else {
                    self.between.answer(r.sent_at, false, r.limited);
                    if let Some(est) = self.refusals.answer(r.sent_at, false, r.limited) {
                        self.lower_estimate(est, now);
                    }
                }
                if let Some(est) = spanned {
                    self.lower_estimate(est, now);
                }
            }
            Signal::Refused => self.on_refusal(r, now, false),
        }
        self.adjustment(now, pause_before)
    }

    fn on_success(&mut self, r: &Response, exit: usize, fresh: bool, now: Instant) {
        self.ok_since_cut = true;
        self.fit_record(r, exit, true);
        self.accepted.record(now);
        self.accepted_long.record(now);
        self.between.answer(r.sent_at, true, r.limited);
        self.spans.success(r.sent_at, r.limited);
        if let Some(est) = self.refusals.answer(r.sent_at, true, r.limited) {
            self.lower_estimate(est, now);
        }
        self.errors.observe(false);
        let sample = r.latency.as_secs_f64();
        let srtt = match self.srtt {
            None => sample,
            Some(s) => s + (sample - s) / 8.0,
        };
        self.srtt = Some(srtt);
        if let Some(end) = self.lockout.succeeded(now) {
            self.resume(end, now);
        }
        let learn = !r.limited || self.phase == Phase::SlowStart || self.rate <= 0.95 * self.w_max;
        if let Some(round) = self.latency.observe(r.latency, r.sent_at, srtt, learn, now) {
            if self.judge_trial(&round, now) {
                self.grow(now, r.limited);
                return;
            }
            match round.reading {
                Reading::Quiet => self.latency_cut_at = None,
                // Requests that do not overlap at the site cannot queue behind each
                // other: a slower round there is the site's noise or other clients' load.
                _ if !self.may_queue(&round) => {}
                Reading::Rising if self.phase == Phase::SlowStart => {
                    // A queue is building at the site: we are about at its capacity, or
                    // (slow start overshoots) past it. Settle at what the site delivers,
                    // a little below while the queue built by the overshoot drains.
                    let w_max = self.accepted_estimate(now);
                    self.enter_probe(w_max, now, true);
                    self.rate = self.clamp(w_max * self.drain_factor(round.median, 1.0), now);
                }
                Reading::Rising => {}
                Reading::Overloaded => {
                    let fresh_round = self.last_decrease.is_none_or(|d| round.first_sent >= d);
                    let growing = self
                        .latency_cut_at
                        .is_none_or(|m| self.latency.worse_than(&round, m));
                    let test = round.stuck && self.latency_trial.is_none();
                    if (fresh && fresh_round && growing) || test {
                        self.latency_cut(&round, now);
                    }
                }
            }
        }
        self.grow(now, r.limited);
    }

    /// Whether our requests overlap at the site, so that a queue of ours can form: by
    /// Little's law, the rate times the round's latency is how many of them are there at
    /// once. Under one, each request finds none of ours ahead of it (a 1 req/s host
    /// answering in 50 ms holds one a twentieth of the time), and a round of five slow
    /// answers is noise: cut for it, such a host would run at half its rate until a later
    /// round judged the cut.
    fn may_queue(&self, round: &latency::Round) -> bool {
        self.rate * round.median >= 1.0
    }

    /// A throttle or a refusal: part of a lockout?
    fn on_refusal(&mut self, r: &Response, now: Instant, informed: bool) {
        let srtt = self.srtt.unwrap_or(0.0);
        let (accepted, _) = self.accepted_long.rate(now, self.created);
        let wait = self
            .lockout
            .refused(r.sent_at, now, srtt, (self.rate, accepted), informed);
        if let Some(w) = wait {
            self.extend_pause(now + w);
            // At most one probe per wait: the pacer sends one request when the pause ends.
            let probe_rate = 1.0 / w.as_secs_f64();
            self.rate = self.rate.min(probe_rate).max(self.cfg.min_rps);
            self.last_decrease = Some(now);
        }
    }

    /// A lockout ended: resume at the rate before it, under the ceiling a ban left.
    fn resume(&mut self, end: lockout::Ended, now: Instant) {
        let w_max = end.ceiling.unwrap_or(end.rate);
        self.enter_probe(w_max, now, true);
        self.rate = self.clamp(w_max, now);
        self.last_decrease = Some(now);
    }

    /// The estimate no longer holds (an exit whose own limit it was got a budget of its
    /// own): find the capacity again from the current rate, by a gentle slow start.
    pub fn rediscover(&mut self, now: Instant) -> Option<Adjustment> {
        let pause_before = self.pause_until;
        self.phase = Phase::SlowStart;
        self.ss_rtts = 8.0;
        self.last_eval = now;
        self.adjustment(now, pause_before)
    }

    fn extend_pause(&mut self, until: Instant) {
        self.pause_until = Some(self.pause_until.map_or(until, |p| p.max(until)));
    }

    fn clamp(&self, rate: f64, now: Instant) -> f64 {
        let mut max = self.cfg.max_rps;
        if let Some((cap, until)) = self.hint_cap {
            if now < until {
                max = max.min(cap);
            }
        }
        if let Some(c) = self.lockout.ceiling() {
            max = max.min(c);
        }
        if let Some(c) = self.fit_ceiling {
            max = max.min(c);
        }
        // A guess whose check would risk a pause longer than the host's waiting work
        // takes at it: if wrong, that pause costs more than the work; if right, the check
        // saves less than the pause. So the work is paced to be done within one pause,
        // a rate that rises with the work waiting. The estimate (what the host prior
        // learns) stays the guess: this is a price, not a measure of the host.
        if let Some(cap) = &self.guess_cap {
            max = max.min(cap.rps(self.backlog));
        }
        rate.clamp(self.cfg.min_rps, max.max(self.cfg.min_rps))
    }

    fn adjustment(&mut self, now: Instant, pause_before: Option<Instant>) -> Option<Adjustment> {
        let pause = self.pause_until(now);
        let rate_moved = (self.rate - self.broadcast_rps).abs() > 0.01 * self.broadcast_rps;
        if !rate_moved && pause == pause_before.filter(|p| *p > now) {
            return None;
        }
        self.broadcast_rps = self.rate;
        Some(Adjustment {
            rps: self.rate,
            interval: self.interval(),
            pause_until: pause,
        })
    }
}

#[cfg(test)]
mod tests;
