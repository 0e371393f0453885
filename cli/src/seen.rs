//! Which URL lines a list has had already, in bounded memory: `--urls` dedupe.
//!
//! A 10-million-line list would take gigabytes as a set of strings. This keeps a 64-bit
//! fingerprint per distinct URL (SipHash with a key drawn at random per run) in one
//! open-addressing table of `u64`s that doubles as it fills, up to a cap. Two distinct
//! URLs share a fingerprint with probability about n² / 2⁶⁵ over a whole run (n distinct
//! URLs: 1 in 900,000 for 6 million); the key is random, so no input can aim for it.
//!
//! Past the cap the table stops remembering new URLs: they are fetched, and so are their
//! duplicates. A URL is never skipped because memory ran short.

use std::hash::{BuildHasher, RandomState};

/// Largest table, bytes: 2²³ slots, 6,291,456 distinct URLs at the load limit.
pub const MAX_TABLE_BYTES: usize = 64 << 20;
/// Smallest table: 2¹² slots (32 KiB).
const MIN_SLOTS: usize = 1 << 12;

/// What [`Seen::insert`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// First time: remembered.
    New,
    /// Seen before.
    Duplicate,
    /// First time, but the table is at its cap: not remembered.
    Full,
}

/// The fingerprint set (see the module docs).
pub struct Seen {
    /// 0 = empty slot; fingerprints are never 0 (0 is stored as 1).
    slots: Vec<u64>,
    len: usize,
    max_slots: usize,
    hasher: RandomState,
}

impl Seen {
    /// A set whose table never grows beyond `max_bytes` (at least [`MIN_SLOTS`] slots).
    pub fn new(max_bytes: usize) -> Self {
        // The largest power of two of slots that fits.
        let fit = (max_bytes / 8).max(MIN_SLOTS);
        let max_slots = if fit.is_power_of_two() {
            fit
        } else {
            fit.next_power_of_two() / 2
        };
        Seen {
            slots: vec![0; MIN_SLOTS.min(max_slots)],
            len: 0,
            max_slots,
            hasher: RandomState::new(),
        }
    }

    /// Distinct URLs remembered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes the table takes now.
    #[cfg(test)]
    pub fn table_bytes(&self) -> usize {
        self.slots.len() * 8
    }

    /// Look `url` up and remember it.
    pub fn insert(&mut self, url: &str) -> Insert {
        let fp = self.hasher.hash_one(url).max(1);
        if self.find(fp).is_some() {
            return Insert::Duplicate;
        }
        // Load at most 3/4: linear probing stays short (about 8 probes for a miss).
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            if self.slots.len() >= self.max_slots {
                return Insert::Full;
            }
            self.grow();
        }
        self.place(fp);
        self.len += 1;
        Insert::New
    }

    fn find(&self, fp: u64) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = (fp as usize) & mask;
        loop {
            match self.slots[i] {
                0 => return None,
                v if v == fp => return Some(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn place(&mut self, fp: u64) {
        let mask = self.slots.len() - 1;
        let mut i = (fp as usize) & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = fp;
    }

    fn grow(&mut self) {
        let bigger = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for fp in old.into_iter().filter(|v| *v != 0) {
            self.place(fp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_and_finds_duplicates() {
        let mut s = Seen::new(MAX_TABLE_BYTES);
        assert_eq!(s.insert("http://a/1"), Insert::New);
        assert_eq!(s.insert("http://a/2"), Insert::New);
        assert_eq!(s.insert("http://a/1"), Insert::Duplicate);
        for i in 0..100_000 {
            assert_eq!(s.insert(&format!("http://b/{i}")), Insert::New);
        }
        for i in 0..100_000 {
            assert_eq!(s.insert(&format!("http://b/{i}")), Insert::Duplicate);
        }
        assert_eq!(s.len(), 100_002);
        assert!(s.table_bytes() <= 256 * 1024 * 8, "{}", s.table_bytes());
    }

    #[test]
    fn the_table_stops_at_its_cap_and_never_calls_a_new_url_a_duplicate() {
        let cap = 64 * 1024;
        let mut s = Seen::new(cap);
        let mut full = 0;
        for i in 0..50_000 {
            match s.insert(&format!("http://c/{i}")) {
                Insert::New => {}
                Insert::Full => full += 1,
                Insert::Duplicate => panic!("{i} is new"),
            }
        }
        assert_eq!(s.table_bytes(), cap);
        assert_eq!(s.len(), cap / 8 * 3 / 4);
        assert_eq!(full, 50_000 - s.len());
        // What was remembered is still found.
        assert_eq!(s.insert("http://c/0"), Insert::Duplicate);
    }
}
