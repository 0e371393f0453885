//! The site shapes bench_limit crawls: each a `TestSite` configuration, its capacity as
//! the four exits see it, how many URLs and how long a warm-up.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use exitcrawl_testsite::{Fault, FaultMix, HoldRetryAfter, Limit, Rate, RetryAfter, SiteConfig};

/// One site shape.
pub struct Shape {
    pub name: &'static str,
    pub what: &'static str,
    pub site: SiteConfig,
    /// Requests/s the site serves to the four exits (`None`: unlimited).
    pub capacity: Option<f64>,
    pub urls: usize,
    pub warmup: Duration,
    /// Crawl through the fault listener with a new user's settings.
    pub faults: bool,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Every shape, in the order they run.
pub fn shapes() -> Vec<Shape> {
    let site = SiteConfig {
        log_requests: true,
        retry_after: RetryAfter::Omit,
        fast_rejections: true,
        ..SiteConfig::default()
    };
    let mut all = bucket_shapes(&site);
    all.extend(per_ip_shapes(&site));
    all.extend(burst1_and_slow_shapes(&site));
    all.extend(window_and_ban_shapes(&site));
    all.extend(queue_and_fault_shapes(&site));
    all
}

/// Token buckets with a burst for the host (target: goodput ≥ 0.95, ≤ 1 % refused).
fn bucket_shapes(site: &SiteConfig) -> Vec<Shape> {
    let retry_after_1 = SiteConfig {
        limit: Limit::Global(Rate::per_second(300, 30)),
        retry_after: RetryAfter::Fixed(1),
        latency: ms(20),
        ..site.clone()
    };
    vec![
        Shape {
            name: "host-300-noisy",
            what: "one bucket for the host, 300/s burst 30; pages 50 ms ± 60 %, 2 % 5× slower",
            site: SiteConfig {
                limit: Limit::Global(Rate::per_second(300, 30)),
                latency: ms(50),
                latency_noise: 0.6,
                tail: Some((0.02, 5.0)),
                ..site.clone()
            },
            capacity: Some(300.0),
            urls: 9000,
            warmup: Duration::from_secs(5),
            faults: false,
        },
        Shape {
            name: "host-300-noise90",
            what: "one bucket for the host, 300/s burst 30; pages 40 ms ± 90 %, 2 % 10× slower",
            site: SiteConfig {
                limit: Limit::Global(Rate::per_second(300, 30)),
                latency: ms(40),
                latency_noise: 0.9,
                tail: Some((0.02, 10.0)),
                ..site.clone()
            },
            capacity: Some(300.0),
            urls: 9000,
            warmup: Duration::from_secs(5),
            faults: false,
        },
        Shape {
            name: "host-300-retry-after-1",
            what: "one bucket for the host, 300/s burst 30, `Retry-After: 1` on every 429; pages 20 ms",
            site: retry_after_1.clone(),
            capacity: Some(300.0),
            urls: 9000,
            warmup: Duration::from_secs(5),
            faults: false,
        },
        Shape {
            name: "host-300-pause-all-1",
            what: "host-300-retry-after-1, but each 429's second holds every client: the site refuses all requests until it ends",
            site: SiteConfig {
                hold_retry_after: HoldRetryAfter::Site,
                ..retry_after_1
            },
            capacity: Some(300.0),
            urls: 9000,
            warmup: Duration::from_secs(5),
            faults: false,
        },
        Shape {
            name: "host-steps-300-100-300",
            what: "one bucket for the host, 300/s burst 30, 100/s from 15 s, 300/s again from 35 s; pages 20 ms",
            site: SiteConfig {
                limit: Limit::GlobalSteps {
                    rates: [
                        Rate::per_second(300, 30),
                        Rate::per_second(100, 30),
                        Rate::per_second(300, 30),
                    ],
                    at: [Duration::from_secs(15), Duration::from_secs(35)],
                },
                latency: ms(20),
                ..site.clone()
            },
            capacity: Some(300.0),
            urls: 16_000,
            warmup: Duration::from_secs(5),
            faults: false,
        },
    ]
}

/// Token buckets with a burst per source IP, equal or one exit's lower (the same
/// target).
fn per_ip_shapes(site: &SiteConfig) -> Vec<Shape> {
    vec![
        Shape {
            name: "per-ip-60x4",
            what: "a bucket per source IP, 60/s burst 6 (240/s for four exits); pages 20 ms",
            site: SiteConfig {
                limit: Limit::PerPeer(Rate::per_second(60, 6)),
                latency: ms(20),
                ..site.clone()
            },
            capacity: Some(240.0),
            urls: 7200,
            warmup: Duration::from_secs(5),
            faults: false,
        },
        Shape {
            name: "per-ip-unequal",
            what: "a bucket per source IP, 60/s burst 6, but 127.0.0.4 only 15/s (195/s for four exits); pages 20 ms",
            site: SiteConfig {
                limit: Limit::PerPeerExcept {
                    rate: Rate::per_second(60, 6),
                    peer: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4)),
                    peer_rate: Rate::per_second(15, 2),
                },
                latency: ms(20),
                ..site.clone()
            },
            capacity: Some(195.0),
            urls: 6000,
            warmup: Duration::from_secs(10),
            faults: false,
        },
    ]
}

/// Buckets without a burst and slow sites (target: goodput ≥ 0.85, ≤ 1 % refused).
fn burst1_and_slow_shapes(site: &SiteConfig) -> Vec<Shape> {
    vec![
        Shape {
            name: "burst1-host-100",
            what: "nginx limit_req 100 r/s without burst= for the host, 503 without Retry-After; pages 20 ms ± 30 %",
            site: SiteConfig {
                limit: Limit::Global(Rate::per_second(100, 1)),
                reject_status: 503,
                latency: ms(20),
                latency_noise: 0.3,
                ..site.clone()
            },
            capacity: Some(100.0),
            urls: 6000,
            warmup: Duration::from_secs(15),
            faults: false,
        },
        Shape {
            name: "burst1-per-ip-25x4",
            what: "nginx limit_req 25 r/s per source IP without burst= (100/s for four exits), 503",
            site: SiteConfig {
                limit: Limit::PerPeer(Rate::per_second(25, 1)),
                reject_status: 503,
                latency: ms(20),
                latency_noise: 0.3,
                ..site.clone()
            },
            capacity: Some(100.0),
            urls: 6000,
            warmup: Duration::from_secs(15),
            faults: false,
        },
        Shape {
            name: "held-per-ip-10x4",
            what: "nginx limit_req 10 r/s per source IP with burst=10 without nodelay (40/s for four exits): the excess waits up to a second, 503 past it; pages 50 ms ± 50 %",
            site: SiteConfig {
                limit: Limit::Delayed {
                    per_peer: true,
                    rate: Rate::per_second(10, 10),
                },
                reject_status: 503,
                retry_after: RetryAfter::Omit,
                latency: ms(50),
                latency_noise: 0.5,
                ..site.clone()
            },
            capacity: Some(40.0),
            urls: 2000,
            warmup: Duration::from_secs(10),
            faults: false,
        },
        Shape {
            name: "slow-2-per-ip",
            what: "2 req/s per source IP, burst 1 (8/s for four exits); pages 100 ms",
            site: SiteConfig {
                limit: Limit::PerPeer(Rate::per_second(2, 1)),
                latency: ms(100),
                ..site.clone()
            },
            capacity: Some(8.0),
            urls: 600,
            warmup: Duration::from_secs(20),
            faults: false,
        },
    ]
}

/// A quota window (target: goodput ≥ 0.90) and a WAF ban rule (target: no ban after the
/// warm-up).
fn window_and_ban_shapes(site: &SiteConfig) -> Vec<Shape> {
    vec![
        Shape {
            name: "window-600-per-10s",
            what: "a quota of 600 per 10 s for the host (60/s), 429 with Retry-After and X-RateLimit-* headers",
            site: SiteConfig {
                limit: Limit::Window {
                    per_peer: false,
                    limit: 600,
                    window: Duration::from_secs(10),
                    headers: true,
                },
                retry_after: RetryAfter::Computed,
                latency: ms(20),
                ..site.clone()
            },
            capacity: Some(60.0),
            urls: 3000,
            warmup: Duration::from_secs(10),
            faults: false,
        },
        Shape {
            name: "ban-per-ip",
            what: "a WAF rule per source IP: over 100 requests in 5 s bans that IP for 10 s with 403",
            site: SiteConfig {
                limit: Limit::ban(true, 100, Duration::from_secs(5), Duration::from_secs(10)),
                latency: ms(20),
                ..site.clone()
            },
            capacity: Some(80.0),
            urls: 4000,
            warmup: Duration::from_secs(60),
            faults: false,
        },
    ]
}

/// A site that queues instead of refusing, and one without a limit but with faults.
fn queue_and_fault_shapes(site: &SiteConfig) -> Vec<Shape> {
    vec![
        Shape {
            name: "queue-8x40ms",
            what: "an app server that queues instead of refusing: 8 workers × 40 ms (200/s)",
            site: SiteConfig {
                limit: Limit::Workers {
                    workers: 8,
                    service: ms(40),
                    max_wait: None,
                },
                ..site.clone()
            },
            capacity: Some(200.0),
            urls: 5000,
            warmup: Duration::from_secs(5),
            faults: false,
        },
        fault_shape(
            "faults",
            "a flaky site: no limit; 5 % of requests dropped, 2 % hang, 3 % answer 500, each request's fault drawn afresh; a new user's defaults (timeout 10 s, 3 retries)",
            true,
            site,
        ),
        fault_shape(
            "broken-pages",
            "no limit; 5 % of pages drop the connection, 2 % hang, 3 % answer 500, every time (their URLs end failed after 3 retries); a new user's defaults",
            false,
            site,
        ),
    ]
}

/// An unlimited site with faults, drawn per request (flaky) or per page (broken pages).
fn fault_shape(
    name: &'static str,
    what: &'static str,
    per_request: bool,
    site: &SiteConfig,
) -> Shape {
    Shape {
        name,
        what,
        site: SiteConfig {
            faults: Some(FaultMix {
                seed: 7,
                faults: vec![
                    (Fault::Close, 50),
                    (Fault::Hang, 20),
                    (Fault::Status(500), 30),
                ],
                per_request,
            }),
            ..site.clone()
        },
        capacity: None,
        urls: 3000,
        warmup: Duration::ZERO,
        faults: true,
    }
}
