//! Progress on stderr: an indicatif bar when stderr is a terminal (kept in
//! [`BAR`](super::term::BAR) for the messages printed above it), otherwise a status line
//! every few seconds. `--help`'s PROGRESS section says what each field means; the words
//! here are the ones it explains.

use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use exitcrawl_actors::{CrawlerHandle, ExitStats};
use exitcrawl_net::clock;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::record::Totals;
use super::source::ReadStats;
use super::summary::sent_by;
use super::term::BAR;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    Off,
    /// A status line every period (stderr is not a terminal).
    Line(Duration),
    /// An indicatif bar (stderr is a terminal).
    Bar,
}

/// What the display reads.
pub struct Watched {
    pub handle: CrawlerHandle,
    pub totals: Rc<Totals>,
    pub read: Arc<ReadStats>,
    /// A crawl that finds its URLs as it goes (`--follow`, `--sitemap`): its total is
    /// [`Totals::found`], which grows, so it shows no percentage or eta.
    pub follow: bool,
}

/// URLs done against what is known of the total: `done 120/3000`, `done 120/~3100`, or
/// with `--follow` `38 done, 120 found`. `done` counts the `skipped` URLs `--resume` found
/// done, and so does a total counted as the URLs are read (stdin).
fn done_of(w: &Watched, done: u64, skipped: u64) -> String {
    if w.follow {
        return follow_counts(done, w.totals.found.get());
    }
    match total_hint(&w.read) {
        Some((n, true)) => format!("done {done}/{n}"),
        Some((n, false)) => format!("done {done}/~{n}"),
        None => format!("done {done}/{}", w.totals.read.get() + skipped),
    }
}

/// A crawl's progress while links are still being found: no total to reach.
fn follow_counts(done: u64, found: u64) -> String {
    format!("{done} done, {found} found")
}

/// The total to show: exact (demo, small file), estimated from the bytes read (large
/// file, `~`), or unknown (stdin).
fn total_hint(read: &ReadStats) -> Option<(u64, bool)> {
    let exact = read.total.load(Ordering::Relaxed);
    if exact > 0 {
        return Some((exact, true));
    }
    let bytes = read.bytes.load(Ordering::Relaxed);
    if read.size == 0 || bytes == 0 {
        return None;
    }
    let lines = read.lines.load(Ordering::Relaxed);
    let estimate = (lines as f64 * read.size as f64 / bytes as f64).round() as u64;
    Some((estimate.max(lines), bytes >= read.size))
}

/// The requests an exit sent so far: see [`sent_by`].
type Sent<'a> = &'a dyn Fn(&ExitStats) -> u64;

/// The per-exit part of the progress: the rate each exit's limiter allows (a ceiling:
/// what is sent is lower whenever fewer URLs are ready), the requests it sent since the
/// last call (`sent`: those that left it, as the summary's `requests`), and EJECTED when
/// it is out; for more than 8 exits, one part with counts and the first ejected names. A
/// disabled exit is not shown: it sends nothing.
fn exit_parts(
    stats: &[ExitStats],
    sent: Sent<'_>,
    last_sent: &mut HashMap<String, u64>,
    period: Duration,
) -> Vec<String> {
    let mut since_last = |s: &ExitStats| {
        let now = sent(s);
        now.saturating_sub(last_sent.insert(s.name.clone(), now).unwrap_or(0))
    };
    let stats: Vec<&ExitStats> = stats.iter().filter(|s| s.enabled).collect();
    let per_s = period.as_secs_f64().max(1e-3);
    if stats.len() > 8 {
        let healthy = stats.iter().filter(|s| s.healthy).count();
        let ejected: Vec<&str> = stats
            .iter()
            .filter(|s| !s.healthy)
            .take(5)
            .map(|s| s.name.as_str())
            .collect();
        let sent: u64 = stats.iter().map(|s| since_last(s)).sum();
        let mut line = format!(
            "exits healthy {healthy}/{} sent {:.0}/s",
            stats.len(),
            sent as f64 / per_s
        );
        if !ejected.is_empty() {
            line.push_str(&format!(" ejected: {}", ejected.join(", ")));
        }
        return vec![line];
    }
    stats
        .iter()
        .map(|s| {
            let sent = since_last(s);
            format!(
                "{} allowed {} sent {:.0}/s{}",
                s.name,
                allowed(&s.intervals),
                sent as f64 / per_s,
                if s.healthy { "" } else { " EJECTED" },
            )
        })
        .collect()
}

/// The rate an exit's limiter keys allow now, summed, e.g. `48.5/s` (`-` when unpaced).
fn allowed(intervals: &[(String, Duration)]) -> String {
    let rps: f64 = intervals
        .iter()
        .filter(|(_, i)| !i.is_zero())
        .map(|(_, i)| 1.0 / i.as_secs_f64())
        .sum();
    if rps > 0.0 {
        format!("{rps:.1}/s")
    } else {
        "-".into()
    }
}

/// Show progress until aborted.
pub fn spawn_progress(mode: ProgressMode, w: Watched) -> Option<actix_rt::task::JoinHandle<()>> {
    match mode {
        ProgressMode::Off => None,
        ProgressMode::Line(period) => Some(actix_rt::spawn(status_lines(period, w))),
        ProgressMode::Bar => {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let _ = BAR.set(bar.clone());
            Some(actix_rt::spawn(draw_bar(bar, w)))
        }
    }
}

/// A status line every `period`.
async fn status_lines(period: Duration, w: Watched) {
    let started = clock::now();
    let mut tick = actix_rt::time::interval(period);
    tick.tick().await; // the first tick is immediate
    let mut last_sent = HashMap::new();
    let mut last_done = 0;
    let sent = |s: &ExitStats| sent_by(w.handle.metrics(), s);
    loop {
        tick.tick().await;
        let stats = w.handle.stats().await;
        let t = &w.totals;
        let done = t.total.get();
        let skipped = w.read.skipped.load(Ordering::Relaxed);
        let _ = writeln!(
            std::io::stderr(),
            "[{:>6.1}s] {} ok {} throttled {} failed {}{} {:.1} URLs/s | {}",
            clock::since(started).as_secs_f64(),
            done_of(&w, done + skipped, skipped),
            t.ok.get(),
            t.throttled.get(),
            failed(t, done),
            if skipped > 0 {
                format!(" skipped {skipped}")
            } else {
                String::new()
            },
            (done - last_done) as f64 / period.as_secs_f64(),
            exit_parts(&stats, &sent, &mut last_sent, period).join(" |"),
        );
        last_done = done;
    }
}

/// The bar, redrawn 4 times a second (figures refreshed every second).
async fn draw_bar(bar: ProgressBar, w: Watched) {
    const TICK: Duration = Duration::from_millis(250);
    let known = ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:40}] {pos}/{len} {percent}% eta {eta}\n{wide_msg}",
    )
    .expect("valid template")
    .progress_chars("=> ");
    let unknown =
        ProgressStyle::with_template("{spinner} {elapsed_precise} {pos} done\n{wide_msg}")
            .expect("valid template");
    // A growing total: counts only (a bar or an eta against it would be wrong).
    let growing = ProgressStyle::with_template("{spinner} {elapsed_precise} {prefix}\n{wide_msg}")
        .expect("valid template");
    bar.set_style(if w.follow { growing } else { unknown });
    let mut tick = actix_rt::time::interval(TICK);
    let mut last_sent = HashMap::new();
    let mut rate_from = (clock::now(), 0u64);
    let mut has_len = false;
    let sent = |s: &ExitStats| sent_by(w.handle.metrics(), s);
    for n in 0u64.. {
        tick.tick().await;
        let done = w.totals.total.get();
        let skipped = w.read.skipped.load(Ordering::Relaxed);
        if w.follow {
            bar.set_prefix(follow_counts(done, w.totals.found.get()));
        }
        match total_hint(&w.read) {
            _ if w.follow => {}
            Some((len, _)) => {
                if !has_len {
                    bar.set_style(known.clone());
                    has_len = true;
                }
                bar.set_length(len);
            }
            None => bar.set_length(w.totals.read.get() + skipped),
        }
        bar.set_position(done + skipped);
        bar.tick();
        if n.is_multiple_of(4) {
            let stats = w.handle.stats().await;
            let period = clock::since(rate_from.0);
            let rate = (done - rate_from.1) as f64 / period.as_secs_f64().max(1e-3);
            rate_from = (clock::now(), done);
            let mut msg = bar_message(&w, done, skipped, rate);
            // Two exits a line, so each line fits an 80-column terminal.
            for chunk in exit_parts(&stats, &sent, &mut last_sent, period).chunks(2) {
                msg.push('\n');
                msg.push_str(&chunk.join(" · "));
            }
            bar.set_message(msg);
        }
    }
}

/// Of `done` records, those that did not end 2xx nor with a redirect.
fn failed(t: &super::record::Totals, done: u64) -> u64 {
    done.saturating_sub(t.ok.get() + t.redirected.get())
}

fn bar_message(w: &Watched, done: u64, skipped: u64, rate: f64) -> String {
    let t = &w.totals;
    let mut msg = format!(
        "ok {} throttled {} failed {}",
        t.ok.get(),
        t.throttled.get(),
        failed(t, done),
    );
    if skipped > 0 {
        msg.push_str(&format!(" skipped {skipped}"));
    }
    msg.push_str(&format!(" · {rate:.1} URLs/s"));
    if !w.follow && matches!(total_hint(&w.read), Some((_, false))) {
        msg.push_str(" · total estimated from the bytes read");
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every attempt left the exit.
    fn total(s: &ExitStats) -> u64 {
        s.total
    }

    fn exit(name: &str, enabled: bool, healthy: bool) -> ExitStats {
        let mut s = ExitStats::new(name, std::net::Ipv4Addr::LOCALHOST.into());
        s.enabled = enabled;
        s.healthy = healthy;
        s.max = 8;
        s.total = 5;
        s.ok = 5;
        s
    }

    #[test]
    fn a_disabled_exit_is_not_shown() {
        let stats = [exit("e2", true, true), exit("e5", false, true)];
        let parts = exit_parts(&stats, &total, &mut HashMap::new(), Duration::from_secs(5));
        assert_eq!(parts, ["e2 allowed - sent 1/s"]);
        let many: Vec<_> = (0..9)
            .map(|i| exit(&format!("x{i}"), true, i != 0))
            .chain([exit("off", false, false)])
            .collect();
        let parts = exit_parts(&many, &total, &mut HashMap::new(), Duration::from_secs(5));
        assert_eq!(parts, ["exits healthy 8/9 sent 9/s ejected: x0"]);
    }

    #[test]
    fn an_exit_shows_what_its_limiter_allows_beside_what_it_sent() {
        let mut e = exit("lo1", true, true);
        // Two hosts' keys, 50/s and 200/s: the exit may send 250/s.
        e.intervals = vec![
            ("a".into(), Duration::from_millis(20)),
            ("b".into(), Duration::from_millis(5)),
            ("idle".into(), Duration::ZERO),
        ];
        e.total = 240;
        let parts = exit_parts(&[e], &total, &mut HashMap::new(), Duration::from_secs(5));
        assert_eq!(parts, ["lo1 allowed 250.0/s sent 48/s"]);
    }

    #[test]
    fn sent_counts_the_requests_that_left_the_exit_not_every_attempt() {
        // 240 attempts began, 40 of them never left the exit (no connection could be
        // opened from its address): 200 were sent.
        let mut e = exit("lo1", true, true);
        e.total = 240;
        let left = |_: &ExitStats| 200;
        let mut last = HashMap::new();
        let parts = exit_parts(&[e.clone()], &left, &mut last, Duration::from_secs(5));
        assert_eq!(parts, ["lo1 allowed - sent 40/s"]);
        let more = |_: &ExitStats| 250;
        let parts = exit_parts(&[e], &more, &mut last, Duration::from_secs(5));
        assert_eq!(parts, ["lo1 allowed - sent 10/s"]);
    }

    #[test]
    fn a_crawl_that_finds_its_urls_shows_counts_not_a_fraction() {
        assert_eq!(follow_counts(38, 120), "38 done, 120 found");
    }
}
