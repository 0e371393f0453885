//! Counts of events over a sliding span, in fixed slices: what the site accepted just now.

use std::time::{Duration, Instant};

/// Events per slice over the last `SLICES × slice`.
#[derive(Debug, Clone)]
pub(super) struct Meter {
    slices: [u32; Self::SLICES],
    slice: Duration,
    /// Index of the slice that `head_start` begins.
    head: usize,
    head_start: Instant,
}

impl Meter {
    const SLICES: usize = 10;

    /// A meter over `10 × slice`.
    pub(super) fn new(slice: Duration, now: Instant) -> Self {
        Self {
            slices: [0; Self::SLICES],
            slice,
            head: 0,
            head_start: now,
        }
    }

    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.head_start);
        let steps = (elapsed.as_nanos() / self.slice.as_nanos()) as usize;
        if steps == 0 {
            return;
        }
        for i in 1..=steps.min(Self::SLICES) {
            self.slices[(self.head + i) % Self::SLICES] = 0;
        }
        self.head = (self.head + steps) % Self::SLICES;
        self.head_start += self.slice * steps as u32;
    }

    pub(super) fn record(&mut self, now: Instant) {
        self.roll(now);
        self.slices[self.head] = self.slices[self.head].saturating_add(1);
    }

    /// Events over the span and the span's length (shorter at the start).
    pub(super) fn count(&mut self, now: Instant, since: Instant) -> (u32, Duration) {
        self.roll(now);
        let full =
            self.slice * (Self::SLICES as u32 - 1) + now.saturating_duration_since(self.head_start);
        let span = full.min(now.saturating_duration_since(since));
        (self.slices.iter().sum(), span)
    }

    /// Events per second over the last `k` slices (the current one partly), and their
    /// count.
    pub(super) fn rate_last(&mut self, k: usize, now: Instant, since: Instant) -> (f64, u32) {
        self.roll(now);
        let k = k.clamp(1, Self::SLICES);
        let n: u32 = (0..k)
            .map(|i| self.slices[(self.head + Self::SLICES - i) % Self::SLICES])
            .sum();
        let span = (self.slice * (k as u32 - 1) + now.saturating_duration_since(self.head_start))
            .min(now.saturating_duration_since(since));
        (f64::from(n) / span.as_secs_f64().max(1e-3), n)
    }

    /// The highest per-second rate among the last `k` whole slices and the current one
    /// once it is half done, and the events in them.
    pub(super) fn peak(&mut self, k: usize, now: Instant) -> (f64, u32) {
        self.roll(now);
        let k = k.clamp(1, Self::SLICES - 1);
        let per_slice = self.slice.as_secs_f64();
        let whole = (1..=k).map(|i| self.slices[(self.head + Self::SLICES - i) % Self::SLICES]);
        let (max, mut sum) = whole.fold((0, 0), |(m, s), n| (m.max(n), s + n));
        let mut peak = f64::from(max) / per_slice;
        let into = now.saturating_duration_since(self.head_start);
        if into >= self.slice / 2 {
            let current = self.slices[self.head];
            sum += current;
            peak = peak.max(f64::from(current) / into.as_secs_f64());
        }
        (peak, sum)
    }

    /// Events per second over the span.
    pub(super) fn rate(&mut self, now: Instant, since: Instant) -> (f64, u32) {
        let (n, span) = self.count(now, since);
        (f64::from(n) / span.as_secs_f64().max(1e-3), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_last_ten_slices_only() {
        let t0 = Instant::now();
        let mut m = Meter::new(Duration::from_millis(100), t0);
        for i in 0..20 {
            m.record(t0 + Duration::from_millis(100 * i));
        }
        let (n, span) = m.count(t0 + Duration::from_millis(1950), t0);
        assert_eq!(n, 10);
        assert!(span <= Duration::from_secs(1));
        let (r, _) = m.rate(t0 + Duration::from_millis(5000), t0);
        assert_eq!(r, 0.0);
    }
}
