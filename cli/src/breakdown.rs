//! What `--report` shows beyond the summary, counted as records are written, in bounded
//! memory: the timeline (records per bucket of time since the start), the final answers'
//! status classes, the records' error kinds and the slowest URLs.
//!
//! The timeline starts with one-second buckets; when a crawl outlasts
//! [`Breakdown::MAX_BUCKETS`] of them, neighbouring buckets are merged in pairs and the
//! bucket width doubles, so a run of any length keeps at most that many. Each host's
//! requests and throttles over time ([`HostRate`]) are kept the same way, in fewer buckets.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

/// One bucket of the timeline: the fetched records made in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Records whose final answer was 2xx.
    pub ok: u32,
    /// Throttle answers (429/503) over the attempts of those records.
    pub throttled: u32,
    /// Records that did not end 2xx (another status, or no answer).
    pub failed: u32,
}

/// One bucket of a host's [`HostRate`] that has requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostBucket {
    /// Which bucket: its start is `at × width` seconds after the start.
    pub at: u64,
    /// The attempts of the host's fetched records made in it.
    pub requests: u32,
    /// Throttle answers (429/503) among them.
    pub throttled: u32,
}

/// A host's requests over time: only the buckets that have some, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRate {
    /// Seconds per bucket: 1, doubled each time there would be more than
    /// [`HostRate::MAX_BUCKETS`].
    pub width: u64,
    pub buckets: Vec<HostBucket>,
}

impl HostRate {
    /// Most buckets kept per host: a chart's worth, so a broad crawl's many hosts stay small.
    pub const MAX_BUCKETS: usize = 600;

    fn add(&mut self, secs: u64, requests: u32, throttled: u32) {
        loop {
            let at = secs / self.width;
            // Records come nearly in time order: the place is at or near the end.
            let i = self.buckets.partition_point(|b| b.at < at);
            if let Some(b) = self.buckets.get_mut(i).filter(|b| b.at == at) {
                b.requests = b.requests.saturating_add(requests);
                b.throttled = b.throttled.saturating_add(throttled);
                return;
            }
            if self.buckets.len() < Self::MAX_BUCKETS {
                let b = HostBucket {
                    at,
                    requests,
                    throttled,
                };
                self.buckets.insert(i, b);
                return;
            }
            self.coarsen();
        }
    }

    fn coarsen(&mut self) {
        self.width *= 2;
        let mut merged: Vec<HostBucket> = Vec::with_capacity(self.buckets.len());
        for b in &self.buckets {
            match merged.last_mut() {
                Some(m) if m.at == b.at / 2 => {
                    m.requests = m.requests.saturating_add(b.requests);
                    m.throttled = m.throttled.saturating_add(b.throttled);
                }
                _ => merged.push(HostBucket { at: b.at / 2, ..*b }),
            }
        }
        self.buckets = merged;
    }
}

/// The status classes of the final answers, in the order shown; `none` is no answer.
pub const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "none"];

/// One of the slowest URLs: its record's `elapsed_ms` and (masked) URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slow {
    pub elapsed_ms: u64,
    pub url: String,
}

/// The report's counters (see the module's doc).
#[derive(Debug)]
pub struct Breakdown {
    start: SystemTime,
    /// Seconds per bucket: 1, doubled each time the timeline is coarsened.
    width: u64,
    buckets: Vec<Bucket>,
    classes: [u64; 6],
    errors: BTreeMap<String, u64>,
    slowest: Vec<Slow>,
    hosts: HashMap<String, HostRate>,
}

impl Default for Breakdown {
    fn default() -> Self {
        Self::starting(SystemTime::now())
    }
}

impl Breakdown {
    /// Most buckets kept: two hours at one second each.
    pub const MAX_BUCKETS: usize = 7200;
    /// Most distinct error kinds kept; further kinds count as `other`.
    pub const MAX_ERROR_KINDS: usize = 32;
    /// Slowest URLs kept.
    pub const SLOWEST: usize = 10;

    pub fn starting(start: SystemTime) -> Self {
        Breakdown {
            start,
            width: 1,
            buckets: Vec::new(),
            classes: [0; 6],
            errors: BTreeMap::new(),
            slowest: Vec::new(),
            hosts: HashMap::new(),
        }
    }

    /// A fetched record of `host` made at `at`, after `attempts` attempts of which
    /// `throttled` were throttle answers.
    pub fn host_fetched(&mut self, host: &str, at: SystemTime, attempts: u32, throttled: u32) {
        let secs = at.duration_since(self.start).map_or(0, |d| d.as_secs());
        if !self.hosts.contains_key(host) {
            let rate = HostRate {
                width: 1,
                buckets: Vec::new(),
            };
            self.hosts.insert(host.to_owned(), rate);
        }
        if let Some(r) = self.hosts.get_mut(host) {
            r.add(secs, attempts, throttled);
        }
    }

    /// `host`'s requests over time, if it was fetched.
    pub fn host_rate(&self, host: &str) -> Option<&HostRate> {
        self.hosts.get(host)
    }

    /// A fetched record (at least one attempt) made at `at`.
    pub fn fetched(&mut self, at: SystemTime, status: Option<u16>, throttled: u32) {
        let ok = status.is_some_and(|s| (200..300).contains(&s));
        let b = self.bucket(at);
        b.ok += u32::from(ok);
        b.failed += u32::from(!ok);
        b.throttled = b.throttled.saturating_add(throttled);
        let class = match status {
            Some(s @ 100..=599) => usize::from(s / 100 - 1),
            _ => 5,
        };
        self.classes[class] += 1;
    }

    /// A record's `error`, counted by its kind: the text before the first `:`.
    pub fn error(&mut self, error: &str) {
        let kind = error_kind(error);
        let kind = if self.errors.contains_key(kind) || self.errors.len() < Self::MAX_ERROR_KINDS {
            kind
        } else {
            "other"
        };
        *self.errors.entry(kind.to_owned()).or_default() += 1;
    }

    /// A record's time: kept if it is among the [`Self::SLOWEST`].
    pub fn elapsed(&mut self, elapsed_ms: u64, url: &str) {
        let full = self.slowest.len() >= Self::SLOWEST;
        if full
            && self
                .slowest
                .last()
                .is_some_and(|s| s.elapsed_ms >= elapsed_ms)
        {
            return;
        }
        let at = self.slowest.partition_point(|s| s.elapsed_ms >= elapsed_ms);
        self.slowest.insert(
            at,
            Slow {
                elapsed_ms,
                url: url.to_owned(),
            },
        );
        self.slowest.truncate(Self::SLOWEST);
    }

    fn bucket(&mut self, at: SystemTime) -> &mut Bucket {
        let secs = at.duration_since(self.start).map_or(0, |d| d.as_secs());
        while secs / self.width >= Self::MAX_BUCKETS as u64 {
            self.coarsen();
        }
        let i = (secs / self.width) as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, Bucket::default());
        }
        &mut self.buckets[i]
    }

    /// Merge neighbouring buckets in pairs: half as many, twice as wide.
    fn coarsen(&mut self) {
        self.buckets = self
            .buckets
            .chunks(2)
            .map(|pair| {
                pair.iter().fold(Bucket::default(), |a, b| Bucket {
                    ok: a.ok + b.ok,
                    throttled: a.throttled.saturating_add(b.throttled),
                    failed: a.failed + b.failed,
                })
            })
            .collect();
        self.width *= 2;
    }

    /// Seconds per bucket, and the buckets from the start to the last record.
    pub fn timeline(&self) -> (u64, &[Bucket]) {
        (self.width, &self.buckets)
    }

    /// Each of [`CLASSES`] with its count.
    pub fn classes(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        CLASSES.iter().copied().zip(self.classes.iter().copied())
    }

    /// Error kinds, the most frequent first.
    pub fn errors(&self) -> Vec<(&str, u64)> {
        let mut v: Vec<_> = self.errors.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }

    /// The slowest URLs, the slowest first.
    pub fn slowest(&self) -> &[Slow] {
        &self.slowest
    }
}

/// The kind of a record's `error`: `timeout` of `timeout: …`; bounded, as a message may
/// come from a site.
fn error_kind(error: &str) -> &str {
    let kind = error.split(':').next().unwrap_or_default().trim();
    match kind.char_indices().nth(40) {
        Some((cut, _)) => &kind[..cut],
        None if kind.is_empty() => "other",
        None => kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counts_per_second_and_coarsens_past_the_cap() {
        let start = SystemTime::UNIX_EPOCH;
        let mut b = Breakdown::starting(start);
        b.fetched(start + Duration::from_millis(300), Some(200), 2);
        b.fetched(start + Duration::from_millis(2500), Some(503), 1);
        b.fetched(start + Duration::from_millis(2900), None, 0);
        let (width, buckets) = b.timeline();
        assert_eq!(width, 1);
        assert_eq!(buckets.len(), 3);
        assert_eq!(
            buckets[0],
            Bucket {
                ok: 1,
                throttled: 2,
                failed: 0
            }
        );
        assert_eq!(buckets[2].failed, 2);
        let late = Breakdown::MAX_BUCKETS as u64 * 3;
        b.fetched(start + Duration::from_secs(late), Some(200), 0);
        let (width, buckets) = b.timeline();
        assert_eq!(width, 4);
        assert!(buckets.len() <= Breakdown::MAX_BUCKETS);
        let sum: u32 = buckets.iter().map(|b| b.ok + b.failed).sum();
        assert_eq!(sum, 4);
        let classes: Vec<_> = b.classes().filter(|c| c.1 > 0).collect();
        assert_eq!(classes, [("2xx", 2), ("5xx", 1), ("none", 1)]);
    }

    #[test]
    fn a_hosts_rate_sums_its_records_and_coarsens_past_the_cap() {
        let start = SystemTime::UNIX_EPOCH;
        let mut b = Breakdown::starting(start);
        let at = |ms| start + Duration::from_millis(ms);
        b.host_fetched("h", at(2500), 3, 2);
        b.host_fetched("h", at(300), 1, 0);
        b.host_fetched("h", at(2100), 1, 1);
        let r = b.host_rate("h").expect("h");
        assert_eq!(r.width, 1);
        let got: Vec<_> = r
            .buckets
            .iter()
            .map(|b| (b.at, b.requests, b.throttled))
            .collect();
        assert_eq!(got, [(0, 1, 0), (2, 4, 3)]);
        for s in 0..HostRate::MAX_BUCKETS as u64 * 2 {
            b.host_fetched("h", at(10_000 + s * 1000), 1, 0);
        }
        let r = b.host_rate("h").unwrap();
        assert!(
            r.width >= 2 && r.buckets.len() <= HostRate::MAX_BUCKETS,
            "{}",
            r.width
        );
        let sum: u32 = r.buckets.iter().map(|b| b.requests).sum();
        assert_eq!(sum, 5 + HostRate::MAX_BUCKETS as u32 * 2);
        assert!(r.buckets.windows(2).all(|w| w[0].at < w[1].at));
        assert!(b.host_rate("other").is_none());
    }

    #[test]
    fn error_kinds_are_bounded() {
        let mut b = Breakdown::default();
        b.error("timeout: after 5 s");
        b.error("timeout: after 5 s");
        b.error("private address refused");
        for i in 0..100 {
            b.error(&format!("kind{i}: x"));
        }
        let errors = b.errors();
        assert_eq!(errors[0], ("other", 70));
        assert_eq!(errors[1], ("timeout", 2));
        assert_eq!(errors.len(), Breakdown::MAX_ERROR_KINDS + 1);
    }

    #[test]
    fn keeps_the_slowest() {
        let mut b = Breakdown::default();
        for ms in [5, 50, 1, 30, 7, 9, 11, 13, 2, 3, 4, 100] {
            b.elapsed(ms, &format!("u{ms}"));
        }
        let ms: Vec<u64> = b.slowest().iter().map(|s| s.elapsed_ms).collect();
        assert_eq!(ms, [100, 50, 30, 13, 11, 9, 7, 5, 4, 3]);
    }
}
