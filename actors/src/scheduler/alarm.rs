//! The dispatch's alarm: a timer finer than the runtime's, on a thread of its own.
//!
//! Why: tokio's timers count whole milliseconds and round a deadline up to the next one,
//! and the runtime's poll rounds its timeout up again, so a send woken by them goes out
//! 0.6–1.7 ms after its slot (p10–p90, `examples/bench_timers.rs`). The pacer never lets
//! two sends come closer than an interval (a strict limit, burst 1, refuses them), so
//! each send's lateness is lost: at 100 req/s a tenth of the rate. A thread waiting on a
//! condition variable wakes the runtime 0.09–0.18 ms after the instant.
//!
//! Why beside the runtime's timer, not instead of it: under tokio's paused time (the
//! actor tests) only the runtime's timer moves with the clock. The dispatch sets the
//! runtime's timer for its earliest wait and the alarm for the earliest wait of a host
//! with a lane paced faster than one send per 50 ms (`dispatch.rs`, `ALARM_BELOW`); a
//! ring is acted on only when the runtime's clock has reached it and it is still the
//! instant the alarm is set for, so where both are set for one instant whichever comes
//! first runs the dispatch and the other finds nothing to send. The thread starts with the first alarm set (a crawl
//! that never waits for such a slot has none) and ends when the alarm is dropped with the
//! scheduler.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;

/// The alarm went off for this instant (the wake the dispatch set).
pub(super) struct Rang(pub(super) Instant);

/// One instant at a time: a new one replaces the old.
pub(super) struct Alarm {
    ring_to: UnboundedSender<Rang>,
    /// The instant set and not yet rung, as the dispatch's side knows it.
    armed: Option<Instant>,
    /// `None` until the first instant is set; `Some(None)` if no thread could be started
    /// (the runtime's timer is then the only one, and starting is not tried again).
    thread: Option<Option<(Arc<Shared>, JoinHandle<()>)>>,
}

#[derive(Default)]
struct Shared {
    slot: Mutex<Slot>,
    changed: Condvar,
}

#[derive(Default)]
struct Slot {
    at: Option<Instant>,
    closed: bool,
}

impl Alarm {
    /// An alarm whose rings arrive on `ring_to` (a stream of the scheduler's context).
    pub(super) fn new(ring_to: UnboundedSender<Rang>) -> Self {
        Self {
            ring_to,
            armed: None,
            thread: None,
        }
    }

    /// Ring at `at`, unless a ring at or before it (and after `now`) is still to come.
    pub(super) fn set(&mut self, at: Instant, now: Instant) {
        if self.armed.is_some_and(|t| t <= at && t > now) {
            return;
        }
        self.armed = Some(at);
        let ring_to = &self.ring_to;
        if let Some((shared, _)) = self.thread.get_or_insert_with(|| spawn(ring_to.clone())) {
            shared.lock().at = Some(at);
            shared.changed.notify_one();
        }
    }

    /// A ring for `at` arrived: whether it is for the instant set (one since replaced is
    /// not). The alarm is then clear for the next.
    pub(super) fn rang(&mut self, at: Instant) -> bool {
        let current = self.armed == Some(at);
        if current {
            self.armed = None;
        }
        current
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        if let Some(Some((shared, thread))) = self.thread.take() {
            shared.lock().closed = true;
            shared.changed.notify_one();
            // The thread only waits on the condition variable, which was just signalled.
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The alarm's thread; `None` if the system will not start one (the runtime's timer is
/// then the only one, as precise as it is).
fn spawn(ring_to: UnboundedSender<Rang>) -> Option<(Arc<Shared>, JoinHandle<()>)> {
    let shared = Arc::new(Shared::default());
    let theirs = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("exitcrawl-alarm".into())
        .spawn(move || run(&theirs, &ring_to))
        .ok()?;
    Some((shared, thread))
}

fn run(shared: &Shared, ring_to: &UnboundedSender<Rang>) {
    let mut slot = shared.lock();
    loop {
        if slot.closed {
            return;
        }
        let Some(at) = slot.at else {
            slot = shared
                .changed
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        let now = Instant::now();
        if now >= at {
            slot.at = None;
            if ring_to.send(Rang(at)).is_err() {
                return;
            }
            continue;
        }
        slot = shared
            .changed
            .wait_timeout(slot, at - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rings_once_for_the_last_instant_set() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut alarm = Alarm::new(tx);
        let start = Instant::now();
        alarm.set(start + Duration::from_secs(3600), start);
        let at = start + Duration::from_millis(20);
        alarm.set(at, start);
        let Rang(rang) = rx.blocking_recv().expect("a ring");
        assert_eq!(
            rang, at,
            "the ring is for the instant that replaced the first"
        );
        assert!(Instant::now() >= at, "never before its instant");
        assert!(rx.try_recv().is_err(), "one ring per instant set");
        drop(alarm);
        assert!(
            rx.blocking_recv().is_none(),
            "the thread ends with the alarm"
        );
    }

    #[test]
    fn a_later_instant_waits_behind_an_earlier_one_and_a_stale_ring_is_not_taken() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut alarm = Alarm::new(tx);
        let start = Instant::now();
        let at = start + Duration::from_millis(10);
        alarm.set(at, start);
        alarm.set(at + Duration::from_millis(5), start);
        let Rang(rang) = rx.blocking_recv().expect("a ring");
        assert_eq!(rang, at, "the earlier instant stood");
        assert!(
            !alarm.rang(at - Duration::from_millis(1)),
            "not the instant set"
        );
        assert!(alarm.rang(rang), "the instant set");
        assert!(!alarm.rang(rang), "taken once");
    }
}
