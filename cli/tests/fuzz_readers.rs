//! Fuzzing the `exitcrawl` binary's readers of untrusted files, with the mutational fuzzer
//! of `tests/fuzz/harness.rs` (see there: time budget `EXITCRAWL_FUZZ_SECS`, no panic and
//! at most 250 ms per input (1 s in a debug build), failures saved to `target/fuzz-failures/`).
//!
//! The targets, each with its seeds in `tests/fuzz/corpus/<target>/`:
//! - `url_list`: the `--urls` reader (its own thread and channel, as in a crawl), fed
//!   through a reader that hands the bytes over in pieces of a size drawn from the input,
//!   now and then interrupted (`EINTR`) or failing. Every line it hands over is checked
//!   against the list format as docs/cli.md gives it: a URL is the line trimmed of
//!   whitespace and byte order marks, blank lines and `#` comments skipped; a line over 16 KiB is too long and
//!   its record says its real length; a URL seen on an earlier line is a duplicate; a
//!   read error ends the list after the complete lines before it, and says what failed.
//! - `resume`: what `--resume` reads back from `--out`, through the same kind of reader:
//!   every complete line is a record, blank, or counted unreadable with the first one's
//!   line number and reason; an unfinished last line is cut; the last record of a URL
//!   decides whether it is done or fetched again (interrupted, or `no_healthy_exit` with
//!   `attempts` 0).

#[path = "../../tests/fuzz/harness.rs"]
mod harness;

use std::collections::HashSet;
use std::io::{self, BufReader, Read};

use exitcrawl_cli::fuzzing::{read_records, read_url_list, Line, MAX_LINE};
use serde::Deserialize;

/// How [`Pieces`] hands `input` over: a size per read, EINTR every so many reads, an
/// error at some offset — all drawn from the input's own hash, so the fuzzer varies them.
#[derive(Debug, Clone, Copy)]
struct Plan {
    piece: usize,
    interrupt_every: u32,
    fail_at: Option<usize>,
}

impl Plan {
    fn of(input: &[u8]) -> Plan {
        // FNV-1a.
        let h = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
        let piece = match h % 4 {
            0 => usize::MAX,
            1 => 1 + (h >> 8) as usize % 7,
            _ => 1 + (h >> 8) as usize % 4096,
        };
        let interrupt_every = if (h >> 24).is_multiple_of(3) {
            2 + (h >> 32) as u32 % 5
        } else {
            0
        };
        let fail_at = (h >> 40)
            .is_multiple_of(5)
            .then(|| (h >> 44) as usize % (input.len() + 1));
        Plan {
            piece,
            interrupt_every,
            fail_at,
        }
    }
}

/// A reader of `data` that follows a [`Plan`].
struct Pieces<'a> {
    data: &'a [u8],
    pos: usize,
    reads: u32,
    plan: Plan,
}

const FAILURE: &str = "the disk went away (injected)";

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reads += 1;
        if self.plan.interrupt_every > 0 && self.reads.is_multiple_of(self.plan.interrupt_every) {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let end = self.plan.fail_at.unwrap_or(self.data.len());
        if self.pos == end && self.plan.fail_at.is_some() {
            return Err(io::Error::other(FAILURE));
        }
        let n = buf.len().min(self.plan.piece).min(end - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The lines of `data` a reader must hand over, from the list format alone: the complete
/// lines (and a last one without a newline, at the end of the input).
fn expected_lines(data: &[u8], dedupe: bool) -> Vec<Line> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut lines: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if data.ends_with(b"\n") || data.is_empty() {
        lines.pop();
    }
    for line in lines {
        // Only the first MAX_LINE bytes of a line are kept.
        let kept = &line[..line.len().min(MAX_LINE)];
        let text = String::from_utf8_lossy(kept);
        let url = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
        if url.is_empty() || url.starts_with('#') {
            continue;
        }
        let url = url.to_string();
        out.push(if line.len() > MAX_LINE {
            Line::TooLong(url, line.len() as u64)
        } else if dedupe && !url.contains('\u{fffd}') && !seen.insert(url.clone()) {
            Line::Duplicate(url)
        } else {
            Line::Url(url)
        });
    }
    out
}

#[test]
fn url_list() {
    let n = harness::fuzz("url_list", |input| {
        let plan = Plan::of(input);
        let dedupe = input.len() % 2 == 0;
        let reader = Pieces {
            data: input,
            pos: 0,
            reads: 0,
            plan,
        };
        let (lines, error) = read_url_list(reader, dedupe);
        // A failed read ends the list after the complete lines before it.
        let (data, want_error) = match plan.fail_at {
            Some(at) => {
                let cut = input[..at]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                (&input[..cut], true)
            }
            None => (input, false),
        };
        match (&error, want_error) {
            (None, false) => {}
            (Some(e), true) => assert!(e.to_string().contains(FAILURE), "{e}"),
            _ => panic!("read error {error:?}, expected one: {want_error} ({plan:?})"),
        }
        assert_eq!(
            lines,
            expected_lines(data, dedupe),
            "{plan:?}, dedupe {dedupe}"
        );
        for line in &lines {
            match line {
                Line::Url(u) | Line::Duplicate(u) => {
                    assert!(!u.contains('\n') && !u.starts_with('\u{feff}'), "{u:?}");
                }
                Line::TooLong(u, len) => {
                    assert!(*len > MAX_LINE as u64 && u.len() <= 3 * MAX_LINE);
                    // The record gives the line's real length, and the limit.
                    let msg = Line::too_long_message(*len);
                    assert!(msg.contains(&format!("{len} bytes")), "{msg}");
                    assert!(msg.starts_with("invalid_url"), "{msg}");
                }
            }
        }
    });
    assert!(n > 0);
}

/// The fields of a record `--resume` reads, as docs/cli.md gives them.
#[derive(Deserialize)]
struct Rec {
    url: String,
    error: Option<String>,
    #[serde(default)]
    skipped: Option<String>,
    #[serde(default)]
    links: Vec<String>,
    #[serde(default)]
    #[allow(dead_code)]
    depth: u32,
}

/// A record whose fetch found no exit in service and sent nothing: its `error` is
/// `no_healthy_exit: …` and its `attempts` 0 (absent, of another type, or the last of
/// repeated keys).
fn sent_nowhere(line: &[u8], error: Option<&str>) -> bool {
    let attempts = serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("attempts")?.as_u64())
        .unwrap_or(0);
    let local = [
        "no_healthy_exit:",
        "local_connect:",
        "proxy:",
        "address_family:",
    ];
    error.is_some_and(|e| local.iter().any(|k| e.starts_with(k))) && attempts == 0
}

#[test]
fn resume() {
    let n = harness::fuzz("resume", |input| {
        let plan = Plan {
            fail_at: None,
            ..Plan::of(input)
        };
        let reader = Pieces {
            data: input,
            pos: 0,
            reads: 0,
            plan,
        };
        let capacity = 1 + input.len() % 97;
        let (state, complete_len) = read_records(BufReader::with_capacity(capacity, reader))
            .expect("reading from memory does not fail");
        // An unfinished last line is cut off, and nothing else.
        let complete = input.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        assert_eq!(complete_len, complete as u64);
        assert_eq!(state.truncated, (input.len() - complete) as u64);
        // Every complete line is a record, blank, or unreadable — and says why.
        let lines: Vec<&[u8]> = input[..complete].split_inclusive(|b| *b == b'\n').collect();
        let blank = lines
            .iter()
            .filter(|l| l.iter().all(u8::is_ascii_whitespace))
            .count() as u64;
        assert_eq!(
            state.records + state.unreadable + blank,
            lines.len() as u64,
            "{state:?}"
        );
        match &state.first_unreadable {
            None => assert_eq!(state.unreadable, 0),
            Some((at, why)) => {
                // "line N column M": the line is one that is not a record.
                let line: usize = at
                    .strip_prefix("line ")
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{at}"));
                assert!(
                    state.unreadable > 0 && line >= 1 && line <= lines.len(),
                    "{at}"
                );
                let named = lines[line - 1];
                assert!(serde_json::from_slice::<Rec>(named).is_err(), "{at}: {why}");
                assert!(at.contains(" column ") && !why.is_empty(), "{at}: {why}");
                assert!(!why.contains(" at line "), "{why}");
            }
        }
        // The last record of a URL decides; a duplicate's record decides nothing.
        let mut done = HashSet::new();
        let mut interrupted = HashSet::new();
        let mut sent_nowhere_urls = HashSet::new();
        let mut links = 0;
        let mut records = 0;
        for line in &lines {
            let Ok(r) = serde_json::from_slice::<Rec>(line) else {
                continue;
            };
            records += 1;
            if r.skipped.as_deref() == Some("duplicate") {
                continue;
            }
            links += r.links.iter().filter(|l| !l.contains("***")).count();
            interrupted.remove(&r.url);
            sent_nowhere_urls.remove(&r.url);
            if r.error.as_deref() == Some("interrupted") {
                done.remove(&r.url);
                interrupted.insert(r.url);
            } else if sent_nowhere(line, r.error.as_deref()) {
                done.remove(&r.url);
                sent_nowhere_urls.insert(r.url);
            } else {
                done.insert(r.url);
            }
        }
        assert_eq!(state.records, records);
        assert_eq!(state.done, done);
        assert_eq!(state.interrupted, interrupted.len() as u64);
        assert_eq!(state.sent_nowhere, sent_nowhere_urls.len() as u64);
        assert_eq!(state.links.len(), links);
        assert!(state.links.iter().all(|l| !l.url.contains("***")));
        assert!(state.pages <= state.records);
    });
    assert!(n > 0);
}
