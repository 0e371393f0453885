//! The `[crawl]` section: following links.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::strict;

/// `[crawl]`: following links from seed URLs (link discovery, scope, dedupe, robots.txt,
/// per-host politeness). See `exitcrawl::discover` for the parts and
/// `exitcrawl_actors::follow` for the loop that drives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CrawlSettings {
    /// Parse fetched HTML for `<a href>` links and crawl the in-scope ones (`true`), or
    /// fetch the given URLs only (`false`). Default false.
    #[serde(deserialize_with = "strict::boolean")]
    pub follow: bool,
    /// Which hosts links may lead to. Default `"same_host"`; see [`CrawlScope`].
    pub scope: CrawlScope,
    /// If non-empty, a link must match one of these regexes (over the whole normalised
    /// URL; anchor with `^`/`$`) to be crawled. Default empty. Each must compile.
    /// File only (not settable from the environment: regexes hold commas).
    pub allow: Vec<String>,
    /// Links matching any of these regexes are not crawled (deny wins over allow).
    /// Default empty. Each must compile. File only.
    pub deny: Vec<String>,
    /// Links followed from a seed (seeds are depth 0; 0 = seeds only). Default 20 (as
    /// Heritrix's `maxHops`): the bound on traps that link ever deeper (`?page=N+1`, a
    /// calendar's next day) when nothing else bounds the crawl; lift it as far as 100000.
    /// `None` (in code only) is no limit. 0..=100000.
    #[serde(deserialize_with = "strict::opt_int")]
    pub max_depth: Option<u32>,
    /// Most pages fetched in one crawl (seeds included). Default absent: no limit.
    /// 1..=10000000000.
    #[serde(deserialize_with = "strict::opt_int")]
    pub max_pages: Option<u64>,
    /// Most distinct URLs remembered for dedupe (8-byte fingerprints, ≈ 10–21 bytes per
    /// URL); past it, new links are dropped and counted, so memory stays bounded. It also
    /// bounds the URLs waiting to be fetched, each ≈ 50 bytes plus its length (112 bytes
    /// for a 60-byte URL, measured by `tests/frontier_memory.rs`): at most ≈ 130 bytes per
    /// URL in all. Default 10000000 (the dedupe set ≈ 100–200 MB; ≈ 1.3 GB should every URL
    /// be waiting at once); 1..=1000000000.
    #[serde(deserialize_with = "strict::int")]
    pub seen_limit: u64,
    /// Most fetches in flight to one host at once. Default 2; 1..=10000.
    #[serde(deserialize_with = "strict::int")]
    pub per_host_concurrency: u32,
    /// Obey robots.txt (fetched once per host, through the same exits and limits).
    /// Default true. `false` ignores it entirely, and the crawler says so loudly.
    #[serde(deserialize_with = "strict::boolean")]
    pub robots: bool,
    /// How long a fetched robots.txt stays valid, in ms. Default 86400000 (24 h);
    /// 1000..=604800000 (7 days).
    #[serde(deserialize_with = "strict::int")]
    pub robots_ttl_ms: u64,
    /// The name matched against robots.txt `User-agent:` lines. Default absent: the
    /// product token of `crawler.user_agent` (`exitcrawl/0.1.0 (+url)` → `exitcrawl`).
    /// When set: 1..=64 characters from `A-Z a-z _ -` (RFC 9309 §2.2.1).
    pub user_agent_token: Option<String>,
    /// Also seed the crawl from the `Sitemap:` lines of each seed origin's robots.txt
    /// (sitemap index files and gzip'd sitemaps included; the URLs they list go through
    /// scope, dedupe and robots.txt like links). Default false. Sitemaps given on the
    /// command line (`--sitemap`) are read either way.
    #[serde(deserialize_with = "strict::boolean")]
    pub sitemaps: bool,
    /// Lift the private-address rule. By default a link found in a page, a URL listed in
    /// a sitemap, or a redirect that leads from a public address to a loopback, private
    /// (RFC 1918, ULA `fc00::/7`), link-local (`169.254.0.0/16`, `fe80::/10`),
    /// unspecified or shared (`100.64.0.0/10`) one is refused (record error `"private address refused"`), checked on
    /// the address actually connected to. URLs the user gives are trusted, and a crawl
    /// that starts on a private host keeps following its links there. Default false.
    #[serde(deserialize_with = "strict::boolean")]
    pub allow_private: bool,
    /// Tests only, not a configuration key: exactly these addresses count as private and
    /// every other one as public, so the rule can be shown on loopback alone.
    #[serde(skip)]
    #[doc(hidden)]
    pub private_only_for_tests: Option<Vec<IpAddr>>,
}

/// The default `max_depth`.
pub const DEFAULT_MAX_DEPTH: u32 = 20;

impl Default for CrawlSettings {
    fn default() -> Self {
        Self {
            follow: false,
            scope: CrawlScope::SameHost,
            allow: Vec::new(),
            deny: Vec::new(),
            max_depth: Some(DEFAULT_MAX_DEPTH),
            max_pages: None,
            seen_limit: 10_000_000,
            per_host_concurrency: 2,
            robots: true,
            robots_ttl_ms: 86_400_000,
            user_agent_token: None,
            sitemaps: false,
            allow_private: false,
            private_only_for_tests: None,
        }
    }
}

impl CrawlSettings {
    /// `robots_ttl_ms` as a Duration.
    pub fn robots_ttl(&self) -> Duration {
        Duration::from_millis(self.robots_ttl_ms)
    }

    /// The private-address rule of this crawl (see `allow_private`).
    pub fn address_rule(&self) -> crate::address::AddressRule {
        let rule = crate::address::AddressRule::new(self.allow_private);
        match &self.private_only_for_tests {
            Some(ips) => rule.with_private_only(ips),
            None => rule,
        }
    }
}

/// `[crawl] scope`: which hosts discovered links may lead to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrawlScope {
    /// `"same_host"`: only the seeds' hosts (the default).
    SameHost,
    /// `"same_domain"`: any host under a seed's registrable domain (eTLD+1, public-suffix
    /// list), e.g. `blog.example.co.uk` for a seed on `www.example.co.uk`.
    SameDomain,
    /// `"any"`: any host (bound it with allow/deny, `max_depth` and `max_pages`).
    Any,
}

impl CrawlScope {
    /// Every value, in documentation order.
    pub const ALL: [CrawlScope; 3] = [
        CrawlScope::SameHost,
        CrawlScope::SameDomain,
        CrawlScope::Any,
    ];

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            CrawlScope::SameHost => "same_host",
            CrawlScope::SameDomain => "same_domain",
            CrawlScope::Any => "any",
        }
    }
}
