//! `--follow --resume` of the program reads as one crawl with the run before it, through
//! the records file: URLs only a sitemap lists, named by the robots.txt of a host that is
//! no seed's and whose pages were all recorded before the stop, still get one record
//! each. Two virtual hosts on one local site: the seed `127.0.0.1:PORT` links to
//! `localhost:PORT`, whose robots.txt names a sitemap of `N` pages.

mod cli_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cli_support::example::{crawl, crawl_config};
use cli_support::{records, s, stderr, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};

/// Pages the second host's sitemap lists.
const N: usize = 5;

/// Every request the site saw, as `host path`.
type Log = Arc<Mutex<Vec<String>>>;

fn site(log: Log) -> TestSite {
    TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |host: &str, pq: &str| {
            log.lock().unwrap().push(format!("{host} {pq}"));
            let port = host.rsplit(':').next().unwrap_or_default();
            if host.starts_with("localhost:") {
                return Some(match pq {
                    "/robots.txt" => Page::text(format!(
                        "User-agent: *\nAllow: /\nSitemap: http://{host}/sitemap.xml\n"
                    )),
                    "/sitemap.xml" => {
                        let mut x = String::from("<urlset>");
                        for i in 0..N {
                            x += &format!("<url><loc>http://{host}/s/{i}</loc></url>");
                        }
                        Page {
                            status: 200,
                            content_type: "application/xml",
                            body: Bytes::from(x + "</urlset>"),
                            location: None,
                        }
                    }
                    _ => Page::html("<p>no links</p>"),
                });
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

#[test]
fn a_resumed_follow_crawl_reads_the_sitemaps_of_a_done_hosts_robots_txt() {
    let log: Log = Arc::default();
    let site = site(Arc::clone(&log));
    let port = site.port();
    let dir = TempDir::new("follow-resume-sitemaps");
    let crawl_toml = "\n[crawl]\nscope = \"any\"\nsitemaps = true\n";
    // Run 1 stops once both hosts' front pages are recorded (its page budget, as a stop
    // would), before the second host's sitemap URLs are fetched.
    let capped = dir.file(
        "capped.toml",
        &crawl_config(&format!("{crawl_toml}max_pages = 2\n")),
    );
    let whole = dir.file("whole.toml", &crawl_config(crawl_toml));
    let seeds = dir.file("seeds.txt", &format!("http://127.0.0.1:{port}/\n"));
    let out = dir.path("out.jsonl");
    let run = |cfg: &std::path::Path, more: &[&str]| {
        let mut args = vec![
            "--config",
            s(cfg),
            "--urls",
            s(&seeds),
            "--out",
            s(&out),
            "--follow",
            "--quiet",
        ];
        args.extend_from_slice(more);
        let o = crawl(&args);
        assert!(o.status.success(), "stderr: {}", stderr(&o));
    };
    run(&capped, &[]);
    let first: Vec<String> = records(&out)
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first.iter().all(|u| !u.contains("/s/")), "{first:?}");

    run(&whole, &["--resume"]);
    let mut per_url: BTreeMap<String, usize> = BTreeMap::new();
    for r in records(&out) {
        *per_url
            .entry(r["url"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    for i in 0..N {
        let url = format!("http://localhost:{port}/s/{i}");
        assert_eq!(per_url.get(&url), Some(&1), "{url}: {per_url:?}");
    }
    assert_eq!(per_url.len(), N + 2, "{per_url:?}");
    assert!(per_url.values().all(|&n| n == 1), "{per_url:?}");
    let asked = log.lock().unwrap().clone();
    let times = |what: &str| asked.iter().filter(|a| *a == what).count();
    for i in 0..N {
        assert_eq!(times(&format!("localhost:{port} /s/{i}")), 1, "{asked:?}");
    }
    assert_eq!(times(&format!("localhost:{port} /")), 1, "{asked:?}");
}
