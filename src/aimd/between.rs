//! What got through between two throttles: the site's rate, whatever its burst.
//!
//! A throttle means the site's budget was empty when the request arrived. Between two
//! throttles the crawler kept asking (its answers were pacer-limited), so everything the
//! budget refilled in between was spent: the successes of the requests sent between the
//! two refused ones are the refill over that span, give or take the one request the
//! budget held at either end. The burst does not enter: it was spent before the first.
//!
//! That is what a small host needs. Slow start meets a 1 req/s site with a burst of 2 at
//! the third request, at five or ten times its rate, and the accepted rate over that
//! fraction of a second is mostly the burst. Cut by `decrease` per throttle from there, it
//! takes a dozen throttles (each a `Retry-After` pause) to come down; the span between the
//! first two already says "about one a second".
//!
//! The estimate is the upper end, `(ok + 1) / span`, so it errs towards the site's rate
//! from above and later throttles refine it; it only ever lowers the controller's
//! estimate, and only when that is off by more than a cut corrects. Spans are counted from
//! an anchor throttle for at most [`Between::SPAN`], so a capacity long gone does not
//! speak; answers that were not pacer-limited (the crawler had nothing to send) void a
//! span, since the budget then refilled unasked.
//!
//! Where it does not speak, and why: a span with [`Between::THIN`] successes or more is a
//! fast host's, whose round after the cut (`refusals`) says more; and there a one-second
//! `Retry-After` pause lasts far longer than the burst, so the refill the pause wasted (the
//! bucket was full) would make the span's figure low — on a 300 req/s host it halved a
//! right estimate. A small host can waste refill too (5 req/s, burst 2, a 1 s pause), so
//! the controller only uses the estimate while it learns a host (its first cuts) and
//! probes again within a few requests after it (see `Controller::lower_between`).

use std::time::{Duration, Instant};

/// Counts since the anchor throttle.
#[derive(Debug, Clone, Default)]
pub(super) struct Between {
    anchor: Option<Instant>,
    ok: u32,
    answers: u32,
    unlimited: u32,
}

impl Between {
    /// How far back an anchor may reach: longer spans mix capacities the site no longer
    /// has, and a pause far longer than the burst's worth wastes refill the span counts.
    const SPAN: Duration = Duration::from_secs(30);
    /// Spans with this many successes or more are left to `refusals` and the probe: on a
    /// fast host a pause (one `Retry-After` second) lasts far longer than its burst, the
    /// refill it wastes would make the span's figure low, and the round after the cut
    /// tells the rate better.
    const THIN: u32 = 8;
    /// The shortest span, in round trips.
    const SPAN_RTTS: f64 = 8.0;

    /// A success (or any other answer) to a request sent at `sent_at`.
    pub(super) fn answer(&mut self, sent_at: Instant, ok: bool, limited: bool) {
        if self.anchor.is_some_and(|a| sent_at >= a) {
            self.answers += 1;
            self.ok += u32::from(ok);
            self.unlimited += u32::from(!limited);
        }
    }

    /// A throttle of a request sent at `sent_at` that cut the rate: the refill rate since
    /// the anchor, if the span says one. The anchor stays while its span can still speak
    /// (thin, asked, under [`Between::SPAN`]), so each throttle of a slow host's first
    /// ones adds to the span and tightens the estimate; otherwise this throttle anchors
    /// the next span.
    ///
    /// `in_flight` (the rate times the round trip) is how many of the span's requests may
    /// still be on their way: counted as accepted, so the estimate stays an upper end; and
    /// a span under [`Between::SPAN_RTTS`] round trips is too short to say anything.
    pub(super) fn throttle(&mut self, sent_at: Instant, in_flight: f64, srtt: f64) -> Option<f64> {
        let since = self.anchor.map(|a| sent_at.saturating_duration_since(a));
        // Nothing got through (not thin): a lockout, the lockout logic's to wait out.
        let usable = since.is_some_and(|s| s <= Self::SPAN) && self.thin() && self.asked();
        let est = since
            .map(|s| s.as_secs_f64())
            .filter(|&span| usable && span > 0.0 && span >= Self::SPAN_RTTS * srtt)
            .map(|span| (f64::from(self.ok) + 1.0 + in_flight) / span);
        if !usable {
            *self = Self {
                anchor: Some(sent_at),
                ..Self::default()
            };
        }
        est
    }

    /// Between one and [`Between::THIN`] successes: something got through (none is a
    /// lockout), and the host is slow enough that the round after a cut (`refusals`)
    /// is too thin to tell its rate.
    fn thin(&self) -> bool {
        (1..Self::THIN).contains(&self.ok)
    }

    /// At most a quarter of the span's answers came when the crawler had nothing more to
    /// send: more, and the budget refilled unasked.
    fn asked(&self) -> bool {
        self.unlimited * 4 <= self.answers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn throttle(b: &mut Between, at: Instant) -> Option<f64> {
        b.throttle(at, 0.0, 0.0)
    }

    #[test]
    fn the_span_between_throttles_gives_the_refill_whatever_the_burst() {
        let t0 = Instant::now();
        let mut b = Between::default();
        assert_eq!(throttle(&mut b, t0), None);
        // One success a second for three seconds, then a throttle: about 1/s (the upper
        // end: 4 in 3 s).
        for i in 1..=3u32 {
            b.answer(t0 + 1000 * MS * i - 10 * MS, true, true);
        }
        let est = throttle(&mut b, t0 + 3000 * MS).unwrap();
        assert!((est - 4.0 / 3.0).abs() < 1e-9, "{est}");
        // The anchor stays: the longer span tightens the estimate (6 in 5 s).
        for i in 4..=5u32 {
            b.answer(t0 + 1000 * MS * i - 10 * MS, true, true);
        }
        let est = throttle(&mut b, t0 + 5000 * MS).unwrap();
        assert!((est - 1.2).abs() < 1e-9, "{est}");
    }

    #[test]
    fn a_fast_host_says_nothing_and_its_throttle_anchors_anew() {
        let t0 = Instant::now();
        // Eight successes or more: the round after the cut tells a fast host's rate.
        let mut b = Between::default();
        throttle(&mut b, t0);
        for i in 1..=8u32 {
            b.answer(t0 + 100 * MS * i, true, true);
        }
        assert_eq!(throttle(&mut b, t0 + 2000 * MS), None);
        b.answer(t0 + 2500 * MS, true, true);
        let est = throttle(&mut b, t0 + 3000 * MS).unwrap();
        assert!((est - 2.0).abs() < 1e-9, "{est}");
    }

    #[test]
    fn nothing_through_or_nothing_asked_says_nothing() {
        let t0 = Instant::now();
        let mut b = Between::default();
        throttle(&mut b, t0);
        b.answer(t0 + 100 * MS, false, true);
        assert_eq!(
            throttle(&mut b, t0 + 500 * MS),
            None,
            "no success: a lockout"
        );
        let mut b = Between::default();
        throttle(&mut b, t0);
        for i in 1..=4u32 {
            b.answer(t0 + 100 * MS * i, true, i > 2);
        }
        assert_eq!(
            throttle(&mut b, t0 + 1100 * MS),
            None,
            "half the answers unasked"
        );
        b.answer(t0 + 1500 * MS, true, true);
        assert!(throttle(&mut b, t0 + 2100 * MS).is_some());
    }

    #[test]
    fn a_span_too_long_or_too_short_says_nothing() {
        let t0 = Instant::now();
        let mut b = Between::default();
        throttle(&mut b, t0);
        b.answer(t0 + 1000 * MS, true, true);
        assert_eq!(throttle(&mut b, t0 + 31_000 * MS), None, "over 30 s");
        b.answer(t0 + 31_010 * MS, true, true);
        // A new anchor at 31 s;
        // 20 ms at a 40 ms round trip: under eight round trips.
        assert_eq!(b.throttle(t0 + 31_020 * MS, 0.0, 0.04), None);
    }

    #[test]
    fn answers_to_requests_sent_before_the_anchor_do_not_count() {
        let t0 = Instant::now();
        let mut b = Between::default();
        throttle(&mut b, t0 + 1000 * MS);
        b.answer(t0 + 900 * MS, true, true);
        b.answer(t0 + 1500 * MS, true, true);
        let est = throttle(&mut b, t0 + 2000 * MS).unwrap();
        assert!((est - 2.0).abs() < 1e-9, "{est}");
    }
}
