//! URL normalisation, so that one page is one key for dedupe and scope.
//!
//! Links to the same page are written many ways (`HTTP://Example.COM:80/a/./b#top`,
//! `/a/b`, `../a/b`, `%7Euser` vs `~user`). Crawling each spelling would fetch the page
//! several times, so every discovered URL goes through [`normalize`] or [`resolve`] before
//! it meets the scope rules and the seen-set.
//!
//! The `url` crate (WHATWG URL standard, what browsers do) already lowercases scheme and
//! host, drops default ports, resolves `.`/`..` (also `%2e`), percent-encodes non-ASCII and
//! turns IDN hosts into punycode. On top of that we:
//! - accept only `http`/`https` (everything else — `javascript:`, `mailto:`, `data:`,
//!   `ftp:` — is not crawlable);
//! - refuse port 0, which the parser takes (a port above 65535 does not parse);
//! - drop the trailing dots of a domain host (`a.test.` → `a.test`, as the scope sees it);
//! - drop the fragment (never sent to the server);
//! - decode percent-escapes of unreserved characters (`A-Z a-z 0-9 - . _ ~`, RFC 3986
//!   §6.2.2.2) in path and query — except where the decoded digit would complete a stray
//!   `%` into a new escape, so that normalising twice changes nothing — and uppercase the
//!   hex of the escapes that stay (§6.2.2.1);
//! - drop an empty query (`/a?` → `/a`).
//!
//! Query parameter order is kept: `?a=1&b=2` and `?b=2&a=1` may be different resources.

use url::{Host, Url};

/// Why a string is not a crawlable URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormalizeError {
    /// Not a URL at all.
    #[error("not a URL: {0}")]
    Parse(#[from] url::ParseError),
    /// A scheme other than `http` or `https`.
    #[error("scheme {0:?} is not crawlable (only http and https)")]
    Scheme(String),
    /// No host (cannot happen for http(s) with the `url` crate; kept for safety).
    #[error("URL has no host")]
    NoHost,
    /// Port 0: the `url` crate parses it (a port above 65535 is already a parse error),
    /// but no request can go there.
    #[error("port \"0\" is not a port (expected 1..=65535)")]
    PortZero,
}

/// Parse an absolute URL and normalise it (see the module doc).
pub fn normalize(s: &str) -> Result<Url, NormalizeError> {
    finish(Url::parse(s.trim())?)
}

/// Resolve `href` (as found in a page) against `base` and normalise it.
///
/// Handles relative (`a.html`, `../a`, `?q`, `#f`), root-relative (`/a`), protocol-relative
/// (`//host/a`) and absolute links. `None` for links that are not http(s)
/// (`javascript:`, `mailto:`, `data:`, `tel:` …) or do not parse.
pub fn resolve(base: &Url, href: &str) -> Option<Url> {
    finish(base.join(href.trim()).ok()?).ok()
}

/// Normalise an already parsed URL.
pub fn finish(mut u: Url) -> Result<Url, NormalizeError> {
    match u.scheme() {
        "http" | "https" => {}
        other => return Err(NormalizeError::Scheme(other.to_owned())),
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(NormalizeError::NoHost);
    }
    if u.port() == Some(0) {
        return Err(NormalizeError::PortZero);
    }
    if let Some(Host::Domain(d)) = u.host() {
        // `a.test.` is `a.test` to DNS, and to the scope that trims it: one key for both.
        // All the dots go (`a.test..` parses too), so that normalising twice changes
        // nothing.
        let bare = d.trim_end_matches('.');
        if bare.len() < d.len() && !bare.is_empty() {
            let bare = bare.to_owned();
            u.set_host(Some(&bare)).map_err(NormalizeError::Parse)?;
        }
    }
    u.set_fragment(None);
    if let Some(p) = normalize_escapes(u.path()) {
        u.set_path(&p);
    }
    match u.query() {
        Some("") => u.set_query(None),
        Some(q) => {
            if let Some(q) = normalize_escapes(q) {
                u.set_query(Some(&q));
            }
        }
        None => {}
    }
    Ok(u)
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `out` ends with a `%` that starts no escape, alone or with one hex digit: decoding a
/// hex digit right after it would make an escape that the next pass decodes (`%4%41` →
/// `%4A` → `J`), and normalising would not be idempotent (two keys for one page).
fn ends_in_open_escape(out: &[u8]) -> bool {
    match out {
        [.., b'%'] => true,
        [.., b'%', d] => hex(*d).is_some(),
        _ => false,
    }
}

/// Decode `%XX` of unreserved characters and uppercase the rest; `None` if nothing changes.
pub(crate) fn normalize_escapes(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if !b.contains(&b'%') {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let mut changed = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                let v = h * 16 + l;
                if is_unreserved(v) && !(hex(v).is_some() && ends_in_open_escape(&out)) {
                    out.push(v);
                    changed = true;
                } else {
                    let up = [
                        b'%',
                        b[i + 1].to_ascii_uppercase(),
                        b[i + 2].to_ascii_uppercase(),
                    ];
                    changed |= up[1] != b[i + 1] || up[2] != b[i + 2];
                    out.extend_from_slice(&up);
                }
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII bytes, so this stays valid UTF-8.
    changed.then(|| String::from_utf8(out).expect("ascii-for-ascii replacement"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> String {
        normalize(s).unwrap().to_string()
    }

    #[test]
    fn normalising_twice_changes_nothing_next_to_a_stray_percent() {
        // Found by tests/fuzz_parsers.rs: `%4%41` became `%4A`, then `J`.
        for url in [
            "http://example.com/a%4%41?q=%4%41&r=50%",
            "http://example.com/%%41%41",
            "http://example.com/%%34%31",
        ] {
            let once = n(url);
            assert_eq!(n(&once), once, "{url}");
        }
        assert_eq!(n("http://example.com/a%4%41"), "http://example.com/a%4%41");
        assert_eq!(n("http://example.com/%41%4"), "http://example.com/A%4");
    }

    #[test]
    fn case_ports_fragments_dots() {
        assert_eq!(
            n("HTTP://Example.COM:80/a/./b/../c#top"),
            "http://example.com/a/c"
        );
        assert_eq!(n("https://example.com:443"), "https://example.com/");
        assert_eq!(n("http://example.com:8080/x"), "http://example.com:8080/x");
        assert_eq!(n("http://example.com/a/%2e%2E/b"), "http://example.com/b");
        assert_eq!(n("  http://example.com/x?  "), "http://example.com/x");
    }

    #[test]
    fn percent_encoding() {
        assert_eq!(
            n("http://e.com/%7euser/%41b%2d?q=%7E%2f"),
            "http://e.com/~user/Ab-?q=~%2F"
        );
        assert_eq!(n("http://e.com/a%2fb"), "http://e.com/a%2Fb");
        assert_eq!(n("http://e.com/caf\u{e9}"), "http://e.com/caf%C3%A9");
        assert_eq!(n("http://e.com/100%"), "http://e.com/100%");
        assert_eq!(n("http://e.com/a%zz%4"), "http://e.com/a%zz%4");
    }

    #[test]
    fn a_trailing_dot_of_a_domain_is_dropped() {
        // The scope trims it: one host, so one key for the seen-set, frontier and robots.txt.
        assert_eq!(n("http://A.test./x"), "http://a.test/x");
        assert_eq!(n("http://1.2.3.4./x"), "http://1.2.3.4/x");
        assert_eq!(n("http://a.test.:8080/x"), "http://a.test:8080/x");
        for url in ["http://a.test../x", "http://./x", "http://../x"] {
            if let Ok(once) = normalize(url) {
                assert_eq!(n(once.as_str()), once.as_str(), "{url}");
            }
        }
    }

    #[test]
    fn query_order_kept_idn_punycode() {
        assert_eq!(n("http://e.com/?b=2&a=1"), "http://e.com/?b=2&a=1");
        assert_eq!(
            n("http://B\u{fc}cher.example/"),
            "http://xn--bcher-kva.example/"
        );
    }

    #[test]
    fn only_http() {
        assert!(matches!(
            normalize("ftp://e.com/"),
            Err(NormalizeError::Scheme(_))
        ));
        assert!(matches!(
            normalize("mailto:a@b.c"),
            Err(NormalizeError::Scheme(_))
        ));
        assert!(matches!(
            normalize("/relative"),
            Err(NormalizeError::Parse(_))
        ));
        // Ports outside 1..=65535: never another port.
        assert!(matches!(
            normalize("http://e.com:0/"),
            Err(NormalizeError::PortZero)
        ));
        assert!(matches!(
            normalize("http://e.com:70000/"),
            Err(NormalizeError::Parse(_))
        ));
        let base = normalize("http://e.com/").unwrap();
        assert_eq!(resolve(&base, "//e.com:0/x"), None);
    }

    #[test]
    fn resolve_links() {
        let base = normalize("http://e.com/dir/page.html?x=1").unwrap();
        let r = |h: &str| resolve(&base, h).map(|u| u.to_string());
        assert_eq!(
            r("other.html").as_deref(),
            Some("http://e.com/dir/other.html")
        );
        assert_eq!(r("../up.html#f").as_deref(), Some("http://e.com/up.html"));
        assert_eq!(r("/root").as_deref(), Some("http://e.com/root"));
        assert_eq!(r("?y=2").as_deref(), Some("http://e.com/dir/page.html?y=2"));
        assert_eq!(
            r("#frag").as_deref(),
            Some("http://e.com/dir/page.html?x=1")
        );
        assert_eq!(r("//cdn.e.com/a").as_deref(), Some("http://cdn.e.com/a"));
        assert_eq!(r(" HTTPS://X.org ").as_deref(), Some("https://x.org/"));
        for bad in [
            "javascript:void(0)",
            "mailto:a@b",
            "data:text/html,hi",
            "tel:1",
            "http://",
        ] {
            assert_eq!(r(bad), None, "{bad}");
        }
    }
}
