//! Fixed window: at most `limit` requests per window; windows are back to back and the
//! count starts over at each boundary.
//!
//! Why: it is the cheapest counter there is and the shape of many simple site limits
//! ("100 per minute", reset on the minute), so mirroring it uses such a limit fully. Do not
//! use it to be gentle: it cannot spread requests out (see the bound and `drain`).
//!
//! **Quota mapping:** limit = `B` (the burst), window `P = B × T` where `T` =
//! [`Quota::interval`] in whole ns. E.g. 10 rps with burst 5 is 5 per 500 ms. So the
//! long-run rate is exactly one per `T`, like the bucket algorithms, and a full burst of
//! `B` may go at once. Windows are aligned to the instant the limiter was built.
//!
//! **Bound:** admitted in any window of length W ≤ `B × (⌈W/P⌉ + 1)`: such a span touches
//! at most `⌈W/P⌉ + 1` windows of `B` each. In particular it lets **2B through in an
//! instant**: `B` at the end of one window and `B` at the start of the next. That boundary
//! burst is inherent to the algorithm; use [`SlidingLog`](super::SlidingLog) (exact),
//! [`SlidingWindow`](super::SlidingWindow) or a bucket where that matters.

use std::time::Instant;

use super::{interval_ns, wait_ns, Decision, Quota, RateLimiter, Ticks};

/// A fixed-window counter (see the module docs).
#[derive(Debug, Clone)]
pub struct FixedWindow {
    quota: Quota,
    ticks: Ticks,
    /// Window length `P = B × T` in ns.
    window: u64,
    /// End of the current window, in ticks (exclusive).
    end: u64,
    /// Admitted in the current window.
    count: u32,
}

impl FixedWindow {
    /// A limiter for `quota` whose first window starts at `now`.
    pub fn new(quota: Quota, now: Instant) -> Self {
        let quota = Quota::new(quota.rps, quota.burst.max(1));
        let window = Self::window_of(quota);
        Self {
            quota,
            ticks: Ticks::new(now),
            window,
            end: window,
            count: 0,
        }
    }

    /// The window length in ns for `quota` (at least 1 ns).
    pub fn window_ns(&self) -> u64 {
        self.window
    }

    fn window_of(quota: Quota) -> u64 {
        interval_ns(quota.rps).saturating_mul(u64::from(quota.burst))
    }

    /// Move to the window holding `now` (in ticks), without looping over skipped ones.
    #[inline]
    fn roll(&mut self, now: u64) {
        if now >= self.end {
            let skipped = (now - self.end) / self.window + 1;
            self.end = self.end.saturating_add(skipped.saturating_mul(self.window));
            self.count = 0;
        }
    }
}

impl RateLimiter for FixedWindow {
    fn peek(&self, now: Instant) -> std::time::Duration {
        // A check on a copy: the state is a few words, and the answer is then exactly
        // what `check` would say.
        self.clone().check(now).wait()
    }

    #[inline]
    fn check(&mut self, now: Instant) -> Decision {
        let now = self.ticks.at(now);
        self.roll(now);
        if self.count < self.quota.burst {
            self.count += 1;
            Decision::Allow
        } else {
            wait_ns(self.end - now)
        }
    }

    fn set_rate(&mut self, rps: f64, now: Instant) {
        let now = self.ticks.at(now);
        self.roll(now);
        // The current window keeps its start and its count; only its length changes. If
        // it is already over at the new length, the next check starts a fresh one.
        let start = self.end.saturating_sub(self.window);
        self.quota.rps = rps;
        self.window = Self::window_of(self.quota);
        self.end = start.saturating_add(self.window);
    }

    /// Marks the current window full and makes it last at least one interval past `now`.
    /// The next window still opens with its whole limit: a fixed window cannot pace.
    fn drain(&mut self, now: Instant) {
        let now = self.ticks.at(now);
        self.roll(now);
        self.count = self.quota.burst;
        let interval = interval_ns(self.quota.rps);
        self.end = self.end.max(now.saturating_add(interval));
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
    fn limit_per_window_with_exact_waits() {
        let t0 = Instant::now();
        let mut f = FixedWindow::new(Quota::new(10.0, 5), t0);
        assert_eq!(f.window_ns(), 500_000_000);
        assert_eq!(take_all(&mut f, ms(t0, 100)), 5);
        assert_eq!(exact_wait(&mut f, ms(t0, 100)), ms(t0, 500));
        assert_eq!(take_all(&mut f, ms(t0, 500)), 4);
        // Skipping many windows lands on the right boundary.
        assert_eq!(take_all(&mut f, ms(t0, 10_250)), 5);
        assert_eq!(exact_wait(&mut f, ms(t0, 10_250)), ms(t0, 10_500));
    }

    #[test]
    fn twice_the_limit_across_a_boundary() {
        let t0 = Instant::now();
        let mut f = FixedWindow::new(Quota::new(10.0, 5), t0);
        let end = ms(t0, 500);
        // B in the last nanosecond of one window, B in the first of the next: 2B in 1 ns,
        // where a bucket with the same quota would allow B + 1 (⌊W/T⌋ + B).
        assert_eq!(take_all(&mut f, end - NS), 5);
        assert_eq!(take_all(&mut f, end), 5);
    }

    #[test]
    fn set_rate_keeps_count_and_waits_exactly() {
        let t0 = Instant::now();
        let mut f = FixedWindow::new(Quota::new(10.0, 4), t0);
        assert_eq!(take_all(&mut f, t0), 4);
        // Slower: the same window, now 4 s long, still holds the 4 admitted.
        f.set_rate(1.0, ms(t0, 100));
        assert_eq!(exact_wait(&mut f, ms(t0, 100)), ms(t0, 4_000));
        // Faster: the window [4 s, 8 s) becomes [4 s, 4.04 s) with 1 of 4 used.
        f.set_rate(100.0, ms(t0, 4_000));
        assert_eq!(take_all(&mut f, ms(t0, 4_000)), 3);
        assert_eq!(exact_wait(&mut f, ms(t0, 4_010)), ms(t0, 4_040));
    }

    #[test]
    fn drain_waits_at_least_one_interval() {
        let t0 = Instant::now();
        let mut f = FixedWindow::new(Quota::new(10.0, 5), t0);
        // The window would end 10 ms after the drain: it is stretched to a full interval.
        f.drain(ms(t0, 490));
        assert_eq!(exact_wait(&mut f, ms(t0, 490)), ms(t0, 590));
        // A window ending later than that just becomes full.
        f.drain(ms(t0, 600));
        assert_eq!(exact_wait(&mut f, ms(t0, 600)), ms(t0, 1_090));
    }

    #[test]
    fn earlier_now_reads_as_latest() {
        let t0 = Instant::now();
        let mut f = FixedWindow::new(Quota::new(10.0, 1), t0);
        assert!(f.check(ms(t0, 600)).is_allow());
        // t0 must not count as the first window again.
        assert_eq!(f.check(t0).wait(), Duration::from_millis(100));
        assert_eq!(exact_wait(&mut f, ms(t0, 600)), ms(t0, 700));
    }
}
