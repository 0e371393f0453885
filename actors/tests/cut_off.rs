//! Attempts a shutdown cuts off in flight: the fetch's error names the exit its attempt
//! left through, and the exit counts the attempt as a request sent that ended without an
//! answer (`error`, class `none`), not as one that never left it. Both ways an attempt
//! runs are cut: on the caller's task (the direct path) and on an exit's worker (a fetch
//! that waited in the queue). On paused time, the sites on the test's runtime.

mod support;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, ExitStats, Fetch, FetchError, FetchErrorKind};
use exitcrawl_testsite::{SiteConfig, TestSite};
use futures_util::future::{join, join_all};
use support::{eventually, exits, ip, paused_site, timeouts_for_paused_time};

const OUTCOMES: [&str; 3] = ["ok", "throttled", "error"];
const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "none"];

/// Requests exit `e` sent, answered or not: the counters behind
/// `exitcrawl_requests_total`, over every outcome and class.
fn requests(h: &CrawlerHandle, e: &ExitStats) -> u64 {
    let m = h.metrics();
    OUTCOMES
        .iter()
        .flat_map(|o| CLASSES.iter().map(move |c| (*o, *c)))
        .map(|(o, c)| m.exit_requests(&e.name, e.source_ip, o, c))
        .sum()
}

#[actix_rt::test]
async fn attempts_cut_off_by_a_shutdown_name_their_exit_and_count_as_requests() {
    // The slow site answers long after the grace period ends; the fast one at once.
    let slow = paused_site(SiteConfig {
        latency: Duration::from_secs(60),
        ..SiteConfig::default()
    });
    let fast = TestSite::start_on_runtime_at(SiteConfig::default(), ip("127.0.0.9"));
    let mut s = Settings::with_exits(exits(2, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = 4;
    s.crawler.queue_capacity = 16;
    timeouts_for_paused_time(&mut s);
    let h = Crawler::start(s).expect("start");
    // Two fast and two slow fetches fill the concurrency on the direct path; the other
    // slow ones queue, and two of them go out through the exits' workers once the fast
    // ones are answered. Two stay queued and are never sent.
    let urls: Vec<String> = (0..2)
        .map(|i| fast.url(&format!("/fast/{i}")))
        .chain((0..6).map(|i| slow.url(&format!("/slow/{i}"))))
        .collect();
    let fetches = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone()))));
    let stop = async {
        let four = eventually(Duration::from_secs(30), || {
            std::future::ready(slow.stats().requests == 4)
        })
        .await;
        assert!(four, "four slow fetches reach the site");
        h.shutdown(Duration::from_secs(1)).await;
    };
    let (replies, ()) = join(fetches, stop).await;

    for r in &replies[..2] {
        assert_eq!(r.as_ref().expect("answered").status, 200);
    }
    let cut = replies[2..]
        .iter()
        .map(|r| r.as_ref().expect_err("cut off or never sent"))
        .collect::<Vec<&FetchError>>();
    assert!(
        cut.iter().all(|e| e.kind == FetchErrorKind::Shutdown),
        "{cut:?}"
    );
    let (sent, unsent): (Vec<&FetchError>, Vec<&FetchError>) =
        cut.iter().partition(|e| e.attempts > 0);
    assert_eq!(sent.len(), 4, "{cut:?}");
    assert_eq!(unsent.len(), 2, "{cut:?}");
    // An attempt was made: the error says through which exit; none: no exit.
    for e in &sent {
        assert_eq!(e.attempts, 1, "{e:?}");
        assert!(e.exit.is_some(), "a cut-off attempt names its exit: {e:?}");
    }
    assert!(unsent.iter().all(|e| e.exit.is_none()), "{unsent:?}");

    // What each exit sent, as the sites saw it (on arrival), by source address.
    let (slow_seen, fast_seen) = (slow.stats(), fast.stats());
    let seen = |ip| slow_seen.peer(ip).requests + fast_seen.peer(ip).requests;
    let stats = h.stats().await;
    for e in &stats {
        let sent_through = seen(e.source_ip);
        let requests = requests(&h, e);
        assert_eq!(
            requests, sent_through,
            "{}: requests counted vs seen by the sites",
            e.name
        );
        assert_eq!(
            e.total.saturating_sub(requests),
            0,
            "{}: nothing counted as never sent ({} started)",
            e.name,
            e.total
        );
        let named = sent
            .iter()
            .filter(|x| x.exit.as_deref() == Some(e.name.as_str()))
            .count() as u64;
        let slow_through = slow_seen.peer(e.source_ip).requests;
        assert_eq!(named, slow_through, "{}: the errors name it", e.name);
    }
    let errors: u64 = stats
        .iter()
        .map(|e| {
            h.metrics()
                .exit_requests(&e.name, e.source_ip, "error", "none")
        })
        .sum();
    assert_eq!(errors, 4, "the cut-off attempts ended without an answer");
    let m = h.metrics();
    assert_eq!(m.urls_done(), m.urls_total());
}
