//! The `crawl` example binary end to end (built with `cargo build --example crawl`) against a
//! local test site (loopback only), check exit codes, the JSONL records and the summary.
//! Every run is bounded: a handful of URLs, or `--demo-urls 200`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use exitcrawl_testsite::{SiteConfig, TestSite};
use serde_json::Value;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "exitcrawl-crawl-cli-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).expect("write temp file");
        p
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The example binary, built once per test run (`cargo test --test crawl_cli` alone does
/// not build examples). It sits next to this test's profile directory:
/// `<target>/<profile>/deps/crawl_cli-…` → `<target>/<profile>/examples/crawl`.
fn crawl_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary in <target>/<profile>/deps");
        let mut build = Command::new(env!("CARGO"));
        build
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "-q", "--example", "crawl"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "cargo build --example crawl failed");
        let bin = profile_dir
            .join("examples")
            .join(format!("crawl{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.is_file(), "no example binary at {}", bin.display());
        bin
    })
}

/// The example with `args` (EXITCRAWL__* overrides and RUST_LOG removed so the host
/// environment cannot change the settings under test).
fn crawl_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(crawl_bin());
    cmd.args(args).env_remove("RUST_LOG");
    for (name, _) in std::env::vars_os() {
        if name
            .to_string_lossy()
            .to_ascii_uppercase()
            .starts_with("EXITCRAWL__")
        {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// Run the example with `args` to completion.
fn crawl(args: &[&str]) -> Output {
    crawl_cmd(args).output().expect("run the crawl example")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const CONFIG: &str = r#"
[crawler]
concurrency = 4
timeout_ms = 5000
connect_timeout_ms = 2000
max_retries = 1
retry_backoff_base_ms = 20
retry_backoff_max_ms = 200

[limiter]
algorithm = "none"

[[exits]]
name = "e2"
source_ip = "127.0.0.2"

[[exits]]
name = "e3"
source_ip = "127.0.0.3"
"#;

#[test]
fn crawls_a_url_file_and_writes_records_and_summary() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("run");
    let config = dir.file("crawl.toml", CONFIG);
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
    assert_eq!(n("failed"), n("total") - n("ok"));
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
    let config = dir.file("bad.toml", &CONFIG.replace("concurrency", "concurency"));
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

    let o = crawl(&["--urls", "-"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--config"));

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
    let config = dir.file("crawl.toml", CONFIG);
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
    let config = dir.file("crawl.toml", CONFIG);
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

/// Read a JSONL file into records.
fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// Wait for `child` to exit, at most `limit` (then kill it and fail).
fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let until = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let o = child.wait_with_output().expect("wait");
            panic!(
                "crawl did not exit within {limit:?}; stderr: {}",
                stderr(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("wait")
}

/// Poll until `path` has at least `n` lines (records are flushed every second).
fn wait_for_lines(path: &Path, n: usize, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        let lines = std::fs::read_to_string(path).map_or(0, |t| t.lines().count());
        if lines >= n {
            return;
        }
        assert!(
            Instant::now() < until,
            "{} has {lines} lines",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

fn slow_site() -> TestSite {
    TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    })
}

const SLOW_CONFIG: &str = r#"
[crawler]
concurrency = 8
timeout_ms = 10000
connect_timeout_ms = 2000
max_retries = 0

[limiter]
algorithm = "none"

[[exits]]
name = "e2"
source_ip = "127.0.0.2"

[[exits]]
name = "e3"
source_ip = "127.0.0.3"
"#;

#[test]
fn sigint_records_interrupted_urls_and_resume_completes_the_job() {
    let site = slow_site();
    let dir = TempDir::new("resume");
    let config = dir.file("crawl.toml", SLOW_CONFIG);
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
    let child = crawl_cmd(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crawl");
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
    assert_eq!(sum["total"], (all.len() - done_first) as u64);
    assert_eq!(sum["ok"], sum["total"]);
    assert_eq!(
        site.stats().requests - requests_before,
        (all.len() - done_first) as u64,
        "finished URLs are not fetched again"
    );

    // The union of final records: every URL exactly once, and it is each URL's last.
    let every = records(&out);
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
    let child = crawl_cmd(&["--config", s(&config), "--urls", s(&urls), "--grace", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crawl");
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
    let child = crawl_cmd(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&dir.path("sum.json")),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn crawl");
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
