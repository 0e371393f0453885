//! The `crawl` example binary end to end (built with `cargo build -p exitcrawl --example
//! crawl`) against a local test site (loopback only): exit codes, the JSONL records, the
//! summary, bad input, masked credentials. Every run is bounded: a handful of URLs, or
//! `--demo-urls 200`. Signals are in `crawl_cli_signals.rs`, `--follow` in
//! `crawl_cli_follow.rs`, the shared frontier in `crawl_cli_frontier.rs`.

mod cli_support;

use cli_support::example::{crawl, crawl_cmd, crawl_config, NO_ROBOTS};
use cli_support::{records, s, stderr, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite};
use serde_json::Value;

#[test]
fn crawls_a_url_file_and_writes_records_and_summary() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("run");
    let config = dir.file("crawl.toml", &crawl_config(NO_ROBOTS));
    let valid: Vec<String> = (0..12).map(|i| site.url(&format!("/page/{i}"))).collect();
    let mut lines = vec!["# a comment".to_string(), String::new()];
    lines.extend(valid.iter().take(6).cloned());
    lines.push("not a url".into());
    lines.push("   ".into());
    lines.extend(valid.iter().skip(6).cloned());
    let urls = dir.file("urls.txt", &(lines.join("\n") + "\n"));
    let out = dir.path("out.jsonl");
    let summary = dir.path("summary.json");

    let o = crawl(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));

    let text = std::fs::read_to_string(&out).expect("read --out");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(records.len(), valid.len() + 1, "one record per URL line");
    for key in [
        "url",
        "status",
        "exit",
        "attempts",
        "elapsed_ms",
        "bytes",
        "error",
    ] {
        assert!(records.iter().all(|r| r.get(key).is_some()), "key {key}");
    }
    let invalid: Vec<_> = records.iter().filter(|r| r["url"] == "not a url").collect();
    assert_eq!(invalid.len(), 1);
    assert!(invalid[0]["error"].is_string());
    assert!(invalid[0]["status"].is_null());
    for u in &valid {
        let r = records
            .iter()
            .find(|r| r["url"] == u.as_str())
            .expect("record for each valid URL");
        assert_eq!(r["status"], 200, "{r}");
        assert!(r["error"].is_null());
        assert!(r["exit"] == "e2" || r["exit"] == "e3", "{r}");
        assert_eq!(r["bytes"], 1024);
    }

    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("read --summary"))
            .expect("summary is JSON");
    let n = |k: &str| sum[k].as_u64().unwrap_or_else(|| panic!("summary {k}"));
    assert_eq!(n("total"), records.len() as u64);
    assert_eq!(n("ok"), valid.len() as u64);
    // The invalid line is its own figure, not a failed fetch.
    assert_eq!(n("invalid"), 1);
    assert_eq!(n("failed"), n("total") - n("ok") - n("invalid"));
    let attempts: u64 = records
        .iter()
        .map(|r| r["attempts"].as_u64().unwrap())
        .sum();
    assert_eq!(n("requests"), attempts);
    let per_exit = sum["per_exit"].as_array().expect("per_exit");
    assert_eq!(per_exit.len(), 2);
    let exit_requests: u64 = per_exit
        .iter()
        .map(|e| e["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(exit_requests, n("requests"));
    assert_eq!(
        site.stats().requests,
        n("requests"),
        "the site saw every request"
    );
}

#[test]
fn unknown_config_key_exits_2_naming_the_key() {
    let dir = TempDir::new("badcfg");
    let config = dir.file(
        "bad.toml",
        &crawl_config("").replace("concurrency", "concurency"),
    );
    let urls = dir.file("urls.txt", "http://127.0.0.1:1/\n");
    let o = crawl(&["--config", s(&config), "--urls", s(&urls)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("crawler.concurency"),
        "stderr: {}",
        stderr(&o)
    );
}

#[test]
fn bad_arguments_exit_2_and_help_lists_flags() {
    let o = crawl(&["--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--no-such-flag"));

    // No config is needed (the default route is the exit), but URLs are.
    let o = crawl(&["--out", "-"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing URLs"), "{}", stderr(&o));

    let o = crawl(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--config",
        "--urls",
        "--out",
        "--summary",
        "--resume",
        "--grace",
        "--metrics",
        "--quiet",
        "--log-format",
        "--demo",
        "--demo-urls",
        "--follow",
        "--ignore-robots",
        "--frontier",
        "--enqueue",
        "--claim-idle",
        "--idle-exit",
        "--dedupe",
        "--help",
        "--version",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn demo_fetches_every_url() {
    let o = crawl(&["--demo", "--demo-urls", "200"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let last = stdout.lines().last().expect("summary on stdout");
    let sum: Value = serde_json::from_str(last).expect("summary is JSON");
    assert_eq!(sum["total"], 200);
    assert_eq!(sum["ok"], 200);
    assert_eq!(sum["failed"], 0);
    assert_eq!(sum["per_exit"].as_array().map(Vec::len), Some(4));
}

#[test]
fn new_flags_reject_bad_values_with_exit_2() {
    let dir = TempDir::new("flags");
    let config = dir.file("crawl.toml", &crawl_config(""));
    let urls = dir.file("urls.txt", "http://127.0.0.1:1/\n");
    let base = ["--config", s(&config), "--urls", s(&urls)];
    for (extra, needle) in [
        (&["--resume"][..], "--resume needs --out"),
        (&["--resume", "--out", "-"][..], "--resume needs --out"),
        (&["--grace", "soon"][..], "--grace"),
        (&["--metrics", "localhost"][..], "--metrics"),
        (&["--log-format", "xml"][..], "--log-format"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let o = crawl(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&o).contains(needle), "{extra:?}: {}", stderr(&o));
    }
    let o = crawl(&["--demo", "--resume", "--out", s(&dir.path("o.jsonl"))]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn metrics_shortcut_json_logs_and_quiet() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("obs");
    let config = dir.file("crawl.toml", &crawl_config(""));
    let urls = dir.file("urls.txt", &format!("{}\n", site.url("/a")));
    let o = crawl_cmd(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--summary",
        s(&dir.path("sum.json")),
        "--metrics",
        "127.0.0.1:0",
        "--log-format",
        "json",
        "--quiet",
    ])
    .env("RUST_LOG", "info")
    .output()
    .expect("run");
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("metrics on http://127.0.0.1:"),
        "stderr: {err}"
    );
    let events: Vec<Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let started = events
        .iter()
        .find(|e| e["fields"]["message"] == "crawl started")
        .unwrap_or_else(|| panic!("a JSON 'crawl started' event on stderr: {err}"));
    assert_eq!(started["level"], "INFO");
    assert_eq!(started["fields"]["exits"], 2);
    assert!(events
        .iter()
        .any(|e| e["fields"]["message"] == "crawl finished" && e["fields"]["ok"] == 1));
    assert!(!err.contains("done 1/"), "--quiet: no status line: {err}");
}

#[test]
fn credentials_are_masked_in_records_and_resume_matches_masked_urls() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("mask");
    let config = dir.file("crawl.toml", &crawl_config(""));
    let secret = site.url("/data?id=7&api_key=SECRET");
    let userinfo = site
        .url("/u?token=SECRET2")
        .replace("http://", "http://bob:SECRET3@");
    let urls = dir.file("urls.txt", &format!("{secret}\n{userinfo}\n"));
    let out = dir.path("out.jsonl");
    let summary = dir.path("sum.json");
    let args = [
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
    ];
    let o = crawl(&args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains("SECRET"), "{text}");
    assert!(!stderr(&o).contains("SECRET"), "{}", stderr(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    let r = recs
        .iter()
        .find(|r| r["url"].as_str().unwrap().contains("/data"))
        .unwrap();
    assert_eq!(r["url"], site.url("/data?id=7&api_key=***").as_str());
    assert_eq!(r["status"], 200);
    let u = recs
        .iter()
        .find(|r| r["url"].as_str().unwrap().contains("/u"))
        .unwrap();
    assert!(
        u["url"].as_str().unwrap().starts_with("http://bob:***@"),
        "{u}"
    );
    assert!(u["url"].as_str().unwrap().ends_with("token=***"), "{u}");

    // --resume compares masked forms: nothing is fetched again.
    let before = site.stats().requests;
    let mut resume = args.to_vec();
    resume.push("--resume");
    let o = crawl(&resume);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(site.stats().requests, before);
    let sum: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(sum["skipped"], 2);
    assert_eq!(sum["total"], 2, "the whole crawl: both URLs' records");
    assert_eq!(records(&out).len(), 2);
    assert!(!std::fs::read_to_string(&out).unwrap().contains("SECRET"));
}

#[test]
fn odd_lines_each_get_one_record_and_a_huge_line_is_not_buffered() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("odd");
    let config = dir.file("crawl.toml", &crawl_config(NO_ROBOTS));
    let port = site.port();
    let mut bytes: Vec<u8> = Vec::new();
    bytes.extend_from_slice(site.url("/ok").as_bytes());
    bytes.push(b'\n');
    // 2 MB on one line: kept to its first 16 KiB, refused as too long.
    bytes.extend_from_slice(site.url("/").as_bytes());
    bytes.extend(std::iter::repeat_n(b'a', 2_000_000));
    bytes.push(b'\n');
    // Not UTF-8.
    bytes.extend_from_slice(format!("http://127.0.0.1:{port}/").as_bytes());
    bytes.extend_from_slice(b"\xff\xfe\n");
    bytes.extend_from_slice(format!("http://[::1]:{port}/v6\n").as_bytes());
    bytes.extend_from_slice(b"gopher://127.0.0.1/x\n");
    bytes.extend_from_slice(site.url("/after").as_bytes());
    bytes.push(b'\n');
    let urls = dir.path("urls.txt");
    std::fs::write(&urls, &bytes).expect("write urls");
    let out = dir.path("out.jsonl");
    let o = crawl(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 6, "one record per URL line: {recs:?}");
    let errors: Vec<String> = recs
        .iter()
        .filter_map(|r| r["error"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(
        errors.iter().any(|e| e.contains("bytes long")),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.contains("UTF-8")), "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("scheme")), "{errors:?}");
    let long = recs
        .iter()
        .find(|r| {
            r["error"]
                .as_str()
                .is_some_and(|e| e.contains("bytes long"))
        })
        .expect("the long line's record");
    assert!(long["url"].as_str().expect("url").len() <= 16 * 1024);
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec!["/ok".to_string(), "/after".to_string()]);
}
