//! A site that holds what it accepts: nginx `limit_req` with `burst=` and without
//! `nodelay`, per client address, reached through four exits bound to 127.0.0.2 …
//! 127.0.0.5. What exceeds the rate waits its turn at the site, and only past the burst
//! is it refused, so the refusals come back before the acceptances sent ahead of them. On
//! paused time with the site on the test's runtime; the server's counts judged.

mod support;

use std::time::Duration;

use exitcrawl::config::Settings;
use exitcrawl_actors::{Crawler, Fetch};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig};
use futures_util::stream::{FuturesUnordered, StreamExt};
use support::{exits, paused_site, timeouts_for_paused_time};

#[actix_rt::test]
async fn a_per_address_limit_that_holds_what_it_accepts_is_crawled_near_its_rate() {
    // 10 r/s per address with `burst=10`, 503 without Retry-After: 40 r/s through four
    // exits, a request up to a second held at the site before it is served.
    let site = paused_site(SiteConfig {
        limit: Limit::Delayed {
            per_peer: true,
            rate: Rate::per_second(10, 10),
        },
        reject_status: 503,
        retry_after: RetryAfter::Omit,
        latency: Duration::from_millis(50),
        latency_noise: 0.5,
        fast_rejections: true,
        ..SiteConfig::default()
    });
    let mut s = Settings::with_exits(exits(4, 64));
    s.crawl.robots = false;
    s.crawler.concurrency = 64;
    s.crawler.max_retries = 50;
    s.crawler.retry_budget = 1.0;
    timeouts_for_paused_time(&mut s);
    let h = Crawler::start(s).expect("start");
    let since = tokio::time::Instant::now().into_std();
    const PAGES: usize = 1_200;
    let mut urls = (0..PAGES).map(|i| site.url(&format!("/p/{i}")));
    let mut in_flight = FuturesUnordered::new();
    let mut ok = 0;
    loop {
        while in_flight.len() < 64 {
            let Some(u) = urls.next() else { break };
            in_flight.push(h.fetch(Fetch::get(u)));
        }
        match in_flight.next().await {
            Some(r) => ok += usize::from(r.is_ok_and(|r| r.status == 200)),
            None => break,
        }
    }
    h.shutdown(Duration::from_secs(1)).await;
    assert_eq!(ok, PAGES, "every URL ends 200");
    let log = site.requests();
    assert!(
        log.iter().any(|r| r.queued >= Duration::from_millis(500)),
        "the site held requests"
    );
    assert!(
        log.iter().any(|r| r.status == 503),
        "and refused past its burst"
    );
    let warmup = since + Duration::from_secs(5);
    let after: Vec<_> = log.iter().filter(|r| r.arrived >= warmup).collect();
    let refused = after.iter().filter(|r| r.status == 503).count();
    let served = after.iter().filter(|r| r.status == 200).count();
    let last = log.iter().map(|r| r.arrived).max().unwrap_or(warmup);
    let span = last.saturating_duration_since(warmup).as_secs_f64();
    let goodput = served as f64 / span / 40.0;
    eprintln!(
        "server: {} requests, {refused} of {} refused after the warm-up; goodput after it {goodput:.3}",
        log.len(),
        after.len()
    );
    assert!(
        refused as f64 <= 0.01 * after.len() as f64,
        "{refused} of {} refused after the warm-up",
        after.len()
    );
    // Measured 0.89–0.93 in seventeen runs of eighteen and 0.79 in one, where the first
    // refusal came while most acceptances were still held: it reads as a host that
    // answered too little to say its rate, crawled at the start rate for about ten
    // seconds (docs/limiter.md, where it falls short). This guards against a collapse.
    assert!(goodput >= 0.70, "goodput after the warm-up {goodput:.3}");
}
