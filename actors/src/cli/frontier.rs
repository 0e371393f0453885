//! The shared Redis frontier: `--enqueue` pushes URLs once; `--frontier` consumes them
//! (fetch, write the record and flush, then complete: at-least-once delivery).

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use exitcrawl::redact::mask_url;
use futures_util::future::{FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::fetch::{fetch_one, settle, Ctx, Outcome};
use super::output::{write_line, SharedOut};
use super::progress::say;
use super::record::Totals;
use super::run::Ended;
use super::signals::Stop;
use super::source::{url_line, UrlSource};
use super::Failure;
use crate::redis::{Frontier, FrontierEntry, Redis, RedisOptions};

/// URLs pushed per `Frontier::enqueue` call by `--enqueue`.
const ENQUEUE_BATCH: usize = 10_000;
/// Longest wait for new entries when nothing is in flight.
const FRONTIER_BLOCK: Duration = Duration::from_millis(250);
/// Longest wait for a completion before looking for more entries.
const FRONTIER_POLL: Duration = Duration::from_millis(100);

/// `--frontier redis://HOST:PORT/QUEUE`, split into the server and the queue name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontierUrl {
    /// `redis://HOST:PORT/`
    pub redis: String,
    pub queue: String,
}

impl FrontierUrl {
    pub fn parse(v: &str) -> Result<Self, String> {
        let bad =
            || format!("{v:?} is not redis://HOST:PORT/QUEUE (QUEUE: letters, digits and - _ . :)");
        let rest = v.strip_prefix("redis://").ok_or_else(bad)?;
        let (authority, queue) = rest.split_once('/').ok_or_else(bad)?;
        let queue = queue.trim_end_matches('/');
        if authority.is_empty()
            || queue.is_empty()
            || !queue
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(bad());
        }
        Ok(FrontierUrl {
            redis: format!("redis://{authority}/"),
            queue: queue.to_string(),
        })
    }
}

/// The consumer name: `hostname-pid`.
fn consumer_name() -> String {
    let host = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".into());
    format!("{host}-{}", std::process::id())
}

async fn open_frontier(f: &FrontierUrl) -> Result<Frontier, String> {
    let redis = Redis::connect(&f.redis, RedisOptions::default())
        .map_err(|e| format!("--frontier {}: {e}", f.redis))?;
    Frontier::open(&redis, &f.queue)
        .await
        .map_err(|e| format!("--frontier {}{}: {e}", f.redis, f.queue))
}

/// `--enqueue FILE --frontier URL`: push every URL line once. Returns how many.
pub async fn enqueue(urls: &UrlSource, f: &FrontierUrl) -> Result<usize, Failure> {
    let input: Box<dyn BufRead> = match urls {
        UrlSource::File(p) => {
            Box::new(BufReader::new(File::open(p).map_err(|e| {
                Failure::Usage(format!("--enqueue {}: {e}", p.display()))
            })?))
        }
        _ => Box::new(BufReader::new(io::stdin().lock())),
    };
    let frontier = open_frontier(f).await.map_err(Failure::Output)?;
    let mut added = 0;
    let mut batch = Vec::new();
    let mut lines = input.split(b'\n');
    loop {
        let line = lines.next();
        let end = line.is_none();
        if let Some(line) = line {
            let line = line.map_err(|e| Failure::Usage(format!("--enqueue: {e}")))?;
            if let Some(u) = url_line(&line) {
                batch.push(u);
            }
        }
        if batch.len() >= ENQUEUE_BATCH || (end && !batch.is_empty()) {
            added += frontier
                .enqueue(batch.drain(..))
                .await
                .map_err(|e| Failure::Output(format!("--enqueue: {e} ({added} enqueued)")))?;
        }
        if end {
            return Ok(added);
        }
    }
}

/// How a consumer runs.
pub struct FrontierOptions {
    pub claim_idle: Duration,
    pub idle_exit: Duration,
    pub grace: Duration,
    pub concurrency: usize,
}

type Done = (FrontierEntry, Outcome, Duration);

/// A consumer's state.
struct Consumer<'a> {
    ctx: &'a Ctx<'a>,
    frontier: Frontier,
    name: String,
    o: &'a FrontierOptions,
    out: &'a SharedOut,
    totals: &'a Totals,
    in_flight: FuturesUnordered<LocalBoxFuture<'a, Done>>,
    ids: HashSet<String>,
    last_claim: Option<Instant>,
    last_activity: Instant,
}

/// `--frontier` consumer: pull entries, fetch, write the record (flushed), then
/// `complete` (done-set + ack). Entries other consumers left pending for `claim_idle` are
/// claimed every `claim_idle / 2`. Ends when nothing is in flight or pending and nothing
/// came for `idle_exit`; on a stop signal, the fetches in flight get `grace`, the rest stay
/// pending for other consumers.
pub async fn frontier_crawl(
    ctx: &Ctx<'_>,
    f: &FrontierUrl,
    o: &FrontierOptions,
    mut stop: Stop,
    out: &SharedOut,
    totals: &Totals,
) -> Result<Ended, String> {
    let frontier = open_frontier(f).await?;
    let name = consumer_name();
    say(&format!(
        "frontier {}{} as consumer {name}",
        f.redis, f.queue
    ));
    let mut c = Consumer {
        ctx,
        frontier,
        name,
        o,
        out,
        totals,
        in_flight: FuturesUnordered::new(),
        ids: HashSet::new(),
        last_claim: None,
        last_activity: Instant::now(),
    };
    let stopped = loop {
        if stop.try_recv().is_ok() {
            break true;
        }
        if !c.step().await? {
            break false;
        }
    };
    if !stopped {
        return Ok(Ended::Complete);
    }
    say(&format!(
        "interrupted: {} in flight get {:.0} s to finish; the rest stay pending for other \
         consumers",
        c.in_flight.len(),
        o.grace.as_secs_f64()
    ));
    let drain = async {
        while let Some(done) = c.in_flight.next().await {
            c.finish(done).await?;
        }
        Ok::<_, String>(())
    };
    if let Ok(r) = actix_rt::time::timeout(o.grace, drain).await {
        r?;
    }
    Ok(Ended::Interrupted)
}

impl<'a> Consumer<'a> {
    /// Take new entries, start them, wait a little for a completion. `false`: done.
    async fn step(&mut self) -> Result<bool, String> {
        let free = self.o.concurrency.saturating_sub(self.in_flight.len());
        let (got, redis_failed) = if free > 0 {
            self.take(free).await
        } else {
            (Vec::new(), false)
        };
        if !got.is_empty() {
            self.last_activity = Instant::now();
        }
        for entry in got {
            self.start(entry).await;
        }
        if self.in_flight.is_empty() {
            if self.last_activity.elapsed() >= self.o.idle_exit {
                match self.frontier.pending().await {
                    Ok(0) => return Ok(false),
                    Ok(_) => {}
                    Err(e) => say(&format!("frontier: pending: {e}")),
                }
            }
            if redis_failed || free == 0 {
                actix_rt::time::sleep(FRONTIER_BLOCK).await;
            }
            return Ok(true);
        }
        let next = actix_rt::time::timeout(FRONTIER_POLL, self.in_flight.next()).await;
        if let Ok(Some(done)) = next {
            let id = self.finish(done).await?;
            self.ids.remove(&id);
            self.last_activity = Instant::now();
        }
        Ok(true)
    }

    /// Up to `free` entries: stale ones other consumers left (every `claim_idle / 2`),
    /// then new ones. The flag says Redis failed.
    async fn take(&mut self, free: usize) -> (Vec<FrontierEntry>, bool) {
        let mut got = Vec::new();
        let mut failed = false;
        if self
            .last_claim
            .is_none_or(|t| t.elapsed() >= self.o.claim_idle / 2)
        {
            self.last_claim = Some(Instant::now());
            match self
                .frontier
                .claim_stale(&self.name, self.o.claim_idle, free)
                .await
            {
                Ok(c) => {
                    if !c.is_empty() {
                        say(&format!("frontier: claimed {} stale entries", c.len()));
                    }
                    got.extend(c.into_iter().filter(|e| !self.ids.contains(&e.id)));
                }
                Err(e) => {
                    failed = true;
                    say(&format!("frontier: claim: {e}"));
                }
            }
        }
        if got.len() < free {
            let block = if self.in_flight.is_empty() && got.is_empty() {
                FRONTIER_BLOCK
            } else {
                Duration::ZERO
            };
            match self
                .frontier
                .next(&self.name, free - got.len(), block)
                .await
            {
                Ok(n) => got.extend(n),
                Err(e) => {
                    failed = true;
                    say(&format!("frontier: read: {e}"));
                }
            }
        }
        (got, failed)
    }

    /// Fetch an entry unless another consumer already completed its URL.
    async fn start(&mut self, entry: FrontierEntry) {
        match self.frontier.is_done(&entry.url).await {
            Ok(true) => {
                let _ = self.frontier.ack(&entry.id).await;
                return;
            }
            Ok(false) => {}
            Err(e) => say(&format!("frontier: is_done: {e}")),
        }
        self.totals.read_one();
        self.ids.insert(entry.id.clone());
        let ctx = self.ctx;
        self.in_flight.push(
            async move {
                let started = Instant::now();
                let outcome = fetch_one(ctx, entry.url.clone()).await;
                (entry, outcome, started.elapsed())
            }
            .boxed_local(),
        );
    }

    /// Write the record (flushed), then complete the entry: at-least-once.
    async fn finish(&self, (entry, outcome, waited): Done) -> Result<String, String> {
        let record = settle(self.ctx, &entry.url, outcome, waited, false)?;
        self.totals.add(&record);
        if let Some(w) = self.out.borrow_mut().as_mut() {
            write_line(w, &record)
                .and_then(|()| w.flush())
                .map_err(|e| format!("writing --out: {e}"))?;
        }
        if let Err(e) = self.frontier.complete(&entry).await {
            say(&format!(
                "frontier: completing {}: {e} (it stays pending; another consumer will redo it)",
                mask_url(&entry.url)
            ));
        }
        Ok(entry.id)
    }
}
