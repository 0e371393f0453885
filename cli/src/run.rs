//! A crawl from start to end: settings, `--resume`, outputs, the crawler, the URL
//! source, progress, the mode's loop, then the summary.

use std::cell::RefCell;
use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use exitcrawl::config::{ExitSettings, Settings};
use exitcrawl::redact::mask_header;
use exitcrawl_actors::follow::{FollowTotals, Resume};
use exitcrawl_actors::{Crawler, CrawlerHandle};
use exitcrawl_net::clock;
use exitcrawl_testsite::TestSite;

use super::archive::{Archive, ArchiveOptions, Resolver};
use super::args::{ExitArg, RunArgs};
use super::consumer::{frontier_crawl, FrontierOptions};
use super::ended::Ended;
use super::fetch::Ctx;
use super::follow::{follow_crawl, FollowWriter};
use super::output::{probe_atomic, OutSync, PendingOut, SharedOut};
use super::paths::{check_distinct, Named};
use super::progress::{spawn_progress, ProgressMode, Watched};
use super::record::Totals;
use super::resuming::{compact_out, prepare_resume};
use super::robots::RobotsGate;
use super::signals::{spawn_signals, OnForcedExit, Stop};
use super::source::{spawn_reader, Lines, ReadOptions, UrlInput, UrlSource};
use super::summary::{Summary, SummaryWriter};
use super::term::{say, BAR};
use super::warc::WarcName;
use super::warc_series::{NamedEnds, SeriesLock};
use super::{demo, list, report, Failure};

/// How long in-flight fetches may take to finish at the end of a complete run.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The `[[exits]]` of `--exit`, `--proxy` and `--proxies`: an exit bound to an address is
/// named after it (`127.0.0.2`; `::1` as `--1`), a proxy exit `proxy1`, `proxy2`, … in order.
/// The flags' exits, or without any the one exit on the default route.
fn exits_or_default(args: &[ExitArg]) -> Vec<ExitSettings> {
    if args.is_empty() {
        return vec![ExitSettings::new(
            default_exit_name(),
            std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        )];
    }
    exits_of(args)
}

fn exits_of(args: &[ExitArg]) -> Vec<ExitSettings> {
    let mut proxies = 0;
    args.iter()
        .map(|a| match a {
            ExitArg::Source(ip) => ExitSettings::new(ip.to_string().replace(':', "-"), *ip),
            ExitArg::Proxy(p) => {
                proxies += 1;
                ExitSettings::via(format!("proxy{proxies}"), p)
            }
        })
        .collect()
}

/// The default-route exit's name: this host's name, in the characters an exit name may
/// have.
fn default_exit_name() -> String {
    let host = super::shared_frontier::hostname().unwrap_or_default();
    let name: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .take(64)
        .collect();
    if name.is_empty() {
        "default".to_owned()
    } else {
        name
    }
}

/// The settings: the config file's (exit 2 when it is invalid) or the demo's, with the
/// flags that override them.
fn load_settings(args: &RunArgs) -> Result<(Option<TestSite>, Settings), Failure> {
    let (site, mut settings) = match &args.config {
        Some(path) => {
            // The flags' exits replace the file's before it is validated: a file without
            // [[exits]] is complete with --exit or --proxy.
            let s = Settings::load_adjusted(path, |s| {
                if !args.exits.is_empty() {
                    s.exits = exits_of(&args.exits);
                }
            })
            .map_err(|e| Failure::Usage(format!("config {}: {e}", path.display())))?;
            (None, s)
        }
        None if matches!(args.urls, UrlSource::Demo(_)) => {
            let (site, s) = demo::setup();
            (Some(site), s)
        }
        // No file: every default and the environment's overrides, and the exits below
        // (put in before the check, which wants one).
        None => {
            let s = Settings::defaults_adjusted(|s| s.exits = exits_or_default(&args.exits))
                .map_err(|e| Failure::Usage(format!("settings: {e}")))?;
            (None, s)
        }
    };
    if !args.exits.is_empty() {
        settings.exits = exits_of(&args.exits);
    } else if settings.exits.is_empty() {
        settings.exits = exits_or_default(&args.exits);
    }
    if let Some(addr) = args.metrics {
        settings.metrics.listen = Some(addr);
    }
    if args.follow {
        settings.crawl.follow = true;
    }
    if let Some(ua) = &args.user_agent {
        settings.crawler.user_agent = ua.clone();
    }
    for (name, value) in &args.headers {
        // -H overrides a configured header of the same name, whatever its case.
        settings
            .crawler
            .headers
            .retain(|n, _| !n.eq_ignore_ascii_case(name));
        settings.crawler.headers.insert(name.clone(), value.clone());
    }
    args.overrides.apply(&mut settings);
    settings
        .validate()
        .map_err(|e| Failure::Usage(args.overrides.explain(&e)))?;
    if args.ignore_robots {
        settings.crawl.robots = false;
        say(
            "WARNING: --ignore-robots: robots.txt is NOT fetched or obeyed; disallowed paths \
             and Crawl-delay will not be honoured. Make sure you may crawl these sites.",
        );
    }
    Ok((site, settings))
}

/// The configured headers as a log shows them: secret-looking values masked.
fn shown_headers(s: &Settings) -> String {
    let shown: Vec<String> = s
        .crawler
        .headers
        .iter()
        .map(|(n, v)| format!("{}: {}", n.to_ascii_lowercase(), mask_header(n, v)))
        .collect();
    shown.join(", ")
}

/// The outputs once the run goes ahead: `--out` (truncated by now, unless appended to)
/// and the WARC and body stores.
struct Outputs {
    out: SharedOut,
    /// Syncs `--out` to the disk (the frontier consumer's records).
    out_sync: Option<OutSync>,
    archive: RefCell<Archive>,
}

/// What is checked before anything starts or is touched (exit 2): no output is an input
/// or another output, `--out` can be opened (not truncated yet), `--summary`'s directory
/// takes a file, `--warc` can be created and its series' lock is this run's (held from
/// here on), `--bodies` is not a file.
fn check_outputs(args: &RunArgs) -> Result<(Option<PendingOut>, Option<SeriesLock>), Failure> {
    let mut inputs = Vec::new();
    if let Some(c) = &args.config {
        inputs.push(Named {
            flag: "--config",
            path: c,
        });
    }
    if let UrlSource::File(u) = &args.urls {
        inputs.push(Named {
            flag: "--urls",
            path: u,
        });
    }
    let outputs: Vec<Named<'_>> = [
        ("--out", args.out.as_deref()),
        ("--summary", args.summary.as_deref()),
        ("--report", args.report.as_deref()),
        ("--warc", args.warc.as_deref()),
        ("--bodies", args.bodies.as_deref()),
    ]
    .into_iter()
    .filter_map(|(flag, p)| Some(Named { flag, path: p? }))
    .collect();
    check_distinct(&inputs, &outputs).map_err(Failure::Usage)?;
    // A resumed run replaces --out with its compaction at the end, as --summary.
    if let (true, Some(p)) = (args.resume, &args.out) {
        probe_atomic(p).map_err(|e| Failure::Usage(format!("--out {}: {e}", p.display())))?;
    }
    if let Some(p) = &args.summary {
        if p.as_os_str() != "-" {
            probe_atomic(p)
                .map_err(|e| Failure::Usage(format!("--summary {}: {e}", p.display())))?;
        }
    }
    if let Some(p) = &args.report {
        probe_atomic(p).map_err(|e| Failure::Usage(format!("--report {}: {e}", p.display())))?;
    }
    let mut warc_lock = None;
    if let Some(w) = &args.warc {
        let name = WarcName::parse(w).map_err(Failure::Usage)?;
        let usage = |e: io::Error| Failure::Usage(format!("--warc {}: {e}", w.display()));
        // Before anything is changed: another process's series is left as it has it.
        warc_lock = Some(SeriesLock::take(&name).map_err(usage)?);
        PendingOut::open(&name.file(0), true)
            .map_err(usage)?
            .abandon();
    }
    if let Some(b) = &args.bodies {
        if b.metadata().is_ok_and(|m| !m.is_dir()) {
            return Err(Failure::Usage(format!(
                "--bodies {}: is not a directory (bodies are written into DIR)",
                b.display()
            )));
        }
    }
    let out = args
        .out
        .as_deref()
        .map(|p| {
            PendingOut::open(p, args.appends())
                .map_err(|e| Failure::Usage(format!("--out {}: {e}", p.display())))
        })
        .transpose()?;
    Ok((out, warc_lock))
}

/// Open the outputs for real, now that the run goes ahead. `Err` is an argument error
/// (exit 2); `--out` is not truncated unless the WARC and body stores opened.
fn open_outputs(
    args: &RunArgs,
    (out, warc_lock): (Option<PendingOut>, Option<SeriesLock>),
    settings: &Settings,
    warc_ends: &NamedEnds,
) -> Result<Outputs, Failure> {
    let archive = Archive::open(
        ArchiveOptions {
            warc: args.warc.as_deref().zip(warc_lock),
            warc_max_bytes: args.warc_max_bytes,
            bodies: args.bodies.as_deref(),
            resume: args.appends(),
            named: warc_ends,
        },
        settings,
    );
    let archive = match archive {
        Ok(a) => a,
        Err(e) => {
            if let Some(o) = out {
                o.abandon();
            }
            return Err(e);
        }
    };
    let path = args.out.as_deref().unwrap_or(Path::new("-"));
    // The frontier consumer syncs its records before Redis hears of them.
    let frontier = matches!(args.urls, UrlSource::Frontier(_));
    let out_sync = out
        .as_ref()
        .filter(|_| frontier)
        .map(PendingOut::sync_handle);
    let out_sync = out_sync
        .transpose()
        .map_err(|e| Failure::Usage(format!("--out {}: {e}", path.display())))?
        .flatten();
    let out = out
        .map(PendingOut::commit)
        .transpose()
        .map_err(|e| Failure::Usage(format!("--out {}: {e}", path.display())))?;
    Ok(Outputs {
        out: Rc::new(RefCell::new(out)),
        out_sync,
        archive: RefCell::new(archive),
    })
}

/// `[metrics] listen` (or `--metrics`) on an address others can reach: said, not refused.
fn warn_exposed_metrics(settings: &Settings) {
    if let Some(addr) = settings.metrics.listen.filter(|a| !a.ip().is_loopback()) {
        say(&format!(
            "WARNING: metrics on {addr}: /metrics is served to anyone who can reach this \
             host on that address (the crawl's hosts, rates and exits); use 127.0.0.1:{} to \
             keep it on this machine",
            addr.port()
        ));
    }
}

fn progress_mode(args: &RunArgs) -> ProgressMode {
    if args.quiet {
        ProgressMode::Off
    } else if io::stderr().is_terminal() {
        ProgressMode::Bar
    } else if args.is_demo() {
        ProgressMode::Line(Duration::from_secs(1))
    } else {
        ProgressMode::Line(Duration::from_secs(5))
    }
}

/// Run a crawl; `Ok` says how it ended. Every check that can refuse the run (exit 2)
/// comes before any URL is read or any output is changed: the settings, the paths, the
/// URL source, then the crawler's start (metrics address, exits that cannot bind).
pub async fn run(args: RunArgs) -> Result<Ended, Failure> {
    let (site, settings) = load_settings(&args)?;
    warn_exposed_metrics(&settings);
    let input = UrlInput::open(&args.urls).map_err(|e| Failure::Usage(format!("--urls {e}")))?;
    let (out, warc_lock) = check_outputs(&args)?;
    // --sitemap seeds a crawl: the --follow loop runs, following links only with --follow.
    let follow = (settings.crawl.follow || !args.sitemaps.is_empty())
        && !matches!(args.urls, UrlSource::Frontier(_));
    let gate = RobotsGate::new(&settings);
    let resolver = args.warc.is_some().then(|| Resolver::new(&settings));
    let handle = match Crawler::start(settings) {
        // The program asks robots.txt itself (`gate`, and `--follow`'s own), so that a
        // disallowed URL gets its record in input order; the handle's gate is not asked.
        Ok(h) => h.polite(false),
        Err(e) => {
            if let Some(o) = out {
                o.abandon();
            }
            return Err(Failure::Usage(e.to_string()));
        }
    };
    let started = Started {
        handle: handle.clone(),
        site,
        input,
        gate,
        resolver,
        follow,
        warc_lock,
    };
    let ended = crawl(args, started, out).await;
    // After an interrupt or a failure the shutdown may be under way (this returns at
    // once); a failure before the crawl began must still stop the actors it started.
    let _ = actix_rt::time::timeout(
        SHUTDOWN_GRACE + Duration::from_secs(1),
        handle.shutdown(SHUTDOWN_GRACE),
    )
    .await;
    ended
}

/// A run whose start-up checks passed: the crawler runs.
struct Started {
    handle: CrawlerHandle,
    site: Option<TestSite>,
    input: UrlInput,
    gate: RobotsGate,
    resolver: Option<Resolver>,
    follow: bool,
    /// `--warc`: the series' lock.
    warc_lock: Option<SeriesLock>,
}

async fn crawl(args: RunArgs, mut s: Started, out: Option<PendingOut>) -> Result<Ended, Failure> {
    let handle = &s.handle;
    let resuming = match prepare_resume(&args, s.follow) {
        Ok(r) => r,
        Err(e) => {
            if let Some(o) = out {
                o.abandon();
            }
            return Err(e);
        }
    };
    let outputs = open_outputs(
        &args,
        (out, s.warc_lock.take()),
        handle.settings(),
        &resuming.warc_ends,
    )?;
    let warc_file = outputs.archive.borrow().warc_file();
    if let Some(said) = &resuming.said {
        match &warc_file {
            Some(w) => say(&format!("{said}; WARC continues in {}", w.display())),
            None => say(said),
        }
    }
    let (skip, resume) = (resuming.skip, resuming.resume);
    if let Some(addr) = handle.metrics_addr() {
        say(&format!("metrics on http://{addr}/metrics"));
    }
    let opts = ReadOptions {
        skip,
        dedupe: !args.no_dedupe && !s.follow,
    };
    let (urls, read) = spawn_reader(s.input, &args.given, s.site.as_ref(), opts);
    let totals = Rc::new(Totals::default());
    let summary = summary_writer(&args, &totals, &read, handle);
    let on_forced = forced_exit(&summary, args.report.clone());
    let stop = spawn_signals(Rc::clone(&outputs.out), Some(on_forced))
        .map_err(|e| Failure::Usage(format!("cannot watch for Ctrl-C: {e}")))?;
    let watched = Watched {
        handle: handle.clone(),
        totals: Rc::clone(&totals),
        read: Arc::clone(&read),
        follow: s.follow,
    };
    let progress = spawn_progress(progress_mode(&args), watched);
    tracing::info!(
        exits = handle.settings().exits.len(),
        concurrency = handle.settings().crawler.concurrency,
        resume = args.resume,
        warc = ?warc_file,
        user_agent = %handle.settings().crawler.user_agent,
        headers = %shown_headers(handle.settings()),
        "crawl started"
    );
    let ctx = Ctx {
        handle,
        gate: &s.gate,
        resolver: s.resolver.as_ref(),
        archive: &outputs.archive,
    };
    let crawled = crawl_mode(
        &args,
        &ctx,
        s.follow,
        (urls, stop, resume),
        &outputs,
        &totals,
    )
    .await;
    if let Some(p) = progress {
        p.abort();
    }
    if let Some(bar) = BAR.get() {
        bar.finish_and_clear();
    }
    let (ended, follow_totals) = crawled.map_err(Failure::Output)?;
    drop(outputs.out.borrow_mut().take());
    outputs
        .archive
        .borrow_mut()
        .finish()
        .map_err(Failure::Output)?;
    totals.add_robots(s.gate.fetches.get(), s.gate.requests.get());
    // The exits' figures are final once the crawler has shut down.
    let _ = actix_rt::time::timeout(
        SHUTDOWN_GRACE + Duration::from_secs(1),
        handle.shutdown(SHUTDOWN_GRACE),
    )
    .await;
    conclude(
        &args,
        s.site.as_ref(),
        &summary,
        (ended, &totals),
        follow_totals.as_ref(),
    )
    .await
}

/// Where the summary goes and what it is made of (see [`SummaryWriter`]).
fn summary_writer(
    args: &RunArgs,
    totals: &Rc<Totals>,
    read: &Arc<super::source::ReadStats>,
    handle: &CrawlerHandle,
) -> Rc<SummaryWriter> {
    Rc::new(SummaryWriter {
        path: args.summary.clone(),
        stdout: args.is_demo() || args.summary.is_none(),
        totals: Rc::clone(totals),
        read: Arc::clone(read),
        started: clock::now(),
        handle: handle.clone(),
        for_terminal: super::closing::table,
        frontier: matches!(args.urls, UrlSource::Frontier(_)),
    })
}

/// The end of a run whose outputs are closed: `--out` compacted after `--resume`, the
/// summary (over the whole crawl when resumed) and what to say.
async fn conclude(
    args: &RunArgs,
    site: Option<&TestSite>,
    summary: &SummaryWriter,
    (ended, totals): (Ended, &Totals),
    follow_totals: Option<&FollowTotals>,
) -> Result<Ended, Failure> {
    let (counts, compact_failed) = compact_out(args);
    let mut sum = summary.summary(follow_totals).await;
    if let Some(c) = &counts {
        sum = sum.over_records(c);
    }
    tracing::info!(
        total = sum.total,
        ok = sum.ok,
        interrupted = sum.interrupted,
        resumed = sum.resumed,
        elapsed_s = clock::since(summary.started).as_secs_f64(),
        "crawl finished"
    );
    summary.write(&sum)?;
    if let Some(path) = &args.report {
        report::write(path, &sum, totals)?;
    }
    if let Some(site) = site {
        demo::report(site);
    }
    if ended == Ended::Interrupted {
        say_interrupted(args, &sum);
    }
    match compact_failed {
        Some(e) => Err(Failure::Output(e)),
        None => Ok(ended.unless_exits_ran_out(totals.no_healthy_exit.get())),
    }
}

/// What an interrupted run recorded (the whole crawl's, when resumed), and how to go on.
fn say_interrupted(args: &RunArgs, sum: &Summary) {
    say(&format!(
        "interrupted: {} URLs recorded, {} of them interrupted; {}",
        sum.total,
        sum.interrupted,
        if matches!(args.urls, UrlSource::Frontier(_)) {
            "the rest are in the frontier: run the same command again to go on (--out is \
             appended to)"
        } else {
            "run again with --resume to finish"
        }
    ));
}

/// A second Ctrl-C writes the summary and the report of what is recorded by then.
fn forced_exit(summary: &Rc<SummaryWriter>, report: Option<PathBuf>) -> OnForcedExit {
    let summary = Rc::clone(summary);
    Rc::new(move || {
        let (summary, report) = (Rc::clone(&summary), report.clone());
        Box::pin(async move {
            let sum = summary.summary(None).await;
            let written = summary.write(&sum).and_then(|()| match &report {
                Some(path) => report::write(path, &sum, &summary.totals),
                None => Ok(()),
            });
            if let Err(Failure::Output(e) | Failure::Usage(e)) = written {
                say(&e);
            }
        })
    })
}

/// The mode's loop: frontier consumer, `--follow`, or the URL list.
async fn crawl_mode(
    args: &RunArgs,
    ctx: &Ctx<'_>,
    follow: bool,
    (urls, stop, resume): (Lines, Stop, Resume),
    outputs: &Outputs,
    totals: &Totals,
) -> Result<(Ended, Option<FollowTotals>), String> {
    let concurrency = ctx.handle.settings().crawler.concurrency.max(1) as usize;
    if let UrlSource::Frontier(f) = &args.urls {
        let opts = FrontierOptions {
            claim_idle: args.claim_idle,
            idle_exit: args.idle_exit,
            grace: args.grace,
            concurrency,
            redis_wait: args.redis_wait,
        };
        let out = (&outputs.out, outputs.out_sync.as_ref());
        let ended = frontier_crawl(ctx, f, &opts, stop, out, totals).await?;
        return Ok((ended, None));
    }
    if follow {
        let writer = FollowWriter::new(&outputs.out, totals, ctx.archive, ctx.resolver);
        let seeds = (urls, args.sitemaps.clone());
        return follow_crawl(ctx.handle, seeds, resume, stop, &writer).await;
    }
    let c = &ctx.handle.settings().crawler;
    let read_ahead = concurrency + c.queue_capacity as usize;
    let ended = list::crawl(
        ctx,
        urls,
        stop,
        args.grace,
        read_ahead,
        &outputs.out,
        totals,
    )
    .await?;
    Ok((ended, None))
}
