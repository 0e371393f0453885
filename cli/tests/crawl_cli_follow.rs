//! The `crawl` example with `--follow`: pages fetched once, robots.txt obeyed (or loudly
//! ignored), an interrupted crawl resumed and its figures so far reported.

mod cli_support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cli_support::example::{crawl, crawl_cmd, crawl_config, spawn_crawl, NO_ROBOTS, SLOW_CONFIG};
use cli_support::{records, s, signal, stderr, wait_bounded, wait_for_lines, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use serde_json::Value;

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
    let config = dir.file("crawl.toml", &crawl_config(""));
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
        for key in ["depth", "parent", "skipped", "new_links", "throttled"] {
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

/// A redirect is a record of its own, counted as `redirected` (not failed), and its target
/// a page with its own record.
#[test]
fn a_redirect_is_counted_as_redirected_and_its_target_fetched_once() {
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(|_: &str, pq: &str| match pq {
            "/robots.txt" => Some(Page::text("")),
            "/old" => Some(Page::redirect(301, "/new")),
            "/new" => Some(Page::html(
                "<a href=\"/old\">old</a> <a href=\"/new\">me</a>",
            )),
            _ => None,
        })),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("follow-redirect");
    let config = dir.file("crawl.toml", &crawl_config(""));
    let urls = dir.file("seeds.txt", &format!("{}\n", site.url("/old")));
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
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
    let statuses: Vec<(&str, &Value)> = recs
        .iter()
        .map(|r| (r["url"].as_str().unwrap(), &r["status"]))
        .collect();
    assert_eq!(recs.len(), 2, "{statuses:?}");
    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary")).expect("json");
    assert_eq!(
        (
            &sum["total"],
            &sum["ok"],
            &sum["redirected"],
            &sum["failed"]
        ),
        (
            &Value::from(2),
            &Value::from(1),
            &Value::from(1),
            &Value::from(0)
        ),
        "{sum}"
    );
    assert_eq!(sum["hosts"][0]["failed"], 0, "{sum}");
    let mut paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    paths.sort();
    assert_eq!(paths, ["/new", "/old", "/robots.txt"]);
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
        &crawl_config("\n[crawl]\nfollow = true\nmax_pages = 6\n"),
    );
    let config = dir.file("crawl.toml", &crawl_config("\n[crawl]\nfollow = true\n"));
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

/// Records keep a secret-looking query value masked, and that form is all a resume knows
/// of the page: the page it names is done all the same, seed or link.
#[test]
fn a_resumed_follow_crawl_does_not_fetch_a_masked_url_again() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::clone(&log);
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_: &str, pq: &str| {
            asked.lock().unwrap().push(pq.to_owned());
            match pq.split('?').next().unwrap_or(pq) {
                "/robots.txt" => Some(Page::text("")),
                "/" => Some(Page::html(
                    "<a href=\"/a\">a</a> <a href=\"/?api_key=S\">me</a>",
                )),
                "/a" => Some(Page::html("<a href=\"/?api_key=S\">back</a>")),
                _ => None,
            }
        })),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("follow-masked");
    let capped = dir.file(
        "capped.toml",
        &crawl_config("\n[crawl]\nfollow = true\nmax_pages = 1\n"),
    );
    let config = dir.file("crawl.toml", &crawl_config("\n[crawl]\nfollow = true\n"));
    let urls = dir.file("seeds.txt", &format!("{}\n", site.url("/?api_key=S")));
    let out = dir.path("out.jsonl");
    for (config, resume) in [(&capped, false), (&config, true)] {
        let mut args = vec!["--config", s(config), "--urls", s(&urls), "--out", s(&out)];
        args.push("--quiet");
        if resume {
            args.push("--resume");
        }
        let o = crawl(&args);
        assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    }
    let asked = log.lock().unwrap().clone();
    let times = |pq: &str| asked.iter().filter(|p| *p == pq).count();
    assert_eq!(times("/?api_key=S"), 1, "{asked:?}");
    assert_eq!(times("/a"), 1, "the resumed run went on: {asked:?}");
    let recs: Vec<String> = records(&out)
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        recs,
        [site.url("/?api_key=***"), site.url("/a")],
        "one record each"
    );
}

#[test]
fn ignore_robots_is_loud_and_fetches_disallowed_pages() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let site = follow_site(Arc::clone(&log));
    let dir = TempDir::new("norobots");
    let config = dir.file("crawl.toml", &crawl_config("\n[crawl]\nfollow = true\n"));
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
    // Every record the figures count is in `--out`, and every record there is counted.
    assert_eq!(sum["total"].as_u64(), Some(recs.len() as u64), "{sum}");
}

/// Pages `/t/0` … `/t/299` of [`tree_site`].
const TREE_PAGES: usize = 300;

/// Page `/t/{i}` of [`tree_site`]: links to the next ten pages of a tree rooted at `/t/0`.
fn tree_page(i: usize) -> String {
    let links: String = (i * 10 + 1..=i * 10 + 10)
        .filter(|k| *k < TREE_PAGES)
        .map(|k| format!("<a href=\"/t/{k}\">{k}</a>"))
        .collect();
    format!("<html><body>page {i} {links}</body></html>")
}

/// A site of [`TREE_PAGES`] pages, every one reachable from `/t/0`.
fn tree_site() -> TestSite {
    let pages = Pages::new(|_host: &str, pq: &str| {
        let i: usize = pq.strip_prefix("/t/")?.parse().ok()?;
        (i < TREE_PAGES).then(|| Page::html(tree_page(i)))
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

fn sha256_hex(body: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_write_error_ends_a_follow_crawl_at_once_and_keeps_the_records_written() {
    let dir = TempDir::new("follow-full");
    let config = dir.file("crawl.toml", &crawl_config(NO_ROBOTS));

    // `--out -` on a full stdout: the first record cannot be written.
    let site = tree_site();
    let urls = dir.file("seeds.txt", &format!("{}\n", site.url("/t/0")));
    let full = std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = crawl_cmd(&["--config", s(&config), "--urls", s(&urls), "--follow"])
        .args([
            "--out",
            "-",
            "--summary",
            s(&dir.path("sum.json")),
            "--quiet",
        ])
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run the crawl example");
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("writing --out") && err.contains("No space left"),
        "{err}"
    );
    let asked = site.stats().requests;
    assert!(
        asked < (TREE_PAGES / 10) as u64,
        "the crawl went on after the write error: {asked} of {TREE_PAGES} pages fetched"
    );

    // `--bodies` fails part way: a regular file stands where the subdirectory of a later
    // page's body goes. The records written before are kept, each with its body.
    let site = tree_site();
    let bodies = dir.path("bodies");
    std::fs::create_dir(&bodies).expect("bodies dir");
    let seed_sub = sha256_hex(tree_page(0).as_bytes())[..2].to_owned();
    let blocked = (20..TREE_PAGES)
        .map(|i| sha256_hex(tree_page(i).as_bytes())[..2].to_owned())
        .find(|sub| *sub != seed_sub)
        .expect("a page whose body goes elsewhere than the seed's");
    std::fs::write(bodies.join(&blocked), "in the way").expect("block a subdirectory");
    let urls = dir.file("seeds2.txt", &format!("{}\n", site.url("/t/0")));
    let out = dir.path("out.jsonl");
    let o = crawl(&[
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--follow",
        "--out",
        s(&out),
        "--bodies",
        s(&bodies),
        "--summary",
        s(&dir.path("sum2.json")),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("writing --bodies"), "{err}");
    let asked = site.stats().requests;
    assert!(
        asked < (TREE_PAGES / 3) as u64,
        "the crawl went on after the write error: {asked} of {TREE_PAGES} pages fetched"
    );
    let recs = records(&out);
    assert!(
        !recs.is_empty(),
        "the records written before the error are kept"
    );
    assert!(recs.len() as u64 <= asked, "{} records", recs.len());
    for r in &recs {
        assert_eq!(r["status"], 200, "{r}");
        let sha = r["sha256"].as_str().unwrap_or_else(|| panic!("{r}"));
        assert!(
            bodies.join(&sha[..2]).join(sha).is_file(),
            "no body for {r}"
        );
    }
}

/// A seed line longer than the reader keeps (16 KiB) is no seed: its kept start, whose
/// escapes normalise to a shorter URL nobody listed, is not fetched, and its record says
/// how long the line was.
#[test]
fn a_seed_line_too_long_to_be_a_url_is_recorded_with_its_length_never_fetched() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("follow-long-seed");
    let config = dir.file("crawl.toml", &crawl_config(NO_ROBOTS));
    let long = site.url(&format!("/p?q={}", "%41".repeat(6_000)));
    let seeds = dir.file("seeds.txt", &format!("{long}\n{}\n", site.url("/ok")));
    let out = dir.path("out.jsonl");
    let o = crawl(&[
        "--config",
        s(&config),
        "--urls",
        s(&seeds),
        "--out",
        s(&out),
        "--follow",
        "--depth",
        "0",
        "--quiet",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 2, "{recs:?}");
    let refused: Vec<&Value> = recs.iter().filter(|r| r["status"].is_null()).collect();
    assert_eq!(refused.len(), 1, "{recs:?}");
    let e = refused[0]["error"].as_str().unwrap_or_default();
    assert_eq!(
        e,
        format!(
            "invalid_url: URL is {} bytes long; at most 8192 are accepted",
            long.len()
        )
    );
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/ok"], "only the listed seed that is a URL");
}

/// A stop signal while `--follow` still reads its seeds (a pipe left open) ends the run,
/// as it would the crawl: exit 130, nothing fetched.
#[test]
fn a_stop_while_the_seeds_are_read_ends_the_run() {
    use std::io::{BufRead, Write};
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("follow-stop-seeds");
    let config = dir.file("crawl.toml", &crawl_config(NO_ROBOTS));
    let out = dir.path("out.jsonl");
    let mut child = crawl_cmd(&[
        "--config",
        s(&config),
        "--urls",
        "-",
        "--out",
        s(&out),
        "--follow",
    ])
    .env("RUST_LOG", "info")
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn crawl");
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Signals are watched from before this line on.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let started = std::iter::from_fn(|| {
        rx.recv_timeout(until.saturating_duration_since(std::time::Instant::now()))
            .ok()
    })
    .any(|l| l.contains("crawl started"));
    if !started {
        let _ = child.kill();
        panic!("no start line within 30 s");
    }
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", site.url("/seed")).expect("write a seed");
    stdin.flush().expect("flush");
    signal(&child, "-TERM");
    let o = wait_bounded(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130));
    drop(stdin);
    assert!(site.requests().is_empty(), "{:?}", site.requests());
}
