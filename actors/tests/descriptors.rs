//! A process out of file descriptors: the fetches it cannot open a socket for wait, and go
//! once descriptors come back; no exit is ejected for it — every exit would fail alike.
//! Its own test binary, because it lowers the process's open-file limit; its tests take
//! turns ([`LIMIT`]). Loopback only.

mod raw_site;
mod support;

use raw_site::{Raw, Then};
use support::exits;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch};

/// Held by each test while it runs: the open-file limit is the whole process's.
static LIMIT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The lowest descriptor number free now: with the soft limit there, the kernel has no
/// number left to give a new socket (it hands out the lowest free one, below the limit).
fn lowest_free_descriptor() -> u64 {
    use std::os::fd::AsRawFd;
    let probe = std::fs::File::open("/dev/null").unwrap();
    probe.as_raw_fd() as u64
}

fn set_soft_limit(soft: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        let old = lim.rlim_cur;
        lim.rlim_cur = soft;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        old
    }
}

#[actix_rt::test]
async fn out_of_descriptors_holds_the_fetches_until_they_come_back_and_ejects_no_exit() {
    held_until_descriptors_come_back(|site, path| site.url(path)).await;
}

/// Out of descriptors, the system resolver cannot read `/etc/hosts` nor open a socket,
/// and says the name does not exist: the fetches of a name wait as those of an address
/// do, and the name is resolved once descriptors come back.
#[actix_rt::test]
async fn a_name_resolved_out_of_descriptors_waits_for_them_too() {
    held_until_descriptors_come_back(|site, path| {
        format!("http://localhost:{}{path}", site.addr.port())
    })
    .await;
}

/// Ten fetches of `url(site, path)` made while no descriptor is left, through two exits:
/// they wait, and go once descriptors come back.
async fn held_until_descriptors_come_back(url: impl Fn(&Raw, &str) -> String) {
    let _turn = LIMIT.lock().await;
    // The other test's crawler closes its sockets on threads of its own as it ends: the
    // lowest free descriptor is read once that is over.
    steady_descriptors().await;
    let ok = |_: usize, _: &str| {
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
        (answer, Then::KeepOpen)
    };
    // `warm` is fetched first, through both exits, and its connections kept open, so no
    // descriptor is freed while the limit is low; `site` needs new sockets.
    let (warm, site) = (Raw::start(ok).await, Raw::start(ok).await);
    let mut s = Settings::with_exits(exits(2, 8));
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    let h = Crawler::start(s).unwrap();
    for _ in 0..4 {
        let f = h.fetch(Fetch::get(warm.url("/")));
        assert_eq!(f.await.expect("an answer").status, 200);
    }
    let errors = || async {
        let stats = h.stats().await;
        stats.iter().map(|e| e.errors).sum::<u64>()
    };

    // No descriptor left for a new socket: each fetch fails on our side through both
    // exits, and waits.
    let old = set_soft_limit(lowest_free_descriptor());
    let fetches: Vec<_> = (0..10)
        .map(|i| h.fetch(Fetch::get(url(&site, &format!("/{i}")))))
        .collect();
    let all = futures_util::future::join_all(fetches);
    let waited = async {
        // Bounded: the fetches start at once; each fails within a connect's time.
        for _ in 0..500 {
            if errors().await >= 20 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let failed = errors().await;
        // Descriptors come back.
        set_soft_limit(old);
        failed
    };
    let (answers, failed) = tokio::time::timeout(
        Duration::from_secs(30),
        futures_util::future::join(all, waited),
    )
    .await
    .expect("the fetches end by themselves");
    assert!(
        failed >= 20,
        "every fetch failed locally through both exits first: {failed}"
    );
    for r in &answers {
        let r = r.as_ref().expect("an answer once descriptors came back");
        assert_eq!(
            (r.status, r.attempts),
            (200, 1),
            "local failures are not attempts"
        );
    }
    for exit in h.stats().await {
        assert!(exit.healthy, "{} ejected: {:?}", exit.name, exit.last_error);
    }
    let mut seen: Vec<String> = site.seen().lines().into_iter().map(str::to_owned).collect();
    seen.sort_unstable();
    let mut want: Vec<String> = (0..10).map(|i| format!("GET /{i} HTTP/1.1")).collect();
    want.sort();
    assert_eq!(seen, want, "each fetch reached the server once");
    h.shutdown(Duration::from_secs(1)).await;
}

/// Wait (a few seconds at most) until this process's count of open descriptors holds
/// still for a while.
async fn steady_descriptors() {
    let open = || std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    let mut last = open();
    let mut still = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = open();
        still = if now == last { still + 1 } else { 0 };
        if still == 5 {
            return;
        }
        last = now;
    }
}
