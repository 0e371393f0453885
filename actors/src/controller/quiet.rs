//! Forgetting quiet hosts (scope `auto`, `aimd`): the limiter forgets the controllers of
//! a host nothing has been heard from for `limiter.forget_idle_ms` (what may be forgotten
//! is the core's decision, [`exitcrawl::aimd::forget`]), and tells the scheduler, whose
//! pacing of it goes too. A host the scheduler paces without the limiter ever hearing
//! from it is forgotten the same way, once the scheduler says it met it.

use std::collections::HashSet;
use std::sync::Arc;

use actix::prelude::*;
use exitcrawl::aimd::forget;

use super::{Controllers, LimiterActor};

/// Forget the pacing of these hosts: the limiter forgot their controllers (see
/// [`forget`]). Hosts with fetches queued or in flight start theirs again in place.
pub(crate) struct ForgetHosts(pub Vec<Arc<str>>);

impl Message for ForgetHosts {
    type Result = ();
}

/// The scheduler paces these hosts: their pacing began, or went on past their
/// forgetting (see [`ForgetHosts`]). A host the limiter has no controllers for is
/// forgotten after a silence as a quiet host is, unless it hears from it meanwhile: the
/// fetches of a host no exit can reach end in the scheduler, and say nothing here.
pub(crate) struct HostsMet(pub Vec<Arc<str>>);

impl Message for HostsMet {
    type Result = ();
}

impl LimiterActor {
    /// Forget the hosts quiet for `limiter.forget_idle_ms` with nothing in force (see
    /// [`forget`]), keeping what a cut taught them in the prior, and tell the
    /// scheduler. Scope `auto` only: the other scopes keep a controller per key.
    pub(super) fn forget_quiet_hosts(&mut self) {
        let Controllers::Hosts {
            policies,
            binds_exit,
            exits,
        } = &mut self.controllers
        else {
            return;
        };
        let now = crate::clock::now();
        let after = self.settings.forget_idle();
        let mut gone = Vec::new();
        self.unlearned.retain(|host, heard| {
            let quiet = now.saturating_duration_since(*heard) >= after;
            if quiet {
                gone.push(Arc::clone(host));
            }
            !quiet
        });
        let mut prior = self.prior.lock().unwrap_or_else(|e| e.into_inner());
        policies.retain(|host, k| {
            if !forget::forgettable(&k.policy, k.heard, after, now) {
                return true;
            }
            prior.forgot(host, forget::remembered_rate(&k.policy));
            binds_exit.remove(host);
            gone.push(Arc::clone(host));
            false
        });
        drop(prior);
        if gone.is_empty() {
            return;
        }
        // A map keeps its size after a purge: shrink once it is mostly empty.
        if policies.capacity() > 4 * policies.len().max(64) {
            policies.shrink_to_fit();
        }
        if self.unlearned.capacity() > 4 * self.unlearned.len().max(64) {
            self.unlearned.shrink_to_fit();
        }
        tracing::debug!(hosts = gone.len(), "limiter: quiet hosts forgotten");
        if let Some(m) = &self.metrics {
            for host in &gone {
                m.forget_host(host, exits);
            }
        }
        if !self.fleet.is_empty() {
            let gone: HashSet<&str> = gone.iter().map(|h| &**h).collect();
            self.fleet
                .retain(|k, _| !k.host.as_deref().is_some_and(|h| gone.contains(h)));
        }
        if let Some(to) = &self.forgotten {
            to.do_send(ForgetHosts(gone));
        }
    }

    /// `host` answered, saying nothing: it is heard from now, whether it has controllers
    /// or not (see `unlearned`).
    pub(super) fn heard_nothing_from(&mut self, host: &Arc<str>) {
        let Controllers::Hosts { policies, .. } = &mut self.controllers else {
            return;
        };
        let now = crate::clock::now();
        match policies.get_mut(host) {
            Some(known) => known.heard = now,
            None => {
                self.unlearned.insert(Arc::clone(host), now);
            }
        }
    }
}

impl Handler<HostsMet> for LimiterActor {
    type Result = ();

    fn handle(&mut self, m: HostsMet, _ctx: &mut Self::Context) {
        let Controllers::Hosts { policies, .. } = &self.controllers else {
            return;
        };
        let now = crate::clock::now();
        for host in m.0 {
            if !policies.contains_key(&host) {
                self.unlearned.insert(host, now);
            }
        }
    }
}

#[cfg(test)]
mod forget_tests {
    use super::*;
    use crate::messages::{Failed, GetLimits};
    use exitcrawl::config::LimiterSettings;
    use exitcrawl::outcome::Failure;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Keeps the hosts it is told were forgotten.
    struct Told(Arc<Mutex<Vec<Arc<str>>>>);

    impl Actor for Told {
        type Context = Context<Self>;
    }

    impl Handler<ForgetHosts> for Told {
        type Result = ();

        fn handle(&mut self, m: ForgetHosts, _: &mut Self::Context) {
            self.0.lock().unwrap().extend(m.0);
        }
    }

    #[actix::test]
    async fn a_host_whose_answers_all_said_nothing_is_forgotten_as_a_quiet_one() {
        tokio::time::pause();
        let told = Arc::new(Mutex::new(Vec::new()));
        let exit: Arc<str> = Arc::from("e");
        let settings = LimiterSettings {
            forget_idle_ms: 60_000,
            ..LimiterSettings::default()
        };
        let limiter = LimiterActor::new(settings, vec![Arc::clone(&exit)], vec![])
            .telling_forgotten(Told(Arc::clone(&told)).start().recipient())
            .start();
        // A name that does not resolve: the answer says nothing, no controller is made.
        let dead = Failed {
            exit: Arc::clone(&exit),
            host: Arc::from("dead.example"),
            sent_at: crate::clock::now(),
            latency: Duration::from_millis(5),
            kind: Failure::Unresolved,
            retry: false,
        };
        limiter.send(dead).await.unwrap();
        assert!(limiter.send(GetLimits).await.unwrap().is_empty());
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(told.lock().unwrap().is_empty(), "not yet quiet long enough");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(*told.lock().unwrap(), [Arc::<str>::from("dead.example")]);
    }

    #[actix::test]
    async fn a_host_the_scheduler_met_and_nothing_was_heard_from_is_forgotten() {
        tokio::time::pause();
        let told = Arc::new(Mutex::new(Vec::new()));
        let settings = LimiterSettings {
            forget_idle_ms: 60_000,
            ..LimiterSettings::default()
        };
        let limiter = LimiterActor::new(settings, vec![Arc::from("e")], vec![])
            .telling_forgotten(Told(Arc::clone(&told)).start().recipient())
            .start();
        // Its fetches all ended in the scheduler: no exit of its address's family.
        limiter
            .send(HostsMet(vec![Arc::from("[::1]")]))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(told.lock().unwrap().is_empty(), "not yet quiet long enough");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(*told.lock().unwrap(), [Arc::<str>::from("[::1]")]);
    }
}
