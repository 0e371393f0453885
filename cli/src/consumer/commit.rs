//! Group commit: a record is on the disk before Redis hears that its URL is done.
//!
//! A consumer writes each record to `--out` (its page to the WARC file first) and flushes
//! it: the kernel has it, the disk may not yet. A URL marked done in Redis while its record
//! is only in the page cache is lost by a power cut or a kernel panic of the consumer's
//! machine: Redis calls it done, and no output has a record of it. So the entries whose
//! records are written wait here until one sync (`sync_data` of the WARC file and of
//! `--out`) covers them all; only then are they released to be completed.
//!
//! One sync covers every record written since the last. It is taken when the oldest
//! waiting record is [`COMMIT_AFTER`] old, when [`COMMIT_RECORDS`] wait, or when no fetch
//! is in flight (nothing more is coming soon): at most about ten syncs a second up to
//! 1,280 records a second, one per 128 records beyond; and a record waits at most about
//! [`COMMIT_AFTER`] (plus the sync) before its URL is marked done.

use std::time::{Duration, Instant};

use exitcrawl_redis::SharedFrontierEntry;

/// The longest a written record waits for the sync that covers it.
pub const COMMIT_AFTER: Duration = Duration::from_millis(100);
/// Records written that make a sync due at once.
pub const COMMIT_RECORDS: usize = 128;

/// An entry whose record is on the disk. Only [`GroupCommit::commit`] makes one, after a
/// sync that covers the record: what Redis is told of it, no crash can take back.
#[derive(Debug)]
pub struct Synced(SharedFrontierEntry);

impl Synced {
    pub fn entry(&self) -> &SharedFrontierEntry {
        &self.0
    }
}

/// The entries whose records are written but not synced yet, oldest first.
#[derive(Debug, Default)]
pub struct GroupCommit {
    written: Vec<SharedFrontierEntry>,
    /// When the oldest of them was written.
    oldest: Option<Instant>,
}

impl GroupCommit {
    /// `e`'s record was written (and flushed) at `now`.
    pub fn wrote(&mut self, e: SharedFrontierEntry, now: Instant) {
        self.oldest.get_or_insert(now);
        self.written.push(e);
    }

    /// Entries waiting for a sync.
    pub fn len(&self) -> usize {
        self.written.len()
    }

    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }

    /// Whether entry `id` waits here.
    pub fn holds(&self, id: &str) -> bool {
        self.written.iter().any(|e| e.id == id)
    }

    /// Whether a sync is due at `now`; `in_flight`: fetches are under way, whose records
    /// the next sync may cover too.
    pub fn due(&self, now: Instant, in_flight: bool) -> bool {
        self.oldest.is_some_and(|oldest| {
            !in_flight
                || self.written.len() >= COMMIT_RECORDS
                || now.saturating_duration_since(oldest) >= COMMIT_AFTER
        })
    }

    /// How long after `now` the oldest waiting record makes a sync due; `None` when
    /// nothing waits.
    pub fn due_in(&self, now: Instant) -> Option<Duration> {
        self.oldest
            .map(|oldest| (oldest + COMMIT_AFTER).saturating_duration_since(now))
    }

    /// Sync (`sync` brings every record written so far to the disk), then release every
    /// waiting entry, oldest first. When the sync fails, nothing is released: the entries
    /// keep waiting, and their URLs are not marked done.
    pub fn commit<E>(&mut self, sync: impl FnOnce() -> Result<(), E>) -> Result<Vec<Synced>, E> {
        if self.written.is_empty() {
            return Ok(Vec::new());
        }
        sync()?;
        self.oldest = None;
        Ok(self.written.drain(..).map(Synced).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    fn entry(i: usize) -> SharedFrontierEntry {
        SharedFrontierEntry {
            id: format!("{i}-0"),
            url: format!("http://a.test/{i}"),
            tries: 0,
        }
    }

    /// What the consumer does, in order: `W i` a record written, `S` a sync, `C i` a URL
    /// completed in Redis.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Ev {
        W(usize),
        S,
        C(usize),
    }

    /// Drive a group commit as the consumer does, on a clock of 1 ms steps: a record
    /// written every `every_ms` while fetches are in flight (they run out after `n`), a
    /// look at every step (the consumer wakes when a sync is due), a sync when due, and
    /// the entries it releases completed.
    fn drive(n: usize, every_ms: usize) -> Vec<Ev> {
        let log = RefCell::new(Vec::new());
        let mut g = GroupCommit::default();
        let t0 = Instant::now();
        for t in 0..=(n - 1) * every_ms {
            let now = t0 + Duration::from_millis(t as u64);
            let i = t / every_ms;
            if t % every_ms == 0 {
                g.wrote(entry(i), now);
                log.borrow_mut().push(Ev::W(i));
            }
            if g.due(now, i + 1 < n) {
                let synced = g
                    .commit(|| {
                        log.borrow_mut().push(Ev::S);
                        Ok::<_, ()>(())
                    })
                    .unwrap();
                for s in synced {
                    let i = s.entry().id.split('-').next().unwrap().parse().unwrap();
                    log.borrow_mut().push(Ev::C(i));
                }
            }
        }
        assert!(
            g.is_empty(),
            "the last record, nothing in flight, is synced at once"
        );
        log.into_inner()
    }

    /// Every completion comes after a sync that came after its record was written.
    fn assert_synced_first(log: &[Ev]) {
        for (at, ev) in log.iter().enumerate() {
            if let Ev::C(i) = ev {
                let written = log.iter().position(|e| *e == Ev::W(*i)).expect("written");
                assert!(
                    log[written..at].contains(&Ev::S),
                    "{i} completed without a sync after its record: {log:?}"
                );
            }
        }
        let (w, c) = log.iter().fold((0, 0), |(w, c), e| match e {
            Ev::W(_) => (w + 1, c),
            Ev::C(_) => (w, c + 1),
            Ev::S => (w, c),
        });
        assert_eq!(w, c, "every record written is completed once");
    }

    #[test]
    fn no_url_is_completed_before_a_sync_covers_its_record() {
        // 300 records 1 ms apart: a sync every 100 ms, and one for the last.
        let log = drive(300, 1);
        assert_synced_first(&log);
        let syncs = log.iter().filter(|e| **e == Ev::S).count();
        assert!((3..=4).contains(&syncs), "{syncs} syncs for 300 records");
        // Records 1 s apart, slower than the bound: each gets a sync of its own.
        let log = drive(5, 1000);
        assert_synced_first(&log);
        assert_eq!(log.iter().filter(|e| **e == Ev::S).count(), 5);
    }

    #[test]
    fn many_records_at_once_make_a_sync_due_by_their_number() {
        let mut g = GroupCommit::default();
        let now = Instant::now();
        for i in 0..COMMIT_RECORDS - 1 {
            g.wrote(entry(i), now);
        }
        assert!(!g.due(now, true));
        assert_eq!(g.due_in(now), Some(COMMIT_AFTER));
        g.wrote(entry(COMMIT_RECORDS), now);
        assert!(g.due(now, true));
        assert!(GroupCommit::default().due_in(now).is_none());
        assert!(!GroupCommit::default().due(now, false), "nothing to sync");
    }

    #[test]
    fn a_failed_sync_releases_nothing() {
        let mut g = GroupCommit::default();
        let now = Instant::now();
        g.wrote(entry(1), now);
        g.wrote(entry(2), now);
        let failed = g.commit(|| Err("disk full"));
        assert_eq!(failed.unwrap_err(), "disk full");
        assert_eq!(g.len(), 2, "still waiting");
        assert!(g.holds("1-0") && g.holds("2-0"));
        assert!(g.due(now, false));
        let synced = g.commit(|| Ok::<_, ()>(())).unwrap();
        let ids: Vec<&str> = synced.iter().map(|s| s.entry().id.as_str()).collect();
        assert_eq!(ids, ["1-0", "2-0"]);
        assert!(g.is_empty() && !g.due(now, false));
        let mut called = false;
        let none = g.commit(|| {
            called = true;
            Ok::<_, ()>(())
        });
        assert!(none.unwrap().is_empty());
        assert!(!called, "nothing waits: no sync");
    }
}
