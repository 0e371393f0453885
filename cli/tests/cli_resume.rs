//! A resumed crawl reads as one crawl: after Ctrl-C and `--resume`, `--out` holds one
//! record per URL, the summary counts the whole crawl, and the log names the WARC file the
//! run continues in. Asserted against what the site saw: no URL that already had a final
//! record is fetched again.

mod cli_support;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use cli_support::{json, records, s, sigint, spawn, stderr, wait_bounded, wait_for_lines, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
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

/// The summary's figures a record counts in, one each: together they are `total`.
const FATES: [&str; 6] = [
    "ok",
    "failed",
    "interrupted",
    "skipped_robots",
    "skipped_duplicate",
    "invalid",
];

/// Which of [`FATES`] a record counts in, from its fields.
fn fate(r: &Value) -> &'static str {
    let error = r["error"].as_str().unwrap_or("");
    match r["skipped"].as_str() {
        Some("robots") => "skipped_robots",
        Some("duplicate") => "skipped_duplicate",
        _ if r["status"]
            .as_u64()
            .is_some_and(|s| (200..300).contains(&s)) =>
        {
            "ok"
        }
        _ if error == "interrupted" => "interrupted",
        _ if r["status"].is_null() && error.starts_with("invalid_url:") => "invalid",
        _ => "failed",
    }
}

/// `sum`'s figures add up to its `total`, and each is the count of `recs` of its kind.
fn assert_figures_add_up(sum: &Value, recs: &[Value]) {
    let figure = |k: &str| sum[k].as_u64().unwrap_or_else(|| panic!("{k}: {sum}"));
    let parts: u64 = FATES.iter().map(|k| figure(k)).sum();
    assert_eq!(parts, figure("total"), "{sum}");
    for k in FATES {
        let n = recs.iter().filter(|r| fate(r) == k).count() as u64;
        assert_eq!(figure(k), n, "{k}: {sum}");
    }
}

#[test]
fn summary_figures_add_up_to_total_with_every_kind_of_record_and_after_resume() {
    // robots.txt keeps /private/ out; /gone/ answers 404; every answer takes 300 ms.
    let pages = Pages::new(|_: &str, pq: &str| match pq {
        "/robots.txt" => Some(Page::text("User-agent: *\nDisallow: /private/\n")),
        p if p.starts_with("/gone/") => None,
        _ => Some(Page::html("<p>page</p>")),
    });
    let site = TestSite::start(SiteConfig {
        pages: Some(pages),
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("resume-fates");
    let config = dir.file(
        "crawl.toml",
        &CONFIG.replace("robots = false", "robots = true"),
    );
    let mut list = vec![
        site.url("/gone/0"),
        site.url("/gone/1"),
        site.url("/private/x"),
        "not a url".to_string(),
        "http://127.0.0.1:70000/".to_string(),
        site.url("/gone/0"),
    ];
    list.extend((0..4).map(|i| site.url(&format!("/page/{i}"))));
    // Enough behind them that Ctrl-C finds fetches in flight.
    list.extend((0..40).map(|i| site.url(&format!("/later/{i}"))));
    let urls = dir.file("urls.txt", &(list.join("\n") + "\n"));
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
    let args = [
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--grace",
        "0",
    ];
    let child = spawn(&args);
    wait_for_lines(&out, 14, Duration::from_secs(20));
    sigint(child.id());
    let o = wait_bounded(child, Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    let sum = json(&summary);
    let recs = records(&out);
    assert_figures_add_up(&sum, &recs);
    for k in FATES {
        assert!(
            sum[k].as_u64().unwrap() > 0,
            "a record of each kind: {k}: {sum}"
        );
    }
    assert_eq!(sum["invalid"], 2, "{sum}");
    assert_eq!(sum["skipped_robots"], 1, "{sum}");
    assert_eq!(sum["skipped_duplicate"], 1, "{sum}");
    assert_eq!(sum["failed"], 2, "the two 404s: {sum}");
    // What the site saw: each 404 once (the repeated line was not fetched), nothing of
    // /private/.
    let seen = requests_by_path(&site);
    assert!(!seen.contains_key("/private/x"), "{seen:?}");
    assert_eq!(seen.get("/gone/0"), Some(&1), "{seen:?}");
    assert_eq!(seen.get("/gone/1"), Some(&1), "{seen:?}");

    // Resumed: the interrupted URLs are fetched, the figures over the compacted --out
    // still add up.
    let mut resume = args.to_vec();
    resume.push("--resume");
    let o = wait_bounded(spawn(&resume), Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let sum = json(&summary);
    assert_eq!(sum["resumed"], true, "{sum}");
    assert_figures_add_up(&sum, &records(&out));
    assert_eq!(
        sum["total"],
        list.len() as u64 - 1,
        "one record per URL: {sum}"
    );
    assert_eq!(sum["interrupted"], 0, "{sum}");
    assert_eq!(sum["ok"], 44, "{sum}");
    assert_eq!(sum["failed"], 2, "{sum}");
    assert_eq!(sum["invalid"], 2, "{sum}");
}

/// A line too long to be a URL has its one record after the first run: `--resume` skips
/// it with the URLs done, rather than record it again (a run stopped before its
/// compaction would have left two records for it).
#[test]
fn resume_skips_a_line_too_long_to_be_a_url_as_done() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("resume-long");
    let config = dir.file("crawl.toml", CONFIG);
    let long = site.url(&format!("/l?q={}", "a".repeat(20_000)));
    let list = format!("{}\n{long}\n{}\n", site.url("/a"), site.url("/b"));
    let urls = dir.file("urls.txt", &list);
    let out = dir.path("out.jsonl");
    let summary = dir.path("summary.json");
    let args = [
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--quiet",
    ];
    let o = wait_bounded(spawn(&args), Duration::from_secs(60));
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    assert_eq!(records(&out).len(), 3);
    let mut again = args.to_vec();
    again.push("--resume");
    let o = wait_bounded(spawn(&again), Duration::from_secs(60));
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let sum = json(&summary);
    assert_eq!(sum["skipped"], 3, "every line was done: {sum}");
    assert_eq!(records(&out).len(), 3);
    assert_eq!(site.requests().len(), 2, "{:?}", site.requests());
}

/// The status line's `done X/Y` of a resumed list read from stdin: the URLs found done count
/// in both, so X never passes Y.
#[test]
fn the_status_line_of_a_resumed_stdin_list_counts_the_skipped_urls_in_its_total() {
    use std::io::Write;
    use std::process::Stdio;

    // 1 s an answer, one at a time: six URLs outlast the first status line (5 s).
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(1000),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("resume-status");
    let cfg = dir.file(
        "c.toml",
        &CONFIG.replace("concurrency = 4", "concurrency = 1"),
    );
    let out = dir.path("out.jsonl");
    let done: String = (0..3)
        .map(|i| site.url(&format!("/d/{i}")) + "\n")
        .collect();
    let more: String = (0..6)
        .map(|i| site.url(&format!("/m/{i}")) + "\n")
        .collect();
    let crawl = |list: &str, extra: &[&str]| {
        let mut args = vec!["--config", s(&cfg), "--urls", "-", "--out", s(&out)];
        args.extend_from_slice(extra);
        let mut child = cli_support::cmd(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(list.as_bytes()).expect("write the list");
        drop(stdin);
        let o = wait_bounded(child, Duration::from_secs(60));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stderr(&o)
    };
    crawl(&done, &["--quiet"]);
    let err = crawl(&(done.clone() + &more), &["--resume"]);
    let shown: Vec<(u64, u64)> = err
        .lines()
        .filter_map(|l| {
            let rest = &l[l.find("] done ")? + 7..];
            let (x, y) = rest[..rest.find(' ')?].split_once('/')?;
            Some((x.parse().ok()?, y.trim_start_matches('~').parse().ok()?))
        })
        .collect();
    assert!(!shown.is_empty(), "a status line: {err}");
    for (x, y) in &shown {
        assert!(x <= y, "done {x}/{y}: {err}");
        assert!(*x >= 3, "the skipped URLs are done: {err}");
    }
    assert_eq!(shown.last().map(|s| s.1), Some(9), "{err}");
    assert_eq!(records(&out).len(), 9);
}
