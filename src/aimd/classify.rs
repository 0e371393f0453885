//! What an answer or a failure tells the controller: the one place that decides which
//! outcomes are the site's word (a throttle), which may be a sick page (an error), and
//! which say nothing about load.

use super::Signal;
use crate::config::LimiterSettings;
use std::time::Duration;

/// How a request failed without an HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the timeout.
    Timeout,
    /// The connection was reset or refused by the site's side.
    Connection,
    /// Our side failed (no exit could connect, a local error): nothing about the site.
    Local,
}

/// The signal of an HTTP answer with `status`: a throttle status (`limiter.
/// throttle_statuses`, 429 and 503 by default) is the site asking us to slow down; a 403
/// may be a block (a run of them is a lockout); any other 5xx is an error that may be the
/// page's own; everything else (2xx, 3xx, 4xx) is the site serving us.
pub fn answer(status: u16, retry_after: Option<Duration>, limiter: &LimiterSettings) -> Signal {
    if limiter.is_throttle_status(status) {
        Signal::Throttle { retry_after }
    } else if status == 403 {
        Signal::Refused
    } else if status >= 500 {
        Signal::Error
    } else {
        Signal::Success
    }
}

/// The signal of a request that got no answer: an error (a throttle only where
/// `throttle_on_timeout` / `throttle_on_reset` say so), or nothing for a local failure.
pub fn failure(f: Failure, limiter: &LimiterSettings) -> Signal {
    let throttle = Signal::Throttle { retry_after: None };
    match f {
        Failure::Timeout if limiter.throttle_on_timeout => throttle,
        Failure::Connection if limiter.throttle_on_reset => throttle,
        Failure::Timeout | Failure::Connection => Signal::Error,
        Failure::Local => Signal::Neutral,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_failures_map_to_their_signals() {
        let mut l = LimiterSettings::default();
        let ra = Some(Duration::from_secs(2));
        assert_eq!(answer(429, ra, &l), Signal::Throttle { retry_after: ra });
        assert_eq!(
            answer(503, None, &l),
            Signal::Throttle { retry_after: None }
        );
        assert_eq!(answer(500, None, &l), Signal::Error);
        assert_eq!(answer(403, None, &l), Signal::Refused);
        assert_eq!(answer(404, None, &l), Signal::Success);
        assert_eq!(answer(200, None, &l), Signal::Success);
        assert_eq!(failure(Failure::Timeout, &l), Signal::Error);
        assert_eq!(failure(Failure::Connection, &l), Signal::Error);
        assert_eq!(failure(Failure::Local, &l), Signal::Neutral);
        l.throttle_on_timeout = true;
        l.throttle_statuses = vec![429, 503, 520];
        assert!(matches!(
            failure(Failure::Timeout, &l),
            Signal::Throttle { .. }
        ));
        assert!(matches!(answer(520, None, &l), Signal::Throttle { .. }));
    }
}
