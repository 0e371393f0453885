//! Health checks never stall a working crawl: `config/example.toml` as shipped, and with
//! its health URL at a closed port, crawls a local site to the end; its disabled exit is
//! neither checked nor listed; exits that are truly down end the crawl with a record per
//! URL and exit status 1. The real binary against the real test site, bounded in time.

mod cli_support;

use std::net::{IpAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use cli_support::{cmd, json, records, s, stderr, wait_bounded, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite, HEALTH_PATH};

const URLS: usize = 40;
/// What the warning about a health URL that fails while real fetches succeed says.
const LOOKS_WRONG: &str = "the health URL looks wrong";

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/example.toml")
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

fn url_list(dir: &TempDir, site: &TestSite, n: usize) -> PathBuf {
    let list: String = (0..n)
        .map(|i| site.url(&format!("/p/{i}")) + "\n")
        .collect();
    dir.file("urls.txt", &list)
}

/// Crawl the site's list with the example config; `env` sets `EXITCRAWL__…` overrides.
/// Metrics on a free port: the example's 9090 may be taken on a shared machine.
fn crawl_with_example(dir: &TempDir, site: &TestSite, env: &[(&str, &str)]) -> Output {
    let urls = url_list(dir, site, URLS);
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
    let example = example();
    let mut c = cmd(&[
        "--config",
        s(&example),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--metrics",
        "127.0.0.1:0",
        // Ten a second at most: the crawl lasts several health intervals.
        "--max-rps",
        "10",
        "--quiet",
    ]);
    c.envs(env.iter().copied());
    wait_bounded(
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn exitcrawl"),
        Duration::from_secs(60),
    )
}

/// Every URL one record, each a 200; the summary lists the enabled exits only.
fn assert_all_ok(dir: &TempDir, o: &Output) {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    let recs = records(&dir.path("out.jsonl"));
    assert_eq!(recs.len(), URLS, "one record per URL");
    for r in &recs {
        assert_eq!(r["status"], 200, "{r}");
    }
    let summary = json(&dir.path("summary.json"));
    let names: Vec<&str> = summary["per_exit"]
        .as_array()
        .expect("per_exit")
        .iter()
        .map(|e| e["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["e2", "e3", "e4"], "the disabled e5 is not listed");
}

fn requests_from(site: &TestSite, peer: &str) -> Vec<String> {
    let peer: IpAddr = peer.parse().expect("ip");
    site.requests()
        .into_iter()
        .filter(|r| r.peer == peer)
        .map(|r| r.path)
        .collect()
}

#[test]
fn the_example_config_as_shipped_crawls_a_local_site() {
    let shipped = std::fs::read_to_string(example()).expect("read the example");
    assert!(
        shipped.contains("\n# url = "),
        "the example's [health] url is expected commented out; test it live if it is not"
    );
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("example-shipped");
    let o = crawl_with_example(&dir, &site, &[]);
    assert_all_ok(&dir, &o);
    assert!(!stderr(&o).contains(LOOKS_WRONG), "{}", stderr(&o));
    assert_eq!(requests_from(&site, "127.0.0.5"), Vec::<String>::new());
}

/// The shipped interval is 5 s; at 500 ms the crawl's seconds hold several rounds of
/// failing checks, enough to eject every exit had the checks counted (three in a row),
/// while each exit's answers (a few a second) stay well within the 1 s window.
#[test]
fn the_example_config_with_its_health_url_at_a_closed_port_still_crawls_and_warns_once() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("example-closed-health");
    let url = format!("http://127.0.0.1:{}/health", closed_port());
    let started = std::time::Instant::now();
    let o = crawl_with_example(
        &dir,
        &site,
        &[
            ("EXITCRAWL__HEALTH__URL", &url),
            ("EXITCRAWL__HEALTH__INTERVAL_MS", "500"),
            ("EXITCRAWL__HEALTH__TIMEOUT_MS", "500"),
        ],
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the crawl must outlast three check rounds: {:?}",
        started.elapsed()
    );
    assert_all_ok(&dir, &o);
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains(LOOKS_WRONG)).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains(&url), "{}", warnings[0]);
    assert!(warnings[0].contains("refused"), "{}", warnings[0]);
    assert!(!err.contains("exit ejected"), "{err}");
}

#[test]
fn the_example_configs_disabled_exit_is_neither_checked_nor_listed() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("example-disabled");
    let url = site.url(HEALTH_PATH);
    let o = crawl_with_example(
        &dir,
        &site,
        &[
            ("EXITCRAWL__HEALTH__URL", &url),
            ("EXITCRAWL__HEALTH__INTERVAL_MS", "200"),
            ("EXITCRAWL__HEALTH__TIMEOUT_MS", "100"),
        ],
    );
    assert_all_ok(&dir, &o);
    for e in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        let checks = requests_from(&site, e)
            .iter()
            .filter(|p| *p == HEALTH_PATH)
            .count();
        assert!(checks >= 3, "{e} was checked {checks} times");
    }
    assert_eq!(requests_from(&site, "127.0.0.5"), Vec::<String>::new());
    assert!(!stderr(&o).contains(LOOKS_WRONG), "{}", stderr(&o));
}

/// Two proxy exits at closed ports: every connection fails before anything reaches the
/// site, the exits' own fault. Ejections of 0.2–1 s make the all-down bound
/// min(max_ejection, 30 s) = 1 s. Then `--resume` through a working exit completes the
/// crawl.
fn crawl_with_dead_exits(tag: &str, follow: bool) {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new(tag);
    let n = 30;
    let urls = url_list(&dir, &site, n);
    // The config's exit is replaced by the --proxy flags (a config file must name one).
    let cfg = dir.file(
        "c.toml",
        "[crawler]\nmax_retries = 1\n[health]\nbase_ejection_ms = 200\nmax_ejection_ms = 1000\n\
         [[exits]]\nname = \"replaced\"\nsource_ip = \"127.0.0.9\"\n",
    );
    let out = dir.path("out.jsonl");
    let (p1, p2) = (
        format!("http://127.0.0.1:{}", closed_port()),
        format!("http://127.0.0.1:{}", closed_port()),
    );
    let mut args = vec![
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--proxy",
        &p1,
        "--proxy",
        &p2,
        "--ignore-robots",
        "--quiet",
    ];
    if follow {
        args.push("--follow");
    }
    let child = cmd(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn exitcrawl");
    let o = wait_bounded(child, Duration::from_secs(30));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("no_healthy_exit"), "{err}");
    let recs = records(&out);
    let mut seen: Vec<String> = recs
        .iter()
        .map(|r| r["url"].as_str().unwrap_or_default().to_owned())
        .collect();
    seen.sort();
    let mut want: Vec<String> = (0..n).map(|i| site.url(&format!("/p/{i}"))).collect();
    want.sort();
    assert_eq!(seen, want, "one record per URL");
    let mut none_left = 0;
    for r in &recs {
        assert!(r["status"].is_null(), "{r}");
        let e = r["error"].as_str().unwrap_or_default();
        assert!(
            e.starts_with("proxy") || e.starts_with("no_healthy_exit:"),
            "{r}"
        );
        none_left += usize::from(e.starts_with("no_healthy_exit:"));
    }
    assert!(none_left > 0, "no URL waited out the bound: {recs:?}");
    assert!(site.requests().is_empty(), "nothing can reach the site");
    resume_with_a_working_exit(&dir, &site, &urls, &out, follow, &recs);
}

/// `--resume` of the dead-exits crawl, through an exit that works: every URL that found
/// no exit and sent nothing is fetched once and ends 200; a URL whose record is final
/// keeps it and is not fetched.
fn resume_with_a_working_exit(
    dir: &TempDir,
    site: &TestSite,
    urls: &Path,
    out: &Path,
    follow: bool,
    first: &[serde_json::Value],
) {
    let cfg = dir.file(
        "working.toml",
        "[crawler]\nmax_retries = 1\n[[exits]]\nname = \"e2\"\nsource_ip = \"127.0.0.2\"\n",
    );
    let mut args = vec![
        "--config",
        s(&cfg),
        "--urls",
        s(urls),
        "--out",
        s(out),
        "--resume",
        "--ignore-robots",
        "--quiet",
    ];
    if follow {
        args.push("--follow");
    }
    let child = cmd(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn exitcrawl --resume");
    let o = wait_bounded(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let merged = records(out);
    assert_eq!(merged.len(), first.len(), "one record per URL: {merged:?}");
    let seen = requests_from(site, "127.0.0.2");
    assert_eq!(
        site.requests().len(),
        seen.len(),
        "only the working exit reaches the site"
    );
    for r in first {
        let url = r["url"].as_str().unwrap_or_default();
        let path = &url[url.find("/p/").expect("a URL of the list")..];
        let now: Vec<_> = merged.iter().filter(|m| m["url"] == url).collect();
        assert_eq!(now.len(), 1, "{url}: {merged:?}");
        let fetched = seen.iter().filter(|p| *p == path).count();
        // Failed on this side before anything was sent: the dead exits' proxy refusing,
        // then no exit in service.
        let local = ["no_healthy_exit:", "proxy:"];
        let sent_nowhere = r["error"]
            .as_str()
            .is_some_and(|e| local.iter().any(|k| e.starts_with(k)));
        if sent_nowhere && r["attempts"] == 0 {
            assert_eq!(now[0]["status"], 200, "{}", now[0]);
            assert_eq!(now[0]["exit"], "e2", "{}", now[0]);
            assert_eq!(fetched, 1, "{url} fetched once by --resume");
        } else {
            assert_eq!(now[0], r, "a final record stands");
            assert_eq!(fetched, 0, "{url} had a final record");
        }
    }
}

#[test]
fn with_every_exit_truly_down_a_list_crawl_ends_with_a_record_per_url_and_exit_1() {
    crawl_with_dead_exits("dead-exits-list", false);
}

#[test]
fn with_every_exit_truly_down_a_follow_crawl_ends_with_a_record_per_url_and_exit_1() {
    crawl_with_dead_exits("dead-exits-follow", true);
}
