//! `Frontier`: one URL queue shared by any number of crawler processes.
//!
//! A Redis stream (`exitcrawl:frontier:{queue}`, one entry per URL, field `url`) read
//! through the consumer group `exitcrawl`: each entry goes to one consumer and stays
//! *pending* for it until acknowledged — at-least-once delivery. A consumer that dies
//! leaves its pending entries behind; [`Frontier::claim_stale`] (`XAUTOCLAIM`) hands those
//! idle for longer than a timeout to another consumer.
//!
//! At-least-once means a URL can be fetched twice (a slow consumer's entry claimed by
//! another). The done-set `exitcrawl:done:{queue}` makes the *final record* exactly-once:
//!
//! 1. take an entry ([`next`](Frontier::next) or [`claim_stale`](Frontier::claim_stale));
//! 2. skip it if [`is_done`](Frontier::is_done) (acknowledge it with
//!    [`ack`](Frontier::ack));
//! 3. fetch, then [`complete`](Frontier::complete) it — `SADD` to the done-set and `XACK`
//!    in one transaction — and write the final record only when `complete` returns `true`
//!    (the first completion of that URL). A crash after `complete` and before the write
//!    loses that record; the `--dedupe` merge step of the CLI covers writers that write
//!    first and complete afterwards instead.

use std::time::Duration;

use ::redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

use super::{key, Redis, RedisError};

/// The consumer group every crawler process reads through.
pub const GROUP: &str = "exitcrawl";

/// Most entries one `XADD` pipeline carries.
const ENQUEUE_CHUNK: usize = 500;

/// One URL handed to a consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontierEntry {
    /// Stream entry id, for [`Frontier::ack`].
    pub id: String,
    /// The URL.
    pub url: String,
}

/// A shared frontier (see the module docs).
#[derive(Debug, Clone)]
pub struct Frontier {
    redis: Redis,
    /// Own connection for `XREADGROUP … BLOCK`, which would stall other commands.
    blocking: Redis,
    stream: String,
    done: String,
}

impl Frontier {
    /// The frontier `queue` on `redis`; creates the stream and the group when missing
    /// (the group starts at the beginning, so URLs enqueued earlier are delivered).
    pub async fn open(redis: &Redis, queue: &str) -> Result<Self, RedisError> {
        let f = Self {
            redis: redis.clone(),
            blocking: redis.dedicated()?,
            stream: key("frontier", queue),
            done: key("done", queue),
        };
        let mut c = f.redis.conn();
        let mut cmd = ::redis::cmd("XGROUP");
        cmd.arg("CREATE")
            .arg(&f.stream)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM");
        let created: Result<(), RedisError> = f
            .redis
            .run("xgroup create", Duration::ZERO, async move {
                cmd.query_async(&mut c).await
            })
            .await;
        match created {
            Ok(()) => {}
            Err(RedisError::Server(e)) if e.code() == Some("BUSYGROUP") => {}
            Err(e) => return Err(e),
        }
        Ok(f)
    }

    /// The stream key.
    pub fn stream_key(&self) -> &str {
        &self.stream
    }

    /// The done-set key.
    pub fn done_key(&self) -> &str {
        &self.done
    }

    /// Appends `urls` (pipelined, 500 per round trip). Returns how many were added. Not
    /// atomic across chunks: after an error, a prefix may be in.
    pub async fn enqueue<I, S>(&self, urls: I) -> Result<usize, RedisError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut added = 0;
        let mut urls = urls.into_iter().peekable();
        while urls.peek().is_some() {
            let mut pipe = ::redis::pipe();
            let mut n = 0;
            for url in urls.by_ref().take(ENQUEUE_CHUNK) {
                pipe.cmd("XADD")
                    .arg(&self.stream)
                    .arg("*")
                    .arg("url")
                    .arg(url.as_ref())
                    .ignore();
                n += 1;
            }
            let mut c = self.redis.conn();
            self.redis
                .run("xadd", Duration::ZERO, async move {
                    pipe.query_async::<()>(&mut c).await
                })
                .await?;
            added += n;
        }
        Ok(added)
    }

    /// Up to `count` new entries for `consumer` (`XREADGROUP … >`), waiting up to `block`
    /// for the first one (`Duration::ZERO`: do not wait). The entries stay pending for this
    /// consumer until acknowledged. Empty when nothing came.
    pub async fn next(
        &self,
        consumer: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<FrontierEntry>, RedisError> {
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
        cmd.arg("STREAMS").arg(&self.stream).arg(">");
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
        let mut c = self.redis.conn();
        let n: u64 = self
            .redis
            .run("xack", Duration::ZERO, async move {
                cmd.query_async(&mut c).await
            })
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
    ) -> Result<Vec<FrontierEntry>, RedisError> {
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
            let mut c = self.redis.conn();
            let reply: StreamAutoClaimReply = self
                .redis
                .run("xautoclaim", Duration::ZERO, async move {
                    cmd.query_async(&mut c).await
                })
                .await?;
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
        let mut c = self.redis.conn();
        let n: u64 = self
            .redis
            .run("sadd", Duration::ZERO, async move {
                cmd.query_async(&mut c).await
            })
            .await?;
        Ok(n == 1)
    }

    /// Whether `url` is in the done-set.
    pub async fn is_done(&self, url: &str) -> Result<bool, RedisError> {
        let mut cmd = ::redis::cmd("SISMEMBER");
        cmd.arg(&self.done).arg(url);
        let mut c = self.redis.conn();
        self.redis
            .run("sismember", Duration::ZERO, async move {
                cmd.query_async(&mut c).await
            })
            .await
    }

    /// Marks the entry's URL done and acknowledges the entry, in one `MULTI`/`EXEC`.
    /// `true` when this was the URL's first completion: write its final record then.
    pub async fn complete(&self, e: &FrontierEntry) -> Result<bool, RedisError> {
        let mut pipe = ::redis::pipe();
        pipe.atomic()
            .cmd("SADD")
            .arg(&self.done)
            .arg(&e.url)
            .cmd("XACK")
            .arg(&self.stream)
            .arg(GROUP)
            .arg(&e.id)
            .ignore();
        let mut c = self.redis.conn();
        let (added,): (u64,) = self
            .redis
            .run("complete", Duration::ZERO, async move {
                pipe.query_async(&mut c).await
            })
            .await?;
        Ok(added == 1)
    }

    /// Entries delivered and not yet acknowledged, all consumers together.
    pub async fn pending(&self) -> Result<u64, RedisError> {
        let mut cmd = ::redis::cmd("XPENDING");
        cmd.arg(&self.stream).arg(GROUP);
        let mut c = self.redis.conn();
        let v: ::redis::Value = self
            .redis
            .run("xpending", Duration::ZERO, async move {
                cmd.query_async(&mut c).await
            })
            .await?;
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
        let mut c = self.redis.conn();
        self.redis
            .run("scard", Duration::ZERO, async move {
                cmd.query_async(&mut c).await
            })
            .await
    }
}

fn entry(s: StreamId) -> Option<FrontierEntry> {
    let url: String = s.get("url")?;
    Some(FrontierEntry { id: s.id, url })
}
