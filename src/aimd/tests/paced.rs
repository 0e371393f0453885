//! Crawls at the controller's pace, as the scheduler's pacer sends: each request a slot
//! after the last at the rate of now, none within a pause, answered a round trip later by
//! a token bucket.
use std::collections::VecDeque;

use super::*;

/// Sends at the controller's pace to `site`, each answered `latency` later (a refusal
/// with `retry_after`), until `done` says so; returns the refusals.
pub(super) fn crawl_paced(
    ctl: &mut Controller,
    clock: &FakeClock,
    done: impl Fn(&Controller, Instant) -> bool,
    site: &mut TokenBucket,
    (latency, retry_after): (Duration, Option<Duration>),
) -> u32 {
    let mut on_way: VecDeque<(Instant, Signal)> = VecDeque::new();
    let mut last_send: Option<Instant> = None;
    let mut refused = 0;
    while !done(ctl, clock.now()) {
        let slot = last_send.map_or(clock.now(), |t| t + ctl.interval());
        let next_send = ctl.pause_until(slot).map_or(slot, |p| p.max(slot));
        match on_way.front() {
            Some(&(sent, signal)) if sent + latency <= next_send => {
                on_way.pop_front();
                clock.advance_to(sent + latency);
                ctl.on_response(&answer(sent, latency, signal), clock.now());
            }
            _ => {
                clock.advance_to(next_send);
                let signal = if site.check(next_send) == Decision::Allow {
                    Signal::Success
                } else {
                    refused += 1;
                    Signal::Throttle { retry_after }
                };
                on_way.push_back((next_send, signal));
                last_send = Some(next_send);
            }
        }
    }
    refused
}

#[test]
fn a_first_estimate_read_off_a_steep_ramp_is_checked_within_seconds() {
    // A limit without burst at 60/s (nginx `limit_req` without `burst=`), answered in
    // 20 ms without Retry-After. Slow start doubles every 100 ms and is refused at about
    // 75/s; the last second's answers average that ramp and say well under it. Kept as an
    // estimate for a cycle of `probe_requests`, it holds the host at 50/s for the whole
    // 6 s; checked as a guess, the host is back near its rate within them.
    let clock = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), clock.now());
    let mut site = TokenBucket::new(Quota::new(60.0, 1), clock.now());
    let end = clock.now() + Duration::from_secs(6);
    let until_end = |_: &Controller, now| now >= end;
    let refused = crawl_paced(&mut ctl, &clock, until_end, &mut site, (20 * MS, None));
    assert!(refused <= 4, "{refused} refusals");
    assert!(
        ctl.rate() >= 0.9 * 60.0,
        "rate {:.1} after 6 s, estimate {:.1}, the site's 60",
        ctl.rate(),
        ctl.capacity_estimate()
    );
}

#[test]
fn a_thin_host_pinned_by_its_answers_is_not_probed_within_its_pages() {
    // 1 req/s, 2 deep, answered in 60 ms with `Retry-After: 1`, met at 5 req/s: slow
    // start's throttle, then two while the buckets that explain the answers narrow to
    // within half again. From there the estimate is known as well as a probe would tell;
    // a cycle that checked it within seconds would add a throttle and its pause per host.
    let clock = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), clock.now());
    let mut site = TokenBucket::new(Quota::new(1.0, 2), clock.now());
    let answers = (60 * MS, Some(Duration::from_secs(1)));
    let end = clock.now() + Duration::from_secs(40);
    let until_end = |_: &Controller, now| now >= end;
    let throttles = crawl_paced(&mut ctl, &clock, until_end, &mut site, answers);
    assert!(throttles <= 3, "{throttles} throttles in 40 s");
    assert!(
        ctl.rate() >= 0.85,
        "rate {:.2} against the site's 1/s",
        ctl.rate()
    );
}
