//! The state machine on the fake clock.

use super::*;
use crate::clock::{Clock, FakeClock};
use crate::rng::{NoJitter, SplitMix64};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn fail_n(h: &mut ExitHealth, clock: &FakeClock, n: u32) -> Option<Transition> {
    let mut last = None;
    for i in 0..n {
        last = h.on_failure(clock.now(), &format!("connect refused #{i}"), &mut NoJitter);
    }
    last
}

#[test]
fn defaults() {
    let p = HealthPolicy::default();
    assert_eq!(p.consecutive_failures, 3);
    assert_eq!(p.base_ejection, secs(30));
    assert_eq!(p.max_ejection, secs(300));
    assert_eq!(p.jitter, 0.1);
    let h = ExitHealth::default();
    assert_eq!(h.state(), HealthState::Healthy);
    assert!(h.is_available());
    assert_eq!(h.last_error(), None);
    assert_eq!(h.ejections(), 0);
}

#[test]
fn full_cycle_healthy_ejected_probing_healthy() {
    let clock = FakeClock::new();
    let t0 = clock.now();
    let mut h = ExitHealth::default();

    assert_eq!(h.on_failure(t0, "timeout", &mut NoJitter), None);
    assert_eq!(h.on_failure(t0, "timeout", &mut NoJitter), None);
    assert!(h.is_available());
    let t = h.on_failure(t0, "connection refused", &mut NoJitter);
    assert_eq!(
        t,
        Some(Transition::Ejected {
            until: t0 + secs(30)
        })
    );
    assert_eq!(
        h.state(),
        HealthState::Ejected {
            until: t0 + secs(30)
        }
    );
    assert!(!h.is_available());
    assert_eq!(h.consecutive_failures(), 3);
    assert_eq!(h.ejections(), 1);
    assert_eq!(h.last_error(), Some("connection refused"));

    // Not yet.
    clock.advance(secs(29));
    assert_eq!(h.poll(clock.now()), None);
    // A late result of an in-flight request changes nothing.
    assert_eq!(h.on_success(clock.now()), None);
    assert_eq!(h.on_failure(clock.now(), "late", &mut NoJitter), None);
    assert_eq!(h.ejected_until(), Some(t0 + secs(30)));

    clock.advance(secs(1));
    assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
    assert_eq!(h.state(), HealthState::Probing);
    assert!(h.is_available() && h.is_probing());
    assert_eq!(h.poll(clock.now()), None);

    assert_eq!(h.on_success(clock.now()), Some(Transition::Recovered));
    assert_eq!(h.state(), HealthState::Healthy);
    assert_eq!(h.consecutive_failures(), 0);
    assert_eq!(h.on_success(clock.now()), None);
}

#[test]
fn success_resets_consecutive_failures() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    assert_eq!(fail_n(&mut h, &clock, 2), None);
    h.on_success(clock.now());
    assert_eq!(fail_n(&mut h, &clock, 2), None);
    assert_eq!(h.state(), HealthState::Healthy);
    assert!(matches!(
        fail_n(&mut h, &clock, 1),
        Some(Transition::Ejected { .. })
    ));
}

#[test]
fn probe_failure_reejects_longer_up_to_cap() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    fail_n(&mut h, &clock, 3);
    let mut seen = vec![];
    for _ in 0..12 {
        let until = h.ejected_until().unwrap();
        seen.push((until - clock.now()).as_secs());
        clock.advance_to(until);
        assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
        // One failure while probing is enough.
        let t = h.on_failure(clock.now(), "still down", &mut NoJitter);
        assert!(matches!(t, Some(Transition::Ejected { .. })));
    }
    assert_eq!(
        seen,
        [30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300]
    );
    assert_eq!(h.ejections(), 13);
}

#[test]
fn consecutive_failures_zero_means_one() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::new(HealthPolicy {
        consecutive_failures: 0,
        ..HealthPolicy::default()
    });
    assert!(matches!(
        fail_n(&mut h, &clock, 1),
        Some(Transition::Ejected { .. })
    ));
}

#[test]
fn jitter_stays_within_bounds_and_varies() {
    let clock = FakeClock::new();
    let policy = HealthPolicy::default();
    let mut rng = SplitMix64::new(7);
    let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
    for n in 1..=12u32 {
        for _ in 0..200 {
            let mut h = ExitHealth::new(policy);
            // Build up n-1 prior ejections via failed probes.
            for _ in 0..policy.consecutive_failures {
                h.on_failure(clock.now(), "x", &mut rng);
            }
            for _ in 1..n {
                clock.advance_to(h.ejected_until().unwrap());
                h.poll(clock.now());
                h.on_failure(clock.now(), "x", &mut rng);
            }
            let d = h.ejected_until().unwrap() - clock.now();
            let nominal = policy.ejection_time(n);
            assert!(d >= nominal.mul_f64(0.9), "n={n} d={d:?}");
            assert!(d <= nominal.mul_f64(1.1), "n={n} d={d:?}");
            assert!(d <= policy.max_ejection, "cap includes jitter: {d:?}");
            if n == 1 {
                lo = lo.min(d);
                hi = hi.max(d);
            }
        }
    }
    // 200 draws spread over most of ±10 % of 30 s.
    assert!(lo < secs(28) && hi > secs(32), "lo={lo:?} hi={hi:?}");
}

#[test]
fn out_of_range_jitter_is_clamped() {
    let clock = FakeClock::new();
    for jitter in [f64::NAN, -1.0, 0.0] {
        let mut h = ExitHealth::new(HealthPolicy {
            jitter,
            ..HealthPolicy::default()
        });
        for _ in 0..3 {
            h.on_failure(clock.now(), "x", &mut SplitMix64::new(1));
        }
        assert_eq!(h.ejected_until(), Some(clock.now() + secs(30)), "{jitter}");
    }
    let mut rng = SplitMix64::new(3);
    for _ in 0..100 {
        let mut h = ExitHealth::new(HealthPolicy {
            jitter: 5.0,
            consecutive_failures: 1,
            ..HealthPolicy::default()
        });
        h.on_failure(clock.now(), "x", &mut rng);
        let d = h.ejected_until().unwrap() - clock.now();
        assert!(d <= secs(60));
    }
}

#[test]
fn ejection_count_halves_per_healthy_period() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    fail_n(&mut h, &clock, 3);
    for _ in 0..3 {
        clock.advance_to(h.ejected_until().unwrap());
        h.poll(clock.now());
        h.on_failure(clock.now(), "x", &mut NoJitter);
    }
    assert_eq!(h.ejections(), 4);
    clock.advance_to(h.ejected_until().unwrap());
    h.poll(clock.now());
    assert_eq!(h.on_success(clock.now()), Some(Transition::Recovered));

    // Healthy but less than one period: no decay.
    clock.advance(secs(299));
    h.on_success(clock.now());
    assert_eq!(h.ejections(), 4);
    // One full period: halved.
    clock.advance(secs(1));
    h.on_success(clock.now());
    assert_eq!(h.ejections(), 2);
    // Two more periods in one step: halved twice.
    clock.advance(secs(600));
    h.on_success(clock.now());
    assert_eq!(h.ejections(), 0);

    // Back to base ejection.
    let t = fail_n(&mut h, &clock, 3);
    assert_eq!(
        t,
        Some(Transition::Ejected {
            until: clock.now() + secs(30)
        })
    );
}

#[test]
fn decay_applies_at_ejection_time_too() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    fail_n(&mut h, &clock, 3);
    clock.advance_to(h.ejected_until().unwrap());
    h.poll(clock.now());
    h.on_failure(clock.now(), "x", &mut NoJitter); // ejections = 2
    clock.advance_to(h.ejected_until().unwrap());
    h.poll(clock.now());
    h.on_success(clock.now());
    // Quiet for a long time (no successes recorded), then fails.
    clock.advance(secs(300));
    let t = fail_n(&mut h, &clock, 3);
    // 2 halved to 1, then +1 = 2 → 60 s.
    assert_eq!(
        t,
        Some(Transition::Ejected {
            until: clock.now() + secs(60)
        })
    );
}

#[test]
fn fleet_reports_all_down_with_next_probe() {
    let clock = FakeClock::new();
    let t0 = clock.now();
    let mut fleet: Vec<ExitHealth> = (0..3).map(|_| ExitHealth::default()).collect();
    assert_eq!(
        fleet_state(&fleet),
        FleetState::Available {
            available: 3,
            total: 3
        }
    );

    fail_n(&mut fleet[0], &clock, 3); // until t0 + 30
    clock.advance(secs(5));
    fail_n(&mut fleet[1], &clock, 3); // until t0 + 35
    assert_eq!(
        fleet_state(&fleet),
        FleetState::Available {
            available: 1,
            total: 3
        }
    );
    clock.advance(secs(5));
    // The last one goes down too: reported, not silent.
    let t = fail_n(&mut fleet[2], &clock, 3);
    assert!(matches!(t, Some(Transition::Ejected { .. })));
    let s = fleet_state(&fleet);
    assert_eq!(
        s,
        FleetState::AllDown {
            next_probe: Some(t0 + secs(30))
        }
    );
    assert!(s.is_all_down());

    // At next_probe, polling brings one back as probing → available again.
    clock.advance_to(t0 + secs(30));
    let polled: Vec<_> = fleet.iter_mut().map(|e| e.poll(clock.now())).collect();
    assert_eq!(polled, [Some(Transition::Probing), None, None]);
    assert_eq!(
        fleet_state(&fleet),
        FleetState::Available {
            available: 1,
            total: 3
        }
    );

    assert_eq!(
        fleet_state(&[] as &[ExitHealth]),
        FleetState::AllDown { next_probe: None }
    );
}

#[test]
fn seeded_runs_are_reproducible() {
    let run = |seed| {
        let clock = FakeClock::new();
        let t0 = clock.now();
        let mut rng = SplitMix64::new(seed);
        let mut h = ExitHealth::new(HealthPolicy {
            consecutive_failures: 1,
            ..HealthPolicy::default()
        });
        let mut out = vec![];
        for _ in 0..5 {
            h.on_failure(clock.now(), "x", &mut rng);
            let u = h.ejected_until().unwrap();
            out.push(u - t0);
            clock.advance_to(u);
            h.poll(clock.now());
        }
        out
    };
    assert_eq!(run(11), run(11));
    assert_ne!(run(11), run(12));
}

#[test]
fn an_exit_broken_at_start_is_ejected_at_once_and_probed_later() {
    use crate::rng::SplitMix64;
    let now = Instant::now();
    let mut rng = SplitMix64::new(1);
    let mut h = ExitHealth::new(HealthPolicy::default());
    let t = h.fail_at_start(now, "bind 192.0.2.1:0: address not available", &mut rng);
    assert!(matches!(t, Some(Transition::Ejected { .. })));
    assert!(!h.is_available());
    assert_eq!(
        h.last_error(),
        Some("bind 192.0.2.1:0: address not available")
    );
    let until = h.ejected_until().unwrap();
    assert_eq!(h.poll(until), Some(Transition::Probing));
}

/// Checks every `interval`, real answers every second: the policy's window is 12 s.
fn check(h: &mut ExitHealth, clock: &FakeClock) -> CheckVerdict {
    h.on_check_failure(clock.now(), "connect refused (health url)", &mut NoJitter)
}

#[test]
fn failing_checks_while_real_answers_succeed_never_eject_and_say_so_once() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    let mut verdicts = Vec::new();
    for _ in 0..30 {
        for _ in 0..10 {
            clock.advance(secs(1));
            assert_eq!(h.on_success(clock.now()), None);
        }
        verdicts.push(check(&mut h, &clock));
    }
    assert_eq!(h.state(), HealthState::Healthy);
    assert_eq!(h.consecutive_failures(), 0);
    assert_eq!(verdicts[0], CheckVerdict::Discounted { first: true });
    assert!(
        verdicts[1..]
            .iter()
            .all(|v| *v == CheckVerdict::Discounted { first: false }),
        "{verdicts:?}"
    );
    // A check that succeeds ends the run: the next discounted one is a first again.
    assert_eq!(h.on_check_success(clock.now()), None);
    assert_eq!(
        check(&mut h, &clock),
        CheckVerdict::Discounted { first: true }
    );
}

#[test]
fn a_probing_exit_is_judged_by_its_real_answers_before_a_failing_check() {
    // Ejected after an idle spell of failing checks (a wrong health URL), then probed:
    // the check fails at once, the real requests sent through it answer after.
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    for _ in 0..3 {
        clock.advance(secs(10));
        check(&mut h, &clock);
    }
    assert!(matches!(h.state(), HealthState::Ejected { .. }));
    clock.advance(secs(30));
    assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
    assert!(matches!(
        check(&mut h, &clock),
        CheckVerdict::Discounted { .. }
    ));
    assert_eq!(h.state(), HealthState::Probing);
    clock.advance(Duration::from_millis(80));
    assert_eq!(h.on_success(clock.now()), Some(Transition::Recovered));
    // A probing exit whose real traffic fails is ejected at once.
    for _ in 0..3 {
        clock.advance(secs(10));
        h.on_failure(clock.now(), "bind failed", &mut NoJitter);
    }
    assert!(matches!(h.state(), HealthState::Ejected { .. }));
    clock.advance(secs(120));
    assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
    assert!(matches!(
        h.on_failure(clock.now(), "bind failed", &mut NoJitter),
        Some(Transition::Ejected { .. })
    ));
    // With no real answer within the window, the checks count again.
    clock.advance(secs(600));
    assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
    clock.advance(secs(13));
    assert!(matches!(
        check(&mut h, &clock),
        CheckVerdict::Counted(Some(Transition::Ejected { .. }))
    ));
}

#[test]
fn failing_checks_count_once_real_answers_stop() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    h.on_success(clock.now());
    clock.advance(secs(12));
    assert_eq!(
        check(&mut h, &clock),
        CheckVerdict::Discounted { first: true }
    );
    // Past the window: each check counts, the third ejects.
    clock.advance(Duration::from_millis(1));
    assert_eq!(check(&mut h, &clock), CheckVerdict::Counted(None));
    clock.advance(secs(10));
    assert_eq!(check(&mut h, &clock), CheckVerdict::Counted(None));
    clock.advance(secs(10));
    assert_eq!(
        check(&mut h, &clock),
        CheckVerdict::Counted(Some(Transition::Ejected {
            until: clock.now() + secs(30)
        }))
    );
    assert_eq!(h.last_error(), Some("connect refused (health url)"));
}

#[test]
fn failing_checks_and_failing_real_requests_eject_as_before() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    h.on_success(clock.now());
    clock.advance(secs(1));
    // A real failure of the exit's own after the last success: the success no
    // longer speaks for the exit, so the checks count with the real failures.
    assert_eq!(
        h.on_failure(clock.now(), "bind failed", &mut NoJitter),
        None
    );
    assert_eq!(check(&mut h, &clock), CheckVerdict::Counted(None));
    let t = check(&mut h, &clock);
    assert_eq!(
        t,
        CheckVerdict::Counted(Some(Transition::Ejected {
            until: clock.now() + secs(30)
        }))
    );
    // Probing, no real answer yet: one failing check ejects it again, for longer.
    clock.advance(secs(30));
    assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
    assert_eq!(
        check(&mut h, &clock),
        CheckVerdict::Counted(Some(Transition::Ejected {
            until: clock.now() + secs(60)
        }))
    );
}

#[test]
fn an_exit_without_real_traffic_is_ejected_by_its_checks() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    assert_eq!(check(&mut h, &clock), CheckVerdict::Counted(None));
    clock.advance(secs(10));
    assert_eq!(check(&mut h, &clock), CheckVerdict::Counted(None));
    clock.advance(secs(10));
    assert!(matches!(
        check(&mut h, &clock),
        CheckVerdict::Counted(Some(Transition::Ejected { .. }))
    ));
    assert!(!h.is_available());
    // A check that succeeds brings a probing exit back, as a real answer would.
    clock.advance(secs(30));
    h.poll(clock.now());
    assert_eq!(h.on_check_success(clock.now()), Some(Transition::Recovered));
}

#[test]
fn a_probing_exit_that_answers_real_requests_is_not_reejected_by_a_failing_check() {
    let clock = FakeClock::new();
    let mut h = ExitHealth::default();
    fail_n(&mut h, &clock, 3);
    clock.advance(secs(30));
    assert_eq!(h.poll(clock.now()), Some(Transition::Probing));
    assert_eq!(h.on_success(clock.now()), Some(Transition::Recovered));
    clock.advance(secs(2));
    assert_eq!(
        check(&mut h, &clock),
        CheckVerdict::Discounted { first: true }
    );
    assert_eq!(h.state(), HealthState::Healthy);
}
