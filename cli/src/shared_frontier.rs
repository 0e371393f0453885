//! The shared Redis frontier: `--enqueue` pushes the URLs a crawl has not queued yet
//! (`--recrawl` starts the crawl over); `--frontier` consumes them ([`super::consumer`]).

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::time::Duration;

use exitcrawl::shared_frontier::{Next, RedisFault, RedisWait};
use exitcrawl_net::clock;
use exitcrawl_redis::{Redis, RedisError, RedisOptions, SharedFrontier};

use super::source::{url_line, FrontierUrl, UrlSource};
use super::term::say;
use super::Failure;

/// URLs pushed per `SharedFrontier::enqueue` call by `--enqueue`.
const ENQUEUE_BATCH: usize = 10_000;

/// The consumer name: `hostname-pid-start`, `start` the process's start time in
/// nanoseconds (hex, low 32 bits).
///
/// Why more than host and pid: containers that share the node's network namespace
/// (Docker `--network host`, Kubernetes `hostNetwork`) share its hostname, and each
/// runs its crawler as pid 1. Two live consumers of one name share one pending list: each
/// takes the other's entries as its own, and the one that leaves deletes the heartbeat
/// the other still lives by.
pub fn consumer_name() -> String {
    let host = hostname().unwrap_or_else(|| "host".into());
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u32);
    format!("{host}-{}-{start:08x}", std::process::id())
}

/// This machine's name, if it has one.
pub fn hostname() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .or_else(|| std::env::var("HOSTNAME").ok())
}

/// What kind of failure `e` is, for [`RedisWait`].
pub fn fault(e: &RedisError) -> RedisFault {
    if e.is_outage() {
        return RedisFault::Unreachable;
    }
    match e.code() {
        Some("NOGROUP") => RedisFault::QueueLost,
        Some("LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN") => RedisFault::Busy,
        _ => RedisFault::Refused,
    }
}

/// Why a consumer cannot go on with Redis, for the user: what happened, and what is
/// true of the URLs. `cause`: the last error of the outage that reached the network (the
/// calls refused while waiting for the next attempt say only that).
pub fn fatal_message(
    f: &FrontierUrl,
    e: &RedisError,
    cause: Option<&str>,
    wait: &RedisWait,
) -> String {
    let q = f.shown();
    let cause = cause.map_or_else(|| e.to_string(), str::to_string);
    match fault(e) {
        RedisFault::QueueLost => format!(
            "frontier {q}: the queue is gone ({e}): Redis lost its data (restarted without \
             persistence?) or the queue was deleted, and the URLs not fetched yet went with \
             it. Run Redis with appendonly yes for a frontier that must survive restarts; \
             to go on, enqueue the URLs again"
        ),
        RedisFault::Refused => format!("frontier {q}: Redis refused a command: {e}"),
        RedisFault::Unreachable | RedisFault::Busy if wait.wait().is_zero() => {
            format!("frontier {q}: Redis does not answer: {cause}")
        }
        RedisFault::Unreachable | RedisFault::Busy => format!(
            "frontier {q}: Redis did not answer for {:.0} s (--redis-wait {}): {cause}",
            wait.down_since()
                .map_or(wait.wait(), clock::since)
                .as_secs_f64(),
            wait.wait().as_secs_f64()
        ),
    }
}

/// Open the frontier, retrying an unreachable or loading Redis as [`RedisWait`] says.
pub async fn open_frontier(
    f: &FrontierUrl,
    wait: &mut RedisWait,
) -> Result<SharedFrontier, String> {
    let opts = RedisOptions {
        outage_note: "the frontier waits for it (--redis-wait)",
        ..RedisOptions::default()
    };
    let redis =
        Redis::connect(&f.redis, opts).map_err(|e| format!("--frontier {}: {e}", f.redis))?;
    waited(f, wait, || SharedFrontier::open(&redis, &f.queue)).await
}

/// `call` until it succeeds, retrying an unreachable or loading Redis as [`RedisWait`]
/// says (the wait said once on stderr); `Err` says why the frontier cannot be used.
pub async fn waited<T, F, Fut>(
    f: &FrontierUrl,
    wait: &mut RedisWait,
    mut call: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, RedisError>>,
{
    let mut said = false;
    let mut cause: Option<String> = None;
    loop {
        let e = match call().await {
            Ok(v) => {
                wait.succeeded(clock::now());
                return Ok(v);
            }
            Err(e) => e,
        };
        if !matches!(e, RedisError::Unavailable { .. }) {
            cause = Some(e.to_string());
        }
        match wait.failed(fault(&e), clock::now()) {
            Next::RetryIn(d) => {
                if !said {
                    say(&format!(
                        "frontier {}: Redis does not answer ({e}); retrying for up to {:.0} s",
                        f.shown(),
                        wait.wait().as_secs_f64()
                    ));
                    said = true;
                }
                actix_rt::time::sleep(d).await;
            }
            Next::GiveUp { .. } | Next::Fatal => {
                return Err(fatal_message(f, &e, cause.as_deref(), wait))
            }
        }
    }
}

/// What `--enqueue` did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Enqueued {
    pub added: usize,
    /// URLs this crawl had already queued or done (not pushed again).
    pub skipped: usize,
}

/// `--enqueue FILE --frontier URL [--recrawl]`: push every URL line this crawl has not
/// queued or done yet; with `recrawl`, start the crawl over first.
pub async fn enqueue(
    urls: &UrlSource,
    f: &FrontierUrl,
    recrawl: bool,
) -> Result<Enqueued, Failure> {
    let input: Box<dyn BufRead> = match urls {
        UrlSource::File(p) => {
            Box::new(BufReader::new(File::open(p).map_err(|e| {
                Failure::Usage(format!("--enqueue {}: {e}", p.display()))
            })?))
        }
        _ => Box::new(BufReader::new(io::stdin().lock())),
    };
    // Enqueueing is a one-off: a Redis that is away is said at once, not waited for.
    let mut no_wait = RedisWait::new(Duration::ZERO);
    let mut frontier = open_frontier(f, &mut no_wait)
        .await
        .map_err(Failure::Output)?;
    if recrawl {
        let done = frontier
            .recrawl()
            .await
            .map_err(|e| Failure::Output(format!("--recrawl {}: {e}", f.shown())))?;
        say(&format!(
            "--recrawl: started {} over (the earlier crawl had {done} URLs done)",
            f.shown()
        ));
    }
    let mut n = Enqueued::default();
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
            let len = batch.len();
            let added = frontier.enqueue(batch.drain(..)).await.map_err(|e| {
                Failure::Output(format!(
                    "--enqueue {}: {e} ({} enqueued before)",
                    f.shown(),
                    n.added
                ))
            })?;
            n.added += added;
            n.skipped += len - added;
        }
        if end {
            return Ok(n);
        }
    }
}
