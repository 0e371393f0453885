//! Config loading: the shipped files load, every kind of bad input gets an error naming the
//! key and what is allowed, environment overrides apply and are validated the same way,
//! and no input — however mangled — makes the loader panic.

use std::collections::BTreeSet;
use std::error::Error as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use exitcrawl::config::{
    Algorithm, Arbiters, ConfigError, CrawlScope, ExitSettings, Scope, Settings, ENV_PREFIX,
};
use exitcrawl::limiter::Kind;
use proptest::prelude::*;

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn default_toml() -> String {
    std::fs::read_to_string(repo_file("config/default.toml")).unwrap()
}

const ONE_EXIT: &str = "[[exits]]\nname = \"e2\"\nsource_ip = \"127.0.0.2\"\n";

/// `sections` (TOML placed before the exits) followed by one valid exit.
fn with_exit(sections: &str) -> String {
    format!("{sections}\n{ONE_EXIT}")
}

fn err_of(toml: &str) -> ConfigError {
    match Settings::from_toml_str(toml) {
        Ok(s) => panic!("expected an error for:\n{toml}\ngot {s:?}"),
        Err(e) => e,
    }
}

/// Asserts the error is about `key` and its message contains every `parts`.
fn assert_invalid(toml: &str, key: &str, parts: &[&str]) {
    let e = err_of(toml);
    let text = e.to_string();
    assert_eq!(e.key(), Some(key), "wrong key in {text:?} for:\n{toml}");
    assert!(text.starts_with(&format!("{key}: ")), "{text:?}");
    for p in parts {
        assert!(text.contains(p), "{text:?} lacks {p:?} (input:\n{toml})");
    }
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ip(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

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

/// Every `section.key` the schema has, from serializing settings with every optional set.
fn schema_keys() -> BTreeSet<String> {
    let mut s = Settings::with_exits(vec![ExitSettings::new("e2", ip(127, 0, 0, 2))]);
    s.health.url = Some("http://x/".into());
    s.metrics.listen = Some("127.0.0.1:9090".parse().unwrap());
    s.redis.url = Some("redis://127.0.0.1:6379".into());
    s.exits[0].rate = Some(1.0);
    s.exits[0].burst = Some(1);
    s.exits[0].region = Some("r".into());
    s.exits[0].proxy = Some("http://10.0.0.5:3128".into());
    s.crawl.max_depth = Some(1);
    s.crawl.max_pages = Some(1);
    s.crawl.user_agent_token = Some("bot".into());
    s.crawl.allow = vec!["a".into()];
    s.crawl.deny = vec!["b".into()];
    // An empty table does not serialize: one header makes `crawler.headers` show.
    s.crawler
        .headers
        .insert("Accept-Language".into(), "en".into());
    let tree = config::Config::try_from(&s).unwrap().cache;
    let mut keys = BTreeSet::new();
    let config::ValueKind::Table(top) = tree.kind else {
        panic!("not a table")
    };
    for (section, v) in top {
        let fields = match v.kind {
            config::ValueKind::Table(t) => t,
            config::ValueKind::Array(mut a) => match a.remove(0).kind {
                config::ValueKind::Table(t) => t,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        for (k, v) in fields {
            assert!(
                v.kind != config::ValueKind::Nil,
                "{section}.{k} serialized as nil"
            );
            keys.insert(format!("{section}.{k}"));
        }
    }
    keys
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
        "65535",
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

// ---------------------------------------------------------------- robustness

/// Fragments a mutation may splice in: TOML punctuation, odd numbers, key names, values
/// of the wrong type.
const FRAGMENTS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    "#",
    ".",
    ",",
    "\n",
    " ",
    "\\",
    "-",
    "_",
    "0",
    "-1",
    "1e309",
    "nan",
    "inf",
    "-inf",
    "0.0",
    "1.5",
    "99999999999999999999",
    "4294967296",
    "65536",
    "true",
    "false",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "[1, \"a\"]",
    "\"300.1.1.1\"",
    "\"127.0.0.2\"",
    "\"0.0.0.0\"",
    "\"::1\"",
    "\"gcra\"",
    "\"sliding_log\"",
    "\"per_exit\"",
    "\"global\"",
    "exits",
    "crawler",
    "limiter",
    "health",
    "metrics",
    "[[exits]]",
    "[crawler]",
    "rate",
    "burst",
    "name",
    "source_ip",
    "x[999999999999]",
    "\"a[999999999999]\"",
    "1979-05-27T07:32:00Z",
    "é",
    "\u{0}",
    "\u{202e}",
];

#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Uncomment(usize),
    ReplaceValue(usize, usize),
    InsertFragment(usize, usize),
    DeleteChar(usize),
    ReplaceChar(usize, char),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let n = FRAGMENTS.len();
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        any::<usize>().prop_map(Mutation::Uncomment),
        (any::<usize>(), 0..n).prop_map(|(l, f)| Mutation::ReplaceValue(l, f)),
        (any::<usize>(), 0..n).prop_map(|(p, f)| Mutation::InsertFragment(p, f)),
        any::<usize>().prop_map(Mutation::DeleteChar),
        (any::<usize>(), any::<char>()).prop_map(|(p, c)| Mutation::ReplaceChar(p, c)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let chars: Vec<char> = text.chars().collect();
    let nl = lines.len().max(1);
    let nc = chars.len().max(1);
    match *m {
        Mutation::DeleteLine(i) if !lines.is_empty() => {
            lines.remove(i % nl);
        }
        Mutation::DuplicateLine(i) if !lines.is_empty() => {
            let l = lines[i % nl].clone();
            lines.insert(i % nl, l);
        }
        Mutation::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % nl, b % nl),
        Mutation::Uncomment(i) if !lines.is_empty() => {
            let l = &mut lines[i % nl];
            *l = l.trim_start_matches(['#', ' ']).to_string();
        }
        Mutation::ReplaceValue(i, f) if !lines.is_empty() => {
            let l = &mut lines[i % nl];
            if let Some((k, _)) = l.split_once('=') {
                *l = format!("{k}= {}", FRAGMENTS[f]);
            }
        }
        Mutation::InsertFragment(p, f) => {
            let mut c = chars.clone();
            let at = p % (c.len() + 1);
            c.splice(at..at, FRAGMENTS[f].chars());
            return c.into_iter().collect();
        }
        Mutation::DeleteChar(p) if !chars.is_empty() => {
            let mut c = chars.clone();
            c.remove(p % nc);
            return c.into_iter().collect();
        }
        Mutation::ReplaceChar(p, ch) if !chars.is_empty() => {
            let mut c = chars.clone();
            c[p % nc] = ch;
            return c.into_iter().collect();
        }
        _ => {}
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// An error must say what is wrong: about a key (named first), the TOML syntax, or an
/// environment variable — never a bare message without context.
fn assert_explains(e: &ConfigError, input: &str) {
    let text = e.to_string();
    match e {
        ConfigError::Invalid { key, message, .. } => {
            assert!(!key.is_empty(), "empty key: {text:?} for\n{input}");
            assert!(!message.trim().is_empty(), "empty message: {text:?}");
            assert!(text.starts_with(&format!("{key}: ")), "{text:?}");
        }
        ConfigError::Syntax { message, .. } => {
            assert!(text.contains("not valid TOML"), "{text:?}");
            assert!(!message.trim().is_empty(), "{text:?}");
        }
        ConfigError::Env { name, .. } => assert!(text.contains(name.as_str()), "{text:?}"),
        other => panic!("unexplained error {other:?} for input:\n{input}"),
    }
}

proptest! {
    // No failure persistence: a regression file would be written next to this test.
    #![proptest_config(ProptestConfig {
        cases: 768,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_config_files_never_panic_and_errors_explain_themselves(
        example in any::<bool>(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let base = if example {
            std::fs::read_to_string(repo_file("config/example.toml")).unwrap()
        } else {
            default_toml()
        };
        let text = muts.iter().fold(base, |t, m| apply(&t, m));
        match Settings::from_toml_str(&text) {
            Ok(s) => prop_assert!(s.validate().is_ok()),
            Err(e) => assert_explains(&e, &text),
        }
    }

    #[test]
    fn random_env_overrides_never_panic_and_name_their_key(
        key in proptest::sample::select(schema_keys().into_iter()
            .filter(|k| !k.starts_with("exits."))
            .collect::<Vec<_>>()),
        value in prop_oneof![
            proptest::sample::select(FRAGMENTS.to_vec()).prop_map(str::to_string),
            any::<String>(),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|x| x.to_string()),
        ],
    ) {
        let name = format!("EXITCRAWL__{}", key.replace('.', "__").to_uppercase());
        match Settings::from_toml_str_with_env(ONE_EXIT, vec![(name.clone(), value.clone())]) {
            Ok(s) => prop_assert!(s.validate().is_ok()),
            Err(e) => {
                assert_explains(&e, &format!("{name}={value:?}"));
                // About the key itself, or a relation that names it (min_rps ≤ max_rps).
                let k = e.key().unwrap_or_default();
                let text = e.to_string();
                prop_assert!(k.starts_with(&key) || text.contains(&key), "{} is not about {}", text, key);
            }
        }
    }
}

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
