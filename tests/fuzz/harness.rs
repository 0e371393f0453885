//! The mutational fuzzer shared by the fuzz targets of both crates: `tests/fuzz_parsers.rs`
//! (the core's parsers) and `actors/tests/fuzz_readers.rs` (the `exitcrawl` binary's
//! readers of untrusted files), each including it with `#[path = ...] mod harness;`.
//!
//! Why not `cargo fuzz`: it needs a nightly toolchain (sanitizer flags), and this project
//! builds with the one stable toolchain the machine has. This is a small mutational fuzzer
//! instead: each target starts from its seed corpus in `tests/fuzz/corpus/<target>/`,
//! mutates (flip, insert, delete, splice, dictionary tokens, repeat) and also tries random
//! bytes, for `EXITCRAWL_FUZZ_SECS` seconds per target (default 2; CI sets more). Every
//! input must come back without a panic and within 250 ms — a parser of untrusted input
//! must neither crash nor hang. A failing input is written to `target/fuzz-failures/`
//! and named in the test's message, so it can be added to the corpus once fixed.

// Each crate's targets use part of it.
#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use exitcrawl::rng::{RandomSource, SplitMix64};

/// Tokens that mutations insert: the syntax these formats are made of.
pub const DICTIONARY: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b"\0",
    b":",
    b"=",
    b";",
    b",",
    b"/",
    b"?",
    b"#",
    b"@",
    b"[",
    b"]",
    b"{",
    b"}",
    b"%",
    b"%00",
    b"%ff",
    b"..",
    b"\"",
    b"'",
    b"<",
    b">",
    b"<a href=\"",
    b"Retry-After: ",
    b"RateLimit: limit=",
    b"X-RateLimit-Reset: ",
    b"User-agent: *",
    b"Disallow: ",
    b"Allow: ",
    b"Crawl-delay: ",
    b"Sitemap: ",
    b"[[exits]]",
    b"[limiter]",
    b"name = ",
    b"source_ip = ",
    b"http://",
    b"https://",
    b"xn--",
    b"::",
    b"0",
    b"-1",
    b"99999999999999999999999",
    b"1e308",
    b"NaN",
    b"inf",
    b"null",
    b"true",
    b"{\"url\":\"",
    b"\"error\":\"interrupted\"",
    b"\"skipped\":\"duplicate\"",
    b"\"links\":[\"",
    b"\"depth\":",
    b"\\u0000",
    b"\\ud800",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xc3\xa9",
    b"\xe2\x80\x8b",
    b"\t",
    b" ",
    b"*",
    b"$",
];

/// Longest time one input may take. The check is for hangs and blow-ups (work that
/// grows faster than the input), not for speed: an unoptimised build runs parsers 10–20×
/// slower than a release build (a 4.5 KB robots.txt of 200 `$` rules, whose matchers are
/// compiled regexes: 40 ms in debug, 2 ms in release, over 250 ms in debug on a busy
/// machine), so debug builds get four times longer.
pub const PER_INPUT: Duration = if cfg!(debug_assertions) {
    Duration::from_millis(1000)
} else {
    Duration::from_millis(250)
};

/// The folder holding `tests/fuzz/` — the workspace root, whichever crate's test this is.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("tests/fuzz/corpus").is_dir())
        .expect("tests/fuzz/corpus above the crate")
}

pub struct Fuzzer {
    rng: SplitMix64,
    pub corpus: Vec<Vec<u8>>,
}

impl Fuzzer {
    pub fn new(target: &str, seed: u64) -> Self {
        let dir = root().join("tests/fuzz/corpus").join(target);
        let mut corpus: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| std::fs::read(e.expect("corpus entry").path()).expect("readable"))
            .collect();
        assert!(!corpus.is_empty(), "{} holds no seeds", dir.display());
        corpus.push(Vec::new());
        Self {
            rng: SplitMix64::new(seed),
            corpus,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n.max(1) as u64) as usize
    }

    /// The next input: a seed, mutated a few times, or (1 in 16) random bytes.
    pub fn next(&mut self) -> Vec<u8> {
        if self.below(16) == 0 {
            let n = self.below(512);
            return (0..n).map(|_| self.rng.next_u64() as u8).collect();
        }
        let pick = self.below(self.corpus.len());
        let mut v = self.corpus[pick].clone();
        for _ in 0..1 + self.below(8) {
            let at = self.below(v.len() + 1);
            match self.below(7) {
                0 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] ^= 1 << self.below(8);
                }
                1 => v.insert(at, self.rng.next_u64() as u8),
                2 if at < v.len() => {
                    let end = (at + 1 + self.below(16)).min(v.len());
                    v.drain(at..end);
                }
                3 => {
                    let t = DICTIONARY[self.below(DICTIONARY.len())];
                    v.splice(at..at, t.iter().copied());
                }
                4 => {
                    // Splice in a piece of another seed.
                    let pick = self.below(self.corpus.len());
                    let other = self.corpus[pick].clone();
                    let from = self.below(other.len() + 1);
                    let to = (from + self.below(64)).min(other.len());
                    v.splice(at..at, other[from..to].iter().copied());
                }
                5 if !v.is_empty() && v.len() < 64 * 1024 => {
                    // Repeat a piece: long lines, deep nesting, many fields.
                    let from = self.below(v.len());
                    let to = (from + 1 + self.below(32)).min(v.len());
                    let piece = v[from..to].to_vec();
                    for _ in 0..self.below(200) {
                        v.splice(at..at, piece.iter().copied());
                    }
                }
                _ => v.truncate(at),
            }
        }
        v
    }
}

/// Run `target` on inputs for the time budget; every input must return within
/// [`PER_INPUT`] without panicking. Returns how many inputs were tried.
pub fn fuzz(name: &str, target: impl Fn(&[u8])) -> u64 {
    fuzz_corpus(name, name, target)
}

/// [`fuzz`] with the seeds of another target (`corpus`); the inputs differ from that
/// target's, as the random sequence follows `name`.
pub fn fuzz_corpus(name: &str, corpus: &str, target: impl Fn(&[u8])) -> u64 {
    let secs: f64 = std::env::var("EXITCRAWL_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0);
    let budget = Duration::from_secs_f64(secs);
    let mut f = Fuzzer::new(corpus, 0x5eed ^ name.len() as u64);
    let started = Instant::now();
    let mut tried = 0u64;
    // Every seed first, as it is.
    let seeds = f.corpus.clone();
    let mut seeds = seeds.into_iter();
    while started.elapsed() < budget || tried < f.corpus.len() as u64 {
        let input = seeds.next().unwrap_or_else(|| f.next());
        let t = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| target(&input)));
        let took = t.elapsed();
        tried += 1;
        if outcome.is_err() || took > PER_INPUT {
            let path = save_failure(name, &input);
            panic!(
                "fuzz target {name}: input {} {} ({:?}); saved to {}",
                String::from_utf8_lossy(&input).escape_debug(),
                if outcome.is_err() {
                    "panicked"
                } else {
                    "took too long"
                },
                took,
                path.display()
            );
        }
    }
    eprintln!(
        "fuzz {name}: {tried} inputs in {:.1} s, no panic, none over {PER_INPUT:?}",
        started.elapsed().as_secs_f64()
    );
    tried
}

pub fn save_failure(name: &str, input: &[u8]) -> PathBuf {
    let dir = root().join("target/fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}-{}", input.len()));
    let _ = std::fs::write(&path, input);
    path
}
