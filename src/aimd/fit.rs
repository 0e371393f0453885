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
//! may fit no refill at all or a range the window's edges made up; a limiter that holds
//! what it accepts answers out of order by design, and a throttle judged before the held
//! acceptances are back reads as almost no refill ([`BucketFit::record`]); and a fast host's
//! answers arrive in an order the network shuffles by more than a token's time (the spread
//! of their round trips says by how much, [`BucketFit::shuffle`]). A limit per client
//! address is a bucket per exit: one for the host explains its answers only while the
//! exits take their turns evenly, and a turn that comes round early reads as a slow host.
//! So the fit also says whether buckets alike, one per exit, explain the answers as well
//! ([`Bounds::per_exit`]), and the controller trusts it less there. It only corrects the
//! other estimators while a thin host is learned (the controller's first cuts), never
//! past the range it found, and it stops listening once it holds [`BucketFit::EVENTS`]
//! answers, or once [`BucketFit::HELD`] acceptances came back after throttles sent later
//! than them (its first throttle is read all the same: none has been overtaken yet).

use std::time::{Duration, Instant};

/// The answers of a host's first requests, in the order they were sent.
#[derive(Debug, Clone, Default)]
pub(super) struct BucketFit {
    origin: Option<Instant>,
    /// Seconds after `origin` each request was sent, whether it got through, and the
    /// exit it went through.
    events: Vec<(f64, bool, usize)>,
    /// The shortest and the longest round trip of those answers, seconds.
    round_trips: Option<(f64, f64)>,
    /// The latest-sent throttle so far, seconds after `origin`.
    last_refused: Option<f64>,
    /// Acceptances that came back after a throttle sent later than them.
    overtaken: u32,
}

/// The refills that explain a host's answers, requests/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Bounds {
    /// The slowest.
    pub(super) lo: f64,
    /// The fastest.
    pub(super) hi: f64,
    /// One bucket per exit explains them as well: the limit may be per client address.
    pub(super) per_exit: bool,
}

impl BucketFit {
    /// Answers it keeps: a thin host's first few throttles, a fast host's first fraction
    /// of a second (which the fit leaves to the other estimators).
    pub(super) const EVENTS: usize = 64;
    /// Acceptances overtaken by later throttles that show a site holding what it accepts.
    const HELD: u32 = 3;
    /// Refills tried between the bounds: about 2 % apart over a hundredfold range.
    const GRID: usize = 240;

    /// A success (`ok`) or a throttle of the request sent at `sent_at` through `exit`,
    /// answered `round_trip` later.
    pub(super) fn record(&mut self, sent_at: Instant, exit: usize, ok: bool, round_trip: Duration) {
        if self.events.len() >= Self::EVENTS {
            return;
        }
        let origin = *self.origin.get_or_insert(sent_at);
        let t = sent_at
            .checked_duration_since(origin)
            .map_or(0.0, |d| d.as_secs_f64());
        self.events.push((t, ok, exit));
        // A limiter that holds what it accepts (nginx `limit_req` with `burst=` and
        // without `nodelay`) answers its refusals at once and its acceptances up to burst
        // ÷ rate later: when a throttle is judged, the tokens of the acceptances still
        // held are missing from the debt, and the answers read as a deep bucket with
        // almost no refill. Such a site is no bucket the fit can read from its answers
        // as they come. One page slower than the next request's refusal is noise; a
        // few such are a site that holds its acceptances, and the fit stops listening
        // (`open`), its ceiling lifted with it.
        if ok && self.last_refused.is_some_and(|r| r > t) {
            self.overtaken += 1;
        }
        if !ok {
            self.last_refused = Some(self.last_refused.map_or(t, |r| r.max(t)));
        }
        let rt = round_trip.as_secs_f64();
        self.round_trips = Some(match self.round_trips {
            None => (rt, rt),
            Some((lo, hi)) => (lo.min(rt), hi.max(rt)),
        });
    }

    /// How far apart the answers' round trips were, seconds. The site saw two requests in
    /// the order they were sent unless they went out closer than that.
    pub(super) fn shuffle(&self) -> f64 {
        self.round_trips.map_or(0.0, |(lo, hi)| hi - lo)
    }

    /// Whether it still listens: not once it holds [`BucketFit::EVENTS`] answers, nor
    /// once the site showed that it holds its acceptances.
    pub(super) fn open(&self) -> bool {
        self.events.len() < Self::EVENTS && self.overtaken < Self::HELD
    }

    /// The refills within `[lo, hi]` (requests/s) of one bucket for the host that explain
    /// every answer so far; `None` while no throttle was seen or when none does.
    pub(super) fn bounds(&self, lo: f64, hi: f64) -> Option<Bounds> {
        if !(lo > 0.0 && hi > lo) || self.events.iter().all(|e| e.1) {
            return None;
        }
        let step = (hi / lo).ln() / (Self::GRID - 1) as f64;
        let grid = || (0..Self::GRID).map(move |i| lo * (step * i as f64).exp());
        let host = [self.sent_by(None)];
        let (slowest, fastest) = grid()
            .filter(|&c| explains(&host, c))
            .fold(None, |acc, c| match acc {
                None => Some((c, c)),
                Some((l, h)) => Some((f64::min(l, c), f64::max(h, c))),
            })?;
        // Requests spread over n exits, each exit's bucket refills at a share of the host's.
        let mut exits: Vec<usize> = self.events.iter().map(|e| e.2).collect();
        exits.sort_unstable();
        exits.dedup();
        let per_exit = exits.len() >= 2 && {
            let each: Vec<_> = exits.iter().map(|&x| self.sent_by(Some(x))).collect();
            let n = exits.len() as f64;
            grid().any(|c| explains(&each, c / n))
        };
        Some(Bounds {
            lo: slowest,
            hi: fastest,
            per_exit,
        })
    }

    /// The answers through `exit` (all of them for `None`) in the order they were sent:
    /// answers come back out of order, the site saw them in about the order sent.
    fn sent_by(&self, exit: Option<usize>) -> Vec<(f64, bool)> {
        let mut events: Vec<(f64, bool)> = self
            .events
            .iter()
            .filter(|e| exit.is_none_or(|x| e.2 == x))
            .map(|e| (e.0, e.1))
            .collect();
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        events
    }
}

/// Whether buckets alike, one per stream of `events` (each in the order sent), refilling
/// at `c` a second and of the shallowest depth their successes allow, leave every
/// throttle without a token.
fn explains(streams: &[Vec<(f64, bool)>], c: f64) -> bool {
    // A success needs a token: B - before >= 1.
    let depth = streams
        .iter()
        .flat_map(|s| debts(s, c))
        .filter(|e| e.1)
        .map(|(before, _)| before + 1.0)
        .fold(1.0, f64::max);
    // A throttle found none: B - before < 1.
    streams
        .iter()
        .flat_map(|s| debts(s, c))
        .filter(|e| !e.1)
        .all(|(before, _)| depth - before < 1.0)
}

/// Each request's debt before it (tokens taken and not yet refilled: a bucket of depth B
/// then holds B - debt), and whether it got through.
fn debts(events: &[(f64, bool)], c: f64) -> impl Iterator<Item = (f64, bool)> + '_ {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
            fit.record(t0 + Duration::from_secs_f64(t), 0, ok, Duration::ZERO);
        }
        fit
    }

    /// Sends at `rate` from `from` for `secs`.
    fn steady(from: f64, rate: f64, secs: f64) -> Vec<f64> {
        let n = (secs * rate) as usize;
        (0..n).map(|i| from + i as f64 / rate).collect()
    }

    #[test]
    fn a_site_that_holds_its_acceptances_is_not_read_as_a_bucket() {
        // nginx `burst=` without `nodelay` at 10 req/s, burst 10, met at 40 req/s: the
        // acceptances come back later and later, the refusals at once, overtaking them.
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut fit = BucketFit::default();
        let mut excess = 0.0_f64;
        let mut answers = Vec::new();
        for i in 0..30 {
            let t = f64::from(i) / 40.0;
            let next = if i == 0 {
                0.0
            } else {
                (excess - 10.0 / 40.0 + 1.0).max(0.0)
            };
            if next > 10.0 {
                answers.push((t + 0.02, t, false));
            } else {
                excess = next;
                answers.push((t + 0.02 + excess / 10.0, t, true));
            }
        }
        answers.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(back, sent, ok) in &answers {
            fit.record(at(sent), 0, ok, Duration::from_secs_f64(back - sent));
        }
        assert!(answers.iter().any(|a| !a.2), "some refused");
        assert!(
            !fit.open(),
            "a site that holds its acceptances is not listened to"
        );
    }

    #[test]
    fn a_slow_page_overtaken_once_is_noise() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut fit = BucketFit::default();
        // A 300 ms page sent before a refusal answered at once, twice: still a bucket.
        for round in 0..2 {
            let base = f64::from(round);
            fit.record(at(base + 0.1), 0, false, Duration::from_millis(20));
            fit.record(at(base), 0, true, Duration::from_millis(300));
        }
        assert!(fit.open());
    }

    #[test]
    fn a_pause_that_wasted_refill_does_not_pull_the_fit_below_the_rate() {
        // 5 req/s, burst 2. Slow start at 8/s until the throttle, a 1 s pause (three
        // tokens overflow), then 6/s until the next: what got through between the two
        // throttles says about 3.7/s; the bucket that explains every answer refills at 5.
        let mut times = steady(0.0, 8.0, 0.75);
        times.extend(steady(1.75, 6.0, 1.5));
        let fit = answers(5.0, 2.0, &times);
        let Bounds { lo, hi, .. } = fit.bounds(0.1, 20.0).expect("a bucket explains them");
        assert!(lo <= 5.0 && hi >= 5.0, "{lo}..{hi} holds the truth");
        assert!(lo > 4.2, "the fit excludes the span's low figure: {lo}");
    }

    #[test]
    fn the_range_narrows_as_answers_come() {
        // 1 req/s, burst 2, sent at 1.5/s: every few requests a throttle.
        let few = answers(1.0, 2.0, &steady(0.0, 1.5, 6.0));
        let many = answers(1.0, 2.0, &steady(0.0, 1.5, 30.0));
        let Bounds { lo: l1, hi: h1, .. } = few.bounds(0.1, 10.0).unwrap();
        let Bounds { lo: l2, hi: h2, .. } = many.bounds(0.1, 10.0).unwrap();
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
            odd.record(
                t0 + Duration::from_millis(100 * i as u64),
                0,
                ok,
                Duration::ZERO,
            );
        }
        assert_eq!(odd.bounds(0.1, 5.0), None);
    }

    /// Requests sent at `sends` (seconds, exit) to buckets refilling at `c`, of `depth`:
    /// one per exit where `per_exit`, else one for the host; as the site answers them.
    fn through(c: f64, depth: f64, sends: &[(f64, usize)], per_exit: bool) -> BucketFit {
        let t0 = Instant::now();
        let mut fit = BucketFit::default();
        let mut buckets = std::collections::HashMap::new();
        for &(t, exit) in sends {
            let key = if per_exit { exit } else { 0 };
            let (tokens, last) = buckets.entry(key).or_insert((depth, 0.0_f64));
            *tokens = (*tokens + c * (t - *last)).min(depth);
            *last = t;
            let ok = *tokens >= 1.0;
            if ok {
                *tokens -= 1.0;
            }
            fit.record(t0 + Duration::from_secs_f64(t), exit, ok, Duration::ZERO);
        }
        fit
    }

    #[test]
    fn uneven_turns_of_a_limit_per_exit_read_as_a_slow_host_and_are_told_apart() {
        // 2 req/s per exit, burst 1, four exits (8/s in all). Exit 1's turn comes round
        // again after 0.47 s while the host is sent to at 5/s: refused, which one bucket
        // for the host explains only below 6.4/s. A bucket per exit explains it too.
        let mut sends = vec![(0.0, 1), (0.2, 2), (0.3, 3), (0.4, 0), (0.47, 1)];
        sends.extend((0..10).map(|i| (0.6 + 0.2 * f64::from(i), (i % 4) as usize)));
        let fit = through(2.0, 1.0, &sends, true);
        let b = fit.bounds(0.1, 16.0).expect("one bucket explains them");
        assert!(b.hi < 6.5, "the host's bucket reads too slow: {b:?}");
        assert!(b.per_exit, "{b:?}");
    }

    #[test]
    fn the_shuffle_is_the_spread_of_the_round_trips() {
        let t0 = Instant::now();
        let mut fit = BucketFit::default();
        assert_eq!(fit.shuffle(), 0.0);
        for ms in [30, 45, 20, 33] {
            fit.record(t0, 0, true, Duration::from_millis(ms));
        }
        assert!((fit.shuffle() - 0.025).abs() < 1e-9, "{}", fit.shuffle());
    }

    #[test]
    fn a_limit_for_the_host_rules_out_one_per_exit() {
        // 10/s for the host, burst 2. Exit 0 gets two requests through 10 ms apart (its
        // bucket holds two); exit 1, 20 ms later, is refused after one: buckets alike
        // cannot do both, one for the host can.
        let sends = [
            (0.0, 0),
            (0.01, 0),
            (0.02, 1),
            (0.03, 1),
            (0.5, 0),
            (0.6, 1),
        ];
        let fit = through(10.0, 2.0, &sends, false);
        let b = fit.bounds(0.1, 40.0).expect("one bucket explains them");
        assert!(!b.per_exit, "{b:?}");
        assert!(b.lo <= 10.0 && b.hi >= 10.0, "{b:?}");
    }

    #[test]
    fn it_stops_listening_when_full() {
        let mut fit = answers(1.0, 2.0, &steady(0.0, 2.0, 40.0));
        assert!(!fit.open());
        let before = fit.events.len();
        fit.record(Instant::now(), 0, true, Duration::ZERO);
        assert_eq!(fit.events.len(), before);
        assert_eq!(before, BucketFit::EVENTS);
    }
}
