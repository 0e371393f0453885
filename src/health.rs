//! Per-exit health: healthy → ejected → probing → healthy, like Envoy outlier detection.
//!
//! # Why
//!
//! An egress IP can go bad (route down, NAT exhausted, blocked upstream). Sending to it
//! wastes requests and, worse, burns retries the *site* sees. So after
//! [`HealthPolicy::consecutive_failures`] connection-level failures in a row the exit is
//! **ejected** for a while; when that time is up it is **probing**; one success brings it
//! back (**recovered**), one failure ejects it again for longer.
//!
//! * **Consecutive, not a rate**: a single success proves the path works, so it resets the
//!   count; isolated errors on a busy exit never eject it.
//! * **Growing ejection** (`base × ejections`, capped at `max_ejection`): an exit that keeps
//!   failing its probes is tried less and less often, but never forgotten.
//! * **Jitter** (±`jitter` of the ejection time): exits that failed together (one upstream
//!   outage) do not all come back and probe at the same instant.
//! * **Decay**: the ejection count halves for every `max_ejection` the exit has spent
//!   healthy since it last recovered (or last decayed). A flapping exit keeps its long
//!   ejections; one that failed once last week starts again from `base`. Halving rather than
//!   resetting means a single lucky period does not wipe a long bad history.
//!
//! # Why a probing exit is available
//!
//! The only way to learn whether an exit works again is to send real traffic through it;
//! there is no side channel. So [`ExitHealth::is_available`] is `true` while probing and the
//! selector may give it requests. The damage is bounded: the first failure re-ejects it.
//! Callers that want a gentler probe can lower that exit's `max_concurrent` (e.g. to 1)
//! while [`ExitHealth::is_probing`] is true.
//!
//! # All exits down
//!
//! Ejection never checks the rest of the fleet, so it *can* eject the last available exit.
//! That is deliberate (sending through an exit known to be broken helps nobody), but it
//! must never be silent: after every transition the caller evaluates [`fleet_state`] and,
//! on [`FleetState::AllDown`], surfaces it as a state (log/metric/status), parks new
//! fetches until `next_probe` (when an exit becomes probing again), and fails them with a
//! "no healthy exit" error if none recovers within a bounded wait.
//!
//! Time is injected (`now: Instant`), randomness too ([`RandomSource`]); nothing here
//! sleeps or reads a clock. Ejected → probing happens when the caller calls
//! [`ExitHealth::poll`] (e.g. from a timer set to `until`).

use std::time::{Duration, Instant};

use crate::rng::RandomSource;

/// Thresholds and timings for [`ExitHealth`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthPolicy {
    /// Consecutive failures that eject a healthy exit (0 is treated as 1).
    pub consecutive_failures: u32,
    /// Ejection time for the first ejection; the n-th lasts `n × base_ejection`.
    pub base_ejection: Duration,
    /// Ceiling on any ejection, jitter included. Also the healthy period after which the
    /// ejection count halves.
    pub max_ejection: Duration,
    /// Relative jitter on each ejection time, in `[0, 1]` (0.1 = ±10 %). Values outside are
    /// clamped; NaN means no jitter.
    pub jitter: f64,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            consecutive_failures: 3,
            base_ejection: Duration::from_secs(30),
            max_ejection: Duration::from_secs(300),
            jitter: 0.1,
        }
    }
}

impl HealthPolicy {
    /// The ejection time for the `n`-th ejection (n ≥ 1) before jitter:
    /// `min(n × base, max)`.
    pub fn ejection_time(&self, n: u32) -> Duration {
        self.base_ejection
            .saturating_mul(n.max(1))
            .min(self.max_ejection)
    }

    fn jitter_fraction(&self) -> f64 {
        if self.jitter.is_nan() {
            0.0
        } else {
            self.jitter.clamp(0.0, 1.0)
        }
    }
}

/// Where an exit is in its health cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// Takes traffic.
    Healthy,
    /// Takes no traffic until `until`; then [`ExitHealth::poll`] moves it to `Probing`.
    Ejected {
        /// End of the ejection.
        until: Instant,
    },
    /// Takes traffic to prove itself: one success → `Healthy`, one failure → `Ejected`.
    Probing,
}

/// A state change worth telling the rest of the system about (log, metrics, scheduler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The exit was ejected (from healthy or from probing) until this instant.
    Ejected {
        /// End of the ejection.
        until: Instant,
    },
    /// The ejection ended; the exit is probing.
    Probing,
    /// A probe succeeded; the exit is healthy again.
    Recovered,
}

/// Health of one exit.
#[derive(Debug, Clone)]
pub struct ExitHealth {
    policy: HealthPolicy,
    state: HealthState,
    consecutive_failures: u32,
    ejections: u32,
    last_error: Option<String>,
    /// Start of the current healthy period used for decay (`None`: never ejected since the
    /// count was last zero, so there is nothing to decay).
    decay_anchor: Option<Instant>,
}

impl Default for ExitHealth {
    fn default() -> Self {
        Self::new(HealthPolicy::default())
    }
}

impl ExitHealth {
    /// A healthy exit with no history.
    pub fn new(policy: HealthPolicy) -> Self {
        Self {
            policy,
            state: HealthState::Healthy,
            consecutive_failures: 0,
            ejections: 0,
            last_error: None,
            decay_anchor: None,
        }
    }

    /// A request through this exit succeeded (at the connection level).
    ///
    /// Resets the consecutive-failure count. Probing → Healthy returns
    /// [`Transition::Recovered`]. While healthy, applies decay of the ejection count. A
    /// success while ejected (a request that was in flight at ejection) changes nothing
    /// but the failure count: the ejection stands until its probe.
    pub fn on_success(&mut self, now: Instant) -> Option<Transition> {
        self.consecutive_failures = 0;
        match self.state {
            HealthState::Probing => {
                self.state = HealthState::Healthy;
                self.decay_anchor = Some(now);
                Some(Transition::Recovered)
            }
            HealthState::Healthy => {
                self.decay(now);
                None
            }
            HealthState::Ejected { .. } => None,
        }
    }

    /// A request through this exit failed (could not connect, reset, timeout — not an HTTP
    /// status from the site). Records `error` as the last error.
    ///
    /// Healthy: after `consecutive_failures` in a row, ejects. Probing: ejects at once, for
    /// longer than last time. Ejected: recorded only (late results of in-flight requests
    /// do not extend the ejection).
    pub fn on_failure(
        &mut self,
        now: Instant,
        error: &str,
        rng: &mut impl RandomSource,
    ) -> Option<Transition> {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.last_error = Some(error.to_owned());
        match self.state {
            HealthState::Healthy => {
                if self.consecutive_failures >= self.policy.consecutive_failures.max(1) {
                    self.decay(now);
                    Some(self.eject(now, rng))
                } else {
                    None
                }
            }
            HealthState::Probing => Some(self.eject(now, rng)),
            HealthState::Ejected { .. } => None,
        }
    }

    /// The exit was found broken before any request (its source address cannot be bound
    /// at start): eject it now, as if it had failed `consecutive_failures` times, so it is
    /// retried after its ejection time like any other.
    pub fn fail_at_start(
        &mut self,
        now: Instant,
        error: &str,
        rng: &mut impl RandomSource,
    ) -> Option<Transition> {
        self.consecutive_failures = self.policy.consecutive_failures.max(1);
        self.last_error = Some(error.to_owned());
        match self.state {
            HealthState::Ejected { .. } => None,
            _ => Some(self.eject(now, rng)),
        }
    }

    /// Move an ejected exit whose time is up to probing. Call when the `until` timer fires
    /// (or before any decision that reads the state).
    pub fn poll(&mut self, now: Instant) -> Option<Transition> {
        match self.state {
            HealthState::Ejected { until } if now >= until => {
                self.state = HealthState::Probing;
                Some(Transition::Probing)
            }
            _ => None,
        }
    }

    /// Healthy or probing (see the module docs for why probing counts). Reflects the state
    /// as of the last call: [`poll`](Self::poll) first if time has passed.
    pub fn is_available(&self) -> bool {
        matches!(self.state, HealthState::Healthy | HealthState::Probing)
    }

    /// `true` while probing.
    pub fn is_probing(&self) -> bool {
        self.state == HealthState::Probing
    }

    /// The current state.
    pub fn state(&self) -> HealthState {
        self.state
    }

    /// The end of the current ejection, if ejected.
    pub fn ejected_until(&self) -> Option<Instant> {
        match self.state {
            HealthState::Ejected { until } => Some(until),
            _ => None,
        }
    }

    /// Failures since the last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Ejections counted toward the next ejection's length (after decay).
    pub fn ejections(&self) -> u32 {
        self.ejections
    }

    /// The most recent failure's error text.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The policy in force.
    pub fn policy(&self) -> &HealthPolicy {
        &self.policy
    }

    fn eject(&mut self, now: Instant, rng: &mut impl RandomSource) -> Transition {
        self.ejections = self.ejections.saturating_add(1);
        let base = self.policy.ejection_time(self.ejections);
        let max = self.policy.max_ejection;
        // Always draw, so a seeded run's sequence does not depend on the jitter setting.
        let factor = 1.0 + self.policy.jitter_fraction() * rng.next_signed();
        let d = Duration::try_from_secs_f64(base.as_secs_f64() * factor)
            .unwrap_or(max)
            .min(max);
        let until = now.checked_add(d).unwrap_or(now);
        self.state = HealthState::Ejected { until };
        self.decay_anchor = None;
        Transition::Ejected { until }
    }

    /// Halve the ejection count once per full `max_ejection` spent healthy.
    fn decay(&mut self, now: Instant) {
        let period = self.policy.max_ejection;
        let Some(anchor) = self.decay_anchor else {
            return;
        };
        if self.ejections == 0 || period.is_zero() {
            self.decay_anchor = None;
            return;
        }
        let elapsed = now.saturating_duration_since(anchor);
        let periods = elapsed.as_nanos() / period.as_nanos();
        if periods == 0 {
            return;
        }
        self.ejections = if periods >= 32 {
            0
        } else {
            self.ejections >> periods
        };
        // Keep the remainder of the current period; `periods < 32` here if it matters.
        self.decay_anchor = if self.ejections == 0 {
            None
        } else {
            Some(anchor + period * periods as u32)
        };
    }
}

/// The fleet as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetState {
    /// At least one exit is healthy or probing.
    Available {
        /// Exits that are healthy or probing.
        available: usize,
        /// All exits.
        total: usize,
    },
    /// No exit can take traffic. The caller must surface this (see the module docs) and
    /// fail fetches with "no healthy exit" after a bounded wait.
    AllDown {
        /// When the first ejection ends (an exit can be probed again); `None` if there are
        /// no exits at all.
        next_probe: Option<Instant>,
    },
}

impl FleetState {
    /// `true` for [`FleetState::AllDown`].
    pub fn is_all_down(&self) -> bool {
        matches!(self, FleetState::AllDown { .. })
    }
}

/// Summarise the fleet. Call after every transition so that losing the last available exit
/// is always noticed.
pub fn fleet_state(exits: &[ExitHealth]) -> FleetState {
    let available = exits.iter().filter(|e| e.is_available()).count();
    if available > 0 {
        FleetState::Available {
            available,
            total: exits.len(),
        }
    } else {
        FleetState::AllDown {
            next_probe: exits.iter().filter_map(ExitHealth::ejected_until).min(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use crate::rng::{NoJitter, SplitMix64};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn fail_n(h: &mut ExitHealth, clock: &FakeClock, n: u32) -> Option<Transition> {
        let mut last = None;
        for i in 0..n {
            last = h.on_failure(clock.now(), &format!("connect refused #{i}"), &mut NoJitter);
        }
        last
    }

    #[test]
    fn defaults() {
        let p = HealthPolicy::default();
        assert_eq!(p.consecutive_failures, 3);
        assert_eq!(p.base_ejection, secs(30));
        assert_eq!(p.max_ejection, secs(300));
        assert_eq!(p.jitter, 0.1);
        let h = ExitHealth::default();
        assert_eq!(h.state(), HealthState::Healthy);
        assert!(h.is_available());
        assert_eq!(h.last_error(), None);
        assert_eq!(h.ejections(), 0);
    }

    #[test]
    fn full_cycle_healthy_ejected_probing_healthy() {
        let clock = FakeClock::new();
        let t0 = clock.now();
        let mut h = ExitHealth::default();

        assert_eq!(h.on_failure(t0, "timeout", &mut NoJitter), None);
        assert_eq!(h.on_failure(t0, "timeout", &mut NoJitter), None);
        assert!(h.is_available());
        let t = h.on_failure(t0, "connection refused", &mut NoJitter);
        assert_eq!(
            t,
            Some(Transition::Ejected {
                until: t0 + secs(30)
            })
        );
        assert_eq!(
            h.state(),
            HealthState::Ejected {
                until: t0 + secs(30)
            }
        );
        assert!(!h.is_available());
        assert_eq!(h.consecutive_failures(), 3);
        assert_eq!(h.ejections(), 1);
        assert_eq!(h.last_error(), Some("connection refused"));

        // Not yet.
        clock.advance(secs(29));
        assert_eq!(h.poll(clock.now()), None);
        // A late result of an in-flight request changes nothing.
        assert_eq!(h.on_success(clock.now()), None);
        assert_eq!(h.on_failure(clock.now(), "late", &mut NoJitter), None);
        assert_eq!(h.ejected_until(), Some(t0 + secs(30)));

        clock.advance(secs(1));
        assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
        assert_eq!(h.state(), HealthState::Probing);
        assert!(h.is_available() && h.is_probing());
        assert_eq!(h.poll(clock.now()), None);

        assert_eq!(h.on_success(clock.now()), Some(Transition::Recovered));
        assert_eq!(h.state(), HealthState::Healthy);
        assert_eq!(h.consecutive_failures(), 0);
        assert_eq!(h.on_success(clock.now()), None);
    }

    #[test]
    fn success_resets_consecutive_failures() {
        let clock = FakeClock::new();
        let mut h = ExitHealth::default();
        assert_eq!(fail_n(&mut h, &clock, 2), None);
        h.on_success(clock.now());
        assert_eq!(fail_n(&mut h, &clock, 2), None);
        assert_eq!(h.state(), HealthState::Healthy);
        assert!(matches!(
            fail_n(&mut h, &clock, 1),
            Some(Transition::Ejected { .. })
        ));
    }

    #[test]
    fn probe_failure_reejects_longer_up_to_cap() {
        let clock = FakeClock::new();
        let mut h = ExitHealth::default();
        fail_n(&mut h, &clock, 3);
        let mut seen = vec![];
        for _ in 0..12 {
            let until = h.ejected_until().unwrap();
            seen.push((until - clock.now()).as_secs());
            clock.advance_to(until);
            assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
            // One failure while probing is enough.
            let t = h.on_failure(clock.now(), "still down", &mut NoJitter);
            assert!(matches!(t, Some(Transition::Ejected { .. })));
        }
        assert_eq!(
            seen,
            [30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300]
        );
        assert_eq!(h.ejections(), 13);
    }

    #[test]
    fn consecutive_failures_zero_means_one() {
        let clock = FakeClock::new();
        let mut h = ExitHealth::new(HealthPolicy {
            consecutive_failures: 0,
            ..HealthPolicy::default()
        });
        assert!(matches!(
            fail_n(&mut h, &clock, 1),
            Some(Transition::Ejected { .. })
        ));
    }

    #[test]
    fn jitter_stays_within_bounds_and_varies() {
        let clock = FakeClock::new();
        let policy = HealthPolicy::default();
        let mut rng = SplitMix64::new(7);
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for n in 1..=12u32 {
            for _ in 0..200 {
                let mut h = ExitHealth::new(policy);
                // Build up n-1 prior ejections via failed probes.
                for _ in 0..policy.consecutive_failures {
                    h.on_failure(clock.now(), "x", &mut rng);
                }
                for _ in 1..n {
                    clock.advance_to(h.ejected_until().unwrap());
                    h.poll(clock.now());
                    h.on_failure(clock.now(), "x", &mut rng);
                }
                let d = h.ejected_until().unwrap() - clock.now();
                let nominal = policy.ejection_time(n);
                assert!(d >= nominal.mul_f64(0.9), "n={n} d={d:?}");
                assert!(d <= nominal.mul_f64(1.1), "n={n} d={d:?}");
                assert!(d <= policy.max_ejection, "cap includes jitter: {d:?}");
                if n == 1 {
                    lo = lo.min(d);
                    hi = hi.max(d);
                }
            }
        }
        // 200 draws spread over most of ±10 % of 30 s.
        assert!(lo < secs(28) && hi > secs(32), "lo={lo:?} hi={hi:?}");
    }

    #[test]
    fn out_of_range_jitter_is_clamped() {
        let clock = FakeClock::new();
        for jitter in [f64::NAN, -1.0, 0.0] {
            let mut h = ExitHealth::new(HealthPolicy {
                jitter,
                ..HealthPolicy::default()
            });
            for _ in 0..3 {
                h.on_failure(clock.now(), "x", &mut SplitMix64::new(1));
            }
            assert_eq!(h.ejected_until(), Some(clock.now() + secs(30)), "{jitter}");
        }
        let mut rng = SplitMix64::new(3);
        for _ in 0..100 {
            let mut h = ExitHealth::new(HealthPolicy {
                jitter: 5.0,
                consecutive_failures: 1,
                ..HealthPolicy::default()
            });
            h.on_failure(clock.now(), "x", &mut rng);
            let d = h.ejected_until().unwrap() - clock.now();
            assert!(d <= secs(60));
        }
    }

    #[test]
    fn ejection_count_halves_per_healthy_period() {
        let clock = FakeClock::new();
        let mut h = ExitHealth::default();
        fail_n(&mut h, &clock, 3);
        for _ in 0..3 {
            clock.advance_to(h.ejected_until().unwrap());
            h.poll(clock.now());
            h.on_failure(clock.now(), "x", &mut NoJitter);
        }
        assert_eq!(h.ejections(), 4);
        clock.advance_to(h.ejected_until().unwrap());
        h.poll(clock.now());
        assert_eq!(h.on_success(clock.now()), Some(Transition::Recovered));

        // Healthy but less than one period: no decay.
        clock.advance(secs(299));
        h.on_success(clock.now());
        assert_eq!(h.ejections(), 4);
        // One full period: halved.
        clock.advance(secs(1));
        h.on_success(clock.now());
        assert_eq!(h.ejections(), 2);
        // Two more periods in one step: halved twice.
        clock.advance(secs(600));
        h.on_success(clock.now());
        assert_eq!(h.ejections(), 0);

        // Back to base ejection.
        let t = fail_n(&mut h, &clock, 3);
        assert_eq!(
            t,
            Some(Transition::Ejected {
                until: clock.now() + secs(30)
            })
        );
    }

    #[test]
    fn decay_applies_at_ejection_time_too() {
        let clock = FakeClock::new();
        let mut h = ExitHealth::default();
        fail_n(&mut h, &clock, 3);
        clock.advance_to(h.ejected_until().unwrap());
        h.poll(clock.now());
        h.on_failure(clock.now(), "x", &mut NoJitter); // ejections = 2
        clock.advance_to(h.ejected_until().unwrap());
        h.poll(clock.now());
        h.on_success(clock.now());
        // Quiet for a long time (no successes recorded), then fails.
        clock.advance(secs(300));
        let t = fail_n(&mut h, &clock, 3);
        // 2 halved to 1, then +1 = 2 → 60 s.
        assert_eq!(
            t,
            Some(Transition::Ejected {
                until: clock.now() + secs(60)
            })
        );
    }

    #[test]
    fn fleet_reports_all_down_with_next_probe() {
        let clock = FakeClock::new();
        let t0 = clock.now();
        let mut fleet: Vec<ExitHealth> = (0..3).map(|_| ExitHealth::default()).collect();
        assert_eq!(
            fleet_state(&fleet),
            FleetState::Available {
                available: 3,
                total: 3
            }
        );

        fail_n(&mut fleet[0], &clock, 3); // until t0 + 30
        clock.advance(secs(5));
        fail_n(&mut fleet[1], &clock, 3); // until t0 + 35
        assert_eq!(
            fleet_state(&fleet),
            FleetState::Available {
                available: 1,
                total: 3
            }
        );
        clock.advance(secs(5));
        // The last one goes down too: reported, not silent.
        let t = fail_n(&mut fleet[2], &clock, 3);
        assert!(matches!(t, Some(Transition::Ejected { .. })));
        let s = fleet_state(&fleet);
        assert_eq!(
            s,
            FleetState::AllDown {
                next_probe: Some(t0 + secs(30))
            }
        );
        assert!(s.is_all_down());

        // At next_probe, polling brings one back as probing → available again.
        clock.advance_to(t0 + secs(30));
        let polled: Vec<_> = fleet.iter_mut().map(|e| e.poll(clock.now())).collect();
        assert_eq!(polled, [Some(Transition::Probing), None, None]);
        assert_eq!(
            fleet_state(&fleet),
            FleetState::Available {
                available: 1,
                total: 3
            }
        );

        assert_eq!(fleet_state(&[]), FleetState::AllDown { next_probe: None });
    }

    #[test]
    fn seeded_runs_are_reproducible() {
        let run = |seed| {
            let clock = FakeClock::new();
            let t0 = clock.now();
            let mut rng = SplitMix64::new(seed);
            let mut h = ExitHealth::new(HealthPolicy {
                consecutive_failures: 1,
                ..HealthPolicy::default()
            });
            let mut out = vec![];
            for _ in 0..5 {
                h.on_failure(clock.now(), "x", &mut rng);
                let u = h.ejected_until().unwrap();
                out.push(u - t0);
                clock.advance_to(u);
                h.poll(clock.now());
            }
            out
        };
        assert_eq!(run(11), run(11));
        assert_ne!(run(11), run(12));
    }

    #[test]
    fn an_exit_broken_at_start_is_ejected_at_once_and_probed_later() {
        use crate::rng::SplitMix64;
        let now = Instant::now();
        let mut rng = SplitMix64::new(1);
        let mut h = ExitHealth::new(HealthPolicy::default());
        let t = h.fail_at_start(now, "bind 192.0.2.1:0: address not available", &mut rng);
        assert!(matches!(t, Some(Transition::Ejected { .. })));
        assert!(!h.is_available());
        assert_eq!(
            h.last_error(),
            Some("bind 192.0.2.1:0: address not available")
        );
        let until = h.ejected_until().unwrap();
        assert_eq!(h.poll(until), Some(Transition::Probing));
    }
}
