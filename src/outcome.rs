//! What becomes of an ended attempt: delivered, retried after a backoff, put back in its
//! host's queue, or moved to another exit.
//!
//! Why in the core: which answers are worth another try, when the retry budget has the
//! last word, and what counts as an attempt decide how hard a crawl leans on a sick site.
//! Kept here, they are plain functions of the outcome, the attempt count and the budget at
//! `now`, tested on a fake clock; the scheduler only carries the verdict out (the reply,
//! the timer, the metrics).
//!
//! Two rules shape the verdicts:
//! - **A throttle means later, not failed.** A 429/503 puts the URL back until its host
//!   may be sent to again, however many times; it is not an error attempt and draws
//!   nothing from the retry budget (the pacer, not the retry, is what spares the site).
//!   A URL ends throttled out only when its host has refused *every* request for
//!   `give_up_after`, or asks for a pause longer than `max_retry_after`.
//! - **The retry budget delays, it does not fail.** A retry the budget cannot afford
//!   waits until it can ([`Verdict::Defer`]); only `max_retries` error attempts, or the
//!   crawl shutting down, end a URL that wants another try.

use std::fmt;
use std::time::{Duration, Instant};

use crate::retry::RetryBudget;

/// How a request failed without an HTTP answer: the one vocabulary of failures, from the
/// exit that saw it to the controller that learns from it and the verdict on the fetch.
///
/// Why sorted by whose fault it is: a site must not be backed off from, or counted an
/// error against, for a failure on our side before anything was sent (a source IP that
/// vanished, a v4 exit asked for a v6-only host, ports exhausted). Those move the fetch to
/// another exit and let the health machine judge the exit ([`Failure::is_local`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// Failed on this host before anything was sent (bind failed, `EADDRNOTAVAIL`, ports
    /// exhausted): the exit's fault, not the site's.
    LocalConnect,
    /// This process is out of file descriptors (`EMFILE`, `ENFILE`): nothing was sent, and
    /// it is neither the site's fault nor the exit's: every exit would fail alike until
    /// requests in flight give some back, so the exit is not ejected for it.
    OutOfFiles,
    /// The host has no address of the exit's family (an IPv4 exit, an IPv6-only host):
    /// nothing was sent, and it is neither the exit's fault nor the site's: another exit
    /// may reach it.
    WrongFamily,
    /// The exit's proxy could not be reached in time, refused the tunnel (407, 403, an
    /// answer to `CONNECT` that does not say the site was out of its reach, a SOCKS5
    /// refusal), stalled on what it answers by itself (a SOCKS5 greeting) or broke the
    /// handshake: nothing reached the site, and it is the exit's fault. A proxy
    /// that could not reach the site (500, 502, 503, 504 to `CONNECT`, a SOCKS5
    /// "refused", "unreachable" or "TTL expired") reports the site's failure instead.
    Proxy,
    /// The site (or something on the path) refused the TCP connection (RST to SYN, an
    /// ICMP unreachable for the host, a proxy saying either).
    ConnectRefused,
    /// Connect, or waiting for the answer, took too long.
    Timeout,
    /// The connection was reset or closed after it was established (a body cut short of
    /// its framing included).
    Reset,
    /// The host's name did not resolve this time: the resolver failed temporarily
    /// (`EAI_AGAIN`: no answer from the DNS server, or `SERVFAIL`) or timed out. Nothing
    /// was sent; a resolver's hiccup passes, so it is worth another try. A name that does
    /// not exist is [`Failure::Other`].
    Unresolved,
    /// Anything else (a name that does not exist, malformed framing, a body that does not decode, a body over the
    /// cap, the private-address rule): trying again would end the same way.
    Other,
}

impl Failure {
    /// Nothing reached the site, so the failure must not count against it: the fetch
    /// moves to another exit, and the attempt does not count.
    pub fn is_local(self) -> bool {
        matches!(
            self,
            Failure::LocalConnect | Failure::WrongFamily | Failure::OutOfFiles | Failure::Proxy
        )
    }

    /// The exit itself failed: counts towards ejecting it.
    pub fn is_exit_fault(self) -> bool {
        matches!(self, Failure::LocalConnect | Failure::Proxy)
    }

    /// The site, the path to it or the resolver failed in a way the next attempt may not
    /// (refused, reset, timed out, the name not resolved this time): worth another try.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Failure::ConnectRefused | Failure::Timeout | Failure::Reset | Failure::Unresolved
        )
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The site answered with `status`, not a throttle.
    Answer {
        /// The HTTP status.
        status: u16,
    },
    /// The site answered with a throttle status (429/503 by default,
    /// `limiter.throttle_statuses`).
    Throttled(Throttle),
    /// No HTTP answer. A [local](Failure::is_local) failure sent nothing: not an
    /// attempt, not the site's doing.
    Failed(Failure),
}

/// What a throttle said, and what its host has said lately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    /// The site's `Retry-After` (or a used-up quota's reset), as the site gave it.
    pub retry_after: Option<Duration>,
    /// How long the host has answered nothing but throttles, this one included (see
    /// [`Refusing`]).
    pub refusing_for: Duration,
    /// For a fetch pinned to one exit (`preferred_exit`): how long the host has answered
    /// nothing but throttles through that exit (its throttles then count there, not in
    /// `refusing_for`). The host's own run ends with any answer through another exit, and
    /// a pinned fetch would wait for ever; counted in the host's run, its throttles would
    /// give up URLs the other exits serve.
    pub pinned_for: Option<Duration>,
    /// The pause binds the exit that read it alone, and another exit may take the fetch
    /// within `max_retry_after`: a pause longer than that is then the exit's, not the
    /// URL's, and the fetch goes on through the others.
    pub elsewhere: bool,
}

impl Ended {
    /// Whether this outcome is worth another attempt: the site asked us to slow down (a
    /// throttle), failed on its side (a 5xx), or the connection failed in a way the next
    /// one may not (refused, reset, timed out). A 4xx or a broken page would end the same.
    pub fn wants_retry(self) -> bool {
        match self {
            Ended::Answer { status } => status >= 500,
            Ended::Throttled(_) => true,
            Ended::Failed(f) => f.is_transient(),
        }
    }
}

/// What to do with an ended attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The outcome is the fetch's result.
    Final,
    /// An error worth another try: retry after a backoff (the retry budget paid for it).
    Retry,
    /// A throttle: back to its host's queue once the host may be sent to again (at least
    /// the site's Retry-After). Not an error attempt; the retry budget is not asked.
    Later,
    /// An error worth another try that the retry budget cannot afford now: wait
    /// [`RetryBudget::recheck_after`] and ask it again. The retry is delayed, not lost.
    Defer,
    /// The host will not take this URL: the fetch ends throttled out, and so do the
    /// host's other waiting fetches (see [`GaveUp`]).
    GaveUp(GaveUp),
    /// Send it through another exit; the attempt does not count.
    Move,
    /// The crawler is shutting down and the attempt wants another: the fetch ends
    /// interrupted (the crawler's `Shutdown`), not with this attempt's outcome, so that a
    /// throttle or an error that would have been tried again is not taken as the URL's
    /// answer.
    Interrupted,
}

/// Why a throttled URL was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaveUp {
    /// The host answered nothing but throttles for this long, at least `give_up_after`.
    Refusing(Duration),
    /// The fetch is pinned to an exit ([`Throttle::pinned_for`]) through which the host
    /// answered nothing but throttles for this long, at least `give_up_after`, while it
    /// may have answered others: this fetch alone is given up.
    RefusingExit(Duration),
    /// The site asked for a pause this long (Retry-After or a quota's reset), longer
    /// than `max_retry_after`.
    RetryAfter(Duration),
}

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GaveUp::Refusing(d) => write!(
                f,
                "the host refused every request for {} s (crawler.give_up_after_ms)",
                d.as_secs()
            ),
            GaveUp::RefusingExit(d) => write!(
                f,
                "the host refused every request through the fetch's preferred exit for {} s \
                 (crawler.give_up_after_ms)",
                d.as_secs()
            ),
            // Pauses are read up to a week (`headers::MAX_HINT`): one that long may have
            // been longer.
            GaveUp::RetryAfter(d) => write!(
                f,
                "the site asked to wait {}{} s, longer than crawler.max_retry_after_ms",
                if *d >= crate::headers::MAX_HINT {
                    "≥ "
                } else {
                    ""
                },
                d.as_secs()
            ),
        }
    }
}

/// What the retry decision reads besides the outcome.
#[derive(Debug, Clone, Copy)]
pub struct Attempts {
    /// Requests sent so far, this one included (throttled ones too).
    pub made: u32,
    /// Of those, how many were answered with a throttle, this one included.
    pub throttled: u32,
    /// The fetch's own bound on throttles that wait (`None`: no bound but the host's
    /// `give_up_after`); past it, a throttle is the fetch's answer.
    pub max_throttles: Option<u32>,
    /// The crawler is shutting down: nothing is retried, and what would have been ends
    /// [`Verdict::Interrupted`].
    pub shutting_down: bool,
}

impl Attempts {
    /// Attempts that ended in an error or an answer other than a throttle: what
    /// `max_retries` bounds.
    pub fn errors(&self) -> u32 {
        self.made.saturating_sub(self.throttled)
    }
}

/// The bounds a URL's attempts live within (`[crawler]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `max_retries`: error attempts beyond the first.
    pub max_retries: u32,
    /// `give_up_after_ms`: a host that refuses everything for this long is given up.
    pub give_up_after: Duration,
    /// `max_retry_after_ms`: the longest pause a site may ask for; over it the URL is
    /// given up, and the pause is cut to this.
    pub max_retry_after: Duration,
}

/// The verdict on an attempt that ended as `ended`. A retry is withdrawn from `budget`
/// at `now` only for an error that calls for one while attempts are left, so the budget
/// counts exactly the retries of errors made; throttles never touch it.
pub fn decide(
    ended: Ended,
    a: Attempts,
    bounds: &Bounds,
    budget: &mut RetryBudget,
    now: Instant,
) -> Verdict {
    match ended {
        Ended::Failed(f) if f.is_local() => Verdict::Move,
        _ if !ended.wants_retry() => Verdict::Final,
        Ended::Throttled(_) if a.max_throttles.is_some_and(|m| a.throttled > m) => Verdict::Final,
        Ended::Throttled(t) => match t.retry_after {
            Some(ra) if ra > bounds.max_retry_after && !t.elsewhere => {
                Verdict::GaveUp(GaveUp::RetryAfter(ra))
            }
            _ if t.refusing_for >= bounds.give_up_after => {
                Verdict::GaveUp(GaveUp::Refusing(t.refusing_for))
            }
            _ if t.pinned_for.is_some_and(|d| d >= bounds.give_up_after) => {
                Verdict::GaveUp(GaveUp::RefusingExit(t.pinned_for.unwrap_or_default()))
            }
            _ if a.shutting_down => Verdict::Interrupted,
            _ => Verdict::Later,
        },
        _ if a.errors() > bounds.max_retries => Verdict::Final,
        _ if a.shutting_down => Verdict::Interrupted,
        _ if budget.try_withdraw(now) => Verdict::Retry,
        _ => Verdict::Defer,
    }
}

/// Since when each host has answered nothing but throttles: the clock of
/// `give_up_after`. Only hosts refusing right now have an entry, so it stays small on a
/// crawl of many hosts.
#[derive(Debug, Default)]
pub struct Refusing<K> {
    /// The run's first throttle and its last.
    since: std::collections::HashMap<K, (Instant, Instant)>,
}

impl<K: std::hash::Hash + Eq + Clone> Refusing<K> {
    /// A host that refuses everything is asked again within this long (a pause it named
    /// at most `max_retry_after`, a lockout's probe at most two minutes): a throttle
    /// longer after the last one starts a run of its own, since nothing was asked in
    /// between. Without it a run left open (its URLs ended otherwise) counted the hours
    /// since, and one throttle then gave the host up.
    pub const QUIET_FLOOR: Duration = Duration::from_secs(120);

    /// `host` throttled at `now`: how long it has refused everything, counted from the
    /// first throttle of a run whose throttles came at most `quiet` apart (see
    /// [`Refusing::QUIET_FLOOR`]).
    pub fn throttled(&mut self, host: &K, now: Instant, quiet: Duration) -> Duration {
        let run = self.since.entry(host.clone()).or_insert((now, now));
        if now.saturating_duration_since(run.1) > quiet.max(Self::QUIET_FLOOR) {
            run.0 = now;
        }
        run.1 = now;
        now.saturating_duration_since(run.0)
    }

    /// `host` answered with anything but a throttle: it takes requests.
    pub fn answered(&mut self, host: &K) {
        if !self.since.is_empty() {
            self.since.remove(host);
        }
    }

    /// `host`'s run ended without an answer: its waiting URLs were given up for a pause
    /// too long to wait. A URL of it met later starts a run of its own, and the time
    /// between is not counted as refusing.
    pub fn given_up(&mut self, host: &K) {
        self.answered(host);
    }

    /// Hosts refusing now.
    pub fn len(&self) -> usize {
        self.since.len()
    }

    /// No host is refusing.
    pub fn is_empty(&self) -> bool {
        self.since.is_empty()
    }
}

/// What the limiter hears of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A throttle (a status in `throttle_statuses`).
    Throttled,
    /// Any other answer: a success to the controller.
    Succeeded,
    /// Nothing: a fixed algorithm learns only from throttles and rate-limit headers.
    Nothing,
}

/// What the limiter hears of an answer that is a `throttle` or not, under an `adaptive`
/// algorithm or a fixed one, with the site's rate-limit headers (`hinted`) or without.
/// Why fixed algorithms hear hints: a `Retry-After` or `RateLimit-Reset` pauses any pacer.
pub fn heard(throttle: bool, adaptive: bool, hinted: bool) -> Heard {
    match (throttle, adaptive || hinted) {
        (true, _) => Heard::Throttled,
        (false, true) => Heard::Succeeded,
        (false, false) => Heard::Nothing,
    }
}

/// The longest a fetch waits for an exit to come back when every exit is ejected or
/// disabled: exits return after their ejection time, so that long, but never more than
/// this, or a crawl whose exits are all gone for good would hang.
pub const ALL_DOWN_WAIT_MAX: Duration = Duration::from_secs(30);

/// What a fetch does when every exit is ejected or disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllDown {
    /// Look again after this long (at most a second, so an exit back early is seen).
    Wait(Duration),
    /// Waited long enough: fail it as `no_healthy_exit`.
    GiveUp {
        /// How long it waited.
        waited: Duration,
    },
}

/// Every exit has been ejected or disabled since `since`, with none recovering, and still
/// is at `now`; exits are ejected for at most `max_ejection`. The caller keeps `since`
/// for the fleet, not per fetch: once it is past, every waiting fetch gives up at once.
pub fn all_down(since: Instant, now: Instant, max_ejection: Duration) -> AllDown {
    let limit = max_ejection.min(ALL_DOWN_WAIT_MAX);
    let waited = now.saturating_duration_since(since);
    if waited < limit {
        AllDown::Wait((limit - waited).min(Duration::from_secs(1)))
    } else {
        AllDown::GiveUp { waited }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use std::time::Duration;

    const SECS: Duration = Duration::from_secs(1);

    fn attempts(made: u32) -> Attempts {
        Attempts {
            made,
            throttled: 0,
            max_throttles: None,
            shutting_down: false,
        }
    }

    fn bounds() -> Bounds {
        Bounds {
            max_retries: 3,
            give_up_after: 600 * SECS,
            max_retry_after: 300 * SECS,
        }
    }

    fn roomy_budget() -> RetryBudget {
        RetryBudget::new(1.0, 100.0, Duration::from_secs(10))
    }

    fn throttle(retry_after: Option<Duration>, refusing_for: Duration) -> Ended {
        Ended::Throttled(Throttle {
            retry_after,
            refusing_for,
            pinned_for: None,
            elsewhere: false,
        })
    }

    #[test]
    fn which_outcomes_want_a_retry() {
        let answer = |status| Ended::Answer { status };
        assert!(throttle(None, Duration::ZERO).wants_retry());
        assert!(answer(500).wants_retry());
        assert!(answer(503).wants_retry());
        assert!(!answer(200).wants_retry());
        assert!(!answer(404).wants_retry());
        assert!(!answer(403).wants_retry());
        for f in [
            Failure::ConnectRefused,
            Failure::Timeout,
            Failure::Reset,
            Failure::Unresolved,
        ] {
            assert!(Ended::Failed(f).wants_retry(), "{f:?}");
        }
        for f in [
            Failure::Other,
            Failure::LocalConnect,
            Failure::OutOfFiles,
            Failure::WrongFamily,
            Failure::Proxy,
        ] {
            assert!(!Ended::Failed(f).wants_retry(), "{f:?}");
        }
    }

    #[test]
    fn retries_while_attempts_are_left_then_final() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let e = Ended::Answer { status: 500 };
        for made in 1..=3 {
            let v = decide(e, attempts(made), &bounds(), &mut budget, clock.now());
            assert_eq!(v, Verdict::Retry);
        }
        let v = decide(e, attempts(4), &bounds(), &mut budget, clock.now());
        assert_eq!(v, Verdict::Final);
        assert_eq!(budget.retries_in_window(), 3);
    }

    #[test]
    fn nothing_sent_moves_without_touching_the_budget() {
        let clock = FakeClock::new();
        let mut budget = RetryBudget::new(0.0, 0.0, Duration::from_secs(10));
        for f in [
            Failure::LocalConnect,
            Failure::OutOfFiles,
            Failure::WrongFamily,
            Failure::Proxy,
        ] {
            let v = decide(
                Ended::Failed(f),
                attempts(9),
                &bounds(),
                &mut budget,
                clock.now(),
            );
            assert_eq!(v, Verdict::Move, "{f:?}");
        }
        assert_eq!(budget.retries_in_window(), 0);
    }

    #[test]
    fn final_outcomes_take_nothing_from_the_budget() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let ok = Ended::Answer { status: 200 };
        let v = decide(ok, attempts(1), &bounds(), &mut budget, clock.now());
        assert_eq!(v, Verdict::Final);
        let broken = Ended::Failed(Failure::Other);
        let v = decide(broken, attempts(1), &bounds(), &mut budget, clock.now());
        assert_eq!(v, Verdict::Final);
        assert_eq!(budget.retries_in_window(), 0);
    }

    #[test]
    fn shutting_down_retries_nothing_and_what_would_be_retried_is_interrupted() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let a = Attempts {
            shutting_down: true,
            ..attempts(1)
        };
        let b = bounds();
        let mut verdict = |e| decide(e, a, &b, &mut budget, clock.now());
        assert_eq!(
            verdict(Ended::Failed(Failure::Timeout)),
            Verdict::Interrupted
        );
        assert_eq!(verdict(Ended::Answer { status: 503 }), Verdict::Interrupted);
        assert_eq!(
            verdict(throttle(None, Duration::ZERO)),
            Verdict::Interrupted
        );
        // What is final stays final: an answer, a broken page, attempts spent, a host
        // given up.
        assert_eq!(verdict(Ended::Answer { status: 404 }), Verdict::Final);
        assert_eq!(verdict(Ended::Failed(Failure::Other)), Verdict::Final);
        let spent = Attempts { made: 4, ..a };
        assert_eq!(
            decide(
                Ended::Answer { status: 500 },
                spent,
                &b,
                &mut budget,
                clock.now()
            ),
            Verdict::Final
        );
        let refusing = throttle(None, b.give_up_after);
        assert!(matches!(
            decide(refusing, a, &b, &mut budget, clock.now()),
            Verdict::GaveUp(GaveUp::Refusing(_))
        ));
        assert_eq!(budget.retries_in_window(), 0);
    }

    #[test]
    fn a_fetch_pinned_to_an_exit_the_host_refuses_is_given_up_alone() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let b = bounds();
        let pinned = |for_: Duration| {
            Ended::Throttled(Throttle {
                retry_after: Some(SECS),
                refusing_for: SECS,
                pinned_for: Some(for_),
                elsewhere: false,
            })
        };
        let a = attempts(1);
        assert_eq!(
            decide(
                pinned(b.give_up_after - SECS),
                a,
                &b,
                &mut budget,
                clock.now()
            ),
            Verdict::Later
        );
        assert_eq!(
            decide(pinned(b.give_up_after), a, &b, &mut budget, clock.now()),
            Verdict::GaveUp(GaveUp::RefusingExit(b.give_up_after))
        );
    }

    #[test]
    fn a_pause_too_long_that_binds_one_exit_of_several_is_that_exits() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let b = bounds();
        let long = Some(b.max_retry_after + SECS);
        let bound_here = Ended::Throttled(Throttle {
            retry_after: long,
            refusing_for: SECS,
            pinned_for: None,
            elsewhere: true,
        });
        assert_eq!(
            decide(bound_here, attempts(1), &b, &mut budget, clock.now()),
            Verdict::Later
        );
        assert_eq!(
            decide(
                throttle(long, SECS),
                attempts(1),
                &b,
                &mut budget,
                clock.now()
            ),
            Verdict::GaveUp(GaveUp::RetryAfter(b.max_retry_after + SECS))
        );
        // The host's own refusal still bounds it.
        let refusing = Ended::Throttled(Throttle {
            retry_after: long,
            refusing_for: b.give_up_after,
            pinned_for: None,
            elsewhere: true,
        });
        assert!(matches!(
            decide(refusing, attempts(1), &b, &mut budget, clock.now()),
            Verdict::GaveUp(GaveUp::Refusing(_))
        ));
    }

    #[test]
    fn a_throttle_is_later_however_often_and_never_asks_the_budget() {
        let clock = FakeClock::new();
        // A budget that allows nothing at all.
        let mut budget = RetryBudget::new(0.0, 0.0, Duration::from_secs(10));
        for made in [1, 4, 50, 1000] {
            let a = Attempts {
                made,
                throttled: made,
                ..attempts(made)
            };
            let t = throttle(Some(SECS), 10 * SECS);
            assert_eq!(
                decide(t, a, &bounds(), &mut budget, clock.now()),
                Verdict::Later,
                "throttle number {made}"
            );
        }
        assert_eq!(budget.retries_in_window(), 0);
    }

    #[test]
    fn throttles_are_not_error_attempts() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        // Seven sends: four throttled, three errors. max_retries = 3 allows four errors.
        let a = Attempts {
            made: 7,
            throttled: 4,
            ..attempts(7)
        };
        assert_eq!(a.errors(), 3);
        let e = Ended::Answer { status: 502 };
        assert_eq!(
            decide(e, a, &bounds(), &mut budget, clock.now()),
            Verdict::Retry
        );
        let a = Attempts { made: 8, ..a };
        assert_eq!(
            decide(e, a, &bounds(), &mut budget, clock.now()),
            Verdict::Final
        );
    }

    #[test]
    fn a_fetch_with_its_own_bound_on_throttles_takes_the_next_one_as_its_answer() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let t = throttle(None, SECS);
        let a = |throttled| Attempts {
            made: throttled,
            throttled,
            max_throttles: Some(2),
            shutting_down: false,
        };
        assert_eq!(
            decide(t, a(2), &bounds(), &mut budget, clock.now()),
            Verdict::Later
        );
        assert_eq!(
            decide(t, a(3), &bounds(), &mut budget, clock.now()),
            Verdict::Final
        );
    }

    #[test]
    fn a_host_that_refuses_everything_for_give_up_after_is_given_up() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let b = bounds();
        let almost = throttle(None, b.give_up_after - SECS);
        assert_eq!(
            decide(almost, attempts(1), &b, &mut budget, clock.now()),
            Verdict::Later
        );
        let spent = throttle(None, b.give_up_after);
        assert_eq!(
            decide(spent, attempts(1), &b, &mut budget, clock.now()),
            Verdict::GaveUp(GaveUp::Refusing(b.give_up_after))
        );
    }

    #[test]
    fn a_pause_over_max_retry_after_gives_the_url_up_with_the_sites_value() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let b = bounds();
        let at_cap = throttle(Some(b.max_retry_after), Duration::ZERO);
        assert_eq!(
            decide(at_cap, attempts(1), &b, &mut budget, clock.now()),
            Verdict::Later
        );
        let absurd = crate::headers::MAX_HINT;
        let v = decide(
            throttle(Some(absurd), Duration::ZERO),
            attempts(1),
            &b,
            &mut budget,
            clock.now(),
        );
        assert_eq!(v, Verdict::GaveUp(GaveUp::RetryAfter(absurd)));
        let Verdict::GaveUp(g) = v else {
            unreachable!()
        };
        assert_eq!(
            g.to_string(),
            "the site asked to wait ≥ 604800 s, longer than crawler.max_retry_after_ms"
        );
    }

    #[test]
    fn an_empty_budget_defers_the_retry_until_it_refills() {
        let clock = FakeClock::new();
        // One retry per 10 first attempts, no floor.
        let mut budget = RetryBudget::new(0.1, 0.0, Duration::from_secs(10));
        for _ in 0..10 {
            budget.deposit(clock.now());
        }
        let error = Ended::Answer { status: 500 };
        assert_eq!(
            decide(error, attempts(1), &bounds(), &mut budget, clock.now()),
            Verdict::Retry
        );
        assert_eq!(
            decide(error, attempts(1), &bounds(), &mut budget, clock.now()),
            Verdict::Defer
        );
        // The window moves on: the withdrawal ages out with the deposits, and new first
        // attempts earn a retry again.
        clock.advance(Duration::from_secs(11));
        for _ in 0..10 {
            budget.deposit(clock.now());
        }
        assert_eq!(
            decide(error, attempts(1), &bounds(), &mut budget, clock.now()),
            Verdict::Retry
        );
    }

    #[test]
    fn refusing_runs_from_the_first_throttle_since_the_last_other_answer() {
        let clock = FakeClock::new();
        let mut r: Refusing<&str> = Refusing::default();
        let quiet = 300 * SECS;
        assert_eq!(r.throttled(&"a", clock.now(), quiet), Duration::ZERO);
        clock.advance(5 * SECS);
        assert_eq!(r.throttled(&"a", clock.now(), quiet), 5 * SECS);
        assert_eq!(r.throttled(&"b", clock.now(), quiet), Duration::ZERO);
        assert_eq!(r.len(), 2);
        r.answered(&"a");
        clock.advance(SECS);
        assert_eq!(r.throttled(&"a", clock.now(), quiet), Duration::ZERO);
        assert_eq!(r.throttled(&"b", clock.now(), quiet), SECS);
        // Given up (its pause was too long): ten minutes later a new URL's first throttle
        // starts a run of its own.
        r.given_up(&"b");
        clock.advance(600 * SECS);
        assert_eq!(r.throttled(&"b", clock.now(), quiet), Duration::ZERO);
        // A run left open (its URLs ended otherwise): a throttle hours later starts anew,
        // one within the quiet bound goes on.
        clock.advance(4 * 3600 * SECS);
        assert_eq!(r.throttled(&"a", clock.now(), quiet), Duration::ZERO);
        clock.advance(quiet);
        assert_eq!(r.throttled(&"a", clock.now(), quiet), quiet);
    }

    #[test]
    fn the_limiter_hears_throttles_always_and_successes_when_it_can_use_them() {
        assert_eq!(heard(true, false, false), Heard::Throttled);
        assert_eq!(heard(true, true, true), Heard::Throttled);
        assert_eq!(heard(false, true, false), Heard::Succeeded);
        assert_eq!(heard(false, false, true), Heard::Succeeded);
        assert_eq!(heard(false, false, false), Heard::Nothing);
    }

    #[test]
    fn with_every_exit_down_a_fetch_waits_for_the_shorter_of_ejection_and_30_s() {
        let clock = crate::FakeClock::new();
        let since = crate::Clock::now(&clock);
        let at = |s: u64| since + Duration::from_secs(s);
        let long = Duration::from_secs(300);
        assert_eq!(
            all_down(since, since, long),
            AllDown::Wait(Duration::from_secs(1))
        );
        assert_eq!(
            all_down(since, at(29) + Duration::from_millis(600), long),
            AllDown::Wait(Duration::from_millis(400))
        );
        assert_eq!(
            all_down(since, at(30), long),
            AllDown::GiveUp {
                waited: Duration::from_secs(30)
            }
        );
        let short = Duration::from_secs(5);
        assert_eq!(
            all_down(since, at(4), short),
            AllDown::Wait(Duration::from_secs(1))
        );
        assert_eq!(
            all_down(since, at(5), short),
            AllDown::GiveUp {
                waited: Duration::from_secs(5)
            }
        );
    }
}
