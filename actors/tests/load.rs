//! Load: 10,000 URLs, all submitted at once, at concurrency 1,000 through four exits
//! against a fast local site. Every URL gets exactly one reply, the site sees every path
//! exactly once, and the scheduler's queue never holds more than `queue_capacity` (the
//! rest wait for a slot). The 100,000-URL version is `examples/bench_load.rs`.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, Fetch};
use exitcrawl_testsite::{SiteConfig, TestSite};
use futures_util::future::join_all;

const URLS: usize = 10_000;
const CONCURRENCY: u32 = 1_000;
const EXITS: u8 = 4;
const QUEUE_CAPACITY: u32 = 2_000;

#[actix_rt::test]
async fn ten_thousand_urls_at_concurrency_1000_one_reply_each_bounded_queue() {
    let site = TestSite::start(SiteConfig {
        body_size: 64,
        // Long enough for the answers to overlap: the site then sees ~1,000 in flight (a
        // debug client does not turn requests around fast enough with a shorter one).
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let exits = (2..2 + EXITS)
        .map(|i| {
            let ip: IpAddr = format!("127.0.0.{i}").parse().expect("ip");
            let mut e = ExitSettings::new(format!("e{i}"), ip);
            e.max_concurrent = CONCURRENCY / u32::from(EXITS);
            e
        })
        .collect();
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = CONCURRENCY;
    s.crawler.per_host_connections = CONCURRENCY / u32::from(EXITS);
    s.crawler.queue_capacity = QUEUE_CAPACITY;
    s.crawler.timeout_ms = 10_000;
    s.crawler.connect_timeout_ms = 5_000;
    let h = Crawler::start(s).expect("start");

    // Sample the queue depth gauge every millisecond while the crawl runs.
    let done = Rc::new(Cell::new(false));
    let peak = Rc::new(Cell::new(0i64));
    let sampler = {
        let (done, peak, m) = (done.clone(), peak.clone(), h.metrics().clone());
        actix_rt::spawn(async move {
            // Bounded: the crawl's own timeout below ends it at the latest.
            for _ in 0..120_000 {
                peak.set(peak.get().max(m.queue_depth()));
                if done.get() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };

    let urls: Vec<String> = (0..URLS).map(|i| site.url(&format!("/l/{i}"))).collect();
    let t0 = Instant::now();
    let all = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone()))));
    let replies = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("the crawl finishes");
    let elapsed = t0.elapsed();
    done.set(true);
    let _ = sampler.await;
    let peak = peak.get().max(h.metrics().queue_depth());

    // Exactly one reply per URL, each for its own URL, all 200.
    assert_eq!(replies.len(), URLS);
    let mut replied: HashMap<&str, u32> = HashMap::new();
    for (r, u) in replies.iter().zip(&urls) {
        let resp = r.as_ref().unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(&resp.url, u);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.attempts, 1, "{u}");
        *replied.entry(resp.url.as_str()).or_default() += 1;
    }
    assert_eq!(replied.len(), URLS, "duplicated or missing replies");
    // The site saw each path once, never more than the concurrency at once.
    let stats = site.stats();
    assert_eq!(stats.requests, URLS as u64);
    let mut seen: HashMap<String, u32> = HashMap::new();
    for r in site.requests() {
        *seen.entry(r.path).or_default() += 1;
    }
    assert_eq!(seen.len(), URLS);
    assert!(seen.values().all(|n| *n == 1));
    assert!(
        stats.peak_in_flight <= u64::from(CONCURRENCY)
            && stats.peak_in_flight >= u64::from(CONCURRENCY) / 2,
        "site peak in flight {}",
        stats.peak_in_flight
    );
    // The queue stayed bounded (the other fetches waited for a slot).
    assert!(
        peak <= i64::from(QUEUE_CAPACITY),
        "peak queue depth {peak} > {QUEUE_CAPACITY}"
    );
    assert!(peak > 0, "the queue was never sampled with work in it");
    assert_eq!(h.metrics().queue_depth(), 0);
    eprintln!(
        "{URLS} URLs at concurrency {CONCURRENCY} through {EXITS} exits in {elapsed:?}; \
         peak queue depth {peak} (capacity {QUEUE_CAPACITY}), site peak in flight {}",
        stats.peak_in_flight
    );
}
