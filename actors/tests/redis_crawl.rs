//! Distributed mode end to end: several crawlers, each in its own actix System (as
//! separate processes would be) with its own exits on 127.0.0.x, share limits through a
//! real `redis-server`. What the local site saw is what is asserted.
//!
//! These stay on the real clock: the shared GCRA in Redis runs on Redis's wall clock, common
//! to every process, which no runtime can pause. Waits are for events (at the site, in the
//! crawler's counters); the bounds allow for the scheduling jitter of a loaded machine.
//! Each test holds [`wall_clock_guard`]: each runs three or four actix Systems plus
//! `redis-server`, and two of them side by side on a 2-core machine would take each other's
//! CPU — the rates and windows asserted here are wall-clock rates.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, Backend, ExitSettings, Scope, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch};
use exitcrawl_testsite::{FailMode, Limit, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::future::join_all;
use support::{ip, wall_clock_guard, RedisServer};

/// Settings of one crawler process: exits on `ips`, limits shared per host through Redis.
fn settings(redis_url: &str, ips: &[&str], algorithm: Algorithm, rps: f64) -> Settings {
    let exits = ips
        .iter()
        .map(|a| ExitSettings::new(format!("x{}", a.replace('.', "_")), ip(a)))
        .collect();
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = algorithm;
    s.limiter.scope = Scope::Host;
    s.limiter.backend = Backend::Redis;
    s.limiter.initial_rps = rps;
    s.limiter.burst = 10;
    s.redis.url = Some(redis_url.to_owned());
    s.redis.processes = 3;
    s.crawler.max_retries = 20;
    s.crawler.retry_budget = 1.0;
    s.crawler.retry_backoff_base_ms = 10;
    s.crawler.retry_backoff_max_ms = 200;
    s
}

/// The longest a crawler of these tests may take: ten times what the slowest takes on a
/// quiet machine. A crawl past it is shut down and its test fails, rather than the
/// test waiting for as long as the crawl lasts.
const CRAWL_BOUND: Duration = Duration::from_secs(60);

/// Run a crawler in its own thread and System; `during` runs alongside the fetches and
/// gets the handle. Returns what `during` returned and how many fetches ended 200.
/// Panics (failing the test that joins it) if the crawl outlasts [`CRAWL_BOUND`].
fn spawn_crawler<T, F, Fut>(
    settings: Settings,
    urls: Vec<String>,
    during: F,
) -> thread::JoinHandle<(T, usize)>
where
    T: Send + 'static,
    F: FnOnce(CrawlerHandle) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
{
    thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let h = Crawler::start(settings).expect("start");
            let side = actix_rt::spawn(during(h.clone()));
            let fetches = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone()))));
            let Ok(replies) = actix_rt::time::timeout(CRAWL_BOUND, fetches).await else {
                h.shutdown(Duration::ZERO).await;
                panic!("the crawl did not end within {CRAWL_BOUND:?}");
            };
            let ok = replies
                .iter()
                .filter(|r| r.as_ref().is_ok_and(|r| r.status == 200))
                .count();
            (side.await.expect("side task"), ok)
        })
    })
}

/// Wait (polling every 10 ms) until `done` holds; panics after `deadline`.
fn wait_until(deadline: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < deadline,
            "not reached within {deadline:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Most arrivals in any window of length `w` (arrivals sorted).
fn max_in_window(times: &[Instant], w: Duration) -> usize {
    let mut best = 0;
    let mut j = 0;
    for i in 0..times.len() {
        while times[i].duration_since(times[j]) >= w {
            j += 1;
        }
        best = best.max(i - j + 1);
    }
    best
}

#[test]
fn three_crawlers_share_one_budget() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    let groups = [
        ["127.0.0.2", "127.0.0.3"],
        ["127.0.0.4", "127.0.0.5"],
        ["127.0.0.6", "127.0.0.7"],
    ];
    let per_crawler = 450;
    let workers: Vec<_> = groups
        .iter()
        .enumerate()
        .map(|(n, ips)| {
            let urls = (0..per_crawler)
                .map(|i| site.url(&format!("/c{n}/{i}")))
                .collect();
            let s = settings(&redis.url(), ips, Algorithm::Gcra, 300.0);
            spawn_crawler(s, urls, |_| async {})
        })
        .collect();
    let ok: usize = workers
        .into_iter()
        .map(|w| w.join().expect("crawler").1)
        .sum();
    assert_eq!(ok, 3 * per_crawler);

    let times: Vec<Instant> = site.requests().iter().map(|r| r.arrived).collect();
    assert_eq!(times.len(), 3 * per_crawler, "no request was sent twice");
    // The shared GCRA admits at most 300 × W + burst in any window W of admission
    // times. The server sees arrival times, each later than its admission by a delay
    // that varies with scheduling (up to tens of ms on a loaded 2-core CI machine), so a
    // window of arrivals can hold the admissions of W + jitter: allow 100 ms of jitter.
    // Without sharing, three crawlers at 300/s each would put ~900 in one second.
    let one_s = max_in_window(&times, Duration::from_secs(1));
    assert!(
        one_s <= 300 + 30 + 10,
        "{one_s} requests in one second (budget 300 + 100 ms of jitter + burst 10)"
    );
    let span = times[times.len() - 1]
        .duration_since(times[0])
        .as_secs_f64();
    let rate = (times.len() - 1) as f64 / span;
    assert!(
        rate >= 0.9 * 300.0,
        "together they reached {rate:.0} req/s of 300"
    );
    eprintln!(
        "shared budget: {} requests, {rate:.1} req/s, max {one_s} in any 1 s",
        times.len()
    );
}

/// One sample of a crawler: when, its pacing rate for the host, and the cuts it decided
/// itself.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    rps: f64,
    own_cuts: u64,
}

/// How long after A's first 503 B may take to slow down. Adopting A's rate takes A's answer,
/// a publish, Redis's fan-out and B's limiter: milliseconds when quiet. The margin is for a
/// 2-core machine shared with busy loops and other crawlers, where any of those threads can
/// wait hundreds of milliseconds for a CPU; the test's claim is causal (B slows without
/// cutting itself), not a speed.
const ADOPTION_BOUND: Duration = Duration::from_secs(5);

/// Both crawlers' rate ceiling (`max_rps`). A's 503s come once both pace at it, so B's rate
/// before them is known exactly: a rate still ramping moves faster than samples 10 ms apart
/// can follow, and a sample taken just before the 503 may be the rate of 20 ms earlier.
const CAP: f64 = 200.0;

#[test]
fn a_throttle_seen_by_one_crawler_slows_the_others() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig {
        fail_mode: FailMode::Status503,
        ..SiteConfig::default()
    });
    let capped = |ip: &str| {
        let mut s = settings(&redis.url(), &[ip], Algorithm::Aimd, 40.0);
        s.limiter.max_rps = CAP;
        s
    };
    // Each crawler watches its own pacing rate for the host and its own cuts while both
    // crawl, until it has seen what the test waits for after A's first 503 at the site
    // (which the test sets once it has found it), or ADOPTION_BOUND has passed.
    let first_503: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (a_capped, b_capped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let b_urls: Vec<_> = (0..400).map(|i| site.url(&format!("/b/{i}"))).collect();
    let b = spawn_crawler(
        capped("127.0.0.4"),
        b_urls,
        watcher(Arc::clone(&first_503), Arc::clone(&b_capped), |s, t| {
            slowed_after(s, t).is_some()
        }),
    );
    let a_urls: Vec<_> = (0..400).map(|i| site.url(&format!("/a/{i}"))).collect();
    let a = spawn_crawler(
        capped("127.0.0.2"),
        a_urls,
        watcher(Arc::clone(&first_503), Arc::clone(&a_capped), |s, t| {
            cut_after(s, t).is_some()
        }),
    );
    // Once both pace at the cap (events, not a fixed sleep: a busy machine may start
    // either late), the site answers A (only A) with 503 until it has sent a few.
    let from = |peer: &str, status: u16| {
        site.requests()
            .iter()
            .filter(|r| r.peer == ip(peer) && r.status == status)
            .count()
    };
    wait_until(Duration::from_secs(30), || {
        a_capped.load(Ordering::SeqCst) && b_capped.load(Ordering::SeqCst)
    });
    site.set_fail_peer(ip("127.0.0.2"), true);
    wait_until(Duration::from_secs(30), || from("127.0.0.2", 503) >= 3);
    site.set_fail_peer(ip("127.0.0.2"), false);
    let t503 = site
        .requests()
        .iter()
        .find(|r| r.status == 503)
        .map(|r| r.arrived)
        .expect("A got a 503");
    *first_503.lock().unwrap_or_else(|e| e.into_inner()) = Some(t503);
    let (a_samples, _) = a.join().expect("A");
    let (b_samples, _) = b.join().expect("B");

    let log = site.requests();
    assert!(
        log.iter()
            .all(|r| r.status != 503 || r.peer == ip("127.0.0.2")),
        "only A was throttled"
    );
    let a_before = last_before(&a_samples, t503).expect("a sample of A before its 503");
    let a_cut = cut_after(&a_samples, t503).unwrap_or_else(|| {
        panic!("A did not cut its rate on its 503s: {a_before:?}, then {a_samples:?}")
    });
    let before = last_before(&b_samples, t503).expect("a sample of B before A's 503");
    assert!(
        before.rps >= CAP * 0.99,
        "B below the cap before A's 503: {before:?}"
    );
    let after: Vec<_> = b_samples.iter().filter(|s| s.at > t503).collect();
    let Some(slowed) = slowed_after(&b_samples, t503) else {
        panic!(
            "B did not slow down within {ADOPTION_BOUND:?} after A cut \
             ({:.1} → {:.1} req/s): {before:?}, then {after:?}",
            a_before.rps, a_cut.rps
        );
    };
    eprintln!(
        "A's rate {:.1} → {:.1}; B's {:.1} before A's 503, {:.1} {:.0} ms after it",
        a_before.rps,
        a_cut.rps,
        before.rps,
        slowed.rps,
        slowed.at.duration_since(t503).as_secs_f64() * 1e3
    );
    // B was never throttled; a cut of its own (a latency reading) would not show sharing.
    assert_eq!(
        slowed.own_cuts, before.own_cuts,
        "B's slowdown was its own cut, not A's rate: {before:?} → {slowed:?}"
    );
}

/// A crawler's side task: sample its pacing rate and its own cuts every 10 ms (raising
/// `capped` once the rate reaches CAP) until `seen(samples, first 503)` holds or
/// ADOPTION_BOUND has passed since that 503 (60 s at most), then shut the crawler down
/// and return the samples. The rest of the crawl says nothing about sharing, and its
/// length is the controller's business: after the 503s it may recover slowly.
fn watcher(
    first_503: Arc<Mutex<Option<Instant>>>,
    capped: Arc<AtomicBool>,
    seen: fn(&[Sample], Instant) -> bool,
) -> impl FnOnce(CrawlerHandle) -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<Sample>>>>
       + Send
       + 'static {
    move |h| {
        Box::pin(async move {
            let mut samples: Vec<Sample> = Vec::new();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(60) {
                let rps = h
                    .stats()
                    .await
                    .iter()
                    .flat_map(|s| s.intervals.clone())
                    .map(|(_, i)| 1.0 / i.as_secs_f64())
                    .fold(0.0, f64::max);
                let own_cuts = h
                    .limits()
                    .await
                    .iter()
                    .flat_map(|l| l.lanes.iter().map(|lane| lane.decreases))
                    .sum();
                if rps >= CAP * 0.99 {
                    capped.store(true, Ordering::SeqCst);
                }
                samples.push(Sample {
                    at: Instant::now(),
                    rps,
                    own_cuts,
                });
                let t503 = *first_503.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(t) = t503 {
                    if seen(&samples, t) || Instant::now() > t + ADOPTION_BOUND {
                        break;
                    }
                }
                actix_rt::time::sleep(Duration::from_millis(10)).await;
            }
            h.shutdown(Duration::ZERO).await;
            samples
        })
    }
}

/// The first sample after `t` with more cuts of its own than the last one before `t`.
fn cut_after(samples: &[Sample], t: Instant) -> Option<Sample> {
    let before = last_before(samples, t)?;
    samples
        .iter()
        .find(|s| s.at > t && s.own_cuts > before.own_cuts)
        .copied()
}

/// The last sample at or before `t`.
fn last_before(samples: &[Sample], t: Instant) -> Option<Sample> {
    samples.iter().rfind(|s| s.at <= t).copied()
}

/// The first sample after `t` at least 5 % below its last one before `t`.
fn slowed_after(samples: &[Sample], t: Instant) -> Option<Sample> {
    let before = last_before(samples, t)?;
    samples
        .iter()
        .find(|s| s.at > t && s.rps < before.rps * 0.95)
        .copied()
}

#[test]
fn a_redis_outage_mid_crawl_is_survived_and_reported() {
    let _serial = wall_clock_guard();
    let mut redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    let urls: Vec<_> = (0..600).map(|i| site.url(&format!("/o/{i}"))).collect();
    let s = settings(
        &redis.url(),
        &["127.0.0.2", "127.0.0.3"],
        Algorithm::Gcra,
        200.0,
    );
    let seen = Arc::new(AtomicBool::new(false));
    let saw = Arc::clone(&seen);
    let worker = spawn_crawler(s, urls, move |h| async move {
        // Read the counters once the outage has been seen (or after 30 s).
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            let outage = h.redis_stats().is_some_and(|s| s.outages >= 1);
            if outage && h.metrics().redis_errors() > 0 {
                saw.store(true, Ordering::Release);
                break;
            }
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
        (h.redis_stats(), h.metrics().redis_errors())
    });
    // Redis goes away once the crawl is under way and comes back once the crawler has
    // counted the outage: events at the site and in the crawler, not fixed sleeps, since
    // a busy machine may start the crawler late or notice the outage late.
    wait_until(Duration::from_secs(30), || site.requests().len() >= 50);
    redis.kill();
    wait_until(Duration::from_secs(30), || seen.load(Ordering::Acquire));
    redis.restart();
    let ((stats, errors), ok) = worker.join().expect("crawler");
    assert_eq!(ok, 600, "the crawl completed through the outage");
    let stats = stats.expect("redis stats");
    assert!(stats.outages >= 1, "{stats:?}");
    assert!(
        errors > 0,
        "checks failed during the outage and were counted"
    );
    assert_eq!(site.requests().len(), 600);
}

/// A fetch whose shared-budget check is held up by Redis while a throttle's
/// `Retry-After: 3` comes back for its host is not sent when the check ends: the pause
/// binds it too (the shared budget knows nothing of pauses).
#[test]
fn a_pause_read_while_a_check_is_away_holds_the_fetch_checked() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    // One token a minute: the first request is served, the next refused with Retry-After: 3.
    let site = TestSite::start(SiteConfig {
        limit: Limit::Global(Rate::new(1, Duration::from_secs(60), 1)),
        retry_after: RetryAfter::Fixed(3),
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let s = settings(&redis.url(), &["127.0.0.2"], Algorithm::Gcra, 100.0);
    let urls = [site.url("/warm"), site.url("/b"), site.url("/c")];
    let go = Arc::new(AtomicBool::new(false));
    let went = Arc::clone(&go);
    let worker = thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let h = Crawler::start(s).expect("start");
            let once = |u: &String| h.fetch(Fetch::get(u.clone()).throttle_waits(0));
            once(&urls[0]).await.expect("the token");
            let b = once(&urls[1]);
            let c = async {
                while !went.load(Ordering::Acquire) {
                    actix_rt::time::sleep(Duration::from_millis(5)).await;
                }
                once(&urls[2]).await
            };
            let (b, c) = actix_rt::time::timeout(CRAWL_BOUND, futures_util::future::join(b, c))
                .await
                .expect("both fetches end");
            h.shutdown(Duration::ZERO).await;
            (b.map(|r| r.status), c.map(|r| r.status))
        })
    });
    // /b is on its way (its check passed); Redis then stops answering for 1.5 s, so /c's
    // check is away while /b's 429 comes back.
    // (The site logs a request once answered, and counts its arrival at once.)
    wait_until(Duration::from_secs(30), || {
        let last = site.stats().last_request;
        let warm = site
            .requests()
            .iter()
            .find(|r| r.path == "/warm")
            .map(|r| r.arrived);
        warm.is_some_and(|w| last.is_some_and(|l| l > w))
    });
    assert!(
        site.requests().iter().all(|r| r.path != "/b"),
        "/b is on its way"
    );
    assert_eq!(redis.cmd(&["CLIENT", "PAUSE", "1500", "ALL"]), "OK");
    go.store(true, Ordering::Release);
    let (b, c) = worker.join().expect("crawler");
    assert_eq!(b.expect("/b answered"), 429);
    assert!(c.is_ok(), "{c:?}");
    let reqs = site.requests();
    let at = |path: &str| reqs.iter().find(|r| r.path == path).expect(path).arrived;
    assert!(
        at("/c") >= at("/b") + Duration::from_secs(3),
        "/c was sent {:?} after /b, within the Retry-After of /b's refusal",
        at("/c").saturating_duration_since(at("/b"))
    );
}

/// The host lane's rate of the crawler's one host, and the host.
async fn host_rate(h: &CrawlerHandle) -> Option<(String, f64)> {
    let limits = h.limits().await;
    limits
        .iter()
        .find(|l| l.host != "*")
        .map(|l| (l.host.clone(), l.lanes[0].rps))
}

/// Whether the crawler's host lane reaches `rps` within 10 s (polled every 20 ms).
async fn rate_becomes(h: &CrawlerHandle, rps: f64) -> bool {
    for _ in 0..500 {
        if host_rate(h)
            .await
            .is_some_and(|(_, r)| (r - rps).abs() < 0.01)
        {
            return true;
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A crawler whose subscription to the shared rates was lost reads the keys it shares
/// again once it is back: a cut another process stored meanwhile is taken, where it was
/// missed until that key's next change.
#[test]
fn a_crawler_back_from_a_lost_subscription_takes_the_cuts_it_missed() {
    let _serial = wall_clock_guard();
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    let url = redis.url();
    let s = settings(&url, &["127.0.0.2"], Algorithm::Aimd, 40.0);
    let urls: Vec<_> = (0..5).map(|i| site.url(&format!("/b/{i}"))).collect();
    let b = spawn_crawler(s, urls, move |h| async move {
        let other = exitcrawl_redis::SharedRates::new(
            exitcrawl_redis::Redis::connect(&url, exitcrawl_redis::RedisOptions::default())
                .expect("valid url"),
        );
        // Wait for the fetches: the host's key is then in use (and idle, so the
        // crawler's own controller does not move it: an idle rate does not grow).
        for _ in 0..500 {
            if h.stats().await.iter().map(|e| e.ok).sum::<u64>() >= 5 {
                break;
            }
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
        let (host, _) = host_rate(&h).await.expect("the host's limit");
        let name = format!("*|{host}");
        other.set(&name, 3.0, None).await.expect("stored");
        let took_first = rate_becomes(&h, 3.0).await;
        // The subscription drops; a cut is stored while it is away. Stored while nobody
        // listens (no subscriber before or after the store), else tried again lower: a
        // subscription back before the store would hear it, and prove nothing.
        let client = redis::Client::open(url.as_str()).expect("url");
        let mut c = client
            .get_multiplexed_async_connection()
            .await
            .expect("connected");
        let watch = c.clone();
        let listeners = || {
            let mut c = watch.clone();
            async move {
                let v: (String, u64) = redis::cmd("PUBSUB")
                    .arg("NUMSUB")
                    .arg("exitcrawl:intervals")
                    .query_async(&mut c)
                    .await
                    .expect("numsub");
                v.1
            }
        };
        let mut missed = None;
        for i in 0..20 {
            let _: redis::Value = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query_async(&mut c)
                .await
                .expect("killed");
            let rps = 2.0 - 0.05 * f64::from(i);
            let before = listeners().await;
            other.set(&name, rps, None).await.expect("stored");
            if before == 0 && listeners().await == 0 {
                missed = Some(rps);
                break;
            }
            assert!(rate_becomes(&h, rps).await, "a cut heard is taken");
        }
        let missed = missed.expect("a store while nobody listened");
        let took_missed = rate_becomes(&h, missed).await;
        let last = host_rate(&h).await;
        h.shutdown(Duration::ZERO).await;
        (took_first, took_missed, last)
    });
    let ((took_first, took_missed, last), ok) = b.join().expect("B");
    assert_eq!(ok, 5);
    assert!(took_first, "the first stored rate taken: {last:?}");
    assert!(took_missed, "the cut stored while away taken: {last:?}");
}

/// The rate the fleet has cut the test site's host to, stored before a crawler meets it.
const FLEET_CUT: f64 = 20.0;

/// What a crawler that meets a host the fleet has cut to [`FLEET_CUT`] did to it.
struct Joined {
    /// The rates it published for the host, in order.
    published: Vec<f64>,
    /// The host's stored rate once it was done.
    stored: Option<f64>,
    /// When the site saw its requests.
    arrivals: Vec<Instant>,
    /// Its fetches that ended 200.
    ok: usize,
}

/// Store [`FLEET_CUT`] for the site's host through the shared rates, as the fleet's cut,
/// then crawl `pages` pages of the site (which never throttles) with a crawler under
/// `scope` starting at 100 req/s, as a new machine or a restart joining the fleet does,
/// until they are done or `run` has passed. A subscriber of its own watches what the crawler
/// publishes for the host.
fn join_a_cut_host(scope: Scope, pages: usize, run: Duration) -> Joined {
    let redis = RedisServer::start();
    let site = TestSite::start(SiteConfig::default());
    let url = redis.url();
    // Scope `auto` and `host` share per host, under the same name.
    let name = "*|127.0.0.1";
    let (ready, is_ready) = std::sync::mpsc::channel();
    let done = Arc::new(AtomicBool::new(false));
    let fleet = {
        let (url, done) = (url.clone(), Arc::clone(&done));
        thread::spawn(move || {
            actix_rt::System::new().block_on(async move {
                let fleet = exitcrawl_redis::SharedRates::new(
                    exitcrawl_redis::Redis::connect(&url, exitcrawl_redis::RedisOptions::default())
                        .expect("valid url"),
                );
                // Subscribed first: every store is published in the same script, so
                // whatever the crawler stores reaches this subscriber.
                let mut sub = fleet.subscribe().await.expect("subscribed");
                fleet.set(name, FLEET_CUT, None).await.expect("stored");
                ready.send(()).expect("test waits");
                let mut published = Vec::new();
                let mut keep = |m: Option<exitcrawl_redis::RateMessage>| {
                    if let Some(exitcrawl_redis::RateMessage::Update(u)) = m {
                        if u.key == name {
                            published.push(u.rps);
                        }
                    }
                };
                while !done.load(Ordering::SeqCst) {
                    let next = Duration::from_millis(20);
                    if let Ok(m) = actix_rt::time::timeout(next, sub.recv()).await {
                        keep(m);
                    }
                }
                while let Some(m) = sub.try_recv() {
                    keep(Some(m));
                }
                let stored = fleet.get(name).await.expect("read").map(|u| u.rps);
                (published, stored)
            })
        })
    };
    is_ready.recv().expect("the fleet's cut stored");
    let mut s = settings(&url, &["127.0.0.2"], Algorithm::Aimd, 100.0);
    s.limiter.scope = scope;
    // A process that has learned the cut may probe above it, slowly: at this increase its
    // probe stays under the 1 % step that is published for longer than the test runs, so
    // a rate above the cut stored meanwhile can only be the joiner's own start.
    s.limiter.increase_rps = 0.01;
    let urls = (0..pages).map(|i| site.url(&format!("/j/{i}"))).collect();
    let crawler = spawn_crawler(s, urls, move |h| async move {
        let start = Instant::now();
        while start.elapsed() < run
            && h.stats().await.iter().map(|e| e.ok).sum::<u64>() < pages as u64
        {
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
        h.shutdown(Duration::ZERO).await;
    });
    let ((), ok) = crawler.join().expect("crawler");
    // Its last publish may still be on its way to the subscriber.
    thread::sleep(Duration::from_millis(200));
    done.store(true, Ordering::SeqCst);
    let (published, stored) = fleet.join().expect("fleet");
    let arrivals = site.requests().iter().map(|r| r.arrived).collect();
    Joined {
        published,
        stored,
        arrivals,
        ok,
    }
}

/// A crawler that joins a fleet which has cut a host (a new machine, a restart after
/// kill -9) starts it at its own `initial_rps`, unaware of the cut: its slow start must
/// not raise the stored rate over the cut, which the other processes would take as a
/// peer's growth, and it must pace the host at the cut itself.
#[test]
fn a_crawler_joining_a_fleet_keeps_the_cut_it_finds_stored() {
    let _serial = wall_clock_guard();
    // Work enough for slow start to grow (and publish) from 100 req/s at once.
    let j = join_a_cut_host(Scope::Auto, 1_000, Duration::from_secs(5));
    assert!(
        j.published.iter().all(|&r| r <= FLEET_CUT),
        "stored and broadcast above the fleet's cut: {:?}",
        j.published
    );
    assert_eq!(j.stored, Some(FLEET_CUT), "published: {:?}", j.published);
    // From a second in (its first requests go at 100 req/s until its first answers bring
    // the cut in) to a second before the shutdown: the cut's 40 requests in 2 s, and a
    // few for pacing that catches up after a stall of a busy machine. At its own rate it
    // sends hundreds.
    let first = *j.arrivals.first().expect("requests");
    let from = first + Duration::from_secs(1);
    let to = first + Duration::from_secs(3);
    let window = j
        .arrivals
        .iter()
        .filter(|t| **t >= from && **t < to)
        .count();
    eprintln!(
        "joined at a cut of {FLEET_CUT}: {window} requests in 2 s, published {:?}",
        j.published
    );
    assert!(
        (10..=2 * FLEET_CUT as usize + 5).contains(&window),
        "{window} requests in 2 s at a cut of {FLEET_CUT} req/s ({} in all, {} ok)",
        j.arrivals.len(),
        j.ok
    );
}

/// The same with work too little for slow start to grow past `initial_rps` (a small
/// host is crawled at the start rate): the crawler never changes the host's rate, so
/// never publishes it, and must read the cut to pace at it.
#[test]
fn a_crawler_joining_a_fleet_paces_a_small_host_at_the_cut_it_finds_stored() {
    let _serial = wall_clock_guard();
    let pages = 40;
    let j = join_a_cut_host(Scope::Host, pages, Duration::from_secs(10));
    assert_eq!(j.ok, pages, "the crawl completed");
    assert!(
        j.published.iter().all(|&r| r <= FLEET_CUT),
        "stored and broadcast above the fleet's cut: {:?}",
        j.published
    );
    assert_eq!(j.stored, Some(FLEET_CUT));
    // 40 requests at the cut take 2 s; a few first ones at 100 req/s before the cut is
    // read shorten that a little. At 100 req/s they take 0.4 s. A busy machine only
    // stretches the span.
    let span = j.arrivals[pages - 1].duration_since(j.arrivals[0]);
    eprintln!("joined at a cut of {FLEET_CUT}: {pages} requests in {span:?}");
    assert!(
        span >= Duration::from_millis(1_500),
        "{pages} requests in {span:?} at a cut of {FLEET_CUT} req/s"
    );
}
