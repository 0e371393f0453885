//! The fetches the scheduler holds outside the hosts' queues: attempts handed to an exit
//! (found again by their report's id), fetches waiting for a retry timer (found again by
//! the timer's id), the count of attempts in flight that `crawler.concurrency` caps, and
//! what a retry waits for (its host's retry budget, the backoff).
//!
//! Why one part: these change together. An attempt is reserved before it is sent and
//! released when it settles; a first attempt earns its host's budget what a retry
//! spends; a shutdown's grace period forgets the sent ones at once (their late reports
//! find nothing); the scheduler is drained when nothing is in flight and nothing waits
//! for a timer. Generic over the fetch so that its rules are tested without a crawler.

use std::sync::Arc;
use std::time::{Duration, Instant};

use exitcrawl::retry::{Backoff, RetryBudget, SiteBudgets};
use exitcrawl::rng::SplitMix64;
use foldhash::HashMap;

/// Attempts in flight and fetches waiting for a retry; `P` is a fetch.
pub(super) struct InFlight<P> {
    next_id: u64,
    /// Attempts handed to an exit: report id → (exit index, fetch).
    sent: HashMap<u64, (usize, P)>,
    /// Fetches waiting for their retry timer: timer id → fetch.
    delayed: HashMap<u64, P>,
    /// Attempts reserved and not yet released (queued and direct ones alike).
    attempts: u32,
    /// Keeps each host's retries a share of its first attempts (`crawler.retry_budget`).
    budgets: SiteBudgets<Arc<str>, foldhash::fast::RandomState>,
    backoff: Backoff,
    /// The backoff's jitter.
    rng: SplitMix64,
}

impl<P> InFlight<P> {
    /// Nothing in flight yet; retries within each host's budget, spaced by `backoff`.
    pub(super) fn new(
        budgets: SiteBudgets<Arc<str>, foldhash::fast::RandomState>,
        backoff: Backoff,
    ) -> Self {
        Self {
            next_id: 0,
            sent: HashMap::default(),
            delayed: HashMap::default(),
            attempts: 0,
            budgets,
            backoff,
            rng: SplitMix64::new(0x5c4e_d01e),
        }
    }

    /// A fetch's first attempt is sent to `host`: it earns the host's budget its share of
    /// a retry.
    pub(super) fn first_attempt(&mut self, host: &Arc<str>, now: Instant) {
        self.budgets.deposit(host, now);
    }

    /// `host`'s retry budget, which the core's verdict on an ended attempt draws on.
    pub(super) fn budget(&mut self, host: &Arc<str>, now: Instant) -> &mut RetryBudget {
        self.budgets.site(host, now)
    }

    /// How long the `count`th retry (of errors, or of throttles) waits, at least the
    /// site's `retry_after`.
    pub(super) fn backoff(&mut self, count: u32, retry_after: Option<Duration>) -> Duration {
        self.backoff.delay(count, retry_after, &mut self.rng)
    }

    /// How long a throttled fetch waits before it goes back to its host's queue (see
    /// [`Backoff::after_throttle`]): however often it was throttled, the host's pacing
    /// spaces it from there.
    pub(super) fn after_throttle(&self, retry_after: Option<Duration>) -> Duration {
        self.backoff.after_throttle(retry_after)
    }

    /// How long a retry the budget deferred waits before it asks again (see
    /// [`Backoff::deferred`]).
    pub(super) fn deferred(&mut self, count: u32, retry_after: Option<Duration>) -> Duration {
        let recheck = self.budgets.recheck_after();
        self.backoff
            .deferred(count, retry_after, recheck, &mut self.rng)
    }

    /// When a retry the budget deferred asks it again.
    pub(super) fn recheck_after(&self) -> Duration {
        self.budgets.recheck_after()
    }

    /// Spend `host`'s budget on a deferred retry, if it has room now.
    pub(super) fn try_withdraw(&mut self, host: &Arc<str>, now: Instant) -> bool {
        self.budgets.try_withdraw(host, now)
    }

    /// A fresh id: an attempt's report, a retry timer or a Redis check carries it.
    pub(super) fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Count an attempt before anything is sent (the counterpart of [`Self::release`]).
    pub(super) fn reserve(&mut self) {
        self.attempts += 1;
    }

    /// An attempt settled, or was never sent after all.
    pub(super) fn release(&mut self) {
        self.attempts = self.attempts.saturating_sub(1);
    }

    /// Whether another attempt may start under `concurrency`.
    pub(super) fn has_room(&self, concurrency: u32) -> bool {
        self.attempts < concurrency
    }

    /// `p` went to exit `exit`; its report will carry `id` (from [`Self::id`]).
    pub(super) fn sent(&mut self, id: u64, exit: usize, p: P) {
        self.sent.insert(id, (exit, p));
    }

    /// The attempt whose report carries `id`, once: `None` for one forgotten by a
    /// shutdown (already answered).
    pub(super) fn take_sent(&mut self, id: u64) -> Option<(usize, P)> {
        self.sent.remove(&id)
    }

    /// A shutdown's grace period is over: what was sent counts no more, and is handed
    /// back, each with its exit, to be answered (dropped, it answers itself).
    pub(super) fn forget_sent(&mut self) -> Vec<(usize, P)> {
        self.attempts = 0;
        self.sent.drain().map(|(_, sent)| sent).collect()
    }

    /// `p` waits for a retry timer; the timer carries the returned id.
    pub(super) fn delay(&mut self, p: P) -> u64 {
        let id = self.id();
        self.delayed.insert(id, p);
        id
    }

    /// The fetch of the timer `id`, once: `None` when it was taken meanwhile (its host
    /// given up, a shutdown).
    pub(super) fn take_delayed(&mut self, id: u64) -> Option<P> {
        self.delayed.remove(&id)
    }

    /// Every waiting fetch `pred` picks, taken out.
    pub(super) fn take_delayed_where(&mut self, mut pred: impl FnMut(&P) -> bool) -> Vec<P> {
        let ids: Vec<u64> = self
            .delayed
            .iter()
            .filter(|(_, p)| pred(p))
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.delayed.remove(&id))
            .collect()
    }

    /// Nothing in flight and nothing waiting for a timer: a shutdown may end.
    pub(super) fn is_idle(&self) -> bool {
        self.attempts == 0 && self.delayed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flight<P>() -> InFlight<P> {
        let backoff = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
        };
        InFlight::new(
            SiteBudgets::with_hasher(0.5, foldhash::fast::RandomState::default()),
            backoff,
        )
    }

    #[test]
    fn a_hosts_first_attempts_earn_its_own_retries_and_a_retry_waits_for_the_site() {
        let mut f = flight::<&str>();
        let now = Instant::now();
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        for _ in 0..20 {
            f.first_attempt(&a, now);
        }
        // The reserve, ten a second over the ten-second window, is each host's own.
        let reserve = 100;
        let of_a = (0..200).filter(|_| f.try_withdraw(&a, now)).count();
        assert_eq!(of_a, 10 + reserve, "half of a's twenty first attempts");
        let of_b = (0..200).filter(|_| f.try_withdraw(&b, now)).count();
        assert_eq!(of_b, reserve, "a's first attempts earn b nothing");
        assert_eq!(f.budget(&a, now).retries_in_window(), 10 + reserve);
        assert!(f.recheck_after() > Duration::ZERO);
        assert!(f.backoff(1, Some(Duration::from_secs(3))) >= Duration::from_secs(3));
    }

    #[test]
    fn a_throttled_fetch_waits_for_the_site_not_for_its_own_count() {
        let f = flight::<&str>();
        let ra = Duration::from_secs(1);
        assert_eq!(f.after_throttle(Some(ra)), ra);
        assert_eq!(
            f.after_throttle(None),
            Duration::from_millis(100),
            "the base"
        );
        // An eighth error waits seconds; an eighth throttle only for the site, since the
        // host's pacing spaces the fetch from its queue.
        let mut g = flight::<&str>();
        assert!(
            g.backoff(8, None) > Duration::from_secs(5),
            "errors back off"
        );
    }

    #[test]
    fn ids_are_never_reused() {
        let mut f = flight::<&str>();
        let a = f.id();
        let b = f.delay("x");
        let c = f.id();
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn concurrency_counts_reserved_attempts_and_release_never_goes_below_zero() {
        let mut f = flight::<&str>();
        assert!(f.has_room(1));
        f.reserve();
        assert!(!f.has_room(1));
        assert!(f.has_room(2));
        f.release();
        f.release();
        assert!(f.has_room(1));
        f.reserve();
        assert!(!f.has_room(1), "a second release did not go below zero");
    }

    #[test]
    fn a_report_finds_its_attempt_once_and_none_after_a_shutdown_forgot_it() {
        let mut f = flight();
        let (a, b) = (f.id(), f.id());
        f.reserve();
        f.sent(a, 0, "a");
        f.reserve();
        f.sent(b, 1, "b");
        assert_eq!(f.take_sent(a), Some((0, "a")));
        assert_eq!(f.take_sent(a), None);
        assert_eq!(f.forget_sent(), [(1, "b")], "handed back with its exit");
        assert_eq!(f.take_sent(b), None);
        assert!(f.is_idle());
    }

    #[test]
    fn a_waiting_fetch_is_taken_once_by_its_timer_or_by_its_host() {
        let mut f = flight();
        let a1 = f.delay(("a", 1));
        let _b = f.delay(("b", 2));
        let a3 = f.delay(("a", 3));
        assert!(!f.is_idle());
        assert_eq!(f.take_delayed(a1), Some(("a", 1)));
        let mut of_a = f.take_delayed_where(|p| p.0 == "a");
        of_a.sort();
        assert_eq!(of_a, [("a", 3)]);
        assert_eq!(
            f.take_delayed(a3),
            None,
            "taken by its host, not again by its timer"
        );
        assert_eq!(f.take_delayed_where(|_| true), [("b", 2)]);
        assert!(f.is_idle());
    }

    #[test]
    fn idle_needs_no_attempt_in_flight_as_well() {
        let mut f = flight::<&str>();
        f.reserve();
        assert!(!f.is_idle());
        f.release();
        assert!(f.is_idle());
    }
}
