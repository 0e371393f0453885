//! The modelled site: how it limits, how long its pages take, how they fail.
//!
//! Each shape is one that real sites have (see `SITE-SHAPES.md` in the shared notes): a
//! token bucket (burst 1 is nginx `limit_req` without `burst=`), a fixed quota window, a
//! penalty box that bans a client who sent too much over a period, and an application
//! server that queues instead of refusing. Any of them can be kept per client address
//! (each exit its own budget, possibly unequal) or for the whole host. The limit is
//! decided when a request *arrives*; page time (with noise and a heavy tail) and faults
//! come after it, as they do behind a real front end.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use super::host::ns;
use crate::rng::{RandomSource, SplitMix64};

/// How the site limits.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// No limit at all.
    None,
    /// A token bucket of `capacity` tokens/s holding at most `burst` (≥ 1).
    TokenBucket {
        /// Sustained capacity, requests/s.
        capacity: f64,
        /// Bucket size.
        burst: f64,
    },
    /// `limit` requests per `window`, counters reset at each window's edge.
    Window {
        /// Requests allowed per window.
        limit: u32,
        /// The window.
        window: Duration,
    },
    /// More than `max` requests within any `period` bans the client for `ban`.
    Ban {
        /// Requests allowed within a period.
        max: u32,
        /// The sliding period counted.
        period: Duration,
        /// How long a ban lasts.
        ban: Duration,
    },
    /// nginx `limit_req` with `burst=` and without `nodelay`: each key's excess over
    /// `rate` (in requests, draining at `rate`) grows by one per request; a request that
    /// would take it past `burst` is refused at once, any other is held for excess / rate
    /// before it is served. Latency rises with the sending rate, refusals come only once
    /// `burst` requests wait.
    Delayed {
        /// Requests/s the key is let through at.
        rate: f64,
        /// Requests that may wait (nginx's `burst=`).
        burst: f64,
    },
    /// No refusals: `workers` serve one request each (page time per [`SiteModel`]), the
    /// rest wait in a FIFO; a request that would wait longer than `max_wait` gets 503.
    /// Its capacity is `workers / mean page time`.
    Queue {
        /// Requests served at once.
        workers: u32,
        /// Longest wait before the site sheds load.
        max_wait: Duration,
    },
}

/// What the site answers when its limit says no.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Refusal {
    /// 429 or 503: a throttle.
    #[default]
    Throttle,
    /// 403: what WAF and CDN penalty boxes often send.
    Forbidden,
}

/// A modelled site.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteModel {
    /// The limit.
    pub shape: Shape,
    /// One budget per client address (exit) instead of one for the host.
    pub per_ip: bool,
    /// Per-IP only: each exit's budget as a multiple of the shape's (default 1 each).
    pub budgets: Vec<f64>,
    /// `Retry-After` sent with token-bucket and `Delayed` refusals.
    pub retry_after: Option<Duration>,
    /// Window refusals carry `Retry-After` = time to the window's reset.
    pub window_retry_after: bool,
    /// How refusals look.
    pub refusal: Refusal,
    /// Mean page time, after the limit.
    pub service: Duration,
    /// Page time varies uniformly by ± this fraction.
    pub service_noise: f64,
    /// This fraction of pages takes `tail_factor` times longer.
    pub tail_fraction: f64,
    /// See `tail_fraction`.
    pub tail_factor: f64,
    /// Fraction of accepted requests answered 500.
    pub error_rate: f64,
    /// Fraction of accepted requests whose connection is reset.
    pub reset_rate: f64,
    /// Fraction of accepted requests that never get an answer.
    pub hang_rate: f64,
}

impl Default for SiteModel {
    fn default() -> Self {
        Self {
            shape: Shape::TokenBucket {
                capacity: 100.0,
                burst: 10.0,
            },
            per_ip: false,
            budgets: vec![],
            retry_after: None,
            window_retry_after: false,
            refusal: Refusal::Throttle,
            service: Duration::ZERO,
            service_noise: 0.0,
            tail_fraction: 0.0,
            tail_factor: 1.0,
            error_rate: 0.0,
            reset_rate: 0.0,
            hang_rate: 0.0,
        }
    }
}

impl SiteModel {
    fn budget(&self, key: usize) -> f64 {
        if self.per_ip {
            self.budgets.get(key).copied().unwrap_or(1.0)
        } else {
            1.0
        }
    }

    /// Requests per second the site serves to `exits` exits (`None`: unlimited).
    /// `scale` multiplies a token bucket's or a queue's capacity (a capacity change).
    pub fn capacity(&self, exits: usize, scale: f64) -> Option<f64> {
        let keys: f64 = if self.per_ip {
            (0..exits).map(|i| self.budget(i)).sum()
        } else {
            1.0
        };
        let per_key = match self.shape {
            Shape::None => return None,
            Shape::TokenBucket { capacity, .. } => capacity * scale,
            Shape::Delayed { rate, .. } => rate * scale,
            Shape::Window { limit, window } => f64::from(limit) / window.as_secs_f64(),
            Shape::Ban { max, period, .. } => f64::from(max) / period.as_secs_f64(),
            Shape::Queue { workers, .. } => {
                return Some(f64::from(workers) / (self.service.as_secs_f64() / scale).max(1e-9))
            }
        };
        Some(per_key * keys)
    }
}

/// What the site does with one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Outcome {
    /// Served; the answer leaves the site at this time (ns).
    Served(u64),
    /// Refused by the limit, at once.
    Refused {
        forbidden: bool,
        retry_after: Option<Duration>,
    },
    /// A 500 page, leaving at this time (ns).
    Failed(u64),
    /// Connection reset at once.
    Reset,
    /// No answer ever.
    Hang,
}

#[derive(Debug, Clone, Default)]
struct KeyState {
    tokens: f64,
    last: u64,
    started: bool,
    window_index: u64,
    window_count: u32,
    arrivals: VecDeque<u64>,
    banned_until: u64,
}

/// The site's state during one run.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    model: SiteModel,
    keys: Vec<KeyState>,
    workers_free: Vec<u64>,
    in_service: BinaryHeap<Reverse<u64>>,
    rng: SplitMix64,
    /// When bans began (ns).
    pub(crate) ban_starts: Vec<u64>,
    /// The site's in-flight count at each arrival after `sample_from` (queue sites).
    pub(crate) in_flight: Vec<u32>,
    pub(crate) sample_from: u64,
    /// Capacity scale (a capacity change) and page-time scale (a site that got slower).
    pub(crate) capacity_scale: f64,
    pub(crate) service_scale: f64,
}

impl Site {
    pub(crate) fn new(model: SiteModel, seed: u64) -> Self {
        let workers = match model.shape {
            Shape::Queue { workers, .. } => workers as usize,
            _ => 0,
        };
        Self {
            model,
            keys: Vec::new(),
            workers_free: vec![0; workers],
            in_service: BinaryHeap::new(),
            rng: SplitMix64::new(seed ^ 0x517e),
            ban_starts: Vec::new(),
            in_flight: Vec::new(),
            sample_from: 0,
            capacity_scale: 1.0,
            service_scale: 1.0,
        }
    }

    /// A page's time: the mean, varied by the noise, sometimes the tail.
    fn page_time(&mut self) -> u64 {
        let m = &self.model;
        let mut t = m.service.as_secs_f64() * self.service_scale;
        t *= 1.0 + m.service_noise * self.rng.next_signed();
        if m.tail_fraction > 0.0 && self.rng.next_f64() < m.tail_fraction {
            t *= m.tail_factor;
        }
        (t.max(0.0) * 1e9) as u64
    }

    /// A request from exit `exit` arrives at `t` (ns).
    pub(crate) fn arrive(&mut self, exit: usize, t: u64) -> Outcome {
        let key = if self.model.per_ip { exit } else { 0 };
        if self.keys.len() <= key {
            self.keys.resize_with(key + 1, KeyState::default);
        }
        let budget = self.model.budget(key);
        let forbidden = self.model.refusal == Refusal::Forbidden;
        let refused = |retry_after| Outcome::Refused {
            forbidden,
            retry_after,
        };
        let k = &mut self.keys[key];
        let shape = self.model.shape.clone();
        match shape {
            Shape::None => {}
            Shape::TokenBucket { capacity, burst } => {
                let rate = capacity * budget * self.capacity_scale;
                let depth = (burst * budget).max(1.0);
                if !k.started {
                    k.started = true;
                    k.tokens = depth;
                    k.last = t;
                }
                let t = t.max(k.last);
                k.tokens = (k.tokens + (t - k.last) as f64 * rate / 1e9).min(depth);
                k.last = t;
                if k.tokens < 1.0 {
                    return refused(self.model.retry_after);
                }
                k.tokens -= 1.0;
            }
            Shape::Window { limit, window } => {
                let w = ns(window).max(1);
                let index = t / w;
                if index != k.window_index {
                    k.window_index = index;
                    k.window_count = 0;
                }
                let allowed = (f64::from(limit) * budget).round() as u32;
                if k.window_count >= allowed {
                    let ra = self
                        .model
                        .window_retry_after
                        .then(|| Duration::from_nanos((index + 1) * w - t));
                    return refused(ra);
                }
                k.window_count += 1;
            }
            Shape::Ban { max, period, ban } => {
                if t < k.banned_until {
                    return refused(None);
                }
                let p = ns(period);
                while k.arrivals.front().is_some_and(|a| a + p <= t) {
                    k.arrivals.pop_front();
                }
                k.arrivals.push_back(t);
                let allowed = (f64::from(max) * budget).round() as usize;
                if k.arrivals.len() > allowed {
                    k.banned_until = t + ns(ban);
                    k.arrivals.clear();
                    self.ban_starts.push(t);
                    return refused(None);
                }
            }
            Shape::Delayed { rate, burst } => {
                let rate = rate * budget * self.capacity_scale;
                let t = t.max(k.last);
                // As nginx: the request adds one to what is left of the excess, never
                // below zero (a new key finds none).
                let excess = if k.started {
                    (k.tokens - (t - k.last) as f64 * rate / 1e9 + 1.0).max(0.0)
                } else {
                    0.0
                };
                if excess > burst * budget {
                    return refused(self.model.retry_after);
                }
                k.started = true;
                k.tokens = excess;
                k.last = t;
                return self.serve(t + (excess / rate * 1e9) as u64);
            }
            Shape::Queue { .. } => {}
        }
        self.serve(t)
    }

    /// An accepted request: faults, then the page (through the workers on a queue site).
    fn serve(&mut self, t: u64) -> Outcome {
        let m = &self.model;
        let roll = self.rng.next_f64();
        if roll < m.reset_rate {
            return Outcome::Reset;
        }
        if roll < m.reset_rate + m.hang_rate {
            return Outcome::Hang;
        }
        let error = roll < m.reset_rate + m.hang_rate + m.error_rate;
        let page = self.page_time();
        let done = match self.model.shape {
            Shape::Queue { max_wait, .. } => {
                while self.in_service.peek().is_some_and(|Reverse(d)| *d <= t) {
                    self.in_service.pop();
                }
                if t >= self.sample_from {
                    self.in_flight.push(self.in_service.len() as u32 + 1);
                }
                let (w, free) = self
                    .workers_free
                    .iter()
                    .copied()
                    .enumerate()
                    .min_by_key(|(_, f)| *f)
                    .unwrap_or((0, t));
                let start = t.max(free);
                if start - t > ns(max_wait) {
                    return Outcome::Refused {
                        forbidden: false,
                        retry_after: None,
                    };
                }
                let done = start + page;
                if let Some(slot) = self.workers_free.get_mut(w) {
                    *slot = done;
                }
                self.in_service.push(Reverse(done));
                done
            }
            _ => t + page,
        };
        if error {
            Outcome::Failed(done)
        } else {
            Outcome::Served(done)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn burst_one_refuses_a_request_sooner_than_one_interval() {
        let model = SiteModel {
            shape: Shape::TokenBucket {
                capacity: 100.0,
                burst: 1.0,
            },
            ..SiteModel::default()
        };
        let mut s = Site::new(model, 1);
        assert!(matches!(s.arrive(0, 0), Outcome::Served(_)));
        assert!(matches!(s.arrive(0, 9 * MS), Outcome::Refused { .. }));
        assert!(matches!(s.arrive(0, 20 * MS), Outcome::Served(_)));
    }

    #[test]
    fn nginx_burst_without_nodelay_holds_the_excess_and_refuses_past_the_burst() {
        let model = SiteModel {
            shape: Shape::Delayed {
                rate: 10.0,
                burst: 2.0,
            },
            ..SiteModel::default()
        };
        let mut s = Site::new(model, 1);
        // Four at once: the first goes, the next two wait 100 and 200 ms, the fourth is
        // past the burst.
        assert_eq!(s.arrive(0, 0), Outcome::Served(0));
        assert_eq!(s.arrive(0, 0), Outcome::Served(100 * MS));
        assert_eq!(s.arrive(0, 0), Outcome::Served(200 * MS));
        assert!(matches!(s.arrive(0, 0), Outcome::Refused { .. }));
        // The excess drains at the rate: a second later nothing waits; 50 ms after that,
        // half an interval does.
        assert_eq!(s.arrive(0, 1000 * MS), Outcome::Served(1000 * MS));
        assert_eq!(s.arrive(0, 1050 * MS), Outcome::Served(1100 * MS));
    }

    #[test]
    fn a_window_resets_at_its_edge_and_says_when() {
        let model = SiteModel {
            shape: Shape::Window {
                limit: 2,
                window: Duration::from_secs(1),
            },
            window_retry_after: true,
            ..SiteModel::default()
        };
        let mut s = Site::new(model, 1);
        assert!(matches!(s.arrive(0, 0), Outcome::Served(_)));
        assert!(matches!(s.arrive(0, MS), Outcome::Served(_)));
        assert_eq!(
            s.arrive(0, 400 * MS),
            Outcome::Refused {
                forbidden: false,
                retry_after: Some(Duration::from_millis(600))
            }
        );
        assert!(matches!(s.arrive(0, 1000 * MS), Outcome::Served(_)));
    }

    #[test]
    fn a_penalty_box_bans_for_its_time_per_ip() {
        let model = SiteModel {
            shape: Shape::Ban {
                max: 3,
                period: Duration::from_secs(1),
                ban: Duration::from_secs(5),
            },
            per_ip: true,
            refusal: Refusal::Forbidden,
            ..SiteModel::default()
        };
        let mut s = Site::new(model, 1);
        for i in 0..3 {
            assert!(matches!(s.arrive(0, i * MS), Outcome::Served(_)));
        }
        assert!(matches!(
            s.arrive(0, 3 * MS),
            Outcome::Refused {
                forbidden: true,
                ..
            }
        ));
        assert!(matches!(s.arrive(1, 4 * MS), Outcome::Served(_)), "per IP");
        assert!(matches!(s.arrive(0, 4000 * MS), Outcome::Refused { .. }));
        assert!(matches!(s.arrive(0, 5004 * MS), Outcome::Served(_)));
        assert_eq!(s.ban_starts, vec![3 * MS]);
    }

    #[test]
    fn a_queue_serves_workers_at_once_and_the_rest_later() {
        let model = SiteModel {
            shape: Shape::Queue {
                workers: 2,
                max_wait: Duration::from_millis(150),
            },
            service: Duration::from_millis(100),
            ..SiteModel::default()
        };
        let mut s = Site::new(model, 1);
        assert_eq!(s.arrive(0, 0), Outcome::Served(100 * MS));
        assert_eq!(s.arrive(0, 0), Outcome::Served(100 * MS));
        assert_eq!(s.arrive(0, 0), Outcome::Served(200 * MS));
        assert_eq!(s.arrive(0, 0), Outcome::Served(200 * MS));
        assert!(matches!(s.arrive(0, 0), Outcome::Refused { .. }));
        assert_eq!(s.in_flight, vec![1, 2, 3, 4, 5]);
    }
}
