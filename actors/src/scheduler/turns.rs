//! Direct fetches handed in together take their turns in the order they came.
//!
//! A direct fetch yields once before its admission, so that answers already received
//! (a 429 and the pause it brings) are taken in first (see `run_direct`). Each fetch
//! yielding on its own reverses a batch: tokio runs the tasks a `yield_now` deferred last
//! first, so eight fetches handed in at once were admitted last to first, and a URL list
//! was crawled in the wrong order. Here the first fetch of a batch starts a turn, every
//! fetch of the batch (the first too) waits for its end, first come first, and the turn
//! is ended by a task of its own that yields once: after the same poll for I/O, the
//! fetches are woken in the order they came and see the same answers.
//!
//! Why a task of its own, not the first fetch: a fetch's future is polled only when its
//! caller polls it, and a caller may hold it unpolled for long (a stream of fetches whose
//! answers are worked on between polls, the work fetching too). A turn only the first
//! fetch could end would then hold every other fetch of the thread back, the caller's own
//! included, for good. The task costs a spawn per batch (`bench_raw`: about 2 % of the
//! handle's rate against a bare client).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

use super::Scheduler;

/// The turn in progress and who waits for its end.
#[derive(Default)]
pub(super) struct Turns {
    /// Turns ended so far.
    ended: u64,
    /// A turn is in progress: its end is on its way.
    open: bool,
    waiting: VecDeque<Waker>,
}

impl Turns {
    /// The current turn ends: wake its waiters, first come first.
    fn end(&mut self) -> VecDeque<Waker> {
        self.ended += 1;
        self.open = false;
        std::mem::take(&mut self.waiting)
    }
}

/// Wait for this fetch's turn: after one yield to the runtime, in the order fetches came.
pub(super) async fn take_turn(state: &Rc<RefCell<Scheduler>>) {
    let mine = {
        let mut s = state.borrow_mut();
        if !s.turns.open {
            s.turns.open = true;
            let state = Rc::clone(state);
            actix_rt::spawn(async move {
                tokio::task::yield_now().await;
                // A task of the runtime's, never inside the scheduler's own code: the cell
                // is free.
                let wakers = state.borrow_mut().turns.end();
                wakers.into_iter().for_each(Waker::wake);
            });
        }
        s.turns.ended
    };
    poll_fn(|cx| {
        let mut s = state.borrow_mut();
        if s.turns.ended > mine {
            Poll::Ready(())
        } else {
            s.turns.waiting.push_back(cx.waker().clone());
            Poll::Pending
        }
    })
    .await;
}
