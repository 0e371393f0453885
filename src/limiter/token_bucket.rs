//! Token bucket: a bucket of `B` tokens refilled at `rps`; each request takes one.
//!
//! Why: it is the textbook shape most sites document ("10 per second, bursts of 20"), and
//! its state reads directly as "how many requests may go right now". It admits exactly the
//! same sequences as [`Gcra`](super::Gcra) with the same quota; prefer GCRA when only the
//! decision matters (one word of state instead of two).
//!
//! Tokens are kept as nanoseconds of credit, like `governor`: one token is `T` ns, the
//! bucket holds at most `B × T` ns, and time adds credit one-for-one. Integer throughout, so
//! the long-run rate is exactly one per `T` ns with no float drift, and a `Wait` is exactly
//! the credit still missing.
//!
//! **Bound:** admitted in any window of length W ≤ `⌊W/T⌋ + B`: the bucket holds at most
//! `B × T` of credit at the window's start, gains W during it, and each admission spends `T`
//! (the last one needs only its own `T`, hence `(k - 1) × T ≤ (B - 1) × T + W`).

use std::time::Instant;

use super::{interval_ns, rescale, wait_ns, Decision, Quota, RateLimiter, Ticks};

/// A token bucket (see the module docs).
#[derive(Debug, Clone)]
pub struct TokenBucket {
    quota: Quota,
    /// The credit below is as of `ticks.latest()`.
    ticks: Ticks,
    /// One token, in ns of credit.
    interval: u64,
    /// `B` tokens, in ns of credit.
    capacity: u64,
    credit: u64,
}

impl TokenBucket {
    /// A full bucket for `quota` at `now`.
    pub fn new(quota: Quota, now: Instant) -> Self {
        let quota = Quota::new(quota.rps, quota.burst.max(1));
        let interval = interval_ns(quota.rps);
        let capacity = interval.saturating_mul(u64::from(quota.burst));
        Self {
            quota,
            ticks: Ticks::new(now),
            interval,
            capacity,
            credit: capacity,
        }
    }

    /// Bring the credit up to `now`.
    #[inline]
    fn refill(&mut self, now: Instant) {
        let before = self.ticks.latest();
        let elapsed = self.ticks.at(now) - before;
        self.credit = self.credit.saturating_add(elapsed).min(self.capacity);
    }
}

impl RateLimiter for TokenBucket {
    fn peek(&self, now: Instant) -> std::time::Duration {
        // A check on a copy: the state is a few words, and the answer is then exactly
        // what `check` would say.
        self.clone().check(now).wait()
    }

    #[inline]
    fn check(&mut self, now: Instant) -> Decision {
        self.refill(now);
        match self.credit.checked_sub(self.interval) {
            Some(left) => {
                self.credit = left;
                Decision::Allow
            }
            None => wait_ns(self.interval - self.credit),
        }
    }

    fn set_rate(&mut self, rps: f64, now: Instant) {
        self.refill(now);
        // Keep the number of tokens, re-priced at the new interval; rounding down never
        // lets an extra request through.
        let new = interval_ns(rps);
        self.credit = rescale(self.credit, new, self.interval, false);
        self.interval = new;
        self.capacity = new.saturating_mul(u64::from(self.quota.burst));
        self.quota.rps = rps;
    }

    fn drain(&mut self, now: Instant) {
        self.refill(now);
        self.credit = 0;
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
        let mut b = TokenBucket::new(Quota::new(4.0, 3), t0);
        assert_eq!(take_all(&mut b, t0), 3);
        assert_eq!(b.check(ms(t0, 100)).wait(), Duration::from_millis(150));
        assert_eq!(exact_wait(&mut b, ms(t0, 100)), ms(t0, 250));
        assert_eq!(exact_wait(&mut b, ms(t0, 250)), ms(t0, 500));
        // Credit is capped at B tokens however long the pause.
        assert_eq!(take_all(&mut b, ms(t0, 60_000)), 3);
    }

    #[test]
    fn long_run_rate_is_exact() {
        // 3 rps is 333_333_333 ns per token: a client retrying exactly as told gets its
        // n-th permit at exactly (n - 1) × T, however long it runs.
        let t0 = Instant::now();
        let mut b = TokenBucket::new(Quota::new(3.0, 1), t0);
        let mut now = t0;
        for _ in 0..100_000 {
            while let Decision::Wait(d) = b.check(now) {
                now += d;
            }
        }
        assert_eq!(now - t0, Duration::from_nanos(99_999 * 333_333_333));
    }

    #[test]
    fn set_rate_keeps_tokens_and_waits_exactly() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(Quota::new(10.0, 4), t0);
        assert_eq!(take_all(&mut b, t0), 4);
        assert!(b.check(ms(t0, 50)).wait() > Duration::ZERO); // half a token
        b.set_rate(1.0, ms(t0, 50));
        // Half a token at 1 rps is 500 ms of credit; the other half comes 500 ms later.
        assert_eq!(exact_wait(&mut b, ms(t0, 50)), ms(t0, 550));
        b.set_rate(2.0, ms(t0, 550));
        assert_eq!(exact_wait(&mut b, ms(t0, 550)), ms(t0, 1_050));
    }

    #[test]
    fn drain_waits_one_interval() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(Quota::new(10.0, 5), t0);
        b.drain(t0);
        assert_eq!(exact_wait(&mut b, t0), ms(t0, 100));
        assert_eq!(exact_wait(&mut b, ms(t0, 100)), ms(t0, 200));
    }

    #[test]
    fn earlier_now_reads_as_latest() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(Quota::new(10.0, 1), t0);
        assert!(b.check(ms(t0, 500)).is_allow());
        // Going back must not count the same time twice when the clock comes forward again.
        assert_eq!(b.check(ms(t0, 100)).wait(), Duration::from_millis(100));
        assert_eq!(b.check(ms(t0, 550)).wait(), Duration::from_millis(50));
        assert_eq!(exact_wait(&mut b, ms(t0, 550)), ms(t0, 600));
    }
}
