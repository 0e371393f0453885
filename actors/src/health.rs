//! `HealthActor`: ejects failing exits and brings them back.
//!
//! Why separate from the scheduler: health checks are slow I/O on a timer, and they must
//! never hold up a fetch. The actor pings every exit through that exit's own client (so a
//! broken source address fails the check), feeds results and the scheduler's passive
//! observations into the core's [`ExitHealth`] state machine, and reports transitions.
//! An ejected exit goes to probing when its ejection ends, on a timer of its own, and is
//! checked then: the rounds may be far apart, and the fetches waiting for it are not.
//!
//! A check that fails while the exit's real requests are answered does not count (the
//! core's passive window decides): the health URL is what is wrong, and the first such
//! check is warned about once for the whole crawl, naming the URL and the error. A
//! disabled exit is not checked and does not count toward "all exits are down".

use std::time::Duration;

use actix::prelude::*;
use exitcrawl::health::{
    fleet_state, CheckVerdict, ExitHealth, FleetState, HealthPolicy, Transition,
};
use exitcrawl::rng::SplitMix64;

use crate::exit::ExitActor;
use crate::messages::{AllExitsDown, HealthChanged, Observed, Ping};
use crate::metrics::{ExitLabels, Metrics};

/// Health checking settings.
#[derive(Debug, Clone)]
pub struct HealthOptions {
    /// URL fetched through every exit; `None`: passive health only.
    pub url: Option<String>,
    /// Time between rounds.
    pub interval: Duration,
    /// Timeout of one check.
    pub timeout: Duration,
    /// The state machine's policy.
    pub policy: HealthPolicy,
}

/// Watches the exits.
pub struct HealthActor {
    opts: HealthOptions,
    exits: Vec<Addr<ExitActor>>,
    names: Vec<String>,
    health: Vec<ExitHealth>,
    subscriber: Recipient<HealthChanged>,
    all_down: Recipient<AllExitsDown>,
    was_all_down: bool,
    rng: SplitMix64,
    metrics: std::sync::Arc<Metrics>,
    labels: Vec<ExitLabels>,
    /// Exits found broken before any request (their source address would not bind),
    /// ejected as the actor starts.
    start_failures: Vec<(usize, String)>,
    /// Per exit: in service (`enabled` in its config). A disabled exit is not checked.
    enabled: Vec<bool>,
    /// The health URL was warned about (a check failed while real requests succeeded).
    warned_url: bool,
}

impl HealthActor {
    /// Watch `exits` (named `names`), telling `subscriber` about transitions.
    pub fn new(
        opts: HealthOptions,
        exits: Vec<Addr<ExitActor>>,
        names: Vec<String>,
        ips: Vec<std::net::IpAddr>,
        subscriber: Recipient<HealthChanged>,
        all_down: Recipient<AllExitsDown>,
        metrics: std::sync::Arc<Metrics>,
    ) -> Self {
        let health = exits.iter().map(|_| ExitHealth::new(opts.policy)).collect();
        let enabled = vec![true; exits.len()];
        let labels = names
            .iter()
            .zip(&ips)
            .map(|(n, ip)| Metrics::exit(n, *ip))
            .collect();
        Self {
            opts,
            exits,
            names,
            health,
            subscriber,
            all_down,
            was_all_down: false,
            rng: SplitMix64::new(0x4ea1),
            metrics,
            labels,
            start_failures: Vec::new(),
            enabled,
            warned_url: false,
        }
    }

    /// Which exits are in service, in configuration order (default: all).
    pub fn with_enabled(mut self, enabled: Vec<bool>) -> Self {
        if enabled.len() == self.health.len() {
            self.enabled = enabled;
        }
        self
    }

    /// Eject these exits (index, why) as soon as the actor starts: their source address
    /// would not bind (see `Crawler::start`).
    pub fn with_start_failures(mut self, failures: Vec<(usize, String)>) -> Self {
        self.start_failures = failures;
        self
    }

    fn apply(&mut self, exit: usize, t: Option<Transition>, ctx: &mut Context<Self>) {
        self.metrics
            .consecutive_failures
            .get_or_create(&self.labels[exit])
            .set(i64::from(self.health[exit].consecutive_failures()));
        let Some(t) = t else { return };
        let available = self.health[exit].is_available();
        self.metrics
            .exit_healthy
            .get_or_create(&self.labels[exit])
            .set(i64::from(available));
        if let Transition::Ejected { .. } = t {
            self.metrics
                .ejections
                .get_or_create(&self.labels[exit])
                .inc();
        }
        let error = self.health[exit].last_error().map(str::to_owned);
        match t {
            Transition::Ejected { until } => tracing::warn!(
                exit = %self.names[exit],
                error = error.as_deref().unwrap_or(""),
                ejected_for_ms = until.saturating_duration_since(crate::clock::now()).as_millis() as u64,
                "exit ejected"
            ),
            Transition::Probing => tracing::info!(exit = %self.names[exit], "exit probing"),
            Transition::Recovered => tracing::info!(exit = %self.names[exit], "exit recovered"),
        }
        self.subscriber.do_send(HealthChanged {
            exit,
            available,
            probing: self.health[exit].is_probing(),
            error,
        });
        let serving = self
            .health
            .iter()
            .zip(&self.enabled)
            .filter_map(|(h, on)| on.then_some(h));
        let down = matches!(fleet_state(serving), FleetState::AllDown { .. });
        if down && !self.was_all_down {
            tracing::error!("all exits are down");
            self.all_down.do_send(AllExitsDown);
        }
        self.was_all_down = down;
        if let Transition::Ejected { until } = t {
            self.probe_at(exit, until, ctx);
        }
    }

    /// Probe `exit` when its ejection ends, at `until`: the rounds may be an hour apart,
    /// and an exit left ejected past its time keeps fetches waiting for it until the
    /// fleet's wait bound ends them.
    fn probe_at(&mut self, exit: usize, until: std::time::Instant, ctx: &mut Context<Self>) {
        let wait = until.saturating_duration_since(crate::clock::now());
        ctx.run_later(wait, move |act, ctx| act.ejection_over(exit, until, ctx));
    }

    /// The ejection of `exit` that was to end at `until` is over: the exit probes, and its
    /// check goes out as in a round, so that an exit no fetch is waiting for comes back
    /// too. A later ejection has its own timer; a round may have moved it on already.
    fn ejection_over(&mut self, exit: usize, until: std::time::Instant, ctx: &mut Context<Self>) {
        if self.health[exit].ejected_until() != Some(until) {
            return;
        }
        let now = crate::clock::now();
        let Some(t) = self.health[exit].poll(now) else {
            // The timer rounds to the runtime's tick: early by that, look again at `until`.
            self.probe_at(exit, until, ctx);
            return;
        };
        self.apply(exit, Some(t), ctx);
        if let (true, Some(url)) = (self.enabled[exit], self.opts.url.clone()) {
            self.check(exit, url, ctx);
        }
    }

    /// What real traffic through `exit` said: answered (`None`) or failed by the exit's
    /// own fault.
    fn observe(&mut self, exit: usize, error: Option<String>, ctx: &mut Context<Self>) {
        if exit >= self.health.len() {
            return;
        }
        let now = crate::clock::now();
        let t = match error {
            None => self.health[exit].on_success(now),
            Some(e) => self.health[exit].on_failure(now, &e, &mut self.rng),
        };
        self.apply(exit, t, ctx);
    }

    /// What an active check through `exit` said.
    fn checked(&mut self, exit: usize, error: Option<String>, ctx: &mut Context<Self>) {
        let now = crate::clock::now();
        let Some(e) = error else {
            let t = self.health[exit].on_check_success(now);
            self.apply(exit, t, ctx);
            return;
        };
        match self.health[exit].on_check_failure(now, &e, &mut self.rng) {
            CheckVerdict::Counted(t) => self.apply(exit, t, ctx),
            CheckVerdict::Discounted { first } => {
                if first && !self.warned_url {
                    self.warned_url = true;
                    tracing::warn!(
                        url = self.opts.url.as_deref().unwrap_or(""),
                        exit = %self.names[exit],
                        error = %e,
                        "the health check fails while real requests through the exit are answered: the health URL looks wrong ([health] url); exits stay in service while their real requests succeed"
                    );
                }
            }
        }
    }

    fn round(&mut self, ctx: &mut Context<Self>) {
        let now = crate::clock::now();
        for i in 0..self.health.len() {
            let t = self.health[i].poll(now);
            self.apply(i, t, ctx);
        }
        let Some(url) = self.opts.url.clone() else {
            return;
        };
        for i in 0..self.exits.len() {
            if self.enabled[i] {
                self.check(i, url.clone(), ctx);
            }
        }
    }

    /// Fetch `url` through `exit`; its answer goes to [`Self::checked`].
    fn check(&mut self, exit: usize, url: String, ctx: &mut Context<Self>) {
        let ping = Ping {
            url,
            timeout: self.opts.timeout,
        };
        let timeout = self.opts.timeout + Duration::from_millis(100);
        let fut = self.exits[exit].send(ping).timeout(timeout);
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            let error = match res {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(e) => Some(format!("health check: {e}")),
            };
            act.checked(exit, error, ctx);
        }));
    }
}

impl Actor for HealthActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(16 * 1024);
        let now = crate::clock::now();
        for (i, error) in std::mem::take(&mut self.start_failures) {
            if let Some(h) = self.health.get_mut(i) {
                let t = h.fail_at_start(now, &error, &mut self.rng);
                self.apply(i, t, ctx);
            }
        }
        ctx.run_interval(self.opts.interval, |act, ctx| act.round(ctx));
    }
}

impl Handler<Observed> for HealthActor {
    type Result = ();

    fn handle(&mut self, msg: Observed, ctx: &mut Self::Context) {
        self.observe(msg.exit, msg.error, ctx);
    }
}
