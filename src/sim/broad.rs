//! A broad crawl on fake time: many hosts at once, each its own site and host policy,
//! a few dozen pages each, through one concurrency limit and one host prior.
//!
//! Why it is not a loop over single-host runs: on a broad crawl the hosts share what a
//! single-host run leaves out — the crawler's concurrency, the exits' turns, and the
//! [`HostPrior`] a new host starts from — and the figure a user sees is the crawl's, not a
//! host's: how long until the last page is in, against the time the slowest host's limit
//! allows, and how many 429s each host had to send. A page that is refused or fails goes
//! back to its host's queue (no page is lost here; the real crawler's bounds are tested
//! on real sockets), so the time and the throttles are all a run reports.
//!
//! The crawler's part as in the scheduler: hosts are met in a shuffled order (all at once,
//! or `hosts_per_s` a second, as a crawl that discovers them), a met host starts where
//! the prior says, and the hosts that have a page waiting and may be sent to are served
//! round-robin, each through the exit that sent to it longest ago.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::host::{drive, ns, Answer, Events, HostSetup, HostSim, Kind, Reach};
use super::site::{Site, SiteModel};
use crate::aimd::coupling::{Coupling, HostPolicy};
use crate::aimd::prior::HostPrior;
use crate::aimd::AimdConfig;
use crate::rng::{RandomSource, SplitMix64};

/// Hosts that share a site model.
#[derive(Debug, Clone)]
pub struct BroadClass {
    /// The class's name in reports.
    pub name: String,
    /// How many hosts.
    pub hosts: usize,
    /// Each host's site (each host its own instance).
    pub site: SiteModel,
    /// Network round trip, without page time.
    pub rtt: Duration,
    /// Each round trip varies uniformly by ± this fraction.
    pub rtt_noise: f64,
}

/// One simulated broad crawl.
#[derive(Debug, Clone)]
pub struct BroadConfig {
    /// The host classes.
    pub classes: Vec<BroadClass>,
    /// Pages per host.
    pub pages: usize,
    /// The controllers under test (each host its own policy).
    pub controller: AimdConfig,
    /// Exits (source addresses).
    pub exits: usize,
    /// Most requests in flight at once, over all hosts.
    pub concurrency: usize,
    /// A request without an answer after this long fails as a timeout.
    pub timeout: Duration,
    /// Pacer jitter (fraction of an interval).
    pub jitter: f64,
    /// New hosts are met at this many per second (`None`: all at the start).
    pub hosts_per_s: Option<f64>,
    /// The crawl stops here whatever is left (reported as pages not fetched).
    pub limit: Duration,
    /// Seed for the order hosts are met in, noise and faults.
    pub seed: u64,
    /// Print each answer of this host (named `h0`, `h1`, … in the order of the classes)
    /// on stderr, with every lane of its policy after it: what a host's learning did,
    /// answer by answer.
    pub trace_host: Option<String>,
}

/// What a class of hosts (or the whole crawl) saw.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassReport {
    /// The class's name (`all` for the crawl).
    pub name: String,
    /// Hosts.
    pub hosts: usize,
    /// Pages fetched.
    pub pages: usize,
    /// Pages not fetched when the crawl stopped at its limit.
    pub unfinished: usize,
    /// The slowest constraint: the latest host's meeting time plus its pages over its
    /// capacity, or the class's pages times a round trip over the concurrency.
    pub ideal: Duration,
    /// Until the class's last page was in.
    pub elapsed: Duration,
    /// Requests sent.
    pub requests: u64,
    /// Refusals (429/503/403) the hosts sent.
    pub throttled: u64,
    /// Refusals per host: the 90th percentile and the most.
    pub throttled_p90: u64,
    /// See `throttled_p90`.
    pub throttled_max: u64,
}

impl ClassReport {
    /// The ideal time over the elapsed time (1.0: as fast as the limits allow).
    pub fn ideal_share(&self) -> f64 {
        self.ideal.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Refusals over requests.
    pub fn throttled_fraction(&self) -> f64 {
        self.throttled as f64 / self.requests.max(1) as f64
    }
}

/// The crawl's figures: one row per class, then the whole crawl.
#[derive(Debug, Clone, PartialEq)]
pub struct BroadReport {
    /// Per class, in the configuration's order.
    pub classes: Vec<ClassReport>,
    /// The whole crawl.
    pub all: ClassReport,
}

/// One host's part of the crawl.
struct Host {
    class: usize,
    name: Arc<str>,
    /// When the crawl meets it (ns).
    met_at: u64,
    sim: Option<HostSim>,
    /// Pages waiting to be sent (first tries and pages to ask for again).
    queued: usize,
    done: usize,
    requests: u64,
    throttled: u64,
    /// When its last page was in (ns).
    finished_at: Option<u64>,
    /// Its next send had to wait for a pacer.
    waited: bool,
}

/// Run one broad crawl.
pub fn simulate_broad(cfg: &BroadConfig) -> BroadReport {
    let mut run = BroadRun::new(cfg);
    drive(&mut run);
    run.report()
}

struct BroadRun<'a> {
    cfg: &'a BroadConfig,
    base: Instant,
    hosts: Vec<Host>,
    prior: HostPrior,
    /// Where the round-robin scan starts: the host after the last one served.
    cursor: usize,
    in_flight: usize,
    /// Pages not yet fetched, over all hosts.
    left: usize,
    answers: BinaryHeap<Reverse<Answer>>,
}

impl<'a> BroadRun<'a> {
    fn new(cfg: &'a BroadConfig) -> Self {
        let mut rng = SplitMix64::new(cfg.seed ^ 0xb40ad);
        let mut hosts: Vec<Host> = Vec::new();
        for (c, class) in cfg.classes.iter().enumerate() {
            for _ in 0..class.hosts {
                hosts.push(Host {
                    class: c,
                    name: Arc::from(format!("h{}", hosts.len())),
                    met_at: 0,
                    sim: None,
                    queued: cfg.pages,
                    done: 0,
                    requests: 0,
                    throttled: 0,
                    finished_at: None,
                    waited: false,
                });
            }
        }
        // The order the crawl meets them in: a seeded shuffle (Fisher–Yates).
        for i in (1..hosts.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            hosts.swap(i, j);
        }
        if let Some(r) = cfg.hosts_per_s.filter(|r| *r > 0.0) {
            for (k, h) in hosts.iter_mut().enumerate() {
                h.met_at = (k as f64 / r * 1e9) as u64;
            }
        }
        let left = hosts.len() * cfg.pages;
        Self {
            cfg,
            base: Instant::now(),
            hosts,
            prior: HostPrior::new(),
            cursor: 0,
            in_flight: 0,
            left,
            answers: BinaryHeap::new(),
        }
    }

    /// Meet host `i` at `now`: its policy starts where the prior says.
    fn meet(&mut self, i: usize, now: u64) {
        let cfg = self.cfg;
        let h = &mut self.hosts[i];
        let class = &cfg.classes[h.class];
        let c = &cfg.controller;
        let mut site = Site::new(class.site.clone(), cfg.seed ^ ((i as u64) << 8));
        site.sample_from = u64::MAX;
        let setup = HostSetup {
            site,
            controller: c.clone(),
            start_rps: Some(self.prior.start(c.initial_rps, c.min_rps)),
            expected_pause: self.prior.pause(),
            probe_throttles: self.prior.probe_throttles(),
            coupling: Coupling::Auto,
            exits: cfg.exits,
            jitter: cfg.jitter,
            reach: Reach {
                rtt: class.rtt,
                rtt_noise: class.rtt_noise,
                timeout: cfg.timeout,
            },
            seed: cfg.seed ^ (i as u64).wrapping_mul(0x9E37_79B9),
        };
        h.sim = Some(HostSim::new(
            setup,
            self.base,
            self.base + Duration::from_nanos(now),
        ));
    }

    fn send(&mut self, i: usize, exit: usize, now: u64) {
        let h = &mut self.hosts[i];
        let limited = std::mem::take(&mut h.waited);
        let sim = h.sim.as_mut().expect("met");
        h.queued -= 1;
        let backlog = u32::try_from(h.queued).unwrap_or(u32::MAX);
        let mut a = sim.send(exit, now, limited, Some(backlog));
        a.host = i;
        h.requests += 1;
        self.in_flight += 1;
        self.answers.push(Reverse(a));
    }

    fn report(self) -> BroadReport {
        let cfg = self.cfg;
        let classes: Vec<ClassReport> = cfg
            .classes
            .iter()
            .enumerate()
            .map(|(c, class)| {
                let members: Vec<&Host> = self.hosts.iter().filter(|h| h.class == c).collect();
                let ideal = class_ideal(cfg, class, &members);
                tally(&class.name, &members, cfg.pages, ideal, cfg.limit)
            })
            .collect();
        let all_hosts: Vec<&Host> = self.hosts.iter().collect();
        let ideal = classes.iter().map(|r| r.ideal).max().unwrap_or_default();
        let all = tally("all", &all_hosts, cfg.pages, ideal, cfg.limit);
        BroadReport { classes, all }
    }
}

impl Events for BroadRun<'_> {
    fn reached(&mut self, now: u64) -> bool {
        now < ns(self.cfg.limit) && self.left > 0
    }

    /// Send everything the hosts' pacers and the concurrency limit allow at `now`, the
    /// hosts served round-robin; returns when the next send may be (`u64::MAX`: when an
    /// answer frees a slot or brings a page back).
    fn send_ready(&mut self, now: u64) -> u64 {
        loop {
            if self.in_flight >= self.cfg.concurrency {
                return u64::MAX;
            }
            let mut soonest = u64::MAX;
            let mut pick = None;
            let n = self.hosts.len();
            for k in 0..n {
                let i = (self.cursor + k) % n;
                let h = &self.hosts[i];
                if h.queued == 0 {
                    continue;
                }
                if h.met_at > now {
                    soonest = soonest.min(h.met_at);
                    continue;
                }
                if h.sim.is_none() {
                    self.meet(i, now);
                }
                let h = &mut self.hosts[i];
                let sim = h.sim.as_ref().expect("met");
                match sim.pick_exit(now) {
                    Ok(exit) => {
                        pick = Some((i, exit));
                        break;
                    }
                    Err(wait) => {
                        h.waited = true;
                        soonest = soonest.min(now + ns(wait).max(1));
                    }
                }
            }
            let Some((i, exit)) = pick else {
                return soonest;
            };
            self.send(i, exit, now);
            self.cursor = (i + 1) % n;
        }
    }

    fn answers(&mut self) -> &mut BinaryHeap<Reverse<Answer>> {
        &mut self.answers
    }

    /// An answer comes back at `now`: the page is in, or back in its host's queue; the
    /// host's policy and the prior learn from it.
    fn receive(&mut self, a: &Answer, now: u64) {
        self.in_flight -= 1;
        let h = &mut self.hosts[a.host];
        let sim = h.sim.as_mut().expect("met");
        let before = HostPrior::estimate(&sim.policy);
        sim.feed(a, now);
        self.prior.observe(&h.name, before, &sim.policy);
        if self.cfg.trace_host.as_deref() == Some(&*h.name) {
            trace_answer(&h.name, a, now, &sim.policy);
        }
        match a.kind {
            Kind::Ok => {
                h.done += 1;
                self.left -= 1;
                if h.done == self.cfg.pages {
                    h.finished_at = Some(now);
                }
            }
            k => {
                h.throttled += u64::from(k.refused());
                h.queued += 1;
            }
        }
    }
}

/// One line on stderr for `BroadConfig::trace_host`: when the answer came and its
/// request went (seconds into the crawl), the exit, the answer, and each lane's rate
/// (req/s), phase, cuts so far and capacity estimate after it.
fn trace_answer(host: &str, a: &Answer, now: u64, policy: &HostPolicy) {
    let lanes: Vec<String> = policy
        .lanes()
        .map(|(l, c)| {
            format!(
                "{l:?} rate={:.2} {:?} cuts={} est={:.2}",
                c.rate(),
                c.phase(),
                c.decreases(),
                c.capacity_estimate()
            )
        })
        .collect();
    eprintln!(
        "{host} t={:.3}s sent={:.3}s exit={} {}: {}",
        now as f64 / 1e9,
        a.sent_ns as f64 / 1e9,
        a.exit,
        a.kind.label(),
        lanes.join("; ")
    );
}

/// The slowest constraint of a class: its latest host's meeting time plus its pages over
/// its capacity, or its pages times a round trip over the concurrency.
fn class_ideal(cfg: &BroadConfig, class: &BroadClass, members: &[&Host]) -> Duration {
    let per_host = class
        .site
        .capacity(cfg.exits, 1.0)
        .map_or(0.0, |rps| cfg.pages as f64 / rps);
    let latest = members.iter().map(|h| h.met_at).max().unwrap_or(0) as f64 / 1e9;
    let round_trip = (class.rtt + class.site.service).as_secs_f64();
    let by_latency = (members.len() * cfg.pages) as f64 * round_trip / cfg.concurrency as f64;
    Duration::from_secs_f64((latest + per_host).max(by_latency))
}

fn tally(
    name: &str,
    members: &[&Host],
    pages: usize,
    ideal: Duration,
    limit: Duration,
) -> ClassReport {
    let mut per_host: Vec<u64> = members.iter().map(|h| h.throttled).collect();
    per_host.sort_unstable();
    // The nearest-rank 90th percentile, as bench_broad reports it.
    let rank = ((0.9 * per_host.len() as f64).ceil() as usize).max(1);
    let done: usize = members.iter().map(|h| h.done).sum();
    let elapsed = members
        .iter()
        .map(|h| h.finished_at.map_or(limit, Duration::from_nanos))
        .max()
        .unwrap_or_default();
    ClassReport {
        name: name.to_owned(),
        hosts: members.len(),
        pages: done,
        unfinished: members.len() * pages - done,
        ideal,
        elapsed,
        requests: members.iter().map(|h| h.requests).sum(),
        throttled: per_host.iter().sum(),
        throttled_p90: per_host.get(rank - 1).copied().unwrap_or(0),
        throttled_max: per_host.last().copied().unwrap_or(0),
    }
}
