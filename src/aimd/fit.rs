//! Which token buckets explain a small host's first answers.
//!
//! A small host is learned from a handful of answers: slow start meets a 5 req/s site with
//! a burst of 2 after half a dozen requests, and the estimators that speak then each
//! assume something the host may not do. The accepted rate over that fraction of a second
//! is mostly the burst; what got through between two throttles ([`super::between`]) is the
//! refill only if none of it was wasted, and a `Retry-After` pause longer than the burst
//! lasts wastes most of it (a 5 req/s host with a burst of 2 paused for a second lets three
//! of its five tokens overflow), so the span's figure comes out low and a probe to correct
//! it costs another throttle and its pause.
//!
//! The answers themselves bound the site's rate without such assumptions. A token bucket
//! (refill `C` a second, depth `B`) accepts a request when it holds a token, so each
//! success needs one and each throttle found none. For a refill `C`, the shallowest bucket
//! that explains the successes is the deepest debt they ran up (the debt draining at `C`);
//! a deeper bucket holds more tokens and explains the throttles less. So `C` is possible
//! exactly when that shallowest bucket leaves every throttle without a token. Too low a
//! `C`, and the successes need a bucket so deep that some throttle should have passed; too
//! high, and a throttle should have found a token. The possible refills are the fit: a
//! range that narrows with every answer, whatever the pauses wasted.
//!
//! Where it does not speak: a host whose limit is not a bucket (a fixed window, a queue)
//! may fit no refill at all or a range the window's edges made up, and a fast host's
//! answers arrive in an order the network shuffles by more than a token's time. So it only
//! corrects the other estimators while a thin host is learned (the controller's first
//! cuts), never past the range it found, and it stops listening once it holds
//! [`BucketFit::EVENTS`] answers.

use std::time::Instant;

/// The answers of a host's first requests, in the order they were sent.
#[derive(Debug, Clone, Default)]
pub(super) struct BucketFit {
    origin: Option<Instant>,
    /// Seconds after `origin` each request was sent, and whether it got through.
    events: Vec<(f64, bool)>,
}

impl BucketFit {
    /// Answers it keeps: a thin host's first few throttles, a fast host's first fraction
    /// of a second (which the fit leaves to the other estimators).
    pub(super) const EVENTS: usize = 64;
    /// Refills tried between the bounds: about 2 % apart over a hundredfold range.
    const GRID: usize = 240;

    /// A success (`ok`) or a throttle of the request sent at `sent_at`.
    pub(super) fn record(&mut self, sent_at: Instant, ok: bool) {
        if self.events.len() >= Self::EVENTS {
            return;
        }
        let origin = *self.origin.get_or_insert(sent_at);
        let t = sent_at
            .checked_duration_since(origin)
            .map_or(0.0, |d| d.as_secs_f64());
        self.events.push((t, ok));
    }

    /// Whether it still listens.
    pub(super) fn open(&self) -> bool {
        self.events.len() < Self::EVENTS
    }

    /// The refills within `[lo, hi]` (requests/s) that explain every answer so far, as
    /// the slowest and the fastest; `None` while no throttle was seen or when none does.
    pub(super) fn bounds(&self, lo: f64, hi: f64) -> Option<(f64, f64)> {
        if !(lo > 0.0 && hi > lo) || self.events.iter().all(|e| e.1) {
            return None;
        }
        let mut events = self.events.clone();
        // Answers come back out of order; the site saw them in about the order sent.
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let step = (hi / lo).ln() / (Self::GRID - 1) as f64;
        let feasible = (0..Self::GRID)
            .map(|i| lo * (step * i as f64).exp())
            .filter(|&c| explains(&events, c));
        feasible.fold(None, |acc, c| match acc {
            None => Some((c, c)),
            Some((l, h)) => Some((f64::min(l, c), f64::max(h, c))),
        })
    }
}

/// Whether a bucket refilling at `c` a second, of the shallowest depth its successes
/// allow, leaves every throttle in `events` without a token.
fn explains(events: &[(f64, bool)], c: f64) -> bool {
    // Debt: tokens taken and not yet refilled. A bucket of depth B holds B - debt.
    let debts = || {
        let mut debt = 0.0_f64;
        let mut last = events.first().map_or(0.0, |e| e.0);
        events.iter().map(move |&(t, ok)| {
            debt = (debt - c * (t - last)).max(0.0);
            last = t;
            let before = debt;
            if ok {
                debt += 1.0;
            }
            (before, ok)
        })
    };
    // A success needs a token: B - before >= 1.
    let depth = debts()
        .filter(|e| e.1)
        .map(|(before, _)| before + 1.0)
        .fold(1.0, f64::max);
    // A throttle found none: B - before < 1.
    debts()
        .filter(|e| !e.1)
        .all(|(before, _)| depth - before < 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Requests to a bucket of `depth` refilling at `c`, sent at `times` (seconds), as the
    /// site answers them.
    fn answers(c: f64, depth: f64, times: &[f64]) -> BucketFit {
        let t0 = Instant::now();
        let mut fit = BucketFit::default();
        let mut tokens = depth;
        let mut last = 0.0;
        for &t in times {
            tokens = (tokens + c * (t - last)).min(depth);
            last = t;
            let ok = tokens >= 1.0;
            if ok {
                tokens -= 1.0;
            }
            fit.record(t0 + Duration::from_secs_f64(t), ok);
        }
        fit
    }

    /// Sends at `rate` from `from` for `secs`.
    fn steady(from: f64, rate: f64, secs: f64) -> Vec<f64> {
        let n = (secs * rate) as usize;
        (0..n).map(|i| from + i as f64 / rate).collect()
    }

    #[test]
    fn a_pause_that_wasted_refill_does_not_pull_the_fit_below_the_rate() {
        // 5 req/s, burst 2. Slow start at 8/s until the throttle, a 1 s pause (three
        // tokens overflow), then 6/s until the next: what got through between the two
        // throttles says about 3.7/s; the bucket that explains every answer refills at 5.
        let mut times = steady(0.0, 8.0, 0.75);
        times.extend(steady(1.75, 6.0, 1.5));
        let fit = answers(5.0, 2.0, &times);
        let (lo, hi) = fit.bounds(0.1, 20.0).expect("a bucket explains them");
        assert!(lo <= 5.0 && hi >= 5.0, "{lo}..{hi} holds the truth");
        assert!(lo > 4.2, "the fit excludes the span's low figure: {lo}");
    }

    #[test]
    fn the_range_narrows_as_answers_come() {
        // 1 req/s, burst 2, sent at 1.5/s: every few requests a throttle.
        let few = answers(1.0, 2.0, &steady(0.0, 1.5, 6.0));
        let many = answers(1.0, 2.0, &steady(0.0, 1.5, 30.0));
        let (l1, h1) = few.bounds(0.1, 10.0).unwrap();
        let (l2, h2) = many.bounds(0.1, 10.0).unwrap();
        assert!(l1 <= 1.0 && h1 >= 1.0 && l2 <= 1.0 && h2 >= 1.0);
        assert!(h2 / l2 < h1 / l1, "{l1}..{h1} then {l2}..{h2}");
        assert!(h2 / l2 < 1.25, "thirty seconds pin it: {l2}..{h2}");
    }

    #[test]
    fn no_throttle_or_no_bucket_says_nothing() {
        let all_ok = answers(10.0, 5.0, &steady(0.0, 5.0, 4.0));
        assert_eq!(all_ok.bounds(0.1, 20.0), None, "nothing refused yet");
        // Refused, then accepted twice as fast right after: no bucket does that.
        let t0 = Instant::now();
        let mut odd = BucketFit::default();
        for (i, ok) in [true, false, true, true, true, true]
            .into_iter()
            .enumerate()
        {
            odd.record(t0 + Duration::from_millis(100 * i as u64), ok);
        }
        assert_eq!(odd.bounds(0.1, 5.0), None);
    }

    #[test]
    fn it_stops_listening_when_full() {
        let mut fit = answers(1.0, 2.0, &steady(0.0, 2.0, 40.0));
        assert!(!fit.open());
        let before = fit.events.len();
        fit.record(Instant::now(), true);
        assert_eq!(fit.events.len(), before);
        assert_eq!(before, BucketFit::EVENTS);
    }
}
