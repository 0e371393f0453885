//! A site that holds its clients to the `Retry-After` it sent ([`HoldRetryAfter`]).
//!
//! Why: a token bucket forgets a refusal as soon as it has refilled, so a client that comes
//! back before its `Retry-After` ends is often served. Some sites mean what they say: an
//! API that refuses everything from a client until its announced reset, or an
//! application that sheds all load for the pause it announced, whoever asks. Against such
//! a site a request sent into the pause is refused for sure, and the site's log shows
//! whether the crawler kept to the pause, and through which of its addresses.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use crate::stats::PauseRecord;

/// Whom a refusal's `Retry-After` holds off until it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HoldRetryAfter {
    /// Nobody: after a refusal the limit alone decides (a bucket that has refilled serves
    /// again at once).
    #[default]
    No,
    /// The client (peer IP) that was told: its requests are refused until the pause ends.
    Peer,
    /// Every client: the site refuses all requests until the pause ends, whoever was told
    /// (a site that pauses itself, not the client).
    Site,
}

/// The pauses announced and still running.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    /// By peer ([`HoldRetryAfter::Peer`]), or `None` for the whole site.
    until: HashMap<Option<IpAddr>, Instant>,
}

impl Holds {
    fn key(mode: HoldRetryAfter, ip: IpAddr) -> Option<Option<IpAddr>> {
        match mode {
            HoldRetryAfter::No => None,
            HoldRetryAfter::Peer => Some(Some(ip)),
            HoldRetryAfter::Site => Some(None),
        }
    }

    /// When the pause that covers a request of `ip` arriving at `now` ends, if one runs.
    pub(crate) fn holding(
        &self,
        mode: HoldRetryAfter,
        ip: IpAddr,
        now: Instant,
    ) -> Option<Instant> {
        let until = *self.until.get(&Self::key(mode, ip)?)?;
        (now < until).then_some(until)
    }

    /// A refusal of `ip` at `now` announced a pause until `until`: the record of it, if the
    /// site holds anyone to it. A refusal during a pause announces none (it is the pause).
    pub(crate) fn announce(
        &mut self,
        mode: HoldRetryAfter,
        ip: IpAddr,
        now: Instant,
        until: Instant,
    ) -> Option<PauseRecord> {
        let key = Self::key(mode, ip)?;
        self.until.insert(key, until);
        Some(PauseRecord {
            peer: key,
            start: now,
            until,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_pause_holds_the_peer_told_or_everyone_and_ends_when_it_said() {
        let (a, b) = ("127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(1);
        for (mode, b_held) in [(HoldRetryAfter::Peer, false), (HoldRetryAfter::Site, true)] {
            let mut h = Holds::default();
            let rec = h.announce(mode, a, t0, end).expect("recorded");
            assert_eq!(rec.peer, (mode == HoldRetryAfter::Peer).then_some(a));
            let mid = t0 + Duration::from_millis(500);
            assert_eq!(h.holding(mode, a, mid), Some(end), "{mode:?}");
            assert_eq!(h.holding(mode, b, mid).is_some(), b_held, "{mode:?}");
            assert_eq!(h.holding(mode, a, end), None, "{mode:?}: over when it said");
        }
        let mut h = Holds::default();
        assert!(h.announce(HoldRetryAfter::No, a, t0, end).is_none());
        assert_eq!(h.holding(HoldRetryAfter::No, a, t0), None);
    }
}
