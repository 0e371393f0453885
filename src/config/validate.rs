//! Range and consistency checks: [`Settings::validate`].
//!
//! Serde only checks types; everything a type cannot say (ranges, cross-key relations,
//! uniqueness) is checked here. The first problem found is returned, as
//! `key.path: <value> <what is wrong / what is allowed>`.

use std::collections::HashMap;
use std::net::IpAddr;

use super::crawl::CrawlSettings;
use super::error::ConfigError;
use super::schema::{
    Algorithm, Backend, CrawlerSettings, ExitSettings, HealthSettings, LimiterSettings,
    RedisSettings, Scope,
};
use super::Settings;

type Result<T = ()> = std::result::Result<T, ConfigError>;

/// Longest timeout / interval accepted anywhere, in ms (one hour).
pub const HOUR_MS: u64 = 3_600_000;
/// One day, in ms.
pub(super) const DAY_MS: u64 = 86_400_000;
/// The highest rate accepted anywhere, requests/s.
pub const MAX_RATE: f64 = 1_000_000.0;

impl Settings {
    /// Check every range and every relation between keys; see the field docs for what is
    /// allowed. Loading calls this; call it yourself on settings built in code.
    ///
    /// The error names the key path (`exits[1].source_ip`), the value found and what is
    /// allowed.
    pub fn validate(&self) -> Result {
        validate_crawler(&self.crawler)?;
        validate_limiter(&self.limiter)?;
        validate_forgetting(&self.crawler, &self.limiter)?;
        validate_health(&self.health)?;
        validate_redis(&self.redis, &self.limiter)?;
        uint("metrics.host_labels", self.metrics.host_labels.into())?;
        validate_crawl(&self.crawl)?;
        validate_exits(&self.exits)
    }
}

fn validate_crawl(c: &CrawlSettings) -> Result {
    for (name, list) in [("allow", &c.allow), ("deny", &c.deny)] {
        for (i, pattern) in list.iter().enumerate() {
            if let Err(e) = regex::Regex::new(pattern) {
                // regex's message spans several lines (pattern, caret, reason): keep the reason.
                let reason = e.to_string();
                let reason = reason
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("invalid")
                    .trim()
                    .trim_start_matches("error: ")
                    .to_string();
                return Err(ConfigError::invalid(
                    format!("crawl.{name}[{i}]"),
                    format!("{} is not a valid regex: {reason}", show(pattern)),
                ));
            }
        }
    }
    if let Some(d) = c.max_depth {
        uint("crawl.max_depth", d.into())?;
    }
    if let Some(n) = c.max_pages {
        uint("crawl.max_pages", n)?;
    }
    uint("crawl.seen_limit", c.seen_limit)?;
    uint("crawl.per_host_concurrency", c.per_host_concurrency.into())?;
    uint("crawl.robots_ttl_ms", c.robots_ttl_ms)?;
    if let Some(t) = &c.user_agent_token {
        if t.is_empty()
            || t.len() > 64
            || !t
                .chars()
                .all(|ch| ch.is_ascii_alphabetic() || ch == '_' || ch == '-')
        {
            return Err(ConfigError::invalid(
                "crawl.user_agent_token",
                format!(
                    "{} must be 1..=64 characters from A-Z a-z _ - (the name robots.txt User-agent lines use, e.g. \"exitcrawl\"), or leave it out to use the product token of crawler.user_agent",
                    show(t)
                ),
            ));
        }
    }
    Ok(())
}

fn validate_crawler(c: &CrawlerSettings) -> Result {
    uint("crawler.concurrency", c.concurrency.into())?;
    uint("crawler.timeout_ms", c.timeout_ms)?;
    uint("crawler.connect_timeout_ms", c.connect_timeout_ms)?;
    if c.connect_timeout_ms > c.timeout_ms {
        return Err(ConfigError::invalid(
            "crawler.connect_timeout_ms",
            format!(
                "{} must be ≤ crawler.timeout_ms ({}): the whole request includes connecting",
                c.connect_timeout_ms, c.timeout_ms
            ),
        ));
    }
    uint("crawler.max_retries", c.max_retries.into())?;
    let ua = &c.user_agent;
    if ua.is_empty() || ua.len() > 512 || !ua.chars().all(|ch| (' '..='~').contains(&ch)) {
        return Err(ConfigError::invalid(
            "crawler.user_agent",
            format!(
                "{} must be 1..=512 characters of visible ASCII or spaces (it is sent as an HTTP header)",
                show(ua)
            ),
        ));
    }
    uint("crawler.max_body_bytes", c.max_body_bytes)?;
    uint("crawler.max_redirects", c.max_redirects.into())?;
    uint("crawler.queue_capacity", c.queue_capacity.into())?;
    uint("crawler.retry_backoff_max_ms", c.retry_backoff_max_ms)?;
    uint("crawler.retry_backoff_base_ms", c.retry_backoff_base_ms)?;
    if c.retry_backoff_base_ms > c.retry_backoff_max_ms {
        return Err(ConfigError::invalid(
            "crawler.retry_backoff_base_ms",
            format!(
                "{} must be ≤ crawler.retry_backoff_max_ms ({})",
                c.retry_backoff_base_ms, c.retry_backoff_max_ms
            ),
        ));
    }
    float_in(
        "crawler.retry_budget",
        c.retry_budget,
        0.0,
        1.0,
        "in 0.0..=1.0",
    )?;
    uint("crawler.give_up_after_ms", c.give_up_after_ms)?;
    uint("crawler.max_retry_after_ms", c.max_retry_after_ms)?;
    uint(
        "crawler.per_host_connections",
        c.per_host_connections.into(),
    )?;
    uint("crawler.keep_alive_ms", c.keep_alive_ms)?;
    uint("crawler.pool_hosts", c.pool_hosts.into())?;
    uint("crawler.dns_ttl_ms", c.dns_ttl_ms)?;
    validate_headers(&c.headers)
}

/// Most `[crawler.headers]` entries.
pub const MAX_HEADERS: usize = 64;

/// Headers `[crawler.headers]` may not set, and why.
const RESERVED_HEADERS: [(&str, &str); 12] = [
    ("user-agent", "set crawler.user_agent (or --user-agent) instead, so robots.txt is matched against the same name"),
    ("accept-encoding", "the exit asks for the encodings it decodes itself"),
    ("host", "it is the URL's host"),
    ("content-length", "it frames the request"),
    ("transfer-encoding", "it frames the request"),
    ("connection", "the client manages connections"),
    ("keep-alive", "the client manages connections"),
    ("proxy-connection", "the client manages connections"),
    ("upgrade", "the client manages connections"),
    ("te", "it frames the answer"),
    ("trailer", "it frames the request"),
    ("expect", "the client does not wait for 100 Continue"),
];

/// `[crawler.headers]`: names that are HTTP tokens, each once; values a header can
/// carry. A value is shown masked when the header looks secret.
pub(super) fn validate_headers(headers: &std::collections::BTreeMap<String, String>) -> Result {
    if headers.len() > MAX_HEADERS {
        return Err(ConfigError::invalid(
            "crawler.headers",
            format!(
                "{} entries; at most {MAX_HEADERS} are allowed",
                headers.len()
            ),
        ));
    }
    let mut seen: HashMap<String, &str> = HashMap::new();
    for (name, value) in headers {
        let key = header_key(name);
        if let Err(why) = check_header(name, value) {
            return Err(ConfigError::invalid(key, why));
        }
        if let Some(first) = seen.insert(name.to_ascii_lowercase(), name) {
            return Err(ConfigError::invalid(
                key,
                format!(
                    "{} is given twice (also as {}); header names do not differ by case",
                    show(name),
                    show(first)
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `name: value` may be sent as a configured header (`[crawler.headers]`, `-H`):
/// `Err` says what is wrong and what is allowed, with the value masked when the header
/// looks secret ([`crate::redact::is_secret_header`]).
pub fn check_header(name: &str, value: &str) -> std::result::Result<(), String> {
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || name.len() > 128 || !name.chars().all(tchar) {
        return Err(format!(
            "{} is not a header name: 1..=128 characters of A-Z a-z 0-9 and !#$%&'*+-.^_`|~ (e.g. \"Accept-Language\")",
            show(name)
        ));
    }
    let lower = name.to_ascii_lowercase();
    if let Some((_, why)) = RESERVED_HEADERS.iter().find(|(n, _)| *n == lower) {
        return Err(format!("{} may not be set here: {why}", show(name)));
    }
    let ok = |c: char| c == ' ' || c == '\t' || c.is_ascii_graphic();
    if value.len() > 8192 || !value.chars().all(ok) {
        let shown = if crate::redact::is_secret_header(name) {
            "the value (masked: the header looks secret)".to_string()
        } else {
            show(value)
        };
        return Err(format!(
            "{shown} must be 0..=8192 characters of visible ASCII, spaces or tabs (it is sent as an HTTP header)"
        ));
    }
    Ok(())
}

/// `crawler.headers.<name>`, the name quoted when it is not a bare TOML key.
fn header_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        format!("crawler.headers.{name}")
    } else {
        format!("crawler.headers.{}", show(name))
    }
}

fn validate_limiter(l: &LimiterSettings) -> Result {
    if !(l.max_rps > 0.0 && l.max_rps <= MAX_RATE) {
        return Err(ConfigError::invalid(
            "limiter.max_rps",
            format!("{} must be > 0 and ≤ {}", num(l.max_rps), num(MAX_RATE)),
        ));
    }
    positive_up_to("limiter.min_rps", l.min_rps, l.max_rps, "limiter.max_rps")?;
    positive_up_to(
        "limiter.initial_rps",
        l.initial_rps,
        l.max_rps,
        "limiter.max_rps",
    )?;
    if l.algorithm == Algorithm::Aimd && l.initial_rps < l.min_rps {
        return Err(ConfigError::invalid(
            "limiter.initial_rps",
            format!(
                "{} must be ≥ limiter.min_rps ({}) with algorithm = \"aimd\"",
                num(l.initial_rps),
                num(l.min_rps)
            ),
        ));
    }
    positive_up_to(
        "limiter.increase_rps",
        l.increase_rps,
        l.max_rps,
        "limiter.max_rps",
    )?;
    if !(l.decrease > 0.0 && l.decrease < 1.0) {
        return Err(ConfigError::invalid(
            "limiter.decrease",
            format!(
                "{} must be strictly between 0 and 1 (the factor the rate is multiplied by on a throttle signal)",
                num(l.decrease)
            ),
        ));
    }
    if !(l.latency_tolerance > 1.0 && l.latency_tolerance <= 100.0) {
        return Err(ConfigError::invalid(
            "limiter.latency_tolerance",
            format!("{} must be > 1 and ≤ 100", num(l.latency_tolerance)),
        ));
    }
    uint("limiter.burst", l.burst.into())?;
    uint("limiter.hold_ms", l.hold_ms)?;
    uint("limiter.forget_idle_ms", l.forget_idle_ms)?;
    float_in("limiter.jitter", l.jitter, 0.0, 0.5, "in 0.0..=0.5")?;
    for (i, &s) in l.throttle_statuses.iter().enumerate() {
        uint(&format!("limiter.throttle_statuses[{i}]"), s.into())?;
    }
    Ok(())
}

fn validate_health(h: &HealthSettings) -> Result {
    if let Some(url) = &h.url {
        if !is_http_url(url) {
            return Err(ConfigError::invalid(
                "health.url",
                format!(
                    "{} is not an http:// or https:// URL with a host, at most 2048 bytes (expected e.g. \"http://example.com/health\", or leave it out for passive health checks only)",
                    show(url)
                ),
            ));
        }
    }
    uint("health.interval_ms", h.interval_ms)?;
    uint("health.timeout_ms", h.timeout_ms)?;
    if h.timeout_ms > h.interval_ms {
        return Err(ConfigError::invalid(
            "health.timeout_ms",
            format!(
                "{} must be ≤ health.interval_ms ({}): a probe must end before the next starts",
                h.timeout_ms, h.interval_ms
            ),
        ));
    }
    uint("health.consecutive_failures", h.consecutive_failures.into())?;
    uint("health.max_ejection_ms", h.max_ejection_ms)?;
    uint("health.base_ejection_ms", h.base_ejection_ms)?;
    if h.base_ejection_ms > h.max_ejection_ms {
        return Err(ConfigError::invalid(
            "health.base_ejection_ms",
            format!(
                "{} must be ≤ health.max_ejection_ms ({})",
                h.base_ejection_ms, h.max_ejection_ms
            ),
        ));
    }
    Ok(())
}

fn validate_redis(r: &RedisSettings, l: &LimiterSettings) -> Result {
    uint("redis.processes", r.processes.into())?;
    uint("redis.op_timeout_ms", r.op_timeout_ms)?;
    if let Some(url) = &r.url {
        if !url.starts_with("redis://") {
            return Err(ConfigError::invalid(
                "redis.url",
                format!(
                    "{} is not a redis URL (expected redis://host:port[/db])",
                    show(url)
                ),
            ));
        }
    }
    if l.backend == Backend::Redis {
        if r.url.is_none() {
            return Err(ConfigError::invalid(
                "limiter.backend",
                "\"redis\" needs [redis] url (e.g. url = \"redis://127.0.0.1:6379\")".to_string(),
            ));
        }
        if l.algorithm == Algorithm::None {
            return Err(ConfigError::invalid(
                "limiter.backend",
                "\"redis\" shares limits, but algorithm = \"none\" has none to share".to_string(),
            ));
        }
    }
    Ok(())
}

/// An exit's `source_ip` and `proxy`: a proxy that parses, and no two exits that would send
/// from the same place (two direct exits on one source address, or one proxy URL twice).
/// Several proxy exits may share a source address: the proxies tell them apart.
fn validate_exit_address(
    i: usize,
    e: &ExitSettings,
    ips: &mut HashMap<IpAddr, usize>,
    proxies: &mut HashMap<String, usize>,
) -> Result {
    let key = |field: &str| format!("exits[{i}].{field}");
    if e.source_ip.is_multicast() {
        return Err(ConfigError::invalid(
            key("source_ip"),
            format!(
                "\"{}\" is multicast, which cannot be a source address; expected a local unicast address, e.g. \"127.0.0.2\", or leave it out to let the kernel pick",
                e.source_ip
            ),
        ));
    }
    let Some(proxy) = e.proxy_url() else {
        if let Some(first) = ips.insert(e.source_ip, i) {
            let what = if e.unbound() {
                "the default route (no source_ip)".to_owned()
            } else {
                format!("\"{}\"", e.source_ip)
            };
            return Err(ConfigError::invalid(
                key("source_ip"),
                format!(
                    "{what} is used twice (also exits[{first}]); each direct exit needs its own source address"
                ),
            ));
        }
        return Ok(());
    };
    let proxy = proxy.map_err(|err| {
        ConfigError::invalid(
            key("proxy"),
            format!(
                "\"{}\" {err}",
                crate::redact::mask_url(e.proxy.as_deref().unwrap_or_default())
            ),
        )
    })?;
    if let Some(first) = proxies.insert(proxy.to_url(), i) {
        return Err(ConfigError::invalid(
            key("proxy"),
            format!("\"{proxy}\" is used twice (also exits[{first}].proxy); each exit needs its own proxy"),
        ));
    }
    Ok(())
}

fn validate_exits(exits: &[ExitSettings]) -> Result {
    if exits.is_empty() {
        return Err(ConfigError::invalid(
            "exits",
            "empty; at least one [[exits]] entry is required (name and source_ip)",
        ));
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut ips: HashMap<IpAddr, usize> = HashMap::new();
    let mut proxies: HashMap<String, usize> = HashMap::new();
    for (i, e) in exits.iter().enumerate() {
        let key = |field: &str| format!("exits[{i}].{field}");
        let name_ok = (1..=64).contains(&e.name.len())
            && e.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !name_ok {
            return Err(ConfigError::invalid(
                key("name"),
                format!(
                    "{} must be 1..=64 characters from A-Z a-z 0-9 _ - . (it appears in logs and metric labels)",
                    show(&e.name)
                ),
            ));
        }
        if let Some(first) = names.insert(&e.name, i) {
            return Err(ConfigError::invalid(
                key("name"),
                format!(
                    "{} is used twice (also exits[{first}].name); exit names must be unique",
                    show(&e.name)
                ),
            ));
        }
        validate_exit_address(i, e, &mut ips, &mut proxies)?;
        uint(&key("max_concurrent"), e.max_concurrent.into())?;
        if let Some(rate) = e.rate {
            if !(rate > 0.0 && rate <= MAX_RATE) {
                return Err(ConfigError::invalid(
                    key("rate"),
                    format!(
                        "{} must be > 0 and ≤ {} requests/s (or leave it out for no per-exit cap)",
                        num(rate),
                        num(MAX_RATE)
                    ),
                ));
            }
        }
        if let Some(burst) = e.burst {
            if e.rate.is_none() {
                return Err(ConfigError::invalid(
                    key("burst"),
                    format!("set without rate; burst = {burst} only applies to the per-exit token bucket, so also set exits[{i}].rate or remove burst"),
                ));
            }
            uint(&key("burst"), burst.into())?;
        }
        if let Some(region) = &e.region {
            if region.is_empty()
                || region.chars().count() > 64
                || region.chars().any(char::is_control)
            {
                return Err(ConfigError::invalid(
                    key("region"),
                    format!(
                        "{} must be 1..=64 characters without control characters (or leave it out)",
                        show(region)
                    ),
                ));
            }
        }
    }
    if !exits.iter().any(|e| e.enabled) {
        return Err(ConfigError::invalid(
            "exits",
            format!(
                "all {} entries have enabled = false; at least one exit must be enabled",
                exits.len()
            ),
        ));
    }
    Ok(())
}

/// A quiet host is forgotten (`aimd`, scope `auto`) only once any pause or backoff it may
/// be waiting out is over: its pacing would go with it.
fn validate_forgetting(c: &CrawlerSettings, l: &LimiterSettings) -> Result {
    if l.algorithm != Algorithm::Aimd || l.scope != Scope::Auto {
        return Ok(());
    }
    for (key, v) in [
        ("crawler.max_retry_after_ms", c.max_retry_after_ms),
        ("crawler.retry_backoff_max_ms", c.retry_backoff_max_ms),
    ] {
        if v > l.forget_idle_ms {
            return Err(ConfigError::invalid(
                "limiter.forget_idle_ms",
                format!(
                    "{} must be ≥ {key} ({v}): a host is forgotten only once a pause or \
                     backoff it may be waiting out is over",
                    l.forget_idle_ms
                ),
            ));
        }
    }
    Ok(())
}

/// The allowed range of every whole-number key: what [`Settings::validate`] checks, and
/// what the loader names when a value is not a whole number at all (`-1`, `1.5`, `"x"`),
/// from one table so that the two agree. An array entry's key is written with `[]`.
const WHOLE_RANGES: &[(&str, u64, u64)] = &[
    ("metrics.host_labels", 0, 10_000),
    ("crawl.max_depth", 0, 100_000),
    ("crawl.max_pages", 1, 10_000_000_000),
    ("crawl.seen_limit", 1, 1_000_000_000),
    ("crawl.per_host_concurrency", 1, 10_000),
    ("crawl.robots_ttl_ms", 1_000, 7 * DAY_MS),
    ("crawler.concurrency", 1, 100_000),
    ("crawler.timeout_ms", 1, HOUR_MS),
    ("crawler.connect_timeout_ms", 1, HOUR_MS),
    ("crawler.max_retries", 0, 100),
    ("crawler.max_body_bytes", 1, 1 << 30),
    ("crawler.max_redirects", 0, 100),
    ("crawler.queue_capacity", 1, 10_000_000),
    ("crawler.retry_backoff_max_ms", 1, HOUR_MS),
    ("crawler.retry_backoff_base_ms", 1, HOUR_MS),
    ("crawler.give_up_after_ms", 1_000, DAY_MS),
    ("crawler.max_retry_after_ms", 1_000, DAY_MS),
    ("crawler.per_host_connections", 1, 10_000),
    ("crawler.keep_alive_ms", 0, HOUR_MS),
    ("crawler.pool_hosts", 1, 1_000_000),
    ("crawler.dns_ttl_ms", 0, DAY_MS),
    ("limiter.burst", 1, 100_000),
    ("limiter.hold_ms", 0, 60_000),
    ("limiter.forget_idle_ms", 1_000, 86_400_000),
    ("limiter.throttle_statuses[]", 100, 599),
    ("health.interval_ms", 100, HOUR_MS),
    ("health.timeout_ms", 1, HOUR_MS),
    ("health.consecutive_failures", 1, 1000),
    ("health.max_ejection_ms", 1, DAY_MS),
    ("health.base_ejection_ms", 1, DAY_MS),
    ("redis.processes", 1, 10_000),
    ("redis.op_timeout_ms", 1, 60_000),
    ("exits[].max_concurrent", 1, 100_000),
    ("exits[].burst", 1, 100_000),
];

/// The allowed range of the whole-number key `key` (`exits[3].burst` as `exits[].burst`),
/// if it is one.
pub fn whole_range(key: &str) -> Option<(u64, u64)> {
    let mut plain = String::with_capacity(key.len());
    let mut in_index = false;
    for c in key.chars() {
        match c {
            '[' => {
                in_index = true;
                plain.push('[');
            }
            ']' => {
                in_index = false;
                plain.push(']');
            }
            _ if in_index => {}
            _ => plain.push(c),
        }
    }
    WHOLE_RANGES
        .iter()
        .find(|(k, _, _)| *k == plain)
        .map(|&(_, lo, hi)| (lo, hi))
}

/// `key`'s value `v` within its range ([`WHOLE_RANGES`]).
fn uint(key: &str, v: u64) -> Result {
    let Some((lo, hi)) = whole_range(key) else {
        unreachable!("{key} is a whole-number key without a range in WHOLE_RANGES");
    };
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{v} is out of range; allowed {lo}..={hi}"),
        ))
    }
}

/// `lo ≤ v ≤ hi`; false for NaN.
fn float_in(key: &str, v: f64, lo: f64, hi: f64, allowed: &str) -> Result {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{} must be {allowed}", num(v)),
        ))
    }
}

/// `0 < v ≤ max`; false for NaN.
fn positive_up_to(key: &str, v: f64, max: f64, max_key: &str) -> Result {
    if v > 0.0 && v <= max {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{} must be > 0 and ≤ {max_key} ({})", num(v), num(max)),
        ))
    }
}

fn is_http_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    let rest = if let Some(r) = lower.strip_prefix("http://") {
        r
    } else if let Some(r) = lower.strip_prefix("https://") {
        r
    } else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    url.len() <= 2048
        && !host.is_empty()
        && !host.starts_with(':')
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A number for an error message: plain for everyday magnitudes (`-5`, `0.1`, `1000`),
/// scientific otherwise, so that `1e-300` is not printed with 300 zeros.
pub(super) fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-6..1e15).contains(&x.abs()) {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

/// A string for an error message: quoted and escaped, cut at 80 characters.
pub(super) fn show(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut:?}… ({} characters)", s.chars().count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_plainly_unless_extreme() {
        assert_eq!(num(-5.0), "-5");
        assert_eq!(num(0.1), "0.1");
        assert_eq!(num(1000.0), "1000");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::NAN), "NaN");
        assert_eq!(num(f64::INFINITY), "inf");
        assert_eq!(num(1.25e-300), "1.25e-300");
        assert_eq!(num(-3e20), "-3e20");
    }

    #[test]
    fn strings_are_quoted_escaped_and_cut() {
        assert_eq!(show("a\nb"), "\"a\\nb\"");
        let long = "x".repeat(200);
        let s = show(&long);
        assert_eq!(s, format!("\"{}\"… (200 characters)", "x".repeat(80)));
    }

    #[test]
    fn http_urls_need_a_scheme_and_a_host() {
        for ok in [
            "http://a",
            "https://example.com/health?x=1",
            "HTTP://[::1]:8080/",
            "http://u@h/",
        ] {
            assert!(is_http_url(ok), "{ok}");
        }
        for bad in [
            "",
            "ftp://a",
            "http://",
            "http:///x",
            "http://:80/",
            "http://a b",
            "example.com",
        ] {
            assert!(!is_http_url(bad), "{bad}");
        }
    }

    #[test]
    fn defaults_with_one_exit_are_valid() {
        let s = Settings::with_exits(vec![ExitSettings::new("e2", "127.0.0.2".parse().unwrap())]);
        s.validate().unwrap();
    }
}
