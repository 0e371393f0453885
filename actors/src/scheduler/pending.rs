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
    pub(super) excluded: Vec<usize>,
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
