//! A resumed `follow::crawl` reads as one crawl with the one before it: the URLs only a
//! sitemap lists are not lost when that sitemap is named by the robots.txt of a host
//! that is no seed's and whose pages were all recorded before the stop. Two virtual
//! hosts on one local site: the seed `127.0.0.1:PORT` links to `localhost:PORT`, whose
//! robots.txt names a sitemap of `N` pages.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use exitcrawl::config::{Algorithm, CrawlScope, Settings};
use exitcrawl_actors::follow::{self, FollowOptions, FollowRecord, PendingLink, Resume};
use exitcrawl_actors::Crawler;
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use support::exits;

/// Pages the blog host's sitemap lists.
const N: usize = 5;

/// Every request the site saw, as `host path`.
type Log = Arc<Mutex<Vec<String>>>;

fn site(log: Log) -> TestSite {
    TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |host: &str, pq: &str| {
            log.lock().unwrap().push(format!("{host} {pq}"));
            let port = host.rsplit(':').next().unwrap_or_default();
            if host.starts_with("localhost:") {
                return match pq {
                    "/robots.txt" => Some(Page::text(format!(
                        "User-agent: *\nAllow: /\nSitemap: http://{host}/sitemap.xml\n"
                    ))),
                    "/sitemap.xml" => {
                        let mut x = String::from("<urlset>");
                        for i in 0..N {
                            x += &format!("<url><loc>http://{host}/s/{i}</loc></url>");
                        }
                        Some(Page {
                            status: 200,
                            content_type: "application/xml",
                            body: Bytes::from(x + "</urlset>"),
                            location: None,
                        })
                    }
                    _ => Some(Page::html("<p>no links</p>")),
                };
            }
            Some(match pq {
                "/robots.txt" => Page::text("User-agent: *\nAllow: /\n"),
                "/" => Page::html(format!("<a href=\"http://localhost:{port}/\">blog</a>")),
                _ => Page::html("<p>no links</p>"),
            })
        })),
        ..SiteConfig::default()
    })
}

fn settings() -> Settings {
    let mut s = Settings::with_exits(exits(1, 8));
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    s.crawl.follow = true;
    s.crawl.scope = CrawlScope::Any;
    s.crawl.sitemaps = true;
    s
}

async fn crawl(s: Settings, seed: String, resume: Option<Resume>) -> Vec<FollowRecord> {
    let h = Crawler::start(s).expect("start");
    let mut opts = FollowOptions::from_settings(h.settings());
    opts.resume = resume;
    let mut records = Vec::new();
    follow::crawl(&h, vec![seed], opts, |r, _| records.push(r))
        .await
        .expect("crawl");
    records
}

/// What the program resumes from these records: every URL with a record is done, the
/// pages that were sent count against the budget, their links wait.
fn resume_from(records: &[FollowRecord]) -> Resume {
    let mut resume = Resume::default();
    for r in records {
        resume.done.push(r.url.clone());
        if r.skipped.is_none() && r.attempts > 0 {
            resume.pages += 1;
        }
        for link in &r.links {
            resume.pending.push(PendingLink {
                url: link.clone(),
                depth: r.depth + 1,
                parent: Some(r.url.clone()),
                redirect: false,
            });
        }
    }
    resume
}

#[actix_rt::test]
async fn a_resumed_crawl_reads_the_sitemaps_of_a_done_hosts_robots_txt() {
    let log: Log = Arc::default();
    let site = site(Arc::clone(&log));
    let port = site.port();
    let seed = format!("http://127.0.0.1:{port}/");
    let blog = format!("http://localhost:{port}");

    // Run 1 stops once both hosts' front pages are recorded (max_pages, like a stop),
    // before the blog's sitemap URLs are fetched.
    let mut capped = settings();
    capped.crawl.max_pages = Some(2);
    let first = crawl(capped, seed.clone(), None).await;
    let urls: HashSet<&str> = first.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(
        urls,
        HashSet::from([seed.as_str(), format!("{blog}/").as_str()]),
        "{first:?}"
    );

    // Run 2 has no blog page left to fetch: only its robots.txt names the sitemap.
    let second = crawl(settings(), seed.clone(), Some(resume_from(&first))).await;
    let mut records: BTreeMap<String, usize> = BTreeMap::new();
    for r in first.iter().chain(&second) {
        *records.entry(r.url.clone()).or_default() += 1;
    }
    for i in 0..N {
        let url = format!("{blog}/s/{i}");
        assert_eq!(records.get(&url), Some(&1), "{url}: {second:?}");
    }
    assert!(records.values().all(|&n| n == 1), "{records:?}");
    assert_eq!(records.len(), N + 2, "{records:?}");

    let asked = log.lock().unwrap().clone();
    let times = |what: &str| asked.iter().filter(|a| *a == what).count();
    for i in 0..N {
        assert_eq!(times(&format!("localhost:{port} /s/{i}")), 1, "{asked:?}");
    }
    assert_eq!(times(&format!("localhost:{port} /")), 1, "{asked:?}");
    assert_eq!(times(&format!("127.0.0.1:{port} /")), 1, "{asked:?}");
}
