//! Distributed mode: the limiter's rates shared with other crawler processes through
//! Redis. Which changes are stored and which received rates are taken is the core's
//! decision ([`exitcrawl::aimd::fleet`]); here are the calls and the messages. With a
//! fixed algorithm only pauses are shared: a pause another process read is taken, never
//! a rate, and no controller is made or moved for it; the pauses in force stored before
//! the subscription was made (or came back) are read then.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use exitcrawl::aimd::coupling::{Coupling, HostPolicy, Lane};
use exitcrawl::aimd::fleet::{self, Publish, Take};
use exitcrawl::aimd::{Adjustment, AimdConfig, Controller};
use exitcrawl::config::Scope;
use exitcrawl::headers::Pacing;

use super::{Controllers, Known, LimitKey, LimiterActor};
use crate::redis::{Raised, RateMessage, RateUpdate, SharedRates};

impl LimiterActor {
    /// Tell the other processes about a change of ours (a fixed algorithm's: its pause
    /// alone, if it has one); a failure only means they learn it later.
    pub(super) fn publish(&mut self, key: &LimitKey, change: &Adjustment, now: std::time::Instant) {
        let (Some(shared), Some(me)) = (self.shared.clone(), self.me.clone()) else {
            return;
        };
        let pause = change
            .pause_until
            .map(|p| p.saturating_duration_since(now))
            .filter(|p| !p.is_zero());
        let how = if self.adaptive() {
            self.fleet
                .entry(key.clone())
                .or_default()
                .publish(change.rps)
        } else {
            match fleet::fixed_publish(pause.is_some()) {
                Some(how) => how,
                None => return,
            }
        };
        let name = key.redis_name();
        let rps = change.rps;
        let key = key.clone();
        actix_rt::spawn(async move {
            let outcome = match how {
                Publish::Pause => match pause {
                    Some(p) => shared.pause(&name, p).await.map(|_| ()),
                    None => Ok(()),
                },
                Publish::Cut => {
                    let r = shared.set(&name, rps, pause).await;
                    let server_ms = r.as_ref().ok().map(|u| u.server_now_ms);
                    me.do_send(SharedNews::CutStored { key, server_ms });
                    r.map(|_| ())
                }
                Publish::Raise { from } => match shared.raise(&name, rps, pause, from).await {
                    Ok(Raised::Refused(stored)) => {
                        me.do_send(SharedNews::Refused(stored));
                        Ok(())
                    }
                    r => r.map(|_| ()),
                },
            };
            if let Err(e) = outcome {
                tracing::debug!(key = %name, error = %e, "shared rate not published");
            }
        });
    }

    /// The subscription was made, or lost and is back: the changes published before it
    /// never came. An adaptive process reads again the stored rate of every key it
    /// shares, taken as the core judges a read
    /// ([`SharedKey::read`](exitcrawl::aimd::fleet::SharedKey::read): one below ours as a
    /// received cut, a pause in force whatever the rate). Without it a process kept a
    /// rate the others had cut until that key's next change, which a site that stays cut
    /// never brings. A fixed rate takes pauses alone, for hosts met or not (their first
    /// request waits for one in force), and it hears no answer that says nothing, which
    /// is when an adaptive process reads a key new to it: it reads every pause in force
    /// ([`SharedRates::paused`]).
    fn reread_shared(&mut self) {
        if self.adaptive() {
            let names = self.fleet.keys().map(LimitKey::redis_name).collect();
            self.read_stored(names);
        } else {
            self.read_paused();
        }
    }

    /// Read every key's pause in force, each then judged as a [`SharedNews::Read`].
    fn read_paused(&self) {
        let (Some(shared), Some(me)) = (self.shared.clone(), self.me.clone()) else {
            return;
        };
        actix_rt::spawn(async move {
            match shared.paused().await {
                Ok(paused) => {
                    for u in paused {
                        me.do_send(SharedNews::Read(u));
                    }
                }
                Err(e) => tracing::debug!(error = %e, "shared pauses not read"),
            }
        });
    }

    /// `exit`'s answer from `host` is about to give it controllers (met for the first
    /// time, or again after it was forgotten): read the stored rate of the key they share,
    /// taken as on a reread (one below ours as a received cut, a pause in force whatever
    /// the rate). This process starts the host at a rate of its own (`initial_rps`, the
    /// host prior), which knows nothing of a cut or a pause the fleet met: it would pace
    /// the host above the cut until its first change, and for good where the start never
    /// changes (too little work to grow), and send into the pause.
    pub(super) fn read_new_key(&mut self, exit: &Arc<str>, host: &Arc<str>) {
        if self.shared.is_none() || !self.adaptive() {
            return;
        }
        let key = match &self.controllers {
            Controllers::Hosts { policies, .. } if !policies.contains_key(host) => {
                LimitKey::new(Scope::Auto, exit, host)
            }
            Controllers::Keys(map) => {
                let key = LimitKey::new(self.settings.scope, exit, host);
                if map.contains_key(&key) {
                    return;
                }
                key
            }
            Controllers::Hosts { .. } => return,
        };
        let name = key.redis_name();
        // Known from now on, so a lost subscription's reread covers it too.
        self.fleet.entry(key).or_default();
        self.read_stored(vec![name]);
    }

    /// Read the stored rates of the keys `names`, each then judged as a
    /// [`SharedNews::Read`].
    fn read_stored(&self, names: Vec<String>) {
        let (Some(shared), Some(me)) = (self.shared.clone(), self.me.clone()) else {
            return;
        };
        actix_rt::spawn(async move {
            for name in names {
                match shared.get(&name).await {
                    Ok(Some(u)) => me.do_send(SharedNews::Read(u)),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(key = %name, error = %e, "shared rate not read");
                    }
                }
            }
        });
    }

    /// Another process changed a key's rate or paused it: take what the core judges worth
    /// taking.
    fn received(&mut self, u: &RateUpdate) {
        let Some(key) = LimitKey::from_redis_name(&u.key) else {
            return;
        };
        let paused = u.pause_remaining().is_some();
        let take = if self.adaptive() {
            let fleet = self.fleet.entry(key.clone()).or_default();
            let take = fleet.receive(u.rate(), u.server_now_ms, paused);
            if !take.rate && u.rate().is_some() {
                tracing::debug!(key = %u.key, rps = u.rps, "a rise older than our cut: not taken");
            }
            take
        } else {
            fleet::fixed_take(paused)
        };
        if take.any() {
            self.adopt_shared(key, u, take);
        }
    }

    /// A key's stored value, read: take what the core judges worth taking, against the
    /// rate this process paces the key at (none: the key is no longer in use here). A
    /// fixed rate takes a pause in force, whether it paces the key or not.
    fn read(&mut self, u: &RateUpdate) {
        let Some(key) = LimitKey::from_redis_name(&u.key) else {
            return;
        };
        let paused = u.pause_remaining().is_some();
        let take = if self.adaptive() {
            let Some(ours) = self.rate_of(&key) else {
                return;
            };
            let fleet = self.fleet.entry(key.clone()).or_default();
            fleet.read(u.rate(), u.server_now_ms, ours, paused)
        } else {
            fleet::fixed_take(paused)
        };
        if take.any() {
            self.adopt_shared(key, u, take);
        }
    }

    /// The rate this process paces `key` at now, if it has a controller for it.
    fn rate_of(&self, key: &LimitKey) -> Option<f64> {
        match &self.controllers {
            Controllers::Hosts {
                policies, exits, ..
            } => {
                let policy = &policies.get(key.host.as_ref()?)?.policy;
                let lane = match &key.exit {
                    None => Lane::Host,
                    Some(e) => Lane::Exit(exits.iter().position(|x| x == e)?),
                };
                policy.controller(lane).map(Controller::rate)
            }
            Controllers::Keys(map) => map.get(key).map(Controller::rate),
        }
    }

    /// Take of `u`, a rate and pause decided elsewhere for `key`, what the core judged
    /// worth taking (`take`). With a fixed algorithm that is a pause alone, told the
    /// subscribers at the configured rate.
    fn adopt_shared(&mut self, key: LimitKey, u: &RateUpdate, take: Take) {
        let now = crate::clock::now();
        let pause = u.pause_remaining().filter(|_| take.pause);
        if !self.adaptive() {
            if let Some(d) = pause {
                let a = self.fixed_pause(now + d);
                tracing::debug!(key = %u.key, pause_ms = d.as_millis(), "adopted a shared pause");
                self.broadcast(key, &a);
            }
            return;
        }
        let rate = u.rate().filter(|_| take.rate);
        let Some((adjusted, a)) = self.adopt_in_controller(&key, rate, pause, now) else {
            return;
        };
        if adjusted || pause.is_some() {
            tracing::debug!(key = %u.key, rps = u.rps, "adopted a shared rate");
            self.broadcast(key, &a);
        }
    }

    /// Give `key`'s controller (made if need be) a `rate` and a `pause` decided
    /// elsewhere: whether its rate moved, and where it stands. `None` for a key with no
    /// controller to take them (an exit's lane not opened here).
    ///
    /// The pause is recorded in the controller as a pause the site's headers asked for,
    /// which it is: the site's word, read by another process. Kept there, it holds the
    /// host against being forgotten while it runs (`exitcrawl::aimd::forget`: the
    /// scheduler's pacing, which holds the pause, would go with it), and the lane's next
    /// changes carry it.
    fn adopt_in_controller(
        &mut self,
        key: &LimitKey,
        rate: Option<f64>,
        pause: Option<Duration>,
        now: std::time::Instant,
    ) -> Option<(bool, Adjustment)> {
        let cfg = AimdConfig::from_settings(&self.settings);
        let hint = pause.map(|d| Pacing {
            pause_for: Some(d),
            ..Pacing::default()
        });
        let (adjusted, ctl) = match &mut self.controllers {
            Controllers::Hosts {
                policies, exits, ..
            } => {
                let host = key.host.clone()?;
                let n = exits.len();
                let lane = match &key.exit {
                    None => Lane::Host,
                    Some(e) => Lane::Exit(exits.iter().position(|x| x == e)?),
                };
                let prior = &self.prior;
                let unlearned = &mut self.unlearned;
                let known = policies.entry(host).or_insert_with_key(|host| {
                    // The rate adopted is this host's now, whatever was kept of it.
                    unlearned.remove(host);
                    let mut p = prior.lock().unwrap_or_else(|e| e.into_inner());
                    p.returned(host);
                    Known {
                        policy: HostPolicy::new(cfg, n, Coupling::Auto, now),
                        heard: now,
                    }
                });
                let policy = &mut known.policy;
                let adjusted = rate.and_then(|r| policy.adopt(lane, r, now)).is_some();
                if let (Some(h), Some(_)) = (&hint, policy.controller(lane)) {
                    // The exit whose hints reach `lane`: past the exits' indices is no
                    // exit's own lane, so the host's.
                    let through = match lane {
                        Lane::Exit(i) => i,
                        Lane::Host => n,
                    };
                    policy.on_hint(through, h, now);
                }
                (adjusted, policy.controller(lane)?)
            }
            Controllers::Keys(map) => {
                let ctl = map
                    .entry(key.clone())
                    .or_insert_with(|| Controller::new(cfg, now));
                let adjusted = rate.and_then(|r| ctl.adopt(r, now)).is_some();
                if let Some(h) = &hint {
                    ctl.on_hint(h, now);
                }
                (adjusted, &*ctl)
            }
        };
        let a = Adjustment {
            rps: ctl.rate(),
            interval: ctl.interval(),
            pause_until: ctl.pause_until(now),
        };
        Some((adjusted, a))
    }
}

/// Forward other processes' rate changes to the limiter for as long as it runs; while
/// Redis is away, try again with backoff (crawling goes on meanwhile).
pub(super) async fn follow_shared_rates(shared: SharedRates, me: Addr<LimiterActor>) {
    let mut backoff = crate::redis::Backoff::default();
    while me.connected() {
        match shared.subscribe().await {
            Ok(mut sub) => {
                backoff.reset();
                // What was published before is read (`reread_shared`).
                me.do_send(SharedNews::Received(RateMessage::Resubscribed));
                while let Some(msg) = sub.recv().await {
                    if me.try_send(SharedNews::Received(msg)).is_err() && !me.connected() {
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "shared rates: subscribe failed, retrying");
                actix_rt::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

/// What Redis said about a key's shared rate.
enum SharedNews {
    /// Another crawler process changed a key's rate.
    Received(RateMessage),
    /// Our cut was stored at the server's time (or failed to be: `None`).
    CutStored {
        key: LimitKey,
        server_ms: Option<u64>,
    },
    /// Our rise was refused: this is the stored rate, a cut we had not heard of yet.
    Refused(RateUpdate),
    /// A key's stored rate, read when the key came into use or again after the
    /// subscription was made or came back; a fixed rate's, a pause in force alone.
    Read(RateUpdate),
}

impl Message for SharedNews {
    type Result = ();
}

impl Handler<SharedNews> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: SharedNews, _ctx: &mut Self::Context) {
        match m {
            SharedNews::Received(RateMessage::Update(u)) => self.received(&u),
            SharedNews::Received(RateMessage::Resubscribed) => self.reread_shared(),
            SharedNews::CutStored { key, server_ms } => {
                self.fleet.entry(key).or_default().cut_stored(server_ms);
            }
            SharedNews::Read(u) => self.read(&u),
            SharedNews::Refused(u) => {
                let Some(key) = LimitKey::from_redis_name(&u.key) else {
                    return;
                };
                if let Some(stored) = u.rate() {
                    self.fleet.entry(key.clone()).or_default().refused(stored);
                }
                let take = Take {
                    rate: true,
                    pause: true,
                };
                self.adopt_shared(key, &u, take);
            }
        }
    }
}
