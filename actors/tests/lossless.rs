//! No URL is lost to a throttle or to the retry budget: a throttled URL waits for its host
//! however often it is throttled, a retry the budget cannot afford waits for it, and only
//! a host that refuses everything for `give_up_after_ms` (or asks for a pause over
//! `max_retry_after_ms`) ends URLs throttled out. Every crawl here runs on paused time
//! against a real local site, and the assertions are the site's counts.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchErrorKind, FetchResponse};
use exitcrawl_testsite::{Limit, Page, Pages, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::future::join_all;
use support::{exits, paused_site, timeouts_for_paused_time};

type Reply = Result<FetchResponse, exitcrawl_actors::FetchError>;

fn settings(exits: Vec<ExitSettings>) -> Settings {
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    timeouts_for_paused_time(&mut s);
    s.crawler.retry_backoff_base_ms = 20;
    s.crawler.retry_backoff_max_ms = 200;
    s
}

async fn fetch_all(h: &CrawlerHandle, urls: &[String]) -> Vec<Reply> {
    join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone())))).await
}

/// `n` URLs of `site`: every `every`th is `/{kind}/i`, the others `/page/i`.
fn mixed_urls(site: &TestSite, n: usize, (kind, every): (&str, usize)) -> Vec<String> {
    (0..n)
        .map(|i| {
            let kind = if i % every == 0 { kind } else { "page" };
            site.url(&format!("/{kind}/{i}"))
        })
        .collect()
}

/// Pages that answer 500 every time under `prefix`, and 200 elsewhere.
fn failing_under(prefix: &'static str) -> Pages {
    Pages::new(move |_host, pq| {
        let mut page = Page::html("<p>page</p>");
        if pq.starts_with(prefix) {
            page.status = 500;
        }
        Some(page)
    })
}

/// Each URL ended in one reply: 500 for those whose path has `failing` (their retries
/// spent), 200 for the others.
fn assert_ended(urls: &[String], replies: &[Reply], failing: &str) {
    for (u, r) in urls.iter().zip(replies) {
        let status = r.as_ref().map(|r| r.status).unwrap_or(0);
        let want = if u.contains(failing) { 500 } else { 200 };
        assert_eq!(status, want, "{u}: {r:?}");
    }
}

/// 200 answers the site sent, per path.
fn served(site: &TestSite) -> BTreeMap<String, usize> {
    let mut by_path = BTreeMap::new();
    for r in site.requests().iter().filter(|r| r.status == 200) {
        *by_path.entry(r.path.clone()).or_default() += 1;
    }
    by_path
}

#[actix_rt::test]
async fn a_url_throttled_many_times_is_fetched_in_the_end() {
    // A site-wide bucket of 5/s, burst 1, Retry-After: 1 on every 429, and a crawler
    // that starts ten times too fast with no error retries at all: every throttle must
    // put its URL back, not end it.
    let site = paused_site(SiteConfig {
        limit: Limit::Global(Rate::per_second(5, 1)),
        retry_after: RetryAfter::Fixed(1),
        ..SiteConfig::default()
    });
    let mut s = settings(exits(2, 8));
    s.limiter.algorithm = Algorithm::Aimd;
    s.limiter.initial_rps = 50.0;
    s.crawler.max_retries = 0;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = (0..60).map(|i| site.url(&format!("/p/{i}"))).collect();
    let replies = fetch_all(&h, &urls).await;

    let stats = site.stats();
    assert!(stats.limited > 0, "the site throttled nothing: {stats:?}");
    let by_path = served(&site);
    for (u, r) in urls.iter().zip(&replies) {
        let r = r.as_ref().unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(r.status, 200, "{u}");
        assert_eq!(
            r.attempts,
            r.throttled + 1,
            "{u}: one 200, the rest throttles"
        );
        let path = u.trim_start_matches(&site.base_url());
        assert_eq!(by_path.get(path), Some(&1), "{u} served once");
    }
    // What the crawler counted as throttles is what the site refused.
    let throttled: u64 = replies
        .iter()
        .map(|r| u64::from(r.as_ref().map_or(0, |r| r.throttled)))
        .sum();
    assert_eq!(throttled, stats.limited);
    assert_eq!(stats.requests, 60 + stats.limited);
    h.shutdown(Duration::from_secs(1)).await;
}

/// A site where each `/fail/` path answers 500 the first time and 200 after.
fn fails_once() -> TestSite {
    let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
    let pages = Pages::new(move |_host, pq| {
        let mut page = Page::html("<p>page</p>");
        if pq.starts_with("/fail/") && seen.lock().unwrap().insert(pq.to_string()) {
            page.status = 500;
        }
        Some(page)
    });
    paused_site(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

#[actix_rt::test]
async fn a_retry_the_budget_cannot_afford_waits_for_it_and_is_not_lost() {
    // No retry budget beyond the host's reserve (ten a second, 100 in a 10 s window): 300
    // of 600 URLs fail once and want one retry each, three budget windows' worth.
    let site = fails_once();
    let mut s = settings(exits(2, 32));
    s.limiter.algorithm = Algorithm::None;
    s.crawler.retry_budget = 0.0;
    s.crawler.max_retries = 1;
    let h = Crawler::start(s).expect("start");
    let urls = mixed_urls(&site, 600, ("fail", 2));
    let t0 = tokio::time::Instant::now();
    let replies = fetch_all(&h, &urls).await;
    let took = t0.elapsed();

    for (u, r) in urls.iter().zip(&replies) {
        let r = r.as_ref().unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(r.status, 200, "{u}: every URL ends 200");
    }
    let stats = site.stats();
    assert_eq!(stats.requests, 600 + 300, "each failing URL retried once");
    assert!(
        h.metrics().retry_budget_refusals() > 0,
        "the budget deferred nothing"
    );
    // The budget held: 200 of the retries had to wait for the reserve, 100 per window.
    assert!(took >= Duration::from_secs(20), "took {took:?}");
    let retries: Vec<_> = site
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/fail/") && r.status == 200)
        .map(|r| r.arrived)
        .collect();
    for (k, at) in retries.iter().enumerate() {
        let within = retries[k..]
            .iter()
            .take_while(|t| t.duration_since(*at) < Duration::from_secs(10))
            .count();
        // A hundred a window, and the window is counted in slots of half a second.
        assert!(within <= 200, "{within} retries within 10 s of {k}");
    }
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn a_host_that_refuses_everything_is_given_up_after_give_up_after() {
    // Every request refused for the whole crawl (a bucket that never refills in time).
    let site = paused_site(SiteConfig {
        limit: Limit::Global(Rate::new(1, Duration::from_secs(100_000), 1)),
        retry_after: RetryAfter::Omit,
        ..SiteConfig::default()
    });
    let mut s = settings(exits(1, 4));
    s.limiter.algorithm = Algorithm::Aimd;
    s.crawler.give_up_after_ms = 60_000;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = (0..20).map(|i| site.url(&format!("/p/{i}"))).collect();
    let t0 = tokio::time::Instant::now();
    let replies = fetch_all(&h, &urls).await;
    let took = t0.elapsed();
    let given_up: Vec<_> = replies
        .iter()
        .filter_map(|r| r.as_ref().err())
        .filter(|e| e.kind == FetchErrorKind::ThrottledOut)
        .collect();
    // One URL got the bucket's only token; the others waited a minute, then gave up.
    assert_eq!(given_up.len(), 19, "{replies:?}");
    assert!(given_up[0].message.contains("refused every request"));
    assert!(took >= Duration::from_secs(60), "took {took:?}");
    assert!(took < Duration::from_secs(600), "took {took:?}");
    // A minute of lockout probes: a handful of requests, not one per URL per retry.
    assert!(site.stats().requests < 60, "{:?}", site.stats());
    h.shutdown(Duration::from_secs(1)).await;
}

/// A site that refuses one exit's address (503, as a blocked client) and serves the
/// others: a URL throttled through that exit is fetched through another, never kept on
/// the refused one until its host is given up.
#[actix_rt::test]
async fn a_url_throttled_through_an_exit_the_site_refuses_is_fetched_through_another() {
    let site = paused_site(SiteConfig::default());
    let refused: std::net::IpAddr = "127.0.0.2".parse().expect("ip");
    site.set_fail_peer(refused, true);
    let mut s = settings(exits(2, 4));
    s.limiter.algorithm = Algorithm::Aimd;
    s.crawler.give_up_after_ms = 20_000;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = (0..8).map(|i| site.url(&format!("/p/{i}"))).collect();
    let replies = fetch_all(&h, &urls).await;
    for (u, r) in urls.iter().zip(&replies) {
        let r = r.as_ref().unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(r.status, 200, "{u}");
    }
    let reqs = site.requests();
    assert!(
        reqs.iter().any(|r| r.peer == refused && r.status == 503),
        "no URL went through the refused exit first"
    );
    let served: Vec<_> = reqs.iter().filter(|r| r.status == 200).collect();
    assert_eq!(served.len(), urls.len(), "each URL served once");
    assert!(served.iter().all(|r| r.peer != refused));
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn a_pause_over_max_retry_after_gives_the_url_up_and_the_crawl_goes_on() {
    let site = paused_site(SiteConfig {
        limit: Limit::Global(Rate::new(1, Duration::from_secs(100_000), 2)),
        retry_after: RetryAfter::Fixed(99_999_999_999),
        ..SiteConfig::default()
    });
    let mut s = settings(exits(1, 1));
    s.limiter.algorithm = Algorithm::Aimd;
    s.limiter.initial_rps = 1.0;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = (0..5).map(|i| site.url(&format!("/p/{i}"))).collect();
    let t0 = tokio::time::Instant::now();
    let replies = fetch_all(&h, &urls).await;
    let took = t0.elapsed();
    let ok = replies.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 2, "the bucket's two tokens: {replies:?}");
    for e in replies.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.kind, FetchErrorKind::ThrottledOut, "{e}");
        assert!(e.message.contains("≥ 604800 s"), "{e}");
    }
    // Given up at the first such answer, not after a day's wait (or five).
    assert!(took < Duration::from_secs(60), "took {took:?}");
    assert_eq!(site.stats().limited, 1, "{:?}", site.stats());
    h.shutdown(Duration::from_secs(1)).await;
}

/// A site that serves 127.0.0.3 (e3) and bans 127.0.0.2 (e2) after one request, with
/// `Retry-After: retry_after` on each 429; and the banned address.
fn one_exit_banned(retry_after: u64) -> (TestSite, std::net::IpAddr) {
    let banned: std::net::IpAddr = "127.0.0.2".parse().expect("ip");
    let site = paused_site(SiteConfig {
        limit: Limit::PerPeerExcept {
            rate: Rate::per_second(1000, 1000),
            peer: banned,
            peer_rate: Rate::new(1, Duration::from_secs(100_000), 1),
        },
        retry_after: RetryAfter::Fixed(retry_after),
        ..SiteConfig::default()
    });
    (site, banned)
}

/// A site that bans one exit's address with a pause far over `max_retry_after_ms`
/// (`Retry-After: 3600`) and serves the other: where a Retry-After binds the exit that read
/// it, the pause is that exit's, and the host's URLs go on through the other, none given up.
#[actix_rt::test]
async fn a_pause_too_long_for_one_exit_of_two_leaves_the_urls_to_the_other() {
    let (site, banned) = one_exit_banned(3600);
    let mut s = settings(exits(2, 4));
    s.limiter.scope = exitcrawl::config::Scope::ExitHost;
    s.crawler.max_retry_after_ms = 60_000;
    s.crawler.concurrency = 2;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = (0..20).map(|i| site.url(&format!("/p/{i}"))).collect();
    let replies = fetch_all(&h, &urls).await;
    for (u, r) in urls.iter().zip(&replies) {
        let r = r.as_ref().unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(r.status, 200, "{u}");
    }
    let reqs = site.requests();
    let refused: Vec<_> = reqs.iter().filter(|r| r.status == 429).collect();
    assert!(!refused.is_empty(), "the banned exit was never tried");
    assert!(refused.iter().all(|r| r.peer == banned));
    // The banned exit's pause held: after its first 429 it sent nothing until the pause
    // (cut to max_retry_after) was over.
    let first = refused[0].arrived;
    assert!(
        reqs.iter()
            .filter(|r| r.peer == banned && r.arrived > first)
            .all(|r| r.arrived >= first + Duration::from_secs(60)),
        "{reqs:?}"
    );
    let served = served(&site);
    assert_eq!(served.len(), urls.len(), "each URL served once: {served:?}");
    assert!(served.values().all(|&n| n == 1), "{served:?}");
    h.shutdown(Duration::from_secs(1)).await;
}

/// A pause over `max_retry_after_ms` bound to the only exit of the fetch's region: the
/// URL is given up at once (no exit it may use will do better), and alone; the host's
/// other URLs go on through the other region's exit.
#[actix_rt::test]
async fn a_pause_too_long_for_the_only_exit_a_fetch_may_use_gives_up_that_fetch_alone() {
    let (site, _) = one_exit_banned(3600);
    let mut ex = exits(2, 4);
    ex[0].region = Some("a".into());
    ex[1].region = Some("b".into());
    let mut s = settings(ex);
    s.limiter.scope = exitcrawl::config::Scope::ExitHost;
    s.crawler.max_retry_after_ms = 60_000;
    let h = Crawler::start(s).expect("start");
    // The banned address's one token goes first.
    let first = h.fetch(Fetch::get(site.url("/first")).in_region("a")).await;
    assert_eq!(first.expect("its token").status, 200);
    let t0 = tokio::time::Instant::now();
    let pinned = h.fetch(Fetch::get(site.url("/a-only")).in_region("a"));
    let others = join_all((0..10).map(|i| h.fetch(Fetch::get(site.url(&format!("/o/{i}"))))));
    let (e, others) = tokio::time::timeout(
        Duration::from_secs(120),
        futures_util::future::join(pinned, others),
    )
    .await
    .expect("every fetch ends");
    let e = e.expect_err("given up");
    assert_eq!(e.kind, FetchErrorKind::ThrottledOut, "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    for r in &others {
        assert_eq!(r.as_ref().map(|r| r.status).ok(), Some(200), "{r:?}");
    }
    h.shutdown(Duration::from_secs(1)).await;
}

/// A fetch pinned to an exit (`preferred_exit`) the site refuses, while it serves the
/// other exit: the host is not refusing everything, but the pinned fetch would wait for
/// ever. It is given up alone after `give_up_after_ms` of refusals through its exit; the
/// host's other URLs are fetched.
#[actix_rt::test]
async fn a_fetch_pinned_to_an_exit_the_site_refuses_is_given_up_alone() {
    let (site, _) = one_exit_banned(1);
    let mut s = settings(exits(2, 4));
    s.crawler.give_up_after_ms = 10_000;
    let h = Crawler::start(s).expect("start");
    // The banned address's one token goes first.
    let mut first = Fetch::get(site.url("/first"));
    first.preferred_exit = Some("e2".into());
    assert_eq!(h.fetch(first).await.expect("its token").status, 200);
    let mut pinned = Fetch::get(site.url("/pinned"));
    pinned.preferred_exit = Some("e2".into());
    let t0 = tokio::time::Instant::now();
    let pinned = h.fetch(pinned);
    // The host answers the other exit all along: one fetch a second for 30 s.
    let others = async {
        let mut replies = Vec::new();
        for i in 0..30 {
            replies.push(h.fetch(Fetch::get(site.url(&format!("/o/{i}")))).await);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        replies
    };
    let (pinned, others) = futures_util::future::join(
        async {
            let r = pinned.await;
            (r, t0.elapsed())
        },
        others,
    )
    .await;
    let (pinned, took) = pinned;
    let e = pinned.expect_err("given up");
    assert_eq!(e.kind, FetchErrorKind::ThrottledOut, "{e}");
    assert!(e.message.contains("preferred exit"), "{e}");
    assert!(took >= Duration::from_secs(10), "took {took:?}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    for r in &others {
        assert_eq!(r.as_ref().map(|r| r.status).ok(), Some(200), "{r:?}");
    }
    h.shutdown(Duration::from_secs(1)).await;
}

/// A throttle that comes back while the crawler shuts down is not the URL's answer: the
/// fetch ends `Shutdown` (a program records it interrupted and a resumed crawl fetches it
/// again), with its attempt and throttle counted.
#[actix_rt::test]
async fn a_throttle_answered_during_the_shutdown_grace_ends_the_fetch_interrupted() {
    let site = paused_site(SiteConfig {
        limit: Limit::Global(Rate::new(1, Duration::from_secs(100_000), 1)),
        retry_after: RetryAfter::Fixed(1),
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(exits(1, 4))).expect("start");
    let first = h
        .fetch(Fetch::get(site.url("/a")))
        .await
        .expect("the bucket's token");
    assert_eq!(first.status, 200);
    let second = h.fetch(Fetch::get(site.url("/b")));
    let stop = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        h.shutdown(Duration::from_secs(5)).await;
    };
    let (reply, ()) = futures_util::future::join(second, stop).await;
    let e = reply.expect_err("a throttle is not the URL's answer");
    assert_eq!(e.kind, FetchErrorKind::Shutdown, "{e}");
    assert_eq!((e.attempts, e.throttled), (1, 1), "{e}");
    assert_eq!(site.stats().limited, 1, "{:?}", site.stats());
}

#[actix_rt::test]
async fn broken_pages_retried_at_the_end_of_a_crawl_do_not_slow_their_host() {
    // An unlimited site where every tenth page answers 500 every time. Once the first
    // attempts are done, only those pages' retries are sent, and all of them fail: read
    // as the site's health, that is a site failing everything, and its rate would be cut
    // again and again while the last retries wait.
    let site = paused_site(SiteConfig {
        pages: Some(failing_under("/broken/")),
        ..SiteConfig::default()
    });
    let mut s = settings(exits(2, 32));
    s.limiter.algorithm = Algorithm::Aimd;
    s.crawler.max_retries = 3;
    // The retry budget's own pace is another test's (0.3 retries per first attempt
    // here, which 0.2 would spread over a window).
    s.crawler.retry_budget = 1.0;
    // Retries a second or more after their first attempt: most come once the first
    // attempts are done, as a hung page's do after its timeouts.
    s.crawler.retry_backoff_base_ms = 1_000;
    s.crawler.retry_backoff_max_ms = 4_000;
    let h = Crawler::start(s).expect("start");
    let urls = mixed_urls(&site, 2000, ("broken", 10));
    let replies = fetch_all(&h, &urls).await;
    let limits = h.limits().await;
    h.shutdown(Duration::from_secs(1)).await;

    assert_ended(&urls, &replies, "/broken/");
    let log = site.requests();
    let mut asked: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &log {
        *asked.entry(r.path.as_str()).or_default() += 1;
    }
    for (path, n) in &asked {
        let want = if path.starts_with("/broken/") { 4 } else { 1 };
        assert_eq!(*n, want, "{path} asked {n} times");
    }
    // The retries end within seconds of the first attempts: three backoffs (of at most
    // 1, 2 and 4 s here) and the host's pacing at the rate it had reached. Counting the
    // retries' errors, the rate is cut hundreds of times to 0.1/s and the tail is
    // forty minutes.
    let last_first = log
        .iter()
        .filter(|r| r.path.starts_with("/page/"))
        .map(|r| r.arrived)
        .max()
        .unwrap();
    let last = log.iter().map(|r| r.arrived).max().unwrap();
    let tail = last.duration_since(last_first);
    assert!(
        tail < Duration::from_secs(10),
        "the retries took {tail:?} more"
    );
    let host = &limits[0].lanes[0];
    assert!(
        host.decreases <= 2,
        "the rate was cut {} times: {host:?}",
        host.decreases
    );
}

#[actix_rt::test]
async fn a_dead_host_retries_on_its_own_budget_not_on_the_credit_of_a_healthy_one() {
    // One host answers every page, the other none (500 each time). A budget for the
    // whole crawl would let the dead host's retries spend what the healthy host's
    // thousand first attempts earned (200); its own allows 0.2 of its 80 first attempts
    // plus the reserve, 116 in a 10 s window, and the rest of its 240 retries wait.
    let healthy = paused_site(SiteConfig::default());
    // Paused once, above: the second site only starts on the same runtime, on an
    // address of its own (the crawler keys hosts by address, not by port).
    let dead = TestSite::start_on_runtime_at(
        SiteConfig {
            pages: Some(failing_under("/")),
            ..SiteConfig::default()
        },
        support::ip("127.0.1.7"),
    );
    let mut s = settings(exits(2, 32));
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 3;
    let h = Crawler::start(s).expect("start");
    let mut urls: Vec<String> = (0..1000).map(|i| healthy.url(&format!("/p/{i}"))).collect();
    urls.extend((0..80).map(|i| dead.url(&format!("/d/{i}"))));
    let replies = fetch_all(&h, &urls).await;
    h.shutdown(Duration::from_secs(1)).await;

    assert_ended(&urls, &replies, "/d/");
    let asked = dead.requests();
    assert_eq!(asked.len(), 80 * 4, "every dead page tried four times");
    let first = asked.iter().map(|r| r.arrived).min().unwrap();
    let early = asked
        .iter()
        .filter(|r| r.arrived.duration_since(first) < Duration::from_secs(9))
        .count();
    // 80 first attempts and at most 116 retries (a slot of slack: 130).
    assert!(
        early <= 80 + 130,
        "{early} requests to the dead host in its first 9 s"
    );
    assert_eq!(healthy.stats().requests, 1000);
}
