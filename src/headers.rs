//! PLACEHOLDER: being written (only Pacing for now).
use std::time::Duration;
/// PLACEHOLDER
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pacing {
    /// PLACEHOLDER
    pub pause_for: Option<Duration>,
    /// PLACEHOLDER
    pub min_interval: Option<Duration>,
    /// PLACEHOLDER
    pub max_rps: Option<f64>,
}
