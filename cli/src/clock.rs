//! The program's clock: the runtime's (tokio's), as the `std::time::Instant` the core's
//! functions take.
//!
//! Why not `std::time::Instant::now()`: the crawler's pacing, timeouts and pauses run on
//! tokio's clock, and the program's tests run it paused; a second clock would drift from
//! it as soon as paused time jumps (a flush interval, an idle timeout, a record's
//! duration).

use std::time::{Duration, Instant};

/// The runtime's current instant.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Time on the runtime's clock since `earlier` (zero if `earlier` is later).
pub(crate) fn since(earlier: Instant) -> Duration {
    now().saturating_duration_since(earlier)
}
