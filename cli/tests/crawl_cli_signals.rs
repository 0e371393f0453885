//! The `crawl` example stopped by SIGINT and SIGTERM: interrupted URLs get their records,
//! a second Ctrl-C exits at once, and `--resume` finishes the job (also of 10,000 URLs).

mod cli_support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use cli_support::example::{crawl, slow_site, spawn_crawl, NO_ROBOTS, SLOW_CONFIG};
use cli_support::{records, s, signal, stderr, wait_bounded, wait_for_lines, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use serde_json::Value;

#[test]
fn sigint_records_interrupted_urls_and_resume_completes_the_job() {
    let site = slow_site();
    let dir = TempDir::new("resume");
    let config = dir.file("crawl.toml", &format!("{SLOW_CONFIG}{NO_ROBOTS}"));
    let all: Vec<String> = (0..80).map(|i| site.url(&format!("/r/{i}"))).collect();
    let urls = dir.file("urls.txt", &(all.join("\n") + "\n"));
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
        "--grace",
        "0",
    ];

    // 80 URLs, 8 at a time, 300 ms each: about 3 s. Interrupt after the first records.
    let child = spawn_crawl(&args);
    wait_for_lines(&out, 8, Duration::from_secs(10));
    signal(&child, "-INT");
    let o = wait_bounded(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));

    let first = records(&out);
    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary written"))
            .expect("summary JSON");
    assert_eq!(sum["total"], first.len() as u64, "a record per URL read");
    let interrupted: Vec<&Value> = first
        .iter()
        .filter(|r| r["error"] == "interrupted")
        .collect();
    assert_eq!(sum["interrupted"], interrupted.len() as u64);
    assert!(
        !interrupted.is_empty(),
        "--grace 0 interrupts the fetches in flight"
    );
    assert!(interrupted.iter().all(|r| r["status"].is_null()));
    assert!(first.len() < all.len(), "stopped early: {}", first.len());
    // The list is read ahead (concurrency + queue_capacity): the URLs never sent have no
    // record and are counted apart.
    assert_eq!(
        sum["left_queued"].as_u64().expect("left_queued") + first.len() as u64,
        all.len() as u64,
        "every URL read is recorded or left queued"
    );
    let urls_seen: HashSet<&str> = first.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(urls_seen.len(), first.len(), "no URL recorded twice");
    let done_first = first.len() - interrupted.len();
    assert!(done_first >= 8);

    // Resume: only the URLs without a final record are fetched.
    let requests_before = site.stats().requests;
    let mut resume_args = args.to_vec();
    resume_args.push("--resume");
    let o = crawl(&resume_args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary written"))
            .expect("summary JSON");
    assert_eq!(sum["skipped"], done_first as u64);
    // The summary covers the whole crawl: one record per URL over both runs.
    assert_eq!(sum["total"], all.len() as u64);
    assert_eq!(sum["ok"], sum["total"]);
    assert_eq!(sum["resumed"], true);
    assert_eq!(
        site.stats().requests - requests_before,
        (all.len() - done_first) as u64,
        "finished URLs are not fetched again"
    );

    // --out is compacted: every URL exactly once, its final record.
    let every = records(&out);
    assert_eq!(every.len(), all.len(), "one record per URL");
    let mut finals: HashMap<&str, usize> = HashMap::new();
    let mut last: HashMap<&str, &Value> = HashMap::new();
    for r in &every {
        let url = r["url"].as_str().unwrap();
        if r["error"] != "interrupted" {
            *finals.entry(url).or_default() += 1;
        }
        last.insert(url, r);
    }
    for u in &all {
        assert_eq!(finals.get(u.as_str()), Some(&1), "{u}");
        assert_eq!(last[u.as_str()]["status"], 200, "{u}");
    }
    assert_eq!(finals.len(), all.len());
}

#[test]
fn second_sigint_exits_at_once() {
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_secs(5),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("twice");
    let config = dir.file("crawl.toml", SLOW_CONFIG);
    let all: Vec<String> = (0..4).map(|i| site.url(&format!("/s/{i}"))).collect();
    let urls = dir.file("urls.txt", &(all.join("\n") + "\n"));
    let child = spawn_crawl(&["--config", s(&config), "--urls", s(&urls), "--grace", "30"]);
    // Wait until the requests are in flight at the site.
    let until = Instant::now() + Duration::from_secs(10);
    while site.stats().in_flight < 4 {
        assert!(Instant::now() < until, "requests never reached the site");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&child, "-INT");
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    signal(&child, "-INT");
    let o = wait_bounded(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "exited {:?} after the second Ctrl-C",
        sent.elapsed()
    );
    assert!(stderr(&o).contains("interrupted again"), "{}", stderr(&o));
}

#[test]
fn sigterm_stops_like_ctrl_c() {
    let site = slow_site();
    let dir = TempDir::new("term");
    let config = dir.file("crawl.toml", SLOW_CONFIG);
    let all: Vec<String> = (0..80).map(|i| site.url(&format!("/t/{i}"))).collect();
    let urls = dir.file("urls.txt", &(all.join("\n") + "\n"));
    let out = dir.path("out.jsonl");
    let child = spawn_crawl(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&dir.path("sum.json")),
    ]);
    wait_for_lines(&out, 8, Duration::from_secs(10));
    signal(&child, "-TERM");
    let o = wait_bounded(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    // The default grace lets the fetches in flight (300 ms) finish: none interrupted.
    let recs = records(&out);
    assert!(recs.len() < all.len());
    assert!(
        recs.iter().all(|r| r["status"] == 200),
        "in-flight fetches finished within the grace period"
    );
}

#[test]
fn sigint_ends_the_unsent_urls_of_a_crawl_delay_host_at_once() {
    // One origin with `Crawl-delay: 2`: its URLs go one every two seconds, the others
    // wait their turn. Stopped, the waiting ones were never sent: no record, counted
    // `left_queued` for `--resume`, and the run does not wait out their turns.
    let pages = Pages::new(|_host: &str, pq: &str| match pq {
        "/robots.txt" => Some(Page::text("User-agent: *\nCrawl-delay: 2\n")),
        p if p.starts_with("/d/") => Some(Page::html("<p>ok</p>")),
        _ => None,
    });
    let site = TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("crawl-delay-stop");
    let all: Vec<String> = (0..20).map(|i| site.url(&format!("/d/{i}"))).collect();
    let (recs, sum, took) = stopped_after(&dir, SLOW_CONFIG, &all, 1);
    // The default grace is 10 s, and the turns left about 36 s.
    assert!(took < Duration::from_secs(8), "took {took:?} to stop");
    assert!(
        recs.iter().all(|r| r["status"] == 200),
        "only the sent URLs have records: {recs:?}"
    );
    assert_eq!(
        sum["left_queued"].as_u64(),
        Some((all.len() - recs.len()) as u64),
        "{sum}"
    );
}

#[test]
fn urls_read_ahead_and_not_taken_are_counted_left_for_resume() {
    // A queue of 16: of 600 URLs, a few dozen are taken and the rest wait in the reader's
    // hand-offs when the crawl is stopped. Each URL then has a record or is counted in
    // `left_queued` (the reader read the whole list, so none is in a batch it still holds).
    let site = slow_site();
    let dir = TempDir::new("read-ahead");
    let config = SLOW_CONFIG.replacen("[crawler]\n", "[crawler]\nqueue_capacity = 16\n", 1);
    let all: Vec<String> = (0..600).map(|i| site.url(&format!("/q/{i}"))).collect();
    let (recs, sum, _) = stopped_after(&dir, &format!("{config}{NO_ROBOTS}"), &all, 8);
    assert_eq!(
        recs.len() as u64 + sum["left_queued"].as_u64().unwrap(),
        all.len() as u64,
        "{sum}"
    );
}

/// A crawl of `urls` with `config`, sent SIGINT once `after` records are in: its records,
/// its summary and how long it took to stop (exit 130 asserted).
fn stopped_after(
    dir: &TempDir,
    config: &str,
    urls: &[String],
    after: usize,
) -> (Vec<Value>, Value, Duration) {
    let config = dir.file("crawl.toml", config);
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (out, summary) = (dir.path("out.jsonl"), dir.path("sum.json"));
    let child = spawn_crawl(&[
        "--config",
        s(&config),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
    ]);
    wait_for_lines(&out, after, Duration::from_secs(20));
    let stopped = Instant::now();
    signal(&child, "-INT");
    let o = wait_bounded(child, Duration::from_secs(20));
    let took = stopped.elapsed();
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    let sum = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (records(&out), sum, took)
}

const LOAD_CONFIG: &str = r#"
[crawler]
concurrency = 256
timeout_ms = 10000
connect_timeout_ms = 2000
max_retries = 0

[limiter]
algorithm = "none"

[[exits]]
name = "e2"
source_ip = "127.0.0.2"
max_concurrent = 64

[[exits]]
name = "e3"
source_ip = "127.0.0.3"
max_concurrent = 64

[[exits]]
name = "e4"
source_ip = "127.0.0.4"
max_concurrent = 64

[[exits]]
name = "e5"
source_ip = "127.0.0.5"
max_concurrent = 64
"#;

#[test]
fn sigint_in_a_10000_url_crawl_stops_within_grace_and_resume_finishes() {
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(20),
        log_requests: false,
        ..SiteConfig::default()
    });
    let dir = TempDir::new("load");
    let config = dir.file("crawl.toml", LOAD_CONFIG);
    let all: Vec<String> = (0..10_000).map(|i| site.url(&format!("/l/{i}"))).collect();
    let urls = dir.file("urls.txt", &(all.join("\n") + "\n"));
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
        "--grace",
        "2",
        "--quiet",
    ];
    let child = spawn_crawl(&args);
    wait_for_lines(&out, 1000, Duration::from_secs(60));
    let sent = Instant::now();
    signal(&child, "-INT");
    let o = wait_bounded(child, Duration::from_secs(30));
    let took = sent.elapsed();
    assert!(
        took < Duration::from_secs(2 + 5),
        "stopped {took:?} after SIGINT (grace 2 s)"
    );
    let first = records(&out);
    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary written"))
            .expect("summary JSON");
    if o.status.code() == Some(0) {
        // The crawl finished before the signal landed: nothing to resume, still complete.
        assert_eq!(first.len(), all.len());
        return;
    }
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    assert_eq!(sum["total"], first.len() as u64, "a record per URL read");
    let seen: HashSet<&str> = first.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(seen.len(), first.len(), "no URL recorded twice");

    let mut resume_args = args.to_vec();
    resume_args.push("--resume");
    let o = crawl(&resume_args);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let mut finals: HashMap<String, usize> = HashMap::new();
    for r in records(&out) {
        if r["error"] != "interrupted" {
            *finals
                .entry(r["url"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    assert_eq!(finals.len(), all.len(), "every URL has a final record");
    assert!(finals.values().all(|n| *n == 1), "and only one");
}
