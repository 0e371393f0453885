//! The hosts' queues and the round-robin over the hosts with queued fetches.
//!
//! One entry per host holds its queue, its in-flight counts by exit and its pacing, so
//! that one map lookup per host visit finds all three: the per-fetch path makes one
//! lookup, not several. The queue's slots (backpressure) live here too: a fetch holds one
//! from before it joins a queue until it leaves it.

use std::collections::VecDeque;
use std::sync::Arc;

use exitcrawl::select::Family;
use foldhash::HashMap;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Semaphore;

use super::pacing::HostPacing;
use super::pending::Pending;

/// One host as the scheduler sees it.
pub(super) struct HostState {
    queue: VecDeque<Pending>,
    /// The family of the host when it is an address literal, read once: the exit choice
    /// asks it for every fetch.
    pub(super) family: Option<Family>,
    /// Fetches in flight to this host, by exit index.
    pub(super) active: Vec<u32>,
    /// The host is in the round-robin.
    ordered: bool,
    /// Its pacing, found once instead of per visit.
    pub(super) pacing: HostPacing,
}

impl HostState {
    fn new(host: &str) -> Self {
        Self {
            queue: VecDeque::new(),
            family: Family::of_host(host),
            active: Vec::new(),
            ordered: false,
            pacing: HostPacing::default(),
        }
    }

    /// Nothing queued, nothing in flight, not in the round-robin: the entry can go.
    pub(super) fn idle(&self) -> bool {
        !self.ordered && self.queue.is_empty() && self.active.iter().all(|n| *n == 0)
    }

    pub(super) fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The fetch first in line, beside the host's counts and pacing (borrowed apart so
    /// that the exit choice can read the head while it updates the rest).
    pub(super) fn parts(&mut self) -> (Option<&mut Pending>, &mut Vec<u32>, &mut HostPacing) {
        (self.queue.front_mut(), &mut self.active, &mut self.pacing)
    }
}

/// The hosts' queues, the round-robin over them, and the queue's slots.
pub(super) struct Queues {
    /// Hosts with fetches queued or in flight.
    hosts: HashMap<Arc<str>, HostState>,
    /// Round-robin over the hosts with queued fetches.
    order: VecDeque<Arc<str>>,
    /// Fetches waiting in the queues, mirrored in the queue-depth gauge.
    queued: usize,
    depth: Gauge,
    slots: Arc<Semaphore>,
}

/// `host`'s entry in `hosts`, made when it has none (a field apart, so that the caller
/// may touch the round-robin while it holds the entry).
fn entry_in<'a>(hosts: &'a mut HashMap<Arc<str>, HostState>, host: &Arc<str>) -> &'a mut HostState {
    hosts
        .entry(Arc::clone(host))
        .or_insert_with(|| HostState::new(host))
}

impl Queues {
    /// Queues for at most `capacity` waiting fetches; `depth` follows their number.
    pub(super) fn new(capacity: usize, depth: Gauge) -> Self {
        Self {
            hosts: HashMap::default(),
            order: VecDeque::new(),
            queued: 0,
            depth,
            slots: Arc::new(Semaphore::new(capacity)),
        }
    }

    /// The queue's slots: a fetch takes one before it is handed in to be queued.
    pub(super) fn slots(&self) -> &Arc<Semaphore> {
        &self.slots
    }

    /// Fetches waiting in the queues (the gauge shows the same outside tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.queued
    }

    /// Some host has a fetch waiting.
    pub(super) fn has_waiting(&self) -> bool {
        !self.order.is_empty()
    }

    fn count(&mut self, delta: isize) {
        self.queued = self.queued.saturating_add_signed(delta);
        self.depth.set(self.queued as i64);
    }

    /// The name a known host is kept under (sharing it saves an allocation per fetch).
    pub(super) fn known(&self, host: &str) -> Option<&Arc<str>> {
        self.hosts.get_key_value(host).map(|(k, _)| k)
    }

    pub(super) fn host(&self, host: &str) -> Option<&HostState> {
        self.hosts.get(host)
    }

    pub(super) fn host_mut(&mut self, host: &str) -> Option<&mut HostState> {
        self.hosts.get_mut(host)
    }

    /// The host's entry, made when it has none. Look it up with [`Self::host_mut`]
    /// first: for a host already there (the common case) that costs no reference-count
    /// round trip on its name.
    pub(super) fn entry(&mut self, host: &Arc<str>) -> &mut HostState {
        entry_in(&mut self.hosts, host)
    }

    /// A new fetch at the back of its host's queue; the host joins the round-robin's end.
    pub(super) fn push(&mut self, p: Pending) {
        let host = Arc::clone(&p.host);
        let state = entry_in(&mut self.hosts, &host);
        state.queue.push_back(p);
        if !state.ordered {
            state.ordered = true;
            self.order.push_back(host);
        }
        self.count(1);
    }

    /// A fetch back at the head of its host's queue (a retry, a wait the shared limit
    /// asked for); the host is served first.
    pub(super) fn push_front(&mut self, p: Pending) {
        let host = Arc::clone(&p.host);
        let state = entry_in(&mut self.hosts, &host);
        state.queue.push_front(p);
        if !state.ordered {
            state.ordered = true;
            self.order.push_front(host);
        }
        self.count(1);
    }

    /// Hosts in the round-robin: how many visits one round makes.
    pub(super) fn round(&self) -> usize {
        self.order.len()
    }

    /// The next host that may be served; hand it back with [`Self::revisit`] or
    /// [`Self::leave`] unless [`Self::pop`] took its last fetch.
    pub(super) fn next_host(&mut self) -> Option<Arc<str>> {
        self.order.pop_front()
    }

    /// The host goes to the round-robin's end.
    pub(super) fn revisit(&mut self, host: Arc<str>) {
        self.order.push_back(host);
    }

    /// The host has nothing queued: out of the round-robin, and forgotten when idle.
    pub(super) fn leave(&mut self, host: &Arc<str>) {
        if let Some(state) = self.hosts.get_mut(host) {
            state.ordered = false;
            if state.idle() {
                self.hosts.remove(host);
            }
        }
    }

    /// Take the head of `host`'s queue to send through exit `exit`: counted in flight
    /// there, its queue slot freed, [`Pending::backlog`] set to what is left queued.
    /// Returns it and whether it was the last queued (the host then leaves the
    /// round-robin without another visit).
    pub(super) fn pop(&mut self, host: &str, exit: usize) -> Option<(Pending, bool)> {
        let state = self.hosts.get_mut(host)?;
        let mut p = state.queue.pop_front()?;
        if state.active.len() <= exit {
            state.active.resize(exit + 1, 0);
        }
        state.active[exit] += 1;
        let last = state.queue.is_empty();
        if last {
            state.ordered = false;
        }
        p.backlog = u32::try_from(state.queue.len()).unwrap_or(u32::MAX);
        // Leaves the queue: frees a slot for a waiting fetch.
        p.slot = None;
        self.count(-1);
        Some((p, last))
    }

    /// Take the head of `host`'s queue to answer it unsent.
    pub(super) fn pop_unsent(&mut self, host: &str) -> Option<Pending> {
        let p = self.hosts.get_mut(host)?.queue.pop_front()?;
        self.count(-1);
        Some(p)
    }

    /// Drop every queued fetch whose caller gave up on it: nobody reads its answer, and
    /// its queue slot goes back to a fetch waiting for one. Dropped, each counts as done,
    /// as one the dispatch finds abandoned at its host's queue head. A host left with
    /// nothing queued leaves the round-robin at its next visit. Returns how many went.
    pub(super) fn withdraw_abandoned(&mut self) -> usize {
        let mut gone = 0;
        for state in self.hosts.values_mut() {
            let before = state.queue.len();
            state.queue.retain(|p| !p.abandoned());
            gone += before - state.queue.len();
        }
        self.count(-(gone as isize));
        gone
    }

    /// Every fetch queued for `host`.
    pub(super) fn drain_host(&mut self, host: &str) -> Vec<Pending> {
        let drained: Vec<Pending> = match self.hosts.get_mut(host) {
            Some(state) => state.queue.drain(..).collect(),
            None => Vec::new(),
        };
        self.count(-(drained.len() as isize));
        drained
    }

    /// Every queued fetch, and no more slots (a shutdown). The hosts' in-flight counts
    /// stay until those fetches end.
    pub(super) fn close(&mut self) -> Vec<Pending> {
        self.slots.close();
        let mut queued = Vec::new();
        for state in self.hosts.values_mut() {
            queued.extend(state.queue.drain(..));
            state.ordered = false;
        }
        self.hosts.retain(|_, state| !state.idle());
        self.order.clear();
        self.queued = 0;
        self.depth.set(0);
        queued
    }

    /// Forget every host (in-flight counts included): what was in flight is cut off.
    pub(super) fn clear(&mut self) {
        self.hosts.clear();
    }

    /// The host's count for exit `i` undone (the counterpart of [`Self::pop`]'s); the
    /// host forgotten when idle.
    pub(super) fn release(&mut self, i: usize, host: &str) {
        if let Some(state) = self.hosts.get_mut(host) {
            if let Some(n) = state.active.get_mut(i) {
                *n = n.saturating_sub(1);
            }
            if state.idle() {
                self.hosts.remove(host);
            }
        }
    }

    /// Forget `host` when it has nothing queued or in flight.
    pub(super) fn forget_if_idle(&mut self, host: &str) {
        if self.hosts.get(host).is_some_and(HostState::idle) {
            self.hosts.remove(host);
        }
    }
}

#[cfg(test)]
#[path = "queues_tests.rs"]
mod tests;
