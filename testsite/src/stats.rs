//! What the site counted: per peer and in total, the bans it started, the in-flight
//! distribution, and the request log's records.
//!
//! Why on the server: a crawler's claims ("never exceeded the limit", "never got banned",
//! "kept the queue short") are about what the *site* saw, so tests assert on these counts
//! rather than on the crawler's own bookkeeping.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::fault::Fault;
use crate::HEALTH_PATH;

/// What the site saw from one peer IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerStats {
    /// TCP connections accepted (including ones closed at once because the peer fails).
    pub connections: u64,
    /// HTTP requests received (every status).
    pub requests: u64,
    /// Served: 200 (including `/health` when healthy; a [`SiteConfig::pages`] generator's
    /// answer counts here whatever its status). On a [`Limit::Workers`] site a request
    /// counts here when it gets its worker.
    ///
    /// [`SiteConfig::pages`]: crate::SiteConfig::pages
    /// [`Limit::Workers`]: crate::Limit::Workers
    pub ok: u64,
    /// Refused by the rate limit (token bucket or window), whatever the status —
    /// 429 or [`SiteConfig::reject_status`](crate::SiteConfig::reject_status) — plus 429s of
    /// the fault listener.
    pub limited: u64,
    /// Answered during a [`Limit::Ban`](crate::Limit::Ban) ban (including the request that
    /// started it).
    pub banned: u64,
    /// Answered 503 because the peer was failing, 500 from `/health`, 503 after a
    /// [`Limit::Workers`](crate::Limit::Workers) `max_wait`, or ≥ 500 from the fault listener.
    pub failed: u64,
    /// Connections closed without an answer because the peer was failing ([`FailMode::Close`]);
    /// on the fault listener, requests that got no status line (close, hang, garbage).
    ///
    /// [`FailMode::Close`]: crate::FailMode::Close
    pub closed: u64,
    /// Requests in flight right now (received, answer not yet sent).
    pub in_flight: u64,
    /// The most requests ever in flight at once from this peer.
    pub peak_in_flight: u64,
    /// Arrival of this peer's first request other than `/health` (both listeners).
    pub first_request: Option<Instant>,
    /// Arrival of this peer's last request other than `/health` (both listeners).
    pub last_request: Option<Instant>,
}

/// One pause a site that holds clients to its `Retry-After` announced
/// ([`HoldRetryAfter`](crate::HoldRetryAfter)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseRecord {
    /// The peer held off; `None` when the pause holds every client
    /// ([`HoldRetryAfter::Site`](crate::HoldRetryAfter::Site)).
    pub peer: Option<IpAddr>,
    /// When the pause started (the arrival of the request refused with it).
    pub start: Instant,
    /// When it ends (`start` plus the `Retry-After` sent).
    pub until: Instant,
}

/// One ban a [`Limit::Ban`](crate::Limit::Ban) site started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BanRecord {
    /// The banned peer; `None` for a site-wide ban (`per_peer: false`).
    pub peer: Option<IpAddr>,
    /// When the ban started (the arrival of the request that exceeded the count).
    pub start: Instant,
    /// When it ends.
    pub until: Instant,
}

/// A snapshot of everything the site counted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SiteStats {
    /// Requests received from all peers.
    pub requests: u64,
    /// [`PeerStats::ok`] of all peers.
    pub ok: u64,
    /// [`PeerStats::limited`] of all peers: rate-limit refusals, whatever their status.
    pub limited: u64,
    /// [`PeerStats::banned`] of all peers.
    pub banned: u64,
    /// [`PeerStats::failed`] of all peers.
    pub failed: u64,
    /// Requests in flight right now, all peers.
    pub in_flight: u64,
    /// The most requests ever in flight at once, all peers together.
    pub peak_in_flight: u64,
    /// The in-flight distribution of the main listener: entry `n` is how many requests
    /// found `n` in flight when they arrived, themselves included (so entry 0 stays 0).
    /// Read it with [`SiteStats::in_flight_quantile`].
    pub in_flight_hist: Vec<u64>,
    /// Arrival of the first request other than `/health`, all peers (both listeners).
    pub first_request: Option<Instant>,
    /// Arrival of the last request other than `/health`, all peers (both listeners).
    /// `/health` is left out of both so that a health monitor polling before and after a
    /// crawl does not stretch the span goodput is computed over.
    pub last_request: Option<Instant>,
    /// Every ban started, in order.
    pub bans: Vec<BanRecord>,
    /// Every pause announced and held ([`HoldRetryAfter`](crate::HoldRetryAfter)), in order.
    pub pauses: Vec<PauseRecord>,
    /// Per peer IP.
    pub peers: BTreeMap<IpAddr, PeerStats>,
    /// Body bytes the fault listener wrote for [`Fault::BigBody`] and [`Fault::Trickle`]
    /// (what a client that cuts bodies off made the site send).
    pub fault_body_bytes: u64,
}

impl SiteStats {
    /// The stats of one peer (all zero if it never connected).
    pub fn peer(&self, ip: IpAddr) -> PeerStats {
        self.peers.get(&ip).copied().unwrap_or_default()
    }

    /// The bans of one peer (site-wide bans are not included), in order.
    pub fn bans_of(&self, ip: IpAddr) -> Vec<BanRecord> {
        self.bans
            .iter()
            .filter(|b| b.peer == Some(ip))
            .copied()
            .collect()
    }

    /// The in-flight count at arrival that a fraction `q` (in [0, 1]) of arrivals found or
    /// less (nearest rank; 0 when nothing arrived yet).
    pub fn in_flight_quantile(&self, q: f64) -> u64 {
        let total: u64 = self.in_flight_hist.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (n, &count) in self.in_flight_hist.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return n as u64;
            }
        }
        self.in_flight_hist.len().saturating_sub(1) as u64
    }

    /// [`SiteStats::in_flight_quantile`] at 0.99: how deep the site's queue got, apart from
    /// the rarest moments.
    pub fn in_flight_p99(&self) -> u64 {
        self.in_flight_quantile(0.99)
    }

    /// The span between the first and the last request (other than `/health`), zero
    /// before two arrived.
    pub fn span(&self) -> Duration {
        match (self.first_request, self.last_request) {
            (Some(first), Some(last)) => last.saturating_duration_since(first),
            _ => Duration::ZERO,
        }
    }

    /// Count a request that arrived at `now` (both listeners); the peer's entry is returned
    /// for the listener's own counts.
    pub(crate) fn arrive(&mut self, ip: IpAddr, path: &str, now: Instant) -> &mut PeerStats {
        self.requests += 1;
        let timed = path != HEALTH_PATH;
        if timed {
            self.first_request.get_or_insert(now);
            self.last_request = Some(self.last_request.map_or(now, |t| t.max(now)));
        }
        let peer = self.peers.entry(ip).or_default();
        peer.requests += 1;
        if timed {
            peer.first_request.get_or_insert(now);
            peer.last_request = Some(peer.last_request.map_or(now, |t| t.max(now)));
        }
        peer
    }

    /// Count what a request of `ip` got, in the peer's and the total counters.
    pub(crate) fn outcome(&mut self, ip: IpAddr, outcome: Outcome) {
        let peer = self.peers.entry(ip).or_default();
        let (total, mine) = match outcome {
            Outcome::Ok => (&mut self.ok, &mut peer.ok),
            Outcome::Limited => (&mut self.limited, &mut peer.limited),
            Outcome::Banned => (&mut self.banned, &mut peer.banned),
            Outcome::Failed => (&mut self.failed, &mut peer.failed),
            Outcome::Closed => {
                peer.closed += 1;
                return;
            }
            Outcome::Other => return,
        };
        *total += 1;
        *mine += 1;
    }

    /// Main listener: count a request as in flight and sample the in-flight distribution.
    pub(crate) fn enter(&mut self, ip: IpAddr) {
        self.in_flight += 1;
        self.peak_in_flight = self.peak_in_flight.max(self.in_flight);
        let n = self.in_flight as usize;
        if self.in_flight_hist.len() <= n {
            self.in_flight_hist.resize(n + 1, 0);
        }
        self.in_flight_hist[n] += 1;
        let peer = self.peers.entry(ip).or_default();
        peer.in_flight += 1;
        peer.peak_in_flight = peer.peak_in_flight.max(peer.in_flight);
    }

    /// Main listener: the answer of a request of `ip` was sent or abandoned.
    pub(crate) fn leave(&mut self, ip: IpAddr) {
        self.in_flight -= 1;
        if let Some(peer) = self.peers.get_mut(&ip) {
            peer.in_flight -= 1;
        }
    }
}

/// Which counter an answer goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Limited,
    Banned,
    Failed,
    Closed,
    /// Counted as a request only (e.g. a fault listener redirect).
    Other,
}

/// One answered request, as the site saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The peer's IP (the client's source address).
    pub peer: IpAddr,
    /// The request method (empty on the fault listener).
    pub method: String,
    /// The request headers, names in lowercase (main listener only; empty on the fault
    /// listener).
    pub headers: Vec<(String, String)>,
    /// The request path (no query).
    pub path: String,
    /// When the request head had arrived.
    pub arrived: Instant,
    /// The status code sent (0: no status line, e.g. [`Fault::Close`]).
    pub status: u16,
    /// The fault acted out (fault listener only; `None` on the main listener).
    pub fault: Option<Fault>,
    /// The delay the site added to this answer on purpose: the latency, scaled by the
    /// request's factor, plus on a [`Limit::Workers`](crate::Limit::Workers) site the
    /// service time it held a worker for. Zero on the fault listener.
    pub latency: Duration,
    /// How long it waited for a worker ([`Limit::Workers`](crate::Limit::Workers)) or was
    /// held back ([`Limit::Delayed`](crate::Limit::Delayed)); zero elsewhere.
    pub queued: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut s = SiteStats::default();
        assert_eq!(s.in_flight_p99(), 0);
        // 98 arrivals found 1 in flight, one found 2, one found 9.
        s.in_flight_hist = vec![0, 98, 1, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(s.in_flight_quantile(0.5), 1);
        assert_eq!(s.in_flight_quantile(0.98), 1);
        assert_eq!(s.in_flight_p99(), 2);
        assert_eq!(s.in_flight_quantile(1.0), 9);
        assert_eq!(s.in_flight_quantile(0.0), 1);
    }

    #[test]
    fn enter_samples_the_count_including_the_arrival() {
        let ip = IpAddr::from([127, 0, 0, 2]);
        let mut s = SiteStats::default();
        s.enter(ip);
        s.enter(ip);
        s.leave(ip);
        s.enter(ip);
        assert_eq!(s.in_flight_hist, vec![0, 1, 2]);
        assert_eq!((s.in_flight, s.peak_in_flight), (2, 2));
        assert_eq!(s.peer(ip).peak_in_flight, 2);
    }

    #[test]
    fn health_does_not_stretch_the_span() {
        let ip = IpAddr::from([127, 0, 0, 2]);
        let t0 = Instant::now();
        let mut s = SiteStats::default();
        s.arrive(ip, HEALTH_PATH, t0);
        s.arrive(ip, "/a", t0 + Duration::from_millis(10));
        s.arrive(ip, "/b", t0 + Duration::from_millis(30));
        s.arrive(ip, HEALTH_PATH, t0 + Duration::from_millis(90));
        assert_eq!(s.requests, 4);
        assert_eq!(s.span(), Duration::from_millis(20));
        assert_eq!(
            s.peer(ip).first_request,
            Some(t0 + Duration::from_millis(10))
        );
    }
}
