//! What a completed fetch does to the crawl: a page's links join the frontier, a
//! robots.txt answer lets its origin's pages go (or holds them back), a sitemap adds
//! its URLs (or, redirecting, its next hop). Each method takes back the in-flight slot
//! its request held.

use std::time::Instant;

use url::Url;

use super::{Action, Answer, Crawl, Failure, NotSent, Notice, PageDone, Redirected};
use crate::discover::links::extract_links_counted;
use crate::discover::sitemap::{self, may_list, SitemapKind};
use crate::discover::{host_key, normalize, Entry, Frontier, RobotsState, Verdict};

impl Crawl {
    /// The page fetch of `entry` (a [`super::Request::Page`]) completed at `now`.
    pub fn on_page(
        &mut self,
        entry: &Entry,
        result: Result<Answer<'_>, Failure>,
        now: Instant,
    ) -> PageDone {
        self.answered(&entry.url, now);
        self.totals.fetched += 1;
        let lastmod = self.lastmods.remove(entry.url.as_str());
        let moved = self.redirected.remove(&entry.url);
        let mut error = None;
        let links = match result {
            Ok(a) => {
                self.totals.requests += u64::from(a.attempts);
                let ok = (200..300).contains(&a.status);
                self.totals.ok += u64::from(ok);
                if let Some(location) = a.location {
                    self.redirect(entry, location, a.from_public, moved)
                        .unwrap_or_else(|e| {
                            error = Some(e);
                            Vec::new()
                        })
                } else if self.follow && ok && a.html {
                    self.enqueue_links(entry, a.final_url, a.body, a.from_public)
                } else {
                    Vec::new()
                }
            }
            Err(f) => {
                self.totals.requests += u64::from(f.attempts);
                self.totals.failed += 1;
                Vec::new()
            }
        };
        PageDone {
            links,
            lastmod,
            error,
        }
    }

    /// A page or sitemap fetch of `url` completed at `now`: its slots are free, and a
    /// Crawl-delay host's next send is timed from here.
    fn answered(&mut self, url: &Url, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let host = host_key(url);
        self.frontier.done(host);
        if let Some(n) = self.host_in_flight.get_mut(host) {
            *n = n.saturating_sub(1);
        }
        if let Some(d) = self.delays.get(host) {
            self.frontier.set_next(host, now + *d);
        }
    }

    /// `page` answered with a redirect to `location` (relative to it) that its fetch did
    /// not follow. The target joins the frontier as the same page moved: at its depth,
    /// through the scope, the dedupe and robots.txt as any link, so a redirect into a
    /// disallowed path or out of scope is not fetched, and a target queued under its own
    /// URL is fetched once. A seed's targets join the scope as the seed did (as wget
    /// takes a start URL that redirects): `http://a.test/` moving to `https://www.a.test/`
    /// is still the crawl's site. (A page that redirects to itself is seen already: the
    /// driver asks it again itself, within the page's one fetch.) Returns the target when
    /// it was queued, or the record's
    /// error when the chain is longer than `max_redirects` or the `Location` is no
    /// http(s) URL.
    fn redirect(
        &mut self,
        page: &Entry,
        location: &[u8],
        from_public: bool,
        moved: Option<Redirected>,
    ) -> Result<Vec<String>, String> {
        let location = String::from_utf8_lossy(location);
        if self.max_redirects == 0 {
            return Ok(Vec::new());
        }
        let hops = moved.map_or(0, |m| m.hops);
        let from_seed = moved.map_or(page.parent.is_none(), |m| m.from_seed);
        if hops >= self.max_redirects {
            return Err(format!(
                "too_many_redirects: too many redirects: more than {} (last Location: {location})",
                self.max_redirects
            ));
        }
        let target = hop(&page.url, &location)?;
        if from_seed {
            self.scope = std::mem::take(&mut self.scope).seed(&target);
        }
        let entry = Entry {
            url: target.clone(),
            depth: page.depth,
            parent: Some(page.url.clone()),
            from_public,
            sitemap: false,
        };
        let url = entry.url.to_string();
        if !self.offer(entry) {
            return Ok(Vec::new());
        }
        if self.budget_spent {
            return Ok(vec![url]);
        }
        let hops = hops + 1;
        self.redirected
            .insert(target, Redirected { hops, from_seed });
        Ok(vec![url])
    }

    /// The robots.txt fetch of `origin`, wanted by `host`, completed at `now`.
    pub fn on_robots(
        &mut self,
        origin: &str,
        host: &str,
        result: Result<Answer<'_>, Failure>,
        now: Instant,
    ) -> Vec<Action> {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.frontier.unblock(host);
        let for_public = self.robots_in_flight.remove(origin).unwrap_or(false);
        let mut stashed = self.stash.remove(origin).unwrap_or_default();
        let mut out = Vec::new();
        let failed = match &result {
            Err(f) if f.private => {
                // The entries led there from public pages are refused.
                let public;
                (public, stashed) = stashed.into_iter().partition(|e| e.from_public);
                for entry in public {
                    out.push(self.not_sent(entry, NotSent::Refused));
                }
                if for_public {
                    // Refused for the address alone, as asked for a link from a public
                    // page: the trusted entries ask again for robots.txt themselves.
                    self.robots.forget(origin);
                    self.put_back(stashed);
                    return out;
                }
                // Asked trusted, it was a redirect to a private address: the same each
                // time, so a robots.txt that got no answer, backed off and counted.
                self.totals.requests += u64::from(f.attempts);
                self.robots.on_network_error(origin, now);
                true
            }
            Ok(a) => {
                self.totals.requests += u64::from(a.attempts);
                self.robots.on_fetched(origin, a.status, a.body, now);
                a.status == 429 || a.status >= 500
            }
            Err(f) => {
                self.totals.requests += u64::from(f.attempts);
                self.robots.on_network_error(origin, now);
                true
            }
        };
        let no_answer = result.as_ref().err().map(|f| f.why.clone());
        if failed {
            let n = self.robots_failures.entry(origin.to_owned()).or_default();
            *n += 1;
            if *n >= self.max_robots_failures {
                let (origin, failures) = (origin.to_owned(), *n);
                self.robots_gave_up.insert(origin.clone(), no_answer);
                out.push(Action::Notice(Notice::RobotsUnreachable {
                    origin,
                    failures,
                }));
            }
        } else {
            self.robots_failures.remove(origin);
            self.apply_robots_delay(origin, host, now);
        }
        self.put_back(stashed);
        if let (false, true, Ok(a)) = (failed, self.robots_sitemaps, &result) {
            let urls = self.robots_sitemap_urls(origin, now);
            let named_by = Url::parse(&format!("{origin}/robots.txt")).ok();
            self.queue_sitemaps(urls, named_by.as_ref(), a.from_public);
        }
        out
    }

    /// Entries set aside for a robots.txt answer, back at the head of their hosts'
    /// queues, where they were.
    fn put_back(&mut self, stashed: Vec<Entry>) {
        for e in stashed.into_iter().rev() {
            self.frontier.push_first(e);
        }
    }

    /// The `Sitemap:` lines of `origin`'s robots.txt, as URLs.
    fn robots_sitemap_urls(&mut self, origin: &str, now: Instant) -> Vec<Url> {
        match self.robots.lookup(origin, now) {
            RobotsState::Known(r) => r
                .sitemaps()
                .iter()
                .filter_map(|s| normalize(s).ok())
                .collect(),
            _ => Vec::new(),
        }
    }

    fn apply_robots_delay(&mut self, origin: &str, host: &str, now: Instant) {
        let RobotsState::Known(r) = self.robots.lookup(origin, now) else {
            return;
        };
        let delay = r.crawl_delay().filter(|d| !d.is_zero());
        // A host's origins (http, https, ports) share its queue: the longest of their
        // delays holds, each origin's as its robots.txt last said.
        let origins = self.origin_delays.entry(host.to_owned()).or_default();
        origins.retain(|(o, _)| o != origin);
        if let Some(d) = delay {
            origins.push((origin.to_owned(), d));
        }
        match origins.iter().map(|(_, d)| *d).max() {
            Some(d) => {
                self.delays.insert(host.to_owned(), d);
                self.frontier.set_interval(host, d);
                self.frontier.set_next(host, now + d);
            }
            None => {
                self.origin_delays.remove(host);
                if self.delays.remove(host).is_some() {
                    self.frontier.set_interval(host, std::time::Duration::ZERO);
                }
            }
        }
    }

    /// The sitemap fetch of `url` completed at `now`: the sitemaps an index names are
    /// queued, the pages a sitemap lists offered, a redirect's target queued as a sitemap
    /// of its own (see [`Crawl::sitemap_redirect`]). `result` carries the body
    /// decompressed.
    pub fn on_sitemap(
        &mut self,
        url: &Url,
        result: Result<Answer<'_>, Failure>,
        now: Instant,
    ) -> Vec<Action> {
        self.answered(url, now);
        let chain = self.sitemap_chains.remove(url);
        let a = match result {
            Ok(a) => a,
            Err(f) => {
                self.totals.requests += u64::from(f.attempts);
                return self.sitemap_failed(url, f.why);
            }
        };
        self.totals.requests += u64::from(a.attempts);
        if let Some(location) = a.location.filter(|_| self.max_redirects > 0) {
            let location = String::from_utf8_lossy(location);
            return self.sitemap_redirect(url, &location, a.from_public, chain);
        }
        if !(200..300).contains(&a.status) {
            return self.sitemap_failed(url, format!("answered {}", a.status));
        }
        let map = match sitemap::parse(a.body) {
            Ok(m) => m,
            Err(e) => return self.sitemap_failed(url, e.to_string()),
        };
        let mut out = Vec::new();
        let mut children = Vec::new();
        if let Some(why) = map.error {
            let (url, kept) = (url.clone(), map.entries.len());
            out.push(Action::Notice(Notice::SitemapMalformed { url, why, kept }));
        }
        // A sitemap speaks for the host it finally came from.
        let base = a
            .final_url
            .and_then(|u| Url::parse(u).ok())
            .unwrap_or_else(|| url.clone());
        for e in map.entries {
            if map.kind == SitemapKind::Index {
                // Normalised as any URL, so that one file read once is one key however
                // it is spelt (`s.xml#1`, `s.xml#2`, …).
                match normalize(&e.loc) {
                    Ok(child) if may_list(&base, &child) => children.push(child),
                    _ => self.totals.skipped_scope += 1,
                }
                continue;
            }
            let page = match normalize(&e.loc) {
                Ok(page) if may_list(&base, &page) => page,
                _ => {
                    self.totals.skipped_scope += 1;
                    continue;
                }
            };
            let key = page.to_string();
            let entry = Entry {
                url: page,
                depth: 0,
                parent: Some(url.clone()),
                from_public: a.from_public,
                sitemap: false,
            };
            if self.offer(entry) {
                self.totals.sitemap_urls += 1;
                if let Some(lastmod) = e.lastmod {
                    self.lastmods.insert(key, lastmod);
                }
            }
        }
        self.queue_sitemaps(children, Some(url), a.from_public);
        out
    }

    /// The sitemap `url` (reached by `chain`, if by a redirect) redirected to
    /// `location`: the target is queued as a sitemap of its own, through robots.txt as
    /// any sitemap, unless the chain is longer than `max_redirects`, the `Location` no
    /// http(s) URL, or the target off the crawl's hosts (a sitemap lists its own host's
    /// pages only, so nothing there would be in scope). A given sitemap's chain takes its
    /// hosts into the scope as a seed's does.
    fn sitemap_redirect(
        &mut self,
        url: &Url,
        location: &str,
        from_public: bool,
        chain: Option<Redirected>,
    ) -> Vec<Action> {
        let hops = chain.map_or(0, |c| c.hops);
        let from_seed = chain.is_some_and(|c| c.from_seed);
        if hops >= self.max_redirects {
            let why = format!(
                "too_many_redirects: too many redirects: more than {}",
                self.max_redirects
            );
            return self.sitemap_failed(url, why);
        }
        let target = match hop(url, location) {
            Ok(t) => t,
            Err(why) => return self.sitemap_failed(url, why),
        };
        if from_seed {
            self.scope = std::mem::take(&mut self.scope).seed(&target);
        } else if !self.scope.host_in(&target) {
            return self.sitemap_failed(url, "redirected off the crawl's hosts".into());
        }
        if &target == url {
            // Read once: a sitemap is not asked again (a page is, by the driver).
            return self.sitemap_failed(url, "redirected to itself".into());
        }
        let hops = hops + 1;
        for t in self.queue_sitemaps(vec![target], Some(url), from_public) {
            self.sitemap_chains
                .insert(t, Redirected { hops, from_seed });
        }
        Vec::new()
    }

    fn sitemap_failed(&mut self, url: &Url, why: String) -> Vec<Action> {
        self.totals.sitemap_errors += 1;
        let url = url.clone();
        vec![Action::Notice(Notice::SitemapFailed { url, why })]
    }

    /// Drop everything queued: the page budget is spent.
    pub(super) fn spend_budget(&mut self) {
        self.budget_spent = true;
        // Sitemaps waiting are no pages: they are dropped uncounted.
        let stashed = self.stash.values().flatten().filter(|e| !e.sitemap).count();
        let pages = self.frontier.len() - self.frontier.sitemaps();
        self.totals.skipped_budget += (pages + stashed) as u64;
        self.stash.clear();
        self.redirected.clear();
        self.sitemap_chains.clear();
        // Nothing more is handed out; completions still report `done` harmlessly.
        self.frontier = Frontier::new();
    }

    /// A discovered URL into the frontier, if it is in scope, new, and within the budget;
    /// `true` when it went in, or was new and left out for the page budget alone: its
    /// page's record lists it all the same, so that a resumed crawl with pages left to
    /// fetch finds it (a resume rebuilds what waits from the records' links).
    fn offer(&mut self, entry: Entry) -> bool {
        if self.scope.check(&entry.url, entry.depth) != Verdict::In {
            self.totals.skipped_scope += 1;
            return false;
        }
        let refused = self.seen.refused();
        if !self.see(&entry.url) {
            if self.seen.refused() > refused {
                self.totals.seen_full += 1;
            } else {
                self.totals.deduped += 1;
            }
            return false;
        }
        self.totals.discovered += 1;
        if self.budget_spent {
            self.totals.skipped_budget += 1;
            return true;
        }
        self.frontier.push_entry(entry);
        true
    }

    /// Links of a fetched page into the frontier. `final_url` is where redirects led, if
    /// any: relative links resolve against it, and it counts as seen (it was fetched).
    /// `from_public`: the page came from a public address.
    fn enqueue_links(
        &mut self,
        page: &Entry,
        final_url: Option<&str>,
        body: &[u8],
        from_public: bool,
    ) -> Vec<String> {
        let depth = page.depth.saturating_add(1);
        let landed = final_url.and_then(|u| normalize(u).ok());
        if let Some(u) = &landed {
            self.seen.insert(u);
        }
        let base = landed.as_ref().unwrap_or(&page.url);
        let mut new = Vec::new();
        let (links, over) = extract_links_counted(body, base);
        if over > 0 {
            self.totals.links_over_cap += over;
            self.totals.pages_over_cap += 1;
        }
        for link in links {
            let entry = Entry {
                url: link,
                depth,
                parent: Some(page.url.clone()),
                from_public,
                sitemap: false,
            };
            let url = entry.url.to_string();
            if self.offer(entry) {
                new.push(url);
            }
        }
        new
    }
}

/// Where a redirect from `at` to `location` leads, normalised; or the record's error when
/// it is no http(s) URL.
fn hop(at: &Url, location: &str) -> Result<Url, String> {
    at.join(location)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .and_then(|u| normalize(u.as_str()).ok())
        .ok_or_else(|| format!("other: redirect to an unusable Location {location:?}"))
}
