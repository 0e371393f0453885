//! `--dedupe IN... --out OUT`: merge results files into one record per URL.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use super::output::{write_stdout, Replacement};
use super::paths::{check_distinct, Named};
use super::record::INTERRUPTED;
use super::resume::SeenRecord;
use super::term::say;
use super::Failure;

/// One record per URL — its last final record (error not "interrupted"), else its last
/// interrupted one, else its last `skipped: "duplicate"` one (a repeated line's record
/// only points at another) — in order of first appearance. Lines that are not records
/// (e.g. a line cut by a hard kill) are dropped and counted.
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
    let mut order: Vec<String> = Vec::new();
    let mut best: HashMap<String, (String, u8)> = HashMap::new();
    let (mut read, mut dropped) = (0u64, 0u64);
    for path in inputs {
        let f = File::open(path)
            .map_err(|e| Failure::Usage(format!("--dedupe {}: {e}", path.display())))?;
        for line in BufReader::new(f).lines() {
            let line =
                line.map_err(|e| Failure::Usage(format!("--dedupe {}: {e}", path.display())))?;
            if line.trim().is_empty() {
                continue;
            }
            let Ok(r) = serde_json::from_str::<SeenRecord>(&line) else {
                dropped += 1;
                continue;
            };
            read += 1;
            let rank = if r.is_duplicate() {
                0
            } else if r.error.as_deref() == Some(INTERRUPTED) {
                1
            } else {
                2
            };
            match best.get_mut(&r.url) {
                Some(slot) => {
                    if rank >= slot.1 {
                        *slot = (line, rank);
                    }
                }
                None => {
                    order.push(r.url.clone());
                    best.insert(r.url, (line, rank));
                }
            }
        }
    }
    // The merge replaces --out in one step: until it is complete, the old file stays.
    let written = if out == Path::new("-") {
        let mut all = Vec::new();
        for url in &order {
            all.extend_from_slice(best[url].0.as_bytes());
            all.push(b'\n');
        }
        write_stdout(&all)
    } else {
        let mut w = Replacement::create(out)
            .map_err(|e| Failure::Usage(format!("--out {}: {e}", out.display())))?;
        order
            .iter()
            .try_for_each(|url| writeln!(w, "{}", best[url].0))
            .and_then(|()| w.commit())
    };
    written.map_err(|e| Failure::Output(format!("writing --out: {e}")))?;
    say(&format!(
        "--dedupe: {read} records, {} URLs written, {dropped} unreadable lines dropped",
        order.len()
    ));
    Ok(())
}
