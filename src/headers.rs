//! Server hints: `Retry-After`, `RateLimit` / `RateLimit-Policy`, `X-RateLimit-*` → pacing.
//!
//! # Why
//!
//! A site that *tells* us its limit is the best possible input to the limiter: the
//! adaptive controller ([`crate::aimd`]) can only discover a limit by crossing it (a 429 or
//! a latency spike), whereas these headers let the crawler stay under it without ever
//! being refused. This module turns whatever the server sent into a [`ServerHints`] and
//! then into a [`Pacing`] hint the caller applies to the (exit, host) pair that received
//! the response (limits are almost always keyed per client IP, i.e. per exit).
//!
//! # Why `reset / remaining`
//!
//! `remaining` requests are left in the current quota and the quota refills in `reset`.
//! Sending them as fast as possible would drain the quota early and then sit idle (or,
//! with a tight window, earn a 429 from a slightly different server-side clock); sending
//! one every `reset / remaining` spends exactly the remaining quota by the time it refills,
//! which is both the fastest *sustained* pace and the one that never crosses the limit.
//! With several policies (e.g. a burst and a daily quota) the largest interval is the one
//! that satisfies all of them, so the most restrictive item is kept. `remaining == 0` means
//! the next request will be refused: pause until `reset`.
//!
//! The policy (`quota` per `window`) gives the long-run rate `q / w` as a ceiling
//! ([`Pacing::max_rps`]), independent of where we are in the current window.
//!
//! # Forms understood
//!
//! | header | forms |
//! |---|---|
//! | `Retry-After` | delay-seconds (`120`) or HTTP-date (IMF-fixdate, RFC 850, asctime) |
//! | `RateLimit` | draft ≥ 08 structured list `"default";r=50;t=30`; draft 07 dictionary `limit=100, remaining=50, reset=30` |
//! | `RateLimit-Policy` | draft ≥ 08 `"default";q=100;w=60`; older `100;w=60` |
//! | `RateLimit-Limit` / `-Remaining` / `-Reset` | drafts ≤ 06, e.g. `RateLimit-Limit: 100, 100;w=60` |
//! | `X-RateLimit-Limit` / `-Remaining` / `-Reset` | de-facto; reset as seconds from now, unix epoch seconds (> 10⁹), epoch milliseconds (> 10¹²), or an HTTP-date |
//!
//! Parsing is lenient (whitespace, token or string policy names, unknown parameters
//! ignored) and total: garbage yields `None`, never a panic. Every duration is capped at
//! [`MAX_HINT`] so one absurd header cannot park an exit for years.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Ceiling for every duration read from a header (1 day).
pub const MAX_HINT: Duration = Duration::from_secs(86_400);

/// A reset value above this is a unix timestamp in seconds, not a delay (10⁹ s ≈ 31.7
/// years as a delay; as a timestamp, September 2001).
pub const EPOCH_SECONDS_THRESHOLD: f64 = 1.0e9;

/// A reset value above this is a unix timestamp in milliseconds.
pub const EPOCH_MILLIS_THRESHOLD: f64 = 1.0e12;

/// Parse a `Retry-After` value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
///
/// Surrounding whitespace is ignored. A negative, fractional or otherwise malformed value
/// is `None`. A delay (or a date) beyond [`MAX_HINT`] is capped at it; a date in the past
/// is `Duration::ZERO`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: a valid delay-seconds, possibly too large for u64 → cap.
        let secs = v.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(MAX_HINT));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(until(at, now))
}

/// Time from `now` to `at`, zero if `at` has passed, capped at [`MAX_HINT`].
fn until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now)
        .unwrap_or(Duration::ZERO)
        .min(MAX_HINT)
}

/// What the server said about its limits, normalised.
///
/// Fields come in pairs that are only meaningful together: (`remaining`, `reset`) describe
/// the current window and (`limit`, `window`) the policy. Each pair is taken from the most
/// specific source present — `RateLimit`/`RateLimit-Policy`, then the `RateLimit-*`
/// fields of older drafts, then `X-RateLimit-*` — and never mixed across sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerHints {
    /// `Retry-After`: do not send before this much time has passed.
    pub retry_after: Option<Duration>,
    /// Requests left in the current window.
    pub remaining: Option<u64>,
    /// Time until the current window's quota refills.
    pub reset: Option<Duration>,
    /// Requests allowed per window (the policy's quota).
    pub limit: Option<u64>,
    /// Length of the policy's window.
    pub window: Option<Duration>,
}

/// A pacing hint derived from [`ServerHints`]. Every field is a constraint; the caller
/// applies all that are present (they combine by taking the most restrictive).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pacing {
    /// Send nothing to this host from this exit for this long (quota exhausted or
    /// `Retry-After`).
    pub pause_for: Option<Duration>,
    /// After that, leave at least this much time between requests: the remaining quota
    /// spread over the time until it refills (`reset / remaining`).
    pub min_interval: Option<Duration>,
    /// Long-run ceiling from the policy: `quota / window` requests per second.
    pub max_rps: Option<f64>,
}

impl Pacing {
    /// The gap between requests implied by both `min_interval` and `max_rps`: the larger
    /// of the two (`None` if neither is set).
    pub fn interval(&self) -> Option<Duration> {
        let from_rps = self
            .max_rps
            .filter(|r| r.is_finite() && *r > 0.0)
            .and_then(|r| Duration::try_from_secs_f64(1.0 / r).ok());
        match (self.min_interval, from_rps) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

impl ServerHints {
    /// Collect hints from response headers (names compared case-insensitively; repeated
    /// fields are all read, and the most restrictive value wins).
    pub fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        now: SystemTime,
    ) -> ServerHints {
        let mut retry_after: Option<Duration> = None;
        // Current-window state, by source precedence.
        let mut rl = Window::default(); // RateLimit
        let mut legacy = Window::default(); // RateLimit-Remaining / -Reset
        let mut x = Window::default(); // X-RateLimit-Remaining / -Reset

        // Policy, by source precedence.
        let mut pol = Policy::default(); // RateLimit-Policy
        let mut legacy_pol = Policy::default(); // RateLimit-Limit
        let mut x_pol = Policy::default(); // X-RateLimit-Limit

        for (name, value) in headers {
            let name = name.trim();
            let is = |n: &str| name.eq_ignore_ascii_case(n);
            if is("retry-after") {
                if let Some(d) = parse_retry_after(value, now) {
                    retry_after = Some(retry_after.map_or(d, |r| r.max(d)));
                }
            } else if is("ratelimit") {
                parse_ratelimit(value, now, &mut rl);
            } else if is("ratelimit-policy") {
                parse_policy(value, &mut pol);
            } else if is("ratelimit-limit") {
                parse_limit(value, &mut legacy_pol);
            } else if is("ratelimit-remaining") {
                set_first(&mut legacy.remaining, first_int(value));
            } else if is("ratelimit-reset") {
                set_first(&mut legacy.reset, parse_reset(value, now));
            } else if is("x-ratelimit-limit") {
                parse_limit(value, &mut x_pol);
            } else if is("x-ratelimit-remaining") {
                set_first(&mut x.remaining, first_int(value));
            } else if is("x-ratelimit-reset") {
                set_first(&mut x.reset, parse_reset(value, now));
            }
        }

        let win = [rl, legacy, x]
            .into_iter()
            .find(|w| w.remaining.is_some() || w.reset.is_some())
            .unwrap_or_default();
        let policy = [pol, legacy_pol, x_pol]
            .into_iter()
            .find(|p| p.quota.is_some())
            .unwrap_or_default();
        ServerHints {
            retry_after,
            remaining: win.remaining,
            reset: win.reset,
            limit: policy.quota,
            window: policy.window,
        }
    }

    /// Cut every duration the site gave (`Retry-After`, the window's reset, the policy's
    /// window) to `max`, so one header cannot park a host for longer than the crawl is
    /// willing to wait. Returns the pause the site asked for when it was longer than `max`
    /// (see [`Self::pacing`]'s `pause_for`), so the caller can give up and say so.
    pub fn cap_pauses(&mut self, max: Duration) -> Option<Duration> {
        let asked = self.pacing().and_then(|p| p.pause_for);
        for v in [&mut self.retry_after, &mut self.reset, &mut self.window]
            .into_iter()
            .flatten()
        {
            *v = (*v).min(max);
        }
        asked.filter(|a| *a > max)
    }

    /// `true` if no hint at all was found.
    pub fn is_empty(&self) -> bool {
        *self == ServerHints::default()
    }

    /// Turn the hints into a pacing hint, or `None` if they constrain nothing.
    ///
    /// * `pause_for` = the larger of `Retry-After` and, when `remaining == 0`, the time to
    ///   `reset` (or, if the server gave no reset, one policy `window`: the quota refills
    ///   within at most one window). A zero pause is dropped.
    /// * `min_interval` = `reset / remaining` when `remaining > 0` and `reset > 0`.
    /// * `max_rps` = `limit / window` when both are known and non-zero.
    pub fn pacing(&self) -> Option<Pacing> {
        let exhausted_pause = match self.remaining {
            Some(0) => self.reset.or(self.window),
            _ => None,
        };
        let pause_for = match (self.retry_after, exhausted_pause) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
        .filter(|d| !d.is_zero());

        let min_interval = match (self.remaining, self.reset) {
            (Some(rem), Some(reset)) if rem > 0 && !reset.is_zero() => {
                let n = u32::try_from(rem).unwrap_or(u32::MAX);
                Some(reset / n).filter(|d| !d.is_zero())
            }
            _ => None,
        };

        let max_rps = match (self.limit, self.window) {
            (Some(q), Some(w)) if !w.is_zero() => Some(q as f64 / w.as_secs_f64()),
            _ => None,
        };

        let p = Pacing {
            pause_for,
            min_interval,
            max_rps,
        };
        (p != Pacing::default()).then_some(p)
    }
}

/// Current-window state from one source.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    remaining: Option<u64>,
    reset: Option<Duration>,
}

impl Window {
    /// Keep the more restrictive of `self` and `other` (see the module docs: a zero
    /// remaining beats any positive one; otherwise the larger `reset / remaining`).
    fn merge(&mut self, other: Window) {
        if other.remaining.is_none() && other.reset.is_none() {
            return;
        }
        if self.remaining.is_none() && self.reset.is_none() {
            *self = other;
            return;
        }
        if restrictiveness(other) > restrictiveness(*self) {
            *self = other;
        }
    }
}

/// An orderable measure of how restrictive a window state is.
fn restrictiveness(w: Window) -> Restrict {
    let reset_ns = w.reset.map(|d| d.as_nanos());
    match (w.remaining, reset_ns) {
        (Some(0), r) => Restrict::Exhausted(r.unwrap_or(0)),
        (Some(rem), Some(r)) => Restrict::Interval(r, rem),
        _ => Restrict::Unknown,
    }
}

/// Restrictiveness: `Unknown < Interval(..) < Exhausted(..)`; intervals compare by
/// `reset / remaining` (cross-multiplied), exhausted states by reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restrict {
    Unknown,
    Interval(u128, u64),
    Exhausted(u128),
}

impl PartialOrd for Restrict {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Restrict {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        use Restrict::*;
        match (self, other) {
            (Unknown, Unknown) => Equal,
            (Unknown, _) => Less,
            (_, Unknown) => Greater,
            (Exhausted(a), Exhausted(b)) => a.cmp(b),
            (Exhausted(_), _) => Greater,
            (_, Exhausted(_)) => Less,
            (Interval(ra, na), Interval(rb, nb)) => {
                // ra/na vs rb/nb. reset ≤ 1 day in ns (< 2^47) times a u64 fits u128.
                (ra * u128::from(*nb)).cmp(&(rb * u128::from(*na)))
            }
        }
    }
}

/// Policy (quota per window) from one source.
#[derive(Debug, Clone, Copy, Default)]
struct Policy {
    quota: Option<u64>,
    window: Option<Duration>,
}

impl Policy {
    /// Keep the more restrictive policy: one with a window beats one without; among those
    /// with windows, the smaller `quota / window`.
    fn merge(&mut self, other: Policy) {
        let Some(q_new) = other.quota else { return };
        let Some(q_old) = self.quota else {
            *self = other;
            return;
        };
        match (self.window, other.window) {
            (None, Some(_)) => *self = other,
            (Some(w_old), Some(w_new)) => {
                let lhs = u128::from(q_new) * w_old.as_nanos();
                let rhs = u128::from(q_old) * w_new.as_nanos();
                if lhs < rhs {
                    *self = other;
                }
            }
            (None, None) if q_new < q_old => *self = other,
            _ => {}
        }
    }
}

fn set_first<T>(slot: &mut Option<T>, v: Option<T>) {
    if slot.is_none() {
        *slot = v;
    }
}

/// `RateLimit`: the structured list (`"name";r=..;t=..`) or the draft-07 dictionary
/// (`limit=.., remaining=.., reset=..`).
fn parse_ratelimit(value: &str, now: SystemTime, out: &mut Window) {
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
fn parse_policy(value: &str, out: &mut Policy) {
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
fn parse_limit(value: &str, out: &mut Policy) {
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
fn first_int(value: &str) -> Option<u64> {
    let first = split_unquoted(value, b',').next()?;
    parse_uint(split_unquoted(first, b';').next()?)
}

/// A reset value: delay seconds (fractions allowed), unix epoch seconds (> 10⁹) or
/// milliseconds (> 10¹²), or an HTTP-date. Capped at [`MAX_HINT`]; past → zero.
fn parse_reset(value: &str, now: SystemTime) -> Option<Duration> {
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

fn epoch_until(secs: f64, now: SystemTime) -> Duration {
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
fn parse_delay_seconds(v: &str) -> Option<Duration> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = v.parse::<u64>().unwrap_or(u64::MAX);
    Some(Duration::from_secs(secs).min(MAX_HINT))
}

/// A non-negative integer (digits only, surrounding whitespace allowed).
fn parse_uint(v: &str) -> Option<u64> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // More digits than u64 holds: still a valid (absurd) count; saturate.
    Some(v.parse::<u64>().unwrap_or(u64::MAX))
}

/// `digits[.digits]`, no sign, no exponent; finite.
fn parse_decimal(v: &str) -> Option<f64> {
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
fn param<'a>(item: &'a str, key: &str) -> Option<&'a str> {
    split_unquoted(item, b';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case(key).then(|| v.trim())
    })
}

/// Strip one pair of surrounding double quotes, if present.
fn unquote(v: &str) -> &str {
    let v = v.trim();
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(v)
}

/// Split on `sep` outside double-quoted strings (with `\` escapes), trimming each piece.
fn split_unquoted(s: &str, sep: u8) -> SplitUnquoted<'_> {
    SplitUnquoted { rest: Some(s), sep }
}

struct SplitUnquoted<'a> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        assert_eq!(parse_retry_after("86400", n), Some(MAX_HINT));
        assert_eq!(parse_retry_after("86401", n), Some(MAX_HINT));
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
        // A far reset with requests left would spread them over years: cut too.
        let mut h = ServerHints::from_headers(
            [
                ("x-ratelimit-remaining", "10"),
                ("x-ratelimit-reset", "315360000"),
            ],
            n,
        );
        assert_eq!(h.cap_pauses(cap), None);
        assert_eq!(h.pacing().and_then(|p| p.min_interval), Some(secs(30)));
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
}
