//! The crawler's clock: the runtime's (tokio's), read as the `std::time::Instant` every
//! core decision takes as its `now`.
//!
//! Every timing decision the actors and the program make — pacing, token buckets,
//! Retry-After pauses, health ejections, timeouts, robots.txt delays, flush intervals,
//! idle timeouts, a record's duration — reads this clock (`exitcrawl-redis` reads the
//! same one for its outage backoff), and every timer they arm is a tokio timer. Both follow
//! `tokio::time::pause()`, so a test on a paused runtime drives the whole crawler in
//! virtual time; reading `std::time::Instant` instead would mix two clocks that drift
//! apart as soon as paused time jumps. Outside a runtime, or on a runtime that is not
//! paused, this is the real monotonic clock.
//!
//! Calendar dates (WARC-Date, cookie expiry, Retry-After as an HTTP date, the Redis GCRA
//! shared across processes) are `SystemTime` and stay so: they are not this clock's.

use std::time::{Duration, Instant};

/// The runtime's current instant, as the `std::time::Instant` the core's decisions take.
pub fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Time on the runtime's clock since `earlier` (zero if `earlier` is later).
pub fn since(earlier: Instant) -> Duration {
    now().saturating_duration_since(earlier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn follows_paused_time() {
        tokio::time::pause();
        let t0 = now();
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(now() - t0, Duration::from_secs(90));
    }
}
