//! `--report FILE.html`: one self-contained page about the crawl — no script, no network,
//! the styles inline and the charts inline SVG ([`svg`]) — written where the summary is.
//!
//! Its figures are the summary's (the hosts, the exits, the totals) and the
//! [`Breakdown`](super::breakdown::Breakdown) counted as records were written (the
//! timeline, the busiest hosts' rates, status classes, error kinds, slowest URLs). After
//! `--resume` the totals count the compacted `--out` (the whole crawl) and the rest this
//! run's records, as the summary's figures do: the page says which part covers what. Every
//! row and chart carries its figures as `data-*` attributes, so a program can read the page
//! back. Every string that
//! came from outside (hosts, URLs, error kinds, exit names) is escaped.

mod svg;

use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path;
use std::time::SystemTime;

use super::breakdown::Breakdown;
use super::date::rfc3339_millis;
use super::output::write_atomic;
use super::record::{HostTally, Totals};
use super::summary::Summary;
use super::Failure;
use svg::Bar;

/// Hosts in the busiest hosts' table, and in the slowest hosts'.
const HOSTS: usize = 20;
const SLOW_HOSTS: usize = 10;
/// Hosts with a chart of their rate.
const RATE_HOSTS: usize = 6;

const STYLE: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff;max-width:1160px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;text-align:right;\
border-bottom:1px solid #eee}th{background:#f4f4f4}td.t,th.t{text-align:left}\
.note{color:#666;font-size:12px}.legend span{display:inline-block;margin-right:14px}\
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}\
.chart text,.split text{font:12px system-ui,sans-serif;fill:#333}.tick{fill:#666}\
.grid{stroke:#e4e4e4}.line{stroke-width:2}.line.ok{stroke:#2e7d32}\
.line.throttled{stroke:#f9a825}.line.failed{stroke:#c62828}.bar.ok,i.ok{fill:#2e7d32;\
background:#2e7d32}.bar.throttled,i.throttled{fill:#f9a825;background:#f9a825}\
.bar.failed,i.failed{fill:#c62828;background:#c62828}.bar.plain{fill:#1565c0}\
.bad{color:#c62828;font-weight:600}dl{display:grid;grid-template-columns:auto auto;\
justify-content:start;gap:2px 14px}dt{color:#666}dd{margin:0}i.plain{background:#1565c0}\
.throttle-mark{stroke:#f9a825;stroke-width:2}h3{font-size:14px;margin:14px 0 2px}";

/// Text as HTML (element content or a quoted attribute's value).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Write the report of `s` and `t` to `path`, replacing it in one step.
pub fn write(path: &Path, s: &Summary, t: &Totals) -> Result<(), Failure> {
    let html = render(s, t, SystemTime::now());
    write_atomic(path, html.as_bytes())
        .map_err(|e| Failure::Output(format!("writing --report {}: {e}", path.display())))
}

/// The page, made at `now`.
pub fn render(s: &Summary, t: &Totals, now: SystemTime) -> String {
    let mut h = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>exitcrawl report</title><style>{STYLE}</style></head><body>\n"
    );
    overview(&mut h, s, now);
    let resumed = s.resumed;
    if resumed {
        this_run(&mut h, s, t);
    }
    let breakdown = t.breakdown.borrow();
    let (width, buckets) = breakdown.timeline();
    heading(&mut h, "Timeline", resumed);
    legend(
        &mut h,
        "records ok",
        "throttle answers (429/503)",
        "records failed",
    );
    h.push_str(&svg::timeline(width, buckets));
    let _ = writeln!(
        h,
        "<p class=\"note\">Per second since the start, by when each fetched record was made \
         ({width} s per bucket).</p>"
    );
    hosts(&mut h, s);
    host_rates(&mut h, s, &breakdown, width * buckets.len() as u64);
    exits(&mut h, s);
    statuses(&mut h, &breakdown.classes().collect::<Vec<_>>(), resumed);
    errors(&mut h, &breakdown.errors(), resumed);
    slowest_hosts(&mut h, &t.hosts.borrow(), resumed);
    slowest_urls(&mut h, breakdown.slowest(), resumed);
    h.push_str("</body></html>\n");
    h
}

/// A section's heading. After `--resume` the totals count the whole crawl and every
/// section counts this run's records: it says so, in words and in `data-covers`.
fn heading(h: &mut String, title: &str, resumed: bool) {
    if resumed {
        let _ = write!(h, "<h2 data-covers=\"this-run\">{title} — this run</h2>");
    } else {
        let _ = write!(h, "<h2>{title}</h2>");
    }
}

fn overview(h: &mut String, s: &Summary, now: SystemTime) {
    let _ = write!(
        h,
        "<h1>exitcrawl report</h1><p class=\"note\">Written {} after {:.1} s{}.</p>{}\
         <dl id=\"totals\" data-total=\"{}\" data-ok=\"{}\" data-failed=\"{}\" \
         data-redirected=\"{}\" data-throttled=\"{}\" data-requests=\"{}\" \
         data-interrupted=\"{}\" data-invalid=\"{}\" data-resumed=\"{}\">",
        rfc3339_millis(now),
        s.elapsed_s,
        if s.interrupted > 0 {
            ", interrupted"
        } else {
            ""
        },
        if s.resumed {
            "<p class=\"note\">Resumed: these totals count the records of the compacted \
             --out, one per URL (the whole crawl, over every run); the requests sent, the \
             hosts and every section below are this run's.</p>"
        } else {
            ""
        },
        s.total,
        s.ok,
        s.failed,
        s.redirected,
        s.throttled,
        s.requests,
        s.interrupted,
        s.invalid,
        s.resumed
    );
    // After --resume the requests and the hosts are this run's, as in the summary.
    let run = if s.resumed { " (this run)" } else { "" };
    for (name, v, suffix) in [
        ("URLs recorded", s.total, ""),
        ("ok (2xx)", s.ok, ""),
        ("failed", s.failed, ""),
        ("redirected", s.redirected, ""),
        ("interrupted", s.interrupted, ""),
        ("skipped by robots.txt", s.skipped_robots, ""),
        ("duplicates", s.skipped_duplicate, ""),
        ("invalid lines", s.invalid, ""),
        ("requests sent", s.requests, run),
        ("answered 429/503", s.throttled, ""),
        ("hosts", s.hosts.len() as u64 + s.hosts_omitted, run),
    ] {
        let _ = write!(h, "<dt>{name}{suffix}</dt><dd>{v}</dd>");
    }
    h.push_str("</dl>\n");
}

/// After `--resume`: the records this run wrote, which the sections below count, and the
/// URLs it found done.
fn this_run(h: &mut String, s: &Summary, t: &Totals) {
    heading(h, "Records", true);
    let (total, ok, failed) = (t.total.get(), t.ok.get(), t.failed.get());
    let (redirected, interrupted) = (t.redirected.get(), t.interrupted.get());
    let _ = write!(
        h,
        "<dl id=\"this-run\" data-total=\"{total}\" data-ok=\"{ok}\" data-failed=\"{failed}\" \
         data-redirected=\"{redirected}\" data-throttled=\"{}\" \
         data-interrupted=\"{interrupted}\" data-skipped=\"{}\">",
        t.throttled.get(),
        s.skipped
    );
    for (name, v) in [
        ("URLs recorded", total),
        ("ok (2xx)", ok),
        ("failed", failed),
        ("redirected", redirected),
        ("interrupted", interrupted),
        ("answered 429/503", t.throttled.get()),
        ("found done in --out (skipped)", s.skipped),
    ] {
        let _ = write!(h, "<dt>{name}</dt><dd>{v}</dd>");
    }
    h.push_str("</dl>\n");
}

fn legend(h: &mut String, ok: &str, throttled: &str, failed: &str) {
    let _ = write!(
        h,
        "<p class=\"legend\"><span><i class=\"ok\"></i>{ok}</span>\
         <span><i class=\"throttled\"></i>{throttled}</span>\
         <span><i class=\"failed\"></i>{failed}</span></p>"
    );
}

fn opt_rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.1}"))
}

/// The busiest hosts: their requests split into ok, throttled and the rest, and where
/// their rate settled.
fn hosts(h: &mut String, s: &Summary) {
    heading(h, "Busiest hosts", s.resumed);
    if s.hosts.is_empty() {
        h.push_str("<p>No host was fetched.</p>\n");
        return;
    }
    legend(h, "ok", "throttled", "other answers and errors");
    h.push_str(
        "<table id=\"hosts\"><tr><th class=\"t\">host</th><th>URLs</th><th>requests</th>\
         <th>ok</th><th>throttled</th><th>failed</th><th class=\"t\">requests</th>\
         <th>settled rate/s</th><th class=\"t\">limit scope</th></tr>\n",
    );
    for x in s.hosts.iter().take(HOSTS) {
        let other = x.requests.saturating_sub(x.ok + x.throttled);
        let _ = writeln!(
            h,
            "<tr class=\"host\" data-host=\"{host}\" data-urls=\"{}\" data-requests=\"{}\" \
             data-ok=\"{}\" data-throttled=\"{}\" data-failed=\"{}\"><td class=\"t\">{host}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td>\
             <td>{}</td><td class=\"t\">{}</td></tr>",
            x.urls,
            x.requests,
            x.ok,
            x.throttled,
            x.failed,
            x.urls,
            x.requests,
            x.ok,
            x.throttled,
            x.failed,
            svg::split(x.ok, x.throttled, other),
            opt_rate(x.rate_rps),
            esc(x.scope.as_deref().unwrap_or("-")),
            host = esc(&x.host),
        );
    }
    h.push_str("</table>");
    let more = s.hosts.len().saturating_sub(HOSTS) as u64 + s.hosts_omitted;
    if more > 0 {
        let _ = write!(h, "<p class=\"note\">… and {more} more hosts.</p>");
    }
    h.push('\n');
}

/// The busiest hosts' requests per second over the crawl, with their throttles marked:
/// `span_s` seconds on every chart's axis, so they line up with the timeline.
fn host_rates(h: &mut String, s: &Summary, breakdown: &Breakdown, span_s: u64) {
    let busiest: Vec<_> = s
        .hosts
        .iter()
        .filter_map(|x| Some((x, breakdown.host_rate(&x.host)?)))
        .take(RATE_HOSTS)
        .collect();
    if busiest.is_empty() {
        return;
    }
    heading(h, "Rate of the busiest hosts", s.resumed);
    h.push_str(
        "<p class=\"legend\"><span><i class=\"plain\"></i>requests/s</span>\
         <span><i class=\"throttled\"></i>throttle answers (429/503)</span></p>",
    );
    for (x, rate) in busiest {
        let _ = write!(
            h,
            "<h3>{}: {} requests, {} throttled, settled at {}/s</h3>{}",
            esc(&x.host),
            x.requests,
            x.throttled,
            opt_rate(x.rate_rps),
            svg::host_rate(&x.host, rate, span_s)
        );
    }
    h.push_str(
        "<p class=\"note\">Requests per second (the attempts of the host's fetched records, \
         by when each record was made); a mark at each second with throttle answers.</p>\n",
    );
}

/// Each exit's share of the requests, and its health.
fn exits(h: &mut String, s: &Summary) {
    heading(h, "Exits", s.resumed);
    let total = s.per_exit.iter().map(|e| e.requests).sum::<u64>().max(1);
    let rows: Vec<Bar<'_>> = s
        .per_exit
        .iter()
        .map(|e| Bar {
            label: &e.name,
            value: e.requests,
            class: if e.healthy { "plain" } else { "failed" },
        })
        .collect();
    h.push_str(&svg::bars("exit-share", "requests per exit", &rows));
    h.push_str(
        "<table id=\"exits\"><tr><th class=\"t\">exit</th><th class=\"t\">address</th>\
         <th>requests</th><th>share</th><th>ok</th><th>throttled</th><th>errors</th>\
         <th>not sent</th><th class=\"t\">healthy</th></tr>\n",
    );
    for e in &s.per_exit {
        let _ = writeln!(
            h,
            "<tr class=\"exit\" data-exit=\"{name}\" data-requests=\"{}\" data-ok=\"{}\" \
             data-throttled=\"{}\" data-errors=\"{}\" data-healthy=\"{}\"><td class=\"t\">{name}\
             </td><td class=\"t\">{}</td><td>{}</td><td>{:.1}%</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td class=\"t{}\">{}</td></tr>",
            e.requests,
            e.ok,
            e.throttled,
            e.errors,
            e.healthy,
            e.source_ip,
            e.requests,
            100.0 * e.requests as f64 / total as f64,
            e.ok,
            e.throttled,
            e.errors,
            e.not_sent,
            if e.healthy { "" } else { " bad" },
            if e.healthy { "yes" } else { "no" },
            name = esc(&e.name),
        );
    }
    h.push_str("</table>\n");
}

/// The final answers' status classes of the fetched records.
fn statuses(h: &mut String, classes: &[(&str, u64)], resumed: bool) {
    heading(h, "Status classes", resumed);
    let rows: Vec<Bar<'_>> = classes
        .iter()
        .filter(|(c, n)| *n > 0 || *c != "1xx")
        .map(|(c, n)| Bar {
            label: if *c == "none" { "no answer" } else { c },
            value: *n,
            class: match *c {
                "2xx" => "ok",
                "3xx" | "1xx" => "plain",
                _ => "failed",
            },
        })
        .collect();
    h.push_str(&svg::bars("status-classes", "final status classes", &rows));
    h.push_str("<table id=\"statuses\"><tr><th class=\"t\">class</th><th>records</th></tr>");
    for (c, n) in classes {
        let _ = write!(
            h,
            "<tr class=\"status\" data-class=\"{c}\" data-count=\"{n}\"><td class=\"t\">{c}</td>\
             <td>{n}</td></tr>"
        );
    }
    h.push_str("</table>\n");
}

/// The records' errors by kind.
fn errors(h: &mut String, errors: &[(&str, u64)], resumed: bool) {
    heading(h, "Error kinds", resumed);
    if errors.is_empty() {
        h.push_str("<p id=\"no-errors\">No record has an error.</p>\n");
        return;
    }
    h.push_str("<table id=\"errors\"><tr><th class=\"t\">error</th><th>records</th></tr>");
    for (kind, n) in errors {
        let kind = esc(kind);
        let _ = write!(
            h,
            "<tr class=\"error\" data-kind=\"{kind}\" data-count=\"{n}\"><td class=\"t\">{kind}\
             </td><td>{n}</td></tr>"
        );
    }
    h.push_str("</table>\n");
}

/// The hosts whose URLs took longest on average, with the time from their first record to
/// their last.
fn slowest_hosts(h: &mut String, tallies: &HashMap<String, HostTally>, resumed: bool) {
    heading(h, "Slowest hosts", resumed);
    let mut v: Vec<(&String, &HostTally, u64)> = tallies
        .iter()
        .map(|(host, t)| (host, t, t.elapsed_ms / t.urls.max(1)))
        .collect();
    v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    if v.is_empty() {
        h.push_str("<p>No host was fetched.</p>\n");
        return;
    }
    h.push_str(
        "<table id=\"slow-hosts\"><tr><th class=\"t\">host</th><th>URLs</th>\
         <th>mean time per URL (ms)</th><th>first to last record (s)</th></tr>",
    );
    for (host, t, mean) in v.into_iter().take(SLOW_HOSTS) {
        let span = match (t.first_at, t.last_at) {
            (Some(f), Some(l)) => l.duration_since(f).unwrap_or_default().as_secs_f64(),
            _ => 0.0,
        };
        let host = esc(host);
        let _ = write!(
            h,
            "<tr class=\"slow-host\" data-host=\"{host}\" data-mean-ms=\"{mean}\"><td class=\"t\">\
             {host}</td><td>{}</td><td>{mean}</td><td>{span:.1}</td></tr>",
            t.urls
        );
    }
    h.push_str("</table>\n");
}

/// The URLs whose records took longest (retries and waits for the host's turn included).
fn slowest_urls(h: &mut String, slowest: &[super::breakdown::Slow], resumed: bool) {
    heading(h, "Slowest URLs", resumed);
    if slowest.is_empty() {
        h.push_str("<p>No record.</p>\n");
        return;
    }
    h.push_str("<table id=\"slow-urls\"><tr><th>ms</th><th class=\"t\">URL</th></tr>");
    for s in slowest {
        let _ = write!(
            h,
            "<tr class=\"slow-url\" data-ms=\"{}\"><td>{}</td><td class=\"t\">{}</td></tr>",
            s.elapsed_ms,
            s.elapsed_ms,
            esc(&s.url)
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::summary::HostSummary;

    const NASTY: &str = "<script>alert(1)</script>&\"'";

    fn summary() -> Summary {
        let mut s = Summary {
            total: 0,
            ok: 0,
            failed: 0,
            throttled: 0,
            requests: 0,
            interrupted: 0,
            left_queued: 0,
            skipped: 0,
            skipped_robots: 0,
            skipped_duplicate: 0,
            invalid: 0,
            redirected: 0,
            robots_fetches: 0,
            resumed: false,
            elapsed_s: 1.0,
            per_exit: Vec::new(),
            hosts: Vec::new(),
            hosts_omitted: 0,
            follow: None,
            frontier: None,
        };
        s.hosts.push(HostSummary {
            host: NASTY.into(),
            urls: 1,
            requests: 2,
            ok: 1,
            throttled: 1,
            failed: 0,
            rate_rps: Some(3.0),
            scope: Some(NASTY.into()),
            paused_ms: 0,
            first_at: None,
            last_at: None,
        });
        s
    }

    #[test]
    fn every_outside_string_is_escaped() {
        let t = Totals::default();
        let mut r = Record::interrupted(&format!("http://h/{NASTY}"), Default::default());
        r.error = Some(format!("{NASTY}: x"));
        r.attempts = 1;
        t.add(&r);
        let html = render(&summary(), &t, SystemTime::now());
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("&\"'"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;"));
        assert!(html.contains("data-requests=\"2\" data-ok=\"1\" data-throttled=\"1\""));
    }

    #[test]
    fn escapes_the_five() {
        assert_eq!(esc("a<b>&\"'c"), "a&lt;b&gt;&amp;&quot;&#39;c");
    }
}
