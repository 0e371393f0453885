//! `--resume` around a run: what it goes on from, read from `--out` before the outputs
//! open, and `--out` compacted to one record per URL after it.

use std::collections::HashSet;

use exitcrawl_actors::follow::Resume;

use super::args::RunArgs;
use super::dedupe::{Compaction, RecordCounts};
use super::output::cut_unfinished_line;
use super::resume::{read_resume, ResumeFailure};
use super::source::UrlSource;
use super::term::say;
use super::warc_series::NamedEnds;
use super::Failure;

/// What `--resume` goes on from: the URLs to skip (list mode) or what the crawl goes on
/// from (`--follow`), and what to say of it once the outputs are open.
pub struct Resuming {
    pub skip: HashSet<String>,
    pub resume: Resume,
    pub said: Option<String>,
    /// What the records name of the WARC series.
    pub warc_ends: NamedEnds,
}

/// `--resume`: the URLs to skip (list mode) or what the crawl goes on from (`--follow`).
pub fn prepare_resume(args: &RunArgs, follow: bool) -> Result<Resuming, Failure> {
    let none = || Resuming {
        skip: HashSet::new(),
        resume: Resume::default(),
        said: None,
        warc_ends: NamedEnds::new(),
    };
    if let (UrlSource::Frontier(_), Some(path)) = (&args.urls, &args.out) {
        // A consumer always appends (Redis knows what is done): only an unfinished last
        // line, from a consumer killed mid-write, is cut.
        let cut = cut_unfinished_line(path)
            .map_err(|e| Failure::Usage(format!("--out {}: {e}", path.display())))?;
        if cut > 0 {
            say(&format!(
                "--out {}: cut an unfinished last line ({cut} bytes) before appending",
                path.display()
            ));
        }
        return Ok(none());
    }
    let (true, Some(path)) = (args.resume, &args.out) else {
        return Ok(none());
    };
    // One that cannot be opened is bad input (exit 2); one whose reading fails once open
    // is an I/O failure (exit 1). Nothing was fetched or written yet either way.
    let state = read_resume(path).map_err(|e| match e {
        ResumeFailure::Open(e) => Failure::Usage(format!("--resume {}: {e}", path.display())),
        ResumeFailure::Read(e) => Failure::Output(format!(
            "--resume {}: reading it failed: {e} (nothing was fetched)",
            path.display()
        )),
    })?;
    if state.truncated > 0 {
        say(&format!(
            "--resume: cut an unfinished last line ({} bytes) off {}",
            state.truncated,
            path.display()
        ));
    }
    if let Some((at, why)) = &state.first_unreadable {
        say(&format!(
            "--resume: {} lines of {} are not records (the first, {at}: {why}); ignored",
            state.unreadable,
            path.display()
        ));
    }
    let mut nowhere = match state.sent_nowhere {
        0 => String::new(),
        n => format!(", {n} sent nowhere (no exit in service, a local failure)"),
    };
    if state.robots_unavailable > 0 {
        nowhere += &format!(
            ", {} skipped for an unavailable robots.txt",
            state.robots_unavailable
        );
    }
    let said = Some(format!(
        "--resume: {} records, {} URLs done, {} interrupted{nowhere} to fetch again",
        state.records,
        state.done.len(),
        state.interrupted
    ));
    if !follow {
        return Ok(Resuming {
            skip: state.done,
            resume: Resume::default(),
            said,
            warc_ends: state.warc_ends,
        });
    }
    if state.masked_links > 0 {
        say(&format!(
            "--resume: {} recorded links have masked credentials (***) and are not resumed",
            state.masked_links
        ));
    }
    // The seeds all go to the crawl, which knows which are done.
    let resume = Resume {
        done: state.done.into_iter().collect(),
        pages: state.pages,
        pending: state.links,
    };
    Ok(Resuming {
        skip: HashSet::new(),
        resume,
        said,
        warc_ends: state.warc_ends,
    })
}

/// After a resumed run: `--out` compacted to one record per URL. Returns what its records
/// count (for the summary; also when the compaction could not be written), and why the
/// compaction failed, if it did (`--out` is then as the run left it).
pub fn compact_out(args: &RunArgs) -> (Option<RecordCounts>, Option<String>) {
    let (true, Some(path), false) = (
        args.resume,
        &args.out,
        matches!(args.urls, UrlSource::Frontier(_)),
    ) else {
        return (None, None);
    };
    let failed = |records: String, e: &std::io::Error| {
        format!(
            "--resume: could not compact --out {}: {e}; it is left as it was ({records}; \
             `{} --dedupe {} --out FILE` writes one record per URL)",
            path.display(),
            super::prog(),
            path.display()
        )
    };
    let compaction = match Compaction::read(path) {
        Ok(Some(c)) => c,
        Ok(None) => return (None, None),
        Err(e) => return (None, Some(failed("not read".into(), &e))),
    };
    let counts = compaction.counts;
    let (records, lines, unreadable, truncated) = (
        compaction.records,
        compaction.lines(),
        compaction.unreadable,
        compaction.truncated,
    );
    if let Err(e) = compaction.write() {
        return (
            Some(counts),
            Some(failed(
                format!("{records} records, several for some URLs"),
                &e,
            )),
        );
    }
    let mut kept = String::new();
    if unreadable > 0 {
        kept.push_str(&format!(
            ", and the {unreadable} lines that are not records where they were"
        ));
    }
    if truncated > 0 {
        kept.push_str(&format!(
            "; an unfinished last line ({truncated} bytes) left out"
        ));
    }
    say(&format!(
        "--resume: --out {} compacted: {records} records to {} (one per URL){kept}",
        path.display(),
        lines as u64 - unreadable
    ));
    (Some(counts), None)
}
