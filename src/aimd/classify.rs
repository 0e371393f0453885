//! What an answer or a failure tells the controller: the one place that decides which
//! outcomes are the site's word (a throttle), which may be a sick page (an error), and
//! which say nothing about load.

use super::Signal;
use crate::config::LimiterSettings;
use crate::headers::{Pacing, ServerHints};
use crate::outcome::Failure;
use std::time::Duration;

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

/// The signal of a request that got no answer: a timeout, a reset or a refused
/// connection is an error (a throttle only where `throttle_on_timeout` /
/// `throttle_on_reset` say so); anything else says nothing about load: a local failure
/// reached no site, one that would end the same way again (a name that does not exist, a
/// malformed answer) is about the page, not the pace, and a resolver's hiccup is the
/// resolver's, not the site's.
pub fn failure(f: Failure, limiter: &LimiterSettings) -> Signal {
    let throttle = Signal::Throttle { retry_after: None };
    match f {
        Failure::Timeout if limiter.throttle_on_timeout => throttle,
        Failure::Reset | Failure::ConnectRefused if limiter.throttle_on_reset => throttle,
        Failure::Timeout | Failure::Reset | Failure::ConnectRefused => Signal::Error,
        Failure::LocalConnect
        | Failure::OutOfFiles
        | Failure::WrongFamily
        | Failure::Proxy
        | Failure::Unresolved
        | Failure::Other => Signal::Neutral,
    }
}

/// The signal of an answer to a retry, a request for a page that failed before: its error
/// is `Neutral`. The retries a crawl sends are a sample chosen by failure (a broken page
/// is retried until its attempts run out), so their errors say how broken those pages
/// are, not how loaded the site is: counted, a site's last minute of retrying its broken
/// pages reads as a site that fails everything, and the rate is cut for nothing.
/// First attempts are the fair sample; a site that starts failing is seen there. Other
/// signals are kept: a retry's success was served at the rate, and a throttle is the
/// site's word whoever asked.
pub fn of_retry(signal: Signal) -> Signal {
    match signal {
        Signal::Error => Signal::Neutral,
        other => other,
    }
}

/// The pacing the site's headers ask for beside what the answer's `signal` carries. A
/// throttle's Retry-After is the throttle's, bound where the host's policy says (the exit
/// that read it, or the host, see `coupling`); the headers add what else they tell (a
/// quota's reset, a rate). Any other answer's Retry-After is only a header.
pub fn hints(signal: Signal, hints: &ServerHints) -> Option<Pacing> {
    match signal {
        Signal::Throttle {
            retry_after: Some(_),
        } => ServerHints {
            retry_after: None,
            ..*hints
        }
        .pacing(),
        _ => hints.pacing(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retrys_error_says_nothing_and_its_other_answers_count() {
        assert_eq!(of_retry(Signal::Error), Signal::Neutral);
        for s in [
            Signal::Success,
            Signal::Refused,
            Signal::Neutral,
            Signal::Throttle {
                retry_after: Some(Duration::from_secs(1)),
            },
        ] {
            assert_eq!(of_retry(s), s);
        }
    }

    #[test]
    fn a_throttles_retry_after_is_the_throttles_and_a_quota_reset_the_headers() {
        let ra = Some(Duration::from_secs(1));
        let throttle = Signal::Throttle { retry_after: ra };
        let only_ra = ServerHints {
            retry_after: ra,
            ..ServerHints::default()
        };
        assert_eq!(hints(throttle, &only_ra), None);
        assert_eq!(
            hints(Signal::Success, &only_ra).and_then(|p| p.pause_for),
            ra,
            "not a throttle: the header is all there is"
        );
        let spent = ServerHints {
            retry_after: ra,
            remaining: Some(0),
            reset: Some(Duration::from_secs(30)),
            ..ServerHints::default()
        };
        assert_eq!(
            hints(throttle, &spent).and_then(|p| p.pause_for),
            Some(Duration::from_secs(30)),
            "the quota's reset stays"
        );
    }

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
        for f in [Failure::Timeout, Failure::Reset, Failure::ConnectRefused] {
            assert_eq!(failure(f, &l), Signal::Error, "{f:?}");
        }
        for f in [
            Failure::LocalConnect,
            Failure::OutOfFiles,
            Failure::WrongFamily,
            Failure::Proxy,
            Failure::Unresolved,
            Failure::Other,
        ] {
            assert_eq!(failure(f, &l), Signal::Neutral, "{f:?}");
        }
        l.throttle_on_timeout = true;
        l.throttle_statuses = vec![429, 503, 520];
        assert!(matches!(
            failure(Failure::Timeout, &l),
            Signal::Throttle { .. }
        ));
        assert!(matches!(answer(520, None, &l), Signal::Throttle { .. }));
        assert_eq!(failure(Failure::Reset, &l), Signal::Error);
        l.throttle_on_reset = true;
        for f in [Failure::Reset, Failure::ConnectRefused] {
            assert!(matches!(failure(f, &l), Signal::Throttle { .. }), "{f:?}");
        }
        assert_eq!(failure(Failure::Other, &l), Signal::Neutral);
    }
}
