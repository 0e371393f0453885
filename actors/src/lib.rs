//! # exitcrawl-actors — the I/O side of exitcrawl
//!
//! The pure core (`exitcrawl`) decides; this crate carries the decisions out. It owns
//! sockets, timers and mailboxes.
//!
//! # Public API
//!
//! - [`Crawler::start`] takes the [`Settings`] (the core's `exitcrawl::config::Settings`)
//!   and returns a [`CrawlerHandle`]: [`fetch`](CrawlerHandle::fetch),
//!   [`stats`](CrawlerHandle::stats) ([`ExitStats`]), [`limits`](CrawlerHandle::limits)
//!   ([`HostLimits`], [`LaneLimits`]), [`metrics`](CrawlerHandle::metrics) (read-only:
//!   figures by method, or the OpenMetrics text),
//!   [`shutdown`](CrawlerHandle::shutdown); [`StartError`] says why it did not start.
//! - [`Fetch`] (built with [`Fetch::get`] and its `with`-style methods) answers with a
//!   [`FetchResponse`] (its [`Headers`]) or a [`FetchError`] of a [`FetchErrorKind`].
//! - [`RedirectChain`] follows a redirect above the exit, one hop ([`RedirectHop`]) at a
//!   time ([`ChainStep`]), for a caller that admits each hop itself.
//! - [`follow::crawl`] follows links from seeds through a handle, going on from an earlier
//!   run with [`follow::FollowOptions::resume`].
//! - [`http`], [`Method`] and [`HeaderMap`]: the `http` crate the HTTP types come from.
//!
//! Structs and enums that will grow are `#[non_exhaustive]`: build them with their
//! constructors. The actors' own messages (intervals, health changes, all exits down) are
//! internal and cannot be sent from outside. `tests/public_root.rs` holds the list of
//! public root names, so a new one is added on purpose. [`Metrics`] is what
//! [`CrawlerHandle::metrics`] reads; `ACCEPT_ENCODING` and `MAX_URL_BYTES` are facts of
//! the wire the program records.
//!
//! Two layers beneath are crates of their own, which the program and the benchmarks use
//! too: `exitcrawl-net`, how an exit talks to the network (its client bound to a source
//! IP, the DNS cache, what a failed connection says, the runtime's clock, the process
//! settings for binaries), and `exitcrawl-redis`, distributed mode (a GCRA limiter,
//! shared rates, the shared frontier). [`StartError::Redis`] and
//! [`CrawlerHandle::redis_stats`] speak the latter's types.
//!
//! # Layout
//!
//! - `messages` (internal): every message, in one file. Commands are verbs (`Fetch`,
//!   `SetInterval`), reports are past tense (`Succeeded`, `Throttled`, `Failed`).
//! - `exit` (internal): `ExitActor`, one per source IP; owns the exit's core (`ExitCore`:
//!   the awc client bound to the source IP, the counters, and worker tasks that run
//!   requests). A scheduler on the same Arbiter starts requests on the core directly.
//! - `scheduler` (internal; [`SchedulerActor`] is public so that other actors can send it
//!   `Fetch`): picks the least-loaded healthy exit that may send to the host now (the
//!   core's `select`), paces each limiter key, retries within a budget, replies exactly
//!   once. One file per concept under `scheduler/`; its docs hold the layout.
//! - `controller` (internal): `LimiterActor`, the actor of the core's adaptive controller
//!   (`exitcrawl::aimd`), runs a controller per limiter key and broadcasts `SetInterval`.
//! - `health` (internal): `HealthActor` pings exits on a timer, runs the health state
//!   machine.
//!
//! Why the actors are internal: an embedding talks to the crawler through
//! [`CrawlerHandle`] or by sending [`Fetch`] to the [`SchedulerActor`]; the other actors'
//! messages are the crawler's own wiring, free to change.
//! - `crawler`: `Crawler::start(settings) -> CrawlerHandle`, the embedding API (at the root).
//! - `headers` ([`Headers`] public): an answer's headers, read as the `http` crate's
//!   names and values without rebuilding awc's map for every answer.
//! - `workers`: long-lived tasks that run an exit's requests from a scheduler on another
//!   Arbiter in turn, instead of a task per request.
//! - `cutoff`: ends the scheduler's direct-path attempts when a shutdown's grace period
//!   is over, for a few instructions per fetch.
//! - [`follow`]: `crawl` — follow links from seeds through a `CrawlerHandle`, with
//!   scope, dedupe, robots.txt and per-host politeness (`exitcrawl::discover`).
//! - `net` (the crate `exitcrawl-net`): how one exit talks to the network — an awc client
//!   whose every TCP connection leaves from the exit's own source IP, a shared DNS cache,
//!   and the classification of connection failures (exit's fault or site's fault).
//! - `clock` (`exitcrawl_net::clock`): the runtime's (tokio's) clock; every timing
//!   decision in the actors reads it, so a paused runtime pauses the whole crawler.
//! - `metrics` (internal; [`Metrics`] public): the Prometheus registry, the `/metrics`
//!   endpoint, the event loop's lag.
//! - `robots`: robots.txt and Crawl-delay for every fetch through a handle (on by
//!   default; [`CrawlerHandle::polite`] opts out), one cache per crawler over the core's
//!   `RobotsCache`.
//! - `redis` (the crate `exitcrawl-redis`): distributed mode — a GCRA limiter, shared
//!   rates and a shared frontier on Redis, with bounded timeouts and an outage counter
//!   (`limiter.backend = "redis"`).

#![warn(missing_docs)]

mod body;
mod controller;
mod crawler;
mod cutoff;
mod exit;
pub mod follow;
mod headers;
mod health;
mod messages;
mod metrics;
mod robots;
mod scheduler;
mod workers;

// The layers beneath, as crates of their own; the modules name them by these paths.
use exitcrawl_net as net;
use exitcrawl_net::clock;
use exitcrawl_redis as redis;

pub use crawler::{Crawler, CrawlerHandle, StartError};
pub use exitcrawl::config::Settings;
pub use headers::Headers;
/// The `http` crate this API's HTTP types come from (`Fetch::method`,
/// `FetchResponse::headers`), re-exported so callers name the same version.
pub use http;
pub use http::{HeaderMap, Method};
pub use messages::{
    ChainStep, ExitStats, Fetch, FetchError, FetchErrorKind, FetchResponse, HostLimits, LaneLimits,
    RedirectChain, RedirectHop,
};
pub use metrics::Metrics;
pub use scheduler::SchedulerActor;
// Facts of the wire the `exitcrawl` program writes into its records and WARC files.
pub use body::ACCEPT_ENCODING;
pub use scheduler::MAX_URL_BYTES;
