//! `SharedFrontier`: one URL queue shared by any number of crawler processes.
//!
//! A Redis stream (`exitcrawl:frontier:{queue}`, one entry per URL, fields `url` and
//! `tries`) read through the consumer group `exitcrawl`: each entry goes to one consumer
//! and stays *pending* for it until acknowledged — at-least-once delivery. The queue name
//! is the crawl: a URL is pushed once per crawl ([`SharedFrontier::enqueue`] skips a URL already
//! queued or done, through the set `exitcrawl:seen:{queue}`), and [`SharedFrontier::recrawl`]
//! starts it over.
//!
//! Consumers keep a heartbeat key (`exitcrawl:alive:{queue}:{consumer}`, with a TTL); a
//! consumer whose key expired is dead, and [`SharedFrontier::claim_dead`] moves its whole
//! pending list to a live consumer in one step and removes it from the group. Nothing is
//! taken from a live consumer, however long its entries have been pending.
//! [`SharedFrontier::trim`] drops the entries every consumer is done with.
//!
//! A queue lost (Redis restarted without persistence, keys deleted) is gone for its
//! consumers: their calls get `NOGROUP`. Another process's [`SharedFrontier::open`] may
//! create it again, empty; so creating it also writes a new value to
//! `exitcrawl:epoch:{queue}`, each handle keeps the value it opened with, and what a
//! handle does for the work it took (read, acknowledge, complete, requeue, claim, enqueue,
//! count what is pending) is refused with `NOGROUP` under another epoch, as if the queue
//! were still gone: an entry put back into the new queue would otherwise vanish (its old id
//! is not pending there), a consumer finding nothing pending would end as done, and one
//! reading would take the new queue's entries while what it owes for them is refused.
//!
//! At-least-once means a URL can be fetched twice (a consumer that died after its fetch
//! and before the acknowledgement). The done-set `exitcrawl:done:{queue}` makes the
//! *final record* exactly-once:
//!
//! 1. take an entry ([`next`](SharedFrontier::next) or [`claim_dead`](SharedFrontier::claim_dead));
//! 2. skip it if [`is_done`](SharedFrontier::is_done) (acknowledge it with
//!    [`ack`](SharedFrontier::ack));
//! 3. fetch, then [`complete`](SharedFrontier::complete) it — `SADD` to the done-set and `XACK`
//!    in one transaction — or put it back for another consumer
//!    ([`requeue`](SharedFrontier::requeue)). The CLI writes the record, and syncs it to the
//!    disk, before completing, so a crash in between leaves a record whose URL is fetched
//!    again: its `--dedupe` merge keeps one.

use std::time::Duration;

use ::redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

use super::{eval_script, key, Redis, RedisError};

/// The consumer group every crawler process reads through.
pub const GROUP: &str = "exitcrawl";

/// Most entries one `XADD` pipeline carries.
const ENQUEUE_CHUNK: usize = 500;

/// How often [`SharedFrontier::next`] reads the queue again while it waits for an entry.
const READ_POLL: Duration = Duration::from_millis(50);

/// The start of every script that acts for what a handle took since its
/// [`SharedFrontier::open`] (`KEYS[1]` the stream, `KEYS[2]` the epoch key, `ARGV[1]` the
/// epoch that open saw): refuses with `NOGROUP` when the stream is gone, or when it was
/// lost and created again since (another epoch). A queue created again is empty: the
/// entries the handle took are not in it, so the caller must hear that the queue was lost,
/// as if it were still gone.
macro_rules! same_queue {
    () => {
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOGROUP the stream ' .. KEYS[1] .. ' does not exist')
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return redis.error_reply('NOGROUP the stream ' .. KEYS[1] .. ' was lost and created again empty since this process opened it')
end
"
    };
}
pub(crate) use same_queue;

/// Creates the stream (`KEYS[1]`) and the group (`ARGV[1]`) when missing, and with them a
/// new epoch (`ARGV[2]`) in `KEYS[2]`; otherwise keeps the epoch there (setting it when a
/// queue has none yet). Returns `{1 if created, the epoch}`. One script, so that two
/// processes opening together agree on the epoch.
const OPEN: &str = r"
local made = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(made) == 'table' and made.err then
  if string.find(made.err, 'BUSYGROUP', 1, true) ~= 1 then return made end
  redis.call('SET', KEYS[2], ARGV[2], 'NX')
  return {0, redis.call('GET', KEYS[2])}
end
redis.call('SET', KEYS[2], ARGV[2])
return {1, ARGV[2]}
";

/// Enqueues a URL (`ARGV[2]`…) only if this crawl has neither queued (`KEYS[3]`) nor done
/// (`KEYS[4]`) it; returns how many were added. Refuses (`NOGROUP`) when the stream is
/// gone, rather than creating a stream no consumer group reads.
const ENQUEUE: &str = concat!(
    same_queue!(),
    r"
local added = 0
for i = 2, #ARGV do
  local url = ARGV[i]
  if redis.call('SISMEMBER', KEYS[4], url) == 0 and redis.call('SADD', KEYS[3], url) == 1 then
    redis.call('XADD', KEYS[1], '*', 'url', url, 'tries', '0')
    added = added + 1
  end
end
return added
"
);

/// Puts an entry back at the end of the queue (ARGV: the group, its id, its URL, its
/// tries), once: only when acknowledging the old entry takes it out of the pending list.
/// A retry after an answer that was lost (a timeout while Redis carried it out, a reset)
/// finds it acknowledged already and adds nothing (a transaction of the two would add it
/// again). Returns 1 when it was put back, 0 when it had been; refuses (`NOGROUP`) when
/// the queue is gone or was created again.
const REQUEUE: &str = concat!(
    same_queue!(),
    r"
if redis.call('XACK', KEYS[1], ARGV[2], ARGV[3]) == 1 then
  redis.call('XADD', KEYS[1], '*', 'url', ARGV[4], 'tries', ARGV[5])
  return 1
end
return 0
"
);

/// Adds a URL (`ARGV[3]`) to the done-set (`KEYS[3]`) and, when an entry id follows
/// (`ARGV[4]`), acknowledges it in the group (`ARGV[2]`). Returns 1 when the URL was not
/// done yet.
const COMPLETE: &str = concat!(
    same_queue!(),
    r"
local added = redis.call('SADD', KEYS[3], ARGV[3])
if ARGV[4] then redis.call('XACK', KEYS[1], ARGV[2], ARGV[4]) end
return added
"
);

/// Acknowledges entry `ARGV[3]` in the group `ARGV[2]`; returns 1 when it was pending.
const ACK: &str = concat!(
    same_queue!(),
    r"
return redis.call('XACK', KEYS[1], ARGV[2], ARGV[3])
"
);

/// Up to `ARGV[4]` entries of the group `ARGV[2]` for consumer `ARGV[3]`, read from
/// `ARGV[5]` (`>`: new entries; `0`: the consumer's own pending ones); nil when there are
/// none. Refused (`NOGROUP`) when the queue is gone or was created again: a read would
/// make the consumer one of the new queue's group and its entries pending for it. Never
/// blocks (a script cannot).
const READ: &str = concat!(
    same_queue!(),
    r"
return redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS', KEYS[1], ARGV[5])
"
);

/// How many entries of the group `ARGV[2]` are pending, all consumers together.
const PENDING: &str = concat!(
    same_queue!(),
    r"
return redis.call('XPENDING', KEYS[1], ARGV[2])[1]
"
);

/// One URL handed to a consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFrontierEntry {
    /// Stream entry id, for [`SharedFrontier::ack`].
    pub id: String,
    /// The URL.
    pub url: String,
    /// How many times a consumer failed it locally and put it back (0 when enqueued).
    pub tries: u32,
}

/// A shared frontier (see the module docs).
#[derive(Debug, Clone)]
pub struct SharedFrontier {
    pub(super) redis: Redis,
    pub(super) queue: String,
    pub(super) stream: String,
    done: String,
    seen: String,
    /// `exitcrawl:epoch:{queue}`: a value written when the queue is created, which tells
    /// this queue from one created again under its name.
    epoch_key: String,
    /// The epoch [`SharedFrontier::open`] saw.
    epoch: String,
    created: bool,
}

impl SharedFrontier {
    /// The frontier `queue` on `redis`; creates the stream and the group when missing
    /// (the group starts at the beginning, so URLs enqueued earlier are delivered), with a
    /// new epoch. What this handle does later for the work it took (reads,
    /// acknowledgements, requeues, claims, enqueues, the pending count) is refused with
    /// `NOGROUP` once the queue is gone, or was lost and created again by another
    /// process's `open`.
    pub async fn open(redis: &Redis, queue: &str) -> Result<Self, RedisError> {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(OPEN));
        let stream = key("frontier", queue);
        let epoch_key = key("epoch", queue);
        let (created, epoch): (i64, String) = eval_script(
            redis,
            script,
            &[&stream, &epoch_key],
            &[GROUP.to_string(), fresh_epoch()],
        )
        .await?;
        Ok(Self {
            redis: redis.clone(),
            queue: queue.to_string(),
            stream,
            done: key("done", queue),
            seen: key("seen", queue),
            epoch_key,
            epoch,
            created: created == 1,
        })
    }

    /// Runs `script` (one that starts with [`same_queue`]) with the stream, the epoch key
    /// and `keys`, and the epoch followed by `args`.
    pub(super) async fn guarded<T: ::redis::FromRedisValue>(
        &self,
        script: &::redis::Script,
        keys: &[&str],
        args: impl IntoIterator<Item = String>,
    ) -> Result<T, RedisError> {
        let mut all_keys = vec![self.stream.as_str(), &self.epoch_key];
        all_keys.extend_from_slice(keys);
        let all_args: Vec<String> = std::iter::once(self.epoch.clone()).chain(args).collect();
        eval_script(&self.redis, script, &all_keys, &all_args).await
    }

    /// Whether [`SharedFrontier::open`] created the stream and its group (nothing was enqueued
    /// in this crawl before, or Redis lost it).
    pub fn created(&self) -> bool {
        self.created
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Starts the crawl over: deletes the stream, the done-set and the set of enqueued
    /// URLs, then creates the stream and its group again. Returns the URLs that were done.
    pub async fn recrawl(&mut self) -> Result<u64, RedisError> {
        let done = self.done_count().await?;
        let mut cmd = ::redis::cmd("DEL");
        cmd.arg(&self.stream).arg(&self.done).arg(&self.seen);
        self.redis.query::<()>("del", cmd).await?;
        *self = Self::open(&self.redis, &self.queue.clone()).await?;
        Ok(done)
    }

    /// The stream key.
    pub fn stream_key(&self) -> &str {
        &self.stream
    }

    /// The done-set key.
    pub fn done_key(&self) -> &str {
        &self.done
    }

    /// Appends the `urls` this crawl has neither queued nor done yet (one script per 500
    /// URLs). Returns how many were added; the others were skipped. Not atomic across
    /// chunks: after an error, a prefix may be in (enqueueing again adds only the rest).
    /// `NOGROUP` when the queue is gone or was created again (see [`SharedFrontier::open`]).
    pub async fn enqueue<I, S>(&self, urls: I) -> Result<usize, RedisError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(ENQUEUE));
        let mut added = 0;
        let mut urls = urls.into_iter().peekable();
        while urls.peek().is_some() {
            let chunk: Vec<String> = urls
                .by_ref()
                .take(ENQUEUE_CHUNK)
                .map(|u| u.as_ref().to_string())
                .collect();
            let n: u64 = self
                .guarded(script, &[&self.seen, &self.done], chunk)
                .await?;
            added += n as usize;
        }
        Ok(added)
    }

    /// Puts `e` back at the end of the queue with `tries` counted, and acknowledges the
    /// old entry, in one script that does both only once (see `REQUEUE`): safe to
    /// retry. `NOGROUP` when the queue is gone or was created again: the entry is not in
    /// it, and putting its URL into another crawl's queue is not this handle's to do.
    pub async fn requeue(&self, e: &SharedFrontierEntry, tries: u32) -> Result<(), RedisError> {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(REQUEUE));
        let args = [
            GROUP.to_string(),
            e.id.clone(),
            e.url.clone(),
            tries.to_string(),
        ];
        let _: u64 = self.guarded(script, &[], args).await?;
        Ok(())
    }

    /// Up to `count` new entries for `consumer` (`XREADGROUP … >`), waiting up to `block`
    /// for the first one (`Duration::ZERO`: do not wait). The entries stay pending for this
    /// consumer until acknowledged. Empty when nothing came. `NOGROUP` when the queue is
    /// gone or was created again: nothing is read, and `consumer` is not made one of the
    /// new queue's group.
    ///
    /// The read and the check of the queue's epoch are one script, which cannot block:
    /// while nothing comes, the queue is read again every 50 ms until `block` has passed.
    pub async fn next(
        &self,
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<SharedFrontierEntry>, RedisError> {
        let until = tokio::time::Instant::now() + block;
        loop {
            let got = self.read_group(consumer, count, ">").await?;
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if !got.is_empty() || left.is_zero() {
                return Ok(got);
            }
            tokio::time::sleep(left.min(READ_POLL)).await;
        }
    }

    /// Up to `count` of the entries pending for `consumer` itself (`XREADGROUP … 0`): after
    /// Redis lost an acknowledgement (a restart from an AOF a second behind), entries the
    /// consumer finished can be pending for it again, and nobody else would take them.
    /// `NOGROUP` when the queue is gone or was created again, as [`SharedFrontier::next`].
    pub async fn own_pending(
        &self,
        consumer: &str,
        count: usize,
    ) -> Result<Vec<SharedFrontierEntry>, RedisError> {
        self.read_group(consumer, count, "0").await
    }

    async fn read_group(
        &self,
        consumer: &str,
        count: usize,
        from: &str,
    ) -> Result<Vec<SharedFrontierEntry>, RedisError> {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(READ));
        let args = [
            GROUP.to_string(),
            consumer.to_string(),
            count.max(1).to_string(),
            from.to_string(),
        ];
        let reply: Option<StreamReadReply> = self.guarded(script, &[], args).await?;
        Ok(reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .filter_map(entry)
            .collect())
    }

    /// Acknowledges entry `id` (it leaves the pending list). `false` when it was not
    /// pending (already acknowledged, or claimed and acknowledged by another consumer).
    pub async fn ack(&self, id: &str) -> Result<bool, RedisError> {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(ACK));
        let n: u64 = self
            .guarded(script, &[], [GROUP.to_string(), id.to_string()])
            .await?;
        Ok(n == 1)
    }

    /// Moves to `consumer` up to `count` entries pending for longer than `min_idle` with
    /// any consumer (`XAUTOCLAIM`), scanning the whole pending list in at most
    /// `count / 100 + 16` round trips. Claimed entries whose stream entry was deleted are
    /// dropped from the pending list by Redis and not returned.
    pub async fn claim_stale(
        &self,
        consumer: &str,
        min_idle: Duration,
        count: usize,
    ) -> Result<Vec<SharedFrontierEntry>, RedisError> {
        let count = count.max(1);
        let mut out = Vec::new();
        let mut cursor = "0-0".to_string();
        for _ in 0..(count / 100 + 16) {
            let mut cmd = ::redis::cmd("XAUTOCLAIM");
            cmd.arg(&self.stream)
                .arg(GROUP)
                .arg(consumer)
                .arg(min_idle.as_millis() as u64)
                .arg(&cursor)
                .arg("COUNT")
                .arg((count - out.len()).min(100));
            let reply: StreamAutoClaimReply = self.redis.query("xautoclaim", cmd).await?;
            out.extend(reply.claimed.into_iter().filter_map(entry));
            cursor = reply.next_stream_id;
            if cursor == "0-0" || out.len() >= count {
                break;
            }
        }
        Ok(out)
    }

    /// Adds `url` to the done-set; `true` when it was not there yet.
    pub async fn mark_done(&self, url: &str) -> Result<bool, RedisError> {
        self.done_with(url, None).await
    }

    /// Adds `url` to the done-set and acknowledges entry `id` if given, in one script.
    async fn done_with(&self, url: &str, id: Option<&str>) -> Result<bool, RedisError> {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(COMPLETE));
        let args = [GROUP, url].into_iter().chain(id).map(str::to_string);
        let n: u64 = self.guarded(script, &[&self.done], args).await?;
        Ok(n == 1)
    }

    /// Whether `url` is in the done-set.
    pub async fn is_done(&self, url: &str) -> Result<bool, RedisError> {
        let mut cmd = ::redis::cmd("SISMEMBER");
        cmd.arg(&self.done).arg(url);
        self.redis.query("sismember", cmd).await
    }

    /// Marks the entry's URL done and acknowledges the entry, in one script. `true` when
    /// this was the URL's first completion: write its final record then. `NOGROUP` when
    /// the queue is gone or was created again (nothing is marked in the new one).
    pub async fn complete(&self, e: &SharedFrontierEntry) -> Result<bool, RedisError> {
        self.done_with(&e.url, Some(&e.id)).await
    }

    /// Entries delivered and not yet acknowledged, all consumers together. `NOGROUP` when
    /// the queue is gone or was created again: a consumer that finds nothing pending
    /// ends as done, and the entries it held in the lost queue are not done.
    pub async fn pending(&self) -> Result<u64, RedisError> {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(PENDING));
        self.guarded(script, &[], [GROUP.to_string()]).await
    }

    /// URLs in the done-set.
    pub async fn done_count(&self) -> Result<u64, RedisError> {
        let mut cmd = ::redis::cmd("SCARD");
        cmd.arg(&self.done);
        self.redis.query("scard", cmd).await
    }
}

/// A value unlike any earlier epoch of a queue: the time in nanoseconds, and 64 bits of
/// it hashed with the process id by std's randomly keyed hasher (a clock set back, or a
/// process on another machine, gives an equal value only by chance).
fn fresh_epoch() -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    format!("{nanos:x}-{:016x}", h.finish())
}

fn entry(s: StreamId) -> Option<SharedFrontierEntry> {
    let url: String = s.get("url")?;
    let tries = s.get("tries").unwrap_or(0);
    Some(SharedFrontierEntry {
        id: s.id,
        url,
        tries,
    })
}
