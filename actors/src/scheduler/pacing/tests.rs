//! [`Pacing`] on its own, on tokio's paused clock, with real exits bound to 127.0.0.2
//! and 127.0.0.3 (nothing is sent: the choice only reads them).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use exitcrawl::aimd::prior::HostPrior;
use exitcrawl::config::{Algorithm, ExitSettings, Scope, Settings};
use exitcrawl::select::{self, Selection};

use super::{HostPacing, Pacing};
use crate::controller::LimitKey;
use crate::metrics::Metrics;
use crate::scheduler::ExitSlot;

fn settings(scope: Scope, algorithm: Algorithm) -> Settings {
    let mut s = Settings::with_exits(vec![
        ExitSettings::new("e2", "127.0.0.2".parse().expect("ip")),
        ExitSettings::new("e3", "127.0.0.3".parse().expect("ip")),
    ]);
    s.limiter.scope = scope;
    s.limiter.algorithm = algorithm;
    s.limiter.initial_rps = 10.0;
    s.limiter.jitter = 0.0;
    s
}

/// The pacing part and the exits it chooses among.
fn part(settings: Settings) -> (Pacing, Vec<ExitSlot>) {
    tokio::time::pause();
    let settings = Arc::new(settings);
    let metrics = Metrics::new(0);
    let (exits, _arbiters) = crate::scheduler::start_exits(&settings, &metrics);
    let prior = Arc::new(Mutex::new(HostPrior::new()));
    (Pacing::new(settings, prior), exits)
}

/// One host's state as the queues keep it: its in-flight counts and its pacing.
#[derive(Default)]
struct Host {
    active: Vec<u32>,
    pacing: HostPacing,
}

impl Host {
    /// Ask for an exit as the dispatch does, counting the send on the exit chosen.
    fn choose(&mut self, p: &mut Pacing, exits: &mut [ExitSlot], host: &str) -> Selection {
        let host: Arc<str> = Arc::from(host);
        let req = select::Request {
            preferred: None,
            region: None,
            exclude: &[],
            family: select::Family::of_host(&host),
            avoid: None,
        };
        let now = crate::clock::now();
        let selection = p.choose(
            exits,
            (&mut self.active, &mut self.pacing),
            &host,
            &req,
            now,
        );
        if let Selection::Exit(i) = selection {
            self.active[i] += 1;
            exits[i].share.reserve();
        }
        selection
    }

    /// An exit may send now: the one chosen, with the send counted on it.
    fn sent_now(&mut self, p: &mut Pacing, exits: &mut [ExitSlot], host: &str) -> usize {
        match self.choose(p, exits, host) {
            Selection::Exit(i) => i,
            other => panic!("{host} may be sent to now, but the choice is {other:?}"),
        }
    }

    /// How long until an exit may send, waiting as the dispatch does (a wait, then a
    /// new look), and sent through which exit.
    async fn sent_after(
        &mut self,
        p: &mut Pacing,
        exits: &mut [ExitSlot],
        host: &str,
    ) -> (Duration, usize) {
        let start = crate::clock::now();
        for _ in 0..10 {
            match self.choose(p, exits, host) {
                Selection::Exit(i) => return (crate::clock::now() - start, i),
                Selection::Wait(d) => tokio::time::advance(d).await,
                other => panic!("expected a wait, got {other:?}"),
            }
        }
        panic!("not sent after ten waits");
    }

    /// The send through exit `i` ended.
    fn done(&mut self, exits: &mut [ExitSlot], i: usize) {
        self.active[i] -= 1;
        exits[i].share.release();
    }
}

fn wait(s: Selection) -> Duration {
    match s {
        Selection::Wait(d) => d,
        other => panic!("expected a wait, got {other:?}"),
    }
}

#[actix_rt::test]
async fn a_retry_after_binds_the_host_budget_until_it_ends() {
    let (mut p, mut exits) = part(settings(Scope::Auto, Algorithm::Aimd));
    let mut h = Host::default();
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    // An exit's own lane is unpaced until the limiter gives it a rate: the pause goes on
    // the host's budget, which every exit draws on.
    let until = crate::clock::now() + Duration::from_secs(2);
    assert_eq!(
        h.pacing.pause(i, until, crate::clock::now(), false),
        Some((false, None))
    );
    // Not before the pause ends, and as it ends: the site named when it takes a request
    // again (no interval on top).
    let (after, i) = h.sent_after(&mut p, &mut exits, "a.test").await;
    assert!(
        after >= Duration::from_secs(2) && after < Duration::from_millis(2050),
        "{after:?}"
    );
    h.done(&mut exits, i);
    // Then at the host's pace (10 req/s): its saved-up burst is gone.
    let (after, i) = h.sent_after(&mut p, &mut exits, "a.test").await;
    assert!(after >= Duration::from_millis(99), "{after:?}");
    h.done(&mut exits, i);
    // Another host is not paused by it.
    let mut other = Host::default();
    other.sent_now(&mut p, &mut exits, "b.test");
}

#[actix_rt::test]
async fn an_exit_lane_with_a_rate_takes_its_own_retry_after() {
    let (mut p, mut exits) = part(settings(Scope::Auto, Algorithm::Aimd));
    let mut h = Host::default();
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    let host: Arc<str> = Arc::from("a.test");
    let lane = LimitKey::exit_lane(&exits[i].name, &host);
    let now = crate::clock::now();
    // The limiter's first rate for the lane gives it a pacer.
    assert_eq!(
        p.set_interval(&lane, (Duration::from_millis(10), None), i, now),
        None
    );
    let until = now + Duration::from_secs(3);
    assert_eq!(h.pacing.pause(i, until, now, false), Some((true, None)));
    // The other exit may still send: the pause is the lane's, not the host's.
    tokio::time::advance(Duration::from_millis(200)).await;
    let j = h.sent_now(&mut p, &mut exits, "a.test");
    assert_ne!(i, j);
    h.done(&mut exits, j);
    // A second pause reports the first.
    assert_eq!(
        h.pacing.pause(i, now, now, false),
        Some((true, Some(until)))
    );
}

#[actix_rt::test]
async fn a_used_up_quota_pauses_the_host_budget_where_a_retry_after_binds_the_exit() {
    let (mut p, mut exits) = part(settings(Scope::Auto, Algorithm::Aimd));
    let mut h = Host::default();
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    // The limiter says the host's Retry-After binds the exit that read it.
    let host: Arc<str> = Arc::from("a.test");
    p.bind_retry_after(&LimitKey::new(Scope::Auto, &exits[i].name, &host), true);
    let now = crate::clock::now();
    let until = now + Duration::from_secs(2);
    assert_eq!(h.pacing.pause(i, until, now, false), Some((true, None)));
    // A quota is the host's: its pause goes on the budget every exit draws on.
    assert_eq!(h.pacing.pause(i, until, now, true), Some((false, None)));
    let (after, j) = h.sent_after(&mut p, &mut exits, "a.test").await;
    assert!(after >= Duration::from_secs(2), "{after:?}");
    h.done(&mut exits, j);
}

#[actix_rt::test]
async fn the_limiters_interval_paces_the_key() {
    let (mut p, mut exits) = part(settings(Scope::Host, Algorithm::Aimd));
    let mut h = Host::default();
    let host: Arc<str> = Arc::from("a.test");
    let key = LimitKey::new(Scope::Host, &exits[0].name, &host);
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    let now = crate::clock::now();
    let pause = now + Duration::from_secs(1);
    // Half a second between requests, and a pause of a second first.
    assert_eq!(
        p.set_interval(&key, (Duration::from_millis(500), Some(pause)), 0, now),
        Some(None)
    );
    // The pause, then one interval: the saved-up burst is gone when it ends.
    let (after, i) = h.sent_after(&mut p, &mut exits, "a.test").await;
    assert!(
        after >= Duration::from_secs(1) && after <= Duration::from_millis(1500),
        "{after:?}"
    );
    h.done(&mut exits, i);
    let d = wait(h.choose(&mut p, &mut exits, "a.test"));
    assert!(
        d > Duration::from_millis(400) && d <= Duration::from_millis(500),
        "{d:?}"
    );
    let intervals = p.intervals(&exits[0].name);
    assert_eq!(
        intervals,
        vec![("a.test".to_owned(), Duration::from_millis(500))]
    );
    // A key nobody paces here is not made up for a rate alone, nor for a pause over.
    let unknown = LimitKey::new(Scope::Host, &exits[0].name, &Arc::from("b.test"));
    assert_eq!(
        p.set_interval(&unknown, (Duration::from_millis(1), None), 0, now),
        None
    );
    assert_eq!(
        p.set_interval(&unknown, (Duration::from_millis(1), Some(now)), 0, now),
        None
    );
    // A pause still to come is kept: the first request to the host waits for it.
    let now = crate::clock::now();
    let pause = now + Duration::from_secs(1);
    assert_eq!(
        p.set_interval(&unknown, (Duration::from_millis(1), Some(pause)), 0, now),
        Some(None)
    );
    let (after, _) = Host::default()
        .sent_after(&mut p, &mut exits, "b.test")
        .await;
    assert!(after >= Duration::from_secs(1), "{after:?}");
}

#[actix_rt::test]
async fn a_hosts_shortest_interval_is_its_fastest_paced_key() {
    let (mut p, mut exits) = part(settings(Scope::Auto, Algorithm::Aimd));
    let mut h = Host::default();
    let host: Arc<str> = Arc::from("a.test");
    // Before any choice the host has no key at all.
    assert_eq!(h.pacing.shortest_interval(), None);
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    // Scope `auto`: the host's budget starts at `initial_rps` (10/s); the exits' own
    // lanes are not paced yet.
    assert_eq!(
        h.pacing.shortest_interval(),
        Some(Duration::from_millis(100))
    );
    let now = crate::clock::now();
    let lane = LimitKey {
        exit: Some(Arc::clone(&exits[1].name)),
        host: Some(Arc::clone(&host)),
    };
    p.set_interval(&lane, (Duration::from_millis(20), None), 1, now);
    assert_eq!(
        h.pacing.shortest_interval(),
        Some(Duration::from_millis(20)),
        "a lane paced faster than the budget"
    );
}

#[actix_rt::test]
async fn redis_away_paces_a_share_and_the_shared_budget_still_sees_the_whole() {
    let mut s = settings(Scope::Host, Algorithm::Aimd);
    s.redis.processes = 4;
    s.limiter.min_rps = 0.5;
    let (mut p, exits) = part(s);
    let host: Arc<str> = Arc::from("a.test");
    let now = crate::clock::now();
    let state = p.key((0, &exits[0].name), &host, now);
    let key = LimitKey::new(Scope::Host, &exits[0].name, &host);
    assert_eq!(p.shared_quota(&state), (10.0, 1));
    assert!(
        p.shared_down(&key, now),
        "the first failure starts the fallback"
    );
    assert!(!p.shared_down(&key, now), "once");
    let local = state.borrow().limiter.as_ref().map(|l| l.quota().rps);
    assert_eq!(
        local,
        Some(2.5),
        "a quarter of 10 req/s for one of 4 processes"
    );
    assert_eq!(
        p.shared_quota(&state),
        (10.0, 1),
        "Redis is asked for the whole"
    );
    // The limiter's new rate while Redis is away: the whole is remembered, the share paced.
    p.set_interval(&key, (Duration::from_millis(50), None), 0, now);
    assert_eq!(p.shared_quota(&state), (20.0, 1));
    let local = state.borrow().limiter.as_ref().map(|l| l.quota().rps);
    assert_eq!(local, Some(5.0));
    // Redis answers again: the whole rate is back, and a wait it asks for binds.
    let until = now + Duration::from_secs(2);
    p.shared_wait(&key, until, now);
    let local = state.borrow().limiter.as_ref().map(|l| l.quota().rps);
    assert_eq!(local, Some(20.0));
    assert_eq!(state.borrow_mut().ready_in(now), Duration::from_secs(2));
    // A wait of the budget's, not a pause of the site's (see `paused_for`).
    assert_eq!(state.borrow().pause_until, None);
    assert!(
        p.shared_down(&key, now),
        "a new outage starts a new fallback"
    );
    p.shared_allowed(&key, now);
    assert_eq!(state.borrow().fallback_from, None);
}

#[actix_rt::test]
async fn per_host_connections_spread_a_host_over_the_exits() {
    let mut s = settings(Scope::Host, Algorithm::None);
    s.crawler.per_host_connections = 1;
    let (mut p, mut exits) = part(s);
    let mut h = Host::default();
    let a = h.sent_now(&mut p, &mut exits, "a.test");
    let b = h.sent_now(&mut p, &mut exits, "a.test");
    assert_ne!(a, b);
    assert_eq!(h.choose(&mut p, &mut exits, "a.test"), Selection::Busy);
    // Another host's count is its own.
    let mut other = Host::default();
    other.sent_now(&mut p, &mut exits, "b.test");
    h.done(&mut exits, a);
    assert_eq!(h.choose(&mut p, &mut exits, "a.test"), Selection::Exit(a));
}

#[actix_rt::test]
async fn a_forgotten_host_starts_again_and_a_late_rate_makes_its_key_at_that_rate() {
    let (mut p, mut exits) = part(settings(Scope::Auto, Algorithm::Aimd));
    let host: Arc<str> = Arc::from("a.test");
    let names: Vec<Arc<str>> = exits.iter().map(|e| Arc::clone(&e.name)).collect();
    let key = LimitKey::new(Scope::Auto, &exits[0].name, &host);
    let now = crate::clock::now();
    {
        let mut h = Host::default();
        let i = h.sent_now(&mut p, &mut exits, "a.test");
        h.done(&mut exits, i);
        // Taught a second between requests.
        p.set_interval(&key, (Duration::from_secs(1), None), 0, now);
        let d = wait(h.choose(&mut p, &mut exits, "a.test"));
        assert!(d > Duration::from_millis(900), "{d:?}");
    }
    // Forgotten with nothing queued: a new entry starts where the prior says (10 req/s).
    p.forget(&host, names.iter().cloned());
    let mut h = Host::default();
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    let d = wait(h.choose(&mut p, &mut exits, "a.test"));
    assert!(d <= Duration::from_millis(100), "{d:?}");

    // The limiter's word on a host forgotten here meanwhile makes its key at that rate
    // (and its pause), where it was dropped.
    p.forget(&host, names.iter().cloned());
    let pause = now + Duration::from_secs(5);
    assert_eq!(
        p.set_interval(&key, (Duration::from_secs(2), Some(pause)), 0, now),
        Some(None)
    );
    let mut h = Host::default();
    let d = wait(h.choose(&mut p, &mut exits, "a.test"));
    assert!(d >= Duration::from_secs(4), "the pause holds: {d:?}");
}

#[actix_rt::test]
async fn a_host_forgotten_while_it_has_work_starts_again_in_place() {
    let (mut p, mut exits) = part(settings(Scope::Auto, Algorithm::Aimd));
    let host: Arc<str> = Arc::from("a.test");
    let names: Vec<Arc<str>> = exits.iter().map(|e| Arc::clone(&e.name)).collect();
    let mut h = Host::default();
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    let now = crate::clock::now();
    // Exit lanes of their own, and a Retry-After that binds the exit.
    for (j, name) in names.iter().enumerate() {
        let lane = LimitKey::exit_lane(name, &host);
        p.set_interval(&lane, (Duration::from_secs(3), None), j, now);
    }
    let key = LimitKey::new(Scope::Auto, &names[0], &host);
    p.bind_retry_after(&key, true);
    let lanes_paced = |h: &Host| {
        h.pacing
            .keys
            .iter()
            .map(|k| k.as_ref().is_some_and(|k| k.borrow().limiter.is_some()))
            .collect::<Vec<_>>()
    };
    let binds_exit = |h: &Host| {
        h.pacing
            .host_key
            .as_ref()
            .is_some_and(|k| k.borrow().retry_after_binds_exit)
    };
    assert_eq!(lanes_paced(&h), [true, true]);
    assert!(binds_exit(&h));
    // Its entry holds the keys: they start again where they are, as a new policy's.
    p.restart(&host, names.iter().cloned());
    assert_eq!(lanes_paced(&h), [false, false], "exit lanes unpaced again");
    assert!(!binds_exit(&h), "a Retry-After binds the host again");
}

#[actix_rt::test]
async fn the_limiter_is_told_each_host_whose_pacing_begins_or_goes_on_past_its_forgetting() {
    let (mut p, mut exits) = part(settings(Scope::Auto, Algorithm::Aimd));
    let host: Arc<str> = Arc::from("a.test");
    let names: Vec<Arc<str>> = exits.iter().map(|e| Arc::clone(&e.name)).collect();
    let mut h = Host::default();
    let i = h.sent_now(&mut p, &mut exits, "a.test");
    h.done(&mut exits, i);
    assert_eq!(p.take_met(), [Arc::clone(&host)], "its pacing began");
    // Its entry gone and back (its keys kept): nothing new.
    let mut again = Host::default();
    let (_, i) = again.sent_after(&mut p, &mut exits, "a.test").await;
    again.done(&mut exits, i);
    assert!(p.take_met().is_empty());
    p.restart(&host, names.iter().cloned());
    assert_eq!(
        p.take_met(),
        [Arc::clone(&host)],
        "kept past its forgetting"
    );
    p.forget(&host, names.iter().cloned());
    let mut back = Host::default();
    let (_, i) = back.sent_after(&mut p, &mut exits, "a.test").await;
    back.done(&mut exits, i);
    assert_eq!(p.take_met(), [host], "met again once forgotten");
}

#[actix_rt::test]
async fn under_the_other_scopes_the_limiter_forgets_no_host_and_is_told_none() {
    let (mut p, mut exits) = part(settings(Scope::Host, Algorithm::Aimd));
    let i = Host::default().sent_now(&mut p, &mut exits, "a.test");
    exits[i].share.release();
    assert!(p.take_met().is_empty());
}
