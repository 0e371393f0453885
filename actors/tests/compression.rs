//! Compressed answers over real sockets: the crawler asks for gzip, brotli and zstd,
//! decodes them, and caps the *decoded* size — a decompression bomb ends as
//! `body_too_large` with memory bounded by the limit (the test site's fault listener
//! answers fixtures made with the reference tools, and a zstd bomb of RLE blocks), and
//! the *wire* size too, for a body that decodes to nothing. Answers whose exact bytes
//! matter come from a raw-socket server on loopback.

mod raw_site;
mod support;

use raw_site::{answer, read_head, Raw, Then, CONNECTION_MAX};
use support::exits;

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch, FetchErrorKind};
use exitcrawl_testsite::{Encoding, Fault, SiteConfig, TestSite, ENCODED_PAGE};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpListener;

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
    assert!(err.message.contains("once decoded"), "{err}");
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

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Encoded answers that browsers and curl read: an empty body under an encoding's name,
/// gzip with a stray newline after it, two gzip members one after the other (RFC 1952),
/// and `deflate` sent as a bare deflate stream without zlib's header.
#[actix_rt::test]
async fn encoded_answers_that_browsers_read_are_decoded() {
    let (a, b) = (b"<html>one ".repeat(200), b"two</html>".repeat(200));
    let raw_deflate = {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&a).unwrap();
        e.finish().unwrap()
    };
    let cases: Vec<(&str, &str, Vec<u8>, Vec<u8>)> = vec![
        ("/empty-gzip", "gzip", vec![], vec![]),
        ("/empty-deflate", "deflate", vec![], vec![]),
        ("/empty-br", "br", vec![], vec![]),
        ("/empty-zstd", "zstd", vec![], vec![]),
        (
            "/newline",
            "gzip",
            [gzip(&a), b"\n".to_vec()].concat(),
            a.clone(),
        ),
        (
            "/members",
            "gzip",
            [gzip(&a), gzip(&b)].concat(),
            [a.clone(), b].concat(),
        ),
        ("/raw-deflate", "deflate", raw_deflate, a),
    ];
    let wire = cases.clone();
    let site = Raw::start(move |_, line| {
        let path = line.split(' ').nth(1).unwrap_or_default();
        let (_, enc, body, _) = wire.iter().find(|c| c.0 == path).expect("a case");
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: {enc}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        (answer(&head, body), Then::KeepOpen)
    })
    .await;
    let h = Crawler::start(settings()).expect("start");
    for (path, enc, sent, want) in &cases {
        let r = h
            .fetch(Fetch::get(site.url(path)))
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body, want[..], "{path}");
        assert_eq!(r.wire_bytes, sent.len() as u64, "{path}");
        assert_eq!(r.content_encoding.as_deref(), Some(*enc), "{path}");
        assert_eq!(r.attempts, 1, "{path}");
    }
    h.shutdown(Duration::from_secs(1)).await;
}

/// Two `Content-Encoding` lines say the body was encoded twice; only one coding is
/// decoded here, so the body is kept as it came and its headers say so, as for an
/// encoding the crawler does not know.
#[actix_rt::test]
async fn a_body_encoded_twice_is_kept_as_it_came_with_its_headers() {
    let twice = gzip(&gzip(b"<html>twice</html>"));
    let wire = twice.clone();
    let site = Raw::start(move |_, _| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Encoding: gzip\r\n\
             Content-Length: {}\r\n\r\n",
            wire.len()
        );
        (answer(&head, &wire), Then::KeepOpen)
    })
    .await;
    let h = Crawler::start(settings()).expect("start");
    let r = h
        .fetch(Fetch::get(site.url("/twice")))
        .await
        .expect("fetched");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, twice[..], "the body as it came");
    assert_eq!(r.content_encoding, None);
    assert_eq!(r.wire_bytes, twice.len() as u64);
    let codings: Vec<_> = r.headers.get_all("content-encoding").collect();
    assert_eq!(codings, ["gzip", "gzip"]);
    let length = r.headers.get("content-length").expect("kept");
    assert_eq!(length.to_str().unwrap(), twice.len().to_string());
    assert_eq!(site.seen().lines(), ["GET /twice HTTP/1.1"]);
    h.shutdown(Duration::from_secs(1)).await;
}

/// A gzip header, then empty stored deflate blocks for ever, until the body is read until
/// close: it decodes to nothing, so only its wire size can end it. Returns the server's
/// address, and the bytes written when the client hung up (0 until it does).
async fn endless_empty_gzip() -> (std::net::SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hung_up = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&hung_up);
    tokio::spawn(tokio::time::timeout(CONNECTION_MAX, async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        read_head(&mut sock).await.expect("a request");
        let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n";
        let gzip_header = [0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff];
        sock.write_all(&answer(head, &gzip_header)).await.unwrap();
        // Not final, stored, length 0 (and its complement): five bytes, nothing decoded.
        let piece = [0u8, 0, 0, 0xff, 0xff].repeat(16 * 1024 / 5);
        let mut written = 0u64;
        // Far past the 64 KiB limit; the client should hang up long before.
        while written < 256 << 20 {
            if sock.write_all(&piece).await.is_err() {
                seen.store(written.max(1), Ordering::SeqCst);
                return;
            }
            written += piece.len() as u64;
        }
    }));
    (addr, hung_up)
}

/// A compressed body's wire size is capped as an uncompressed one's is: an endless one
/// that decodes to nothing is `body_too_large`, not read until the timeout.
#[actix_rt::test]
async fn an_endless_compressed_body_that_decodes_to_nothing_is_too_large() {
    let (addr, hung_up) = endless_empty_gzip().await;
    let mut s = settings();
    s.crawler.max_body_bytes = 64 * 1024;
    s.crawler.timeout_ms = 60_000;
    let h = Crawler::start(s).expect("start");
    let started = std::time::Instant::now();
    let url = format!("http://{addr}/empty-blocks");
    let err = h.fetch(Fetch::get(url)).await.expect_err("too large");
    assert_eq!(err.kind, FetchErrorKind::BodyTooLarge, "{err}");
    assert!(err.message.contains("65536"), "{err}");
    assert!(err.message.contains("on the wire"), "{err}");
    assert_eq!(err.attempts, 1, "too large is not retried");
    // An upper bound only, far under the timeout, for a busy machine.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let gone = support::eventually(Duration::from_secs(10), || async {
        hung_up.load(Ordering::SeqCst) > 0
    })
    .await;
    assert!(gone, "the client never closed the connection");
    let written = hung_up.load(Ordering::SeqCst);
    assert!(
        written < 32 << 20,
        "{written} bytes written before the hang-up"
    );
    h.shutdown(Duration::from_secs(1)).await;
}
