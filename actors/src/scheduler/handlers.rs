use actix::clock::Instant;
use actix::prelude::*;
use exitcrawl::config::Algorithm;
use tokio::sync::oneshot;

use crate::controller::{ForgetHosts, LimitKey};
use crate::messages::{
    AllExitsDown, AttemptDone, ExitStats, Fetch, FetchError, FetchErrorKind, GetCounters, GetStats,
    HealthChanged, Intake, SetInterval, Shutdown,
};
use crate::metrics::{Outcome, RateLabels};

use super::dispatch::serves;
use super::{Enqueue, Scheduler, SchedulerActor};

impl StreamHandler<AttemptDone> for SchedulerActor {
    fn handle(&mut self, m: AttemptDone, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_attempt_done(m, ctx)
    }
    /// The scheduler holds a sender, so the report stream never ends while it runs; the
    /// default would stop the actor.
    fn finished(&mut self, _ctx: &mut Self::Context) {}
}

impl StreamHandler<Intake> for SchedulerActor {
    fn handle(&mut self, m: Intake, ctx: &mut Self::Context) {
        self.state.borrow_mut().take_in(m, ctx)
    }
    /// The actor's own `Ingress` holds a sender (the `Fetch` message's way in): the
    /// stream ends only with the actor.
    fn finished(&mut self, _ctx: &mut Self::Context) {}
}

impl Handler<SetInterval> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, m: SetInterval, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_set_interval(m, ctx)
    }
}

impl Handler<ForgetHosts> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, m: ForgetHosts, _ctx: &mut Self::Context) {
        self.state.borrow_mut().forget_hosts(m.0)
    }
}

impl Handler<HealthChanged> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, m: HealthChanged, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_health_changed(m, ctx)
    }
}

impl Handler<AllExitsDown> for SchedulerActor {
    type Result = ();

    fn handle(&mut self, _m: AllExitsDown, ctx: &mut Self::Context) {
        self.state.borrow_mut().on_all_exits_down(_m, ctx)
    }
}

impl Handler<GetStats> for SchedulerActor {
    type Result = ResponseFuture<Vec<ExitStats>>;

    fn handle(&mut self, _m: GetStats, _ctx: &mut Self::Context) -> Self::Result {
        self.state.borrow_mut().on_get_stats(_m, _ctx)
    }
}

impl Handler<Shutdown> for SchedulerActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, m: Shutdown, ctx: &mut Self::Context) -> Self::Result {
        self.state.borrow_mut().on_shutdown(m, ctx)
    }
}

impl Scheduler {
    pub(super) fn on_attempt_done(&mut self, m: AttemptDone, ctx: &mut Context<SchedulerActor>) {
        // Missing after a shutdown's grace period cancelled it (already answered).
        let Some((i, p)) = self.in_flight.take_sent(m.id) else {
            return;
        };
        if let Some((p, delay)) = self.settle_spanned(i, p, m.attempted) {
            self.retry_later(p, delay, ctx);
        }
        self.check_drained();
        self.dispatch(ctx);
    }

    /// A fetch joins the queue (every fetch that does not take the direct path comes
    /// this way, holding its queue slot): checked, unless the direct path parsed it
    /// already, then queued or answered at once.
    pub(super) fn take_in(&mut self, mut m: Intake, ctx: &mut Context<SchedulerActor>) {
        self.metrics.urls_total.inc();
        let reply = m.reply.take();
        let fetch = std::mem::replace(&mut m.fetch, Fetch::get(String::new()));
        // Parsed already when the direct path could not take it; a shutdown since is
        // answered by `enqueue`.
        let parsed = m.parsed.take().map_or_else(|| self.validate(&fetch), Ok);
        match parsed {
            Ok((uri, host)) => {
                let slot = m.slot.take();
                self.enqueue(
                    Enqueue {
                        fetch,
                        uri,
                        host,
                        slot,
                        reply,
                        arrived: m.arrived,
                    },
                    ctx,
                );
            }
            Err((kind, message)) => {
                self.metrics.urls_done.inc();
                if let Some(tx) = reply {
                    let _ = tx.send(Err(FetchError::unsent(kind, message, fetch.url)));
                }
            }
        }
    }

    pub(super) fn on_set_interval(&mut self, m: SetInterval, ctx: &mut Context<SchedulerActor>) {
        let now = crate::clock::now();
        // A key of no host is every host's (scope `exit`, `global`): `all` is its own. A
        // host with nothing queued here (a pause the fleet heard) takes no named label.
        let (host, own) = match m.host.as_deref() {
            None => ("all".to_owned(), true),
            Some(h) if self.queues.host(h).is_some() => self.metrics.host_label_of(h),
            Some(h) => self.metrics.host_label_now(h),
        };
        let rate = RateLabels {
            exit: m.exit.as_deref().unwrap_or("*").to_owned(),
            host,
        };
        // Without pacing (`none`) the interval is no rate in force, only a pause's carrier.
        if own && self.settings.limiter.algorithm != Algorithm::None {
            self.metrics
                .limiter_rate
                .get_or_create(&rate)
                .set(1.0 / m.interval.as_secs_f64().max(1e-9));
        }
        let key = LimitKey {
            exit: m.exit,
            host: m.host,
        };
        let seed = key
            .exit
            .as_ref()
            .and_then(|x| self.exits.iter().position(|e| e.name == *x));
        let paused =
            self.pacing
                .set_interval(&key, (m.interval, m.pause_until), seed.unwrap_or(0), now);
        self.pacing.bind_retry_after(&key, m.retry_after_binds_exit);
        if let (Some(before), Some(p)) = (paused, m.pause_until) {
            let host = key.host.as_deref();
            self.metrics.note_pause(&rate, host, before, p, now);
        }
        self.dispatch(ctx);
    }

    /// The limiter forgot these hosts: their pacing goes too, or, for a host with a
    /// fetch queued or in flight (whose entry holds its keys, which a new key would not
    /// reach), starts again in place.
    pub(super) fn forget_hosts(&mut self, hosts: Vec<std::sync::Arc<str>>) {
        for host in hosts {
            let exits = self.exits.iter().map(|e| std::sync::Arc::clone(&e.name));
            if self.queues.host(&host).is_some() {
                self.pacing.restart(&host, exits);
                continue;
            }
            self.pacing.forget(&host, exits);
            self.warned_pause.remove(&host);
        }
    }

    pub(super) fn on_health_changed(
        &mut self,
        m: HealthChanged,
        ctx: &mut Context<SchedulerActor>,
    ) {
        if let Some(e) = self.exits.get_mut(m.exit) {
            // Back from an ejection: the fetches it failed locally may use it again.
            if m.available && !e.healthy {
                e.returns += 1;
            }
            e.healthy = m.available;
            e.report_next = true;
            if !m.available && m.error.is_some() {
                e.health_error = m.error;
            }
        }
        let available = self.exits.iter().filter(|e| e.enabled && e.healthy).count();
        // An exit that recovered ends the stretch in which no exit takes the fetches it
        // may serve (their region and their host's family). A probing exit takes fetches
        // but has not shown it works: it ends the stretch only once an attempt through it
        // reaches a site (`reached_site_through`). One that fails again at once, or is
        // ejected again before anything it was sent got that far, leaves the stretch
        // running, so that a fleet whose exits come back only to fail ends its waiting
        // fetches at the bound, not a probe's worth at a time.
        let recovered = m.available && !m.probing;
        if let Some(e) = self.exits.get(m.exit).filter(|_| recovered) {
            self.all_down_since.retain(|key, _| !serves(e, key));
        }
        // Of the exits in service: a disabled exit is not one the crawl is missing.
        let enabled = self.exits.iter().filter(|e| e.enabled).count();
        self.metrics
            .exits_available_ratio
            .set(available as f64 / enabled.max(1) as f64);
        self.dispatch(ctx);
    }

    pub(super) fn on_all_exits_down(
        &mut self,
        _m: AllExitsDown,
        ctx: &mut Context<SchedulerActor>,
    ) {
        self.all_down_since
            .entry((None, None))
            .or_insert_with(Instant::now);
        self.dispatch(ctx);
    }

    pub(super) fn on_get_stats(
        &mut self,
        _m: GetStats,
        _ctx: &mut Context<SchedulerActor>,
    ) -> ResponseFuture<Vec<ExitStats>> {
        let views: Vec<_> = self
            .exits
            .iter()
            .map(|e| {
                let intervals = self.pacing.intervals(&e.name);
                (
                    e.addr.clone(),
                    e.name.to_string(),
                    e.source_ip,
                    (e.enabled, e.healthy, e.health_error.clone()),
                    e.max_concurrent,
                    intervals,
                )
            })
            .collect();
        Box::pin(async move {
            let mut out = Vec::with_capacity(views.len());
            for (addr, name, source_ip, (enabled, healthy, health_error), max, mut intervals) in
                views
            {
                let c = addr.send(GetCounters).await.unwrap_or_default();
                intervals.sort();
                out.push(ExitStats {
                    name,
                    source_ip,
                    enabled,
                    healthy,
                    active: c.active,
                    max,
                    total: c.total,
                    ok: c.ok,
                    throttled: c.throttled,
                    errors: c.errors,
                    error_rate: if c.total == 0 {
                        0.0
                    } else {
                        c.errors as f64 / c.total as f64
                    },
                    consecutive_failures: c.consecutive_failures,
                    latency_ewma: c.latency_ewma,
                    last_error: c.last_error.or(health_error),
                    intervals,
                });
            }
            out
        })
    }

    pub(super) fn on_shutdown(
        &mut self,
        m: Shutdown,
        ctx: &mut Context<SchedulerActor>,
    ) -> ResponseFuture<()> {
        self.shutting_down = true;
        // Queued fetches end now; the hosts' in-flight counts stay until those end.
        let mut queued = self.queues.close();
        queued.extend(self.in_flight.take_delayed_where(|_| true));
        for p in queued {
            p.fail(
                FetchErrorKind::Shutdown,
                "crawler shut down before this fetch was sent",
                &self.exits,
            );
        }
        let (tx, rx) = oneshot::channel();
        self.drained.push(tx);
        self.check_drained();
        // After the grace period, cancel what is still in flight: dropping a pending
        // fetch replies `Shutdown` to its sender.
        ctx.run_later(m.grace, |act, ctx| {
            let mut act = act.state.borrow_mut();
            act.cut.fire();
            for (_, h) in act.in_flight_handles.drain() {
                ctx.cancel_future(h);
            }
            // Their reports, if they still come, find nothing and are ignored.
            act.cut_off_sent();
            for e in &act.exits {
                e.share.clear();
            }
            act.queues.clear();
            act.check_drained();
        });
        Box::pin(async move {
            let _ = rx.await;
        })
    }

    /// The grace period is over: the attempts still out on the exits' workers end here.
    /// Each left its exit, so the exit counts a request that ended without an answer, and
    /// the fetch's `Shutdown` names that exit.
    fn cut_off_sent(&mut self) {
        for (i, p) in self.in_flight.forget_sent() {
            self.count(i, &p.host, Outcome::Error, None);
            p.fail(
                FetchErrorKind::Shutdown,
                "crawler shut down before this fetch finished",
                &self.exits,
            );
        }
    }
}
