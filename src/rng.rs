//! Injected randomness for jitter.
//!
//! The core never reads a global random source: jitter comes from a [`RandomSource`] the
//! caller hands in, so simulations and tests are reproducible from a seed.

/// A source of uniformly distributed random numbers.
pub trait RandomSource {
    /// The next 64 random bits.
    fn next_u64(&mut self) -> u64;

    /// A uniform float in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        // 53 random mantissa bits.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform float in `[-1, 1)`.
    fn next_signed(&mut self) -> f64 {
        self.next_f64() * 2.0 - 1.0
    }
}

/// SplitMix64: tiny, fast, good enough for jitter; seedable for tests.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }
}

impl RandomSource for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A source that always returns the same value: no jitter at all (`next_f64() == 0.5`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJitter;

impl RandomSource for NoJitter {
    fn next_u64(&mut self) -> u64 {
        1u64 << 63
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_reproducible_and_in_range() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..1000 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
        }
        assert_eq!(NoJitter.next_signed(), 0.0);
    }
}
