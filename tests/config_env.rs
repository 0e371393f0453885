//! Environment overrides (`EXITCRAWL__SECTION__KEY`): they apply over the file, get the
//! same validation naming the variable, and names that cannot be overrides are refused.

mod config_support;

use config_support::{env, with_exit, ONE_EXIT};
use exitcrawl::config::{Algorithm, Arbiters, ConfigError, Settings};

// ---------------------------------------------------------------- environment

#[test]
fn env_overrides_apply_over_the_file() {
    let toml = with_exit("[crawler]\nconcurrency = 32\n[limiter]\nalgorithm = \"token_bucket\"");
    let s = Settings::from_toml_str_with_env(
        &toml,
        env(&[
            ("EXITCRAWL__CRAWLER__CONCURRENCY", "64"),
            ("EXITCRAWL__LIMITER__ALGORITHM", "gcra"),
            ("exitcrawl__limiter__initial_rps", "12.5"),
            ("EXITCRAWL__LIMITER__THROTTLE_STATUSES", "429, 503,520"),
            ("EXITCRAWL__LIMITER__THROTTLE_ON_TIMEOUT", "true"),
            (
                "EXITCRAWL__CRAWLER__USER_AGENT",
                "mybot/1.0 (+https://example.com)",
            ),
            ("EXITCRAWL__HEALTH__URL", "https://example.com/ok"),
            ("EXITCRAWL__METRICS__LISTEN", "127.0.0.1:9100"),
            ("EXITCRAWL__CRAWLER__ARBITERS", "per_exit"),
            ("EXITCRAWL__REDIS__URL", "redis://10.0.0.5:6380/2"),
            // Not ours: ignored.
            ("PATH", "/bin"),
            ("EXITCRAWL_LOG", "debug"),
            // Empty: ignored.
            ("EXITCRAWL__CRAWLER__MAX_RETRIES", ""),
        ]),
    )
    .unwrap();
    assert_eq!(s.crawler.concurrency, 64);
    assert_eq!(s.limiter.algorithm, Algorithm::Gcra);
    assert_eq!(s.limiter.initial_rps, 12.5);
    assert_eq!(s.limiter.throttle_statuses, vec![429, 503, 520]);
    assert!(s.limiter.throttle_on_timeout);
    assert_eq!(s.crawler.user_agent, "mybot/1.0 (+https://example.com)");
    assert_eq!(s.health.url.as_deref(), Some("https://example.com/ok"));
    assert_eq!(s.metrics.listen.unwrap().port(), 9100);
    assert_eq!(s.crawler.arbiters, Arbiters::PerExit);
    assert_eq!(s.crawler.max_retries, 3);
    assert_eq!(s.redis.url.as_deref(), Some("redis://10.0.0.5:6380/2"));

    let one = Settings::from_toml_str_with_env(
        ONE_EXIT,
        env(&[("EXITCRAWL__LIMITER__THROTTLE_STATUSES", "429")]),
    )
    .unwrap();
    assert_eq!(one.limiter.throttle_statuses, vec![429]);
}

#[test]
fn env_overrides_get_the_same_validation_and_name_the_variable() {
    let check = |name: &str, value: &str, key: &str, part: &str| {
        let e = Settings::from_toml_str_with_env(ONE_EXIT, env(&[(name, value)])).unwrap_err();
        let text = e.to_string();
        assert_eq!(e.key(), Some(key), "{text}");
        assert!(text.contains(part), "{text:?} lacks {part:?}");
        assert!(
            text.contains(&format!("environment variable {}", name.to_uppercase())),
            "{text}"
        );
    };
    check(
        "EXITCRAWL__CRAWLER__CONCURRENCY",
        "0",
        "crawler.concurrency",
        "1..=100000",
    );
    check(
        "EXITCRAWL__CRAWLER__CONCURRENCY",
        "lots",
        "crawler.concurrency",
        "\"lots\"",
    );
    check(
        "EXITCRAWL__CRAWLER__MAX_RETRIES",
        "1.5",
        "crawler.max_retries",
        "1.5",
    );
    check(
        "EXITCRAWL__LIMITER__INITIAL_RPS",
        "-5",
        "limiter.initial_rps",
        "-5 must be > 0",
    );
    check(
        "EXITCRAWL__LIMITER__ALGORITHM",
        "fastest",
        "limiter.algorithm",
        "sliding_log",
    );
    check(
        "EXITCRAWL__LIMITER__SCOPE",
        "3",
        "limiter.scope",
        "exit_host",
    );
    check(
        "EXITCRAWL__LIMITER__THROTTLE_STATUSES",
        "429,700",
        "limiter.throttle_statuses[1]",
        "100..=599",
    );
    check(
        "EXITCRAWL__LIMITER__THROTTLE_STATUSES",
        "429,abc",
        "limiter.throttle_statuses",
        "abc",
    );
    check(
        "EXITCRAWL__LIMITER__THROTTLE_ON_RESET",
        "maybe",
        "limiter.throttle_on_reset",
        "true or false",
    );
    check(
        "EXITCRAWL__METRICS__LISTEN",
        "nowhere",
        "metrics.listen",
        "socket address",
    );
    check(
        "exitcrawl__crawler__concurency",
        "5",
        "crawler.concurency",
        "unknown key",
    );
}

#[test]
fn env_names_that_cannot_be_overrides_are_rejected() {
    for name in [
        "EXITCRAWL__EXITS__0__RATE",
        "EXITCRAWL__EXITS",
        "EXITCRAWL__FOO__BAR",
        "EXITCRAWL__CRAWLER",
        "EXITCRAWL__CRAWLER__TIMEOUT__MS",
        "EXITCRAWL__CRAWLER[99999999999]__X",
        "EXITCRAWL__LIMITER__RATE.X",
        "EXITCRAWL__",
    ] {
        let e = Settings::from_toml_str_with_env(ONE_EXIT, env(&[(name, "1")])).unwrap_err();
        assert!(matches!(e, ConfigError::Env { .. }), "{name}: {e:?}");
        assert!(e.to_string().contains(name), "{e}");
    }
    let e = Settings::from_toml_str_with_env(
        ONE_EXIT,
        env(&[
            ("EXITCRAWL__CRAWLER__CONCURRENCY", "1"),
            ("exitcrawl__crawler__concurrency", "2"),
        ]),
    )
    .unwrap_err();
    assert!(e.to_string().contains("set twice"), "{e}");
}
