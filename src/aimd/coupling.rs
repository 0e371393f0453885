//! One host, several exits: whose budget did a throttle come from?
//!
//! A site limits either per client address (nginx `limit_req` on `$binary_remote_addr`: each
//! exit has its own budget) or per host, URI or API key (one budget all exits share). A
//! crawler is not told which. Independent controllers per (exit, host) get the host-wide
//! case wrong: each exit takes the others' 429s as its own, every exit probes on its own
//! schedule, and the site sees several probes' worth of throttles. One controller per host
//! gets unequal per-IP budgets wrong: the tightest exit's 429s hold every exit back.
//!
//! [`HostPolicy`] runs both levels. The **host lane** is one controller whose rate is the
//! host's whole budget, spread over the exits (the scheduler sends each request through the
//! exit that sent to this host longest ago, so every exit sees even spacing). **Exit lanes**
//! are learned: a throttle is charged to the host unless throttles *concentrate* on one
//! exit — its share of throttles well above what its share of answers explains — and then
//! that exit gets a controller of its own, a cap under the host's budget.
//!
//! Why this works for both shapes: with one shared budget, a throttle lands on whichever
//! exit's request found the bucket empty, so throttles follow the answers and stay with the
//! host lane. With per-IP budgets used evenly, every exit reaches its wall at the same
//! total rate, which *is* the sum of the budgets: one host lane is right again (and the
//! detected scope says "host": the two cannot be told apart, and need not be). Only
//! unequal per-IP budgets concentrate throttles, and only those exits get lanes.
//!
//! `scope = "exit_host"` or `"host"` in the config skip the detection ([`Coupling`]).

use std::time::{Duration, Instant};

use super::binding::Binding;
use super::{Adjustment, AimdConfig, Controller, Response, Signal};
use crate::headers::Pacing;

/// Which controller a change is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// The host's budget, shared by every exit.
    Host,
    /// One exit's own budget at this host.
    Exit(usize),
}

/// How exits share a host's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coupling {
    /// Learn it: one host budget, exit lanes where throttles concentrate.
    Auto,
    /// Each exit has its own budget (one controller per exit, no host lane).
    PerExit,
    /// One budget for the host, whatever the exit.
    Shared,
}

/// What the answers so far say about the host's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// No throttle yet.
    Unknown,
    /// Throttles follow the answers over every exit: one budget for the host (or equal
    /// per-IP budgets, used evenly, which behave the same).
    Host,
    /// Throttles concentrate on some exits: those have budgets of their own.
    PerIp,
}

impl Detected {
    /// `unknown`, `host` or `per_ip`: for stats and metrics labels.
    pub fn as_str(&self) -> &'static str {
        match self {
            Detected::Unknown => "unknown",
            Detected::Host => "host",
            Detected::PerIp => "per_ip",
        }
    }
}

/// Counts that forget with a half-life, so old evidence fades.
#[derive(Debug, Clone, Copy)]
struct Decayed {
    value: f64,
    at: Instant,
}

impl Decayed {
    const HALF_LIFE: f64 = 30.0;

    fn new(now: Instant) -> Self {
        Self {
            value: 0.0,
            at: now,
        }
    }

    fn get(&self, now: Instant) -> f64 {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.value * (-dt * std::f64::consts::LN_2 / Self::HALF_LIFE).exp2()
    }

    fn add(&mut self, x: f64, now: Instant) {
        self.value = self.get(now) + x;
        self.at = now;
    }
}

#[derive(Debug, Clone)]
struct ExitLane {
    ctl: Option<Controller>,
    answers: Decayed,
    throttles: Decayed,
}

/// Changes to carry out: at most the host lane and one exit lane per response.
pub type Changes = smallvec_lite::Pair<(Lane, Adjustment)>;

/// The controllers of one host: the host lane and the exit lanes (see the module docs).
#[derive(Debug, Clone)]
pub struct HostPolicy {
    cfg: AimdConfig,
    coupling: Coupling,
    host: Option<Controller>,
    exits: Vec<ExitLane>,
    host_throttles: u64,
    /// Where the host lane's Retry-After binds (see `binding.rs`).
    binding: Binding,
}

impl HostPolicy {
    /// Throttles an exit must have before they can count as concentrated. Two, because a
    /// probe cycle spans hundreds of requests: an exit limited harder than the others
    /// earns one throttle a cycle, and on a slow site a cycle lasts a minute. Two in a
    /// row on one exit while the others had none is already unlikely by chance (the
    /// margin below), and a lane opened by mistake costs little: that exit is paced on
    /// its own, the host's budget goes on.
    const MIN_THROTTLES: f64 = 2.0;

    /// How unlikely under a shared budget the throttles on one exit must be before they
    /// count as its own limit.
    const CHANCE: f64 = 0.01;

    /// The controllers of a host reached through `exits` exits.
    pub fn new(cfg: AimdConfig, exits: usize, coupling: Coupling, now: Instant) -> Self {
        let lane = |_| ExitLane {
            ctl: (coupling == Coupling::PerExit).then(|| Controller::new(cfg.clone(), now)),
            answers: Decayed::new(now),
            throttles: Decayed::new(now),
        };
        Self {
            host: (coupling != Coupling::PerExit).then(|| Controller::new(cfg.clone(), now)),
            exits: (0..exits.max(1)).map(lane).collect(),
            coupling,
            host_throttles: 0,
            binding: Binding::default(),
            cfg,
        }
    }

    /// Start the host's budget (or, under [`Coupling::PerExit`], each exit's) at
    /// `start_rps`, where the crawl's host prior says (see [`Controller::from_prior`]).
    pub fn starting_at(mut self, start_rps: f64, now: Instant) -> Self {
        let cfg = self.cfg.clone();
        for ctl in self.controllers_mut() {
            *ctl = Controller::from_prior(cfg.clone(), start_rps, now);
        }
        self
    }

    /// Expect a throttle of this host to bring a pause of `pause` until one does (see
    /// [`Controller::expect_pause`]).
    pub fn expecting_pause(mut self, pause: Duration) -> Self {
        for ctl in self.controllers_mut() {
            ctl.expect_pause(pause);
        }
        self
    }

    /// Expect a probe of this host to bring `throttles` throttles until one did (see
    /// [`Controller::expect_probe_throttles`]).
    pub fn expecting_probe_throttles(mut self, throttles: f64) -> Self {
        for ctl in self.controllers_mut() {
            ctl.expect_probe_throttles(throttles);
        }
        self
    }

    /// Every controller: the host lane's and the exit lanes' that have one.
    fn controllers_mut(&mut self) -> impl Iterator<Item = &mut Controller> {
        self.host
            .iter_mut()
            .chain(self.exits.iter_mut().filter_map(|e| e.ctl.as_mut()))
    }

    /// How exits share this host's budget.
    pub fn coupling(&self) -> Coupling {
        self.coupling
    }

    /// The controller of `lane`, if it has one.
    pub fn controller(&self, lane: Lane) -> Option<&Controller> {
        match lane {
            Lane::Host => self.host.as_ref(),
            Lane::Exit(i) => self.exits.get(i).and_then(|e| e.ctl.as_ref()),
        }
    }

    /// Every lane with a controller.
    pub fn lanes(&self) -> impl Iterator<Item = (Lane, &Controller)> {
        let host = self.host.as_ref().map(|c| (Lane::Host, c));
        let exits = self
            .exits
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.ctl.as_ref().map(|c| (Lane::Exit(i), c)));
        host.into_iter().chain(exits)
    }

    /// What the answers so far say about the host's limit.
    pub fn detected(&self) -> Detected {
        match self.coupling {
            Coupling::PerExit => Detected::PerIp,
            Coupling::Shared => Detected::Host,
            Coupling::Auto if self.exits.iter().any(|e| e.ctl.is_some()) => Detected::PerIp,
            Coupling::Auto if self.host_throttles > 0 => Detected::Host,
            Coupling::Auto => Detected::Unknown,
        }
    }

    /// Feed the answer to a request sent through exit `exit`.
    pub fn on_response(&mut self, exit: usize, r: &Response, now: Instant) -> Changes {
        let mut out = Changes::default();
        if exit >= self.exits.len() {
            self.exits.resize_with(exit + 1, || ExitLane {
                ctl: None,
                answers: Decayed::new(now),
                throttles: Decayed::new(now),
            });
        }
        let refusal = matches!(r.signal, Signal::Throttle { .. } | Signal::Refused);
        if !matches!(r.signal, Signal::Neutral) {
            self.exits[exit].answers.add(1.0, now);
        }
        if refusal {
            self.exits[exit].throttles.add(1.0, now);
        }
        // The old rate's answer while a pause bound to one exit is judged.
        let early =
            !matches!(r.signal, Signal::Neutral) && self.binding.answer(exit, r.sent_at, refusal);
        let to_exit = match self.coupling {
            Coupling::PerExit => true,
            Coupling::Shared => false,
            Coupling::Auto => {
                if refusal && self.exits[exit].ctl.is_none() && self.concentrated(exit, now) {
                    self.open_lane(exit, now);
                }
                self.exits[exit].ctl.is_some()
            }
        };
        // A refusal goes to the lane it is charged to; anything else teaches every lane
        // the request went through.
        let to_host = !(refusal && to_exit);
        if to_host {
            if let (
                Signal::Throttle {
                    retry_after: Some(ra),
                },
                false,
            ) = (r.signal, to_exit)
            {
                self.bind_host_retry_after(exit, ra, now);
            }
            if let Some(h) = self.host.as_mut() {
                if refusal {
                    self.host_throttles += 1;
                    if early {
                        h.continue_run();
                    }
                }
                if let Some(a) = h.on_answer(exit, r, now) {
                    out.push((Lane::Host, a));
                }
            }
        }
        if to_exit {
            if let Some(c) = self.exits[exit].ctl.as_mut() {
                if let Some(a) = c.on_response(r, now) {
                    out.push((Lane::Exit(exit), a));
                }
            }
        }
        out
    }

    /// Whether a Retry-After read now through exit `exit` binds that exit only (the caller
    /// pauses it, the host lane goes on at its cut rate), rather than the lane its
    /// throttles are charged to: see `binding.rs`. An exit with a lane of its own
    /// is paused by that lane's controller either way.
    pub fn retry_after_binds_exit(&self, now: Instant) -> bool {
        match (self.coupling, self.host.as_ref()) {
            // The exits are counted only where the rest allows it: asked on every answer.
            (Coupling::Auto, Some(h)) if self.binding.to_exit(!h.learning(), 2, now) => {
                self.exits_in_use(now) >= 2
            }
            _ => false,
        }
    }

    /// A host-lane throttle with a Retry-After through `exit`: decide where it binds and
    /// tell the host's controller (whether to pause, what the pause costs).
    fn bind_host_retry_after(&mut self, exit: usize, ra: Duration, now: Instant) {
        let in_use = self.exits_in_use(now);
        let (Coupling::Auto, Some(h)) = (self.coupling, self.host.as_mut()) else {
            return;
        };
        let settle = h.srtt().unwrap_or(Duration::ZERO);
        let to_exit = self
            .binding
            .throttled((exit, ra), (!h.learning(), in_use), settle, now);
        let share = if to_exit { 1.0 / in_use as f64 } else { 1.0 };
        h.bind_retry_after(!to_exit, share);
    }

    /// Exits that answered for this host lately.
    fn exits_in_use(&self, now: Instant) -> usize {
        self.exits
            .iter()
            .filter(|e| e.answers.get(now) >= 1.0)
            .count()
    }

    /// Apply the site's pacing headers seen through exit `exit` to the lane that exit's
    /// budget is on.
    pub fn on_hint(&mut self, exit: usize, hint: &Pacing, now: Instant) -> Changes {
        let mut out = Changes::default();
        let lane = match self.exits.get(exit).and_then(|e| e.ctl.as_ref()) {
            Some(_) => Lane::Exit(exit),
            None => Lane::Host,
        };
        let ctl = match lane {
            Lane::Host => self.host.as_mut(),
            Lane::Exit(i) => self.exits[i].ctl.as_mut(),
        };
        if let Some(a) = ctl.and_then(|c| c.on_hint(hint, now)) {
            out.push((lane, a));
        }
        out
    }

    /// Take a rate decided elsewhere (another crawler process, distributed mode) for
    /// `lane`; see [`Controller::adopt`]. Nothing happens for a lane without a controller.
    pub fn adopt(&mut self, lane: Lane, rps: f64, now: Instant) -> Option<Adjustment> {
        let ctl = match lane {
            Lane::Host => self.host.as_mut(),
            Lane::Exit(i) => self.exits.get_mut(i).and_then(|e| e.ctl.as_mut()),
        };
        ctl.and_then(|c| c.adopt(rps, now))
    }

    /// Exit `exit`'s throttles are well above what its share of the answers explains.
    fn concentrated(&self, exit: usize, now: Instant) -> bool {
        let mine = &self.exits[exit];
        let (t_i, a_i) = (mine.throttles.get(now), mine.answers.get(now));
        if t_i < Self::MIN_THROTTLES {
            return false;
        }
        let (mut t_o, mut a_o) = (0.0, 0.0);
        for (j, e) in self.exits.iter().enumerate() {
            if j != exit && e.ctl.is_none() {
                t_o += e.throttles.get(now);
                a_o += e.answers.get(now);
            }
        }
        if a_o < a_i.max(1.0) {
            // Nobody else to compare with (one exit, or the others idle or capped).
            return false;
        }
        // Throttles expected on this exit if they followed the answers, and a margin of
        // three standard deviations (a Poisson count's) plus one.
        let expected = a_i * t_o / a_o;
        // And chance must not explain it: a shared budget's throttles land on each exit
        // in proportion to its answers, so the first few can all land on one exit (two
        // of two on the same one of four exits: one time in four). Only a run that
        // chance gives less than one time in a hundred opens a lane.
        let share = a_i / (a_i + a_o);
        let total = (t_i + t_o).round().min(1000.0) as u32;
        t_i > 4.0 * expected
            && t_i > expected + 3.0 * expected.sqrt() + 1.0
            && binomial_tail(total, t_i.round() as u32, share) < Self::CHANCE
    }

    /// Give exit `exit` a controller of its own, starting at its share of the host's rate.
    fn open_lane(&mut self, exit: usize, now: Instant) {
        let active = self.exits_in_use(now).max(1) as f64;
        let share = self
            .host
            .as_ref()
            .map_or(self.cfg.initial_rps, |h| h.rate() / active);
        let mut ctl = Controller::new(self.cfg.clone(), now);
        ctl.take_share(share, now);
        self.exits[exit].ctl = Some(ctl);
        // The host's estimate was this exit's limit times the exits: find the rest anew.
        if let Some(h) = self.host.as_mut() {
            h.rediscover(now);
        }
    }
}

/// `P(X ≥ k)` for `X ~ Binomial(n, p)`: how often `n` throttles that fall on an exit with
/// probability `p` each put `k` or more on it.
fn binomial_tail(n: u32, k: u32, p: f64) -> f64 {
    if k == 0 || p >= 1.0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    // ln C(n, k), then each next term's coefficient from the last.
    let mut ln_c: f64 = (0..k)
        .map(|i| f64::from(n - i).ln() - f64::from(i + 1).ln())
        .sum();
    let mut tail = 0.0;
    for j in k..=n {
        tail += (ln_c + f64::from(j) * lp + f64::from(n - j) * lq).exp();
        if j < n {
            ln_c += f64::from(n - j).ln() - f64::from(j + 1).ln();
        }
    }
    tail.min(1.0)
}

/// A tiny fixed-capacity list, so a response's changes need no allocation.
pub mod smallvec_lite {
    /// Up to two items.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Pair<T> {
        items: [Option<T>; 2],
    }

    impl<T> Default for Pair<T> {
        fn default() -> Self {
            Self {
                items: [None, None],
            }
        }
    }

    impl<T> Pair<T> {
        /// Add an item (a third one is a bug: at most two lanes change per response).
        pub fn push(&mut self, item: T) {
            let slot = self.items.iter_mut().find(|s| s.is_none());
            debug_assert!(slot.is_some(), "a Pair holds two items");
            if let Some(s) = slot {
                *s = Some(item);
            }
        }

        /// Whether it holds nothing.
        pub fn is_empty(&self) -> bool {
            self.items[0].is_none()
        }
    }

    impl<T> IntoIterator for Pair<T> {
        type Item = T;
        type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<T>, 2>>;

        fn into_iter(self) -> Self::IntoIter {
            self.items.into_iter().flatten()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    fn answer(sent_at: Instant, signal: Signal) -> Response {
        Response {
            sent_at,
            latency: 20 * MS,
            signal,
            limited: true,
            backlog: None,
        }
    }

    const THROTTLE: Signal = Signal::Throttle { retry_after: None };

    #[test]
    fn throttles_that_follow_the_answers_stay_with_the_host() {
        let t0 = Instant::now();
        let mut p = HostPolicy::new(AimdConfig::default(), 4, Coupling::Auto, t0);
        for i in 0..4000u32 {
            let now = t0 + MS * i;
            let sig = if i % 50 == 7 {
                THROTTLE
            } else {
                Signal::Success
            };
            p.on_response((i % 4) as usize, &answer(now, sig), now);
        }
        assert_eq!(p.detected(), Detected::Host);
        assert_eq!(p.lanes().count(), 1);
    }

    #[test]
    fn throttles_on_one_exit_give_it_a_lane_of_its_own() {
        let t0 = Instant::now();
        let mut p = HostPolicy::new(AimdConfig::default(), 4, Coupling::Auto, t0);
        for i in 0..4000u32 {
            let now = t0 + MS * i;
            let exit = (i % 4) as usize;
            let sig = if exit == 2 && i % 40 == 2 {
                THROTTLE
            } else {
                Signal::Success
            };
            p.on_response(exit, &answer(now, sig), now);
        }
        assert_eq!(p.detected(), Detected::PerIp);
        assert!(p.controller(Lane::Exit(2)).is_some());
        assert!(p.controller(Lane::Exit(0)).is_none());
        assert!(p.controller(Lane::Host).is_some());
    }

    #[test]
    fn a_few_throttles_on_one_exit_of_four_are_chance_not_a_limit_of_its_own() {
        let t0 = Instant::now();
        let mut p = HostPolicy::new(AimdConfig::default(), 4, Coupling::Auto, t0);
        // A shared budget's first throttles: three in a row on exit 3 (chance gives that
        // one time in sixteen), then the rest follow the answers (each exit in turn).
        for i in 0..4000u32 {
            let now = t0 + MS * i;
            let exit = (i % 4) as usize;
            let sig = if [3, 7, 11].contains(&i) || (i > 100 && i % 49 == 1) {
                THROTTLE
            } else {
                Signal::Success
            };
            p.on_response(exit, &answer(now, sig), now);
        }
        assert_eq!(p.detected(), Detected::Host);
        assert_eq!(p.lanes().count(), 1);
    }

    #[test]
    fn the_binomial_tail_is_exact_at_its_ends_and_in_between() {
        assert_eq!(binomial_tail(5, 0, 0.3), 1.0);
        assert_eq!(binomial_tail(3, 4, 0.3), 0.0);
        assert!((binomial_tail(2, 2, 0.25) - 0.0625).abs() < 1e-12);
        assert!((binomial_tail(4, 4, 0.25) - 0.25f64.powi(4)).abs() < 1e-12);
        // P(X ≥ 2), n = 4, p = 0.5: (6 + 4 + 1) / 16.
        assert!((binomial_tail(4, 2, 0.5) - 11.0 / 16.0).abs() < 1e-12);
        assert_eq!(binomial_tail(4, 2, 1.0), 1.0);
        assert_eq!(binomial_tail(4, 2, 0.0), 0.0);
    }

    #[test]
    fn fixed_couplings_skip_detection() {
        let t0 = Instant::now();
        let mut p = HostPolicy::new(AimdConfig::default(), 3, Coupling::PerExit, t0);
        let ch = p.on_response(1, &answer(t0, THROTTLE), t0 + MS);
        assert!(ch.into_iter().all(|(l, _)| l == Lane::Exit(1)));
        assert!(p.controller(Lane::Host).is_none());
        let mut p = HostPolicy::new(AimdConfig::default(), 3, Coupling::Shared, t0);
        let ch = p.on_response(1, &answer(t0, THROTTLE), t0 + MS);
        assert!(ch.into_iter().all(|(l, _)| l == Lane::Host));
    }

    /// A host lane learned through four exits: 2000 answers at 1 ms, one throttle.
    fn learned(t0: Instant) -> (HostPolicy, Instant) {
        let mut p = HostPolicy::new(AimdConfig::default(), 4, Coupling::Auto, t0);
        let mut now = t0;
        for i in 0..2000u32 {
            now = t0 + MS * i;
            let sig = if i == 1000 { THROTTLE } else { Signal::Success };
            p.on_response((i % 4) as usize, &answer(now, sig), now);
        }
        (p, now)
    }

    const RA_1: Signal = Signal::Throttle {
        retry_after: Some(Duration::from_secs(1)),
    };

    #[test]
    fn a_learned_hosts_retry_after_binds_the_exit_and_the_host_goes_on_cut() {
        let t0 = Instant::now();
        let fresh = HostPolicy::new(AimdConfig::default(), 4, Coupling::Auto, t0);
        assert!(
            !fresh.retry_after_binds_exit(t0),
            "a host being learned binds the host"
        );
        let (mut p, now) = learned(t0);
        assert!(p.retry_after_binds_exit(now));
        let before = p.controller(Lane::Host).map(Controller::rate).unwrap();
        let now = now + 10 * MS;
        let changes: Vec<_> = p
            .on_response(2, &answer(now, RA_1), now)
            .into_iter()
            .collect();
        let (lane, a) = changes[0];
        assert_eq!(lane, Lane::Host);
        assert!(
            a.rps < before,
            "the host's budget is cut: {} from {before}",
            a.rps
        );
        assert_eq!(
            a.pause_until, None,
            "the exit is paused by the caller, not the host"
        );
        // Answers of the other exits at the cut rate get through: it stays with the exit.
        for i in 0..100u32 {
            let t = now + 50 * MS + MS * i;
            p.on_response((i % 3) as usize, &answer(t, Signal::Success), t);
        }
        assert!(p.retry_after_binds_exit(now + 200 * MS));
    }

    /// A learned host whose `Retry-After: 1` was just read through exit 2, and when.
    fn read_through_exit_2() -> (HostPolicy, Instant) {
        let (mut p, now) = learned(Instant::now());
        let now = now + 10 * MS;
        p.on_response(2, &answer(now, RA_1), now);
        (p, now)
    }

    /// Exits 0, 1 and 3 refused with `Retry-After: 1`, the first request sent at `from`
    /// and each next one `step` later (each answered as it is sent).
    fn others_refused(p: &mut HostPolicy, from: Instant, step: Duration) {
        for (k, exit) in [0usize, 1, 3].into_iter().enumerate() {
            let t = from + step * u32::try_from(k).unwrap();
            p.on_response(exit, &answer(t, RA_1), t);
        }
    }

    #[test]
    fn the_other_exits_refused_before_the_cut_is_in_force_cut_the_rate_not_the_estimate() {
        // A site that pauses every client, met at a fast rate: the other exits' requests
        // sent within the round trip after the read (the old rate's) are refused. Each
        // cuts the rate, as a run of refusals does; the estimate stays where the pause's
        // own throttle put it.
        let (mut p, now) = read_through_exit_2();
        fn host(p: &HostPolicy) -> &Controller {
            p.controller(Lane::Host).unwrap()
        }
        let (rate, estimate) = (host(&p).rate(), host(&p).capacity_estimate());
        // Answers to requests sent before the cut come back meanwhile.
        p.on_response(1, &answer(now - 5 * MS, Signal::Success), now + MS);
        others_refused(&mut p, now + MS, MS);
        assert!(host(&p).rate() < rate, "the rate falls");
        assert!(
            (host(&p).capacity_estimate() - estimate).abs() < 1e-9,
            "the estimate stays: {} from {estimate}",
            host(&p).capacity_estimate()
        );
    }

    #[test]
    fn a_retry_after_the_other_exits_meet_too_binds_the_host_from_then_on() {
        let (mut p, now) = read_through_exit_2();
        // The site refuses every client for the second: the others' requests sent after
        // the cut are refused too.
        others_refused(&mut p, now + 100 * MS, 10 * MS);
        let later = now + 5 * MS * 1000;
        assert!(!p.retry_after_binds_exit(later));
        let changes: Vec<_> = p
            .on_response(1, &answer(later, RA_1), later)
            .into_iter()
            .collect();
        let paused = changes
            .iter()
            .find(|(l, _)| *l == Lane::Host)
            .and_then(|c| c.1.pause_until);
        assert_eq!(
            paused,
            Some(later + Duration::from_secs(1)),
            "the host is paused"
        );
    }

    #[test]
    fn one_exit_or_a_fixed_scope_binds_as_before() {
        let t0 = Instant::now();
        let mut one = HostPolicy::new(AimdConfig::default(), 1, Coupling::Auto, t0);
        let mut shared = HostPolicy::new(AimdConfig::default(), 4, Coupling::Shared, t0);
        for i in 0..2000u32 {
            let now = t0 + MS * i;
            let sig = if i == 1000 { THROTTLE } else { Signal::Success };
            one.on_response(0, &answer(now, sig), now);
            shared.on_response((i % 4) as usize, &answer(now, sig), now);
        }
        let now = t0 + MS * 2000;
        assert!(!one.retry_after_binds_exit(now));
        assert!(!shared.retry_after_binds_exit(now));
        let changes: Vec<_> = one
            .on_response(0, &answer(now, RA_1), now)
            .into_iter()
            .collect();
        assert_eq!(changes[0].1.pause_until, Some(now + Duration::from_secs(1)));
    }
}
