//! What one crawler process knows of a key's rate shared with the others (distributed
//! mode), and what it may take of the rates and pauses the others store.
//!
//! Every process publishes its own changes; the last write is stored and broadcast. Left
//! at that, a cut is lost whenever a peer's growth crosses it: the peer decided its rise
//! before the cut reached it, its write lands after, and both processes end up at the
//! rise as if no throttle had happened. Two rules keep a cut:
//! - A rise is stored only if the stored rate is not below the rate it grew from (Redis
//!   checks that in the same script that stores it): a rise over a cut it has not seen is
//!   refused, and its writer takes the stored rate instead. A process's first change of a
//!   key (it joined the fleet, or met the key again after forgetting it) counts as a rise
//!   from the rate it moves to: its start is its own, not news of the site, and stored
//!   over a lower rate it would lift the fleet out of a cut it has not seen. So does a
//!   change that keeps the rate and moves only the pause: it is no cut.
//! - A received rise older than our own last cut is not taken: while our cut is on its way
//!   to Redis (its time there unknown yet), and after that when Redis stored the rise no
//!   later than the cut (the server's clock, the same for every process). Lower rates are
//!   always taken: slowing down on stale news costs a little pace, never the site's.
//!
//! A pause is the site's word (a Retry-After, a hold after a throttle), whoever heard it:
//! it is stored and published whatever becomes of the rate beside it (with a rise the
//! stored rate refuses, alone), it is kept until it ends (Redis keeps it in the same
//! script, whatever a change stored meanwhile says, so a peer that took the pause and
//! moves its rate does not undo it), and a pause in force is taken from any value
//! received or read, whatever the rate beside it and whether that rate is taken.
//!
//! A process with a fixed rate (any algorithm but `aimd`) shares its pauses and nothing
//! else ([`fixed_publish`], [`fixed_take`]): its rate is its configuration, and the
//! processes already share their budget through the GCRA in Redis, each at the rate it
//! is configured with. A rate stored by another process is not news for it, and its own
//! rate stored would be taken by an adaptive process as the site's.

/// How a rate change of ours is published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Publish {
    /// Store it whatever is stored: a cut is news for every process.
    Cut,
    /// Store it only if the stored rate is not below `from`. Its pause is stored either
    /// way.
    Raise {
        /// The rate it grew from: the last one this process published or took.
        from: f64,
    },
    /// Store the pause alone, keeping the stored rate: a fixed rate's (see
    /// [`fixed_publish`]).
    Pause,
}

/// A change of a process with a fixed rate: published only when it carries a pause
/// (`paused`), and then the pause alone.
pub fn fixed_publish(paused: bool) -> Option<Publish> {
    paused.then_some(Publish::Pause)
}

/// What a process with a fixed rate takes of a value another process stored or
/// published: its pause, one still in force (`paused`); never its rate.
pub fn fixed_take(paused: bool) -> Take {
    Take {
        rate: false,
        pause: paused,
    }
}

/// What this process takes of a value another process stored for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// Its rate, which rises are checked against from then on.
    pub rate: bool,
    /// Its pause, one still in force.
    pub pause: bool,
}

impl Take {
    /// Something is taken.
    pub fn any(self) -> bool {
        self.rate || self.pause
    }
}

/// One key's shared state in this process.
#[derive(Debug, Clone, Default)]
pub struct SharedKey {
    /// The last rate this process published or took.
    known: Option<f64>,
    /// Cuts published whose store time is not known yet.
    cuts_in_flight: u32,
    /// The server's time (ms) at which our last cut was stored.
    last_cut_ms: u64,
}

impl SharedKey {
    /// We moved the key's rate to `rps`: how to publish it.
    pub fn publish(&mut self, rps: f64) -> Publish {
        let from = self.known.replace(rps);
        match from {
            Some(from) if rps > from => Publish::Raise { from },
            Some(from) if rps < from => {
                self.cuts_in_flight += 1;
                Publish::Cut
            }
            // Nothing known yet, or the rate kept (the pause moved): stored unless a lower
            // rate is, which is then taken. Stored floorless, the same rate would undo a
            // peer's cut not heard yet.
            _ => Publish::Raise { from: rps },
        }
    }

    /// Our cut was stored at the server's `server_ms`, or failed to be (`None`).
    pub fn cut_stored(&mut self, server_ms: Option<u64>) {
        self.cuts_in_flight = self.cuts_in_flight.saturating_sub(1);
        if let Some(ms) = server_ms {
            self.last_cut_ms = self.last_cut_ms.max(ms);
        }
    }

    /// Another process's rate `rps`, stored at the server's `server_ms`: take it? A taken
    /// rate becomes the one rises are checked against.
    pub fn take(&mut self, rps: f64, server_ms: u64) -> bool {
        let rise = self.known.is_some_and(|k| rps > k);
        if rise && (self.cuts_in_flight > 0 || server_ms <= self.last_cut_ms) {
            return false;
        }
        self.known = Some(rps);
        true
    }

    /// A change another process published: its rate `rps` (none: a pause alone), stored
    /// at the server's `server_ms`, and whether a pause still in force came with it
    /// (`paused`). The rate as [`Self::take`] judges it; the pause whatever becomes of
    /// the rate.
    pub fn receive(&mut self, rps: Option<f64>, server_ms: u64, paused: bool) -> Take {
        Take {
            rate: rps.is_some_and(|r| self.take(r, server_ms)),
            pause: paused,
        }
    }

    /// The key's stored value, read when the key came into use here or again after a lost
    /// subscription, against `ours`, the rate this process paces it at. The rate only if
    /// below ours: a read carries the time of the read, not of the store, so a higher rate
    /// read cannot be told from one stored before a cut of ours that never reached Redis.
    /// The pause, one still in force (`paused`), whatever the rate (none where only a
    /// pause was stored).
    pub fn read(&mut self, rps: Option<f64>, server_ms: u64, ours: f64, paused: bool) -> Take {
        Take {
            rate: rps.is_some_and(|r| r < ours && self.take(r, server_ms)),
            pause: paused,
        }
    }

    /// Our raise was refused: `stored` is the rate in force. Taken unconditionally (it is
    /// what every process converges to).
    pub fn refused(&mut self, stored: f64) {
        self.known = Some(stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rises_carry_what_they_grew_from_and_cuts_go_through() {
        let mut k = SharedKey::default();
        // A first change, knowing nothing stored: floored at itself, so a stored lower
        // rate (a cut this process has not seen) is kept and taken.
        assert_eq!(k.publish(100.0), Publish::Raise { from: 100.0 });
        assert_eq!(k.publish(110.0), Publish::Raise { from: 100.0 });
        assert_eq!(k.publish(99.0), Publish::Cut);
        assert!(k.take(90.0, 5), "a lower rate is always taken");
        assert_eq!(k.publish(95.0), Publish::Raise { from: 90.0 });
    }

    #[test]
    fn a_rise_that_crosses_our_cut_on_the_way_is_not_taken() {
        let mut k = SharedKey::default();
        k.publish(900.0);
        assert_eq!(k.publish(800.0), Publish::Cut);
        // A peer's rise stored before our cut reached Redis arrives first.
        assert!(!k.take(950.0, 1_000));
        k.cut_stored(Some(1_002));
        // Its message may also arrive after our cut's reply: still older than the cut.
        assert!(!k.take(950.0, 1_001));
        assert!(
            !k.take(950.0, 1_002),
            "same millisecond: cannot tell, stay low"
        );
        // A rise stored after our cut was decided by a peer that saw it.
        assert!(k.take(820.0, 1_003));
        assert!(k.take(700.0, 900), "lower: taken, however old");
    }

    #[test]
    fn a_first_change_never_lifts_a_lower_stored_rate() {
        // Up or down from a start of its own, a first change is floored at itself.
        assert_eq!(
            SharedKey::default().publish(110.0),
            Publish::Raise { from: 110.0 }
        );
        assert_eq!(
            SharedKey::default().publish(45.0),
            Publish::Raise { from: 45.0 }
        );
        // Once the stored rate is known, a probe above it is a rise from it like any.
        let mut k = SharedKey::default();
        k.refused(20.0);
        assert_eq!(k.publish(22.0), Publish::Raise { from: 20.0 });
    }

    #[test]
    fn a_change_of_the_pause_alone_is_no_cut() {
        let mut k = SharedKey::default();
        k.publish(30.0);
        assert_eq!(k.publish(25.0), Publish::Cut);
        k.cut_stored(Some(100));
        // The rate kept, the pause moved: floored at the rate, so a lower stored cut of a
        // peer's stays (and is taken), and nothing goes in flight as a cut of ours.
        assert_eq!(k.publish(25.0), Publish::Raise { from: 25.0 });
        assert!(k.take(12.0, 200));
        assert!(
            k.take(14.0, 300),
            "a rise stored after our last cut is taken"
        );
    }

    #[test]
    fn a_failed_cut_does_not_block_rises_for_ever() {
        let mut k = SharedKey::default();
        k.publish(500.0);
        k.publish(400.0);
        assert!(!k.take(450.0, 10));
        k.cut_stored(None);
        assert!(k.take(450.0, 10));
    }

    #[test]
    fn a_pause_is_taken_whatever_becomes_of_the_rate_beside_it() {
        let mut k = SharedKey::default();
        k.publish(900.0);
        k.publish(800.0);
        // A rise older than our cut: its rate is not taken, the pause with it is.
        let t = k.receive(Some(950.0), 1_000, true);
        assert_eq!(
            t,
            Take {
                rate: false,
                pause: true
            }
        );
        assert!(t.any());
        assert!(!k.receive(Some(950.0), 1_000, false).any());
        // A stored value read above our rate: the rate is not taken, a pause in force is.
        let mut k = SharedKey::default();
        k.publish(5.0);
        let t = k.read(Some(60.0), 2_000, 5.0, true);
        assert_eq!(
            t,
            Take {
                rate: false,
                pause: true
            }
        );
        assert!(!k.read(Some(60.0), 2_000, 5.0, false).any());
        assert_eq!(
            k.read(Some(3.0), 2_000, 5.0, false),
            Take {
                rate: true,
                pause: false
            },
            "a lower rate read is taken as a received cut"
        );
        assert_eq!(k.publish(4.0), Publish::Raise { from: 3.0 });
    }

    #[test]
    fn a_pause_alone_is_taken_and_moves_no_rate() {
        let mut k = SharedKey::default();
        k.publish(5.0);
        let pause = Take {
            rate: false,
            pause: true,
        };
        assert_eq!(k.receive(None, 1_000, true), pause);
        assert_eq!(k.read(None, 1_000, 5.0, true), pause);
        // Nothing was taken: a rise is still checked against our own rate.
        assert_eq!(k.publish(6.0), Publish::Raise { from: 5.0 });
    }

    #[test]
    fn a_fixed_rate_shares_its_pauses_and_nothing_else() {
        assert_eq!(fixed_publish(true), Some(Publish::Pause));
        assert_eq!(fixed_publish(false), None);
        assert_eq!(
            fixed_take(true),
            Take {
                rate: false,
                pause: true
            }
        );
        assert!(!fixed_take(false).any(), "a rate alone is not taken");
    }

    #[test]
    fn a_refused_raise_leaves_the_stored_rate_known() {
        let mut k = SharedKey::default();
        k.publish(500.0);
        k.publish(550.0);
        k.refused(420.0);
        assert_eq!(k.publish(430.0), Publish::Raise { from: 420.0 });
    }
}
