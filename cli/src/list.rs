//! The URL-list mode: the list read ahead by `crawler.concurrency + crawler.queue_capacity`
//! URLs (waiting for robots.txt, for a Crawl-delay turn, for their host's pacing, or
//! fetching), one record per input URL written as soon as it completes, and the stop on
//! Ctrl-C / SIGTERM.
//!
//! Why the read-ahead is the scheduler's whole capacity and not `concurrency`: on a broad
//! list most URLs wait for their host's turn, not for the wire. A window of `concurrency`
//! fills with the slow hosts' waiting URLs and starves every fast host behind them (a list
//! of 1 req/s and 5 req/s hosts then runs the fast ones at the slow ones' pace). The
//! scheduler still sends at most `concurrency` at once; `queue_capacity` bounds the rest.

use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use exitcrawl_net::clock;
use futures_util::future::{FutureExt, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};

use super::ended::Ended;
use super::fetch::{fetch_one, settle, Ctx, Outcome};
use super::output::{flush, write_line, SharedOut};
use super::record::{Record, Totals};
use super::signals::Stop;
use super::source::{Line, Lines};
use super::term::say;

/// `--out` is flushed at least this often (so `tail -f` and a hard kill lose little), and
/// with `--warc` after each archived page's record (see
/// [`super::archive::Archive::flushes_records`]).
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// How long a stopped run waits for the URL reader to notice the stop and count what it
/// read for nothing: a file's reader does at once; one blocked on an idle pipe is not
/// waited for longer.
const READER_NOTICES_STOP: Duration = Duration::from_millis(200);

enum Event {
    Stop,
    Deadline,
    // Boxed: an answer is a few hundred bytes, every other event a few.
    Done(u64, Box<Outcome>, Duration),
    Line(Option<io::Result<Line>>),
    Flush,
    Finished,
}

/// The loop's state.
struct ListLoop<'a> {
    ctx: &'a Ctx<'a>,
    out: &'a SharedOut,
    totals: &'a Totals,
    grace: Duration,
    /// URLs read whose record is not written yet, at most.
    read_ahead: usize,
    urls: Lines,
    stop: Stop,
    in_flight: FuturesUnordered<LocalBoxFuture<'a, (u64, Outcome, Duration)>>,
    /// URLs read whose record is not written yet, by fetch id.
    pending: HashMap<u64, (String, Instant)>,
    next_id: u64,
    input_open: bool,
    /// Reading `--urls` failed: the URLs after it were never read.
    read_error: Option<String>,
    stopping: bool,
    deadline: Option<Pin<Box<actix_rt::time::Sleep>>>,
    flush: actix_rt::time::Interval,
}

/// Fetch every URL from `urls`, writing each record to `out` as it completes. Returns
/// when the input is exhausted and every fetch has ended, or — after a stop signal — when
/// the in-flight fetches have finished or the grace period (plus a second) has passed;
/// then every URL read without a final record gets an interrupted record.
pub async fn crawl(
    ctx: &Ctx<'_>,
    urls: Lines,
    stop: Stop,
    grace: Duration,
    read_ahead: usize,
    out: &SharedOut,
    totals: &Totals,
) -> Result<Ended, String> {
    let mut ticks = actix_rt::time::interval(FLUSH_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut l = ListLoop {
        ctx,
        out,
        totals,
        grace,
        read_ahead,
        urls,
        stop,
        in_flight: FuturesUnordered::new(),
        pending: HashMap::new(),
        next_id: 0,
        input_open: true,
        read_error: None,
        stopping: false,
        deadline: None,
        flush: ticks,
    };
    loop {
        let event = poll_fn(|cx| l.poll_event(cx)).await;
        if !l.handle(event)? {
            break;
        }
    }
    if l.stopping {
        // What the reader read and no longer handed over has no record either: counted
        // once it has noticed the stop, which, the fetches in flight over first, may not
        // have happened yet.
        l.urls.reader_ended(READER_NOTICES_STOP).await;
        l.totals.left_queued_add(l.urls.unsent());
    }
    flush(out)?;
    // The records in hand stand: the run goes on to its summary and archive as any
    // other, and fails (exit 1) with the read error; stopped meanwhile, it is an
    // interrupted run (exit 130), the error said when it came.
    if let Some(e) = l.read_error.filter(|_| !l.stopping) {
        return Ok(Ended::Stopped(e));
    }
    Ok(if l.stopping {
        Ended::Interrupted
    } else {
        Ended::Complete
    })
}

impl<'a> ListLoop<'a> {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if !self.stopping {
            if let Poll::Ready(Some(())) = self.stop.poll_recv(cx) {
                return Poll::Ready(Event::Stop);
            }
        }
        if let Some(d) = self.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Deadline);
            }
        }
        if let Poll::Ready(Some((id, outcome, waited))) = self.in_flight.poll_next_unpin(cx) {
            return Poll::Ready(Event::Done(id, Box::new(outcome), waited));
        }
        if !self.input_open && self.in_flight.is_empty() {
            return Poll::Ready(Event::Finished);
        }
        if self.input_open && self.in_flight.len() < self.read_ahead {
            if let Poll::Ready(line) = self.urls.poll_recv(cx) {
                return Poll::Ready(Event::Line(line));
            }
        }
        if self.flush.poll_tick(cx).is_ready() {
            return Poll::Ready(Event::Flush);
        }
        Poll::Pending
    }

    /// Act on an event; `false` ends the loop.
    fn handle(&mut self, event: Event) -> Result<bool, String> {
        match event {
            Event::Stop => self.begin_stop(),
            Event::Deadline => {
                let mut left: Vec<_> = self.pending.drain().collect();
                left.sort_by_key(|(id, _)| *id);
                for (_, (url, started)) in left {
                    self.write(&Record::interrupted(&url, clock::since(started)))?;
                }
                return Ok(false);
            }
            Event::Done(id, outcome, waited) => {
                let url = self.pending.remove(&id).map(|(u, _)| u).unwrap_or_default();
                if self.stopping && outcome.never_sent() {
                    // Read ahead, never sent: no record, so `--resume` fetches it.
                    self.totals.left_queued_one();
                    return Ok(true);
                }
                let archived = matches!(*outcome, Outcome::Answer(..))
                    && self.ctx.archive.borrow().flushes_records();
                let record = settle(self.ctx, &url, *outcome, waited, self.stopping)?;
                self.write(&record)?;
                if archived {
                    flush(self.out)?;
                }
            }
            Event::Line(Some(Ok(Line::Url(url)))) => self.start(url),
            Event::Line(Some(Ok(Line::Duplicate(url)))) => {
                self.totals.read_one();
                self.write(&Record::duplicate(&url))?;
            }
            Event::Line(Some(Ok(Line::TooLong(url, bytes)))) => {
                self.totals.read_one();
                self.write(&Record::too_long(&url, bytes))?;
            }
            Event::Line(Some(Err(e))) => {
                // Stop reading, but let what is in flight finish and be recorded; the
                // run then fails (exit 1): the rest of the list was never read.
                let read = self.totals.read.get();
                say(&format!(
                    "reading --urls: {e}; finishing the {} URLs in flight",
                    self.pending.len()
                ));
                self.read_error = Some(format!(
                    "reading --urls failed after {read} URLs: {e}; the URLs after them were \
                     not read (their records are missing: run again with --resume)"
                ));
                self.input_open = false;
            }
            Event::Line(None) => self.input_open = false,
            Event::Flush => flush(self.out)?,
            Event::Finished => return Ok(false),
        }
        Ok(true)
    }

    fn start(&mut self, url: String) {
        self.totals.read_one();
        let id = self.next_id;
        self.next_id += 1;
        let started = clock::now();
        self.pending.insert(id, (url.clone(), started));
        let ctx = self.ctx;
        self.in_flight.push(
            async move {
                let outcome = fetch_one(ctx, url).await;
                (id, outcome, clock::since(started))
            }
            .boxed_local(),
        );
    }

    fn begin_stop(&mut self) {
        self.stopping = true;
        self.ctx.gate.stop();
        self.input_open = false;
        // The reader thread's next send fails: it stops reading. What it had handed over
        // is left for `--resume` too.
        let left = self.urls.close();
        self.totals.left_queued_add(left);
        say(&format!(
            "interrupted: no new URLs; the fetches on their way get {:.0} s to finish, the \
             {} URLs read are recorded or left for --resume (Ctrl-C again to quit now)",
            self.grace.as_secs_f64(),
            self.pending.len(),
        ));
        // Queued fetches end at once (never sent: no record, left for `--resume`),
        // in-flight ones get `grace`; the deadline is a backstop should a reply never
        // come.
        let h = self.ctx.handle.clone();
        let grace = self.grace;
        actix_rt::spawn(async move { h.shutdown(grace).await });
        self.deadline = Some(Box::pin(actix_rt::time::sleep(
            grace + Duration::from_secs(1),
        )));
    }

    fn write(&self, record: &Record) -> Result<(), String> {
        self.totals.add(record);
        if let Some(w) = self.out.borrow_mut().as_mut() {
            write_line(w, record).map_err(|e| format!("writing --out: {e}"))?;
        }
        Ok(())
    }
}
