//! `check` per limiter on a fake instant stepped a little each call, so that the checks
//! are a mix of Allow and Wait: 1 000 000 rps (T = 1 µs), burst 16, a step of 0.7 µs.
//!
//! Run: `cargo bench --bench limiters`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use exitcrawl::limiter::{
    FixedWindow, Gcra, LeakyBucket, Quota, RateLimiter, SlidingLog, SlidingWindow, TokenBucket,
};

const STEP: Duration = Duration::from_nanos(700);

fn bench_one<L: RateLimiter>(c: &mut Criterion, name: &str, make: fn(Quota, Instant) -> L) {
    let quota = Quota::new(1_000_000.0, 16);
    let start = Instant::now();
    let mut limiter = make(quota, start);
    let mut now = start;
    c.bench_function(&format!("check/{name}"), |b| {
        b.iter(|| {
            now += STEP;
            black_box(limiter.check(black_box(now)))
        })
    });
    // Confirm the mix: about T / STEP of checks are allowed once the burst is spent.
    let (mut allowed, probes) = (0, 10_000);
    for _ in 0..probes {
        now += STEP;
        allowed += u32::from(limiter.check(now).is_allow());
    }
    eprintln!("{name}: {allowed} of {probes} checks allowed");
}

fn limiters(c: &mut Criterion) {
    bench_one(c, "fixed_window", FixedWindow::new);
    bench_one(c, "sliding_log", SlidingLog::new);
    bench_one(c, "sliding_window", SlidingWindow::new);
    bench_one(c, "token_bucket", TokenBucket::new);
    bench_one(c, "leaky_bucket", LeakyBucket::new);
    bench_one(c, "gcra", Gcra::new);
}

criterion_group!(benches, limiters);
criterion_main!(benches);
