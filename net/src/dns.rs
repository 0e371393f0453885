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
//! - concurrent misses for one host are coalesced: the first caller resolves, the others
//!   wait for its answer (a burst of 64 first connections makes one query, not 64);
//! - failures are not cached: the next caller tries again.
//!
//! The cache is `Send + Sync` (an `Arc` inside), so one instance can be cloned into every
//! exit's Arbiter. Expiry uses tokio's clock so a test with paused time can move past the
//! TTL without waiting. Entries are per distinct host name and never evicted: a crawler
//! talks to a bounded set of hosts.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The future a resolver returns: the addresses of one host name.
pub type ResolveFuture = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>>>>;

type ResolveFn = dyn Fn(&str) -> ResolveFuture + Send + Sync;

/// A cloneable, thread-safe DNS cache with a fixed TTL. See the module docs.
#[derive(Clone)]
pub struct DnsCache {
    inner: Arc<Inner>,
}

struct Inner {
    ttl: Duration,
    resolver: Box<ResolveFn>,
    /// One slot per host. The outer std mutex is held only to find or create a slot; the
    /// slot's async mutex is held across the resolution so concurrent misses wait for it.
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    resolutions: AtomicU64,
    hits: AtomicU64,
}

type Slot = tokio::sync::Mutex<Option<Cached>>;

struct Cached {
    addrs: Arc<[IpAddr]>,
    expires: Instant,
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
    /// A cache in front of the system resolver (`tokio::net::lookup_host`, i.e.
    /// `getaddrinfo` on tokio's blocking pool, so it honours `/etc/hosts`).
    ///
    /// A `ttl` of zero disables caching (every lookup resolves) but still coalesces
    /// concurrent lookups of one host.
    pub fn new(ttl: Duration) -> Self {
        Self::with_resolver(ttl, |host: &str| {
            let host = host.to_owned();
            async move {
                let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
                Ok(addrs.map(|a| a.ip()).collect())
            }
        })
    }

    /// A cache in front of a custom resolver (tests count or script resolutions with it).
    pub fn with_resolver<F, Fut>(ttl: Duration, resolve: F) -> Self
    where
        F: Fn(&str) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = io::Result<Vec<IpAddr>>> + 'static,
    {
        let resolver: Box<ResolveFn> = Box::new(move |host| Box::pin(resolve(host)));
        Self {
            inner: Arc::new(Inner {
                ttl,
                resolver,
                slots: Mutex::new(HashMap::new()),
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

    /// How many lookups were answered from the cache.
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
        let slot = {
            let slots = self
                .inner
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.get(&*key)?)
        };
        let cached = slot.try_lock().ok()?;
        let entry = cached.as_ref()?;
        (Instant::now() < entry.expires).then(|| Addrs::Resolved(Arc::clone(&entry.addrs)))
    }

    /// The addresses of `host`, from the cache while fresh, else freshly resolved.
    ///
    /// `host` may be an IP literal, bracketed or not (`[::1]` is what `Uri::host` gives for
    /// IPv6); those are returned as they are without touching the cache or the counters.
    /// An empty answer is an error (`NotFound`), never an empty list.
    pub async fn lookup(&self, host: &str) -> io::Result<Arc<[IpAddr]>> {
        if let Some(ip) = parse_ip_literal(host) {
            return Ok(Arc::from([ip]));
        }
        let key = host.to_ascii_lowercase();
        let slot = {
            let mut slots = self
                .inner
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key.clone()).or_default())
        };
        let mut cached = slot.lock().await;
        if let Some(entry) = cached.as_ref() {
            if Instant::now() < entry.expires {
                self.inner.hits.fetch_add(1, Ordering::Relaxed);
                tracing::trace!(host = %key, "dns cache hit");
                return Ok(Arc::clone(&entry.addrs));
            }
        }
        self.inner.resolutions.fetch_add(1, Ordering::Relaxed);
        let addrs = (self.inner.resolver)(&key).await?;
        if addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{key}: resolver returned no addresses"),
            ));
        }
        let addrs: Arc<[IpAddr]> = addrs.into();
        tracing::debug!(host = %key, addrs = ?addrs, ttl = ?self.inner.ttl, "dns resolved");
        *cached = Some(Cached {
            addrs: Arc::clone(&addrs),
            expires: Instant::now() + self.inner.ttl,
        });
        Ok(addrs)
    }
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

/// `Some(ip)` when `host` is an IP literal, with or without IPv6 brackets.
pub(crate) fn parse_ip_literal(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn counting(ttl: Duration) -> (DnsCache, Arc<AtomicU64>) {
        let calls = Arc::new(AtomicU64::new(0));
        let c = Arc::clone(&calls);
        let cache = DnsCache::with_resolver(ttl, move |_host: &str| {
            c.fetch_add(1, Ordering::Relaxed);
            async { Ok(vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))]) }
        });
        (cache, calls)
    }

    #[actix_rt::test]
    async fn caches_until_ttl_then_refreshes() {
        tokio::time::pause();
        let (cache, calls) = counting(Duration::from_secs(30));
        for _ in 0..10 {
            cache.lookup("Example.test").await.unwrap();
            cache.lookup("example.test").await.unwrap();
        }
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(cache.resolutions(), 1);
        assert_eq!(cache.hits(), 19);

        tokio::time::advance(Duration::from_secs(29)).await;
        cache.lookup("example.test").await.unwrap();
        assert_eq!(cache.resolutions(), 1);

        tokio::time::advance(Duration::from_secs(1)).await;
        cache.lookup("example.test").await.unwrap();
        assert_eq!(cache.resolutions(), 2);
    }

    #[actix_rt::test]
    async fn cached_answers_only_what_is_at_hand() {
        tokio::time::pause();
        let (cache, calls) = counting(Duration::from_secs(30));
        assert_eq!(cache.cached("new.test"), None);
        let ip = cache.cached("[::1]").unwrap();
        assert_eq!(&*ip, &["::1".parse::<IpAddr>().unwrap()]);
        cache.lookup("new.test").await.unwrap();
        assert_eq!(cache.cached("NEW.test").map(|a| a.len()), Some(1));
        assert_eq!(cache.cached("new.test").map(|a| a.len()), Some(1));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(cache.cached("new.test"), None, "expired");
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    #[actix_rt::test]
    async fn ip_literals_bypass_the_cache() {
        let (cache, calls) = counting(Duration::from_secs(30));
        let v4 = cache.lookup("127.0.0.2").await.unwrap();
        let v6 = cache.lookup("[::1]").await.unwrap();
        assert_eq!(&*v4, &["127.0.0.2".parse::<IpAddr>().unwrap()]);
        assert_eq!(&*v6, &["::1".parse::<IpAddr>().unwrap()]);
        assert_eq!(calls.load(Ordering::Relaxed), 0);
        assert_eq!(cache.hits(), 0);
    }

    #[actix_rt::test]
    async fn concurrent_misses_are_coalesced() {
        let (cache, calls) = counting(Duration::from_secs(30));
        let lookups: Vec<_> = (0..32)
            .map(|_| {
                let cache = cache.clone();
                actix_rt::spawn(async move { cache.lookup("burst.test").await })
            })
            .collect();
        for l in lookups {
            l.await.unwrap().unwrap();
        }
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    #[actix_rt::test]
    async fn failures_and_empty_answers_are_not_cached() {
        let calls = Arc::new(AtomicU64::new(0));
        let c = Arc::clone(&calls);
        let cache = DnsCache::with_resolver(Duration::from_secs(30), move |_host: &str| {
            let n = c.fetch_add(1, Ordering::Relaxed);
            async move {
                match n {
                    0 => Err(io::Error::other("servfail")),
                    1 => Ok(vec![]),
                    _ => Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]),
                }
            }
        });
        assert!(cache.lookup("flaky.test").await.is_err());
        let empty = cache.lookup("flaky.test").await.unwrap_err();
        assert_eq!(empty.kind(), io::ErrorKind::NotFound);
        assert!(cache.lookup("flaky.test").await.is_ok());
        assert!(cache.lookup("flaky.test").await.is_ok());
        assert_eq!(cache.resolutions(), 3);
    }
}
