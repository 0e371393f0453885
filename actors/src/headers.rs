//! The headers of an answer ([`FetchResponse::headers`](crate::FetchResponse::headers)),
//! read as the `http` crate's names and values.
//!
//! Why a type of its own and not an `http::HeaderMap`: awc hands an answer's headers over
//! as actix-http's map (whose names and values are already the `http` crate's). Building
//! an `http::HeaderMap` from it for every answer measured 1,877 instructions per answer,
//! about 3 % of a fetch against a fast local site (docs/embedding.md, "Cost of the actor system"),
//! while most callers read a header or two. `Headers` keeps the map awc built and answers
//! in `http` types; [`Headers::into_http`] builds an `http::HeaderMap` for a caller that
//! needs one, and pays for it only then.

use std::fmt;

use awc::http::header::HeaderMap as WireMap;
use http::header::{HeaderName, HeaderValue};

/// Response headers: names and values are the [`http`] crate's (version 0.2, re-exported
/// as `exitcrawl_actors::http`). Names are case-insensitive; a name may have several
/// values ([`Headers::get_all`]).
#[derive(Clone, Default)]
pub struct Headers(WireMap);

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The first value of `name` (`"content-type"`, or `http::header::CONTENT_TYPE`).
    pub fn get(&self, name: impl AsRef<str>) -> Option<&HeaderValue> {
        self.0.get(name.as_ref())
    }

    /// Every value of `name`, in the order they came.
    pub fn get_all(&self, name: impl AsRef<str>) -> impl Iterator<Item = &HeaderValue> {
        self.0.get_all(name.as_ref())
    }

    /// Whether the answer carried `name`.
    pub fn contains_key(&self, name: impl AsRef<str>) -> bool {
        self.0.contains_key(name.as_ref())
    }

    /// Every (name, value) pair; a name with several values comes once per value.
    pub fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.0.iter()
    }

    /// Every name, once each.
    pub fn keys(&self) -> impl Iterator<Item = &HeaderName> {
        self.0.keys()
    }

    /// The number of values (a name with two values counts twice).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same headers as an `http::HeaderMap`.
    pub fn into_http(self) -> http::HeaderMap {
        self.0.into()
    }

    /// The map as awc built it.
    pub(crate) fn from_wire(map: WireMap) -> Self {
        Self(map)
    }
}

impl From<http::HeaderMap> for Headers {
    fn from(map: http::HeaderMap) -> Self {
        Self(map.into())
    }
}

impl From<Headers> for http::HeaderMap {
    fn from(h: Headers) -> Self {
        h.into_http()
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = (&'a HeaderName, &'a HeaderValue);
    type IntoIter = Box<dyn Iterator<Item = Self::Item> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Headers {
        let mut m = http::HeaderMap::new();
        m.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/html"),
        );
        m.append("set-cookie", HeaderValue::from_static("a=1"));
        m.append("set-cookie", HeaderValue::from_static("b=2"));
        Headers::from(m)
    }

    #[test]
    fn names_are_found_in_any_case_and_as_http_names() {
        let h = sample();
        assert_eq!(h.get("Content-Type").unwrap(), "text/html");
        assert_eq!(h.get(http::header::CONTENT_TYPE).unwrap(), "text/html");
        assert_eq!(h.get(&http::header::CONTENT_TYPE).unwrap(), "text/html");
        assert!(h.contains_key("set-cookie"));
        assert!(h.get("x-missing").is_none());
        assert!(!h.contains_key("not a header name"));
    }

    #[test]
    fn every_value_is_kept_in_order() {
        let h = sample();
        let cookies: Vec<_> = h.get_all("set-cookie").collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert_eq!(h.len(), 3);
        assert_eq!(h.keys().count(), 2);
        assert_eq!(h.iter().count(), 3);
        assert_eq!((&h).into_iter().count(), 3);
    }

    #[test]
    fn into_http_gives_the_same_headers() {
        let m = sample().into_http();
        assert_eq!(m.len(), 3);
        assert_eq!(m[http::header::CONTENT_TYPE], "text/html");
        let cookies: Vec<_> = m.get_all("set-cookie").iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert!(Headers::new().is_empty());
    }
}
