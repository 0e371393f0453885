//! Where a `Retry-After` binds: the exit that read it, or the whole host.
//!
//! RFC 9110 addresses `Retry-After` to the client that received it, and an exit is a
//! client of its own (its own source address). A host reached through several exits, whose
//! budget the host lane paces as one, then loses only that exit while the pause runs: the
//! host lane is cut as for any throttle, and the other exits carry the cut rate. The
//! throttle costs the share of the host's rate that exit carried, not the whole host's
//! pause: a probe's `Retry-After: 1` at 300 req/s through four exits stops 75 requests'
//! worth of sending, not 300, so probes may come four times as often for the same cost
//! (the controller prices a cycle by that share, see `Controller::bind_retry_after`).
//!
//! Two cases bind the whole host instead:
//! - **a host still being learned** (before its first cut, or before the 64 answers the
//!   bucket fit listens to): its rate is a guess, and the other exits would meet the same
//!   wall at it, each a throttle more. A thin host is learning for most of its crawl,
//!   and a pause of it costs a request or two anyway.
//! - **a host whose `Retry-After` proved host-wide**: while a pause bound to one exit ran,
//!   the other exits' requests sent after the cut were refused at least twice and none
//!   was accepted. Below a token bucket's rate one refusal can follow a cut (the bucket
//!   was empty when it came), and a bucket whose rate fell below the cut one refuses
//!   most requests but accepts its rate's worth; a site that pauses every client for the
//!   `Retry-After` (a penalty box, a maintenance 503) refuses them all. Judged when the
//!   pause is over, since the first answers after a cut can all be refused by a bucket
//!   that fell (they come before it refills); learned once per host and kept. On a fast
//!   host the other exits are all refused before the cut is in force, which a blip of
//!   refusals also does: two such pauses in a row prove it (see [`Binding::close`]).
//!
//! With one exit in use the two are the same; an exit with a lane of its own (its own
//! budget) is paused by that lane's controller.

use std::time::{Duration, Instant};

/// What a host's throttles so far say about where its `Retry-After` binds.
#[derive(Debug, Clone, Default)]
pub(super) struct Binding {
    /// A pause bound to one exit was not enough: every later one binds the host.
    host_wide: bool,
    /// The pauses bound to one exit now running.
    window: Option<Window>,
    /// The other exits' answers in the window to requests sent once the cut was in
    /// force: accepted, refused.
    during: (u32, u32),
    /// The same for requests sent between the first pause's read and then.
    early: (u32, u32),
    /// Windows in a row whose other exits were all refused, but only before the cut was
    /// in force (see [`Binding::close`]).
    suspect: u32,
}

/// The pauses bound to one exit that run at once, and which of the other exits' answers
/// judge them.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// The exit whose pause opened it.
    first: usize,
    /// When that pause was read: what the other exits sent from then until `from` is
    /// counted apart (`early`).
    read: Instant,
    /// From when the other exits' requests count: the first pause read, plus a round trip
    /// for the cut to be in force.
    from: Instant,
    /// Until when they count: the first pause's end. A site that pauses every client for
    /// that `Retry-After` serves again after it, so what the other exits send later
    /// (each at the end of a pause of its own) says nothing about it.
    counts_until: Instant,
    /// When the last pause ends: the window is judged then.
    until: Instant,
}

impl Binding {
    /// Whether a `Retry-After` read at `now` binds only the exit that read it: the host is
    /// learned, reached through two exits or more, and its pauses did not prove host-wide.
    pub(super) fn to_exit(&self, learned: bool, exits_in_use: usize, now: Instant) -> bool {
        learned && exits_in_use >= 2 && !self.proved(now)
    }

    /// The pauses proved host-wide: learned, or shown by a window that is over at `now`
    /// (judged for good by [`Binding::close`] when the next answer or throttle comes).
    fn proved(&self, now: Instant) -> bool {
        self.host_wide || self.window.is_some_and(|w| now >= w.until && self.proves())
    }

    /// Whether the window now open, once over, proves the pauses host-wide: the other
    /// exits were refused at least twice and none of their requests got through — sent
    /// once the cut was in force, or, the second window in a row, at all.
    fn proves(&self) -> bool {
        got_none(self.during) || (self.suspect >= 1 && got_none(self.answered()))
    }

    /// The other exits' answers in the window, whenever their requests were sent.
    fn answered(&self) -> (u32, u32) {
        (self.during.0 + self.early.0, self.during.1 + self.early.1)
    }

    /// An answer through `exit` to a request sent at `sent_at`: refused or not. Counts
    /// toward the proof that pauses are host-wide while a window is open; one to a request
    /// sent after the window closes it. Returns whether it answers a request another exit
    /// sent before the cut was in force (the old rate's answer).
    pub(super) fn answer(&mut self, exit: usize, sent_at: Instant, refused: bool) -> bool {
        let Some(w) = self.window else {
            return false;
        };
        if sent_at >= w.until {
            self.close();
            return false;
        }
        if exit == w.first || sent_at < w.read || sent_at >= w.counts_until {
            return false;
        }
        let early = sent_at < w.from;
        let (ok, no) = if early {
            &mut self.early
        } else {
            &mut self.during
        };
        if refused {
            *no += 1;
        } else {
            *ok += 1;
        }
        early
    }

    /// The pauses bound to one exit are over: judge what the other exits met meanwhile.
    ///
    /// Refusals of what they sent before the cut was in force prove nothing alone: a
    /// bucket's blip of refusals (a restart, a burst of other clients) refuses every
    /// client too, for a moment. But a fast host's other exits are each refused within
    /// that round trip and pause themselves, so a site that pauses every client shows
    /// nothing else; it shows it at every pause, where a blip is one among probes whose
    /// other exits get through. So such a window is a suspect, and the second in a row
    /// proves it.
    fn close(&mut self) {
        if self.window.take().is_some() {
            let all = self.answered();
            if self.proves() {
                self.host_wide = true;
            } else if got_none(all) {
                self.suspect += 1;
            } else if all.0 > 0 {
                self.suspect = 0;
            }
        }
        self.during = (0, 0);
        self.early = (0, 0);
    }

    /// A throttle with a `Retry-After` of `ra` through `exit`, read at `now` (its answer
    /// already counted with [`Binding::answer`]); `settle`: how long after a cut a request
    /// is sent at the cut rate (a round trip). Returns whether its pause binds that exit
    /// only.
    pub(super) fn throttled(
        &mut self,
        (exit, ra): (usize, Duration),
        (learned, exits_in_use): (bool, usize),
        settle: Duration,
        now: Instant,
    ) -> bool {
        if self.window.is_some_and(|w| now >= w.until) {
            self.close();
        }
        let to_exit = self.to_exit(learned, exits_in_use, now);
        if to_exit {
            // A window still here is still open (one that was over is closed above).
            self.window = Some(match self.window {
                Some(w) => Window {
                    until: w.until.max(now + ra),
                    ..w
                },
                None => Window {
                    first: exit,
                    read: now,
                    from: now + settle,
                    counts_until: now + ra,
                    until: now + ra,
                },
            });
        }
        to_exit
    }

    /// Whether the host's pauses proved host-wide.
    #[cfg(test)]
    pub(super) fn host_wide(&self) -> bool {
        self.host_wide
    }
}

/// Answers (accepted, refused) that show a pause holding every client: at least two
/// refusals and nothing through.
fn got_none((ok, no): (u32, u32)) -> bool {
    no >= 2 && ok == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);
    const SETTLE: Duration = Duration::from_millis(40);

    #[test]
    fn a_learned_host_through_several_exits_binds_the_exit() {
        let b = Binding::default();
        let now = Instant::now();
        assert!(b.to_exit(true, 4, now));
        assert!(
            !b.to_exit(false, 4, now),
            "a host being learned binds the host"
        );
        assert!(!b.to_exit(true, 1, now), "one exit: the exit is the host");
    }

    #[test]
    fn the_others_refused_during_the_pause_make_it_host_wide() {
        let t0 = Instant::now();
        let mut b = Binding::default();
        assert!(b.throttled((0, S), (true, 4), SETTLE, t0));
        // Sent before the cut was in force: the old rate's, says nothing.
        b.answer(1, t0 + 10 * MS, true);
        b.answer(2, t0 + 20 * MS, true);
        assert!(!b.host_wide());
        // Sent at the cut rate and refused: the site pauses every client.
        b.answer(1, t0 + 100 * MS, true);
        assert!(b.throttled((1, S), (true, 4), SETTLE, t0 + 120 * MS));
        b.answer(2, t0 + 200 * MS, true);
        b.answer(3, t0 + 900 * MS, true);
        assert!(!b.host_wide(), "judged when the pauses are over");
        assert!(b.to_exit(true, 4, t0 + 1000 * MS));
        assert!(!b.to_exit(true, 4, t0 + 1120 * MS), "over");
        // The first answer to a request sent after them.
        b.answer(2, t0 + 1200 * MS, false);
        assert!(b.host_wide());
        assert!(!b.to_exit(true, 4, t0 + 5 * S), "kept for the host");
    }

    #[test]
    fn what_the_others_send_after_the_first_pause_does_not_judge_it() {
        // A site that pauses every client: each other exit is refused once at the cut
        // rate and pauses itself, and is served again when its own pause ends, after the
        // site's; that answer comes while the window is still open (the last pause runs).
        let t0 = Instant::now();
        let mut b = Binding::default();
        assert!(b.throttled((0, S), (true, 4), SETTLE, t0));
        for (exit, sent) in [(1, 50), (2, 70), (3, 90)] {
            b.answer(exit, t0 + sent * MS, true);
            assert!(b.throttled((exit, S), (true, 4), SETTLE, t0 + sent * MS));
        }
        b.answer(1, t0 + 1_050 * MS, false);
        b.answer(2, t0 + 2 * S, false);
        assert!(b.host_wide());
    }

    /// A window opened by exit 0's pause at `t`, whose other exits' requests were sent
    /// at `sent` ms after it and answered `refused` or not; over once a request sent
    /// after it is answered.
    fn window(b: &mut Binding, t: Instant, answers: &[(usize, u32, bool)]) {
        assert!(b.throttled((0, S), (true, 4), SETTLE, t));
        for &(exit, sent, refused) in answers {
            b.answer(exit, t + sent * MS, refused);
            if refused {
                b.throttled((exit, S), (true, 4), SETTLE, t + sent * MS);
            }
        }
        b.answer(1, t + 3 * S, false);
    }

    /// The other exits, each refused within the round trip after the read (exit, ms
    /// after it, refused).
    const REFUSED_EARLY: [(usize, u32, bool); 3] = [(1, 3, true), (2, 6, true), (3, 10, true)];

    #[test]
    fn a_fast_hosts_site_wide_pause_is_learned_at_its_second_showing() {
        // Each other exit is refused within the round trip after the read, before the
        // cut is in force, and pauses itself: nothing else to go by.
        let t0 = Instant::now();
        let mut b = Binding::default();
        window(&mut b, t0, &REFUSED_EARLY);
        assert!(!b.host_wide(), "one such window can be a blip");
        window(&mut b, t0 + 10 * S, &REFUSED_EARLY);
        assert!(b.host_wide(), "the second in a row");
    }

    #[test]
    fn a_blip_between_probes_that_get_through_is_not_learned() {
        let t0 = Instant::now();
        let mut b = Binding::default();
        window(&mut b, t0, &REFUSED_EARLY);
        // A probe's pause: the other exits get through at the cut rate.
        window(
            &mut b,
            t0 + 10 * S,
            &[(1, 5, false), (2, 50, false), (3, 90, false)],
        );
        window(&mut b, t0 + 20 * S, &REFUSED_EARLY);
        assert!(!b.host_wide());
    }

    #[test]
    fn a_bucket_that_fell_below_the_cut_rate_stays_with_the_exit() {
        let t0 = Instant::now();
        let mut b = Binding::default();
        assert!(b.throttled((0, S), (true, 4), SETTLE, t0));
        // Its rate is a third of the cut one: the first answers after the cut are all
        // refused (each its own exit's throttle), then a third get through.
        b.answer(1, t0 + 50 * MS, true);
        assert!(b.throttled((1, S), (true, 4), SETTLE, t0 + 70 * MS));
        b.answer(2, t0 + 60 * MS, true);
        assert!(b.throttled((2, S), (true, 4), SETTLE, t0 + 80 * MS));
        for i in 0..30u32 {
            b.answer(3, t0 + (100 + 20 * i) * MS, i % 3 != 0);
        }
        b.answer(3, t0 + 1500 * MS, false);
        assert!(!b.host_wide());
        assert!(b.to_exit(true, 4, t0 + 2 * S));
    }

    #[test]
    fn one_refusal_after_the_cut_among_answers_stays_with_the_exit() {
        let t0 = Instant::now();
        let mut b = Binding::default();
        assert!(b.throttled((0, S), (true, 4), SETTLE, t0));
        // A bucket emptied by the probe refuses one more, then the cut rate gets through.
        b.answer(1, t0 + 50 * MS, true);
        for i in 0..20u32 {
            b.answer(1 + i as usize % 3, t0 + (60 + 10 * i) * MS, false);
        }
        b.answer(2, t0 + 300 * MS, true);
        assert!(!b.host_wide());
        // The exit itself, and answers after the pause, do not count.
        b.answer(0, t0 + 500 * MS, true);
        b.answer(0, t0 + 600 * MS, true);
        b.answer(3, t0 + 2 * S, true);
        b.answer(3, t0 + 2 * S, true);
        assert!(!b.host_wide());
    }
}
