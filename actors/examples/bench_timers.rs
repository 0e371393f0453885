//! How late a wake-up comes: tokio's timer against a thread waiting on a condition
//! variable (the mechanism of the scheduler's alarm, `src/scheduler/alarm.rs`), each waking
//! a task on a current-thread runtime (as an Arbiter is). Prints p10, p50, p90 and the
//! maximum of 200 waits of 10–11 ms each.
//!
//! `cargo run --release -p exitcrawl-actors --example bench_timers`

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const WAITS: usize = 200;

fn wait_of(i: usize) -> Duration {
    Duration::from_micros(10_000 + (i as u64 * 37) % 1_000)
}

fn report(what: &str, mut late: Vec<Duration>) {
    late.sort();
    let at = |q: usize| late[(late.len() - 1) * q / 100].as_micros();
    println!(
        "{what}: late by p10 {} µs, p50 {} µs, p90 {} µs, max {} µs ({} waits)",
        at(10),
        at(50),
        at(90),
        at(100),
        late.len()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut late = Vec::with_capacity(WAITS);
        for i in 0..WAITS {
            let due = Instant::now() + wait_of(i);
            tokio::time::sleep_until(due.into()).await;
            late.push(Instant::now() - due);
        }
        report("tokio::time::sleep_until", late);

        let slot = Arc::new((Mutex::new(None::<Instant>), Condvar::new()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let theirs = Arc::clone(&slot);
        std::thread::spawn(move || {
            let (lock, changed) = &*theirs;
            let mut at = lock.lock().expect("lock");
            loop {
                match *at {
                    None => at = changed.wait(at).expect("wait"),
                    Some(due) => {
                        let now = Instant::now();
                        if now >= due {
                            *at = None;
                            if tx.send(due).is_err() {
                                return;
                            }
                        } else {
                            at = changed.wait_timeout(at, due - now).expect("wait").0;
                        }
                    }
                }
            }
        });
        let mut late = Vec::with_capacity(WAITS);
        for i in 0..WAITS {
            let due = Instant::now() + wait_of(i);
            *slot.0.lock().expect("lock") = Some(due);
            slot.1.notify_one();
            let rang = rx.recv().await.expect("a ring");
            late.push(Instant::now() - rang);
        }
        report("condvar thread -> channel", late);
    });
}
