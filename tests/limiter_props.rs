//! Properties every limiter must keep, on simulated time (plain `Instant` arithmetic):
//! (a) in any window of length W the admitted count stays within the bound its module
//! documents; (b) a greedy client, retrying exactly when told, gets the configured rate in
//! the long run; (c) every `Wait(d)` is exact, also after `set_rate` and `drain`.

use std::time::{Duration, Instant};

use exitcrawl::limiter::{build, Kind, Quota, RateLimiter};
use exitcrawl::Decision;
use proptest::prelude::*;

const NS: Duration = Duration::from_nanos(1);

/// Emission interval `T` and window `P = B × T` in ns.
fn t_and_p(q: Quota) -> (u64, u64) {
    let t = q.interval().as_nanos() as u64;
    (t, t * u64::from(q.burst))
}

/// The bound each module states: most admissions in any closed window of length `w` ns.
fn bound(kind: Kind, q: Quota, w: u64) -> u64 {
    let (t, p) = t_and_p(q);
    let b = u64::from(q.burst);
    match kind {
        Kind::FixedWindow => b * (w.div_ceil(p) + 1),
        Kind::SlidingLog => b * (w / p + 1),
        Kind::SlidingWindow if w == 0 => b,
        Kind::SlidingWindow => (w - 1).div_ceil(t) + b,
        Kind::TokenBucket | Kind::LeakyBucket | Kind::Gcra => w / t + b,
    }
}

/// Most of the sorted `times` in any window `[s, s + w]` (it suffices to start at each).
fn max_in_window(times: &[u64], w: u64) -> u64 {
    let mut best = 0;
    let mut end = 0;
    for (i, &s) in times.iter().enumerate() {
        while end < times.len() && times[end] - s <= w {
            end += 1;
        }
        best = best.max(end - i);
    }
    best as u64
}

fn quota() -> impl Strategy<Value = Quota> {
    (0.5f64..2_000.0, 1u32..=20).prop_map(|(rps, burst)| Quota::new(rps, burst))
}

/// One arrival: how to pick the gap since the previous one, and a raw number to scale.
fn arrivals() -> impl Strategy<Value = Vec<(u8, u64)>> {
    prop::collection::vec((0u8..5, any::<u64>()), 1..300)
}

/// Runs `arrivals` through a fresh `kind` limiter; returns the admitted instants in ns.
fn admitted(kind: Kind, q: Quota, arrivals: &[(u8, u64)]) -> Vec<u64> {
    let (t, p) = t_and_p(q);
    let t0 = Instant::now();
    let mut l = build(kind, q, t0);
    let (mut now, mut last_wait, mut out) = (0u64, 0u64, Vec::new());
    for &(how, raw) in arrivals {
        now += match how {
            0 => 0,
            1 => last_wait,                   // exactly when told
            2 => last_wait.saturating_sub(1), // a hair early
            3 => raw % (2 * t),               // within a couple of intervals
            _ => raw % (3 * p),               // anywhere within a few windows
        };
        match l.check(t0 + Duration::from_nanos(now)) {
            Decision::Allow => out.push(now),
            Decision::Wait(d) => last_wait = d.as_nanos() as u64,
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn admitted_in_any_window_within_the_stated_bound(
        q in quota(),
        arrivals in arrivals(),
        extra_w in any::<u64>(),
    ) {
        let (t, p) = t_and_p(q);
        let windows = [0, 1, t - 1, t, t + 1, p / 2, p - 1, p, p + 1, 2 * p + t / 2, extra_w % (4 * p)];
        for kind in Kind::ALL {
            let times = admitted(kind, q, &arrivals);
            for w in windows {
                let (got, max) = (max_in_window(&times, w), bound(kind, q, w));
                prop_assert!(got <= max, "{kind:?} {q:?}: {got} admitted in {w} ns, bound {max}");
            }
        }
    }

    #[test]
    fn greedy_client_gets_the_configured_rate(
        rps in 0.5f64..5_000.0,
        burst in 1u32..=20,
    ) {
        let q = Quota::new(rps, burst);
        // Enough admissions that the initial burst (at most 2B extra) is under 1%.
        let n = 200 * u64::from(burst) + 1_000;
        for kind in Kind::ALL {
            let t0 = Instant::now();
            let mut l = build(kind, q, t0);
            let (mut now, mut last) = (t0, t0);
            let mut count = 0;
            while count < n {
                match l.check(now) {
                    Decision::Allow => {
                        count += 1;
                        last = now;
                    }
                    Decision::Wait(d) => now += d,
                }
            }
            let rate = (n - 1) as f64 / (last - t0).as_secs_f64();
            prop_assert!((rate / rps - 1.0).abs() < 0.01, "{kind:?} {q:?}: {rate} rps");
        }
    }

    #[test]
    fn every_wait_is_exact_through_set_rate_and_drain(
        q in quota(),
        ops in prop::collection::vec((0u8..6, any::<u64>()), 1..200),
    ) {
        for kind in Kind::ALL {
            let mut now = Instant::now();
            let mut l: Box<dyn RateLimiter> = build(kind, q, now);
            for &(op, raw) in &ops {
                let (t, p) = t_and_p(l.quota());
                match op {
                    0 => now += Duration::from_nanos(raw % (3 * p)),
                    1 => now += Duration::from_nanos(raw % t),
                    2 => l.set_rate(0.5 + (raw % 20_000) as f64 / 10.0, now),
                    3 => {
                        l.drain(now);
                        let d = l.check(now).wait();
                        prop_assert!(d >= l.quota().interval(), "{kind:?}: {d:?} after drain");
                    }
                    _ => {
                        if let Decision::Wait(d) = l.check(now) {
                            prop_assert_eq!(l.check(now + d - NS), Decision::Wait(NS), "{:?}", kind);
                            now += d;
                            prop_assert_eq!(l.check(now), Decision::Allow, "{:?}", kind);
                        }
                    }
                }
            }
        }
    }
}
