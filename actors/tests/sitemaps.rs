//! Sitemaps seed a crawl, at the server: a sitemap index naming a plain and a gzip'd
//! sitemap (served as application/gzip), each listed URL fetched once with its
//! `<lastmod>` in its record, URLs of other hosts and out of scope left out, robots.txt
//! obeyed, and the `Sitemap:` lines of robots.txt read with `[crawl] sitemaps = true`.
//! Sitemap fetches themselves go through robots.txt and its Crawl-delay as pages do.

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::follow::{self, FollowOptions, FollowRecord};
use exitcrawl_actors::Crawler;
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use support::exits;

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn urlset(base: &str, entries: &[(&str, Option<&str>)]) -> String {
    let mut x = String::from(
        "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">",
    );
    for (path, lastmod) in entries {
        x.push_str(&format!("<url><loc>{base}{path}</loc>"));
        if let Some(l) = lastmod {
            x.push_str(&format!("<lastmod>{l}</lastmod>"));
        }
        x.push_str("</url>");
    }
    x + "</urlset>"
}

/// A site whose sitemaps list pages; `robots_sitemap` puts the index in robots.txt.
fn site() -> TestSite {
    TestSite::start(SiteConfig {
        pages: Some(Pages::new(|host: &str, pq: &str| {
            let base = format!("http://{host}");
            let xml = |body: String| Page {
                status: 200,
                content_type: "application/xml",
                body: Bytes::from(body),
                location: None,
            };
            Some(match pq {
                "/robots.txt" => Page::text(format!(
                    "User-agent: *\nDisallow: /private/\nSitemap: {base}/index.xml\n"
                )),
                "/index.xml" => xml(format!(
                    "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                     <sitemap><loc>{base}/a.xml</loc></sitemap>\
                     <sitemap><loc>{base}/b.xml.gz</loc></sitemap>\
                     <sitemap><loc>{base}/a.xml</loc></sitemap>\
                     <sitemap><loc>http://elsewhere.invalid/c.xml</loc></sitemap>\
                     </sitemapindex>"
                )),
                "/a.xml" => xml(urlset(
                    &base,
                    &[
                        ("/p1", Some("2024-05-01")),
                        ("/p2", None),
                        ("/private/x", Some("2024-01-01")),
                        ("/p1", Some("2024-05-01")),
                    ],
                )),
                "/b.xml.gz" => Page {
                    status: 200,
                    content_type: "application/gzip",
                    body: Bytes::from(gz(urlset(
                        &base,
                        &[("/p2", None), ("/p3", Some("2024-06-01T10:00:00+00:00"))],
                    )
                    .as_bytes())),
                    location: None,
                },
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
    s
}

fn by_url(records: &[FollowRecord]) -> HashMap<String, &FollowRecord> {
    let mut m = HashMap::new();
    for r in records {
        assert!(
            m.insert(r.url.clone(), r).is_none(),
            "one record per URL: {}",
            r.url
        );
    }
    m
}

async fn crawl(s: Settings, seeds: Vec<String>, sitemaps: Vec<String>) -> Vec<FollowRecord> {
    let h = Crawler::start(s).expect("start");
    let mut opts = FollowOptions::from_settings(h.settings());
    opts.sitemaps = sitemaps;
    let mut records = Vec::new();
    let totals = follow::crawl(&h, seeds, opts.clone(), |r, _| records.push(r))
        .await
        .expect("crawl");
    assert_eq!(totals.sitemap_errors, 0, "{totals:?}");
    records
}

#[actix_rt::test]
async fn a_sitemap_index_seeds_every_listed_url_once_with_its_lastmod() {
    let site = site();
    let records = crawl(settings(), Vec::new(), vec![site.url("/index.xml")]).await;
    let recs = by_url(&records);
    let p = |path: &str| {
        recs.get(&site.url(path))
            .unwrap_or_else(|| panic!("{path}: {records:?}"))
    };
    assert_eq!(p("/p1").status, Some(200));
    assert_eq!(p("/p1").lastmod.as_deref(), Some("2024-05-01"));
    assert_eq!(p("/p1").depth, 0);
    assert_eq!(
        p("/p1").parent.as_deref(),
        Some(site.url("/a.xml").as_str())
    );
    assert_eq!(p("/p2").lastmod, None);
    assert_eq!(
        p("/p3").lastmod.as_deref(),
        Some("2024-06-01T10:00:00+00:00"),
        "from the gzip'd sitemap"
    );
    assert_eq!(
        p("/private/x").skipped,
        Some(exitcrawl_actors::follow::SkipReason::Robots)
    );
    assert_eq!(recs.len(), 4, "{records:?}");

    let mut seen: HashMap<String, usize> = HashMap::new();
    for r in site.requests() {
        *seen.entry(r.path).or_default() += 1;
    }
    for path in [
        "/index.xml",
        "/a.xml",
        "/b.xml.gz",
        "/p1",
        "/p2",
        "/p3",
        "/robots.txt",
    ] {
        assert_eq!(seen.get(path), Some(&1), "{path} once: {seen:?}");
    }
    assert_eq!(seen.get("/private/x"), None, "robots.txt disallows it");
    assert_eq!(seen.len(), 7, "{seen:?}");
}

#[actix_rt::test]
async fn robots_txt_sitemap_lines_seed_the_crawl_when_asked() {
    let site = site();
    let mut s = settings();
    s.crawl.sitemaps = true;
    let records = crawl(s, vec![site.url("/")], Vec::new()).await;
    let recs = by_url(&records);
    for path in ["/", "/p1", "/p2", "/p3"] {
        assert_eq!(recs[&site.url(path)].status, Some(200), "{path}");
    }
    // Without [crawl] sitemaps, robots.txt's Sitemap: lines are not read.
    let site = self::site();
    let records = crawl(settings(), vec![site.url("/")], Vec::new()).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(site.requests().iter().all(|r| !r.path.ends_with(".xml")));
}

#[actix_rt::test]
async fn sitemap_urls_go_through_the_crawl_scope() {
    let site = site();
    let mut s = settings();
    s.crawl.deny = vec!["/p2$".into()];
    let records = crawl(s, Vec::new(), vec![site.url("/a.xml")]).await;
    let urls: Vec<_> = records.iter().map(|r| r.url.clone()).collect();
    assert!(urls.contains(&site.url("/p1")), "{urls:?}");
    assert!(!urls.contains(&site.url("/p2")), "denied: {urls:?}");
    assert!(site.requests().iter().all(|r| r.path != "/p2"));
}

#[actix_rt::test]
async fn a_sitemap_larger_than_a_page_may_be_is_read_up_to_the_protocols_50_mb() {
    // 60,000 URLs, about 3 MB: over the default body limit of a page (2 MiB). The
    // protocol's 50,000 URLs per file are taken.
    const N: usize = 60_000;
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(|host: &str, pq: &str| {
            (pq == "/big.xml").then(|| {
                let base = format!("http://{host}");
                let paths: Vec<String> = (0..N).map(|i| format!("/page/{i}")).collect();
                let entries: Vec<(&str, Option<&str>)> =
                    paths.iter().map(|p| (p.as_str(), None)).collect();
                Page {
                    status: 200,
                    content_type: "application/xml",
                    body: Bytes::from(urlset(&base, &entries)),
                    location: None,
                }
            })
        })),
        ..SiteConfig::default()
    });
    let mut s = settings();
    s.crawl.robots = false;
    s.crawl.max_pages = Some(1);
    assert!(s.crawler.max_body_bytes < 3_000_000);
    let h = Crawler::start(s).expect("start");
    let mut opts = FollowOptions::from_settings(h.settings());
    opts.sitemaps = vec![site.url("/big.xml")];
    let totals = follow::crawl(&h, vec![], opts.clone(), |_, _| {})
        .await
        .expect("crawl");
    assert_eq!(totals.sitemap_errors, 0, "{totals:?}");
    assert_eq!(totals.sitemap_urls, 50_000, "{totals:?}");
}

/// A `--sitemap` robots.txt disallows is not fetched, nor is a disallowed redirect
/// target of one; robots.txt is asked first, and the Crawl-delay spaces the sitemaps.
#[actix_rt::test]
async fn sitemap_fetches_obey_robots_txt_and_its_crawl_delay() {
    let log: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let l = Arc::clone(&log);
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| {
            l.lock().unwrap().push((pq.to_owned(), Instant::now()));
            Some(match pq {
                "/robots.txt" => Page::text("User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"),
                "/moved.xml" => Page::redirect(301, "/private/moved.xml"),
                _ => Page {
                    status: 200,
                    content_type: "application/xml",
                    body: Bytes::from(urlset("", &[])),
                    location: None,
                },
            })
        })),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings()).expect("start");
    let mut opts = FollowOptions::from_settings(h.settings());
    opts.sitemaps = ["/private/s.xml", "/s1.xml", "/moved.xml", "/s2.xml"]
        .map(|p| site.url(p))
        .to_vec();
    let totals = follow::crawl(&h, vec![], opts, |_, _| {})
        .await
        .expect("crawl");
    let log = log.lock().unwrap().clone();
    let paths: Vec<&str> = log.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths[0], "/robots.txt", "{paths:?}");
    let mut rest = paths[1..].to_vec();
    rest.sort_unstable();
    assert_eq!(rest, ["/moved.xml", "/s1.xml", "/s2.xml"], "{paths:?}");
    for w in log.windows(2) {
        let gap = w[1].1 - w[0].1;
        assert!(
            gap >= Duration::from_secs(1),
            "gap {gap:?} < Crawl-delay: {paths:?}"
        );
    }
    assert_eq!(
        (totals.sitemap_fetches, totals.sitemap_errors),
        (3, 2),
        "{totals:?}"
    );
    h.shutdown(Duration::from_secs(1)).await;
}
