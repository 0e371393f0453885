//! A WARC series on disk across runs: `--resume` after files of the series were moved
//! away never reuses a name, and a second process on a series being written is refused.

mod cli_support;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Stdio};

use cli_support::{assert_ok, config, records, run, s, stderr, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};

/// The test hook that holds the program right after its Nth exchange is through to the
/// WARC file (see `warc::HOLD_AFTER`).
const HOLD: &str = "EXITCRAWL_TEST_HOLD_AFTER_WARC_EXCHANGE";

fn site() -> TestSite {
    let pages = Pages::new(|_host: &str, pq: &str| {
        let i: usize = pq.strip_prefix("/p/")?.parse().ok()?;
        Some(Page::html(format!("<html><body>page {i}</body></html>")))
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

/// A list of `/p/0` … `/p/{n - 1}` in `dir`.
fn list(dir: &TempDir, site: &TestSite, n: usize) -> std::path::PathBuf {
    let urls: Vec<String> = (0..n).map(|i| site.url(&format!("/p/{i}"))).collect();
    dir.file(&format!("urls-{n}.txt"), &(urls.join("\n") + "\n"))
}

/// The target URIs of the responses in the `.warc.gz` file `path`.
fn responses(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rest: &[u8] = &bytes;
    let mut uris = Vec::new();
    while !rest.is_empty() {
        let mut d = flate2::bufread::GzDecoder::new(rest);
        let mut m = Vec::new();
        std::io::Read::read_to_end(&mut d, &mut m).expect("a whole gzip member");
        rest = d.into_inner();
        let m = String::from_utf8_lossy(&m).into_owned();
        if m.contains("WARC-Type: response\r\n") {
            let uri = m.lines().find_map(|l| l.strip_prefix("WARC-Target-URI: "));
            uris.push(uri.expect("a target").to_owned());
        }
    }
    uris.sort();
    uris
}

/// `--resume` continues the series after the highest file there or named by the records,
/// whichever is later: a file moved away is never written again under its name.
#[test]
fn resume_after_the_first_files_were_moved_away_never_reuses_a_name() {
    let site = site();
    let dir = TempDir::new("warc-moved");
    let cfg = dir.file("c.toml", &config("\n[crawl]\nrobots = false\n"));
    let (out, warc) = (dir.path("o.jsonl"), dir.path("w.warc.gz"));
    let moved = dir.path("archived");
    std::fs::create_dir_all(&moved).unwrap();
    let crawl = |n: usize, resume: bool| {
        let urls = list(&dir, &site, n);
        let mut a = vec!["--config", s(&cfg), "--urls", s(&urls), "--out", s(&out)];
        a.extend(["--warc", s(&warc), "--quiet"]);
        if resume {
            a.push("--resume");
        }
        assert_ok(&run(&a));
    };
    let move_away = |name: &str| std::fs::rename(dir.path(name), moved.join(name)).unwrap();
    let url = |i: usize| site.url(&format!("/p/{i}"));
    crawl(2, false);
    crawl(4, true);
    move_away("w.warc.gz");
    crawl(6, true);
    assert!(!warc.exists(), "w.warc.gz was written again");
    assert_eq!(responses(&dir.path("w-00002.warc.gz")), [url(4), url(5)]);
    move_away("w-00001.warc.gz");
    move_away("w-00002.warc.gz");
    // No file of the series is left: the records name w-00002.warc.gz, the last one.
    crawl(8, true);
    assert!(!warc.exists(), "w.warc.gz was written again");
    assert!(!dir.path("w-00001.warc.gz").exists());
    assert!(!dir.path("w-00002.warc.gz").exists());
    assert_eq!(responses(&dir.path("w-00003.warc.gz")), [url(6), url(7)]);
    // The moved files hold what their records say.
    assert_eq!(responses(&moved.join("w.warc.gz")), [url(0), url(1)]);
    assert_eq!(responses(&moved.join("w-00001.warc.gz")), [url(2), url(3)]);
    let recs = records(&out);
    assert_eq!(recs.len(), 8);
    for r in &recs {
        let i: usize = r["url"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let file = [
            "w.warc.gz",
            "w-00001.warc.gz",
            "w-00002.warc.gz",
            "w-00003.warc.gz",
        ][i / 2];
        assert_eq!(r["warc_file"], file, "{r}");
    }
}

fn strs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

/// The program with `args`, once it holds after its first exchange (it said so).
fn spawn_held(args: &[&str]) -> Child {
    let mut child = cli_support::cmd(args)
        .env(HOLD, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn exitcrawl");
    let err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    for line in err.lines() {
        if line.expect("stderr").contains("held after WARC exchange") {
            return child;
        }
    }
    let o = child.wait_with_output().expect("wait");
    panic!("exitcrawl ended without holding: {o:?}");
}

/// Two processes writing one series would cut each other's file on `--resume` and mix
/// their files: while one writes it, another is refused (exit 2, the lock file named),
/// with or without `--resume`, and the series is left as the first has it.
#[test]
fn a_second_process_on_a_series_being_written_is_refused() {
    let site = site();
    let dir = TempDir::new("warc-lock");
    let cfg = dir.file("c.toml", &config("\n[crawl]\nrobots = false\n"));
    let urls = list(&dir, &site, 4);
    let warc = dir.path("w.warc.gz");
    let args = |out: &Path, resume: bool| -> Vec<String> {
        let mut a = vec!["--config", s(&cfg), "--urls", s(&urls), "--out", s(out)];
        a.extend(["--warc", s(&warc), "--quiet"]);
        if resume {
            a.push("--resume");
        }
        a.iter().map(|x| x.to_string()).collect()
    };
    let first = dir.path("first.jsonl");
    let mut held = spawn_held(&strs(&args(&first, false)));
    let live = std::fs::read(&warc).unwrap();
    for resume in [true, false] {
        let o = run(&strs(&args(&dir.path("second.jsonl"), resume)));
        assert_eq!(o.status.code(), Some(2), "resume {resume}: {o:?}");
        let err = stderr(&o);
        let lock = format!("{}.lock", warc.display());
        assert!(
            err.contains(&lock) && err.contains("another process"),
            "resume {resume}: {err}"
        );
        assert_eq!(std::fs::read(&warc).unwrap(), live, "resume {resume}");
        assert!(!dir.path("w-00001.warc.gz").exists(), "resume {resume}");
    }
    held.kill().expect("kill -9");
    let _ = held.wait();
    // The lock went with the process: the series goes on.
    assert_ok(&run(&strs(&args(&first, true))));
    assert_eq!(records(&first).len(), 4);
}
