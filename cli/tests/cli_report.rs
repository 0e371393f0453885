//! `--report FILE.html`: rendered from a real crawl of two local hosts (one limited) and a
//! closed port, its figures read back from the `data-*` attributes and checked against
//! what each host's server counted; then loaded by headless Chromium (the distribution's
//! `/usr/bin/chromium`, which CI installs), which must draw it without console errors.

mod cli_support;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cli_support::{
    assert_ok, config, json, limited_and_open, records, run, s, spawn, wait_bounded, TempDir,
};
use exitcrawl_testsite::{Rate, SiteConfig, TestSite};

const CHROMIUM: &str = "/usr/bin/chromium";
/// A path with characters HTML gives a meaning to, that a request line may carry.
const NASTY_PATH: &str = "/p/a&b'c";

/// The value of `attr="…"` in the element whose opening tag has `key="value"`.
fn attr(html: &str, key: &str, value: &str, attr: &str) -> Option<String> {
    let at = html.find(&format!("{key}=\"{value}\""))?;
    let tag_start = html[..at].rfind('<')?;
    let tag = &html[tag_start..tag_start + html[tag_start..].find('>')?];
    let rest = &tag[tag.find(&format!(" {attr}=\""))? + attr.len() + 3..];
    Some(rest[..rest.find('"')?].to_owned())
}

fn num(html: &str, key: &str, value: &str, name: &str) -> u64 {
    attr(html, key, value, name)
        .unwrap_or_else(|| panic!("{name} of {key}={value} in the report"))
        .parse()
        .expect("a number")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A port on 127.0.1.3 nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.1.3:0").expect("bind");
    l.local_addr().unwrap().port()
}

#[test]
fn the_report_shows_what_each_host_counted_and_chromium_draws_it() {
    let (limited, open) = limited_and_open(Rate::per_second(8, 1), "127.0.1.1", "127.0.1.2");
    let dir = TempDir::new("report");
    let mut list = String::new();
    for i in 0..6 {
        list += &(limited.url(&format!("/p/{i}")) + "\n");
    }
    for i in 0..2 {
        list += &(open.url(&format!("/p/{i}")) + "\n");
    }
    list += &(open.url(NASTY_PATH) + "\n");
    list += &format!("http://127.0.1.3:{}/gone\n", closed_port());
    let urls = dir.file("urls.txt", &list);
    let (out, summary, report) = (
        dir.path("out.jsonl"),
        dir.path("summary.json"),
        dir.path("report.html"),
    );
    let o = run(&[
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--report",
        s(&report),
        "--ignore-robots",
        "--initial-rps",
        "20",
        "--retries",
        "0",
        "--exit",
        "127.0.0.2",
        "--exit",
        "127.0.0.3",
    ]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 10);
    let html = std::fs::read_to_string(&report).expect("the report");
    check_figures(&html, &limited, &open, &json(&summary));
    check_escaped(&html, &recs);
    check_in_chromium(&dir, &report);
}

/// The hosts' rows against their servers, the timeline and status classes against the
/// records, the exits against the summary.
fn check_figures(html: &str, limited: &TestSite, open: &TestSite, sum: &serde_json::Value) {
    let mut throttled = 0;
    for (site, name, pages) in [(limited, "127.0.1.1", 6), (open, "127.0.1.2", 3)] {
        let seen = site.stats();
        let row = |a| num(html, "data-host", name, a);
        assert_eq!(row("data-urls"), pages, "{name}");
        assert_eq!(row("data-ok"), pages, "{name}");
        assert_eq!(row("data-requests"), seen.requests, "{name}: {seen:?}");
        assert_eq!(row("data-throttled"), seen.limited, "{name}: {seen:?}");
        throttled += seen.limited;
    }
    assert!(throttled > 0, "the limited host throttled");
    check_host_rates(html, limited, open);
    assert_eq!(num(html, "id", "timeline", "data-ok"), 9);
    assert_eq!(num(html, "id", "timeline", "data-failed"), 1);
    assert_eq!(num(html, "id", "timeline", "data-throttled"), throttled);
    assert_eq!(num(html, "data-class", "2xx", "data-count"), 9);
    assert_eq!(num(html, "data-class", "none", "data-count"), 1);
    assert_eq!(num(html, "data-kind", "connect_refused", "data-count"), 1);
    assert_eq!(num(html, "id", "totals", "data-total"), 10);
    assert_eq!(num(html, "id", "totals", "data-throttled"), throttled);
    for e in sum["per_exit"].as_array().expect("per_exit") {
        let name = e["name"].as_str().unwrap();
        for field in ["requests", "ok", "throttled", "errors"] {
            let shown = num(html, "data-exit", name, &format!("data-{field}"));
            assert_eq!(Some(shown), e[field].as_u64(), "{name} {field}");
        }
    }
}

/// The rate chart of host `name`: its `<svg>` element, whole.
fn rate_chart<'a>(html: &'a str, name: &str) -> &'a str {
    html.match_indices("<svg class=\"chart host-rate\"")
        .map(|(at, _)| &html[at..at + html[at..].find("</svg>").expect("closed")])
        .find(|svg| svg[..svg.find('>').unwrap()].contains(&format!("data-host=\"{name}\"")))
        .unwrap_or_else(|| panic!("a rate chart of {name}"))
}

/// The sum of `data-n` over the elements of `svg` that start with `open`.
fn sum_n(svg: &str, open: &str) -> u64 {
    svg.match_indices(open)
        .map(|(at, _)| {
            let tag = &svg[at..at + svg[at..].find('>').unwrap()];
            let v = &tag[tag.find(" data-n=\"").expect("data-n") + 9..];
            v[..v.find('"').unwrap()].parse::<u64>().expect("a number")
        })
        .sum()
}

/// Each host's rate chart: its bars add up to the requests its server saw, its throttle
/// marks to the throttles it sent.
fn check_host_rates(html: &str, limited: &TestSite, open: &TestSite) {
    for (site, name) in [(limited, "127.0.1.1"), (open, "127.0.1.2")] {
        let seen = site.stats();
        let svg = rate_chart(html, name);
        let head = |a: &str| {
            let v = &svg[svg.find(&format!(" {a}=\"")).expect(a) + a.len() + 3..];
            v[..v.find('"').unwrap()].parse::<u64>().expect("a number")
        };
        assert_eq!(head("data-requests"), seen.requests, "{name}: {svg}");
        assert_eq!(head("data-throttled"), seen.limited, "{name}: {svg}");
        let bars = sum_n(svg, "<rect class=\"bar plain rate\"");
        assert_eq!(bars, seen.requests, "{name}'s bars: {svg}");
        let marks = sum_n(svg, "<line class=\"throttle-mark\"");
        assert_eq!(marks, seen.limited, "{name}'s throttle marks: {svg}");
    }
    assert!(
        rate_chart(html, "127.0.1.1").contains("<line class=\"throttle-mark\""),
        "the limited host's throttles are marked"
    );
    assert!(!rate_chart(html, "127.0.1.2").contains("throttle-mark"));
}

/// The URL with HTML's characters is shown, escaped; nothing of it is markup.
fn check_escaped(html: &str, recs: &[serde_json::Value]) {
    let nasty = recs
        .iter()
        .filter_map(|r| r["url"].as_str())
        .find(|u| u.ends_with(NASTY_PATH))
        .expect("the record of the nasty URL");
    assert!(html.contains(&esc(nasty)), "{nasty} shown escaped");
    assert!(!html.contains("a&b"), "a raw & in the report");
    assert!(!html.contains("b'c"), "a raw ' in the report");
    assert!(!html.to_ascii_lowercase().contains("<script"), "a script");
    assert!(!html.contains(nasty), "{nasty} shown raw");
}

/// Run Chromium with `args` on `page`, stdout and stderr to files; killed after 60 s.
fn chromium(dir: &TempDir, tag: &str, args: &[&str], page: &Path) -> (Output, PathBuf) {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is needed (apt-get install chromium; .ci/run installs it)"
    );
    let (so, se) = (
        dir.path(&format!("{tag}.out")),
        dir.path(&format!("{tag}.err")),
    );
    let profile = dir.path(&format!("{tag}-profile"));
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&so).unwrap())
        .stderr(File::create(&se).unwrap())
        .spawn()
        .expect("start chromium");
    let until = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {tag} ran over 60 s: {}", read(&se));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let o = Output {
        status,
        stdout: std::fs::read(&so).unwrap_or_default(),
        stderr: std::fs::read(&se).unwrap_or_default(),
    };
    (o, so)
}

fn read(p: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
}

/// The console lines of Chromium's log that are errors.
fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect()
}

fn check_in_chromium(dir: &TempDir, report: &Path) {
    let png = dir.path("report.png");
    let shot = format!("--screenshot={}", png.display());
    let (o, _) = chromium(dir, "shot", &[&shot], report);
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "chromium --screenshot: {log}");
    assert_eq!(console_errors(&log), Vec::<&str>::new(), "{log}");
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let (w, h) = (
        u32::from_be_bytes(bytes[16..20].try_into().unwrap()),
        u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1200, 2000), "the window's size");
    // A blank page of this size compresses to a few KB; the charts and tables do not.
    assert!(
        bytes.len() > 30_000,
        "{} bytes: a near-empty page",
        bytes.len()
    );

    let (o, _) = chromium(dir, "dom", &["--dump-dom"], report);
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "chromium --dump-dom: {log}");
    assert_eq!(console_errors(&log), Vec::<&str>::new(), "{log}");
    let dom = String::from_utf8_lossy(&o.stdout);
    for id in ["timeline", "exit-share", "status-classes"] {
        assert!(
            dom.contains(&format!("<svg id=\"{id}\"")),
            "svg {id} in the DOM"
        );
    }
    assert_eq!(dom.matches("<polyline").count(), 3, "the timeline's lines");
    assert!(dom.contains("<table id=\"hosts\">"), "the hosts' table");
    assert_eq!(dom.matches("<tr class=\"host\"").count(), 3, "its rows");
    assert_eq!(
        dom.matches("<svg class=\"chart host-rate\"").count(),
        3,
        "a rate chart per host"
    );
    assert!(
        dom.contains("<line class=\"throttle-mark\""),
        "throttles marked"
    );
}

#[test]
fn ctrl_c_writes_the_report_of_what_was_recorded() {
    // Each answer takes 300 ms: 40 URLs, 8 at a time, outlast the records awaited below.
    let site = TestSite::start(SiteConfig {
        latency: Duration::from_millis(300),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("report-int");
    let cfg = dir.file("crawl.toml", &config(""));
    let list: String = (0..40)
        .map(|i| site.url(&format!("/r/{i}")) + "\n")
        .collect();
    let urls = dir.file("urls.txt", &list);
    let (out, report) = (dir.path("out.jsonl"), dir.path("report.html"));
    let child = spawn(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&dir.path("summary.json")),
        "--report",
        s(&report),
        "--ignore-robots",
        "--grace",
        "0",
    ]);
    let until = Instant::now() + Duration::from_secs(20);
    // Whole lines only: the program may be writing the next one.
    let written = || std::fs::read(&out).map_or(0, |b| b.iter().filter(|c| **c == b'\n').count());
    while written() < 8 {
        assert!(Instant::now() < until, "no records yet");
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let o = wait_bounded(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "{}", cli_support::stderr(&o));
    let recs = records(&out);
    assert!(recs.len() < 40, "the crawl was stopped: {}", recs.len());
    let html = std::fs::read_to_string(&report).expect("the report after Ctrl-C");
    let ok = recs.iter().filter(|r| r["status"] == 200).count() as u64;
    let interrupted = recs.iter().filter(|r| r["error"] == "interrupted").count() as u64;
    assert_eq!(num(&html, "id", "totals", "data-total"), recs.len() as u64);
    assert_eq!(num(&html, "id", "totals", "data-ok"), ok);
    assert_eq!(num(&html, "id", "totals", "data-interrupted"), interrupted);
    assert_eq!(num(&html, "id", "timeline", "data-ok"), ok);
    assert!(html.contains("interrupted"), "the page says so");
}

/// After `--resume` the totals count the compacted `--out` (the whole crawl) while the
/// sections below them count this run's records: the page says which part covers what,
/// and each part agrees with what it says it covers.
#[test]
fn after_resume_each_part_of_the_report_says_what_it_covers() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("report-resume");
    let first: String = (0..3)
        .map(|i| site.url(&format!("/r/{i}")) + "\n")
        .collect();
    let more: String = (3..5)
        .map(|i| site.url(&format!("/r/{i}")) + "\n")
        .collect();
    let (out, summary, report) = (
        dir.path("out.jsonl"),
        dir.path("summary.json"),
        dir.path("report.html"),
    );
    let crawl = |list: &str, extra: &[&str]| {
        let urls = dir.file("urls.txt", list);
        let mut args = vec![
            "--urls",
            s(&urls),
            "--out",
            s(&out),
            "--summary",
            s(&summary),
            "--ignore-robots",
            "--exit",
            "127.0.0.2",
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_ok(&o);
    };
    crawl(&first, &[]);
    crawl(
        &(first.clone() + &more),
        &["--resume", "--report", s(&report)],
    );
    assert_eq!(records(&out).len(), 5);
    let html = std::fs::read_to_string(&report).expect("the report");
    // The whole crawl.
    assert_eq!(
        attr(&html, "id", "totals", "data-resumed").as_deref(),
        Some("true")
    );
    assert_eq!(num(&html, "id", "totals", "data-total"), 5);
    assert_eq!(num(&html, "id", "totals", "data-ok"), 5);
    // This run: the two URLs it fetched, in its own figures and in every section.
    assert_eq!(num(&html, "id", "this-run", "data-total"), 2);
    assert_eq!(num(&html, "id", "this-run", "data-ok"), 2);
    assert_eq!(num(&html, "id", "this-run", "data-skipped"), 3);
    assert_eq!(num(&html, "id", "timeline", "data-ok"), 2);
    assert_eq!(num(&html, "data-class", "2xx", "data-count"), 2);
    assert_eq!(num(&html, "data-host", "127.0.0.1", "data-urls"), 2);
    let sections = html.matches("<h2").count();
    let this_run = html.matches("<h2 data-covers=\"this-run\">").count();
    assert!(sections >= 8, "{html}");
    assert_eq!(this_run, sections, "every section below the totals: {html}");
    assert!(html.contains("— this run</h2>"), "{html}");
}
