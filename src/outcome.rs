//! What becomes of an ended attempt: delivered, retried after a backoff, or moved to
//! another exit.
//!
//! Why in the core: which answers are worth another try, when the retry budget has the
//! last word, and what counts as an attempt decide how hard a crawl leans on a sick site.
//! Kept here, they are plain functions of the outcome, the attempt count and the budget at
//! `now`, tested on a fake clock; the scheduler only carries the verdict out (the reply,
//! the timer, the metrics).

use std::time::{Duration, Instant};

use crate::retry::RetryBudget;

/// How a failed request ended without an HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoAnswer {
    /// The site (or its path) refused the TCP connection.
    Refused,
    /// Connect, or waiting for the answer, took too long.
    Timeout,
    /// The connection was reset or closed after it was established (a body cut short of
    /// its framing included).
    Reset,
    /// Anything else (DNS, malformed framing, a body that does not decode, a body over the
    /// cap, the private-address rule): trying again would end the same way.
    Other,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The site answered with `status`; `throttle`: a throttle status (429/503 by default).
    Answer {
        /// The HTTP status.
        status: u16,
        /// The status is one of `limiter.throttle_statuses`.
        throttle: bool,
    },
    /// The request reached out to the site but got no answer.
    NoAnswer(NoAnswer),
    /// Nothing was sent: the exit could not connect from its address, or the host has no
    /// address of the exit's family. Not an attempt, not the site's doing.
    NotSent,
}

impl Ended {
    /// Whether this outcome is worth another attempt: the site asked us to slow down (a
    /// throttle), failed on its side (a 5xx), or the connection failed in a way the next
    /// one may not (refused, reset, timed out). A 4xx or a broken page would end the same.
    pub fn wants_retry(self) -> bool {
        match self {
            Ended::Answer { status, throttle } => throttle || status >= 500,
            Ended::NoAnswer(n) => n != NoAnswer::Other,
            Ended::NotSent => false,
        }
    }
}

/// What to do with an ended attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The outcome is the fetch's result.
    Final,
    /// The outcome is the fetch's result because the retry budget refused the retry it
    /// called for: the record must say so.
    BudgetRefused,
    /// Try again after a backoff (at least the site's Retry-After, if any).
    Retry,
    /// Send it through another exit; the attempt does not count.
    Move,
}

/// What the retry decision reads besides the outcome.
#[derive(Debug, Clone, Copy)]
pub struct Attempts {
    /// Attempts made so far, this one included.
    pub made: u32,
    /// `crawler.max_retries`: attempts beyond the first.
    pub max_retries: u32,
    /// The crawler is shutting down: nothing is retried.
    pub shutting_down: bool,
}

/// The verdict on an attempt that ended as `ended`. A retry is withdrawn from `budget`
/// at `now` only when one is called for and attempts are left, so the budget counts
/// exactly the retries made.
pub fn decide(ended: Ended, a: Attempts, budget: &mut RetryBudget, now: Instant) -> Verdict {
    if ended == Ended::NotSent {
        return Verdict::Move;
    }
    if !ended.wants_retry() || a.shutting_down || a.made > a.max_retries {
        return Verdict::Final;
    }
    if budget.try_withdraw(now) {
        Verdict::Retry
    } else {
        Verdict::BudgetRefused
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

/// A fetch found every exit ejected or disabled at `since` and still does at `now`;
/// exits are ejected for at most `max_ejection`.
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

    fn attempts(made: u32) -> Attempts {
        Attempts {
            made,
            max_retries: 3,
            shutting_down: false,
        }
    }

    fn roomy_budget() -> RetryBudget {
        RetryBudget::new(1.0, 100.0, Duration::from_secs(10))
    }

    #[test]
    fn which_outcomes_want_a_retry() {
        let answer = |status, throttle| Ended::Answer { status, throttle };
        assert!(answer(429, true).wants_retry());
        assert!(answer(503, true).wants_retry());
        assert!(answer(500, false).wants_retry());
        assert!(!answer(200, false).wants_retry());
        assert!(!answer(404, false).wants_retry());
        assert!(!answer(403, false).wants_retry());
        for n in [NoAnswer::Refused, NoAnswer::Timeout, NoAnswer::Reset] {
            assert!(Ended::NoAnswer(n).wants_retry(), "{n:?}");
        }
        assert!(!Ended::NoAnswer(NoAnswer::Other).wants_retry());
        assert!(!Ended::NotSent.wants_retry());
    }

    #[test]
    fn retries_while_attempts_are_left_then_final() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let e = Ended::Answer {
            status: 500,
            throttle: false,
        };
        for made in 1..=3 {
            assert_eq!(
                decide(e, attempts(made), &mut budget, clock.now()),
                Verdict::Retry
            );
        }
        assert_eq!(
            decide(e, attempts(4), &mut budget, clock.now()),
            Verdict::Final
        );
        assert_eq!(budget.retries_in_window(), 3);
    }

    #[test]
    fn nothing_sent_moves_without_touching_the_budget() {
        let clock = FakeClock::new();
        let mut budget = RetryBudget::new(0.0, 0.0, Duration::from_secs(10));
        assert_eq!(
            decide(Ended::NotSent, attempts(9), &mut budget, clock.now()),
            Verdict::Move
        );
        assert_eq!(budget.retries_in_window(), 0);
    }

    #[test]
    fn final_outcomes_take_nothing_from_the_budget() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let ok = Ended::Answer {
            status: 200,
            throttle: false,
        };
        assert_eq!(
            decide(ok, attempts(1), &mut budget, clock.now()),
            Verdict::Final
        );
        let broken = Ended::NoAnswer(NoAnswer::Other);
        assert_eq!(
            decide(broken, attempts(1), &mut budget, clock.now()),
            Verdict::Final
        );
        assert_eq!(budget.retries_in_window(), 0);
    }

    #[test]
    fn shutting_down_retries_nothing() {
        let clock = FakeClock::new();
        let mut budget = roomy_budget();
        let a = Attempts {
            shutting_down: true,
            ..attempts(1)
        };
        let timeout = Ended::NoAnswer(NoAnswer::Timeout);
        assert_eq!(decide(timeout, a, &mut budget, clock.now()), Verdict::Final);
    }

    #[test]
    fn an_empty_budget_refuses_and_says_so_until_it_refills() {
        let clock = FakeClock::new();
        // One retry per 10 first attempts, no floor.
        let mut budget = RetryBudget::new(0.1, 0.0, Duration::from_secs(10));
        for _ in 0..10 {
            budget.deposit(clock.now());
        }
        let throttle = Ended::Answer {
            status: 429,
            throttle: true,
        };
        assert_eq!(
            decide(throttle, attempts(1), &mut budget, clock.now()),
            Verdict::Retry
        );
        assert_eq!(
            decide(throttle, attempts(1), &mut budget, clock.now()),
            Verdict::BudgetRefused
        );
        // The window moves on: the withdrawal ages out with the deposits, and new first
        // attempts earn a retry again.
        clock.advance(Duration::from_secs(11));
        for _ in 0..10 {
            budget.deposit(clock.now());
        }
        assert_eq!(
            decide(throttle, attempts(1), &mut budget, clock.now()),
            Verdict::Retry
        );
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
