use std::sync::Arc;

use actix::clock::Instant;
use awc::http::Uri;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::{ExitSlot, Reply};
use crate::messages::{Fetch, FetchError, FetchErrorKind};

pub(super) struct Pending {
    pub(super) fetch: Fetch,
    pub(super) host: Arc<str>,
    /// Taken when the reply is sent; a pending fetch dropped without one (shutdown,
    /// cancelled attempt) answers `Shutdown` from `Drop`, so there is always a reply.
    pub(super) reply: Option<oneshot::Sender<Reply>>,
    /// `exitcrawl_urls_done_total`, counted when the pending fetch ends (in `Drop`).
    pub(super) done: prometheus_client::metrics::counter::Counter,
    /// Holds a queue slot while the fetch waits in the queue.
    pub(super) slot: Option<OwnedSemaphorePermit>,
    /// Requests sent (throttled ones too).
    pub(super) attempts: u32,
    /// Of those, answered with a throttle.
    pub(super) throttled: u32,
    /// The retry budget deferred this fetch's retry: ask it again before the retry.
    pub(super) awaits_budget: bool,
    /// The exits that failed this fetch on our side, until they come back.
    pub(super) excluded: Excluded,
    pub(super) arrived: Instant,
    /// The URL as sent, parsed at admission: it differs from the one requested for an IDN
    /// host (punycode) or a non-ASCII path (percent-encoded); replies carry the URL as
    /// requested. The first attempt takes it (cloning a `Uri` allocates); a retry parses
    /// the URL again.
    pub(super) uri: Option<Uri>,
    /// The last failure on our side (nothing sent), said when no exit is left to try.
    pub(super) local_failure: Option<(FetchErrorKind, String)>,
    /// The last failure on our side was this process's, not the exit's (out of file
    /// descriptors): it passes, so with every exit tried the fetch waits for it.
    pub(super) local_passes: bool,
    /// Since when every exit tried has failed on our side that way, and when they are all
    /// tried again (see `Scheduler::no_exit`).
    pub(super) local: Option<(Instant, Instant)>,
    pub(super) waited: bool,
    /// Fetches that were waiting for its host when its last attempt was sent: the work a
    /// faster rate would speed up (`exitcrawl::aimd::Response::backlog`).
    pub(super) backlog: u32,
    pub(super) last_exit: Option<usize>,
    /// The name of that exit, once an attempt went out through it: the reply of a fetch
    /// dropped unanswered (see `Drop`) says it, as [`Pending::fail`] does.
    pub(super) last_exit_name: Option<Arc<str>>,
    /// The exit whose attempt failed, for the retry to go around (`select::Request::avoid`).
    pub(super) avoid: Option<usize>,
    /// One span per fetch: every event about it (attempts, throttles, retries) carries it.
    /// Made on the first event (see [`Pending::span`]): most fetches have none, and a span
    /// costs a few hundred instructions to make and drop even when nothing records it.
    pub(super) span: Option<tracing::Span>,
}

/// The exits that failed a fetch on our side (nothing sent), each until it comes back
/// from an ejection: an exit back in service may work now, wherever the fetch is when it
/// comes back (queued, in flight at another exit, waiting for the shared budget's word,
/// on its way back from the direct path). So nothing walks the fetches when an exit
/// returns: each entry keeps the exit's count of returns at the failure
/// ([`ExitSlot::returns`]), and an entry whose exit has returned since is void where the
/// list is read.
#[derive(Debug, Default)]
pub(super) struct Excluded {
    exits: Vec<usize>,
    /// Per entry of `exits`: that exit's returns when it failed the fetch.
    returns: Vec<u64>,
}

impl Excluded {
    /// Exit `i`, whose returns are `returns` now, failed the fetch.
    pub(super) fn push(&mut self, i: usize, returns: u64) {
        self.exits.push(i);
        self.returns.push(returns);
    }

    pub(super) fn clear(&mut self) {
        self.exits.clear();
        self.returns.clear();
    }

    /// The exits still excluded, those that came back since they failed the fetch dropped;
    /// `returns` gives an exit's returns now.
    pub(super) fn current(&mut self, returns: impl Fn(usize) -> u64) -> &[usize] {
        let mut kept = 0;
        for k in 0..self.exits.len() {
            let (x, r) = (self.exits[k], self.returns[k]);
            if returns(x) == r {
                self.exits[kept] = x;
                self.returns[kept] = r;
                kept += 1;
            }
        }
        self.exits.truncate(kept);
        self.returns.truncate(kept);
        &self.exits
    }

    /// Exit `i` failed the fetch and has not come back since.
    pub(super) fn holds(&self, i: usize, returns: impl Fn(usize) -> u64) -> bool {
        self.exits
            .iter()
            .zip(&self.returns)
            .any(|(&x, &r)| x == i && returns(x) == r)
    }
}

impl Pending {
    /// An attempt reached the site: the fetch starts a new round of exits. An exit that
    /// failed it locally before is tried again (what failed then may have passed, and
    /// with its other exits ejected meanwhile the fetch would end on that old error), and
    /// a later shortage on our side starts a wait of its own (see `Scheduler::no_exit`).
    pub(super) fn reached_site(&mut self) {
        self.excluded.clear();
        self.local_failure = None;
        self.local = None;
        self.local_passes = false;
    }

    /// The attempt about to go (counted already) is the fetch's first send anywhere: it
    /// earns its host's retry budget a deposit. A fetch moved to another exit (nothing
    /// reached the site, so the attempt was not counted) sends its first attempt again,
    /// but has earned its deposit: each move depositing again let a host whose exits fail
    /// locally retry more of its errors than the budget's ratio allows.
    pub(super) fn first_send(&self) -> bool {
        self.attempts == 1 && self.last_exit.is_none()
    }

    /// Its caller dropped the reply's receiver: nobody waits for the answer.
    pub(super) fn abandoned(&self) -> bool {
        self.reply.as_ref().is_some_and(oneshot::Sender::is_closed)
    }

    /// Attempts that were not throttles: what `max_retries` bounds.
    pub(super) fn errors(&self) -> u32 {
        self.attempts.saturating_sub(self.throttled)
    }

    /// The attempt being settled retries a page that failed before (its error, if any,
    /// says nothing of the site's load: `exitcrawl::aimd::classify::of_retry`).
    pub(super) fn is_retry(&self) -> bool {
        self.errors() > 1
    }

    /// The fetch's span, made on first use.
    pub(super) fn span(&mut self) -> &tracing::Span {
        let (url, host) = (&self.fetch.url, &self.host);
        self.span.get_or_insert_with(|| {
            // At WARN, not INFO: the default filter (`warn`) would otherwise drop the
            // span, and the warnings operators do see ("retries exhausted") would lose
            // url and host.
            tracing::warn_span!("fetch", url = %exitcrawl::redact::Masked(url), host = %host)
        })
    }

    pub(super) fn fail(
        mut self,
        kind: FetchErrorKind,
        message: impl Into<String>,
        exits: &[ExitSlot],
    ) {
        let err = FetchError {
            kind,
            message: message.into(),
            url: self.fetch.url.clone(),
            exit: self.last_exit.map(|i| Arc::clone(&exits[i].name)),
            attempts: self.attempts,
            throttled: self.throttled,
        };
        self.answer(Err(err));
    }

    pub(super) fn answer(&mut self, reply: Reply) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(reply);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.done.inc();
        if self.reply.is_some() {
            let err = FetchError {
                kind: FetchErrorKind::Shutdown,
                message: "crawler shut down before this fetch finished".into(),
                url: std::mem::take(&mut self.fetch.url),
                exit: self.last_exit_name.take(),
                attempts: self.attempts,
                throttled: self.throttled,
            };
            self.answer(Err(err));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Excluded;

    #[test]
    fn an_exclusion_holds_until_its_exit_comes_back() {
        let mut returns = [0u64, 3, 1];
        let mut ex = Excluded::default();
        ex.push(0, returns[0]);
        ex.push(1, returns[1]);
        ex.push(2, returns[2]);
        assert_eq!(ex.current(|x| returns[x]), [0, 1, 2]);
        returns[1] += 1;
        assert!(ex.holds(0, |x| returns[x]));
        assert!(!ex.holds(1, |x| returns[x]), "exit 1 came back");
        assert_eq!(ex.current(|x| returns[x]), [0, 2]);
        // Failed again after its return: excluded again, until its next.
        ex.push(1, returns[1]);
        returns[0] += 1;
        assert_eq!(ex.current(|x| returns[x]), [2, 1]);
        ex.clear();
        assert!(ex.current(|x| returns[x]).is_empty());
    }
}
