//! `--demo`: a site allowing 50 requests/s (burst 5) per client IP, four exits on
//! 127.0.0.1..127.0.0.4 with the default adaptive limiter, retries until every URL is 200.

use std::net::{IpAddr, Ipv4Addr};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};

use super::term::note;

pub fn setup() -> (TestSite, Settings) {
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::per_second(50, 5)),
        retry_after: RetryAfter::Computed,
        log_requests: false,
        ..SiteConfig::default()
    });
    let exits = (1..=4)
        .map(|i| ExitSettings::new(format!("lo{i}"), IpAddr::V4(Ipv4Addr::new(127, 0, 0, i))))
        .collect();
    let mut s = Settings::with_exits(exits);
    debug_assert_eq!(s.limiter.algorithm, Algorithm::Aimd);
    s.crawler.concurrency = 64;
    s.crawler.max_retries = 100;
    s.crawler.retry_budget = 1.0;
    s.crawler.retry_backoff_base_ms = 100;
    s.crawler.retry_backoff_max_ms = 2_000;
    s.crawler.timeout_ms = 5_000;
    s.crawler.connect_timeout_ms = 2_000;
    (site, s)
}

/// What the demo site saw from each exit.
pub fn report(site: &TestSite) {
    let st = site.stats();
    let peers: Vec<String> = st
        .peers
        .iter()
        .filter(|(_, p)| p.requests > 0)
        .map(|(ip, p)| format!("{ip} {} req {} 429", p.requests, p.limited))
        .collect();
    note(&format!("site saw: {}", peers.join(", ")));
}
