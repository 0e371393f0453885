//! An exit's hops against a real site, with a scripted resolver.

use std::io;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use exitcrawl::address::AddressRule;
use exitcrawl::outcome::Failure;
use exitcrawl_testsite::{SiteConfig, TestSite};
use prometheus_client::metrics::gauge::Gauge;

use super::*;
use crate::net::ClientOptions;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address")
}

/// An exit on 127.0.0.2 where only `private` counts as a private address, resolving
/// names with `answers` in turn.
fn exit(private: IpAddr, answers: Vec<io::Result<Vec<IpAddr>>>) -> Rc<ExitCore> {
    exit_via(None, private, answers)
}

/// [`exit`], through `proxy` if given.
fn exit_via(
    proxy: Option<&str>,
    private: IpAddr,
    answers: Vec<io::Result<Vec<IpAddr>>>,
) -> Rc<ExitCore> {
    let answers = Mutex::new(answers.into_iter());
    let dns = DnsCache::with_resolver(Duration::ZERO, move |_host: &str| {
        let next = answers.lock().unwrap().next().expect("an answer left");
        async move { next }
    });
    let mut client = ClientOptions::new(ip("127.0.0.2"));
    client.proxy = proxy.map(|p| p.parse().expect("a proxy URL"));
    exit_on(client, private, dns)
}

/// An exit with these client settings, where only `private` counts as a private
/// address, resolving names through `dns`.
fn exit_on(client: ClientOptions, private: IpAddr, dns: DnsCache) -> Rc<ExitCore> {
    let opts = ExitOptions {
        client,
        max_body_bytes: 1 << 20,
        throttle_statuses: vec![429, 503],
        headers: Vec::new(),
        cookies: false,
        addresses: AddressRule::new(false).with_private_only(&[private]),
    };
    let share = ExitShare::new(Gauge::default(), None, std::time::Instant::now());
    ExitCore::new(opts, dns, share)
}

async fn get(core: &ExitCore, url: &str) -> Attempted {
    let mut hop = Hop::new(url.parse().expect("a URI"), Method::GET, None);
    core.exchange(&mut hop, &[], Instant::now()).await
}

/// A URL the user gave, on a name that resolves to a private address, whose first
/// lookup failed for a moment: that attempt fails as the resolver's hiccup (retried),
/// not as a public hop led to a private address (final), and the next one is sent.
#[actix_rt::test]
async fn a_resolver_hiccup_is_retried_not_refused_as_private() {
    let private = ip("127.0.0.9");
    let site = TestSite::start_at(SiteConfig::default(), private);
    let hiccup = io::Error::other(
        "failed to lookup address information: Temporary failure in name resolution",
    );
    let core = exit(
        private,
        vec![Err(hiccup), Ok(vec![private]), Ok(vec![private])],
    );
    let url = format!("http://intranet.test:{}/page", site.port());

    let first = get(&core, &url).await;
    let failure = first.result.expect_err("the lookup failed");
    assert_eq!(failure.kind, Failure::Unresolved, "{}", failure.message);
    assert_eq!(failure.error, FetchErrorKind::Dns, "{}", failure.message);
    assert!(
        failure.message.contains("intranet.test"),
        "{}",
        failure.message
    );
    assert!(site.requests().is_empty());

    let second = get(&core, &url).await;
    assert_eq!(second.result.expect("sent").status, 200);
    assert_eq!(site.requests().len(), 1);
}

/// A name that does not exist ends its attempt as a DNS failure that is not retried.
#[actix_rt::test]
async fn a_name_that_does_not_exist_is_a_final_dns_failure() {
    let gone = io::Error::other("failed to lookup address information: Name or service not known");
    let core = exit(ip("127.0.0.9"), vec![Err(gone)]);
    let failure = get(&core, "http://gone.test/")
        .await
        .result
        .expect_err("no such name");
    assert_eq!(failure.kind, Failure::Other);
    assert_eq!(failure.error, FetchErrorKind::Dns);
}

/// Through a proxy, a name this host cannot resolve goes to the proxy all the same (it
/// may know it): here a proxy nothing listens for, so the attempt fails at the proxy,
/// not as a DNS failure.
#[actix_rt::test]
async fn through_a_proxy_a_name_that_does_not_resolve_here_goes_to_the_proxy() {
    let gone =
        || io::Error::other("failed to lookup address information: Name or service not known");
    // Asked twice: when the hop is planned, and by the connector, which then hands the
    // proxy the name.
    let answers = vec![Err(gone()), Err(gone())];
    let core = exit_via(Some("http://127.0.0.1:9"), ip("127.0.0.9"), answers);
    let failure = get(&core, "http://only-the-proxy-knows.test/")
        .await
        .result
        .expect_err("no proxy listens");
    assert_eq!(failure.error, FetchErrorKind::Proxy, "{}", failure.message);
}

/// The request head a client writes to `sock`, as text (`None` if it closed first).
async fn read_head(sock: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt as _;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: what follows the head belongs to the tunnel.
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || sock.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// An HTTP proxy on 127.0.0.1 that opens every tunnel to itself: it answers `CONNECT`
/// with 200, then the request inside with `ok`. Returns its address and the heads it
/// saw (the `CONNECT`, then the request), once its one connection ends.
async fn tunnel_to_self() -> (
    std::net::SocketAddr,
    tokio::task::JoinHandle<Option<(String, String)>>,
) {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = async move {
        let (mut sock, _) = listener.accept().await.ok()?;
        let connect = read_head(&mut sock).await?;
        sock.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .ok()?;
        let request = read_head(&mut sock).await?;
        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .await
            .ok()?;
        Some((connect, request))
    };
    let server = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_secs(20), served)
            .await
            .ok()
            .flatten()
    });
    (addr, server)
}

/// A name with a public and a private address, on a hop led to from a public address,
/// through an HTTP proxy: the proxy is asked for the address checked here, not for the
/// name, which it would resolve itself and might connect to the private address. The
/// site still sees its name in `Host`.
#[actix_rt::test]
async fn through_a_proxy_a_name_with_a_private_address_is_sent_as_the_checked_one() {
    let private = ip("127.0.0.9");
    let (proxy, server) = tunnel_to_self().await;
    let answers = vec![Ok(vec![private, ip("127.0.0.1")])];
    let core = exit_via(Some(&format!("http://{proxy}")), private, answers);
    let uri = "http://mixed.test/page".parse().expect("a URI");
    let mut hop = Hop::new(uri, Method::GET, None).led_from_public(true);
    let answer = core.exchange(&mut hop, &[], Instant::now()).await.result;
    let answer = answer.expect("answered through the tunnel");
    assert_eq!((answer.status, &answer.body[..]), (200, &b"ok"[..]));
    let (connect, request) = server.await.unwrap().expect("the proxy saw both heads");
    let line = connect.lines().next().unwrap_or_default();
    assert_eq!(line, "CONNECT 127.0.0.1:80 HTTP/1.1", "{connect}");
    assert!(
        request
            .to_ascii_lowercase()
            .contains("\r\nhost: mixed.test\r\n"),
        "{request}"
    );
}

/// A name whose every address passes the rule goes to an HTTP proxy as the address
/// checked here too: resolving the name again, the proxy could reach an address never
/// checked (its resolver answering otherwise than ours, a rebinding DNS server).
#[actix_rt::test]
async fn through_a_proxy_a_name_whose_addresses_pass_is_sent_as_the_checked_one() {
    let (proxy, server) = tunnel_to_self().await;
    let answers = vec![Ok(vec![ip("127.0.0.1")])];
    let core = exit_via(Some(&format!("http://{proxy}")), ip("127.0.0.9"), answers);
    let uri = "http://public.test/page".parse().expect("a URI");
    let mut hop = Hop::new(uri, Method::GET, None).led_from_public(true);
    let answer = core.exchange(&mut hop, &[], Instant::now()).await.result;
    assert_eq!(answer.expect("answered through the tunnel").status, 200);
    let (connect, request) = server.await.unwrap().expect("the proxy saw both heads");
    let line = connect.lines().next().unwrap_or_default();
    assert_eq!(line, "CONNECT 127.0.0.1:80 HTTP/1.1", "{connect}");
    assert!(
        request
            .to_ascii_lowercase()
            .contains("\r\nhost: public.test\r\n"),
        "{request}"
    );
}

/// Resolving is part of the request: a resolver slower than the whole request's timeout
/// ends the attempt when that timeout runs out, and nothing is sent. It is the resolver's
/// failure, not the site's: a name not resolved this time (`dns`, retried), as the same
/// slow resolver inside the connector gives, which the limiter does not hear of.
#[actix_rt::test]
async fn a_slow_resolver_ends_the_attempt_within_the_request_timeout() {
    let site = TestSite::start_at(SiteConfig::default(), ip("127.0.0.1"));
    // Paused time, so the resolver's minute costs nothing when it is (wrongly) waited for.
    tokio::time::pause();
    let dns = DnsCache::with_resolver(Duration::ZERO, |_host: &str| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(vec!["127.0.0.1".parse().expect("an address")])
    });
    let mut client = ClientOptions::new(ip("127.0.0.2"));
    client.timeout = Duration::from_secs(1);
    let core = exit_on(client, ip("127.0.0.9"), dns);
    let url = format!("http://slow-dns.test:{}/page", site.port());
    let attempted = get(&core, &url).await;
    // The request's second, not the resolver's minute.
    let latency = attempted.latency;
    assert!(latency < Duration::from_secs(2), "{attempted:?}");
    let failure = attempted.result.expect_err("timed out");
    assert_eq!(failure.kind, Failure::Unresolved, "{}", failure.message);
    assert!(failure.kind.is_transient());
    assert_eq!(failure.error, FetchErrorKind::Dns, "{}", failure.message);
    assert!(
        failure.message.contains("slow-dns.test"),
        "{}",
        failure.message
    );
    assert!(site.requests().is_empty());
}
