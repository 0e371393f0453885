//! The pacer: carries out the adaptive controller's decisions for one limiter key.
//!
//! The controller ([`crate::aimd`]) decides *how fast* (an interval) and *when not at all*
//! (a pause); the pacer, owned by whoever sends (an exit), turns that into per-request
//! [`Decision`]s. It is a [`RateLimiter`], so the sending side treats the adaptive
//! algorithm like any fixed one.
//!
//! Why a grid: send slots sit on a grid spaced one interval apart, and jitter only *delays*
//! a send within its slot (by up to `jitter × interval`). No send is ever ahead of the grid
//! (a site's token bucket never sees us run ahead of the announced rate), and keys that
//! resume together after a pause spread out instead of all firing at the same instant (the
//! thundering herd). A send that went out late moves the grid with it, except for what a
//! timer tick explains ([`TIMER_TICK`]): two sends are never closer than an interval less
//! a sliver, which is what a strict limit (burst 1) demands.
//!
//! Why a pause reaches queued requests: a pause is state that every later `check` consults,
//! so the 99 requests that were already waiting behind a 429 get `Wait` too, and after the
//! pause the grid restarts at the pause's end: the saved-up slots are dropped, not fired.

use std::time::{Duration, Instant};

use crate::decision::Decision;
use crate::limiter::{interval_of, Quota, RateLimiter};
use crate::rng::{RandomSource, SplitMix64};

/// The resolution of the runtime's timers (tokio's is a millisecond): a send woken by a
/// timer may be this late through no fault of the pacer.
pub const TIMER_TICK: Duration = Duration::from_millis(1);

/// Paces one key: an interval between sends, an optional pause, jitter within each slot.
#[derive(Debug, Clone)]
pub struct Pacer {
    interval: Duration,
    /// The current grid slot: the earliest instant the next send may go (before jitter).
    slot: Instant,
    /// Jitter drawn for the current slot; drawn once so that `Wait(d)` stays exact.
    offset: Option<Duration>,
    pause_until: Option<Instant>,
    jitter: f64,
    rng: SplitMix64,
    latest: Instant,
}

impl Pacer {
    /// A pacer sending one request per `interval`, the first one at once.
    /// `jitter` in `[0, 1)` is the fraction of an interval by which a send may be delayed.
    pub fn new(interval: Duration, jitter: f64, seed: u64, now: Instant) -> Self {
        Self {
            interval: interval.max(Duration::from_nanos(1)),
            slot: now,
            offset: None,
            pause_until: None,
            jitter: if jitter.is_finite() {
                jitter.clamp(0.0, 0.99)
            } else {
                0.0
            },
            rng: SplitMix64::new(seed),
            latest: now,
        }
    }

    /// The current interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The pause in force, if any.
    pub fn pause_until(&self) -> Option<Instant> {
        self.pause_until
    }

    /// Change the interval. The slot already granted stands; the next one is re-spaced.
    pub fn set_interval(&mut self, interval: Duration, now: Instant) {
        let now = self.observe(now);
        let interval = interval.max(Duration::from_nanos(1));
        // The pending slot was computed as last_send + old interval: re-space it so a
        // slow-down takes effect for the very next send, and a speed-up does not wait out
        // the old, longer interval. A slot a pause set is its end, not a send plus an
        // interval: it stays.
        if self.slot > now && self.pause_until != Some(self.slot) {
            let last = self.slot.checked_sub(self.interval).unwrap_or(now);
            self.slot = (last + interval).max(now);
        }
        self.interval = interval;
        self.offset = None;
    }

    /// No send before `until`. Extends, never shortens, a pause in force; the grid restarts
    /// at `until`, so slots saved up during the pause are dropped.
    pub fn pause(&mut self, until: Instant, now: Instant) {
        let now = self.observe(now);
        if until <= now {
            return;
        }
        let until = self.pause_until.map_or(until, |p| p.max(until));
        self.pause_until = Some(until);
        if self.slot < until {
            self.slot = until;
            self.offset = None;
        }
    }

    fn observe(&mut self, now: Instant) -> Instant {
        if now > self.latest {
            self.latest = now;
        }
        self.latest
    }

    /// How far behind `now` the grid may lag and be caught up: `tick² / interval`, at
    /// most a tick or an interval, whichever is longer (0.1 ms at a 10 ms interval; a
    /// whole tick for keys faster than one send per tick).
    fn catch_up(&self) -> Duration {
        let tick = TIMER_TICK.as_secs_f64();
        let i = self.interval.as_secs_f64();
        Duration::from_secs_f64((tick * tick / i).min(i.max(tick)))
    }

    fn offset(&mut self) -> Duration {
        if self.jitter == 0.0 {
            return Duration::ZERO;
        }
        if self.offset.is_none() {
            self.offset = Some(self.interval.mul_f64(self.jitter * self.rng.next_f64()));
        }
        self.offset.unwrap_or_default()
    }
}

impl RateLimiter for Pacer {
    fn peek(&self, now: Instant) -> Duration {
        // A check on a copy: the state is a few words, and the answer is then exactly
        // what `check` would say.
        self.clone().check(now).wait()
    }

    fn check(&mut self, now: Instant) -> Decision {
        let now = self.observe(now);
        if let Some(p) = self.pause_until {
            if now < p {
                return Decision::Wait(p - now);
            }
            self.pause_until = None;
        }
        // A late send may be made up only by what the runtime's timer tick explains: a
        // strict limit (nginx `limit_req` without `burst=`) refuses any two requests
        // closer than one interval, so a send a little late must not pull the next one
        // early, nor may a quiet spell leave a slot to burst with. Keys faster than a few
        // ticks catch up more, or a timer's lateness would cap their rate.
        let floor = now.checked_sub(self.catch_up()).unwrap_or(now);
        if self.slot + self.offset() < floor {
            self.slot = floor;
            self.offset = None;
        }
        let due = self.slot + self.offset();
        if now >= due {
            self.slot += self.interval;
            self.offset = None;
            Decision::Allow
        } else {
            Decision::Wait(due - now)
        }
    }

    fn set_rate(&mut self, rps: f64, now: Instant) {
        self.set_interval(interval_of(rps), now);
    }

    /// As the trait says, kept as a pause: an interval set before it ends does not move
    /// its end (see [`Pacer::set_interval`]).
    fn drain_until(&mut self, until: Instant, now: Instant) {
        let now = self.observe(now);
        if until.checked_sub(self.interval).is_some_and(|at| at >= now) {
            self.pause(until, now);
        } else {
            self.drain(now);
        }
    }

    fn drain(&mut self, now: Instant) {
        let now = self.observe(now);
        let next = now + self.interval;
        if self.slot < next {
            self.slot = next;
            self.offset = None;
        }
    }

    fn quota(&self) -> Quota {
        Quota::new(1.0e9 / self.interval.as_nanos() as f64, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn paces_one_per_interval_and_waits_exactly() {
        let c = FakeClock::new();
        let mut p = Pacer::new(100 * MS, 0.0, 1, c.now());
        assert_eq!(p.check(c.now()), Decision::Allow);
        assert_eq!(p.check(c.now()), Decision::Wait(100 * MS));
        c.advance(40 * MS);
        assert_eq!(p.check(c.now()), Decision::Wait(60 * MS));
        c.advance(60 * MS);
        assert_eq!(p.check(c.now()), Decision::Allow);
    }

    #[test]
    fn jittered_wait_is_exact_and_within_the_slot() {
        let c = FakeClock::new();
        let mut p = Pacer::new(100 * MS, 0.5, 7, c.now());
        let mut sends = vec![];
        for _ in 0..200 {
            match p.check(c.now()) {
                Decision::Allow => sends.push(c.elapsed()),
                Decision::Wait(d) => {
                    c.advance(d);
                    assert_eq!(p.check(c.now()), Decision::Allow, "Wait must be exact");
                    sends.push(c.elapsed());
                }
            }
        }
        for (n, t) in sends.iter().enumerate() {
            let slot = 100 * MS * n as u32;
            assert!(*t >= slot && *t < slot + 50 * MS, "send {n} at {t:?}");
        }
    }

    #[test]
    fn pause_reaches_waiting_requests_and_drops_saved_slots() {
        let c = FakeClock::new();
        let mut p = Pacer::new(10 * MS, 0.0, 1, c.now());
        assert!(p.check(c.now()).is_allow());
        p.pause(c.now() + Duration::from_secs(1), c.now());
        assert_eq!(p.check(c.now()), Decision::Wait(Duration::from_secs(1)));
        // A shorter pause does not cut the longer one short.
        p.pause(c.now() + 10 * MS, c.now());
        assert_eq!(p.pause_until(), Some(c.now() + Duration::from_secs(1)));
        c.advance(Duration::from_secs(1));
        assert!(p.check(c.now()).is_allow());
        // 100 slots passed during the pause: none of them are sent now.
        assert_eq!(p.check(c.now()), Decision::Wait(10 * MS));
    }

    #[test]
    fn a_pause_ends_with_a_send_whatever_interval_comes_with_it() {
        let c = FakeClock::new();
        let mut p = Pacer::new(200 * MS, 0.0, 1, c.now());
        assert!(p.check(c.now()).is_allow());
        // A Retry-After of one second read now; the slower rate it brings comes after it.
        let until = c.now() + Duration::from_secs(1);
        p.drain_until(until, c.now());
        p.set_interval(Duration::from_millis(900), c.now());
        assert_eq!(p.check(c.now()), Decision::Wait(Duration::from_secs(1)));
        c.advance(Duration::from_secs(1));
        assert!(p.check(c.now()).is_allow(), "sent as the pause ends");
        assert_eq!(p.check(c.now()), Decision::Wait(Duration::from_millis(900)));
        // A pause shorter than an interval: the interval rules, from now.
        p.drain_until(c.now() + 100 * MS, c.now());
        assert_eq!(p.check(c.now()), Decision::Wait(Duration::from_millis(900)));
    }

    #[test]
    fn interval_changes_apply_to_the_next_send() {
        let c = FakeClock::new();
        let mut p = Pacer::new(100 * MS, 0.0, 1, c.now());
        assert!(p.check(c.now()).is_allow());
        p.set_interval(300 * MS, c.now());
        assert_eq!(p.check(c.now()), Decision::Wait(300 * MS));
        p.set_interval(10 * MS, c.now());
        assert_eq!(p.check(c.now()), Decision::Wait(10 * MS));
        p.drain(c.now());
        assert_eq!(p.check(c.now()), Decision::Wait(10 * MS));
    }

    #[test]
    fn a_late_or_idle_key_never_sends_closer_than_an_interval_less_a_tick_share() {
        let c = FakeClock::new();
        let mut p = Pacer::new(10 * MS, 0.0, 1, c.now());
        assert!(p.check(c.now()).is_allow());
        // Idle for long: one send, then a whole interval (less 0.1 ms) to the next.
        c.advance(Duration::from_secs(5));
        assert!(p.check(c.now()).is_allow());
        assert_eq!(
            p.check(c.now()),
            Decision::Wait(Duration::from_micros(9_900))
        );
        // Woken 3 ms late: the next send is not pulled early by those 3 ms.
        c.advance(13 * MS);
        assert!(p.check(c.now()).is_allow());
        assert_eq!(
            p.check(c.now()),
            Decision::Wait(Duration::from_micros(9_900))
        );
    }

    #[test]
    fn a_key_faster_than_the_timer_tick_keeps_its_rate() {
        let c = FakeClock::new();
        // 4000/s: a timer that wakes once a millisecond must find four sends due.
        let mut p = Pacer::new(Duration::from_micros(250), 0.0, 1, c.now());
        let mut sent = 0;
        for _ in 0..100 {
            c.advance(MS);
            while p.check(c.now()).is_allow() {
                sent += 1;
            }
        }
        assert!((396..=404).contains(&sent), "{sent} sends in 100 ms");
    }
}
