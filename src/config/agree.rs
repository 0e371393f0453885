//! Defaults that agree with the keys the user wrote.
//!
//! Several keys are bounded by others (`connect_timeout_ms ≤ timeout_ms`, `min_rps ≤
//! max_rps`, …). A fixed default for a key the user left out can break such a rule against
//! a key they did write — `timeout_ms = 2000` alone would fail against the default
//! `connect_timeout_ms = 5000`, a key the user never wrote. So, before validation, every
//! key of such a pair that was *not given* takes its usual default moved just far enough
//! to agree with the one that was (`connect_timeout_ms` becomes `min(5000, timeout_ms)`).
//! Keys the user gave are never changed: when both are given and disagree, validation
//! still names the key and the rule.

use super::schema::{Algorithm, Scope, Settings};
use super::validate::{whole_range, DAY_MS, HOUR_MS, MAX_RATE};

/// One key of a pair: its value, whether the user gave it, and its own allowed range.
struct Key<'a, T> {
    value: &'a mut T,
    given: bool,
    range: (T, T),
}

/// A pair that must hold `low ≤ high`: a low not given comes down to the high; a high not
/// given goes up to the low — but only to a value in the moved key's own range, so an
/// out-of-range value the user gave is still reported against the key they wrote.
fn pair<T: PartialOrd + Copy>(low: Key<'_, T>, high: Key<'_, T>) {
    if *low.value <= *high.value {
        return;
    }
    let fits = |v: T, (lo, hi): (T, T)| lo <= v && v <= hi;
    match (low.given, high.given) {
        (false, _) if fits(*high.value, low.range) => *low.value = *high.value,
        (true, false) if fits(*low.value, high.range) => *high.value = *low.value,
        _ => {}
    }
}

/// Move the defaults of keys not given (`given("crawler.timeout_ms")` says whether a key
/// came from the file or the environment) so they agree with the keys that were.
pub fn agree(s: &mut Settings, given: impl Fn(&str) -> bool) {
    fn key<T>(value: &mut T, given: bool, range: (T, T)) -> Key<'_, T> {
        Key {
            value,
            given,
            range,
        }
    }

    const MS: (u64, u64) = (1, HOUR_MS);
    const RATE: (f64, f64) = (f64::MIN_POSITIVE, MAX_RATE);
    // Only where hosts are forgotten (`aimd`, scope `auto`). Before the backoff's own
    // pair, so that a ceiling moved down here still bounds its base; after it, the waits
    // taken as they are then, so that a ceiling moved up there moves `forget_idle_ms` up.
    let forgets = s.limiter.algorithm == Algorithm::Aimd && s.limiter.scope == Scope::Auto;
    if forgets {
        forget_after_waits(s, &given);
    }
    let c = &mut s.crawler;
    pair(
        key(
            &mut c.connect_timeout_ms,
            given("crawler.connect_timeout_ms"),
            MS,
        ),
        key(&mut c.timeout_ms, given("crawler.timeout_ms"), MS),
    );
    pair(
        key(
            &mut c.retry_backoff_base_ms,
            given("crawler.retry_backoff_base_ms"),
            MS,
        ),
        key(
            &mut c.retry_backoff_max_ms,
            given("crawler.retry_backoff_max_ms"),
            MS,
        ),
    );

    if forgets {
        forget_after_waits(s, &|k: &str| k != "limiter.forget_idle_ms" || given(k));
    }

    let l = &mut s.limiter;
    pair(
        key(&mut l.min_rps, given("limiter.min_rps"), RATE),
        key(&mut l.max_rps, given("limiter.max_rps"), RATE),
    );
    pair(
        key(&mut l.initial_rps, given("limiter.initial_rps"), RATE),
        key(&mut l.max_rps, given("limiter.max_rps"), RATE),
    );
    if l.algorithm == Algorithm::Aimd {
        pair(
            key(&mut l.min_rps, given("limiter.min_rps"), RATE),
            key(&mut l.initial_rps, given("limiter.initial_rps"), RATE),
        );
    }
    pair(
        key(&mut l.increase_rps, given("limiter.increase_rps"), RATE),
        key(&mut l.max_rps, given("limiter.max_rps"), RATE),
    );

    let h = &mut s.health;
    pair(
        key(&mut h.timeout_ms, given("health.timeout_ms"), MS),
        key(
            &mut h.interval_ms,
            given("health.interval_ms"),
            (100, HOUR_MS),
        ),
    );
    pair(
        key(
            &mut h.base_ejection_ms,
            given("health.base_ejection_ms"),
            (1, DAY_MS),
        ),
        key(
            &mut h.max_ejection_ms,
            given("health.max_ejection_ms"),
            (1, DAY_MS),
        ),
    );
}

/// A quiet host is forgotten only once whatever pause or backoff it may be waiting out is
/// over: `limiter.forget_idle_ms` bounds `crawler.max_retry_after_ms` and
/// `crawler.retry_backoff_max_ms`.
fn forget_after_waits(s: &mut Settings, given: &impl Fn(&str) -> bool) {
    let c = &mut s.crawler;
    let waits = [
        ("crawler.max_retry_after_ms", &mut c.max_retry_after_ms),
        ("crawler.retry_backoff_max_ms", &mut c.retry_backoff_max_ms),
    ];
    for (name, wait) in waits {
        let forget = &mut s.limiter.forget_idle_ms;
        pair(
            whole_key(wait, name, given),
            whole_key(forget, "limiter.forget_idle_ms", given),
        );
    }
}

/// The whole-number key `name`, its range the one validation checks.
fn whole_key<'a>(value: &'a mut u64, name: &str, given: &impl Fn(&str) -> bool) -> Key<'a, u64> {
    Key {
        value,
        given: given(name),
        range: whole_range(name).unwrap_or((0, u64::MAX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_forget_idle_brings_the_longest_pause_and_backoff_down_with_it() {
        let exit = crate::config::ExitSettings::new("e", [127, 0, 0, 2].into());
        let mut s = Settings::with_exits(vec![exit]);
        s.limiter.forget_idle_ms = 10_000;
        agree(&mut s, |k| k == "limiter.forget_idle_ms");
        assert_eq!(s.crawler.max_retry_after_ms, 10_000);
        assert_eq!(s.crawler.retry_backoff_max_ms, 10_000);
        s.validate().expect("agreeing keys");

        let mut s = Settings::with_exits(vec![]);
        s.crawler.max_retry_after_ms = 3_600_000;
        agree(&mut s, |k| k == "crawler.max_retry_after_ms");
        assert_eq!(s.limiter.forget_idle_ms, 3_600_000);

        // Through the backoff's ceiling, which its base moved up.
        let mut s = Settings::with_exits(vec![]);
        s.crawler.retry_backoff_base_ms = 3_600_000;
        agree(&mut s, |k| k == "crawler.retry_backoff_base_ms");
        assert_eq!(s.crawler.retry_backoff_max_ms, 3_600_000);
        assert_eq!(s.limiter.forget_idle_ms, 3_600_000);
    }

    #[test]
    fn a_key_given_alone_moves_the_default_it_bounds_and_never_itself() {
        let mut s = Settings::with_exits(vec![]);
        s.crawler.timeout_ms = 2000;
        agree(&mut s, |k| k == "crawler.timeout_ms");
        assert_eq!(s.crawler.connect_timeout_ms, 2000);
        assert_eq!(s.crawler.timeout_ms, 2000);

        let mut s = Settings::with_exits(vec![]);
        s.crawler.connect_timeout_ms = 20_000;
        agree(&mut s, |k| k == "crawler.connect_timeout_ms");
        assert_eq!(s.crawler.timeout_ms, 20_000);

        let mut s = Settings::with_exits(vec![]);
        s.limiter.max_rps = 0.05;
        agree(&mut s, |k| k == "limiter.max_rps");
        assert_eq!(s.limiter.min_rps, 0.05);
        assert_eq!(s.limiter.initial_rps, 0.05);
        assert_eq!(s.limiter.increase_rps, 0.05);

        // Both given and disagreeing: left for validation to name.
        let mut s = Settings::with_exits(vec![]);
        s.crawler.timeout_ms = 2000;
        s.crawler.connect_timeout_ms = 3000;
        agree(&mut s, |_| true);
        assert_eq!(
            (s.crawler.connect_timeout_ms, s.crawler.timeout_ms),
            (3000, 2000)
        );
    }
}
