//! A discrete-event simulation of one host's limiter against a modelled site.
//!
//! Why it is in the core: the controller's promise (≥ 95 % of a site's capacity with ≤ 1 %
//! throttled) is a property of the feedback loop, not of one function, and it can only be
//! checked by closing the loop — on every shape a site may have, not one. The simulation
//! does that on fake time: a [`HostPolicy`] (host lane and exit lanes) drives
//! [`Pacer`](crate::pacer::Pacer)s, each request goes through the exit that sent to the host longest ago among
//! those its pacers allow (as the scheduler does), reaches a modelled [`site`] after half
//! a round trip, and the answers come back as feedback, within a concurrency limit and a
//! timeout. Minutes of crawling run in milliseconds, deterministically from a seed, so the
//! scenario tests in `tests/aimd_scenarios.rs` can assert ranges and the `aimd_sim`
//! example can print them.
//!
//! # Layout
//! - `site`: the modelled site (how it limits, answers and fails).
//! - `host`: one host as the crawler meets it: its site, the host policy under test and
//!   the pacers carrying it out.
//! - this module: a single-host run ([`simulate`]), minutes of one host's crawl.
//! - `broad`: a broad crawl ([`simulate_broad`]), many hosts with a few dozen pages each
//!   through one concurrency limit and one host prior.
//! - `scenario`: the TOML files both are described in, with their expected ranges.

pub mod broad;
mod host;
pub mod scenario;
pub mod site;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::aimd::coupling::{Coupling, Detected, HostPolicy, Lane};
use crate::aimd::AimdConfig;

pub use broad::{simulate_broad, BroadClass, BroadConfig, BroadReport, ClassReport};
use host::{drive, ns, Answer, Events, HostSetup, HostSim, Kind, Reach};
pub use scenario::Scenario;
use site::Site;
pub use site::{Refusal, Shape, SiteModel};

/// One simulated run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The site.
    pub site: SiteModel,
    /// From each of these times on, the site's capacity is its base times the factor (a
    /// site under other load, or freed of it; a drop and a return are two steps). In
    /// time order.
    pub capacity_steps: Vec<(Duration, f64)>,
    /// At this time the site's page time is scaled by the given factor (a site that got
    /// slower, whatever we do).
    pub service_change: Option<(Duration, f64)>,
    /// Network round trip, without page time.
    pub rtt: Duration,
    /// Each round trip varies uniformly by ± this fraction.
    pub rtt_noise: f64,
    /// The controllers under test.
    pub controller: AimdConfig,
    /// Where the host starts, if a host prior says (see [`HostPolicy::starting_at`]).
    pub start_rps: Option<f64>,
    /// How exits share the host's budget.
    pub coupling: Coupling,
    /// Exits (source addresses).
    pub exits: usize,
    /// Most requests in flight at once.
    pub concurrency: usize,
    /// A request without an answer after this long fails as a timeout.
    pub timeout: Duration,
    /// Pacer jitter (fraction of an interval).
    pub jitter: f64,
    /// How long to run.
    pub duration: Duration,
    /// Figures count requests sent after this time.
    pub warmup: Duration,
    /// The crawler has at most this many URLs per second to send (`None`: always more).
    pub demand_rps: Option<f64>,
    /// Seed for noise, faults and jitter.
    pub seed: u64,
    /// Print one line per simulated second to stderr (diagnosis).
    pub trace: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            site: SiteModel::default(),
            capacity_steps: Vec::new(),
            service_change: None,
            rtt: Duration::from_millis(50),
            rtt_noise: 0.2,
            controller: AimdConfig::default(),
            start_rps: None,
            coupling: Coupling::Auto,
            exits: 1,
            concurrency: 64,
            timeout: Duration::from_secs(10),
            jitter: 0.0,
            duration: Duration::from_secs(120),
            warmup: Duration::from_secs(20),
            demand_rps: None,
            seed: 1,
            trace: false,
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
    /// Refusals (429/503/403) after the warm-up.
    pub throttled: u64,
    /// Errors (500, reset, timeout) after the warm-up.
    pub errors: u64,
    /// `ok` per second divided by the site's capacity (averaged over the window); for an
    /// unlimited site, divided by the demand.
    pub goodput: f64,
    /// `throttled / answers` after the warm-up.
    pub throttled_fraction: f64,
    /// Refusals during the warm-up (slow start's overshoot).
    pub warmup_throttled: u64,
    /// Requests sent after the warm-up per second, over the demand (if there is one).
    pub sent_fraction: Option<f64>,
    /// Mean latency of successful answers after the warm-up.
    pub mean_latency: Duration,
    /// The host lane's rate at the end (the sum of the exit lanes without one).
    pub final_rps: f64,
    /// How many times the controllers cut their rates.
    pub decreases: u64,
    /// Bans the site began after the warm-up.
    pub bans_after_warmup: usize,
    /// Bans in all.
    pub bans: usize,
    /// Queue sites: the 99th percentile of the site's in-flight count after the warm-up,
    /// over its workers (its knee).
    pub in_flight_p99_over_knee: Option<f64>,
    /// What the host policy concluded about the limit.
    pub detected: Detected,
}

/// Run one simulation.
pub fn simulate(cfg: &SimConfig) -> SimReport {
    let mut run = Run::new(cfg);
    drive(&mut run);
    run.report()
}

/// What a run counts, over requests sent after the warm-up unless named otherwise.
#[derive(Debug, Default)]
struct Tally {
    /// Requests sent (whole run).
    sent: u64,
    /// Requests sent after the warm-up.
    sent_after: u64,
    ok: u64,
    throttled: u64,
    errors: u64,
    /// Refusals of requests sent during the warm-up.
    warmup_throttled: u64,
    /// Sum of the successful answers' latencies, in nanoseconds.
    latency_sum: u128,
}

impl Tally {
    /// Count the answer to a request sent after the warm-up.
    fn count(&mut self, a: &Answer) {
        match a.kind {
            Kind::Ok => {
                self.ok += 1;
                self.latency_sum += u128::from(a.at_ns - a.sent_ns);
            }
            Kind::Error => self.errors += 1,
            Kind::Throttle(_) | Kind::Forbidden => self.throttled += 1,
        }
    }
}

/// The state of one simulated run: the site, the limiter under test, and the requests on
/// their way.
struct Run<'a> {
    cfg: &'a SimConfig,
    end: u64,
    warmup: u64,
    exits: usize,
    host: HostSim,
    in_flight: usize,
    answers: BinaryHeap<Reverse<Answer>>,
    /// The crawler has no URL to send before this time (`SimConfig::demand_rps`).
    demand_next: u64,
    tally: Tally,
    /// Capacity steps taken so far.
    capacity_steps_taken: usize,
    service_changed: bool,
    /// Whether the next send had to wait for a pacer (the crawler wanted to go faster).
    waited: bool,
    trace: Trace,
}

impl<'a> Run<'a> {
    fn new(cfg: &'a SimConfig) -> Self {
        let base = Instant::now();
        let warmup = ns(cfg.warmup);
        let exits = cfg.exits.max(1);
        let mut site = Site::new(cfg.site.clone(), cfg.seed);
        site.sample_from = warmup;
        let setup = HostSetup {
            site,
            controller: cfg.controller.clone(),
            start_rps: cfg.start_rps,
            expected_pause: Duration::ZERO,
            probe_throttles: 1.0,
            coupling: cfg.coupling,
            exits,
            jitter: cfg.jitter,
            reach: Reach {
                rtt: cfg.rtt,
                rtt_noise: cfg.rtt_noise,
                timeout: cfg.timeout,
            },
            seed: cfg.seed,
        };
        Self {
            cfg,
            end: ns(cfg.duration),
            warmup,
            exits,
            host: HostSim::new(setup, base, base),
            in_flight: 0,
            answers: BinaryHeap::new(),
            demand_next: 0,
            tally: Tally::default(),
            capacity_steps_taken: 0,
            service_changed: false,
            waited: false,
            trace: Trace::default(),
        }
    }

    /// Scale the site's capacity or page time once their change is due.
    fn apply_changes(&mut self, now: u64) {
        while let Some(&(when, f)) = self.cfg.capacity_steps.get(self.capacity_steps_taken) {
            if now < ns(when) {
                break;
            }
            self.host.site.capacity_scale = f;
            self.capacity_steps_taken += 1;
        }
        if let Some((when, f)) = self.cfg.service_change {
            if !self.service_changed && now >= ns(when) {
                self.host.site.service_scale = f;
                self.service_changed = true;
            }
        }
    }

    /// Send one request through `exit`: the site's answer is queued for when it comes back.
    fn send(&mut self, exit: usize, now: u64) {
        let limited = std::mem::take(&mut self.waited);
        self.tally.sent += 1;
        if now >= self.warmup {
            self.tally.sent_after += 1;
        }
        if let Some(d) = self.cfg.demand_rps {
            self.demand_next = now + (1.0e9 / d) as u64;
        }
        self.in_flight += 1;
        let answer = self.host.send(exit, now, limited, None);
        self.answers.push(Reverse(answer));
    }

    /// The figures at the end of the run.
    fn report(mut self) -> SimReport {
        let (cfg, warmup, end) = (self.cfg, self.warmup, self.end);
        // Requests sent before the end whose answers are still on their way count too.
        for Reverse(a) in std::mem::take(&mut self.answers) {
            if a.sent_ns >= warmup {
                self.tally.count(&a);
            }
        }
        let Tally {
            sent,
            sent_after,
            ok,
            throttled,
            errors,
            warmup_throttled,
            latency_sum,
        } = self.tally;
        let policy = &self.host.policy;
        let site = &mut self.host.site;
        let window = end.saturating_sub(warmup) as f64 / 1.0e9;
        let capacity_integral = capacity_integral(cfg, self.exits, warmup, end);
        let answered = ok + throttled + errors;
        let final_rps = policy
            .controller(Lane::Host)
            .map(|c| c.rate())
            .unwrap_or_else(|| policy.lanes().map(|(_, c)| c.rate()).sum());
        let decreases = policy.lanes().map(|(_, c)| c.decreases()).sum();
        let knee = match cfg.site.shape {
            Shape::Queue { workers, .. } => Some(f64::from(workers)),
            _ => None,
        };
        let p99 = {
            let mut v = std::mem::take(&mut site.in_flight);
            v.sort_unstable();
            v.get(v.len().saturating_sub(1) * 99 / 100).copied()
        };
        SimReport {
            sent,
            ok,
            throttled,
            errors,
            goodput: ok as f64 / capacity_integral.max(1e-9),
            throttled_fraction: throttled as f64 / answered.max(1) as f64,
            warmup_throttled,
            sent_fraction: cfg
                .demand_rps
                .map(|d| sent_after as f64 / (d * window).max(1e-9)),
            mean_latency: Duration::from_nanos((latency_sum / u128::from(ok.max(1))) as u64),
            final_rps,
            decreases,
            bans_after_warmup: site.ban_starts.iter().filter(|t| **t >= warmup).count(),
            bans: site.ban_starts.len(),
            in_flight_p99_over_knee: knee.zip(p99).map(|(k, p)| f64::from(p) / k),
            detected: policy.detected(),
        }
    }
}

impl Events for Run<'_> {
    fn reached(&mut self, now: u64) -> bool {
        if now >= self.end {
            return false;
        }
        self.apply_changes(now);
        true
    }

    /// Send everything the pacers, the concurrency limit and the URL supply allow now;
    /// returns when the next send may be (`u64::MAX`: when an answer frees a slot).
    fn send_ready(&mut self, now: u64) -> u64 {
        loop {
            if now < self.demand_next {
                return self.demand_next;
            }
            if self.in_flight >= self.cfg.concurrency {
                return u64::MAX;
            }
            match self.host.pick_exit(now) {
                Ok(exit) => self.send(exit, now),
                Err(soonest) => {
                    self.waited = true;
                    return now + ns(soonest).max(1);
                }
            }
        }
    }

    fn answers(&mut self) -> &mut BinaryHeap<Reverse<Answer>> {
        &mut self.answers
    }

    /// An answer comes back at `now`: count it and feed it to the host policy.
    fn receive(&mut self, a: &Answer, now: u64) {
        self.in_flight -= 1;
        if self.cfg.trace {
            self.trace
                .tick(now, self.in_flight, &self.host.policy, a.kind);
        }
        if a.sent_ns >= self.warmup {
            self.tally.count(a);
        } else if a.kind.refused() {
            self.tally.warmup_throttled += 1;
        }
        self.host.feed(a, now);
    }
}

/// Per-second lines for `SimConfig::trace`.
#[derive(Default)]
struct Trace {
    second: u64,
    ok: u32,
    refused: u32,
    errors: u32,
}

impl Trace {
    fn tick(&mut self, now: u64, in_flight: usize, policy: &HostPolicy, kind: Kind) {
        let s = now / 1_000_000_000;
        if s != self.second {
            let lanes: Vec<String> = policy
                .lanes()
                .map(|(l, c)| {
                    format!(
                        "{l:?}={:.1}{}",
                        c.rate(),
                        if c.locked_out() { "(locked)" } else { "" }
                    )
                })
                .collect();
            eprintln!(
                "t={:>4}s ok={:>5} refused={:>4} errors={:>4} in_flight={:>3} {}",
                self.second,
                self.ok,
                self.refused,
                self.errors,
                in_flight,
                lanes.join(" ")
            );
            *self = Trace {
                second: s,
                ..Trace::default()
            };
        }
        match kind {
            Kind::Ok => self.ok += 1,
            Kind::Error => self.errors += 1,
            _ => self.refused += 1,
        }
    }
}

/// Requests the site could serve over the measured window: its capacity, integrated over
/// its capacity steps; for an unlimited site, the demand (or what was sent).
fn capacity_integral(cfg: &SimConfig, exits: usize, warmup: u64, end: u64) -> f64 {
    let window = end.saturating_sub(warmup) as f64 / 1.0e9;
    let cap = |scale: f64| {
        cfg.site
            .capacity(exits, scale)
            .or(cfg.demand_rps)
            .unwrap_or(f64::INFINITY)
    };
    let _ = window;
    // Piecewise: each stretch of the window at the scale in force there.
    let mut total = 0.0;
    let (mut from, mut scale) = (warmup, 1.0);
    for &(when, f) in &cfg.capacity_steps {
        let at = ns(when).clamp(warmup, end.max(warmup));
        total += cap(scale) * (at - from) as f64 / 1.0e9;
        (from, scale) = (at, f);
    }
    total + cap(scale) * (end.max(warmup) - from) as f64 / 1.0e9
}
