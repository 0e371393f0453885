//! Ctrl-C and SIGTERM: the first stops the crawl (the loop gets a message), a second
//! flushes `--out`, writes the summary of what is recorded (replacing `--summary` in one
//! step) and exits with 130 at once.

use std::io::{self, Write};
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use tokio::sync::mpsc;

use super::output::SharedOut;
use super::term::say;
use super::EXIT_INTERRUPTED;

/// The first stop signal arrives on this channel.
pub type Stop = mpsc::UnboundedReceiver<()>;

/// What a second signal runs before exiting (the summary so far).
pub type OnForcedExit = Rc<dyn Fn() -> LocalBoxFuture<'static, ()>>;

/// How long a second signal waits for [`OnForcedExit`].
const FORCED_EXIT_WORK: Duration = Duration::from_secs(3);

/// Watch SIGINT and SIGTERM on the current System.
pub fn spawn_signals(out: SharedOut, on_forced_exit: Option<OnForcedExit>) -> io::Result<Stop> {
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
                say("interrupted again: exiting now (records written so far are kept)");
                if let Some(work) = &on_forced_exit {
                    let _ = actix_rt::time::timeout(FORCED_EXIT_WORK, work()).await;
                }
                // Nothing runs between the summary and this flush (no await): the
                // summary counts exactly the records the file keeps.
                if let Ok(mut out) = out.try_borrow_mut() {
                    if let Some(w) = out.as_mut() {
                        let _ = w.flush();
                    }
                }
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        }
    });
    Ok(rx)
}
