//! Distributed mode: a pause stored in Redis outlives the changes stored after it, and a
//! crawler that meets its key takes it whatever the rate beside it. A real `redis-server`;
//! the real clock (Redis's clock ends the pause, which no runtime can pause), with waits
//! for events, never to see whether something happens.

mod support;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Backend, Scope, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch};
use exitcrawl_redis::{Raised, Redis, RedisOptions, SharedRates};
use exitcrawl_testsite::{SiteConfig, TestSite};
use support::{eventually, exits, wall_clock_guard, RedisServer};

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
