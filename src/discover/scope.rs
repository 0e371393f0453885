//! Scope: which discovered links belong to this crawl.
//!
//! Following every link crawls the web; the user names seeds and rules, and links outside
//! them are counted, not fetched. Checks, in order: depth, host/domain, deny regexes,
//! allow regexes (if any are given, a URL must match one). Regexes match the whole
//! normalised URL string (use `^`/`$` to anchor).
//!
//! "Same registrable domain" (`blog.example.co.uk` ~ `www.example.co.uk`, but not
//! `other.co.uk`) needs the public-suffix list; `psl` 2.1.247 compiles the list into code
//! (9 s cold build, one tiny dep, no I/O, no list to download). Hosts with no registrable
//! domain (IP addresses, `localhost`, a bare suffix) compare by the full host.
//! The list ships inside the crate version: new suffixes need a `psl` bump.
//!
//! The page budget (`max_pages`) is a counter: [`Scope::take_page`] is called when a page
//! is about to be fetched, not when a link is seen.

use std::collections::HashSet;

use regex::Regex;
use url::{Host, Url};

impl From<crate::config::CrawlScope> for ScopeMode {
    /// `[crawl] scope`'s value as the mode it names.
    fn from(scope: crate::config::CrawlScope) -> Self {
        use crate::config::CrawlScope;
        match scope {
            CrawlScope::SameHost => ScopeMode::SameHost,
            CrawlScope::SameDomain => ScopeMode::SameDomain,
            CrawlScope::Any => ScopeMode::AnyHost,
        }
    }
}

/// Which hosts are in scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScopeMode {
    /// Only the seeds' hosts (default).
    #[default]
    SameHost,
    /// Any host under a seed's registrable domain (eTLD+1).
    SameDomain,
    /// Any host (use with allow/deny rules and limits).
    AnyHost,
}

/// Why a URL is out of scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfScope {
    /// Host is not a seed host ([`ScopeMode::SameHost`]).
    OtherHost,
    /// Host is not under a seed's registrable domain ([`ScopeMode::SameDomain`]).
    OtherDomain,
    /// Allow rules exist and none matched.
    NotAllowed,
}

/// The answer of [`Scope::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Crawl it.
    In,
    /// Outside the hosts/domains or the allow list.
    OutOfScope(OutOfScope),
    /// Deeper than `max_depth`.
    TooDeep,
    /// Matched this deny rule.
    Denied(String),
}

/// An invalid allow/deny rule.
pub type RuleError = regex::Error;

/// Scope rules plus the page counter.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    mode: ScopeMode,
    hosts: HashSet<String>,
    domains: HashSet<String>,
    allow: Vec<Regex>,
    deny: Vec<Regex>,
    max_depth: Option<u32>,
    max_pages: Option<u64>,
    pages: u64,
}

/// The registrable domain of a host, or the host itself when there is none.
pub fn registrable_domain(url: &Url) -> Option<String> {
    match url.host()? {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.');
            Some(psl::domain_str(d).unwrap_or(d).to_owned())
        }
        ip => Some(ip.to_string()),
    }
}

impl Scope {
    /// Empty rules in `mode`; add seeds with [`Scope::seed`].
    pub fn new(mode: ScopeMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// Add a seed: its host (and registrable domain) become in scope.
    pub fn seed(mut self, url: &Url) -> Self {
        if let Some(h) = url.host_str() {
            self.hosts.insert(h.to_owned());
        }
        if let Some(d) = registrable_domain(url) {
            self.domains.insert(d);
        }
        self
    }

    /// Add an allow rule (a regex over the normalised URL).
    pub fn allow(mut self, pattern: &str) -> Result<Self, RuleError> {
        self.allow.push(Regex::new(pattern)?);
        Ok(self)
    }

    /// Add a deny rule (a regex over the normalised URL); deny wins over allow.
    pub fn deny(mut self, pattern: &str) -> Result<Self, RuleError> {
        self.deny.push(Regex::new(pattern)?);
        Ok(self)
    }

    /// Links deeper than `d` are [`Verdict::TooDeep`] (seeds are depth 0).
    pub fn max_depth(mut self, d: u32) -> Self {
        self.max_depth = Some(d);
        self
    }

    /// At most `n` pages are handed out by [`Scope::take_page`].
    pub fn max_pages(mut self, n: u64) -> Self {
        self.max_pages = Some(n);
        self
    }

    /// Is `url`, found at `depth`, part of this crawl?
    pub fn check(&self, url: &Url, depth: u32) -> Verdict {
        if self.max_depth.is_some_and(|m| depth > m) {
            return Verdict::TooDeep;
        }
        if !self.host_in(url) {
            return Verdict::OutOfScope(match self.mode {
                ScopeMode::SameDomain => OutOfScope::OtherDomain,
                _ => OutOfScope::OtherHost,
            });
        }
        let s = url.as_str();
        if let Some(r) = self.deny.iter().find(|r| r.is_match(s)) {
            return Verdict::Denied(r.as_str().to_owned());
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|r| r.is_match(s)) {
            return Verdict::OutOfScope(OutOfScope::NotAllowed);
        }
        Verdict::In
    }

    /// Is `url`'s host one of the crawl's (by `mode` alone: no rule, no depth)?
    pub fn host_in(&self, url: &Url) -> bool {
        match self.mode {
            ScopeMode::SameHost => url.host_str().is_some_and(|h| self.hosts.contains(h)),
            ScopeMode::SameDomain => {
                registrable_domain(url).is_some_and(|d| self.domains.contains(&d))
            }
            ScopeMode::AnyHost => true,
        }
    }

    /// Count one page against `max_pages`; `false` once the budget is spent.
    pub fn take_page(&mut self) -> bool {
        if self.max_pages.is_some_and(|m| self.pages >= m) {
            return false;
        }
        self.pages += 1;
        true
    }

    /// Pages taken so far.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// `true` once `max_pages` pages were taken.
    pub fn exhausted(&self) -> bool {
        self.max_pages.is_some_and(|m| self.pages >= m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn same_host_is_default_and_strict() {
        let s = Scope::default().seed(&u("http://www.example.co.uk/"));
        assert_eq!(s.check(&u("http://www.example.co.uk/a"), 5), Verdict::In);
        assert_eq!(
            s.check(&u("http://blog.example.co.uk/a"), 1),
            Verdict::OutOfScope(OutOfScope::OtherHost)
        );
    }

    #[test]
    fn same_domain_uses_public_suffixes() {
        let s = Scope::new(ScopeMode::SameDomain)
            .seed(&u("http://www.example.co.uk/"))
            .seed(&u("http://127.0.0.1:8080/"));
        assert_eq!(s.check(&u("https://blog.example.co.uk/"), 1), Verdict::In);
        assert_eq!(
            s.check(&u("http://other.co.uk/"), 1),
            Verdict::OutOfScope(OutOfScope::OtherDomain)
        );
        assert_eq!(s.check(&u("http://127.0.0.1:9/x"), 1), Verdict::In);
        assert_eq!(
            s.check(&u("http://127.0.0.2/"), 1),
            Verdict::OutOfScope(OutOfScope::OtherDomain)
        );
        // private suffixes count too: two github.io users are different sites
        let g = Scope::new(ScopeMode::SameDomain).seed(&u("https://alice.github.io/"));
        assert_ne!(g.check(&u("https://bob.github.io/"), 1), Verdict::In);
        assert_eq!(
            registrable_domain(&u("http://a.b.site.test/")).unwrap(),
            "site.test"
        );
    }

    #[test]
    fn rules_depth_and_budget() {
        let mut s = Scope::new(ScopeMode::AnyHost)
            .allow(r"^https?://[^/]+/docs/")
            .unwrap()
            .deny(r"\.pdf$")
            .unwrap()
            .max_depth(2)
            .max_pages(2);
        assert_eq!(s.check(&u("http://x.org/docs/a"), 2), Verdict::In);
        assert_eq!(s.check(&u("http://x.org/docs/a"), 3), Verdict::TooDeep);
        assert_eq!(
            s.check(&u("http://x.org/docs/a.pdf"), 0),
            Verdict::Denied(r"\.pdf$".into())
        );
        assert_eq!(
            s.check(&u("http://x.org/blog/"), 0),
            Verdict::OutOfScope(OutOfScope::NotAllowed)
        );
        assert!(Scope::default().deny("(").is_err());
        assert!(s.take_page() && s.take_page());
        assert!(!s.take_page() && s.exhausted());
        assert_eq!(s.pages(), 2);
    }
}
