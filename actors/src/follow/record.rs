//! What a crawl hands out: one record per URL. The counters and what an interrupted
//! crawl goes on from are the core's (`exitcrawl::discover::crawl`), re-exported by the
//! parent module.

use std::time::Duration;

use exitcrawl::discover::Entry;
use serde::Serialize;
use url::Url;

use crate::messages::{FetchError, FetchResponse};

/// Why a URL was not fetched (only reasons that get a record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// robots.txt disallows it, or robots.txt stayed unreachable (then `error` says so).
    Robots,
    /// The URL list had it on an earlier line (the `exitcrawl` program's list mode): that
    /// line's record tells its fate.
    Duplicate,
}

/// One line of output: the fate of one URL (fetched, or skipped by robots.txt).
///
/// Serialises (JSON) with the binary's record fields plus `depth`, `parent`, `skipped`,
/// `new_links` and, when there are any, `links` and the sitemap's `lastmod`:
/// `url, status, exit, attempts, elapsed_ms, bytes, wire_bytes, error, depth, parent,
/// skipped, …`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FollowRecord {
    /// The normalised URL.
    pub url: String,
    /// HTTP status of the final attempt; `None` without an answer (or when skipped).
    pub status: Option<u16>,
    /// Exit of the final attempt; `None` when none was made.
    pub exit: Option<String>,
    /// HTTP attempts sent (0 when skipped).
    pub attempts: u32,
    /// 429/503 answers over all attempts.
    pub throttled: u32,
    /// From handing the fetch to the crawler to its reply.
    pub elapsed_ms: u64,
    /// Body bytes of the final answer (decoded).
    pub bytes: u64,
    /// The same body's bytes as they came over the wire (smaller when it came compressed).
    pub wire_bytes: u64,
    /// `None`, or why the fetch ended without an answer (`kind: message`).
    pub error: Option<String>,
    /// Links followed from a seed (seeds are 0).
    pub depth: u32,
    /// The page the link was found on (`None` for seeds).
    pub parent: Option<String>,
    /// `None` if fetched; why not otherwise.
    pub skipped: Option<SkipReason>,
    /// In-scope, unseen links this page added to the frontier.
    pub new_links: u32,
    /// Those links (normalised): what an interrupted crawl resumes from ([`Resume`](super::Resume)).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    /// The `<lastmod>` of the sitemap that listed the URL (`parent` is that sitemap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lastmod: Option<String>,
}

impl FollowRecord {
    /// A URL robots.txt did not let through (`error`: why, when robots.txt was unreachable).
    pub(super) fn skipped(entry: &Entry, error: Option<String>) -> FollowRecord {
        FollowRecord {
            skipped: Some(SkipReason::Robots),
            ..FollowRecord::unfetched(entry.url.to_string(), entry, error)
        }
    }

    /// A URL a public page led to whose host is private: refused before anything was
    /// sent (its robots.txt fetch was).
    pub(super) fn refused(entry: &Entry) -> FollowRecord {
        let error = Some(crate::messages::PRIVATE_REFUSED.to_string());
        FollowRecord::unfetched(entry.url.to_string(), entry, error)
    }

    /// A URL not sent because its robots.txt got no answer: `error` says why.
    pub(super) fn unreachable(entry: &Entry, error: String) -> FollowRecord {
        FollowRecord::unfetched(entry.url.to_string(), entry, Some(error))
    }

    /// A seed that is no http(s) URL.
    pub(super) fn invalid_seed(url: String, error: String) -> FollowRecord {
        FollowRecord::unsent_seed(url, format!("invalid_url: {error}"))
    }

    /// A seed the program could not hand to the crawl (a line longer than any URL, whose
    /// kept start is `url`): `error` is the record's error, as written.
    pub fn unsent_seed(url: String, error: String) -> FollowRecord {
        let entry = Entry {
            url: Url::parse("http://invalid.invalid/").expect("a valid URL"),
            depth: 0,
            parent: None,
            from_public: false,
            sitemap: false,
        };
        FollowRecord::unfetched(url, &entry, Some(error))
    }

    fn unfetched(url: String, entry: &Entry, error: Option<String>) -> FollowRecord {
        FollowRecord {
            url,
            status: None,
            exit: None,
            attempts: 0,
            elapsed_ms: 0,
            bytes: 0,
            wire_bytes: 0,
            error,
            depth: entry.depth,
            parent: entry.parent.as_ref().map(Url::to_string),
            skipped: None,
            new_links: 0,
            links: Vec::new(),
            lastmod: None,
            throttled: 0,
        }
    }

    /// A page that was answered, with the links it added.
    pub(super) fn answered(entry: &Entry, r: &FetchResponse, links: Vec<String>) -> FollowRecord {
        FollowRecord {
            status: Some(r.status),
            exit: Some(String::from(&*r.exit)),
            attempts: r.attempts,
            elapsed_ms: millis(r.elapsed),
            bytes: r.body.len() as u64,
            wire_bytes: r.wire_bytes,
            new_links: u32::try_from(links.len()).unwrap_or(u32::MAX),
            links,
            throttled: r.throttled,
            ..FollowRecord::unfetched(entry.url.to_string(), entry, None)
        }
    }

    /// A page fetch that ended without an answer after `elapsed`.
    pub(super) fn failed(entry: &Entry, e: &FetchError, elapsed: Duration) -> FollowRecord {
        FollowRecord {
            exit: e.exit.as_deref().map(String::from),
            attempts: e.attempts,
            elapsed_ms: millis(elapsed),
            throttled: e.throttled,
            ..FollowRecord::unfetched(entry.url.to_string(), entry, Some(e.record_error()))
        }
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
