//! Sitemaps in a crawl: the bodies come gzip'd without `Content-Encoding` (`.xml.gz`
//! served as `application/gzip`, which the exit leaves as it is), so they are
//! decompressed here, where the `flate2` dependency lives, before the core reads them.
//! A sitemap's redirect is not followed in its fetch: the core queues the target as a
//! sitemap of its own, and its hop goes through the exit that read the redirect, without
//! the configured credentials once the chain has left its first origin, as a page's.

use std::io::Read;
use std::sync::Arc;

use exitcrawl::discover::crawl::{Action, Failure};
use exitcrawl::discover::{normalize, sitemap};
use url::Url;

use super::state::{answer, failure, Chain};
use super::Driver;
use crate::messages::{FetchError, FetchResponse};

impl Driver<'_> {
    /// The sitemap `url`, reached by `chain`, answered `r`: if that is a redirect, the
    /// chain its target goes on with, should the core queue it.
    pub(super) fn sitemap_hop(&mut self, url: &Url, r: &FetchResponse, chain: Option<Chain>) {
        let Some(target) = r
            .redirect_target()
            .and_then(Result::ok)
            .and_then(|t| normalize(t.as_str()).ok())
        else {
            return;
        };
        let left = chain.is_some_and(|c| c.left_origin) || target.origin() != url.origin();
        let chain = Chain {
            exit: Some(Arc::clone(&r.exit)),
            left_origin: left,
        };
        self.sitemap_chains.insert(target.to_string(), chain);
    }

    /// A sitemap fetch completed: the core reads it (a 2xx body decompressed first).
    pub(super) fn on_sitemap(
        &mut self,
        url: &Url,
        result: &Result<FetchResponse, FetchError>,
    ) -> Vec<Action> {
        let unpacked;
        let read = match result {
            Err(e) => Err(failure(e)),
            Ok(r) if (200..300).contains(&r.status) => {
                match unpack(&r.body, self.opts.max_sitemap_bytes) {
                    Ok(b) => {
                        unpacked = b;
                        Ok(answer(r, &unpacked))
                    }
                    Err(why) => Err(Failure {
                        attempts: r.attempts,
                        private: false,
                        why,
                    }),
                }
            }
            Ok(r) => Ok(answer(r, &r.body)),
        };
        self.crawl.on_sitemap(url, read, crate::clock::now())
    }
}

/// The sitemap's text: a gzip'd body decompressed, at most `limit` bytes of it.
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
            "larger than the limit of {limit} bytes once decompressed (the sitemap protocol's 50 MB)"
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
