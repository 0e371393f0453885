//! The answer every limiter and pacer gives.

use std::time::Duration;

/// What a limiter says about sending one request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send now; the permit has been taken.
    Allow,
    /// Do not send yet. Nothing was taken. A check made `d` later is allowed
    /// (as long as nothing else changed the limiter's state in between).
    Wait(Duration),
}

impl Decision {
    /// `true` for [`Decision::Allow`].
    pub fn is_allow(self) -> bool {
        matches!(self, Decision::Allow)
    }

    /// The wait, or zero for `Allow`.
    pub fn wait(self) -> Duration {
        match self {
            Decision::Allow => Duration::ZERO,
            Decision::Wait(d) => d,
        }
    }
}
