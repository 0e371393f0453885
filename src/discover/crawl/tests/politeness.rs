//! robots.txt and Crawl-delay per host: a host whose robots.txt is on its way waits in
//! the frontier, and a host with two origins keeps the longer of their delays.

use super::*;

#[test]
fn a_host_waits_in_the_frontier_while_its_robots_txt_is_fetched() {
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&settings());
    let many: Vec<String> = (0..10_000).map(|i| format!("http://a.test/{i}")).collect();
    c.start(many, &[], Resume::default());
    let (origin, host, _) = robots_fetch(c.next(now));
    assert_eq!(c.next(now), Next::Idle);
    assert!(c.queued() >= 9_999, "{} queued", c.queued());
    c.on_robots(&origin, &host, Ok(status(404, "")), now);
    let (got, then) = drain_pages(&mut c, now);
    assert_eq!(got.len(), 2, "the per-host cap");
    assert_eq!(then, Next::Idle);
    assert_eq!(c.queued(), 9_998);
}

#[test]
fn a_host_with_two_origins_keeps_the_longer_crawl_delay() {
    let clock = FakeClock::new();
    let mut c = crawl(&settings());
    c.start(
        seeds(&["http://a.test/1", "https://a.test/2", "http://a.test/3"]),
        &[],
        Resume::default(),
    );
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    assert_eq!(origin, "http://a.test");
    let body = "User-agent: *\nCrawl-delay: 10\n";
    c.on_robots(&origin, &host, Ok(status(200, body)), clock.now());
    clock.advance(Duration::from_secs(10));
    let first = page(c.next(clock.now()));
    c.on_page(&first, Ok(html("")), clock.now());
    clock.advance(Duration::from_secs(10));
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    assert_eq!(origin, "https://a.test");
    let body = "User-agent: *\nCrawl-delay: 1\n";
    c.on_robots(&origin, &host, Ok(status(200, body)), clock.now());
    let wait = Next::Wait(Duration::from_secs(10));
    assert_eq!(c.next(clock.now()), wait, "the http origin's 10 s");
    clock.advance(Duration::from_secs(10));
    let second = page(c.next(clock.now()));
    assert_eq!(second.url.as_str(), "https://a.test/2");
    c.on_page(&second, Ok(html("")), clock.now());
    assert_eq!(c.next(clock.now()), wait, "not the https one's 1 s");
}
