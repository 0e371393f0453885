//! The rate-limit benchmark of the `crawl` issue: how close does the default adaptive
//! limiter get to a site's capacity, over real loopback HTTP, and how many 429s does it
//! cost?
//!
//! ```text
//! cargo run --release --example bench_limit
//! cargo run --release --example bench_limit -- --urls 6000 --timeline
//! ```
//!
//! Two scenarios, each a local `TestSite` answering 429 **without** `Retry-After` above
//! its limit, 6,000 URLs (`--urls N`), `crawler.concurrency = 64`, the default limiter
//! settings (`algorithm = "aimd"`, scope `exit_host`, `initial_rps = 5`, …):
//!
//! - **global-300**: one token bucket for the whole site, 300 req/s (burst 30); one exit
//!   on 127.0.0.2. Capacity: 300 req/s.
//! - **per-ip-60×4**: one bucket per client IP, 60 req/s (burst 6); four exits on
//!   127.0.0.2 … 127.0.0.5. Capacity: 4 × 60 = 240 req/s.
//!
//! Retries: `max_retries = 100`, `retry_budget = 1.0`, backoff 100 ms … 2 s, so every URL
//! ends 200 and goodput measures the limiter, not the retry policy.
//!
//! Reported per scenario:
//! - `goodput` = (URLs that ended 200 per second) ÷ capacity, over the whole run (from
//!   the first fetch to the last reply: slow start from 5 req/s and the drain of the last
//!   in-flight fetches included), and over the run after its first 5 s (`goodput>5s`);
//! - `429 %` = 429 answers ÷ requests the site received (whole run, and after 5 s);
//! - requests per URL, and the limiter's pace at the end.
//!
//! `--initial-rps R` overrides `limiter.initial_rps` (to see what slow start costs).
//! `--timeline` adds a per-second table: requests the site received, 429s, URLs done and
//! the limiter's pace (the sum of 1/interval over its keys) at the end of that second.
//!
//! Targets (issue 4): goodput ≥ 0.95 and 429s ≤ 1 % of requests. Loopback only; each run
//! is bounded by the URL count (about 20–25 s each at capacity) and a 120 s cap.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};
use futures_util::stream::{FuturesUnordered, StreamExt};

const CONCURRENCY: usize = 64;
/// Goodput is also measured from this point on (after slow start).
const WARMUP: Duration = Duration::from_secs(5);
/// Hard cap on one scenario.
const RUN_CAP: Duration = Duration::from_secs(120);

struct Args {
    urls: usize,
    timeline: bool,
    /// `limiter.initial_rps` override (diagnosis only: the headline uses the default).
    initial_rps: Option<f64>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        urls: 6000,
        timeline: false,
        initial_rps: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--urls" => {
                let v = it.next().ok_or("--urls needs a count")?;
                args.urls = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--urls: {v:?} is not a positive integer"))?;
            }
            "--timeline" => args.timeline = true,
            "--initial-rps" => {
                let v = it.next().ok_or("--initial-rps needs a rate")?;
                args.initial_rps = Some(
                    v.parse()
                        .ok()
                        .filter(|r: &f64| *r > 0.0)
                        .ok_or_else(|| format!("--initial-rps: {v:?} is not a positive rate"))?,
                );
            }
            "-h" | "--help" => {
                println!("bench_limit [--urls N] [--timeline] [--initial-rps R]");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok(args)
}

struct Scenario {
    name: &'static str,
    limit: Limit,
    exits: Vec<IpAddr>,
    /// The site's capacity for these exits, requests per second.
    capacity: f64,
}

/// One second of the run.
#[derive(Default, Clone, Copy)]
struct Second {
    requests: u64,
    limited: u64,
    done_ok: u64,
    pace: f64,
}

struct Outcome {
    name: &'static str,
    capacity: f64,
    urls: usize,
    ok: u64,
    elapsed: Duration,
    ok_after: u64,
    requests: u64,
    limited: u64,
    requests_after: u64,
    limited_after: u64,
    final_pace: f64,
    timeline: Vec<Second>,
}

impl Outcome {
    fn goodput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64() / self.capacity
    }

    fn goodput_after(&self) -> f64 {
        let secs = self.elapsed.saturating_sub(WARMUP).as_secs_f64();
        if secs <= 0.0 {
            return f64::NAN;
        }
        self.ok_after as f64 / secs / self.capacity
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The summed pacing rate of every limiter key of every exit.
async fn pace(handle: &CrawlerHandle) -> f64 {
    handle
        .stats()
        .await
        .iter()
        .flat_map(|s| s.intervals.iter())
        .filter(|(_, i)| !i.is_zero())
        .map(|(_, i)| 1.0 / i.as_secs_f64())
        .sum()
}

async fn run(sc: &Scenario, urls: usize, initial_rps: Option<f64>) -> Outcome {
    let site = TestSite::start(SiteConfig {
        limit: sc.limit,
        retry_after: RetryAfter::Omit,
        log_requests: true,
        ..SiteConfig::default()
    });
    let exits = sc
        .exits
        .iter()
        .enumerate()
        .map(|(i, ip)| ExitSettings::new(format!("e{}", i + 2), *ip))
        .collect();
    let mut s = Settings::with_exits(exits);
    assert_eq!(s.limiter.algorithm, Algorithm::Aimd, "default limiter");
    if let Some(r) = initial_rps {
        s.limiter.initial_rps = r;
    }
    s.crawler.concurrency = CONCURRENCY as u32;
    s.crawler.max_retries = 100;
    s.crawler.retry_budget = 1.0;
    s.crawler.retry_backoff_base_ms = 100;
    s.crawler.retry_backoff_max_ms = 2_000;
    s.crawler.timeout_ms = 5_000;
    s.crawler.connect_timeout_ms = 2_000;
    let handle = Crawler::start(s).expect("start the crawler");

    let started = Instant::now();
    // Completion times of the URLs that ended 200.
    let ok_times: Rc<RefCell<Vec<Duration>>> = Rc::default();
    // The limiter's pace at the end of each second.
    let paces: Rc<RefCell<Vec<f64>>> = Rc::default();
    let sampler = {
        let handle = handle.clone();
        let paces = paces.clone();
        actix_rt::spawn(async move {
            let mut tick = actix_rt::time::interval_at(
                actix_rt::time::Instant::from_std(started + Duration::from_secs(1)),
                Duration::from_secs(1),
            );
            loop {
                tick.tick().await;
                let p = pace(&handle).await;
                paces.borrow_mut().push(p);
            }
        })
    };

    let base = site.base_url();
    let mut next = 0usize;
    let mut in_flight = FuturesUnordered::new();
    loop {
        while in_flight.len() < CONCURRENCY && next < urls {
            let h = handle.clone();
            let url = format!("{base}/item/{next}");
            next += 1;
            in_flight.push(async move { h.fetch(Fetch::get(url)).await });
        }
        let Some(result) = in_flight.next().await else {
            break;
        };
        if matches!(&result, Ok(r) if r.status == 200) {
            ok_times.borrow_mut().push(started.elapsed());
        }
        if started.elapsed() > RUN_CAP {
            eprintln!("{}: run cap reached, stopping", sc.name);
            break;
        }
    }
    let elapsed = started.elapsed();
    sampler.abort();
    let final_pace = pace(&handle).await;
    handle.shutdown(Duration::from_secs(1)).await;

    let ok_times = ok_times.borrow();
    let log = site.requests();
    let secs = elapsed.as_secs() as usize + 1;
    let mut timeline = vec![Second::default(); secs];
    for r in &log {
        let t = r.arrived.saturating_duration_since(started).as_secs() as usize;
        let s = &mut timeline[t.min(secs - 1)];
        s.requests += 1;
        s.limited += u64::from(r.status == 429);
    }
    for t in ok_times.iter() {
        timeline[(t.as_secs() as usize).min(secs - 1)].done_ok += 1;
    }
    for (s, p) in timeline.iter_mut().zip(paces.borrow().iter()) {
        s.pace = *p;
    }
    let after = |r: &&exitcrawl_testsite::RequestRecord| r.arrived >= started + WARMUP;
    Outcome {
        name: sc.name,
        capacity: sc.capacity,
        urls,
        ok: ok_times.len() as u64,
        elapsed,
        ok_after: ok_times.iter().filter(|t| **t >= WARMUP).count() as u64,
        requests: log.len() as u64,
        limited: log.iter().filter(|r| r.status == 429).count() as u64,
        requests_after: log.iter().filter(after).count() as u64,
        limited_after: log.iter().filter(after).filter(|r| r.status == 429).count() as u64,
        final_pace,
        timeline,
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_limit: {e}");
            std::process::exit(2);
        }
    };
    let ip = |d| IpAddr::V4(Ipv4Addr::new(127, 0, 0, d));
    let scenarios = [
        Scenario {
            name: "global-300",
            limit: Limit::Global(Rate::per_second(300, 30)),
            exits: vec![ip(2)],
            capacity: 300.0,
        },
        Scenario {
            name: "per-ip-60x4",
            limit: Limit::PerPeer(Rate::per_second(60, 6)),
            exits: (2..=5).map(ip).collect(),
            capacity: 240.0,
        },
    ];
    let outcomes: Vec<Outcome> = actix_rt::System::new().block_on(async {
        let mut v = Vec::new();
        for sc in &scenarios {
            eprintln!("running {} ({} URLs) …", sc.name, args.urls);
            v.push(run(sc, args.urls, args.initial_rps).await);
        }
        v
    });

    let limiter = match args.initial_rps {
        Some(r) => format!("aimd limiter with initial_rps = {r}"),
        None => "default aimd limiter".into(),
    };
    println!(
        "concurrency {CONCURRENCY}, {limiter}, 429 without Retry-After, {} URLs",
        args.urls
    );
    println!(
        "| scenario | capacity | ok/URLs | elapsed | goodput | goodput>5s | 429 % | 429 %>5s | req/URL | final pace |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for o in &outcomes {
        println!(
            "| {} | {:.0}/s | {}/{} | {:.2} s | {:.3} | {:.3} | {:.2} % | {:.2} % | {:.3} | {:.0}/s |",
            o.name,
            o.capacity,
            o.ok,
            o.urls,
            o.elapsed.as_secs_f64(),
            o.goodput(),
            o.goodput_after(),
            pct(o.limited, o.requests),
            pct(o.limited_after, o.requests_after),
            o.requests as f64 / o.urls as f64,
            o.final_pace,
        );
    }
    if args.timeline {
        for o in &outcomes {
            println!("\n{} (capacity {:.0}/s)", o.name, o.capacity);
            println!("| s | requests | 429 | ok done | pace |");
            println!("|---|---|---|---|---|");
            for (i, s) in o.timeline.iter().enumerate() {
                println!(
                    "| {i} | {} | {} | {} | {:.0} |",
                    s.requests, s.limited, s.done_ok, s.pace
                );
            }
        }
    }
    let pass = outcomes
        .iter()
        .all(|o| o.goodput() >= 0.95 && pct(o.limited, o.requests) <= 1.0 && o.ok == o.urls as u64);
    println!(
        "\ntargets (goodput ≥ 0.95 over the whole run, 429 ≤ 1 %): {}",
        if pass { "met" } else { "MISSED" }
    );
}
