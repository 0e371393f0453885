//! `exitcrawl`: fetch URLs through several egress IPs, politely; see `exitcrawl --help`.
//! Install with `cargo install --path actors`.

fn main() -> std::process::ExitCode {
    exitcrawl_actors::cli::main("exitcrawl")
}
