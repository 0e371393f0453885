//! Crawling, not only fetching: the pure parts of link discovery and politeness.
//!
//! The actor layer fetches; this module decides what to fetch next and whether it may:
//!
//! ```text
//! fetched HTML ──links──▶ normalize ──▶ scope ──▶ dedupe ──▶ frontier ──pop(now)──▶ fetch
//!                                                               ▲           │
//!                                    robots (per-host cache) ───┴───────────┘
//!                                    allowed? Crawl-delay → frontier interval
//! ```
//!
//! - [`normalize`](mod@normalize): one spelling per page (case, ports, fragments, dots, escapes).
//! - [`links`]: `<a href>`/`<base href>` from HTML with a real tokenizer.
//! - [`scope`]: same host / same registrable domain, allow/deny regexes, depth, page budget.
//! - [`dedupe`]: bounded seen-set of 64-bit fingerprints.
//! - [`robots`]: robots.txt rules + Crawl-delay, and a per-host cache state machine.
//! - [`sitemap`]: sitemaps, sitemap indexes and text sitemaps → URLs with `<lastmod>`.
//! - [`frontier`]: per-host queues served round-robin, honouring per-host earliest times.
//! - [`crawl`]: the state machine that drives all of the above: told what a fetch
//!   returned, it answers what to fetch next, when, or that the crawl is over.
//!
//! Like the rest of the core: no I/O, no sleeping; time comes in as `now: Instant`.
//! [`Crawl`] makes every decision; `exitcrawl_actors::follow` (`crawl_site`) only carries
//! them out with real fetches, configured by the `[crawl]` table
//! ([`crate::config::CrawlSettings`]).
//!
//! # Crates and their cost
//! Cold debug build, each alone on the 2-core machine (measured when chosen):
//! - `url` 2.5.8 (24 s, 47 crates with idna/ICU): the WHATWG URL standard; unavoidable for
//!   correct resolution and IDN.
//! - link extraction: our own tokenizer, no crate (see [`html`]: html5gum 0.9 overflows
//!   the stack on a tag with many attributes); html5gum only as the fuzz tests' oracle.
//! - `psl` 2.1.247 (9 s, 1 dep): the public-suffix list compiled in, see [`scope`].
//! - `regex` 1.13 with `default-features = false` (14 s): allow/deny rules.
//! - `texting_robots` 0.2.2 (+34 s on top of the above, 15 more crates: nom 7, bstr 0.2,
//!   anyhow, thiserror 1, and it turns on regex's default features): see [`robots`].
//! - `quick-xml` 0.42 without default features (1 dependency, memchr, already in the
//!   tree): a streaming XML reader, see [`sitemap`].

pub mod crawl;
pub mod dedupe;
pub mod frontier;
pub mod html;
pub mod links;
pub mod normalize;
pub mod robots;
pub mod scope;
pub mod sitemap;

pub use crawl::{Action, Answer, Crawl, CrawlTotals, Failure, Next, Request};
pub use dedupe::Seen;
pub use frontier::{host_key, Entry, Frontier, Pop};
pub use links::{extract_links, MAX_LINKS_PER_PAGE};
pub use normalize::{normalize, resolve, NormalizeError};
pub use robots::{Robots, RobotsCache, RobotsPolicy, RobotsState};
pub use scope::{OutOfScope, Scope, ScopeMode, Verdict};
pub use sitemap::{Sitemap, SitemapEntry, SitemapError, SitemapKind, Sitemaps};
