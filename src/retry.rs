//! Retries: when to try again, and whether the site can afford it.
//!
//! Why a budget: a site that fails every request would otherwise get `1 + max_retries`
//! times the load exactly when it is weakest. Like Finagle's retry budget, every first
//! attempt deposits a fraction of a retry (`ratio`), every retry withdraws a whole one, and
//! a small reserve lets a quiet crawl retry at all. Deposits expire after `ttl`, so a
//! burst of failures cannot spend credit earned an hour ago.
//!
//! Why full jitter: exponential backoff with a uniform draw over `[0, cap]` spreads the
//! retries of many failed requests instead of re-synchronising them (the thundering herd),
//! and `Retry-After` is a floor no jitter may undercut.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::rng::RandomSource;

/// Exponential backoff with full jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay cap of the first retry.
    pub base: Duration,
    /// Largest delay cap.
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `retry` (1 for the first retry): uniform in
    /// `[cap/2, cap]` with `cap = min(max, base × 2^(retry-1))`, and never shorter than the
    /// site's `retry_after`.
    ///
    /// Half the cap is kept fixed so a retry never fires instantly (full jitter from zero
    /// would, and an instant retry of a 503 helps nobody).
    pub fn delay(
        &self,
        retry: u32,
        retry_after: Option<Duration>,
        rng: &mut impl RandomSource,
    ) -> Duration {
        let exp = retry.saturating_sub(1).min(30);
        let cap = self.base.saturating_mul(1u32 << exp).min(self.max);
        let jittered = cap / 2 + (cap / 2).mul_f64(rng.next_f64());
        jittered.max(retry_after.unwrap_or(Duration::ZERO))
    }
}

/// A retry budget: retries may add at most `ratio` of the first attempts' load, plus a
/// reserve of `min_per_sec` retries per second.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    ratio: f64,
    min_per_sec: f64,
    ttl: Duration,
    /// When each first attempt (deposit) and each retry (withdrawal) happened, within ttl.
    deposits: VecDeque<Instant>,
    withdrawals: VecDeque<Instant>,
}

impl RetryBudget {
    /// A budget allowing retries of `ratio` × first attempts over the last `ttl`, plus
    /// `min_per_sec` × ttl retries.
    pub fn new(ratio: f64, min_per_sec: f64, ttl: Duration) -> Self {
        Self {
            ratio: ratio.max(0.0),
            min_per_sec: min_per_sec.max(0.0),
            ttl,
            deposits: VecDeque::new(),
            withdrawals: VecDeque::new(),
        }
    }

    fn expire(&mut self, now: Instant) {
        let Some(horizon) = now.checked_sub(self.ttl) else {
            return;
        };
        while self.deposits.front().is_some_and(|t| *t < horizon) {
            self.deposits.pop_front();
        }
        while self.withdrawals.front().is_some_and(|t| *t < horizon) {
            self.withdrawals.pop_front();
        }
    }

    /// Record a first attempt.
    pub fn deposit(&mut self, now: Instant) {
        self.expire(now);
        self.deposits.push_back(now);
    }

    /// Ask to retry once: `true` (and the retry is counted) if the budget allows it.
    pub fn try_withdraw(&mut self, now: Instant) -> bool {
        self.expire(now);
        let allowed =
            self.ratio * self.deposits.len() as f64 + self.min_per_sec * self.ttl.as_secs_f64();
        if (self.withdrawals.len() as f64) + 1.0 <= allowed {
            self.withdrawals.push_back(now);
            true
        } else {
            false
        }
    }

    /// Retries counted within the ttl.
    pub fn retries_in_window(&self) -> usize {
        self.withdrawals.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use crate::rng::{NoJitter, SplitMix64};

    #[test]
    fn backoff_grows_caps_and_respects_retry_after() {
        let b = Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
        };
        let mut rng = SplitMix64::new(3);
        for retry in 1..=12u32 {
            let cap = Duration::from_millis(500)
                .saturating_mul(1 << (retry - 1))
                .min(Duration::from_secs(30));
            for _ in 0..100 {
                let d = b.delay(retry, None, &mut rng);
                assert!(
                    d >= cap / 2 && d <= cap,
                    "retry {retry}: {d:?} vs cap {cap:?}"
                );
            }
        }
        let d = b.delay(1, Some(Duration::from_secs(7)), &mut NoJitter);
        assert_eq!(d, Duration::from_secs(7));
    }

    #[test]
    fn budget_limits_retries_to_a_fraction_of_first_attempts() {
        let c = FakeClock::new();
        let mut budget = RetryBudget::new(0.2, 0.0, Duration::from_secs(10));
        for _ in 0..100 {
            budget.deposit(c.now());
        }
        let granted = (0..100).filter(|_| budget.try_withdraw(c.now())).count();
        assert_eq!(granted, 20);
        // Deposits expire: after the ttl the credit is gone.
        c.advance(Duration::from_secs(11));
        assert!(!budget.try_withdraw(c.now()));
    }

    #[test]
    fn reserve_allows_a_few_retries_without_traffic() {
        let c = FakeClock::new();
        let mut budget = RetryBudget::new(0.2, 1.0, Duration::from_secs(10));
        let granted = (0..100).filter(|_| budget.try_withdraw(c.now())).count();
        assert_eq!(granted, 10);
        assert_eq!(budget.retries_in_window(), 10);
    }
}
