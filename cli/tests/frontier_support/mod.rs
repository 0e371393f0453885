//! What the shared-frontier tests of the `exitcrawl` binary share: the consumers'
//! configuration, the site, URL files, consumers, waits, signals and merges.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use exitcrawl_testsite::{SiteConfig, TestSite};

use crate::cli_support::{assert_ok, records, run, s, spawn, TempDir};
use crate::support::RedisServer;

/// Two exits on 127.0.0.2 and .3, 8 fetches at once; `crawler` and `limiter` are TOML
/// lines of those sections.
pub fn config(crawler: &str, limiter: &str) -> String {
    format!(
        r#"
[crawler]
concurrency = 8
max_retries = 1
retry_backoff_base_ms = 20
retry_backoff_max_ms = 200
{crawler}

[limiter]
{limiter}

[[exits]]
name = "e2"
source_ip = "127.0.0.2"

[[exits]]
name = "e3"
source_ip = "127.0.0.3"
"#
    )
}

pub const NO_LIMIT: &str = "algorithm = \"none\"";

/// A site whose every answer takes `latency`.
pub fn site(latency: Duration) -> TestSite {
    TestSite::start(SiteConfig {
        latency,
        ..SiteConfig::default()
    })
}

/// How many times the site was asked for each page (robots.txt left out).
pub fn fetches(site: &TestSite) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for r in site.requests() {
        if r.path != "/robots.txt" {
            *n.entry(r.path).or_default() += 1;
        }
    }
    n
}

/// A crawl's URL file and its URLs: `/{tag}/0` … on `site`.
pub fn url_file(dir: &TempDir, site: &TestSite, tag: &str, n: usize) -> (PathBuf, Vec<String>) {
    let urls: Vec<String> = (0..n).map(|i| site.url(&format!("/{tag}/{i}"))).collect();
    let path = dir.file(&format!("{tag}.txt"), &(urls.join("\n") + "\n"));
    (path, urls)
}

pub fn enqueue(list: &Path, queue: &str, extra: &[&str]) -> String {
    let mut args = vec!["--enqueue", s(list), "--frontier", queue];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_ok(&o);
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A consumer writing `out` and `out`.json (its summary), with `--idle-exit 2` unless
/// `extra` says otherwise.
pub fn consumer(cfg: &Path, queue: &str, out: &Path, extra: &[&str]) -> Child {
    let summary = out.with_extension("json");
    let mut args = vec![
        "--config",
        s(cfg),
        "--frontier",
        queue,
        "--out",
        s(out),
        "--summary",
        s(&summary),
        "--quiet",
    ];
    if !extra.contains(&"--idle-exit") {
        args.extend(["--idle-exit", "2"]);
    }
    args.extend_from_slice(extra);
    spawn(&args)
}

pub fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Wait (polling every 20 ms) until `cond` holds; fails after `limit` saying `what`.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < until, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig}");
}

/// `--dedupe` of `outs`: each URL's number of records in the merge, every one checked
/// to be a 200.
pub fn merged(dir: &TempDir, outs: &[&Path]) -> HashMap<String, usize> {
    let merged = dir.path("merged.jsonl");
    let mut args = Vec::new();
    for o in outs {
        args.extend(["--dedupe", s(o)]);
    }
    args.extend(["--out", s(&merged)]);
    assert_ok(&run(&args));
    let mut per_url = HashMap::new();
    for r in records(&merged) {
        assert_eq!(r["status"], 200, "{r}");
        *per_url
            .entry(r["url"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    per_url
}

/// Of the URLs recorded in `out`, how many the done-set of the queue `jobs` lacks; and
/// how many of its URLs are done without a record in `out`.
pub fn records_against_done(redis: &RedisServer, out: &Path) -> (usize, usize) {
    let recorded: HashSet<String> = records(out)
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_string())
        .collect();
    let done = |u: &str| redis.int(&["SISMEMBER", "exitcrawl:done:jobs", u]) == 1;
    let not_done = recorded.iter().filter(|u| !done(u)).count();
    let all_done = redis.int(&["SCARD", "exitcrawl:done:jobs"]) as usize;
    (not_done, all_done - (recorded.len() - not_done))
}

pub fn assert_one_record_each(per_url: &HashMap<String, usize>, urls: &[String]) {
    for u in urls {
        assert_eq!(per_url.get(u), Some(&1), "{u}");
    }
    assert_eq!(per_url.len(), urls.len());
}
