//! Leaky bucket as a meter: each request pours one unit in, the bucket leaks at `rps`, and
//! a request that would overflow a bucket of `B` units is refused.
//!
//! Why: it is the shape of many server-side limiters (nginx `limit_req`, traffic policers),
//! so mirroring it means never tripping them; and its state reads as "how far behind the
//! server's meter is". As a meter (not a queue) it admits exactly what a
//! [`TokenBucket`](super::TokenBucket) does: the level is the token bucket's missing credit.
//!
//! The level is kept in nanoseconds of outflow, one unit being `T` ns, so the leak is exact
//! integer subtraction and a `Wait` is exactly the time until one unit of room.
//!
//! **Bound:** admitted in any window of length W ≤ `⌊W/T⌋ + B`: the level is ≥ 0 at the
//! window's start, each admission adds `T`, W leaks out, and the k-th admission needs the
//! level to be ≤ `(B - 1) × T` before it.

use std::time::Instant;

use super::{interval_ns, rescale, wait_ns, Decision, Quota, RateLimiter, Ticks};

/// A leaky bucket meter (see the module docs).
#[derive(Debug, Clone)]
pub struct LeakyBucket {
    quota: Quota,
    /// The level below is as of `ticks.latest()`.
    ticks: Ticks,
    /// One unit, in ns of outflow.
    interval: u64,
    /// `B` units, in ns of outflow.
    capacity: u64,
    level: u64,
}

impl LeakyBucket {
    /// An empty bucket for `quota` at `now` (a full burst may go at once).
    pub fn new(quota: Quota, now: Instant) -> Self {
        let quota = Quota::new(quota.rps, quota.burst.max(1));
        let interval = interval_ns(quota.rps);
        Self {
            quota,
            ticks: Ticks::new(now),
            interval,
            capacity: interval.saturating_mul(u64::from(quota.burst)),
            level: 0,
        }
    }

    /// Let the bucket leak up to `now`.
    #[inline]
    fn leak(&mut self, now: Instant) {
        let before = self.ticks.latest();
        let elapsed = self.ticks.at(now) - before;
        self.level = self.level.saturating_sub(elapsed);
    }
}

impl RateLimiter for LeakyBucket {
    fn peek(&self, now: Instant) -> std::time::Duration {
        // A check on a copy: the state is a few words, and the answer is then exactly
        // what `check` would say.
        self.clone().check(now).wait()
    }

    #[inline]
    fn check(&mut self, now: Instant) -> Decision {
        self.leak(now);
        let after = self.level.saturating_add(self.interval);
        if after > self.capacity {
            return wait_ns(after - self.capacity);
        }
        self.level = after;
        Decision::Allow
    }

    fn set_rate(&mut self, rps: f64, now: Instant) {
        self.leak(now);
        // Keep the units in the bucket, re-priced at the new interval; rounding up never
        // lets an extra request through.
        let new = interval_ns(rps);
        self.level = rescale(self.level, new, self.interval, true);
        self.interval = new;
        self.capacity = new.saturating_mul(u64::from(self.quota.burst));
        self.quota.rps = rps;
    }

    fn drain(&mut self, now: Instant) {
        self.leak(now);
        self.level = self.level.max(self.capacity);
    }

    fn quota(&self) -> Quota {
        self.quota
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{exact_wait, ms, take_all};
    use super::*;
    use std::time::Duration;

    #[test]
    fn burst_then_paced_with_exact_waits() {
        let t0 = Instant::now();
        let mut b = LeakyBucket::new(Quota::new(4.0, 3), t0);
        assert_eq!(take_all(&mut b, t0), 3);
        assert_eq!(b.check(ms(t0, 100)).wait(), Duration::from_millis(150));
        assert_eq!(exact_wait(&mut b, ms(t0, 100)), ms(t0, 250));
        assert_eq!(exact_wait(&mut b, ms(t0, 250)), ms(t0, 500));
        // However long the pause, the bucket only empties: B at once, no more.
        assert_eq!(take_all(&mut b, ms(t0, 60_000)), 3);
    }

    #[test]
    fn set_rate_keeps_level_and_waits_exactly() {
        let t0 = Instant::now();
        let mut b = LeakyBucket::new(Quota::new(10.0, 4), t0);
        assert_eq!(take_all(&mut b, t0), 4);
        b.set_rate(1.0, ms(t0, 50));
        // 3.5 units left at 1 unit/s: room for one more after 500 ms.
        assert_eq!(exact_wait(&mut b, ms(t0, 50)), ms(t0, 550));
        b.set_rate(20.0, ms(t0, 550));
        assert_eq!(exact_wait(&mut b, ms(t0, 550)), ms(t0, 600));
    }

    #[test]
    fn drain_waits_one_interval() {
        let t0 = Instant::now();
        let mut b = LeakyBucket::new(Quota::new(10.0, 5), t0);
        b.drain(t0);
        assert_eq!(exact_wait(&mut b, t0), ms(t0, 100));
        assert_eq!(exact_wait(&mut b, ms(t0, 100)), ms(t0, 200));
    }

    #[test]
    fn earlier_now_reads_as_latest() {
        let t0 = Instant::now();
        let mut b = LeakyBucket::new(Quota::new(10.0, 1), t0);
        assert!(b.check(ms(t0, 500)).is_allow());
        assert_eq!(b.check(ms(t0, 100)).wait(), Duration::from_millis(100));
        assert_eq!(b.check(ms(t0, 550)).wait(), Duration::from_millis(50));
        assert_eq!(exact_wait(&mut b, ms(t0, 550)), ms(t0, 600));
    }
}
