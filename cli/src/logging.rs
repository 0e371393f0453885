//! `tracing` events to stderr as text or JSON lines (`--log-format`), filtered by
//! `RUST_LOG` (default `warn`), written in one piece above the progress bar.

use std::io::{self, IsTerminal, Write};

use super::args::LogFormat;
use super::term::BAR;

/// A log line, written to stderr in one piece (above the progress bar) when dropped.
struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.0);
        let write = || {
            let _ = io::stderr().lock().write_all(&bytes);
        };
        match BAR.get() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }
}

/// Install the subscriber. An invalid `RUST_LOG` is an argument error.
pub fn init(format: LogFormat) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => {
            EnvFilter::try_new(&v).map_err(|e| format!("RUST_LOG {v:?}: {e}"))?
        }
        _ => EnvFilter::new("warn"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogLine(Vec::new()));
    let done = match format {
        LogFormat::Text => builder.with_ansi(io::stderr().is_terminal()).try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
    done.map_err(|e| format!("logging: {e}"))
}
