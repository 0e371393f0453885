//! The connections an exit keeps open: after a crawl over many hosts, idle connections
//! to the hosts it has left behind are closed (awc's pool alone keeps one to every host
//! it has been to; see `net/renew.rs`). Asserted from what the servers saw: connections
//! accepted and ended. Loopback only; every server connection is bounded in time.

mod raw_site;
mod support;

use raw_site::{Raw, Then};
use support::exits;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch};

const HOSTS: usize = 24;
const POOL_HOSTS: u32 = 4;

async fn sites(n: usize) -> Vec<Raw> {
    let mut sites = Vec::with_capacity(n);
    for _ in 0..n {
        let site = Raw::start(|_, _| {
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
            (answer, Then::KeepOpen)
        })
        .await;
        sites.push(site);
    }
    sites
}

/// Connections a site has accepted and not yet seen end.
fn open(site: &Raw) -> usize {
    let seen = site.seen();
    seen.connections - seen.closed
}

#[actix_rt::test]
async fn an_exit_closes_idle_connections_to_the_hosts_it_has_left() {
    let sites = sites(HOSTS).await;
    let mut s = Settings::with_exits(exits(1, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.pool_hosts = POOL_HOSTS;
    // Longer than the test: awc's own expiry of idle connections plays no part.
    s.crawler.keep_alive_ms = 600_000;
    let h = Crawler::start(s).unwrap();
    for site in &sites {
        let fetched =
            tokio::time::timeout(Duration::from_secs(30), h.fetch(Fetch::get(site.url("/a"))))
                .await
                .expect("the fetch ends by itself")
                .expect("an answer");
        assert_eq!(fetched.status, 200);
    }
    let total = || sites.iter().map(open).sum::<usize>();
    let closed = support::eventually(Duration::from_secs(10), || async {
        total() <= POOL_HOSTS as usize
    })
    .await;
    assert!(
        closed,
        "{} connections still open to {HOSTS} hosts",
        total()
    );
    for (i, site) in sites.iter().enumerate() {
        let seen = site.seen();
        assert_eq!(seen.lines(), ["GET /a HTTP/1.1"], "site {i}");
        assert_eq!(seen.connections, 1, "site {i}");
    }
    // The hosts of the pool in use keep theirs, ready for their next request.
    let last = &sites[HOSTS - 1];
    assert_eq!(open(last), 1, "the last host's connection was closed too");
}
