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
//! At-least-once means a URL can be fetched twice (a consumer that died after its fetch
//! and before the acknowledgement). The done-set `exitcrawl:done:{queue}` makes the
//! *final record* exactly-once:
//!
//! 1. take an entry ([`next`](SharedFrontier::next) or [`claim_dead`](SharedFrontier::claim_dead));
//! 2. skip it if [`is_done`](SharedFrontier::is_done) (acknowledge it with
//!    [`ack`](SharedFrontier::ack));
//! 3. fetch, then [`complete`](SharedFrontier::complete) it — `SADD` to the done-set and `XACK`
//!    in one transaction — or put it back for another consumer
//!    ([`requeue`](SharedFrontier::requeue)). The CLI writes the record before completing, so a
//!    crash in between leaves a record whose URL is fetched again: its `--dedupe` merge
//!    keeps one.

use std::time::Duration;

use ::redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

use super::{eval_script, key, Redis, RedisError};

/// The consumer group every crawler process reads through.
pub const GROUP: &str = "exitcrawl";

/// Most entries one `XADD` pipeline carries.
const ENQUEUE_CHUNK: usize = 500;

/// Enqueues a URL only if this crawl has neither queued nor done it; returns how many
/// of ARGV were added. Refuses (`NOGROUP`) when the stream is gone, rather than creating
/// a stream no consumer group reads.
const ENQUEUE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOGROUP the stream ' .. KEYS[1] .. ' does not exist')
end
local added = 0
for _, url in ipairs(ARGV) do
  if redis.call('SISMEMBER', KEYS[3], url) == 0 and redis.call('SADD', KEYS[2], url) == 1 then
    redis.call('XADD', KEYS[1], '*', 'url', url, 'tries', '0')
    added = added + 1
  end
end
return added
";

/// Puts an entry back at the end of the queue (ARGV: its id, its URL, its tries), once:
/// only when acknowledging the old entry takes it out of the pending list. A retry after
/// an answer that was lost (a timeout while Redis carried it out, a reset) finds it
/// acknowledged already and adds nothing (a transaction of the two would add it again).
/// Returns 1 when it was put back, 0 when it had been; refuses (`NOGROUP`) when the
/// stream is gone.
const REQUEUE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOGROUP the stream ' .. KEYS[1] .. ' does not exist')
end
if redis.call('XACK', KEYS[1], KEYS[2], ARGV[1]) == 1 then
  redis.call('XADD', KEYS[1], '*', 'url', ARGV[2], 'tries', ARGV[3])
  return 1
end
return 0
";

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
    /// Own connection for `XREADGROUP … BLOCK`, which would stall other commands.
    blocking: Redis,
    pub(super) queue: String,
    pub(super) stream: String,
    done: String,
    seen: String,
    created: bool,
}

impl SharedFrontier {
    /// The frontier `queue` on `redis`; creates the stream and the group when missing
    /// (the group starts at the beginning, so URLs enqueued earlier are delivered).
    pub async fn open(redis: &Redis, queue: &str) -> Result<Self, RedisError> {
        let mut f = Self {
            redis: redis.clone(),
            blocking: redis.dedicated()?,
            queue: queue.to_string(),
            stream: key("frontier", queue),
            done: key("done", queue),
            seen: key("seen", queue),
            created: false,
        };
        let mut cmd = ::redis::cmd("XGROUP");
        cmd.arg("CREATE")
            .arg(&f.stream)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM");
        let created: Result<(), RedisError> = f.redis.query("xgroup create", cmd).await;
        match created {
            Ok(()) => f.created = true,
            Err(RedisError::Server(e)) if e.code() == Some("BUSYGROUP") => {}
            Err(e) => return Err(e),
        }
        Ok(f)
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
    /// `NOGROUP` when the stream is gone (see [`SharedFrontier::open`]).
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
            let keys = [self.stream.as_str(), &self.seen, &self.done];
            let n: u64 = eval_script(&self.redis, script, &keys, &chunk).await?;
            added += n as usize;
        }
        Ok(added)
    }

    /// Puts `e` back at the end of the queue with `tries` counted, and acknowledges the
    /// old entry, in one script that does both only once (see [`REQUEUE`]): safe to
    /// retry. `NOGROUP` when the stream is gone (a lost queue is not recreated without
    /// its group).
    pub async fn requeue(&self, e: &SharedFrontierEntry, tries: u32) -> Result<(), RedisError> {
        static SCRIPT: std::sync::OnceLock<::redis::Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| ::redis::Script::new(REQUEUE));
        let keys = [self.stream.as_str(), GROUP];
        let args = [e.id.clone(), e.url.clone(), tries.to_string()];
        let _: u64 = eval_script(&self.redis, script, &keys, &args).await?;
        Ok(())
    }

    /// Up to `count` new entries for `consumer` (`XREADGROUP … >`), waiting up to `block`
    /// for the first one (`Duration::ZERO`: do not wait). The entries stay pending for this
    /// consumer until acknowledged. Empty when nothing came.
    pub async fn next(
        &self,
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<SharedFrontierEntry>, RedisError> {
        self.read_group(consumer, count, block, ">").await
    }

    /// Up to `count` of the entries pending for `consumer` itself (`XREADGROUP … 0`): after
    /// Redis lost an acknowledgement (a restart from an AOF a second behind), entries the
    /// consumer finished can be pending for it again, and nobody else would take them.
    pub async fn own_pending(
        &self,
        consumer: &str,
        count: usize,
    ) -> Result<Vec<SharedFrontierEntry>, RedisError> {
        self.read_group(consumer, count, Duration::ZERO, "0").await
    }

    async fn read_group(
        &self,
        consumer: &str,
        count: usize,
        block: Duration,
        from: &str,
    ) -> Result<Vec<SharedFrontierEntry>, RedisError> {
        let mut cmd = ::redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(count.max(1));
        if !block.is_zero() {
            // BLOCK 0 would mean "forever": at least 1 ms.
            cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
        }
        cmd.arg("STREAMS").arg(&self.stream).arg(from);
        let mut c = self.blocking.conn();
        let reply: Option<StreamReadReply> = self
            .blocking
            .run(
                "xreadgroup",
                block,
                async move { cmd.query_async(&mut c).await },
            )
            .await?;
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
        let mut cmd = ::redis::cmd("XACK");
        cmd.arg(&self.stream).arg(GROUP).arg(id);
        let n: u64 = self.redis.query("xack", cmd).await?;
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
        let mut cmd = ::redis::cmd("SADD");
        cmd.arg(&self.done).arg(url);
        let n: u64 = self.redis.query("sadd", cmd).await?;
        Ok(n == 1)
    }

    /// Runs `pipe` (atomic) with entry `id`'s acknowledgement at its end, whose reply is
    /// left out of the one returned.
    async fn acking<T: ::redis::FromRedisValue>(
        &self,
        op: &'static str,
        mut pipe: ::redis::Pipeline,
        id: &str,
    ) -> Result<T, RedisError> {
        pipe.cmd("XACK")
            .arg(&self.stream)
            .arg(GROUP)
            .arg(id)
            .ignore();
        let mut c = self.redis.conn();
        self.redis
            .run(
                op,
                Duration::ZERO,
                async move { pipe.query_async(&mut c).await },
            )
            .await
    }

    /// Whether `url` is in the done-set.
    pub async fn is_done(&self, url: &str) -> Result<bool, RedisError> {
        let mut cmd = ::redis::cmd("SISMEMBER");
        cmd.arg(&self.done).arg(url);
        self.redis.query("sismember", cmd).await
    }

    /// Marks the entry's URL done and acknowledges the entry, in one `MULTI`/`EXEC`.
    /// `true` when this was the URL's first completion: write its final record then.
    pub async fn complete(&self, e: &SharedFrontierEntry) -> Result<bool, RedisError> {
        let mut pipe = ::redis::pipe();
        pipe.atomic().cmd("SADD").arg(&self.done).arg(&e.url);
        let (added,): (u64,) = self.acking("complete", pipe, &e.id).await?;
        Ok(added == 1)
    }

    /// Entries delivered and not yet acknowledged, all consumers together.
    pub async fn pending(&self) -> Result<u64, RedisError> {
        let mut cmd = ::redis::cmd("XPENDING");
        cmd.arg(&self.stream).arg(GROUP);
        let v: ::redis::Value = self.redis.query("xpending", cmd).await?;
        match v {
            ::redis::Value::Array(items) => match items.first() {
                Some(::redis::Value::Int(n)) => Ok(u64::try_from(*n).unwrap_or(0)),
                other => Err(RedisError::Reply(format!("XPENDING count {other:?}"))),
            },
            other => Err(RedisError::Reply(format!("XPENDING {other:?}"))),
        }
    }

    /// URLs in the done-set.
    pub async fn done_count(&self) -> Result<u64, RedisError> {
        let mut cmd = ::redis::cmd("SCARD");
        cmd.arg(&self.done);
        self.redis.query("scard", cmd).await
    }
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
