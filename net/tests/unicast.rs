//! A site's addresses that no TCP connection can be made to — multicast, broadcast,
//! reserved, IPv4 carried in IPv6 — are the site's doing, never the exit's: the kernel
//! refuses such a connect at once with "network unreachable", which would otherwise read as
//! the exit's route gone and eject every exit a link to one went through. Loopback only:
//! the kernel refuses these connects before any packet leaves.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use awc::error::{ConnectError, SendRequestError};
use exitcrawl::outcome::Failure;
use exitcrawl_net::{build_client, classify, ClientOptions, DnsCache, SocketError, Stage};
use exitcrawl_testsite::{SiteConfig, TestSite};

const EXIT_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const EXIT_V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

fn opts(ip: IpAddr) -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
        ..ClientOptions::new(ip)
    }
}

/// A resolver that answers `addrs` for every name.
fn scripted(addrs: &[&str]) -> DnsCache {
    let addrs: Vec<IpAddr> = addrs.iter().map(|a| a.parse().unwrap()).collect();
    DnsCache::with_resolver(Duration::from_secs(60), move |_host: &str| {
        let addrs = addrs.clone();
        async move { Ok(addrs) }
    })
}

fn socket_error(err: &SendRequestError) -> Option<&SocketError> {
    match err {
        SendRequestError::Connect(ConnectError::Io(e)) => e.get_ref()?.downcast_ref(),
        _ => None,
    }
}

/// The failure of a request to `url` through an exit at `source`.
async fn failure(source: IpAddr, dns: DnsCache, url: &str) -> (Failure, String) {
    let client = build_client(&opts(source), dns);
    let err = client.get(url).send().await.expect_err(url);
    (classify(&err), err.to_string())
}

#[actix_rt::test]
async fn a_site_at_a_multicast_or_broadcast_address_fails_for_good_and_is_not_the_exits() {
    let dns = DnsCache::new(Duration::from_secs(60));
    for (source, url) in [
        (EXIT_A, "http://224.0.0.1/x"),
        (EXIT_A, "http://239.255.255.250:1900/"),
        (EXIT_A, "http://255.255.255.255/"),
        (EXIT_A, "http://240.0.0.1/"),
        // The broadcast address of loopback's subnet (127.0.0.0/8): no rule of addresses
        // says so, the host's routes do.
        (EXIT_A, "http://127.255.255.255/"),
        (EXIT_V6, "http://[ff02::1]/"),
        (EXIT_V6, "http://[ff05::2]:8080/"),
    ] {
        let (f, text) = failure(source, dns.clone(), url).await;
        assert_eq!(f, Failure::Other, "{url}: {text}");
        assert!(!f.is_exit_fault() && !f.is_local(), "{url}");
        assert!(text.contains("cannot be connected to"), "{url}: {text}");
    }
}

#[actix_rt::test]
async fn a_name_that_resolves_to_such_addresses_only_fails_for_the_site() {
    let dns = scripted(&["224.0.0.1", "ff02::1", "255.255.255.255"]);
    let client = build_client(&opts(EXIT_A), dns);
    let err = client.get("http://group.test/").send().await.unwrap_err();
    assert_eq!(classify(&err), Failure::Other, "{err}");
    let se = socket_error(&err).expect("the connector's error");
    assert_eq!(se.stage, Stage::Unconnectable, "{err}");
    assert!(err.to_string().contains("group.test"), "{err}");
}

#[actix_rt::test]
async fn a_multicast_or_broadcast_first_address_leaves_the_next_to_be_tried() {
    let site = TestSite::start(SiteConfig::default());
    for first in ["224.0.0.1", "127.255.255.255", "255.255.255.255"] {
        let client = build_client(&opts(EXIT_A), scripted(&[first, "127.0.0.1"]));
        let mut res = client
            .get(format!("http://mixed.test:{}/page", site.port()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{first}, then 127.0.0.1: {e}"));
        assert_eq!(res.status().as_u16(), 200);
        assert_eq!(res.body().await.unwrap().len(), 1024);
    }
    assert_eq!(site.stats().peer(EXIT_A).requests, 3);
}

/// `::ffff:127.0.0.1` is the IPv4 address 127.0.0.1: an IPv4 exit reaches it, and to an
/// IPv6 exit it is a host of the other family.
#[actix_rt::test]
async fn an_ipv4_mapped_address_is_the_ipv4_address_it_carries() {
    let site = TestSite::start(SiteConfig::default());
    let literal = format!("http://[::ffff:127.0.0.1]:{}/lit", site.port());
    let dns = scripted(&["::ffff:127.0.0.1"]);
    let named = format!("http://mapped.test:{}/named", site.port());

    let client = build_client(&opts(EXIT_A), dns.clone());
    for url in [&literal, &named] {
        let res = client.get(url).send().await.expect(url);
        assert_eq!(res.status().as_u16(), 200, "{url}");
    }
    assert_eq!(site.stats().peer(EXIT_A).requests, 2);

    for url in [&literal, &named] {
        let (f, text) = failure(EXIT_V6, dns.clone(), url).await;
        assert_eq!(f, Failure::WrongFamily, "{url}: {text}");
        assert!(!f.is_exit_fault(), "{url}");
    }
}
