//! The seen-set: each normalised URL is enqueued once per crawl, in bounded memory.
//!
//! Keeping every URL string costs ~100 bytes or more each (1 GB per 10 M URLs). We keep a
//! 64-bit fingerprint instead: SipHash-1-3 (std's `DefaultHasher::new()`, fixed keys, so
//! deterministic within one build) of the normalised URL, in a `HashSet<u64>` whose own
//! hasher passes the fingerprint through (it is already uniformly mixed).
//!
//! - **Memory**: 8 bytes + 1 control byte per slot, load factor between 7/16 and 7/8
//!   because the table has a power-of-two slot count: 10.3–20.6 bytes per URL (≈ 100–200 MB
//!   for 10 M URLs; 18.9 bytes/URL at exactly 1 M). While growing, old and new tables
//!   coexist for a moment; [`Seen::with_capacity`] for the expected count avoids that.
//! - **Collisions**: a new URL is wrongly taken as seen only if its fingerprint collides,
//!   probability ≈ n²/2⁶⁵: for 10 M URLs ≈ 2.7·10⁻⁶ that *any* URL of the crawl is lost
//!   (for 1 M ≈ 2.7·10⁻⁸). Unlike a Bloom filter (≈ 1.2 bytes/URL at 1 % false positives,
//!   i.e. 1 in 100 new pages silently skipped) this is practically exact.
//! - **Bound**: an optional `limit` caps the set; once full, unseen URLs are refused
//!   (`insert` returns `false`) and counted in [`Seen::refused`], so memory never grows
//!   past the limit and the crawl stops discovering instead of swapping.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use url::Url;

/// 64-bit fingerprint of a URL (of its normalised string form).
pub fn fingerprint(url: &Url) -> u64 {
    fingerprint_str(url.as_str())
}

/// 64-bit fingerprint of a string (what [`fingerprint`] hashes).
pub fn fingerprint_str(s: &str) -> u64 {
    // SipHasher13 itself is unstable; DefaultHasher::new() is SipHash-1-3 with fixed keys.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(s.as_bytes());
    h.finish()
}

/// A `Hasher` that passes a `u64` through: the keys are fingerprints already.
#[derive(Default, Clone, Copy)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed here; fold anything else just in case.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Set of URL fingerprints with an optional size limit.
#[derive(Clone, Default)]
pub struct Seen {
    set: HashSet<u64, BuildHasherDefault<PassThrough>>,
    limit: Option<usize>,
    refused: u64,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seen")
            .field("len", &self.len())
            .field("limit", &self.limit)
            .field("refused", &self.refused)
            .finish()
    }
}

impl Seen {
    /// Unbounded, empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pre-sized for `n` URLs (no regrowth up to `n`).
    pub fn with_capacity(n: usize) -> Self {
        Self {
            set: HashSet::with_capacity_and_hasher(n, Default::default()),
            ..Self::default()
        }
    }

    /// Holds at most `limit` URLs; past that unseen URLs are refused.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit: Some(limit),
            ..Self::default()
        }
    }

    /// `true` if `url` was not seen before (and now is).
    pub fn insert(&mut self, url: &Url) -> bool {
        self.insert_fingerprint(fingerprint(url))
    }

    /// [`Seen::insert`] for a precomputed [`fingerprint`].
    pub fn insert_fingerprint(&mut self, fp: u64) -> bool {
        if self.limit.is_some_and(|l| self.set.len() >= l) {
            if !self.set.contains(&fp) {
                self.refused += 1;
            }
            return false;
        }
        self.set.insert(fp)
    }

    /// [`Seen::insert`] for a URL handed in (a seed), not discovered: held whatever the
    /// limit, which bounds what a crawl finds, not what it is given (the input bounds
    /// that), so a seed is fetched and a repeated one is still seen.
    pub fn insert_given(&mut self, url: &Url) -> bool {
        self.set.insert(fingerprint(url))
    }

    /// Was `url` seen?
    pub fn contains(&self, url: &Url) -> bool {
        self.set.contains(&fingerprint(url))
    }

    /// URLs held.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// No URL held.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Unseen URLs refused because the limit was reached.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Approximate heap bytes held by the table (9 bytes per slot).
    pub fn memory_bytes(&self) -> usize {
        // hashbrown: capacity() is 7/8 of a power-of-two bucket count; 8-byte key + 1 control
        // byte per bucket (plus 16 control bytes of padding, ignored).
        match self.set.capacity() {
            0 => 0,
            cap => (cap * 8).div_ceil(7).next_power_of_two() * 9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_reports_new_once() {
        let mut s = Seen::new();
        let a = Url::parse("http://e.com/a").unwrap();
        let b = Url::parse("http://e.com/b").unwrap();
        assert!(s.insert(&a));
        assert!(!s.insert(&a));
        assert!(s.insert(&b));
        assert!(s.contains(&a) && s.len() == 2);
    }

    #[test]
    fn limit_bounds_memory_and_counts_refusals() {
        let mut s = Seen::with_limit(2);
        assert!(s.insert_fingerprint(1) && s.insert_fingerprint(2));
        assert!(!s.insert_fingerprint(3));
        assert!(!s.insert_fingerprint(1)); // already seen: not a refusal
        assert_eq!((s.len(), s.refused()), (2, 1));
        let given = Url::parse("http://e.com/given").unwrap();
        assert!(s.insert_given(&given) && !s.insert_given(&given));
        assert_eq!((s.len(), s.refused()), (3, 1));
    }

    #[test]
    fn a_million_urls_no_false_duplicates() {
        const N: usize = 1_000_000;
        let mut s = Seen::with_capacity(N);
        let mut buf = String::with_capacity(64);
        for i in 0..N {
            use std::fmt::Write;
            buf.clear();
            write!(buf, "https://host{}.example/p/{i}?q={}", i % 97, i * 7).unwrap();
            assert!(
                s.insert_fingerprint(fingerprint_str(&buf)),
                "false duplicate at {i}"
            );
        }
        assert_eq!(s.len(), N);
        assert!(!s.insert_fingerprint(fingerprint_str("https://host0.example/p/0?q=0")));
        let per_url = s.memory_bytes() as f64 / N as f64;
        assert!(per_url < 21.0, "{per_url} bytes/URL");
    }
}
