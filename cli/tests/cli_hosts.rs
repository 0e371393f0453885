//! The per-host account: each record says when it was made, and the summary's `hosts` has
//! one entry per host with what that host's own server counted.

mod cli_support;

use cli_support::{assert_ok, json, records, run, s, TempDir};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};

#[test]
fn the_summary_accounts_for_each_host_as_its_server_counted() {
    // Two hosts: one limited (its first requests meet 429s), one not.
    let limited = TestSite::start_at(
        SiteConfig {
            limit: Limit::Global(Rate::per_second(8, 1)),
            retry_after: RetryAfter::Fixed(1),
            ..SiteConfig::default()
        },
        "127.0.1.1".parse().unwrap(),
    );
    let open = TestSite::start_at(SiteConfig::default(), "127.0.1.2".parse().unwrap());
    let dir = TempDir::new("hosts");
    let mut list = String::new();
    for i in 0..10 {
        list += &(limited.url(&format!("/p/{i}")) + "\n");
    }
    for i in 0..4 {
        list += &(open.url(&format!("/p/{i}")) + "\n");
    }
    let urls = dir.file("urls.txt", &list);
    let (out, summary) = (dir.path("out.jsonl"), dir.path("summary.json"));
    let o = run(&[
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--summary",
        s(&summary),
        "--ignore-robots",
        "--initial-rps",
        "20",
        "--exit",
        "127.0.0.2",
        "--exit",
        "127.0.0.3",
    ]);
    assert_ok(&o);
    let recs = records(&out);
    assert_eq!(recs.len(), 14);
    for r in &recs {
        let at = r["fetched_at"].as_str().expect("fetched_at");
        assert!(
            at.len() == 24 && at.ends_with('Z') && &at[10..11] == "T",
            "{at}"
        );
    }
    let sum = json(&summary);
    let hosts = sum["hosts"].as_array().expect("hosts");
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    assert_eq!(sum["hosts_omitted"], 0);
    for (site, name, pages) in [(&limited, "127.0.1.1", 10), (&open, "127.0.1.2", 4)] {
        let h = hosts
            .iter()
            .find(|h| h["host"] == name)
            .unwrap_or_else(|| panic!("{name} in {hosts:?}"));
        let seen = site.stats();
        assert_eq!(h["urls"], pages, "{h}");
        assert_eq!(h["ok"], pages, "{h}");
        assert_eq!(h["requests"], seen.requests, "{h} vs {seen:?}");
        assert_eq!(h["throttled"], seen.limited, "{h} vs {seen:?}");
        assert!(h["rate_rps"].as_f64().is_some_and(|r| r > 0.0), "{h}");
        assert!(h["scope"].is_string(), "{h}");
        let (first, last) = (h["first_at"].as_str(), h["last_at"].as_str());
        assert!(first.is_some() && first <= last, "{h}");
    }
    let throttled = hosts.iter().find(|h| h["host"] == "127.0.1.1").unwrap();
    assert!(
        throttled["throttled"].as_u64() > Some(0),
        "the limited host throttled: {throttled}"
    );
}
