//! The `crawl` example binary end to end (built with `cargo build --example crawl`) against a
//! local test site (loopback only), check exit codes, the JSONL records and the summary.
//! Every run is bounded: a handful of URLs, or `--demo-urls 200`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

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

/// Run the example with `args` (EXITCRAWL__* overrides removed so the host environment
/// cannot change the settings under test).
fn crawl(args: &[&str]) -> Output {
    let mut cmd = Command::new(crawl_bin());
    cmd.args(args);
    for (name, _) in std::env::vars_os() {
        if name
            .to_string_lossy()
            .to_ascii_uppercase()
            .starts_with("EXITCRAWL__")
        {
            cmd.env_remove(name);
        }
    }
    cmd.output().expect("run the crawl example")
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
