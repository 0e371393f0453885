//! Settings: the schema ([`Settings`] and its tables), loading from a TOML file plus
//! `EXITCRAWL__SECTION__KEY` environment overrides, and [`Settings::validate`].
//!
//! ```text
//! schema.rs    the serde structs: every key, its meaning, default and range
//! strict.rs    exact number/boolean deserializers (no silent rounding or coercion)
//! load.rs      file + environment → Settings, with errors that name the key
//! agree.rs     defaults of keys left out that agree with the keys given
//! validate.rs  ranges and relations between keys
//! error.rs     ConfigError
//! ```
//!
//! `config/default.toml` lists every key with its default; tests check that it loads, that
//! its values are the defaults in code, and that it documents every field.
//!
//! Loading is the only I/O in this crate: reading one file and the environment, once, at
//! start-up. Everything after that works on the plain [`Settings`] value.
//!
//! ```
//! use exitcrawl::config::Settings;
//!
//! let s = Settings::from_toml_str(r#"
//!     [limiter]
//!     algorithm = "gcra"
//!     initial_rps = 20.0
//!     burst = 5
//!
//!     [[exits]]
//!     name = "e2"
//!     source_ip = "127.0.0.2"
//! "#).unwrap();
//! assert_eq!(s.limiter.algorithm.limiter_kind(), Some(exitcrawl::limiter::Kind::Gcra));
//! assert_eq!(s.crawler.concurrency, 256);
//!
//! let err = Settings::from_toml_str("[crawler]\nconcurency = 64\n").unwrap_err();
//! assert!(err.to_string().starts_with("crawler.concurency: unknown key"));
//! ```

mod agree;
mod crawl;
mod error;
mod limiter;
mod load;
mod schema;
mod strict;
mod validate;

pub use crawl::{CrawlScope, CrawlSettings};
pub use error::ConfigError;
pub use load::{ENV_PREFIX, ENV_SEPARATOR};
pub use schema::{
    default_user_agent, Algorithm, Arbiters, Backend, CrawlerSettings, ExitSettings,
    HealthSettings, LimiterSettings, MetricsSettings, RedisSettings, Scope, Settings,
};
pub use validate::{check_header, whole_range, HOUR_MS, MAX_HEADERS, MAX_RATE};
