//! The broad-crawl benchmark: many small hosts at once, each with its own limit, crawled
//! through the library with a new user's settings; what each host saw, per host class.
//!
//! ```text
//! cargo run --release -p exitcrawl-actors --example bench_broad            # 150 hosts × 40 pages
//! cargo run --release -p exitcrawl-actors --example bench_broad -- --many  # 10,000 hosts × 5 pages
//! cargo run --release -p exitcrawl-actors --example bench_broad -- --hosts-scale 0.2 --pages 10 --retry-after none
//! cargo run --release -p exitcrawl-actors --example bench_broad -- --hosts-per-s 5  # hosts met over 30 s
//! ```
//!
//! The site is a `BroadSite` (see `testsite/src/broad.rs`): one listener per host on
//! 127.0.1.1, 127.0.1.2, … (then 127.0.2.x, …), each its own token bucket for the host (one
//! budget the exits share), served by child processes of 2,500 hosts each (this program run
//! with `--serve I/N`, see `site.rs`) so that the CPU time and memory measured here are the
//! crawler's alone and the site's descriptors do not count against the crawler's limit. Both
//! raise their soft open-file limit to the hard one; the report gives the limit, the
//! connections the hosts accepted and the descriptors the crawler holds after the crawl.
//!
//! - Default scenario: 150 hosts — 120 at 5 req/s and 30 at 1 req/s, burst 2, pages
//!   40 ms ± 50 %, `Retry-After: 1` on every 429 — 40 pages each, shuffled into one list.
//! - `--many`: 10,000 unlimited hosts (pages 20 ms ± 50 %), 5 pages each.
//!
//! The crawler: `Settings::with_exits` (every other setting its default) with four exits
//! bound to 127.0.0.2 … 127.0.0.5 and `crawler.concurrency = 256`; the URLs are handed in as
//! the `exitcrawl` list mode does, at most `concurrency + queue_capacity` outstanding
//! (`--outstanding N` changes that; `--outstanding 256` shows what a window of
//! `concurrency` costs: the slow hosts' waiting URLs fill it and starve the fast ones).
//! `--hosts-per-s R` meets the hosts over time, as a crawl that discovers them does: in a
//! seeded order, the k-th host's URLs are handed in from k / R seconds on, so the hosts
//! met later start where the crawler's host prior says. `--per-ip` makes every host limit
//! each client address instead (a bucket per exit: four times the rate in all).
//! `--forget-idle-ms MS` sets `limiter.forget_idle_ms`, leaves the crawler quiet for twice
//! that after the crawl, and reports the hosts the limiter still knows and the heap in use
//! (glibc's `mallinfo2`) per host after the crawl and after the quiet.
//!
//! Per host class it prints: hosts, pages, the ideal time (the slowest constraint: a host's
//! meeting time plus its pages ÷ its rate, or the class's pages × median latency ÷
//! concurrency),
//! the elapsed time until the class's last URL had its final answer, the 429s the hosts sent
//! (total, share of the requests they got, p90 and max per host), and URLs lost — a URL whose
//! final answer is not 200 — counted by the crawler's replies and, at the server, as pages
//! minus the 200s each host sent. Then the crawler's CPU time (getrusage: user + sys) and
//! resident memory (`VmRSS` in /proc/self/status) before and after the crawl, per host.
//!
//! Bounded: every URL is handed in once; a hard timeout (`--timeout`, default 300 s) stops
//! the crawl, counts what had no final answer as lost and reports. Loopback only.

mod site;
mod sys;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use exitcrawl::config::{ExitSettings, Settings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchError, FetchResponse};
use exitcrawl_testsite::{BroadConfig, HostClass, LimitKey, RetryAfter, Rps};

use futures_util::stream::{FuturesUnordered, StreamExt};
use site::{part_config, serve, Counted, Host, SiteProcess, HOSTS_PER_PROCESS};
use sys::{cpu_time, heap_in_use, ProcStatus};

const EXITS: u8 = 4;
const CONCURRENCY: u32 = 256;

struct Args {
    hosts_scale: f64,
    pages: Option<usize>,
    seed: u64,
    retry_after: RetryAfter,
    many: bool,
    timeout: Duration,
    outstanding: Option<usize>,
    /// Hosts met a second (`--hosts-per-s`); all at once when `None`.
    hosts_per_s: Option<f64>,
    /// Each host limits each client address (`--per-ip`): a bucket per exit.
    per_ip: bool,
    /// `limiter.forget_idle_ms` (`--forget-idle-ms`): after the crawl, wait twice this
    /// and report what the crawler still holds.
    forget_idle_ms: Option<u64>,
    /// Child mode (`--serve I/N`): serve part I of N of the site and answer on
    /// stdin/stdout.
    serve: Option<(usize, usize)>,
}

const USAGE: &str = "bench_broad [--many] [--hosts-scale F] [--pages N] [--seed S] \
[--retry-after N|none] [--timeout SECS] [--outstanding N] [--hosts-per-s R] [--per-ip] \
[--forget-idle-ms MS]";

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        hosts_scale: 1.0,
        pages: None,
        seed: 1,
        retry_after: RetryAfter::Fixed(1),
        many: false,
        timeout: Duration::from_secs(300),
        outstanding: None,
        hosts_per_s: None,
        per_ip: false,
        forget_idle_ms: None,
        serve: None,
    };
    fn value<T: std::str::FromStr>(
        flag: &str,
        v: Option<String>,
        allowed: &str,
        ok: impl Fn(&T) -> bool,
    ) -> Result<T, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value ({allowed})"))?;
        v.parse()
            .ok()
            .filter(ok)
            .ok_or_else(|| format!("{flag}: {v:?} is not allowed ({allowed})"))
    }
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--hosts-scale" => {
                a.hosts_scale = value(&flag, it.next(), "a factor in (0, 100]", |f: &f64| {
                    *f > 0.0 && *f <= 100.0
                })?;
            }
            "--pages" => {
                a.pages = Some(value(&flag, it.next(), "1 … 100000", |n: &usize| {
                    (1..=100_000).contains(n)
                })?);
            }
            "--seed" => a.seed = value(&flag, it.next(), "an unsigned integer", |_: &u64| true)?,
            "--retry-after" => {
                let v = it.next();
                a.retry_after = if v.as_deref() == Some("none") {
                    RetryAfter::Omit
                } else {
                    RetryAfter::Fixed(value(&flag, v, "seconds 0 … 86400 or none", |n| {
                        *n <= 86_400
                    })?)
                };
            }
            "--timeout" => {
                let secs = value(&flag, it.next(), "seconds 1 … 3600", |n: &u64| {
                    (1..=3600).contains(n)
                })?;
                a.timeout = Duration::from_secs(secs);
            }
            "--outstanding" => {
                a.outstanding = Some(value(&flag, it.next(), "1 … 1000000", |n: &usize| {
                    (1..=1_000_000).contains(n)
                })?);
            }
            "--hosts-per-s" => {
                a.hosts_per_s = Some(value(
                    &flag,
                    it.next(),
                    "a rate in (0, 100000]",
                    |r: &f64| *r > 0.0 && *r <= 100_000.0,
                )?);
            }
            "--forget-idle-ms" => {
                a.forget_idle_ms = Some(value(&flag, it.next(), "1000 … 60000", |n: &u64| {
                    (1_000..=60_000).contains(n)
                })?);
            }
            "--many" => a.many = true,
            "--per-ip" => a.per_ip = true,
            "--serve" => {
                let v = it.next().unwrap_or_default();
                let part = v.split_once('/').and_then(|(i, n)| {
                    let (i, n) = (i.parse().ok()?, n.parse().ok()?);
                    (i < n).then_some((i, n))
                });
                a.serve = Some(part.ok_or_else(|| format!("--serve: {v:?} is not I/N"))?);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag:?}; usage: {USAGE}")),
        }
    }
    Ok(a)
}

/// The scenario's host classes.
fn site_config(a: &Args) -> BroadConfig {
    let scaled = |n: f64| ((n * a.hosts_scale).round() as usize).max(1);
    let classes = if a.many {
        vec![HostClass {
            name: "unlimited".into(),
            hosts: scaled(10_000.0),
            rps: Rps::Unlimited,
            latency: Duration::from_millis(20),
            noise: 0.5,
            body_size: 1024,
            ..HostClass::default()
        }]
    } else {
        let small = |name: &str, hosts: f64, rps: f64| HostClass {
            name: name.into(),
            hosts: scaled(hosts),
            rps: Rps::Fixed(rps),
            burst: 2,
            key: if a.per_ip {
                LimitKey::PerClient
            } else {
                LimitKey::PerHost
            },
            latency: Duration::from_millis(40),
            noise: 0.5,
            retry_after: a.retry_after,
            body_size: 1024,
            ..HostClass::default()
        };
        vec![small("5/s", 120.0, 5.0), small("1/s", 30.0, 1.0)]
    };
    BroadConfig {
        classes,
        seed: a.seed,
        threads: 1,
        first_host: 0,
    }
}

fn pages_per_host(a: &Args) -> usize {
    a.pages.unwrap_or(if a.many { 5 } else { 40 })
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_broad: {e}");
            std::process::exit(2);
        }
    };
    let cfg = site_config(&args);
    let hosts: usize = cfg.classes.iter().map(|c| c.hosts).sum();
    if hosts > exitcrawl_testsite::broad::MAX_HOSTS {
        eprintln!(
            "bench_broad: --hosts-scale {} makes {hosts} hosts; at most {} fit on 127.0.x.y",
            args.hosts_scale,
            exitcrawl_testsite::broad::MAX_HOSTS
        );
        std::process::exit(2);
    }
    // Listeners (site) and connections (both sides) are descriptors: take all the hard
    // limit allows.
    let nofile = exitcrawl_net::process::raise_open_files().unwrap_or(0);
    if let Some((part, parts)) = args.serve {
        serve(part_config(&cfg, part, parts));
        return;
    }
    let parts = hosts.div_ceil(HOSTS_PER_PROCESS).max(1);
    let mut sites = Vec::new();
    let mut all_hosts = Vec::new();
    for part in 0..parts {
        match SiteProcess::start(part, parts) {
            Ok(mut s) => {
                all_hosts.append(&mut s.hosts);
                sites.push(s);
            }
            Err(e) => {
                eprintln!("bench_broad: cannot start the site (part {part} of {parts}): {e}");
                sites.iter_mut().for_each(SiteProcess::finish);
                std::process::exit(1);
            }
        }
    }
    let report = actix_rt::System::new().block_on(run(&args, &cfg, &all_hosts));
    let mut seen = Vec::with_capacity(all_hosts.len());
    let mut failed = None;
    for s in &mut sites {
        match s.stats() {
            Ok(mut part) => seen.append(&mut part),
            Err(e) => failed = Some(e),
        }
        s.finish();
    }
    match failed {
        None if seen.len() == all_hosts.len() => {
            print_report(&args, &cfg, &all_hosts, &seen, &report, nofile, parts);
        }
        other => {
            let e = other
                .unwrap_or_else(|| format!("{} counts for {} hosts", seen.len(), all_hosts.len()));
            eprintln!("bench_broad: cannot read the site's counts: {e}");
            std::process::exit(1);
        }
    }
}

// ---- the crawl ----------------------------------------------------------------------------

/// What the crawler measured.
struct Report {
    /// Per host: URLs whose final answer was not 200 (timeouts included).
    lost: Vec<u64>,
    /// Per host: when it was met, after the crawl's start (see `meeting_times`).
    meet: Vec<Duration>,
    /// Why URLs were lost: status or error kind (and "retry refused"), with counts.
    reasons: BTreeMap<String, u64>,
    /// Per class: when its last URL had its final answer.
    class_done: Vec<Duration>,
    elapsed: Duration,
    timed_out: bool,
    cpu_before: Duration,
    cpu_after: Duration,
    rss_before_kib: u64,
    rss_started_kib: u64,
    rss_after_kib: u64,
    hwm_after_kib: u64,
    /// Descriptors open after the crawl (the error when even listing them failed).
    fds_after: Result<usize, String>,
    /// With `--forget-idle-ms`: heap in use once started, after the crawl, and after
    /// twice the silence; hosts the limiter knows after the crawl and after the silence.
    heap: [u64; 3],
    known: [usize; 2],
}

impl Report {
    /// Before the crawl: the process's memory and CPU so far, nothing counted yet.
    fn new(hosts: usize, meet: Vec<Duration>, classes: usize, status: &mut ProcStatus) -> Self {
        Report {
            lost: vec![0; hosts],
            meet,
            class_done: vec![Duration::ZERO; classes],
            rss_before_kib: status.kib("VmRSS"),
            cpu_before: cpu_time(),
            reasons: BTreeMap::new(),
            elapsed: Duration::ZERO,
            timed_out: false,
            cpu_after: Duration::ZERO,
            rss_started_kib: 0,
            rss_after_kib: 0,
            hwm_after_kib: 0,
            fds_after: Ok(0),
            heap: [0; 3],
            known: [0; 2],
        }
    }
}

/// A small, seeded shuffle (SplitMix64 + Fisher–Yates) so the URL order is reproducible.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

fn settings(a: &Args) -> Settings {
    let exits = (0..EXITS)
        .map(|i| {
            let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + i));
            ExitSettings::new(format!("e{}", i + 2), ip)
        })
        .collect();
    let mut s = Settings::with_exits(exits);
    s.crawl.robots = false;
    s.crawler.concurrency = CONCURRENCY;
    if let Some(ms) = a.forget_idle_ms {
        // As a config file with the one key would have it (`agree`): no pause or
        // backoff outlasts the silence that forgets a host.
        s.limiter.forget_idle_ms = ms;
        s.crawler.max_retry_after_ms = ms;
        s.crawler.retry_backoff_max_ms = s.crawler.retry_backoff_max_ms.min(ms);
    }
    s
}

type Reply = (usize, Result<FetchResponse, FetchError>);

/// When each host is met, after the crawl's start: `--hosts-per-s R` meets them in a
/// seeded order, R a second; otherwise all at once.
fn meeting_times(a: &Args, hosts: usize) -> Vec<Duration> {
    let Some(rate) = a.hosts_per_s else {
        return vec![Duration::ZERO; hosts];
    };
    let mut order: Vec<usize> = (0..hosts).collect();
    shuffle(&mut order, a.seed ^ 0x6d65_6574);
    let mut meet = vec![Duration::ZERO; hosts];
    for (k, &h) in order.iter().enumerate() {
        meet[h] = Duration::from_secs_f64(k as f64 / rate);
    }
    meet
}

/// Every (host, page) once, shuffled, in the order the hosts are met.
fn work_list(a: &Args, meet: &[Duration], pages: usize) -> Vec<(usize, usize)> {
    let mut work: Vec<(usize, usize)> = (0..meet.len())
        .flat_map(|h| (0..pages).map(move |p| (h, p)))
        .collect();
    shuffle(&mut work, a.seed);
    // Stable: each host's URLs keep their shuffled order among the others met with it.
    work.sort_by_key(|&(h, _)| meet[h]);
    work
}

async fn run(a: &Args, cfg: &BroadConfig, hosts: &[Host]) -> Report {
    let pages = pages_per_host(a);
    let meet = meeting_times(a, hosts.len());
    let work = work_list(a, &meet, pages);
    let c = settings(a).crawler;
    let outstanding = a
        .outstanding
        .unwrap_or((c.concurrency + c.queue_capacity) as usize);
    // Opened before the crawl: it can be read when the crawl holds every descriptor.
    let mut status = ProcStatus::open();
    let mut r = Report::new(hosts.len(), meet, cfg.classes.len(), &mut status);
    let handle = Crawler::start(settings(a)).expect("start the crawler");
    r.rss_started_kib = status.kib("VmRSS");
    r.heap[0] = heap_in_use();
    eprintln!(
        "crawling {} URLs on {} hosts ({outstanding} outstanding, timeout {:?}) …",
        work.len(),
        hosts.len(),
        a.timeout
    );
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + a.timeout;
    let mut next = 0;
    let mut in_flight = FuturesUnordered::new();
    // Per host: handed in, no reply yet.
    let mut open = vec![0u64; hosts.len()];
    loop {
        while in_flight.len() < outstanding
            && next < work.len()
            && started.elapsed() >= r.meet[work[next].0]
        {
            let (h, p) = work[next];
            next += 1;
            open[h] += 1;
            in_flight.push(fetch(handle.clone(), h, hosts[h].base_url.clone(), p));
        }
        // The next host to meet, if its URLs wait for their time rather than for room.
        let meets = (next < work.len() && in_flight.len() < outstanding)
            .then(|| tokio::time::Instant::from_std(started + r.meet[work[next].0]));
        let wake = meets.map_or(deadline, |m| m.min(deadline));
        let answer = if in_flight.is_empty() && meets.is_some() {
            tokio::time::sleep_until(wake).await;
            Err(())
        } else {
            tokio::time::timeout_at(wake, in_flight.next())
                .await
                .map_err(|_| ())
        };
        match answer {
            Err(()) if tokio::time::Instant::now() < deadline => {}
            Ok(Some((h, reply))) => {
                open[h] -= 1;
                let class = hosts[h].class;
                r.class_done[class] = started.elapsed();
                if let Some(reason) = lost_reason(&reply) {
                    r.lost[h] += 1;
                    *r.reasons.entry(reason).or_default() += 1;
                }
            }
            Ok(None) => break,
            Err(()) => {
                r.timed_out = true;
                // Every URL without a final answer is lost, handed in or not.
                let unfinished = in_flight.len() + work.len() - next;
                *r.reasons
                    .entry("no final answer at the timeout".into())
                    .or_default() += unfinished as u64;
                for &(h, _) in &work[next..] {
                    open[h] += 1;
                }
                for (h, &n) in open.iter().enumerate().filter(|(_, n)| **n > 0) {
                    r.lost[h] += n;
                    r.class_done[hosts[h].class] = a.timeout;
                }
                break;
            }
        }
    }
    r.elapsed = started.elapsed();
    r.cpu_after = cpu_time();
    r.rss_after_kib = status.kib("VmRSS");
    r.hwm_after_kib = status.kib("VmHWM");
    r.fds_after = std::fs::read_dir("/proc/self/fd")
        .map(Iterator::count)
        .map_err(|e| e.to_string());
    drop(in_flight);
    if let Some(ms) = a.forget_idle_ms {
        forgotten(&handle, ms, &mut r).await;
    }
    handle.shutdown(Duration::from_secs(1)).await;
    r
}

/// What the crawler holds after the crawl and after twice `forget_idle_ms` of quiet.
async fn forgotten(handle: &CrawlerHandle, ms: u64, r: &mut Report) {
    r.heap[1] = heap_in_use();
    r.known[0] = handle.limits().await.len();
    tokio::time::sleep(Duration::from_millis(2 * ms)).await;
    r.heap[2] = heap_in_use();
    r.known[1] = handle.limits().await.len();
}

async fn fetch(handle: CrawlerHandle, h: usize, base: String, page: usize) -> Reply {
    let reply = handle.fetch(Fetch::get(format!("{base}/p/{page}"))).await;
    (h, reply)
}

/// `None` when the final answer is 200; otherwise what it was.
fn lost_reason(reply: &Result<FetchResponse, FetchError>) -> Option<String> {
    match reply {
        Ok(resp) if resp.status == 200 => None,
        Ok(resp) => Some(format!("{} (attempts spent)", resp.status)),
        Err(e) => Some(e.kind.as_str().to_string()),
    }
}

// ---- the report ---------------------------------------------------------------------------

/// Nearest-rank quantile of `v` (sorted here), 0 for an empty slice.
fn quantile(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).max(1);
    v.get(rank - 1).copied().unwrap_or(0)
}

/// One line of the table: a class, or all of them.
struct Row {
    name: String,
    hosts: usize,
    pages: u64,
    ideal: Duration,
    elapsed: Duration,
    requests: u64,
    limited: Vec<u64>,
    lost_crawler: u64,
    lost_server: u64,
}

impl Row {
    fn print(&mut self) {
        let limited: u64 = self.limited.iter().sum();
        let share = if self.requests == 0 {
            0.0
        } else {
            100.0 * limited as f64 / self.requests as f64
        };
        let p90 = quantile(&mut self.limited, 0.9);
        let max = self.limited.iter().max().copied().unwrap_or(0);
        println!(
            "| {} | {} | {} | {:.1} s | {:.1} s | {:.2} | {} | {limited} ({share:.1} %) | {p90} / {max} | {} | {} |",
            self.name,
            self.hosts,
            self.pages,
            self.ideal.as_secs_f64(),
            self.elapsed.as_secs_f64(),
            self.ideal.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9),
            self.requests,
            self.lost_crawler,
            self.lost_server,
        );
    }
}

/// The slowest constraint of a class: a host's meeting time plus its pages ÷ rate (× exits
/// for a bucket per client), or its pages × median latency ÷ concurrency.
fn class_ideal(class: &HostClass, members: &[(&Host, Duration)], pages: usize) -> Duration {
    let per_rate = members
        .iter()
        .filter_map(|(h, met)| h.rps.map(|rps| (rps, met)))
        .map(|(rps, met)| match class.key {
            LimitKey::PerHost => (rps, met),
            LimitKey::PerClient => (rps * f64::from(EXITS), met),
        })
        .map(|(rps, met)| met.as_secs_f64() + pages as f64 / rps)
        .fold(0.0, f64::max);
    let by_latency =
        (members.len() * pages) as f64 * class.latency.as_secs_f64() / f64::from(CONCURRENCY);
    Duration::from_secs_f64(per_rate.max(by_latency))
}

fn print_report(
    a: &Args,
    cfg: &BroadConfig,
    hosts: &[Host],
    seen: &[Counted],
    r: &Report,
    nofile: u64,
    parts: usize,
) {
    let pages = pages_per_host(a);
    println!(
        "{} hosts × {pages} pages, shuffled{}; four exits, concurrency {CONCURRENCY}, every other setting default; \
         429s and 200s counted by the hosts ({parts} site process(es)); open-file limit {nofile}{}",
        hosts.len(),
        a.hosts_per_s
            .map_or(String::new(), |r| format!(", hosts met {r} a second")),
        if r.timed_out { "; STOPPED AT THE TIMEOUT" } else { "" }
    );
    println!("| class | hosts | pages | ideal | elapsed | ideal/elapsed | requests | 429s (share) | 429s per host p90 / max | URLs lost (crawler) | URLs lost (server) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let row = |name: String, members: &[usize], ideal: Duration, elapsed: Duration| Row {
        name,
        hosts: members.len(),
        pages: (members.len() * pages) as u64,
        ideal,
        elapsed,
        requests: members.iter().map(|&h| seen[h].requests).sum(),
        limited: members.iter().map(|&h| seen[h].limited).collect(),
        lost_crawler: members.iter().map(|&h| r.lost[h]).sum(),
        lost_server: members
            .iter()
            .map(|&h| (pages as u64).saturating_sub(seen[h].ok))
            .sum(),
    };
    let mut ideal_all = Duration::ZERO;
    for (c, class) in cfg.classes.iter().enumerate() {
        let members: Vec<usize> = (0..hosts.len()).filter(|&h| hosts[h].class == c).collect();
        let refs: Vec<(&Host, Duration)> =
            members.iter().map(|&h| (&hosts[h], r.meet[h])).collect();
        let ideal = class_ideal(class, &refs, pages);
        ideal_all = ideal_all.max(ideal);
        row(class.name.clone(), &members, ideal, r.class_done[c]).print();
    }
    let all: Vec<usize> = (0..hosts.len()).collect();
    row("all".into(), &all, ideal_all, r.elapsed).print();
    if !r.reasons.is_empty() {
        let reasons: Vec<String> = r
            .reasons
            .iter()
            .map(|(k, n)| format!("{n} × {k}"))
            .collect();
        println!("URLs lost, by final answer: {}", reasons.join(", "));
    }
    let cpu = r.cpu_after.saturating_sub(r.cpu_before);
    let n = hosts.len() as f64;
    println!(
        "crawler CPU (user + sys) over the crawl: {:.2} s = {:.2} ms per host, {:.0} µs per page",
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e3 / n,
        cpu.as_secs_f64() * 1e6 / (n * pages as f64)
    );
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "crawler RSS: {:.1} MiB before start, {:.1} MiB started, {:.1} MiB after the crawl (peak {:.1} MiB): {:.1} KiB per host",
        mib(r.rss_before_kib),
        mib(r.rss_started_kib),
        mib(r.rss_after_kib),
        mib(r.hwm_after_kib),
        r.rss_after_kib.saturating_sub(r.rss_started_kib) as f64 / n
    );
    let connections: u64 = seen.iter().map(|c| c.connections).sum();
    println!(
        "connections the hosts accepted: {connections} ({:.1} per host)",
        connections as f64 / n
    );
    match &r.fds_after {
        Ok(fds) => println!("crawler descriptors open after the crawl: {fds}"),
        Err(e) => println!("crawler descriptors open after the crawl: cannot list them ({e})"),
    }
    if let Some(ms) = a.forget_idle_ms {
        let per_host = |b: u64| b.saturating_sub(r.heap[0]) as f64 / 1024.0 / n;
        println!(
            "forget_idle_ms = {ms}: hosts the limiter knows {} after the crawl, {} after {} ms \
             quiet; heap in use over the started crawler's {:.1} KiB per host after the crawl, \
             {:.1} KiB after the quiet",
            r.known[0],
            r.known[1],
            2 * ms,
            per_host(r.heap[1]),
            per_host(r.heap[2]),
        );
    }
}
