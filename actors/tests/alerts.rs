//! `config/alerts.yml` is valid YAML in Prometheus's rule-file shape, and every metric its
//! rules name is in the `/metrics` a real crawler serves after a crawl of a local site.

#[path = "support/promql.rs"]
mod promql;

use promql::{exposition_after_a_crawl, metric_names, Exported};
use yaml_rust2::YamlLoader;

#[actix_rt::test]
async fn every_alert_names_existing_metrics() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/alerts.yml");
    let text = std::fs::read_to_string(path).expect("config/alerts.yml");
    let docs = YamlLoader::load_from_str(&text).expect("alerts.yml is valid YAML");
    let groups = docs[0]["groups"].as_vec().expect("a `groups` list");
    let exported = Exported::parse(&exposition_after_a_crawl(0).await);
    let mut rules = 0;
    for g in groups {
        for r in g["rules"].as_vec().expect("a `rules` list") {
            let alert = r["alert"].as_str().expect("every rule has `alert`");
            let expr = r["expr"].as_str().expect("every rule has `expr`");
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{alert}: names no metric");
            for n in names {
                assert!(
                    exported.names.contains(&n),
                    "{alert}: {n} is not exported; have {:?}",
                    exported.names
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
