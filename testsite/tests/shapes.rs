//! The site shapes real sites have — nginx-style 503 refusals, fixed windows with
//! `X-RateLimit-*`, penalty boxes, a full server that only gets slower, noisy latency with a
//! heavy tail, a flaky unlimited site — seen over real sockets, asserted on what the server
//! counted.
//!
//! Timing: windows and periods are hundreds of ms; where an assertion depends on when
//! requests arrived, it reads the arrivals from the server's log or waits for a server-side
//! event (a request in flight, a window edge, a ban's end) instead of sleeping "long enough".

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use exitcrawl_testsite::{
    Fault, FaultMix, Limit, Rate, RequestRecord, RetryAfter, SiteConfig, SiteStats, TestSite,
};

const PEER_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const PEER_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn client(ip: IpAddr) -> awc::Client {
    awc::Client::builder()
        .local_address(ip)
        .disable_redirects()
        .timeout(Duration::from_secs(5))
        .finish()
}

/// One answer as the client saw it.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    took: Duration,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

async fn get(c: &awc::Client, url: &str) -> Answer {
    let t0 = Instant::now();
    let mut res = c.get(url).send().await.expect("request");
    let headers = res
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    res.body().await.expect("body");
    Answer {
        status: res.status().as_u16(),
        headers,
        took: t0.elapsed(),
    }
}

/// Send `n` GETs from `c` one after the other; their statuses.
async fn statuses(c: &awc::Client, url: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(c, url).await.status);
    }
    out
}

/// Poll the site's counters until `pred` holds (at most 5 s, then panic).
async fn wait_for(site: &TestSite, what: &str, pred: impl Fn(&SiteStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pred(&site.stats()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        actix_rt::time::sleep(ms(2)).await;
    }
}

/// Sleep until `at` (no-op if it passed).
async fn sleep_until(at: Instant) {
    actix_rt::time::sleep(at.saturating_duration_since(Instant::now())).await;
}

/// Just after the next edge of `window`-long windows aligned to the site's start.
async fn next_window_edge(site: &TestSite, window: Duration) -> Instant {
    let since = Instant::now().duration_since(site.started()).as_nanos();
    let k = since / window.as_nanos() + 1;
    let edge = site.started() + Duration::from_nanos((k * window.as_nanos()) as u64);
    sleep_until(edge + ms(5)).await;
    edge
}

fn window_index(site: &TestSite, r: &RequestRecord, window: Duration) -> u128 {
    r.arrived.duration_since(site.started()).as_nanos() / window.as_nanos()
}

/// nginx `limit_req zone=… rate=…;` without `burst=` and without `limit_req_status`: burst 1,
/// refusals answer 503 without Retry-After, and the server counts them as limited, not failed.
#[actix_rt::test]
async fn nginx_style_burst_one_refuses_with_503_and_no_retry_after() {
    let period = ms(400);
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::new(1, period, 1)),
        reject_status: 503,
        retry_after: RetryAfter::Omit,
        ..SiteConfig::default()
    });
    let a = client(PEER_A);
    let first = get(&a, &site.url("/a")).await;
    let second = get(&a, &site.url("/a")).await;
    assert_eq!(first.status, 200);
    let log = site.requests();
    let gap = log[1].arrived - log[0].arrived;
    // Sooner than 1/rate after the accepted one: refused (the log says how soon it was).
    assert!(gap < period, "the machine stalled for {gap:?}");
    assert_eq!(second.status, 503);
    assert_eq!(second.header("retry-after"), None);
    // At 1/rate after the accepted one (the refusal does not count): accepted.
    sleep_until(log[0].arrived + period).await;
    assert_eq!(get(&a, &site.url("/a")).await.status, 200);

    let s = site.stats();
    let pa = s.peer(PEER_A);
    assert_eq!((pa.requests, pa.ok, pa.limited, pa.failed), (3, 2, 1, 0));
    assert_eq!(
        (s.requests, s.ok, s.limited, s.failed, s.banned),
        (3, 2, 1, 0, 0)
    );
}

#[actix_rt::test]
async fn per_peer_window_refuses_until_the_edge_with_ratelimit_headers() {
    let window = ms(400);
    let site = TestSite::start(SiteConfig {
        limit: Limit::Window {
            per_peer: true,
            limit: 3,
            window,
            headers: true,
        },
        ..SiteConfig::default()
    });
    let (a, b) = (client(PEER_A), client(PEER_B));
    next_window_edge(&site, window).await;
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(get(&a, &site.url("/api")).await);
    }
    // B has its own counter.
    assert_eq!(get(&b, &site.url("/api")).await.status, 200);
    let log = site.requests();
    assert!(
        log.iter()
            .all(|r| window_index(&site, r, window) == window_index(&site, &log[0], window)),
        "six loopback requests spanned a {window:?} window edge: the machine stalled"
    );

    let codes: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(codes, [200, 200, 200, 429, 429]);
    let remaining: Vec<&str> = answers
        .iter()
        .map(|a| a.header("x-ratelimit-remaining").unwrap())
        .collect();
    assert_eq!(remaining, ["2", "1", "0", "0", "0"]);
    for a in &answers {
        assert_eq!(a.header("x-ratelimit-limit"), Some("3"));
        // Under 400 ms to the reset: 1 s, rounded up.
        assert_eq!(a.header("x-ratelimit-reset"), Some("1"));
    }
    assert_eq!(answers[0].header("retry-after"), None);
    assert_eq!(answers[3].header("retry-after"), Some("1"));

    // The counter resets at the edge, not a window after the first request.
    next_window_edge(&site, window).await;
    let again = get(&a, &site.url("/api")).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("x-ratelimit-remaining"), Some("2"));

    let s = site.stats();
    let pa = s.peer(PEER_A);
    assert_eq!((pa.requests, pa.ok, pa.limited), (6, 4, 2));
    assert_eq!(s.peer(PEER_B).ok, 1);
    assert_eq!((s.requests, s.ok, s.limited), (7, 5, 2));
    // The server's own span, for goodput.
    let log = site.requests();
    assert_eq!(s.first_request, Some(log[0].arrived));
    assert_eq!(s.last_request, Some(log[6].arrived));
    assert_eq!(pa.last_request, Some(log[6].arrived));
    assert_eq!(s.peer(PEER_B).first_request, Some(log[5].arrived));
    assert_eq!(s.span(), log[6].arrived - log[0].arrived);
}

#[actix_rt::test]
async fn global_window_is_shared_and_sends_no_headers_unless_asked() {
    let window = ms(400);
    let site = TestSite::start(SiteConfig {
        limit: Limit::Window {
            per_peer: false,
            limit: 2,
            window,
            headers: false,
        },
        reject_status: 503,
        ..SiteConfig::default()
    });
    let (a, b) = (client(PEER_A), client(PEER_B));
    next_window_edge(&site, window).await;
    assert_eq!(get(&a, &site.url("/")).await.status, 200);
    assert_eq!(get(&b, &site.url("/")).await.status, 200);
    let refused = get(&a, &site.url("/")).await;
    let log = site.requests();
    assert_eq!(
        window_index(&site, &log[0], window),
        window_index(&site, &log[2], window),
        "the machine stalled"
    );
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.header("x-ratelimit-remaining"), None);
    // /health is never limited.
    assert_eq!(get(&b, &site.url("/health")).await.status, 200);
    let s = site.stats();
    assert_eq!((s.ok, s.limited, s.failed), (3, 1, 0));
    assert_eq!(
        s.last_request,
        Some(log[2].arrived),
        "/health is not in the span"
    );
}

#[actix_rt::test]
async fn ban_answers_403_for_its_time_and_is_recorded_and_a_paced_peer_is_never_banned() {
    let (period, ban) = (ms(300), ms(400));
    let site = TestSite::start(SiteConfig {
        limit: Limit::ban(true, 3, period, ban),
        ..SiteConfig::default()
    });
    let url = site.url("/p");
    // B sends a request every ≥ 110 ms: 4 requests span ≥ 330 ms > the 300 ms period, so
    // never more than 3 are counted, whatever the machine does.
    let paced = {
        let (b, url) = (client(PEER_B), url.clone());
        actix_rt::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..5 {
                out.push(get(&b, &url).await.status);
                actix_rt::time::sleep(ms(110)).await;
            }
            out
        })
    };

    let a = client(PEER_A);
    let burst = statuses(&a, &url, 4).await;
    let during = get(&a, &url).await;
    let s = site.stats();
    let bans = s.bans_of(PEER_A);
    assert_eq!(bans.len(), 1, "{s:?}");
    let log: Vec<RequestRecord> = site
        .requests()
        .into_iter()
        .filter(|r| r.peer == PEER_A)
        .collect();
    assert!(
        log[3].arrived - log[0].arrived < period,
        "the machine stalled"
    );
    assert_eq!(burst, [200, 200, 200, 403]);
    assert!(log[4].arrived < bans[0].until, "the machine stalled");
    assert_eq!(during.status, 403);
    assert_eq!(during.header("retry-after"), None);
    // The ban started with the request that made the count exceed 3.
    assert_eq!(bans[0].start, log[3].arrived);
    assert_eq!(bans[0].until, log[3].arrived + ban);

    // When the ban has ended the peer is served again.
    sleep_until(bans[0].until).await;
    assert_eq!(get(&a, &url).await.status, 200);

    assert_eq!(paced.await.unwrap(), [200; 5]);
    let s = site.stats();
    let pa = s.peer(PEER_A);
    assert_eq!((pa.requests, pa.ok, pa.banned, pa.limited), (6, 4, 2, 0));
    assert_eq!((s.peer(PEER_B).ok, s.peer(PEER_B).banned), (5, 0));
    assert!(s.bans_of(PEER_B).is_empty());
    assert_eq!((s.banned, s.bans.len()), (2, 1));
}

#[actix_rt::test]
async fn global_ban_bans_every_peer() {
    let site = TestSite::start(SiteConfig {
        limit: Limit::Ban {
            per_peer: false,
            max: 2,
            period: ms(300),
            ban: ms(300),
            status: 429,
        },
        ..SiteConfig::default()
    });
    let (a, b) = (client(PEER_A), client(PEER_B));
    let codes = [
        get(&a, &site.url("/")).await.status,
        get(&b, &site.url("/")).await.status,
        get(&a, &site.url("/")).await.status,
        get(&b, &site.url("/")).await.status,
    ];
    let s = site.stats();
    let log = site.requests();
    assert!(
        log[3].arrived - log[0].arrived < ms(300),
        "the machine stalled"
    );
    assert_eq!(codes, [200, 200, 429, 429]);
    assert_eq!(s.bans.len(), 1);
    assert_eq!(s.bans[0].peer, None);
    assert!(s.bans_of(PEER_A).is_empty());
    // A ban is counted as banned, whatever its status — not as limited.
    assert_eq!((s.banned, s.limited), (2, 0));
    assert_eq!((s.peer(PEER_A).banned, s.peer(PEER_B).banned), (1, 1));
}

/// A full application server: one worker, FIFO, no errors, only later answers.
#[actix_rt::test]
async fn workers_serve_in_arrival_order_and_the_in_flight_distribution_shows_the_queue() {
    let service = ms(250);
    let site = TestSite::start(SiteConfig {
        limit: Limit::Workers {
            workers: 1,
            service,
            max_wait: None,
        },
        ..SiteConfig::default()
    });
    // Three requests on three connections, each sent once the previous is in flight, so
    // the arrival order is known.
    let mut tasks = Vec::new();
    for i in 0..3u64 {
        let url = site.url(&format!("/w/{i}"));
        tasks.push(actix_rt::spawn(
            async move { get(&client(PEER_A), &url).await },
        ));
        wait_for(&site, "the request in flight", |s| s.in_flight == i + 1).await;
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().status, 200);
    }
    let log = site.requests();
    let paths: Vec<&str> = log.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/w/0", "/w/1", "/w/2"]);
    // Each got the worker a full service time after the one before: FIFO, one at a time.
    let starts: Vec<Instant> = log.iter().map(|r| r.arrived + r.queued).collect();
    for w in starts.windows(2) {
        assert!(w[1] >= w[0] + service - ms(1), "{log:#?}");
    }
    assert!(log.iter().all(|r| r.latency == service));
    assert!(log[0].queued < ms(50), "{log:#?}");

    let s = site.stats();
    assert!(
        log[2].arrived < starts[0] + service,
        "the machine stalled: {log:#?}"
    );
    // Arrivals found 1, 2 and 3 in flight (themselves included).
    assert_eq!(s.in_flight_hist, [0, 1, 1, 1]);
    assert_eq!(s.in_flight_p99(), 3);
    assert_eq!(s.in_flight_quantile(0.5), 2);
    assert_eq!((s.ok, s.failed, s.limited, s.peak_in_flight), (3, 0, 0, 3));
}

#[actix_rt::test]
async fn workers_never_serve_more_than_their_number_at_once() {
    let site = TestSite::start(SiteConfig {
        limit: Limit::Workers {
            workers: 2,
            service: ms(100),
            max_wait: None,
        },
        latency_noise: 0.5,
        ..SiteConfig::default()
    });
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let url = site.url(&format!("/c/{i}"));
            actix_rt::spawn(async move { get(&client(PEER_A), &url).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().status, 200);
    }
    let log = site.requests();
    // Service times follow the noise: 100 ms × [0.5, 1.5).
    assert!(log.iter().all(|r| (ms(50)..ms(150)).contains(&r.latency)));
    // At no instant were more than two requests in service (intervals shrunk by 1 ms for
    // the clock readings' order).
    let spans: Vec<(Instant, Instant)> = log
        .iter()
        .map(|r| {
            let start = r.arrived + r.queued;
            (start + ms(1), start + r.latency)
        })
        .collect();
    for &(at, _) in &spans {
        let busy = spans.iter().filter(|&&(s, e)| s <= at && at < e).count();
        assert!(busy <= 2, "{busy} in service at once: {log:#?}");
    }
    let s = site.stats();
    assert_eq!((s.ok, s.failed), (6, 0));
    assert!(s.in_flight_p99() <= 6);
    assert_eq!(s.in_flight_hist.iter().sum::<u64>(), 6);
}

/// A proxy in front of a full server gives up after `max_wait`: 503, counted as failed.
#[actix_rt::test]
async fn workers_answer_503_after_the_longest_wait() {
    let site = TestSite::start(SiteConfig {
        limit: Limit::Workers {
            workers: 1,
            service: ms(400),
            max_wait: Some(ms(100)),
        },
        ..SiteConfig::default()
    });
    let url = site.url("/slow");
    let first = {
        let url = url.clone();
        actix_rt::spawn(async move { get(&client(PEER_A), &url).await })
    };
    wait_for(&site, "the first request in service", |s| s.ok == 1).await;
    let second = get(&client(PEER_B), &url).await;
    assert_eq!(first.await.unwrap().status, 200);
    let log = site.requests();
    assert!(
        log[1].arrived + ms(100) < log[0].arrived + ms(400),
        "the machine stalled: {log:#?}"
    );
    assert_eq!(second.status, 503);
    assert!(log[1].queued >= ms(100), "{log:#?}");
    let s = site.stats();
    assert_eq!((s.peer(PEER_A).ok, s.peer(PEER_B).failed), (1, 1));
    assert_eq!((s.ok, s.failed, s.limited), (1, 1, 0));
}

/// Noisy latency with a heavy tail, reproducible from the seed.
#[actix_rt::test]
async fn latency_noise_and_tail_are_seeded() {
    let run = |seed: u64| async move {
        let site = TestSite::start(SiteConfig {
            latency: ms(20),
            latency_noise: 0.5,
            tail: Some((0.1, 4.0)),
            seed,
            ..SiteConfig::default()
        });
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let url = site.url(&format!("/r/{i}"));
                actix_rt::spawn(async move { (url.clone(), get(&client(PEER_A), &url).await) })
            })
            .collect();
        let mut took = BTreeMap::new();
        for t in tasks {
            let (url, answer) = t.await.unwrap();
            assert_eq!(answer.status, 200);
            took.insert(url.rsplit('/').next().unwrap().to_owned(), answer.took);
        }
        let log = site.requests();
        for r in &log {
            // Each answer took at least the latency the site gave it.
            assert!(took[r.path.rsplit('/').next().unwrap()] >= r.latency);
        }
        let mut lat: Vec<Duration> = log.iter().map(|r| r.latency).collect();
        lat.sort();
        lat
    };
    let lat = run(7).await;
    // Body: 20 ms × [0.5, 1.5); tail: × 4 → [40, 120) ms.
    let body = lat
        .iter()
        .filter(|&&l| (ms(10)..ms(30)).contains(&l))
        .count();
    let tail = lat
        .iter()
        .filter(|&&l| (ms(40)..ms(120)).contains(&l))
        .count();
    assert_eq!(body + tail, 40, "{lat:?}");
    assert!(tail >= 1, "{lat:?}");
    assert!(lat[0] < ms(15) && lat[body - 1] > ms(25), "spread: {lat:?}");
    // The same seed gives the same latencies (in whatever order requests arrived).
    assert_eq!(run(7).await, lat);
    assert_ne!(run(8).await, lat);
}

#[actix_rt::test]
async fn fast_rejections_skip_the_latency() {
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::new(1, Duration::from_secs(60), 1)),
        latency: ms(300),
        fast_rejections: true,
        ..SiteConfig::default()
    });
    let a = client(PEER_A);
    assert_eq!(get(&a, &site.url("/")).await.status, 200);
    assert_eq!(get(&a, &site.url("/")).await.status, 429);
    let log = site.requests();
    assert_eq!((log[0].latency, log[1].latency), (ms(300), Duration::ZERO));
}

/// An unlimited but flaky site: 5 % of connections dropped, 2 % hangs, 3 % 500s, with the
/// hangs dropped by the site (a proxy) well before the client's 5 s timeout.
#[actix_rt::test]
async fn fault_mix_drops_hangs_and_fails_and_hangs_are_bounded() {
    let mix = FaultMix {
        seed: 3,
        faults: vec![
            (Fault::Close, 50),
            (Fault::Hang, 20),
            (Fault::Status(500), 30),
        ],
        per_request: false,
    };
    // The mix's shares, over many paths (σ ≈ 31, 20, 24).
    let mut counts = BTreeMap::new();
    for i in 0..20_000 {
        *counts
            .entry(mix.pick(&format!("/p/{i}")).map(|f| f.code()))
            .or_insert(0) += 1;
    }
    let share = |code: &str| counts.get(&Some(code.to_owned())).copied().unwrap_or(0);
    assert!((850..=1150).contains(&share("close")), "{counts:?}");
    assert!((300..=500).contains(&share("hang")), "{counts:?}");
    assert!((480..=720).contains(&share("s500")), "{counts:?}");

    let site = TestSite::start(SiteConfig {
        faults: Some(mix),
        hang_max: ms(200),
        ..SiteConfig::default()
    });
    let first_with = |want: Option<Fault>| {
        (0..)
            .map(|i| format!("/p/{i}"))
            .find(|p| site.fault_for(p) == want)
            .unwrap()
    };
    let a = client(PEER_A);
    let url = |want| site.fault_url(&first_with(want));
    assert!(a.get(url(Some(Fault::Close))).send().await.is_err());
    let t0 = Instant::now();
    assert!(a.get(url(Some(Fault::Hang))).send().await.is_err());
    let hung = t0.elapsed();
    assert!(
        hung >= ms(200) && hung < Duration::from_secs(4),
        "hang {hung:?}"
    );
    assert_eq!(get(&a, &url(Some(Fault::Status(500)))).await.status, 500);
    assert_eq!(get(&a, &url(None)).await.status, 200);

    let pa = site.stats().peer(PEER_A);
    assert_eq!((pa.requests, pa.closed, pa.failed, pa.ok), (4, 2, 1, 1));
}

/// A flaky site: the same shares drawn afresh for every request, so a page that failed
/// answers on a later try; a site with broken pages fails them every time.
#[actix_rt::test]
async fn a_per_request_mix_lets_a_failed_page_answer_later_and_a_per_page_one_does_not() {
    let faults = vec![(Fault::Status(500), 300)];
    let flaky = FaultMix {
        seed: 5,
        faults: faults.clone(),
        per_request: true,
    };
    // Over many pages, the share of second requests failing is the mix's share again
    // (σ ≈ 14 of 1000), not 1000 (the first request's fault repeated).
    let failed_first: Vec<String> = (0..10_000)
        .map(|i| format!("/p/{i}"))
        .filter(|p| flaky.pick_nth(p, 0).is_some())
        .take(1000)
        .collect();
    let again = failed_first
        .iter()
        .filter(|p| flaky.pick_nth(p, 1).is_some())
        .count();
    assert!((240..=360).contains(&again), "{again} of 1000 failed again");

    for per_request in [true, false] {
        let site = TestSite::start(SiteConfig {
            faults: Some(FaultMix {
                seed: 5,
                faults: faults.clone(),
                per_request,
            }),
            ..SiteConfig::default()
        });
        let path = (0..)
            .map(|i| format!("/p/{i}"))
            .find(|p| site.fault_for(p).is_some())
            .unwrap();
        let a = client(PEER_A);
        let mut statuses = Vec::new();
        for _ in 0..8 {
            statuses.push(get(&a, &site.fault_url(&path)).await.status);
        }
        assert_eq!(statuses[0], 500, "the first request gets the page's fault");
        if per_request {
            assert!(statuses.contains(&200), "{path}: {statuses:?}");
        } else {
            assert_eq!(statuses, [500; 8], "{path}: a broken page stays broken");
        }
    }
}
