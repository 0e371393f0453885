//! `--resume`: what an earlier run's `--out` says is done. The records are the whole
//! state: no job directory.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use exitcrawl_actors::follow::PendingLink;
use exitcrawl_actors::FetchErrorKind;
use serde::Deserialize;

use super::record::{DUPLICATE, INTERRUPTED, ROBOTS};
use super::warc_series::NamedEnds;

/// The fields of an earlier record that `--resume` and `--dedupe` need (the last three:
/// `--follow`).
#[derive(Deserialize)]
pub struct SeenRecord {
    pub url: String,
    pub error: Option<String>,
    #[serde(default)]
    pub depth: u32,
    #[serde(default)]
    pub skipped: Option<String>,
    #[serde(default)]
    pub links: Vec<String>,
    /// The record says the fetch failed on this side before anything was sent (see
    /// [`SENT_NOWHERE`], `attempts` 0): the URL never reached a site. Not a key of the line: set by
    /// [`SeenRecord::read`] from the line's `attempts`, so that what is a record stays
    /// this struct's other fields' to say.
    #[serde(skip)]
    pub sent_nowhere: bool,
}

/// The fields of a record the summary of a resumed crawl counts besides
/// [`SeenRecord`]'s, read from the line again, leniently: a value of another type counts
/// as absent and a repeated key's last value counts, so that they never make a line stop
/// being a record (what is a record is [`SeenRecord`]'s to say).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub status: Option<u16>,
    pub throttled: u32,
    /// HTTP attempts made: 0 for a URL never sent (robots.txt unreachable, a private
    /// address refused, an interruption before it went).
    pub attempts: u32,
}

impl Counted {
    /// Of the record on `line` (nothing, should it not read).
    pub fn of(line: &[u8]) -> Counted {
        serde_json::from_slice(line).unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for Counted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Counted;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a record's fields")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Counted, A::Error> {
                let mut c = Counted::default();
                while let Some(key) = m.next_key::<String>()? {
                    match key.as_str() {
                        "status" => {
                            let v: serde_json::Value = m.next_value()?;
                            c.status = v.as_u64().and_then(|s| u16::try_from(s).ok());
                        }
                        "throttled" => {
                            let v: serde_json::Value = m.next_value()?;
                            c.throttled = v
                                .as_u64()
                                .map_or(0, |t| u32::try_from(t).unwrap_or(u32::MAX));
                        }
                        "attempts" => {
                            let v: serde_json::Value = m.next_value()?;
                            c.attempts = v
                                .as_u64()
                                .map_or(0, |t| u32::try_from(t).unwrap_or(u32::MAX));
                        }
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(c)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// Where a record says its answer is in the archive (`warc_file`, `warc_offset`,
/// `warc_length`), read from the line again, leniently as [`Counted`]: a value of another
/// type counts as absent, so that they never make a line stop being a record.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Archived {
    pub file: Option<String>,
    pub offset: Option<u64>,
    pub length: Option<u64>,
}

impl Archived {
    /// Of the record on `line`: its file, and the offsets its exchange starts and ends at.
    pub fn of(line: &[u8]) -> Option<(String, u64, u64)> {
        const KEY: &[u8] = b"\"warc_file\"";
        if !line.windows(KEY.len()).any(|w| w == KEY) {
            return None;
        }
        let a: Archived = serde_json::from_slice(line).ok()?;
        let (offset, length) = (a.offset?, a.length?);
        Some((a.file?, offset, offset.checked_add(length)?))
    }
}

impl<'de> Deserialize<'de> for Archived {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Archived;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a record's fields")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Archived, A::Error> {
                let mut a = Archived::default();
                while let Some(key) = m.next_key::<String>()? {
                    match key.as_str() {
                        "warc_file" => {
                            let v: serde_json::Value = m.next_value()?;
                            a.file = v.as_str().map(str::to_owned);
                        }
                        "warc_offset" => a.offset = m.next_value::<serde_json::Value>()?.as_u64(),
                        "warc_length" => a.length = m.next_value::<serde_json::Value>()?.as_u64(),
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(a)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// What `--resume` found in `--out`.
#[derive(Debug, Default)]
pub struct ResumeState {
    /// URLs whose last record is final (not one to fetch again): skipped.
    pub done: HashSet<String>,
    /// Records read.
    pub records: u64,
    /// URLs whose last record says interrupted: fetched again.
    pub interrupted: u64,
    /// URLs whose last record failed on this side and sent nothing: fetched again.
    pub sent_nowhere: u64,
    /// URLs whose last record skipped them for a robots.txt the site could not serve
    /// then (see [`SeenRecord::robots_unavailable`]): fetched again.
    pub robots_unavailable: u64,
    /// Lines that were not a record (left in place, ignored).
    pub unreadable: u64,
    /// The first of them: where (`line N column M`, from 1) and why it is not a record.
    pub first_unreadable: Option<(String, String)>,
    /// Bytes of an unfinished last line (a hard kill mid-write) cut off the file.
    pub truncated: u64,
    /// `--follow`: records of fetched pages (they count against `max_pages`).
    pub pages: u64,
    /// `--follow`: the links the recorded pages put in the frontier. A link whose
    /// credentials were masked (`***`) cannot be fetched as written and is left out.
    pub links: Vec<PendingLink>,
    /// `--follow`: links left out because they were masked.
    pub masked_links: u64,
    /// With `--warc`: per WARC file the records name, the exchange they name last there.
    pub warc_ends: NamedEnds,
}

/// How a record's `error` starts when its site's robots.txt was unavailable
/// ([`exitcrawl::discover::crawl::ROBOTS_UNAVAILABLE`]'s kind).
const ROBOTS_UNAVAILABLE_KIND: &str = "robots_unavailable:";

/// Failures on this side that end a fetch before anything reaches a site: no exit in
/// service, a local connect failure (out of descriptors), the exits' proxies refusing, no
/// exit of the host's address family. With `attempts` 0 such a record leaves its URL to be
/// fetched again, once what failed here is mended (as the shared frontier requeues them).
const SENT_NOWHERE: [FetchErrorKind; 4] = [
    FetchErrorKind::NoHealthyExit,
    FetchErrorKind::LocalConnect,
    FetchErrorKind::Proxy,
    FetchErrorKind::AddressFamily,
];

impl SeenRecord {
    /// The record on `line`, [`SeenRecord::sent_nowhere`] included.
    pub fn read(line: &[u8]) -> serde_json::Result<SeenRecord> {
        let mut r: SeenRecord = serde_json::from_slice(line)?;
        let sent_nowhere = r.error.as_deref().is_some_and(|e| {
            SENT_NOWHERE.iter().any(|kind| {
                e.strip_prefix(kind.as_str())
                    .is_some_and(|rest| rest.starts_with(':'))
            })
        });
        // Only such records are read again for their attempts: most lines are parsed once.
        r.sent_nowhere = sent_nowhere && Counted::of(line).attempts == 0;
        Ok(r)
    }

    /// A record that says the URL was on an earlier line (see [`DUPLICATE`]).
    pub fn is_duplicate(&self) -> bool {
        self.skipped.as_deref() == Some(DUPLICATE)
    }

    /// A record that says the Ctrl-C stopped its fetch: `--resume` fetches it again.
    pub fn is_interrupted(&self) -> bool {
        self.error.as_deref() == Some(INTERRUPTED)
    }

    /// A record that skipped its URL, unsent, because the site's robots.txt was
    /// unavailable then (5xx, or throttled past `give_up_after_ms`): not the site's rule
    /// for the URL, only a "later", as a throttle is.
    pub fn robots_unavailable(&self) -> bool {
        self.skipped.as_deref() == Some(ROBOTS)
            && self
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with(ROBOTS_UNAVAILABLE_KIND))
    }

    /// A record that leaves its URL to be fetched again by `--resume`: the Ctrl-C stopped
    /// its fetch, it failed on this side before anything was sent, or its site's
    /// robots.txt was unavailable. Either way the URL never had its answer.
    pub fn fetch_again(&self) -> bool {
        self.is_interrupted() || self.sent_nowhere || self.robots_unavailable()
    }

    /// Which of a URL's records counts, lowest first: a duplicate's (it only points at
    /// another), one to fetch again (by `--resume`, see [`SeenRecord::fetch_again`]), a
    /// final one.
    pub fn rank(&self) -> u8 {
        if self.is_duplicate() {
            0
        } else if self.fetch_again() {
            1
        } else {
            2
        }
    }
}

/// Where a line is in its file: its first byte and its length, newline included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub offset: u64,
    pub len: u64,
}

/// One complete, non-blank line of a records file.
pub enum Visit<'a> {
    /// A record, its line as read, and where.
    Record(SeenRecord, &'a [u8], Span),
    /// Not a record: line `line` (from 1), why, and where.
    Unreadable(u64, &'a serde_json::Error, Span),
}

/// What [`visit_lines`] did not hand over.
pub struct Visited {
    /// Bytes of the complete lines (the file's length less an unfinished last line).
    pub complete_len: u64,
    /// Bytes of an unfinished last line (no newline): not read as a record.
    pub truncated: u64,
}

/// Hand each complete line of `input` to `f`, read as a record or not; blank lines are
/// skipped, an unfinished last line is counted in `truncated`, not handed over. The one
/// reader of records files: `--resume`, and the compaction after it.
pub fn visit_lines(mut input: impl BufRead, mut f: impl FnMut(Visit<'_>)) -> io::Result<Visited> {
    let mut complete_len = 0u64;
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = input.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            return Ok(Visited {
                complete_len,
                truncated: n as u64,
            });
        }
        let span = Span {
            offset: complete_len,
            len: n as u64,
        };
        complete_len += n as u64;
        line += 1;
        match SeenRecord::read(&buf) {
            Ok(r) => f(Visit::Record(r, &buf, span)),
            Err(_) if buf.iter().all(u8::is_ascii_whitespace) => {}
            Err(e) => f(Visit::Unreadable(line, &e, span)),
        }
    }
    Ok(Visited {
        complete_len,
        truncated: 0,
    })
}

impl ResumeState {
    /// `sent`: the record's URL went out (attempts > 0); `redirect`: it answered with a
    /// redirect `--follow` did not follow in the fetch, so its one link is the target,
    /// the same page moved.
    fn add(&mut self, r: SeenRecord, (sent, redirect): (bool, bool), again: &mut Again) {
        self.records += 1;
        if r.is_duplicate() {
            return;
        }
        // The page budget (`max_pages`) is what was sent: a URL that never went took none
        // of it, and one interrupted before it went takes its share when it goes.
        if r.skipped.is_none() && sent {
            self.pages += 1;
        }
        let (interrupted_now, sent_nowhere_now) = (r.is_interrupted(), r.sent_nowhere);
        let robots_now = r.robots_unavailable();
        for link in r.links {
            if link.contains("***") {
                self.masked_links += 1;
                continue;
            }
            self.links.push(PendingLink {
                url: link,
                depth: r.depth.saturating_add(u32::from(!redirect)),
                parent: Some(r.url.clone()),
                redirect,
            });
        }
        again.interrupted.remove(&r.url);
        again.sent_nowhere.remove(&r.url);
        again.robots_unavailable.remove(&r.url);
        if interrupted_now {
            self.done.remove(&r.url);
            again.interrupted.insert(r.url);
        } else if sent_nowhere_now {
            self.done.remove(&r.url);
            again.sent_nowhere.insert(r.url);
        } else if robots_now {
            self.done.remove(&r.url);
            again.robots_unavailable.insert(r.url);
        } else {
            self.done.insert(r.url);
        }
    }
}

/// The URLs whose last record so far leaves them to be fetched again, by why.
#[derive(Default)]
struct Again {
    interrupted: HashSet<String>,
    sent_nowhere: HashSet<String>,
    robots_unavailable: HashSet<String>,
}

/// Read the existing `--out` (absent = nothing done yet). The last record of a URL
/// decides: final → skip it, interrupted or sent nowhere for want of an exit → fetch it
/// again. An unfinished last line (no newline) is cut off so the appended records start
/// on a line of their own.
pub fn read_resume(path: &Path) -> Result<ResumeState, ResumeFailure> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ResumeState::default()),
        Err(e) => return Err(ResumeFailure::Open(e)),
    };
    let (state, complete_len) =
        read_records(BufReader::new(&mut file)).map_err(ResumeFailure::Read)?;
    if state.truncated > 0 {
        file.set_len(complete_len)
            .and_then(|()| file.seek(SeekFrom::End(0)))
            .map_err(ResumeFailure::Read)?;
    }
    Ok(state)
}

/// Why [`read_resume`] could not read `--out`.
#[derive(Debug)]
pub enum ResumeFailure {
    /// It could not be opened to be read and appended to: a wrong argument.
    Open(io::Error),
    /// It was opened, and reading it (or cutting its unfinished last line) failed.
    Read(io::Error),
}

/// What the records of `input` say, and the length of its complete lines (an unfinished
/// last line is counted in `truncated`, not read).
pub fn read_records(input: impl BufRead) -> io::Result<(ResumeState, u64)> {
    let mut state = ResumeState::default();
    let mut again = Again::default();
    let visited = visit_lines(input, |v| match v {
        Visit::Record(r, line, _) => {
            if let Some((file, offset, end)) = Archived::of(line) {
                let last = state.warc_ends.entry(file).or_insert((offset, end));
                if end > last.1 {
                    *last = (offset, end);
                }
            }
            // A record without an error was answered, so sent: only the others are read
            // again for their attempts, and most lines are parsed once.
            let sent = r.error.is_none() || (!r.sent_nowhere && Counted::of(line).attempts > 0);
            // A redirect's record has its target as its one link: only such records are
            // read again for their status (leniently, as `Counted` reads it).
            let redirect = r.links.len() == 1
                && Counted::of(line)
                    .status
                    .is_some_and(|s| (300..400).contains(&s));
            state.add(r, (sent, redirect), &mut again);
        }
        Visit::Unreadable(line, e, _) => {
            state.unreadable += 1;
            if state.first_unreadable.is_none() {
                state.first_unreadable = Some(not_a_record(line, e));
            }
        }
    })?;
    state.truncated = visited.truncated;
    state.interrupted = again.interrupted.len() as u64;
    state.sent_nowhere = again.sent_nowhere.len() as u64;
    state.robots_unavailable = again.robots_unavailable.len() as u64;
    Ok((state, visited.complete_len))
}

/// Where line `line` stops being a record, and why: serde_json's reason without its
/// position (which counts from the line's start, not the file's).
fn not_a_record(line: u64, e: &serde_json::Error) -> (String, String) {
    let msg = e.to_string();
    let why = msg
        .rsplit_once(" at line ")
        .map_or(msg.as_str(), |(why, _)| why);
    (
        format!("line {line} column {}", e.column()),
        why.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_whose_reading_fails_is_told_from_one_that_cannot_be_opened() {
        // A directory cannot be opened to be appended to: the argument is wrong.
        let dir = std::env::temp_dir();
        assert!(
            matches!(read_resume(&dir), Err(ResumeFailure::Open(_))),
            "a directory"
        );
        // Opened, then its first read fails (the first page of this process's memory is
        // not mapped: EIO): the file is the argument asked for, its reading failed.
        let mem = Path::new("/proc/self/mem");
        let opens = OpenOptions::new().read(true).write(true).open(mem).is_ok();
        if opens && std::fs::read(mem).is_err() {
            assert!(
                matches!(read_resume(mem), Err(ResumeFailure::Read(_))),
                "/proc/self/mem"
            );
        }
    }

    #[test]
    fn a_redirects_target_resumes_at_its_pages_depth() {
        let input = br#"{"url":"http://a.test/","status":301,"depth":0,"error":null,"links":["https://www.a.test/"]}
{"url":"https://www.a.test/","status":200,"depth":0,"error":null,"links":["https://www.a.test/x"]}
{"url":"http://a.test/odd","status":"301","depth":2,"error":null,"links":["http://a.test/y"]}
"#;
        let (state, _) = read_records(&input[..]).unwrap();
        assert_eq!(
            state.unreadable, 0,
            "a status of another type keeps its record"
        );
        let got: Vec<_> = state
            .links
            .iter()
            .map(|l| (l.url.as_str(), l.depth, l.redirect))
            .collect();
        assert_eq!(
            got,
            [
                ("https://www.a.test/", 0, true),
                ("https://www.a.test/x", 1, false),
                ("http://a.test/y", 3, false),
            ]
        );
    }

    #[test]
    fn a_url_that_failed_on_this_side_and_sent_nothing_is_fetched_again() {
        let input = br#"{"url":"http://a.test/0","attempts":0,"error":"no_healthy_exit: none"}
{"url":"http://a.test/1","attempts":2,"error":"no_healthy_exit: none"}
{"url":"http://a.test/2","attempts":0,"error":"no_healthy_exit: none"}
{"url":"http://a.test/2","status":200,"attempts":1,"error":null}
{"url":"http://a.test/3","attempts":0,"error":"proxy: refused"}
{"url":"http://a.test/4","attempts":"0","attempts":0,"error":"no_healthy_exit: none"}
{"url":"http://a.test/5","attempts":0,"error":"no_healthy_exitx"}
"#;
        let (state, _) = read_records(&input[..]).unwrap();
        let mut done: Vec<_> = state.done.iter().map(String::as_str).collect();
        done.sort_unstable();
        assert_eq!(
            done,
            ["http://a.test/1", "http://a.test/2", "http://a.test/5"]
        );
        assert_eq!((state.sent_nowhere, state.interrupted), (3, 0));
        assert_eq!((state.records, state.unreadable), (7, 0));
        let rank = |line: &[u8]| SeenRecord::read(line).unwrap().rank();
        let lines: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
        assert_eq!(
            rank(lines[0]),
            rank(br#"{"url":"u","error":"interrupted"}"#)
        );
        assert_eq!(rank(lines[1]), rank(lines[3]), "it was sent: final");
    }

    #[test]
    fn a_url_an_unavailable_robots_txt_skipped_is_fetched_again_a_disallowed_one_is_not() {
        let input = br#"{"url":"http://a.test/0","status":null,"skipped":"robots","error":"robots_unavailable: robots.txt could not be fetched (it answered 500)"}
{"url":"http://a.test/1","status":null,"skipped":"robots","error":null}
{"url":"http://a.test/2","status":null,"skipped":null,"error":"robots_unavailable: not a skip"}
"#;
        let (state, _) = read_records(&input[..]).unwrap();
        assert_eq!(state.robots_unavailable, 1);
        let mut done: Vec<_> = state.done.into_iter().collect();
        done.sort();
        assert_eq!(done, ["http://a.test/1", "http://a.test/2"]);
    }

    #[test]
    fn the_records_name_the_exchange_that_ends_last_in_each_warc_file() {
        let input = br#"{"url":"http://a.test/0","status":200,"error":null,"warc_file":"w.warc.gz","warc_offset":300,"warc_length":200}
{"url":"http://a.test/1","status":200,"error":null,"warc_file":"w.warc.gz","warc_offset":100,"warc_length":200}
{"url":"http://a.test/2","status":200,"error":null,"warc_file":"w-00001.warc.gz","warc_offset":"9","warc_length":5}
{"url":"http://a.test/3","status":200,"error":null,"warc_file":"w-00001.warc.gz","warc_offset":50,"warc_offset":60,"warc_length":5}
{"url":"http://a.test/4","status":200,"error":null,"warc_file":7,"warc_offset":1,"warc_length":1}
"#;
        let (state, _) = read_records(&input[..]).unwrap();
        assert_eq!((state.records, state.unreadable), (5, 0));
        let mut ends: Vec<_> = state.warc_ends.into_iter().collect();
        ends.sort();
        assert_eq!(
            ends,
            [
                ("w-00001.warc.gz".to_string(), (60, 65)),
                ("w.warc.gz".to_string(), (300, 500)),
            ]
        );
    }
}
