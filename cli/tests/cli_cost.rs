//! What the `exitcrawl` binary costs per URL against an unlimited local site: CPU time of
//! the whole process (every thread: the URL reader, the actors, the writers) per URL, the
//! rate, and its peak RSS — writing JSONL only (`jsonl`; `norobots` the same with
//! `--ignore-robots`), and JSONL with `--warc` (`warc`) or with `--bodies` (`bodies`).
//!
//! A measurement, not a check: ignored by default. Run it on a quiet machine with
//!
//! ```text
//! cargo test --release -p exitcrawl-cli --test cli_cost -- --ignored --nocapture
//! EXITCRAWL_COST_URLS=1000000 EXITCRAWL_COST_ROUNDS=1 cargo test --release \
//!     -p exitcrawl-cli --test cli_cost -- --ignored --nocapture
//! ```
//!
//! Each round also runs `bench_raw --only actor` (built first with `cargo build --release
//! -p exitcrawl-actors --example bench_raw`; found next to the binary, or at `EXITCRAWL_COST_BENCH_RAW`) with
//! the same count — the same exit (127.0.0.2), limits off, concurrency 64, 64-byte bodies
//! — and prints each mode's CPU per URL over `bench_raw`'s client CPU per request in the
//! same round: the machine's load moves both alike. The site runs in this test's process,
//! so none of its CPU is counted; robots.txt is on (the default), so each run also fetches
//! it once and checks every URL against it.

mod cli_support;

use std::time::{Duration, Instant};

use cli_support::{cmd, s, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};

const CONFIG: &str = r#"
[crawler]
concurrency = 64
per_host_connections = 64
queue_capacity = 256
max_retries = 0

[limiter]
algorithm = "none"

[[exits]]
name = "e2"
source_ip = "127.0.0.2"
max_concurrent = 64
"#;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU of the children waited for so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    assert_eq!(rc, 0, "getrusage");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The child's peak RSS so far (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One run: CPU µs per URL, URLs/s, peak RSS in MiB. With `EXITCRAWL_COST_WRAPPER` (e.g.
/// `perf record -e cpu-clock -g -o /tmp/perf.data --`) the binary runs under that
/// command, for a profile (the figures then include the wrapper's own cost).
fn measure(args: &[&str], urls: usize) -> (f64, f64, f64) {
    let before = children_cpu();
    let started = Instant::now();
    let mut command = match std::env::var("EXITCRAWL_COST_WRAPPER") {
        Ok(w) if !w.trim().is_empty() => {
            let mut words = w.split_whitespace();
            let mut c = std::process::Command::new(words.next().unwrap_or_default());
            c.args(words).arg(cmd(&[]).get_program()).args(args);
            c
        }
        _ => cmd(args),
    };
    let mut child = command.spawn().expect("spawn exitcrawl");
    let mut peak = 0;
    while child.try_wait().expect("try_wait").is_none() {
        peak = peak.max(peak_rss_kib(child.id()).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = started.elapsed();
    assert!(
        child.wait().expect("wait").success(),
        "exitcrawl {args:?} failed"
    );
    let cpu = children_cpu() - before;
    (
        cpu.as_secs_f64() * 1e6 / urls as f64,
        urls as f64 / wall.as_secs_f64(),
        peak as f64 / 1024.0,
    )
}

/// `bench_raw`'s binary, if built.
fn bench_raw() -> Option<std::path::PathBuf> {
    if let Ok(p) = std::env::var("EXITCRAWL_COST_BENCH_RAW") {
        return Some(p.into());
    }
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_exitcrawl"));
    let p = bin.parent()?.join("examples").join("bench_raw");
    p.is_file().then_some(p)
}

/// `bench_raw --only actor`'s client CPU per request (µs).
fn bench_raw_cpu(bin: &std::path::Path, n: usize) -> f64 {
    let o = std::process::Command::new(bin)
        .args([
            "--count",
            &n.to_string(),
            "--only",
            "actor",
            "--rounds",
            "1",
        ])
        .output()
        .expect("run bench_raw");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("actor"))
        .unwrap_or_else(|| panic!("bench_raw printed no actor line: {text}"));
    let cpu = line.split("client CPU ").nth(1).expect("client CPU");
    cpu.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a number")
}

#[test]
#[ignore = "a measurement: run by hand with --release --ignored --nocapture"]
fn cost_per_url() {
    let n = env_usize("EXITCRAWL_COST_URLS", 200_000);
    let rounds = env_usize("EXITCRAWL_COST_ROUNDS", 3);
    // 64-byte bodies as in bench_raw, each different (so --bodies stores each one).
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(|_: &str, pq: &str| {
            Some(Page::text(format!("{pq:<64}")))
        })),
        log_requests: false,
        ..SiteConfig::default()
    });
    let dir = TempDir::new("cost");
    let config = dir.file("c.toml", CONFIG);
    let list: String = (0..n).map(|i| site.url(&format!("/c/{i}\n"))).collect();
    let urls = dir.file("urls.txt", &list);
    let out = dir.path("o.jsonl");
    let base = [
        "--config",
        s(&config),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        "/dev/null",
        "--quiet",
    ];
    let warc = dir.path("w.warc.gz");
    let bodies = dir.path("bodies");
    // EXITCRAWL_COST_MODES=jsonl,norobots,warc,bodies (the default) picks the runs.
    let only = std::env::var("EXITCRAWL_COST_MODES").unwrap_or_default();
    let modes: Vec<(&str, Vec<&str>)> = [
        ("jsonl", vec![]),
        ("norobots", vec!["--ignore-robots"]),
        ("warc", vec!["--warc", s(&warc)]),
        ("bodies", vec!["--bodies", s(&bodies)]),
    ]
    .into_iter()
    .filter(|(name, _)| only.is_empty() || only.split(',').any(|m| m == *name))
    .collect();
    let raw = bench_raw();
    if raw.is_none() {
        println!(
            "(bench_raw not built: no ratios; \
             cargo build --release -p exitcrawl-actors --example bench_raw)"
        );
    }
    println!("{n} URLs, {rounds} rounds; CPU µs/URL (whole process), URLs/s, peak RSS MiB");
    // Per mode: (CPU µs/URL, ratio to bench_raw in the same round, URLs/s, peak RSS MiB).
    let mut seen: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); modes.len()];
    for round in 1..=rounds {
        let base_cpu = raw.as_deref().map(|b| bench_raw_cpu(b, n));
        if let Some(b) = base_cpu {
            println!("round {round} bench_raw actor {b:6.2} µs/req");
        }
        for (m, (name, extra)) in modes.iter().enumerate() {
            let _ = std::fs::remove_dir_all(&bodies);
            let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
            let (cpu, rate, rss) = measure(&args, n);
            let ratio = base_cpu.map_or(f64::NAN, |b| cpu / b);
            println!(
                "round {round} {name:<8} {cpu:6.2} µs/URL {ratio:5.2}x {rate:9.0} URLs/s \
                 {rss:6.1} MiB"
            );
            seen[m].push((cpu, ratio, rate, rss));
        }
    }
    println!("medians (ranges) over {rounds} rounds:");
    for ((name, _), runs) in modes.iter().zip(&seen) {
        let stat = |f: fn(&(f64, f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0], v[v.len() - 1])
        };
        let (cpu, c0, c1) = stat(|r| r.0);
        let (ratio, r0, r1) = stat(|r| r.1);
        let (_, _, rss) = stat(|r| r.3);
        println!(
            "{name:<8} {cpu:6.2} µs/URL ({c0:.2}-{c1:.2}), {ratio:.2}x bench_raw's actor path \
             ({r0:.2}-{r1:.2}), peak RSS ≤ {rss:.1} MiB"
        );
    }
}
