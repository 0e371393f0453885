//! Config loading: the shipped files load and document every key, and every kind of bad
//! input gets an error naming the key, the value and what is allowed. Environment
//! overrides are in `config_env.rs`, mangled input in `config_robustness.rs`, `[crawl]`,
//! the Redis backend and defaults that agree in `config_sections.rs`.

mod config_support;

use std::collections::BTreeSet;
use std::error::Error as _;
use std::net::IpAddr;

use config_support::{
    assert_invalid, default_toml, env, err_of, ip, repo_file, schema_keys, with_exit, ONE_EXIT,
};
use exitcrawl::config::{
    Algorithm, Arbiters, ConfigError, ExitSettings, Scope, Settings, ENV_PREFIX,
};
use exitcrawl::limiter::Kind;

// ---------------------------------------------------------------- shipped files

#[test]
fn default_toml_loads_and_its_values_are_the_defaults_in_code() {
    let s = Settings::load_with_env(&repo_file("config/default.toml"), Vec::new()).unwrap();
    let expected = Settings::with_exits(vec![ExitSettings::new("e2", ip(127, 0, 0, 2))]);
    assert_eq!(s, expected);
    assert!(s.crawler.user_agent.starts_with("exitcrawl/"));
    assert_eq!(s.limiter.algorithm, Algorithm::Aimd);
    assert_eq!(s.limiter.scope, Scope::Auto);
    assert_eq!(s.crawler.arbiters, Arbiters::Single);
}

#[test]
fn example_toml_loads_with_four_exits() {
    let s = Settings::load_with_env(&repo_file("config/example.toml"), Vec::new()).unwrap();
    let ips: Vec<IpAddr> = s.exits.iter().map(|e| e.source_ip).collect();
    assert_eq!(ips, (2..=5).map(|d| ip(127, 0, 0, d)).collect::<Vec<_>>());
    assert_eq!(s.enabled_exits().count(), 3);
    assert_eq!(
        s.exits[0].quota().map(|q| (q.rps, q.burst)),
        Some((50.0, 20))
    );
    assert_eq!(s.metrics.listen.map(|a| a.port()), Some(9090));
}

#[test]
fn load_reads_the_process_environment() {
    // Only meaningful when nobody set overrides around the test run; never mutates the env.
    if std::env::vars_os().any(|(k, _)| {
        k.to_string_lossy()
            .to_ascii_uppercase()
            .starts_with(&format!("{ENV_PREFIX}__"))
    }) {
        return;
    }
    Settings::load(&repo_file("config/default.toml")).unwrap();
}

/// Every `section.key` default.toml shows, set or commented out (`# key = …`).
fn documented_keys(text: &str) -> BTreeSet<String> {
    let mut section: Option<String> = None;
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            section = Some(t.trim_matches(['[', ']']).to_string());
            continue;
        }
        let t = t.trim_start_matches('#').trim_start();
        let ident: String = t
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        let rest = t[ident.len()..].trim_start();
        if let (Some(sec), false, true) = (&section, ident.is_empty(), rest.starts_with('=')) {
            keys.insert(format!("{sec}.{ident}"));
        }
    }
    keys
}

#[test]
fn default_toml_documents_every_field_and_nothing_else() {
    let schema = schema_keys();
    let documented = documented_keys(&default_toml());
    let missing: Vec<_> = schema.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&schema).collect();
    assert!(
        missing.is_empty(),
        "not in config/default.toml: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "in config/default.toml but not in the schema: {stale:?}"
    );
    // Sanity: the walk found the whole schema, not just a part of it.
    assert!(schema.len() >= 40, "{schema:?}");
}

// ---------------------------------------------------------------- bad input

#[test]
fn unknown_keys_are_named_with_what_is_allowed() {
    assert_invalid(
        &with_exit("[crawler]\nconcurency = 64"),
        "crawler.concurency",
        &["unknown key", "concurrency"],
    );
    assert_invalid(
        &with_exit("[limiter]\nalgorthm = \"gcra\""),
        "limiter.algorthm",
        &["unknown key", "algorithm"],
    );
    assert_invalid(
        &format!("{ONE_EXIT}speed = 5\n"),
        "exits[0].speed",
        &["unknown key", "source_ip"],
    );
    assert_invalid(
        &with_exit("verbose = true"),
        "verbose",
        &[
            "unknown key",
            "crawler, limiter, health, metrics, redis, exits, crawl",
        ],
    );
    assert_invalid(&with_exit("[crawlr]"), "crawlr", &["unknown key"]);
    // A key that `config` would read as a path into a huge array is just unknown.
    assert_invalid(
        &with_exit("\"crawler[99999999999]\" = 1"),
        "crawler[99999999999]",
        &["unknown key"],
    );
}

#[test]
fn wrong_types_are_named_and_never_coerced() {
    assert_invalid(
        &with_exit("[crawler]\nconcurrency = \"abc\""),
        "crawler.concurrency",
        &["\"abc\"", "whole number"],
    );
    // No silent rounding of floats or booleans into integers.
    assert_invalid(
        &with_exit("[crawler]\nmax_retries = 2.5"),
        "crawler.max_retries",
        &["2.5", "whole number"],
    );
    assert_invalid(
        &with_exit("[crawler]\nmax_retries = true"),
        "crawler.max_retries",
        &["true"],
    );
    assert_invalid(
        &with_exit("[crawler]\nconcurrency = -5"),
        "crawler.concurrency",
        &["-5"],
    );
    assert_invalid(
        &with_exit("[limiter]\nthrottle_on_reset = 1"),
        "limiter.throttle_on_reset",
        &["true or false"],
    );
    assert_invalid(
        &with_exit("[limiter]\ninitial_rps = \"fast\""),
        "limiter.initial_rps",
        &["\"fast\"", "a number"],
    );
    assert_invalid(
        &with_exit("[crawler]\nuser_agent = [1]"),
        "crawler.user_agent",
        &["sequence", "string"],
    );
    assert_invalid(
        &with_exit("[limiter]\nthrottle_statuses = [429, \"x\"]"),
        "limiter.throttle_statuses[1]",
        &["\"x\""],
    );
    assert_invalid(&with_exit("crawler = 5"), "crawler", &["[crawler] section"]);
    assert_invalid("exits = 5", "exits", &["[[exits]]"]);
    assert_invalid(
        &format!("{ONE_EXIT}enabled = \"yes\"\n"),
        "exits[0].enabled",
        &["true or false"],
    );
}

#[test]
fn bad_enum_values_list_the_allowed_ones() {
    assert_invalid(
        &with_exit("[limiter]\nalgorithm = \"fast\""),
        "limiter.algorithm",
        &[
            "\"fast\"",
            "aimd",
            "sliding_log",
            "sliding_window",
            "gcra",
            "none",
        ],
    );
    assert_invalid(
        &with_exit("[limiter]\nscope = \"site\""),
        "limiter.scope",
        &["\"site\"", "exit_host", "global"],
    );
    assert_invalid(
        &with_exit("[crawler]\narbiters = \"many\""),
        "crawler.arbiters",
        &["\"many\"", "single", "per_exit"],
    );
}

#[test]
fn the_documented_example_messages() {
    let msg = |toml: &str| err_of(toml).to_string();
    assert_eq!(
        msg(&with_exit("[limiter]\ninitial_rps = -5")),
        "limiter.initial_rps: -5 must be > 0 and ≤ limiter.max_rps (1000)"
    );
    assert_eq!(
        msg(&format!(
            "{ONE_EXIT}[[exits]]\nname = \"e3\"\nsource_ip = \"300.1.1.1\"\n"
        )),
        "exits[1].source_ip: \"300.1.1.1\" is not an IP address (expected e.g. \"127.0.0.2\")"
    );
    assert_eq!(
        msg("[crawler]\nconcurrency = 8\n"),
        "exits: empty; at least one [[exits]] entry is required (name and source_ip)"
    );
    assert!(msg("exits = []").starts_with("exits: empty;"));
    assert!(msg("").starts_with("exits: empty;"));
    assert_invalid(
        &format!(
            "{ONE_EXIT}[[exits]]\nname = \"e3\"\nsource_ip = \"127.0.0.3\"\n\
             [[exits]]\nname = \"e2\"\nsource_ip = \"127.0.0.4\"\n"
        ),
        "exits[2].name",
        &["\"e2\" is used twice", "exit names must be unique"],
    );
    assert!(msg(&format!("{ONE_EXIT}burst = 20\n")).starts_with("exits[0].burst: set without rate"));
}

#[test]
fn exits_are_checked_entry_by_entry() {
    let exit = |extra: &str| format!("{ONE_EXIT}{extra}\n");
    assert_invalid(&exit("rate = -1.0"), "exits[0].rate", &["-1", "> 0"]);
    assert_invalid(&exit("rate = inf"), "exits[0].rate", &["inf"]);
    assert_invalid(&exit("rate = nan"), "exits[0].rate", &["NaN"]);
    assert_invalid(
        &exit("rate = 5.0\nburst = 0"),
        "exits[0].burst",
        &["1..=100000"],
    );
    assert_invalid(
        &exit("max_concurrent = 0"),
        "exits[0].max_concurrent",
        &["1..=100000"],
    );
    // Not a whole number at all: the key's range all the same, not its type's.
    assert_invalid(
        &exit("max_concurrent = -4"),
        "exits[0].max_concurrent",
        &["`-4`", "a whole number in 1..=100000"],
    );
    assert_invalid(&exit("region = \"\""), "exits[0].region", &["1..=64"]);
    assert_invalid(&exit("enabled = false"), "exits", &["enabled"]);
    assert_invalid(
        "[[exits]]\nname = \"e 2\"\nsource_ip = \"127.0.0.2\"\n",
        "exits[0].name",
        &["A-Z a-z 0-9"],
    );
    assert_invalid(
        "[[exits]]\nname = \"e2\"\nsource_ip = \"224.0.0.1\"\n",
        "exits[0].source_ip",
        &["multicast"],
    );
    assert_invalid(
        "[[exits]]\nname = \"a\"\n[[exits]]\nname = \"b\"\nsource_ip = \"0.0.0.0\"\n",
        "exits[1].source_ip",
        &["default route", "used twice"],
    );
    assert_invalid(
        &exit("proxy = \"https://u:secret@10.0.0.5:3128\""),
        "exits[0].proxy",
        &["https", "http, socks5 or socks5h", "u:***@"],
    );
    assert_invalid(
        &exit("proxy = \"socks5://10.0.0.5:1080/x\""),
        "exits[0].proxy",
        &["scheme://[user:pass@]host:port"],
    );
    assert_invalid(
        "[[exits]]\nname = \"a\"\nproxy = \"http://u:p@10.0.0.5:3128\"\n[[exits]]\nname = \"b\"\nproxy = \"http://u:p@10.0.0.5:3128/\"\n",
        "exits[1].proxy",
        &["used twice", "u:***@"],
    );
    assert_invalid(
        &format!("{ONE_EXIT}[[exits]]\nname = \"e3\"\nsource_ip = \"127.0.0.2\"\n"),
        "exits[1].source_ip",
        &["used twice"],
    );
    assert_invalid(
        "[[exits]]\nsource_ip = \"127.0.0.2\"\n",
        "exits[0].name",
        &["missing"],
    );
    // With neither source_ip nor proxy, an exit sends from the default route; with a proxy
    // and no source_ip, from the kernel's choice of address to the proxy.
    let s = Settings::from_toml_str(&format!(
        "{ONE_EXIT}[[exits]]\nname = \"e3\"\n[[exits]]\nname = \"p\"\nproxy = \"socks5h://u:pw@127.0.0.1:1080\"\n"
    ))
    .unwrap();
    assert_eq!(s.exits[1].describe(), "default route");
    assert_eq!(s.exits[2].describe(), "socks5h://u:***@127.0.0.1:1080");
    assert!(s.exits[1].unbound() && s.exits[2].unbound());
    // With a rate, burst is optional and defaults to 1.
    let s = Settings::from_toml_str(&exit("rate = 2.5")).unwrap();
    assert_eq!(s.exits[0].quota().map(|q| (q.rps, q.burst)), Some((2.5, 1)));
}

/// Out-of-range `[crawler]` values: (TOML, key named, part of the message).
const CRAWLER_OUT_OF_RANGE: &[(&str, &str, &str)] = &[
    (
        "[crawler]\nconcurrency = 0",
        "crawler.concurrency",
        "1..=100000",
    ),
    (
        "[crawler]\ntimeout_ms = 0",
        "crawler.timeout_ms",
        "1..=3600000",
    ),
    (
        "[crawler]\ntimeout_ms = 1000\nconnect_timeout_ms = 2000",
        "crawler.connect_timeout_ms",
        "crawler.timeout_ms (1000)",
    ),
    (
        "[crawler]\nmax_retries = 101",
        "crawler.max_retries",
        "0..=100",
    ),
    (
        "[crawler]\nuser_agent = \"\"",
        "crawler.user_agent",
        "1..=512",
    ),
    (
        "[crawler]\nuser_agent = \"a\\nb\"",
        "crawler.user_agent",
        "visible ASCII",
    ),
    (
        "[crawler]\nmax_body_bytes = 0",
        "crawler.max_body_bytes",
        "1..=",
    ),
    (
        "[crawler]\nmax_redirects = 1000",
        "crawler.max_redirects",
        "0..=100",
    ),
    (
        "[crawler]\nqueue_capacity = 0",
        "crawler.queue_capacity",
        "1..=",
    ),
    (
        "[crawler]\nretry_backoff_base_ms = 5000\nretry_backoff_max_ms = 1000",
        "crawler.retry_backoff_base_ms",
        "retry_backoff_max_ms (1000)",
    ),
    (
        "[crawler]\nretry_budget = 1.5",
        "crawler.retry_budget",
        "0.0..=1.0",
    ),
    (
        "[crawler]\nretry_budget = nan",
        "crawler.retry_budget",
        "NaN",
    ),
    (
        "[crawler]\ngive_up_after_ms = 10",
        "crawler.give_up_after_ms",
        "1000..=86400000",
    ),
    (
        "[crawler]\nmax_retry_after_ms = 86400001",
        "crawler.max_retry_after_ms",
        "1000..=86400000",
    ),
    (
        "[crawler]\nper_host_connections = 0",
        "crawler.per_host_connections",
        "1..=",
    ),
    (
        "[crawler]\nkeep_alive_ms = 3600001",
        "crawler.keep_alive_ms",
        "0..=3600000",
    ),
    (
        "[crawler]\npool_hosts = 0",
        "crawler.pool_hosts",
        "1..=1000000",
    ),
    (
        "[crawler]\ndns_ttl_ms = 86400001",
        "crawler.dns_ttl_ms",
        "0..=86400000",
    ),
];

/// Out-of-range `[limiter]` values: (TOML, key named, part of the message).
const LIMITER_OUT_OF_RANGE: &[(&str, &str, &str)] = &[
    ("[limiter]\nmax_rps = 0", "limiter.max_rps", "> 0"),
    ("[limiter]\nmax_rps = inf", "limiter.max_rps", "inf"),
    ("[limiter]\nmin_rps = 0", "limiter.min_rps", "> 0"),
    (
        "[limiter]\nmin_rps = 20.0\nmax_rps = 10.0",
        "limiter.min_rps",
        "limiter.max_rps (10)",
    ),
    (
        "[limiter]\ninitial_rps = 0.05\nmin_rps = 0.1",
        "limiter.initial_rps",
        "limiter.min_rps (0.1)",
    ),
    (
        "[limiter]\ninitial_rps = 2000\nmax_rps = 1000",
        "limiter.initial_rps",
        "limiter.max_rps (1000)",
    ),
    ("[limiter]\nincrease_rps = 0", "limiter.increase_rps", "> 0"),
    (
        "[limiter]\ndecrease = 1.0",
        "limiter.decrease",
        "between 0 and 1",
    ),
    (
        "[limiter]\ndecrease = 0",
        "limiter.decrease",
        "between 0 and 1",
    ),
    (
        "[limiter]\nlatency_tolerance = 1.0",
        "limiter.latency_tolerance",
        "> 1",
    ),
    ("[limiter]\nburst = 0", "limiter.burst", "1..=100000"),
    ("[limiter]\nhold_ms = 60001", "limiter.hold_ms", "0..=60000"),
    (
        "[limiter]\nhold_ms = -1",
        "limiter.hold_ms",
        "a whole number in 0..=60000",
    ),
    (
        "[limiter]\nhold_ms = 1.5",
        "limiter.hold_ms",
        "a whole number in 0..=60000",
    ),
    (
        "[limiter]\nburst = \"x\"",
        "limiter.burst",
        "a whole number in 1..=100000",
    ),
    (
        "[limiter]\nforget_idle_ms = 999",
        "limiter.forget_idle_ms",
        "1000..=86400000",
    ),
    (
        "[crawler]\nmax_retry_after_ms = 120000\n[limiter]\nforget_idle_ms = 60000",
        "limiter.forget_idle_ms",
        "≥ crawler.max_retry_after_ms (120000)",
    ),
    ("[limiter]\njitter = 0.6", "limiter.jitter", "0.0..=0.5"),
    ("[limiter]\njitter = -0.1", "limiter.jitter", "0.0..=0.5"),
    (
        "[limiter]\nthrottle_statuses = [429, 99]",
        "limiter.throttle_statuses[1]",
        "100..=599",
    ),
    (
        "[limiter]\nthrottle_statuses = [70000]",
        "limiter.throttle_statuses[0]",
        "100..=599",
    ),
];

/// Out-of-range `[health]` and `[metrics]` values: (TOML, key named, part of the message).
const HEALTH_AND_METRICS_OUT_OF_RANGE: &[(&str, &str, &str)] = &[
    ("[health]\nurl = \"ftp://x\"", "health.url", "http://"),
    ("[health]\nurl = \"http://\"", "health.url", "with a host"),
    (
        "[health]\ninterval_ms = 99",
        "health.interval_ms",
        "100..=3600000",
    ),
    (
        "[health]\ninterval_ms = 1000\ntimeout_ms = 2000",
        "health.timeout_ms",
        "health.interval_ms (1000)",
    ),
    (
        "[health]\nconsecutive_failures = 0",
        "health.consecutive_failures",
        "1..=1000",
    ),
    (
        "[health]\nbase_ejection_ms = 10\nmax_ejection_ms = 5",
        "health.base_ejection_ms",
        "health.max_ejection_ms (5)",
    ),
    (
        "[metrics]\nlisten = \"localhost\"",
        "metrics.listen",
        "127.0.0.1:9090",
    ),
];

#[test]
fn out_of_range_values_name_key_value_and_range() {
    for cases in [
        CRAWLER_OUT_OF_RANGE,
        LIMITER_OUT_OF_RANGE,
        HEALTH_AND_METRICS_OUT_OF_RANGE,
    ] {
        for (toml, key, part) in cases {
            assert_invalid(&with_exit(toml), key, &[part]);
        }
    }
}

#[test]
fn fixed_rate_algorithms_may_go_below_min_rps() {
    let s = Settings::from_toml_str(&with_exit(
        "[limiter]\nalgorithm = \"sliding_log\"\ninitial_rps = 0.05\nburst = 3",
    ))
    .unwrap();
    assert_eq!(s.limiter.algorithm.limiter_kind(), Some(Kind::SlidingLog));
    assert_eq!((s.limiter.quota().rps, s.limiter.quota().burst), (0.05, 3));
}

#[test]
fn every_algorithm_name_parses_and_maps_to_its_limiter() {
    for a in Algorithm::ALL {
        let s = Settings::from_toml_str(&with_exit(&format!(
            "[limiter]\nalgorithm = \"{}\"",
            a.as_str()
        )))
        .unwrap();
        assert_eq!(s.limiter.algorithm, a);
        let expected = match a {
            Algorithm::Aimd | Algorithm::None => None,
            Algorithm::TokenBucket => Some(Kind::TokenBucket),
            Algorithm::LeakyBucket => Some(Kind::LeakyBucket),
            Algorithm::FixedWindow => Some(Kind::FixedWindow),
            Algorithm::SlidingWindow => Some(Kind::SlidingWindow),
            Algorithm::SlidingLog => Some(Kind::SlidingLog),
            Algorithm::Gcra => Some(Kind::Gcra),
        };
        assert_eq!(a.limiter_kind(), expected);
    }
}

#[test]
fn syntax_errors_and_missing_files_are_reported_with_their_cause() {
    let e = err_of("[crawler\nconcurrency = 1\n");
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e:?}");
    assert!(e.to_string().contains("line 1"), "{e}");
    assert!(e.source().is_some());

    let e = err_of(&with_exit("[crawler]\nconcurrency = 99999999999999999999"));
    assert!(
        e.to_string().contains("concurrency = 99999999999999999999"),
        "{e}"
    );

    let path = repo_file("config/does-not-exist.toml");
    let e = Settings::load_with_env(&path, Vec::new()).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("does-not-exist.toml"), "{e}");
    assert!(e.source().unwrap().is::<std::io::Error>());
}

#[test]
fn errors_from_a_file_say_which_file() {
    let e = Settings::load_with_env(
        &repo_file("config/default.toml"),
        env(&[("EXITCRAWL__LIMITER__MIN_RPS", "0.5")]),
    )
    .unwrap();
    assert_eq!(e.limiter.min_rps, 0.5);
    let dir = std::env::temp_dir().join(format!("exitcrawl-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, with_exit("[crawler]\nconcurrency = 0")).unwrap();
    let e = Settings::load_with_env(&file, Vec::new()).unwrap_err();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(e.key(), Some("crawler.concurrency"));
    assert!(e.to_string().contains("bad.toml"), "{e}");
}
