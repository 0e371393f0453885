//! The shared Redis frontier of the `exitcrawl` binary when Redis goes away or loses the
//! queue: gone for good (`--redis-wait`), restarted without persistence, a queue lost and
//! created again under a consumer that is crawling or idle, a first heartbeat Redis does
//! not answer, a live consumer held by its reconnect backoff past `--claim-idle`. What the
//! local test site and Redis saw is asserted; every wait is for an event, bounded by a
//! deadline; the one fixed delay is a hold that is itself the case under test.

mod cli_support;
// The actors crate's test helpers, for their `RedisServer`.
#[path = "../../actors/tests/support/mod.rs"]
mod support;

mod frontier_support;

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use cli_support::{assert_ok, json, records, stderr, wait_bounded, TempDir};
use exitcrawl::shared_frontier::RECONNECT_MAX;
use exitcrawl_testsite::TestSite;
use frontier_support::*;
use support::RedisServer;

/// A consumer mid-crawl on its own queue, and when its records started.
fn crawling_consumer(
    redis: &RedisServer,
    dir: &TempDir,
    site: &TestSite,
    extra: &[&str],
) -> (Child, PathBuf) {
    let cfg = dir.file("c.toml", &config("", NO_LIMIT));
    let (list, _) = url_file(dir, site, "l", 300);
    let queue = format!("{}jobs", redis.url());
    enqueue(&list, &queue, &[]);
    let out = dir.path("out.jsonl");
    let c = consumer(&cfg, &queue, &out, extra);
    wait_until(Duration::from_secs(30), "10 records", || lines(&out) >= 10);
    (c, out)
}

#[test]
fn redis_gone_for_good_ends_a_consumer_after_redis_wait() {
    let mut redis = RedisServer::start();
    let site = site(Duration::from_millis(200));
    let dir = TempDir::new("frontier-gone");
    let (c, _) = crawling_consumer(&redis, &dir, &site, &["--redis-wait", "3"]);
    redis.kill();
    let t = Instant::now();
    let o = wait_bounded(c, Duration::from_secs(30));
    let took = t.elapsed();
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    println!("Redis gone: exit 1 after {took:?}");
    assert!(
        took >= Duration::from_millis(2900),
        "gave up before --redis-wait: {took:?}"
    );
    assert!(took < Duration::from_secs(13), "{took:?}");
    assert!(err.contains("Redis does not answer"), "{err}");
    assert!(
        err.contains("did not answer for 3 s (--redis-wait 3)"),
        "{err}"
    );
    assert_eq!(
        err.matches("Redis does not answer").count(),
        1,
        "said once: {err}"
    );
}

#[test]
fn redis_restarted_without_persistence_names_the_lost_queue() {
    let mut redis = RedisServer::start();
    let site = site(Duration::from_millis(200));
    let dir = TempDir::new("frontier-lost");
    let (c, _) = crawling_consumer(&redis, &dir, &site, &[]);
    redis.kill();
    redis.restart();
    let t = Instant::now();
    let o = wait_bounded(c, Duration::from_secs(40));
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    println!("queue lost: exit 1 after {:?}", t.elapsed());
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "well within --redis-wait 60"
    );
    assert!(err.contains("the queue is gone"), "{err}");
    assert!(err.contains("NOGROUP"), "{err}");
    assert!(err.contains("appendonly yes"), "{err}");
    assert_eq!(
        redis.int(&["EXISTS", "exitcrawl:frontier:jobs"]),
        0,
        "not recreated"
    );
}

/// The number after `held ` in a consumer's message about the URLs it held.
fn held_in(err: &str) -> usize {
    err.split("held ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_queue_lost_and_created_again_ends_its_consumer_naming_it() {
    let redis = RedisServer::start();
    let site = site(Duration::from_millis(300));
    let dir = TempDir::new("frontier-recreated");
    let (a, out_a) = crawling_consumer(&redis, &dir, &site, &[]);
    // A is held (as a reconnect backoff holds it) while Redis loses the queue and
    // another consumer opens it again: created empty.
    signal(&a, "-STOP");
    assert_eq!(redis.cmd(&["FLUSHALL"]), "OK");
    let queue = format!("{}jobs", redis.url());
    let out_b = dir.path("b.jsonl");
    let b = consumer(&dir.path("c.toml"), &queue, &out_b, &[]);
    wait_until(Duration::from_secs(10), "B to create the queue", || {
        redis.int(&["EXISTS", "exitcrawl:frontier:jobs"]) == 1
    });
    signal(&a, "-CONT");
    let oa = wait_bounded(a, Duration::from_secs(30));
    let ob = wait_bounded(b, Duration::from_secs(30));
    assert_ok(&ob);
    assert!(stderr(&ob).contains("created empty"), "{}", stderr(&ob));
    let err = stderr(&oa);
    assert_eq!(oa.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("the queue is gone"), "{err}");
    assert!(err.contains("NOGROUP"), "{err}");
    assert!(err.contains("exitcrawl:frontier:jobs"), "{err}");
    // Nothing of the lost crawl went into the new queue.
    assert_eq!(redis.int(&["SCARD", "exitcrawl:done:jobs"]), 0);
    assert_eq!(redis.int(&["XLEN", "exitcrawl:frontier:jobs"]), 0);
    // Every page the site served A has a record, or is among the URLs A says it held.
    let recorded = records(&out_a).len();
    let served = fetches(&site).len();
    println!(
        "queue created again: A exit 1 with {recorded} records, {} held, {served} served",
        held_in(&err)
    );
    assert!(
        served <= recorded + held_in(&err),
        "{served} served, {recorded} recorded: {err}"
    );
}

#[test]
fn an_idle_consumer_takes_nothing_from_a_queue_lost_and_created_again() {
    let redis = RedisServer::start();
    let site = site(Duration::ZERO);
    let dir = TempDir::new("frontier-idle-recreated");
    let cfg = dir.file("c.toml", &config("", NO_LIMIT));
    let queue = format!("{}jobs", redis.url());
    let (old, _) = url_file(&dir, &site, "old", 5);
    enqueue(&old, &queue, &[]);
    let out_a = dir.path("a.jsonl");
    let a = consumer(&cfg, &queue, &out_a, &["--idle-exit", "60"]);
    wait_until(Duration::from_secs(30), "A's 5 records", || {
        lines(&out_a) == 5
    });
    // A is idle, reading the queue again and again. It is held while Redis loses the
    // queue and `--enqueue` creates it again with new URLs (a new epoch); no read of A's
    // is left waiting on the server, whose end the flush would decide.
    signal(&a, "-STOP");
    wait_until(Duration::from_secs(5), "no read waiting on Redis", || {
        blocked_clients(&redis) == 0
    });
    assert_eq!(redis.cmd(&["FLUSHALL"]), "OK");
    let (new, new_urls) = url_file(&dir, &site, "new", 20);
    assert_eq!(enqueue(&new, &queue, &[]), "enqueued 20 skipped 0");
    signal(&a, "-CONT");
    let oa = wait_bounded(a, Duration::from_secs(30));
    let err = stderr(&oa);
    assert_eq!(oa.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("the queue is gone"), "{err}");
    assert!(err.contains("created again"), "{err}");
    // Nothing of A is in the new queue: it is no consumer of its group, nothing is
    // pending, and it fetched and recorded none of the new URLs.
    let stream = "exitcrawl:frontier:jobs";
    assert_eq!(
        redis.cmd(&["XINFO", "CONSUMERS", stream, "exitcrawl"]),
        "*0"
    );
    assert_eq!(
        redis.cmd(&["XPENDING", stream, "exitcrawl", "-", "+", "10"]),
        "*0"
    );
    let recorded: Vec<String> = records(&out_a)
        .iter()
        .map(|r| r["url"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(recorded.len(), 5, "{recorded:?}");
    assert!(
        recorded.iter().all(|u| !new_urls.contains(u)),
        "{recorded:?}"
    );
    assert!(
        !fetches(&site).keys().any(|p| p.starts_with("/new/")),
        "A fetched a URL of the new queue"
    );
    // The new queue is whole: a consumer of its own crawls every URL once.
    let out_b = dir.path("b.jsonl");
    assert_ok(&wait_bounded(
        consumer(&cfg, &queue, &out_b, &[]),
        Duration::from_secs(60),
    ));
    assert_one_record_each(&merged(&dir, &[&out_b]), &new_urls);
}

/// Clients of `redis` waiting in a blocking command (`INFO clients`).
fn blocked_clients(redis: &RedisServer) -> i64 {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", redis.port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"INFO clients\r\n").expect("send");
    let mut r = BufReader::new(c);
    let mut head = String::new();
    r.read_line(&mut head).expect("reply");
    let len: usize = head
        .trim_end()
        .trim_start_matches('$')
        .parse()
        .expect("a bulk reply");
    let mut body = vec![0; len];
    r.read_exact(&mut body).expect("INFO's text");
    let info = String::from_utf8_lossy(&body);
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no blocked_clients in {info:?}"))
}

#[test]
fn a_first_heartbeat_redis_does_not_answer_is_waited_for() {
    const URLS: usize = 10;
    let redis = RedisServer::start();
    let site = site(Duration::ZERO);
    let dir = TempDir::new("frontier-first-beat");
    let cfg = dir.file("c.toml", &config("", NO_LIMIT));
    let (list, urls) = url_file(&dir, &site, "h", URLS);
    enqueue(&list, &format!("{}jobs", redis.url()), &[]);
    // The consumer's first heartbeat, right after it opened the queue, gets no answer
    // for 1.5 s (three times the deadline of a call): Redis, as the consumer sees it,
    // does not answer for a moment.
    let relay = relay_holding_first_heartbeat(redis.port, Duration::from_millis(1500));
    let queue = format!("redis://127.0.0.1:{relay}/jobs");
    let out = dir.path("out.jsonl");
    let o = wait_bounded(
        consumer(&cfg, &queue, &out, &["--redis-wait", "10"]),
        Duration::from_secs(60),
    );
    assert_ok(&o);
    let err = stderr(&o);
    assert!(err.contains("retrying"), "the wait is said: {err}");
    assert!(!err.contains("did not answer for"), "{err}");
    assert_one_record_each(&merged(&dir, &[&out]), &urls);
}

/// A TCP relay to `127.0.0.1:port` on a port of its own; the first command that names a
/// heartbeat key is held for `hold` before it is passed on. Its threads live as long as
/// the test binary.
fn relay_holding_first_heartbeat(port: u16, hold: Duration) -> u16 {
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
    let relay = listener.local_addr().unwrap().port();
    let held = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let held = Arc::clone(&held);
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n @ 1..) = c_in.read(&mut buf) {
                    let names_beat = buf[..n].windows(16).any(|w| w == b"exitcrawl:alive:");
                    if names_beat && !held.swap(true, Ordering::SeqCst) {
                        std::thread::sleep(hold);
                    }
                    if s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s_out.shutdown(Shutdown::Write);
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_in, &mut c_out);
                let _ = c_out.shutdown(Shutdown::Write);
            });
        }
    });
    relay
}

/// Heartbeat keys of the queue `jobs` (one per live consumer).
fn alive(redis: &RedisServer) -> i64 {
    redis.int(&[
        "EVAL",
        "return #redis.call('KEYS', ARGV[1])",
        "0",
        "exitcrawl:alive:jobs:*",
    ])
}

#[test]
fn a_live_consumer_held_by_its_reconnect_backoff_is_not_claimed() {
    let redis = RedisServer::start();
    let site = site(Duration::from_millis(300));
    let dir = TempDir::new("frontier-backoff");
    let short = ["--claim-idle", "2"];
    let (a, out_a) = crawling_consumer(&redis, &dir, &site, &short);
    // Every heartbeat expired, as in an outage longer than --claim-idle; A, live, holds
    // its fetches in flight.
    signal(&a, "-STOP");
    wait_until(Duration::from_secs(10), "A's heartbeat to expire", || {
        alive(&redis) == 0
    });
    // B's first call succeeds at once (it starts as Redis is back), while A's reconnect
    // backoff holds it for up to RECONNECT_MAX more: hold A for a good part of that (the
    // hold is the case under test, not a wait for something to happen).
    let queue = format!("{}jobs", redis.url());
    let out_b = dir.path("b.jsonl");
    let b = consumer(&dir.path("c.toml"), &queue, &out_b, &short);
    wait_until(Duration::from_secs(10), "B's heartbeat", || {
        alive(&redis) == 1
    });
    std::thread::sleep(RECONNECT_MAX - Duration::from_secs(1));
    signal(&a, "-CONT");
    let (oa, ob) = (
        wait_bounded(a, Duration::from_secs(60)),
        wait_bounded(b, Duration::from_secs(60)),
    );
    assert_ok(&oa);
    assert_ok(&ob);
    let claimed = json(&out_b.with_extension("json"))["claimed"].clone();
    assert_eq!(claimed, 0, "B took A's entries over: {}", stderr(&ob));
    let asked = fetches(&site);
    assert_eq!(asked.len(), 300);
    assert!(
        asked.values().all(|n| *n == 1),
        "a URL fetched twice: {:?}",
        asked.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let urls: Vec<String> = (0..300).map(|i| site.url(&format!("/l/{i}"))).collect();
    assert_one_record_each(&merged(&dir, &[&out_a, &out_b]), &urls);
}
