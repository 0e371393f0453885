//! The flags' values as clap parses them (`value_parser = ...`): each message says what
//! the value is and what is allowed; clap puts "invalid value 'V' for '--flag <X>': "
//! before it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Longest `--grace`, `--claim-idle`, `--idle-exit`.
const MAX_SECS: f64 = 86_400.0;

pub fn text(v: &str) -> Result<String, String> {
    if v.is_empty() {
        return Err("an empty value (a file, or - for stdin)".into());
    }
    Ok(v.to_string())
}

pub fn path(v: &str) -> Result<PathBuf, String> {
    text(v).map(PathBuf::from)
}

/// Seconds in `(0 or more, MAX_SECS]`; the message says which rule `v` broke and what
/// is allowed (`range`).
fn seconds(v: &str, min_exclusive: bool, range: &str) -> Result<Duration, String> {
    let s: f64 = match v.trim().parse() {
        Ok(s) if f64::is_finite(s) => s,
        _ => return Err(format!("{v:?} is not a number of seconds ({range})")),
    };
    let low_ok = if min_exclusive { s > 0.0 } else { s >= 0.0 };
    if low_ok && s <= MAX_SECS {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(format!("{v} seconds is out of range ({range})"))
    }
}

pub fn grace(v: &str) -> Result<Duration, String> {
    seconds(v, false, "0 to 86400")
}

pub fn positive_secs(v: &str) -> Result<Duration, String> {
    seconds(v, true, "more than 0, at most 86400")
}

/// A number; its range is checked with the settings, naming the flag.
pub fn number<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not a number of the kind this flag takes"))
}

pub fn positive_count(v: &str) -> Result<u64, String> {
    v.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{v:?} is not a positive integer"))
}

pub fn socket_addr(v: &str) -> Result<SocketAddr, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not a socket address (e.g. 127.0.0.1:9100)"))
}

/// Bytes, or with a K/M/G suffix (1024-based); at least 1, at most 1 TiB.
pub fn byte_size(v: &str) -> Result<u64, String> {
    let bad = || format!("{v:?} is not a size: bytes, or a number with K, M or G (1 to 1024G)");
    let t = v.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(mult)
        .filter(|b| (1..=1u64 << 40).contains(b))
        .ok_or_else(bad)
}

/// `--scope`: a `[crawl] scope` value (`same-host` for `same_host` too).
pub fn crawl_scope(v: &str) -> Result<exitcrawl::config::CrawlScope, String> {
    use exitcrawl::config::CrawlScope;
    let want = v.replace('-', "_");
    CrawlScope::ALL
        .into_iter()
        .find(|c| c.as_str() == want)
        .ok_or_else(|| {
            let all: Vec<&str> = CrawlScope::ALL.iter().map(|c| c.as_str()).collect();
            format!("{v:?} is not a scope (expected {})", all.join(", "))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(byte_size("4096"), Ok(4096));
        assert_eq!(byte_size("2K"), Ok(2048));
        assert_eq!(byte_size("1g"), Ok(1 << 30));
        assert!(byte_size("0").is_err());
        assert!(byte_size("1T").is_err());
        assert!(byte_size("-1").unwrap_err().contains("K, M or G"));
    }
}
