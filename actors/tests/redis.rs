//! Distributed mode against a real `redis-server`: each test starts its own server on a
//! free loopback port (no persistence) and kills it on drop.
//!
//! Without `redis-server` on PATH these tests fail (never skip): CI installs it in
//! `.ci/run`; locally, `apt-get install -y redis-server`.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

mod support;

use exitcrawl::Decision;
use exitcrawl_redis::{Raised, RateMessage, RedisError, RedisGcra, SharedFrontier, SharedRates};
use support::RedisServer;

/// Largest number of admissions (server times, µs, sorted) in any window of `w_us`
/// (closed on both ends) that starts at an admission.
fn max_in_window(times: &[u64], w_us: u64) -> usize {
    let mut best = 0;
    let mut j = 0;
    for i in 0..times.len() {
        while j < times.len() && times[j] <= times[i] + w_us {
            j += 1;
        }
        best = best.max(j - i);
    }
    best
}

/// What one client of a GCRA key saw: the server times of its admissions, the longest
/// wait it was told, and how many of its checks right after sleeping a wait were refused.
struct Driven {
    times: Vec<u64>,
    longest_wait: Duration,
    refused_after_wait: usize,
}

/// Checks `key` in a loop until `run` has passed, sleeping each returned wait.
async fn drive(gcra: &RedisGcra, key: &str, rps: f64, burst: u32, run: Duration) -> Driven {
    let end = Instant::now() + run;
    let mut d = Driven {
        times: Vec::new(),
        longest_wait: Duration::ZERO,
        refused_after_wait: 0,
    };
    let mut waited = false;
    // Bounded: at most one check per admission or wait, and `run` caps both.
    for _ in 0..100_000 {
        if Instant::now() >= end {
            break;
        }
        let c = gcra.check_detailed(key, rps, burst).await.expect("check");
        match c.decision {
            Decision::Allow => d.times.push(c.server_time_us),
            Decision::Wait(w) => {
                d.refused_after_wait += usize::from(waited);
                d.longest_wait = d.longest_wait.max(w);
                tokio::time::sleep(w).await;
            }
        }
        waited = !c.decision.is_allow();
    }
    d
}

#[actix_rt::test]
async fn gcra_bound_in_every_window_and_exact_waits() {
    let server = RedisServer::start();
    let gcra = RedisGcra::new(server.connect());

    // Burst: exactly B at once, then a wait of one interval minus the time spent. A slow
    // rate (T = 100 ms) so that a loaded machine's late timers cannot earn a new permit.
    let (slow, b) = (10.0, 10u32);
    let t = Duration::from_millis(100);
    let t0 = Instant::now();
    for i in 0..b {
        assert_eq!(
            gcra.check("burst", slow, b).await.unwrap(),
            Decision::Allow,
            "burst request {i}"
        );
    }
    let Decision::Wait(d) = gcra.check("burst", slow, b).await.unwrap() else {
        panic!("request B + 1 must wait (tau = T × (B − 1), not T × B)");
    };
    let spent = t0.elapsed();
    assert!(d <= t, "wait {d:?} > one interval");
    assert!(d + spent >= t, "wait {d:?} too short (spent {spent:?})");
    // Exact: after sleeping the wait, the check passes; right after, one interval again.
    tokio::time::sleep(d).await;
    assert_eq!(gcra.check("burst", slow, b).await.unwrap(), Decision::Allow);
    let Decision::Wait(d2) = gcra.check("burst", slow, b).await.unwrap() else {
        panic!("no permit left after the paced one");
    };
    assert!(d2 <= t, "wait {d2:?}");

    let (rps, burst) = (200.0, 10u32);
    let t_us = 5_000u64;

    // Paced run, ~1 s: the bound ⌊W/T⌋ + B holds in every window, on the server's clock.
    let paced = drive(&gcra, "paced", rps, burst, Duration::from_secs(1)).await;
    let times = &paced.times;
    for w_ms in [5u64, 50, 100, 250, 500, 1000] {
        let w = w_ms * 1000;
        let bound = (w / t_us) as usize + burst as usize;
        let got = max_in_window(times, w);
        assert!(got <= bound, "window {w_ms} ms: {got} > bound {bound}");
    }
    let span_s = (times.last().unwrap() - times[0]) as f64 / 1e6;
    let expected = rps * span_s + f64::from(burst);
    println!(
        "gcra 200 rps B=10: {} admitted over {:.3} s (bound {:.0})",
        times.len(),
        span_s,
        expected
    );
    // Not too slow: every wait is exact (a check after sleeping it is admitted) and at
    // most one interval. How close the run comes to the rate depends on how late the
    // machine's timers fire, a figure for `bench_redis`, not for a test.
    assert_eq!(paced.refused_after_wait, 0, "a wait slept was not enough");
    assert!(
        paced.longest_wait <= Duration::from_micros(t_us),
        "waited {:?}",
        paced.longest_wait
    );

    // The key expires once it is back to a full burst.
    let ttl = server.raw(&["PTTL", &RedisGcra::redis_key("paced")]).await;
    let redis::Value::Int(ttl) = ttl else {
        panic!("PTTL {ttl:?}")
    };
    assert!((1..=(burst as i64) * 5 + 1).contains(&ttl), "pttl {ttl}");
}

#[actix_rt::test]
async fn three_processes_share_one_budget() {
    let server = RedisServer::start();
    let (rps, burst) = (300.0, 10u32);
    let t_us = 3_334u64;
    let run = Duration::from_millis(1500);
    // Three handles = three connections, like three processes.
    let procs: Vec<RedisGcra> = (0..3).map(|_| RedisGcra::new(server.connect())).collect();
    let started = Instant::now();
    let results = futures_util::future::join_all(
        procs
            .iter()
            .map(|g| drive(g, "shared-site", rps, burst, run)),
    )
    .await;
    let wall = started.elapsed().as_secs_f64();
    let per: Vec<usize> = results.iter().map(|d| d.times.len()).collect();
    let longest_wait = results.iter().map(|d| d.longest_wait).max().unwrap();
    let mut times: Vec<u64> = results.into_iter().flat_map(|d| d.times).collect();
    times.sort_unstable();
    for w_ms in [10u64, 100, 500, 1000] {
        let w = w_ms * 1000;
        let bound = (w / t_us) as usize + burst as usize;
        let got = max_in_window(&times, w);
        assert!(got <= bound, "window {w_ms} ms: {got} > {bound}");
    }
    let budget = rps * wall;
    println!(
        "3 processes, 300 rps shared: {} admitted ({per:?}) in {wall:.3} s = {:.1} % of {budget:.0}",
        times.len(),
        100.0 * times.len() as f64 / budget
    );
    assert!(
        per.iter().all(|&n| n > 0),
        "every process got some: {per:?}"
    );
    // The budget is not wasted by the limiter: however the three race, none is told to
    // wait longer than one interval (the share of the budget they reach is the machine's
    // timers' figure; `bench_redis` measures it).
    assert!(
        longest_wait <= Duration::from_micros(t_us),
        "waited {longest_wait:?}"
    );
}

#[actix_rt::test]
async fn noscript_reload_after_script_flush() {
    let server = RedisServer::start();
    let redis = server.connect();
    let gcra = RedisGcra::new(redis.clone());
    assert!(gcra.check("k", 10.0, 1).await.unwrap().is_allow());
    assert_eq!(
        redis.stats().script_reloads,
        1,
        "first use loads the script"
    );
    server.raw(&["SCRIPT", "FLUSH"]).await;
    assert!(!gcra.check("k", 10.0, 1).await.unwrap().is_allow());
    assert_eq!(
        redis.stats().script_reloads,
        2,
        "reloaded after SCRIPT FLUSH"
    );
    assert!(!gcra.check("k", 10.0, 1).await.unwrap().is_allow());
    assert_eq!(redis.stats().script_reloads, 2, "cached again");
    // Bad arguments are the caller's error, not an outage.
    let e = gcra.check("k", 0.0, 1).await.unwrap_err();
    assert!(matches!(e, RedisError::InvalidArgument(_)) && !e.is_outage());
    assert_eq!(redis.stats().outages, 0);
}

#[actix_rt::test]
async fn shared_rates_reach_other_subscribers() {
    let server = RedisServer::start();
    let a = SharedRates::new(server.connect());
    let b = SharedRates::new(server.connect());
    let mut sub_b = b.subscribe().await.unwrap();
    let mut sub_a = a.subscribe().await.unwrap();

    let sent = a
        .set("exit1|example.org", 12.5, Some(Duration::from_millis(750)))
        .await
        .unwrap();
    assert_eq!(sent.pause_remaining(), Some(Duration::from_millis(750)));
    let got = tokio::time::timeout(Duration::from_secs(2), sub_b.recv())
        .await
        .expect("b hears a within 2 s")
        .expect("subscription open");
    let RateMessage::Update(u) = got else {
        panic!("{got:?}")
    };
    assert_eq!(u, sent);
    assert_eq!(u.origin, a.origin());

    // Own messages are not echoed back.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sub_a.try_recv(), None);

    // Stored for later readers, on the server clock.
    let stored = b.get("exit1|example.org").await.unwrap().unwrap();
    assert_eq!(stored.rps, 12.5);
    assert_eq!(stored.pause_until_ms, sent.pause_until_ms);
    assert!(stored.pause_remaining().unwrap() <= Duration::from_millis(750));
    assert_eq!(b.get("nobody").await.unwrap(), None);
    let ttl = server
        .raw(&["PTTL", &SharedRates::redis_key("exit1|example.org")])
        .await;
    // The key lives its ttl (ten minutes) past the pause's end.
    assert!(
        matches!(ttl, redis::Value::Int(t) if t > 0 && t <= 600_750),
        "{ttl:?}"
    );
}

/// A process's rise decided before another's cut reached it must not undo the cut: Redis
/// refuses a rise whose starting rate is above what is stored, and publishes nothing.
#[actix_rt::test]
async fn a_rise_over_a_cut_it_has_not_seen_is_refused() {
    let server = RedisServer::start();
    let a = SharedRates::new(server.connect());
    let b = SharedRates::new(server.connect());
    let watcher = SharedRates::new(server.connect());
    let mut heard = watcher.subscribe().await.unwrap();
    let key = "*|example.org";

    b.set(key, 859.0, None).await.unwrap();
    a.set(key, 773.0, Some(Duration::from_millis(500)))
        .await
        .unwrap();
    let Raised::Refused(stored) = b.raise(key, 934.0, None, 859.0).await.unwrap() else {
        panic!("a rise from 859 stored over the cut to 773");
    };
    assert_eq!(stored.rps, 773.0);
    assert!(
        stored.pause_remaining().is_some(),
        "the cut's pause comes back"
    );
    assert_eq!(b.get(key).await.unwrap().unwrap().rps, 773.0);
    // A rise from the stored rate, or from below it (growth elsewhere it had not seen),
    // is stored.
    let Raised::Stored(_) = b.raise(key, 780.0, None, 773.0).await.unwrap() else {
        panic!("a rise from the stored rate refused");
    };
    let Raised::Stored(_) = a.raise(key, 800.0, None, 700.0).await.unwrap() else {
        panic!("a rise from below the stored rate refused");
    };
    // What was published, in order: the refused rise is not among it.
    let mut rates = Vec::new();
    while rates.len() < 4 {
        let got = tokio::time::timeout(Duration::from_secs(5), heard.recv())
            .await
            .expect("a message within 5 s")
            .expect("subscription open");
        if let RateMessage::Update(u) = got {
            rates.push(u.rps);
        }
    }
    assert_eq!(rates, [859.0, 773.0, 780.0, 800.0]);
}

#[actix_rt::test]
async fn frontier_dead_consumer_entries_claimed_each_url_done_once() {
    let server = RedisServer::start();
    let urls: Vec<String> = (0..1000)
        .map(|i| format!("http://127.0.0.1/page/{i}"))
        .collect();
    let producer = SharedFrontier::open(&server.connect(), "q").await.unwrap();
    assert_eq!(producer.enqueue(&urls).await.unwrap(), 1000);

    // Consumer A completes 300 URLs, takes 40 more and dies without acknowledging them.
    let a = SharedFrontier::open(&server.connect(), "q").await.unwrap();
    let mut a_done = 0;
    let mut a_lost = HashSet::new();
    for _ in 0..100 {
        let batch = a.next("a", 20, Duration::ZERO).await.unwrap();
        if a_done >= 300 {
            a_lost.extend(batch.into_iter().map(|e| e.url));
            break;
        }
        for e in &batch {
            assert!(a.complete(e).await.unwrap());
            a_done += 1;
        }
    }
    drop(a);
    assert_eq!(a_lost.len(), 20, "a holds one batch of 20");

    // Consumer B takes the rest, then claims what A left pending for ≥ 200 ms.
    let b = SharedFrontier::open(&server.connect(), "q").await.unwrap();
    let mut firsts: HashMap<String, u32> = HashMap::new();
    let mut claimed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let mut batch = b.next("b", 50, Duration::from_millis(50)).await.unwrap();
        if batch.is_empty() {
            let stale = b
                .claim_stale("b", Duration::from_millis(200), 100)
                .await
                .unwrap();
            claimed.extend(stale.iter().map(|e| e.url.clone()));
            batch = stale;
        }
        if batch.is_empty() && b.pending().await.unwrap() == 0 {
            break;
        }
        for e in &batch {
            if b.is_done(&e.url).await.unwrap() {
                b.ack(&e.id).await.unwrap();
                continue;
            }
            if b.complete(e).await.unwrap() {
                *firsts.entry(e.url.clone()).or_default() += 1;
            }
        }
    }
    let claimed_set: HashSet<String> = claimed.iter().cloned().collect();
    assert_eq!(claimed_set, a_lost, "b claimed exactly what a left pending");
    assert_eq!(claimed.len(), a_lost.len());
    assert_eq!(firsts.len() + a_done, 1000);
    assert!(firsts.values().all(|&n| n == 1));
    assert_eq!(b.done_count().await.unwrap(), 1000, "every URL done once");
    assert_eq!(b.pending().await.unwrap(), 0, "everything acknowledged");
    // A URL completed twice counts once.
    let again = exitcrawl_redis::SharedFrontierEntry {
        id: "0-1".into(),
        url: urls[0].clone(),
        tries: 0,
    };
    assert!(!b.complete(&again).await.unwrap());
    println!(
        "frontier: a completed {a_done}, b completed {} of which {} claimed from a",
        firsts.len(),
        claimed.len()
    );
}

#[actix_rt::test]
async fn frontier_enqueues_once_claims_only_from_the_dead_and_trims() {
    let server = RedisServer::start();
    let urls: Vec<String> = (0..100)
        .map(|i| format!("http://127.0.0.1/p/{i}"))
        .collect();
    let f = SharedFrontier::open(&server.connect(), "q").await.unwrap();
    assert!(f.created());
    assert_eq!(f.enqueue(&urls).await.unwrap(), 100);
    assert_eq!(
        f.enqueue(&urls).await.unwrap(),
        0,
        "queued already: skipped"
    );
    let stream = f.stream_key().to_string();
    let xlen = || async { server.raw(&["XLEN", &stream]).await };
    assert_eq!(xlen().await, redis::Value::Int(100));

    let ttl = Duration::from_millis(300);
    for c in ["a", "b", "c"] {
        f.heartbeat(c, ttl).await.unwrap();
    }
    let a = f.next("a", 30, Duration::ZERO).await.unwrap();
    let b = f.next("b", 30, Duration::ZERO).await.unwrap();
    assert_eq!((a.len(), b.len()), (30, 30));
    // Pending for a long time means nothing while the heartbeat lives.
    let early = f.claim_dead("c").await.unwrap();
    assert_eq!((early.entries.len(), early.removed), (0, 0));

    // a stops sending heartbeats: once its key expired, one pass takes all 30 of its
    // entries and removes it; b, still beating, keeps its own.
    let expired = support::eventually(Duration::from_secs(5), || async {
        f.heartbeat("b", ttl).await.unwrap();
        f.heartbeat("c", ttl).await.unwrap();
        server.raw(&["EXISTS", "exitcrawl:alive:q:a"]).await == redis::Value::Int(0)
    })
    .await;
    assert!(expired, "a's heartbeat did not expire");
    let taken = f.claim_dead("c").await.unwrap();
    let mut got: Vec<&str> = taken.entries.iter().map(|e| e.url.as_str()).collect();
    let mut want: Vec<&str> = a.iter().map(|e| e.url.as_str()).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "a's whole pending list in one pass");
    assert_eq!(taken.removed, 1);
    let consumers = server
        .raw(&["XINFO", "CONSUMERS", f.stream_key(), "exitcrawl"])
        .await;
    assert!(
        matches!(&consumers, redis::Value::Array(c) if c.len() == 2),
        "a left the group: {consumers:?}"
    );

    // A local failure goes back to the end of the queue with its count, once: a retry
    // after an answer that was lost adds nothing (the xlen below counts b[0] once).
    f.requeue(&b[0], 1).await.unwrap();
    f.requeue(&b[0], 1).await.unwrap();
    for e in taken.entries.iter().chain(&b[1..]) {
        assert!(f.complete(e).await.unwrap());
    }
    assert_eq!(f.enqueue(&urls[..10]).await.unwrap(), 0, "done: skipped");
    // 60 delivered and acknowledged (b[0] too, requeued): they go.
    assert_eq!(f.trim().await.unwrap(), 60);
    assert_eq!(
        xlen().await,
        redis::Value::Int(41),
        "40 never delivered + b[0] again"
    );
    let rest = f.next("c", 100, Duration::ZERO).await.unwrap();
    assert_eq!(rest.len(), 41);
    let again = rest.iter().find(|e| e.url == b[0].url).expect("requeued");
    assert_eq!(again.tries, 1);
    assert!(rest
        .iter()
        .filter(|e| e.url != b[0].url)
        .all(|e| e.tries == 0));
    // The stream holds what is pending.
    assert_eq!(f.trim().await.unwrap(), 0);
    f.leave("c").await.unwrap();
    assert_eq!(
        f.pending().await.unwrap(),
        41,
        "c's entries stay pending after it left"
    );
}

#[actix_rt::test]
async fn outage_errors_fast_then_recovers_after_restart() {
    let mut server = RedisServer::start();
    let redis = server.connect();
    let gcra = RedisGcra::new(redis.clone());
    let rates = SharedRates::new(redis.clone());
    let frontier = SharedFrontier::open(&redis, "q").await.unwrap();
    let mut sub = SharedRates::new(server.connect())
        .subscribe()
        .await
        .unwrap();
    assert!(gcra.check("k", 1000.0, 5).await.unwrap().is_allow());
    assert_eq!(redis.stats().outages, 0);

    server.kill();
    // Every kind of call fails, bounded in time, and never panics.
    for i in 0..20 {
        let t = Instant::now();
        let e = gcra.check("k", 1000.0, 5).await.unwrap_err();
        assert!(e.is_outage(), "call {i}: {e:?}");
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "call {i} took {:?}",
            t.elapsed()
        );
        assert!(!e.to_string().is_empty());
    }
    let t = Instant::now();
    assert!(rates.set("k", 5.0, None).await.unwrap_err().is_outage());
    assert!(frontier
        .enqueue(["http://x/"])
        .await
        .unwrap_err()
        .is_outage());
    assert!(frontier
        .next("c", 10, Duration::from_millis(100))
        .await
        .unwrap_err()
        .is_outage());
    assert!(t.elapsed() < Duration::from_secs(3));
    let s = redis.stats();
    assert_eq!(s.outages, 1, "one outage, however many failed calls: {s:?}");
    assert!(s.errors >= 20);
    assert!(s.down_for.is_some());

    server.restart();
    let t = Instant::now();
    let mut ok = false;
    // Bounded: backoff grows to 5 s at most, and the deadline is 15 s.
    while t.elapsed() < Duration::from_secs(15) {
        match gcra.check("k2", 1000.0, 5).await {
            Ok(d) => {
                ok = d.is_allow();
                break;
            }
            Err(e) => {
                assert!(e.is_outage(), "{e:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    assert!(ok, "no recovery within 15 s");
    println!("recovered {:?} after restart", t.elapsed());
    let s = redis.stats();
    assert_eq!((s.outages, s.down_for), (1, None), "{s:?}");
    assert!(
        s.script_reloads >= 2,
        "the restarted server needed the script again"
    );
    // The server came back without persistence: the queue is gone, and said so.
    let lost = frontier.enqueue(["http://x/"]).await.unwrap_err();
    assert_eq!(lost.code(), Some("NOGROUP"), "{lost}");
    let frontier = SharedFrontier::open(&redis, "q").await.unwrap();
    assert!(frontier.created());
    assert_eq!(frontier.enqueue(["http://x/"]).await.unwrap(), 1);

    // The subscription comes back by itself and says so.
    let t = Instant::now();
    let mut resubscribed = false;
    while t.elapsed() < Duration::from_secs(10) {
        match tokio::time::timeout(Duration::from_millis(200), sub.recv()).await {
            Ok(Some(RateMessage::Resubscribed)) => {
                resubscribed = true;
                break;
            }
            Ok(other) => panic!("{other:?}"),
            Err(_) => {}
        }
    }
    assert!(resubscribed, "subscription not restored within 10 s");
    rates.set("k", 7.0, None).await.unwrap();
    let m = tokio::time::timeout(Duration::from_secs(2), sub.recv())
        .await
        .expect("message after resubscribe");
    assert!(matches!(m, Some(RateMessage::Update(u)) if u.rps == 7.0));
}

#[actix_rt::test]
async fn frontier_created_again_refuses_what_an_older_handle_owes() {
    let server = RedisServer::start();
    let urls: Vec<String> = (0..10).map(|i| format!("http://127.0.0.1/e/{i}")).collect();
    let old = SharedFrontier::open(&server.connect(), "q").await.unwrap();
    assert!(old.created());
    let peer = SharedFrontier::open(&server.connect(), "q").await.unwrap();
    assert!(!peer.created());
    assert_eq!(old.enqueue(&urls).await.unwrap(), 10);
    let held = old.next("a", 4, Duration::ZERO).await.unwrap();
    assert_eq!(held.len(), 4);
    // Two handles of one queue agree: what one took, the other may settle.
    assert!(peer.complete(&held[0]).await.unwrap());

    // Redis lost everything, and a process opened the queue again: empty, a new epoch.
    server.raw(&["FLUSHALL"]).await;
    let new = SharedFrontier::open(&server.connect(), "q").await.unwrap();
    assert!(new.created());
    let lost = |r: Result<(), RedisError>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.code(), Some("NOGROUP"), "{what}: {e}");
        assert!(e.to_string().contains("created again"), "{what}: {e}");
    };
    lost(old.requeue(&held[1], 1).await, "requeue");
    lost(old.complete(&held[2]).await.map(drop), "complete");
    lost(old.ack(&held[3].id).await.map(drop), "ack");
    lost(old.mark_done(&held[3].url).await.map(drop), "mark_done");
    lost(old.pending().await.map(drop), "pending");
    lost(old.claim_dead("a").await.map(drop), "claim_dead");
    lost(old.enqueue(&urls).await.map(drop), "enqueue");
    lost(old.next("a", 10, Duration::ZERO).await.map(drop), "next");
    lost(old.own_pending("a", 10).await.map(drop), "own_pending");
    // Nothing of the lost crawl reached the new queue.
    assert_eq!(
        server.raw(&["XLEN", new.stream_key()]).await,
        redis::Value::Int(0)
    );
    assert_eq!(new.done_count().await.unwrap(), 0);
    assert_eq!(new.pending().await.unwrap(), 0);
    assert_eq!(new.enqueue(&urls[..2]).await.unwrap(), 2);
    lost(old.next("a", 10, Duration::ZERO).await.map(drop), "next");
    assert_eq!(new.next("b", 10, Duration::ZERO).await.unwrap().len(), 2);
    // The old handle's reads made no consumer of the new queue's group.
    let consumers = server
        .raw(&["XINFO", "CONSUMERS", new.stream_key(), "exitcrawl"])
        .await;
    assert!(
        matches!(&consumers, redis::Value::Array(c) if c.len() == 1),
        "{consumers:?}"
    );
}
