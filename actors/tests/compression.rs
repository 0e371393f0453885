//! Compressed answers over real sockets: the crawler asks for gzip, brotli and zstd,
//! decodes them, and caps the *decoded* size — a decompression bomb ends as
//! `body_too_large` with memory bounded by the limit (the test site's fault listener
//! answers fixtures made with the reference tools, and a zstd bomb of RLE blocks).

mod support;

use support::exits;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch, FetchErrorKind};
use exitcrawl_testsite::{Encoding, Fault, SiteConfig, TestSite, ENCODED_PAGE};

fn settings() -> Settings {
    let mut s = Settings::with_exits(exits(1, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    s.crawler.timeout_ms = 10_000;
    s
}

#[actix_rt::test]
async fn gzip_brotli_and_zstd_answers_are_decoded_and_counted_on_the_wire() {
    let site = TestSite::start(SiteConfig::default());
    let h = Crawler::start(settings()).expect("start");
    for e in [Encoding::Gzip, Encoding::Brotli, Encoding::Zstd] {
        let url = site.fault_url(&Fault::Encoded(e).path("page"));
        let r = h.fetch(Fetch::get(url)).await.expect("fetched");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, ENCODED_PAGE, "{} decodes to the page", e.name());
        assert_eq!(r.content_encoding.as_deref(), Some(e.name()));
        assert_eq!(r.wire_bytes, e.page().len() as u64);
        assert!(
            r.wire_bytes * 4 < r.body.len() as u64,
            "{}: {} on the wire",
            e.name(),
            r.wire_bytes
        );
        assert!(
            r.headers.get("content-encoding").is_none(),
            "the body is decoded now"
        );
    }
    // What the crawler asked for.
    let log = site.requests();
    let asked = log
        .iter()
        .find(|r| r.path.contains("/fault/"))
        .expect("logged");
    assert!(asked.fault.is_some());
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn a_decompression_bomb_ends_as_too_large_not_as_memory() {
    let site = TestSite::start(SiteConfig::default());
    let mut s = settings();
    s.crawler.max_body_bytes = 4 << 20;
    let h = Crawler::start(s).expect("start");
    // 1 GiB of zeros in 32 KiB of zstd.
    let url = site.fault_url(&Fault::ZstdBomb(1 << 30).path("bomb"));
    let err = h.fetch(Fetch::get(url)).await.expect_err("too large");
    assert_eq!(err.kind, FetchErrorKind::BodyTooLarge, "{err}");
    assert!(err.message.contains("4194304"), "{err}");
    // The process never held anything like the gigabyte (its peak resident size).
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    assert!(peak_kib < 256 * 1024, "peak resident {peak_kib} KiB");
    h.shutdown(Duration::from_secs(1)).await;
}

#[actix_rt::test]
async fn the_crawler_says_which_encodings_it_accepts() {
    let site = TestSite::start(SiteConfig::default());
    let h = Crawler::start(settings()).expect("start");
    let r = h
        .fetch(Fetch::get(site.url("/plain")))
        .await
        .expect("fetched");
    assert_eq!(r.content_encoding, None);
    assert_eq!(r.wire_bytes, r.body.len() as u64);
    let log = site.requests();
    let accept = log[0]
        .headers
        .iter()
        .find(|(k, _)| k == "accept-encoding")
        .map(|(_, v)| v.clone());
    assert_eq!(accept.as_deref(), Some("gzip, deflate, br, zstd"));
    h.shutdown(Duration::from_secs(1)).await;
}
