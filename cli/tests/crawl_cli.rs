//! The `crawl` example binary end to end (built with `cargo build -p exitcrawl --example
//! crawl`) against a local test site (loopback only), check exit codes, the JSONL records
//! and the summary. Every run is bounded: a handful of URLs, or `--demo-urls 200`.

mod cli_support;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use cli_support::{wait_bounded, wait_for_lines};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
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
        // The example belongs to the workspace's root package, one directory up.
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("cli/ inside the workspace");
        let mut build = Command::new(env!("CARGO"));
        build
            .current_dir(root)
            .args(["build", "-q", "-p", "exitcrawl", "--example", "crawl"]);
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

/// Start the example with `args` in the background, its output captured.
fn spawn_crawl(args: &[&str]) -> Child {
    crawl_cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crawl")
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

/// Appended to a config by the tests that count exactly the requests the site saw for a
/// URL list: robots.txt is obeyed in every mode by default, so their site would also see a
/// `/robots.txt` fetch (robots.txt in list mode is tested in `actors/tests/cli_robots.rs`).
const NO_ROBOTS: &str = "\n[crawl]\nrobots = false\n";

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
    let config = dir.file("crawl.toml", &format!("{CONFIG}{NO_ROBOTS}"));
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

// ---------------------------------------------------------------------------------------
// --follow, --ignore-robots
// ---------------------------------------------------------------------------------------

/// Pages `/p/0.html` … `/p/19.html` of the generated site.
const FOLLOW_PAGES: usize = 20;

/// A generated site: 20 interlinked pages (relative, absolute, fragments, self links),
/// every 5th links into `/private/`, which robots.txt disallows. Logs every path asked.
fn follow_site(log: Arc<Mutex<Vec<String>>>) -> TestSite {
    let pages = Pages::new(move |host: &str, pq: &str| {
        log.lock().unwrap().push(pq.to_owned());
        let path = pq.split('?').next().unwrap_or(pq);
        match path {
            "/robots.txt" => Some(Page::text("User-agent: *\nDisallow: /private/\n")),
            p if p.starts_with("/private/") => Some(Page::html("<p>secret</p>")),
            p => {
                let i: usize = p.strip_prefix("/p/")?.strip_suffix(".html")?.parse().ok()?;
                (i < FOLLOW_PAGES).then(|| {
                    let n = FOLLOW_PAGES;
                    let mut h = format!("<html><body><a href=\"{}.html\">next</a>", (i + 1) % n);
                    h += &format!("<a href=\"/p/{}.html#x\">skip</a>", (i + 7) % n);
                    h += &format!("<a href=\"http://{host}/p/{}.html\">abs</a>", (i * 3) % n);
                    h += &format!("<a href=\"{i}.html\">me</a>");
                    if i.is_multiple_of(5) {
                        h += &format!("<a href=\"/private/{i}.html\">no</a>");
                    }
                    h += "</body></html>";
                    Page::html(h)
                })
            }
        }
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

#[test]
fn follow_crawls_allowed_pages_once_and_obeys_robots() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let site = follow_site(Arc::clone(&log));
    let dir = TempDir::new("follow");
    let config = dir.file("crawl.toml", CONFIG);
    let urls = dir.file("seeds.txt", &format!("{}\n", site.url("/p/0.html")));
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
        "--follow",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));

    let recs = records(&out);
    let fetched: Vec<&Value> = recs.iter().filter(|r| r["skipped"].is_null()).collect();
    let skipped: Vec<&Value> = recs.iter().filter(|r| r["skipped"] == "robots").collect();
    assert_eq!(fetched.len() + skipped.len(), recs.len());
    let mut fetched_urls: Vec<&str> = fetched.iter().map(|r| r["url"].as_str().unwrap()).collect();
    fetched_urls.sort_unstable();
    let mut want: Vec<String> = (0..FOLLOW_PAGES)
        .map(|i| site.url(&format!("/p/{i}.html")))
        .collect();
    want.sort_unstable();
    assert_eq!(fetched_urls, want, "each allowed page exactly once");
    for r in &fetched {
        assert_eq!(r["status"], 200, "{r}");
        assert!(
            r["fetched_at"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{r}"
        );
        for key in ["depth", "parent", "skipped", "new_links"] {
            assert!(r.get(key).is_some(), "record lacks {key}: {r}");
        }
    }
    let seed = recs
        .iter()
        .find(|r| r["url"] == site.url("/p/0.html").as_str())
        .expect("seed record");
    assert_eq!(seed["depth"], 0);
    assert!(seed["parent"].is_null());
    assert!(fetched
        .iter()
        .filter(|r| r["depth"].as_u64() > Some(0))
        .all(|r| r["parent"].is_string()));
    let private: HashSet<&str> = skipped.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(private.len(), FOLLOW_PAGES / 5, "{private:?}");
    assert!(private.iter().all(|u| u.contains("/private/")));

    let asked = log.lock().unwrap().clone();
    assert!(
        !asked.iter().any(|p| p.starts_with("/private/")),
        "a disallowed path was requested: {asked:?}"
    );
    assert_eq!(asked.iter().filter(|p| *p == "/robots.txt").count(), 1);
    assert_eq!(asked.len(), FOLLOW_PAGES + 1, "{asked:?}");

    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary")).expect("json");
    let n = |k: &str| {
        sum[k]
            .as_u64()
            .unwrap_or_else(|| panic!("summary {k}: {sum}"))
    };
    assert_eq!(n("total"), recs.len() as u64);
    assert_eq!(n("ok"), FOLLOW_PAGES as u64);
    // The host's account: every page the site served, one request each.
    let hosts = sum["hosts"].as_array().expect("hosts");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert_eq!(hosts[0]["urls"], FOLLOW_PAGES, "{hosts:?}");
    assert_eq!(hosts[0]["ok"], FOLLOW_PAGES, "{hosts:?}");
    assert_eq!(hosts[0]["requests"], FOLLOW_PAGES, "{hosts:?}");
    assert_eq!(n("discovered"), (FOLLOW_PAGES + FOLLOW_PAGES / 5) as u64);
    assert_eq!(n("skipped_robots"), skipped.len() as u64);
    assert_eq!(n("skipped_scope"), 0);
    assert!(n("deduped") > 0);
    assert_eq!(n("requests"), site.stats().requests, "robots.txt included");
    let exit_requests: u64 = sum["per_exit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(exit_requests, n("requests"));
}

#[test]
fn an_interrupted_follow_crawl_resumes_where_it_stopped() {
    // Run 1 stops after 6 pages (max_pages, like an interruption); run 2 resumes
    // without the cap. Together: every allowed page fetched once, one record each.
    let log = Arc::new(Mutex::new(Vec::new()));
    let site = follow_site(Arc::clone(&log));
    let dir = TempDir::new("follow-resume");
    let capped = dir.file(
        "capped.toml",
        &format!("{CONFIG}\n[crawl]\nfollow = true\nmax_pages = 6\n"),
    );
    let config = dir.file("crawl.toml", &format!("{CONFIG}\n[crawl]\nfollow = true\n"));
    let urls = dir.file("seeds.txt", &format!("{}\n", site.url("/p/0.html")));
    let out = dir.path("out.jsonl");
    let run = |config: &Path, resume: bool| {
        let summary = dir.path("summary.json");
        let mut args = vec!["--config", s(config), "--urls", s(&urls)];
        args.extend(["--out", s(&out), "--summary", s(&summary), "--quiet"]);
        if resume {
            args.push("--resume");
        }
        let o = crawl(&args);
        assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
        let sum: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap())
            .expect("summary json");
        (o, sum)
    };
    let (_, first) = run(&capped, false);
    let after_first = records(&out).len();
    assert_eq!(first["ok"], 6, "{first}");
    assert!(after_first < FOLLOW_PAGES, "the cap stopped run 1 early");
    let (o, second) = run(&config, true);
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    assert_eq!(
        second["skipped"].as_u64(),
        Some(after_first as u64),
        "{second}"
    );

    let recs = records(&out);
    let mut fetched: Vec<&str> = recs
        .iter()
        .filter(|r| r["skipped"].is_null())
        .map(|r| r["url"].as_str().unwrap())
        .collect();
    fetched.sort_unstable();
    let mut want: Vec<String> = (0..FOLLOW_PAGES)
        .map(|i| site.url(&format!("/p/{i}.html")))
        .collect();
    want.sort_unstable();
    assert_eq!(fetched, want, "each allowed page has exactly one record");
    let distinct: HashSet<&str> = recs.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(
        distinct.len(),
        recs.len(),
        "one record per URL over both runs"
    );
    let asked = log.lock().unwrap().clone();
    let pages: Vec<&String> = asked.iter().filter(|p| p.starts_with("/p/")).collect();
    assert_eq!(
        pages.len(),
        FOLLOW_PAGES,
        "no page fetched twice: {asked:?}"
    );
    assert!(!asked.iter().any(|p| p.starts_with("/private/")));
}

#[test]
fn ignore_robots_is_loud_and_fetches_disallowed_pages() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let site = follow_site(Arc::clone(&log));
    let dir = TempDir::new("norobots");
    let config = dir.file("crawl.toml", &format!("{CONFIG}\n[crawl]\nfollow = true\n"));
    let urls = dir.file("seeds.txt", &format!("{}\n", site.url("/p/0.html")));
    let out = dir.path("out.jsonl");
    let o = crawl(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&dir.path("sum.json")),
        "--ignore-robots",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stderr(&o).contains("--ignore-robots"), "{}", stderr(&o));
    let asked = log.lock().unwrap().clone();
    assert!(!asked.iter().any(|p| p == "/robots.txt"));
    assert_eq!(
        asked.iter().filter(|p| p.starts_with("/private/")).count(),
        FOLLOW_PAGES / 5
    );
    assert_eq!(records(&out).len(), FOLLOW_PAGES + FOLLOW_PAGES / 5);
}

// ---------------------------------------------------------------------------------------
// Credentials masked
// ---------------------------------------------------------------------------------------

#[test]
fn credentials_are_masked_in_records_and_resume_matches_masked_urls() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("mask");
    let config = dir.file("crawl.toml", CONFIG);
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

// ---------------------------------------------------------------------------------------
// Shared frontier (Redis)
// ---------------------------------------------------------------------------------------

/// A `redis-server` on a free loopback port (no persistence), killed on drop. Without
/// `redis-server` on PATH the test fails, never skips (`apt-get install -y redis-server`).
struct RedisServer {
    port: u16,
    child: Child,
}

impl RedisServer {
    fn start() -> Self {
        use std::io::{Read, Write};
        use std::net::{Ipv4Addr, TcpListener, TcpStream};
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("bind 127.0.0.1:0")
            .port();
        let child = match Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                panic!("install redis-server (apt-get install -y redis-server)")
            }
            Err(e) => panic!("starting redis-server: {e}"),
        };
        let server = RedisServer { port, child };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let pong = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok_and(|mut s| {
                let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                let mut buf = [0u8; 7];
                s.write_all(b"PING\r\n").is_ok()
                    && s.read_exact(&mut buf).is_ok()
                    && &buf == b"+PONG\r\n"
            });
            if pong {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING within 5 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn frontier(&self, queue: &str) -> String {
        format!("redis://127.0.0.1:{}/{queue}", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
    let queue = redis.frontier("jobs");

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
    let config = dir.file("crawl.toml", CONFIG);
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

#[test]
fn odd_lines_each_get_one_record_and_a_huge_line_is_not_buffered() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("odd");
    let config = dir.file("crawl.toml", &format!("{CONFIG}{NO_ROBOTS}"));
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

#[test]
fn an_interrupted_follow_crawl_reports_its_figures_so_far() {
    // Each page links ten new ones, answered in 300 ms: never done within the test.
    let pages = Pages::new(|_host: &str, pq: &str| {
        let i: usize = pq.strip_prefix("/n/")?.parse().ok()?;
        let links: String = (1..=10)
            .map(|k| {
                format!(
                    "<a href=\"/n/{}\">x</a><a href=\"http://elsewhere.test/\">o</a>",
                    i * 10 + k
                )
            })
            .collect();
        Some(Page::html(format!("<html><body>{links}</body></html>")))
    });
    let site = TestSite::start(SiteConfig {
        pages: Some(pages),
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("follow-int");
    let config = dir.file("crawl.toml", &format!("{SLOW_CONFIG}{NO_ROBOTS}"));
    let urls = dir.file("seeds.txt", &format!("{}\n", site.url("/n/0")));
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
    let args = [
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--follow",
        "--out",
        s(&out),
        "--summary",
        s(&summary),
    ];
    let child = spawn_crawl(&args);
    wait_for_lines(&out, 12, Duration::from_secs(20));
    signal(&child, "-INT");
    let o = wait_bounded(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    let recs = records(&out);
    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary written"))
            .expect("summary JSON");
    let discovered = sum["discovered"]
        .as_u64()
        .unwrap_or_else(|| panic!("{sum}"));
    assert!(
        discovered > recs.len() as u64,
        "{discovered} vs {} records",
        recs.len()
    );
    let off_scope = sum["skipped_scope"]
        .as_u64()
        .unwrap_or_else(|| panic!("{sum}"));
    assert!(
        off_scope >= 10,
        "each fetched page links elsewhere.test ten times: {sum}"
    );
}
