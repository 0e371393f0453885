//! `ExitActor`: one per source IP. Owns the HTTP clients whose connections leave from that
//! address (its fetches' and, apart, its health checks': see `Way` in `request.rs`), the
//! exit's counters, and (in `share.rs`) its count of active requests and its own token
//! bucket (`[[exits]] rate, burst`), which the scheduler reads and updates in place when
//! it chooses an exit.
//!
//! Why an actor per exit: the awc client is `!Send`, so it must live on one Arbiter; an
//! actor gives it a home there and a mailbox the scheduler can reach from anywhere. The
//! actor decides nothing: the scheduler chose this exit and paced the request, the exit
//! just sends it and reports what happened.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use actix::clock::Instant;
use actix::prelude::*;
use awc::error::{PayloadError, SendRequestError};
use awc::http::header::HeaderMap;
use awc::http::{Method, Uri};

mod hop;
mod request;
mod share;

pub(crate) use hop::{is_credential, Hop};
use hop::{location_header, redirect_location};
use request::{Clients, Identity, Way};
pub(crate) use share::ExitShare;

use crate::body::{Body, BodyError, Finished};
use crate::headers::Headers;
use crate::messages::{
    Answer, AttemptFailure, Attempted, Counters, FetchErrorKind, GetCounters, Ping, SendRequest,
};
use crate::net::{classify, refusal, ClientOptions, DnsCache};
use crate::workers::{Owner, Pool};
use exitcrawl::outcome::Failure;

impl Counters {
    /// Count one ended attempt.
    fn record(&mut self, attempted: &Attempted, throttle_statuses: &[u16]) {
        let c = self; // short for the many fields below
        match &attempted.result {
            Ok(answer) => {
                if throttle_statuses.contains(&answer.status) {
                    c.throttled += 1;
                } else {
                    c.ok += 1;
                }
                c.consecutive_failures = 0;
                // 0.8 · old + 0.2 · new, in integer nanoseconds (cheaper than `Duration`'s
                // checked arithmetic, and no float round trip).
                let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                c.latency_ewma = Some(match c.latency_ewma {
                    None => attempted.latency,
                    Some(l) => Duration::from_nanos(
                        nanos(l)
                            .saturating_mul(4)
                            .saturating_add(nanos(attempted.latency))
                            / 5,
                    ),
                });
            }
            Err(f) => {
                c.errors += 1;
                c.consecutive_failures += 1;
                c.last_error = Some(f.message.clone());
            }
        }
    }
}

/// Settings of one exit.
#[derive(Debug, Clone)]
pub struct ExitOptions {
    /// Client settings (source IP, timeouts, pool).
    pub client: ClientOptions,
    /// Body cap, bytes.
    pub max_body_bytes: usize,
    /// Statuses that count as throttles (for the counters).
    pub throttle_statuses: Vec<u16>,
    /// Headers sent with every request (`[crawler.headers]`), after the fetch's own.
    pub headers: Vec<(String, String)>,
    /// Keep cookies per host (`[crawler] cookies`).
    pub cookies: bool,
    /// The private-address rule (`[crawl] allow_private`).
    pub addresses: exitcrawl::address::AddressRule,
}

/// Connections in the pool of an exit's health checks (per scheme, as awc's limit counts):
/// one check at a time goes out through an exit. What the pool costs: no client until the
/// first check, then one awc client (its TLS configuration built again, as each renewal
/// of the fetches' clients does) and at most one idle connection to the health host.
const CHECK_CONNECTIONS: usize = 1;

/// What an exit is, apart from its mailbox: the clients bound to its source IP, and its
/// counters. Built on the Arbiter that uses it (the awc client is `!Send`).
///
/// Why it is separate from [`ExitActor`]: when the exit shares the scheduler's Arbiter
/// (`crawler.arbiters = "single"`), the scheduler holds the core too and starts requests
/// on it directly, saving a mailbox hop per fetch; an exit on an Arbiter of its own is
/// reached through the actor's mailbox. Either way the request runs the same code.
///
/// Requests sent through the exit's mailbox run on worker tasks that live as long as the
/// core (at most `max_concurrent`, started as load needs them; see `crate::workers` for
/// why not a task per request).
pub struct ExitCore {
    opts: ExitOptions,
    /// How its fetches go out.
    crawl: Way,
    /// How its health checks go out: a pool of their own (see [`Way`]).
    checks: Way,
    counters: RefCell<Counters>,
    /// Its active count and token bucket, shared with the scheduler that chooses it.
    share: ExitShare,
    /// Requests waiting for a worker, at most `max_concurrent` workers.
    workers: Pool<SendRequest>,
    me: Weak<ExitCore>,
}

impl Owner for ExitCore {
    type Job = SendRequest;

    fn pool(&self) -> &Pool<SendRequest> {
        &self.workers
    }

    async fn run(self: Rc<Self>, msg: SendRequest) {
        self.attempt(msg).await;
    }
}

impl ExitCore {
    /// Build the exit's clients; call it on the Arbiter that will use it.
    pub(crate) fn new(opts: ExitOptions, dns: DnsCache, share: ExitShare) -> Rc<Self> {
        let checks = ClientOptions {
            max_concurrent: CHECK_CONNECTIONS,
            ..opts.client.clone()
        };
        Rc::new_cyclic(|me| Self {
            share,
            crawl: Way {
                clients: Clients::new(opts.client.clone(), dns.clone(), opts.addresses.clone()),
                identity: Identity::new(&opts.headers, opts.cookies),
            },
            checks: Way {
                clients: Clients::new(checks, dns, opts.addresses.clone()),
                identity: Identity::new(&opts.headers, false),
            },
            workers: Pool::new(opts.client.max_concurrent),
            opts,
            counters: RefCell::default(),
            me: me.clone(),
        })
    }

    /// The exit's counters now.
    pub fn counters(&self) -> Counters {
        Counters {
            active: self.share.active(),
            ..self.counters.borrow().clone()
        }
    }

    /// Send one request on a worker and report the attempt through `msg.done`.
    pub(crate) fn send(&self, msg: SendRequest) {
        self.count_start();
        self.workers.push(&self.me, msg);
    }

    /// Count a request that starts. It is active from the scheduler's reservation to
    /// its settle, which the scheduler counts in the exit's [`ExitShare`].
    fn count_start(&self) {
        self.counters.borrow_mut().total += 1;
    }

    fn count_end(&self, attempted: &Attempted) {
        self.counters
            .borrow_mut()
            .record(attempted, &self.opts.throttle_statuses);
    }

    async fn attempt(&self, msg: SendRequest) {
        let SendRequest {
            url,
            method,
            headers,
            body,
            from_public,
            max_body_bytes,
            truncate_body,
            follow_redirects,
            min_redirects,
            left_origin,
            done,
        } = msg;
        let mut hop = Hop::new(url, method, body)
            .led_from_public(from_public)
            .body_limit(max_body_bytes, truncate_body)
            .redirects(follow_redirects, min_redirects)
            .off_origin(left_origin);
        let attempted = self.exchange(&mut hop, &headers, Instant::now()).await;
        self.count_end(&attempted);
        done.send(attempted);
    }

    /// Count a request that runs on the caller's own task (the scheduler's direct path,
    /// which then runs [`Self::exchange`] and ends the count with [`Running::end`]).
    pub(crate) fn start(&self) -> Running<'_> {
        self.count_start();
        Running(self)
    }

    /// One HTTP exchange, redirects followed, body read; `sent_at` is now, as the caller
    /// last read the clock. The caller counts it. The hop is borrowed, not moved in: each
    /// level of request future that takes it by value holds a copy of it.
    pub(crate) async fn exchange(
        &self,
        hop: &mut Hop,
        headers: &[(String, String)],
        sent_at: Instant,
    ) -> Attempted {
        // `timeout_ms` is the whole request's: resolving, redirects and the body's reading
        // take what is left of it, not a timeout each.
        let deadline = sent_at + self.opts.client.timeout;
        // The first hop is awaited here, and redirects, which are rare, in a boxed future
        // of their own: the common path's future stays small and one level shallower.
        // So is resolving a host the DNS cache does not hold yet, once per TTL; the send
        // after it has what the resolving left (without it, the client's own timeout is
        // the whole request's).
        let way = &self.crawl;
        let resolved = if way.clients.decide(hop) {
            Ok(None)
        } else {
            Box::pin(way.clients.resolve_by(hop, deadline))
                .await
                .and_then(|()| time_left(deadline).map(Some))
        };
        let sent = match resolved {
            Ok(left) => match way.answered(hop, way.send_hop(hop, headers, left).await) {
                Ok(resp) if self.is_followed(hop, &resp) => {
                    Box::pin(self.redirected(way, hop, headers, deadline, resp)).await
                }
                Ok(resp) => Ok((resp, 0)),
                Err(e) => Err(send_failure(&e)),
            },
            Err(failure) => Err(failure),
        };
        let latency = sent_at.elapsed();
        let result = match sent {
            Ok((resp, redirects)) => {
                let final_url = (redirects > 0).then(|| hop.uri.to_string());
                let head = hop.method == Method::HEAD;
                let limit = hop.body_limit.map_or(self.opts.max_body_bytes, |l| {
                    usize::try_from(l).unwrap_or(usize::MAX)
                });
                let read = (head, hop.truncate, deadline);
                let answer = match self.read_answer(resp, final_url, read, limit) {
                    Read::Now(answer) => answer,
                    Read::Later(rest) => rest.await,
                };
                answer.map(|mut a| {
                    a.peer_private = hop.private;
                    a.left_origin = hop.cross_origin;
                    a
                })
            }
            Err(failure) => Err(failure),
        };
        Attempted {
            sent_at: sent_at.into_std(),
            latency,
            result,
        }
    }

    /// Send `hop` by `way`, following redirects; see [`Self::redirected`].
    async fn follow_redirects(
        &self,
        way: &Way,
        hop: &mut Hop,
        headers: &[(String, String)],
        timeout: Option<Duration>,
    ) -> Result<(awc::ClientResponse, usize), AttemptFailure> {
        let deadline = Instant::now() + timeout.unwrap_or(self.opts.client.timeout);
        if !way.clients.decide(hop) {
            way.clients.resolve_by(hop, deadline).await?;
        }
        let resp = way.send_hop(hop, headers, Some(time_left(deadline)?)).await;
        let resp = way.answered(hop, resp).map_err(|e| send_failure(&e))?;
        self.redirected(way, hop, headers, deadline, resp).await
    }

    /// Whether `resp`, the answer to `hop`, is a redirect this exit follows.
    fn is_followed(&self, hop: &Hop, resp: &awc::ClientResponse) -> bool {
        hop.follow_redirects && self.max_redirects(hop) > 0 && location_header(resp).is_some()
    }

    /// The redirects `hop`'s chain may take: the exit's limit, or the fetch's own floor.
    fn max_redirects(&self, hop: &Hop) -> usize {
        self.opts.client.max_redirects.max(hop.min_redirects)
    }

    /// Follow redirects from `resp`, the answer to `hop` (at most `max_redirects`, each
    /// hop moving `hop`), up to the first answer that is not one, all before `deadline`;
    /// returns it with the redirects followed.
    async fn redirected(
        &self,
        way: &Way,
        hop: &mut Hop,
        headers: &[(String, String)],
        deadline: Instant,
        mut resp: awc::ClientResponse,
    ) -> Result<(awc::ClientResponse, usize), AttemptFailure> {
        let max_redirects = self.max_redirects(hop);
        let mut redirects = 0;
        loop {
            let location = match redirect_location(&resp) {
                Some(location) if max_redirects > 0 => location,
                _ => return Ok((resp, redirects)),
            };
            if redirects == max_redirects {
                return Err(AttemptFailure {
                    kind: Failure::Other,
                    error: FetchErrorKind::TooManyRedirects,
                    message: format!(
                        "too many redirects: more than {max_redirects} (last Location: {location})"
                    ),
                });
            }
            hop.follow(resp, &location).await?;
            redirects += 1;
            if !way.clients.decide(hop) {
                way.clients.resolve_by(hop, deadline).await?;
            }
            let sent = way.send_hop(hop, headers, Some(time_left(deadline)?)).await;
            resp = way.answered(hop, sent).map_err(|e| send_failure(&e))?;
        }
    }

    /// Read the body of the final answer (within the size limit and the timeout): at
    /// once when it is all there, which is the common case, else through a future.
    ///
    /// Why not one `async fn`: its future would be part of every request's future, which
    /// is moved and polled on each fetch; the answer and its body in flight made it
    /// several hundred bytes larger.
    fn read_answer(
        &self,
        mut resp: awc::ClientResponse,
        final_url: Option<String>,
        (head, truncate, deadline): (bool, bool, Instant),
        limit: usize,
    ) -> Read<'_> {
        let status = resp.status().as_u16();
        // A HEAD answer, a 204 and a 304 announce a length but carry no body.
        let bodyless = head || status == 204 || status == 304;
        let mut body = match Body::new(resp.headers(), limit, bodyless, truncate) {
            Ok(body) => body,
            Err(e) => return Read::Now(Err(body_failure(&e, limit))),
        };
        if let Some(done) = take_ready(&mut body, &mut resp) {
            return Read::Now(answer(resp, body.end(done), final_url, limit));
        }
        Read::Later(Box::pin(async move {
            // Not all here yet: the rest within what the request's timeout left.
            let mut timed = resp.timeout(deadline.saturating_duration_since(Instant::now()));
            let rest = read_rest(&mut body, &mut timed).await;
            answer(timed, body.end(rest), final_url, limit)
        }))
    }

    /// Fetch the health URL through this exit, on the way of its checks.
    fn ping(self: &Rc<Self>, msg: Ping) -> impl std::future::Future<Output = Result<(), String>> {
        let core = Rc::clone(self);
        async move {
            let uri: Uri = msg
                .url
                .parse()
                .map_err(|e| format!("health check URL {:?} is unusable: {e}", msg.url))?;
            let mut hop = Hop::new(uri, Method::GET, None);
            match core
                .follow_redirects(&core.checks, &mut hop, &[], Some(msg.timeout))
                .await
            {
                Ok((mut resp, _)) if resp.status().is_success() => {
                    // Drain a little so the connection can be reused; the content is unused,
                    // and a body that does not come at once is not waited for.
                    let _ = actix_rt::time::timeout(
                        hop::REDIRECT_DRAIN_WAIT,
                        resp.body().limit(hop::REDIRECT_BODY_LIMIT),
                    )
                    .await;
                    Ok(())
                }
                Ok((resp, _)) => Err(format!("health check answered {}", resp.status())),
                Err(f) => Err(format!("health check failed: {}", f.message)),
            }
        }
    }
}

/// A final answer, read at once or later (see [`ExitCore::read_answer`]).
enum Read<'a> {
    Now(Result<Answer, AttemptFailure>),
    Later(
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Answer, AttemptFailure>> + 'a>>,
    ),
}

/// The answer to hand on: status, headers (moved out, not cloned) and body.
fn answer(
    resp: awc::ClientResponse,
    body: Result<Finished, BodyError>,
    final_url: Option<String>,
    limit: usize,
) -> Result<Answer, AttemptFailure> {
    let body = body.map_err(|e| body_failure(&e, limit))?;
    let status = resp.status().as_u16();
    let mut headers = HeaderMap::new();
    let _ = resp.map_body(|head, payload| {
        headers = std::mem::take(&mut head.headers);
        payload
    });
    if body.decoded.is_some() {
        // The body is decoded now: headers that described the encoded one would lie.
        headers.remove(awc::http::header::CONTENT_ENCODING);
        headers.remove(awc::http::header::CONTENT_LENGTH);
    }
    Ok(Answer {
        status,
        headers: Headers::from_wire(headers),
        body: body.body,
        wire_bytes: body.wire_bytes,
        content_encoding: body.decoded,
        final_url,
        peer_private: None,
        truncated: body.truncated,
        left_origin: false,
    })
}

/// What is left before `deadline`; none left is the request's timeout.
fn time_left(deadline: Instant) -> Result<Duration, AttemptFailure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(send_failure(&SendRequestError::Timeout));
    }
    Ok(left)
}

/// A request running on the caller's task (see [`ExitCore::start`]): dropped
/// unfinished (a shutdown's grace period ran out), the counters are as if it had never
/// started, apart from `total` (the scheduler releases its active count, and counts the
/// request in `exitcrawl_requests_total` as one without an answer).
pub(crate) struct Running<'a>(&'a ExitCore);

impl Running<'_> {
    /// Count the request's end.
    pub(crate) fn end(self, attempted: &Attempted) {
        self.0.count_end(attempted);
    }
}

/// One exit's mailbox: requests from a scheduler on another Arbiter, health pings,
/// counter reads.
pub struct ExitActor {
    opts: ExitOptions,
    dns: DnsCache,
    share: ExitShare,
    /// Built when the actor starts, on its own Arbiter, unless given.
    core: Option<Rc<ExitCore>>,
}

impl ExitActor {
    /// An exit; its client is built when the actor starts, on the actor's own Arbiter.
    pub(crate) fn new(opts: ExitOptions, dns: DnsCache, share: ExitShare) -> Self {
        Self {
            opts,
            dns,
            share,
            core: None,
        }
    }

    /// An exit around a core built on the current Arbiter (shared with the scheduler).
    pub(crate) fn with_core(core: Rc<ExitCore>, dns: DnsCache) -> Self {
        Self {
            opts: core.opts.clone(),
            dns,
            share: core.share.clone(),
            core: Some(core),
        }
    }

    fn core(&mut self) -> &Rc<ExitCore> {
        let (opts, dns, share) = (&self.opts, &self.dns, &self.share);
        self.core
            .get_or_insert_with(|| ExitCore::new(opts.clone(), dns.clone(), share.clone()))
    }
}

impl Actor for ExitActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Requests are many and small: the default mailbox of 16 would make the scheduler
        // wait on a busy exit for no reason (the scheduler already bounds what it sends).
        ctx.set_mailbox_capacity(4096);
        self.core();
    }
}

/// Map an awc send error to the fetch error kind and a message that keeps the OS error.
fn send_failure(err: &SendRequestError) -> AttemptFailure {
    if let Some(refused) = refusal(err) {
        // The private-address rule: final, nothing was sent to the target.
        let error = match refused.stage {
            crate::net::Stage::Refused => FetchErrorKind::PrivateAddress,
            _ => FetchErrorKind::Other,
        };
        return AttemptFailure {
            kind: Failure::Other,
            error,
            message: refused.error.to_string(),
        };
    }
    let kind = classify(err);
    let message = match (kind, err) {
        // awc words an EOF before the answer as a connect failure ("connector has been
        // disconnected"); say what the site did.
        (Failure::Reset, _) => {
            format!("connection closed or reset by the site without a complete answer ({err})")
        }
        (Failure::Other, SendRequestError::Response(e)) => {
            format!("malformed HTTP response: {e}")
        }
        (Failure::OutOfFiles, _) => format!(
            "{err}: this process is out of file descriptors (raise `ulimit -n`, or lower \
             crawler.pool_hosts or crawler.concurrency)"
        ),
        _ => err.to_string(),
    };
    let error = match (kind, err) {
        (Failure::Other, SendRequestError::Response(_)) => FetchErrorKind::Malformed,
        (_, SendRequestError::Connect(awc::error::ConnectError::Resolver(_))) => {
            FetchErrorKind::Dns
        }
        _ => fetch_error(kind),
    };
    AttemptFailure {
        kind,
        error,
        message,
    }
}

/// The record's kind of a send failure classed `kind`.
fn fetch_error(kind: Failure) -> FetchErrorKind {
    match kind {
        Failure::LocalConnect | Failure::OutOfFiles => FetchErrorKind::LocalConnect,
        Failure::WrongFamily => FetchErrorKind::AddressFamily,
        Failure::Proxy => FetchErrorKind::Proxy,
        Failure::ConnectRefused => FetchErrorKind::ConnectRefused,
        Failure::Timeout => FetchErrorKind::Timeout,
        Failure::Reset => FetchErrorKind::Reset,
        Failure::Unresolved => FetchErrorKind::Dns,
        Failure::Other => FetchErrorKind::Other,
    }
}

/// Read what has arrived; `Some` when the body ended (or failed), `None` when more is to
/// come. The body timeout is armed only if the body is not all there already: a short
/// answer usually arrives whole with its head, and arming the timer cost more than
/// reading such a body.
fn take_ready(body: &mut Body, resp: &mut awc::ClientResponse) -> Option<Result<(), BodyError>> {
    use futures_util::{FutureExt as _, StreamExt as _};
    loop {
        match resp.next().now_or_never()? {
            Some(chunk) => {
                if let Err(e) = body.append(chunk) {
                    return Some(Err(e));
                }
            }
            None => return Some(Ok(())),
        }
    }
}

async fn read_rest(body: &mut Body, resp: &mut awc::ClientResponse) -> Result<(), BodyError> {
    use futures_util::StreamExt as _;
    while let Some(chunk) = resp.next().await {
        body.append(chunk)?;
    }
    Ok(())
}

fn body_failure(err: &BodyError, limit: usize) -> AttemptFailure {
    let (kind, error) = match err {
        BodyError::TooLarge(over) => {
            return AttemptFailure {
                kind: Failure::Other,
                error: FetchErrorKind::BodyTooLarge,
                message: format!("response body larger than the limit of {limit} bytes {over}"),
            }
        }
        // `Body::end` makes an answer of a full truncating body; never a failure.
        BodyError::Full => (Failure::Other, FetchErrorKind::BodyTooLarge),
        BodyError::Undecodable { .. } => (Failure::Other, FetchErrorKind::DecodeError),
        // A body read until the close whose encoded stream had not ended: cut short.
        BodyError::Cut { .. } => (Failure::Reset, FetchErrorKind::IncompleteBody),
        BodyError::Read(e) => read_failure(e),
    };
    AttemptFailure {
        kind,
        error,
        message: err.to_string(),
    }
}

/// How reading a body off the connection failed. A body cut short is the network's or
/// the site's passing fault, worth another try (a reset to the scheduler and the limiter);
/// framing garbage would come again, so it is not.
fn read_failure(err: &PayloadError) -> (Failure, FetchErrorKind) {
    use std::io::ErrorKind;
    let io = match err {
        // The connection closed before the length or the last chunk (the decoder patched
        // in patches/actix-http says so).
        PayloadError::Incomplete(None) => return (Failure::Reset, FetchErrorKind::IncompleteBody),
        // awc hands every read error on as `Incomplete(Some(..))`.
        PayloadError::Incomplete(Some(e)) | PayloadError::Io(e) => e,
        _ => return (Failure::Reset, FetchErrorKind::Reset),
    };
    match io.kind() {
        // awc's body timeout.
        ErrorKind::TimedOut => (Failure::Timeout, FetchErrorKind::Timeout),
        // A TLS stream that ended without its close_notify: what came may be cut short.
        ErrorKind::UnexpectedEof => (Failure::Reset, FetchErrorKind::IncompleteBody),
        // actix-http's chunked decoder words a garbage chunk line so; a socket read never
        // does.
        ErrorKind::InvalidInput => (Failure::Other, FetchErrorKind::Malformed),
        _ => (Failure::Reset, FetchErrorKind::Reset),
    }
}

impl Handler<SendRequest> for ExitActor {
    type Result = ();

    fn handle(&mut self, msg: SendRequest, _ctx: &mut Self::Context) {
        self.core().send(msg);
    }
}

impl Handler<Ping> for ExitActor {
    type Result = ResponseFuture<Result<(), String>>;

    fn handle(&mut self, msg: Ping, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(self.core().ping(msg))
    }
}

impl Handler<GetCounters> for ExitActor {
    type Result = MessageResult<GetCounters>;

    fn handle(&mut self, _msg: GetCounters, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.core().counters())
    }
}

#[cfg(test)]
mod tests;
