//! Which clock the site stamps arrivals with and measures its limits on.

use std::time::Instant;

/// [`SiteClock::Real`] for a site on its own thread; [`SiteClock::Runtime`] for a site
/// served on the caller's tokio runtime, so that under `tokio::time::pause()` its log, its
/// buckets and windows and its latencies all run on the same paused clock as the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SiteClock {
    Real,
    Runtime,
}

impl SiteClock {
    pub(crate) fn now(self) -> Instant {
        match self {
            SiteClock::Real => Instant::now(),
            // Outside a paused runtime this is the real clock too.
            SiteClock::Runtime => tokio::time::Instant::now().into_std(),
        }
    }
}
