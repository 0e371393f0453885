//! Load bench: many URLs at high concurrency through four exits against a fast local site;
//! checks that no result is lost or duplicated and reports peak RSS, peak queue depth and
//! elapsed time.
//!
//! ```text
//! cargo run --release -p exitcrawl-actors --example bench_load -- \
//!     --count 100000 --concurrency 1000
//! ```
//!
//! Flags (all optional): `--count N` URLs (default 100000), `--concurrency C`
//! (`crawler.concurrency`, split evenly over the exits' `max_concurrent` and
//! `per_host_connections`; default 1000), `--exits E` (127.0.0.2 …, default 4),
//! `--queue Q` (`crawler.queue_capacity`, default 2·C), `--latency MS` site latency
//! (default 20).
//!
//! The feeder keeps `C + 2·Q` fetches outstanding (one task each, pulling the next URL
//! number when its fetch is done): more than the queue holds, so backpressure is in play,
//! as in a crawl that streams its URL list. The queue depth gauge is sampled every
//! millisecond. Peak RSS is `VmHWM` of `/proc/self/status` (this process, the site's thread
//! included). The site's request log is off; its counters say how many requests it saw.
//! Loopback only. Exits non-zero if a result is lost or duplicated.

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::Metrics;
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch};
use exitcrawl_testsite::{SiteConfig, TestSite};

struct Args {
    count: usize,
    concurrency: u32,
    exits: u8,
    queue: Option<u32>,
    latency_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        count: 100_000,
        concurrency: 1_000,
        exits: 4,
        queue: None,
        latency_ms: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: not a number: {value}"))?;
        match flag.as_str() {
            "--count" => a.count = n as usize,
            "--concurrency" => a.concurrency = (n as u32).max(1),
            "--exits" => a.exits = (n as u8).clamp(1, 200),
            "--queue" => a.queue = Some((n as u32).max(1)),
            "--latency" => a.latency_ms = n,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // Large bodies and glibc's heap trimming: see exitcrawl_net::process.
    exitcrawl_net::process::keep_freed_memory(64 << 20);
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_load: {e}");
            std::process::exit(2);
        }
    };
    let ok = actix_rt::System::new().block_on(run(args));
    if !ok {
        std::process::exit(1);
    }
}

async fn run(a: Args) -> bool {
    let site = TestSite::start(SiteConfig {
        body_size: 64,
        latency: Duration::from_millis(a.latency_ms),
        log_requests: false,
        ..SiteConfig::default()
    });
    let queue = a.queue.unwrap_or(2 * a.concurrency);
    let h = match Crawler::start(settings(&a, queue)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("bench_load: {e}");
            return false;
        }
    };

    let base = site.base_url();
    let next = Rc::new(Cell::new(0usize));
    let tally = Tally::new(a.count);
    let done = Rc::new(Cell::new(false));
    let peak = Rc::new(Cell::new(0i64));
    let sampler = sample_queue_depth(done.clone(), peak.clone(), h.metrics().clone());
    let outstanding = (a.concurrency + 2 * queue) as usize;
    let t0 = Instant::now();
    let workers: Vec<_> = (0..outstanding.min(a.count))
        .map(|_| {
            let worker = fetch_urls(
                h.clone(),
                base.clone(),
                next.clone(),
                a.count,
                tally.clone(),
            );
            actix_rt::spawn(worker)
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    let elapsed = t0.elapsed();
    done.set(true);
    let _ = sampler.await;
    report(&a, queue, elapsed, peak.get(), &tally, &site)
}

/// The crawler's settings: `a.exits` exits from 127.0.0.2 sharing `a.concurrency`, no
/// rate limit, a queue of `queue` fetches.
fn settings(a: &Args, queue: u32) -> Settings {
    let per_exit = a.concurrency.div_ceil(u32::from(a.exits));
    let exits = (2..2 + a.exits)
        .map(|i| {
            let ip: IpAddr = format!("127.0.0.{i}").parse().expect("ip");
            let mut e = ExitSettings::new(format!("e{i}"), ip);
            e.max_concurrent = per_exit;
            e
        })
        .collect();
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = a.concurrency;
    s.crawler.per_host_connections = per_exit;
    s.crawler.queue_capacity = queue;
    s.crawler.timeout_ms = 30_000;
    s.crawler.connect_timeout_ms = 5_000;
    s
}

/// Every millisecond until `done`: the scheduler's queue depth, its peak kept in `peak`.
fn sample_queue_depth(
    done: Rc<Cell<bool>>,
    peak: Rc<Cell<i64>>,
    m: Arc<Metrics>,
) -> actix_rt::task::JoinHandle<()> {
    actix_rt::spawn(async move {
        while !done.get() {
            peak.set(peak.get().max(m.queue_depth()));
            actix_rt::time::sleep(Duration::from_millis(1)).await;
        }
    })
}

/// What the workers saw, shared between them.
#[derive(Clone)]
struct Tally {
    /// `replies[i]`: how many replies URL i got.
    replies: Rc<RefCell<Vec<u8>>>,
    /// Replies that were not a 200.
    errors: Rc<Cell<usize>>,
    /// Replies naming another URL than the fetch's.
    mismatched: Rc<Cell<usize>>,
}

impl Tally {
    fn new(count: usize) -> Self {
        Self {
            replies: Rc::new(RefCell::new(vec![0u8; count])),
            errors: Rc::new(Cell::new(0usize)),
            mismatched: Rc::new(Cell::new(0usize)),
        }
    }
}

/// One worker: fetch the next URL number (from `next`) until `count`, one at a time.
async fn fetch_urls(
    h: CrawlerHandle,
    base: String,
    next: Rc<Cell<usize>>,
    count: usize,
    tally: Tally,
) {
    loop {
        let i = next.get();
        if i >= count {
            break;
        }
        next.set(i + 1);
        let url = format!("{base}/b/{i}");
        let r = h.fetch(Fetch::get(url.clone())).await;
        let got = match &r {
            Ok(resp) => &resp.url,
            Err(e) => &e.url,
        };
        if *got != url {
            tally.mismatched.set(tally.mismatched.get() + 1);
        }
        if !r.is_ok_and(|r| r.status == 200) {
            tally.errors.set(tally.errors.get() + 1);
        }
        let mut rs = tally.replies.borrow_mut();
        rs[i] = rs[i].saturating_add(1);
    }
}

/// Print the figures; true when no result was lost, duplicated or wrong and the queue
/// stayed within its capacity.
fn report(
    a: &Args,
    queue: u32,
    elapsed: Duration,
    peak: i64,
    tally: &Tally,
    site: &TestSite,
) -> bool {
    let rs = tally.replies.borrow();
    let lost = rs.iter().filter(|n| **n == 0).count();
    let duplicated = rs.iter().filter(|n| **n > 1).count();
    let stats = site.stats();
    let hwm = vm_hwm_kib();
    println!(
        "bench_load: {} URLs, concurrency {}, {} exits, queue_capacity {queue}, site latency {} ms",
        a.count, a.concurrency, a.exits, a.latency_ms
    );
    println!(
        "  elapsed {:.3} s ({:.0} URLs/s)",
        elapsed.as_secs_f64(),
        a.count as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  replies: lost {lost}, duplicated {duplicated}, for another URL {}, errors {}",
        tally.mismatched.get(),
        tally.errors.get()
    );
    println!(
        "  site: {} requests, peak in flight {}",
        stats.requests, stats.peak_in_flight
    );
    println!("  peak queue depth {peak} (capacity {queue})");
    match hwm {
        Some(k) => println!("  peak RSS (VmHWM) {:.1} MiB", k as f64 / 1024.0),
        None => println!("  peak RSS: /proc/self/status unavailable"),
    }
    let ok = lost == 0
        && duplicated == 0
        && tally.mismatched.get() == 0
        && tally.errors.get() == 0
        && stats.requests == a.count as u64
        && peak <= i64::from(queue);
    println!("  {}", if ok { "OK" } else { "FAILED" });
    ok
}
