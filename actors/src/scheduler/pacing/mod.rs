//! Pacing: every limiter key's pacer, and the exit choice over them.
//!
//! [`Pacing`] owns the keys (a host's budget, a host through one exit, an exit's own lane
//! under scope `auto`) and what the choice needs besides a host's own state: where a new
//! host's budget starts (the host prior) and the tie-break between equally loaded exits.
//! What it is told changes a key in one place: the limiter's new interval
//! ([`Pacing::set_interval`]), a Retry-After read from an answer ([`HostPacing::pause`]),
//! and in distributed mode the shared budget's verdict ([`Pacing::shared_allowed`],
//! [`Pacing::shared_wait`], [`Pacing::shared_down`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitcrawl::aimd::prior::HostPrior;
use exitcrawl::config::{Algorithm, Scope, Settings};
use exitcrawl::limiter::{self, interval_of, Quota, RateLimiter};
use exitcrawl::pacer::Pacer;
use exitcrawl::select::{self, Candidate, Selection};
use foldhash::HashMap;
use smallvec::SmallVec;

use crate::controller::LimitKey;

use super::ExitSlot;

/// A limiter key's pacing, shared between `SchedulerActor::keys` and the hosts using it.
pub(super) type SharedKey = Rc<RefCell<KeyState>>;

/// One limiter key's pacing.
pub(super) struct KeyState {
    pub(super) limiter: Option<Box<dyn RateLimiter>>,
    pub(super) pause_until: Option<std::time::Instant>,
    /// Distributed mode: the shared budget said wait until then. Kept apart from
    /// `pause_until`, the site's word: a fetch Redis allowed meanwhile is no send into a
    /// pause, only into this key's share of the budget, which Redis has counted.
    pub(super) budget_wait: Option<std::time::Instant>,
    /// Distributed mode while Redis is unreachable: the shared rate this key had; the
    /// local limiter runs at a share of it meanwhile.
    pub(super) fallback_from: Option<f64>,
    /// A host's budget: a Retry-After read on the host binds the exit that read it, not
    /// this key (the limiter's word, see `SetInterval::retry_after_binds_exit`).
    pub(super) retry_after_binds_exit: bool,
}

impl KeyState {
    /// Start pacing on a local share; `true` when this call started the fallback.
    pub(super) fn enter_fallback(
        &mut self,
        processes: u32,
        min_rps: f64,
        now: std::time::Instant,
    ) -> bool {
        let Some(l) = self.limiter.as_mut() else {
            return false;
        };
        if self.fallback_from.is_some() {
            return false;
        }
        let rps = l.quota().rps;
        self.fallback_from = Some(rps);
        l.set_rate(
            exitcrawl::limiter::fallback_rps(rps, processes, min_rps),
            now,
        );
        true
    }

    pub(super) fn leave_fallback(&mut self, now: std::time::Instant) {
        if let (Some(rps), Some(l)) = (self.fallback_from.take(), self.limiter.as_mut()) {
            l.set_rate(rps, now);
        }
    }

    pub(super) fn ready_in(&mut self, now: std::time::Instant) -> Duration {
        let pause = self
            .pause_until
            .max(self.budget_wait)
            .map_or(Duration::ZERO, |p| p.saturating_duration_since(now));
        let pace = self
            .limiter
            .as_mut()
            .map_or(Duration::ZERO, |l| l.peek(now));
        pause.max(pace)
    }
}

/// A host's pacing as [`Pacing::choose`] reads it: its limiter keys and how recently each exit
/// sent to it.
#[derive(Default)]
pub(super) struct HostPacing {
    /// The limiter key of each exit, by exit index (scope `auto`: each exit's own lane,
    /// unpaced until the limiter gives it a rate).
    pub(super) keys: Vec<Option<SharedKey>>,
    /// Scope `auto`: the host's budget, which every exit's requests draw on.
    pub(super) host_key: Option<SharedKey>,
    /// `sends` when each exit last sent to this host (0: never).
    pub(super) last_sent: Vec<u64>,
    /// Requests sent to this host.
    pub(super) sends: u64,
}

impl HostPacing {
    /// The shortest interval among the host's paced keys; `None` when none is paced
    /// (what waits is then an exit's own token bucket, or a pause).
    pub(super) fn shortest_interval(&self) -> Option<Duration> {
        self.keys
            .iter()
            .flatten()
            .chain(&self.host_key)
            .filter_map(|k| Some(k.borrow().limiter.as_ref()?.quota().interval()))
            .min()
    }
}

/// The pacing state of `key`, created on first use. `paced`: start with a pacer at the
/// first rate, `start()` (with `aimd`: the host prior's under scope `auto`, the
/// configured `initial_rps` otherwise); an exit's own lane under scope `auto` starts
/// unpaced and gets a pacer with the limiter's first
/// [`SetInterval`](crate::messages::SetInterval) for it.
pub(super) fn key_state(
    keys: &mut HashMap<LimitKey, SharedKey>,
    settings: &Settings,
    key: LimitKey,
    (seed, paced, start): (usize, bool, impl FnOnce() -> f64),
    now: std::time::Instant,
) -> SharedKey {
    let l = &settings.limiter;
    let state = keys.entry(key).or_insert_with(|| {
        let limiter: Option<Box<dyn RateLimiter>> = match l.algorithm {
            Algorithm::None => None,
            _ if !paced => None,
            Algorithm::Aimd => Some(Box::new(Pacer::new(
                interval_of(start()),
                l.jitter,
                seed as u64 ^ 0xa11ce,
                now,
            ))),
            other => other
                .limiter_kind()
                .map(|k| limiter::build(k, Quota::new(l.initial_rps, l.burst.max(1)), now)),
        };
        Rc::new(RefCell::new(KeyState {
            limiter,
            pause_until: None,
            budget_wait: None,
            fallback_from: None,
            retry_after_binds_exit: false,
        }))
    });
    Rc::clone(state)
}

/// The key whose pacing every request through exit `exit` to `host` must pass first: the
/// scope's key, or under scope `auto` the exit's own lane.
pub(super) fn exit_key(settings: &Settings, exit: &Arc<str>, host: &Arc<str>) -> (LimitKey, bool) {
    match settings.limiter.scope {
        Scope::Auto => (LimitKey::exit_lane(exit, host), false),
        scope => (LimitKey::new(scope, exit, host), true),
    }
}

/// `host`'s keys under scope `auto`: its own budget and each exit's lane.
fn host_keys<'a>(
    host: &'a Arc<str>,
    exits: impl Iterator<Item = Arc<str>> + 'a,
) -> impl Iterator<Item = LimitKey> + 'a {
    std::iter::once(None)
        .chain(exits.map(Some))
        .map(|exit| LimitKey {
            exit,
            host: Some(Arc::clone(host)),
        })
}

/// Every limiter key's pacing, and what the exit choice reads besides a host's own state.
pub(super) struct Pacing {
    settings: Arc<Settings>,
    /// Where a new host's budget starts (scope `auto`), shared with the limiter, which
    /// learns it.
    prior: Arc<Mutex<HostPrior>>,
    /// Pacing per limiter key; hosts keep a handle to theirs (see [`HostPacing::keys`]).
    keys: HashMap<LimitKey, SharedKey>,
    /// Scratch for the choice: when each exit may send next.
    ready: Vec<Duration>,
    /// Breaks ties between equally loaded exits in turn.
    tie: u64,
    /// `aimd` under scope `auto`: hosts whose pacing began, or went on past the limiter
    /// forgetting them, since the limiter was last told ([`Pacing::take_met`]). It
    /// forgets a host's pacing only once it knows of the host, and a host whose every
    /// fetch ends here (no exit of its address's family, every exit failing locally) is
    /// never heard of otherwise.
    met: Vec<Arc<str>>,
}

impl Pacing {
    pub(super) fn new(settings: Arc<Settings>, prior: Arc<Mutex<HostPrior>>) -> Self {
        Self {
            settings,
            prior,
            keys: HashMap::default(),
            ready: Vec::new(),
            tie: 0,
            met: Vec::new(),
        }
    }

    /// The limiter forgets hosts' pacing: `aimd` under scope `auto`.
    fn forgets(&self) -> bool {
        let l = &self.settings.limiter;
        l.algorithm == Algorithm::Aimd && l.scope == Scope::Auto
    }

    /// Some host was met since the limiter was last told (see `met`).
    pub(super) fn has_met(&self) -> bool {
        !self.met.is_empty()
    }

    /// The hosts met since the last call, for the limiter (see `met`).
    pub(super) fn take_met(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.met)
    }

    /// Which exit may send a fetch (`req`) to `host` now: the core's `select` over every
    /// exit's health, load (the host's own count against `per_host_connections`), pacing
    /// (the exit's token bucket, the limiter keys' pacers) and how recently it sent to
    /// this host. On `Exit(i)` the permits the selection saw as free are taken.
    pub(super) fn choose(
        &mut self,
        exits: &mut [ExitSlot],
        (active, pacing): (&mut Vec<u32>, &mut HostPacing),
        host: &Arc<str>,
        req: &select::Request<'_>,
        now_std: std::time::Instant,
    ) -> Selection {
        let n = exits.len();
        let settings = &*self.settings;
        let per_host_cap = settings.crawler.per_host_connections;
        if active.len() < n {
            active.resize(n, 0);
            pacing.keys.resize(n, None);
            pacing.last_sent.resize(n, 0);
        }
        let forgets = self.forgets();
        let host_ready = match settings.limiter.scope {
            Scope::Auto => pacing
                .host_key
                .get_or_insert_with(|| {
                    let key = LimitKey {
                        exit: None,
                        host: Some(Arc::clone(host)),
                    };
                    if forgets && !self.keys.contains_key(&key) {
                        self.met.push(Arc::clone(host));
                    }
                    let l = &settings.limiter;
                    let start = || {
                        let prior = self.prior.lock().unwrap_or_else(|e| e.into_inner());
                        prior.start_for(host, l.initial_rps, l.min_rps)
                    };
                    key_state(&mut self.keys, settings, key, (0, true, start), now_std)
                })
                .borrow_mut()
                .ready_in(now_std),
            _ => Duration::ZERO,
        };
        self.ready.clear();
        for (i, exit) in exits.iter_mut().enumerate() {
            let bucket = exit.share.ready_in(now_std);
            let key = pacing.keys[i]
                .get_or_insert_with(|| {
                    let (key, paced) = exit_key(settings, &exit.name, host);
                    let start = settings.limiter.initial_rps;
                    key_state(&mut self.keys, settings, key, (i, paced, || start), now_std)
                })
                .borrow_mut()
                .ready_in(now_std);
            self.ready.push(bucket.max(key).max(host_ready));
        }
        // Filled in place: `collect` builds the (half-kilobyte) vector and then moves it.
        let mut cands: SmallVec<[Candidate<'_>; 8]> = SmallVec::new();
        for (i, e) in exits.iter().enumerate() {
            cands.push(Candidate {
                name: &e.name,
                region: e.region.as_deref(),
                available: e.enabled && e.healthy,
                active: if active[i] >= per_host_cap {
                    e.max_concurrent
                } else {
                    e.share.active()
                },
                max_concurrent: e.max_concurrent,
                ready_in: self.ready[i],
                last_sent: pacing.last_sent[i],
                family: e.family,
            });
        }
        self.tie = self.tie.wrapping_add(1);
        let selection = select::select(&cands, req, self.tie);
        drop(cands);
        if let Selection::Exit(i) = selection {
            // Take the permits the selection saw as free.
            exits[i].share.take_token(now_std);
            for key in pacing.keys[i].iter().chain(pacing.host_key.iter()) {
                if let Some(l) = key.borrow_mut().limiter.as_mut() {
                    l.check(now_std);
                }
            }
            pacing.sends += 1;
            pacing.last_sent[i] = pacing.sends;
        }
        selection
    }

    /// The pacing state of the scope's key for a request through exit `exit` (named
    /// `name`) to `host` (under scope `auto`, the host's budget: what Redis shares across
    /// processes), created on first use.
    pub(super) fn key(
        &mut self,
        (exit, name): (usize, &Arc<str>),
        host: &Arc<str>,
        now: std::time::Instant,
    ) -> SharedKey {
        let key = LimitKey::new(self.settings.limiter.scope, name, host);
        let start = self.settings.limiter.initial_rps;
        key_state(
            &mut self.keys,
            &self.settings,
            key,
            (exit, true, || start),
            now,
        )
    }

    /// Forget `host`'s keys (its own and its exit lanes'): the limiter forgot its
    /// controllers.
    pub(super) fn forget(&mut self, host: &Arc<str>, exits: impl Iterator<Item = Arc<str>>) {
        for key in host_keys(host, exits) {
            self.keys.remove(&key);
        }
    }

    /// `host`'s keys as a forgotten host's would start, kept in place: the limiter
    /// forgot its controllers while it has work here, whose entry holds the keys. Its
    /// exit lanes are unpaced again (a new policy has none), a Retry-After binds the host
    /// again, and the host's budget runs at its rate until the limiter's first word.
    /// Pauses in force stay. The host is met again: its pacing is forgotten after
    /// another silence unless the limiter hears from it.
    pub(super) fn restart(&mut self, host: &Arc<str>, exits: impl Iterator<Item = Arc<str>>) {
        if self.forgets() {
            self.met.push(Arc::clone(host));
        }
        for key in host_keys(host, exits) {
            if let Some(state) = self.keys.get(&key) {
                let mut state = state.borrow_mut();
                state.retry_after_binds_exit = false;
                if key.exit.is_some() && self.settings.limiter.scope == Scope::Auto {
                    state.limiter = None;
                }
            }
        }
    }

    /// The rate and burst the shared budget (Redis) must see for `key`'s requests: the
    /// whole rate, not the local share a fallback paces at.
    pub(super) fn shared_quota(&self, key: &SharedKey) -> (f64, u32) {
        let state = key.borrow();
        match (&state.limiter, state.fallback_from) {
            (_, Some(r)) => (r, 1),
            (Some(l), None) => {
                let q = l.quota();
                (q.rps, q.burst.max(1))
            }
            (None, None) => (self.settings.limiter.initial_rps, 1),
        }
    }

    /// The limiter's new interval for `key` (and the pause it asks for, a throttle's):
    /// the key's pacer runs at it (an exit's own lane under scope `auto` gets its first
    /// pacer here, seeded by `seed`), on a local share while Redis is away. Returns the
    /// key's pause before this one when a pause was asked, for the pause metrics; `None`
    /// for a key not paced here or no pause.
    pub(super) fn set_interval(
        &mut self,
        key: &LimitKey,
        (interval, pause_until): (Duration, Option<std::time::Instant>),
        seed: usize,
        now: std::time::Instant,
    ) -> Option<Option<std::time::Instant>> {
        let l = &self.settings.limiter;
        let adaptive = l.algorithm == Algorithm::Aimd;
        let shared = match self.keys.get(key) {
            Some(k) => Rc::clone(k),
            // A host forgotten here after the limiter heard from it again (each forgets
            // on its own turn): its key is made at the rate told, so that no rate or
            // pause of the limiter's is lost.
            // A pause for a host not paced here yet (another process read it, or this
            // one forgot the host): kept, so that this process's first request to the
            // host does not go into it.
            None if key.host.is_some()
                && ((adaptive && l.scope == Scope::Auto)
                    || pause_until.is_some_and(|p| p > now)) =>
            {
                let rps = 1.0 / interval.as_secs_f64().max(1e-9);
                let paced = l.scope != Scope::Auto || key.exit.is_none();
                let settings = &self.settings;
                key_state(
                    &mut self.keys,
                    settings,
                    key.clone(),
                    (seed, paced, || rps),
                    now,
                )
            }
            None => return None,
        };
        let state = &mut *shared.borrow_mut();
        if state.limiter.is_none() && adaptive && key.exit.is_some() {
            // Scope `auto`: an exit's own lane is paced from its first rate on.
            state.limiter = Some(Box::new(Pacer::new(
                interval,
                l.jitter,
                seed as u64 ^ 0xa11ce,
                now,
            )));
        }
        if let Some(pacer) = state.limiter.as_mut() {
            if adaptive {
                let rps = 1.0 / interval.as_secs_f64().max(1e-9);
                match state.fallback_from.as_mut() {
                    // Still on a local share: remember the new whole, pace the share.
                    Some(whole) => {
                        *whole = rps;
                        let share = exitcrawl::limiter::fallback_rps(
                            rps,
                            self.settings.redis.processes,
                            l.min_rps,
                        );
                        pacer.set_rate(share, now);
                    }
                    None => pacer.set_rate(rps, now),
                }
            }
            if let Some(p) = pause_until {
                // The pause reaches every request already queued for this key, and the
                // saved-up burst is gone when it ends.
                pacer.drain_until(p, now);
            }
        }
        let p = pause_until?;
        let before = state.pause_until;
        state.pause_until = Some(before.map_or(p, |q| q.max(p)));
        Some(before)
    }

    /// Where a Retry-After read on `key`'s host binds, as the limiter says: the exit that
    /// read it (`to_exit`), or the key it is charged to.
    pub(super) fn bind_retry_after(&self, key: &LimitKey, to_exit: bool) {
        if let Some(state) = self.keys.get(key) {
            state.borrow_mut().retry_after_binds_exit = to_exit;
        }
    }

    /// Distributed mode: the shared budget allowed a request for `key`; a key paced on a
    /// local share while Redis was away goes back to its whole rate.
    pub(super) fn shared_allowed(&self, key: &LimitKey, now: std::time::Instant) {
        if let Some(state) = self.keys.get(key) {
            state.borrow_mut().leave_fallback(now);
        }
    }

    /// Distributed mode: the shared budget says `key` may send again at `until`.
    pub(super) fn shared_wait(
        &self,
        key: &LimitKey,
        until: std::time::Instant,
        now: std::time::Instant,
    ) {
        if let Some(state) = self.keys.get(key) {
            let mut state = state.borrow_mut();
            state.leave_fallback(now);
            state.budget_wait = Some(state.budget_wait.map_or(until, |q| q.max(until)));
        }
    }

    /// Distributed mode: Redis did not answer for `key`, which paces on a conservative
    /// local share (`redis.processes`, at least `min_rps`) until it does. `true` when this
    /// call started the fallback.
    pub(super) fn shared_down(&self, key: &LimitKey, now: std::time::Instant) -> bool {
        let processes = self.settings.redis.processes;
        let min_rps = self.settings.limiter.min_rps;
        self.keys
            .get(key)
            .is_some_and(|s| s.borrow_mut().enter_fallback(processes, min_rps, now))
    }

    /// The interval each key that exit `name`'s requests pass is paced at, by host (`*`
    /// for a key of every host).
    pub(super) fn intervals(&self, name: &Arc<str>) -> Vec<(String, Duration)> {
        self.keys
            .iter()
            .filter(|(k, _)| k.exit.as_ref().is_none_or(|x| x == name))
            .filter_map(|(k, s)| {
                let q = s.borrow().limiter.as_ref()?.quota();
                let host = k.host.as_deref().unwrap_or("*").to_string();
                Some((host, interval_of(q.rps)))
            })
            .collect()
    }
}

impl HostPacing {
    /// A throttle's Retry-After through exit `i` binds from the moment it is read: the
    /// limiter's pause for it comes a mailbox hop later, and a request sent to the host
    /// meanwhile meets the same wall (and is one more 429 the site counts). The pause goes
    /// on the exit's own key where the limiter says the host's Retry-After binds the exit
    /// (its budget goes on through the other exits), else on the key the limiter charges
    /// throttles to first: the exit's own lane where it has one, else the host's budget.
    /// Returns whether it went on the exit's own key (`false`: the host's budget) and that
    /// key's pause before, for the pause metrics; `None` when the host has no key yet.
    /// `quota`: the pause of a quota used up (the site's rate-limit headers), which goes on
    /// the key throttles are charged to whatever a Retry-After binds.
    pub(super) fn pause(
        &self,
        i: usize,
        until: std::time::Instant,
        now: std::time::Instant,
        quota: bool,
    ) -> Option<(bool, Option<std::time::Instant>)> {
        let own = self.keys.get(i).and_then(Option::as_ref);
        let binds_exit = !quota
            && self
                .host_key
                .as_ref()
                .is_some_and(|k| k.borrow().retry_after_binds_exit);
        let (key, on_exit) = match own {
            Some(k) if binds_exit || k.borrow().limiter.is_some() => (k, true),
            _ => match self.host_key.as_ref() {
                Some(k) => (k, false),
                None => (own?, true),
            },
        };
        let k = &mut *key.borrow_mut();
        let before = k.pause_until;
        k.pause_until = Some(before.map_or(until, |q| q.max(until)));
        if let Some(l) = k.limiter.as_mut() {
            l.drain_until(until, now);
        }
        Some((on_exit, before))
    }

    /// Whether a pause keeps exit `i` from sending to this host at `now`: on its own key
    /// or on the host's budget.
    pub(super) fn paused_for(&self, i: usize, now: std::time::Instant) -> bool {
        let paused = |k: &SharedKey| k.borrow().pause_until.is_some_and(|u| u > now);
        self.host_key.as_ref().is_some_and(paused)
            || self
                .keys
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(paused)
    }

    /// Whether one of the exits `others` may send to this host before `until`: the host's
    /// budget is not paused past it, nor that exit's own key.
    pub(super) fn open_before(
        &self,
        mut others: impl Iterator<Item = usize>,
        until: std::time::Instant,
    ) -> bool {
        let past = |k: &SharedKey| k.borrow().pause_until.is_some_and(|u| u > until);
        if self.host_key.as_ref().is_some_and(past) {
            return false;
        }
        others.any(|j| !self.keys.get(j).and_then(Option::as_ref).is_some_and(past))
    }
}

#[cfg(test)]
mod tests;
