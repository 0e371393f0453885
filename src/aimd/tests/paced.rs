//! Crawls at the controller's pace, as the scheduler's pacer sends: each request a slot
//! after the last at the rate of now, none within a pause, answered a round trip later by
//! a token bucket.
use super::*;

/// Sends at the controller's pace to `site`, each answered after the next `latency()`
/// (a refusal with `retry_after`), until `done` says so; returns the refusals.
pub(super) fn crawl_paced(
    ctl: &mut Controller,
    clock: &FakeClock,
    done: impl Fn(&Controller, Instant) -> bool,
    site: &mut TokenBucket,
    (mut latency, retry_after): (impl FnMut() -> Duration, Option<Duration>),
) -> u32 {
    // Requests on their way: when the answer comes, when it was sent, what it says.
    let mut on_way: Vec<(Instant, Instant, Signal)> = Vec::new();
    let mut last_send: Option<Instant> = None;
    let mut refused = 0;
    while !done(ctl, clock.now()) {
        let slot = last_send.map_or(clock.now(), |t| t + ctl.interval());
        let next_send = ctl.pause_until(slot).map_or(slot, |p| p.max(slot));
        let first = (0..on_way.len()).min_by_key(|&i| on_way[i].0);
        match first {
            Some(i) if on_way[i].0 <= next_send => {
                let (at, sent, signal) = on_way.swap_remove(i);
                clock.advance_to(at);
                ctl.on_response(&answer(sent, at - sent, signal), clock.now());
            }
            _ => {
                clock.advance_to(next_send);
                let signal = if site.check(next_send) == Decision::Allow {
                    Signal::Success
                } else {
                    refused += 1;
                    Signal::Throttle { retry_after }
                };
                on_way.push((next_send + latency(), next_send, signal));
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
    let refused = crawl_paced(&mut ctl, &clock, until_end, &mut site, (|| 20 * MS, None));
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
    let answers = (|| 60 * MS, Some(Duration::from_secs(1)));
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

#[test]
fn a_thin_hosts_slow_answers_do_not_cut_its_rate() {
    // 1 req/s, 2 deep, `Retry-After: 1`, answered in 40 ms ± 50 %, learned in its first
    // ten seconds. Then rounds of answers five times slower: a request is at the site a
    // fifth of the time, so none of ours waits behind another, and the slowness is
    // the site's or other clients' (the same rounds at 100 req/s cut the rate, see
    // `rising_latency_ends_slow_start_and_overload_cuts_the_rate`). Cut for it, a thin
    // host runs at half its rate until a later round judges the cut, and its rounds
    // take five seconds each.
    use crate::rng::{RandomSource, SplitMix64};
    let clock = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), clock.now());
    let mut site = TokenBucket::new(Quota::new(1.0, 2), clock.now());
    let mut rng = SplitMix64::new(1);
    let noisy = move || Duration::from_secs_f64(0.040 * (1.0 + 0.5 * rng.next_signed()));
    let learned = clock.now() + Duration::from_secs(10);
    let until_learned = |_: &Controller, now| now >= learned;
    let answers = (noisy, Some(Duration::from_secs(1)));
    crawl_paced(&mut ctl, &clock, until_learned, &mut site, answers);
    let (rate, decreases) = (ctl.rate(), ctl.decreases());
    assert!((0.5..1.5).contains(&rate), "learned at {rate:.2}");
    let mut lowest = rate;
    for i in 0..60 {
        clock.advance(Duration::from_secs(1));
        let latency = if i < 30 { 40 * MS } else { 200 * MS };
        let sent = clock.now();
        clock.advance(latency);
        ctl.on_response(&answer(sent, latency, Signal::Success), clock.now());
        lowest = lowest.min(ctl.rate());
    }
    assert_eq!(ctl.decreases(), decreases, "cut for slower answers");
    assert!(lowest >= 0.95 * rate, "{rate:.2} fell to {lowest:.2}");
}

#[test]
fn a_pause_that_withheld_more_than_its_span_got_through_halves_the_rate() {
    // 1 req/s, 2 deep, `Retry-After: 60`, met at 5 req/s: each pause refills the bucket,
    // which then takes its two tokens at any rate well above 1 req/s, and each minute's
    // pause withholds far more than that. The cuts after slow start's halve. Cut a tenth
    // per pause (the fit of its answers says no more than "under 4"), the host would pay
    // seven pauses of a minute on its way down.
    let clock = FakeClock::new();
    let mut ctl = Controller::new(AimdConfig::default(), clock.now());
    let mut site = TokenBucket::new(Quota::new(1.0, 2), clock.now());
    let answers = (|| 40 * MS, Some(Duration::from_secs(60)));
    // The rate each cut came at, and the estimate it left.
    let cuts = std::cell::RefCell::new(Vec::<(f64, f64)>::new());
    let last_rate = std::cell::Cell::new(ctl.rate());
    let third_cut = |c: &Controller, _| {
        let mut cuts = cuts.borrow_mut();
        if c.decreases() as usize > cuts.len() {
            cuts.push((last_rate.get(), c.capacity_estimate()));
        }
        last_rate.set(c.rate());
        cuts.len() >= 3
    };
    crawl_paced(&mut ctl, &clock, third_cut, &mut site, answers);
    let cuts = cuts.into_inner();
    for &(at, est) in &cuts[1..] {
        assert!(est <= 0.55 * at, "cuts (rate, estimate): {cuts:?}");
    }
    let est = cuts[2].1;
    assert!(
        est >= 0.8,
        "{est:.2} under the site's 1 req/s by more than a cut"
    );
}

#[test]
fn a_slow_start_from_the_prior_ends_at_the_last_doubling_it_showed_not_at_its_start() {
    // A crawl whose hosts so far took about 1 req/s starts a new one there, ramping by
    // answers; this one takes 5 req/s with a burst of 2 and `Retry-After: 1`. Each
    // doubling but the last was answered: the estimate is half the rate at the throttle,
    // not the start the host was seen to exceed fivefold.
    let clock = FakeClock::new();
    let mut ctl = Controller::from_prior(AimdConfig::default(), 0.95, clock.now());
    let mut site = TokenBucket::new(Quota::new(5.0, 2), clock.now());
    let rate_before = std::cell::Cell::new(ctl.rate());
    let first_cut = |c: &Controller, _| {
        if c.decreases() == 0 {
            rate_before.set(c.rate());
        }
        c.decreases() > 0
    };
    let answers = (|| 40 * MS, Some(Duration::from_secs(1)));
    crawl_paced(&mut ctl, &clock, first_cut, &mut site, answers);
    let (at, est) = (rate_before.get(), ctl.capacity_estimate());
    assert!(
        (0.45 * at..=0.55 * at).contains(&est) && (3.5..=5.5).contains(&est),
        "throttled at {at:.2} req/s, estimate {est:.2}"
    );
    // A host as slow as the crawl's others: half the rate at its throttle is its start.
    let mut ctl = Controller::from_prior(AimdConfig::default(), 0.95, clock.now());
    let mut site = TokenBucket::new(Quota::new(1.0, 2), clock.now());
    let first_cut = |c: &Controller, _| c.decreases() > 0;
    crawl_paced(&mut ctl, &clock, first_cut, &mut site, answers);
    let est = ctl.capacity_estimate();
    assert!((0.9..=1.2).contains(&est), "estimate {est:.2}");
}
