//! `crawl` — the `exitcrawl` program under the name the design gives it:
//!
//! ```text
//! cargo run --release --example crawl -- --config crawl.toml --urls urls.txt \
//!     --out results.jsonl --summary summary.json
//! cargo run --release --example crawl -- --demo
//! ```
//!
//! The program is the `exitcrawl-cli` crate (`cli/`, installed as `exitcrawl` with
//! `cargo install --path cli`); see `--help` and docs/cli.md.

fn main() -> std::process::ExitCode {
    exitcrawl_cli::main("crawl")
}
