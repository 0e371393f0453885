//! A crawl from start to end: settings, `--resume`, outputs, the crawler, the URL
//! source, progress, the mode's loop, then the summary.

use std::cell::RefCell;
use std::collections::HashSet;
use std::io::{self, IsTerminal, Write};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use exitcrawl::config::Settings;
use exitcrawl::redact::mask_header;
use exitcrawl_testsite::TestSite;

use super::archive::{Archive, ArchiveOptions, Resolver};
use super::args::RunArgs;
use super::fetch::Ctx;
use super::follow::{follow_crawl, FollowWriter};
use super::frontier::{frontier_crawl, FrontierOptions};
use super::output::{open_output, SharedOut};
use super::progress::{say, spawn_progress, ProgressMode, Watched, BAR};
use super::record::Totals;
use super::resume::read_resume;
use super::robots::RobotsGate;
use super::signals::{spawn_signals, Stop};
use super::source::{spawn_reader, Lines, UrlSource};
use super::summary::Summary;
use super::{demo, list, Failure};
use crate::{Crawler, FollowTotals, Resume};

/// How long in-flight fetches may take to finish at the end of a complete run.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How the crawl loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every URL read has its final record.
    Complete,
    /// Ctrl-C/SIGTERM: the URLs not finished are recorded as interrupted.
    Interrupted,
}

/// The settings: the config file's (exit 2 when it is invalid) or the demo's, with the
/// flags that override them.
fn load_settings(args: &RunArgs) -> Result<(Option<TestSite>, Settings), Failure> {
    let (site, mut settings) = match &args.config {
        Some(path) => {
            let s = Settings::load(path)
                .map_err(|e| Failure::Usage(format!("config {}: {e}", path.display())))?;
            (None, s)
        }
        None => {
            let (site, s) = demo::setup();
            (Some(site), s)
        }
    };
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
    settings
        .validate()
        .map_err(|e| Failure::Usage(format!("with -H/--user-agent: {e}")))?;
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

/// `--resume`: the URLs to skip (list mode) or what the crawl goes on from (`--follow`).
fn prepare_resume(args: &RunArgs, follow: bool) -> Result<(HashSet<String>, Resume), Failure> {
    let (true, Some(path)) = (args.resume, &args.out) else {
        return Ok((HashSet::new(), Resume::default()));
    };
    let state = read_resume(path)
        .map_err(|e| Failure::Usage(format!("--resume {}: {e}", path.display())))?;
    if state.truncated > 0 {
        say(&format!(
            "--resume: cut an unfinished last line ({} bytes) off {}",
            state.truncated,
            path.display()
        ));
    }
    if state.unreadable > 0 {
        say(&format!(
            "--resume: {} lines of {} are not records; ignored",
            state.unreadable,
            path.display()
        ));
    }
    say(&format!(
        "--resume: {} records, {} URLs done, {} interrupted to fetch again",
        state.records,
        state.done.len(),
        state.interrupted
    ));
    if !follow {
        return Ok((state.done, Resume::default()));
    }
    if state.masked_links > 0 {
        say(&format!(
            "--resume: {} recorded links have masked credentials (***) and are not resumed",
            state.masked_links
        ));
    }
    // The seeds all go to the crawl, which knows which are done.
    let resume = Resume {
        done: state.done.into_iter().collect(),
        pages: state.pages,
        pending: state.links,
    };
    Ok((HashSet::new(), resume))
}

/// `--out`, `--summary`, `--warc`, `--bodies`, opened before the crawl so a bad path
/// fails first (exit 2).
struct Outputs {
    out: SharedOut,
    summary: Option<Box<dyn Write>>,
    archive: RefCell<Archive>,
}

fn open_outputs(args: &RunArgs, settings: &Settings) -> Result<Outputs, Failure> {
    let out = match &args.out {
        Some(p) => Some(
            open_output(p, args.resume)
                .map_err(|e| Failure::Usage(format!("--out {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let summary = match &args.summary {
        Some(p) => Some(
            open_output(p, false)
                .map_err(|e| Failure::Usage(format!("--summary {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let archive = Archive::open(
        &ArchiveOptions {
            warc: args.warc.as_deref(),
            warc_max_bytes: args.warc_max_bytes,
            bodies: args.bodies.as_deref(),
            resume: args.resume,
        },
        settings,
    )?;
    Ok(Outputs {
        out: Rc::new(RefCell::new(out)),
        summary,
        archive: RefCell::new(archive),
    })
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

/// Run a crawl; `Ok` says how it ended.
pub async fn run(args: RunArgs) -> Result<Ended, Failure> {
    let (site, settings) = load_settings(&args)?;
    // --sitemap seeds a crawl: the --follow loop runs, following links only with --follow.
    let follow = (settings.crawl.follow || !args.sitemaps.is_empty())
        && !matches!(args.urls, UrlSource::Frontier(_));
    let (skip, resume) = prepare_resume(&args, follow)?;
    let outputs = open_outputs(&args, &settings)?;
    let stop = spawn_signals(Rc::clone(&outputs.out))
        .map_err(|e| Failure::Usage(format!("cannot watch for Ctrl-C: {e}")))?;
    let gate = RobotsGate::new(&settings);
    let resolver = outputs
        .archive
        .borrow()
        .has_warc()
        .then(|| Resolver::new(&settings));
    let handle = Crawler::start(settings).map_err(|e| Failure::Usage(e.to_string()))?;
    if let Some(addr) = handle.metrics_addr() {
        say(&format!("metrics on http://{addr}/metrics"));
    }
    let (urls, read) = spawn_reader(&args.urls, site.as_ref(), skip)
        .map_err(|e| Failure::Usage(format!("--urls {e}")))?;
    let totals = Rc::new(Totals::default());
    let watched = Watched {
        handle: handle.clone(),
        totals: Rc::clone(&totals),
        read: Arc::clone(&read),
    };
    let progress = spawn_progress(progress_mode(&args), watched);
    let started = Instant::now();
    tracing::info!(
        exits = handle.settings().exits.len(),
        concurrency = handle.settings().crawler.concurrency,
        resume = args.resume,
        user_agent = %handle.settings().crawler.user_agent,
        headers = %shown_headers(handle.settings()),
        "crawl started"
    );
    let ctx = Ctx {
        handle: &handle,
        gate: &gate,
        resolver: resolver.as_ref(),
        archive: &outputs.archive,
    };
    let crawled = crawl_mode(&args, &ctx, follow, (urls, stop, resume), &outputs, &totals).await;
    let elapsed = started.elapsed();
    if let Some(p) = progress {
        p.abort();
    }
    if let Some(bar) = BAR.get() {
        bar.finish_and_clear();
    }
    let stats = handle.stats().await;
    // After an interrupt the shutdown is already under way (this returns at once).
    let _ = actix_rt::time::timeout(
        SHUTDOWN_GRACE + Duration::from_secs(1),
        handle.shutdown(SHUTDOWN_GRACE),
    )
    .await;
    let (ended, follow_totals) = crawled.map_err(Failure::Output)?;
    drop(outputs.out.borrow_mut().take());
    outputs
        .archive
        .borrow_mut()
        .finish()
        .map_err(Failure::Output)?;
    totals.add_robots(gate.fetches.get(), gate.requests.get());
    tracing::info!(
        total = totals.total.get(),
        ok = totals.ok.get(),
        interrupted = totals.interrupted.get(),
        elapsed_s = elapsed.as_secs_f64(),
        "crawl finished"
    );
    let mut summary = Summary::new(
        &totals,
        read.skipped.load(Ordering::Relaxed),
        elapsed,
        stats,
    );
    if let Some(ft) = &follow_totals {
        summary = summary.with_follow(ft);
    }
    write_summary(&args, &summary, outputs.summary)?;
    if let Some(site) = &site {
        demo::report(site);
    }
    if ended == Ended::Interrupted {
        say(&format!(
            "interrupted: {} URLs recorded, {} of them interrupted; run again with --resume \
             to finish",
            totals.total.get(),
            totals.interrupted.get()
        ));
    }
    Ok(ended)
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
        };
        let ended = frontier_crawl(ctx, f, &opts, stop, &outputs.out, totals).await?;
        return Ok((ended, None));
    }
    if follow {
        let writer = FollowWriter::new(&outputs.out, totals, ctx.archive, ctx.resolver);
        let seeds = (urls, args.sitemaps.clone());
        return follow_crawl(ctx.handle, seeds, resume, stop, &writer).await;
    }
    let ended = list::crawl(
        ctx,
        urls,
        stop,
        args.grace,
        concurrency,
        &outputs.out,
        totals,
    )
    .await?;
    Ok((ended, None))
}

/// The summary to `--summary`, and to stdout for the demo or without `--summary`.
fn write_summary(
    args: &RunArgs,
    summary: &Summary,
    out: Option<Box<dyn Write>>,
) -> Result<(), Failure> {
    let json = serde_json::to_string(summary).expect("summary serializes");
    if let Some(mut w) = out {
        writeln!(w, "{json}")
            .and_then(|()| w.flush())
            .map_err(|e| Failure::Output(format!("writing --summary: {e}")))?;
    }
    if args.is_demo() || args.summary.is_none() {
        println!("{json}");
    }
    Ok(())
}
