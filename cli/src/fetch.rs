//! One URL of the list or frontier modes, from robots.txt to its record: the robots
//! gate, the fetch, the site's address (for WARC), then the record with the page kept.

use std::cell::RefCell;
use std::net::IpAddr;
use std::time::Duration;

use exitcrawl_actors::{
    ChainStep, CrawlerHandle, Fetch, FetchError, FetchErrorKind, FetchResponse, RedirectChain,
};

use super::archive::{Archive, Resolver};
use super::record::Record;
use super::robots::{Admit, Check, RobotsGate, Spacing};

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

/// Admit, fetch and (with `--warc`) find the site's address for `url`. With robots.txt
/// obeyed, redirects are followed here, each hop admitted as the URL was (see
/// [`follow_redirects`]); without, the exit follows them.
pub async fn fetch_one(ctx: &Ctx<'_>, url: String) -> Outcome {
    let spacing = match admit(ctx, &url).await {
        Ok(spacing) => spacing,
        Err(outcome) => return outcome,
    };
    let hops = ctx.gate.enabled() && ctx.handle.settings().crawler.max_redirects > 0;
    let fetch = if hops {
        Fetch::get(url).no_redirects()
    } else {
        Fetch::get(url)
    };
    let mut result = send(ctx, fetch, spacing).await;
    if let (true, Ok(r)) = (hops, &result) {
        if r.redirect_target().is_some() {
            let listed = r.url.clone();
            // Boxed: a redirect is rare, and inline it would make every URL's future
            // larger.
            result = Box::pin(follow_redirects(ctx, listed, result)).await;
        }
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

/// What robots.txt says of `url`: go (with a Crawl-delay turn), or the outcome instead.
/// Once the crawl is stopping nothing more is admitted: a robots.txt fetch the stop cut
/// short leaves its origin without an answer, which is no word of the site's.
async fn admit(ctx: &Ctx<'_>, url: &str) -> Result<Option<Spacing>, Outcome> {
    if ctx.gate.stopped() {
        return Err(Outcome::Stopped);
    }
    match ctx.gate.check(url) {
        Check::Go => Ok(None),
        Check::Skip(why) => Err(Outcome::Robots(why)),
        Check::Fail(kind, why) => Err(Outcome::Unreachable(kind, why)),
        // Boxed: the wait is rare, and inline it would make every URL's future larger.
        Check::Wait(step) => match Box::pin(ctx.gate.admit(ctx.handle, url, step)).await {
            Admit::Go(spacing) => Ok(spacing),
            Admit::Skip(why) => Err(Outcome::Robots(why)),
            Admit::Fail(kind, why) => Err(Outcome::Unreachable(kind, why)),
            Admit::Stopped => Err(Outcome::Stopped),
        },
    }
}

/// Send `fetch`; with a Crawl-delay, the origin's next turn is timed from its answer.
async fn send(
    ctx: &Ctx<'_>,
    fetch: Fetch,
    spacing: Option<Spacing>,
) -> Result<FetchResponse, FetchError> {
    let result = ctx.handle.fetch(fetch).await;
    // A fetch the stopping crawler did not send leaves the origin's next turn where it
    // was: re-armed, it would hold the origin's other unsent URLs a delay each.
    let unsent = matches!(&result, Err(e) if e.kind == FetchErrorKind::Shutdown && e.attempts == 0);
    if let Some(s) = spacing.filter(|_| !unsent) {
        s.answered();
    }
    result
}

/// Follow the redirects of `listed`'s answer `result`, each hop asked of robots.txt (and
/// its Crawl-delay) as a listed URL is, so that a page that redirects into a disallowed
/// path, or to another origin's, is not fetched there: it ends `robots: redirect to …
/// not followed …`. The hops are as the exits make them ([`RedirectChain`]), and the
/// chain is one answer for `listed`.
async fn follow_redirects(
    ctx: &Ctx<'_>,
    listed: String,
    mut result: Result<FetchResponse, FetchError>,
) -> Result<FetchResponse, FetchError> {
    let max = ctx.handle.settings().crawler.max_redirects;
    let mut chain = RedirectChain::new(listed, max);
    loop {
        let hop = match result.map(|r| chain.step(r)) {
            Ok(ChainStep::Hop(hop)) => hop,
            Ok(ChainStep::Answer(r)) => return Ok(r),
            Ok(ChainStep::Failed(e)) => return Err(e),
            Err(e) => return Err(chain.failed(e)),
        };
        let spacing = match admit(ctx, hop.url.as_str()).await {
            Ok(spacing) => spacing,
            Err(Outcome::Robots(why)) => {
                let why = why.as_deref().unwrap_or("robots.txt disallows it");
                return Err(chain.not_followed(&hop, FetchErrorKind::Robots, why));
            }
            Err(Outcome::Unreachable(kind, why)) => {
                return Err(chain.not_followed(&hop, kind, &why));
            }
            Err(_) => {
                let why = "the crawl stopped first";
                return Err(chain.not_followed(&hop, FetchErrorKind::Shutdown, why));
            }
        };
        result = send(ctx, hop.fetch(), spacing).await;
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
