//! Long-lived tasks that run an owner's jobs one after another: an exit's HTTP requests
//! from a scheduler on another Arbiter.
//!
//! Why not a task per job: a request is a large future; spawning one per request copied
//! it several times and was among the largest costs of that path (`bench_raw`). A worker builds each job's future in place, inside its own future,
//! which lives as long as the worker. (`Fetch` messages do take a task each: measured,
//! that order of sends was the faster one; see `scheduler/admission.rs`.)
//!
//! Workers start as load needs them, up to the pool's cap; beyond it jobs wait in the
//! pool's queue, in order, and the first worker free takes the next. A worker holds its
//! owner only while a job runs, so the owner and its pool go when their last handle goes;
//! the pool then wakes its idle workers to end.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::rc::{Rc, Weak};

use tokio::sync::Notify;

/// What owns a pool: it holds the [`Pool`] and runs each job.
pub(crate) trait Owner: 'static {
    /// A unit of work.
    type Job: 'static;

    /// The pool the owner's jobs wait in.
    fn pool(&self) -> &Pool<Self::Job>;

    /// Run one job to its end.
    fn run(self: Rc<Self>, job: Self::Job) -> impl Future<Output = ()>;
}

/// Jobs waiting for a worker, and the count of workers.
pub(crate) struct Pool<T> {
    queue: RefCell<VecDeque<T>>,
    /// Wakes one idle worker per job queued.
    work: Rc<Notify>,
    /// Worker tasks started and not ended.
    workers: Cell<usize>,
    /// Workers waiting on `work` and not yet woken.
    idle: Cell<usize>,
    /// At most this many workers.
    cap: usize,
}

impl<T> Pool<T> {
    /// A pool of at most `cap` workers (at least one).
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            queue: RefCell::default(),
            work: Rc::new(Notify::new()),
            workers: Cell::new(0),
            idle: Cell::new(0),
            cap: cap.max(1),
        }
    }

    /// Queue `job` for `owner` (whose pool this is): an idle worker is woken, or one is
    /// started while there are fewer than the cap; else the first worker free takes it.
    pub(crate) fn push<O: Owner<Job = T>>(&self, owner: &Weak<O>, job: T) {
        self.queue.borrow_mut().push_back(job);
        if self.idle.get() > 0 {
            self.idle.set(self.idle.get() - 1);
            self.work.notify_one();
        } else if self.workers.get() < self.cap {
            self.workers.set(self.workers.get() + 1);
            // A task of its own, not a future in an actor's context: a context polls
            // every future it holds each time any of them makes progress.
            actix_rt::spawn(worker(owner.clone(), Rc::clone(&self.work)));
        }
    }

    /// Jobs waiting for a worker.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.queue.borrow().len()
    }

    /// The next job, or `None` after counting the caller as idle.
    fn next_or_idle(&self) -> Option<T> {
        let next = self.queue.borrow_mut().pop_front();
        if next.is_none() {
            self.idle.set(self.idle.get() + 1);
        }
        next
    }
}

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        // Idle workers hold only a weak reference: wake them to see it is gone and end.
        self.work.notify_waiters();
    }
}

/// A worker: runs the owner's queued jobs one after another while the owner lives.
async fn worker<O: Owner>(owner: Weak<O>, work: Rc<Notify>) {
    let _count = WorkerCount(owner.clone());
    loop {
        let next = match owner.upgrade() {
            Some(o) => o.pool().next_or_idle().map(|job| (o, job)),
            None => return,
        };
        match next {
            // The strong reference is held only while a job runs.
            Some((o, job)) => o.run(job).await,
            None => work.notified().await,
        }
    }
}

/// Takes a worker off the pool's count when its task ends (a panic inside a job, or its
/// Arbiter stopping), so `push` starts another when one is needed. Idle workers end only
/// with the owner or their Arbiter, so the idle count needs no such care.
struct WorkerCount<O: Owner>(Weak<O>);

impl<O: Owner> Drop for WorkerCount<O> {
    fn drop(&mut self) {
        if let Some(o) = self.0.upgrade() {
            let pool = o.pool();
            pool.workers.set(pool.workers.get().saturating_sub(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs jobs that wait for a signal, and records what ran.
    struct Recorder {
        pool: Pool<u32>,
        ran: RefCell<Vec<u32>>,
        gate: Rc<Notify>,
    }

    impl Owner for Recorder {
        type Job = u32;

        fn pool(&self) -> &Pool<u32> {
            &self.pool
        }

        async fn run(self: Rc<Self>, job: u32) {
            self.gate.notified().await;
            self.ran.borrow_mut().push(job);
        }
    }

    fn recorder(cap: usize) -> Rc<Recorder> {
        Rc::new(Recorder {
            pool: Pool::new(cap),
            ran: RefCell::default(),
            gate: Rc::new(Notify::new()),
        })
    }

    /// Let every spawned task run until it waits.
    async fn settle() {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    }

    #[actix_rt::test]
    async fn at_most_cap_workers_run_and_the_rest_wait_in_order() {
        let r = recorder(2);
        let owner = Rc::downgrade(&r);
        for job in 1..=5 {
            r.pool.push(&owner, job);
        }
        settle().await;
        assert_eq!(r.pool.workers.get(), 2);
        assert_eq!(r.pool.waiting(), 3, "two jobs taken, three waiting");
        for _ in 0..5 {
            r.gate.notify_one();
            settle().await;
        }
        assert_eq!(*r.ran.borrow(), [1, 2, 3, 4, 5]);
        assert_eq!(r.pool.workers.get(), 2, "no worker started beyond the cap");
        assert_eq!(r.pool.idle.get(), 2, "both wait for the next job");
    }

    #[actix_rt::test]
    async fn an_idle_worker_takes_the_next_job_and_none_is_started() {
        let r = recorder(4);
        let owner = Rc::downgrade(&r);
        r.pool.push(&owner, 1);
        settle().await;
        r.gate.notify_one();
        settle().await;
        assert_eq!(r.pool.idle.get(), 1);
        r.pool.push(&owner, 2);
        settle().await;
        r.gate.notify_one();
        settle().await;
        assert_eq!(*r.ran.borrow(), [1, 2]);
        assert_eq!(r.pool.workers.get(), 1);
    }

    #[actix_rt::test]
    async fn workers_end_when_their_owner_goes() {
        let r = recorder(3);
        let owner = Rc::downgrade(&r);
        let gone = owner.clone();
        for job in 1..=3 {
            r.pool.push(&owner, job);
        }
        settle().await;
        for _ in 0..3 {
            r.gate.notify_one();
        }
        settle().await;
        assert_eq!(r.pool.idle.get(), 3);
        // Every worker holds the pool's notifier until its task ends.
        let notifier = Rc::downgrade(&r.pool.work);
        drop(r);
        settle().await;
        assert!(gone.upgrade().is_none(), "no worker keeps the owner alive");
        assert!(notifier.upgrade().is_none(), "every worker task ended");
    }
}
