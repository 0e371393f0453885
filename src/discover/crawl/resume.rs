//! Going on from an earlier run's records ([`Resume`]): its URLs count as seen, its
//! pending links wait again, and, with sitemaps from robots.txt, the robots.txt of each
//! origin it has records of is read again for its `Sitemap:` lines.
//!
//! That last part is what keeps a resumed crawl one crawl. A URL only a sitemap lists
//! has that sitemap as its parent, so no record's `links` names it: were the run stopped
//! before it was fetched, only reading the sitemap again finds it. A sitemap named by
//! robots.txt is read when its origin's robots.txt is, which happens before a page of
//! the origin is handed out; an origin whose pages all have records hands none out, so
//! its robots.txt is asked for here. That is one robots.txt fetch for each origin the
//! earlier run fetched from, and the sitemaps' URLs that have records are not fetched
//! again.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use url::Url;

use super::{Action, Crawl, PendingLink, Redirected, Request};
use crate::discover::dedupe::fingerprint;
use crate::discover::robots::{origin_key, robots_url};
use crate::discover::{host_key, normalize, Entry, RobotsState, Verdict};

/// The origins an earlier run's records show URLs of, while [`Crawl::start`] sorts out
/// which of them to ask robots.txt of for its sitemaps.
#[derive(Debug, Default)]
pub(super) struct DoneOrigins {
    /// Sitemaps from robots.txt are read: without them nothing here is asked.
    wanted: bool,
    /// The first done URL of each origin, in the records' order.
    first: Vec<Url>,
    /// The origins of `first`.
    known: HashSet<String>,
    /// Origins reached from a trusted page (a seed's, or a link on a page at a private
    /// address): asked as the trusted page would.
    trusted: HashSet<String>,
    /// Origins with a URL waiting in the frontier: its robots.txt gate asks.
    queued: HashSet<String>,
}

impl DoneOrigins {
    /// `u` is a seed's, or reached from a trusted page.
    pub(super) fn trust(&mut self, u: &Url) {
        if self.wanted {
            self.trusted.insert(origin_key(u));
        }
    }

    /// `u` waits in the frontier.
    pub(super) fn queue(&mut self, u: &Url) {
        if self.wanted {
            self.queued.insert(origin_key(u));
        }
    }

    /// Whether the page a link to `u` was found on may still decide how `u`'s origin is
    /// asked: the origin has records and no trusted page led there yet.
    fn trust_open(&self, u: &Url) -> bool {
        if !self.wanted {
            return false;
        }
        let origin = origin_key(u);
        self.known.contains(&origin) && !self.trusted.contains(&origin)
    }
}

/// Which redirect targets an earlier run left pending are where a seed's chain went:
/// those are in scope as the seed is, the others (a sitemap-listed page's, say) as any
/// link. A chain began at a seed when, going back from target to the page that
/// redirected there (each a pending redirect link), it reaches a seed; a redirect of a
/// seed's chain stays at depth 0, as the seed is.
#[derive(Debug, Default)]
pub(super) struct SeedChains {
    /// The page each depth-0 redirect target was reached from (the first, as the crawl
    /// queued it once), by [`fingerprint`].
    redirected_from: HashMap<u64, u64>,
    /// The seeds, by [`fingerprint`].
    seeds: HashSet<u64>,
}

impl SeedChains {
    /// For the pending links `pending`.
    pub(super) fn new(pending: &[PendingLink]) -> SeedChains {
        let mut redirected_from = HashMap::new();
        for l in pending.iter().filter(|l| l.redirect && l.depth == 0) {
            let target = normalize(&l.url).ok();
            let page = l.parent.as_deref().and_then(|p| normalize(p).ok());
            if let (Some(target), Some(page)) = (target, page) {
                redirected_from
                    .entry(fingerprint(&target))
                    .or_insert(fingerprint(&page));
            }
        }
        SeedChains {
            redirected_from,
            seeds: HashSet::new(),
        }
    }

    /// `u` is a seed.
    pub(super) fn seed(&mut self, u: &Url) {
        if !self.redirected_from.is_empty() {
            self.seeds.insert(fingerprint(u));
        }
    }

    /// Whether `link` (normalised: `u`) is where a seed's chain went.
    fn began_at_seed(&self, link: &PendingLink, u: &Url) -> bool {
        if !(link.redirect && link.depth == 0) {
            return false;
        }
        let mut at = fingerprint(u);
        // Each step goes one redirect back; a loop ends when the steps run out.
        for _ in 0..self.redirected_from.len() {
            let Some(page) = self.redirected_from.get(&at) else {
                return false;
            };
            if self.seeds.contains(page) {
                return true;
            }
            at = *page;
        }
        false
    }
}

impl Crawl {
    /// An earlier run's URLs into the seen-set; their origins, for their sitemaps.
    pub(super) fn resume_done(&mut self, done: &[String]) -> DoneOrigins {
        let mut origins = DoneOrigins {
            wanted: self.robots_sitemaps && self.obey_robots,
            ..DoneOrigins::default()
        };
        for u in done {
            let Ok(u) = normalize(u) else {
                continue;
            };
            self.seen.insert(&u);
            self.totals.resumed += 1;
            if u.as_str().contains("***") {
                self.masked_done.insert(u.as_str().into());
            }
            if origins.wanted && origins.known.insert(origin_key(&u)) {
                origins.first.push(u);
            }
        }
        origins
    }

    /// A link an earlier run queued, back into the frontier unless done or out of scope.
    pub(super) fn resume_link(
        &mut self,
        link: PendingLink,
        origins: &mut DoneOrigins,
        chains: &SeedChains,
    ) {
        let Ok(u) = normalize(&link.url) else {
            return;
        };
        let from_seed = chains.began_at_seed(&link, &u);
        if from_seed {
            self.add_seed_host(&u);
        }
        if origins.trust_open(&u) {
            let parent = link.parent.as_deref().and_then(|p| normalize(p).ok());
            if !self.resumed_from_public(parent.as_ref()) {
                origins.trust(&u);
            }
        }
        // Seeds define the scope, so a link that was in scope then is checked again.
        if self.scope.check(&u, link.depth) != Verdict::In || !self.see(&u) {
            return;
        }
        if self.budget_spent {
            self.totals.skipped_budget += 1;
            return;
        }
        let parent = link.parent.as_deref().and_then(|p| normalize(p).ok());
        let from_public = self.resumed_from_public(parent.as_ref());
        if link.redirect {
            // Its chain goes on: bounded, and in scope with its seed, as it would have.
            let chained = Redirected { hops: 1, from_seed };
            self.redirected.insert(u.clone(), chained);
        }
        origins.queue(&u);
        self.frontier.push_entry(Entry {
            url: u,
            depth: link.depth,
            parent,
            from_public,
            sitemap: false,
        });
    }

    /// The done origins that are seeds' or in scope and have nothing waiting, for
    /// [`Crawl::next`] to ask robots.txt of, in the records' order.
    pub(super) fn ask_sitemap_robots(&mut self, origins: DoneOrigins) {
        for u in origins.first.into_iter().rev() {
            let origin = origin_key(&u);
            if origins.queued.contains(&origin) {
                continue;
            }
            // A seed's origin is asked whatever the rules say of the seed, as its page
            // was fetched whatever they say.
            let trusted = origins.trusted.contains(&origin);
            if trusted || self.scope.check(&u, 0) == Verdict::In {
                // Which address led there is not in the records: unless a trusted page
                // did, robots.txt is asked as for a public page.
                let from_public = !trusted && self.addresses.enforced();
                self.sitemap_robots.push((u, from_public));
            }
        }
    }

    /// The robots.txt of `url`'s origin, for its sitemaps (see [`Crawl::sitemap_robots`]),
    /// unless it is known or on its way.
    pub(super) fn robots_for_sitemaps(
        &mut self,
        url: &Url,
        from_public: bool,
        now: Instant,
    ) -> Option<Action> {
        let origin = origin_key(url);
        if self.robots_in_flight.contains_key(&origin)
            || !matches!(self.robots.lookup(&origin, now), RobotsState::Fetch)
        {
            return None;
        }
        self.robots_in_flight.insert(origin.clone(), from_public);
        self.totals.robots_fetches += 1;
        self.in_flight += 1;
        Some(Action::Fetch(Request::Robots {
            origin,
            host: host_key(url).to_owned(),
            url: robots_url(url),
            from_public,
        }))
    }

    /// Whether a link an earlier run found on `parent` counts as found on a public page.
    /// The earlier run's answers are gone: only a parent whose host is an address literal
    /// (or `localhost`) that is private counts as private.
    pub(super) fn resumed_from_public(&self, parent: Option<&Url>) -> bool {
        let Some(host) = parent.and_then(Url::host) else {
            return false;
        };
        let private = match host {
            url::Host::Ipv4(ip) => self.addresses.is_private(ip.into()),
            url::Host::Ipv6(ip) => self.addresses.is_private(ip.into()),
            url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        };
        self.addresses.enforced() && !private
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use crate::config::{CrawlScope, CrawlSettings};
    use crate::discover::crawl::{Next, Resume};
    use crate::discover::{RobotsCache, RobotsPolicy};

    fn crawl(scope: CrawlScope) -> Crawl {
        let c = CrawlSettings {
            follow: true,
            sitemaps: true,
            scope,
            ..CrawlSettings::default()
        };
        let robots = RobotsCache::new("testbot", RobotsPolicy::default());
        Crawl::new(&c, robots).unwrap().with_concurrency(8)
    }

    fn link(url: &str, parent: &str) -> PendingLink {
        PendingLink {
            url: url.into(),
            depth: 1,
            parent: Some(parent.into()),
            redirect: false,
        }
    }

    /// The robots.txt fetches handed out before the first page, as (URL, from_public).
    fn robots_asked(c: &mut Crawl, now: Instant) -> Vec<(String, bool)> {
        let mut asked = Vec::new();
        while let Next::Act(Action::Fetch(Request::Robots {
            url, from_public, ..
        })) = c.next(now)
        {
            asked.push((url.to_string(), from_public));
        }
        asked
    }

    #[test]
    fn each_done_origin_with_nothing_waiting_is_asked_for_its_sitemaps_once() {
        let clock = FakeClock::new();
        let mut c = crawl(CrawlScope::SameDomain);
        let resume = Resume {
            done: vec![
                "http://a.test/".into(),
                "http://blog.a.test/".into(),
                "http://blog.a.test/post".into(),
                "https://shop.a.test/".into(),
                "http://other.test/".into(),
            ],
            pages: 4,
            pending: vec![
                link("http://blog.a.test/", "http://a.test/"),
                link("https://shop.a.test/", "http://a.test/"),
                link("https://shop.a.test/cart", "https://shop.a.test/"),
            ],
        };
        c.start(vec!["http://a.test/".into()], &[], resume);
        // shop's page waits: the robots.txt gate asks for it, once, when the page's turn
        // comes; other.test is out of scope.
        let asked = robots_asked(&mut c, clock.now());
        let urls: Vec<&str> = asked.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://a.test/robots.txt",
                "http://blog.a.test/robots.txt",
                "https://shop.a.test/robots.txt"
            ]
        );
        assert_eq!(c.totals().robots_fetches, 3);
    }

    #[test]
    fn a_done_origin_is_asked_as_trusted_only_when_a_trusted_page_led_there() {
        let clock = FakeClock::new();
        let mut c = crawl(CrawlScope::Any);
        let resume = Resume {
            done: vec![
                "http://10.0.0.1/".into(),
                "http://10.0.0.2/".into(),
                "http://10.0.0.3/".into(),
                "http://b.test/".into(),
            ],
            pages: 4,
            pending: vec![
                link("http://10.0.0.2/", "http://10.0.0.1/"),
                link("http://10.0.0.3/", "http://b.test/"),
            ],
        };
        c.start(vec!["http://10.0.0.1/".into()], &[], resume);
        let asked = robots_asked(&mut c, clock.now());
        assert_eq!(
            asked,
            [
                ("http://10.0.0.1/robots.txt".into(), false),
                ("http://10.0.0.2/robots.txt".into(), false),
                ("http://10.0.0.3/robots.txt".into(), true),
                ("http://b.test/robots.txt".into(), true),
            ]
        );
    }

    #[test]
    fn without_sitemaps_from_robots_txt_no_done_origin_is_asked() {
        let clock = FakeClock::new();
        let mut c = crawl(CrawlScope::Any);
        c.robots_sitemaps = false;
        let resume = Resume {
            done: vec!["http://a.test/".into(), "http://b.test/".into()],
            pages: 2,
            pending: vec![link("http://b.test/", "http://a.test/")],
        };
        c.start(vec!["http://a.test/".into()], &[], resume);
        assert_eq!(c.next(clock.now()), Next::Done);
    }
}
