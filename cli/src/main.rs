//! `exitcrawl`: fetch URLs through several egress IPs, politely; see `exitcrawl --help`.
//! Install with `cargo install --path cli`.

fn main() -> std::process::ExitCode {
    exitcrawl_cli::main("exitcrawl")
}
