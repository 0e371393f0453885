//! Sliding log: remember when each admitted request went, allow a new one while fewer than
//! `limit` went in the last window.
//!
//! Why: it is the exact form of "at most N per window" — no boundary burst, no estimate —
//! which is what a site enforcing a true rolling window expects. It costs memory and time
//! in proportion to the limit (one timestamp per admitted request still in the window), so
//! use it for small limits; use [`SlidingWindow`](super::SlidingWindow) to approximate a
//! large one in constant space.
//!
//! **Quota mapping:** as [`FixedWindow`](super::FixedWindow): limit = `B`, window
//! `P = B × T`, so the long-run rate is one per `T` and `B` may go at once.
//!
//! **Bound:** every half-open window `[s, s + P)` holds at most `B` admissions, exactly: an
//! admission at `t` is refused while `B` others lie in `(t - P, t]`. Hence admitted in any
//! window of length W ≤ `B × (⌊W/P⌋ + 1)` (cut it into ⌊W/P⌋ spans of length P and a
//! shorter rest). Never more than a bucket with the same quota (`⌊W/T⌋ + B`), and for
//! W < P strictly fewer once W ≥ T.

use std::collections::VecDeque;
use std::time::Instant;

use super::{interval_ns, wait_ns, Decision, Quota, RateLimiter, Ticks};

/// A sliding-log limiter (see the module docs).
#[derive(Debug, Clone)]
pub struct SlidingLog {
    quota: Quota,
    ticks: Ticks,
    /// Window length `P = B × T` in ns (capped to fit `i64`).
    window: i64,
    /// Admission instants in ticks, oldest first, all within the last window. Signed
    /// because `drain` may log stand-in admissions from before the limiter existed.
    log: VecDeque<i64>,
}

impl SlidingLog {
    /// A limiter for `quota` with an empty log at `now`.
    pub fn new(quota: Quota, now: Instant) -> Self {
        let quota = Quota::new(quota.rps, quota.burst.max(1));
        Self {
            quota,
            ticks: Ticks::new(now),
            window: Self::window_of(quota),
            log: VecDeque::new(),
        }
    }

    /// The window length in ns.
    pub fn window_ns(&self) -> u64 {
        self.window as u64
    }

    fn window_of(quota: Quota) -> i64 {
        let p = interval_ns(quota.rps).saturating_mul(u64::from(quota.burst));
        i64::try_from(p).unwrap_or(i64::MAX)
    }

    fn limit(&self) -> usize {
        self.quota.burst as usize
    }

    /// `now` in ticks, with admissions that have left the window forgotten.
    fn advance(&mut self, now: Instant) -> i64 {
        // Ticks stay below 2^63 for 292 years.
        let now = self.ticks.at(now) as i64;
        let horizon = now - self.window;
        while self.log.front().is_some_and(|&t| t <= horizon) {
            self.log.pop_front();
        }
        now
    }
}

impl RateLimiter for SlidingLog {
    fn peek(&self, now: Instant) -> std::time::Duration {
        // A check on a copy: the state is a few words, and the answer is then exactly
        // what `check` would say.
        self.clone().check(now).wait()
    }

    fn check(&mut self, now: Instant) -> Decision {
        let now = self.advance(now);
        match self.log.front() {
            Some(&oldest) if self.log.len() >= self.limit() => {
                wait_ns((oldest.saturating_add(self.window) - now) as u64)
            }
            _ => {
                self.log.push_back(now);
                Decision::Allow
            }
        }
    }

    /// The log is kept as is; only the window it is read against changes.
    fn set_rate(&mut self, rps: f64, now: Instant) {
        self.quota.rps = rps;
        self.window = Self::window_of(self.quota);
        self.advance(now);
    }

    /// Makes the log look as if a client had been admitted at exactly the rate up to `now`
    /// (B stand-ins, one per `T`, the newest at `now`), keeping any real entry that is
    /// later: permits then come back one per `T` from `now + T` on, never sooner than
    /// they would have without the drain.
    fn drain(&mut self, now: Instant) {
        let now = self.advance(now);
        let limit = self.limit();
        // Align real entries with the newest stand-ins; missing ones count as long gone.
        let missing = limit - self.log.len();
        self.log.reserve(missing);
        for _ in 0..missing {
            self.log.push_front(i64::MIN);
        }
        let interval = i64::try_from(interval_ns(self.quota.rps)).unwrap_or(i64::MAX);
        let first = now - self.window;
        for (k, t) in (1i64..).zip(self.log.iter_mut()) {
            let stand_in = first.saturating_add(interval.saturating_mul(k));
            *t = (*t).max(stand_in);
        }
    }

    fn quota(&self) -> Quota {
        self.quota
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{exact_wait, ms, take_all, NS};
    use super::*;
    use std::time::Duration;

    #[test]
    fn limit_per_sliding_window_with_exact_waits() {
        let t0 = Instant::now();
        let mut s = SlidingLog::new(Quota::new(10.0, 3), t0);
        assert_eq!(s.window_ns(), 300_000_000);
        assert!(s.check(t0).is_allow());
        assert_eq!(take_all(&mut s, ms(t0, 250)), 2);
        // The t0 entry leaves at 300 ms, the two at 250 ms leave at 550 ms.
        assert_eq!(exact_wait(&mut s, ms(t0, 260)), ms(t0, 300));
        assert_eq!(exact_wait(&mut s, ms(t0, 300)), ms(t0, 550));
        assert_eq!(take_all(&mut s, ms(t0, 550)), 1);
    }

    #[test]
    fn no_boundary_burst() {
        let t0 = Instant::now();
        let mut s = SlidingLog::new(Quota::new(10.0, 5), t0);
        assert_eq!(take_all(&mut s, ms(t0, 500) - NS), 5);
        assert_eq!(exact_wait(&mut s, ms(t0, 500)), ms(t0, 1_000) - NS);
    }

    #[test]
    fn set_rate_keeps_log_and_waits_exactly() {
        let t0 = Instant::now();
        let mut s = SlidingLog::new(Quota::new(10.0, 2), t0);
        assert_eq!(take_all(&mut s, t0), 2);
        s.set_rate(1.0, ms(t0, 100)); // window 200 ms -> 2 s
        assert_eq!(exact_wait(&mut s, ms(t0, 100)), ms(t0, 2_000));
        s.set_rate(100.0, ms(t0, 2_000)); // window 2 s -> 20 ms
        assert_eq!(take_all(&mut s, ms(t0, 2_010)), 1);
        assert_eq!(exact_wait(&mut s, ms(t0, 2_010)), ms(t0, 2_020));
    }

    #[test]
    fn drain_paces_from_one_interval() {
        let t0 = Instant::now();
        let mut s = SlidingLog::new(Quota::new(10.0, 4), t0);
        assert!(s.check(t0).is_allow());
        // Stand-ins at -200, -100, 0 and 100 ms (some before the limiter existed).
        s.drain(ms(t0, 100));
        assert_eq!(exact_wait(&mut s, ms(t0, 100)), ms(t0, 200));
        assert_eq!(exact_wait(&mut s, ms(t0, 200)), ms(t0, 300));
        assert_eq!(exact_wait(&mut s, ms(t0, 300)), ms(t0, 400));
        assert_eq!(exact_wait(&mut s, ms(t0, 400)), ms(t0, 500));
    }

    #[test]
    fn drain_never_brings_a_permit_forward() {
        let t0 = Instant::now();
        let mut s = SlidingLog::new(Quota::new(10.0, 4), t0);
        assert_eq!(take_all(&mut s, ms(t0, 100)), 4);
        s.drain(ms(t0, 100));
        assert_eq!(exact_wait(&mut s, ms(t0, 100)), ms(t0, 500));
    }

    #[test]
    fn earlier_now_reads_as_latest() {
        let t0 = Instant::now();
        let mut s = SlidingLog::new(Quota::new(10.0, 1), t0);
        assert!(s.check(ms(t0, 500)).is_allow());
        assert_eq!(s.check(t0).wait(), Duration::from_millis(100));
        assert_eq!(exact_wait(&mut s, ms(t0, 500)), ms(t0, 600));
    }
}
