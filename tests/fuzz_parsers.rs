//! Fuzzing the parsers of untrusted input, within a time budget, on stable Rust.
//!
//! Why not `cargo fuzz`: it needs a nightly toolchain (sanitizer flags), and this project
//! builds with the one stable toolchain the machine has. This is a small mutational fuzzer
//! instead: each target starts from its seed corpus in `tests/fuzz/corpus/<target>/`,
//! mutates (flip, insert, delete, splice, dictionary tokens, repeat) and also tries random
//! bytes, for `EXITCRAWL_FUZZ_SECS` seconds per target (default 2; CI sets more). Every
//! input must come back without a panic and within 250 ms (1 s in a debug build: see
//! `harness::PER_INPUT`) — a parser of untrusted input
//! must neither crash nor hang. A failing input is written to `target/fuzz-failures/`
//! and named in the test's message, so it can be added to the corpus once fixed.
//!
//! The targets: URL normalisation and link resolution, the config loader, Retry-After /
//! RateLimit / X-RateLimit headers, robots.txt, and link extraction from HTML — which is also
//! compared with html5gum's tokenizer (`links_vs_html5gum`): a difference fails like a panic.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use exitcrawl::config::Settings;
use exitcrawl::discover::links::{extract_links_capped, raw_links};
use exitcrawl::discover::robots::Robots;
use exitcrawl::discover::{normalize, resolve};
use exitcrawl::headers::{parse_retry_after, ServerHints};
use exitcrawl::rng::{RandomSource, SplitMix64};

/// Tokens that mutations insert: the syntax these formats are made of.
const DICTIONARY: &[&[u8]] = &[
    b"\r\n",
    b"\n",
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
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xc3\xa9",
    b"\xe2\x80\x8b",
    b"\t",
    b" ",
    b"*",
    b"$",
];

/// Longest time one input may take.
const PER_INPUT: Duration = Duration::from_millis(250);

struct Fuzzer {
    rng: SplitMix64,
    corpus: Vec<Vec<u8>>,
}

impl Fuzzer {
    fn new(target: &str, seed: u64) -> Self {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fuzz/corpus")
            .join(target);
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
    fn next(&mut self) -> Vec<u8> {
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
fn fuzz(name: &str, target: impl Fn(&[u8])) -> u64 {
    fuzz_corpus(name, name, target)
}

/// [`fuzz`] with the seeds of another target (`corpus`); the inputs differ from that
/// target's, as the random sequence follows `name`.
fn fuzz_corpus(name: &str, corpus: &str, target: impl Fn(&[u8])) -> u64 {
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

fn save_failure(name: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}-{}", input.len()));
    let _ = std::fs::write(&path, input);
    path
}

fn text(input: &[u8]) -> String {
    String::from_utf8_lossy(input).into_owned()
}

#[test]
fn url_normalisation_and_resolution() {
    let base = normalize("http://example.com/a/b?c").expect("base");
    let n = fuzz("url", |input| {
        let s = text(input);
        if let Ok(u) = normalize(&s) {
            // Normalising is idempotent: a normal URL stays as it is.
            let again = normalize(u.as_str()).expect("a normalised URL normalises");
            assert_eq!(again, u);
        }
        let _ = resolve(&base, &s);
    });
    assert!(n > 0);
}

#[test]
fn config_loader() {
    let n = fuzz("config", |input| {
        // Any outcome is fine but a panic; errors must name something.
        if let Err(e) = Settings::from_toml_str(&text(input)) {
            assert!(!e.to_string().is_empty());
        }
    });
    assert!(n > 0);
}

#[test]
fn rate_limit_headers() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let n = fuzz("headers", |input| {
        let s = text(input);
        let fields: Vec<(&str, &str)> = s
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let hints = ServerHints::from_headers(fields.iter().copied(), now);
        if let Some(p) = hints.pacing() {
            let _ = p.interval();
        }
        for (_, v) in &fields {
            let _ = parse_retry_after(v, now);
        }
    });
    assert!(n > 0);
}

#[test]
fn robots_txt() {
    let url = normalize("http://example.com/private/x").expect("url");
    let n = fuzz("robots", |input| {
        let r = Robots::parse(input, "exitcrawl/0.1");
        let _ = r.allowed(&url);
        let _ = r.crawl_delay();
        let _ = r.sitemaps();
    });
    assert!(n > 0);
}

#[test]
fn link_extraction() {
    let page = normalize("http://example.com/dir/page.html").expect("url");
    let n = fuzz("links", |input| {
        let links = extract_links_capped(input, &page, 10_000);
        assert!(links.len() <= 10_000);
    });
    assert!(n > 0);
}

/// html5gum nests one call deeper per `name="value"` attribute (why we have our own
/// tokenizer, see src/discover/html.rs); an input with fewer `=` than this cannot overflow
/// even a 2 MiB debug test thread (~200 such attributes did).
const HTML5GUM_SAFE_EQUALS: usize = 50;

#[test]
fn links_vs_html5gum() {
    let compared = Cell::new(0u64);
    let n = fuzz_corpus("links_vs_html5gum", "links", |input| {
        let equals = input.iter().filter(|&&b| b == b'=').count();
        if equals >= HTML5GUM_SAFE_EQUALS || html5gum_known_wrong(input) {
            return;
        }
        compared.set(compared.get() + 1);
        assert_eq!(
            raw_links(input, 100),
            html5gum_links(input, 100),
            "raw (hrefs, base): ours (left) and html5gum's (right) differ"
        );
    });
    eprintln!(
        "links_vs_html5gum: {} of {n} inputs compared",
        compared.get()
    );
    assert!(compared.get() > n / 2, "most inputs are compared");
}

/// Inputs where html5gum 0.9 is known to be wrong, each listed in src/discover/html.rs:
/// its `naive_next_state` switches to RAWTEXT after `<noframe>` (no such element) and not
/// after `<noframes>`.
fn html5gum_known_wrong(input: &[u8]) -> bool {
    input
        .windows(b"<noframe".len())
        .any(|w| w.eq_ignore_ascii_case(b"<noframe"))
}

/// The raw hrefs and base as html5gum 0.9 tokenizes them (callback emitter, naive state
/// switching), read with the spec's rules as our tokenizer applies them: a start tag counts
/// once complete (`CloseStartTag`; EOF inside a tag drops it), the first `href` of a tag
/// wins, and `href` with an empty value or none is `""` (html5gum's callback emitter sends
/// no event for an empty value).
fn html5gum_links(html: &[u8], cap: usize) -> (Vec<String>, Option<String>) {
    use html5gum::emitters::callback::{CallbackEmitter, CallbackEvent};
    use html5gum::{Span, Tokenizer};

    let mut hrefs = Vec::new();
    let mut base = None;
    let mut tag: Option<Vec<u8>> = None; // the start tag being read
    let mut href: Option<Vec<u8>> = None; // its first href
    let mut in_first_href = false;
    let mut emitter = CallbackEmitter::new(|ev: CallbackEvent<'_>, _: Span<()>| -> Option<()> {
        match ev {
            CallbackEvent::OpenStartTag { name } => {
                tag = Some(name.to_vec());
                href = None;
                in_first_href = false;
            }
            CallbackEvent::AttributeName { name } => {
                in_first_href = tag.is_some() && href.is_none() && name == b"href";
                if in_first_href {
                    href = Some(Vec::new());
                }
            }
            CallbackEvent::AttributeValue { value } if in_first_href => {
                href = Some(value.to_vec());
            }
            CallbackEvent::CloseStartTag { .. } => {
                if let (Some(t), Some(h)) = (tag.take(), href.take()) {
                    let h = String::from_utf8_lossy(&h).into_owned();
                    match t.as_slice() {
                        b"a" if hrefs.len() < cap => hrefs.push(h),
                        b"base" if base.is_none() => base = Some(h),
                        _ => {}
                    }
                }
                in_first_href = false;
            }
            CallbackEvent::EndTag { .. } => {
                (tag, href, in_first_href) = (None, None, false);
            }
            _ => {}
        }
        None
    });
    emitter.naively_switch_states(true);
    for _ in Tokenizer::new_with_emitter(html, emitter) {}
    (hrefs, base)
}
