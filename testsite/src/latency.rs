//! Latency that varies per answer, with a heavy tail, reproducibly.
//!
//! Why: a real page's response time depends on the page, caches, the database and GC pauses —
//! ± 50–90 % around the median and a p99 of 3–10× the median are ordinary. A controller that
//! reads latency as an overload signal must hold on such noise, which does *not* move with
//! the sending rate, so the test site has to produce it.
//!
//! Each request gets a *factor* `f = (1 + noise · u) · (factor if in the tail else 1)`, `u`
//! uniform in [-1, 1), and its delays (the base latency, and a worker's service time on a
//! [`Limit::Workers`](crate::Limit::Workers) site) are multiplied by `f`. The factors come
//! from a SplitMix64 stream seeded by [`SiteConfig::seed`](crate::SiteConfig::seed): the
//! n-th request to arrive gets the n-th factor, so a run with one client in sequence is
//! reproducible exactly, and concurrent runs draw the same multiset of factors.

use std::time::Duration;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, statistically fine for a test fixture,
/// and no dependency.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The largest [`SiteConfig::latency_noise`](crate::SiteConfig::latency_noise): keeps every
/// factor ≥ 0.05, so no answer is free.
pub const MAX_NOISE: f64 = 0.95;

/// Draws one latency factor per request.
#[derive(Debug, Clone)]
pub(crate) struct Jitter {
    rng: SplitMix64,
    noise: f64,
    tail: Option<(f64, f64)>,
}

impl Jitter {
    pub(crate) fn new(seed: u64, noise: f64, tail: Option<(f64, f64)>) -> Self {
        Self {
            rng: SplitMix64::new(seed),
            noise,
            tail,
        }
    }

    /// Panics (on the caller's thread, at [`TestSite::start`](crate::TestSite::start)) on a
    /// setting that makes no sense, rather than serving something else than asked.
    pub(crate) fn validate(noise: f64, tail: Option<(f64, f64)>) {
        assert!(
            (0.0..=MAX_NOISE).contains(&noise),
            "test site: latency_noise {noise} must be in [0, {MAX_NOISE}]"
        );
        if let Some((fraction, factor)) = tail {
            assert!(
                (0.0..=1.0).contains(&fraction) && factor.is_finite() && factor >= 1.0,
                "test site: tail ({fraction}, {factor}) needs a fraction in [0, 1] and a factor ≥ 1"
            );
        }
    }

    /// The next request's factor. Exactly 1.0, with no draw, when neither noise nor a tail
    /// is set (the site then behaves as it did before either existed). Otherwise two draws
    /// per request, always, so request n's factor depends on `(seed, n)` only.
    pub(crate) fn next_factor(&mut self) -> f64 {
        if self.noise == 0.0 && self.tail.is_none() {
            return 1.0;
        }
        let u = self.rng.next_unit() * 2.0 - 1.0;
        let roll = self.rng.next_unit();
        let mut f = 1.0 + self.noise * u;
        if let Some((fraction, factor)) = self.tail {
            if roll < fraction {
                f *= factor;
            }
        }
        f
    }
}

/// `d × f`, exact when `f` is 1.
pub(crate) fn scale(d: Duration, f: f64) -> Duration {
    if f == 1.0 {
        d
    } else {
        d.mul_f64(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference() {
        // First outputs of SplitMix64 seeded with 0 (reference implementation).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn no_noise_no_tail_is_exactly_one_and_draws_nothing() {
        let mut j = Jitter::new(7, 0.0, None);
        assert!((0..10).all(|_| j.next_factor() == 1.0));
        assert_eq!(j.rng.0, 7, "no draw");
        assert_eq!(
            scale(Duration::from_millis(3), 1.0),
            Duration::from_millis(3)
        );
    }

    #[test]
    fn noise_is_bounded_and_centred_and_the_tail_has_its_share() {
        let n = 100_000;
        let mut j = Jitter::new(1, 0.5, Some((0.02, 5.0)));
        let fs: Vec<f64> = (0..n).map(|_| j.next_factor()).collect();
        // Body: in [0.5, 1.5); tail: in [2.5, 7.5).
        let tail = fs.iter().filter(|&&f| f >= 2.5).count();
        assert!(fs
            .iter()
            .all(|&f| (0.5..1.5).contains(&f) || (2.5..7.5).contains(&f)));
        // 2 % of 100 000 = 2000, σ ≈ 44: ± 300 is ~7σ.
        assert!((1700..=2300).contains(&tail), "tail {tail}");
        let body: Vec<f64> = fs.iter().copied().filter(|&f| f < 2.5).collect();
        let mean = body.iter().sum::<f64>() / body.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "mean {mean}");
        // Both halves of the band are used.
        assert!(body.iter().any(|&f| f < 0.55) && body.iter().any(|&f| f > 1.45));
    }

    #[test]
    fn same_seed_same_factors_other_seed_others() {
        let draw = |seed| {
            let mut j = Jitter::new(seed, 0.9, Some((0.1, 3.0)));
            (0..50).map(|_| j.next_factor()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    #[test]
    #[should_panic(expected = "latency_noise")]
    fn noise_above_the_maximum_is_refused() {
        Jitter::validate(0.96, None);
    }

    #[test]
    #[should_panic(expected = "tail")]
    fn a_tail_factor_below_one_is_refused() {
        Jitter::validate(0.0, Some((0.1, 0.5)));
    }
}
