//! Request keys beyond compression: `[crawler] headers` and `cookies`, `[crawl]
//! sitemaps` and `allow_private` — defaults, values, and errors that name the key, the value
//! (masked when it looks secret) and what is allowed.

use exitcrawl::config::{ConfigError, Settings};

const ONE_EXIT: &str = "[[exits]]\nname = \"e2\"\nsource_ip = \"127.0.0.2\"\n";

fn with_exit(sections: &str) -> String {
    format!("{sections}\n{ONE_EXIT}")
}

fn err_of(toml: &str) -> ConfigError {
    match Settings::from_toml_str(toml) {
        Ok(s) => panic!("expected an error for:\n{toml}\ngot {s:?}"),
        Err(e) => e,
    }
}

fn assert_invalid(toml: &str, key: &str, parts: &[&str]) -> String {
    let e = err_of(toml);
    let text = e.to_string();
    assert_eq!(e.key(), Some(key), "wrong key in {text:?} for:\n{toml}");
    for p in parts {
        assert!(text.contains(p), "{text:?} lacks {p:?} (input:\n{toml})");
    }
    text
}

#[test]
fn defaults_send_no_extra_header_keep_no_cookie_and_refuse_private_addresses() {
    let s = Settings::from_toml_str(ONE_EXIT).unwrap();
    assert!(s.crawler.headers.is_empty());
    assert!(!s.crawler.cookies);
    assert!(!s.crawl.sitemaps);
    assert!(!s.crawl.allow_private);
    assert!(s.crawl.address_rule().enforced());
    assert!(s.crawl.private_only_for_tests.is_none());
}

#[test]
fn headers_as_a_table_or_inline_keep_their_names() {
    let s = Settings::from_toml_str(&with_exit(
        "[crawler]\ncookies = true\n[crawler.headers]\n\"Accept-Language\" = \"en, de;q=0.5\"\n\
         X-Api-Key = \"k-1\"\nDNT = 1\n",
    ))
    .unwrap();
    assert!(s.crawler.cookies);
    let h: Vec<(&str, &str)> = s
        .crawler
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        h,
        [
            ("Accept-Language", "en, de;q=0.5"),
            ("DNT", "1"),
            ("X-Api-Key", "k-1")
        ]
    );
    let s = Settings::from_toml_str(&with_exit(
        "[crawler]\nheaders = { Authorization = \"Bearer t\", \"X.Dotted\" = \"\" }\n\
         [crawl]\nsitemaps = true\nallow_private = true",
    ))
    .unwrap();
    assert_eq!(s.crawler.headers["Authorization"], "Bearer t");
    assert_eq!(s.crawler.headers["X.Dotted"], "");
    assert!(s.crawl.sitemaps && s.crawl.allow_private);
    assert!(!s.crawl.address_rule().enforced());
}

#[test]
fn header_errors_name_the_header_and_mask_secret_values() {
    assert_invalid(
        &with_exit("[crawler.headers]\n\"a b\" = \"1\""),
        "crawler.headers.\"a b\"",
        &["\"a b\" is not a header name", "1..=128"],
    );
    assert_invalid(
        &with_exit("[crawler.headers]\nAccept = \"1\"\naccept = \"2\""),
        "crawler.headers.accept",
        &["given twice", "\"Accept\""],
    );
    assert_invalid(
        &with_exit("[crawler.headers]\nUser-Agent = \"x\""),
        "crawler.headers.User-Agent",
        &["may not be set here", "crawler.user_agent"],
    );
    for reserved in ["Host", "content-length", "Accept-Encoding", "Connection"] {
        assert_invalid(
            &with_exit(&format!("[crawler.headers]\n{reserved} = \"x\"")),
            &format!("crawler.headers.{reserved}"),
            &["may not be set here"],
        );
    }
    assert_invalid(
        &with_exit("[crawler.headers]\nX-Note = \"a\\nb\""),
        "crawler.headers.X-Note",
        &["\"a\\nb\"", "visible ASCII"],
    );
    let text = assert_invalid(
        &with_exit("[crawler.headers]\nAuthorization = \"Bearer hunter2\\r\\n\""),
        "crawler.headers.Authorization",
        &["masked", "visible ASCII"],
    );
    assert!(!text.contains("hunter2"), "{text}");
    let text = assert_invalid(
        &with_exit("[crawler.headers]\nX-Auth-Token = \"s3cret\\u0000\""),
        "crawler.headers.X-Auth-Token",
        &["masked"],
    );
    assert!(!text.contains("s3cret"), "{text}");
    let many: String = (0..65).map(|i| format!("X-H{i} = \"v\"\n")).collect();
    assert_invalid(
        &with_exit(&format!("[crawler.headers]\n{many}")),
        "crawler.headers",
        &["65 entries", "at most 64"],
    );
    assert_invalid(
        &with_exit("[crawler]\nheaders = [\"Accept: x\"]"),
        "crawler.headers",
        &["expected a map"],
    );
}

#[test]
fn the_new_switches_are_strict_booleans_and_settable_from_the_environment() {
    assert_invalid(
        &with_exit("[crawler]\ncookies = 1"),
        "crawler.cookies",
        &["1"],
    );
    assert_invalid(
        &with_exit("[crawl]\nallow_private = \"yes\""),
        "crawl.allow_private",
        &["\"yes\""],
    );
    let s = Settings::from_toml_str_with_env(
        ONE_EXIT,
        [
            ("EXITCRAWL__CRAWLER__COOKIES", "true"),
            ("EXITCRAWL__CRAWL__ALLOW_PRIVATE", "true"),
            ("EXITCRAWL__CRAWL__SITEMAPS", "true"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    )
    .unwrap();
    assert!(s.crawler.cookies && s.crawl.allow_private && s.crawl.sitemaps);
    // The test-only override is no configuration key.
    assert_invalid(
        &with_exit("[crawl]\nprivate_only_for_tests = [\"127.0.0.9\"]"),
        "crawl.private_only_for_tests",
        &["unknown key"],
    );
}
