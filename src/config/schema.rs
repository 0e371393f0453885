//! The settings schema: what each key means, its default and its allowed range.
//!
//! The key names are a public contract (config files in the wild use them); rename nothing.
//! Ranges stated here are enforced by [`Settings::validate`](super::Settings::validate);
//! `config/default.toml` repeats every key with its default, and a test checks that it
//! documents every field of these structs.
//!
//! Every struct denies unknown keys: a misspelt key (`concurency = 64`) silently falling
//! back to the default is the worst kind of config bug, so it is an error instead.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::crawl::CrawlSettings;
use super::strict;
use crate::limiter::Quota;

pub use super::limiter::{Algorithm, Backend, LimiterSettings};

/// The whole configuration: the `[crawler]`, `[limiter]`, `[health]`, `[metrics]` and
/// `[crawl]` tables (each optional, all keys defaulted) and the `[[exits]]` array
/// (required, ≥ 1 enabled entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `[crawler]`: fetching limits, timeouts and retries.
    #[serde(default)]
    pub crawler: CrawlerSettings,
    /// `[limiter]`: how fast each limiter key (see [`Scope`]) may send.
    #[serde(default)]
    pub limiter: LimiterSettings,
    /// `[health]`: when an exit is ejected and how it is probed back.
    #[serde(default)]
    pub health: HealthSettings,
    /// `[metrics]`: the optional metrics endpoint.
    #[serde(default)]
    pub metrics: MetricsSettings,
    /// `[redis]`: the shared engine of distributed mode (`limiter.backend = "redis"`).
    #[serde(default)]
    pub redis: RedisSettings,
    /// `[[exits]]`: the egress source addresses. No default — there is no sensible one —
    /// but a missing array deserializes as empty so that `validate` can say exactly what
    /// is wrong: at least one entry, with unique names and addresses, must be present and
    /// at least one must be enabled.
    #[serde(default)]
    pub exits: Vec<ExitSettings>,
    /// `[crawl]`: following links from seed URLs — scope, dedupe, robots.txt, per-host
    /// politeness.
    #[serde(default)]
    pub crawl: CrawlSettings,
}

impl Settings {
    /// Every table at its default, with these exits. Not validated: call
    /// [`validate`](Settings::validate) before use.
    pub fn with_exits(exits: Vec<ExitSettings>) -> Self {
        Self {
            crawler: CrawlerSettings::default(),
            limiter: LimiterSettings::default(),
            health: HealthSettings::default(),
            metrics: MetricsSettings::default(),
            redis: RedisSettings::default(),
            exits,
            crawl: CrawlSettings::default(),
        }
    }

    /// The exits with `enabled = true`, in file order (the order selection uses for ties).
    pub fn enabled_exits(&self) -> impl Iterator<Item = &ExitSettings> + '_ {
        self.exits.iter().filter(|e| e.enabled)
    }
}

/// `[crawler]`: fetching limits, timeouts and retries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CrawlerSettings {
    /// Most fetches in flight at once, all exits together. Default 256; 1..=100000.
    #[serde(deserialize_with = "strict::int")]
    pub concurrency: u32,
    /// Whole-request deadline (connect, send, headers and body), in ms. Default 10000;
    /// 1..=3600000 and ≥ `connect_timeout_ms`.
    #[serde(deserialize_with = "strict::int")]
    pub timeout_ms: u64,
    /// Deadline for establishing the TCP connection, in ms: one budget for resolving the
    /// name, its addresses tried in turn and, through a proxy, the proxy's connect and
    /// handshake; the TLS handshake has as long again. Default 5000; 1..=`timeout_ms`.
    /// Shorter than the whole request so that a dead exit or host fails fast instead of
    /// eating the whole timeout.
    #[serde(deserialize_with = "strict::int")]
    pub connect_timeout_ms: u64,
    /// Further attempts per URL after an error (a 5xx, a reset, a timeout, a refused
    /// connection; 0 = never retry). Throttles do not count: a throttled URL waits for its
    /// host (see `give_up_after_ms`). Default 3; 0..=100.
    #[serde(deserialize_with = "strict::int")]
    pub max_retries: u32,
    /// `User-Agent` header sent with every request. Default `"exitcrawl/<crate version>"`;
    /// 1..=512 bytes of visible ASCII and spaces (a header value must not hold control
    /// characters, and sites log this to find who is crawling them).
    pub user_agent: String,
    /// Bodies longer than this, once decoded, end the fetch as `body_too_large`, in bytes
    /// (an embedder's fetch may set a limit of its own, or ask for a body's first bytes).
    /// Default 2097152 (2 MiB); 1..=1073741824 (1 GiB). Bounds memory per fetch.
    #[serde(deserialize_with = "strict::int")]
    pub max_body_bytes: u64,
    /// Redirects followed per fetch (0 = do not follow). Default 10; 0..=100.
    #[serde(deserialize_with = "strict::int")]
    pub max_redirects: u32,
    /// Capacity of the bounded scheduler queue (URLs waiting for a permit or for their
    /// host's turn); a full queue pushes back on whoever submits URLs instead of growing
    /// without bound. The URL-list mode reads `concurrency + queue_capacity` URLs ahead.
    /// Default 10000; 1..=10000000.
    #[serde(deserialize_with = "strict::int")]
    pub queue_capacity: u32,
    /// First retry delay, in ms; each further retry doubles it (with jitter), capped at
    /// `retry_backoff_max_ms`. Default 500; 1..=`retry_backoff_max_ms`.
    #[serde(deserialize_with = "strict::int")]
    pub retry_backoff_base_ms: u64,
    /// Cap on a single retry delay, in ms. Default 30000; `retry_backoff_base_ms`..=3600000.
    #[serde(deserialize_with = "strict::int")]
    pub retry_backoff_max_ms: u64,
    /// Retries to a host may add at most this fraction of extra load on top of its first
    /// attempts (0.2 = at most one retry per five fresh fetches, over a sliding 10 s
    /// window), plus a reserve of ten a second per host. Stops retry storms when a site is
    /// failing; a retry it cannot afford waits. Default 0.2; 0.0..=1.0.
    #[serde(deserialize_with = "strict::float")]
    pub retry_budget: f64,
    /// A host that answers nothing but throttles (429/503) for this long is given up:
    /// its waiting URLs end `throttled_out`. Until then a throttled URL waits for its host
    /// however often it is throttled. In ms. Default 600000 (10 min); 1000..=86400000.
    #[serde(deserialize_with = "strict::int")]
    pub give_up_after_ms: u64,
    /// The longest pause a site may ask for (`Retry-After`, or a used-up quota's reset
    /// in `RateLimit`/`X-RateLimit-*` headers), in ms: a longer one is cut to this, a
    /// throttle that asks for it ends its URL `throttled_out` with the site's value, and
    /// a warning names the host. Default 300000 (5 min); 1000..=86400000.
    #[serde(deserialize_with = "strict::int")]
    pub max_retry_after_ms: u64,
    /// Open connections per (exit, host) pair. Default 32; 1..=10000.
    #[serde(deserialize_with = "strict::int")]
    pub per_host_connections: u32,
    /// How long an idle pooled connection is kept for reuse, in ms (0 = close after each
    /// request). Default 15000; 0..=3600000. Kept below the idle timeouts common servers
    /// use so a reused connection is rarely one the server has just closed.
    #[serde(deserialize_with = "strict::int")]
    pub keep_alive_ms: u64,
    /// Hosts one exit's connection pool serves before the exit starts a fresh pool, which
    /// closes the idle connections of the old one once its last request ends. A pool keeps
    /// an idle connection to every host it has been to until that host is asked for
    /// again, so without renewal a broad crawl holds a socket per host and exit until it
    /// runs out of file descriptors. Default 256; 1..=1000000.
    #[serde(deserialize_with = "strict::int")]
    pub pool_hosts: u32,
    /// How long a resolved host address is cached, in ms (0 = resolve every connection).
    /// Default 60000; 0..=86400000.
    #[serde(deserialize_with = "strict::int")]
    pub dns_ttl_ms: u64,
    /// How the actor system is laid out over threads. Default `"single"`; see [`Arbiters`].
    pub arbiters: Arbiters,
    /// Headers sent with every request (`[crawler.headers]`, name = value), e.g.
    /// `"Accept-Language" = "en"` or an API token. Default none; at most 64; names are
    /// HTTP tokens of 1..=128 characters, each at most once whatever its case; values
    /// 0..=8192 characters of visible ASCII, spaces and tabs. Not allowed: `User-Agent`
    /// (use `user_agent`), `Accept-Encoding` (the exit decodes what it asks for) and the
    /// headers that frame the connection (`Host`, `Content-Length`, `Transfer-Encoding`,
    /// `Connection`, …). A fetch's own header of the same name wins. `Authorization`,
    /// `Cookie` and `Proxy-Authorization` are not sent past a redirect to another origin;
    /// values of secret-looking headers are masked wherever they are shown. File only.
    pub headers: BTreeMap<String, String>,
    /// Keep cookies: each exit keeps the `Set-Cookie`s it receives per host and sends them
    /// back to that host (host-only; `Max-Age`/`Expires` honoured, `Secure` over https
    /// only), never through another exit or to another host. Default false.
    #[serde(deserialize_with = "strict::boolean")]
    pub cookies: bool,
}

impl Default for CrawlerSettings {
    fn default() -> Self {
        Self {
            concurrency: 256,
            timeout_ms: 10_000,
            connect_timeout_ms: 5_000,
            max_retries: 3,
            user_agent: default_user_agent(),
            max_body_bytes: 2 * 1024 * 1024,
            max_redirects: 10,
            queue_capacity: 10_000,
            retry_backoff_base_ms: 500,
            retry_backoff_max_ms: 30_000,
            retry_budget: 0.2,
            give_up_after_ms: 600_000,
            max_retry_after_ms: 300_000,
            per_host_connections: 32,
            keep_alive_ms: 15_000,
            pool_hosts: 256,
            dns_ttl_ms: 60_000,
            arbiters: Arbiters::Single,
            headers: BTreeMap::new(),
            cookies: false,
        }
    }
}

impl CrawlerSettings {
    /// `timeout_ms` as a Duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
    /// `connect_timeout_ms` as a Duration.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
    /// `retry_backoff_base_ms` as a Duration.
    pub fn retry_backoff_base(&self) -> Duration {
        Duration::from_millis(self.retry_backoff_base_ms)
    }
    /// `retry_backoff_max_ms` as a Duration.
    pub fn retry_backoff_max(&self) -> Duration {
        Duration::from_millis(self.retry_backoff_max_ms)
    }
    /// `give_up_after_ms` as a Duration.
    pub fn give_up_after(&self) -> Duration {
        Duration::from_millis(self.give_up_after_ms)
    }
    /// `max_retry_after_ms` as a Duration.
    pub fn max_retry_after(&self) -> Duration {
        Duration::from_millis(self.max_retry_after_ms)
    }
    /// `keep_alive_ms` as a Duration.
    pub fn keep_alive(&self) -> Duration {
        Duration::from_millis(self.keep_alive_ms)
    }
    /// `dns_ttl_ms` as a Duration.
    pub fn dns_ttl(&self) -> Duration {
        Duration::from_millis(self.dns_ttl_ms)
    }
}

/// `"exitcrawl/<crate version>"`, the default `User-Agent`.
pub fn default_user_agent() -> String {
    concat!("exitcrawl/", env!("CARGO_PKG_VERSION")).to_string()
}

/// `[crawler] arbiters`: threads for the actor system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arbiters {
    /// All actors on one thread (`"single"`). The default: a crawler waits on the network,
    /// not the CPU, and one thread keeps ordering simple.
    Single,
    /// One thread per exit (`"per_exit"`), for many exits or heavy body processing.
    PerExit,
}

impl Arbiters {
    /// Every value, in documentation order.
    pub const ALL: [Arbiters; 2] = [Arbiters::Single, Arbiters::PerExit];

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Arbiters::Single => "single",
            Arbiters::PerExit => "per_exit",
        }
    }
}

/// `[redis]`: connection to the Redis server of distributed mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisSettings {
    /// `redis://host:port[/db]`. Default absent; required with `limiter.backend = "redis"`.
    pub url: Option<String>,
    /// How many crawler processes share the budget. While Redis is unreachable each
    /// process paces every key at the shared rate divided by this, so together they stay
    /// within it. Default 1; 1..=10000.
    #[serde(deserialize_with = "strict::int")]
    pub processes: u32,
    /// Deadline of one Redis operation, ms. Default 500; 1..=60000.
    #[serde(deserialize_with = "strict::int")]
    pub op_timeout_ms: u64,
}

impl Default for RedisSettings {
    fn default() -> Self {
        Self {
            url: None,
            processes: 1,
            op_timeout_ms: 500,
        }
    }
}

/// `[limiter] scope` is the limiter's own vocabulary.
pub use crate::limiter::Scope;

/// `[health]`: passive (from real fetches) and optional active health checking per exit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthSettings {
    /// URL fetched through each exit to probe it (active checks). Default absent: health
    /// is judged passively from real fetches only, and an ejected exit is retried with
    /// real traffic. When set: `http://` or `https://` with a host, ≤ 2048 bytes.
    pub url: Option<String>,
    /// Time between active probes of one exit, in ms. Default 10000; 100..=3600000.
    #[serde(deserialize_with = "strict::int")]
    pub interval_ms: u64,
    /// Deadline of one probe, in ms. Default 2000; 1..=`interval_ms`.
    #[serde(deserialize_with = "strict::int")]
    pub timeout_ms: u64,
    /// Consecutive failures that eject an exit: real requests failing by the exit's own
    /// fault (its address would not bind, its proxy refuses) and failed health checks
    /// while the exit has no recent real answer (a check failing while real requests are
    /// answered does not count). Default 3; 1..=1000.
    #[serde(deserialize_with = "strict::int")]
    pub consecutive_failures: u32,
    /// First ejection length, in ms; the n-th ejection in a row lasts n times this, up
    /// to `max_ejection_ms`. Default 30000; 1..=`max_ejection_ms`.
    #[serde(deserialize_with = "strict::int")]
    pub base_ejection_ms: u64,
    /// Longest ejection, in ms. Default 300000; `base_ejection_ms`..=86400000.
    #[serde(deserialize_with = "strict::int")]
    pub max_ejection_ms: u64,
}

impl Default for HealthSettings {
    fn default() -> Self {
        Self {
            url: None,
            interval_ms: 10_000,
            timeout_ms: 2_000,
            consecutive_failures: 3,
            base_ejection_ms: 30_000,
            max_ejection_ms: 300_000,
        }
    }
}

impl HealthSettings {
    /// `interval_ms` as a Duration.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }
    /// `timeout_ms` as a Duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
    /// `base_ejection_ms` as a Duration.
    pub fn base_ejection(&self) -> Duration {
        Duration::from_millis(self.base_ejection_ms)
    }
    /// `max_ejection_ms` as a Duration.
    pub fn max_ejection(&self) -> Duration {
        Duration::from_millis(self.max_ejection_ms)
    }
    /// How recent a real answer through an exit must be for a failing health check of
    /// that exit to be discounted: `interval_ms + timeout_ms`, so a check is weighed
    /// against the real answers since the previous check began.
    pub fn passive_window(&self) -> Duration {
        self.interval() + self.timeout()
    }
}

/// `[metrics]`: the optional Prometheus-style metrics endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSettings {
    /// Socket address to serve metrics on, e.g. `"127.0.0.1:9090"`. Default absent:
    /// no metrics endpoint. Bind a non-loopback address only on purpose: the endpoint
    /// has no authentication.
    pub listen: Option<SocketAddr>,
    /// How many distinct hosts may appear as a `host` label: the first this many the
    /// crawl meets; later ones fold into `other`. Default 0: every host is `all` (a crawl of 100k domains must not explode the
    /// metrics' cardinality). 0..=10000.
    #[serde(deserialize_with = "strict::int")]
    pub host_labels: u32,
}

/// One `[[exits]]` entry: an egress address the crawler sends from — a local source
/// address, a proxy, or both (the proxy reached from that source address).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitSettings {
    /// Unique name, used in logs, metrics and limiter keys. Required; 1..=64 characters
    /// from `A-Z a-z 0-9 _ - .`.
    pub name: String,
    /// Local address outgoing connections bind to (to the site, or to the proxy). Default
    /// `0.0.0.0`: not bound, the kernel picks the source address by its routes (the default
    /// route). Not multicast; unique across exits without a proxy.
    #[serde(default = "unbound")]
    pub source_ip: IpAddr,
    /// A proxy this exit sends through: `http://[user:pass@]host:port` (tunnelled with
    /// `CONNECT`, for http and https targets alike), `socks5://…` (names resolved here) or
    /// `socks5h://…` (names resolved by the proxy). Default absent (connect directly).
    /// Unique across exits. The password is masked wherever the URL is shown.
    #[serde(default)]
    pub proxy: Option<String>,
    /// Most fetches in flight on this exit. Default 100; 1..=100000.
    #[serde(default = "default_max_concurrent", deserialize_with = "strict::int")]
    pub max_concurrent: u32,
    /// Optional cap for this exit as a whole, requests/s (a token bucket in front of the
    /// per-host limiters, e.g. a provider's per-IP quota). Default absent (no cap);
    /// > 0 and ≤ 1000000.
    #[serde(default, deserialize_with = "strict::opt_float")]
    pub rate: Option<f64>,
    /// Burst of that token bucket. Only together with `rate`. Default 1 when `rate` is
    /// set; 1..=100000.
    #[serde(default, deserialize_with = "strict::opt_int")]
    pub burst: Option<u32>,
    /// Free-form region label (e.g. `"eu-west"`) for logs and metrics. Default absent;
    /// 1..=64 characters, no control characters.
    #[serde(default)]
    pub region: Option<String>,
    /// `false` keeps the entry in the file but unused. Default true.
    #[serde(default = "default_true", deserialize_with = "strict::boolean")]
    pub enabled: bool,
}

impl ExitSettings {
    /// An enabled exit with defaults for everything but its name and address.
    pub fn new(name: impl Into<String>, source_ip: IpAddr) -> Self {
        Self {
            name: name.into(),
            source_ip,
            proxy: None,
            max_concurrent: default_max_concurrent(),
            rate: None,
            burst: None,
            region: None,
            enabled: true,
        }
    }

    /// An enabled exit sending through `proxy`, from the kernel's choice of source address.
    pub fn via(name: impl Into<String>, proxy: &crate::proxy::ProxyUrl) -> Self {
        let mut exit = Self::new(name, unbound());
        exit.proxy = Some(proxy.to_url());
        exit
    }

    /// The proxy, parsed; `None` for a direct exit. `Err` only for settings that were not
    /// validated (`Settings::validate` refuses a bad proxy URL, naming `exits[i].proxy`).
    pub fn proxy_url(&self) -> Option<Result<crate::proxy::ProxyUrl, crate::proxy::ProxyUrlError>> {
        self.proxy.as_deref().map(str::parse)
    }

    /// Whether connections leave from an address the kernel picks (no `source_ip` given).
    pub fn unbound(&self) -> bool {
        self.source_ip.is_unspecified()
    }

    /// Where the exit sends from, for people: `127.0.0.2`, `socks5://u:***@10.0.0.5:1080`,
    /// `socks5://… from 127.0.0.2`, or `default route`. Never shows a proxy password.
    pub fn describe(&self) -> String {
        let proxy = self.proxy_url().map(|p| match p {
            Ok(p) => p.to_string(),
            Err(_) => crate::redact::mask_url(self.proxy.as_deref().unwrap_or_default()),
        });
        match (proxy, self.unbound()) {
            (None, true) => "default route".to_owned(),
            (None, false) => self.source_ip.to_string(),
            (Some(p), true) => p,
            (Some(p), false) => format!("{p} from {}", self.source_ip),
        }
    }

    /// The per-exit token bucket quota, if `rate` is set (burst defaults to 1).
    pub fn quota(&self) -> Option<Quota> {
        self.rate
            .map(|rps| Quota::new(rps, self.burst.unwrap_or(1)))
    }
}

/// `0.0.0.0`: a source address that is not bound, so the kernel picks one.
fn unbound() -> IpAddr {
    IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
}

fn default_max_concurrent() -> u32 {
    100
}

fn default_true() -> bool {
    true
}
