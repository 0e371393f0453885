//! Generated pages: a site of any shape (interlinked HTML, robots.txt, several virtual hosts
//! on one port) without files, for [`SiteConfig::pages`](crate::SiteConfig::pages).

use std::sync::Arc;

use bytes::Bytes;

/// A page returned by a [`Pages`] generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
    /// `Location` header value, for redirects.
    pub location: Option<String>,
}

impl Page {
    /// A 200 `text/html; charset=utf-8` page.
    pub fn html(body: impl Into<Bytes>) -> Page {
        Page {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: body.into(),
            location: None,
        }
    }

    /// A 200 `text/plain` page (e.g. robots.txt).
    pub fn text(body: impl Into<Bytes>) -> Page {
        Page {
            status: 200,
            content_type: "text/plain",
            body: body.into(),
            location: None,
        }
    }

    /// A redirect (`status` 301, 302, 303, 307 or 308) to `location`, as given.
    pub fn redirect(status: u16, location: impl Into<String>) -> Page {
        Page {
            status,
            content_type: "text/plain",
            body: Bytes::from_static(b"moved"),
            location: Some(location.into()),
        }
    }
}

/// A page generator for [`SiteConfig::pages`](crate::SiteConfig::pages): called once per admitted request with the
/// request's `Host` header (e.g. `localhost:41234`; empty if absent) and its path with
/// query; `None` answers 404. Served in place of the fixed body, so a site of any shape
/// (interlinked HTML, robots.txt, several virtual hosts on one port) needs no files.
/// Compares equal only to clones of itself.
#[derive(Clone)]
#[allow(clippy::type_complexity)]
pub struct Pages(Arc<dyn Fn(&str, &str) -> Option<Page> + Send + Sync>);

impl Pages {
    /// Wrap a generator `f(host, path_and_query)`.
    pub fn new(f: impl Fn(&str, &str) -> Option<Page> + Send + Sync + 'static) -> Pages {
        Pages(Arc::new(f))
    }

    pub(crate) fn get(&self, host: &str, path_and_query: &str) -> Page {
        (self.0)(host, path_and_query).unwrap_or(Page {
            status: 404,
            content_type: "text/plain",
            body: Bytes::from_static(b"not found"),
            location: None,
        })
    }
}

impl std::fmt::Debug for Pages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pages(..)")
    }
}

impl PartialEq for Pages {
    fn eq(&self, other: &Pages) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Pages {}
