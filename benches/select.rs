//! Exit selection over a 64-exit fleet with mixed loads, pacing, regions and exclusions.
//!
//! `select` runs once per dispatched request, so it must stay far below the cost of a
//! request; this bench keeps an eye on that (and on it not allocating: any allocation
//! would show up as a large jump here).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use exitcrawl::select::{select, Candidate, Request};

const NAMES: [&str; 64] = [
    "e00", "e01", "e02", "e03", "e04", "e05", "e06", "e07", "e08", "e09", "e10", "e11", "e12",
    "e13", "e14", "e15", "e16", "e17", "e18", "e19", "e20", "e21", "e22", "e23", "e24", "e25",
    "e26", "e27", "e28", "e29", "e30", "e31", "e32", "e33", "e34", "e35", "e36", "e37", "e38",
    "e39", "e40", "e41", "e42", "e43", "e44", "e45", "e46", "e47", "e48", "e49", "e50", "e51",
    "e52", "e53", "e54", "e55", "e56", "e57", "e58", "e59", "e60", "e61", "e62", "e63",
];

/// 64 exits: capacities 4..=16, loads spread, ~1/8 down, ~1/5 paced, two regions.
fn fleet() -> Vec<Candidate<'static>> {
    (0..64u32)
        .map(|i| {
            let max = 4 + (i * 7) % 13;
            Candidate {
                name: NAMES[i as usize],
                region: Some(if i % 2 == 0 { "eu" } else { "us" }),
                available: i % 8 != 3,
                active: (i * 11) % (max + 1),
                max_concurrent: max,
                ready_in: if i % 5 == 1 {
                    Duration::from_millis(u64::from(i))
                } else {
                    Duration::ZERO
                },
                last_sent: 0,
                family: Some(exitcrawl::select::Family::V4),
            }
        })
        .collect()
}

fn bench_select(c: &mut Criterion) {
    let cands = fleet();
    let mut g = c.benchmark_group("select_64");

    let any = Request::default();
    let mut t = 0u64;
    g.bench_function("any_region", |b| {
        b.iter(|| {
            t = t.wrapping_add(1);
            black_box(select(black_box(&cands), black_box(&any), t))
        })
    });

    let exclude = [0usize, 2, 4, 6];
    let eu = Request {
        preferred: None,
        region: Some("eu"),
        exclude: &exclude,
        family: None,
        avoid: None,
    };
    g.bench_function("region_and_exclude", |b| {
        b.iter(|| {
            t = t.wrapping_add(1);
            black_box(select(black_box(&cands), black_box(&eu), t))
        })
    });

    let pref = Request {
        preferred: Some("e63"),
        ..Request::default()
    };
    g.bench_function("preferred_last", |b| {
        b.iter(|| black_box(select(black_box(&cands), black_box(&pref), 0)))
    });

    // Every exit idle: 56-way tie, exercising the second (tie-break) pass.
    let idle: Vec<_> = cands
        .iter()
        .map(|c| Candidate {
            active: 0,
            ready_in: Duration::ZERO,
            ..*c
        })
        .collect();
    g.bench_function("all_idle_ties", |b| {
        b.iter(|| {
            t = t.wrapping_add(1);
            black_box(select(black_box(&idle), black_box(&any), t))
        })
    });

    g.finish();
}

criterion_group!(benches, bench_select);
criterion_main!(benches);
