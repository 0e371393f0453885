//! `CutOff`: ends the direct path's attempts when a shutdown's grace period is over.
//!
//! Why not `tokio::sync::Notify` raced with `futures_util::future::select`: every fetch
//! on the direct path registers with the cut-off and leaves it again, for an event that
//! comes at most once per crawler. Notify's waiter list sits behind a lock and cost about
//! 200 instructions per fetch (callgrind, `bench_raw`); one thread owns a scheduler and
//! its direct fetches, so a slot in a plain list does.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Fired once, it ends every [`Race`] still running and any that starts later.
#[derive(Debug, Default)]
pub(crate) struct CutOff {
    fired: Cell<bool>,
    waiting: RefCell<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    /// The waker of each race that has waited, by slot.
    wakers: Vec<Option<Waker>>,
    /// Slots no race holds.
    free: Vec<usize>,
}

impl CutOff {
    /// End every race: each one polled from now on ends with `None`.
    pub(crate) fn fire(&self) {
        self.fired.set(true);
        let wakers: Vec<Waker> = {
            let mut w = self.waiting.borrow_mut();
            w.wakers.iter_mut().filter_map(Option::take).collect()
        };
        // Woken outside the borrow: a waker is foreign code.
        for w in wakers {
            w.wake();
        }
    }

    /// `fut`, unless the cut-off fires first.
    pub(crate) fn race<'a, F: Future>(&'a self, fut: Pin<&'a mut F>) -> Race<'a, F> {
        Race {
            fut,
            cut: self,
            slot: None,
        }
    }

    /// Keep `waker` in `slot` (taking a slot on the first wait).
    fn register(&self, slot: &mut Option<usize>, waker: &Waker) {
        let mut w = self.waiting.borrow_mut();
        let i = match *slot {
            Some(i) => i,
            None => {
                let i = match w.free.pop() {
                    Some(i) => i,
                    None => {
                        w.wakers.push(None);
                        w.wakers.len() - 1
                    }
                };
                *slot = Some(i);
                i
            }
        };
        match &mut w.wakers[i] {
            Some(old) if old.will_wake(waker) => {}
            held => *held = Some(waker.clone()),
        }
    }
}

/// A future raced against a [`CutOff`]: `Some` of its output, or `None` when cut off.
pub(crate) struct Race<'a, F> {
    fut: Pin<&'a mut F>,
    cut: &'a CutOff,
    slot: Option<usize>,
}

impl<F: Future> Future for Race<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Race` is `Unpin`: it holds the future by a pinned reference.
        let this = self.get_mut();
        if this.cut.fired.get() {
            return Poll::Ready(None);
        }
        match this.fut.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Some(out)),
            Poll::Pending => {
                this.cut.register(&mut this.slot, cx.waker());
                Poll::Pending
            }
        }
    }
}

impl<F> Drop for Race<'_, F> {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let mut w = self.cut.waiting.borrow_mut();
            w.wakers[i] = None;
            w.free.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (Arc::clone(&c), Waker::from(c))
    }

    #[test]
    fn a_finished_future_wins_and_gives_its_slot_back() {
        let cut = CutOff::default();
        let (_, w) = waker();
        let mut cx = Context::from_waker(&w);
        let mut gate = std::pin::pin!(futures_util::future::pending::<()>());
        {
            let mut race = std::pin::pin!(cut.race(gate.as_mut()));
            assert!(race.as_mut().poll(&mut cx).is_pending());
            assert_eq!(cut.waiting.borrow().free, Vec::<usize>::new());
        }
        assert_eq!(cut.waiting.borrow().free, vec![0]);
        let mut ready = std::pin::pin!(std::future::ready(7));
        let mut race = std::pin::pin!(cut.race(ready.as_mut()));
        assert_eq!(race.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
    }

    #[test]
    fn firing_wakes_waiting_races_and_ends_them_and_later_ones() {
        let cut = CutOff::default();
        let (count, w) = waker();
        let mut cx = Context::from_waker(&w);
        let mut a = std::pin::pin!(futures_util::future::pending::<u8>());
        let mut b = std::pin::pin!(futures_util::future::pending::<u8>());
        let mut ra = std::pin::pin!(cut.race(a.as_mut()));
        let mut rb = std::pin::pin!(cut.race(b.as_mut()));
        assert!(ra.as_mut().poll(&mut cx).is_pending());
        assert!(rb.as_mut().poll(&mut cx).is_pending());
        // A second wait with the same waker keeps the slot and the waker.
        assert!(ra.as_mut().poll(&mut cx).is_pending());
        assert_eq!(cut.waiting.borrow().wakers.len(), 2);
        cut.fire();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(ra.as_mut().poll(&mut cx), Poll::Ready(None));
        assert_eq!(rb.as_mut().poll(&mut cx), Poll::Ready(None));
        let mut ready = std::pin::pin!(std::future::ready(1u8));
        let mut late = std::pin::pin!(cut.race(ready.as_mut()));
        assert_eq!(late.as_mut().poll(&mut cx), Poll::Ready(None));
    }
}
