//! The fleet as a whole: whether any exit in service can take traffic.

use std::time::Instant;

use super::ExitHealth;

/// The fleet as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetState {
    /// At least one exit is healthy or probing.
    Available {
        /// Exits that are healthy or probing.
        available: usize,
        /// All exits.
        total: usize,
    },
    /// No exit can take traffic. The caller must surface this (see the module docs) and
    /// fail fetches with "no healthy exit" after a bounded wait.
    AllDown {
        /// When the first ejection ends (an exit can be probed again); `None` if there are
        /// no exits at all.
        next_probe: Option<Instant>,
    },
}

impl FleetState {
    /// `true` for [`FleetState::AllDown`].
    pub fn is_all_down(&self) -> bool {
        matches!(self, FleetState::AllDown { .. })
    }
}

/// Summarise the fleet. Call after every transition so that losing the last available exit
/// is always noticed.
/// Pass only the exits in service: a disabled exit is never checked, so its state says
/// nothing about the fleet.
pub fn fleet_state<'a>(exits: impl IntoIterator<Item = &'a ExitHealth>) -> FleetState {
    let (mut available, mut total, mut next_probe) = (0, 0, None::<Instant>);
    for e in exits {
        total += 1;
        if e.is_available() {
            available += 1;
        }
        if let Some(until) = e.ejected_until() {
            next_probe = Some(next_probe.map_or(until, |n| n.min(until)));
        }
    }
    if available > 0 {
        FleetState::Available { available, total }
    } else {
        FleetState::AllDown { next_probe }
    }
}
