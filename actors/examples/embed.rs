//! Embedding exitcrawl in an actix application.
//!
//! Run with:
//!
//! ```text
//! cargo run -p exitcrawl-actors --example embed
//! ```
//!
//! What it shows:
//! 1. an actix `System` (here from `#[actix::main]`) — the crawler's actors run in it;
//! 2. `Crawler::start(settings)` with two exits, 127.0.0.2 and 127.0.0.3 (on Linux every
//!    address in 127.0.0.0/8 is local, so no setup is needed);
//! 3. the application's own actor, `App`, which holds the `CrawlerHandle` and starts a
//!    `handle.fetch(Fetch::get(url))` per URL from `started()`; each reply comes back into the actor through
//!    `ctx.spawn(fut.into_actor(self).map(..))`, so the handler may touch the actor's state;
//! 4. robots.txt obeyed without asking: the handle's first fetch to the site fetches its
//!    `/robots.txt` (the demo site answers every path with a page that holds no rules, so
//!    everything is allowed, and the site sees 51 requests for the 50 URLs);
//! 5. when every reply is in, the per-exit figures from `handle.stats()`, then the System
//!    stops.
//!
//! It uses only the root of `exitcrawl_actors` (and `exitcrawl::config` for the settings'
//! tables). The site is a local `TestSite` on 127.0.0.1 (loopback only, nothing leaves the machine).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use actix::prelude::*;
use exitcrawl::config::{Algorithm, ExitSettings};
use exitcrawl_actors::{Crawler, CrawlerHandle, Fetch, FetchError, FetchResponse, Settings};
use exitcrawl_testsite::{SiteConfig, TestSite};
use tokio::sync::oneshot;

/// How many URLs the application fetches.
const URLS: usize = 50;

/// What the application learned, handed back to `main` when the last reply is in.
#[derive(Debug, Default)]
struct Summary {
    ok: usize,
    other_status: usize,
    failed: usize,
    per_exit: std::collections::BTreeMap<std::sync::Arc<str>, usize>,
    max_attempts: u32,
}

/// The application's own actor: it owns the crawl's work list and its results.
struct App {
    handle: CrawlerHandle,
    urls: Vec<String>,
    pending: usize,
    summary: Summary,
    done: Option<oneshot::Sender<Summary>>,
}

impl App {
    fn on_reply(&mut self, reply: Result<FetchResponse, FetchError>) {
        self.pending -= 1;
        match reply {
            Ok(resp) => {
                if resp.status == 200 {
                    self.summary.ok += 1;
                } else {
                    self.summary.other_status += 1;
                }
                *self.summary.per_exit.entry(resp.exit).or_default() += 1;
                self.summary.max_attempts = self.summary.max_attempts.max(resp.attempts);
            }
            Err(e) => {
                eprintln!("fetch failed: {e}");
                self.summary.failed += 1;
            }
        }
        if self.pending == 0 {
            if let Some(tx) = self.done.take() {
                let _ = tx.send(std::mem::take(&mut self.summary));
            }
        }
    }
}

impl Actor for App {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // One spawned future per fetch; the scheduler queues, paces and spreads them over
        // the exits. `into_actor` brings each reply back into `App` with `&mut self`.
        for url in std::mem::take(&mut self.urls) {
            self.pending += 1;
            let handle = self.handle.clone();
            let fut = async move { handle.fetch(Fetch::get(url)).await };
            ctx.spawn(
                fut.into_actor(self)
                    .map(|reply, act, _ctx| act.on_reply(reply)),
            );
        }
    }
}

#[actix::main]
async fn main() {
    let site = TestSite::start(SiteConfig {
        body_size: 256,
        log_requests: false,
        ..SiteConfig::default()
    });

    let mut settings = Settings::with_exits(vec![
        ExitSettings::new("exit-2", IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))),
        ExitSettings::new("exit-3", IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3))),
    ]);
    // Adaptive pacing per (exit, host), starting at 25 requests/s per exit so the 50 URLs
    // take about a second.
    settings.limiter.algorithm = Algorithm::Aimd;
    settings.limiter.initial_rps = 25.0;
    let handle = match Crawler::start(settings) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("cannot start the crawler: {e}");
            System::current().stop();
            return;
        }
    };

    let (tx, rx) = oneshot::channel();
    let urls = (0..URLS).map(|i| site.url(&format!("/page/{i}"))).collect();
    let started = Instant::now();
    let _app = App {
        handle: handle.clone(),
        urls,
        pending: 0,
        summary: Summary::default(),
        done: Some(tx),
    }
    .start();

    let summary = rx.await.unwrap_or_default();
    println!(
        "{URLS} fetches in {:.2?}: {} ok, {} other status, {} failed, at most {} attempt(s) per fetch",
        started.elapsed(),
        summary.ok,
        summary.other_status,
        summary.failed,
        summary.max_attempts
    );
    for (exit, n) in &summary.per_exit {
        println!("  answered through {exit}: {n}");
    }

    println!(
        "{:<8} {:<10} {:>7} {:>5} {:>5} {:>9} {:>6} {:>12} {:>14}",
        "exit", "source", "healthy", "total", "ok", "throttled", "errors", "latency", "interval"
    );
    for s in handle.stats().await {
        let interval = s
            .intervals
            .iter()
            .map(|(_, d)| format!("{:.1?}", d))
            .collect::<Vec<_>>()
            .join(",");
        println!(
            "{:<8} {:<10} {:>7} {:>5} {:>5} {:>9} {:>6} {:>12} {:>14}",
            s.name,
            s.source_ip,
            s.healthy,
            s.total,
            s.ok,
            s.throttled,
            s.errors,
            s.latency_ewma
                .map_or_else(|| "-".to_string(), |d| format!("{d:.1?}")),
            interval
        );
    }
    let seen = site.stats();
    for (ip, p) in &seen.peers {
        println!(
            "site saw {ip}: {} requests over {} connection(s)",
            p.requests, p.connections
        );
    }

    handle.shutdown(Duration::from_secs(1)).await;
    System::current().stop();
}
