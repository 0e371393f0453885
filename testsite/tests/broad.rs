//! A `BroadSite` over real sockets: every host on its own loopback address enforces its own
//! shape (its own bucket, per host or per client IP, its own `Retry-After`), and counts what
//! it saw, per client IP.
//!
//! Timing: each bound on what a host accepted is computed from the span the client measured
//! around its requests (the server's arrivals lie inside it), so a slow, busy machine widens
//! the bound instead of failing the test; no test sleeps.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use exitcrawl_testsite::broad::host_ip;
use exitcrawl_testsite::{BroadConfig, BroadSite, HostClass, LimitKey, RetryAfter, Rps};

const PEER_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const PEER_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

/// Class 0: hosts 0–2; class 1: hosts 3–4; class 2: hosts 5–8; class 3: hosts 9–259 (past
/// 127.0.1.254).
fn config(seed: u64) -> BroadConfig {
    BroadConfig {
        classes: vec![
            HostClass {
                name: "2/s host-wide".into(),
                hosts: 3,
                rps: Rps::Fixed(2.0),
                burst: 3,
                key: LimitKey::PerHost,
                latency: Duration::from_millis(5),
                noise: 0.5,
                retry_after: RetryAfter::Fixed(1),
                ..HostClass::default()
            },
            HostClass {
                name: "1/s per client".into(),
                hosts: 2,
                rps: Rps::Fixed(1.0),
                burst: 2,
                key: LimitKey::PerClient,
                retry_after: RetryAfter::Omit,
                ..HostClass::default()
            },
            HostClass {
                name: "drawn".into(),
                hosts: 4,
                rps: Rps::Uniform { lo: 1.0, hi: 3.0 },
                ..HostClass::default()
            },
            HostClass {
                name: "open".into(),
                hosts: 251,
                ..HostClass::default()
            },
        ],
        seed,
        threads: 1,
        first_host: 0,
    }
}

fn client(ip: IpAddr) -> awc::Client {
    awc::Client::builder()
        .local_address(ip)
        .disable_redirects()
        .timeout(Duration::from_secs(5))
        .finish()
}

/// What the client saw of `n` requests in sequence, and the span around them.
struct Seen {
    ok: u64,
    refused: u64,
    retry_after: Vec<Option<String>>,
    span: Duration,
}

async fn send(c: &awc::Client, url: &str, n: usize) -> Seen {
    let t0 = Instant::now();
    let mut seen = Seen {
        ok: 0,
        refused: 0,
        retry_after: Vec::new(),
        span: Duration::ZERO,
    };
    for i in 0..n {
        let mut res = c.get(format!("{url}/p/{i}")).send().await.expect("request");
        res.body().await.expect("body");
        match res.status().as_u16() {
            200 => seen.ok += 1,
            429 => {
                seen.refused += 1;
                seen.retry_after.push(
                    res.headers()
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap().to_owned()),
                );
            }
            s => panic!("unexpected status {s} from {url}"),
        }
    }
    seen.span = t0.elapsed();
    seen
}

/// The most a bucket of `burst` at `rps` can admit over `span`.
fn most(burst: u64, rps: f64, span: Duration) -> u64 {
    burst + (rps * span.as_secs_f64()).ceil() as u64
}

#[actix_rt::test]
async fn each_host_has_its_own_bucket_and_retry_after() {
    let site = BroadSite::start(config(1));
    let c = client(PEER_A);
    // Three host-wide 2/s hosts, one after the other: each starts with its own full bucket.
    for h in &site.hosts()[0..3] {
        let seen = send(&c, &h.base_url, 8).await;
        let stats = site.host_stats(h.index);
        assert_eq!(stats.requests, 8, "host {}", h.index);
        assert_eq!((stats.ok, stats.limited), (seen.ok, seen.refused));
        assert_eq!(stats.peer(PEER_A).requests, 8);
        assert!(stats.ok >= 3, "host {}: {} ok, burst 3", h.index, stats.ok);
        assert!(
            stats.ok <= most(3, 2.0, seen.span),
            "host {}: {} ok in {:?}",
            h.index,
            stats.ok,
            seen.span
        );
        // Past 2.5 s the bucket could have refilled for all eight.
        assert!(
            seen.refused > 0 || seen.span > Duration::from_millis(2500),
            "8 requests in {:?} at 2/s",
            seen.span
        );
        assert!(seen.retry_after.iter().all(|v| v.as_deref() == Some("1")));
    }
    // Nothing reached the other hosts.
    assert!(site.stats()[3..].iter().all(|s| s.requests == 0));
}

#[actix_rt::test]
async fn a_per_client_bucket_gives_each_ip_its_own_budget_a_per_host_one_does_not() {
    let site = BroadSite::start(config(1));
    let (a, b) = (client(PEER_A), client(PEER_B));
    let per_client = &site.hosts()[3];
    let seen_a = send(&a, &per_client.base_url, 5).await;
    let seen_b = send(&b, &per_client.base_url, 5).await;
    let stats = site.host_stats(3);
    for (ip, seen) in [(PEER_A, &seen_a), (PEER_B, &seen_b)] {
        let p = stats.peer(ip);
        assert_eq!((p.requests, p.ok, p.limited), (5, seen.ok, seen.refused));
        assert!(p.ok >= 2, "{ip}: {} ok, burst 2 per client", p.ok);
        assert!(p.ok <= most(2, 1.0, seen.span), "{ip}: {} ok", p.ok);
        // This class sends no Retry-After.
        assert!(seen.retry_after.iter().all(Option::is_none));
    }
    assert!(stats.ok >= 4);

    // Host-wide: B gets only what A left plus the refill over the whole span.
    let per_host = &site.hosts()[0];
    let t0 = Instant::now();
    send(&a, &per_host.base_url, 5).await;
    send(&b, &per_host.base_url, 5).await;
    let span_host = t0.elapsed();
    let stats = site.host_stats(0);
    assert_eq!(stats.peers.len(), 2);
    assert!(
        stats.ok <= most(3, 2.0, span_host),
        "{} ok from two clients in {span_host:?}",
        stats.ok
    );
    assert_eq!(stats.requests, 10);
}

#[actix_rt::test]
async fn hosts_continue_past_254_and_rates_follow_the_seed() {
    let site = BroadSite::start(config(7));
    let hosts = site.hosts();
    assert_eq!(hosts.len(), 260);
    assert_eq!(hosts[0].addr.ip(), IpAddr::V4(Ipv4Addr::new(127, 0, 1, 1)));
    assert_eq!(
        hosts[253].addr.ip(),
        IpAddr::V4(Ipv4Addr::new(127, 0, 1, 254))
    );
    assert_eq!(
        hosts[254].addr.ip(),
        IpAddr::V4(Ipv4Addr::new(127, 0, 2, 1))
    );
    assert_eq!(hosts[259].addr.ip(), IpAddr::V4(host_ip(259)));
    assert!(hosts
        .iter()
        .all(|h| h.base_url == format!("http://{}", h.addr)));
    let classes: Vec<usize> = hosts.iter().map(|h| h.class).collect();
    assert_eq!(&classes[..10], &[0, 0, 0, 1, 1, 2, 2, 2, 2, 3]);

    // The last host (on 127.0.2.x) answers, and only it counts the request.
    let seen = send(&client(PEER_A), &hosts[259].base_url, 3).await;
    assert_eq!(seen.ok, 3);
    let stats = site.stats();
    assert_eq!(stats[259].peer(PEER_A).ok, 3);
    assert_eq!(stats.iter().map(|s| s.requests).sum::<u64>(), 3);

    // Drawn rates: in range, the same for the same seed, others for another seed.
    let drawn =
        |s: &BroadSite| -> Vec<f64> { s.hosts()[5..9].iter().map(|h| h.rps.unwrap()).collect() };
    let rates = drawn(&site);
    assert!(rates.iter().all(|r| (1.0..=3.0).contains(r)), "{rates:?}");
    assert!(hosts[9..].iter().all(|h| h.rps.is_none()));
    assert_eq!(rates, drawn(&BroadSite::start(config(7))));
    assert_ne!(rates, drawn(&BroadSite::start(config(8))));
}

#[actix_rt::test]
async fn a_site_from_first_host_on_takes_the_addresses_after_another() {
    let cfg = |first_host| BroadConfig {
        classes: vec![HostClass {
            hosts: 3,
            ..HostClass::default()
        }],
        first_host,
        ..BroadConfig::default()
    };
    let (a, b) = (BroadSite::start(cfg(0)), BroadSite::start(cfg(3)));
    let ips = |s: &BroadSite| -> Vec<(usize, IpAddr)> {
        s.hosts().iter().map(|h| (h.index, h.addr.ip())).collect()
    };
    let ip = |i| IpAddr::V4(host_ip(i));
    assert_eq!(ips(&a), vec![(0, ip(0)), (1, ip(1)), (2, ip(2))]);
    assert_eq!(ips(&b), vec![(3, ip(3)), (4, ip(4)), (5, ip(5))]);
    // hosts()[k] and stats()[k] are the same host.
    let seen = send(&client(PEER_A), &b.hosts()[1].base_url, 2).await;
    assert_eq!(seen.ok, 2);
    let requests: Vec<u64> = b.stats().iter().map(|s| s.requests).collect();
    assert_eq!(requests, vec![0, 2, 0]);
    assert!(a.stats().iter().all(|s| s.requests == 0));
}
