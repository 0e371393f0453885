//! The `--frontier` consumer: take entries, fetch, write the record (flushed), sync it to
//! the disk ([`commit`]: one sync for many records), then complete the entry in Redis — or
//! put it back for another consumer when the failure was this consumer's own
//! ([`blame`]). The decisions are the core's (`exitcrawl::shared_frontier`); this loop
//! carries them out:
//!
//! - a heartbeat key per consumer, refreshed every `claim_idle / 4` by a task of its own;
//!   a claim pass as often takes over the whole pending list of every consumer whose
//!   heartbeat expired, removes those consumers from the group, and trims the stream;
//! - Redis failures go through [`RedisWait`]: backoff up to `--redis-wait`, then the
//!   consumer ends (exit 1); a lost queue ends it at once. While Redis is away, fetches in
//!   flight go on: their records are written, and what Redis is owed (completions,
//!   requeues) is kept and sent once it answers again;
//! - a stop signal lets the fetches in flight finish for `grace`, then puts the rest
//!   back in the queue.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use exitcrawl::shared_frontier::{Fate, Liveness, LocalJudge, Next, RedisFault, RedisWait};
use exitcrawl_net::clock;
use exitcrawl_redis::{RedisError, SharedFrontier, SharedFrontierEntry};
use futures_util::future::{FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::ended::Ended;
use super::fetch::{fetch_one, settle, Ctx, Outcome};
use super::output::{write_line, OutSync, SharedOut};
use super::record::Totals;
use super::shared_frontier::{consumer_name, fatal_message, fault, open_frontier, waited};
use super::signals::Stop;
use super::source::FrontierUrl;
use super::term::say;

mod blame;
mod commit;

use blame::blame;
use commit::{GroupCommit, Synced};

/// Longest wait for new entries when nothing is in flight.
const FRONTIER_BLOCK: Duration = Duration::from_millis(250);
/// Longest wait for a completion before looking for more entries.
const FRONTIER_POLL: Duration = Duration::from_millis(100);
/// An outage is said on stderr from its second failed call: after a Redis restart, each
/// connection's first call fails once on its stale socket and the next one reconnects —
/// a blip, not an outage worth a message.
const OUTAGE_SAID_AFTER: u32 = 2;
/// Most of its own pending entries a consumer takes back in one look.
const OWN_PENDING_MAX: usize = 1000;

/// How a consumer runs.
pub struct FrontierOptions {
    pub claim_idle: Duration,
    pub idle_exit: Duration,
    pub grace: Duration,
    pub concurrency: usize,
    pub redis_wait: Duration,
}

type Done = (SharedFrontierEntry, Outcome, Duration);

/// What Redis is owed for an entry whose fetch ended.
enum Owed {
    /// The record is on the disk: mark the URL done and acknowledge the entry.
    Complete(Synced),
    /// Back to the queue with this many local failures counted.
    Requeue(SharedFrontierEntry, u32),
}

impl Owed {
    fn entry(&self) -> &SharedFrontierEntry {
        match self {
            Owed::Complete(s) => s.entry(),
            Owed::Requeue(e, _) => e,
        }
    }
}

/// A consumer's state.
struct Consumer<'a> {
    ctx: &'a Ctx<'a>,
    f: &'a FrontierUrl,
    frontier: SharedFrontier,
    name: String,
    o: &'a FrontierOptions,
    out: &'a SharedOut,
    /// Syncs `--out` to the disk (a regular file's; none for a pipe or a terminal).
    out_sync: Option<&'a OutSync>,
    /// Entries whose records are written, waiting for the sync that covers them.
    commit: GroupCommit,
    totals: &'a Totals,
    in_flight: FuturesUnordered<LocalBoxFuture<'a, Done>>,
    /// The entries in flight, by id.
    fetching: HashMap<String, SharedFrontierEntry>,
    /// Entries taken over (claimed, or found pending for this consumer) waiting for a slot.
    backlog: VecDeque<SharedFrontierEntry>,
    /// What Redis is owed, oldest first: kept while Redis is away.
    owed: VecDeque<Owed>,
    live: Liveness,
    /// When the heartbeat task last refreshed the key.
    beat_ok: Rc<Cell<Instant>>,
    /// The heartbeat lapsed and that was said; cleared once it is refreshed again.
    lapse_said: bool,
    next_pass: Instant,
    wait: RedisWait,
    /// No Redis call before this: backing off after a failure.
    retry_at: Option<Instant>,
    /// The last error of the current outage that reached the network.
    cause: Option<String>,
    /// Failed calls in the current outage.
    outage_failures: u32,
    /// Look for entries pending for this consumer that it does not hold.
    reconcile: bool,
    judge: LocalJudge,
    /// The last failure judged local, for the message when the consumer stops.
    last_local: String,
    /// Why this consumer takes no more work.
    stopped: Option<String>,
    last_activity: Instant,
}

/// `--frontier` consumer (see the module docs). Ends when nothing is in flight, held or
/// pending for any consumer and nothing came for `idle_exit`; `Ended::Stopped` when Redis
/// is lost or this consumer's failures are all its own. `out`: `--out`, and what syncs it
/// to the disk.
pub async fn frontier_crawl(
    ctx: &Ctx<'_>,
    f: &FrontierUrl,
    o: &FrontierOptions,
    mut stop: Stop,
    (out, out_sync): (&SharedOut, Option<&OutSync>),
    totals: &Totals,
) -> Result<Ended, String> {
    // A first sync before any page is written: from it on, the WARC writer also syncs
    // each file it finishes (a rotation between two syncs would leave it unsynced).
    ctx.archive.borrow_mut().sync()?;
    let mut wait = RedisWait::new(o.redis_wait);
    let frontier = open_frontier(f, &mut wait).await?;
    let name = consumer_name();
    let live = Liveness::new(o.claim_idle);
    // The first heartbeat before the first read: no consumer is ever seen without one.
    // Redis may stop answering right after the open: waited for as the open was.
    waited(f, &mut wait, || frontier.heartbeat(&name, live.ttl)).await?;
    say(&format!("frontier {} as consumer {name}", f.shown()));
    if frontier.created() {
        say(&format!(
            "frontier {}: the queue did not exist and was created empty (nothing enqueued in \
             this crawl yet, or Redis lost it)",
            f.shown()
        ));
    }
    let now = clock::now();
    let beat_ok = Rc::new(Cell::new(now));
    let beat = spawn_heartbeat(frontier.clone(), name.clone(), live, Rc::clone(&beat_ok));
    let mut c = Consumer {
        ctx,
        f,
        frontier,
        name,
        o,
        out,
        out_sync,
        commit: GroupCommit::default(),
        totals,
        in_flight: FuturesUnordered::new(),
        fetching: HashMap::new(),
        backlog: VecDeque::new(),
        owed: VecDeque::new(),
        live,
        beat_ok,
        lapse_said: false,
        // Not at once: Redis may have come back from an outage just before this consumer
        // started (or while it waited to start), with every heartbeat expired meanwhile;
        // the live consumers get time to come out of their reconnect backoff and refresh
        // theirs before this one judges any of them dead and takes over what they are
        // fetching.
        next_pass: live.first_pass_after_outage(now),
        wait,
        retry_at: None,
        cause: None,
        outage_failures: 0,
        reconcile: false,
        judge: LocalJudge::new(LocalJudge::window_for(o.concurrency)),
        last_local: String::new(),
        stopped: None,
        last_activity: now,
    };
    let ended = c.run(&mut stop, &beat).await;
    beat.abort();
    ended
}

/// Refreshes the consumer's heartbeat every `live.every`; failures are the main loop's to
/// notice (its own calls fail too).
fn spawn_heartbeat(
    frontier: SharedFrontier,
    name: String,
    live: Liveness,
    ok: Rc<Cell<Instant>>,
) -> actix_rt::task::JoinHandle<()> {
    actix_rt::spawn(async move {
        loop {
            actix_rt::time::sleep(live.every).await;
            if frontier.heartbeat(&name, live.ttl).await.is_ok() {
                ok.set(clock::now());
            }
        }
    })
}

impl<'a> Consumer<'a> {
    /// Steps until the work is done, Redis is lost, or a stop signal comes.
    async fn run(
        &mut self,
        stop: &mut Stop,
        beat: &actix_rt::task::JoinHandle<()>,
    ) -> Result<Ended, String> {
        loop {
            if stop.try_recv().is_ok() {
                return self.interrupted(beat).await;
            }
            match self.step().await {
                Ok(true) => {}
                Ok(false) => break,
                Err(why) => return Ok(Ended::Stopped(self.abandon(why))),
            }
        }
        beat.abort();
        self.leave().await;
        Ok(match self.stopped.take() {
            Some(why) => Ended::Stopped(format!(
                "frontier {}: this consumer stopped taking work: {why}; its URLs went back \
                 to the queue",
                self.f.shown()
            )),
            None => Ended::Complete,
        })
    }

    fn may_call(&self) -> bool {
        self.retry_at.is_none_or(|t| clock::now() >= t)
    }

    /// Whether this consumer holds entry `id` (in flight, waiting, recorded and not
    /// synced yet, or owed to Redis).
    fn holds(&self, id: &str) -> bool {
        self.fetching.contains_key(id)
            || self.backlog.iter().any(|e| e.id == id)
            || self.commit.holds(id)
            || self.owed.iter().any(|o| o.entry().id == id)
    }

    /// The result of a Redis call: `Some` on success; `None` after a failure to retry
    /// later; `Err` when the consumer cannot go on (the message says why).
    fn redis<T>(&mut self, r: Result<T, RedisError>) -> Result<Option<T>, String> {
        let now = clock::now();
        let e = match r {
            Ok(v) => {
                self.retry_at = None;
                self.cause = None;
                if let Some(down) = self.wait.succeeded(now) {
                    if self.outage_failures >= OUTAGE_SAID_AFTER {
                        say(&format!(
                            "frontier: Redis answers again after {:.1} s",
                            down.as_secs_f64()
                        ));
                    }
                    self.outage_failures = 0;
                    self.reconcile = true;
                    self.next_pass = self.live.first_pass_after_outage(now);
                }
                return Ok(Some(v));
            }
            Err(e) => e,
        };
        if !matches!(e, RedisError::Unavailable { .. }) {
            self.cause = Some(e.to_string());
        }
        self.outage_failures += 1;
        match self.wait.failed(fault(&e), now) {
            Next::RetryIn(d) => {
                self.retry_at = Some(now + d);
                if self.outage_failures == OUTAGE_SAID_AFTER {
                    let what = match fault(&e) {
                        RedisFault::Busy => "is not ready",
                        _ => "does not answer",
                    };
                    say(&format!(
                        "frontier: Redis {what} ({}); retrying for up to {:.0} s (--redis-wait); \
                         fetches in flight go on, their records are written and Redis is told \
                         once it answers",
                        self.cause.as_deref().unwrap_or("no answer"),
                        self.wait.wait().as_secs_f64()
                    ));
                }
                Ok(None)
            }
            Next::GiveUp { .. } | Next::Fatal => {
                Err(fatal_message(self.f, &e, self.cause.as_deref(), &self.wait))
            }
        }
    }

    /// Settle what Redis is owed, look after the queue when due, start entries, wait a
    /// little for a completion. `Ok(false)`: done.
    async fn step(&mut self) -> Result<bool, String> {
        self.watch_heartbeat();
        self.sync_if_due()?;
        self.settle_owed().await?;
        if self.may_call() && clock::now() >= self.next_pass {
            self.upkeep().await?;
        }
        if self.reconcile && self.may_call() {
            self.reconcile = false;
            self.take_own_pending().await?;
        }
        let free = self.o.concurrency.saturating_sub(self.in_flight.len());
        let mut got: Vec<SharedFrontierEntry> =
            self.backlog.drain(..free.min(self.backlog.len())).collect();
        let mut blocked = false;
        if got.len() < free && self.stopped.is_none() && self.may_call() {
            blocked = self.in_flight.is_empty() && got.is_empty();
            let block = if blocked {
                FRONTIER_BLOCK
            } else {
                Duration::ZERO
            };
            let r = self
                .frontier
                .next(&self.name, free - got.len(), block)
                .await;
            got.extend(self.redis(r)?.unwrap_or_default());
        }
        if !got.is_empty() {
            self.last_activity = clock::now();
        }
        for entry in got {
            self.start(entry).await?;
        }
        if self.in_flight.is_empty() {
            return self.idle(blocked).await;
        }
        // Awake when the records waiting for a sync make one due.
        let poll = self
            .commit
            .due_in(clock::now())
            .map_or(FRONTIER_POLL, |d| d.min(FRONTIER_POLL));
        let next = actix_rt::time::timeout(poll, self.in_flight.next()).await;
        if let Ok(Some(done)) = next {
            self.finish(done).await?;
            self.last_activity = clock::now();
        }
        Ok(true)
    }

    /// Say once when this consumer's heartbeat may have expired: what it holds can then
    /// be taken over by others and fetched twice.
    fn watch_heartbeat(&mut self) {
        let lapsed = self.live.lapsed(self.beat_ok.get(), clock::now());
        if lapsed && !self.lapse_said {
            say(&format!(
                "frontier: no heartbeat refreshed for {:.0} s (--claim-idle): other consumers \
                 may take over the {} entries this one holds; a URL may then be fetched twice \
                 (--dedupe keeps one record)",
                self.live.ttl.as_secs_f64(),
                self.fetching.len() + self.backlog.len()
            ));
        }
        self.lapse_said = lapsed;
    }

    /// Nothing in flight: done once nothing is held or owed and nothing is pending for
    /// any consumer (or, stopped, once nothing is held or owed); otherwise wait a little.
    async fn idle(&mut self, blocked: bool) -> Result<bool, String> {
        let holding = !self.backlog.is_empty() || !self.commit.is_empty() || !self.owed.is_empty();
        if self.stopped.is_some() && !holding {
            return Ok(false);
        }
        if !holding && self.may_call() && clock::since(self.last_activity) >= self.o.idle_exit {
            let r = self.frontier.pending().await;
            match self.redis(r)? {
                Some(0) => {
                    // A consumer that stops puts what it held back (added and acknowledged
                    // at once): between this one's empty read and its count of what is
                    // pending, such an entry is in neither. One more read closes that gap.
                    let r = self.frontier.next(&self.name, 1, Duration::ZERO).await;
                    let more = self.redis(r)?.unwrap_or_default();
                    if more.is_empty() {
                        return Ok(false);
                    }
                    self.last_activity = clock::now();
                    for entry in more {
                        self.start(entry).await?;
                    }
                }
                // Pending for live consumers (they are working on it), or for this one
                // after Redis lost an acknowledgement.
                Some(_) => self.take_own_pending().await?,
                None => {}
            }
        }
        if !blocked {
            let pause = self
                .retry_at
                .map_or(FRONTIER_BLOCK, |t| {
                    t.saturating_duration_since(clock::now())
                })
                .min(FRONTIER_BLOCK);
            actix_rt::time::sleep(pause).await;
        }
        Ok(true)
    }

    /// The claim pass: take over the entries of consumers whose heartbeat expired, then
    /// trim the stream.
    async fn upkeep(&mut self) -> Result<(), String> {
        self.next_pass = self.live.next_pass(clock::now());
        if self.stopped.is_none() {
            let r = self.frontier.claim_dead(&self.name).await;
            let Some(c) = self.redis(r)? else {
                return Ok(());
            };
            if !c.entries.is_empty() || c.removed > 0 {
                say(&format!(
                    "frontier: claimed {} entries of consumers whose heartbeat expired ({} \
                     removed from the group)",
                    c.entries.len(),
                    c.removed
                ));
            }
            self.totals
                .claimed
                .set(self.totals.claimed.get() + c.entries.len() as u64);
            for e in c.entries {
                if !self.holds(&e.id) {
                    self.backlog.push_back(e);
                }
            }
        }
        let r = self.frontier.trim().await;
        self.redis(r)?;
        Ok(())
    }

    /// Entries pending for this consumer that it does not hold: Redis lost their
    /// acknowledgement (restarted from an AOF a moment behind).
    async fn take_own_pending(&mut self) -> Result<(), String> {
        let r = self.frontier.own_pending(&self.name, OWN_PENDING_MAX).await;
        for e in self.redis(r)?.unwrap_or_default() {
            if !self.holds(&e.id) {
                self.backlog.push_back(e);
            }
        }
        Ok(())
    }

    /// Fetch an entry unless its URL is already done in this crawl.
    async fn start(&mut self, entry: SharedFrontierEntry) -> Result<(), String> {
        if self.may_call() {
            let r = self.frontier.is_done(&entry.url).await;
            if self.redis(r)? == Some(true) {
                self.totals
                    .skipped_done
                    .set(self.totals.skipped_done.get() + 1);
                // Not acknowledged (Redis away): it stays pending here, and is looked
                // at again once Redis answers.
                let r = self.frontier.ack(&entry.id).await;
                self.redis(r)?;
                return Ok(());
            }
        }
        self.totals.read_one();
        self.fetching.insert(entry.id.clone(), entry.clone());
        let ctx = self.ctx;
        self.in_flight.push(
            async move {
                let started = clock::now();
                let outcome = fetch_one(ctx, entry.url.clone()).await;
                (entry, outcome, clock::since(started))
            }
            .boxed_local(),
        );
        Ok(())
    }

    /// A fetch ended: its record (flushed), completed once a sync covers it, or back to
    /// the queue.
    async fn finish(&mut self, (entry, outcome, waited): Done) -> Result<(), String> {
        self.fetching.remove(&entry.id);
        match blame(&outcome) {
            None => {
                self.totals.released.set(self.totals.released.get() + 1);
                self.owed
                    .push_back(Owed::Requeue(entry.clone(), entry.tries));
            }
            Some((blame, why)) => match self.judge.fate(blame, entry.tries) {
                Fate::Requeue { tries } => {
                    self.last_local = why;
                    self.totals.requeued.set(self.totals.requeued.get() + 1);
                    self.owed.push_back(Owed::Requeue(entry, tries));
                }
                Fate::Record => {
                    let record = settle(self.ctx, &entry.url, outcome, waited, false)?;
                    self.totals.add(&record);
                    if let Some(w) = self.out.borrow_mut().as_mut() {
                        write_line(w, &record)
                            .and_then(|()| w.flush())
                            .map_err(|e| format!("writing --out: {e}"))?;
                    }
                    self.commit.wrote(entry, clock::now());
                }
            },
        }
        if self.stopped.is_none() {
            if let Some(n) = self.judge.verdict() {
                self.stop_taking(n);
            }
        }
        self.sync_if_due()?;
        self.settle_owed().await
    }

    /// Sync the records written when a sync is due (see [`commit`]).
    fn sync_if_due(&mut self) -> Result<(), String> {
        if self.commit.due(clock::now(), !self.in_flight.is_empty()) {
            self.sync_records()?;
        }
        Ok(())
    }

    /// Bring every record written so far to the disk — the WARC file holding their pages,
    /// then `--out` — and owe Redis their completions.
    fn sync_records(&mut self) -> Result<(), String> {
        let (archive, out) = (self.ctx.archive, self.out_sync);
        let synced = self.commit.commit(|| {
            archive.borrow_mut().sync()?;
            out.map_or(Ok(()), OutSync::sync)
                .map_err(|e| format!("syncing --out: {e}"))
        })?;
        self.owed.extend(synced.into_iter().map(Owed::Complete));
        Ok(())
    }

    /// Every one of the last `n` URLs failed locally: take no more work, and give back
    /// what is waiting.
    fn stop_taking(&mut self, n: usize) {
        let why = format!(
            "each of the last {n} URLs failed on this consumer's side (last: {})",
            self.last_local
        );
        say(&format!(
            "frontier: {why}: its exits, network or settings (e.g. timeout_ms) keep it from \
             fetching. The URLs went back to the queue for other consumers; this consumer \
             takes no more work"
        ));
        self.stopped = Some(why);
        for e in self.backlog.drain(..) {
            self.totals.released.set(self.totals.released.get() + 1);
            self.owed.push_back(Owed::Requeue(e.clone(), e.tries));
        }
    }

    /// Send Redis what it is owed, oldest first, while it answers.
    async fn settle_owed(&mut self) -> Result<(), String> {
        while self.may_call() {
            let r = match self.owed.front() {
                None => break,
                Some(Owed::Complete(s)) => self.frontier.complete(s.entry()).await.map(drop),
                Some(Owed::Requeue(e, tries)) => self.frontier.requeue(e, *tries).await,
            };
            if self.redis(r)?.is_none() {
                break;
            }
            self.owed.pop_front();
        }
        Ok(())
    }

    /// A stop signal: the fetches in flight get `grace`; what is left goes back to the
    /// queue.
    async fn interrupted(
        &mut self,
        beat: &actix_rt::task::JoinHandle<()>,
    ) -> Result<Ended, String> {
        say(&format!(
            "interrupted: {} in flight get {:.0} s to finish; what is not finished by then \
             goes back to the queue",
            self.in_flight.len(),
            self.o.grace.as_secs_f64()
        ));
        let grace = self.o.grace;
        let drain = async {
            while let Some(done) = self.in_flight.next().await {
                self.finish(done).await?;
            }
            Ok::<_, String>(())
        };
        if let Ok(Err(why)) = actix_rt::time::timeout(grace, drain).await {
            return Ok(Ended::Stopped(self.abandon(why)));
        }
        self.in_flight = FuturesUnordered::new();
        if let Err(why) = self.sync_records() {
            return Ok(Ended::Stopped(self.abandon(why)));
        }
        let left: Vec<SharedFrontierEntry> = self
            .fetching
            .drain()
            .map(|(_, e)| e)
            .chain(self.backlog.drain(..))
            .collect();
        for e in left {
            self.totals.released.set(self.totals.released.get() + 1);
            self.owed.push_back(Owed::Requeue(e.clone(), e.tries));
        }
        // One attempt, whatever the backoff says: the consumer is leaving.
        self.retry_at = None;
        if let Err(why) = self.settle_owed().await {
            return Ok(Ended::Stopped(self.abandon(why)));
        }
        if !self.owed.is_empty() {
            say(&format!(
                "frontier: {} entries could not be given back to Redis now; they stay pending \
                 for this consumer, and another consumer takes them over once this one's \
                 heartbeat has expired (--claim-idle {:.0} s)",
                self.owed.len(),
                self.o.claim_idle.as_secs_f64()
            ));
        }
        beat.abort();
        self.leave().await;
        Ok(Ended::Interrupted)
    }

    /// Redis cannot be used any more: say what is true of the entries this consumer held.
    fn abandon(&mut self, why: String) -> String {
        let owed_done = self
            .owed
            .iter()
            .filter(|o| matches!(o, Owed::Complete(_)))
            .count();
        let unacked = owed_done + self.commit.len();
        let held = self.fetching.len() + self.backlog.len() + self.owed.len() - owed_done;
        let mut msg = why;
        if unacked + held > 0 {
            msg.push_str(&format!(
                ". This consumer held {held} URLs not recorded yet and {unacked} recorded but \
                 not marked done in Redis: if Redis comes back with its data, they are \
                 fetched again by a consumer (--dedupe keeps one record per URL)"
            ));
        }
        msg
    }

    /// Leave the group: the heartbeat is deleted, the consumer removed when nothing is
    /// pending for it, and the stream trimmed.
    async fn leave(&mut self) {
        if self.may_call() {
            if let Err(e) = self.frontier.leave(&self.name).await {
                tracing::debug!(error = %e, "frontier: leaving the group");
            }
            // What this consumer acknowledged last is trimmed now, not at the next pass
            // of a consumer that may never come.
            if let Err(e) = self.frontier.trim().await {
                tracing::debug!(error = %e, "frontier: trimming the stream");
            }
        }
    }
}
