//! Distributed mode: a pause stored in Redis outlives the changes stored after it, and a
//! crawler that meets its key takes it whatever the rate beside it; crawlers with a fixed
//! rate share their pauses (and nothing else); a pause a crawler took from the others
//! holds its host against being forgotten. A real `redis-server`; the real clock (Redis's
//! clock ends the pause, which no runtime can pause), with waits for events, never to see
//! whether something happens.

mod support;

use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, Backend, Scope, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchResponse};
use exitcrawl_redis::{Raised, RateMessage, Redis, RedisOptions, SharedRates};
use exitcrawl_testsite::{RequestRecord, SiteConfig, TestSite};
use support::{eventually, exits, ip, wall_clock_guard, RedisServer};

/// The pause a process stores with its cut.
const PAUSE: Duration = Duration::from_secs(60);

fn rates(redis: &RedisServer) -> SharedRates {
    SharedRates::new(Redis::connect(&redis.url(), RedisOptions::default()).expect("valid url"))
}

/// `left` is `PAUSE` less the few seconds a loaded machine may take since it was stored.
fn about_the_pause(left: Option<Duration>) -> bool {
    left.is_some_and(|d| d > PAUSE - Duration::from_secs(10) && d <= PAUSE)
}

#[actix_rt::test]
async fn a_pause_stored_is_kept_by_the_changes_stored_after_it() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let (a, b) = (rates(&redis), rates(&redis));
    let name = "*|paused.test";
    let cut = a.set(name, 50.0, Some(PAUSE)).await.expect("stored");
    assert!(about_the_pause(cut.pause_remaining()), "{cut:?}");
    // A peer's rise without a pause, and a change with a shorter one: both stored, the
    // pause carried on with them.
    let rise = match b.raise(name, 60.0, None, 50.0).await.expect("stored") {
        Raised::Stored(u) => u,
        Raised::Refused(u) => panic!("a rise from the stored rate is stored: {u:?}"),
    };
    assert_eq!(rise.pause_until_ms, cut.pause_until_ms, "published with it");
    let shorter = b.set(name, 40.0, Some(Duration::from_secs(1))).await;
    assert_eq!(shorter.expect("stored").pause_until_ms, cut.pause_until_ms);
    let stored = a.get(name).await.expect("read").expect("a stored rate");
    assert_eq!(stored.rps, 40.0);
    assert_eq!(stored.pause_until_ms, cut.pause_until_ms, "{stored:?}");
    // A pause over is not carried on.
    let other = "*|short.test";
    a.set(other, 5.0, Some(Duration::from_millis(1)))
        .await
        .expect("stored");
    let over = |u: &exitcrawl_redis::RateUpdate| u.pause_until_ms < u.server_now_ms;
    assert!(
        eventually(Duration::from_secs(5), || async {
            let u = a.get(other).await.expect("read").expect("stored");
            over(&u)
        })
        .await
    );
    let later = b.set(other, 6.0, None).await.expect("stored");
    assert_eq!(later.pause_until_ms, 0, "{later:?}");
}

/// The seconds of pause the crawler ordered, over every key
/// (`exitcrawl_limiter_pause_seconds_total`).
fn pause_seconds(h: &CrawlerHandle) -> f64 {
    h.metrics()
        .encode()
        .lines()
        .filter(|l| l.starts_with("exitcrawl_limiter_pause_seconds_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[actix_rt::test]
async fn a_crawler_meeting_a_key_takes_its_stored_pause_whatever_the_rate() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    // A cut the site's host with a pause; a peer then raised the rate, without one.
    let name = "*|127.0.0.1";
    let (a, b) = (rates(&redis), rates(&redis));
    a.set(name, 50.0, Some(PAUSE)).await.expect("stored");
    b.raise(name, 60.0, None, 50.0).await.expect("stored");
    // C meets the host at a start below the stored rate, which it does not take.
    let mut s = Settings::with_exits(exits(1, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::Aimd;
    s.limiter.scope = Scope::Auto;
    s.limiter.backend = Backend::Redis;
    s.limiter.initial_rps = 5.0;
    s.redis.url = Some(redis.url());
    let h = Crawler::start(s).expect("start");
    let r = h
        .fetch(Fetch::get(site.url("/p/0")))
        .await
        .expect("fetched");
    assert_eq!(r.status, 200);
    // Its first answer has it read the key: the host pauses until about the stored end.
    let paused = eventually(Duration::from_secs(10), || async {
        pause_seconds(&h) > 0.0
    })
    .await;
    let secs = pause_seconds(&h);
    let limits = h.limits().await;
    h.shutdown(Duration::ZERO).await;
    assert!(paused, "no pause taken: {limits:?}");
    assert!(
        about_the_pause(Some(Duration::from_secs_f64(secs))),
        "paused {secs} s"
    );
    let rps = limits
        .iter()
        .find(|l| l.host == "127.0.0.1")
        .map(|l| l.lanes[0].rps);
    assert_eq!(rps, Some(5.0), "the stored rate, above its own, not taken");
}

#[actix_rt::test]
async fn a_pause_alone_keeps_the_stored_rate_and_is_published_without_one() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let (a, b) = (rates(&redis), rates(&redis));
    let mut sub = b.subscribe().await.expect("subscribed");
    let name = "*|alone.test";
    // Nothing stored yet: the pause is stored without a rate.
    let alone = a.pause(name, PAUSE).await.expect("stored");
    assert_eq!(alone.rate(), None, "{alone:?}");
    assert!(about_the_pause(alone.pause_remaining()), "{alone:?}");
    let got = tokio::time::timeout(Duration::from_secs(5), sub.recv()).await;
    match got.expect("published").expect("subscribed") {
        RateMessage::Update(u) => {
            assert_eq!(u.rate(), None, "{u:?}");
            assert_eq!(u.pause_until_ms, alone.pause_until_ms);
        }
        m => panic!("not an update: {m:?}"),
    }
    let stored = b.get(name).await.expect("read").expect("stored");
    assert_eq!(
        (stored.rate(), stored.pause_until_ms),
        (None, alone.pause_until_ms)
    );
    // A rise over no rate is stored, carrying the pause on.
    match b.raise(name, 60.0, None, 60.0).await.expect("stored") {
        Raised::Stored(u) => assert_eq!(u.pause_until_ms, alone.pause_until_ms),
        Raised::Refused(u) => panic!("no rate refuses no rise: {u:?}"),
    }
    // A shorter pause alone keeps the stored rate and the longer pause.
    a.pause(name, Duration::from_secs(1)).await.expect("stored");
    let stored = b.get(name).await.expect("read").expect("stored");
    assert_eq!(
        (stored.rate(), stored.pause_until_ms),
        (Some(60.0), alone.pause_until_ms)
    );
}

/// A crawler of one exit on `redis`'s shared budget, with robots.txt off.
fn crawler(redis: &RedisServer, tune: impl FnOnce(&mut Settings)) -> CrawlerHandle {
    let mut s = Settings::with_exits(exits(1, 8));
    s.crawl.robots = false;
    s.limiter.backend = Backend::Redis;
    s.redis.url = Some(redis.url());
    tune(&mut s);
    Crawler::start(s).expect("start")
}

/// `url` fetched by `h`, within `limit`.
async fn fetched(h: &CrawlerHandle, fetch: Fetch, limit: Duration) -> FetchResponse {
    let r = tokio::time::timeout(limit, h.fetch(fetch)).await;
    r.expect("answered in time").expect("fetched")
}

/// When the site's request for `path` arrived.
fn arrival(log: &[RequestRecord], path: &str) -> Instant {
    let r = log.iter().find(|r| r.path == path);
    r.unwrap_or_else(|| panic!("{path} not requested")).arrived
}

/// The `Retry-After` the site sends crawler A, and the path that gets it.
const RETRY_AFTER: Duration = Duration::from_secs(6);
const REFUSED: &str = "/fault/429s6/a";

/// Two crawlers of a fixed algorithm (`gcra`: `none` has no budget to share through
/// Redis, the configuration refuses it) sharing `redis`.
fn two_fixed(redis: &RedisServer) -> (CrawlerHandle, CrawlerHandle) {
    let fixed = |s: &mut Settings| s.limiter.algorithm = Algorithm::Gcra;
    (crawler(redis, fixed), crawler(redis, fixed))
}

/// A is refused with [`RETRY_AFTER`] (its fetch's answer, no wait for the host), and B
/// hears of the pause: B's pause seconds then.
async fn a_refused_b_told(a: &CrawlerHandle, b: &CrawlerHandle, site: &TestSite) -> f64 {
    let quick = Duration::from_secs(10);
    let r = Fetch::get(site.fault_url(REFUSED)).throttle_waits(0);
    assert_eq!(fetched(a, r, quick).await.status, 429);
    let told = eventually(quick, || async { pause_seconds(b) > 0.0 }).await;
    assert!(told, "B took no pause from A");
    pause_seconds(b)
}

/// B's request for `path` reached the site once A's pause was over.
fn sent_after_the_pause(site: &TestSite, path: &str) {
    let log = site.requests();
    let waited = arrival(&log, path) - arrival(&log, REFUSED);
    // The Retry-After is read after the 429 left the site, and Redis keeps whole ms.
    let slack = Duration::from_millis(50);
    assert!(
        waited + slack >= RETRY_AFTER,
        "B sent {path} {waited:?} after A's 429"
    );
}

#[actix_rt::test]
async fn with_a_fixed_rate_a_pause_one_crawler_reads_holds_the_others() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    let (a, b) = two_fixed(&redis);
    // B meets the host: the host's pacing is where a pause told it holds.
    let quick = Duration::from_secs(10);
    let first = fetched(&b, Fetch::get(site.fault_url("/b/0")), quick).await;
    assert_eq!(first.status, 200);
    let paused = a_refused_b_told(&a, &b, &site).await;
    // B's next fetch waits the pause out: its request reaches the site once it ends.
    let late = RETRY_AFTER + Duration::from_secs(30);
    let next = fetched(&b, Fetch::get(site.fault_url("/b/1")), late).await;
    assert_eq!(next.status, 200);
    let limits = b.limits().await;
    a.shutdown(Duration::ZERO).await;
    b.shutdown(Duration::ZERO).await;
    sent_after_the_pause(&site, "/b/1");
    assert!(
        paused > (RETRY_AFTER - Duration::from_secs(3)).as_secs_f64()
            && paused <= RETRY_AFTER.as_secs_f64(),
        "B paused {paused} s"
    );
    // A fixed rate takes no rate, and makes no controller for a pause.
    assert!(limits.is_empty(), "{limits:?}");
}

/// A pause from the fleet holds a host this crawler has not met yet: its first request to
/// the host waits for the pause's end too.
#[actix_rt::test]
async fn a_pause_from_the_fleet_holds_a_host_not_met_yet() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    let (a, b) = two_fixed(&redis);
    a_refused_b_told(&a, &b, &site).await;
    let late = RETRY_AFTER + Duration::from_secs(30);
    let first = fetched(&b, Fetch::get(site.fault_url("/b/0")), late).await;
    assert_eq!(first.status, 200);
    a.shutdown(Duration::ZERO).await;
    b.shutdown(Duration::ZERO).await;
    sent_after_the_pause(&site, "/b/0");
}

#[actix_rt::test]
async fn a_pause_taken_from_the_fleet_keeps_its_host_from_being_forgotten() {
    let _serial = wall_clock_guard();
    let pause = Duration::from_secs(10);
    let redis = RedisServer::start();
    let paused_site = TestSite::start(SiteConfig::default());
    let other_site = TestSite::start_at(SiteConfig::default(), ip("127.0.0.9"));
    let h = crawler(&redis, |s| {
        s.limiter.algorithm = Algorithm::Aimd;
        s.limiter.scope = Scope::Auto;
        s.limiter.forget_idle_ms = 1_000;
        // What validation asks: no pause of its own outlasts the silence.
        s.crawler.max_retry_after_ms = 1_000;
        s.crawler.retry_backoff_max_ms = 1_000;
    });
    let quick = Duration::from_secs(10);
    // Both hosts heard from, the paused one first: when the other is forgotten, the
    // paused one has been quiet longer.
    let r = fetched(&h, Fetch::get(paused_site.url("/p/0")), quick).await;
    assert_eq!(r.status, 200);
    let r = fetched(&h, Fetch::get(other_site.url("/p/0")), quick).await;
    assert_eq!(r.status, 200);
    // Another process pauses the host (a pause longer than this crawler's own could be).
    let stored_at = Instant::now();
    let stored = rates(&redis)
        .set("*|127.0.0.1", 5.0, Some(pause))
        .await
        .expect("stored");
    let ends = stored_at + stored.pause_remaining().expect("a pause");
    let told = eventually(quick, || async { pause_seconds(&h) > 0.0 }).await;
    assert!(told, "the pause was not taken");
    let known =
        |limits: &[exitcrawl_actors::HostLimits], host: &str| limits.iter().any(|l| l.host == host);
    let other_gone = eventually(quick, || async { !known(&h.limits().await, "127.0.0.9") }).await;
    assert!(other_gone, "the quiet host is not forgotten");
    let limits = h.limits().await;
    // Its next fetch waits the pause out.
    let r = fetched(&h, Fetch::get(paused_site.url("/p/1")), pause + quick).await;
    assert_eq!(r.status, 200);
    h.shutdown(Duration::ZERO).await;
    assert!(
        known(&limits, "127.0.0.1"),
        "the paused host, quieter still, is forgotten with its pause: {limits:?}"
    );
    let sent = arrival(&paused_site.requests(), "/p/1");
    assert!(
        sent >= ends,
        "sent {:?} before the pause ended",
        ends.saturating_duration_since(sent)
    );
}
