//! Time, injected.
//!
//! Every decision in the core takes `now: Instant` as an argument instead of reading the
//! system clock, so that tests can drive time with [`FakeClock`] in microseconds and the
//! actor layer can hand in tokio's (pausable) clock converted with `into_std()`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of monotonic time.
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The real monotonic clock (`Instant::now()`).
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct FakeClock {
    base: Instant,
    offset_ns: Arc<AtomicU64>,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A fake clock starting at the real current instant.
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            offset_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Move time forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.offset_ns.fetch_add(ns, Ordering::SeqCst);
    }

    /// Move time forward to `t` (no-op if `t` is in the past).
    pub fn advance_to(&self, t: Instant) {
        let now = self.now();
        if t > now {
            self.advance(t - now);
        }
    }

    /// Time elapsed since the clock was created.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.offset_ns.load(Ordering::SeqCst))
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_nanos(self.offset_ns.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_advanced() {
        let c = FakeClock::new();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        c.advance(Duration::from_micros(7));
        assert_eq!(c.now() - t0, Duration::from_micros(7));
        let shared = c.clone();
        shared.advance(Duration::from_secs(1));
        assert_eq!(c.now() - t0, Duration::from_micros(1_000_007));
        c.advance_to(t0); // in the past: ignored
        assert_eq!(c.elapsed(), Duration::from_micros(1_000_007));
    }
}
