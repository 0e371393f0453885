//! One URL of the list or frontier modes, from robots.txt to its record: the robots
//! gate, the fetch, the site's address (for WARC), then the record with the page kept.

use std::cell::RefCell;
use std::net::IpAddr;
use std::time::Duration;

use exitcrawl_actors::{CrawlerHandle, Fetch, FetchError, FetchErrorKind, FetchResponse};

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
        Fetch::get(url.clone()).no_redirects()
    } else {
        Fetch::get(url.clone())
    };
    let mut result = send(ctx, fetch, spacing).await;
    if hops && result.as_ref().is_ok_and(|r| r.redirect_target().is_some()) {
        // Boxed: a redirect is rare, and inline it would make every URL's future larger.
        result = Box::pin(follow_redirects(ctx, url, result)).await;
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
async fn admit(ctx: &Ctx<'_>, url: &str) -> Result<Option<Spacing>, Outcome> {
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
/// not followed …`. A hop goes through the exit that read the redirect (one address,
/// one cookie jar), may not reach a private address from a public one (as a link may
/// not), and the whole chain is one answer for `listed`: `final_url` where it ended,
/// attempts, throttles and time summed, at most `crawler.max_redirects` hops.
async fn follow_redirects(
    ctx: &Ctx<'_>,
    listed: String,
    mut result: Result<FetchResponse, FetchError>,
) -> Result<FetchResponse, FetchError> {
    let max = ctx.handle.settings().crawler.max_redirects;
    let (mut attempts, mut throttled, mut elapsed) = (0, 0, Duration::ZERO);
    let mut hops = 0;
    let first = url::Url::parse(&listed).ok().map(|u| u.origin());
    let mut left_origin = false;
    loop {
        let mut r = match result {
            Ok(r) => r,
            Err(mut e) => {
                e.url = listed;
                e.attempts += attempts;
                e.throttled += throttled;
                return Err(e);
            }
        };
        let Some(target) = r.redirect_target() else {
            r.final_url = (hops > 0).then(|| std::mem::take(&mut r.url));
            r.url = listed;
            r.attempts += attempts;
            r.throttled += throttled;
            r.elapsed += elapsed;
            return Ok(r);
        };
        let fail = |kind: FetchErrorKind, message: String| {
            let mut e = FetchError::new(kind, message, listed.clone());
            e.attempts = attempts + r.attempts;
            e.throttled = throttled + r.throttled;
            e.exit = Some(std::sync::Arc::clone(&r.exit));
            Err(e)
        };
        let next = match target {
            Ok(next) if hops == max => {
                let why = format!("too many redirects: more than {max} (last Location: {next})");
                return fail(FetchErrorKind::TooManyRedirects, why);
            }
            Ok(next) => next,
            Err(why) => return fail(FetchErrorKind::Other, why),
        };
        let spacing = match admit(ctx, next.as_str()).await {
            Ok(spacing) => spacing,
            Err(Outcome::Robots(why)) => {
                let why = why.unwrap_or_else(|| "robots.txt disallows it".into());
                let message = format!("redirect to {next} not followed: {why}");
                return fail(FetchErrorKind::Robots, message);
            }
            Err(Outcome::Unreachable(kind, why)) => {
                return fail(kind, format!("redirect to {next} not followed: {why}"));
            }
            Err(_) => {
                let message = format!("stopped before the redirect to {next} was followed");
                return fail(FetchErrorKind::Shutdown, message);
            }
        };
        attempts += r.attempts;
        throttled += r.throttled;
        elapsed += r.elapsed;
        hops += 1;
        left_origin |= first.as_ref() != Some(&next.origin());
        let fetch = Fetch::get(next.as_str())
            .no_redirects()
            .off_origin(left_origin)
            .found_on_public(r.peer_private == Some(false))
            .prefer(&*r.exit);
        result = send(ctx, fetch, spacing).await;
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
