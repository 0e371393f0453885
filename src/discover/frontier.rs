//! The frontier: URLs waiting to be fetched, one queue per host, served round-robin.
//!
//! One FIFO would let a host with 100 000 discovered links starve every other host, and
//! a slow or Crawl-delayed host at its head would hold everyone up. Instead each host has
//! its own FIFO (breadth-first within the host) and an earliest-next instant; [`Frontier::pop`]
//! walks the hosts that have URLs in rotation and hands out the first one that is ready,
//! so hosts interleave and a host that must wait is simply skipped.
//!
//! Politeness per host: [`Frontier::set_interval`] (e.g. robots.txt Crawl-delay) spaces
//! successive pops of one host; [`Frontier::set_next`] pushes the next pop out (e.g.
//! Retry-After); [`Frontier::set_max_in_flight`] caps fetches in flight per host (the
//! caller reports completions with [`Frontier::done`]); [`Frontier::block`] holds a host
//! back until [`Frontier::unblock`] (e.g. while its robots.txt is fetched).
//!
//! A queued URL is kept as its text, not as a parsed [`Url`] (which holds its text and
//! the offsets of every part), and the page it was found on is shared by all the links
//! pushed from it: about 60 bytes plus the URL's length per URL waiting (measured by
//! `tests/frontier_memory.rs`), where parsed entries with their own copy of the parent
//! took about 300. [`Frontier::pop`] parses it again, once.
//!
//! `pop` is O(hosts with queued URLs) in the worst case (all waiting); fine for the
//! thousands of hosts a scoped crawl touches. Hosts keep their timing state after their
//! queue empties, so a host that gets new links later is still spaced correctly.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use url::Url;

/// A URL to fetch, with how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The (normalised) URL.
    pub url: Url,
    /// Links followed from a seed (seeds are 0).
    pub depth: u32,
    /// The page the link was found on (`None` for seeds).
    pub parent: Option<Url>,
    /// Found on a page (or in a sitemap) that came from a public address: it may not lead
    /// to a private one (see `crate::address`). `false` for seeds, which are trusted.
    pub from_public: bool,
    /// A sitemap file to read, not a page: it waits and is sent as a page is (robots.txt,
    /// the per-host cap, Crawl-delay), but gets no record and takes no page budget.
    pub sitemap: bool,
}

/// The answer of [`Frontier::pop`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pop {
    /// Fetch this now (its host's in-flight count went up by one).
    Ready(Entry),
    /// URLs are queued but no host is ready for this long (sooner if a fetch completes
    /// and its host was at its in-flight cap).
    Wait(Duration),
    /// URLs are queued but every host with URLs is at its in-flight cap or blocked: pop
    /// again after a [`Frontier::done`] or [`Frontier::unblock`].
    Busy,
    /// Nothing queued.
    Empty,
}

/// The key the frontier groups URLs by: the host name (or IP literal).
pub fn host_key(url: &Url) -> &str {
    url.host_str().unwrap_or("")
}

/// An [`Entry`] as it waits: the URLs as text (already normalised, so parsing it again
/// gives the same [`Url`]), the parent shared with the other links found on its page.
#[derive(Debug)]
struct Queued {
    url: Box<str>,
    parent: Option<Arc<str>>,
    depth: u32,
    from_public: bool,
    sitemap: bool,
}

impl Queued {
    fn into_entry(self) -> Entry {
        // Each was a `Url` serialised: it parses, to itself.
        let parse = |s: &str| Url::parse(s).expect("a queued URL parses");
        Entry {
            url: parse(&self.url),
            depth: self.depth,
            parent: self.parent.as_deref().map(parse),
            from_public: self.from_public,
            sitemap: self.sitemap,
        }
    }
}

#[derive(Debug, Default)]
struct Host {
    queue: VecDeque<Queued>,
    next: Option<Instant>,
    last_pop: Option<Instant>,
    interval: Duration,
    in_flight: u32,
    /// Held back by [`Frontier::block`].
    blocked: bool,
    /// `(next, last_pop)` before the latest pop, for [`Frontier::release`].
    undo: Option<(Option<Instant>, Option<Instant>)>,
}

/// Per-host queues served round-robin (see the module doc).
#[derive(Debug, Default)]
pub struct Frontier {
    hosts: HashMap<String, Host>,
    /// Hosts with a non-empty queue, in serving order.
    ring: VecDeque<String>,
    len: usize,
    /// Of those, sitemap files.
    sitemaps: usize,
    max_in_flight: Option<u32>,
    /// The parent of the last entry pushed: the links of one page come together.
    last_parent: Option<Arc<str>>,
}

impl Frontier {
    /// Empty, no per-host in-flight cap.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cap fetches in flight per host (`done` must then be called for each `Ready`).
    pub fn set_max_in_flight(&mut self, cap: u32) {
        self.max_in_flight = Some(cap.max(1));
    }

    /// Queue `url` (already normalised, in scope and deduped) behind its host's URLs, as
    /// found on a page from a private address (or as a seed): see [`Entry::from_public`].
    pub fn push(&mut self, url: Url, depth: u32, parent: Option<Url>) {
        self.push_entry(Entry {
            url,
            depth,
            parent,
            from_public: false,
            sitemap: false,
        });
    }

    /// Queue an entry (its URL already normalised, in scope and deduped) behind its
    /// host's URLs.
    pub fn push_entry(&mut self, entry: Entry) {
        self.queue(entry, false);
    }

    /// Queue an entry ahead of its host's URLs (a sitemap, read before the pages).
    pub fn push_first(&mut self, entry: Entry) {
        self.queue(entry, true);
    }

    fn queue(&mut self, entry: Entry, first: bool) {
        let key = host_key(&entry.url).to_owned();
        let queued = self.compact(entry);
        self.sitemaps += usize::from(queued.sitemap);
        let host = self.hosts.entry(key.clone()).or_default();
        if host.queue.is_empty() {
            self.ring.push_back(key);
        }
        if first {
            host.queue.push_front(queued);
        } else {
            host.queue.push_back(queued);
        }
        self.len += 1;
    }

    /// `entry` as it waits, its parent shared with the last entry's when it is the same.
    fn compact(&mut self, entry: Entry) -> Queued {
        let parent = entry.parent.map(|p| match &self.last_parent {
            Some(last) if **last == *p.as_str() => Arc::clone(last),
            _ => {
                let shared: Arc<str> = Arc::from(p.as_str());
                self.last_parent = Some(Arc::clone(&shared));
                shared
            }
        });
        Queued {
            url: entry.url.as_str().into(),
            parent,
            depth: entry.depth,
            from_public: entry.from_public,
            sitemap: entry.sitemap,
        }
    }

    /// The entry popped last for `host` was *not* fetched (robots.txt disallows it, or it
    /// was dropped): free its in-flight slot and give back its spacing, so the host's next
    /// URL is not delayed by a request that never happened.
    pub fn release(&mut self, host: &str) {
        if let Some(h) = self.hosts.get_mut(host) {
            h.in_flight = h.in_flight.saturating_sub(1);
            if let Some((next, last_pop)) = h.undo.take() {
                h.next = next;
                h.last_pop = last_pop;
            }
        }
    }

    /// Put back an entry that was popped but not fetched (robots.txt still unknown, host
    /// must wait): it goes to the front of its host's queue and its in-flight slot is freed.
    pub fn requeue(&mut self, entry: Entry) {
        if let Some(h) = self.hosts.get_mut(host_key(&entry.url)) {
            h.in_flight = h.in_flight.saturating_sub(1);
        }
        self.queue(entry, true);
    }

    /// Hand out nothing of `host` until [`Frontier::unblock`]: its URLs stay queued.
    pub fn block(&mut self, host: &str) {
        self.hosts.entry(host.to_owned()).or_default().blocked = true;
    }

    /// Let [`Frontier::pop`] hand out `host`'s URLs again.
    pub fn unblock(&mut self, host: &str) {
        if let Some(h) = self.hosts.get_mut(host) {
            h.blocked = false;
        }
    }

    /// No pop for `host` before `t` (keeps a later earliest time already set).
    pub fn set_next(&mut self, host: &str, t: Instant) {
        let h = self.hosts.entry(host.to_owned()).or_default();
        h.next = Some(h.next.map_or(t, |n| n.max(t)));
    }

    /// Space pops of `host` by at least `d` (Crawl-delay), also from its last pop.
    pub fn set_interval(&mut self, host: &str, d: Duration) {
        let h = self.hosts.entry(host.to_owned()).or_default();
        h.interval = d;
        if let Some(last) = h.last_pop {
            let t = last + d;
            h.next = Some(h.next.map_or(t, |n| n.max(t)));
        }
    }

    /// A fetch handed out for `host` finished (success or not).
    pub fn done(&mut self, host: &str) {
        if let Some(h) = self.hosts.get_mut(host) {
            h.in_flight = h.in_flight.saturating_sub(1);
        }
    }

    /// The next URL to fetch at `now`, rotating over hosts.
    pub fn pop(&mut self, now: Instant) -> Pop {
        let mut earliest: Option<Instant> = None;
        let mut busy = false;
        for _ in 0..self.ring.len() {
            let Some(key) = self.ring.pop_front() else {
                break;
            };
            let Some(h) = self.hosts.get_mut(&key) else {
                continue; // not reached: ring hosts are in the map
            };
            if h.blocked || self.max_in_flight.is_some_and(|c| h.in_flight >= c) {
                busy = true;
                self.ring.push_back(key);
                continue;
            }
            if let Some(t) = h.next.filter(|t| *t > now) {
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
                self.ring.push_back(key);
                continue;
            }
            let Some(entry) = h.queue.pop_front() else {
                continue; // not reached: ring hosts have URLs
            };
            h.in_flight += 1;
            h.undo = Some((h.next, h.last_pop));
            h.last_pop = Some(now);
            h.next = (!h.interval.is_zero()).then(|| now + h.interval);
            if !h.queue.is_empty() {
                self.ring.push_back(key);
            }
            self.len -= 1;
            self.sitemaps -= usize::from(entry.sitemap);
            return Pop::Ready(entry.into_entry());
        }
        match (earliest, busy) {
            (Some(t), _) => Pop::Wait(t - now),
            (None, true) => Pop::Busy,
            (None, false) => Pop::Empty,
        }
    }

    /// URLs queued, all hosts.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Sitemap files queued ([`Entry::sitemap`]), all hosts.
    pub fn sitemaps(&self) -> usize {
        self.sitemaps
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hosts with queued URLs.
    pub fn hosts_queued(&self) -> usize {
        self.ring.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn ready(p: Pop) -> Entry {
        match p {
            Pop::Ready(e) => e,
            other => panic!("expected Ready, got {other:?}"),
        }
    }

    #[test]
    fn round_robin_does_not_let_a_big_host_starve_others() {
        let mut f = Frontier::new();
        for i in 0..100 {
            f.push(u(&format!("http://big.test/{i}")), 1, None);
        }
        f.push(u("http://small.test/a"), 1, Some(u("http://big.test/0")));
        f.push(u("http://small.test/b"), 2, None);
        let t = Instant::now();
        let hosts: Vec<String> = (0..5)
            .map(|_| host_key(&ready(f.pop(t)).url).to_owned())
            .collect();
        assert_eq!(
            hosts,
            [
                "big.test",
                "small.test",
                "big.test",
                "small.test",
                "big.test"
            ]
        );
        assert_eq!((f.len(), f.hosts_queued()), (97, 1));
        let mut n = 0;
        while let Pop::Ready(_) = f.pop(t) {
            n += 1;
        }
        assert_eq!(n, 97);
        assert_eq!(f.pop(t), Pop::Empty);
    }

    #[test]
    fn intervals_and_next_times_are_honoured() {
        let mut f = Frontier::new();
        let t0 = Instant::now();
        for i in 0..3 {
            f.push(u(&format!("http://slow.test/{i}")), 0, None);
        }
        f.push(u("http://fast.test/x"), 0, None);
        assert_eq!(ready(f.pop(t0)).url.as_str(), "http://slow.test/0");
        f.set_interval("slow.test", Duration::from_secs(2)); // learned after the first pop
        assert_eq!(ready(f.pop(t0)).url.as_str(), "http://fast.test/x");
        assert_eq!(f.pop(t0), Pop::Wait(Duration::from_secs(2)));
        assert_eq!(
            f.pop(t0 + Duration::from_secs(1)),
            Pop::Wait(Duration::from_secs(1))
        );
        let t2 = t0 + Duration::from_secs(2);
        assert_eq!(ready(f.pop(t2)).url.as_str(), "http://slow.test/1");
        f.push(u("http://slow.test/skipped"), 0, None);
        f.push(u("http://slow.test/3"), 0, None);
        let t4 = t2 + Duration::from_secs(2);
        assert_eq!(ready(f.pop(t4)).url.as_str(), "http://slow.test/2");
        f.release("slow.test"); // say robots.txt disallowed it: no spacing charged
        assert_eq!(ready(f.pop(t4)).url.as_str(), "http://slow.test/skipped");
        assert_eq!(f.pop(t4), Pop::Wait(Duration::from_secs(2)));
        let t2 = t4 + Duration::from_secs(2);
        f.set_next("slow.test", t2 + Duration::from_secs(10)); // e.g. Retry-After
        f.set_next("slow.test", t2 + Duration::from_secs(1)); // earlier: ignored
        assert_eq!(
            f.pop(t2 + Duration::from_secs(3)),
            Pop::Wait(Duration::from_secs(7))
        );
        assert!(matches!(f.pop(t2 + Duration::from_secs(10)), Pop::Ready(_)));
        assert_eq!(f.pop(t2 + Duration::from_secs(10)), Pop::Empty);
    }

    #[test]
    fn in_flight_cap_per_host() {
        let mut f = Frontier::new();
        f.set_max_in_flight(1);
        let t = Instant::now();
        f.push(u("http://a.test/1"), 0, None);
        f.push(u("http://a.test/2"), 0, None);
        ready(f.pop(t));
        assert_eq!(f.pop(t), Pop::Busy);
        f.done("a.test");
        let e = ready(f.pop(t));
        assert_eq!(e.url.as_str(), "http://a.test/2");
        f.requeue(e); // e.g. robots.txt not known yet: back to the front, slot freed
        assert_eq!(f.len(), 1);
        assert_eq!(ready(f.pop(t)).url.as_str(), "http://a.test/2");
    }

    #[test]
    fn a_blocked_host_keeps_its_urls_and_a_sitemap_goes_first() {
        let mut f = Frontier::new();
        let t = Instant::now();
        f.push(u("http://a.test/1"), 0, None);
        f.push_first(Entry {
            url: u("http://a.test/s.xml"),
            depth: 0,
            parent: None,
            from_public: false,
            sitemap: true,
        });
        assert_eq!((f.len(), f.sitemaps()), (2, 1));
        f.block("a.test");
        assert_eq!(f.pop(t), Pop::Busy);
        f.unblock("a.test");
        let first = ready(f.pop(t));
        assert!(first.sitemap && first.url.path() == "/s.xml", "{first:?}");
        assert_eq!((f.len(), f.sitemaps()), (1, 0));
        assert!(!ready(f.pop(t)).sitemap);
    }
}
