//! The flags that stand for settings: the exits (`--exit`, `--proxy`, `--proxies`) and
//! the everyday keys (`--concurrency`, `--max-rps`, …), each put over its config key by the
//! program once the configuration is read.

use std::net::IpAddr;
use std::path::Path;

/// An exit from the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitArg {
    /// `--exit IP`.
    Source(std::net::IpAddr),
    /// `--proxy URL`, or a line of `--proxies FILE`.
    Proxy(exitcrawl::proxy::ProxyUrl),
}

/// Settings given as flags, each over its config key (see [`Overrides::apply`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub concurrency: Option<u32>,
    pub max_rps: Option<f64>,
    pub initial_rps: Option<f64>,
    pub timeout: Option<f64>,
    pub retries: Option<u32>,
    pub depth: Option<u32>,
    pub max_pages: Option<u64>,
    pub scope: Option<exitcrawl::config::CrawlScope>,
}

/// The whole-number keys the flags set: a flag's message says the key's range (the one
/// `Settings::validate` checks) when its value is not a whole number of it.
#[cfg(test)]
const WHOLE: [&str; 4] = [
    "crawler.concurrency",
    "crawler.max_retries",
    "crawl.max_depth",
    "crawl.max_pages",
];

/// Most requests a second `limiter.max_rps` and `limiter.initial_rps` take.
pub use exitcrawl::config::MAX_RATE;

/// What a rate flag allows, as its messages say it.
pub const RATE_RANGE: &str = "more than 0, at most 1000000";

/// The range of the whole-number key `key` a flag sets.
pub fn whole_range(key: &str) -> (u64, u64) {
    exitcrawl::config::whole_range(key)
        .unwrap_or_else(|| unreachable!("{key} is not a whole-number key"))
}

impl Overrides {
    /// The flag that sets each config key, for messages.
    pub const FLAGS: [(&'static str, &'static str); 9] = [
        ("crawler.concurrency", "--concurrency"),
        ("limiter.max_rps", "--max-rps"),
        ("limiter.initial_rps", "--initial-rps"),
        ("crawler.timeout_ms", "--timeout"),
        ("crawler.connect_timeout_ms", "--timeout"),
        ("crawler.max_retries", "--retries"),
        ("crawl.max_depth", "--depth"),
        ("crawl.max_pages", "--max-pages"),
        ("crawl.scope", "--scope"),
    ];

    /// What to say of `e`, the settings' refusal once the flags were put in: named by the
    /// flag that set its key. `--timeout` is in seconds: its range is said in seconds,
    /// not as the key's milliseconds.
    pub fn explain(&self, e: &exitcrawl::config::ConfigError) -> String {
        if let (Some(secs), Some("crawler.timeout_ms")) = (self.timeout, e.key()) {
            let max = exitcrawl::config::HOUR_MS / 1000;
            return format!(
                "--timeout {secs}: {secs} seconds is out of range (0.001 to {max}; sets \
                 crawler.timeout_ms)"
            );
        }
        match Self::FLAGS.iter().find(|(key, _)| e.key() == Some(*key)) {
            Some((key, flag)) => format!("{flag} (sets {key}): {e}"),
            None => format!("with the command line's flags: {e}"),
        }
    }

    /// The rate flags' own range, checked before [`Overrides::apply`] moves other keys to
    /// agree with them: a refusal names the flag given and its value, not a key it moved.
    pub fn check(&self) -> Result<(), String> {
        for (flag, key, rps) in [
            ("--max-rps", "limiter.max_rps", self.max_rps),
            ("--initial-rps", "limiter.initial_rps", self.initial_rps),
        ] {
            match rps {
                Some(v) if !(v > 0.0 && v <= MAX_RATE) => {
                    return Err(format!(
                        "{flag} {v}: {v} requests a second is out of range ({RATE_RANGE}; \
                         sets {key})"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Put the flags' values into `s`. A key bounded by another moves to agree, as a
    /// default does (`--timeout 2` lowers a longer connect timeout to 2 s; `--max-rps`
    /// below the starting rate lowers the starting rate, the floor and the probe's step
    /// with it); checking the result is `Settings::validate`'s job.
    pub fn apply(&self, s: &mut exitcrawl::config::Settings) {
        if let Some(n) = self.concurrency {
            s.crawler.concurrency = n;
        }
        if let Some(secs) = self.timeout {
            let ms = (secs * 1000.0).round();
            s.crawler.timeout_ms = if ms.is_finite() && ms >= 0.0 {
                ms as u64
            } else {
                0
            };
            s.crawler.connect_timeout_ms = s.crawler.connect_timeout_ms.min(s.crawler.timeout_ms);
        }
        if let Some(n) = self.retries {
            s.crawler.max_retries = n;
        }
        if let Some(rps) = self.initial_rps {
            s.limiter.initial_rps = rps;
            if rps > s.limiter.max_rps && self.max_rps.is_none() {
                s.limiter.max_rps = rps;
            }
        }
        if let Some(rps) = self.max_rps {
            s.limiter.max_rps = rps;
            if self.initial_rps.is_none() && s.limiter.initial_rps > rps {
                s.limiter.initial_rps = rps;
            }
        }
        s.limiter.min_rps = s.limiter.min_rps.min(s.limiter.initial_rps);
        s.limiter.increase_rps = s.limiter.increase_rps.min(s.limiter.max_rps);
        if let Some(n) = self.depth {
            s.crawl.max_depth = Some(n);
        }
        if let Some(scope) = self.scope {
            s.crawl.scope = scope;
        }
        if let Some(n) = self.max_pages {
            s.crawl.max_pages = Some(n);
        }
    }
}

/// The exits given as flags: `--exit`, then `--proxy`, then the lines of `--proxies`.
pub(super) fn exit_args(
    demo: bool,
    sources: &[IpAddr],
    proxies: &[String],
    proxies_file: Option<&Path>,
) -> Result<Vec<ExitArg>, String> {
    if demo && (!sources.is_empty() || !proxies.is_empty() || proxies_file.is_some()) {
        return Err("--demo builds its own exits: drop --exit/--proxy/--proxies".into());
    }
    let mut exits: Vec<ExitArg> = sources.iter().copied().map(ExitArg::Source).collect();
    for p in proxies {
        exits.push(ExitArg::Proxy(
            proxy_url(p).map_err(|e| format!("--proxy: {e}"))?,
        ));
    }
    if let Some(file) = proxies_file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("--proxies {}: {e}", file.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let proxy = proxy_url(line)
                .map_err(|e| format!("--proxies {} line {}: {e}", file.display(), n + 1))?;
            exits.push(ExitArg::Proxy(proxy));
        }
    }
    Ok(exits)
}

pub(super) fn source_ip(v: &str) -> Result<IpAddr, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not an IP address (expected e.g. 127.0.0.2 or ::1)"))
}

fn proxy_url(v: &str) -> Result<exitcrawl::proxy::ProxyUrl, String> {
    v.parse()
        .map_err(|e| format!("\"{}\" {e}", exitcrawl::redact::mask_url(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use exitcrawl::config::{CrawlScope, Settings};

    #[test]
    fn each_flag_sets_its_key() {
        let mut s = Settings::with_exits(Vec::new());
        Overrides {
            scope: Some(CrawlScope::Any),
            depth: Some(2),
            ..Overrides::default()
        }
        .apply(&mut s);
        assert_eq!(s.crawl.scope, CrawlScope::Any);
        assert_eq!(s.crawl.max_depth, Some(2));
        let keys: Vec<&str> = Overrides::FLAGS.iter().map(|f| f.0).collect();
        assert!(keys.contains(&"crawl.scope"), "{keys:?}");
    }

    /// Settings with `o` put in, checked: the key refused, if any.
    fn refused(o: &Overrides) -> Option<String> {
        let exit = exitcrawl::config::ExitSettings::new("e", "127.0.0.2".parse().unwrap());
        let mut s = Settings::with_exits(vec![exit]);
        o.apply(&mut s);
        s.validate()
            .err()
            .map(|e| e.key().unwrap_or("?").to_owned())
    }

    /// An override of the whole-number key `key` to `n`.
    fn whole(key: &str, n: u64) -> Overrides {
        let small = || u32::try_from(n).expect("fits");
        match key {
            "crawler.concurrency" => Overrides {
                concurrency: Some(small()),
                ..Overrides::default()
            },
            "crawler.max_retries" => Overrides {
                retries: Some(small()),
                ..Overrides::default()
            },
            "crawl.max_depth" => Overrides {
                depth: Some(small()),
                ..Overrides::default()
            },
            "crawl.max_pages" => Overrides {
                max_pages: Some(n),
                ..Overrides::default()
            },
            _ => unreachable!("{key}"),
        }
    }

    #[test]
    fn the_ranges_the_flags_say_are_their_keys_ranges() {
        for key in WHOLE {
            let (lo, hi) = whole_range(key);
            assert_eq!(refused(&whole(key, lo)), None, "{key} = {lo}");
            assert_eq!(refused(&whole(key, hi)), None, "{key} = {hi}");
            assert_eq!(refused(&whole(key, hi + 1)).as_deref(), Some(key));
            if lo > 0 {
                assert_eq!(refused(&whole(key, lo - 1)).as_deref(), Some(key));
            }
        }
        let rate = |max: f64| Overrides {
            max_rps: Some(max),
            ..Overrides::default()
        };
        assert_eq!(refused(&rate(MAX_RATE)), None);
        assert_eq!(
            refused(&rate(MAX_RATE * 1.001)).as_deref(),
            Some("limiter.max_rps")
        );
        assert!(RATE_RANGE.ends_with(&format!("{MAX_RATE}")));
    }

    #[test]
    fn a_rate_flag_out_of_range_is_named_with_its_value() {
        let e = Overrides {
            initial_rps: Some(0.0),
            ..Overrides::default()
        }
        .check()
        .unwrap_err();
        assert!(e.starts_with("--initial-rps 0: "), "{e}");
        let e = Overrides {
            initial_rps: Some(2e6),
            max_rps: Some(5.0),
            ..Overrides::default()
        }
        .check()
        .unwrap_err();
        assert!(e.starts_with("--initial-rps 2000000: "), "{e}");
        let ok = Overrides {
            initial_rps: Some(MAX_RATE),
            ..Overrides::default()
        };
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(refused(&ok), None);
    }

    #[test]
    fn a_ceiling_below_one_request_a_second_moves_the_keys_it_bounds() {
        // The defaults start at 5 req/s and probe by 1 req/s a second: a ceiling of half a
        // request a second brings both down to it, and the settings hold.
        let exit = exitcrawl::config::ExitSettings::new("e", "127.0.0.2".parse().unwrap());
        let mut s = Settings::with_exits(vec![exit]);
        Overrides {
            max_rps: Some(0.5),
            ..Overrides::default()
        }
        .apply(&mut s);
        let l = &s.limiter;
        assert_eq!((l.max_rps, l.initial_rps, l.increase_rps), (0.5, 0.5, 0.5));
        assert!(l.min_rps <= 0.5);
        s.validate().expect("a ceiling of 0.5 req/s is valid");
    }
}
