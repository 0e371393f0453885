//! A URL list is fetched in its order (as far as each host's pacing allows): people read
//! results against their list. Run through the `exitcrawl` binary against a local test
//! site, asserting the order the site saw.

mod cli_support;

use cli_support::{assert_ok, config, records, run_list, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite};

/// robots.txt off: the site's requests are exactly the URLs'.
const NO_ROBOTS: &str = "\n[crawl]\nrobots = false\n";

#[test]
fn a_url_list_is_fetched_in_its_order() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("order");
    // The adaptive pacer sends to one host at 5/s: the site sees the order the fetches
    // were admitted in, and all twelve are handed in at once (concurrency 8).
    let cfg = dir.file(
        "c.toml",
        &config(NO_ROBOTS).replace("algorithm = \"none\"", "algorithm = \"aimd\""),
    );
    let urls: Vec<String> = (0..12).map(|i| site.url(&format!("/page/{i}"))).collect();
    let list = dir.file("urls.txt", &(urls.join("\n") + "\n"));
    let (o, out, _) = run_list(&dir, &cfg, &list, &[]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), urls.len());
    let written: Vec<&str> = recs.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(written, urls, "records in the list's order");
    let seen: Vec<String> = site.requests().into_iter().map(|r| r.path).collect();
    let paths: Vec<String> = (0..12).map(|i| format!("/page/{i}")).collect();
    assert_eq!(seen, paths, "the site saw the list's order");
}
