//! The header fields' own grammars: structured lists and dictionaries, delay-seconds,
//! epoch timestamps and quoted strings, read leniently and totally (garbage is `None`,
//! never a panic).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{until, Policy, Window, EPOCH_MILLIS_THRESHOLD, EPOCH_SECONDS_THRESHOLD, MAX_HINT};

pub(super) fn set_first<T>(slot: &mut Option<T>, v: Option<T>) {
    if slot.is_none() {
        *slot = v;
    }
}

/// `RateLimit`: the structured list (`"name";r=..;t=..`) or the draft-07 dictionary
/// (`limit=.., remaining=.., reset=..`).
pub(super) fn parse_ratelimit(value: &str, now: SystemTime, out: &mut Window) {
    let is_dict = split_unquoted(value, b',')
        .map(|m| split_unquoted(m, b';').next().unwrap_or(""))
        .any(|bare| bare.contains('=') && !bare.trim_start().starts_with('"'));
    if is_dict {
        let mut w = Window::default();
        for member in split_unquoted(value, b',') {
            let bare = split_unquoted(member, b';').next().unwrap_or("");
            let Some((k, v)) = bare.split_once('=') else {
                continue;
            };
            let k = k.trim();
            if k.eq_ignore_ascii_case("remaining") {
                set_first(&mut w.remaining, parse_uint(v));
            } else if k.eq_ignore_ascii_case("reset") {
                set_first(&mut w.reset, parse_reset(v, now));
            }
            // `limit` here duplicates RateLimit-Policy and carries no window: ignored.
        }
        out.merge(w);
    } else {
        for item in split_unquoted(value, b',') {
            let w = Window {
                remaining: param(item, "r").and_then(parse_uint),
                reset: param(item, "t").and_then(parse_delay_seconds),
            };
            out.merge(w);
        }
    }
}

/// `RateLimit-Policy`: `"name";q=..;w=..` (draft ≥ 08) or `100;w=60` (older).
pub(super) fn parse_policy(value: &str, out: &mut Policy) {
    for item in split_unquoted(value, b',') {
        // Quota units other than requests (e.g. content-bytes) do not pace requests.
        if let Some(qu) = param(item, "qu") {
            if !unquote(qu).eq_ignore_ascii_case("requests") {
                continue;
            }
        }
        let bare = split_unquoted(item, b';').next().unwrap_or("");
        let quota = param(item, "q")
            .and_then(parse_uint)
            .or_else(|| parse_uint(bare));
        let window = param(item, "w").and_then(parse_delay_seconds);
        out.merge(Policy { quota, window });
    }
}

/// `RateLimit-Limit` / `X-RateLimit-Limit`: the first item's integer is the limit; a `w`
/// parameter (drafts ≤ 06: `100, 100;w=60`) on an item with that same quota gives the window.
pub(super) fn parse_limit(value: &str, out: &mut Policy) {
    let mut items = split_unquoted(value, b',');
    let Some(first) = items.next() else { return };
    let Some(quota) = parse_uint(split_unquoted(first, b';').next().unwrap_or("")) else {
        return;
    };
    let window = split_unquoted(value, b',')
        .filter(|it| parse_uint(split_unquoted(it, b';').next().unwrap_or("")) == Some(quota))
        .find_map(|it| param(it, "w").and_then(parse_delay_seconds));
    if out.quota.is_none() {
        *out = Policy {
            quota: Some(quota),
            window,
        };
    }
}

/// The first list item's integer (`X-RateLimit-Remaining: 42`).
pub(super) fn first_int(value: &str) -> Option<u64> {
    let first = split_unquoted(value, b',').next()?;
    parse_uint(split_unquoted(first, b';').next()?)
}

/// A reset value: delay seconds (fractions allowed), unix epoch seconds (> 10⁹) or
/// milliseconds (> 10¹²), or an HTTP-date. Capped at [`MAX_HINT`]; past → zero.
pub(super) fn parse_reset(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Some(x) = parse_decimal(v) {
        if x > EPOCH_MILLIS_THRESHOLD {
            return Some(epoch_until(x / 1000.0, now));
        }
        if x > EPOCH_SECONDS_THRESHOLD {
            return Some(epoch_until(x, now));
        }
        return Some(Duration::from_secs_f64(x).min(MAX_HINT));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(until(at, now))
}

pub(super) fn epoch_until(secs: f64, now: SystemTime) -> Duration {
    // `secs` is finite and ≤ ~1.8e19 / 1000 here only if the caller checked; be defensive.
    match Duration::try_from_secs_f64(secs) {
        Ok(d) => match UNIX_EPOCH.checked_add(d) {
            Some(at) => until(at, now),
            None => MAX_HINT,
        },
        Err(_) => MAX_HINT,
    }
}

/// Non-negative integer seconds as a Duration, capped at [`MAX_HINT`].
pub(super) fn parse_delay_seconds(v: &str) -> Option<Duration> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = v.parse::<u64>().unwrap_or(u64::MAX);
    Some(Duration::from_secs(secs).min(MAX_HINT))
}

/// A non-negative integer (digits only, surrounding whitespace allowed).
pub(super) fn parse_uint(v: &str) -> Option<u64> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // More digits than u64 holds: still a valid (absurd) count; saturate.
    Some(v.parse::<u64>().unwrap_or(u64::MAX))
}

/// `digits[.digits]`, no sign, no exponent; finite.
pub(super) fn parse_decimal(v: &str) -> Option<f64> {
    let (int, frac) = match v.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (v, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || frac.is_some_and(|f| !digits(f)) {
        return None;
    }
    v.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// The value of parameter `key` (`;key=value`) on a structured-field item, or `None`.
/// A bare `;key` (boolean true) has no usable value here and also yields `None`.
pub(super) fn param<'a>(item: &'a str, key: &str) -> Option<&'a str> {
    split_unquoted(item, b';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case(key).then(|| v.trim())
    })
}

/// Strip one pair of surrounding double quotes, if present.
pub(super) fn unquote(v: &str) -> &str {
    let v = v.trim();
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(v)
}

/// Split on `sep` outside double-quoted strings (with `\` escapes), trimming each piece.
pub(super) fn split_unquoted(s: &str, sep: u8) -> SplitUnquoted<'_> {
    SplitUnquoted { rest: Some(s), sep }
}

pub(super) struct SplitUnquoted<'a> {
    rest: Option<&'a str>,
    sep: u8,
}

impl<'a> Iterator for SplitUnquoted<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let s = self.rest?;
        let bytes = s.as_bytes();
        let (mut in_quote, mut escaped) = (false, false);
        for (i, &b) in bytes.iter().enumerate() {
            if escaped {
                escaped = false;
            } else if in_quote && b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_quote = !in_quote;
            } else if !in_quote && b == self.sep {
                // `sep` is ASCII, so `i` and `i + 1` are char boundaries.
                self.rest = Some(&s[i + 1..]);
                return Some(s[..i].trim());
            }
        }
        self.rest = None;
        Some(s.trim())
    }
}
