//! What the config tests share: the shipped files, one valid exit, and the assertion that
//! an error names its key and what is allowed.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use exitcrawl::config::{ConfigError, ExitSettings, Settings};

pub fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

pub fn default_toml() -> String {
    std::fs::read_to_string(repo_file("config/default.toml")).unwrap()
}

pub const ONE_EXIT: &str = "[[exits]]\nname = \"e2\"\nsource_ip = \"127.0.0.2\"\n";

/// `sections` (TOML placed before the exits) followed by one valid exit.
pub fn with_exit(sections: &str) -> String {
    format!("{sections}\n{ONE_EXIT}")
}

pub fn err_of(toml: &str) -> ConfigError {
    match Settings::from_toml_str(toml) {
        Ok(s) => panic!("expected an error for:\n{toml}\ngot {s:?}"),
        Err(e) => e,
    }
}

/// Asserts the error is about `key` and its message contains every `parts`.
pub fn assert_invalid(toml: &str, key: &str, parts: &[&str]) {
    let e = err_of(toml);
    let text = e.to_string();
    assert_eq!(e.key(), Some(key), "wrong key in {text:?} for:\n{toml}");
    assert!(text.starts_with(&format!("{key}: ")), "{text:?}");
    for p in parts {
        assert!(text.contains(p), "{text:?} lacks {p:?} (input:\n{toml})");
    }
}

pub fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn ip(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

/// Every `section.key` the schema has, from serializing settings with every optional set.
pub fn schema_keys() -> BTreeSet<String> {
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
