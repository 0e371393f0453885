//! `exitcrawl --warc … --bodies …` against a local site, the output read back by parts
//! independent of the writer: the `warc` crate's parser (on libflate's gzip), RustCrypto's
//! `sha1`, `data-encoding`'s base32 — checked against the bodies the site sent and the
//! requests it saw.

mod cli_support;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cli_support::{assert_ok, config, records, run, s, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use serde_json::Value;
use sha1::Digest as _;
use warc::{RecordType, WarcHeader, WarcReader};

/// Pages served: `/p/{i}` HTML of growing size (up to ~30 KiB of letters that gzip does
/// not shrink much), `/r/{i}` redirects to `/p/{i}`, `/robots.txt` disallows `/private/`,
/// anything else 404.
fn page_body(i: usize) -> String {
    let mut x = i as u64 + 1;
    let text: String = (0..i * i * 36)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            char::from(b'a' + (x >> 59) as u8 % 26)
        })
        .collect();
    format!("<html><body>page {i}\n{text}</body></html>")
}

fn site(log: Arc<Mutex<Vec<String>>>) -> TestSite {
    let pages = Pages::new(move |_host: &str, pq: &str| {
        log.lock().unwrap().push(pq.to_owned());
        if pq == "/robots.txt" {
            return Some(Page::text("User-agent: *\nDisallow: /private/\n"));
        }
        if let Some(i) = pq.strip_prefix("/r/") {
            return Some(Page::redirect(302, format!("/p/{i}")));
        }
        let i: usize = pq.strip_prefix("/p/")?.parse().ok()?;
        Some(Page::html(page_body(i)))
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

/// The body the site sends for `path` (the test site's 404 says "not found").
fn expected_body(path: &str) -> Vec<u8> {
    match path.strip_prefix("/p/").and_then(|i| i.parse().ok()) {
        Some(i) => page_body(i).into_bytes(),
        None => b"not found".to_vec(),
    }
}

fn sha1_base32(body: &[u8]) -> String {
    data_encoding::BASE32.encode(&sha1::Sha1::digest(body))
}

fn sha256_hex(body: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A WARC file's records, read with the `warc` crate.
fn read_warc(path: &Path) -> Vec<warc::Record<warc::BufferedBody>> {
    WarcReader::from_path_gzip(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .iter_records()
        .map(|r| r.unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// The gzip members of a file, each decompressed on its own.
fn gzip_members(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut rest: &[u8] = &bytes;
    let mut members = Vec::new();
    while !rest.is_empty() {
        let mut d = flate2::bufread::GzDecoder::new(rest);
        let mut out = Vec::new();
        d.read_to_end(&mut out).expect("a whole gzip member");
        rest = d.into_inner();
        members.push(out);
    }
    members
}

/// Split an HTTP message into its head lines and its body.
fn http_parts(block: &[u8]) -> (Vec<String>, Vec<u8>) {
    let end = block
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP head");
    let head = String::from_utf8(block[..end].to_vec()).expect("ASCII head");
    (
        head.split("\r\n").map(str::to_owned).collect(),
        block[end + 4..].to_vec(),
    )
}

fn header(r: &warc::Record<warc::BufferedBody>, name: &str) -> Option<String> {
    r.header(WarcHeader::from(name)).map(|v| v.into_owned())
}

struct Run {
    _dir: TempDir,
    recs: Vec<Value>,
    warcs: Vec<PathBuf>,
    bodies: PathBuf,
}

fn crawl(site: &TestSite, n: usize) -> Run {
    let dir = TempDir::new("warc");
    let cfg = dir.file("c.toml", &config(""));
    let mut urls: Vec<String> = (0..n).map(|i| site.url(&format!("/p/{i}"))).collect();
    urls.extend((0..3).map(|i| site.url(&format!("/r/{i}"))));
    urls.push(site.url("/missing"));
    urls.push(site.url("/private/x"));
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (out, warc, bodies) = (dir.path("o.jsonl"), dir.path("w.warc.gz"), dir.path("b"));
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--summary",
        s(&dir.path("sum.json")),
        "--warc",
        s(&warc),
        "--warc-max-bytes",
        "16K",
        "--bodies",
        s(&bodies),
        "--quiet",
    ]);
    assert_ok(&o);
    let mut warcs = vec![warc];
    for i in 1.. {
        let p = dir.path(&format!("w-{i:05}.warc.gz"));
        if !p.exists() {
            break;
        }
        warcs.push(p);
    }
    Run {
        recs: records(&out),
        warcs,
        bodies,
        _dir: dir,
    }
}

/// The WARC records read back: responses by record id (target URI, payload), requests by
/// the id of the response they go with (target URI, HTTP head lines).
#[derive(Default)]
struct Pairs {
    responses: HashMap<String, (String, Vec<u8>)>,
    requests: HashMap<String, (String, Vec<String>)>,
}

impl Pairs {
    /// Read every file, checking its framing: one gzip member per record, and a warcinfo
    /// record first that names the file.
    fn read(warcs: &[PathBuf]) -> Self {
        let mut pairs = Self::default();
        for path in warcs {
            let members = gzip_members(path);
            let recs = read_warc(path);
            assert_eq!(members.len(), recs.len(), "one gzip member per record");
            for m in &members {
                assert!(m.starts_with(b"WARC/1.1\r\n") && m.ends_with(b"\r\n\r\n"));
            }
            assert_eq!(
                *recs[0].warc_type(),
                RecordType::WarcInfo,
                "{}",
                path.display()
            );
            assert_eq!(
                header(&recs[0], "WARC-Filename").as_deref(),
                path.file_name().and_then(|f| f.to_str())
            );
            let mut ids_here = Vec::new();
            for rec in &recs[1..] {
                pairs.add(rec, &recs[0], &mut ids_here);
            }
        }
        pairs
    }

    /// One record after the warcinfo: its fields (address, warcinfo, exit, digests)
    /// checked; a request must be in its response's file (`ids_here`: the responses
    /// read from that file so far).
    fn add(
        &mut self,
        rec: &warc::Record<warc::BufferedBody>,
        warcinfo: &warc::Record<warc::BufferedBody>,
        ids_here: &mut Vec<String>,
    ) {
        let uri = header(rec, "WARC-Target-URI").expect("target");
        assert_eq!(header(rec, "WARC-IP-Address").as_deref(), Some("127.0.0.1"));
        assert_eq!(
            header(rec, "WARC-Warcinfo-ID"),
            Some(warcinfo.warc_id().to_owned())
        );
        let exit = header(rec, "Exitcrawl-Exit").expect("exit field");
        assert!(
            exit == "name=e2; source-ip=127.0.0.2" || exit == "name=e3; source-ip=127.0.0.3",
            "{exit}"
        );
        let block_digest = header(rec, "WARC-Block-Digest").expect("block digest");
        assert_eq!(block_digest, format!("sha1:{}", sha1_base32(rec.body())));
        match rec.warc_type() {
            RecordType::Response => {
                let (head, body) = http_parts(rec.body());
                let digest = header(rec, "WARC-Payload-Digest").expect("payload digest");
                assert_eq!(digest, format!("sha1:{}", sha1_base32(&body)), "{uri}");
                ids_here.push(rec.warc_id().to_owned());
                self.responses.insert(rec.warc_id().to_owned(), (uri, body));
                assert!(head[0].starts_with("HTTP/1.1 "), "{head:?}");
            }
            RecordType::Request => {
                let to = header(rec, "WARC-Concurrent-To").expect("concurrent-to");
                assert!(
                    ids_here.contains(&to),
                    "the request is in its response's file"
                );
                let (head, body) = http_parts(rec.body());
                assert!(body.is_empty());
                self.requests.insert(to, (uri, head));
            }
            t => panic!("unexpected record type {t:?}"),
        }
    }

    /// Each response holds the body the site sent, and its request record the request
    /// line and the headers the site received.
    fn assert_match(&self, site: &TestSite) {
        let server_saw = site.requests();
        for (id, (uri, body)) in &self.responses {
            let path = uri.split_once("127.0.0.1").unwrap().1;
            let path = &path[path.find('/').unwrap()..];
            assert_eq!(body, &expected_body(path), "{uri}: the body the site sent");
            let (req_uri, head) = &self.requests[id];
            assert_eq!(req_uri, uri);
            assert_eq!(head[0], format!("GET {path} HTTP/1.1"));
            // The request record's headers are what the site received.
            let seen = server_saw
                .iter()
                .find(|q| q.path == path && q.status != 302)
                .unwrap_or_else(|| panic!("the site saw {path}"));
            let mut recorded: Vec<(String, String)> = head[1..]
                .iter()
                .map(|l| l.split_once(": ").expect("header line"))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let mut received: Vec<(String, String)> = seen.headers.clone();
            recorded.sort();
            received.sort();
            assert_eq!(recorded, received, "all the headers the site received");
        }
    }
}

/// Records: final_url, content_type, sha256 — and the body store under that name.
fn assert_records_name_their_bodies(answered: &[&Value], bodies: &Path) {
    for rec in answered {
        let url = rec["url"].as_str().unwrap();
        let final_url = rec["final_url"].as_str().expect("final_url");
        let want_final = url.replace("/r/", "/p/");
        assert_eq!(final_url, want_final);
        let path = &final_url[final_url
            .find("/p/")
            .or(final_url.find("/missing"))
            .unwrap()..];
        let body = expected_body(path);
        let sha = rec["sha256"].as_str().expect("sha256");
        assert_eq!(sha, sha256_hex(&body), "{url}");
        assert_eq!(
            std::fs::read(bodies.join(&sha[..2]).join(sha)).unwrap(),
            body
        );
        assert_eq!(rec["bytes"], body.len() as u64);
        if rec["status"] == 200 {
            assert_eq!(rec["content_type"], "text/html; charset=utf-8");
        }
    }
}

#[test]
fn warc_has_a_response_and_a_request_per_answer_with_the_bodies_the_site_sent() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let site = site(Arc::clone(&log));
    let n = 30;
    let r = crawl(&site, n);
    assert!(r.warcs.len() >= 3, "rotated at 16 KiB: {:?}", r.warcs);

    let pairs = Pairs::read(&r.warcs);

    // Every answer (pages, redirects' targets, the 404) has a response; robots.txt and
    // the disallowed URL have none.
    let answered: Vec<&Value> = r.recs.iter().filter(|v| v["status"].is_u64()).collect();
    assert_eq!(answered.len(), n + 3 + 1);
    assert_eq!(pairs.responses.len(), answered.len());
    assert_eq!(
        pairs.requests.len(),
        pairs.responses.len(),
        "every response has its request"
    );
    pairs.assert_match(&site);
    assert!(!log
        .lock()
        .unwrap()
        .iter()
        .any(|p| p.starts_with("/private/")));

    assert_records_name_their_bodies(&answered, &r.bodies);
    let private: Vec<&Value> = r.recs.iter().filter(|v| v["skipped"] == "robots").collect();
    assert_eq!(private.len(), 1);
    for k in ["final_url", "content_type", "sha256", "status"] {
        assert!(private[0][k].is_null(), "{k}: {}", private[0]);
    }
}

/// The program's arguments for a quiet crawl of `list` into `out` and `warc`.
fn warc_args(cfg: &Path, list: &Path, out: &Path, warc: &Path, resume: bool) -> Vec<String> {
    let mut a = vec!["--config", s(cfg), "--urls", s(list), "--out", s(out)];
    a.extend(["--warc", s(warc), "--quiet"]);
    if resume {
        a.push("--resume");
    }
    a.iter().map(|x| x.to_string()).collect()
}

#[test]
fn resume_starts_a_new_warc_file_and_plain_warc_reads_back() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let site = site(log);
    let dir = TempDir::new("warc-resume");
    let cfg = dir.file("c.toml", &config(""));
    let (out, warc) = (dir.path("o.jsonl"), dir.path("w.warc"));
    let urls = |range: std::ops::Range<usize>| {
        let list: Vec<String> = range.map(|i| site.url(&format!("/p/{i}"))).collect();
        list.join("\n") + "\n"
    };
    let first = dir.file("a.txt", &urls(0..3));
    let both = dir.file("b.txt", &urls(0..6));
    let args = |list: &Path, resume: bool| warc_args(&cfg, list, &out, &warc, resume);
    let o = cli_support::cmd(&[])
        .args(args(&first, false))
        .output()
        .unwrap();
    assert_ok(&o);
    let o = cli_support::cmd(&[])
        .args(args(&both, true))
        .output()
        .unwrap();
    assert_ok(&o);
    let read = |p: &Path| -> Vec<String> {
        let file = std::fs::File::open(p).unwrap();
        WarcReader::new(std::io::BufReader::new(file))
            .iter_records()
            .map(|r| r.unwrap())
            .filter(|r| *r.warc_type() == RecordType::Response)
            .map(|r| header(&r, "WARC-Target-URI").unwrap())
            .collect()
    };
    let mut a = read(&warc);
    let mut b = read(&dir.path("w-00001.warc"));
    a.sort();
    b.sort();
    let want = |r: std::ops::Range<usize>| -> Vec<String> {
        let mut v: Vec<String> = r.map(|i| site.url(&format!("/p/{i}"))).collect();
        v.sort();
        v
    };
    assert_eq!(a, want(0..3), "the first run's file is left as it was");
    assert_eq!(
        b,
        want(3..6),
        "the resumed run writes the rest to a new file"
    );
    assert_eq!(records(&out).len(), 6);
    // A new run over that series would leave w-00001.warc beside its own w.warc: refused,
    // and the series kept as it was.
    let series = std::fs::read(dir.path("w-00001.warc")).unwrap();
    let o = cli_support::cmd(&[])
        .args(args(&first, false))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("w-00001.warc is there from an earlier run's series")
            && err.contains("--resume"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.path("w-00001.warc")).unwrap(), series);
}

#[test]
fn encoded_answers_are_kept_decoded_and_say_their_encoding() {
    use exitcrawl_testsite::fault::{Encoding, ENCODED_PAGE};
    use exitcrawl_testsite::Fault;
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("warc-encoded");
    let cfg = dir.file("c.toml", &config(""));
    let encodings = [Encoding::Gzip, Encoding::Brotli, Encoding::Zstd];
    let urls: Vec<String> = encodings
        .iter()
        .map(|e| site.fault_url(&Fault::Encoded(*e).path("w")))
        .collect();
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (out, warc) = (dir.path("o.jsonl"), dir.path("w.warc.gz"));
    let o = run(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--warc",
        s(&warc),
        "--quiet",
    ]);
    assert_ok(&o);
    let responses: Vec<_> = read_warc(&warc)
        .into_iter()
        .filter(|r| *r.warc_type() == RecordType::Response)
        .collect();
    assert_eq!(responses.len(), encodings.len());
    for e in encodings {
        let url = site.fault_url(&Fault::Encoded(e).path("w"));
        let rec = responses
            .iter()
            .find(|r| header(r, "WARC-Target-URI").as_deref() == Some(url.as_str()))
            .unwrap_or_else(|| panic!("a response for {url}"));
        assert_eq!(
            header(rec, "Exitcrawl-Content-Encoding").as_deref(),
            Some(e.name())
        );
        let (head, body) = http_parts(rec.body());
        assert_eq!(body, ENCODED_PAGE, "{url}: kept decoded");
        assert!(
            !head
                .iter()
                .any(|h| h.to_ascii_lowercase().starts_with("content-encoding")),
            "{head:?}"
        );
        let digest = header(rec, "WARC-Payload-Digest").unwrap();
        assert_eq!(digest, format!("sha1:{}", sha1_base32(ENCODED_PAGE)));
    }
    for r in records(&out) {
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["sha256"], sha256_hex(ENCODED_PAGE), "{r}");
        // The record says both sizes: decoded, and as it came (compressed, smaller).
        assert_eq!(r["bytes"], ENCODED_PAGE.len() as u64, "{r}");
        let wire = r["wire_bytes"].as_u64().expect("wire_bytes");
        assert!(wire > 0 && wire < ENCODED_PAGE.len() as u64, "{r}");
    }
}

/// The target URIs of the response records in every WARC file of `dir`, read member by
/// member up to the first that does not decode (a file cut by a kill).
fn archived_responses(dir: &Path) -> std::collections::HashSet<String> {
    let mut uris = std::collections::HashSet::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if !path.to_string_lossy().ends_with(".warc.gz") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let mut rest: &[u8] = &bytes;
        while !rest.is_empty() {
            let mut d = flate2::bufread::GzDecoder::new(rest);
            let mut member = Vec::new();
            if d.read_to_end(&mut member).is_err() {
                break;
            }
            rest = d.into_inner();
            let head = String::from_utf8_lossy(&member[..member.len().min(4096)]).into_owned();
            if head.contains("WARC-Type: response") {
                if let Some(line) = head.lines().find(|l| l.starts_with("WARC-Target-URI: ")) {
                    uris.insert(line["WARC-Target-URI: ".len()..].trim().to_owned());
                }
            }
        }
    }
    uris
}

/// The whole lines of a JSONL file (a kill may leave half of the last one).
fn whole_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn killed_at_any_moment_no_200_record_lacks_its_warc_response() {
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(|_host: &str, pq: &str| {
            let i: usize = pq.strip_prefix("/p/")?.parse().ok()?;
            Some(Page::html(page_body(i % 40)))
        })),
        latency: std::time::Duration::from_millis(5),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("warc-kill");
    let cfg = dir.file("c.toml", &config("\n[crawl]\nrobots = false\n"));
    let urls: Vec<String> = (0..400).map(|i| site.url(&format!("/p/{i}"))).collect();
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let out = dir.path("o.jsonl");
    let warc = dir.path("w.warc.gz");
    let args = [
        "--config",
        s(&cfg),
        "--urls",
        s(&list),
        "--out",
        s(&out),
        "--warc",
        s(&warc),
    ];
    let check = |when: &str| {
        let archived = archived_responses(warc.parent().unwrap());
        for r in whole_records(&out).iter().filter(|r| r["status"] == 200) {
            let u = r["url"].as_str().unwrap();
            assert!(
                archived.contains(u),
                "{when}: {u} is 200 in --out, not in the WARC"
            );
        }
    };
    // Five kills at seeded moments (records written by then), each run resuming the last.
    let mut seed = 0x5eed_u64;
    for round in 0..5 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let more = 5 + (seed >> 33) as usize % 40;
        let before = whole_records(&out).len();
        let mut a = args.to_vec();
        if round > 0 {
            a.push("--resume");
        }
        let mut child = cli_support::spawn(&a);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while whole_records(&out).len() < before + more && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        child.kill().expect("kill -9");
        let _ = child.wait();
        check(&format!("after kill {round}"));
    }
    let mut a = args.to_vec();
    a.push("--resume");
    assert_ok(&run(&a));
    check("after the last --resume");
    // Each resume cut the file the kill left back to its last whole record: every file of
    // the series reads whole, record by record.
    let mut files = 0;
    for entry in std::fs::read_dir(warc.parent().unwrap()).unwrap().flatten() {
        let path = entry.path();
        if path.to_string_lossy().ends_with(".warc.gz") {
            files += 1;
            assert!(!read_warc(&path).is_empty(), "{}", path.display());
            // Member by member, each whole (a reader may stop quietly at a cut one).
            assert!(!gzip_members(&path).is_empty(), "{}", path.display());
        }
    }
    assert_eq!(files, 6, "one file per run");
    let last: HashMap<String, Value> = whole_records(&out)
        .into_iter()
        .map(|r| (r["url"].as_str().unwrap().to_owned(), r))
        .collect();
    assert_eq!(last.len(), urls.len());
    assert!(
        last.values().all(|r| r["status"] == 200),
        "every URL ends 200"
    );
}

/// A record cut off at the end of a file (a crash inside a write) is cut away by the
/// next `--resume`, with the response before it when it is its request, and its URL,
/// which had no record yet, is fetched again: every file reads whole and every 200 has
/// its response.
#[test]
fn resume_cuts_a_record_left_unfinished_and_fetches_its_url_again() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let site = site(log);
    let dir = TempDir::new("warc-cut");
    let cfg = dir.file("c.toml", &config("\n[crawl]\nrobots = false\n"));
    let (out, warc) = (dir.path("o.jsonl"), dir.path("w.warc.gz"));
    let urls: Vec<String> = (0..4).map(|i| site.url(&format!("/p/{i}"))).collect();
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let args = |resume: bool| warc_args(&cfg, &list, &out, &warc, resume);
    let run_args = |a: Vec<String>| run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_ok(&run_args(args(false)));

    // Cut the last record in half, and take back the JSONL record of its URL, which a
    // crash there would not have written yet.
    let members = gzip_members(&warc);
    let last = String::from_utf8_lossy(members.last().unwrap()).into_owned();
    let uri = last
        .lines()
        .find_map(|l| l.strip_prefix("WARC-Target-URI: "))
        .unwrap()
        .trim()
        .to_owned();
    let bytes = std::fs::read(&warc).unwrap();
    let last_start = *member_starts(&bytes).last().unwrap();
    std::fs::write(&warc, &bytes[..(last_start + bytes.len()) / 2]).unwrap();
    let kept: Vec<String> = whole_records(&out)
        .into_iter()
        .filter(|r| r["url"] != uri.as_str())
        .map(|r| r.to_string() + "\n")
        .collect();
    std::fs::write(&out, kept.concat()).unwrap();

    assert_ok(&run_args(args(true)));
    // The cut record was the request: its response, whole before it, went with it.
    let responses_of_uri = gzip_members(&warc)
        .iter()
        .map(|m| String::from_utf8_lossy(&m[..m.len().min(4096)]).into_owned())
        .filter(|h| h.contains("WARC-Type: response"))
        .filter(|h| h.contains(&format!("WARC-Target-URI: {uri}\r\n")))
        .count();
    assert_eq!(responses_of_uri, 0, "{uri}");
    for path in [warc.clone(), dir.path("w-00001.warc.gz")] {
        assert!(!gzip_members(&path).is_empty(), "{}", path.display());
        assert!(!read_warc(&path).is_empty(), "{}", path.display());
    }
    let archived = archived_responses(warc.parent().unwrap());
    let recs = whole_records(&out);
    assert_eq!(recs.len(), urls.len(), "{recs:?}");
    for r in &recs {
        assert_eq!(r["status"], 200, "{r}");
        assert!(archived.contains(r["url"].as_str().unwrap()), "{r}");
    }
}

/// Where each gzip member of `bytes` starts.
fn member_starts(bytes: &[u8]) -> Vec<usize> {
    let mut rest: &[u8] = bytes;
    let mut starts = Vec::new();
    while !rest.is_empty() {
        starts.push(bytes.len() - rest.len());
        let mut d = flate2::bufread::GzDecoder::new(rest);
        d.read_to_end(&mut Vec::new()).expect("a whole gzip member");
        rest = d.into_inner();
    }
    starts
}
