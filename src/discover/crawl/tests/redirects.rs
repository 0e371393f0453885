//! Redirects that a page's fetch did not follow: the target a page of its own, its chain
//! bounded, a seed's targets in scope with it, a resumed chain going on.

use super::*;

fn moved(code: u16, location: &str) -> Answer<'_> {
    Answer {
        location: Some(location.as_bytes()),
        ..status(code, "")
    }
}

#[test]
fn a_redirect_chain_is_the_same_page_moved_until_max_redirects() {
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&no_robots()).with_max_redirects(2);
    c.start(seeds(&["http://a.test/0"]), &[], Resume::default());
    let mut at = page(c.next(now));
    for (code, to) in [(301, "/1"), (302, "http://a.test/2")] {
        let done = c.on_page(&at, Ok(moved(code, to)), now);
        assert_eq!(done.error, None);
        let next = page(c.next(now));
        assert_eq!(done.links, [next.url.as_str()]);
        assert_eq!(next.depth, 0, "a redirect is no link: the depth stays");
        assert_eq!(next.parent.as_ref(), Some(&at.url));
        at = next;
    }
    let done = c.on_page(&at, Ok(moved(307, "/3")), now);
    assert!(done.links.is_empty());
    assert_eq!(
        done.error.as_deref(),
        Some("too_many_redirects: too many redirects: more than 2 (last Location: /3)")
    );
    assert_eq!(c.next(now), Next::Done);

    // With no redirects allowed, a redirect is just the page's answer.
    let mut c = crawl(&no_robots()).with_max_redirects(0);
    c.start(seeds(&["http://a.test/0"]), &[], Resume::default());
    let at = page(c.next(now));
    let done = c.on_page(&at, Ok(moved(301, "/1")), now);
    assert_eq!((done.links.len(), done.error), (0, None));
}

#[test]
fn a_seeds_redirect_takes_its_host_into_the_scope_a_links_does_not() {
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&no_robots());
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let seed = page(c.next(now));
    let done = c.on_page(&seed, Ok(html(r#"<a href="/away">away</a>"#)), now);
    assert_eq!(done.links, ["http://a.test/away"]);
    let link = page(c.next(now));
    let done = c.on_page(&link, Ok(moved(301, "http://b.test/")), now);
    assert!(
        done.links.is_empty(),
        "a link's redirect off the site is out of scope"
    );
    assert_eq!(c.totals().skipped_scope, 1);

    let mut c = crawl(&no_robots());
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let seed = page(c.next(now));
    let done = c.on_page(&seed, Ok(moved(301, "https://www.a.test/")), now);
    assert_eq!(done.links, ["https://www.a.test/"]);
    let landed = page(c.next(now));
    let done = c.on_page(&landed, Ok(html(r#"<a href="/in">in</a>"#)), now);
    assert_eq!(
        done.links,
        ["https://www.a.test/in"],
        "the seed's new host is in scope"
    );
    let inside = page(c.next(now));
    let done = c.on_page(&inside, Ok(moved(302, "ftp://a.test/")), now);
    assert_eq!(
        done.error.as_deref(),
        Some("other: redirect to an unusable Location \"ftp://a.test/\"")
    );
}

#[test]
fn a_seeds_pending_redirect_target_resumes_in_scope() {
    let clock = FakeClock::new();
    let mut c = crawl(&no_robots());
    let resume = Resume {
        done: vec!["http://a.test/".into()],
        pages: 1,
        pending: vec![PendingLink {
            url: "https://www.a.test/".into(),
            depth: 0,
            parent: Some("http://a.test/".into()),
            redirect: true,
        }],
    };
    c.start(seeds(&["http://a.test/"]), &[], resume);
    let landed = page(c.next(clock.now()));
    assert_eq!(
        (landed.url.as_str(), landed.depth),
        ("https://www.a.test/", 0)
    );
    // Its chain goes on from the seed: the next host is in scope too.
    let done = c.on_page(&landed, Ok(moved(301, "https://www2.a.test/")), clock.now());
    assert_eq!(done.links, ["https://www2.a.test/"]);
}

#[test]
fn a_redirects_target_seen_already_is_not_queued_again() {
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&no_robots());
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let seed = page(c.next(now));
    let done = c.on_page(&seed, Ok(html(r#"<a href="/known">k</a>"#)), now);
    assert_eq!(done.links, ["http://a.test/known"]);
    let known = page(c.next(now));
    c.on_page(&known, Ok(html("")), now);
    // A page moved to one fetched already, or to itself: nothing new.
    for to in ["/known", "/"] {
        let done = c.on_page(&seed, Ok(moved(302, to)), now);
        assert_eq!((done.links.len(), done.error), (0, None), "{to}");
    }
    assert_eq!(c.next(now), Next::Done);
}

/// Pending links of a resumed crawl: `url` where `parent` redirected, at depth 0.
fn moved_to(url: &str, parent: &str) -> PendingLink {
    PendingLink {
        url: url.into(),
        depth: 0,
        parent: Some(parent.into()),
        redirect: true,
    }
}

#[test]
fn a_resumed_chain_is_a_seeds_only_when_it_began_at_a_seed() {
    let clock = FakeClock::new();
    let now = clock.now();
    // A sitemap listed /listed, which moved to /moved: no seed's chain, so its next hop
    // off the site is out of scope, as it is in a crawl that was never stopped.
    let mut c = crawl(&no_robots());
    let resume = Resume {
        done: seeds(&["http://a.test/", "http://a.test/listed"]),
        pages: 2,
        pending: vec![moved_to("http://a.test/moved", "http://a.test/listed")],
    };
    c.start(seeds(&["http://a.test/"]), &[], resume);
    let landed = page(c.next(now));
    assert_eq!(landed.url.as_str(), "http://a.test/moved");
    let done = c.on_page(&landed, Ok(moved(301, "http://b.test/")), now);
    assert!(done.links.is_empty(), "{:?}", done.links);
    assert_eq!(c.totals().skipped_scope, 1);

    // The seed moved twice before the stop (the first target recorded): the chain that
    // goes on began at the seed, so its hosts are in scope, whatever the records' order.
    let mut c = crawl(&no_robots());
    let resume = Resume {
        done: seeds(&["http://a.test/", "https://a.test/"]),
        pages: 2,
        pending: vec![
            moved_to("https://www.a.test/", "https://a.test/"),
            moved_to("https://a.test/", "http://a.test/"),
        ],
    };
    c.start(seeds(&["http://a.test/"]), &[], resume);
    let landed = page(c.next(now));
    assert_eq!(landed.url.as_str(), "https://www.a.test/");
    let done = c.on_page(&landed, Ok(moved(301, "https://www2.a.test/")), now);
    assert_eq!(done.links, ["https://www2.a.test/"]);
}
