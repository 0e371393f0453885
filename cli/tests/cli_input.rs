//! Bad input on purpose, one test per case, run through the `exitcrawl`
//! binary against a local test site (exits on 127.0.0.2 and .3): what a user would
//! expect — input files unchanged byte for byte, the exit code, the records, and what the
//! site saw.
//!
//! Exits of both address families (one IPv4 exit and a `::1` exit, IPv4 and IPv6 URLs
//! mixed) are tested at the crawler, where the exit each URL went through is visible:
//! `actors/tests/crawler.rs`, `exits_of_both_families_each_take_the_hosts_of_their_own`.

mod cli_support;

use std::io::Write;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::Duration;

use cli_support::{
    assert_ok, assert_refused, bytes, cmd, config, count, json, records, run, run_list, run_out, s,
    spawn, stderr, wait_bounded, TempDir, NO_ROBOTS,
};
use exitcrawl_testsite::{SiteConfig, TestSite};
use serde_json::Value;

// ---------------------------------------------------------------------------------------
// URLs
// ---------------------------------------------------------------------------------------

#[test]
fn ports_outside_1_to_65535_are_invalid_urls_and_nothing_is_sent() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("ports");
    // robots.txt on (the default): not even robots.txt may be fetched for these.
    let cfg = dir.file("c.toml", &config(""));
    let port = site.port();
    // Port 80, where `:70000` used to go: watched when this test may bind it.
    let port80 = TcpListener::bind("127.0.0.1:80").ok();
    if let Some(l) = &port80 {
        l.set_nonblocking(true).expect("nonblocking");
    }
    // The site's port + 65536 would reach the site if the port were cut to 16 bits.
    let bad = [
        "http://127.0.0.1:70000/page/1".to_string(),
        "http://127.0.0.1:0/page/2".to_string(),
        format!("http://127.0.0.1:{}/page/3", u32::from(port) + 65536),
        format!("http://127.0.0.1:{}/page/4", u32::from(port) + 2 * 65536),
    ];
    let urls = dir.file("urls.txt", &format!("{}\n", bad.join("\n")));
    let (o, out) = run_out(&dir, &cfg, &urls, &["--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), bad.len(), "{recs:?}");
    for r in &recs {
        let e = r["error"].as_str().unwrap_or_default();
        assert!(
            e.starts_with("invalid_url") && e.contains("expected 1..=65535"),
            "{r}"
        );
        assert_eq!(r["attempts"], 0, "never sent: {r}");
        assert!(r["status"].is_null() && r["exit"].is_null(), "{r}");
    }
    assert_eq!(site.stats().requests, 0, "the site saw nothing");

    // The same seeds crawled with --follow: refused at once too (port 0 used to wait for
    // three robots.txt attempts, minutes, then be skipped as robots_unavailable).
    let out = dir.path("follow.jsonl");
    let child = spawn(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--follow",
        "--quiet",
    ]);
    let o = wait_bounded(child, Duration::from_secs(60));
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), bad.len(), "{recs:?}");
    for r in &recs {
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.starts_with("invalid_url"), "{r}");
        assert!(r["skipped"].is_null() && r["attempts"] == 0, "{r}");
    }
    assert_eq!(site.stats().requests, 0, "the site saw nothing");
    if let Some(l) = port80 {
        assert!(l.accept().is_err(), "a connection reached port 80");
    }
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_first_url() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("bom");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let list = format!(
        "\u{feff}{}\r\n{}\r\n",
        site.url("/first"),
        site.url("/second")
    );
    let urls = dir.file("urls.txt", &list);
    let (o, out) = run_out(&dir, &cfg, &urls, &["--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    let first = recs
        .iter()
        .find(|r| r["url"] == site.url("/first").as_str())
        .unwrap_or_else(|| panic!("the first URL, without the BOM: {recs:?}"));
    assert_eq!(first["status"], 200, "{first}");
    assert!(first["error"].is_null(), "{first}");
    let mut paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    paths.sort();
    assert_eq!(paths, ["/first", "/second"]);
    assert_eq!(bytes(&urls), list.as_bytes());
}

#[test]
fn repeats_of_a_url_are_fetched_once_and_each_line_gets_a_record() {
    const COPIES: usize = 10_000;
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("dupes");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let url = site.url("/same");
    let urls = dir.file("urls.txt", &format!("{url}\n").repeat(COPIES));
    let (o, out, summary) = run_list(&dir, &cfg, &urls, &["--quiet"]);
    assert_ok(&o);
    assert_eq!(site.stats().requests, 1, "the site saw one request");
    let recs = records(&out);
    assert_eq!(recs.len(), COPIES, "a record per line");
    assert_eq!(count(&recs, |r| r["skipped"] == "duplicate"), COPIES - 1);
    let fetched: Vec<&Value> = recs.iter().filter(|r| r["skipped"].is_null()).collect();
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0]["status"], 200);
    assert!(recs.iter().all(|r| r["url"] == url.as_str()));
    assert!(
        recs.iter()
            .filter(|r| r["skipped"] == "duplicate")
            .all(|r| r["attempts"] == 0 && r["status"].is_null() && r["error"].is_null()),
        "a duplicate's record says it was not fetched"
    );
    let sum = json(&summary);
    assert_eq!(sum["total"], COPIES);
    assert_eq!(sum["skipped_duplicate"], COPIES - 1);
    assert_eq!(sum["requests"], 1);
    assert_eq!(sum["ok"], 1);

    // --no-dedupe fetches every line.
    const FEW: usize = 50;
    let few = dir.file("few.txt", &format!("{url}\n").repeat(FEW));
    let out2 = dir.path("out2.jsonl");
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&few),
        "--out",
        s(&out2),
        "--no-dedupe",
        "--quiet",
    ]);
    assert_ok(&o);
    let recs = records(&out2);
    assert_eq!(recs.len(), FEW);
    assert_eq!(count(&recs, |r| r["status"] == 200), FEW);
    assert_eq!(site.stats().requests, 1 + FEW as u64, "every line fetched");
}

#[test]
fn two_lines_that_are_not_utf8_are_two_invalid_urls_not_a_duplicate() {
    // Decoded, both read `http://a.test/\u{fffd}`: alike, yet two different lines.
    let dir = TempDir::new("not-utf8");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let urls = dir.path("urls.txt");
    std::fs::write(&urls, b"http://a.test/\xff\nhttp://a.test/\xfe\n").unwrap();
    let (o, out, summary) = run_list(&dir, &cfg, &urls, &["--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    assert!(
        recs.iter().all(|r| r["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid_url"))),
        "{recs:?}"
    );
    let sum = json(&summary);
    assert_eq!(
        (sum["invalid"].as_u64(), sum["skipped_duplicate"].as_u64()),
        (Some(2), Some(0))
    );
}

#[test]
fn a_directory_as_url_list_is_exit_2() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("urls-dir");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let out = dir.file("out.jsonl", "kept\n");
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&dir.0),
        "--out",
        s(&out),
        "--quiet",
    ]);
    assert_refused(&o, 2, &["--urls", "is a directory"]);
    assert_eq!(bytes(&out), b"kept\n");
    assert_eq!(site.stats().requests, 0);

    // The same directory on stdin (`--urls - < DIR`).
    let o = cli_support::cmd(&[
        "--config",
        s(&cfg),
        "--urls",
        "-",
        "--out",
        s(&out),
        "--quiet",
    ])
    .stdin(std::fs::File::open(&dir.0).unwrap())
    .output()
    .unwrap();
    assert_refused(&o, 2, &["--urls", "standard input is a directory"]);
    assert_eq!(bytes(&out), b"kept\n");
}

// ---------------------------------------------------------------------------------------
// Fail fast at start
// ---------------------------------------------------------------------------------------

#[test]
fn exits_that_cannot_bind_are_named_before_any_url_is_read() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("unbindable");
    // 192.0.2.0/24 is TEST-NET-1: no interface of this machine has these addresses.
    let cfg = dir.file(
        "c.toml",
        "[crawler]\nmax_retries = 0\n\n[[exits]]\nname = \"d1\"\nsource_ip = \"192.0.2.10\"\n\n\
         [[exits]]\nname = \"d2\"\nsource_ip = \"192.0.2.11\"\n",
    );
    let out = dir.file("out.jsonl", "kept\n");
    // The URLs come from stdin, which stays open and empty: a run that read URLs before
    // checking its exits would wait for them.
    let mut child = cmd(&[
        "--config",
        s(&cfg),
        "--urls",
        "-",
        "--out",
        s(&out),
        "--quiet",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let stdin = child.stdin.take();
    let o = wait_bounded(child, Duration::from_secs(60));
    drop(stdin);
    assert_refused(
        &o,
        2,
        &[
            "no exit can bind its source address on this host: exits[d1].source_ip \
             192.0.2.10: ",
            "(os error 99); exits[d2].source_ip 192.0.2.11: ",
        ],
    );
    assert!(
        stderr(&o).trim_end().ends_with("(os error 99)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(bytes(&out), b"kept\n");

    // From a file: the same, and the site sees nothing.
    let urls = dir.file("urls.txt", &format!("{}\n", site.url("/a")).repeat(100));
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--quiet",
    ]);
    assert_refused(&o, 2, &["192.0.2.10", "192.0.2.11"]);
    assert_eq!(bytes(&out), b"kept\n");
    assert_eq!(site.stats().requests, 0);
}

// ---------------------------------------------------------------------------------------
// Exposure and messages
// ---------------------------------------------------------------------------------------

#[test]
fn metrics_off_loopback_are_warned_about() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("metrics");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let urls = dir.file("urls.txt", &format!("{}\n", site.url("/a")));
    // The warning comes with the settings, before --urls is opened: a missing list stops
    // the run there, so nothing is ever bound off loopback here.
    let missing = dir.path("missing.txt");
    for addr in ["0.0.0.0:9109", "[::]:9109"] {
        let o = run(&[
            "--config",
            s(&cfg),
            "--urls",
            s(&missing),
            "--metrics",
            addr,
            "--quiet",
        ]);
        assert_refused(&o, 2, &["WARNING: metrics on", "anyone", "127.0.0.1:9109"]);
    }
    // On loopback: served, no warning.
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--summary",
        s(&dir.path("sum.json")),
        "--metrics",
        "127.0.0.1:0",
        "--quiet",
    ]);
    assert_ok(&o);
    assert!(stderr(&o).contains("metrics on http://127.0.0.1:"));
    assert!(!stderr(&o).contains("WARNING"), "{}", stderr(&o));
}

#[test]
fn messages_give_the_real_line_length_and_the_allowed_range() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("messages");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let long = format!("{}{}", site.url("/"), "a".repeat(2_000_000));
    let mut list = Vec::new();
    writeln!(list, "{long}").expect("write");
    writeln!(list, "{}", site.url("/after")).expect("write");
    let urls = dir.path("urls.txt");
    std::fs::write(&urls, &list).expect("write urls");
    let (o, out) = run_out(&dir, &cfg, &urls, &["--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    let want = format!("URL is {} bytes long", long.len());
    assert!(
        recs.iter()
            .any(|r| r["error"].as_str().is_some_and(|e| e.contains(&want))),
        "no {want:?} in {:?}",
        recs.iter().map(|r| &r["error"]).collect::<Vec<_>>()
    );
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/after"]);

    for (value, range) in [("86401", "0 to 86400"), ("-1", "0 to 86400")] {
        let o = run(&["--config", s(&cfg), "--urls", s(&urls), "--grace", value]);
        assert_refused(&o, 2, &["--grace", value, "out of range", range]);
    }
}

#[test]
fn resume_names_the_first_line_that_is_not_a_record() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("resume-bad");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let (a, b) = (site.url("/a"), site.url("/b"));
    let urls = dir.file("urls.txt", &format!("{a}\n{b}\n"));
    let earlier =
        format!("{{\"url\":\"{a}\",\"status\":200,\"error\":null}}\nnot a record\n{{\"url\":5}}\n");
    let out = dir.file("out.jsonl", &earlier);
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--resume",
        "--quiet",
    ]);
    assert_ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("2 lines of") && err.contains("are not records (the first, line 2 column"),
        "{err}"
    );
    let paths: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/b"], "/a was done");
    // The lines that are not records stay; /b's record is appended.
    let text = String::from_utf8(bytes(&out)).expect("utf-8");
    assert!(text.starts_with(&earlier), "{text}");
    assert_eq!(text.lines().count(), 4);
}
