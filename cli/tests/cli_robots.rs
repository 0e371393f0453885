//! robots.txt in the URL-list and frontier modes of the `exitcrawl` binary, checked at the
//! sites: no disallowed path requested, robots.txt fetched once per origin, Crawl-delay
//! spacing between arrivals, an unavailable robots.txt skipping its site's URLs, a
//! throttled one waited for, every URL with exactly one record.

mod cli_support;
// The actors crate's test helpers, for their `RedisServer`.
#[path = "../../actors/tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli_support::{
    assert_ok, config, json, records, run, run_list, s, spawn, wait_bounded, TempDir,
};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use serde_json::Value;

/// (host header, path, arrival) of every request a site answered.
type Log = Arc<Mutex<Vec<(String, String, Instant)>>>;

/// Host `127.0.0.1:P`: robots.txt disallows `/private/`. Host `localhost:P`: robots.txt
/// sets `Crawl-delay: 1`. Every other path is a small page.
fn polite_site(log: Log) -> TestSite {
    let pages = Pages::new(move |host: &str, pq: &str| {
        log.lock()
            .unwrap()
            .push((host.to_owned(), pq.to_owned(), Instant::now()));
        match (host.starts_with("localhost"), pq) {
            (false, "/robots.txt") => Some(Page::text("User-agent: *\nDisallow: /private/\n")),
            (true, "/robots.txt") => Some(Page::text("User-agent: *\nCrawl-delay: 1\n")),
            _ => Some(Page::html(format!("<p>{pq}</p>"))),
        }
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

/// A site whose robots.txt answers 500 (an error, not a throttle).
fn broken_robots_site() -> TestSite {
    let pages = Pages::new(|_: &str, pq: &str| {
        Some(if pq == "/robots.txt" {
            Page {
                status: 500,
                content_type: "text/plain",
                body: "down".into(),
                location: None,
            }
        } else {
            Page::html("<p>page</p>")
        })
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

fn paths(log: &Log, host_prefix: &str) -> Vec<(String, Instant)> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(h, _, _)| h.starts_with(host_prefix))
        .map(|(_, p, t)| (p.clone(), *t))
        .collect()
}

#[test]
fn list_mode_obeys_robots_crawl_delay_and_skips_sites_without_robots() {
    let log: Log = Arc::default();
    let site = polite_site(Arc::clone(&log));
    let broken = broken_robots_site();
    let dir = TempDir::new("robots-list");
    let cfg = dir.file("c.toml", &config(""));
    let mut urls: Vec<String> = (0..10).map(|i| site.url(&format!("/p/{i}"))).collect();
    urls.extend((0..5).map(|i| site.url(&format!("/private/{i}"))));
    let slow: Vec<String> = (0..3)
        .map(|i| format!("http://localhost:{}/slow/{i}", site.port()))
        .collect();
    urls.extend(slow.iter().cloned());
    urls.extend((0..3).map(|i| broken.url(&format!("/q/{i}"))));
    urls.push("not a url".into());
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (out, sum) = (dir.path("o.jsonl"), dir.path("s.json"));
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--summary",
        s(&sum),
        "--quiet",
    ]);
    assert_ok(&o);

    let recs = records(&out);
    let mut per_url: HashMap<&str, Vec<&Value>> = HashMap::new();
    for r in &recs {
        per_url
            .entry(r["url"].as_str().unwrap())
            .or_default()
            .push(r);
    }
    assert_eq!(recs.len(), urls.len(), "one record per URL");
    for u in &urls {
        assert_eq!(per_url.get(u.as_str()).map(Vec::len), Some(1), "{u}");
        let r = per_url[u.as_str()][0];
        if u.contains("/private/") {
            assert_eq!(r["skipped"], "robots", "{r}");
            assert!(r["status"].is_null() && r["error"].is_null(), "{r}");
        } else if u.contains("/q/") {
            assert_eq!(r["skipped"], "robots", "{r}");
            let e = r["error"].as_str().unwrap();
            assert!(
                e.starts_with("robots_unavailable") && e.contains("500"),
                "{e}"
            );
        } else if u.starts_with("http") {
            assert_eq!(r["status"], 200, "{r}");
            assert!(r["skipped"].is_null());
        }
    }

    let a = paths(&log, "127.0.0.1");
    assert!(!a.iter().any(|(p, _)| p.starts_with("/private/")), "{a:?}");
    assert_eq!(a.iter().filter(|(p, _)| p == "/robots.txt").count(), 1);
    // Crawl-delay 1: robots.txt, then each page at least 1 s after the previous answer.
    let b = paths(&log, "localhost");
    assert_eq!(b.len(), 4, "{b:?}");
    assert_eq!(b[0].0, "/robots.txt");
    for w in b.windows(2) {
        let gap = w[1].1 - w[0].1;
        assert!(
            gap >= Duration::from_millis(995),
            "{} after {gap:?}",
            w[1].0
        );
    }
    // robots.txt answering 500 (retried once): nothing else was fetched from that site.
    let asked: Vec<String> = broken.requests().into_iter().map(|r| r.path).collect();
    assert!(asked.iter().all(|p| p == "/robots.txt"), "{asked:?}");

    let sum = json(&sum);
    assert_eq!(sum["skipped_robots"], 5 + 3);
    assert_eq!(sum["robots_fetches"], 3);
    let seen = site.stats().requests + broken.stats().requests;
    assert_eq!(
        sum["requests"], seen,
        "robots.txt fetches count as requests"
    );
    let per_exit: u64 = sum["per_exit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(per_exit, seen);
}

#[test]
fn a_line_the_crawler_cannot_send_is_invalid_whatever_robots_txt_says() {
    // `/private/a b` parses as a URL (the space percent-encoded) but is no request line:
    // the crawler refuses it. robots.txt, which disallows `/private/`, is not asked for it.
    let log: Log = Arc::default();
    let site = polite_site(Arc::clone(&log));
    let dir = TempDir::new("robots-invalid");
    let cfg = dir.file("c.toml", &config(""));
    let list = dir.file("urls.txt", &format!("{}\n", site.url("/private/a b")));
    let out = dir.path("o.jsonl");
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--quiet",
    ]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 1);
    assert!(
        recs[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid_url")),
        "{}",
        recs[0]
    );
    assert!(
        paths(&log, "127.0.0.1").is_empty(),
        "nothing asked of the site"
    );
}

/// A listed URL's redirects are asked of robots.txt hop by hop: one into a disallowed
/// path is not fetched there, and an allowed chain is one record with its `final_url`.
#[test]
fn list_mode_asks_robots_txt_for_each_redirect() {
    let log: Log = Arc::default();
    let site = {
        let log = Arc::clone(&log);
        TestSite::start(SiteConfig {
            pages: Some(Pages::new(move |_: &str, pq: &str| {
                log.lock()
                    .unwrap()
                    .push(("127.0.0.1".into(), pq.to_owned(), Instant::now()));
                Some(match pq {
                    "/robots.txt" => Page::text("User-agent: *\nDisallow: /private/\n"),
                    "/go-private" => Page::redirect(302, "/private/secret"),
                    "/moved" => Page::redirect(301, "/hop"),
                    "/hop" => Page::redirect(307, "/landed"),
                    _ => Page::html(format!("<p>{pq}</p>")),
                })
            })),
            ..SiteConfig::default()
        })
    };
    let dir = TempDir::new("robots-redirects");
    let cfg = dir.file("c.toml", &config(""));
    let list = dir.file(
        "urls.txt",
        &format!("{}\n{}\n", site.url("/go-private"), site.url("/moved")),
    );
    let out = dir.path("o.jsonl");
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--quiet",
    ]);
    assert_ok(&o);
    let mut asked: Vec<String> = paths(&log, "127.0.0.1")
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        ["/go-private", "/hop", "/landed", "/moved", "/robots.txt"],
        "nothing under /private/"
    );
    let recs = records(&out);
    assert_eq!(recs.len(), 2, "one record per listed URL");
    let by_url: HashMap<&str, &Value> = recs
        .iter()
        .map(|r| (r["url"].as_str().unwrap(), r))
        .collect();
    let refused = by_url[site.url("/go-private").as_str()];
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("robots: redirect to") && e.contains("/private/secret")),
        "{refused}"
    );
    assert_eq!(refused["attempts"], 1);
    let moved = by_url[site.url("/moved").as_str()];
    assert_eq!(moved["status"], 200, "{moved}");
    assert_eq!(moved["final_url"], Value::from(site.url("/landed")));
    assert_eq!(moved["attempts"], 3, "one attempt per hop");
}

#[test]
fn ignore_robots_fetches_everything_in_list_mode() {
    let log: Log = Arc::default();
    let site = polite_site(Arc::clone(&log));
    let dir = TempDir::new("robots-ignore");
    let cfg = dir.file("c.toml", &config(""));
    let urls: Vec<String> = (0..3).map(|i| site.url(&format!("/private/{i}"))).collect();
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let out = dir.path("o.jsonl");
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--ignore-robots",
        "--quiet",
    ]);
    assert_ok(&o);
    assert!(cli_support::stderr(&o).contains("--ignore-robots"));
    let asked = paths(&log, "127.0.0.1");
    assert!(!asked.iter().any(|(p, _)| p == "/robots.txt"));
    assert_eq!(asked.len(), 3);
    assert!(records(&out).iter().all(|r| r["status"] == 200));
}

#[test]
fn frontier_mode_obeys_robots() {
    let redis = support::RedisServer::start();
    let log: Log = Arc::default();
    let site = polite_site(Arc::clone(&log));
    let dir = TempDir::new("robots-frontier");
    let cfg = dir.file("c.toml", &config(""));
    let mut urls: Vec<String> = (0..20).map(|i| site.url(&format!("/p/{i}"))).collect();
    urls.extend((0..5).map(|i| site.url(&format!("/private/{i}"))));
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let queue = format!("{}jobs", redis.url());
    assert_ok(&run(&["--enqueue", s(&list), "--frontier", &queue]));
    let out = dir.path("o.jsonl");
    let child = spawn(&[
        "--config",
        s(&cfg),
        "--frontier",
        &queue,
        "--out",
        s(&out),
        "--idle-exit",
        "1",
        "--quiet",
    ]);
    let o = wait_bounded(child, Duration::from_secs(60));
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), urls.len(), "one record per URL");
    let skipped: Vec<&Value> = recs.iter().filter(|r| r["skipped"] == "robots").collect();
    assert_eq!(skipped.len(), 5);
    assert!(skipped
        .iter()
        .all(|r| r["url"].as_str().unwrap().contains("/private/")));
    let asked = paths(&log, "127.0.0.1");
    assert!(
        !asked.iter().any(|(p, _)| p.starts_with("/private/")),
        "{asked:?}"
    );
    assert_eq!(asked.iter().filter(|(p, _)| p == "/robots.txt").count(), 1);
}

#[test]
fn robots_txt_with_no_answer_is_the_urls_error_not_a_robots_skip() {
    // A port nothing listens on: robots.txt is refused, and so would the URLs be.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dir = TempDir::new("robots-closed");
    let cfg = dir.file("c.toml", &config(""));
    let urls = [
        format!("http://127.0.0.1:{port}/a"),
        format!("http://127.0.0.1:{port}/b"),
    ];
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (o, out, sum) = run_list(&dir, &cfg, &list, &["--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 2, "{recs:?}");
    for r in &recs {
        assert!(r["skipped"].is_null(), "not a robots skip: {r}");
        let e = r["error"]
            .as_str()
            .unwrap_or_else(|| panic!("an error: {r}"));
        assert!(e.starts_with("connect_refused"), "{e}");
    }
    let sum = json(&sum);
    assert_eq!(sum["skipped_robots"], 0, "{sum}");
    assert_eq!(sum["failed"], 2, "{sum}");
}

/// A site whose robots.txt answers `failing()` (a status) while it returns one, then
/// disallows `/private/`; every other path is a page.
fn site_whose_robots_fails(failing: impl Fn() -> Option<u16> + Send + Sync + 'static) -> TestSite {
    TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_: &str, pq: &str| {
            Some(match pq {
                "/robots.txt" => match failing() {
                    Some(status) => Page {
                        status,
                        content_type: "text/plain",
                        body: "not now".into(),
                        location: None,
                    },
                    None => Page::text("User-agent: *\nDisallow: /private/\n"),
                },
                _ => Page::html(format!("<p>{pq}</p>")),
            })
        })),
        ..SiteConfig::default()
    })
}

/// `n` pages `/p/i` and one disallowed URL of `site`.
fn pages_and_a_private_one(site: &TestSite, n: usize) -> Vec<String> {
    let mut urls: Vec<String> = (0..n).map(|i| site.url(&format!("/p/{i}"))).collect();
    urls.push(site.url("/private/x"));
    urls
}

/// One record per URL: the disallowed one skipped (not unavailable), the others 200.
fn assert_fetched_but_the_private_one(recs: &[Value], urls: &[String]) {
    assert_eq!(recs.len(), urls.len(), "one record per URL: {recs:?}");
    for r in recs {
        if r["url"].as_str().unwrap().contains("/private/") {
            assert_eq!(r["skipped"], "robots", "{r}");
            assert!(r["error"].is_null(), "disallowed, not unavailable: {r}");
        } else {
            assert_eq!(r["status"], 200, "{r}");
        }
    }
}

/// A robots.txt the site throttles is waited for, as a throttled page is: a 429 means
/// later. Three 429s (more than `max_retries`, 1 here), then robots.txt disallowing
/// `/private/`: the allowed URLs are fetched, the disallowed one skipped.
#[test]
fn a_throttled_robots_txt_is_waited_for_not_taken_as_unavailable() {
    let asked = std::sync::atomic::AtomicU32::new(0);
    let site = site_whose_robots_fails(move || {
        (asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 3).then_some(429)
    });
    let dir = TempDir::new("robots-throttled");
    let cfg = dir.file("c.toml", &config(""));
    let urls = pages_and_a_private_one(&site, 5);
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (o, out, _) = run_list(&dir, &cfg, &list, &["--quiet"]);
    assert_ok(&o);
    assert_fetched_but_the_private_one(&records(&out), &urls);
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths.iter().filter(|p| *p == "/robots.txt").count(),
        4,
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("/private/")),
        "{paths:?}"
    );
}

/// A URL skipped because its site could not serve robots.txt then (a 500) was never sent
/// and is not the site's rule for it: `--resume` fetches it again once robots.txt is
/// back, and the compacted `--out` keeps that answer as the URL's one record.
#[test]
fn resume_fetches_again_what_an_unavailable_robots_txt_skipped() {
    let back = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let up = Arc::clone(&back);
    let site = site_whose_robots_fails(move || {
        (!up.load(std::sync::atomic::Ordering::SeqCst)).then_some(500)
    });
    let dir = TempDir::new("robots-resume");
    let cfg = dir.file("c.toml", &config(""));
    let urls = pages_and_a_private_one(&site, 3);
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let out = dir.path("o.jsonl");
    let args = [
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--quiet",
    ];
    assert_ok(&run(&args));
    let first = records(&out);
    assert_eq!(first.len(), urls.len(), "{first:?}");
    assert!(
        first.iter().all(|r| r["skipped"] == "robots"
            && r["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("robots_unavailable"))),
        "{first:?}"
    );
    back.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut resume = args.to_vec();
    resume.push("--resume");
    let o = run(&resume);
    assert_ok(&o);
    assert_fetched_but_the_private_one(&records(&out), &urls);
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths.iter().filter(|p| p.starts_with("/p/")).count(),
        3,
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("/private/")),
        "{paths:?}"
    );
}
