//! `--follow` (and `--sitemap`): every URL of the source is a seed, every `--sitemap` a
//! sitemap to seed from; `exitcrawl_actors::follow` crawls (scope, dedupe, robots.txt,
//! Crawl-delay, sitemaps) and hands over each record with its answer, which is masked,
//! kept (WARC, bodies) and written as it arrives. A stop signal ends the crawl at once
//! (the fetches in flight are dropped, without records): exit 130.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::pin::pin;
use std::time::Instant;

use exitcrawl::redact::mask_url;
use exitcrawl_actors::follow::{self, FollowOptions, FollowRecord, FollowTotals, Resume};
use exitcrawl_actors::{CrawlerHandle, FetchResponse};
use exitcrawl_net::clock;
use futures_util::future::{select, try_join, Either};
use serde::Serialize;
use tokio::sync::mpsc;

use super::archive::{Archive, Kept, Resolver};
use super::ended::Ended;
use super::list::FLUSH_EVERY;
use super::output::{flush, write_line, SharedOut};
use super::record::{mask_text, Counted, Totals};
use super::signals::Stop;
use super::source::{Line, Lines};
use super::term::say;

/// One line of `--out` with `--follow`: the crawl's record and the answer's fields.
#[derive(Serialize)]
struct FollowLine<'a> {
    #[serde(flatten)]
    record: &'a FollowRecord,
    /// When the record was made: RFC 3339, UTC, milliseconds (as the list's records).
    fetched_at: String,
    #[serde(flatten)]
    kept: Kept,
}

/// Where records go.
pub struct FollowWriter<'a> {
    pub out: &'a SharedOut,
    pub totals: &'a Totals,
    pub archive: &'a RefCell<Archive>,
    pub resolver: Option<&'a Resolver>,
    last_flush: Cell<Instant>,
}

impl<'a> FollowWriter<'a> {
    pub fn new(
        out: &'a SharedOut,
        totals: &'a Totals,
        archive: &'a RefCell<Archive>,
        resolver: Option<&'a Resolver>,
    ) -> Self {
        FollowWriter {
            out,
            totals,
            archive,
            resolver,
            last_flush: Cell::new(clock::now()),
        }
    }

    /// Mask, count, keep the page and write the record.
    async fn write(
        &self,
        mut r: FollowRecord,
        answer: Option<FetchResponse>,
    ) -> Result<(), String> {
        let raw = std::mem::take(&mut r.url);
        r.url = mask_url(&raw);
        r.parent = r.parent.as_deref().map(mask_url);
        for l in &mut r.links {
            *l = mask_url(l);
        }
        r.error = r.error.as_deref().map(|e| mask_text(e, &raw));
        let fetched_at = std::time::SystemTime::now();
        let mut flush_now = false;
        let kept = match answer {
            Some(a) => {
                let peer = match self.resolver {
                    Some(res) => res.peer(&a).await,
                    None => None,
                };
                let mut archive = self.archive.borrow_mut();
                flush_now = archive.flushes_records();
                archive.keep(&a, peer)?
            }
            None => Kept::default(),
        };
        if let Some(w) = self.out.borrow_mut().as_mut() {
            let mut written = write_line(
                w,
                &FollowLine {
                    record: &r,
                    fetched_at: super::date::rfc3339_millis(fetched_at),
                    kept,
                },
            );
            let due = flush_now || clock::since(self.last_flush.get()) >= FLUSH_EVERY;
            if written.is_ok() && due {
                self.last_flush.set(clock::now());
                written = w.flush();
            }
            written.map_err(|e| format!("writing --out: {e}"))?;
        }
        // Counted once written: a record dropped on the way (a stop while the site's
        // address is looked up) is in neither the figures nor `--out`.
        self.totals.add_fetch(&Counted {
            url: &r.url,
            exit: r.exit.as_deref(),
            status: r.status,
            attempts: r.attempts,
            throttled: r.throttled,
            elapsed_ms: r.elapsed_ms,
            error: r.error.as_deref(),
            interrupted: false,
            skipped: r.skipped,
            at: fetched_at,
        });
        Ok(())
    }
}

/// Crawl from the seeds in `urls`. Returns how it ended and the crawl's counters (the
/// figures so far when it was interrupted).
pub async fn follow_crawl(
    handle: &CrawlerHandle,
    (mut urls, sitemaps): (Lines, Vec<String>),
    resume: Resume,
    mut stop: Stop,
    writer: &FollowWriter<'_>,
) -> Result<(Ended, Option<FollowTotals>), String> {
    let mut seeds = Vec::new();
    let mut too_long = Vec::new();
    loop {
        // A stop while the seeds are read (a pipe left open) ends the run as it would
        // the crawl: nothing was fetched yet.
        let line = match select(pin!(urls.recv()), pin!(stop.recv())).await {
            Either::Left((Some(line), _)) => line,
            Either::Left((None, _)) => break,
            Either::Right(_) => {
                say("interrupted while reading the seeds: nothing was fetched");
                return Ok((Ended::Interrupted, Some(FollowTotals::default())));
            }
        };
        match line {
            // The kept start of a line too long to be a URL is no seed: normalised, it
            // could be a shorter URL nobody listed.
            Ok(Line::TooLong(start, bytes)) => too_long.push((start, bytes)),
            Ok(line) => seeds.push(line.into_url()),
            Err(e) => return Err(format!("reading seeds: {e}")),
        }
    }
    let read = (seeds.len() + too_long.len()) as u64;
    writer.totals.read.set(read);
    writer.totals.found.set(read);
    for (start, bytes) in too_long {
        let error = Line::too_long_message(bytes);
        writer
            .write(FollowRecord::unsent_seed(start, error), None)
            .await?;
    }
    let mut opts = FollowOptions::from_settings(handle.settings());
    opts.sitemaps = sitemaps;
    // An interrupted crawl's future is dropped: its summary takes the figures so far.
    let so_far = std::rc::Rc::new(std::cell::RefCell::new(FollowTotals::default()));
    opts.so_far = Some(std::rc::Rc::clone(&so_far));
    opts.resume = Some(resume);
    // Records come out of the crawl through a callback; keeping a page may wait (the
    // site's address for WARC), so they are written by a second future beside it.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let done = {
        let crawl = async {
            follow::crawl(handle, seeds, opts, move |r, a| {
                let _ = tx.send((r, a));
            })
            .await
            .map_err(|e| e.to_string())
        };
        let write = async {
            while let Some((r, a)) = rx.recv().await {
                writer.write(r, a).await?;
                // The crawl's count as of this record, for the progress display.
                writer.totals.found.set(so_far.borrow().discovered);
            }
            Ok::<_, String>(())
        };
        // A write that fails (a full disk) ends the crawl with it: the crawl's fetches in
        // flight are dropped, and no further page is fetched only to go unrecorded. The
        // crawl ending first drops its sender, so the writer still writes every record
        // handed over before it ends.
        let both = pin!(try_join(crawl, write));
        let stopped = pin!(stop.recv());
        match select(both, stopped).await {
            Either::Left((result, _)) => Some(result?.0),
            Either::Right(_) => None,
        }
    };
    let (ended, ft) = match done {
        Some(ft) => (Ended::Complete, Some(ft)),
        None => {
            say("interrupted: --follow stops at once (fetches in flight get no record)");
            // What the crawl handed over before the stop (fetches that ended, links it
            // left out) is written, so that the figures and `--out` agree.
            let handed = async {
                while let Ok((r, a)) = rx.try_recv() {
                    writer.write(r, a).await?;
                }
                Ok::<_, String>(())
            };
            if let Ok(written) = tokio::time::timeout(HANDED_OVER_WAIT, handed).await {
                written?;
            }
            (Ended::Interrupted, Some(so_far.borrow().clone()))
        }
    };
    flush(writer.out)?;
    Ok((ended, ft))
}

/// How long a stopped `--follow` crawl writes the records it was handed before the stop
/// (a page kept in the WARC waits for its site's address, which the DNS cache holds).
const HANDED_OVER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
