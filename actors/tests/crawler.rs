//! The actor system against a real local HTTP server (`exitcrawl-testsite` on 127.0.0.1:0),
//! with exits bound to 127.0.0.2, 127.0.0.3, … Every assertion is about what the *server*
//! saw, or about the replies. Load loops are bounded by count; waits for a state change
//! are bounded polls, never a fixed sleep.

mod support;

use support::{eventually, exits, ip, paused_site, timeouts_for_paused_time};

use std::collections::HashSet;
use std::time::Duration;

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchErrorKind};
use exitcrawl_testsite::{FailMode, Limit, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::future::join_all;

/// Settings for a local site: no pacing unless the test asks, short timeouts.
fn settings(exits: Vec<ExitSettings>) -> Settings {
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.timeout_ms = 5_000;
    s.crawler.connect_timeout_ms = 2_000;
    s.crawler.retry_backoff_base_ms = 20;
    s.crawler.retry_backoff_max_ms = 200;
    s
}

/// [`settings`] for a test on paused time against [`paused_site`]: pacing, Retry-After
/// pauses and the site's buckets all run on the runtime's clock.
fn paused_settings(exits: Vec<ExitSettings>) -> Settings {
    let mut s = settings(exits);
    timeouts_for_paused_time(&mut s);
    s
}

async fn fetch_all(
    h: &CrawlerHandle,
    urls: Vec<String>,
) -> Vec<Result<exitcrawl_actors::FetchResponse, exitcrawl_actors::FetchError>> {
    join_all(urls.into_iter().map(|u| h.fetch(Fetch::get(u)))).await
}

#[actix_rt::test]
async fn four_exits_share_the_load_within_their_concurrency() {
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(20),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(exits(4, 3))).expect("start");
    let urls: Vec<_> = (0..200).map(|i| site.url(&format!("/p/{i}"))).collect();
    let replies = fetch_all(&h, urls).await;
    assert_eq!(replies.len(), 200);
    assert!(replies
        .iter()
        .all(|r| r.as_ref().is_ok_and(|r| r.status == 200)));
    let stats = site.stats();
    for i in 2..6 {
        let p = stats.peer(ip(&format!("127.0.0.{i}")));
        assert!(
            p.requests > 0,
            "exit 127.0.0.{i} carried nothing: {stats:?}"
        );
        assert!(
            p.peak_in_flight <= 3,
            "127.0.0.{i} peak {} > 3",
            p.peak_in_flight
        );
    }
    assert_eq!(stats.requests, 200);
}

#[actix_rt::test]
async fn a_per_ip_limit_is_found_with_few_429s() {
    // 40 requests/s per peer IP, burst 4; two exits; the adaptive limiter starts at 5/s.
    let site = paused_site(SiteConfig {
        limit: Limit::PerPeer(Rate::per_second(40, 4)),
        retry_after: RetryAfter::Omit,
        ..SiteConfig::default()
    });
    let mut s = paused_settings(exits(2, 16));
    s.limiter.algorithm = Algorithm::Aimd;
    s.crawler.max_retries = 5;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<_> = (0..400).map(|i| site.url(&format!("/p/{i}"))).collect();
    let replies = fetch_all(&h, urls).await;
    let ok = replies
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| r.status == 200))
        .count();
    let stats = site.stats();
    let frac = stats.limited as f64 / stats.requests as f64;
    eprintln!(
        "ok {ok}/400, server saw {} requests, {} limited ({:.1} %)",
        stats.requests,
        stats.limited,
        100.0 * frac
    );
    assert_eq!(ok, 400, "every URL ends 200 after retries");
    // Slow start overshoots once per exit; after that the probe ends each cycle with a
    // throttle or two. Over 400 URLs that stays well under 10 %.
    assert!(frac < 0.10, "429 fraction {frac}");
    for i in 2..4 {
        assert!(stats.peer(ip(&format!("127.0.0.{i}"))).requests > 50);
    }
}

#[actix_rt::test]
async fn retry_after_is_a_floor_for_that_exit_and_host() {
    // A bucket of 3 with a slow refill: the 4th request gets 429 with Retry-After: 1.
    let site = paused_site(SiteConfig {
        limit: Limit::PerPeer(Rate::new(1, Duration::from_secs(10), 3)),
        retry_after: RetryAfter::Fixed(1),
        ..SiteConfig::default()
    });
    let mut s = paused_settings(exits(1, 4));
    s.limiter.algorithm = Algorithm::Aimd;
    s.limiter.initial_rps = 50.0;
    s.crawler.max_retries = 0;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<_> = (0..6).map(|i| site.url(&format!("/p/{i}"))).collect();
    let _ = fetch_all(&h, urls).await;
    let log = site.requests();
    let first_429 = log
        .iter()
        .find(|r| r.status == 429)
        .expect("a 429 was sent");
    // Requests already on their way when the 429 left may still arrive; none may be
    // *sent* after the client read it. Paused time does not move while the 429 is answered
    // and read, so those arrive at the 429's own instant: nothing after it for 1 s.
    let quiet_from = first_429.arrived;
    let quiet_to = first_429.arrived + Duration::from_secs(1);
    let early: Vec<_> = log
        .iter()
        .filter(|r| r.arrived > quiet_from && r.arrived < quiet_to)
        .collect();
    assert!(
        early.is_empty(),
        "requests inside the Retry-After second: {early:?}"
    );
    assert!(
        log.iter().any(|r| r.arrived >= quiet_to),
        "the crawl went on after the pause"
    );
}

#[actix_rt::test]
async fn a_retry_after_binds_from_the_moment_it_is_read_through_every_exit() {
    // One bucket of 3 for the host, whatever the client, slow to refill; every answer
    // (the 429 too) takes 30 ms. Four exits, one request in flight each, paced far
    // faster than that: an answer frees its exit, and the next request is due at once.
    let latency = Duration::from_millis(30);
    let site = paused_site(SiteConfig {
        limit: Limit::Global(Rate::new(1, Duration::from_secs(10), 3)),
        retry_after: RetryAfter::Fixed(1),
        latency,
        ..SiteConfig::default()
    });
    let mut s = paused_settings(exits(4, 1));
    s.limiter.algorithm = Algorithm::Aimd;
    s.limiter.initial_rps = 1000.0;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<_> = (0..8).map(|i| site.url(&format!("/p/{i}"))).collect();
    let _ = fetch_all(&h, urls).await;
    let log = site.requests();
    let first_429 = log
        .iter()
        .filter(|r| r.status == 429)
        .min_by_key(|r| r.arrived)
        .expect("a 429 was sent");
    // Requests sent before the 429 was read arrive before it is read (paused time: no
    // time on the wire). One sent in the second after it was read ignored it. The
    // instant it is read is known to one pacing interval (1 ms at 1000 req/s): the
    // answer crosses a real socket, and while it does the runtime, idle, may move the
    // paused clock on to the next paced send.
    let read = first_429.arrived + latency + Duration::from_millis(1);
    let ignored: Vec<_> = log
        .iter()
        .filter(|r| r.arrived > read && r.arrived < read + Duration::from_secs(1))
        .collect();
    assert!(
        ignored.is_empty(),
        "requests sent inside the Retry-After second: {ignored:?}"
    );
    assert!(log
        .iter()
        .any(|r| r.arrived >= read + Duration::from_secs(1)));
}

#[actix_rt::test]
async fn a_dead_exit_is_skipped_and_reported() {
    let site = TestSite::start(SiteConfig::default());
    let mut ex = exits(1, 8);
    ex.push(ExitSettings::new("dead", ip("192.0.2.10")));
    let h = Crawler::start(settings(ex)).expect("start");
    let urls: Vec<_> = (0..60).map(|i| site.url(&format!("/p/{i}"))).collect();
    let replies = fetch_all(&h, urls).await;
    for r in &replies {
        let r = r
            .as_ref()
            .expect("every fetch succeeds through the live exit");
        assert_eq!(&*r.exit, "e2");
        assert_eq!(r.attempts, 1, "a local connect failure is not an attempt");
    }
    assert_eq!(site.stats().requests, 60);
    let stats = h.stats().await;
    let dead = stats
        .iter()
        .find(|s| s.name == "dead")
        .expect("dead exit in stats");
    assert!(!dead.healthy, "{dead:?}");
    let err = dead.last_error.clone().unwrap_or_default();
    assert!(
        err.contains("os error 99") || err.contains("Cannot assign"),
        "{err}"
    );
}

#[actix_rt::test]
async fn health_checks_eject_and_restore_an_exit() {
    let site = TestSite::start(SiteConfig {
        fail_mode: FailMode::Status503,
        ..SiteConfig::default()
    });
    let mut s = settings(exits(2, 8));
    s.health.url = Some(site.url("/health"));
    s.health.interval_ms = 100;
    s.health.timeout_ms = 100;
    s.health.consecutive_failures = 2;
    s.health.base_ejection_ms = 200;
    s.health.max_ejection_ms = 400;
    let h = Crawler::start(s).expect("start");
    site.set_fail_peer(ip("127.0.0.3"), true);
    let healthy = |h: CrawlerHandle, name: &'static str| async move {
        h.stats().await.iter().any(|s| s.name == name && s.healthy)
    };
    assert!(
        eventually(Duration::from_secs(5), || {
            let h = h.clone();
            async move { !healthy(h, "e3").await }
        })
        .await,
        "e3 was never ejected"
    );
    // While e3 is out, fetches go through e2 only.
    let r = h.fetch(Fetch::get(site.url("/x"))).await.expect("fetch");
    assert_eq!(&*r.exit, "e2");
    site.set_fail_peer(ip("127.0.0.3"), false);
    assert!(
        eventually(Duration::from_secs(5), || healthy(h.clone(), "e3")).await,
        "e3 never came back"
    );
}

#[actix_rt::test]
async fn a_preferred_exit_is_honoured_when_healthy_and_skipped_when_not() {
    let site = TestSite::start(SiteConfig::default());
    let mut ex = exits(3, 8);
    let mut dead = ExitSettings::new("dead", ip("192.0.2.10"));
    dead.max_concurrent = 8;
    ex.push(dead);
    let h = Crawler::start(settings(ex)).expect("start");
    for i in 0..10 {
        let r = h
            .fetch(Fetch::get(site.url(&format!("/a/{i}"))).prefer("e3"))
            .await
            .expect("fetch");
        assert_eq!(&*r.exit, "e3");
    }
    assert_eq!(site.stats().peer(ip("127.0.0.3")).requests, 10);
    // The preferred exit cannot connect: the fetch goes elsewhere.
    for i in 0..5 {
        let r = h
            .fetch(Fetch::get(site.url(&format!("/b/{i}"))).prefer("dead"))
            .await
            .expect("fetch");
        assert_ne!(&*r.exit, "dead");
    }
    let err = h
        .fetch(Fetch::get(site.url("/c")).prefer("nope"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::UnknownExit);
}

#[actix_rt::test]
async fn every_fetch_gets_exactly_one_reply_under_mixed_failures() {
    let site = TestSite::start(SiteConfig {
        fail_mode: FailMode::Close,
        ..SiteConfig::default()
    });
    site.set_fail_peer(ip("127.0.0.3"), true);
    let mut s = settings(exits(2, 8));
    s.crawler.max_retries = 2;
    let h = Crawler::start(s).expect("start");
    let mut urls = Vec::new();
    for i in 0..150 {
        urls.push(match i % 5 {
            0 => format!("ftp://127.0.0.1/{i}"),
            1 => format!("not a url {i}"),
            2 => format!("http://127.0.0.1:1/{i}"), // nothing listens on port 1
            _ => site.url(&format!("/m/{i}")),
        });
    }
    let replies = fetch_all(&h, urls.clone()).await;
    assert_eq!(replies.len(), urls.len());
    let mut seen = HashSet::new();
    for (r, u) in replies.iter().zip(&urls) {
        let url = match r {
            Ok(resp) => resp.url.clone(),
            Err(e) => e.url.clone(),
        };
        assert_eq!(&url, u, "replies come back for their own fetch");
        assert!(seen.insert(url), "duplicate reply");
        if u.starts_with("ftp") || u.starts_with("not") {
            assert_eq!(r.as_ref().unwrap_err().kind, FetchErrorKind::InvalidUrl);
        }
        if let Ok(resp) = r {
            assert!(resp.attempts <= 3);
        }
    }
}

#[actix_rt::test]
async fn a_crawler_whose_exits_cannot_bind_does_not_start() {
    let ex = vec![
        ExitSettings::new("d1", ip("192.0.2.10")),
        ExitSettings::new("d2", ip("192.0.2.11")),
    ];
    let err = match Crawler::start(settings(ex)) {
        Ok(_) => panic!("started with no exit that can bind"),
        Err(e) => e,
    };
    let msg = err.to_string();
    for part in ["d1", "192.0.2.10", "d2", "192.0.2.11", "os error 99"] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    assert!(std::error::Error::source(&err).is_some());
}

#[actix_rt::test]
async fn an_exit_token_bucket_and_a_disabled_exit_are_honoured() {
    let site = paused_site(SiteConfig::default());
    let mut ex = exits(3, 8);
    // e2: at most 20 req/s with a burst of 2, and preferred by every fetch, so its token
    // bucket is the only thing spacing the requests; e3: disabled.
    ex[0].rate = Some(20.0);
    ex[0].burst = Some(2);
    ex[1].enabled = false;
    let h = Crawler::start(paused_settings(ex)).expect("start");
    let urls: Vec<_> = (0..12).map(|i| site.url(&format!("/b/{i}"))).collect();
    let replies = join_all(
        urls.iter()
            .map(|u| h.fetch(Fetch::get(u.clone()).prefer("e2"))),
    )
    .await;
    assert!(replies
        .iter()
        .all(|r| r.as_ref().is_ok_and(|r| &*r.exit == "e2")));
    let log: Vec<_> = site
        .requests()
        .into_iter()
        .filter(|r| r.peer == ip("127.0.0.2"))
        .collect();
    assert_eq!(log.len(), 12);
    // Token bucket bound: in any window W at most 20·W + 2 requests. Check W = 200 ms
    // (≤ 6) over every start; on paused time with no slack.
    for (i, r) in log.iter().enumerate() {
        let in_window = log[i..]
            .iter()
            .take_while(|x| x.arrived.duration_since(r.arrived) < Duration::from_millis(200))
            .count();
        assert!(
            in_window <= 6,
            "{in_window} requests within 200 ms from #{i}"
        );
    }
    // The burst, then one every 50 ms: the 12th is due (12 - 2) / 20 s after the first.
    let first_to_last = log[11].arrived.duration_since(log[0].arrived);
    assert!(
        first_to_last >= Duration::from_millis(500),
        "12 requests at 20/s burst 2 took {first_to_last:?}"
    );
    assert_eq!(
        site.stats().peer(ip("127.0.0.3")).requests,
        0,
        "a disabled exit takes no work"
    );
    let stats = h.stats().await;
    assert!(stats.iter().any(|s| s.name == "e3" && !s.enabled));
}

#[actix_rt::test]
async fn scope_host_shares_one_pacer_across_exits() {
    // With scope = host and a fixed 20 req/s, two exits together stay at 20 req/s.
    let site = paused_site(SiteConfig::default());
    let mut s = paused_settings(exits(2, 8));
    s.limiter.algorithm = Algorithm::Gcra;
    s.limiter.scope = exitcrawl::config::Scope::Host;
    s.limiter.initial_rps = 20.0;
    s.limiter.burst = 1;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<_> = (0..11).map(|i| site.url(&format!("/s/{i}"))).collect();
    let replies = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone())))).await;
    assert!(replies.iter().all(|r| r.is_ok()));
    let log = site.requests();
    let span = log[10].arrived.duration_since(log[0].arrived);
    // 11 requests at 20/s with burst 1: the last is due 500 ms after the first, and no
    // two arrive closer than 50 ms apart.
    assert!(span >= Duration::from_millis(500), "{span:?}");
    for w in log.windows(2) {
        let gap = w[1].arrived.duration_since(w[0].arrived);
        assert!(
            gap >= Duration::from_millis(50),
            "{gap:?} between requests: {log:?}"
        );
    }
    let peers: HashSet<_> = log.iter().map(|r| r.peer).collect();
    assert_eq!(peers.len(), 2, "both exits were used");
}

#[actix_rt::test]
async fn odd_urls_each_get_one_clear_reply() {
    let site = TestSite::start(SiteConfig::default());
    let h = Crawler::start(settings(exits(2, 8))).expect("start");
    let port = site.port();
    // An IPv6 literal through IPv4 exits: nothing can be sent, and the reply says why.
    let err = h
        .fetch(Fetch::get(format!("http://[::1]:{port}/v6")))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::AddressFamily, "{err}");
    // An IDN host goes out in punycode: resolving it fails (no such name), which is a
    // network error, not an invalid URL; the reply keeps the URL as requested.
    let idn = format!("http://bücher.invalid:{port}/x");
    let err = h.fetch(Fetch::get(idn.clone())).await.unwrap_err();
    assert_ne!(err.kind, FetchErrorKind::InvalidUrl, "{err}");
    assert_eq!(err.url, idn);
    // A non-ASCII path is percent-encoded on the wire.
    let r = h.fetch(Fetch::get(site.url("/käse"))).await.expect("fetch");
    assert_eq!(r.status, 200);
    assert!(site.requests().iter().any(|q| q.path == "/k%C3%A4se"));
    // Unsupported schemes, no host, garbage: invalid_url, nothing sent.
    for bad in ["mailto:someone@example.com", "http://", "ht!tp://x", ""] {
        let err = h.fetch(Fetch::get(bad)).await.unwrap_err();
        assert_eq!(err.kind, FetchErrorKind::InvalidUrl, "{bad:?}: {err}");
        assert_eq!(err.attempts, 0);
    }
    // A preferred exit or region that does not exist: an error reply, not a panic.
    let err = h
        .fetch(Fetch::get(site.url("/r")).in_region("mars"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FetchErrorKind::NoRegion);
}

#[actix_rt::test]
async fn exits_of_both_families_each_take_the_hosts_of_their_own() {
    // One IPv4 exit and one IPv6 exit (::1); one site on 127.0.0.1, one on [::1].
    let v4_site = TestSite::start(SiteConfig::default());
    let v6_site = TestSite::start_at(SiteConfig::default(), ip("::1"));
    let mut v6_exit = ExitSettings::new("v6", ip("::1"));
    v6_exit.max_concurrent = 16;
    let mut exits = exits(1, 16);
    exits.push(v6_exit);
    let s = settings(exits);
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = (0..60)
        .map(|i| {
            if i % 2 == 0 {
                v4_site.url(&format!("/v4/{i}"))
            } else {
                v6_site.url(&format!("/v6/{i}"))
            }
        })
        .collect();
    let replies = fetch_all(&h, urls).await;
    for r in &replies {
        let r = r.as_ref().expect("every URL is fetched");
        assert_eq!(r.status, 200, "{}", r.url);
        let want = if r.url.contains("/v4/") { "e2" } else { "v6" };
        assert_eq!(&*r.exit, want, "{} went through the wrong exit", r.url);
    }
    // Each site saw only the exit of its family; neither exit was blamed for the other's.
    assert_eq!(v4_site.stats().peer(ip("127.0.0.2")).requests, 30);
    assert_eq!(v6_site.stats().peer(ip("::1")).requests, 30);
    let stats = h.stats().await;
    assert!(stats.iter().all(|e| e.healthy), "{stats:?}");
    // A host of a family no exit has fails at once with a clear error.
    let only_v4 = Crawler::start(settings(exits_v4_only())).expect("start");
    let err = only_v4
        .fetch(Fetch::get(v6_site.url("/x")))
        .await
        .expect_err("no IPv6 exit");
    assert_eq!(err.kind, FetchErrorKind::AddressFamily, "{err}");
    assert!(err.message.contains("IPv6"), "{err}");
    assert_eq!(v6_site.stats().requests, 30);
}

fn exits_v4_only() -> Vec<ExitSettings> {
    exits(2, 8)
}
