//! Sitemaps in a crawl: fetched once each through the crawler, decompressed when they
//! came gzip'd without `Content-Encoding`, read by `exitcrawl::discover::sitemap`, and
//! their URLs offered to the frontier like links (depth 0, the sitemap as parent).

use std::io::Read;
use std::time::Instant;

use exitcrawl::discover::sitemap::{self, may_list, SitemapKind};
use exitcrawl::discover::{normalize, Entry, RobotsState};
use exitcrawl::redact::Masked;
use futures_util::FutureExt;
use url::Url;

use super::state::Done;
use super::Crawl;
use crate::messages::{Fetch, FetchError, FetchResponse};

impl Crawl<'_> {
    /// Fetch the sitemap at `url` unless it was read already or the crawl's limit of
    /// sitemap files is reached. `from_public`: it was named by an answer from a public
    /// address (robots.txt, an index), so it may not lead to a private one.
    pub(super) fn fetch_sitemap(&mut self, url: Url, from_public: bool) {
        if !matches!(url.scheme(), "http" | "https") || !self.st.sitemaps.admit(&url) {
            return;
        }
        self.st.totals.sitemap_fetches += 1;
        let fetch = Fetch::get(url.as_str()).found_on_public(from_public);
        let handle = self.handle;
        self.in_flight.push(
            async move {
                Done::Sitemap {
                    result: handle.fetch(fetch).await,
                    url,
                }
            }
            .boxed_local(),
        );
    }

    /// The `Sitemap:` lines of `origin`'s robots.txt, as URLs.
    pub(super) fn robots_sitemaps(&mut self, origin: &str, now: Instant) -> Vec<Url> {
        match self.st.robots.lookup(origin, now) {
            RobotsState::Known(r) => r
                .sitemaps()
                .iter()
                .filter_map(|s| Url::parse(s).ok())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A sitemap fetch completed: its sitemaps are fetched, its pages offered.
    pub(super) fn on_sitemap(&mut self, url: Url, result: Result<FetchResponse, FetchError>) {
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                self.st.totals.requests += u64::from(e.attempts);
                return self.sitemap_failed(&url, &e.record_error());
            }
        };
        self.st.totals.requests += u64::from(r.attempts);
        if !(200..300).contains(&r.status) {
            return self.sitemap_failed(&url, &format!("answered {}", r.status));
        }
        let body = match unpack(&r.body, self.opts.max_sitemap_bytes) {
            Ok(b) => b,
            Err(why) => return self.sitemap_failed(&url, &why),
        };
        let map = match sitemap::parse(&body) {
            Ok(m) => m,
            Err(e) => return self.sitemap_failed(&url, &e.to_string()),
        };
        if let Some(why) = &map.error {
            tracing::warn!(sitemap = %Masked(url.as_str()), error = %why, kept = map.entries.len(), "sitemap: malformed; the entries before the fault are used");
        }
        // A sitemap speaks for the host it finally came from.
        let base = r
            .final_url
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
            .unwrap_or_else(|| url.clone());
        let from_public = r.peer_private == Some(false);
        for e in map.entries {
            if map.kind == SitemapKind::Index {
                match Url::parse(&e.loc) {
                    Ok(child) if may_list(&base, &child) => self.fetch_sitemap(child, from_public),
                    _ => self.st.totals.skipped_scope += 1,
                }
                continue;
            }
            let Ok(page) = normalize(&e.loc) else {
                self.st.totals.skipped_scope += 1;
                continue;
            };
            if !may_list(&base, &page) {
                self.st.totals.skipped_scope += 1;
                continue;
            }
            let key = page.to_string();
            let entry = Entry {
                url: page,
                depth: 0,
                parent: Some(url.clone()),
                from_public,
            };
            if self.st.offer(entry) {
                self.st.totals.sitemap_urls += 1;
                if let Some(lastmod) = e.lastmod {
                    self.st.lastmods.insert(key, lastmod);
                }
            }
        }
    }

    fn sitemap_failed(&mut self, url: &Url, why: &str) {
        self.st.totals.sitemap_errors += 1;
        tracing::warn!(sitemap = %Masked(url.as_str()), error = %why, "sitemap could not be read");
    }
}

/// The sitemap's text: a gzip'd body (`.xml.gz` served as `application/gzip`, which the
/// exit leaves as it is) decompressed, at most `limit` bytes of it.
fn unpack(body: &[u8], limit: u64) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if !sitemap::is_gzip(body) {
        return Ok(body.into());
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(body)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip: {e}"))?;
    if out.len() as u64 > limit {
        return Err(format!(
            "larger than the limit of {limit} bytes once decompressed (crawler.max_body_bytes)"
        ));
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_bodies_are_decompressed_within_the_limit() {
        assert_eq!(
            &*unpack(b"<urlset/>", 4).unwrap(),
            b"<urlset/>",
            "plain as is"
        );
        let packed = gz(b"<urlset/>");
        assert_eq!(&*unpack(&packed, 100).unwrap(), b"<urlset/>");
        let bomb = gz(&vec![b' '; 1 << 20]);
        let e = unpack(&bomb, 1000).unwrap_err();
        assert!(e.contains("limit of 1000 bytes"), "{e}");
        assert!(unpack(&[0x1f, 0x8b, 0, 1, 2], 100)
            .unwrap_err()
            .starts_with("gzip"));
    }
}
