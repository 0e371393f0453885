//! Headers and identity, at the server: the configured headers and User-Agent on every
//! request, a fetch's own header winning, credentials staying behind a redirect to
//! another origin, and cookies kept per (exit, host) — a cookie one exit got is sent back
//! by that exit only, and to that host only.

mod support;

use std::collections::BTreeMap;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch};
use exitcrawl_testsite::{Page, Pages, RequestRecord, SiteConfig, TestSite};
use support::exits;

fn settings(n: u8) -> Settings {
    let mut s = Settings::with_exits(exits(n, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    s
}

fn header<'a>(r: &'a RequestRecord, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[actix_rt::test]
async fn configured_headers_and_user_agent_reach_the_site_and_a_fetch_own_header_wins() {
    let other = TestSite::start(SiteConfig::default());
    let away = other.url("/landed");
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| {
            Some(match pq {
                "/away" => Page::redirect(302, away.clone()),
                "/here" => Page::redirect(302, "/landed-here"),
                _ => Page::text("ok"),
            })
        })),
        ..SiteConfig::default()
    });
    let mut s = settings(1);
    s.crawler.user_agent = "identitybot/2.0 (+https://example.org/bot)".into();
    s.crawler.headers = headers(&[
        ("Accept-Language", "en, de;q=0.5"),
        ("Authorization", "Bearer s3cret"),
        ("X-Api-Key", "k-1"),
    ]);
    let h = Crawler::start(s).expect("start");
    h.fetch(Fetch::get(site.url("/plain")))
        .await
        .expect("answer");
    h.fetch(Fetch::get(site.url("/own")).header("accept-language", "fr"))
        .await
        .expect("answer");
    h.fetch(Fetch::get(site.url("/here")))
        .await
        .expect("answer");
    h.fetch(Fetch::get(site.url("/away")))
        .await
        .expect("answer");

    let log = site.requests();
    let at = |path: &str| log.iter().find(|r| r.path == path).expect(path).clone();
    for path in ["/plain", "/here", "/landed-here", "/away"] {
        let r = at(path);
        assert_eq!(
            header(&r, "accept-language"),
            Some("en, de;q=0.5"),
            "{path}"
        );
        assert_eq!(header(&r, "authorization"), Some("Bearer s3cret"), "{path}");
        assert_eq!(header(&r, "x-api-key"), Some("k-1"), "{path}");
        assert_eq!(
            header(&r, "user-agent"),
            Some("identitybot/2.0 (+https://example.org/bot)")
        );
    }
    let own = at("/own");
    let langs: Vec<_> = own
        .headers
        .iter()
        .filter(|(k, _)| k == "accept-language")
        .collect();
    assert_eq!(langs.len(), 1, "one Accept-Language: {langs:?}");
    assert_eq!(
        header(&own, "accept-language"),
        Some("fr"),
        "the fetch's own wins"
    );

    // Another origin: the configured credential stays behind, the rest goes along.
    let landed = other.requests();
    assert_eq!(landed.len(), 1);
    assert_eq!(header(&landed[0], "authorization"), None);
    assert_eq!(header(&landed[0], "accept-language"), Some("en, de;q=0.5"));
    assert_eq!(header(&landed[0], "x-api-key"), Some("k-1"));
}

/// A request carries what browsers and curl send, not what a client library adds: no
/// `Date` unless the fetch sets one, and no `Content-Length: 0` on a GET (RFC 9110 §6.6.1,
/// §8.6); a POST with an empty body keeps its `Content-Length: 0`.
#[actix_rt::test]
async fn a_request_carries_no_date_nor_empty_length_unless_its_method_or_fetch_asks() {
    let site = TestSite::start(SiteConfig::default());
    let h = Crawler::start(settings(1)).expect("start");
    for path in ["/a", "/b"] {
        h.fetch(Fetch::get(site.url(path))).await.expect("answer");
    }
    let dated = "Sun, 06 Nov 1994 08:49:37 GMT";
    h.fetch(Fetch::get(site.url("/dated")).header("date", dated))
        .await
        .expect("answer");
    let mut post = Fetch::get(site.url("/post"));
    post.method = exitcrawl_actors::Method::POST;
    post.body = Some(Default::default());
    h.fetch(post).await.expect("answer");
    let log = site.requests();
    assert_eq!(log.len(), 4);
    for r in &log {
        let want = (r.path == "/dated").then_some(dated);
        assert_eq!(header(r, "date"), want, "{}: {:?}", r.path, r.headers);
        let length = (r.path == "/post").then_some("0");
        assert_eq!(
            header(r, "content-length"),
            length,
            "{}: {:?}",
            r.path,
            r.headers
        );
    }
}

/// Every cookie a request carried is the one the site set for that request's own peer
/// (source address) and host.
fn assert_cookies_stay_home(log: &[RequestRecord]) -> usize {
    let mut carried = 0;
    for r in log {
        if let Some(c) = header(r, "cookie") {
            let host = header(r, "host").unwrap_or("");
            assert_eq!(c, format!("seen={}@{host}", r.peer), "{r:?}");
            carried += 1;
        }
    }
    carried
}

#[actix_rt::test]
async fn a_cookie_set_through_one_exit_is_sent_back_by_that_exit_only_and_to_its_host_only() {
    let site = TestSite::start(SiteConfig {
        set_cookie: true,
        ..SiteConfig::default()
    });
    let mut s = settings(2);
    s.crawler.cookies = true;
    let h = Crawler::start(s).expect("start");
    // localhost and 127.0.0.1 are different hosts to a cookie jar, though one server.
    let by_name = format!("http://localhost:{}/", site.port());
    for i in 0..3 {
        for exit in ["e2", "e3"] {
            h.fetch(Fetch::get(site.url(&format!("/p{i}"))).prefer(exit))
                .await
                .expect("answer");
            h.fetch(Fetch::get(format!("{by_name}n{i}")).prefer(exit))
                .await
                .expect("answer");
        }
    }
    let log = site.requests();
    assert_eq!(log.len(), 12);
    assert_eq!(
        assert_cookies_stay_home(&log),
        8,
        "all but each (exit, host)'s first"
    );
    for peer in ["127.0.0.2", "127.0.0.3"] {
        for host_is_name in [false, true] {
            let first = log
                .iter()
                .find(|r| {
                    r.peer.to_string() == peer
                        && header(r, "host").unwrap_or("").starts_with("localhost") == host_is_name
                })
                .expect("a request");
            assert_eq!(
                header(first, "cookie"),
                None,
                "the first has none: {first:?}"
            );
        }
    }
}

#[actix_rt::test]
async fn without_cookies_on_nothing_is_kept() {
    let site = TestSite::start(SiteConfig {
        set_cookie: true,
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(1)).expect("start");
    for i in 0..3 {
        h.fetch(Fetch::get(site.url(&format!("/p{i}"))))
            .await
            .expect("answer");
    }
    assert!(site
        .requests()
        .iter()
        .all(|r| header(r, "cookie").is_none()));
}

/// A fetch's own `Cookie` header stays behind past a redirect to another origin, and the
/// jar's cookies for the new host go in its place, as for any hop to that host.
#[actix_rt::test]
async fn past_a_redirect_to_another_origin_the_jars_cookies_replace_the_fetchs_own() {
    let port = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
    let p = std::sync::Arc::clone(&port);
    let site = TestSite::start(SiteConfig {
        set_cookie: true,
        pages: Some(Pages::new(move |_, pq: &str| {
            Some(if pq == "/go" {
                let to = format!(
                    "http://localhost:{}/landed",
                    p.load(std::sync::atomic::Ordering::SeqCst)
                );
                Page {
                    status: 302,
                    content_type: "text/plain",
                    body: "moved".into(),
                    location: Some(to),
                }
            } else {
                Page::html("<p>page</p>")
            })
        })),
        ..SiteConfig::default()
    });
    port.store(site.port(), std::sync::atomic::Ordering::SeqCst);
    let mut s = settings(1);
    s.crawler.cookies = true;
    let h = Crawler::start(s).expect("start");
    let localhost = format!("http://localhost:{}", site.port());
    h.fetch(Fetch::get(format!("{localhost}/first")))
        .await
        .expect("answer");
    let r = h
        .fetch(Fetch::get(site.url("/go")).header("Cookie", "mine=1"))
        .await
        .expect("answer");
    assert_eq!(r.status, 200);
    let log = site.requests();
    let go = log.iter().find(|r| r.path == "/go").expect("/go asked");
    assert_eq!(
        header(go, "cookie"),
        Some("mine=1"),
        "its own, at its origin"
    );
    let landed = log.iter().find(|r| r.path == "/landed").expect("the hop");
    assert_eq!(
        header(landed, "cookie").map(str::to_owned),
        Some(format!("seen=127.0.0.2@localhost:{}", site.port())),
        "the jar's, for the new host"
    );
}
