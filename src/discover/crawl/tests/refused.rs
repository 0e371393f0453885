//! robots.txt fetches the private-address rule refused: the pages a public page led there
//! are refused, the trusted ones wait for an answer, and an origin whose robots.txt keeps
//! leading to a private address ends like any robots.txt that gets no answer.

use super::*;

fn refused(attempts: u32) -> Failure {
    Failure {
        attempts,
        private: true,
        why: "private address refused".into(),
    }
}

#[test]
fn a_refused_robots_fetch_refuses_pages_led_there_from_public_ones() {
    let clock = FakeClock::new();
    let mut c = crawl(&CrawlSettings {
        scope: crate::config::CrawlScope::Any,
        ..settings()
    });
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let (origin, host, _) = robots_fetch(c.next(clock.now()));
    c.on_robots(&origin, &host, Ok(status(404, "")), clock.now());
    let seed = page(c.next(clock.now()));
    let answer = Answer {
        from_public: true,
        ..html(r#"<a href="http://b.test/x">x</a>"#)
    };
    c.on_page(&seed, Ok(answer), clock.now());
    match c.next(clock.now()) {
        Next::Act(Action::Fetch(Request::Robots {
            origin,
            host,
            from_public: true,
            ..
        })) => {
            match c
                .on_robots(&origin, &host, Err(refused(0)), clock.now())
                .as_slice()
            {
                [Action::Refused(e)] => assert_eq!(e.url.as_str(), "http://b.test/x"),
                other => panic!("expected one refusal, got {other:?}"),
            }
        }
        other => panic!("expected a robots.txt fetch found on public, got {other:?}"),
    }
    let t = c.totals();
    assert_eq!((t.fetched, t.failed), (2, 1));
    assert_eq!(c.next(clock.now()), Next::Done);
}

#[test]
fn a_robots_fetch_refused_for_a_public_pages_link_puts_trusted_urls_back_to_ask_again() {
    // A seed's robots.txt is trusted: only a redirect to a private address refuses it. A
    // robots.txt asked for a link found on a public page is refused by the address alone,
    // which says nothing about a link to the same origin found on a private page (a
    // trusted seed may be private): that one asks again, trusted.
    let clock = FakeClock::new();
    let now = clock.now();
    let mut c = crawl(&CrawlSettings {
        scope: crate::config::CrawlScope::Any,
        ..settings()
    });
    c.start(
        seeds(&["http://a.test/", "http://10.0.0.1/"]),
        &[],
        Resume::default(),
    );
    for _ in 0..2 {
        let (origin, host, _) = robots_fetch(c.next(now));
        c.on_robots(&origin, &host, Ok(status(404, "")), now);
    }
    let (got, _) = drain_pages(&mut c, now);
    assert_eq!(urls(&got), ["http://a.test/", "http://10.0.0.1/"]);
    let public = Answer {
        from_public: true,
        ..html(r#"<a href="http://b.test/x">x</a>"#)
    };
    c.on_page(&got[0], Ok(public), now);
    c.on_page(&got[1], Ok(html(r#"<a href="http://b.test/z">z</a>"#)), now);
    let (origin, host) = match c.next(now) {
        Next::Act(Action::Fetch(Request::Robots {
            origin,
            host,
            from_public: true,
            ..
        })) => (origin, host),
        other => panic!("expected a robots.txt fetch found on public, got {other:?}"),
    };
    assert_eq!(
        c.next(now),
        Next::Idle,
        "the trusted link waits for the answer"
    );
    match c.on_robots(&origin, &host, Err(refused(0)), now).as_slice() {
        [Action::Refused(e)] => assert_eq!(e.url.as_str(), "http://b.test/x"),
        other => panic!("expected one refusal, got {other:?}"),
    }
    match c.next(now) {
        Next::Act(Action::Fetch(Request::Robots {
            origin: again,
            from_public: false,
            ..
        })) => assert_eq!(again, origin),
        other => panic!("expected the trusted link to ask again, got {other:?}"),
    }
    assert_eq!(c.totals().robots_fetches, 4);
}

#[test]
fn a_seeds_robots_txt_redirected_to_a_private_address_ends_after_its_failures() {
    // The public host answers a redirect each time, and the hop is refused each time:
    // asking again at once would never end.
    let clock = FakeClock::new();
    let mut c = crawl(&settings());
    c.start(seeds(&["http://a.test/"]), &[], Resume::default());
    let mut notices = Vec::new();
    let mut failed = Vec::new();
    for _ in 0..20 {
        match c.next(clock.now()) {
            Next::Act(Action::Fetch(Request::Robots {
                origin,
                host,
                from_public: false,
                ..
            })) => notices.extend(c.on_robots(&origin, &host, Err(refused(1)), clock.now())),
            Next::Wait(d) => clock.advance(d),
            Next::Act(Action::Unreachable { entry, error }) => failed.push((entry.url, error)),
            Next::Done => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(c.next(clock.now()), Next::Done, "the crawl ends");
    assert_eq!(
        notices,
        [Action::Notice(Notice::RobotsUnreachable {
            origin: "http://a.test".into(),
            failures: 3
        })]
    );
    match failed.as_slice() {
        [(url, error)] => {
            assert_eq!(url.as_str(), "http://a.test/");
            assert!(error.starts_with("private address refused"), "{error}");
        }
        other => panic!("expected the seed failed, got {other:?}"),
    }
    let t = c.totals();
    assert_eq!((t.robots_fetches, t.requests, t.failed), (3, 3, 1));
}
