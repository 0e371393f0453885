//! Whose fault a failed fetch was, for the consumer's [`LocalJudge`]: the consumer's own
//! (its exits, network or settings), a timeout or name lookup that may be either, or the
//! site's.
//!
//! [`LocalJudge`]: exitcrawl::shared_frontier::LocalJudge

use exitcrawl::shared_frontier::Blame;
use exitcrawl_actors::FetchErrorKind;

use crate::fetch::Outcome;
use crate::record::mask_text;

/// Why `outcome` ended as it did, for the judge: `None` when the fetch never took place
/// (stopped), with the error text when it failed.
pub fn blame(outcome: &Outcome) -> Option<(Blame, String)> {
    let e = match outcome {
        Outcome::Answer(..) | Outcome::Robots(None) => {
            return Some((Blame::Answered, String::new()))
        }
        Outcome::Robots(Some(why)) => return Some((robots_blame(why), why.clone())),
        Outcome::Unreachable(kind, why) => return Some((kind_blame(*kind), why.clone())),
        Outcome::Stopped => return None,
        Outcome::Failed(e) => e,
    };
    let why = mask_text(&e.record_error(), &e.url);
    let blame = match e.kind {
        FetchErrorKind::Shutdown => return None,
        kind => kind_blame(kind),
    };
    Some((blame, why))
}

fn kind_blame(kind: FetchErrorKind) -> Blame {
    match kind {
        FetchErrorKind::LocalConnect
        | FetchErrorKind::Proxy
        | FetchErrorKind::NoHealthyExit
        | FetchErrorKind::AddressFamily => Blame::Local,
        FetchErrorKind::Timeout | FetchErrorKind::Dns => Blame::Timeout,
        _ => Blame::Remote,
    }
}

/// A robots.txt that could not be fetched says why as `(kind: message)` (see
/// `robots.rs`): a consumer that cannot fetch robots.txt for its own reasons must not
/// record the site's URLs as skipped.
fn robots_blame(why: &str) -> Blame {
    [
        FetchErrorKind::LocalConnect,
        FetchErrorKind::Proxy,
        FetchErrorKind::NoHealthyExit,
        FetchErrorKind::AddressFamily,
        FetchErrorKind::Timeout,
        FetchErrorKind::Dns,
    ]
    .into_iter()
    .find(|k| why.contains(&format!("({}: ", k.as_str())))
    .map_or(Blame::Answered, kind_blame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitcrawl::discover::crawl::ROBOTS_UNAVAILABLE;

    #[test]
    fn robots_txt_that_failed_locally_is_blamed_on_the_consumer() {
        let why = |inner: &str| format!("{ROBOTS_UNAVAILABLE} ({inner})");
        assert_eq!(
            robots_blame(&why("timeout: request timed out")),
            Blame::Timeout
        );
        assert_eq!(
            robots_blame(&why("local_connect: no exit could connect")),
            Blame::Local
        );
        assert_eq!(
            robots_blame(&why("dns: failed resolving a.test: Try again")),
            Blame::Timeout
        );
        assert_eq!(kind_blame(FetchErrorKind::Dns), Blame::Timeout);
        assert_eq!(robots_blame(&why("it answered 503")), Blame::Answered);
        assert_eq!(
            robots_blame(&why("connect_refused: refused")),
            Blame::Answered
        );
    }
}
