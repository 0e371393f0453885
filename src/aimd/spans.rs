//! What the spans after two pauses say about a bucket: its refill, its burst aside.
//!
//! A token bucket (refill `C` a second, depth `B`) that a pause refilled is full when the
//! pause ends. Sending into it faster than `C`, the crawler is accepted until the bucket
//! is empty and then refused: the `N` requests accepted in the `Δ` seconds from the end
//! of the pause to the first one refused are its depth and its refill over the span,
//! `B + C·Δ`, within one request. One span cannot tell the two apart; two at different
//! rates can, since the depth is the same: `C = (N₂ − N₁) / (Δ₂ − Δ₁)`.
//!
//! That is what a host answered within a millisecond needs. Slow start's first estimate
//! there is read from tenths of a second the burst carried (the round of requests on
//! their way, which corrects it elsewhere (`refusals`), is empty), and a `Retry-After`
//! pause refills the bucket before every later probe, so each throttle only corrects
//! the estimate by a cut: five pauses of the whole host on the demo's site before the
//! rate is right. The spans after the first two pauses say the rate at once.
//!
//! Where it does not speak: a span the crawler did not fill (an answer came while it had
//! nothing more to send) or that ended in no refusal; two spans so close in length that
//! the request either way leaves the figure's upper end, which is what it says, too
//! high to lower the estimate; and a bucket the figures
//! make so deep that the pauses could not have refilled it (then the spans did not start
//! full, and the figure is not a refill). It only ever lowers the estimate, as every
//! estimator here that reads a rate from refusals.
//!
//! A span also prices the next cut ([`PauseSpans::costly`]): where the pause before a thin
//! span withheld more than the span got through, the pauses are most of the host's time,
//! and the next throttle halves the rate instead of cutting a tenth.

use std::time::{Duration, Instant};

/// A span from a pause's end to the first refusal.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// When the pause ended.
    from: Instant,
    /// How long the pause was, seconds: long enough to refill the bucket?
    pause: f64,
    /// Requests sent in the span and accepted.
    ok: u32,
    /// The crawler had nothing more to send for one of them: the span says nothing.
    void: bool,
}

/// The span running now, and the last one that ended in a refusal.
#[derive(Debug, Clone, Default)]
pub(super) struct PauseSpans {
    open: Option<Span>,
    /// The last span that ended in a refusal.
    last: Option<Ended>,
    /// The span the last refusal ended, if it ended one (see [`PauseSpans::costly`]).
    ended: Option<Ended>,
}

/// A span that ended in a refusal.
#[derive(Debug, Clone, Copy)]
struct Ended {
    /// Its length, seconds.
    secs: f64,
    /// Requests accepted in it.
    ok: f64,
    /// The pause before it, seconds.
    pause: f64,
    /// When it ended.
    at: Instant,
}

impl PauseSpans {
    /// How far apart two spans may end: further, and the site's capacity may have
    /// changed between them.
    const APART: Duration = Duration::from_secs(30);
    /// Spans under this many successes are a thin host's: its burst and little refill,
    /// sent within a fraction of a second at one rate, as the bucket's arithmetic in
    /// [`PauseSpans::costly`] assumes. A longer span sees the rate grow within it, and
    /// a quota window's span is its fixed count whatever the rate.
    const THIN: f64 = 16.0;

    /// A pause of `pause` ends at `until`: a span starts there, the bucket full.
    pub(super) fn paused(&mut self, until: Instant, pause: Duration) {
        self.open = Some(Span {
            from: until,
            pause: pause.as_secs_f64(),
            ok: 0,
            void: false,
        });
    }

    /// A success of a request sent at `sent_at`; `limited`: the crawler wanted more.
    pub(super) fn success(&mut self, sent_at: Instant, limited: bool) {
        if let Some(s) = self.open.as_mut().filter(|s| sent_at >= s.from) {
            s.ok += 1;
            s.void |= !limited;
        }
    }

    /// Whether the last refusal ended a thin span (under [`PauseSpans::THIN`] accepted)
    /// whose pause, priced at `rate`, withheld at least twice the requests the span got
    /// through. A `Retry-After` is mostly the same on every 429, so the next throttle will
    /// cost as much: a cut of a tenth wins a tenth of the rate per pause paid, and a host
    /// met far above its rate pays a pause per tenth on its way down (a 1 req/s host met
    /// at 5 req/s with `Retry-After: 60`, seven minutes). Halving, as TCP does at a loss,
    /// costs at most half the rate until the curve climbs back. Thin spans only: a full
    /// bucket sent into at several times its refill takes its burst at any such rate,
    /// so a cut shows in the count only near the refill. Near it the pause withholds
    /// less than the span got through (a 1 req/s host's one-second pause, after which
    /// it takes about one request a second), and the cut stays a tenth.
    pub(super) fn costly(&self, rate: f64) -> bool {
        self.ended
            .is_some_and(|e| e.ok < Self::THIN && e.pause * rate >= 2.0 * e.ok)
    }

    /// A refusal of a request sent at `sent_at`: the running span ends, and with the last
    /// one says the bucket's refill, requests/s, if they can.
    pub(super) fn refusal(&mut self, sent_at: Instant) -> Option<f64> {
        self.ended = None;
        let span = self.open.filter(|s| sent_at >= s.from)?;
        self.open = None;
        if span.void || span.ok == 0 {
            self.last = None;
            return None;
        }
        let now = Ended {
            secs: sent_at.duration_since(span.from).as_secs_f64(),
            ok: f64::from(span.ok),
            pause: span.pause,
            at: sent_at,
        };
        self.ended = Some(now);
        let before = self.last.replace(now)?;
        if now.at.saturating_duration_since(before.at) > Self::APART {
            return None;
        }
        let (short, long) = if before.secs <= now.secs {
            (before, now)
        } else {
            (now, before)
        };
        let dd = (long.secs - short.secs).max(f64::MIN_POSITIVE);
        // Each count is under one request below `B + C·Δ`, so the refill is within
        // `1 / dd` of the figure either way. The range's upper end is kept, as every
        // estimate here errs above: it bounds the refill however wide the range is (spans
        // close in length), and a wide one only says less, since the estimate is lowered
        // to it only when it is lower by more than a cut.
        let c = (long.ok - short.ok) / dd;
        let err = 2.0 / dd;
        let depth = long.ok - c * long.secs;
        let refilled = short.pause.min(long.pause) * c >= depth;
        (c > 0.0 && depth > -1.0 && refilled).then_some(c + err / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::limiter::{Quota, RateLimiter, TokenBucket};

    const S: Duration = Duration::from_secs(1);

    /// A bucket of `depth` refilling at `c`, full at a pause's end: sent into at `rate`,
    /// how many are accepted before the first refusal, and when that one is sent
    /// (seconds after the pause).
    fn span(c: f64, depth: u32, rate: f64) -> (u32, f64) {
        let t0 = Instant::now();
        let mut site = TokenBucket::new(Quota::new(c, depth), t0);
        let mut ok = 0;
        while site.check(t0 + Duration::from_secs_f64(f64::from(ok) / rate)) == Decision::Allow {
            ok += 1;
        }
        (ok, f64::from(ok) / rate)
    }

    fn feed(s: &mut PauseSpans, t0: Instant, pause: f64, (ok, at): (u32, f64)) -> Option<f64> {
        let end = t0 + Duration::from_secs_f64(pause);
        s.paused(end, Duration::from_secs_f64(pause));
        for i in 0..ok {
            s.success(
                end + Duration::from_secs_f64(at * f64::from(i) / f64::from(ok)),
                true,
            );
        }
        s.refusal(end + Duration::from_secs_f64(at))
    }

    /// Two spans into the demo's site seen as one bucket (200/s, 20 deep), each after a
    /// pause of `pause` seconds, at `rates`, ending `apart` from each other: what the
    /// second says.
    fn pair(pause: f64, rates: (f64, f64), apart: Duration) -> Option<f64> {
        let t0 = Instant::now();
        let mut s = PauseSpans::default();
        assert_eq!(
            feed(&mut s, t0, pause, span(200.0, 20, rates.0)),
            None,
            "one span"
        );
        feed(&mut s, t0 + apart, pause, span(200.0, 20, rates.1))
    }

    #[test]
    fn two_spans_at_different_rates_give_the_refill_whatever_the_burst() {
        let c = pair(1.0, (360.0, 240.0), 3 * S).expect("two spans say the rate");
        assert!((195.0..225.0).contains(&c), "{c}");
        let c = pair(1.0, (240.0, 360.0), 3 * S).expect("in either order");
        assert!((195.0..225.0).contains(&c), "{c}");
    }

    #[test]
    fn spans_too_alike_say_little_and_far_apart_or_after_pauses_too_short_nothing() {
        // Rates 5 % apart: the spans' lengths differ by less than the counts' error, and
        // the range's upper end, still a bound, is a third above the refill: it lowers
        // only an estimate further off than that.
        let c = pair(1.0, (360.0, 342.0), 3 * S).expect("a bound");
        assert!((1.2 * 200.0..1.5 * 200.0).contains(&c), "{c}");
        // The site's capacity may have changed between them.
        assert_eq!(pair(1.0, (360.0, 240.0), 2 * PauseSpans::APART), None);
        // Pauses of 10 ms cannot have refilled a bucket the spans make 20 deep.
        assert_eq!(pair(0.01, (360.0, 240.0), 3 * S), None);
    }

    #[test]
    fn a_thin_span_whose_pause_withheld_more_than_it_got_through_is_costly() {
        // 1 req/s, 2 deep, paused a minute before the span: at 4.5 req/s it takes the
        // burst only, and the minute withheld 270 requests.
        let t0 = Instant::now();
        let mut s = PauseSpans::default();
        feed(&mut s, t0, 60.0, span(1.0, 2, 4.5));
        assert!(s.costly(4.5));
        // A refusal that ends no span (none was running) clears it.
        s.refusal(t0 + 62 * S);
        assert!(!s.costly(4.5));
        // A one-second pause of a 1 req/s host near its rate withheld about one request,
        // and the span after it got one through: a tenth's cut.
        let mut s = PauseSpans::default();
        feed(&mut s, t0, 1.0, (1, 0.7));
        assert!(!s.costly(1.4));
        // The same pause at five times the rate withheld five.
        assert!(s.costly(5.0));
        // A deep bucket's span is not thin: the rate grows within it, and a quota
        // window's count is the same at any rate.
        let mut s = PauseSpans::default();
        feed(&mut s, t0, 1.0, span(200.0, 20, 4000.0));
        assert!(!s.costly(4000.0));
    }

    #[test]
    fn a_span_the_crawler_did_not_fill_says_nothing() {
        let t0 = Instant::now();
        let mut s = PauseSpans::default();
        feed(&mut s, t0, 1.0, span(200.0, 20, 360.0));
        let end = t0 + 4 * S;
        s.paused(end, S);
        s.success(end, false);
        assert_eq!(s.refusal(end + Duration::from_millis(400)), None);
    }

    #[test]
    fn a_refusal_before_the_pause_ended_leaves_the_span_running() {
        let t0 = Instant::now();
        let mut s = PauseSpans::default();
        s.paused(t0 + Duration::from_secs(1), Duration::from_secs(1));
        assert_eq!(s.refusal(t0 + Duration::from_millis(500)), None);
        assert!(s.open.is_some());
    }
}
