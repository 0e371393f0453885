//! Running the `crawl` example (the program under the name the design gives it) in tests:
//! built once per test run, started with a clean environment, and the config the example's
//! tests share.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use exitcrawl_testsite::{SiteConfig, TestSite};

/// The example binary, built once per test run (`cargo test --test crawl_cli` alone does
/// not build examples). It sits next to this test's profile directory:
/// `<target>/<profile>/deps/crawl_cli_…-…` → `<target>/<profile>/examples/crawl`.
pub fn crawl_bin() -> &'static Path {
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
pub fn crawl_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(crawl_bin());
    cmd.args(args);
    super::clean_env(cmd)
}

/// Start the example with `args` in the background, its output captured.
pub fn spawn_crawl(args: &[&str]) -> Child {
    crawl_cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crawl")
}

/// Run the example with `args` to completion.
pub fn crawl(args: &[&str]) -> Output {
    crawl_cmd(args).output().expect("run the crawl example")
}

/// Appended to a config by the tests that count exactly the requests the site saw for a
/// URL list: robots.txt is obeyed in every mode by default, so their site would also see a
/// `/robots.txt` fetch (robots.txt in list mode is tested in `actors/tests/cli_robots.rs`).
pub const NO_ROBOTS: &str = "\n[crawl]\nrobots = false\n";

/// Two exits on 127.0.0.2 and .3, limits off, one retry, four fetches at once; `extra`
/// is appended (TOML).
pub fn crawl_config(extra: &str) -> String {
    super::config_with(4, extra)
}

/// A site that answers after 300 ms, so a crawl is still running when it is signalled.
pub fn slow_site() -> TestSite {
    TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    })
}

/// Two exits, limits off, no retries, a long timeout: for the slow site.
pub const SLOW_CONFIG: &str = r#"
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
