//! GCRA, the generic cell rate algorithm: one timestamp of state.
//!
//! Why: it admits exactly what a token bucket does, but keeps a single number, the
//! theoretical arrival time (TAT) of the next request if everyone were perfectly paced,
//! and its `Wait` falls straight out of it (like `governor`'s `NotUntil`). Use it as the
//! default pacer: cheapest state, no refill step, exact waits.
//!
//! With emission interval `T` and burst `B`, the burst tolerance is `τ = T × (B - 1)`: a
//! request at `now` conforms when `TAT - τ ≤ now`, and then `TAT = max(TAT, now) + T`.
//! (`τ = T × B` would let `B + 1` go at once.)
//!
//! **Bound:** admitted in any window of length W ≤ `⌊W/T⌋ + B`. Each admission pushes TAT at
//! least `T` past the previous one and past its own instant, and the k-th admission in
//! `[s, s + W]` needs `s + (k - 1) × T ≤ TAT ≤ s + W + τ`.

use std::time::Instant;

use super::{interval_ns, rescale, wait_ns, Decision, Quota, RateLimiter, Ticks};

/// A GCRA limiter (see the module docs).
#[derive(Debug, Clone)]
pub struct Gcra {
    quota: Quota,
    ticks: Ticks,
    /// Emission interval `T` in ns.
    interval: u64,
    /// Burst tolerance `τ = T × (B - 1)` in ns.
    tau: u64,
    /// Theoretical arrival time, in ticks.
    tat: u64,
}

impl Gcra {
    /// A limiter for `quota` with its full burst available at `now`.
    pub fn new(quota: Quota, now: Instant) -> Self {
        let quota = Quota::new(quota.rps, quota.burst.max(1));
        let mut g = Self {
            quota,
            ticks: Ticks::new(now),
            interval: 0,
            tau: 0,
            tat: 0,
        };
        g.set_interval(interval_ns(quota.rps));
        g
    }

    fn set_interval(&mut self, interval: u64) {
        self.interval = interval;
        self.tau = interval.saturating_mul(u64::from(self.quota.burst - 1));
    }
}

impl RateLimiter for Gcra {
    fn peek(&self, now: Instant) -> std::time::Duration {
        // A check on a copy: the state is a few words, and the answer is then exactly
        // what `check` would say.
        self.clone().check(now).wait()
    }

    #[inline]
    fn check(&mut self, now: Instant) -> Decision {
        let now = self.ticks.at(now);
        let tat = self.tat.max(now);
        let conforms_at = tat.saturating_sub(self.tau);
        if conforms_at > now {
            return wait_ns(conforms_at - now);
        }
        self.tat = tat.saturating_add(self.interval);
        Decision::Allow
    }

    fn set_rate(&mut self, rps: f64, now: Instant) {
        let now = self.ticks.at(now);
        // The debt TAT - now is (admitted - earned) permits × T: keep the permits, re-price
        // them at the new interval. Rounding up never lets an extra request through.
        let new = interval_ns(rps);
        let debt = rescale(self.tat.saturating_sub(now), new, self.interval, true);
        self.tat = now.saturating_add(debt);
        self.quota.rps = rps;
        self.set_interval(new);
    }

    fn drain(&mut self, now: Instant) {
        let now = self.ticks.at(now);
        let empty = now.saturating_add(self.interval).saturating_add(self.tau);
        self.tat = self.tat.max(empty);
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
        let mut g = Gcra::new(Quota::new(10.0, 5), t0);
        assert_eq!(take_all(&mut g, t0), 5, "burst B, not B + 1");
        assert_eq!(g.check(t0).wait(), Duration::from_millis(100));
        let t1 = exact_wait(&mut g, t0);
        assert_eq!(t1, ms(t0, 100));
        assert_eq!(exact_wait(&mut g, t1), ms(t0, 200));
        // A quiet second refills the burst, and no more.
        assert_eq!(take_all(&mut g, ms(t0, 2_000)), 5);
    }

    #[test]
    fn set_rate_keeps_admitted_and_waits_exactly() {
        let t0 = Instant::now();
        let mut g = Gcra::new(Quota::new(10.0, 4), t0);
        assert_eq!(take_all(&mut g, t0), 4);
        // Slowing down must not hand out burst that was already spent.
        g.set_rate(1.0, t0);
        assert_eq!(g.quota().rps, 1.0);
        assert_eq!(exact_wait(&mut g, t0), ms(t0, 1_000));
        g.set_rate(100.0, ms(t0, 1_000));
        let t = exact_wait(&mut g, ms(t0, 1_000));
        assert_eq!(t, ms(t0, 1_010));
    }

    #[test]
    fn drain_waits_one_interval() {
        let t0 = Instant::now();
        let mut g = Gcra::new(Quota::new(10.0, 5), t0);
        assert!(g.check(t0).is_allow());
        g.drain(t0);
        assert_eq!(exact_wait(&mut g, t0), ms(t0, 100));
        // After the drained permit, the next is one more interval away: no saved burst.
        assert_eq!(exact_wait(&mut g, ms(t0, 100)), ms(t0, 200));
    }

    #[test]
    fn earlier_now_reads_as_latest() {
        let t0 = Instant::now();
        let mut g = Gcra::new(Quota::new(10.0, 1), t0);
        assert!(g.check(ms(t0, 500)).is_allow());
        // An instant from the past is the latest one seen, so waits are measured from it.
        assert_eq!(g.check(ms(t0, 200)).wait(), Duration::from_millis(100));
        g.drain(t0);
        assert_eq!(g.check(t0).wait(), Duration::from_millis(100));
        assert_eq!(exact_wait(&mut g, ms(t0, 500)), ms(t0, 600));
    }
}
