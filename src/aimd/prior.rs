//! Where a new host starts: from what this crawl has learned about hosts so far.
//!
//! A broad crawl meets thousands of hosts with a few dozen pages each, and most of what a
//! throttle costs there is learning: a host that takes one request a second, met at the
//! configured `initial_rps` of five, refuses its third request, and every later throttle
//! is a `Retry-After` pause. The hosts already crawled say what the next one is likely to
//! take. [`HostPrior`] keeps the latest capacity estimate of the most recent hosts that
//! were throttled at least once, and starts a new host at a low quantile of them — never
//! above `initial_rps` (a new host may be the small one; slow start finds a fast host's
//! rate within a second) and never below `min_rps`.
//!
//! Why a low quantile and not the median: starting a fast host low costs a few doublings
//! of slow start, a fraction of a second; starting a slow host high costs a throttle and
//! its pause. Why only throttled hosts: a host that never throttled says how fast the
//! crawl sent, not how fast the host may be sent to.
//!
//! It also keeps the pause each of those hosts' last `Retry-After` brought: the median is
//! what a new host's first throttle is expected to cost (many sites send one fixed value,
//! one second or a minute, and a crawl meets many alike), which its slow start weighs
//! against the work it has waiting ([`Controller::expect_pause`](super::Controller::expect_pause)).
//!
//! And it keeps how many throttles each of those hosts' first overshoot brought (the
//! throttles of requests sent before its first cut): one for a host refused at its start
//! rate, one per exit for a host that limits each client address, since every exit's
//! budget is overrun. The median is what a new host's probe past `initial_rps` is
//! expected to cost, which its work must pay for before slow start may go there
//! ([`Controller::expect_probe_throttles`](super::Controller::expect_probe_throttles)).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::coupling::{HostPolicy, Lane};
use super::{AimdConfig, Controller, Phase};

/// The learned rates of recent hosts, the pauses their throttles brought, and the
/// throttles their first overshoots brought.
#[derive(Debug, Clone, Default)]
pub struct HostPrior {
    rates: Recent,
    /// Seconds of the pause each throttled host's last `Retry-After` brought (0: none),
    /// kept apart from `rates`: a throttle's pause is known at once, its estimate
    /// often a pause later.
    pauses: Recent,
    /// The throttles each throttled host's first overshoot brought.
    overshoots: Recent,
    /// Forgotten hosts' rates (see [`super::forget`]): where each starts when it comes
    /// back, a few dozen bytes a host where its controllers took kilobytes.
    returning: HashMap<Arc<str>, f64>,
}

/// A figure per host for the last [`HostPrior::HOSTS`] hosts learned.
#[derive(Debug, Clone, Default)]
struct Recent {
    values: HashMap<Arc<str>, f64>,
    /// Hosts in the order they were first learned, oldest first.
    order: VecDeque<Arc<str>>,
}

impl Recent {
    /// `host`'s figure is now `v`; a new host forgets the oldest once full.
    fn set(&mut self, host: &Arc<str>, v: f64) {
        if let Some(old) = self.values.get_mut(host) {
            *old = v;
            return;
        }
        if self.order.len() == HostPrior::HOSTS {
            if let Some(old) = self.order.pop_front() {
                self.values.remove(&old);
            }
        }
        self.values.insert(Arc::clone(host), v);
        self.order.push_back(Arc::clone(host));
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    /// The `q` quantile of the figures, once [`HostPrior::MIN_HOSTS`] hosts are known.
    fn quantile(&self, q: f64) -> Option<f64> {
        if self.len() < HostPrior::MIN_HOSTS {
            return None;
        }
        let mut v: Vec<f64> = self.values.values().copied().collect();
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        let (_, x, _) = v.select_nth_unstable_by(i, f64::total_cmp);
        Some(*x)
    }
}

impl HostPrior {
    /// Hosts it remembers: enough for a stable quantile, few enough to follow a crawl
    /// whose hosts change.
    pub const HOSTS: usize = 256;
    /// Hosts it must know before it says anything.
    pub const MIN_HOSTS: usize = 8;
    /// The quantile a new host starts at: nine hosts in ten so far took that rate.
    pub const QUANTILE: f64 = 0.1;

    /// A prior that knows nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// `host`'s capacity estimate is now `rps` (after a throttle cut its rate).
    pub fn learned(&mut self, host: &Arc<str>, rps: f64) {
        if rps.is_finite() && rps > 0.0 {
            self.rates.set(host, rps);
        }
    }

    /// The host lane's capacity estimate of `host`'s policy, to pass to
    /// [`HostPrior::observe`] after the policy took an answer.
    pub fn estimate(policy: &HostPolicy) -> Option<f64> {
        policy
            .controller(Lane::Host)
            .map(super::Controller::capacity_estimate)
    }

    /// `host`'s policy took an answer; `before` is [`HostPrior::estimate`] from before it.
    /// A cut host's estimate is learned when it moved, once a cut has put the host in
    /// probe: its slow start's rates say how fast the crawl ramped, not what the host takes.
    pub fn observe(&mut self, host: &Arc<str>, before: Option<f64>, policy: &HostPolicy) {
        if let Some(c) = policy.controller(Lane::Host) {
            let now = c.capacity_estimate();
            if before != Some(now) && c.decreases() > 0 && c.phase() == Phase::Probe {
                self.learned(host, now);
            }
            if c.decreases() > 0 {
                self.paused(host, c.last_pause());
                self.overshoots.set(host, f64::from(c.overshoot()));
            }
        }
    }

    /// `host` was throttled, and its last `Retry-After` brought a pause of `pause` (zero
    /// for none).
    pub fn paused(&mut self, host: &Arc<str>, pause: Duration) {
        self.pauses.set(host, pause.as_secs_f64());
    }

    /// The pause a new host's first throttle is expected to bring: the median of the
    /// throttled hosts' last `Retry-After` pauses; zero until it knows
    /// [`HostPrior::MIN_HOSTS`] of them.
    pub fn pause(&self) -> Duration {
        self.pauses
            .quantile(0.5)
            .map_or(Duration::ZERO, Duration::from_secs_f64)
    }

    /// The throttles a new host's probe past `initial_rps` is expected to bring: the
    /// median of the throttled hosts' first overshoots; one until it knows
    /// [`HostPrior::MIN_HOSTS`] of them.
    pub fn probe_throttles(&self) -> f64 {
        self.overshoots.quantile(0.5).map_or(1.0, |n| n.max(1.0))
    }

    /// How many hosts it knows.
    pub fn hosts(&self) -> usize {
        self.rates.len()
    }

    /// `host`'s controllers were forgotten; `rate`: what a cut taught them
    /// ([`super::forget::remembered_rate`]), where it starts again when under the crawl's
    /// start.
    pub fn forgot(&mut self, host: &Arc<str>, rate: Option<f64>) {
        match rate {
            Some(r) if r.is_finite() && r > 0.0 => {
                self.returning.insert(Arc::clone(host), r);
            }
            _ => {
                self.returning.remove(host);
            }
        }
    }

    /// `host` has controllers again: what was kept of it is theirs now.
    pub fn returned(&mut self, host: &str) {
        if !self.returning.is_empty() {
            self.returning.remove(host);
        }
    }

    /// Forgotten hosts that kept a rate.
    pub fn remembered(&self) -> usize {
        self.returning.len()
    }

    /// The rate `host` starts at: [`HostPrior::start`], or lower where the host was
    /// forgotten with a lower rate.
    pub fn start_for(&self, host: &str, initial_rps: f64, min_rps: f64) -> f64 {
        let start = self.start(initial_rps, min_rps);
        match self.returning.get(host) {
            Some(r) => r.clamp(min_rps.min(start), start),
            None => start,
        }
    }

    /// The rate a new host starts at: [`HostPrior::QUANTILE`] of the known hosts' rates,
    /// within `[min_rps, initial_rps]`; `initial_rps` until it knows
    /// [`HostPrior::MIN_HOSTS`].
    pub fn start(&self, initial_rps: f64, min_rps: f64) -> f64 {
        self.rates
            .quantile(Self::QUANTILE)
            .map_or(initial_rps, |q| {
                q.clamp(min_rps.min(initial_rps), initial_rps)
            })
    }
}

/// What a new host's controller takes from the prior.
impl Controller {
    /// A controller in slow start at `start_rps`, where the crawl's host prior
    /// ([`HostPrior`]) says a new host should start. Below `cfg.initial_rps`, the
    /// crawl has met hosts that slow: slow start doubles at most once per
    /// [`Controller::SS_ANSWERS`] answers, as a time-based doubling would multiply a rate
    /// of one request a second a hundredfold between two of its answers.
    pub fn from_prior(cfg: AimdConfig, start_rps: f64, now: Instant) -> Self {
        let ramp_by_answers = start_rps < cfg.initial_rps;
        let mut c = Self::new(cfg, now);
        c.rate = start_rps.clamp(c.cfg.min_rps, c.cfg.max_rps);
        c.w_max = c.rate;
        c.start_rps = c.rate;
        // Not told yet: whoever paces the key may have started it at another figure of
        // the prior (the scheduler reads it when it first sends, this controller at the
        // first answer, and a cut host in between moves it), so the first answer tells
        // the rate whatever it is.
        c.broadcast_rps = 0.0;
        c.ramp_by_answers = ramp_by_answers;
        c
    }

    /// The pause a throttle of this key is expected to bring until it brings one: the
    /// `Retry-After` the crawl's hosts send (see [`HostPrior::pause`]). Slow start
    /// ends in a throttle, so that pause is what ramping up costs, and a first slow start holds
    /// its rate while the work waiting would be done at it before the pause would end,
    /// and at most as long as the pause (ski rental: renting stops once the rent paid is
    /// the price of buying, so holding costs at most what one throttle would).
    pub fn expect_pause(&mut self, pause: Duration) {
        self.expected_pause = pause;
    }

    /// Expect a probe past `initial_rps` to bring `throttles` throttles before this key's
    /// own first overshoot says (see [`HostPrior::probe_throttles`]): one per exit
    /// where the site limits each client address, since each exit's budget is overrun.
    /// A host is probed only once its work pays for them (see `may_probe`).
    pub fn expect_probe_throttles(&mut self, throttles: f64) {
        self.probe_throttles = throttles.max(1.0);
    }

    /// Throttles of requests sent before the key's first cut: what its first overshoot
    /// cost (one, for a key refused at its start rate).
    pub fn overshoot(&self) -> u32 {
        self.overshoot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(i: usize) -> Arc<str> {
        Arc::from(format!("h{i}"))
    }

    #[test]
    fn a_forgotten_host_starts_again_at_its_own_rate_when_under_the_crawls() {
        let mut p = HostPrior::new();
        let (slow, fast, never) = (host(1), host(2), host(3));
        p.forgot(&slow, Some(0.8));
        p.forgot(&fast, Some(40.0));
        p.forgot(&never, None);
        assert_eq!(p.remembered(), 2, "a host never cut keeps nothing");
        assert_eq!(p.start_for(&slow, 5.0, 0.1), 0.8);
        assert_eq!(p.start_for(&fast, 5.0, 0.1), 5.0, "never above the start");
        assert_eq!(p.start_for(&never, 5.0, 0.1), 5.0);
        p.returned(&slow);
        assert_eq!(p.start_for(&slow, 5.0, 0.1), 5.0);
        assert_eq!(p.remembered(), 1);
    }

    #[test]
    fn a_crawl_of_slow_hosts_starts_new_ones_slow_and_never_above_the_configured_start() {
        let mut p = HostPrior::new();
        for i in 0..7 {
            p.learned(&host(i), 1.0);
        }
        assert_eq!(p.start(5.0, 0.1), 5.0, "seven hosts say nothing yet");
        p.learned(&host(7), 1.0);
        assert_eq!(p.start(5.0, 0.1), 1.0);
        // Mostly fast hosts, a quarter slow: the slow ones set the start.
        let mut p = HostPrior::new();
        for i in 0..100 {
            p.learned(&host(i), if i % 4 == 0 { 1.2 } else { 300.0 });
        }
        assert_eq!(p.start(5.0, 0.1), 1.2);
        // All fast: the configured start, not theirs.
        let mut p = HostPrior::new();
        for i in 0..10 {
            p.learned(&host(i), 300.0);
        }
        assert_eq!(p.start(5.0, 0.1), 5.0);
        // Never under min_rps.
        let mut p = HostPrior::new();
        for i in 0..10 {
            p.learned(&host(i), 0.01);
        }
        assert_eq!(p.start(5.0, 0.1), 0.1);
    }

    #[test]
    fn a_controller_started_from_the_prior_tells_its_rate_at_the_first_answer() {
        // The scheduler may pace the host at another figure of the prior (read at its
        // first send, before a cut elsewhere moved it): the first answer corrects it.
        let clock = crate::FakeClock::new();
        let now = crate::Clock::now(&clock);
        let mut ctl = Controller::from_prior(AimdConfig::default(), 1.0, now);
        let r = super::super::Response {
            sent_at: now,
            latency: Duration::from_millis(50),
            signal: super::super::Signal::Success,
            limited: true,
            backlog: None,
        };
        let told = ctl.on_response(&r, now + Duration::from_millis(50));
        assert!(
            told.is_some_and(|a| (a.rps - 1.0).abs() < 0.1),
            "the starting rate is told: {told:?}"
        );
    }

    #[test]
    fn a_new_host_expects_the_pause_most_throttled_hosts_brought() {
        let minute = Duration::from_secs(60);
        let mut p = HostPrior::new();
        for i in 0..7 {
            p.paused(&host(i), minute);
        }
        assert_eq!(p.pause(), Duration::ZERO, "seven hosts say nothing yet");
        p.paused(&host(7), minute);
        assert_eq!(p.pause(), minute);
        // More hosts whose throttles brought no pause than hosts that paused a minute.
        for i in 8..17 {
            p.paused(&host(i), Duration::ZERO);
        }
        assert_eq!(p.pause(), Duration::ZERO);
        // A host counts once, with its last pause.
        for i in 8..17 {
            p.paused(&host(i), minute);
        }
        assert_eq!(p.pause(), minute);
        assert_eq!(p.pauses.len(), 17);
    }

    #[test]
    fn a_new_host_expects_the_throttles_most_first_overshoots_brought() {
        let mut p = HostPrior::new();
        for i in 0..7 {
            p.overshoots.set(&host(i), 4.0);
        }
        assert_eq!(p.probe_throttles(), 1.0, "seven hosts say nothing yet");
        p.overshoots.set(&host(7), 4.0);
        assert_eq!(p.probe_throttles(), 4.0);
        // Mostly hosts refused once at their start rate.
        for i in 8..20 {
            p.overshoots.set(&host(i), 1.0);
        }
        assert_eq!(p.probe_throttles(), 1.0);
    }

    #[test]
    fn a_host_counts_once_and_old_hosts_are_forgotten() {
        let mut p = HostPrior::new();
        for _ in 0..20 {
            p.learned(&host(0), 1.0);
        }
        assert_eq!(p.hosts(), 1);
        assert_eq!(p.start(5.0, 0.1), 5.0);
        for i in 0..HostPrior::HOSTS + 50 {
            p.learned(&host(i + 1), if i < 50 { 1.0 } else { 3.0 });
        }
        assert_eq!(p.hosts(), HostPrior::HOSTS);
        assert_eq!(p.start(5.0, 0.1), 3.0, "the slow hosts were the oldest");
        p.learned(&host(0), f64::NAN);
        assert_eq!(p.hosts(), HostPrior::HOSTS);
    }
}
