//! A proxy an exit sends through: `http://`, `socks5://` or `socks5h://`, with optional
//! credentials.
//!
//! Why a type of its own: the URL is parsed once, when the config is validated, so a typo
//! fails at start with the field named, never on the first fetch; and its `Display` masks
//! the password, so a proxy can be named in logs, metrics and records without leaking it.
//!
//! What each scheme means for the connection (carried out by the actors crate's connector):
//! - `http`: a TCP connection to the proxy, then `CONNECT host:port` (RFC 9110 §9.3.6) for
//!   every target, `https` and plain `http` alike, with `Proxy-Authorization: Basic` when the
//!   URL has credentials. The site then sees one tunnel per connection, as it would from a
//!   direct exit.
//! - `socks5`: SOCKS5 (RFC 1928) with username/password (RFC 1929) when the URL has
//!   credentials; the target's name is resolved here and its address sent to the proxy.
//! - `socks5h`: the same, but the name is sent and the proxy resolves it.

use std::fmt;

/// How the proxy is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProxyScheme {
    /// An HTTP proxy, tunnelled through with `CONNECT`.
    Http,
    /// SOCKS5, names resolved locally.
    Socks5,
    /// SOCKS5, names resolved by the proxy.
    Socks5h,
}

impl ProxyScheme {
    /// The scheme as written in a proxy URL.
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyScheme::Http => "http",
            ProxyScheme::Socks5 => "socks5",
            ProxyScheme::Socks5h => "socks5h",
        }
    }
}

/// A parsed proxy URL: `scheme://[user[:password]@]host:port`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ProxyUrl {
    /// How it is spoken to.
    pub scheme: ProxyScheme,
    /// Host name or address (an IPv6 literal without brackets).
    pub host: String,
    /// Port: given, or 80 for `http` and 1080 for SOCKS.
    pub port: u16,
    /// Username and password, percent-decoded. The password may be empty.
    pub credentials: Option<(String, String)>,
}

/// Why a proxy URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyUrlError {
    /// Not a URL at all.
    #[error("is not a URL ({0}); expected e.g. \"http://user:pass@10.0.0.5:3128\" or \"socks5h://10.0.0.5:1080\"")]
    Parse(String),
    /// A scheme other than the three supported.
    #[error(
        "has scheme \"{0}\"; expected http, socks5 or socks5h (https proxies are not supported)"
    )]
    Scheme(String),
    /// No host.
    #[error("has no host; expected e.g. \"http://10.0.0.5:3128\"")]
    NoHost,
    /// A path, query or fragment, which a proxy URL has no use for.
    #[error("has a path, query or fragment; a proxy URL is scheme://[user:pass@]host:port only")]
    Extra,
    /// Credentials that SOCKS5 cannot carry (RFC 1929: 1..=255 bytes each, password may be
    /// empty here).
    #[error("has a username or password longer than 255 bytes, which SOCKS5 cannot send")]
    TooLong,
}

impl std::str::FromStr for ProxyUrl {
    type Err = ProxyUrlError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let url = url::Url::parse(s).map_err(|e| ProxyUrlError::Parse(e.to_string()))?;
        let scheme = match url.scheme() {
            "http" => ProxyScheme::Http,
            "socks5" => ProxyScheme::Socks5,
            "socks5h" => ProxyScheme::Socks5h,
            other => return Err(ProxyUrlError::Scheme(other.to_owned())),
        };
        let host = match url.host() {
            Some(url::Host::Domain(d)) if !d.is_empty() => d.to_owned(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            _ => return Err(ProxyUrlError::NoHost),
        };
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(ProxyUrlError::Extra);
        }
        let port = url.port().unwrap_or(match scheme {
            ProxyScheme::Http => 80,
            ProxyScheme::Socks5 | ProxyScheme::Socks5h => 1080,
        });
        let credentials = if url.username().is_empty() && url.password().is_none() {
            None
        } else {
            let user = percent_decode(url.username());
            let pass = percent_decode(url.password().unwrap_or(""));
            if user.len() > 255 || pass.len() > 255 || user.is_empty() {
                return Err(ProxyUrlError::TooLong);
            }
            Some((user, pass))
        };
        Ok(ProxyUrl {
            scheme,
            host,
            port,
            credentials,
        })
    }
}

/// Percent-decoding of a URL's userinfo (`%40` → `@`), lossy for invalid UTF-8.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

impl ProxyUrl {
    /// `host:port` of the proxy, with an IPv6 literal in brackets.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL with its credentials, percent-encoded so that it parses back to `self`. For
    /// config only: show [`Display`](fmt::Display), which masks the password.
    pub fn to_url(&self) -> String {
        let mut out = format!("{}://", self.scheme.as_str());
        if let Some((user, pass)) = &self.credentials {
            out.push_str(&percent_encode(user));
            out.push(':');
            out.push_str(&percent_encode(pass));
            out.push('@');
        }
        out.push_str(&self.authority());
        out
    }

    /// The `Proxy-Authorization` value for an HTTP proxy (`Basic base64(user:pass)`, RFC
    /// 7617), when the URL has credentials.
    pub fn basic_auth(&self) -> Option<String> {
        let (user, pass) = self.credentials.as_ref()?;
        Some(format!(
            "Basic {}",
            base64(format!("{user}:{pass}").as_bytes())
        ))
    }
}

/// Userinfo percent-encoding: everything but RFC 3986's unreserved characters.
fn percent_encode(s: &str) -> String {
    const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, NOT_UNRESERVED).to_string()
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(input: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(input)
}

/// `scheme://user:***@host:port`: the password never shows.
impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme.as_str())?;
        if let Some((user, _)) = &self.credentials {
            write!(f, "{user}:***@")?;
        }
        f.write_str(&self.authority())
    }
}

/// As `Display`: a proxy URL in a debug print must not show its password either.
impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ProxyUrl, ProxyUrlError> {
        s.parse()
    }

    #[test]
    fn the_three_schemes_parse_with_their_default_ports() {
        let p = parse("http://10.0.0.5").unwrap();
        assert_eq!(
            (p.scheme, p.host.as_str(), p.port),
            (ProxyScheme::Http, "10.0.0.5", 80)
        );
        let p = parse("socks5://proxy.example:1081").unwrap();
        assert_eq!((p.scheme, p.port), (ProxyScheme::Socks5, 1081));
        let p = parse("socks5h://[::1]").unwrap();
        assert_eq!(
            (p.scheme, p.host.as_str(), p.port),
            (ProxyScheme::Socks5h, "::1", 1080)
        );
        assert_eq!(p.authority(), "[::1]:1080");
    }

    #[test]
    fn credentials_are_decoded_and_never_displayed() {
        let p = parse("http://us%40er:p%3Ass@127.0.0.1:3128/").unwrap();
        assert_eq!(p.credentials, Some(("us@er".to_owned(), "p:ss".to_owned())));
        assert_eq!(p.to_string(), "http://us@er:***@127.0.0.1:3128");
        assert!(!format!("{p:?}").contains("p:ss"));
        assert_eq!(parse(&p.to_url()).unwrap(), p);
        // RFC 7617's own example.
        let p = parse("http://Aladdin:open%20sesame@h:1").unwrap();
        assert_eq!(
            p.basic_auth().unwrap(),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }

    #[test]
    fn base64_pads_every_remainder() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn bad_urls_say_what_is_allowed() {
        assert!(matches!(parse("https://h:1"), Err(ProxyUrlError::Scheme(s)) if s == "https"));
        assert!(parse("10.0.0.5:3128").is_err());
        assert_eq!(parse("http://h:1/path"), Err(ProxyUrlError::Extra));
        assert_eq!(parse("socks5://h:1?x=1"), Err(ProxyUrlError::Extra));
        let long = "u".repeat(256);
        assert_eq!(
            parse(&format!("socks5://{long}:p@h")),
            Err(ProxyUrlError::TooLong)
        );
        assert!(parse("http://:pass@h:1").is_err());
        assert!(ProxyUrlError::Scheme("ftp".into())
            .to_string()
            .contains("http, socks5 or socks5h"));
    }
}
