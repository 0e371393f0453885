//! The per-host account: each record says when it was made, and the summary's `hosts` has
//! one entry per host with what that host's own server counted.

mod cli_support;

use cli_support::{assert_ok, json, limited_and_open, records, run, s, TempDir};
use exitcrawl_testsite::{Limit, Rate, RetryAfter, SiteConfig, TestSite};

#[test]
fn the_summary_accounts_for_each_host_as_its_server_counted() {
    // Two hosts: one limited (its first requests meet 429s), one not.
    let (limited, open) = limited_and_open(Rate::per_second(8, 1), "127.0.1.1", "127.0.1.2");
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

#[test]
fn each_host_is_paused_for_at_least_the_retry_after_of_each_throttle_it_sent() {
    // One request at a time through one exit, so no two throttles share a pause: each
    // 429 says Retry-After: 1, and the host is paused at least that long for each.
    let (limited, open) = limited_and_open(Rate::per_second(2, 1), "127.0.1.3", "127.0.1.4");
    let dir = TempDir::new("hosts-paused");
    let mut list = String::new();
    for i in 0..4 {
        list += &(limited.url(&format!("/p/{i}")) + "\n");
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
        "--concurrency",
        "1",
        "--exit",
        "127.0.0.2",
    ]);
    assert_ok(&o);
    let sum = json(&summary);
    let hosts = sum["hosts"].as_array().expect("hosts");
    let host = |name: &str| {
        hosts
            .iter()
            .find(|h| h["host"] == name)
            .unwrap_or_else(|| panic!("{name} in {hosts:?}"))
    };
    let seen = limited.stats();
    assert!(seen.limited > 0, "the site throttled: {seen:?}");
    let paused = host("127.0.1.3")["paused_ms"].as_u64().expect("paused_ms");
    assert!(
        paused >= 1000 * seen.limited,
        "paused {paused} ms for {} throttles: {sum}",
        seen.limited
    );
    assert_eq!(host("127.0.1.3")["throttled"], seen.limited, "{sum}");
    assert_eq!(open.stats().limited, 0);
    assert_eq!(host("127.0.1.4")["paused_ms"], 0, "never throttled: {sum}");

    // The exit: its requests are the sites', its records' times span the hosts'.
    let exits = sum["per_exit"].as_array().expect("per_exit");
    assert_eq!(exits.len(), 1, "{sum}");
    let e = &exits[0];
    assert_eq!(e["requests"], seen.requests + open.stats().requests, "{e}");
    assert_eq!(e["throttled"], seen.limited, "{e}");
    assert!(e["paused_ms"].as_u64().is_some_and(|p| p <= paused), "{e}");
    let first = hosts.iter().filter_map(|h| h["first_at"].as_str()).min();
    let last = hosts.iter().filter_map(|h| h["last_at"].as_str()).max();
    assert_eq!(e["first_at"].as_str(), first, "{sum}");
    assert_eq!(e["last_at"].as_str(), last, "{sum}");
}

/// A host given as an IPv6 literal is accounted for under the name the limiter keys it by
/// (`[::1]`, brackets kept): its settled rate, its scope and its pauses are found.
#[test]
fn an_ipv6_host_keeps_its_rate_scope_and_pauses() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("::1 cannot be bound on this machine: nothing to test");
        return;
    }
    let ip: std::net::IpAddr = "::1".parse().expect("an address");
    let site = TestSite::start_at(
        SiteConfig {
            limit: Limit::Global(Rate::per_second(2, 1)),
            retry_after: RetryAfter::Fixed(1),
            ..SiteConfig::default()
        },
        ip,
    );
    let dir = TempDir::new("hosts-v6");
    let list: String = (0..6)
        .map(|i| site.url(&format!("/p/{i}")) + "\n")
        .collect();
    assert!(list.starts_with("http://[::1]:"), "{list}");
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
        "::1",
    ]);
    assert_ok(&o);
    assert_eq!(records(&out).len(), 6);
    let sum = json(&summary);
    let hosts = sum["hosts"].as_array().expect("hosts");
    assert_eq!(hosts.len(), 1, "{sum}");
    let h = &hosts[0];
    assert_eq!(h["host"], "[::1]", "{h}");
    assert_eq!(h["urls"], 6, "{h}");
    assert!(h["rate_rps"].as_f64().is_some_and(|r| r > 0.0), "{h}");
    assert!(h["scope"].is_string(), "{h}");
    let seen = site.stats();
    assert!(seen.limited > 0, "the site throttled: {seen:?}");
    assert_eq!(h["throttled"], seen.limited, "{h}");
    let paused = h["paused_ms"].as_u64().expect("paused_ms");
    assert!(paused >= 1000 * seen.limited, "paused {paused} ms: {sum}");
}
