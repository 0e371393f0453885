//! What an exit shares with the scheduler that chooses it: its count of active requests
//! and its own token bucket (`[[exits]] rate, burst`).
//!
//! Why shared and not behind the exit's mailbox: "which exit may send now" is the
//! selection itself, and the scheduler makes it for every fetch. Asking each exit for its
//! load and its bucket by message would cost a round trip per exit per fetch, and the
//! answer would be stale by the time it arrived. So the exit owns this state (it is built
//! with the exit and reported by its `GetCounters`), and the scheduler reads and updates
//! it in place, on whichever Arbiter the exit runs.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use exitcrawl::limiter::{Quota, RateLimiter, TokenBucket};
use prometheus_client::metrics::gauge::Gauge;

/// One exit's load and token bucket. Cheap to clone (shared).
#[derive(Clone)]
pub(crate) struct ExitShare(Arc<Inner>);

struct Inner {
    /// Requests through the exit from the moment the scheduler reserves it until the
    /// attempt is settled: the one count of "active" for the exit. It is the exit's
    /// `exitcrawl_exit_active_requests` gauge itself, so selection, `GetCounters` and
    /// `/metrics` cannot disagree.
    active: Gauge,
    /// The exit's own token bucket, when `[[exits]] rate` is set. A lock, not a cell: an
    /// exit on an Arbiter of its own holds this too. Only the scheduler's thread takes
    /// it, so it is never contended.
    bucket: Option<Mutex<TokenBucket>>,
}

impl ExitShare {
    /// `active` is the exit's metrics gauge; `quota` its `[[exits]] rate, burst`.
    pub(crate) fn new(active: Gauge, quota: Option<Quota>, now: Instant) -> Self {
        Self(Arc::new(Inner {
            active,
            bucket: quota.map(|q| Mutex::new(TokenBucket::new(q, now))),
        }))
    }

    /// Requests active through the exit.
    pub(crate) fn active(&self) -> u32 {
        u32::try_from(self.0.active.get().max(0)).unwrap_or(u32::MAX)
    }

    /// One more request through the exit (the scheduler chose it).
    pub(crate) fn reserve(&self) {
        self.0.active.inc();
    }

    /// One request through the exit settled or abandoned.
    pub(crate) fn release(&self) {
        // Never below zero: a shutdown that cut off the attempts in flight has set it
        // to zero already, and their late reports release again.
        if self.0.active.get() > 0 {
            self.0.active.dec();
        }
    }

    /// Nothing is active any more (a shutdown cut off what was in flight).
    pub(crate) fn clear(&self) {
        self.0.active.set(0);
    }

    /// How long until the exit's own bucket has a token (zero without a bucket).
    pub(crate) fn ready_in(&self, now: Instant) -> Duration {
        self.0.bucket.as_ref().map_or(Duration::ZERO, |b| {
            b.lock().unwrap_or_else(PoisonError::into_inner).peek(now)
        })
    }

    /// Take a token from the exit's own bucket (the selection saw one free).
    pub(crate) fn take_token(&self, now: Instant) {
        if let Some(b) = &self.0.bucket {
            b.lock().unwrap_or_else(PoisonError::into_inner).check(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_active_count_is_the_gauge_and_never_goes_below_zero() {
        let gauge = Gauge::default();
        let share = ExitShare::new(gauge.clone(), None, Instant::now());
        share.reserve();
        share.clone().reserve();
        assert_eq!((share.active(), gauge.get()), (2, 2));
        share.release();
        share.clear();
        share.release();
        assert_eq!((share.active(), gauge.get()), (0, 0));
    }

    #[test]
    fn the_bucket_spaces_tokens_at_its_rate_after_the_burst() {
        let t0 = Instant::now();
        let quota = Quota::new(10.0, 2);
        let share = ExitShare::new(Gauge::default(), Some(quota), t0);
        for _ in 0..2 {
            assert_eq!(share.ready_in(t0), Duration::ZERO);
            share.take_token(t0);
        }
        let wait = share.ready_in(t0);
        assert!(
            wait > Duration::from_millis(90) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        assert_eq!(
            share.ready_in(t0 + Duration::from_millis(100)),
            Duration::ZERO
        );
        let unlimited = ExitShare::new(Gauge::default(), None, t0);
        assert_eq!(unlimited.ready_in(t0), Duration::ZERO);
    }
}
