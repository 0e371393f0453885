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
//! # Active checks and real answers
//!
//! Two kinds of evidence reach an exit's state: its **real answers** (passive: an answer
//! from a site through the exit, or a failure that is the exit's own fault) and **active
//! checks** (a fetch of the configured health URL through the exit). When they disagree,
//! the real answers win: a check that fails while the exit answered real requests within
//! [`HealthPolicy::passive_window`] (and failed none of its own fault since) is
//! *discounted* — it neither counts toward ejection nor re-ejects a probing exit — and
//! the first such check says so ([`CheckVerdict::Discounted`] with `first`), because it
//! means the health URL itself is wrong (nothing listens there, it answers an error) for
//! a path that works. A check failure counts as a real failure when there is no recent
//! real success: an exit with no traffic, or whose traffic stopped being answered.
//!
//! Time is injected (`now: Instant`), randomness too ([`RandomSource`]); nothing here
//! sleeps or reads a clock. Ejected → probing happens when the caller calls
//! [`ExitHealth::poll`] (e.g. from a timer set to `until`).

use std::time::{Duration, Instant};

use crate::rng::RandomSource;

mod fleet;
pub use fleet::{fleet_state, FleetState};

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
    /// How recent a real answer must be for a failing active check to be discounted
    /// (see the module docs): a real success at most this long ago outweighs the check.
    pub passive_window: Duration,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            consecutive_failures: 3,
            base_ejection: Duration::from_secs(30),
            max_ejection: Duration::from_secs(300),
            jitter: 0.1,
            passive_window: Duration::from_secs(12),
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

/// What a failed active check did (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckVerdict {
    /// No recent real success: the failure counted like a real one, with this
    /// transition if it ejected the exit.
    Counted(Option<Transition>),
    /// A real answer through the exit succeeded within the passive window: the failure
    /// changed nothing. `first` is `true` for the first discounted check since the exit
    /// started or a check last succeeded — the moment to say the health URL looks wrong.
    Discounted {
        /// The first discounted check in a row.
        first: bool,
    },
}

/// Health of one exit.
#[derive(Debug, Clone)]
pub struct ExitHealth {
    policy: HealthPolicy,
    state: HealthState,
    consecutive_failures: u32,
    ejections: u32,
    last_error: Option<String>,
    /// The last real answer through the exit.
    last_real_success: Option<Instant>,
    /// The last real failure that was the exit's own fault.
    last_real_failure: Option<Instant>,
    /// A failed check was discounted and no check has succeeded since.
    check_discounted: bool,
    /// Start of the current healthy period used for decay (`None`: never ejected since the
    /// count was last zero, so there is nothing to decay).
    decay_anchor: Option<Instant>,
    /// When the exit last went from ejected to probing.
    probing_since: Option<Instant>,
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
            last_real_success: None,
            last_real_failure: None,
            check_discounted: false,
            decay_anchor: None,
            probing_since: None,
        }
    }

    /// A real request through this exit was answered (any HTTP status: the path works).
    ///
    /// Resets the consecutive-failure count. Probing → Healthy returns
    /// [`Transition::Recovered`]. While healthy, applies decay of the ejection count. A
    /// success while ejected (a request that was in flight at ejection) changes nothing
    /// but the failure count: the ejection stands until its probe.
    pub fn on_success(&mut self, now: Instant) -> Option<Transition> {
        self.last_real_success = Some(now);
        self.succeeded(now)
    }

    /// An active check through this exit succeeded: like a real success for the state
    /// (it resets the count and recovers a probing exit), but it is not a real answer, so
    /// it does not outweigh later failing checks. It ends a run of discounted checks.
    pub fn on_check_success(&mut self, now: Instant) -> Option<Transition> {
        self.check_discounted = false;
        self.succeeded(now)
    }

    /// An active check through this exit failed with `error`. Discounted when a real
    /// answer through the exit succeeded within [`HealthPolicy::passive_window`] and no
    /// real failure of the exit's own came after it; otherwise handled like
    /// [`on_failure`](Self::on_failure).
    pub fn on_check_failure(
        &mut self,
        now: Instant,
        error: &str,
        rng: &mut impl RandomSource,
    ) -> CheckVerdict {
        if self.recently_answered(now) || self.probe_fresh(now) {
            let first = !self.check_discounted;
            self.check_discounted = true;
            return CheckVerdict::Discounted { first };
        }
        CheckVerdict::Counted(self.failed(now, error, rng))
    }

    /// Probing for less than the passive window, and no real failure of the exit's own
    /// since its last real answer (its checks alone took it out): the real requests the
    /// probe lets through judge it first. A check that fails at once (a wrong health URL
    /// answers in a millisecond) would otherwise eject it again before they could answer,
    /// its last real answer an ejection old, and an exit whose traffic works would never
    /// come back. A real failure of the exit's own still ejects it at once.
    fn probe_fresh(&self, now: Instant) -> bool {
        let own_failure_last = self
            .last_real_failure
            .is_some_and(|bad| self.last_real_success.is_none_or(|ok| bad >= ok));
        self.state == HealthState::Probing
            && !own_failure_last
            && self
                .probing_since
                .is_some_and(|p| now.saturating_duration_since(p) < self.policy.passive_window)
    }

    /// A real answer within the passive window, and no real failure of the exit's own
    /// since it.
    fn recently_answered(&self, now: Instant) -> bool {
        let Some(ok) = self.last_real_success else {
            return false;
        };
        now.saturating_duration_since(ok) <= self.policy.passive_window
            && self.last_real_failure.is_none_or(|bad| bad < ok)
    }

    fn succeeded(&mut self, now: Instant) -> Option<Transition> {
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

    /// A real request through this exit failed by the exit's own fault (its address would
    /// not bind, its proxy refused — not a site that is down or slow, which every exit
    /// would meet alike). Records `error` as the last error.
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
        self.last_real_failure = Some(now);
        self.failed(now, error, rng)
    }

    fn failed(
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
                self.probing_since = Some(now);
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

#[cfg(test)]
mod tests;
