//! The flags' values as clap parses them (`value_parser = ...`): each message says what
//! the value is and what is allowed; clap puts "invalid value 'V' for '--flag <X>': "
//! before it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::overrides::{whole_range, RATE_RANGE};

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

/// The value of a flag that sets the whole-number key `key`: one that is not a whole
/// number its type holds (negative, a fraction, too large) is refused with the key's
/// range; within the type, the range is checked with the settings, naming the flag.
fn whole<T: TryFrom<u64>>(v: &str, key: &str) -> Result<T, String> {
    v.parse::<u64>()
        .ok()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| {
            let (lo, hi) = whole_range(key);
            format!("{v:?} is not a whole number in {lo}..={hi} (sets {key})")
        })
}

pub fn concurrency(v: &str) -> Result<u32, String> {
    whole(v, "crawler.concurrency")
}

pub fn retries(v: &str) -> Result<u32, String> {
    whole(v, "crawler.max_retries")
}

pub fn depth(v: &str) -> Result<u32, String> {
    whole(v, "crawl.max_depth")
}

pub fn max_pages(v: &str) -> Result<u64, String> {
    whole(v, "crawl.max_pages")
}

/// A rate flag's value: a number (its range is checked by `Overrides::check`).
fn rate(v: &str, key: &str) -> Result<f64, String> {
    v.parse().map_err(|_| {
        format!("{v:?} is not a number of requests a second ({RATE_RANGE}; sets {key})")
    })
}

pub fn max_rps(v: &str) -> Result<f64, String> {
    rate(v, "limiter.max_rps")
}

pub fn initial_rps(v: &str) -> Result<f64, String> {
    rate(v, "limiter.initial_rps")
}

/// `--timeout`: seconds (their range is checked with the settings, naming the flag).
pub fn timeout(v: &str) -> Result<f64, String> {
    let max = exitcrawl::config::HOUR_MS / 1000;
    v.parse().map_err(|_| {
        format!("{v:?} is not a number of seconds (0.001 to {max}; sets crawler.timeout_ms)")
    })
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

    #[test]
    fn a_number_of_another_kind_is_told_its_keys_range() {
        assert_eq!(concurrency("7"), Ok(7));
        let e = concurrency("5000000000").unwrap_err();
        assert!(
            e.contains("a whole number in 1..=100000 (sets crawler.concurrency)"),
            "{e}"
        );
        assert!(retries("1.5").unwrap_err().contains("0..=100"));
        assert!(depth("-3").unwrap_err().contains("0..=100000"));
        assert_eq!(max_pages("10000000000"), Ok(10_000_000_000));
        assert!(max_rps("x").unwrap_err().contains("at most 1000000"));
        assert!(timeout("x").unwrap_err().contains("0.001 to 3600"));
    }
}
