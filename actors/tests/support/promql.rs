//! Metric names in PromQL expressions and in an OpenMetrics exposition: what
//! `tests/dashboard.rs` and `tests/alerts.rs` compare. Included by path rather than from
//! `support/mod.rs`, which the CLI's tests include too without the crates this one needs.

use std::collections::{HashMap, HashSet};

/// Words that stand where a metric name could: aggregations, keywords, and `inf`/`nan`.
const NOT_METRICS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "limitk",
    "limit_ratio",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "atan2",
    "inf",
    "nan",
];

/// Words followed by a list of label names in parentheses, not an expression.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names `expr` selects: identifiers that are not a function call (followed by
/// `(`), a keyword or aggregation, a label list, a label matcher (`{…}`), a range or
/// subquery (`[…]`), a string or a Grafana variable (`$host`, `${host}`).
pub fn metric_names(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' | b'`' => i = skip_string(b, i),
            b'{' => i = skip_until(b, i, b'}'),
            b'[' => i = skip_until(b, i, b']'),
            b'$' => {
                i += 1;
                if b.get(i) == Some(&b'{') {
                    i = skip_until(b, i, b'}');
                } else {
                    while i < b.len() && is_ident(b[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit() || c == b'.' => {
                // Numbers, and durations after `offset`: 0.9, 1e3, 5m.
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                let start = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                let word = &expr[start..i];
                let mut next = i;
                while next < b.len() && b[next].is_ascii_whitespace() {
                    next += 1;
                }
                let call = b.get(next) == Some(&b'(');
                if call && LABEL_LISTS.contains(&word) {
                    i = skip_until(b, next, b')');
                } else if !call && !NOT_METRICS.contains(&word) {
                    out.push(word.to_owned());
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

/// The index after the string that opens at `i`.
fn skip_string(b: &[u8], i: usize) -> usize {
    let quote = b[i];
    let mut j = i + 1;
    while j < b.len() && b[j] != quote {
        if b[j] == b'\\' && quote != b'`' {
            j += 1;
        }
        j += 1;
    }
    j + 1
}

/// The index after the `close` that ends the group opening at `i`, strings skipped whole.
fn skip_until(b: &[u8], i: usize, close: u8) -> usize {
    let mut j = i + 1;
    while j < b.len() && b[j] != close {
        if matches!(b[j], b'"' | b'\'' | b'`') {
            j = skip_string(b, j);
        } else {
            j += 1;
        }
    }
    j + 1
}

/// What an exposition exports: every sample name a query may use, and the label names
/// each of them carries in its samples.
#[derive(Debug, Default)]
pub struct Exported {
    /// Sample names: each family's own, `_total` for counters, `_bucket`/`_sum`/`_count`
    /// for histograms, and the names of the samples present.
    pub names: HashSet<String>,
    /// Per sample name present, the label names its samples carry.
    pub labels: HashMap<String, HashSet<String>>,
}

impl Exported {
    /// Read an OpenMetrics text exposition.
    pub fn parse(text: &str) -> Self {
        let mut e = Exported::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split_whitespace();
                let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                    continue;
                };
                e.names.insert(name.to_owned());
                let suffixes: &[&str] = match kind {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    _ => &[],
                };
                for s in suffixes {
                    e.names.insert(format!("{name}{s}"));
                }
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            let name = &line[..end];
            e.names.insert(name.to_owned());
            let keys = e.labels.entry(name.to_owned()).or_default();
            if let Some(set) = line[end..]
                .strip_prefix('{')
                .and_then(|r| r.split_once('}'))
            {
                keys.extend(label_keys(set.0));
            }
        }
        e
    }
}

/// The label names of a sample's `k="v",…` text.
fn label_keys(set: &str) -> Vec<String> {
    let b = set.as_bytes();
    let mut keys = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i] != b'=' {
            i += 1;
        }
        keys.push(set[start..i].trim_matches([',', ' ']).to_owned());
        i = skip_string(b, i + 1);
        while i < b.len() && matches!(b[i], b',' | b' ') {
            i += 1;
        }
    }
    keys
}

/// The `/metrics` text of a crawler that fetched 60 pages of a local site through two
/// exits (`host_labels` hosts may keep their name), scraped over HTTP: what a Prometheus
/// would read. The site's 30/s per peer makes some 429s certain.
pub async fn exposition_after_a_crawl(host_labels: u32) -> String {
    use exitcrawl::config::{Algorithm, ExitSettings, Settings};
    use exitcrawl_actors::{Crawler, Fetch};
    use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};

    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::per_second(30, 3)),
        retry_after: RetryAfter::Omit,
        ..SiteConfig::default()
    });
    let mut s = Settings::with_exits(vec![
        ExitSettings::new("e2", "127.0.0.2".parse().expect("ip")),
        ExitSettings::new("e3", "127.0.0.3".parse().expect("ip")),
    ]);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::Aimd;
    s.limiter.initial_rps = 20.0;
    s.crawler.max_retries = 6;
    s.crawler.retry_backoff_base_ms = 20;
    s.crawler.retry_backoff_max_ms = 200;
    s.metrics.listen = Some("127.0.0.1:0".parse().expect("addr"));
    s.metrics.host_labels = host_labels;
    let h = Crawler::start(s).expect("start");
    let addr = h.metrics_addr().expect("endpoint bound");
    let fetches = (0..60).map(|i| h.fetch(Fetch::get(site.url(&format!("/d/{i}")))));
    futures_util::future::join_all(fetches).await;
    let mut resp = awc::Client::default()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .expect("scrape");
    assert!(resp.status().is_success());
    let body = resp.body().limit(1 << 20).await.expect("body");
    h.shutdown(std::time::Duration::from_secs(1)).await;
    String::from_utf8(body.to_vec()).expect("utf-8")
}
