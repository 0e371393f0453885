//! The crawl's decisions step by step on a fake clock: no server, no runtime.

use std::time::Duration;

use super::*;
use crate::clock::{Clock, FakeClock};
use crate::discover::RobotsPolicy;

mod dedupe;
mod politeness;
mod redirects;
mod refused;
mod sitemaps;

/// Following links, robots.txt obeyed, everything else by default.
fn settings() -> CrawlSettings {
    CrawlSettings {
        follow: true,
        ..CrawlSettings::default()
    }
}

fn crawl(c: &CrawlSettings) -> Crawl {
    let robots = RobotsCache::new("testbot", RobotsPolicy::default());
    Crawl::new(c, robots).unwrap().with_concurrency(8)
}

/// Robots not consulted: the tests about links see only page fetches.
fn no_robots() -> CrawlSettings {
    CrawlSettings {
        robots: false,
        ..settings()
    }
}

fn seeds(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn html(body: &str) -> Answer<'_> {
    Answer {
        status: 200,
        attempts: 1,
        body: body.as_bytes(),
        final_url: None,
        location: None,
        html: true,
        from_public: false,
    }
}

fn status(code: u16, body: &str) -> Answer<'_> {
    Answer {
        status: code,
        html: false,
        ..html(body)
    }
}

fn page(n: Next) -> Entry {
    match n {
        Next::Act(Action::Fetch(Request::Page(e))) => e,
        other => panic!("expected a page fetch, got {other:?}"),
    }
}

/// The sitemap fetch handed out, and whether it is named by a public answer.
fn sitemap(n: Next) -> (Url, bool) {
    match n {
        Next::Act(Action::Fetch(Request::Sitemap { url, from_public })) => (url, from_public),
        other => panic!("expected a sitemap fetch, got {other:?}"),
    }
}

/// Every page handed out at `now` until the crawl says to wait, as URL strings.
fn drain_pages(c: &mut Crawl, now: Instant) -> (Vec<Entry>, Next) {
    let mut out = Vec::new();
    loop {
        match c.next(now) {
            Next::Act(Action::Fetch(Request::Page(e))) => out.push(e),
            other => return (out, other),
        }
    }
}

fn urls(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|e| e.url.as_str()).collect()
}

#[test]
fn seeds_are_handed_out_round_robin_over_hosts_then_done() {
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots());
    let acts = c.start(
        seeds(&[
            "http://a.test/1",
            "http://a.test/2",
            "http://b.test/1",
            "nope",
        ]),
        &[],
        Resume::default(),
    );
    assert_eq!(
        acts,
        [Action::InvalidSeed {
            url: "nope".into(),
            error: "not a URL: relative URL without a base".into()
        }]
    );
    let (got, then) = drain_pages(&mut c, clock.now());
    assert_eq!(
        urls(&got),
        ["http://a.test/1", "http://b.test/1", "http://a.test/2"]
    );
    assert_eq!(then, Next::Idle, "three fetches in flight");
    assert_eq!(c.in_flight(), 3);
    for e in &got {
        let done = c.on_page(e, Ok(html("")), clock.now());
        assert_eq!(done, PageDone::default());
    }
    assert_eq!(c.next(clock.now()), Next::Done);
    let t = c.totals();
    assert_eq!(
        (t.discovered, t.fetched, t.ok, t.invalid_seeds),
        (3, 3, 3, 1)
    );
}

#[test]
fn concurrency_caps_fetches_in_flight() {
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots()).with_concurrency(1);
    c.start(
        seeds(&["http://a.test/", "http://b.test/"]),
        &[],
        Resume::default(),
    );
    let first = page(c.next(clock.now()));
    assert_eq!(c.next(clock.now()), Next::Idle);
    c.on_page(&first, Ok(html("")), clock.now());
    assert_eq!(page(c.next(clock.now())).url.as_str(), "http://b.test/");
}

#[test]
fn links_are_scoped_deduped_and_limited_by_depth() {
    let clock = FakeClock::new();
    let c_settings = CrawlSettings {
        max_depth: Some(1),
        deny: vec!["/private".into()],
        ..no_robots()
    };
    let mut c = crawl(&c_settings);
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let seed = page(c.next(clock.now()));
    let body = r#"<a href="/x">x</a> <a href="/x#frag">again</a> <a href="/">seed</a>
        <a href="http://other.test/">other host</a> <a href="/private/1">denied</a>
        <a href="/y">y</a>"#;
    let done = c.on_page(&seed, Ok(html(body)), clock.now());
    assert_eq!(done.links, ["http://a.test/x", "http://a.test/y"]);
    // A page's repeats are dropped by extract_links itself; the link back to the seed
    // is the one the seen-set catches.
    let t = c.totals().clone();
    assert_eq!((t.deduped, t.skipped_scope, t.discovered), (1, 2, 3));

    let (got, _) = drain_pages(&mut c, clock.now());
    assert_eq!(urls(&got), ["http://a.test/x", "http://a.test/y"]);
    assert!(got.iter().all(|e| e.depth == 1));
    assert_eq!(
        got[0].parent.as_ref().map(Url::as_str),
        Some("http://a.test/")
    );
    // Depth 2 is past max_depth: counted out of scope, not queued.
    let done = c.on_page(&got[0], Ok(html(r#"<a href="/z">z</a>"#)), clock.now());
    assert!(done.links.is_empty());
    assert_eq!(c.totals().skipped_scope, 3);
    c.on_page(&got[1], Ok(html("")), clock.now());
    assert_eq!(c.next(clock.now()), Next::Done);
}

#[test]
fn links_only_from_2xx_html_and_only_when_following() {
    let clock = FakeClock::new();
    let body = r#"<a href="/x">x</a>"#;
    let mut c = crawl(&no_robots());
    c.start(
        seeds(&["http://a.test/", "http://b.test/", "http://c.test/"]),
        &[],
        Resume::default(),
    );
    let (got, _) = drain_pages(&mut c, clock.now());
    let not_html = Answer {
        html: false,
        ..html(body)
    };
    assert!(c
        .on_page(&got[0], Ok(not_html), clock.now())
        .links
        .is_empty());
    assert!(c
        .on_page(
            &got[1],
            Ok(Answer {
                status: 404,
                ..html(body)
            }),
            clock.now()
        )
        .links
        .is_empty());
    assert_eq!(
        c.on_page(&got[2], Ok(html(body)), clock.now()).links,
        ["http://c.test/x"]
    );
    assert_eq!(c.totals().ok, 2);

    let mut c = crawl(&CrawlSettings {
        follow: false,
        ..no_robots()
    });
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let seed = page(c.next(clock.now()));
    assert!(c
        .on_page(&seed, Ok(html(body)), clock.now())
        .links
        .is_empty());
    assert_eq!(c.next(clock.now()), Next::Done);
}

#[test]
fn a_redirect_target_counts_as_seen_and_is_the_base() {
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots());
    c.start(seeds(&["http://a.test/old"]), &[], Resume::default());
    let seed = page(c.next(clock.now()));
    let answer = Answer {
        final_url: Some("http://a.test/dir/new"),
        ..html(r#"<a href="/dir/new">self</a> <a href="rel">rel</a>"#)
    };
    let done = c.on_page(&seed, Ok(answer), clock.now());
    assert_eq!(done.links, ["http://a.test/dir/rel"]);
    assert_eq!(c.totals().deduped, 1);
}

#[test]
fn the_page_budget_stops_hand_outs_and_drops_the_queue() {
    let clock = FakeClock::new();
    let mut c = crawl(&CrawlSettings {
        max_pages: Some(2),
        ..no_robots()
    });
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let seed = page(c.next(clock.now()));
    let body = r#"<a href="/1">1</a><a href="/2">2</a><a href="/3">3</a>"#;
    assert_eq!(c.on_page(&seed, Ok(html(body)), clock.now()).links.len(), 3);
    let one = page(c.next(clock.now()));
    assert_eq!(one.url.as_str(), "http://a.test/1");
    // The third page finds the budget spent: it and the one still queued are dropped.
    assert_eq!(c.next(clock.now()), Next::Idle);
    assert!(c.budget_spent());
    assert_eq!(c.totals().skipped_budget, 2);
    // Links found after that are counted, not queued, and listed in the page's record,
    // where a resumed crawl finds them.
    let done = c.on_page(&one, Ok(html(r#"<a href="/4">4</a>"#)), clock.now());
    assert_eq!(done.links, ["http://a.test/4"]);
    assert_eq!(c.totals().skipped_budget, 3);
    assert_eq!(c.next(clock.now()), Next::Done);
    assert_eq!(c.totals().fetched, 2);
}

#[test]
fn resume_skips_done_urls_restores_pending_ones_and_counts_pages() {
    let clock = FakeClock::new();
    let mut c = crawl(&CrawlSettings {
        max_pages: Some(3),
        ..no_robots()
    });
    let resume = Resume {
        done: seeds(&["http://a.test/", "http://a.test/1"]),
        pages: 1,
        pending: vec![
            PendingLink {
                url: "http://a.test/1".into(),
                depth: 1,
                parent: Some("http://a.test/".into()),
                redirect: false,
            },
            PendingLink {
                url: "http://a.test/2".into(),
                depth: 1,
                parent: Some("http://a.test/".into()),
                redirect: false,
            },
            PendingLink {
                url: "http://elsewhere.test/".into(),
                depth: 1,
                parent: Some("http://a.test/".into()),
                redirect: false,
            },
            PendingLink {
                url: "http://a.test/3".into(),
                depth: 2,
                parent: Some("http://a.test/2".into()),
                redirect: false,
            },
        ],
    };
    c.start(seeds(&["http://a.test/"]), &[], resume);
    assert_eq!((c.totals().resumed, c.totals().deduped), (2, 1));
    let (got, then) = drain_pages(&mut c, clock.now());
    assert_eq!(urls(&got), ["http://a.test/2", "http://a.test/3"]);
    assert_eq!((got[0].depth, got[1].depth), (1, 2));
    assert_eq!(
        got[1].parent.as_ref().map(Url::as_str),
        Some("http://a.test/2")
    );
    assert_eq!(then, Next::Idle);
    // One page from before and two now: the budget of three is spent.
    let done = c.on_page(&got[0], Ok(html(r#"<a href="/4">4</a>"#)), clock.now());
    assert_eq!(done.links, ["http://a.test/4"]);
    c.on_page(&got[1], Ok(html("")), clock.now());
    assert_eq!(c.next(clock.now()), Next::Done);
    assert_eq!(c.totals().skipped_budget, 1);
}

#[test]
fn failed_fetches_are_counted_and_add_nothing() {
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots());
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let seed = page(c.next(clock.now()));
    let failure = Failure {
        attempts: 3,
        private: false,
        why: "timeout: read".into(),
    };
    assert_eq!(
        c.on_page(&seed, Err(failure), clock.now()),
        PageDone::default()
    );
    let t = c.totals();
    assert_eq!((t.fetched, t.failed, t.ok, t.requests), (1, 1, 0, 3));
    assert_eq!(c.next(clock.now()), Next::Done);
}

fn robots_fetch(n: Next) -> (String, String, Url) {
    match n {
        Next::Act(Action::Fetch(Request::Robots {
            origin, host, url, ..
        })) => (origin, host, url),
        other => panic!("expected a robots.txt fetch, got {other:?}"),
    }
}

#[test]
fn robots_txt_is_fetched_first_and_disallowed_urls_are_skipped() {
    let clock = FakeClock::new();
    let mut c = crawl(&settings());
    c.start(
        seeds(&[
            "http://a.test/",
            "http://a.test/secret/x",
            "http://a.test/open",
        ]),
        &[],
        Resume::default(),
    );
    let (origin, host, url) = robots_fetch(c.next(clock.now()));
    assert_eq!(
        (origin.as_str(), host.as_str()),
        ("http://a.test", "a.test")
    );
    assert_eq!(url.as_str(), "http://a.test/robots.txt");
    // The other URLs of the origin wait aside for the answer.
    assert_eq!(c.next(clock.now()), Next::Idle);
    let body = "User-agent: *\nDisallow: /secret\n";
    assert!(c
        .on_robots(&origin, &host, Ok(status(200, body)), clock.now())
        .is_empty());
    let first = page(c.next(clock.now()));
    assert_eq!(first.url.as_str(), "http://a.test/");
    match c.next(clock.now()) {
        Next::Act(Action::Skipped { entry, error: None }) => {
            assert_eq!(entry.url.as_str(), "http://a.test/secret/x");
        }
        other => panic!("expected a robots skip, got {other:?}"),
    }
    // The skipped URL gave its per-host slot back: the next one goes out alongside.
    assert_eq!(page(c.next(clock.now())).url.as_str(), "http://a.test/open");
    assert_eq!(c.next(clock.now()), Next::Idle);
    assert_eq!(c.in_flight(), 2);
    let t = c.totals();
    assert_eq!((t.robots_fetches, t.skipped_robots, t.requests), (1, 1, 1));
}

#[test]
fn unreachable_robots_txt_backs_off_then_skips_the_origin() {
    let clock = FakeClock::new();
    let mut c = crawl(&settings()).with_max_robots_failures(2);
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    assert!(c
        .on_robots(&origin, &host, Ok(status(503, "")), clock.now())
        .is_empty());
    // RobotsPolicy::default: 60 s before the retry.
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(60)));
    clock.advance(Duration::from_secs(60));
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    let failure = Failure {
        attempts: 1,
        private: false,
        why: "connect: refused".into(),
    };
    let acts = c.on_robots(&origin, &host, Err(failure), clock.now());
    assert_eq!(
        acts,
        [Action::Notice(Notice::RobotsUnreachable {
            origin: "http://a.test".into(),
            failures: 2
        })]
    );
    // The last failure got no answer: the network's fault, the URL's error.
    match c.next(clock.now()) {
        Next::Act(Action::Unreachable { entry, error }) => {
            assert_eq!(entry.url.as_str(), "http://a.test/");
            assert!(error.starts_with("connect: refused"), "{error}");
        }
        other => panic!("expected the URL failed, got {other:?}"),
    }
    assert_eq!(c.next(clock.now()), Next::Done);
    assert_eq!((c.totals().fetched, c.totals().failed), (1, 1));
}

#[test]
fn a_slow_robots_fetch_holds_later_links_of_its_origin_without_asking_again() {
    let clock = FakeClock::new();
    let mut c = crawl(&settings());
    c.start(
        seeds(&["http://a.test/1", "http://b.test/"]),
        &[],
        Resume::default(),
    );
    let (a_origin, a_host, _) = robots_fetch(c.next(clock.now()));
    assert_eq!(a_origin, "http://a.test");
    let (b_origin, b_host, _) = robots_fetch(c.next(clock.now()));
    c.on_robots(&b_origin, &b_host, Ok(status(404, "")), clock.now());
    let b = page(c.next(clock.now()));
    // a.test's robots.txt is still queued, paced or held by a Retry-After well past
    // the cache's pending mark (RobotsPolicy::default: 60 s) when a link to it turns up.
    clock.advance(Duration::from_secs(61));
    let links = r#"<a href="http://a.test/2">2</a>"#;
    c.on_page(&b, Ok(html(links)), clock.now());
    assert_eq!(
        c.next(clock.now()),
        Next::Idle,
        "the link waits for the answer"
    );
    assert_eq!(c.totals().robots_fetches, 2);
    c.on_robots(&a_origin, &a_host, Ok(status(404, "")), clock.now());
    let (got, then) = drain_pages(&mut c, clock.now());
    let mut got = urls(&got);
    got.sort_unstable();
    assert_eq!(got, ["http://a.test/1", "http://a.test/2"]);
    assert_eq!(then, Next::Idle);
    assert_eq!(c.totals().robots_fetches, 2);
}

#[test]
fn crawl_delay_makes_the_host_serial_and_spaced_from_the_answer() {
    let clock = FakeClock::new();
    let mut c = crawl(&settings());
    c.start(
        seeds(&["http://a.test/1", "http://a.test/2"]),
        &[],
        Resume::default(),
    );
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    let body = "User-agent: *\nCrawl-delay: 5\n";
    c.on_robots(&origin, &host, Ok(status(200, body)), clock.now());
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5));
    // The seed that asked for robots.txt waited aside and rejoined where it was.
    let first = page(c.next(clock.now()));
    assert_eq!(first.url.as_str(), "http://a.test/1");
    // The answer takes 3 s: the next send is 5 s after it, not after the send.
    clock.advance(Duration::from_secs(3));
    // Spacing from the send alone would allow the next one at 5 s after the send...
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(2)));
    // ...but the answer came at 3 s, so it is 5 s from now.
    c.on_page(&first, Ok(html("")), clock.now());
    assert_eq!(c.next(clock.now()), Next::Wait(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5));
    assert_eq!(page(c.next(clock.now())).url.as_str(), "http://a.test/2");
}

#[test]
fn sitemaps_add_their_urls_with_lastmod_and_indexes_name_more() {
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots());
    let acts = c.start(
        Vec::new(),
        &seeds(&["http://a.test/sitemap.xml", "not a url"]),
        Resume::default(),
    );
    let map = Url::parse("http://a.test/sitemap.xml").unwrap();
    assert!(
        matches!(
            acts.as_slice(),
            [Action::Notice(Notice::SitemapUrlInvalid { .. })]
        ),
        "{acts:?}"
    );
    assert_eq!(sitemap(c.next(clock.now())), (map.clone(), false));
    let index = r#"<sitemapindex><sitemap><loc>http://a.test/pages.xml</loc></sitemap>
        <sitemap><loc>http://other.test/x.xml</loc></sitemap></sitemapindex>"#;
    let acts = c.on_sitemap(&map, Ok(status(200, index)), clock.now());
    assert!(acts.is_empty(), "{acts:?}");
    let pages = Url::parse("http://a.test/pages.xml").unwrap();
    assert_eq!(sitemap(c.next(clock.now())), (pages.clone(), false));
    let urlset = r#"<urlset><url><loc>http://a.test/p</loc><lastmod>2026-01-02</lastmod></url>
        <url><loc>http://other.test/q</loc></url></urlset>"#;
    assert!(c
        .on_sitemap(&pages, Ok(status(200, urlset)), clock.now())
        .is_empty());
    let p = page(c.next(clock.now()));
    assert_eq!((p.url.as_str(), p.depth), ("http://a.test/p", 0));
    assert_eq!(p.parent.as_ref(), Some(&pages));
    let done = c.on_page(&p, Ok(html("")), clock.now());
    assert_eq!(done.lastmod.as_deref(), Some("2026-01-02"));
    let t = c.totals();
    assert_eq!(
        (
            t.sitemap_fetches,
            t.sitemap_urls,
            t.sitemap_errors,
            t.skipped_scope
        ),
        (2, 1, 1, 2)
    );
    assert_eq!(c.next(clock.now()), Next::Done);
}

#[test]
fn a_sitemap_that_fails_is_counted_and_noticed() {
    let mut c = crawl(&no_robots());
    let now = Instant::now();
    let given = seeds(&["http://a.test/s.xml"]);
    assert!(c.start(Vec::new(), &given, Resume::default()).is_empty());
    let (url, _) = sitemap(c.next(now));
    let acts = c.on_sitemap(&url, Ok(status(404, "")), now);
    assert_eq!(
        acts,
        [Action::Notice(Notice::SitemapFailed {
            url: url.clone(),
            why: "answered 404".into()
        })]
    );
    assert_eq!((c.totals().sitemap_errors, c.in_flight()), (1, 0));
}

#[test]
fn rules_that_do_not_compile_name_their_key() {
    let c = CrawlSettings {
        allow: vec!["ok".into(), "(".into()],
        ..settings()
    };
    let robots = RobotsCache::new("testbot", RobotsPolicy::default());
    assert_eq!(Crawl::new(&c, robots).unwrap_err().key, "crawl.allow[1]");
}

#[test]
fn robots_txt_sitemap_lines_are_fetched_only_when_asked() {
    let clock = FakeClock::new();
    let body = "User-agent: *\nAllow: /\nSitemap: http://a.test/s.xml\n";
    let public = Answer {
        from_public: true,
        ..status(200, body)
    };
    for (sitemaps, want) in [(false, 0), (true, 1)] {
        let mut c = crawl(&CrawlSettings {
            sitemaps,
            ..settings()
        });
        c.start(seeds(&["http://a.test/"]), &[], Resume::default());
        let (origin, host, _) = robots_fetch(c.next(clock.now()));
        assert!(c
            .on_robots(&origin, &host, Ok(public), clock.now())
            .is_empty());
        let mut fetches = Vec::new();
        while let Next::Act(a) = c.next(clock.now()) {
            if let Action::Fetch(Request::Sitemap { url, from_public }) = a {
                fetches.push((url.to_string(), from_public));
            }
        }
        assert_eq!(fetches.len(), want, "sitemaps = {sitemaps}");
        if want == 1 {
            assert_eq!(fetches[0], ("http://a.test/s.xml".into(), true));
            assert_eq!(c.totals().sitemap_fetches, 1);
        }
    }
}

#[test]
fn without_robots_a_disallowing_site_is_fetched_all_the_same() {
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots());
    c.start(seeds(&["http://a.test/secret"]), &[], Resume::default());
    assert_eq!(
        page(c.next(clock.now())).url.as_str(),
        "http://a.test/secret"
    );
    assert_eq!(c.totals().robots_fetches, 0);
}

#[test]
fn a_resumed_crawl_asks_a_done_seeds_robots_txt_for_its_sitemaps() {
    let clock = FakeClock::new();
    let body = "User-agent: *\nAllow: /\nSitemap: http://a.test/s.xml\n";
    for (sitemaps, asks) in [(true, true), (false, false)] {
        let mut c = crawl(&CrawlSettings {
            sitemaps,
            ..settings()
        });
        let resume = Resume {
            done: vec!["http://a.test/".into()],
            pages: 1,
            pending: Vec::new(),
        };
        c.start(seeds(&["http://a.test/"]), &[], resume);
        let next = c.next(clock.now());
        if !asks {
            assert_eq!(next, Next::Done);
            continue;
        }
        let (origin, host, _) = robots_fetch(next);
        assert_eq!(origin, "http://a.test");
        c.on_robots(&origin, &host, Ok(status(200, body)), clock.now());
        let (url, _) = sitemap(c.next(clock.now()));
        assert_eq!(url.as_str(), "http://a.test/s.xml");
    }
}
