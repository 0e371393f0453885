//! Distributed mode: a pause is stored and published whatever becomes of the rate beside
//! it, it outlives the changes stored after it and its key outlives it, and a crawler
//! that meets its key takes it whatever the rate beside it; crawlers with a fixed rate
//! share their pauses (and nothing else), read those in force when they start; a pause a
//! crawler took from the others holds its host against being forgotten. A real `redis-server`; the real clock (Redis's
//! clock ends the pause, which no runtime can pause), with waits for events, never to see
//! whether something happens.

mod support;

use std::time::{Duration, Instant};

use exitcrawl::aimd::fleet::{Publish, SharedKey};
use exitcrawl::config::{Algorithm, Backend, Scope, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchResponse};
use exitcrawl_redis::{Raised, RateMessage, RateUpdate, Redis, RedisOptions, SharedRates};
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
    let over = |u: &RateUpdate| u.pause_until_ms < u.server_now_ms;
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

#[actix_rt::test]
async fn a_pause_given_with_a_refused_rise_is_stored_and_published_alone() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let (a, b, c) = (rates(&redis), rates(&redis), rates(&redis));
    let mut sub = c.subscribe().await.expect("subscribed");
    let name = "*|joined.test";
    // The fleet cut the host to 20; a joiner, cut to 50 with a pause by its first
    // answer, publishes its first change as a rise from 50, which the cut refuses.
    a.set(name, 20.0, None).await.expect("stored");
    let first = tokio::time::timeout(Duration::from_secs(5), sub.recv()).await;
    assert!(
        matches!(first, Ok(Some(RateMessage::Update(_)))),
        "{first:?}"
    );
    let refused = match b.raise(name, 50.0, Some(PAUSE), 50.0).await.expect("sent") {
        Raised::Refused(u) => u,
        Raised::Stored(u) => panic!("a rise over a lower rate is refused: {u:?}"),
    };
    assert_eq!(refused.rate(), Some(20.0), "{refused:?}");
    assert!(about_the_pause(refused.pause_remaining()), "{refused:?}");
    // The rate stays the cut; the pause is the site's word, stored with it.
    let stored = a.get(name).await.expect("read").expect("stored");
    assert_eq!(
        (stored.rate(), stored.pause_until_ms),
        (Some(20.0), refused.pause_until_ms)
    );
    // And told the others, without a rate.
    let got = tokio::time::timeout(Duration::from_secs(5), sub.recv()).await;
    match got.expect("published").expect("subscribed") {
        RateMessage::Update(u) => {
            assert_eq!(u.rate(), None, "{u:?}");
            assert_eq!(u.pause_until_ms, refused.pause_until_ms);
        }
        m => panic!("not an update: {m:?}"),
    }
}

#[actix_rt::test]
async fn a_change_of_the_pause_alone_keeps_a_lower_stored_cut() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let (a, b) = (rates(&redis), rates(&redis));
    let name = "*|moved.test";
    // B knows the key at 25; a peer has since cut it to 12, which B has not heard.
    let mut known = SharedKey::default();
    known.publish(25.0);
    b.set(name, 25.0, None).await.expect("stored");
    a.set(name, 12.0, None).await.expect("stored");
    // B's controller moves the pause and keeps its rate: published as the core says.
    let sent = match known.publish(25.0) {
        Publish::Cut => b.set(name, 25.0, Some(PAUSE)).await,
        Publish::Raise { from } => match b.raise(name, 25.0, Some(PAUSE), from).await {
            Ok(Raised::Stored(u) | Raised::Refused(u)) => Ok(u),
            Err(e) => Err(e),
        },
        Publish::Pause => b.pause(name, PAUSE).await,
    };
    sent.expect("sent");
    let stored = a.get(name).await.expect("read").expect("stored");
    assert_eq!(stored.rate(), Some(12.0), "the cut undone: {stored:?}");
    assert!(about_the_pause(stored.pause_remaining()), "{stored:?}");
}

#[actix_rt::test]
async fn a_stored_pause_outlives_the_keys_ttl() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let long = Duration::from_secs(1_200);
    let name = "*|long.test";
    let a = rates(&redis);
    let stored = a.set(name, 50.0, Some(long)).await.expect("stored");
    let pttl = redis.int(&["PTTL", &SharedRates::redis_key(name)]);
    assert!(
        pttl >= (long - Duration::from_secs(10)).as_millis() as i64,
        "the key expires in {pttl} ms, before its {long:?} pause ends"
    );
    // Listed with the pauses in force until it ends; a pause over is not.
    a.set("*|short.test", 5.0, Some(Duration::from_millis(1)))
        .await
        .expect("stored");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let paused = a.paused().await.expect("read");
    let listed: Vec<_> = paused.iter().map(|u| (&*u.key, u.pause_until_ms)).collect();
    assert_eq!(listed, [(name, stored.pause_until_ms)]);
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

/// The stored value of the site's host, once it carries a pause in force (10 s at most).
async fn stored_pause(redis: &RedisServer) -> Option<RateUpdate> {
    let r = rates(redis);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stored = r.get("*|127.0.0.1").await.ok().flatten();
        if stored
            .as_ref()
            .and_then(RateUpdate::pause_remaining)
            .is_some()
        {
            return stored;
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A crawler of a fixed rate started after a pause was stored reads it: its first request
/// to the host waits for the pause's end.
#[actix_rt::test]
async fn a_fixed_rate_crawler_starting_later_takes_the_stored_pause() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    let fixed = |s: &mut Settings| s.limiter.algorithm = Algorithm::Gcra;
    let a = crawler(&redis, fixed);
    let quick = Duration::from_secs(10);
    let r = Fetch::get(site.fault_url(REFUSED)).throttle_waits(0);
    assert_eq!(fetched(&a, r, quick).await.status, 429);
    let stored = stored_pause(&redis).await;
    assert!(stored.is_some(), "A's pause not stored: {stored:?}");
    // Published before B was there: B can only read it.
    let b = crawler(&redis, fixed);
    let told = eventually(quick, || async { pause_seconds(&b) > 0.0 }).await;
    let late = RETRY_AFTER + Duration::from_secs(30);
    let first = fetched(&b, Fetch::get(site.fault_url("/b/0")), late).await;
    assert_eq!(first.status, 200);
    a.shutdown(Duration::ZERO).await;
    b.shutdown(Duration::ZERO).await;
    assert!(told, "B took no pause from the stored value");
    sent_after_the_pause(&site, "/b/0");
}

/// A crawler joining a fleet that cut the host, whose first answer is a throttle with a
/// `Retry-After`: its rise from its own cut is refused, the pause is stored and told the
/// others all the same, and the fleet's cut stays.
#[actix_rt::test]
async fn a_joiners_retry_after_reaches_the_fleet_though_its_rise_is_refused() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    // A cut below where the joiner's throttle takes it (a `Retry-After: 6` with nothing
    // accepted yet: about one request in 6 s).
    let cut = 0.05;
    rates(&redis)
        .set("*|127.0.0.1", cut, None)
        .await
        .expect("stored");
    let fixed = crawler(&redis, |s| s.limiter.algorithm = Algorithm::Gcra);
    let joiner = crawler(&redis, |s| {
        s.limiter.algorithm = Algorithm::Aimd;
        s.limiter.scope = Scope::Auto;
        s.limiter.initial_rps = 100.0;
    });
    let quick = Duration::from_secs(10);
    let r = Fetch::get(site.fault_url(REFUSED)).throttle_waits(0);
    assert_eq!(fetched(&joiner, r, quick).await.status, 429);
    let told = eventually(quick, || async { pause_seconds(&fixed) > 0.0 }).await;
    let stored = stored_pause(&redis).await;
    let late = RETRY_AFTER + Duration::from_secs(30);
    let next = fetched(&fixed, Fetch::get(site.fault_url("/b/0")), late).await;
    assert_eq!(next.status, 200);
    fixed.shutdown(Duration::ZERO).await;
    joiner.shutdown(Duration::ZERO).await;
    assert!(told, "the fixed crawler took no pause from the joiner");
    let stored = stored.expect("the joiner's pause stored");
    assert_eq!(
        stored.rate(),
        Some(cut),
        "the fleet's cut lifted: {stored:?}"
    );
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
