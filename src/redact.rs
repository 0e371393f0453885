//! Masking credentials in URLs before they reach logs, metrics or result files.
//!
//! Why: crawl lists carry signed URLs and `user:password@` hosts; a log line or a results
//! file is read by more people than the credentials were meant for. The masking is
//! textual (no parsing that could fail on odd input): the password of the userinfo and
//! the values of query parameters whose names look secret become `***`. Header values are
//! masked the same way ([`mask_header`]): those of `Authorization`, `Cookie` and of any
//! header whose name looks secret.

/// The endings of a word of a parameter's or header's name that make its value a secret
/// (see [`is_secret`]).
const SECRET_NAMES: [&str; 9] = [
    "token",
    "key",
    "password",
    "passwd",
    "secret",
    "auth",
    "authorization",
    "signature",
    "sig",
];

/// `url` with the userinfo password and secret-looking query values replaced by `***`.
pub fn mask_url(url: &str) -> String {
    let (mut out, rest) = match userinfo(url) {
        Some((start, at)) => {
            let masked = match url[start..at].split_once(':') {
                Some((user, _)) => format!("{user}:***"),
                None => "***".to_owned(),
            };
            (format!("{}{masked}", &url[..start]), &url[at..])
        }
        None => (String::new(), url),
    };
    let (before_fragment, fragment) = match rest.find('#') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (base, query) = match before_fragment.find('?') {
        Some(i) => (&before_fragment[..i], Some(&before_fragment[i + 1..])),
        None => (before_fragment, None),
    };
    out.push_str(base);
    if let Some(q) = query {
        out.push('?');
        let parts: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if is_secret(name) => format!("{name}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&parts.join("&"));
    }
    out.push_str(fragment);
    out
}

/// Displays as [`mask_url`] of the URL, masking only when formatted: a log field that
/// no subscriber records costs nothing.
pub struct Masked<'a>(pub &'a str);

impl std::fmt::Display for Masked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&mask_url(self.0))
    }
}

/// Header names (lowercase) whose values are always masked, besides the names that look
/// secret by [`SECRET_NAMES`].
const SECRET_HEADERS: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

/// Whether a header's value is to be masked: `Authorization`, `Proxy-Authorization`,
/// `Cookie`, `Set-Cookie`, or a name that looks secret by its words (`X-Api-Key`,
/// `X-Auth-Token`; see [`is_secret`]), in any case.
pub fn is_secret_header(name: &str) -> bool {
    SECRET_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name)) || is_secret(name)
}

/// Whether a request header carries the client's credentials (`Authorization`,
/// `Cookie`, `Proxy-Authorization`, in any case): such headers are not sent past a
/// redirect to another origin, as browsers do not send them.
pub fn is_credential(name: &str) -> bool {
    ["authorization", "cookie", "proxy-authorization"]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

/// `value` as it may be shown for header `name`: `***` when the header looks secret
/// ([`is_secret_header`]), else the value itself.
pub fn mask_header<'a>(name: &str, value: &'a str) -> &'a str {
    if is_secret_header(name) {
        "***"
    } else {
        value
    }
}

/// Whether a name looks secret: one of its words ends with a [`SECRET_NAMES`] entry, in
/// any case (`api_key`, `apiKey`, `apikey`, `X-Auth-Token`, `access_token`, `sig`).
///
/// Why words and not substrings: the masked URL is what `--resume` and the records'
/// compaction know a URL by, so two URLs that differ only in a masked value are one URL to
/// them. A substring test would mask `keyword`, `author` and `design` too, and a search
/// list of `?keyword=shoes` and `?keyword=boots` would lose a record on resume.
fn is_secret(name: &str) -> bool {
    let secret = |w: &[u8]| {
        SECRET_NAMES.iter().any(|s| {
            w.len() >= s.len() && w[w.len() - s.len()..].eq_ignore_ascii_case(s.as_bytes())
        })
    };
    // Parts hold ASCII letters and digits only, so a word is a byte range of one.
    name.as_bytes()
        .split(|b| !b.is_ascii_alphanumeric())
        .any(|part| {
            let mut start = 0;
            for i in 1..part.len() {
                // `apiKey` → `api`, `key`: a lowercase letter or digit, then an uppercase one.
                let boundary = part[i].is_ascii_uppercase()
                    && (part[i - 1].is_ascii_lowercase() || part[i - 1].is_ascii_digit());
                if boundary {
                    if secret(&part[start..i]) {
                        return true;
                    }
                    start = i;
                }
            }
            secret(&part[start..])
        })
}

/// Where the userinfo of `url` starts (after `://`) and ends (its last `@`), if it has
/// one.
///
/// Why not up to the first `/`, `?` or `#` only, as a parser reads it: a password typed
/// with one of them raw (`http://user:pa/ss@10.0.0.5:3128`) makes a URL that does not
/// parse, and the error that says so quotes it. So when what precedes the first of them
/// is `user:` and then no port (digits), the userinfo runs to the last `@`. Where it is a
/// port (`host:8080/@bob`), the `@` is the path's: a password that starts with digits and
/// then a raw `/` is not told apart, nor is a raw delimiter in a user name without a
/// password.
fn userinfo(url: &str) -> Option<(usize, usize)> {
    let scheme_end = url.find("://")?;
    // A `://` after the query or fragment began is a parameter's, not this URL's scheme.
    if url[..scheme_end].contains(['?', '#']) {
        return None;
    }
    let start = scheme_end + 3;
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if let Some(at) = authority.rfind('@') {
        return Some((start, start + at));
    }
    let (user, port) = authority.split_once(':')?;
    let is_port = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    if user.starts_with('[') || is_port {
        return None;
    }
    rest.rfind('@').map(|at| (start, start + at))
}

/// The longest URL (or other word) [`mask_message`] keeps whole, in characters.
pub const MESSAGE_WORD_MAX: usize = 256;
/// The longest message [`mask_message`] returns, in characters.
pub const MESSAGE_MAX: usize = 1024;

/// An error message fit for a log line or a record: every word that looks like a URL
/// (`://`, `?` or `@` in it) masked as [`mask_url`] masks it, each word cut at
/// [`MESSAGE_WORD_MAX`] characters and the whole at [`MESSAGE_MAX`], with an ellipsis
/// where something was cut. Why bounded: a site controls the URLs its answers name (a
/// `Location` of 100 KB), and an error that quotes one must not carry it whole into every
/// record and log line.
pub fn mask_message(msg: &str) -> String {
    let words: Vec<String> = msg
        .split(' ')
        .map(|w| {
            let w = if w.contains("://") || w.contains('?') || w.contains('@') {
                mask_url(w)
            } else {
                w.to_owned()
            };
            cut(&w, MESSAGE_WORD_MAX)
        })
        .collect();
    cut(&words.join(" "), MESSAGE_MAX)
}

/// `s` cut to at most `max` characters, the last of them an ellipsis when cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max.saturating_sub(1)) {
        Some((i, _)) if s.chars().count() > max => format!("{}…", &s[..i]),
        _ => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{is_secret_header, mask_header, mask_message, mask_url, MESSAGE_MAX};

    #[test]
    fn masks_secret_looking_header_values() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "X-Api-Key",
            "X-Auth-Token",
            "x-client-secret",
            "X-Password",
        ] {
            assert!(is_secret_header(name), "{name}");
            assert_eq!(mask_header(name, "hunter2"), "***");
        }
        for name in ["Accept-Language", "User-Agent", "Referer", "X-Request-Id"] {
            assert!(!is_secret_header(name), "{name}");
            assert_eq!(mask_header(name, "en"), "en");
        }
    }

    #[test]
    fn masks_passwords_and_secret_parameters_only() {
        assert_eq!(
            mask_url("https://bob:hunter2@example.com/a?id=7&api_key=abc&Token=x#frag"),
            "https://bob:***@example.com/a?id=7&api_key=***&Token=***#frag"
        );
        assert_eq!(mask_url("http://tok@h/p"), "http://***@h/p");
        assert_eq!(mask_url("http://h/p?page=2"), "http://h/p?page=2");
        assert_eq!(mask_url("not a url ?password=1"), "not a url ?password=***");
        assert_eq!(mask_url("http://h/a@b"), "http://h/a@b");
    }

    #[test]
    fn a_password_with_a_raw_delimiter_is_masked_whole() {
        for (url, masked) in [
            (
                "http://user:pa/ss@10.0.0.5:3128",
                "http://user:***@10.0.0.5:3128",
            ),
            (
                "http://user:pa?ss@10.0.0.5:3128",
                "http://user:***@10.0.0.5:3128",
            ),
            (
                "http://user:pa#ss@10.0.0.5:3128",
                "http://user:***@10.0.0.5:3128",
            ),
            (
                "socks5h://u:a/b?c#d@e@proxy.test:1080",
                "socks5h://u:***@proxy.test:1080",
            ),
            ("http://:pa/ss@h", "http://:***@h"),
            (
                "http://user:/pw@h/a?token=1",
                "http://user:***@h/a?token=***",
            ),
        ] {
            assert_eq!(mask_url(url), masked, "{url}");
            assert_eq!(
                mask_message(&format!("proxy {url} is not a valid URL")),
                format!("proxy {masked} is not a valid URL"),
            );
        }
        // An `@` after a port, or in a path with no `:` before it, is the path's.
        for url in [
            "http://h:8080/@bob",
            "https://h/@bob?x=1",
            "http://[::1]:80/a@b",
            "http://[::1]/a@b",
            "http://h/a?next=http://x/@y",
        ] {
            assert_eq!(mask_url(url), url);
        }
    }

    #[test]
    fn a_name_is_secret_by_its_words_not_its_letters() {
        for name in [
            "api_key",
            "apiKey",
            "apikey",
            "APIKey",
            "access_token",
            "X-Amz-Signature",
            "sig",
            "client_secret",
            "oauth",
            "authorization",
            "passwd",
            "TOKEN",
        ] {
            assert_eq!(
                mask_url(&format!("http://h/?{name}=x")),
                format!("http://h/?{name}=***"),
                "{name}"
            );
        }
        // Search terms and names that only hold a secret word's letters stay as they are:
        // two of them are two URLs to `--resume` and the compaction.
        for name in [
            "keyword",
            "author",
            "design",
            "signup",
            "keys",
            "tokens_left",
        ] {
            let url = format!("http://h/?{name}=shoes");
            assert_eq!(mask_url(&url), url, "{name}");
        }
    }

    #[test]
    fn messages_are_masked_and_bounded() {
        let long = format!("http://h.test/{}?token=abc", "a".repeat(100_000));
        let msg = format!("redirect refused: Location {long} is too long");
        let m = mask_message(&msg);
        assert!(m.chars().count() <= MESSAGE_MAX, "{}", m.len());
        assert!(!m.contains("abc"), "the token is masked before the cut");
        assert!(m.contains("…") && m.starts_with("redirect refused: Location http://h.test/"));
        assert!(m.ends_with("is too long"), "{m}");
        assert_eq!(
            mask_message("to http://u:pw@h.test/?sig=1 failed"),
            "to http://u:***@h.test/?sig=*** failed"
        );
        let many = "word ".repeat(1000);
        let m = mask_message(&many);
        assert_eq!(m.chars().count(), MESSAGE_MAX);
        assert!(m.ends_with('…'));
        assert_eq!(mask_message("short"), "short");
    }
}
