//! Rate limiters: one folder entry per algorithm, one small trait for all of them.
//!
//! Why several: they differ in how bursts pass and what they cost. A site's own limit is
//! usually one of these shapes, and a crawler that mirrors the shape wastes less.
//!
//! Every limiter here is a plain state machine over integer nanoseconds since it was built:
//! no floats after the quota is read, so waits are exact (a check made exactly the returned
//! `Wait(d)` later is allowed) and long-run rates do not drift.
//!
//! Notation for the bounds: `T` = [`Quota::interval`] in whole nanoseconds, `B` = burst, and
//! for the window algorithms the window `P = B × T` holding a limit of `B` (so every
//! algorithm has the same long-run rate 1/T and lets the same `B` go at once after a quiet
//! period). "Any window of length W" means any closed interval `[s, s + W]`.
//!
//! | algorithm | admitted in any window of length W ≤ |
//! |---|---|
//! | fixed window | `B × (⌈W/P⌉ + 1)`: up to 2B across a window boundary (inherent) |
//! | sliding log | `B × (⌊W/P⌋ + 1)`: exactly B per half-open window of length P |
//! | sliding window (two-window weighted counter) | `⌈(W - 1 ns)/T⌉ + B` (W ≥ 1 ns): an approximation of the log |
//! | token bucket | `⌊W/T⌋ + B` |
//! | leaky bucket (meter) | `⌊W/T⌋ + B` |
//! | GCRA | `⌊W/T⌋ + B` |

use std::time::{Duration, Instant};

use crate::decision::Decision;

pub mod fixed_window;
pub mod gcra;
mod key;
pub mod leaky_bucket;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use key::{fallback_rps, LimitKey, Scope};
pub use leaky_bucket::LeakyBucket;
pub use sliding_log::SlidingLog;
pub use sliding_window::SlidingWindow;
pub use token_bucket::TokenBucket;

/// A rate and the burst allowed on top of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    /// Sustained requests per second (> 0, finite).
    pub rps: f64,
    /// Requests that may go at once after a quiet period (≥ 1; 0 is read as 1). For the
    /// window algorithms it is the window's limit, and the window is `burst / rps` long, so
    /// that the long-run rate stays `rps`; see each module.
    pub burst: u32,
}

impl Quota {
    /// A quota of `rps` requests per second with `burst` at once.
    pub fn new(rps: f64, burst: u32) -> Self {
        Self { rps, burst }
    }

    /// The emission interval 1/rps, in whole nanoseconds (at least 1 ns).
    pub fn interval(&self) -> Duration {
        interval_of(self.rps)
    }
}

/// 1/rps as a Duration, clamped to [1 ns, ~31 years] so that a rate near zero or infinity
/// cannot overflow the arithmetic.
pub fn interval_of(rps: f64) -> Duration {
    const MAX_NS: f64 = 1.0e18;
    let ns = if rps.is_finite() && rps > 0.0 {
        (1.0e9 / rps).clamp(1.0, MAX_NS)
    } else {
        MAX_NS
    };
    Duration::from_nanos(ns.round() as u64)
}

/// What every limiter does.
pub trait RateLimiter: Send + std::fmt::Debug {
    /// Ask for one permit at `now`. `Allow` takes it; `Wait(d)` takes nothing and means a
    /// check at `now + d` is allowed if nothing else changed the state in between.
    /// `now` must not go backwards between calls (earlier instants are treated as the latest one seen,
    /// and a `Wait` is then measured from that latest instant).
    fn check(&mut self, now: Instant) -> Decision;

    /// Change the sustained rate from `now` on; what was admitted before still counts.
    fn set_rate(&mut self, rps: f64, now: Instant);

    /// Throw away saved-up burst: the next permit comes no sooner than one emission
    /// interval after `now` (used when a site says 429: the requests waiting behind it
    /// must not all go at once).
    fn drain(&mut self, now: Instant);

    /// A pause until `until` (a `Retry-After`, a hold): the burst saved up before it is
    /// thrown away, and the first permit after it comes at `until`, one emission interval
    /// after the instant it is drained at. A site that named its pause (`Retry-After`)
    /// takes a request again when it ends; waiting another interval on top would cost a
    /// 1 req/s host a second per throttle. A pause shorter than an interval drains at
    /// `now`.
    fn drain_until(&mut self, until: Instant, now: Instant) {
        let at = until.checked_sub(self.quota().interval()).unwrap_or(now);
        self.drain(at.max(now));
    }

    /// The current quota.
    fn quota(&self) -> Quota;

    /// How long until `check` would allow (zero: now), without taking anything.
    fn peek(&self, now: Instant) -> Duration;
}

/// The algorithms, as named in the config (`[limiter] algorithm`), minus the adaptive one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// [`FixedWindow`]
    FixedWindow,
    /// [`SlidingLog`]
    SlidingLog,
    /// [`SlidingWindow`]
    SlidingWindow,
    /// [`TokenBucket`]
    TokenBucket,
    /// [`LeakyBucket`]
    LeakyBucket,
    /// [`Gcra`]
    Gcra,
}

impl Kind {
    /// Every algorithm, in the order the config lists them.
    pub const ALL: [Kind; 6] = [
        Kind::FixedWindow,
        Kind::SlidingLog,
        Kind::SlidingWindow,
        Kind::TokenBucket,
        Kind::LeakyBucket,
        Kind::Gcra,
    ];
}

/// Build a limiter of `kind` with `quota`, starting full (a burst may go at once) at `now`.
pub fn build(kind: Kind, quota: Quota, now: Instant) -> Box<dyn RateLimiter> {
    match kind {
        Kind::FixedWindow => Box::new(FixedWindow::new(quota, now)),
        Kind::SlidingLog => Box::new(SlidingLog::new(quota, now)),
        Kind::SlidingWindow => Box::new(SlidingWindow::new(quota, now)),
        Kind::TokenBucket => Box::new(TokenBucket::new(quota, now)),
        Kind::LeakyBucket => Box::new(LeakyBucket::new(quota, now)),
        Kind::Gcra => Box::new(Gcra::new(quota, now)),
    }
}

/// Nanoseconds since a limiter was built, never going backwards: a `now` earlier than the
/// latest one seen reads as the latest one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticks {
    origin: Instant,
    latest: u64,
}

impl Ticks {
    pub(crate) fn new(origin: Instant) -> Self {
        Self { origin, latest: 0 }
    }

    /// The latest tick seen.
    pub(crate) fn latest(&self) -> u64 {
        self.latest
    }

    /// `now` as a tick, clamped to be no earlier than the latest one seen.
    #[inline]
    pub(crate) fn at(&mut self, now: Instant) -> u64 {
        let ns = now.saturating_duration_since(self.origin).as_nanos();
        // u64 nanoseconds last 584 years; saturating beyond that is harmless.
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        self.latest = self.latest.max(ns);
        self.latest
    }
}

/// The emission interval of `rps` in whole nanoseconds (≥ 1).
pub(crate) fn interval_ns(rps: f64) -> u64 {
    // interval_of clamps to 1e18 ns, which fits in u64.
    interval_of(rps).as_nanos() as u64
}

/// `Wait` for `ns` nanoseconds.
#[inline]
pub(crate) fn wait_ns(ns: u64) -> Decision {
    Decision::Wait(Duration::from_nanos(ns))
}

/// `x × num / den` rounded up (or down), in u128 so it cannot overflow before saturating.
/// Used by `set_rate` to carry saved state over to a new interval.
pub(crate) fn rescale(x: u64, num: u64, den: u64, round_up: bool) -> u64 {
    let n = u128::from(x) * u128::from(num);
    let d = u128::from(den.max(1));
    let q = if round_up { n.div_ceil(d) } else { n / d };
    u64::try_from(q).unwrap_or(u64::MAX)
}

/// Helpers shared by the per-algorithm unit tests.
#[cfg(test)]
pub(crate) mod testkit {
    use super::*;

    pub(crate) const NS: Duration = Duration::from_nanos(1);

    /// Asserts `check(now)` says `Wait(d)` with `d > 0`, that `d` is exact (one nanosecond
    /// earlier still waits, exactly `d` later is allowed), and returns `now + d`.
    pub(crate) fn exact_wait(l: &mut dyn RateLimiter, now: Instant) -> Instant {
        let d = l.check(now).wait();
        assert!(d > Duration::ZERO, "expected a wait at {now:?}, got Allow");
        assert_eq!(
            l.check(now + d - NS),
            Decision::Wait(NS),
            "wait {d:?} too long"
        );
        assert_eq!(l.check(now + d), Decision::Allow, "wait {d:?} too short");
        now + d
    }

    /// How many checks at `now` are allowed before the first wait.
    pub(crate) fn take_all(l: &mut dyn RateLimiter, now: Instant) -> u32 {
        let mut n = 0;
        while l.check(now).is_allow() {
            n += 1;
            assert!(n <= 1_000_000, "limiter never said wait");
        }
        n
    }

    /// The unit-test clock: an instant and offsets from it in milliseconds.
    pub(crate) fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::{ms, NS};
    use super::*;

    #[test]
    fn a_pause_ends_with_one_permit_and_no_saved_up_burst() {
        for kind in Kind::ALL {
            let t0 = Instant::now();
            let mut l = build(kind, Quota::new(10.0, 5), t0);
            assert!(l.check(t0).is_allow());
            l.drain_until(ms(t0, 1_000), t0);
            // As the pause ends (the sliding window's strict test: a nanosecond later).
            let end = ms(t0, 1_000) + NS;
            assert!(l.check(end).is_allow(), "{kind:?}: as the pause ends");
            // A fixed window opens a new window with its whole count: that is its shape.
            if kind != Kind::FixedWindow {
                let d = l.check(end).wait();
                assert!(d >= Duration::from_millis(100) - NS, "{kind:?}: then {d:?}");
            }
        }
    }
}
