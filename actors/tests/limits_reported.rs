//! What the crawler reports of its limits: `CrawlerHandle::limits()` lists what the
//! adaptive limiter learned, and nothing without one (`algorithm = "none"`, or a fixed
//! algorithm, which paces at its configured rate); the per-host gauges
//! (`exitcrawl_limiter_rate`, `exitcrawl_limiter_scope`) are exported for a host only
//! under a label of its own, never folded into `host="all"` or `"other"`, where one
//! host's value would pass for every host's. On paused time, the sites on the test's
//! runtime.

mod support;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, HostLimits};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};
use support::{exits, ip, paused_site, timeouts_for_paused_time};

/// A site of one request per second that refuses the rest with `Retry-After: 1`.
fn limited() -> SiteConfig {
    SiteConfig {
        limit: Limit::Global(Rate::per_second(1, 1)),
        retry_after: RetryAfter::Fixed(1),
        ..SiteConfig::default()
    }
}

fn settings(algorithm: Algorithm, host_labels: u32) -> Settings {
    let mut s = Settings::with_exits(exits(2, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = algorithm;
    s.crawler.max_retries = 20;
    s.metrics.host_labels = host_labels;
    timeouts_for_paused_time(&mut s);
    s
}

/// Fetch `n` pages of each site, the first site's first page alone (its host is the first
/// one met), every page answered 200 in the end.
async fn fetch_all(h: &CrawlerHandle, sites: &[&TestSite], n: usize) {
    let first = h.fetch(Fetch::get(sites[0].url("/first"))).await;
    assert_eq!(first.expect("fetched").status, 200);
    let urls: Vec<String> = sites
        .iter()
        .flat_map(|s| (0..n).map(|i| s.url(&format!("/p/{i}"))))
        .collect();
    let replies = futures_util::future::join_all(urls.iter().map(|u| h.fetch(Fetch::get(u)))).await;
    for (u, r) in urls.iter().zip(replies) {
        assert_eq!(r.unwrap_or_else(|e| panic!("{u}: {e}")).status, 200, "{u}");
    }
}

/// The samples of `metric` as (labels, value).
fn series(h: &CrawlerHandle, metric: &str) -> Vec<(String, f64)> {
    let prefix = format!("{metric}{{");
    h.metrics()
        .encode()
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once("} ")?;
            Some((labels.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// A throttling site crawled with `algorithm`: the limits the crawler reports, the
/// limiter-rate series.
async fn throttled_crawl(algorithm: Algorithm) -> (Vec<HostLimits>, Vec<(String, f64)>) {
    let site = paused_site(limited());
    let h = Crawler::start(settings(algorithm, 10)).expect("start");
    fetch_all(&h, &[&site], 6).await;
    assert!(
        site.stats().limited > 0,
        "the site refused some: the limiter heard throttles"
    );
    let limits = h.limits().await;
    let rates = series(&h, "exitcrawl_limiter_rate");
    h.shutdown(Duration::from_secs(1)).await;
    (limits, rates)
}

#[actix_rt::test]
async fn without_a_limiter_no_limit_is_reported() {
    let (limits, rates) = throttled_crawl(Algorithm::None).await;
    assert!(limits.is_empty(), "no limit in force: {limits:?}");
    assert!(rates.is_empty(), "no rate in force: {rates:?}");
}

#[actix_rt::test]
async fn a_fixed_algorithm_reports_no_learned_rate_and_exports_its_configured_one() {
    let configured = settings(Algorithm::TokenBucket, 10).limiter.initial_rps;
    let (limits, rates) = throttled_crawl(Algorithm::TokenBucket).await;
    assert!(limits.is_empty(), "nothing learned: {limits:?}");
    // The pauses the throttles made are told at the rate the pacing runs at.
    assert!(!rates.is_empty(), "the paused keys' rate is exported");
    for (labels, rps) in &rates {
        assert_eq!(*rps, configured, "{labels}: the configured rate");
    }
}

/// Two hosts at different rates (one refuses beyond 1 req/s, the other takes anything),
/// crawled with `host_labels`: the limits and the two gauges' series.
async fn two_hosts(host_labels: u32) -> (Vec<HostLimits>, Vec<(String, f64)>, Vec<(String, f64)>) {
    let slow = paused_site(limited());
    let fast = TestSite::start_on_runtime_at(SiteConfig::default(), ip("127.0.0.9"));
    let h = Crawler::start(settings(Algorithm::Aimd, host_labels)).expect("start");
    fetch_all(&h, &[&slow, &fast], 12).await;
    let limits = h.limits().await;
    let rates = series(&h, "exitcrawl_limiter_rate");
    let scopes = series(&h, "exitcrawl_limiter_scope");
    h.shutdown(Duration::from_secs(1)).await;
    (limits, rates, scopes)
}

#[actix_rt::test]
async fn gauges_of_hosts_folded_into_one_label_are_not_exported() {
    let (limits, rates, scopes) = two_hosts(0).await;
    let host_rate = |h: &HostLimits| h.lanes[0].rps;
    assert_eq!(limits.len(), 2, "{limits:?}");
    assert_ne!(
        host_rate(&limits[0]),
        host_rate(&limits[1]),
        "the hosts' rates differ: {limits:?}"
    );
    // Every host's key names its host: with host labels off, each would fold into
    // `host="all"`, where the last host to change would pass for both.
    assert!(rates.is_empty(), "{rates:?}");
    assert!(scopes.is_empty(), "{scopes:?}");
}

#[actix_rt::test]
async fn a_named_host_keeps_its_gauges_and_the_others_fold_into_none() {
    let (limits, rates, scopes) = two_hosts(1).await;
    // 127.0.0.1, the slow site, was met first: it has the one label.
    let named = limits
        .iter()
        .find(|l| l.host == "127.0.0.1")
        .expect("the first host's limits");
    let host_key = r#"exit="*",host="127.0.0.1""#;
    let rate = rates
        .iter()
        .find(|(l, _)| l == host_key)
        .unwrap_or_else(|| panic!("its budget's rate: {rates:?}"));
    // Its own rate: the site's limit of 1 req/s was learned (the limiter's last word,
    // which may have moved a little since), not the other host's, which takes anything.
    let other = limits
        .iter()
        .find(|l| l.host != "127.0.0.1")
        .expect("the other host");
    assert!(
        rate.1 < 2.0 && other.lanes[0].rps > 2.0,
        "its own rate: {rates:?}; {named:?}; {other:?}"
    );
    for (labels, _) in rates.iter().chain(&scopes) {
        assert!(
            labels.contains(r#"host="127.0.0.1""#),
            "only the named host has gauges: {labels}"
        );
    }
    let ones = scopes.iter().filter(|(_, v)| *v == 1.0).count();
    assert!(ones <= 1, "one scope at a time: {scopes:?}");
}
