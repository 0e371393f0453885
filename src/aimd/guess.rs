//! The price of checking a guess: a first throttle after too few answers to say anything
//! leaves a guess for an estimate (`Controller::unproven_estimate`), and checking it risks
//! the throttle's `Retry-After` pause again. Where that pause is longer than the host's
//! waiting work takes at the guess, a wrong guess costs more than all that work, and a
//! right one saves less than the pause: the work is paced to be done within one pause
//! instead (ski rental again, as slow start's hold in `curve.rs`).

use std::time::Duration;

/// The rate that gets a host's waiting work done within one pause, for a guess whose
/// check would risk that pause (see `Controller::clamp`).
#[derive(Debug, Clone, Copy)]
pub(super) struct GuessCap {
    /// The pause, seconds.
    pause: f64,
    /// The work waiting when the throttle came, done within one pause.
    rps: f64,
}

impl GuessCap {
    pub(super) fn new(pause: Duration, backlog: u32) -> Self {
        let pause = pause.as_secs_f64().max(f64::MIN_POSITIVE);
        Self {
            pause,
            rps: f64::from(backlog.max(1)) / pause,
        }
    }

    /// The cap, with `backlog` requests waiting now: it rises with more work, and does not
    /// fall as the work is done (the rate that does it within the pause stays the same).
    pub(super) fn rps(&self, backlog: Option<u32>) -> f64 {
        backlog.map_or(self.rps, |b| self.rps.max(f64::from(b) / self.pause))
    }
}
