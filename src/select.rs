//! Which exit takes the next request.
//!
//! # Why least-loaded, relative to capacity
//!
//! Exits differ in how many connections they may hold (`max_concurrent`), so raw `active`
//! counts would starve a big exit and overload a small one. The selector picks the exit
//! with the lowest *fraction* of its slots in use, `active / max_concurrent`, compared by
//! integer cross-multiplication (`a.active × b.max < b.active × a.max`) so that no float
//! rounding can make two equal loads differ or make the choice platform-dependent.
//!
//! Ties are common (every idle exit has load 0). They are broken by `tie_break % n_ties`:
//! a caller passing an incrementing counter gets round-robin across equally loaded exits,
//! which spreads requests over source IPs instead of always hammering the first; and the
//! result stays a pure function of the inputs, so tests and simulations are reproducible.
//!
//! # Spreading a host over its exits
//!
//! Before load comes recency: among the exits that may send now, the one that sent to the
//! request's host longest ago goes first ([`Candidate::last_sent`]). A host's budget is
//! then spread evenly over the exits, each seeing the same spacing — which is what a site
//! that limits per client address strictly (nginx `limit_req` without `burst=`) accepts;
//! least-loaded alone would pick the same exit twice in a row whenever its answers came
//! back sooner. Callers that do not track recency pass 0 everywhere and get least-loaded.
//!
//! # Why `Wait` and `Busy` are different answers
//!
//! An exit that is paced for this host (`ready_in > 0`) will become usable after a known
//! time: the caller can set a timer ([`Selection::Wait`]). An exit at `max_concurrent`
//! becomes usable when one of its requests completes, which no timer predicts: the caller
//! should wait for a completion ([`Selection::Busy`]). When both kinds exist, `Wait` is
//! returned (a timer is certain to fire; the caller still wakes early on a completion).
//!
//! # Preferred exit
//!
//! A request may name an exit (e.g. to keep a session cookie on one IP). If that exit is
//! usable — available, not excluded, in the requested region — it is the *only* one
//! considered, and the answer may be `Wait`/`Busy` for it rather than switching IPs. If it
//! is down, excluded or in the wrong region, the request falls back to the others: a
//! session on a dead IP is lost anyway. A name that matches no exit at all is a
//! configuration or caller bug and is reported as [`NoExitReason::UnknownPreferred`].
//!
//! # A retry avoids the exit that failed it
//!
//! A fetch retried after an error (a reset, a timeout, a 5xx) names the exit its failed
//! attempt went through ([`Request::avoid`]): the retry goes through another exit while
//! one is eligible, waiting for it if it is paced or busy, and through the same exit only
//! when no other may take it. Why: an error may be the exit's own (its address refused
//! or reset by the site, a proxy failing) before health checks have seen it, and a retry
//! through the same path would meet it again; the least-loaded rule would even favour
//! that exit, since its attempts end quickest. Where the site itself fails, another exit
//! costs nothing.
//!
//! [`select`] does not allocate: it makes at most six passes over the candidates.

use std::time::Duration;

/// An IP address family: an exit's source address has one, and so does a host given as an
/// address literal. A connection needs both ends in the same family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Family {
    /// IPv4.
    #[default]
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `ip`.
    pub fn of(ip: std::net::IpAddr) -> Family {
        if ip.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }

    /// The family of a URL's host when it is an address literal (`127.0.0.1`, `[::1]`);
    /// `None` for a name, whose addresses are known only once resolved. (An IPv4 literal
    /// starts with a digit, so most names are told apart without a parse.)
    pub fn of_host(host: &str) -> Option<Family> {
        if host.starts_with('[') {
            Some(Family::V6)
        } else if host.as_bytes().first().is_some_and(u8::is_ascii_digit)
            && host.parse::<std::net::Ipv4Addr>().is_ok()
        {
            Some(Family::V4)
        } else {
            None
        }
    }

    /// `IPv4` or `IPv6`.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

/// One exit as the selector sees it, at the moment of the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The exit's configured name.
    pub name: &'a str,
    /// The exit's region, if configured.
    pub region: Option<&'a str>,
    /// Enabled and healthy (see [`crate::health::ExitHealth::is_available`]).
    pub available: bool,
    /// Requests in flight on this exit.
    pub active: u32,
    /// Maximum requests in flight. An exit with `max_concurrent == 0` can never take a
    /// request and is treated as unavailable.
    pub max_concurrent: u32,
    /// How long until this exit may send to the URL's host (pacing / token bucket);
    /// `Duration::ZERO` = now.
    pub ready_in: Duration,
    /// When this exit last sent to the URL's host, as a count that grows with each send
    /// to that host (0: never). Lower goes first; see the module docs.
    pub last_sent: u64,
    /// The family of the exit's source address; `None` when the exit reaches both (it sends
    /// through a proxy, which connects to the site itself, or from the default route).
    pub family: Option<Family>,
}

/// What the request asks of the exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Request<'a> {
    /// Use this exit (by name) if it is usable; see the module docs.
    pub preferred: Option<&'a str>,
    /// Only exits whose region equals this (exactly) are eligible.
    pub region: Option<&'a str>,
    /// Indices (into the candidate slice) of exits already tried for this fetch that could
    /// not connect.
    pub exclude: &'a [usize],
    /// The host is an address literal of this family: only exits of that family can reach
    /// it.
    pub family: Option<Family>,
    /// The exit whose attempt at this fetch just failed: a retry goes through another
    /// exit while one is eligible, and through this one only when none is (see the
    /// module docs).
    pub avoid: Option<usize>,
}

/// The selector's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Send on the exit at this index.
    Exit(usize),
    /// Eligible exits with free slots exist, but all are paced: the earliest is ready in
    /// this long.
    Wait(Duration),
    /// Every eligible exit is at `max_concurrent`: wait for a request to complete.
    Busy,
    /// No exit can ever take this request as things stand.
    NoExit(NoExitReason),
}

/// Why no exit can take the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoExitReason {
    /// `preferred` names no exit. A caller/config error to report, not a transient state.
    UnknownPreferred,
    /// A region was requested and no exit (available or not) is in it.
    NoRegionMatch,
    /// The host is an address of a family no exit (in the region) has.
    NoFamilyMatch,
    /// Every (region-matching) exit is unavailable: all down. Also returned for an empty
    /// candidate list.
    AllUnavailable,
    /// Every available (region-matching) exit is in `exclude`: all were tried.
    AllExcluded,
}

impl std::fmt::Display for NoExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoExitReason::UnknownPreferred => "preferred exit name is unknown",
            NoExitReason::NoRegionMatch => "no exit in the requested region",
            NoExitReason::NoFamilyMatch => "no exit of the host's address family",
            NoExitReason::AllUnavailable => "no healthy exit",
            NoExitReason::AllExcluded => "every available exit was tried and failed to connect",
        })
    }
}

impl Candidate<'_> {
    fn usable(&self) -> bool {
        self.available && self.max_concurrent > 0
    }

    fn has_slot(&self) -> bool {
        self.active < self.max_concurrent
    }

    /// `self` is strictly less loaded than `other` (active/max, cross-multiplied).
    fn less_loaded(&self, other: &Candidate<'_>) -> bool {
        u64::from(self.active) * u64::from(other.max_concurrent)
            < u64::from(other.active) * u64::from(self.max_concurrent)
    }

    fn same_load(&self, other: &Candidate<'_>) -> bool {
        u64::from(self.active) * u64::from(other.max_concurrent)
            == u64::from(other.active) * u64::from(self.max_concurrent)
    }

    /// `self` goes before `other`: it sent to the host longer ago, or as long ago and it
    /// is less loaded.
    fn before(&self, other: &Candidate<'_>) -> bool {
        self.last_sent < other.last_sent
            || (self.last_sent == other.last_sent && self.less_loaded(other))
    }

    fn same_rank(&self, other: &Candidate<'_>) -> bool {
        self.last_sent == other.last_sent && self.same_load(other)
    }
}

impl Request<'_> {
    fn region_ok(&self, c: &Candidate<'_>) -> bool {
        self.region.is_none_or(|r| c.region == Some(r))
    }

    fn family_ok(&self, c: &Candidate<'_>) -> bool {
        match (self.family, c.family) {
            (Some(want), Some(have)) => want == have,
            _ => true,
        }
    }

    fn excluded(&self, i: usize) -> bool {
        self.exclude.contains(&i) || self.avoid == Some(i)
    }
}

/// Choose the exit for the next request. See the module docs for the rules.
///
/// Eligible = available, `max_concurrent > 0`, not excluded, region-matching. Among the
/// eligible exits with a free slot and `ready_in == 0`, the lowest `last_sent` wins, then
/// the lowest `active / max_concurrent`; ties go to the `tie_break % n_ties`-th (in index
/// order).
pub fn select(cands: &[Candidate<'_>], req: &Request<'_>, tie_break: u64) -> Selection {
    let chosen = select_once(cands, req, tie_break);
    if req.avoid.is_some() && chosen == Selection::NoExit(NoExitReason::AllExcluded) {
        let again = Request {
            avoid: None,
            ..*req
        };
        return select_once(cands, &again, tie_break);
    }
    chosen
}

fn select_once(cands: &[Candidate<'_>], req: &Request<'_>, tie_break: u64) -> Selection {
    if let Some(name) = req.preferred {
        let Some(i) = cands.iter().position(|c| c.name == name) else {
            return Selection::NoExit(NoExitReason::UnknownPreferred);
        };
        let c = &cands[i];
        // A pinned exit is kept for a retry too: `avoid` does not apply to it.
        if c.usable() && req.region_ok(c) && req.family_ok(c) && !req.exclude.contains(&i) {
            return if !c.has_slot() {
                Selection::Busy
            } else if !c.ready_in.is_zero() {
                Selection::Wait(c.ready_in)
            } else {
                Selection::Exit(i)
            };
        }
        // Unusable preferred exit: fall back to the others.
    }

    // Pass 1: classify, find the minimal load among ready exits and count its ties.
    let mut any_region = false;
    let mut any_family = false;
    let mut any_usable = false;
    let mut any_eligible = false;
    let mut earliest: Option<Duration> = None;
    let mut best: Option<usize> = None;
    let mut ties: u64 = 0;
    for (i, c) in cands.iter().enumerate() {
        if !req.region_ok(c) {
            continue;
        }
        any_region = true;
        if !req.family_ok(c) {
            continue;
        }
        any_family = true;
        if !c.usable() {
            continue;
        }
        any_usable = true;
        if req.excluded(i) {
            continue;
        }
        any_eligible = true;
        if !c.has_slot() {
            continue;
        }
        if !c.ready_in.is_zero() {
            earliest = Some(earliest.map_or(c.ready_in, |e| e.min(c.ready_in)));
            continue;
        }
        match best {
            Some(b) if cands[b].before(c) => {}
            Some(b) if cands[b].same_rank(c) => ties += 1,
            _ => {
                best = Some(i);
                ties = 1;
            }
        }
    }

    if let Some(b) = best {
        if ties == 1 {
            return Selection::Exit(b);
        }
        // Pass 2: the (tie_break % ties)-th exit with the minimal load.
        let want = tie_break % ties;
        let min = cands[b];
        let mut seen = 0u64;
        for (i, c) in cands.iter().enumerate().skip(b) {
            if req.region_ok(c)
                && req.family_ok(c)
                && c.usable()
                && c.has_slot()
                && c.ready_in.is_zero()
                && c.same_rank(&min)
                && !req.excluded(i)
            {
                if seen == want {
                    return Selection::Exit(i);
                }
                seen += 1;
            }
        }
        // Unreachable in practice (pass 2 re-finds the ties pass 1 counted).
        return Selection::Exit(b);
    }

    if let Some(d) = earliest {
        return Selection::Wait(d);
    }
    if any_eligible {
        return Selection::Busy;
    }
    Selection::NoExit(if req.region.is_some() && !any_region {
        NoExitReason::NoRegionMatch
    } else if req.family.is_some() && !any_family {
        NoExitReason::NoFamilyMatch
    } else if !any_usable {
        NoExitReason::AllUnavailable
    } else {
        NoExitReason::AllExcluded
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

    fn c(name: &'static str, active: u32, max: u32) -> Candidate<'static> {
        Candidate {
            name,
            region: None,
            available: true,
            active,
            max_concurrent: max,
            ready_in: Duration::ZERO,
            last_sent: 0,
            family: Some(Family::V4),
        }
    }

    fn req() -> Request<'static> {
        Request::default()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn picks_lowest_relative_load() {
        // a: 2/4 = 0.5, b: 1/4 = 0.25, c: 3/10 = 0.3
        let cs = [c("a", 2, 4), c("b", 1, 4), c("c", 3, 10)];
        assert_eq!(select(&cs, &req(), 0), Selection::Exit(1));
        assert_eq!(select(&cs, &req(), 7), Selection::Exit(1));
        // Relative, not absolute: 5/100 beats 1/2.
        let cs = [c("a", 1, 2), c("b", 5, 100)];
        assert_eq!(select(&cs, &req(), 0), Selection::Exit(1));
    }

    #[test]
    fn ties_round_robin_by_tie_break() {
        // a, c, d tie at 0.5; b is heavier.
        let cs = [c("a", 1, 2), c("b", 3, 4), c("c", 2, 4), c("d", 5, 10)];
        let picks: Vec<_> = (0..6).map(|t| select(&cs, &req(), t)).collect();
        use Selection::Exit;
        assert_eq!(
            picks,
            [Exit(0), Exit(2), Exit(3), Exit(0), Exit(2), Exit(3)]
        );
        assert_eq!(
            select(&cs, &req(), u64::MAX),
            Exit([0, 2, 3][(u64::MAX % 3) as usize])
        );
    }

    #[test]
    fn skips_unavailable_excluded_full_paced_and_wrong_region() {
        let mut cs = [
            c("a", 0, 4),
            c("b", 0, 4),
            c("c", 4, 4),
            c("d", 0, 4),
            c("e", 1, 4),
            c("f", 2, 4),
        ];
        cs[0].available = false;
        cs[3].ready_in = ms(5);
        cs[4].region = Some("eu");
        cs[5].region = Some("us");
        let r = Request {
            exclude: &[1],
            ..req()
        };
        // Left: e (1/4) and f (2/4).
        assert_eq!(select(&cs, &r, 0), Selection::Exit(4));
        let r = Request {
            exclude: &[1],
            region: Some("us"),
            ..req()
        };
        assert_eq!(select(&cs, &r, 0), Selection::Exit(5));
    }

    #[test]
    fn wait_when_all_free_exits_are_paced() {
        let mut cs = [c("a", 0, 2), c("b", 2, 2), c("c", 0, 2)];
        cs[0].ready_in = ms(30);
        cs[2].ready_in = ms(10);
        assert_eq!(select(&cs, &req(), 0), Selection::Wait(ms(10)));
    }

    #[test]
    fn busy_when_all_eligible_are_full() {
        let mut cs = [c("a", 2, 2), c("b", 3, 3), c("c", 0, 3)];
        cs[1].ready_in = ms(10); // paced and full: still busy
        cs[2].available = false;
        assert_eq!(select(&cs, &req(), 0), Selection::Busy);
        // Over-subscribed (active > max) also counts as full.
        let cs = [c("a", 9, 2)];
        assert_eq!(select(&cs, &req(), 0), Selection::Busy);
    }

    #[test]
    fn preferred_exit_only_considered_when_usable() {
        let cs = [c("a", 0, 4), c("b", 3, 4)];
        let r = Request {
            preferred: Some("b"),
            ..req()
        };
        // b is busier but preferred.
        assert_eq!(select(&cs, &r, 0), Selection::Exit(1));

        // Preferred full → Busy even though a is free.
        let cs2 = [c("a", 0, 4), c("b", 4, 4)];
        assert_eq!(select(&cs2, &r, 0), Selection::Busy);

        // Preferred paced → Wait for it.
        let mut cs3 = [c("a", 0, 4), c("b", 0, 4)];
        cs3[1].ready_in = ms(50);
        assert_eq!(select(&cs3, &r, 0), Selection::Wait(ms(50)));

        // Preferred unavailable → fall back.
        let mut cs4 = [c("a", 1, 4), c("b", 0, 4), c("c", 0, 4)];
        cs4[1].available = false;
        assert_eq!(select(&cs4, &r, 0), Selection::Exit(2));

        // Preferred excluded → fall back.
        let cs5 = [c("a", 1, 4), c("b", 0, 4)];
        let rx = Request {
            preferred: Some("b"),
            exclude: &[1],
            ..req()
        };
        assert_eq!(select(&cs5, &rx, 0), Selection::Exit(0));

        // Preferred in the wrong region → fall back to the region.
        let mut cs6 = [c("a", 1, 4), c("b", 0, 4)];
        cs6[0].region = Some("eu");
        cs6[1].region = Some("us");
        let rr = Request {
            preferred: Some("b"),
            region: Some("eu"),
            ..req()
        };
        assert_eq!(select(&cs6, &rr, 0), Selection::Exit(0));

        // Preferred unavailable and nothing else: the fallback's reason.
        let mut cs7 = [c("b", 0, 4)];
        cs7[0].available = false;
        assert_eq!(
            select(&cs7, &r, 0),
            Selection::NoExit(NoExitReason::AllUnavailable)
        );
    }

    #[test]
    fn unknown_preferred_is_an_error() {
        let cs = [c("a", 0, 4)];
        let r = Request {
            preferred: Some("zz"),
            ..req()
        };
        assert_eq!(
            select(&cs, &r, 0),
            Selection::NoExit(NoExitReason::UnknownPreferred)
        );
        assert_eq!(
            select(&[], &r, 0),
            Selection::NoExit(NoExitReason::UnknownPreferred)
        );
    }

    #[test]
    fn no_region_match() {
        let mut cs = [c("a", 0, 4), c("b", 0, 4)];
        cs[0].region = Some("eu");
        let r = Request {
            region: Some("ap"),
            ..req()
        };
        assert_eq!(
            select(&cs, &r, 0),
            Selection::NoExit(NoExitReason::NoRegionMatch)
        );
        // Region exists but its only exit is down: that is "all down", not "no region".
        cs[1].region = Some("ap");
        cs[1].available = false;
        assert_eq!(
            select(&cs, &r, 0),
            Selection::NoExit(NoExitReason::AllUnavailable)
        );
    }

    #[test]
    fn all_unavailable() {
        let mut cs = [c("a", 0, 4), c("b", 0, 0)]; // b has no slots at all
        cs[0].available = false;
        assert_eq!(
            select(&cs, &req(), 0),
            Selection::NoExit(NoExitReason::AllUnavailable)
        );
        assert_eq!(
            select(&[], &req(), 0),
            Selection::NoExit(NoExitReason::AllUnavailable)
        );
    }

    #[test]
    fn all_excluded() {
        let mut cs = [c("a", 0, 4), c("b", 0, 4), c("c", 0, 4)];
        cs[2].available = false;
        let r = Request {
            exclude: &[0, 1, 99],
            ..req()
        };
        assert_eq!(
            select(&cs, &r, 0),
            Selection::NoExit(NoExitReason::AllExcluded)
        );
        assert_eq!(
            NoExitReason::AllExcluded.to_string(),
            "every available exit was tried and failed to connect"
        );
    }

    #[test]
    fn a_retry_goes_around_the_exit_that_failed_it_while_another_may_take_it() {
        // b sent longest ago and is idle: it would win, but the retry avoids it.
        let mut cs = [c("a", 1, 4), c("b", 0, 4), c("c", 2, 4)];
        cs[1].last_sent = 1;
        cs[0].last_sent = 5;
        cs[2].last_sent = 6;
        let around_b = Request {
            avoid: Some(1),
            ..req()
        };
        assert_eq!(select(&cs, &req(), 0), Selection::Exit(1));
        assert_eq!(select(&cs, &around_b, 0), Selection::Exit(0));
        // The others paced or busy: the retry waits for them, not for b.
        cs[0].ready_in = ms(7);
        cs[2].active = 4;
        assert_eq!(select(&cs, &around_b, 0), Selection::Wait(ms(7)));
        cs[0].active = 4;
        assert_eq!(select(&cs, &around_b, 0), Selection::Busy);
        // No other exit may take it at all (down, or excluded): b it is.
        cs[0].available = false;
        cs[2].available = false;
        assert_eq!(select(&cs, &around_b, 0), Selection::Exit(1));
        let b_excluded_too = Request {
            exclude: &[1],
            ..around_b
        };
        assert_eq!(
            select(&cs, &b_excluded_too, 0),
            Selection::NoExit(NoExitReason::AllExcluded)
        );
        // A pinned exit stays pinned for its retries.
        let pinned = Request {
            preferred: Some("b"),
            ..around_b
        };
        cs[0].available = true;
        assert_eq!(select(&cs, &pinned, 0), Selection::Exit(1));
    }

    #[test]
    fn the_exit_that_sent_to_the_host_longest_ago_goes_first() {
        let mut cs = [c("a", 0, 4), c("b", 3, 4), c("c", 1, 4)];
        cs[0].last_sent = 9;
        cs[1].last_sent = 7;
        cs[2].last_sent = 8;
        assert_eq!(select(&cs, &req(), 0), Selection::Exit(1), "b: longest ago");
        cs[1].ready_in = ms(2);
        assert_eq!(
            select(&cs, &req(), 0),
            Selection::Exit(2),
            "b paced: c next"
        );
        cs[2].last_sent = 9;
        assert_eq!(
            select(&cs, &req(), 0),
            Selection::Exit(0),
            "a and c tie: less loaded"
        );
    }

    #[test]
    fn a_host_given_as_an_address_goes_only_to_exits_of_its_family() {
        let mut cs = [c("v4", 0, 4), c("v6", 3, 4)];
        cs[1].family = Some(Family::V6);
        let v6 = Request {
            family: Some(Family::V6),
            ..req()
        };
        assert_eq!(select(&cs, &v6, 0), Selection::Exit(1));
        let v4 = Request {
            family: Some(Family::V4),
            ..req()
        };
        assert_eq!(select(&cs, &v4, 0), Selection::Exit(0));
        cs[1].family = Some(Family::V4);
        assert_eq!(
            select(&cs, &v6, 0),
            Selection::NoExit(NoExitReason::NoFamilyMatch)
        );
        // An exit through a proxy (or on the default route) reaches either family.
        cs[0].family = None;
        assert_eq!(select(&cs, &v6, 0), Selection::Exit(0));
        assert_eq!(Family::of_host("[::1]"), Some(Family::V6));
        assert_eq!(Family::of_host("127.0.0.2"), Some(Family::V4));
        assert_eq!(Family::of_host("example.com"), None);
    }

    #[test]
    fn ready_beats_less_loaded_but_paced() {
        let mut cs = [c("a", 0, 4), c("b", 3, 4)];
        cs[0].ready_in = ms(1);
        assert_eq!(select(&cs, &req(), 0), Selection::Exit(1));
    }

    #[test]
    fn large_values_do_not_overflow() {
        let cs = [
            c("a", u32::MAX - 1, u32::MAX),
            c("b", u32::MAX - 2, u32::MAX),
        ];
        assert_eq!(select(&cs, &req(), 0), Selection::Exit(1));
    }

    #[test]
    fn sixty_four_exits() {
        let cs: Vec<_> = (0..64u32)
            .map(|i| Candidate {
                name: NAMES[(i % 8) as usize],
                region: None,
                available: i % 7 != 0,
                active: (i * 5) % 9,
                max_concurrent: 8 + i % 4,
                ready_in: Duration::ZERO,
                last_sent: 0,
                family: Some(Family::V4),
            })
            .collect();
        let Selection::Exit(i) = select(&cs, &req(), 3) else {
            panic!("expected an exit")
        };
        assert!(cs[i].available && cs[i].active == 0);
    }

    fn arb_cand() -> impl Strategy<Value = Candidate<'static>> {
        (
            0usize..8,
            prop_oneof![Just(None), Just(Some("eu")), Just(Some("us"))],
            prop::bool::weighted(0.8),
            0u32..6,
            0u32..6,
            prop_oneof![3 => Just(0u64), 1 => 1u64..100],
        )
            .prop_map(|(n, region, available, active, max, ready)| Candidate {
                name: NAMES[n],
                region,
                available,
                active,
                max_concurrent: max,
                ready_in: Duration::from_millis(ready),
                last_sent: 0,
                family: Some(Family::V4),
            })
    }

    proptest! {
        #[test]
        fn chosen_exit_is_eligible_and_least_loaded(
            cands in prop::collection::vec(arb_cand(), 0..80),
            region in prop_oneof![Just(None), Just(Some("eu")), Just(Some("us")), Just(Some("ap"))],
            preferred in prop_oneof![3 => Just(None), 1 => (0usize..9).prop_map(|i| NAMES.get(i).copied().or(Some("zz")))],
            exclude in prop::collection::vec(0usize..80, 0..6),
            tie_break in any::<u64>(),
        ) {
            let r = Request { preferred, region, exclude: &exclude, family: None, avoid: None };
            let sel = select(&cands, &r, tie_break);
            let eligible = |i: usize| {
                let c = &cands[i];
                c.available && c.max_concurrent > 0 && !exclude.contains(&i)
                    && region.is_none_or(|g| c.region == Some(g))
            };
            let ready = |i: usize| eligible(i) && cands[i].active < cands[i].max_concurrent
                && cands[i].ready_in.is_zero();
            let pref_idx = preferred.and_then(|p| cands.iter().position(|c| c.name == p));
            let pref_used = pref_idx.filter(|&i| eligible(i));
            match sel {
                Selection::Exit(i) => {
                    prop_assert!(ready(i));
                    if let Some(p) = pref_used {
                        prop_assert_eq!(i, p);
                    } else {
                        let load = |j: usize| (cands[j].active as f64) / (cands[j].max_concurrent as f64);
                        for j in (0..cands.len()).filter(|&j| ready(j)) {
                            prop_assert!(
                                u64::from(cands[i].active) * u64::from(cands[j].max_concurrent)
                                    <= u64::from(cands[j].active) * u64::from(cands[i].max_concurrent),
                                "{} ({}) vs {} ({})", i, load(i), j, load(j)
                            );
                        }
                    }
                }
                Selection::Wait(d) => {
                    prop_assert!(!d.is_zero());
                    let pool: Vec<usize> = match pref_used {
                        Some(p) => vec![p],
                        None => (0..cands.len()).filter(|&j| eligible(j)).collect(),
                    };
                    prop_assert!(pool.iter().all(|&j| !ready(j)));
                    let earliest = pool.iter()
                        .filter(|&&j| cands[j].active < cands[j].max_concurrent)
                        .map(|&j| cands[j].ready_in)
                        .min();
                    prop_assert_eq!(earliest, Some(d));
                }
                Selection::Busy => {
                    let pool: Vec<usize> = match pref_used {
                        Some(p) => vec![p],
                        None => (0..cands.len()).filter(|&j| eligible(j)).collect(),
                    };
                    prop_assert!(!pool.is_empty());
                    prop_assert!(pool.iter().all(|&j| cands[j].active >= cands[j].max_concurrent));
                }
                Selection::NoExit(reason) => {
                    if preferred.is_some() && pref_idx.is_none() {
                        prop_assert_eq!(reason, NoExitReason::UnknownPreferred);
                    } else {
                        prop_assert!((0..cands.len()).all(|j| !eligible(j)));
                        let in_region = |j: usize| region.is_none_or(|g| cands[j].region == Some(g));
                        let expected = if region.is_some() && !(0..cands.len()).any(in_region) {
                            NoExitReason::NoRegionMatch
                        } else if !(0..cands.len()).any(|j| in_region(j) && cands[j].available && cands[j].max_concurrent > 0) {
                            NoExitReason::AllUnavailable
                        } else {
                            NoExitReason::AllExcluded
                        };
                        prop_assert_eq!(reason, expected);
                    }
                }
            }
        }

        #[test]
        fn tie_break_cycles_through_all_tied_exits(n in 1usize..70, load in 0u32..4) {
            let cs: Vec<_> = (0..n).map(|i| c(NAMES[i % 8], load, 4)).collect();
            for t in 0..(2 * n as u64) {
                prop_assert_eq!(select(&cs, &req(), t), Selection::Exit((t % n as u64) as usize));
            }
        }
    }
}
