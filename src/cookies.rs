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
//! Bounded, so that a broad crawl keeps working and a site cannot grow it: at most
//! [`MAX_PER_HOST`] cookies and [`MAX_HOST_BYTES`] of them per host (the oldest go: a
//! `Cookie` header past what servers take, 8 KiB by default in nginx, would have every
//! page of the host refused), cookies of at most [`MAX_COOKIE_BYTES`], and at most
//! [`MAX_HOSTS`] hosts per jar: a new host beyond them takes the place of the host used
//! longest ago (refusing it instead stopped cookies for every later host of the crawl).
//! `Expires` is read as RFC 6265 §5.1.1 says, leniently: the dashed dates of older
//! servers and years before 1970 (which delete) included. Time comes in as `now`, like
//! everywhere in the core.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

/// Most cookies kept for one host; a new one beyond it replaces the oldest.
pub const MAX_PER_HOST: usize = 50;
/// Most bytes of `name=value` pairs kept for one host: what its `Cookie` header holds.
pub const MAX_HOST_BYTES: usize = 8192;
/// Longest `name=value` kept, in bytes (browsers keep 4096).
pub const MAX_COOKIE_BYTES: usize = 4096;
/// Most hosts one jar keeps cookies for; beyond it the host used longest ago goes.
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
    hosts: HashMap<String, Host>,
    /// Hosts in the order they were used (stored to or sent from), each with the use's
    /// number; an entry whose number is not its host's latest is stale and skipped.
    used: VecDeque<(String, u64)>,
    uses: u64,
    refused: u64,
}

/// One host's cookies, and its latest use (see [`CookieJar::used`]).
#[derive(Debug, Default)]
struct Host {
    cookies: Vec<Cookie>,
    used: u64,
}

impl Cookie {
    /// Bytes it takes in a `Cookie` header (`name=value`).
    fn bytes(&self) -> usize {
        self.name.len() + 1 + self.value.len()
    }
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
        self.hosts.values().map(|h| h.cookies.len()).sum()
    }

    /// `key` was used now: it goes last in the order of eviction.
    fn touch(&mut self, key: &str) {
        let Some(h) = self.hosts.get_mut(key) else {
            return;
        };
        if h.used != 0 && h.used == self.uses {
            // Used last already: its place in the order stands (a host's pages in a row
            // cost no entry each).
            return;
        }
        self.uses += 1;
        h.used = self.uses;
        self.used.push_back((key.to_owned(), self.uses));
        // Stale entries are dropped as they reach the front; past twice the hosts, the
        // order is rebuilt so that it stays within a constant of them.
        if self.used.len() > 2 * self.hosts.len() + 16 {
            let hosts = &self.hosts;
            self.used
                .retain(|(k, n)| hosts.get(k).is_some_and(|h| h.used == *n));
        }
    }

    /// Make room for one more host: the one used longest ago goes.
    fn evict_one(&mut self) {
        while let Some((key, n)) = self.used.pop_front() {
            if self.hosts.get(&key).is_some_and(|h| h.used == n) {
                self.hosts.remove(&key);
                return;
            }
        }
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
            if let Some(h) = self.hosts.get_mut(&key) {
                h.cookies.retain(|c| c.name != cookie.name);
                if h.cookies.is_empty() {
                    self.hosts.remove(&key);
                }
            }
            return Stored::Deleted;
        }
        if !self.hosts.contains_key(&key) && self.hosts.len() >= MAX_HOSTS {
            self.evict_one();
        }
        let list = &mut self.hosts.entry(key.clone()).or_default().cookies;
        list.retain(|c| c.name != cookie.name);
        let mut bytes: usize = list.iter().map(Cookie::bytes).sum::<usize>() + cookie.bytes();
        while !list.is_empty() && (list.len() >= MAX_PER_HOST || bytes > MAX_HOST_BYTES) {
            bytes -= list.remove(0).bytes();
        }
        list.push(cookie);
        self.touch(&key);
        Stored::Kept
    }

    /// The `Cookie` header value for a request to `host` (`https`: over TLS), or `None`
    /// when there is nothing to send. Expired cookies are dropped on the way.
    pub fn header(&mut self, host: &str, https: bool, now: SystemTime) -> Option<String> {
        let key = host_key(host);
        let list = &mut self.hosts.get_mut(&key)?.cookies;
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
        self.touch(&key);
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
            if let Some(t) = cookie_date(v) {
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

/// An `Expires` date as RFC 6265 §5.1.1 reads it: tokens between delimiters, the first
/// `hh:mm:ss` the time, the first 1–2 digit number the day, the first month name the
/// month, the first 2–4 digit number the year (70–99 → 19xx, 0–69 → 20xx). Reads what
/// `httpdate` refuses (`Thu, 01-Jan-1970 00:00:00 GMT`, years before 1970, which are in
/// the past: the epoch stands for them). `None` for a date that is not one.
fn cookie_date(v: &str) -> Option<SystemTime> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let delimiter = |c: char| !(c.is_ascii_alphanumeric() || c == ':');
    let leading_digits = |t: &str, min: usize, max: usize| -> Option<u32> {
        let n = t.bytes().take_while(u8::is_ascii_digit).count();
        (min..=max).contains(&n).then(|| t[..n].parse().ok())?
    };
    let (mut time, mut day, mut month, mut year) = (None, None, None, None);
    for t in v.split(delimiter).filter(|t| !t.is_empty()) {
        if time.is_none() {
            let mut hms = t.splitn(3, ':').map(|p| leading_digits(p, 1, 2));
            if let (Some(Some(h)), Some(Some(m)), Some(Some(s))) =
                (hms.next(), hms.next(), hms.next())
            {
                time = Some((h, m, s));
                continue;
            }
        }
        if day.is_none() {
            if let Some(d) = leading_digits(t, 1, 2) {
                day = Some(d);
                continue;
            }
        }
        if month.is_none() {
            let lower = t.get(..3).map(str::to_ascii_lowercase);
            if let Some(m) = lower.and_then(|l| MONTHS.iter().position(|&n| n == l)) {
                month = Some(m as u32 + 1);
                continue;
            }
        }
        if year.is_none() {
            if let Some(y) = leading_digits(t, 2, 4) {
                year = Some(match y {
                    70..=99 => y + 1900,
                    0..=69 => y + 2000,
                    y => y,
                });
            }
        }
    }
    let ((h, m, s), day, month, year) = (time?, day?, month?, year?);
    if !(1..=31).contains(&day) || year < 1601 || h > 23 || m > 59 || s > 59 {
        return None;
    }
    if year < 1970 {
        return Some(SystemTime::UNIX_EPOCH);
    }
    // Days from 1970-01-01 to the date (the proleptic Gregorian calendar).
    let days_from_civil = |y: i64, m: i64, d: i64| {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    };
    let days = days_from_civil(i64::from(year), i64::from(month), i64::from(day));
    let secs = days * 86_400 + i64::from(h * 3600 + m * 60 + s);
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
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

    #[test]
    fn a_full_jar_makes_room_by_the_host_used_longest_ago() {
        let mut jar = CookieJar::new();
        for i in 0..MAX_HOSTS {
            assert_eq!(jar.store(&format!("h{i}"), "a=1", t(0)), Stored::Kept);
        }
        // h0 is used again: h1 is now the one used longest ago.
        assert_eq!(jar.header("h0", false, t(1)).as_deref(), Some("a=1"));
        assert_eq!(
            jar.store("new", "a=1", t(2)),
            Stored::Kept,
            "a new host is kept"
        );
        assert_eq!(jar.header("new", false, t(3)).as_deref(), Some("a=1"));
        assert_eq!(
            jar.header("h1", false, t(3)),
            None,
            "the host used longest ago went"
        );
        assert_eq!(jar.header("h0", false, t(3)).as_deref(), Some("a=1"));
        assert_eq!(jar.len(), MAX_HOSTS);
        // Many more hosts: still bounded, and the bookkeeping with it.
        for i in 0..3 * MAX_HOSTS {
            jar.store(&format!("x{i}"), "a=1", t(4));
        }
        assert_eq!(jar.len(), MAX_HOSTS);
        assert!(jar.used.len() <= 2 * MAX_HOSTS + 16, "{}", jar.used.len());
        assert_eq!(jar.refused(), 0);
    }

    #[test]
    fn a_hosts_cookies_stay_within_what_a_cookie_header_may_hold() {
        let mut jar = CookieJar::new();
        let value = "v".repeat(1000);
        for i in 0..20 {
            jar.store("h", &format!("c{i:02}={value}"), t(0));
        }
        let header = jar.header("h", false, t(0)).unwrap();
        assert!(header.len() <= MAX_HOST_BYTES + 2 * 20, "{}", header.len());
        assert!(
            header.ends_with(&format!("c19={value}")),
            "the newest stays"
        );
        assert!(!header.contains("c00="), "the oldest went");
    }

    #[test]
    fn expires_is_read_leniently_as_rfc_6265_says() {
        let at = |v: &str| {
            cookie_date(v).map(|t| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs())
        };
        // The three HTTP-date forms and the dashed Netscape one.
        assert_eq!(at("Wed, 21 Oct 2015 07:28:00 GMT"), Some(1_445_412_480));
        assert_eq!(at("Wednesday, 21-Oct-15 07:28:00 GMT"), Some(1_445_412_480));
        assert_eq!(at("Wed Oct 21 07:28:00 2015"), Some(1_445_412_480));
        assert_eq!(at("Wed, 21-Oct-2015 07:28:00 GMT"), Some(1_445_412_480));
        assert_eq!(at("Thu, 01-Jan-1970 00:00:00 GMT"), Some(0));
        // Before 1970: in the past.
        assert_eq!(at("Mon, 01 Jan 1900 00:00:00 GMT"), Some(0));
        assert_eq!(at("Sat, 29 Feb 2020 23:59:59 GMT"), Some(1_583_020_799));
        for bad in [
            "",
            "soon",
            "21 Oct 2015",
            "Wed, 32 Oct 2015 07:28:00 GMT",
            "Wed, 21 Oct 2015 25:00:00 GMT",
        ] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
        // So a dashed date in the past deletes.
        let mut jar = CookieJar::new();
        jar.store("h", "a=1", t(0));
        assert_eq!(
            jar.store("h", "a=; Expires=Thu, 01-Jan-1970 00:00:01 GMT", t(1)),
            Stored::Deleted
        );
        assert!(jar.is_empty());
    }
}
