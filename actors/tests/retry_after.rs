//! Where a `Retry-After` binds, as the site sees it: a host learned through four exits
//! (127.0.0.2 … 127.0.0.5) pauses only the exit that read a probe's `Retry-After`, and the
//! others go on at the cut rate; the exit itself sends nothing until the pause is over.
//! Judged from the server's log on paused time (the site on the test's runtime), so a
//! loaded machine cannot stretch the pauses.

mod support;

use support::{exits, paused_site, timeouts_for_paused_time};

use std::time::Duration;

use exitcrawl::config::Settings;
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig};
use futures_util::stream::{FuturesUnordered, StreamExt};

/// The default limiter (aimd, scope auto) through four exits, generous retries so every
/// URL ends 200, timeouts for paused time.
fn settings() -> Settings {
    let mut s = Settings::with_exits(exits(4, 64));
    s.crawl.robots = false;
    s.crawler.concurrency = 64;
    s.crawler.max_retries = 50;
    s.crawler.retry_budget = 1.0;
    timeouts_for_paused_time(&mut s);
    s
}

/// Fetch `urls` with at most 64 in flight; how many ended 200.
async fn crawl(h: &CrawlerHandle, urls: Vec<String>) -> usize {
    let mut pending = urls.into_iter();
    let mut in_flight = FuturesUnordered::new();
    let mut ok = 0;
    loop {
        while in_flight.len() < 64 {
            let Some(u) = pending.next() else { break };
            in_flight.push(async move { h.fetch(Fetch::get(u)).await });
        }
        match in_flight.next().await {
            Some(Ok(r)) if r.status == 200 => ok += 1,
            Some(_) => {}
            None => return ok,
        }
    }
}

#[actix_rt::test]
async fn a_learned_hosts_retry_after_pauses_the_exit_that_read_it_while_the_others_go_on() {
    // One bucket for the host, whatever the client: 40/s, burst 4, `Retry-After: 1` on
    // every 429. 3,000 pages take 75 s at the site's rate: the first throttle ends slow
    // start (the host is being learned: the whole host pauses), later ones end probes.
    let latency = Duration::from_millis(20);
    let site = paused_site(SiteConfig {
        limit: Limit::Global(Rate::per_second(40, 4)),
        retry_after: RetryAfter::Fixed(1),
        latency,
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings()).expect("start");
    let urls: Vec<_> = (0..3000).map(|i| site.url(&format!("/p/{i}"))).collect();
    assert_eq!(crawl(&h, urls).await, 3000, "every URL ends 200");
    let limits = h.limits().await;
    assert_eq!(limits.len(), 1);
    assert_eq!(limits[0].retry_after_binds, "exit", "{limits:?}");
    h.shutdown(Duration::from_secs(1)).await;

    let log = site.requests();
    let throttles: Vec<_> = log.iter().filter(|r| r.status == 429).collect();
    assert!(
        throttles.len() >= 2,
        "slow start's throttle and a probe's: {}",
        throttles.len()
    );
    let mut went_on = 0;
    for t in &throttles {
        // Paused time: no time on the wire, the 429 is read `latency` after it arrived.
        let read = t.arrived + latency;
        let second = |r: &&exitcrawl_testsite::RequestRecord| {
            r.arrived >= read && r.arrived < read + Duration::from_secs(1)
        };
        let own: Vec<_> = log
            .iter()
            .filter(second)
            .filter(|r| r.peer == t.peer)
            .collect();
        assert!(
            own.is_empty(),
            "{} sent inside the Retry-After second it read: {own:?}",
            t.peer
        );
        let others = log
            .iter()
            .filter(second)
            .filter(|r| r.peer != t.peer)
            .count();
        if others >= 10 {
            went_on += 1;
        }
    }
    // A pause of the whole host would leave every such second empty.
    assert!(
        went_on >= 1,
        "no Retry-After second in which the other exits went on: {} throttles",
        throttles.len()
    );
}
