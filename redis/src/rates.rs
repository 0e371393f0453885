//! `SharedRates`: the adaptive controller's rate per key, shared through Redis.
//!
//! A throttle seen by one process must lower the rate of all of them. Each rate change is
//! stored (`exitcrawl:rate:{key}`, with expiry, for processes that start later or missed
//! messages) and published on `exitcrawl:intervals` in the same atomic script. Last writer
//! wins, but for a rise ([`SharedRates::raise`]): it is stored only if the stored rate is
//! not below the rate it grew from, so a rise decided before a cut reached its writer does
//! not undo the cut. A pause is stored and published whatever becomes of the rate beside
//! it: with a rise that is refused, the pause alone. A pause stored is kept until it ends:
//! a change stored meanwhile (a pause of its own ending sooner, or none) carries it on,
//! and the key lives past its end, so a process that reads the key later still finds it;
//! the keys with a pause in force are listed in `exitcrawl:paused`
//! ([`SharedRates::paused`]). A process with a fixed rate stores and publishes a pause
//! alone ([`SharedRates::pause`]): its rate is its configuration, not news for the
//! others. Which received rates and pauses a process takes, and how its controller takes
//! them, is decided in the core ([`exitcrawl::aimd::fleet`], `Controller::adopt`).
//!
//! Message format (one line, fields separated by single spaces, the key last so it may
//! contain spaces): `{origin} {rps} {pause_until_ms} {server_now_ms} {key}`. Times are the
//! Redis server's clock in ms since the Unix epoch; `pause_until_ms = 0` means no pause;
//! `rps = 0` means no rate (a pause alone). The stored value is `{rps} {pause_until_ms}`,
//! `rps = 0` where only a pause was ever stored.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::{select, Either};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{eval_script, key, Redis, RedisError};

/// The pub/sub channel of rate changes.
pub const CHANNEL: &str = "exitcrawl:intervals";

/// Store and publish. KEYS[1] rate key, KEYS[2] the index of pauses in force; ARGV: rps
/// (string, stored as given; "0": no rate, the pause alone), pause in ms (0 = none), ttl
/// ms, origin, limiter key, channel, floor (0 = none). With a floor, a stored rate below
/// it is kept and the rate given is not published; a pause given with it is stored with
/// the stored rate and published alone all the same (it is the site's word, whatever
/// becomes of the rate). A stored pause that ends later than the one given (none: now)
/// is stored and published with the new rate. A pause alone keeps the stored rate and is
/// published without one. The key lives `ttl` past its pause's end, and a key with a
/// pause in force is in the index (score: the pause's end) until the pause ends.
/// Returns `{1, pause_until_ms, now_ms, rps}` of what was published when stored,
/// `{0, pause_until_ms, now_ms, rps}` of what is stored when not.
const SET_SCRIPT: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('GET', KEYS[1])
local cur_rps, cur_until
if cur then
  local sp = string.find(cur, ' ', 1, true)
  if sp then
    cur_rps = string.sub(cur, 1, sp - 1)
    cur_until = tonumber(string.sub(cur, sp + 1))
  end
end
local pause = tonumber(ARGV[2])
local until_ms = 0
if pause > 0 then until_ms = now + pause end
if cur_until and cur_until > now and cur_until > until_ms then until_ms = cur_until end
local u = string.format('%.0f', until_ms)
local n = string.format('%.0f', now)
local function store(rps, published)
  local ttl = tonumber(ARGV[3])
  if until_ms > now then
    ttl = ttl + until_ms - now
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', n)
    redis.call('ZADD', KEYS[2], u, ARGV[5])
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', tonumber(last[2]) + 1))
  end
  redis.call('SET', KEYS[1], rps .. ' ' .. u, 'PX', string.format('%.0f', ttl))
  redis.call('PUBLISH', ARGV[6], ARGV[4] .. ' ' .. published .. ' ' .. u .. ' ' .. n .. ' ' .. ARGV[5])
end
local floor = tonumber(ARGV[7])
if floor > 0 and cur_rps then
  local stored = tonumber(cur_rps)
  if stored and stored > 0 and stored < floor then
    if until_ms > (cur_until or 0) then store(cur_rps, '0') end
    return {0, until_ms, now, cur_rps}
  end
end
local keep = ARGV[1]
if tonumber(ARGV[1]) == 0 and cur_rps then keep = cur_rps end
store(keep, ARGV[1])
return {1, until_ms, now, ARGV[1]}
"#;

/// The keys with a pause in force, the latest to end first. KEYS[1] the index; ARGV[1]
/// how many at most. Returns `{{key, pause_until_ms, ...}, now_ms}`.
const PAUSED_SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = string.format('%.0f', now)
local r = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', '(' .. n, 'WITHSCORES', 'LIMIT', 0, ARGV[1])
return {r, now}
"#;

/// Read with the server time. Returns `{value or false, now_ms}`.
const GET_SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('GET', KEYS[1]), now}
"#;

static SET: LazyLock<::redis::Script> = LazyLock::new(|| ::redis::Script::new(SET_SCRIPT));
static GET: LazyLock<::redis::Script> = LazyLock::new(|| ::redis::Script::new(GET_SCRIPT));
static PAUSED: LazyLock<::redis::Script> = LazyLock::new(|| ::redis::Script::new(PAUSED_SCRIPT));

/// The most keys [`SharedRates::paused`] returns.
pub const PAUSED_MAX: usize = 10_000;

/// One key's shared rate, as stored or as broadcast.
#[derive(Debug, Clone, PartialEq)]
pub struct RateUpdate {
    /// The limiter key.
    pub key: String,
    /// Requests per second; 0 for no rate, a pause alone ([`Self::rate`]).
    pub rps: f64,
    /// End of a pause, server clock, ms since the epoch; 0 = no pause.
    pub pause_until_ms: u64,
    /// The server clock when this was written (or read), ms since the epoch.
    pub server_now_ms: u64,
    /// Who wrote it ([`SharedRates::origin`]); empty when read back from the stored key.
    pub origin: String,
}

impl RateUpdate {
    /// The rate, if this carries one: a pause stored alone ([`SharedRates::pause`]) does
    /// not.
    pub fn rate(&self) -> Option<f64> {
        (self.rps > 0.0).then_some(self.rps)
    }

    /// The pause left at `server_now_ms`, if any. Subtracting two server times keeps
    /// local clock skew out of it.
    pub fn pause_remaining(&self) -> Option<Duration> {
        (self.pause_until_ms > self.server_now_ms)
            .then(|| Duration::from_millis(self.pause_until_ms - self.server_now_ms))
    }

    fn parse_message(payload: &str) -> Option<Self> {
        let mut it = payload.splitn(5, ' ');
        let origin = it.next()?.to_string();
        let rps: f64 = it.next()?.parse().ok()?;
        let pause_until_ms = it.next()?.parse().ok()?;
        let server_now_ms = it.next()?.parse().ok()?;
        let key = it.next()?.to_string();
        valid_rps(rps).then_some(Self {
            key,
            rps,
            pause_until_ms,
            server_now_ms,
            origin,
        })
    }
}

/// What became of a [`SharedRates::raise`].
#[derive(Debug, Clone, PartialEq)]
pub enum Raised {
    /// Stored and published.
    Stored(RateUpdate),
    /// Not stored: the stored rate (read back, so `origin` is empty) is below the rise's
    /// `from`. Its pause is the stored one, which the rise's own pause, stored and
    /// published alone, joined.
    Refused(RateUpdate),
}

/// What a [`RateSubscription`] yields.
#[derive(Debug, Clone, PartialEq)]
pub enum RateMessage {
    /// Another process changed a key's rate.
    Update(RateUpdate),
    /// The subscription was lost and is back: messages in between are lost, so re-read the
    /// keys in use with [`SharedRates::get`].
    Resubscribed,
}

/// Rate changes from other processes. Dropping it ends the background task.
#[derive(Debug)]
pub struct RateSubscription {
    rx: mpsc::Receiver<RateMessage>,
}

impl RateSubscription {
    /// The next message; `None` once the task has ended (only after the handle that
    /// created it is gone or a bad URL, never because of an outage).
    pub async fn recv(&mut self) -> Option<RateMessage> {
        self.rx.recv().await
    }

    /// A message if one is waiting.
    pub fn try_recv(&mut self) -> Option<RateMessage> {
        self.rx.try_recv().ok()
    }
}

/// Shared per-key rates.
#[derive(Debug, Clone)]
pub struct SharedRates {
    redis: Redis,
    origin: String,
    ttl: Duration,
}

impl SharedRates {
    /// Rates on `redis`, stored for 10 minutes after each change (after the end of the
    /// pause stored with it, if that is later). Each instance gets its own
    /// origin id (process id + a counter + the time), so its own messages are not echoed.
    pub fn new(redis: Redis) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let origin = format!(
            "{}-{}-{:x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            nanos
        );
        Self {
            redis,
            origin,
            ttl: Duration::from_secs(600),
        }
    }

    /// The same, keeping stored rates for `ttl` (at least 1 ms) after each change, or
    /// after the end of its pause.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// This instance's origin id, as carried in its messages.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The Redis key of limiter key `key`: `exitcrawl:rate:{key}`.
    pub fn redis_key(key: &str) -> String {
        key_of(key)
    }

    /// Stores `rps` for `key` and publishes it, atomically. `pause` is relative: the
    /// server turns it into `pause_until_ms` on its own clock, so processes with skewed
    /// clocks agree on when it ends. A stored pause that ends later is kept. Returns what
    /// was published.
    pub async fn set(
        &self,
        key: &str,
        rps: f64,
        pause: Option<Duration>,
    ) -> Result<RateUpdate, RedisError> {
        match self.store(key, Some(rps), pause, 0.0).await? {
            Raised::Stored(u) | Raised::Refused(u) => Ok(u),
        }
    }

    /// Stores a pause alone for `key` and publishes it, atomically: the stored rate is kept
    /// (or none is stored, where none was) and the message carries no rate. What a
    /// process with a fixed rate shares: the pause is the site's word, for every process;
    /// its rate is its configuration, which no other process may take. A stored pause
    /// that ends later is kept. Returns what was published.
    pub async fn pause(&self, key: &str, pause: Duration) -> Result<RateUpdate, RedisError> {
        match self.store(key, None, Some(pause), 0.0).await? {
            Raised::Stored(u) | Raised::Refused(u) => Ok(u),
        }
    }

    /// Like [`set`](Self::set), for a rise from `from`: stored and published only if the
    /// stored rate is not below `from`. A lower one is a cut this process has not seen
    /// yet, and storing the rise over it would undo it for every process (see
    /// [`exitcrawl::aimd::fleet`]). A `pause` is stored and published either way: refused,
    /// with the stored rate kept, as a pause alone ([`pause`](Self::pause)), and the
    /// [`Raised::Refused`] value carries it.
    pub async fn raise(
        &self,
        key: &str,
        rps: f64,
        pause: Option<Duration>,
        from: f64,
    ) -> Result<Raised, RedisError> {
        self.store(key, Some(rps), pause, from).await
    }

    /// Store `rps` (none: `pause` alone, the stored rate kept) with `pause`, if the
    /// stored rate is not below `floor` (0: whatever is stored).
    async fn store(
        &self,
        key: &str,
        rps: Option<f64>,
        pause: Option<Duration>,
        floor: f64,
    ) -> Result<Raised, RedisError> {
        let rps = match rps {
            Some(r) if r.is_finite() && r > 0.0 => r,
            // The script's word for no rate.
            None if pause.is_some() => 0.0,
            Some(r) => {
                return Err(RedisError::InvalidArgument(format!(
                    "rate must be a positive number, got {r}"
                )))
            }
            None => {
                return Err(RedisError::InvalidArgument(
                    "a pause alone needs a pause".to_string(),
                ))
            }
        };
        let k = key_of(key);
        let pause_ms = pause.map_or(0, |p| p.as_millis().max(1) as u64);
        let floor = if floor.is_finite() {
            floor.max(0.0)
        } else {
            0.0
        };
        let index = paused_index();
        let (stored, pause_until_ms, server_now_ms, value): (u8, u64, u64, String) = eval_script(
            &self.redis,
            &SET,
            &[&k, &index],
            &[
                format!("{rps}"),
                pause_ms.to_string(),
                self.ttl.as_millis().to_string(),
                self.origin.clone(),
                key.to_string(),
                CHANNEL.to_string(),
                format!("{floor}"),
            ],
        )
        .await?;
        let rps = value
            .parse::<f64>()
            .ok()
            .filter(|r| valid_rps(*r))
            .ok_or_else(|| RedisError::Reply(format!("bad rate value {value:?} at {k}")))?;
        let u = RateUpdate {
            key: key.to_string(),
            rps,
            pause_until_ms,
            server_now_ms,
            origin: if stored == 1 {
                self.origin.clone()
            } else {
                String::new()
            },
        };
        Ok(if stored == 1 {
            Raised::Stored(u)
        } else {
            Raised::Refused(u)
        })
    }

    /// The stored rate of `key`, if one was set within the ttl.
    pub async fn get(&self, key: &str) -> Result<Option<RateUpdate>, RedisError> {
        let k = key_of(key);
        let (value, server_now_ms): (Option<String>, u64) =
            eval_script(&self.redis, &GET, &[&k], &[]).await?;
        let Some(value) = value else {
            return Ok(None);
        };
        let parsed = value.split_once(' ').and_then(|(r, p)| {
            let rps = r.parse().ok().filter(|r| valid_rps(*r))?;
            Some((rps, p.parse::<u64>().ok()?))
        });
        let Some((rps, pause_until_ms)) = parsed else {
            return Err(RedisError::Reply(format!(
                "bad rate value {value:?} at {k}"
            )));
        };
        Ok(Some(RateUpdate {
            key: key.to_string(),
            rps,
            pause_until_ms,
            server_now_ms,
            origin: String::new(),
        }))
    }

    /// The keys with a pause in force, whoever stored it, the latest to end first (at
    /// most [`PAUSED_MAX`]): each as a pause alone, the rate beside it not read
    /// ([`get`](Self::get) reads it). What a process that pauses keys it has not met yet
    /// reads when it starts or its subscription comes back: the pauses published
    /// meanwhile never reached it.
    pub async fn paused(&self) -> Result<Vec<RateUpdate>, RedisError> {
        let index = paused_index();
        let (found, server_now_ms): (Vec<String>, u64) =
            eval_script(&self.redis, &PAUSED, &[&index], &[PAUSED_MAX.to_string()]).await?;
        found
            .chunks(2)
            .map(|pair| {
                let parsed = match pair {
                    [key, until] => until
                        .parse::<f64>()
                        .ok()
                        .filter(|u| u.is_finite() && *u >= 0.0)
                        .map(|u| (key, u)),
                    _ => None,
                };
                let (key, until) = parsed
                    .ok_or_else(|| RedisError::Reply(format!("bad pause {pair:?} at {index}")))?;
                Ok(RateUpdate {
                    key: key.clone(),
                    rps: 0.0,
                    pause_until_ms: until as u64,
                    server_now_ms,
                    origin: String::new(),
                })
            })
            .collect()
    }

    /// Subscribes to `exitcrawl:intervals`. Returns once the subscription is confirmed
    /// (so a `set` made after this returns is seen), or the error when Redis is not
    /// reachable now.
    ///
    /// A background task (on the current tokio runtime) forwards other origins' updates;
    /// when the connection drops it reconnects with [`Backoff`](super::Backoff) and sends
    /// [`RateMessage::Resubscribed`]. It ends when the subscription is dropped.
    pub async fn subscribe(&self) -> Result<RateSubscription, RedisError> {
        let pubsub = self.connect_pubsub().await?;
        let (tx, rx) = mpsc::channel(1024);
        let this = self.clone();
        tokio::spawn(async move { this.forward(pubsub, tx).await });
        Ok(RateSubscription { rx })
    }

    async fn connect_pubsub(&self) -> Result<::redis::aio::PubSub, RedisError> {
        let client = self.redis.client().clone();
        self.redis
            .run("subscribe", Duration::ZERO, async move {
                let mut p = client.get_async_pubsub().await?;
                p.subscribe(CHANNEL).await?;
                Ok(p)
            })
            .await
    }

    /// Runs until `tx`'s receiver is dropped: every iteration either forwards messages
    /// until the connection ends, or waits one backoff delay (or the receiver closing).
    async fn forward(self, first: ::redis::aio::PubSub, tx: mpsc::Sender<RateMessage>) {
        let mut pubsub = Some(first);
        let mut backoff = self.redis.options().backoff.clone();
        while !tx.is_closed() {
            let Some(mut p) = pubsub.take() else {
                let sleep = std::pin::pin!(tokio::time::sleep(backoff.next_delay()));
                if let Either::Right(_) = select(sleep, std::pin::pin!(tx.closed())).await {
                    return;
                }
                match self.connect_pubsub().await {
                    Ok(p) => {
                        backoff.reset();
                        tracing::info!("rate subscription restored");
                        if tx.send(RateMessage::Resubscribed).await.is_err() {
                            return;
                        }
                        pubsub = Some(p);
                    }
                    Err(e) => tracing::debug!(error = %e, "rate subscription: reconnect failed"),
                }
                continue;
            };
            let mut stream = p.on_message();
            loop {
                let msg = match select(stream.next(), std::pin::pin!(tx.closed())).await {
                    Either::Left((m, _)) => m,
                    Either::Right(_) => return,
                };
                let Some(msg) = msg else {
                    tracing::warn!("rate subscription lost; reconnecting");
                    break;
                };
                let Ok(payload) = msg.get_payload::<String>() else {
                    continue;
                };
                match RateUpdate::parse_message(&payload) {
                    Some(u) if u.origin == self.origin => {}
                    Some(u) => {
                        if tx.send(RateMessage::Update(u)).await.is_err() {
                            return;
                        }
                    }
                    None => tracing::debug!(payload, "ignoring malformed rate message"),
                }
            }
        }
    }
}

fn key_of(name: &str) -> String {
    key("rate", name)
}

/// The index of the keys with a pause in force: `exitcrawl:paused`.
fn paused_index() -> String {
    format!("{}:paused", super::PREFIX)
}

/// A rate as stored or published: positive, or 0 for none (a pause alone).
fn valid_rps(rps: f64) -> bool {
    rps.is_finite() && rps >= 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_round_trip_with_spaces_in_key() {
        let u = RateUpdate::parse_message("o-1 12.5 1700000000500 1700000000000 exit a|host b")
            .unwrap();
        assert_eq!(u.origin, "o-1");
        assert_eq!(u.rps, 12.5);
        assert_eq!(u.key, "exit a|host b");
        assert_eq!(u.pause_remaining(), Some(Duration::from_millis(500)));
        let pause_alone = RateUpdate::parse_message("o 0 1700000000500 1700000000000 k");
        assert_eq!(pause_alone.expect("a pause alone").rate(), None);
        assert_eq!(u.rate(), Some(12.5));
        assert!(RateUpdate::parse_message("o -1 0 0 k").is_none());
        assert!(RateUpdate::parse_message("o x 0 0 k").is_none());
        assert!(RateUpdate::parse_message("o 1 0 0").is_none());
    }
}
