//! A latency cut on trial: slower answers may be a queue of ours or the site's own
//! slowness, and only a cut tells which. The cut remembers what it changed; the first
//! round sent once a queue of ours would have drained judges it, and a cut that did not
//! make answers faster is undone (see [`latency`](super::latency)).

use std::time::{Duration, Instant};

use super::{latency, Cause, Controller, Phase};

/// What a latency cut changed, to undo it if it did not help.
#[derive(Debug, Clone, Copy)]
pub(super) struct Trial {
    median: f64,
    rate: f64,
    w_max: f64,
    phase: Phase,
    /// Requests sent from then on find any queue of ours drained.
    judge_after: Instant,
}

impl Controller {
    /// Cut for an overloaded `round` (or one elevated too long), by what drains the queue
    /// it shows, and put the cut on trial. A cut while another is on trial keeps what the
    /// first one changed, so undoing restores the state before both.
    pub(super) fn latency_cut(&mut self, round: &latency::Round, now: Instant) {
        self.latency_cut_at = Some(round.median);
        let beta = (1.0 + self.cfg.decrease) / 2.0;
        let factor = self.drain_factor(round.median, beta);
        // A queue of ours holds `median - base` of work; at `factor` of the site's rate
        // it is gone after `excess / (1 - factor)`.
        let excess = round.median - self.latency.base().unwrap_or(round.median);
        let drain = (excess / (1.0 - factor)).clamp(0.0, 10.0);
        let restore = self
            .latency_trial
            .map_or((self.rate, self.w_max, self.phase), |t| {
                (t.rate, t.w_max, t.phase)
            });
        self.latency_trial = Some(Trial {
            median: round.median,
            rate: restore.0,
            w_max: restore.1,
            phase: restore.2,
            judge_after: now + Duration::from_secs_f64(drain),
        });
        self.decrease(now, Cause::Latency(factor));
    }

    /// The first round of requests sent once a queue of ours would have drained after a
    /// latency cut tells whether the cut helped.
    /// If it is no faster, the slowness does not move with our rate — the site got slower
    /// — so the cut is undone and the new level becomes the base. True if it was undone.
    pub(super) fn judge_trial(&mut self, round: &latency::Round, now: Instant) -> bool {
        let Some(trial) = self.latency_trial else {
            return false;
        };
        if round.first_sent < trial.judge_after {
            return false;
        }
        self.latency_trial = None;
        // Ours if at least half of the excess over the base has gone, or if it still
        // grows (the cut was not deep enough: the next overloaded round cuts again). Only
        // a level that stayed where it was is the site's own.
        let base = self.latency.base().unwrap_or(trial.median);
        let drained = round.median <= base + 0.5 * (trial.median - base);
        let grew = round.median > 1.1 * trial.median;
        if drained || grew {
            return false;
        }
        self.latency.adopt(round.median);
        self.latency_cut_at = None;
        self.decreases = self.decreases.saturating_sub(1);
        self.cuts = self.cuts.saturating_sub(1);
        match trial.phase {
            Phase::Probe => self.enter_probe(trial.w_max, now, true),
            Phase::SlowStart => self.phase = Phase::SlowStart,
        }
        self.rate = self.clamp(trial.rate, now);
        true
    }
}
