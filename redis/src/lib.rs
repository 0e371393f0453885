//! # exitcrawl-redis
//!
//! Distributed mode: shared rate limits, shared rates and a shared frontier on Redis.
//!
//! Many crawler processes on many machines must behave like one crawler towards each site.
//! Redis is the shared engine; nothing here is a coordination protocol of its own:
//!
//! - [`RedisGcra`]: a GCRA limiter in one Lua script (atomic, `EVALSHA`, reloaded on
//!   `NOSCRIPT`) on the Redis server's clock, so machines with skewed clocks agree.
//! - [`SharedRates`]: the adaptive controller's rate per key, stored in Redis and broadcast
//!   on the `exitcrawl:intervals` pub/sub channel to every other process.
//! - [`SharedFrontier`]: a Redis stream with a consumer group (at-least-once delivery, stale
//!   entries of a dead consumer claimed by another) and a done-set for exactly-once
//!   completion.
//!
//! # Keys
//!
//! | key | type | expiry |
//! |---|---|---|
//! | `exitcrawl:gcra:{key}` | string: TAT in µs, server clock | when the key is back to a full burst |
//! | `exitcrawl:rate:{key}` | string: `"{rps} {pause_until_ms}"` | [`SharedRates::with_ttl`], default 10 min |
//! | `exitcrawl:frontier:{queue}` | stream, fields `url` and `tries`, group `exitcrawl` | trimmed once every consumer is done with an entry |
//! | `exitcrawl:done:{queue}` | set of URLs | none (`--enqueue --recrawl` deletes it) |
//! | `exitcrawl:seen:{queue}` | set of URLs ever enqueued | none (`--enqueue --recrawl` deletes it) |
//! | `exitcrawl:alive:{queue}:{consumer}` | string: the consumer's pid | `--claim-idle` |
//! | `exitcrawl:epoch:{queue}` | string: a new random value each time the queue is created | none (replaced when the queue is created again) |
//!
//! Channel: `exitcrawl:intervals`.
//!
//! # Outages: the contract for callers
//!
//! Every operation is bounded by a timeout ([`RedisOptions::op_timeout`]) and returns a [`RedisError`]; nothing here panics or hangs when
//! Redis is gone. The first failure of a connection-level kind ([`RedisError::is_outage`])
//! opens an outage: [`RedisStats::outages`] counts it once, a warning is logged, and until
//! the [`Backoff`] delay has passed every call fails at once with
//! [`RedisError::Unavailable`] without touching the network. After the delay one call
//! probes Redis again (the connection manager reconnects); success closes the outage and
//! resets the backoff, failure doubles the delay (capped).
//!
//! Callers (the LimiterActor and the scheduler) then:
//! - pace each key with a **local, conservative** limiter while a check returns an error —
//!   the shared rate divided by the number of crawler processes
//!   ([`exitcrawl::limiter::fallback_rps`]), so
//!   that N processes falling back together still stay within the shared budget;
//! - keep crawling (never stall on Redis), keep their own rate changes locally, and
//!   re-read [`SharedRates::get`] for their keys once Redis is back
//!   ([`RateMessage::Resubscribed`] says when);
//! - report [`Redis::stats`] (outages, down-since) in their stats and metrics.

mod gcra;
mod rates;
mod shared_frontier;
mod upkeep;

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};

pub use gcra::{Checked, RedisGcra};
pub use rates::{Raised, RateMessage, RateSubscription, RateUpdate, SharedRates};
pub use shared_frontier::{SharedFrontier, SharedFrontierEntry};
pub use upkeep::{Claimed, CLAIM_MAX};

/// The runtime's (tokio's) clock, which the crawler's timing reads (`exitcrawl_net::clock`
/// says why): an outage's backoff follows a paused runtime like every other timer. Read
/// here in one line rather than through the network crate, which this one does not need.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Time on the runtime's clock since `earlier` (zero if `earlier` is later).
fn elapsed_since(earlier: Instant) -> Duration {
    now().saturating_duration_since(earlier)
}

/// The prefix of every key and channel.
pub const PREFIX: &str = "exitcrawl";

/// Why a Redis operation failed.
#[derive(Debug)]
pub enum RedisError {
    /// The URL could not be parsed or the client could not be built.
    Config(::redis::RedisError),
    /// An outage is open and the next probe is not due yet; nothing was sent.
    Unavailable {
        /// Time until the next probe is allowed.
        retry_in: Duration,
    },
    /// No answer within the deadline.
    Timeout {
        /// The operation, e.g. `"gcra"`.
        op: &'static str,
        /// The deadline that passed.
        after: Duration,
    },
    /// The connection failed: refused, reset, closed, not established.
    Connection(::redis::RedisError),
    /// Redis answered with an error (a bug or a misconfigured server, not an outage).
    Server(::redis::RedisError),
    /// Redis answered something this code does not understand.
    Reply(String),
    /// A caller's argument is out of range (e.g. a rate ≤ 0).
    InvalidArgument(String),
}

impl RedisError {
    /// `true` for the kinds that mean Redis cannot be reached (connection, timeout,
    /// unavailable): the caller falls back to its local limit.
    pub fn is_outage(&self) -> bool {
        matches!(
            self,
            RedisError::Unavailable { .. } | RedisError::Timeout { .. } | RedisError::Connection(_)
        )
    }

    /// The error code Redis answered with (`NOGROUP`, `LOADING`, …), if it answered.
    pub fn code(&self) -> Option<&str> {
        match self {
            RedisError::Server(e) => e.code(),
            _ => None,
        }
    }

    fn from_redis(e: ::redis::RedisError) -> Self {
        use ::redis::ErrorKind;
        match e.kind() {
            ErrorKind::Server(_) | ErrorKind::Extension => RedisError::Server(e),
            ErrorKind::Parse | ErrorKind::UnexpectedReturnType => RedisError::Reply(e.to_string()),
            _ => RedisError::Connection(e),
        }
    }
}

impl fmt::Display for RedisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisError::Config(_) => write!(f, "invalid redis configuration"),
            RedisError::Unavailable { retry_in } => write!(
                f,
                "redis unavailable (outage open), next attempt in {} ms",
                retry_in.as_millis()
            ),
            RedisError::Timeout { op, after } => {
                write!(f, "redis {op}: no answer within {} ms", after.as_millis())
            }
            RedisError::Connection(e) => write!(f, "redis connection failed: {e}"),
            RedisError::Server(e) => write!(f, "redis answered with an error: {e}"),
            RedisError::Reply(m) => write!(f, "unexpected redis reply: {m}"),
            RedisError::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
        }
    }
}

impl StdError for RedisError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            RedisError::Config(e) | RedisError::Connection(e) | RedisError::Server(e) => Some(e),
            _ => None,
        }
    }
}

/// Exponential backoff for reconnect attempts: `base`, `2 × base`, … capped at `max`.
///
/// Deterministic (no jitter): a handful of crawler processes reconnecting together is no
/// load for Redis.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// A backoff starting at `base`, never above `max` (`max` is raised to `base` if lower).
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
            attempt: 0,
        }
    }

    /// The next delay; each call doubles it, up to `max`.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32 << self.attempt.min(20);
        self.attempt = self.attempt.saturating_add(1);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// Back to `base` (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Delays handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

impl Default for Backoff {
    /// 100 ms doubling up to 5 s.
    fn default() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_secs(5))
    }
}

/// Timeouts and reconnect backoff.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Deadline for one operation. Default 500 ms.
    pub op_timeout: Duration,
    /// Deadline for establishing a TCP connection. Default 250 ms.
    pub connect_timeout: Duration,
    /// Delay between reconnect probes during an outage. Default 100 ms doubling to 5 s.
    pub backoff: Backoff,
    /// What the caller does during an outage, for the warning that opens one. Default
    /// "falling back to local limits" (the limiters').
    pub outage_note: &'static str,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            op_timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(250),
            backoff: Backoff::default(),
            outage_note: "falling back to local limits",
        }
    }
}

/// Counters of one [`Redis`] handle and its clones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RedisStats {
    /// Outages opened since start (one per stretch of failures, not per failed call).
    pub outages: u64,
    /// Failed calls, including those refused during an outage.
    pub errors: u64,
    /// Scripts reloaded after a `NOSCRIPT` answer (server restart, `SCRIPT FLUSH`).
    pub script_reloads: u64,
    /// How long the current outage has lasted; `None` when Redis is up.
    pub down_for: Option<Duration>,
}

#[derive(Debug, Default)]
struct Outage {
    since: Option<Instant>,
    retry_at: Option<Instant>,
}

#[derive(Debug)]
struct Health {
    note: &'static str,
    outages: AtomicU64,
    errors: AtomicU64,
    script_reloads: AtomicU64,
    state: Mutex<(Outage, Backoff)>,
}

impl Health {
    fn new(backoff: Backoff, note: &'static str) -> Self {
        Self {
            note,
            outages: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            script_reloads: AtomicU64::new(0),
            state: Mutex::new((Outage::default(), backoff)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Outage, Backoff)> {
        // A panic while holding this lock cannot leave the state inconsistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Some(wait)` when an outage is open and the next probe is not due; otherwise
    /// lets the call through (and, during an outage, books the next probe time so that
    /// concurrent callers do not all probe at once).
    fn gate(&self, now: Instant) -> Option<Duration> {
        let mut g = self.lock();
        let (outage, backoff) = &mut *g;
        outage.since?;
        match outage.retry_at {
            Some(at) if at > now => Some(at - now),
            _ => {
                outage.retry_at = Some(now + backoff.next_delay());
                None
            }
        }
    }

    fn up(&self) {
        let mut g = self.lock();
        let (outage, backoff) = &mut *g;
        if let Some(since) = outage.since.take() {
            tracing::info!(
                down_ms = elapsed_since(since).as_millis() as u64,
                "redis reachable again"
            );
            outage.retry_at = None;
            backoff.reset();
        }
    }

    fn down(&self, now: Instant, err: &RedisError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut g = self.lock();
        let (outage, backoff) = &mut *g;
        if outage.since.is_none() {
            self.outages.fetch_add(1, Ordering::Relaxed);
            outage.since = Some(now);
            outage.retry_at = Some(now + backoff.next_delay());
            tracing::warn!(error = %err, cause = ?err.source().map(|s| s.to_string()), "redis outage: {}", self.note);
        }
    }
}

/// A cheap-to-clone handle on one Redis server: a reconnecting multiplexed connection,
/// timeouts, and the outage state shared by all clones.
#[derive(Clone)]
pub struct Redis {
    client: ::redis::Client,
    conn: ConnectionManager,
    opts: RedisOptions,
    health: Arc<Health>,
}

impl fmt::Debug for Redis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redis")
            .field("addr", &self.client.get_connection_info().addr())
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Redis {
    /// A handle on `url` (`redis://host:port[/db]`). Connects lazily: this succeeds while
    /// Redis is down (the crawler must start anyway); only a bad URL is an error.
    /// Must be called inside a tokio runtime (an actix System is one).
    pub fn connect(url: &str, opts: RedisOptions) -> Result<Self, RedisError> {
        let client = ::redis::Client::open(url).map_err(RedisError::Config)?;
        let health = Arc::new(Health::new(opts.backoff.clone(), opts.outage_note));
        let conn = Self::manager(&client, &opts, Some(opts.op_timeout))?;
        Ok(Self {
            client,
            conn,
            opts,
            health,
        })
    }

    fn manager(
        client: &::redis::Client,
        opts: &RedisOptions,
        response_timeout: Option<Duration>,
    ) -> Result<ConnectionManager, RedisError> {
        // One connection attempt per reconnect: the backoff between attempts is ours
        // (see `Health`), so a call never waits through the manager's retry ladder.
        let cfg = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(opts.connect_timeout))
            .set_response_timeout(response_timeout);
        ConnectionManager::new_lazy_with_config(client.clone(), cfg).map_err(RedisError::Config)
    }

    /// The options in use.
    pub fn options(&self) -> &RedisOptions {
        &self.opts
    }

    /// Outage and reload counters.
    pub fn stats(&self) -> RedisStats {
        let g = self.health.lock();
        RedisStats {
            outages: self.health.outages.load(Ordering::Relaxed),
            errors: self.health.errors.load(Ordering::Relaxed),
            script_reloads: self.health.script_reloads.load(Ordering::Relaxed),
            down_for: g.0.since.map(elapsed_since),
        }
    }

    /// `PING`.
    pub async fn ping(&self) -> Result<(), RedisError> {
        let pong: String = self.query("ping", ::redis::cmd("PING")).await?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(RedisError::Reply(format!("PING answered {pong:?}")))
        }
    }

    /// A clone of the connection, for commands built by the submodules.
    fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    fn client(&self) -> &::redis::Client {
        &self.client
    }

    /// Runs one command on the shared connection within `op_timeout`, through the outage
    /// gate.
    async fn query<T: ::redis::FromRedisValue>(
        &self,
        op: &'static str,
        cmd: ::redis::Cmd,
    ) -> Result<T, RedisError> {
        let mut c = self.conn();
        self.run(
            op,
            Duration::ZERO,
            async move { cmd.query_async(&mut c).await },
        )
        .await
    }

    /// Runs `fut` within `op_timeout + extra`, through the outage gate.
    async fn run<T, F>(&self, op: &'static str, extra: Duration, fut: F) -> Result<T, RedisError>
    where
        F: Future<Output = ::redis::RedisResult<T>>,
    {
        self.run_typed(op, extra, async move {
            fut.await.map_err(RedisError::from_redis)
        })
        .await
    }

    /// Like `run`, for futures that already produce a [`RedisError`].
    async fn run_typed<T, F>(
        &self,
        op: &'static str,
        extra: Duration,
        fut: F,
    ) -> Result<T, RedisError>
    where
        F: Future<Output = Result<T, RedisError>>,
    {
        if let Some(retry_in) = self.health.gate(now()) {
            self.health.errors.fetch_add(1, Ordering::Relaxed);
            return Err(RedisError::Unavailable { retry_in });
        }
        let after = self.opts.op_timeout + extra;
        let res = match tokio::time::timeout(after, fut).await {
            Ok(r) => r,
            Err(_) => Err(RedisError::Timeout { op, after }),
        };
        match &res {
            Ok(_) => self.health.up(),
            Err(e) if e.is_outage() => self.health.down(now(), e),
            // The server answered: it is up, the error is the caller's to handle.
            Err(_) => {
                self.health.errors.fetch_add(1, Ordering::Relaxed);
                self.health.up();
            }
        }
        res
    }
}

/// `EVALSHA` of `script`, loading it on `NOSCRIPT` and trying once more.
async fn eval_script<T: ::redis::FromRedisValue>(
    redis: &Redis,
    script: &::redis::Script,
    keys: &[&str],
    args: &[String],
) -> Result<T, RedisError> {
    let mut c = redis.conn();
    let evalsha = |hash: &str| {
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(hash).arg(keys.len()).arg(keys).arg(args);
        cmd
    };
    let cmd = evalsha(script.get_hash());
    let health = redis.health.clone();
    redis
        .run("evalsha", Duration::ZERO, async move {
            match cmd.query_async(&mut c).await {
                Err(e)
                    if e.kind()
                        == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript) =>
                {
                    health.script_reloads.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("redis script not cached: loading it");
                    script.load_async(&mut c).await?;
                    cmd.query_async(&mut c).await
                }
                r => r,
            }
        })
        .await
}

/// `"exitcrawl:{kind}:{name}"`.
fn key(kind: &str, name: &str) -> String {
    format!("{PREFIX}:{kind}:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let got: Vec<u64> = (0..5).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(got, [100, 200, 400, 500, 500]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
        // Huge attempt counts neither overflow nor exceed the cap.
        for _ in 0..100 {
            assert!(b.next_delay() <= Duration::from_millis(500));
        }
    }

    #[test]
    fn outage_counted_once_and_gated_until_probe() {
        let h = Health::new(
            Backoff::new(Duration::from_millis(100), Duration::from_secs(1)),
            "test",
        );
        let t0 = now();
        assert_eq!(h.gate(t0), None, "no outage: calls go through");
        let err = RedisError::Timeout {
            op: "x",
            after: Duration::ZERO,
        };
        h.down(t0, &err);
        h.down(t0, &err);
        assert_eq!(h.outages.load(Ordering::Relaxed), 1);
        assert_eq!(h.errors.load(Ordering::Relaxed), 2);
        assert_eq!(h.gate(t0), Some(Duration::from_millis(100)));
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(h.gate(t1), None, "probe due");
        assert_eq!(
            h.gate(t1),
            Some(Duration::from_millis(200)),
            "others wait for the probe"
        );
        h.up();
        assert_eq!(h.gate(t1), None);
        assert_eq!(h.outages.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn errors_have_sources_and_outage_kinds() {
        let e = RedisError::from_redis(::redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert!(e.is_outage(), "{e:?}");
        assert!(e.source().is_some());
        assert!(!RedisError::InvalidArgument("x".into()).is_outage());
    }
}
