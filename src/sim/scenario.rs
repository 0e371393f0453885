//! Scenario files (`tests/scenarios/*.toml`): a modelled site, a run, and the ranges the
//! controller's figures must fall in. The scenario tests assert them; the `aimd_sim`
//! example prints them.

use std::time::Duration;

use super::site::{Refusal, Shape, SiteModel};
use super::{SimConfig, SimReport};
use crate::aimd::coupling::Coupling;
use crate::aimd::AimdConfig;

/// A scenario: what it models, the site, the run, the expected ranges.
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
    /// `token_bucket`, `nginx_delay`, `window`, `ban`, `queue` or `none` (see [`Shape`]).
    pub kind: String,
    /// token_bucket, nginx_delay: requests/s.
    pub capacity: Option<f64>,
    /// token_bucket: bucket size (default capacity / 10, at least 1); nginx_delay: the
    /// requests that may wait (nginx's `burst=`, required).
    pub burst: Option<f64>,
    /// window: requests per window; ban: requests allowed per period.
    pub limit: Option<u32>,
    /// window: the window; ban: the period counted (ms).
    pub window_ms: Option<u64>,
    /// ban: how long a ban lasts (ms).
    pub ban_ms: Option<u64>,
    /// queue: requests served at once (default 8).
    pub workers: Option<u32>,
    /// queue: longest wait before 503 (default 5000).
    pub max_wait_ms: Option<u64>,
    /// One budget per exit (client address) instead of one for the host (default false).
    pub per_ip: Option<bool>,
    /// per_ip: each exit's budget as a multiple of the shape's (default 1 each).
    pub budgets: Option<Vec<f64>>,
    /// `throttle` (429/503, the default) or `forbidden` (403, the default for bans).
    pub refusal: Option<String>,
    /// token_bucket, nginx_delay: Retry-After with each refusal, in ms (default none).
    pub retry_after_ms: Option<u64>,
    /// window: refusals say when the window resets (default true).
    pub window_retry_after: Option<bool>,
    /// Network round trip (default 50).
    pub rtt_ms: Option<u64>,
    /// Round-trip variation, ± fraction (default 0.2).
    pub rtt_noise: Option<f64>,
    /// Mean page time after the limit, ms (default 0; queue sites: required).
    pub service_ms: Option<u64>,
    /// Page time variation, ± fraction (default 0).
    pub service_noise: Option<f64>,
    /// Fraction of pages `tail_factor` times slower (default 0).
    pub tail_fraction: Option<f64>,
    /// See `tail_fraction` (default 5).
    pub tail_factor: Option<f64>,
    /// Fractions of accepted requests answered 500, reset, left hanging (default 0).
    pub error_rate: Option<f64>,
    /// See `error_rate`.
    pub reset_rate: Option<f64>,
    /// See `error_rate`.
    pub hang_rate: Option<f64>,
    /// The capacity is multiplied by `change_by` at `change_at_s`.
    pub change_at_s: Option<u64>,
    /// See `change_at_s`.
    pub change_by: Option<f64>,
    /// Capacity steps, `[[seconds, factor], …]` in time order: from each time on the
    /// capacity is the base times the factor (`[[15, 0.333], [35, 1.0]]`: a drop to a
    /// third and the return). Taken after `change_at_s`'s step, if both are given.
    pub steps: Option<Vec<(f64, f64)>>,
    /// The page time is multiplied by `slower_by` at `slower_at_s`.
    pub slower_at_s: Option<u64>,
    /// See `slower_at_s`.
    pub slower_by: Option<f64>,
}

/// The run of a [`Scenario`].
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScenarioRun {
    /// Simulated seconds (default 120).
    pub duration_s: u64,
    /// Seconds not counted (default 20).
    pub warmup_s: u64,
    /// Pacer jitter (default 0, as `limiter.jitter`).
    pub jitter: f64,
    /// Each seed is one run; every run must meet the expectations (default [1, 2, 3]).
    pub seeds: Vec<u64>,
    /// The controller's ceiling (default 1000).
    pub max_rps: f64,
    /// The controller's starting rate (default 5).
    pub initial_rps: f64,
    /// Where the host starts, as a broad crawl's host prior would start it after hosts of
    /// that rate (`aimd::prior`); default: `initial_rps`, as with no prior.
    pub prior_rps: Option<f64>,
    /// URLs available per second (default: unlimited).
    pub demand_rps: Option<f64>,
    /// Exits (default 1).
    pub exits: usize,
    /// Most requests in flight (default 64).
    pub concurrency: usize,
    /// Request timeout, ms (default 10000).
    pub timeout_ms: u64,
    /// `auto` (default), `exit_host` or `host`: as `limiter.scope`.
    pub scope: String,
}

impl Default for ScenarioRun {
    fn default() -> Self {
        Self {
            duration_s: 120,
            warmup_s: 20,
            jitter: 0.0,
            seeds: vec![1, 2, 3],
            max_rps: 1000.0,
            initial_rps: 5.0,
            prior_rps: None,
            demand_rps: None,
            exits: 1,
            concurrency: 64,
            timeout_ms: 10_000,
            scope: "auto".into(),
        }
    }
}

impl ScenarioSite {
    /// The site's limit: `kind` and the fields that kind requires.
    fn shape(&self) -> Result<Shape, String> {
        let s = self;
        let ms = Duration::from_millis;
        let need = |v: Option<u64>, field: &str| {
            v.ok_or_else(|| format!("site.{field}: required for kind = {:?}", s.kind))
        };
        Ok(match s.kind.as_str() {
            "none" => Shape::None,
            "token_bucket" => {
                let capacity = s
                    .capacity
                    .ok_or("site.capacity: required for kind = \"token_bucket\"")?;
                Shape::TokenBucket {
                    capacity,
                    burst: s.burst.unwrap_or(capacity / 10.0).max(1.0),
                }
            }
            "nginx_delay" => Shape::Delayed {
                rate: s
                    .capacity
                    .ok_or("site.capacity: required for kind = \"nginx_delay\"")?,
                burst: s
                    .burst
                    .ok_or("site.burst: required for kind = \"nginx_delay\"")?,
            },
            "window" => Shape::Window {
                limit: need(s.limit.map(u64::from), "limit")? as u32,
                window: ms(need(s.window_ms, "window_ms")?),
            },
            "ban" => Shape::Ban {
                max: need(s.limit.map(u64::from), "limit")? as u32,
                period: ms(need(s.window_ms, "window_ms")?),
                ban: ms(need(s.ban_ms, "ban_ms")?),
            },
            "queue" => {
                need(s.service_ms, "service_ms")?;
                Shape::Queue {
                    workers: s.workers.unwrap_or(8),
                    max_wait: ms(s.max_wait_ms.unwrap_or(5000)),
                }
            }
            other => {
                return Err(format!(
                    "site.kind: {other:?} is not a site model (expected \"token_bucket\", \
                     \"nginx_delay\", \"window\", \"ban\", \"queue\" or \"none\")"
                ))
            }
        })
    }

    /// How the site refuses: `refusal`, or the default for its kind.
    fn refusal(&self) -> Result<Refusal, String> {
        match self.refusal.as_deref() {
            None if self.kind == "ban" => Ok(Refusal::Forbidden),
            None | Some("throttle") => Ok(Refusal::Throttle),
            Some("forbidden") => Ok(Refusal::Forbidden),
            Some(other) => Err(format!(
                "site.refusal: {other:?} is not a refusal (expected \"throttle\" or \"forbidden\")"
            )),
        }
    }

    /// `change_at_s`/`change_by`, then `steps`, checked to be in time order with
    /// positive factors.
    fn capacity_steps(&self) -> Result<Vec<(Duration, f64)>, String> {
        let first = self
            .change_at_s
            .zip(self.change_by)
            .map(|(at, f)| (at as f64, f));
        let steps: Vec<(f64, f64)> = first
            .into_iter()
            .chain(self.steps.iter().flatten().copied())
            .collect();
        let mut last = 0.0;
        for &(at, f) in &steps {
            if !(at.is_finite() && at >= last && f.is_finite() && f > 0.0) {
                return Err(format!(
                    "site.steps: [{at}, {f}] must come after the step before it (seconds ≥ {last}) with a factor > 0"
                ));
            }
            last = at;
        }
        Ok(steps
            .into_iter()
            .map(|(at, f)| (Duration::from_secs_f64(at), f))
            .collect())
    }

    /// Every fraction field is within 0.0..=1.0.
    fn check_fractions(&self) -> Result<(), String> {
        for (field, v) in [
            ("rtt_noise", self.rtt_noise),
            ("service_noise", self.service_noise),
            ("tail_fraction", self.tail_fraction),
            ("error_rate", self.error_rate),
            ("reset_rate", self.reset_rate),
            ("hang_rate", self.hang_rate),
        ] {
            if let Some(x) = v.filter(|x| !(0.0..=1.0).contains(x)) {
                return Err(format!("site.{field}: {x} is outside 0.0..=1.0"));
            }
        }
        Ok(())
    }

    /// The site model, with the defaults of the fields left out.
    fn model(&self, shape: Shape, refusal: Refusal) -> SiteModel {
        let s = self;
        let ms = Duration::from_millis;
        SiteModel {
            shape,
            per_ip: s.per_ip.unwrap_or(false),
            budgets: s.budgets.clone().unwrap_or_default(),
            retry_after: s.retry_after_ms.map(ms),
            window_retry_after: s.window_retry_after.unwrap_or(true),
            refusal,
            service: ms(s.service_ms.unwrap_or(0)),
            service_noise: s.service_noise.unwrap_or(0.0),
            tail_fraction: s.tail_fraction.unwrap_or(0.0),
            tail_factor: s.tail_factor.unwrap_or(5.0),
            error_rate: s.error_rate.unwrap_or(0.0),
            reset_rate: s.reset_rate.unwrap_or(0.0),
            hang_rate: s.hang_rate.unwrap_or(0.0),
        }
    }
}

impl ScenarioRun {
    /// How exits share the host's budget: `scope`, as `limiter.scope`.
    fn coupling(&self) -> Result<Coupling, String> {
        match self.scope.as_str() {
            "auto" => Ok(Coupling::Auto),
            "exit_host" => Ok(Coupling::PerExit),
            "host" => Ok(Coupling::Shared),
            other => Err(format!(
                "run.scope: {other:?} is not a scope (expected \"auto\", \"exit_host\" or \"host\")"
            )),
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
    /// Most bans the site may begin after the warm-up (ban sites: 0).
    pub max_bans_after_warmup: Option<usize>,
    /// Upper bound of the site's in-flight p99 over its workers (queue sites).
    pub max_in_flight_over_knee: Option<f64>,
    /// Lower bound of requests sent over the demand (unlimited sites).
    pub min_sent_fraction: Option<f64>,
    /// What the host policy must have concluded: `unknown`, `host` or `per_ip`.
    pub detected: Option<String>,
    /// With `detected`: the share of the seeds whose runs must conclude it, judged over
    /// all seeds ([`Scenario::misses_over_seeds`]) rather than per run. For a conclusion
    /// that chance can flip in a few runs in a hundred (a host-wide budget whose
    /// refusals happen to land on one exit in a row).
    pub detected_share: Option<f64>,
}

impl ScenarioExpect {
    /// `detected_share` is a share, and says of what.
    fn check(&self) -> Result<(), String> {
        match (self.detected_share, &self.detected) {
            (Some(x), _) if !(x > 0.0 && x <= 1.0) => Err(format!(
                "expect.detected_share: {x} (a share of the seeds, in (0, 1])"
            )),
            (Some(_), None) => {
                Err("expect.detected_share: given without expect.detected".to_string())
            }
            _ => Ok(()),
        }
    }
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
        let ms = Duration::from_millis;
        let shape = s.shape()?;
        let refusal = s.refusal()?;
        let coupling = self.run.coupling()?;
        s.check_fractions()?;
        self.expect.check()?;
        Ok(SimConfig {
            site: s.model(shape, refusal),
            capacity_steps: s.capacity_steps()?,
            service_change: s
                .slower_at_s
                .zip(s.slower_by)
                .map(|(at, f)| (Duration::from_secs(at), f)),
            rtt: ms(s.rtt_ms.unwrap_or(50)),
            rtt_noise: s.rtt_noise.unwrap_or(0.2),
            controller: AimdConfig {
                max_rps: self.run.max_rps,
                initial_rps: self.run.initial_rps,
                ..AimdConfig::default()
            },
            start_rps: self.run.prior_rps,
            coupling,
            exits: self.run.exits.max(1),
            concurrency: self.run.concurrency.max(1),
            timeout: ms(self.run.timeout_ms.max(1)),
            jitter: self.run.jitter,
            duration: Duration::from_secs(self.run.duration_s),
            warmup: Duration::from_secs(self.run.warmup_s),
            demand_rps: self.run.demand_rps,
            seed,
            trace: false,
        })
    }

    /// Every expectation `r` misses, in words (empty: all met).
    pub fn misses(&self, r: &SimReport) -> Vec<String> {
        let e = &self.expect;
        let mut out = vec![];
        let mut range = |what: &str, v: f64, [lo, hi]: [f64; 2]| {
            if !(lo..=hi).contains(&v) {
                out.push(format!("{what} {v:.4} not in [{lo}, {hi}]"));
            }
        };
        range("goodput", r.goodput, e.goodput);
        range("throttled", r.throttled_fraction, e.throttled);
        if let Some(fr) = e.final_rps {
            range("final_rps", r.final_rps, fr);
        }
        if let Some(m) = e.max_mean_latency_ms {
            let l = r.mean_latency.as_secs_f64() * 1e3;
            if l > m {
                out.push(format!("mean latency {l:.1} ms > {m}"));
            }
        }
        if let Some(m) = e.max_bans_after_warmup {
            if r.bans_after_warmup > m {
                out.push(format!(
                    "{} bans after the warm-up > {m}",
                    r.bans_after_warmup
                ));
            }
        }
        if let Some(m) = e.max_in_flight_over_knee {
            match r.in_flight_p99_over_knee {
                Some(x) if x <= m => {}
                other => out.push(format!("in-flight p99 / knee {other:?} > {m}")),
            }
        }
        if let Some(m) = e.min_sent_fraction {
            match r.sent_fraction {
                Some(x) if x >= m => {}
                other => out.push(format!("sent fraction {other:?} < {m}")),
            }
        }
        if let (Some(d), None) = (&e.detected, e.detected_share) {
            if r.detected.as_str() != d {
                out.push(format!(
                    "detected {:?}, expected {d:?}",
                    r.detected.as_str()
                ));
            }
        }
        out
    }

    /// The expectations judged over all of a scenario's seeds, given each seed's report:
    /// `detected_share`.
    pub fn misses_over_seeds<'a>(
        &self,
        reports: impl IntoIterator<Item = &'a SimReport>,
    ) -> Vec<String> {
        let e = &self.expect;
        let (Some(d), Some(share)) = (&e.detected, e.detected_share) else {
            return vec![];
        };
        let (mut hits, mut runs) = (0usize, 0usize);
        for r in reports {
            runs += 1;
            hits += usize::from(r.detected.as_str() == d);
        }
        if (hits as f64) < share * runs as f64 || runs == 0 {
            vec![format!(
                "detected {d:?} in {hits} of {runs} seeds, expected a share of at least {share}"
            )]
        } else {
            vec![]
        }
    }
}

/// A broad-crawl scenario (`tests/scenarios/broad/*.toml`): host classes, the crawl, and
/// the ranges the crawl's figures must fall in.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BroadScenario {
    /// What the scenario models.
    pub name: String,
    /// The crawl.
    pub run: BroadRunSpec,
    /// The host classes (`[[class]]`), each with its own `[class.site]`.
    pub class: Vec<BroadClassSpec>,
    /// Expected ranges for the whole crawl and, where given, for a class.
    pub expect: BroadExpect,
}

/// The crawl of a [`BroadScenario`].
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BroadRunSpec {
    /// Pages per host (default 40).
    pub pages: usize,
    /// Exits (default 4).
    pub exits: usize,
    /// Most requests in flight over all hosts (default 256).
    pub concurrency: usize,
    /// Each seed is one crawl; every crawl must meet the expectations (default [1, 2, 3]).
    pub seeds: Vec<u64>,
    /// New hosts met per second (default: all at the start).
    pub hosts_per_s: Option<f64>,
    /// The crawl stops after this many seconds whatever is left (default 600).
    pub limit_s: u64,
    /// The controller's ceiling (default 1000).
    pub max_rps: f64,
    /// The controller's starting rate (default 5).
    pub initial_rps: f64,
    /// Request timeout, ms (default 10000).
    pub timeout_ms: u64,
    /// Pacer jitter (default 0).
    pub jitter: f64,
}

impl Default for BroadRunSpec {
    fn default() -> Self {
        Self {
            pages: 40,
            exits: 4,
            concurrency: 256,
            seeds: vec![1, 2, 3],
            hosts_per_s: None,
            limit_s: 600,
            max_rps: 1000.0,
            initial_rps: 5.0,
            timeout_ms: 10_000,
            jitter: 0.0,
        }
    }
}

/// A class of hosts of a [`BroadScenario`].
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BroadClassSpec {
    /// The class's name in reports.
    pub name: String,
    /// How many hosts.
    pub hosts: usize,
    /// Each host's site, as a single-host scenario's `[site]` (no capacity steps).
    pub site: ScenarioSite,
}

/// Expected ranges `[low, high]` of a [`BroadScenario`], for the whole crawl, and for
/// some classes (`[[expect.class]]`). Every page must be in before `run.limit_s`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BroadExpect {
    /// [`ClassReport::ideal_share`](super::ClassReport::ideal_share).
    pub ideal_share: [f64; 2],
    /// Refusals over requests.
    pub throttled: [f64; 2],
    /// Upper bound of the refusals per host at the 90th percentile.
    pub max_p90_per_host: Option<u64>,
    /// Ranges for one class each, named as in `[[class]]`: what the whole crawl's
    /// figures hide (a class done early can be slow without slowing the crawl).
    #[serde(default)]
    pub class: Vec<BroadClassExpect>,
}

/// Expected ranges of one class of a [`BroadScenario`]; each is optional.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BroadClassExpect {
    /// The class, as named in `[[class]]`.
    pub name: String,
    /// [`ClassReport::ideal_share`](super::ClassReport::ideal_share).
    pub ideal_share: Option<[f64; 2]>,
    /// Refusals over requests.
    pub throttled: Option<[f64; 2]>,
    /// Upper bound of the refusals per host at the 90th percentile.
    pub max_p90_per_host: Option<u64>,
}

impl BroadScenario {
    /// Parse a broad scenario from TOML text.
    pub fn parse(text: &str) -> Result<Self, String> {
        config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Toml))
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| e.to_string())
    }

    /// The simulation for one seed.
    pub fn sim_config(&self, seed: u64) -> Result<super::BroadConfig, String> {
        let ms = Duration::from_millis;
        let r = &self.run;
        if r.pages == 0 || self.class.iter().all(|c| c.hosts == 0) {
            return Err("run.pages and class.hosts: a broad crawl needs pages and hosts".into());
        }
        let names: Vec<&str> = self.class.iter().map(|c| c.name.as_str()).collect();
        if let Some(e) = self
            .expect
            .class
            .iter()
            .find(|e| !names.contains(&e.name.as_str()))
        {
            return Err(format!(
                "expect.class.name: {:?} is not a class of this scenario (one of {names:?})",
                e.name
            ));
        }
        let mut classes = vec![];
        for c in &self.class {
            let s = &c.site;
            let shape = s.shape().map_err(|e| format!("class {:?}: {e}", c.name))?;
            let refusal = s
                .refusal()
                .map_err(|e| format!("class {:?}: {e}", c.name))?;
            s.check_fractions()
                .map_err(|e| format!("class {:?}: {e}", c.name))?;
            let steps = s.capacity_steps()?;
            if !steps.is_empty() || s.slower_at_s.is_some() {
                return Err(format!(
                    "class {:?}: site.steps, change_at_s and slower_at_s are not modelled in a broad scenario",
                    c.name
                ));
            }
            classes.push(super::BroadClass {
                name: c.name.clone(),
                hosts: c.hosts,
                site: s.model(shape, refusal),
                rtt: ms(s.rtt_ms.unwrap_or(50)),
                rtt_noise: s.rtt_noise.unwrap_or(0.2),
            });
        }
        Ok(super::BroadConfig {
            classes,
            pages: r.pages,
            controller: AimdConfig {
                max_rps: r.max_rps,
                initial_rps: r.initial_rps,
                ..AimdConfig::default()
            },
            exits: r.exits.max(1),
            concurrency: r.concurrency.max(1),
            timeout: ms(r.timeout_ms.max(1)),
            jitter: r.jitter,
            hosts_per_s: r.hosts_per_s,
            limit: Duration::from_secs(r.limit_s),
            seed,
            trace_host: None,
        })
    }

    /// Every expectation `r` misses, in words (empty: all met).
    pub fn misses(&self, r: &super::BroadReport) -> Vec<String> {
        let e = &self.expect;
        let a = &r.all;
        let mut out = vec![];
        let whole = BroadClassExpect {
            name: String::new(),
            ideal_share: Some(e.ideal_share),
            throttled: Some(e.throttled),
            max_p90_per_host: e.max_p90_per_host,
        };
        class_misses(&whole, a, "", &mut out);
        for ce in &e.class {
            if let Some(c) = r.classes.iter().find(|c| c.name == ce.name) {
                class_misses(ce, c, &format!("class {:?}: ", ce.name), &mut out);
            }
        }
        if a.unfinished > 0 {
            out.push(format!(
                "{} pages not fetched within {} s",
                a.unfinished, self.run.limit_s
            ));
        }
        out
    }
}

/// The ranges of `e` that `c` misses, each in words after `prefix`.
fn class_misses(e: &BroadClassExpect, c: &super::ClassReport, prefix: &str, out: &mut Vec<String>) {
    let mut range = |what: &str, v: f64, range: Option<[f64; 2]>| {
        if let Some([lo, hi]) = range.filter(|[lo, hi]| !(*lo..=*hi).contains(&v)) {
            out.push(format!("{prefix}{what} {v:.4} not in [{lo}, {hi}]"));
        }
    };
    range("ideal share", c.ideal_share(), e.ideal_share);
    range("throttled", c.throttled_fraction(), e.throttled);
    if let Some(m) = e.max_p90_per_host.filter(|m| c.throttled_p90 > *m) {
        out.push(format!(
            "{prefix}{} refusals per host at p90 > {m}",
            c.throttled_p90
        ));
    }
}
