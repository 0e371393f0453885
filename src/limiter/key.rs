//! Which budget a request draws on: the limiter key a scope gives a request through an
//! exit to a host, and the share of a shared budget one process keeps when the store that
//! shares it is away.
//!
//! Why in the core: the key decides what one 429 slows down (one exit's lane, a whole
//! host, everything), and the fallback share decides how hard many processes lean on a
//! site while Redis is down. Both are plain functions of the settings, tested here.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A limiter key: exit and/or host, as the scope says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LimitKey {
    /// Exit name, when the scope keys on exits.
    pub exit: Option<Arc<str>>,
    /// Host, when the scope keys on hosts.
    pub host: Option<Arc<str>>,
}

impl LimitKey {
    /// The key's name in a shared store: `exit|host`, `*` where the scope does not key
    /// on it.
    pub fn redis_name(&self) -> String {
        format!(
            "{}|{}",
            self.exit.as_deref().unwrap_or("*"),
            self.host.as_deref().unwrap_or("*")
        )
    }

    /// The inverse of [`LimitKey::redis_name`].
    pub fn from_redis_name(name: &str) -> Option<Self> {
        let (exit, host) = name.split_once('|')?;
        let part = |s: &str| (s != "*").then(|| Arc::from(s));
        Some(Self {
            exit: part(exit),
            host: part(host),
        })
    }

    /// The key of a request through `exit` to `host` under `scope`. Under `auto` this is
    /// the host's budget (its lane); an exit's own lane is [`LimitKey::exit_lane`].
    pub fn new(scope: Scope, exit: &Arc<str>, host: &Arc<str>) -> Self {
        let (e, h) = match scope {
            Scope::ExitHost => (true, true),
            Scope::Auto | Scope::Host => (false, true),
            Scope::Exit => (true, false),
            Scope::Global => (false, false),
        };
        Self {
            exit: e.then(|| exit.clone()),
            host: h.then(|| host.clone()),
        }
    }

    /// Scope `auto`: the key of `exit`'s own budget at `host`.
    pub fn exit_lane(exit: &Arc<str>, host: &Arc<str>) -> Self {
        Self {
            exit: Some(exit.clone()),
            host: Some(host.clone()),
        }
    }
}

/// The rate one of `processes` crawler processes keeps while the store that shares a
/// budget of `rps` is away: its even share, never below its share of `min_rps`. Why a
/// share and not the whole: every process falls back at once, and each pacing at the
/// whole rate would multiply the load on the site by the number of processes. The floor
/// is shared too: a site the crawl has cut to `min_rps` is one that throttles hard, and
/// each process at `min_rps` would send it that many times its budget.
pub fn fallback_rps(rps: f64, processes: u32, min_rps: f64) -> f64 {
    let n = f64::from(processes.max(1));
    (rps / n).max(min_rps / n)
}

/// `[limiter] scope`: what one limiter (and one AIMD controller) covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// `"auto"`: learned per host (the default). One budget for the host, spread evenly
    /// over the exits, and a budget of its own for an exit whose throttles concentrate:
    /// sites limit per client IP or per host and do not say which. See
    /// [`crate::aimd::coupling`]. With a fixed algorithm it paces per host.
    Auto,
    /// `"exit_host"`: one per (exit, host) pair: every exit its own budget at each host.
    ExitHost,
    /// `"host"`: one per host, shared by all exits (for sites that limit the crawler as a
    /// whole, e.g. by User-Agent).
    Host,
    /// `"exit"`: one per exit, shared by all hosts.
    Exit,
    /// `"global"`: one for everything.
    Global,
}

impl Scope {
    /// Every value, in documentation order.
    pub const ALL: [Scope; 5] = [
        Scope::Auto,
        Scope::ExitHost,
        Scope::Host,
        Scope::Exit,
        Scope::Global,
    ];

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Auto => "auto",
            Scope::ExitHost => "exit_host",
            Scope::Host => "host",
            Scope::Exit => "exit",
            Scope::Global => "global",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scope_keys_on_what_it_names() {
        let (e, h): (Arc<str>, Arc<str>) = (Arc::from("e1"), Arc::from("example.com"));
        let name = |s| LimitKey::new(s, &e, &h).redis_name();
        assert_eq!(name(Scope::ExitHost), "e1|example.com");
        assert_eq!(name(Scope::Host), "*|example.com");
        assert_eq!(name(Scope::Auto), "*|example.com");
        assert_eq!(name(Scope::Exit), "e1|*");
        assert_eq!(name(Scope::Global), "*|*");
        assert_eq!(LimitKey::exit_lane(&e, &h).redis_name(), "e1|example.com");
    }

    #[test]
    fn a_redis_name_reads_back_as_its_key() {
        let (e, h): (Arc<str>, Arc<str>) = (Arc::from("e1"), Arc::from("example.com"));
        for scope in [Scope::ExitHost, Scope::Host, Scope::Exit, Scope::Global] {
            let key = LimitKey::new(scope, &e, &h);
            assert_eq!(LimitKey::from_redis_name(&key.redis_name()), Some(key));
        }
        assert_eq!(LimitKey::from_redis_name("no separator"), None);
    }

    #[test]
    fn the_fallback_is_an_even_share_with_a_floor() {
        assert_eq!(fallback_rps(300.0, 3, 0.1), 100.0);
        assert_eq!(fallback_rps(1.0, 0, 0.1), 1.0);
        assert_eq!(fallback_rps(1.0, 100, 0.1), 0.01);
        // The floor is shared: a hundred processes at a site cut to 0.1 req/s send 0.1
        // req/s in all, not ten.
        assert!((fallback_rps(0.05, 100, 0.1) - 0.001).abs() < 1e-12);
    }
}
