//! Latency as an early warning, kept apart from latency that merely varies.
//!
//! Why not a minimum: real pages vary by ± 50–90 % around their median and have a heavy
//! tail, so the smallest sample sits far below the usual one and every ordinary answer
//! looks like a queue. Why not a single smoothed RTT: one page ten times slower moves it.
//!
//! What this does instead, in the spirit of Envoy's gradient controller and Vector's
//! adaptive concurrency: answers are grouped into *rounds* (enough samples for a stable
//! figure), and each round is summed up by its **median**, which a 2 % tail cannot move.
//! The **base** is the median of recent quiet rounds (not a minimum), so noise sits on
//! both sides of it, and their spread (a robust deviation, from the median absolute
//! deviation) sets the band that counts as "no change": a steady site gets a narrow band,
//! so a queue of a few requests shows at once; a noisy one a wide band, capped at
//! `tolerance × base`. A round is *rising* above `base + 3σ` (capped at half the tolerance's
//! margin) and *overloaded* above `base + 5σ` (capped at the tolerance), and in both cases
//! at least `floor` above the base: on loopback, fractions of a millisecond say nothing.
//!
//! Latency only counts when it moves *with the sending rate*: a queue the crawler builds
//! keeps growing while the rate is above the site's capacity and drains below it. So the
//! controller cuts again only while rounds keep getting slower (see
//! [`LatencySignal::worse_than`]); every cut is a test, judged once a queue of ours would
//! have drained: if latency did not come down, it was the site's own slowness, the cut is
//! undone and the level adopted ([`LatencySignal::adopt`]). Rounds elevated for
//! [`STUCK_AFTER`] call for such a test too, so a standing queue cannot become the base.

use std::time::{Duration, Instant};

/// Rounds elevated this long call for a test: is it our queue or the site's new normal?
pub(super) const STUCK_AFTER: Duration = Duration::from_secs(10);

/// What a round says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// At the base, give or take noise.
    Quiet,
    /// Clearly above the base: a queue may be forming; do not grow.
    Rising,
    /// Far above the base: a queue is forming.
    Overloaded,
}

/// One closed round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Round {
    pub(super) median: f64,
    pub(super) reading: Reading,
    /// When its first sample arrived.
    pub(super) started: Instant,
    /// When the earliest of its requests was sent: a round whose requests were all sent
    /// after a cut tells how the cut rate does.
    pub(super) first_sent: Instant,
    /// Elevated for [`STUCK_AFTER`]: the controller should test whether a cut helps.
    pub(super) stuck: bool,
}

#[derive(Debug, Clone)]
pub(super) struct LatencySignal {
    tolerance: f64,
    floor: f64,
    samples: Vec<f64>,
    round_start: Option<Instant>,
    first_sent: Option<Instant>,
    /// Medians of the last quiet rounds; the base is their median.
    quiet: Vec<f64>,
    base: Option<f64>,
    /// When the rounds since the last quiet one began to be elevated.
    elevated_since: Option<Instant>,
    last: Option<Round>,
}

impl LatencySignal {
    const QUIET_KEPT: usize = 16;
    /// Quiet rounds needed before their spread is trusted.
    const SPREAD_AFTER: usize = 5;
    const FULL_ROUND: usize = 32;
    const SHORT_ROUND: usize = 16;
    const LONG_ROUND: usize = 5;

    pub(super) fn new(tolerance: f64, floor: Duration) -> Self {
        Self {
            tolerance,
            floor: floor.as_secs_f64(),
            samples: Vec::with_capacity(Self::FULL_ROUND),
            round_start: None,
            first_sent: None,
            quiet: Vec::with_capacity(Self::QUIET_KEPT),
            base: None,
            elevated_since: None,
            last: None,
        }
    }

    /// The site's latency when nothing queues, if known.
    pub(super) fn base(&self) -> Option<f64> {
        self.base
    }

    /// Still rising or worse as of the last round.
    pub(super) fn rising(&self) -> bool {
        self.last.is_some_and(|r| r.reading != Reading::Quiet)
    }

    /// Whether `round` is clearly slower than a round that led to a cut — by a tenth, and
    /// by half the floor — so the queue still grows. Noise around a level that merely
    /// stepped up is not "slower".
    pub(super) fn worse_than(&self, round: &Round, cut_at: f64) -> bool {
        round.median > cut_at * 1.1 + self.floor / 2.0
    }

    /// Add one success's latency; returns the round it closed, if any. A round closes at
    /// 32 samples, or at 16 once it spans two round trips (and 200 ms), or at 5 once it
    /// spans 5 s (slow sites).
    ///
    /// `learn`: the rate is clearly below the site's capacity now, so a quiet round may
    /// teach the base. Rounds near the capacity may hold a small queue of our own; learning
    /// from them would let the base creep up with it (the bufferbloat trap), so only rounds
    /// at a lower rate, as after a cut or in slow start, set it (Envoy measures its minimum
    /// latency at pinned-low concurrency for the same reason).
    pub(super) fn observe(
        &mut self,
        latency: Duration,
        sent_at: Instant,
        srtt: f64,
        learn: bool,
        now: Instant,
    ) -> Option<Round> {
        let started = *self.round_start.get_or_insert(now);
        let first_sent = self.first_sent.map_or(sent_at, |f| f.min(sent_at));
        self.first_sent = Some(first_sent);
        self.samples.push(latency.as_secs_f64());
        let n = self.samples.len();
        let span = now.saturating_duration_since(started).as_secs_f64();
        let close = n >= Self::FULL_ROUND
            || (n >= Self::SHORT_ROUND && span >= (2.0 * srtt).max(0.2))
            || (n >= Self::LONG_ROUND && span >= 5.0);
        if !close {
            return None;
        }
        let mid = n / 2;
        let (_, m, _) = self
            .samples
            .select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
        let median = *m;
        self.samples.clear();
        self.round_start = None;
        self.first_sent = None;
        let round = self.judge(median, (started, first_sent), learn, now);
        self.last = Some(round);
        Some(round)
    }

    /// The margins above the base for rising and for overloaded.
    fn bands(&self, base: f64) -> (f64, f64) {
        let over_cap = (self.tolerance - 1.0) * base;
        let (rise, over) = match self.spread() {
            Some(sigma) => (
                (3.0 * sigma).min(over_cap / 2.0),
                (5.0 * sigma).min(over_cap),
            ),
            None => (over_cap / 2.0, over_cap),
        };
        (rise.max(self.floor / 2.0), over.max(self.floor))
    }

    /// A robust standard deviation of the quiet rounds' medians: 1.4826 × their median
    /// absolute deviation (the normal distribution's factor).
    fn spread(&self) -> Option<f64> {
        if self.quiet.len() < Self::SPREAD_AFTER {
            return None;
        }
        let m = median_of(&self.quiet);
        let dev: Vec<f64> = self.quiet.iter().map(|x| (x - m).abs()).collect();
        Some(1.4826 * median_of(&dev))
    }

    fn judge(
        &mut self,
        median: f64,
        (started, first_sent): (Instant, Instant),
        learn: bool,
        now: Instant,
    ) -> Round {
        let reading = match self.base {
            None => Reading::Quiet,
            Some(b) => {
                let (rise, over) = self.bands(b);
                if median > b + over {
                    Reading::Overloaded
                } else if median > b + rise {
                    Reading::Rising
                } else {
                    Reading::Quiet
                }
            }
        };
        // While the base rests on fewer than `SPREAD_AFTER` rounds, a round that reads
        // rising at a rate clearly below the capacity (`learn`: no queue of ours can
        // form there) is the site's own noise, and teaches the base too. Learning from
        // quiet rounds alone keeps only the rounds that fell inside the band: a base set
        // low by the first round of slow start on a noisy site stays low, every later
        // round reads rising, growth stops and a latency cut follows (seen in
        // `bench_limit`'s `host-300-noise90`; `tests/scenarios/host_300_noise90_loopback`).
        // Once the base is settled, only quiet rounds teach it, so a queue of ours that
        // forms while the rate is low (a queueing server) does not creep into it.
        // Overloaded rounds never do: they call for a test cut, which adopts the new
        // level if the site itself got slower.
        let settled = self.quiet.len() >= Self::SPREAD_AFTER;
        let learnable = match reading {
            Reading::Quiet => learn || self.base.is_none(),
            Reading::Rising => learn && !settled,
            Reading::Overloaded => false,
        };
        if learnable {
            self.elevated_since = None;
            if self.quiet.len() == Self::QUIET_KEPT {
                self.quiet.remove(0);
            }
            self.quiet.push(median);
            self.base = Some(median_of(&self.quiet));
        } else if reading == Reading::Quiet {
            self.elevated_since = None;
        } else {
            let since = *self.elevated_since.get_or_insert(started);
            if now.saturating_duration_since(since) >= STUCK_AFTER {
                // Elevated for long: either a standing queue of ours (a rate right at
                // the site's capacity keeps it, neither growing nor draining) or a
                // site that got slower. Only a cut tells which (BBR's ProbeRTT).
                self.elevated_since = Some(now);
                return Round {
                    median,
                    reading: Reading::Overloaded,
                    started,
                    first_sent,
                    stuck: true,
                };
            }
        }
        Round {
            median,
            reading,
            started,
            first_sent,
            stuck: false,
        }
    }

    /// Take `level` as the site's latency when nothing queues: a cut did not bring it
    /// down, so it is not a queue of ours.
    pub(super) fn adopt(&mut self, level: f64) {
        self.quiet.clear();
        self.quiet.push(level);
        self.base = Some(level);
        self.elevated_since = None;
        if let Some(r) = self.last.as_mut() {
            r.reading = Reading::Quiet;
        }
    }
}

fn median_of(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RandomSource, SplitMix64};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn noise_and_a_heavy_tail_stay_quiet() {
        let mut rng = SplitMix64::new(7);
        let mut s = LatencySignal::new(2.0, 10 * MS);
        let t0 = Instant::now();
        let mut loud = 0;
        for i in 0..20_000u64 {
            let mut l = 50.0 * (1.0 + 0.9 * rng.next_signed());
            if rng.next_f64() < 0.02 {
                l *= 10.0;
            }
            let now = t0 + MS * i as u32;
            if let Some(r) = s.observe(Duration::from_secs_f64(l / 1e3), now, 0.05, true, now) {
                if r.reading != Reading::Quiet {
                    loud += 1;
                }
            }
        }
        // 625 rounds of 32: a rising round is a 3-sigma event of the median.
        assert!(loud <= 5, "{loud} elevated rounds out of noise alone");
        let b = s.base().unwrap();
        assert!((40e-3..60e-3).contains(&b), "base {b}");
    }

    #[test]
    fn a_base_set_low_by_the_first_round_is_corrected_while_the_rate_is_low() {
        // The first round of a noisy site came out fast by chance (30 ms); the site's
        // usual round is 48 ms: above the band (half the base) over a base of 30 ms.
        let mut s = LatencySignal::new(2.0, 10 * MS);
        let mut t = Instant::now();
        let mut round = |s: &mut LatencySignal, ms: u32, learn: bool| {
            let mut last = None;
            for _ in 0..32 {
                t += MS;
                last = s.observe(MS * ms, t, 0.05, learn, t).or(last);
            }
            last.expect("32 samples close a round")
        };
        round(&mut s, 30, true);
        assert_eq!(round(&mut s, 48, true).reading, Reading::Rising);
        // At a rate clearly below the capacity such rounds teach the base: the usual
        // round soon reads quiet.
        let mut readings = Vec::new();
        for _ in 0..4 {
            readings.push(round(&mut s, 48, true).reading);
        }
        assert_eq!(readings.last(), Some(&Reading::Quiet), "{readings:?}");
        let b = s.base().unwrap();
        assert!((b - 48e-3).abs() < 1e-6, "base {b}");
        // Near the capacity (not learning), a rising round teaches nothing.
        let mut s = LatencySignal::new(2.0, 10 * MS);
        round(&mut s, 30, true);
        for _ in 0..5 {
            assert_eq!(round(&mut s, 48, false).reading, Reading::Rising);
        }
        assert_eq!(s.base(), Some(30e-3));
    }

    #[test]
    fn a_growing_queue_reads_overloaded_and_a_long_elevation_asks_for_a_test() {
        let mut s = LatencySignal::new(2.0, 10 * MS);
        let t0 = Instant::now();
        let mut t = t0;
        for _ in 0..320 {
            t += MS;
            s.observe(50 * MS, t, 0.05, true, t);
        }
        // A queue: every answer 1 ms slower than the one before.
        let mut last = None;
        for i in 0..200u32 {
            t += MS;
            if let Some(r) = s.observe(MS * (50 + i), t, 0.05, true, t) {
                last = Some(r.reading);
            }
        }
        assert_eq!(last, Some(Reading::Overloaded));
        // Elevated and flat for long: one round says "stuck" about every 10 s.
        let mut stuck = vec![];
        for i in 0..25_000u32 {
            t += MS;
            if let Some(r) = s.observe(150 * MS, t, 0.15, true, t) {
                if r.stuck {
                    stuck.push(i);
                }
            }
        }
        assert_eq!(stuck.len(), 2, "{stuck:?}");
        s.adopt(0.150);
        t += MS;
        let r = (0..40)
            .find_map(|_| {
                t += MS;
                s.observe(150 * MS, t, 0.15, true, t)
            })
            .unwrap();
        assert_eq!(r.reading, Reading::Quiet);
    }
}
