//! `crawl` — the `exitcrawl` program under the name the design gives it:
//!
//! ```text
//! cargo run --release --example crawl -- --config crawl.toml --urls urls.txt \
//!     --out results.jsonl --summary summary.json
//! cargo run --release --example crawl -- --demo
//! ```
//!
//! The program lives in `exitcrawl_actors::cli` (installed as `exitcrawl` with
//! `cargo install --path actors`); see `--help` and the README's "The crawl binary".

fn main() -> std::process::ExitCode {
    exitcrawl_actors::cli::main("crawl")
}
