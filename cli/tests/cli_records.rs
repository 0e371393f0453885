//! What the records and the summary say about URLs that fail, run through the `exitcrawl`
//! binary against a local test site (exits on 127.0.0.2 and .3): a URL whose retries run
//! out records its last status, and the summary's figures add up to the records and to
//! what the site saw.

mod cli_support;

use cli_support::{assert_ok, config, json, records, run_list, TempDir};
use exitcrawl_testsite::{Page, Pages, SiteConfig, TestSite};
use serde_json::Value;

/// robots.txt off: the site's count is then exactly the URLs' requests.
const NO_ROBOTS: &str = "\n[crawl]\nrobots = false\n";

fn count(recs: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    recs.iter().filter(|r| pred(r)).count()
}

/// `/fail/…` answers 500 (always: a retry gets 500 again), `/gone/…` 404, the rest 200.
fn failing_site() -> TestSite {
    let pages = Pages::new(|_: &str, pq: &str| {
        if pq.starts_with("/gone/") {
            return None;
        }
        let mut page = Page::html("<p>page</p>");
        if pq.starts_with("/fail/") {
            page.status = 500;
        }
        Some(page)
    });
    TestSite::start(SiteConfig {
        pages: Some(pages),
        ..SiteConfig::default()
    })
}

#[test]
fn a_url_whose_retries_run_out_records_its_last_status() {
    // 30 URLs, 9 of them answering 500 every time; one retry each (max_retries = 1),
    // within the retry budget's reserve. (A retry the budget cannot afford waits for it:
    // tests/lossless.rs shows that on paused time.)
    let site = failing_site();
    let dir = TempDir::new("retries");
    let cfg = dir.file("c.toml", &config(NO_ROBOTS));
    let list: String = (0..30)
        .map(|i| {
            let kind = if i % 10 < 3 { "fail" } else { "page" };
            format!("{}\n", site.url(&format!("/{kind}/{i}")))
        })
        .collect();
    let urls = dir.file("urls.txt", &list);
    let (o, out, summary) = run_list(&dir, &cfg, &urls, &["--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 30);
    let failing: Vec<&Value> = recs
        .iter()
        .filter(|r| r["url"].as_str().unwrap_or_default().contains("/fail/"))
        .collect();
    assert_eq!(failing.len(), 9);
    for r in &failing {
        assert_eq!(r["status"], 500, "the last status: {r}");
        assert_eq!(r["attempts"], 2, "{r}");
        assert_eq!(r["throttled"], 0, "{r}");
        assert!(r["error"].is_null(), "{r}");
    }
    assert!(
        recs.iter()
            .filter(|r| r["status"] == 200)
            .all(|r| r["error"].is_null() && r["attempts"] == 1 && r["throttled"] == 0),
        "2xx answers are never retried nor blamed"
    );
    // The site saw every first attempt and every retry.
    assert_eq!(site.stats().requests, 30 + 9);
    assert_eq!(json(&summary)["requests"], 30 + 9);
}

#[test]
fn summary_figures_add_up_and_ok_counts_2xx_only() {
    let site = failing_site();
    let dir = TempDir::new("figures");
    let cfg = dir.file(
        "c.toml",
        &config(NO_ROBOTS).replace("max_retries = 1", "max_retries = 0"),
    );
    // 20 answered 200, 10 answered 500, 10 answered 404, 2 refused before sending.
    let mut list: Vec<String> = Vec::new();
    for i in 0..40 {
        let kind = match i % 4 {
            0 | 1 => "page",
            2 => "fail",
            _ => "gone",
        };
        list.push(site.url(&format!("/{kind}/{i}")));
    }
    list.push("not a url".into());
    list.push("http://127.0.0.1:70000/".into());
    let urls = dir.file("urls.txt", &(list.join("\n") + "\n"));
    let (o, out, summary) = run_list(&dir, &cfg, &urls, &["--quiet"]);
    assert_ok(&o);
    let recs = records(&out);
    let sum = json(&summary);
    let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("a count: {v}"));
    let per_exit = sum["per_exit"].as_array().expect("per_exit");
    assert_eq!(per_exit.len(), 2);
    let over_exits = |k: &str| per_exit.iter().map(|e| n(&e[k])).sum::<u64>();
    // per_exit.ok: answers 2xx, nothing else.
    assert_eq!(over_exits("ok"), 20, "{sum}");
    assert_eq!(n(&sum["ok"]), 20);
    assert_eq!(
        count(&recs, |r| r["status"] == 200),
        20,
        "records agree with the summary"
    );
    // requests: the sum of per_exit, what the site saw, and the records' attempts.
    let attempts: u64 = recs.iter().map(|r| n(&r["attempts"])).sum();
    assert_eq!(n(&sum["requests"]), over_exits("requests"), "{sum}");
    assert_eq!(n(&sum["requests"]), 40);
    assert_eq!(attempts, 40);
    assert_eq!(site.stats().requests, 40);
    assert_eq!(over_exits("errors"), 0);
    assert_eq!(over_exits("not_sent"), 0);
    assert_eq!(over_exits("throttled"), 0);
    assert_eq!(n(&sum["total"]), 42);
    // failed: the fetches that failed (the 500s and 404s); the two lines the crawler
    // does not take are `invalid`.
    assert_eq!(n(&sum["failed"]), 20, "{sum}");
    assert_eq!(n(&sum["invalid"]), 2, "{sum}");
    assert_eq!(
        n(&sum["total"]),
        n(&sum["ok"]) + n(&sum["failed"]) + n(&sum["invalid"])
    );
    for e in per_exit {
        assert!(n(&e["ok"]) <= n(&e["requests"]), "{e}");
    }
}
