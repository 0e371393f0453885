//! Ctrl-C and SIGTERM: the first stops the crawl (the loop gets a message), a second
//! flushes `--out` and exits with 130 at once.

use std::io::{self, Write};

use tokio::sync::mpsc;

use super::output::SharedOut;
use super::progress::say;
use super::EXIT_INTERRUPTED;

/// The first stop signal arrives on this channel.
pub type Stop = mpsc::UnboundedReceiver<()>;

/// Watch SIGINT and SIGTERM on the current System.
pub fn spawn_signals(out: SharedOut) -> io::Result<Stop> {
    let (tx, rx) = mpsc::unbounded_channel();
    #[cfg(unix)]
    let mut signals = {
        use actix_rt::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        )
    };
    actix_rt::spawn(async move {
        let mut seen = 0u32;
        loop {
            #[cfg(unix)]
            {
                let (int, term) = &mut signals;
                let _ =
                    futures_util::future::select(Box::pin(int.recv()), Box::pin(term.recv())).await;
            }
            #[cfg(not(unix))]
            {
                if actix_rt::signal::ctrl_c().await.is_err() {
                    return;
                }
            }
            seen += 1;
            if seen == 1 {
                let _ = tx.send(());
            } else {
                if let Ok(mut out) = out.try_borrow_mut() {
                    if let Some(w) = out.as_mut() {
                        let _ = w.flush();
                    }
                }
                say("interrupted again: exiting now (records written so far are kept)");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        }
    });
    Ok(rx)
}
