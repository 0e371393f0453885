//! Rate limiters: one folder entry per algorithm, one small trait for all of them.
//!
//! Why several: they differ in how bursts pass and what they cost. A site's own limit is
//! usually one of these shapes, and a crawler that mirrors the shape wastes less.
//!
//! | algorithm | admitted in any window of length W (the exact bound is in each module) |
//! |---|---|
//! | fixed window | up to 2 × limit across a window boundary (inherent) |
//! | sliding log | limit per window, exactly |
//! | sliding window (two-window weighted counter) | about limit per window (approximation) |
//! | token bucket | rate × W + burst |
//! | leaky bucket (meter) | rate × W + burst |
//! | GCRA | rate × W + burst |

use std::time::{Duration, Instant};

use crate::decision::Decision;

pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use leaky_bucket::LeakyBucket;
pub use sliding_log::SlidingLog;
pub use sliding_window::SlidingWindow;
pub use token_bucket::TokenBucket;

/// A rate and the burst allowed on top of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    /// Sustained requests per second (> 0, finite).
    pub rps: f64,
    /// Requests that may go at once after a quiet period (≥ 1). For window algorithms this
    /// is the window's limit minus what the rate alone allows; see each module.
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
    /// `now` must not go backwards between calls (earlier instants are treated as the latest one seen).
    fn check(&mut self, now: Instant) -> Decision;

    /// Change the sustained rate from `now` on; what was admitted before still counts.
    fn set_rate(&mut self, rps: f64, now: Instant);

    /// Throw away saved-up burst: the next permit comes no sooner than one emission
    /// interval after `now` (used when a site says 429: the requests waiting behind it
    /// must not all go at once).
    fn drain(&mut self, now: Instant);

    /// The current quota.
    fn quota(&self) -> Quota;
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
