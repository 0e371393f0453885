//! The rate-limit benchmark: how close does the default adaptive limiter get to a site's
//! capacity over real loopback HTTP, on the site shapes real sites have, and what does it
//! cost the site?
//!
//! ```text
//! cargo run --release -p exitcrawl-actors --example bench_limit   # every shape
//! cargo run --release -p exitcrawl-actors --example bench_limit -- --only burst1 --scale 2
//! ```
//!
//! Each shape is a local `TestSite` (see `testsite/`) reached through four exits bound to
//! 127.0.0.2 … 127.0.0.5, with the default `[limiter]` settings (`algorithm = "aimd"`, scope
//! `auto`, `initial_rps = 5`) and `crawler.concurrency = 64`. Retries are generous
//! (`max_retries = 100`, `retry_budget = 1.0`, backoff 100 ms … 2 s) so every URL ends 200
//! and goodput measures the limiter, not the retry policy — except `faults` (a flaky
//! site) and `broken-pages` (a tenth of the pages fail every time), which run a new
//! user's defaults; for them the results column says how many URLs ended 200.
//!
//! Everything is counted **by the server**: goodput = the 200s it sent per second ÷ its
//! capacity, over the whole run (slow start included) and after the shape's warm-up (a
//! shape whose capacity steps is measured against what it could serve over that span);
//! `refused` = its 429/503/403 answers ÷ the requests it got; `req/URL` = requests it got
//! per URL; the elapsed time is also given at 95 % of the results (so what a few hung
//! pages cost shows apart). Bans are the ones it began after the warm-up. A queueing shape reports its
//! in-flight p99 over its workers (its knee). `scope` is what the limiter detected.
//!
//! Targets: goodput ≥ 0.95 and ≤ 1 % refused on token buckets with a burst; ≥
//! 0.85 and ≤ 1 % with burst 1 and on slow sites; ≥ 0.90 on quota windows; no ban after the
//! warm-up. Loopback only; each shape is bounded by its URL count and a 240 s cap.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use exitcrawl::config::{ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch};
use exitcrawl_testsite::{Limit, Rate, TestSite};
use futures_util::stream::{FuturesUnordered, StreamExt};

mod shapes;
use shapes::{shapes, Shape};

const CONCURRENCY: usize = 64;
const EXITS: u8 = 4;
/// Hard cap on one shape.
const RUN_CAP: Duration = Duration::from_secs(240);

struct Args {
    scale: f64,
    only: Option<String>,
    trace: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        scale: 1.0,
        only: None,
        trace: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--scale" => {
                let v = it.next().ok_or("--scale needs a factor")?;
                args.scale = v
                    .parse()
                    .ok()
                    .filter(|f: &f64| *f > 0.0 && *f <= 100.0)
                    .ok_or_else(|| format!("--scale: {v:?} is not a factor in (0, 100]"))?;
            }
            "--only" => args.only = Some(it.next().ok_or("--only needs a name")?),
            "--trace" => args.trace = true,
            "-h" | "--help" => {
                println!(
                    "bench_limit [--only NAME-PART] [--scale F] [--trace]   (URLs per shape × F; \
                     --trace: each second, what the server answered and each lane's rate)"
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok(args)
}

struct Outcome {
    name: &'static str,
    capacity: Option<f64>,
    /// Requests the site could serve over the run, and after the warm-up.
    served_whole: Option<f64>,
    served_after: Option<f64>,
    /// The site's capacity steps (`capacity` is where it starts).
    steps: bool,
    urls: usize,
    results: usize,
    /// Results that were a 200.
    results_200: usize,
    elapsed: Duration,
    requests: u64,
    ok: u64,
    refused: u64,
    ok_after: u64,
    requests_after: u64,
    refused_after: u64,
    warmup: Duration,
    bans_after: usize,
    knee: Option<f64>,
    scope: String,
    /// When 95 % of the URLs had their result.
    p95_done: Duration,
}

impl Outcome {
    fn goodput(&self) -> Option<f64> {
        Some(self.ok as f64 / self.served_whole?)
    }

    fn goodput_after(&self) -> Option<f64> {
        let served = self.served_after.filter(|s| *s > 0.0)?;
        Some(self.ok_after as f64 / served)
    }
}

/// Requests `sh`'s site could serve between `from` and `to` after it started: its
/// capacity times the span, over each of its steps for a site whose capacity steps.
fn served(sh: &Shape, from: Duration, to: Duration) -> Option<f64> {
    let span = |a: Duration, b: Duration| b.min(to).saturating_sub(a.max(from)).as_secs_f64();
    match sh.site.limit {
        Limit::GlobalSteps { rates, at } => {
            let rps = |r: Rate| r.tokens as f64 / r.per.as_secs_f64();
            Some(
                rps(rates[0]) * span(Duration::ZERO, at[0])
                    + rps(rates[1]) * span(at[0], at[1])
                    + rps(rates[2]) * span(at[1], Duration::MAX),
            )
        }
        _ => Some(sh.capacity? * span(Duration::ZERO, Duration::MAX)),
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn refused_status(s: u16) -> bool {
    matches!(s, 429 | 503 | 403)
}

/// The 99th percentile of the site's in-flight count (queued or served, the request itself
/// included) seen by the requests that arrived after `from`, from the site's log.
fn in_flight_p99(log: &[exitcrawl_testsite::RequestRecord], from: Instant) -> usize {
    let mut starts: Vec<Instant> = log.iter().map(|r| r.arrived).collect();
    let mut ends: Vec<Instant> = log
        .iter()
        .map(|r| r.arrived + r.queued + r.latency)
        .collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let mut seen = Vec::new();
    let mut ended = 0;
    for (i, t) in starts.iter().enumerate() {
        while ended < ends.len() && ends[ended] <= *t {
            ended += 1;
        }
        if *t >= from {
            seen.push(i + 1 - ended.min(i + 1));
        }
    }
    seen.sort_unstable();
    seen.get(seen.len().saturating_sub(1) * 99 / 100)
        .copied()
        .unwrap_or(0)
}

/// The crawler's settings for `sh`: four exits, and generous retries except on the
/// fault shapes, which run a new user's defaults.
fn settings(sh: &Shape) -> Settings {
    let exits = (0..EXITS)
        .map(|i| {
            let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + i));
            ExitSettings::new(format!("e{}", i + 2), ip)
        })
        .collect();
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.crawler.concurrency = CONCURRENCY as u32;
    if !sh.faults {
        s.crawler.max_retries = 100;
        s.crawler.retry_budget = 1.0;
        s.crawler.retry_backoff_base_ms = 100;
        s.crawler.retry_backoff_max_ms = 2_000;
        s.crawler.timeout_ms = 5_000;
        s.crawler.connect_timeout_ms = 2_000;
    }
    s
}

/// What the driver saw: results, how many were a 200, and when each came.
struct Driven {
    results: usize,
    results_200: usize,
    done_at: Vec<Duration>,
}

/// Hand `urls` URLs of `site` to the crawler, `window` outstanding at once, until all are
/// answered or the run cap.
async fn drive(
    handle: &CrawlerHandle,
    site: &TestSite,
    sh: &Shape,
    urls: usize,
    window: usize,
) -> Driven {
    let started = Instant::now();
    let mut d = Driven {
        results: 0,
        results_200: 0,
        done_at: Vec::with_capacity(urls),
    };
    let mut next = 0usize;
    let mut in_flight = FuturesUnordered::new();
    loop {
        while in_flight.len() < window && next < urls {
            let h = handle.clone();
            let url = if sh.faults {
                site.fault_url(&format!("/item/{next}"))
            } else {
                site.url(&format!("/item/{next}"))
            };
            next += 1;
            in_flight.push(async move { h.fetch(Fetch::get(url)).await });
        }
        let Some(reply) = in_flight.next().await else {
            break;
        };
        if reply.is_ok_and(|r| r.status == 200) {
            d.results_200 += 1;
        }
        d.results += 1;
        d.done_at.push(started.elapsed());
        if started.elapsed() > RUN_CAP {
            eprintln!("{}: run cap reached, stopping", sh.name);
            break;
        }
    }
    d
}

/// Each second, until the driver drops it when the crawl ends: the 200s and refusals
/// the server sent in that second, and each lane's rate, cuts and state, on stderr. What
/// a crawl did second by second, to see where a run lost its time.
async fn trace_each_second(
    handle: &CrawlerHandle,
    site: &TestSite,
    started: Instant,
) -> std::convert::Infallible {
    let (mut seen, mut second) = (0, 0u64);
    loop {
        second += 1;
        actix_rt::time::sleep_until((started + Duration::from_secs(second)).into()).await;
        let log = site.requests();
        let new = &log[seen.min(log.len())..];
        let ok = new.iter().filter(|r| r.status == 200).count();
        let refused = new.iter().filter(|r| refused_status(r.status)).count();
        seen = log.len();
        let lanes: Vec<String> = handle
            .limits()
            .await
            .iter()
            .flat_map(|l| l.lanes.iter())
            .map(|l| {
                format!(
                    "{}={:.1}/s cuts {}{}{}",
                    l.exit.as_deref().unwrap_or("host"),
                    l.rps,
                    l.decreases,
                    if l.locked_out { " locked-out" } else { "" },
                    l.latency_base.map_or_else(String::new, |b| format!(
                        " base {:.0} ms",
                        b.as_secs_f64() * 1e3
                    )),
                )
            })
            .collect();
        eprintln!(
            "t={second:>4}s ok={ok:>5} refused={refused:>4} {}",
            lanes.join(" ")
        );
    }
}

async fn run(sh: &Shape, urls: usize, trace: bool) -> Outcome {
    let site = TestSite::start(sh.site.clone());
    let s = settings(sh);
    // Fetches outstanding at once. The fault shapes read ahead as the program's URL-list
    // mode does (concurrency + queue capacity): a fetch whose page hangs holds its place
    // for all its attempts (four 10 s timeouts), and 64 places would be held by hung
    // pages alone. The limit shapes keep 64, the crawler's own concurrency: what they
    // measure is the pacing.
    let window = if sh.faults {
        CONCURRENCY + s.crawler.queue_capacity as usize
    } else {
        CONCURRENCY
    };
    let handle = Crawler::start(s).expect("start the crawler");
    let started = Instant::now();
    let driven = drive(&handle, &site, sh, urls, window);
    let Driven {
        results,
        results_200,
        done_at,
    } = if trace {
        let tracing = Box::pin(trace_each_second(&handle, &site, started));
        match futures_util::future::select(Box::pin(driven), tracing).await {
            futures_util::future::Either::Left((d, _)) => d,
            futures_util::future::Either::Right((never, _)) => match never {},
        }
    } else {
        driven.await
    };
    let elapsed = started.elapsed();
    let limits = handle.limits().await;
    if sh.faults {
        let m = handle.metrics();
        eprintln!(
            "{}: {} retries, {} deferred by the retry budget",
            sh.name,
            m.retries(),
            m.retry_budget_refusals()
        );
    }
    handle.shutdown(Duration::from_secs(1)).await;

    let stats = site.stats();
    let log = site.requests();
    let after = |r: &&exitcrawl_testsite::RequestRecord| r.arrived >= started + sh.warmup;
    let ok_status = |r: &&exitcrawl_testsite::RequestRecord| r.status == 200;
    let refused = |r: &&exitcrawl_testsite::RequestRecord| refused_status(r.status);
    let knee = match sh.site.limit {
        Limit::Workers { workers, .. } => {
            Some(in_flight_p99(&log, started + sh.warmup) as f64 / workers as f64)
        }
        _ => None,
    };
    let p95_done = done_at
        .get((urls * 95 / 100).saturating_sub(1))
        .copied()
        .unwrap_or(elapsed);
    Outcome {
        p95_done,
        name: sh.name,
        capacity: sh.capacity,
        served_whole: served(sh, Duration::ZERO, elapsed),
        served_after: served(sh, sh.warmup, elapsed),
        steps: matches!(sh.site.limit, Limit::GlobalSteps { .. }),
        urls,
        results,
        results_200,
        elapsed,
        requests: log.len() as u64,
        ok: log.iter().filter(ok_status).count() as u64,
        refused: log.iter().filter(refused).count() as u64,
        ok_after: log.iter().filter(after).filter(ok_status).count() as u64,
        requests_after: log.iter().filter(after).count() as u64,
        refused_after: log.iter().filter(after).filter(refused).count() as u64,
        warmup: sh.warmup,
        bans_after: stats
            .bans
            .iter()
            .filter(|b| b.start >= started + sh.warmup)
            .count(),
        knee,
        scope: limits
            .iter()
            .map(|l| l.scope.clone())
            .next()
            .unwrap_or_else(|| "-".into()),
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
    let shapes: Vec<Shape> = shapes()
        .into_iter()
        .filter(|s| {
            args.only
                .as_ref()
                .is_none_or(|o| s.name.contains(o.as_str()))
        })
        .collect();
    let outcomes: Vec<Outcome> = actix_rt::System::new().block_on(async {
        let mut v = Vec::new();
        for sh in &shapes {
            let urls = ((sh.urls as f64 * args.scale) as usize).max(50);
            eprintln!("running {} ({urls} URLs) …", sh.name);
            v.push(run(sh, urls, args.trace).await);
        }
        v
    });

    println!(
        "four exits, concurrency {CONCURRENCY}, default aimd limiter (scope auto); counted by the server"
    );
    println!("| shape | capacity | results/URLs (200s) | elapsed (95 % of results) | goodput | goodput after warm-up | refused | refused after warm-up | req/URL | bans after warm-up | in-flight p99 / knee | scope |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let f = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.3}"));
    for o in &outcomes {
        println!(
            "| {} | {} | {}/{} ({}) | {:.1} s ({:.1} s) | {} | {} (after {} s) | {:.2} % | {:.2} % | {:.3} | {} | {} | {} |",
            o.name,
            o.capacity.map_or_else(|| "unlimited".into(), |c| format!("{c:.0}/s")) + if o.steps { " (steps)" } else { "" },
            o.results,
            o.urls,
            o.results_200,
            o.elapsed.as_secs_f64(),
            o.p95_done.as_secs_f64(),
            f(o.goodput()),
            f(o.goodput_after()),
            o.warmup.as_secs(),
            pct(o.refused, o.requests),
            pct(o.refused_after, o.requests_after),
            o.requests as f64 / o.urls as f64,
            o.bans_after,
            f(o.knee),
            o.scope,
        );
    }
    println!();
    for sh in &shapes {
        println!("- `{}`: {}", sh.name, sh.what);
    }
}
