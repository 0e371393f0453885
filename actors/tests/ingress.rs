//! The two ways a fetch gets in — a `Fetch` message to the scheduler's `Addr` (other
//! actors) and `CrawlerHandle::fetch` (its own channel) — share one queue, one
//! backpressure and one reply per fetch; and `shutdown` answers every fetch, queued or in
//! flight, whichever way it came in. Real site on 127.0.0.1, exits on 127.0.0.2/3.

mod support;

use support::exits;

use std::collections::HashMap;
use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchError, FetchErrorKind, FetchResponse};
use exitcrawl_testsite::{SiteConfig, TestSite};
use futures_util::future::{join, join_all, LocalBoxFuture};
use futures_util::FutureExt as _;

type Reply = Result<FetchResponse, FetchError>;

/// Fetches of `urls`, handed in both ways in turn: even ones by `CrawlerHandle::fetch`,
/// odd ones as `Fetch` messages to the scheduler's `Addr`.
fn both_ways(h: &CrawlerHandle, urls: Vec<String>) -> Vec<LocalBoxFuture<'_, Reply>> {
    let addr = h.scheduler();
    urls.into_iter()
        .enumerate()
        .map(|(i, url)| -> LocalBoxFuture<'_, Reply> {
            if i % 2 == 0 {
                Box::pin(h.fetch(Fetch::get(url)))
            } else {
                let addr = addr.clone();
                Box::pin(
                    async move { addr.send(Fetch::get(url)).await.expect("scheduler running") },
                )
            }
        })
        .collect()
}

fn settings(concurrency: u32, queue_capacity: u32) -> Settings {
    let mut s = Settings::with_exits(exits(2, concurrency));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = concurrency;
    s.crawler.queue_capacity = queue_capacity;
    s.crawler.timeout_ms = 5_000;
    s.crawler.connect_timeout_ms = 2_000;
    s
}

#[actix_rt::test]
async fn both_ways_in_share_the_queue_and_each_fetch_gets_one_reply() {
    let site = TestSite::start(SiteConfig {
        // Slow enough that the queue (capacity 4) fills and both ways must wait for slots.
        latency: Duration::from_millis(20),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(2, 4)).expect("start");
    let addr = h.scheduler();
    let urls: Vec<String> = (0..30).map(|i| site.url(&format!("/in/{i}"))).collect();
    let mut fetches = both_ways(&h, urls.clone());
    // Invalid URLs are answered at once on both ways, queue full or not.
    fetches.push(Box::pin(h.fetch(Fetch::get("ht!tp://x"))));
    fetches.push(
        async move { addr.send(Fetch::get("mailto:a@b")).await.expect("running") }.boxed_local(),
    );
    let replies = tokio::time::timeout(Duration::from_secs(30), join_all(fetches))
        .await
        .expect("every fetch is answered");
    assert_eq!(replies.len(), 32);
    for (r, u) in replies.iter().zip(&urls) {
        let resp = r.as_ref().unwrap_or_else(|e| panic!("{u}: {e}"));
        assert_eq!(&resp.url, u);
        assert_eq!(resp.status, 200);
    }
    for r in &replies[30..] {
        let e = r.as_ref().expect_err("invalid URL");
        assert_eq!(e.kind, FetchErrorKind::InvalidUrl, "{e}");
        assert_eq!(e.attempts, 0);
    }
    // The site saw every path once and never more than the concurrency at once.
    let mut seen: HashMap<String, u32> = HashMap::new();
    for r in site.requests() {
        *seen.entry(r.path).or_default() += 1;
    }
    assert_eq!(seen.len(), 30, "{seen:?}");
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    assert!(site.stats().peak_in_flight <= 2);
    let m = h.metrics();
    assert_eq!(m.urls_total(), 32);
    assert_eq!(m.urls_done(), 32);
    assert_eq!(m.queue_depth(), 0);
}

#[actix_rt::test]
async fn shutdown_answers_every_fetch_queued_or_in_flight() {
    let site = TestSite::start(SiteConfig {
        // Longer than the grace period: fetches in flight at shutdown cannot finish.
        latency: Duration::from_secs(3),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(2, 8)).expect("start");
    let urls = (0..12).map(|i| site.url(&format!("/s/{i}"))).collect();
    let fetches = both_ways(&h, urls);
    let all = join_all(fetches);
    let stop = async {
        // Two fetches reach the site (the concurrency), the rest wait: queued (8) or for a
        // queue slot (2).
        let two = support::eventually(Duration::from_secs(5), || {
            std::future::ready(site.stats().requests == 2)
        })
        .await;
        assert!(two, "two fetches reach the site");
        h.shutdown(Duration::from_millis(200)).await;
    };
    let (replies, ()) = tokio::time::timeout(Duration::from_secs(10), join(all, stop))
        .await
        .expect("shutdown answers every fetch within its grace period");
    assert_eq!(replies.len(), 12);
    for r in &replies {
        let e = r
            .as_ref()
            .expect_err("no fetch can finish before the grace period ends");
        assert_eq!(e.kind, FetchErrorKind::Shutdown, "{e}");
    }
    // The two cut off in flight report their attempt; the ten others never reached the site.
    let attempted = replies
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.attempts == 1))
        .count();
    assert_eq!(attempted, 2);
    assert_eq!(site.stats().requests, 2);
    // After shutdown, both ways answer at once.
    let late = h.fetch(Fetch::get(site.url("/late"))).await;
    assert_eq!(late.expect_err("shut down").kind, FetchErrorKind::Shutdown);
    let late = h
        .scheduler()
        .send(Fetch::get(site.url("/late2")))
        .await
        .expect("the scheduler still answers");
    assert_eq!(late.expect_err("shut down").kind, FetchErrorKind::Shutdown);
    let m = h.metrics();
    assert_eq!(m.urls_done(), m.urls_total());
}

#[actix_rt::test]
async fn exits_on_arbiters_of_their_own_serve_both_ways_in() {
    let site = TestSite::start(SiteConfig::default());
    let mut s = settings(4, 16);
    s.exits = exits(2, 2);
    s.crawler.arbiters = exitcrawl::config::Arbiters::PerExit;
    let h = Crawler::start(s).expect("start");
    let urls = (0..40).map(|i| site.url(&format!("/a/{i}"))).collect();
    let fetches = both_ways(&h, urls);
    let replies = tokio::time::timeout(Duration::from_secs(30), join_all(fetches))
        .await
        .expect("every fetch is answered");
    assert!(replies
        .iter()
        .all(|r| r.as_ref().is_ok_and(|r| r.status == 200)));
    // Both exits carried requests, each from its own source address.
    let ips: std::collections::HashSet<_> = site.requests().iter().map(|r| r.peer).collect();
    assert_eq!(ips.len(), 2, "{ips:?}");
    let stats = h.stats().await;
    assert_eq!(stats.iter().map(|e| e.total).sum::<u64>(), 40);
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn a_body_that_arrives_after_its_head_is_read_whole() {
    // The head comes at once, the 8 body bytes 20 ms apart: the exit reads what is there,
    // then the rest within the body timeout.
    let site = TestSite::start(SiteConfig::default());
    let h = Crawler::start(settings(2, 4)).expect("start");
    let url = site.fault_url("/fault/trickle8x20");
    let direct = h.fetch(Fetch::get(url.clone())).await.expect("answer");
    assert_eq!(direct.status, 200);
    assert_eq!(direct.body.len(), 8);
    // The same through the queue (a Fetch message), on an exit worker.
    let queued = h
        .scheduler()
        .send(Fetch::get(url))
        .await
        .expect("running")
        .expect("answer");
    assert_eq!(queued.status, 200);
    assert_eq!(queued.body.len(), 8);
}

#[actix_rt::test]
async fn a_fetch_its_caller_gives_up_on_gives_its_capacity_back() {
    // Concurrency 1 and a site that takes 300 ms: the first fetch is dropped by its caller
    // mid-flight (a timeout around `CrawlerHandle::fetch`), the second before it is ever
    // polled. The next fetch must still get the crawler's one slot, and the figures must
    // add up.
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(1, 4)).expect("start");
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        h.fetch(Fetch::get(site.url("/dropped"))),
    )
    .await;
    assert!(
        gave_up.is_err(),
        "the site answers after 300 ms: {gave_up:?}"
    );
    // A fetch dropped before it is ever polled takes nothing and sends nothing.
    drop(h.fetch(Fetch::get(site.url("/never-polled"))));
    let next = tokio::time::timeout(
        Duration::from_secs(5),
        h.fetch(Fetch::get(site.url("/next"))),
    )
    .await
    .expect("the slot came back: the next fetch is answered")
    .expect("answer");
    assert_eq!(next.status, 200);
    let m = h.metrics();
    assert_eq!(m.urls_total(), 2);
    assert_eq!(
        m.urls_done(),
        2,
        "the fetch dropped mid-flight counts as done"
    );
    assert_eq!(site.requests().len(), 2, "the unpolled fetch sent nothing");
    h.shutdown(Duration::from_secs(1)).await;
}

/// How a test hands a fetch in: `Some(reply)`, or `None` when it gave up waiting for one
/// after `patience`.
type HandIn =
    for<'a> fn(&'a CrawlerHandle, String, Option<Duration>) -> LocalBoxFuture<'a, Option<Reply>>;

fn by_handle(
    h: &CrawlerHandle,
    url: String,
    patience: Option<Duration>,
) -> LocalBoxFuture<'_, Option<Reply>> {
    Box::pin(async move {
        let reply = h.fetch(Fetch::get(url));
        match patience {
            Some(p) => tokio::time::timeout(p, reply).await.ok(),
            None => Some(reply.await),
        }
    })
}

fn by_message(
    h: &CrawlerHandle,
    url: String,
    patience: Option<Duration>,
) -> LocalBoxFuture<'_, Option<Reply>> {
    Box::pin(async move {
        let request = h.scheduler().send(Fetch::get(url));
        let delivered = match patience {
            Some(p) => request.timeout(p).await,
            None => request.await,
        };
        match delivered {
            Ok(reply) => Some(reply),
            Err(actix::MailboxError::Timeout) => None,
            Err(e) => panic!("not delivered: {e}"),
        }
    })
}

/// One slot, taken by a slow fetch; a second fetch waits in the queue until its caller
/// gives up on it; then a third. What the site saw: the first and the third.
async fn a_queued_fetch_given_up_is_never_sent(send: HandIn) {
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(1, 4)).expect("start");
    let first = send(&h, site.url("/first"), None);
    let abandoned = send(&h, site.url("/abandoned"), Some(Duration::from_millis(50)));
    let (first, gave_up) = join(first, abandoned).await;
    assert!(gave_up.is_none(), "still queued: {gave_up:?}");
    assert_eq!(first.expect("waited").expect("answer").status, 200);
    let next = send(&h, site.url("/next"), None).await.expect("waited");
    assert_eq!(next.expect("answer").status, 200);
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        ["/first", "/next"],
        "the abandoned fetch was not sent"
    );
    assert_eq!(h.metrics().urls_done(), 3, "it counts as done");
    h.shutdown(Duration::from_secs(1)).await;
}

/// A fetch its caller gives up on while it waits in the queue is not sent when its turn
/// comes: nobody would read the answer.
#[actix_rt::test]
async fn a_queued_fetch_its_caller_gives_up_on_is_never_sent() {
    a_queued_fetch_given_up_is_never_sent(by_handle).await;
}

/// So is a `Fetch` message whose sender stops waiting for the reply (actix's
/// `Request::timeout`, or the request dropped) after the scheduler took it in: the same
/// fetch from another actor is withdrawn as the handle's is.
#[actix_rt::test]
async fn a_queued_fetch_message_its_sender_gives_up_on_is_never_sent() {
    a_queued_fetch_given_up_is_never_sent(by_message).await;
}

/// A site on 127.0.0.1 that holds the answers to its first two requests until the test
/// says go, then writes them in one go — a 429 with `Retry-After: 1` to `/throttled` and
/// a 200 to the other, in the order asked — so that both are in the client's socket
/// buffers before the client's thread runs again. Every later request gets a 200; the
/// site notes when each arrived, counted from the first answer's write.
struct TwoAtOnce {
    addr: std::net::SocketAddr,
    /// Both first requests have arrived.
    arrived: Option<tokio::sync::oneshot::Receiver<()>>,
    go: std::sync::mpsc::Sender<()>,
    /// Both answers are written.
    written: std::sync::mpsc::Receiver<()>,
    /// (path, time after the 429 was written) of every later request.
    later: std::sync::Arc<std::sync::Mutex<Vec<(String, Duration)>>>,
}

/// One request's path from `conn` (its head read whole; GETs carry no body). `None` at EOF.
fn read_request(conn: &mut std::net::TcpStream) -> Option<String> {
    use std::io::Read as _;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let line = String::from_utf8_lossy(&head);
    line.split(' ').nth(1).map(str::to_string)
}

impl TwoAtOnce {
    /// `throttle_first`: the 429 is written first (else the 200 is, and the 429 is the
    /// host's last answer in flight when it is read).
    fn start_ordered(throttle_first: bool) -> Self {
        use std::io::Write as _;
        use std::sync::{mpsc, Arc, Mutex};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (arrived_tx, arrived) = tokio::sync::oneshot::channel();
        let (go, go_rx) = mpsc::channel();
        let (written_tx, written) = mpsc::channel();
        let later = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&later);
        std::thread::spawn(move || {
            let mut first = Vec::new();
            for _ in 0..2 {
                let (mut conn, _) = listener.accept().expect("accept");
                let path = read_request(&mut conn).expect("a request");
                first.push((path, conn));
            }
            let _ = arrived_tx.send(());
            go_rx.recv().expect("go");
            // The one to write first: its socket becomes readable first.
            first.sort_by_key(|(path, _)| (path != "/throttled") == throttle_first);
            let throttle: &[u8] =
                b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-length: 0\r\n\r\n";
            let ok: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            let (a, b) = if throttle_first {
                (throttle, ok)
            } else {
                (ok, throttle)
            };
            first[0].1.write_all(a).expect("write the first answer");
            let t0 = std::time::Instant::now();
            first[1].1.write_all(b).expect("write the second answer");
            written_tx.send(()).expect("test waits");
            // Later requests, on these connections (keep-alive) or new ones.
            let serve = move |mut conn: std::net::TcpStream, log: Arc<Mutex<Vec<_>>>| {
                std::thread::spawn(move || {
                    while let Some(path) = read_request(&mut conn) {
                        log.lock().unwrap().push((path, t0.elapsed()));
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if conn.write_all(ok).is_err() {
                            return;
                        }
                    }
                });
            };
            for (_, conn) in first {
                serve(conn, Arc::clone(&log));
            }
            for conn in listener.incoming().take(4) {
                let Ok(conn) = conn else { return };
                serve(conn, Arc::clone(&log));
            }
        });
        Self {
            addr,
            arrived: Some(arrived),
            go,
            written,
            later,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

#[actix_rt::test]
async fn a_fetch_handed_in_beside_a_throttle_waits_for_its_pause() {
    // Two fetches in flight to one host; their answers arrive together, the 429 (with
    // `Retry-After: 1`) ahead of the 200. The 200's caller at once hands in a third fetch.
    // The crawler takes in the answers already received (the 429, and the pause it leads
    // to) before it admits a new fetch, so the third waits out the pause like the 429's
    // retry; sent at once, it would have gone to a host that had just said "slow down".
    third_fetch_waits_for_the_pause(true).await;
}

#[actix_rt::test]
async fn a_throttle_read_as_its_hosts_last_answer_still_pauses_the_host() {
    // The same, the 200 ahead of the 429: when the 429 is read, nothing else is queued or
    // in flight for the host, which the scheduler then forgets; its pause must be set
    // before that, or the third fetch goes at once.
    third_fetch_waits_for_the_pause(false).await;
}

async fn third_fetch_waits_for_the_pause(throttle_first: bool) {
    let mut site = TwoAtOnce::start_ordered(throttle_first);
    let mut s = Settings::with_exits(exits(1, 4));
    s.crawl.robots = false;
    // A fixed rate with room to spare: nothing but the pause can delay the third fetch.
    s.limiter.algorithm = Algorithm::TokenBucket;
    s.limiter.initial_rps = 1000.0;
    s.limiter.burst = 10;
    s.crawler.timeout_ms = 10_000;
    let h = Crawler::start(s).expect("start");
    let throttled = actix_rt::spawn({
        let (h, url) = (h.clone(), site.url("/throttled"));
        async move { h.fetch(Fetch::get(url)).await }
    });
    let then_third = actix_rt::spawn({
        let (h, ok, third) = (h.clone(), site.url("/ok"), site.url("/third"));
        async move {
            let ok = h.fetch(Fetch::get(ok)).await;
            (ok, h.fetch(Fetch::get(third)).await)
        }
    });
    let arrived = site.arrived.take().expect("once");
    tokio::time::timeout(Duration::from_secs(10), arrived)
        .await
        .expect("both requests reach the site")
        .expect("site running");
    site.go.send(()).expect("site running");
    // This thread (the crawler's) is held until both answers are written, so it reads
    // them in one turn.
    site.written
        .recv_timeout(Duration::from_secs(10))
        .expect("site wrote both answers");
    let throttled = tokio::time::timeout(Duration::from_secs(10), throttled)
        .await
        .expect("answered")
        .expect("task");
    let (ok, third) = tokio::time::timeout(Duration::from_secs(10), then_third)
        .await
        .expect("answered")
        .expect("task");
    assert_eq!(throttled.expect("retried").status, 200);
    assert_eq!(ok.expect("answer").status, 200);
    assert_eq!(third.expect("answer").status, 200);
    let later = site.later.lock().unwrap().clone();
    let third_at = later
        .iter()
        .find(|(path, _)| path == "/third")
        .map(|(_, at)| *at)
        .expect("the site saw the third fetch");
    // The pause runs from when the limiter heard the 429, after it was written: the
    // third fetch can only come later, however busy the machine.
    assert!(
        third_at >= Duration::from_millis(950),
        "the third fetch reached the site {third_at:?} after the 429, inside its \
         Retry-After; the site saw {later:?}"
    );
    h.shutdown(Duration::from_secs(1)).await;
}

/// A caller that polls its fetches only between its own awaits (a stream of fetches
/// drained while each answer is worked on, and the work fetching too) does not stall the
/// crawler: no fetch waits on another caller's future to be polled again.
#[actix_rt::test]
async fn a_fetch_parked_in_a_callers_stream_holds_no_other_fetch_back() {
    use futures_util::StreamExt as _;
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(2),
        latency_noise: 0.9,
        ..SiteConfig::default()
    });
    let h = Crawler::start(settings(16, 64)).expect("start");
    let urls: Vec<String> = (0..400).map(|i| site.url(&format!("/s/{i}"))).collect();
    let work = async {
        let mut answers = futures_util::stream::iter(urls)
            .map(|u| h.fetch(Fetch::get(u)))
            .buffer_unordered(8);
        let mut done = 0;
        while let Some(r) = answers.next().await {
            r.expect("an answer");
            // Work on the answer, fetching too, while the stream is not polled.
            let more = h
                .fetch(Fetch::get(site.url(&format!("/more/{done}"))))
                .await;
            more.expect("an answer");
            done += 1;
        }
        done
    };
    let done = tokio::time::timeout(Duration::from_secs(20), work)
        .await
        .expect("no fetch waits on a parked one");
    assert_eq!(done, 400);
    h.shutdown(Duration::from_secs(1)).await;
}

/// Fetches their callers gave up on while they waited in the queue give their queue
/// slots back at once, not when the dispatch reaches them behind their host's pause: four
/// such fetches fill a queue of four, and until they leave it, no other fetch that must
/// queue (a `Fetch` message from another thread, a host behind a pause) can join it.
/// On paused time: H (127.0.0.1) answers 429 with `Retry-After: 60`, the four wait
/// behind that pause, their callers give up after a second.
async fn queued_fetches_given_up_free_their_slots(send: HandIn) {
    let site = support::paused_site(SiteConfig::default());
    let mut s = settings(1, 4);
    s.exits = exits(1, 1);
    s.crawler.max_retry_after_ms = 120_000;
    support::timeouts_for_paused_time(&mut s);
    let h = Crawler::start(s).expect("start");
    let throttled = exitcrawl_testsite::Fault::TooMany(exitcrawl_testsite::RetryHint::Seconds(60));
    let patience = Some(Duration::from_secs(1));
    let first = send(&h, site.fault_url(&throttled.path(0)), patience);
    let queued = async {
        let seen = support::eventually(Duration::from_millis(500), || {
            std::future::ready(!site.requests().is_empty())
        })
        .await;
        assert!(seen, "H answered the first fetch");
        let queued = (1..=4).map(|n| send(&h, site.fault_url(&throttled.path(n)), patience));
        let queued = join_all(queued);
        let full = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            h.metrics().queue_depth()
        };
        join(queued, full).await
    };
    let (first, (queued, full)) = join(first, queued).await;
    assert!(first.is_none(), "the first waits out its pause: {first:?}");
    assert!(queued.iter().all(Option::is_none), "{queued:?}");
    assert_eq!(full, 4, "the four fill the queue while their callers wait");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        h.metrics().queue_depth(),
        0,
        "a tenth of a second after their callers gave up, 59 s before H's pause ends"
    );
    // Their slots came back with them: four more fill the queue again at once.
    let again = (5..=8).map(|n| send(&h, site.fault_url(&throttled.path(n)), patience));
    let again = join_all(again);
    let refilled = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        h.metrics().queue_depth()
    };
    let (again, refilled) = join(again, refilled).await;
    assert_eq!(refilled, 4, "the freed slots took four more");
    assert!(again.iter().all(Option::is_none), "{again:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(h.metrics().queue_depth(), 0);
    // Past H's pause: the fetches given up on are never sent.
    tokio::time::sleep(Duration::from_secs(90)).await;
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, [throttled.path(0)], "only the first reached H");
    assert_eq!(h.metrics().urls_done(), h.metrics().urls_total());
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn queued_fetches_their_callers_give_up_on_free_their_slots() {
    queued_fetches_given_up_free_their_slots(by_handle).await;
}

#[actix_rt::test]
async fn queued_fetch_messages_their_senders_give_up_on_free_their_slots() {
    queued_fetches_given_up_free_their_slots(by_message).await;
}
