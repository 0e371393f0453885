//! Events about a fetch carry the fetch's span (url, host) and the structured fields
//! operators filter on (exit, status, attempt, latency_ms); credentials in the URL are
//! masked.

use std::io::Write;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, Fetch};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::future::join_all;

/// A `MakeWriter` that appends every log line to a shared buffer.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[actix_rt::test]
async fn throttle_events_carry_the_fetch_span_and_fields() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // A bucket of 2 that refills slowly: the third request of the burst gets a 429.
    let site = TestSite::start(SiteConfig {
        limit: Limit::PerPeer(Rate::per_second(1, 2)),
        retry_after: RetryAfter::Omit,
        ..SiteConfig::default()
    });
    let mut s = Settings::with_exits(vec![ExitSettings::new(
        "e2",
        "127.0.0.2".parse::<IpAddr>().expect("ip"),
    )]);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.max_retries = 0;
    let h = Crawler::start(s).expect("start");
    let urls: Vec<_> = (0..4)
        .map(|i| {
            format!(
                "{}?api_key=SECRET{i}&page={i}",
                site.url(&format!("/t/{i}"))
            )
        })
        .collect();
    // A throttle ends its fetch (no wait for the host): the 429 is the answer.
    let fetch = |u: &String| h.fetch(Fetch::get(u.clone()).throttle_waits(0));
    let replies = join_all(urls.iter().map(fetch)).await;
    assert!(replies
        .iter()
        .any(|r| r.as_ref().is_ok_and(|r| r.status == 429)));

    let text = String::from_utf8(capture.0.lock().expect("lock").clone()).expect("utf-8");
    let throttled: Vec<&str> = text.lines().filter(|l| l.contains("throttled")).collect();
    assert!(!throttled.is_empty(), "no throttle event in:\n{text}");
    for line in &throttled {
        assert!(
            line.contains("fetch{"),
            "event outside the fetch span: {line}"
        );
        for field in [
            "exit=e2",
            "status=429",
            "attempt=1",
            "latency_ms=",
            "host=127.0.0.1",
        ] {
            assert!(line.contains(field), "{field} missing: {line}");
        }
    }
    assert!(text.contains("retries exhausted"), "{text}");
    assert!(
        !text.contains("SECRET"),
        "a credential reached the log:\n{text}"
    );
    assert!(text.contains("api_key=***"), "{text}");
}
