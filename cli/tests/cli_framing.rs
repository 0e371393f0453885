//! The `exitcrawl` program against raw-socket sites on loopback: a robots.txt whose body
//! ends when the server closes is read whole and obeyed, and a page cut short is recorded
//! as `incomplete_body`, retried, and written neither to `--bodies` nor to the WARC; a
//! site that links ever deeper is followed only to the default depth.

mod cli_support;
#[path = "../../actors/tests/raw_site/mod.rs"]
mod raw_site;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use cli_support::{assert_ok, config, json, records, run, run_list, run_out, s, TempDir};
use raw_site::{answer, page, Raw, Then};
use serde_json::Value;
use warc::{RecordType, WarcHeader, WarcReader};

/// The servers outlive any run of the program here.
const LIFE: Duration = Duration::from_secs(120);

fn sha256_hex(body: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The WARC's response records: target URI → HTTP message (head and payload).
fn warc_responses(path: &Path) -> HashMap<String, Vec<u8>> {
    WarcReader::from_path_gzip(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .iter_records()
        .map(|r| r.unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|r| r.warc_type() == &RecordType::Response)
        .map(|r| {
            let uri = r.header(WarcHeader::TargetURI).unwrap().into_owned();
            (uri, r.body().to_vec())
        })
        .collect()
}

/// Every file under the body store, by name.
fn stored_bodies(dir: &Path) -> HashMap<String, Vec<u8>> {
    let mut files = HashMap::new();
    let Ok(subdirs) = std::fs::read_dir(dir) else {
        return files;
    };
    for sub in subdirs.flatten() {
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = f.file_name().to_string_lossy().into_owned();
            files.insert(name, std::fs::read(f.path()).unwrap());
        }
    }
    files
}

#[test]
fn close_delimited_robots_is_obeyed_and_a_cut_page_is_not_archived() {
    // Site A: robots.txt `Disallow: /`, sent without a length, ended by the close.
    let a = Raw::start_in_thread(
        |_, line| {
            let bytes = if line.starts_with("GET /robots.txt ") {
                answer(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
                    b"User-agent: *\nDisallow: /\n",
                )
            } else {
                answer("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", b"no")
            };
            (bytes, Then::Close)
        },
        LIFE,
    );
    // Site B: no robots.txt; a whole page read until close, and one cut at 500 of 1000.
    let whole = page(3000);
    let cut = page(1000);
    let w = whole.clone();
    let b = Raw::start_in_thread(
        move |_, line| {
            let bytes = if line.starts_with("GET /whole ") {
                answer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", &w)
            } else if line.starts_with("GET /short ") {
                answer(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n",
                    &cut[..500],
                )
            } else {
                // Says it closes: a keep-alive answer whose connection the server then
                // closes leaves a dead connection in the client's pool, and a request
                // sent on it never reaches this server (a race this test is not about).
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            };
            (bytes, Then::Close)
        },
        LIFE,
    );

    let dir = TempDir::new("framing");
    let cfg = dir.file("c.toml", &config(""));
    let urls = [a.url("/"), a.url("/page"), b.url("/whole"), b.url("/short")];
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (out, warc, bodies) = (dir.path("o.jsonl"), dir.path("w.warc.gz"), dir.path("b"));
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--warc",
        s(&warc),
        "--bodies",
        s(&bodies),
        "--quiet",
    ]);
    assert_ok(&o);

    let recs = records(&out);
    assert_eq!(recs.len(), urls.len(), "one record per URL: {recs:?}");
    let by_url: HashMap<&str, &Value> = recs
        .iter()
        .map(|r| (r["url"].as_str().unwrap(), r))
        .collect();

    // Robots obeyed: site A saw its robots.txt and nothing else.
    for u in &urls[..2] {
        assert_eq!(by_url[u.as_str()]["skipped"], "robots", "{u}");
    }
    assert_eq!(a.seen().lines(), ["GET /robots.txt HTTP/1.1"]);

    // The whole page: its record, its stored body, its WARC response.
    let rec = by_url[urls[2].as_str()];
    assert_eq!(rec["status"], 200, "{rec}");
    assert_eq!(rec["bytes"], whole.len() as u64, "{rec}");
    assert_eq!(rec["sha256"], sha256_hex(&whole), "{rec}");

    // The cut page: an error, retried (config: max_retries 1), no body anywhere.
    let rec = by_url[urls[3].as_str()];
    let err = rec["error"].as_str().expect("an error");
    assert!(err.starts_with("incomplete_body: "), "{rec}");
    assert!(rec["status"].is_null() && rec["sha256"].is_null(), "{rec}");
    assert_eq!(rec["attempts"], 2, "{rec}");
    let short_requests = b
        .seen()
        .lines()
        .iter()
        .filter(|l| l.starts_with("GET /short "))
        .count();
    assert_eq!(short_requests, 2);

    // Every stored body is one a record names, and none is the part that came.
    let stored = stored_bodies(&bodies);
    assert_eq!(stored.get(&sha256_hex(&whole)), Some(&whole));
    for (name, body) in &stored {
        assert!(recs.iter().any(|r| r["sha256"] == name.as_str()), "{name}");
        assert_ne!(&body[..], &page(1000)[..500], "the cut part was stored");
    }

    let responses = warc_responses(&warc);
    let whole_msg = responses.get(&urls[2]).expect("the whole page's response");
    assert!(whole_msg.ends_with(&whole), "the WARC keeps the whole body");
    assert!(
        !responses.contains_key(&urls[3]),
        "the cut page has a WARC response"
    );
    for u in &urls[..2] {
        assert!(!responses.contains_key(u.as_str()), "{u} was archived");
    }
}

#[test]
fn hostile_redirects_are_refused_with_bounded_masked_errors() {
    // /long: a 100 KB Location with a token; /zero: a Location on port 0.
    let site = Raw::start_in_thread(
        |_, line| {
            let location = if line.starts_with("GET /long ") {
                format!("/{}?token=SECRET", "a".repeat(100_000))
            } else if line.starts_with("GET /zero ") {
                "http://127.0.0.1:0/x?token=SECRET".to_owned()
            } else {
                return (
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_vec(),
                    Then::Close,
                );
            };
            let head = format!(
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\
                 Connection: close\r\n\r\n"
            );
            (head.into_bytes(), Then::Close)
        },
        LIFE,
    );
    let dir = TempDir::new("redirects");
    let cfg = dir.file("c.toml", &config("\n[crawl]\nrobots = false\n"));
    let urls = [site.url("/long"), site.url("/zero")];
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (o, out) = run_out(&dir, &cfg, &list, &[]);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let recs = records(&out);
    assert_eq!(recs.len(), 2, "{recs:?}");
    for r in &recs {
        let err = r["error"]
            .as_str()
            .unwrap_or_else(|| panic!("an error: {r}"));
        assert!(err.chars().count() <= 1024, "{} characters", err.len());
        assert!(!err.contains("SECRET"), "{err}");
    }
    assert!(!stderr.contains("SECRET"), "a token in stderr");
    assert!(stderr.len() < 20_000, "stderr holds {} bytes", stderr.len());
    let zero = recs.iter().find(|r| r["url"] == urls[1].as_str()).unwrap();
    assert!(zero["error"].as_str().unwrap().contains("port 0"), "{zero}");
    // Nothing dialled port 0, and each URL was asked for as its attempts allow.
    let seen = site.seen();
    assert!(seen.lines().iter().all(|l| !l.contains(":0")));
}

#[test]
fn a_10_mb_robots_txt_is_read_from_its_first_500_kib() {
    // The rules first, then 10 MB of comments; a page allowed, a page disallowed.
    let site = Raw::start_in_thread(
        |_, line| {
            if line.starts_with("GET /robots.txt ") {
                let mut body = b"User-agent: *\nDisallow: /private/\n".to_vec();
                body.extend(std::iter::repeat_n(b"# padding\n", 1_000_000).flatten());
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n",
                    body.len()
                );
                return (answer(&head, &body), Then::Close);
            }
            (
                answer(
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n",
                    b"ok",
                ),
                Then::Close,
            )
        },
        LIFE,
    );
    let dir = TempDir::new("robots-big");
    let cfg = dir.file("c.toml", &config(""));
    let urls = [site.url("/open"), site.url("/private/x")];
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (o, out) = run_out(&dir, &cfg, &list, &[]);
    assert_ok(&o);
    let recs = records(&out);
    let by_url: HashMap<&str, &Value> = recs
        .iter()
        .map(|r| (r["url"].as_str().unwrap(), r))
        .collect();
    assert_eq!(by_url[urls[0].as_str()]["status"], 200, "{recs:?}");
    assert_eq!(by_url[urls[1].as_str()]["skipped"], "robots", "{recs:?}");
    assert!(
        by_url[urls[1].as_str()]["error"].is_null(),
        "disallowed, not unavailable"
    );
    let seen = site.seen();
    assert!(!seen.lines().iter().any(|l| l.contains("/private/")));
}

/// `?page=N` links `?page=N+1`, for ever: with the defaults, `--follow` stops at depth 20
/// (the seed is depth 0) and counts the link it did not follow.
#[test]
fn a_page_n_plus_1_trap_is_followed_to_the_default_depth_only() {
    let site = Raw::start_in_thread(
        |_, line| {
            let target = line.split(' ').nth(1).unwrap_or_default();
            let Some(n) = target.strip_prefix("/list?page=") else {
                let head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
                return (head.as_bytes().to_vec(), Then::KeepOpen);
            };
            let n: u64 = n.parse().unwrap_or(0);
            let body = format!(
                "<html><body><a href=\"/list?page={}\">next</a></body></html>",
                n + 1
            );
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            (answer(&head, body.as_bytes()), Then::KeepOpen)
        },
        LIFE,
    );
    let dir = TempDir::new("depth-trap");
    let cfg = dir.file("c.toml", &config(""));
    let list = dir.file("seeds.txt", &(site.url("/list?page=0") + "\n"));
    let (o, out, summary) = run_list(&dir, &cfg, &list, &["--follow", "--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 21, "{recs:?}");
    assert!(recs.iter().all(|r| r["status"] == 200), "{recs:?}");
    let pages: Vec<String> = site
        .seen()
        .lines()
        .iter()
        .filter(|l| l.contains("/list?page="))
        .map(|l| l.to_string())
        .collect();
    let expected: Vec<String> = (0..=20)
        .map(|n| format!("GET /list?page={n} HTTP/1.1"))
        .collect();
    let mut sorted = pages.clone();
    sorted.sort_by_key(|l| l.len());
    assert_eq!(sorted, expected, "the site saw pages 0..=20 only");
    let sum = json(&summary);
    assert_eq!(sum["skipped_scope"], 1, "{sum}");
}
