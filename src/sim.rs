//! A discrete-event simulation of one limiter key against a modelled site.
//!
//! Why it is in the core: the controller's promise (≥ 95 % of a site's capacity with ≤ 1 %
//! throttled) is a property of the feedback loop, not of one function, and it can only be
//! checked by closing the loop. The simulation does that on fake time: a [`Controller`]
//! drives a [`Pacer`], requests reach a modelled site after half a round trip, the site
//! answers from its own limit, and the answers come back as feedback. Two minutes of
//! crawling run in milliseconds, deterministically from a seed, so the scenario tests in
//! `tests/aimd_scenarios.rs` can assert ranges and the `aimd_sim` example can print them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::aimd::{AimdConfig, Controller, Response, Signal};
use crate::decision::Decision;
use crate::limiter::RateLimiter;
use crate::pacer::Pacer;
use crate::rng::{RandomSource, SplitMix64};

/// How the modelled site limits its clients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SiteLimit {
    /// A token bucket of `capacity` tokens/s holding at most `burst`: 429 when empty.
    TokenBucket {
        /// Sustained capacity, requests/s.
        capacity: f64,
        /// Bucket size.
        burst: f64,
    },
    /// No 429 at all: one server works through a FIFO queue at `capacity` requests/s, so
    /// sending faster only makes answers slower (a site that slows down without saying so).
    /// Requests that would wait longer than `max_wait` get 503.
    Queue {
        /// Service rate, requests/s.
        capacity: f64,
        /// Longest queueing delay before the site sheds load with 503.
        max_wait: Duration,
    },
}

impl SiteLimit {
    fn capacity(&self) -> f64 {
        match *self {
            SiteLimit::TokenBucket { capacity, .. } | SiteLimit::Queue { capacity, .. } => capacity,
        }
    }

    fn with_capacity(self, c: f64) -> Self {
        match self {
            SiteLimit::TokenBucket { burst, .. } => SiteLimit::TokenBucket { capacity: c, burst },
            SiteLimit::Queue { max_wait, .. } => SiteLimit::Queue {
                capacity: c,
                max_wait,
            },
        }
    }
}

/// One simulated run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The site's limit.
    pub site: SiteLimit,
    /// At this time the site's capacity becomes the given value (a site under other load).
    pub capacity_change: Option<(Duration, f64)>,
    /// Round-trip time without queueing.
    pub rtt: Duration,
    /// Each round trip varies uniformly by ± this fraction.
    pub rtt_noise: f64,
    /// `Retry-After` the site sends with its 429s.
    pub retry_after: Option<Duration>,
    /// The controller under test.
    pub controller: AimdConfig,
    /// Pacer jitter (fraction of an interval).
    pub jitter: f64,
    /// How long to run.
    pub duration: Duration,
    /// Figures count requests sent after this time.
    pub warmup: Duration,
    /// The crawler has at most this many URLs per second to send (`None`: always more).
    pub demand_rps: Option<f64>,
    /// Seed for jitter and noise.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            site: SiteLimit::TokenBucket {
                capacity: 100.0,
                burst: 10.0,
            },
            capacity_change: None,
            rtt: Duration::from_millis(50),
            rtt_noise: 0.2,
            retry_after: None,
            controller: AimdConfig::default(),
            jitter: 0.1,
            duration: Duration::from_secs(120),
            warmup: Duration::from_secs(20),
            demand_rps: None,
            seed: 1,
        }
    }
}

/// What the run measured, over requests sent after the warm-up.
#[derive(Debug, Clone, PartialEq)]
pub struct SimReport {
    /// Requests sent (whole run).
    pub sent: u64,
    /// Successful answers after the warm-up.
    pub ok: u64,
    /// 429/503 answers after the warm-up.
    pub throttled: u64,
    /// `ok` per second divided by the site's capacity (averaged over the window).
    pub goodput: f64,
    /// `throttled / (ok + throttled)` after the warm-up.
    pub throttled_fraction: f64,
    /// 429/503 answers during the warm-up (slow start's overshoot).
    pub warmup_throttled: u64,
    /// Mean latency of successful answers after the warm-up.
    pub mean_latency: Duration,
    /// The controller's rate at the end.
    pub final_rps: f64,
    /// How many times the controller cut its rate.
    pub decreases: u64,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Answer {
    at_ns: u64,
    sent_ns: u64,
    throttled: bool,
    limited: bool,
}

/// Run one simulation.
pub fn simulate(cfg: &SimConfig) -> SimReport {
    let base = Instant::now();
    let at = |ns: u64| base + Duration::from_nanos(ns);
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let end = ns(cfg.duration);
    let warmup = ns(cfg.warmup);

    let mut rng = SplitMix64::new(cfg.seed);
    let mut ctl = Controller::new(cfg.controller.clone(), base);
    let mut pacer = Pacer::new(ctl.interval(), cfg.jitter, cfg.seed ^ 0x5eed, base);
    let mut site = cfg.site;
    let mut tokens = match site {
        SiteLimit::TokenBucket { burst, .. } => burst,
        SiteLimit::Queue { .. } => 0.0,
    };
    let mut site_clock = 0u64; // token bucket: last refill; queue: when the server is free
    let mut demand_next = 0u64;
    let mut answers: BinaryHeap<Reverse<Answer>> = BinaryHeap::new();

    let (mut sent, mut ok, mut throttled, mut warm_thr) = (0u64, 0u64, 0u64, 0u64);
    let mut latency_sum = 0u128;
    let mut now = 0u64;
    let mut changed = false;
    // Whether the next send had to wait for the pacer (the crawler wanted to go faster).
    let mut waited = false;

    while now < end {
        if let Some((when, c)) = cfg.capacity_change {
            if !changed && now >= ns(when) {
                site = site.with_capacity(c);
                changed = true;
            }
        }
        // Send everything the pacer (and the crawler's supply of URLs) allows now.
        let next_send;
        loop {
            if now < demand_next {
                next_send = demand_next;
                break;
            }
            match pacer.check(at(now)) {
                Decision::Wait(d) => {
                    waited = true;
                    next_send = now + ns(d).max(1);
                    break;
                }
                Decision::Allow => {}
            }
            let limited = std::mem::take(&mut waited);
            sent += 1;
            if let Some(d) = cfg.demand_rps {
                demand_next = now + (1.0e9 / d) as u64;
            }
            let noise = 1.0 + cfg.rtt_noise * rng.next_signed();
            let rtt = (ns(cfg.rtt) as f64 * noise) as u64;
            let arrive = now + rtt / 2;
            let (answer_at, is_throttled) = match site {
                SiteLimit::TokenBucket { capacity, burst } => {
                    let t = arrive.max(site_clock);
                    tokens = (tokens + (t - site_clock) as f64 * capacity / 1.0e9).min(burst);
                    site_clock = t;
                    if tokens >= 1.0 {
                        tokens -= 1.0;
                        (now + rtt, false)
                    } else {
                        (now + rtt, true)
                    }
                }
                SiteLimit::Queue { capacity, max_wait } => {
                    let start = arrive.max(site_clock);
                    if start - arrive > ns(max_wait) {
                        (now + rtt, true)
                    } else {
                        site_clock = start + (1.0e9 / capacity) as u64;
                        (site_clock + rtt / 2, false)
                    }
                }
            };
            answers.push(Reverse(Answer {
                at_ns: answer_at,
                sent_ns: now,
                throttled: is_throttled,
                limited,
            }));
        }
        // Advance to whichever comes first: the next send or the next answer.
        let next_answer = answers.peek().map_or(u64::MAX, |Reverse(a)| a.at_ns);
        if next_answer <= next_send {
            let Some(Reverse(a)) = answers.pop() else {
                break;
            };
            now = a.at_ns;
            let signal = if a.throttled {
                if a.sent_ns >= warmup {
                    throttled += 1;
                } else {
                    warm_thr += 1;
                }
                Signal::Throttle {
                    retry_after: cfg.retry_after,
                }
            } else {
                if a.sent_ns >= warmup {
                    ok += 1;
                    latency_sum += u128::from(a.at_ns - a.sent_ns);
                }
                Signal::Success
            };
            let response = Response {
                sent_at: at(a.sent_ns),
                latency: Duration::from_nanos(a.at_ns - a.sent_ns),
                signal,
                limited: a.limited,
            };
            if let Some(adj) = ctl.on_response(&response, at(now)) {
                pacer.set_interval(adj.interval, at(now));
                if let Some(p) = adj.pause_until {
                    pacer.pause(p, at(now));
                }
            }
        } else {
            now = next_send;
        }
    }

    // Requests sent before the end whose answers are still on their way count too.
    for Reverse(a) in answers.into_iter() {
        if a.sent_ns >= warmup {
            if a.throttled {
                throttled += 1;
            } else {
                ok += 1;
                latency_sum += u128::from(a.at_ns - a.sent_ns);
            }
        }
    }
    let window = (end - warmup) as f64 / 1.0e9;
    let capacity_integral = match cfg.capacity_change {
        Some((when, c)) if ns(when) > warmup => {
            let before = (ns(when) - warmup) as f64 / 1.0e9;
            cfg.site.capacity() * before + c * (window - before)
        }
        Some((_, c)) => c * window,
        None => cfg.site.capacity() * window,
    };
    SimReport {
        sent,
        ok,
        throttled,
        goodput: ok as f64 / capacity_integral,
        throttled_fraction: throttled as f64 / (ok + throttled).max(1) as f64,
        warmup_throttled: warm_thr,
        mean_latency: Duration::from_nanos((latency_sum / u128::from(ok.max(1))) as u64),
        final_rps: ctl.rate(),
        decreases: ctl.decreases(),
    }
}

/// A scenario file (`tests/scenarios/*.toml`): a modelled site, a run, and the ranges the
/// controller's figures must fall in. The scenario tests assert them; the `aimd_sim`
/// example prints them.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario models.
    pub name: String,
    /// The site.
    pub site: ScenarioSite,
    /// The run.
    #[serde(default)]
    pub run: ScenarioRun,
    /// Expected ranges.
    pub expect: ScenarioExpect,
}

/// The modelled site of a [`Scenario`].
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSite {
    /// `token_bucket` (429 above the limit) or `queue` (no 429: slower answers, 503 when
    /// the queue wait passes `max_wait_ms`).
    pub kind: String,
    /// Capacity, requests/s.
    pub capacity: f64,
    /// token_bucket: bucket size (default capacity / 10).
    pub burst: Option<f64>,
    /// queue: longest wait before 503 (default 5000).
    pub max_wait_ms: Option<u64>,
    /// Round trip without queueing (default 50).
    pub rtt_ms: Option<u64>,
    /// Round-trip variation, ± fraction (default 0.2).
    pub rtt_noise: Option<f64>,
    /// Retry-After sent with 429s, in ms (default none).
    pub retry_after_ms: Option<u64>,
    /// The capacity changes to `change_to` at `change_at_s`.
    pub change_at_s: Option<u64>,
    /// See `change_at_s`.
    pub change_to: Option<f64>,
}

/// The run of a [`Scenario`].
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScenarioRun {
    /// Simulated seconds (default 120).
    pub duration_s: u64,
    /// Seconds not counted (default 20).
    pub warmup_s: u64,
    /// Pacer jitter (default 0.1).
    pub jitter: f64,
    /// Each seed is one run; every run must meet the expectations (default [1, 2, 3]).
    pub seeds: Vec<u64>,
    /// The controller's ceiling (default 1000).
    pub max_rps: f64,
    /// The controller's starting rate (default 5).
    pub initial_rps: f64,
    /// URLs available per second (default: unlimited).
    pub demand_rps: Option<f64>,
}

impl Default for ScenarioRun {
    fn default() -> Self {
        Self {
            duration_s: 120,
            warmup_s: 20,
            jitter: 0.1,
            seeds: vec![1, 2, 3],
            max_rps: 1000.0,
            initial_rps: 5.0,
            demand_rps: None,
        }
    }
}

/// Expected ranges `[low, high]` of a [`Scenario`].
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioExpect {
    /// `SimReport::goodput`.
    pub goodput: [f64; 2],
    /// `SimReport::throttled_fraction`.
    pub throttled: [f64; 2],
    /// Upper bound of the mean latency of successes, ms.
    pub max_mean_latency_ms: Option<f64>,
    /// `SimReport::final_rps`.
    pub final_rps: Option<[f64; 2]>,
}

impl Scenario {
    /// Parse a scenario from TOML text.
    pub fn parse(text: &str) -> Result<Self, String> {
        config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Toml))
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| e.to_string())
    }

    /// The simulation for one seed.
    pub fn sim_config(&self, seed: u64) -> Result<SimConfig, String> {
        let s = &self.site;
        let site = match s.kind.as_str() {
            "token_bucket" => SiteLimit::TokenBucket {
                capacity: s.capacity,
                burst: s.burst.unwrap_or(s.capacity / 10.0).max(1.0),
            },
            "queue" => SiteLimit::Queue {
                capacity: s.capacity,
                max_wait: Duration::from_millis(s.max_wait_ms.unwrap_or(5000)),
            },
            other => {
                return Err(format!(
                "site.kind: {other:?} is not a site model (expected \"token_bucket\" or \"queue\")"
            ))
            }
        };
        let ms = Duration::from_millis;
        Ok(SimConfig {
            site,
            capacity_change: s
                .change_at_s
                .zip(s.change_to)
                .map(|(at, c)| (Duration::from_secs(at), c)),
            rtt: ms(s.rtt_ms.unwrap_or(50)),
            rtt_noise: s.rtt_noise.unwrap_or(0.2),
            retry_after: s.retry_after_ms.map(ms),
            controller: AimdConfig {
                max_rps: self.run.max_rps,
                initial_rps: self.run.initial_rps,
                ..AimdConfig::default()
            },
            jitter: self.run.jitter,
            duration: Duration::from_secs(self.run.duration_s),
            warmup: Duration::from_secs(self.run.warmup_s),
            demand_rps: self.run.demand_rps,
            seed,
        })
    }
}
