//! Pacing the site announces in its headers ([`crate::headers::Pacing`]): a pause when
//! its quota is used up, and a ceiling on the rate until the quota resets. It bounds what
//! the controller learns from answers; it does not replace it.

use std::time::{Duration, Instant};

use super::{Adjustment, Controller};
use crate::headers::Pacing;

impl Controller {
    /// Apply a pacing hint announced by the site (see [`crate::headers`]): a pause when its
    /// quota is used up, and a ceiling on the rate until the quota resets.
    pub fn on_hint(&mut self, hint: &Pacing, now: Instant) -> Option<Adjustment> {
        let pause_before = self.pause_until;
        if let Some(p) = hint.pause_for {
            if p > Duration::ZERO {
                self.extend_pause(now + p);
                self.hinted_pause = Some(now);
            }
        }
        let cap = match (hint.max_rps, hint.min_interval) {
            (Some(r), Some(i)) => Some(r.min(1.0 / i.as_secs_f64().max(1e-9))),
            (Some(r), None) => Some(r),
            (None, Some(i)) => Some(1.0 / i.as_secs_f64().max(1e-9)),
            (None, None) => None,
        };
        if let Some(cap) = cap.filter(|c| c.is_finite() && *c > 0.0) {
            // Hints are repeated on every response; one that is not renewed lapses.
            let lifetime = hint
                .pause_for
                .unwrap_or(Duration::ZERO)
                .max(Duration::from_secs(60));
            self.hint_cap = Some((cap.max(self.cfg.min_rps), now + lifetime));
            self.rate = self.clamp(self.rate, now);
        }
        self.adjustment(now, pause_before)
    }
}
