//! `exitcrawl --warc` killed (SIGKILL) at seeded moments, in the list and `--follow`
//! modes: what the archive and `--out` hold then, read back as the files show them.

mod cli_support;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cli_support::{config, s, TempDir};
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
