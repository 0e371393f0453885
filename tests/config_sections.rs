//! `[crawl]` and the Redis backend's keys, and defaults that agree: each key alone at the
//! ends of its range loads, and a key given alone keeps its value while the others
//! follow.

mod config_support;

use config_support::{assert_invalid, env, err_of, with_exit, ONE_EXIT};
use exitcrawl::config::{CrawlScope, Settings};

#[test]
fn redis_backend_needs_a_redis_url_and_a_limit_to_share() {
    assert_invalid(
        &with_exit("[limiter]\nbackend = \"redis\""),
        "limiter.backend",
        &["[redis] url"],
    );
    assert_invalid(
        &with_exit("[limiter]\nbackend = \"redis\"\nalgorithm = \"none\"\n[redis]\nurl = \"redis://127.0.0.1:6379\""),
        "limiter.backend",
        &["none"],
    );
    assert_invalid(
        &with_exit("[redis]\nurl = \"http://127.0.0.1:6379\""),
        "redis.url",
        &["redis://"],
    );
    assert_invalid(
        &with_exit("[limiter]\nbackend = \"etcd\""),
        "limiter.backend",
        &["local", "redis"],
    );
    assert_invalid(
        &with_exit("[redis]\nprocesses = 0"),
        "redis.processes",
        &["1..=10000"],
    );
    let ok = Settings::from_toml_str(&with_exit(
        "[limiter]\nbackend = \"redis\"\nscope = \"host\"\n[redis]\nurl = \"redis://127.0.0.1:6379\"\nprocesses = 3",
    ))
    .expect("valid");
    assert_eq!(ok.redis.processes, 3);
}

// ---------------------------------------------------------------- [crawl]

#[test]
fn crawl_section_defaults_and_values() {
    let s = Settings::from_toml_str(ONE_EXIT).unwrap();
    assert!(!s.crawl.follow && s.crawl.robots);
    assert_eq!(s.crawl.scope, CrawlScope::SameHost);
    assert_eq!(s.crawl.per_host_concurrency, 2);
    assert_eq!(
        exitcrawl::discover::robots::robots_token(&s.crawl, "exitcrawl/0.1.0 (+https://x)"),
        "exitcrawl"
    );
    let s = Settings::from_toml_str(&with_exit(
        "[crawl]\nfollow = true\nscope = \"same_domain\"\nallow = ['^https?://e\\.com/']\n\
         deny = ['\\.pdf$']\nmax_depth = 0\nmax_pages = 10\nuser_agent_token = \"my-bot\"",
    ))
    .unwrap();
    assert!(s.crawl.follow);
    assert_eq!(s.crawl.scope, CrawlScope::SameDomain);
    assert_eq!((s.crawl.max_depth, s.crawl.max_pages), (Some(0), Some(10)));
    assert_eq!(
        exitcrawl::discover::robots::robots_token(&s.crawl, "ignored/1"),
        "my-bot"
    );
    let s = Settings::from_toml_str_with_env(
        ONE_EXIT,
        env(&[
            ("EXITCRAWL__CRAWL__FOLLOW", "true"),
            ("EXITCRAWL__CRAWL__ROBOTS", "false"),
        ]),
    )
    .unwrap();
    assert!(s.crawl.follow && !s.crawl.robots);
}

#[test]
fn crawl_section_errors_name_the_key() {
    assert_invalid(
        &with_exit("[crawl]\ndeny = ['ok', '(unclosed']"),
        "crawl.deny[1]",
        &["\"(unclosed\"", "not a valid regex", "unclosed"],
    );
    assert_invalid(
        &with_exit("[crawl]\nallow = ['[z-a]']"),
        "crawl.allow[0]",
        &["not a valid regex"],
    );
    assert_invalid(
        &with_exit("[crawl]\nscope = \"galaxy\""),
        "crawl.scope",
        &["\"galaxy\"", "same_host, same_domain, any"],
    );
    assert_invalid(
        &with_exit("[crawl]\nper_host_concurrency = 0"),
        "crawl.per_host_concurrency",
        &["0 is out of range", "1..=10000"],
    );
    assert_invalid(
        &with_exit("[crawl]\nmax_pages = 0"),
        "crawl.max_pages",
        &["out of range"],
    );
    assert_invalid(
        &with_exit("[crawl]\nseen_limit = 0"),
        "crawl.seen_limit",
        &["out of range"],
    );
    assert_invalid(
        &with_exit("[crawl]\nrobots_ttl_ms = 5"),
        "crawl.robots_ttl_ms",
        &["1000..=604800000"],
    );
    assert_invalid(
        &with_exit("[crawl]\nuser_agent_token = \"bot/1.0\""),
        "crawl.user_agent_token",
        &["A-Z a-z _ -"],
    );
    assert_invalid(
        &with_exit("[crawl]\nfolow = true"),
        "crawl.folow",
        &["unknown key", "follow"],
    );
    assert_invalid(&with_exit("[crawl]\nrobots = 1"), "crawl.robots", &["1"]);
}

// ---------------------------------------------------------------- defaults that agree

/// Every numeric key, set alone at each end of its documented range, loads: the defaults
/// of the keys it bounds (or that bound it) move to agree with it.
#[test]
fn each_key_alone_at_its_extremes_loads() {
    let keys: &[(&str, &str, &str)] = &[
        ("crawler.concurrency", "1", "100000"),
        ("crawler.timeout_ms", "1", "3600000"),
        ("crawler.connect_timeout_ms", "1", "3600000"),
        ("crawler.max_retries", "0", "100"),
        ("crawler.max_body_bytes", "1", "1073741824"),
        ("crawler.max_redirects", "0", "100"),
        ("crawler.queue_capacity", "1", "10000000"),
        ("crawler.retry_backoff_base_ms", "1", "3600000"),
        ("crawler.retry_backoff_max_ms", "1", "3600000"),
        ("crawler.retry_budget", "0.0", "1.0"),
        ("crawler.give_up_after_ms", "1000", "86400000"),
        ("crawler.max_retry_after_ms", "1000", "86400000"),
        ("crawler.per_host_connections", "1", "10000"),
        ("crawler.keep_alive_ms", "0", "3600000"),
        ("crawler.pool_hosts", "1", "1000000"),
        ("crawler.dns_ttl_ms", "0", "86400000"),
        ("limiter.initial_rps", "0.001", "1000000.0"),
        ("limiter.burst", "1", "100000"),
        ("limiter.min_rps", "0.001", "1000000.0"),
        ("limiter.max_rps", "0.001", "1000000.0"),
        ("limiter.increase_rps", "0.001", "1000000.0"),
        ("limiter.decrease", "0.01", "0.99"),
        ("limiter.latency_tolerance", "1.01", "100.0"),
        ("limiter.hold_ms", "0", "60000"),
        ("limiter.forget_idle_ms", "1000", "86400000"),
        ("limiter.jitter", "0.0", "0.5"),
        ("health.interval_ms", "100", "3600000"),
        ("health.timeout_ms", "1", "3600000"),
        ("health.consecutive_failures", "1", "1000"),
        ("health.base_ejection_ms", "1", "86400000"),
        ("health.max_ejection_ms", "1", "86400000"),
        ("metrics.host_labels", "0", "10000"),
        ("redis.processes", "1", "10000"),
        ("redis.op_timeout_ms", "1", "60000"),
        ("crawl.max_depth", "0", "100000"),
        ("crawl.max_pages", "1", "10000000000"),
        ("crawl.seen_limit", "1", "1000000000"),
        ("crawl.per_host_concurrency", "1", "10000"),
        ("crawl.robots_ttl_ms", "1000", "604800000"),
    ];
    let mut failures = vec![];
    for (key, low, high) in keys {
        let (section, name) = key.split_once('.').expect("section.key");
        for value in [low, high] {
            let toml = with_exit(&format!("[{section}]\n{name} = {value}"));
            if let Err(e) = Settings::from_toml_str(&toml) {
                failures.push(format!("{key} = {value}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "refused alone:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_key_given_alone_keeps_its_value_and_the_others_follow() {
    let s = Settings::from_toml_str(&with_exit("[crawler]\ntimeout_ms = 2000")).unwrap();
    assert_eq!(s.crawler.timeout_ms, 2000);
    assert_eq!(s.crawler.connect_timeout_ms, 2000, "min(5000, timeout_ms)");
    let s = Settings::from_toml_str(&with_exit("[limiter]\nmax_rps = 2.0")).unwrap();
    assert_eq!(s.limiter.max_rps, 2.0);
    assert_eq!(s.limiter.initial_rps, 2.0, "min(5, max_rps)");
    // Given both, and contradictory: still refused, naming the key and the rule.
    let e = err_of(&with_exit(
        "[crawler]\ntimeout_ms = 2000\nconnect_timeout_ms = 3000",
    ));
    assert!(
        e.to_string()
            .starts_with("crawler.connect_timeout_ms: 3000 must be ≤ crawler.timeout_ms (2000)"),
        "{e}"
    );
    // From the environment too.
    let s = Settings::from_toml_str_with_env(
        ONE_EXIT,
        [(
            "EXITCRAWL__HEALTH__INTERVAL_MS".to_string(),
            "500".to_string(),
        )],
    )
    .unwrap();
    assert_eq!(s.health.timeout_ms, 500, "min(2000, interval_ms)");
}
