//! `--dedupe IN... --out OUT`: merge results files into one record per URL.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use super::output::open_output;
use super::progress::say;
use super::record::INTERRUPTED;
use super::resume::SeenRecord;
use super::Failure;

/// One record per URL — its last final record (error not "interrupted"), else its last
/// interrupted one, else its last `skipped: "duplicate"` one (a repeated line's record
/// only points at another) — in order of first appearance. Lines that are not records
/// (e.g. a line cut by a hard kill) are dropped and counted.
pub fn dedupe(inputs: &[PathBuf], out: &Path) -> Result<(), Failure> {
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
    let mut w = open_output(out, false)
        .map_err(|e| Failure::Usage(format!("--out {}: {e}", out.display())))?;
    for url in &order {
        writeln!(w, "{}", best[url].0)
            .map_err(|e| Failure::Output(format!("writing --out: {e}")))?;
    }
    w.flush()
        .map_err(|e| Failure::Output(format!("writing --out: {e}")))?;
    say(&format!(
        "--dedupe: {read} records, {} URLs written, {dropped} unreadable lines dropped",
        order.len()
    ));
    Ok(())
}
