use std::sync::Arc;

use actix::clock::Instant;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::Queues;
use crate::messages::Fetch;
use crate::scheduler::pending::Pending;

fn pending(host: &str, path: &str) -> Pending {
    Pending {
        fetch: Fetch::get(format!("http://{host}/{path}")),
        host: Arc::from(host),
        reply: None,
        done: Counter::default(),
        slot: None,
        attempts: 0,
        throttled: 0,
        awaits_budget: false,
        excluded: Default::default(),
        arrived: Instant::now(),
        uri: None,
        local_failure: None,
        local: None,
        local_passes: false,
        waited: false,
        backlog: 0,
        last_exit: None,
        last_exit_name: None,
        avoid: None,
        span: None,
    }
}

/// One dispatch round as the scheduler runs it, sending whatever it visits through exit
/// 0: the URLs in the order they are served.
fn serve_all(q: &mut Queues) -> Vec<String> {
    let mut served = Vec::new();
    let mut to_visit = q.round();
    while to_visit > 0 {
        let Some(host) = q.next_host() else { break };
        to_visit -= 1;
        match q.pop(&host, 0) {
            Some((p, last)) => {
                served.push(p.fetch.url.clone());
                if !last {
                    q.revisit(host);
                }
                to_visit = q.round();
            }
            None => q.leave(&host),
        }
    }
    served
}

#[test]
fn hosts_take_turns_one_fetch_each() {
    let mut q = Queues::new(16, Gauge::default());
    for path in ["1", "2", "3"] {
        q.push(pending("a", path));
    }
    q.push(pending("b", "1"));
    q.push(pending("c", "1"));
    q.push(pending("c", "2"));
    assert_eq!(
        serve_all(&mut q),
        [
            "http://a/1",
            "http://b/1",
            "http://c/1",
            "http://a/2",
            "http://c/2",
            "http://a/3"
        ]
    );
    assert_eq!(q.len(), 0);
    assert!(!q.has_waiting());
}

#[test]
fn a_busy_host_does_not_starve_a_late_one() {
    let mut q = Queues::new(1024, Gauge::default());
    for i in 0..100 {
        q.push(pending("busy", &i.to_string()));
    }
    // Served once, then the late host comes: it is served next, not after 99 more.
    let host = q.next_host().unwrap();
    let (first, _) = q.pop(&host, 0).unwrap();
    assert_eq!(first.fetch.url, "http://busy/0");
    q.revisit(host);
    q.push(pending("late", "1"));
    let served = serve_all(&mut q);
    assert_eq!(served[..2], ["http://busy/1", "http://late/1"]);
    assert_eq!(served.len(), 100);
}

#[test]
fn a_requeued_fetch_goes_first() {
    let mut q = Queues::new(16, Gauge::default());
    q.push(pending("a", "1"));
    q.push(pending("b", "1"));
    let host = q.next_host().unwrap();
    let (p, last) = q.pop(&host, 0).unwrap();
    assert!(last);
    q.push_front(p);
    assert_eq!(serve_all(&mut q), ["http://a/1", "http://b/1"]);
}

#[test]
fn counts_follow_pushes_pops_and_releases() {
    let depth = Gauge::default();
    let mut q = Queues::new(16, depth.clone());
    q.push(pending("a", "1"));
    q.push(pending("a", "2"));
    q.push(pending("b", "1"));
    assert_eq!((q.len(), depth.get()), (3, 3));
    let (_p, last) = q.pop("a", 2).unwrap();
    assert!(!last);
    assert_eq!(q.host("a").unwrap().active, [0, 0, 1]);
    assert_eq!((q.len(), depth.get()), (2, 2));
    assert_eq!(q.drain_host("a").len(), 1);
    assert_eq!((q.len(), depth.get()), (1, 1));
    // "a" stays known while its fetch is in flight, then goes once released.
    q.leave(&Arc::from("a"));
    assert!(q.host("a").is_some());
    q.release(2, "a");
    assert!(q.host("a").is_none());
    assert_eq!(q.close().len(), 1);
    assert_eq!((q.len(), depth.get()), (0, 0));
}

#[test]
fn slots_bound_the_fetches_waiting_and_leaving_the_queue_frees_one() {
    let mut q = Queues::new(2, Gauge::default());
    let slots = Arc::clone(q.slots());
    let take = |host: &str| {
        let mut p = pending(host, "1");
        p.slot = Some(Arc::clone(&slots).try_acquire_owned().ok()?);
        Some(p)
    };
    let a = take("a").unwrap();
    let b = take("b").unwrap();
    assert!(take("c").is_none(), "a third fetch waits for a slot");
    q.push(a);
    q.push(b);
    assert_eq!(q.slots().available_permits(), 0);
    let (_sent, _) = q.pop("a", 0).unwrap();
    assert_eq!(q.slots().available_permits(), 1);
    // A shutdown closes them: a fetch waiting for a slot is answered.
    drop(q.close());
    assert!(q.slots().is_closed());
}

#[test]
fn fetches_their_callers_gave_up_on_leave_the_queue_with_their_slots() {
    let depth = Gauge::default();
    let mut q = Queues::new(3, depth.clone());
    let mut waiting = Vec::new();
    for (host, path) in [("a", "1"), ("a", "2"), ("b", "1")] {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut p = pending(host, path);
        p.reply = Some(tx);
        p.slot = Some(Arc::clone(q.slots()).try_acquire_owned().expect("a slot"));
        q.push(p);
        waiting.push(rx);
    }
    assert_eq!(q.slots().available_permits(), 0);
    // The callers of a/1 and b/1 give up; a/2's still waits.
    let a2 = waiting.remove(1);
    drop(waiting);
    assert_eq!(q.withdraw_abandoned(), 2);
    assert_eq!((q.len(), depth.get()), (1, 1));
    assert_eq!(q.slots().available_permits(), 2);
    assert_eq!(serve_all(&mut q), ["http://a/2"]);
    drop(a2);
}
