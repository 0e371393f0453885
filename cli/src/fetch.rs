//! One URL of the list or frontier modes, from robots.txt to its record: the robots
//! gate, the fetch, the site's address (for WARC), then the record with the page kept.

use std::cell::RefCell;
use std::net::IpAddr;
use std::time::Duration;

use exitcrawl_actors::{CrawlerHandle, Fetch, FetchError, FetchErrorKind, FetchResponse};

use super::archive::{Archive, Resolver};
use super::record::Record;
use super::robots::{Admit, Check, RobotsGate};

/// What a crawl's fetches share.
pub struct Ctx<'a> {
    pub handle: &'a CrawlerHandle,
    pub gate: &'a RobotsGate,
    /// With `--warc`: looks up the site's address after each answer.
    pub resolver: Option<&'a Resolver>,
    pub archive: &'a RefCell<Archive>,
}

/// How a URL ended.
pub enum Outcome {
    Answer(FetchResponse, Option<IpAddr>),
    Failed(FetchError),
    /// robots.txt: disallowed (`None`) or unavailable (why).
    Robots(Option<String>),
    /// robots.txt got no answer: the URL was not sent, and fails with that error.
    Unreachable(FetchErrorKind, String),
    /// Stopped before it was fetched (shutdown while waiting for robots.txt).
    Stopped,
}

impl Outcome {
    /// The crawl stopped before anything of this URL was sent (it waited for robots.txt,
    /// a Crawl-delay turn, or its host's pacing): nothing happened that a record could
    /// tell, and `--resume` fetches it as if it had never been read.
    pub fn never_sent(&self) -> bool {
        match self {
            Outcome::Stopped => true,
            Outcome::Failed(e) => {
                e.kind == FetchErrorKind::Shutdown && e.attempts == 0 && e.throttled == 0
            }
            _ => false,
        }
    }
}

/// Admit, fetch and (with `--warc`) find the site's address for `url`.
pub async fn fetch_one(ctx: &Ctx<'_>, url: String) -> Outcome {
    let spacing = match ctx.gate.check(&url) {
        Check::Go => None,
        Check::Skip(why) => return Outcome::Robots(why),
        Check::Fail(kind, why) => return Outcome::Unreachable(kind, why),
        // Boxed: the wait is rare, and inline it would make every URL's future larger.
        Check::Wait(step) => match Box::pin(ctx.gate.admit(ctx.handle, &url, step)).await {
            Admit::Go(spacing) => spacing,
            Admit::Skip(why) => return Outcome::Robots(why),
            Admit::Fail(kind, why) => return Outcome::Unreachable(kind, why),
            Admit::Stopped => return Outcome::Stopped,
        },
    };
    let result = ctx.handle.fetch(Fetch::get(url)).await;
    // A fetch the stopping crawler did not send leaves the origin's next turn where it
    // was: re-armed, it would hold the origin's other unsent URLs a delay each.
    let unsent = matches!(&result, Err(e) if e.kind == FetchErrorKind::Shutdown && e.attempts == 0);
    if let Some(s) = spacing.filter(|_| !unsent) {
        s.answered();
    }
    match result {
        Ok(r) => {
            let peer = match ctx.resolver {
                Some(res) => res.peer(&r).await,
                None => None,
            };
            Outcome::Answer(r, peer)
        }
        Err(e) => Outcome::Failed(e),
    }
}

/// The record of `url`'s outcome, the page written to the archive first. `stopping`:
/// the crawl is being interrupted (a fetch the crawler dropped is interrupted). `Err`: an
/// output failed.
pub fn settle(
    ctx: &Ctx<'_>,
    url: &str,
    outcome: Outcome,
    waited: Duration,
    stopping: bool,
) -> Result<Record, String> {
    Ok(match outcome {
        Outcome::Answer(r, peer) => {
            let kept = ctx.archive.borrow_mut().keep(&r, peer)?;
            Record::answered(&r, kept)
        }
        Outcome::Failed(e) => Record::failed(&e, waited, stopping),
        Outcome::Robots(why) => Record::robots(url, waited, why),
        Outcome::Unreachable(_, why) => Record::unreachable(url, waited, &why),
        Outcome::Stopped => Record::interrupted(url, waited),
    })
}
