//! A URL's origin and path without parsing it, when it is already written the way the
//! URL parser would write it — which URL lists nearly always are.
//!
//! Why: the robots.txt check needs both for every URL, and `url::Url::parse` plus
//! `origin().ascii_serialization()` cost about a microsecond per URL (measured), a
//! tenth of the whole fetch against a fast local site. Any URL this module is not sure
//! about goes to the parser; the tests check that both always agree.

use exitcrawl::discover::robots::origin_key;
use exitcrawl_actors::http::Uri;
use exitcrawl_actors::MAX_URL_BYTES;
use url::{Position, Url};

/// `(origin, path_and_query)` as `Url` gives them: `origin().ascii_serialization()` and
/// `url[BeforePath..AfterQuery]`. Borrowed when the string is canonical, else parsed.
pub enum Split<'a> {
    Canonical(&'a str, &'a str),
    Parsed(Url),
    /// Not an http(s) URL with a host: the crawler refuses it with its own reason.
    Invalid,
}

impl<'a> Split<'a> {
    pub fn of(url: &'a str) -> Split<'a> {
        if url.len() > MAX_URL_BYTES {
            return Split::Invalid;
        }
        if let Some((origin, path)) = split_canonical(url) {
            return Split::Canonical(origin, path);
        }
        match Url::parse(url) {
            // The parser takes port 0, which no request can go to, and (percent-encoding
            // them) spaces and other bytes a request line cannot carry, and the U+FFFD a
            // line that was not UTF-8 leaves: the crawler refuses all of them as
            // invalid_url, and robots.txt is not asked for them.
            Ok(u)
                if matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.port() != Some(0)
                    && !url.contains('\u{fffd}')
                    && (!url.is_ascii() || url.parse::<Uri>().is_ok()) =>
            {
                Split::Parsed(u)
            }
            _ => Split::Invalid,
        }
    }

    /// The origin, owned (a cache key to keep).
    pub fn origin(&self) -> String {
        match self {
            Split::Canonical(o, _) => (*o).to_string(),
            Split::Parsed(u) => origin_key(u),
            Split::Invalid => String::new(),
        }
    }

    /// The path and query.
    pub fn path(&self) -> &str {
        match self {
            Split::Canonical(_, p) => p,
            Split::Parsed(u) => &u[Position::BeforePath..Position::AfterQuery],
            Split::Invalid => "/",
        }
    }
}

/// See [`Split`]: `None` unless every part is already canonical.
pub fn split_canonical(url: &str) -> Option<(&str, &str)> {
    let (rest, default_port) = if let Some(r) = url.strip_prefix("http://") {
        (r, "80")
    } else if let Some(r) = url.strip_prefix("https://") {
        (r, "443")
    } else {
        return None;
    };
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, port) = match rest[..auth_end].split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (&rest[..auth_end], None),
    };
    if !canonical_host(host) || !port.is_none_or(|p| canonical_port(p, default_port)) {
        return None;
    }
    let origin = &url[..url.len() - rest.len() + auth_end];
    let tail = &rest[auth_end..];
    let path_query = &tail[..tail.find('#').unwrap_or(tail.len())];
    if path_query.is_empty() {
        // The parser writes an empty path as "/" (the origin stays as written).
        return tail.is_empty().then_some((origin, "/"));
    }
    if !path_query.starts_with('/') || !canonical_path_query(path_query) {
        return None;
    }
    Some((origin, path_query))
}

/// Lower-case ASCII letters, digits, `-` and `.` in non-empty labels; not punycode (the
/// parser checks it); a name whose last label is a number is an IPv4 address to the
/// parser, which rewrites every form but the plain dotted quad.
fn canonical_host(host: &str) -> bool {
    let ok_bytes = host
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !ok_bytes || host.is_empty() || host.split('.').any(str::is_empty) {
        return false;
    }
    if host.split('.').any(|l| l.starts_with("xn--")) {
        return false;
    }
    let last = host.rsplit('.').next().unwrap_or_default();
    let numeric = last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x");
    !numeric || dotted_quad(host)
}

fn dotted_quad(host: &str) -> bool {
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

/// Digits without a leading zero, at most 65535, not the scheme's default (the parser
/// drops a default port).
fn canonical_port(port: &str, default_port: &str) -> bool {
    !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
        && !port.starts_with('0')
        && port.parse::<u16>().is_ok()
        && port != default_port
}

/// Visible ASCII the parser leaves as it is in a path and a query, and no dot segment
/// (`/.`, `%2e`), which it would resolve.
fn canonical_path_query(pq: &str) -> bool {
    let kept = |b: u8| (0x21..=0x7e).contains(&b) && !b"\"#<>\\`{}'".contains(&b);
    let path = &pq[..pq.find('?').unwrap_or(pq.len())];
    pq.bytes().all(kept) && !path.contains("/.") && !path.to_ascii_lowercase().contains("%2e")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(u: &str) -> Option<(String, String)> {
        let url = Url::parse(u).ok()?;
        Some((
            origin_key(&url),
            url[Position::BeforePath..Position::AfterQuery].to_string(),
        ))
    }

    #[test]
    fn agrees_with_the_parser() {
        let cases = [
            "http://127.0.0.1:8080/c/1",
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080?q=1",
            "https://example.com/a/b?x=1&y=%20z#frag",
            "https://example.com:443/",
            "http://example.com:80/",
            "http://example.com:080/",
            "http://example.com:/",
            "http://example.com:99999/",
            "HTTP://example.com/",
            "http://Example.com/",
            "http://example.com./x",
            "http://exa_mple.com/x",
            "http://127.1/",
            "http://0x7f.0.0.1/",
            "http://127.000.0.1/",
            "http://1.2.3.4.5/",
            "http://256.1.1.1/",
            "http://a.b.123/",
            "http://xn--nxasmq6b.com/",
            "http://user:pw@example.com/",
            "http://[::1]:8080/x",
            "http://example.com/a/./b",
            "http://example.com/a/../b",
            "http://example.com/a/%2e%2E/b",
            "http://example.com/a.b/.c",
            "http://example.com/?a=/./b",
            "http://example.com/a b",
            "http://example.com/a\"b",
            "http://example.com/a\\b",
            "http://example.com/a?b'c",
            "http://example.com/a|b^c[d]e@f:g;h=i,j+k$l!m*n(o)~p",
            "http://example.com/é",
            "http://example.com//x",
            "http://example.com/x?",
            "http://example.com/x#",
            "http://example.com#x",
            "http://-a-.com/",
            "ftp://example.com/",
            "not a url",
            "http://",
            "http:///x",
        ];
        for u in cases {
            if let Some((o, p)) = split_canonical(u) {
                assert_eq!(Some((o.to_string(), p.to_string())), parsed(u), "{u}");
            }
            let s = Split::of(u);
            if let Split::Invalid = s {
                // Not an http(s) URL, or one the crawler cannot send as written.
                let unsendable = u.is_ascii() && u.parse::<Uri>().is_err();
                assert!(
                    unsendable || parsed(u).is_none_or(|(o, _)| !o.starts_with("http")),
                    "{u}"
                );
            } else {
                assert_eq!(Some((s.origin(), s.path().to_string())), parsed(u), "{u}");
            }
        }
        // Port 0 parses, but is no port; a space is no part of a request line, and U+FFFD
        // is what a line that was not UTF-8 left; nor is a URL past the
        // crawler's length: left to the crawler, which refuses them, with no robots.txt.
        let long = format!("http://example.com/{}", "a".repeat(MAX_URL_BYTES));
        for u in [
            "http://127.0.0.1:0/x",
            "https://example.com:0",
            "http://[::1]:00/",
            "http://example.com/a b",
            "http://example.com/\u{fffd}",
            &long,
        ] {
            assert!(matches!(Split::of(u), Split::Invalid), "{u}");
        }
        // The common forms take the fast path.
        for u in [
            "http://127.0.0.1:8080/c/1",
            "https://example.com/a/b?x=1",
            "http://e.org",
        ] {
            assert!(split_canonical(u).is_some(), "{u}");
        }
    }
}
