//! What a run leaves of its outputs when it is refused or cannot write, through the
//! `exitcrawl` binary against a local test site: outputs are never destroyed by a run
//! refused at start, and a full or closed output ends the run with its cause.

mod cli_support;

use std::fs::File;
use std::io::Write;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::Duration;

use cli_support::{
    assert_ok, assert_refused, bytes, cmd, config, count, json, records, run, s, wait_bounded,
    TempDir, NO_ROBOTS,
};
use exitcrawl_testsite::{SiteConfig, TestSite};

// ---------------------------------------------------------------------------------------
// Outputs never destroy anything
// ---------------------------------------------------------------------------------------

#[test]
fn summary_naming_the_url_list_is_refused_and_the_list_is_kept() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("sum-urls");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let list = format!("{}\n{}\n", site.url("/a"), site.url("/b"));
    let urls = dir.file("urls.txt", &list);
    std::fs::hard_link(&urls, dir.path("hard.txt")).expect("hard link");
    std::os::unix::fs::symlink(&urls, dir.path("soft.txt")).expect("symlink");
    let dotted = dir.0.join(".").join("urls.txt");
    for alias in [
        urls.clone(),
        dotted,
        dir.path("hard.txt"),
        dir.path("soft.txt"),
    ] {
        let o = run(&[
            "--config",
            s(&cfg),
            "--urls",
            s(&urls),
            "--summary",
            s(&alias),
            "--quiet",
        ]);
        assert_refused(&o, 2, &["--summary", "--urls", "same file"]);
        assert_eq!(bytes(&urls), list.as_bytes(), "{}", alias.display());
    }
    assert_eq!(site.stats().requests, 0, "nothing fetched");
}

#[test]
fn out_naming_the_config_or_the_summary_is_refused() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("out-cfg");
    let cfg_text = config(NO_ROBOTS);
    let cfg = dir.file("c.toml", &cfg_text);
    let urls = dir.file("urls.txt", &format!("{}\n", site.url("/a")));
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&cfg),
        "--quiet",
    ]);
    assert_refused(&o, 2, &["--out", "--config", "same file"]);
    assert_eq!(bytes(&cfg), cfg_text.as_bytes(), "the config is kept");

    // --out and --summary the same file, existing or not: nothing is written to it.
    let both = dir.file("both.jsonl", "earlier record\n");
    let fresh = dir.path("fresh.jsonl");
    for target in [&both, &fresh] {
        let o = run(&[
            "--config",
            s(&cfg),
            "--urls",
            s(&urls),
            "--out",
            s(target),
            "--summary",
            s(target),
            "--quiet",
        ]);
        assert_refused(&o, 2, &["--summary", "--out", "same file"]);
    }
    assert_eq!(bytes(&both), b"earlier record\n");
    assert!(!fresh.exists(), "no file created");
    assert_eq!(site.stats().requests, 0, "nothing fetched");
}

#[test]
fn an_existing_out_survives_a_run_refused_at_start() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("out-kept");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let urls = dir.file("urls.txt", &format!("{}\n", site.url("/a")));
    let earlier = "{\"url\":\"http://x/\",\"status\":200}\n".repeat(3);
    let out = dir.file("out.jsonl", &earlier);
    let summary = dir.file("summary.json", "{\"total\":3}\n");

    // A typo in --urls.
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&dir.path("urlz.txt")),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--quiet",
    ]);
    assert_refused(&o, 2, &["--urls", "urlz.txt", "No such file"]);
    assert_eq!(bytes(&out), earlier.as_bytes());
    assert_eq!(bytes(&summary), b"{\"total\":3}\n");

    // The metrics port in use: the crawler cannot start.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = taken.local_addr().expect("addr").to_string();
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--metrics",
        &addr,
        "--quiet",
    ]);
    assert_refused(&o, 2, &[&addr]);
    assert_eq!(bytes(&out), earlier.as_bytes());
    assert_eq!(bytes(&summary), b"{\"total\":3}\n");
    assert_eq!(bytes(&urls), format!("{}\n", site.url("/a")).as_bytes());
    assert_eq!(site.stats().requests, 0, "nothing fetched");

    // The same command with the port free runs, and only then replaces --out.
    drop(taken);
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--quiet",
    ]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["status"], 200);
    assert_eq!(json(&summary)["total"], 1);
}

#[test]
fn a_bodies_directory_that_cannot_be_made_is_refused_and_the_warc_is_kept() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("bodies-refused");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let urls = dir.file(
        "urls.txt",
        &format!("{}\n{}\n", site.url("/a"), site.url("/b")),
    );
    let (out, warc) = (dir.path("out.jsonl"), dir.path("w.warc.gz"));
    let summary = dir.path("sum.json");
    let args = [
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--warc",
        s(&warc),
        "--summary",
        s(&summary),
        "--quiet",
    ];
    assert_ok(&run(&args));
    let (records_before, warc_before) = (bytes(&out), bytes(&warc));
    assert_eq!(records(&out).len(), 2);

    // A directory inside a regular file cannot be made.
    let file = dir.file("plain", "a file\n");
    let bodies = file.join("sub");
    let o = cmd(&args)
        .args(["--bodies", s(&bodies)])
        .output()
        .expect("run");
    assert_refused(&o, 2, &["--bodies", s(&bodies)]);
    let warc_after = bytes(&warc);
    assert!(
        warc_after == warc_before,
        "the WARC is not as the first run left it: {} bytes, were {}",
        warc_after.len(),
        warc_before.len()
    );
    assert_eq!(
        bytes(&out),
        records_before,
        "--out is as the first run left it"
    );
    assert_eq!(
        site.stats().requests,
        2,
        "nothing fetched by the refused run"
    );
}

#[test]
fn a_closed_or_full_stdout_is_exit_1_with_the_cause() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("stdout");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let urls = dir.file("urls.txt", &format!("{}\n", site.url("/a")));
    let out = dir.path("out.jsonl");
    let args = [
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--quiet",
    ];

    // The summary goes to stdout (no --summary), whose reader is gone (`| head -c0`).
    let mut child = cmd(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let o = wait_bounded(child, Duration::from_secs(60));
    assert_refused(&o, 1, &["writing the summary to stdout", "Broken pipe"]);
    assert_eq!(records(&out).len(), 1, "the records are written");

    // stdout full.
    let full = File::options()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = cmd(&args)
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert_refused(&o, 1, &["writing the summary to stdout", "No space left"]);
    // --out - to a full stdout: the records cannot be written.
    let full = File::options()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let o = cmd(&["--config", s(&cfg), "--urls", s(&urls), "--out", "-"])
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert_refused(&o, 1, &["No space left"]);
    assert_eq!(site.stats().requests, 3, "one fetch per run");
}

#[test]
fn a_read_error_on_the_url_list_keeps_the_records_and_the_summary_and_is_exit_1() {
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;

    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("read-error");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let out = dir.path("out.jsonl");
    let summary = dir.path("summary.json");
    let warc = dir.path("bodies.warc.gz");
    // stdin is a socket whose other end is closed with a byte it never read: Linux then
    // hands the reader the lines sent before, and ECONNRESET after them.
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    (&theirs)
        .write_all(b"x")
        .expect("a byte left unread at our end");
    let lines: String = ["/a", "/b", "/c"]
        .iter()
        .map(|p| format!("{}\n", site.url(p)))
        .collect();
    (&ours).write_all(lines.as_bytes()).expect("write the list");
    let child = cmd(&[
        "--config",
        s(&cfg),
        "--urls",
        "-",
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--warc",
        s(&warc),
        "--quiet",
    ])
    .stdin(Stdio::from(OwnedFd::from(theirs)))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    drop(ours);
    let o = wait_bounded(child, Duration::from_secs(60));
    assert_refused(&o, 1, &["reading --urls failed after 3 URLs", "--resume"]);
    let recs = records(&out);
    assert_eq!(recs.len(), 3, "a record per URL read: {recs:?}");
    assert_eq!(count(&recs, |r| r["status"] == 200), 3);
    assert_eq!(site.stats().requests, 3);
    let sum = json(&summary);
    assert_eq!(sum["total"], 3, "{sum}");
    assert_eq!(sum["ok"], 3, "{sum}");
    let responses = warc::WarcReader::from_path_gzip(&warc)
        .expect("the WARC file")
        .iter_records()
        .map(|r| r.expect("a whole WARC record"))
        .filter(|r| r.header(warc::WarcHeader::WarcType).as_deref() == Some("response"))
        .count();
    assert_eq!(responses, 3, "the archive agrees with the records");
}

/// `--summary -` with the demo, which prints its summary anyway: one JSON line on stdout.
#[test]
fn the_demo_with_the_summary_on_stdout_prints_it_once() {
    let o = run(&["--demo", "--demo-urls", "5", "--summary", "-", "--quiet"]);
    assert_ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one summary: {stdout}");
    let sum: serde_json::Value = serde_json::from_str(lines[0]).expect("the summary is JSON");
    assert_eq!(sum["total"], 5, "{sum}");
}

/// `--dedupe` inputs: one that cannot be opened, or a directory, is bad input (exit 2);
/// one whose reading fails once open (here `/proc/self/mem`, whose first page is not
/// mapped: EIO) is an I/O failure (exit 1). `--out` is left as it was either way.
#[test]
fn a_dedupe_input_that_fails_while_read_is_exit_1_and_a_bad_one_exit_2() {
    let dir = TempDir::new("dedupe-read-error");
    let good = dir.file(
        "a.jsonl",
        "{\"url\":\"http://127.0.0.1:9/\",\"status\":200}\n",
    );
    let out = dir.file("merged.jsonl", "kept\n");
    let mem = std::path::Path::new("/proc/self/mem");
    if std::fs::read(mem).is_ok() {
        eprintln!("/proc/self/mem reads here: no read error to test with");
        return;
    }
    for (input, code, needle) in [
        (mem, 1, "--dedupe /proc/self/mem: reading it failed"),
        (dir.0.as_path(), 2, "is a directory"),
        (dir.path("missing.jsonl").as_path(), 2, "missing.jsonl"),
    ] {
        let o = run(&["--dedupe", s(&good), "--dedupe", s(input), "--out", s(&out)]);
        assert_refused(&o, code, &[needle]);
        assert_eq!(bytes(&out), b"kept\n", "{input:?}: --out kept");
    }
}
