//! One host as the crawler meets it: the modelled site, the host policy under test, and
//! the pacers carrying out its decisions. A single-host run drives one; a broad run
//! ([`super::broad`]) drives many through one concurrency limit.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use super::site::{Outcome, Site};
use crate::aimd::coupling::{Coupling, HostPolicy, Lane};
use crate::aimd::{AimdConfig, Response, Signal};
use crate::limiter::{interval_of, RateLimiter};
use crate::pacer::Pacer;
use crate::rng::{RandomSource, SplitMix64};

/// An answer on its way back, ordered by when it arrives.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Answer {
    pub(super) at_ns: u64,
    pub(super) sent_ns: u64,
    pub(super) exit: usize,
    pub(super) kind: Kind,
    pub(super) limited: bool,
    /// Requests waiting for the host when this one was sent (a broad run's; `None` in a
    /// single-host run, whose demand has no end).
    pub(super) backlog: Option<u32>,
    /// The host it comes from (a broad run's index; 0 in a single-host run).
    pub(super) host: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Ok,
    Throttle(Option<u64>),
    Forbidden,
    Error,
}

impl Kind {
    /// How a trace line names it.
    pub(super) fn label(self) -> String {
        match self {
            Kind::Ok => "ok".into(),
            Kind::Error => "error".into(),
            Kind::Forbidden => "403".into(),
            Kind::Throttle(None) => "429".into(),
            Kind::Throttle(Some(ra)) => format!("429 retry-after {:.1}s", ra as f64 / 1e9),
        }
    }

    /// A refusal (429/503/403): the page must be asked for again later.
    pub(super) fn refused(self) -> bool {
        matches!(self, Kind::Throttle(_) | Kind::Forbidden)
    }
}

/// A run on fake time: requests go when its pacers allow, answers come back in time order.
pub(super) trait Events {
    /// The run has reached `now`: carry out what is due then; false once it is over.
    fn reached(&mut self, now: u64) -> bool;
    /// Send everything that may go at `now`; when the next send may be (`u64::MAX`:
    /// when an answer frees a slot).
    fn send_ready(&mut self, now: u64) -> u64;
    /// The answers on their way.
    fn answers(&mut self) -> &mut BinaryHeap<Reverse<Answer>>;
    /// An answer came back at `now`.
    fn receive(&mut self, a: &Answer, now: u64);
}

/// Run `run` to its end, advancing to whichever comes first: the next send or the next
/// answer.
pub(super) fn drive(run: &mut impl Events) {
    let mut now = 0u64;
    while run.reached(now) {
        let next_send = run.send_ready(now);
        let next_answer = run.answers().peek().map_or(u64::MAX, |Reverse(a)| a.at_ns);
        if next_answer > next_send {
            now = next_send;
            continue;
        }
        let Some(Reverse(a)) = run.answers().pop() else {
            break;
        };
        now = a.at_ns;
        run.receive(&a, now);
    }
}

pub(super) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The pacers carrying out the lanes' decisions.
struct Pacers {
    host: Option<Pacer>,
    exits: Vec<Option<Pacer>>,
    /// A Retry-After bound to one exit: no send through it before this.
    exit_paused: Vec<Option<Instant>>,
    jitter: f64,
    seed: u64,
}

impl Pacers {
    fn new(
        first_rps: f64,
        per_exit: bool,
        exits: usize,
        jitter: f64,
        seed: u64,
        base: Instant,
    ) -> Self {
        let first = interval_of(first_rps);
        Self {
            host: (!per_exit).then(|| Pacer::new(first, jitter, seed ^ 0x5eed, base)),
            exits: (0..exits)
                .map(|i| per_exit.then(|| Pacer::new(first, jitter, seed ^ i as u64, base)))
                .collect(),
            exit_paused: vec![None; exits],
            jitter,
            seed,
        }
    }

    /// How long until exit `i` may send.
    fn wait(&self, i: usize, now: Instant) -> Duration {
        let h = self.host.as_ref().map_or(Duration::ZERO, |p| p.peek(now));
        let e = self.exits[i]
            .as_ref()
            .map_or(Duration::ZERO, |p| p.peek(now));
        let paused =
            self.exit_paused[i].map_or(Duration::ZERO, |p| p.saturating_duration_since(now));
        h.max(e).max(paused)
    }

    /// A Retry-After read through exit `i` binds that exit until `until`.
    fn pause_exit(&mut self, i: usize, until: Instant) {
        let p = &mut self.exit_paused[i];
        *p = Some(p.map_or(until, |q| q.max(until)));
    }

    fn take(&mut self, i: usize, now: Instant) {
        if let Some(p) = self.host.as_mut() {
            p.check(now);
        }
        if let Some(p) = self.exits[i].as_mut() {
            p.check(now);
        }
    }

    fn apply(&mut self, lane: Lane, interval: Duration, pause: Option<Instant>, now: Instant) {
        let pacer = match lane {
            Lane::Host => self.host.as_mut(),
            Lane::Exit(i) => {
                let (j, s) = (self.jitter, self.seed ^ i as u64);
                Some(self.exits[i].get_or_insert_with(|| Pacer::new(interval, j, s, now)))
            }
        };
        if let Some(p) = pacer {
            p.set_interval(interval, now);
            if let Some(until) = pause {
                p.pause(until, now);
            }
        }
    }
}

/// How a host is reached and answers in time.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reach {
    /// Network round trip, without page time.
    pub(super) rtt: Duration,
    /// Each round trip varies uniformly by ± this fraction.
    pub(super) rtt_noise: f64,
    /// A request without an answer after this long fails as a timeout.
    pub(super) timeout: Duration,
}

/// One host: its site, the policy under test, its pacers.
pub(super) struct HostSim {
    base: Instant,
    pub(super) site: Site,
    pub(super) policy: HostPolicy,
    pacers: Pacers,
    /// The host's send count when each exit last sent to it: the longest ago goes next.
    last_sent: Vec<u64>,
    /// Requests sent to the host.
    sent: u64,
    net: SplitMix64,
    reach: Reach,
}

/// What a new [`HostSim`] is made of.
pub(super) struct HostSetup {
    pub(super) site: Site,
    pub(super) controller: AimdConfig,
    /// Where the host starts, if a host prior says (see [`HostPolicy::starting_at`]).
    pub(super) start_rps: Option<f64>,
    /// The pause the prior expects a throttle to bring (see [`HostPolicy::expecting_pause`]).
    pub(super) expected_pause: Duration,
    /// The throttles the prior expects a probe to bring (see
    /// [`HostPolicy::expecting_probe_throttles`]).
    pub(super) probe_throttles: f64,
    pub(super) coupling: Coupling,
    pub(super) exits: usize,
    pub(super) jitter: f64,
    pub(super) reach: Reach,
    pub(super) seed: u64,
}

impl HostSim {
    /// A host first met at `now`, in a run whose time zero is `base`.
    pub(super) fn new(s: HostSetup, base: Instant, now: Instant) -> Self {
        let policy = HostPolicy::new(s.controller.clone(), s.exits, s.coupling, now);
        let first = s.start_rps.unwrap_or(s.controller.initial_rps);
        let per_exit = s.coupling == Coupling::PerExit;
        Self {
            base,
            site: s.site,
            policy: match s.start_rps {
                Some(r) => policy.starting_at(r, now),
                None => policy,
            }
            .expecting_pause(s.expected_pause)
            .expecting_probe_throttles(s.probe_throttles),
            pacers: Pacers::new(first, per_exit, s.exits, s.jitter, s.seed, now),
            last_sent: vec![0u64; s.exits],
            sent: 0,
            net: SplitMix64::new(s.seed),
            reach: s.reach,
        }
    }

    /// The instant `ns` nanoseconds into the run.
    fn at(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    /// The exit the pacers allow at `now` that sent to the host longest ago, or how long
    /// until one is allowed.
    pub(super) fn pick_exit(&self, now: u64) -> Result<usize, Duration> {
        let t = self.at(now);
        let mut pick: Option<usize> = None;
        let mut soonest = Duration::MAX;
        for i in 0..self.last_sent.len() {
            let w = self.pacers.wait(i, t);
            if w.is_zero() {
                if pick.is_none_or(|p| self.last_sent[i] < self.last_sent[p]) {
                    pick = Some(i);
                }
            } else {
                soonest = soonest.min(w);
            }
        }
        pick.ok_or(soonest)
    }

    /// Send one request through `exit` at `now`: the site's answer, for when it comes
    /// back. `limited`: the send had waited for a pacer; `backlog`: what else waited.
    pub(super) fn send(
        &mut self,
        exit: usize,
        now: u64,
        limited: bool,
        backlog: Option<u32>,
    ) -> Answer {
        self.pacers.take(exit, self.at(now));
        self.sent += 1;
        self.last_sent[exit] = self.sent;
        let r = self.reach;
        let rtt = (ns(r.rtt) as f64 * (1.0 + r.rtt_noise * self.net.next_signed())) as u64;
        let arrive = now + rtt / 2;
        let (answer_at, kind) = match self.site.arrive(exit, arrive) {
            Outcome::Served(left) => (left + rtt / 2, Kind::Ok),
            Outcome::Failed(left) => (left + rtt / 2, Kind::Error),
            Outcome::Reset => (now + rtt, Kind::Error),
            Outcome::Hang => (now + ns(r.timeout), Kind::Error),
            Outcome::Refused {
                forbidden: true, ..
            } => (now + rtt, Kind::Forbidden),
            Outcome::Refused { retry_after, .. } => {
                (now + rtt, Kind::Throttle(retry_after.map(ns)))
            }
        };
        // No answer within the timeout: the crawler gives up.
        let (answer_at, kind) = if answer_at - now > ns(r.timeout) {
            (now + ns(r.timeout), Kind::Error)
        } else {
            (answer_at, kind)
        };
        Answer {
            at_ns: answer_at,
            sent_ns: now,
            exit,
            kind,
            limited,
            backlog,
            host: 0,
        }
    }

    /// Feed an answer that came back at `now` to the host policy, and carry out what it
    /// decided.
    pub(super) fn feed(&mut self, a: &Answer, now: u64) {
        let signal = match a.kind {
            Kind::Ok => Signal::Success,
            Kind::Error => Signal::Error,
            Kind::Throttle(ra) => Signal::Throttle {
                retry_after: ra.map(Duration::from_nanos),
            },
            Kind::Forbidden => Signal::Refused,
        };
        let response = Response {
            sent_at: self.at(a.sent_ns),
            latency: Duration::from_nanos(a.at_ns - a.sent_ns),
            signal,
            limited: a.limited,
            backlog: a.backlog,
        };
        let t = self.at(now);
        // Read where the answer is read, as the scheduler does: a Retry-After bound to the
        // exit pauses it at once; one bound to a lane comes with that lane's change.
        if let Kind::Throttle(Some(ra)) = a.kind {
            let own_lane = self.policy.controller(Lane::Exit(a.exit)).is_some();
            if !own_lane && self.policy.retry_after_binds_exit(t) {
                self.pacers.pause_exit(a.exit, t + Duration::from_nanos(ra));
            }
        }
        for (lane, adj) in self.policy.on_response(a.exit, &response, t) {
            self.pacers.apply(lane, adj.interval, adj.pause_until, t);
        }
    }
}
