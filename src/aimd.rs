//! The adaptive rate controller: finds a site's capacity and stays just under it.
//!
//! Plain AIMD (add a little on success, halve on a 429) saws between ½C and C and averages
//! about 75 % of a site's capacity C. This controller aims at the equilibrium instead, the
//! way TCP CUBIC does for a link:
//!
//! 1. **Slow start.** From `initial_rps` the rate doubles every `max(doubling, 2 × srtt)`
//!    until the first throttle (or until latency says the site is filling up).
//! 2. **Capacity estimate.** On the first throttle the rate at that moment overshoots (the
//!    site's burst hid the limit for a while), so the estimate `w_max` is what the site
//!    *accepted* over the last second, kept between half and all of the rate at the throttle.
//! 3. **Hold.** A throttle without `Retry-After` pauses the key for a short hold
//!    (`max(srtt, 2 intervals)`, at most `hold`), so the requests already on their way don't
//!    all hit the wall; `Retry-After` is a floor: no send before it expires.
//! 4. **Gentle probe.** After a decrease to `decrease × w_max` the rate follows CUBIC's curve
//!    `w_max + w_max·(1−β)·(t/K − 1)³`: quickly back towards `w_max`, flat near it, then a slowly
//!    accelerating probe above it. `K` is long enough that a probe cycle spans at least
//!    `probe_requests` requests, so the few throttles that end each cycle stay under 1 %.
//!    A floor of `increase_rps` per second (the additive increase) keeps growth going when
//!    `w_max` is tiny.
//! 5. **At most one decrease per round trip.** Responses to requests sent before the last
//!    decrease carry no news (they were sent at the old rate), so they cannot cut the rate
//!    again: the "in-flight lag" of a naïve feedback loop.
//! 6. **Latency as an early warning.** A short RTT average above `latency_tolerance ×` the
//!    baseline (a slowly forgetting minimum, like Netflix's Gradient2) counts as a throttle
//!    without the hold; above half that margin the rate stops growing; in slow start it ends
//!    slow start at the current rate.
//!
//! The controller is pure: feed it [`Response`]s with `now` and it returns an [`Adjustment`]
//! when the interval or the pause changed; a [`crate::pacer::Pacer`] carries that out.

use std::time::{Duration, Instant};

use crate::headers::Pacing;
use crate::limiter::interval_of;

/// Tuning of the controller. [`AimdConfig::default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AimdConfig {
    /// Starting rate, requests/s (default 5).
    pub initial_rps: f64,
    /// Lowest rate the controller will go to (default 0.1).
    pub min_rps: f64,
    /// Highest rate (default 1000).
    pub max_rps: f64,
    /// Additive increase: the least the rate grows per second while probing (default 1).
    pub increase_rps: f64,
    /// Multiplicative decrease factor β in (0, 1) (default 0.9, as vector's controller).
    pub decrease: f64,
    /// RTT above this multiple of the baseline counts as overload (default 2.0).
    pub latency_tolerance: f64,
    /// Latency counts as a warning only when the smoothed RTT is also this much above the
    /// baseline (default 10 ms): on a LAN or loopback, sub-millisecond jitter makes ratios
    /// meaningless.
    pub latency_floor: Duration,
    /// Longest host-wide hold after a throttle without Retry-After (default 250 ms).
    pub hold: Duration,
    /// Shortest slow-start doubling time (default 100 ms).
    pub doubling: Duration,
    /// Shortest probe cycle `K` (default 2 s).
    pub probe_time: Duration,
    /// A probe cycle spans at least this many requests at `w_max` (default 300).
    pub probe_requests: f64,
}

impl Default for AimdConfig {
    fn default() -> Self {
        Self {
            initial_rps: 5.0,
            min_rps: 0.1,
            max_rps: 1000.0,
            increase_rps: 1.0,
            decrease: 0.9,
            latency_tolerance: 2.0,
            latency_floor: Duration::from_millis(10),
            hold: Duration::from_millis(250),
            doubling: Duration::from_millis(100),
            probe_time: Duration::from_secs(2),
            probe_requests: 300.0,
        }
    }
}

/// What one response says about the site's load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Signal {
    /// The site served the request.
    Success,
    /// The site asked us to slow down (429, 503, or a timeout/reset counted as such).
    Throttle {
        /// The site's `Retry-After`, if it sent one.
        retry_after: Option<Duration>,
    },
    /// A failure that says nothing about load (404, a local connect error, …): ignored.
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

/// Successes per time slice over the last second: what the site accepted just now.
#[derive(Debug, Clone)]
struct RateMeter {
    slices: [u32; Self::SLICES],
    /// Index of the slice that `head_start` begins.
    head: usize,
    head_start: Instant,
}

impl RateMeter {
    const SLICES: usize = 10;
    const SLICE: Duration = Duration::from_millis(100);

    fn new(now: Instant) -> Self {
        Self {
            slices: [0; Self::SLICES],
            head: 0,
            head_start: now,
        }
    }

    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.head_start);
        let steps = (elapsed.as_nanos() / Self::SLICE.as_nanos()) as usize;
        if steps == 0 {
            return;
        }
        for i in 1..=steps.min(Self::SLICES) {
            self.slices[(self.head + i) % Self::SLICES] = 0;
        }
        self.head = (self.head + steps) % Self::SLICES;
        self.head_start += Self::SLICE * steps as u32;
    }

    fn record(&mut self, now: Instant) {
        self.roll(now);
        self.slices[self.head] = self.slices[self.head].saturating_add(1);
    }

    /// Count over the last second and the span it covers.
    fn count(&mut self, now: Instant) -> (u32, Duration) {
        self.roll(now);
        let span = Self::SLICE * (Self::SLICES as u32 - 1)
            + now.saturating_duration_since(self.head_start);
        (self.slices.iter().sum(), span)
    }
}

/// Why the rate is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// The site said so; `hold`: without a Retry-After, so we pause briefly ourselves.
    Throttle { hold: bool },
    /// Answers are getting slower: a queue is forming at the site.
    Latency,
}

/// The adaptive controller for one limiter key.
#[derive(Debug, Clone)]
pub struct Controller {
    cfg: AimdConfig,
    rate: f64,
    phase: Phase,
    /// Slow start: when it began and from which rate.
    ss_start: Instant,
    ss_rate: f64,
    /// Probe: the capacity estimate, when the cycle began, and its length K in seconds.
    w_max: f64,
    epoch: Instant,
    k: f64,
    last_eval: Instant,
    last_decrease: Option<Instant>,
    pause_until: Option<Instant>,
    /// Announced by the site (RateLimit headers): a ceiling, until it expires.
    hint_cap: Option<(f64, Instant)>,
    /// The last Retry-After the site sent (zero if none).
    last_retry_after: Duration,
    srtt: Option<f64>,
    baseline: Option<f64>,
    /// Set by a latency-triggered decrease, cleared when latency is back to normal: a
    /// queue at the site takes a while to drain, and every answer until then is still slow.
    latency_latched: Option<f64>,
    accepted: RateMeter,
    broadcast_rps: f64,
    decreases: u64,
}

impl Controller {
    /// Longest probe cycle, seconds.
    const MAX_K: f64 = 30.0;

    /// A controller in slow start at `cfg.initial_rps` (clamped into `[min_rps, max_rps]`).
    pub fn new(cfg: AimdConfig, now: Instant) -> Self {
        let rate = cfg.initial_rps.clamp(cfg.min_rps, cfg.max_rps);
        Self {
            rate,
            phase: Phase::SlowStart,
            ss_start: now,
            ss_rate: rate,
            w_max: rate,
            epoch: now,
            k: cfg.probe_time.as_secs_f64(),
            last_eval: now,
            last_decrease: None,
            pause_until: None,
            hint_cap: None,
            last_retry_after: Duration::ZERO,
            srtt: None,
            baseline: None,
            latency_latched: None,
            accepted: RateMeter::new(now),
            broadcast_rps: rate,
            decreases: 0,
            cfg,
        }
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

    /// How many times the rate was cut.
    pub fn decreases(&self) -> u64 {
        self.decreases
    }

    /// The smoothed round-trip time, if any response was seen.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_secs_f64)
    }

    /// Feed one response; returns the change to carry out, if any.
    pub fn on_response(&mut self, r: &Response, now: Instant) -> Option<Adjustment> {
        let pause_before = self.pause_until;
        // A response to a request sent before the last decrease was sent at the old rate:
        // it carries no news about the new one.
        let fresh = self.last_decrease.is_none_or(|d| r.sent_at >= d);
        match r.signal {
            Signal::Neutral => {}
            Signal::Success => {
                self.accepted.record(now);
                self.observe_rtt(r.latency, now);
                if !self.latency_rising() {
                    self.latency_latched = None;
                }
                // After a latency cut, cut again only if answers to requests sent since
                // then are no faster: the queue is not draining at the lower rate.
                let worse = self
                    .latency_latched
                    .is_none_or(|at| self.srtt.unwrap_or(0.0) >= at);
                if fresh && worse && self.latency_overloaded() {
                    self.latency_latched = self.srtt;
                    self.decrease(now, Cause::Latency);
                } else {
                    self.grow(now, r.limited);
                }
            }
            Signal::Throttle { retry_after } => {
                if let Some(ra) = retry_after {
                    self.extend_pause(now + ra);
                    self.last_retry_after = ra.min(Duration::from_secs(Self::MAX_K as u64));
                }
                if fresh {
                    let cause = Cause::Throttle {
                        hold: retry_after.is_none(),
                    };
                    self.decrease(now, cause);
                }
            }
        }
        self.adjustment(now, pause_before)
    }

    /// Apply a pacing hint announced by the site (see [`crate::headers`]): a pause when its
    /// quota is used up, and a ceiling on the rate until the quota resets.
    pub fn on_hint(&mut self, hint: &Pacing, now: Instant) -> Option<Adjustment> {
        let pause_before = self.pause_until;
        if let Some(p) = hint.pause_for {
            if p > Duration::ZERO {
                self.extend_pause(now + p);
            }
        }
        let cap = match (hint.max_rps, hint.min_interval) {
            (Some(r), Some(i)) => Some(r.min(1.0 / i.as_secs_f64().max(1e-9))),
            (Some(r), None) => Some(r),
            (None, Some(i)) => Some(1.0 / i.as_secs_f64().max(1e-9)),
            (None, None) => None,
        };
        if let Some(cap) = cap.filter(|c| c.is_finite() && *c > 0.0) {
            // Hints are repeated on every response; one that is not renewed lapses.
            let lifetime = hint
                .pause_for
                .unwrap_or(Duration::ZERO)
                .max(Duration::from_secs(60));
            self.hint_cap = Some((cap.max(self.cfg.min_rps), now + lifetime));
            self.rate = self.clamp(self.rate, now);
        }
        self.adjustment(now, pause_before)
    }

    /// Take the rate another crawler process decided for this key (distributed mode): a
    /// lower one is a throttle seen elsewhere, a higher one growth seen elsewhere. The
    /// probe curve restarts flat at the adopted rate, and a lower rate counts as this
    /// key's last decrease (answers to requests sent before it cannot cut again).
    pub fn adopt(&mut self, rps: f64, now: Instant) -> Option<Adjustment> {
        let pause_before = self.pause_until;
        let r = self.clamp(rps, now);
        if r < self.rate {
            self.last_decrease = Some(now);
        }
        self.enter_probe(r, now, true);
        self.rate = r;
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
        rate.clamp(self.cfg.min_rps, max.max(self.cfg.min_rps))
    }

    fn observe_rtt(&mut self, latency: Duration, now: Instant) {
        let sample = latency.as_secs_f64();
        self.srtt = Some(match self.srtt {
            None => sample,
            Some(s) => s + (sample - s) / 8.0,
        });
        // The baseline is a minimum that forgets slowly (time constant ~30 s), so a site
        // that became permanently slower is accepted as its new normal eventually.
        let dt = now.saturating_duration_since(self.last_eval).as_secs_f64();
        self.baseline = Some(match self.baseline {
            None => sample,
            Some(b) if sample < b => sample,
            Some(b) => b + (sample - b) * (dt / 30.0).min(1.0),
        });
    }

    fn latency_ratio(&self) -> f64 {
        match (self.srtt, self.baseline) {
            (Some(s), Some(b)) if b > 0.0 && s - b > self.cfg.latency_floor.as_secs_f64() => s / b,
            _ => 1.0,
        }
    }

    fn latency_overloaded(&self) -> bool {
        self.latency_ratio() > self.cfg.latency_tolerance
    }

    fn latency_rising(&self) -> bool {
        self.latency_ratio() > 1.0 + (self.cfg.latency_tolerance - 1.0) / 2.0
    }

    fn doubling_time(&self) -> f64 {
        self.cfg
            .doubling
            .as_secs_f64()
            .max(2.0 * self.srtt.unwrap_or(0.0))
    }

    fn grow(&mut self, now: Instant, limited: bool) {
        let dt = now.saturating_duration_since(self.last_eval);
        self.last_eval = now;
        let frozen = self.latency_rising() || !limited;
        match self.phase {
            Phase::SlowStart => {
                if self.latency_rising() {
                    // A queue is building at the site: we are about at its capacity, or
                    // (slow start overshoots) past it.
                    let w_max = self.accepted_estimate(now);
                    self.enter_probe(w_max, now, true);
                    self.rate = self.clamp(w_max, now);
                    return;
                }
                if frozen {
                    self.ss_start += dt;
                    return;
                }
                let doubling = self.doubling_time();
                let t = now.saturating_duration_since(self.ss_start).as_secs_f64();
                self.rate = self.clamp(self.ss_rate * (t / doubling).exp2(), now);
            }
            Phase::Probe => {
                if frozen {
                    // Stop the cycle's clock, so growth resumes where it paused.
                    self.epoch += dt;
                    return;
                }
                let beta = self.cfg.decrease;
                let t = now.saturating_duration_since(self.epoch).as_secs_f64();
                let cubic = self.w_max + self.w_max * (1.0 - beta) * (t / self.k - 1.0).powi(3);
                // Past the plateau, probe at least linearly: the cubic alone would take
                // minutes to find new room when w_max is tiny. Before it, the curve alone
                // rules, so a cycle always lasts K.
                let additive = if t > self.k {
                    self.w_max + self.cfg.increase_rps * (t - self.k)
                } else {
                    0.0
                };
                self.rate = self.clamp(cubic.max(additive), now);
            }
        }
    }

    fn enter_probe(&mut self, w_max: f64, now: Instant, at_plateau: bool) {
        self.phase = Phase::Probe;
        self.w_max = w_max.max(self.cfg.min_rps);
        // K: long enough for `probe_requests` requests per cycle, so that the one or two
        // throttles ending a cycle stay a small fraction; capped so a tiny w_max recovers.
        // A site that answers throttles with Retry-After makes every probe's end cost that
        // pause: stretch the cycle to 20 pauses so the pauses cost about 5 %.
        let floor = self
            .cfg
            .probe_time
            .as_secs_f64()
            .max(20.0 * self.last_retry_after.as_secs_f64());
        self.k = (self.cfg.probe_requests / self.w_max).clamp(floor, floor.max(Self::MAX_K));
        // At the plateau: start the curve at t = K, where it is flat at w_max.
        self.epoch = if at_plateau {
            now.checked_sub(Duration::from_secs_f64(self.k))
                .unwrap_or(now)
        } else {
            now
        };
        self.last_eval = now;
    }

    /// What the site accepted over the last second, kept between half and all of the
    /// current rate: slow start overshoots (a site's burst hides its limit for a while),
    /// so the rate reached says less than what actually got through.
    fn accepted_estimate(&mut self, now: Instant) -> f64 {
        let (n, span) = self.accepted.count(now);
        let accepted = n as f64 / span.as_secs_f64().max(1e-3);
        accepted.clamp(self.rate / 2.0, self.rate)
    }

    fn decrease(&mut self, now: Instant, cause: Cause) {
        let at_throttle = self.rate;
        let w_max = match self.phase {
            Phase::SlowStart => self.accepted_estimate(now),
            Phase::Probe if cause != Cause::Latency && at_throttle < self.w_max => {
                // Throttled below the last estimate: the capacity dropped (or the last
                // estimate was high). CUBIC's fast convergence: release more room. Not for
                // latency, whose signal comes early, at the capacity rather than above it.
                at_throttle * (1.0 + self.cfg.decrease) / 2.0
            }
            Phase::Probe => at_throttle,
        };
        self.enter_probe(w_max, now, false);
        // Latency warns before the wall: a gentler cut (half of β's) is enough to drain
        // the queue that is forming.
        let beta = match cause {
            Cause::Latency => (1.0 + self.cfg.decrease) / 2.0,
            Cause::Throttle { .. } => self.cfg.decrease,
        };
        self.rate = self.clamp(beta * self.w_max, now);
        self.last_decrease = Some(now);
        self.decreases += 1;
        if cause == (Cause::Throttle { hold: true }) {
            let srtt = self.srtt.map_or(Duration::ZERO, Duration::from_secs_f64);
            let h = srtt.max(2 * self.interval()).min(self.cfg.hold);
            self.extend_pause(now + h);
        }
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
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};

    const MS: Duration = Duration::from_millis(1);

    fn ok(sent_at: Instant) -> Response {
        Response {
            sent_at,
            latency: 50 * MS,
            signal: Signal::Success,
            limited: true,
        }
    }

    fn throttled(sent_at: Instant, retry_after: Option<Duration>) -> Response {
        Response {
            sent_at,
            latency: 50 * MS,
            signal: Signal::Throttle { retry_after },
            limited: true,
        }
    }

    #[test]
    fn slow_start_doubles_per_doubling_time() {
        let c = FakeClock::new();
        let cfg = AimdConfig {
            doubling: Duration::from_millis(250),
            ..AimdConfig::default()
        };
        let mut ctl = Controller::new(cfg, c.now());
        for _ in 0..100 {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now() - 50 * MS), c.now());
        }
        // 1 s at a 250 ms doubling time: 5 → 80.
        assert!((ctl.rate() - 80.0).abs() < 1.0, "rate {}", ctl.rate());
        assert_eq!(ctl.phase(), Phase::SlowStart);
    }

    #[test]
    fn one_decrease_per_round_trip() {
        let c = FakeClock::new();
        let mut ctl = Controller::new(AimdConfig::default(), c.now());
        for _ in 0..100 {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now() - 50 * MS), c.now());
        }
        let sent_before = c.now() - 50 * MS;
        let adj = ctl.on_response(&throttled(sent_before, None), c.now());
        assert!(adj.is_some());
        assert_eq!(ctl.decreases(), 1);
        let after_first = ctl.rate();
        // 99 more 429s for requests sent before the decrease: no further cut.
        for _ in 0..99 {
            c.advance(MS / 2);
            ctl.on_response(&throttled(sent_before, None), c.now());
        }
        assert_eq!(ctl.decreases(), 1);
        assert_eq!(ctl.rate(), after_first);
        // A 429 for a request sent after the decrease is news.
        c.advance(MS);
        ctl.on_response(&throttled(c.now(), None), c.now());
        assert_eq!(ctl.decreases(), 2);
        assert!(ctl.rate() < after_first);
    }

    #[test]
    fn throttle_holds_the_key_and_retry_after_is_a_floor() {
        let c = FakeClock::new();
        let mut ctl = Controller::new(AimdConfig::default(), c.now());
        c.advance(MS);
        let adj = ctl.on_response(&throttled(c.now(), None), c.now()).unwrap();
        let hold = adj.pause_until.unwrap() - c.now();
        assert!(hold > Duration::ZERO && hold <= 250 * MS, "hold {hold:?}");
        c.advance(MS);
        let adj = ctl
            .on_response(
                &throttled(c.now() - MS, Some(Duration::from_secs(7))),
                c.now(),
            )
            .unwrap();
        assert_eq!(adj.pause_until, Some(c.now() + Duration::from_secs(7)));
        // A later, shorter Retry-After does not shorten it.
        ctl.on_response(&throttled(c.now(), Some(Duration::from_secs(1))), c.now());
        assert_eq!(
            ctl.pause_until(c.now()),
            Some(c.now() + Duration::from_secs(7))
        );
    }

    #[test]
    fn rate_stays_within_bounds() {
        let c = FakeClock::new();
        let cfg = AimdConfig {
            min_rps: 2.0,
            max_rps: 20.0,
            ..AimdConfig::default()
        };
        let mut ctl = Controller::new(cfg, c.now());
        for _ in 0..1000 {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now()), c.now());
        }
        assert_eq!(ctl.rate(), 20.0);
        for _ in 0..100 {
            c.advance(10 * MS);
            ctl.on_response(&throttled(c.now(), None), c.now());
        }
        assert_eq!(ctl.rate(), 2.0);
    }

    #[test]
    fn announced_limits_cap_the_rate_and_pause_when_used_up() {
        let c = FakeClock::new();
        let mut ctl = Controller::new(AimdConfig::default(), c.now());
        for _ in 0..200 {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now()), c.now());
        }
        assert!(ctl.rate() > 100.0);
        let hint = Pacing {
            pause_for: None,
            min_interval: Some(100 * MS),
            max_rps: None,
        };
        let adj = ctl.on_hint(&hint, c.now()).unwrap();
        assert!((adj.rps - 10.0).abs() < 1e-9);
        let hint = Pacing {
            pause_for: Some(Duration::from_secs(3)),
            min_interval: None,
            max_rps: None,
        };
        let adj = ctl.on_hint(&hint, c.now()).unwrap();
        assert_eq!(adj.pause_until, Some(c.now() + Duration::from_secs(3)));
    }

    #[test]
    fn rising_latency_ends_slow_start_and_overload_cuts_the_rate() {
        let c = FakeClock::new();
        let mut ctl = Controller::new(AimdConfig::default(), c.now());
        for _ in 0..50 {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now()), c.now());
        }
        let before = ctl.rate();
        for _ in 0..30 {
            c.advance(10 * MS);
            let r = Response {
                sent_at: c.now(),
                latency: 80 * MS,
                signal: Signal::Success,
                limited: true,
            };
            ctl.on_response(&r, c.now());
        }
        // Slow start ends near what the site accepted (answers arrive at 100/s here),
        // without counting a cut.
        assert_eq!(ctl.phase(), Phase::Probe);
        assert!(
            ctl.rate() >= 50.0 && ctl.rate() <= before.max(100.0) * 1.01,
            "{} vs {before}",
            ctl.rate()
        );
        assert_eq!(ctl.decreases(), 0);
        for _ in 0..30 {
            c.advance(10 * MS);
            let r = Response {
                sent_at: c.now(),
                latency: 200 * MS,
                signal: Signal::Success,
                limited: true,
            };
            ctl.on_response(&r, c.now());
        }
        assert!(ctl.decreases() >= 1);
    }

    #[test]
    fn an_adopted_rate_applies_and_blocks_a_second_cut_for_older_requests() {
        let c = FakeClock::new();
        let mut ctl = Controller::new(AimdConfig::default(), c.now());
        for _ in 0..100 {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now()), c.now());
        }
        let sent_before = c.now();
        c.advance(MS);
        let adj = ctl.adopt(20.0, c.now()).expect("a change");
        assert_eq!(adj.rps, 20.0);
        assert_eq!(ctl.phase(), Phase::Probe);
        // A 429 for a request sent before the adopted cut is old news.
        ctl.on_response(&throttled(sent_before, None), c.now());
        assert_eq!(ctl.decreases(), 0);
        assert_eq!(ctl.rate(), 20.0);
        assert_eq!(
            ctl.adopt(20.1, c.now()),
            None,
            "within 1 %: nothing to broadcast"
        );
    }

    #[test]
    fn neutral_responses_change_nothing() {
        let c = FakeClock::new();
        let mut ctl = Controller::new(AimdConfig::default(), c.now());
        let r = Response {
            sent_at: c.now(),
            latency: MS,
            signal: Signal::Neutral,
            limited: true,
        };
        c.advance(MS);
        assert_eq!(ctl.on_response(&r, c.now()), None);
        assert_eq!(ctl.rate(), 5.0);
    }
}
