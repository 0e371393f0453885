//! What the round after slow start's first refusal says about the rate, with the burst
//! out of the way.
//!
//! A token bucket's burst hides its rate: slow start ramps into a full bucket, so
//! "accepted per second" over the tenths before the first refusal holds the burst too —
//! on a 300/s site with a burst of 30, a tenth of a second that looks like 600/s. Cut from
//! that, the rate stays far above the site's, and every later throttle cuts only by
//! `decrease`: six throttles (and on a site that sends `Retry-After: 1`, six one-second
//! pauses of the whole host) before the rate is right.
//!
//! A refused request is different: when it was sent, the bucket was empty. The requests
//! sent after it, until the cut it caused took effect, went out at the pacer's rate into
//! that empty bucket, so the share of them the site accepted, times that rate, is the
//! bucket's refill rate. The round is read whole, once the first answer to a request sent
//! after the cut is back. It takes [`Refusals::ROUND_MIN`] answers (a fast host;
//! on a slow one the round is too thin to say anything), and it only ever lowers the
//! controller's estimate, and only when it is off by more than a cut corrects anyway, so
//! its noise around a right estimate cannot ratchet it down.
//!
//! Why only after slow start: a probe's throttle comes at a rate just above the site's,
//! where the round's share accepted is close to one and its noise is most of what it says.

use std::time::Instant;

/// The round after slow start's first refusal, while it is counted.
#[derive(Debug, Clone, Default)]
pub(super) struct Refusals {
    round: Option<Round>,
}

/// The requests sent between a refused one and the cut it caused.
#[derive(Debug, Clone, Copy)]
struct Round {
    from: Instant,
    to: Instant,
    rate: f64,
    ok: u32,
    refused: u32,
}

impl Round {
    /// The refill rate the round shows, if it has enough answers and the site accepted
    /// some (nothing accepted is a lockout, not a rate: the lockout logic waits it out).
    fn estimate(&self) -> Option<f64> {
        let n = self.ok + self.refused;
        (n >= Refusals::ROUND_MIN && self.ok >= 2)
            .then(|| self.rate * f64::from(self.ok) / f64::from(n))
    }
}

impl Refusals {
    /// Answers a round needs before it says anything.
    pub(super) const ROUND_MIN: u32 = 8;
    /// Answers after which a round is done, however long it runs.
    const ROUND_MAX: u32 = 256;

    /// The refusal of a request sent at `sent_at` cut the rate at `now`; until then the
    /// pacer sent at `rate`: count the round between.
    pub(super) fn cut(&mut self, sent_at: Instant, now: Instant, rate: f64) {
        self.round = Some(Round {
            from: sent_at,
            to: now,
            rate,
            ok: 0,
            refused: 0,
        });
    }

    /// Whether the round being counted can speak: the pacer sent at least
    /// [`Refusals::ROUND_MIN`] requests between the refused one and the cut. Answered
    /// within a millisecond, a refusal comes back before the next request goes, and the
    /// round is empty.
    pub(super) fn can_speak(&self) -> bool {
        self.round.is_some_and(|r| {
            r.rate * r.to.saturating_duration_since(r.from).as_secs_f64()
                >= f64::from(Self::ROUND_MIN)
        })
    }

    /// An answer to a request sent at `sent_at` while the sender wanted more than the
    /// rate (`limited`): accepted or refused. Returns the round's estimate once the round
    /// is over: an answer to a request sent after the cut came back (once per round).
    pub(super) fn answer(&mut self, sent_at: Instant, ok: bool, limited: bool) -> Option<f64> {
        let round = self.round.as_mut()?;
        if sent_at > round.to {
            // The first answer to a request sent after the cut: the round's answers are
            // in (but for one overtaken on the way), and the whole round speaks.
            let r = self.round.take()?;
            return r.estimate();
        }
        if !limited || sent_at <= round.from {
            return None;
        }
        if ok {
            round.ok += 1;
        } else {
            round.refused += 1;
        }
        if round.ok + round.refused < Self::ROUND_MAX {
            return None;
        }
        self.round.take()?.estimate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_round_after_a_refusal_gives_the_refill_rate() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        r.cut(t0, t0 + 20 * MS, 600.0);
        // Twelve requests sent in the round, half of them accepted: 300/s, said once the
        // first answer to a request sent after the cut is back.
        for i in 0..12u32 {
            assert_eq!(r.answer(t0 + MS * (i + 1), i % 2 == 0, true), None);
        }
        assert_eq!(r.answer(t0 + 30 * MS, true, true), Some(300.0));
        // Once per round.
        assert_eq!(r.answer(t0 + 5 * MS, true, true), None);
    }

    #[test]
    fn a_round_can_speak_when_the_pacer_sent_enough_in_it() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        assert!(!r.can_speak(), "no round");
        // 600/s for 20 ms: twelve requests on their way.
        r.cut(t0, t0 + 20 * MS, 600.0);
        assert!(r.can_speak());
        // 400/s, refused within a millisecond: nothing on its way.
        r.cut(t0, t0 + MS, 400.0);
        assert!(!r.can_speak());
    }

    #[test]
    fn a_round_that_accepted_nothing_says_nothing() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        r.cut(t0, t0 + 20 * MS, 600.0);
        for i in 0..12u32 {
            assert_eq!(r.answer(t0 + MS * (i + 1), false, true), None);
        }
        assert_eq!(r.answer(t0 + 30 * MS, true, true), None);
    }

    #[test]
    fn answers_outside_the_round_or_unpaced_do_not_count() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        r.cut(t0 + 10 * MS, t0 + 20 * MS, 600.0);
        for i in 0..20u32 {
            assert_eq!(r.answer(t0 + MS * (i % 10), true, true), None, "before");
            assert_eq!(r.answer(t0 + 15 * MS, true, false), None, "unpaced");
        }
        assert_eq!(r.answer(t0 + 30 * MS, true, true), None, "nothing counted");
    }

    #[test]
    fn a_slow_start_estimate_the_burst_inflated_is_lowered_by_its_round() {
        use crate::aimd::tests::{ok, ramped, throttled};
        use crate::clock::{Clock, FakeClock};
        let c = FakeClock::new();
        let mut ctl = ramped(&c);
        let at = ctl.rate();
        // The first refusal (sent 50 ms ago) ends slow start; the estimate comes from what
        // was accepted, at least half the rate.
        let refused_at = c.now() - 50 * MS;
        ctl.on_response(&throttled(refused_at, None), c.now());
        assert!(
            ctl.capacity_estimate() >= at / 2.0,
            "{}",
            ctl.capacity_estimate()
        );
        // The round sent after it: every other one accepted.
        for i in 0..16u32 {
            c.advance(MS);
            let sent = refused_at + MS * (i + 1);
            let r = if i % 2 == 0 {
                ok(sent)
            } else {
                throttled(sent, None)
            };
            ctl.on_response(&r, c.now());
        }
        // The first answer to a request sent after the cut closes the round.
        c.advance(MS);
        ctl.on_response(&ok(c.now() - MS), c.now());
        let est = ctl.capacity_estimate();
        assert!((est - at / 2.0).abs() < 1.0, "{est} vs {}", at / 2.0);
        // Cut below it, climbing back along the cycle's curve.
        assert!(ctl.rate() < 0.91 * est, "{}", ctl.rate());
    }

    #[test]
    fn a_thin_round_says_nothing() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        r.cut(t0, t0 + 20 * MS, 10.0);
        for i in 0..(Refusals::ROUND_MIN - 1) {
            assert_eq!(r.answer(t0 + MS * (i + 1), i % 2 == 0, true), None);
        }
        assert_eq!(r.answer(t0 + 30 * MS, true, true), None);
    }
}
