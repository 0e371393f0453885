//! The decisions of a shared-frontier consumer (`exitcrawl --frontier`): how long to keep
//! reconnecting to a Redis that went away, whether a failed URL goes back to the queue,
//! when a consumer whose failures are all its own stops taking work, and when heartbeats
//! and claim passes are due. Plain functions of their state and `now`; the crawl binary
//! (`exitcrawl-actors`, `cli/frontier.rs`) carries them out against Redis.
//!
//! The rules, and why:
//! - **Redis loss is an event, not a loop** ([`RedisWait`]): an unreachable or loading
//!   Redis is retried with a doubling delay until `wait` has passed since the first
//!   failure, then the consumer gives up; a lost queue (the consumer group or the stream
//!   is gone: Redis restarted without persistence, or the key was deleted) or any other
//!   refusal ends it at once — retrying cannot bring the queue back.
//! - **A consumer's own failures do not consume the queue** ([`LocalJudge`]): a URL that
//!   failed for a reason of this consumer's (no exit could connect, every exit ejected, no
//!   exit of the host's address family, or timeouts while nothing else gets an answer)
//!   goes back to the queue for another consumer, up to [`MAX_DELIVERIES`] times counted
//!   in the entry itself; when every one of the last `window` URLs failed locally, the
//!   consumer stops taking work.
//! - **Claim only from the dead** ([`Liveness`]): a consumer's heartbeat key lives for
//!   `claim_idle` and is refreshed four times as often; entries are claimed only from
//!   consumers whose key has expired, and not before live consumers coming out of their
//!   reconnect backoff after a Redis outage have refreshed theirs.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Default of `--redis-wait`: long enough for a Redis restart (an AOF of millions of
/// entries loads in tens of seconds), short enough that a crawl whose Redis is gone for
/// good says so within a minute.
pub const DEFAULT_REDIS_WAIT: Duration = Duration::from_secs(60);

/// How many times a URL is handed out and fails locally before its failure is recorded
/// as final: a URL no consumer can fetch still ends with a record.
pub const MAX_DELIVERIES: u32 = 3;

/// First delay between reconnect attempts; it doubles up to [`RECONNECT_MAX`].
pub const RECONNECT_BASE: Duration = Duration::from_millis(100);
/// Longest delay between reconnect attempts.
pub const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// What kind of Redis failure a consumer met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisFault {
    /// No connection, or no answer in time.
    Unreachable,
    /// Redis answered that it cannot serve yet (`LOADING` its data after a restart,
    /// `BUSY` with a script, `TRYAGAIN`, `MASTERDOWN`).
    Busy,
    /// The consumer group or the stream no longer exists (`NOGROUP`).
    QueueLost,
    /// Any other error answer (out of memory, wrong type, no permission, …).
    Refused,
}

/// What to do after a Redis failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Try again after this delay.
    RetryIn(Duration),
    /// Redis has been unreachable for `down_for`, at least the wait: stop.
    GiveUp {
        /// Since the first failure of this outage.
        down_for: Duration,
    },
    /// Retrying cannot help (the queue is lost, or Redis refused): stop now.
    Fatal,
}

/// Reconnect with backoff up to a deadline (see the module docs).
#[derive(Debug, Clone)]
pub struct RedisWait {
    wait: Duration,
    since: Option<Instant>,
    attempts: u32,
}

impl RedisWait {
    /// Give up once Redis has been unreachable for `wait`.
    pub fn new(wait: Duration) -> Self {
        Self {
            wait,
            since: None,
            attempts: 0,
        }
    }

    /// A call failed with `fault` at `now`. The delays double from [`RECONNECT_BASE`] up
    /// to [`RECONNECT_MAX`], and the last one ends at the deadline, so the attempt made
    /// then is the last.
    pub fn failed(&mut self, fault: RedisFault, now: Instant) -> Next {
        if matches!(fault, RedisFault::QueueLost | RedisFault::Refused) {
            return Next::Fatal;
        }
        let since = *self.since.get_or_insert(now);
        let down_for = now.saturating_duration_since(since);
        if down_for >= self.wait {
            return Next::GiveUp { down_for };
        }
        let doubled = RECONNECT_BASE.saturating_mul(1 << self.attempts.min(16));
        self.attempts = self.attempts.saturating_add(1);
        Next::RetryIn(doubled.min(RECONNECT_MAX).min(self.wait - down_for))
    }

    /// A call succeeded: the outage (if one was open) is over; returns how long it lasted.
    pub fn succeeded(&mut self, now: Instant) -> Option<Duration> {
        self.attempts = 0;
        self.since.take().map(|s| now.saturating_duration_since(s))
    }

    /// When the current outage began; `None` while Redis answers.
    pub fn down_since(&self) -> Option<Instant> {
        self.since
    }

    /// The deadline given to [`RedisWait::new`].
    pub fn wait(&self) -> Duration {
        self.wait
    }
}

/// How one URL's fetch ended, as far as blame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// An HTTP answer (any status), or a decision that needed none (robots.txt).
    Answered,
    /// A failure at the site's end (refused, reset, TLS, too large, …): another consumer
    /// would meet it too.
    Remote,
    /// A failure of this consumer's own: no exit could open a connection, every exit is
    /// ejected, no exit of the host's address family.
    Local,
    /// A timeout, or a name that did not resolve: the site's when this consumer gets
    /// answers, this consumer's (its network, its resolver) when it gets none.
    Timeout,
}

/// What becomes of a URL after its fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Write its record and complete it.
    Record,
    /// Put it back in the queue for another consumer, with `tries` local failures
    /// counted; no record.
    Requeue {
        /// Local failures of this URL so far, this one included.
        tries: u32,
    },
}

/// Judges whether a consumer's failures are its own (see the module docs).
#[derive(Debug, Clone)]
pub struct LocalJudge {
    /// The last outcomes, newest last: `true` = failed locally.
    recent: VecDeque<bool>,
    window: usize,
}

impl LocalJudge {
    /// Judge over the last `window` URLs (at least 1).
    pub fn new(window: usize) -> Self {
        let window = window.max(1);
        Self {
            recent: VecDeque::with_capacity(window),
            window,
        }
    }

    /// The window for a consumer that runs `concurrency` fetches at once: two rounds of
    /// them, at least 16, so that a handful of unlucky URLs does not stop a consumer.
    pub fn window_for(concurrency: usize) -> usize {
        concurrency.saturating_mul(2).clamp(16, 256)
    }

    /// Whether `blame` counts as this consumer's own failure now.
    pub fn is_local(&self, blame: Blame) -> bool {
        match blame {
            Blame::Local => true,
            Blame::Timeout => self.recent.iter().all(|local| *local),
            Blame::Answered | Blame::Remote => false,
        }
    }

    /// The fate of a URL that ended with `blame`, having failed locally `tries` times
    /// before; the outcome is remembered for [`LocalJudge::verdict`].
    pub fn fate(&mut self, blame: Blame, tries: u32) -> Fate {
        let local = self.is_local(blame);
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent.push_back(local);
        let tries = tries.saturating_add(1);
        if local && tries < MAX_DELIVERIES {
            Fate::Requeue { tries }
        } else {
            Fate::Record
        }
    }

    /// `Some(n)`: each of the last `n` URLs failed locally — this consumer should stop
    /// taking work. `None` while any of them did not, or fewer than the window ended.
    pub fn verdict(&self) -> Option<usize> {
        (self.recent.len() == self.window && self.recent.iter().all(|l| *l)).then_some(self.window)
    }
}

/// Shortest heartbeat interval, whatever `--claim-idle` says: a refresh per 50 ms is
/// already more than liveness needs.
pub const MIN_HEARTBEAT_EVERY: Duration = Duration::from_millis(50);

/// Heartbeat and claim timing for one `claim_idle` (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// How long a heartbeat key lives: a consumer silent for this long is dead.
    pub ttl: Duration,
    /// How often a consumer refreshes its key, and looks for dead consumers.
    pub every: Duration,
}

impl Liveness {
    /// The timing for `--claim-idle`: the key lives `claim_idle` (at least 4 heartbeat
    /// intervals), refreshed every quarter of it, so one late refresh does not make a
    /// live consumer look dead, and a dead one's work is taken over within 1¼
    /// `claim_idle` of its last heartbeat.
    pub fn new(claim_idle: Duration) -> Self {
        let every = (claim_idle / 4).max(MIN_HEARTBEAT_EVERY);
        Self {
            ttl: claim_idle.max(every * 4),
            every,
        }
    }

    /// When the claim pass after one made at `now` is due.
    pub fn next_pass(&self, now: Instant) -> Instant {
        now + self.every
    }

    /// When the first claim pass is due after Redis answered again at `now` (or, not
    /// knowing whether it just did, at a consumer's start): every heartbeat may have
    /// expired while Redis was away (its keys expire on its clock), and a live consumer's
    /// refresh may wait out its reconnect backoff first — up to [`RECONNECT_MAX`] after
    /// Redis is back, the Redis handle's backoff being capped there too — then up to one
    /// interval for its heartbeat's next turn. Claiming before then would take over what
    /// live consumers are fetching when `ttl` is shorter than that backoff; the `ttl` on
    /// top gives that refresh the room for lateness a heartbeat always has.
    pub fn first_pass_after_outage(&self, now: Instant) -> Instant {
        now + self.ttl + RECONNECT_MAX + self.every
    }

    /// Whether this consumer's own key may have expired at `now`, its last successful
    /// refresh at `last_ok`: other consumers may then take its entries over.
    pub fn lapsed(&self, last_ok: Instant, now: Instant) -> bool {
        now.saturating_duration_since(last_ok) >= self.ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn reconnects_with_doubling_delays_then_gives_up_at_the_deadline() {
        let clock = FakeClock::new();
        let mut w = RedisWait::new(10 * S);
        let mut delays = Vec::new();
        let mut attempts = 0;
        let down_for = loop {
            attempts += 1;
            match w.failed(RedisFault::Unreachable, clock.now()) {
                Next::RetryIn(d) => {
                    delays.push(d);
                    clock.advance(d);
                }
                Next::GiveUp { down_for } => break down_for,
                Next::Fatal => panic!("an outage is not fatal"),
            }
        };
        assert_eq!(&delays[..4], &[100 * MS, 200 * MS, 400 * MS, 800 * MS]);
        assert!(delays.iter().all(|d| *d <= RECONNECT_MAX));
        assert_eq!(
            down_for,
            10 * S,
            "the last attempt is at the deadline, not after"
        );
        assert_eq!(attempts, delays.len() + 1);
        assert_eq!(w.down_since(), Some(clock.now() - 10 * S));
    }

    #[test]
    fn a_success_ends_the_outage_and_resets_the_backoff() {
        let clock = FakeClock::new();
        let mut w = RedisWait::new(60 * S);
        assert_eq!(w.succeeded(clock.now()), None, "no outage to end");
        assert_eq!(
            w.failed(RedisFault::Busy, clock.now()),
            Next::RetryIn(100 * MS)
        );
        clock.advance(100 * MS);
        assert_eq!(
            w.failed(RedisFault::Unreachable, clock.now()),
            Next::RetryIn(200 * MS)
        );
        clock.advance(3 * S);
        assert_eq!(w.succeeded(clock.now()), Some(3100 * MS));
        assert_eq!(w.down_since(), None);
        assert_eq!(
            w.failed(RedisFault::Unreachable, clock.now()),
            Next::RetryIn(100 * MS),
            "a new outage starts over"
        );
    }

    #[test]
    fn a_lost_queue_or_a_refusal_is_fatal_at_once() {
        let clock = FakeClock::new();
        let mut w = RedisWait::new(60 * S);
        assert_eq!(w.failed(RedisFault::QueueLost, clock.now()), Next::Fatal);
        assert_eq!(w.failed(RedisFault::Refused, clock.now()), Next::Fatal);
        assert_eq!(w.down_since(), None, "not an outage");
    }

    #[test]
    fn local_failures_go_back_up_to_the_delivery_limit() {
        let mut j = LocalJudge::new(16);
        assert_eq!(j.fate(Blame::Local, 0), Fate::Requeue { tries: 1 });
        assert_eq!(j.fate(Blame::Local, 1), Fate::Requeue { tries: 2 });
        assert_eq!(
            j.fate(Blame::Local, MAX_DELIVERIES - 1),
            Fate::Record,
            "the last delivery's failure is recorded"
        );
        assert_eq!(j.fate(Blame::Remote, 0), Fate::Record);
        assert_eq!(j.fate(Blame::Answered, 0), Fate::Record);
    }

    #[test]
    fn timeouts_are_local_only_while_nothing_else_gets_an_answer() {
        let mut j = LocalJudge::new(4);
        assert!(j.is_local(Blame::Timeout), "nothing answered yet");
        assert_eq!(j.fate(Blame::Timeout, 0), Fate::Requeue { tries: 1 });
        j.fate(Blame::Answered, 0);
        assert!(
            !j.is_local(Blame::Timeout),
            "the site's: others get answers"
        );
        assert_eq!(j.fate(Blame::Timeout, 0), Fate::Record);
        assert!(
            j.is_local(Blame::Local),
            "no exit connecting is always local"
        );
    }

    #[test]
    fn a_consumer_whose_last_window_all_failed_locally_stops() {
        let mut j = LocalJudge::new(LocalJudge::window_for(4));
        assert_eq!(LocalJudge::window_for(4), 16);
        assert_eq!(LocalJudge::window_for(64), 128);
        for _ in 0..15 {
            j.fate(Blame::Timeout, 0);
            assert_eq!(j.verdict(), None, "fewer than the window");
        }
        j.fate(Blame::Local, 0);
        assert_eq!(j.verdict(), Some(16));
        // A consumer that got answers and then lost its network stops too.
        let mut j = LocalJudge::new(3);
        j.fate(Blame::Answered, 0);
        j.fate(Blame::Local, 0);
        j.fate(Blame::Local, 0);
        assert_eq!(j.verdict(), None);
        j.fate(Blame::Local, 0);
        assert_eq!(j.verdict(), Some(3));
        j.fate(Blame::Remote, 0);
        assert_eq!(j.verdict(), None, "a remote failure is not the consumer's");
    }

    #[test]
    fn heartbeats_expire_after_claim_idle_and_claims_wait_for_them() {
        let clock = FakeClock::new();
        let l = Liveness::new(2 * S);
        assert_eq!(l.ttl, 2 * S);
        assert_eq!(l.every, 500 * MS);
        let t0 = clock.now();
        assert_eq!(l.next_pass(t0), t0 + 500 * MS);
        assert_eq!(
            l.first_pass_after_outage(t0),
            t0 + 2 * S + RECONNECT_MAX + 500 * MS,
            "live consumers out of their reconnect backoff refresh their heartbeats first"
        );
        assert!(!l.lapsed(t0, t0 + 1999 * MS));
        assert!(l.lapsed(t0, t0 + 2 * S));
        let tiny = Liveness::new(MS);
        assert_eq!(tiny.every, MIN_HEARTBEAT_EVERY);
        assert_eq!(tiny.ttl, 4 * MIN_HEARTBEAT_EVERY, "outlives four refreshes");
    }
}
