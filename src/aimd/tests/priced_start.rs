//! Slow start ends in a throttle, and a throttle costs its pause: where the pause
//! outlasts the work waiting, slow start holds its rate, and at most as long as the pause
//! (ski rental). The throttle is also the site's to count: past the start rate, slow start
//! ramps only for a host with work enough to pay for one at 2 % of its requests.
use super::*;

/// The pause the crawl's hosts bring in these tests.
const MINUTE: Duration = Duration::from_secs(60);

/// `n` answers one per 200 ms (a 5 req/s host), each sent with `backlog` waiting.
fn answers(ctl: &mut Controller, c: &FakeClock, n: usize, backlog: Option<u32>) {
    for _ in 0..n {
        c.advance(200 * MS);
        let r = Response {
            backlog,
            ..ok(c.now() - 50 * MS)
        };
        ctl.on_response(&r, c.now());
    }
}

/// Held at the start rate (`initial_rps`, 5 req/s), still in slow start.
fn assert_held(ctl: &Controller) {
    assert_eq!(ctl.rate(), 5.0);
    assert_eq!(ctl.phase(), Phase::SlowStart);
}

/// A new controller that expects a throttle to bring `pause`.
fn expecting(c: &FakeClock, pause: Duration) -> Controller {
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    ctl.expect_pause(pause);
    ctl
}

#[test]
fn slow_start_holds_while_the_work_waiting_is_done_before_a_pause_would_end() {
    let c = FakeClock::new();
    // 99 pages waiting at 5 req/s: 20 s of work against a minute's pause.
    let mut held = expecting(&c, MINUTE);
    answers(&mut held, &c, 20, Some(99));
    assert_held(&held);
    // The same work where throttles bring no pause, or where the work is not known:
    // slow start as ever.
    let mut cheap = expecting(&c, Duration::ZERO);
    answers(&mut cheap, &c, 20, Some(99));
    assert!(cheap.rate() > 20.0, "no pause expected: {}", cheap.rate());
    let mut unknown = expecting(&c, MINUTE);
    answers(&mut unknown, &c, 20, None);
    assert!(unknown.rate() > 20.0, "work not known: {}", unknown.rate());
}

#[test]
fn slow_start_ramps_once_the_work_outlasts_the_pause_or_holding_cost_as_much() {
    let c = FakeClock::new();
    // 1,000 pages at 5 req/s are 200 s of work: worth a minute's pause.
    let mut big = expecting(&c, MINUTE);
    answers(&mut big, &c, 20, Some(1_000));
    assert!(big.rate() > 20.0, "{}", big.rate());
    // Work that keeps coming, 99 at a time: held for the minute, then ramps.
    let mut stream = expecting(&c, MINUTE);
    answers(&mut stream, &c, 295, Some(99));
    assert_eq!(stream.rate(), 5.0, "held for 59 s");
    answers(&mut stream, &c, 10, Some(99));
    assert!(stream.rate() > 5.0, "then ramps: {}", stream.rate());
}

#[test]
fn a_host_with_few_pages_is_crawled_at_the_start_rate_not_probed_above_it() {
    let c = FakeClock::new();
    // 39 pages waiting, throttles bringing no pause: the ramp would end in a throttle
    // that 39 requests cannot pay for at 2 %.
    let mut small = expecting(&c, Duration::ZERO);
    answers(&mut small, &c, 40, Some(39));
    assert_held(&small);
    // 50 waiting pay for it: slow start as ever.
    let mut big = expecting(&c, Duration::ZERO);
    answers(&mut big, &c, 20, Some(50));
    assert!(big.rate() > 20.0, "{}", big.rate());
    // Work that keeps coming a few pages at a time pays for it once 50 were sent.
    let mut stream = expecting(&c, Duration::ZERO);
    answers(&mut stream, &c, 49, Some(3));
    assert_eq!(stream.rate(), 5.0);
    answers(&mut stream, &c, 10, Some(3));
    assert!(stream.rate() > 5.0, "{}", stream.rate());
}

#[test]
fn a_host_started_below_the_start_rate_ramps_up_to_it_and_no_further() {
    // The crawl's prior starts a new host at 1 req/s: it ramps by answers to the start
    // rate, and holds there while it has few pages.
    let c = FakeClock::new();
    let mut ctl = Controller::from_prior(AimdConfig::default(), 1.0, c.now());
    answers(&mut ctl, &c, 45, Some(39));
    assert_held(&ctl);
}

#[test]
fn a_slow_start_resumed_for_a_stale_estimate_is_not_held() {
    // Throttled once (no Retry-After) at about 40 req/s, then answered at a steady 100 a
    // second with one page waiting behind each: the curve climbs past half again the
    // estimate and resumes slow start, whose growth the minute expected must not hold.
    let c = FakeClock::new();
    let mut ctl = expecting(&c, MINUTE);
    for _ in 0..20 {
        c.advance(10 * MS);
        ctl.on_response(&ok(c.now() - 5 * MS), c.now());
    }
    ctl.on_response(&throttled(c.now() - 5 * MS, None), c.now());
    assert_eq!(ctl.phase(), Phase::Probe);
    let one_waiting = |c: &FakeClock| Response {
        backlog: Some(1),
        ..ok(c.now() - 5 * MS)
    };
    let mut resumed_at = None;
    for _ in 0..200_000 {
        c.advance(10 * MS);
        ctl.on_response(&one_waiting(&c), c.now());
        if ctl.phase() == Phase::SlowStart {
            resumed_at = Some(ctl.rate());
            break;
        }
    }
    let resumed_at = resumed_at.expect("the estimate went stale");
    for _ in 0..100 {
        c.advance(10 * MS);
        ctl.on_response(&one_waiting(&c), c.now());
    }
    assert!(
        ctl.rate() > 1.5 * resumed_at,
        "{} from {resumed_at}",
        ctl.rate()
    );
}

#[test]
fn a_probe_that_brings_a_throttle_per_exit_waits_for_work_that_pays_for_them_all() {
    // The crawl's hosts limit each client address: their probes brought four throttles
    // each, one per exit. 99 pages pay for one at 2 %, not for four.
    let c = FakeClock::new();
    let mut ctl = expecting(&c, Duration::ZERO);
    ctl.expect_probe_throttles(4.0);
    answers(&mut ctl, &c, 40, Some(99));
    assert_held(&ctl);
    // 200 pay for four.
    let mut big = expecting(&c, Duration::ZERO);
    big.expect_probe_throttles(4.0);
    answers(&mut big, &c, 20, Some(200));
    assert!(big.rate() > 20.0, "{}", big.rate());
}

#[test]
fn the_overshoot_counts_the_throttles_of_requests_sent_before_the_first_cut() {
    let c = FakeClock::new();
    let mut ctl = expecting(&c, Duration::ZERO);
    for _ in 0..20 {
        c.advance(10 * MS);
        ctl.on_response(&ok(c.now() - 5 * MS), c.now());
    }
    let before = c.now();
    // Four requests on their way when the first refusal came back are refused too.
    for i in 0..4 {
        ctl.on_response(&throttled(before - (5 - i) * MS, None), c.now());
        c.advance(MS);
    }
    assert_eq!(ctl.overshoot(), 4);
    // Refusals of requests sent after the cut are the cut rate's, not the overshoot's.
    c.advance(100 * MS);
    ctl.on_response(&throttled(c.now() - 5 * MS, None), c.now());
    assert_eq!(ctl.overshoot(), 4);
}

/// A 1 req/s host with a burst of 2, met at the start rate with 40 pages: its third
/// request is refused with `Retry-After` `pause`, each answer sent with `backlog` waiting.
fn refused_at_the_start(c: &FakeClock, pause: Duration, backlog: Option<u32>) -> Controller {
    let mut ctl = Controller::new(AimdConfig::default(), c.now());
    answers(&mut ctl, c, 2, backlog);
    c.advance(200 * MS);
    let r = Response {
        backlog,
        ..throttled(c.now() - 50 * MS, Some(pause))
    };
    ctl.on_response(&r, c.now());
    ctl
}

#[test]
fn a_guess_whose_check_risks_a_pause_longer_than_the_work_gets_the_work_done_within_one() {
    let c = FakeClock::new();
    // 38 pages at the guess (the start rate) take 8 s; a wrong guess costs a minute.
    let mut ctl = refused_at_the_start(&c, MINUTE, Some(38));
    let cap = 38.0 / 60.0;
    assert!(ctl.rate() <= cap + 1e-9, "rate {}", ctl.rate());
    // The estimate, which the host prior learns, is still the guess: the cap is a price.
    let est = ctl.capacity_estimate();
    assert!((est - 5.0).abs() < 0.1, "estimate {est}");
    // Paced at the cap as the work is done: it does not fall with the work left.
    c.advance(MINUTE);
    for left in (10..38).rev() {
        c.advance(Duration::from_secs_f64(1.0 / cap));
        let r = Response {
            backlog: Some(left),
            ..ok(c.now() - 50 * MS)
        };
        ctl.on_response(&r, c.now());
        assert!(
            (ctl.rate() - cap).abs() < 1e-9,
            "{left} left: {}",
            ctl.rate()
        );
    }
    // More work waiting lifts it: 600 pages are worth checking the guess.
    answers(&mut ctl, &c, 5, Some(600));
    assert!(ctl.rate() > 2.0, "rate {}", ctl.rate());
}

#[test]
fn a_guess_is_checked_as_ever_where_the_pause_is_short_or_the_work_not_known() {
    let c = FakeClock::new();
    // A second's pause against 8 s of work: checking the guess is worth it.
    let short = refused_at_the_start(&c, Duration::from_secs(1), Some(38));
    assert!(short.rate() > 4.0, "rate {}", short.rate());
    let unknown = refused_at_the_start(&c, MINUTE, None);
    assert!(unknown.rate() > 4.0, "rate {}", unknown.rate());
}
