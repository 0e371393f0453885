//! The embedding API: start the actors inside a running actix System, get a handle.
//!
//! Why one Arbiter is the default (`crawler.arbiters = "single"`): a crawler waits on the
//! network, not the CPU, and with the scheduler and every exit on one thread a fetch that
//! may go now runs on its caller's task with no hand-off at all (the direct path). Measured
//! with `bench_raw -- --arbiters both` against an unlimited local site, one Arbiter ran at
//! 0.89–0.95 of a bare client, an Arbiter per exit at 0.60–0.75 (each fetch crosses
//! threads twice). `per_exit` is for many exits or heavy body processing.

use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use exitcrawl::aimd::prior::HostPrior;
use exitcrawl::config::{Backend, ConfigError, Settings};
use exitcrawl::health::HealthPolicy;
use futures_util::future::Either;

use crate::controller::LimiterActor;
use crate::exit::ExitActor;
use crate::health::{HealthActor, HealthOptions};
use crate::messages::{
    ExitStats, Fetch, FetchError, FetchResponse, GetLimits, GetStats, HostLimits, Shutdown,
};
use crate::metrics::{self, LagActor, Metrics};
use crate::redis::{Redis, RedisGcra, RedisOptions, RedisStats, SharedRates};
use crate::robots::RobotsGate;
use crate::scheduler::{
    self, start_exits, Channel, ExitSlot, Ingress, Scheduler, SchedulerActor, SharedLimits,
    Withdrawn,
};

/// Why the crawler could not start.
#[derive(Debug)]
pub enum StartError {
    /// The settings are invalid.
    Config(ConfigError),
    /// `start` was called outside a running actix System.
    NoSystem,
    /// The metrics endpoint could not listen on `[metrics] listen`.
    Metrics(std::net::SocketAddr, std::io::Error),
    /// `[redis] url` could not be used (a bad URL; an unreachable server is not an error:
    /// the crawler starts on local limits and connects when Redis comes).
    Redis(crate::redis::RedisError),
    /// No enabled exit can bind its source address on this host: each exit's name, address
    /// and the OS error. (Exits that cannot bind while others can start ejected.)
    NoExitCanBind(Vec<(String, std::net::IpAddr, std::io::Error)>),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "invalid settings: {e}"),
            StartError::NoSystem => {
                write!(
                    f,
                    "Crawler::start must be called inside a running actix System"
                )
            }
            StartError::Metrics(addr, e) => {
                write!(f, "metrics.listen: cannot listen on {addr}: {e}")
            }
            StartError::Redis(e) => write!(f, "redis.url: {e}"),
            StartError::NoExitCanBind(failed) => {
                write!(f, "no exit can bind its source address on this host:")?;
                for (i, (name, ip, e)) in failed.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ";" };
                    write!(f, "{sep} exits[{name}].source_ip {ip}: {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Config(e) => Some(e),
            StartError::NoSystem => None,
            StartError::Metrics(_, e) => Some(e),
            StartError::Redis(e) => Some(e),
            StartError::NoExitCanBind(failed) => failed
                .first()
                .map(|(_, _, e)| e as &(dyn std::error::Error + 'static)),
        }
    }
}

/// Starts the actor system.
pub struct Crawler;

impl Crawler {
    /// Start every actor of `settings` in the current actix System.
    pub fn start(settings: Settings) -> Result<CrawlerHandle, StartError> {
        settings.validate().map_err(StartError::Config)?;
        if System::try_current().is_none() {
            return Err(StartError::NoSystem);
        }
        let start_failures = check_exits_bind(&settings)?;
        let settings = Arc::new(settings);
        let metrics = Metrics::new(settings.metrics.host_labels as usize);
        let metrics_addr = match settings.metrics.listen {
            Some(addr) => Some(
                metrics::serve(addr, Arc::clone(&metrics))
                    .map_err(|e| StartError::Metrics(addr, e))?,
            ),
            None => None,
        };
        let redis = connect_redis(&settings)?;
        let (slots, arbiters) = start_exits(&settings, &metrics);
        let exit_addrs: Vec<_> = slots.iter().map(|s| s.addr.clone()).collect();
        metrics.exits_available_ratio.set(f64::from(u8::from(
            settings.exits.iter().any(|e| e.enabled),
        )));
        let lag = LagActor::new(Arc::clone(&metrics), Duration::from_millis(250)).start();
        let robots = RobotsGate::new(&settings).map(Arc::new);
        let started = start_scheduler(
            &settings,
            slots,
            &metrics,
            redis.as_ref(),
            start_failures,
            &exit_addrs,
            robots.clone(),
        );
        Ok(CrawlerHandle {
            scheduler: started.scheduler,
            ingress: started.ingress,
            _exits: exit_addrs,
            limiter: started.limiter,
            _health: started.health,
            _arbiters: Arc::new(arbiters),
            _lag: lag,
            redis,
            robots,
            polite: true,
            settings,
            metrics,
            metrics_addr,
        })
    }
}

/// Before anything starts: an exit whose source address is not on this host would
/// otherwise fail through every URL's retries. Such exits are warned about and start
/// ejected (returned: each one's index and why); when no enabled exit can bind, the
/// crawler does not start.
fn check_exits_bind(settings: &Settings) -> Result<Vec<(usize, String)>, StartError> {
    let unbindable: Vec<(usize, std::io::Error)> = settings
        .exits
        .iter()
        .enumerate()
        .filter(|(_, e)| e.enabled)
        .filter_map(|(i, e)| crate::net::test_bind(e.source_ip).err().map(|err| (i, err)))
        .collect();
    let enabled = settings.exits.iter().filter(|e| e.enabled).count();
    if enabled > 0 && unbindable.len() == enabled {
        return Err(StartError::NoExitCanBind(
            unbindable
                .into_iter()
                .map(|(i, e)| {
                    let x = &settings.exits[i];
                    (x.name.clone(), x.source_ip, e)
                })
                .collect(),
        ));
    }
    for (i, e) in &unbindable {
        let x = &settings.exits[*i];
        tracing::warn!(exit = %x.name, source_ip = %x.source_ip, error = %e, "exit cannot bind its source address; it starts ejected");
    }
    Ok(unbindable
        .iter()
        .map(|(i, e)| {
            let x = &settings.exits[*i];
            (*i, format!("bind {}:0 at start: {e}", x.source_ip))
        })
        .collect())
}

/// Distributed mode (`[limiter] backend = "redis"` with `[redis] url`): the Redis
/// connection; `None` otherwise.
fn connect_redis(settings: &Settings) -> Result<Option<Redis>, StartError> {
    Ok(match (&settings.limiter.backend, &settings.redis.url) {
        (Backend::Redis, Some(url)) => {
            let opts = RedisOptions {
                op_timeout: Duration::from_millis(settings.redis.op_timeout_ms),
                ..RedisOptions::default()
            };
            Some(Redis::connect(url, opts).map_err(StartError::Redis)?)
        }
        _ => None,
    })
}

/// The health checker's settings, from `[health]`.
fn health_options(settings: &Settings) -> HealthOptions {
    let h = &settings.health;
    HealthOptions {
        url: h.url.clone(),
        interval: h.interval(),
        timeout: h.timeout(),
        policy: HealthPolicy {
            consecutive_failures: h.consecutive_failures,
            base_ejection: h.base_ejection(),
            max_ejection: h.max_ejection(),
            passive_window: h.passive_window(),
            ..HealthPolicy::default()
        },
    }
}

/// What [`start_scheduler`] started.
struct SchedulerParts {
    scheduler: Addr<SchedulerActor>,
    /// `CrawlerHandle::fetch`'s way in.
    ingress: Ingress,
    limiter: Option<Addr<LimiterActor>>,
    health: Option<Addr<HealthActor>>,
}

/// Start the scheduler on the current Arbiter, with the limiter and the health checker
/// it is connected to (sharing Redis's rates and limits in distributed mode).
fn start_scheduler(
    settings: &Arc<Settings>,
    slots: Vec<ExitSlot>,
    metrics: &Arc<Metrics>,
    redis: Option<&Redis>,
    start_failures: Vec<(usize, String)>,
    exit_addrs: &[Addr<ExitActor>],
    robots: Option<Arc<RobotsGate>>,
) -> SchedulerParts {
    let names: Vec<_> = slots.iter().map(|s| s.name.to_string()).collect();
    let ips: Vec<_> = slots.iter().map(|s| s.source_ip).collect();
    let enabled: Vec<_> = slots.iter().map(|s| s.enabled).collect();
    let health_opts = health_options(settings);
    let limiter_settings = settings.limiter.clone();
    let exit_names: Vec<Arc<str>> = settings
        .exits
        .iter()
        .map(|e| Arc::from(e.name.as_str()))
        .collect();
    let limiter_metrics = Arc::clone(metrics);
    let sched_settings = settings.clone();
    let sched_metrics = Arc::clone(metrics);
    let health_metrics = Arc::clone(metrics);
    let mut limiter_addr = None;
    let mut health_addr = None;
    let mut ingress = None;
    // Names this crawler's scheduler for `CrawlerHandle::fetch`'s direct path.
    static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (intake, intake_rx) = tokio::sync::mpsc::unbounded_channel();
    let (withdrawn, withdrawn_rx) = tokio::sync::mpsc::unbounded_channel::<Withdrawn>();
    let scheduler = SchedulerActor::create(|ctx| {
        ctx.add_stream(Channel(intake_rx));
        ctx.add_stream(Channel(withdrawn_rx));
        let me = ctx.address();
        let prior = Arc::new(std::sync::Mutex::new(HostPrior::new()));
        let mut limiter =
            LimiterActor::new(limiter_settings, exit_names, vec![me.clone().recipient()])
                .with_metrics(limiter_metrics)
                .with_prior(Arc::clone(&prior))
                .telling_forgotten(me.clone().recipient());
        if let Some(r) = redis {
            limiter = limiter.with_shared_rates(SharedRates::new(r.clone()));
        }
        let limiter = limiter.start();
        let health = HealthActor::new(
            health_opts,
            exit_addrs.to_vec(),
            names,
            ips,
            me.clone().recipient(),
            me.recipient(),
            health_metrics,
        )
        .with_start_failures(start_failures)
        .with_enabled(enabled)
        .start();
        let mut s = Scheduler::new(sched_settings, slots, sched_metrics, prior);
        if let Some(r) = redis {
            s.share_limits(SharedLimits {
                gcra: RedisGcra::new(r.clone()),
            });
        }
        s.connect(limiter.clone(), health.clone());
        s.attach(ctx);
        let way_in = Ingress {
            id,
            intake,
            withdrawn,
            queue_slots: s.queue_slots(),
            metrics: Arc::clone(metrics),
        };
        ingress = Some(way_in.clone());
        limiter_addr = Some(limiter);
        health_addr = Some(health);
        let actor = SchedulerActor::new(s, way_in, robots);
        scheduler::register_local(id, Rc::downgrade(actor.state()));
        actor
    });
    let Some(ingress) = ingress else {
        unreachable!("SchedulerActor::create runs its closure before it returns")
    };
    SchedulerParts {
        scheduler,
        ingress,
        limiter: limiter_addr,
        health: health_addr,
    }
}

/// A running crawler.
#[derive(Clone)]
pub struct CrawlerHandle {
    scheduler: Addr<SchedulerActor>,
    /// `fetch`'s way in: the direct path or the queue.
    ingress: Ingress,
    /// Keeps every exit's actor running for as long as a handle is held.
    _exits: Vec<Addr<ExitActor>>,
    limiter: Option<Addr<LimiterActor>>,
    _health: Option<Addr<HealthActor>>,
    _arbiters: Arc<Vec<Arbiter>>,
    _lag: Addr<LagActor>,
    redis: Option<Redis>,
    settings: Arc<Settings>,
    metrics: Arc<Metrics>,
    metrics_addr: Option<std::net::SocketAddr>,
    /// `[crawl] robots`: the crawler's robots.txt cache, shared by every clone.
    robots: Option<Arc<RobotsGate>>,
    /// This handle's fetches ask `robots` first (see [`CrawlerHandle::polite`]); true
    /// unless opted out, so an embedder's fetches obey robots.txt as the program's do.
    polite: bool,
}

impl CrawlerHandle {
    /// The scheduler: send it `Fetch` messages (from any actor or task).
    pub fn scheduler(&self) -> Addr<SchedulerActor> {
        self.scheduler.clone()
    }

    /// The crawler's metrics, read-only: figures by method (`urls_done`, `queue_depth`,
    /// `exit_requests`, …) or the whole OpenMetrics text `/metrics` serves (`encode`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Distributed mode: the Redis connection's outage and error counters.
    pub fn redis_stats(&self) -> Option<RedisStats> {
        self.redis.as_ref().map(Redis::stats)
    }

    /// Where the metrics endpoint listens, if `[metrics] listen` is set.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_addr
    }

    /// The settings the crawler runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Fetch one URL: the same queue, pacing, backpressure and single reply as a `Fetch`
    /// sent to [`Self::scheduler`], by cheaper ways in. Called on the scheduler's own
    /// Arbiter with every exit there (`crawler.arbiters = "single"`, not distributed), a
    /// fetch that may be sent now runs on the calling task; otherwise it joins the queue
    /// through a channel the scheduler reads, after taking a queue slot.
    ///
    /// The fetch is admitted when the returned future is first polled; dropping the
    /// future before it ends gives back the share of the capacity it took.
    ///
    /// The URL's origin's robots.txt is asked first, unless `[crawl] robots = false` or
    /// the handle opted out ([`Self::polite`]): a disallowed URL ends with
    /// [`FetchErrorKind::Robots`](crate::FetchErrorKind::Robots), unsent.
    pub fn fetch(
        &self,
        fetch: Fetch,
    ) -> impl std::future::Future<Output = Result<FetchResponse, FetchError>> + '_ {
        // Not an `async fn`: the scheduler's future is returned as it is, without a level
        // of its own around it (see `scheduler::Ingress::fetch`), unless robots.txt is asked.
        match self.robots.as_deref().filter(|_| self.polite) {
            None => Either::Left(self.ingress.fetch(fetch)),
            Some(gate) => Either::Right(gate.obey(fetch, |f| self.ingress.fetch(f))),
        }
    }

    /// This handle, with every [`Self::fetch`] obeying robots.txt (`polite = true`, what
    /// [`Crawler::start`] hands out) or not (`false`, for a caller that asks robots.txt
    /// itself, as [`crate::follow::crawl`] does; a `Fetch` message to [`Self::scheduler`]
    /// always asks unless `[crawl] robots = false`): the origin's `/robots.txt` is fetched
    /// once (through this crawler, paced and counted like any fetch) and cached for
    /// `[crawl] robots_ttl_ms`, for the user agent of `[crawl] user_agent_token` or
    /// `crawler.user_agent`; a Crawl-delay makes the origin serial and spaced.
    /// `[crawl] robots = false` turns it off for every handle. Clones share the cache,
    /// polite or not.
    pub fn polite(&self, polite: bool) -> CrawlerHandle {
        CrawlerHandle {
            polite,
            ..self.clone()
        }
    }

    /// Every exit's figures.
    pub async fn stats(&self) -> Vec<ExitStats> {
        self.scheduler.send(GetStats).await.unwrap_or_default()
    }

    /// What the adaptive limiter knows per host: the detected scope (scope `auto`: one
    /// budget for the host, or per-IP budgets), each budget's rate, lockouts and bans.
    /// Empty unless `limiter.algorithm = "aimd"`: `none` has no limit, and a fixed
    /// algorithm paces every key at its configured `initial_rps`, learning nothing.
    pub async fn limits(&self) -> Vec<HostLimits> {
        match &self.limiter {
            Some(l) => l.send(GetLimits).await.unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Stop: queued fetches fail with `Shutdown`, in-flight ones get `grace` to finish.
    /// Returns when every fetch the scheduler holds has had its reply. A fetch that runs
    /// on its caller's own task (`fetch` on the scheduler's Arbiter) and is still on its
    /// way when `grace` is over ends with `Shutdown` when its caller next polls it; one
    /// whose retry was being handed to the scheduler, or handed in after this call, is
    /// answered `Shutdown` as the scheduler takes it. Each fetch gets one reply, but
    /// some may come after this returns: await them before dropping the runtime.
    pub async fn shutdown(&self, grace: Duration) {
        let _ = self.scheduler.send(Shutdown { grace }).await;
    }
}
