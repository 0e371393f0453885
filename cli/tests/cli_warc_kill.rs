//! `exitcrawl --warc` killed (SIGKILL) at seeded moments, in the list and `--follow`
//! modes: what the archive and `--out` hold then, read back as the files show them.

mod cli_support;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli_support::{config, config_with, s, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use serde_json::Value;

/// Pages `/p/0` … `/p/{PAGES - 1}`, each linking to the next four (a tree `--follow`
/// spreads over), answered after a few milliseconds so that a run takes long enough to be
/// killed in the middle of it.
const PAGES: usize = 2000;

fn site() -> TestSite {
    let pages = Pages::new(|_host: &str, pq: &str| {
        let i: usize = pq.strip_prefix("/p/")?.parse().ok()?;
        (i < PAGES).then(|| {
            let links: String = (4 * i + 1..=4 * i + 4)
                .map(|c| format!("<a href=\"/p/{c}\">{c}</a>"))
                .collect();
            Page::html(format!("<html><body>page {i} {links}</body></html>"))
        })
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        latency: Duration::from_millis(5),
        ..SiteConfig::default()
    })
}

/// The `WARC-Target-URI` of each whole response in the `.warc.gz` file `path` (a kill
/// may leave its last member cut).
fn archived_responses(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let mut rest: &[u8] = &bytes;
    let mut uris = Vec::new();
    while !rest.is_empty() {
        let mut d = flate2::bufread::GzDecoder::new(rest);
        let mut member = Vec::new();
        if d.read_to_end(&mut member).is_err() {
            break;
        }
        rest = d.into_inner();
        let head = String::from_utf8_lossy(&member[..member.len().min(4096)]).into_owned();
        if head.contains("WARC-Type: response") {
            if let Some(uri) = head
                .lines()
                .find_map(|l| l.strip_prefix("WARC-Target-URI: "))
            {
                uris.push(uri.trim().to_owned());
            }
        }
    }
    uris
}

/// The URLs of the whole lines of a JSONL file (a kill may leave half of the last one).
fn recorded_urls(path: &Path) -> HashSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| r["url"].as_str().map(str::to_owned))
        .collect()
}

/// The newest file of the series `w.warc.gz`, `w-00001.warc.gz`, …
fn newest_warc(dir: &TempDir) -> PathBuf {
    (1..)
        .map(|i| dir.path(&format!("w-{i:05}.warc.gz")))
        .take_while(|p| p.exists())
        .last()
        .unwrap_or_else(|| dir.path("w.warc.gz"))
}

/// Each page's record reaches `--out` as soon as its exchange is in the WARC: killed at
/// any moment, at most the page being written is archived without a record.
#[test]
fn killed_at_any_moment_at_most_the_page_being_written_lacks_its_record() {
    let site = site();
    let mut seed = 0x6b11_u64;
    for follow in [false, true] {
        let dir = TempDir::new(if follow { "kill-follow" } else { "kill-list" });
        let cfg = dir.file("c.toml", &config("\n[crawl]\nrobots = false\n"));
        let urls: Vec<String> = if follow {
            vec![site.url("/p/0")]
        } else {
            (0..400).map(|i| site.url(&format!("/p/{i}"))).collect()
        };
        let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
        let (out, warc) = (dir.path("o.jsonl"), dir.path("w.warc.gz"));
        let mut args = vec!["--config", s(&cfg), "--urls", s(&list)];
        args.extend(["--out", s(&out), "--warc", s(&warc)]);
        if follow {
            args.push("--follow");
        }
        for round in 0..3 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let more = 5 + (seed >> 33) as usize % 40;
            let mut a = args.clone();
            if round > 0 {
                a.push("--resume");
            }
            let mut child = cli_support::spawn(&a);
            // The file this run writes: the next of the series once it has started it.
            let file = if round == 0 {
                warc.clone()
            } else {
                dir.path(&format!("w-{round:05}.warc.gz"))
            };
            let until = Instant::now() + Duration::from_secs(30);
            while archived_responses(&file).len() < more && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            child.kill().expect("kill -9");
            let _ = child.wait();
            assert_eq!(newest_warc(&dir), file);
            let recorded = recorded_urls(&out);
            let archived = archived_responses(&file);
            assert!(
                archived.len() >= more,
                "follow {follow}, round {round}: {archived:?}"
            );
            let unrecorded: Vec<_> = archived.iter().filter(|u| !recorded.contains(*u)).collect();
            assert!(
                unrecorded.len() <= 1,
                "follow {follow}, round {round}: archived without a record: {unrecorded:?}"
            );
        }
    }
}

/// The test hook that holds the program right after its Nth exchange is through to the
/// WARC file, before the exchange's record is written (see `warc::HOLD_AFTER`).
const HOLD: &str = "EXITCRAWL_TEST_HOLD_AFTER_WARC_EXCHANGE";

/// The program with `args`, once it holds after its `n`th exchange (it said so).
fn spawn_held(args: &[&str], n: u32) -> std::process::Child {
    use std::io::BufRead;
    let mut child = cli_support::cmd(args)
        .env(HOLD, n.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn exitcrawl");
    let stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    for line in stderr.lines() {
        let line = line.expect("stderr");
        if line.contains("held after WARC exchange") {
            return child;
        }
    }
    let o = child.wait_with_output().expect("wait");
    panic!("exitcrawl ended without holding: {o:?}");
}

/// Pages `/p/0` … `/p/11`, each linking to the next four that exist; every path asked is
/// logged.
fn small_site(log: Arc<Mutex<Vec<String>>>) -> TestSite {
    let pages = Pages::new(move |_host: &str, pq: &str| {
        log.lock().unwrap().push(pq.to_owned());
        let i: usize = pq.strip_prefix("/p/")?.parse().ok()?;
        (i < 12).then(|| {
            let links: String = (4 * i + 1..=4 * i + 4)
                .filter(|c| *c < 12)
                .map(|c| format!("<a href=\"/p/{c}\">{c}</a>"))
                .collect();
            Page::html(format!("<html><body>page {i} {links}</body></html>"))
        })
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

/// The gzip members of `bytes`, each decompressed on its own (all whole).
fn members(bytes: &[u8]) -> Vec<String> {
    let mut rest = bytes;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let mut d = flate2::bufread::GzDecoder::new(rest);
        let mut m = Vec::new();
        d.read_to_end(&mut m).expect("a whole gzip member");
        rest = d.into_inner();
        out.push(String::from_utf8_lossy(&m).into_owned());
    }
    out
}

/// Killed after an exchange is in the WARC file but before its record is in `--out`, the
/// run leaves that page archived without a record; `--resume` cuts the archive back to
/// what the records name before fetching the page again, so every URL ends with one
/// response, the one its record names, and every record's body is in `--bodies`.
#[test]
fn killed_between_an_exchange_and_its_record_resume_keeps_one_response_per_url() {
    for follow in [false, true] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let site = small_site(Arc::clone(&log));
        let dir = TempDir::new(if follow { "gap-follow" } else { "gap-list" });
        let cfg = dir.file("c.toml", &config_with(1, "\n[crawl]\nrobots = false\n"));
        let urls: Vec<String> = if follow {
            vec![site.url("/p/0")]
        } else {
            (0..12).map(|i| site.url(&format!("/p/{i}"))).collect()
        };
        let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
        let (out, warc, bodies) = (dir.path("o.jsonl"), dir.path("w.warc.gz"), dir.path("b"));
        let mut args = vec!["--config", s(&cfg), "--urls", s(&list), "--out", s(&out)];
        args.extend(["--warc", s(&warc), "--bodies", s(&bodies), "--quiet"]);
        if follow {
            args.push("--follow");
        }
        let mut child = spawn_held(&args, 5);
        child.kill().expect("kill -9");
        let _ = child.wait();
        let recorded = recorded_urls(&out);
        let unrecorded: Vec<String> = archived_responses(&warc)
            .into_iter()
            .filter(|u| !recorded.contains(u))
            .collect();
        assert_eq!(unrecorded.len(), 1, "follow {follow}: {unrecorded:?}");

        args.push("--resume");
        cli_support::assert_ok(&cli_support::run(&args));
        let mut responses: Vec<String> = archived_responses(&warc);
        responses.extend(archived_responses(&dir.path("w-00001.warc.gz")));
        let mut distinct = responses.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            responses.len(),
            distinct.len(),
            "follow {follow}: a URL with two responses in {responses:?}"
        );
        let recs = cli_support::records(&out);
        assert_eq!(recs.len(), 12, "follow {follow}: {recs:?}");
        for r in &recs {
            assert_eq!(r["status"], 200, "{r}");
            let file = dir.path(r["warc_file"].as_str().expect("warc_file"));
            let at = r["warc_offset"].as_u64().expect("warc_offset") as usize;
            let len = r["warc_length"].as_u64().expect("warc_length") as usize;
            let bytes = std::fs::read(&file).unwrap();
            let exchange = members(&bytes[at..at + len]);
            assert_eq!(exchange.len(), 2, "{r}");
            let uri = format!("WARC-Target-URI: {}\r\n", r["url"].as_str().unwrap());
            assert!(exchange[0].contains("WARC-Type: response\r\n"), "{r}");
            assert!(exchange[1].contains("WARC-Type: request\r\n"), "{r}");
            assert!(exchange.iter().all(|m| m.contains(&uri)), "{r}");
            let sha = r["sha256"].as_str().unwrap();
            let body = std::fs::read(bodies.join(&sha[..2]).join(sha)).expect("its body");
            use sha2::Digest as _;
            let got: String = sha2::Sha256::digest(&body)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(got, sha, "{r}");
        }
        // The site saw the page archived without a record twice; every other once, or
        // twice when the kill found it on its way (the crawler's threads go on sending
        // while the program holds).
        let seen = log.lock().unwrap().clone();
        for i in 0..12 {
            let path = format!("/p/{i}");
            let times = seen.iter().filter(|p| **p == path).count();
            if unrecorded[0] == site.url(&path) {
                assert_eq!(times, 2, "follow {follow}: {path} in {seen:?}");
            } else {
                assert!(
                    (1..=2).contains(&times),
                    "follow {follow}: {path} in {seen:?}"
                );
            }
        }
    }
}
