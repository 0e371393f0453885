//! `config/alerts.yml` is valid YAML in Prometheus's rule-file shape, and every metric its
//! rules name exists in exitcrawl's exposition.

use std::collections::HashSet;

use exitcrawl_actors::metrics::Metrics;
use yaml_rust2::YamlLoader;

/// Metric names in an expression: every `exitcrawl_…` identifier.
fn names_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("exitcrawl_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

/// The families of the exposition (`# TYPE name kind`), plus the sample names each
/// family yields (`_total` for counters, `_bucket`/`_sum`/`_count` for histograms).
fn exposed() -> HashSet<String> {
    let m = Metrics::new(0);
    m.register_exit("e2", "127.0.0.2".parse().expect("ip"), 10, true);
    let text = m.encode();
    let mut names = HashSet::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        if parts.next() != Some("#") || parts.next() != Some("TYPE") {
            continue;
        }
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        names.insert(name.to_owned());
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for s in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{s}"));
                }
            }
            _ => {}
        }
    }
    names
}

#[test]
fn every_alert_names_existing_metrics() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/alerts.yml");
    let text = std::fs::read_to_string(path).expect("config/alerts.yml");
    let docs = YamlLoader::load_from_str(&text).expect("alerts.yml is valid YAML");
    let groups = docs[0]["groups"].as_vec().expect("a `groups` list");
    let exposed = exposed();
    let mut rules = 0;
    for g in groups {
        for r in g["rules"].as_vec().expect("a `rules` list") {
            let alert = r["alert"].as_str().expect("every rule has `alert`");
            let expr = r["expr"].as_str().expect("every rule has `expr`");
            let names = names_in(expr);
            assert!(!names.is_empty(), "{alert}: names no exitcrawl metric");
            for n in names {
                assert!(
                    exposed.contains(&n),
                    "{alert}: {n} is not exposed; have {exposed:?}"
                );
            }
            rules += 1;
        }
    }
    assert!(
        rules >= 4,
        "the seed's four health thresholds are all alerts"
    );
}
