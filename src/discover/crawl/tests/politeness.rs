//! robots.txt and Crawl-delay per host: a host whose robots.txt is on its way waits in
//! the frontier, a host with two origins keeps the longer of their delays, and a
//! robots.txt read again replaces its origin's.

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

/// A robots.txt read again (its rules expired) that asks for a shorter Crawl-delay, or
/// none, is what holds from then on: the longest of a host's origins is of their last
/// word, not of every word in the crawl.
#[test]
fn a_robots_txt_read_again_with_a_shorter_crawl_delay_lowers_it() {
    let clock = FakeClock::new();
    let robots = RobotsCache::new(
        "testbot",
        RobotsPolicy {
            ttl: Duration::from_secs(60),
            ..RobotsPolicy::default()
        },
    );
    let mut c = Crawl::new(&settings(), robots).unwrap().with_concurrency(8);
    let urls: Vec<String> = (0..6).map(|i| format!("http://a.test/{i}")).collect();
    c.start(urls, &[], Resume::default());
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    c.on_robots(
        &origin,
        &host,
        Ok(status(200, "User-agent: *\nCrawl-delay: 10\n")),
        clock.now(),
    );
    clock.advance(Duration::from_secs(10));
    let p = page(c.next(clock.now()));
    c.on_page(&p, Ok(html("")), clock.now());
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(10)));
    // Past the rules' minute, the next page asks robots.txt again: 1 s now.
    clock.advance(Duration::from_secs(61));
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    c.on_robots(
        &origin,
        &host,
        Ok(status(200, "User-agent: *\nCrawl-delay: 1\n")),
        clock.now(),
    );
    clock.advance(Duration::from_secs(1));
    let p = page(c.next(clock.now()));
    c.on_page(&p, Ok(html("")), clock.now());
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(1)));
}
