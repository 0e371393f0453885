//! The exit connector through real proxies on loopback: which failures are the site's and
//! which the proxy's, and which addresses a `socks5://` exit tries.
//!
//! Needs `tinyproxy` and `microsocks` on `PATH` (`.ci/run` installs them).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use awc::error::{ConnectError, SendRequestError};
use exitcrawl::outcome::Failure;
use exitcrawl::proxy::ProxyUrl;
use exitcrawl_net::{
    build_client, classify, ClientOptions, DnsCache, ExitConnector, Reach, SocketError, Stage,
};
use exitcrawl_testsite::proxy::{free_port, Proxy};
use exitcrawl_testsite::{SiteConfig, TestSite};

mod common;
use common::black_hole;

/// Where microsocks and tinyproxy connect out from, so the site can tell their requests.
const PROXY_OUT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7));

/// A client whose connections go through `proxy`, resolving names with `dns`.
fn client(proxy: &str, dns: DnsCache, reach: Reach) -> awc::Client {
    let proxy: ProxyUrl = proxy.parse().unwrap();
    let connector = ExitConnector::new(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        dns,
        Duration::from_secs(5),
    )
    .reaching(reach)
    .through(Some(proxy));
    awc::Client::builder()
        .connector(awc::Connector::new().connector(connector))
        .timeout(Duration::from_secs(10))
        .finish()
}

/// A resolver that answers `addrs` for every name.
fn scripted(addrs: Vec<IpAddr>) -> DnsCache {
    DnsCache::with_resolver(Duration::from_secs(60), move |_host: &str| {
        let addrs = addrs.clone();
        async move { Ok(addrs) }
    })
}

/// The `SocketError` our connector put inside awc's error, if any.
fn socket_error(err: &SendRequestError) -> Option<&SocketError> {
    match err {
        SendRequestError::Connect(ConnectError::Io(e)) => e.get_ref()?.downcast_ref(),
        _ => None,
    }
}

/// tinyproxy answers `500 Unable to connect` to a `CONNECT` it cannot carry out (a closed
/// port, a name that does not resolve): the site failed, not the proxy, so it is the
/// site's refused connection, and the message says what the proxy answered.
#[actix_rt::test]
async fn an_http_proxy_that_cannot_reach_the_site_is_the_sites_failure() {
    let proxy = Proxy::tinyproxy(IpAddr::V4(Ipv4Addr::LOCALHOST), PROXY_OUT, false);
    let closed = free_port();
    let client = client(
        &format!("http://{}", proxy.addr()),
        DnsCache::new(Duration::from_secs(60)),
        Reach::Any,
    );
    let err = client
        .get(format!("http://127.0.0.1:{closed}/"))
        .send()
        .await
        .expect_err("nothing listens there");
    assert_eq!(classify(&err), Failure::ConnectRefused, "{err}");
    let se = socket_error(&err).expect("the connector's error");
    assert_eq!(se.stage, Stage::Tunnel, "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("CONNECT 127.0.0.1:{closed}"))
            && message.contains("500 Unable to connect")
            && message.contains("could not connect to the target"),
        "{message}"
    );

    // The same proxy, with a site that listens, still opens tunnels.
    let site = TestSite::start(SiteConfig::default());
    let r = client
        .get(site.url("/page"))
        .send()
        .await
        .expect("a tunnel");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(site.stats().peer(PROXY_OUT).requests, 1);
}

/// A `socks5://` exit resolves here and sends the proxy an address; when the proxy cannot
/// reach one (here `::1`, where the site does not listen), the next is tried, as a direct
/// exit tries a name's addresses in resolver order.
#[actix_rt::test]
async fn a_socks5_exit_tries_each_address_of_the_name() {
    let site = TestSite::start(SiteConfig::default());
    let proxy = Proxy::microsocks(PROXY_OUT, false);
    let dns = scripted(vec![
        "::1".parse().unwrap(),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    ]);
    let client = client(&format!("socks5://{}", proxy.addr()), dns, Reach::Any);
    let port = site.addr().port();
    let mut r = client
        .get(format!("http://dual.test:{port}/page"))
        .send()
        .await
        .expect("the second address is reached");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.body().await.unwrap().len(), 1024);
    assert_eq!(site.stats().peer(PROXY_OUT).requests, 1);

    // With no address the proxy can reach, the site's failure on the last one is reported.
    let closed = free_port();
    let err = client
        .get(format!("http://dual.test:{closed}/"))
        .send()
        .await
        .expect_err("nothing listens there");
    assert_eq!(classify(&err), Failure::ConnectRefused, "{err}");
    let se = socket_error(&err).expect("the connector's error");
    assert_eq!(
        se.target,
        Some(SocketAddr::from(([127, 0, 0, 1], closed))),
        "{err}"
    );
}

/// An IPv4-only SOCKS5 proxy on loopback: it answers "host unreachable" (reply 4) to
/// every IPv6 target and tunnels to IPv4 ones. Returns its address and how many IPv6
/// targets it was asked for.
async fn ipv4_only_socks5() -> (SocketAddr, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let asked_v6 = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&asked_v6);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut head = [0u8; 3];
            s.read_exact(&mut head).await.unwrap();
            s.write_all(&[5, 0]).await.unwrap();
            let mut req = [0u8; 4];
            s.read_exact(&mut req).await.unwrap();
            if req[3] == 4 {
                let mut rest = [0u8; 18];
                s.read_exact(&mut rest).await.unwrap();
                seen.fetch_add(1, Ordering::Relaxed);
                s.write_all(&[5, 4, 0, 1, 0, 0, 0, 0, 0, 0]).await.unwrap();
                continue;
            }
            assert_eq!(req[3], 1, "an IPv4 address or an IPv6 one is sent");
            let mut rest = [0u8; 6];
            s.read_exact(&mut rest).await.unwrap();
            let ip = Ipv4Addr::new(rest[0], rest[1], rest[2], rest[3]);
            let port = u16::from_be_bytes([rest[4], rest[5]]);
            let mut site = tokio::net::TcpStream::connect((ip, port)).await.unwrap();
            s.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await.unwrap();
            tokio::spawn(async move {
                let _ = tokio::io::copy_bidirectional(&mut s, &mut site).await;
            });
        }
    });
    (addr, asked_v6)
}

/// A dual-stack name through an IPv4-only SOCKS5 proxy: its reply to the IPv6 address
/// says the host is unreachable, and the IPv4 address is sent next.
#[actix_rt::test]
async fn a_socks5_exit_moves_on_from_an_address_the_proxy_cannot_reach() {
    let site = TestSite::start(SiteConfig::default());
    let (proxy, asked_v6) = ipv4_only_socks5().await;
    let dns = scripted(vec![
        "2001:db8::1".parse().unwrap(),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    ]);
    let client = client(&format!("socks5://{proxy}"), dns, Reach::Any);
    let port = site.addr().port();
    let r = client
        .get(format!("http://dual.test:{port}/page"))
        .send()
        .await
        .expect("the IPv4 address is reached");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        asked_v6.load(Ordering::Relaxed),
        1,
        "the IPv6 address was tried first"
    );
    assert_eq!(site.stats().requests, 1);
}

/// The connect timeout of the clients built as the crawler builds them ([`exit_client`]).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(600);

/// An exit's client as the crawler builds it (awc's own connect timer included), through
/// `proxy`, with a connect timeout of [`CONNECT_TIMEOUT`].
fn exit_client(proxy: &str, dns: DnsCache) -> awc::Client {
    exit_client_within(proxy, dns, Duration::from_secs(5))
}

/// [`exit_client`] whose whole request has `timeout`.
fn exit_client_within(proxy: &str, dns: DnsCache, timeout: Duration) -> awc::Client {
    let opts = ClientOptions {
        proxy: Some(proxy.parse().unwrap()),
        connect_timeout: CONNECT_TIMEOUT,
        timeout,
        ..ClientOptions::default()
    };
    build_client(&opts, dns)
}

/// A resolver that answers `addrs` for every name after a while, as a cache miss does:
/// resolving the proxy's name is part of the connect's time.
fn slow(addrs: Vec<IpAddr>) -> DnsCache {
    DnsCache::with_resolver(Duration::from_secs(60), move |_host: &str| {
        let addrs = addrs.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(addrs)
        }
    })
}

/// A proxy name whose first address drops SYNs: the connect timeout is shared among the
/// addresses, so the second, a working proxy, is still tried, and reached, within it.
#[actix_rt::test]
async fn a_dead_first_address_of_the_proxy_leaves_time_for_the_next() {
    let site = TestSite::start(SiteConfig::default());
    let proxy = Proxy::tinyproxy(IpAddr::V4(Ipv4Addr::LOCALHOST), PROXY_OUT, false);
    let hole = black_hole(Ipv4Addr::new(127, 0, 0, 9), proxy.port).await;
    let dns = slow(vec![hole.addr.ip(), proxy.addr().ip()]);
    let client = exit_client(&format!("http://proxy.test:{}", proxy.port), dns);
    let started = Instant::now();
    let mut r = client
        .get(site.url("/page"))
        .send()
        .await
        .expect("a tunnel through the second address");
    // Within the one deadline: the dead address had its share, not the whole of it.
    let took = started.elapsed();
    assert!(took < CONNECT_TIMEOUT, "reached after {took:?}");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.body().await.unwrap().len(), 1024);
    assert_eq!(site.stats().peer(PROXY_OUT).requests, 1);
}

/// A proxy that drops every SYN is the exit's failure, not a timeout of the site's.
#[actix_rt::test]
async fn a_proxy_that_cannot_be_connected_to_in_time_is_the_exits_fault() {
    let site = TestSite::start(SiteConfig::default());
    let hole = black_hole(Ipv4Addr::new(127, 0, 0, 9), 0).await;
    let dns = slow(vec![hole.addr.ip()]);
    let client = exit_client(&format!("http://proxy.test:{}", hole.addr.port()), dns);
    let err = client
        .get(site.url("/"))
        .send()
        .await
        .expect_err("the proxy never answers");
    assert_eq!(classify(&err), Failure::Proxy, "{err}");
    let se = socket_error(&err).expect("the connector's error");
    assert_eq!(se.stage, Stage::ProxyConnect, "{err}");
    assert_eq!(se.target, Some(hole.addr), "{err}");
    assert_eq!(se.error.kind(), std::io::ErrorKind::TimedOut, "{err}");
    assert_eq!(site.stats().requests, 0);
}

/// A proxy that accepts connections and never sends a byte; its address.
async fn mute_proxy() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    addr
}

/// A SOCKS5 proxy answers the greeting itself, without the site: one that stalls there is
/// the exit's failure, also when the whole request has no more time than its connect
/// (`timeout_ms = connect_timeout_ms`, what `timeout_ms` given alone makes: the request's
/// timer, which says only "timeout", the site's, must not run out first). An HTTP proxy
/// answers `CONNECT` once it has reached the site, so the same silence there is the
/// site's timeout.
#[actix_rt::test]
async fn a_socks5_proxy_silent_at_the_greeting_is_the_exits_fault() {
    let proxy = mute_proxy().await;
    let dns = DnsCache::new(Duration::from_secs(60));
    for timeout in [Duration::from_secs(5), CONNECT_TIMEOUT] {
        let client = exit_client_within(&format!("socks5h://{proxy}"), dns.clone(), timeout);
        let err = client
            .get("http://site.test/")
            .send()
            .await
            .expect_err("no answer to the greeting");
        assert_eq!(classify(&err), Failure::Proxy, "{timeout:?}: {err}");
        let se = socket_error(&err).expect("the connector's error");
        assert_eq!(se.stage, Stage::Proxy, "{err}");
        assert!(err.to_string().contains("greeting"), "{err}");
    }

    let client = exit_client(&format!("http://{proxy}"), dns);
    let err = client
        .get("http://site.test/")
        .send()
        .await
        .expect_err("no answer to CONNECT");
    assert_eq!(classify(&err), Failure::Timeout, "{err}");
    let se = socket_error(&err).expect("the connector's error");
    assert_eq!(se.stage, Stage::Tunnel, "{err}");
}
