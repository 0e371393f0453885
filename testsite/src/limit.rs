//! The rate-limit shapes a site can have ([`Limit`]) and their per-key state.
//!
//! Why several shapes: real sites limit in different ways and a controller that holds on
//! one can fail on the next:
//! - a token bucket per client IP or per site (nginx `limit_req`, most CDNs);
//! - fixed windows with `X-RateLimit-*` headers (APIs);
//! - a penalty box: too many requests in a period and the key is banned for a while (WAF
//!   rate rules), answered 403 rather than 429;
//! - no limit at all but a fixed number of workers: the site just gets slower (an
//!   application server that is full).
//!
//! Every decision is taken at arrival, with the request's arrival time, before any latency:
//! like an nginx front that limits before the page work behind it starts.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use actix_http::StatusCode;

use crate::bucket::{Rate, TokenBucket};

/// Which rate limit the site enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Limit {
    /// No limit: every request is served.
    #[default]
    None,
    /// One token bucket per peer IP (what most sites do per client address). A rejection
    /// answers [`SiteConfig::reject_status`](crate::SiteConfig::reject_status) (429 by
    /// default) with `Retry-After` per [`RetryAfter`]. `burst: 1` is nginx `limit_req`
    /// without `burst=`: a request sooner than 1/rate after the last accepted one is refused.
    PerPeer(Rate),
    /// A token bucket per peer IP as [`Limit::PerPeer`], but `peer` gets `peer_rate`: one
    /// client address limited harder than the others (unequal per-IP budgets).
    PerPeerExcept {
        /// Every other peer's rate.
        rate: Rate,
        /// The peer limited differently.
        peer: IpAddr,
        /// Its rate.
        peer_rate: Rate,
    },
    /// One token bucket shared by all peers (a site-wide capacity limit), answered like
    /// [`Limit::PerPeer`].
    Global(Rate),
    /// One token bucket for the whole site, as [`Limit::Global`], whose rate changes at
    /// set times since the site started: `rates[0]` until `at[0]`, `rates[1]` until
    /// `at[1]`, then `rates[2]` — a site whose capacity drops and comes back, or rises.
    /// At a change the bucket keeps its tokens, up to the new depth. Every rate must
    /// have the same `per`.
    GlobalSteps {
        /// The rate before `at[0]`, until `at[1]`, and after.
        rates: [Rate; 3],
        /// When the rate changes, since the site started; `at[0] <= at[1]`.
        at: [Duration; 2],
    },
    /// Fixed windows, like an API's "N requests per minute": `limit` requests per `window`
    /// per key, counters reset at window edges aligned to the site's start
    /// ([`TestSite::started`](crate::TestSite::started)). Over the limit answers
    /// [`SiteConfig::reject_status`](crate::SiteConfig::reject_status) with `Retry-After` =
    /// seconds until the reset (rounded up, ≥ 1) under [`RetryAfter::Computed`]. Refused
    /// requests do not count.
    Window {
        /// One counter per peer IP (`true`) or one for the whole site (`false`).
        per_peer: bool,
        /// Requests accepted per window and key. Must be > 0.
        limit: u64,
        /// Window length. Must be > 0.
        window: Duration,
        /// Send `X-RateLimit-Limit`, `X-RateLimit-Remaining` (after this request) and
        /// `X-RateLimit-Reset` (seconds until the reset, a delta, rounded up, ≥ 1) on every
        /// answer of the key, accepted or refused.
        headers: bool,
    },
    /// A penalty box, like Cloudflare rate limiting rules or AWS WAF rate-based rules: per
    /// key, requests are counted over a sliding `period`; the request that makes the count
    /// exceed `max` starts a ban of `ban`, and it and every request of the key until the ban
    /// ends answer `status` with no `Retry-After`. Requests during a ban neither count nor
    /// extend it; the count starts afresh when it ends. Each ban is recorded in
    /// [`SiteStats::bans`](crate::SiteStats::bans). [`Limit::ban`] builds one with 403.
    Ban {
        /// One count per peer IP (`true`) or one for the whole site (`false`).
        per_peer: bool,
        /// Requests allowed within any `period`. A key that sends `max + 1` is banned.
        max: u64,
        /// The sliding period the requests are counted over. Must be > 0.
        period: Duration,
        /// How long a ban lasts (the *mitigation timeout*). Must be > 0.
        ban: Duration,
        /// The status of every answer during a ban (WAFs: usually 403).
        status: u16,
    },
    /// nginx `limit_req` with `burst=` and without `nodelay`: per key, the excess over
    /// `rate.tokens` per `rate.per` grows by one per request and drains at the rate; a
    /// request that would take it past `rate.burst` is refused at once (with
    /// `Retry-After` per [`RetryAfter`]: nginx sends none, [`RetryAfter::Omit`]), any other
    /// is held for excess / rate before it is served (counted in
    /// [`RequestRecord::queued`](crate::RequestRecord::queued)). A new key, or one whose
    /// excess has drained, finds none, as in nginx. Latency rises with the sending rate;
    /// refusals come once `burst` requests wait.
    Delayed {
        /// One excess per peer IP (`true`, nginx's `$binary_remote_addr`) or one for the
        /// whole site.
        per_peer: bool,
        /// The rate, and the requests that may wait (`burst`).
        rate: Rate,
    },
    /// No rejection at all, but at most `workers` requests served at once, each holding a
    /// worker for `service` (scaled by the request's latency factor, see
    /// [`SiteConfig::latency_noise`](crate::SiteConfig::latency_noise)); the rest wait in
    /// FIFO order. Latency is the only signal of overload — unless `max_wait` is set: a
    /// request that waited that long for a worker answers 503 (a proxy giving up). The
    /// in-flight distribution ([`SiteStats::in_flight_p99`](crate::SiteStats::in_flight_p99))
    /// shows how deep the queue got.
    Workers {
        /// Requests served at once. Must be > 0.
        workers: usize,
        /// How long each request holds its worker, before its latency factor.
        service: Duration,
        /// Longest wait for a worker before the answer is 503; `None`: wait for ever.
        max_wait: Option<Duration>,
    },
}

impl Limit {
    /// The status WAFs usually answer a banned client with.
    pub const BAN_STATUS: u16 = 403;

    /// A [`Limit::Ban`] answering [`Limit::BAN_STATUS`] (403).
    pub const fn ban(per_peer: bool, max: u64, period: Duration, ban: Duration) -> Limit {
        Limit::Ban {
            per_peer,
            max,
            period,
            ban,
            status: Limit::BAN_STATUS,
        }
    }

    /// Panic on a shape that cannot be served (this is a test fixture: fail loudly, at
    /// start, on the caller's thread).
    pub(crate) fn validate(&self) {
        match *self {
            Limit::None => {}
            Limit::PerPeer(rate) | Limit::Global(rate) | Limit::Delayed { rate, .. } => {
                rate.validate();
            }
            Limit::GlobalSteps { rates, at } => {
                rates.iter().for_each(Rate::validate);
                assert!(
                    rates.iter().all(|r| r.per == rates[0].per) && at[0] <= at[1],
                    "invalid test-site limit {self:?}: every rate needs the same per, and at[0] <= at[1]"
                );
            }
            Limit::PerPeerExcept {
                rate, peer_rate, ..
            } => {
                rate.validate();
                peer_rate.validate();
            }
            Limit::Window { limit, window, .. } => assert!(
                limit > 0 && !window.is_zero(),
                "invalid test-site limit {self:?}: limit and window must be > 0"
            ),
            Limit::Ban {
                period,
                ban,
                status,
                ..
            } => {
                assert!(
                    !period.is_zero() && !ban.is_zero(),
                    "invalid test-site limit {self:?}: period and ban must be > 0"
                );
                valid_status(status);
            }
            Limit::Workers { workers, .. } => assert!(
                workers > 0,
                "invalid test-site limit {self:?}: workers must be > 0"
            ),
        }
    }
}

/// Panic unless `status` can go on a status line.
pub(crate) fn valid_status(status: u16) {
    assert!(
        StatusCode::from_u16(status).is_ok(),
        "test site: {status} is not a valid HTTP status"
    );
}

/// What a 429 (or the configured rejection status) says about when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryAfter {
    /// No `Retry-After` header: the client must guess (nginx `limit_req`'s default).
    Omit,
    /// `Retry-After: N` with N = seconds until a token is available (token buckets) or until
    /// the window resets ([`Limit::Window`]), rounded up, at least 1.
    #[default]
    Computed,
    /// `Retry-After: N` with a fixed N.
    Fixed(u64),
}

/// The `X-RateLimit-*` values of one answer of a [`Limit::Window`] key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowHeaders {
    pub(crate) limit: u64,
    pub(crate) remaining: u64,
    /// Seconds until the reset, rounded up, ≥ 1.
    pub(crate) reset: u64,
}

/// What the limit says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Serve it (with these headers, for a window that sends them).
    Accept(Option<WindowHeaders>),
    /// Refuse it: `wait` is what a computed `Retry-After` rounds up.
    Reject {
        wait: Duration,
        headers: Option<WindowHeaders>,
    },
    /// The key is banned: answer `status`. `started` is the new ban's end when this request
    /// started it.
    Banned {
        status: u16,
        started: Option<Instant>,
    },
    /// Wait for a worker ([`Limit::Workers`]).
    Queue,
    /// Serve it after this long ([`Limit::Delayed`]).
    Hold(Duration),
}

/// The key a request is limited under: its peer, or `None` for the one site-wide key.
type Key = Option<IpAddr>;

/// The per-key state of the site's [`Limit`]. Only the map of the configured shape is used.
#[derive(Debug)]
pub(crate) struct Limiter {
    limit: Limit,
    /// Window edges are aligned to this.
    start: Instant,
    buckets: HashMap<Key, TokenBucket>,
    windows: HashMap<Key, WindowCount>,
    bans: HashMap<Key, BanState>,
    /// [`Limit::Delayed`]: each key's excess, in requests, and when it was last taken.
    excess: HashMap<Key, (f64, Instant)>,
}

#[derive(Debug, Default)]
struct WindowCount {
    /// Which window (since `start`) `count` is for.
    index: u128,
    count: u64,
}

#[derive(Debug, Default)]
struct BanState {
    /// Arrivals within the last period, oldest first; at most `max + 1` long.
    log: VecDeque<Instant>,
    /// The end of the current ban.
    until: Option<Instant>,
}

impl Limiter {
    pub(crate) fn new(limit: Limit, start: Instant) -> Self {
        Self {
            limit,
            start,
            buckets: HashMap::new(),
            windows: HashMap::new(),
            bans: HashMap::new(),
            excess: HashMap::new(),
        }
    }

    /// Decide about a request of `ip` arriving at `now` (not earlier than `start`).
    pub(crate) fn decide(&mut self, ip: IpAddr, now: Instant) -> Decision {
        let key = |per_peer: bool| per_peer.then_some(ip);
        match self.limit {
            Limit::None => Decision::Accept(None),
            Limit::PerPeer(rate) => self.bucket(Some(ip), rate, now),
            Limit::PerPeerExcept {
                rate,
                peer,
                peer_rate,
            } => {
                let rate = if ip == peer { peer_rate } else { rate };
                self.bucket(Some(ip), rate, now)
            }
            Limit::Global(rate) => self.bucket(None, rate, now),
            Limit::GlobalSteps { rates, at } => {
                let since = now.saturating_duration_since(self.start);
                let i = at.iter().filter(|t| since >= **t).count();
                self.bucket(None, rates[i], now)
            }
            Limit::Window {
                per_peer,
                limit,
                window,
                headers,
            } => {
                let count = self.windows.entry(key(per_peer)).or_default();
                count.take(self.start, now, limit, window, headers)
            }
            Limit::Ban {
                per_peer,
                max,
                period,
                ban,
                status,
            } => {
                let state = self.bans.entry(key(per_peer)).or_default();
                state.arrive(now, max, period, ban, status)
            }
            Limit::Delayed { per_peer, rate } => {
                let per_s = rate.tokens as f64 / rate.per.as_secs_f64();
                let burst = rate.burst as f64;
                // As nginx: what is left of the excess plus this request (none for a new
                // key), never below zero; a refusal changes nothing.
                let excess = match self.excess.get(&key(per_peer)) {
                    Some(&(e, last)) => {
                        let idle = now.saturating_duration_since(last).as_secs_f64();
                        (e - idle * per_s + 1.0).max(0.0)
                    }
                    None => 0.0,
                };
                if excess > burst {
                    return Decision::Reject {
                        wait: Duration::from_secs_f64((excess - burst) / per_s),
                        headers: None,
                    };
                }
                let last = self
                    .excess
                    .get(&key(per_peer))
                    .map_or(now, |&(_, l)| l.max(now));
                self.excess.insert(key(per_peer), (excess, last));
                Decision::Hold(Duration::from_secs_f64(excess / per_s))
            }
            Limit::Workers { .. } => Decision::Queue,
        }
    }

    fn bucket(&mut self, key: Key, rate: Rate, now: Instant) -> Decision {
        let bucket = self
            .buckets
            .entry(key)
            .or_insert_with(|| TokenBucket::new(rate, now));
        bucket.set_rate(rate, now);
        let taken = bucket.take(now);
        match taken {
            Ok(()) => Decision::Accept(None),
            Err(wait) => Decision::Reject {
                wait,
                headers: None,
            },
        }
    }
}

impl WindowCount {
    fn take(
        &mut self,
        start: Instant,
        now: Instant,
        limit: u64,
        window: Duration,
        headers: bool,
    ) -> Decision {
        let window_ns = window.as_nanos();
        let index = now.saturating_duration_since(start).as_nanos() / window_ns;
        if index != self.index {
            self.index = index;
            self.count = 0;
        }
        let reset_at = start + nanos((index + 1) * window_ns);
        let wait = reset_at.saturating_duration_since(now);
        let accept = self.count < limit;
        if accept {
            self.count += 1;
        }
        let headers = headers.then(|| WindowHeaders {
            limit,
            remaining: limit - self.count,
            reset: whole_seconds_up(wait),
        });
        if accept {
            Decision::Accept(headers)
        } else {
            Decision::Reject { wait, headers }
        }
    }
}

impl BanState {
    fn arrive(
        &mut self,
        now: Instant,
        max: u64,
        period: Duration,
        ban: Duration,
        status: u16,
    ) -> Decision {
        if let Some(until) = self.until {
            if now < until {
                return Decision::Banned {
                    status,
                    started: None,
                };
            }
            self.until = None;
            self.log.clear();
        }
        while self
            .log
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) >= period)
        {
            self.log.pop_front();
        }
        self.log.push_back(now);
        if self.log.len() as u64 > max {
            let until = now + ban;
            self.until = Some(until);
            self.log.clear();
            Decision::Banned {
                status,
                started: Some(until),
            }
        } else {
            Decision::Accept(None)
        }
    }
}

/// Whole seconds, rounded up, at least 1: what `Retry-After` and `X-RateLimit-Reset` can say.
pub(crate) fn whole_seconds_up(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000_000))
        .unwrap_or(u64::MAX)
        .max(1)
}

fn nanos(ns: u128) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// nginx `limit_req` without `burst=`: burst 1. A request sooner than 1/rate after the
    /// last *accepted* one is refused (and a refusal does not move that mark); one at
    /// ≥ 1/rate is accepted.
    #[test]
    fn burst_one_refuses_sooner_than_one_over_rate_and_accepts_at_it() {
        let t0 = Instant::now();
        // 10 per second: 1/rate = 100 ms.
        let mut l = Limiter::new(Limit::PerPeer(Rate::per_second(10, 1)), t0);
        assert_eq!(l.decide(A, t0), Decision::Accept(None));
        let early = l.decide(A, t0 + ms(40));
        assert_eq!(
            early,
            Decision::Reject {
                wait: ms(60),
                headers: None
            }
        );
        assert!(matches!(
            l.decide(A, t0 + ms(100) - Duration::from_nanos(1)),
            Decision::Reject { .. }
        ));
        // Exactly 1/rate after the last accepted one, despite the refusals in between.
        assert_eq!(l.decide(A, t0 + ms(100)), Decision::Accept(None));
        // No credit is saved up by waiting longer: depth 1.
        let t1 = t0 + ms(1000);
        assert_eq!(l.decide(A, t1), Decision::Accept(None));
        assert!(matches!(l.decide(A, t1), Decision::Reject { .. }));
        assert!(matches!(l.decide(A, t1 + ms(99)), Decision::Reject { .. }));
        assert_eq!(l.decide(A, t1 + ms(150)), Decision::Accept(None));
        // Another peer has its own bucket.
        assert_eq!(l.decide(B, t1), Decision::Accept(None));
    }

    /// nginx `limit_req` with `burst=2` without `nodelay`, 10 per second: what exceeds
    /// the rate waits its turn, and past the burst it is refused.
    #[test]
    fn a_delayed_limit_holds_the_excess_and_refuses_past_the_burst() {
        let t0 = Instant::now();
        let limit = Limit::Delayed {
            per_peer: true,
            rate: Rate::per_second(10, 2),
        };
        let mut l = Limiter::new(limit, t0);
        assert_eq!(l.decide(A, t0), Decision::Hold(Duration::ZERO));
        assert_eq!(l.decide(A, t0), Decision::Hold(ms(100)));
        assert_eq!(l.decide(A, t0), Decision::Hold(ms(200)));
        assert!(matches!(l.decide(A, t0), Decision::Reject { .. }));
        // The excess drains at the rate; a second later nothing waits.
        assert_eq!(l.decide(A, t0 + ms(1000)), Decision::Hold(Duration::ZERO));
        assert_eq!(l.decide(A, t0 + ms(1050)), Decision::Hold(ms(50)));
        // Another peer has its own.
        assert_eq!(l.decide(B, t0 + ms(1050)), Decision::Hold(Duration::ZERO));
    }

    #[test]
    fn capacity_steps_change_the_one_bucket_at_their_times() {
        let t0 = Instant::now();
        let shape = Limit::GlobalSteps {
            rates: [
                Rate::per_second(10, 1),
                Rate::per_second(2, 1),
                Rate::per_second(10, 1),
            ],
            at: [ms(1000), ms(3000)],
        };
        let mut l = Limiter::new(shape, t0);
        let accepted = |l: &mut Limiter, from: Duration, to: Duration, every: Duration| {
            let mut t = from;
            let mut n = 0;
            while t < to {
                // Two peers, one bucket: the site's capacity, not each peer's.
                for ip in [A, B] {
                    n += u32::from(l.decide(ip, t0 + t) == Decision::Accept(None));
                }
                t += every;
            }
            n
        };
        assert_eq!(accepted(&mut l, ms(0), ms(1000), ms(50)), 10);
        assert_eq!(accepted(&mut l, ms(1000), ms(3000), ms(50)), 4);
        assert_eq!(accepted(&mut l, ms(3000), ms(4000), ms(50)), 10);
    }

    #[test]
    fn windows_reset_at_edges_aligned_to_the_start() {
        let t0 = Instant::now();
        let shape = Limit::Window {
            per_peer: true,
            limit: 2,
            window: ms(1500),
            headers: true,
        };
        let mut l = Limiter::new(shape, t0);
        let h = |remaining, reset| {
            Some(WindowHeaders {
                limit: 2,
                remaining,
                reset,
            })
        };
        // 200 ms into the first window: 1.3 s to the reset, 2 s rounded up.
        let t = t0 + ms(200);
        assert_eq!(l.decide(A, t), Decision::Accept(h(1, 2)));
        assert_eq!(l.decide(A, t + ms(400)), Decision::Accept(h(0, 1)));
        assert_eq!(
            l.decide(A, t + ms(500)),
            Decision::Reject {
                wait: ms(800),
                headers: h(0, 1)
            }
        );
        assert_eq!(l.decide(B, t + ms(500)), Decision::Accept(h(1, 1)));
        // The edge is at 1.5 s after the start, not 1.5 s after the first request.
        assert_eq!(l.decide(A, t0 + ms(1500)), Decision::Accept(h(1, 2)));
        // A window with no request in it changes nothing: the count is per window index.
        assert_eq!(l.decide(A, t0 + ms(4600)), Decision::Accept(h(1, 2)));
        assert_eq!(l.decide(A, t0 + ms(4601)), Decision::Accept(h(0, 2)));
        assert!(matches!(
            l.decide(A, t0 + ms(4602)),
            Decision::Reject { .. }
        ));
    }

    #[test]
    fn global_window_is_one_counter() {
        let t0 = Instant::now();
        let shape = Limit::Window {
            per_peer: false,
            limit: 1,
            window: ms(100),
            headers: false,
        };
        let mut l = Limiter::new(shape, t0);
        assert_eq!(l.decide(A, t0), Decision::Accept(None));
        assert!(matches!(
            l.decide(B, t0 + ms(10)),
            Decision::Reject { headers: None, .. }
        ));
        assert_eq!(l.decide(B, t0 + ms(100)), Decision::Accept(None));
    }

    #[test]
    fn ban_starts_on_the_request_that_exceeds_and_lasts_its_time() {
        let t0 = Instant::now();
        let mut l = Limiter::new(Limit::ban(true, 2, ms(100), ms(500)), t0);
        assert_eq!(l.decide(A, t0), Decision::Accept(None));
        assert_eq!(l.decide(A, t0 + ms(50)), Decision::Accept(None));
        // The sliding period: at 100 ms the first request has left it.
        assert_eq!(l.decide(A, t0 + ms(100)), Decision::Accept(None));
        assert_eq!(
            l.decide(A, t0 + ms(120)),
            Decision::Banned {
                status: 403,
                started: Some(t0 + ms(620))
            }
        );
        // Banned until 620 ms, whatever it sends; requests meanwhile do not extend the ban.
        for t in [130, 300, 619] {
            assert_eq!(
                l.decide(A, t0 + ms(t)),
                Decision::Banned {
                    status: 403,
                    started: None
                }
            );
        }
        assert_eq!(l.decide(B, t0 + ms(300)), Decision::Accept(None));
        // After the ban the count starts afresh.
        assert_eq!(l.decide(A, t0 + ms(620)), Decision::Accept(None));
        assert_eq!(l.decide(A, t0 + ms(621)), Decision::Accept(None));
        assert!(matches!(
            l.decide(A, t0 + ms(622)),
            Decision::Banned {
                started: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn whole_seconds_round_up_and_never_say_zero() {
        assert_eq!(whole_seconds_up(Duration::ZERO), 1);
        assert_eq!(whole_seconds_up(ms(1)), 1);
        assert_eq!(whole_seconds_up(ms(1000)), 1);
        assert_eq!(whole_seconds_up(ms(1001)), 2);
    }

    #[test]
    #[should_panic(expected = "workers must be > 0")]
    fn zero_workers_is_refused() {
        Limit::Workers {
            workers: 0,
            service: ms(1),
            max_wait: None,
        }
        .validate();
    }

    #[test]
    #[should_panic(expected = "not a valid HTTP status")]
    fn an_invalid_ban_status_is_refused() {
        Limit::Ban {
            per_peer: true,
            max: 1,
            period: ms(1),
            ban: ms(1),
            status: 42,
        }
        .validate();
    }
}
