//! A frontier's upkeep: consumers' heartbeats, taking a dead consumer's entries over, and
//! trimming the entries every consumer is done with (see the `frontier` module docs).

use std::sync::OnceLock;
use std::time::Duration;

use ::redis::Value;

use super::shared_frontier::{same_queue, SharedFrontier, SharedFrontierEntry, GROUP};
use super::{eval_script, key, RedisError};

/// For every consumer of the group (`ARGV[2]`) but `ARGV[3]` whose heartbeat key
/// (`ARGV[4]` + name) has expired: claim its pending entries (up to `ARGV[5]` in all) for
/// `ARGV[3]`, and remove it from the group once nothing is pending for it. One script, so
/// no consumer can read new entries between the claim and the removal (a removed
/// consumer's pending entries would be lost). Returns `{removed consumers, claimed
/// entries}`; refuses (`NOGROUP`) when the queue is gone or was created again.
const CLAIM_DEAD: &str = concat!(
    same_queue!(),
    r"
local consumers = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[2])
if consumers.err then
  return redis.error_reply('NOGROUP the group ' .. ARGV[2] .. ' of ' .. KEYS[1] .. ' does not exist')
end
local budget = tonumber(ARGV[5])
local removed = 0
local claimed = {}
for _, c in ipairs(consumers) do
  local name
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1] end
  end
  if budget > 0 and name ~= ARGV[3] and redis.call('EXISTS', ARGV[4] .. name) == 0 then
    local pel = redis.call('XPENDING', KEYS[1], ARGV[2], '-', '+', budget, name)
    local ids = {}
    for _, p in ipairs(pel) do ids[#ids + 1] = p[1] end
    for i = 1, #ids, 500 do
      local part = {}
      for j = i, math.min(i + 499, #ids) do part[#part + 1] = ids[j] end
      local got = redis.call('XCLAIM', KEYS[1], ARGV[2], ARGV[3], 0, unpack(part))
      for _, e in ipairs(got) do
        if e then claimed[#claimed + 1] = e end
      end
    end
    budget = budget - #ids
    if #redis.call('XPENDING', KEYS[1], ARGV[2], '-', '+', 1, name) == 0 then
      redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[2], name)
      removed = removed + 1
    end
  end
end
return {removed, claimed}
"
);

/// Deletes the entries before the oldest one still needed: the oldest pending entry, or
/// when none is pending, the first not yet delivered. Returns how many were deleted.
const TRIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local last
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, ld
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then ld = g[i + 1] end
  end
  if name == ARGV[1] then last = ld end
end
if not last then return 0 end
local p = redis.call('XPENDING', KEYS[1], ARGV[1])
local minid
if p[1] > 0 then
  minid = p[2]
else
  local ms, seq = string.match(last, '^(%d+)-(%d+)$')
  minid = ms .. '-' .. string.format('%d', tonumber(seq) + 1)
end
return redis.call('XTRIM', KEYS[1], 'MINID', minid)
";

/// Most entries one claim pass takes; a consumer holds at most its concurrency, so this
/// is many dead consumers' worth.
pub const CLAIM_MAX: usize = 10_000;

/// What one [`SharedFrontier::claim_dead`] pass did.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The dead consumers' entries, now pending for the claimer.
    pub entries: Vec<SharedFrontierEntry>,
    /// Dead consumers removed from the group.
    pub removed: u64,
}

fn script(cell: &'static OnceLock<::redis::Script>, src: &str) -> &'static ::redis::Script {
    cell.get_or_init(|| ::redis::Script::new(src))
}

impl SharedFrontier {
    /// The key prefix of this queue's heartbeats; the consumer's name follows.
    fn alive_prefix(&self) -> String {
        format!("{}:", key("alive", &self.queue))
    }

    /// Says `consumer` is alive for `ttl` more.
    pub async fn heartbeat(&self, consumer: &str, ttl: Duration) -> Result<(), RedisError> {
        let mut cmd = ::redis::cmd("SET");
        cmd.arg(format!("{}{consumer}", self.alive_prefix()))
            .arg(std::process::id())
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64);
        self.redis.query::<()>("heartbeat", cmd).await
    }

    /// `consumer` leaves: its heartbeat is deleted, and it is removed from the group when
    /// nothing is pending for it (entries still pending are claimed by the next live
    /// consumer's pass, as a dead one's). Returns whether it was removed.
    pub async fn leave(&self, consumer: &str) -> Result<bool, RedisError> {
        let mut del = ::redis::cmd("DEL");
        del.arg(format!("{}{consumer}", self.alive_prefix()));
        self.redis.query::<()>("del", del).await?;
        // Only this consumer reads as itself, and it is leaving: nothing can become
        // pending for it between this check and the removal.
        let mut pending = ::redis::cmd("XPENDING");
        pending
            .arg(&self.stream)
            .arg(GROUP)
            .arg("-")
            .arg("+")
            .arg(1)
            .arg(consumer);
        let held: Vec<Value> = self.redis.query("xpending", pending).await?;
        if !held.is_empty() {
            return Ok(false);
        }
        let mut delc = ::redis::cmd("XGROUP");
        delc.arg("DELCONSUMER")
            .arg(&self.stream)
            .arg(GROUP)
            .arg(consumer);
        self.redis.query::<()>("xgroup delconsumer", delc).await?;
        Ok(true)
    }

    /// Moves to `consumer` every entry pending for a consumer whose heartbeat expired
    /// (at most [`CLAIM_MAX`]), and removes those consumers from the group. A consumer
    /// that never sent a heartbeat counts as dead. `NOGROUP` when the queue is gone or was
    /// created again.
    pub async fn claim_dead(&self, consumer: &str) -> Result<Claimed, RedisError> {
        static CELL: OnceLock<::redis::Script> = OnceLock::new();
        let args = [
            GROUP.to_string(),
            consumer.to_string(),
            self.alive_prefix(),
            CLAIM_MAX.to_string(),
        ];
        let reply: Value = self.guarded(script(&CELL, CLAIM_DEAD), &[], args).await?;
        parse_claimed(reply)
    }

    /// Deletes the entries every consumer is done with (before the oldest pending or
    /// undelivered one). Returns how many.
    pub async fn trim(&self) -> Result<u64, RedisError> {
        static CELL: OnceLock<::redis::Script> = OnceLock::new();
        eval_script(
            &self.redis,
            script(&CELL, TRIM),
            &[&self.stream],
            &[GROUP.to_string()],
        )
        .await
    }
}

fn parse_claimed(reply: Value) -> Result<Claimed, RedisError> {
    let bad = |what: &str| RedisError::Reply(format!("claim: {what}"));
    let Value::Array(parts) = reply else {
        return Err(bad("not an array"));
    };
    let [Value::Int(removed), Value::Array(raw)] = parts.as_slice() else {
        return Err(bad("not {removed, entries}"));
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let mut entries = Vec::with_capacity(raw.len());
    // Each entry is {id, {field, value, …}}; an entry deleted from the stream is nil.
    for e in raw {
        let Value::Array(pair) = e else { continue };
        let [id, Value::Array(fields)] = pair.as_slice() else {
            continue;
        };
        let id = text(id).ok_or_else(|| bad("entry id"))?;
        let field = |name: &str| {
            fields
                .chunks(2)
                .find(|kv| text(&kv[0]).as_deref() == Some(name))
                .and_then(|kv| kv.get(1).and_then(text))
        };
        if let Some(url) = field("url") {
            let tries = field("tries").and_then(|t| t.parse().ok()).unwrap_or(0);
            entries.push(SharedFrontierEntry { id, url, tries });
        }
    }
    Ok(Claimed {
        entries,
        removed: u64::try_from(*removed).unwrap_or(0),
    })
}
