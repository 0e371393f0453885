//! The controller's tuning and its documented defaults.

use std::time::Duration;

use crate::config::LimiterSettings;

/// Tuning of the controller. [`AimdConfig::default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AimdConfig {
    /// Starting rate, requests/s (default 5).
    pub initial_rps: f64,
    /// Lowest rate the controller will go to (default 0.1).
    pub min_rps: f64,
    /// Highest rate (default 1000).
    pub max_rps: f64,
    /// Additive increase: the least the rate grows per second while probing (default 1).
    pub increase_rps: f64,
    /// Multiplicative decrease factor β in (0, 1) (default 0.9, as vector's controller).
    pub decrease: f64,
    /// A round of answers whose median is above this multiple of the quiet median counts
    /// as overload (default 2.0).
    pub latency_tolerance: f64,
    /// Latency counts as a warning only when a round's median is also this much above the
    /// quiet median (default 10 ms): on a LAN or loopback, sub-millisecond jitter makes
    /// ratios meaningless.
    pub latency_floor: Duration,
    /// Longest host-wide hold after a throttle without Retry-After (default 250 ms).
    pub hold: Duration,
    /// Shortest slow-start doubling time (default 100 ms).
    pub doubling: Duration,
    /// Shortest probe cycle `K` (default 2 s).
    pub probe_time: Duration,
    /// A probe cycle spans at least this many requests at `w_max` (default 300).
    pub probe_requests: f64,
}

impl Default for AimdConfig {
    fn default() -> Self {
        Self {
            initial_rps: 5.0,
            min_rps: 0.1,
            max_rps: 1000.0,
            increase_rps: 1.0,
            decrease: 0.9,
            latency_tolerance: 2.0,
            latency_floor: Duration::from_millis(10),
            hold: Duration::from_millis(250),
            doubling: Duration::from_millis(100),
            probe_time: Duration::from_secs(2),
            probe_requests: 300.0,
        }
    }
}

impl AimdConfig {
    /// The controller's tuning from `[limiter]`: what the settings name, the documented
    /// defaults for the rest.
    pub fn from_settings(s: &LimiterSettings) -> Self {
        Self {
            initial_rps: s.initial_rps,
            min_rps: s.min_rps,
            max_rps: s.max_rps,
            increase_rps: s.increase_rps,
            decrease: s.decrease,
            latency_tolerance: s.latency_tolerance,
            hold: s.hold(),
            ..Self::default()
        }
    }
}
