//! A process out of file descriptors: the fetches it cannot open a socket for end with an
//! error that says so, and no exit is ejected for it — every exit would fail alike, and
//! the crawl goes on once descriptors come back. Its own test binary (one test), because
//! it lowers the process's open-file limit. Loopback only.

mod raw_site;
mod support;

use raw_site::{Raw, Then};
use support::exits;

use std::time::Duration;

use exitcrawl::config::{Algorithm, Settings};
use exitcrawl_actors::{Crawler, Fetch, FetchErrorKind};

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
async fn out_of_descriptors_fails_the_fetch_and_ejects_no_exit() {
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
    let fetch = |site: &Raw, path: &str| {
        let f = h.fetch(Fetch::get(site.url(path)));
        async move {
            tokio::time::timeout(Duration::from_secs(30), f)
                .await
                .expect("the fetch ends by itself")
        }
    };
    for _ in 0..4 {
        assert_eq!(fetch(&warm, "/").await.expect("an answer").status, 200);
    }

    // No descriptor left for a new socket.
    let old = set_soft_limit(lowest_free_descriptor());
    let mut failed = Vec::new();
    for i in 0..10 {
        failed.push(fetch(&site, &format!("/{i}")).await);
    }
    set_soft_limit(old);

    for r in &failed {
        let e = r.as_ref().expect_err("no socket, no answer");
        assert_eq!(e.kind, FetchErrorKind::LocalConnect, "{e}");
        assert!(e.message.contains("out of file descriptors"), "{e}");
        // A local failure is not an attempt: the fetch moved to the other exit, which
        // failed alike, before it ended.
        assert_eq!(e.attempts, 0, "{e}");
        assert!(e.message.contains("no exit could open a connection"), "{e}");
    }
    for exit in h.stats().await {
        assert!(exit.healthy, "{} ejected: {:?}", exit.name, exit.last_error);
    }
    assert_eq!(fetch(&site, "/after").await.expect("an answer").status, 200);
    assert_eq!(
        site.seen().lines(),
        ["GET /after HTTP/1.1"],
        "the server saw none of the fetches without a socket"
    );
}
