//! A host nothing has been heard from for `limiter.forget_idle_ms` is forgotten (its
//! controllers and pacing freed), and comes back at the rate a throttle taught it, not at
//! the crawl's start rate; a host no exit can take, never heard from, is forgotten too. On paused time, the site on the test's runtime, the server's
//! arrivals judged.

mod support;

use std::time::Duration;

use exitcrawl::config::Settings;
use exitcrawl_actors::{Crawler, CrawlerHandle, ExitStats, Fetch, FetchErrorKind};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};
use support::{exits, paused_site, timeouts_for_paused_time};

const FORGET_AFTER: Duration = Duration::from_secs(60);

async fn fetch_all(h: &CrawlerHandle, site: &TestSite, from: usize, n: usize) {
    let fetches = (from..from + n).map(|i| h.fetch(Fetch::get(site.url(&format!("/p/{i}")))));
    for r in futures_util::future::join_all(fetches).await {
        assert_eq!(r.expect("fetched").status, 200);
    }
}

#[actix_rt::test]
async fn a_quiet_host_is_forgotten_and_comes_back_at_the_rate_a_throttle_taught_it() {
    // 1 req/s with a burst of 2 and `Retry-After: 1`: met at the start rate (5 req/s), it
    // throttles while it is learned.
    let site = paused_site(SiteConfig {
        limit: Limit::Global(Rate::per_second(1, 2)),
        retry_after: RetryAfter::Fixed(1),
        latency: Duration::from_millis(40),
        ..SiteConfig::default()
    });
    let mut s = Settings::with_exits(exits(1, 16));
    s.crawl.robots = false;
    s.crawler.max_retries = 50;
    s.limiter.forget_idle_ms = FORGET_AFTER.as_millis() as u64;
    // What validation asks: no pause may outlast the silence that forgets a host.
    s.crawler.max_retry_after_ms = s.limiter.forget_idle_ms;
    s.metrics.host_labels = 10;
    timeouts_for_paused_time(&mut s);
    let h = Crawler::start(s).expect("start");

    fetch_all(&h, &site, 0, 20).await;
    let first = site.requests();
    assert!(
        first.iter().any(|r| r.status == 429),
        "the host throttled while it was learned"
    );
    assert_eq!(h.limits().await.len(), 1, "the host is known");
    let series = |h: &CrawlerHandle| {
        h.metrics()
            .encode()
            .lines()
            .filter(|l| {
                l.starts_with("exitcrawl_limiter_rate{")
                    || l.starts_with("exitcrawl_limiter_scope{")
            })
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert!(!series(&h).is_empty(), "the host's rate is exported");

    tokio::time::sleep(FORGET_AFTER * 2).await;
    assert!(
        h.limits().await.is_empty(),
        "quiet for twice forget_idle_ms: forgotten"
    );
    assert_eq!(series(&h), Vec::<String>::new(), "and so are its series");

    fetch_all(&h, &site, 20, 6).await;
    let mut again: Vec<_> = site.requests().split_off(first.len());
    again.sort_by_key(|r| r.arrived);
    // Back at the rate it was taught: its first pages a second apart, none refused (slow
    // start goes on from there, and finds its limit again). Started at 5 req/s instead,
    // they would go 0.2 s apart and the third would be refused.
    let shown: Vec<_> = again.iter().map(|r| (r.status, r.arrived)).collect();
    assert!(again[..3].iter().all(|r| r.status == 200), "{shown:?}");
    let gap = again[1].arrived - again[0].arrived;
    assert!(
        gap >= Duration::from_millis(800),
        "{gap:?} apart: {shown:?}"
    );
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn a_host_no_exit_can_take_is_forgotten_as_a_quiet_one() {
    tokio::time::pause();
    // One IPv4 exit and an IPv6 host: every fetch ends in the scheduler, and the limiter
    // never hears an answer from the host, which the scheduler paces all the same.
    let mut s = Settings::with_exits(exits(1, 16));
    s.crawl.robots = false;
    s.limiter.forget_idle_ms = FORGET_AFTER.as_millis() as u64;
    s.crawler.max_retry_after_ms = s.limiter.forget_idle_ms;
    timeouts_for_paused_time(&mut s);
    let h = Crawler::start(s).expect("start");
    let err = h
        .fetch(Fetch::get("http://[::1]:1/"))
        .await
        .expect_err("no exit of the host's family");
    assert_eq!(err.kind, FetchErrorKind::AddressFamily, "{err}");
    let paced = |stats: Vec<ExitStats>| {
        stats
            .into_iter()
            .flat_map(|e| e.intervals)
            .map(|(host, _)| host)
            .collect::<Vec<_>>()
    };
    assert_eq!(paced(h.stats().await), ["[::1]"], "the host is paced");

    tokio::time::sleep(FORGET_AFTER * 2).await;
    assert_eq!(
        paced(h.stats().await),
        Vec::<String>::new(),
        "quiet for twice forget_idle_ms: its pacing is forgotten"
    );
    h.shutdown(Duration::from_secs(1)).await;
}
