//! How a body is read off the wire, against a raw-socket server on loopback that writes
//! exactly the bytes each case needs: a body read until the server closes (HTTP and
//! HTTPS), a body shorter than its framing, interim 1xx answers before the real one,
//! garbage chunk sizes and a body that does not decode. Each test asserts what the
//! crawler returned and what the server saw (requests, connections, a client that hung
//! up). Loopback only; every server loop is bounded in bytes and time.

mod raw_site;
mod support;

use raw_site::{answer, page, read_head, Raw, Seen, Then, CONNECTION_MAX};
use support::exits;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchError, FetchErrorKind, FetchResponse};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const MAX_RETRIES: u32 = 2;
const MAX_BODY: usize = 64 * 1024;

fn settings() -> Settings {
    let mut s = Settings::with_exits(exits(1, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    // A reset is the case under test, not a sign of overload: keep it from pausing the host.
    s.limiter.throttle_on_reset = false;
    s.limiter.throttle_on_timeout = false;
    s.crawler.max_retries = MAX_RETRIES;
    s.crawler.retry_backoff_base_ms = 10;
    s.crawler.retry_backoff_max_ms = 20;
    s.crawler.retry_budget = 1.0;
    s.crawler.max_body_bytes = MAX_BODY as u64;
    s.crawler.timeout_ms = 10_000;
    s
}

async fn fetch(h: &CrawlerHandle, url: String) -> Result<FetchResponse, FetchError> {
    tokio::time::timeout(Duration::from_secs(30), h.fetch(Fetch::get(url)))
        .await
        .expect("the fetch ends by itself")
}

// ---------------------------------------------------------------------------------------
// Read until close
// ---------------------------------------------------------------------------------------

#[actix_rt::test]
async fn a_body_read_until_the_server_closes_comes_whole() {
    let body = page(40_000);
    let b = body.clone();
    let site = Raw::start(move |_, _| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
        (answer(head, &b), Then::Close)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    for path in ["/a", "/b"] {
        let r = fetch(&h, site.url(path)).await.expect("an answer");
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), body.len());
        assert_eq!(r.body, body[..]);
        assert_eq!(r.attempts, 1);
    }
    let seen = site.seen();
    assert_eq!(seen.lines(), ["GET /a HTTP/1.1", "GET /b HTTP/1.1"]);
    // Each on its own connection: one read until close is never reused.
    assert_eq!(seen.connections, 2);
}

#[actix_rt::test]
async fn an_endless_body_read_until_close_is_too_large_and_the_connection_dropped() {
    let site = Raw::start(|_, _| (b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), Then::Endless)).await;
    let h = Crawler::start(settings()).unwrap();
    let e = fetch(&h, site.url("/endless"))
        .await
        .expect_err("no answer");
    assert_eq!(e.kind, FetchErrorKind::BodyTooLarge, "{e}");
    assert_eq!(e.attempts, 1, "too large is not retried");
    // The client hung up near the limit: what the server wrote past it sat in socket
    // buffers, nowhere near the cap.
    let hung_up = support::eventually(Duration::from_secs(10), || async {
        site.seen().endless_until_hangup.is_some()
    })
    .await;
    assert!(hung_up, "the client never closed the connection");
    let written = site.seen().endless_until_hangup.unwrap();
    assert!(
        written < 32 << 20,
        "{written} bytes written before the hang-up"
    );
    assert_eq!(site.seen().lines(), ["GET /endless HTTP/1.1"]);
}

/// Answers that carry no body (204, 304, `Content-Length: 0`) end at their head, and
/// the connection is kept for the next request.
#[actix_rt::test]
async fn bodyless_answers_end_at_the_head_and_keep_the_connection() {
    let site = Raw::start(|_, line| {
        let head = match line.split(' ').nth(1).unwrap_or_default() {
            "/204" => "HTTP/1.1 204 No Content\r\n\r\n",
            "/304" => "HTTP/1.1 304 Not Modified\r\n\r\n",
            "/empty" => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            "/moved" => "HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 0\r\n\r\n",
            _ => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        };
        (head.as_bytes().to_vec(), Then::KeepOpen)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    let cases = [
        ("/204", 204, ""),
        ("/304", 304, ""),
        ("/empty", 200, ""),
        ("/moved", 200, "ok"),
    ];
    for (path, status, body) in cases {
        let r = fetch(&h, site.url(path)).await.expect("an answer");
        assert_eq!((r.status, &r.body[..]), (status, body.as_bytes()), "{path}");
        assert_eq!(r.attempts, 1, "{path}");
    }
    let seen = site.seen();
    assert_eq!(
        seen.lines(),
        [
            "GET /204 HTTP/1.1",
            "GET /304 HTTP/1.1",
            "GET /empty HTTP/1.1",
            "GET /moved HTTP/1.1",
            "GET /ok HTTP/1.1"
        ]
    );
    assert_eq!(seen.connections, 1, "{:?}", seen.requests);
}

/// A 304 may carry the `Content-Length` of the page it stands for (RFC 9110 §8.6), and a
/// 204 or 304 that says `Transfer-Encoding: chunked` still has no body (RFC 9112 §6.3,
/// rule 1): each ends at its head, and its connection is not reused, as the site may
/// have sent bytes after it.
#[actix_rt::test]
async fn bodyless_answers_with_a_length_or_chunking_still_end_at_the_head() {
    let site = Raw::start(|_, line| {
        let head = match line.split(' ').nth(1).unwrap_or_default() {
            "/304" => "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: \"v1\"\r\n\r\n",
            _ => "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
        };
        (head.as_bytes().to_vec(), Then::KeepOpen)
    })
    .await;
    let mut s = settings();
    s.crawler.timeout_ms = 2000;
    s.crawler.connect_timeout_ms = 1000;
    let h = Crawler::start(s).unwrap();
    for (path, status) in [("/304", 304), ("/204", 204)] {
        let r = fetch(&h, site.url(path)).await.expect("an answer");
        assert_eq!(
            (r.status, r.body.len(), r.attempts),
            (status, 0, 1),
            "{path}"
        );
    }
    let seen = site.seen();
    assert_eq!(seen.lines(), ["GET /304 HTTP/1.1", "GET /204 HTTP/1.1"]);
    assert_eq!(seen.connections, 2, "{:?}", seen.requests);
}

// ---------------------------------------------------------------------------------------
// A body shorter than its framing
// ---------------------------------------------------------------------------------------

/// Each way a body can stop short, then the close: an error, retried, never the part.
#[actix_rt::test]
async fn a_body_cut_short_is_incomplete_and_retried() {
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "content-length 1000, 500 bytes",
            answer(
                "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
                &page(500),
            ),
        ),
        (
            "a chunk cut short",
            answer(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"10\r\n0123456789abcdef\r\n400\r\n0123456789",
            ),
        ),
        (
            "no last chunk",
            answer(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"10\r\n0123456789abcdef\r\n",
            ),
        ),
    ];
    for (case, bytes) in cases {
        let site = Raw::start(move |_, _| (bytes.clone(), Then::Close)).await;
        let h = Crawler::start(settings()).unwrap();
        let e = fetch(&h, site.url("/short")).await.expect_err(case);
        assert_eq!(e.kind, FetchErrorKind::IncompleteBody, "{case}: {e}");
        assert!(e.record_error().starts_with("incomplete_body: "), "{case}");
        assert_eq!(e.attempts, 1 + MAX_RETRIES, "{case}");
        assert_eq!(
            site.seen().requests.len(),
            1 + MAX_RETRIES as usize,
            "{case}"
        );
        h.shutdown(Duration::from_secs(1)).await;
    }
}

#[actix_rt::test]
async fn a_body_cut_short_once_comes_whole_on_the_retry() {
    let body = page(1000);
    let b = body.clone();
    let site = Raw::start(move |n, _| {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        let sent = if n == 0 { &b[..500] } else { &b[..] };
        (answer(head, sent), Then::Close)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    let r = fetch(&h, site.url("/flaky")).await.expect("an answer");
    assert_eq!((r.status, r.attempts), (200, 2));
    assert_eq!(r.body, body[..]);
    assert_eq!(site.seen().requests.len(), 2);
}

/// A compressed body read until the close, cut short: the close ended the framing, the
/// decoder says the stream did not end. That is a body cut short, as one that does not
/// reach its `Content-Length` is: `incomplete_body`, retried, and whole on the retry.
#[actix_rt::test]
async fn a_compressed_body_read_until_close_cut_short_once_comes_whole_on_the_retry() {
    let body = page(20_000);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &body).unwrap();
    let gz = gz.finish().unwrap();
    let site = Raw::start(move |n, line| {
        let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n";
        // `/cut` always stops half-way, `/flaky` once.
        let cut = line.contains("/cut") || n == 0;
        let sent = if cut { &gz[..gz.len() / 2] } else { &gz[..] };
        (answer(head, sent), Then::Close)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    let r = fetch(&h, site.url("/flaky")).await.expect("an answer");
    assert_eq!((r.status, r.attempts), (200, 2));
    assert_eq!(r.body, body[..]);
    let e = fetch(&h, site.url("/cut")).await.expect_err("never whole");
    assert_eq!(e.kind, FetchErrorKind::IncompleteBody, "{e}");
    assert!(e.record_error().starts_with("incomplete_body: "), "{e}");
    assert!(e.message.contains("gzip"), "{e}");
    assert_eq!(e.attempts, 1 + MAX_RETRIES);
    assert_eq!(site.seen().requests.len(), 2 + 1 + MAX_RETRIES as usize);
}

// ---------------------------------------------------------------------------------------
// Interim answers
// ---------------------------------------------------------------------------------------

/// `100 Continue` nobody asked for and `103 Early Hints` come before the answer: the
/// answer is what is returned, and the connection stays in step for the next request.
#[actix_rt::test]
async fn interim_answers_are_skipped_for_the_final_one() {
    let site = Raw::start(|_, line| {
        let interim = if line.contains("/continue") {
            "HTTP/1.1 100 Continue\r\n\r\n"
        } else {
            "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
        };
        let fin = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Final: yes\r\n\r\nfinal";
        (format!("{interim}{fin}").into_bytes(), Then::KeepOpen)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    for path in ["/continue", "/hints", "/continue2", "/hints2"] {
        let r = fetch(&h, site.url(path)).await.expect("an answer");
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(&r.body[..], b"final", "{path}");
        assert_eq!(r.headers.get("x-final").unwrap(), "yes", "{path}");
        assert!(
            r.headers.get("link").is_none(),
            "{path}: the interim's headers"
        );
        assert_eq!(r.attempts, 1, "{path}");
    }
    let seen = site.seen();
    assert_eq!(seen.requests.len(), 4);
    assert_eq!(seen.connections, 1, "kept in step on one connection");
}

/// A `100 Continue` that the request's `Expect` asked for still lets the body go.
#[actix_rt::test]
async fn an_expected_100_continue_still_lets_the_body_go() {
    use tokio::io::AsyncReadExt as _;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(tokio::time::timeout(CONNECTION_MAX, async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let line = read_head(&mut sock).await.expect("a request");
        sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        let mut body = [0u8; 5];
        sock.read_exact(&mut body).await.unwrap();
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
            .await
            .unwrap();
        (line, body)
    }));
    let h = Crawler::start(settings()).unwrap();
    let mut f = Fetch::get(format!("http://{addr}/upload")).header("Expect", "100-continue");
    f.method = exitcrawl_actors::http::Method::POST;
    f.body = Some(bytes::Bytes::from_static(b"hello"));
    let r = tokio::time::timeout(Duration::from_secs(30), h.fetch(f))
        .await
        .expect("the fetch ends by itself")
        .expect("an answer");
    assert_eq!((r.status, &r.body[..]), (200, &b"done"[..]));
    let (line, body) = server.await.unwrap().expect("the server finished in time");
    assert_eq!(line, "POST /upload HTTP/1.1");
    assert_eq!(&body, b"hello");
}

// ---------------------------------------------------------------------------------------
// Garbage
// ---------------------------------------------------------------------------------------

#[actix_rt::test]
async fn a_garbage_chunk_size_is_malformed_and_not_retried() {
    let site = Raw::start(|_, _| {
        let bytes = answer(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"zz\r\nhello\r\n0\r\n\r\n",
        );
        (bytes, Then::Close)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    let e = fetch(&h, site.url("/chunks")).await.expect_err("no answer");
    assert_eq!(e.kind, FetchErrorKind::Malformed, "{e}");
    assert!(e.record_error().starts_with("malformed: "), "{e}");
    assert_eq!(e.attempts, 1);
    assert_eq!(site.seen().requests.len(), 1);
}

/// An HTTP/1.0 answer has no chunked framing; one that says `Transfer-Encoding` has
/// framing that cannot be trusted (RFC 9112 §6.1): `malformed`, not the chunks' bytes
/// read to the close as the body.
#[actix_rt::test]
async fn an_http_1_0_answer_with_transfer_encoding_is_malformed() {
    let site = Raw::start(|_, _| {
        let bytes = answer(
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"5\r\nhello\r\n0\r\n\r\n",
        );
        (bytes, Then::Close)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    let e = fetch(&h, site.url("/te10")).await.expect_err("no answer");
    assert_eq!(e.kind, FetchErrorKind::Malformed, "{e}");
    assert!(e.record_error().starts_with("malformed: "), "{e}");
    assert_eq!(e.attempts, 1);
    assert_eq!(site.seen().requests.len(), 1);
}

#[actix_rt::test]
async fn invalid_gzip_is_a_decode_error_and_not_retried() {
    // A gzip header, then bytes that are no deflate stream.
    let mut garbage = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff];
    garbage.extend_from_slice(&[0xff; 64]);
    let site = Raw::start(move |_, _| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
            garbage.len()
        );
        (answer(&head, &garbage), Then::KeepOpen)
    })
    .await;
    let h = Crawler::start(settings()).unwrap();
    let e = fetch(&h, site.url("/gz")).await.expect_err("no answer");
    assert_eq!(e.kind, FetchErrorKind::DecodeError, "{e}");
    assert!(e.record_error().starts_with("decode_error: "), "{e}");
    assert!(e.message.contains("gzip"), "{e}");
    assert_eq!(e.attempts, 1);
    assert_eq!(site.seen().requests.len(), 1);
}

// ---------------------------------------------------------------------------------------
// HTTPS
// ---------------------------------------------------------------------------------------

/// The TLS side of the raw server: a CA and a leaf for IP 127.0.0.1 made once with
/// openssl (EC P-256, valid to 2126), in tests/tls/.
fn tls_acceptor() -> tokio_rustls::TlsAcceptor {
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let cert = CertificateDer::from(include_bytes!("tls/leaf.der").to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        include_bytes!("tls/leaf.key.der").to_vec(),
    ));
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// An awc client (the same build of awc and the patched decoder the exits use) that
/// trusts the test CA: the crawler's own clients trust the public roots only.
fn tls_client() -> awc::Client {
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            include_bytes!("tls/ca.der").to_vec(),
        ))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    awc::Client::builder()
        .connector(awc::Connector::new().rustls_0_23(Arc::new(config)))
        .finish()
}

/// A TLS server on 127.0.0.1:0 that answers every request with `bytes` and closes: with
/// its TLS close (`close_notify`) when `tls_close`, else by dropping the TCP connection.
async fn tls_server(bytes: Vec<u8>, tls_close: bool) -> (SocketAddr, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s = Arc::clone(&seen);
    let acceptor = tls_acceptor();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let Ok(Ok(mut tls)) = tokio::time::timeout(CONNECTION_MAX, acceptor.accept(sock)).await
            else {
                continue;
            };
            let conn = {
                let mut seen = s.lock().unwrap();
                seen.connections += 1;
                seen.connections
            };
            let Some(line) = read_head(&mut tls).await else {
                continue;
            };
            s.lock().unwrap().requests.push((conn, line));
            let _ = tls.write_all(&bytes).await;
            if tls_close {
                let _ = tls.shutdown().await;
            } else {
                let _ = tls.flush().await;
                let (tcp, _) = tls.into_inner();
                drop(tcp);
            }
        }
    });
    (addr, seen)
}

#[actix_rt::test]
async fn over_https_a_body_read_until_close_comes_whole() {
    let body = page(40_000);
    let bytes = answer("HTTP/1.1 200 OK\r\n\r\n", &body);
    let (addr, seen) = tls_server(bytes, true).await;
    let client = tls_client();
    for path in ["/a", "/b"] {
        let mut r = client
            .get(format!("https://{addr}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let got = r.body().limit(MAX_BODY).await.unwrap();
        assert_eq!(got.len(), body.len());
        assert_eq!(got, body[..]);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.lines(), ["GET /a HTTP/1.1", "GET /b HTTP/1.1"]);
    assert_eq!(seen.connections, 2, "a read until close is never reused");
}

/// Without the TLS close, the end of the connection may be a cut: not a whole body.
#[actix_rt::test]
async fn over_https_a_close_without_the_tls_close_is_not_a_whole_body() {
    let bytes = answer("HTTP/1.1 200 OK\r\n\r\n", &page(4000));
    let (addr, _seen) = tls_server(bytes, false).await;
    let mut r = tls_client()
        .get(format!("https://{addr}/cut"))
        .send()
        .await
        .unwrap();
    let e = r.body().limit(MAX_BODY).await.expect_err("not whole");
    use awc::error::PayloadError;
    let (PayloadError::Incomplete(Some(io)) | PayloadError::Io(io)) = &e else {
        panic!("{e:?}");
    };
    // What the exits record as `incomplete_body`.
    assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
}
