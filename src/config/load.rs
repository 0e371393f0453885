//! Loading: TOML file + `EXITCRAWL__SECTION__KEY` environment overrides → [`Settings`],
//! always validated.
//!
//! The `config` crate merges the sources (file first, environment on top) and drives
//! serde; this module adds what it lacks for a good operator experience:
//!
//! * every error names the key path (`exits[1].source_ip`), the value and what is allowed,
//!   and where the value came from (file or environment variable); `config`'s own
//!   messages sometimes omit the key (unknown fields) or garble it (missing fields);
//! * inputs that could make `config` misbehave are rejected before it sees them: it
//!   treats keys as path expressions, so a top-level TOML key such as `"a[99999999999]"`
//!   or a variable such as `EXITCRAWL__A[99999999999]` would make it allocate an array of
//!   that length. Only the known sections reach it, from the file and from the
//!   environment (which may only hold `EXITCRAWL__<SECTION>__<KEY>` names).

use std::collections::HashSet;
use std::path::Path;

use config::{Config, Environment, FileFormat, Format, Source, Value, ValueKind};

use super::crawl::CrawlScope;
use super::error::ConfigError;
use super::schema::{Algorithm, Arbiters, Backend, Scope};
use super::validate::show;
use super::Settings;

/// Prefix of environment overrides: `EXITCRAWL__CRAWLER__CONCURRENCY=64`.
pub const ENV_PREFIX: &str = "EXITCRAWL";
/// Separator between prefix, section and key in environment override names.
pub const ENV_SEPARATOR: &str = "__";

/// The top-level keys of the schema.
const SECTIONS: [&str; 7] = [
    "crawler", "limiter", "health", "metrics", "redis", "exits", "crawl",
];
/// The sections the environment may override (scalars in tables; `[[exits]]` is an array
/// whose entries have no stable name to address them by).
const ENV_SECTIONS: [&str; 6] = ["crawler", "limiter", "health", "metrics", "redis", "crawl"];

impl Settings {
    /// Load `path` (TOML), apply `EXITCRAWL__SECTION__KEY` overrides from the process
    /// environment, and validate.
    ///
    /// Environment values are parsed as booleans and numbers when they look like them
    /// (`try_parsing`), lists are comma-separated (`THROTTLE_STATUSES=429,503`), empty
    /// values are ignored, names are case-insensitive. Variables starting with
    /// `EXITCRAWL__` that do not name a `[crawler]`, `[limiter]`, `[health]`, `[metrics]`,
    /// `[redis]` or `[crawl]` key are errors rather than silently ignored.
    pub fn load(path: &Path) -> Result<Settings, ConfigError> {
        Self::load_adjusted(path, |_| {})
    }

    /// [`load`](Settings::load), with `adjust` run on the settings before they are
    /// validated: values that replace the file's (a program's `--exit` flags put in
    /// place of its `[[exits]]`) are checked instead of the file's, so a file may leave
    /// out what they supply.
    pub fn load_adjusted(
        path: &Path,
        adjust: impl FnOnce(&mut Settings),
    ) -> Result<Settings, ConfigError> {
        let env = process_env()?;
        let text = read(path)?;
        load_from(&text, Some(path.display().to_string()), env, adjust)
    }

    /// Every default, with the process environment's `EXITCRAWL__SECTION__KEY` overrides
    /// and then `adjust` applied (a program without a file supplies its exits there), and
    /// validated: the environment counts whether a file is given or not.
    pub fn defaults_adjusted(adjust: impl FnOnce(&mut Settings)) -> Result<Settings, ConfigError> {
        load_from("", None, process_env()?, adjust)
    }

    /// [`load`](Settings::load) with the environment given as name/value pairs instead of
    /// read from the process (for tests, and for callers that filter the environment).
    /// Pairs whose name does not start with `EXITCRAWL__` are ignored.
    pub fn load_with_env(
        path: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let text = read(path)?;
        load_from(&text, Some(path.display().to_string()), env, |_| {})
    }

    /// Parse and validate TOML text, without environment overrides.
    pub fn from_toml_str(toml: &str) -> Result<Settings, ConfigError> {
        load_from(toml, None, std::iter::empty(), |_| {})
    }

    /// Parse TOML text, apply these environment overrides, validate.
    pub fn from_toml_str_with_env(
        toml: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        load_from(toml, None, env, |_| {})
    }
}

/// The process environment's variables that are ours (see [`Settings::load`]).
fn process_env() -> Result<Vec<(String, String)>, ConfigError> {
    let mut env = Vec::new();
    for (name, value) in std::env::vars_os() {
        // Names that are not Unicode cannot be ours; values of ours must be.
        let Ok(name) = name.into_string() else {
            continue;
        };
        if !is_ours(&name) {
            continue;
        }
        match value.into_string() {
            Ok(value) => env.push((name, value)),
            Err(value) => {
                return Err(ConfigError::Env {
                    name,
                    message: format!("value {value:?} is not valid Unicode"),
                })
            }
        }
    }
    Ok(env)
}

/// The parsed file as a `config` source (its top-level keys already checked).
#[derive(Debug, Clone)]
struct Parsed(config::Map<String, Value>);

impl Source for Parsed {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<config::Map<String, Value>, config::ConfigError> {
        Ok(self.0.clone())
    }
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn load_from(
    text: &str,
    file: Option<String>,
    env: impl IntoIterator<Item = (String, String)>,
    adjust: impl FnOnce(&mut Settings),
) -> Result<Settings, ConfigError> {
    let table = FileFormat::Toml
        .parse(file.as_ref(), text)
        .map_err(|source| ConfigError::Syntax {
            origin: file.clone().unwrap_or_else(|| "<string>".into()),
            message: syntax_message(&source.to_string(), text),
            source,
        })?;
    let mut top: Vec<&String> = table.keys().collect();
    top.sort();
    if let Some(bad) = top.into_iter().find(|k| !SECTIONS.contains(&k.as_str())) {
        return Err(ConfigError::Invalid {
            key: bad.clone(),
            message: format!(
                "unknown key; allowed at the top level: {}",
                SECTIONS.join(", ")
            ),
            origin: file,
            source: None,
        });
    }

    let env = check_env(env)?;
    let cfg = Config::builder()
        .add_source(Parsed(table))
        .add_source(
            Environment::with_prefix(ENV_PREFIX)
                .prefix_separator(ENV_SEPARATOR)
                .separator(ENV_SEPARATOR)
                .try_parsing(true)
                .ignore_empty(true)
                .source(Some(env)),
        )
        .build()
        .map_err(|e| ConfigError::Other(Box::new(e)))?;

    let mut settings: Settings = cfg
        .clone()
        .try_deserialize()
        .map_err(|e| describe(e, &cfg))?;
    super::agree::agree(&mut settings, |key| cfg.get::<config::Value>(key).is_ok());
    adjust(&mut settings);
    settings.validate().map_err(|e| match e {
        ConfigError::Invalid {
            key,
            message,
            origin: None,
            source,
        } => ConfigError::Invalid {
            origin: origin_of(&cfg, &key),
            key,
            message,
            source,
        },
        other => other,
    })?;
    Ok(settings)
}

/// The TOML parser's message, plus the line for the one error it reports without one
/// (an integer that does not fit in 64 bits).
fn syntax_message(message: &str, text: &str) -> String {
    if message.contains("line ") {
        return message.to_string();
    }
    let too_big = text.lines().enumerate().find(|(_, line)| {
        let Some((_, value)) = line.split_once('=') else {
            return false;
        };
        let value = value
            .split('#')
            .next()
            .unwrap_or("")
            .trim()
            .replace('_', "");
        let digits = value.trim_start_matches(['+', '-']);
        !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && value.parse::<i64>().is_err()
    });
    match too_big {
        Some((i, line)) => format!(
            "{message} at line {}: `{}` (integers must fit in 64 bits)",
            i + 1,
            line.trim()
        ),
        None if message == "recursion limit" => {
            format!("{message}: tables, arrays or dotted keys are nested too deeply")
        }
        None => message.to_string(),
    }
}

/// Whether `name` is meant for us (`EXITCRAWL__…`, any case).
fn is_ours(name: &str) -> bool {
    let prefix = format!("{ENV_PREFIX}{ENV_SEPARATOR}");
    name.len() >= prefix.len()
        && name.is_char_boundary(prefix.len())
        && name[..prefix.len()].eq_ignore_ascii_case(&prefix)
}

/// Keep our variables, each checked to name `<section>__<key>` with a plain key.
fn check_env(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<config::Map<String, String>, ConfigError> {
    let prefix_len = ENV_PREFIX.len() + ENV_SEPARATOR.len();
    let mut seen = HashSet::new();
    let mut out = config::Map::new();
    for (name, value) in env {
        if !is_ours(&name) {
            continue;
        }
        let rest = name[prefix_len..].to_lowercase();
        let parts: Vec<&str> = rest.split(ENV_SEPARATOR).collect();
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        let err = |message: String| ConfigError::Env {
            name: name.clone(),
            message,
        };
        if parts.first() == Some(&"exits") {
            return Err(err(
                "[[exits]] entries cannot be set from the environment; edit the config file".into(),
            ));
        }
        if parts.len() != 2 || !parts.iter().all(|p| plain(p)) {
            return Err(err(format!(
                "expected {ENV_PREFIX}__<SECTION>__<KEY> with SECTION one of {} and KEY a key of that section (letters, digits, _), e.g. {ENV_PREFIX}__CRAWLER__CONCURRENCY",
                ENV_SECTIONS.join(", ").to_uppercase()
            )));
        }
        if !ENV_SECTIONS.contains(&parts[0]) {
            return Err(err(format!(
                "unknown section {:?}; expected one of {}",
                parts[0],
                ENV_SECTIONS.join(", ").to_uppercase()
            )));
        }
        if !seen.insert(rest.clone()) {
            return Err(err(
                "set twice (names that differ only in case are the same key)".into(),
            ));
        }
        out.insert(name, value);
    }
    Ok(out)
}

/// Turn a `config`/serde error into one naming the key, the value and what is allowed.
fn describe(err: config::ConfigError, cfg: &Config) -> ConfigError {
    let (key, detail) = split(&err);

    // serde's message for deny_unknown_fields: "unknown field `x`, expected one of `a`, `b`"
    // (reported at the parent's path, or none at the top level).
    if let Some(rest) = detail.strip_prefix("unknown field `") {
        if let Some((field, allowed)) = rest.split_once('`') {
            let key = match key {
                Some(parent) if !parent.is_empty() => format!("{parent}.{field}"),
                _ => field.to_string(),
            };
            let allowed = allowed.trim_start_matches(", ").replace('`', "");
            return ConfigError::Invalid {
                message: format!("unknown key; {allowed}"),
                origin: origin_of(cfg, &key),
                key,
                source: Some(Box::new(err)),
            };
        }
    }

    let Some(key) = key.filter(|k| !k.is_empty()) else {
        return ConfigError::Other(Box::new(err));
    };
    let found = lookup(&cfg.cache, &key);
    let message = match (found, hint(&key)) {
        (Some(v), Some(hint)) if !matches!(err_root(&err), config::ConfigError::NotFound(_)) => {
            format!("{} {hint}", show_value(v))
        }
        _ => key_range(&key, detail),
    };
    ConfigError::Invalid {
        origin: origin_of(cfg, &key),
        key,
        message,
        source: Some(Box::new(err)),
    }
}

/// `detail` naming `key`'s own range where it names its type's: a value that is not a
/// whole number at all (`-1`, `1.5`, `"x"`) fails before validation can say which
/// numbers the key takes.
fn key_range(key: &str, detail: String) -> String {
    const TYPE_RANGE: &str = "a whole number in 0..=";
    let (Some(at), Some((lo, hi))) = (detail.find(TYPE_RANGE), super::validate::whole_range(key))
    else {
        return detail;
    };
    let digits = at + TYPE_RANGE.len();
    let end = detail[digits..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(detail.len(), |n| digits + n);
    format!(
        "{}a whole number in {lo}..={hi}{}",
        &detail[..at],
        &detail[end..]
    )
}

/// The innermost error of `At` wrappers.
fn err_root(err: &config::ConfigError) -> &config::ConfigError {
    match err {
        config::ConfigError::At { error, .. } => err_root(error),
        other => other,
    }
}

/// The key path (if any) and the bare message of a `config` error.
fn split(err: &config::ConfigError) -> (Option<String>, String) {
    use config::ConfigError as E;
    match err {
        E::Type {
            key,
            unexpected,
            expected,
            ..
        } => (
            key.as_deref().map(fix_path),
            format!("invalid type: {unexpected}, expected {expected}"),
        ),
        E::At { error, key, .. } => {
            let (inner_key, detail) = split(error);
            (key.as_deref().map(fix_path).or(inner_key), detail)
        }
        E::NotFound(key) => (Some(fix_path(key)), "missing; this key is required".into()),
        E::Message(m) => (None, m.clone()),
        other => (None, other.to_string()),
    }
}

/// `exits[0]name` → `exits[0].name`: `config` glues an index and the following field
/// together when it builds a key path for an error.
fn fix_path(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    let mut after_bracket = false;
    for c in key.chars() {
        if after_bracket && c != '[' && c != '.' {
            out.push('.');
        }
        after_bracket = c == ']';
        out.push(c);
    }
    out
}

/// What a key's value should look like, for the keys whose serde errors say too little
/// ("invalid IP address syntax", "enum Algorithm does not have variant constructor x").
fn hint(key: &str) -> Option<String> {
    let last = key.rsplit('.').next().unwrap_or(key);
    let one_of = |names: Vec<&str>| names.join(", ");
    let h = match last {
        "source_ip" => "is not an IP address (expected e.g. \"127.0.0.2\")".to_string(),
        "listen" => "is not a socket address (expected e.g. \"127.0.0.1:9090\")".to_string(),
        "algorithm" => format!(
            "is not a limiter algorithm (expected one of: {})",
            one_of(Algorithm::ALL.iter().map(|a| a.as_str()).collect())
        ),
        "backend" => format!(
            "is not a limiter backend (expected one of: {})",
            one_of(Backend::ALL.iter().map(|b| b.as_str()).collect())
        ),
        "scope" if key == "crawl.scope" => format!(
            "is not a crawl scope (expected one of: {})",
            one_of(CrawlScope::ALL.iter().map(|s| s.as_str()).collect())
        ),
        "scope" => format!(
            "is not a limiter scope (expected one of: {})",
            one_of(Scope::ALL.iter().map(|s| s.as_str()).collect())
        ),
        "arbiters" => format!(
            "is not an arbiters layout (expected one of: {})",
            one_of(Arbiters::ALL.iter().map(|a| a.as_str()).collect())
        ),
        "exits" => "is not an array of tables (expected [[exits]] entries)".to_string(),
        "crawler" | "limiter" | "health" | "metrics" | "redis" | "crawl" => {
            format!("is not a table (expected a [{last}] section)")
        }
        _ if last.starts_with("exits[") && last.ends_with(']') => {
            "is not a table (expected an [[exits]] entry with name and source_ip)".to_string()
        }
        _ => return None,
    };
    Some(h)
}

/// The value at `key` (`a.b`, `exits[1].name`, `x.y[2]`) in the merged tree.
fn lookup<'a>(root: &'a Value, key: &str) -> Option<&'a Value> {
    let mut cur = root;
    for part in key.split('.') {
        let (name, mut indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            match &cur.kind {
                ValueKind::Table(t) => cur = t.get(name)?,
                _ => return None,
            }
        }
        while let Some(rest) = indices.strip_prefix('[') {
            let (idx, tail) = rest.split_once(']')?;
            let idx: usize = idx.parse().ok()?;
            match &cur.kind {
                ValueKind::Array(a) => cur = a.get(idx)?,
                _ => return None,
            }
            indices = tail;
        }
    }
    Some(cur)
}

/// Where the value at `key` (or its nearest parent that exists) came from: the file
/// path, or the environment variable that set it.
fn origin_of(cfg: &Config, key: &str) -> Option<String> {
    let mut k = key;
    loop {
        if let Some(v) = lookup(&cfg.cache, k) {
            return match v.origin() {
                Some("the environment") => Some(format!(
                    "environment variable {ENV_PREFIX}{ENV_SEPARATOR}{}",
                    k.replace('.', ENV_SEPARATOR).to_uppercase()
                )),
                other => other.map(str::to_string),
            };
        }
        k = &k[..k.rfind(['.', '['])?];
    }
}

/// A raw value for a message.
fn show_value(v: &Value) -> String {
    match &v.kind {
        ValueKind::String(s) => show(s),
        ValueKind::Nil => "an empty value".into(),
        ValueKind::Boolean(b) => b.to_string(),
        ValueKind::I64(n) => n.to_string(),
        ValueKind::I128(n) => n.to_string(),
        ValueKind::U64(n) => n.to_string(),
        ValueKind::U128(n) => n.to_string(),
        ValueKind::Float(x) => x.to_string(),
        ValueKind::Table(_) => "a table".into(),
        ValueKind::Array(_) => "an array".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fix_path_inserts_the_missing_dot_after_an_index() {
        assert_eq!(fix_path("exits[0]name"), "exits[0].name");
        assert_eq!(fix_path("exits[0].name"), "exits[0].name");
        assert_eq!(fix_path("a.b[1][2]c"), "a.b[1][2].c");
        assert_eq!(
            fix_path("limiter.throttle_statuses[3]"),
            "limiter.throttle_statuses[3]"
        );
    }

    #[test]
    fn lookup_follows_keys_and_indices() {
        let cfg = Config::builder()
            .add_source(config::File::from_str(
                "[a]\nb = [1, {c = \"x\"}]\n",
                FileFormat::Toml,
            ))
            .build()
            .unwrap();
        let found = |k: &str| lookup(&cfg.cache, k).map(show_value);
        assert_eq!(found("a.b[0]").as_deref(), Some("1"));
        assert_eq!(found("a.b[1].c").as_deref(), Some("\"x\""));
        assert_eq!(found("a.b").as_deref(), Some("an array"));
        assert_eq!(found("a.b[2]"), None);
        assert_eq!(found("a.b[x]"), None);
        assert_eq!(found("a.z"), None);
        assert_eq!(found("a.b[0].c"), None);
    }

    #[test]
    fn only_double_underscore_prefixed_names_are_ours() {
        assert!(is_ours("EXITCRAWL__CRAWLER__CONCURRENCY"));
        assert!(is_ours("exitcrawl__x"));
        assert!(!is_ours("EXITCRAWL_LOG"));
        assert!(!is_ours("EXITCRAWL"));
        assert!(!is_ours("XEXITCRAWL__A__B"));
        assert!(!is_ours("EXITCRAWé__A"));
    }

    #[test]
    fn syntax_message_locates_oversized_integers() {
        let text = "[crawler]\nconcurrency = 1_000_000_000_000_000_000_000 # big\n";
        let m = syntax_message("number too large to fit in target type", text);
        assert!(m.contains("line 2"), "{m}");
        let m = syntax_message("TOML parse error at line 1, column 2", text);
        assert_eq!(m, "TOML parse error at line 1, column 2");
        assert!(syntax_message("recursion limit", "").contains("nested too deeply"));
    }

    #[test]
    fn hints_cover_the_keys_serde_describes_poorly() {
        assert!(hint("exits[3].source_ip").unwrap().contains("IP address"));
        assert!(hint("metrics.listen").unwrap().contains("socket address"));
        assert!(hint("limiter.algorithm").unwrap().contains("sliding_log"));
        assert!(hint("limiter.scope").unwrap().contains("exit_host"));
        assert!(hint("crawl.scope").unwrap().contains("same_domain"));
        assert!(hint("exits[3]").unwrap().contains("[[exits]]"));
        assert!(hint("crawler.concurrency").is_none());
    }
}
