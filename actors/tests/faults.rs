//! Fault injection: the crawler against a misbehaving local site (the test site's fault
//! listener, see `exitcrawl_testsite::fault`), and against a site that starts refusing
//! one exit mid-crawl. Every assertion is about the replies or about what the *server*
//! saw (its request log, with arrival times). Loopback only; every wait is bounded.

mod support;

use support::{eventually, exits, ip};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchError, FetchErrorKind, FetchResponse};
use exitcrawl_testsite::{
    FailMode, Fault, FaultMix, RequestRecord, RetryHint, SiteConfig, TestSite,
};
use futures_util::future::join_all;

const MAX_RETRIES: u32 = 2;
const MAX_REDIRECTS: u32 = 3;
const BACKOFF_BASE: Duration = Duration::from_millis(100);
const TIMEOUT: Duration = Duration::from_millis(500);
const MAX_BODY: u64 = 64 * 1024;
/// Far more than the client may read: a reply that came back at all was cut off.
const BIG: u64 = 1 << 30;

type Reply = Result<FetchResponse, FetchError>;

/// Short timeouts so hangs are bounded; retries with a measurable backoff.
fn settings(exits: Vec<ExitSettings>) -> Settings {
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    // A hang or a reset is the fault under test here, not a sign of overload: keep them
    // from pausing the whole host (they still feed the limiter as failures).
    s.limiter.throttle_on_timeout = false;
    s.limiter.throttle_on_reset = false;
    s.crawler.concurrency = 300;
    s.crawler.timeout_ms = TIMEOUT.as_millis() as u64;
    s.crawler.connect_timeout_ms = 200;
    s.crawler.max_retries = MAX_RETRIES;
    s.crawler.retry_backoff_base_ms = BACKOFF_BASE.as_millis() as u64;
    s.crawler.retry_backoff_max_ms = 400;
    s.crawler.retry_budget = 1.0;
    s.crawler.max_body_bytes = MAX_BODY;
    s.crawler.max_redirects = MAX_REDIRECTS;
    s
}

/// Every URL's reply, each checked to be for its own URL; at most `limit` for all.
async fn crawl(h: &CrawlerHandle, urls: &[String], limit: Duration) -> Vec<Reply> {
    let all = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone()))));
    let replies = tokio::time::timeout(limit, all)
        .await
        .expect("the crawl finishes by itself");
    assert_eq!(replies.len(), urls.len());
    let mut seen = HashSet::new();
    for (r, u) in replies.iter().zip(urls) {
        let url = match r {
            Ok(resp) => &resp.url,
            Err(e) => &e.url,
        };
        assert_eq!(url, u, "a reply for another URL");
        assert!(seen.insert(url.clone()), "two replies for {url}");
    }
    replies
}

/// The server's log by path, each path's arrivals in order.
fn by_path(log: &[RequestRecord]) -> HashMap<String, Vec<Instant>> {
    let mut m: HashMap<String, Vec<Instant>> = HashMap::new();
    for r in log {
        m.entry(r.path.clone()).or_default().push(r.arrived);
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/", |i| &rest[i..])
}

/// The least time `retry` (1-based) waits: half the backoff cap (see `retry::Backoff`).
fn min_backoff(retry: usize) -> Duration {
    let cap = (BACKOFF_BASE * (1 << (retry - 1))).min(Duration::from_millis(400));
    cap / 2
}

#[actix_rt::test]
async fn a_mixed_crawl_of_faults_ends_in_one_clear_reply_per_url() {
    let mix = FaultMix {
        seed: 6,
        faults: vec![
            (Fault::Close, 40),
            (Fault::Hang, 30),
            (Fault::Status(500), 30),
            (Fault::Status(502), 30),
            (Fault::Status(503), 15),
            (Fault::TooMany(RetryHint::None), 15),
            (Fault::TooMany(RetryHint::Seconds(1)), 15),
            (Fault::TooMany(RetryHint::Date(1)), 15),
            (Fault::BigBody(BIG), 30),
            (
                Fault::Trickle {
                    bytes: 40,
                    every_ms: 50,
                },
                30,
            ),
            (Fault::Malformed, 30),
            (Fault::RedirectLoop, 30),
            (Fault::RedirectScheme, 30),
        ],
        per_request: false,
    };
    let site = TestSite::start(SiteConfig {
        body_size: 512,
        faults: Some(mix),
        ..SiteConfig::default()
    });
    let mut ex = exits(3, 64);
    for e in &mut ex {
        e.max_concurrent = 64;
    }
    let mut s = settings(ex);
    // The host that only throttles is given up after a second of nothing but throttles
    // (else its URLs would wait for it for the default ten minutes).
    s.crawler.give_up_after_ms = 1_000;
    let h = Crawler::start(s).expect("start");
    let port = site.fault_addr().port();
    // 429 and 503 pause their (exit, host) key: send them to another host name of the same
    // listener, so the pauses they ask for do not stall the rest of the mix. That host
    // answers nothing but throttles, and is given up.
    let urls: Vec<String> = (0..2000)
        .map(|i| {
            let path = format!("/m/{i}");
            let host = match site.fault_for(&path) {
                Some(Fault::TooMany(_) | Fault::Status(503)) => "localhost",
                _ => "127.0.0.1",
            };
            format!("http://{host}:{port}{path}")
        })
        .collect();
    let t0 = Instant::now();
    let replies = crawl(&h, &urls, Duration::from_secs(90)).await;
    let elapsed = t0.elapsed();
    let log = site.requests();
    let seen = by_path(&log);
    let refusals = h.metrics().retry_budget_refusals();

    let mut per_fault: BTreeMap<String, usize> = BTreeMap::new();
    for (r, u) in replies.iter().zip(&urls) {
        let path = path_of(u);
        let fault = site.fault_for(path);
        *per_fault
            .entry(fault.map_or("none".into(), |f| f.code()))
            .or_default() += 1;
        let arrivals = seen.get(path).map_or(&[][..], |v| &v[..]);
        let n = arrivals.len() as u32;
        let ctx = format!("{u} ({fault:?}): {r:?}, server saw {n}");
        // Throttles are not error attempts: a throttled URL waits for its host until the
        // host is given up, a second after it began refusing everything.
        let throttled = matches!(fault, Some(Fault::TooMany(_) | Fault::Status(503)));
        // Attempts never exceed 1 + max_retries (a redirect loop's hops are one attempt).
        let hops = if fault == Some(Fault::RedirectLoop) {
            1 + MAX_REDIRECTS
        } else {
            1
        };
        if throttled {
            // Fetches still queued when their host was given up were never sent.
            assert!(n <= 10, "{ctx}");
        } else {
            assert!(n >= 1 && n <= (1 + MAX_RETRIES) * hops, "{ctx}");
        }
        // Retried faults: exactly 1 + max_retries (the budget, 1.0 here, may only delay).
        let retried = matches!(
            fault,
            Some(Fault::Close | Fault::Hang | Fault::Status(_) | Fault::Trickle { .. })
        ) && !throttled;
        let expected = if retried { 1 + MAX_RETRIES } else { hops };
        if refusals == 0 && !throttled {
            // The client made exactly that many attempts. The server may have seen one
            // fewer: an attempt written to a pooled connection the fault listener had just
            // closed never arrives, and counts as a reset on the client's side.
            let attempts = match r {
                Ok(resp) => resp.attempts,
                Err(e) => e.attempts,
            };
            if retried {
                assert_eq!(attempts, expected, "{ctx}");
                assert!(n + 1 >= expected && n <= expected, "{ctx}");
            } else {
                assert_eq!(n, expected, "{ctx}");
            }
        }
        // Retries wait at least the backoff, and at least Retry-After when the site said.
        for (k, w) in arrivals.windows(2).enumerate() {
            let gap = w[1] - w[0];
            let floor = match fault {
                Some(Fault::TooMany(RetryHint::Seconds(s) | RetryHint::Date(s))) => {
                    Duration::from_secs(u64::from(s))
                }
                // The client's timeout runs from before the request reached the site
                // (connecting, writing, and on a loaded machine the wait to be
                // scheduled): allow up to 250 ms of that before the first arrival.
                Some(Fault::Hang) => TIMEOUT + min_backoff(k + 1) - Duration::from_millis(250),
                Some(Fault::RedirectLoop) => Duration::ZERO,
                _ => min_backoff(k + 1),
            };
            assert!(
                gap >= floor,
                "{ctx}: retry {} after {gap:?} < {floor:?}",
                k + 1
            );
        }
        match fault {
            None => {
                let resp = r.as_ref().expect(&ctx);
                assert_eq!((resp.status, resp.body.len()), (200, 512), "{ctx}");
            }
            _ if throttled => {
                let e = r.as_ref().expect_err(&ctx);
                assert_eq!(e.kind, FetchErrorKind::ThrottledOut, "{ctx}");
                assert!(e.message.contains("refused every request"), "{ctx}");
                // Every attempt answered with a throttle, but for one that may have gone
                // to a pooled connection the listener had just closed (see above).
                assert!(
                    e.throttled <= e.attempts && e.throttled + 1 >= e.attempts,
                    "{ctx}"
                );
            }
            Some(Fault::Status(s)) => {
                assert_eq!(r.as_ref().expect(&ctx).status, s, "{ctx}");
            }
            Some(f) => {
                let e = r.as_ref().expect_err(&ctx);
                let (kind, words) = match f {
                    Fault::Close => (FetchErrorKind::Reset, "closed or reset by the site"),
                    Fault::Hang => (FetchErrorKind::Timeout, "Timeout"),
                    Fault::BigBody(_) => (FetchErrorKind::BodyTooLarge, "larger than the limit"),
                    Fault::Trickle { .. } => (FetchErrorKind::Timeout, "timed out"),
                    Fault::Malformed => (FetchErrorKind::Malformed, "malformed HTTP response"),
                    Fault::RedirectLoop => (FetchErrorKind::TooManyRedirects, "too many redirects"),
                    Fault::RedirectScheme => (FetchErrorKind::Other, "unsupported scheme"),
                    Fault::ZstdBomb(_) => (FetchErrorKind::BodyTooLarge, "larger than the limit"),
                    Fault::Status(_) | Fault::TooMany(_) | Fault::Encoded(_) => unreachable!(),
                };
                assert_eq!(e.kind, kind, "{ctx}");
                assert!(e.message.contains(words), "{ctx}");
                assert!(e.attempts <= 1 + MAX_RETRIES, "{ctx}");
            }
        }
    }
    // A redirect to ftp:// was never followed (it would arrive as plain HTTP on /landed/).
    let landed: Vec<_> = log
        .iter()
        .filter(|r| r.path.starts_with("/landed"))
        .collect();
    assert!(
        landed.is_empty(),
        "followed a non-http redirect: {landed:?}"
    );
    // Over-limit bodies were cut off: the site wrote a few MiB at most per big body (socket
    // buffers), nowhere near the 1 GiB each announced.
    let big = per_fault
        .get(&Fault::BigBody(BIG).code())
        .copied()
        .unwrap_or(0) as u64;
    let sent = site.stats().fault_body_bytes;
    assert!(big > 0);
    assert!(
        sent < big * 3 * (32 << 20),
        "{sent} bytes for {big} big bodies"
    );
    // Every fault kind took part.
    assert_eq!(per_fault.len(), 14, "{per_fault:?}");
    eprintln!(
        "{} URLs, {} requests seen, {refusals} retries refused by the budget, {elapsed:?}: {per_fault:?}",
        urls.len(),
        log.len()
    );
}

async fn healthy(h: &CrawlerHandle, name: &str) -> bool {
    h.stats().await.iter().any(|s| s.name == name && s.healthy)
}

#[actix_rt::test]
async fn an_exit_refused_mid_crawl_is_ejected_and_comes_back_without_losing_a_url() {
    let site = TestSite::start(SiteConfig {
        fail_mode: FailMode::Close,
        latency: Duration::from_millis(5),
        body_size: 256,
        ..SiteConfig::default()
    });
    let mut s = settings(exits(3, 16));
    s.health.url = Some(site.url("/health"));
    s.health.interval_ms = 100;
    s.health.timeout_ms = 100;
    s.health.consecutive_failures = 1;
    s.health.base_ejection_ms = 200;
    s.health.max_ejection_ms = 400;
    let h = Crawler::start(s).expect("start");
    let e3 = ip("127.0.0.3");
    let urls: Vec<String> = (0..3000).map(|i| site.url(&format!("/x/{i}"))).collect();

    let driver = {
        let h = h.clone();
        let site = &site;
        async move {
            // Refuse e3 once the crawl is well under way...
            let started = eventually(Duration::from_secs(20), || async {
                site.stats().requests >= 500
            })
            .await;
            assert!(started, "the crawl did not start");
            site.set_fail_peer(e3, true);
            let ejected = eventually(Duration::from_secs(5), || {
                let h = h.clone();
                async move { !healthy(&h, "e3").await }
            })
            .await;
            // ...and accept it again once the others have carried a good part of it.
            let seen_at_ejection = site.stats().requests;
            let carried = eventually(Duration::from_secs(20), || async {
                site.stats().requests >= seen_at_ejection + 800
            })
            .await;
            site.set_fail_peer(e3, false);
            let from_e3 = site.stats().peer(e3).ok;
            let back = eventually(Duration::from_secs(5), || healthy(&h, "e3")).await;
            (ejected, carried, back, from_e3)
        }
    };
    let (replies, (ejected, carried, back, e3_ok_before_back)) =
        futures_util::future::join(crawl(&h, &urls, Duration::from_secs(60)), driver).await;
    assert!(ejected, "e3 was never ejected");
    assert!(carried, "the other exits did not carry the crawl");
    assert!(back, "e3 never came back");

    let mut errors = Vec::new();
    for (r, u) in replies.iter().zip(&urls) {
        match r {
            Ok(resp) => assert_eq!(resp.status, 200, "{u}"),
            Err(e) => errors.push(e.clone()),
        }
    }
    // A retry goes around the exit its failed attempt took, and two exits stay healthy
    // throughout: however many of e3's answers a fetch met before e3 was ejected, its
    // next attempt went elsewhere, so no URL is lost to the refusing exit.
    assert!(errors.is_empty(), "{} errors: {errors:?}", errors.len());
    let stats = site.stats();
    assert!(stats.peer(e3).closed > 0, "e3 was never refused: {stats:?}");
    // As the site saw it: each URL at most 1 + retries times, answered 200 once, and a URL
    // e3 failed came next through another exit.
    let log = site.requests();
    let mut by_url: HashMap<&str, Vec<&RequestRecord>> = HashMap::new();
    for r in &log {
        by_url.entry(r.path.as_str()).or_default().push(r);
    }
    for u in &urls {
        let mut tries = by_url.remove(path_of(u)).unwrap_or_default();
        let n = tries.len();
        assert!(n <= (1 + MAX_RETRIES) as usize, "{u} seen {n} times");
        tries.sort_by_key(|r| r.arrived);
        let ok = tries.iter().filter(|r| r.status == 200).count();
        assert_eq!(ok, 1, "{u}: the site answered 200 {ok} times");
        for pair in tries.windows(2) {
            let failed_on_e3 = pair[0].peer == e3 && pair[0].status != 200;
            assert!(
                !(failed_on_e3 && pair[1].peer == e3),
                "{u} was retried through e3, which had just failed it"
            );
        }
    }
    // e3 carried traffic again after it came back (if the crawl was not over by then).
    let e3_ok_after = stats.peer(e3).ok;
    eprintln!(
        "{} URLs, {} errors, e3 ok before/after coming back: {e3_ok_before_back}/{e3_ok_after}, e3 closed {}",
        urls.len(),
        errors.len(),
        stats.peer(e3).closed
    );
}
