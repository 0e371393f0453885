//! Many hosts at once: a [`BroadSite`] serves N hosts, one listener per loopback address
//! (127.0.1.1, 127.0.1.2, …), each with its own limit shape and its own counters.
//!
//! Why: a crawler's everyday job is many small sites at once, and what a host costs to learn
//! is paid per host. Claims about a broad crawl ("≤ 3 throttles per host", "no URL lost",
//! "memory per host") are about what *each host* saw, so each host here is a separate
//! server with its own token bucket, latency noise, `Retry-After` and
//! [`SiteStats`] (per client IP included), and a test or bench asserts at the server.
//!
//! Hosts are described by [`HostClass`]es (e.g. 120 hosts at 5 req/s and 30 at 1 req/s);
//! the hosts of all classes are numbered in class order and host `i` listens on
//! [`host_ip`]`(i)`: 127.0.1.1 … 127.0.1.254, then 127.0.2.1 … and so on (`.0` and `.255`
//! are skipped, and 127.0.0.x stays free for a crawler's exits). Each host's rate is fixed,
//! drawn from a seeded range or given per host ([`Rps`]); its latency factors come from its
//! own seeded stream: the same [`BroadConfig::seed`] gives the same rates, and each host the
//! same factors in the order its requests arrive.
//!
//! Each host is the main listener of a [`TestSite`](crate::TestSite) (same limiter, latency,
//! answers and counters), without the fault listener and without the request log: one
//! socket per host, plus one per open connection. All hosts are served
//! by [`BroadConfig::threads`] threads (hosts spread over them round-robin), each with its
//! own actix `System`, so a caller in any runtime can use the site.
//!
//! ```no_run
//! use std::time::Duration;
//! use exitcrawl_testsite::{BroadConfig, BroadSite, HostClass, RetryAfter, Rps};
//!
//! let small = |name: &str, hosts, rps| HostClass {
//!     name: name.into(),
//!     hosts,
//!     rps: Rps::Fixed(rps),
//!     burst: 2,
//!     latency: Duration::from_millis(40),
//!     noise: 0.5,
//!     retry_after: RetryAfter::Fixed(1),
//!     ..HostClass::default()
//! };
//! let site = BroadSite::start(BroadConfig {
//!     classes: vec![small("5/s", 120, 5.0), small("1/s", 30, 1.0)],
//!     seed: 7,
//!     ..BroadConfig::default()
//! });
//! let urls: Vec<String> = site.hosts().iter().map(|h| h.url("/p/0")).collect();
//! // … crawl `urls` …
//! let refused: u64 = site.stats().iter().map(|s| s.limited).sum();
//! # let _ = (urls, refused);
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::bucket::Rate;
use crate::clock::SiteClock;
use crate::latency::SplitMix64;
use crate::limit::{Limit, RetryAfter};
use crate::server::{self, Shared};
use crate::stats::SiteStats;
use crate::SiteConfig;

/// Hosts per third octet: last octets 1 … 254.
const PER_OCTET: usize = 254;

/// The most hosts a [`BroadSite`] can serve: 127.0.1.1 … 127.0.255.254.
pub const MAX_HOSTS: usize = 255 * PER_OCTET;

/// The lowest rate a host can have, in requests per second (one request per 1000 s).
pub const MIN_RPS: f64 = 0.001;

/// The address of host `index` (0-based, over all classes in order): 127.0.1.1 for host 0,
/// 127.0.1.254 for host 253, 127.0.2.1 for host 254, … Panics past [`MAX_HOSTS`].
pub fn host_ip(index: usize) -> Ipv4Addr {
    assert!(
        index < MAX_HOSTS,
        "broad site: host {index} is past the last address (at most {MAX_HOSTS} hosts)"
    );
    let third = 1 + index / PER_OCTET;
    let fourth = 1 + index % PER_OCTET;
    // Both fit a u8: third ≤ 255, fourth ≤ 254.
    Ipv4Addr::new(127, 0, third as u8, fourth as u8)
}

/// A host class's rate, in requests per second.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Rps {
    /// No limit: every request is served.
    #[default]
    Unlimited,
    /// Every host of the class at this rate.
    Fixed(f64),
    /// Each host's rate drawn uniformly from `[lo, hi]` by the site's seeded stream (in host
    /// order), so the same [`BroadConfig::seed`] gives the same rates.
    Uniform {
        /// Lowest rate.
        lo: f64,
        /// Highest rate.
        hi: f64,
    },
    /// One rate per host, in order; its length must be the class's `hosts`.
    PerHost(Vec<f64>),
}

/// Which clients a host's token bucket counts together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitKey {
    /// One bucket for the host, shared by every client ([`Limit::Global`]): several exits
    /// share one budget.
    #[default]
    PerHost,
    /// One bucket per client IP ([`Limit::PerPeer`]): each exit has its own budget.
    PerClient,
}

/// A group of hosts with the same shape. Build it as `HostClass { hosts: …, rps: …,
/// ..HostClass::default() }`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostClass {
    /// A name for reports (e.g. `"5/s"`).
    pub name: String,
    /// How many hosts of this shape.
    pub hosts: usize,
    /// Each host's rate (≥ [`MIN_RPS`], finite).
    pub rps: Rps,
    /// Bucket depth: requests admitted back to back (≥ 1). 1 is nginx `limit_req` without
    /// `burst=`.
    pub burst: u64,
    /// Per host or per client IP.
    pub key: LimitKey,
    /// The median answer delay (refusals included).
    pub latency: Duration,
    /// Spread of each answer's delay: `latency × (1 + noise · u)`, `u` uniform in [-1, 1);
    /// in [0, [`MAX_NOISE`](crate::MAX_NOISE)].
    pub noise: f64,
    /// `Retry-After` on a refusal: [`RetryAfter::Fixed`] (many sites send one value on
    /// every 429), [`RetryAfter::Omit`] or [`RetryAfter::Computed`].
    pub retry_after: RetryAfter,
    /// The status of a refusal (429; nginx says 503).
    pub reject_status: u16,
    /// Size of a 200's body in bytes.
    pub body_size: usize,
}

impl Default for HostClass {
    /// One unlimited host, burst 1, one bucket per host, no latency, `Retry-After`
    /// computed, refusals 429, 1 KiB bodies (the [`SiteConfig`] defaults).
    fn default() -> Self {
        let site = SiteConfig::default();
        Self {
            name: "hosts".to_owned(),
            hosts: 1,
            rps: Rps::Unlimited,
            burst: 1,
            key: LimitKey::PerHost,
            latency: site.latency,
            noise: site.latency_noise,
            retry_after: site.retry_after,
            reject_status: site.reject_status,
            body_size: site.body_size,
        }
    }
}

/// What a [`BroadSite`] serves.
#[derive(Debug, Clone, PartialEq)]
pub struct BroadConfig {
    /// The host classes; their hosts are numbered in this order.
    pub classes: Vec<HostClass>,
    /// Seeds the rates drawn from [`Rps::Uniform`] and every host's latency factors.
    pub seed: u64,
    /// Threads serving the hosts (≥ 1; default 1).
    pub threads: usize,
    /// The number of the first host (default 0): the hosts are numbered, addressed
    /// ([`host_ip`]) and seeded from here on, so several sites — e.g. in several processes,
    /// to spread their listeners over several open-file limits — can serve disjoint parts of
    /// one address range.
    pub first_host: usize,
}

impl Default for BroadConfig {
    /// No classes, seed 1, one thread, hosts from 127.0.1.1 on.
    fn default() -> Self {
        Self {
            classes: Vec::new(),
            seed: 1,
            threads: 1,
            first_host: 0,
        }
    }
}

/// One host of a [`BroadSite`].
#[derive(Debug, Clone)]
pub struct BroadHost {
    /// Its number over all classes, from [`BroadConfig::first_host`] on (which decides its
    /// address). `hosts()[k]` and `stats()[k]` are the same host.
    pub index: usize,
    /// The index of its class in [`BroadConfig::classes`].
    pub class: usize,
    /// Where it listens ([`host_ip`]`(index)`, a port of its own).
    pub addr: SocketAddr,
    /// `http://127.0.x.y:port`, no trailing slash.
    pub base_url: String,
    /// Its rate in requests per second (`None`: unlimited).
    pub rps: Option<f64>,
    /// The [`TestSite`](crate::TestSite) configuration it is served with.
    pub config: SiteConfig,
}

impl BroadHost {
    /// `base_url` + `path` (a leading `/` is added if missing).
    pub fn url(&self, path: &str) -> String {
        if path.starts_with('/') {
            format!("{}{path}", self.base_url)
        } else {
            format!("{}/{path}", self.base_url)
        }
    }
}

/// A running multi-host site. Stops on [`BroadSite::stop`] or drop.
pub struct BroadSite {
    hosts: Vec<BroadHost>,
    shared: Vec<Arc<Shared>>,
    systems: Vec<actix_rt::System>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for BroadSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BroadSite")
            .field("hosts", &self.hosts.len())
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl BroadSite {
    /// Bind every host's listener and serve them. Panics (this is a test fixture: fail
    /// loudly, on the caller's thread) on an invalid config — naming the class, the field,
    /// the value and what is allowed — or when an address cannot be bound (e.g. the open
    /// file limit: one descriptor per host, plus one per connection).
    pub fn start(cfg: BroadConfig) -> BroadSite {
        validate(&cfg);
        let mut rates = SplitMix64::new(cfg.seed);
        let mut hosts = Vec::new();
        let mut shared = Vec::new();
        let mut listeners: Vec<Vec<(std::net::TcpListener, Arc<Shared>)>> =
            (0..cfg.threads).map(|_| Vec::new()).collect();
        for (class_index, class) in cfg.classes.iter().enumerate() {
            for k in 0..class.hosts {
                let local = hosts.len();
                let index = cfg.first_host + local;
                let rps = host_rps(&class.rps, k, &mut rates);
                let config = site_config(class, rps, latency_seed(cfg.seed, index));
                let ip = host_ip(index);
                let listener = std::net::TcpListener::bind(SocketAddr::from((ip, 0)))
                    .unwrap_or_else(|e| panic!("broad site: bind {ip}:0 (host {index}): {e}"));
                listener
                    .set_nonblocking(true)
                    .expect("broad site: set_nonblocking");
                let addr = listener.local_addr().expect("broad site: local_addr");
                // No fault listener: port 0 is never used.
                let state = Arc::new(Shared::new(config.clone(), 0, SiteClock::Real));
                listeners[local % cfg.threads].push((listener, Arc::clone(&state)));
                shared.push(state);
                hosts.push(BroadHost {
                    index,
                    class: class_index,
                    addr,
                    base_url: format!("http://{addr}"),
                    rps,
                    config,
                });
            }
        }
        let mut systems = Vec::new();
        let mut threads = Vec::new();
        for (t, part) in listeners.into_iter().enumerate() {
            let (system, thread) = serve_on_thread(t, part);
            systems.push(system);
            threads.push(thread);
        }
        BroadSite {
            hosts,
            shared,
            systems,
            threads,
        }
    }

    /// Every host, in order (with [`BroadConfig::first_host`] 0, host `i` is `hosts()[i]`).
    pub fn hosts(&self) -> &[BroadHost] {
        &self.hosts
    }

    /// A snapshot of every host's counters, in the order of [`BroadSite::hosts`]: requests,
    /// 200s, refusals (`limited`), per client IP in [`SiteStats::peers`].
    pub fn stats(&self) -> Vec<SiteStats> {
        self.shared.iter().map(|s| s.lock().stats.clone()).collect()
    }

    /// A snapshot of the counters of `hosts()[k]`. Panics if there is no such host.
    pub fn host_stats(&self, k: usize) -> SiteStats {
        self.shared[k].lock().stats.clone()
    }

    /// Stop serving: every thread is joined and open connections are dropped. Counters
    /// stay readable. Idempotent.
    pub fn stop(&mut self) {
        for system in self.systems.drain(..) {
            system.stop();
        }
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::warn!("broad site thread panicked");
            }
        }
    }
}

impl Drop for BroadSite {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Start thread `t` with its own System serving `part`'s listeners.
fn serve_on_thread(
    t: usize,
    part: Vec<(std::net::TcpListener, Arc<Shared>)>,
) -> (actix_rt::System, JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(format!("broadsite-{t}"))
        .spawn(move || {
            let system = actix_rt::System::new();
            system.block_on(async move {
                for (listener, shared) in part {
                    let listener =
                        TcpListener::from_std(listener).expect("broad site: adopt listener");
                    actix_rt::spawn(server::serve(listener, shared));
                }
            });
            // The receiver only goes away if start() itself panicked.
            let _ = tx.send(actix_rt::System::current());
            if let Err(e) = system.run() {
                tracing::warn!(error = %e, "broad site system ended with an error");
            }
        })
        .expect("broad site: spawn thread");
    let system = rx.recv().expect("broad site thread failed to start");
    (system, thread)
}

/// Host `k` of a class's rate (`None`: unlimited). [`Rps::Uniform`] draws one value from
/// `rates` per host, so the draws depend on the seed and the host order only.
fn host_rps(rps: &Rps, k: usize, rates: &mut SplitMix64) -> Option<f64> {
    match rps {
        Rps::Unlimited => None,
        Rps::Fixed(r) => Some(*r),
        Rps::Uniform { lo, hi } => Some(lo + (hi - lo) * rates.next_unit()),
        Rps::PerHost(v) => Some(v[k]),
    }
}

/// Each host's own latency stream: the site's seed mixed with the host's number.
fn latency_seed(seed: u64, index: usize) -> u64 {
    SplitMix64::new(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).next_u64()
}

/// `rps` as the site's exact integer [`Rate`]: requests per 1000 s, so rates down to
/// [`MIN_RPS`] and fractions like 2.5/s are exact to a thousandth.
fn rate_of(rps: f64, burst: u64) -> Rate {
    let per_kilosecond = (rps * 1000.0).round().max(1.0) as u64;
    Rate::new(per_kilosecond, Duration::from_secs(1000), burst)
}

fn site_config(class: &HostClass, rps: Option<f64>, seed: u64) -> SiteConfig {
    let limit = match (rps, class.key) {
        (None, _) => Limit::None,
        (Some(r), LimitKey::PerHost) => Limit::Global(rate_of(r, class.burst)),
        (Some(r), LimitKey::PerClient) => Limit::PerPeer(rate_of(r, class.burst)),
    };
    SiteConfig {
        limit,
        retry_after: class.retry_after,
        reject_status: class.reject_status,
        latency: class.latency,
        latency_noise: class.noise,
        seed,
        body_size: class.body_size,
        log_requests: false,
        ..SiteConfig::default()
    }
}

/// Panic with the class, the field, the value and what is allowed.
fn validate(cfg: &BroadConfig) {
    assert!(
        cfg.threads >= 1,
        "broad site: threads = {} must be ≥ 1",
        cfg.threads
    );
    let total: usize = cfg.classes.iter().map(|c| c.hosts).sum();
    assert!(
        cfg.first_host.saturating_add(total) <= MAX_HOSTS,
        "broad site: hosts {} … {} (first_host {} + {total} hosts); at most {MAX_HOSTS} addresses exist",
        cfg.first_host,
        cfg.first_host.saturating_add(total),
        cfg.first_host
    );
    for (i, c) in cfg.classes.iter().enumerate() {
        let name = &c.name;
        let rate_ok = |r: f64| r.is_finite() && r >= MIN_RPS;
        match &c.rps {
            Rps::Unlimited => {}
            Rps::Fixed(r) => assert!(
                rate_ok(*r),
                "broad site: class {i} ({name}): rps {r} must be finite and ≥ {MIN_RPS}"
            ),
            Rps::Uniform { lo, hi } => assert!(
                rate_ok(*lo) && rate_ok(*hi) && lo <= hi,
                "broad site: class {i} ({name}): rps range [{lo}, {hi}] needs finite ends, \
                 ≥ {MIN_RPS}, lo ≤ hi"
            ),
            Rps::PerHost(v) => {
                assert!(
                    v.len() == c.hosts,
                    "broad site: class {i} ({name}): {} per-host rates for {} hosts; one per host is needed",
                    v.len(),
                    c.hosts
                );
                if let Some(r) = v.iter().find(|r| !rate_ok(**r)) {
                    panic!(
                        "broad site: class {i} ({name}): rps {r} must be finite and ≥ {MIN_RPS}"
                    );
                }
            }
        }
        assert!(
            c.burst >= 1,
            "broad site: class {i} ({name}): burst {} must be ≥ 1",
            c.burst
        );
        // The same checks a TestSite makes (noise range, a valid status).
        site_config(c, None, 0).validate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_skip_zero_and_broadcast_and_continue_on_the_next_octet() {
        assert_eq!(host_ip(0), Ipv4Addr::new(127, 0, 1, 1));
        assert_eq!(host_ip(253), Ipv4Addr::new(127, 0, 1, 254));
        assert_eq!(host_ip(254), Ipv4Addr::new(127, 0, 2, 1));
        assert_eq!(host_ip(9_999), Ipv4Addr::new(127, 0, 40, 94));
        assert_eq!(host_ip(MAX_HOSTS - 1), Ipv4Addr::new(127, 0, 255, 254));
    }

    #[test]
    #[should_panic(expected = "past the last address")]
    fn no_address_past_the_last() {
        host_ip(MAX_HOSTS);
    }

    #[test]
    fn rates_are_exact_per_kilosecond() {
        assert_eq!(
            rate_of(5.0, 2),
            Rate::new(5000, Duration::from_secs(1000), 2)
        );
        assert_eq!(rate_of(0.001, 1).tokens, 1);
        assert_eq!(rate_of(2.5, 1).tokens, 2500);
    }

    #[test]
    fn uniform_rates_follow_the_seed_and_stay_in_range() {
        let draw = |seed| {
            let mut r = SplitMix64::new(seed);
            let rps = Rps::Uniform { lo: 0.5, hi: 10.0 };
            (0..50)
                .map(|k| host_rps(&rps, k, &mut r).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert!(draw(7).iter().all(|r| (0.5..=10.0).contains(r)));
    }

    #[test]
    #[should_panic(expected = "class 1 (slow): rps 0 must be finite")]
    fn a_zero_rate_is_refused_naming_the_class() {
        validate(&BroadConfig {
            classes: vec![
                HostClass::default(),
                HostClass {
                    name: "slow".into(),
                    rps: Rps::Fixed(0.0),
                    ..HostClass::default()
                },
            ],
            ..BroadConfig::default()
        });
    }

    #[test]
    #[should_panic(expected = "2 per-host rates for 3 hosts")]
    fn per_host_rates_must_match_the_host_count() {
        validate(&BroadConfig {
            classes: vec![HostClass {
                hosts: 3,
                rps: Rps::PerHost(vec![1.0, 2.0]),
                ..HostClass::default()
            }],
            ..BroadConfig::default()
        });
    }
}
