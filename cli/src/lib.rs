//! The `exitcrawl` program: fetch a list of URLs (or crawl from seeds, or consume a
//! shared Redis frontier) through the crawler's exits, write one JSON record per URL and
//! a JSON summary, and keep the pages as WARC files and content-addressed bodies.
//!
//! The installed `exitcrawl` binary (`src/main.rs`) and the workspace's `crawl` example
//! (`cargo run --example crawl`) are both [`main`]; only the name they print differs. The
//! flags, defaults, exit codes and file formats are a public contract (`--help`; and
//! docs/cli.md).
//!
//! One concept per file:
//! - [`flags`]: the flags as clap parses them, under `--help`'s headings; [`help`]: the
//!   text around them, wrapped to the terminal; [`args`]: the rules between flags;
//!   [`values`]: the flags' value parsers;
//! - [`source`]: the URL source (file, stdin, demo, a frontier's address) read on its own
//!   thread; [`seen`]: its duplicates, in bounded memory;
//! - [`record`]: the JSONL record and the running totals; [`summary`]: the summary;
//!   [`closing`]: its table on a terminal; [`report`]: `--report`'s HTML, from the
//!   summary and the [`breakdown`] counted as records are written;
//! - [`output`]: `--out`/`--summary` files; [`paths`]: no output is an input or another
//!   output; [`resume`]: what `--resume` reads back; [`resuming`]: `--resume` around a
//!   run;
//! - [`robots`]: robots.txt and Crawl-delay for the list and frontier modes ([`origin`]:
//!   a URL's origin and path without parsing it);
//! - [`archive`]: what is kept of an answer: [`warc`] files ([`warc_series`]: the series
//!   on disk, [`warc_repair`]: cut back to what the records name), [`bodies`], the
//!   record's `final_url`, `content_type`, `sha256` and the answer's place in the WARC;
//! - [`fetch`]: one URL from robots.txt to its record;
//! - [`list`]: the streaming loop over a URL list; [`follow`]: `--follow`;
//!   [`frontier`]: `--enqueue` and the frontier's Redis, [`consumer`]: `--frontier`;
//!   [`dedupe`]: one record per URL (`--dedupe`, and `--out` after `--resume`);
//! - [`signals`], [`progress`], [`logging`], [`demo`]; [`term`]: stderr, above the
//!   progress bar; [`run`] puts a crawl together, [`ended`]: how it ended.
//!
//! No two modules import each other, directly or through others: `tests/module_graph.rs`
//! fails on a circle.
//!
//! Every URL written to `--out`, to WARC headers or to stderr goes through
//! `exitcrawl::redact::mask_url`.

#![warn(missing_docs)]

mod archive;
mod args;
mod bodies;
mod breakdown;
mod closing;
mod consumer;
mod date;
mod dedupe;
mod demo;
mod ended;
mod fetch;
mod flags;
mod follow;
mod help;
mod list;
mod logging;
mod origin;
mod output;
mod overrides;
mod paths;
mod progress;
mod record;
mod report;
mod resume;
mod resuming;
mod robots;
mod run;
mod seen;
mod shared_frontier;
mod signals;
mod source;
mod summary;
mod term;
mod values;
mod warc;
mod warc_repair;
mod warc_series;

/// The readers of untrusted files, reachable from the fuzz targets
/// (`tests/fuzz_readers.rs`): not an API.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::resume::{read_records, ResumeState};
    pub use super::source::{read_url_list, Line, MAX_LINE};
}

use std::process::ExitCode;
use std::sync::OnceLock;

use std::io::Write;

use clap::{CommandFactory, FromArgMatches};

use args::{Cli, Command};
use ended::Ended;

/// Exit code of an interrupted run (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Why a run stopped early: bad input (exit 2) or an output failure (exit 1).
#[derive(Debug)]
pub(crate) enum Failure {
    Usage(String),
    Output(String),
}

static PROG: OnceLock<&'static str> = OnceLock::new();

/// The program's name as it prints it (`crawl` or `exitcrawl`).
pub(crate) fn prog() -> &'static str {
    PROG.get().copied().unwrap_or("exitcrawl")
}

/// Run the program with the process's arguments; `name` is what it calls itself in
/// messages, `--help` and `--version`.
pub fn main(name: &'static str) -> ExitCode {
    let _ = PROG.set(name);
    // Large bodies and glibc's heap trimming: see exitcrawl_net::process.
    exitcrawl_net::process::keep_freed_memory(64 << 20);
    // A socket per kept connection and per request: see exitcrawl_net::process.
    exitcrawl_net::process::raise_open_files();
    let mut cmd = Cli::command()
        .name(name)
        .bin_name(name)
        .override_usage(help::usage(name))
        .term_width(help::width());
    let parsed = cmd
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|mut m| Cli::from_arg_matches_mut(&mut m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            let text = help::wrap(&e.render().to_string(), help::width(), name);
            return print_help(&text, name);
        }
        Err(e) => {
            // --version ends here too (exit 0); argument errors exit 2.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let command = match args::validate(cli) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("{name}: {msg}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Completions(shell) => return completions(shell, &mut cmd, name),
        Command::Enqueue {
            urls,
            frontier,
            recrawl,
        } => actix_rt::System::new()
            .block_on(shared_frontier::enqueue(&urls, &frontier, recrawl))
            .and_then(|n| {
                let line = format!("enqueued {} skipped {}\n", n.added, n.skipped);
                output::write_stdout(line.as_bytes())
                    .map_err(|e| Failure::Output(format!("writing to stdout: {e}")))?;
                Ok(Ended::Complete)
            }),
        Command::Dedupe { inputs, out } => dedupe::dedupe(&inputs, &out).map(|()| Ended::Complete),
        Command::Run(args) => {
            if let Err(msg) = logging::init(args.log_format) {
                eprintln!("{name}: {msg}");
                return ExitCode::from(2);
            }
            actix_rt::System::new().block_on(run::run(*args))
        }
    };
    match result {
        Ok(Ended::Complete) => ExitCode::SUCCESS,
        Ok(Ended::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Ok(Ended::Stopped(msg)) => {
            eprintln!("{name}: {msg}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(msg)) => {
            eprintln!("{name}: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Output(msg)) => {
            eprintln!("{name}: {msg}");
            ExitCode::from(1)
        }
    }
}

/// `--help`/`-h` on stdout; a closed pipe (`| head`) is not an error.
fn print_help(text: &str, name: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: writing the help: {e}");
            ExitCode::from(1)
        }
    }
}

/// `completions SHELL`: the script on stdout. clap_complete panics when its writer fails,
/// so it writes to memory first; a closed pipe (`| head`) is not an error.
fn completions(shell: clap_complete::Shell, cmd: &mut clap::Command, name: &str) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, name, &mut script);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: writing the completion script: {e}");
            ExitCode::from(1)
        }
    }
}
