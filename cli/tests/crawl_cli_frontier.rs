//! The `crawl` example on a shared frontier (a real `redis-server`): consumers survive a
//! kill, dedupe leaves one record per URL, and bad frontier flags are refused.

#[path = "../../actors/tests/support/mod.rs"]
mod support;

mod cli_support;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use cli_support::example::{crawl, crawl_config, spawn_crawl, SLOW_CONFIG};
use cli_support::{records, s, signal, stderr, wait_bounded, wait_for_lines, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite};
use support::RedisServer;

#[test]
fn frontier_consumers_survive_a_kill_and_dedupe_leaves_one_record_per_url() {
    const URLS: usize = 300;
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(100),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("frontier");
    let config = dir.file("crawl.toml", SLOW_CONFIG);
    let all: Vec<String> = (0..URLS).map(|i| site.url(&format!("/f/{i}"))).collect();
    let urls = dir.file("urls.txt", &(all.join("\n") + "\n"));
    let queue = format!("{}jobs", redis.url());

    let o = crawl(&["--enqueue", s(&urls), "--frontier", &queue]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("enqueued {URLS} skipped 0")
    );

    let consumer = |out: &Path, sum: &Path| {
        spawn_crawl(&[
            "--config",
            s(&config),
            "--frontier",
            &queue,
            "--out",
            s(out),
            "--summary",
            s(sum),
            "--claim-idle",
            "1",
            "--idle-exit",
            "2",
            "--quiet",
        ])
    };
    let (out_a, out_b) = (dir.path("a.jsonl"), dir.path("b.jsonl"));
    let a = consumer(&out_a, &dir.path("a.json"));
    let b = consumer(&out_b, &dir.path("b.json"));
    // 300 URLs, 2 × 8 in flight, 100 ms each: about 2 s. Kill A after its first records.
    wait_for_lines(&out_a, 16, Duration::from_secs(20));
    signal(&a, "-KILL");
    let oa = wait_bounded(a, Duration::from_secs(10));
    assert_eq!(oa.status.code(), None, "killed by a signal");
    let ob = wait_bounded(b, Duration::from_secs(60));
    assert_eq!(ob.status.code(), Some(0), "stderr: {}", stderr(&ob));
    let a_recs = records(&out_a).len();
    assert!(a_recs < URLS, "A was killed mid-crawl ({a_recs} records)");
    assert!(
        stderr(&ob).contains("claimed"),
        "B took over A's pending entries: {}",
        stderr(&ob)
    );

    let merged = dir.path("merged.jsonl");
    let o = crawl(&[
        "--dedupe",
        s(&out_a),
        "--dedupe",
        s(&out_b),
        "--out",
        s(&merged),
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let recs = records(&merged);
    let mut per_url: HashMap<&str, usize> = HashMap::new();
    for r in &recs {
        assert_eq!(r["status"], 200, "{r}");
        *per_url.entry(r["url"].as_str().unwrap()).or_default() += 1;
    }
    for u in &all {
        assert_eq!(per_url.get(u.as_str()), Some(&1), "{u}");
    }
    assert_eq!(recs.len(), URLS);
    assert!(site.stats().requests >= URLS as u64);
}

#[test]
fn frontier_flags_reject_bad_values() {
    let dir = TempDir::new("fflags");
    let config = dir.file("crawl.toml", &crawl_config(""));
    let urls = dir.file("urls.txt", "http://127.0.0.1:1/\n");
    for (args, needle) in [
        (vec!["--enqueue", s(&urls)], "--enqueue needs --frontier"),
        (
            vec!["--enqueue", s(&urls), "--frontier", "http://x/q"],
            "--frontier",
        ),
        (
            vec![
                "--config",
                s(&config),
                "--frontier",
                "redis://127.0.0.1:1/q",
            ],
            "--frontier needs --out",
        ),
        (vec!["--dedupe", s(&urls)], "--dedupe needs --out"),
        (
            vec![
                "--config",
                s(&config),
                "--urls",
                s(&urls),
                "--idle-exit",
                "1",
            ],
            "--idle-exit",
        ),
    ] {
        let o = crawl(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}
