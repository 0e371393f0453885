//! `follow::crawl`'s redirects, at the server: a redirect is the page's record and its
//! target a page of its own, through robots.txt, the scope and the dedupe; a chain keeps
//! the exit that read it and leaves the configured credentials behind once it leaves its
//! first origin; a page that redirects to itself is asked again within its one record,
//! no sooner than its host's Crawl-delay allows.

mod support;

use support::ip;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::follow::{crawl, FollowOptions, SkipReason};
use exitcrawl_actors::Crawler;
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};

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

#[actix_rt::test]
async fn a_redirect_is_a_record_and_its_target_a_page_of_its_own() {
    // `/start` redirects into `/dir/`; its page links relatively and back to itself.
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(|_, pq: &str| match pq {
            "/start" => Some(Page::redirect(302, "/dir/index.html")),
            "/dir/index.html" => Some(Page::html(
                "<a href=\"page2.html\">2</a> <a href=\"index.html\">me</a>",
            )),
            "/dir/page2.html" => Some(Page::html("<a href=\"/start\">start</a>")),
            "/robots.txt" => Some(Page::text("")),
            _ => None,
        })),
        ..SiteConfig::default()
    });
    let s = settings();
    let opts = FollowOptions::from_settings(&s);
    let h = Crawler::start(s).expect("start");
    let mut records = Vec::new();
    crawl(&h, vec![site.url("/start")], opts.clone(), |r, _| {
        records.push(r)
    })
    .await
    .unwrap();
    let mut paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/dir/index.html",
            "/dir/page2.html",
            "/robots.txt",
            "/start"
        ],
        "page2 resolved under /dir/, each page fetched once"
    );
    let got: BTreeMap<String, (Option<u16>, u32, Vec<String>)> = records
        .iter()
        .map(|r| (r.url.clone(), (r.status, r.depth, r.links.clone())))
        .collect();
    assert_eq!(records.len(), 3, "a record per URL: {got:?}");
    assert_eq!(
        got[&site.url("/start")],
        (Some(302), 0, vec![site.url("/dir/index.html")]),
        "the redirect's record names its target"
    );
    assert_eq!(got[&site.url("/dir/index.html")].1, 0, "the seed moved");
    assert_eq!(got[&site.url("/dir/page2.html")].1, 1);
    h.shutdown(Duration::from_secs(1)).await;
}

/// A site on `addr` with an empty robots.txt and `page` at every other path.
fn site_at(addr: &str, page: &'static str) -> TestSite {
    TestSite::start_at(
        SiteConfig {
            pages: Some(Pages::new(move |_, pq: &str| match pq {
                "/robots.txt" => Some(Page::text("")),
                _ => Some(Page::html(page)),
            })),
            ..SiteConfig::default()
        },
        ip(addr),
    )
}

/// A redirect's target goes through robots.txt, the scope and the dedupe as a link does:
/// one into a disallowed path or off the site is not fetched, and one to a page queued
/// under its own URL is fetched once. A seed that moves to another host takes that host
/// into the scope with it.
#[actix_rt::test]
async fn a_redirects_target_obeys_robots_scope_and_dedupe() {
    let other = site_at("127.0.0.5", "<a href=\"/more\">more</a>");
    let elsewhere = other.url("/landing");
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| match pq {
            "/robots.txt" => Some(Page::text("User-agent: *\nDisallow: /private/\n")),
            "/" => Some(Page::html(
                "<a href=\"/go-private\">p</a> <a href=\"/go-away\">a</a> \
                 <a href=\"/go-known\">k</a> <a href=\"/known\">known</a>",
            )),
            "/go-private" => Some(Page::redirect(302, "/private/secret")),
            "/go-away" => Some(Page::redirect(301, elsewhere.as_str())),
            "/go-known" => Some(Page::redirect(301, "/known")),
            "/moved-seed" => Some(Page::redirect(301, "/")),
            _ => Some(Page::html("")),
        })),
        ..SiteConfig::default()
    });
    let s = settings();
    let opts = FollowOptions::from_settings(&s);
    let h = Crawler::start(s).expect("start");
    let mut records = Vec::new();
    crawl(&h, vec![site.url("/moved-seed")], opts.clone(), |r, _| {
        records.push(r)
    })
    .await
    .unwrap();
    let mut paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/",
            "/go-away",
            "/go-known",
            "/go-private",
            "/known",
            "/moved-seed",
            "/robots.txt"
        ],
        "nothing under /private/, /known once"
    );
    assert!(other.requests().is_empty(), "off the site: not fetched");
    let secret = records
        .iter()
        .find(|r| r.url == site.url("/private/secret"))
        .expect("the disallowed target has its record");
    assert_eq!(secret.skipped, Some(SkipReason::Robots));

    // A seed that moves to another host brings it into the scope.
    let records_before = records.len();
    let seed_site = TestSite::start(SiteConfig {
        pages: Some(Pages::new({
            let to = other.url("/landing");
            move |_, pq: &str| match pq {
                "/robots.txt" => Some(Page::text("")),
                _ => Some(Page::redirect(301, to.as_str())),
            }
        })),
        ..SiteConfig::default()
    });
    crawl(&h, vec![seed_site.url("/")], opts, |r, _| records.push(r))
        .await
        .unwrap();
    let mut paths: Vec<String> = other.requests().into_iter().map(|r| r.path).collect();
    paths.sort();
    assert_eq!(paths, ["/landing", "/more", "/robots.txt"]);
    assert!(records.len() > records_before);
    h.shutdown(Duration::from_secs(1)).await;
}

/// A redirect chain goes on through the exit that read it (one address, one cookie jar,
/// as a client's session), and a page that redirects to itself is asked again until
/// `crawler.max_redirects`, with one record.
#[actix_rt::test]
async fn a_redirect_chain_keeps_its_exit_and_a_self_redirect_ends_at_max_redirects() {
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(|_, pq: &str| {
            match pq {
            "/robots.txt" => Some(Page::text("")),
            "/" => Some(Page::html(
                "<a href=\"/a1\">a</a> <a href=\"/b1\">b</a> <a href=\"/c1\">c</a> <a href=\"/self\">s</a>",
            )),
            "/self" => Some(Page::redirect(302, "/self")),
            p if p.ends_with('1') => Some(Page::redirect(302, format!("{}2", &p[..2]))),
            p if p.ends_with('2') => Some(Page::redirect(301, format!("{}3", &p[..2]))),
            _ => Some(Page::html("")),
        }
        })),
        ..SiteConfig::default()
    });
    let mut s = settings();
    s.crawler.max_redirects = 3;
    // Each exit sends at most 20 a second: the next hop, asked at once, finds the exit
    // that sent the last one not ready, and keeps it only if it is asked to.
    // Three exits for four chains: without that ask, their hops take turns.
    s.exits.push(ExitSettings::new("e4", ip("127.0.0.4")));
    for e in &mut s.exits {
        e.rate = Some(20.0);
        e.burst = Some(1);
    }
    let opts = FollowOptions::from_settings(&s);
    let h = Crawler::start(s).expect("start");
    let mut records = Vec::new();
    crawl(&h, vec![site.url("/")], opts, |r, _| records.push(r))
        .await
        .unwrap();
    let log = site.requests();
    for chain in ["/a", "/b", "/c"] {
        let peers: BTreeSet<_> = log
            .iter()
            .filter(|r| r.path.starts_with(chain))
            .map(|r| r.peer)
            .collect();
        assert_eq!(peers.len(), 1, "{chain}: one exit for the chain, {peers:?}");
    }
    let selfs = log.iter().filter(|r| r.path == "/self").count();
    assert_eq!(selfs, 4, "asked once and again at each of 3 redirects");
    let mine: Vec<_> = records
        .iter()
        .filter(|r| r.url == site.url("/self"))
        .collect();
    assert_eq!(mine.len(), 1, "one record for the page");
    assert!(
        mine[0]
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("too_many_redirects")),
        "{:?}",
        mine[0].error
    );
    h.shutdown(Duration::from_secs(1)).await;
}

/// The configured credentials stay behind when a redirect chain leaves the origin it
/// began at, as on a redirect the exit follows itself.
#[actix_rt::test]
async fn a_redirect_to_another_origin_leaves_the_configured_credentials_behind() {
    let other = site_at("127.0.0.6", "");
    let away = other.url("/landing");
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| match pq {
            "/robots.txt" => Some(Page::text("")),
            _ => Some(Page::redirect(302, away.as_str())),
        })),
        ..SiteConfig::default()
    });
    let mut s = settings();
    s.crawler
        .headers
        .insert("Authorization".into(), "Bearer s3cret".into());
    let opts = FollowOptions::from_settings(&s);
    let h = Crawler::start(s).expect("start");
    crawl(&h, vec![site.url("/")], opts, |_, _| {})
        .await
        .unwrap();
    let has_auth = |r: &exitcrawl_testsite::RequestRecord| {
        r.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
    };
    let first = site.requests();
    assert!(
        first.iter().any(|r| r.path == "/" && has_auth(r)),
        "sent where configured"
    );
    let landed = other.requests();
    let landing = landed
        .iter()
        .find(|r| r.path == "/landing")
        .expect("the seed's target fetched");
    assert!(!has_auth(landing), "{:?}", landing.headers);
    h.shutdown(Duration::from_secs(1)).await;
}

/// A page that redirects to itself (a cookie set, then the page) is asked again no
/// sooner than its host's Crawl-delay allows.
#[actix_rt::test]
async fn a_page_redirecting_to_itself_is_asked_again_after_the_crawl_delay() {
    let asked = Arc::new(AtomicUsize::new(0));
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| match pq {
            "/robots.txt" => Some(Page::text("User-agent: *\nCrawl-delay: 1\n")),
            _ if asked.fetch_add(1, Ordering::SeqCst) == 0 => Some(Page::redirect(302, "/loop")),
            _ => Some(Page::html("")),
        })),
        ..SiteConfig::default()
    });
    let s = settings();
    let opts = FollowOptions::from_settings(&s);
    let h = Crawler::start(s).expect("start");
    crawl(&h, vec![site.url("/loop")], opts, |_, _| {})
        .await
        .unwrap();
    let log = site.requests();
    let at: Vec<Instant> = log
        .iter()
        .filter(|r| r.path == "/loop")
        .map(|r| r.arrived)
        .collect();
    assert_eq!(at.len(), 2, "asked twice");
    let gap = at[1] - at[0];
    assert!(gap >= Duration::from_secs(1), "gap {gap:?} < Crawl-delay");
    h.shutdown(Duration::from_secs(1)).await;
}
