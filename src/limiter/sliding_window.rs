//! Sliding window, two-window weighted counter (as Cloudflare describes it): count
//! admissions per fixed window, and estimate the last window's worth at offset `e` into the
//! current one as `prev × (1 - e/P) + curr`, as if the previous window's requests had been
//! spread evenly over it. A request is allowed while that estimate is below the limit.
//!
//! Why: it approximates a [`SlidingLog`](super::SlidingLog) in constant space (two
//! counters), and without the 2× boundary burst of a [`FixedWindow`](super::FixedWindow).
//! Use it for large per-window limits, or to mirror a site that limits this way.
//!
//! **Quota mapping:** as [`FixedWindow`](super::FixedWindow): limit = `B`, window
//! `P = B × T`, windows aligned to the instant the limiter was built. The test is done in
//! integers, `prev × (P - e) < (B - curr) × P`, so waits are exact; it is strict so that a
//! client retrying as told gets exactly `B` per window, i.e. the configured rate.
//!
//! **Bound (the approximation):** admitted in any window of length W ≥ 1 ns ≤
//! `⌈(W - 1 ns)/T⌉ + B` (and `B` at a single instant). A span crossing a boundary holds at
//! most `prev ≤ B` from the earlier window and, from the later one up to offset `e ≤ W - 1 ns`,
//! only what the estimate allows with those `prev` still weighted `1 - e/P`: fewer than
//! `1 + B - prev + prev × e/P`; whole windows in between hold `B` each. So it admits at most
//! one more than a bucket with the same quota (`⌊W/T⌋ + B`), but for W < P up to nearly
//! `2B` where the exact log allows `B`: the price of assuming an even spread.

use std::time::Instant;

use super::{interval_ns, wait_ns, Decision, Quota, RateLimiter, Ticks};

/// A two-window weighted counter (see the module docs).
#[derive(Debug, Clone)]
pub struct SlidingWindow {
    quota: Quota,
    ticks: Ticks,
    /// Window length `P = B × T` in ns.
    window: u64,
    /// Start of the current window, in ticks.
    start: u64,
    /// Admitted in the previous window.
    prev: u64,
    /// Admitted in the current window.
    curr: u64,
}

impl SlidingWindow {
    /// A limiter for `quota` whose first window starts at `now`.
    pub fn new(quota: Quota, now: Instant) -> Self {
        let quota = Quota::new(quota.rps, quota.burst.max(1));
        Self {
            quota,
            ticks: Ticks::new(now),
            window: Self::window_of(quota),
            start: 0,
            prev: 0,
            curr: 0,
        }
    }

    /// The window length in ns.
    pub fn window_ns(&self) -> u64 {
        self.window
    }

    fn window_of(quota: Quota) -> u64 {
        interval_ns(quota.rps).saturating_mul(u64::from(quota.burst))
    }

    /// Move to the window holding `now` (in ticks), without looping over skipped ones.
    #[inline]
    fn roll(&mut self, now: u64) {
        let passed = (now - self.start) / self.window;
        if passed > 0 {
            self.prev = if passed == 1 { self.curr } else { 0 };
            self.curr = 0;
            self.start = self
                .start
                .saturating_add(passed.saturating_mul(self.window));
        }
    }

    /// The smallest offset into a window with these counts at which one more is allowed,
    /// if any: the least `e` with `prev × (P - e) < (B - curr) × P`.
    fn first_allowed(&self, prev: u64, curr: u64) -> Option<u64> {
        let room = u64::from(self.quota.burst)
            .checked_sub(curr)
            .filter(|&r| r > 0)?;
        let p = u128::from(self.window);
        let (weighted, room) = (u128::from(prev) * p, u128::from(room) * p);
        if weighted < room {
            return Some(0);
        }
        // prev × e > weighted - room; prev > 0 here since weighted ≥ room > 0.
        let e = (weighted - room) / u128::from(prev) + 1;
        u64::try_from(e).ok().filter(|&e| e < self.window)
    }

    /// How long from `now` (in ticks, already rolled to) until one more is allowed.
    fn wait_from(&self, now: u64) -> u64 {
        let offset = now - self.start;
        if let Some(e) = self.first_allowed(self.prev, self.curr) {
            return e.saturating_sub(offset);
        }
        // Not in this window: in the next one this window's count is `prev`, and the one
        // after that starts at zero and always allows.
        let next = self.first_allowed(self.curr, 0).unwrap_or(self.window);
        self.window - offset + next
    }
}

impl RateLimiter for SlidingWindow {
    fn peek(&self, now: Instant) -> std::time::Duration {
        // A check on a copy: the state is a few words, and the answer is then exactly
        // what `check` would say.
        self.clone().check(now).wait()
    }

    fn check(&mut self, now: Instant) -> Decision {
        let now = self.ticks.at(now);
        self.roll(now);
        match self.wait_from(now) {
            0 => {
                self.curr += 1;
                Decision::Allow
            }
            ns => wait_ns(ns),
        }
    }

    /// Counts and the current window's start are kept; only the window length changes.
    fn set_rate(&mut self, rps: f64, now: Instant) {
        let now = self.ticks.at(now);
        self.roll(now);
        self.quota.rps = rps;
        self.window = Self::window_of(self.quota);
    }

    /// If a permit would come sooner than one interval from `now`, restarts the windows at
    /// `now` as if a client had been admitted at exactly the rate (previous window full,
    /// one in the current): permits then come one per `T`, the first `T` + 1 ns after `now`.
    fn drain(&mut self, now: Instant) {
        let now = self.ticks.at(now);
        self.roll(now);
        if self.wait_from(now) <= interval_ns(self.quota.rps) {
            self.start = now;
            self.prev = u64::from(self.quota.burst);
            self.curr = 1;
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
    fn weighted_estimate_with_exact_waits() {
        let t0 = Instant::now();
        let mut s = SlidingWindow::new(Quota::new(10.0, 4), t0);
        assert_eq!(s.window_ns(), 400_000_000);
        assert_eq!(take_all(&mut s, ms(t0, 300)), 4);
        // Next window: 4 × (1 - e/P) + c < 4 lets the c-th go just past e = c × P / 4.
        assert_eq!(exact_wait(&mut s, ms(t0, 350)), ms(t0, 400) + NS);
        assert_eq!(exact_wait(&mut s, ms(t0, 400) + NS), ms(t0, 500) + NS);
        assert_eq!(take_all(&mut s, ms(t0, 650)), 1);
        assert_eq!(exact_wait(&mut s, ms(t0, 650)), ms(t0, 700) + NS);
        // That made 4 in this window: the next goes just after it ends.
        assert_eq!(exact_wait(&mut s, ms(t0, 700) + NS), ms(t0, 800) + NS);
    }

    #[test]
    fn limit_one_goes_once_per_window() {
        let t0 = Instant::now();
        let mut s = SlidingWindow::new(Quota::new(10.0, 1), t0);
        assert!(s.check(ms(t0, 99)).is_allow());
        // 1 × (1 - e/P) + 0 < 1 holds from e = 1 ns on.
        assert_eq!(exact_wait(&mut s, ms(t0, 99)), ms(t0, 100) + NS);
        assert_eq!(exact_wait(&mut s, ms(t0, 100) + NS), ms(t0, 200) + NS);
    }

    #[test]
    fn boundary_burst_is_bounded() {
        let t0 = Instant::now();
        let mut s = SlidingWindow::new(Quota::new(10.0, 5), t0);
        let end = ms(t0, 500);
        assert_eq!(take_all(&mut s, end - NS), 5);
        // A fixed window would allow 5 more here; the estimate allows 1.
        assert_eq!(take_all(&mut s, end + NS), 1);
    }

    #[test]
    fn set_rate_keeps_counts_and_waits_exactly() {
        let t0 = Instant::now();
        let mut s = SlidingWindow::new(Quota::new(10.0, 2), t0);
        assert_eq!(take_all(&mut s, t0), 2);
        s.set_rate(1.0, ms(t0, 100)); // window 200 ms -> 2 s, same start
        assert_eq!(exact_wait(&mut s, ms(t0, 100)), ms(t0, 2_000) + NS);
        s.set_rate(100.0, ms(t0, 2_005)); // window 2 s -> 20 ms
        assert_eq!(exact_wait(&mut s, ms(t0, 2_005)), ms(t0, 2_010) + NS);
    }

    #[test]
    fn drain_paces_from_one_interval() {
        let t0 = Instant::now();
        let mut s = SlidingWindow::new(Quota::new(10.0, 3), t0);
        s.drain(ms(t0, 50));
        assert_eq!(exact_wait(&mut s, ms(t0, 50)), ms(t0, 150) + NS);
        assert_eq!(exact_wait(&mut s, ms(t0, 150) + NS), ms(t0, 250) + NS);
        // Already blocked for longer than an interval: draining changes nothing.
        let mut s = SlidingWindow::new(Quota::new(10.0, 3), t0);
        assert_eq!(take_all(&mut s, t0), 3);
        s.drain(t0);
        assert_eq!(exact_wait(&mut s, t0), ms(t0, 300) + NS);
    }

    #[test]
    fn earlier_now_reads_as_latest() {
        let t0 = Instant::now();
        let mut s = SlidingWindow::new(Quota::new(10.0, 1), t0);
        assert!(s.check(ms(t0, 150)).is_allow());
        assert_eq!(s.check(t0).wait(), Duration::from_millis(50) + NS);
        assert_eq!(exact_wait(&mut s, ms(t0, 150)), ms(t0, 200) + NS);
    }
}
