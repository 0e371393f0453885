//! PLACEHOLDER: being written.
use super::{Decision, Quota, RateLimiter};
use std::time::Instant;
/// PLACEHOLDER
#[derive(Debug)]
pub struct LeakyBucket {
    quota: Quota,
}
impl LeakyBucket {
    /// PLACEHOLDER
    pub fn new(quota: Quota, _now: Instant) -> Self {
        Self { quota }
    }
}
impl RateLimiter for LeakyBucket {
    fn check(&mut self, _now: Instant) -> Decision {
        todo!()
    }
    fn set_rate(&mut self, _rps: f64, _now: Instant) {
        todo!()
    }
    fn drain(&mut self, _now: Instant) {
        todo!()
    }
    fn quota(&self) -> Quota {
        self.quota
    }
}
