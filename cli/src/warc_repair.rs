//! Cutting the last WARC file of a series, as an interrupted run left it, back to what the
//! records account for.
//!
//! Why: a kill can stop the program inside a record, or between an exchange reaching the
//! file and its JSONL record reaching `--out`. `--resume` never appends to that file (it
//! starts the next one of the series), but what the kill left at its end would make the
//! file fail a WARC reader (`warcio check`), or keep a response no record names beside the
//! one the resumed run fetches again for its URL.
//!
//! - Records that name exchanges of the file ([`Accounted::Through`]): it ends after the
//!   one they name last, once that exchange is read whole where they say it is.
//! - Records that name files of the series but not this one ([`Accounted::Nothing`]): it
//!   ends after its first record, the warcinfo.
//! - Records that name no file of the series ([`Accounted::Unknown`]): it ends after its
//!   last whole record, or before it when that is a response: an answer is written as its
//!   response, then its request, so that response lost its request to the kill (a large
//!   response reaches the file apart from it), and its JSONL record was not written.
//!
//! Whole records: for `.warc.gz`, gzip members (one per record) that decode whole (their
//! CRC and length check out); for `.warc`, a header block, `Content-Length` bytes and
//! `\r\n\r\n`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// What the records account for in a WARC file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accounted {
    /// The exchange they name last in it: bytes `offset` to `end`.
    Through { offset: u64, end: u64 },
    /// Nothing: they name other files of the series.
    Nothing,
    /// Not known: they name no file of the series.
    Unknown,
}

/// What [`cut_to_accounted`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Bytes cut off the end.
    pub cut: u64,
    /// The records' end, when the file does not hold their last exchange whole there (it
    /// was then cut after its last whole record).
    pub short_of: Option<u64>,
}

/// Cut `path` back to what the records account for (see the module's text).
pub fn cut_to_accounted(path: &Path, gzip: bool, accounted: Accounted) -> io::Result<Repaired> {
    let len = std::fs::metadata(path)?.len();
    let mut short_of = None;
    let keep = match accounted {
        Accounted::Through { offset, end } => {
            let named = scan(path, gzip, offset, &|e| e.end >= end)?;
            if named.records > 0 && named.end == end {
                end
            } else {
                short_of = Some(end);
                scan(path, gzip, 0, &|_| false)?.keep()
            }
        }
        Accounted::Nothing => scan(path, gzip, 0, &|e| e.records > 0)?.end,
        Accounted::Unknown => scan(path, gzip, 0, &|_| false)?.keep(),
    };
    if keep < len {
        OpenOptions::new().write(true).open(path)?.set_len(keep)?;
    }
    Ok(Repaired {
        cut: len - keep.min(len),
        short_of,
    })
}

/// The whole records of `path` from byte `from` (a record's start) on, until `stop` says
/// enough or one is not whole.
fn scan(path: &Path, gzip: bool, from: u64, stop: &dyn Fn(&Ends) -> bool) -> io::Result<Ends> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut reader = Tracked {
        inner: BufReader::with_capacity(256 * 1024, file),
        pos: from,
    };
    let mut ends = Ends {
        end: from,
        response: None,
        records: 0,
    };
    if gzip {
        whole_gzip_members(&mut reader, &mut ends, stop);
    } else {
        whole_warc_records(&mut reader, &mut ends, stop);
    }
    Ok(ends)
}

/// Where the whole records of a file end.
#[derive(Debug)]
struct Ends {
    /// The end of the last whole record.
    end: u64,
    /// The start of the last whole record, when it is a response.
    response: Option<u64>,
    /// Whole records read.
    records: u64,
}

impl Ends {
    /// A whole record ends at `end`; it started at the previous end.
    fn whole(&mut self, end: u64, response: bool) {
        self.response = response.then_some(self.end);
        self.end = end;
        self.records += 1;
    }

    /// Where the file is cut when the records name none of it: before a last response
    /// (its request was cut off), else after the last whole record.
    fn keep(&self) -> u64 {
        self.response.unwrap_or(self.end)
    }
}

/// A response's type line, as the writer puts it: right after `WARC/1.1`.
const RESPONSE: &[u8] = b"\r\nWARC-Type: response\r\n";

/// What of a record's start is looked at for [`RESPONSE`].
const HEAD_BYTES: usize = 64;

/// The whole gzip members.
fn whole_gzip_members<R: BufRead>(
    r: &mut Tracked<R>,
    ends: &mut Ends,
    stop: &dyn Fn(&Ends) -> bool,
) {
    let mut sink = [0u8; 64 * 1024];
    // The start of a member's record: its version line and type.
    let mut head = Vec::with_capacity(HEAD_BYTES);
    loop {
        match r.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(_) => {}
        }
        head.clear();
        let mut member = flate2::bufread::GzDecoder::new(&mut *r);
        let whole = loop {
            match member.read(&mut sink) {
                Ok(0) => break true,
                Ok(n) => {
                    let room = HEAD_BYTES.saturating_sub(head.len());
                    head.extend_from_slice(&sink[..n.min(room)]);
                }
                Err(_) => break false,
            }
        };
        if !whole {
            return;
        }
        let response = head.windows(RESPONSE.len()).any(|w| w == RESPONSE);
        ends.whole(r.pos, response);
        if stop(ends) {
            return;
        }
    }
}

/// The longest header line a WARC record of ours may have. `WARC-Target-URI` is the final
/// URL after redirects, masked: `http::Uri` takes up to 64 KiB, and masking lengthens a
/// value (`k=x` becomes `k=***`), so a bound at 64 KiB would cut a whole record off at
/// such a URL, and every record after it.
const HEADER_LINE_MAX: u64 = 1 << 20;

/// The whole uncompressed WARC records.
fn whole_warc_records<R: BufRead>(
    r: &mut Tracked<R>,
    ends: &mut Ends,
    stop: &dyn Fn(&Ends) -> bool,
) {
    loop {
        let Some((length, response)) = record_head(r) else {
            return;
        };
        // The block and the two CRLFs after it.
        let want = length.saturating_add(4);
        let skipped = io::copy(&mut (&mut *r).take(want), &mut io::sink()).unwrap_or(0);
        if skipped < want {
            return;
        }
        ends.whole(r.pos, response);
        if stop(ends) {
            return;
        }
    }
}

/// Read one record's header block; its `Content-Length` and whether it is a response, or
/// `None` at the end of the file or where the block is cut off or not a WARC header.
fn record_head<R: BufRead>(r: &mut Tracked<R>) -> Option<(u64, bool)> {
    let mut line = Vec::new();
    let mut length = None;
    let mut response = false;
    let mut first = true;
    loop {
        line.clear();
        // A header line longer than any the writer emits is not a header.
        let n = (&mut *r)
            .take(HEADER_LINE_MAX)
            .read_until(b'\n', &mut line)
            .ok()?;
        if n == 0 || !line.ends_with(b"\n") {
            return None;
        }
        let text = std::str::from_utf8(&line).ok()?.trim_end();
        if first {
            if !text.starts_with("WARC/") {
                return None;
            }
            first = false;
            continue;
        }
        if text.is_empty() {
            return length.map(|l| (l, response));
        }
        if let Some((name, value)) = text.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.trim().parse().ok()?);
            } else if name.eq_ignore_ascii_case("warc-type") {
                response = value.trim() == "response";
            }
        }
    }
}

/// A `BufRead` that counts what its reader consumed: where in the file a decoder that
/// reads through it has got to.
struct Tracked<R> {
    inner: R,
    pos: u64,
}

impl<R: BufRead> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Tracked<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.pos += amt as u64;
        self.inner.consume(amt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn record(body: &str) -> Vec<u8> {
        typed("resource", body)
    }

    fn typed(kind: &str, body: &str) -> Vec<u8> {
        format!(
            "WARC/1.1\r\nWARC-Type: {kind}\r\nContent-Length: {}\r\n\r\n{body}\r\n\r\n",
            body.len()
        )
        .into_bytes()
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("warc-repair-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// Every cut of a file of three records ends, repaired, at the last whole one.
    #[test]
    fn a_file_cut_anywhere_ends_after_its_last_whole_record() {
        for gzip in [false, true] {
            let records: Vec<Vec<u8>> = ["one", "second body", "3"]
                .iter()
                .map(|b| {
                    let r = record(b);
                    if gzip {
                        gz(&r)
                    } else {
                        r
                    }
                })
                .collect();
            let whole: Vec<u8> = records.concat();
            let ends: Vec<usize> = records
                .iter()
                .scan(0, |at, r| {
                    *at += r.len();
                    Some(*at)
                })
                .collect();
            for cut in 0..=whole.len() {
                let p = temp(&format!("cut-{gzip}-{cut}"), &whole[..cut]);
                cut_to_accounted(&p, gzip, Accounted::Unknown).unwrap();
                let kept = std::fs::metadata(&p).unwrap().len() as usize;
                let expected = ends
                    .iter()
                    .copied()
                    .filter(|e| *e <= cut)
                    .max()
                    .unwrap_or(0);
                assert_eq!(kept, expected, "gzip {gzip}, cut at {cut}");
                std::fs::remove_file(&p).unwrap();
            }
        }
    }

    #[test]
    fn a_record_for_a_url_of_100_kib_is_whole() {
        // A redirect may end at a URL as long as `http::Uri` takes, longer still masked.
        let long = format!("http://h.test/{}", "a".repeat(100 * 1024));
        let head = format!(
            "WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: {long}\r\nContent-Length: 2\r\n\r\nok\r\n\r\n"
        );
        let whole = [head.into_bytes(), record("after")].concat();
        let p = temp("long-uri", &whole);
        cut_to_accounted(&p, false, Accounted::Unknown).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len() as usize, whole.len());
        std::fs::remove_file(&p).unwrap();
    }

    /// An answer's response is written before its request: a response last in the file
    /// lost its request to the kill (a large response goes out apart from it), and no
    /// JSONL record was written for it, so it goes too.
    #[test]
    fn a_response_whose_request_was_cut_goes_with_it() {
        for gzip in [false, true] {
            let pack = |r: Vec<u8>| if gzip { gz(&r) } else { r };
            let kept = [
                pack(typed("warcinfo", "info")),
                pack(typed("response", "HTTP/1.1 200 OK\r\n\r\none")),
                pack(typed("request", "GET /one HTTP/1.1\r\n\r\n")),
            ]
            .concat();
            let response = pack(typed("response", "HTTP/1.1 200 OK\r\n\r\ntwo"));
            let request = pack(typed("request", "GET /two HTTP/1.1\r\n\r\n"));
            for cut in 0..request.len() {
                let bytes = [&kept[..], &response, &request[..cut]].concat();
                let p = temp(&format!("orphan-{gzip}-{cut}"), &bytes);
                cut_to_accounted(&p, gzip, Accounted::Unknown).unwrap();
                assert_eq!(
                    std::fs::read(&p).unwrap(),
                    kept,
                    "gzip {gzip}, cut at {cut}"
                );
                std::fs::remove_file(&p).unwrap();
            }
        }
    }

    /// The records name the exchanges of a file they account for: it is cut after the one
    /// they name last, or to its warcinfo when they name none of it; a named end that is
    /// not where whole records end leaves the file cut after its last whole record.
    #[test]
    fn a_file_is_cut_back_to_what_the_records_name() {
        for gzip in [false, true] {
            let pack = |r: Vec<u8>| if gzip { gz(&r) } else { r };
            let info = pack(typed("warcinfo", "info"));
            let one = [
                pack(typed("response", "HTTP/1.1 200 OK\r\n\r\none")),
                pack(typed("request", "GET /one HTTP/1.1\r\n\r\n")),
            ]
            .concat();
            let two = [
                pack(typed("response", "HTTP/1.1 200 OK\r\n\r\ntwo")),
                pack(typed("request", "GET /two HTTP/1.1\r\n\r\n")),
            ]
            .concat();
            let whole = [&info[..], &one, &two].concat();
            let (offset, end) = (info.len() as u64, (info.len() + one.len()) as u64);
            let cases = [
                (
                    Accounted::Through { offset, end },
                    [&info[..], &one].concat(),
                    None,
                ),
                (Accounted::Nothing, info.clone(), None),
                (
                    Accounted::Through {
                        offset,
                        end: end + 3,
                    },
                    whole.clone(),
                    Some(end + 3),
                ),
                (
                    Accounted::Through {
                        offset: offset + 1,
                        end,
                    },
                    whole.clone(),
                    Some(end),
                ),
            ];
            for (i, (accounted, kept, short_of)) in cases.into_iter().enumerate() {
                let p = temp(&format!("named-{gzip}-{i}"), &whole);
                let r = cut_to_accounted(&p, gzip, accounted).unwrap();
                let cut = (whole.len() - kept.len()) as u64;
                assert_eq!(r, Repaired { cut, short_of }, "gzip {gzip}, {accounted:?}");
                assert_eq!(
                    std::fs::read(&p).unwrap(),
                    kept,
                    "gzip {gzip}, {accounted:?}"
                );
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
}
