//! The DNS cache's tests: caching, sharing a resolution, remembering failures, sweeping.

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

/// A cache whose resolver waits `delay`, then answers `answer()`; and its calls.
fn scripted<A>(ttl: Duration, delay: Duration, answer: A) -> (DnsCache, Arc<AtomicU64>)
where
    A: Fn() -> io::Result<Vec<IpAddr>> + Send + Sync + 'static,
{
    let calls = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&calls);
    let cache = DnsCache::with_resolver(ttl, move |_host: &str| {
        c.fetch_add(1, Ordering::Relaxed);
        let answer = answer();
        async move {
            tokio::time::sleep(delay).await;
            answer
        }
    });
    (cache, calls)
}

fn temporary_failure() -> io::Error {
    io::Error::other("failed to lookup address information: Temporary failure in name resolution")
}

fn no_such_name() -> io::Error {
    io::Error::other("failed to lookup address information: Name or service not known")
}

/// `n` lookups of `host` at once; their answers.
async fn at_once(cache: &DnsCache, host: &str, n: usize) -> Vec<io::Result<Arc<[IpAddr]>>> {
    let lookups: Vec<_> = (0..n)
        .map(|_| {
            let (cache, host) = (cache.clone(), host.to_owned());
            actix_rt::spawn(async move { cache.lookup(&host).await })
        })
        .collect();
    let mut answers = Vec::new();
    for l in lookups {
        answers.push(l.await.unwrap());
    }
    answers
}

#[actix_rt::test]
async fn a_failure_in_flight_is_every_waiters_answer() {
    let delay = Duration::from_millis(20);
    let (cache, calls) = scripted(Duration::from_secs(30), delay, || Err(temporary_failure()));
    let answers = at_once(&cache, "down.test", 32).await;
    for a in &answers {
        let e = a.as_ref().expect_err("failed");
        assert!(temporary(e), "{e}");
    }
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[actix_rt::test]
async fn without_a_ttl_lookups_at_once_still_share_one_resolution() {
    let delay = Duration::from_millis(20);
    let (cache, calls) = scripted(Duration::ZERO, delay, || {
        Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
    });
    for a in at_once(&cache, "burst.test", 16).await {
        a.unwrap();
    }
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    // Nothing kept: the next lookup resolves again.
    cache.lookup("burst.test").await.unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[actix_rt::test]
async fn a_name_that_does_not_exist_is_remembered_for_a_minute_at_most() {
    tokio::time::pause();
    let (cache, calls) = scripted(Duration::from_secs(300), Duration::ZERO, || {
        Err(no_such_name())
    });
    for _ in 0..2 {
        let e = cache.lookup("gone.test").await.unwrap_err();
        assert!(e.to_string().contains("Name or service not known"), "{e}");
        assert!(!temporary(&e));
    }
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    tokio::time::advance(Duration::from_secs(59)).await;
    cache.lookup("gone.test").await.unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    tokio::time::advance(Duration::from_secs(1)).await;
    cache.lookup("gone.test").await.unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 2);

    // Never longer than the TTL.
    let (cache, calls) = scripted(Duration::from_secs(10), Duration::ZERO, || {
        Err(no_such_name())
    });
    cache.lookup("gone.test").await.unwrap_err();
    tokio::time::advance(Duration::from_secs(10)).await;
    cache.lookup("gone.test").await.unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[actix_rt::test]
async fn a_temporary_failure_is_remembered_for_seconds_and_running_out_of_files_never() {
    tokio::time::pause();
    let (cache, calls) = scripted(Duration::from_secs(300), Duration::ZERO, || {
        Err(temporary_failure())
    });
    cache.lookup("flaky.test").await.unwrap_err();
    cache.lookup("flaky.test").await.unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    tokio::time::advance(TEMPORARY_TTL).await;
    cache.lookup("flaky.test").await.unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 2);

    let (cache, calls) = scripted(Duration::from_secs(300), Duration::ZERO, || {
        Err(io::Error::from_raw_os_error(libc::EMFILE))
    });
    for _ in 0..3 {
        let e = cache.lookup("files.test").await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
    }
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

#[actix_rt::test]
async fn an_empty_answer_is_a_name_without_addresses() {
    let (cache, calls) = scripted(Duration::from_secs(30), Duration::ZERO, || Ok(vec![]));
    for _ in 0..2 {
        let e = cache.lookup("empty.test").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(!temporary(&e));
    }
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

/// A caller that gives up (its connect timed out) does not take the resolution with
/// it: the next caller gets its answer, not a second resolution.
#[actix_rt::test]
async fn an_abandoned_lookup_ends_all_the_same_and_is_kept() {
    tokio::time::pause();
    let delay = Duration::from_secs(2);
    let (cache, calls) = scripted(Duration::from_secs(30), delay, || {
        Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
    });
    let first = tokio::time::timeout(Duration::from_secs(1), cache.lookup("slow.test"));
    assert!(first.await.is_err(), "gave up");
    cache.lookup("slow.test").await.unwrap();
    tokio::time::advance(Duration::from_secs(5)).await;
    cache.lookup("slow.test").await.unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[actix_rt::test]
async fn names_past_their_time_are_swept() {
    tokio::time::pause();
    let (cache, calls) = counting(Duration::from_secs(30));
    for i in 0..10_000 {
        cache.lookup(&format!("host{i}.test")).await.unwrap();
    }
    assert_eq!(calls.load(Ordering::Relaxed), 10_000);
    tokio::time::advance(Duration::from_secs(61)).await;
    cache.lookup("one-more.test").await.unwrap();
    let left = cache.len();
    assert!(left < 100, "{left} names kept");
}
