//! The closing table: what a person at a terminal reads at the end of a run instead of the
//! summary's JSON line — the totals, the busiest hosts and every exit, in aligned columns.
//! Scripts get the JSON: with `--summary FILE`, or whenever stdout is not a terminal.

use std::fmt::Write;

use super::summary::Summary;

/// Hosts shown; the rest are counted, and are in `--summary FILE`.
const HOSTS: usize = 10;

/// The table for `s`, ending with a newline.
pub fn table(s: &Summary) -> String {
    let mut out = format!(
        "{} URLs: {} ok, {} failed, {} redirected, {} interrupted, {} skipped by robots.txt, \
         {} duplicates, {} invalid; {} requests, {} answered 429/503; {:.1} s\n",
        s.total,
        s.ok,
        s.failed,
        s.redirected,
        s.interrupted,
        s.skipped_robots,
        s.skipped_duplicate,
        s.invalid,
        s.requests,
        s.throttled,
        s.elapsed_s
    );
    if !s.hosts.is_empty() {
        let rows = s.hosts.iter().take(HOSTS).map(|h| {
            vec![
                h.host.clone(),
                h.urls.to_string(),
                h.ok.to_string(),
                h.failed.to_string(),
                h.throttled.to_string(),
                h.rate_rps.map_or_else(|| "-".into(), |r| format!("{r:.1}")),
                h.scope.clone().unwrap_or_else(|| "-".into()),
            ]
        });
        let head = [
            "host",
            "urls",
            "ok",
            "failed",
            "throttled",
            "rate/s",
            "limit",
        ];
        out.push('\n');
        out += &columns(&head, rows);
        let more = (s.hosts.len().saturating_sub(HOSTS) as u64) + s.hosts_omitted;
        if more > 0 {
            let _ = writeln!(out, "… and {more} more hosts (all of them: --summary FILE)");
        }
    }
    if !s.per_exit.is_empty() {
        let rows = s.per_exit.iter().map(|e| {
            vec![
                e.name.clone(),
                e.source_ip.to_string(),
                e.requests.to_string(),
                e.ok.to_string(),
                e.throttled.to_string(),
                e.errors.to_string(),
                if e.healthy { "yes" } else { "no" }.into(),
            ]
        });
        let head = [
            "exit",
            "address",
            "requests",
            "ok",
            "throttled",
            "errors",
            "healthy",
        ];
        out.push('\n');
        out += &columns(&head, rows);
    }
    out
}

/// Columns of words, not figures: aligned left.
const WORDS: [&str; 5] = ["host", "exit", "address", "limit", "healthy"];

/// `head` and `rows` as aligned columns, two spaces apart: words to the left, figures to
/// the right.
fn columns(head: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut all: Vec<Vec<String>> = vec![head.iter().map(|h| (*h).to_owned()).collect()];
    all.extend(rows);
    let widths: Vec<usize> = (0..head.len())
        .map(|i| all.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &all {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .zip(head)
            .map(|((cell, w), h)| {
                if WORDS.contains(h) {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{ExitSummary, HostSummary};

    fn host(name: &str, requests: u64) -> HostSummary {
        HostSummary {
            host: name.into(),
            urls: requests,
            requests,
            ok: requests,
            throttled: 1,
            failed: 0,
            rate_rps: Some(4.75),
            scope: Some("host".into()),
            paused_ms: 0,
            first_at: None,
            last_at: None,
        }
    }

    fn summary(hosts: usize) -> Summary {
        Summary {
            total: 12,
            ok: 11,
            failed: 1,
            throttled: 2,
            requests: 14,
            interrupted: 0,
            left_queued: 0,
            skipped: 0,
            skipped_robots: 1,
            skipped_duplicate: 0,
            invalid: 0,
            redirected: 0,
            robots_fetches: 1,
            resumed: false,
            elapsed_s: 2.25,
            per_exit: vec![ExitSummary {
                name: "e2".into(),
                source_ip: "127.0.0.2".parse().unwrap(),
                requests: 14,
                ok: 11,
                throttled: 2,
                errors: 0,
                not_sent: 0,
                healthy: true,
                paused_ms: 0,
                first_at: None,
                last_at: None,
            }],
            hosts: (0..hosts)
                .map(|i| host(&format!("h{i}.example"), 100 - i as u64))
                .collect(),
            hosts_omitted: 3,
            follow: None,
            frontier: None,
        }
    }

    #[test]
    fn the_busiest_hosts_and_every_exit_in_aligned_columns() {
        let t = table(&summary(12));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("12 URLs: 11 ok, 1 failed"), "{t}");
        assert_eq!(
            lines[2],
            "host        urls   ok  failed  throttled  rate/s  limit"
        );
        assert_eq!(
            lines[3],
            "h0.example   100  100       0          1     4.8  host"
        );
        assert!(
            t.contains("h9.example") && !t.contains("h10.example"),
            "{t}"
        );
        assert!(
            t.contains("… and 5 more hosts"),
            "two not shown, three omitted: {t}"
        );
        assert!(
            t.contains("exit  address    requests  ok  throttled  errors  healthy"),
            "{t}"
        );
        assert!(
            t.contains("e2    127.0.0.2        14  11          2       0  yes"),
            "{t}"
        );
        assert!(t.lines().all(|l| l == l.trim_end()));
    }

    #[test]
    fn no_hosts_no_host_table() {
        let t = table(&summary(0));
        assert!(!t.contains("host "), "{t}");
        assert!(t.contains("exit "), "{t}");
    }
}
