//! One page, one fetch, however it is spelt: by its masked form in an earlier run's
//! records, or a sitemap named again under a fragment.

use super::*;

#[test]
fn a_resumed_crawl_knows_done_urls_by_their_masked_form() {
    // Records keep URLs with secret-looking query values masked: that form is all a
    // resume knows of a page it fetched.
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots());
    let resume = Resume {
        done: seeds(&["http://a.test/?api_key=***"]),
        pages: 1,
        pending: vec![PendingLink {
            url: "http://a.test/a".into(),
            depth: 1,
            parent: Some("http://a.test/?api_key=***".into()),
            redirect: false,
        }],
    };
    c.start(seeds(&["http://a.test/?api_key=S"]), &[], resume);
    let a = page(c.next(clock.now()));
    assert_eq!(a.url.as_str(), "http://a.test/a", "the seed is done");
    let done = c.on_page(
        &a,
        Ok(html(r#"<a href="/?api_key=S">back</a>"#)),
        clock.now(),
    );
    assert!(done.links.is_empty(), "{:?}", done.links);
    assert_eq!(c.next(clock.now()), Next::Done);
    let t = c.totals();
    assert_eq!((t.fetched, t.deduped), (1, 2));
}

#[test]
fn a_sitemap_index_naming_itself_under_a_fragment_is_read_once() {
    let mut c = crawl(&no_robots());
    let now = Instant::now();
    let given = seeds(&["http://a.test/s.xml"]);
    c.start(Vec::new(), &given, Resume::default());
    let (url, _) = sitemap(c.next(now));
    let index = r#"<sitemapindex><sitemap><loc>http://a.test/s.xml#1</loc></sitemap>
        <sitemap><loc>http://A.test/%73.xml</loc></sitemap></sitemapindex>"#;
    let acts = c.on_sitemap(&url, Ok(status(200, index)), now);
    assert!(acts.is_empty(), "{acts:?}");
    assert_eq!(c.next(now), Next::Done);
    assert_eq!(c.totals().sitemap_fetches, 1);
}

#[test]
fn seeds_are_fetched_whatever_the_seen_limit_and_a_repeated_one_once() {
    let clock = FakeClock::new();
    let mut c = crawl(&CrawlSettings {
        seen_limit: 2,
        ..no_robots()
    });
    let given = seeds(&[
        "http://a.test/",
        "http://b.test/",
        "http://c.test/",
        "http://c.test/",
    ]);
    c.start(given, &[], Resume::default());
    let (got, then) = drain_pages(&mut c, clock.now());
    assert_eq!(
        urls(&got),
        ["http://a.test/", "http://b.test/", "http://c.test/"]
    );
    assert_eq!(then, Next::Idle);
    let t = c.totals();
    assert_eq!((t.discovered, t.deduped, t.seen_full), (3, 1, 0));
    // Links still find the set full.
    let done = c.on_page(&got[0], Ok(html(r#"<a href="/x">x</a>"#)), clock.now());
    assert!(done.links.is_empty());
    assert_eq!(c.totals().seen_full, 1);
}
