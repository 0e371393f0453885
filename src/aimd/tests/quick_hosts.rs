//! Hosts answered within a millisecond: no round of requests is on its way when one
//! refuses, so slow start's estimate and the bucket's refill are learned from what got
//! through (the last second, the spans after pauses), each correction a `Retry-After`
//! pause.
use super::*;

#[test]
fn a_quick_hosts_first_estimate_is_not_its_burst_where_corrections_cost_pauses() {
    // 200/s, 20 deep, `Retry-After: 1`, answered a millisecond after each request goes
    // at the pacer's rate: the best tenth before the first refusal reads about twice the
    // rate (the burst), and the refusal is back before the next request goes, so no
    // round on its way corrects it. Cut 10 % at a time from there, each cut a pause.
    let clock = FakeClock::new();
    let start = clock.now();
    let mut ctl = Controller::new(AimdConfig::default(), clock.now());
    let mut site = TokenBucket::new(Quota::new(200.0, 20), clock.now());
    let first_cut = |ctl: &Controller, now: Instant| {
        assert!(now < start + Duration::from_secs(5), "never refused");
        ctl.decreases() > 0
    };
    let answers = (|| MS, Some(Duration::from_secs(1)));
    super::paced::crawl_paced(&mut ctl, &clock, first_cut, &mut site, answers);
    // The burst's figure would be about 400; half the rate at the throttle is within
    // the overshoot of a doubling past the rate.
    let est = ctl.capacity_estimate();
    assert!(
        (170.0..=280.0).contains(&est),
        "first estimate {est}, the site's rate 200"
    );
}

/// Sends for `span` at the controller's rate (and after its pauses) to a token bucket
/// (refill `c`/s, `depth` deep, full at first) that answers within a millisecond and says
/// `Retry-After: 1` with each refusal; returns the throttles.
fn crawl_bucket(
    ctl: &mut Controller,
    clock: &FakeClock,
    span: Duration,
    c: f64,
    depth: u32,
) -> u32 {
    let end = clock.now() + span;
    let mut site = TokenBucket::new(Quota::new(c, depth), clock.now());
    let mut throttles = 0;
    while clock.now() < end {
        let wait = ctl
            .pause_until(clock.now())
            .map_or(ctl.interval(), |p| p - clock.now());
        clock.advance(wait.max(MS / 10));
        let sent = clock.now();
        let signal = bucket_says(&mut site, sent);
        if signal != Signal::Success {
            throttles += 1;
        }
        clock.advance(MS);
        ctl.on_response(&answer(sent, MS, signal), clock.now());
    }
    throttles
}

#[test]
fn the_spans_after_two_pauses_set_a_quick_bursty_hosts_rate() {
    // 200/s, 20 deep, answered within a millisecond: slow start's estimate is read from
    // the burst (about twice the rate) and no round of requests on their way corrects it;
    // each pause refills the bucket. The spans after the first two pauses say the rate:
    // from then on no throttle, and the rate just under the refill.
    let clock = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), clock.now());
    let first = crawl_bucket(&mut ctl, &clock, Duration::from_secs(6), 200.0, 20);
    let est = ctl.capacity_estimate();
    assert!(
        (190.0..=230.0).contains(&est),
        "estimate {est} after {first} throttles"
    );
    assert!(first <= 4, "{first} throttles to learn it");
    let later = crawl_bucket(&mut ctl, &clock, Duration::from_secs(10), 200.0, 20);
    assert!(later <= 1, "{later} throttles once learned");
}

/// The site's answer to a request arriving at `at`: accepted while the bucket holds a
/// token, else refused with `Retry-After: 1`.
fn bucket_says(site: &mut TokenBucket, at: Instant) -> Signal {
    if site.check(at) == Decision::Allow {
        Signal::Success
    } else {
        Signal::Throttle {
            retry_after: Some(Duration::from_secs(1)),
        }
    }
}
