//! Failures that are not throttles: when may they slow a host?
//!
//! A 429 or 503 is the site's word. A reset, a timeout or a 500 may just be a broken page
//! or a flaky backend, and a site can be unlimited and still fail 5–10 % of requests:
//! slowing the whole host for that only makes the crawl slower without helping anyone.
//! So errors count only when they **dominate** the answers (most of them fail: a site that mostly fails
//! should not be hammered) or **rise**: their recent share jumps well above the long-run
//! share. After a cut for a rise, the next answers tell whether the rate was the cause:
//! if the share does not fall, it is the site's normal, and it becomes the long-run share.

/// Error share over three horizons, as exponentially weighted averages per answer.
#[derive(Debug, Clone, Default)]
pub(super) struct ErrorSignal {
    short: f64,
    mid: f64,
    long: f64,
    answers: u64,
    /// After a cut for a rise: the short share then, and answers since.
    check: Option<(f64, u32)>,
}

impl ErrorSignal {
    const SHORT: f64 = 1.0 / 16.0;
    const MID: f64 = 1.0 / 64.0;
    const LONG: f64 = 1.0 / 512.0;
    /// Answers before the shares mean anything.
    const WARM: u64 = 32;
    /// Answers after a cut before judging whether it helped.
    const CHECK: u32 = 48;

    /// One answer: an error or not. A throttle is not an error (it is the site's word).
    pub(super) fn observe(&mut self, error: bool) {
        let x = if error { 1.0 } else { 0.0 };
        self.answers += 1;
        // A plain mean until each horizon is filled, so the first answers weigh alike.
        let first = 1.0 / self.answers as f64;
        self.short += (x - self.short) * first.max(Self::SHORT);
        self.mid += (x - self.mid) * first.max(Self::MID);
        self.long += (x - self.long) * first.max(Self::LONG);
        if let Some((at, n)) = self.check.as_mut() {
            *n += 1;
            if *n >= Self::CHECK {
                if self.short >= 0.8 * *at {
                    // The cut did not help: these errors do not depend on our rate.
                    self.long = self.long.max(self.mid);
                }
                self.check = None;
            }
        }
    }

    /// Errors say "slow down": they dominate, or they rose well above the usual share.
    pub(super) fn overloaded(&self) -> bool {
        if self.answers < Self::WARM {
            return false;
        }
        // Over the last few dozen answers, so a handful of unlucky pages in a row is not
        // a trend.
        let dominate = self.mid >= 0.6;
        let rise = self.check.is_none() && self.mid >= 0.25 && self.mid >= 2.0 * self.long + 0.1;
        dominate || rise
    }

    /// The controller cut the rate for errors: watch whether that helps.
    pub(super) fn cut(&mut self) {
        self.check = Some((self.short, 0));
    }

    /// The share over the last few dozen answers.
    pub(super) fn share(&self) -> f64 {
        self.mid
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RandomSource, SplitMix64};

    #[test]
    fn a_steady_share_of_faulty_pages_never_says_overload() {
        for share in [0.05, 0.1, 0.3] {
            let mut rng = SplitMix64::new(3);
            let mut e = ErrorSignal::default();
            let loud = (0..200_000)
                .filter(|_| {
                    e.observe(rng.next_f64() < share);
                    e.overloaded()
                })
                .count();
            assert_eq!(loud, 0, "share {share}");
        }
    }

    #[test]
    fn a_jump_or_a_majority_does() {
        let mut e = ErrorSignal::default();
        for i in 0..2000 {
            e.observe(i % 20 == 0);
        }
        assert!(!e.overloaded());
        let mut fired = false;
        for i in 0..100 {
            e.observe(i % 2 == 0);
            fired |= e.overloaded();
        }
        assert!(fired, "a jump from 5 % to 50 % is a rise");
        let mut e = ErrorSignal::default();
        for _ in 0..200 {
            e.observe(true);
        }
        assert!(e.overloaded(), "all errors dominate");
    }

    #[test]
    fn a_rise_the_cut_does_not_fix_becomes_the_norm() {
        let mut e = ErrorSignal::default();
        for _ in 0..1000 {
            e.observe(false);
        }
        for i in 0..100 {
            e.observe(i % 5 < 2);
        }
        assert!(e.overloaded());
        e.cut();
        for i in 0..2000 {
            e.observe(i % 5 < 2);
            assert!(!e.overloaded() || e.share() >= 0.5, "at answer {i}");
        }
    }
}
