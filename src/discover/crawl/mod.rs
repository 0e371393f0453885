//! The crawl as a state machine: told what happened, it answers what to do next.
//!
//! Following links mixes decisions (scope, dedupe, page budget, robots.txt, Crawl-delay,
//! sitemaps, resuming) with I/O (fetching, sleeping, writing records). Keeping every
//! decision here, with time handed in as `now`, lets them be tested step by step on
//! plain `Instant`s, without a server or a runtime; the actor layer
//! (`exitcrawl_actors::follow`) only carries the answers out.
//!
//! The driver's loop:
//!
//! ```text
//! start(seeds, sitemaps, resume) ─▶ actions
//! loop: next(now) ─▶ Act(action)  carry it out (a Fetch goes in flight), ask again
//!                    Wait(d)      nothing ready for d: sleep, or until a fetch completes
//!                    Idle         wait for a fetch in flight to complete
//!                    Done         stop
//!       a fetch completed ─▶ on_page / on_robots / on_sitemap ─▶ actions
//! ```
//!
//! What it decides:
//! - **Order**: URLs wait in the per-host [`Frontier`] (round-robin over hosts, FIFO
//!   within one); at most `concurrency` fetches (pages, robots.txt and sitemaps together)
//!   are in flight, at most `per_host_concurrency` pages and sitemaps per host.
//! - **Scope and dedupe**: seeds define the hosts in scope; every discovered URL goes
//!   through [`Scope::check`] (host/domain, allow/deny, depth) and then [`Seen`]; the
//!   page budget is taken when a page is handed out, so a spent budget drops what is
//!   queued.
//! - **Robots**: before a host's first page its origin's robots.txt is fetched (the host
//!   waits in the frontier meanwhile, only the page that asked set aside, so a host with
//!   millions of URLs waiting costs nothing more). 4xx allows all; 5xx, 429 and network
//!   errors hold the origin back with the [`RobotsCache`]'s backoff, and after
//!   `max_robots_failures` in a row its URLs are skipped. A Crawl-delay makes the host serial and spaces each
//!   send from the previous *answer*, so the server never sees two requests closer than
//!   the delay even when the sender queues one longer than the next.
//! - **Sitemaps**: each file read once, sent as a page is: it waits in the frontier (ahead
//!   of its host's pages), asks its origin's robots.txt first (a disallowed one is not
//!   fetched: a [`Notice`] and a `sitemap_errors`), and counts against the concurrency,
//!   the per-host cap and the Crawl-delay; a redirect is a sitemap fetch of its own, at
//!   most `max_redirects` of them, not off the crawl's hosts unless a given sitemap's.
//!   The URLs they list on their own host join like links at depth 0 and keep their
//!   `<lastmod>` for their record.
//! - **Resume**: URLs an earlier run has records for count as seen (also by their masked
//!   form, which is all a record keeps of a secret-looking query value), its pages count
//!   against the budget, its pending links join after the seeds; with sitemaps from
//!   robots.txt, the robots.txt of each origin it has records of is read again.
//!
//! Records and log lines stay with the driver; this module says which to make
//! ([`Action`], [`Notice`]).

mod events;
mod resume;
mod totals;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use url::Url;

use crate::address::AddressRule;
use crate::config::CrawlSettings;
use crate::discover::robots::{origin_key, robots_url};
use crate::discover::{
    host_key, normalize, Entry, Frontier, Pop, RobotsCache, RobotsState, Scope, Seen, Sitemaps,
};
use crate::redact::mask_url;

pub use totals::{build_scope, CrawlError, CrawlTotals, PendingLink, Resume};

/// The record error of a URL skipped because its robots.txt stayed unreachable.
pub const ROBOTS_UNAVAILABLE: &str = "robots_unavailable: robots.txt could not be fetched";

/// A fetch to send; its completion is reported with the matching `on_*` method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A page: report with [`Crawl::on_page`].
    Page(Entry),
    /// The robots.txt of `origin`, wanted by a page of `host`: report with
    /// [`Crawl::on_robots`].
    Robots {
        /// The origin ([`origin_key`]) the answer is cached for.
        origin: String,
        /// The frontier host a Crawl-delay applies to.
        host: String,
        /// `/robots.txt` of the origin.
        url: Url,
        /// Named by a page from a public address: may not lead to a private one.
        from_public: bool,
    },
    /// A sitemap file: report with [`Crawl::on_sitemap`].
    Sitemap {
        /// The sitemap file.
        url: Url,
        /// Named by an answer from a public address (robots.txt, an index): may not
        /// lead to a private one.
        from_public: bool,
    },
}

/// Something worth a log line; no decision hangs on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A given sitemap is not an http(s) URL.
    SitemapUrlInvalid {
        /// As given.
        url: String,
        /// Why it is not a URL.
        error: String,
    },
    /// A sitemap could not be fetched or read.
    SitemapFailed {
        /// The sitemap file.
        url: Url,
        /// What went wrong.
        why: String,
    },
    /// A sitemap broke off; the `kept` entries before the fault are used.
    SitemapMalformed {
        /// The sitemap file.
        url: Url,
        /// The fault.
        why: String,
        /// Entries read before it.
        kept: usize,
    },
    /// A sitemap was not fetched: robots.txt disallows it or could not be read, or the
    /// private-address rule refused it.
    SitemapSkipped {
        /// The sitemap file.
        url: Url,
        /// Why.
        why: String,
    },
    /// robots.txt of `origin` failed `failures` times in a row: its URLs are skipped.
    RobotsUnreachable {
        /// The origin given up on.
        origin: String,
        /// Failures in a row.
        failures: u32,
    },
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this fetch.
    Fetch(Request),
    /// Record the entry as skipped by robots.txt (`error`: why, when it was unreachable).
    Skipped {
        /// The URL not fetched.
        entry: Entry,
        /// [`ROBOTS_UNAVAILABLE`], or `None` when robots.txt disallows it.
        error: Option<&'static str>,
    },
    /// Record the entry as refused: a public page led to a private address.
    Refused(Entry),
    /// Record the entry as failed, not sent: its robots.txt got no answer (`error`).
    Unreachable {
        /// The URL not fetched.
        entry: Entry,
        /// The robots.txt fetch's failure, and that the URL was not sent.
        error: String,
    },
    /// Record a seed that is no http(s) URL.
    InvalidSeed {
        /// The seed as given.
        url: String,
        /// Why it is not a URL.
        error: String,
    },
    /// Log this.
    Notice(Notice),
}

/// The answer of [`Crawl::next`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Carry this out, then ask again.
    Act(Action),
    /// Nothing is ready for this long; ask again then, or when a fetch completes.
    Wait(Duration),
    /// Nothing to hand out until a fetch in flight completes.
    Idle,
    /// Nothing in flight and nothing more to hand out. URLs may still be queued (see
    /// [`Crawl::queued`]) only when the budget is spent, or when the frontier's per-host
    /// slots were never given back, which a driver reporting every completion never sees.
    Done,
}

/// An HTTP answer, as far as the crawl's decisions need it.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// HTTP status.
    pub status: u16,
    /// HTTP attempts it took.
    pub attempts: u32,
    /// The body (a sitemap's already decompressed).
    pub body: &'a [u8],
    /// Where redirects led, if anywhere.
    pub final_url: Option<&'a str>,
    /// A redirect's `Location` (301, 302, 303, 307, 308) as it came (read as UTF-8,
    /// leniently), when the fetch did not follow it: its target joins the frontier as the
    /// same page moved (see [`Crawl::on_page`]).
    pub location: Option<&'a [u8]>,
    /// `text/html` or `application/xhtml+xml`: links are looked for in it.
    pub html: bool,
    /// It came from a public address: what it names may not lead to a private one.
    pub from_public: bool,
}

/// A fetch that ended without an answer the crawl can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// HTTP attempts sent.
    pub attempts: u32,
    /// Refused by the private-address rule before anything was sent.
    pub private: bool,
    /// Why, for the log.
    pub why: String,
}

/// What a completed page fetch gave its record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageDone {
    /// In-scope, unseen links it added to the frontier (normalised).
    pub links: Vec<String>,
    /// The `<lastmod>` of the sitemap that listed it.
    pub lastmod: Option<String>,
    /// Its redirect was not followed, and why (`too_many_redirects: …`, or a `Location`
    /// that is no http(s) URL): the record's `error`.
    pub error: Option<String>,
}

/// One crawl's decisions (see the module doc).
#[derive(Debug)]
pub struct Crawl {
    follow: bool,
    obey_robots: bool,
    robots_sitemaps: bool,
    concurrency: usize,
    max_robots_failures: u32,
    scope: Scope,
    seen: Seen,
    frontier: Frontier,
    robots: RobotsCache,
    /// Fetches handed out and not yet reported, all kinds.
    in_flight: usize,
    /// Entries popped while their origin's robots.txt fetch is in flight: the one that
    /// asked for it, and one more each time its host was let go while another origin's
    /// robots.txt was still on its way (the host is blocked in the frontier meanwhile).
    stash: HashMap<String, Vec<Entry>>,
    /// Origins whose robots.txt fetch is in flight, and whether it was asked for a page
    /// found on a public one (the private-address rule then refuses it by the address
    /// alone).
    robots_in_flight: HashMap<String, bool>,
    robots_failures: HashMap<String, u32>,
    /// Origins whose robots.txt stayed unreachable: their URLs are skipped.
    /// Origins whose robots.txt failed `max_robots_failures` times in a row, with the
    /// last failure's text when it got no answer (the URLs then fail with it; after a
    /// 5xx or 429 they are robots skips).
    robots_gave_up: HashMap<String, Option<String>>,
    /// Frontier hosts with a Crawl-delay: serial, spaced from the previous answer by the
    /// longest of their origins' delays.
    delays: HashMap<String, Duration>,
    /// Each origin's Crawl-delay, by its host: a robots.txt read again replaces its
    /// origin's, and the host's is the longest left.
    origin_delays: HashMap<String, Vec<(String, Duration)>>,
    host_in_flight: HashMap<String, u32>,
    budget_spent: bool,
    totals: CrawlTotals,
    /// Sitemap files read (each once) and the `<lastmod>` of the URLs they listed that
    /// have no record yet.
    sitemaps: Sitemaps,
    lastmods: HashMap<String, String>,
    /// The private-address rule: which resumed links count as found on a public page.
    addresses: AddressRule,
    /// A URL of each origin an earlier run's records show pages of and none of whose
    /// pages waits, with whether it was reached from a public page: its robots.txt is
    /// asked for its `Sitemap:` lines (`[crawl] sitemaps`). No page of the origin is
    /// handed out again to ask for it, and the URLs only those sitemaps list, not yet
    /// fetched, would be lost to the resumed crawl (see [`resume`]).
    sitemap_robots: Vec<(Url, bool)>,
    /// The URLs an earlier run's records show with masked values (`***`), normalised:
    /// records keep URLs as [`mask_url`] gives them, so a URL whose masked form is here
    /// was fetched, whatever its real values.
    masked_done: HashSet<String>,
    /// Redirects one page may take before it ends (`crawler.max_redirects`).
    max_redirects: u32,
    /// Redirect targets queued: the redirects that led there, and whether from a seed.
    redirected: HashMap<Url, Redirected>,
    /// The same for sitemaps (`from_seed`: the chain began at a given sitemap).
    sitemap_chains: HashMap<Url, Redirected>,
}

/// How a queued redirect target was reached.
#[derive(Debug, Clone, Copy)]
struct Redirected {
    /// Redirects in the chain so far.
    hops: u32,
    /// The chain began at a seed: its targets are in scope as the seed is.
    from_seed: bool,
}

/// Why a popped entry is not sent.
enum NotSent {
    /// robots.txt disallows it.
    Disallowed,
    /// Its robots.txt kept answering 5xx or 429.
    Unavailable,
    /// Its robots.txt got no answer: why.
    Unreachable(String),
    /// A public page led there, and its robots.txt fetch found a private address.
    Refused,
}

/// What the robots.txt gate did with a popped entry.
enum Gate {
    /// Fetch it.
    Pass(Entry),
    /// Not now; this is to be done instead.
    Act(Action),
    /// Set aside or put back; pop on.
    Held,
}

impl Crawl {
    /// A crawl by the `[crawl]` table, checking robots.txt with `robots`; one fetch in
    /// flight at a time and 3 robots.txt failures until skipping, unless set otherwise.
    pub fn new(c: &CrawlSettings, robots: RobotsCache) -> Result<Crawl, CrawlError> {
        let mut frontier = Frontier::new();
        frontier.set_max_in_flight(c.per_host_concurrency);
        Ok(Crawl {
            follow: c.follow,
            obey_robots: c.robots,
            robots_sitemaps: c.sitemaps,
            concurrency: 1,
            max_robots_failures: 3,
            scope: build_scope(c)?,
            seen: Seen::with_limit(usize::try_from(c.seen_limit).unwrap_or(usize::MAX)),
            frontier,
            robots,
            in_flight: 0,
            stash: HashMap::new(),
            robots_in_flight: HashMap::new(),
            robots_failures: HashMap::new(),
            robots_gave_up: HashMap::new(),
            delays: HashMap::new(),
            origin_delays: HashMap::new(),
            host_in_flight: HashMap::new(),
            budget_spent: false,
            totals: CrawlTotals::default(),
            sitemaps: Sitemaps::default(),
            lastmods: HashMap::new(),
            addresses: c.address_rule(),
            max_redirects: 10,
            redirected: HashMap::new(),
            sitemap_chains: HashMap::new(),
            sitemap_robots: Vec::new(),
            masked_done: HashSet::new(),
        })
    }

    /// Redirects one page may take (`crawler.max_redirects`; 10 unless set).
    pub fn with_max_redirects(mut self, n: u32) -> Self {
        self.max_redirects = n;
        self
    }

    /// Fetches in flight at once, all kinds together (at least 1).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Failed robots.txt fetches in a row after which an origin's URLs are skipped.
    pub fn with_max_robots_failures(mut self, n: u32) -> Self {
        self.max_robots_failures = n;
        self
    }

    /// The counters so far.
    pub fn totals(&self) -> &CrawlTotals {
        &self.totals
    }

    /// The counters, when the crawl is over.
    pub fn into_totals(self) -> CrawlTotals {
        self.totals
    }

    /// URLs waiting in the frontier.
    pub fn queued(&self) -> usize {
        self.frontier.len()
    }

    /// Fetches handed out and not reported yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The Crawl-delay of the frontier host `host` (the longest of its origins'), if any.
    pub fn crawl_delay(&self, host: &str) -> Option<Duration> {
        self.delays.get(host).copied()
    }

    /// `max_pages` was reached: nothing more is handed out.
    pub fn budget_spent(&self) -> bool {
        self.budget_spent
    }

    /// Seeds, given sitemaps, then what an earlier run left pending, into the crawl.
    pub fn start(
        &mut self,
        seeds: Vec<String>,
        sitemaps: &[String],
        resume: Resume,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let mut origins = self.resume_done(&resume.done);
        let mut chains = resume::SeedChains::new(&resume.pending);
        // A spent budget shows at the first hand-out, as in a run that spends it.
        for _ in 0..resume.pages {
            self.scope.take_page();
        }
        for s in seeds {
            match normalize(&s) {
                Ok(u) => {
                    self.add_seed_host(&u);
                    origins.trust(&u);
                    chains.seed(&u);
                    // Handed in, so held whatever the seen-set's limit.
                    if !self.done_masked(&u) && self.seen.insert_given(&u) {
                        self.totals.discovered += 1;
                        origins.queue(&u);
                        self.frontier.push(u, 0, None);
                    } else {
                        self.totals.deduped += 1;
                    }
                }
                Err(e) => {
                    self.totals.invalid_seeds += 1;
                    let error = e.to_string();
                    out.push(Action::InvalidSeed { url: s, error });
                }
            }
        }
        let mut given = Vec::new();
        for s in sitemaps {
            match normalize(s) {
                Ok(u) => {
                    // Handed in: its host in scope, its origin trusted, as a seed's.
                    self.add_seed_host(&u);
                    origins.trust(&u);
                    origins.queue(&u);
                    given.push(u);
                }
                Err(e) => {
                    self.totals.sitemap_errors += 1;
                    let (url, error) = (s.clone(), e.to_string());
                    out.push(Action::Notice(Notice::SitemapUrlInvalid { url, error }));
                }
            }
        }
        for u in self.queue_sitemaps(given, None, false) {
            let chain = Redirected {
                hops: 0,
                from_seed: true,
            };
            self.sitemap_chains.insert(u, chain);
        }
        for link in resume.pending {
            self.resume_link(link, &mut origins, &chains);
        }
        self.ask_sitemap_robots(origins);
        out
    }

    fn add_seed_host(&mut self, u: &Url) {
        self.scope = std::mem::take(&mut self.scope).seed(u);
    }

    /// `u` into the seen-set: `false` when it was there already, or an earlier run's
    /// records know it by its masked form.
    fn see(&mut self, u: &Url) -> bool {
        !self.done_masked(u) && self.seen.insert(u)
    }

    fn done_masked(&self, u: &Url) -> bool {
        if self.masked_done.is_empty() {
            return false;
        }
        let masked = mask_url(u.as_str());
        masked != u.as_str()
            && normalize(&masked).is_ok_and(|m| self.masked_done.contains(m.as_str()))
    }

    /// What to do at `now`: the next fetch or record while there is room, else how to
    /// wait, or that the crawl is over.
    pub fn next(&mut self, now: Instant) -> Next {
        while self.in_flight < self.concurrency && !self.budget_spent {
            if let Some((url, from_public)) = self.sitemap_robots.pop() {
                if let Some(a) = self.robots_for_sitemaps(&url, from_public, now) {
                    return Next::Act(a);
                }
                continue;
            }
            let mut entry = match self.frontier.pop(now) {
                Pop::Ready(e) => e,
                Pop::Wait(d) => return Next::Wait(d),
                Pop::Busy | Pop::Empty => break,
            };
            let host = host_key(&entry.url).to_owned();
            if self.obey_robots {
                match self.robots_gate(entry, &host, now) {
                    Gate::Pass(e) => entry = e,
                    Gate::Act(a) => return Next::Act(a),
                    Gate::Held => continue,
                }
            }
            let busy = self.host_in_flight.get(&host).copied().unwrap_or(0);
            if busy > 0 && self.delays.contains_key(&host) {
                // Crawl-delay hosts are serial; the next send is timed from the answer.
                self.frontier.requeue(entry);
                continue;
            }
            if entry.sitemap {
                // A sitemap is no page: it takes none of the budget.
                self.totals.sitemap_fetches += 1;
            } else if !self.scope.take_page() {
                self.frontier.release(&host);
                self.totals.skipped_budget += 1;
                self.spend_budget();
                break;
            }
            *self.host_in_flight.entry(host).or_default() += 1;
            self.in_flight += 1;
            let request = if entry.sitemap {
                let (url, from_public) = (entry.url, entry.from_public);
                Request::Sitemap { url, from_public }
            } else {
                Request::Page(entry)
            };
            return Next::Act(Action::Fetch(request));
        }
        if self.in_flight > 0 {
            Next::Idle
        } else {
            Next::Done
        }
    }

    /// robots.txt for a popped entry: whether it may be fetched now, and if not what
    /// becomes of it.
    fn robots_gate(&mut self, entry: Entry, host: &str, now: Instant) -> Gate {
        let origin = origin_key(&entry.url);
        if let Some(no_answer) = self.robots_gave_up.get(&origin) {
            self.frontier.release(host);
            // No answer is the network's fault, not the site's rule: the URL's error.
            let why = match no_answer {
                Some(why) => NotSent::Unreachable(why.clone()),
                None => NotSent::Unavailable,
            };
            return Gate::Act(self.not_sent(entry, why));
        }
        if self.robots_in_flight.contains_key(&origin) {
            // The fetch is queued, paced and retried like any other, so it can outlast
            // the cache's pending mark; asking again would only send a second request.
            // The host waits in the frontier for the answer (see `on_robots`).
            self.frontier.release(host);
            self.frontier.block(host);
            self.stash.entry(origin).or_default().push(entry);
            return Gate::Held;
        }
        match self.robots.lookup(&origin, now) {
            RobotsState::Known(r) if r.allowed(&entry.url) => Gate::Pass(entry),
            RobotsState::Known(_) => {
                self.frontier.release(host);
                Gate::Act(self.not_sent(entry, NotSent::Disallowed))
            }
            RobotsState::Fetch => {
                // Only the entry that asked waits aside; the rest of the host waits in
                // the frontier, however much of it there is.
                self.frontier.release(host);
                self.frontier.block(host);
                self.robots_in_flight
                    .insert(origin.clone(), entry.from_public);
                self.totals.robots_fetches += 1;
                self.in_flight += 1;
                let request = Request::Robots {
                    origin: origin.clone(),
                    host: host.to_owned(),
                    url: robots_url(&entry.url),
                    // robots.txt of a host a public page led to is no more trusted than
                    // the page.
                    from_public: entry.from_public,
                };
                self.stash.entry(origin).or_default().push(entry);
                Gate::Act(Action::Fetch(request))
            }
            RobotsState::Wait(until) => {
                // robots.txt failed: nothing from this origin until the retry.
                self.frontier.requeue(entry);
                self.frontier.set_next(host, until);
                Gate::Held
            }
        }
    }

    /// Queue the sitemaps `urls` named by `parent` (`None`: given) ahead of their hosts'
    /// pages, in their order, except those read already or past the crawl's limit of
    /// sitemap files; returns those queued.
    fn queue_sitemaps(
        &mut self,
        urls: Vec<Url>,
        parent: Option<&Url>,
        from_public: bool,
    ) -> Vec<Url> {
        if self.budget_spent {
            return Vec::new();
        }
        let admitted: Vec<Url> = urls
            .into_iter()
            .filter(|u| matches!(u.scheme(), "http" | "https") && self.sitemaps.admit(u))
            .collect();
        for url in admitted.iter().rev() {
            self.frontier.push_first(Entry {
                url: url.clone(),
                depth: 0,
                parent: parent.cloned(),
                from_public,
                sitemap: true,
            });
        }
        admitted
    }

    /// A popped entry is not sent, for `why`: the record to make (a page's), or the
    /// notice (a sitemap's, which gets no record).
    fn not_sent(&mut self, entry: Entry, why: NotSent) -> Action {
        if entry.sitemap {
            self.sitemap_chains.remove(&entry.url);
            self.totals.sitemap_errors += 1;
            let why = match why {
                NotSent::Disallowed => "robots.txt disallows it".to_owned(),
                NotSent::Unavailable => ROBOTS_UNAVAILABLE.to_owned(),
                NotSent::Unreachable(e) => format!("{e} (robots.txt got no answer)"),
                NotSent::Refused => "private address refused".to_owned(),
            };
            let url = entry.url;
            return Action::Notice(Notice::SitemapSkipped { url, why });
        }
        // Not fetched: its redirect chain ends here.
        self.redirected.remove(&entry.url);
        match why {
            NotSent::Disallowed => {
                self.totals.skipped_robots += 1;
                Action::Skipped { entry, error: None }
            }
            NotSent::Unavailable => {
                self.totals.skipped_robots += 1;
                let error = Some(ROBOTS_UNAVAILABLE);
                Action::Skipped { entry, error }
            }
            NotSent::Unreachable(why) => {
                self.totals.fetched += 1;
                self.totals.failed += 1;
                let error = format!("{why} (robots.txt got no answer; this URL was not sent)");
                Action::Unreachable { entry, error }
            }
            NotSent::Refused => {
                self.totals.fetched += 1;
                self.totals.failed += 1;
                Action::Refused(entry)
            }
        }
    }
}
