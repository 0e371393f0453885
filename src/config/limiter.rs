//! The `[limiter]` section: how fast each limiter key may send, and the algorithm and
//! backend that pace it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::strict;
use crate::limiter::{Kind, Quota, Scope};

/// `[limiter]`: how fast each limiter key may send, and how the adaptive controller reacts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimiterSettings {
    /// Which algorithm paces each limiter key. Default `"aimd"`; see [`Algorithm`].
    pub algorithm: Algorithm,
    /// What one limiter covers. Default `"auto"`; see [`Scope`].
    pub scope: Scope,
    /// Where the keys' state lives: `"local"` (default) or `"redis"` (shared by every
    /// process using `[redis] url`).
    pub backend: Backend,
    /// With `aimd`: the starting rate; with the other algorithms: their fixed rate — in
    /// requests/s per limiter key. Default 5.0; > 0 and ≤ `max_rps`, and with `aimd` also
    /// ≥ `min_rps`. With `aimd` under scope `auto` it is the most a new host starts at: the
    /// crawl's host prior (`aimd::prior`) may start it lower.
    #[serde(deserialize_with = "strict::float")]
    pub initial_rps: f64,
    /// Burst allowed on top of the fixed rate (the non-adaptive algorithms; the adaptive
    /// one paces strictly). Default 1 (no burst); 1..=100000.
    #[serde(deserialize_with = "strict::int")]
    pub burst: u32,
    /// `aimd` never goes below this rate, requests/s. Default 0.1; > 0 and ≤ `max_rps`.
    /// Not zero: at zero a throttled key could never send the request that shows it has
    /// recovered.
    #[serde(deserialize_with = "strict::float")]
    pub min_rps: f64,
    /// `aimd` never goes above, and fixed rates may not exceed, this rate, requests/s.
    /// Default 1000.0; ≥ `min_rps` and ≤ 1000000.
    #[serde(deserialize_with = "strict::float")]
    pub max_rps: f64,
    /// `aimd` additive increase: once the probe has passed the capacity estimate, the rate
    /// grows at least this many requests/s per second. Default 1.0; > 0 and ≤ `max_rps`.
    #[serde(deserialize_with = "strict::float")]
    pub increase_rps: f64,
    /// `aimd` multiplicative decrease: on a throttle the rate becomes this times the
    /// capacity estimate. Default 0.9 (vector's adaptive concurrency); strictly between 0
    /// and 1. The estimate, not the overshooting rate, is what gets cut, so a mild factor
    /// is enough to get under the limit; the scenario tests (`tests/scenarios/`) are run
    /// with 0.9.
    #[serde(deserialize_with = "strict::float")]
    pub decrease: f64,
    /// `aimd` latency early warning: the most a round of answers' median latency may
    /// exceed the site's quiet median by, as a multiple of it, before it counts as a queue
    /// (servers slow down before they start refusing). A steady site gets a narrower band
    /// from its own noise; this is its widest. Default 2.0; > 1 and ≤ 100.
    #[serde(deserialize_with = "strict::float")]
    pub latency_tolerance: f64,
    /// After a throttle response without Retry-After, the limiter key pauses for
    /// max(smoothed RTT, two intervals), at most this many ms, so the requests already
    /// queued behind it do not all hit the site too. Default 250; 0..=60000 (0 = no hold).
    #[serde(deserialize_with = "strict::int")]
    pub hold_ms: u64,
    /// `aimd` under scope `auto`: a host nothing has been heard from for this many ms is
    /// forgotten (its controllers and pacing freed; a rate a cut taught it is kept, a few
    /// dozen bytes, and it starts there again), unless a pause or a lockout is in force
    /// or the host was ever banned. A crawl that meets hosts without end then holds the
    /// controllers of the hosts heard from within it, and a few dozen bytes for each host
    /// forgotten after a cut. At least `crawler.max_retry_after_ms` and
    /// `crawler.retry_backoff_max_ms` (a host waiting out a pause or a backoff is not
    /// quiet); given alone, it moves them down, and they move it up.
    /// Default 600000 (10 minutes); 1000..=86400000.
    #[serde(deserialize_with = "strict::int")]
    pub forget_idle_ms: u64,
    /// `aimd` pacing jitter: each send is delayed within its slot by up to this fraction
    /// of the interval (the long-run rate is unchanged). Default 0.0: even spacing, which
    /// is what a strict limit (nginx `limit_req` without `burst=`) accepts; a host's exits
    /// share one pacer (scope `auto`), so there is no lock-step to break. 0.0..=0.5.
    #[serde(deserialize_with = "strict::float")]
    pub jitter: f64,
    /// HTTP statuses that mean "slow down". Default `[429, 503]`; each 100..=599, may be
    /// empty (then only timeouts/resets, if enabled, throttle). From the environment:
    /// a comma-separated list, e.g. `EXITCRAWL__LIMITER__THROTTLE_STATUSES=429,503,520`.
    #[serde(deserialize_with = "strict::status_list")]
    pub throttle_statuses: Vec<u16>,
    /// Treat every request timeout as a throttle signal. Default false: a timeout may be
    /// one slow page, so timeouts (like 5xx answers that are not throttle statuses) slow
    /// a host only when they dominate its answers or rise well above their usual share.
    #[serde(deserialize_with = "strict::boolean")]
    pub throttle_on_timeout: bool,
    /// Treat every connection reset / refused connection as a throttle signal. Default
    /// false, for the same reason as `throttle_on_timeout`.
    #[serde(deserialize_with = "strict::boolean")]
    pub throttle_on_reset: bool,
}

impl Default for LimiterSettings {
    fn default() -> Self {
        Self {
            algorithm: Algorithm::Aimd,
            scope: Scope::Auto,
            backend: Backend::Local,
            initial_rps: 5.0,
            burst: 1,
            min_rps: 0.1,
            max_rps: 1000.0,
            increase_rps: 1.0,
            decrease: 0.9,
            latency_tolerance: 2.0,
            hold_ms: 250,
            forget_idle_ms: 600_000,
            jitter: 0.0,
            throttle_statuses: vec![429, 503],
            throttle_on_timeout: false,
            throttle_on_reset: false,
        }
    }
}

impl LimiterSettings {
    /// The quota of the fixed-rate algorithms: `initial_rps` with `burst`.
    pub fn quota(&self) -> Quota {
        Quota::new(self.initial_rps, self.burst)
    }
    /// `forget_idle_ms` as a Duration.
    pub fn forget_idle(&self) -> Duration {
        Duration::from_millis(self.forget_idle_ms)
    }
    /// `hold_ms` as a Duration.
    pub fn hold(&self) -> Duration {
        Duration::from_millis(self.hold_ms)
    }
    /// Whether `status` is one of `throttle_statuses`.
    pub fn is_throttle_status(&self, status: u16) -> bool {
        self.throttle_statuses.contains(&status)
    }
}

/// `[limiter] algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// `"aimd"`: adaptive; starts at `initial_rps`, adds `increase_rps` while responses
    /// are good, multiplies by `decrease` on a throttle signal. The default, because the
    /// site's limit is not known in advance.
    Aimd,
    /// `"token_bucket"`: fixed rate, bursts up to `burst` after quiet periods.
    TokenBucket,
    /// `"leaky_bucket"`: fixed rate, as a meter (same bound as the token bucket).
    LeakyBucket,
    /// `"fixed_window"`: counter reset every window; up to 2× the limit across a boundary.
    FixedWindow,
    /// `"sliding_window"`: two-window weighted counter; approximately the limit per window,
    /// constant memory.
    SlidingWindow,
    /// `"sliding_log"`: exact log of send times; exactly the limit per window, memory
    /// grows with the limit.
    SlidingLog,
    /// `"gcra"`: generic cell rate algorithm; token-bucket behaviour with one timestamp.
    Gcra,
    /// `"none"`: no pacing at all (only `concurrency` limits). For tests and sites you own.
    None,
}

impl Algorithm {
    /// Every value, in documentation order.
    pub const ALL: [Algorithm; 8] = [
        Algorithm::Aimd,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::Gcra,
        Algorithm::None,
    ];

    /// The fixed-rate limiter this algorithm builds with [`crate::limiter::build`];
    /// `None` for `aimd` (the adaptive controller, which is not a `limiter::Kind`) and
    /// for `none` (no limiter at all).
    pub fn limiter_kind(&self) -> Option<Kind> {
        match self {
            Algorithm::Aimd | Algorithm::None => None,
            Algorithm::TokenBucket => Some(Kind::TokenBucket),
            Algorithm::LeakyBucket => Some(Kind::LeakyBucket),
            Algorithm::FixedWindow => Some(Kind::FixedWindow),
            Algorithm::SlidingWindow => Some(Kind::SlidingWindow),
            Algorithm::SlidingLog => Some(Kind::SlidingLog),
            Algorithm::Gcra => Some(Kind::Gcra),
        }
    }

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Aimd => "aimd",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::Gcra => "gcra",
            Algorithm::None => "none",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[limiter] backend`: where the limiter keys' state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// `"local"`: in this process only (the default).
    Local,
    /// `"redis"`: in Redis, shared by every crawler process that uses the same server:
    /// one GCRA per key on the server's clock, and the adaptive rate per key published to
    /// all processes. Use `scope = "host"` to share a site's budget across machines (exit
    /// names differ from machine to machine).
    Redis,
}

impl Backend {
    /// Every value, in documentation order.
    pub const ALL: [Backend; 2] = [Backend::Local, Backend::Redis];

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Redis => "redis",
        }
    }
}
