//! The metrics endpoint, scraped with a real HTTP request and parsed with a Prometheus
//! text parser, agrees with what the crawl itself reports and with what the server saw.

mod support;

use support::ip;

use std::time::Duration;

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, Fetch};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::future::join_all;

/// Sum of the samples of `name` whose labels match every `(key, value)` in `filter`.
fn sum(samples: &[prometheus_parse::Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| filter.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

#[actix_rt::test]
async fn scraped_counters_match_the_crawl() {
    // 30/s per peer with burst 3 and no Retry-After: some 429s are certain at the start.
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::per_second(30, 3)),
        retry_after: RetryAfter::Omit,
        ..SiteConfig::default()
    });
    let mut s = Settings::with_exits(vec![
        ExitSettings::new("e2", ip("127.0.0.2")),
        ExitSettings::new("e3", ip("127.0.0.3")),
    ]);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::Aimd;
    s.limiter.initial_rps = 20.0;
    s.crawler.max_retries = 6;
    s.crawler.retry_backoff_base_ms = 20;
    s.crawler.retry_backoff_max_ms = 200;
    s.metrics.listen = Some("127.0.0.1:0".parse().expect("addr"));
    let h = Crawler::start(s).expect("start");
    let addr = h.metrics_addr().expect("endpoint bound");
    let urls: Vec<_> = (0..120).map(|i| site.url(&format!("/m/{i}"))).collect();
    let replies = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone())))).await;
    let ok = replies
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| r.status == 200))
        .count();
    let attempts: u32 = replies
        .iter()
        .map(|r| match r {
            Ok(r) => r.attempts,
            Err(e) => e.attempts,
        })
        .sum();

    let client = awc::Client::default();
    let mut resp = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .expect("scrape");
    assert!(resp.status().is_success());
    let ctype = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    let body = resp.body().limit(1 << 20).await.expect("body");
    let text = String::from_utf8(body.to_vec()).expect("utf-8");
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("parsable exposition");
    let samples = &scrape.samples;

    let site_stats = site.stats();
    let ok_metric = sum(samples, "exitcrawl_requests_total", &[("outcome", "ok")]);
    let thr_metric = sum(
        samples,
        "exitcrawl_requests_total",
        &[("outcome", "throttled")],
    );
    assert_eq!(ok_metric as usize, ok, "ok requests");
    assert_eq!(
        thr_metric as u64, site_stats.limited,
        "throttled = the site's 429s"
    );
    assert_eq!(
        (ok_metric + thr_metric) as u32,
        attempts,
        "every attempt counted once"
    );
    assert_eq!(
        site_stats.requests as u32, attempts,
        "the server saw every attempt"
    );
    assert_eq!(sum(samples, "exitcrawl_urls_total", &[]), 120.0);
    assert_eq!(sum(samples, "exitcrawl_urls_done_total", &[]), 120.0);
    assert_eq!(sum(samples, "exitcrawl_scheduler_queue_depth", &[]), 0.0);
    assert_eq!(sum(samples, "exitcrawl_exit_active_requests", &[]), 0.0);
    assert_eq!(sum(samples, "exitcrawl_exits_available_ratio", &[]), 1.0);
    // Per exit, the counters match the crawler's own stats.
    let stats = h.stats().await;
    for s in &stats {
        let counted = sum(samples, "exitcrawl_requests_total", &[("exit", &s.name)]);
        assert_eq!(counted as u64, s.total, "{}", s.name);
        assert!(s.total > 0, "both exits carried requests");
    }
    // Nothing is labelled by host unless opted in.
    assert!(samples
        .iter()
        .all(|s| s.labels.get("host").is_none_or(|h| h == "all")));
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn host_labels_name_the_first_hosts_and_fold_the_rest() {
    let first = TestSite::start(SiteConfig::default());
    let later = [
        TestSite::start_at(SiteConfig::default(), ip("127.0.0.21")),
        TestSite::start_at(SiteConfig::default(), ip("127.0.0.22")),
    ];
    let mut s = Settings::with_exits(vec![ExitSettings::new("e2", ip("127.0.0.2"))]);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::Aimd;
    s.metrics.listen = Some("127.0.0.1:0".parse().expect("addr"));
    s.metrics.host_labels = 1;
    let h = Crawler::start(s).expect("start");
    let addr = h.metrics_addr().expect("endpoint bound");
    // The first host is done before the others start, so it is the one that keeps its name.
    join_all((0..10).map(|i| h.fetch(Fetch::get(first.url(&format!("/f/{i}")))))).await;
    join_all(
        later
            .iter()
            .flat_map(|site| (0..10).map(move |i| site.url(&format!("/l/{i}"))))
            .map(|u| h.fetch(Fetch::get(u))),
    )
    .await;

    let text = awc::Client::default()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .expect("scrape")
        .body()
        .limit(1 << 20)
        .await
        .expect("body");
    let text = String::from_utf8(text.to_vec()).expect("utf-8");
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("parsable exposition");
    let samples = &scrape.samples;
    let hosts: std::collections::BTreeSet<_> = samples
        .iter()
        .filter(|s| s.metric == "exitcrawl_requests_total")
        .filter_map(|s| s.labels.get("host"))
        .collect();
    assert_eq!(
        hosts,
        ["127.0.0.1", "other"].into_iter().collect(),
        "one host named, the rest folded"
    );
    let named = sum(
        samples,
        "exitcrawl_requests_total",
        &[("host", "127.0.0.1")],
    );
    let folded = sum(samples, "exitcrawl_requests_total", &[("host", "other")]);
    assert_eq!(
        named as u64,
        first.stats().requests,
        "the named host's requests"
    );
    assert_eq!(
        folded as u64,
        later.iter().map(|s| s.stats().requests).sum::<u64>(),
        "the folded hosts' requests"
    );
    let total = h.stats().await.iter().map(|s| s.total).sum::<u64>();
    assert_eq!((named + folded) as u64, total, "every request counted once");
    assert!(samples
        .iter()
        .filter_map(|s| s.labels.get("host"))
        .all(|h| h == "127.0.0.1" || h == "other"));
    h.shutdown(Duration::from_secs(1)).await;
}
