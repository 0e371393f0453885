//! A DNS cache with a fixed TTL, shared by all exits.
//!
//! Why: awc's default connector resolves the host name on every new connection, with a
//! blocking `getaddrinfo` on tokio's blocking pool. A crawl opens many connections to one
//! host (several per exit, more again whenever a site closes keep-alive connections), so
//! without a cache the crawler would resolve the same name hundreds of times a minute.
//!
//! What it does:
//! - caches every address a name resolves to (both families), keyed by the lowercased host
//!   name, for `ttl`; each exit's connector then keeps only the addresses of its own family;
//! - IP-literal hosts (`127.0.0.1`, `[::1]`) bypass it entirely: nothing to resolve;
//! - one resolution of a name at a time: callers that ask while it runs wait for it, and
//!   its answer, addresses or error, is every waiter's (a burst of 64 first connections
//!   makes one query, not 64, also with a TTL of zero). It runs on a task of its own, so a
//!   caller that gives up (its connect timed out) leaves it to end for the others, and the
//!   next caller waits for it instead of starting another `getaddrinfo` beside it;
//! - failures are remembered too, for less: a name that does not exist or has no address
//!   for `min(ttl, 60 s)`, a resolver's temporary failure for `min(ttl, 5 s)`; the process
//!   out of file descriptors never (`getaddrinfo` then says the name does not exist: it
//!   could not open `/etc/hosts` or a socket, see [`system_lookup`]);
//! - names past their time are swept out now and then, so a broad crawl's cache holds
//!   about the names of the last TTL, not every name it ever resolved.
//!
//! The cache is `Send + Sync` (an `Arc` inside), so one instance can be cloned into every
//! exit's Arbiter. Expiry uses tokio's clock so a test with paused time can move past the
//! TTL without waiting.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use exitcrawl::address::unmapped;

/// The future a resolver returns: the addresses of one host name.
pub type ResolveFuture = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

type ResolveFn = dyn Fn(&str) -> ResolveFuture + Send + Sync;

/// How long a name that does not exist (or has no address) is remembered, at most.
const NEGATIVE_TTL: Duration = Duration::from_secs(60);

/// How long a resolver's temporary failure is remembered, at most: long enough that a
/// burst of fetches to a name whose DNS server is down asks it once, short enough that
/// their retries find it back.
const TEMPORARY_TTL: Duration = Duration::from_secs(5);

/// New names between two sweeps, at least (see [`Names::sweep_due`]).
const SWEEP_EVERY: usize = 256;

/// A cloneable, thread-safe DNS cache with a fixed TTL. See the module docs.
#[derive(Clone)]
pub struct DnsCache {
    inner: Arc<Inner>,
}

struct Inner {
    ttl: Duration,
    resolver: Box<ResolveFn>,
    /// Held only to look up, start or settle a name; never across an `await`.
    names: Mutex<Names>,
    resolutions: AtomicU64,
    hits: AtomicU64,
}

/// The names the cache knows, and when it last swept them.
struct Names {
    map: HashMap<String, Entry>,
    /// New names since the last sweep.
    added: usize,
    /// Names kept by the last sweep.
    kept: usize,
    swept_at: Instant,
}

enum Entry {
    /// Being resolved: the answer comes on the channel once the resolution ends.
    Resolving(watch::Receiver<Option<Answer>>),
    /// Resolved; fresh until `expires`.
    Known { answer: Answer, expires: Instant },
}

/// A resolution's answer, as every waiter gets it.
type Answer = Result<Arc<[IpAddr]>, Arc<Failed>>;

/// A resolver's error, kept to be given to every caller as an `io::Error` of its own.
#[derive(Debug)]
struct Failed {
    kind: io::ErrorKind,
    os: Option<i32>,
    message: String,
}

impl Failed {
    fn new(e: &io::Error) -> Self {
        Self {
            kind: e.kind(),
            os: e.raw_os_error(),
            message: e.to_string(),
        }
    }

    fn to_io(&self) -> io::Error {
        match self.os {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(self.kind, self.message.clone()),
        }
    }
}

fn answered(answer: &Answer) -> io::Result<Arc<[IpAddr]>> {
    match answer {
        Ok(addrs) => Ok(Arc::clone(addrs)),
        Err(failed) => Err(failed.to_io()),
    }
}

/// What [`DnsCache::lookup`] found for a name: an answer, or a resolution to wait for.
enum Found {
    Answer(Answer),
    Wait(watch::Receiver<Option<Answer>>),
}

impl fmt::Debug for DnsCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DnsCache")
            .field("ttl", &self.inner.ttl)
            .field("resolutions", &self.resolutions())
            .field("hits", &self.hits())
            .finish_non_exhaustive()
    }
}

impl DnsCache {
    /// A cache in front of the system resolver ([`system_lookup`]: `getaddrinfo` on
    /// tokio's blocking pool, so it honours `/etc/hosts`).
    ///
    /// A `ttl` of zero disables caching (every lookup resolves, failures included) but
    /// still shares one resolution among the lookups of a host that ask while it runs.
    pub fn new(ttl: Duration) -> Self {
        Self::with_resolver(ttl, |host: &str| {
            let host = host.to_owned();
            async move {
                tokio::task::spawn_blocking(move || system_lookup(&host))
                    .await
                    .unwrap_or_else(|e| Err(io::Error::other(e)))
            }
        })
    }

    /// A cache in front of a custom resolver (tests count or script resolutions with it).
    /// Its future runs on a task of its own (`tokio::spawn`), hence `Send`.
    pub fn with_resolver<F, Fut>(ttl: Duration, resolve: F) -> Self
    where
        F: Fn(&str) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = io::Result<Vec<IpAddr>>> + Send + 'static,
    {
        let resolver: Box<ResolveFn> = Box::new(move |host| Box::pin(resolve(host)));
        Self {
            inner: Arc::new(Inner {
                ttl,
                resolver,
                names: Mutex::new(Names {
                    map: HashMap::new(),
                    added: 0,
                    kept: 0,
                    swept_at: Instant::now(),
                }),
                resolutions: AtomicU64::new(0),
                hits: AtomicU64::new(0),
            }),
        }
    }

    /// The TTL every entry gets.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// How many times the underlying resolver has been called (misses and refreshes).
    pub fn resolutions(&self) -> u64 {
        self.inner.resolutions.load(Ordering::Relaxed)
    }

    /// How many names the cache holds (fresh, past their time, or being resolved).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.names().map.len()
    }

    /// How many lookups were answered without a resolution of their own: from the cache,
    /// or by waiting for one under way.
    pub fn hits(&self) -> u64 {
        self.inner.hits.load(Ordering::Relaxed)
    }

    /// The addresses of `host` if they are at hand without waiting: an IP literal, or a
    /// fresh cache entry not being refreshed. `None` means: call [`Self::lookup`].
    ///
    /// Asked for every request a private-address rule decides, so it allocates nothing:
    /// a literal's address is returned in place, and a name already in lowercase (as
    /// URLs mostly give them) is looked up as it is.
    pub fn cached(&self, host: &str) -> Option<Addrs> {
        if let Some(ip) = parse_ip_literal(host) {
            return Some(Addrs::Literal([ip]));
        }
        let key = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(host.to_ascii_lowercase())
        } else {
            Cow::Borrowed(host)
        };
        let names = self.inner.names();
        match names.map.get(&*key)? {
            Entry::Known {
                answer: Ok(addrs),
                expires,
            } if Instant::now() < *expires => Some(Addrs::Resolved(Arc::clone(addrs))),
            _ => None,
        }
    }

    /// The addresses of `host`, from the cache while fresh, else freshly resolved (or
    /// from the resolution of it under way).
    ///
    /// `host` may be an IP literal, bracketed or not (`[::1]` is what `Uri::host` gives for
    /// IPv6); those are returned as they are without touching the cache or the counters.
    /// An empty answer is an error (`NotFound`), never an empty list.
    pub async fn lookup(&self, host: &str) -> io::Result<Arc<[IpAddr]>> {
        if let Some(ip) = parse_ip_literal(host) {
            return Ok(Arc::from([ip]));
        }
        let key = host.to_ascii_lowercase();
        let mut waiting = match self.find_or_start(&key) {
            Found::Answer(answer) => return answered(&answer),
            Found::Wait(rx) => rx,
        };
        let answer = match waiting.wait_for(Option::is_some).await {
            Ok(answer) => answer.clone(),
            Err(_) => None,
        };
        match answer {
            Some(answer) => answered(&answer),
            // The resolution's task was dropped unfinished (its runtime shut down, or the
            // resolver panicked): this caller resolves for itself, and keeps nothing.
            None => {
                self.inner.resolutions.fetch_add(1, Ordering::Relaxed);
                answered(&answer_of(&key, (self.inner.resolver)(&key).await))
            }
        }
    }

    /// `key`'s fresh answer (a hit), the resolution under way to wait for (a hit too), or
    /// a resolution started now.
    fn find_or_start(&self, key: &str) -> Found {
        let now = Instant::now();
        let mut names = self.inner.names();
        match names.map.get(key) {
            Some(Entry::Known { answer, expires }) if now < *expires => {
                self.inner.hits.fetch_add(1, Ordering::Relaxed);
                tracing::trace!(host = %key, "dns cache hit");
                return Found::Answer(answer.clone());
            }
            Some(Entry::Resolving(rx)) if rx.has_changed().is_ok() => {
                self.inner.hits.fetch_add(1, Ordering::Relaxed);
                return Found::Wait(rx.clone());
            }
            _ => {}
        }
        let (tx, rx) = watch::channel(None);
        if names
            .map
            .insert(key.to_owned(), Entry::Resolving(rx.clone()))
            .is_none()
        {
            names.added += 1;
            if names.sweep_due(now, self.inner.ttl) {
                names.sweep(now);
            }
        }
        drop(names);
        self.inner.resolutions.fetch_add(1, Ordering::Relaxed);
        let resolving = (self.inner.resolver)(key);
        let inner = Arc::clone(&self.inner);
        let key = key.to_owned();
        tokio::spawn(async move {
            let answer = answer_of(&key, resolving.await);
            inner.settle(&key, &tx, answer);
        });
        Found::Wait(rx)
    }
}

/// A resolver's result for `key` as the cache keeps it: an empty list is an error
/// (`NotFound`), an IPv4-mapped address the IPv4 address it carries.
fn answer_of(key: &str, resolved: io::Result<Vec<IpAddr>>) -> Answer {
    match resolved {
        Ok(addrs) if addrs.is_empty() => Err(Arc::new(Failed {
            kind: io::ErrorKind::NotFound,
            os: None,
            message: format!("{key}: resolver returned no addresses"),
        })),
        Ok(addrs) => Ok(addrs.into_iter().map(unmapped).collect()),
        Err(e) => Err(Arc::new(Failed::new(&e))),
    }
}

impl Inner {
    fn names(&self) -> MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keep `answer` for `key` as long as its kind is kept (or drop the entry), then give
    /// it to the resolution's waiters.
    fn settle(&self, key: &str, tx: &watch::Sender<Option<Answer>>, answer: Answer) {
        let keep = match &answer {
            Ok(addrs) => {
                tracing::debug!(host = %key, addrs = ?addrs, ttl = ?self.ttl, "dns resolved");
                self.ttl
            }
            Err(failed) => {
                let e = failed.to_io();
                tracing::debug!(host = %key, error = %e, "dns failed");
                if out_of_files(&e) {
                    Duration::ZERO
                } else if temporary(&e) {
                    self.ttl.min(TEMPORARY_TTL)
                } else {
                    self.ttl.min(NEGATIVE_TTL)
                }
            }
        };
        {
            let mut names = self.names();
            let ours = matches!(names.map.get(key), Some(Entry::Resolving(rx)) if rx.same_channel(&tx.subscribe()));
            if ours {
                if keep.is_zero() {
                    names.map.remove(key);
                } else {
                    let expires = Instant::now() + keep;
                    let entry = Entry::Known {
                        answer: answer.clone(),
                        expires,
                    };
                    names.map.insert(key.to_owned(), entry);
                }
            }
        }
        tx.send_replace(Some(answer));
    }
}

impl Names {
    /// Whether to sweep now, a new name just added: once as many new names as the last
    /// sweep kept (at least [`SWEEP_EVERY`]) came since, so a sweep's cost is spread over
    /// the names that made it; or once a TTL (at most a minute) has passed since, so names
    /// past their time do not wait for new ones to pile up.
    fn sweep_due(&self, now: Instant, ttl: Duration) -> bool {
        let period = ttl.clamp(Duration::from_secs(1), NEGATIVE_TTL);
        self.added >= self.kept.max(SWEEP_EVERY) || now >= self.swept_at + period
    }

    /// Drop the names past their time, and resolutions whose task was dropped unfinished.
    fn sweep(&mut self, now: Instant) {
        self.map.retain(|_, entry| match entry {
            Entry::Known { expires, .. } => now < *expires,
            Entry::Resolving(rx) => rx.has_changed().is_ok(),
        });
        self.added = 0;
        self.kept = self.map.len();
        self.swept_at = now;
    }
}

/// The system resolver: `getaddrinfo` through std, run on tokio's blocking pool by
/// [`DnsCache::new`].
///
/// Why it checks for a free descriptor when the lookup fails: out of file descriptors,
/// glibc's `getaddrinfo` can open neither `/etc/hosts` nor a socket to the DNS server,
/// and says the name does not exist (`EAI_NONAME`) — a final failure, remembered for a
/// minute, of a name that exists. So a failed lookup tries to open a socket; if the
/// process is out of descriptors (`EMFILE`, `ENFILE`) that is the answer, which the fetch
/// waits out ([`Failure::OutOfFiles`](exitcrawl::outcome::Failure::OutOfFiles)) and the
/// cache never keeps. The check follows the failure at once, on the same thread.
pub(crate) fn system_lookup(host: &str) -> io::Result<Vec<IpAddr>> {
    match (host, 0).to_socket_addrs() {
        Ok(addrs) => Ok(addrs.map(|a| a.ip()).collect()),
        Err(e) => Err(descriptors_left().err().unwrap_or(e)),
    }
}

/// `Err(EMFILE or ENFILE)` when this process cannot open a descriptor now: a UDP socket
/// opened and closed. Any other failure to open one says nothing about descriptors.
fn descriptors_left() -> io::Result<()> {
    match socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None) {
        Err(e) if out_of_files(&e) => Err(e),
        _ => Ok(()),
    }
}

/// `EMFILE` (this process's limit) or `ENFILE` (the system's).
pub(crate) fn out_of_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether a resolver's error may pass: the resolver timed out, or `getaddrinfo` said
/// `EAI_AGAIN` (the DNS server did not answer, or answered `SERVFAIL`), which glibc
/// words "Temporary failure in name resolution" and musl "Try again". A name that does
/// not exist (`EAI_NONAME`) or has no address (`EAI_NODATA`) is not: asking again gives
/// the same.
///
/// Why the text: std turns every `getaddrinfo` code but `EAI_SYSTEM` into one error kind
/// and keeps the code only in the message, as `gai_strerror` words it.
pub(crate) fn temporary(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || {
        let text = e.to_string().to_ascii_lowercase();
        text.contains("temporary failure in name resolution") || text.ends_with("try again")
    }
}

/// The addresses [`DnsCache::cached`] has at hand for a host: its own, for an IP literal,
/// or those it resolves to. Derefs to the slice of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addrs {
    /// The host is this address.
    Literal([IpAddr; 1]),
    /// The host's name resolves to these (never empty).
    Resolved(Arc<[IpAddr]>),
}

impl std::ops::Deref for Addrs {
    type Target = [IpAddr];

    fn deref(&self) -> &[IpAddr] {
        match self {
            Addrs::Literal(ip) => ip,
            Addrs::Resolved(addrs) => addrs,
        }
    }
}

/// `Some(ip)` when `host` is an IP literal, with or without IPv6 brackets; an
/// IPv4-mapped one (`[::ffff:127.0.0.1]`) as the IPv4 address it carries, as a resolved
/// one is.
pub(crate) fn parse_ip_literal(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok().map(unmapped)
}

#[cfg(test)]
mod tests;
