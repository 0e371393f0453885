//! Ctrl-C with fetches in flight: the requests cut off at the grace period's end left
//! their exits, and the records and the summary say so. A record with an attempt names
//! its exit; the summary counts those attempts in `requests` (as `errors`: sent, no
//! answer), and none in `not_sent`, which is for attempts that never left an exit.

mod cli_support;

use std::time::{Duration, Instant};

use cli_support::{config_with, json, records, s, sigint, spawn, stderr, wait_bounded, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite};
use serde_json::Value;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn sigint_counts_the_requests_cut_off_in_flight() {
    // Every answer takes 3 s: robots.txt first, then ten pages at once, still in flight
    // when the one second of grace after Ctrl-C runs out.
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_secs(3),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("interrupt-counts");
    let config = dir.file("crawl.toml", &config_with(10, ""));
    let all: Vec<String> = (0..30).map(|i| site.url(&format!("/i/{i}"))).collect();
    let urls = dir.file("urls.txt", &(all.join("\n") + "\n"));
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
    let args = [
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--grace",
        "1",
    ];
    let child = spawn(&args);
    // robots.txt and the ten pages the concurrency lets out.
    let until = Instant::now() + Duration::from_secs(20);
    while site.stats().requests < 11 {
        assert!(
            Instant::now() < until,
            "the site saw {} requests",
            site.stats().requests
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    sigint(child.id());
    let o = wait_bounded(child, Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));

    let recs = records(&out);
    let sum = json(&summary);
    let attempted: Vec<&Value> = recs.iter().filter(|r| n(&r["attempts"]) > 0).collect();
    assert_eq!(attempted.len(), 10, "{recs:?}");
    for r in &attempted {
        assert_eq!(r["error"], "interrupted", "{r}");
        assert!(r["exit"].is_string(), "an attempt was made: its exit: {r}");
    }
    let attempts: u64 = recs.iter().map(|r| n(&r["attempts"])).sum();
    let robots = n(&sum["robots_fetches"]);
    assert!(
        n(&sum["requests"]) >= attempts + robots,
        "requests {} < attempts {attempts} + robots.txt {robots}: {sum}",
        sum["requests"]
    );
    assert_eq!(
        n(&sum["requests"]),
        site.stats().requests,
        "what the site received: {sum}"
    );
    let per_exit = sum["per_exit"].as_array().expect("per_exit");
    for e in per_exit {
        assert_eq!(n(&e["not_sent"]), 0, "every attempt left its exit: {e}");
    }
    let errors: u64 = per_exit.iter().map(|e| n(&e["errors"])).sum();
    assert_eq!(errors, 10, "the ten cut off went unanswered: {sum}");
}
