//! URLs as arguments (`exitcrawl URL...`): crawled as if they were lines of a `--urls`
//! file, with no config file; with `--urls` too, both. Asserted from what the site saw.

mod cli_support;

use std::collections::HashMap;

use cli_support::{assert_ok, records, run, s, stderr, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite};

/// How many requests the site saw for each path (robots.txt left out).
fn requests_by_path(site: &TestSite) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for r in site.requests() {
        if r.path != "/robots.txt" {
            *n.entry(r.path).or_default() += 1;
        }
    }
    n
}

#[test]
fn urls_given_as_arguments_are_each_fetched_once_with_no_config() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("positional");
    let out = dir.path("out.jsonl");
    let (a, b, c) = (site.url("/p/a"), site.url("/p/b"), site.url("/p/c"));
    // A repeat and a bad URL among them: recorded as lines of a list would be.
    let o = run(&[
        &a,
        &b,
        "--out",
        s(&out),
        &c,
        &a,
        "not a url",
        "--exit",
        "127.0.0.2",
    ]);
    assert_ok(&o);
    let seen = requests_by_path(&site);
    assert_eq!(
        seen,
        HashMap::from([
            ("/p/a".to_owned(), 1),
            ("/p/b".to_owned(), 1),
            ("/p/c".to_owned(), 1)
        ]),
        "every URL given fetched once"
    );
    assert!(site
        .requests()
        .iter()
        .all(|r| r.peer.to_string() == "127.0.0.2"));
    let recs = records(&out);
    assert_eq!(recs.len(), 5, "one record per argument: {recs:?}");
    let by_url =
        |u: &str| -> Vec<&serde_json::Value> { recs.iter().filter(|r| r["url"] == u).collect() };
    for u in [&b, &c] {
        assert_eq!(by_url(u).len(), 1);
        assert_eq!(by_url(u)[0]["status"], 200);
    }
    let a_recs = by_url(&a);
    assert_eq!(a_recs.len(), 2);
    assert!(a_recs.iter().any(|r| r["status"] == 200));
    assert!(a_recs.iter().any(|r| r["skipped"] == "duplicate"));
    let bad = by_url("not a url");
    assert_eq!(bad.len(), 1);
    assert!(
        bad[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid_url")),
        "{:?}",
        bad[0]
    );
}

/// An argument with a line break in it is one line: an invalid URL, not two URLs.
#[test]
fn an_argument_with_a_line_break_is_one_invalid_url() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("positional-newline");
    let out = dir.path("out.jsonl");
    let two = format!("{}\n{}", site.url("/x"), site.url("/y"));
    // A break at the end (a CRLF line pasted in) is trimmed, as a line's is.
    let ended = format!("{}\r\n", site.url("/z"));
    let o = run(&[&two, &ended, "--out", s(&out), "--exit", "127.0.0.2"]);
    assert_ok(&o);
    assert_eq!(
        requests_by_path(&site),
        HashMap::from([("/z".to_owned(), 1)]),
        "only the argument with its break at the end"
    );
    let recs: Vec<_> = records(&out)
        .into_iter()
        .filter(|r| r["url"] != site.url("/z").as_str())
        .collect();
    assert_eq!(recs.len(), 1, "one record for the argument: {recs:?}");
    assert!(
        recs[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid_url")),
        "{:?}",
        recs[0]
    );
}

#[test]
fn urls_given_as_arguments_and_a_urls_file_are_both_crawled() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("positional-union");
    let list: String = (0..4)
        .map(|i| site.url(&format!("/f/{i}")) + "\n")
        .collect();
    let urls = dir.file("urls.txt", &list);
    let out = dir.path("out.jsonl");
    let summary = dir.path("summary.json");
    let (extra, repeated) = (site.url("/arg"), site.url("/f/0"));
    let o = run(&[
        "--urls",
        s(&urls),
        &extra,
        &repeated,
        "--out",
        s(&out),
        "--summary",
        s(&summary),
    ]);
    assert_ok(&o);
    let seen = requests_by_path(&site);
    let mut want: HashMap<String, usize> = (0..4).map(|i| (format!("/f/{i}"), 1)).collect();
    want.insert("/arg".to_owned(), 1);
    assert_eq!(seen, want, "the union, each URL once");
    let recs = records(&out);
    // The arguments are read first: /f/0 from the arguments is fetched, the list's line
    // for it is the repeat.
    assert_eq!(recs.len(), 6, "{recs:?}");
    let dup: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["skipped"] == "duplicate")
        .collect();
    assert_eq!(dup.len(), 1);
    assert_eq!(dup[0]["url"], repeated.as_str());
    let sum = cli_support::json(&summary);
    assert_eq!(sum["ok"], 5, "{sum}");
}

#[test]
fn urls_given_as_arguments_are_refused_where_no_list_is_read() {
    let dir = TempDir::new("positional-refused");
    let out = dir.path("o.jsonl");
    let url = "http://127.0.0.1:9/x";
    for (args, want) in [
        (
            vec![url, "--demo"],
            "--demo builds its own settings and URLs",
        ),
        (
            vec![url, "--frontier", "redis://127.0.0.1:6379/q"],
            "--frontier pulls its URLs from Redis",
        ),
        (
            vec![url, "--dedupe", "a.jsonl"],
            "--dedupe only goes with --out",
        ),
        (
            vec![
                url,
                "--enqueue",
                "u.txt",
                "--frontier",
                "redis://127.0.0.1:6379/q",
            ],
            "--enqueue only goes with",
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--out", s(&out)]);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{a:?}: {}", stderr(&o));
    }
    let o = run(&["--out", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("missing URLs: give them as arguments, or --urls FILE"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists(), "nothing written");
}
