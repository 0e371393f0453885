//! The two ways a fetch gets in — a `Fetch` message to the scheduler's `Addr` (other
//! actors) and `CrawlerHandle::fetch` (its own channel) — share one queue, one
//! backpressure and one reply per fetch; and `shutdown` answers every fetch, queued or in
//! flight, whichever way it came in. Real site on 127.0.0.1, exits on 127.0.0.2/3.

mod support;

use support::exits;

use std::collections::HashMap;
use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchError, FetchErrorKind, FetchResponse};
use exitcrawl_testsite::{SiteConfig, TestSite};
use futures_util::future::{join, join_all, LocalBoxFuture};
use futures_util::FutureExt as _;

type Reply = Result<FetchResponse, FetchError>;

/// Fetches of `urls`, handed in both ways in turn: even ones by `CrawlerHandle::fetch`,
/// odd ones as `Fetch` messages to the scheduler's `Addr`.
fn both_ways(h: &CrawlerHandle, urls: Vec<String>) -> Vec<LocalBoxFuture<'_, Reply>> {
    let addr = h.scheduler();
    urls.into_iter()
        .enumerate()
        .map(|(i, url)| -> LocalBoxFuture<'_, Reply> {
            if i % 2 == 0 {
                Box::pin(h.fetch(Fetch::get(url)))
            } else {
                let addr = addr.clone();
                Box::pin(
                    async move { addr.send(Fetch::get(url)).await.expect("scheduler running") },
                )
            }
        })
        .collect()
}

fn settings(concurrency: u32, queue_capacity: u32) -> Settings {
    let mut s = Settings::with_exits(exits(2, concurrency));
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = concurrency;
    s.crawler.queue_capacity = queue_capacity;
    s.crawler.timeout_ms = 5_000;
    s.crawler.connect_timeout_ms = 2_000;
    s
}

#[actix_rt::test]
async fn both_ways_in_share_the_queue_and_each_fetch_gets_one_reply() {
    let site = TestSite::start(SiteConfig {
        // Slow enough that the queue (capacity 4) fills and both ways must wait for slots.
        latency: Duration::from_millis(20),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(2, 4)).expect("start");
    let addr = h.scheduler();
    let urls: Vec<String> = (0..30).map(|i| site.url(&format!("/in/{i}"))).collect();
    let mut fetches = both_ways(&h, urls.clone());
    // Invalid URLs are answered at once on both ways, queue full or not.
    fetches.push(Box::pin(h.fetch(Fetch::get("ht!tp://x"))));
    fetches.push(
        async move { addr.send(Fetch::get("mailto:a@b")).await.expect("running") }.boxed_local(),
    );
    let replies = tokio::time::timeout(Duration::from_secs(30), join_all(fetches))
        .await
        .expect("every fetch is answered");
    assert_eq!(replies.len(), 32);
    for (r, u) in replies.iter().zip(&urls) {
        let resp = r.as_ref().unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(&resp.url, u);
        assert_eq!(resp.status, 200);
    }
    for r in &replies[30..] {
        let e = r.as_ref().expect_err("invalid URL");
        assert_eq!(e.kind, FetchErrorKind::InvalidUrl, "{e}");
        assert_eq!(e.attempts, 0);
    }
    // The site saw every path once and never more than the concurrency at once.
    let mut seen: HashMap<String, u32> = HashMap::new();
    for r in site.requests() {
        *seen.entry(r.path).or_default() += 1;
    }
    assert_eq!(seen.len(), 30, "{seen:?}");
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    assert!(site.stats().peak_in_flight <= 2);
    let m = h.metrics();
    assert_eq!(m.urls_total.get(), 32);
    assert_eq!(m.urls_done.get(), 32);
    assert_eq!(m.queue_depth.get(), 0);
}

#[actix_rt::test]
async fn shutdown_answers_every_fetch_queued_or_in_flight() {
    let site = TestSite::start(SiteConfig {
        // Longer than the grace period: fetches in flight at shutdown cannot finish.
        latency: Duration::from_secs(3),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(2, 8)).expect("start");
    let urls = (0..12).map(|i| site.url(&format!("/s/{i}"))).collect();
    let fetches = both_ways(&h, urls);
    let all = join_all(fetches);
    let stop = async {
        // Two fetches reach the site (the concurrency), the rest wait: queued (8) or for a
        // queue slot (2).
        let two = support::eventually(Duration::from_secs(5), || {
            std::future::ready(site.stats().requests == 2)
        })
        .await;
        assert!(two, "two fetches reach the site");
        h.shutdown(Duration::from_millis(200)).await;
    };
    let (replies, ()) = tokio::time::timeout(Duration::from_secs(10), join(all, stop))
        .await
        .expect("shutdown answers every fetch within its grace period");
    assert_eq!(replies.len(), 12);
    for r in &replies {
        let e = r
            .as_ref()
            .expect_err("no fetch can finish before the grace period ends");
        assert_eq!(e.kind, FetchErrorKind::Shutdown, "{e}");
    }
    // The two cut off in flight report their attempt; the ten others never reached the site.
    let attempted = replies
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.attempts == 1))
        .count();
    assert_eq!(attempted, 2);
    assert_eq!(site.stats().requests, 2);
    // After shutdown, both ways answer at once.
    let late = h.fetch(Fetch::get(site.url("/late"))).await;
    assert_eq!(late.expect_err("shut down").kind, FetchErrorKind::Shutdown);
    let late = h
        .scheduler()
        .send(Fetch::get(site.url("/late2")))
        .await
        .expect("the scheduler still answers");
    assert_eq!(late.expect_err("shut down").kind, FetchErrorKind::Shutdown);
    let m = h.metrics();
    assert_eq!(m.urls_done.get(), m.urls_total.get());
}

#[actix_rt::test]
async fn exits_on_arbiters_of_their_own_serve_both_ways_in() {
    let site = TestSite::start(SiteConfig::default());
    let mut s = settings(4, 16);
    s.exits = exits(2, 2);
    s.crawler.arbiters = exitcrawl::config::Arbiters::PerExit;
    let h = Crawler::start(s).expect("start");
    let urls = (0..40).map(|i| site.url(&format!("/a/{i}"))).collect();
    let fetches = both_ways(&h, urls);
    let replies = tokio::time::timeout(Duration::from_secs(30), join_all(fetches))
        .await
        .expect("every fetch is answered");
    assert!(replies
        .iter()
        .all(|r| r.as_ref().is_ok_and(|r| r.status == 200)));
    // Both exits carried requests, each from its own source address.
    let ips: std::collections::HashSet<_> = site.requests().iter().map(|r| r.peer).collect();
    assert_eq!(ips.len(), 2, "{ips:?}");
    let stats = h.stats().await;
    assert_eq!(stats.iter().map(|e| e.total).sum::<u64>(), 40);
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn a_body_that_arrives_after_its_head_is_read_whole() {
    // The head comes at once, the 8 body bytes 20 ms apart: the exit reads what is there,
    // then the rest within the body timeout.
    let site = TestSite::start(SiteConfig::default());
    let h = Crawler::start(settings(2, 4)).expect("start");
    let url = site.fault_url("/fault/trickle8x20");
    let direct = h.fetch(Fetch::get(url.clone())).await.expect("answer");
    assert_eq!(direct.status, 200);
    assert_eq!(direct.body.len(), 8);
    // The same through the queue (a Fetch message), on an exit worker.
    let queued = h
        .scheduler()
        .send(Fetch::get(url))
        .await
        .expect("running")
        .expect("answer");
    assert_eq!(queued.status, 200);
    assert_eq!(queued.body.len(), 8);
}

#[actix_rt::test]
async fn a_fetch_its_caller_gives_up_on_gives_its_capacity_back() {
    // Concurrency 1 and a site that takes 300 ms: the first fetch is dropped by its caller
    // mid-flight (a timeout around `CrawlerHandle::fetch`), the second before it is ever
    // polled. The next fetch must still get the crawler's one slot, and the figures must
    // add up.
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(1, 4)).expect("start");
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        h.fetch(Fetch::get(site.url("/dropped"))),
    )
    .await;
    assert!(
        gave_up.is_err(),
        "the site answers after 300 ms: {gave_up:?}"
    );
    // A fetch dropped before it is ever polled takes nothing and sends nothing.
    drop(h.fetch(Fetch::get(site.url("/never-polled"))));
    let next = tokio::time::timeout(
        Duration::from_secs(5),
        h.fetch(Fetch::get(site.url("/next"))),
    )
    .await
    .expect("the slot came back: the next fetch is answered")
    .expect("answer");
    assert_eq!(next.status, 200);
    let m = h.metrics();
    assert_eq!(m.urls_total.get(), 2);
    assert_eq!(
        m.urls_done.get(),
        2,
        "the fetch dropped mid-flight counts as done"
    );
    assert_eq!(site.requests().len(), 2, "the unpolled fetch sent nothing");
    h.shutdown(Duration::from_secs(1)).await;
}
