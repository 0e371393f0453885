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

use std::time::{Duration, SystemTime};

mod parse;

use parse::*;

/// Ceiling for every duration read from a header (7 days): above the longest pause
/// `crawler.max_retry_after_ms` may allow (a day), so that a site asking for more than
/// that is told apart from one asking for exactly it, and its URL is given up.
pub const MAX_HINT: Duration = Duration::from_secs(7 * 86_400);

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
    /// The longest wait this crawl takes ([`Self::cap_pauses`]): a pause, or a gap
    /// between two sends, derived from the hints is cut to it; a rate is not.
    pub max_pause: Option<Duration>,
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
    /// fields are all read, and the most restrictive value, or pair of values, wins).
    pub fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        now: SystemTime,
    ) -> ServerHints {
        let mut retry_after: Option<Duration> = None;
        // Current-window state, by source precedence.
        let mut rl = Window::default(); // RateLimit
                                        // RateLimit-Remaining / -Reset and X-RateLimit-Remaining / -Reset, each field's
                                        // repeats in order (paired in `window_of`).
        let (mut legacy_rem, mut legacy_reset) = (Vec::new(), Vec::new());
        let (mut x_rem, mut x_reset) = (Vec::new(), Vec::new());

        // Policy, by source precedence.
        let mut pol = Policy::default(); // RateLimit-Policy
        let mut legacy_pol = Policy::default(); // RateLimit-Limit
        let mut x_pol = Policy::default(); // X-RateLimit-Limit

        for (name, value) in headers {
            let name = name.trim();
            let is = |n: &str| name.eq_ignore_ascii_case(n);
            if is("retry-after") {
                // A date already past (a stale page, a clock behind ours) asks for no pause
                // and says nothing: taken for `0`, it would turn a 429 into one that need
                // not be waited for, held or counted toward a ban.
                if let Some(d) = parse_retry_after(value, now).filter(|d| !d.is_zero()) {
                    retry_after = Some(retry_after.map_or(d, |r| r.max(d)));
                }
            } else if is("ratelimit") {
                parse_ratelimit(value, now, &mut rl);
            } else if is("ratelimit-policy") {
                parse_policy(value, &mut pol);
            } else if is("ratelimit-limit") {
                parse_limit(value, &mut legacy_pol);
            } else if is("ratelimit-remaining") {
                legacy_rem.extend(first_int(value));
            } else if is("ratelimit-reset") {
                legacy_reset.extend(parse_reset(value, now));
            } else if is("x-ratelimit-limit") {
                parse_limit(value, &mut x_pol);
            } else if is("x-ratelimit-remaining") {
                x_rem.extend(first_int(value));
            } else if is("x-ratelimit-reset") {
                x_reset.extend(parse_reset(value, now));
            }
        }
        let legacy = window_of(&legacy_rem, &legacy_reset);
        let x = window_of(&x_rem, &x_reset);

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
            max_pause: None,
        }
    }

    /// Cut every wait the hints ask for (`Retry-After`, a used-up quota's wait, the gap
    /// `reset / remaining` spreads the quota left over) to `max`, so one header cannot
    /// park a host for longer than the crawl is willing to wait. The rates they give are
    /// kept as the site said them: a window or a reset cut to `max` before the division
    /// would multiply the rate (an hour's quota spent in `max`). Returns the pause the
    /// site asked for when it was longer than `max` (see [`Self::pacing`]'s `pause_for`),
    /// so the caller can give up and say so.
    pub fn cap_pauses(&mut self, max: Duration) -> Option<Duration> {
        let asked = self.pacing().and_then(|p| p.pause_for);
        if let Some(r) = &mut self.retry_after {
            *r = (*r).min(max);
        }
        self.max_pause = Some(self.max_pause.map_or(max, |m| m.min(max)));
        asked.filter(|a| *a > max)
    }

    /// `true` if no hint at all was found.
    pub fn is_empty(&self) -> bool {
        ServerHints {
            max_pause: None,
            ..*self
        } == ServerHints::default()
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
        let cap = |d: Duration| self.max_pause.map_or(d, |m| d.min(m));
        let pause_for = match (self.retry_after, exhausted_pause) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
        .map(cap)
        .filter(|d| !d.is_zero());

        let min_interval = match (self.remaining, self.reset) {
            (Some(rem), Some(reset)) if rem > 0 && !reset.is_zero() => {
                let n = u32::try_from(rem).unwrap_or(u32::MAX);
                Some(cap(reset / n)).filter(|d| !d.is_zero())
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

/// The window one source's repeated `Remaining` and `Reset` fields describe. Repeats come
/// in pairs (a gateway's and the origin's, each adding its two fields in turn): paired
/// in order, the most restrictive pair is the window, and no pair is mixed with another
/// (a gateway's used-up quota with the origin's hour-long reset would ask for an hour's
/// pause where the gateway asked for a second). Counts that differ cannot be paired:
/// then each field's most restrictive value, the least remaining and the latest reset.
fn window_of(remaining: &[u64], reset: &[Duration]) -> Window {
    if remaining.len() == reset.len() {
        let mut w = Window::default();
        for (&r, &t) in remaining.iter().zip(reset) {
            w.merge(Window {
                remaining: Some(r),
                reset: Some(t),
            });
        }
        return w;
    }
    Window {
        remaining: remaining.iter().copied().min(),
        reset: reset.iter().copied().max(),
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

#[cfg(test)]
mod tests;
