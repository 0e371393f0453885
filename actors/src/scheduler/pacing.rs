use super::*;

/// A limiter key's pacing, shared between `SchedulerActor::keys` and the hosts using it.
pub(super) type SharedKey = Rc<RefCell<KeyState>>;

/// One limiter key's pacing.
pub(super) struct KeyState {
    pub(super) limiter: Option<Box<dyn RateLimiter>>,
    pub(super) pause_until: Option<std::time::Instant>,
    /// Distributed mode while Redis is unreachable: the shared rate this key had; the
    /// local limiter runs at a share of it meanwhile.
    pub(super) fallback_from: Option<f64>,
}

impl KeyState {
    /// Start pacing on a local share; `true` when this call started the fallback.
    pub(super) fn enter_fallback(
        &mut self,
        processes: u32,
        min_rps: f64,
        now: std::time::Instant,
    ) -> bool {
        let Some(l) = self.limiter.as_mut() else {
            return false;
        };
        if self.fallback_from.is_some() {
            return false;
        }
        let rps = l.quota().rps;
        self.fallback_from = Some(rps);
        l.set_rate(
            exitcrawl::limiter::fallback_rps(rps, processes, min_rps),
            now,
        );
        true
    }

    pub(super) fn leave_fallback(&mut self, now: std::time::Instant) {
        if let (Some(rps), Some(l)) = (self.fallback_from.take(), self.limiter.as_mut()) {
            l.set_rate(rps, now);
        }
    }

    pub(super) fn ready_in(&mut self, now: std::time::Instant) -> Duration {
        let pause = self
            .pause_until
            .map_or(Duration::ZERO, |p| p.saturating_duration_since(now));
        let pace = self
            .limiter
            .as_mut()
            .map_or(Duration::ZERO, |l| l.peek(now));
        pause.max(pace)
    }
}

/// A host's pacing as [`choose`] reads it: its limiter keys and how recently each exit
/// sent to it.
#[derive(Default)]
pub(super) struct HostPacing {
    /// The limiter key of each exit, by exit index (scope `auto`: each exit's own lane,
    /// unpaced until the limiter gives it a rate).
    pub(super) keys: Vec<Option<SharedKey>>,
    /// Scope `auto`: the host's budget, which every exit's requests draw on.
    pub(super) host_key: Option<SharedKey>,
    /// `sends` when each exit last sent to this host (0: never).
    pub(super) last_sent: Vec<u64>,
    /// Requests sent to this host.
    pub(super) sends: u64,
}

/// The pacing state of `key`, created on first use. `paced`: start with a pacer at the
/// first rate, `start()` (with `aimd`: the host prior's under scope `auto`, the
/// configured `initial_rps` otherwise); an exit's own lane under scope `auto` starts
/// unpaced and gets a pacer with the limiter's first [`SetInterval`] for it.
pub(super) fn key_state(
    keys: &mut HashMap<LimitKey, SharedKey>,
    settings: &Settings,
    key: LimitKey,
    (seed, paced, start): (usize, bool, impl FnOnce() -> f64),
    now: std::time::Instant,
) -> SharedKey {
    let l = &settings.limiter;
    let state = keys.entry(key).or_insert_with(|| {
        let limiter: Option<Box<dyn RateLimiter>> = match l.algorithm {
            Algorithm::None => None,
            _ if !paced => None,
            Algorithm::Aimd => Some(Box::new(Pacer::new(
                interval_of(start()),
                l.jitter,
                seed as u64 ^ 0xa11ce,
                now,
            ))),
            other => other
                .limiter_kind()
                .map(|k| limiter::build(k, Quota::new(l.initial_rps, l.burst.max(1)), now)),
        };
        Rc::new(RefCell::new(KeyState {
            limiter,
            pause_until: None,
            fallback_from: None,
        }))
    });
    Rc::clone(state)
}

/// The key whose pacing every request through exit `exit` to `host` must pass first: the
/// scope's key, or under scope `auto` the exit's own lane.
pub(super) fn exit_key(settings: &Settings, exit: &Arc<str>, host: &Arc<str>) -> (LimitKey, bool) {
    match settings.limiter.scope {
        Scope::Auto => (LimitKey::exit_lane(exit, host), false),
        scope => (LimitKey::new(scope, exit, host), true),
    }
}

/// What [`choose`] reads and updates besides the host's own state.
pub(super) struct Choice<'a> {
    pub(super) exits: &'a mut [ExitSlot],
    pub(super) keys: &'a mut HashMap<LimitKey, SharedKey>,
    pub(super) settings: &'a Settings,
    /// Where a new host's budget starts.
    pub(super) prior: &'a Mutex<HostPrior>,
    /// Scratch: when each exit may send next.
    pub(super) ready: &'a mut Vec<Duration>,
    /// Breaks ties between equally loaded exits in turn.
    pub(super) tie: &'a mut u64,
}

/// Which exit may send a fetch (`req`) to `host` now: the core's `select` over every
/// exit's health, load (the host's own count against `per_host_connections`), pacing
/// (the exit's token bucket, the limiter keys' pacers) and how recently it sent to this
/// host. On `Exit(i)` the permits the selection saw as free are taken.
pub(super) fn choose(
    c: Choice<'_>,
    (active, pacing): (&mut Vec<u32>, &mut HostPacing),
    host: &Arc<str>,
    req: &select::Request<'_>,
    now_std: std::time::Instant,
) -> Selection {
    let n = c.exits.len();
    let per_host_cap = c.settings.crawler.per_host_connections;
    if active.len() < n {
        active.resize(n, 0);
        pacing.keys.resize(n, None);
        pacing.last_sent.resize(n, 0);
    }
    let host_ready = match c.settings.limiter.scope {
        Scope::Auto => pacing
            .host_key
            .get_or_insert_with(|| {
                let key = LimitKey {
                    exit: None,
                    host: Some(Arc::clone(host)),
                };
                let l = &c.settings.limiter;
                let start = || {
                    let prior = c.prior.lock().unwrap_or_else(|e| e.into_inner());
                    prior.start(l.initial_rps, l.min_rps)
                };
                key_state(c.keys, c.settings, key, (0, true, start), now_std)
            })
            .borrow_mut()
            .ready_in(now_std),
        _ => Duration::ZERO,
    };
    c.ready.clear();
    for (i, exit) in c.exits.iter_mut().enumerate() {
        let bucket = exit.share.ready_in(now_std);
        let key = pacing.keys[i]
            .get_or_insert_with(|| {
                let (key, paced) = exit_key(c.settings, &exit.name, host);
                let start = c.settings.limiter.initial_rps;
                key_state(c.keys, c.settings, key, (i, paced, || start), now_std)
            })
            .borrow_mut()
            .ready_in(now_std);
        c.ready.push(bucket.max(key).max(host_ready));
    }
    // Filled in place: `collect` builds the (half-kilobyte) vector and then moves it.
    let mut cands: SmallVec<[Candidate<'_>; 8]> = SmallVec::new();
    for (i, e) in c.exits.iter().enumerate() {
        cands.push(Candidate {
            name: &e.name,
            region: e.region.as_deref(),
            available: e.enabled && e.healthy,
            active: if active[i] >= per_host_cap {
                e.max_concurrent
            } else {
                e.share.active()
            },
            max_concurrent: e.max_concurrent,
            ready_in: c.ready[i],
            last_sent: pacing.last_sent[i],
            family: e.family,
        });
    }
    *c.tie = c.tie.wrapping_add(1);
    let selection = select::select(&cands, req, *c.tie);
    drop(cands);
    if let Selection::Exit(i) = selection {
        // Take the permits the selection saw as free.
        c.exits[i].share.take_token(now_std);
        for key in pacing.keys[i].iter().chain(pacing.host_key.iter()) {
            if let Some(l) = key.borrow_mut().limiter.as_mut() {
                l.check(now_std);
            }
        }
        pacing.sends += 1;
        pacing.last_sent[i] = pacing.sends;
    }
    selection
}
