//! Redirects, followed by the exit itself: the final URL is reported, 303 turns a POST
//! into a GET while 307 keeps it, and credentials do not follow a redirect to another
//! origin. What the servers saw is what is asserted.

mod support;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch, FetchErrorKind};
use exitcrawl_testsite::{FailMode, Page, Pages, RequestRecord, SiteConfig, TestSite};
use futures_util::future::join_all;
use support::{exits, paused_site, timeouts_for_paused_time};

fn settings() -> Settings {
    let mut s = Settings::with_exits(exits(1, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    s
}

/// A site whose pages redirect as their path says; `other` is where `/away` points.
fn site(other: Option<String>) -> TestSite {
    TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| {
            Some(match pq {
                "/a" => Page::redirect(302, "dir/b"),
                "/dir/b" => Page::redirect(301, "c?x=1"),
                "/post303" => Page::redirect(303, "/landed303"),
                "/post307" => Page::redirect(307, "/landed307"),
                "/away" => Page::redirect(302, other.clone().unwrap_or_default()),
                "/ftp" => Page::redirect(302, "ftp://127.0.0.1:21/x"),
                _ => Page::text(format!("here: {pq}")),
            })
        })),
        ..SiteConfig::default()
    })
}

fn header<'a>(r: &'a RequestRecord, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[actix_rt::test]
async fn the_final_url_is_reported_after_relative_redirects() {
    let site = site(None);
    let h = Crawler::start(settings()).expect("start");
    let r = h.fetch(Fetch::get(site.url("/a"))).await.expect("answer");
    assert_eq!(r.status, 200);
    assert_eq!(r.url, site.url("/a"), "the URL as requested");
    assert_eq!(
        r.final_url.as_deref(),
        Some(site.url("/dir/c?x=1").as_str())
    );
    assert_eq!(r.attempts, 1, "hops are one attempt");
    let paths: Vec<_> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/a", "/dir/b", "/dir/c"]);

    let direct = h
        .fetch(Fetch::get(site.url("/plain")))
        .await
        .expect("answer");
    assert_eq!(direct.final_url, None, "no redirect, no final URL");
}

#[actix_rt::test]
async fn see_other_turns_a_post_into_a_get_and_307_keeps_it() {
    let site = site(None);
    let h = Crawler::start(settings()).expect("start");
    for path in ["/post303", "/post307"] {
        let mut f = Fetch::get(site.url(path));
        f.method = awc::http::Method::POST;
        f.body = Some("payload".into());
        let r = h.fetch(f).await.expect("answer");
        assert_eq!(r.status, 200, "{path}");
    }
    let log = site.requests();
    // The body's length as sent: awc may send `content-length: 0` for no body.
    let body_len = |r: &RequestRecord| header(r, "content-length").unwrap_or("0").to_owned();
    let seen: Vec<_> = log
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), body_len(r)))
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", "/post303", "7".to_owned()),
            ("GET", "/landed303", "0".to_owned()),
            ("POST", "/post307", "7".to_owned()),
            ("POST", "/landed307", "7".to_owned()),
        ]
    );
}

#[actix_rt::test]
async fn credentials_stay_behind_on_a_redirect_to_another_origin() {
    let other = site(None);
    let first = site(Some(other.url("/landed")));
    let h = Crawler::start(settings()).expect("start");
    let f = Fetch::get(first.url("/away"))
        .header("Authorization", "Bearer secret")
        .header("Cookie", "session=1")
        .header("X-Trace", "kept");
    let r = h.fetch(f).await.expect("answer");
    assert_eq!(r.final_url.as_deref(), Some(other.url("/landed").as_str()));
    let at_first = &first.requests()[0];
    assert_eq!(header(at_first, "authorization"), Some("Bearer secret"));
    let at_other = &other.requests()[0];
    assert_eq!(header(at_other, "authorization"), None);
    assert_eq!(header(at_other, "cookie"), None);
    assert_eq!(header(at_other, "x-trace"), Some("kept"));
}

#[actix_rt::test]
async fn a_redirect_to_another_scheme_or_past_the_limit_is_an_error() {
    let site = site(None);
    let mut s = settings();
    s.crawler.max_redirects = 1;
    let h = Crawler::start(s).expect("start");
    let e = h.fetch(Fetch::get(site.url("/ftp"))).await.unwrap_err();
    assert_eq!(e.kind, FetchErrorKind::Other);
    assert!(e.message.contains("unsupported scheme"), "{}", e.message);
    let e = h.fetch(Fetch::get(site.url("/a"))).await.unwrap_err();
    assert_eq!(e.kind, FetchErrorKind::TooManyRedirects);
    assert!(e.message.contains("more than 1"), "{}", e.message);
    let paths: Vec<_> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        ["/ftp", "/a", "/dir/b"],
        "nothing past the limit was sent"
    );
}

#[actix_rt::test]
async fn a_redirect_whose_body_never_comes_does_not_hold_the_fetch() {
    // A raw site: `/stall` answers a 302 that announces 100 bytes of body and sends none,
    // the socket kept open; `/x` answers 200. The redirect's body is not waited for
    // beyond a moment: the fetch goes on to `/x` rather than hang with its exit's slot.
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for conn in listener.incoming().take(4) {
            let Ok(mut conn) = conn else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match conn.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            if String::from_utf8_lossy(&head).starts_with("GET /stall ") {
                let _ = conn.write_all(
                    b"HTTP/1.1 302 Found\r\nlocation: /x\r\ncontent-length: 100\r\n\r\n",
                );
                open.push(conn);
            } else {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            }
        }
    });
    let mut s = settings();
    s.crawler.timeout_ms = 60_000;
    let h = Crawler::start(s).expect("start");
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        h.fetch(Fetch::get(format!("http://{addr}/stall"))),
    )
    .await
    .expect("the fetch ends before the request's own timeout")
    .expect("answered");
    assert_eq!(r.status, 200);
    assert_eq!(r.final_url.as_deref(), Some(&*format!("http://{addr}/x")));
    h.shutdown(std::time::Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn the_timeout_bounds_the_whole_request_redirects_included() {
    // Each answer takes 600 ms; the request may take 1 s in all. The first redirect's
    // head comes in time, the second hop cannot: the fetch times out (a timeout per hop
    // would let a chain of slow redirects run as long as it liked).
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(|_, pq: &str| {
            Some(match pq {
                "/a" => Page::redirect(302, "/b"),
                "/b" => Page::redirect(302, "/c"),
                _ => Page::text("here"),
            })
        })),
        latency: std::time::Duration::from_millis(600),
        ..SiteConfig::default()
    });
    let mut s = settings();
    s.crawler.timeout_ms = 1000;
    s.crawler.connect_timeout_ms = 1000;
    let h = Crawler::start(s).expect("start");
    let e = h
        .fetch(Fetch::get(site.url("/a")))
        .await
        .expect_err("the chain outlasts the request's timeout");
    assert_eq!(e.kind, FetchErrorKind::Timeout, "{e}");
    let asked: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert!(!asked.iter().any(|p| p == "/c"), "{asked:?}");
    h.shutdown(std::time::Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn credentials_go_on_within_one_origin_however_its_host_is_written() {
    // `LOCALHOST` as the caller wrote it, `localhost` as the redirect's URL has it: one
    // origin, so the credentials go on with the redirect.
    let s = site(None);
    let h = Crawler::start(settings()).expect("start");
    let url = s.url("/a").replace("127.0.0.1", "LOCALHOST");
    let f = Fetch::get(url).header("Authorization", "Bearer secret");
    let r = h.fetch(f).await.expect("answer");
    assert_eq!(r.status, 200);
    let asked = s.requests();
    assert_eq!(asked.len(), 3, "/a, /dir/b, /dir/c");
    for r in &asked {
        assert_eq!(
            header(r, "authorization"),
            Some("Bearer secret"),
            "{}",
            r.path
        );
    }
}

/// A redirect followed by the way in (robots.txt on, as the handle's default) goes
/// through the exit that read it, as one client's session; but when that exit's address
/// is refused where it leads, the hop's later attempts go through another exit, as any
/// fetch's do: an exit the site refuses loses no URL. `mode`: how the site refuses it.
async fn a_hop_refused_through_its_exit(mode: FailMode) {
    // On paused time: the throttles slow the host's pacing to seconds between hops.
    let to = paused_site(SiteConfig {
        pages: Some(Pages::new(|_, pq: &str| {
            pq.starts_with("/x")
                .then(|| Page::text(format!("here: {pq}")))
        })),
        fail_mode: mode,
        ..SiteConfig::default()
    });
    let refused: std::net::IpAddr = "127.0.0.2".parse().expect("ip");
    to.set_fail_peer(refused, true);
    let base = to.url("/x");
    let from = TestSite::start_on_runtime_at(
        SiteConfig {
            pages: Some(Pages::new(move |_, pq: &str| {
                let i = pq.strip_prefix("/r").filter(|i| i.parse::<u32>().is_ok())?;
                Some(Page::redirect(302, format!("{base}{i}")))
            })),
            ..SiteConfig::default()
        },
        "127.0.0.6".parse().expect("ip"),
    );
    // The default limiter: a throttled fetch waits for its host's pacing, which learns
    // that one exit's address is refused.
    let mut s = Settings::with_exits(exits(2, 8));
    s.crawler.max_retries = 2;
    timeouts_for_paused_time(&mut s);
    // A hop kept on the refused exit ends `throttled_out` after this, not ten minutes.
    s.crawler.give_up_after_ms = 20_000;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<String> = (0..6).map(|i| from.url(&format!("/r{i}"))).collect();
    let answers = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.as_str())))).await;
    let read_by_refused = from
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/r") && r.peer == refused)
        .count();
    assert!(
        read_by_refused > 0,
        "no redirect was read through 127.0.0.2"
    );
    for (u, a) in urls.iter().zip(answers) {
        let r = a.unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(r.status, 200, "{u}");
    }
    let served: Vec<_> = to
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/x") && r.status == 200)
        .collect();
    assert_eq!(served.len(), 6, "each hop served once");
    assert!(served.iter().all(|r| r.peer != refused));
    h.shutdown(std::time::Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn a_redirect_hop_whose_connection_is_refused_through_its_exit_is_retried_through_another() {
    a_hop_refused_through_its_exit(FailMode::Close).await;
}

#[actix_rt::test]
async fn a_redirect_hop_throttled_through_its_exit_waits_for_any_exit() {
    a_hop_refused_through_its_exit(FailMode::Status503).await;
}
