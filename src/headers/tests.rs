use super::*;
use proptest::prelude::*;
use std::time::UNIX_EPOCH;

fn now() -> SystemTime {
    // 2015-10-21 07:28:00 UTC
    UNIX_EPOCH + Duration::from_secs(1_445_412_480)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn hints(h: &[(&str, &str)]) -> ServerHints {
    ServerHints::from_headers(h.iter().copied(), now())
}

// ---- Retry-After ----

#[test]
fn retry_after_delay_seconds() {
    let n = now();
    assert_eq!(parse_retry_after("120", n), Some(secs(120)));
    assert_eq!(parse_retry_after("0", n), Some(Duration::ZERO));
    assert_eq!(parse_retry_after("  5 \t", n), Some(secs(5)));
    assert_eq!(parse_retry_after("007", n), Some(secs(7)));
    assert_eq!(parse_retry_after("86400", n), Some(secs(86_400)));
    assert_eq!(parse_retry_after("604800", n), Some(MAX_HINT));
    assert_eq!(parse_retry_after("604801", n), Some(MAX_HINT));
    assert_eq!(
        parse_retry_after("99999999999999999999999999", n),
        Some(MAX_HINT)
    );
}

#[test]
fn pauses_are_cut_to_the_cap_and_the_sites_ask_is_returned() {
    let n = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let cap = secs(300);
    let mut h = ServerHints::from_headers([("retry-after", "99999999999")], n);
    assert_eq!(h.cap_pauses(cap), Some(MAX_HINT));
    assert_eq!(h.retry_after, Some(cap));
    // A quota used up with a reset ten years away, on any answer.
    let mut h = ServerHints::from_headers([("ratelimit", "remaining=0, reset=315360000")], n);
    assert_eq!(h.cap_pauses(cap), Some(MAX_HINT));
    assert_eq!(h.pacing().and_then(|p| p.pause_for), Some(cap));
    // Within the cap nothing changes and nothing is returned.
    let mut h = ServerHints::from_headers([("retry-after", "120")], n);
    assert_eq!(h.cap_pauses(cap), None);
    assert_eq!(h.retry_after, Some(secs(120)));
    // A far reset with requests left would spread them over years: each gap is cut.
    let mut h = ServerHints::from_headers(
        [
            ("x-ratelimit-remaining", "10"),
            ("x-ratelimit-reset", "315360000"),
        ],
        n,
    );
    assert_eq!(h.cap_pauses(cap), None);
    assert_eq!(h.pacing().and_then(|p| p.min_interval), Some(cap));
}

#[test]
fn a_cap_on_pauses_keeps_the_rates_the_site_gave() {
    let n = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let cap = secs(300);
    // An hour's quota of 3600: one a second, not 3600 spent in the cap's 300 s.
    let mut h = ServerHints::from_headers([("ratelimit-policy", "\"hour\";q=3600;w=3600")], n);
    assert_eq!(h.cap_pauses(cap), None);
    assert_eq!(h.pacing().and_then(|p| p.max_rps), Some(1.0));
    // 100 left until a reset an hour away: one each 36 s, not each 3 s.
    let mut h = ServerHints::from_headers(
        [
            ("x-ratelimit-remaining", "100"),
            ("x-ratelimit-reset", "3600"),
        ],
        n,
    );
    assert_eq!(h.cap_pauses(cap), None);
    assert_eq!(h.pacing().and_then(|p| p.min_interval), Some(secs(36)));
    // Of a short and a daily policy the stricter (the daily) stays the stricter.
    let mut h = ServerHints::from_headers(
        [(
            "ratelimit-policy",
            "\"burst\";q=100;w=60, \"daily\";q=1000;w=86400",
        )],
        n,
    );
    h.cap_pauses(cap);
    let rps = h.pacing().and_then(|p| p.max_rps).expect("a rate");
    assert!((rps - 1000.0 / 86400.0).abs() < 1e-12, "{rps}");
    // The used-up quota's wait is still cut, and a cap leaves empty hints empty.
    let mut h = ServerHints::from_headers([("ratelimit", "remaining=0, reset=3600")], n);
    assert_eq!(h.cap_pauses(cap), Some(secs(3600)));
    assert_eq!(h.pacing().and_then(|p| p.pause_for), Some(cap));
    let mut none = ServerHints::default();
    assert_eq!(none.cap_pauses(cap), None);
    assert!(none.is_empty());
}

#[test]
fn retry_after_garbage() {
    let n = now();
    for bad in [
        "",
        "   ",
        "-1",
        "+5",
        "1.5",
        "1e3",
        "5s",
        "abc",
        "12 34",
        "0x10",
        "١٢",
        "NaN",
        "inf",
        "Wed, 21 Oct 2015 07:28:00",
        "Wed, 32 Oct 2015 07:28:00 GMT",
    ] {
        assert_eq!(parse_retry_after(bad, n), None, "{bad:?}");
    }
}

#[test]
fn retry_after_http_dates() {
    let n = now();
    // IMF-fixdate, 60 s ahead.
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:29:00 GMT", n),
        Some(secs(60))
    );
    // Obsolete RFC 850 form.
    assert_eq!(
        parse_retry_after("Wednesday, 21-Oct-15 07:30:00 GMT", n),
        Some(secs(120))
    );
    // asctime form.
    assert_eq!(
        parse_retry_after("Wed Oct 21 07:28:30 2015", n),
        Some(secs(30))
    );
    // Whitespace around a date.
    assert_eq!(
        parse_retry_after("  Wed, 21 Oct 2015 07:28:01 GMT  ", n),
        Some(secs(1))
    );
    // Exactly now and in the past → zero.
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", n),
        Some(Duration::ZERO)
    );
    assert_eq!(
        parse_retry_after("Tue, 20 Oct 2015 07:28:00 GMT", n),
        Some(Duration::ZERO)
    );
    // Far future → capped.
    assert_eq!(
        parse_retry_after("Fri, 01 Jan 2100 00:00:00 GMT", n),
        Some(MAX_HINT)
    );
}

// ---- RateLimit (structured, draft ≥ 08) ----

#[test]
fn ratelimit_structured() {
    let h = hints(&[("RateLimit", "\"default\";r=50;t=30")]);
    assert_eq!(h.remaining, Some(50));
    assert_eq!(h.reset, Some(secs(30)));

    // Token name, extra params, odd spacing.
    let h = hints(&[("ratelimit", " default ; r = 7 ; t=2;pk=:abc=:")]);
    assert_eq!((h.remaining, h.reset), (Some(7), Some(secs(2))));

    // Only r, only t.
    let h = hints(&[("RateLimit", "\"a\";r=3")]);
    assert_eq!((h.remaining, h.reset), (Some(3), None));
    let h = hints(&[("RateLimit", "\"a\";t=3")]);
    assert_eq!((h.remaining, h.reset), (None, Some(secs(3))));

    // A comma or semicolon inside a quoted name does not split.
    let h = hints(&[("RateLimit", "\"x,y;r=1\";r=9;t=9")]);
    assert_eq!((h.remaining, h.reset), (Some(9), Some(secs(9))));
}

#[test]
fn ratelimit_structured_picks_most_restrictive() {
    // burst: 50 in 30 s (0.6 s apart); daily: 900 in 80000 s (~89 s apart) → daily.
    let h = hints(&[("RateLimit", "\"burst\";r=50;t=30, \"daily\";r=900;t=80000")]);
    assert_eq!((h.remaining, h.reset), (Some(900), Some(secs(80_000))));
    // Any exhausted item wins, the longest exhausted one first.
    let h = hints(&[(
        "RateLimit",
        "\"a\";r=1;t=1000, \"b\";r=0;t=5, \"c\";r=0;t=9",
    )]);
    assert_eq!((h.remaining, h.reset), (Some(0), Some(secs(9))));
    // Repeated header fields merge the same way.
    let h = hints(&[
        ("RateLimit", "\"a\";r=10;t=10"),
        ("RateLimit", "\"b\";r=0;t=3"),
    ]);
    assert_eq!((h.remaining, h.reset), (Some(0), Some(secs(3))));
}

#[test]
fn ratelimit_structured_garbage() {
    for bad in [
        "",
        ",,,",
        "\"default\";r=-1;t=-30",
        "\"d\";r=abc;t=x",
        "\"unterminated;r=1;t=2",
        ";;;",
        "r",
        "\"d\";r;t",
    ] {
        let h = hints(&[("RateLimit", bad)]);
        assert_eq!((h.remaining, h.reset), (None, None), "{bad:?}");
    }
    // Negative reset ignored, remaining kept.
    let h = hints(&[("RateLimit", "\"d\";r=4;t=-3")]);
    assert_eq!((h.remaining, h.reset), (Some(4), None));
    // Absurd reset capped.
    let h = hints(&[("RateLimit", "\"d\";r=4;t=999999999999")]);
    assert_eq!(h.reset, Some(MAX_HINT));
}

// ---- RateLimit (dictionary, draft 07) ----

#[test]
fn ratelimit_dictionary() {
    let h = hints(&[("RateLimit", "limit=100, remaining=50, reset=30")]);
    assert_eq!((h.remaining, h.reset), (Some(50), Some(secs(30))));
    let h = hints(&[("RATELIMIT", "reset=5,remaining=0,limit=10")]);
    assert_eq!((h.remaining, h.reset), (Some(0), Some(secs(5))));
    let h = hints(&[("RateLimit", "limit=100, remaining=x, reset=y")]);
    assert_eq!((h.remaining, h.reset), (None, None));
}

// ---- RateLimit-Policy ----

#[test]
fn ratelimit_policy_forms() {
    let h = hints(&[("RateLimit-Policy", "\"default\";q=100;w=60")]);
    assert_eq!((h.limit, h.window), (Some(100), Some(secs(60))));
    let h = hints(&[("ratelimit-policy", "100;w=60")]);
    assert_eq!((h.limit, h.window), (Some(100), Some(secs(60))));
    // Quota without window.
    let h = hints(&[("RateLimit-Policy", "\"d\";q=10")]);
    assert_eq!((h.limit, h.window), (Some(10), None));
    // Several policies: the lowest rate wins (1000/day < 100/min).
    let h = hints(&[(
        "RateLimit-Policy",
        "\"burst\";q=100;w=60, \"daily\";q=1000;w=86400",
    )]);
    assert_eq!((h.limit, h.window), (Some(1000), Some(secs(86_400))));
    // Older multi-policy form.
    let h = hints(&[("RateLimit-Policy", "10;w=1, 50;w=60")]);
    assert_eq!((h.limit, h.window), (Some(50), Some(secs(60))));
    // Non-request quota units are ignored.
    let h = hints(&[(
        "RateLimit-Policy",
        "\"b\";q=1000000;w=1;qu=\"content-bytes\"",
    )]);
    assert_eq!((h.limit, h.window), (None, None));
    let h = hints(&[("RateLimit-Policy", "\"r\";q=5;w=1;qu=\"requests\"")]);
    assert_eq!((h.limit, h.window), (Some(5), Some(secs(1))));
    // Garbage.
    for bad in ["", "\"d\";w=60", "abc;w=60", "\"d\";q=-5;w=60"] {
        let h = hints(&[("RateLimit-Policy", bad)]);
        assert_eq!(h.limit, None, "{bad:?}");
    }
}

// ---- RateLimit-Limit/-Remaining/-Reset (drafts ≤ 06) ----

#[test]
fn ratelimit_legacy_fields() {
    let h = hints(&[
        ("RateLimit-Limit", "100, 100;w=60"),
        ("RateLimit-Remaining", "42"),
        ("RateLimit-Reset", "17"),
    ]);
    assert_eq!(h.limit, Some(100));
    assert_eq!(h.window, Some(secs(60)));
    assert_eq!(h.remaining, Some(42));
    assert_eq!(h.reset, Some(secs(17)));
}

// ---- X-RateLimit-* ----

#[test]
fn x_ratelimit_delta_and_epoch() {
    let n = now();
    let epoch_in_90s = (n.duration_since(UNIX_EPOCH).unwrap() + secs(90)).as_secs();
    let epoch = epoch_in_90s.to_string();
    let h = hints(&[
        ("X-RateLimit-Limit", "5000"),
        ("X-RateLimit-Remaining", "4999"),
        ("X-RateLimit-Reset", epoch.as_str()),
    ]);
    assert_eq!(h.limit, Some(5000));
    assert_eq!(h.window, None);
    assert_eq!(h.remaining, Some(4999));
    assert_eq!(h.reset, Some(secs(90)));

    // Delta seconds.
    let h = hints(&[("x-ratelimit-reset", "30")]);
    assert_eq!(h.reset, Some(secs(30)));
    // Fractional delta.
    let h = hints(&[("X-RATELIMIT-RESET", "1.5")]);
    assert_eq!(h.reset, Some(Duration::from_millis(1500)));
    // Epoch in the past → zero.
    let h = hints(&[("X-RateLimit-Reset", "1000000001")]);
    assert_eq!(h.reset, Some(Duration::ZERO));
    // Epoch milliseconds.
    let ms = (epoch_in_90s * 1000).to_string();
    let h = hints(&[("X-RateLimit-Reset", ms.as_str())]);
    assert_eq!(h.reset, Some(secs(90)));
    // HTTP-date.
    let h = hints(&[("X-RateLimit-Reset", "Wed, 21 Oct 2015 07:28:10 GMT")]);
    assert_eq!(h.reset, Some(secs(10)));
    // Epoch far in the future → capped.
    let h = hints(&[("X-RateLimit-Reset", "9999999999")]);
    assert_eq!(h.reset, Some(MAX_HINT));
    // Just under the threshold: a (capped) delay.
    let h = hints(&[("X-RateLimit-Reset", "999999999")]);
    assert_eq!(h.reset, Some(MAX_HINT));
}

#[test]
fn x_ratelimit_garbage() {
    for bad in ["", "-1", "abc", "1.", ".5", "1e9", "NaN", "inf", "1,5"] {
        let h = hints(&[
            ("X-RateLimit-Reset", bad),
            ("X-RateLimit-Remaining", bad),
            ("X-RateLimit-Limit", bad),
        ]);
        // "1,5" is a list whose first item is 1.
        if bad == "1,5" {
            assert_eq!((h.remaining, h.limit, h.reset), (Some(1), Some(1), None));
        } else {
            assert!(h.is_empty(), "{bad:?}: {h:?}");
        }
    }
}

#[test]
fn header_names_case_insensitive_and_unrelated_ignored() {
    let h = hints(&[
        ("rEtRy-AfTeR", "3"),
        ("Content-Type", "text/html"),
        ("X-RateLimit-Remaining-Minute", "5"),
        ("x-RATElimit-remaining", "8"),
    ]);
    assert_eq!(h.retry_after, Some(secs(3)));
    assert_eq!(h.remaining, Some(8));
    assert!(hints(&[]).is_empty());
    assert!(hints(&[("Server", "nginx")]).is_empty());
}

#[test]
fn source_precedence_never_mixes_pairs() {
    // RateLimit beats X-RateLimit for the (remaining, reset) pair, even if it lacks reset.
    let h = hints(&[
        ("X-RateLimit-Remaining", "1"),
        ("X-RateLimit-Reset", "100"),
        ("RateLimit", "\"d\";r=20"),
    ]);
    assert_eq!((h.remaining, h.reset), (Some(20), None));
    // RateLimit-Policy beats X-RateLimit-Limit.
    let h = hints(&[
        ("X-RateLimit-Limit", "7"),
        ("RateLimit-Policy", "\"d\";q=100;w=10"),
    ]);
    assert_eq!((h.limit, h.window), (Some(100), Some(secs(10))));
    // Multiple Retry-After: the longest.
    let h = hints(&[
        ("Retry-After", "2"),
        ("Retry-After", "9"),
        ("Retry-After", "x"),
    ]);
    assert_eq!(h.retry_after, Some(secs(9)));
}

// ---- pacing ----

#[test]
fn pacing_exhausted_pauses_until_reset() {
    let h = hints(&[("RateLimit", "\"d\";r=0;t=30")]);
    let p = h.pacing().unwrap();
    assert_eq!(p.pause_for, Some(secs(30)));
    assert_eq!(p.min_interval, None);
    assert_eq!(p.max_rps, None);
}

#[test]
fn pacing_spreads_remaining_over_reset() {
    let h = hints(&[("RateLimit", "\"d\";r=50;t=30")]);
    let p = h.pacing().unwrap();
    assert_eq!(p.pause_for, None);
    assert_eq!(p.min_interval, Some(Duration::from_millis(600)));
    assert_eq!(p.interval(), Some(Duration::from_millis(600)));
}

#[test]
fn pacing_policy_gives_max_rps() {
    let h = hints(&[("RateLimit-Policy", "\"d\";q=100;w=60")]);
    let p = h.pacing().unwrap();
    assert!((p.max_rps.unwrap() - 100.0 / 60.0).abs() < 1e-12);
    assert_eq!(p.interval(), Some(Duration::from_millis(600)));
    // Zero window: no rate.
    let h = ServerHints {
        limit: Some(5),
        window: Some(Duration::ZERO),
        ..Default::default()
    };
    assert_eq!(h.pacing(), None);
}

#[test]
fn pacing_combines_retry_after_and_quota() {
    let h = hints(&[
        ("Retry-After", "10"),
        ("RateLimit", "\"d\";r=0;t=30"),
        ("RateLimit-Policy", "\"d\";q=10;w=60"),
    ]);
    let p = h.pacing().unwrap();
    assert_eq!(p.pause_for, Some(secs(30)));
    assert_eq!(p.max_rps, Some(10.0 / 60.0));
    assert_eq!(p.interval(), Some(secs(6)));
    // Retry-After longer than reset wins.
    let h = hints(&[("Retry-After", "100"), ("RateLimit", "\"d\";r=0;t=30")]);
    assert_eq!(h.pacing().unwrap().pause_for, Some(secs(100)));
}

#[test]
fn a_retry_after_date_already_past_is_no_retry_after() {
    let n = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let h = ServerHints::from_headers([("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], n);
    assert_eq!(h.retry_after, None, "a 429 with it is one without");
    let h = ServerHints::from_headers([("retry-after", "0")], n);
    assert_eq!(h.retry_after, None);
    let h = ServerHints::from_headers([("retry-after", "7")], n);
    assert_eq!(h.retry_after, Some(secs(7)));
}

#[test]
fn repeated_legacy_fields_keep_the_most_restrictive_pair() {
    // A gateway's and the origin's headers both: the quota used up is the one that counts.
    let h = hints(&[
        ("X-RateLimit-Remaining", "57"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "10"),
        ("X-RateLimit-Reset", "30"),
    ]);
    assert_eq!((h.remaining, h.reset), (Some(0), Some(secs(30))));
    let h = hints(&[
        ("RateLimit-Remaining", "0"),
        ("RateLimit-Remaining", "9"),
        ("RateLimit-Reset", "30"),
        ("RateLimit-Reset", "5"),
    ]);
    assert_eq!((h.remaining, h.reset), (Some(0), Some(secs(30))));
    // Pairs are not mixed: the gateway's used-up quota resets in a second, whatever the
    // origin's hour-long window says.
    let h = hints(&[
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "1"),
        ("X-RateLimit-Remaining", "100"),
        ("X-RateLimit-Reset", "3600"),
    ]);
    assert_eq!((h.remaining, h.reset), (Some(0), Some(secs(1))));
    assert_eq!(h.pacing().and_then(|p| p.pause_for), Some(secs(1)));
    // Counts that differ cannot be paired: each field's most restrictive value.
    let h = hints(&[
        ("X-RateLimit-Remaining", "5"),
        ("X-RateLimit-Remaining", "2"),
        ("X-RateLimit-Reset", "30"),
    ]);
    assert_eq!((h.remaining, h.reset), (Some(2), Some(secs(30))));
}

#[test]
fn pacing_edge_cases() {
    // Nothing → None.
    assert_eq!(ServerHints::default().pacing(), None);
    // Zero Retry-After (date in the past) → no pause.
    let h = ServerHints {
        retry_after: Some(Duration::ZERO),
        ..Default::default()
    };
    assert_eq!(h.pacing(), None);
    // Exhausted without reset: fall back to the policy window.
    let h = ServerHints {
        remaining: Some(0),
        limit: Some(10),
        window: Some(secs(60)),
        ..Default::default()
    };
    assert_eq!(h.pacing().unwrap().pause_for, Some(secs(60)));
    // Exhausted with nothing to go on: no pause can be derived.
    let h = ServerHints {
        remaining: Some(0),
        ..Default::default()
    };
    assert_eq!(h.pacing(), None);
    // Remaining > 0, reset 0 → the quota refills now: no interval.
    let h = ServerHints {
        remaining: Some(3),
        reset: Some(Duration::ZERO),
        ..Default::default()
    };
    assert_eq!(h.pacing(), None);
    // Huge remaining: no division overflow, tiny interval.
    let h = ServerHints {
        remaining: Some(u64::MAX),
        reset: Some(secs(1)),
        ..Default::default()
    };
    let p = h.pacing();
    assert!(p.is_none_or(|p| p.min_interval.unwrap() < Duration::from_micros(1)));
    // Epoch reset already passed with quota exhausted → no pause.
    let h = hints(&[
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "1000000001"),
    ]);
    assert_eq!(h.pacing(), None);
}

#[test]
fn pacing_never_exceeds_announced_quota() {
    // Following min_interval from a (remaining, reset) state sends at most `remaining`
    // requests before `reset`.
    for (rem, reset) in [(1u64, 1u64), (3, 10), (50, 30), (999, 7), (7, 86_400)] {
        let h = ServerHints {
            remaining: Some(rem),
            reset: Some(secs(reset)),
            ..Default::default()
        };
        let iv = h.pacing().unwrap().min_interval.unwrap();
        let n = u32::try_from(rem).unwrap();
        // `rem` requests spaced `iv` apart fit in `reset`, and (up to integer-division
        // rounding of < 1 ns per request) use all of it.
        assert!(iv * n <= secs(reset), "rem={rem} reset={reset}");
        assert!(
            secs(reset) - iv * n < Duration::from_nanos(rem),
            "rem={rem}"
        );
    }
}

proptest! {
    #[test]
    fn arbitrary_strings_never_panic(v in ".*", name in "[A-Za-z-]{0,24}") {
        let n = now();
        let _ = parse_retry_after(&v, n);
        for hn in [
            "Retry-After", "RateLimit", "RateLimit-Policy", "RateLimit-Limit",
            "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Limit",
            "X-RateLimit-Remaining", "X-RateLimit-Reset", name.as_str(),
        ] {
            let h = ServerHints::from_headers([(hn, v.as_str())], n);
            let _ = h.pacing().map(|p| p.interval());
            if let Some(d) = h.retry_after { prop_assert!(d <= MAX_HINT); }
            if let Some(d) = h.reset { prop_assert!(d <= MAX_HINT); }
            if let Some(d) = h.window { prop_assert!(d <= MAX_HINT); }
        }
    }

    #[test]
    fn structured_lookalikes_never_panic(
        v in r#"[ "a-z0-9=;,.\\:-]{0,64}"#,
        t in any::<u64>(),
    ) {
        let n = UNIX_EPOCH + Duration::from_secs(t % 4_000_000_000);
        for hn in ["RateLimit", "RateLimit-Policy", "X-RateLimit-Reset", "Retry-After"] {
            let h = ServerHints::from_headers([(hn, v.as_str())], n);
            let _ = h.pacing();
        }
    }

    #[test]
    fn delay_seconds_roundtrip(s in 0u64..200_000) {
        let d = parse_retry_after(&format!(" {s} "), now()).unwrap();
        prop_assert_eq!(d, secs(s).min(MAX_HINT));
    }
}
