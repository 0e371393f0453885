//! Sitemap fetches go through the gates pages go through: the crawl's concurrency, the
//! per-host cap, robots.txt of their origin, its Crawl-delay, and redirects hop by hop.

use super::*;

/// The sitemap of a fetch action, if it is one.
fn sitemap_of(a: Action) -> Option<Url> {
    match a {
        Action::Fetch(Request::Sitemap { url, .. }) => Some(url),
        _ => None,
    }
}

/// The sitemap fetches among `acts` and handed out at `now` until the crawl says to wait.
fn sitemaps_out(c: &mut Crawl, acts: Vec<Action>, now: Instant) -> Vec<Url> {
    let mut out: Vec<Url> = acts.into_iter().filter_map(sitemap_of).collect();
    while let Next::Act(a) = c.next(now) {
        out.extend(sitemap_of(a));
    }
    out
}

/// A sitemap index naming `n` sitemaps of `a.test`.
fn index(n: usize) -> String {
    let mut x = String::from("<sitemapindex>");
    for i in 0..n {
        x += &format!("<sitemap><loc>http://a.test/{i}.xml</loc></sitemap>");
    }
    x + "</sitemapindex>"
}

#[test]
fn an_indexs_sitemaps_wait_for_the_crawls_concurrency_and_the_per_host_cap() {
    let clock = FakeClock::new();
    let now = clock.now();
    // (concurrency, per-host cap): the smaller bounds the sitemaps in flight.
    for (concurrency, per_host) in [(2, 8), (8, 2)] {
        let c_settings = CrawlSettings {
            per_host_concurrency: per_host,
            ..no_robots()
        };
        let mut c = crawl(&c_settings).with_concurrency(concurrency);
        let acts = c.start(
            Vec::new(),
            &seeds(&["http://a.test/index.xml"]),
            Resume::default(),
        );
        let first = sitemaps_out(&mut c, acts, now);
        assert_eq!(urls_of(&first), ["http://a.test/index.xml"]);
        let acts = c.on_sitemap(&first[0], Ok(status(200, &index(10))), now);
        let mut waiting = sitemaps_out(&mut c, acts, now);
        let mut fetched = 0;
        while let Some(u) = waiting.pop() {
            assert!(c.in_flight() <= 2, "{} in flight", c.in_flight());
            fetched += 1;
            let acts = c.on_sitemap(&u, Ok(status(200, "<urlset></urlset>")), now);
            waiting.extend(sitemaps_out(&mut c, acts, now));
        }
        assert_eq!(fetched, 10);
        assert_eq!(c.next(now), Next::Done);
        assert_eq!(c.totals().sitemap_fetches, 11);
    }
}

fn urls_of(list: &[Url]) -> Vec<&str> {
    list.iter().map(Url::as_str).collect()
}

#[test]
fn a_given_sitemap_waits_for_robots_txt_and_a_disallowed_one_is_not_fetched() {
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&settings());
    let acts = c.start(
        Vec::new(),
        &seeds(&["http://a.test/private/s.xml", "http://a.test/s.xml"]),
        Resume::default(),
    );
    assert!(acts.is_empty(), "nothing before robots.txt: {acts:?}");
    let (origin, host, _) = robots_fetch(c.next(now));
    assert_eq!(c.next(now), Next::Idle, "the sitemaps wait for the answer");
    let body = "User-agent: *\nDisallow: /private/\n";
    let acts = c.on_robots(&origin, &host, Ok(status(200, body)), now);
    let mut fetched = Vec::new();
    let mut said = Vec::new();
    for a in acts {
        fetched.extend(sitemap_of(a));
    }
    while let Next::Act(a) = c.next(now) {
        match a {
            Action::Notice(n) => said.push(n),
            a => fetched.extend(sitemap_of(a)),
        }
    }
    assert_eq!(urls_of(&fetched), ["http://a.test/s.xml"]);
    assert_eq!(
        said,
        [Notice::SitemapSkipped {
            url: Url::parse("http://a.test/private/s.xml").unwrap(),
            why: "robots.txt disallows it".into()
        }]
    );
    let t = c.totals();
    assert_eq!((t.sitemap_fetches, t.sitemap_errors), (1, 1));
}

#[test]
fn sitemaps_of_a_crawl_delay_host_are_serial_and_spaced_from_the_answer() {
    let clock = FakeClock::new();
    let mut c = crawl(&settings());
    let acts = c.start(
        Vec::new(),
        &seeds(&["http://a.test/1.xml", "http://a.test/2.xml"]),
        Resume::default(),
    );
    assert!(acts.is_empty(), "{acts:?}");
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    let body = "User-agent: *\nCrawl-delay: 5\n";
    c.on_robots(&origin, &host, Ok(status(200, body)), clock.now());
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5));
    let first = sitemaps_out(&mut c, Vec::new(), clock.now());
    assert_eq!(first.len(), 1, "one at a time: {first:?}");
    clock.advance(Duration::from_secs(3));
    let acts = c.on_sitemap(&first[0], Ok(status(200, "<urlset></urlset>")), clock.now());
    assert!(acts.is_empty(), "{acts:?}");
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5));
    assert_eq!(sitemaps_out(&mut c, Vec::new(), clock.now()).len(), 1);
}

fn moved(location: &str) -> Answer<'_> {
    Answer {
        location: Some(location.as_bytes()),
        ..status(301, "")
    }
}

#[test]
fn a_sitemaps_redirect_is_a_sitemap_fetch_of_its_own_through_robots_txt() {
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&settings()).with_max_redirects(2);
    let given = seeds(&["http://a.test/s.xml", "http://a.test/t.xml"]);
    c.start(Vec::new(), &given, Resume::default());
    let (origin, host, _) = robots_fetch(c.next(now));
    let body = "User-agent: *\nDisallow: /private/\n";
    c.on_robots(&origin, &host, Ok(status(200, body)), now);
    let mut maps = sitemaps_out(&mut c, Vec::new(), now);
    maps.sort();
    assert_eq!(
        urls_of(&maps),
        ["http://a.test/s.xml", "http://a.test/t.xml"]
    );
    // Into a disallowed path: not fetched, said.
    let acts = c.on_sitemap(&maps[0], Ok(moved("/private/s.xml")), now);
    assert!(acts.is_empty(), "{acts:?}");
    match c.next(now) {
        Next::Act(Action::Notice(Notice::SitemapSkipped { url, .. })) => {
            assert_eq!(url.as_str(), "http://a.test/private/s.xml");
        }
        other => panic!("expected the hop skipped, got {other:?}"),
    }
    // A chain: each hop handed out by the crawl, until max_redirects.
    let mut at = maps[1].clone();
    for to in ["/t1.xml", "/t2.xml"] {
        assert!(c.on_sitemap(&at, Ok(moved(to)), now).is_empty());
        let next = sitemaps_out(&mut c, Vec::new(), now);
        assert_eq!(next.len(), 1, "{next:?}");
        assert_eq!(next[0].path(), to);
        at = next[0].clone();
    }
    match c.on_sitemap(&at, Ok(moved("/t3.xml")), now).as_slice() {
        [Action::Notice(Notice::SitemapFailed { url, why })] => {
            assert_eq!(url, &at);
            assert!(why.starts_with("too_many_redirects"), "{why}");
        }
        other => panic!("expected the chain ended, got {other:?}"),
    }
    assert_eq!(c.next(now), Next::Done);
    let t = c.totals();
    assert_eq!((t.sitemap_fetches, t.sitemap_errors), (4, 2));
}

#[test]
fn a_sitemaps_redirect_off_the_crawls_hosts_is_not_followed() {
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&settings());
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let (origin, host, _) = robots_fetch(c.next(now));
    let body = "User-agent: *\nSitemap: http://a.test/s.xml\n";
    c.robots_sitemaps = true;
    let acts = c.on_robots(&origin, &host, Ok(status(200, body)), now);
    let maps = sitemaps_out(&mut c, acts, now);
    assert_eq!(urls_of(&maps), ["http://a.test/s.xml"]);
    match c
        .on_sitemap(&maps[0], Ok(moved("http://b.test/s.xml")), now)
        .as_slice()
    {
        [Action::Notice(Notice::SitemapFailed { why, .. })] => {
            assert!(why.contains("off the crawl's hosts"), "{why}");
        }
        other => panic!("expected the hop left out, got {other:?}"),
    }
}
