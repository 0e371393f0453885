//! The exit client against real loopback servers: source binding, local failures,
//! failure classification, the DNS cache. Linux routes all of 127.0.0.0/8 to `lo`, so
//! 127.0.0.2 and 127.0.0.3 are usable source IPs without any setup.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use awc::error::{ConnectError, SendRequestError};
use exitcrawl::outcome::Failure;
use exitcrawl_net::{
    build_client, classify, connect_from, ClientOptions, DnsCache, SocketError, Stage,
};
use exitcrawl_testsite::{FailMode, SiteConfig, TestSite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::black_hole;

const EXIT_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const EXIT_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
/// TEST-NET-1: never configured on the host, so bind() fails with EADDRNOTAVAIL.
const NOT_HERE: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10));

fn opts(ip: IpAddr) -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
        ..ClientOptions::new(ip)
    }
}

fn dns() -> DnsCache {
    DnsCache::new(Duration::from_secs(60))
}

/// The `SocketError` our connector put inside awc's error, if any.
fn socket_error(err: &SendRequestError) -> Option<&SocketError> {
    match err {
        SendRequestError::Connect(ConnectError::Io(e)) => e.get_ref()?.downcast_ref(),
        _ => None,
    }
}

#[actix_rt::test]
async fn each_exit_is_seen_from_its_own_source_ip() {
    let site = TestSite::start(SiteConfig::default());
    let dns = dns();
    for (ip, n) in [(EXIT_A, 3), (EXIT_B, 2)] {
        let client = build_client(&opts(ip), dns.clone());
        for _ in 0..n {
            let mut res = client.get(site.url("/page")).send().await.unwrap();
            assert_eq!(res.status().as_u16(), 200);
            // Reading the body to the end is what lets awc return the connection to the pool.
            assert_eq!(res.body().await.unwrap().len(), 1024);
        }
    }
    let stats = site.stats();
    assert_eq!(stats.peer(EXIT_A).requests, 3);
    assert_eq!(stats.peer(EXIT_B).requests, 2);
    assert_eq!(stats.peers.len(), 2, "no request left from another address");
    // Keep-alive reuse through the custom connector.
    assert_eq!(stats.peer(EXIT_A).connections, 1);
}

#[actix_rt::test]
async fn source_ip_not_on_host_fails_locally_with_eaddrnotavail() {
    let site = TestSite::start(SiteConfig::default());
    let client = build_client(&opts(NOT_HERE), dns());
    let err = client.get(site.url("/")).send().await.unwrap_err();

    assert_eq!(classify(&err), Failure::LocalConnect);
    assert!(classify(&err).is_local());
    let se = socket_error(&err).expect("connector error inside");
    assert_eq!(se.stage, Stage::Bind);
    assert_eq!(se.source_ip, NOT_HERE);
    assert_eq!(se.error.raw_os_error(), Some(libc::EADDRNOTAVAIL));
    let msg = err.to_string();
    assert!(msg.contains("192.0.2.10"), "{msg}");
    assert!(
        msg.contains(&format!("os error {}", libc::EADDRNOTAVAIL)),
        "{msg}"
    );
    // Nothing was sent.
    assert_eq!(site.stats().peers.len(), 0);
}

#[actix_rt::test]
async fn address_family_mismatch_fails_locally_with_a_clear_error() {
    let site = TestSite::start(SiteConfig::default());

    // v4 exit, v6 target.
    let client = build_client(&opts(EXIT_A), dns());
    let url = format!("http://[::1]:{}/", site.port());
    let err = client.get(url).send().await.unwrap_err();
    assert_eq!(classify(&err), Failure::WrongFamily);
    assert!(classify(&err).is_local() && !classify(&err).is_exit_fault());
    assert_eq!(socket_error(&err).unwrap().stage, Stage::AddressFamily);
    assert!(err.to_string().contains("no IPv4 address"), "{err}");

    // v6 exit, v4 target.
    let client = build_client(&opts(IpAddr::V6(Ipv6Addr::LOCALHOST)), dns());
    let err = client.get(site.url("/")).send().await.unwrap_err();
    assert_eq!(classify(&err), Failure::WrongFamily);
    assert!(err.to_string().contains("no IPv6 address"), "{err}");

    // And connect_from refuses a mismatch before any syscall.
    let target = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), site.port());
    let e = connect_from(EXIT_A, target, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(e.stage, Stage::AddressFamily);
    assert!(e.is_local());
}

#[actix_rt::test]
async fn dns_cache_resolves_a_host_once_for_many_connections() {
    let site = TestSite::start(SiteConfig::default());
    let dns = dns();
    let client = build_client(&opts(EXIT_A), dns.clone());
    let url = format!("http://localhost:{}/n", site.port());

    // force_close: every request opens a new connection, so the connector runs each time.
    for _ in 0..10 {
        let res = client.get(&url).force_close().send().await.unwrap();
        assert_eq!(res.status().as_u16(), 200);
    }
    // A concurrent burst from a second exit sharing the cache.
    let client_b = build_client(&opts(EXIT_B), dns.clone());
    let burst: Vec<_> = (0..8)
        .map(|_| {
            let (c, url) = (client_b.clone(), url.clone());
            actix_rt::spawn(
                async move { c.get(&url).force_close().send().await.map(|r| r.status()) },
            )
        })
        .collect();
    for b in burst {
        assert_eq!(b.await.unwrap().unwrap().as_u16(), 200);
    }

    assert_eq!(dns.resolutions(), 1, "{dns:?}");
    assert_eq!(dns.hits(), 17);
    let stats = site.stats();
    assert_eq!(stats.peer(EXIT_A).connections, 10);
    assert_eq!(stats.peer(EXIT_B).connections, 8);

    // IP-literal URLs never touch the cache.
    client.get(site.url("/lit")).send().await.unwrap();
    assert_eq!((dns.resolutions(), dns.hits()), (1, 17));
}

/// A resolver's hiccup (`EAI_AGAIN`, as std words it, or a timeout) is worth another try;
/// a name that does not exist is not.
#[actix_rt::test]
async fn a_name_that_did_not_resolve_is_classified_by_whether_it_may_pass() {
    use std::io;
    let cases = [
        (
            io::Error::other(
                "failed to lookup address information: Temporary failure in name resolution",
            ),
            Failure::Unresolved,
        ),
        (
            io::Error::from(io::ErrorKind::TimedOut),
            Failure::Unresolved,
        ),
        // musl's words for EAI_AGAIN.
        (
            io::Error::other("failed to lookup address information: Try again"),
            Failure::Unresolved,
        ),
        (
            io::Error::other("failed to lookup address information: Name or service not known"),
            Failure::Other,
        ),
    ];
    for (error, want) in cases {
        let text = error.to_string();
        let error = std::sync::Mutex::new(Some(error));
        let dns = DnsCache::with_resolver(Duration::ZERO, move |_host: &str| {
            let e = error.lock().unwrap().take().expect("resolved once");
            async move { Err::<Vec<IpAddr>, _>(e) }
        });
        let client = build_client(&opts(EXIT_A), dns);
        let err = client
            .get("http://name.test/")
            .send()
            .await
            .expect_err("not resolved");
        assert_eq!(classify(&err), want, "{text}: {err}");
    }
}

#[actix_rt::test]
async fn refused_connection_is_classified() {
    // A port that was just free: nothing listens there.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let client = build_client(&opts(EXIT_A), dns());
    let err = client
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Failure::ConnectRefused, "{err}");
    assert_eq!(socket_error(&err).unwrap().stage, Stage::Connect);
}

#[actix_rt::test]
async fn slow_response_is_a_timeout() {
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let client = build_client(
        &ClientOptions {
            timeout: Duration::from_millis(50),
            ..opts(EXIT_A)
        },
        dns(),
    );
    let err = client.get(site.url("/")).send().await.unwrap_err();
    assert_eq!(classify(&err), Failure::Timeout, "{err}");
}

#[actix_rt::test]
async fn connection_closed_by_the_site_is_a_reset() {
    let site = TestSite::start(SiteConfig {
        fail_mode: FailMode::Close,
        ..SiteConfig::default()
    });
    site.set_fail_peer(EXIT_A, true);
    let client = build_client(&opts(EXIT_A), dns());
    let err = client.get(site.url("/")).send().await.unwrap_err();
    assert_eq!(classify(&err), Failure::Reset, "{err:?}");
}

#[actix_rt::test]
async fn connect_from_binds_source_and_sets_socket_options() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    let stream = connect_from(EXIT_B, target, Duration::from_secs(1))
        .await
        .unwrap();
    let (_server_side, peer) = listener.accept().await.unwrap();
    assert_eq!(peer.ip(), EXIT_B);
    assert_eq!(stream.local_addr().unwrap().ip(), EXIT_B);
    assert!(stream.nodelay().unwrap());
    assert!(socket2::SockRef::from(&stream).keepalive().unwrap());
}

/// A bare tokio server checks what actually goes over the wire.
#[actix_rt::test]
async fn requests_carry_the_configured_user_agent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = actix_rt::spawn(async move {
        let (mut sock, peer) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        // Bounded: a request head is far below 64 KiB.
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed before sending a full head");
            head.extend_from_slice(&buf[..n]);
        }
        sock.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
            .await
            .unwrap();
        (
            peer.ip(),
            String::from_utf8(head).unwrap().to_ascii_lowercase(),
        )
    });
    let client = build_client(
        &ClientOptions {
            user_agent: "exitcrawl-test/1".to_owned(),
            ..opts(EXIT_A)
        },
        dns(),
    );
    let res = client
        .get(format!("http://{addr}/ua"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
    let (peer, head) = server.await.unwrap();
    assert_eq!(peer, EXIT_A);
    assert!(head.contains("user-agent: exitcrawl-test/1\r\n"), "{head}");
    // The exit decodes answers itself (body.rs) and says which encodings it takes.
    assert!(
        head.contains("accept-encoding: gzip, deflate, br, zstd\r\n"),
        "{head}"
    );
}

/// A site whose connect() hangs (SYNs dropped): the connect timeout ends it, as the
/// site's timeout.
#[actix_rt::test]
async fn connect_timeout_when_the_accept_queue_is_full() {
    let hole = black_hole(Ipv4Addr::LOCALHOST, 0).await;
    let e = connect_from(EXIT_A, hole.addr, Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(e.stage, Stage::Connect);
    assert_eq!(e.error.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(!e.is_local());

    let client = build_client(
        &ClientOptions {
            connect_timeout: Duration::from_millis(100),
            ..opts(EXIT_A)
        },
        dns(),
    );
    let err = client
        .get(format!("http://{}/", hole.addr))
        .send()
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Failure::Timeout, "{err}");
    // The connector ran out of time itself, so its error names the step.
    let se = socket_error(&err).expect("the connector's error");
    assert_eq!(se.stage, Stage::Connect, "{err}");
}

/// A site name whose first address drops SYNs: the connect timeout is shared among the
/// addresses, so the second is still tried, and reached, within it.
#[actix_rt::test]
async fn a_dead_first_address_of_the_site_leaves_time_for_the_next() {
    let site = TestSite::start(SiteConfig::default());
    let hole = black_hole(Ipv4Addr::new(127, 0, 0, 9), site.port()).await;
    let addrs = vec![hole.addr.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST)];
    // A resolver that takes a while, as a cache miss does: resolving is part of the
    // connect's time.
    let dns = DnsCache::with_resolver(Duration::from_secs(60), move |_host: &str| {
        let addrs = addrs.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(addrs)
        }
    });
    let connect_timeout = Duration::from_millis(1200);
    let client = build_client(
        &ClientOptions {
            connect_timeout,
            ..opts(EXIT_A)
        },
        dns,
    );
    let started = std::time::Instant::now();
    let mut res = client
        .get(format!("http://dual.test:{}/page", site.port()))
        .send()
        .await
        .expect("the second address is reached");
    // Within the one deadline: the dead address had its share (about half), not the
    // whole of it, which would put the second past the deadline.
    let took = started.elapsed();
    assert!(took < connect_timeout, "reached after {took:?}");
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.body().await.unwrap().len(), 1024);
    assert_eq!(site.stats().peer(EXIT_A).requests, 1);
}
