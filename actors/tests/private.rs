//! The private-address rule, at the servers. Tests reach loopback only, so a test-only
//! setting makes 127.0.0.9 the one "private" address and the rest of loopback "public":
//! a site on 127.0.0.1 plays the public web, one on 127.0.0.9 the private network.

mod support;

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use exitcrawl::address::AddressRule;
use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::follow::{crawl, FollowOptions};
use exitcrawl_actors::{Crawler, Fetch, FetchErrorKind};
use exitcrawl_net::{build_client_reaching, ClientOptions, DnsCache, Reach};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use support::{exits, ip};

const PRIVATE: &str = "127.0.0.9";

fn settings(allow_private: bool) -> Settings {
    let mut s = Settings::with_exits(exits(1, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    s.crawl.allow_private = allow_private;
    s.crawl.private_only_for_tests = Some(vec![ip(PRIVATE)]);
    s.crawl.robots = false;
    s
}

/// The "private" site: pages that link and redirect within it.
fn private_site() -> TestSite {
    TestSite::start_at(
        SiteConfig {
            pages: Some(Pages::new(|_, pq: &str| {
                Some(match pq {
                    "/hop" => Page::redirect(302, "/inside"),
                    "/" => Page::html("<a href='/inside'>in</a> <a href='/secret'>s</a>"),
                    _ => Page::text(format!("private {pq}")),
                })
            })),
            ..SiteConfig::default()
        },
        ip(PRIVATE),
    )
}

/// The "public" site: it redirects and links to the private one.
fn public_site(private_base: String) -> TestSite {
    TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_, pq: &str| {
            Some(match pq {
                "/to-private" => Page::redirect(302, format!("{private_base}/secret")),
                "/" => Page::html(format!(
                    "<a href='/public-page'>p</a> <a href='{private_base}/secret'>metadata</a>"
                )),
                _ => Page::text(format!("public {pq}")),
            })
        })),
        ..SiteConfig::default()
    })
}

#[actix_rt::test]
async fn a_redirect_from_public_to_private_is_refused_and_never_reaches_it() {
    let private = private_site();
    let public = public_site(private.base_url());
    let h = Crawler::start(settings(false)).expect("start");

    let e = h
        .fetch(Fetch::get(public.url("/to-private")))
        .await
        .expect_err("refused");
    assert_eq!(e.kind, FetchErrorKind::PrivateAddress, "{e}");
    assert_eq!(e.record_error(), "private address refused");
    assert!(e.message.contains(PRIVATE), "{}", e.message);
    assert_eq!(e.attempts, 1, "not retried");

    let r = h
        .fetch(Fetch::get(public.url("/page")))
        .await
        .expect("public");
    assert_eq!(r.peer_private, Some(false));
    let e = h
        .fetch(Fetch::get(private.url("/x")).found_on_public(true))
        .await
        .expect_err("a link from a public page");
    assert_eq!(e.kind, FetchErrorKind::PrivateAddress);
    assert!(private.requests().is_empty(), "{:?}", private.requests());

    // A URL the user gives is trusted, and redirects within the private site are followed.
    let r = h
        .fetch(Fetch::get(private.url("/hop")))
        .await
        .expect("trusted");
    assert_eq!(r.status, 200);
    assert_eq!(r.peer_private, Some(true));
    let paths: Vec<_> = private.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/hop", "/inside"]);
}

#[actix_rt::test]
async fn allow_private_lifts_the_rule() {
    let private = private_site();
    let public = public_site(private.base_url());
    let h = Crawler::start(settings(true)).expect("start");
    let r = h
        .fetch(Fetch::get(public.url("/to-private")))
        .await
        .expect("followed");
    assert_eq!(r.status, 200);
    assert_eq!(r.peer_private, None, "nothing checked");
    assert_eq!(private.requests().len(), 1);
}

#[actix_rt::test]
async fn a_crawl_refuses_a_public_page_link_into_the_private_network_but_follows_its_own() {
    let private = private_site();
    let public = public_site(private.base_url());
    let mut s = settings(false);
    s.crawl.follow = true;
    s.crawl.scope = exitcrawl::config::CrawlScope::Any;
    let h = Crawler::start(s).expect("start");
    let opts = FollowOptions::from_settings(h.settings());

    let mut records = Vec::new();
    crawl(&h, vec![public.url("/")], opts.clone(), |r, _| {
        records.push(r)
    })
    .await
    .expect("crawl");
    let secret = format!("{}/secret", private.base_url());
    let refused = records.iter().find(|r| r.url == secret).expect("a record");
    assert_eq!(refused.error.as_deref(), Some("private address refused"));
    assert_eq!(refused.status, None);
    assert!(records
        .iter()
        .any(|r| r.url == public.url("/public-page") && r.status == Some(200)));
    assert!(private.requests().is_empty(), "{:?}", private.requests());

    // Seeded on the private host, the crawl follows its own links there.
    let mut records = Vec::new();
    crawl(&h, vec![private.url("/")], opts.clone(), |r, _| {
        records.push(r)
    })
    .await
    .expect("crawl");
    let ok: Vec<_> = records
        .iter()
        .filter(|r| r.status == Some(200))
        .map(|r| r.url.clone())
        .collect();
    assert_eq!(ok.len(), 3, "{records:?}");
    let mut paths: Vec<_> = private.requests().into_iter().map(|r| r.path).collect();
    paths.sort();
    assert_eq!(paths, ["/", "/inside", "/secret"]);
}

/// DNS rebinding: a name that resolved to a public address once and to a private one
/// the next time is refused at connect time, whatever it was when the link was found.
#[actix_rt::test]
async fn a_name_that_rebinds_to_a_private_address_is_refused_at_connect_time() {
    let private = private_site();
    let public = TestSite::start(SiteConfig::default());
    let calls = Arc::new(AtomicU32::new(0));
    let c = Arc::clone(&calls);
    let dns = DnsCache::with_resolver(Duration::ZERO, move |_host: &str| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        let to: IpAddr = if n == 0 { ip("127.0.0.1") } else { ip(PRIVATE) };
        async move { Ok::<_, io::Error>(vec![to]) }
    });
    let rule = AddressRule::new(false).with_private_only(&[ip(PRIVATE)]);
    let mut opts = ClientOptions::new(ip("127.0.0.2"));
    opts.keep_alive = Duration::ZERO;
    let client = build_client_reaching(&opts, dns, Reach::Public(rule));
    // Both sites on the same port number cannot be had; the name carries each one's port.
    let first = client
        .get(format!("http://rebind.test:{}/a", public.port()))
        .send()
        .await
        .expect("public at first");
    assert_eq!(first.status(), 200);
    let second = client
        .get(format!("http://rebind.test:{}/b", private.port()))
        .send()
        .await;
    let err = second.expect_err("refused once it resolves to a private address");
    let refused = exitcrawl_net::refusal(&err).expect("the rule's refusal");
    assert!(
        refused.to_string().contains("private address refused"),
        "{refused}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(private.requests().is_empty());
}
