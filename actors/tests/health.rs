//! Health checks against real answers, on paused tokio time: a health URL that fails
//! while the exits' real fetches are answered ejects nothing; a disabled exit is never
//! checked; with every exit down, every waiting fetch ends once the fleet has been down
//! for the bound, not one fetch per bound, that bound counted per region and address
//! family; an ejected exit is probed when its ejection ends; a fetch that reached the
//! site tries again an exit that failed it locally; a site that holds every connection of
//! an exit does not hold up its checks; a site at an address no connection can be made to
//! (multicast, broadcast) ejects no exit. Asserted from what the site saw and from the
//! replies; every wait is bounded.

mod support;

use support::{eventually, exits, ip, paused_site, read_connect, timeouts_for_paused_time};

use std::net::SocketAddr;
use std::time::Duration;

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, ExitStats, Fetch, FetchErrorKind};
use exitcrawl_testsite::{SiteConfig, TestSite, HEALTH_PATH};
use futures_util::future::join_all;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket};

/// Nothing listens on the discard port on loopback: a check there is refused at once.
const CLOSED: &str = "http://127.0.0.1:9/health";

fn settings(exits: Vec<ExitSettings>) -> Settings {
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    timeouts_for_paused_time(&mut s);
    s.health.interval_ms = 100;
    s.health.timeout_ms = 50;
    s.health.consecutive_failures = 1;
    s.health.base_ejection_ms = 60_000;
    s.health.max_ejection_ms = 120_000;
    s
}

async fn all_healthy(h: &CrawlerHandle) -> bool {
    h.stats().await.iter().all(|s| s.healthy)
}

/// `site` refuses `last`, the one exit in service, until its checks eject it: then no exit
/// is in service.
async fn every_exit_down_by(h: &CrawlerHandle, site: &TestSite, last: std::net::IpAddr) {
    site.set_fail_peer(last, true);
    assert!(
        eventually(Duration::from_secs(5), || {
            let h = h.clone();
            async move { h.stats().await.iter().all(|s| !s.healthy) }
        })
        .await
    );
}

#[actix_rt::test]
async fn a_failing_health_url_ejects_no_exit_whose_fetches_are_answered() {
    let site = paused_site(SiteConfig::default());
    let mut s = settings(exits(2, 8));
    s.health.url = Some(CLOSED.into());
    let h = Crawler::start(s).expect("start");
    // 40 check rounds, each of which fails; one failure would eject an exit that had no
    // answer within the last 150 ms. Four fetches every 50 ms keep both exits answering.
    for round in 0..80 {
        let replies =
            join_all((0..4).map(|i| h.fetch(Fetch::get(site.url(&format!("/r/{round}/{i}"))))))
                .await;
        assert!(replies
            .iter()
            .all(|r| r.as_ref().is_ok_and(|r| r.status == 200)));
        assert!(
            all_healthy(&h).await,
            "an exit was ejected in round {round}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let st = site.stats();
    for e in ["127.0.0.2", "127.0.0.3"] {
        assert!(st.peer(ip(e)).ok > 0, "{e} carried no fetch");
    }
    // With the traffic gone the failing checks count again: the exits go out, which
    // shows the checks ran all along.
    assert!(
        eventually(Duration::from_secs(2), || {
            let h = h.clone();
            async move { h.stats().await.iter().all(|s| !s.healthy) }
        })
        .await,
        "checks against a closed port never ejected an idle exit"
    );
}

#[actix_rt::test]
async fn a_disabled_exit_is_not_health_checked() {
    let site = paused_site(SiteConfig::default());
    let mut ex = exits(3, 8);
    ex[2].enabled = false;
    let mut s = settings(ex);
    s.health.url = Some(site.url(HEALTH_PATH));
    let h = Crawler::start(s).expect("start");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let checks = |peer: &str| {
        site.requests()
            .iter()
            .filter(|r| r.path == HEALTH_PATH && r.peer == ip(peer))
            .count()
    };
    assert!(
        checks("127.0.0.2") >= 10,
        "e2 checked {}",
        checks("127.0.0.2")
    );
    assert!(
        checks("127.0.0.3") >= 10,
        "e3 checked {}",
        checks("127.0.0.3")
    );
    assert_eq!(checks("127.0.0.4"), 0, "the disabled exit was checked");
    let stats = h.stats().await;
    assert!(stats.iter().any(|s| s.name == "e4" && !s.enabled));
    // Metrics: the disabled exit is not a working one, and not one the crawl is missing.
    let text = h.metrics().encode();
    let value = |prefix: &str, label: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(prefix) && l.contains(label))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    assert_eq!(
        value("exitcrawl_exit_healthy{", "exit=\"e4\""),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        value("exitcrawl_exit_healthy{", "exit=\"e2\""),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value("exitcrawl_exits_available_ratio ", ""),
        Some(1.0),
        "{text}"
    );
}

/// One exit cannot bind (it starts ejected), the other fails its check against a closed
/// port with no traffic: every exit is down. Fetches queued then, and one handed in after
/// the bound, all end by the bound, counted from when the fleet went down.
#[actix_rt::test]
async fn every_waiting_fetch_ends_once_the_fleet_has_been_down_for_the_bound() {
    tokio::time::pause();
    let ex = vec![
        ExitSettings::new("d1", ip("192.0.2.10")),
        ExitSettings::new("e2", ip("127.0.0.2")),
    ];
    let mut s = settings(ex);
    s.health.url = Some(CLOSED.into());
    s.health.base_ejection_ms = 120_000;
    s.health.max_ejection_ms = 300_000;
    let h = Crawler::start(s).expect("one exit can bind");
    assert!(
        eventually(Duration::from_secs(1), || {
            let h = h.clone();
            async move { h.stats().await.iter().all(|s| !s.healthy) }
        })
        .await
    );
    let down = tokio::time::Instant::now();
    let fetches = (0..50).map(|i| {
        let h = h.clone();
        async move {
            let r = h
                .fetch(Fetch::get(format!("http://127.0.0.1:9/q/{i}")))
                .await;
            (r, down.elapsed())
        }
    });
    let ended = join_all(fetches).await;
    for (r, at) in &ended {
        let err = r.as_ref().expect_err("no exit is in service");
        assert_eq!(err.kind, FetchErrorKind::NoHealthyExit, "{err}");
        // min(max_ejection, 30 s) after the fleet went down (just before `down`).
        assert!(
            *at >= Duration::from_secs(29) && *at < Duration::from_secs(31),
            "ended {at:?} after the fleet went down"
        );
    }
    // Past the bound, a new fetch does not wait again.
    let t = tokio::time::Instant::now();
    let err = h
        .fetch(Fetch::get("http://127.0.0.1:9/late"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::NoHealthyExit, "{err}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

/// The bound on waiting for an exit is counted per region asked for: a region whose
/// exits have been down for long does not end at once the fetches of another region whose
/// exits have only just gone down.
#[actix_rt::test]
async fn a_regions_wait_for_an_exit_is_its_own() {
    let site = paused_site(SiteConfig::default());
    let mut eu = ExitSettings::new("d1", ip("192.0.2.10"));
    eu.region = Some("eu".into());
    let mut us = ExitSettings::new("e2", ip("127.0.0.2"));
    us.region = Some("us".into());
    let mut s = settings(vec![eu, us]);
    s.health.url = Some(site.url(HEALTH_PATH));
    s.health.base_ejection_ms = 120_000;
    s.health.max_ejection_ms = 300_000;
    let h = Crawler::start(s).expect("one exit can bind");
    // The eu exit cannot bind: a fetch for eu waits the bound, then ends.
    let t = tokio::time::Instant::now();
    let err = h
        .fetch(Fetch::get(site.url("/eu")).in_region("eu"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::NoHealthyExit, "{err}");
    assert!(t.elapsed() >= Duration::from_secs(29), "{:?}", t.elapsed());
    tokio::time::sleep(Duration::from_secs(60)).await;
    // Now the us exit fails its checks too.
    every_exit_down_by(&h, &site, ip("127.0.0.2")).await;
    let t = tokio::time::Instant::now();
    let err = h
        .fetch(Fetch::get(site.url("/us")).in_region("us"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::NoHealthyExit, "{err}");
    assert!(
        t.elapsed() >= Duration::from_secs(25),
        "the us fetch waited {:?}, not the bound",
        t.elapsed()
    );
}

/// An ejected exit is probed when its ejection ends, not at the next check round: with
/// rounds a minute apart and a one-second ejection, a fetch waiting for the only exit is
/// answered about a second after the ejection, well before the fleet's wait bound
/// (min(max_ejection, 30 s) = 10 s).
#[actix_rt::test]
async fn an_ejected_exit_is_probed_when_its_ejection_ends() {
    let site = paused_site(SiteConfig::default());
    site.set_health(false);
    let mut s = settings(exits(1, 8));
    s.health.url = Some(site.url(HEALTH_PATH));
    s.health.interval_ms = 60_000;
    s.health.timeout_ms = 1_000;
    s.health.base_ejection_ms = 1_000;
    s.health.max_ejection_ms = 10_000;
    let h = Crawler::start(s).expect("start");
    assert!(
        eventually(Duration::from_secs(65), || {
            let h = h.clone();
            async move { h.stats().await.iter().all(|s| !s.healthy) }
        })
        .await,
        "the failing check never ejected the exit"
    );
    let ejected = tokio::time::Instant::now();
    site.set_health(true);
    let r = h
        .fetch(Fetch::get(site.url("/after-ejection")))
        .await
        .expect("the exit is back once its ejection ends");
    assert_eq!(r.status, 200);
    assert!(
        ejected.elapsed() < Duration::from_secs(3),
        "answered {:?} after the ejection",
        ejected.elapsed()
    );
    let seen = site.requests();
    let fetched = seen
        .iter()
        .find(|r| r.path == "/after-ejection")
        .expect("the site saw the fetch");
    assert_eq!(fetched.peer, ip("127.0.0.2"));
    // The probe's check went out at the ejection's end, between the minute's rounds.
    let checks = seen.iter().filter(|r| r.path == HEALTH_PATH).count();
    assert!(checks >= 2, "{checks} checks");
}

/// The bound on waiting for an exit is counted per address family too: a fetch for an
/// IPv6 address that waited out the IPv6 exits' outage does not end at once, later, the
/// fetches of an IPv4 outage that has only just begun.
#[actix_rt::test]
async fn a_familys_wait_for_an_exit_is_its_own() {
    let site = paused_site(SiteConfig::default());
    // A documentation address: it cannot bind, so the IPv6 exit starts ejected.
    let ex = vec![
        ExitSettings::new("d6", ip("2001:db8::10")),
        ExitSettings::new("e2", ip("127.0.0.2")),
    ];
    let mut s = settings(ex);
    s.health.url = Some(site.url(HEALTH_PATH));
    s.health.base_ejection_ms = 300_000;
    s.health.max_ejection_ms = 300_000;
    let h = Crawler::start(s).expect("one exit can bind");
    let t = tokio::time::Instant::now();
    let err = h
        .fetch(Fetch::get("http://[2001:db8::1]:9/v6"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::NoHealthyExit, "{err}");
    assert!(t.elapsed() >= Duration::from_secs(29), "{:?}", t.elapsed());
    tokio::time::sleep(Duration::from_secs(10)).await;
    // Now the IPv4 exit fails its checks too.
    every_exit_down_by(&h, &site, ip("127.0.0.2")).await;
    let t = tokio::time::Instant::now();
    let err = h.fetch(Fetch::get(site.url("/v4"))).await.unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::NoHealthyExit, "{err}");
    assert!(
        t.elapsed() >= Duration::from_secs(25),
        "the IPv4 fetch waited {:?}, not the bound",
        t.elapsed()
    );
    assert!(
        !site.requests().iter().any(|r| r.path == "/v4"),
        "the site saw the fetch through an ejected exit"
    );
}

/// A CONNECT proxy on loopback that refuses the first tunnel asked of it (403) and opens
/// every later one from 127.0.0.5, so the site tells the requests through it apart.
async fn proxy_refusing_once() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    actix_rt::spawn(async move {
        let mut refused = false;
        while let Ok((mut client, _)) = listener.accept().await {
            let refuse = !std::mem::replace(&mut refused, true);
            actix_rt::spawn(async move {
                let Some(target) = read_connect(&mut client).await else {
                    return;
                };
                if refuse {
                    let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n").await;
                    return;
                }
                let socket = TcpSocket::new_v4().expect("socket");
                socket.bind((ip("127.0.0.5"), 0).into()).expect("bind");
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
    addr
}

/// An attempt that reached the site starts a new round of exits for the fetch: an exit
/// that failed it locally before (its proxy refused once) is tried again, rather than the
/// fetch ending with that old error once its other exit is ejected.
#[actix_rt::test]
async fn a_fetch_that_reached_the_site_tries_again_the_exit_that_failed_it_locally() {
    let site = paused_site(SiteConfig::default());
    // e2 is answered 503 (a server error, not a throttle here), its checks too.
    site.set_fail_peer(ip("127.0.0.2"), true);
    let mut px = ExitSettings::new("px", ip("0.0.0.0"));
    px.proxy = Some(format!("http://{}", proxy_refusing_once().await));
    let mut s = settings(vec![px, ExitSettings::new("e2", ip("127.0.0.2"))]);
    s.health.url = Some(site.url(HEALTH_PATH));
    // One refusal does not eject px; three failed checks eject e2, well before the retry.
    s.health.consecutive_failures = 3;
    s.limiter.throttle_statuses = vec![429];
    s.crawler.max_retries = 2;
    s.crawler.retry_backoff_base_ms = 2_000;
    s.crawler.retry_backoff_max_ms = 2_000;
    let h = Crawler::start(s).expect("start");
    let r = h
        .fetch(Fetch::get(site.url("/x")).prefer("px"))
        .await
        .expect("px's proxy tunnels the retry");
    assert_eq!(r.status, 200);
    assert_eq!(&*r.exit, "px");
    let seen: Vec<_> = site
        .requests()
        .into_iter()
        .filter(|r| r.path == "/x")
        .map(|r| r.peer)
        .collect();
    assert_eq!(seen, [ip("127.0.0.2"), ip("127.0.0.5")]);
    let stats = h.stats().await;
    assert!(
        stats.iter().any(|s| s.name == "e2" && !s.healthy),
        "e2 was not ejected: {stats:?}"
    );
}

/// A loopback listener that accepts connections and never answers on them; the number of
/// connections it has accepted.
async fn tarpit() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    actix_rt::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (addr, accepted)
}

/// One exit of two connections, checked every second with a 200 ms timeout, ejected by
/// one failed check; `hung` fetches to a site that never answers hold its connections
/// through three check rounds. The exit's stats then, and how many of its checks the
/// health site answered.
async fn in_service_with_fetches_hung(hung: usize) -> (ExitStats, usize) {
    let site = paused_site(SiteConfig::default());
    let mut s = settings(exits(1, 2));
    s.crawler.concurrency = 2;
    s.health.url = Some(site.url(HEALTH_PATH));
    s.health.interval_ms = 1_000;
    s.health.timeout_ms = 200;
    let h = Crawler::start(s).expect("start");
    let (tarpit, accepted) = tarpit().await;
    for i in 0..hung {
        let h = h.clone();
        actix_rt::spawn(async move {
            let _ = h
                .fetch(Fetch::get(format!("http://{tarpit}/hang/{i}")))
                .await;
        });
    }
    assert!(
        eventually(Duration::from_millis(500), || {
            let n = accepted.load(std::sync::atomic::Ordering::SeqCst);
            async move { n == hung }
        })
        .await,
        "the fetches did not reach the tarpit"
    );
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let stats = h.stats().await;
    let checks = site
        .requests()
        .iter()
        .filter(|r| r.path == HEALTH_PATH && r.peer == ip("127.0.0.2"))
        .count();
    (stats.into_iter().next().expect("one exit"), checks)
}

/// A health check measures whether the exit reaches the health URL, not whether its
/// connections are free: with every connection of the exit held by a site that never
/// answers (whose timeouts never count against the exit), its checks still go out on a
/// connection of their own and are answered, and the exit stays in service.
#[actix_rt::test]
async fn an_exit_whose_connections_a_site_holds_passes_its_checks() {
    let (exit, checks) = in_service_with_fetches_hung(2).await;
    assert!(
        exit.healthy,
        "the exit was ejected while a site held its connections: {exit:?}"
    );
    assert_eq!(exit.active, 2, "{exit:?}");
    assert!(checks >= 3, "the site answered {checks} checks");
}

/// The same exit and checks with no fetch held: in service, every check answered.
#[actix_rt::test]
async fn an_idle_exit_passes_its_checks() {
    let (exit, checks) = in_service_with_fetches_hung(0).await;
    assert!(exit.healthy, "an idle exit was ejected: {exit:?}");
    assert!(checks >= 3, "the site answered {checks} checks");
}

/// URLs at multicast and broadcast addresses (the kernel refuses a connect there at
/// once): each ends for good after one attempt, as the site's, and no exit is ejected for
/// them however many come, with passive health only as with a health URL.
#[actix_rt::test]
async fn a_site_no_connection_can_be_made_to_ejects_no_exit() {
    let site = paused_site(SiteConfig::default());
    let mut s = settings(exits(2, 8));
    s.health.url = Some(site.url(HEALTH_PATH));
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = ["224.0.0.1", "255.255.255.255", "127.255.255.255"]
        .iter()
        .flat_map(|a| (0..4).map(move |i| format!("http://{a}/{i}")))
        .collect();
    for round in 0..3 {
        let replies = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone())))).await;
        for (u, r) in urls.iter().zip(&replies) {
            let e = r.as_ref().expect_err(u);
            assert_eq!(e.attempts, 1, "round {round}, {u}: {e}");
            assert!(
                !matches!(
                    e.kind,
                    FetchErrorKind::LocalConnect | FetchErrorKind::NoHealthyExit
                ),
                "round {round}, {u}: {e}"
            );
        }
        assert!(all_healthy(&h).await, "{:?}", h.stats().await);
    }
    let r = h
        .fetch(Fetch::get(site.url("/after")))
        .await
        .expect("served");
    assert_eq!(r.status, 200);
}
