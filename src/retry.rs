//! Retries: when to try again, and whether the site can afford it.
//!
//! Why a budget: a site that fails every request would otherwise get `1 + max_retries`
//! times the load exactly when it is weakest. Like Finagle's retry budget, every first
//! attempt deposits a fraction of a retry (`ratio`), every retry withdraws a whole one, and
//! a small reserve lets a quiet crawl retry at all. Deposits expire after `ttl`, so a
//! burst of failures cannot spend credit earned an hour ago.
//!
//! Why one budget per site ([`SiteBudgets`]): the budget protects the site that fails,
//! and Finagle keeps one per destination for that reason. One budget for a whole crawl
//! lets a dead host among a thousand healthy ones spend the credit the others earned
//! (its 40 pages retried three times each, four times its load), and leaves a site's last
//! retries, which come after its first attempts have aged out of the window, one reserve
//! shared with every other host. The reserve is Finagle's default, ten retries a second
//! per site: the host's pacing still spaces them, so a 1 req/s site gets no more than
//! one a second, and a site with a tenth of its pages broken for good finishes their
//! retries in seconds, not in one a second for the whole crawl.
//!
//! Why full jitter: exponential backoff with a uniform draw over `[0, cap]` spreads the
//! retries of many failed requests instead of re-synchronising them (the thundering herd),
//! and `Retry-After` is a floor no jitter may undercut.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::time::{Duration, Instant};

use crate::rng::RandomSource;

/// Exponential backoff with full jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay cap of the first retry.
    pub base: Duration,
    /// Largest delay cap.
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `retry` (1 for the first retry): uniform in
    /// `[cap/2, cap]` with `cap = min(max, base × 2^(retry-1))`, and never shorter than the
    /// site's `retry_after`.
    ///
    /// Half the cap is kept fixed so a retry never fires instantly (full jitter from zero
    /// would, and an instant retry of a 503 helps nobody).
    pub fn delay(
        &self,
        retry: u32,
        retry_after: Option<Duration>,
        rng: &mut impl RandomSource,
    ) -> Duration {
        let exp = retry.saturating_sub(1).min(30);
        let cap = self.base.saturating_mul(1u32 << exp).min(self.max);
        let jittered = cap / 2 + (cap / 2).mul_f64(rng.next_f64());
        jittered.max(retry_after.unwrap_or(Duration::ZERO))
    }

    /// How long a retry the host's retry budget deferred waits before it asks the budget
    /// again: what it would have waited anyway (its backoff, never less than the site's
    /// `retry_after`), and at least `recheck`, the budget's own round. A deferral delays a
    /// retry; it never lets one go sooner than its backoff or into the site's pause.
    pub fn deferred(
        &self,
        retry: u32,
        retry_after: Option<Duration>,
        recheck: Duration,
        rng: &mut impl RandomSource,
    ) -> Duration {
        self.delay(retry, retry_after, rng).max(recheck)
    }

    /// How long a throttled fetch waits before it goes back to its host's queue: the
    /// site's `retry_after`, or without one the first retry's cap (`base`), so that an
    /// answer read a mailbox hop before the limiter's cut is not sent into the same wall.
    ///
    /// Not exponential in the fetch's throttles: a throttle is the host's, not the page's.
    /// From its queue the host's pacing (the cut rate, its pauses, a lockout's probes)
    /// spaces the fetch; a timer of its own that doubled with every throttle would keep it
    /// away while the host may be sent to again, and a host's last pages would finish
    /// long after the host could have served them.
    pub fn after_throttle(&self, retry_after: Option<Duration>) -> Duration {
        retry_after.unwrap_or(self.base)
    }
}

/// A retry budget: retries may add at most `ratio` of the first attempts' load, plus a
/// reserve of `min_per_sec` retries per second.
///
/// Counted in [`BUDGET_SLOTS`] slots of `ttl / BUDGET_SLOTS` each, not one timestamp per
/// attempt: at 80,000 first attempts a second and a 10 s ttl a list of timestamps held
/// 800,000 entries (12.8 MB) and grew and shrank on every fetch; the slots are constant
/// in size and time. The window is `ttl` to within one slot.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    ratio: f64,
    min_per_sec: f64,
    ttl: Duration,
    /// Slot width, nanoseconds (at least 1).
    slot_nanos: u64,
    /// (deposits, withdrawals) per slot; slot `n` (counted from `start`) is at `n % SLOTS`.
    slots: [(u64, u64); BUDGET_SLOTS],
    /// Sums over the slots.
    deposits: u64,
    withdrawals: u64,
    /// The first instant seen: slot 0 starts there.
    start: Option<Instant>,
    /// The newest slot counted into.
    current: u64,
    /// Where that slot ends: before it, `advance` has nothing to do.
    current_end: Option<Instant>,
}

/// Slots a [`RetryBudget`] divides its ttl into.
pub const BUDGET_SLOTS: usize = 20;

/// Width of one of a budget's slots over `ttl`, nanoseconds (at least 1).
fn slot_nanos(ttl: Duration) -> u64 {
    (ttl.as_nanos() / BUDGET_SLOTS as u128).clamp(1, u64::MAX as u128) as u64
}

/// Retries a second each site may make whatever its first attempts (Finagle's default).
pub const RESERVE_PER_SEC: f64 = 10.0;

/// How long a first attempt's deposit counts (Finagle's default).
pub const BUDGET_TTL: Duration = Duration::from_secs(10);

/// One [`RetryBudget`] per site, keyed by `K` (a host): `ratio` of the site's first
/// attempts plus [`RESERVE_PER_SEC`], over [`BUDGET_TTL`].
///
/// A budget whose window has emptied is the same as a new one, so idle sites are dropped
/// from time to time: a crawl over a million hosts keeps the budgets of the hosts of the
/// last ten seconds, not of every host it met.
///
/// `S` hashes the keys: a fetch deposits on every first attempt, and a caller with a
/// faster hasher than std's (SipHash) passes it with [`Self::with_hasher`].
#[derive(Debug, Clone)]
pub struct SiteBudgets<K, S = RandomState> {
    ratio: f64,
    budgets: HashMap<K, RetryBudget, S>,
    /// Size of `budgets` at which the next sweep of idle sites runs.
    sweep_at: usize,
}

/// Below this many sites no sweep runs.
const SWEEP_FLOOR: usize = 64;

impl<K: Hash + Eq + Clone> SiteBudgets<K> {
    /// Budgets of `ratio` × each site's first attempts (`crawler.retry_budget`).
    pub fn new(ratio: f64) -> Self {
        Self::with_hasher(ratio, RandomState::new())
    }
}

impl<K: Hash + Eq + Clone, S: BuildHasher> SiteBudgets<K, S> {
    /// [`Self::new`] with the keys hashed by `hasher`.
    pub fn with_hasher(ratio: f64, hasher: S) -> Self {
        Self {
            ratio,
            budgets: HashMap::with_hasher(hasher),
            sweep_at: SWEEP_FLOOR,
        }
    }

    /// The budget of `site`, created on first use.
    pub fn site(&mut self, site: &K, now: Instant) -> &mut RetryBudget {
        if self.budgets.len() >= self.sweep_at && !self.budgets.contains_key(site) {
            self.budgets.retain(|_, b| !b.is_idle(now));
            // Amortised: the next sweep waits until the map has doubled again.
            self.sweep_at = (self.budgets.len() * 2).max(SWEEP_FLOOR);
        }
        let ratio = self.ratio;
        self.budgets
            .entry(site.clone())
            .or_insert_with(|| RetryBudget::new(ratio, RESERVE_PER_SEC, BUDGET_TTL))
    }

    /// Count a first attempt to `site`.
    pub fn deposit(&mut self, site: &K, now: Instant) {
        // Every first attempt comes here: a site already kept costs one lookup, without
        // the key clone `site` makes for its entry.
        match self.budgets.get_mut(site) {
            Some(b) => b.deposit(now),
            None => self.site(site, now).deposit(now),
        }
    }

    /// Ask to retry once at `site` (see [`RetryBudget::try_withdraw`]).
    pub fn try_withdraw(&mut self, site: &K, now: Instant) -> bool {
        match self.budgets.get_mut(site) {
            Some(b) => b.try_withdraw(now),
            None => self.site(site, now).try_withdraw(now),
        }
    }

    /// How long a retry the budget refused waits before asking again (see
    /// [`RetryBudget::recheck_after`]).
    pub fn recheck_after(&self) -> Duration {
        Duration::from_nanos(slot_nanos(BUDGET_TTL))
    }

    /// Sites with a budget kept.
    pub fn len(&self) -> usize {
        self.budgets.len()
    }

    /// No site has a budget kept.
    pub fn is_empty(&self) -> bool {
        self.budgets.is_empty()
    }
}

impl RetryBudget {
    /// A budget allowing retries of `ratio` × first attempts over the last `ttl`, plus
    /// `min_per_sec` × ttl retries.
    pub fn new(ratio: f64, min_per_sec: f64, ttl: Duration) -> Self {
        Self {
            ratio: ratio.max(0.0),
            min_per_sec: min_per_sec.max(0.0),
            ttl,
            slot_nanos: slot_nanos(ttl),
            slots: [(0, 0); BUDGET_SLOTS],
            deposits: 0,
            withdrawals: 0,
            start: None,
            current: 0,
            current_end: None,
        }
    }

    /// Move to the slot of `now`, emptying the slots that fell out of the window; returns
    /// the index of `now`'s slot.
    fn advance(&mut self, now: Instant) -> usize {
        // Most calls fall in the current slot: one comparison instead of a division.
        if self.current_end.is_some_and(|end| now < end) {
            return (self.current % BUDGET_SLOTS as u64) as usize;
        }
        let start = *self.start.get_or_insert(now);
        let elapsed =
            u64::try_from(now.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX);
        let slot = elapsed / self.slot_nanos;
        if slot > self.current {
            let passed = (slot - self.current).min(BUDGET_SLOTS as u64);
            for k in 1..=passed {
                let i = ((self.current + k) % BUDGET_SLOTS as u64) as usize;
                let (d, w) = std::mem::take(&mut self.slots[i]);
                self.deposits -= d;
                self.withdrawals -= w;
            }
            self.current = slot;
        }
        self.current_end = self
            .current
            .checked_add(1)
            .and_then(|n| n.checked_mul(self.slot_nanos))
            .and_then(|end| start.checked_add(Duration::from_nanos(end)));
        (self.current % BUDGET_SLOTS as u64) as usize
    }

    /// Count a first attempt.
    pub fn deposit(&mut self, now: Instant) {
        let i = self.advance(now);
        self.slots[i].0 += 1;
        self.deposits += 1;
    }

    /// Ask to retry once: `true` (and the retry is counted) if the budget allows it.
    pub fn try_withdraw(&mut self, now: Instant) -> bool {
        let i = self.advance(now);
        let allowed = self.ratio * self.deposits as f64 + self.min_per_sec * self.ttl.as_secs_f64();
        if (self.withdrawals as f64) + 1.0 <= allowed {
            self.slots[i].1 += 1;
            self.withdrawals += 1;
            true
        } else {
            false
        }
    }

    /// How long a retry the budget refused waits before asking again: one slot, the
    /// budget's smallest step (its withdrawals and deposits age out slot by slot).
    pub fn recheck_after(&self) -> Duration {
        Duration::from_nanos(self.slot_nanos)
    }

    /// Retries counted within the ttl, as of the last deposit or withdrawal.
    pub fn retries_in_window(&self) -> usize {
        usize::try_from(self.withdrawals).unwrap_or(usize::MAX)
    }

    /// Nothing counted within the ttl at `now`: the budget is as good as a new one.
    pub fn is_idle(&mut self, now: Instant) -> bool {
        self.advance(now);
        self.deposits == 0 && self.withdrawals == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use crate::rng::{NoJitter, SplitMix64};

    #[test]
    fn backoff_grows_caps_and_respects_retry_after() {
        let b = Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
        };
        let mut rng = SplitMix64::new(3);
        for retry in 1..=12u32 {
            let cap = Duration::from_millis(500)
                .saturating_mul(1 << (retry - 1))
                .min(Duration::from_secs(30));
            for _ in 0..100 {
                let d = b.delay(retry, None, &mut rng);
                assert!(
                    d >= cap / 2 && d <= cap,
                    "retry {retry}: {d:?} vs cap {cap:?}"
                );
            }
        }
        let d = b.delay(1, Some(Duration::from_secs(7)), &mut NoJitter);
        assert_eq!(d, Duration::from_secs(7));
    }

    #[test]
    fn a_deferred_retry_waits_its_backoff_and_the_sites_pause_at_least() {
        let b = Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
        };
        let recheck = Duration::from_millis(500);
        // The third retry backs off 1–2 s, longer than the budget's round.
        let d = b.deferred(3, None, recheck, &mut NoJitter);
        assert_eq!(d, b.delay(3, None, &mut NoJitter));
        assert!(d >= Duration::from_secs(1), "{d:?}");
        // A 5xx that asked for 30 s is not retried before them.
        let ra = Some(Duration::from_secs(30));
        assert_eq!(
            b.deferred(1, ra, recheck, &mut NoJitter),
            Duration::from_secs(30)
        );
        // A first retry's short backoff waits the budget's round.
        let short = Backoff {
            base: Duration::from_millis(100),
            ..b
        };
        assert_eq!(short.deferred(1, None, recheck, &mut NoJitter), recheck);
    }

    #[test]
    fn a_throttle_waits_for_the_site_or_the_base_never_longer() {
        let b = Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
        };
        assert_eq!(
            b.after_throttle(Some(Duration::from_secs(1))),
            Duration::from_secs(1)
        );
        assert_eq!(
            b.after_throttle(Some(Duration::from_secs(90))),
            Duration::from_secs(90)
        );
        assert_eq!(b.after_throttle(None), Duration::from_millis(500));
    }

    #[test]
    fn budget_limits_retries_to_a_fraction_of_first_attempts() {
        let c = FakeClock::new();
        let mut budget = RetryBudget::new(0.2, 0.0, Duration::from_secs(10));
        for _ in 0..100 {
            budget.deposit(c.now());
        }
        let granted = (0..100).filter(|_| budget.try_withdraw(c.now())).count();
        assert_eq!(granted, 20);
        // Deposits expire: after the ttl the credit is gone.
        c.advance(Duration::from_secs(11));
        assert!(!budget.try_withdraw(c.now()));
    }

    #[test]
    fn budget_window_slides_slot_by_slot() {
        let c = FakeClock::new();
        let mut budget = RetryBudget::new(1.0, 0.0, Duration::from_secs(10));
        // 10 deposits at t=0, 10 at t=5 s.
        for _ in 0..10 {
            budget.deposit(c.now());
        }
        c.advance(Duration::from_secs(5));
        for _ in 0..10 {
            budget.deposit(c.now());
        }
        // At t=9.9 s both halves count: 20 retries allowed.
        c.advance(Duration::from_millis(4_900));
        let granted = (0..30).filter(|_| budget.try_withdraw(c.now())).count();
        assert_eq!(granted, 20);
        // At t=10.6 s the first half (and the retries made alongside it, at 9.9 s, stay)
        // has expired: 10 deposits, 20 withdrawals in the window, nothing more allowed.
        c.advance(Duration::from_millis(700));
        assert!(!budget.try_withdraw(c.now()));
        // At t=20 s everything has expired: a fresh deposit allows one retry again.
        c.advance(Duration::from_millis(9_400));
        budget.deposit(c.now());
        assert_eq!(budget.retries_in_window(), 0);
        assert!(budget.try_withdraw(c.now()));
        assert!(!budget.try_withdraw(c.now()));
    }

    #[test]
    fn budget_counts_a_high_rate_of_first_attempts() {
        let c = FakeClock::new();
        let mut budget = RetryBudget::new(0.2, 0.0, Duration::from_secs(10));
        for _ in 0..1_000_000 {
            budget.deposit(c.now());
            c.advance(Duration::from_micros(10));
        }
        // 10 s of deposits at 100,000/s: about 1,000,000 in the window (one slot of slack).
        let granted = (0..300_000)
            .filter(|_| budget.try_withdraw(c.now()))
            .count();
        assert!((190_000..=200_000).contains(&granted), "{granted}");
    }

    #[test]
    fn a_refused_retry_asks_again_one_slot_later() {
        let budget = RetryBudget::new(0.2, 1.0, Duration::from_secs(10));
        assert_eq!(budget.recheck_after(), Duration::from_millis(500));
    }

    #[test]
    fn each_site_has_a_budget_of_its_own() {
        let c = FakeClock::new();
        let mut sites = SiteBudgets::new(0.2);
        // A healthy host's thousand first attempts earn the dead host nothing.
        for _ in 0..1000 {
            sites.deposit(&"healthy", c.now());
        }
        for _ in 0..40 {
            sites.deposit(&"dead", c.now());
        }
        let dead = (0..200)
            .filter(|_| sites.try_withdraw(&"dead", c.now()))
            .count();
        // 0.2 × 40 plus the reserve of ten a second over the 10 s window.
        assert_eq!(dead, 8 + 100);
        let healthy = (0..400)
            .filter(|_| sites.try_withdraw(&"healthy", c.now()))
            .count();
        assert_eq!(healthy, 200 + 100);
        assert_eq!(sites.recheck_after(), Duration::from_millis(500));
    }

    #[test]
    fn idle_sites_are_dropped_and_busy_ones_kept() {
        let c = FakeClock::new();
        let mut sites = SiteBudgets::new(0.2);
        for i in 0..1000u32 {
            sites.deposit(&i, c.now());
        }
        assert_eq!(sites.len(), 1000);
        c.advance(Duration::from_secs(5));
        sites.deposit(&0, c.now());
        // Past the ttl of the others' deposits: once the map has doubled, the next new
        // site sweeps them away (at most twice the live sites are ever kept).
        c.advance(Duration::from_secs(6));
        for i in 5000..5100u32 {
            sites.deposit(&i, c.now());
        }
        assert_eq!(
            sites.len(),
            101,
            "site 0 (deposit 6 s ago) and the new ones"
        );
        // Site 0 kept its count: a retry there still finds its deposit.
        assert_eq!(sites.site(&0, c.now()).retries_in_window(), 0);
        assert!(!sites.site(&0, c.now()).is_idle(c.now()));
    }

    #[test]
    fn reserve_allows_a_few_retries_without_traffic() {
        let c = FakeClock::new();
        let mut budget = RetryBudget::new(0.2, 1.0, Duration::from_secs(10));
        let granted = (0..100).filter(|_| budget.try_withdraw(c.now())).count();
        assert_eq!(granted, 10);
        assert_eq!(budget.retries_in_window(), 10);
    }
}
