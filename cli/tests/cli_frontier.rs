//! The shared Redis frontier of the `exitcrawl` binary against what distributed crawls
//! meet: consumers killed and restarted with the same command, Redis killed and restarted
//! with an append-only file, a broken consumer beside a good one, live rate-limited
//! consumers, the same URLs enqueued twice (Redis gone, restarted empty, a queue
//! lost and created again, a slow first heartbeat, reconnect backoff:
//! `cli_frontier_outages.rs`). What the local test site and Redis saw is asserted; every
//! wait is for an event (records in a file, a process's exit, a key in Redis), bounded by
//! a deadline.

mod cli_support;
// The actors crate's test helpers, for their `RedisServer`.
#[path = "../../actors/tests/support/mod.rs"]
mod support;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use cli_support::{assert_ok, json, records, run, s, stderr, wait_bounded, TempDir};
use support::RedisServer;

mod frontier_support;
use frontier_support::*;

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
