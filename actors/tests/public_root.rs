//! The public root of `exitcrawl_actors` stays small: the names `lib.rs` makes public
//! (`pub mod NAME`, `pub use …::{A, B}`, `pub use a::B`) are exactly the list below, so a
//! new public name is a decision made here, in review, not a side effect. What each name
//! is for is in the crate docs (`cargo doc -p exitcrawl-actors --no-deps`);
//! `examples/embed.rs` is an application that uses only the root.

use std::collections::BTreeSet;

/// The embedding API (the crawler, its handle, a fetch and its answers, the settings),
/// the `http` types it speaks, and following links.
const ROOT: &[&str] = &[
    // The crawler and its handle.
    "Crawler",
    "CrawlerHandle",
    "StartError",
    "Settings",
    // A fetch and what comes back.
    "Fetch",
    "FetchResponse",
    "FetchError",
    "FetchErrorKind",
    "Headers",
    "ExitStats",
    "Metrics",
    "HostLimits",
    "LaneLimits",
    // Redirects followed above the exit, a hop at a time, by a caller that admits each
    // one itself (the robots.txt gate does; the program's list mode too).
    "RedirectChain",
    "RedirectHop",
    "ChainStep",
    // For other actors that send `Fetch` as a message.
    "SchedulerActor",
    // The `http` crate the HTTP types come from.
    "http",
    "HeaderMap",
    "Method",
    // Facts of the wire the program records.
    "ACCEPT_ENCODING",
    "MAX_URL_BYTES",
    // Following links.
    "follow",
];

/// The names `src` makes public at the top level, read from its `pub mod` and `pub use`
/// items (outside comments; `pub(crate)` is not public).
fn public_names(src: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut item = String::new();
    for line in src.lines() {
        let line = line.trim();
        if line.starts_with("//") {
            continue;
        }
        if item.is_empty() && !(line.starts_with("pub mod ") || line.starts_with("pub use ")) {
            continue;
        }
        // A `pub use` may span lines until its `;`.
        item.push_str(line);
        item.push(' ');
        if !line.ends_with(';') {
            continue;
        }
        let body = item
            .trim_start_matches("pub mod ")
            .trim_start_matches("pub use ")
            .trim()
            .trim_end_matches(';')
            .to_string();
        item.clear();
        let leaves = match body.split_once('{') {
            Some((_, list)) => list.trim_end_matches('}').to_string(),
            None => body.rsplit("::").next().unwrap_or(&body).to_string(),
        };
        for leaf in leaves.split(',') {
            let leaf = leaf.trim();
            let name = match leaf.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => leaf.rsplit("::").next().unwrap_or(leaf),
            };
            if !name.is_empty() {
                names.insert(name.to_string());
            }
        }
    }
    names
}

#[test]
fn the_public_root_is_the_listed_names() {
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs"))
        .expect("read src/lib.rs");
    let got = public_names(&lib);
    let want: BTreeSet<String> = ROOT.iter().map(|s| s.to_string()).collect();
    let added: Vec<_> = got.difference(&want).collect();
    let gone: Vec<_> = want.difference(&got).collect();
    assert!(
        added.is_empty() && gone.is_empty(),
        "public root changed: new {added:?}, missing {gone:?}; a new public name is listed here on purpose"
    );
}

#[test]
fn the_reader_sees_modules_uses_lists_and_aliases() {
    let src = "\
//! pub mod commented;
pub mod a;
mod private;
pub(crate) mod internal;
pub use x::B;
pub use y::{C, D as E,
    z::F};
pub(crate) use w::G;
";
    let got: Vec<_> = public_names(src).into_iter().collect();
    assert_eq!(got, ["B", "C", "E", "F", "a"]);
}
