//! A simulated crawl on fake time over a generated site, using only the pure core: once
//! with its parts by hand (frontier + scope + dedupe + robots cache + link extraction),
//! once through the state machine that combines them (`discover::Crawl`).
//!
//! Site: `www.site.test` (300 pages under /p/, a /private/ subtree disallowed by robots.txt
//! with `Crawl-delay: 2`), `blog.site.test` (15 pages, robots.txt 404), and links out to
//! `other.example` (out of scope). Links are relative, root-relative, absolute with odd
//! case/default port, protocol-relative, with fragments, self-loops, `<base href>` (which
//! also turns `href="#top"` into a link to `/p/`), and `javascript:`/`mailto:`.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use exitcrawl::config::{CrawlScope, CrawlSettings};
use exitcrawl::discover::crawl::{Action, Answer, CrawlTotals, Next, Request, Resume};
use exitcrawl::discover::robots::{origin_key, robots_url};
use exitcrawl::discover::{
    extract_links, host_key, normalize, Entry, Frontier, Pop, RobotsCache, RobotsPolicy,
    RobotsState, Scope, ScopeMode, Seen, Verdict,
};
use exitcrawl::{Clock, FakeClock};
use url::Url;

const WWW_PAGES: usize = 300;
const BLOG_PAGES: usize = 15;
const WWW_ROBOTS: &str = "User-agent: otherbot\nDisallow: /\n\n\
                          User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n";

/// The site: URL string → (status, body). Requests are recorded by the caller.
fn site() -> HashMap<String, (u16, String)> {
    let mut pages = HashMap::new();
    for i in 0..WWW_PAGES {
        let next = (i + 1) % WWW_PAGES;
        let jump = (i * 7) % WWW_PAGES;
        let far = (i * 13 + 5) % WWW_PAGES;
        let mut body = String::from("<!doctype html><html><head><title>p</title>");
        if i % 50 == 0 {
            // base href: "x.html" below resolves under /p/ regardless of the page URL
            body.push_str("<base href=\"/p/\">");
        }
        body.push_str("</head><body>");
        body.push_str(&format!("<a href=\"{next}.html\">next</a>"));
        body.push_str(&format!(
            "<a href=\"HTTP://WWW.Site.test:80/p/{jump}.html#top\">j</a>"
        ));
        body.push_str(&format!("<a href='/p/{i}.html#self'>self</a>"));
        body.push_str(&format!("<a href=../p/./{far}.html>far</a>"));
        body.push_str("<a href=\"#top\">top</a><a href=\"javascript:void(0)\">js</a>");
        body.push_str("<a href=\"mailto:a@site.test\">mail</a>");
        body.push_str("<!-- <a href=\"/p/commented-out.html\">no</a> -->");
        if i % 10 == 0 {
            body.push_str(&format!("<a href=\"/private/{i}.html\">secret</a>"));
            body.push_str(&format!("<a href=\"/private/%7E{i}.html\">secret2</a>"));
        }
        if i % 15 == 0 {
            body.push_str(&format!("<a href=\"http://other.example/x{i}\">out</a>"));
        }
        if i % 20 == 0 {
            body.push_str(&format!(
                "<a href=\"//blog.site.test/b/{}.html\">blog</a>",
                i / 20
            ));
        }
        body.push_str("</body></html>");
        pages.insert(format!("http://www.site.test/p/{i}.html"), (200, body));
    }
    for i in 0..50 {
        let body = format!("<a href=\"/p/{i}.html\">back</a><a href=\"/private/x{i}\">x</a>");
        pages.insert(
            format!("http://www.site.test/private/{i}.html"),
            (200, body),
        );
    }
    for i in 0..BLOG_PAGES {
        let body = format!(
            "<a href=\"{}.html\">n</a><a href=\"http://www.site.test/p/0.html\">home</a>\
             <a href=\"/b/{i}.html?\">self</a>",
            (i + 1) % BLOG_PAGES
        );
        pages.insert(format!("http://blog.site.test/b/{i}.html"), (200, body));
    }
    // Pages with <base href="/p/"> turn href="#top" into a link to /p/ (as browsers do).
    let index = "<a href=\"0.html\">first</a><a href=\"./\">me</a>".to_string();
    pages.insert("http://www.site.test/p/".into(), (200, index));
    pages.insert(
        "http://www.site.test/robots.txt".into(),
        (200, WWW_ROBOTS.into()),
    );
    pages
}

#[derive(Default)]
struct Stats {
    out_of_scope: u64,
    deduped: u64,
    robots_skipped: u64,
}

/// A crawl of [`site`] on fake time through the pure core's parts, as the actor layer
/// drives them.
struct Crawl<'a> {
    site: &'a HashMap<String, (u16, String)>,
    clock: &'a FakeClock,
    scope: Scope,
    seen: Seen,
    frontier: Frontier,
    robots: RobotsCache,
    stats: Stats,
    /// Every request the "server" sees, with its fake time.
    requests: Vec<(Url, Instant)>,
}

impl<'a> Crawl<'a> {
    /// Seeded with `seed`, one fetch in flight at a time.
    fn new(site: &'a HashMap<String, (u16, String)>, clock: &'a FakeClock, seed: Url) -> Self {
        let scope = Scope::new(ScopeMode::SameDomain).seed(&seed);
        let mut seen = Seen::new();
        let mut frontier = Frontier::new();
        frontier.set_max_in_flight(1);
        let robots = RobotsCache::new(
            "exitcrawl/0.1 (+https://example.org/bot)",
            RobotsPolicy::default(),
        );
        seen.insert(&seed);
        frontier.push(seed, 0, None);
        Self {
            site,
            clock,
            scope,
            seen,
            frontier,
            robots,
            stats: Stats::default(),
            requests: Vec::new(),
        }
    }

    /// The "server": records the request and answers from the site (404 if not there).
    fn fetch(&mut self, url: &Url, now: Instant) -> (u16, String) {
        self.requests.push((url.clone(), now));
        self.site
            .get(url.as_str())
            .cloned()
            .unwrap_or((404, String::new()))
    }

    /// Crawl until the frontier is empty.
    fn run(&mut self) {
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 10_000, "crawl does not terminate");
            let now = self.clock.now();
            let entry = match self.frontier.pop(now) {
                Pop::Ready(e) => e,
                Pop::Wait(d) => {
                    self.clock.advance(d);
                    continue;
                }
                Pop::Busy => unreachable!("fetches complete synchronously here"),
                Pop::Empty => break,
            };
            let host = host_key(&entry.url).to_owned();
            let Some((entry, allowed)) = self.check_robots(entry, &host, now) else {
                continue;
            };
            if !allowed {
                self.stats.robots_skipped += 1;
                self.frontier.release(&host); // never requested: no spacing charged
                continue;
            }
            self.fetch_page(entry, &host);
        }
    }

    /// robots.txt first. Unknown: fetch it (here inline; the actor layer fetches it
    /// through the same exits and limits), put the entry back, and let the frontier
    /// space the next request to this host from this one. Returns the entry and whether
    /// robots.txt allows it, or `None` when the entry was put back.
    fn check_robots(&mut self, entry: Entry, host: &str, now: Instant) -> Option<(Entry, bool)> {
        let origin = origin_key(&entry.url);
        let allowed = match self.robots.lookup(&origin, now) {
            RobotsState::Known(r) => r.allowed(&entry.url),
            RobotsState::Wait(until) => {
                self.frontier.set_next(host, until);
                self.frontier.requeue(entry);
                return None;
            }
            RobotsState::Fetch => {
                let (status, body) = self.fetch(&robots_url(&entry.url), now);
                self.robots
                    .on_fetched(&origin, status, body.as_bytes(), now);
                if let RobotsState::Known(r) = self.robots.lookup(&origin, now) {
                    if let Some(d) = r.crawl_delay() {
                        self.frontier.set_interval(host, d);
                    }
                }
                self.frontier.requeue(entry);
                self.clock.advance(Duration::from_millis(20));
                return None;
            }
        };
        Some((entry, allowed))
    }

    /// Fetch an allowed page (it must exist) and queue its in-scope links not seen yet.
    fn fetch_page(&mut self, entry: Entry, host: &str) {
        assert!(self.scope.take_page());
        let now = self.clock.now();
        let (status, body) = self.fetch(&entry.url, now);
        self.clock.advance(Duration::from_millis(50)); // response time
        self.frontier.done(host);
        assert_eq!(
            status,
            200,
            "{} (from {:?})",
            entry.url,
            entry.parent.map(String::from)
        );

        for link in extract_links(body.as_bytes(), &entry.url) {
            match self.scope.check(&link, entry.depth + 1) {
                Verdict::In => {
                    if self.seen.insert(&link) {
                        self.frontier
                            .push(link, entry.depth + 1, Some(entry.url.clone()));
                    } else {
                        self.stats.deduped += 1;
                    }
                }
                _ => self.stats.out_of_scope += 1,
            }
        }
    }
}

#[test]
fn simulated_crawl_visits_allowed_in_scope_pages_once_and_politely() {
    let site = site();
    let clock = FakeClock::new();
    let t0 = clock.now();
    let seed = normalize("http://www.site.test/p/0.html").unwrap();
    let mut crawl = Crawl::new(&site, &clock, seed);
    crawl.run();
    let requests = &crawl.requests;

    assert_each_page_fetched_once(requests);
    assert_robots_fetched_once_per_host(requests);
    assert_polite_and_interleaved(requests, clock.now() - t0, t0);

    // Counters: /private/ links were queued (robots is checked at fetch) and skipped.
    // 30 pages link /private/{i}.html and /private/%7E{i}.html (→ /private/~{i}.html).
    assert_eq!(crawl.stats.robots_skipped, 60);
    assert!(crawl.stats.out_of_scope >= (WWW_PAGES / 15) as u64);
    assert!(crawl.stats.deduped > 0);
    assert_eq!(crawl.scope.pages(), (WWW_PAGES + 1 + BLOG_PAGES) as u64);
}

/// Exactly the allowed, in-scope pages, once each.
fn assert_each_page_fetched_once(requests: &[(Url, Instant)]) {
    let page_requests: Vec<&Url> = requests
        .iter()
        .map(|(u, _)| u)
        .filter(|u| u.path() != "/robots.txt")
        .collect();
    let visited: BTreeSet<String> = page_requests.iter().map(|u| u.to_string()).collect();
    assert_eq!(
        visited.len(),
        page_requests.len(),
        "a page was fetched twice"
    );
    let expected: BTreeSet<String> = (0..WWW_PAGES)
        .map(|i| format!("http://www.site.test/p/{i}.html"))
        .chain(["http://www.site.test/p/".to_string()])
        .chain((0..BLOG_PAGES).map(|i| format!("http://blog.site.test/b/{i}.html")))
        .collect();
    assert_eq!(visited, expected);
    assert!(!visited.iter().any(|u| u.contains("/private/")));
    assert!(!visited.iter().any(|u| u.contains("other.example")));
}

/// robots.txt once per host (www: 200, blog: 404 → allow all).
fn assert_robots_fetched_once_per_host(requests: &[(Url, Instant)]) {
    let robots_fetches: Vec<String> = requests
        .iter()
        .filter(|(u, _)| u.path() == "/robots.txt")
        .map(|(u, _)| u.to_string())
        .collect();
    assert_eq!(
        robots_fetches,
        [
            "http://www.site.test/robots.txt",
            "http://blog.site.test/robots.txt"
        ]
    );
}

/// Politeness: www spaced by its Crawl-delay; the blog crawled during www's waits, so the
/// crawl (`elapsed` from `t0`) takes about as long as www alone.
fn assert_polite_and_interleaved(requests: &[(Url, Instant)], elapsed: Duration, t0: Instant) {
    // Politeness: all requests to www (robots.txt included) spaced by >= Crawl-delay on the fake clock.
    let www_times: Vec<Instant> = requests
        .iter()
        .filter(|(u, _)| u.host_str() == Some("www.site.test"))
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(www_times.len(), WWW_PAGES + 2); // pages, /p/ index, robots.txt
    for w in www_times.windows(2) {
        assert!(
            w[1] - w[0] >= Duration::from_secs(2),
            "spacing {:?}",
            w[1] - w[0]
        );
    }
    // Interleaving: the blog (no Crawl-delay) is crawled during www's waits, so the whole
    // crawl takes about as long as www alone (301 gaps of 2 s), not longer.
    assert!(
        elapsed < Duration::from_secs(2 * (WWW_PAGES as u64 + 1) + 5),
        "{elapsed:?}"
    );
    assert!(
        elapsed >= Duration::from_secs(2 * (WWW_PAGES as u64 + 1)),
        "{elapsed:?}"
    );
    let last_blog = last_request_to(requests, "blog.site.test");
    assert!(
        last_blog - t0 < Duration::from_secs(2 * WWW_PAGES as u64 / 2),
        "blog starved"
    );
}

/// When the crawl last sent a request to `host`.
fn last_request_to(requests: &[(Url, Instant)], host: &str) -> Instant {
    requests
        .iter()
        .filter(|(u, _)| u.host_str() == Some(host))
        .map(|(_, t)| *t)
        .max()
        .expect("a request to the host")
}

/// The same site through [`exitcrawl::discover::Crawl`], the state machine the actor layer
/// carries out: its decisions alone give each allowed page once, robots.txt once per host,
/// and Crawl-delay spacing (timed from each answer, so a little longer than from sends).
#[test]
fn the_crawl_state_machine_crawls_the_site_once_and_politely() {
    let site = site();
    let clock = FakeClock::new();
    let t0 = clock.now();
    let (totals, requests, robots_skipped) = crawl_by_state_machine(&site, &clock);

    assert_each_page_fetched_once(&requests);
    assert_robots_fetched_once_per_host(&requests);
    let www: Vec<Instant> = requests
        .iter()
        .filter(|(u, _)| u.host_str() == Some("www.site.test"))
        .map(|(_, t)| *t)
        .collect();
    assert_eq!(www.len(), WWW_PAGES + 2);
    for w in www.windows(2) {
        // From the previous answer (50 ms after its send) plus the Crawl-delay.
        assert!(
            w[1] - w[0] >= Duration::from_millis(2050),
            "spacing {:?}",
            w[1] - w[0]
        );
    }
    let elapsed = clock.now() - t0;
    let gaps = WWW_PAGES as u32 + 1;
    assert!(
        elapsed < Duration::from_millis(2050) * gaps + Duration::from_secs(5),
        "{elapsed:?}"
    );
    // The blog (no Crawl-delay) goes out during www's waits instead of after it.
    let last_blog = last_request_to(&requests, "blog.site.test");
    assert!(
        last_blog - t0 < Duration::from_secs(WWW_PAGES as u64 / 2),
        "blog starved"
    );
    assert_eq!(robots_skipped, 60);
    assert_eq!(totals.skipped_robots, 60);
    assert_eq!(totals.fetched, (WWW_PAGES + 1 + BLOG_PAGES) as u64);
    assert_eq!(totals.robots_fetches, 2);
    assert!(totals.skipped_scope >= (WWW_PAGES / 15) as u64);
    assert!(totals.deduped > 0);
}

/// Run [`exitcrawl::discover::Crawl`] over `site`, one fetch at a time answered at once
/// after 50 ms: its totals, every request with its time, and the robots.txt skips.
fn crawl_by_state_machine(
    site: &HashMap<String, (u16, String)>,
    clock: &FakeClock,
) -> (CrawlTotals, Vec<(Url, Instant)>, u64) {
    let settings = CrawlSettings {
        follow: true,
        scope: CrawlScope::SameDomain,
        per_host_concurrency: 1,
        ..CrawlSettings::default()
    };
    let robots = RobotsCache::new(
        "exitcrawl/0.1 (+https://example.org/bot)",
        RobotsPolicy::default(),
    );
    let mut crawl = exitcrawl::discover::Crawl::new(&settings, robots).unwrap();
    let seed = vec!["http://www.site.test/p/0.html".to_string()];
    assert!(crawl.start(seed, &[], Resume::default()).is_empty());
    let mut requests = Vec::new();
    let mut robots_skipped = 0;
    for _ in 0..10_000 {
        let request = match crawl.next(clock.now()) {
            Next::Act(Action::Fetch(r)) => r,
            Next::Act(Action::Skipped { error: None, .. }) => {
                robots_skipped += 1;
                continue;
            }
            Next::Wait(d) => {
                clock.advance(d);
                continue;
            }
            Next::Done => return (crawl.into_totals(), requests, robots_skipped),
            other => panic!("not expected with one fetch at a time: {other:?}"),
        };
        let url = match &request {
            Request::Page(e) => e.url.clone(),
            Request::Robots { url, .. } => url.clone(),
            Request::Sitemap { .. } => panic!("no sitemaps in this crawl"),
        };
        requests.push((url.clone(), clock.now()));
        let (status, body) = site
            .get(url.as_str())
            .cloned()
            .unwrap_or((404, String::new()));
        clock.advance(Duration::from_millis(50)); // response time
        let answer = Answer {
            status,
            attempts: 1,
            body: body.as_bytes(),
            final_url: None,
            location: None,
            html: true,
            from_public: false,
        };
        match request {
            Request::Page(e) => {
                assert_eq!(status, 200, "{}", e.url);
                crawl.on_page(&e, Ok(answer), clock.now());
            }
            Request::Robots { origin, host, .. } => {
                assert!(crawl
                    .on_robots(&origin, &host, Ok(answer), clock.now())
                    .is_empty());
            }
            Request::Sitemap { .. } => unreachable!(),
        }
    }
    panic!("the crawl does not terminate");
}
