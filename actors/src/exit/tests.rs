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
