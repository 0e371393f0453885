//! `RedisGcra`: the core's GCRA (see `exitcrawl::limiter::gcra`) as one Lua script, shared
//! by every process that talks to the same Redis.

use std::sync::LazyLock;
use std::time::Duration;

use exitcrawl::Decision;

use super::{eval_script, key, Redis, RedisError};

/// The whole check in one atomic script: read the theoretical arrival time (TAT), decide,
/// advance it, set the expiry.
///
/// - The clock is the server's `TIME` (µs), never the caller's: processes on machines
///   with skewed clocks share one timeline.
/// - Burst tolerance `tau = T × (B − 1)` with emission interval `T`: exactly `B` requests
///   may go at once. Public GCRA scripts often compute it as `period × burst` (that is
///   `T × B`), which lets `B + 1` go at once — a known off-by-one; do not "fix" it back.
/// - An admitted request moves TAT to `max(TAT, now) + T`; a refused one changes nothing
///   and returns the exact wait until it would conform (`TAT − tau − now`).
/// - `PX` on the key = the time until TAT falls back to `now`: from then on a missing key
///   and the stored one mean the same (a full burst), so idle keys vanish without changing
///   any answer.
///
/// Returns `{allowed (1|0), wait_us, now_us}`.
const SCRIPT: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tau = interval * (tonumber(ARGV[2]) - 1)
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local conforms_at = tat - tau
if conforms_at > now then
  return {0, conforms_at - now, now}
end
local new_tat = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
return {1, 0, now}
"#;

static GCRA: LazyLock<::redis::Script> = LazyLock::new(|| ::redis::Script::new(SCRIPT));

/// The answer of [`RedisGcra::check_detailed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Allow, or the exact wait.
    pub decision: Decision,
    /// The server's clock when the script ran, µs since the Unix epoch. Scripts run one at
    /// a time, so these are in admission order across all processes.
    pub server_time_us: u64,
}

/// A GCRA limiter whose state (one timestamp per key) lives in Redis.
#[derive(Debug, Clone)]
pub struct RedisGcra {
    redis: Redis,
}

impl RedisGcra {
    /// A limiter on `redis` (shares its connection and outage state).
    pub fn new(redis: Redis) -> Self {
        Self { redis }
    }

    /// The Redis key of limiter key `key`: `exitcrawl:gcra:{key}`.
    pub fn redis_key(key: &str) -> String {
        key_of(key)
    }

    /// One check for `key` at `rps` with `burst`: [`Decision::Allow`] (the permit is taken)
    /// or [`Decision::Wait`] with the exact time until a check would pass (nothing taken).
    ///
    /// The emission interval is `1/rps` rounded up to the µs, so the rate is never
    /// exceeded. Changing `rps` between calls takes effect from the next admission (the
    /// stored TAT keeps the debt of earlier ones). An error means: fall back to a local
    /// limit (see the module docs).
    pub async fn check(&self, key: &str, rps: f64, burst: u32) -> Result<Decision, RedisError> {
        Ok(self.check_detailed(key, rps, burst).await?.decision)
    }

    /// [`check`](Self::check), with the server time of the decision.
    pub async fn check_detailed(
        &self,
        key: &str,
        rps: f64,
        burst: u32,
    ) -> Result<Checked, RedisError> {
        let interval = interval_us(rps)?;
        if burst == 0 {
            return Err(RedisError::InvalidArgument("burst must be ≥ 1".into()));
        }
        let k = key_of(key);
        let (allowed, wait_us, now_us): (i64, i64, i64) = eval_script(
            &self.redis,
            &GCRA,
            &[&k],
            &[interval.to_string(), burst.to_string()],
        )
        .await?;
        let (Ok(wait_us), Ok(server_time_us)) = (u64::try_from(wait_us), u64::try_from(now_us))
        else {
            return Err(RedisError::Reply(format!(
                "gcra returned wait {wait_us}, time {now_us}"
            )));
        };
        let decision = match allowed {
            1 => Decision::Allow,
            0 => Decision::Wait(Duration::from_micros(wait_us)),
            other => return Err(RedisError::Reply(format!("gcra returned allowed={other}"))),
        };
        Ok(Checked {
            decision,
            server_time_us,
        })
    }
}

fn key_of(name: &str) -> String {
    key("gcra", name)
}

/// `1/rps` in whole µs, rounded up (never faster than asked), at least 1 µs.
pub(crate) fn interval_us(rps: f64) -> Result<u64, RedisError> {
    if !(rps.is_finite() && rps > 0.0) {
        return Err(RedisError::InvalidArgument(format!(
            "rate must be a positive number, got {rps}"
        )));
    }
    // Largest interval kept below 2^53 µs so the script's doubles stay exact.
    Ok((1e6 / rps).ceil().clamp(1.0, 9.0e15) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_rounds_up_and_rejects_nonsense() {
        assert_eq!(interval_us(200.0).unwrap(), 5_000);
        assert_eq!(interval_us(300.0).unwrap(), 3_334);
        assert_eq!(interval_us(1e9).unwrap(), 1);
        assert!(interval_us(0.0).is_err());
        assert!(interval_us(f64::NAN).is_err());
        assert!(interval_us(-1.0).is_err());
    }

    #[test]
    fn script_uses_burst_minus_one() {
        assert!(SCRIPT.contains("interval * (tonumber(ARGV[2]) - 1)"));
        assert!(SCRIPT.contains("redis.call('TIME')"));
    }
}
