//! One record per URL: `--dedupe IN... --out OUT` merges results files, and a resumed
//! run compacts its `--out` when it ends ([`Compaction`]). Both keep, for each URL, the record
//! [`SeenRecord::rank`] puts first — its last final record, else its last one to fetch
//! again (interrupted, or sent nowhere for want of an exit), else its last
//! `skipped: "duplicate"` one — in the order the URLs first appear.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::output::{write_stdout, Replacement};
use super::paths::{check_distinct, Named};
use super::record::Fate;
use super::resume::{visit_lines, Counted, SeenRecord, Span, Visit};
use super::term::say;
use super::Failure;

/// The record that counts for each URL offered, and the lines kept as they are, in order
/// of first appearance.
struct Picker<T> {
    /// Each slot with the rank of what it holds (a kept line's is not compared).
    slots: Vec<(T, u8)>,
    /// URL → its slot.
    index: HashMap<String, usize>,
}

impl<T> Default for Picker<T> {
    fn default() -> Self {
        Picker {
            slots: Vec::new(),
            index: HashMap::new(),
        }
    }
}

impl<T> Picker<T> {
    /// A record of `url` of rank `rank`: it takes the URL's slot unless the slot holds a
    /// record of a higher rank (of the same rank, the later one counts).
    fn offer(&mut self, url: String, rank: u8, value: T) {
        match self.index.get(&url) {
            Some(&i) => {
                if rank >= self.slots[i].1 {
                    self.slots[i] = (value, rank);
                }
            }
            None => {
                self.index.insert(url, self.slots.len());
                self.slots.push((value, rank));
            }
        }
    }

    /// A line that is not a record, kept where it is.
    fn keep(&mut self, value: T) {
        self.slots.push((value, 0));
    }

    fn urls(&self) -> usize {
        self.index.len()
    }

    fn into_picked(self) -> impl Iterator<Item = T> {
        self.slots.into_iter().map(|(v, _)| v)
    }
}

/// One record per URL (see [`Picker`]). Lines that are not records (e.g. a line cut by a
/// hard kill) are dropped and counted.
pub fn dedupe(inputs: &[PathBuf], out: &Path) -> Result<(), Failure> {
    let named: Vec<Named<'_>> = inputs
        .iter()
        .map(|p| Named {
            flag: "--dedupe",
            path: p,
        })
        .collect();
    check_distinct(
        &named,
        &[Named {
            flag: "--out",
            path: out,
        }],
    )
    .map_err(Failure::Usage)?;
    let mut picker: Picker<String> = Picker::default();
    let (mut read, mut dropped) = (0u64, 0u64);
    for path in inputs {
        // An input that cannot be opened is bad input (exit 2); one whose reading fails
        // once open is an I/O failure (exit 1). Either way --out is not touched.
        let f = open_input(path).map_err(Failure::Usage)?;
        for line in BufReader::new(f).split(b'\n') {
            let line = line.map_err(|e| {
                Failure::Output(format!(
                    "--dedupe {}: reading it failed: {e} (--out was not changed)",
                    path.display()
                ))
            })?;
            // A record is UTF-8 JSON: a line that is not (a last line cut inside a
            // character by a hard kill) is no record, dropped as any other.
            let Ok(mut line) = String::from_utf8(line) else {
                dropped += 1;
                continue;
            };
            if line.ends_with('\r') {
                line.pop();
            }
            if line.trim().is_empty() {
                continue;
            }
            let Ok(r) = SeenRecord::read(line.as_bytes()) else {
                dropped += 1;
                continue;
            };
            read += 1;
            let rank = r.rank();
            picker.offer(r.url, rank, line);
        }
    }
    let urls = picker.urls();
    // The merge replaces --out in one step: until it is complete, the old file stays.
    let written = if out == Path::new("-") {
        let mut all = Vec::new();
        for line in picker.into_picked() {
            all.extend_from_slice(line.as_bytes());
            all.push(b'\n');
        }
        write_stdout(&all)
    } else {
        let mut w = Replacement::create(out)
            .map_err(|e| Failure::Usage(format!("--out {}: {e}", out.display())))?;
        picker
            .into_picked()
            .try_for_each(|line| writeln!(w, "{line}"))
            .and_then(|()| w.commit())
    };
    written.map_err(|e| Failure::Output(format!("writing --out: {e}")))?;
    say(&format!(
        "--dedupe: {read} records, {urls} URLs written, {dropped} unreadable lines dropped"
    ));
    Ok(())
}

/// A `--dedupe` input, opened: `Err` says why it cannot be (a directory is refused here,
/// where opening it would succeed and its reading fail).
fn open_input(path: &Path) -> Result<File, String> {
    let f = File::open(path).map_err(|e| format!("--dedupe {}: {e}", path.display()))?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "--dedupe {}: is a directory (expected a results file, one JSON record a line)",
            path.display()
        ));
    }
    Ok(f)
}

/// Counts over the records a compacted `--out` keeps, one per URL: what the summary of a
/// resumed crawl says.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecordCounts {
    /// Records (= distinct URLs).
    pub total: u64,
    /// Of them, with a 2xx status.
    pub ok: u64,
    /// Of them, fetches that failed ([`Fate::Failed`]).
    pub failed: u64,
    /// Their `throttled` summed.
    pub throttled: u64,
    pub interrupted: u64,
    pub skipped_robots: u64,
    pub skipped_duplicate: u64,
    /// Records of lines that are not a URL the crawler takes ([`Fate::Invalid`]).
    pub invalid: u64,
    /// Records answered with a redirect ([`Fate::Redirected`]).
    pub redirected: u64,
}

impl RecordCounts {
    fn add(&mut self, r: &SeenRecord, c: Counted) {
        self.total += 1;
        self.throttled += u64::from(c.throttled);
        let figure = match Fate::of(c.status, r.error.as_deref(), r.skipped.as_deref()) {
            Fate::Ok => &mut self.ok,
            Fate::Failed => &mut self.failed,
            Fate::Interrupted => &mut self.interrupted,
            Fate::Robots => &mut self.skipped_robots,
            Fate::Duplicate => &mut self.skipped_duplicate,
            Fate::Invalid => &mut self.invalid,
            Fate::Redirected => &mut self.redirected,
        };
        *figure += 1;
    }
}

impl std::ops::AddAssign for RecordCounts {
    fn add_assign(&mut self, o: RecordCounts) {
        self.total += o.total;
        self.ok += o.ok;
        self.failed += o.failed;
        self.throttled += o.throttled;
        self.interrupted += o.interrupted;
        self.skipped_robots += o.skipped_robots;
        self.skipped_duplicate += o.skipped_duplicate;
        self.invalid += o.invalid;
        self.redirected += o.redirected;
    }
}

/// A records file read for compaction: the line that counts for each URL, and what the
/// kept records count. [`Compaction::write`] puts it in place.
pub struct Compaction {
    file: File,
    path: PathBuf,
    /// The lines to keep, in order.
    picked: Vec<Span>,
    /// Records read.
    pub records: u64,
    /// Lines that are not records: kept as they are, where they are.
    pub unreadable: u64,
    /// Bytes of an unfinished last line, left out.
    pub truncated: u64,
    /// Over the records kept, one per URL.
    pub counts: RecordCounts,
}

impl Compaction {
    /// Read the records file at `path`. `None`: it is not a regular file (a device, a
    /// pipe), which is left alone.
    pub fn read(path: &Path) -> io::Result<Option<Compaction>> {
        // Asked before opening: opening a FIFO for reading would wait for a writer.
        if !std::fs::metadata(path)?.is_file() {
            return Ok(None);
        }
        let file = File::open(path)?;
        let mut picker: Picker<(Span, Option<RecordCounts>)> = Picker::default();
        let (mut records, mut unreadable) = (0u64, 0u64);
        let visited = visit_lines(BufReader::new(&file), |v| match v {
            Visit::Record(r, line, span) => {
                records += 1;
                let mut counts = RecordCounts::default();
                counts.add(&r, Counted::of(line));
                let rank = r.rank();
                picker.offer(r.url, rank, (span, Some(counts)));
            }
            Visit::Unreadable(_, _, span) => {
                unreadable += 1;
                picker.keep((span, None));
            }
        })?;
        let mut counts = RecordCounts::default();
        let mut picked = Vec::with_capacity(picker.slots.len());
        for (span, c) in picker.into_picked() {
            if let Some(c) = c {
                counts += c;
            }
            picked.push(span);
        }
        Ok(Some(Compaction {
            file,
            path: path.to_path_buf(),
            picked,
            records,
            unreadable,
            truncated: visited.truncated,
            counts,
        }))
    }

    /// Lines the compacted file holds: one per URL, and the lines that are not records.
    pub fn lines(&self) -> usize {
        self.picked.len()
    }

    /// Rewrite the file with the lines that count, each copied byte for byte. The new file
    /// replaces the old in one step ([`Replacement`]: written under a temporary name in
    /// the same directory, synced, renamed over the file, the directory synced): until
    /// then the file is untouched, and on an error it stays as it was.
    pub fn write(self) -> io::Result<()> {
        let mut out = Replacement::create(&self.path)?;
        // The file's position is wherever reading it left it: the first line is sought.
        let mut input = BufReader::new(&self.file);
        let mut at = u64::MAX;
        let mut line = Vec::new();
        for span in self.picked {
            if at != span.offset {
                input.seek(io::SeekFrom::Start(span.offset))?;
            }
            line.resize(usize::try_from(span.len).map_err(io::Error::other)?, 0);
            input.read_exact(&mut line)?;
            out.write_all(&line)?;
            at = span.offset + span.len;
        }
        out.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("exitcrawl-dedupe-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const A_INTERRUPTED: &str = r#"{"url":"http://h/a","status":null,"error":"interrupted"}"#;
    const B_OK: &str = r#"{"url":"http://h/b","status":200,"error":null,"throttled":2}"#;
    const A_DUP: &str = r#"{"url":"http://h/a","status":null,"error":null,"skipped":"duplicate"}"#;
    const C_INTERRUPTED: &str = r#"{"url":"http://h/c","status":null,"error":"interrupted"}"#;
    const A_500: &str = r#"{"url":"http://h/a","status":500,"error":null}"#;
    const B_404: &str = r#"{"url":"http://h/b","status":404,"error":null}"#;
    const D_ROBOTS: &str = r#"{"url":"http://h/d","status":null,"error":null,"skipped":"robots"}"#;

    #[test]
    fn compaction_keeps_the_record_that_counts_for_each_url_in_first_seen_order() {
        let d = temp_dir("compact");
        let p = d.join("out.jsonl");
        let before = [
            A_INTERRUPTED,
            B_OK,
            "not a record",
            A_DUP,
            "",
            C_INTERRUPTED,
            A_500,
            B_404,
            D_ROBOTS,
        ]
        .join("\n")
            + "\n";
        std::fs::write(&p, &before).unwrap();
        let c = Compaction::read(&p).unwrap().expect("a regular file");
        assert_eq!((c.records, c.unreadable, c.truncated), (7, 1, 0));
        assert_eq!(
            c.counts,
            RecordCounts {
                total: 4,
                ok: 0,
                failed: 2,
                throttled: 0,
                interrupted: 1,
                skipped_robots: 1,
                skipped_duplicate: 0,
                invalid: 0,
                redirected: 0,
            }
        );
        assert_eq!(c.lines(), 5);
        c.write().unwrap();
        let after = std::fs::read_to_string(&p).unwrap();
        // a: its last final record (500), b: its last final one (404, later than the
        // 200), the line that is not a record where it was, c: only interrupted.
        let want = [A_500, B_404, "not a record", C_INTERRUPTED, D_ROBOTS].join("\n") + "\n";
        assert_eq!(after, want);
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            1,
            "no temporary file left"
        );
        let again = Compaction::read(&p).unwrap().unwrap();
        assert_eq!(again.records, 4, "compacting twice changes nothing");
        again.write().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), want);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_counted_fields_are_read_leniently() {
        let c = Counted::of(br#"{"url":"u","status":"x","status":201,"throttled":-1,"x":[1]}"#);
        assert_eq!(
            c,
            Counted {
                status: Some(201),
                throttled: 0,
                attempts: 0,
            },
            "the last status counts"
        );
        assert_eq!(Counted::of(br#"{"url":"u","status":70000}"#).status, None);
        assert_eq!(Counted::of(b"not json"), Counted::default());
    }

    #[test]
    fn a_compaction_that_cannot_be_written_leaves_the_file_as_it_was() {
        let d = temp_dir("compact-fails");
        let p = d.join("out.jsonl");
        let before = [A_INTERRUPTED, B_OK, A_500].join("\n") + "\n";
        std::fs::write(&p, &before).unwrap();
        // The temporary file's name is taken (by a directory): the new file cannot be
        // written, whoever runs the test (root writes into read-only directories).
        let tmp = d.join(format!(".out.jsonl.{}.tmp", std::process::id()));
        std::fs::create_dir(&tmp).unwrap();
        let c = Compaction::read(&p).unwrap().unwrap();
        assert_eq!(c.counts.total, 2, "the counts are known before the write");
        assert!(c.write().is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
        std::fs::remove_dir(&tmp).unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_compaction_cut_short_before_its_rename_leaves_the_file_whole() {
        let d = temp_dir("compact-cut");
        let p = d.join("out.jsonl");
        let before = [A_INTERRUPTED, B_OK, A_500].join("\n") + "\n";
        std::fs::write(&p, &before).unwrap();
        // Written but never committed (the process dies first): the old file stays.
        let mut w = Replacement::create(&p).unwrap();
        w.write_all(B_OK.as_bytes()).unwrap();
        drop(w);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_line_cut_inside_a_character_is_dropped_not_fatal() {
        let dir = temp_dir("cut-utf8");
        let input = dir.join("a.jsonl");
        let good = r#"{"url":"http://a/é","status":200,"error":null}"#;
        let mut bytes = format!("{good}\n").into_bytes();
        let cut = r#"{"url":"http://a/é"#.as_bytes();
        bytes.extend_from_slice(&cut[..cut.len() - 1]);
        std::fs::write(&input, bytes).unwrap();
        let out = dir.join("out.jsonl");
        dedupe(std::slice::from_ref(&input), &out).expect("the cut line is dropped");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), format!("{good}\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
