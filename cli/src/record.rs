//! One line of `--out`: the fate of one input URL (the output contract), and the counts
//! over the records written so far.
//!
//! Fields, in order: `url, status, exit, attempts` (requests sent, throttled ones
//! included), `throttled` (how many of them were answered 429/503), `fetched_at` (when the
//! record was made, RFC 3339 UTC with milliseconds), `elapsed_ms, bytes` (decoded body
//! bytes), `wire_bytes` (the body as it came over the wire, compressed or not), `error`,
//! then `skipped` (`"robots"`, `"duplicate"` or null), `final_url` (where the answer
//! came from after redirects; null without an answer), `content_type` and `sha256` (of
//! the body; null without an answer), and with `--warc`, on a record whose answer is
//! archived only, `warc_file`, `warc_offset` and `warc_length` (where its exchange is).
//! Every URL is masked (`exitcrawl::redact`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use exitcrawl::redact::{mask_message, mask_url};
use exitcrawl_actors::follow::SkipReason;
use exitcrawl_actors::{FetchError, FetchErrorKind, FetchResponse};
use serde::Serialize;

use super::archive::Kept;
use super::breakdown::Breakdown;

/// The `error` of a record whose fetch was stopped by Ctrl-C.
pub const INTERRUPTED: &str = "interrupted";

/// `skipped` of a record for a repeated line of the list: the URL's fate is in its other
/// record, so this one neither finishes nor reopens it.
pub const DUPLICATE: &str = "duplicate";

/// `skipped` of a record robots.txt kept from being fetched.
pub const ROBOTS: &str = "robots";

/// One line of `--out` (URL list and frontier modes).
#[derive(Debug, Serialize)]
pub struct Record {
    pub url: String,
    /// HTTP status of the final attempt; `null` when there was no answer.
    pub status: Option<u16>,
    /// Exit of the final attempt; `null` when none was made.
    pub exit: Option<String>,
    pub attempts: u32,
    /// Of `attempts`, how many were answered with a throttle status (429/503).
    pub throttled: u32,
    /// When the record was made (the fetch's end): RFC 3339, UTC, milliseconds.
    #[serde(serialize_with = "rfc3339")]
    pub fetched_at: SystemTime,
    pub elapsed_ms: u64,
    /// Body bytes of the final answer (decoded).
    pub bytes: u64,
    /// The same body's bytes as they came over the wire (smaller when it came compressed).
    pub wire_bytes: u64,
    /// `null`, or why the fetch ended without an answer (`"interrupted"`: Ctrl-C;
    /// `"throttled_out: …"`: its host refused everything for `give_up_after_ms`, or asked
    /// for a pause over `max_retry_after_ms`, with the site's value).
    pub error: Option<String>,
    /// `"robots"`: not fetched, robots.txt disallows it (or could not be fetched, then
    /// `error` says so); `"duplicate"`: an earlier line of the list has it.
    pub skipped: Option<SkipReason>,
    #[serde(flatten)]
    pub kept: Kept,
}

impl Record {
    /// The record of an answer; `kept` comes from [`super::archive::Archive::keep`].
    pub fn answered(r: &FetchResponse, kept: Kept) -> Self {
        Record {
            url: mask_url(&r.url),
            status: Some(r.status),
            exit: Some(String::from(&*r.exit)),
            attempts: r.attempts,
            elapsed_ms: millis(r.elapsed),
            bytes: r.body.len() as u64,
            wire_bytes: r.wire_bytes,
            error: None,
            skipped: None,
            kept,
            throttled: r.throttled,
            fetched_at: SystemTime::now(),
        }
    }

    /// The record of a fetch that ended without an answer. `stopping`: the crawl is being
    /// interrupted, so a fetch the crawler dropped (`Shutdown`) is recorded as interrupted.
    pub fn failed(e: &FetchError, waited: Duration, stopping: bool) -> Self {
        Record {
            error: Some(if stopping && e.kind == FetchErrorKind::Shutdown {
                INTERRUPTED.to_string()
            } else {
                mask_text(&e.record_error(), &e.url)
            }),
            url: mask_url(&e.url),
            status: None,
            exit: e.exit.as_deref().map(String::from),
            attempts: e.attempts,
            elapsed_ms: millis(waited),
            bytes: 0,
            wire_bytes: 0,
            skipped: None,
            kept: Kept::default(),
            throttled: e.throttled,
            fetched_at: SystemTime::now(),
        }
    }

    /// A URL that was read but whose fetch never replied before the stop deadline.
    pub fn interrupted(url: &str, waited: Duration) -> Self {
        Self::unfetched(url, waited, Some(INTERRUPTED.to_string()), None)
    }

    /// A URL not sent because its origin's robots.txt got no answer: `why` is that
    /// failure (the network's, not the site's rule), so not a robots skip.
    pub fn unreachable(url: &str, waited: Duration, why: &str) -> Self {
        Self::unfetched(url, waited, Some(mask_text(why, url)), None)
    }

    /// A URL robots.txt did not let through: disallowed (`error` None) or robots.txt
    /// unavailable (`error` says why).
    pub fn robots(url: &str, waited: Duration, error: Option<String>) -> Self {
        let error = error.map(|e| mask_text(&e, url));
        Self::unfetched(url, waited, error, Some(SkipReason::Robots))
    }

    /// A line whose URL an earlier line of the list had: not fetched.
    pub fn duplicate(url: &str) -> Self {
        Self::unfetched(url, Duration::ZERO, None, Some(SkipReason::Duplicate))
    }

    /// A line too long to be a URL (`bytes` long): not fetched.
    pub fn too_long(url: &str, bytes: u64) -> Self {
        let error = super::source::Line::too_long_message(bytes);
        Self::unfetched(url, Duration::ZERO, Some(error), None)
    }

    fn unfetched(
        url: &str,
        waited: Duration,
        error: Option<String>,
        skipped: Option<SkipReason>,
    ) -> Self {
        Record {
            url: mask_url(url),
            status: None,
            exit: None,
            attempts: 0,
            elapsed_ms: millis(waited),
            bytes: 0,
            wire_bytes: 0,
            error,
            skipped,
            kept: Kept::default(),
            throttled: 0,
            fetched_at: SystemTime::now(),
        }
    }

    pub fn is_interrupted(&self) -> bool {
        self.error.as_deref() == Some(INTERRUPTED)
    }
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&super::date::rfc3339_millis(*t))
}

/// `msg` with the credentials of `raw_url` (and of any URL-looking word) masked, and
/// bounded ([`mask_message`]: a site's 100 KB `Location` is not copied into the record).
pub fn mask_text(msg: &str, raw_url: &str) -> String {
    if raw_url.is_empty() {
        mask_message(msg)
    } else {
        mask_message(&msg.replace(raw_url, &mask_url(raw_url)))
    }
}

pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Counts over the records written so far.
#[derive(Debug, Default)]
pub struct Totals {
    pub total: Cell<u64>,
    pub ok: Cell<u64>,
    /// Records whose fetch was tried and failed (see [`Fate::Failed`]).
    pub failed: Cell<u64>,
    /// Records of lines that are not a URL the crawler takes (see [`Fate::Invalid`]).
    pub invalid: Cell<u64>,
    /// Records whose answer is a redirect (see [`Fate::Redirected`]).
    pub redirected: Cell<u64>,
    pub throttled: Cell<u64>,
    /// HTTP attempts of the records, plus robots.txt fetches.
    pub requests: Cell<u64>,
    pub interrupted: Cell<u64>,
    /// Records with `skipped: "robots"`.
    pub skipped_robots: Cell<u64>,
    /// Records with `skipped: "duplicate"`.
    pub skipped_duplicate: Cell<u64>,
    /// robots.txt fetches sent (their attempts are in `requests`).
    pub robots_fetches: Cell<u64>,
    /// Input URLs read so far (≥ total: the difference is in flight, or was never sent).
    pub read: Cell<u64>,
    /// `--follow`: URLs the crawl has taken on so far, seeds and found links (its
    /// `discovered`), for the progress display.
    pub found: Cell<u64>,
    /// URLs read ahead but not sent when the crawl was stopped: no record, so `--resume`
    /// fetches them.
    pub left_queued: Cell<u64>,
    /// Frontier: entries not fetched because their URL was already done in this crawl.
    pub skipped_done: Cell<u64>,
    /// Frontier: URLs that failed on this consumer's side and went back to the queue.
    pub requeued: Cell<u64>,
    /// Frontier: entries given back unfetched (a stop signal, or the consumer stopped).
    pub released: Cell<u64>,
    /// Frontier: entries taken over from consumers whose heartbeat expired.
    pub claimed: Cell<u64>,
    /// Records whose fetch ended because no exit was in service for longer than the
    /// crawler waits for one: the run then exits 1.
    pub no_healthy_exit: Cell<u64>,
    /// The records of fetched URLs, per host.
    pub hosts: RefCell<HashMap<String, HostTally>>,
    /// The records of fetched URLs, per exit of their final attempt.
    pub exits: RefCell<HashMap<String, ExitTally>>,
    /// What `--report` shows beyond the summary.
    pub breakdown: RefCell<Breakdown>,
}

/// A record's figures, as [`Totals::add_fetch`] counts them.
pub struct Counted<'a> {
    pub url: &'a str,
    /// The exit of the final attempt.
    pub exit: Option<&'a str>,
    pub status: Option<u16>,
    pub attempts: u32,
    pub throttled: u32,
    pub elapsed_ms: u64,
    pub error: Option<&'a str>,
    pub interrupted: bool,
    pub skipped: Option<SkipReason>,
    /// When the record was made.
    pub at: SystemTime,
}

/// The one figure of the summary, besides `total`, that a record counts in: the
/// figures add up to `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Final answer 2xx.
    Ok,
    /// The fetch was tried and failed: an error, or a final answer that is not 2xx.
    Failed,
    /// Stopped by Ctrl-C.
    Interrupted,
    /// `skipped: "robots"`.
    Robots,
    /// `skipped: "duplicate"`.
    Duplicate,
    /// A line that is not a URL the crawler takes (`invalid_url`, never sent).
    Invalid,
    /// Answered with a redirect (301, 302, 303, 307, 308) and no error: with `--follow`
    /// the target is a page of its own; otherwise a redirect not followed
    /// (`crawler.max_redirects = 0`).
    Redirected,
}

impl Fate {
    /// The fate of a record with these fields; `skipped` as the record spells it.
    pub fn of(status: Option<u16>, error: Option<&str>, skipped: Option<&str>) -> Fate {
        let invalid_prefix = FetchErrorKind::InvalidUrl.as_str();
        match skipped {
            Some(ROBOTS) => Fate::Robots,
            Some(DUPLICATE) => Fate::Duplicate,
            _ if status.is_some_and(|s| (200..300).contains(&s)) => Fate::Ok,
            _ if error == Some(INTERRUPTED) => Fate::Interrupted,
            _ if error.is_none() && matches!(status, Some(301 | 302 | 303 | 307 | 308)) => {
                Fate::Redirected
            }
            _ if status.is_none()
                && error.is_some_and(|e| {
                    e.strip_prefix(invalid_prefix)
                        .is_some_and(|rest| rest.starts_with(':'))
                }) =>
            {
                Fate::Invalid
            }
            _ => Fate::Failed,
        }
    }
}

fn skip_name(s: Option<SkipReason>) -> Option<&'static str> {
    s.map(|s| match s {
        SkipReason::Robots => ROBOTS,
        SkipReason::Duplicate => DUPLICATE,
    })
}

/// What a record says of its fetch: its fate, attempts, throttled answers, `elapsed_ms`.
pub type Fetched = (Fate, u32, u32, u64);

/// One host's records that were fetched (at least one attempt).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostTally {
    pub urls: u64,
    /// Attempts, throttled ones included.
    pub requests: u64,
    /// URLs whose final answer was 2xx.
    pub ok: u64,
    /// Throttle answers (429/503) over every attempt.
    pub throttled: u64,
    /// URLs fetched that did not end 2xx, nor with a redirect.
    pub failed: u64,
    /// The sum of their records' `elapsed_ms`.
    pub elapsed_ms: u64,
    pub first_at: Option<SystemTime>,
    pub last_at: Option<SystemTime>,
}

impl HostTally {
    /// A fetched URL's record: ended 2xx or not, its attempts, throttled answers and
    /// `elapsed_ms`.
    fn add(&mut self, (fate, attempts, throttled, elapsed_ms): Fetched, at: SystemTime) {
        let ok = fate == Fate::Ok;
        self.urls += 1;
        self.elapsed_ms = self.elapsed_ms.saturating_add(elapsed_ms);
        self.requests += u64::from(attempts);
        self.ok += u64::from(ok);
        self.throttled += u64::from(throttled);
        self.failed += u64::from(!ok && fate != Fate::Redirected);
        self.first_at = Some(self.first_at.map_or(at, |f| f.min(at)));
        self.last_at = Some(self.last_at.map_or(at, |l| l.max(at)));
    }
}

/// When the records whose final attempt went through one exit were made.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExitTally {
    pub first_at: Option<SystemTime>,
    pub last_at: Option<SystemTime>,
}

/// The host of a record's URL, as the crawler keys its limits and pauses: the name,
/// lowercase, without the port; an IPv6 address in its brackets (`[::1]`).
fn host_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    Some(u.host_str()?.to_ascii_lowercase())
}

fn bump(c: &Cell<u64>, n: u64) {
    c.set(c.get() + n);
}

impl Totals {
    pub fn add(&self, r: &Record) {
        self.add_fetch(&Counted {
            url: &r.url,
            exit: r.exit.as_deref(),
            status: r.status,
            attempts: r.attempts,
            throttled: r.throttled,
            elapsed_ms: r.elapsed_ms,
            error: r.error.as_deref(),
            interrupted: r.is_interrupted(),
            skipped: r.skipped,
            at: r.fetched_at,
        });
    }

    /// One record's figures, whichever writer made it (the list's [`Record`], a follow
    /// crawl's record): the totals, its host's account and the report's breakdown.
    pub fn add_fetch(&self, c: &Counted) {
        let ok = c.status.is_some_and(|s| (200..300).contains(&s));
        self.count(ok, c.throttled, c.attempts, c.interrupted);
        let fate = if c.interrupted {
            Fate::Interrupted
        } else {
            Fate::of(c.status, c.error, skip_name(c.skipped))
        };
        self.count_fate(fate);
        let fetched = (fate, c.attempts, c.throttled, c.elapsed_ms);
        self.add_host(c.url, fetched, c.at);
        if let (Some(exit), true) = (c.exit, c.attempts > 0) {
            let mut exits = self.exits.borrow_mut();
            let e = exits.entry(exit.to_owned()).or_default();
            e.first_at = Some(e.first_at.map_or(c.at, |f| f.min(c.at)));
            e.last_at = Some(e.last_at.map_or(c.at, |l| l.max(c.at)));
        }
        self.note_error(c.error);
        self.observe(c.attempts, c.status, c.throttled, c.at);
        if c.attempts > 0 {
            self.breakdown.borrow_mut().elapsed(c.elapsed_ms, c.url);
        }
    }

    /// A record of `url`'s host (ended 2xx or not, attempts, throttled answers,
    /// `elapsed_ms`) made at `at`: counted in its host's account if it was fetched.
    fn add_host(&self, url: &str, fetch: Fetched, at: SystemTime) {
        if fetch.1 == 0 {
            return;
        }
        if let Some(h) = host_of(url) {
            let (attempts, throttled) = (fetch.1, fetch.2);
            self.breakdown
                .borrow_mut()
                .host_fetched(&h, at, attempts, throttled);
            self.hosts.borrow_mut().entry(h).or_default().add(fetch, at);
        }
    }

    fn count_fate(&self, fate: Fate) {
        let figure = match fate {
            Fate::Failed => &self.failed,
            Fate::Invalid => &self.invalid,
            Fate::Redirected => &self.redirected,
            Fate::Robots => &self.skipped_robots,
            Fate::Duplicate => &self.skipped_duplicate,
            // Counted by `count`.
            Fate::Ok | Fate::Interrupted => return,
        };
        bump(figure, 1);
    }

    fn count(&self, ok: bool, throttled: u32, attempts: u32, interrupted: bool) {
        bump(&self.total, 1);
        bump(&self.ok, u64::from(ok));
        bump(&self.throttled, u64::from(throttled));
        bump(&self.requests, u64::from(attempts));
        bump(&self.interrupted, u64::from(interrupted));
    }

    /// A record made at `at` after `attempts` attempts, for the report's timeline and
    /// status classes (records of unfetched URLs are not in them).
    fn observe(&self, attempts: u32, status: Option<u16>, throttled: u32, at: SystemTime) {
        if attempts > 0 {
            self.breakdown.borrow_mut().fetched(at, status, throttled);
        }
    }

    /// A record's `error`: counted by kind for the report, and the fetches that found no
    /// exit in service.
    pub fn note_error(&self, error: Option<&str>) {
        if let Some(e) = error {
            self.breakdown.borrow_mut().error(e);
        }
        let prefix = FetchErrorKind::NoHealthyExit.as_str();
        let none_left = error.is_some_and(|e| {
            e.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(':'))
        });
        bump(&self.no_healthy_exit, u64::from(none_left));
    }

    /// robots.txt fetches that took `requests` HTTP attempts.
    pub fn add_robots(&self, fetches: u64, requests: u64) {
        bump(&self.robots_fetches, fetches);
        bump(&self.requests, requests);
    }

    pub fn left_queued_one(&self) {
        self.left_queued_add(1);
    }

    pub fn left_queued_add(&self, n: u64) {
        bump(&self.left_queued, n);
    }

    pub fn read_one(&self) {
        bump(&self.read, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fields_in_order() {
        let mut r = Record::robots("http://h/p?token=x", Duration::from_millis(3), None);
        r.fetched_at = std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_000_007);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            "{\"url\":\"http://h/p?token=***\",\"status\":null,\"exit\":null,\"attempts\":0,\
             \"throttled\":0,\"fetched_at\":\"2023-11-14T22:13:20.007Z\",\"elapsed_ms\":3,\"bytes\":0,\"wire_bytes\":0,\"error\":null,\"skipped\":\"robots\",\
             \"final_url\":null,\"content_type\":null,\"sha256\":null}"
        );
        let t = Totals::default();
        t.add(&r);
        assert_eq!(
            (t.total.get(), t.ok.get(), t.skipped_robots.get()),
            (1, 0, 1)
        );
    }

    #[test]
    fn each_record_has_one_fate() {
        let of = Fate::of;
        assert_eq!(of(Some(200), None, None), Fate::Ok);
        assert_eq!(of(Some(404), None, None), Fate::Failed);
        assert_eq!(of(Some(301), None, None), Fate::Redirected);
        assert_eq!(of(Some(308), None, None), Fate::Redirected);
        assert_eq!(of(Some(304), None, None), Fate::Failed);
        assert_eq!(
            of(Some(301), Some("too_many_redirects: x"), None),
            Fate::Failed
        );
        assert_eq!(of(None, Some("timeout: no answer"), None), Fate::Failed);
        assert_eq!(of(None, Some(INTERRUPTED), None), Fate::Interrupted);
        assert_eq!(of(None, None, Some("robots")), Fate::Robots);
        assert_eq!(
            of(None, Some("connect_refused: x"), Some("robots")),
            Fate::Robots
        );
        assert_eq!(of(None, None, Some("duplicate")), Fate::Duplicate);
        assert_eq!(of(None, Some("invalid_url: bad port"), None), Fate::Invalid);
        assert_eq!(of(None, Some("invalid_urlx"), None), Fate::Failed);
        let t = Totals::default();
        t.add(&Record::too_long("http://h/x", 20_000));
        t.add(&Record::duplicate("http://h/x"));
        t.add(&Record::interrupted("http://h/y", Duration::ZERO));
        let figures = (t.total.get(), t.failed.get(), t.invalid.get());
        assert_eq!(figures, (3, 0, 1));
        assert_eq!((t.skipped_duplicate.get(), t.interrupted.get()), (1, 1));
    }

    #[test]
    fn masks_urls_in_messages() {
        let m = mask_text("timeout: http://u:pw@h/x?key=1 took too long", "");
        assert!(!m.contains("pw") && !m.contains("key=1"), "{m}");
    }
}
