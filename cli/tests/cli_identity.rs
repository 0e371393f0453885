//! The `exitcrawl` binary's identity and sitemap flags, at the server: `-H` and
//! `--user-agent` on every request (over `[crawler.headers]`), secret header values
//! masked in logs and errors, `--sitemap` seeding a crawl whose records carry `lastmod`,
//! and `wire_bytes` next to `bytes`.

mod cli_support;

use std::collections::HashMap;

use bytes::Bytes;
use cli_support::{assert_ok, config, records, run, s, stderr, TempDir};
use exitcrawl_testsite::{Page, Pages, RequestRecord, SiteConfig, TestSite};

fn header<'a>(r: &'a RequestRecord, name: &str) -> Option<&'a str> {
    r.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn site() -> TestSite {
    TestSite::start(SiteConfig {
        pages: Some(Pages::new(|host: &str, pq: &str| {
            let base = format!("http://{host}");
            Some(match pq {
                "/robots.txt" => Page::text("User-agent: *\nDisallow: /no/\n"),
                "/sitemap.xml" => Page {
                    status: 200,
                    content_type: "application/xml",
                    body: Bytes::from(format!(
                        "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                         <url><loc>{base}/a</loc><lastmod>2024-05-01</lastmod></url>\
                         <url><loc>{base}/b</loc></url>\
                         <url><loc>{base}/a</loc></url>\
                         <url><loc>{base}/no/c</loc></url>\
                         <url><loc>http://other.invalid/d</loc></url></urlset>"
                    )),
                    location: None,
                },
                _ => Page::html(format!("<p>{pq}</p>")),
            })
        })),
        ..SiteConfig::default()
    })
}

#[test]
fn headers_and_user_agent_reach_the_site_and_secrets_stay_out_of_the_logs() {
    let site = site();
    let dir = TempDir::new("identity");
    let cfg = dir.file(
        "c.toml",
        &config("[crawler.headers]\n\"Accept-Language\" = \"de\"\nX-Team = \"crawl\"\n"),
    );
    let urls = dir.file(
        "u.txt",
        &format!("{}\n{}\n", site.url("/one"), site.url("/two")),
    );
    let out = dir.path("out.jsonl");
    let warc = dir.path("pages.warc");
    let o = cli_support::cmd(&[
        "--config",
        s(&cfg),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--warc",
        s(&warc),
        "-H",
        "Accept-Language: en",
        "--header=Authorization: Bearer hunter2",
        "--user-agent",
        "clibot/3.1 (+https://example.org)",
        "--quiet",
        "--log-format",
        "json",
    ])
    .env("RUST_LOG", "info")
    .output()
    .expect("run");
    assert_ok(&o);
    let pages: Vec<_> = site
        .requests()
        .into_iter()
        .filter(|r| r.path != "/robots.txt")
        .collect();
    assert_eq!(pages.len(), 2);
    for r in &pages {
        assert_eq!(
            header(r, "accept-language"),
            Some("en"),
            "-H overrides the config"
        );
        assert_eq!(header(r, "x-team"), Some("crawl"), "the config's own stays");
        assert_eq!(header(r, "authorization"), Some("Bearer hunter2"));
        assert_eq!(
            header(r, "user-agent"),
            Some("clibot/3.1 (+https://example.org)")
        );
    }
    let log = stderr(&o);
    assert!(!log.contains("hunter2"), "{log}");
    assert!(
        log.contains("authorization: ***"),
        "the headers are logged masked: {log}"
    );
    let archived = std::fs::read_to_string(&warc).expect("warc");
    assert!(!archived.contains("hunter2"));
    assert!(archived.contains("authorization: ***"));
    assert!(archived.contains("accept-language: en\r\n"));
    for r in records(&out) {
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["wire_bytes"], r["bytes"], "uncompressed: {r}");
    }
}

#[test]
fn bad_headers_and_user_agents_exit_2_naming_the_flag_without_the_secret() {
    let dir = TempDir::new("identity-bad");
    let cfg = dir.file("c.toml", &config(""));
    let base = ["--config", s(&cfg), "--urls", "-"];
    let cases: [(&[&str], &str); 4] = [
        (&["-H", "NoColonHere"], "expected 'Name: value'"),
        (&["-H", "Bad Name: x"], "is not a header name"),
        (&["-H", "Host: example.org"], "may not be set here"),
        (&["--user-agent", ""], "--user-agent"),
    ];
    for (extra, want) in cases {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
    }
    let o = run(&[&base[..], &["-H", "X-Api-Key: s3cret\u{7}"]].concat());
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("-H") && e.contains("masked") && !e.contains("s3cret"),
        "{e}"
    );
}

#[test]
fn a_sitemap_seeds_every_listed_url_once_with_its_lastmod() {
    let site = site();
    let dir = TempDir::new("sitemap");
    let cfg = dir.file("c.toml", &config(""));
    let out = dir.path("out.jsonl");
    let summary = dir.path("summary.json");
    let o = run(&[
        "--config",
        s(&cfg),
        "--sitemap",
        &site.url("/sitemap.xml"),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--quiet",
    ]);
    assert_ok(&o);
    let recs = records(&out);
    let by: HashMap<String, &serde_json::Value> = recs
        .iter()
        .map(|r| (r["url"].as_str().unwrap().to_owned(), r))
        .collect();
    assert_eq!(by.len(), recs.len(), "one record per URL: {recs:?}");
    assert_eq!(by.len(), 3, "{recs:?}");
    let a = by[&site.url("/a")];
    assert_eq!(a["status"], 200);
    assert_eq!(a["lastmod"], "2024-05-01");
    assert_eq!(a["parent"], site.url("/sitemap.xml"));
    assert_eq!(by[&site.url("/b")].get("lastmod"), None);
    assert_eq!(by[&site.url("/no/c")]["skipped"], "robots");
    let mut count: HashMap<String, usize> = HashMap::new();
    for r in site.requests() {
        *count.entry(r.path).or_default() += 1;
    }
    for p in ["/sitemap.xml", "/robots.txt", "/a", "/b"] {
        assert_eq!(count.get(p), Some(&1), "{p}: {count:?}");
    }
    assert_eq!(count.len(), 4, "{count:?}");
    let sum = cli_support::json(&summary);
    assert_eq!(sum["sitemap_fetches"], 1, "{sum}");
    assert_eq!(sum["sitemap_urls"], 3, "{sum}");
}

/// A listed URL's redirect to another origin: the hop there goes without the `-H`
/// credentials, as a redirect the exit follows itself, and the archived request says
/// so (it is what the site received).
#[test]
fn a_redirect_to_another_origin_leaves_h_credentials_behind() {
    let other = TestSite::start_at(
        SiteConfig {
            pages: Some(Pages::new(|_: &str, pq: &str| {
                Some(match pq {
                    "/robots.txt" => Page::text(""),
                    _ => Page::html("<p>landed</p>"),
                })
            })),
            ..SiteConfig::default()
        },
        "127.0.0.6".parse().unwrap(),
    );
    let away = other.url("/landing");
    let site = TestSite::start(SiteConfig {
        pages: Some(Pages::new(move |_: &str, pq: &str| {
            Some(match pq {
                "/robots.txt" => Page::text(""),
                _ => Page::redirect(302, away.as_str()),
            })
        })),
        ..SiteConfig::default()
    });
    let dir = TempDir::new("identity-redirect");
    let cfg = dir.file("c.toml", &config(""));
    let out = dir.path("o.jsonl");
    let warc = dir.path("o.warc");
    let o = run(&[
        "--config",
        s(&cfg),
        &site.url("/go"),
        "-H",
        "Authorization: Bearer s3cret",
        "--out",
        s(&out),
        "--warc",
        s(&warc),
        "--quiet",
    ]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs[0]["status"], 200, "{}", recs[0]);
    let go = site
        .requests()
        .into_iter()
        .find(|r| r.path == "/go")
        .expect("asked");
    assert!(header(&go, "authorization").is_some(), "sent where listed");
    let landing = other
        .requests()
        .into_iter()
        .find(|r| r.path == "/landing")
        .expect("followed");
    assert!(
        header(&landing, "authorization").is_none(),
        "{:?}",
        landing.headers
    );
    let archived = std::fs::read_to_string(&warc).expect("warc");
    let request = archived
        .split("WARC/1.1\r\n")
        .find(|r| r.contains("WARC-Type: request") && r.contains("GET /landing "))
        .expect("the landing's request record");
    assert!(!request.contains("authorization:"), "{request}");
}
