//! `--out` and `--summary` destinations: a file (truncated, or appended to with
//! `--resume`) or stdout for `-`.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::rc::Rc;

use serde::Serialize;

/// `--out`, shared by the crawl loop and the signal task (which flushes it on a second
/// Ctrl-C before exiting). Everything runs on the System's one thread.
pub type SharedOut = Rc<RefCell<Option<Box<dyn Write>>>>;

/// A file (truncated, or appended to), or stdout for `-`.
pub fn open_output(path: &Path, append: bool) -> io::Result<Box<dyn Write>> {
    if path == Path::new("-") {
        Ok(Box::new(io::stdout().lock()))
    } else if append {
        let f = OpenOptions::new().append(true).create(true).open(path)?;
        Ok(Box::new(BufWriter::new(f)))
    } else {
        Ok(Box::new(BufWriter::new(File::create(path)?)))
    }
}

/// One JSON line.
pub fn write_line(w: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *w, value)?;
    w.write_all(b"\n")
}

/// Flush `--out` if there is one.
pub fn flush(out: &SharedOut) -> Result<(), String> {
    match out.borrow_mut().as_mut() {
        Some(w) => w.flush().map_err(|e| format!("writing --out: {e}")),
        None => Ok(()),
    }
}
