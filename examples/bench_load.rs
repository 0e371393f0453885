//! Load bench: many URLs at high concurrency through four exits against a fast local site;
//! checks that no result is lost or duplicated and reports peak RSS, peak queue depth and
//! elapsed time.
//!
//! ```text
//! cargo run --release --example bench_load -- --count 100000 --concurrency 1000
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
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, Fetch};
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
    // Large bodies and glibc's heap trimming: see exitcrawl_actors::alloc.
    exitcrawl_actors::alloc::keep_freed_memory(64 << 20);
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
    let per_exit = a.concurrency.div_ceil(u32::from(a.exits));
    let exits = (2..2 + a.exits)
        .map(|i| {
            let ip: IpAddr = format!("127.0.0.{i}").parse().expect("ip");
            let mut e = ExitSettings::new(format!("e{i}"), ip);
            e.max_concurrent = per_exit;
            e
        })
        .collect();
    let queue = a.queue.unwrap_or(2 * a.concurrency);
    let mut s = Settings::with_exits(exits);
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = a.concurrency;
    s.crawler.per_host_connections = per_exit;
    s.crawler.queue_capacity = queue;
    s.crawler.timeout_ms = 30_000;
    s.crawler.connect_timeout_ms = 5_000;
    let h = match Crawler::start(s) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("bench_load: {e}");
            return false;
        }
    };

    let base = site.base_url();
    let next = Rc::new(Cell::new(0usize));
    // replies[i]: how many replies URL i got; errors counted apart.
    let replies = Rc::new(RefCell::new(vec![0u8; a.count]));
    let errors = Rc::new(Cell::new(0usize));
    let mismatched = Rc::new(Cell::new(0usize));
    let done = Rc::new(Cell::new(false));
    let peak = Rc::new(Cell::new(0i64));
    let sampler = {
        let (done, peak, m) = (done.clone(), peak.clone(), h.metrics().clone());
        actix_rt::spawn(async move {
            while !done.get() {
                peak.set(peak.get().max(m.queue_depth.get()));
                actix_rt::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let outstanding = (a.concurrency + 2 * queue) as usize;
    let t0 = Instant::now();
    let workers: Vec<_> = (0..outstanding.min(a.count))
        .map(|_| {
            let (h, base, next) = (h.clone(), base.clone(), next.clone());
            let (replies, errors, mismatched) =
                (replies.clone(), errors.clone(), mismatched.clone());
            let count = a.count;
            actix_rt::spawn(async move {
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
                        mismatched.set(mismatched.get() + 1);
                    }
                    if !r.is_ok_and(|r| r.status == 200) {
                        errors.set(errors.get() + 1);
                    }
                    let mut rs = replies.borrow_mut();
                    rs[i] = rs[i].saturating_add(1);
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    let elapsed = t0.elapsed();
    done.set(true);
    let _ = sampler.await;
    let peak = peak.get();
    let rs = replies.borrow();
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
        mismatched.get(),
        errors.get()
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
        && mismatched.get() == 0
        && errors.get() == 0
        && stats.requests == a.count as u64
        && peak <= i64::from(queue);
    println!("  {}", if ok { "OK" } else { "FAILED" });
    ok
}
