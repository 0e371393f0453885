//! How a run ended, as each mode's loop reports it and [`main`](super::main) turns it
//! into the exit code.

/// How the crawl loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Every URL read has its final record.
    Complete,
    /// Ctrl-C/SIGTERM: the URLs not finished are recorded as interrupted (a frontier
    /// consumer gives them back to the queue).
    Interrupted,
    /// A frontier consumer could not go on (Redis lost, or its failures are all its
    /// own), a crawl's URLs ended because no exit was in service, or reading the URL
    /// list failed: why, for stderr (exit 1). The records and the summary are written.
    Stopped(String),
}

impl Ended {
    /// A crawl whose URLs all have their records, `none_left` of them because no exit was
    /// in service: the exits were down, not the sites, so the run fails (exit 1) and says
    /// so — a script must not take it for a finished crawl.
    pub fn unless_exits_ran_out(self, none_left: u64) -> Ended {
        if self == Ended::Complete && none_left > 0 {
            Ended::Stopped(format!(
                "every exit was out of service for longer than the crawler waits for one \
                 (min(health.max_ejection_ms, 30 s)): {none_left} URLs recorded as no_healthy_exit"
            ))
        } else {
            self
        }
    }
}
