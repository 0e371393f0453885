//! The `exitcrawl` binary's command line: `--help`, `--version`, shell completions, and
//! errors that name the flag, the value and what is allowed (exit 2).

mod cli_support;

use cli_support::{assert_ok, cmd, config, run, s, stderr, TempDir};

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

/// Each heading of `--help` and the flags under it, in order.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "Input:",
        &["--config", "--urls", "--sitemap", "--no-dedupe", "[URL]..."],
    ),
    (
        "Output and archive:",
        &[
            "--out",
            "--resume",
            "--summary",
            "--report",
            "--warc",
            "--warc-max-bytes",
            "--bodies",
            "--dedupe",
        ],
    ),
    (
        "Exits and requests:",
        &["--exit", "--proxy", "--proxies", "--header", "--user-agent"],
    ),
    (
        "Politeness and limits:",
        &[
            "--concurrency",
            "--max-rps",
            "--initial-rps",
            "--timeout",
            "--retries",
            "--ignore-robots",
            "--grace",
        ],
    ),
    (
        "Crawling:",
        &["--follow", "--depth", "--scope", "--max-pages"],
    ),
    (
        "Distributed (Redis frontier):",
        &[
            "--frontier",
            "--enqueue",
            "--recrawl",
            "--claim-idle",
            "--idle-exit",
            "--redis-wait",
        ],
    ),
    ("Observability:", &["--quiet", "--metrics", "--log-format"]),
    ("Demo:", &["--demo", "--demo-urls"]),
];

/// `flag` (`-h` or `--help`) at `COLUMNS=columns`, checked to fit.
fn help_at(flag: &str, columns: usize) -> String {
    let o = cmd(&[flag])
        .env("COLUMNS", columns.to_string())
        .output()
        .expect("run exitcrawl");
    assert_ok(&o);
    let help = String::from_utf8(o.stdout).expect("UTF-8 help");
    for line in help.lines() {
        assert!(
            line.chars().count() <= columns,
            "{flag} at {columns} columns: {} columns: {line:?}",
            line.chars().count()
        );
    }
    help
}

/// The sections of a help text: each heading with the lines under it, up to the next
/// heading (a line that starts in column 0 and ends with ':') or other text in column 0.
fn sections(help: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            out.push((line, Vec::new()));
        } else if !line.is_empty() && !line.starts_with(' ') {
            // Text in column 0 (the legend after the flags) ends a section.
            out.push(("", Vec::new()));
        } else if let Some((_, lines)) = out.last_mut() {
            if !line.trim().is_empty() {
                lines.push(line);
            }
        }
    }
    out
}

/// A flag's line (`  -o, --out <FILE>  …`, `      --resume`, `  [URL]...`): its long
/// name; `None` for a line of help text.
fn flag_of(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start().len();
    let first = line.trim_start();
    if indent > 6 || !(first.starts_with('-') || first.starts_with('[')) {
        return None;
    }
    first
        .split_whitespace()
        .find(|w| w.starts_with("--") || w.starts_with('['))
}

#[test]
fn help_is_grouped_under_headings_and_fits_the_terminal() {
    for columns in [80, 60] {
        let long = help_at("--help", columns);
        let short = help_at("-h", columns);
        for help in [&long, &short] {
            let found = sections(help);
            for (heading, flags) in GROUPS {
                let (_, lines) = found
                    .iter()
                    .find(|(h, _)| h == heading)
                    .unwrap_or_else(|| panic!("no heading {heading}:\n{help}"));
                let listed: Vec<&str> = lines.iter().filter_map(|l| flag_of(l)).collect();
                assert_eq!(&listed, flags, "under {heading}");
            }
        }
        assert!(long.contains("NAME allowed R/s") && long.contains("38 done, 120 found"));
        assert!(
            short.contains("allowed"),
            "-h has the progress legend: {short}"
        );
    }
    // At 80 columns -h gives each flag one line: no line of help text under a heading.
    let short = help_at("-h", 80);
    for (heading, lines) in sections(&short) {
        if GROUPS.iter().any(|(h, _)| *h == heading) {
            for l in lines {
                assert!(flag_of(l).is_some(), "under {heading}, not a flag: {l:?}");
            }
        }
    }
    // The short flags parse as their long forms.
    let o = run(&[
        "-c",
        "/nonexistent/c.toml",
        "-u",
        "-",
        "-o",
        "-",
        "-f",
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/c.toml"), "{}", stderr(&o));
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
            "--max-rps -1: -1 requests a second is out of range",
            "(more than 0, at most 1000000; sets limiter.max_rps)",
        ),
        (
            &["--retries", "101"][..],
            "--retries (sets crawler.max_retries)",
            "0..=100",
        ),
        (
            &["--timeout", "0"][..],
            "--timeout 0: 0 seconds is out of range",
            "(0.001 to 3600; sets crawler.timeout_ms)",
        ),
        (
            &["--timeout", "100000"][..],
            "--timeout 100000: 100000 seconds",
            "(0.001 to 3600; sets crawler.timeout_ms)",
        ),
        (
            &["--scope", "galaxy"][..],
            "--scope",
            "same_host, same_domain, any",
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

/// `EXITCRAWL__SECTION__KEY` overrides count without `--config` too: one sets its key,
/// and one that names no key is refused, named.
#[test]
fn environment_overrides_count_without_a_config_file() {
    let dir = TempDir::new("env-no-config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let urls = dir.file("urls.txt", &format!("http://127.0.0.1:{port}/x\n"));
    let out = dir.path("out.jsonl");
    let args = ["--urls", s(&urls), "--out", s(&out), "--ignore-robots"];
    let o = cli_support::cmd(&args)
        .env("EXITCRAWL__CRAWLER__MAX_RETRIES", "0")
        .output()
        .expect("run exitcrawl");
    assert_ok(&o);
    let recs = cli_support::records(&out);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["attempts"], 1, "no retry: {}", recs[0]);

    let o = cli_support::cmd(&args)
        .env("EXITCRAWL__CRAWLER__CONCURENCY", "4")
        .output()
        .expect("run exitcrawl");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("EXITCRAWL__CRAWLER__CONCURENCY"),
        "{}",
        stderr(&o)
    );
}

/// `--dedupe` and `--enqueue` take a few flags of their own: any other is refused (exit 2),
/// named, rather than ignored, and nothing is written.
#[test]
fn dedupe_and_enqueue_refuse_the_flags_they_do_not_use() {
    let dir = TempDir::new("alone");
    let input = dir.file(
        "a.jsonl",
        "{\"url\":\"http://127.0.0.1:9/\",\"status\":200}\n",
    );
    let urls = dir.file("u.txt", "http://127.0.0.1:9/\n");
    let merged = dir.path("b.jsonl");
    let (summary, report) = (dir.path("s.json"), dir.path("r.html"));
    let others: &[&[&str]] = &[
        &["--summary", s(&summary)],
        &["--report", s(&report)],
        &["--resume"],
        &["--follow"],
        &["--concurrency", "5"],
        &["--exit", "127.0.0.2"],
        &["--proxy", "http://127.0.0.1:9"],
        &["--retries", "1"],
        &["--grace", "1"],
        &["--metrics", "127.0.0.1:9"],
        &["--quiet"],
        &["--log-format", "json"],
        &["--ignore-robots"],
        &["--no-dedupe"],
        &["--depth", "1"],
    ];
    for extra in others {
        let mut args = vec!["--dedupe", s(&input), "--out", s(&merged)];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("--dedupe only goes with --out") && err.contains(extra[0]),
            "{args:?}: {err}"
        );
        assert!(!merged.exists(), "{args:?}: --out written");
        assert!(!summary.exists() && !report.exists(), "{args:?}");

        let mut args = vec!["--enqueue", s(&urls), "--frontier", "redis://127.0.0.1:9/q"];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("--enqueue only goes with --frontier") && err.contains(extra[0]),
            "{args:?}: {err}"
        );
    }
}

/// A rate flag out of range is named as given, with its value: not as a key it moved.
#[test]
fn a_rate_flag_out_of_range_names_itself_and_its_value() {
    for (flag, value) in [
        ("--initial-rps", "0"),
        ("--initial-rps", "2000000"),
        ("--max-rps", "0"),
        ("--max-rps", "-1"),
        ("--max-rps", "2000000"),
    ] {
        let o = run(&["--urls", "-", flag, value]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(&format!("{flag} {value}")),
            "{flag} {value}: {err}"
        );
        assert!(err.contains("at most 1000000"), "{flag} {value}: {err}");
        let other = if flag == "--max-rps" {
            "initial"
        } else {
            "max"
        };
        assert!(
            !err.contains("min_rps") && !err.contains(&format!("--{other}-rps")),
            "{flag} {value}: another flag or key named: {err}"
        );
    }
}

/// A numeric flag whose value is not a number of its kind (negative, a fraction, too
/// large for it) says what it takes: its key's range.
#[test]
fn a_numeric_flag_that_is_not_a_number_says_what_it_takes() {
    for (flag, value, allowed) in [
        (
            "--concurrency",
            "5000000000",
            "a whole number in 1..=100000",
        ),
        ("--concurrency", "-1", "a whole number in 1..=100000"),
        ("--retries", "1.5", "a whole number in 0..=100"),
        ("--depth", "-3", "a whole number in 0..=100000"),
        ("--max-pages", "x", "a whole number in 1..=10000000000"),
        ("--max-rps", "fast", "more than 0, at most 1000000"),
        ("--initial-rps", "", "more than 0, at most 1000000"),
        ("--timeout", "soon", "0.001 to 3600"),
    ] {
        let o = run(&["--urls", "-", &format!("{flag}={value}")]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains(value) && err.contains(allowed),
            "{flag} {value}: {err}"
        );
    }
}
