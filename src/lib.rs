//! # exitcrawl — the pure policy core
//!
//! exitcrawl fetches as fast as a target site allows, from several fixed egress source IPs,
//! without getting banned and without hurting the site. This crate holds every *decision*
//! the crawler makes; the crate `exitcrawl-actors` (in `actors/`) carries them out.
//!
//! # Layout
//!
//! ```text
//! Cargo.toml          workspace + this crate (`exitcrawl`)
//! src/                the pure policy core: no actix, no sockets, no sleeping
//!   clock.rs          Clock trait, MonotonicClock, FakeClock (advance(d) moves time)
//!   decision.rs       Decision::{Allow, Wait(Duration)}
//!   rng.rs            injected randomness for jitter (RandomSource, SplitMix64)
//!   limiter/          one file per algorithm behind the RateLimiter trait:
//!                     fixed window, sliding log, sliding window, token bucket,
//!                     leaky bucket, GCRA
//!   pacer.rs          carries out the controller: interval grid, pause, jitter
//!   aimd/             the adaptive controller (slow start, capacity estimate, hold,
//!                     gentle probe) in mod.rs, and a file per signal: latency (round
//!                     medians against a noise band), errors, lockout (quota windows,
//!                     bans), meter; coupling.rs: a host's budget and its exits' own;
//!                     classify.rs: what an answer or a failure means
//!   sim/              (feature `sim`) closes the loop on fake time: host policy + pacers vs a modelled
//!                     site (site.rs: the shapes real sites have), scenario files
//!   headers/          Retry-After, RateLimit / RateLimit-Policy, X-RateLimit-* → pacing hints
//!                     (mod.rs), the fields' grammars (parse.rs)
//!   proxy.rs          proxy URLs an exit sends through (http CONNECT, socks5, socks5h)
//!   redact.rs         masks credentials in URLs and secret header values for logs
//!   address.rs        which addresses count as private (loopback, RFC 1918, ULA, …)
//!   cookies.rs        the cookie jar an exit keeps per host (`[crawler] cookies`)
//!   retry.rs          backoff with full jitter, retry budget
//!   outcome.rs        the one failure vocabulary (whose fault a failure is); what
//!                     becomes of an ended attempt: final, retried, refused by the
//!                     retry budget, or moved to another exit
//!   select.rs         which exit takes the next request
//!   health.rs         per-exit health state machine (healthy → ejected → probing)
//!   config/           settings schema (serde), loading (file + env), validate()
//!   discover/         crawling: URL normalise, link extraction, scope, dedupe,
//!                     robots.txt + cache, sitemaps, per-host round-robin frontier
//!   shared_frontier.rs a shared Redis frontier's consumer: reconnect deadline, local
//!                     failures and the delivery limit, heartbeat and claim timing
//! actors/             crate exitcrawl-actors: actix actors that own I/O, timers, messages
//! cli/                crate exitcrawl-cli: the `exitcrawl` program
//! config/             default.toml (every key, commented) and example files
//! examples/           `crawl` (the program under its design name), `aimd_sim`
//! tests/              integration tests (real local servers, fake clock for the core)
//! benches/            criterion benches
//! ```
//!
//! Why the split: every policy here is a plain function of its state and `now`, returning
//! a decision. That makes each one testable with a fake clock in microseconds — a minute of
//! simulated crawling against a modelled site runs in milliseconds — and keeps the actor
//! layer thin: it owns sockets, timers and mailboxes, and asks the core what to do.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod address;
pub mod aimd;
pub mod clock;
pub mod config;
pub mod cookies;
pub mod decision;
pub mod discover;
pub mod headers;
pub mod health;
pub mod limiter;
pub mod outcome;
pub mod pacer;
pub mod proxy;
pub mod redact;
pub mod retry;
pub mod rng;
pub mod select;
pub mod shared_frontier;
#[cfg(feature = "sim")]
pub mod sim;

pub use clock::{Clock, FakeClock, MonotonicClock};
pub use decision::Decision;
pub use limiter::{Quota, RateLimiter};
pub use rng::{RandomSource, SplitMix64};
