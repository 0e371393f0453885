//! When a host's controllers may be forgotten, and what is kept of them.
//!
//! A broad crawl meets hosts by the hundred thousand over a long run, and a host's
//! controllers (latency rounds, meters, the bucket fit, one per lane) weigh kilobytes: kept
//! for every host ever met, they grow without bound. Most hosts are done with after a few
//! dozen pages, so a host nothing has been heard from for a while is forgotten, and only
//! what a fresh start would get wrong is kept: the rate a cut taught, a few dozen bytes (see
//! [`HostPrior::forgot`](super::prior::HostPrior::forgot)).
//!
//! Not forgotten, whatever the silence: a host with a pause in force (its end must be
//! honoured), one waiting out a lockout, and one ever banned (a penalty box is found
//! again only by being banned again).

use std::time::{Duration, Instant};

use super::coupling::{HostPolicy, Lane};

/// Whether `policy`, last heard from at `heard`, may be forgotten at `now`: nothing heard
/// for `after`, and nothing in force that a fresh start would lose (see the module docs).
pub fn forgettable(policy: &HostPolicy, heard: Instant, after: Duration, now: Instant) -> bool {
    now.saturating_duration_since(heard) >= after
        && policy.lanes().all(|(_, c)| {
            c.pause_until(now).is_none()
                && !c.locked_out()
                && c.bans() == 0
                && c.ceiling().is_none()
        })
}

/// What a forgotten host keeps: the host lane's capacity estimate once a cut taught one
/// (the rate it starts at again, when under the crawl's start); `None` for a host never
/// cut, which starts again as a new host does.
pub fn remembered_rate(policy: &HostPolicy) -> Option<f64> {
    policy
        .controller(Lane::Host)
        .filter(|c| c.decreases() > 0)
        .map(super::Controller::capacity_estimate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aimd::coupling::Coupling;
    use crate::aimd::{AimdConfig, Response, Signal};

    fn answer(t: Instant, signal: Signal) -> Response {
        Response {
            sent_at: t,
            latency: Duration::from_millis(20),
            signal,
            limited: true,
            backlog: None,
        }
    }

    const AFTER: Duration = Duration::from_secs(600);

    #[test]
    fn a_quiet_host_is_forgotten_after_the_silence_and_keeps_only_a_cut_rate() {
        let t0 = Instant::now();
        let mut p = HostPolicy::new(AimdConfig::default(), 2, Coupling::Auto, t0);
        p.on_response(0, &answer(t0, Signal::Success), t0);
        assert!(!forgettable(&p, t0, AFTER, t0 + AFTER / 2));
        assert!(forgettable(&p, t0, AFTER, t0 + AFTER));
        assert_eq!(remembered_rate(&p), None, "never cut: starts as a new host");

        let t1 = t0 + Duration::from_secs(1);
        p.on_response(1, &answer(t1, Signal::Throttle { retry_after: None }), t1);
        let rate = remembered_rate(&p).expect("a cut taught a rate");
        assert!(rate > 0.0 && rate.is_finite());
    }

    #[test]
    fn a_pause_in_force_keeps_a_host_however_quiet() {
        let t0 = Instant::now();
        let mut p = HostPolicy::new(AimdConfig::default(), 1, Coupling::Auto, t0);
        let long = Duration::from_secs(3600);
        p.on_response(
            0,
            &answer(
                t0,
                Signal::Throttle {
                    retry_after: Some(long),
                },
            ),
            t0,
        );
        assert!(
            !forgettable(&p, t0, AFTER, t0 + AFTER),
            "the hour's pause is still running"
        );
        assert!(forgettable(&p, t0, AFTER, t0 + long + AFTER));
    }
}
