//! Raw throughput: the crawler's actor path against a bare awc loop, same site, same
//! source address, same concurrency.
//!
//! ```text
//! cargo run --release -p exitcrawl-actors --example bench_raw -- \
//!     --count 200000 --concurrency 64 --arbiters single
//! ```
//!
//! Flags (all optional): `--count N` fetches per path (default 200000), `--concurrency C`
//! requests in flight (default 64), `--arbiters single|per_exit|both` (default `single`;
//! which `crawler.arbiters` layouts to measure), `--body B` response body bytes (default 64),
//! `--only bare|actor` (run one path, no ratio: for profiling one path alone), `--rounds R`
//! (default 3: timed rounds, each running every path once, in turn; the summary gives
//! medians, and the ratio is the median of each round's actor/bare), `--slices S`
//! (default 20: each round runs its paths in S turns of `N/S` fetches each, so every path
//! meets the machine in the same state; 1 runs each path's `N` in one go), `--via
//! handle|addr|both` (default `handle`: how the actor path's fetches get in), `--floor`
//! (also run the bare loop with one `Addr::send` round trip to a do-nothing actor before
//! each request: the floor for any design that routes each fetch through a mailbox),
//! `--yield` (on every path, each task yields to the runtime once before each request, so
//! the requests of one batch of answers go out together after it: a diagnostic of how much
//! of a difference between paths is the order of sends and receives rather than work;
//! see docs/embedding.md).
//!
//! - **actor**: `Crawler::start` with one exit on 127.0.0.2, `limiter.algorithm = "none"`,
//!   `crawler.concurrency = C`, the exit's `max_concurrent = C`, `per_host_connections = C`,
//!   `queue_capacity = 4·C`; C tasks on the main Arbiter each loop on
//!   `handle.fetch(Fetch::get(url))` (`--via handle`) or on
//!   `handle.scheduler().send(Fetch::get(url))` (`--via addr`, as another actor would).
//! - **bare**: `build_client(ClientOptions::new(127.0.0.2) with max_concurrent = C)`, and C
//!   tasks on the main Arbiter each loop on `client.get(url).send()` + reading the body.
//!
//! Besides the rate, each run prints the client side's CPU time per request (all threads
//! of this process except the site's, from `/proc/self/task/*/schedstat`): on a busy
//! machine the rate swings with other load, the CPU cost per request much less.
//!
//! Each path first runs a short warm-up (connections opened, not timed). The site is a
//! local `TestSite` on 127.0.0.1 with the request log off (its own thread). Loopback only.
//! Like the `crawl` binary, the process raises glibc's heap trim threshold
//! (`exitcrawl_net::process`), for both paths alike.

use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, Arbiters, ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchError, FetchResponse};
use exitcrawl_net::{build_client, ClientOptions, DnsCache};
use exitcrawl_testsite::{SiteConfig, TestSite};

const EXIT_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

struct Args {
    count: usize,
    concurrency: usize,
    arbiters: Vec<Arbiters>,
    body: usize,
    /// Run only this path (`--only bare|actor`, for profiling one path alone).
    only: Option<&'static str>,
    /// Timed rounds; each round runs every path once.
    rounds: usize,
    /// Turns per round: every path runs `count / slices` fetches per turn.
    slices: usize,
    /// How the actor path's fetches get in (`--via handle|addr|both`).
    via: Vec<Via>,
    /// Also run the bare loop with one do-nothing actor round trip per request (`--floor`).
    floor: bool,
}

/// How the actor path's fetches get in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `CrawlerHandle::fetch` (the crate's own way in).
    Handle,
    /// `Addr<SchedulerActor>::send(Fetch)` (how other actors fetch).
    Addr,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        count: 200_000,
        concurrency: 64,
        arbiters: vec![Arbiters::Single],
        body: 64,
        only: None,
        rounds: 3,
        slices: 20,
        via: vec![Via::Handle],
        floor: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--count" => args.count = number(&flag, &value()?)?,
            "--concurrency" => args.concurrency = number(&flag, &value()?)?.max(1),
            "--body" => args.body = number(&flag, &value()?)?,
            "--rounds" => args.rounds = number(&flag, &value()?)?.max(1),
            "--slices" => args.slices = number(&flag, &value()?)?.max(1),
            "--only" => {
                args.only = match value()?.as_str() {
                    "bare" => Some("bare"),
                    "actor" => Some("actor"),
                    other => return Err(format!("--only: unknown value {other:?}")),
                }
            }
            "--floor" => args.floor = true,
            "--yield" => YIELD_FIRST.store(true, Ordering::Relaxed),
            "--via" => {
                args.via = match value()?.as_str() {
                    "handle" => vec![Via::Handle],
                    "addr" => vec![Via::Addr],
                    "both" => vec![Via::Handle, Via::Addr],
                    other => return Err(format!("--via: unknown value {other:?}")),
                }
            }
            "--arbiters" => {
                args.arbiters = match value()?.as_str() {
                    "single" => vec![Arbiters::Single],
                    "per_exit" => vec![Arbiters::PerExit],
                    "both" => vec![Arbiters::Single, Arbiters::PerExit],
                    other => return Err(format!("--arbiters: unknown value {other:?}")),
                }
            }
            "-h" | "--help" => {
                return Err("usage: bench_raw [--count N] [--concurrency C] \
                            [--arbiters single|per_exit|both] [--via handle|addr|both] [--body B] \
                            [--only bare|actor] [--rounds R] [--slices S] [--floor] [--yield]"
                    .into())
            }
            other => return Err(format!("unknown flag {other:?} (try --help)")),
        }
    }
    Ok(args)
}

fn number(flag: &str, v: &str) -> Result<usize, String> {
    v.parse()
        .map_err(|e| format!("{flag}: {v:?} is not a number ({e})"))
}

/// What one timed run produced.
struct Run {
    done: usize,
    errors: usize,
    elapsed: Duration,
    /// CPU time of the client side (every thread of this process but the site's).
    cpu: Option<Duration>,
}

impl Run {
    fn empty() -> Self {
        Run {
            done: 0,
            errors: 0,
            elapsed: Duration::ZERO,
            cpu: Some(Duration::ZERO),
        }
    }

    /// This run and `other` as one.
    fn add(&mut self, other: Run) {
        self.done += other.done;
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        self.cpu = self.cpu.zip(other.cpu).map(|(a, b)| a + b);
    }

    fn rate(&self) -> f64 {
        self.done as f64 / self.elapsed.as_secs_f64()
    }

    /// Client CPU per request, µs.
    fn cpu_us(&self) -> Option<f64> {
        self.cpu
            .map(|c| c.as_secs_f64() * 1e6 / self.done.max(1) as f64)
    }
}

/// CPU time consumed so far by this process's threads, not counting the test site's
/// (`testsite-*`), from `/proc/self/task/*/schedstat` (Linux). On a loaded machine the
/// wall-clock rate swings with other processes; CPU per request does much less.
fn client_cpu() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.starts_with("testsite") {
            continue;
        }
        // Threads may exit between listing and reading: skip those.
        let Ok(stat) = std::fs::read_to_string(dir.join("schedstat")) else {
            continue;
        };
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// `--yield`: every path's tasks yield to the runtime once before each request.
static YIELD_FIRST: AtomicBool = AtomicBool::new(false);

/// Run `count` calls of `one` with `concurrency` tasks on the current Arbiter.
/// `one` returns whether the request got a 200.
async fn drive<F, Fut>(count: usize, concurrency: usize, one: F) -> Run
where
    F: Fn() -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = bool> + 'static,
{
    let next = Rc::new(Cell::new(0usize));
    let errors = Rc::new(Cell::new(0usize));
    let cpu_before = client_cpu();
    let started = Instant::now();
    let yield_first = YIELD_FIRST.load(Ordering::Relaxed);
    let tasks: Vec<_> = (0..concurrency.min(count.max(1)))
        .map(|_| {
            let next = next.clone();
            let errors = errors.clone();
            let one = one.clone();
            actix_rt::spawn(async move {
                loop {
                    let n = next.get();
                    if n >= count {
                        break;
                    }
                    next.set(n + 1);
                    if yield_first {
                        tokio::task::yield_now().await;
                    }
                    if !one().await {
                        errors.set(errors.get() + 1);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed();
    let cpu = match (cpu_before, client_cpu()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Run {
        done: count,
        errors: errors.get(),
        elapsed,
        cpu,
    }
}

fn crawler_settings(c: usize, arbiters: Arbiters) -> Settings {
    let c32 = u32::try_from(c).unwrap_or(u32::MAX);
    let mut exit = ExitSettings::new("e2", EXIT_IP);
    exit.max_concurrent = c32;
    let mut s = Settings::with_exits(vec![exit]);
    s.crawl.robots = false;
    s.limiter.algorithm = Algorithm::None;
    s.crawler.concurrency = c32;
    s.crawler.per_host_connections = c32;
    s.crawler.queue_capacity = c32.saturating_mul(4);
    s.crawler.arbiters = arbiters;
    s
}

async fn actor_run(handle: &CrawlerHandle, via: Via, url: &str, count: usize, c: usize) -> Run {
    // One closure per way in, each capturing only what it uses, shared: cloning a
    // CrawlerHandle or an `Addr` per fetch (an `Addr` clone allocates twice) would add
    // the loop's own cost to the crawler's, and a future holding both ways is twice the
    // size of either.
    let url: Rc<str> = Rc::from(url);
    let ok = |reply: Result<FetchResponse, FetchError>| matches!(reply, Ok(r) if r.status == 200);
    match via {
        Via::Handle => {
            let handle = Rc::new(handle.clone());
            drive(count, c, move || {
                let handle = handle.clone();
                let url = url.clone();
                async move { ok(handle.fetch(Fetch::get(&*url)).await) }
            })
            .await
        }
        Via::Addr => {
            let addr = Rc::new(handle.scheduler());
            drive(count, c, move || {
                let addr = addr.clone();
                let url = url.clone();
                async move { addr.send(Fetch::get(&*url)).await.is_ok_and(ok) }
            })
            .await
        }
    }
}

/// `--floor`: an actor that does nothing, on the main Arbiter.
struct Echo;

impl actix::Actor for Echo {
    type Context = actix::Context<Self>;
}

struct Ping;

impl actix::Message for Ping {
    type Result = ();
}

impl actix::Handler<Ping> for Echo {
    type Result = ();

    fn handle(&mut self, _: Ping, _: &mut actix::Context<Self>) {}
}

/// The bare loop; with `hop`, one `Addr::send` round trip to a do-nothing actor before each
/// request (`--floor`: what any design that routes each fetch through a mailbox pays
/// before it does anything).
async fn bare_run(
    client: &awc::Client,
    hop: Option<&actix::Addr<Echo>>,
    url: &str,
    count: usize,
    c: usize,
) -> Run {
    let client = client.clone();
    let hop = hop.cloned();
    let url: Rc<str> = Rc::from(url);
    drive(count, c, move || {
        let client = client.clone();
        let hop = hop.clone();
        let url = url.clone();
        async move {
            if let Some(hop) = hop {
                if hop.send(Ping).await.is_err() {
                    return false;
                }
            }
            match client.get(&*url).send().await {
                Ok(mut resp) => {
                    let ok = resp.status().as_u16() == 200;
                    ok && resp.body().limit(2 * 1024 * 1024).await.is_ok()
                }
                Err(_) => false,
            }
        }
    })
    .await
}

/// A path measured against the bare loop.
enum Path {
    /// The crawler, fetches handed in one way.
    Actor(Via, Box<CrawlerHandle>),
    /// The bare loop plus one actor round trip per request (`--floor`).
    Hop(actix::Addr<Echo>),
}

impl Path {
    async fn run(&self, client: &awc::Client, url: &str, count: usize, c: usize) -> Run {
        match self {
            Path::Actor(via, h) => actor_run(h, *via, url, count, c).await,
            Path::Hop(echo) => bare_run(client, Some(echo), url, count, c).await,
        }
    }
}

/// The median (the mean of the middle two for an even count); NaN when empty.
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn report(label: &str, r: &Run) {
    println!(
        "{label:<26} {:>8} req in {:>8.3} s = {:>9.0} req/s, client CPU {} ({} errors)",
        r.done,
        r.elapsed.as_secs_f64(),
        r.rate(),
        r.cpu_us()
            .map_or_else(|| "n/a".to_string(), |us| format!("{us:.1} µs/req")),
        r.errors
    );
}

/// The paths measured against the bare loop, as (label, how): the actor hop (`--floor`),
/// then the crawler for each `--arbiters` layout and `--via`. `None` (said on stderr) when
/// a crawler cannot start.
fn start_paths(
    args: &Args,
    c: usize,
    run_bare: bool,
    run_actor: bool,
) -> Option<Vec<(String, Path)>> {
    let mut handles: Vec<(String, Path)> = Vec::new();
    if run_bare && args.floor {
        use actix::Actor as _;
        handles.push(("bare + 1 actor hop".into(), Path::Hop(Echo.start())));
    }
    if run_actor {
        for &arbiters in &args.arbiters {
            match Crawler::start(crawler_settings(c, arbiters)) {
                Ok(h) => {
                    // What each level that takes a fetch copies: never polled, so never sent.
                    let size = std::mem::size_of_val(&h.fetch(Fetch::get("http://size.invalid/")));
                    println!("CrawlerHandle::fetch's future: {size} bytes");
                    for &via in &args.via {
                        let label = match (args.via.len(), via) {
                            (1, _) => format!("actor ({})", arbiters.as_str()),
                            (_, Via::Handle) => format!("actor ({}, handle)", arbiters.as_str()),
                            (_, Via::Addr) => format!("actor ({}, addr)", arbiters.as_str()),
                        };
                        handles.push((label, Path::Actor(via, Box::new(h.clone()))));
                    }
                }
                Err(e) => {
                    eprintln!("cannot start the crawler: {e}");
                    return None;
                }
            }
        }
    }
    Some(handles)
}

/// The timed rounds, each printed as it ends: the bare loop's runs and each path's.
/// A round runs its paths in `slices` turns; each turn runs every path in order on its
/// share of the round's fetches.
async fn run_rounds(
    client: &awc::Client,
    url: &str,
    (count, c, rounds, slices): (usize, usize, usize, usize),
    run_bare: bool,
    handles: &[(String, Path)],
) -> (Vec<Run>, Vec<Vec<Run>>) {
    // Rounds and their turns alternate the paths so that other load on the machine hits
    // all of them alike: on a shared VM the machine's own speed was seen to move by half
    // between runs seconds apart, so each path's share of a round is spread over the round
    // in turns a fraction of a second long. The summary takes medians.
    let mut bare_runs = Vec::new();
    let mut actor_runs: Vec<Vec<Run>> = handles.iter().map(|_| Vec::new()).collect();
    let slices = slices.clamp(1, count.max(1));
    for round in 1..=rounds {
        if rounds > 1 {
            println!("round {round}/{rounds}");
        }
        let mut bare = Run::empty();
        let mut paths: Vec<Run> = handles.iter().map(|_| Run::empty()).collect();
        for turn in 0..slices {
            // The remainder goes to the last turn.
            let n = count / slices
                + if turn + 1 == slices {
                    count % slices
                } else {
                    0
                };
            if run_bare {
                bare.add(bare_run(client, None, url, n, c).await);
            }
            for ((_, path), acc) in handles.iter().zip(&mut paths) {
                acc.add(path.run(client, url, n, c).await);
            }
        }
        if run_bare {
            report("bare awc", &bare);
            bare_runs.push(bare);
        }
        for (k, ((label, _), r)) in handles.iter().zip(paths).enumerate() {
            report(label, &r);
            actor_runs[k].push(r);
        }
    }
    (bare_runs, actor_runs)
}

/// The summary: each path's median rate and CPU cost, and its ratio to the bare loop.
fn print_medians(
    rounds: usize,
    bare_runs: &[Run],
    handles: &[(String, Path)],
    actor_runs: &[Vec<Run>],
) {
    println!("median of {rounds} round(s):");
    let bare_rate = median(bare_runs.iter().map(Run::rate));
    let bare_cpu = median(bare_runs.iter().filter_map(Run::cpu_us));
    println!(
        "{:<26} {bare_rate:>9.0} req/s, client CPU {bare_cpu:.1} µs/req",
        "bare awc"
    );
    for ((label, _), runs) in handles.iter().zip(actor_runs) {
        let rate = median(runs.iter().map(Run::rate));
        let cpu = median(runs.iter().filter_map(Run::cpu_us));
        // Per round, actor against the bare run just before it.
        let ratio = median(runs.iter().zip(bare_runs).map(|(a, b)| a.rate() / b.rate()));
        println!(
            "{:<26} {rate:>9.0} req/s, client CPU {cpu:.1} µs/req; ratio to bare = {ratio:.3} \
             ({:+.1}% per-request time), client CPU +{:.1} µs/req",
            label,
            (1.0 / ratio - 1.0) * 100.0,
            cpu - bare_cpu
        );
    }
}

fn main() {
    // Large bodies and glibc's heap trimming: see exitcrawl_net::process.
    exitcrawl_net::process::keep_freed_memory(64 << 20);
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let site = TestSite::start(SiteConfig {
        body_size: args.body,
        log_requests: false,
        ..SiteConfig::default()
    });
    let url = site.url("/bench");
    let (count, c) = (args.count, args.concurrency);
    let warmup = (c * 20).min(count.max(1));
    println!(
        "bench_raw: {count} fetches, concurrency {c}, body {} B, exit {EXIT_IP} -> {}",
        args.body,
        site.addr()
    );

    let rounds = args.rounds;
    let system = actix_rt::System::new();
    system.block_on(async move {
        let mut opts = ClientOptions::new(EXIT_IP);
        opts.max_concurrent = c;
        let client = build_client(&opts, DnsCache::new(opts.dns_ttl));
        let run_bare = args.only != Some("actor");
        let run_actor = args.only != Some("bare");
        let Some(handles) = start_paths(&args, c, run_bare, run_actor) else {
            return;
        };
        // Warm-up: connections opened on every path, not timed.
        if run_bare {
            let _ = bare_run(&client, None, &url, warmup, c).await;
        }
        for (_, path) in &handles {
            let _ = path.run(&client, &url, warmup, c).await;
        }
        let shape = (count, c, rounds, args.slices);
        let (bare_runs, actor_runs) = run_rounds(&client, &url, shape, run_bare, &handles).await;
        if run_bare && !handles.is_empty() {
            print_medians(rounds, &bare_runs, &handles, &actor_runs);
        }
        for (_, path) in handles {
            if let Path::Actor(_, h) = path {
                h.shutdown(Duration::from_secs(1)).await;
            }
        }
    });
    let seen = site.stats();
    println!(
        "site: {} requests, peak in flight {}, {} connection(s) from {EXIT_IP}",
        seen.requests,
        seen.peak_in_flight,
        seen.peer(EXIT_IP).connections
    );
}
