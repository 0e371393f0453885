//! Running the `exitcrawl` binary in tests: a temporary directory, the command with a
//! clean environment, and the JSONL it writes; [`example`] runs the `crawl` example.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod example;

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "exitcrawl-cli-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).expect("write temp file");
        p
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary with `args`; EXITCRAWL__* overrides and RUST_LOG removed so the host
/// environment cannot change the settings under test.
pub fn cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_exitcrawl"));
    cmd.args(args);
    clean_env(cmd)
}

/// `cmd` without the EXITCRAWL__* overrides and RUST_LOG of the host environment.
pub fn clean_env(mut cmd: Command) -> Command {
    cmd.env_remove("RUST_LOG");
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

/// Run the binary to completion.
pub fn run(args: &[&str]) -> Output {
    cmd(args).output().expect("run exitcrawl")
}

/// Start the binary in the background, its output captured.
pub fn spawn(args: &[&str]) -> Child {
    cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn exitcrawl")
}

/// Wait for `child` to exit, at most `limit` (then kill it and fail).
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let until = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let o = child.wait_with_output().expect("wait");
            panic!(
                "exitcrawl did not exit within {limit:?}; stderr: {}",
                stderr(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("wait")
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert a run exited 0.
pub fn assert_ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
}

/// A JSONL file's records.
pub fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// A JSON file (the summary).
pub fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read JSON")).expect("JSON")
}

/// Two exits on 127.0.0.2 and .3, limits off, few retries; `extra` is appended (TOML).
pub fn config(extra: &str) -> String {
    config_with(8, extra)
}

/// [`config`] with `concurrency` fetches at once.
pub fn config_with(concurrency: u32, extra: &str) -> String {
    format!(
        r#"
[crawler]
concurrency = {concurrency}
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
{extra}"#
    )
}

/// Run the program over the URL list `urls` with the config `cfg`, writing `out.jsonl` in
/// `dir`, plus `extra` arguments; returns the output and the records' path.
pub fn run_out(dir: &TempDir, cfg: &Path, urls: &Path, extra: &[&str]) -> (Output, PathBuf) {
    let out = dir.path("out.jsonl");
    let mut args = vec!["--config", s(cfg), "--urls", s(urls), "--out", s(&out)];
    args.extend_from_slice(extra);
    (run(&args), out)
}

/// Run the program over the URL list `urls` with the config `cfg`, writing `out.jsonl` and
/// `summary.json` in `dir`, plus `extra` arguments; returns the output and both paths.
pub fn run_list(
    dir: &TempDir,
    cfg: &Path,
    urls: &Path,
    extra: &[&str],
) -> (Output, PathBuf, PathBuf) {
    let summary = dir.path("summary.json");
    let mut args = vec!["--summary", s(&summary)];
    args.extend_from_slice(extra);
    let (o, out) = run_out(dir, cfg, urls, &args);
    (o, out, summary)
}

/// Two sites for a per-host account: one on `limited_ip` whose bucket is `rate` and whose
/// every 429 says `Retry-After: 1`, and one without a limit on `open_ip`.
pub fn limited_and_open(
    rate: exitcrawl_testsite::Rate,
    limited_ip: &str,
    open_ip: &str,
) -> (exitcrawl_testsite::TestSite, exitcrawl_testsite::TestSite) {
    use exitcrawl_testsite::{Limit, RetryAfter, SiteConfig, TestSite};
    let limited = TestSite::start_at(
        SiteConfig {
            limit: Limit::Global(rate),
            retry_after: RetryAfter::Fixed(1),
            ..SiteConfig::default()
        },
        limited_ip.parse().expect("a loopback address"),
    );
    let open = TestSite::start_at(
        SiteConfig::default(),
        open_ip.parse().expect("a loopback address"),
    );
    (limited, open)
}

/// Poll until `path` has at least `n` lines (records are flushed every second).
pub fn wait_for_lines(path: &Path, n: usize, limit: Duration) {
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

/// Send SIGINT (Ctrl-C) to process `pid`.
pub fn sigint(pid: u32) {
    kill(pid, "-INT");
}

/// Send `child` the signal `sig` (`-INT`, `-TERM`, `-KILL`).
pub fn signal(child: &Child, sig: &str) {
    kill(child.id(), sig);
}

fn kill(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// robots.txt off: the site's count is then exactly the URLs' requests.
pub const NO_ROBOTS: &str = "\n[crawl]\nrobots = false\n";

/// A run that is refused must say why, and never with a panic (actix's "there is no
/// reactor running" when the runtime is missing, or any other).
pub fn assert_refused(o: &Output, code: i32, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    for n in needles {
        assert!(err.contains(n), "no {n:?} in stderr: {err}");
    }
    assert_no_panic(o);
}

/// No panic and no runtime error in what the run said.
pub fn assert_no_panic(o: &Output) {
    let err = stderr(o);
    for p in ["panicked", "reactor", "RUST_BACKTRACE"] {
        assert!(!err.contains(p), "{p:?} in stderr: {err}");
    }
}

/// The bytes of a file, to compare after a run.
pub fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The records `pred` holds for.
pub fn count(recs: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    recs.iter().filter(|r| pred(r)).count()
}
