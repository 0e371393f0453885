//! `LimiterActor`: turns feedback into pacing, per limiter key.
//!
//! Why an actor of its own: every exit's answers feed the same controllers when a budget
//! is wider than one exit (scope `auto` and `host`, `global`), so the controllers need one
//! owner that sees all reports in order. With `algorithm = "aimd"` it runs the core's
//! controllers — under scope `auto` one [`HostPolicy`] per host, which learns whether the
//! host limits per exit or as a whole; under the other scopes one [`Controller`] per key —
//! and broadcasts [`SetInterval`] to its subscribers. Fixed algorithms only take pauses
//! from the site's answers and headers (and in distributed mode share them, see
//! `shared.rs`). What an answer means (a throttle, an error, a refusal) is decided in the
//! core ([`exitcrawl::aimd::classify`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use actix::prelude::*;
use exitcrawl::aimd::classify;
use exitcrawl::aimd::coupling::{Coupling, HostPolicy, Lane};
use exitcrawl::aimd::fleet::SharedKey;
use exitcrawl::aimd::prior::HostPrior;
use exitcrawl::aimd::{Adjustment, AimdConfig, Controller, Response, Signal};
use exitcrawl::config::{Algorithm, LimiterSettings, Scope};
use exitcrawl::headers::ServerHints;
use exitcrawl::limiter::interval_of;
pub use exitcrawl::limiter::LimitKey;

use crate::messages::{
    Failed, GetLimits, HostLimits, LaneLimits, SetInterval, Succeeded, Throttled,
};
use crate::metrics::{Metrics, ScopeLabels};
use crate::redis::SharedRates;

mod quiet;
mod shared;

pub(crate) use quiet::{ForgetHosts, HostsMet};

/// The controllers, as the scope arranges them.
enum Controllers {
    /// Scope `auto`: one host policy per host; exits by their index in `[[exits]]`.
    Hosts {
        policies: HashMap<Arc<str>, Known>,
        exits: Vec<Arc<str>>,
        /// Hosts whose Retry-After binds the exit that read it, as last told the
        /// subscribers.
        binds_exit: HashSet<Arc<str>>,
    },
    /// Every other scope: one controller per key.
    Keys(HashMap<LimitKey, Controller>),
}

/// A host's controllers, and when it was last heard from (see `quiet.rs`).
struct Known {
    policy: HostPolicy,
    heard: std::time::Instant,
}

/// Runs the controllers and broadcasts interval changes.
pub struct LimiterActor {
    settings: LimiterSettings,
    controllers: Controllers,
    subscribers: Vec<Recipient<SetInterval>>,
    /// Distributed mode: rates shared with the other crawler processes, and what this
    /// process knows of each key's (see `shared.rs`).
    shared: Option<SharedRates>,
    fleet: HashMap<LimitKey, SharedKey>,
    /// This actor, for the replies of Redis calls it spawns.
    me: Option<Addr<Self>>,
    /// Told the hosts whose controllers were forgotten (the scheduler, whose pacing of
    /// them goes too).
    forgotten: Option<Recipient<ForgetHosts>>,
    /// Scope `auto`: hosts the scheduler paces with no controllers here, their every
    /// answer so far having said nothing (a name that does not resolve) or none having
    /// come (no exit could take their fetches, every exit failed locally), with when they
    /// were last heard from or met ([`HostsMet`]): their pacing is forgotten as a quiet
    /// host's is. A broad crawl meets many such dead hosts.
    unlearned: HashMap<Arc<str>, std::time::Instant>,
    metrics: Option<Arc<Metrics>>,
    /// Scope `auto`: what the hosts so far say about where a new one starts (shared with
    /// the scheduler, whose pacer for a new host starts there too).
    prior: Arc<Mutex<HostPrior>>,
}

impl LimiterActor {
    /// A limiter with the `[limiter]` settings, broadcasting to `subscribers`. `exits`
    /// are the exits' names in `[[exits]]` order (scope `auto` keeps a lane per exit).
    pub fn new(
        settings: LimiterSettings,
        exits: Vec<Arc<str>>,
        subscribers: Vec<Recipient<SetInterval>>,
    ) -> Self {
        let controllers = if settings.scope == Scope::Auto {
            Controllers::Hosts {
                policies: HashMap::new(),
                exits,
                binds_exit: HashSet::new(),
            }
        } else {
            Controllers::Keys(HashMap::new())
        };
        Self {
            settings,
            controllers,
            subscribers,
            shared: None,
            fleet: HashMap::new(),
            me: None,
            forgotten: None,
            unlearned: HashMap::new(),
            metrics: None,
            prior: Arc::default(),
        }
    }

    /// Learn where new hosts start into `prior` (the scheduler's, so both start there).
    pub fn with_prior(mut self, prior: Arc<Mutex<HostPrior>>) -> Self {
        self.prior = prior;
        self
    }

    /// Tell `to` the hosts whose controllers were forgotten.
    pub(crate) fn telling_forgotten(mut self, to: Recipient<ForgetHosts>) -> Self {
        self.forgotten = Some(to);
        self
    }

    /// Distributed mode: publish this process's rate changes and adopt the others'.
    pub fn with_shared_rates(mut self, shared: SharedRates) -> Self {
        self.shared = Some(shared);
        self
    }

    /// Export what scope `auto` detects per host (`exitcrawl_limiter_scope`) and bans.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn broadcast(&self, key: LimitKey, a: &Adjustment) {
        let retry_after_binds_exit = match (&self.controllers, &key) {
            (
                Controllers::Hosts { binds_exit, .. },
                LimitKey {
                    exit: None,
                    host: Some(h),
                },
            ) => binds_exit.contains(h),
            _ => false,
        };
        let msg = SetInterval {
            exit: key.exit,
            host: key.host,
            interval: a.interval,
            pause_until: a.pause_until,
            retry_after_binds_exit,
        };
        if a.pause_until.is_some() {
            tracing::info!(exit = ?msg.exit, host = ?msg.host, interval_ms = a.interval.as_secs_f64() * 1e3, "limiter pause");
        }
        for s in &self.subscribers {
            s.do_send(msg.clone());
        }
    }

    /// Carry out a controller's change for `key`: a fixed algorithm keeps its rate and
    /// takes only the pause; the change is published (distributed mode; a fixed
    /// algorithm's pause alone) and broadcast.
    fn apply(&mut self, key: LimitKey, change: Adjustment, now: std::time::Instant) {
        let change = if self.adaptive() {
            change
        } else {
            let Some(p) = change.pause_until else {
                return;
            };
            self.fixed_pause(p)
        };
        self.publish(&key, &change, now);
        self.broadcast(key, &change);
    }

    /// The rate is the controllers' (`aimd`), not the configuration's.
    fn adaptive(&self) -> bool {
        self.settings.algorithm == Algorithm::Aimd
    }

    /// A fixed algorithm's change: its configured rate, paused until `until`.
    fn fixed_pause(&self, until: std::time::Instant) -> Adjustment {
        Adjustment {
            rps: self.settings.initial_rps,
            interval: interval_of(self.settings.initial_rps),
            pause_until: Some(until),
        }
    }

    fn feed(&mut self, exit: &Arc<str>, host: &Arc<str>, response: Response, hints: &ServerHints) {
        if response.signal == Signal::Neutral && hints.is_empty() {
            self.heard_nothing_from(host);
            return;
        }
        self.read_new_key(exit, host);
        let now = crate::clock::now();
        let cfg = || AimdConfig::from_settings(&self.settings);
        let mut changes: Vec<(LimitKey, Adjustment)> = Vec::with_capacity(2);
        match &mut self.controllers {
            Controllers::Hosts {
                policies,
                exits,
                binds_exit,
            } => {
                let unlearned = &mut self.unlearned;
                let n = exits.len();
                let i = exits.iter().position(|e| e == exit).unwrap_or(n);
                let prior = &self.prior;
                let known = policies.entry(Arc::clone(host)).or_insert_with(|| {
                    let cfg = cfg();
                    let mut p = prior.lock().unwrap_or_else(|e| e.into_inner());
                    let start = p.start_for(host, cfg.initial_rps, cfg.min_rps);
                    p.returned(host);
                    unlearned.remove(host);
                    Known {
                        policy: HostPolicy::new(cfg, n, Coupling::Auto, now)
                            .starting_at(start, now)
                            .expecting_pause(p.pause())
                            .expecting_probe_throttles(p.probe_throttles()),
                        heard: now,
                    }
                });
                known.heard = now;
                let policy = &mut known.policy;
                let before = policy.detected();
                let estimate = HostPrior::estimate(policy);
                let lane_key = |lane: Lane| match lane {
                    Lane::Host => LimitKey::new(Scope::Auto, exit, host),
                    Lane::Exit(j) => LimitKey::exit_lane(exits.get(j).unwrap_or(exit), host),
                };
                for (lane, a) in policy.on_response(i, &response, now) {
                    changes.push((lane_key(lane), a));
                }
                if let Some(p) = classify::hints(response.signal, hints) {
                    for (lane, a) in policy.on_hint(i, &p, now) {
                        changes.push((lane_key(lane), a));
                    }
                }
                tell_binding(
                    policy,
                    binds_exit,
                    (host, lane_key(Lane::Host)),
                    &mut changes,
                    now,
                );
                let throttled = matches!(response.signal, Signal::Throttle { .. });
                if throttled || HostPrior::estimate(policy) != estimate {
                    let mut p = prior.lock().unwrap_or_else(|e| e.into_inner());
                    p.observe(host, estimate, policy);
                }
                let after = policy.detected();
                if before != after {
                    tracing::info!(%host, scope = after.as_str(), "limiter: host's limit detected");
                    // Under a host's own label only: folded, two hosts' scopes would
                    // both read 1.
                    if let Some((m, (label, true))) =
                        self.metrics.as_ref().map(|m| (m, m.host_label_of(host)))
                    {
                        for d in [before, after] {
                            let l = ScopeLabels {
                                host: label.clone(),
                                scope: d.as_str().to_owned(),
                            };
                            m.limiter_scope.get_or_create(&l).set(i64::from(d == after));
                        }
                    }
                }
            }
            Controllers::Keys(map) => {
                let key = LimitKey::new(self.settings.scope, exit, host);
                let ctl = map
                    .entry(key.clone())
                    .or_insert_with(|| Controller::new(cfg(), now));
                if let Some(a) = ctl.on_response(&response, now) {
                    changes.push((key.clone(), a));
                }
                if let Some(p) = classify::hints(response.signal, hints) {
                    if let Some(a) = ctl.on_hint(&p, now) {
                        changes.push((key, a));
                    }
                }
            }
        }
        for (key, a) in changes {
            self.apply(key, a, now);
        }
    }

    /// What the controllers learned, per host (scope `auto`) or per key; empty unless the
    /// algorithm is the adaptive one. Without it no rate is learned: `none` paces nothing,
    /// and a fixed algorithm paces at its configured rate (`initial_rps`); their
    /// controllers only order pauses.
    fn limits(&self) -> Vec<HostLimits> {
        if !self.adaptive() {
            return Vec::new();
        }
        let lane = |c: &Controller, exit: Option<String>| LaneLimits {
            exit,
            rps: c.rate(),
            locked_out: c.locked_out(),
            bans: c.bans(),
            ceiling: c.ceiling(),
            latency_base: c.latency_base(),
            error_share: c.error_share(),
            decreases: c.decreases(),
        };
        let mut out: Vec<HostLimits> = match &self.controllers {
            Controllers::Hosts {
                policies,
                exits,
                binds_exit,
            } => policies
                .iter()
                .map(|(host, Known { policy: p, .. })| HostLimits {
                    host: host.to_string(),
                    scope: p.detected().as_str().to_owned(),
                    retry_after_binds: if binds_exit.contains(host) {
                        "exit"
                    } else {
                        "host"
                    }
                    .to_owned(),
                    lanes: p
                        .lanes()
                        .map(|(l, c)| match l {
                            Lane::Host => lane(c, None),
                            Lane::Exit(i) => lane(c, exits.get(i).map(|e| e.to_string())),
                        })
                        .collect(),
                })
                .collect(),
            Controllers::Keys(map) => map
                .iter()
                .map(|(k, c)| HostLimits {
                    host: k.host.as_deref().unwrap_or("*").to_owned(),
                    scope: self.settings.scope.as_str().to_owned(),
                    retry_after_binds: self.settings.scope.as_str().to_owned(),
                    lanes: vec![lane(c, k.exit.as_deref().map(str::to_owned))],
                })
                .collect(),
        };
        out.sort_by(|a, b| a.host.cmp(&b.host));
        out
    }
}

/// Where `host`'s Retry-After binds travels with its budget's (`host_key`'s) changes; a
/// change of binding alone is told too, with the budget as it is.
fn tell_binding(
    policy: &HostPolicy,
    binds_exit: &mut HashSet<Arc<str>>,
    (host, host_key): (&Arc<str>, LimitKey),
    changes: &mut Vec<(LimitKey, Adjustment)>,
    now: std::time::Instant,
) {
    let binds = policy.retry_after_binds_exit(now);
    if binds == binds_exit.contains(host) {
        return;
    }
    if binds {
        binds_exit.insert(Arc::clone(host));
    } else {
        binds_exit.remove(host);
    }
    let told = changes.iter().any(|(k, _)| *k == host_key);
    if let (false, Some(c)) = (told, policy.controller(Lane::Host)) {
        let a = Adjustment {
            rps: c.rate(),
            interval: c.interval(),
            pause_until: c.pause_until(now),
        };
        changes.push((host_key, a));
    }
}

impl Actor for LimiterActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(16 * 1024);
        if self.settings.algorithm == Algorithm::Aimd && self.settings.scope == Scope::Auto {
            // A quarter of the silence, from a second to a minute: a host is forgotten
            // at most that late.
            let every = (self.settings.forget_idle() / 4).clamp(
                std::time::Duration::from_secs(1),
                std::time::Duration::from_secs(60),
            );
            ctx.run_interval(every, |me, _| me.forget_quiet_hosts());
        }
        if let Some(shared) = self.shared.clone() {
            let me = ctx.address();
            self.me = Some(me.clone());
            actix_rt::spawn(shared::follow_shared_rates(shared, me));
        }
    }
}

impl Handler<Succeeded> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: Succeeded, _ctx: &mut Self::Context) {
        let mut signal = classify::answer(m.status, m.hints.retry_after, &self.settings);
        if m.retry {
            signal = classify::of_retry(signal);
        }
        let r = Response {
            sent_at: m.sent_at,
            latency: m.latency,
            signal,
            limited: m.limited,
            backlog: m.backlog,
        };
        self.feed(&m.exit, &m.host, r, &m.hints);
    }
}

impl Handler<Throttled> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: Throttled, _ctx: &mut Self::Context) {
        tracing::debug!(exit = %m.exit, host = %m.host, status = m.status, "throttled");
        let r = Response {
            sent_at: m.sent_at,
            latency: m.latency,
            signal: Signal::Throttle {
                retry_after: m.hints.retry_after,
            },
            limited: true,
            backlog: m.backlog,
        };
        self.feed(&m.exit, &m.host, r, &m.hints);
    }
}

impl Handler<Failed> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: Failed, _ctx: &mut Self::Context) {
        let mut signal = classify::failure(m.kind, &self.settings);
        if m.retry {
            signal = classify::of_retry(signal);
        }
        let r = Response {
            sent_at: m.sent_at,
            latency: m.latency,
            signal,
            limited: true,
            backlog: None,
        };
        self.feed(&m.exit, &m.host, r, &ServerHints::default());
    }
}

impl Handler<GetLimits> for LimiterActor {
    type Result = MessageResult<GetLimits>;

    fn handle(&mut self, _m: GetLimits, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.limits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn answer(exit: &Arc<str>, host: &str, sent_at: std::time::Instant) -> Succeeded {
        Succeeded {
            exit: Arc::clone(exit),
            host: Arc::from(host),
            sent_at,
            latency: Duration::from_millis(40),
            status: 200,
            hints: ServerHints::default(),
            limited: true,
            backlog: None,
            retry: false,
        }
    }

    /// The host lane's rate of `host`.
    async fn host_rate(limiter: &Addr<LimiterActor>, host: &str) -> f64 {
        let limits = limiter.send(GetLimits).await.unwrap();
        let h = limits.iter().find(|h| h.host == host).expect("the host");
        h.lanes[0].rps
    }

    /// A throttle of `host` through `exit`, sent now, with `retry_after` if any.
    fn throttle(exit: &Arc<str>, host: &str, retry_after: Option<Duration>) -> Throttled {
        Throttled {
            exit: Arc::clone(exit),
            host: Arc::from(host),
            sent_at: crate::clock::now(),
            latency: Duration::from_millis(40),
            status: 429,
            hints: ServerHints {
                retry_after,
                ..ServerHints::default()
            },
            backlog: None,
        }
    }

    /// The host lane's rate of a new host after one answer, with or without eight hosts
    /// cut before it (on tokio's paused clock).
    async fn new_host_rate(after_slow_hosts: bool) -> f64 {
        let exit: Arc<str> = Arc::from("e1");
        let limiter =
            LimiterActor::new(LimiterSettings::default(), vec![Arc::clone(&exit)], vec![]).start();
        if after_slow_hosts {
            // Each slow host: one answer, and two seconds later a throttle.
            for i in 0..HostPrior::MIN_HOSTS {
                let host = format!("slow{i}");
                let sent = crate::clock::now();
                limiter.send(answer(&exit, &host, sent)).await.unwrap();
                tokio::time::advance(Duration::from_secs(2)).await;
                limiter.send(throttle(&exit, &host, None)).await.unwrap();
            }
        }
        let sent = crate::clock::now();
        limiter.send(answer(&exit, "new", sent)).await.unwrap();
        host_rate(&limiter, "new").await
    }

    /// The host lane's rate of a new host after eight hosts throttled with
    /// `Retry-After: 60` and twenty answers of its own, 200 ms apart, each sent with
    /// `backlog` waiting (on tokio's paused clock).
    async fn new_host_rate_after_minute_pauses(backlog: u32) -> f64 {
        let exit: Arc<str> = Arc::from("e1");
        let limiter =
            LimiterActor::new(LimiterSettings::default(), vec![Arc::clone(&exit)], vec![]).start();
        for i in 0..HostPrior::MIN_HOSTS {
            let host = format!("paused{i}");
            limiter
                .send(answer(&exit, &host, crate::clock::now()))
                .await
                .unwrap();
            let minute = Some(Duration::from_secs(60));
            limiter.send(throttle(&exit, &host, minute)).await.unwrap();
        }
        for _ in 0..20 {
            tokio::time::advance(Duration::from_millis(200)).await;
            let sent = crate::clock::now() - Duration::from_millis(40);
            let m = Succeeded {
                backlog: Some(backlog),
                ..answer(&exit, "new", sent)
            };
            limiter.send(m).await.unwrap();
        }
        host_rate(&limiter, "new").await
    }

    #[actix::test]
    async fn a_new_host_holds_its_start_where_a_throttle_would_cost_more_than_its_work() {
        tokio::time::pause();
        let initial = LimiterSettings::default().initial_rps;
        // 39 pages at 5 req/s: 8 s of work against the minute the crawl's hosts pause.
        let short = new_host_rate_after_minute_pauses(39).await;
        assert_eq!(short, initial, "held at its start");
        // 1,000 pages: 200 s of work, worth the minute.
        let long = new_host_rate_after_minute_pauses(1_000).await;
        assert!(long > 4.0 * initial, "ramped: {long}");
    }

    #[actix::test]
    async fn a_new_host_starts_where_the_hosts_cut_before_it_say() {
        tokio::time::pause();
        let initial = LimiterSettings::default().initial_rps;
        let alone = new_host_rate(false).await;
        assert!(alone >= initial, "no prior: from initial_rps ({alone})");
        let after = new_host_rate(true).await;
        assert!(
            after < initial,
            "after eight cut hosts: {after} vs {initial}"
        );
    }
}
