//! The shared Redis frontier of the `exitcrawl` binary against what distributed crawls
//! meet: consumers killed and restarted with the same command, Redis killed and restarted
//! (with an append-only file, and without persistence), a lost queue opened again by
//! another consumer, a broken consumer beside a good one, live rate-limited consumers and
//! a live consumer held past its heartbeat with a short `--claim-idle`, the same URLs
//! enqueued twice. What the local test site and Redis saw is asserted; every wait is for
//! an event (records in a file, a process's exit, a key in Redis), bounded by a deadline;
//! the one fixed delay is a hold that is itself the case under test.

mod cli_support;
// The actors crate's test helpers, for their `RedisServer`.
#[path = "../../actors/tests/support/mod.rs"]
mod support;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use cli_support::{assert_ok, json, records, run, s, spawn, stderr, wait_bounded, TempDir};
use exitcrawl::shared_frontier::RECONNECT_MAX;
use exitcrawl_testsite::{SiteConfig, TestSite};
use support::RedisServer;

/// Two exits on 127.0.0.2 and .3, 8 fetches at once; `crawler` and `limiter` are TOML
/// lines of those sections.
fn config(crawler: &str, limiter: &str) -> String {
    format!(
        r#"
[crawler]
concurrency = 8
max_retries = 1
retry_backoff_base_ms = 20
retry_backoff_max_ms = 200
{crawler}

[limiter]
{limiter}

[[exits]]
name = "e2"
source_ip = "127.0.0.2"

[[exits]]
name = "e3"
source_ip = "127.0.0.3"
"#
    )
}

const NO_LIMIT: &str = "algorithm = \"none\"";

/// A site whose every answer takes `latency`.
fn site(latency: Duration) -> TestSite {
    TestSite::start(SiteConfig {
        latency,
        ..SiteConfig::default()
    })
}

/// How many times the site was asked for each page (robots.txt left out).
fn fetches(site: &TestSite) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for r in site.requests() {
        if r.path != "/robots.txt" {
            *n.entry(r.path).or_default() += 1;
        }
    }
    n
}

/// A crawl's URL file and its URLs: `/{tag}/0` … on `site`.
fn url_file(dir: &TempDir, site: &TestSite, tag: &str, n: usize) -> (PathBuf, Vec<String>) {
    let urls: Vec<String> = (0..n).map(|i| site.url(&format!("/{tag}/{i}"))).collect();
    let path = dir.file(&format!("{tag}.txt"), &(urls.join("\n") + "\n"));
    (path, urls)
}

fn enqueue(list: &Path, queue: &str, extra: &[&str]) -> String {
    let mut args = vec!["--enqueue", s(list), "--frontier", queue];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_ok(&o);
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A consumer writing `out` and `out`.json (its summary), with `--idle-exit 2` unless
/// `extra` says otherwise.
fn consumer(cfg: &Path, queue: &str, out: &Path, extra: &[&str]) -> Child {
    let summary = out.with_extension("json");
    let mut args = vec![
        "--config",
        s(cfg),
        "--frontier",
        queue,
        "--out",
        s(out),
        "--summary",
        s(&summary),
        "--quiet",
    ];
    if !extra.contains(&"--idle-exit") {
        args.extend(["--idle-exit", "2"]);
    }
    args.extend_from_slice(extra);
    spawn(&args)
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

/// Wait (polling every 20 ms) until `cond` holds; fails after `limit` saying `what`.
fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < until, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig}");
}

/// `--dedupe` of `outs`: each URL's number of records in the merge, every one checked
/// to be a 200.
fn merged(dir: &TempDir, outs: &[&Path]) -> HashMap<String, usize> {
    let merged = dir.path("merged.jsonl");
    let mut args = Vec::new();
    for o in outs {
        args.extend(["--dedupe", s(o)]);
    }
    args.extend(["--out", s(&merged)]);
    assert_ok(&run(&args));
    let mut per_url = HashMap::new();
    for r in records(&merged) {
        assert_eq!(r["status"], 200, "{r}");
        *per_url
            .entry(r["url"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    per_url
}

/// Of the URLs recorded in `out`, how many the done-set of the queue `jobs` lacks; and
/// how many of its URLs are done without a record in `out`.
fn records_against_done(redis: &RedisServer, out: &Path) -> (usize, usize) {
    let recorded: HashSet<String> = records(out)
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_string())
        .collect();
    let done = |u: &str| redis.int(&["SISMEMBER", "exitcrawl:done:jobs", u]) == 1;
    let not_done = recorded.iter().filter(|u| !done(u)).count();
    let all_done = redis.int(&["SCARD", "exitcrawl:done:jobs"]) as usize;
    (not_done, all_done - (recorded.len() - not_done))
}

fn assert_one_record_each(per_url: &HashMap<String, usize>, urls: &[String]) {
    for u in urls {
        assert_eq!(per_url.get(u), Some(&1), "{u}");
    }
    assert_eq!(per_url.len(), urls.len());
}

#[test]
fn a_consumer_stopped_or_killed_goes_on_with_the_same_command() {
    const URLS: usize = 200;
    let redis = RedisServer::start();
    let site = site(Duration::from_millis(100));
    let dir = TempDir::new("frontier-restart");
    let cfg = dir.file("c.toml", &config("", NO_LIMIT));
    let (list, urls) = url_file(&dir, &site, "r", URLS);
    let queue = format!("{}jobs", redis.url());
    assert_eq!(
        enqueue(&list, &queue, &[]),
        format!("enqueued {URLS} skipped 0")
    );
    let out = dir.path("out.jsonl");
    let same = ["--claim-idle", "1"];

    // SIGTERM: the fetches in flight finish, the rest goes back to the queue.
    let c = consumer(&cfg, &queue, &out, &same);
    wait_until(Duration::from_secs(30), "30 records", || lines(&out) >= 30);
    signal(&c, "-TERM");
    let o = wait_bounded(c, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("goes back to the queue"), "{err}");
    assert!(err.contains("run the same command again"), "{err}");
    let after_term = std::fs::read_to_string(&out).unwrap();
    // Stopping, it synced its records and marked every one of their URLs done.
    assert_eq!(records_against_done(&redis, &out), (0, 0));

    // The same command appends; SIGKILL it mid-crawl.
    let c = consumer(&cfg, &queue, &out, &same);
    let n = after_term.lines().count();
    wait_until(Duration::from_secs(30), "30 more records", || {
        lines(&out) >= n + 30
    });
    signal(&c, "-KILL");
    wait_bounded(c, Duration::from_secs(10));
    let after_kill = std::fs::read_to_string(&out).unwrap();
    assert!(after_kill.starts_with(&after_term), "records were kept");
    // Every URL marked done has its record. The records not marked done yet were
    // waiting for the sync that comes at most 100 ms after a record (at 100 ms a page,
    // at most two per fetch slot): their URLs are fetched again.
    let (not_done, done_unrecorded) = records_against_done(&redis, &out);
    assert_eq!(done_unrecorded, 0, "a URL done without a record");
    assert!(not_done <= 16, "{not_done} records waiting for a sync");

    // Once more: the killed run's entries are claimed once its heartbeat expired.
    let o = wait_bounded(consumer(&cfg, &queue, &out, &same), Duration::from_secs(60));
    assert_ok(&o);
    assert!(stderr(&o).contains("claimed"), "{}", stderr(&o));
    let last = std::fs::read_to_string(&out).unwrap();
    let kept = after_kill.rfind('\n').map_or(0, |i| i + 1);
    assert!(last.starts_with(&after_kill[..kept]), "records were kept");

    assert_one_record_each(&merged(&dir, &[&out]), &urls);
    let asked = fetches(&site);
    assert_eq!(asked.len(), URLS);
    let again: usize = asked.values().map(|n| n - 1).sum();
    println!(
        "restart: {} records over 3 runs, {again} URLs fetched twice ({not_done} recorded \
         and not marked done at the kill)",
        last.lines().count()
    );
    assert!(
        again <= 8 + not_done,
        "at most the fetches in flight at the kill and the records not marked done \
         fetched again: {again}, {not_done} not marked done"
    );
    assert_eq!(redis.int(&["SCARD", "exitcrawl:done:jobs"]), URLS as i64);
}

#[test]
fn aof_redis_killed_and_restarted_mid_crawl_every_url_one_record() {
    const URLS: usize = 400;
    let mut redis = RedisServer::start_aof();
    let site = site(Duration::from_millis(100));
    let dir = TempDir::new("frontier-aof");
    let cfg = dir.file("c.toml", &config("", NO_LIMIT));
    let (list, urls) = url_file(&dir, &site, "a", URLS);
    let queue = format!("{}jobs", redis.url());
    enqueue(&list, &queue, &[]);
    let (out_a, out_b) = (dir.path("a.jsonl"), dir.path("b.jsonl"));
    let a = consumer(&cfg, &queue, &out_a, &[]);
    let b = consumer(&cfg, &queue, &out_b, &[]);
    let total = || lines(&out_a) + lines(&out_b);
    wait_until(Duration::from_secs(30), "80 records", || total() >= 80);
    redis.kill();
    // The fetches in flight go on while Redis is away: their records are written.
    let at_kill = total();
    wait_until(Duration::from_secs(30), "records during the outage", || {
        total() >= at_kill + 4
    });
    redis.restart();
    let (oa, ob) = (
        wait_bounded(a, Duration::from_secs(90)),
        wait_bounded(b, Duration::from_secs(90)),
    );
    assert_ok(&oa);
    assert_ok(&ob);
    let err = stderr(&oa) + &stderr(&ob);
    assert!(err.contains("Redis does not answer"), "{err}");
    assert!(err.contains("Redis answers again"), "{err}");

    assert_one_record_each(&merged(&dir, &[&out_a, &out_b]), &urls);
    let asked = fetches(&site);
    assert_eq!(asked.len(), URLS);
    let again: usize = asked.values().map(|n| n - 1).sum();
    println!("aof restart: {again} of {URLS} URLs fetched twice");
    assert!(again <= 16, "{again} fetched twice");
    assert_eq!(redis.int(&["SCARD", "exitcrawl:done:jobs"]), URLS as i64);
    assert_eq!(
        redis.cmd(&[
            "XPENDING",
            "exitcrawl:frontier:jobs",
            "exitcrawl",
            "-",
            "+",
            "10"
        ]),
        "*0"
    );
}

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

#[test]
fn a_broken_consumer_gives_its_urls_back_and_the_good_one_finishes_them() {
    const URLS: usize = 200;
    let redis = RedisServer::start();
    let site = site(Duration::from_millis(20));
    let dir = TempDir::new("frontier-broken");
    let good = dir.file("good.toml", &config("", NO_LIMIT));
    let broken = dir.file(
        "broken.toml",
        &config("timeout_ms = 1\nconnect_timeout_ms = 1", NO_LIMIT),
    );
    let (list, urls) = url_file(&dir, &site, "b", URLS);
    let queue = format!("{}jobs", redis.url());
    enqueue(&list, &queue, &[]);
    let (out_bad, out_good) = (dir.path("bad.jsonl"), dir.path("good.jsonl"));
    let bad = consumer(&broken, &queue, &out_bad, &[]);
    let good = consumer(&good, &queue, &out_good, &[]);
    let ob = wait_bounded(bad, Duration::from_secs(60));
    let og = wait_bounded(good, Duration::from_secs(60));
    assert_ok(&og);
    assert_eq!(ob.status.code(), Some(1), "stderr: {}", stderr(&ob));
    let err = stderr(&ob);
    assert!(err.contains("failed on this consumer's side"), "{err}");
    assert!(err.contains("takes no more work"), "{err}");
    let bad_sum = json(&out_bad.with_extension("json"));
    println!("broken consumer: {bad_sum}");
    assert_eq!(bad_sum["total"], 0, "no record: every URL went back");
    assert!(bad_sum["requeued"].as_u64().unwrap() >= 16, "{bad_sum}");
    assert_eq!(records(&out_bad).len(), 0);
    let recs = records(&out_good);
    assert_eq!(recs.len(), URLS, "the good consumer recorded every URL");
    assert_one_record_each(&merged(&dir, &[&out_good]), &urls);
    assert!(
        fetches(&site).values().all(|n| *n == 1),
        "the site saw each once"
    );
}

#[test]
fn live_rate_limited_consumers_lose_nothing_to_a_short_claim_idle() {
    const URLS: usize = 30;
    let redis = RedisServer::start();
    let site = site(Duration::ZERO);
    let dir = TempDir::new("frontier-live");
    // 3 requests a second per host and 8 in flight: an entry waits up to ~2.7 s for its
    // turn, longer than --claim-idle 2.
    let cfg = dir.file(
        "c.toml",
        &config(
            "",
            "algorithm = \"token_bucket\"\nscope = \"host\"\ninitial_rps = 3.0",
        ),
    );
    let (list, urls) = url_file(&dir, &site, "v", URLS);
    let queue = format!("{}jobs", redis.url());
    enqueue(&list, &queue, &[]);
    let outs = [dir.path("a.jsonl"), dir.path("b.jsonl")];
    let cs: Vec<Child> = outs
        .iter()
        .map(|o| consumer(&cfg, &queue, o, &["--claim-idle", "2"]))
        .collect();
    let os: Vec<Output> = cs
        .into_iter()
        .map(|c| wait_bounded(c, Duration::from_secs(60)))
        .collect();
    for o in &os {
        assert_ok(o);
        assert!(!stderr(o).contains("claimed"), "{}", stderr(o));
    }
    // 30 URLs at 2 × 3 requests a second: the crawl outlasted --claim-idle twice over,
    // with every consumer's entries pending for up to ~2.7 s.
    let first: Vec<Instant> = site.requests().iter().map(|r| r.arrived).collect();
    let span = first[first.len() - 1].duration_since(first[0]);
    assert!(span > Duration::from_secs(4), "the crawl took {span:?}");
    let asked = fetches(&site);
    assert_eq!(asked.len(), URLS);
    assert!(
        asked.values().all(|n| *n == 1),
        "a URL fetched twice: {asked:?}"
    );
    let per_url = merged(&dir, &[&outs[0], &outs[1]]);
    assert_one_record_each(&per_url, &urls);
    assert_eq!(records(&outs[0]).len() + records(&outs[1]).len(), URLS);
}

#[test]
fn the_same_urls_enqueued_twice_are_pushed_and_fetched_once() {
    const URLS: usize = 100;
    let redis = RedisServer::start();
    let site = site(Duration::ZERO);
    let dir = TempDir::new("frontier-twice");
    let cfg = dir.file("c.toml", &config("", NO_LIMIT));
    let (list, urls) = url_file(&dir, &site, "t", URLS);
    let queue = format!("{}jobs", redis.url());
    assert_eq!(enqueue(&list, &queue, &[]), "enqueued 100 skipped 0");
    assert_eq!(enqueue(&list, &queue, &[]), "enqueued 0 skipped 100");
    assert_eq!(redis.int(&["XLEN", "exitcrawl:frontier:jobs"]), URLS as i64);
    let out = dir.path("o.jsonl");
    assert_ok(&wait_bounded(
        consumer(&cfg, &queue, &out, &[]),
        Duration::from_secs(60),
    ));
    assert_one_record_each(&merged(&dir, &[&out]), &urls);
    assert!(fetches(&site).values().all(|n| *n == 1));
    // Done in this crawl: skipped again; the acknowledged entries are trimmed.
    assert_eq!(enqueue(&list, &queue, &[]), "enqueued 0 skipped 100");
    assert!(redis.int(&["XLEN", "exitcrawl:frontier:jobs"]) <= 1);
    // --recrawl starts the crawl over.
    assert_eq!(
        enqueue(&list, &queue, &["--recrawl"]),
        "enqueued 100 skipped 0"
    );
    assert_eq!(redis.int(&["SCARD", "exitcrawl:done:jobs"]), 0);
    assert_ok(&wait_bounded(
        consumer(&cfg, &queue, &out, &[]),
        Duration::from_secs(60),
    ));
    assert!(
        fetches(&site).values().all(|n| *n == 2),
        "fetched again, once"
    );
    assert_eq!(records(&out).len(), 2 * URLS, "appended");
}

#[test]
fn frontier_flags_name_what_is_wrong() {
    let dir = TempDir::new("frontier-flags");
    let cfg = dir.file("c.toml", &config("", NO_LIMIT));
    let list = dir.file("u.txt", "http://127.0.0.1:1/\n");
    let q = "redis://127.0.0.1:1/q";
    for (args, needle) in [
        (
            vec!["--config", s(&cfg), "--urls", s(&list), "--redis-wait", "5"],
            "--redis-wait only go with --frontier",
        ),
        (
            vec!["--config", s(&cfg), "--urls", s(&list), "--recrawl"],
            "--recrawl only goes with --enqueue",
        ),
        (
            vec!["--enqueue", s(&list), "--frontier", q, "--redis-wait", "5"],
            "--enqueue only goes with --frontier and --recrawl",
        ),
        (
            vec![
                "--config",
                s(&cfg),
                "--frontier",
                q,
                "--out",
                "o",
                "--redis-wait",
                "0",
            ],
            "0 seconds is out of range (more than 0, at most 86400)",
        ),
        (
            vec![
                "--config",
                s(&cfg),
                "--frontier",
                q,
                "--out",
                "o",
                "--follow",
            ],
            "--frontier does not go with --follow or --sitemap",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    // Redis away at enqueue time: exit 1, said at once.
    let o = run(&["--enqueue", s(&list), "--frontier", q]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Redis does not answer"),
        "{}",
        stderr(&o)
    );
}
