//! Lockouts: when a site refuses everything for a while — a used-up quota window, or a
//! penalty box (a WAF or CDN rule that blocks a client for minutes, often with 403).
//!
//! Why a state of its own: cutting the rate once per round trip, as for an ordinary
//! throttle, drives it towards zero during a lockout (every request is refused whatever
//! the rate), and the crawl then restarts far below what the site allows. A lockout is
//! instead waited out with single probes at doubling intervals, and the rate before it
//! is kept. What comes after depends on what the site said:
//! - **informed** (a `Retry-After` or a quota header came with the refusals): a quota
//!   window; spending it and waiting is allowed, so the rate resumes as it was;
//! - **uninformed**: treat it as a ban. Bans are costly (minutes of nothing) and their
//!   threshold is a count over an unknown period, so the rate gets a **ceiling**: half
//!   of the lower of the rate when the refusals began and what the site accepted over
//!   the ten seconds before. A ban at or under the ceiling halves it again, so a crawl
//!   settles below a penalty box after a few bans during its warm-up.
//!
//! A ceiling is a guess, and a wrong one costs for the rest of the crawl: an outage (a
//! restart, a maintenance page) refuses everything too, and half of a penalty box's
//! rate is half of what the site allows. So the ceiling is **searched, at a priced
//! pace**. It holds for a step long enough that the ban which earned it is
//! [`PAUSE_SHARE`] of the step (a lockout of 2 s: 67 s; of a minute: 33 minutes),
//! doubled for every ban so far; then it is raised halfway to the rate the last ban came
//! at. A step held without a ban proves the rate the site accepted during it; a ban
//! during a raised step sends the ceiling back to the proven rate (not below: that rate
//! was held for a whole step). Once the proven rate is within 15 % of the banned one
//! (after a first ban, three steps: ½, ¾, ⅞), the next step lifts the ceiling
//! altogether: a crawl that then meets no ban was not banned for its rate. A failed test
//! costs one ban per step, and steps double, so bans stay a small share of the crawl
//! whatever the site; an outage is recovered from in four steps.

use std::time::{Duration, Instant};

/// Longest wait between two probes of a locked-out key.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(120);

/// The share of a ceiling's step the ban that set it may be: a test of a higher rate
/// that fails costs one more such ban. The share the pauses probes bring may cost, for
/// the same reason.
const PAUSE_SHARE: f64 = super::Controller::PAUSE_SHARE;

/// How close the proven rate must come to the banned one before the ceiling is lifted:
/// after a first ban, the third step (proven at ½, ¾, then ⅞ of the banned rate).
const LIFT_GAP: f64 = 0.15;

#[derive(Debug, Clone, Copy)]
struct Run {
    count: u32,
    start: Instant,
    rate: f64,
    accepted: f64,
    informed: bool,
}

#[derive(Debug, Clone, Copy)]
struct Active {
    /// When the key was locked out: the ban's length prices the search after it.
    began: Instant,
    backoff: Duration,
    /// When the current wait began: refusals of requests sent before it are old news.
    waiting_since: Instant,
}

/// How a lockout ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ended {
    /// The rate when the refusals began.
    pub(super) rate: f64,
    /// The new ceiling, if it was a ban.
    pub(super) ceiling: Option<f64>,
}

/// What bans have said about the rate, and the search for the highest rate that earns
/// none.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ceiling {
    /// The rate the last ban came at: too much, as far as is known.
    banned: f64,
    /// The highest rate the site accepted over a whole step without a ban.
    proven: f64,
    /// The ceiling in force: `proven`, a level under test, or infinite (lifted).
    level: f64,
    /// When the next step begins.
    next: Instant,
    /// How long a step lasts.
    step: Duration,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Lockout {
    run: Option<Run>,
    active: Option<Active>,
    ceiling: Option<Ceiling>,
    bans: u32,
}

impl Lockout {
    /// Refusals in a row (no success between) that make a lockout, over at least
    /// [`Lockout::min_span`].
    const RUN: u32 = 6;

    fn min_span(srtt: f64) -> Duration {
        Duration::from_secs_f64((4.0 * srtt).max(0.5))
    }

    /// Locked out now.
    pub(super) fn active(&self) -> bool {
        self.active.is_some()
    }

    /// The rate ceiling bans have left, if any.
    pub(super) fn ceiling(&self) -> Option<f64> {
        self.ceiling.map(|c| c.level).filter(|l| l.is_finite())
    }

    /// At `now`, if a step of the ceiling's search is over and no ban came: what the site
    /// accepted per second over the last ten seconds (`accepted`, asked only then) is
    /// proven, up to the level tested, and the next level is tried. A lifted ceiling
    /// that met no ban is gone.
    pub(super) fn step(&mut self, now: Instant, accepted: impl FnOnce() -> f64) {
        if self.active.is_some() || self.ceiling.is_none_or(|c| now < c.next) {
            return;
        }
        let Some(c) = self.ceiling.as_mut() else {
            return;
        };
        if c.level.is_infinite() {
            self.ceiling = None;
            return;
        }
        // Held at the level, within the meter's error (a tenth), proves the level.
        let accepted = accepted();
        let held = if accepted >= 0.9 * c.level {
            c.level
        } else {
            accepted
        };
        c.proven = c.proven.max(held);
        c.level = if c.banned - c.proven <= LIFT_GAP * c.banned {
            f64::INFINITY
        } else {
            (c.proven + c.banned) / 2.0
        };
        c.next = now + c.step;
    }

    /// Bans so far.
    pub(super) fn bans(&self) -> u32 {
        self.bans
    }

    /// A refusal (throttle or 403-like) of a request sent at `sent_at`. `rate` and
    /// `accepted` (what the site accepted per second over the last ten seconds) are
    /// recorded if this starts a run. Returns the wait before the next probe when the
    /// key is (or becomes) locked out and this refusal is news.
    pub(super) fn refused(
        &mut self,
        sent_at: Instant,
        now: Instant,
        srtt: f64,
        (rate, accepted): (f64, f64),
        informed: bool,
    ) -> Option<Duration> {
        let run = self.run.get_or_insert(Run {
            count: 0,
            start: now,
            rate,
            accepted,
            informed: false,
        });
        run.count += 1;
        run.informed |= informed;
        match self.active.as_mut() {
            Some(a) if sent_at >= a.waiting_since => {
                // A probe was refused: wait twice as long.
                a.backoff = (a.backoff * 2).min(MAX_BACKOFF);
                a.waiting_since = now;
                Some(a.backoff)
            }
            Some(_) => None,
            None if run.count >= Self::RUN
                && now.saturating_duration_since(run.start) >= Self::min_span(srtt) =>
            {
                let backoff = Duration::from_secs_f64((4.0 * srtt).max(1.0));
                self.active = Some(Active {
                    began: now,
                    backoff,
                    waiting_since: now,
                });
                Some(backoff)
            }
            None => None,
        }
    }

    /// A success at `now`: any run is over; if locked out, the lockout ends.
    pub(super) fn succeeded(&mut self, now: Instant) -> Option<Ended> {
        let run = self.run.take();
        let active = self.active.take()?;
        let run = run?;
        let ceiling = if run.informed {
            None
        } else {
            self.bans += 1;
            let rate = run.rate.min(run.accepted.max(f64::MIN_POSITIVE));
            let (banned, proven) = match self.ceiling {
                // Banned above what a whole step proved: back to the proven rate.
                Some(c) if rate > c.proven => (rate, c.proven),
                // Banned at or under it (or a first ban): half the rate that earned it.
                _ => (rate, rate / 2.0),
            };
            let ban = now.saturating_duration_since(active.began);
            let step = ban
                .max(Duration::from_secs(1))
                .div_f64(PAUSE_SHARE)
                .saturating_mul(1 << (self.bans - 1).min(16));
            self.ceiling = Some(Ceiling {
                banned,
                proven,
                level: proven,
                next: now + step,
                step,
            });
            Some(proven)
        };
        Some(Ended {
            rate: run.rate,
            ceiling,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_few_refusals_among_successes_are_no_lockout() {
        let t0 = Instant::now();
        let mut l = Lockout::default();
        for i in 0..100u32 {
            let now = t0 + MS * (10 * i);
            if i % 3 == 0 {
                assert_eq!(l.succeeded(now), None);
            } else {
                assert_eq!(l.refused(now, now, 0.05, (100.0, 90.0), false), None);
            }
        }
        assert!(!l.active());
    }

    #[test]
    fn a_ban_is_waited_out_with_doubling_probes_and_leaves_a_ceiling() {
        let t0 = Instant::now();
        let mut l = Lockout::default();
        let mut waits = vec![];
        for i in 0..60u32 {
            let now = t0 + MS * (20 * i);
            if let Some(w) = l.refused(now, now, 0.05, (100.0, 40.0), false) {
                waits.push(w);
            }
        }
        assert!(l.active());
        // 60 refusals in 1.2 s: the lockout starts once, at the 26th (0.5 s); every
        // later refusal was sent after that wait began, so each doubles it.
        assert_eq!(waits[0], Duration::from_secs(1));
        assert_eq!(waits[1], Duration::from_secs(2));
        assert!(waits.iter().all(|w| *w <= MAX_BACKOFF));
        let end = l.succeeded(t0 + Duration::from_secs(2)).unwrap();
        assert_eq!(end.ceiling, Some(20.0));
        assert_eq!(l.bans(), 1);
        // A second ban at the ceiling halves it again.
        let t1 = t0 + Duration::from_secs(10);
        ban(&mut l, t1, 20.0);
        assert_eq!(
            l.succeeded(t1 + Duration::from_secs(2)).unwrap().ceiling,
            Some(10.0)
        );
    }

    #[test]
    fn an_informed_lockout_is_a_window_and_leaves_no_ceiling() {
        let t0 = Instant::now();
        let mut l = Lockout::default();
        for i in 0..60u32 {
            let now = t0 + MS * (20 * i);
            l.refused(now, now, 0.05, (100.0, 40.0), i == 0);
        }
        assert!(l.active());
        let end = l.succeeded(t0 + Duration::from_secs(2)).unwrap();
        assert_eq!(end.ceiling, None);
        assert_eq!(end.rate, 100.0);
        assert_eq!(l.ceiling(), None);
    }

    /// Locks `l` out at `t` with refusals that began at `rate`, for about 1.2 s.
    fn ban(l: &mut Lockout, t: Instant, rate: f64) {
        for i in 0..60u32 {
            let now = t + MS * (20 * i);
            l.refused(now, now, 0.05, (rate, rate), false);
        }
        assert!(l.active());
    }

    /// A first ban at 40/s: locked out from the 26th refusal (0.5 s) for 2 s, so each
    /// step lasts 2 s / 3 %. The lockout, when it ended, and the step.
    fn banned_at_40() -> (Lockout, Instant, Duration) {
        let t0 = Instant::now();
        let mut l = Lockout::default();
        ban(&mut l, t0, 40.0);
        let end = t0 + 5 * MS * 500;
        assert_eq!(l.succeeded(end).unwrap().ceiling, Some(20.0));
        (l, end, Duration::from_secs(2).div_f64(PAUSE_SHARE))
    }

    #[test]
    fn a_ceiling_is_raised_a_step_at_a_time_and_lifted_once_the_banned_rate_is_near() {
        let (mut l, end, step) = banned_at_40();
        l.step(end + step - MS, || 20.0);
        assert_eq!(
            l.ceiling(),
            Some(20.0),
            "a step is not over before its time"
        );
        // Each step the site accepted all the ceiling allowed: halfway up, each time.
        let mut now = end + step;
        let mut levels = vec![];
        while let Some(level) = l.ceiling() {
            l.step(now, || level);
            levels.push(l.ceiling());
            now += step;
            assert!(levels.len() < 10, "{levels:?}");
        }
        assert_eq!(levels, [Some(30.0), Some(35.0), None]);
        // Lifted, and a whole step without a ban: the ceiling is gone.
        assert!(l.ceiling.is_some());
        l.step(now, || 40.0);
        assert_eq!(l.ceiling, None);
    }

    #[test]
    fn a_ban_above_the_proven_rate_returns_to_it_and_the_next_step_is_longer() {
        let (mut l, end, step) = banned_at_40();
        l.step(end + step, || 20.0);
        assert_eq!(l.ceiling(), Some(30.0));
        // Banned at 28 while testing 30: 20 was proven over a whole step, so it stays.
        let t1 = end + step + Duration::from_secs(5);
        ban(&mut l, t1, 28.0);
        let end = t1 + 5 * MS * 500;
        assert_eq!(l.succeeded(end).unwrap().ceiling, Some(20.0));
        // The second ban doubles the step.
        l.step(end + 2 * step - MS, || 20.0);
        assert_eq!(l.ceiling(), Some(20.0), "the second ban doubled the step");
        l.step(end + 2 * step, || 20.0);
        assert_eq!(l.ceiling(), Some(24.0));
    }

    #[test]
    fn a_step_proves_only_what_the_site_accepted() {
        let (mut l, end, step) = banned_at_40();
        l.step(end + step, || 20.0);
        // The crawl had little to send: 5/s proves nothing above 20.
        l.step(end + 2 * step, || 5.0);
        assert_eq!(l.ceiling(), Some(30.0));
        // Banned at 10, under what was proven: that was no proof; half again.
        let t1 = end + 2 * step + Duration::from_secs(1);
        ban(&mut l, t1, 10.0);
        assert_eq!(
            l.succeeded(t1 + Duration::from_secs(3)).unwrap().ceiling,
            Some(5.0)
        );
    }
}
