//! The test site seen from real clients bound to distinct loopback addresses.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use exitcrawl_testsite::{FailMode, Limit, Rate, RetryAfter, SiteConfig, TestSite};

const PEER_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const PEER_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

fn client(ip: IpAddr) -> awc::Client {
    awc::Client::builder()
        .local_address(ip)
        .disable_redirects()
        .timeout(Duration::from_secs(5))
        .finish()
}

async fn get(c: &awc::Client, url: &str) -> (u16, Option<String>, usize) {
    let mut res = c.get(url).send().await.expect("request");
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = res.body().await.expect("body");
    (res.status().as_u16(), retry, body.len())
}

/// A window far longer than any test, so no token refills mid-test.
const SLOW: Duration = Duration::from_secs(60);

#[actix_rt::test]
async fn per_peer_limit_is_enforced_and_peers_are_told_apart() {
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::new(1, SLOW, 3)),
        body_size: 100,
        ..SiteConfig::default()
    });
    let a = client(PEER_A);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(get(&a, &site.url("/page")).await);
    }
    let codes: Vec<u16> = statuses.iter().map(|s| s.0).collect();
    assert_eq!(codes, [200, 200, 200, 429, 429]);
    assert_eq!(statuses[0].2, 100, "body size");
    // Computed Retry-After: a token arrives in (just under) 60 s, rounded up.
    let retry: u64 = statuses[3].1.as_deref().unwrap().parse().unwrap();
    assert!((59..=60).contains(&retry), "retry-after {retry}");

    // The other peer has its own bucket.
    let b = client(PEER_B);
    for _ in 0..3 {
        assert_eq!(get(&b, &site.url("/other")).await.0, 200);
    }

    let stats = site.stats();
    let pa = stats.peer(PEER_A);
    assert_eq!((pa.requests, pa.ok, pa.limited), (5, 3, 2));
    let pb = stats.peer(PEER_B);
    assert_eq!((pb.requests, pb.ok, pb.limited), (3, 3, 0));
    assert_eq!(stats.requests, 8);
    assert_eq!(stats.limited, 2);
    assert_eq!(stats.in_flight, 0);
    // awc reuses its keep-alive connection.
    assert_eq!(pa.connections, 1);

    let log = site.requests();
    assert_eq!(log.len(), 8);
    assert!(log[..5]
        .iter()
        .all(|r| r.peer == PEER_A && r.path == "/page"));
    assert_eq!(log[3].status, 429);
    assert!(log[5..].iter().all(|r| r.peer == PEER_B && r.status == 200));
    assert!(log.windows(2).all(|w| w[0].arrived <= w[1].arrived));
}

#[actix_rt::test]
async fn global_limit_is_shared_and_retry_after_can_be_omitted() {
    let site = TestSite::start(SiteConfig {
        limit: Limit::Global(Rate::new(1, SLOW, 2)),
        retry_after: RetryAfter::Omit,
        ..SiteConfig::default()
    });
    let (a, b) = (client(PEER_A), client(PEER_B));
    assert_eq!(get(&a, &site.url("/")).await.0, 200);
    assert_eq!(get(&a, &site.url("/")).await.0, 200);
    let (status, retry, _) = get(&b, &site.url("/")).await;
    assert_eq!((status, retry), (429, None));
    // /health is never rate limited.
    assert_eq!(get(&b, &site.url("/health")).await.0, 200);
}

#[actix_rt::test]
async fn fixed_retry_after() {
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::new(1, SLOW, 1)),
        retry_after: RetryAfter::Fixed(7),
        ..SiteConfig::default()
    });
    let a = client(PEER_A);
    assert_eq!(get(&a, &site.url("/")).await.0, 200);
    assert_eq!(
        get(&a, &site.url("/")).await,
        (429, Some("7".to_owned()), "too many requests".len())
    );
}

#[actix_rt::test]
async fn rate_refills_over_real_time() {
    // 1 token per 200 ms, burst 1: after 250 ms exactly one more token is there (burst caps it).
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::new(1, Duration::from_millis(200), 1)),
        ..SiteConfig::default()
    });
    let a = client(PEER_A);
    assert_eq!(get(&a, &site.url("/")).await.0, 200);
    actix_rt::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(get(&a, &site.url("/")).await.0, 200);
    // The next ones come a few ms later: refused unless the machine stalls for 200 ms.
    let codes: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(get(&a, &site.url("/")).await.0);
        }
        v
    };
    assert!(codes.contains(&429), "{codes:?}");
}

#[actix_rt::test]
async fn failing_peer_gets_503_then_recovers_and_health_switches() {
    let site = TestSite::start(SiteConfig::default());
    let (a, b) = (client(PEER_A), client(PEER_B));
    site.set_fail_peer(PEER_A, true);
    assert_eq!(get(&a, &site.url("/x")).await.0, 503);
    assert_eq!(get(&a, &site.url("/health")).await.0, 503);
    assert_eq!(get(&b, &site.url("/x")).await.0, 200);
    site.set_fail_peer(PEER_A, false);
    assert_eq!(get(&a, &site.url("/x")).await.0, 200);

    site.set_health(false);
    assert_eq!(get(&a, &site.url("/health")).await.0, 500);
    assert_eq!(get(&a, &site.url("/x")).await.0, 200);
    site.set_health(true);
    assert_eq!(get(&a, &site.url("/health")).await.0, 200);

    let pa = site.stats().peer(PEER_A);
    assert_eq!((pa.requests, pa.failed, pa.ok), (6, 3, 3));
}

#[actix_rt::test]
async fn failing_peer_in_close_mode_gets_no_answer() {
    let site = TestSite::start(SiteConfig {
        fail_mode: FailMode::Close,
        ..SiteConfig::default()
    });
    let (a, b) = (client(PEER_A), client(PEER_B));
    // Open a pooled connection first: it must be closed on its next request too.
    assert_eq!(get(&a, &site.url("/")).await.0, 200);
    site.set_fail_peer(PEER_A, true);
    assert!(a.get(site.url("/")).send().await.is_err());
    // A fresh connection is closed at accept.
    assert!(client(PEER_A).get(site.url("/")).send().await.is_err());
    assert_eq!(get(&b, &site.url("/")).await.0, 200);
    site.set_fail_peer(PEER_A, false);
    assert_eq!(get(&client(PEER_A), &site.url("/")).await.0, 200);

    let pa = site.stats().peer(PEER_A);
    assert_eq!(pa.requests, 2, "closed connections never reach the handler");
    assert!(pa.closed >= 2, "{pa:?}");
}

#[actix_rt::test]
async fn latency_and_peak_in_flight_per_peer() {
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(100),
        ..SiteConfig::default()
    });
    let a = client(PEER_A);
    let b = client(PEER_B);
    let url = site.url("/slow");
    let start = std::time::Instant::now();
    let reqs = [&a, &a, &a, &a, &b].map(|c| {
        let (c, url) = (c.clone(), url.clone());
        async move { get(&c, &url).await }
    });
    let results = futures_join_all(reqs).await;
    assert!(results.iter().all(|r| r.0 == 200));
    assert!(start.elapsed() >= Duration::from_millis(100));
    let stats = site.stats();
    assert_eq!(stats.peer(PEER_A).peak_in_flight, 4);
    assert_eq!(stats.peer(PEER_B).peak_in_flight, 1);
    assert_eq!(stats.peak_in_flight, 5);
    assert_eq!(stats.in_flight, 0);
    assert_eq!(stats.peer(PEER_A).connections, 4);
}

/// Await all futures concurrently on the current (local) task set.
async fn futures_join_all<F>(futs: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + 'static,
    F::Output: 'static,
{
    let handles: Vec<_> = futs.into_iter().map(actix_rt::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

/// The site runs on its own thread: a caller with no async runtime can use it too.
/// Served on the test's own runtime, the site's clock is that runtime's: under paused time
/// its latency, its bucket's refill and its log all run in virtual time.
#[actix_rt::test]
async fn on_the_callers_runtime_the_site_follows_paused_time() {
    tokio::time::pause();
    let site = TestSite::start_on_runtime(SiteConfig {
        limit: Limit::PerPeer(Rate::new(1, Duration::from_secs(3600), 1)),
        latency: Duration::from_secs(30),
        ..SiteConfig::default()
    });
    // A 5 s client timeout would be the next timer when tokio jumps paused time past the
    // 30 s latency; ten minutes is not.
    let a = awc::Client::builder()
        .local_address(PEER_A)
        .timeout(Duration::from_secs(600))
        .finish();
    let real = std::time::Instant::now();
    let t0 = tokio::time::Instant::now().into_std();
    assert_eq!(get(&a, &site.url("/1")).await.0, 200);
    assert_eq!(get(&a, &site.url("/2")).await.0, 429);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        get(&a, &site.url("/3")).await.0,
        200,
        "refilled after the hour"
    );
    assert!(
        real.elapsed() < Duration::from_secs(20),
        "{:?}",
        real.elapsed()
    );
    let log = site.requests();
    let at: Vec<Duration> = log.iter().map(|r| r.arrived - t0).collect();
    // Timers fire on whole milliseconds: each arrival is its due time (the answers took
    // 30 s each, then the hour), up to a millisecond later per timer on the way.
    for (got, due) in at.iter().zip([0, 30, 3660]) {
        let due = Duration::from_secs(due);
        assert!(
            *got >= due && *got < due + Duration::from_millis(5),
            "{at:?}"
        );
    }
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|r| r.latency == Duration::from_secs(30)));
}

#[test]
fn usable_without_a_runtime_and_stops() {
    let mut site = TestSite::start(SiteConfig {
        body_size: 3,
        ..SiteConfig::default()
    });
    let addr = site.addr();
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(b"GET /plain HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nxxx"), "{answer}");

    site.stop();
    site.stop();
    assert!(std::net::TcpStream::connect(addr).is_err());
    assert_eq!(site.stats().requests, 1);
    assert_eq!(site.requests()[0].path, "/plain");
}

/// Tests share one site across threads and runtimes.
#[test]
fn handle_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<TestSite>();
}
