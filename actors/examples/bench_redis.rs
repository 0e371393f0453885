//! Distributed mode figures:
//! `cargo run --release -p exitcrawl-actors --example bench_redis`.
//!
//! Starts its own `redis-server` on a free loopback port (needs it on PATH) and measures:
//! 1. the cost of one shared GCRA check: one at a time (a full round trip each) and 64 in
//!    flight on the multiplexed connection (pipelined by the client);
//! 2. the goodput of 1, 2 and 3 crawler processes (each its own actix System and exits)
//!    sharing one 300 req/s budget for one local site;
//! 3. `--adaptive`: instead, 1, 2 and 3 processes with the adaptive limiter (`aimd`,
//!    default settings, rates shared through Redis) against a site that allows 300 req/s
//!    in all (one token bucket, burst 30): goodput and refused share, counted by the
//!    site, over the whole crawl and after a 5 s warm-up. `--processes N`: only the run
//!    of N processes through Redis; `--trace`: each second's 200s and refusals per
//!    process, as the site saw them.
//!
//! Every loop is bounded; all traffic stays on 127.0.0.0/8.

use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use exitcrawl::config::{Algorithm, Backend, ExitSettings, Scope, Settings};
use exitcrawl_actors::{Crawler, Fetch};
use exitcrawl_redis::{Redis, RedisGcra, RedisOptions};
use exitcrawl_testsite::{Limit, Rate, SiteConfig, TestSite};
use futures_util::future::join_all;

struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> Server {
    let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server on PATH (apt-get install -y redis-server)");
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        thread::sleep(Duration::from_millis(20));
    }
    Server(child, port)
}

fn gcra_cost(url: &str) {
    actix_rt::System::new().block_on(async {
        let redis = Redis::connect(url, RedisOptions::default()).expect("url");
        let gcra = RedisGcra::new(redis);
        // A rate no check will hit: every answer is Allow, so only the cost is measured.
        let n = 20_000u32;
        let _ = gcra.check("warm", 1e9, 1).await;
        let t = Instant::now();
        for i in 0..n {
            gcra.check(&format!("seq{}", i % 64), 1e9, 1)
                .await
                .expect("check");
        }
        let seq = t.elapsed() / n;
        let t = Instant::now();
        for round in 0..n / 64 {
            let batch = (0..64).map(|i| {
                let gcra = gcra.clone();
                async move { gcra.check(&format!("par{}_{round}", i), 1e9, 1).await }
            });
            for r in join_all(batch).await {
                r.expect("check");
            }
        }
        let par = t.elapsed() / (n / 64 * 64);
        println!(
            "GCRA check, one at a time:         {:>8.1} µs per check",
            seq.as_secs_f64() * 1e6
        );
        println!(
            "GCRA check, 64 in flight:          {:>8.1} µs per check",
            par.as_secs_f64() * 1e6
        );
    });
}

/// Crawl `urls` pages of `site` split over `processes` crawler processes, each in its own
/// thread and actix System with one exit on 127.0.0.{2+p}, its settings set by `configure`
/// (each bounded to 240 s). Returns how many fetches ended in an answer.
fn crawl(
    site: &TestSite,
    processes: usize,
    urls: usize,
    configure: impl Fn(&mut Settings),
) -> usize {
    let per = urls / processes;
    let workers: Vec<_> = (0..processes)
        .map(|p| {
            let ip: IpAddr = format!("127.0.0.{}", 2 + p).parse().expect("ip");
            let mut s = Settings::with_exits(vec![ExitSettings::new(format!("p{p}"), ip)]);
            s.crawl.robots = false;
            configure(&mut s);
            let urls: Vec<String> = (0..per).map(|i| site.url(&format!("/p{p}/{i}"))).collect();
            thread::spawn(move || {
                actix_rt::System::new().block_on(async move {
                    let h = Crawler::start(s).expect("start");
                    let all = join_all(urls.iter().map(|u| h.fetch(Fetch::get(u.clone()))));
                    actix_rt::time::timeout(Duration::from_secs(240), all)
                        .await
                        .map_or(0, |replies| replies.iter().filter(|r| r.is_ok()).count())
                })
            })
        })
        .collect();
    workers.into_iter().map(|w| w.join().expect("worker")).sum()
}

fn goodput(url: &str, processes: usize) -> (f64, usize) {
    let site = TestSite::start(SiteConfig {
        log_requests: true,
        ..SiteConfig::default()
    });
    let ok = crawl(&site, processes, 1500, |s| {
        s.limiter.algorithm = Algorithm::Gcra;
        s.limiter.scope = Scope::Host;
        s.limiter.backend = Backend::Redis;
        s.limiter.initial_rps = 300.0;
        s.limiter.burst = 10;
        s.redis.url = Some(url.to_owned());
        s.redis.processes = processes as u32;
        s.crawler.max_retries = 0;
    });
    let times: Vec<Instant> = site.requests().iter().map(|r| r.arrived).collect();
    let span = times[times.len() - 1]
        .duration_since(times[0])
        .as_secs_f64();
    ((times.len() - 1) as f64 / span, ok)
}

/// What the site saw of `processes` adaptive crawlers sharing their rates: goodput over
/// the whole crawl and after `WARM_UP`, and the refused share.
/// `url: None`: one process with its limiter in memory, for comparison.
fn adaptive(url: Option<&str>, processes: usize) -> (f64, f64, f64) {
    const CAPACITY: f64 = 300.0;
    const WARM_UP: Duration = Duration::from_secs(5);
    let site = TestSite::start(SiteConfig {
        limit: Limit::Global(Rate::per_second(300, 30)),
        log_requests: true,
        ..SiteConfig::default()
    });
    crawl(&site, processes, 4500, |s| {
        s.limiter.scope = Scope::Host;
        if let Some(url) = url {
            s.limiter.backend = Backend::Redis;
            s.redis.url = Some(url.to_owned());
            s.redis.processes = processes as u32;
        }
        // Every URL ends 200, so goodput measures the limiter, not the retry policy.
        s.crawler.max_retries = 100;
        s.crawler.retry_budget = 1.0;
        s.crawler.retry_backoff_base_ms = 100;
        s.crawler.retry_backoff_max_ms = 2000;
    });
    let log = site.requests();
    let start = log.iter().map(|r| r.arrived).min().expect("requests");
    let end = log.iter().map(|r| r.arrived).max().expect("requests");
    let ok_rate = |from: Instant| {
        let n = log
            .iter()
            .filter(|r| r.status == 200 && r.arrived >= from)
            .count();
        n as f64 / end.duration_since(from).as_secs_f64() / CAPACITY
    };
    let refused = log.iter().filter(|r| r.status != 200).count() as f64 / log.len() as f64;
    if std::env::args().any(|a| a == "--trace") {
        print_seconds(&log, start, processes);
    }
    (ok_rate(start), ok_rate(start + WARM_UP), refused)
}

/// `--trace`: each second of the crawl, each process's 200s and refusals as the site saw
/// them (process `p` sends from 127.0.0.{2+p}).
fn print_seconds(log: &[exitcrawl_testsite::RequestRecord], start: Instant, processes: usize) {
    let secs = log
        .iter()
        .map(|r| r.arrived.duration_since(start).as_secs() as usize)
        .max()
        .unwrap_or(0);
    for s in 0..=secs {
        let cells: Vec<String> = (0..processes)
            .map(|p| {
                let ip: IpAddr = format!("127.0.0.{}", 2 + p).parse().expect("ip");
                let of = |ok: bool| {
                    log.iter()
                        .filter(|r| {
                            r.peer == ip
                                && r.arrived.duration_since(start).as_secs() as usize == s
                                && (r.status == 200) == ok
                        })
                        .count()
                };
                format!("p{p} {:>4} ok {:>3} refused", of(true), of(false))
            })
            .collect();
        println!("  {s:>3} s  {}", cells.join("   "));
    }
}

fn main() {
    let server = start_redis();
    let url = format!("redis://127.0.0.1:{}/", server.1);
    if std::env::args().any(|a| a == "--adaptive") {
        let only: Option<usize> = std::env::args()
            .skip_while(|a| a != "--processes")
            .nth(1)
            .map(|v| v.parse().expect("--processes: a number"));
        let runs = [
            (None, 1),
            (Some(url.as_str()), 1),
            (Some(&url), 2),
            (Some(&url), 3),
        ];
        let runs = runs
            .into_iter()
            .filter(|(r, p)| only.is_none_or(|n| r.is_some() && *p == n));
        for (redis, p) in runs {
            let (whole, warm, refused) = adaptive(redis, p);
            let how = if redis.is_some() {
                "through Redis"
            } else {
                "no Redis"
            };
            println!(
                "{p} adaptive process(es), {how}, site allows 300 req/s: goodput {whole:.3} \
                 whole, {warm:.3} after 5 s, {:.2} % refused",
                refused * 100.0
            );
        }
        return;
    }
    gcra_cost(&url);
    for p in 1..=3 {
        let (rate, ok) = goodput(&url, p);
        println!(
            "{p} process(es) sharing 300 req/s:    {rate:>8.1} req/s = {:.3} of the budget ({ok} ok)",
            rate / 300.0
        );
    }
}
