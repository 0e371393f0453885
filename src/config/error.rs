//! The one error type of configuration loading and validation.

use std::error::Error as StdError;
use std::path::PathBuf;

/// Why a configuration was rejected.
///
/// Every message says where (file, key path, environment variable), what was found and
/// what is allowed, because the person reading it is fixing a config file, not debugging
/// the crawler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file asked for.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// The file is not valid TOML (the message carries line and column).
    #[error("{origin}: not valid TOML: {message}")]
    Syntax {
        /// The file path, or `"<string>"` for [`Settings::from_toml_str`](super::Settings::from_toml_str).
        origin: String,
        /// The parser's message, with line and column.
        message: String,
        /// The parser's error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },

    /// An `EXITCRAWL__…` environment variable that cannot be used as an override.
    #[error("environment variable {name}: {message}")]
    Env {
        /// The variable's name, as given.
        name: String,
        /// What is wrong with it and what is expected.
        message: String,
    },

    /// A key is unknown, has the wrong type, or its value is out of range or inconsistent
    /// with another key. `key` is the path, e.g. `limiter.initial_rps` or
    /// `exits[1].source_ip` (or a section such as `exits`).
    #[error("{key}: {message}{}", origin.as_ref().map(|o| format!(" (set in {o})")).unwrap_or_default())]
    Invalid {
        /// Key path of the offending value.
        key: String,
        /// The value found and what is allowed.
        message: String,
        /// Where the value came from, when known: the file path, or
        /// `environment variable EXITCRAWL__…`.
        origin: Option<String>,
        /// The `config` crate's error, when it found the problem.
        #[source]
        source: Option<Box<config::ConfigError>>,
    },

    /// Any other failure reported by the `config` crate (not expected in practice; kept so
    /// that nothing is lost or turned into a panic).
    #[error("configuration error: {0}")]
    Other(#[source] Box<config::ConfigError>),
}

impl ConfigError {
    /// The key path this error is about, if it is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }

    /// An [`ConfigError::Invalid`] with no origin and no source, as `validate` makes them.
    pub(super) fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            message: message.into(),
            origin: None,
            source: None,
        }
    }
}
