//! Exits from the command line: none at all (the default route), `--exit IP`, `--proxy URL`
//! and `--proxies FILE`, each with no config file. Asserted from what the site saw: the peer
//! address of every request.
//!
//! The proxy test needs `microsocks` on `PATH` (`.ci/run` installs it).

mod cli_support;

use std::net::{IpAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::{assert_ok, records, run, s, stderr, TempDir};
use exitcrawl_testsite::{SiteConfig, TestSite};

const URLS: usize = 12;

fn url_list(dir: &TempDir, site: &TestSite) -> std::path::PathBuf {
    let list: String = (0..URLS)
        .map(|i| site.url(&format!("/p/{i}")) + "\n")
        .collect();
    dir.file("urls.txt", &list)
}

/// The peers the site saw for the listed pages, and how many requests each.
fn peers(site: &TestSite) -> Vec<(IpAddr, usize)> {
    let mut seen: Vec<(IpAddr, usize)> = Vec::new();
    for r in site.requests().iter().filter(|r| r.path.starts_with("/p/")) {
        match seen.iter_mut().find(|(ip, _)| *ip == r.peer) {
            Some((_, n)) => *n += 1,
            None => seen.push((r.peer, 1)),
        }
    }
    seen.sort();
    seen
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn all_ok(out: &std::path::Path) -> Vec<String> {
    let recs = records(out);
    assert_eq!(recs.len(), URLS, "one record per URL");
    recs.iter()
        .map(|r| {
            assert_eq!(r["status"], 200, "{r}");
            r["exit"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[test]
fn with_no_config_and_no_exit_every_url_goes_through_the_default_route() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("default-route");
    let urls = url_list(&dir, &site);
    let out = dir.path("out.jsonl");
    let o = run(&["--urls", s(&urls), "--out", s(&out), "--ignore-robots"]);
    assert_ok(&o);
    let exits = all_ok(&out);
    assert!(
        exits.iter().all(|e| !e.is_empty() && *e == exits[0]),
        "one exit, named after the host: {exits:?}"
    );
    // The kernel picks the source address: 127.0.0.1 for a site on 127.0.0.1.
    assert_eq!(peers(&site), [(ip("127.0.0.1"), URLS)]);
}

#[test]
fn exit_flags_replace_the_configs_exits() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("exit-flags");
    let urls = url_list(&dir, &site);
    let cfg = dir.file(
        "c.toml",
        "[limiter]\nalgorithm = \"none\"\n[[exits]]\nname = \"cfg\"\nsource_ip = \"127.0.0.9\"\n",
    );
    let out = dir.path("out.jsonl");
    let o = run(&[
        "--config",
        s(&cfg),
        "--exit",
        "127.0.0.2",
        "--exit",
        "127.0.0.3",
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--ignore-robots",
    ]);
    assert_ok(&o);
    let exits = all_ok(&out);
    assert!(
        exits.iter().all(|e| e == "127.0.0.2" || e == "127.0.0.3"),
        "{exits:?}"
    );
    let seen = peers(&site);
    assert_eq!(seen.iter().map(|(_, n)| n).sum::<usize>(), URLS);
    assert!(
        seen.iter()
            .all(|(p, _)| *p == ip("127.0.0.2") || *p == ip("127.0.0.3")),
        "{seen:?}"
    );
}

#[test]
fn a_config_without_exits_is_complete_with_an_exit_flag() {
    let site = TestSite::start(SiteConfig::default());
    let dir = TempDir::new("config-no-exits");
    let urls = url_list(&dir, &site);
    let cfg = dir.file("c.toml", "[limiter]\nalgorithm = \"none\"\n");
    let out = dir.path("out.jsonl");
    let o = run(&[
        "--config",
        s(&cfg),
        "--exit",
        "127.0.0.2",
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--ignore-robots",
    ]);
    assert_ok(&o);
    assert!(all_ok(&out).iter().all(|e| e == "127.0.0.2"));
    assert_eq!(peers(&site), [(ip("127.0.0.2"), URLS)]);
    // Without the flag the file is still incomplete: its exits are required.
    let o = run(&["--config", s(&cfg), "--urls", s(&urls)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("exits: empty"), "{}", stderr(&o));
}

#[test]
fn a_bad_exit_flag_is_a_usage_error_naming_the_flag() {
    let o = run(&["--urls", "-", "--proxy", "https://u:secret@10.0.0.5:3128"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("--proxy") && err.contains("socks5h"), "{err}");
    assert!(!err.contains("secret"), "the password shows: {err}");
    let o = run(&["--urls", "-", "--exit", "300.1.1.1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--exit"), "{}", stderr(&o));
}

/// microsocks on 127.0.0.1 with credentials `user:pass`, connecting out from 127.0.0.7.
struct Socks(std::process::Child, u16);

impl Drop for Socks {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn socks() -> Socks {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("microsocks")
        .args([
            "-i",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-u",
            "user",
            "-P",
            "pass",
        ])
        .args(["-b", "127.0.0.7"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("microsocks on PATH (.ci/run installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "microsocks did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Socks(child, port)
}

#[test]
fn proxies_from_a_file_are_exits_and_the_site_sees_the_proxys_address() {
    let site = TestSite::start(SiteConfig::default());
    let proxy = socks();
    let dir = TempDir::new("proxies");
    let urls = url_list(&dir, &site);
    let list = dir.file(
        "proxies.txt",
        &format!("# one proxy\n\nsocks5h://user:pass@127.0.0.1:{}\n", proxy.1),
    );
    let out = dir.path("out.jsonl");
    let o = run(&[
        "--proxies",
        s(&list),
        "--urls",
        s(&urls),
        "--out",
        s(&out),
        "--ignore-robots",
    ]);
    assert_ok(&o);
    let exits = all_ok(&out);
    assert!(exits.iter().all(|e| e == "proxy1"), "{exits:?}");
    assert_eq!(peers(&site), [(ip("127.0.0.7"), URLS)]);
    let text = std::fs::read_to_string(&out).unwrap() + &stderr(&o);
    assert!(!text.contains("pass@"), "the proxy's password shows");
}
