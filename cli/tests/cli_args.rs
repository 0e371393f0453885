//! The `exitcrawl` binary's command line: `--help`, `--version`, shell completions, and
//! errors that name the flag, the value and what is allowed (exit 2).

mod cli_support;

use cli_support::{assert_ok, config, run, s, stderr, TempDir};

const FLAGS: &[&str] = &[
    "--config",
    "--urls",
    "--out",
    "--summary",
    "--resume",
    "--grace",
    "--metrics",
    "--quiet",
    "--log-format",
    "--demo",
    "--demo-urls",
    "--follow",
    "--ignore-robots",
    "--frontier",
    "--enqueue",
    "--claim-idle",
    "--idle-exit",
    "--dedupe",
    "--warc",
    "--warc-max-bytes",
    "--bodies",
];

#[test]
fn help_version_and_completions() {
    let o = run(&["--help"]);
    assert_ok(&o);
    let help = String::from_utf8_lossy(&o.stdout);
    for flag in FLAGS.iter().chain(&["--help", "--version", "completions"]) {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    for section in ["ROBOTS.TXT:", "STOPPING:", "EXIT STATUS:"] {
        assert!(help.contains(section), "--help lacks {section}");
    }

    let o = run(&["--version"]);
    assert_ok(&o);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("exitcrawl {}", env!("CARGO_PKG_VERSION"))
    );

    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef exitcrawl"),
        ("fish", "complete -c exitcrawl"),
    ] {
        let o = run(&["completions", shell]);
        assert_ok(&o);
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        for flag in ["warc-max-bytes", "ignore-robots", "dedupe"] {
            assert!(script.contains(flag), "{shell} completion lacks {flag}");
        }
    }
    let o = run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("tcsh") && stderr(&o).contains("bash"));
}

#[test]
fn bad_values_name_the_flag_the_value_and_what_is_allowed() {
    let dir = TempDir::new("args");
    let cfg = dir.file("c.toml", &config(""));
    let urls = dir.file("u.txt", "http://127.0.0.1:1/\n");
    let base = ["--config", s(&cfg), "--urls", s(&urls)];
    for (extra, needles) in [
        (
            &["--warc", "out.zip"][..],
            &["--warc", "out.zip", ".warc.gz"][..],
        ),
        (
            &["--warc", "o.warc.gz", "--warc-max-bytes", "0"][..],
            &["--warc-max-bytes", "'0'", "K, M or G"][..],
        ),
        (
            &["--warc-max-bytes", "1M"][..],
            &["--warc-max-bytes only goes with --warc"][..],
        ),
        (&["--grace", "-3"][..], &["--grace", "-3", "0 to 86400"][..]),
        (
            &["--log-format", "xml"][..],
            &["--log-format", "xml", "text", "json"][..],
        ),
        (&["--bodies", "-"][..], &["--bodies", "not a directory"][..]),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        for n in needles {
            assert!(
                stderr(&o).contains(n),
                "{extra:?}: no {n:?} in {}",
                stderr(&o)
            );
        }
    }
    // An output that cannot be created is an argument error too, found before any fetch.
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--warc",
        "/nonexistent-dir/x.warc.gz",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/nonexistent-dir/x.warc.gz"),
        "{}",
        stderr(&o)
    );
}

/// The everyday settings as flags: each sets its key (here `--retries 0`: one attempt at a
/// closed port, where the default would make four), and a value out of range exits 2
/// naming the flag and the key it sets.
#[test]
fn everyday_flags_set_their_keys_and_name_themselves_when_out_of_range() {
    let dir = TempDir::new("everyday-flags");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let urls = dir.file("urls.txt", &format!("http://127.0.0.1:{port}/x\n"));
    let out = dir.path("out.jsonl");
    let o = run(&[
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--ignore-robots",
        "--retries",
        "0",
        "--timeout",
        "2",
        "--concurrency",
        "4",
        "--max-rps",
        "50",
    ]);
    assert_ok(&o);
    let recs = cli_support::records(&out);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["attempts"], 1, "{}", recs[0]);
    assert!(recs[0]["error"].is_string(), "{}", recs[0]);

    for (args, flag, range) in [
        (
            &["--concurrency", "0"][..],
            "--concurrency (sets crawler.concurrency)",
            "1..=100000",
        ),
        (
            &["--max-rps", "-1"][..],
            "--max-rps (sets limiter.max_rps)",
            "",
        ),
        (
            &["--retries", "101"][..],
            "--retries (sets crawler.max_retries)",
            "0..=100",
        ),
        (
            &["--timeout", "0"][..],
            "--timeout (sets crawler.timeout_ms)",
            "",
        ),
    ] {
        let mut all = vec!["--urls", "-"];
        all.extend_from_slice(args);
        let o = run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(flag) && err.contains(range), "{args:?}: {err}");
    }
}
