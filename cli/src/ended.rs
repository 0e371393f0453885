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
    /// own), or a crawl's URLs ended because no exit was in service: why, for stderr
    /// (exit 1). The records and the summary are written.
    Stopped(String),
}
