//! The site's token bucket, in exact integer arithmetic.
//!
//! Why exact: tests assert "burst 5 then 2 per second means exactly 5 + 2·t admitted"; a
//! float bucket drifts by a token at boundaries and makes such tests flaky. Here the level
//! is kept in units where one token = `per` in nanoseconds, and every elapsed nanosecond
//! adds `tokens` units, so refill is exact for any rate `tokens / per`.

use std::time::{Duration, Instant};

/// A rate limit: `tokens` requests per `per`, with at most `burst` admitted back to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Tokens added per `per`. Must be > 0.
    pub tokens: u64,
    /// The period over which `tokens` are added. Must be > 0.
    pub per: Duration,
    /// Bucket depth (the bucket starts full). Must be > 0.
    pub burst: u64,
}

impl Rate {
    /// `tokens` per `per`, bucket depth `burst`.
    pub const fn new(tokens: u64, per: Duration, burst: u64) -> Self {
        Self { tokens, per, burst }
    }

    /// `tokens` per second, bucket depth `burst`.
    pub const fn per_second(tokens: u64, burst: u64) -> Self {
        Self::new(tokens, Duration::from_secs(1), burst)
    }

    pub(crate) fn validate(&self) {
        assert!(
            self.tokens > 0 && !self.per.is_zero() && self.burst > 0,
            "invalid test-site rate {self:?}: tokens, per and burst must all be > 0"
        );
    }
}

/// Exact token bucket. Level is in "token-nanos": one token = `per_ns` units.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    tokens: u128,
    per_ns: u128,
    capacity: u128,
    level: u128,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub(crate) fn new(rate: Rate, now: Instant) -> Self {
        rate.validate();
        let per_ns = rate.per.as_nanos();
        let capacity = u128::from(rate.burst) * per_ns;
        Self {
            tokens: u128::from(rate.tokens),
            per_ns,
            capacity,
            level: capacity,
            last: now,
        }
    }

    /// Take one token at `now`, or say how long until one is available.
    /// A `now` earlier than the last call is treated as no time passing.
    /// Refill up to `now` at the rate so far.
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_nanos();
        if now > self.last {
            self.last = now;
        }
        self.level = self
            .level
            .saturating_add(elapsed.saturating_mul(self.tokens))
            .min(self.capacity);
    }

    /// From `now` on, refill at `rate` (same `per`): the tokens so far are kept, up to
    /// the new depth.
    pub(crate) fn set_rate(&mut self, rate: Rate, now: Instant) {
        let tokens = u128::from(rate.tokens);
        let capacity = u128::from(rate.burst) * self.per_ns;
        if tokens == self.tokens && capacity == self.capacity {
            return;
        }
        self.refill(now);
        self.tokens = tokens;
        self.capacity = capacity;
        self.level = self.level.min(capacity);
    }

    pub(crate) fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.level >= self.per_ns {
            self.level -= self.per_ns;
            Ok(())
        } else {
            let wait_ns = (self.per_ns - self.level).div_ceil(self.tokens);
            Err(Duration::from_nanos(
                u64::try_from(wait_ns).unwrap_or(u64::MAX),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_rate_refills_from_the_change_and_keeps_tokens_up_to_its_depth() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(Rate::per_second(10, 5), t0);
        assert!((0..5).all(|_| b.take(t0).is_ok()));
        // 100 ms at 10/s gives one token; from then on 2/s: the next comes 500 ms later.
        let t1 = t0 + Duration::from_millis(100);
        b.set_rate(Rate::per_second(2, 5), t1);
        assert!(b.take(t1).is_ok());
        assert!(b.take(t1 + Duration::from_millis(499)).is_err());
        assert!(b.take(t1 + Duration::from_millis(500)).is_ok());
        // A full bucket moved to a shallower depth keeps only that many.
        let t2 = t1 + Duration::from_secs(10);
        b.set_rate(Rate::per_second(2, 2), t2);
        assert!((0..2).all(|_| b.take(t2).is_ok()));
        assert!(b.take(t2).is_err());
    }

    #[test]
    fn burst_then_exact_refill() {
        let t0 = Instant::now();
        // 3 per second: one token every 333_333_333.33… ns — not an integer interval.
        let mut b = TokenBucket::new(Rate::per_second(3, 2), t0);
        assert!(b.take(t0).is_ok());
        assert!(b.take(t0).is_ok());
        let wait = b.take(t0).unwrap_err();
        assert_eq!(wait, Duration::from_nanos(333_333_334));
        // One nanosecond short of a token: still refused.
        assert!(b.take(t0 + Duration::from_nanos(333_333_333)).is_err());
        assert!(b.take(t0 + Duration::from_nanos(333_333_334)).is_ok());
        // After exactly one second from empty, exactly 3 tokens are there — no rounding loss.
        let mut b = TokenBucket::new(Rate::per_second(3, 3), t0);
        assert!((0..3).all(|_| b.take(t0).is_ok()));
        let t1 = t0 + Duration::from_secs(1);
        assert!((0..3).all(|_| b.take(t1).is_ok()));
        assert!(b.take(t1).is_err());
    }

    #[test]
    fn level_is_capped_at_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(Rate::new(1, Duration::from_secs(10), 2), t0);
        let later = t0 + Duration::from_secs(3600);
        assert!(b.take(later).is_ok());
        assert!(b.take(later).is_ok());
        assert_eq!(b.take(later), Err(Duration::from_secs(10)));
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let mut b = TokenBucket::new(Rate::per_second(1, 1), t0);
        assert!(b.take(t1).is_ok());
        assert!(b.take(t0).is_err());
        assert!(b.take(t1).is_err());
    }
}
