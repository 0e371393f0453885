//! `LimiterActor`: turns feedback into pacing, per limiter key.
//!
//! Why an actor of its own: every exit's answers feed the same controllers when the scope
//! is wider than one exit (`host`, `global`), so the controllers need one owner that sees
//! all reports in order. It runs the core's [`Controller`] per key (only for
//! `algorithm = "aimd"`; fixed algorithms only take pauses from the site's headers) and
//! broadcasts [`SetInterval`] to its subscribers.

use std::collections::HashMap;
use std::sync::Arc;

use actix::clock::Instant;
use actix::prelude::*;
use exitcrawl::aimd::{Adjustment, AimdConfig, Controller, Response, Signal};
use exitcrawl::config::{Algorithm, LimiterSettings, Scope};
use exitcrawl::headers::ServerHints;
use exitcrawl::limiter::interval_of;

use crate::messages::{Failed, SetInterval, Succeeded, Throttled};
use crate::net::FailureKind;
use crate::redis::{RateMessage, SharedRates};

/// A limiter key: exit and/or host, as the scope says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LimitKey {
    /// Exit name, when the scope keys on exits.
    pub exit: Option<Arc<str>>,
    /// Host, when the scope keys on hosts.
    pub host: Option<Arc<str>>,
}

impl LimitKey {
    /// The key's name in Redis: `exit|host`, `*` where the scope does not key on it.
    pub fn redis_name(&self) -> String {
        format!(
            "{}|{}",
            self.exit.as_deref().unwrap_or("*"),
            self.host.as_deref().unwrap_or("*")
        )
    }

    /// The inverse of [`LimitKey::redis_name`].
    pub fn from_redis_name(name: &str) -> Option<Self> {
        let (exit, host) = name.split_once('|')?;
        let part = |s: &str| (s != "*").then(|| Arc::from(s));
        Some(Self {
            exit: part(exit),
            host: part(host),
        })
    }

    /// The key of a request through `exit` to `host` under `scope`.
    pub fn new(scope: Scope, exit: &Arc<str>, host: &Arc<str>) -> Self {
        let (e, h) = match scope {
            Scope::ExitHost => (true, true),
            Scope::Host => (false, true),
            Scope::Exit => (true, false),
            Scope::Global => (false, false),
        };
        Self {
            exit: e.then(|| exit.clone()),
            host: h.then(|| host.clone()),
        }
    }
}

/// The controller settings of `[limiter]`.
pub fn aimd_config(s: &LimiterSettings) -> AimdConfig {
    AimdConfig {
        initial_rps: s.initial_rps,
        min_rps: s.min_rps,
        max_rps: s.max_rps,
        increase_rps: s.increase_rps,
        decrease: s.decrease,
        latency_tolerance: s.latency_tolerance,
        hold: s.hold(),
        ..AimdConfig::default()
    }
}

/// The controller of `key`, created on its first report (the config is built only then:
/// this runs once per response).
fn controller<'a>(
    controllers: &'a mut HashMap<LimitKey, Controller>,
    settings: &LimiterSettings,
    key: &LimitKey,
    now: std::time::Instant,
) -> &'a mut Controller {
    controllers
        .entry(key.clone())
        .or_insert_with(|| Controller::new(aimd_config(settings), now))
}

/// Runs the controllers and broadcasts interval changes.
pub struct LimiterActor {
    settings: LimiterSettings,
    controllers: HashMap<LimitKey, Controller>,
    subscribers: Vec<Recipient<SetInterval>>,
    /// Distributed mode: rates shared with the other crawler processes.
    shared: Option<SharedRates>,
}

impl LimiterActor {
    /// A limiter with the `[limiter]` settings, broadcasting to `subscribers`.
    pub fn new(settings: LimiterSettings, subscribers: Vec<Recipient<SetInterval>>) -> Self {
        Self {
            settings,
            controllers: HashMap::new(),
            subscribers,
            shared: None,
        }
    }

    /// Distributed mode: publish this process's rate changes and adopt the others'.
    pub fn with_shared_rates(mut self, shared: SharedRates) -> Self {
        self.shared = Some(shared);
        self
    }

    fn broadcast(&self, key: LimitKey, a: &Adjustment) {
        let msg = SetInterval {
            exit: key.exit,
            host: key.host,
            interval: a.interval,
            pause_until: a.pause_until,
        };
        if a.pause_until.is_some() {
            tracing::info!(exit = ?msg.exit, host = ?msg.host, interval_ms = a.interval.as_secs_f64() * 1e3, "limiter pause");
        }
        for s in &self.subscribers {
            s.do_send(msg.clone());
        }
    }

    fn feed(&mut self, key: LimitKey, response: Response, hints: &ServerHints) {
        let now = Instant::now().into_std();
        let adaptive = self.settings.algorithm == Algorithm::Aimd;
        let fixed_interval = interval_of(self.settings.initial_rps);
        let ctl = controller(&mut self.controllers, &self.settings, &key, now);
        let mut change = ctl.on_response(&response, now);
        if let Some(pacing) = hints.pacing() {
            change = ctl.on_hint(&pacing, now).or(change);
        }
        // A fixed algorithm keeps its rate; only the pauses (hold, Retry-After, a used-up
        // announced quota) reach it.
        let change = if adaptive {
            change
        } else {
            change.and_then(|a| a.pause_until).map(|p| Adjustment {
                rps: self.settings.initial_rps,
                interval: fixed_interval,
                pause_until: Some(p),
            })
        };
        if let Some(a) = change {
            if let Some(shared) = self.shared.clone().filter(|_| adaptive) {
                // Tell the other processes; a failure only means they learn it later.
                let name = key.redis_name();
                let pause = a.pause_until.map(|p| p.saturating_duration_since(now));
                let rps = a.rps;
                actix_rt::spawn(async move {
                    if let Err(e) = shared.set(&name, rps, pause).await {
                        tracing::debug!(key = %name, error = %e, "shared rate not published");
                    }
                });
            }
            self.broadcast(key, &a);
        }
    }
}

impl Actor for LimiterActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(16 * 1024);
        if let Some(shared) = self.shared.clone() {
            let me = ctx.address();
            actix_rt::spawn(follow_shared_rates(shared, me));
        }
    }
}

/// Forward other processes' rate changes to the limiter for as long as it runs; while
/// Redis is away, try again with backoff (crawling goes on meanwhile).
async fn follow_shared_rates(shared: SharedRates, me: Addr<LimiterActor>) {
    let mut backoff = crate::redis::Backoff::default();
    while me.connected() {
        match shared.subscribe().await {
            Ok(mut sub) => {
                backoff.reset();
                while let Some(msg) = sub.recv().await {
                    if me.try_send(SharedRateChanged(msg)).is_err() && !me.connected() {
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "shared rates: subscribe failed, retrying");
                actix_rt::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

/// Another crawler process changed a key's rate (distributed mode).
struct SharedRateChanged(RateMessage);

impl Message for SharedRateChanged {
    type Result = ();
}

impl Handler<SharedRateChanged> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: SharedRateChanged, _ctx: &mut Self::Context) {
        let RateMessage::Update(u) = m.0 else {
            // Resubscribed: updates in between are lost; the next change of each key
            // brings the processes back in line.
            return;
        };
        let Some(key) = LimitKey::from_redis_name(&u.key) else {
            return;
        };
        let now = Instant::now().into_std();
        let ctl = controller(&mut self.controllers, &self.settings, &key, now);
        let adjusted = ctl.adopt(u.rps, now);
        let pause_until = u.pause_remaining().map(|d| now + d);
        if adjusted.is_some() || pause_until.is_some() {
            let a = Adjustment {
                rps: ctl.rate(),
                interval: ctl.interval(),
                pause_until: pause_until.or(ctl.pause_until(now)),
            };
            tracing::debug!(key = %u.key, rps = u.rps, "adopted a shared rate");
            self.broadcast(key, &a);
        }
    }
}

impl Handler<Succeeded> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: Succeeded, _ctx: &mut Self::Context) {
        let key = LimitKey::new(self.settings.scope, &m.exit, &m.host);
        let r = Response {
            sent_at: m.sent_at,
            latency: m.latency,
            signal: Signal::Success,
            limited: m.limited,
        };
        self.feed(key, r, &m.hints);
    }
}

impl Handler<Throttled> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: Throttled, _ctx: &mut Self::Context) {
        let key = LimitKey::new(self.settings.scope, &m.exit, &m.host);
        tracing::debug!(exit = %m.exit, host = %m.host, status = m.status, "throttled");
        let r = Response {
            sent_at: m.sent_at,
            latency: m.latency,
            signal: Signal::Throttle {
                retry_after: m.hints.retry_after,
            },
            limited: true,
        };
        self.feed(key, r, &m.hints);
    }
}

impl Handler<Failed> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: Failed, _ctx: &mut Self::Context) {
        let throttle = match m.kind {
            FailureKind::Timeout => self.settings.throttle_on_timeout,
            FailureKind::Reset | FailureKind::ConnectRefused => self.settings.throttle_on_reset,
            FailureKind::LocalConnect | FailureKind::Other => false,
        };
        if !throttle {
            return;
        }
        let key = LimitKey::new(self.settings.scope, &m.exit, &m.host);
        let r = Response {
            sent_at: m.sent_at,
            latency: m.latency,
            signal: Signal::Throttle { retry_after: None },
            limited: true,
        };
        self.feed(key, r, &ServerHints::default());
    }
}
