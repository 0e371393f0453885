//! Cutting a WARC file an interrupted run left back to its last whole record.
//!
//! Why: a kill can stop the program inside a record, and `--resume` never appends to that
//! file (it starts the next one of the series), but the cut-off record would stay at its
//! end and make the file fail a WARC reader (`warcio check`). Records are written before
//! their JSONL record, so a record cut off here is one no JSONL record relies on: the URL
//! is fetched again by the resumed run.
//!
//! - `.warc.gz`: one gzip member per record; the file ends after the last member that
//!   decodes whole (its CRC and length check out).
//! - `.warc`: each record is a header block, `Content-Length` bytes and `\r\n\r\n`; the
//!   file ends after the last whole one.
//!
//! An answer is written as its response, then its request: a whole response last in the
//! file lost its request to the kill (a large response reaches the file apart from it),
//! and its JSONL record was not written either, so it is cut as well.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Cut `path` after its last whole record; returns the bytes cut (0 when it ended whole).
pub fn cut_to_whole_records(path: &Path, gzip: bool) -> io::Result<u64> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut reader = Tracked {
        inner: BufReader::with_capacity(256 * 1024, file),
        pos: 0,
    };
    let ends = if gzip {
        whole_gzip_members(&mut reader)
    } else {
        whole_warc_records(&mut reader)
    };
    let whole = ends.keep();
    if whole < len {
        OpenOptions::new().write(true).open(path)?.set_len(whole)?;
    }
    Ok(len - whole.min(len))
}

/// Where the whole records of a file end.
#[derive(Debug, Default)]
struct Ends {
    /// The end of the last whole record.
    end: u64,
    /// The start of the last whole record, when it is a response.
    response: Option<u64>,
}

impl Ends {
    /// A whole record ends at `end`; it started at the previous end.
    fn whole(&mut self, end: u64, response: bool) {
        self.response = response.then_some(self.end);
        self.end = end;
    }

    /// Where the file is cut: before a last response (its request was cut off), else
    /// after the last whole record.
    fn keep(&self) -> u64 {
        self.response.unwrap_or(self.end)
    }
}

/// A response's type line, as the writer puts it: right after `WARC/1.1`.
const RESPONSE: &[u8] = b"\r\nWARC-Type: response\r\n";

/// What of a record's start is looked at for [`RESPONSE`].
const HEAD_BYTES: usize = 64;

/// The whole gzip members.
fn whole_gzip_members<R: BufRead>(r: &mut Tracked<R>) -> Ends {
    let mut ends = Ends::default();
    let mut sink = [0u8; 64 * 1024];
    // The start of a member's record: its version line and type.
    let mut head = Vec::with_capacity(HEAD_BYTES);
    loop {
        match r.fill_buf() {
            Ok([]) | Err(_) => return ends,
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
            return ends;
        }
        let response = head.windows(RESPONSE.len()).any(|w| w == RESPONSE);
        ends.whole(r.pos, response);
    }
}

/// The longest header line a WARC record of ours may have. `WARC-Target-URI` is the final
/// URL after redirects, masked: `http::Uri` takes up to 64 KiB, and masking lengthens a
/// value (`k=x` becomes `k=***`), so a bound at 64 KiB would cut a whole record off at
/// such a URL, and every record after it.
const HEADER_LINE_MAX: u64 = 1 << 20;

/// The whole uncompressed WARC records.
fn whole_warc_records<R: BufRead>(r: &mut Tracked<R>) -> Ends {
    let mut ends = Ends::default();
    loop {
        let Some((length, response)) = record_head(r) else {
            return ends;
        };
        // The block and the two CRLFs after it.
        let want = length.saturating_add(4);
        let skipped = io::copy(&mut (&mut *r).take(want), &mut io::sink()).unwrap_or(0);
        if skipped < want {
            return ends;
        }
        ends.whole(r.pos, response);
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
                cut_to_whole_records(&p, gzip).unwrap();
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
        cut_to_whole_records(&p, false).unwrap();
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
                cut_to_whole_records(&p, gzip).unwrap();
                assert_eq!(
                    std::fs::read(&p).unwrap(),
                    kept,
                    "gzip {gzip}, cut at {cut}"
                );
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
}
