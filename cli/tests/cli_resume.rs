//! A resumed crawl reads as one crawl: after Ctrl-C and `--resume`, `--out` holds one
//! record per URL, the summary counts the whole crawl, and the log names the WARC file the
//! run continues in. Asserted against what the site saw: no URL that already had a final
//! record is fetched again.

mod cli_support;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cli_support::{json, records, s, spawn, stderr, wait_bounded, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite};
use serde_json::Value;

/// Four at a time, no retries, robots.txt off (the site's requests are the list's).
const CONFIG: &str = r#"
[crawler]
concurrency = 4
timeout_ms = 10000
connect_timeout_ms = 2000
max_retries = 0

[limiter]
algorithm = "none"

[crawl]
robots = false

[[exits]]
name = "e2"
source_ip = "127.0.0.2"

[[exits]]
name = "e3"
source_ip = "127.0.0.3"
"#;

/// Each answer takes 300 ms: 60 URLs, 4 at a time, take about 4.5 s.
fn slow_site() -> TestSite {
    TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    })
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Poll until `path` has at least `n` lines (records are flushed every second).
fn wait_for_lines(path: &Path, n: usize, limit: Duration) {
    let until = Instant::now() + limit;
    while lines(path) < n {
        assert!(
            Instant::now() < until,
            "{} has {} lines",
            path.display(),
            lines(path)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigint(pid: u32) {
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// How many requests the site saw for each path.
fn requests_by_path(site: &TestSite) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for r in site.requests() {
        *n.entry(r.path).or_default() += 1;
    }
    n
}

#[test]
fn sigint_then_resume_leaves_one_record_per_url_and_a_summary_of_the_whole_crawl() {
    let site = slow_site();
    let dir = TempDir::new("resume-one");
    let config = dir.file("crawl.toml", CONFIG);
    let paths: Vec<String> = (0..60).map(|i| format!("/r/{i}")).collect();
    let all: Vec<String> = paths.iter().map(|p| site.url(p)).collect();
    // One URL twice: the list has 61 lines, 60 distinct URLs.
    let list = format!("{}\n{}\n", all.join("\n"), all[3]);
    let urls = dir.file("urls.txt", &list);
    let (out, summary, warc) = (
        dir.path("out.jsonl"),
        dir.path("summary.json"),
        dir.path("w.warc.gz"),
    );
    let args = [
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--warc",
        s(&warc),
        "--grace",
        "0",
    ];

    // Interrupted after the first records: the fetches in flight are recorded as
    // interrupted, the URLs read ahead and not sent get no record.
    let child = spawn(&args);
    wait_for_lines(&out, 6, Duration::from_secs(20));
    sigint(child.id());
    let o = wait_bounded(child, Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    let first = records(&out);
    let final_first: HashSet<String> = first
        .iter()
        .filter(|r| r["error"] != "interrupted" && r["skipped"].is_null())
        .map(|r| r["url"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        first.iter().any(|r| r["error"] == "interrupted"),
        "--grace 0 interrupts the fetches in flight"
    );
    assert!(final_first.len() >= 6 && final_first.len() < all.len());

    let mut resume = args.to_vec();
    resume.push("--resume");
    let o = wait_bounded(spawn(&resume), Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    let continued = dir.path("w-00001.warc.gz");
    assert!(
        err.contains(&format!("WARC continues in {}", continued.display())),
        "{err}"
    );
    assert!(continued.exists());
    assert!(err.contains("compacted"), "{err}");

    // --out: exactly one record per URL of the list, each its final 200.
    let recs = records(&out);
    let urls_out: Vec<&str> = recs.iter().map(|r| r["url"].as_str().unwrap()).collect();
    let distinct: HashSet<&str> = urls_out.iter().copied().collect();
    assert_eq!(distinct.len(), urls_out.len(), "one record per URL");
    let want: HashSet<&str> = all.iter().map(String::as_str).collect();
    assert_eq!(distinct, want);
    assert!(recs.iter().all(|r| r["status"] == 200), "{recs:?}");

    // The summary covers the whole crawl.
    let sum: Value = json(&summary);
    assert_eq!(sum["total"], all.len() as u64, "{sum}");
    assert_eq!(sum["ok"], all.len() as u64, "{sum}");
    assert_eq!(sum["failed"], 0, "{sum}");
    assert_eq!(sum["interrupted"], 0, "{sum}");
    assert_eq!(sum["skipped_duplicate"], 0, "{sum}");
    assert_eq!(sum["resumed"], true, "{sum}");

    // What the site saw: a URL final after the first run was not fetched again; every
    // URL was fetched.
    let seen = requests_by_path(&site);
    for (p, u) in paths.iter().zip(&all) {
        let n = seen.get(p).copied().unwrap_or(0);
        if final_first.contains(u) {
            assert_eq!(n, 1, "{p} was final after the first run");
        } else {
            assert!(n >= 1, "{p} never fetched");
        }
    }
}

#[test]
fn a_compaction_that_cannot_be_written_leaves_out_whole_and_says_so() {
    let site = slow_site();
    let dir = TempDir::new("resume-fails");
    let config = dir.file("crawl.toml", CONFIG);
    // 50 to fetch, 4 at a time, 300 ms each: about 4 s, the first records out after 1 s.
    let all: Vec<String> = (0..60).map(|i| site.url(&format!("/f/{i}"))).collect();
    // An earlier run's --out: the first ten URLs done, the eleventh interrupted.
    let mut earlier = String::new();
    for u in &all[..10] {
        earlier.push_str(&format!(
            "{{\"url\":\"{u}\",\"status\":200,\"error\":null}}\n"
        ));
    }
    earlier.push_str(&format!(
        "{{\"url\":\"{}\",\"status\":null,\"error\":\"interrupted\"}}\n",
        all[10]
    ));
    let out = dir.file("out.jsonl", &earlier);
    let urls = dir.file("urls.txt", &(all.join("\n") + "\n"));
    let summary = dir.path("summary.json");
    let child = spawn(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--resume",
    ]);
    // Once the run appends (its start-up checks are behind it), the name its compaction
    // would be written under is taken by a directory: the compaction at the end fails.
    wait_for_lines(&out, 12, Duration::from_secs(20));
    let taken = dir.path(&format!(".out.jsonl.{}.tmp", child.id()));
    std::fs::create_dir(&taken).expect("take the temporary name");
    let o = wait_bounded(child, Duration::from_secs(60));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(
        err.contains("could not compact --out") && err.contains("it is left as it was"),
        "{err}"
    );
    // --out is the earlier file with this run's 50 records after it: nothing lost.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with(&earlier), "{text}");
    assert_eq!(text.lines().count(), 11 + 50);
    // The summary still counts the whole crawl, one per URL.
    let sum = json(&summary);
    assert_eq!(sum["total"], all.len() as u64, "{sum}");
    assert_eq!(sum["ok"], all.len() as u64, "{sum}");
}
