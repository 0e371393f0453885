//! The terminal's stderr, shared by every part of the program: [`note`] and [`say`] print
//! above the progress bar ([`BAR`], set by `progress` while it shows one) so they do not
//! tear its lines.

use std::io::Write;
use std::sync::OnceLock;

use indicatif::ProgressBar;

/// The progress bar, while there is one: messages and logs go through it so they do not
/// tear its lines.
pub static BAR: OnceLock<ProgressBar> = OnceLock::new();

/// A line on stderr (above the progress bar, if any).
pub fn note(msg: &str) {
    // A closed or full stderr loses the message; it must not end the crawl.
    let print = || {
        let _ = writeln!(std::io::stderr(), "{msg}");
    };
    match BAR.get() {
        Some(bar) => bar.suspend(print),
        None => print(),
    }
}

/// [`note`] with the program's name in front (`crawl: …`).
pub fn say(msg: &str) {
    note(&format!("{}: {msg}", super::prog()));
}
