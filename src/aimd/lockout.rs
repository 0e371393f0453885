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
//!   of the lowest of the rate when the refusals began, what the site accepted over the
//!   ten seconds before, and any earlier ceiling. Each ban halves it again, so a crawl
//!   settles below a penalty box after a few bans during its warm-up, then stays there.

use std::time::{Duration, Instant};

/// Longest wait between two probes of a locked-out key.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(120);

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

#[derive(Debug, Clone, Default)]
pub(super) struct Lockout {
    run: Option<Run>,
    active: Option<Active>,
    ceiling: Option<f64>,
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
        self.ceiling
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
                    backoff,
                    waiting_since: now,
                });
                Some(backoff)
            }
            None => None,
        }
    }

    /// A success: any run is over; if locked out, the lockout ends.
    pub(super) fn succeeded(&mut self) -> Option<Ended> {
        let run = self.run.take();
        self.active.take()?;
        let run = run?;
        let ceiling = if run.informed {
            None
        } else {
            self.bans += 1;
            let mut c = run.rate.min(run.accepted.max(f64::MIN_POSITIVE));
            if let Some(old) = self.ceiling {
                c = c.min(old);
            }
            self.ceiling = Some(c / 2.0);
            self.ceiling
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
                assert_eq!(l.succeeded(), None);
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
        let end = l.succeeded().unwrap();
        assert_eq!(end.ceiling, Some(20.0));
        assert_eq!(l.bans(), 1);
        // A second ban halves the ceiling again.
        for i in 0..60u32 {
            let now = t0 + Duration::from_secs(10) + MS * (20 * i);
            l.refused(now, now, 0.05, (30.0, 30.0), false);
        }
        assert_eq!(l.succeeded().unwrap().ceiling, Some(10.0));
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
        let end = l.succeeded().unwrap();
        assert_eq!(end.ceiling, None);
        assert_eq!(end.rate, 100.0);
        assert_eq!(l.ceiling(), None);
    }
}
