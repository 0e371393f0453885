//! The exits speak HTTP/1.1 to every site, HTTPS included: their TLS ClientHello offers
//! `http/1.1` alone in ALPN, so a site that speaks HTTP/2 answers over HTTP/1.1, the
//! client whose framing and request headers the crate's patched `actix-http` fixes
//! (docs/operating.md). What the TLS server saw is asserted: the ClientHello's ALPN list.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch};
use support::exits;
use tokio::net::TcpListener;

/// A TLS listener on 127.0.0.1:0 that reads each ClientHello, keeps its ALPN protocols,
/// and drops the connection (the crawler's clients trust the public roots only, so the
/// handshake could not finish anyway).
async fn client_hellos() -> (std::net::SocketAddr, Arc<Mutex<Vec<Vec<Vec<u8>>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let acceptor = tokio_rustls::LazyConfigAcceptor::new(
                tokio_rustls::rustls::server::Acceptor::default(),
                sock,
            );
            let Ok(Ok(start)) = tokio::time::timeout(Duration::from_secs(5), acceptor).await else {
                continue;
            };
            let alpn: Vec<Vec<u8>> = start
                .client_hello()
                .alpn()
                .map(|protocols| protocols.map(<[u8]>::to_vec).collect())
                .unwrap_or_default();
            s.lock().expect("lock").push(alpn);
        }
    });
    (addr, seen)
}

#[actix_rt::test]
async fn an_https_site_is_offered_http_1_1_alone() {
    let (addr, seen) = client_hellos().await;
    let mut s = Settings::with_exits(exits(1, 4));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    let h = Crawler::start(s).expect("start");
    let r = h.fetch(Fetch::get(format!("https://{addr}/"))).await;
    assert!(r.is_err(), "the handshake cannot finish: {r:?}");
    let seen = seen.lock().expect("lock").clone();
    assert!(!seen.is_empty(), "no ClientHello reached the site");
    for alpn in seen {
        assert_eq!(alpn, [b"http/1.1".to_vec()], "ALPN offered");
    }
    h.shutdown(Duration::from_secs(1)).await;
}
