//! Exits that send through proxies: real tinyproxy (HTTP `CONNECT`) and microsocks
//! (SOCKS5) processes on loopback, each making its outgoing connections from an address of
//! its own, so the site can tell which exit a request came through. Asserted from what the
//! site saw: the peer address of every request, and the headers that reached it.
//!
//! Needs `tinyproxy` and `microsocks` on `PATH` (`.ci/run` installs them).

mod support;

use std::net::IpAddr;
use std::time::Duration;

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, Fetch, FetchErrorKind};
use exitcrawl_testsite::proxy::{free_port, Proxy};
use exitcrawl_testsite::{SiteConfig, TestSite};
use support::ip;

fn proxy_exit(name: &str, url: String, source: Option<&str>) -> ExitSettings {
    let mut e = ExitSettings::new(name, source.map_or("0.0.0.0".parse().unwrap(), ip));
    e.proxy = Some(url);
    e.max_concurrent = 8;
    e
}

fn direct_exit(name: &str, source: &str) -> ExitSettings {
    let mut e = ExitSettings::new(name, ip(source));
    e.max_concurrent = 8;
    e
}

fn settings(exits: Vec<ExitSettings>) -> Settings {
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.validate().expect("valid settings");
    s
}

async fn fetch_all(h: &exitcrawl_actors::CrawlerHandle, site: &TestSite, n: usize) -> Vec<String> {
    let mut exits = Vec::new();
    for i in 0..n {
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            h.fetch(Fetch::get(site.url(&format!("/p/{i}")))),
        )
        .await
        .expect("the fetch ends by itself")
        .unwrap_or_else(|e| panic!("/p/{i}: {e}"));
        assert_eq!(r.status, 200, "/p/{i}");
        exits.push(r.exit.to_string());
    }
    exits
}

#[actix_rt::test]
async fn direct_http_proxy_and_socks5_exits_each_reach_the_site_from_their_own_address() {
    let site = TestSite::start(SiteConfig::default());
    // tinyproxy takes clients from 127.0.0.4 only: a connection to it from any other
    // source address would be refused, so the exit's source_ip is checked too.
    let http = Proxy::tinyproxy(ip("127.0.0.4"), ip("127.0.0.8"), true);
    let socks = Proxy::microsocks(ip("127.0.0.7"), true);
    let h = Crawler::start(settings(vec![
        direct_exit("e2", "127.0.0.2"),
        direct_exit("e3", "127.0.0.3"),
        proxy_exit(
            "tiny",
            format!("http://user:pass@{}", http.addr()),
            Some("127.0.0.4"),
        ),
        proxy_exit(
            "socks",
            format!("socks5h://user:pass@{}", socks.addr()),
            None,
        ),
    ]))
    .unwrap();

    let exits = fetch_all(&h, &site, 60).await;

    let from = |peer: &str| {
        site.requests()
            .iter()
            .filter(|r| r.path.starts_with("/p/") && r.peer == ip(peer))
            .count()
    };
    let by = |exit: &str| exits.iter().filter(|e| *e == exit).count();
    for (exit, peer) in [
        ("e2", "127.0.0.2"),
        ("e3", "127.0.0.3"),
        ("tiny", "127.0.0.8"),
        ("socks", "127.0.0.7"),
    ] {
        assert!(by(exit) > 0, "no fetch went through {exit}: {exits:?}");
        assert_eq!(
            from(peer),
            by(exit),
            "requests from {peer} vs fetches through {exit}"
        );
    }
    assert_eq!(
        site.requests()
            .iter()
            .filter(|r| r.path.starts_with("/p/"))
            .count(),
        60
    );
    // The proxy's credentials reach the proxy and nowhere else.
    for r in site.requests() {
        for (name, value) in &r.headers {
            assert!(
                !name.starts_with("proxy-") && !value.contains("dXNlcjpwYXNz"),
                "{name}: {value} reached the site"
            );
        }
    }
    // Stats name the exits; their proxies' passwords never show.
    let stats = h.stats().await;
    assert!(stats.iter().all(|s| s.healthy), "{stats:?}");
}

#[actix_rt::test]
async fn a_proxy_that_refuses_is_the_exits_fault_and_the_fetch_moves_on() {
    let site = TestSite::start(SiteConfig::default());
    let http = Proxy::tinyproxy(ip("127.0.0.1"), ip("127.0.0.8"), true);
    let socks = Proxy::microsocks(ip("127.0.0.7"), true);
    let closed = free_port();
    let h = Crawler::start(settings(vec![
        // Wrong password: tinyproxy refuses the CONNECT (with 401, where RFC 9110 says 407).
        proxy_exit("tiny", format!("http://user:wrong@{}", http.addr()), None),
        // Nothing listens there.
        proxy_exit("gone", format!("socks5://127.0.0.1:{closed}"), None),
        proxy_exit(
            "socks",
            format!("socks5://user:pass@{}", socks.addr()),
            None,
        ),
    ]))
    .unwrap();

    let exits = fetch_all(&h, &site, 30).await;

    assert!(exits.iter().all(|e| e == "socks"), "{exits:?}");
    let peers: Vec<_> = site
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/p/"))
        .map(|r| r.peer)
        .collect();
    assert_eq!(peers.len(), 30, "each URL reached the site once");
    assert!(peers.iter().all(|p| *p == ip("127.0.0.7")), "{peers:?}");
    let stats = h.stats().await;
    let exit = |name: &str| stats.iter().find(|s| s.name == name).unwrap();
    assert!(
        exit("socks").healthy && exit("socks").errors == 0,
        "{stats:?}"
    );
    for name in ["tiny", "gone"] {
        assert!(!exit(name).healthy, "{name} is still in service: {stats:?}");
        let last = exit(name).last_error.clone().unwrap_or_default();
        assert!(exit(name).errors > 0, "{name}: {stats:?}");
        assert!(!last.contains("wrong"), "{name}'s password shows: {last}");
        assert!(last.contains("proxy"), "{name}: {last}");
    }
    let tiny = exit("tiny").last_error.clone().unwrap_or_default();
    assert!(tiny.contains("refused the credentials"), "{tiny}");
}

/// Dead links through HTTP proxies: tinyproxy answers `500 Unable to connect` to a
/// `CONNECT` to a closed port. That is the site's failure: the record says the site
/// refused (with the proxy's answer), and the exits stay in service however many there
/// are in a row (three eject an exit for its own failures).
#[actix_rt::test]
async fn a_site_an_http_proxy_cannot_reach_does_not_eject_the_exit() {
    let site = TestSite::start(SiteConfig::default());
    let one = Proxy::tinyproxy(ip("127.0.0.1"), ip("127.0.0.8"), true);
    let two = Proxy::tinyproxy(ip("127.0.0.1"), ip("127.0.0.9"), true);
    let mut s = settings(vec![
        proxy_exit("one", format!("http://user:pass@{}", one.addr()), None),
        proxy_exit("two", format!("http://user:pass@{}", two.addr()), None),
    ]);
    // One quick retry: a refused connection is worth another try, and it fails alike.
    s.crawler.max_retries = 1;
    s.crawler.retry_backoff_base_ms = 1;
    s.crawler.retry_backoff_max_ms = 10;
    s.validate().expect("valid settings");
    let h = Crawler::start(s).unwrap();

    let closed = free_port();
    for i in 0..4 {
        let url = format!("http://127.0.0.1:{closed}/dead/{i}");
        let err = tokio::time::timeout(Duration::from_secs(30), h.fetch(Fetch::get(url)))
            .await
            .expect("the fetch ends by itself")
            .expect_err("nothing listens there");
        assert_eq!(err.kind, FetchErrorKind::ConnectRefused, "{err}");
        assert!(err.message.contains("500 Unable to connect"), "{err}");
    }
    let exits = fetch_all(&h, &site, 10).await;

    let stats = h.stats().await;
    for name in ["one", "two"] {
        let exit = stats.iter().find(|s| s.name == name).unwrap();
        assert!(exit.healthy, "{name} was ejected: {stats:?}");
    }
    for name in ["one", "two"] {
        assert!(
            exits.iter().any(|e| e == name),
            "{name} carried none of the good URLs: {exits:?}"
        );
    }
    assert_eq!(
        site.requests()
            .iter()
            .filter(|r| r.path.starts_with("/p/"))
            .count(),
        10,
        "each good URL reached the site once"
    );
}

#[actix_rt::test]
async fn with_only_a_refusing_proxy_the_record_names_the_proxy_not_the_site() {
    let site = TestSite::start(SiteConfig::default());
    let socks = Proxy::microsocks(ip("127.0.0.7"), true);
    let h = Crawler::start(settings(vec![proxy_exit(
        "socks",
        format!("socks5://user:nope@{}", socks.addr()),
        None,
    )]))
    .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(30), h.fetch(Fetch::get(site.url("/a"))))
        .await
        .expect("the fetch ends by itself")
        .expect_err("the proxy refuses the credentials");
    assert_eq!(err.kind, FetchErrorKind::Proxy, "{err}");
    assert!(
        err.message.contains("refused the username and password"),
        "{err}"
    );
    assert!(
        !err.to_string().contains("nope"),
        "the password shows: {err}"
    );
    assert_eq!(site.stats().requests, 0, "nothing reached the site");
}

/// HTTPS through an HTTP proxy: TLS with the site's name runs inside the `CONNECT` tunnel.
/// The exit's connector under a client that trusts the test CA (the crawler's own clients
/// trust the public roots only), against a TLS server on loopback that sees the request.
#[actix_rt::test]
async fn https_runs_inside_the_connect_tunnel() {
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;

    let cert = rustls::pki_types::CertificateDer::from(include_bytes!("tls/leaf.der").to_vec());
    let key =
        rustls::pki_types::PrivateKeyDer::Pkcs8(include_bytes!("tls/leaf.key.der").to_vec().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let site = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<(IpAddr, String)>>> = Arc::default();
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((sock, peer)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(sock).await else {
                continue;
            };
            let mut head = vec![0u8; 1024];
            let n = tls.read(&mut head).await.unwrap_or(0);
            let line = String::from_utf8_lossy(&head[..n])
                .lines()
                .next()
                .unwrap_or("")
                .to_owned();
            s.lock().unwrap().push((peer.ip(), line));
            let _ = tls
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecret",
                )
                .await;
            let _ = tls.shutdown().await;
        }
    });

    let http = Proxy::tinyproxy(ip("127.0.0.1"), ip("127.0.0.8"), true);
    let proxy: exitcrawl::proxy::ProxyUrl =
        format!("http://user:pass@{}", http.addr()).parse().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            include_bytes!("tls/ca.der").to_vec(),
        ))
        .unwrap();
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = exitcrawl_net::ExitConnector::new(
        "0.0.0.0".parse().unwrap(),
        exitcrawl_net::DnsCache::new(Duration::from_secs(60)),
        Duration::from_secs(5),
    )
    .through(Some(proxy));
    let client = awc::Client::builder()
        .connector(
            awc::Connector::new()
                .connector(connector)
                .rustls_0_23(Arc::new(tls)),
        )
        .finish();
    let mut r = client
        .get(format!("https://{site}/over-tls"))
        .send()
        .await
        .expect("an answer through the tunnel");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.body().await.unwrap(), "secret");
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        [(ip("127.0.0.8"), "GET /over-tls HTTP/1.1".to_owned())],
        "the site saw the request, in TLS, from the proxy's address"
    );
}
