//! `CrawlerHandle::fetch` obeys robots.txt unless the handle or the settings opt out:
//! asserted on what the site saw (paths requested, robots.txt fetches counted, arrival times on paused time).

mod support;

use support::{exits, paused_site, timeouts_for_paused_time};

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchErrorKind};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use futures_util::future::join_all;

fn settings() -> Settings {
    let mut s = Settings::with_exits(exits(1, 8));
    s.limiter.algorithm = Algorithm::None;
    s.crawler.retry_backoff_base_ms = 20;
    s.crawler.retry_backoff_max_ms = 200;
    s.crawler.max_retries = 1;
    s.crawler.user_agent = "exitcrawl-test/1.0 (+http://127.0.0.1/)".into();
    timeouts_for_paused_time(&mut s);
    s
}

/// A site whose `/robots.txt` answers `status` with `body`; every other path is a page.
fn site(status: u16, body: &'static str) -> TestSite {
    let pages = Pages::new(move |_host: &str, pq: &str| {
        if pq == "/robots.txt" {
            let mut p = Page::text(body);
            p.status = status;
            return Some(p);
        }
        Some(Page::html("<p>page</p>"))
    });
    paused_site(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

fn paths(site: &TestSite) -> Vec<String> {
    site.requests().into_iter().map(|r| r.path).collect()
}

fn count(site: &TestSite, path: &str) -> usize {
    paths(site).iter().filter(|p| *p == path).count()
}

async fn fetch(h: &CrawlerHandle, site: &TestSite, path: &str) -> Result<u16, FetchErrorKind> {
    h.fetch(Fetch::get(site.url(path)))
        .await
        .map(|r| r.status)
        .map_err(|e| e.kind)
}

const RULES: &str =
    "User-agent: otherbot\nDisallow: /\n\nUser-agent: exitcrawl-test\nDisallow: /private/\n";

#[actix_rt::test]
async fn a_disallowed_path_fails_unsent_and_an_allowed_one_is_fetched() {
    let site = site(200, RULES);
    let h = Crawler::start(settings()).expect("start");
    let err = h
        .fetch(Fetch::get(site.url("/private/x")))
        .await
        .expect_err("disallowed");
    assert_eq!(err.kind, FetchErrorKind::Robots);
    assert_eq!(err.attempts, 0);
    let text = err.to_string();
    assert!(text.contains("/private/x"), "{text}");
    assert!(text.contains("robots.txt"), "{text}");
    assert!(text.contains("exitcrawl-test"), "{text}");
    assert_eq!(fetch(&h, &site, "/public").await, Ok(200));
    assert_eq!(paths(&site), ["/robots.txt", "/public"]);
}

/// A robots.txt that redirects is followed to its rules, however few redirects the crawl
/// follows for its pages (RFC 9309 asks for five): with `max_redirects = 0` it read as
/// no robots.txt, and everything was allowed.
#[actix_rt::test]
async fn a_redirected_robots_txt_is_followed_whatever_max_redirects_says() {
    let pages = Pages::new(|_host: &str, pq: &str| match pq {
        "/robots.txt" => Some(Page::redirect(301, "/a.txt")),
        "/a.txt" => Some(Page::redirect(302, "/rules.txt")),
        "/rules.txt" => Some(Page::text(RULES)),
        _ => Some(Page::html("<p>page</p>")),
    });
    let site = paused_site(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    });
    let mut s = settings();
    s.crawler.max_redirects = 0;
    let h = Crawler::start(s).expect("start");
    assert_eq!(
        fetch(&h, &site, "/private/x").await,
        Err(FetchErrorKind::Robots)
    );
    assert_eq!(fetch(&h, &site, "/public").await, Ok(200));
    assert_eq!(
        paths(&site),
        ["/robots.txt", "/a.txt", "/rules.txt", "/public"]
    );
}

#[actix_rt::test]
async fn many_concurrent_fetches_to_a_new_origin_fetch_robots_txt_once() {
    let site = site(200, RULES);
    let h = Crawler::start(settings()).expect("start");
    let urls: Vec<_> = (0..40)
        .map(|i| {
            let dir = if i % 4 == 0 { "private" } else { "p" };
            site.url(&format!("/{dir}/{i}"))
        })
        .collect();
    let replies = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone())))).await;
    let robots = replies
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.kind == FetchErrorKind::Robots))
        .count();
    assert_eq!(robots, 10);
    assert_eq!(count(&site, "/robots.txt"), 1);
    assert_eq!(site.requests().len(), 31);
    assert!(!paths(&site).iter().any(|p| p.starts_with("/private/")));
    // A clone shares the cache.
    let again = h.clone();
    assert_eq!(fetch(&again, &site, "/p/x").await, Ok(200));
    assert_eq!(count(&site, "/robots.txt"), 1);
}

#[actix_rt::test]
async fn a_404_robots_txt_allows_everything() {
    let site = site(404, "no such file");
    let h = Crawler::start(settings()).expect("start");
    assert_eq!(fetch(&h, &site, "/private/x").await, Ok(200));
    assert_eq!(fetch(&h, &site, "/p/1").await, Ok(200));
    assert_eq!(paths(&site), ["/robots.txt", "/private/x", "/p/1"]);
}

/// A robots.txt the site throttles is waited for, as a throttled page is (a 429 means
/// later): three 429s, more than `max_retries` (1), then the rules. The fetch that asked
/// is sent under them, and so is the next.
#[actix_rt::test]
async fn a_throttled_robots_txt_is_waited_for() {
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let n = std::sync::Arc::clone(&asked);
    let pages = Pages::new(move |_host: &str, pq: &str| {
        if pq == "/robots.txt" {
            let mut p = Page::text(RULES);
            if n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 3 {
                p.status = 429;
            }
            return Some(p);
        }
        Some(Page::html("<p>page</p>"))
    });
    let site = paused_site(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings()).expect("start");
    assert_eq!(fetch(&h, &site, "/p/1").await, Ok(200));
    assert_eq!(
        fetch(&h, &site, "/private/x").await,
        Err(FetchErrorKind::Robots)
    );
    assert_eq!(
        paths(&site),
        [
            "/robots.txt",
            "/robots.txt",
            "/robots.txt",
            "/robots.txt",
            "/p/1"
        ]
    );
}

/// A robots.txt throttled for as long as the crawler waits for a host
/// (`give_up_after_ms`) is unavailable: the site answered, so its fetches end `robots`
/// (not the network's error), and none is sent.
#[actix_rt::test]
async fn a_robots_txt_throttled_past_the_give_up_disallows_the_site() {
    let site = site(429, "slow down");
    let mut s = settings();
    s.crawler.give_up_after_ms = 1_000;
    let h = Crawler::start(s).expect("start");
    let e = h
        .fetch(Fetch::get(site.url("/p/1")))
        .await
        .expect_err("robots.txt unavailable");
    assert_eq!(e.kind, FetchErrorKind::Robots, "{e}");
    assert!(e.message.contains("throttled_out"), "{e}");
    assert!(count(&site, "/robots.txt") >= 1, "{:?}", paths(&site));
    assert_eq!(count(&site, "/p/1"), 0, "{:?}", paths(&site));
}

#[actix_rt::test]
async fn a_500_robots_txt_disallows_the_site() {
    let site = site(500, "oops");
    let h = Crawler::start(settings()).expect("start");
    assert_eq!(fetch(&h, &site, "/p/1").await, Err(FetchErrorKind::Robots));
    assert_eq!(fetch(&h, &site, "/p/2").await, Err(FetchErrorKind::Robots));
    assert!(
        paths(&site).iter().all(|p| p == "/robots.txt"),
        "{:?}",
        paths(&site)
    );
    assert!(count(&site, "/robots.txt") >= 1);
}

#[actix_rt::test]
async fn the_opt_out_fetches_everything_and_never_asks_for_robots_txt() {
    let site = site(200, "User-agent: *\nDisallow: /\n");
    let mut s = settings();
    s.crawl.robots = false;
    let h = Crawler::start(s).expect("start");
    assert_eq!(fetch(&h, &site, "/a").await, Ok(200));
    // A handle that opted out does not ask either, whatever the setting; a polite clone
    // of it asks again.
    let plain = Crawler::start(settings()).expect("start").polite(false);
    assert_eq!(fetch(&plain, &site, "/b").await, Ok(200));
    assert_eq!(paths(&site), ["/a", "/b"]);
    let polite = plain.polite(true);
    assert_eq!(
        fetch(&polite, &site, "/c").await,
        Err(FetchErrorKind::Robots)
    );
    assert_eq!(paths(&site), ["/a", "/b", "/robots.txt"]);
}

#[actix_rt::test]
async fn a_fetch_message_obeys_robots_txt_through_the_crawlers_one_cache() {
    let polite_site = site(200, RULES);
    let site = &polite_site;
    let h = Crawler::start(settings()).expect("start");
    let scheduler = h.polite(false).scheduler();
    let send = |path: &str| scheduler.send(Fetch::get(site.url(path)));
    let err = send("/private/m")
        .await
        .expect("a reply")
        .expect_err("disallowed");
    assert_eq!(err.kind, FetchErrorKind::Robots);
    assert_eq!(err.attempts, 0);
    let ok = send("/m").await.expect("a reply").expect("allowed");
    assert_eq!(ok.status, 200);
    // The message and the handle share one cache: robots.txt was fetched once.
    assert_eq!(fetch(&h, site, "/n").await, Ok(200));
    assert_eq!(paths(site), ["/robots.txt", "/m", "/n"]);
}

#[actix_rt::test]
async fn a_fetch_message_does_not_ask_robots_txt_with_the_setting_off() {
    let other = site(200, RULES);
    let mut s = settings();
    s.crawl.robots = false;
    let plain = Crawler::start(s).expect("start").scheduler();
    let r = plain.send(Fetch::get(other.url("/private/m"))).await;
    assert_eq!(r.expect("a reply").expect("fetched").status, 200);
    assert_eq!(paths(&other), ["/private/m"]);
}

#[actix_rt::test]
async fn crawl_delay_spaces_the_origins_requests() {
    let site = site(200, "User-agent: *\nCrawl-delay: 2\n");
    let h = Crawler::start(settings()).expect("start");
    let urls: Vec<_> = (0..4).map(|i| site.url(&format!("/p/{i}"))).collect();
    let replies = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone())))).await;
    assert!(replies
        .iter()
        .all(|r| r.as_ref().is_ok_and(|r| r.status == 200)));
    let reqs = site.requests();
    assert_eq!(reqs.len(), 5);
    assert_eq!(reqs[0].path, "/robots.txt");
    for w in reqs.windows(2) {
        let gap = w[1].arrived.duration_since(w[0].arrived);
        assert!(gap >= Duration::from_secs(2), "gap {gap:?} < Crawl-delay");
    }
}

/// A redirect is asked of robots.txt hop by hop: into a disallowed path it is not
/// followed; an allowed chain is one answer; a POST's 303 is a GET there, and a chain
/// that leaves the first origin leaves the fetch's credentials behind.
#[actix_rt::test]
async fn each_redirect_is_asked_of_robots_txt() {
    let other = TestSite::start_on_runtime_at(
        SiteConfig {
            pages: Some(Pages::new(|_, pq: &str| {
                Some(if pq == "/robots.txt" {
                    Page::text("")
                } else {
                    Page::html("<p>other</p>")
                })
            })),
            ..SiteConfig::default()
        },
        "127.0.0.5".parse().unwrap(),
    );
    let away = other.url("/landed");
    let pages = Pages::new(move |_host: &str, pq: &str| {
        Some(match pq {
            "/robots.txt" => Page::text(RULES),
            "/go-private" => Page::redirect(302, "/private/secret"),
            "/moved" => Page::redirect(301, "/hop"),
            "/hop" => Page::redirect(303, away.as_str()),
            _ => Page::html("<p>page</p>"),
        })
    });
    let site = paused_site(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings()).expect("start");
    let err = h
        .fetch(Fetch::get(site.url("/go-private")))
        .await
        .expect_err("its redirect is disallowed");
    assert_eq!(err.kind, FetchErrorKind::Robots, "{err}");
    assert_eq!(err.attempts, 1, "{err}");
    assert!(err.message.contains("redirect to") && err.message.contains("/private/secret"));
    assert_eq!(err.url, site.url("/go-private"));

    let mut post = Fetch::get(site.url("/moved")).header("Authorization", "Bearer s3cret");
    post.method = exitcrawl_actors::Method::POST;
    post.body = Some("x=1".into());
    let r = h.fetch(post).await.expect("followed");
    assert_eq!((r.status, r.attempts), (200, 3));
    assert_eq!(r.url, site.url("/moved"));
    assert_eq!(r.final_url.as_deref(), Some(other.url("/landed").as_str()));

    assert_eq!(
        paths(&site),
        ["/robots.txt", "/go-private", "/moved", "/hop"]
    );
    let log = site.requests();
    assert_eq!(
        (log[2].method.as_str(), log[3].method.as_str()),
        ("POST", "GET"),
        "a 301 turns a POST into a GET"
    );
    let landed = other
        .requests()
        .into_iter()
        .find(|r| r.path == "/landed")
        .expect("the last hop");
    assert_eq!(landed.method, "GET", "a 303 is a GET");
    assert!(
        !landed
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("authorization")),
        "credentials left behind off the first origin: {:?}",
        landed.headers
    );
}

/// A fetch that is itself a hop off its chain's first origin (`Fetch::off_origin`) keeps
/// the configured credentials behind on the redirects it is given, same-origin ones too.
#[actix_rt::test]
async fn a_fetch_off_its_origin_keeps_credentials_behind_on_its_redirects() {
    let pages = Pages::new(|_host: &str, pq: &str| {
        Some(match pq {
            "/robots.txt" => Page::text(""),
            "/moved" => Page::redirect(302, "/landed"),
            _ => Page::html("<p>page</p>"),
        })
    });
    let site = paused_site(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    });
    let mut s = settings();
    s.crawler
        .headers
        .insert("Authorization".into(), "Bearer s3cret".into());
    let h = Crawler::start(s).expect("start");
    let r = h
        .fetch(Fetch::get(site.url("/moved")).off_origin(true))
        .await
        .expect("followed");
    assert_eq!(r.status, 200);
    let log = site.requests();
    let authorized: Vec<&str> = log
        .iter()
        .filter(|r| {
            r.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        })
        .map(|r| r.path.as_str())
        .collect();
    // robots.txt is a fetch of its own, made with the configured headers.
    assert_eq!(
        authorized,
        ["/robots.txt"],
        "credentials sent past the first origin"
    );
    assert!(log.iter().any(|r| r.path == "/landed"));
}

/// A robots.txt fetch goes through the crawler (queued, paced, retried) and can outlast
/// the cache's pending mark: a fetch to the origin arriving after the mark has lapsed
/// still waits for that one robots.txt answer instead of asking again.
#[actix_rt::test]
async fn a_robots_txt_slower_than_the_pending_mark_is_fetched_once() {
    let pages = Pages::new(|_host: &str, pq: &str| {
        Some(if pq == "/robots.txt" {
            Page::text("User-agent: *\nDisallow: /private/\n")
        } else {
            Page::html("<p>page</p>")
        })
    });
    // Longer than `RobotsPolicy::fetch_timeout` (60 s).
    let site = paused_site(SiteConfig {
        pages: Some(pages),
        latency: Duration::from_secs(70),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings()).expect("start");
    let first = fetch(&h, &site, "/p/1");
    let second = async {
        tokio::time::sleep(Duration::from_secs(65)).await;
        fetch(&h, &site, "/p/2").await
    };
    let answers = futures_util::future::join(first, second).await;
    assert_eq!(answers, (Ok(200), Ok(200)));
    assert_eq!(count(&site, "/robots.txt"), 1, "{:?}", paths(&site));
}
