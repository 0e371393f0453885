//! `follow::crawl` against a generated local site with two virtual hosts on one port:
//! `127.0.0.1:PORT` (300+ interlinked pages, a robots.txt disallowing `/private/`) and
//! `localhost:PORT` (a few pages, `Crawl-delay: 1`, a disallowed subtree). Assertions are
//! about what the server saw: every allowed in-scope page requested exactly once, no
//! disallowed path ever requested, and the Crawl-delay host's requests ≥ 1 s apart.
//! Redirects in a crawl are tested in `follow_redirects.rs`.

mod support;

use support::ip;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::follow::{crawl, FollowOptions, FollowRecord, SkipReason};
use exitcrawl_actors::Crawler;
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};

/// Pages `/p/0.html` … on the big host.
const N: usize = 300;
/// Pages `/b/0.html` … on the Crawl-delay host.
const B_PAGES: usize = 4;

type Log = Arc<Mutex<Vec<(String, String, Instant)>>>;

fn settings() -> Settings {
    let mut s = Settings::with_exits(vec![
        ExitSettings::new("e2", ip("127.0.0.2")),
        ExitSettings::new("e3", ip("127.0.0.3")),
    ]);
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = 16;
    s.crawler.timeout_ms = 5_000;
    s.crawler.connect_timeout_ms = 2_000;
    s.crawler.retry_backoff_base_ms = 20;
    s.crawler.retry_backoff_max_ms = 200;
    s.crawler.user_agent = "exitcrawl-test/1.0 (+http://127.0.0.1/)".into();
    s.crawl.follow = true;
    s
}

/// The big host's page `i`: relative, root-relative, absolute, parent-relative links,
/// fragments, a self-loop, an empty query, a disallowed subtree, foreign hosts.
fn big_page(host: &str, i: usize) -> String {
    let mut h = format!("<html><head><title>p{i}</title></head><body>\n");
    h += &format!("<a href=\"{}.html\">next</a>\n", (i + 1) % N);
    h += &format!("<a href=\"/p/{}.html#sec\">skip</a>\n", (i + 13) % N);
    h += &format!(
        "<a href=\"http://{host}/p/{}.html#frag\">abs</a>\n",
        (i * 7 + 3) % N
    );
    h += &format!("<a href=\"../p/{}.html?\">up</a>\n", (i + 29) % N);
    h += "<a href=\"#top\">self</a> <a href=\"/\">home</a>\n";
    h += &format!("<A HREF='/p/{i}.html'>me</A>\n");
    if i.is_multiple_of(10) {
        h += &format!("<a href=\"/private/{i}.html\">secret</a>\n");
        h += "<a href=\"/private/shared.html\">secret</a>\n";
    }
    if i.is_multiple_of(50) {
        h += "<a href=\"http://other.invalid/x\">elsewhere</a>\n";
        h += "<a href=\"mailto:x@y.invalid\">mail</a> <a href=\"javascript:void(0)\">js</a>\n";
        h += "<a href=\"/file.bin\">binary</a> <a href=\"/missing.html\">gone</a>\n";
    }
    h += "<!-- <a href=\"/p/commented.html\">no</a> -->\n</body></html>\n";
    h
}

fn site(log: Log) -> TestSite {
    let pages = Pages::new(move |host: &str, pq: &str| {
        log.lock()
            .unwrap()
            .push((host.to_owned(), pq.to_owned(), Instant::now()));
        let path = pq.split('?').next().unwrap_or(pq);
        if host.starts_with("localhost:") {
            return match path {
                "/robots.txt" => Some(Page::text(
                    "User-agent: *\nCrawl-delay: 1\nDisallow: /b/secret/\n",
                )),
                "/" => {
                    let mut h = String::from("<html><body>");
                    for j in 0..B_PAGES {
                        h += &format!("<a href=\"b/{j}.html\">b{j}</a>");
                    }
                    h += "<a href=\"/b/secret/x.html\">s</a></body></html>";
                    Some(Page::html(h))
                }
                p => {
                    let j: usize = p.strip_prefix("/b/")?.strip_suffix(".html")?.parse().ok()?;
                    (j < B_PAGES).then(|| {
                        Page::html(format!(
                            "<a href=\"{}.html\">n</a><a href=\"/\">h</a><a href=\"//{host}/b/{j}.html#x\">me</a>",
                            (j + 1) % B_PAGES
                        ))
                    })
                }
            };
        }
        match path {
            "/robots.txt" => Some(Page::text(
                "User-agent: otherbot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n",
            )),
            "/" => Some(Page::html(
                "<a href=\"/p/0.html\">start</a><a href=\"p/1.html#x\">one</a>",
            )),
            "/file.bin" => Some(Page {
                status: 200,
                content_type: "text/plain",
                body: "<a href=\"/p/never.html\">not html, not followed</a>".into(),
                location: None,
            }),
            p => {
                let i: usize = p.strip_prefix("/p/")?.strip_suffix(".html")?.parse().ok()?;
                (i < N).then(|| Page::html(big_page(host, i)))
            }
        }
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

#[actix_rt::test]
async fn crawls_allowed_in_scope_pages_once_obeys_robots_and_crawl_delay() {
    let log: Log = Arc::default();
    let site = site(Arc::clone(&log));
    let port = site.port();
    let a = format!("127.0.0.1:{port}");
    let b = format!("localhost:{port}");
    let s = settings();
    let opts = FollowOptions::from_settings(&s);
    assert_eq!(opts.robots_token, "exitcrawl-test");
    let h = Crawler::start(s).expect("start");

    let seeds = vec![
        format!("http://{a}/"),
        format!("HTTP://LOCALHOST:{port}/#frag"),
        format!("http://{a}/p/0.html"), // also linked: counted once
        "not a url".to_string(),
    ];
    let mut records: Vec<FollowRecord> = Vec::new();
    let started = Instant::now();
    let totals = tokio::time::timeout(
        Duration::from_secs(30),
        crawl(&h, seeds, opts.clone(), |r, _| records.push(r)),
    )
    .await
    .expect("crawl finishes")
    .expect("valid rules");
    let took = started.elapsed();

    // ---- what the server saw
    let seen = log.lock().unwrap().clone();
    let mut count: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (host, path, _) in &seen {
        *count.entry((host.clone(), path.clone())).or_default() += 1;
    }
    let twice: Vec<_> = count.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "requested more than once: {twice:?}");
    let mut expected: BTreeSet<(String, String)> = BTreeSet::new();
    for p in ["/robots.txt", "/", "/file.bin", "/missing.html"] {
        expected.insert((a.clone(), p.to_string()));
    }
    for i in 0..N {
        expected.insert((a.clone(), format!("/p/{i}.html")));
    }
    for p in ["/robots.txt", "/"] {
        expected.insert((b.clone(), p.to_string()));
    }
    for j in 0..B_PAGES {
        expected.insert((b.clone(), format!("/b/{j}.html")));
    }
    let got: BTreeSet<_> = count.keys().cloned().collect();
    assert_eq!(
        got.difference(&expected).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "unexpected requests"
    );
    assert_eq!(
        expected.difference(&got).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "pages never requested"
    );
    assert!(!seen
        .iter()
        .any(|(_, p, _)| p.starts_with("/private/") || p.starts_with("/b/secret/")));
    // The site's own request log agrees (the generator saw every admitted request).
    assert_eq!(site.requests().len(), seen.len());

    // Crawl-delay host: every request (robots.txt included) ≥ 1 s after the previous one.
    let b_times: Vec<Instant> = seen
        .iter()
        .filter(|(host, _, _)| *host == b)
        .map(|(_, _, t)| *t)
        .collect();
    assert_eq!(b_times.len(), 2 + B_PAGES);
    for w in b_times.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap >= Duration::from_secs(1), "gap {gap:?} < Crawl-delay");
    }
    assert!(took < Duration::from_secs(20), "took {took:?}");

    // ---- records and totals
    let fetched: Vec<_> = records.iter().filter(|r| r.skipped.is_none()).collect();
    assert_eq!(fetched.len(), expected.len() - 2 + 1); // pages + the invalid seed
    let robots_skipped: BTreeSet<_> = records
        .iter()
        .filter(|r| r.skipped == Some(SkipReason::Robots))
        .map(|r| r.url.clone())
        .collect();
    let mut want_skipped: BTreeSet<String> = (0..N)
        .step_by(10)
        .map(|i| format!("http://{a}/private/{i}.html"))
        .collect();
    want_skipped.insert(format!("http://{a}/private/shared.html"));
    want_skipped.insert(format!("http://{b}/b/secret/x.html"));
    assert_eq!(robots_skipped, want_skipped);
    assert!(records
        .iter()
        .filter(|r| r.skipped.is_some())
        .all(|r| r.attempts == 0 && r.status.is_none() && r.parent.is_some()));

    let by_url: BTreeMap<&str, &FollowRecord> =
        records.iter().map(|r| (r.url.as_str(), r)).collect();
    assert_eq!(by_url.len(), records.len(), "one record per URL");
    let rec = |u: String| {
        *by_url
            .get(u.as_str())
            .unwrap_or_else(|| panic!("no record {u}"))
    };
    let home = rec(format!("http://{a}/"));
    assert_eq!((home.depth, home.parent.as_deref()), (0, None));
    assert_eq!(home.status, Some(200));
    let p0 = rec(format!("http://{a}/p/0.html"));
    assert_eq!((p0.depth, p0.parent.as_deref()), (0, None)); // a seed
    let p1 = rec(format!("http://{a}/p/1.html"));
    assert_eq!(p1.depth, 1);
    // Linked from the home page and from the seed /p/0.html: whichever answered first.
    let parents = [format!("http://{a}/"), format!("http://{a}/p/0.html")];
    assert!(
        parents.iter().any(|p| p1.parent.as_deref() == Some(p)),
        "{p1:?}"
    );
    assert_eq!(rec(format!("http://{a}/missing.html")).status, Some(404));
    let bin = rec(format!("http://{a}/file.bin"));
    assert_eq!((bin.status, bin.new_links), (Some(200), 0));
    let b1 = rec(format!("http://{b}/b/1.html"));
    assert_eq!(b1.depth, 1);
    assert_eq!(b1.parent.as_deref(), Some(format!("http://{b}/").as_str()));
    let invalid = rec("not a url".into());
    assert!(invalid.error.as_deref().unwrap().starts_with("invalid_url"));
    assert!(fetched
        .iter()
        .filter(|r| r.error.is_none())
        .all(|r| r.exit.is_some() && r.attempts == 1));

    let pages = (expected.len() - 2) as u64; // minus the two robots.txt
    assert_eq!(totals.fetched, pages);
    assert_eq!(totals.ok, pages - 1);
    assert_eq!(totals.failed, 0);
    assert_eq!(totals.skipped_robots, want_skipped.len() as u64);
    assert_eq!(totals.discovered, pages + want_skipped.len() as u64);
    assert_eq!(totals.robots_fetches, 2);
    assert_eq!(totals.requests, pages + 2);
    assert_eq!(totals.invalid_seeds, 1);
    // other.invalid is linked from every 50th page.
    assert_eq!(totals.skipped_scope, (N / 50) as u64);
    assert!(totals.deduped > 4 * N as u64, "{totals:?}");
    assert_eq!((totals.skipped_budget, totals.seen_full), (0, 0));
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn page_budget_depth_and_deny_rules_bound_the_crawl() {
    let log: Log = Arc::default();
    let site = site(Arc::clone(&log));
    let mut s = settings();
    s.crawl.max_pages = Some(20);
    s.crawl.deny = vec![r"/p/\d*5\.html$".into()];
    let opts = FollowOptions::from_settings(&s);
    let h = Crawler::start(s).expect("start");
    let mut records = Vec::new();
    let totals = crawl(&h, vec![site.url("/")], opts.clone(), |r, _| {
        records.push(r)
    })
    .await
    .unwrap();
    let paths: Vec<String> = log.lock().unwrap().iter().map(|x| x.1.clone()).collect();
    assert_eq!(paths.iter().filter(|p| *p != "/robots.txt").count(), 20);
    assert!(!paths.iter().any(|p| p.ends_with("5.html")), "{paths:?}");
    assert_eq!(totals.fetched, 20);
    assert!(
        totals.skipped_budget > 0 && totals.skipped_scope > 0,
        "{totals:?}"
    );

    // max_depth = 0: the seeds only; robots = false: robots.txt not even fetched.
    log.lock().unwrap().clear();
    let mut s = settings();
    s.crawl.max_depth = Some(0);
    s.crawl.robots = false;
    let opts = FollowOptions::from_settings(&s);
    let mut n = 0;
    let totals = crawl(&h, vec![site.url("/")], opts.clone(), |_, _| n += 1)
        .await
        .unwrap();
    let paths: Vec<String> = log.lock().unwrap().iter().map(|x| x.1.clone()).collect();
    assert_eq!(paths, ["/"]);
    assert_eq!((n, totals.fetched, totals.skipped_scope), (1, 1, 2));
    h.shutdown(Duration::from_secs(1)).await;
}

/// Settings without retries, and options that give up on a robots.txt after three
/// failures 100–200 ms apart.
fn robots_retried_quickly() -> (Settings, FollowOptions) {
    let mut s = settings();
    s.crawler.max_retries = 0;
    let mut opts = FollowOptions::from_settings(&s);
    opts.robots_policy.retry_base = Duration::from_millis(100);
    opts.robots_policy.retry_max = Duration::from_millis(200);
    opts.max_robots_failures = 3;
    (s, opts)
}

#[actix_rt::test]
async fn unreachable_robots_txt_is_retried_then_the_host_skipped() {
    // Every path answers 500 on this site: robots.txt included.
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| {
            l.lock()
                .unwrap()
                .push((String::new(), pq.to_owned(), Instant::now()));
            Some(Page {
                status: 500,
                content_type: "text/plain",
                body: "oops".into(),
                location: None,
            })
        })),
        ..SiteConfig::default()
    });
    let (s, opts) = robots_retried_quickly();
    let h = Crawler::start(s).expect("start");
    let mut records = Vec::new();
    let totals = crawl(
        &h,
        vec![site.url("/a"), site.url("/b")],
        opts.clone(),
        |r, _| records.push(r),
    )
    .await
    .unwrap();
    let paths: Vec<String> = log.lock().unwrap().iter().map(|x| x.1.clone()).collect();
    assert_eq!(paths, ["/robots.txt"; 3], "only robots.txt, three times");
    assert_eq!((totals.robots_fetches, totals.skipped_robots), (3, 2));
    assert!(records.iter().all(|r| r.skipped == Some(SkipReason::Robots)
        && r.error
            .as_deref()
            .is_some_and(|e| e.starts_with("robots_unavailable"))));
    h.shutdown(Duration::from_secs(1)).await;
}

/// A robots.txt the site throttles is waited for, as a throttled page is (a 429 means
/// later), however many throttles that takes: four 429s, against no retries and a give-up
/// after three robots.txt failures, then the rules. Both seeds are fetched.
#[actix_rt::test]
async fn a_throttled_robots_txt_is_waited_for_not_given_up_on() {
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| {
            let mut log = l.lock().unwrap();
            let throttled = pq == "/robots.txt" && log.len() < 4;
            log.push((String::new(), pq.to_owned(), Instant::now()));
            Some(if throttled {
                Page {
                    status: 429,
                    content_type: "text/plain",
                    body: "slow down".into(),
                    location: None,
                }
            } else if pq == "/robots.txt" {
                Page::text("User-agent: *\nDisallow: /private/\n")
            } else {
                Page::html("<p>page</p>")
            })
        })),
        ..SiteConfig::default()
    });
    let (s, opts) = robots_retried_quickly();
    let h = Crawler::start(s).expect("start");
    let mut records = Vec::new();
    crawl(
        &h,
        vec![site.url("/a"), site.url("/b")],
        opts.clone(),
        |r, _| records.push(r),
    )
    .await
    .unwrap();
    let paths: Vec<String> = log.lock().unwrap().iter().map(|x| x.1.clone()).collect();
    assert_eq!(&paths[..5], ["/robots.txt"; 5], "{paths:?}");
    assert_eq!(paths.len(), 7, "{paths:?}");
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.status == Some(200)), "{records:?}");
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn links_past_a_pages_cap_are_counted() {
    // One page with 10,003 links, to pages that do not exist (404: no further links).
    let pages = Pages::new(|_host: &str, pq: &str| {
        (pq == "/").then(|| {
            let links: String = (0..10_003)
                .map(|i| format!("<a href=\"/x/{i}\">x</a>"))
                .collect();
            Page::html(links)
        })
    });
    let site = TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    });
    let mut s = settings();
    s.crawl.robots = false;
    s.crawl.max_depth = Some(0);
    let opts = FollowOptions::from_settings(&s);
    let h = Crawler::start(s).expect("start");
    let totals = crawl(&h, vec![site.url("/")], opts.clone(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(
        (totals.links_over_cap, totals.pages_over_cap),
        (3, 1),
        "{totals:?}"
    );
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn robots_txt_that_gets_no_answer_fails_the_urls_not_skips_them() {
    // A port nothing listens on: robots.txt is refused each time.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (s, opts) = robots_retried_quickly();
    let h = Crawler::start(s).expect("start");
    let seeds = vec![
        format!("http://127.0.0.1:{port}/a"),
        format!("http://127.0.0.1:{port}/b"),
    ];
    let mut records = Vec::new();
    let totals = crawl(&h, seeds, opts.clone(), |r, _| records.push(r))
        .await
        .unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(
        records.iter().all(|r| r.skipped.is_none()
            && r.error
                .as_deref()
                .is_some_and(|e| e.starts_with("connect_refused"))),
        "{records:?}"
    );
    assert_eq!((totals.skipped_robots, totals.failed), (0, 2), "{totals:?}");
    h.shutdown(Duration::from_secs(1)).await;
}
