//! Rates decided by other crawler processes (distributed mode).
//!
//! Each process runs its own controller on a shared key and publishes its changes; the
//! others take them here. What a received rate means depends on how far it is from ours:
//! a peer's growth must not end our slow start (the fleet ramps together, and growth
//! elsewhere is no sign of a limit), and only a cut elsewhere may stand for our own cut
//! (so that our answers to requests sent before it do not cut a second time). A peer a
//! little behind us is neither: its last growth step reached us before ours reached it.

use std::time::Instant;

use super::{Adjustment, Controller, Phase};

impl Controller {
    /// Take the rate another crawler process decided for this key.
    ///
    /// - Higher: growth seen elsewhere. Slow start goes on from it; a probe restarts flat
    ///   at it.
    /// - At least as far below as the gentlest cut a controller makes (`(1 + decrease) / 2`
    ///   of our rate: errors' cut; a throttle's is `decrease`, a latency cut between the
    ///   two or deeper): a cut elsewhere. It counts as this key's last decrease, and the
    ///   probe starts flat at it.
    /// - Less far below: a peer whose growth lagged ours. Taken, but it is not a cut: our
    ///   next throttle still cuts, and slow start goes on.
    pub fn adopt(&mut self, rps: f64, now: Instant) -> Option<Adjustment> {
        let pause_before = self.pause_until;
        let r = self.clamp(rps, now);
        let gentlest_cut = (1.0 + self.cfg.decrease) / 2.0;
        let cut = r <= self.rate * gentlest_cut;
        if cut {
            self.last_decrease = Some(now);
        }
        if cut || self.phase == Phase::Probe {
            self.enter_probe(r, now, true);
        } else {
            // Slow start from the adopted rate: growth counts from now, or the time the
            // peer already grew through would be counted twice.
            self.last_eval = now;
        }
        self.rate = r;
        self.adjustment(now, pause_before)
    }

    /// Go on from a share of a rate decided elsewhere, probing flat at it: a lane opened
    /// for an exit's own budget starts at its share of the host's rate, which was already
    /// at that budget's limit, so it must not slow-start past it.
    pub(super) fn take_share(&mut self, rps: f64, now: Instant) {
        let r = self.clamp(rps, now);
        if r < self.rate {
            self.last_decrease = Some(now);
        }
        self.enter_probe(r, now, true);
        self.rate = r;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::aimd::tests::{ok, throttled};
    use crate::clock::{Clock, FakeClock};

    const MS: Duration = Duration::from_millis(1);

    /// A controller in slow start after 1 s of answers (see `aimd::tests::ramped`).
    fn ramped(c: &FakeClock) -> Controller {
        let ctl = crate::aimd::tests::ramped(c);
        assert_eq!(ctl.phase(), Phase::SlowStart);
        ctl
    }

    #[test]
    fn a_cut_elsewhere_applies_and_blocks_a_second_cut_for_older_requests() {
        let c = FakeClock::new();
        let mut ctl = ramped(&c);
        let sent_before = c.now();
        c.advance(MS);
        let adj = ctl.adopt(20.0, c.now()).expect("a change");
        assert_eq!(adj.rps, 20.0);
        assert_eq!(ctl.phase(), Phase::Probe);
        // A 429 for a request sent before the adopted cut is old news.
        ctl.on_response(&throttled(sent_before, None), c.now());
        assert_eq!(ctl.decreases(), 0);
        assert_eq!(ctl.rate(), 20.0);
        assert_eq!(
            ctl.adopt(20.1, c.now()),
            None,
            "within 1 %: nothing to broadcast"
        );
    }

    #[test]
    fn a_peer_that_grew_does_not_end_slow_start() {
        let c = FakeClock::new();
        let mut ctl = ramped(&c);
        let peer = ctl.rate() * 1.5;
        let adj = ctl.adopt(peer, c.now()).expect("a change");
        assert_eq!(adj.rps, peer);
        assert_eq!(ctl.phase(), Phase::SlowStart);
        // 250 ms more of answers at a 250 ms doubling time: twice the adopted rate (growth
        // counted from the adoption, not from the answer before it).
        for _ in 0..25 {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now() - 50 * MS), c.now());
        }
        let grown = ctl.rate() / peer;
        assert!((grown - 2.0).abs() < 0.02, "grew {grown}× after adopting");
    }

    #[test]
    fn a_peer_a_little_behind_is_not_a_cut() {
        let c = FakeClock::new();
        let mut ctl = ramped(&c);
        let sent_before = c.now();
        c.advance(MS);
        let behind = ctl.rate() * 0.98;
        ctl.adopt(behind, c.now());
        assert_eq!(ctl.phase(), Phase::SlowStart);
        // The site's throttle for a request sent before still cuts: nothing was cut yet.
        ctl.on_response(&throttled(sent_before, None), c.now());
        assert_eq!(ctl.decreases(), 1);
        assert!(ctl.rate() < 0.95 * behind, "rate {}", ctl.rate());
    }
}
