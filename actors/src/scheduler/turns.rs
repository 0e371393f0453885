//! Direct fetches handed in together take their turns in the order they came.
//!
//! A direct fetch yields once before its admission, so that answers already received
//! (a 429 and the pause it brings) are taken in first (see `run_direct`). Each fetch
//! yielding on its own reverses a batch: tokio runs the tasks a `yield_now` deferred last
//! first, so eight fetches handed in at once were admitted last to first, and a URL list
//! was crawled in the wrong order. Here one fetch of a batch (the first) yields; the
//! others wait behind it and are woken in the order they came once it is back, after the
//! same poll for I/O, so they see the same answers and keep their order.

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
    /// A fetch is yielding for the current turn.
    leading: bool,
    waiting: VecDeque<Waker>,
}

impl Turns {
    /// The current turn ends: wake its waiters, first come first.
    fn end(&mut self) -> VecDeque<Waker> {
        self.ended += 1;
        self.leading = false;
        std::mem::take(&mut self.waiting)
    }
}

/// Ends the leader's turn however its future ends (a caller may drop a fetch while it
/// yields; its followers must not wait for good).
struct Leading<'a>(&'a Rc<RefCell<Scheduler>>);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        // Dropped by the fetch's owner or at the end of the turn, never inside the
        // scheduler's own code: the cell is free.
        let wakers = match self.0.try_borrow_mut() {
            Ok(mut s) => s.turns.end(),
            Err(_) => return,
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// Wait for this fetch's turn: after one yield to the runtime, in the order fetches came.
pub(super) async fn take_turn(state: &Rc<RefCell<Scheduler>>) {
    let turn = {
        let mut s = state.borrow_mut();
        if s.turns.leading {
            Some(s.turns.ended)
        } else {
            s.turns.leading = true;
            None
        }
    };
    match turn {
        None => {
            let lead = Leading(state);
            tokio::task::yield_now().await;
            drop(lead);
        }
        Some(mine) => {
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
    }
}
