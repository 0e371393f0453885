//! The controller's own tests, on the fake clock.
use super::*;
use crate::clock::{Clock, FakeClock};
use crate::decision::Decision;
use crate::headers::Pacing;
use crate::limiter::{Quota, RateLimiter, TokenBucket};

const MS: Duration = Duration::from_millis(1);

pub(super) fn ok(sent_at: Instant) -> Response {
    Response {
        sent_at,
        latency: 50 * MS,
        signal: Signal::Success,
        limited: true,
        backlog: None,
    }
}

pub(super) fn throttled(sent_at: Instant, retry_after: Option<Duration>) -> Response {
    Response {
        sent_at,
        latency: 50 * MS,
        signal: Signal::Throttle { retry_after },
        limited: true,
        backlog: None,
    }
}

/// A controller after 1 s of answers, 50 ms each, one per 10 ms, at a 250 ms doubling
/// time.
pub(super) fn ramped(c: &FakeClock) -> Controller {
    let cfg = AimdConfig {
        doubling: Duration::from_millis(250),
        ..AimdConfig::default()
    };
    let mut ctl = Controller::new(cfg, c.now());
    for _ in 0..100 {
        c.advance(10 * MS);
        ctl.on_response(&ok(c.now() - 50 * MS), c.now());
    }
    ctl
}

/// [`ramped`], then throttled with `Retry-After: 1`.
fn ramped_then_throttled(c: &FakeClock) -> Controller {
    let mut ctl = ramped(c);
    ctl.on_response(
        &throttled(c.now() - 50 * MS, Some(Duration::from_secs(1))),
        c.now(),
    );
    ctl
}

#[test]
fn slow_start_doubles_per_doubling_time() {
    let c = FakeClock::new();
    let ctl = ramped(&c);
    // 1 s at a 250 ms doubling time: 5 → 80.
    assert!((ctl.rate() - 80.0).abs() < 1.0, "rate {}", ctl.rate());
    assert_eq!(ctl.phase(), Phase::SlowStart);
}

#[test]
fn slow_start_doubles_at_most_once_per_request() {
    // A small host's pace: each answer one interval at the current rate after the last
    // (200 ms at 5 req/s). The doubling time alone (100 ms) would quadruple the rate per
    // answer.
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    let mut before = ctl.rate();
    for _ in 0..3 {
        c.advance(Duration::from_secs_f64(1.0 / before));
        ctl.on_response(&ok(c.now() - 50 * MS), c.now());
        assert!(
            ctl.rate() <= 2.0 * before + 1e-9,
            "{before} grew to {} in one answer",
            ctl.rate()
        );
        assert!(ctl.rate() > before, "slow start still grows");
        before = ctl.rate();
    }
}

#[test]
fn one_decrease_per_round_trip() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    for _ in 0..100 {
        c.advance(10 * MS);
        ctl.on_response(&ok(c.now() - 50 * MS), c.now());
    }
    let sent_before = c.now() - 50 * MS;
    let adj = ctl.on_response(&throttled(sent_before, None), c.now());
    assert!(adj.is_some());
    assert_eq!(ctl.decreases(), 1);
    let after_first = ctl.rate();
    // 99 more 429s for requests sent before the decrease: no further cut.
    for _ in 0..99 {
        c.advance(MS / 2);
        ctl.on_response(&throttled(sent_before, None), c.now());
    }
    assert_eq!(ctl.decreases(), 1);
    assert_eq!(ctl.rate(), after_first);
    // A 429 for a request sent after the decrease is news.
    c.advance(MS);
    ctl.on_response(&throttled(c.now(), None), c.now());
    assert_eq!(ctl.decreases(), 2);
    assert!(ctl.rate() < after_first);
}

#[test]
fn a_run_of_refusals_slows_the_rate_but_keeps_the_estimate_of_its_first_cut() {
    let c = FakeClock::new();
    let mut ctl = ramped(&c);
    ctl.on_response(&throttled(c.now() - 50 * MS, None), c.now());
    let (estimate, after_first) = (ctl.capacity_estimate(), ctl.rate());
    // The site refuses everything for a while: each round trip's refusal is news (sent
    // after the last cut) and slows the rate, but nothing got through to say the
    // capacity is lower.
    let mut rate = after_first;
    for _ in 0..5 {
        c.advance(60 * MS);
        ctl.on_response(&throttled(c.now() - 10 * MS, None), c.now());
        assert!(ctl.rate() < rate, "{} then {rate}", ctl.rate());
        assert_eq!(ctl.capacity_estimate(), estimate);
        rate = ctl.rate();
    }
    assert_eq!(ctl.decreases(), 6);
    // The first success resumes the curve where the run's first cut began it.
    c.advance(60 * MS);
    ctl.on_response(&ok(c.now() - 10 * MS), c.now());
    assert!(ctl.rate() >= 0.999 * after_first, "{}", ctl.rate());
    // A refusal after a success is a new run: its cut lowers the estimate.
    c.advance(60 * MS);
    ctl.on_response(&throttled(c.now() - 10 * MS, None), c.now());
    assert!(ctl.capacity_estimate() < estimate);
}

#[test]
fn throttle_holds_the_key_and_retry_after_is_a_floor() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    c.advance(MS);
    let adj = ctl.on_response(&throttled(c.now(), None), c.now()).unwrap();
    let hold = adj.pause_until.unwrap() - c.now();
    assert!(hold > Duration::ZERO && hold <= 250 * MS, "hold {hold:?}");
    c.advance(MS);
    let adj = ctl
        .on_response(
            &throttled(c.now() - MS, Some(Duration::from_secs(7))),
            c.now(),
        )
        .unwrap();
    assert_eq!(adj.pause_until, Some(c.now() + Duration::from_secs(7)));
    // A later, shorter Retry-After does not shorten it.
    ctl.on_response(&throttled(c.now(), Some(Duration::from_secs(1))), c.now());
    assert_eq!(
        ctl.pause_until(c.now()),
        Some(c.now() + Duration::from_secs(7))
    );
}

#[test]
fn rate_stays_within_bounds() {
    let c = FakeClock::new();
    let cfg = AimdConfig {
        min_rps: 2.0,
        max_rps: 20.0,
        ..AimdConfig::default()
    };
    let mut ctl = Controller::new(cfg, c.now());
    for _ in 0..1000 {
        c.advance(10 * MS);
        ctl.on_response(&ok(c.now()), c.now());
    }
    assert_eq!(ctl.rate(), 20.0);
    for _ in 0..100 {
        c.advance(10 * MS);
        ctl.on_response(&throttled(c.now(), None), c.now());
    }
    assert_eq!(ctl.rate(), 2.0);
}

#[test]
fn announced_limits_cap_the_rate_and_pause_when_used_up() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    for _ in 0..200 {
        c.advance(10 * MS);
        ctl.on_response(&ok(c.now()), c.now());
    }
    assert!(ctl.rate() > 100.0);
    let hint = Pacing {
        pause_for: None,
        min_interval: Some(100 * MS),
        max_rps: None,
    };
    let adj = ctl.on_hint(&hint, c.now()).unwrap();
    assert!((adj.rps - 10.0).abs() < 1e-9);
    let hint = Pacing {
        pause_for: Some(Duration::from_secs(3)),
        min_interval: None,
        max_rps: None,
    };
    let adj = ctl.on_hint(&hint, c.now()).unwrap();
    assert_eq!(adj.pause_until, Some(c.now() + Duration::from_secs(3)));
}

#[test]
fn rising_latency_ends_slow_start_and_overload_cuts_the_rate() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    for _ in 0..50 {
        c.advance(10 * MS);
        ctl.on_response(&ok(c.now()), c.now());
    }
    let before = ctl.rate();
    for _ in 0..30 {
        c.advance(10 * MS);
        let r = Response {
            sent_at: c.now(),
            latency: 80 * MS,
            signal: Signal::Success,
            limited: true,
            backlog: None,
        };
        ctl.on_response(&r, c.now());
    }
    // Slow start ends near what the site accepted (answers arrive at 100/s here),
    // without counting a cut.
    assert_eq!(ctl.phase(), Phase::Probe);
    assert!(
        ctl.rate() >= 50.0 && ctl.rate() <= before.max(100.0) * 1.01,
        "{} vs {before}",
        ctl.rate()
    );
    assert_eq!(ctl.decreases(), 0);
    // A round takes 32 answers at this rate and round trip.
    for _ in 0..64 {
        c.advance(10 * MS);
        let r = Response {
            sent_at: c.now(),
            latency: 200 * MS,
            signal: Signal::Success,
            limited: true,
            backlog: None,
        };
        ctl.on_response(&r, c.now());
    }
    assert!(ctl.decreases() >= 1);
}

#[test]
fn a_latency_cut_stretches_the_cycle_unless_the_site_refused_with_quick_answers() {
    let cut_k = |refused_quick: bool| {
        // At most 100/s: a cycle of `probe_requests` then outlasts `probe_time`.
        let (c, mut ctl) = capped(100.0);
        // Slow start with quick answers (20 ms), then a throttle: with answers as quick
        // as ever, or after rounds four times slower (a queue before the refusal).
        crawl(&mut ctl, &c, Duration::from_secs(2), Signal::Success);
        if !refused_quick {
            // One round of them (32 answers).
            for _ in 0..40 {
                c.advance(10 * MS);
                let r = Response {
                    sent_at: c.now() - 80 * MS,
                    latency: 80 * MS,
                    signal: Signal::Success,
                    limited: true,
                    backlog: None,
                };
                ctl.on_response(&r, c.now());
            }
        }
        ctl.on_response(&throttled(c.now() - 20 * MS, None), c.now());
        assert_eq!(ctl.refuses_before_queueing, refused_quick);
        // Later, a latency cut: the cycle's scale above the estimate, against that of a
        // cycle of `probe_requests` at the estimate.
        ctl.enter_probe(90.0, c.now(), true);
        ctl.decrease(c.now(), Cause::Latency(0.9));
        ctl.k_above / (ctl.cfg.probe_requests / ctl.w_max)
    };
    assert_eq!(cut_k(true), 1.0);
    assert_eq!(cut_k(false), Controller::QUEUE_PROBE_STRETCH);
}

#[test]
fn neutral_responses_change_nothing() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    let r = Response {
        sent_at: c.now(),
        latency: MS,
        signal: Signal::Neutral,
        limited: true,
        backlog: None,
    };
    c.advance(MS);
    assert_eq!(ctl.on_response(&r, c.now()), None);
    assert_eq!(ctl.rate(), 5.0);
}

fn answer(sent_at: Instant, latency: Duration, signal: Signal) -> Response {
    Response {
        sent_at,
        latency,
        signal,
        limited: true,
        backlog: None,
    }
}

/// Feeds `n` answers 10 ms apart; `signal(i)` says what each one is.
fn feed(
    ctl: &mut Controller,
    c: &FakeClock,
    n: u32,
    latency: impl Fn(u32) -> Duration,
    signal: impl Fn(u32) -> Signal,
) {
    for i in 0..n {
        c.advance(10 * MS);
        let l = latency(i);
        ctl.on_response(&answer(c.now() - l, l, signal(i)), c.now());
    }
}

#[test]
fn a_steady_share_of_faulty_pages_does_not_slow_the_host() {
    let run = |errors: bool| {
        let c = FakeClock::new();
        let mut ctl = Controller::new(AimdConfig::default(), c.now());
        feed(
            &mut ctl,
            &c,
            3000,
            |_| 50 * MS,
            |i| {
                if errors && i % 10 == 3 {
                    Signal::Error
                } else {
                    Signal::Success
                }
            },
        );
        (ctl.rate(), ctl.decreases())
    };
    let (clean, _) = run(false);
    let (faulty, cuts) = run(true);
    assert_eq!(cuts, 0, "10 % errors cut the rate");
    assert!(faulty >= 0.85 * clean, "{faulty} vs {clean}");
}

#[test]
fn errors_that_take_over_do_slow_the_host() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    feed(&mut ctl, &c, 500, |_| 50 * MS, |_| Signal::Success);
    let before = ctl.rate();
    feed(
        &mut ctl,
        &c,
        300,
        |_| 50 * MS,
        |i| {
            if i % 4 == 0 {
                Signal::Success
            } else {
                Signal::Error
            }
        },
    );
    assert!(ctl.decreases() >= 1);
    assert!(ctl.rate() < before);
}

#[test]
fn noisy_latency_with_a_heavy_tail_does_not_stop_slow_start() {
    use crate::rng::{RandomSource, SplitMix64};
    let c = FakeClock::new();
    let mut rng = SplitMix64::new(5);
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    let lat: Vec<Duration> = (0..300)
        .map(|_| {
            let mut l = 50.0 * (1.0 + 0.9 * rng.next_signed());
            if rng.next_f64() < 0.02 {
                l *= 10.0;
            }
            Duration::from_secs_f64(l / 1e3)
        })
        .collect();
    feed(&mut ctl, &c, 300, |i| lat[i as usize], |_| Signal::Success);
    assert_eq!(ctl.phase(), Phase::SlowStart);
    assert!(ctl.rate() > 200.0, "rate {}", ctl.rate());
}

#[test]
fn a_site_that_refuses_everything_is_waited_out_and_leaves_a_ceiling() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    feed(&mut ctl, &c, 300, |_| 50 * MS, |_| Signal::Success);
    let before = ctl.rate();
    // A penalty box: 403 for everything, for 3 s.
    feed(&mut ctl, &c, 300, |_| 50 * MS, |_| Signal::Refused);
    assert!(ctl.locked_out());
    let pause = ctl.pause_until(c.now()).expect("waiting for a probe");
    assert!(pause > c.now() + Duration::from_millis(500));
    c.advance(Duration::from_secs(200));
    ctl.on_response(&answer(c.now(), 50 * MS, Signal::Success), c.now());
    assert!(!ctl.locked_out());
    assert_eq!(ctl.bans(), 1);
    let ceiling = ctl.ceiling().expect("a ban leaves a ceiling");
    assert!(ceiling <= before / 2.0, "{ceiling} vs {before}");
    assert!(ctl.rate() <= ceiling);
}

/// A fake clock and a controller with the default settings but `max_rps`.
fn capped(max_rps: f64) -> (FakeClock, Controller) {
    let c = FakeClock::new();
    let cfg = AimdConfig {
        max_rps,
        ..AimdConfig::default()
    };
    let ctl = Controller::new(cfg, c.now());
    (c, ctl)
}

/// Sends for `span` at the controller's rate (and after its pauses) to a site 20 ms
/// away that answers every request with `signal`.
fn crawl(ctl: &mut Controller, c: &FakeClock, span: Duration, signal: Signal) {
    let end = c.now() + span;
    while c.now() < end {
        let wait = ctl
            .pause_until(c.now())
            .map_or(ctl.interval(), |p| p - c.now());
        c.advance(wait.max(MS));
        ctl.on_response(&answer(c.now() - 20 * MS, 20 * MS, signal), c.now());
    }
}

#[test]
fn an_outage_read_as_a_ban_is_searched_back_up_in_steps_its_length_prices() {
    let (c, mut ctl) = capped(50.0);
    crawl(&mut ctl, &c, Duration::from_secs(30), Signal::Success);
    let before = ctl.rate();
    assert!(before >= 49.0, "{before}");
    // The site refuses everything for 3 s (a restart): a lockout, read as a ban.
    crawl(&mut ctl, &c, Duration::from_secs(3), Signal::Refused);
    assert!(ctl.locked_out());
    crawl(&mut ctl, &c, Duration::from_secs(5), Signal::Success);
    assert_eq!(ctl.bans(), 1);
    let ceiling = ctl.ceiling().expect("a ban leaves a ceiling");
    assert!(ceiling <= before / 2.0, "{ceiling} vs {before}");
    // The ban lasted a few seconds: its ceiling is raised step by step, and lifted
    // once the rate it came at has been held; then the crawl runs as before it.
    // Locked out for about 7 s (probes after 1, 2 and 4 s): steps of 7 s / 3 %; the
    // ceiling is raised to 3/4 and 7/8 of the banned rate, lifted, then gone.
    crawl(&mut ctl, &c, Duration::from_secs(1200), Signal::Success);
    assert_eq!(ctl.ceiling(), None);
    assert!(ctl.rate() >= 0.95 * before, "{} vs {before}", ctl.rate());
    assert_eq!(ctl.bans(), 1);
}

#[test]
fn a_curve_held_under_a_ceiling_goes_on_from_where_it_was_held() {
    // Probing at an estimate of 100/s when the site announces a ceiling of 20/s, which
    // holds for a minute and is not renewed.
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    crawl(&mut ctl, &c, Duration::from_secs(5), Signal::Success);
    ctl.enter_probe(100.0, c.now(), true);
    let hint = Pacing {
        max_rps: Some(20.0),
        ..Pacing::default()
    };
    ctl.on_hint(&hint, c.now());
    crawl(&mut ctl, &c, Duration::from_secs(59), Signal::Success);
    assert!(ctl.rate() <= 20.0, "{}", ctl.rate());
    // The ceiling lapses: the curve resumes below its estimate, where it was held. Had
    // its clock run on under the ceiling, a minute of a 3 s cycle would put it at
    // `max_rps`.
    crawl(&mut ctl, &c, Duration::from_secs(2), Signal::Success);
    assert!(ctl.rate() <= 110.0, "{}", ctl.rate());
}

#[test]
fn a_used_up_quota_that_says_when_it_resets_leaves_no_ceiling() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    feed(&mut ctl, &c, 300, |_| 50 * MS, |_| Signal::Success);
    let ra = Some(Duration::from_secs(30));
    feed(
        &mut ctl,
        &c,
        100,
        |_| 50 * MS,
        |_| Signal::Throttle { retry_after: ra },
    );
    c.advance(Duration::from_secs(30));
    feed(&mut ctl, &c, 10, |_| 50 * MS, |_| Signal::Success);
    assert_eq!(ctl.bans(), 0);
    assert_eq!(ctl.ceiling(), None);
}

#[test]
fn a_site_that_got_slower_for_good_is_not_cut_for() {
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    // Up to speed against a 100/s limit, latency 20 ms.
    feed(
        &mut ctl,
        &c,
        2000,
        |_| 20 * MS,
        |i| {
            if i % 200 == 199 {
                Signal::Throttle { retry_after: None }
            } else {
                Signal::Success
            }
        },
    );
    let before = ctl.capacity_estimate();
    // The site takes 4x longer from now on, whatever the rate.
    feed(&mut ctl, &c, 3000, |_| 80 * MS, |_| Signal::Success);
    assert!(
        ctl.rate() >= 0.9 * before,
        "rate {} vs estimate {before}",
        ctl.rate()
    );
    assert!(ctl.latency_base().unwrap() >= 70 * MS);
}

#[test]
fn a_priced_cycle_returns_slowly_and_probes_above_the_estimate_at_the_unpriced_scale() {
    let c = FakeClock::new();
    let mut ctl = ramped_then_throttled(&c);
    let w = ctl.capacity_estimate();
    let priced = 1.0 / Controller::PAUSE_SHARE;
    let unpriced = (AimdConfig::default().probe_requests / w).max(2.0);
    assert!(
        unpriced < priced / 3.0,
        "the test needs K priced well above K unpriced"
    );
    let answer_until = |ctl: &mut Controller, secs: f64, since: Instant| {
        while c.now().saturating_duration_since(since).as_secs_f64() < secs {
            c.advance(10 * MS);
            ctl.on_response(&ok(c.now() - 50 * MS), c.now());
        }
    };
    let cut = c.now();
    // The way back to the estimate takes the priced cycle: the pause costs 3 % of it.
    answer_until(&mut ctl, 0.9 * priced, cut);
    assert_eq!(ctl.capacity_estimate(), w, "no throttle, no new estimate");
    assert!(
        ctl.rate() < w,
        "back at {} before K (estimate {w})",
        ctl.rate()
    );
    // Above it, growth follows the unpriced cycle: half again above within two of them
    // (then the estimate is stale and slow start looks for the new capacity).
    answer_until(&mut ctl, priced + 2.0 * unpriced, cut);
    assert_found_stale(&ctl, w);
}

/// Half again above the estimate `w`, or slow start looking for the new capacity.
fn assert_found_stale(ctl: &Controller, w: f64) {
    assert!(
        ctl.rate() >= 1.5 * w || ctl.phase() == Phase::SlowStart,
        "rate {} estimate {w} phase {:?}",
        ctl.rate(),
        ctl.phase()
    );
}

#[test]
fn a_first_throttle_after_a_few_answers_keeps_the_start_rate_until_the_pause_is_paid() {
    // A 5 req/s host with a burst of 2: two answers, slow start doubles twice, the third
    // request is throttled with `Retry-After: 1`. Three answers in 0.3 s read as 10 req/s;
    // they are the burst.
    let c = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    let start = ctl.rate();
    for _ in 0..2 {
        c.advance(100 * MS);
        ctl.on_response(&ok(c.now() - 40 * MS), c.now());
    }
    c.advance(100 * MS);
    assert!(ctl.rate() > 2.0 * start, "slow start grew: {}", ctl.rate());
    ctl.on_response(
        &throttled(c.now() - 40 * MS, Some(Duration::from_secs(1))),
        c.now(),
    );
    assert_eq!(
        ctl.capacity_estimate(),
        start,
        "the guess is where it began"
    );
    assert!(ctl.rate() < start);
    // The way back to the guess lasts the pause's price, so a host that takes no more
    // than that is not throttled again within it.
    let cut = c.now();
    let priced = 1.0 / Controller::PAUSE_SHARE;
    while c.now().saturating_duration_since(cut).as_secs_f64() < 0.9 * priced {
        c.advance(Duration::from_secs_f64(1.0 / ctl.rate()));
        ctl.on_response(&ok(c.now() - 40 * MS), c.now());
        assert!(ctl.rate() <= start, "{} above the guess", ctl.rate());
    }
    // Then a short cycle finds a host that takes more: half again above, or slow start.
    while c.now().saturating_duration_since(cut).as_secs_f64() < priced + 10.0 {
        c.advance(Duration::from_secs_f64(1.0 / ctl.rate()));
        ctl.on_response(&ok(c.now() - 40 * MS), c.now());
    }
    assert_found_stale(&ctl, start);
}

#[test]
fn a_first_throttle_after_many_answers_is_estimated_from_them() {
    let c = FakeClock::new();
    let ctl = ramped_then_throttled(&c);
    assert!(
        ctl.capacity_estimate() >= 8.0 * AimdConfig::default().initial_rps,
        "a hundred answers a second say more than the start: {}",
        ctl.capacity_estimate()
    );
}

mod paced;
mod priced_start;
mod quick_hosts;
