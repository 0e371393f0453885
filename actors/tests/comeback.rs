//! Exits that come back after an ejection, on paused tokio time against a real local
//! site: the wait for an exit starts again once a probing exit has carried fetches to a
//! site, but not for an exit that comes back only to fail again at once; and a fetch that
//! an exit failed locally tries that exit again once it is back, wherever the fetch was
//! when it came back (here in flight at another exit). Asserted from what the site and the
//! proxies saw and from the replies; every wait is bounded.

mod support;

use support::{eventually, exits, ip, paused_site, read_connect, timeouts_for_paused_time};

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchErrorKind};
use exitcrawl_testsite::{SiteConfig, HEALTH_PATH};
use futures_util::future::join_all;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket};

fn settings(exits: Vec<ExitSettings>) -> Settings {
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    timeouts_for_paused_time(&mut s);
    s.health.consecutive_failures = 1;
    s
}

/// Every exit is in service (`true`, probing included) or none is (`false`), within `limit`.
async fn all_in_service(h: &CrawlerHandle, up: bool, limit: Duration) -> bool {
    eventually(limit, || {
        let h = h.clone();
        async move { h.stats().await.iter().all(|s| s.healthy == up) }
    })
    .await
}

/// The only exit fails its checks and is ejected; a fetch that waits for it is sent when
/// it comes back probing, and is refused by the site (an attempt that reached it, which
/// neither recovers the exit nor counts against it). The exit stays probing for longer
/// than the bound on waiting for an exit, then its checks eject it again: a fetch handed in
/// then waits for the exit's next probe, as long as the bound allows, rather than ending
/// at once on the clock of the first outage.
#[actix_rt::test]
async fn the_wait_for_an_exit_starts_again_once_a_probing_exit_carried_fetches() {
    let site = paused_site(SiteConfig::default());
    site.set_health(false);
    let mut s = settings(exits(1, 8));
    s.health.url = Some(site.url(HEALTH_PATH));
    // A check every 40 s; a probing exit's failing checks are discounted for 41 s.
    s.health.interval_ms = 40_000;
    s.health.timeout_ms = 1_000;
    s.health.base_ejection_ms = 5_000;
    s.health.max_ejection_ms = 20_000;
    s.crawler.max_retries = 0;
    let bound = Duration::from_secs(20);
    let h = Crawler::start(s).expect("start");
    assert!(
        all_in_service(&h, false, Duration::from_secs(45)).await,
        "the first check did not eject the exit"
    );
    // A closed port on the site's address: the same address family, one wait for both.
    let refused = {
        let h = h.clone();
        actix_rt::spawn(async move { h.fetch(Fetch::get("http://127.0.0.1:9/refused")).await })
    };
    assert!(
        all_in_service(&h, true, Duration::from_secs(10)).await,
        "the exit never came back probing"
    );
    let back = tokio::time::Instant::now();
    let err = refused
        .await
        .expect("the task")
        .expect_err("nothing listens there");
    assert_eq!(err.kind, FetchErrorKind::ConnectRefused, "{err}");
    assert_eq!(err.attempts, 1, "{err}");
    assert!(
        all_in_service(&h, false, Duration::from_secs(120)).await,
        "the probing exit's checks never ejected it again"
    );
    let probing = back.elapsed();
    assert!(probing > bound, "probing for {probing:?} only");
    let t = tokio::time::Instant::now();
    let r = h
        .fetch(Fetch::get(site.url("/after")))
        .await
        .expect("the fetch waits for the exit's next probe");
    assert_eq!(r.status, 200);
    let waited = t.elapsed();
    assert!(
        waited > Duration::from_secs(5) && waited < bound,
        "answered {waited:?} after the second ejection"
    );
    let seen: Vec<_> = site
        .requests()
        .into_iter()
        .filter(|r| r.path == "/after")
        .map(|r| r.peer)
        .collect();
    assert_eq!(seen, [ip("127.0.0.2")]);
}

/// What a proxy does with a `CONNECT`.
#[derive(Clone, Copy)]
enum Connect {
    /// Answer 403 at once.
    Refuse,
    /// Hold the client this long, then answer 403.
    RefuseAfter(Duration),
    /// Open the tunnel from this address, so that the site tells it apart.
    Tunnel(IpAddr),
}

/// A CONNECT proxy on loopback that handles its n-th tunnel as `script[n]`, and every one
/// past the script as its last entry; how many tunnels it was asked for.
async fn proxy(script: Vec<Connect>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let asked = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&asked);
    actix_rt::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let n = count.fetch_add(1, Ordering::SeqCst);
            let step = script[n.min(script.len() - 1)];
            actix_rt::spawn(async move {
                let Some(target) = read_connect(&mut client).await else {
                    return;
                };
                let from = match step {
                    Connect::Refuse => None,
                    Connect::RefuseAfter(d) => {
                        tokio::time::sleep(d).await;
                        None
                    }
                    Connect::Tunnel(from) => Some(from),
                };
                let Some(from) = from else {
                    let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n").await;
                    return;
                };
                let socket = TcpSocket::new_v4().expect("socket");
                socket.bind((from, 0).into()).expect("bind");
                let Ok(mut site) = socket.connect(target).await else {
                    return;
                };
                let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
                if client.write_all(established).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut site).await;
                }
            });
        }
    });
    (addr, asked)
}

fn proxy_exit(name: &str, addr: SocketAddr) -> ExitSettings {
    let mut e = ExitSettings::new(name, ip("0.0.0.0"));
    e.proxy = Some(format!("http://{addr}"));
    e
}

/// The only exit's proxy refuses every tunnel, and the exit takes one fetch at a time:
/// its first refusal ejects it, and each time it comes back probing (twice within the
/// bound on waiting for an exit) the fetch sent to it is refused again and ends with that
/// refusal. An exit that fails at once has taken nothing anywhere: the fetches still
/// waiting end once no exit has taken a fetch for the bound, counted from when a fetch
/// first found none, not from the exit's last return.
#[actix_rt::test]
async fn an_exit_that_comes_back_only_to_fail_again_does_not_prolong_the_wait() {
    let site = paused_site(SiteConfig::default());
    let (addr, asked) = proxy(vec![Connect::Refuse]).await;
    let mut px = proxy_exit("px", addr);
    px.max_concurrent = 1;
    let mut s = settings(vec![px]);
    s.health.base_ejection_ms = 2_000;
    s.health.max_ejection_ms = 10_000;
    let bound = Duration::from_secs(10);
    let h = Crawler::start(s).expect("start");
    let err = h.fetch(Fetch::get(site.url("/first"))).await.unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::Proxy, "{err}");
    assert!(all_in_service(&h, false, Duration::from_secs(1)).await);
    let t = tokio::time::Instant::now();
    let fetches = (0..20).map(|i| {
        let (h, url) = (h.clone(), site.url(&format!("/x/{i}")));
        async move {
            let r = h.fetch(Fetch::get(url)).await;
            (r.expect_err("no tunnel is ever opened").kind, t.elapsed())
        }
    });
    let ended = tokio::time::timeout(Duration::from_secs(120), join_all(fetches))
        .await
        .expect("every fetch ended");
    for (kind, at) in &ended {
        assert!(
            matches!(kind, FetchErrorKind::Proxy | FetchErrorKind::NoHealthyExit),
            "{kind:?}"
        );
        assert!(
            *at < bound + Duration::from_secs(1),
            "{kind:?} after {at:?}"
        );
    }
    let gave_up = ended
        .iter()
        .filter(|(k, _)| *k == FetchErrorKind::NoHealthyExit)
        .count();
    assert!(gave_up > 0, "{ended:?}");
    let asked = asked.load(Ordering::SeqCst);
    assert!(asked >= 3, "the proxy was asked {asked} times");
    assert!(site.requests().is_empty(), "{:?}", site.requests());
}

/// A fetch preferring `px` is refused by px's proxy, which ejects px, and moves to `e2`,
/// whose proxy holds it for 3 s. px comes back meanwhile (its ejection is 1 s) while the
/// fetch is in flight at e2; e2's proxy then refuses it too. The fetch goes back to px,
/// which it may use again, and px's proxy tunnels it: it does not end on px's old refusal.
#[actix_rt::test]
async fn a_fetch_in_flight_elsewhere_tries_again_an_exit_that_came_back() {
    let site = paused_site(SiteConfig::default());
    let (px, px_asked) = proxy(vec![Connect::Refuse, Connect::Tunnel(ip("127.0.0.5"))]).await;
    let hold = Duration::from_secs(3);
    let (e2, e2_asked) = proxy(vec![Connect::RefuseAfter(hold)]).await;
    let mut s = settings(vec![proxy_exit("px", px), proxy_exit("e2", e2)]);
    s.health.base_ejection_ms = 1_000;
    s.health.max_ejection_ms = 10_000;
    let h = Crawler::start(s).expect("start");
    let t = tokio::time::Instant::now();
    let r = h
        .fetch(Fetch::get(site.url("/x")).prefer("px"))
        .await
        .expect("px is back in service when e2 refuses the fetch");
    assert_eq!(r.status, 200);
    assert_eq!(&*r.exit, "px");
    assert!(t.elapsed() >= hold, "answered {:?} after", t.elapsed());
    assert_eq!(px_asked.load(Ordering::SeqCst), 2);
    assert_eq!(e2_asked.load(Ordering::SeqCst), 1);
    let seen: Vec<_> = site
        .requests()
        .into_iter()
        .filter(|r| r.path == "/x")
        .map(|r| r.peer)
        .collect();
    assert_eq!(seen, [ip("127.0.0.5")]);
}
