//! `config/grafana-dashboard.json` is a dashboard Grafana can import, and every query in
//! it names only metrics a real crawler exports: the names come from `/metrics` scraped
//! after a crawl of a local site, not from a list kept beside the dashboard.

#[path = "support/promql.rs"]
mod promql;

use promql::{exposition_after_a_crawl, metric_names, Exported};
use serde_json::Value;

fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/grafana-dashboard.json"
    );
    let text = std::fs::read_to_string(path).expect("config/grafana-dashboard.json");
    serde_json::from_str(&text).expect("the dashboard is valid JSON")
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// The template variable called `name`.
fn variable<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("a `{name}` variable"))
}

/// The (metric, label) of a `label_values(metric, label)` variable query.
fn label_values(v: &Value) -> (String, String) {
    let q = v["query"]["query"]
        .as_str()
        .or_else(|| v["query"].as_str())
        .expect("a query variable");
    let args = q
        .trim()
        .strip_prefix("label_values(")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{q}: not label_values(metric, label)"));
    let (metric, label) = args.split_once(',').expect("label_values(metric, label)");
    let names = metric_names(metric);
    assert_eq!(names.len(), 1, "{q}: one metric");
    (names[0].clone(), label.trim().to_owned())
}

#[test]
fn the_tokenizer_finds_metrics_and_only_metrics() {
    let expr = r#"sum by (le, exit) (rate(a_seconds_bucket{exit=~"$exit", x="b{c}"}[$__rate_interval]))
        / on (exit) group_left () b_total offset 5m > 0.9 and c:recorded == bool 1e3"#;
    assert_eq!(
        metric_names(expr),
        ["a_seconds_bucket", "b_total", "c:recorded"]
    );
    assert_eq!(metric_names("histogram_quantile(0.9, x)"), ["x"]);
    assert!(metric_names("sum(rate($metric[1m]))").is_empty());
}

#[actix_rt::test]
async fn every_dashboard_query_names_exported_metrics() {
    let d = dashboard();
    let schema = d["schemaVersion"].as_u64().expect("schemaVersion");
    assert!((36..=41).contains(&schema), "schemaVersion {schema}");
    let exported = Exported::parse(&exposition_after_a_crawl(4).await);

    let mut queries = 0;
    for p in panels(&d) {
        let title = p["title"].as_str().unwrap_or("?");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "{title}: the templated data source, so an import can pick it"
        );
        let targets = p["targets"].as_array();
        assert!(
            targets.is_some_and(|t| !t.is_empty()),
            "{title}: has queries"
        );
        for t in targets.into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: expr"));
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{title}: `{expr}` names no metric");
            for n in names {
                assert!(
                    exported.names.contains(&n),
                    "{title}: `{n}` is not exported; the exposition has {:?}",
                    exported.names
                );
            }
            queries += 1;
        }
    }
    assert!(queries >= 20, "{queries} queries");

    assert_eq!(variable(&d, "datasource")["type"], "datasource");
    for (var, label) in [("host", "host"), ("exit", "exit")] {
        let (metric, l) = label_values(variable(&d, var));
        assert_eq!(l, label, "`{var}` lists the `{label}` label");
        let carried = exported.labels.get(&metric);
        assert!(
            carried.is_some_and(|keys| keys.contains(label)),
            "`{var}`: {metric} has samples with a `{label}` label; it carries {carried:?}"
        );
    }
}
