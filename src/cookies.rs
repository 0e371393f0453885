//! A small cookie jar: what `[crawler] cookies = true` keeps per (exit, host).
//!
//! Why so small: a crawler keeps cookies so that a site's session or consent cookie
//! comes back to it, not to be a browser. Each exit owns one jar (a site sees one
//! client per source address, and a cookie set for one must never reach the site from
//! another), and within it cookies are **host-only**: kept for the host that set them,
//! sent to that host alone, whatever `Domain` says — so nothing crosses from one host to
//! another either. `Path` is not kept (a cookie goes to every path of its host);
//! `Secure` is honoured (sent over https only); `Max-Age` and `Expires` set a lifetime,
//! and one already over (`Max-Age=0`, an `Expires` in the past) deletes the cookie.
//!
//! Bounded: at most [`MAX_PER_HOST`] cookies per host (the oldest goes), cookies of at
//! most [`MAX_COOKIE_BYTES`], and at most [`MAX_HOSTS`] hosts per jar (later hosts' cookies
//! are not kept). Time comes in as `now`, like everywhere in the core.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// Most cookies kept for one host; a new one beyond it replaces the oldest.
pub const MAX_PER_HOST: usize = 50;
/// Longest `name=value` kept, in bytes (browsers keep 4096).
pub const MAX_COOKIE_BYTES: usize = 4096;
/// Most hosts one jar keeps cookies for.
pub const MAX_HOSTS: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cookie {
    name: String,
    value: String,
    expires: Option<SystemTime>,
    secure: bool,
}

/// Cookies per host (see the module doc).
#[derive(Debug, Default)]
pub struct CookieJar {
    hosts: HashMap<String, Vec<Cookie>>,
    refused: u64,
}

/// What [`CookieJar::store`] did with one `Set-Cookie`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Kept (new, or replacing one of the same name).
    Kept,
    /// Its lifetime was over: the cookie of that name is gone.
    Deleted,
    /// Not a usable `name=value`, too long, or the jar is full of hosts.
    Refused,
}

impl CookieJar {
    /// An empty jar.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cookies kept, all hosts together (expired ones included until they are next seen).
    pub fn len(&self) -> usize {
        self.hosts.values().map(Vec::len).sum()
    }

    /// Whether no cookie is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Set-Cookie` headers refused so far (unusable, too long, too many hosts).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Keep (or delete) the cookie of one `Set-Cookie` header value received from `host`.
    pub fn store(&mut self, host: &str, set_cookie: &str, now: SystemTime) -> Stored {
        let Some(cookie) = parse(set_cookie, now) else {
            self.refused += 1;
            return Stored::Refused;
        };
        let key = host_key(host);
        let expired = cookie.expires.is_some_and(|t| t <= now);
        if expired {
            if let Some(list) = self.hosts.get_mut(&key) {
                list.retain(|c| c.name != cookie.name);
                if list.is_empty() {
                    self.hosts.remove(&key);
                }
            }
            return Stored::Deleted;
        }
        if !self.hosts.contains_key(&key) && self.hosts.len() >= MAX_HOSTS {
            self.refused += 1;
            return Stored::Refused;
        }
        let list = self.hosts.entry(key).or_default();
        list.retain(|c| c.name != cookie.name);
        if list.len() >= MAX_PER_HOST {
            list.remove(0);
        }
        list.push(cookie);
        Stored::Kept
    }

    /// The `Cookie` header value for a request to `host` (`https`: over TLS), or `None`
    /// when there is nothing to send. Expired cookies are dropped on the way.
    pub fn header(&mut self, host: &str, https: bool, now: SystemTime) -> Option<String> {
        let key = host_key(host);
        let list = self.hosts.get_mut(&key)?;
        list.retain(|c| c.expires.is_none_or(|t| t > now));
        if list.is_empty() {
            self.hosts.remove(&key);
            return None;
        }
        let mut out = String::new();
        for c in list.iter().filter(|c| https || !c.secure) {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str(&c.name);
            out.push('=');
            out.push_str(&c.value);
        }
        (!out.is_empty()).then_some(out)
    }
}

/// Hosts compare without case and without a trailing dot.
fn host_key(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// `name=value; Attr; Attr=value` → the cookie, with its expiry as an instant. `None`
/// when the pair is unusable: no `=`, an empty or non-token name, a value with control
/// or non-ASCII characters, or longer than [`MAX_COOKIE_BYTES`] together.
fn parse(set_cookie: &str, now: SystemTime) -> Option<Cookie> {
    let mut parts = set_cookie.split(';');
    let (name, value) = parts.next()?.split_once('=')?;
    let (name, value) = (name.trim(), value.trim());
    let token = |c: char| c.is_ascii_graphic() && !"()<>@,;:\\\"/[]?={}".contains(c);
    if name.is_empty()
        || !name.chars().all(token)
        || !value.chars().all(|c| c.is_ascii_graphic() && c != ';')
        || name.len() + value.len() + 1 > MAX_COOKIE_BYTES
    {
        return None;
    }
    let mut max_age: Option<i64> = None;
    let mut expires: Option<SystemTime> = None;
    let mut secure = false;
    for attr in parts {
        let (k, v) = attr.split_once('=').unwrap_or((attr, ""));
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("max-age") {
            // RFC 6265 §5.2.2: digits with an optional leading minus; anything else is ignored.
            let digits = v.strip_prefix('-').unwrap_or(v);
            if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
                max_age = Some(v.parse().unwrap_or(if v.starts_with('-') {
                    i64::MIN
                } else {
                    i64::MAX
                }));
            }
        } else if k.eq_ignore_ascii_case("expires") {
            if let Ok(t) = httpdate::parse_http_date(v) {
                expires = Some(t);
            }
        } else if k.eq_ignore_ascii_case("secure") {
            secure = true;
        }
    }
    // Max-Age wins over Expires (RFC 6265 §5.3 step 3).
    let expires = match max_age {
        Some(s) if s <= 0 => Some(SystemTime::UNIX_EPOCH),
        Some(s) => now.checked_add(Duration::from_secs(s.unsigned_abs())),
        None => expires,
    };
    Some(Cookie {
        name: name.to_owned(),
        value: value.to_owned(),
        expires,
        secure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    #[test]
    fn keeps_cookies_per_host_and_sends_them_back_to_that_host_only() {
        let mut jar = CookieJar::new();
        assert_eq!(
            jar.store("a.example", "sid=1; Path=/; HttpOnly", t(0)),
            Stored::Kept
        );
        assert_eq!(jar.store("A.Example.", "lang=en", t(0)), Stored::Kept);
        assert_eq!(
            jar.store("b.example", "sid=2; Domain=example", t(0)),
            Stored::Kept
        );
        assert_eq!(
            jar.header("a.example", false, t(1)).as_deref(),
            Some("sid=1; lang=en")
        );
        assert_eq!(
            jar.header("b.example", false, t(1)).as_deref(),
            Some("sid=2")
        );
        assert_eq!(jar.header("example", false, t(1)), None);
        assert_eq!(jar.header("c.a.example", false, t(1)), None);
        // Same name again: replaced, in place of the old one at the end.
        jar.store("a.example", "sid=3", t(2));
        assert_eq!(
            jar.header("a.example", false, t(3)).as_deref(),
            Some("lang=en; sid=3")
        );
        assert_eq!(jar.len(), 3);
    }

    #[test]
    fn max_age_and_expires_set_lifetimes_and_delete() {
        let mut jar = CookieJar::new();
        jar.store("h", "a=1; Max-Age=10", t(0));
        jar.store("h", "b=2; Expires=Wed, 21 Oct 2099 07:28:00 GMT", t(0));
        jar.store("h", "c=3", t(0));
        assert_eq!(
            jar.header("h", false, t(9)).as_deref(),
            Some("a=1; b=2; c=3")
        );
        assert_eq!(jar.header("h", false, t(10)).as_deref(), Some("b=2; c=3"));
        assert_eq!(jar.store("h", "b=x; Max-Age=0", t(11)), Stored::Deleted);
        assert_eq!(
            jar.store("h", "c=; Expires=Thu, 01 Jan 1970 00:00:00 GMT", t(11)),
            Stored::Deleted
        );
        assert_eq!(jar.header("h", false, t(12)), None);
        assert!(jar.is_empty());
        // Max-Age wins over Expires; a malformed Max-Age is ignored.
        jar.store(
            "h",
            "d=4; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=60",
            t(0),
        );
        jar.store("h", "e=5; Max-Age=soon", t(0));
        assert_eq!(jar.header("h", false, t(30)).as_deref(), Some("d=4; e=5"));
        jar.store("h", "d=4; max-age=-1", t(31));
        assert_eq!(jar.header("h", false, t(32)).as_deref(), Some("e=5"));
    }

    #[test]
    fn secure_cookies_go_over_https_only() {
        let mut jar = CookieJar::new();
        jar.store("h", "s=1; Secure", t(0));
        jar.store("h", "p=2", t(0));
        assert_eq!(jar.header("h", false, t(0)).as_deref(), Some("p=2"));
        assert_eq!(jar.header("h", true, t(0)).as_deref(), Some("s=1; p=2"));
    }

    #[test]
    fn unusable_or_oversized_cookies_are_refused_and_the_jar_is_bounded() {
        let mut jar = CookieJar::new();
        for bad in ["novalue", "=v", "a b=1", "a=\u{7}", "a=é", "a=1\r\nX: y"] {
            assert_eq!(jar.store("h", bad, t(0)), Stored::Refused, "{bad:?}");
        }
        let big = format!("big={}", "x".repeat(MAX_COOKIE_BYTES));
        assert_eq!(jar.store("h", &big, t(0)), Stored::Refused);
        assert_eq!(jar.refused(), 7);
        for i in 0..MAX_PER_HOST + 5 {
            jar.store("h", &format!("c{i}=1"), t(0));
        }
        let header = jar.header("h", false, t(0)).unwrap();
        assert_eq!(header.split("; ").count(), MAX_PER_HOST);
        assert!(header.starts_with("c5=1; "), "the oldest went: {header}");
    }
}
